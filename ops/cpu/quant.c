/* Quantization: the linear (de)quantizers and the integer products of the
 * ONNX default domain, as ONNX Runtime runs them on the CPU.
 *
 *   quantize_linear(in: x, scale[, zp]; attrs: axis:int, block_size:int) -> y
 *     y = saturate(round_half_even(x / scale) + zp); x and scale f32, f16 or
 *     bf16; zp and y u8, i8, i16 or u16 (u8 and zp 0 when zp is absent). scale
 *     and zp: one element (per tensor), [x.dims[axis]] (per axis), or, with
 *     block_size > 0, x's shape with dim `axis` ceil(dim / block_size)
 *     (blocked). y has x's shape.
 *   dequantize_linear(in: x, scale[, zp]; attrs: axis:int, block_size:int) -> y
 *     y = (x - zp) * scale, in f32 then stored as scale's dtype; x and zp
 *     u8, i8, i16, u16 or i32; scale and zp shaped as above.
 *   dynamic_quantize_linear(in: x f32) -> y u8, y_scale f32 [], y_zp u8 []
 *     scale = (max(x, 0) - min(x, 0)) / 255 (1 when that is 0, as ONNX
 *     Runtime), zp = round_half_even(clamp(-min(x, 0) / scale, 0, 255)), y as
 *     quantize_linear. Shape function "dynamic_quantize_linear".
 *   matmul_integer(in: a, b[, a_zp[, b_zp]]) -> y i32
 *     ONNX MatMulInteger: (a - a_zp) x (b - b_zp) with MatMul's shapes and
 *     broadcasting; a, b u8 or i8; a_zp one element or [M] (per row), b_zp
 *     one element or [N] (per column). Shape function "matmul".
 *   qlinear_matmul(in: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> y
 *     the i32 product above requantized: y = saturate(round_half_even(acc *
 *     a_scale * b_scale / y_scale) + y_zp); scales f32 or f16 (b_scale and
 *     b_zp may be [N]); y has y_zp's dtype. Shape function "qlinear_matmul".
 *   conv_integer(in: x, w[, x_zp[, w_zp]]; attrs: strides, pads, dilations,
 *       group) -> y i32
 *     ONNX ConvInteger, Conv's geometry (shapefuncs/window.h); x_zp one
 *     element, w_zp one element or [M]. Shape function "conv_integer".
 *   qlinear_conv(in: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B];
 *       attrs: as conv_integer) -> y
 *     the i32 convolution plus B (i32 [M]) requantized as qlinear_matmul;
 *     w_scale and w_zp one element or [M]. Shape function "qlinear_conv".
 *   dynamic_quantize_matmul(in: a f32, b, b_scale[, b_zp[, bias]]) -> y f32
 *     com.microsoft DynamicQuantizeMatMul: a quantized to u8 as
 *     dynamic_quantize_linear does, then y = acc * a_scale * b_scale +
 *     bias (b_scale, b_zp and bias one element or [N]).
 *   matmul_integer_to_float(in: a, b, a_scale, b_scale[, a_zp[, b_zp[,
 *       bias]]]) -> y f32
 *     com.microsoft MatMulIntegerToFloat: the same from a quantized a.
 *     Both: shape function "matmul_integer".
 *
 * The matrix products run on oneDNN's u8s8/s8s8 GEMM where it sums
 * exactly (AVX-512 VNNI: dvm_isa_int8_dot), else widen their operands,
 * zero points subtracted, into i32 scratch and accumulate in i32; either
 * is exact (|a - zp| <= 255, so sums of up to 2^15 products cannot
 * overflow; longer ones are refused). The convolutions likewise run on
 * oneDNN's integer convolution (conv.h: x u8 or s8 less its zero point, W
 * in s8, its zero points added after: conv_acc) or the i32 loop. Requantizing
 * computes in f32, as ONNX Runtime's MLAS does, so results equal its own
 * up to the rounding of acc * scale when that lands within an f32 ulp of a
 * half. */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>

#include "kernel.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/qgemm.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/matmul.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/window.h"

#define MAX_K (1 << 15) /* longest i32 dot product that cannot overflow */

static dvm_status *oom(const char *op) {
  return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
}

static dvm_status *bad_dtype(const char *op, const char *what, const dvm_tensor *t, const char *want) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s is %s: want %s", op, what,
                        dvm_dtype_name((dvm_dtype)t->dtype), want);
}

static int is_int(int dt) {
  return dt == DVM_U8 || dt == DVM_I8 || dt == DVM_I16 || dt == DVM_U16 || dt == DVM_I32;
}
static int is_byte(int dt) { return dt == DVM_U8 || dt == DVM_I8; }
static int is_float(int dt) { return dvm_vec_is_float(dt); }

int32_t dvm_cpu_quant_int_at(const dvm_tensor *t, int64_t i) {
  const void *p = dvm_tensor_ptr(t);
  switch (t->dtype) {
  case DVM_U8: return ((const uint8_t *)p)[i];
  case DVM_I8: return ((const int8_t *)p)[i];
  case DVM_I16: return ((const int16_t *)p)[i];
  case DVM_U16: return ((const uint16_t *)p)[i];
  default: return ((const int32_t *)p)[i];
  }
}

static float float_at(const dvm_tensor *t, int64_t i) {
  const void *p = dvm_tensor_ptr(t);
  switch (t->dtype) {
  case DVM_F16: return dvm_f16_to_f32(((const uint16_t *)p)[i]);
  case DVM_BF16: return dvm_bf16_to_f32(((const uint16_t *)p)[i]);
  default: return ((const float *)p)[i];
  }
}

static void range_of(int dt, int32_t *lo, int32_t *hi) {
  *lo = dt == DVM_U8 || dt == DVM_U16 ? 0 : dt == DVM_I8 ? -128 : -32768;
  *hi = dt == DVM_U8 ? 255 : dt == DVM_I8 ? 127 : dt == DVM_U16 ? 65535 : 32767;
}

/* r saturated to [lo, hi]; a NaN (x / scale of an infinite x and scale)
 * to lo, as ONNX Runtime's MLAS clamps it (its max(NaN, lo) is lo). */
#define SATURATE(r, lo, hi) ((r) >= (float)(lo) ? ((r) <= (float)(hi) ? (int32_t)(r) : (hi)) : (lo))

/* round_half_even(v) + zp, saturated to dtype dt, stored at y[i]. */
static void store_q(void *y, int dt, int64_t i, float v, int32_t zp) {
  int32_t lo, hi;
  range_of(dt, &lo, &hi);
  float r = nearbyintf(v) + (float)zp; /* the default rounding mode: half to even */
  int32_t q = SATURATE(r, lo, hi);
  if (dt == DVM_U8) ((uint8_t *)y)[i] = (uint8_t)q;
  else if (dt == DVM_I8) ((int8_t *)y)[i] = (int8_t)q;
  else if (dt == DVM_U16) ((uint16_t *)y)[i] = (uint16_t)q;
  else ((int16_t *)y)[i] = (int16_t)q;
}

/* store_q over a row with one scale and zero point, for the byte types:
 * the same expression, in a loop the vector clones vectorize. */
#define QUANT_ROW(name, T, LO, HI)                                                     \
  DVM_VEC static void name(const float *x, int64_t n, float scale, int32_t zp, T *y) { \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                              \
      float r = nearbyintf(x[i] / scale) + (float)zp;                                  \
      y[i] = (T)SATURATE(r, LO, HI);                                                   \
    }                                                                                  \
  }
QUANT_ROW(quant_row_u8, uint8_t, 0, 255)
QUANT_ROW(quant_row_i8, int8_t, -128, 127)

/* (x - zp) * scale over a row of bytes into f32. */
#define DEQUANT_ROW(name, T)                                                           \
  DVM_VEC static void name(const T *x, int64_t n, float scale, int32_t zp, float *y) { \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (float)(x[i] - zp) * scale; \
  }
DEQUANT_ROW(dequant_row_u8, uint8_t)
DEQUANT_ROW(dequant_row_i8, int8_t)

void dvm_cpu_quant_dequant_bytes(const dvm_tensor *t, int64_t at, int64_t n, float scale, int32_t zp, float *y) {
  if (t->dtype == DVM_U8) dequant_row_u8((const uint8_t *)dvm_tensor_ptr(t) + at, n, scale, zp, y);
  else dequant_row_i8((const int8_t *)dvm_tensor_ptr(t) + at, n, scale, zp, y);
}

/* ---- quantize_linear, dequantize_linear ---- */

/* Where each element of x finds its scale and zero point: x seen as
 * [outer, len, inner] around `axis`; scale is per tensor (1 element), per
 * axis ([len]) or blocked ([outer, ceil(len / block), inner]). */
typedef struct qparams {
  int64_t outer, len, inner, block; /* block 0: per tensor or per axis */
  int per_axis;
} qparams;

static dvm_status *qparams_of(const char *op, const dvm_tensor *x, const dvm_tensor *scale,
                              const dvm_tensor *zp, const dvm_value *attrs, int nattrs, qparams *q) {
  int64_t axis = 1, block = 0;
  dvm_status *st = dvm_attr_count(op, nattrs, 2, 2);
  if (!st) st = dvm_attr_int(op, "axis", &attrs[0], &axis);
  if (!st) st = dvm_attr_int(op, "block_size", &attrs[1], &block);
  if (st) return st;
  char sx[DVM_SHAPE_STR_SIZE], ss[DVM_SHAPE_STR_SIZE];
  /* per tensor, a one-element zero point of any shape goes with a one-element
   * scale of any shape (ONNX Runtime takes [] with [1] and [1] with []) */
  int one = block == 0 && dvm_tensor_numel(scale) == 1 && (!zp || dvm_tensor_numel(zp) == 1);
  if (zp && !one && (zp->rank != scale->rank || memcmp(zp->dims, scale->dims, sizeof(int64_t) * (size_t)scale->rank)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: zero point %s must have the scale's shape %s", op,
                          dvm_shape_str(sx, zp->rank, zp->dims), dvm_shape_str(ss, scale->rank, scale->dims));
  memset(q, 0, sizeof *q);
  q->outer = dvm_tensor_numel(x), q->len = 1, q->inner = 1;
  if (dvm_tensor_numel(scale) == 1 && block == 0) return NULL; /* per tensor */
  int ax = 0;
  if (x->rank == 0 || (st = dvm_attr_axis_in(op, "axis", axis, x->rank, &ax)))
    return st ? st : dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a scalar x takes one scale", op);
  q->outer = 1, q->len = x->dims[ax];
  for (int d = 0; d < ax; d++) q->outer *= x->dims[d];
  for (int d = ax + 1; d < x->rank; d++) q->inner *= x->dims[d];
  if (block < 0) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: block_size %lld is negative", op, (long long)block);
  if (block == 0) {
    if (scale->rank != 1 || scale->dims[0] != q->len)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: scale %s must have one element or [%lld] (x %s, axis %d)", op,
                            dvm_shape_str(ss, scale->rank, scale->dims), (long long)q->len,
                            dvm_shape_str(sx, x->rank, x->dims), ax);
    q->per_axis = 1;
    return NULL;
  }
  int ok = scale->rank == x->rank;
  for (int d = 0; ok && d < x->rank; d++)
    ok = scale->dims[d] == (d == ax ? (x->dims[d] + block - 1) / block : x->dims[d]);
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: scale %s does not block x %s along axis %d by %lld", op,
                          dvm_shape_str(ss, scale->rank, scale->dims), dvm_shape_str(sx, x->rank, x->dims), ax,
                          (long long)block);
  q->block = block;
  return NULL;
}

/* The scale index of element (o, a, i). */
static int64_t qindex(const qparams *q, int64_t o, int64_t a, int64_t i) {
  if (q->block) return (o * ((q->len + q->block - 1) / q->block) + a / q->block) * q->inner + i;
  return q->per_axis ? a : 0;
}

static dvm_status *quantize_linear(const dvm_kernel_args *a) {
  const char *op = "quantize_linear";
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 3, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *s = a->in[1], *zp = a->nin > 2 ? a->in[2] : NULL;
  dvm_tensor *y = a->out[0];
  if (!is_float(x->dtype)) return bad_dtype(op, "x", x, "f32, f16 or bf16");
  if (s->dtype != x->dtype) return bad_dtype(op, "scale", s, dvm_dtype_name((dvm_dtype)x->dtype));
  int want = zp ? zp->dtype : DVM_U8;
  if (y->dtype != want || (y->dtype != DVM_U8 && y->dtype != DVM_I8 && y->dtype != DVM_I16 && y->dtype != DVM_U16))
    return bad_dtype(op, "y", y, zp ? "the zero point's dtype, u8, i8, i16 or u16" : "u8");
  qparams q;
  if ((st = qparams_of(op, x, s, zp, a->attrs, a->nattrs, &q))) return st;
  void *yp = dvm_tensor_ptr(y);
  if (!q.per_axis && !q.block && x->dtype == DVM_F32 && is_byte(y->dtype)) { /* per tensor: the vector loop */
    float sc = float_at(s, 0);
    int32_t z = zp ? dvm_cpu_quant_int_at(zp, 0) : 0;
    if (y->dtype == DVM_U8) quant_row_u8(dvm_tensor_ptr(x), q.outer, sc, z, yp);
    else quant_row_i8(dvm_tensor_ptr(x), q.outer, sc, z, yp);
    return NULL;
  }
  for (int64_t o = 0, e = 0; o < q.outer; o++)
    for (int64_t k = 0; k < q.len; k++)
      for (int64_t i = 0; i < q.inner; i++, e++) {
        int64_t j = qindex(&q, o, k, i);
        store_q(yp, y->dtype, e, float_at(x, e) / float_at(s, j), zp ? dvm_cpu_quant_int_at(zp, j) : 0);
      }
  return NULL;
}

static dvm_status *dequantize_linear(const dvm_kernel_args *a) {
  const char *op = "dequantize_linear";
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 3, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *s = a->in[1], *zp = a->nin > 2 ? a->in[2] : NULL;
  dvm_tensor *y = a->out[0];
  if (!is_int(x->dtype)) return bad_dtype(op, "x", x, "u8, i8, i16, u16 or i32");
  if (zp && zp->dtype != x->dtype) return bad_dtype(op, "the zero point", zp, dvm_dtype_name((dvm_dtype)x->dtype));
  if (!is_float(s->dtype)) return bad_dtype(op, "scale", s, "f32, f16 or bf16");
  if (y->dtype != s->dtype) return bad_dtype(op, "y", y, dvm_dtype_name((dvm_dtype)s->dtype));
  qparams q;
  if ((st = qparams_of(op, x, s, zp, a->attrs, a->nattrs, &q))) return st;
  void *yp = dvm_tensor_ptr(y);
  if (!q.per_axis && !q.block && y->dtype == DVM_F32 && is_byte(x->dtype)) { /* per tensor: the vector loop */
    float sc = float_at(s, 0);
    int32_t z = zp ? dvm_cpu_quant_int_at(zp, 0) : 0;
    if (x->dtype == DVM_U8) dequant_row_u8(dvm_tensor_ptr(x), q.outer, sc, z, yp);
    else dequant_row_i8(dvm_tensor_ptr(x), q.outer, sc, z, yp);
    return NULL;
  }
  for (int64_t o = 0, e = 0; o < q.outer; o++)
    for (int64_t k = 0; k < q.len; k++)
      for (int64_t i = 0; i < q.inner; i++, e++) {
        int64_t j = qindex(&q, o, k, i);
        float v = (float)(dvm_cpu_quant_int_at(x, e) - (zp ? dvm_cpu_quant_int_at(zp, j) : 0)) * float_at(s, j);
        dvm_vec_store(y->dtype, &v, (char *)yp + e * dvm_dtype_size((dvm_dtype)y->dtype), 1);
      }
  return NULL;
}

/* DynamicQuantizeLinear's u8 scale and zero point for x[0..n). */
DVM_VEC static void dynamic_params(const float *x, int64_t n, float *scale, uint8_t *zp) {
  float lo = 0, hi = 0; /* NaNs are passed over: x < lo and x > hi are false */
#pragma omp simd reduction(min : lo) reduction(max : hi)
  for (int64_t i = 0; i < n; i++) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
  }
  dvm_cpu_quant_u8_params(lo, hi, scale, zp);
}

void dvm_cpu_quant_u8_params(float lo, float hi, float *scale, uint8_t *zp) {
  *scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  /* ONNX Runtime's order: clamped as std::max(0, std::min(255, z)), then
   * rounded, so the NaN of an infinite lo (-inf / inf) becomes 255 */
  float z = 0.0f - lo / *scale;
  z = z < 255.0f ? z : 255.0f;
  z = 0.0f < z ? z : 0.0f;
  *zp = (uint8_t)nearbyintf(z);
}

void dvm_cpu_quant_u8(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y) {
  quant_row_u8(x, n, scale, zp, y);
}

static dvm_status *dynamic_quantize_linear(const dvm_kernel_args *a) {
  const char *op = "dynamic_quantize_linear";
  dvm_status *st = dvm_kargs_check(a, op, 1, 3, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  if (x->dtype != DVM_F32) return bad_dtype(op, "x", x, "f32");
  if (a->out[0]->dtype != DVM_U8 || a->out[1]->dtype != DVM_F32 || a->out[2]->dtype != DVM_U8 ||
      dvm_tensor_numel(a->out[1]) != 1 || dvm_tensor_numel(a->out[2]) != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: outputs must be y u8, scale f32 [], zero point u8 []", op);
  const float *xp = dvm_tensor_ptr(x);
  int64_t n = dvm_tensor_numel(x);
  float scale;
  uint8_t zp;
  dynamic_params(xp, n, &scale, &zp);
  uint8_t *yp = dvm_tensor_ptr(a->out[0]);
  dvm_cpu_quant_u8(xp, n, scale, zp, yp);
  *(float *)dvm_tensor_ptr(a->out[1]) = scale;
  *(uint8_t *)dvm_tensor_ptr(a->out[2]) = zp;
  return NULL;
}

/* ---- the integer products ---- */

/* x - z[i % nz] for i < n (nz 1: one zero point; else a row of nz
 * columns' zero points): the widening's vector loops, one per dtype. */
#define WIDEN_ROWS(name, T)                                                                     \
  DVM_VEC static void name(const void *px, int64_t n, const int32_t *z, int64_t nz, int32_t *w) { \
    const T *x = px;                                                                              \
    if (nz == 1)                                                                                  \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) w[i] = (int32_t)x[i] - z[0];            \
    else                                                                                          \
      for (int64_t r = 0; r < n; r += nz)                                                         \
        _Pragma("omp simd") for (int64_t c = 0; c < nz; c++) w[r + c] = (int32_t)x[r + c] - z[c]; \
  }
WIDEN_ROWS(widen_u8, uint8_t)
WIDEN_ROWS(widen_i8, int8_t)
WIDEN_ROWS(widen_i16, int16_t)
WIDEN_ROWS(widen_u16, uint16_t)
WIDEN_ROWS(widen_i32, int32_t)

int32_t *dvm_cpu_quant_widen(const dvm_tensor *t, const dvm_tensor *zp, int64_t per_div, int64_t per_n) {
  int64_t n = dvm_tensor_numel(t);
  int32_t *w = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  if (!w) return NULL;
  int64_t nz = zp ? dvm_tensor_numel(zp) : 0;
  int32_t z0 = nz == 1 ? dvm_cpu_quant_int_at(zp, 0) : 0;
  if (nz > 1 && per_div != 1) { /* per row or channel: the plain loop */
    for (int64_t i = 0; i < n; i++) w[i] = dvm_cpu_quant_int_at(t, i) - dvm_cpu_quant_int_at(zp, (i / per_div) % per_n);
    return w;
  }
  int32_t *zc = nz > 1 ? malloc(sizeof(int32_t) * (size_t)nz) : NULL;
  if (nz > 1 && !zc) return free(w), NULL;
  for (int64_t c = 0; zc && c < nz; c++) zc[c] = dvm_cpu_quant_int_at(zp, c);
  void (*rows)(const void *, int64_t, const int32_t *, int64_t, int32_t *) =
      t->dtype == DVM_U8 ? widen_u8 : t->dtype == DVM_I8 ? widen_i8 : t->dtype == DVM_I16 ? widen_i16
      : t->dtype == DVM_U16 ? widen_u16 : widen_i32;
  rows(dvm_tensor_ptr(t), n, zc ? zc : &z0, zc ? nz : 1, w); /* per column: n is a multiple of nz = per_n */
  free(zc);
  return w;
}

static dvm_status *check_zp(const char *op, const char *what, const dvm_tensor *zp, const dvm_tensor *of,
                            int64_t per, const char *per_what) {
  if (!zp) return NULL;
  if (zp->dtype != of->dtype) return bad_dtype(op, what, zp, dvm_dtype_name((dvm_dtype)of->dtype));
  if (dvm_tensor_numel(zp) == 1 && zp->rank <= 1) return NULL;
  if (zp->rank == 1 && zp->dims[0] == per) return NULL;
  char s[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s must have one element or %lld (%s)", op, what,
                        dvm_shape_str(s, zp->rank, zp->dims), (long long)per, per_what);
}

/* Batch bi of y [dy..] (MatMul's broadcasting of the batch dims): the
 * offsets of its a [.., M, K] and b [.., K, N] matrices, in elements. */
static void batch_offsets(int ra, const int64_t *da, int rb, const int64_t *db, int nb, const int64_t *dy,
                          int64_t bi, int64_t *oa, int64_t *ob) {
  int64_t M = ra == 1 ? 1 : da[ra - 2], K = da[ra - 1], N = rb == 1 ? 1 : db[rb - 1];
  int64_t sa = M * K, sb = K * N, rem = bi;
  *oa = *ob = 0;
  for (int d = nb - 1; d >= 0; d--) { /* y's index, right-aligned, 0 where a or b has 1 */
    int64_t i = rem % dy[d];
    rem /= dy[d];
    int la = ra - 2 - (nb - d), lb = rb - 2 - (nb - d);
    if (la >= 0 && ra > 2) {
      *oa += (da[la] == 1 ? 0 : i) * sa;
      sa *= da[la];
    }
    if (lb >= 0 && rb > 2) {
      *ob += (db[lb] == 1 ? 0 : i) * sb;
      sb *= db[lb];
    }
  }
}

/* The i32 product of widened a and b for one batch: rows of b are added
 * into rows of acc, the loop the vector clones vectorize. */
/* acc [M, N] = a [M, K] . b [K, N], all i32. Blocks of 4 rows by 16
 * columns are summed over all of K in locals the vector clones keep in
 * registers (4 x 16 i32: four zmm or eight ymm), each b load serving four
 * rows; the rest of the rows and columns one row at a time. */
#define IMM_R 4
#define IMM_C 16
DVM_VEC static void int_matmul(const int32_t *a, const int32_t *b, int64_t M, int64_t K, int64_t N, int32_t *acc) {
  int64_t m = 0, nb = N / IMM_C * IMM_C;
  for (; m + IMM_R <= M; m += IMM_R)
    for (int64_t n0 = 0; n0 < nb; n0 += IMM_C) {
      int32_t t[IMM_R][IMM_C] = {{0}};
      for (int64_t k = 0; k < K; k++) {
        const int32_t *bk = b + k * N + n0;
#pragma GCC unroll 4
        for (int r = 0; r < IMM_R; r++) {
          int32_t av = a[(m + r) * K + k];
#pragma omp simd
          for (int n = 0; n < IMM_C; n++) t[r][n] += av * bk[n];
        }
      }
      for (int r = 0; r < IMM_R; r++) memcpy(acc + (m + r) * N + n0, t[r], sizeof t[r]);
    }
  for (int64_t mm = 0; mm < M; mm++) { /* the rows after the blocks; the columns after them in every row */
    int64_t n0 = mm < m ? nb : 0;
    int32_t *row = acc + mm * N;
    if (n0 == N) continue;
    memset(row + n0, 0, sizeof(int32_t) * (size_t)(N - n0));
    for (int64_t k = 0; k < K; k++) {
      int32_t av = a[mm * K + k];
      const int32_t *brow = b + k * N;
#pragma omp simd
      for (int64_t n = n0; n < N; n++) row[n] += av * brow[n];
    }
  }
}

/* An f32 tensor quantized to u8 as DynamicQuantizeLinear does. */
static uint8_t *dynamic_codes(const dvm_tensor *t, float *scale, uint8_t *zp) {
  int64_t n = dvm_tensor_numel(t);
  uint8_t *q = malloc((size_t)(n ? n : 1));
  if (!q) return NULL;
  dynamic_params(dvm_tensor_ptr(t), n, scale, zp);
  dvm_cpu_quant_u8(dvm_tensor_ptr(t), n, *scale, *zp, q);
  return q;
}

/* A product's operands, checked and prepared for one of two paths:
 *   dot: oneDNN's u8s8s32/s8s8s32 GEMM on the bytes, where it sums exactly
 *     (dvm_isa_int8_dot): a's zero point one element, b as s8 (u8 codes
 *     shifted by 128, their zero point with them), b's zero point one
 *     element or, per column, subtracted afterwards as bz[n] * (the row's
 *     sum of a - az);
 *   else: both widened to i32, zero points subtracted, for int_matmul.
 * A 1-D a is [1, K] and a 1-D b [K, 1]. */
typedef struct product {
  int32_t *a, *b;             /* widened (not dot) */
  uint8_t *codes;             /* an f32 a quantized (DynamicQuantizeMatMul) */
  int8_t *b8;                 /* u8 b shifted to s8 (dot) */
  const dvm_qgemm_b *pb;      /* b packed at link (qgemm.h), used where set */
  const dvm_tensor *azp, *bzp; /* the zero points (pb) */
  int32_t *bcol;              /* b's per-column zero points, shifted as b (dot) */
  const void *ab, *bb;        /* a's and b's bytes (dot) */
  int a_signed, dot, ry, nb;  /* nb: y's batch dims */
  int32_t az, bz;             /* one-element zero points (dot) */
  float a_scale;              /* of codes */
  int64_t M, K, N;
  int ra, rb;
  int64_t da[DVM_MAX_RANK], db[DVM_MAX_RANK], dy[DVM_MAX_RANK];
} product;

static void product_free(product *p) { free(p->a), free(p->b), free(p->codes), free(p->b8), free(p->bcol); }

static int32_t zp_at(const dvm_tensor *zp, int64_t i) { return zp ? dvm_cpu_quant_int_at(zp, i) : 0; }

static dvm_status *product_begin(const char *op, const dvm_tensor *a, const dvm_tensor *azp, const dvm_tensor *b,
                                 const dvm_tensor *bzp, const dvm_qgemm_b *pb, product *p) {
  memset(p, 0, sizeof *p);
  if (!is_byte(a->dtype) && !(a->dtype == DVM_F32 && !strcmp(op, "dynamic_quantize_matmul")))
    return bad_dtype(op, "a", a, "u8 or i8");
  if (!is_byte(b->dtype)) return bad_dtype(op, "b", b, "u8 or i8");
  dvm_status *st = dvm_matmul_shape(a->rank, a->dims, b->rank, b->dims, &p->ry, p->dy);
  if (st) return st;
  p->M = a->rank == 1 ? 1 : a->dims[a->rank - 2], p->K = a->dims[a->rank - 1];
  p->N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  if (p->K > MAX_K)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: inner dim %lld is over %d, where i32 sums may overflow", op,
                          (long long)p->K, MAX_K);
  if ((st = check_zp(op, "a's zero point", azp, a, p->M, "per row")) ||
      (st = check_zp(op, "b's zero point", bzp, b, p->N, "per column")))
    return st;
  /* the batched dims: 1-D operands as [1, K] and [K, 1], their added dims put back into y's */
  p->ra = a->rank == 1 ? 2 : a->rank, p->rb = b->rank == 1 ? 2 : b->rank;
  if (a->rank == 1) p->da[0] = 1, p->da[1] = a->dims[0];
  else memcpy(p->da, a->dims, sizeof(int64_t) * (size_t)a->rank);
  if (b->rank == 1) p->db[0] = b->dims[0], p->db[1] = 1;
  else memcpy(p->db, b->dims, sizeof(int64_t) * (size_t)b->rank);
  p->nb = p->ry + (a->rank == 1) + (b->rank == 1) - 2; /* y's batch dims lead p->dy */

  uint8_t dzp = 0;
  if (a->dtype == DVM_F32 && !(p->codes = dynamic_codes(a, &p->a_scale, &dzp))) return oom(op);
  p->ab = p->codes ? (const void *)p->codes : dvm_tensor_ptr(a);
  p->a_signed = a->dtype == DVM_I8;
  p->az = p->codes ? dzp : azp && dvm_tensor_numel(azp) == 1 ? zp_at(azp, 0) : 0;
  /* oneDNN's GEMM measured up to 1.4x faster than the packed VNNI tiles
   * on an i8 b from 32 rows on (its per-call packing of b then pays; a u8
   * b it must also shift): docs/performance.md; the AMX tiles, where the
   * CPU has them, 2-5x faster than oneDNN's GEMM on a Xeon */
  int64_t rows = p->M;
  for (int d = 0; d < p->nb; d++) rows *= p->dy[d];
  bool packed = pb && b->rank == 2 && dvm_qgemm_k(pb) == p->K && dvm_qgemm_n(pb) == p->N &&
                dvm_qgemm_signed(pb) == (b->dtype == DVM_I8);
  bool onednn = dvm_isa_int8_dot() && b->dtype == DVM_I8 && rows >= 32 && !(packed && dvm_qgemm_amx(rows)) &&
                (p->codes || !azp || dvm_tensor_numel(azp) == 1);
  if (packed && !onednn) {
    p->pb = pb, p->azp = p->codes ? NULL : azp, p->bzp = bzp;
    return NULL;
  }
  p->dot = dvm_isa_int8_dot() && (p->codes || !azp || dvm_tensor_numel(azp) == 1);
  if (p->dot) {
    int64_t nbytes = dvm_tensor_numel(b), shift = b->dtype == DVM_U8 ? 128 : 0;
    if (shift) {
      if (!(p->b8 = malloc((size_t)(nbytes ? nbytes : 1)))) return product_free(p), oom(op);
      const uint8_t *src = dvm_tensor_ptr(b);
      for (int64_t i = 0; i < nbytes; i++) p->b8[i] = (int8_t)(src[i] - 128);
    }
    p->bb = p->b8 ? (const void *)p->b8 : dvm_tensor_ptr(b);
    if (bzp && dvm_tensor_numel(bzp) > 1) {
      if (!(p->bcol = malloc(sizeof(int32_t) * (size_t)p->N))) return product_free(p), oom(op);
      for (int64_t n = 0; n < p->N; n++) p->bcol[n] = zp_at(bzp, n) - (int32_t)shift;
      p->bz = 0;
    } else {
      p->bz = zp_at(bzp, 0) - (int32_t)shift; /* in [-128, 127]: an s8 offset */
    }
    return NULL;
  }
  if (p->codes) {
    int64_t n = dvm_tensor_numel(a);
    if ((p->a = malloc(sizeof(int32_t) * (size_t)(n ? n : 1))))
      for (int64_t i = 0; i < n; i++) p->a[i] = p->codes[i] - dzp;
  } else {
    p->a = dvm_cpu_quant_widen(a, azp, p->K, p->M);
  }
  p->b = dvm_cpu_quant_widen(b, bzp, 1, p->N);
  if (!p->a || !p->b) return product_free(p), oom(op);
  return NULL;
}

/* The f32 epilogue of DynamicQuantizeMatMul and MatMulIntegerToFloat, per
 * column: y = acc * scale[n] + bias[n], scale[n] = a_scale * b_scale[n] and
 * bias[n] 0 without a bias: the f32 operations (no fused multiply-add) of
 * ONNX Runtime's MLAS scale-and-bias output processor. */
typedef struct to_float {
  const float *scale, *bias;
  float *y;
} to_float;

DVM_VEC static void float_rows(const int32_t *acc, int64_t rows, int64_t N, const float *restrict scale,
                               const float *restrict bias, float *restrict y) {
  for (int64_t r = 0; r < rows; r++, acc += N, y += N)
#pragma omp simd
    for (int64_t n = 0; n < N; n++) y[n] = (float)acc[n] * scale[n] + bias[n];
}

/* Work split over the pool: whole batches, or one product's rows; each part
 * converts its rows to f32 while they are in cache where tf is given. */
typedef struct product_job {
  const product *p;
  int32_t *acc;
  const to_float *tf;
  int64_t batches;
  int rows; /* the parts are rows of batch 0 */
  atomic_int bad;
} product_job;

static void dot_rows(const product *p, int64_t oa, int64_t ob, int64_t m0, int64_t m1, int32_t *acc,
                     atomic_int *bad) {
  int64_t M = m1 - m0, K = p->K, N = p->N;
  int32_t *c = acc + m0 * N;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    memset(c, 0, sizeof(int32_t) * (size_t)(M * N));
    return;
  }
  const int8_t *b = (const int8_t *)p->bb + ob;
  int32_t zero = 0;
  dnnl_status_t r;
  if (p->a_signed)
    r = dnnl_gemm_s8s8s32('N', 'N', 'F', M, N, K, 1.0f, (const int8_t *)p->ab + oa + m0 * K, K, (int8_t)p->az, b,
                          N, (int8_t)p->bz, 0.0f, c, N, &zero);
  else
    r = dnnl_gemm_u8s8s32('N', 'N', 'F', M, N, K, 1.0f, (const uint8_t *)p->ab + oa + m0 * K, K, (uint8_t)p->az, b,
                          N, (int8_t)p->bz, 0.0f, c, N, &zero);
  if (r != dnnl_success) atomic_store(bad, r);
  if (!p->bcol) return;
  for (int64_t m = 0; m < M; m++) { /* (a - az)(b - bz[n]) = (a - az) b - bz[n] sum_k (a - az) */
    int32_t sum = 0;
    for (int64_t k = 0; k < K; k++)
      sum += (p->a_signed ? ((const int8_t *)p->ab)[oa + (m0 + m) * K + k]
                          : ((const uint8_t *)p->ab)[oa + (m0 + m) * K + k]) - p->az;
    for (int64_t n = 0; n < N; n++) c[m * N + n] -= p->bcol[n] * sum;
  }
}

static void product_part(void *ctx, int64_t s, int64_t e) {
  product_job *j = ctx;
  const product *p = j->p;
  for (int64_t bi = j->rows ? 0 : s; bi < (j->rows ? 1 : e); bi++) {
    int64_t oa, ob;
    batch_offsets(p->ra, p->da, p->rb, p->db, p->nb, p->dy, bi, &oa, &ob);
    int32_t *acc = j->acc + bi * p->M * p->N;
    int64_t m0 = j->rows ? s : 0, m1 = j->rows ? e : p->M;
    if (p->dot)
      dot_rows(p, oa, ob, m0, m1, acc, &j->bad);
    else
      int_matmul(p->a + oa, p->b + ob, p->M, p->K, p->N, acc);
    if (j->tf)
      float_rows(acc + m0 * p->N, m1 - m0, p->N, j->tf->scale, j->tf->bias, j->tf->y + (bi * p->M + m0) * p->N);
  }
}

/* The rows of this file's kernel table that prepack (whose designators
 * would override a row put before them: -Woverride-init). */
enum { MATMUL_INTEGER = 3, CONV_INTEGER = 5, QLINEAR_CONV, DQ_MATMUL, MATMUL_INTEGER_TO_FLOAT };

/* A constant 2-D b (input 1) of the matrix products, packed (qgemm.h). */
static dvm_status *product_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs, int nattrs,
                                   void **data, void (**free_data)(void *)) {
  if (input != 1 || !is_byte(t->dtype) || t->rank != 2 || t->dims[0] > MAX_K) return NULL;
  if (!(*data = dvm_qgemm_pack(dvm_tensor_ptr(t), t->dtype == DVM_I8, t->dims[0], t->dims[1])) &&
      strcmp(dvm_qgemm_variant(), "none"))
    return dvm_status_new(DVM_OUT_OF_MEMORY, "matmul_integer: no memory for the packed form of b");
  *free_data = dvm_qgemm_free;
  return NULL;
}

/* b's packed form, built for whichever product kernel reads it. */
static const dvm_qgemm_b *kept_b(const dvm_tensor *b) {
  static const int rows[] = {MATMUL_INTEGER, DQ_MATMUL, MATMUL_INTEGER_TO_FLOAT};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const dvm_qgemm_b *pb = dvm_tensor_packed(b, &dvm_cpu_quant_kernels[rows[i]], 1);
    if (pb) return pb;
  }
  return NULL;
}

/* The product on b's packed form: a's batches are rows of one product,
 * as b is [K, N]; the zero points one element, per row or per column. */
static dvm_status *packed_run(const product *p, int64_t batches, int threads, int32_t *acc, const to_float *tf) {
  int64_t naz = p->azp ? dvm_tensor_numel(p->azp) : 1, nbz = p->bzp ? dvm_tensor_numel(p->bzp) : 1;
  int32_t *zp = malloc(sizeof(int32_t) * (size_t)(naz + nbz));
  if (!zp) return oom("matmul_integer");
  for (int64_t i = 0; i < naz; i++) zp[i] = p->codes ? p->az : zp_at(p->azp, i);
  for (int64_t i = 0; i < nbz; i++) zp[naz + i] = zp_at(p->bzp, i);
  int64_t rows = batches * p->M;
  dvm_status *st = dvm_qgemm_run(p->pb, p->ab, p->a_signed, rows, zp, naz, zp + naz, nbz, threads, acc);
  free(zp);
  if (!st && tf) float_rows(acc, rows, p->N, tf->scale, tf->bias, tf->y);
  return st;
}

/* The product into acc (y's shape), and with tf also into tf->y as f32. */
static dvm_status *product_run(const char *op, const product *p, int threads, int32_t *acc, const to_float *tf) {
  product_job j = {.p = p, .acc = acc, .tf = tf, .batches = 1, .bad = dnnl_success};
  for (int d = 0; d < p->nb; d++) j.batches *= p->dy[d];
  if (p->pb) return packed_run(p, j.batches, threads, acc, tf);
  /* oneDNN sizes its OpenMP team by the calling thread's setting: 1, as
   * the pool's workers run the parts */
  if (p->dot && omp_get_max_threads() != 1) omp_set_num_threads(1);
  if (p->dot && j.batches == 1 && threads > 1) {
    j.rows = 1;
    dvm_par_for(threads, p->M, 16, product_part, &j);
  } else {
    dvm_par_for(threads, j.batches, 1, product_part, &j);
  }
  dnnl_status_t bad = atomic_load(&j.bad);
  if (bad == dnnl_success) return NULL;
  return dvm_status_new(DVM_INTERNAL, "%s: oneDNN's integer gemm (%lld, %lld, %lld) failed: %s", op,
                        (long long)p->M, (long long)p->N, (long long)p->K, dnnl_status2str(bad));
}

static dvm_status *matmul_integer(const dvm_kernel_args *a) {
  const char *op = "matmul_integer";
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 4, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  product p;
  if ((st = product_begin(op, a->in[0], a->nin > 2 ? a->in[2] : NULL, a->in[1], a->nin > 3 ? a->in[3] : NULL,
                          kept_b(a->in[1]), &p)))
    return st;
  dvm_tensor *y = a->out[0];
  if (y->dtype != DVM_I32 || y->rank != p.ry || memcmp(y->dims, p.dy, sizeof(int64_t) * (size_t)p.ry))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: y must be i32 of the product's shape", op);
  else
    st = product_run(op, &p, dvm_kargs_threads(a), dvm_tensor_ptr(y), NULL);
  product_free(&p);
  return st;
}

/* acc (n elements, channel (i / inner) % channels) times in_scale *
 * w_scale[channel] / y_scale, plus y_zp, into y. */
static dvm_status *requantize(const char *op, const int32_t *acc, int64_t n, int64_t inner, int64_t channels,
                              const dvm_tensor *in_s, const dvm_tensor *w_s, const dvm_tensor *y_s,
                              const dvm_tensor *y_zp, dvm_tensor *y) {
  const dvm_tensor *sc[3] = {in_s, w_s, y_s};
  for (int i = 0; i < 3; i++)
    if (sc[i]->dtype != DVM_F32 && sc[i]->dtype != DVM_F16) return bad_dtype(op, "a scale", sc[i], "f32 or f16");
  if (!is_byte(y_zp->dtype) || y->dtype != y_zp->dtype) return bad_dtype(op, "y", y, "y's zero point's dtype, u8 or i8");
  if (dvm_tensor_numel(in_s) != 1 || dvm_tensor_numel(y_s) != 1 || dvm_tensor_numel(y_zp) != 1 ||
      (dvm_tensor_numel(w_s) != 1 && (w_s->rank != 1 || w_s->dims[0] != channels)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: scales and y's zero point must have one element (the weight's "
                          "scale may have %lld)", op, (long long)channels);
  int per = dvm_tensor_numel(w_s) != 1;
  int32_t zp = dvm_cpu_quant_int_at(y_zp, 0);
  void *yp = dvm_tensor_ptr(y);
  for (int64_t i = 0; i < n; i++) {
    float m = float_at(in_s, 0) * float_at(w_s, per ? (i / inner) % channels : 0) / float_at(y_s, 0);
    store_q(yp, y->dtype, i, (float)acc[i] * m, zp);
  }
  return NULL;
}

static dvm_status *qlinear_matmul(const dvm_kernel_args *a) {
  const char *op = "qlinear_matmul";
  dvm_status *st = dvm_kargs_check(a, op, 8, 1, DVM_DEVICE_CPU);
  if (st) return st;
  dvm_tensor *const *in = a->in;
  product p;
  if ((st = product_begin(op, in[0], in[2], in[3], in[5], NULL, &p))) return st;
  dvm_tensor *y = a->out[0];
  int64_t n = dvm_tensor_numel(y), N = in[3]->rank == 1 ? 1 : in[3]->dims[in[3]->rank - 1];
  int32_t *acc = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  if (!acc) st = oom(op);
  else if (y->rank != p.ry || memcmp(y->dims, p.dy, sizeof(int64_t) * (size_t)p.ry))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: y has not the product's shape", op);
  if (!st && !(st = product_run(op, &p, dvm_kargs_threads(a), acc, NULL)))
    st = requantize(op, acc, n, 1, N, in[1], in[4], in[6], in[7], y);
  free(acc);
  product_free(&p);
  return st;
}

/* The i32 convolution of widened x and w into acc (Y's shape). */
static void int_conv(const int32_t *x, const int64_t *dx, const int32_t *w, const int64_t *dw, const int64_t *dy,
                     int sp, const dvm_window *win, int64_t group, int32_t *acc) {
  int64_t N = dx[0], C = dx[1], M = dw[0], cg = C / group, mg = M / group;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[3] = {0};
  for (int i = 0; i < sp; i++) {
    in[i] = dx[2 + i], out[i] = dy[2 + i], k[i] = dw[2 + i];
    s[i] = win->stride[i], d[i] = win->dilation[i], p[i] = win->pad_begin[i];
  }
  int64_t isz = in[0] * in[1] * in[2], osz = out[0] * out[1] * out[2], ksz = k[0] * k[1] * k[2];
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++) {
      int64_t g = m / mg;
      int32_t *yp = acc + (n * M + m) * osz;
      for (int64_t o0 = 0; o0 < out[0]; o0++)
        for (int64_t o1 = 0; o1 < out[1]; o1++)
          for (int64_t o2 = 0; o2 < out[2]; o2++) {
            int32_t sum = 0;
            for (int64_t c = 0; c < cg; c++) {
              const int32_t *xp = x + (n * C + g * cg + c) * isz, *wp = w + (m * cg + c) * ksz;
              for (int64_t k0 = 0; k0 < k[0]; k0++) {
                int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
                if (i0 < 0 || i0 >= in[0]) continue;
                for (int64_t k1 = 0; k1 < k[1]; k1++) {
                  int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
                  if (i1 < 0 || i1 >= in[1]) continue;
                  for (int64_t k2 = 0; k2 < k[2]; k2++) {
                    int64_t i2 = o2 * s[2] - p[2] + k2 * d[2];
                    if (i2 < 0 || i2 >= in[2]) continue;
                    sum += xp[(i0 * in[1] + i1) * in[2] + i2] * wp[(k0 * k[1] + k1) * k[2] + k2];
                  }
                }
              }
            }
            yp[(o0 * out[1] + o1) * out[2] + o2] = sum;
          }
    }
}

/* A constant W of the integer convolutions, kept for oneDNN's kernels:
 * its layouts (conv.c's forms) and, for u8 W, W - 128 in s8. */
typedef struct conv_w {
  void *forms;
  int8_t *w8; /* NULL for i8 W (used as it is) */
} conv_w;

static void conv_w_free(void *p) {
  conv_w *c = p;
  dvm_cpu_conv_forms_free(c->forms);
  free(c->w8);
  free(c);
}

/* u8 w[0, n) less 128, into s8. */
static void offset_u8(const uint8_t *w, int64_t n, int8_t *w8) {
  for (int64_t i = 0; i < n; i++) w8[i] = (int8_t)(w[i] ^ 0x80);
}

/* conv_integer's W (input 1) and qlinear_conv's (input 3): a conv_w. */
static dvm_status *conv_w_prepack(const dvm_tensor *t, int input, int w_input, void **data, void (**free_data)(void *)) {
  if (input != w_input || !is_byte(t->dtype) || t->rank < 3 || t->rank > 5) return NULL;
  conv_w *c = calloc(1, sizeof *c);
  int64_t n = dvm_tensor_numel(t);
  if (c) c->forms = dvm_cpu_conv_forms_new();
  if (c && c->forms && t->dtype == DVM_U8 && (c->w8 = malloc((size_t)(n ? n : 1))))
    offset_u8(dvm_tensor_ptr(t), n, c->w8);
  if (!c || !c->forms || (t->dtype == DVM_U8 && !c->w8)) {
    if (c) conv_w_free(c);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "conv_integer: no memory for the forms of weight W");
  }
  *data = c;
  *free_data = conv_w_free;
  return NULL;
}

static dvm_status *conv_integer_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs, int nattrs,
                                        void **data, void (**free_data)(void *)) {
  return conv_w_prepack(t, input, 1, data, free_data);
}

static dvm_status *qlinear_conv_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs, int nattrs,
                                        void **data, void (**free_data)(void *)) {
  return conv_w_prepack(t, input, 3, data, free_data);
}

/* y[n, m, p] += (off - w_zp[m]) * (the sum of x - x_zp over output p's
 * window and the input channels of m's group): what the convolution of
 * x with W - off leaves out of that with W - w_zp (w_zp NULL: 0). xw is
 * x - x_zp widened. The window sums are int_conv's, of x summed over each
 * group's channels with a kernel of ones. */
DVM_VEC static dvm_status *zero_point_terms(const char *op, const int32_t *xw, const dvm_tensor *x, const dvm_tensor *w,
                                    const dvm_tensor *wzp, int32_t off, const dvm_window *win, int64_t group,
                                    const int64_t *dy, int32_t *y) {
  int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0], cg = C / group, sp = 1, osp = 1, ksz = 1;
  for (int i = 2; i < x->rank; i++) sp *= x->dims[i], osp *= dy[i], ksz *= w->dims[i];
  int64_t dt[DVM_MAX_RANK], dk[DVM_MAX_RANK], ds[DVM_MAX_RANK];
  memcpy(dt, x->dims, sizeof(int64_t) * (size_t)x->rank);
  memcpy(dk, w->dims, sizeof(int64_t) * (size_t)x->rank);
  memcpy(ds, dy, sizeof(int64_t) * (size_t)x->rank);
  dt[1] = dk[0] = ds[1] = group;
  dk[1] = 1;
  int32_t *t = calloc((size_t)(N * group * sp + ksz * group + N * group * osp), sizeof(int32_t));
  if (!t) return oom(op);
  int32_t *ones = t + N * group * sp, *sums = ones + ksz * group;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      int32_t *to = t + (n * group + c / cg) * sp;
      const int32_t *from = xw + (n * C + c) * sp;
#pragma omp simd
      for (int64_t i = 0; i < sp; i++) to[i] += from[i];
    }
  bool pointwise = ksz == 1 && sp == osp; /* 1x1 without pads (or over 1x1): the sums are t */
  for (int64_t i = 0; i < ksz * group; i++) ones[i] = 1;
  if (pointwise)
    sums = t;
  else
    int_conv(t, dt, ones, dk, ds, x->rank - 2, win, group, sums);
  int per = wzp && dvm_tensor_numel(wzp) != 1;
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++) {
      int64_t d = off - (int64_t)(wzp ? dvm_cpu_quant_int_at(wzp, per ? m : 0) : 0);
      const int32_t *sum = sums + (n * group + m / (M / group)) * osp;
      int32_t *ym = y + (n * M + m) * osp;
      uint32_t du = (uint32_t)d;
#pragma omp simd
      for (int64_t i = 0; i < osp; i++) ym[i] = (int32_t)((uint32_t)ym[i] + du * (uint32_t)sum[i]); /* (exact mod 2^32) */
    }
  free(t);
  return NULL;
}

/* A convolution's checks and i32 result into acc (Y's shape). With
 * AVX-512 VNNI (dvm_isa_int8_dot) it is oneDNN's integer convolution
 * (conv.h) of x, less its zero point, with W in s8 (i8 as it is, u8 less
 * 128), plus the zero points' terms (zero_point_terms) where W's zero
 * point is not that offset; without VNNI (oneDNN would sum in saturating
 * i16), the i32 loop (int_conv) on widened operands. cw: W's kept forms
 * (constant W) or NULL. */
static dvm_status *conv_acc(const char *op, const dvm_tensor *x, const dvm_tensor *xzp, const dvm_tensor *w,
                            const dvm_tensor *wzp, const dvm_value *attrs, int nattrs, const dvm_tensor *y,
                            int threads, const conv_w *cw, int32_t *acc) {
  if (!is_byte(x->dtype)) return bad_dtype(op, "x", x, "u8 or i8");
  if (!is_byte(w->dtype)) return bad_dtype(op, "w", w, "u8 or i8");
  dvm_window win;
  int64_t group, dy[DVM_MAX_RANK];
  dvm_status *st = dvm_conv_setup(false, x->rank, x->dims, w->rank, w->dims, -1, NULL, attrs, nattrs, &win, &group, dy);
  if (st) return st;
  if (y->rank != x->rank || memcmp(y->dims, dy, sizeof(int64_t) * (size_t)y->rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: y has not the convolution's shape", op);
  int64_t ksz = 1, M = w->dims[0];
  for (int i = 2; i < w->rank; i++) ksz *= w->dims[i];
  if (w->dims[1] * ksz > MAX_K)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: %lld products per output are over %d, where i32 sums may overflow",
                          op, (long long)(w->dims[1] * ksz), MAX_K);
  if (xzp && (dvm_tensor_numel(xzp) != 1 || xzp->dtype != x->dtype))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: x's zero point must be one element of x's dtype", op);
  if ((st = check_zp(op, "w's zero point", wzp, w, M, "per output channel"))) return st;
  if (dvm_tensor_numel(y) == 0) return NULL;
  int32_t xz = xzp ? dvm_cpu_quant_int_at(xzp, 0) : 0, off = w->dtype == DVM_U8 ? 128 : 0;
  if (!dvm_isa_int8_dot()) {
    int32_t *xw = dvm_cpu_quant_widen(x, xzp, 1, 1), *ww = dvm_cpu_quant_widen(w, wzp, w->dims[1] * ksz, M);
    if (xw && ww) int_conv(xw, x->dims, ww, w->dims, dy, x->rank - 2, &win, group, acc);
    else st = oom(op);
    free(xw), free(ww);
    return st;
  }
  int64_t wn = dvm_tensor_numel(w);
  int8_t *w8 = w->dtype == DVM_I8 ? dvm_tensor_ptr(w) : cw ? cw->w8 : NULL, *made = NULL;
  if (!w8) {
    if (!(w8 = made = malloc((size_t)(wn ? wn : 1)))) return oom(op);
    offset_u8(dvm_tensor_ptr(w), wn, w8);
  }
  st = dvm_cpu_conv_s8(op, x, xz ? &xz : NULL, w->dims, w8, &win, group, acc, dy, threads, cw ? cw->forms : NULL);
  free(made);
  bool terms = false;
  for (int64_t m = 0; wzp && m < dvm_tensor_numel(wzp); m++) terms |= dvm_cpu_quant_int_at(wzp, m) != off;
  terms |= !wzp && off;
  if (!st && terms && x->dims[1]) {
    int32_t *xw = dvm_cpu_quant_widen(x, xzp, 1, 1);
    st = xw ? zero_point_terms(op, xw, x, w, wzp, off, &win, group, dy, acc) : oom(op);
    free(xw);
  }
  return st;
}

/* W's kept forms for kernel table entry `entry` (W its input `input`), or NULL. */
static const conv_w *kept_w(const dvm_tensor *w, int entry, int input) {
  return dvm_tensor_packed(w, &dvm_cpu_quant_kernels[entry], input);
}

static dvm_status *conv_integer(const dvm_kernel_args *a) {
  const char *op = "conv_integer";
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 4, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  dvm_tensor *y = a->out[0];
  if (y->dtype != DVM_I32) return bad_dtype(op, "y", y, "i32");
  return conv_acc(op, a->in[0], a->nin > 2 ? a->in[2] : NULL, a->in[1], a->nin > 3 ? a->in[3] : NULL, a->attrs,
                  a->nattrs, y, dvm_kargs_threads(a), kept_w(a->in[1], CONV_INTEGER, 1), dvm_tensor_ptr(y));
}

static dvm_status *qlinear_conv(const dvm_kernel_args *a) {
  const char *op = "qlinear_conv";
  dvm_status *st = dvm_kargs_check_range(a, op, 8, 9, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  dvm_tensor *const *in = a->in;
  dvm_tensor *y = a->out[0];
  int64_t M = in[3]->dims[0], n = dvm_tensor_numel(y), inner = 1;
  int32_t *acc = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  if (!acc) return oom(op);
  if ((st = conv_acc(op, in[0], in[2], in[3], in[5], a->attrs, a->nattrs, y, dvm_kargs_threads(a),
                     kept_w(in[3], QLINEAR_CONV, 3), acc))) {
    free(acc);
    return st;
  }
  for (int i = 2; i < y->rank; i++) inner *= y->dims[i];
  if (a->nin == 9) {
    const dvm_tensor *b = in[8];
    if (b->dtype != DVM_I32 || b->rank != 1 || b->dims[0] != M)
      st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: B must be i32 [%lld]", op, (long long)M);
    for (int64_t i = 0; !st && i < n; i++) acc[i] += dvm_cpu_quant_int_at(b, (i / inner) % M);
  }
  if (!st) st = requantize(op, acc, n, inner, M, in[1], in[4], in[6], in[7], y);
  free(acc);
  return st;
}

/* The epilogue's columns (2N floats in sb, which the caller frees): scale
 * a_scale * b_scale[column], then bias[column]. */
static dvm_status *float_columns(const char *op, float a_scale, const dvm_tensor *bs, const dvm_tensor *bias,
                                 int64_t N, float **sb) {
  *sb = NULL;
  if (bs->dtype != DVM_F32) return bad_dtype(op, "b's scale", bs, "f32");
  if (dvm_tensor_numel(bs) != 1 && (bs->rank != 1 || bs->dims[0] != N))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: b's scale must have one element or %lld", op, (long long)N);
  if (bias && (bias->dtype != DVM_F32 || bias->rank != 1 || bias->dims[0] != N))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: bias must be f32 [%lld]", op, (long long)N);
  const float *bsp = dvm_tensor_ptr(bs), *bp = bias ? dvm_tensor_ptr(bias) : NULL;
  int per = dvm_tensor_numel(bs) != 1;
  if (!(*sb = malloc(sizeof(float) * (size_t)(2 * N + 1)))) return oom(op);
  for (int64_t n = 0; n < N; n++) (*sb)[n] = a_scale * bsp[per ? n : 0], (*sb)[N + n] = bp ? bp[n] : 0.0f;
  return NULL;
}

dvm_status *dvm_cpu_quant_matmul_f32(const char *op, const dvm_tensor *a, const dvm_tensor *azp, const dvm_tensor *as,
                                     const dvm_tensor *b, const dvm_tensor *bzp, const dvm_tensor *bs,
                                     const dvm_tensor *bias, const dvm_tensor *y, float *yp, int threads) {
  if (y && y->dtype != DVM_F32) return bad_dtype(op, "y", y, "f32");
  product p;
  dvm_status *st = product_begin(op, a, azp, b, bzp, kept_b(b), &p);
  if (st) return st;
  int64_t n = 1, N = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  for (int d = 0; d < p.ry; d++) n *= p.dy[d];
  float a_scale = 0;
  if (as && (as->dtype != DVM_F32 || dvm_tensor_numel(as) != 1))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a's scale must be one f32", op);
  else if (as)
    a_scale = *(const float *)dvm_tensor_ptr(as);
  else
    a_scale = p.a_scale;
  float *sb = NULL;
  if (!st) st = float_columns(op, a_scale, bs, bias, N, &sb);
  int32_t *acc = st ? NULL : malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  if (!st && !acc) st = oom(op);
  else if (!st && y && (y->rank != p.ry || memcmp(y->dims, p.dy, sizeof(int64_t) * (size_t)p.ry)))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: y has not the product's shape", op);
  to_float tf = {sb, sb ? sb + N : NULL, yp};
  if (!st) st = product_run(op, &p, threads, acc, &tf);
  free(acc), free(sb);
  product_free(&p);
  return st;
}

/* com.microsoft DynamicQuantizeMatMul (A f32, B, b_scale[, b_zp[, bias]]). */
static dvm_status *dynamic_quantize_matmul(const dvm_kernel_args *a) {
  const char *op = "dynamic_quantize_matmul";
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 5, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->in[0]->dtype != DVM_F32) return bad_dtype(op, "a", a->in[0], "f32");
  return dvm_cpu_quant_matmul_f32(op, a->in[0], NULL, NULL, a->in[1], a->nin > 3 ? a->in[3] : NULL, a->in[2],
                                  a->nin > 4 ? a->in[4] : NULL, a->out[0], dvm_tensor_ptr(a->out[0]),
                                  dvm_kargs_threads(a));
}

/* com.microsoft MatMulIntegerToFloat (A, B, a_scale, b_scale[, a_zp[, b_zp[, bias]]]). */
static dvm_status *matmul_integer_to_float(const dvm_kernel_args *a) {
  const char *op = "matmul_integer_to_float";
  dvm_status *st = dvm_kargs_check_range(a, op, 4, 7, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  return dvm_cpu_quant_matmul_f32(op, a->in[0], a->nin > 4 ? a->in[4] : NULL, a->in[2], a->in[1],
                                  a->nin > 5 ? a->in[5] : NULL, a->in[3], a->nin > 6 ? a->in[6] : NULL, a->out[0],
                                  dvm_tensor_ptr(a->out[0]), dvm_kargs_threads(a));
}

const dvm_kernel_def dvm_cpu_quant_kernels[] = {
    {"quantize_linear", DVM_DEVICE_CPU, quantize_linear, NULL, .dtypes = DVM_DTYPES_FLOAT & ~DVM_DTYPE_BIT(DVM_F64)},
    {"dequantize_linear", DVM_DEVICE_CPU, dequantize_linear, NULL,
     .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8) | DVM_DTYPE_BIT(DVM_I16) | DVM_DTYPE_BIT(DVM_U16) |
               DVM_DTYPE_BIT(DVM_I32)},
    {"dynamic_quantize_linear", DVM_DEVICE_CPU, dynamic_quantize_linear, "dynamic_quantize_linear",
     .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    [MATMUL_INTEGER] = {"matmul_integer", DVM_DEVICE_CPU, matmul_integer, "matmul_integer", .prepack = product_prepack,
     .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8)},
    {"qlinear_matmul", DVM_DEVICE_CPU, qlinear_matmul, "qlinear_matmul",
     .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8)},
    [CONV_INTEGER] = {"conv_integer", DVM_DEVICE_CPU, conv_integer, "conv_integer",
                      .prepack = conv_integer_prepack, .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8)},
    [QLINEAR_CONV] = {"qlinear_conv", DVM_DEVICE_CPU, qlinear_conv, "qlinear_conv",
                      .prepack = qlinear_conv_prepack, .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8)},
    [DQ_MATMUL] = {"dynamic_quantize_matmul", DVM_DEVICE_CPU, dynamic_quantize_matmul, "matmul_integer",
     .prepack = product_prepack, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    [MATMUL_INTEGER_TO_FLOAT] = {"matmul_integer_to_float", DVM_DEVICE_CPU, matmul_integer_to_float, "matmul_integer",
     .prepack = product_prepack, .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
