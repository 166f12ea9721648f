/* Linked only into the test build of the extension dvm._dvm that
 * test_oom_sweep.py imports (tests/python/meson.build): the allocation
 * failure injection of tests/oom.h for the extension's own objects (the
 * extension, libdvm and the compiler, linked statically), armed from Python
 * with ctypes around one call, and a record of the blocks they hold, so
 * that a failed call that leaves one behind is seen without a leak checker
 * (CPython's own allocations would drown one). CPython's, NumPy's and the
 * shared libraries' allocations are neither failed nor recorded. */
#include <pthread.h>
#include <stdint.h>

#define OOM_OWN_WRAPPERS
#include "oom.h"

void __real_free(void *p);
void __wrap_free(void *p);

/* The live blocks: an open-addressing set of addresses (0: empty, 1: a
 * removed entry), grown at three quarters full, under one lock (a run's
 * kernel threads may allocate at once). */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *live;
static size_t live_cap, live_used, live_count;

static size_t slot_of(uintptr_t p, size_t cap) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15u) & (cap - 1); }

static void live_put(uintptr_t *set, size_t cap, uintptr_t p) {
  size_t i = slot_of(p, cap);
  while (set[i] > 1) i = (i + 1) & (cap - 1);
  set[i] = p;
}

static void live_add(void *p) {
  if (!p) return;
  pthread_mutex_lock(&live_mu);
  if ((live_used + 1) * 4 > live_cap * 3) { /* rebuilt without the removed entries */
    size_t cap = live_cap ? live_cap : 1024;
    while ((live_count + 1) * 2 > cap) cap *= 2;
    uintptr_t *set = __real_calloc(cap, sizeof *set);
    if (!set) abort(); /* the test's own bookkeeping, not the code under test */
    for (size_t i = 0; i < live_cap; i++)
      if (live[i] > 1) live_put(set, cap, live[i]);
    __real_free(live);
    live = set;
    live_cap = cap;
    live_used = live_count;
  }
  live_put(live, live_cap, (uintptr_t)p);
  live_used++;
  live_count++;
  pthread_mutex_unlock(&live_mu);
}

static void live_remove(void *p) {
  if (!p) return;
  pthread_mutex_lock(&live_mu);
  for (size_t i = live_cap ? slot_of((uintptr_t)p, live_cap) : 0; live_cap && live[i]; i = (i + 1) & (live_cap - 1))
    if (live[i] == (uintptr_t)p) {
      live[i] = 1;
      live_count--;
      break;
    }
  pthread_mutex_unlock(&live_mu);
}

void __wrap_free(void *p) {
  live_remove(p); /* a block of libc's or another library's is not in the set */
  __real_free(p);
}

/* The allocators of tests/oom.h, recorded. */
void *__wrap_malloc(size_t n) {
  void *p = oom_fails() ? NULL : __real_malloc(n);
  live_add(p);
  return p;
}
void *__wrap_calloc(size_t k, size_t n) {
  void *p = oom_fails() ? NULL : __real_calloc(k, n);
  live_add(p);
  return p;
}
void *__wrap_realloc(void *p, size_t n) {
  if (oom_fails()) return NULL;
  void *q = __real_realloc(p, n);
  if (q || !n) live_remove(p);
  live_add(q);
  return q;
}
void *__wrap_aligned_alloc(size_t a, size_t n) {
  void *p = oom_fails() ? NULL : __real_aligned_alloc(a, n);
  live_add(p);
  return p;
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
  int rc = oom_fails() ? ENOMEM : __real_posix_memalign(p, a, n);
  if (rc == 0) live_add(*p);
  return rc;
}

/* From Python (ctypes): arm so that the k-th allocation from now fails;
 * disarm, returning how many allocations were made while armed; the
 * number of blocks held now. */
void dvm_oom_arm(long k);
long dvm_oom_disarm(void);
long dvm_oom_live(void);
__attribute__((visibility("default"))) void dvm_oom_arm(long k) {
  oom_counted = 0;
  oom_fail_at = k;
}
__attribute__((visibility("default"))) long dvm_oom_disarm(void) {
  oom_fail_at = 0;
  return oom_counted;
}
__attribute__((visibility("default"))) long dvm_oom_live(void) {
  pthread_mutex_lock(&live_mu);
  long n = (long)live_count;
  pthread_mutex_unlock(&live_mu);
  return n;
}
