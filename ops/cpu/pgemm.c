/* The packed-B GEMM for few rows (pgemm.h): matmul and gemm with a
 * constant B, packed once when the module is linked.
 *
 * Layout: B's columns cut into panels of NR = 16; panel p holds, for each
 * l in [0, k), the 16 floats B[l, 16p .. 16p + 16) (the last panel padded
 * with zeros), so the microkernel streams one panel front to back. It
 * keeps an r x 16 block of C (r <= MR = 6) in 2r of the 16 ymm registers
 * and, per l, broadcasts r values of A against two vectors of the panel.
 * Rows are cut into blocks of nearly equal size (8 rows: 4 + 4, not 6 + 2,
 * so no block wastes most of its loads); threads take whole panels, and
 * run all row blocks of a panel while it is in their cache.
 *
 * Why: dnnl_sgemm packs B on every call, which at M = 8 costs more than
 * the product; ONNX Runtime packs constant weights at load. AVX2 and FMA
 * only (the machines here); elsewhere pack declines and callers keep
 * sgemm. Sums run in order over l with FMA, so results differ from
 * sgemm's in the last bits, as sgemm's differ between its own paths. */
#include "ops/cpu/pgemm.h"

#include <stdlib.h>
#include <string.h>

#include "object.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/vec.h"

#define NR 16
#define MR 6

struct dvm_pgemm_b {
  int64_t k, n, panels;
  float *data; /* panels * k * NR floats, 64-byte aligned */
};

int64_t dvm_pgemm_k(const dvm_pgemm_b *pb) { return pb->k; }
int64_t dvm_pgemm_n(const dvm_pgemm_b *pb) { return pb->n; }

void dvm_pgemm_free(void *p) {
  dvm_pgemm_b *pb = p;
  if (pb) free(pb->data);
  free(pb);
}

#if DVM_EW_X86
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))

dvm_pgemm_b *dvm_pgemm_pack(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn) {
  __builtin_cpu_init();
  if (k <= 0 || n <= 0 || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return NULL;
  dvm_pgemm_b *pb = malloc(sizeof *pb);
  int64_t panels = (n + NR - 1) / NR;
  size_t bytes;
  if (!pb || dvm_mul_overflows((size_t)(panels * NR), (size_t)k * sizeof(float), &bytes) ||
      !(pb->data = aligned_alloc(64, (bytes + 63) & ~(size_t)63))) {
    free(pb);
    return NULL;
  }
  pb->k = k;
  pb->n = n;
  pb->panels = panels;
  for (int64_t p = 0; p < panels; p++) {
    float *dst = pb->data + p * k * NR;
    int64_t j0 = p * NR, w = n - j0 < NR ? n - j0 : NR;
    for (int64_t l = 0; l < k; l++, dst += NR) {
      int64_t j = 0;
      for (; j < w; j++) dst[j] = b[l * sk + (j0 + j) * sn];
      for (; j < NR; j++) dst[j] = 0;
    }
  }
  return pb;
}

typedef struct job {
  const dvm_pgemm_b *pb;
  int64_t m, sm, sk, ldc, blocks;
  const float *a;
  float alpha, beta;
  float *c;
} job;

/* C[i0 .. i0 + r, panel p] from r rows of A; r is a constant where it is
 * inlined, so the accumulators stay in registers. */
TARGET static inline __attribute__((always_inline)) void tile(int r, const job *jb, int64_t i0,
                                                              int64_t p) {
  const dvm_pgemm_b *pb = jb->pb;
  const int64_t k = pb->k, sm = jb->sm, sk = jb->sk;
  const float *b = pb->data + p * k * NR, *a = jb->a + i0 * sm;
  __m256 c0[MR], c1[MR];
  _Pragma("GCC unroll 6") for (int i = 0; i < r; i++) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t l = 0; l < k; l++, b += NR) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    _Pragma("GCC unroll 6") for (int i = 0; i < r; i++) {
      __m256 av = _mm256_broadcast_ss(a + l * sk + i * sm);
      c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);
    }
  }
  int64_t j0 = p * NR, w = pb->n - j0 < NR ? pb->n - j0 : NR;
  __m256 alpha = _mm256_set1_ps(jb->alpha), beta = _mm256_set1_ps(jb->beta);
  _Pragma("GCC unroll 6") for (int i = 0; i < r; i++) {
    float *ci = jb->c + (i0 + i) * jb->ldc + j0, v[NR];
    __m256 v0 = _mm256_mul_ps(alpha, c0[i]), v1 = _mm256_mul_ps(alpha, c1[i]);
    if (w == NR) {
      if (jb->beta != 0) {
        v0 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(ci), v0);
        v1 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(ci + 8), v1);
      }
      _mm256_storeu_ps(ci, v0);
      _mm256_storeu_ps(ci + 8, v1);
      continue;
    }
    _mm256_storeu_ps(v, v0);
    _mm256_storeu_ps(v + 8, v1);
    for (int64_t j = 0; j < w; j++) ci[j] = jb->beta != 0 ? v[j] + jb->beta * ci[j] : v[j];
  }
}

#define TILE(R)                                                             \
  TARGET static void tile##R(const job *jb, int64_t i0, int64_t p) { tile(R, jb, i0, p); }
TILE(1)
TILE(2)
TILE(3)
TILE(4)
TILE(5)
TILE(6)
#undef TILE

static void (*const tiles[MR + 1])(const job *, int64_t, int64_t) = {
    NULL, tile1, tile2, tile3, tile4, tile5, tile6};

static void panels(const void *arg, int64_t p0, int64_t p1) {
  const job *jb = arg;
  for (int64_t p = p0; p < p1; p++)
    for (int64_t q = 0; q < jb->blocks; q++) {
      int64_t i0 = jb->m * q / jb->blocks, i1 = jb->m * (q + 1) / jb->blocks;
      tiles[i1 - i0](jb, i0, p);
    }
}

void dvm_pgemm_run(const dvm_pgemm_b *pb, int64_t m, const float *a, int64_t sm, int64_t sk,
                   float alpha, float beta, float *c, int64_t ldc, int threads) {
  job jb = {pb, m, sm, sk, ldc, (m + MR - 1) / MR, a, alpha, beta, c};
  dvm_vec_parallel(threads, pb->panels, panels, &jb);
}

#else /* no AVX2 kernel for this target: pack declines, run is never reached */

dvm_pgemm_b *dvm_pgemm_pack(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn) {
  (void)b, (void)k, (void)n, (void)sk, (void)sn;
  return NULL;
}

void dvm_pgemm_run(const dvm_pgemm_b *pb, int64_t m, const float *a, int64_t sm, int64_t sk,
                   float alpha, float beta, float *c, int64_t ldc, int threads) {
  (void)pb, (void)m, (void)a, (void)sm, (void)sk, (void)alpha, (void)beta, (void)c, (void)ldc,
      (void)threads;
}

#endif
