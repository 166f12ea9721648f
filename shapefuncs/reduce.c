/* Reduction shapes (see reduce.h). */
#include <string.h>

#include "attr.h"
#include "kernel.h"
#include "object.h"
#include "reduce.h"
#include "shape.h"

dvm_status *dvm_reduce_attrs(const char *op, int rank, const dvm_value *attrs, int nattrs,
                             unsigned *mask, int *keepdims) {
  int naxes, noop;
  const int64_t *axes;
  dvm_status *st = dvm_attr_count(op, nattrs, 3, 3);
  if (!st) st = dvm_attr_shape(op, "axes", &attrs[0], &naxes, &axes);
  if (!st) st = dvm_attr_flag(op, "keepdims", &attrs[1], keepdims);
  if (!st) st = dvm_attr_flag(op, "noop_with_empty_axes", &attrs[2], &noop);
  if (st) return st;
  if (naxes == 0) {
    *mask = noop ? 0 : (1u << rank) - 1;
    return NULL;
  }
  *mask = 0;
  for (int i = 0; i < naxes; i++) {
    int d;
    if ((st = dvm_attr_axis_in(op, "axis", axes[i], rank, &d))) return st;
    if (*mask & (1u << d))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: axis %lld is repeated in axes", op,
                            (long long)axes[i]);
    *mask |= 1u << d;
  }
  return NULL;
}

dvm_status *dvm_argreduce_attrs(const char *op, int rank, const int64_t *dims,
                                const dvm_value *attrs, int nattrs, int *axis, int *keepdims,
                                int *last) {
  dvm_status *st = dvm_attr_count(op, nattrs, 3, 3);
  if (!st && rank < 1)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: data must have rank >= 1, got a scalar", op);
  if (!st) st = dvm_attr_axis(op, "axis", &attrs[0], rank, axis);
  if (!st) st = dvm_attr_flag(op, "keepdims", &attrs[1], keepdims);
  if (!st) st = dvm_attr_flag(op, "select_last_index", &attrs[2], last);
  if (st || dims[*axis] != 0) return st;
  /* an empty axis has no index to return, unless there is nothing to
   * return it for (an empty output, as ONNX Runtime gives for [0, 0]) */
  for (int d = 0; d < rank; d++)
    if (d != *axis && dims[d] == 0) return NULL;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: axis %d is empty: no index to return", op,
                        *axis);
}

void dvm_reduce_dims(int rank, const int64_t *dims, unsigned mask, int keepdims, int *out_rank,
                     int64_t *out) {
  int r = 0;
  for (int d = 0; d < rank; d++)
    if (!(mask & (1u << d)))
      out[r++] = dims[d];
    else if (keepdims)
      out[r++] = 1;
  *out_rank = r;
}

dvm_status *dvm_topk_k(const char *op, const dvm_value *v, int64_t dim, int64_t *k) {
  if (v->kind == DVM_VAL_INT) {
    *k = v->u.i;
  } else if (v->kind == DVM_VAL_TENSOR && v->u.tensor) {
    const dvm_tensor *t = v->u.tensor;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->dims[d];
    if (n != 1 || (t->dtype != DVM_I64 && t->dtype != DVM_I32))
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: k must be one i64 or i32 element, got %s with %lld elements", op,
                            dvm_dtype_name((dvm_dtype)t->dtype), (long long)n);
    if (t->storage->device != DVM_DEVICE_CPU)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: k is on %s, it must be on the host", op,
                            dvm_device_name((dvm_device_kind)t->storage->device));
    const void *p = dvm_tensor_ptr(t);
    *k = t->dtype == DVM_I64 ? *(const int64_t *)p : *(const int32_t *)p;
  } else {
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: k must be a tensor or an int, got %s", op,
                          dvm_kind_name((dvm_kind)v->kind));
  }
  if (*k < 0 || *k > dim)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: k %lld is out of range [0, %lld]", op,
                          (long long)*k, (long long)dim);
  return NULL;
}

/* Fails unless p (rank rp; < 0 absent) broadcasts to dims[axis..rank). */
static dvm_status *check_param(const char *op, const char *name, int rank, const int64_t *dims,
                               int axis, int rp, const int64_t *p) {
  int n = rank - axis;
  int ok = rp <= n;
  for (int k = 1; ok && k <= rp; k++) ok = p[rp - k] == 1 || p[rp - k] == dims[rank - k];
  if (rp < 0 || ok) return NULL;
  char sp[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s does not broadcast to %s (x's dims from axis %d)",
                        op, name, dvm_shape_str(sp, rp, p), dvm_shape_str(sx, n, dims + axis),
                        axis);
}

dvm_status *dvm_layernorm_check(const char *op, int rank, const int64_t *dims, int rs,
                                const int64_t *scale, int rb, const int64_t *bias,
                                const dvm_value *attrs, int nattrs, int *axis, double *epsilon) {
  dvm_status *st = dvm_attr_count(op, nattrs, 2, 2);
  if (!st) st = dvm_attr_axis(op, "axis", &attrs[0], rank, axis);
  if (!st) st = dvm_attr_float(op, "epsilon", &attrs[1], epsilon);
  if (!st) st = check_param(op, "scale", rank, dims, *axis, rs, scale);
  if (!st) st = check_param(op, "bias", rank, dims, *axis, rb, bias);
  return st;
}

/* The first input's shape. */
static dvm_status *data_arg(const char *fn, const dvm_value *in, int nin, int *rank,
                            const int64_t **dims) {
  if (nin < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes a data input", fn);
  return dvm_shape_arg(fn, &in[0], 0, rank, dims);
}

static dvm_status *shapefn_reduce(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rank, r, keepdims;
  unsigned mask;
  const int64_t *dims;
  int64_t res[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("reduce", nin, 4, 4, nout, 1);
  if (!st) st = data_arg("reduce", in, nin, &rank, &dims);
  if (!st) st = dvm_reduce_attrs("reduce", rank, in + 1, nin - 1, &mask, &keepdims);
  if (st) return st;
  dvm_reduce_dims(rank, dims, mask, keepdims, &r, res);
  dvm_shape_set(&out[0], r, res);
  return NULL;
}

static dvm_status *shapefn_argreduce(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rank, r, axis, keepdims, last;
  const int64_t *dims;
  int64_t res[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("argreduce", nin, 4, 4, nout, 1);
  if (!st) st = data_arg("argreduce", in, nin, &rank, &dims);
  if (!st)
    st = dvm_argreduce_attrs("argreduce", rank, dims, in + 1, nin - 1, &axis, &keepdims, &last);
  if (st) return st;
  dvm_reduce_dims(rank, dims, 1u << axis, keepdims, &r, res);
  dvm_shape_set(&out[0], r, res);
  return NULL;
}

static dvm_status *shapefn_topk(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rank, axis, flag;
  const int64_t *dims;
  int64_t k, res[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("topk", nin, 5, 5, nout, 2);
  if (!st) st = data_arg("topk", in, nin, &rank, &dims);
  if (!st) st = dvm_attr_axis("topk", "axis", &in[2], rank, &axis);
  if (!st) st = dvm_attr_flag("topk", "largest", &in[3], &flag);
  if (!st) st = dvm_attr_flag("topk", "sorted", &in[4], &flag);
  if (!st) st = dvm_topk_k("topk", &in[1], dims[axis], &k);
  if (st) return st;
  memcpy(res, dims, sizeof(int64_t) * (size_t)rank);
  res[axis] = k;
  dvm_shape_set(&out[0], rank, res);
  dvm_shape_set(&out[1], rank, res);
  return NULL;
}

static dvm_status *shapefn_layernorm(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rank, rp[2] = {-1, -1}, axis;
  const int64_t *dims, *p[2] = {NULL, NULL};
  double eps;
  int64_t res[DVM_MAX_RANK];
  if (nout < 1 || nout > 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "layernorm: gives 1 to 3 outputs, asked for %d",
                          nout);
  dvm_status *st = dvm_shape_check_counts("layernorm", nin, 4, 5, nout, nout);
  if (!st) st = data_arg("layernorm", in, nin, &rank, &dims);
  for (int i = 1; i < nin - 2 && !st; i++)
    st = dvm_shape_arg("layernorm", &in[i], i, &rp[i - 1], &p[i - 1]);
  if (!st)
    st = dvm_layernorm_check("layernorm", rank, dims, rp[0], p[0], rp[1], p[1], in + nin - 2, 2,
                             &axis, &eps);
  if (st) return st;
  dvm_shape_set(&out[0], rank, dims);
  for (int d = 0; d < rank; d++) res[d] = d < axis ? dims[d] : 1;
  for (int i = 1; i < nout; i++) dvm_shape_set(&out[i], rank, res);
  return NULL;
}

dvm_status *dvm_nll_loss_check(const char *op, const dvm_value *in, int nin, int *reduction,
                                int64_t *ignore, int *rank, const int64_t **dims) {
  int rx, rt, rw = -1;
  const int64_t *dx, *dt, *dw = NULL;
  int64_t red;
  dvm_status *st = nin < 4 || nin > 5 ? dvm_status_new(DVM_INVALID_ARGUMENT,
                                                       "%s: takes input, target[, weight], reduction, "
                                                       "ignore_index; got %d arguments", op, nin)
                                      : NULL;
  if (!st) st = dvm_shape_arg(op, &in[0], 0, &rx, &dx);
  if (!st) st = dvm_shape_arg(op, &in[1], 1, &rt, &dt);
  if (!st && nin == 5) st = dvm_shape_arg(op, &in[2], 2, &rw, &dw);
  if (!st) st = dvm_attr_int(op, "reduction", &in[nin - 2], &red);
  if (!st) st = dvm_attr_int(op, "ignore_index", &in[nin - 1], ignore);
  if (st) return st;
  if (red < 0 || red > 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: reduction must be 0 (none), 1 (sum) or 2 (mean)", op);
  int ok = rx >= 2 && rt == rx - 1 && dt[0] == dx[0] && (rw < 0 || (rw == 1 && dw[0] == dx[1]));
  for (int d = 2; ok && d < rx; d++) ok = dt[d - 1] == dx[d];
  if (!ok) {
    char sx[DVM_SHAPE_STR_SIZE], stt[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: input %s and target %s (and weight) do not match: want [N, C, d...], "
                          "[N, d...] and [C]", op, dvm_shape_str(sx, rx, dx), dvm_shape_str(stt, rt, dt));
  }
  *reduction = (int)red;
  *rank = red ? 0 : rt;
  *dims = dt;
  return NULL;
}

static dvm_status *shapefn_nll_loss(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int reduction, rank;
  int64_t ignore;
  const int64_t *dims;
  dvm_status *st = dvm_shape_check_counts("nll_loss", nin, 4, 5, nout, 1);
  if (!st) st = dvm_nll_loss_check("nll_loss", in, nin, &reduction, &ignore, &rank, &dims);
  if (st) return st;
  dvm_shape_set(&out[0], rank, dims);
  return NULL;
}

/* batchnorm_train(X, scale, B, mean, var, ...) -> Y (X's shape),
 * running_mean and running_var (scale's). */
static dvm_status *shapefn_batchnorm_train(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, rs;
  const int64_t *dx, *ds;
  dvm_status *st = dvm_shape_check_counts("batchnorm_train", nin, 5, 7, nout, 3);
  if (!st) st = dvm_shape_arg("batchnorm_train", &in[0], 0, &rx, &dx);
  if (!st) st = dvm_shape_arg("batchnorm_train", &in[1], 1, &rs, &ds);
  if (st) return st;
  dvm_shape_set(&out[0], rx, dx);
  dvm_shape_set(&out[1], rs, ds);
  dvm_shape_set(&out[2], rs, ds);
  return NULL;
}

/* det(X [..., M, M]) -> [...] */
static dvm_status *shapefn_det(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  const int64_t *d;
  dvm_status *st = dvm_shape_check_counts("det", nin, 1, 1, nout, 1);
  if (!st) st = dvm_shape_arg("det", &in[0], 0, &r, &d);
  if (st) return st;
  char s[DVM_SHAPE_STR_SIZE];
  if (r < 2 || d[r - 1] != d[r - 2])
    return dvm_status_new(DVM_INVALID_ARGUMENT, "det: X %s must be [..., M, M]", dvm_shape_str(s, r, d));
  dvm_shape_set(&out[0], r - 2, d);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_reduce_table[] = {
    {"nll_loss", shapefn_nll_loss},
    {"reduce", shapefn_reduce},
    {"argreduce", shapefn_argreduce},
    {"topk", shapefn_topk},
    {"layernorm", shapefn_layernorm},
    {"batchnorm_train", shapefn_batchnorm_train},
    {"det", shapefn_det},
    {NULL, NULL},
};
