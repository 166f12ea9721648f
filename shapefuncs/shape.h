/* Shapes as shape functions and kernels see them: reading an input value as
 * a shape, writing an output shape value, and printing shapes in messages. */
#ifndef DVM_SHAPEFUNCS_SHAPE_H
#define DVM_SHAPEFUNCS_SHAPE_H

#include "dvm/value.h"

/* Room for "[d0,...,d7]" with any int64 dims, and the NUL. */
#define DVM_SHAPE_STR_SIZE (3 + DVM_MAX_RANK * 21)

/* Formats "[2,3]" into buf; returns buf. */
char *dvm_shape_str(char buf[DVM_SHAPE_STR_SIZE], int rank, const int64_t *dims);

/* Fails unless a shape function `fn` was called with min_in..max_in inputs
 * and want_out outputs. */
DVM_MUST_USE dvm_status *dvm_shape_check_counts(const char *fn, int nin, int min_in, int max_in,
                                                int nout, int want_out);

/* The shape of input `i` of shape function `fn`: a tensor's dims or a shape
 * value's (borrowed from `v`). Fails naming fn and i for any other kind, a
 * shape rank over DVM_MAX_RANK or a negative dim. */
DVM_MUST_USE dvm_status *dvm_shape_arg(const char *fn, const dvm_value *v, int i, int *rank,
                                       const int64_t **dims);

/* Makes *out a shape value holding rank dims. */
void dvm_shape_set(dvm_value *out, int rank, const int64_t *dims);

#endif
