/* Normalizations by statistics over dims other than the last alone:
 *
 *   instance_norm (in: X [N, C, ...], scale [C], B [C]; attrs: epsilon:float) -> Y
 *     ONNX InstanceNormalization: per (n, c), over the spatial dims,
 *     (x - mean) / sqrt(var + epsilon) * scale[c] + B[c].
 *   group_norm (in: X [N, C, ...], scale [C], bias [C]; attrs: epsilon:float,
 *       num_groups:int, stash_type:int) -> Y
 *     ONNX GroupNormalization (opset 21: scale and bias per channel): per
 *     (n, group of C / num_groups channels), over those channels and the
 *     spatial dims; then scale and bias per channel. stash_type 0 or 1
 *     (both compute in f32 for f32 X, in double for f64).
 *   mvn (in: X; attrs: axes:shape) -> Y
 *     ONNX MeanVarianceNormalization: over the axes (empty: [0, 2, 3]),
 *     (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9), as ONNX's reference.
 *   lrn (in: X [N, C, ...]; attrs: alpha:float, beta:float, bias:float,
 *       size:int) -> Y
 *     ONNX LRN: x / (bias + alpha / size * sum of x^2 over the channels
 *     [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)])^beta.
 *
 *   batchnorm_train (in: X [N, C, ...], scale, B, input_mean, input_var [C];
 *       attrs: epsilon:float, momentum:float) -> Y, running_mean, running_var
 *     ONNX BatchNormalization with training_mode 1 (opset 14+): the batch's
 *     statistics per channel, population variance; running_mean is
 *     input_mean * momentum + mean * (1 - momentum), the variance alike.
 *
 * X, the parameters and Y are f32 or f64, all one dtype; Y has X's shape
 * (shape function "same"), and may be X's memory. Statistics are two-pass
 * (mean, then the squared deviations). instance_norm and group_norm in f32
 * run norm.c's vectorized rows (dvm_cpu_group_norm_rows: f32 sums, as
 * ONNX Runtime's, in double only where they overflow), one (image, group)
 * a task on the pool; everything else is computed in double on a copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/norm.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"

#define F32_F64 (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64))

static dvm_status *oom(const char *op) {
  return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
}

/* t's n elements as doubles in dst. */
static void load(const dvm_tensor *t, double *dst, int64_t n) {
  if (t->dtype == DVM_F64) {
    memcpy(dst, dvm_tensor_ptr(t), sizeof(double) * (size_t)n);
    return;
  }
  const float *s = dvm_tensor_ptr(t);
  for (int64_t i = 0; i < n; i++) dst[i] = s[i];
}

static void store(const double *src, const dvm_tensor *t, int64_t n) {
  if (t->dtype == DVM_F64) {
    memcpy(dvm_tensor_ptr(t), src, sizeof(double) * (size_t)n);
    return;
  }
  float *d = dvm_tensor_ptr(t);
  for (int64_t i = 0; i < n; i++) d[i] = (float)src[i];
}

/* The inputs and output: nin tensors all of X's dtype (f32 or f64), Y of
 * X's shape, parameters (inputs 1..) of shape [C] with X of rank >= min_rank. */
static dvm_status *check(const dvm_kernel_args *a, const char *op, int nin, int min_rank) {
  static const char *const names[] = {"X", "scale", "B"};
  dvm_status *st = dvm_kargs_check(a, op, nin, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  char got[64], sx[DVM_SHAPE_STR_SIZE], sy[DVM_SHAPE_STR_SIZE];
  bool same = x->dtype == y->dtype;
  for (int i = 1; i < nin; i++) same = same && a->in[i]->dtype == x->dtype;
  if (!same || !(F32_F64 >> x->dtype & 1))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want all f32 or all f64", op,
                          dvm_kargs_dtypes(got, sizeof got, a));
  if (x->rank < min_rank)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X %s must have rank %d or more", op,
                          dvm_shape_str(sx, x->rank, x->dims), min_rank);
  if (y->rank != x->rank || memcmp(y->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Y %s must have X's shape %s", op,
                          dvm_shape_str(sy, y->rank, y->dims), dvm_shape_str(sx, x->rank, x->dims));
  for (int i = 1; i < nin; i++) {
    const dvm_tensor *p = a->in[i];
    if (p->rank != 1 || p->dims[0] != x->dims[1])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s must be [%lld], the channels of X %s",
                            op, names[i], dvm_shape_str(sy, p->rank, p->dims),
                            (long long)x->dims[1], dvm_shape_str(sx, x->rank, x->dims));
  }
  return NULL;
}

/* x viewed as dims[0..rank): the index among the kept dims (those not in
 * `reduced`, a bit per dim) of each element, into key[]; returns how many
 * kept indices there are. */
static int64_t group_keys(int rank, const int64_t *dims, unsigned reduced, int64_t *key) {
  int64_t kstride[DVM_MAX_RANK], kept = 1, n = 1;
  for (int d = rank - 1; d >= 0; d--) {
    kstride[d] = reduced >> d & 1 ? 0 : kept;
    if (!(reduced >> d & 1)) kept *= dims[d];
    n *= dims[d];
  }
  int64_t c[DVM_MAX_RANK] = {0}, k = 0;
  for (int64_t i = 0; i < n; i++) {
    key[i] = k;
    for (int d = rank - 1; d >= 0; d--) { /* the next coordinate, and its key */
      k += kstride[d];
      if (++c[d] < dims[d]) break;
      k -= kstride[d] * dims[d];
      c[d] = 0;
    }
  }
  return kept;
}

/* Normalizes x in place over the reduced dims: (x - mean) / sqrt(var +
 * eps), or (mvn) / (sqrt(var) + 1e-9). */
static dvm_status *normalize(const char *op, double *x, int rank, const int64_t *dims,
                             unsigned reduced, double eps, bool mvn) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  if (n == 0) return NULL;
  int64_t *key = malloc(sizeof(int64_t) * (size_t)n);
  if (!key) return oom(op);
  int64_t groups = group_keys(rank, dims, reduced, key);
  double *sum = calloc((size_t)groups * 2, sizeof(double)), *dev = sum + groups;
  if (!sum) {
    free(key);
    return oom(op);
  }
  double count = (double)(n / groups);
  for (int64_t i = 0; i < n; i++) sum[key[i]] += x[i];
  for (int64_t g = 0; g < groups; g++) sum[g] /= count;
  for (int64_t i = 0; i < n; i++) dev[key[i]] += (x[i] - sum[key[i]]) * (x[i] - sum[key[i]]);
  for (int64_t g = 0; g < groups; g++)
    dev[g] = mvn ? 1 / (sqrt(dev[g] / count) + 1e-9) : 1 / sqrt(dev[g] / count + eps);
  for (int64_t i = 0; i < n; i++) x[i] = (x[i] - sum[key[i]]) * dev[key[i]];
  free(sum);
  free(key);
  return NULL;
}

/* instance_norm and group_norm: X normalized per (n, group of `cg`
 * channels), then scale and bias per channel. */
static dvm_status *channel_groups(const dvm_kernel_args *a, const char *op, int64_t cg, double eps) {
  const dvm_tensor *x = a->in[0];
  int64_t n = dvm_tensor_numel(x), c = x->dims[1];
  if (n == 0) return NULL;
  int64_t s = n / (x->dims[0] * c);
  if (x->dtype == DVM_F32) {
    dvm_cpu_group_norm_rows(dvm_kargs_threads(a), x->dims[0], c / cg, cg, s, dvm_tensor_ptr(x),
                            dvm_tensor_ptr(a->in[1]), dvm_tensor_ptr(a->in[2]), (float)eps, dvm_tensor_ptr(a->out[0]));
    return NULL;
  }
  double *buf = malloc(sizeof(double) * (size_t)(n + 2 * c));
  if (!buf) return oom(op);
  double *scale = buf + n, *bias = scale + c;
  load(x, buf, n);
  load(a->in[1], scale, c);
  load(a->in[2], bias, c);
  /* [N * groups, cg * s], each row one group */
  int64_t view[2] = {x->dims[0] * (c / cg), cg * s};
  dvm_status *st = normalize(op, buf, 2, view, 2u, eps, false);
  if (!st) {
    for (int64_t i = 0; i < n; i++) {
      int64_t ch = i / s % c;
      buf[i] = buf[i] * scale[ch] + bias[ch];
    }
    store(buf, a->out[0], n);
  }
  free(buf);
  return st;
}

static dvm_status *instance_norm(const dvm_kernel_args *a) {
  static const char op[] = "instance_norm";
  double eps;
  dvm_status *st = check(a, op, 3, 3);
  if (!st) st = dvm_attr_count(op, a->nattrs, 1, 1);
  if (!st) st = dvm_attr_float(op, "epsilon", &a->attrs[0], &eps);
  return st ? st : channel_groups(a, op, 1, eps);
}

static dvm_status *group_norm(const dvm_kernel_args *a) {
  static const char op[] = "group_norm";
  double eps;
  int64_t groups;
  int stash;
  dvm_status *st = check(a, op, 3, 2);
  if (!st) st = dvm_attr_count(op, a->nattrs, 3, 3);
  if (!st) st = dvm_attr_float(op, "epsilon", &a->attrs[0], &eps);
  if (!st) st = dvm_attr_int(op, "num_groups", &a->attrs[1], &groups);
  if (!st) st = dvm_attr_flag(op, "stash_type", &a->attrs[2], &stash);
  if (st) return st;
  int64_t c = a->in[0]->dims[1];
  if (groups < 1 || c % groups)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: num_groups %lld must divide the %lld channels",
                          op, (long long)groups, (long long)c);
  return channel_groups(a, op, c / groups, eps);
}

static dvm_status *mvn(const dvm_kernel_args *a) {
  static const char op[] = "mvn";
  int naxes;
  const int64_t *axes;
  dvm_status *st = check(a, op, 1, 0);
  if (!st) st = dvm_attr_count(op, a->nattrs, 1, 1);
  if (!st) st = dvm_attr_shape(op, "axes", &a->attrs[0], &naxes, &axes);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  static const int64_t dflt[] = {0, 2, 3};
  if (!naxes) naxes = 3, axes = dflt;
  unsigned reduced = 0;
  for (int i = 0; i < naxes; i++) {
    int ax;
    if ((st = dvm_attr_axis_in(op, "axes", axes[i], x->rank, &ax))) return st;
    reduced |= 1u << ax;
  }
  int64_t n = dvm_tensor_numel(x);
  if (n == 0) return NULL;
  double *buf = malloc(sizeof(double) * (size_t)n);
  if (!buf) return oom(op);
  load(x, buf, n);
  if (!(st = normalize(op, buf, x->rank, x->dims, reduced, 0, true))) store(buf, a->out[0], n);
  free(buf);
  return st;
}

static dvm_status *lrn(const dvm_kernel_args *a) {
  static const char op[] = "lrn";
  double alpha, beta, bias;
  int64_t size;
  dvm_status *st = check(a, op, 1, 2);
  if (!st) st = dvm_attr_count(op, a->nattrs, 4, 4);
  if (!st) st = dvm_attr_float(op, "alpha", &a->attrs[0], &alpha);
  if (!st) st = dvm_attr_float(op, "beta", &a->attrs[1], &beta);
  if (!st) st = dvm_attr_float(op, "bias", &a->attrs[2], &bias);
  if (!st) st = dvm_attr_int(op, "size", &a->attrs[3], &size);
  if (st) return st;
  if (size < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: size must be >= 1, got %lld", op, (long long)size);
  const dvm_tensor *x = a->in[0];
  int64_t n = dvm_tensor_numel(x), c = x->dims[1];
  if (n == 0) return NULL;
  int64_t s = n / (x->dims[0] * c), lo = (size - 1) / 2, hi = size / 2; /* ceil((size-1)/2) */
  double *buf = malloc(sizeof(double) * (size_t)n * 2);
  if (!buf) return oom(op);
  double *out = buf + n;
  load(x, buf, n);
  for (int64_t b = 0; b < x->dims[0]; b++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t i = 0; i < s; i++) {
        double sq = 0;
        for (int64_t k = ch - lo < 0 ? 0 : ch - lo; k <= ch + hi && k < c; k++) {
          double v = buf[(b * c + k) * s + i];
          sq += v * v;
        }
        int64_t at = (b * c + ch) * s + i;
        out[at] = buf[at] / pow(bias + alpha / (double)size * sq, beta);
      }
  store(out, a->out[0], n);
  free(buf);
  return NULL;
}

/* batchnorm_train: per channel, the batch's mean and (population)
 * variance over N and the spatial dims normalize X; the running mean and
 * variance are input_mean * momentum + mean * (1 - momentum), the same
 * for the variance. */
static dvm_status *batchnorm_train(const dvm_kernel_args *a) {
  static const char op[] = "batchnorm_train";
  static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
  double eps, momentum;
  dvm_status *st = dvm_kargs_check(a, op, 5, 3, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(op, a->nattrs, 2, 2);
  if (!st) st = dvm_attr_float(op, "epsilon", &a->attrs[0], &eps);
  if (!st) st = dvm_attr_float(op, "momentum", &a->attrs[1], &momentum);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  char got[64], sx[DVM_SHAPE_STR_SIZE], sp[DVM_SHAPE_STR_SIZE];
  bool ok = F32_F64 >> x->dtype & 1;
  for (int i = 1; i < 5; i++) ok = ok && a->in[i]->dtype == x->dtype;
  for (int i = 0; i < 3; i++) ok = ok && a->out[i]->dtype == x->dtype;
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want all f32 or all f64", op,
                          dvm_kargs_dtypes(got, sizeof got, a));
  if (x->rank < 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X %s must be [N, C, ...]", op, dvm_shape_str(sx, x->rank, x->dims));
  int64_t c = x->dims[1];
  for (int i = 1; i < 7; i++) { /* the parameters, then running_mean and running_var */
    const dvm_tensor *t = i < 5 ? a->in[i] : a->out[i - 4];
    if (t->rank != 1 || t->dims[0] != c)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s must be [%lld], the channels of X %s", op,
                            i < 5 ? names[i] : i == 5 ? "running_mean" : "running_var",
                            dvm_shape_str(sp, t->rank, t->dims), (long long)c, dvm_shape_str(sx, x->rank, x->dims));
  }
  const dvm_tensor *y = a->out[0];
  if (y->rank != x->rank || memcmp(y->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Y %s must have X's shape %s", op,
                          dvm_shape_str(sp, y->rank, y->dims), dvm_shape_str(sx, x->rank, x->dims));
  int64_t n = dvm_tensor_numel(x), s = c && x->dims[0] ? n / (x->dims[0] * c) : 0;
  double *buf = malloc(sizeof(double) * (size_t)(n + 6 * c + 1));
  if (!buf) return oom(op);
  double *p = buf + n, *mean = p + 4 * c, *var = mean + c;
  load(x, buf, n);
  for (int i = 1; i < 5; i++) load(a->in[i], p + (i - 1) * c, c);
  double count = (double)(x->dims[0] * s);
  for (int64_t ch = 0; ch < c; ch++) {
    double sum = 0, dev = 0;
    for (int64_t b = 0; b < x->dims[0]; b++)
      for (int64_t i = 0; i < s; i++) sum += buf[(b * c + ch) * s + i];
    mean[ch] = sum / count;
    for (int64_t b = 0; b < x->dims[0]; b++)
      for (int64_t i = 0; i < s; i++) {
        double d = buf[(b * c + ch) * s + i] - mean[ch];
        dev += d * d;
      }
    var[ch] = dev / count;
    double mul = p[ch] / sqrt(var[ch] + eps);
    for (int64_t b = 0; b < x->dims[0]; b++)
      for (int64_t i = 0; i < s; i++) {
        double *v = &buf[(b * c + ch) * s + i];
        *v = (*v - mean[ch]) * mul + p[c + ch];
      }
    mean[ch] = p[2 * c + ch] * momentum + mean[ch] * (1 - momentum);
    var[ch] = p[3 * c + ch] * momentum + var[ch] * (1 - momentum);
  }
  store(buf, y, n);
  store(mean, a->out[1], c);
  store(var, a->out[2], c);
  free(buf);
  return NULL;
}

const dvm_kernel_def dvm_cpu_norm_stats_kernels[] = {
    {"instance_norm", DVM_DEVICE_CPU, instance_norm, "same", .dtypes = F32_F64, .inplace = 1},
    {"group_norm", DVM_DEVICE_CPU, group_norm, "same", .dtypes = F32_F64, .inplace = 1},
    {"mvn", DVM_DEVICE_CPU, mvn, "same", .dtypes = F32_F64, .inplace = 1},
    {"lrn", DVM_DEVICE_CPU, lrn, "same", .dtypes = F32_F64, .inplace = 1},
    {"batchnorm_train", DVM_DEVICE_CPU, batchnorm_train, "batchnorm_train", .dtypes = F32_F64},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
