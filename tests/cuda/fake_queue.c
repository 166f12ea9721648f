/* The stand-in driver's streams (fake.h): copies, memsets, kernel
 * launches, cuBLAS products and event records are queued per stream and
 * run only when the host waits for them (a stream or context
 * synchronization, an event wait), as late as a device may run them, so
 * work the host reads without waiting is not yet there: a missing wait
 * shows up as a wrong answer (poisoned memory) rather than by luck. A
 * failure is sticky, as on a device: every later wait returns it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

enum { COPY, SET, LAUNCH, GEMM, EVENT };

typedef struct op {
  int kind;
  void *dst;
  const void *src;
  size_t n;
  unsigned value;
  int width;
  const fake_function *f;
  unsigned grid[3], block[3];
  dvm_gen_params *params;
  fake_gemm g;
  fake_event *e;
} op;

struct fake_stream {
  op *ops;
  size_t n, cap;
  fake_stream *next;
};

struct fake_event {
  int pending;
  fake_stream *s;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* one stream runs at a time: device memory is open while it does */
static pthread_mutex_t running = PTHREAD_MUTEX_INITIALIZER;
static fake_stream *streams;
static fake_stream context_stream;
static int context_listed;
static CUresult sticky;
static unsigned long long launches;
int fake_kernels_run;

static void list(fake_stream *s) {
  pthread_mutex_lock(&lock);
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&lock);
}

fake_stream *fake_stream_new(void) {
  fake_stream *s = calloc(1, sizeof *s);
  if (s) list(s);
  return s;
}

fake_stream *fake_stream_of(void *handle) {
  if (handle) return handle;
  pthread_mutex_lock(&lock);
  int listed = context_listed;
  context_listed = 1;
  pthread_mutex_unlock(&lock);
  if (!listed) list(&context_stream);
  return &context_stream;
}

void fake_stream_free(fake_stream *s) {
  (void)fake_stream_run(s); /* the driver lets queued work finish */
  pthread_mutex_lock(&lock);
  for (fake_stream **q = &streams; *q; q = &(*q)->next)
    if (*q == s) {
      *q = s->next;
      break;
    }
  pthread_mutex_unlock(&lock);
  free(s->ops);
  free(s);
}

static CUresult push(fake_stream *s, const op *o) {
  if (s->n == s->cap) {
    size_t c = s->cap ? 2 * s->cap : 64;
    op *ops = realloc(s->ops, c * sizeof *ops);
    if (!ops) return FAKE_OUT_OF_MEMORY;
    s->ops = ops, s->cap = c;
  }
  s->ops[s->n++] = *o;
  return 0;
}

CUresult fake_enqueue_copy(fake_stream *s, void *dst, const void *src, size_t n) {
  return push(s, &(op){.kind = COPY, .dst = dst, .src = src, .n = n});
}

CUresult fake_enqueue_set(fake_stream *s, fake_ptr dst, unsigned value, int width, size_t n) {
  return push(s, &(op){.kind = SET, .dst = (void *)(uintptr_t)dst, .value = value, .width = width, .n = n});
}

CUresult fake_enqueue_launch(fake_stream *s, const fake_function *f, const unsigned *grid,
                             const unsigned *block, const dvm_gen_params *p) {
  /* a kernel reads and writes device memory only */
  for (int i = 0; i < DVM_GEN_MAX_IN + DVM_GEN_MAX_OUT; i++)
    if (p->ptr[i] && !fake_mem_inside((fake_ptr)(uintptr_t)p->ptr[i], 1)) {
      fprintf(stderr, "fake_cuda: %s: parameter pointer %d (%p) is not device memory\n", f->name, i, p->ptr[i]);
      return FAKE_INVALID_VALUE;
    }
  op o = {.kind = LAUNCH, .f = f, .params = malloc(sizeof *p)};
  if (!o.params) return FAKE_OUT_OF_MEMORY;
  memcpy(o.params, p, sizeof *p); /* parameters are copied at the launch */
  memcpy(o.grid, grid, sizeof o.grid);
  memcpy(o.block, block, sizeof o.block);
  CUresult r = push(s, &o);
  if (r) free(o.params);
  return r;
}

CUresult fake_enqueue_gemm(fake_stream *s, const fake_gemm *g) {
  return push(s, &(op){.kind = GEMM, .g = *g});
}

CUresult fake_enqueue_event(fake_stream *s, fake_event *e) {
  e->pending = 1, e->s = s;
  return push(s, &(op){.kind = EVENT, .e = e});
}

/* Column-major C = alpha op(A) op(B) + beta C, in f32 with f64 sums. */
static void gemm(const fake_gemm *g) {
  for (int p = 0; p < g->batch; p++) {
    const float *A = (const float *)(uintptr_t)g->a + p * g->sa, *B = (const float *)(uintptr_t)g->b + p * g->sb;
    float *C = (float *)(uintptr_t)g->c + p * g->sc;
    for (int j = 0; j < g->n; j++)
      for (int i = 0; i < g->m; i++) {
        double acc = 0;
        for (int l = 0; l < g->k; l++)
          acc += (double)(g->ta ? A[l + i * g->lda] : A[i + l * g->lda]) *
                 (g->tb ? B[j + l * g->ldb] : B[l + j * g->ldb]);
        C[i + j * g->ldc] = (float)(g->alpha * acc + (g->beta != 0 ? g->beta * C[i + j * g->ldc] : 0));
      }
  }
}

/* FAKE_CUDA_TRACE=PATH: one line per kernel run, "entry grid block n",
 * for tests that want to know which variants ran */
static void trace(const op *o) {
  const char *path = getenv("FAKE_CUDA_TRACE");
  FILE *f = path && *path ? fopen(path, "a") : NULL;
  if (!f) return;
  fprintf(f, "%s %ux%ux%u %ux%ux%u %lld\n", o->f->name, o->grid[0], o->grid[1], o->grid[2], o->block[0],
          o->block[1], o->block[2], o->params->n);
  fclose(f);
}

static void run(op *o) {
  switch (o->kind) {
  case COPY: memcpy(o->dst, o->src, o->n); break;
  case SET:
    for (size_t i = 0; i < o->n; i++)
      if (o->width == 2) ((unsigned short *)o->dst)[i] = (unsigned short)o->value;
      else ((unsigned *)o->dst)[i] = o->value;
    break;
  case GEMM: gemm(&o->g); break;
  case EVENT:
    if (o->e) o->e->pending = 0;
    break;
  case LAUNCH:
    if (o->f->kernel) {
      /* the schedules in turn: lowest thread first, highest, random */
      int rc = fake_module_run(o->f, o->grid, o->block, (int)(launches % 3), launches, o->params);
      trace(o);
      launches++;
      fake_kernels_run++;
      if (rc) {
        fprintf(stderr, "fake_cuda: %s: the emulation reports %d (shim.h: 1 bad shuffle, 2 diverged, 3 bad launch)\n",
                o->f->name, rc);
        if (!sticky) sticky = FAKE_LAUNCH_FAILED;
      }
      if (fake_mem_check_zones() && !sticky) sticky = FAKE_ILLEGAL_ADDRESS;
    }
    free(o->params);
    break;
  }
}

CUresult fake_stream_run(fake_stream *s) {
  pthread_mutex_lock(&running);
  if (s->n) {
    fake_mem_open(1);
    for (size_t i = 0; i < s->n; i++) run(&s->ops[i]);
    fake_mem_open(0);
    s->n = 0;
  }
  CUresult r = sticky;
  pthread_mutex_unlock(&running);
  return r;
}

CUresult fake_run_all(void) {
  pthread_mutex_lock(&lock);
  fake_stream *all[256];
  int n = 0;
  for (fake_stream *s = streams; s && n < 256; s = s->next) all[n++] = s;
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < n; i++) (void)fake_stream_run(all[i]);
  return sticky;
}

fake_event *fake_event_new(void) { return calloc(1, sizeof(fake_event)); }

void fake_event_free(fake_event *e) {
  /* a record still queued forgets it */
  pthread_mutex_lock(&lock);
  for (fake_stream *s = streams; s && e->pending; s = s->next)
    for (size_t i = 0; i < s->n; i++)
      if (s->ops[i].kind == EVENT && s->ops[i].e == e) s->ops[i].e = NULL;
  pthread_mutex_unlock(&lock);
  free(e);
}

CUresult fake_event_wait(fake_event *e) { return e->pending ? fake_stream_run(e->s) : sticky; }
