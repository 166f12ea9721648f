/* Shape functions "shape" (x; start, end -> [n]), "size" (x -> []) and
 * "item" (a one-element host tensor -> its value as an int: the branch
 * conditions and trip counts of control flow). */
#include <string.h>

#include "kernel.h"
#include "shape.h"
#include "shapeop.h"

static int64_t clamp_index(int64_t i, int rank) {
  if (i < 0) i += rank;
  return i < 0 ? 0 : i > rank ? rank : i;
}

dvm_status *dvm_shapeop_range(int rank, const dvm_value *attrs, int nattrs, int64_t *lo, int64_t *hi) {
  if (nattrs > 2) return dvm_status_new(DVM_INVALID_ARGUMENT, "shape: at most 2 attributes (start, end), got %d", nattrs);
  for (int i = 0; i < nattrs; i++)
    if (attrs[i].kind != DVM_VAL_INT)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "shape: attribute %d must be an int", i);
  *lo = nattrs > 0 ? clamp_index(attrs[0].u.i, rank) : 0;
  *hi = nattrs > 1 ? clamp_index(attrs[1].u.i, rank) : rank;
  if (*hi < *lo) *hi = *lo;
  return NULL;
}

static dvm_status *shape_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("shape", nin, 1, 3, nout, 1);
  int rank;
  const int64_t *dims;
  if (st || (st = dvm_shape_arg("shape", &in[0], 0, &rank, &dims))) return st;
  int64_t lo, hi;
  if ((st = dvm_shapeop_range(rank, in + 1, nin - 1, &lo, &hi))) return st;
  int64_t n = hi - lo;
  dvm_shape_set(out, 1, &n);
  return NULL;
}

static dvm_status *size_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("size", nin, 1, 1, nout, 1);
  if (st) return st;
  dvm_shape_set(out, 0, NULL);
  return NULL;
}

static dvm_status *item_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("item", nin, 1, 1, nout, 1);
  if (st) return st;
  if (in[0].kind != DVM_VAL_TENSOR)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "item: input 0 must be a tensor, got %s", dvm_kind_name((dvm_kind)in[0].kind));
  const dvm_tensor *t = in[0].u.tensor;
  if (dvm_tensor_numel(t) != 1 || dvm_tensor_device(t) != DVM_DEVICE_CPU)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "item: a one-element host tensor is needed, got %lld elements",
                          (long long)dvm_tensor_numel(t));
  const void *p = dvm_tensor_data(t);
  int64_t v;
  switch (dvm_tensor_dtype(t)) {
  case DVM_I64: memcpy(&v, p, 8); break;
  case DVM_I32: v = *(const int32_t *)p; break;
  case DVM_BOOL: case DVM_U8: v = *(const uint8_t *)p; break;
  case DVM_F32: v = *(const float *)p != 0; break;
  default: return dvm_status_new(DVM_INVALID_ARGUMENT, "item: dtype %s is not supported", dvm_dtype_name(dvm_tensor_dtype(t)));
  }
  out[0].kind = DVM_VAL_INT;
  out[0].u.i = v;
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_shapeop_table[] = {
    {"item", item_fn},
    {"shape", shape_fn},
    {"size", size_fn},
    {NULL, NULL},
};
