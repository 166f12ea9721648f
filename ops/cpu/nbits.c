/* Block-quantized weights: ONNX Runtime's com.microsoft MatMulNBits and
 * GatherBlockQuantized, as its contrib op docs and CPU kernels define them.
 *
 *   "matmul_nbits" (A [.., K] f32, B [N, kb, block bits / 8] u8, scales
 *       [N * kb] or [N, kb] f32[, zero_points][, g_idx][, bias [N]];
 *       attrs: present:int, K, N, bits, block_size, accuracy_level,
 *       weight_prepacked) -> Y [.., N] f32
 *     Y = A dequant(B)^T (+ bias), B's codes along K in blocks of
 *     block_size (kb = ceil(K / block_size); the last block's codes past
 *     K are read against zeros), dequant = (code - zp) * scale. `present`
 *     is the bit mask of the node's given inputs. zero_points: u8 codes
 *     packed like B ([N, ceil(kb bits / 8)]) or f32 [N, kb]; without them
 *     2^(bits - 1). bits 4 or 8; block_size a power of 2 from 16.
 *     accuracy_level 4: each row of A quantized per block to i8
 *     (symmetric, scale max|a| / 127, rounded half to even), the products
 *     summed exactly in i32 and scaled per block, as ONNX Runtime's MLAS
 *     does (its CompInt8); any other level, or float zero points (which
 *     ONNX Runtime's int8 path does not take): f32 sums. B, scales and zero
 *     points are packed at link when constant (nbits.h), else per call.
 *     A B with a 0 dim (ONNX Runtime's omitted projection) gives bias or
 *     zeros. Refused naming the fact: f16 or bf16 A, bits 2, g_idx,
 *     weight_prepacked layouts.
 *
 *   "gather_block_quantized" (data [R, .., Kq] u8, indices i32/i64, scales
 *       [R, .., kb] f32[, zero_points u8]; attrs: gather_axis,
 *       quantize_axis, block_size, bits) -> [indices.., .., Kq * 8 / bits]
 *     Rows of data dequantized as MatMulNBits dequantizes B (codes low
 *     nibble first at 4 bits, zero points packed the same way, default
 *     2^(bits - 1)); gather_axis 0 and quantize_axis the last, the only
 *     ones ONNX Runtime takes for u8 data. An index outside [-R, R) gives
 *     a row of zeros, as the op is defined. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/nbits.h"
#include "ops/cpu/par.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"

#define NG DVM_NBITS_NG

enum { K_MATMUL_NBITS, K_GATHER_BQ };

enum { IN_ZP = 1 << 3, IN_GIDX = 1 << 4, IN_BIAS = 1 << 5 }; /* bits of `present` */

static dvm_status *bad(const char *op, const char *fmt, const char *what, const dvm_tensor *t,
                       const char *want) {
  char s[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, fmt, op, what, dvm_dtype_name((dvm_dtype)t->dtype),
                        dvm_shape_str(s, t->rank, t->dims), want);
}

/* Fails unless t is dtype dt with numel elements, rank 1 or 2 ([n, per]). */
static dvm_status *check_rows(const char *op, const char *what, const dvm_tensor *t, dvm_dtype dt,
                              int64_t n, int64_t per) {
  int ok = t->dtype == dt && dvm_tensor_numel(t) == n * per &&
           (t->rank == 1 || (t->rank == 2 && t->dims[0] == n && t->dims[1] == per));
  if (ok) return NULL;
  char want[96];
  snprintf(want, sizeof want, "%s [%lld, %lld] or [%lld]", dvm_dtype_name(dt), (long long)n, (long long)per,
           (long long)(n * per));
  return bad(op, "%s: %s is %s %s: want %s", what, t, want);
}

/* ---- MatMulNBits ---------------------------------------------------------- */

typedef struct nbits_attrs {
  int64_t present, k, n, bits, block, level, prepacked, kb;
} nbits_attrs;

static dvm_status *read_attrs(const char *op, const dvm_kernel_args *a, nbits_attrs *at) {
  static const char *const names[] = {"present", "K", "N", "bits", "block_size", "accuracy_level",
                                      "weight_prepacked"};
  int64_t *dst[] = {&at->present, &at->k, &at->n, &at->bits, &at->block, &at->level, &at->prepacked};
  dvm_status *st = dvm_attr_count(op, a->nattrs, 7, 7);
  for (int i = 0; i < 7 && !st; i++) st = dvm_attr_int(op, names[i], &a->attrs[i], dst[i]);
  if (st) return st;
  if (at->bits != 4 && at->bits != 8)
    return dvm_status_new(at->bits == 2 ? DVM_UNIMPLEMENTED : DVM_INVALID_ARGUMENT,
                          "%s: bits %lld is not supported (4 and 8 are)", op, (long long)at->bits);
  if (at->block < 16 || (at->block & (at->block - 1)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: block_size %lld must be a power of 2, at least 16", op,
                          (long long)at->block);
  if (at->k < 0 || at->n < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: K %lld and N %lld must not be negative", op,
                          (long long)at->k, (long long)at->n);
  if (at->prepacked)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: weight_prepacked %lld (a CUDA layout) is not supported",
                          op, (long long)at->prepacked);
  at->kb = (at->k + at->block - 1) / at->block;
  return NULL;
}

/* The node's inputs by role; NULL where not given. */
typedef struct nbits_in {
  const dvm_tensor *a, *b, *scales, *zp, *bias;
} nbits_in;

static dvm_status *check_inputs(const char *op, const dvm_kernel_args *a, const nbits_attrs *at, nbits_in *in,
                                int *empty_b) {
  int given = 0;
  for (int i = 0; i < 6; i++) given += (int)(at->present >> i & 1);
  if ((at->present & 7) != 7 || at->present >> 6 || given != a->nin)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: present %lld does not match %d inputs", op,
                          (long long)at->present, a->nin);
  if (at->present & IN_GIDX)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: g_idx (act-order, deprecated) is not supported", op);
  int i = 3;
  *in = (nbits_in){a->in[0], a->in[1], a->in[2], NULL, NULL};
  if (at->present & IN_ZP) in->zp = a->in[i++];
  if (at->present & IN_BIAS) in->bias = a->in[i++];
  const dvm_tensor *x = in->a, *b = in->b;
  char want[96];
  if (x->dtype != DVM_F32)
    return dvm_status_new(x->dtype == DVM_F16 || x->dtype == DVM_BF16 ? DVM_UNIMPLEMENTED : DVM_INVALID_ARGUMENT,
                          "%s: A of dtype %s is not supported (f32 only)", op, dvm_dtype_name((dvm_dtype)x->dtype));
  if (x->rank < 1 || x->dims[x->rank - 1] != at->k) {
    snprintf(want, sizeof want, "last dim K = %lld", (long long)at->k);
    return bad(op, "%s: %s is %s %s: want %s", "A", x, want);
  }
  const int64_t blob = at->block * at->bits / 8, want_b[3] = {at->n, at->kb, blob};
  int match = b->rank == 3, zero = 0;
  for (int d = 0; d < 3 && match; d++) {
    match = b->dims[d] == want_b[d] || b->dims[d] == 0;
    zero |= b->dims[d] == 0;
  }
  if (b->dtype != DVM_U8 || !match) {
    snprintf(want, sizeof want, "u8 [N, ceil(K / block_size), block_size * bits / 8] = [%lld, %lld, %lld]",
             (long long)at->n, (long long)at->kb, (long long)blob);
    return bad(op, "%s: %s is %s %s: want %s", "B", b, want);
  }
  *empty_b = zero;
  if (in->bias && (in->bias->dtype != DVM_F32 || in->bias->rank != 1 || in->bias->dims[0] != at->n)) {
    snprintf(want, sizeof want, "f32 [%lld]", (long long)at->n);
    return bad(op, "%s: %s is %s %s: want %s", "bias", in->bias, want);
  }
  if (zero) return NULL; /* an omitted projection: the quantization parameters are not read */
  dvm_status *st = check_rows(op, "scales", in->scales, DVM_F32, at->n, at->kb);
  if (!st && in->zp)
    st = in->zp->dtype == DVM_U8 ? check_rows(op, "zero_points", in->zp, DVM_U8, at->n, (at->kb * at->bits + 7) / 8)
                                 : check_rows(op, "zero_points", in->zp, DVM_F32, at->n, at->kb);
  return st;
}

/* The attributes, the inputs and output 0 of a call. */
static dvm_status *check_call(const char *op, const dvm_kernel_args *a, nbits_attrs *at, nbits_in *in,
                              int *empty_b) {
  dvm_status *st = read_attrs(op, a, at);
  if (!st) st = check_inputs(op, a, at, in, empty_b);
  if (st) return st;
  const dvm_tensor *y = a->out[0];
  int64_t dims[DVM_MAX_RANK];
  memcpy(dims, in->a->dims, sizeof(int64_t) * (size_t)in->a->rank);
  dims[in->a->rank - 1] = at->n;
  if (y->dtype != DVM_F32 || y->rank != in->a->rank || memcmp(y->dims, dims, sizeof(int64_t) * (size_t)y->rank)) {
    char want[DVM_SHAPE_STR_SIZE + 8];
    snprintf(want, sizeof want, "f32 ");
    dvm_shape_str(want + 4, in->a->rank, dims);
    return bad(op, "%s: %s is %s %s: want %s", "output", y, want);
  }
  return NULL;
}

dvm_status *dvm_nbits_check(const dvm_kernel_args *a, dvm_nbits_call *c) {
  nbits_attrs at = {0};
  nbits_in in = {0};
  int empty_b = 0;
  dvm_status *st = check_call("matmul_nbits", a, &at, &in, &empty_b);
  if (st) return st;
  *c = (dvm_nbits_call){at.k, at.n, at.bits, at.block, empty_b ? 0 : at.kb,
                        at.n ? dvm_tensor_numel(a->out[0]) / at.n : 0, 0, 0, 0};
  if (in.zp) c->zp = 3, c->zp_f32 = in.zp->dtype == DVM_F32;
  if (in.bias) c->bias = in.zp ? 4 : 3;
  return NULL;
}

static const void *owner(void) { return &dvm_cpu_nbits_kernels[K_MATMUL_NBITS]; }

/* The tiles' forms of B, scales and zero points: the ones packed at link
 * where they fit this call, else packed now into *tmp (freed by the
 * caller). */
typedef struct nbits_forms {
  const dvm_nbits_b *b;
  const dvm_nbits_q *scales, *zp;
  dvm_nbits_b *tmp_b;
  dvm_nbits_q *tmp_q[2];
} nbits_forms;

static const dvm_nbits_q *q_form(const dvm_tensor *t, int input, const nbits_attrs *at, dvm_nbits_q **tmp) {
  int64_t bits = t->dtype == DVM_U8 ? at->bits : 0;
  const dvm_nbits_q *q = dvm_tensor_packed(t, owner(), input);
  if (q && q->n == at->n && q->kb == at->kb && q->bits == bits) return q;
  return *tmp = dvm_nbits_pack_q(bits ? NULL : dvm_tensor_ptr(t), bits ? dvm_tensor_ptr(t) : NULL, bits, at->n, at->kb);
}

static dvm_status *get_forms(const char *op, const nbits_in *in, const nbits_attrs *at, nbits_forms *f) {
  const dvm_nbits_b *b = dvm_tensor_packed(in->b, owner(), 1);
  if (!(b && b->k == at->k && b->n == at->n && b->bits == at->bits && b->block == at->block))
    b = f->tmp_b = dvm_nbits_pack_b(dvm_tensor_ptr(in->b), at->k, at->n, at->bits, at->block);
  f->b = b;
  f->scales = q_form(in->scales, 2, at, &f->tmp_q[0]);
  f->zp = in->zp ? q_form(in->zp, 3, at, &f->tmp_q[1]) : NULL;
  if (!f->b || !f->scales || (in->zp && !f->zp))
    return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory packing the weights", op);
  return NULL;
}

static void free_forms(nbits_forms *f) {
  dvm_nbits_b_free(f->tmp_b);
  dvm_nbits_q_free(f->tmp_q[0]);
  dvm_nbits_q_free(f->tmp_q[1]);
}

/* A's side: rows of kp values, zero past K, with per-block scales and sums. */
typedef struct a_job {
  const float *x;
  int64_t k, block, kb, kp;
  int int8;
  void *v;
  float *scale, *sum;
} a_job;

/* Rounds v (|v| < 2^22) to an integer, half to even as vcvtps2dq does:
 * adding 1.5 * 2^23 leaves no fraction bits. Vectorizes, where
 * nearbyintf is a libm call per element without SSE4.1. */
static inline float round_even(float v) { return (v + 12582912.f) - 12582912.f; }

/* One block of A as floats, zero past len; scale 1 and their sum. */
static inline __attribute__((always_inline)) void copy_block(const float *x, int64_t len, int64_t block, float *dst,
                                                             float *scale, float *sum) {
  float fsum = 0;
  _Pragma("omp simd reduction(+:fsum)") for (int64_t t = 0; t < len; t++) fsum += dst[t] = x[t];
  memset(dst + len, 0, sizeof(float) * (size_t)(block - len));
  *scale = 1;
  *sum = fsum;
}

#define LANES 16

/* Lanes l < w take the max (and the NaN flag) of lane l + w: a halving
 * tree, each step unrolled so that it is one vector operation. */
#define HALVE(w, m, nan)                                                         \
  for (int l = 0; l < (w); l++) {                                                \
    (m)[l] = (m)[l + (w)] > (m)[l] ? (m)[l + (w)] : (m)[l];                      \
    (nan)[l] |= (nan)[l + (w)];                                                  \
  }

/* One block of A as i8 codes (MLAS's CompInt8 rule: scale max|a| / 127,
 * codes a * 127 / max|a| rounded half to even), zero past len; its scale
 * and the sum of its codes. A NaN makes the scale NaN, so that Y's row is
 * NaN. The max runs in 16 vertical lanes, then a halving tree: GCC's own
 * reduction goes through memory and a scalar loop per block. */
static inline __attribute__((always_inline)) void quantize_block(const float *x, int64_t len, int64_t block,
                                                                 int8_t *dst, float *scale, float *sum) {
  float m[LANES] = {0};
  int32_t nan[LANES] = {0}, isum = 0;
  int64_t t = 0;
  for (; t + LANES <= len; t += LANES)
    for (int l = 0; l < LANES; l++) {
      float a = fabsf(x[t + l]);
      m[l] = a > m[l] ? a : m[l];
      nan[l] |= a != a;
    }
  for (int l = 0; t + l < len; l++) {
    float a = fabsf(x[t + l]);
    m[l] = a > m[l] ? a : m[l];
    nan[l] |= a != a;
  }
  HALVE(8, m, nan)
  HALVE(4, m, nan)
  HALVE(2, m, nan)
  HALVE(1, m, nan)
  float amax = m[0], inv = amax != 0 ? 127.f / amax : 0;
  _Pragma("omp simd") for (t = 0; t < len; t++) {
    float q = round_even(x[t] * inv);
    dst[t] = (int8_t)(q >= -127 && q <= 127 ? q : 0);
  }
  memset(dst + len, 0, (size_t)(block - len));
  _Pragma("omp simd reduction(+:isum)") for (t = 0; t < block; t++) isum += dst[t];
  *scale = nan[0] ? NAN : amax / 127.f;
  *sum = (float)isum;
}

/* Row `row` of A block by block (the row's loop inside the vector clone:
 * no indirect call per block). */
DVM_VEC static void prepare_row(const a_job *j, int64_t row) {
  for (int64_t b = 0; b < j->kb; b++) {
    int64_t k0 = b * j->block, len = j->k - k0 < j->block ? j->k - k0 : j->block, at = row * j->kp + k0;
    const float *x = j->x + row * j->k + k0;
    float *scale = &j->scale[row * j->kb + b], *sum = &j->sum[row * j->kb + b];
    if (!j->int8)
      copy_block(x, len, j->block, (float *)j->v + at, scale, sum);
    else
      quantize_block(x, len, j->block, (int8_t *)j->v + at, scale, sum);
  }
}

#if DVM_EW_X86
#include "ops/cpu/x86_tile.h"

/* quantize_block in AVX-512, 16 values a step (the block a multiple of
 * 16): the same max, NaN flag, rounding (vcvtps2dq rounds half to even,
 * as round_even) and codes, without the scalar tree and tail loops that
 * made the generic one cost more than the AMX products of 16 rows. */
DVM_TILE_AVX512 static void quantize_block_512(const float *x, int64_t len, int64_t block, int8_t *dst,
                                               float *scale, float *sum) {
  __m512 m = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t t = 0; t < len; t += 16) {
    __mmask16 k = len - t >= 16 ? 0xffff : (__mmask16)((1u << (len - t)) - 1);
    __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + t));
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = _mm512_max_ps(v, m); /* a NaN v leaves m */
  }
  float amax = _mm512_reduce_max_ps(m), inv = amax != 0 ? 127.f / amax : 0;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  __m512i isum = _mm512_setzero_si512();
  for (int64_t t = 0; t < block; t += 16) {
    __mmask16 k = t >= len ? 0 : len - t >= 16 ? 0xffff : (__mmask16)((1u << (len - t)) - 1);
    __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + t), vinv));
    /* out of range: a NaN (vcvtps2dq gives INT_MIN), as the generic loop's 0 */
    __mmask16 in = _mm512_cmp_epi32_mask(q, lo, _MM_CMPINT_NLT) & _mm512_cmp_epi32_mask(q, hi, _MM_CMPINT_LE);
    q = _mm512_maskz_mov_epi32(in, q);
    _mm_storeu_si128((__m128i *)(dst + t), _mm512_cvtepi32_epi8(q));
    isum = _mm512_add_epi32(isum, q);
  }
  *scale = nan ? NAN : amax / 127.f;
  *sum = (float)_mm512_reduce_add_epi32(isum);
}

DVM_TILE_AVX512 static void prepare_row_512(const a_job *j, int64_t row) {
  for (int64_t b = 0; b < j->kb; b++) {
    int64_t k0 = b * j->block, len = j->k - k0 < j->block ? j->k - k0 : j->block;
    quantize_block_512(j->x + row * j->k + k0, len, j->block, (int8_t *)j->v + row * j->kp + k0,
                       &j->scale[row * j->kb + b], &j->sum[row * j->kb + b]);
  }
}
#endif

static void prepare_rows(void *ctx, int64_t s, int64_t e) {
  const a_job *j = ctx;
#if DVM_EW_X86
  if (j->int8 && dvm_isa_chosen() == DVM_ISA_AVX512F) { /* blocks are powers of 2 from 16 */
    for (int64_t row = s; row < e; row++) prepare_row_512(j, row);
    return;
  }
#endif
  for (int64_t row = s; row < e; row++) prepare_row(j, row);
}

typedef struct y_job {
  const nbits_forms *f;
  const dvm_nbits_a *a;
  int int8;
  float zdef;
  int64_t m, n;
  const float *bias;
  float *y;
  uint8_t *scratch; /* scratch_bytes for each thread (dvm_par_slot) */
  size_t scratch_bytes;
} y_job;

/* A full group's tiles write Y's rows; the last, narrower one goes
 * through out. */
static void run_groups(void *ctx, int64_t s, int64_t e) {
  const y_job *j = ctx;
  const int mr = dvm_nbits_rows(j->int8, j->m);
  uint8_t *scratch = j->scratch ? j->scratch + (size_t)dvm_par_slot() * j->scratch_bytes : NULL;
  float out[DVM_NBITS_AMX_ROWS * NG];
  for (int64_t g = s; g < e; g++) {
    int64_t c0 = g * NG, w = j->n - c0 < NG ? j->n - c0 : NG;
    for (int64_t i0 = 0; i0 < j->m; i0 += mr) {
      int r = j->m - i0 < mr ? (int)(j->m - i0) : mr;
      float *y = j->y + i0 * j->n + c0;
      dvm_nbits_tile(j->int8, j->f->b, j->f->scales, j->f->zp, j->zdef, j->a, i0, r, g, scratch,
                     w == NG ? y : out, w == NG ? j->n : NG);
      for (int i = 0; i < r && (w < NG || j->bias); i++)
        for (int64_t c = 0; c < w; c++)
          y[i * j->n + c] = (w < NG ? out[i * NG + c] : y[i * j->n + c]) + (j->bias ? j->bias[c0 + c] : 0);
    }
  }
}

static dvm_status *matmul_nbits(const dvm_kernel_args *a) {
  const char *op = "matmul_nbits";
  nbits_attrs at = {0};
  nbits_in in = {0};
  int empty_b = 0;
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 6, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = check_call(op, a, &at, &in, &empty_b);
  if (st) return st;
  const dvm_tensor *y = a->out[0];
  int64_t m = at.n ? dvm_tensor_numel(y) / at.n : 0;
  float *py = dvm_tensor_ptr(y);
  const float *bias = in.bias ? dvm_tensor_ptr(in.bias) : NULL;
  if (!m || !at.n) return NULL;
  if (empty_b || !at.kb) { /* no weights: Y is the bias, or zeros */
    for (int64_t i = 0; i < m; i++)
      for (int64_t c = 0; c < at.n; c++) py[i * at.n + c] = bias ? bias[c] : 0;
    return NULL;
  }
  nbits_forms f = {0};
  /* float zero points: f32 sums at every level, as ONNX Runtime (its int8 path takes u8 ones) */
  int int8 = at.level == 4 && !(in.zp && in.zp->dtype == DVM_F32), threads = dvm_kargs_threads(a);
  a_job aj = {.x = dvm_tensor_ptr(in.a), .k = at.k, .block = at.block, .kb = at.kb, .kp = at.kb * at.block,
              .int8 = int8};
  size_t vbytes, qbytes;
  if (dvm_mul_overflows((size_t)m, (size_t)aj.kp * (int8 ? 1 : sizeof(float)), &vbytes) ||
      dvm_mul_overflows((size_t)m, (size_t)at.kb * sizeof(float), &qbytes))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: A of %lld rows is too large", op, (long long)m);
  aj.v = aligned_alloc(64, (vbytes + 63) & ~(size_t)63);
  aj.scale = malloc(qbytes);
  aj.sum = malloc(qbytes);
  if (!aj.v || !aj.scale || !aj.sum)
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for A's %lld rows", op, (long long)m);
  if (!st) st = get_forms(op, &in, &at, &f);
  y_job yj = {.f = &f, .int8 = int8, .zdef = (float)(1 << (at.bits - 1)), .m = m, .n = at.n, .bias = bias,
              .y = py};
  if (!st && (yj.scratch_bytes = dvm_nbits_scratch(f.b, int8, m)) &&
      !(yj.scratch = aligned_alloc(64, yj.scratch_bytes * (size_t)(threads > 1 ? threads : 1))))
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for the unpacked weights", op);
  if (!st) {
    dvm_par_for(threads, m, 1, prepare_rows, &aj);
    dvm_nbits_a av = {.v = aj.v, .scale = aj.scale, .sum = aj.sum, .kp = aj.kp};
    yj.a = &av;
    dvm_par_for(threads, f.b->groups, 1, run_groups, &yj);
  }
  free(yj.scratch);
  free_forms(&f);
  free(aj.v);
  free(aj.scale);
  free(aj.sum);
  return st;
}

/* B (input 1), scales (2) and zero points (3, when given) in the tiles'
 * layout, for the K, N, bits and block_size the linker saw (attributes 1
 * to 4; `present`, attribute 0, says whether input 3 is zero points). A
 * constant that does not fit is left to the kernel, which says why. */
static dvm_status *nbits_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *h, int nattrs,
                                 void **data, void (**free_data)(void *)) {
  if (nattrs < 5) return NULL;
  for (int i = 0; i < 5; i++)
    if (!h[i].known) return NULL;
  nbits_attrs at = {.present = h[0].value, .k = h[1].value, .n = h[2].value, .bits = h[3].value,
                    .block = h[4].value};
  if ((at.bits != 4 && at.bits != 8) || at.block < 16 || (at.block & (at.block - 1)) || at.k <= 0 || at.n <= 0)
    return NULL;
  at.kb = (at.k + at.block - 1) / at.block;
  const int64_t numel = dvm_tensor_numel(t);
  if (input == 1 && t->dtype == DVM_U8 && t->rank == 3 && t->dims[0] == at.n && t->dims[1] == at.kb &&
      t->dims[2] == at.block * at.bits / 8) {
    *data = dvm_nbits_pack_b(dvm_tensor_ptr(t), at.k, at.n, at.bits, at.block);
    *free_data = dvm_nbits_b_free;
  } else if ((input == 2 || (input == 3 && (at.present & IN_ZP))) && t->dtype == DVM_F32 && numel == at.n * at.kb) {
    *data = dvm_nbits_pack_q(dvm_tensor_ptr(t), NULL, 0, at.n, at.kb);
    *free_data = dvm_nbits_q_free;
  } else if (input == 3 && (at.present & IN_ZP) && t->dtype == DVM_U8 &&
             numel == at.n * ((at.kb * at.bits + 7) / 8)) {
    *data = dvm_nbits_pack_q(NULL, dvm_tensor_ptr(t), at.bits, at.n, at.kb);
    *free_data = dvm_nbits_q_free;
  }
  return NULL;
}

/* ---- GatherBlockQuantized ------------------------------------------------- */

static dvm_status *gather_block_quantized(const dvm_kernel_args *a) {
  const char *op = "gather_block_quantized";
  int64_t gaxis, qaxis, block, bits;
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 4, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(op, a->nattrs, 4, 4);
  if (!st) st = dvm_attr_int(op, "gather_axis", &a->attrs[0], &gaxis);
  if (!st) st = dvm_attr_int(op, "quantize_axis", &a->attrs[1], &qaxis);
  if (!st) st = dvm_attr_int(op, "block_size", &a->attrs[2], &block);
  if (!st) st = dvm_attr_int(op, "bits", &a->attrs[3], &bits);
  if (st) return st;
  const dvm_tensor *data = a->in[0], *idx = a->in[1], *scales = a->in[2], *zp = a->nin > 3 ? a->in[3] : NULL;
  const dvm_tensor *y = a->out[0];
  if (data->dtype != DVM_U8)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: data of dtype %s is not supported (u8 only)", op,
                          dvm_dtype_name((dvm_dtype)data->dtype));
  if (bits != 4 && bits != 8)
    return dvm_status_new(bits == 2 ? DVM_UNIMPLEMENTED : DVM_INVALID_ARGUMENT,
                          "%s: bits %lld is not supported (4 and 8 are)", op, (long long)bits);
  if (block < 16 || (block & (block - 1)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: block_size %lld must be a power of 2, at least 16", op,
                          (long long)block);
  int r = data->rank;
  if (r < 2 || (gaxis != 0 && gaxis != -r) || (qaxis != r - 1 && qaxis != -1))
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: u8 data of rank %d takes gather_axis 0 and quantize_axis the last (got %lld and %lld)",
                          op, r, (long long)gaxis, (long long)qaxis);
  if (idx->dtype != DVM_I32 && idx->dtype != DVM_I64)
    return bad(op, "%s: %s is %s %s: want %s", "indices", idx, "i32 or i64");
  const int64_t per = 8 / bits, rows = data->dims[0], kq = data->dims[r - 1] * per, kb = (kq + block - 1) / block;
  int64_t inner = 1;
  for (int d = 1; d < r - 1; d++) inner *= data->dims[d];
  char want[DVM_SHAPE_STR_SIZE + 8];
  int64_t sd[DVM_MAX_RANK];
  memcpy(sd, data->dims, sizeof(int64_t) * (size_t)r);
  sd[r - 1] = kb;
  if (scales->dtype != DVM_F32 || scales->rank != r || memcmp(scales->dims, sd, sizeof(int64_t) * (size_t)r)) {
    snprintf(want, sizeof want, "f32 ");
    dvm_shape_str(want + 4, r, sd);
    return bad(op, "%s: %s is %s %s: want %s", "scales", scales, want);
  }
  sd[r - 1] = (kb + per - 1) / per;
  if (zp && (zp->dtype != DVM_U8 || zp->rank != r || memcmp(zp->dims, sd, sizeof(int64_t) * (size_t)r))) {
    snprintf(want, sizeof want, "u8 ");
    dvm_shape_str(want + 3, r, sd);
    return bad(op, "%s: %s is %s %s: want %s", "zero_points", zp, want);
  }
  int64_t od[DVM_MAX_RANK], nidx = dvm_tensor_numel(idx);
  int orank = idx->rank + r - 1;
  if (orank > DVM_MAX_RANK) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output rank %d is too large", op, orank);
  memcpy(od, idx->dims, sizeof(int64_t) * (size_t)idx->rank);
  memcpy(od + idx->rank, data->dims + 1, sizeof(int64_t) * (size_t)(r - 1));
  od[orank - 1] = kq;
  if (y->dtype != DVM_F32 || y->rank != orank || memcmp(y->dims, od, sizeof(int64_t) * (size_t)orank)) {
    snprintf(want, sizeof want, "f32 ");
    dvm_shape_str(want + 4, orank, od);
    return bad(op, "%s: %s is %s %s: want %s", "output", y, want);
  }
  const uint8_t *pd = dvm_tensor_ptr(data), *pz = zp ? dvm_tensor_ptr(zp) : NULL;
  const float *ps = dvm_tensor_ptr(scales);
  float *py = dvm_tensor_ptr(y);
  const int64_t zrow = (kb + per - 1) / per, drow = kq / per;
  for (int64_t i = 0; i < nidx; i++) {
    int64_t v = idx->dtype == DVM_I32 ? ((const int32_t *)dvm_tensor_ptr(idx))[i] : ((const int64_t *)dvm_tensor_ptr(idx))[i];
    v += v < 0 ? rows : 0;
    for (int64_t q = 0; q < inner; q++) {
      float *out = py + (i * inner + q) * kq;
      if (v < 0 || v >= rows) { /* out of range: zeros, as the op defines */
        memset(out, 0, sizeof(float) * (size_t)kq);
        continue;
      }
      int64_t row = v * inner + q;
      const uint8_t *src = pd + row * drow;
      for (int64_t t = 0; t < kq; t++) {
        int64_t b = t / block;
        int code = bits == 4 ? src[t / 2] >> (t & 1) * 4 & 15 : src[t];
        int z = !pz ? 1 << (bits - 1) : bits == 4 ? pz[row * zrow + b / 2] >> (b & 1) * 4 & 15 : pz[row * zrow + b];
        out[t] = (float)(code - z) * ps[row * kb + b];
      }
    }
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_nbits_kernels[] = {
    [K_MATMUL_NBITS] = {"matmul_nbits", DVM_DEVICE_CPU, matmul_nbits, "matmul_nbits", .prepack = nbits_prepack,
                        .prepack_replaces = 1, .dtypes = DVM_DTYPE_BIT(DVM_F32), .form = DVM_FORM_MATMUL_NBITS},
    [K_GATHER_BQ] = {"gather_block_quantized", DVM_DEVICE_CPU, gather_block_quantized, "gather_block_quantized",
                     .dtypes = DVM_DTYPE_BIT(DVM_U8)},
    {NULL, 0, NULL, NULL, 0},
};
