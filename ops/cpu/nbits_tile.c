/* MatMulNBits' packed forms and tiles (nbits.h).
 *
 * A tile computes r <= MR rows of A against one group of 16 columns, block
 * by block: the block's dot products in one accumulator per row (16 lanes,
 * one per column), then out += a_scale * b_scale * (dot - zp * a_sum), so
 * zero points cost one multiply-add per block, not one per code. Its
 * group's codes (K * 8 bytes at 4 bits) stay in L1 while it runs the row
 * tiles of a large M; at M = 1 each code is read once, 64 bytes a load.
 *
 * Variants: AVX-512 with VNNI (vpdpbusd adds u8 x s8 products in four into
 * i32 lanes, exact), AVX2 (vpmaddubsw pairs the products into i16, exact
 * for 4-bit codes against |a| <= 127; 8-bit codes go in as two nibbles),
 * and plain C. The f32 tiles convert codes to floats and sum with FMA.
 * AVX-VNNI (the VEX form on CPUs without AVX-512) is not used: the AVX2
 * tiles run there. */
#include "ops/cpu/nbits.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "object.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/weight_mem.h"

#define NG DVM_NBITS_NG
#define MR DVM_NBITS_MR
#define UNIT 64 /* bytes per unit: 16 columns x 4 bytes */

/* Bytes of one block of one group. */
static int64_t block_bytes(const dvm_nbits_b *b) { return b->block * NG * b->bits / 8; }

/* Byte offset in a block of code t's byte for column c, and its shift. */
static inline int64_t code_at(int64_t bits, int64_t t, int64_t c, int *shift) {
  if (bits == 4) {
    *shift = (int)(t >> 2 & 1) * 4;
    return t / 8 * UNIT + 4 * c + (t & 3);
  }
  *shift = 0;
  return t / 4 * UNIT + 4 * c + (t & 3);
}

void dvm_nbits_b_free(void *p) {
  dvm_nbits_b *b = p;
  if (b) free(b->codes);
  free(b);
}

dvm_nbits_b *dvm_nbits_pack_b(const uint8_t *src, int64_t k, int64_t n, int64_t bits, int64_t block) {
  dvm_nbits_b *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  *b = (dvm_nbits_b){.k = k, .n = n, .bits = bits, .block = block, .kb = (k + block - 1) / block,
                     .groups = (n + NG - 1) / NG};
  size_t bytes;
  if (dvm_mul_overflows((size_t)(b->groups * b->kb), (size_t)block_bytes(b), &bytes) ||
      !(b->codes = dvm_weight_alloc(bytes))) {
    free(b);
    return NULL;
  }
  memset(b->codes, 0, bytes);
  const int64_t kp = b->kb * block, blob = block * bits / 8, bb = block_bytes(b);
  for (int64_t col = 0; col < n; col++) {
    const uint8_t *s = src + col * b->kb * blob;
    uint8_t *g = b->codes + col / NG * b->kb * bb;
    for (int64_t t = 0; t < kp; t++) {
      unsigned q = bits == 4 ? (s[t >> 1] >> ((t & 1) * 4)) & 15 : s[t];
      int shift; /* set by code_at before q is shifted: the subscript is computed first */
      int64_t at = t / block * bb + code_at(bits, t % block, col % NG, &shift);
      g[at] |= (uint8_t)(q << shift);
    }
  }
  return b;
}

void dvm_nbits_q_free(void *p) {
  dvm_nbits_q *q = p;
  if (q) free(q->v);
  free(q);
}

dvm_nbits_q *dvm_nbits_pack_q(const float *f, const uint8_t *codes, int64_t bits, int64_t n, int64_t kb) {
  dvm_nbits_q *q = calloc(1, sizeof *q);
  size_t bytes;
  if (!q || dvm_mul_overflows((size_t)((n + NG - 1) / NG * NG), (size_t)kb * sizeof(float), &bytes) ||
      !(q->v = dvm_weight_alloc(bytes))) {
    free(q);
    return NULL;
  }
  memset(q->v, 0, bytes);
  q->n = n;
  q->kb = kb;
  q->bits = f ? 0 : bits;
  const int64_t row = (kb * bits + 7) / 8;
  for (int64_t col = 0; col < n; col++)
    for (int64_t j = 0; j < kb; j++) {
      float v = f ? f[col * kb + j]
                  : (float)(bits == 4 ? (codes[col * row + j / 2] >> ((j & 1) * 4)) & 15 : codes[col * row + j]);
      q->v[(col / NG * kb + j) * NG + col % NG] = v;
    }
  return q;
}

/* What a tile reads. */
typedef struct targs {
  const dvm_nbits_b *b;
  const float *s, *z; /* group g's scales and zero points (z NULL: zdef) */
  float zdef;
  const dvm_nbits_a *a;
  int64_t i0, g, ldo;
  float *out; /* row i at out + i * ldo */
} targs;

typedef void (*tile_fn)(const targs *t, int r);

static void tile_generic(const targs *t, int r, int int8) {
  const dvm_nbits_b *b = t->b;
  const int64_t kb = b->kb, bb = block_bytes(b), kp = t->a->kp;
  const uint8_t *u = b->codes + t->g * kb * bb;
  for (int i = 0; i < r; i++) memset(t->out + i * t->ldo, 0, sizeof(float) * NG);
  for (int64_t j = 0; j < kb; j++, u += bb)
    for (int i = 0; i < r; i++) {
      int64_t row = t->i0 + i, base = row * kp + j * b->block;
      float sa = t->a->scale[row * kb + j], sum = t->a->sum[row * kb + j];
      for (int c = 0; c < NG; c++) {
        int32_t idot = 0;
        float fdot = 0;
        for (int64_t k = 0; k < b->block; k++) {
          int shift;
          uint8_t byte = u[code_at(b->bits, k, c, &shift)]; /* sets shift: read it after */
          int q = byte >> shift & (b->bits == 4 ? 15 : 255);
          if (int8)
            idot += q * ((const int8_t *)t->a->v)[base + k];
          else
            fdot += (float)q * ((const float *)t->a->v)[base + k];
        }
        float d = int8 ? (float)idot : fdot, z = t->z ? t->z[j * NG + c] : t->zdef;
        t->out[i * t->ldo + c] += sa * t->s[j * NG + c] * (d - z * sum);
      }
    }
}

static void i8_generic(const targs *t, int r) { tile_generic(t, r, 1); }
static void f32_generic(const targs *t, int r) { tile_generic(t, r, 0); }

#if DVM_EW_X86
#include "ops/cpu/x86_tile.h"

/* The pointers every x86 tile starts from. */
#define TILE_SETUP(elem)                                                              \
  const dvm_nbits_b *b = t->b;                                                       \
  const int64_t kb = b->kb, bb = block_bytes(b), kp = t->a->kp, block = b->block;    \
  const elem *a0 = (const elem *)t->a->v + t->i0 * kp;                               \
  const float *sa = t->a->scale + t->i0 * kb, *sum = t->a->sum + t->i0 * kb;         \
  const uint8_t *u = b->codes + t->g * kb * bb

/* The next group's block j (codes and scales) towards the cache while this
 * one's runs: a step over many rows computes long enough per group that
 * the weights' stream from memory would otherwise stall it at each group. */
#define PREFETCH_NEXT(u, j)                                                     \
  do {                                                                          \
    for (int64_t p_ = 0; p_ < bb; p_ += UNIT)                                   \
      _mm_prefetch((const char *)(u) + kb * bb + p_, _MM_HINT_T0);              \
    _mm_prefetch((const char *)(t->s + (kb + (j)) * NG), _MM_HINT_T0);          \
  } while (0)

/* ---- AVX-512 ---------------------------------------------------------- */

/* out += a_scale * b_scale * (dot - zp * a_sum) for row i of block j, the
 * group's scales and zero points at sp and zp (NULL: t->zdef). */
#define EPI512(o, d, i, j) EPI512_AT(o, d, i, j, t->s, t->z)
#define EPI512_AT(o, d, i, j, sp, zp)                                                        \
  do {                                                                                       \
    __m512 s_ = _mm512_loadu_ps((sp) + (j) * NG);                                            \
    __m512 z_ = (zp) ? _mm512_loadu_ps((zp) + (j) * NG) : _mm512_set1_ps(t->zdef);           \
    __m512 e_ = _mm512_fnmadd_ps(z_, _mm512_set1_ps(sum[(i) * kb + (j)]), d);                \
    o = _mm512_fmadd_ps(e_, _mm512_mul_ps(s_, _mm512_set1_ps(sa[(i) * kb + (j)])), o);       \
  } while (0)

DVM_TILE_VNNI DVM_TILE_INLINE void i8_512(const targs *t, int r, int bits) {
  TILE_SETUP(int8_t);
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512 o[MR];
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) o[i] = _mm512_setzero_ps();
  for (int64_t j = 0; j < kb; j++, u += bb) {
    __m512i acc[MR];
    PREFETCH_NEXT(u, j);
    const int8_t *ak = a0 + j * block;
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i] = _mm512_setzero_si512();
    if (bits == 4)
      for (int64_t k = 0; k < block; k += 8) {
        __m512i v = _mm512_load_si512(u + k * 8);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) {
          acc[i] = _mm512_dpbusd_epi32(acc[i], lo, _mm512_set1_epi32(dvm_tile_load32(ak + i * kp + k)));
          acc[i] = _mm512_dpbusd_epi32(acc[i], hi, _mm512_set1_epi32(dvm_tile_load32(ak + i * kp + k + 4)));
        }
      }
    else
      for (int64_t k = 0; k < block; k += 4) {
        __m512i v = _mm512_load_si512(u + k * 16);
        _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
          acc[i] = _mm512_dpbusd_epi32(acc[i], v, _mm512_set1_epi32(dvm_tile_load32(ak + i * kp + k)));
      }
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) EPI512(o[i], _mm512_cvtepi32_ps(acc[i]), i, j);
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) _mm512_storeu_ps(t->out + i * t->ldo, o[i]);
}

DVM_TILE_AVX512 DVM_TILE_INLINE void f32_512(const targs *t, int r, int bits) {
  TILE_SETUP(float);
  const __m512i mask = _mm512_set1_epi32(bits == 4 ? 15 : 255);
  __m512 o[MR];
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) o[i] = _mm512_setzero_ps();
  for (int64_t j = 0; j < kb; j++, u += bb) {
    __m512 acc[MR];
    PREFETCH_NEXT(u, j);
    const float *ak = a0 + j * block;
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < block; k += bits == 4 ? 8 : 4) {
      __m512i v = _mm512_load_si512(u + k * (bits == 4 ? 8 : 16));
      _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
        __m512i x = _mm512_srli_epi32(v, 8 * q);
        __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(x, mask));
        _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i] = _mm512_fmadd_ps(lo, _mm512_set1_ps(ak[i * kp + k + q]), acc[i]);
        if (bits == 4) {
          __m512 hi = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(x, 4), mask));
          _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i] = _mm512_fmadd_ps(hi, _mm512_set1_ps(ak[i * kp + k + 4 + q]), acc[i]);
        }
      }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) EPI512(o[i], acc[i], i, j);
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) _mm512_storeu_ps(t->out + i * t->ldo, o[i]);
}

/* ---- AVX2: each group as two halves of 8 columns ------------------------ */

#define EPI256(o, d, i, j, h)                                                                \
  do {                                                                                       \
    __m256 s_ = _mm256_loadu_ps(t->s + (j) * NG + 8 * (h));                                  \
    __m256 z_ = t->z ? _mm256_loadu_ps(t->z + (j) * NG + 8 * (h)) : _mm256_set1_ps(t->zdef); \
    __m256 e_ = _mm256_fnmadd_ps(z_, _mm256_set1_ps(sum[(i) * kb + (j)]), d);                \
    o = _mm256_fmadd_ps(e_, _mm256_mul_ps(s_, _mm256_set1_ps(sa[(i) * kb + (j)])), o);       \
  } while (0)

DVM_TILE_AVX2 DVM_TILE_INLINE void i8_256(const targs *t, int r, int bits) {
  TILE_SETUP(int8_t);
  const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256 o[MR][2];
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) o[i][0] = o[i][1] = _mm256_setzero_ps();
  for (int64_t j = 0; j < kb; j++, u += bb) {
    __m256i acc[MR][2];
    PREFETCH_NEXT(u, j);
    const int8_t *ak = a0 + j * block;
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int64_t k = 0; k < block; k += bits == 4 ? 8 : 4) {
      const uint8_t *p = u + k * (bits == 4 ? 8 : 16);
      _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_load_si256((const __m256i *)(p + 32 * h));
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) {
          __m256i al = _mm256_set1_epi32(dvm_tile_load32(ak + i * kp + k));
          if (bits == 4) { /* each pair sum is at most 2 * 15 * 127: no i16 saturation */
            __m256i ah = _mm256_set1_epi32(dvm_tile_load32(ak + i * kp + k + 4));
            __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, al), _mm256_maddubs_epi16(hi, ah));
            acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_madd_epi16(s16, ones));
          } else { /* code = 16 hi + lo */
            __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, al), ones);
            __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, al), ones);
            acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_add_epi32(pl, _mm256_slli_epi32(ph, 4)));
          }
        }
      }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
      _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) EPI256(o[i][h], _mm256_cvtepi32_ps(acc[i][h]), i, j, h);
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) _mm256_storeu_ps(t->out + i * t->ldo + 8 * h, o[i][h]);
}

DVM_TILE_AVX2 DVM_TILE_INLINE void f32_256(const targs *t, int r, int bits) {
  TILE_SETUP(float);
  const __m256i mask = _mm256_set1_epi32(bits == 4 ? 15 : 255);
  __m256 o[MR][2];
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) o[i][0] = o[i][1] = _mm256_setzero_ps();
  for (int64_t j = 0; j < kb; j++, u += bb) {
    __m256 acc[MR][2];
    PREFETCH_NEXT(u, j);
    const float *ak = a0 + j * block;
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < block; k += bits == 4 ? 8 : 4) {
      const uint8_t *p = u + k * (bits == 4 ? 8 : 16);
      _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_load_si256((const __m256i *)(p + 32 * h));
        _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
          __m256i x = _mm256_srli_epi32(v, 8 * q);
          __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(x, mask));
          _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
            acc[i][h] = _mm256_fmadd_ps(lo, _mm256_set1_ps(ak[i * kp + k + q]), acc[i][h]);
          if (bits == 4) {
            __m256 hi = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(x, 4), mask));
            _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
              acc[i][h] = _mm256_fmadd_ps(hi, _mm256_set1_ps(ak[i * kp + k + 4 + q]), acc[i][h]);
          }
        }
      }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
      _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) EPI256(o[i][h], acc[i][h], i, j, h);
  }
  _Pragma("GCC unroll 4") for (int i = 0; i < r; i++)
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) _mm256_storeu_ps(t->out + i * t->ldo + 8 * h, o[i][h]);
}

/* ---- AMX: up to 16 rows a tile ------------------------------------------ */

/* Where many rows share a group's codes, AMX's tdpbsud sums 16 rows x 16
 * columns x up to 64 k (i8 x u8 into i32, exact: the same sums as
 * vpdpbusd) in one instruction. Each block's sums leave the tile unit for
 * the per-block scaling (EPI512, in the VNNI tile's order: both give the
 * same bits), which then costs more than the products. Measured waits,
 * and what avoids them: a tile load right after the vector stores that
 * unpacked its 4-bit codes (the group is unpacked for all of K first, once
 * for all its row tiles), and vector loads right after the tile store of
 * the sums (two sets of tiles: block j + 1's products are issued before
 * block j's sums are scaled). */

/* ldtilecfg's operand: palette 1, bytes per row and rows of each tile. */
typedef struct amx_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_config;

/* Below this many rows the VNNI tiles are as fast (measured on a Xeon with
 * AMX, K x N 1024 x 1536, 2816 x 1024 and 1024 x 5632: at 5 rows they are
 * 4-14% faster, at 8 either wins by up to 13%, at 12 AMX by 6-25%). */
#define AMX_MIN_ROWS 12

/* Rows of B as the tile unit reads them: kp / 4 rows of 64 bytes, row
 * k / 4 holding 4 k's codes of each of the 16 columns. The 8-bit units
 * are such rows already (unsigned, for tdpbsud). A 4-bit unit is two, its
 * low nibbles then its high, each less its column's zero point: signed
 * codes in -15 .. 15 for tdpbssd, whose sums are then dot - zp * a_sum
 * exactly, so the scaling has no zero-point term. The zero points:
 * t->z, the group's [kb][16] floats, or t->zdef where it is NULL. */
DVM_TILE_AMX static void amx_unpack(const targs *t, const uint8_t *u, uint8_t *rows) {
  const int64_t kb = t->b->kb, units = t->b->block / 8;
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int64_t j = 0; j < kb; j++) { /* each column's zero point in the 4 bytes of its lane */
    __m512i zb = t->z ? _mm512_mullo_epi32(_mm512_cvtps_epi32(_mm512_loadu_ps(t->z + j * NG)),
                                           _mm512_set1_epi32(0x01010101))
                      : _mm512_set1_epi8((char)t->zdef);
    for (int64_t q = 0; q < units; q++, u += UNIT, rows += 2 * UNIT) {
      __m512i v = _mm512_load_si512(u);
      _mm512_store_si512(rows, _mm512_sub_epi8(_mm512_and_si512(v, m4), zb));
      _mm512_store_si512(rows + UNIT, _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), zb));
    }
  }
}

/* Block j's products into tile tc (A's codes in ta, B's rows in tb):
 * signed codes (4 bits) or unsigned (8). */
#define AMX_PRODUCTS(ta, tb, tc, j)                                            \
  do {                                                                         \
    if (next) {                                                                \
      for (int64_t p_ = 0; p_ < bb; p_ += UNIT)                                \
        _mm_prefetch((const char *)next + (j) * bb + p_, _MM_HINT_T0);         \
      _mm_prefetch((const char *)(t->s + (kb + (j)) * NG), _MM_HINT_T0);       \
    }                                                                          \
    _tile_zero(tc);                                                            \
    for (int64_t k0 = (j) * block; k0 < ((j) + 1) * block; k0 += step) {       \
      _tile_loadd(ta, a0 + k0, kp);                                            \
      _tile_loadd(tb, rows + k0 * 16, UNIT);                                   \
      if (bits == 4)                                                           \
        _tile_dpbssd(tc, ta, tb);                                              \
      else                                                                     \
        _tile_dpbsud(tc, ta, tb);                                              \
    }                                                                          \
  } while (0)

/* Block j's sums (in sums) scaled into o: at 4 bits they are dot - zp *
 * a_sum already, the same value EPI512 forms from dot, so the same bits. */
#define AMX_SCALE(j, sums)                                                                     \
  do {                                                                                      \
    if (bits == 4) {                                                                        \
      const __m512 s_ = _mm512_loadu_ps(t->s + (j) * NG);                                   \
      _Pragma("GCC unroll 16") for (int i = 0; i < r; i++) {                                \
        __m512 d_ = _mm512_cvtepi32_ps(_mm512_load_si512((sums) + i * NG));                 \
        o[i] = _mm512_fmadd_ps(d_, _mm512_mul_ps(s_, _mm512_set1_ps(sa[i * kb + (j)])), o[i]); \
      }                                                                                     \
    } else {                                                                                \
      _Pragma("GCC unroll 16") for (int i = 0; i < r; i++)                                  \
          EPI512(o[i], _mm512_cvtepi32_ps(_mm512_load_si512((sums) + i * NG)), i, j);        \
    }                                                                                       \
  } while (0)

/* Tiles: 0 and 1 A's codes (r rows x up to 64), 2 and 3 B's rows (up to
 * 16 of 4 k x 16 columns), 4 and 5 a block's sums (r x 16 i32); the even
 * blocks in 0, 2, 4 and s0, the odd ones in 1, 3, 5 and s1. */
DVM_TILE_AMX DVM_TILE_INLINE void i8_amx(const targs *t, int r, const uint8_t *rows, int bits) {
  /* the next group's codes and scales towards the cache meanwhile, as
   * PREFETCH_NEXT: a step of 16 rows otherwise waits on memory at each
   * group's unpacking */
  const uint8_t *next = t->i0 == 0 ? t->b->codes + (t->g + 1) * t->b->kb * block_bytes(t->b) : NULL;
  const dvm_nbits_b *b = t->b;
  const int64_t kb = b->kb, kp = t->a->kp, block = b->block, step = block < 64 ? block : 64, bb = block_bytes(b);
  const int8_t *a0 = (const int8_t *)t->a->v + t->i0 * kp;
  const float *sa = t->a->scale + t->i0 * kb, *sum = t->a->sum + t->i0 * kb;
  amx_config cfg = {.palette = 1};
  for (int p = 0; p < 2; p++) {
    cfg.colsb[p] = (uint16_t)step;
    cfg.rows[p] = cfg.rows[4 + p] = (uint8_t)r;
    cfg.colsb[2 + p] = cfg.colsb[4 + p] = UNIT;
    cfg.rows[2 + p] = (uint8_t)(step / 4);
  }
  _tile_loadconfig(&cfg);
  _Alignas(64) int32_t s0[DVM_NBITS_AMX_ROWS * NG], s1[DVM_NBITS_AMX_ROWS * NG];
  __m512 o[DVM_NBITS_AMX_ROWS];
  _Pragma("GCC unroll 16") for (int i = 0; i < r; i++) o[i] = _mm512_setzero_ps();
  /* Block j's sums go out only once block j + 1's products are issued,
   * and are scaled a block later still. */
  AMX_PRODUCTS(0, 2, 4, 0);
  for (int64_t j = 0; j < kb; j += 2) {
    if (j + 1 < kb) AMX_PRODUCTS(1, 3, 5, j + 1);
    _tile_stored(4, s0, UNIT);
    if (j > 0) AMX_SCALE(j - 1, s1);
    if (j + 1 < kb) {
      if (j + 2 < kb) AMX_PRODUCTS(0, 2, 4, j + 2);
      _tile_stored(5, s1, UNIT);
      AMX_SCALE(j, s0);
    }
  }
  AMX_SCALE(kb - 1, (kb - 1) % 2 ? s1 : s0);
  _tile_release();
  _Pragma("GCC unroll 16") for (int i = 0; i < r; i++) _mm512_storeu_ps(t->out + i * t->ldo, o[i]);
}

/* The group's B rows (unpacked into scratch by its first row tile at 4
 * bits), then the tile with the row count a constant where it is 16. */
DVM_TILE_AMX static void amx_tile(const targs *t, int r, uint8_t *scratch) {
  const dvm_nbits_b *b = t->b;
  const uint8_t *codes = b->codes + t->g * b->kb * block_bytes(b);
  if (b->bits == 8) {
    if (r == DVM_NBITS_AMX_ROWS)
      i8_amx(t, DVM_NBITS_AMX_ROWS, codes, 8);
    else
      i8_amx(t, r, codes, 8);
    return;
  }
  if (t->i0 == 0) amx_unpack(t, codes, scratch);
  if (r == DVM_NBITS_AMX_ROWS)
    i8_amx(t, DVM_NBITS_AMX_ROWS, scratch, 4);
  else
    i8_amx(t, r, scratch, 4);
}

/* One entry point per variant and bit width, with the row count made a
 * constant so that the accumulators stay in registers. */
#define ENTRY(name, tgt, body, bits)                                          \
  tgt static void name(const targs *t, int r) {                               \
    switch (r) {                                                              \
    case 1: body(t, 1, bits); break;                                          \
    case 2: body(t, 2, bits); break;                                          \
    case 3: body(t, 3, bits); break;                                          \
    default: body(t, MR, bits); break;                                        \
    }                                                                         \
  }
ENTRY(i8_512_4, DVM_TILE_VNNI, i8_512, 4)
ENTRY(i8_512_8, DVM_TILE_VNNI, i8_512, 8)
ENTRY(f32_512_4, DVM_TILE_AVX512, f32_512, 4)
ENTRY(f32_512_8, DVM_TILE_AVX512, f32_512, 8)
ENTRY(i8_256_4, DVM_TILE_AVX2, i8_256, 4)
ENTRY(i8_256_8, DVM_TILE_AVX2, i8_256, 8)
ENTRY(f32_256_4, DVM_TILE_AVX2, f32_256, 4)
ENTRY(f32_256_8, DVM_TILE_AVX2, f32_256, 8)
#endif

enum { V_GENERIC, V_AVX2, V_AVX512, V_COUNT };

/* The variant of the int8 tiles (VNNI needed for AVX-512: without it the
 * AVX2 tiles run) and of the f32 tiles, chosen once. */
static int variants[2];

static void choose(void) {
  for (int int8 = 0; int8 < 2; int8++) {
    variants[int8] = dvm_isa_chosen() >= DVM_ISA_AVX2 ? V_AVX2 : V_GENERIC;
#if DVM_EW_X86
    if (dvm_isa_chosen() == DVM_ISA_AVX512F && __builtin_cpu_supports("avx512bw") &&
        (!int8 || __builtin_cpu_supports("avx512vnni")))
      variants[int8] = V_AVX512;
#endif
  }
}

static int variant(int int8) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose);
  return variants[int8 != 0];
}

const char *dvm_nbits_int8_variant(void) {
  static const char *const names[V_COUNT] = {"generic", "avx2", "avx512-vnni"};
  return variant(1) == V_AVX512 && dvm_isa_amx_int8() ? "amx" : names[variant(1)];
}

static int use_amx(int int8, int64_t m) {
#if DVM_EW_X86
  return int8 && m >= AMX_MIN_ROWS && variant(1) == V_AVX512 && dvm_isa_amx_int8();
#else
  (void)int8, (void)m;
  return 0;
#endif
}

int dvm_nbits_rows(int int8, int64_t m) { return use_amx(int8, m) ? DVM_NBITS_AMX_ROWS : MR; }

size_t dvm_nbits_scratch(const dvm_nbits_b *b, int int8, int64_t m) {
  return use_amx(int8, m) && b->bits == 4 ? (size_t)(b->kb * b->block * 16) : 0;
}

void dvm_nbits_tile(int int8, const dvm_nbits_b *b, const dvm_nbits_q *scales, const dvm_nbits_q *zp,
                    float zdef, const dvm_nbits_a *a, int64_t i0, int r, int64_t g, uint8_t *scratch, float *out,
                    int64_t ldo) {
  static const tile_fn tiles[V_COUNT][2][2] = {
      [V_GENERIC] = {{f32_generic, f32_generic}, {i8_generic, i8_generic}},
#if DVM_EW_X86
      [V_AVX2] = {{f32_256_4, f32_256_8}, {i8_256_4, i8_256_8}},
      [V_AVX512] = {{f32_512_4, f32_512_8}, {i8_512_4, i8_512_8}},
#endif
  };
  const int64_t off = g * b->kb * NG;
  targs t = {.b = b, .s = scales->v + off, .z = zp ? zp->v + off : NULL, .zdef = zdef, .a = a,
             .i0 = i0, .g = g, .ldo = ldo, .out = out};
#if DVM_EW_X86
  if (r > MR) { /* AMX: dvm_nbits_rows allows more rows only there */
    amx_tile(&t, r, scratch);
    return;
  }
#endif
  tiles[variant(int8)][int8 != 0][b->bits == 8](&t, r);
}
