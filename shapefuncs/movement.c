/* Shapes of the data-movement ops (see movement.h).
 *
 * Shape functions, inputs then attributes as the kernels take them:
 *   reshape(data, shape[, allowzero:int]) -> out      (a view: no kernel)
 *   squeeze(data[, axes]) -> out    (a view; no or empty axes: every 1)
 *   unsqueeze(data, axes) -> out                       (a view)
 *   flatten(data[, axis:int]) -> out                   (a view; axis 1)
 *   transpose(x[, perm:shape]) -> out
 *   gather(data, indices[, axis:int]) -> out
 *   gather_elements(data, indices[, axis:int]) -> out
 *   slice(data, starts, ends[, axes[, steps]]) -> out
 *   concat(x0, ..., xn, axis:int) -> out
 *   split(x[, split][, axis:int[, num_outputs:int]]) -> out0, ..., outk
 *   expand(x, shape) -> out
 *   tile(x, repeats) -> out
 *   pad(data, pads[, value[, axes]][, mode:int]) -> out
 *   trilu(x[, k][, upper:int]) -> out
 *   center_crop_pad(x, shape, axes) -> out
 *   depth_to_space(x, blocksize:int, mode:int), space_to_depth(...) -> out
 * `shape`, `axes`, `starts`... are lists of ints: an i64 or i32 host tensor
 * of rank 0 or 1, or a shape value. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "broadcast.h"
#include "kernel.h"
#include "movement.h"
#include "object.h"
#include "shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

dvm_status *dvm_movement_ints(const char *fn, const dvm_value *in, int i, const char *what,
                              int max, int64_t *out, int *n) {
  const dvm_value *v = &in[i];
  if (v->kind == DVM_VAL_SHAPE) {
    if (v->rank > max || v->rank > DVM_MAX_RANK)
      return ERR("%s: input %d (%s) has %d values, at most %d", fn, i, what, v->rank,
                 max < DVM_MAX_RANK ? max : DVM_MAX_RANK);
    memcpy(out, v->u.dims, sizeof(int64_t) * v->rank);
    *n = v->rank;
    return NULL;
  }
  if (v->kind != DVM_VAL_TENSOR)
    return ERR("%s: input %d (%s): expected an i64 or i32 tensor or a shape, got %s", fn, i,
               what, dvm_kind_name((dvm_kind)v->kind));
  const dvm_tensor *t = v->u.tensor;
  if (!t) return ERR("%s: input %d (%s) is a null tensor", fn, i, what);
  if (t->dtype != DVM_I64 && t->dtype != DVM_I32)
    return ERR("%s: input %d (%s): expected an i64 or i32 tensor or a shape, got a %s tensor",
               fn, i, what, dvm_dtype_name((dvm_dtype)t->dtype));
  if (t->rank > 1) {
    char s[DVM_SHAPE_STR_SIZE];
    return ERR("%s: input %d (%s) has shape %s, expected rank 0 or 1", fn, i, what,
               dvm_shape_str(s, t->rank, t->dims));
  }
  if (t->storage->device != DVM_DEVICE_CPU)
    return ERR("%s: input %d (%s) is on %s; shape functions read host tensors", fn, i, what,
               dvm_device_name((dvm_device_kind)t->storage->device));
  int64_t count = t->rank ? t->dims[0] : 1;
  if (count > max) return ERR("%s: input %d (%s) has %lld values, at most %d", fn, i, what,
                              (long long)count, max);
  const void *p = dvm_tensor_ptr(t);
  for (int64_t k = 0; k < count; k++)
    out[k] = t->dtype == DVM_I64 ? ((const int64_t *)p)[k] : ((const int32_t *)p)[k];
  *n = (int)count;
  return NULL;
}

dvm_status *dvm_movement_int(const char *fn, const dvm_value *in, int i, const char *what,
                             int64_t *out) {
  if (in[i].kind != DVM_VAL_INT)
    return ERR("%s: input %d (%s): expected an int, got %s", fn, i, what,
               dvm_kind_name((dvm_kind)in[i].kind));
  *out = in[i].u.i;
  return NULL;
}

dvm_status *dvm_movement_axis(const char *fn, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return ERR("%s: axis %lld is out of range for rank %d", fn, (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return NULL;
}

/* n axes normalized for `rank` into out, each named at most once. */
static dvm_status *axes_list(const char *fn, const int64_t *axes, int n, int rank, int *out) {
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    dvm_status *st = dvm_movement_axis(fn, axes[i], rank, &out[i]);
    if (st) return st;
    if (seen & 1u << out[i]) {
      char s[DVM_SHAPE_STR_SIZE];
      return ERR("%s: axes %s name dim %d twice", fn, dvm_shape_str(s, n, axes), out[i]);
    }
    seen |= 1u << out[i];
  }
  return NULL;
}

/* The index of the first int or float at or after `from`: where the
 * attributes start after optional tensor inputs. */
static int attrs_start(const dvm_value *in, int nin, int from) {
  while (from < nin && in[from].kind != DVM_VAL_INT && in[from].kind != DVM_VAL_FLOAT) from++;
  return from;
}

/* Inputs from `first` on: up to nopt int attributes called names[i]
 * into out[i]; those left out keep the value already in out. */
static dvm_status *int_attrs(const char *fn, const dvm_value *in, int nin, int first,
                             const char *const *names, int nopt, int64_t *out) {
  if (nin - first > nopt)
    return ERR("%s: takes %d to %d inputs, got %d", fn, first, first + nopt, nin);
  for (int i = first; i < nin; i++) {
    dvm_status *st = dvm_movement_int(fn, in, i, names[i - first], &out[i - first]);
    if (st) return st;
  }
  return NULL;
}

/* ---- views ---- */

static dvm_status *shapefn_reshape(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "reshape";
  int r, n;
  const int64_t *d;
  int64_t t[DVM_MAX_RANK], o[DVM_MAX_RANK], allowzero = 0, numel;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 3, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_ints(fn, in, 1, "shape", DVM_MAX_RANK, t, &n);
  if (!st && nin == 3) st = dvm_movement_int(fn, in, 2, "allowzero", &allowzero);
  if (st) return st;
  char sd[DVM_SHAPE_STR_SIZE], st_[DVM_SHAPE_STR_SIZE];
  if ((st = dvm_shape_numel(r, d, &numel)))
    return dvm_status_annotate(st, "%s: %s", fn, dvm_shape_str(sd, r, d));
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < n; i++) {
    o[i] = t[i];
    if (t[i] == -1) {
      if (infer >= 0)
        return ERR("%s: target %s has more than one -1", fn, dvm_shape_str(st_, n, t));
      infer = i;
      continue;
    }
    if (t[i] < 0)
      return ERR("%s: target %s: dim %d is negative (%lld)", fn, dvm_shape_str(st_, n, t), i,
                 (long long)t[i]);
    if (t[i] == 0 && !allowzero) {
      if (i >= r)
        return ERR("%s: target %s: dim %d is 0, a copy of a dim that %s does not have", fn,
                   dvm_shape_str(st_, n, t), i, dvm_shape_str(sd, r, d));
      o[i] = d[i];
    }
    if (__builtin_mul_overflow(known, o[i], &known)) known = -1; /* never equals numel */
  }
  if (infer >= 0) { /* the -1 is the only count that fits, where one does */
    o[infer] = known > 0 ? numel / known : 0;
    known = known > 0 && numel % known == 0 ? numel : -1;
  }
  if (known != numel)
    return ERR("%s: cannot reshape %s (%lld elements) to %s", fn, dvm_shape_str(sd, r, d),
               (long long)numel, dvm_shape_str(st_, n, t));
  dvm_shape_set(&out[0], n, o);
  return NULL;
}

static dvm_status *shapefn_squeeze(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "squeeze";
  int r, n = 0, ax[DVM_MAX_RANK], k = 0;
  const int64_t *d;
  int64_t axes[DVM_MAX_RANK], o[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 2, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st && nin == 2) st = dvm_movement_ints(fn, in, 1, "axes", DVM_MAX_RANK, axes, &n);
  if (!st) st = axes_list(fn, axes, n, r, ax);
  if (st) return st;
  unsigned drop = 0;
  for (int i = 0; i < n; i++) {
    if (d[ax[i]] != 1) {
      char s[DVM_SHAPE_STR_SIZE];
      return ERR("%s: dim %d of %s is %lld, not 1", fn, ax[i], dvm_shape_str(s, r, d),
                 (long long)d[ax[i]]);
    }
    drop |= 1u << ax[i];
  }
  for (int i = 0; i < r; i++)
    if (n ? !(drop & 1u << i) : d[i] != 1) o[k++] = d[i];
  dvm_shape_set(&out[0], k, o);
  return NULL;
}

static dvm_status *shapefn_unsqueeze(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "unsqueeze";
  int r, n, ax[DVM_MAX_RANK];
  const int64_t *d;
  int64_t axes[DVM_MAX_RANK], o[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 2, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_ints(fn, in, 1, "axes", DVM_MAX_RANK, axes, &n);
  if (st) return st;
  if (r + n > DVM_MAX_RANK) {
    char s[DVM_SHAPE_STR_SIZE];
    return ERR("%s: %s with %d new dims has rank %d, over %d", fn, dvm_shape_str(s, r, d), n,
               r + n, DVM_MAX_RANK);
  }
  if ((st = axes_list(fn, axes, n, r + n, ax))) return st;
  unsigned added = 0;
  for (int i = 0; i < n; i++) added |= 1u << ax[i];
  for (int i = 0, j = 0; i < r + n; i++) o[i] = added & 1u << i ? 1 : d[j++];
  dvm_shape_set(&out[0], r + n, o);
  return NULL;
}

/* with_dim(x, axis, n): x's shape (x a tensor or a shape) with dim `axis`
 * set to n >= 0 (a scan output's full shape from one slice's: Loop and
 * Scan, compiler/lower_control.c). */
static dvm_status *shapefn_with_dim(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "with_dim";
  int r, ax = 0;
  const int64_t *d;
  int64_t axis = 0, n = 0, o[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 3, 3, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_int(fn, in, 1, "axis", &axis);
  if (!st) st = dvm_movement_int(fn, in, 2, "n", &n);
  if (!st) st = dvm_movement_axis(fn, axis, r, &ax);
  if (st) return st;
  if (n < 0) return ERR("%s: dim %lld is negative", fn, (long long)n);
  for (int i = 0; i < r; i++) o[i] = i == ax ? n : d[i];
  dvm_shape_set(&out[0], r, o);
  return NULL;
}

static dvm_status *shapefn_flatten(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "flatten";
  int r;
  const int64_t *d;
  int64_t axis = 1, o[2] = {1, 1};
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 2, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st && nin == 2) st = dvm_movement_int(fn, in, 1, "axis", &axis);
  if (st) return st;
  char s[DVM_SHAPE_STR_SIZE];
  if (axis < -r || axis > r)
    return ERR("%s: axis %lld is out of range for %s (-%d..%d)", fn, (long long)axis,
               dvm_shape_str(s, r, d), r, r);
  if (axis < 0) axis += r;
  for (int i = 0; i < r; i++)
    if (__builtin_mul_overflow(o[i >= axis], d[i], &o[i >= axis]))
      return ERR("%s: %s has too many elements", fn, dvm_shape_str(s, r, d));
  dvm_shape_set(&out[0], 2, o);
  return NULL;
}

/* ---- transpose ---- */

dvm_status *dvm_transpose_infer(const dvm_value *in, int nin, dvm_transpose_info *p) {
  const char *fn = "transpose";
  int r, n;
  const int64_t *d;
  int64_t perm[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 2, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (st) return st;
  n = r;
  for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
  if (nin == 2 && (st = dvm_movement_ints(fn, in, 1, "perm", DVM_MAX_RANK, perm, &n))) return st;
  unsigned seen = 0;
  for (int i = 0; i < n; i++) {
    if (perm[i] < 0 || perm[i] >= r || seen & 1u << perm[i]) break;
    seen |= 1u << perm[i];
    p->perm[i] = (int)perm[i];
    p->dims[i] = d[perm[i]];
  }
  if (n != r || seen != (1u << r) - 1) {
    char sp[DVM_SHAPE_STR_SIZE], sd[DVM_SHAPE_STR_SIZE];
    return ERR("%s: perm %s is not a permutation of the %d dims of %s", fn,
               dvm_shape_str(sp, n, perm), r, dvm_shape_str(sd, r, d));
  }
  p->rank = r;
  return NULL;
}

static dvm_status *shapefn_transpose(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_transpose_info p;
  dvm_status *st = dvm_shape_check_counts("transpose", nin, 1, 2, nout, 1);
  if (!st) st = dvm_transpose_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- gather ---- */

/* The data and indices shapes and the axis of gather-like fn. */
static dvm_status *gather_args(const char *fn, const dvm_value *in, int nin, int *rd,
                               const int64_t **d, int *ri, const int64_t **x, int *axis) {
  int64_t a = 0;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 3, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, rd, d);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, ri, x);
  if (!st && nin == 3) st = dvm_movement_int(fn, in, 2, "axis", &a);
  if (!st) st = dvm_movement_axis(fn, a, *rd, axis);
  return st;
}

dvm_status *dvm_gather_infer(const dvm_value *in, int nin, dvm_gather_info *p) {
  int rd, ri;
  const int64_t *d, *x;
  dvm_status *st = gather_args("gather", in, nin, &rd, &d, &ri, &x, &p->axis);
  if (st) return st;
  int a = p->axis;
  if (rd - 1 + ri > DVM_MAX_RANK) {
    char sd[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
    return ERR("gather: data %s and indices %s give rank %d, over %d", dvm_shape_str(sd, rd, d),
               dvm_shape_str(sx, ri, x), rd - 1 + ri, DVM_MAX_RANK);
  }
  p->rank = rd - 1 + ri;
  memcpy(p->dims, d, sizeof(int64_t) * a);
  memcpy(p->dims + a, x, sizeof(int64_t) * ri);
  memcpy(p->dims + a + ri, d + a + 1, sizeof(int64_t) * (rd - a - 1));
  return NULL;
}

dvm_status *dvm_gather_elements_infer(const dvm_value *in, int nin, dvm_gather_info *p) {
  const char *fn = "gather_elements";
  int rd, ri;
  const int64_t *d, *x;
  dvm_status *st = gather_args(fn, in, nin, &rd, &d, &ri, &x, &p->axis);
  if (st) return st;
  char sd[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
  if (ri != rd)
    return ERR("%s: data %s and indices %s differ in rank", fn, dvm_shape_str(sd, rd, d),
               dvm_shape_str(sx, ri, x));
  for (int i = 0; i < rd; i++)
    if (i != p->axis && x[i] > d[i])
      return ERR("%s: indices %s dim %d is %lld, over data %s dim %d (%lld)", fn,
                 dvm_shape_str(sx, ri, x), i, (long long)x[i], dvm_shape_str(sd, rd, d), i,
                 (long long)d[i]);
  p->rank = ri;
  memcpy(p->dims, x, sizeof(int64_t) * ri);
  return NULL;
}

static dvm_status *shapefn_gather(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_gather_info p;
  dvm_status *st = dvm_shape_check_counts("gather", nin, 2, 3, nout, 1);
  if (!st) st = dvm_gather_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

static dvm_status *shapefn_gather_elements(const dvm_value *in, int nin, dvm_value *out,
                                           int nout) {
  dvm_gather_info p;
  dvm_status *st = dvm_shape_check_counts("gather_elements", nin, 2, 3, nout, 1);
  if (!st) st = dvm_gather_elements_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- slice ---- */

static int64_t clamp(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

dvm_status *dvm_slice_infer(const dvm_value *in, int nin, dvm_slice_info *p) {
  const char *fn = "slice";
  static const char *const names[] = {"starts", "ends", "axes", "steps"};
  int r = 0, n[4] = {0};
  const int64_t *d;
  int64_t v[4][DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 3, 5, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  for (int k = 0; !st && k < nin - 1; k++)
    st = dvm_movement_ints(fn, in, k + 1, names[k], DVM_MAX_RANK, v[k], &n[k]);
  if (st) return st;
  for (int k = 1; k < nin - 1; k++)
    if (n[k] != n[0])
      return ERR("%s: %d starts but %d %s", fn, n[0], n[k], names[k]);
  int ax[DVM_MAX_RANK];
  for (int i = 0; i < n[0]; i++) {
    v[2][i] = nin > 3 ? v[2][i] : i;
    v[3][i] = nin > 4 ? v[3][i] : 1;
  }
  if ((st = axes_list(fn, v[2], n[0], r, ax))) return st;
  p->rank = r;
  for (int i = 0; i < r; i++) {
    p->start[i] = 0;
    p->step[i] = 1;
    p->dims[i] = d[i];
  }
  for (int i = 0; i < n[0]; i++) {
    int64_t dim = d[ax[i]], s = v[0][i], e = v[1][i], step = v[3][i], count = 0;
    if (step == 0) return ERR("%s: step 0 for axis %lld", fn, (long long)v[2][i]);
    /* beyond the dim, a step takes one element at most: clamping it keeps
     * step * stride from overflowing in the kernel */
    step = clamp(step, dim ? -dim : -1, dim ? dim : 1);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (dim == 0) {
      s = 0;
    } else if (step > 0) {
      s = clamp(s, 0, dim);
      e = clamp(e, 0, dim);
      count = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = clamp(s, 0, dim - 1);
      e = clamp(e, -1, dim - 1);
      count = s > e ? (s - e - step - 1) / -step : 0;
    }
    p->start[ax[i]] = count ? s : 0;
    p->step[ax[i]] = step;
    p->dims[ax[i]] = count;
  }
  return NULL;
}

static dvm_status *shapefn_slice(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_slice_info p;
  dvm_status *st = dvm_shape_check_counts("slice", nin, 3, 5, nout, 1);
  if (!st) st = dvm_slice_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- concat and split ---- */

dvm_status *dvm_concat_infer(const dvm_value *in, int nin, dvm_concat_info *p) {
  const char *fn = "concat";
  int r, ri;
  const int64_t *d, *di;
  int64_t axis = 0;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, INT_MAX, 1, 1);
  if (!st) st = dvm_movement_int(fn, in, nin - 1, "axis", &axis);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_axis(fn, axis, r, &p->axis);
  if (st) return st;
  p->rank = r;
  memcpy(p->dims, d, sizeof(int64_t) * r);
  char s0[DVM_SHAPE_STR_SIZE], si[DVM_SHAPE_STR_SIZE];
  for (int i = 1; i < nin - 1; i++) {
    if ((st = dvm_shape_arg(fn, &in[i], i, &ri, &di))) return st;
    if (ri != r)
      return ERR("%s: input %d %s vs input 0 %s: rank %d != %d", fn, i, dvm_shape_str(si, ri, di),
                 dvm_shape_str(s0, r, d), ri, r);
    for (int k = 0; k < r; k++)
      if (k != p->axis && di[k] != d[k])
        return ERR("%s: input %d %s vs input 0 %s: dim %d %lld != %lld", fn, i,
                   dvm_shape_str(si, ri, di), dvm_shape_str(s0, r, d), k, (long long)di[k],
                   (long long)d[k]);
    if (__builtin_add_overflow(p->dims[p->axis], di[p->axis], &p->dims[p->axis]))
      return ERR("%s: dim %d of the output overflows", fn, p->axis);
  }
  return NULL;
}

static dvm_status *shapefn_concat(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_concat_info p;
  dvm_status *st = dvm_shape_check_counts("concat", nin, 2, INT_MAX, nout, 1);
  if (!st) st = dvm_concat_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

dvm_status *dvm_split_infer(const dvm_value *in, int nin, int nout, int *axis, int64_t *sizes) {
  const char *fn = "split";
  static const char *const names[] = {"axis", "num_outputs"};
  int r, n = 0;
  const int64_t *d;
  int64_t at[2] = {0, nout};
  if (nout < 1) return ERR("%s: gives 1 or more outputs, asked for %d", fn, nout);
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 4, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  int given = nin > 1 && (in[1].kind == DVM_VAL_TENSOR || in[1].kind == DVM_VAL_SHAPE);
  if (!st) st = int_attrs(fn, in, nin, 1 + given, names, 2, at);
  if (!st) st = dvm_movement_axis(fn, at[0], r, axis);
  if (!st && given) st = dvm_movement_ints(fn, in, 1, "split", nout, sizes, &n);
  if (st) return st;
  if (at[1] != nout) return ERR("%s: num_outputs is %lld, %d outputs asked for", fn,
                                (long long)at[1], nout);
  int64_t dim = d[*axis], left = dim;
  char s[DVM_SHAPE_STR_SIZE];
  if (!given) {
    int64_t chunk = dim / nout + (dim % nout != 0);
    for (int i = 0; i < nout; i++) {
      sizes[i] = left < chunk ? left : chunk;
      left -= sizes[i];
    }
    return NULL;
  }
  if (n != nout) return ERR("%s: %d sizes for %d outputs", fn, n, nout);
  for (int i = 0; i < nout; i++) {
    if (sizes[i] < 0) return ERR("%s: size %d is negative (%lld)", fn, i, (long long)sizes[i]);
    left -= sizes[i]; /* no overflow: left >= 0 before, sizes >= 0 */
    if (left < 0) break;
  }
  if (left != 0)
    return ERR("%s: the sizes do not add up to dim %d of %s (%lld)", fn, *axis,
               dvm_shape_str(s, r, d), (long long)dim);
  return NULL;
}

static dvm_status *shapefn_split(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r, axis;
  const int64_t *d;
  int64_t sizes_buf[16], *sizes = sizes_buf, dims[DVM_MAX_RANK];
  if (nout > 16 && !(sizes = malloc(sizeof(int64_t) * (size_t)nout)))
    return dvm_status_new(DVM_OUT_OF_MEMORY, "split: no memory for %d sizes", nout);
  dvm_status *st = dvm_split_infer(in, nin, nout, &axis, sizes);
  if (!st) st = dvm_shape_arg("split", &in[0], 0, &r, &d);
  if (!st) {
    memcpy(dims, d, sizeof(int64_t) * r);
    for (int i = 0; i < nout; i++) {
      dims[axis] = sizes[i];
      dvm_shape_set(&out[i], r, dims);
    }
  }
  if (sizes != sizes_buf) free(sizes);
  return st;
}

/* ---- expand, tile ---- */

dvm_status *dvm_expand_infer(const dvm_value *in, int nin, int *rank, int64_t *dims) {
  const char *fn = "expand";
  int r, n;
  const int64_t *d;
  int64_t s[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 2, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_ints(fn, in, 1, "shape", DVM_MAX_RANK, s, &n);
  if (st) return st;
  char sd[DVM_SHAPE_STR_SIZE], ss[DVM_SHAPE_STR_SIZE];
  for (int i = 0; i < n; i++)
    if (s[i] < 0) return ERR("%s: shape %s has a negative dim", fn, dvm_shape_str(ss, n, s));
  int bad = dvm_broadcast_dims(r, d, n, s, rank, dims);
  if (bad)
    return ERR("%s: cannot expand %s to %s: dim %d %lld != %lld", fn, dvm_shape_str(sd, r, d),
               dvm_shape_str(ss, n, s), bad, (long long)d[r + bad], (long long)s[n + bad]);
  return NULL;
}

static dvm_status *shapefn_expand(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("expand", nin, 2, 2, nout, 1);
  if (!st) st = dvm_expand_infer(in, nin, &r, dims);
  if (st) return st;
  dvm_shape_set(&out[0], r, dims);
  return NULL;
}

dvm_status *dvm_tile_infer(const dvm_value *in, int nin, int *rank, int64_t *dims) {
  const char *fn = "tile";
  int r, n;
  const int64_t *d;
  int64_t rep[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 2, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_ints(fn, in, 1, "repeats", DVM_MAX_RANK, rep, &n);
  if (st) return st;
  char sd[DVM_SHAPE_STR_SIZE], sr[DVM_SHAPE_STR_SIZE];
  if (n != r)
    return ERR("%s: repeats %s do not match the rank of %s", fn, dvm_shape_str(sr, n, rep),
               dvm_shape_str(sd, r, d));
  for (int i = 0; i < r; i++) {
    if (rep[i] < 0)
      return ERR("%s: repeats %s: %lld for dim %d is negative", fn, dvm_shape_str(sr, n, rep),
                 (long long)rep[i], i);
    if (__builtin_mul_overflow(d[i], rep[i], &dims[i]))
      return ERR("%s: dim %d of %s times %lld overflows", fn, i, dvm_shape_str(sd, r, d),
                 (long long)rep[i]);
  }
  *rank = r;
  return NULL;
}

static dvm_status *shapefn_tile(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("tile", nin, 2, 2, nout, 1);
  if (!st) st = dvm_tile_infer(in, nin, &r, dims);
  if (st) return st;
  dvm_shape_set(&out[0], r, dims);
  return NULL;
}

/* ---- pad ---- */

dvm_status *dvm_pad_infer(const dvm_value *in, int nin, dvm_pad_info *p) {
  const char *fn = "pad";
  static const char *const mode_names[DVM_PAD_MODES] = {"constant", "reflect", "edge", "wrap"};
  int r, np, na, ax[DVM_MAX_RANK];
  const int64_t *d;
  int64_t pads[2 * DVM_MAX_RANK], axes[DVM_MAX_RANK], mode = DVM_PAD_CONSTANT;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 5, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (st) return st;
  int first = attrs_start(in, nin, 2); /* value and axes come before it */
  if (first > 4) return ERR("%s: takes data, pads, value and axes, got %d inputs before the mode",
                            fn, first);
  if ((st = int_attrs(fn, in, nin, first, (const char *const[]){"mode"}, 1, &mode))) return st;
  if (mode < 0 || mode >= DVM_PAD_MODES)
    return ERR("%s: mode %lld is not 0 (constant), 1 (reflect), 2 (edge) or 3 (wrap)", fn,
               (long long)mode);
  if (first > 2) {
    const dvm_value *v = &in[2];
    if (v->kind != DVM_VAL_TENSOR || !v->u.tensor)
      return ERR("%s: input 2 (value): expected a tensor, got %s", fn,
                 dvm_kind_name((dvm_kind)v->kind));
    if (dvm_tensor_numel(v->u.tensor) != 1)
      return ERR("%s: input 2 (value) has %lld elements, want 1", fn,
                 (long long)dvm_tensor_numel(v->u.tensor));
  }
  na = r;
  for (int i = 0; i < r; i++) axes[i] = i;
  if (first > 3 && (st = dvm_movement_ints(fn, in, 3, "axes", DVM_MAX_RANK, axes, &na))) return st;
  if ((st = axes_list(fn, axes, na, r, ax))) return st;
  if ((st = dvm_movement_ints(fn, in, 1, "pads", 2 * DVM_MAX_RANK, pads, &np))) return st;
  if (np != 2 * na)
    return ERR("%s: pads has %d values, want 2 per axis for %d axes", fn, np, na);
  p->rank = r;
  p->mode = (int)mode;
  for (int i = 0; i < r; i++) {
    p->before[i] = p->after[i] = 0;
    p->dims[i] = d[i];
  }
  char s[DVM_SHAPE_STR_SIZE];
  for (int i = 0; i < na; i++) {
    int k = ax[i];
    int64_t b = pads[i], e = pads[na + i], kept, out;
    /* what stays of the dim after negative pads crop it, then the result */
    if (__builtin_add_overflow(d[k], (b < 0 ? b : 0) + (e < 0 ? e : 0), &kept) || kept < 0)
      return ERR("%s: pads %lld and %lld crop more than dim %d of %s", fn, (long long)b,
                 (long long)e, k, dvm_shape_str(s, r, d));
    if (__builtin_add_overflow(kept, (b > 0 ? b : 0), &out) ||
        __builtin_add_overflow(out, (e > 0 ? e : 0), &out))
      return ERR("%s: dim %d of %s padded by %lld and %lld overflows", fn, k,
                 dvm_shape_str(s, r, d), (long long)b, (long long)e);
    if (mode != DVM_PAD_CONSTANT && kept == 0 && (b > 0 || e > 0))
      return ERR("%s: %s padding of dim %d of %s needs data in it", fn, mode_names[mode], k,
                 dvm_shape_str(s, r, d));
    p->before[k] = b;
    p->after[k] = e;
    p->dims[k] = out;
  }
  return NULL;
}

/* ---- center_crop_pad ---- */

dvm_status *dvm_center_crop_pad_infer(const dvm_value *in, int nin, dvm_pad_info *p) {
  const char *fn = "center_crop_pad";
  int r, ns, na, ax[DVM_MAX_RANK];
  const int64_t *d;
  int64_t shape[DVM_MAX_RANK], axes[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 3, 3, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_ints(fn, in, 1, "shape", DVM_MAX_RANK, shape, &ns);
  if (!st) st = dvm_movement_ints(fn, in, 2, "axes", DVM_MAX_RANK, axes, &na);
  if (st) return st;
  if (na == 0)
    for (na = 0; na < r; na++) axes[na] = na;
  if ((st = axes_list(fn, axes, na, r, ax))) return st;
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  if (ns != na)
    return ERR("%s: shape %s has %d values, want one per axis (%d) of %s", fn,
               dvm_shape_str(s1, ns, shape), ns, na, dvm_shape_str(s2, r, d));
  p->rank = r;
  p->mode = DVM_PAD_CONSTANT;
  for (int i = 0; i < r; i++) {
    p->before[i] = p->after[i] = 0;
    p->dims[i] = d[i];
  }
  for (int i = 0; i < na; i++) {
    int k = ax[i];
    if (shape[i] < 0)
      return ERR("%s: shape %s: %lld is negative", fn, dvm_shape_str(s1, ns, shape), (long long)shape[i]);
    /* centred: a crop starts at floor((d - s) / 2), a pad puts floor((s - d) / 2) first */
    int64_t diff = shape[i] - d[k], b = diff >= 0 ? diff / 2 : -(-diff / 2);
    p->before[k] = b;
    p->after[k] = diff - b;
    p->dims[k] = shape[i];
  }
  return NULL;
}

static dvm_status *shapefn_center_crop_pad(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_pad_info p;
  dvm_status *st = dvm_shape_check_counts("center_crop_pad", nin, 3, 3, nout, 1);
  if (!st) st = dvm_center_crop_pad_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- depth_to_space, space_to_depth ---- */

dvm_status *dvm_depth_space_infer(const dvm_value *in, int nin, bool to_space, dvm_depth_space *p) {
  const char *fn = to_space ? "depth_to_space" : "space_to_depth";
  int r;
  const int64_t *d;
  int64_t b = 0, mode = 0;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 3, 3, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_movement_int(fn, in, 1, "blocksize", &b);
  if (!st) st = dvm_movement_int(fn, in, 2, "mode", &mode);
  if (st) return st;
  char sd[DVM_SHAPE_STR_SIZE];
  if (r != 4) return ERR("%s: input %s must have rank 4", fn, dvm_shape_str(sd, r, d));
  if (b < 1 || b > (1 << 20)) return ERR("%s: blocksize %lld is not in 1..2^20", fn, (long long)b);
  if (mode != 0 && mode != 1) return ERR("%s: mode %lld is not 0 (DCR) or 1 (CRD)", fn, (long long)mode);
  if (to_space ? d[1] % (b * b) : d[2] % b || d[3] % b)
    return ERR("%s: input %s: %s not divisible by blocksize %lld%s", fn, dvm_shape_str(sd, r, d),
               to_space ? "channels" : "height or width", (long long)b, to_space ? " squared" : "");
  p->block = b;
  p->crd = (int)mode;
  /* the depth-side [N, C, H, W] and space-side [N, C / b^2, H * b, W * b] */
  int64_t c = to_space ? d[1] / (b * b) : d[1], h = to_space ? d[2] : d[2] / b, w = to_space ? d[3] : d[3] / b;
  int64_t dims[4] = {d[0], to_space ? c : c * b * b, to_space ? h * b : h, to_space ? w * b : w};
  memcpy(p->dims, dims, sizeof dims);
  p->n = d[0], p->c = c, p->h = h, p->w = w;
  return NULL;
}

static dvm_status *shapefn_depth_space(const dvm_value *in, int nin, dvm_value *out, int nout, bool to_space) {
  dvm_depth_space p;
  dvm_status *st = dvm_shape_check_counts(to_space ? "depth_to_space" : "space_to_depth", nin, 3, 3, nout, 1);
  if (!st) st = dvm_depth_space_infer(in, nin, to_space, &p);
  if (st) return st;
  dvm_shape_set(&out[0], 4, p.dims);
  return NULL;
}
static dvm_status *shapefn_depth_to_space(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return shapefn_depth_space(in, nin, out, nout, true);
}
static dvm_status *shapefn_space_to_depth(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return shapefn_depth_space(in, nin, out, nout, false);
}

static dvm_status *shapefn_pad(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_pad_info p;
  dvm_status *st = dvm_shape_check_counts("pad", nin, 2, 5, nout, 1);
  if (!st) st = dvm_pad_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- trilu ---- */

dvm_status *dvm_trilu_infer(const dvm_value *in, int nin, dvm_trilu_info *p) {
  const char *fn = "trilu";
  int r, n;
  const int64_t *d;
  int64_t upper = 1;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 3, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (st) return st;
  int first = attrs_start(in, nin, 1);
  if (first > 2) return ERR("%s: takes x and k, got %d inputs before upper", fn, first);
  if ((st = int_attrs(fn, in, nin, first, (const char *const[]){"upper"}, 1, &upper))) return st;
  p->k = 0;
  if (first == 2) {
    if ((st = dvm_movement_ints(fn, in, 1, "k", 1, &p->k, &n))) return st;
    if (n != 1) return ERR("%s: input 1 (k) has no value", fn);
  }
  if (upper != 0 && upper != 1) return ERR("%s: upper is %lld, not 0 or 1", fn, (long long)upper);
  if (r < 2) {
    char s[DVM_SHAPE_STR_SIZE];
    return ERR("%s: input %s has rank %d, needs 2 or more", fn, dvm_shape_str(s, r, d), r);
  }
  p->upper = (int)upper;
  return NULL;
}

static dvm_status *shapefn_trilu(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_trilu_info p;
  int r;
  const int64_t *d;
  dvm_status *st = dvm_shape_check_counts("trilu", nin, 1, 3, nout, 1);
  if (!st) st = dvm_trilu_infer(in, nin, &p);
  if (!st) st = dvm_shape_arg("trilu", &in[0], 0, &r, &d);
  if (st) return st;
  dvm_shape_set(&out[0], r, d);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_movement_table[] = {
    {"reshape", shapefn_reshape},
    {"squeeze", shapefn_squeeze},
    {"unsqueeze", shapefn_unsqueeze},
    {"with_dim", shapefn_with_dim},
    {"flatten", shapefn_flatten},
    {"transpose", shapefn_transpose},
    {"gather", shapefn_gather},
    {"gather_elements", shapefn_gather_elements},
    {"slice", shapefn_slice},
    {"concat", shapefn_concat},
    {"split", shapefn_split},
    {"expand", shapefn_expand},
    {"tile", shapefn_tile},
    {"pad", shapefn_pad},
    {"center_crop_pad", shapefn_center_crop_pad},
    {"depth_to_space", shapefn_depth_to_space},
    {"space_to_depth", shapefn_space_to_depth},
    {"trilu", shapefn_trilu},
    {NULL, NULL},
};
