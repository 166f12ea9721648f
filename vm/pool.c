/* The caching allocator (see pool.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "pool.h"

#define MIN_BLOCK 256
#define NCLASSES 256 /* four classes per power of two, 64 powers */

struct dvm_pool {
  pthread_mutex_t lock;
  const dvm_device *dev;
  dvm_pool_stats stats;
  uint64_t outstanding; /* storages handed out and not yet returned */
  int owner_gone;
  int poison; /* DVM_POISON set: fill each CPU block with 0xff when handed out */
  uint64_t invocation;         /* counted by dvm_pool_begin */
  dvm_storage *free[NCLASSES]; /* cached blocks, linked through ctx */
  dvm_storage *exact;          /* cached exact blocks, linked through ctx */
};

/* Exact requests in a row that a cached block over twice their size may
 * serve before it is given back for one of the size asked. */
#define OVERSIZED_RUN 16

/* Rounds size up to its class; returns the class index. */
static int size_class(size_t size, size_t *block) {
  if (size <= MIN_BLOCK) {
    *block = MIN_BLOCK;
    return 0;
  }
  int lg = 63 - __builtin_clzll((unsigned long long)(size - 1)); /* 2^lg < size <= 2^(lg+1) */
  size_t step = ((size_t)1 << lg) / 4;
  size_t rounded = (size + step - 1) / step * step;
  *block = rounded;
  return lg * 4 + (int)((rounded >> (lg - 2)) - 4);
}

dvm_status *dvm_pool_create(const dvm_device *dev, size_t limit, dvm_pool **out) {
  dvm_pool *p = calloc(1, sizeof *p);
  if (!p) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  pthread_mutex_init(&p->lock, NULL);
  p->dev = dev;
  p->stats.limit = limit;
  /* tests set it so that a kernel that leaves an output element unwritten
   * shows NaN or -1 instead of whatever the block held before */
  p->poison = dev->kind == DVM_DEVICE_CPU && getenv("DVM_POISON") != NULL;
  *out = p;
  return NULL;
}

/* Frees a cached block taken off its list; lock held. */
static void free_cached(dvm_pool *p, dvm_storage *s) {
  p->stats.cached -= s->block;
  p->dev->free(p->dev, s->ptr, s->block);
  free(s);
}

/* Frees the cached blocks; lock held. */
static void trim_locked(dvm_pool *p) {
  for (int c = 0; c < NCLASSES; c++) {
    while (p->free[c]) {
      dvm_storage *s = p->free[c];
      p->free[c] = s->ctx;
      free_cached(p, s);
    }
  }
  while (p->exact) {
    dvm_storage *s = p->exact;
    p->exact = s->ctx;
    free_cached(p, s);
  }
}

static void free_pool(dvm_pool *p) {
  pthread_mutex_destroy(&p->lock);
  free(p);
}

void dvm_pool_trim(dvm_pool *p) {
  pthread_mutex_lock(&p->lock);
  trim_locked(p);
  pthread_mutex_unlock(&p->lock);
}

void dvm_pool_destroy(dvm_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  trim_locked(p);
  p->owner_gone = 1;
  int last = p->outstanding == 0;
  pthread_mutex_unlock(&p->lock);
  if (last) free_pool(p);
}

/* On a miss, a CPU pool frees cached blocks, largest classes first, until
 * the cache and the new block fit in twice the peak in use: with shapes that vary
 * (a server batching sentences of every length), blocks of classes no
 * longer asked for would otherwise pile up (to 6x the peak for a BERT VM
 * fed random batch x length: docs/performance.md). It frees only blocks
 * that neither this invocation nor the one before used: a run whose
 * blocks over its course need more than twice its peak (nudenet: 7 MB of
 * classes for a 3.2 MB peak) otherwise freed and mapped again four blocks
 * each run, and paid their page faults in the kernels that first wrote
 * them. A CUDA pool keeps all: freeing there waits for the device. Lock
 * held. */
static void make_room_locked(dvm_pool *p, size_t block) {
  if (p->dev->kind != DVM_DEVICE_CPU) return;
  for (int c = NCLASSES - 1; c >= 0 && p->stats.cached && p->stats.cached + block > 2 * p->stats.peak; c--) {
    for (dvm_storage **l = &p->free[c]; *l && p->stats.cached + block > 2 * p->stats.peak;) {
      dvm_storage *s = *l;
      if (s->used + 1 >= p->invocation) {
        l = (dvm_storage **)&s->ctx;
        continue;
      }
      *l = s->ctx;
      free_cached(p, s);
    }
  }
}

void dvm_pool_begin(dvm_pool *p) {
  pthread_mutex_lock(&p->lock);
  p->invocation++;
  pthread_mutex_unlock(&p->lock);
}

static dvm_status *check_request(size_t size, size_t align) {
  if (align == 0 || (align & (align - 1)) || align > DVM_POOL_MAX_ALIGN)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "alignment %zu is not a power of two up to %d",
                          align, DVM_POOL_MAX_ALIGN);
  if (size > ((size_t)1 << 62))
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "allocation of %zu bytes is too large", size);
  return NULL;
}

/* A new block of `block` bytes from the device, within the limit; the
 * lock is held, and released on failure. */
static dvm_status *new_block(dvm_pool *p, size_t size, size_t block, dvm_storage **out) {
  uint64_t limit = p->stats.limit;
  if (limit && p->stats.in_use + p->stats.cached + block > limit) trim_locked(p);
  if (limit && p->stats.in_use + block > limit) {
    dvm_pool_stats now = p->stats;
    pthread_mutex_unlock(&p->lock);
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "%s pool limit of %llu bytes reached: %llu in use, %zu more asked",
                          p->dev->name, (unsigned long long)limit, (unsigned long long)now.in_use, size);
  }
  dvm_storage *s = calloc(1, sizeof *s);
  void *ptr = NULL;
  dvm_status *st = s ? p->dev->alloc(p->dev, block, &ptr) : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (st) {
    unsigned long long in_use = p->stats.in_use;
    pthread_mutex_unlock(&p->lock);
    free(s);
    if (dvm_status_code(st) != DVM_OUT_OF_MEMORY)
      return dvm_status_annotate(st, "allocating %zu bytes on %s", size, p->dev->name);
    dvm_status_free(st); /* the bare one: say how much, so the caller can say where */
    return dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory allocating %zu bytes on %s (%llu in use)", size,
                          p->dev->name, in_use);
  }
  s->ptr = ptr;
  s->block = block;
  s->device = (uint8_t)p->dev->kind;
  s->pool = p;
  p->stats.allocs++;
  *out = s;
  return NULL;
}

/* Counts s, cached or new, as handed out for `size` bytes; releases the lock. */
static void hand_out(dvm_pool *p, dvm_storage *s, size_t size, dvm_storage **out) {
  p->stats.in_use += s->block;
  if (p->stats.in_use > p->stats.peak) p->stats.peak = p->stats.in_use;
  p->stats.requested += size;
  p->stats.requested_total += size;
  if (p->stats.requested > p->stats.peak_requested) p->stats.peak_requested = p->stats.requested;
  p->outstanding++;
  s->used = p->invocation;
  pthread_mutex_unlock(&p->lock);
  atomic_init(&s->refs, 1);
  s->size = size;
  s->ctx = NULL;
  if (p->poison) memset(s->ptr, 0xff, s->block);
  *out = s;
}

dvm_status *dvm_pool_alloc(dvm_pool *p, size_t size, size_t align, dvm_storage **out) {
  dvm_status *st = check_request(size, align);
  if (st) return st;
  size_t block;
  int c = size_class(size, &block);
  pthread_mutex_lock(&p->lock);
  /* a miss takes a cached block up to three classes larger (under twice
   * the size): a run that needs more distinct classes than twice its peak
   * holds would otherwise free and remap the same blocks every time */
  int have = c;
  while (!p->free[have] && have < c + 3 && have + 1 < NCLASSES) have++;
  dvm_storage *s = p->free[have];
  if (s) {
    p->free[have] = s->ctx;
    p->stats.cached -= s->block;
    p->stats.reuses++;
  } else {
    make_room_locked(p, block);
    if ((st = new_block(p, size, block, &s))) return st;
  }
  hand_out(p, s, size, out);
  return NULL;
}

dvm_status *dvm_pool_alloc_exact(dvm_pool *p, size_t size, size_t align, dvm_storage **out) {
  dvm_status *st = check_request(size, align);
  if (st) return st;
  pthread_mutex_lock(&p->lock);
  dvm_storage **best = NULL;
  for (dvm_storage **l = &p->exact; *l && !(best && (*best)->block == size); l = (dvm_storage **)&(*l)->ctx)
    if ((*l)->block >= size && (!best || (*l)->block < (*best)->block)) best = l;
  dvm_storage *s = best ? *best : NULL;
  if (s && s->block / 2 > size && ++s->oversized >= OVERSIZED_RUN) { /* much smaller, for long: give it back */
    *best = s->ctx;
    free_cached(p, s);
    s = NULL;
  }
  if (s) {
    if (s->block / 2 <= size) s->oversized = 0;
    *best = s->ctx;
    p->stats.cached -= s->block;
    p->stats.reuses++;
  } else {
    /* cached blocks smaller than this one are outgrown: shapes grow, so
     * the new block is its size class, which the next few growths fit */
    size_t block = size;
    for (dvm_storage **l = &p->exact; *l;) {
      dvm_storage *small = *l;
      if (small->block >= size) {
        l = (dvm_storage **)&small->ctx;
        continue;
      }
      *l = small->ctx;
      free_cached(p, small);
      size_class(size, &block);
    }
    if ((st = new_block(p, size, block, &s))) return st;
    s->exact = true;
  }
  hand_out(p, s, size, out);
  return NULL;
}

void dvm_pool_return(dvm_storage *s) {
  dvm_pool *p = s->pool;
  size_t block;
  int c = size_class(s->block, &block);
  pthread_mutex_lock(&p->lock);
  p->stats.in_use -= s->block;
  p->stats.requested -= s->size;
  p->outstanding--;
  if (p->owner_gone) {
    p->dev->free(p->dev, s->ptr, s->block);
    free(s);
  } else {
    dvm_storage **list = s->exact ? &p->exact : &p->free[c];
    s->ctx = *list;
    *list = s;
    p->stats.cached += s->block;
  }
  int last = p->owner_gone && p->outstanding == 0;
  pthread_mutex_unlock(&p->lock);
  if (last) free_pool(p);
}

void dvm_pool_get_stats(dvm_pool *p, dvm_pool_stats *out) {
  pthread_mutex_lock(&p->lock);
  *out = p->stats;
  pthread_mutex_unlock(&p->lock);
}
