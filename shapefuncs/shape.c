/* Shape values in and out of shape functions (see shape.h). */
#include <limits.h>
#include <string.h>

#include "object.h"
#include "shape.h"

char *dvm_shape_str(char buf[DVM_SHAPE_STR_SIZE], int rank, const int64_t *dims) {
  /* a dtype outside the table makes dvm_shape_format print the dims alone */
  return dvm_shape_format(buf, DVM_SHAPE_STR_SIZE, DVM_DTYPE_COUNT, rank, dims);
}

dvm_status *dvm_shape_check_counts(const char *fn, int nin, int min_in, int max_in, int nout,
                                   int want_out) {
  if (nin < min_in || nin > max_in) {
    if (min_in == max_in)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d inputs, got %d", fn, min_in, nin);
    if (max_in == INT_MAX)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d or more inputs, got %d", fn,
                            min_in, nin);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d to %d inputs, got %d", fn, min_in,
                          max_in, nin);
  }
  if (nout != want_out)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: gives %d output%s, asked for %d", fn,
                          want_out, want_out == 1 ? "" : "s", nout);
  return NULL;
}

dvm_status *dvm_shape_arg(const char *fn, const dvm_value *v, int i, int *rank,
                          const int64_t **dims) {
  switch (v->kind) {
  case DVM_VAL_TENSOR:
    if (!v->u.tensor)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d is a null tensor", fn, i);
    *rank = v->u.tensor->rank; /* tensors were checked when they were made */
    *dims = v->u.tensor->dims;
    return NULL;
  case DVM_VAL_SHAPE:
    if (v->rank > DVM_MAX_RANK)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d: shape rank %d is over %d", fn, i,
                            v->rank, DVM_MAX_RANK);
    for (int d = 0; d < v->rank; d++)
      if (v->u.dims[d] < 0)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d: dim %d is negative (%lld)", fn,
                              i, d, (long long)v->u.dims[d]);
    *rank = v->rank;
    *dims = v->u.dims;
    return NULL;
  default:
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: input %d: expected a tensor or a shape, got %s", fn, i,
                          dvm_kind_name((dvm_kind)v->kind));
  }
}

void dvm_shape_set(dvm_value *out, int rank, const int64_t *dims) {
  memset(out, 0, sizeof *out);
  out->kind = DVM_VAL_SHAPE;
  out->rank = (uint8_t)rank;
  if (rank) memcpy(out->u.dims, dims, sizeof(int64_t) * (size_t)rank); /* dims may be NULL at rank 0 */
}
