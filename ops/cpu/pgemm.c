/* The packed-B GEMM (pgemm.h): matmul and gemm with a
 * constant B, packed once when the module is linked.
 *
 * Layout: B's columns cut into panels of NR floats (16 for AVX2, 32 for
 * AVX-512: two vector registers); panel p holds, for each l in [0, k), the
 * NR floats B[l, NR p .. NR p + NR) (the last panel padded with zeros), so
 * the microkernel streams one panel front to back. It keeps an r x NR block
 * of C (r <= MR: 6 rows in 12 of the 16 ymm registers with AVX2, 12 rows in
 * 24 of the 32 zmm with AVX-512) and, per l, broadcasts r values of A
 * against the panel's two vectors. Rows are cut into blocks of nearly equal
 * size (8 rows: 4 + 4, not 6 + 2, so no block wastes most of its loads);
 * threads take whole panels, and run all row blocks of a panel while it is
 * in their cache.
 *
 * A is packed first (the threads split the row blocks, then the panels)
 * where it has more than one row block and either at least PACK_ROWS rows
 * or rows a multiple of 4 KiB apart (K = 1024, 3072): block [i0, i0 + r)
 * at i0 k, its element (i, l) at i0 k + l r + i, so the r values the tile
 * broadcasts at step l lie side by side. Rows 4 KiB apart, read in place,
 * all fall in one set of the 8-way L1, which 12 of them thrashed: 10-30%
 * slower than sgemm from 128 rows on. Past that, by measurement on the
 * models (docs/performance.md "Packed A from 96 rows"): from 96 rows
 * packing makes BERT-base and GPT-2 2-3% faster (bench_pgemm: the products
 * 2-8%), but at 32 and 64 rows it made BERT-base 3-5% slower, though
 * bench_pgemm finds it faster there too; so A of fewer rows is read in
 * place.
 *
 * Why: dnnl_sgemm packs B on every call, which at M = 8 costs more than
 * the product; ONNX Runtime packs constant weights at load. The variant
 * (ops/cpu/isa.h) is the one chosen for the process when B is packed, and
 * the packed B remembers it; without AVX2 and FMA pack declines and callers
 * keep sgemm. Sums run in order over l with FMA, so results differ from
 * sgemm's in the last bits, as sgemm's differ between its own paths. */
#include "ops/cpu/pgemm.h"

#include <stdlib.h>
#include <string.h>

#include "object.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/epilogue.h"
#include "ops/cpu/vec.h"
#include "ops/cpu/weight_mem.h"

#define NR 16 /* AVX2 */
#define MR 6
#define NR512 32
#define MR512 12
#define ALIAS_STRIDE 1024 /* floats: A is packed where its rows are a multiple of 4 KiB apart */
#define PACK_ROWS 96      /* or where it has at least this many rows */
/* The tiles prefetch the panel 4 KiB ahead of the step they compute: the
 * hardware prefetchers alone left a panel streamed from L2 or L3 (a
 * model's weights) at 40-70% of that speed on an Intel Xeon
 * (docs/performance.md "Packed B prefetched"). A prefetch past the end of
 * B is harmless: prefetches do not fault. */
#define AHEAD 1024 /* floats */

struct dvm_pgemm_b {
  int64_t k, n, panels, nr;
  dvm_isa isa;
  float *data; /* panels * k * nr floats, 64-byte aligned */
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
#define TARGET512 __attribute__((target("avx512f,avx2,fma")))

dvm_pgemm_b *dvm_pgemm_pack(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn) {
  return dvm_pgemm_pack_isa(dvm_isa_chosen(), b, k, n, sk, sn);
}

static dvm_pgemm_b *pack(dvm_isa isa, const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn,
                         void (*done)(void *, int64_t, int64_t), void *ctx);

dvm_pgemm_b *dvm_pgemm_pack_isa(dvm_isa isa, const float *b, int64_t k, int64_t n, int64_t sk,
                                int64_t sn) {
  return pack(isa, b, k, n, sk, sn, NULL, NULL);
}

dvm_pgemm_b *dvm_pgemm_pack_rows(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn,
                                 void (*done)(void *ctx, int64_t l0, int64_t l1), void *ctx) {
  return pack(dvm_isa_chosen(), b, k, n, sk, sn, done, ctx);
}

/* Rows of B packed per block: about 1 MiB of them. Block by block, every
 * panel's rows of the block, so B is read in order and a caller can give
 * its rows back as it goes (dvm_pgemm_pack_rows); the form, written across
 * all its panels at each block, is then on 4 KiB pages until the end, so
 * that it grows as B shrinks. */
#define PACK_BLOCK_BYTES ((int64_t)1 << 20)

static dvm_pgemm_b *pack(dvm_isa isa, const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn,
                         void (*done)(void *, int64_t, int64_t), void *ctx) {
  if (k <= 0 || n <= 0 || isa == DVM_ISA_GENERIC || !dvm_isa_supported(isa)) return NULL;
  dvm_pgemm_b *pb = malloc(sizeof *pb);
  const int64_t nr = isa == DVM_ISA_AVX512F ? NR512 : NR;
  int64_t panels = (n + nr - 1) / nr;
  size_t bytes;
  if (!pb || dvm_mul_overflows((size_t)(panels * nr), (size_t)k * sizeof(float), &bytes) ||
      !(pb->data = done ? dvm_weight_alloc_lazy(bytes) : dvm_weight_alloc(bytes))) {
    free(pb);
    return NULL;
  }
  pb->k = k;
  pb->n = n;
  pb->panels = panels;
  pb->nr = nr;
  pb->isa = isa;
  int64_t rows = PACK_BLOCK_BYTES / (n * (int64_t)sizeof(float));
  if (rows < 1) rows = 1;
  for (int64_t l0 = 0; l0 < k; l0 += rows) {
    int64_t l1 = k - l0 < rows ? k : l0 + rows;
    for (int64_t p = 0; p < panels; p++) {
      int64_t j0 = p * nr, w = n - j0 < nr ? n - j0 : nr;
      float *dst = pb->data + (p * k + l0) * nr;
      for (int64_t l = l0; l < l1; l++, dst += nr) {
        int64_t j = 0;
        for (; j < w; j++) dst[j] = b[l * sk + (j0 + j) * sn];
        for (; j < nr; j++) dst[j] = 0;
      }
    }
    if (done) done(ctx, l0, l1);
  }
  if (done) dvm_weight_settle(pb->data, bytes);
  return pb;
}

typedef struct job job;
typedef void (*tile_fn)(const job *, int64_t, int64_t);

struct job {
  const dvm_pgemm_b *pb;
  int64_t m, sm, sk, ldc, blocks;
  const float *a;
  const float *ap; /* A packed by row block, or NULL: read at a */
  float alpha, beta;
  float *c;
  const tile_fn *tiles; /* by rows, 1 .. MR of the variant, reading A or ap */
  const dvm_epilogue *epi;
};

/* C[i0 .. i0 + r, panel p] from r rows of A, read packed (pk) or in
 * place; r and pk are constants where it is inlined, so the accumulators
 * stay in registers and packed A's offsets are immediates. */
TARGET static inline __attribute__((always_inline)) void tile(int r, int pk, const job *jb,
                                                              int64_t i0, int64_t p) {
  const dvm_pgemm_b *pb = jb->pb;
  const int64_t k = pb->k, sm = pk ? 1 : jb->sm, sk = pk ? r : jb->sk;
  const float *b = pb->data + p * k * NR, *a = pk ? jb->ap + i0 * k : jb->a + i0 * sm;
  __m256 c0[MR], c1[MR];
  _Pragma("GCC unroll 6") for (int i = 0; i < r; i++) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t l = 0; l < k; l++, b += NR) {
    _mm_prefetch((const char *)(b + AHEAD), _MM_HINT_T0);
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

/* The AVX-512 tile: as tile, with 32-column panels in two zmm per row and
 * the last panel's columns past n masked off. */
TARGET512 static inline __attribute__((always_inline)) void tile512(int r, int pk, const job *jb,
                                                                    int64_t i0, int64_t p) {
  const dvm_pgemm_b *pb = jb->pb;
  const int64_t k = pb->k, sm = pk ? 1 : jb->sm, sk = pk ? r : jb->sk;
  const float *b = pb->data + p * k * NR512, *a = pk ? jb->ap + i0 * k : jb->a + i0 * sm;
  __m512 c0[MR512], c1[MR512];
  _Pragma("GCC unroll 12") for (int i = 0; i < r; i++) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t l = 0; l < k; l++, b += NR512) {
    _mm_prefetch((const char *)(b + AHEAD), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + AHEAD + 16), _MM_HINT_T0);
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    _Pragma("GCC unroll 12") for (int i = 0; i < r; i++) {
      __m512 av = _mm512_set1_ps(a[l * sk + i * sm]);
      c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
    }
  }
  int64_t j0 = p * NR512, w = pb->n - j0 < NR512 ? pb->n - j0 : NR512;
  __mmask16 m0 = w >= 16 ? 0xffff : (__mmask16)((1u << w) - 1);
  __mmask16 m1 = w >= 32 ? 0xffff : w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : 0;
  __m512 alpha = _mm512_set1_ps(jb->alpha), beta = _mm512_set1_ps(jb->beta);
  _Pragma("GCC unroll 12") for (int i = 0; i < r; i++) {
    float *ci = jb->c + (i0 + i) * jb->ldc + j0;
    __m512 v0 = _mm512_mul_ps(alpha, c0[i]), v1 = _mm512_mul_ps(alpha, c1[i]);
    if (jb->beta != 0) {
      v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, ci), v0);
      v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, ci + 16), v1);
    }
    _mm512_mask_storeu_ps(ci, m0, v0);
    _mm512_mask_storeu_ps(ci + 16, m1, v1);
  }
}

/* Each row count R, A in place and packed. */
#define TILE512(R)                                                                               \
  TARGET512 static void tile512_##R(const job *jb, int64_t i0, int64_t p) {                       \
    tile512(R, 0, jb, i0, p);                                                                    \
  }                                                                                              \
  TARGET512 static void tile512p_##R(const job *jb, int64_t i0, int64_t p) {                      \
    tile512(R, 1, jb, i0, p);                                                                    \
  }
#define TILE(R)                                                                                  \
  TARGET static void tile##R(const job *jb, int64_t i0, int64_t p) { tile(R, 0, jb, i0, p); }     \
  TARGET static void tilep##R(const job *jb, int64_t i0, int64_t p) { tile(R, 1, jb, i0, p); }    \
  TILE512(R)
TILE(1)
TILE(2)
TILE(3)
TILE(4)
TILE(5)
TILE(6)
TILE512(7)
TILE512(8)
TILE512(9)
TILE512(10)
TILE512(11)
TILE512(12)
#undef TILE
#undef TILE512

/* [packed][rows] */
static const tile_fn tiles_avx2[2][MR + 1] = {
    {NULL, tile1, tile2, tile3, tile4, tile5, tile6},
    {NULL, tilep1, tilep2, tilep3, tilep4, tilep5, tilep6}};
static const tile_fn tiles_avx512[2][MR512 + 1] = {
    {NULL, tile512_1, tile512_2, tile512_3, tile512_4, tile512_5, tile512_6, tile512_7, tile512_8,
     tile512_9, tile512_10, tile512_11, tile512_12},
    {NULL, tile512p_1, tile512p_2, tile512p_3, tile512p_4, tile512p_5, tile512p_6, tile512p_7,
     tile512p_8, tile512p_9, tile512p_10, tile512p_11, tile512p_12}};

/* r rows of row-major A, sm floats apart, into dst: element (i, l) at
 * dst[l * r + i]. 4 x 4 transposes (SSE), the last group of rows
 * overlapping the one before where r is not a multiple of 4. */
static void pack_rows(const float *a, int64_t sm, int64_t k, int64_t r, float *dst) {
  int64_t l0 = 0;
  if (r >= 4)
    for (; l0 + 4 <= k; l0 += 4)
      for (int64_t g = 0; g < r; g += 4) {
        int64_t i = g + 4 <= r ? g : r - 4;
        const float *ai = a + i * sm + l0;
        __m128 x0 = _mm_loadu_ps(ai), x1 = _mm_loadu_ps(ai + sm), x2 = _mm_loadu_ps(ai + 2 * sm),
               x3 = _mm_loadu_ps(ai + 3 * sm);
        _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
        float *d = dst + l0 * r + i;
        _mm_storeu_ps(d, x0);
        _mm_storeu_ps(d + r, x1);
        _mm_storeu_ps(d + 2 * r, x2);
        _mm_storeu_ps(d + 3 * r, x3);
      }
  for (int64_t l = l0; l < k; l++)
    for (int64_t i = 0; i < r; i++) dst[l * r + i] = a[i * sm + l];
}

/* Row blocks [q0, q1) of A into jb->ap. */
static void pack_blocks(const void *arg, int64_t q0, int64_t q1) {
  const job *jb = arg;
  const int64_t k = jb->pb->k;
  for (int64_t q = q0; q < q1; q++) {
    int64_t i0 = jb->m * q / jb->blocks, i1 = jb->m * (q + 1) / jb->blocks;
    pack_rows(jb->a + i0 * jb->sm, jb->sm, k, i1 - i0, (float *)jb->ap + i0 * k);
  }
}

/* Each panel's columns of C, all row blocks, then the epilogue over them
 * while they are in L1 (m rows of 16 or 32 floats). */
static void panels(const void *arg, int64_t p0, int64_t p1) {
  const job *jb = arg;
  for (int64_t p = p0; p < p1; p++) {
    for (int64_t q = 0; q < jb->blocks; q++) {
      int64_t i0 = jb->m * q / jb->blocks, i1 = jb->m * (q + 1) / jb->blocks;
      jb->tiles[i1 - i0](jb, i0, p);
    }
    if (jb->epi) {
      int64_t nr = jb->pb->nr, j0 = p * nr, w = jb->pb->n - j0 < nr ? jb->pb->n - j0 : nr;
      dvm_epilogue_apply(jb->epi, jb->c + j0, jb->ldc, jb->m, w, j0);
    }
  }
}

void dvm_pgemm_run(const dvm_pgemm_b *pb, int64_t m, const float *a, int64_t sm, int64_t sk,
                   float alpha, float beta, float *c, int64_t ldc, int threads, const dvm_epilogue *epi) {
  int avx512 = pb->isa == DVM_ISA_AVX512F;
  int64_t mr = avx512 ? MR512 : MR, blocks = (m + mr - 1) / mr;
  size_t bytes;
  /* A packed where its rows alias in L1 or are many (above); without the
   * memory, read in place */
  int pack = blocks > 1 && sk == 1 && (sm % ALIAS_STRIDE == 0 || m >= PACK_ROWS);
  float *ap = pack && !dvm_mul_overflows((size_t)m, (size_t)pb->k * sizeof(float), &bytes) ? malloc(bytes)
                                                                                           : NULL;
  job jb = {pb, m, sm, sk, ldc, blocks, a, ap, alpha, beta, c,
            avx512 ? tiles_avx512[ap != NULL] : tiles_avx2[ap != NULL], epi};
  if (ap) dvm_vec_parallel(threads, blocks, pack_blocks, &jb);
  dvm_vec_parallel(threads, pb->panels, panels, &jb);
  free(ap);
}

dvm_isa dvm_pgemm_isa(const dvm_pgemm_b *pb) { return pb->isa; }

#else /* no vector kernel for this target: pack declines, run is never reached */

dvm_pgemm_b *dvm_pgemm_pack(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn) {
  (void)b, (void)k, (void)n, (void)sk, (void)sn;
  return NULL;
}

dvm_pgemm_b *dvm_pgemm_pack_isa(dvm_isa isa, const float *b, int64_t k, int64_t n, int64_t sk,
                                int64_t sn) {
  (void)isa, (void)b, (void)k, (void)n, (void)sk, (void)sn;
  return NULL;
}

dvm_pgemm_b *dvm_pgemm_pack_rows(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn,
                                 void (*done)(void *ctx, int64_t l0, int64_t l1), void *ctx) {
  (void)b, (void)k, (void)n, (void)sk, (void)sn, (void)done, (void)ctx;
  return NULL;
}

dvm_isa dvm_pgemm_isa(const dvm_pgemm_b *pb) {
  (void)pb;
  return DVM_ISA_GENERIC;
}

void dvm_pgemm_run(const dvm_pgemm_b *pb, int64_t m, const float *a, int64_t sm, int64_t sk,
                   float alpha, float beta, float *c, int64_t ldc, int threads, const dvm_epilogue *epi) {
  (void)pb, (void)m, (void)a, (void)sm, (void)sk, (void)alpha, (void)beta, (void)c, (void)ldc,
      (void)threads, (void)epi;
}

#endif
