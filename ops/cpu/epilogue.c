/* The product epilogue (epilogue.h): one vectorized row loop per
 * activation, built like the elementwise kernels' (elementwise.h's
 * DVM_EW_CLONES, `omp simd`, elementwise_math.h's functions, inlined:
 * `flatten`, as GCC otherwise calls the GELU's out of line, four call
 * sites per function, and the loop stays scalar), so each element gets
 * exactly what the add and the activation kernels would give it. */
#include "ops/cpu/epilogue.h"

#include <math.h>

#include "ops/cpu/elementwise.h"
#include "ops/cpu/elementwise_math.h"

typedef void (*row_fn)(int64_t n, float *c, const float *bias);

#define ROW(name, F)                                                                        \
  DVM_EW_CLONES __attribute__((flatten)) static void name(int64_t n, float *restrict c,      \
                                                         const float *restrict bias) {      \
    if (bias)                                                                                \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                  \
        float x = c[j] + bias[j];                                                            \
        c[j] = F;                                                                            \
      }                                                                                      \
    else                                                                                     \
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) {                                  \
        float x = c[j];                                                                      \
        c[j] = F;                                                                            \
      }                                                                                      \
  }
ROW(row_none, x)
ROW(row_relu, DVM_EW_MAX(x, 0.0f))
ROW(row_gelu, dvm_ew_geluf(x))
ROW(row_gelu_tanh, dvm_ew_gelu_tanhf(x))
ROW(row_sigmoid, dvm_ew_sigmoidf(x))
ROW(row_tanh, dvm_ew_tanhf(x))
#undef ROW

static const row_fn rows[DVM_EPI_COUNT] = {
    [DVM_EPI_NONE] = row_none,       [DVM_EPI_RELU] = row_relu,       [DVM_EPI_GELU] = row_gelu,
    [DVM_EPI_GELU_TANH] = row_gelu_tanh, [DVM_EPI_SIGMOID] = row_sigmoid, [DVM_EPI_TANH] = row_tanh,
};

void dvm_epilogue_apply(const dvm_epilogue *e, float *c, int64_t ldc, int64_t m, int64_t n, int64_t j0) {
  if (!e || (!e->bias && e->act == DVM_EPI_NONE) || n <= 0) return;
  row_fn fn = rows[e->act];
  const float *bias = e->bias ? e->bias + j0 : NULL;
  for (int64_t i = 0; i < m; i++) fn(n, c + i * ldc, bias);
}
