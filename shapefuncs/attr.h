/* Attribute values as kernels and shape functions read them: an int, a
 * float, a shape (a list of ints) or an axis, checked for kind and range
 * and worded the same way everywhere ("softmax: axis 3 is out of range for
 * rank 2"). Header-only so that ops/ and shapefuncs/ share it. */
#ifndef DVM_SHAPEFUNCS_ATTR_H
#define DVM_SHAPEFUNCS_ATTR_H

#include "dvm/value.h"

/* Fails unless `fn` got min..max attributes. */
static inline dvm_status *dvm_attr_count(const char *fn, int nattrs, int min, int max) {
  if (nattrs >= min && nattrs <= max) return NULL;
  if (min == max)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d attribute%s, got %d", fn, min,
                          min == 1 ? "" : "s", nattrs);
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d to %d attributes, got %d", fn, min,
                        max, nattrs);
}

static inline dvm_status *dvm_attr_kind(const char *fn, const char *name, const dvm_value *v,
                                        dvm_kind want) {
  if (v->kind == want) return NULL;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute %s must be %s, got %s", fn, name,
                        dvm_kind_name(want), dvm_kind_name((dvm_kind)v->kind));
}

static inline dvm_status *dvm_attr_int(const char *fn, const char *name, const dvm_value *v,
                                       int64_t *out) {
  dvm_status *st = dvm_attr_kind(fn, name, v, DVM_VAL_INT);
  *out = st ? 0 : v->u.i;
  return st;
}

/* An int that must be 0 or 1. */
static inline dvm_status *dvm_attr_flag(const char *fn, const char *name, const dvm_value *v,
                                        int *out) {
  int64_t i;
  dvm_status *st = dvm_attr_int(fn, name, v, &i);
  *out = 0;
  if (st) return st;
  if (i != 0 && i != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s must be 0 or 1, got %lld", fn, name,
                          (long long)i);
  *out = (int)i;
  return NULL;
}

static inline dvm_status *dvm_attr_float(const char *fn, const char *name, const dvm_value *v,
                                         double *out) {
  dvm_status *st = dvm_attr_kind(fn, name, v, DVM_VAL_FLOAT);
  *out = st ? 0 : v->u.f;
  return st;
}

/* A shape value's ints (borrowed from v). */
static inline dvm_status *dvm_attr_shape(const char *fn, const char *name, const dvm_value *v,
                                         int *rank, const int64_t **dims) {
  dvm_status *st = dvm_attr_kind(fn, name, v, DVM_VAL_SHAPE);
  *rank = 0;
  *dims = NULL;
  if (st) return st;
  if (v->rank > DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute %s has %d ints, over %d", fn,
                          name, v->rank, DVM_MAX_RANK);
  *rank = v->rank;
  *dims = v->u.dims;
  return NULL;
}

/* An axis of a tensor of rank `rank`, in [-rank, rank), as [0, rank). */
static inline dvm_status *dvm_attr_axis_in(const char *fn, const char *name, int64_t axis,
                                           int rank, int *out) {
  *out = 0;
  if (axis < -rank || axis >= rank)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %lld is out of range for rank %d", fn,
                          name, (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return NULL;
}

/* The axis attribute v of a tensor of rank `rank`, as [0, rank). */
static inline dvm_status *dvm_attr_axis(const char *fn, const char *name, const dvm_value *v,
                                        int rank, int *out) {
  int64_t axis;
  dvm_status *st = dvm_attr_int(fn, name, v, &axis);
  return st ? st : dvm_attr_axis_in(fn, name, axis, rank, out);
}

#endif
