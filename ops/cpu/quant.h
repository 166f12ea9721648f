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

/* DynamicQuantizeLinear's u8 scale and zero point for values whose
 * minimum is lo and maximum hi, both taken with 0 (lo <= 0 <= hi):
 * scale (hi - lo) / 255 (1 when that is 0), zero point
 * round_half_even(-lo / scale) saturated, as ONNX Runtime computes them. */
void dvm_cpu_quant_u8_params(float lo, float hi, float *scale, uint8_t *zp);

/* y[i] = saturate(round_half_even(x[i] / scale) + zp) for i < n. */
void dvm_cpu_quant_u8(const float *x, int64_t n, float scale, uint8_t zp, uint8_t *y);

#endif
