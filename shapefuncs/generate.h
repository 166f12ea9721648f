/* Shapes of the generator ops, worked out once for the shape functions and
 * the kernels (see movement.h for the pattern):
 *   nonzero(x) -> [rank(x), count of non-zero elements]  (reads x)
 *   range(start, limit, delta) -> [max(ceil((limit - start) / delta), 0)]
 *   constant_of_shape(shape[, value]) -> the dims held in `shape` */
#ifndef DVM_SHAPEFUNCS_GENERATE_H
#define DVM_SHAPEFUNCS_GENERATE_H

#include "dvm/value.h"

/* The bits of an element of dtype dt that make it non-zero: all of them,
 * except a float's sign bit (-0.0 is zero; NaN is not). */
uint64_t dvm_nonzero_mask(dvm_dtype dt);

/* How many of the n elements of dtype dt at p are non-zero. */
int64_t dvm_nonzero_count(const void *p, int64_t n, dvm_dtype dt);

/* range's inputs: three one-element host tensors of one dtype (f32, f64,
 * f16, bf16, i16, i32 or i64). Element i is start + i * delta, computed in
 * double for floats and in int64 for integers. */
typedef struct dvm_range_info {
  dvm_dtype dtype;
  double fstart, fdelta;  /* floats */
  int64_t istart, idelta; /* integers */
  int64_t n;
} dvm_range_info;
DVM_MUST_USE dvm_status *dvm_range_infer(const dvm_value *in, int nin, dvm_range_info *p);

/* constant_of_shape(shape[, value]): `shape` an i64 or i32 host tensor of
 * rank 1 (or a shape value) with no negative dim; value an int or a float. */
DVM_MUST_USE dvm_status *dvm_constant_of_shape_infer(const dvm_value *in, int nin, int *rank,
                                                     int64_t *dims);

#endif
