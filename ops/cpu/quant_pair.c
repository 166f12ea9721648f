/* A QuantizeLinear and the DequantizeLinear that reads it as one pass over
 * f32 (pass qdq_pair, docs/compiler.md):
 *
 *   quantize_dequantize(in: x f32, scale f32, zp u8|i8, dq_scale f32, dq_zp)
 *       -> y f32 of x's shape
 *     y = (saturate(round_half_even(x / scale) + zp) - dq_zp) * dq_scale;
 *     every parameter one element (per tensor), dq_zp of zp's dtype, which
 *     is the codes' type (a NaN quotient saturates to its low end).
 *
 * The values of quantize_linear then dequantize_linear (quant.c), bit for
 * bit, in one read and one write of f32 where the two wrote the codes and
 * read them back. (The division stays: a product by 1 / scale, with the
 * blocks near a rounding tie divided again, measured slower.) */
#include <math.h>

#include "kernel.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"

/* Elements a thread takes at least: the elementwise kernels' chunk. */
#define MIN_CHUNK ((int64_t)1 << 15)

typedef struct {
  float scale, lo, hi, zp, dq_zp, dq_scale;
  const float *x;
  float *y;
} pair;

/* y[i] for i < n: quant.c's QUANT_ROW then DEQUANT_ROW in f32, where the
 * codes and zero points are integers that f32 holds exactly. */
DVM_VEC static void quant_dequant_row(const float *x, int64_t n, const pair *p, float *y) {
  const float s = p->scale, lo = p->lo, hi = p->hi, z = p->zp, dz = p->dq_zp, ds = p->dq_scale;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    float r = nearbyintf(x[i] / s) + z;
    float c = r >= lo ? (r <= hi ? r : hi) : lo;
    y[i] = (c - dz) * ds;
  }
}

static void quant_dequant_range(void *ctx, int64_t s, int64_t e) {
  const pair *p = ctx;
  quant_dequant_row(p->x + s, e - s, p, p->y + s);
}

static dvm_status *quantize_dequantize(const dvm_kernel_args *a) {
  const char *op = "quantize_dequantize";
  dvm_status *st = dvm_kargs_check(a, op, 5, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *s = a->in[1], *z = a->in[2], *ds = a->in[3], *dz = a->in[4];
  dvm_tensor *y = a->out[0];
  if (x->dtype != DVM_F32 || s->dtype != DVM_F32 || ds->dtype != DVM_F32 || y->dtype != DVM_F32)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: x, the scales and y must be f32, got %s, %s, %s and %s", op,
                          dvm_dtype_name((dvm_dtype)x->dtype), dvm_dtype_name((dvm_dtype)s->dtype),
                          dvm_dtype_name((dvm_dtype)ds->dtype), dvm_dtype_name((dvm_dtype)y->dtype));
  if ((z->dtype != DVM_U8 && z->dtype != DVM_I8) || dz->dtype != z->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: the zero points must be both u8 or both i8, got %s and %s", op,
                          dvm_dtype_name((dvm_dtype)z->dtype), dvm_dtype_name((dvm_dtype)dz->dtype));
  if (dvm_tensor_numel(s) != 1 || dvm_tensor_numel(z) != 1 || dvm_tensor_numel(ds) != 1 || dvm_tensor_numel(dz) != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: the scales and zero points must have one element each", op);
  int64_t n = dvm_tensor_numel(x);
  if (dvm_tensor_numel(y) != n)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: y has %lld elements, x %lld", op,
                          (long long)dvm_tensor_numel(y), (long long)n);
  pair p = {.scale = *(const float *)dvm_tensor_ptr(s),
            .lo = z->dtype == DVM_U8 ? 0.0f : -128.0f,
            .hi = z->dtype == DVM_U8 ? 255.0f : 127.0f,
            .zp = (float)dvm_cpu_quant_int_at(z, 0),
            .dq_zp = (float)dvm_cpu_quant_int_at(dz, 0),
            .dq_scale = *(const float *)dvm_tensor_ptr(ds),
            .x = dvm_tensor_ptr(x),
            .y = dvm_tensor_ptr(y)};
  dvm_ew_parallel(a, n, MIN_CHUNK, quant_dequant_range, &p);
  return NULL;
}

const dvm_kernel_def dvm_cpu_quant_pair_kernels[] = {
    {"quantize_dequantize", DVM_DEVICE_CPU, quantize_dequantize, NULL, .dtypes = DVM_DTYPE_BIT(DVM_F32),
     .inplace = 1},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
