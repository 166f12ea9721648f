/* Window geometry and the shape functions conv, conv_transpose, pool,
 * global_pool, resize and grid_sample (see window.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attr.h"
#include "kernel.h"
#include "movement.h"
#include "shape.h"
#include "window.h"

/* Attribute values above this are refused, so that window arithmetic on
 * them (spans, strides times dims) cannot overflow int64. */
#define ATTR_MAX ((int64_t)1 << 30)

/* Shape attribute `name` into out[0..n): n values each in [min, ATTR_MAX],
 * or an empty shape for n copies of dflt. */
static dvm_status *attr_list(const char *op, const char *name, const dvm_value *v, int n,
                             int64_t dflt, int64_t min, int64_t *out) {
  int rank = 0;
  const int64_t *dims = NULL;
  dvm_status *st = dvm_attr_shape(op, name, v, &rank, &dims);
  if (st) return st;
  if (rank != 0 && rank != n)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: attribute %s has %d values, want %d (or none for the default)", op,
                          name, rank, n);
  for (int i = 0; i < n; i++) {
    int64_t x = rank ? dims[i] : dflt;
    if (x < min || x > ATTR_MAX)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: attribute %s[%d] = %lld is out of range [%lld, %lld]", op, name, i,
                            (long long)x, (long long)min, (long long)ATTR_MAX);
    out[i] = x;
  }
  return NULL;
}

static dvm_status *attr_int(const char *op, const char *name, const dvm_value *v, int64_t lo,
                            int64_t hi, int64_t *out) {
  dvm_status *st = dvm_attr_int(op, name, v, out);
  if (st || (*out >= lo && *out <= hi)) return st;
  return dvm_status_new(DVM_INVALID_ARGUMENT,
                        "%s: attribute %s = %lld is out of range [%lld, %lld]", op, name,
                        (long long)*out, (long long)lo, (long long)hi);
}

static dvm_status *attr_finite(const char *op, const char *name, const dvm_value *v, double *out) {
  dvm_status *st = dvm_attr_float(op, name, v, out);
  if (st || isfinite(*out)) return st;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute %s = %g is not finite", op, name,
                        *out);
}

/* The spatial dims of X: rank 3 to 2 + DVM_WINDOW_MAX. */
static dvm_status *check_spatial(const char *op, int rx, const int64_t *x) {
  if (rx >= 3 && rx <= 2 + DVM_WINDOW_MAX) return NULL;
  char s[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT,
                        "%s: X %s must have rank 3 to %d ([N, C, 1 to %d spatial dims])", op,
                        dvm_shape_str(s, rx, x), 2 + DVM_WINDOW_MAX, DVM_WINDOW_MAX);
}

/* strides, pads and (when given) dilations of n spatial dims. */
static dvm_status *window_attrs(const char *op, int n, const dvm_value *strides,
                                const dvm_value *pads, const dvm_value *dilations, dvm_window *w) {
  int64_t p[2 * DVM_WINDOW_MAX];
  w->n = n;
  dvm_status *st = attr_list(op, "strides", strides, n, 1, 1, w->stride);
  if (!st) st = attr_list(op, "pads", pads, 2 * n, 0, 0, p);
  if (!st) st = attr_list(op, "dilations", dilations, n, 1, 1, w->dilation);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    w->pad_begin[i] = p[i];
    w->pad_end[i] = p[n + i];
    w->out_pad[i] = 0;
  }
  w->ceil_mode = false;
  return NULL;
}

/* The extent of a dilated kernel; both are at most ATTR_MAX. */
static int64_t span(const dvm_window *w, int i) { return (w->kernel[i] - 1) * w->dilation[i] + 1; }

/* Output dims of conv and pooling: out[i] for spatial input in[i]. */
static dvm_status *window_out(const char *op, const dvm_window *w, const int64_t *in,
                              int64_t *out) {
  for (int i = 0; i < w->n; i++) {
    int64_t padded = in[i] + w->pad_begin[i] + w->pad_end[i];
    if (in[i] > INT64_MAX / 4) /* so that no sum below can overflow */
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X dim %d (%lld) is too large", op, 2 + i,
                            (long long)in[i]);
    int64_t s = span(w, i), st = w->stride[i];
    if (padded < s)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: X dim %d is %lld, with pads %lld+%lld smaller than the window "
                            "%lld (kernel %lld, dilation %lld)",
                            op, 2 + i, (long long)in[i], (long long)w->pad_begin[i],
                            (long long)w->pad_end[i], (long long)s, (long long)w->kernel[i],
                            (long long)w->dilation[i]);
    int64_t o = (padded - s) / st + 1;
    if (w->ceil_mode) {
      o = (padded - s + st - 1) / st + 1;
      if ((o - 1) * st >= in[i] + w->pad_begin[i]) o--; /* would start in the end padding */
    }
    out[i] = o;
  }
  return NULL;
}

void dvm_window_auto_pads(dvm_auto_pad mode, int64_t in, int64_t kernel, int64_t stride,
                          int64_t dilation, int64_t *pad_begin, int64_t *pad_end) {
  *pad_begin = *pad_end = 0;
  if (mode != DVM_AUTO_PAD_SAME_UPPER && mode != DVM_AUTO_PAD_SAME_LOWER) return;
  int64_t out = (in + stride - 1) / stride;
  int64_t total = (out - 1) * stride + (kernel - 1) * dilation + 1 - in;
  if (total < 0) total = 0;
  *pad_begin = mode == DVM_AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
  *pad_end = total - *pad_begin;
}

dvm_status *dvm_window_transpose_pads(dvm_auto_pad mode, int64_t in, int64_t kernel, int64_t stride,
                                      int64_t dilation, int64_t *out_pad, int64_t out,
                                      int64_t *pad_begin, int64_t *pad_end) {
  int64_t natural = stride * (in - 1) + *out_pad + (kernel - 1) * dilation + 1;
  if (out < 0) out = natural < in * stride ? natural : in * stride;
  int64_t total = natural - out;
  int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor, as ONNX's Python */
  int64_t begin = mode == DVM_AUTO_PAD_SAME_UPPER ? half : total - half;
  if (begin < 0)
    return dvm_status_new(DVM_UNIMPLEMENTED,
                          "conv_transpose: output size %lld would need a negative begin pad "
                          "(%lld) with input %lld, kernel %lld, stride %lld, dilation %lld",
                          (long long)out, (long long)begin, (long long)in, (long long)kernel,
                          (long long)stride, (long long)dilation);
  int64_t end = total - begin;
  if (end < 0) {
    *out_pad -= end;
    end = 0;
  }
  *pad_begin = begin;
  *pad_end = end;
  return NULL;
}

dvm_status *dvm_conv_epilogue_attrs(const char *op, const dvm_value *attrs, int nattrs, dvm_conv_epilogue *out) {
  static const char *const names[] = {"alpha", "beta", "post_scale", "post_shift"};
  *out = (dvm_conv_epilogue){.post_scale = 1};
  if (nattrs == 4) return NULL;
  if (nattrs != 4 + DVM_CONV_EPILOGUE_ATTRS)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d attributes, got %d", op, 4 + DVM_CONV_EPILOGUE_ATTRS,
                          nattrs);
  double v[4];
  dvm_status *st = dvm_attr_int(op, "activation", &attrs[4], &out->act);
  for (int i = 0; i < 4 && !st; i++) st = dvm_attr_float(op, names[i], &attrs[5 + i], &v[i]);
  if (!st) st = dvm_attr_int(op, "layout", &attrs[9], &out->layout);
  if (!st) st = dvm_attr_int(op, "algo", &attrs[10], &out->algo);
  if (st) return st;
  if (out->algo < 0 || out->algo > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: algo %lld is not 0 or 1", op, (long long)out->algo);
  if (out->layout < 0 || out->layout > 7)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: layout %lld is not 0 to 7", op, (long long)out->layout);
  if (out->act < 0 || out->act >= DVM_CONV_ACTS)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: activation %lld is not one of %d", op, (long long)out->act,
                          DVM_CONV_ACTS);
  static const double dflt[DVM_CONV_ACTS][2] = {[DVM_CONV_LEAKY_RELU] = {0.01, 0},
                                                [DVM_CONV_CLIP] = {-INFINITY, INFINITY},
                                                [DVM_CONV_HARD_SIGMOID] = {0.2, 0.5}};
  for (int i = 0; i < 2; i++)
    if (isnan(v[i])) v[i] = dflt[out->act][i];
  for (int i = 2; i < 4; i++)
    if (!isfinite(v[i]))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s = %g must be finite", op, names[i], v[i]);
  out->alpha = v[0], out->beta = v[1], out->post_scale = v[2], out->post_shift = v[3];
  return NULL;
}

dvm_status *dvm_conv_setup(bool transpose, int rx, const int64_t *x, int rw, const int64_t *w,
                           int rb, const int64_t *b, const dvm_value *attrs, int nattrs,
                           dvm_window *win, int64_t *group, int64_t *out) {
  const char *op = transpose ? "conv_transpose" : "conv";
  char sx[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE];
  dvm_status *st = dvm_attr_count(op, nattrs, 4 + transpose, 4 + transpose);
  if (!st) st = check_spatial(op, rx, x);
  if (st) return st;
  int n = rx - 2;
  if (rw != rx)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: W %s must have the rank of X %s", op,
                          dvm_shape_str(sw, rw, w), dvm_shape_str(sx, rx, x));
  st = window_attrs(op, n, &attrs[0], &attrs[1], &attrs[2], win);
  if (!st) st = attr_int(op, "group", &attrs[3], 1, ATTR_MAX, group);
  if (!st && transpose) st = attr_list(op, "output_padding", &attrs[4], n, 0, 0, win->out_pad);
  if (st) return st;
  int64_t g = *group, c = x[1], m;
  /* conv W is [M, C/group, k...]; conv_transpose W is [C, M/group, k...] */
  bool ok = transpose ? w[0] == c && c % g == 0 : w[1] * g == c && w[0] % g == 0;
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          transpose ? "%s: W %s does not fit X %s with group %lld: want W[0] = "
                                      "C, divisible by group"
                                    : "%s: W %s does not fit X %s with group %lld: want W[1] * "
                                      "group = C and W[0] divisible by group",
                          op, dvm_shape_str(sw, rw, w), dvm_shape_str(sx, rx, x), (long long)g);
  m = transpose ? w[1] * g : w[0];
  if (rb >= 0 && (rb != 1 || b[0] != m))
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: B %s must be [%lld], one per output channel of W %s", op,
                          dvm_shape_str(sb, rb, b), (long long)m, dvm_shape_str(sw, rw, w));
  for (int i = 0; i < n; i++) {
    if (w[2 + i] < 1 || w[2 + i] > ATTR_MAX)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: W %s: kernel dim %d is out of range [1, %lld]", op,
                            dvm_shape_str(sw, rw, w), 2 + i, (long long)ATTR_MAX);
    win->kernel[i] = w[2 + i];
  }
  out[0] = x[0];
  out[1] = m;
  if (!transpose) return window_out(op, win, x + 2, out + 2);
  for (int i = 0; i < n; i++) {
    int64_t o;
    /* stride * (in - 1) + output_padding + span - pads */
    if (__builtin_mul_overflow(win->stride[i], x[2 + i] > 0 ? x[2 + i] - 1 : 0, &o) ||
        __builtin_add_overflow(o, win->out_pad[i] + span(win, i), &o))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X dim %d (%lld) is too large", op, 2 + i,
                            (long long)x[2 + i]);
    o -= win->pad_begin[i] + win->pad_end[i];
    if (x[2 + i] == 0 || o < 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: X dim %d is %lld: with pads %lld+%lld, the output would have "
                            "%lld elements",
                            op, 2 + i, (long long)x[2 + i], (long long)win->pad_begin[i],
                            (long long)win->pad_end[i], (long long)(x[2 + i] ? o : 0));
    out[2 + i] = o;
  }
  return NULL;
}

dvm_status *dvm_pool_setup(const char *op, int rx, const int64_t *x, const dvm_value *attrs,
                           int nattrs, dvm_window *win, int64_t *out) {
  dvm_status *st = dvm_attr_count(op, nattrs, 5, 6);
  if (!st) st = check_spatial(op, rx, x);
  if (st) return st;
  int n = rx - 2;
  int ceil_mode = 0;
  if (attrs[0].kind == DVM_VAL_SHAPE && attrs[0].rank == 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute kernel_shape is required", op);
  st = attr_list(op, "kernel_shape", &attrs[0], n, 0, 1, win->kernel);
  if (!st) st = window_attrs(op, n, &attrs[1], &attrs[2], &attrs[3], win);
  if (!st) st = dvm_attr_flag(op, "ceil_mode", &attrs[4], &ceil_mode);
  if (!st && nattrs == 6) st = dvm_attr_kind(op, "6", &attrs[5], DVM_VAL_INT);
  if (st) return st;
  win->ceil_mode = ceil_mode;
  for (int i = 0; i < n; i++)
    if (win->pad_begin[i] >= win->kernel[i] || win->pad_end[i] >= win->kernel[i])
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: pads %lld+%lld of spatial dim %d must be smaller than the "
                            "kernel %lld",
                            op, (long long)win->pad_begin[i], (long long)win->pad_end[i], i,
                            (long long)win->kernel[i]);
  out[0] = x[0];
  out[1] = x[1];
  return window_out(op, win, x + 2, out + 2);
}

dvm_status *dvm_global_pool_setup(const char *op, int rx, const int64_t *x, int64_t *out) {
  if (rx < 3) {
    char s[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X %s must have rank 3 or more", op,
                          dvm_shape_str(s, rx, x));
  }
  out[0] = x[0];
  out[1] = x[1];
  for (int i = 2; i < rx; i++) out[i] = 1;
  return NULL;
}

dvm_status *dvm_resize_setup(int rx, const int64_t *x, const dvm_value *attrs, int nattrs,
                             dvm_resize *r, int64_t *out) {
  const char *op = "resize";
  char sx[DVM_SHAPE_STR_SIZE], ss[DVM_SHAPE_STR_SIZE];
  if (nattrs != 4 && nattrs != 7 && nattrs != 7 + rx && nattrs != 8 + 3 * rx)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "resize: takes 4, 7, %d or %d attributes (7, one scale per dim of X "
                          "%s, then a roi start and end per dim and extrapolation_value), got %d",
                          7 + rx, 8 + 3 * rx, dvm_shape_str(sx, rx, x), nattrs);
  const dvm_value *sizes = &attrs[0];
  if (sizes->kind != DVM_VAL_SHAPE || sizes->rank != rx)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "resize: attribute sizes must be a shape of rank %d, the rank of X %s",
                          rx, dvm_shape_str(sx, rx, x));
  int64_t mode, coord, nearest;
  int excl = 0, anti = 0;
  dvm_status *st = attr_int(op, "mode", &attrs[1], 0, DVM_RESIZE_MODE_COUNT - 1, &mode);
  if (!st)
    st = attr_int(op, "coordinate_transformation_mode", &attrs[2], 0, DVM_RESIZE_COORD_COUNT - 1,
                  &coord);
  if (!st && (coord == DVM_RESIZE_TF_CROP_AND_RESIZE) != (nattrs == 8 + 3 * rx))
    st = dvm_status_new(DVM_INVALID_ARGUMENT,
                        "resize: the roi and extrapolation_value attributes go with "
                        "coordinate_transformation_mode %d (tf_crop_and_resize), and it needs them",
                        DVM_RESIZE_TF_CROP_AND_RESIZE);
  if (!st) st = attr_int(op, "nearest_mode", &attrs[3], 0, DVM_RESIZE_NEAREST_COUNT - 1, &nearest);
  r->cubic_a = -0.75;
  if (!st && nattrs >= 7) st = attr_finite(op, "cubic_coeff_a", &attrs[4], &r->cubic_a);
  if (!st && nattrs >= 7) st = dvm_attr_flag(op, "exclude_outside", &attrs[5], &excl);
  if (!st && nattrs >= 7) st = dvm_attr_flag(op, "antialias", &attrs[6], &anti);
  if (st) return st;
  r->mode = (dvm_resize_mode)mode;
  r->coord = (dvm_resize_coord)coord;
  r->nearest = (dvm_resize_nearest)nearest;
  r->exclude_outside = excl;
  r->antialias = anti;
  for (int d = 0; d < rx; d++) {
    int64_t o = sizes->u.dims[d];
    if (x[d] == 0 && o != 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "resize: X %s dim %d is empty and cannot be resized to sizes %s",
                            dvm_shape_str(sx, rx, x), d, dvm_shape_str(ss, rx, sizes->u.dims));
    r->scale[d] = x[d] ? (double)o / (double)x[d] : 1.0;
    r->length[d] = (double)o;
    r->roi_start[d] = 0, r->roi_end[d] = 1;
    if (nattrs == 8 + 3 * rx) {
      st = attr_finite(op, "roi_start", &attrs[7 + rx + d], &r->roi_start[d]);
      if (!st) st = attr_finite(op, "roi_end", &attrs[7 + 2 * rx + d], &r->roi_end[d]);
      if (st) return st;
    }
    if (nattrs >= 7 + rx) {
      st = attr_finite(op, "scale", &attrs[7 + d], &r->scale[d]);
      if (!st && r->scale[d] <= 0)
        st = dvm_status_new(DVM_INVALID_ARGUMENT, "resize: scale %d = %g must be positive", d,
                            r->scale[d]);
      if (st) return st;
      r->length[d] = (double)x[d] * r->scale[d];
    }
    out[d] = o;
  }
  r->extrapolation = 0;
  if (nattrs == 8 + 3 * rx) return dvm_attr_float(op, "extrapolation_value", &attrs[7 + 3 * rx], &r->extrapolation);
  return NULL;
}

int64_t dvm_resize_scaled_size(int64_t in, double scale) {
  return (int64_t)floor((double)in * scale);
}

double dvm_resize_coord_in(const dvm_resize *r, int d, int64_t o, int64_t in, int64_t out) {
  double x = (double)o, scale = r->scale[d], length = r->length[d];
  double start = r->roi_start[d], end = r->roi_end[d];
  switch (r->coord) {
  case DVM_RESIZE_TF_CROP_AND_RESIZE: { /* in f32, as ONNX Runtime (nearest rounds its halves) */
    float s = (float)start, e = (float)end, len = (float)(in - 1);
    return out > 1 ? (double)(s * len + ((float)o * (e - s) * len) / (float)(out - 1))
                   : 0.5 * (double)(s + e) * (double)len;
  }
  case DVM_RESIZE_HALF_PIXEL:
    return (x + 0.5) / scale - 0.5;
  case DVM_RESIZE_ASYMMETRIC:
    return x / scale;
  case DVM_RESIZE_ALIGN_CORNERS:
    return length == 1 ? 0.0 : x * (double)(in - 1) / (length - 1);
  case DVM_RESIZE_PYTORCH_HALF_PIXEL:
    return length > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  case DVM_RESIZE_TF_HALF_PIXEL_FOR_NEAREST:
    return (x + 0.5) / scale;
  case DVM_RESIZE_HALF_PIXEL_SYMMETRIC: {
    /* the output's real extent is centred on the input's */
    double adjust = (double)out / length, center = (double)in / 2;
    return center * (1 - adjust) + (x + 0.5) / scale - 0.5;
  }
  default:
    return x;
  }
}

/* Shape functions: the kernels' inputs, then their attributes. */

dvm_status *dvm_grid_sample_setup(int rx, const int64_t *x, int rg, const int64_t *g,
                                  const dvm_value *attrs, int nattrs, dvm_grid_sample *gs,
                                  int64_t *out) {
  const char *op = "grid_sample";
  char sx[DVM_SHAPE_STR_SIZE], sg[DVM_SHAPE_STR_SIZE];
  int64_t mode, pad;
  int align = 0;
  dvm_status *st = dvm_attr_count(op, nattrs, 3, 3);
  if (!st) st = attr_int(op, "mode", &attrs[0], 0, 4, &mode);
  if (!st) st = attr_int(op, "padding_mode", &attrs[1], 0, DVM_GRID_PADDING_COUNT - 1, &pad);
  if (!st) st = dvm_attr_flag(op, "align_corners", &attrs[2], &align);
  if (!st) st = check_spatial(op, rx, x);
  if (st) return st;
  int r = rx - 2;
  if (rg != rx || g[0] != x[0] || g[rg - 1] != r)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "grid_sample: grid %s does not fit X %s: want [%lld, spatial dims "
                          "(%d), %d]",
                          dvm_shape_str(sg, rg, g), dvm_shape_str(sx, rx, x), (long long)x[0], r,
                          r);
  gs->mode = mode == 3 ? DVM_GRID_LINEAR : mode == 4 ? DVM_GRID_CUBIC : (dvm_grid_mode)mode;
  gs->padding = (dvm_grid_padding)pad;
  gs->align_corners = align;
  out[0] = x[0];
  out[1] = x[1];
  int64_t points = 1, cells = 1;
  for (int d = 0; d < r; d++) {
    out[2 + d] = g[1 + d];
    points *= g[1 + d];
    cells *= x[2 + d];
  }
  if (points && x[0] && x[1] && !cells)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "grid_sample: X %s has an empty spatial dim to sample at grid %s",
                          dvm_shape_str(sx, rx, x), dvm_shape_str(sg, rg, g));
  return NULL;
}

dvm_status *dvm_affine_grid_setup(int rt, const int64_t *theta, int64_t nsize, const int64_t *size,
                                  int *rank, int64_t *out) {
  char st[DVM_SHAPE_STR_SIZE], ss[DVM_SHAPE_STR_SIZE];
  int r = (int)nsize - 2; /* spatial dims */
  if ((nsize != 4 && nsize != 5) || rt != 3 || theta[0] != size[0] || theta[1] != r || theta[2] != r + 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "affine_grid: theta %s and size %s do not fit: want theta [N, 2, 3] and size "
                          "[N, C, H, W], or [N, 3, 4] and [N, C, D, H, W]",
                          dvm_shape_str(st, rt, theta),
                          dvm_shape_str(ss, nsize >= 0 && nsize <= DVM_MAX_RANK ? (int)nsize : 0, size));
  *rank = r + 2;
  out[0] = size[0];
  for (int d = 0; d < r; d++) {
    if (size[2 + d] < 0 || size[2 + d] > ((int64_t)1 << 40))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "affine_grid: size %s has a dim out of range",
                            dvm_shape_str(ss, (int)nsize, size));
    out[1 + d] = size[2 + d];
  }
  out[1 + r] = r;
  return NULL;
}

dvm_status *dvm_deform_conv_setup(int rx, const int64_t *x, int rw, const int64_t *w, int roff,
                                  const int64_t *off, int rb, const int64_t *b, int rm,
                                  const int64_t *mask, const dvm_value *attrs, int nattrs,
                                  dvm_window *win, int64_t *group, int64_t *offset_group,
                                  int64_t *out) {
  const char *op = "deform_conv";
  char sx[DVM_SHAPE_STR_SIZE], so[DVM_SHAPE_STR_SIZE], sm[DVM_SHAPE_STR_SIZE];
  dvm_status *st = dvm_attr_count(op, nattrs, 6, 6);
  if (!st && rx != 4)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X %s must be [N, C, H, W] (2-D only)", op,
                        dvm_shape_str(sx, rx, x));
  if (!st) st = dvm_conv_setup(false, rx, x, rw, w, rb, b, attrs, 4, win, group, out);
  if (!st) st = attr_int(op, "offset_group", &attrs[4], 1, ATTR_MAX, offset_group);
  if (st) return st;
  int64_t og = *offset_group, taps = w[2] * w[3];
  if (x[1] % og)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: offset_group %lld does not divide C of X %s", op,
                          (long long)og, dvm_shape_str(sx, rx, x));
  if (roff != 4 || off[0] != x[0] || off[1] != og * 2 * taps || off[2] != out[2] || off[3] != out[3])
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: offset %s, want [%lld, %lld, %lld, %lld] (offset_group * 2 * kH * kW "
                          "channels over the output)",
                          op, dvm_shape_str(so, roff, off), (long long)x[0], (long long)(og * 2 * taps),
                          (long long)out[2], (long long)out[3]);
  if (rm >= 0 && (rm != 4 || mask[0] != x[0] || mask[1] != og * taps || mask[2] != out[2] ||
                  mask[3] != out[3]))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: mask %s, want [%lld, %lld, %lld, %lld]", op,
                          dvm_shape_str(sm, rm, mask), (long long)x[0], (long long)(og * taps),
                          (long long)out[2], (long long)out[3]);
  return NULL;
}

/* conv, conv_transpose, and fused_conv (`epilogue` attributes after conv's
 * four, which do not change the shape). */
static dvm_status *conv_fn(bool transpose, int epilogue, const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = transpose ? "conv_transpose" : epilogue ? "fused_conv" : "conv";
  int nattrs = 4 + transpose + epilogue, rx, rw, rb = -1;
  const int64_t *x, *w, *b = NULL;
  int64_t dims[DVM_MAX_RANK], group;
  dvm_window win;
  /* X, W, [B, [Z]], attrs: the count says whether B (and fused_conv's Z) is there */
  int rz = -1;
  const int64_t *z = NULL;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2 + nattrs, 3 + (epilogue > 0) + nattrs, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &rw, &w);
  if (!st && nin >= 3 + nattrs) st = dvm_shape_arg(fn, &in[2], 2, &rb, &b);
  if (!st && nin == 4 + nattrs) st = dvm_shape_arg(fn, &in[3], 3, &rz, &z);
  if (!st)
    st = dvm_conv_setup(transpose, rx, x, rw, w, rb, b, in + nin - nattrs, nattrs - epilogue, &win, &group,
                        dims);
  if (st) return st;
  if (z && (rz != rx || memcmp(z, dims, sizeof(int64_t) * rx) != 0)) {
    char sz[DVM_SHAPE_STR_SIZE], sy[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Z %s must have Y's dims %s", fn, dvm_shape_str(sz, rz, z),
                          dvm_shape_str(sy, rx, dims));
  }
  dvm_shape_set(&out[0], rx, dims);
  return NULL;
}

static dvm_status *shapefn_conv(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return conv_fn(false, 0, in, nin, out, nout);
}

static dvm_status *shapefn_fused_conv(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return conv_fn(false, DVM_CONV_EPILOGUE_ATTRS, in, nin, out, nout);
}

static dvm_status *shapefn_conv_transpose(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return conv_fn(true, 0, in, nin, out, nout);
}

/* One output, or two (max_pool's values and indices, the same shape). */
static dvm_status *shapefn_pool(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx;
  const int64_t *x;
  int64_t dims[DVM_MAX_RANK];
  dvm_window win;
  dvm_status *st = dvm_shape_check_counts("pool", nin, 6, 7, nout, nout == 2 ? 2 : 1);
  if (!st) st = dvm_shape_arg("pool", &in[0], 0, &rx, &x);
  if (!st) st = dvm_pool_setup("pool", rx, x, in + 1, nin - 1, &win, dims);
  if (st) return st;
  for (int i = 0; i < nout; i++) dvm_shape_set(&out[i], rx, dims);
  return NULL;
}

static dvm_status *shapefn_global_pool(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx;
  const int64_t *x;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("global_pool", nin, 1, 1, nout, 1);
  if (!st) st = dvm_shape_arg("global_pool", &in[0], 0, &rx, &x);
  if (!st) st = dvm_global_pool_setup("global_pool", rx, x, dims);
  if (st) return st;
  dvm_shape_set(&out[0], rx, dims);
  return NULL;
}

static dvm_status *shapefn_resize(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx;
  const int64_t *x;
  int64_t dims[DVM_MAX_RANK];
  dvm_resize r;
  dvm_status *st = dvm_shape_check_counts("resize", nin, 1, 9 + 3 * DVM_MAX_RANK, nout, 1);
  if (!st) st = dvm_shape_arg("resize", &in[0], 0, &rx, &x);
  if (!st) st = dvm_resize_setup(rx, x, in + 1, nin - 1, &r, dims);
  if (st) return st;
  dvm_shape_set(&out[0], rx, dims);
  return NULL;
}

static dvm_status *shapefn_grid_sample(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, rg;
  const int64_t *x, *g;
  int64_t dims[DVM_MAX_RANK];
  dvm_grid_sample gs;
  dvm_status *st = dvm_shape_check_counts("grid_sample", nin, 5, 5, nout, 1);
  if (!st) st = dvm_shape_arg("grid_sample", &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg("grid_sample", &in[1], 1, &rg, &g);
  if (!st) st = dvm_grid_sample_setup(rx, x, rg, g, in + 2, nin - 2, &gs, dims);
  if (st) return st;
  dvm_shape_set(&out[0], rx, dims);
  return NULL;
}

/* ---- col2im, max_unpool ---- */

dvm_status *dvm_col2im_setup(int rx, const int64_t *x, int n, const int64_t *image, int nb, const int64_t *block,
                             const dvm_value *attrs, int nattrs, dvm_window *w, int64_t *out) {
  static const char op[] = "col2im";
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  if (nattrs != 3) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 3 attributes, got %d", op, nattrs);
  if (rx != 3) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %s must be [N, C * block, L]", op, dvm_shape_str(s1, rx, x));
  if (n < 1 || n > DVM_WINDOW_MAX || nb != n)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: image_shape %s and block_shape %s: want 1 to %d dims each, as many", op,
                          dvm_shape_str(s1, n, image), dvm_shape_str(s2, nb, block), DVM_WINDOW_MAX);
  /* attributes: dilations, pads, strides (ONNX's order) */
  dvm_status *st = window_attrs(op, n, &attrs[2], &attrs[1], &attrs[0], w);
  if (st) return st;
  int64_t k = 1, l = 1, pos[DVM_WINDOW_MAX];
  for (int i = 0; i < n; i++) {
    if (block[i] < 1 || block[i] > ATTR_MAX || image[i] < 0 || image[i] > ATTR_MAX)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: image_shape %s, block_shape %s: out of range", op,
                            dvm_shape_str(s1, n, image), dvm_shape_str(s2, nb, block));
    w->kernel[i] = block[i];
    k *= block[i];
  }
  if ((st = window_out(op, w, image, pos))) return st;
  for (int i = 0; i < n; i++) l *= pos[i];
  if (x[1] % k || x[2] != l)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %s must be [N, C * %lld, %lld] for image_shape %s", op,
                          dvm_shape_str(s1, rx, x), (long long)k, (long long)l, dvm_shape_str(s2, n, image));
  out[0] = x[0];
  out[1] = x[1] / k;
  for (int i = 0; i < n; i++) out[2 + i] = image[i];
  return NULL;
}

static dvm_status *shapefn_col2im(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, ni, nb;
  const int64_t *x;
  int64_t image[DVM_MAX_RANK], block[DVM_MAX_RANK], dims[DVM_MAX_RANK];
  dvm_window w;
  dvm_status *st = dvm_shape_check_counts("col2im", nin, 6, 6, nout, 1);
  if (!st) st = dvm_shape_arg("col2im", &in[0], 0, &rx, &x);
  if (!st) st = dvm_movement_ints("col2im", in, 1, "image_shape", DVM_MAX_RANK, image, &ni);
  if (!st) st = dvm_movement_ints("col2im", in, 2, "block_shape", DVM_MAX_RANK, block, &nb);
  if (!st) st = dvm_col2im_setup(rx, x, ni, image, nb, block, in + 3, 3, &w, dims);
  if (!st) dvm_shape_set(&out[0], 2 + ni, dims);
  return st;
}

dvm_status *dvm_max_unpool_setup(int rx, const int64_t *x, const dvm_value *attrs, int nattrs, int nshape,
                                 const int64_t *shape, dvm_window *w, int64_t *out) {
  static const char op[] = "max_unpool";
  dvm_status *st = check_spatial(op, rx, x);
  if (!st && nattrs != 3) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 3 attributes, got %d", op, nattrs);
  if (st) return st;
  int n = rx - 2;
  dvm_value none; /* MaxUnpool has no dilations */
  memset(&none, 0, sizeof none);
  none.kind = DVM_VAL_SHAPE;
  if ((st = attr_list(op, "kernel_shape", &attrs[0], n, 1, 1, w->kernel)) ||
      (st = window_attrs(op, n, &attrs[2], &attrs[1], &none, w)))
    return st;
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  out[0] = x[0];
  out[1] = x[1];
  for (int i = 0; i < n; i++) {
    int64_t o = (x[2 + i] - 1) * w->stride[i] + w->kernel[i] - w->pad_begin[i] - w->pad_end[i];
    out[2 + i] = o < 0 ? 0 : o;
  }
  if (nshape >= 0) {
    if (nshape != rx || shape[0] != x[0] || shape[1] != x[1])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output_shape %s does not fit X %s", op,
                            dvm_shape_str(s1, nshape, shape), dvm_shape_str(s2, rx, x));
    for (int i = 0; i < n; i++) {
      if (shape[2 + i] < out[2 + i])
        return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output_shape %s is smaller than %s, what X %s unpools to", op,
                              dvm_shape_str(s1, nshape, shape), dvm_shape_str(s2, rx, out), dvm_shape_str(s1, rx, x));
      out[2 + i] = shape[2 + i];
    }
  }
  return NULL;
}

static dvm_status *shapefn_max_unpool(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, ns = -1;
  const int64_t *x;
  int64_t shape[DVM_MAX_RANK], dims[DVM_MAX_RANK];
  dvm_window w;
  dvm_status *st = dvm_shape_check_counts("max_unpool", nin, 5, 6, nout, 1);
  if (!st) st = dvm_shape_arg("max_unpool", &in[0], 0, &rx, &x);
  if (!st && nin == 6) st = dvm_movement_ints("max_unpool", in, 2, "output_shape", DVM_MAX_RANK, shape, &ns);
  if (!st) st = dvm_max_unpool_setup(rx, x, in + nin - 3, 3, ns, shape, &w, dims);
  if (!st) dvm_shape_set(&out[0], rx, dims);
  return st;
}

/* "affine_grid" (theta, size, align_corners): size's values on the host. */
static dvm_status *shapefn_affine_grid(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rt, rank;
  const int64_t *t;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("affine_grid", nin, 3, 3, nout, 1);
  if (!st) st = dvm_shape_arg("affine_grid", &in[0], 0, &rt, &t);
  if (st) return st;
  const dvm_tensor *size = in[1].kind == DVM_VAL_TENSOR ? in[1].u.tensor : NULL;
  if (!size || dvm_tensor_device(size) != DVM_DEVICE_CPU || dvm_tensor_dtype(size) != DVM_I64 ||
      dvm_tensor_rank(size) != 1 || dvm_tensor_numel(size) > DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "affine_grid: size must be a host i64 tensor of 4 or 5 values");
  st = dvm_affine_grid_setup(rt, t, dvm_tensor_numel(size), dvm_tensor_data(size), &rank, dims);
  if (st) return st;
  dvm_shape_set(&out[0], rank, dims);
  return NULL;
}

/* "deform_conv": X, W, offset [, B] [, mask] (attribute present says which),
 * then the kernel's attributes. */
static dvm_status *shapefn_deform_conv(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "deform_conv";
  int r[5] = {-1, -1, -1, -1, -1};
  const int64_t *d[5] = {0};
  int64_t dims[DVM_MAX_RANK], group, og;
  dvm_window win;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 9, 11, nout, 1);
  if (!st && in[nin - 1].kind != DVM_VAL_INT)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute present must be an int", fn);
  if (st) return st;
  int64_t present = in[nin - 1].u.i;
  int ninputs = nin - 6, slot[5] = {0, 1, 2, -1, -1}, k = 3;
  if (present & 1) slot[3] = k++;
  if (present & 2) slot[4] = k++;
  if (present < 0 || present > 3 || k != ninputs)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: present = %lld does not match %d inputs", fn,
                          (long long)present, ninputs);
  for (int i = 0; i < 5 && !st; i++)
    if (slot[i] >= 0) st = dvm_shape_arg(fn, &in[slot[i]], slot[i], &r[i], &d[i]);
  if (!st)
    st = dvm_deform_conv_setup(r[0], d[0], r[1], d[1], r[2], d[2], r[3], d[3], r[4], d[4], in + ninputs, 6,
                               &win, &group, &og, dims);
  if (st) return st;
  dvm_shape_set(&out[0], 4, dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_window_table[] = {
    {"conv", shapefn_conv},     {"conv_transpose", shapefn_conv_transpose}, {"fused_conv", shapefn_fused_conv},
    {"pool", shapefn_pool, .dims_only = true}, {"global_pool", shapefn_global_pool},
    {"resize", shapefn_resize}, {"grid_sample", shapefn_grid_sample},
    {"col2im", shapefn_col2im}, {"max_unpool", shapefn_max_unpool},
    {"affine_grid", shapefn_affine_grid},
    {"deform_conv", shapefn_deform_conv},
    {NULL, NULL},
};
