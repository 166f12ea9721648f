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

typedef void (*block_fn)(int64_t m, int64_t n, float *c, int64_t ldc, const float *bias);

/* Rows [0, m) of the block, W columns each (a constant where the caller
 * has one: the compiler then unrolls the row into straight vector code,
 * and the rows' independent chains overlap; with a variable n the short
 * loop and its remainder cost 15-20% more for GELU on pgemm's 32-column
 * panels, docs/performance.md "Epilogue on panels"). */
#define ROWS(W, F)                                                           \
  for (int64_t i = 0; i < m; i++) {                                          \
    float *restrict r = c + i * ldc;                                         \
    if (bias)                                                                \
      _Pragma("omp simd") for (int64_t j = 0; j < (W); j++) {                \
        float x = r[j] + bias[j];                                            \
        r[j] = F;                                                            \
      }                                                                      \
    else                                                                     \
      _Pragma("omp simd") for (int64_t j = 0; j < (W); j++) {                \
        float x = r[j];                                                      \
        r[j] = F;                                                            \
      }                                                                      \
  }

/* One function per activation over a whole block: pgemm.c's panels are 16
 * (AVX2) or 32 (AVX-512) columns wide. */
#define BLOCK(name, F)                                                                      \
  DVM_EW_CLONES __attribute__((flatten)) static void name(int64_t m, int64_t n, float *c,   \
                                                         int64_t ldc, const float *bias) {  \
    if (n == 32) {                                                                          \
      ROWS(32, F)                                                                           \
    } else if (n == 16) {                                                                   \
      ROWS(16, F)                                                                           \
    } else {                                                                                \
      ROWS(n, F)                                                                            \
    }                                                                                       \
  }
BLOCK(block_none, x)
BLOCK(block_relu, DVM_EW_MAX(x, 0.0f))
BLOCK(block_gelu, dvm_ew_geluf(x))
BLOCK(block_gelu_tanh, dvm_ew_gelu_tanhf(x))
BLOCK(block_sigmoid, dvm_ew_sigmoidf(x))
BLOCK(block_tanh, dvm_ew_tanhf(x))
#undef BLOCK
#undef ROWS

static const block_fn blocks[DVM_EPI_COUNT] = {
    [DVM_EPI_NONE] = block_none,       [DVM_EPI_RELU] = block_relu,       [DVM_EPI_GELU] = block_gelu,
    [DVM_EPI_GELU_TANH] = block_gelu_tanh, [DVM_EPI_SIGMOID] = block_sigmoid, [DVM_EPI_TANH] = block_tanh,
};

void dvm_epilogue_apply(const dvm_epilogue *e, float *c, int64_t ldc, int64_t m, int64_t n, int64_t j0) {
  if (!e || (!e->bias && e->act == DVM_EPI_NONE) || n <= 0) return;
  blocks[e->act](m, n, c, ldc, e->bias ? e->bias + j0 : NULL);
}
