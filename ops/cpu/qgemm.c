/* The packed integer product (qgemm.h): B's layout, A's preparation, the
 * zero points' terms and the tiles, one per instruction set. */
#include "ops/cpu/qgemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/elementwise.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/par.h"
#include "ops/cpu/vec.h"

#define NG 16 /* columns per group */
/* From this many rows the AMX tiles run where the CPU has them (16 x 768
 * x 768 on a Xeon: 0.011 ms against 0.037 on the VNNI tiles). */
#define AMX_MIN_ROWS 16

enum { V_NONE, V_AVX2, V_VNNI };

struct dvm_qgemm_b {
  int64_t k, n, kp, groups;
  int v, b_signed;
  uint8_t *codes;  /* groups * kp * NG bytes, 64-byte aligned */
  int32_t *colsum; /* groups * NG: each column's sum of beta */
};

static int chosen;

static void choose(void) {
#if DVM_EW_X86
  if (dvm_isa_chosen() == DVM_ISA_AVX512F && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    chosen = V_VNNI;
  else if (dvm_isa_chosen() >= DVM_ISA_AVX2)
    chosen = V_AVX2;
#endif
}

static int variant(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose);
  return chosen;
}

int dvm_qgemm_amx(int64_t rows) {
#if DVM_EW_X86
  return variant() == V_VNNI && rows >= AMX_MIN_ROWS && dvm_isa_amx_int8();
#else
  (void)rows;
  return 0;
#endif
}

const char *dvm_qgemm_variant(void) { return variant() == V_VNNI ? "avx512-vnni" : variant() ? "avx2" : "none"; }

/* Whether an operand's bytes are flipped (x ^ 0x80) for tile v: vpdpbusd
 * multiplies u8 A by s8 B, the AVX2 tile s8 A by u8 B's nibbles. */
static int flips(int v, int is_a, int is_signed) { return (v == V_VNNI) == (is_a ? is_signed : !is_signed); }

/* What the flip adds to each value: i8 ^ 0x80 = i8 + 128 as u8, u8 ^ 0x80
 * = u8 - 128 as s8. */
static int32_t offset(int flipped, int is_signed) { return flipped ? (is_signed ? 128 : -128) : 0; }

/* The value of an encoded byte: s8 for B and u8 for A with VNNI, the
 * other way round with AVX2. */
static int32_t value(uint8_t x, int encoded_signed) { return encoded_signed ? (int8_t)x : x; }

dvm_qgemm_b *dvm_qgemm_pack(const void *b, int b_signed, int64_t k, int64_t n) {
  int v = variant();
  if (v == V_NONE) return NULL;
  dvm_qgemm_b *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  /* K padded to 4, or to the 64 of a tile row where AMX may run */
  int64_t pad = v == V_VNNI && dvm_isa_amx_int8() ? 64 : 4;
  p->k = k, p->n = n, p->kp = (k + pad - 1) / pad * pad, p->groups = (n + NG - 1) / NG, p->v = v,
  p->b_signed = b_signed;
  size_t bytes = (size_t)(p->groups * p->kp * NG); /* a multiple of 64 */
  p->codes = aligned_alloc(64, bytes ? bytes : 64);
  p->colsum = calloc((size_t)(p->groups * NG + 1), sizeof(int32_t));
  if (!p->codes || !p->colsum) {
    dvm_qgemm_free(p);
    return NULL;
  }
  memset(p->codes, 0, bytes);
  uint8_t flip = flips(v, 0, b_signed) ? 0x80 : 0;
  const uint8_t *src = b;
  for (int64_t kk = 0; kk < k; kk++)
    for (int64_t c = 0; c < n; c++) {
      uint8_t x = src[kk * n + c] ^ flip;
      p->codes[(c / NG) * p->kp * NG + kk / 4 * 64 + c % NG * 4 + kk % 4] = x;
      p->colsum[c] += value(x, v == V_VNNI);
    }
  return p;
}

void dvm_qgemm_free(void *b) {
  dvm_qgemm_b *p = b;
  if (!p) return;
  free(p->codes);
  free(p->colsum);
  free(p);
}

int64_t dvm_qgemm_k(const dvm_qgemm_b *b) { return b->k; }
int64_t dvm_qgemm_n(const dvm_qgemm_b *b) { return b->n; }
int dvm_qgemm_signed(const dvm_qgemm_b *b) { return b->b_signed; }

/* One call's operands in the tiles' terms. */
/* y = D + col[n] + row[m], less az[m] colsum[n] + bz[n] rs[m] where a
 * zero point has more than one value (cross): a zero point of one value
 * is folded into col (-az' colsum) or row (-bz' rs) and is 0 in az or bz. */
typedef struct job {
  const dvm_qgemm_b *b;
  const uint8_t *alpha; /* rows * kp, zeros past K */
  const int32_t *az;    /* per row: az' (per-row zero points) */
  const int32_t *rs;    /* per row: rowsum(alpha) - K az' */
  const int32_t *row;   /* per row: -bz' rs (one b zero point) */
  const int32_t *bz;    /* per column (groups * NG): bz' (per-column zero points) */
  const int32_t *col;   /* per column: -az' colsum (one a zero point) */
  int64_t rows;
  int cross;
  int32_t *y;
} job;

#if DVM_EW_X86
#include "ops/cpu/x86_tile.h"

/* Row i's D plus its zero points' terms, stored (the columns of N only). */
DVM_TILE_VNNI DVM_TILE_INLINE void finish512(const job *j, int64_t i, int64_t n0, __m512i d) {
  const int64_t N = j->b->n;
  __m512i o = _mm512_add_epi32(_mm512_add_epi32(d, _mm512_loadu_si512(j->col + n0)), _mm512_set1_epi32(j->row[i]));
  if (j->cross) {
    o = _mm512_sub_epi32(o, _mm512_mullo_epi32(_mm512_set1_epi32(j->az[i]), _mm512_loadu_si512(j->b->colsum + n0)));
    o = _mm512_sub_epi32(o, _mm512_mullo_epi32(_mm512_loadu_si512(j->bz + n0), _mm512_set1_epi32(j->rs[i])));
  }
  __mmask16 keep = N - n0 >= NG ? 0xffff : (__mmask16)((1u << (N - n0)) - 1);
  _mm512_mask_storeu_epi32(j->y + i * N + n0, keep, o);
}

/* Rows m0 .. m0 + r of group g's ng (1 or 2) groups: 16 accumulators, two
 * B units per step, each serving every row. */
DVM_TILE_VNNI DVM_TILE_INLINE void tile512(const job *j, int64_t m0, int r, int64_t g, int ng) {
  const dvm_qgemm_b *b = j->b;
  const int64_t kp = b->kp;
  const uint8_t *u = b->codes + g * kp * NG, *a = j->alpha + m0 * kp;
  __m512i acc[8][2];
  _Pragma("GCC unroll 8") for (int i = 0; i < r; i++) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kp; k += 4) {
    __m512i v0 = _mm512_load_si512(u + k * NG), v1 = v0;
    if (ng > 1) v1 = _mm512_load_si512(u + kp * NG + k * NG);
    _Pragma("GCC unroll 8") for (int i = 0; i < r; i++) {
      __m512i x = _mm512_set1_epi32(dvm_tile_load32(a + i * kp + k));
      acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], x, v0);
      if (ng > 1) acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], x, v1);
    }
  }
  for (int h = 0; h < ng; h++)
    _Pragma("GCC unroll 8") for (int i = 0; i < r; i++) finish512(j, m0 + i, (g + h) * NG, acc[i][h]);
}

/* ldtilecfg's operand: palette 1, bytes per row and rows of each tile. */
typedef struct amx_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_config;

/* The tile configuration for r rows (r <= 32): tiles 0 and 1 A's rows
 * 0-15 and 16-31, 2 and 3 two groups' B, 4 + 2 ri + h the sums of A's
 * rows ri and group h. */
DVM_TILE_AMX static void amx_configure(int r) {
  const int r1 = r > 16 ? r - 16 : 0, r0 = r - r1;
  amx_config cfg = {.palette = 1};
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64;
  cfg.rows[0] = cfg.rows[4] = cfg.rows[5] = (uint8_t)r0;
  cfg.rows[1] = cfg.rows[6] = cfg.rows[7] = (uint8_t)(r1 ? r1 : r0); /* unused when r1 is 0 */
  cfg.rows[2] = cfg.rows[3] = 16;
  _tile_loadconfig(&cfg);
}

/* The same D on AMX (kp a multiple of 64), tiles configured for r rows:
 * rows m0 .. m0 + r of groups g, g + 1 (ng of them) in up to 2 x 2 tiles
 * of 16 rows x 16 columns, each tdpbusd summing 64 k of u8 alpha by s8
 * beta, B's units being the tile's rows as they are packed. */
DVM_TILE_AMX static void tile_amx(const job *j, int64_t m0, int r, int64_t g, int ng) {
  const int64_t kp = j->b->kp;
  const uint8_t *u = j->b->codes + g * kp * NG, *a = j->alpha + m0 * kp;
  const int r1 = r > 16;
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t k = 0; k < kp; k += 64) {
    _tile_loadd(0, a + k, kp);
    _tile_loadd(2, u + k * NG, 64);
    _tile_dpbusd(4, 0, 2);
    if (ng > 1) {
      _tile_loadd(3, u + (kp + k) * NG, 64);
      _tile_dpbusd(5, 0, 3);
    }
    if (r1) {
      _tile_loadd(1, a + 16 * kp + k, kp);
      _tile_dpbusd(6, 1, 2);
      if (ng > 1) _tile_dpbusd(7, 1, 3);
    }
  }
  _Alignas(64) int32_t d[4][16 * NG];
  _tile_stored(4, d[0], 64);
  _tile_stored(5, d[1], 64);
  _tile_stored(6, d[2], 64);
  _tile_stored(7, d[3], 64);
  for (int h = 0; h < ng; h++)
    for (int i = 0; i < r; i++)
      finish512(j, m0 + i, (g + h) * NG, _mm512_load_si512(d[(i >= 16) * 2 + h] + i % 16 * NG));
}

/* Groups [s, e) on AMX: the tiles configured once for 32 rows, again for
 * the last row tile where it is shorter. */
DVM_TILE_AMX static void groups_amx(const job *j, int64_t s, int64_t e) {
  int configured = 0;
  for (int64_t g = s; g < e; g += 2)
    for (int64_t m0 = 0; m0 < j->rows; m0 += 32) {
      int r = (int)(j->rows - m0 < 32 ? j->rows - m0 : 32);
      if (r != configured) amx_configure(configured = r);
      tile_amx(j, m0, r, g, e - g > 1 ? 2 : 1);
    }
  _tile_release();
}

/* Rows m0 .. m0 + r (r <= 4) of group g as two halves of 8 columns; each
 * byte of B as 16 hi + lo, so that a pair of products in vpmaddubsw is at
 * most 2 * 15 * 128 and never saturates. */
DVM_TILE_AVX2 DVM_TILE_INLINE void tile256(const job *j, int64_t m0, int r, int64_t g) {
  const dvm_qgemm_b *b = j->b;
  const int64_t kp = b->kp, N = b->n;
  const uint8_t *u = b->codes + g * kp * NG, *a = j->alpha + m0 * kp;
  const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256i acc[4][2];
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kp; k += 4)
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
      __m256i v = _mm256_load_si256((const __m256i *)(u + k * NG + 32 * h));
      __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) {
        __m256i x = _mm256_set1_epi32(dvm_tile_load32(a + i * kp + k));
        __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x), ones);
        __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x), ones);
        acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_add_epi32(pl, _mm256_slli_epi32(ph, 4)));
      }
    }
  for (int h = 0; h < 2; h++) {
    int64_t n0 = g * NG + 8 * h;
    if (n0 >= N) break;
    __m256i cs = _mm256_loadu_si256((const __m256i *)(b->colsum + n0));
    __m256i bz = _mm256_loadu_si256((const __m256i *)(j->bz + n0));
    __m256i col = _mm256_loadu_si256((const __m256i *)(j->col + n0));
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) {
      __m256i o = _mm256_add_epi32(_mm256_add_epi32(acc[i][h], col), _mm256_set1_epi32(j->row[m0 + i]));
      if (j->cross) {
        o = _mm256_sub_epi32(o, _mm256_mullo_epi32(_mm256_set1_epi32(j->az[m0 + i]), cs));
        o = _mm256_sub_epi32(o, _mm256_mullo_epi32(bz, _mm256_set1_epi32(j->rs[m0 + i])));
      }
      int32_t t[8];
      _mm256_storeu_si256((__m256i *)t, o);
      memcpy(j->y + (m0 + i) * N + n0, t, sizeof(int32_t) * (size_t)(N - n0 < 8 ? N - n0 : 8));
    }
  }
}

/* The sum of src[k] ^ x over k < n, as u8 (vpsadbw against zero). */
DVM_TILE_AVX2 static int64_t byte_sum(const uint8_t *src, int64_t n, uint8_t x) {
  const __m256i zero = _mm256_setzero_si256(), xv = _mm256_set1_epi8((char)x);
  __m256i acc = zero;
  int64_t k = 0, sum = 0;
  for (; k + 32 <= n; k += 32)
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(src + k)), xv),
                                                zero));
  for (int i = 0; i < 4; i++) sum += _mm256_extract_epi64(acc, 0), acc = _mm256_permute4x64_epi64(acc, 0x39);
  for (; k < n; k++) sum += src[k] ^ x;
  return sum;
}

/* The row count (and group count) made constants so that the
 * accumulators stay in registers. */
#define ROWS8(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)
#define CASE512(R) \
  case R: ng > 1 ? tile512(j, m0, R, g, 2) : tile512(j, m0, R, g, 1); break;
DVM_TILE_VNNI static void run512(const job *j, int64_t m0, int r, int64_t g, int ng) {
  switch (r) { ROWS8(CASE512) }
}

#define CASE256(R) \
  case R: tile256(j, m0, R, g); break;
DVM_TILE_AVX2 static void run256(const job *j, int64_t m0, int r, int64_t g) {
  switch (r) { CASE256(1) CASE256(2) CASE256(3) CASE256(4) }
}

/* Groups [s, e): each pair of groups (VNNI) or group (AVX2) over all rows,
 * so that its B stays in cache while the rows pass. */
static void groups_part(void *ctx, int64_t s, int64_t e) {
  const job *j = ctx;
  int vnni = j->b->v == V_VNNI, mr = vnni ? 8 : 4, step = vnni ? 2 : 1;
  if (vnni && j->b->kp % 64 == 0 && dvm_qgemm_amx(j->rows)) {
    groups_amx(j, s, e);
    return;
  }
  for (int64_t g = s; g < e; g += step)
    for (int64_t m0 = 0; m0 < j->rows; m0 += mr) {
      int r = (int)(j->rows - m0 < mr ? j->rows - m0 : mr);
      if (vnni) run512(j, m0, r, g, e - g > 1 ? 2 : 1);
      else run256(j, m0, r, g);
    }
}
#else
static void groups_part(void *ctx, int64_t s, int64_t e) { (void)ctx, (void)s, (void)e; }
static int64_t byte_sum(const uint8_t *src, int64_t n, uint8_t x) {
  int64_t sum = 0;
  for (int64_t k = 0; k < n; k++) sum += src[k] ^ x;
  return sum;
}
#endif

/* xor'ed bytes, a loop the vector clones vectorize. */
DVM_VEC static void flip_bytes(const uint8_t *restrict src, int64_t n, uint8_t x, uint8_t *restrict dst) {
  for (int64_t k = 0; k < n; k++) dst[k] = src[k] ^ x;
}

dvm_status *dvm_qgemm_run(const dvm_qgemm_b *b, const void *a, int a_signed, int64_t rows, const int32_t *az,
                          int64_t naz, const int32_t *bz, int64_t nbz, int threads, int32_t *y) {
  const int64_t K = b->k, kp = b->kp, cols = b->groups * NG;
  if (rows == 0 || b->n == 0) return NULL;
  int fa = flips(b->v, 1, a_signed), fb = flips(b->v, 0, b->b_signed);
  int copy = fa || kp != K; /* else the tiles read a as it is */
  uint8_t *alpha = copy ? aligned_alloc(64, (size_t)((rows * kp + 63) / 64 * 64)) : NULL;
  int32_t *t = malloc(sizeof(int32_t) * (size_t)(3 * rows + 2 * cols));
  if ((copy && !alpha) || !t) {
    free(alpha), free(t);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "matmul_integer: out of memory for A's rows");
  }
  int32_t *jaz = t, *jrs = t + rows, *jrow = t + 2 * rows, *jbz = t + 3 * rows, *jcol = jbz + cols;
  job j = {.b = b, .alpha = copy ? alpha : a, .az = jaz, .rs = jrs, .row = jrow, .bz = jbz, .col = jcol,
           .rows = rows, .cross = naz > 1 || nbz > 1, .y = y};
  int32_t ca = offset(fa, a_signed), cb = offset(fb, b->b_signed);
  const uint8_t *src = a;
  for (int64_t r = 0; r < rows; r++) {
    uint8_t x = fa ? 0x80 : 0;
    if (copy) {
      flip_bytes(src + r * K, K, x, alpha + r * kp);
      memset(alpha + r * kp + K, 0, (size_t)(kp - K));
    }
    /* alpha's values: u8 for vpdpbusd, s8 (v ^ 0x80 less 128) for AVX2 */
    int64_t sum = b->v == V_VNNI ? byte_sum(src + r * K, K, x) : byte_sum(src + r * K, K, x ^ 0x80) - 128 * K;
    int32_t azr = az[r % naz] + ca;
    jrs[r] = (int32_t)(uint32_t)(sum - K * (int64_t)azr);
    jaz[r] = naz > 1 ? azr : 0;
    jrow[r] = nbz > 1 ? 0 : (int32_t)(0u - (uint32_t)(bz[0] + cb) * (uint32_t)jrs[r]);
  }
  int32_t az0 = az[0] + ca;
  for (int64_t n = 0; n < cols; n++) {
    jbz[n] = n < b->n && nbz > 1 ? bz[n] + cb : 0;
    jcol[n] = naz > 1 ? 0 : (int32_t)(0u - (uint32_t)az0 * (uint32_t)b->colsum[n]);
  }
  dvm_par_for(threads, b->groups, b->v == V_VNNI ? 2 : 1, groups_part, &j);
  free(alpha), free(t);
  return NULL;
}
