/* Shapes of reductions: reduce_* over a set of axes, argmax/argmin along
 * one, topk (k read from a host tensor) and layernorm's statistics. The one
 * implementation behind the shape functions and the kernels (ops/cpu/reduce.c,
 * ops/cpu/norm.c), which read their attributes through the same helpers.
 *
 * Shape functions (inputs, then the kernel's attributes):
 *
 * "reduce" (data; axes:shape, keepdims:int, noop_with_empty_axes:int):
 *   data's shape without the reduced axes, or with them as 1 if keepdims.
 *   axes in [-rank, rank), no repeats; empty axes reduce all of them, or
 *   none (the shape is data's) when noop_with_empty_axes is 1.
 * "argreduce" (data; axis:int, keepdims:int, select_last_index:int):
 *   data's shape with axis dropped (or 1); that axis must not be empty
 *   unless another is (the output is then empty too).
 * "topk" (x, k; axis:int, largest:int, sorted:int) -> 2 shapes, values and
 *   indices: x's shape with dim `axis` = k. Data-dependent: k is an
 *   integer tensor of one element on the host (or an int), 0 <= k <= dim.
 * "layernorm" (x, scale[, bias]; axis:int, epsilon:float) -> 1 to 3 shapes:
 *   Y is x's shape; Mean and InvStdDev are x's with the dims from axis on
 *   set to 1. scale and bias must broadcast to x's dims from axis on. */
#ifndef DVM_SHAPEFUNCS_REDUCE_H
#define DVM_SHAPEFUNCS_REDUCE_H

#include "dvm/value.h"

/* The reduce_* attributes (axes, keepdims, noop_with_empty_axes: exactly 3)
 * of op `op` on data of rank `rank`: *mask has bit d set for each reduced
 * axis d. */
DVM_MUST_USE dvm_status *dvm_reduce_attrs(const char *op, int rank, const dvm_value *attrs,
                                          int nattrs, unsigned *mask, int *keepdims);

/* The argmax/argmin attributes (axis, keepdims, select_last_index: exactly
 * 3) of op `op` on data of shape (rank, dims); fails when the axis is empty. */
DVM_MUST_USE dvm_status *dvm_argreduce_attrs(const char *op, int rank, const int64_t *dims,
                                             const dvm_value *attrs, int nattrs, int *axis,
                                             int *keepdims, int *last);

/* dims with the axes in mask removed, or set to 1 if keepdims. */
void dvm_reduce_dims(int rank, const int64_t *dims, unsigned mask, int keepdims, int *out_rank,
                     int64_t *out);

/* TopK's k from value v (a host integer tensor of one element, or an int),
 * checked against the dim it selects from. */
DVM_MUST_USE dvm_status *dvm_topk_k(const char *op, const dvm_value *v, int64_t dim,
                                    int64_t *k);

/* LayerNorm's checks of x (rank, dims), scale and bias (rank -1 when
 * absent) and its attributes (axis, epsilon: exactly 2): *axis in [0,
 * rank). */
DVM_MUST_USE dvm_status *dvm_layernorm_check(const char *op, int rank, const int64_t *dims,
                                             int rs, const int64_t *scale, int rb,
                                             const int64_t *bias, const dvm_value *attrs,
                                             int nattrs, int *axis, double *epsilon);

/* NegativeLogLikelihoodLoss: input [N, C, d...], target [N, d...],
 * optional weight [C], then attrs reduction (0 none, 1 sum, 2 mean) and
 * ignore_index; the output's shape: target's for none, else []. Checks
 * the shapes agree. */
DVM_MUST_USE dvm_status *dvm_nll_loss_check(const char *op, const dvm_value *in, int nin,
                                            int *reduction, int64_t *ignore, int *rank,
                                            const int64_t **dims);

#endif
