/* The ai.onnx.ml feature preparation ops, as ONNX Runtime computes them.
 * X is [N, F] or [F] (one row); "per column" values have F entries or one.
 *
 *   scaler(in: X f32, offset f32 [k], scale f32 [k]) -> Y f32:
 *     (x - offset) * scale per column, k == F or 1
 *   normalizer(in: X f32; attrs: norm:int) -> Y f32: each row divided by
 *     its MAX (0), L1 (1) or L2 (2) norm; a row whose norm is 0 is copied
 *   imputer(in: X, values [k], replaced [1]) -> Y: x where it is not the
 *     replaced value (NaN matches NaN), else values[column] (k == F) or
 *     values[0]; f32 or i64, all three of X's dtype
 *   array_feature_extractor(in: X, indices i64) -> Z: the columns
 *     `indices` of X's last axis, in X's dtype (f32, f64, i32, i64 or
 *     string: the element pointers copied); X [F] gives [1, indices]
 *   feature_vectorizer(in: X0, X1, ...; attrs: dims:shape) -> Y f32
 *     [N, sum of dims]: each row the inputs' rows side by side, input i
 *     taking dims[i] columns (its first ones; zeros where it has fewer);
 *     f32, f64, i32 or i64 inputs */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/ml.h"

/* X's rows and columns: [N, F] or [F]; fails for other ranks. */
static dvm_status *matrix(const char *fn, const dvm_tensor *x, int64_t *n, int64_t *f) {
  if (x->rank != 1 && x->rank != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X of rank %d, want [N, F] or [F]", fn, x->rank);
  *n = x->rank == 2 ? x->dims[0] : 1;
  *f = x->dims[x->rank - 1];
  return NULL;
}

static dvm_status *scaler(const dvm_kernel_args *a) {
  int64_t n = 0, f = 0;
  dvm_status *st = dvm_kargs_check(a, "scaler", 3, 1, DVM_DEVICE_CPU);
  if (!st) st = matrix("scaler", a->in[0], &n, &f);
  if (st) return st;
  const dvm_tensor *off = a->in[1], *sc = a->in[2], *y = a->out[0];
  int64_t k = dvm_tensor_numel(off);
  if (a->in[0]->dtype != DVM_F32 || off->dtype != DVM_F32 || sc->dtype != DVM_F32 || y->dtype != DVM_F32 ||
      dvm_tensor_numel(y) != n * f)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "scaler: want X, offset, scale and Y f32, Y of X's size");
  if (dvm_tensor_numel(sc) != k || (k != f && k != 1))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "scaler: %lld offsets and %lld scales for %lld columns: want both "
                          "%lld or 1", (long long)k, (long long)dvm_tensor_numel(sc), (long long)f, (long long)f);
  const float *x = dvm_tensor_ptr(a->in[0]), *o = dvm_tensor_ptr(off), *s = dvm_tensor_ptr(sc);
  float *py = dvm_tensor_ptr(y);
  for (int64_t r = 0; r < n; r++)
    for (int64_t c = 0; c < f; c++) {
      int64_t i = k == 1 ? 0 : c;
      py[r * f + c] = (x[r * f + c] - o[i]) * s[i];
    }
  return NULL;
}

static dvm_status *normalizer(const dvm_kernel_args *a) {
  int64_t n = 0, f = 0, norm;
  dvm_status *st = dvm_kargs_check(a, "normalizer", 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count("normalizer", a->nattrs, 1, 1);
  if (!st) st = dvm_attr_int("normalizer", "norm", &a->attrs[0], &norm);
  if (!st) st = matrix("normalizer", a->in[0], &n, &f);
  if (st) return st;
  if (norm < 0 || norm > 2) return dvm_status_new(DVM_INVALID_ARGUMENT, "normalizer: norm %lld, want 0 (MAX), 1 (L1) or 2 (L2)", (long long)norm);
  if (a->in[0]->dtype != DVM_F32 || a->out[0]->dtype != DVM_F32 || dvm_tensor_numel(a->out[0]) != n * f)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "normalizer: want X and Y f32, Y of X's size");
  const float *x = dvm_tensor_ptr(a->in[0]);
  float *y = dvm_tensor_ptr(a->out[0]);
  for (int64_t r = 0; r < n; r++) {
    const float *xr = x + r * f;
    float *yr = y + r * f, z = norm == 0 ? -FLT_MAX : 0;
    for (int64_t c = 0; c < f; c++) z = norm == 0 ? fmaxf(z, xr[c]) : norm == 1 ? z + fabsf(xr[c]) : z + xr[c] * xr[c];
    for (int64_t c = 0; c < f; c++) {
      if (z == 0) yr[c] = xr[c];
      else if (norm == 2) yr[c] = xr[c] < 0 ? -sqrtf(xr[c] * xr[c] / z) : sqrtf(xr[c] * xr[c] / z);
      else yr[c] = xr[c] / z;
    }
  }
  return NULL;
}

static dvm_status *imputer(const dvm_kernel_args *a) {
  int64_t n = 0, f = 0;
  dvm_status *st = dvm_kargs_check(a, "imputer", 3, 1, DVM_DEVICE_CPU);
  if (!st) st = matrix("imputer", a->in[0], &n, &f);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *v = a->in[1], *rep = a->in[2], *y = a->out[0];
  dvm_dtype dt = x->dtype;
  int64_t k = dvm_tensor_numel(v);
  if ((dt != DVM_F32 && dt != DVM_I64) || v->dtype != dt || rep->dtype != dt || y->dtype != dt ||
      dvm_tensor_numel(rep) != 1 || dvm_tensor_numel(y) != n * f || k < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "imputer: want X, values [k >= 1], replaced [1] and Y of one dtype (f32 "
                          "or i64), Y of X's size");
  int per_column = k == f;
  if (dt == DVM_F32) {
    const float *px = dvm_tensor_ptr(x), *pv = dvm_tensor_ptr(v), r = *(const float *)dvm_tensor_ptr(rep);
    float *py = dvm_tensor_ptr(y);
    for (int64_t i = 0; i < n * f; i++)
      py[i] = px[i] == r || (isnan(px[i]) && isnan(r)) ? pv[per_column ? i % f : 0] : px[i];
  } else {
    const int64_t *px = dvm_tensor_ptr(x), *pv = dvm_tensor_ptr(v), r = *(const int64_t *)dvm_tensor_ptr(rep);
    int64_t *py = dvm_tensor_ptr(y);
    for (int64_t i = 0; i < n * f; i++) py[i] = px[i] == r ? pv[per_column ? i % f : 0] : px[i];
  }
  return NULL;
}

static dvm_status *array_feature_extractor(const dvm_kernel_args *a) {
  const char *fn = "array_feature_extractor";
  dvm_status *st = dvm_kargs_check(a, fn, 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *z = a->out[0];
  int64_t k = dvm_tensor_numel(idx), d[DVM_MAX_RANK];
  int r;
  if (idx->dtype != DVM_I64 || z->dtype != x->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: want indices i64 and Z of X's dtype", fn);
  if ((st = dvm_array_feature_extractor_infer(x->rank, x->dims, k, &r, d))) return st;
  int64_t f = x->dims[x->rank - 1], rows = dvm_tensor_numel(x) / (f ? f : 1);
  if (!f) rows = dvm_tensor_numel(z) / k;
  if (dvm_tensor_numel(z) != rows * k) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Z is not [%lld rows, %lld]", fn, (long long)rows, (long long)k);
  const int64_t *ix = dvm_tensor_ptr(idx);
  for (int64_t j = 0; j < k; j++)
    if (ix[j] < 0 || ix[j] >= f)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: index %lld (indices[%lld]) is out of range for %lld columns", fn,
                            (long long)ix[j], (long long)j, (long long)f);
  size_t es = dvm_dtype_size(x->dtype);
  const char *px = dvm_tensor_ptr(x);
  char *pz = dvm_tensor_ptr(z);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < k; j++) memcpy(pz + (size_t)(i * k + j) * es, px + (size_t)(i * f + ix[j]) * es, es);
  return NULL;
}

/* Element i of t as a float. */
static float as_float(const dvm_tensor *t, int64_t i) {
  switch (t->dtype) {
  case DVM_F32: return ((const float *)dvm_tensor_ptr(t))[i];
  case DVM_F64: return (float)((const double *)dvm_tensor_ptr(t))[i];
  case DVM_I32: return (float)((const int32_t *)dvm_tensor_ptr(t))[i];
  default: return (float)((const int64_t *)dvm_tensor_ptr(t))[i];
  }
}

static dvm_status *feature_vectorizer(const dvm_kernel_args *a) {
  const char *fn = "feature_vectorizer";
  dvm_status *st = dvm_kargs_check_range(a, fn, 1, DVM_MAX_RANK, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(fn, a->nattrs, 1, 1);
  int k;
  const int64_t *sizes;
  int64_t y[2];
  if (!st) st = dvm_feature_vectorizer_infer(a->in[0]->rank, a->in[0]->dims, &a->attrs[0], a->nin, &k, &sizes, y);
  if (st) return st;
  const dvm_tensor *out = a->out[0];
  if (out->dtype != DVM_F32 || dvm_tensor_numel(out) != y[0] * y[1])
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: want Y f32 [%lld, %lld]", fn, (long long)y[0], (long long)y[1]);
  float *py = dvm_tensor_ptr(out);
  memset(py, 0, sizeof *py * (size_t)(y[0] * y[1]));
  for (int i = 0, at = 0; i < k; at += (int)sizes[i], i++) {
    const dvm_tensor *x = a->in[i];
    if (x->dtype != DVM_F32 && x->dtype != DVM_F64 && x->dtype != DVM_I32 && x->dtype != DVM_I64)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d is %s, want f32, f64, i32 or i64", fn, i, dvm_dtype_name(x->dtype));
    int64_t rows = x->rank < 2 ? 1 : x->dims[0], size = rows ? dvm_tensor_numel(x) / rows : 0;
    if (x->rank < 1 || rows != y[0])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d has %lld rows, input 0 %lld", fn, i, (long long)rows,
                            (long long)y[0]);
    int64_t take = size < sizes[i] ? size : sizes[i];
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < take; c++) py[r * y[1] + at + c] = as_float(x, r * size + c);
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_ml_prep_kernels[] = {
    {"scaler", DVM_DEVICE_CPU, scaler, NULL, DVM_DTYPE_BIT(DVM_F32)},
    {"normalizer", DVM_DEVICE_CPU, normalizer, NULL, DVM_DTYPE_BIT(DVM_F32)},
    {"imputer", DVM_DEVICE_CPU, imputer, NULL, DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_I64)},
    {"array_feature_extractor", DVM_DEVICE_CPU, array_feature_extractor, "array_feature_extractor",
     DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64) | DVM_DTYPE_BIT(DVM_I32) | DVM_DTYPE_BIT(DVM_I64) |
         DVM_DTYPE_BIT(DVM_STRING), .strings = 1},
    {"feature_vectorizer", DVM_DEVICE_CPU, feature_vectorizer, "feature_vectorizer",
     DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64) | DVM_DTYPE_BIT(DVM_I32) | DVM_DTYPE_BIT(DVM_I64)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
