/* Kernels whose output sizes depend on their data (shapefuncs/select.h
 * works out both, so the shape function and the kernel agree):
 *
 *   compress(in: x, condition; attrs: [axis:int]) -> y
 *          the slices of x along axis (x flattened without it) where the
 *          bool condition is true
 *   unique(in: x; attrs: sorted:int[, axis:int]) -> y[, indices[, inverse_indices[, counts]]]
 *          y of x's dtype, the others i64
 *   nms(in: boxes, scores[, max_output_boxes_per_class[, iou_threshold[, score_threshold]]];
 *       attrs: center_point_box:int) -> selected   i64 [count, 3]
 */
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/movement.h"
#include "ops/kargs.h"
#include "shapefuncs/select.h"
#include "shapefuncs/shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* The inputs then the attributes, as the shape functions take them. */
static int values_of(const dvm_kernel_args *a, dvm_value *v, int max) {
  int n = 0;
  for (int i = 0; i < a->nin && n < max; i++) v[n++] = dvm_value_tensor(a->in[i]);
  for (int i = 0; i < a->nattrs && n < max; i++) v[n++] = a->attrs[i];
  return n;
}

/* [outer, n, inner] of x around axis (flattened: [1, numel, 1]). */
static void around(const dvm_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = *inner = 1;
  *n = axis < 0 ? dvm_tensor_numel(x) : x->dims[axis];
  for (int i = 0; axis >= 0 && i < x->rank; i++)
    if (i < axis) *outer *= x->dims[i];
    else if (i > axis) *inner *= x->dims[i];
}

static dvm_status *compress(const dvm_kernel_args *a) {
  const char *op = "compress";
  dvm_status *st = dvm_cpu_check_io(a, op, 2, 2, 1, 1);
  if (st) return st;
  if (a->nattrs > 1) return ERR("%s: takes 0 or 1 attribute, got %d", op, a->nattrs);
  dvm_value v[3];
  dvm_compress_info p;
  int nv = values_of(a, v, 3);
  if ((st = dvm_compress_infer(v, nv, &p)) || (st = dvm_cpu_check_shape(op, a->out[0], 0, p.rank, p.dims)))
    return st;
  const dvm_tensor *x = a->in[0], *c = a->in[1];
  int64_t outer, n, inner;
  around(x, p.axis, &outer, &n, &inner);
  size_t row = (size_t)inner * dvm_dtype_size((dvm_dtype)x->dtype);
  const uint8_t *keep = dvm_tensor_ptr(c);
  const char *px = dvm_tensor_ptr(x);
  char *py = dvm_tensor_ptr(a->out[0]);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < c->dims[0]; j++)
      if (keep[j]) {
        memcpy(py, px + (o * n + j) * (int64_t)row, row);
        py += row;
      }
  return NULL;
}

static dvm_status *unique(const dvm_kernel_args *a) {
  const char *op = "unique";
  dvm_status *st = dvm_cpu_check_io(a, op, 1, 1, -1, 0);
  if (st) return st;
  if (a->nout > 4) return ERR("%s: gives 1 to 4 outputs, got %d", op, a->nout);
  const dvm_tensor *x = a->in[0];
  if (a->out[0]->dtype != x->dtype)
    return ERR("%s: output 0 is %s, input 0 is %s", op, dvm_dtype_name((dvm_dtype)a->out[0]->dtype),
               dvm_dtype_name((dvm_dtype)x->dtype));
  for (int i = 1; i < a->nout; i++)
    if (a->out[i]->dtype != DVM_I64)
      return ERR("%s: output %d is %s, want i64", op, i, dvm_dtype_name((dvm_dtype)a->out[i]->dtype));
  dvm_value v[3];
  dvm_unique_info p;
  if ((st = dvm_unique_run(v, values_of(a, v, 3), &p))) return st;
  const int64_t *from[4] = {NULL, p.first, p.inverse, p.count};
  for (int i = 0; i < a->nout && !st; i++)
    st = dvm_cpu_check_shape(op, a->out[i], i, i ? 1 : p.rank, i == 0 ? p.dims : i == 2 ? &p.n : &p.groups);
  if (!st) {
    int64_t outer, n, inner;
    around(x, p.axis, &outer, &n, &inner);
    size_t row = (size_t)inner * dvm_dtype_size((dvm_dtype)x->dtype);
    const char *px = dvm_tensor_ptr(x);
    char *py = dvm_tensor_ptr(a->out[0]);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t g = 0; g < p.groups; g++)
        memcpy(py + (o * p.groups + g) * (int64_t)row, px + (o * n + p.first[g]) * (int64_t)row, row);
    for (int i = 1; i < a->nout; i++)
      if (dvm_tensor_numel(a->out[i]))
        memcpy(dvm_tensor_ptr(a->out[i]), from[i], sizeof(int64_t) * (size_t)dvm_tensor_numel(a->out[i]));
  }
  dvm_unique_free(&p);
  return st;
}

static dvm_status *nms(const dvm_kernel_args *a) {
  const char *op = "nms";
  dvm_status *st = dvm_cpu_check_io(a, op, 2, 5, 1, 0);
  if (st) return st;
  if (a->out[0]->dtype != DVM_I64)
    return ERR("%s: output is %s, want i64", op, dvm_dtype_name((dvm_dtype)a->out[0]->dtype));
  dvm_value v[6];
  dvm_nms_info p;
  if ((st = dvm_nms_run(v, values_of(a, v, 6), &p))) return st;
  int64_t want[2] = {p.count, 3};
  if (!(st = dvm_cpu_check_shape(op, a->out[0], 0, 2, want)) && p.count)
    memcpy(dvm_tensor_ptr(a->out[0]), p.sel, sizeof(int64_t) * 3 * (size_t)p.count);
  free(p.sel);
  return st;
}

const dvm_kernel_def dvm_cpu_select_kernels[] = {
    {"compress", DVM_DEVICE_CPU, compress, "compress"},
    {"unique", DVM_DEVICE_CPU, unique, "unique"},
    {"nms", DVM_DEVICE_CPU, nms, "nms"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
