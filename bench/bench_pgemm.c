/* GFLOP/s of the packed-B GEMM (ops/cpu/pgemm.h) next to dnnl_sgemm on the
 * plain B, in one process, on one shape or a list of them.
 *
 * Per shape and side: --iters timed calls after a few warm-ups, the median
 * and the best; at one thread the time is the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: both sides run on it), which leaves out the
 * time other processes hold the core on a loaded machine, else wall time; the two sides alternate for --rounds rounds (on a shared
 * machine the lowest median counts) and every pgemm result is compared to
 * sgemm's (largest difference relative to the largest magnitude).
 *
 * --cold: each call reads one of several copies of B (packed and plain)
 * in turn, together over 96 MB, so that B comes from memory as a model's
 * weights do (a model's weights outgrow the caches) rather than from a
 * cache warm from the last call.
 *
 * Usage: bench_pgemm [--quick] [--cold] [--threads N] [--iters N] [--rounds N] [MxKxN ...]
 *   default shapes: BERT-base's products at 8-1024 tokens and the MLP's.
 *   --threads: pgemm's threads (the kernels' pool); sgemm runs on 1. */
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ops/cpu/pgemm.h"

static float uniform(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return (float)(*s >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static double clock_s(int threads) {
  struct timespec ts;
  if (threads > 1) return now();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

typedef struct shape {
  int64_t m, k, n;
} shape;

/* Median and best of `iters` calls of the side `which` (0 pgemm, 1 sgemm). */
static void timed(int which, const shape *s, dvm_pgemm_b *const *pbs, float *const *bs, int copies,
                  const float *a, float *c, int threads, int iters, double *med, double *best) {
  double *t = malloc(sizeof(double) * (size_t)iters);
  for (int it = -2; it < iters; it++) {
    const dvm_pgemm_b *pb = pbs[(it + 2) % copies];
    const float *b = bs[(it + 2) % copies];
    double t0 = clock_s(threads);
    if (which == 0)
      dvm_pgemm_run(pb, s->m, a, s->k, 1, 1, 0, c, s->n, threads, NULL);
    else
      dnnl_sgemm('N', 'N', s->m, s->n, s->k, 1, a, s->k, b, s->n, 0, c, s->n);
    if (it >= 0) t[it] = clock_s(threads) - t0;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp);
  *med = t[iters / 2], *best = t[0];
  free(t);
}

int main(int argc, char **argv) {
  int threads = 1, iters = 50, rounds = 3, quick = 0, cold = 0, nshapes = 0;
  shape shapes[64];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--cold"))
      cold = 1;
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (nshapes < 64 && sscanf(argv[i], "%ldx%ldx%ld", &shapes[nshapes].m, &shapes[nshapes].k,
                                    &shapes[nshapes].n) == 3)
      nshapes++;
    else {
      fprintf(stderr, "usage: bench_pgemm [--quick] [--threads N] [--iters N] [--rounds N] [MxKxN ...]\n");
      return 2;
    }
  }
  if (quick) {
    shapes[0] = (shape){13, 1024, 70};
    nshapes = 1, iters = 1, rounds = 1;
  }
  if (!nshapes) {
    static const int64_t ms[] = {1, 8, 32, 128, 384, 1024}, kn[][2] = {{768, 768}, {768, 3072}, {3072, 768}};
    for (int i = 0; i < 6; i++)
      for (int j = 0; j < 3; j++) shapes[nshapes++] = (shape){ms[i], kn[j][0], kn[j][1]};
    for (int i = 0; i < 3; i++) shapes[nshapes++] = (shape){(int64_t[]){1, 64, 1024}[i], 1024, 1024};
  }
  if (iters < 1) iters = 1;
  omp_set_num_threads(1); /* sgemm single-threaded, as matmul.c runs it */
  printf("%-16s %3s %12s %12s %9s %9s %8s %9s\n", "MxKxN", "thr", "pgemm ms", "sgemm ms", "pgemm GF",
         "sgemm GF", "pg/sg", "max diff");
  uint64_t seed = 1;
  for (int si = 0; si < nshapes; si++) {
    const shape *s = &shapes[si];
    float *a = malloc(sizeof(float) * (size_t)(s->m * s->k));
    float *c = malloc(sizeof(float) * (size_t)(s->m * s->n)), *r = malloc(sizeof(float) * (size_t)(s->m * s->n));
    for (int64_t i = 0; i < s->m * s->k; i++) a[i] = uniform(&seed);
    int64_t bbytes = 8 * s->k * s->n; /* plain and packed */
    int copies = cold ? (int)((96 << 20) / bbytes + 1) : 1;
    if (copies > 64) copies = 64;
    float *bs[64];
    dvm_pgemm_b *pbs[64];
    for (int q = 0; q < copies; q++) {
      bs[q] = malloc(sizeof(float) * (size_t)(s->k * s->n));
      for (int64_t i = 0; i < s->k * s->n; i++) bs[q][i] = q ? bs[0][i] : uniform(&seed);
      if (!(pbs[q] = dvm_pgemm_pack(bs[q], s->k, s->n, s->n, 1))) {
        fprintf(stderr, "bench_pgemm: no packed path on this CPU\n");
        return quick ? 0 : 1;
      }
    }
    double pm = INFINITY, sm = INFINITY, pbest = INFINITY, sbest = INFINITY, med, best;
    for (int rd = 0; rd < rounds; rd++) {
      timed(0, s, pbs, bs, copies, a, c, threads, iters, &med, &best);
      pm = fmin(pm, med), pbest = fmin(pbest, best);
      timed(1, s, pbs, bs, copies, a, r, threads, iters, &med, &best);
      sm = fmin(sm, med), sbest = fmin(sbest, best);
    }
    double diff = 0, mag = 0;
    for (int64_t i = 0; i < s->m * s->n; i++) diff = fmax(diff, fabs(c[i] - r[i])), mag = fmax(mag, fabs(r[i]));
    double flop = 2.0 * (double)s->m * (double)s->k * (double)s->n;
    char name[48];
    snprintf(name, sizeof name, "%ldx%ldx%ld", s->m, s->k, s->n);
    printf("%-16s %3d %12.4f %12.4f %9.1f %9.1f %8.2f %9.1e\n", name, threads, pm * 1e3, sm * 1e3,
           flop / pm * 1e-9, flop / sm * 1e-9, pm / sm, diff / (mag > 0 ? mag : 1));
    fflush(stdout);
    if (diff > 1e-5 * (mag > 0 ? mag : 1)) return 1;
    for (int q = 0; q < copies; q++) dvm_pgemm_free(pbs[q]), free(bs[q]);
    free(a), free(c), free(r);
  }
  return 0;
}
