/* The kernels' thread pool (par.h). One pool per process, its workers
 * started on first need and kept; one loop at a time: a loop that finds
 * the pool taken by another thread's loop runs on its caller alone. */
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "ops/cpu/par.h"

#define MAX_WORKERS 255
#define CHUNKS_PER_THREAD 4 /* more chunks than threads: who is there takes them */
#define SPIN_NS 50000       /* a worker polls this long for the next loop, then sleeps */

typedef struct loop {
  dvm_par_fn fn;
  void *ctx;
  int64_t n, chunk, nchunks;
  atomic_llong next; /* the next chunk to claim */
  atomic_llong done; /* chunks finished */
} loop;

static struct {
  pthread_mutex_t mu; /* guards what follows but gen and cur's counters */
  pthread_cond_t wake, idle;
  pthread_mutex_t owner; /* held by the thread whose loop has the pool */
  atomic_ullong gen;     /* bumped for each loop */
  loop cur;
  bool live;        /* cur takes joiners */
  int want, joined; /* workers cur wants, and has had */
  int refs;         /* workers inside cur */
  int sleepers;
  int nworkers;
} P = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER,
       .owner = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int slot;
static _Thread_local bool inside; /* in a loop (a worker always is) */

int dvm_par_slot(void) { return slot; }

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void run_chunks(loop *l) {
  for (int64_t c; (c = atomic_fetch_add_explicit(&l->next, 1, memory_order_relaxed)) < l->nchunks;) {
    int64_t s = c * l->chunk, e = s + l->chunk < l->n ? s + l->chunk : l->n;
    l->fn(l->ctx, s, e);
    atomic_fetch_add_explicit(&l->done, 1, memory_order_release);
  }
}

static void *worker(void *arg) {
  (void)arg;
  inside = true;
  omp_set_num_threads(1); /* oneDNN called from a chunk stays on this thread */
  unsigned long long seen = atomic_load(&P.gen);
  for (;;) {
    int64_t until = now_ns() + SPIN_NS;
    for (int i = 0; atomic_load_explicit(&P.gen, memory_order_relaxed) == seen; i++) {
      if ((i & 63) == 63 && now_ns() > until) break;
      relax();
    }
    pthread_mutex_lock(&P.mu);
    while (atomic_load(&P.gen) == seen) {
      P.sleepers++;
      pthread_cond_wait(&P.wake, &P.mu);
      P.sleepers--;
    }
    seen = atomic_load(&P.gen);
    if (!P.live || P.joined >= P.want) { /* too late, or not needed */
      pthread_mutex_unlock(&P.mu);
      continue;
    }
    slot = ++P.joined;
    P.refs++;
    pthread_mutex_unlock(&P.mu);
    run_chunks(&P.cur);
    pthread_mutex_lock(&P.mu);
    if (--P.refs == 0) pthread_cond_signal(&P.idle);
    pthread_mutex_unlock(&P.mu);
  }
  return NULL;
}

/* A child of fork has none of the workers: it starts its own. */
static void after_fork_child(void) {
  pthread_mutex_init(&P.mu, NULL);
  pthread_mutex_init(&P.owner, NULL);
  pthread_cond_init(&P.wake, NULL);
  pthread_cond_init(&P.idle, NULL);
  P.live = false;
  P.refs = P.sleepers = P.nworkers = 0;
  inside = false;
  slot = 0;
}

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, after_fork_child); }

/* Up to n workers (P.mu held); fewer if threads cannot be made: the
 * loops then run on fewer threads, never wrongly. */
static void start_workers(int n) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, install_fork_handler);
  while (P.nworkers < n) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int bad = pthread_create(&t, &attr, worker, NULL);
    pthread_attr_destroy(&attr);
    if (bad) break;
    P.nworkers++;
  }
}

void dvm_par_for(int threads, int64_t n, int64_t align, dvm_par_fn fn, void *ctx) {
  if (n <= 0) return;
  if (align < 1) align = 1;
  int64_t units = (n + align - 1) / align;
  if (threads > MAX_WORKERS + 1) threads = MAX_WORKERS + 1;
  if (threads > units) threads = (int)units;
  if (threads <= 1 || inside || pthread_mutex_trylock(&P.owner) != 0) {
    fn(ctx, 0, n);
    return;
  }
  int64_t nchunks = units < (int64_t)threads * CHUNKS_PER_THREAD ? units : (int64_t)threads * CHUNKS_PER_THREAD;
  int64_t chunk = (units + nchunks - 1) / nchunks * align;
  pthread_mutex_lock(&P.mu);
  while (P.refs > 0) pthread_cond_wait(&P.idle, &P.mu); /* stragglers of the last loop */
  start_workers(threads - 1);
  P.cur.fn = fn;
  P.cur.ctx = ctx;
  P.cur.n = n;
  P.cur.chunk = chunk;
  P.cur.nchunks = (n + chunk - 1) / chunk;
  atomic_store(&P.cur.next, 0);
  atomic_store(&P.cur.done, 0);
  P.live = true;
  P.want = threads - 1;
  P.joined = 0;
  atomic_fetch_add(&P.gen, 1);
  if (P.sleepers) pthread_cond_broadcast(&P.wake);
  pthread_mutex_unlock(&P.mu);

  inside = true;
  run_chunks(&P.cur);
  inside = false;
  /* only chunks that others claimed, and so are running, are left */
  for (int i = 0; atomic_load_explicit(&P.cur.done, memory_order_acquire) < P.cur.nchunks; i++)
    if (i < 4096) relax();
    else sched_yield();
  pthread_mutex_lock(&P.mu);
  P.live = false;
  pthread_mutex_unlock(&P.mu);
  pthread_mutex_unlock(&P.owner);
}
