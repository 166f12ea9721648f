/* Shapes of the generator ops (see generate.h).
 *
 * Shape functions:
 *   nonzero(x) -> out            data-dependent: counts x's non-zeros
 *   range(start, limit, delta) -> out
 *   constant_of_shape(shape[, value:int|float]) -> out
 *   multinomial(x, sample_size:int[, seed]) -> [x's dim 0, sample_size] */
#include <math.h>
#include <string.h>

#include "generate.h"
#include "half.h"
#include "kernel.h"
#include "movement.h"
#include "object.h"
#include "shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

uint64_t dvm_nonzero_mask(dvm_dtype dt) {
  switch (dt) {
  case DVM_F16:
  case DVM_BF16: return 0x7fff;
  case DVM_F32: return 0x7fffffff;
  case DVM_F64: return 0x7fffffffffffffff;
  default: return ~(uint64_t)0 >> (64 - 8 * dvm_dtype_size(dt));
  }
}

#define COUNT(T)                                                                    \
  static int64_t count_##T(const T *a, int64_t n, T mask) {                         \
    int64_t c = 0;                                                                  \
    _Pragma("omp simd reduction(+ : c)") for (int64_t i = 0; i < n; i++)            \
      c += (a[i] & mask) != 0;                                                      \
    return c;                                                                       \
  }
COUNT(uint8_t)
COUNT(uint16_t)
COUNT(uint32_t)
COUNT(uint64_t)

int64_t dvm_nonzero_count(const void *p, int64_t n, dvm_dtype dt) {
  uint64_t m = dvm_nonzero_mask(dt);
  switch (dvm_dtype_size(dt)) {
  case 1: return count_uint8_t(p, n, (uint8_t)m);
  case 2: return count_uint16_t(p, n, (uint16_t)m);
  case 4: return count_uint32_t(p, n, (uint32_t)m);
  default: return count_uint64_t(p, n, m);
  }
}

static dvm_status *shapefn_nonzero(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("nonzero", nin, 1, 1, nout, 1);
  if (st) return st;
  if (in[0].kind != DVM_VAL_TENSOR)
    return ERR("nonzero: input 0: expected a tensor, got %s", dvm_kind_name((dvm_kind)in[0].kind));
  const dvm_tensor *t = in[0].u.tensor;
  if (!t) return ERR("nonzero: input 0 is a null tensor");
  if (t->storage->device != DVM_DEVICE_CPU)
    return ERR("nonzero: input 0 is on %s; shape functions read host tensors",
               dvm_device_name((dvm_device_kind)t->storage->device));
  int64_t dims[2] = {t->rank, dvm_nonzero_count(dvm_tensor_ptr(t), dvm_tensor_numel(t),
                                                (dvm_dtype)t->dtype)};
  dvm_shape_set(&out[0], 2, dims);
  return NULL;
}

/* Input i of range, a one-element host tensor of dtype dt, as a double and
 * (integers) an int64. */
static dvm_status *range_value(const dvm_value *in, int i, dvm_dtype dt, double *f, int64_t *n) {
  static const char *const names[] = {"start", "limit", "delta"};
  if (in[i].kind != DVM_VAL_TENSOR)
    return ERR("range: input %d (%s): expected a tensor, got %s", i, names[i],
               dvm_kind_name((dvm_kind)in[i].kind));
  const dvm_tensor *t = in[i].u.tensor;
  if (!t) return ERR("range: input %d (%s) is a null tensor", i, names[i]);
  if (t->dtype != dt)
    return ERR("range: input %d (%s) is %s, start is %s", i, names[i],
               dvm_dtype_name((dvm_dtype)t->dtype), dvm_dtype_name(dt));
  if (dvm_tensor_numel(t) != 1) {
    char s[DVM_SHAPE_STR_SIZE];
    return ERR("range: input %d (%s) has shape %s, want one element", i, names[i],
               dvm_shape_str(s, t->rank, t->dims));
  }
  if (t->storage->device != DVM_DEVICE_CPU)
    return ERR("range: input %d (%s) is on %s; shape functions read host tensors", i, names[i],
               dvm_device_name((dvm_device_kind)t->storage->device));
  const void *p = dvm_tensor_ptr(t);
  *n = 0;
  switch (dt) {
  case DVM_F32: *f = *(const float *)p; break;
  case DVM_F64: *f = *(const double *)p; break;
  case DVM_F16: *f = dvm_f16_to_f32(*(const uint16_t *)p); break;
  case DVM_BF16: *f = dvm_bf16_to_f32(*(const uint16_t *)p); break;
  case DVM_I16: *f = (double)(*n = *(const int16_t *)p); break;
  case DVM_I32: *f = (double)(*n = *(const int32_t *)p); break;
  case DVM_I64: *f = (double)(*n = *(const int64_t *)p); break;
  default:
    return ERR("range: dtype %s: want f32, f64, f16, bf16, i16, i32 or i64",
               dvm_dtype_name(dt));
  }
  return NULL;
}

/* Counts beyond this are refused before they reach an allocator. */
#define RANGE_MAX ((int64_t)1 << 62)

dvm_status *dvm_range_infer(const dvm_value *in, int nin, dvm_range_info *p) {
  double f[3];
  int64_t v[3];
  dvm_status *st = dvm_shape_check_counts("range", nin, 3, 3, 1, 1);
  if (st) return st;
  /* start's dtype, if it has one, is the dtype of all three */
  dvm_dtype dt = in[0].kind == DVM_VAL_TENSOR && in[0].u.tensor ? in[0].u.tensor->dtype : DVM_F32;
  for (int i = 0; i < 3; i++)
    if ((st = range_value(in, i, dt, &f[i], &v[i]))) return st;
  p->dtype = dt;
  if (dt == DVM_I16 || dt == DVM_I32 || dt == DVM_I64) {
    if (v[2] == 0) return ERR("range: delta is 0");
    __int128 span = (__int128)v[1] - v[0], q = span / v[2];
    if (q * v[2] != span && (span > 0) == (v[2] > 0)) q++; /* a ceil where q > 0 */
    p->n = q < 0 ? 0 : q > RANGE_MAX ? -1 : (int64_t)q;
    p->istart = v[0];
    p->idelta = v[2];
  } else {
    if (!isfinite(f[0]) || !isfinite(f[1]) || !isfinite(f[2]))
      return ERR("range: start %g, limit %g and delta %g are not all finite", f[0], f[1], f[2]);
    if (f[2] == 0) return ERR("range: delta is 0");
    /* as ONNX Runtime: the span in the dtype (f32 for the narrow ones), the quotient in double */
    double span = dt == DVM_F64 ? f[1] - f[0] : (double)(float)(f[1] - f[0]);
    double q = ceil(span / f[2]);
    p->n = q < 0 ? 0 : q > (double)RANGE_MAX ? -1 : (int64_t)q;
    p->fstart = f[0];
    p->fdelta = f[2];
  }
  if (p->n < 0)
    return ERR("range: start %g, limit %g and delta %g give too many elements", f[0], f[1], f[2]);
  return NULL;
}

static dvm_status *shapefn_range(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_range_info p;
  dvm_status *st = dvm_shape_check_counts("range", nin, 3, 3, nout, 1);
  if (!st) st = dvm_range_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], 1, &p.n);
  return NULL;
}

dvm_status *dvm_constant_of_shape_infer(const dvm_value *in, int nin, int *rank, int64_t *dims) {
  const char *fn = "constant_of_shape";
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 2, 1, 1);
  if (!st) st = dvm_movement_ints(fn, in, 0, "shape", DVM_MAX_RANK, dims, rank);
  if (st) return st;
  if (nin == 2 && in[1].kind != DVM_VAL_INT && in[1].kind != DVM_VAL_FLOAT)
    return ERR("%s: input 1 (value): expected an int or a float, got %s", fn,
               dvm_kind_name((dvm_kind)in[1].kind));
  char s[DVM_SHAPE_STR_SIZE];
  for (int i = 0; i < *rank; i++)
    if (dims[i] < 0)
      return ERR("%s: shape %s has a negative dim", fn, dvm_shape_str(s, *rank, dims));
  return NULL;
}

static dvm_status *shapefn_constant_of_shape(const dvm_value *in, int nin, dvm_value *out,
                                             int nout) {
  int rank;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("constant_of_shape", nin, 1, 2, nout, 1);
  if (!st) st = dvm_constant_of_shape_infer(in, nin, &rank, dims);
  if (st) return st;
  dvm_shape_set(&out[0], rank, dims);
  return NULL;
}

/* multinomial's samples: [batch, sample_size] for x [batch, classes]. */
static dvm_status *shapefn_multinomial(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rank;
  const int64_t *dims;
  dvm_status *st = dvm_shape_check_counts("multinomial", nin, 2, 3, nout, 1);
  if (!st) st = dvm_shape_arg("multinomial", &in[0], 0, &rank, &dims);
  if (st) return st;
  if (rank != 2) return ERR("multinomial: input 0 has rank %d, want 2 ([batch, classes])", rank);
  if (in[1].kind != DVM_VAL_INT || in[1].u.i < 0) return ERR("multinomial: sample_size must be an int >= 0");
  dvm_shape_set(&out[0], 2, (int64_t[]){dims[0], in[1].u.i});
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_generate_table[] = {
    {"nonzero", shapefn_nonzero},
    {"range", shapefn_range},
    {"constant_of_shape", shapefn_constant_of_shape},
    {"multinomial", shapefn_multinomial},
    {NULL, NULL},
};
