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

#endif
