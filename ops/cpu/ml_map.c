/* The ai.onnx.ml ops that map values: LabelEncoder and CategoryMapper
 * (label_encoder), OneHotEncoder (one_hot_encoder). The compiler turns
 * their attributes into constant inputs (compiler/lower_ml_map.c).
 *
 *   label_encoder(in: X, keys [K], values [K], default [1]) -> Y
 *       Y has X's shape and the values' dtype: Y[i] = values[k] for the
 *       first k with keys[k] == X[i], else default. X and keys are one of
 *       string, i64, f32 (a NaN key matches a NaN, as ONNX Runtime's map
 *       does); values and default one of string, i64, f32, i16, f64.
 *   one_hot_encoder(in: X, cats [C]; attrs: zeros:int) -> Y f32 [X..., C]
 *       Y[i, c] = 1 where X[i] == cats[c], else 0. cats are strings (X
 *       string) or i64 (X i64, i32, f32 or f64, compared as ONNX Runtime
 *       does after truncating to int64). zeros 0: a value of X in no
 *       category is an error naming it.
 *
 * Keys are sorted once per call (K log K), each X looked up by binary
 * search. String outputs are copies of the values' or default's element
 * pointers (vm/kernel.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* Element i of a string, i64 or f32 tensor's data, comparable. */
typedef struct key {
  dvm_dtype dt;
  const void *p;
} key;

static int cmp_at(key a, int64_t i, key b, int64_t j) {
  if (a.dt == DVM_STRING) {
    size_t na, nb;
    const char *sa = dvm_string_bytes(((dvm_string *const *)a.p)[i], &na);
    const char *sb = dvm_string_bytes(((dvm_string *const *)b.p)[j], &nb);
    int c = memcmp(sa, sb, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
  }
  if (a.dt == DVM_I64) {
    int64_t x = ((const int64_t *)a.p)[i], y = ((const int64_t *)b.p)[j];
    return (x > y) - (x < y);
  }
  float x = ((const float *)a.p)[i], y = ((const float *)b.p)[j];
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y); /* NaN after every number, equal to NaN */
  return (x > y) - (x < y);
}

/* A stable order of the keys (merge sort), so the first of equal keys wins. */
static void sort(key k, int64_t *v, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  sort(k, v, tmp, h);
  sort(k, v + h, tmp, n - h);
  int64_t a = 0, b = h, o = 0;
  while (a < h && b < n) tmp[o++] = cmp_at(k, v[b], k, v[a]) < 0 ? v[b++] : v[a++];
  while (a < h) tmp[o++] = v[a++];
  while (b < n) tmp[o++] = v[b++];
  memcpy(v, tmp, (size_t)n * sizeof *v);
}

/* The keys' indices in order of the keys, malloc'ed; NULL when out of memory. */
static int64_t *sorted(key k, int64_t n) {
  int64_t *v = malloc((size_t)(2 * n + 1) * sizeof *v);
  if (!v) return NULL;
  for (int64_t i = 0; i < n; i++) v[i] = i;
  sort(k, v, v + n, n);
  return v;
}

/* The first key equal to x[i], or -1. */
static int64_t find(key keys, const int64_t *order, int64_t n, key x, int64_t i) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (cmp_at(keys, order[mid], x, i) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && cmp_at(keys, order[lo], x, i) == 0 ? order[lo] : -1;
}

static bool key_dtype(dvm_dtype dt) { return dt == DVM_STRING || dt == DVM_I64 || dt == DVM_F32; }

static dvm_status *label_encoder(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "label_encoder", 4, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *keys = a->in[1], *vals = a->in[2], *def = a->in[3], *y = a->out[0];
  dvm_dtype vt = (dvm_dtype)vals->dtype;
  size_t vs = dvm_dtype_size(vt);
  if (!key_dtype((dvm_dtype)x->dtype) || keys->dtype != x->dtype || def->dtype != vt || y->dtype != vt ||
      !(key_dtype(vt) || vt == DVM_I16 || vt == DVM_F64)) {
    char got[96];
    return ERR("label_encoder: dtypes %s: want X and keys of one of string, i64, f32; values, default and Y of "
               "one of string, i64, f32, i16, f64", dvm_kargs_dtypes(got, sizeof got, a));
  }
  int64_t n = dvm_tensor_numel(keys);
  if (dvm_tensor_numel(vals) != n || dvm_tensor_numel(def) != 1)
    return ERR("label_encoder: %lld keys, %lld values and %lld defaults: want as many values as keys, one default",
               (long long)n, (long long)dvm_tensor_numel(vals), (long long)dvm_tensor_numel(def));
  if (y->rank != x->rank || memcmp(y->dims, x->dims, sizeof(int64_t) * x->rank))
    return ERR("label_encoder: Y's shape is not X's");
  key kk = {(dvm_dtype)keys->dtype, dvm_tensor_ptr(keys)}, kx = {(dvm_dtype)x->dtype, dvm_tensor_ptr(x)};
  int64_t *order = sorted(kk, n);
  if (!order) return dvm_status_new(DVM_OUT_OF_MEMORY, "label_encoder: no memory for %lld keys", (long long)n);
  const char *pv = dvm_tensor_ptr(vals), *pd = dvm_tensor_ptr(def);
  char *py = dvm_tensor_ptr(y);
  for (int64_t i = 0; i < dvm_tensor_numel(x); i++) {
    int64_t k = find(kk, order, n, kx, i);
    memcpy(py + (size_t)i * vs, k < 0 ? pd : pv + (size_t)k * vs, vs);
  }
  free(order);
  return NULL;
}

/* X[i] as ONNX Runtime's OneHotEncoder compares it with int64 categories. */
static int64_t as_int(const dvm_tensor *x, int64_t i) {
  const void *p = dvm_tensor_ptr(x);
  switch ((dvm_dtype)x->dtype) {
  case DVM_I64: return ((const int64_t *)p)[i];
  case DVM_I32: return ((const int32_t *)p)[i];
  case DVM_F32: return (int64_t)((const float *)p)[i];
  default: return (int64_t)((const double *)p)[i];
  }
}

static dvm_status *one_hot_encoder(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "one_hot_encoder", 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nattrs != 1 || a->attrs[0].kind != DVM_VAL_INT) return ERR("one_hot_encoder: takes one attribute, zeros");
  const dvm_tensor *x = a->in[0], *cats = a->in[1], *y = a->out[0];
  bool text = cats->dtype == DVM_STRING;
  dvm_dtype xt = (dvm_dtype)x->dtype;
  if (y->dtype != DVM_F32 || (text ? xt != DVM_STRING
                                   : cats->dtype != DVM_I64 || (xt != DVM_I64 && xt != DVM_I32 && xt != DVM_F32 &&
                                                                xt != DVM_F64))) {
    char got[96];
    return ERR("one_hot_encoder: dtypes %s: want X string and categories string, or X i64, i32, f32 or f64 and "
               "categories i64; Y f32", dvm_kargs_dtypes(got, sizeof got, a));
  }
  int64_t c = dvm_tensor_numel(cats), n = dvm_tensor_numel(x);
  if (y->rank != x->rank + 1 || y->dims[x->rank] != c || memcmp(y->dims, x->dims, sizeof(int64_t) * x->rank))
    return ERR("one_hot_encoder: Y's shape is not X's and [%lld]", (long long)c);
  key kc = {(dvm_dtype)cats->dtype, dvm_tensor_ptr(cats)};
  int64_t *order = sorted(kc, c), *xi = text ? NULL : malloc((size_t)(n ? n : 1) * sizeof *xi);
  if (!order || (!text && !xi)) {
    free(order);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "one_hot_encoder: no memory");
  }
  for (int64_t i = 0; xi && i < n; i++) xi[i] = as_int(x, i);
  key kx = text ? (key){DVM_STRING, dvm_tensor_ptr(x)} : (key){DVM_I64, xi};
  float *py = dvm_tensor_ptr(y);
  memset(py, 0, (size_t)(n * c) * sizeof *py);
  for (int64_t i = 0; i < n && !st; i++) {
    int64_t k = find(kc, order, c, kx, i);
    if (k >= 0) py[i * c + k] = 1;
    else if (!a->attrs[0].u.i) st = ERR("one_hot_encoder: element %lld of X is in no category (zeros is 0)", (long long)i);
  }
  free(order);
  free(xi);
  return st;
}

const dvm_kernel_def dvm_cpu_ml_map_kernels[] = {
    {"label_encoder", DVM_DEVICE_CPU, label_encoder, NULL, .strings = 1},
    {"one_hot_encoder", DVM_DEVICE_CPU, one_hot_encoder, NULL, .strings = 1},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
