/* What the quantized kernels outside quant.c share with it. */
#ifndef DVM_OPS_CPU_QUANT_H
#define DVM_OPS_CPU_QUANT_H

#include "kernel.h"

/* Element i of an integer tensor (u8, i8, i16 or i32) as i32. */
int32_t dvm_cpu_quant_int_at(const dvm_tensor *t, int64_t i);

/* t (u8, i8, i16 or i32) widened to i32 with its zero point subtracted: zp
 * is NULL, one element, or one per index (i / per_div) % per_n (the row,
 * column or channel element i belongs to). A new array of numel(t)
 * elements (at least 1) to free, or NULL when out of memory. */
int32_t *dvm_cpu_quant_widen(const dvm_tensor *t, const dvm_tensor *zp, int64_t per_div, int64_t per_n);

/* (a - a_zp)(b - b_zp) * a_scale * b_scale[n] + bias[n] into yp (f32, the
 * MatMul product's shape), exact in i32 (oneDNN's u8s8s32 GEMM with VNNI,
 * else the i32 loop), then per column scale and bias in f32: a u8 or i8
 * (or f32 with as NULL: quantized as DynamicQuantizeLinear does), b u8 or
 * i8; a_zp one element, b_zp and b_scale one or [N], bias NULL or [N]. y,
 * when given, is checked to be f32 of that shape (NULL: the caller
 * vouches for yp). Errors name op. */
dvm_status *dvm_cpu_quant_matmul_f32(const char *op, const dvm_tensor *a, const dvm_tensor *azp, const dvm_tensor *as,
                                     const dvm_tensor *b, const dvm_tensor *bzp, const dvm_tensor *bs,
                                     const dvm_tensor *bias, const dvm_tensor *y, float *yp, int threads);

/* (t[at + i] - zp) * scale for i < n into y: t u8 or i8 (the vector loop
 * of dequantize_linear). */
void dvm_cpu_quant_dequant_bytes(const dvm_tensor *t, int64_t at, int64_t n, float scale, int32_t zp, float *y);

/* DynamicQuantizeLinear's u8 scale and zero point for values whose
 * minimum is lo and maximum hi, both taken with 0 (lo <= 0 <= hi):
 * scale (hi - lo) / 255 (1 when that is 0), zero point (0 - lo / scale)
 * clamped to [0, 255] then rounded half to even, as ONNX Runtime computes
 * them. */
void dvm_cpu_quant_u8_params(float lo, float hi, float *scale, uint8_t *zp);

/* y[i] = saturate(round_half_even(x[i] / scale) + zp) for i < n. */
void dvm_cpu_quant_u8(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y);

#endif
