/* Shape functions "shape" (x; start, end -> [n]) and "size" (x -> []), and
 * the ones that read small host tensors into values, for what models
 * compute at run time but kernels take as attributes: "item" (a
 * one-element tensor -> an int: branch conditions, trip counts, axes),
 * "itemf" (-> a float: clip bounds), "ints" (a 1-D integer tensor of at
 * most 8 elements -> a shape value: axes) and "floats" (n numbers -> n
 * float values). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernel.h"
#include "shape.h"
#include "shapeop.h"
#include "window.h"

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

/* Element i of host tensor t as a double; 0 if its dtype is not a number. */
static int element(const dvm_tensor *t, int64_t i, double *out) {
  const void *p = dvm_tensor_data(t);
  switch (dvm_tensor_dtype(t)) {
  case DVM_F32: *out = ((const float *)p)[i]; return 1;
  case DVM_F64: *out = ((const double *)p)[i]; return 1;
  case DVM_I64: *out = (double)((const int64_t *)p)[i]; return 1;
  case DVM_I32: *out = ((const int32_t *)p)[i]; return 1;
  case DVM_I16: *out = ((const int16_t *)p)[i]; return 1;
  case DVM_I8: *out = ((const int8_t *)p)[i]; return 1;
  case DVM_U8: case DVM_BOOL: *out = ((const uint8_t *)p)[i]; return 1;
  case DVM_U16: *out = ((const uint16_t *)p)[i]; return 1;
  case DVM_U32: *out = ((const uint32_t *)p)[i]; return 1;
  case DVM_U64: *out = (double)((const uint64_t *)p)[i]; return 1;
  default: return 0;
  }
}

/* The host tensor argument of fn with at most `max` elements. */
static dvm_status *host_tensor(const char *fn, const dvm_value *in, int nin, int nout, int64_t max,
                               const dvm_tensor **out) {
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 1, nout, 1);
  if (st) return st;
  if (in[0].kind != DVM_VAL_TENSOR)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input 0 must be a tensor, got %s", fn, dvm_kind_name((dvm_kind)in[0].kind));
  const dvm_tensor *t = in[0].u.tensor;
  int64_t n = dvm_tensor_numel(t);
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU || n > max || (max == 1 && n != 1)) {
    char s[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a host tensor of %s%lld element%s is needed, got %lld (shape %s, on %s)", fn,
                          max == 1 ? "" : "at most ", (long long)max, max == 1 ? "" : "s", (long long)n,
                          dvm_shape_str(s, dvm_tensor_rank(t), dvm_tensor_dims(t)), dvm_device_name(dvm_tensor_device(t)));
  }
  /* one element of any rank is a scalar (an If's condition may be bool[1, 1]); a list is a vector */
  if (max > 1 && dvm_tensor_rank(t) > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a host tensor of rank 0 or 1 is needed, got rank %d", fn,
                          dvm_tensor_rank(t));
  double d;
  if (n && !element(t, 0, &d))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtype %s is not supported", fn, dvm_dtype_name(dvm_tensor_dtype(t)));
  *out = t;
  return NULL;
}

static dvm_status *item_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const dvm_tensor *t;
  dvm_status *st = host_tensor("item", in, nin, nout, 1, &t);
  if (st) return st;
  double d;
  element(t, 0, &d);
  out[0].kind = DVM_VAL_INT; /* integers read exactly; floats as truth values */
  out[0].u.i = dvm_tensor_dtype(t) == DVM_I64 ? ((const int64_t *)dvm_tensor_data(t))[0]
               : (dvm_tensor_dtype(t) == DVM_F32 || dvm_tensor_dtype(t) == DVM_F64) ? d != 0
               : (int64_t)d;
  return NULL;
}

static dvm_status *itemf_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const dvm_tensor *t;
  dvm_status *st = host_tensor("itemf", in, nin, nout, 1, &t);
  if (st) return st;
  out[0].kind = DVM_VAL_FLOAT;
  element(t, 0, &out[0].u.f);
  return NULL;
}

/* "floats" (a host tensor of n numbers) -> n float values (Resize scales
 * that a model computes at run time). */
static dvm_status *floats_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  if (nin != 1 || in[0].kind != DVM_VAL_TENSOR)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "floats: one tensor input is needed");
  const dvm_tensor *t = in[0].u.tensor;
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU || dvm_tensor_numel(t) != nout || dvm_tensor_rank(t) > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "floats: a host tensor of %d numbers is needed, got %lld", nout,
                          (long long)dvm_tensor_numel(t));
  for (int i = 0; i < nout; i++) {
    out[i].kind = DVM_VAL_FLOAT;
    if (!element(t, i, &out[i].u.f))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "floats: dtype %s is not supported", dvm_dtype_name(dvm_tensor_dtype(t)));
  }
  return NULL;
}

static dvm_status *ints_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const dvm_tensor *t;
  dvm_status *st = host_tensor("ints", in, nin, nout, DVM_MAX_RANK, &t);
  if (st) return st;
  if (dvm_tensor_dtype(t) != DVM_I64 && dvm_tensor_dtype(t) != DVM_I32)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "ints: an i64 or i32 tensor is needed, got %s", dvm_dtype_name(dvm_tensor_dtype(t)));
  int64_t v[DVM_MAX_RANK], n = dvm_tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    v[i] = dvm_tensor_dtype(t) == DVM_I64 ? ((const int64_t *)dvm_tensor_data(t))[i]
                                          : ((const int32_t *)dvm_tensor_data(t))[i];
  dvm_shape_set(out, (int)n, v);
  return NULL;
}

/* "auto_pads" (x, k, strides, dilations, mode) -> pads [begins..., ends...]:
 * ONNX auto_pad resolved at run time, as it depends on x's spatial dims.
 * k is conv's W (kernel = its dims from 2) or a pool's kernel_shape; empty
 * strides or dilations are 1s; mode is a dvm_auto_pad. */
static dvm_status *auto_pads_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, rk, rs, rd;
  const int64_t *x, *k, *s, *d;
  dvm_status *st = dvm_shape_check_counts("auto_pads", nin, 5, 5, nout, 1);
  if (!st) st = dvm_shape_arg("auto_pads", &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg("auto_pads", &in[1], 1, &rk, &k);
  if (!st && (in[2].kind != DVM_VAL_SHAPE || in[3].kind != DVM_VAL_SHAPE || in[4].kind != DVM_VAL_INT))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "auto_pads: strides and dilations must be shapes, mode an int");
  if (st) return st;
  s = in[2].u.dims, rs = in[2].rank, d = in[3].u.dims, rd = in[3].rank;
  int n = rx - 2;
  if (in[1].kind == DVM_VAL_TENSOR) { /* conv's W */
    k += 2;
    rk -= 2;
  }
  if (n < 1 || n > DVM_WINDOW_MAX || rk != n || (rs && rs != n) || (rd && rd != n) || in[4].u.i < 0 ||
      in[4].u.i > DVM_AUTO_PAD_VALID)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "auto_pads: %d spatial dims, kernel of %d, %d strides, %d dilations, mode %lld do not agree",
                          n, rk, rs, rd, (long long)in[4].u.i);
  int64_t pads[2 * DVM_WINDOW_MAX];
  for (int i = 0; i < n; i++) {
    int64_t stride = rs ? s[i] : 1, dil = rd ? d[i] : 1;
    if (k[i] < 1 || stride < 1 || dil < 1)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "auto_pads: kernel, stride and dilation must be >= 1");
    dvm_window_auto_pads((dvm_auto_pad)in[4].u.i, x[2 + i], k[i], stride, dil, &pads[i], &pads[n + i]);
  }
  dvm_shape_set(out, 2 * n, pads);
  return NULL;
}

/* "transpose_pads" (x, w, strides, dilations, output_padding, output_shape,
 * mode) -> pads [begins..., ends...], output_padding: ConvTranspose's
 * output_shape (its spatial dims, or N, C and them; empty: x's spatial dims
 * times the strides, for auto_pad SAME_*) resolved into explicit pads at
 * run time (dvm_window_transpose_pads). Empty strides, dilations and
 * output_padding are ONNX's defaults; mode is a dvm_auto_pad. */
static dvm_status *transpose_pads_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "transpose_pads";
  int rx, rw;
  const int64_t *x, *w;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 7, 7, nout, 2);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &rw, &w);
  for (int i = 2; !st && i < 6; i++)
    if (in[i].kind != DVM_VAL_SHAPE) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: argument %d must be a shape", fn, i);
  if (!st && in[6].kind != DVM_VAL_INT) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: mode must be an int", fn);
  if (st) return st;
  int n = rx - 2, ros = in[5].rank;
  const dvm_value *s = &in[2], *d = &in[3], *op = &in[4];
  const int64_t *os = in[5].u.dims + (ros == rx ? 2 : 0);
  if (ros == rx) ros = n;
  if (n < 1 || n > DVM_WINDOW_MAX || rw != rx || (s->rank && s->rank != n) || (d->rank && d->rank != n) ||
      (op->rank && op->rank != n) || (ros && ros != n) || in[6].u.i < 0 || in[6].u.i > DVM_AUTO_PAD_VALID)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: %d spatial dims, W of rank %d, %d strides, %d dilations, %d output_padding, "
                          "output_shape of %d, mode %lld do not agree",
                          fn, n, rw, s->rank, d->rank, op->rank, in[5].rank, (long long)in[6].u.i);
  int64_t pads[2 * DVM_WINDOW_MAX], outpad[DVM_WINDOW_MAX];
  for (int i = 0; i < n; i++) {
    int64_t stride = s->rank ? s->u.dims[i] : 1, dil = d->rank ? d->u.dims[i] : 1, k = w[2 + i];
    outpad[i] = op->rank ? op->u.dims[i] : 0;
    if (k < 1 || stride < 1 || dil < 1 || outpad[i] < 0 || (ros && os[i] < 0) || stride > (1 << 30) ||
        dil > (1 << 30) || outpad[i] > (1 << 30) || k > (1 << 30))
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: kernel, stride and dilation must be in [1, 2^30], output_padding and "
                            "output_shape >= 0",
                            fn);
    st = dvm_window_transpose_pads((dvm_auto_pad)in[6].u.i, x[2 + i], k, stride, dil, &outpad[i],
                                   ros ? os[i] : -1, &pads[i], &pads[n + i]);
    if (st) return st;
  }
  dvm_shape_set(&out[0], 2 * n, pads);
  dvm_shape_set(&out[1], n, outpad);
  return NULL;
}

/* The axes of a Resize (shape value `v`, empty for all of rank r) into
 * dims[0..*n), checked: in range, no repeats. */
static dvm_status *resize_axes(const char *fn, const dvm_value *v, int r, int *n, int *dims) {
  if (v->kind != DVM_VAL_SHAPE) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: axes must be a shape", fn);
  *n = v->rank ? v->rank : r;
  unsigned seen = 0;
  for (int i = 0; i < *n; i++) {
    int64_t a = v->rank ? v->u.dims[i] : i;
    if (a < 0) a += r;
    if (a < 0 || a >= r || (seen >> a) & 1)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: axis %lld is out of range for rank %d or repeated", fn,
                            (long long)(v->rank ? v->u.dims[i] : i), r);
    seen |= 1u << a;
    dims[i] = (int)a;
  }
  return NULL;
}

/* "resize_params" (x, values, axes, by_sizes:int, policy:int) -> Resize's
 * output dims, then one float scale per dim of x: values are the node's
 * scales (by_sizes 0: a dim's size is floor(dim * scale)) or sizes (1), one
 * per axis (axes empty: every dim; the others keep their size at scale 1),
 * read where the node runs. With sizes, policy 1 (not_larger) or 2
 * (not_smaller) takes the smallest or largest sizes[i] / dim over the axes
 * as every axis's scale and size round(dim * scale), halves up (ONNX's
 * keep_aspect_ratio_policy); else a dim's scale is size / dim. */
static dvm_status *resize_params_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "resize_params";
  int rx, naxes, axes[DVM_MAX_RANK];
  const int64_t *x;
  dvm_status *st = nin == 5 ? NULL : dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 5 inputs, got %d", fn, nin);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rx, &x);
  if (!st && nout != 1 + rx)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %d outputs for x of rank %d, want %d", fn, nout, rx, 1 + rx);
  if (!st && (in[1].kind != DVM_VAL_TENSOR || in[3].kind != DVM_VAL_INT || in[4].kind != DVM_VAL_INT))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: values must be a tensor, by_sizes and policy ints", fn);
  if (!st) st = resize_axes(fn, &in[2], rx, &naxes, axes);
  if (st) return st;
  const dvm_tensor *t = in[1].u.tensor;
  bool by_sizes = in[3].u.i != 0;
  int64_t policy = in[4].u.i;
  double v[DVM_MAX_RANK], pick = 0;
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU || dvm_tensor_rank(t) > 1 || dvm_tensor_numel(t) != naxes)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s must be a host tensor of %d values (one per axis), got %lld", fn,
                          by_sizes ? "sizes" : "scales", naxes, (long long)dvm_tensor_numel(t));
  int64_t sizes[DVM_MAX_RANK];
  double scale[DVM_MAX_RANK];
  for (int d = 0; d < rx; d++) sizes[d] = x[d], scale[d] = 1;
  for (int i = 0; i < naxes; i++) {
    int d = axes[i];
    if (!element(t, i, &v[i]))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtype %s is not supported", fn, dvm_dtype_name(dvm_tensor_dtype(t)));
    if (by_sizes ? !(v[i] >= 0 && v[i] <= (double)((int64_t)1 << 40)) : !(v[i] > 0 && isfinite(v[i])))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %d = %g is out of range", fn, by_sizes ? "size" : "scale", i, v[i]);
    if (!by_sizes) {
      scale[d] = v[i], sizes[d] = dvm_resize_scaled_size(x[d], v[i]);
      continue;
    }
    sizes[d] = (int64_t)v[i];
    scale[d] = x[d] ? v[i] / (double)x[d] : 1;
    if (i == 0 || (policy == 1 ? scale[d] < pick : scale[d] > pick)) pick = scale[d];
  }
  if (by_sizes && policy)
    for (int i = 0; i < naxes; i++) {
      int d = axes[i];
      scale[d] = pick;
      sizes[d] = (int64_t)floor((double)x[d] * pick + 0.5);
    }
  dvm_shape_set(&out[0], rx, sizes);
  for (int d = 0; d < rx; d++) {
    out[1 + d].kind = DVM_VAL_FLOAT;
    out[1 + d].u.f = scale[d];
  }
  return NULL;
}

/* "resize_roi" (roi, axes, rank:int) -> 2 * rank floats, the starts then
 * the ends of tf_crop_and_resize's region per dim: roi holds them for the
 * axes (empty: every dim); the other dims get 0 and 1 (the whole dim). */
static dvm_status *resize_roi_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "resize_roi";
  int naxes, axes[DVM_MAX_RANK];
  if (nin != 3 || in[0].kind != DVM_VAL_TENSOR || in[2].kind != DVM_VAL_INT || in[2].u.i < 0 ||
      in[2].u.i > DVM_MAX_RANK || nout != 2 * in[2].u.i)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes roi, axes and rank, and gives 2 floats per dim", fn);
  int r = (int)in[2].u.i;
  dvm_status *st = resize_axes(fn, &in[1], r, &naxes, axes);
  if (st) return st;
  const dvm_tensor *t = in[0].u.tensor;
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU || dvm_tensor_rank(t) > 1 || dvm_tensor_numel(t) != 2 * naxes)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: roi must be a host tensor of %d values (a start and an end per axis), got %lld",
                          fn, 2 * naxes, (long long)dvm_tensor_numel(t));
  for (int d = 0; d < r; d++) {
    out[d].kind = out[r + d].kind = DVM_VAL_FLOAT;
    out[d].u.f = 0, out[r + d].u.f = 1;
  }
  for (int i = 0; i < naxes; i++) {
    double a, b;
    if (!element(t, i, &a) || !element(t, naxes + i, &b))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtype %s is not supported", fn, dvm_dtype_name(dvm_tensor_dtype(t)));
    if (!isfinite(a) || !isfinite(b)) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: roi of axis %d is not finite", fn, i);
    out[axes[i]].u.f = a, out[r + axes[i]].u.f = b;
  }
  return NULL;
}

/* "resize_sizes" (x, by_sizes:int, v_0, ..., v_{rank-1}) -> Resize's output
 * dims: with by_sizes 0 the v are float scales (floor(dim * scale), ONNX's
 * rule); with 1 they are ints, -1 keeping x's dim (dims not in `axes`). */
static dvm_status *resize_sizes_fn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx;
  const int64_t *x;
  dvm_status *st = dvm_shape_check_counts("resize_sizes", nin, 2, 2 + DVM_MAX_RANK, nout, 1);
  if (!st) st = dvm_shape_arg("resize_sizes", &in[0], 0, &rx, &x);
  if (st) return st;
  if (in[1].kind != DVM_VAL_INT || nin - 2 != rx)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "resize_sizes: %d values for rank %d", nin - 2, rx);
  int64_t dims[DVM_MAX_RANK];
  for (int i = 0; i < rx; i++) {
    const dvm_value *v = &in[2 + i];
    if (in[1].u.i) {
      if (v->kind != DVM_VAL_INT || v->u.i < -1)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "resize_sizes: size %d must be an int >= -1", i);
      dims[i] = v->u.i < 0 ? x[i] : v->u.i;
    } else {
      if (v->kind != DVM_VAL_FLOAT || !(v->u.f > 0) || v->u.f > 1e9)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "resize_sizes: scale %d must be a positive float", i);
      dims[i] = dvm_resize_scaled_size(x[i], v->u.f);
    }
  }
  dvm_shape_set(out, rx, dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_shapeop_table[] = {
    {"auto_pads", auto_pads_fn},
    {"transpose_pads", transpose_pads_fn},
    {"resize_params", resize_params_fn},
    {"resize_roi", resize_roi_fn},
    {"resize_sizes", resize_sizes_fn, .dims_only = true},
    {"item", item_fn},
    {"itemf", itemf_fn},
    {"ints", ints_fn},
    {"floats", floats_fn},
    {"shape", shape_fn},
    {"size", size_fn},
    {NULL, NULL},
};
