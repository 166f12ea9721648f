/* The kernels' thread pool (ops/cpu/par.h): every index of a loop is
 * covered exactly once, ranges keep their alignment, slots stay below the
 * thread count, and loops from several threads at once, nested loops and a
 * forked child all finish with the same coverage. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ops/cpu/par.h"

#define MAX_N 100003

typedef struct cover {
  atomic_int hits[MAX_N];
  int64_t align;
  int threads;
  atomic_int bad_align, bad_slot;
  int nested; /* each range runs a small loop of its own */
} cover;

static void inner(void *ctx, int64_t s, int64_t e) {
  atomic_int *sum = ctx;
  atomic_fetch_add(sum, (int)(e - s));
}

static void mark(void *ctx, int64_t s, int64_t e) {
  cover *c = ctx;
  if (s % c->align != 0) atomic_fetch_add(&c->bad_align, 1);
  int slot = dvm_par_slot();
  if (slot < 0 || slot >= (c->threads > 1 ? c->threads : 1)) atomic_fetch_add(&c->bad_slot, 1);
  for (int64_t i = s; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
  if (c->nested) {
    atomic_int sum = 0;
    dvm_par_for(c->threads, 7, 1, inner, &sum); /* runs on this thread */
    if (atomic_load(&sum) != 7) atomic_fetch_add(&c->bad_align, 1);
  }
}

/* Runs one loop and checks it; returns the failures. */
static int one(cover *c, int threads, int64_t n, int64_t align, int nested) {
  for (int64_t i = 0; i < n; i++) atomic_store(&c->hits[i], 0);
  c->align = align;
  c->threads = threads;
  c->nested = nested;
  atomic_store(&c->bad_align, 0);
  atomic_store(&c->bad_slot, 0);
  dvm_par_for(threads, n, align, mark, c);
  int bad = atomic_load(&c->bad_align) + atomic_load(&c->bad_slot);
  for (int64_t i = 0; i < n; i++) bad += atomic_load(&c->hits[i]) != 1;
  if (bad) fprintf(stderr, "threads %d n %lld align %lld nested %d: %d bad\n", threads, (long long)n,
                   (long long)align, nested, bad);
  return bad;
}

static void *caller(void *arg) {
  cover *c = malloc(sizeof *c);
  intptr_t bad = 0;
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int r = 0; c && r < 200; r++) {
    int64_t n = rand_r(&seed) % 5000;
    bad += one(c, 1 + rand_r(&seed) % 4, n, 1 + rand_r(&seed) % 70, r % 5 == 0);
  }
  free(c);
  return (void *)bad;
}

int main(void) {
  static cover c;
  static const int64_t sizes[] = {0, 1, 2, 3, 7, 63, 64, 65, 127, 1021, 4096, 65537, MAX_N};
  static const int64_t aligns[] = {1, 3, 64};
  for (int t = 1; t <= 8; t++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
      for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) CHECK(one(&c, t, sizes[i], aligns[a], 0) == 0);
  CHECK(one(&c, 4, 1000, 1, 1) == 0);
  CHECK(dvm_par_slot() == 0);
  /* many quick loops: workers that come late find nothing to do */
  for (int r = 0; r < 2000; r++) CHECK(one(&c, 2, 97, 1, 0) == 0);

  /* loops from 6 threads at once: one has the pool, the others run alone */
  pthread_t th[6];
  for (int i = 0; i < 6; i++) CHECK(pthread_create(&th[i], NULL, caller, (void *)(intptr_t)(i + 1)) == 0);
  for (int i = 0; i < 6; i++) {
    void *bad;
    pthread_join(th[i], &bad);
    CHECK(bad == NULL);
  }

  /* a forked child starts workers of its own */
  pid_t pid = fork();
  if (pid == 0) _exit(one(&c, 3, 65537, 64, 0) == 0 && one(&c, 3, 1000, 1, 1) == 0 ? 0 : 1);
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return harness_finish("par");
}
