/* ONNX MatMul shapes: [..., M, K] x [..., K, N] -> [..., M, N] with numpy
 * broadcasting of the batch dims; a 1-D left operand is [1, K] and a 1-D
 * right operand [K, 1], the added dim removed from the result. The one
 * implementation behind the "matmul" shape function and kernel.
 *
 * Also the shape functions of the other products:
 *
 * "gemm" (A, B[, C]; transA:int, transB:int, alpha:float, beta:float):
 *   ONNX Gemm, A and B 2-D, [M, N]; C, if given, must broadcast to [M, N]
 *   (unidirectionally: a dim of C is 1 or the output's).
 *
 * "einsum" (x0, ..., x{n-1}; dims:shape), n <= 16: the einsum equation is
 *   the kernel's payload, which shape functions cannot see, so the compiler
 *   that reads the equation encodes the output shape as one shape value,
 *   one int per output dim: the (input, axis) it is taken from, as
 *   input * 16 + axis. Ellipsis dims that broadcast have several sources:
 *   the first code in bits 0-7, each further one as code + 1 in the next
 *   byte up (0 ends the list), and the dim is their broadcast (all equal or
 *   1). "bhqd,bhkd->bhqk" on inputs 0, 1 is dims = (0, 1, 2, 18): b, h, q
 *   from input 0 axes 0-2, k from input 1 axis 2; "...ij,...jk->...ik" on
 *   [2,1,3,4] x [5,4,6] is (0, 1 | (16+1) << 8, 2, 19): the second
 *   ellipsis dim is input 0 axis 1 (1) broadcast with input 1 axis 0 (5). */
#ifndef DVM_SHAPEFUNCS_MATMUL_H
#define DVM_SHAPEFUNCS_MATMUL_H

#include "dvm/value.h"

/* The product shape of a and b into out[0..*rank); fails naming both
 * shapes: "matmul: [2,3] x [4,5]: inner dims 3 != 4". */
DVM_MUST_USE dvm_status *dvm_matmul_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                                          int *rank, int64_t *out);

/* Shape function "matmul": two tensors or shapes -> the product shape. */
dvm_status *dvm_shapefn_matmul(const dvm_value *in, int nin, dvm_value *out, int nout);

/* Gemm's [M, N] into out from A (ra, a), B (rb, b) and C (rc, c; rc < 0
 * when there is none); fails naming the operands that disagree. */
DVM_MUST_USE dvm_status *dvm_gemm_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                                        int rc, const int64_t *c, int trans_a, int trans_b,
                                        int64_t out[2]);

/* Gemm's four attributes, in order: transA, transB (0 or 1), alpha, beta
 * (floats); the kernels and the shape function read them alike. */
DVM_MUST_USE dvm_status *dvm_gemm_attrs(const dvm_value attrs[4], int *trans_a, int *trans_b,
                                        double *alpha, double *beta);

#endif
