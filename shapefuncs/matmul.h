/* ONNX MatMul shapes: [..., M, K] x [..., K, N] -> [..., M, N] with numpy
 * broadcasting of the batch dims; a 1-D left operand is [1, K] and a 1-D
 * right operand [K, 1], the added dim removed from the result. The one
 * implementation behind the "matmul" shape function and kernel. */
#ifndef DVM_SHAPEFUNCS_MATMUL_H
#define DVM_SHAPEFUNCS_MATMUL_H

#include "dvm/value.h"

/* The product shape of a and b into out[0..*rank); fails naming both
 * shapes: "matmul: [2,3] x [4,5]: inner dims 3 != 4". */
DVM_MUST_USE dvm_status *dvm_matmul_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                                          int *rank, int64_t *out);

/* Shape function "matmul": two tensors or shapes -> the product shape. */
dvm_status *dvm_shapefn_matmul(const dvm_value *in, int nin, dvm_value *out, int nout);

#endif
