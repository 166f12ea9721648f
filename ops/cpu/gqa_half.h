/* Rows of a half-precision KV cache (gqa_half.c): IEEE f16 read into f32
 * and f32 stored as f16, rounding to nearest even, with F16C (AVX2) or
 * AVX-512 conversions where the chosen ISA (isa.h) has them, else
 * vm/half.h's scalar ones: the same bits either way. */
#ifndef DVM_OPS_CPU_GQA_HALF_H
#define DVM_OPS_CPU_GQA_HALF_H

#include <stdint.h>

typedef void dvm_gqa_half_load_fn(const uint16_t *src, float *dst, int64_t n);

/* The chosen variant of the load, for a kernel's calls row by row. */
dvm_gqa_half_load_fn *dvm_gqa_half_loader(void);
void dvm_gqa_half_store(const float *src, uint16_t *dst, int64_t n);

#endif
