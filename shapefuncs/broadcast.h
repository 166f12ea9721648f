/* Numpy (ONNX multidirectional) broadcasting of shapes: the one
 * implementation behind the "broadcast" shape function, the elementwise
 * kernels and the batch dims of matmul. */
#ifndef DVM_SHAPEFUNCS_BROADCAST_H
#define DVM_SHAPEFUNCS_BROADCAST_H

#include "dvm/value.h"

/* Broadcasts a (rank ra) with b (rank rb), aligned from the right, into
 * out[0..*rank), rank = max(ra, rb); a dim of 1 stretches to the other.
 * Returns 0, or on a mismatch the dim counted from the right (-1 = last),
 * so that callers can word their own error. `out` may be `a` or `b`. */
int dvm_broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                       int64_t *out);

/* The same, failing with "broadcast: [2,3] vs [4]: dim -1 3 != 4". */
DVM_MUST_USE dvm_status *dvm_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                                             int *rank, int64_t *out);

/* Shape function "broadcast": 2 or more tensors or shapes -> their
 * broadcast shape; numbers after them (a kernel's attributes) are not
 * read. */
dvm_status *dvm_shapefn_broadcast(const dvm_value *in, int nin, dvm_value *out, int nout);

/* Shape function "same": a tensor or shape, then anything (the kernel's
 * attributes, which the kernel checks) -> the first input's shape. The
 * shape function of the one-input elementwise kernels (exp, cast, clip). */
dvm_status *dvm_shapefn_same(const dvm_value *in, int nin, dvm_value *out, int nout);

#endif
