/* A product's epilogue (ops/cpu/epilogue.c): y = act(y + bias[j]) over a
 * block of a product's output, applied by the matmul kernels (matmul.c,
 * pgemm.c) to each block they have just written, while it is in cache,
 * instead of a separate elementwise pass over memory. */
#ifndef DVM_OPS_CPU_EPILOGUE_H
#define DVM_OPS_CPU_EPILOGUE_H

#include <stdint.h>

/* The activations, in the order of kernel matmul_bias's `activation`
 * attribute (compiler/ops.def's MatMulBias row). */
typedef enum dvm_epi_act {
  DVM_EPI_NONE,
  DVM_EPI_RELU,
  DVM_EPI_GELU,      /* erf form, as the gelu kernel computes it */
  DVM_EPI_GELU_TANH, /* Gelu approximate="tanh" */
  DVM_EPI_SIGMOID,
  DVM_EPI_TANH,
  DVM_EPI_COUNT
} dvm_epi_act;

typedef struct dvm_epilogue {
  const float *bias; /* [n] of the whole product, or NULL: no bias */
  dvm_epi_act act;
} dvm_epilogue;

/* c[i * ldc + j] = act(c[i * ldc + j] + bias[j0 + j]) for i < m, j < n:
 * the block whose first column is the product's column j0. Each element
 * gets the f32 add and the same function the unfused add and activation
 * kernels compute, so results are bitwise those of the separate ops. */
void dvm_epilogue_apply(const dvm_epilogue *e, float *c, int64_t ldc, int64_t m, int64_t n, int64_t j0);

#endif
