/* What norm.c's normalization rows do for other kernel files. */
#ifndef DVM_OPS_CPU_NORM_H
#define DVM_OPS_CPU_NORM_H

#include <stdint.h>

/* Per row of n: s = x + skip[ + bias], written to sum (NULL: to y), then
 * y = (s - mean) / sqrt(var + eps) * gamma[ + beta], all f32, gamma, beta
 * and bias [n] (beta, bias may be NULL), mean taken as 0 when rms: the
 * layernorm kernel's vectorized rows over `threads` of the pool
 * (skip_layernorm and skip_rmsnorm, contrib.c). */
void dvm_cpu_skip_layernorm_rows(int threads, int64_t rows, int64_t n, const float *x, const float *skip,
                                  const float *bias, const float *gamma, const float *beta, float eps, int rms,
                                  float *sum, float *y);

/* instance_norm and group_norm in f32 (norm_stats.c): x [images, groups *
 * cg, s] (s elements per channel); per (image, group), over its cg * s
 * elements, y = (x - mean) / sqrt(var + eps) * scale[c] + bias[c] for
 * channel c, rows over `threads` of the pool; y may be x. */
void dvm_cpu_group_norm_rows(int threads, int64_t images, int64_t groups, int64_t cg, int64_t s, const float *x,
                             const float *scale, const float *bias, float eps, float *y);

#endif
