/* Windows scattered back into an image (geometry and checks in
 * shapefuncs/window.h):
 *
 *   col2im(in: input [N, C * prod(block), L], image_shape, block_shape (i64
 *       or i32 host tensors); attrs: dilations:shape, pads:shape,
 *       strides:shape) -> Y [N, C, image...]
 *     ONNX Col2Im: column l holds block position l's window (row-major over
 *     the positions, the block's elements row-major within C's); each
 *     element is added to the image pixel it covers, pads dropped. f32, f64.
 *   max_unpool(in: X [N, C, s...], I i64 [X's shape][, output_shape];
 *       attrs: kernel_shape:shape, pads:shape, strides:shape) -> Y
 *     ONNX MaxUnpool: zero but U.flat[I] = X, U of the unpooled shape (I
 *     indexes it flattened, as MaxPool's Indices do); with output_shape,
 *     Y is larger and U its leading corner. Any dtype; an index outside U
 *     fails.
 *
 * Both run as 3-D with leading spatial dims of 1. */
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/movement.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/window.h"

static dvm_status *check_out(const char *op, const dvm_tensor *y, int rank, const int64_t *dims) {
  if (y->rank == rank && !memcmp(y->dims, dims, sizeof(int64_t) * (size_t)rank)) return NULL;
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s, want %s", op, dvm_shape_str(s1, y->rank, y->dims),
                        dvm_shape_str(s2, rank, dims));
}

static dvm_status *col2im(const dvm_kernel_args *a) {
  static const char op[] = "col2im";
  dvm_status *st = dvm_kargs_check(a, op, 3, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  dvm_value v[3] = {dvm_value_tensor(a->in[0]), dvm_value_tensor(a->in[1]), dvm_value_tensor(a->in[2])};
  int64_t image[DVM_MAX_RANK], block[DVM_MAX_RANK], dims[DVM_MAX_RANK];
  int n, nb;
  dvm_window w;
  if ((st = dvm_movement_ints(op, v, 1, "image_shape", DVM_MAX_RANK, image, &n)) ||
      (st = dvm_movement_ints(op, v, 2, "block_shape", DVM_MAX_RANK, block, &nb)) ||
      (st = dvm_col2im_setup(x->rank, x->dims, n, image, nb, block, a->attrs, a->nattrs, &w, dims)) ||
      (st = check_out(op, y, 2 + n, dims)))
    return st;
  if ((x->dtype != DVM_F32 && x->dtype != DVM_F64) || y->dtype != x->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want input and Y both f32 or both f64", op,
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  /* 3-D: leading dims of 1 */
  int64_t img[3], k[3], s[3], d[3], pb[3], pos[3];
  for (int i = 0; i < 3; i++) {
    int j = i - (3 - n);
    img[i] = j < 0 ? 1 : image[j];
    k[i] = j < 0 ? 1 : w.kernel[j];
    s[i] = j < 0 ? 1 : w.stride[j];
    d[i] = j < 0 ? 1 : w.dilation[j];
    pb[i] = j < 0 ? 0 : w.pad_begin[j];
    pos[i] = j < 0 ? 1 : (img[i] + pb[i] + w.pad_end[j] - ((k[i] - 1) * d[i] + 1)) / s[i] + 1;
  }
  int64_t planes = dims[0] * dims[1], kk = k[0] * k[1] * k[2], l = pos[0] * pos[1] * pos[2];
  int64_t plane = img[0] * img[1] * img[2];
  bool f64 = x->dtype == DVM_F64;
  memset(dvm_tensor_ptr(y), 0, (size_t)(planes * plane) * (f64 ? 8 : 4));
  for (int64_t p = 0; p < planes; p++)
    for (int64_t kr = 0; kr < kk; kr++) {
      int64_t ka = kr / (k[1] * k[2]), kb = kr / k[2] % k[1], kc = kr % k[2];
      int64_t row = (p * kk + kr) * l; /* input [p / C, (p % C) * kk + kr, :] */
      for (int64_t o = 0; o < l; o++) {
        int64_t oa = o / (pos[1] * pos[2]), ob = o / pos[2] % pos[1], oc = o % pos[2];
        int64_t ia = oa * s[0] - pb[0] + ka * d[0], ib = ob * s[1] - pb[1] + kb * d[1],
                ic = oc * s[2] - pb[2] + kc * d[2];
        if (ia < 0 || ia >= img[0] || ib < 0 || ib >= img[1] || ic < 0 || ic >= img[2]) continue;
        int64_t at = p * plane + (ia * img[1] + ib) * img[2] + ic;
        if (f64) ((double *)dvm_tensor_ptr(y))[at] += ((const double *)dvm_tensor_ptr(x))[row + o];
        else ((float *)dvm_tensor_ptr(y))[at] += ((const float *)dvm_tensor_ptr(x))[row + o];
      }
    }
  return NULL;
}

static dvm_status *max_unpool(const dvm_kernel_args *a) {
  static const char op[] = "max_unpool";
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 3, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *y = a->out[0];
  int64_t shape[DVM_MAX_RANK], dims[DVM_MAX_RANK];
  int ns = -1;
  dvm_window w;
  if (a->nin == 3) {
    dvm_value v[3] = {dvm_value_tensor(a->in[0]), dvm_value_tensor(a->in[1]), dvm_value_tensor(a->in[2])};
    if ((st = dvm_movement_ints(op, v, 2, "output_shape", DVM_MAX_RANK, shape, &ns))) return st;
  }
  int64_t inferred[DVM_MAX_RANK];
  if ((st = dvm_max_unpool_setup(x->rank, x->dims, a->attrs, a->nattrs, -1, NULL, &w, inferred)) ||
      (st = dvm_max_unpool_setup(x->rank, x->dims, a->attrs, a->nattrs, ns, shape, &w, dims)) ||
      (st = check_out(op, y, x->rank, dims)))
    return st;
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  if (idx->dtype != DVM_I64 || idx->rank != x->rank || memcmp(idx->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: I %s %s must be i64 of X's shape %s", op,
                          dvm_dtype_name((dvm_dtype)idx->dtype), dvm_shape_str(s1, idx->rank, idx->dims),
                          dvm_shape_str(s2, x->rank, x->dims));
  if (y->dtype != x->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Y is %s, X %s", op, dvm_dtype_name((dvm_dtype)y->dtype),
                          dvm_dtype_name((dvm_dtype)x->dtype));
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  int64_t n = dvm_tensor_numel(x), total = 1;
  for (int d = 0; d < x->rank; d++) total *= inferred[d];
  const int64_t *ip = dvm_tensor_ptr(idx);
  memset(dvm_tensor_ptr(y), 0, (size_t)dvm_tensor_numel(y) * esz);
  for (int64_t i = 0; i < n; i++) {
    if (ip[i] < 0 || ip[i] >= total)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: index %lld (element %lld of I) is outside %s", op,
                            (long long)ip[i], (long long)i, dvm_shape_str(s1, x->rank, inferred));
    /* the index is into the unpooled shape, which sits at the start of each dim of Y */
    int64_t at = 0, rest = ip[i], stride = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      at += rest % inferred[d] * stride;
      rest /= inferred[d];
      stride *= dims[d];
    }
    memcpy((char *)dvm_tensor_ptr(y) + at * (int64_t)esz, (const char *)dvm_tensor_ptr(x) + i * (int64_t)esz, esz);
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_unwindow_kernels[] = {
    {"col2im", DVM_DEVICE_CPU, col2im, "col2im"},
    {"max_unpool", DVM_DEVICE_CPU, max_unpool, "max_unpool"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
