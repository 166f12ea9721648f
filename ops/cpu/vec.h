/* What the CPU kernels outside the elementwise family share: DVM_VEC, which
 * builds a hot loop for x86-64-v4 (AVX-512) and x86-64-v3 (AVX2, FMA,
 * F16C) besides the baseline and picks one when the library loads (the
 * elementwise kernels' DVM_EW_CLONES); whole rows of f16 and bf16 storage read into and written
 * from f32, the type they compute in, with the elementwise kernels' scalar
 * conversions (elementwise_math.h); and the split of a kernel's tasks over
 * the pool's threads (par.h). */
#ifndef DVM_OPS_CPU_VEC_H
#define DVM_OPS_CPU_VEC_H

#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "dvm/tensor.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/par.h"

#define DVM_VEC DVM_EW_CLONES

#define DVM_VEC_CONVERT(name, S, D, CONV)                                      \
  DVM_VEC static inline void name(const void *src, void *dst, int64_t n) {       \
    const S *s = src;                                                          \
    D *d = dst;                                                                \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = CONV(s[i]);     \
  }
DVM_VEC_CONVERT(dvm_vec_f16_to_f32, uint16_t, float, dvm_f16_to_f32)
DVM_VEC_CONVERT(dvm_vec_bf16_to_f32, uint16_t, float, dvm_bf16_to_f32)
DVM_VEC_CONVERT(dvm_vec_f32_to_f16, float, uint16_t, dvm_f32_to_f16)
DVM_VEC_CONVERT(dvm_vec_f32_to_bf16, float, uint16_t, dvm_f32_to_bf16)
#undef DVM_VEC_CONVERT

/* The dtypes stored as floats and computed in f32. */
static inline int dvm_vec_is_float(int dt) {
  return dt == DVM_F32 || dt == DVM_F16 || dt == DVM_BF16;
}

/* n elements of dtype dt (f32, f16 or bf16) at src as f32 at dst. */
static inline void dvm_vec_load(int dt, const void *src, float *dst, int64_t n) {
  if (dt == DVM_F16)
    dvm_vec_f16_to_f32(src, dst, n);
  else if (dt == DVM_BF16)
    dvm_vec_bf16_to_f32(src, dst, n);
  else if ((const void *)dst != src)
    memcpy(dst, src, sizeof(float) * (size_t)n);
}

/* n f32 at src stored as dtype dt (f32, f16 or bf16) at dst. */
static inline void dvm_vec_store(int dt, const float *src, void *dst, int64_t n) {
  if (dt == DVM_F16)
    dvm_vec_f32_to_f16(src, dst, n);
  else if (dt == DVM_BF16)
    dvm_vec_f32_to_bf16(src, dst, n);
  else if (dst != (const void *)src)
    memcpy(dst, src, sizeof(float) * (size_t)n);
}

/* y = softmax(x) over one row of n floats (y may be x), as the softmax
 * kernel computes its rows (norm.c); the attention core's too. */
void dvm_cpu_softmax_row(const float *x, float *y, int64_t n);

/* Tasks [t0, t1) of a kernel's job. */
typedef void (*dvm_vec_range_fn)(const void *job, int64_t t0, int64_t t1);

typedef struct dvm_vec_task {
  dvm_vec_range_fn fn;
  const void *job;
} dvm_vec_task;

static inline void dvm_vec_task_run(void *task, int64_t t0, int64_t t1) {
  const dvm_vec_task *t = task;
  t->fn(t->job, t0, t1);
}

/* Runs tasks [0, tasks) of job on up to `threads` threads of the pool
 * (par.h), in contiguous ranges. */
static inline void dvm_vec_parallel(int threads, int64_t tasks, dvm_vec_range_fn fn,
                                    const void *job) {
  dvm_vec_task t = {fn, job};
  dvm_par_for(threads, tasks, 1, dvm_vec_task_run, &t);
}

#endif
