/* Generator kernels: outputs made from a few numbers, or from where a
 * tensor is non-zero. Shapes come from shapefuncs/generate.h.
 *
 *   nonzero(in: x) -> y             x any dtype; y i64 [rank(x), count], the
 *                                   coordinates of the non-zeros in row-major order
 *   range(in: start, limit, delta) -> y
 *                                   one-element tensors of one dtype (f32, f64,
 *                                   f16, bf16, i16, i32, i64); y of that dtype
 *   constant_of_shape(in: shape; attrs: value:int|float) -> y
 *                                   shape: i64 or i32 1-D host tensor; y of any
 *                                   dtype the caller picks, every element
 *                                   `value` (default 0), which must fit it
 * (The kernels that draw random numbers, dropout among them, are random.c's.)
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/movement.h"
#include "ops/cpu/par.h"
#include "ops/kargs.h"
#include "shapefuncs/generate.h"
#include "shapefuncs/shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* Below this many elements per thread, a fork costs more than it saves. */
#define MIN_CHUNK ((int64_t)1 << 15)

/* Most threads a nonzero call splits its input among. */
#define MAX_PARTS 64

/* ---- nonzero ---- */

/* Writes the coordinates of the non-zeros among elements [s, e) of a
 * tensor of `rank` dims to columns pos, pos + 1, ... of out [rank, n]. */
#define WRITE(T)                                                                     \
  static void write_##T(const void *x, uint64_t mask, int rank, const int64_t *dims, \
                        int64_t s, int64_t e, int64_t *out, int64_t n, int64_t pos) { \
    const T *a = x;                                                                  \
    int64_t idx[DVM_MAX_RANK], rest = s;                                             \
    for (int d = rank - 1; d >= 0; d--) {                                            \
      idx[d] = rest % dims[d];                                                       \
      rest /= dims[d];                                                               \
    }                                                                                \
    for (int64_t i = s; i < e; i++) {                                                \
      if (a[i] & (T)mask) {                                                          \
        for (int d = 0; d < rank; d++) out[d * n + pos] = idx[d];                    \
        pos++;                                                                       \
      }                                                                              \
      for (int d = rank - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;         \
    }                                                                                \
  }
WRITE(uint8_t)
WRITE(uint16_t)
WRITE(uint32_t)
WRITE(uint64_t)

typedef void (*write_fn)(const void *x, uint64_t mask, int rank, const int64_t *dims, int64_t s,
                         int64_t e, int64_t *out, int64_t n, int64_t pos);

/* nonzero's parts over the pool (par.h): first each part's count into
 * start[t + 1], then each part's indices from start[t]. */
typedef struct nz_job {
  const char *px;
  size_t esz;
  dvm_dtype dt;
  int64_t total, parts, *start;
  write_fn write;
  uint64_t mask;
  const dvm_tensor *x;
  int64_t *out, n;
} nz_job;

static void nz_count(void *ctx, int64_t t0, int64_t t1) {
  const nz_job *j = ctx;
  for (int64_t t = t0; t < t1; t++) {
    int64_t s = j->total * t / j->parts, e = j->total * (t + 1) / j->parts;
    j->start[t + 1] = dvm_nonzero_count(j->px + s * (int64_t)j->esz, e - s, j->dt);
  }
}

static void nz_write(void *ctx, int64_t t0, int64_t t1) {
  const nz_job *j = ctx;
  for (int64_t t = t0; t < t1; t++)
    j->write(j->px, j->mask, j->x->rank, j->x->dims, j->total * t / j->parts,
             j->total * (t + 1) / j->parts, j->out, j->n, j->start[t]);
}

static dvm_status *nonzero(const dvm_kernel_args *a) {
  dvm_status *st = dvm_cpu_check_io(a, "nonzero", 1, 1, 1, 0);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (y->dtype != DVM_I64)
    return ERR("nonzero: output is %s, want i64", dvm_dtype_name((dvm_dtype)y->dtype));
  dvm_dtype dt = (dvm_dtype)x->dtype;
  size_t esz = dvm_dtype_size(dt);
  const char *px = dvm_tensor_ptr(x);
  int64_t total = dvm_tensor_numel(x), parts = total / MIN_CHUNK, start[MAX_PARTS + 1] = {0};
  if (parts > dvm_kargs_threads(a)) parts = dvm_kargs_threads(a);
  if (parts > MAX_PARTS) parts = MAX_PARTS;
  if (parts < 1) parts = 1;
  /* count per part, then each part writes from where the earlier ones end */
  nz_job j = {px, esz, dt, total, parts, start};
  dvm_par_for((int)parts, parts, 1, nz_count, &j);
  for (int64_t t = 0; t < parts; t++) start[t + 1] += start[t];
  int64_t n = start[parts], want[2] = {x->rank, n};
  if ((st = dvm_cpu_check_shape("nonzero", y, 0, 2, want))) return st;
  if (n == 0 || x->rank == 0) return NULL;
  static const write_fn writes[] = {write_uint8_t, write_uint16_t, write_uint32_t,
                                    write_uint64_t};
  write_fn fn = writes[esz == 1 ? 0 : esz == 2 ? 1 : esz == 4 ? 2 : 3];
  uint64_t mask = dvm_nonzero_mask(dt);
  int64_t *py = dvm_tensor_ptr(y);
  j.write = fn;
  j.mask = mask;
  j.x = x;
  j.out = py;
  j.n = n;
  dvm_par_for((int)parts, parts, 1, nz_write, &j);
  return NULL;
}

/* ---- range, constant_of_shape ---- */

/* Stores a float value as element i of p, of float dtype dt. */
static void store_float(void *p, int64_t i, dvm_dtype dt, double v) {
  switch (dt) {
  case DVM_F32: ((float *)p)[i] = (float)v; break;
  case DVM_F64: ((double *)p)[i] = v; break;
  case DVM_F16: ((uint16_t *)p)[i] = dvm_f32_to_f16((float)v); break;
  default: ((uint16_t *)p)[i] = dvm_f32_to_bf16((float)v); break; /* bf16 */
  }
}

static int is_float(dvm_dtype dt) {
  return dt == DVM_F32 || dt == DVM_F64 || dt == DVM_F16 || dt == DVM_BF16;
}

static dvm_status *range(const dvm_kernel_args *a) {
  dvm_range_info p;
  dvm_status *st = dvm_cpu_check_io(a, "range", 3, 3, 1, 1);
  if (st) return st;
  dvm_value in[3];
  for (int i = 0; i < 3; i++) in[i] = dvm_value_tensor(a->in[i]);
  if ((st = dvm_range_infer(in, 3, &p)) ||
      (st = dvm_cpu_check_shape("range", a->out[0], 0, 1, &p.n)))
    return st;
  void *y = dvm_tensor_ptr(a->out[0]);
  int64_t nt = p.n / MIN_CHUNK;
  if (nt > dvm_kargs_threads(a)) nt = dvm_kargs_threads(a);
  if (nt < 1) nt = 1;
  /* integers in uint64, which wraps where int64 would overflow: the
   * elements past the limit that could are never made */
#define RANGE_LOOP(T, V)                                                        \
  _Pragma("omp parallel for simd num_threads((int)nt) if (nt > 1)")            \
  for (int64_t i = 0; i < p.n; i++) ((T *)y)[i] = (T)(V);
  switch (p.dtype) {
  case DVM_I16: RANGE_LOOP(int16_t, (uint64_t)p.istart + (uint64_t)i * (uint64_t)p.idelta) break;
  case DVM_I32: RANGE_LOOP(int32_t, (uint64_t)p.istart + (uint64_t)i * (uint64_t)p.idelta) break;
  case DVM_I64: RANGE_LOOP(int64_t, (uint64_t)p.istart + (uint64_t)i * (uint64_t)p.idelta) break;
  case DVM_F32: RANGE_LOOP(float, p.fstart + (double)i * p.fdelta) break;
  case DVM_F64: RANGE_LOOP(double, p.fstart + (double)i * p.fdelta) break;
  default: /* f16, bf16 */
    for (int64_t i = 0; i < p.n; i++) store_float(y, i, p.dtype, p.fstart + (double)i * p.fdelta);
  }
#undef RANGE_LOOP
  return NULL;
}

/* The value attribute as one element of dtype dt in out. */
static dvm_status *encode_value(const dvm_value *v, dvm_dtype dt, void *out) {
  static const struct { int64_t lo, hi; } limits[DVM_DTYPE_COUNT] = {
      [DVM_I8] = {INT8_MIN, INT8_MAX},   [DVM_I16] = {INT16_MIN, INT16_MAX},
      [DVM_I32] = {INT32_MIN, INT32_MAX}, [DVM_I64] = {INT64_MIN, INT64_MAX},
      [DVM_U8] = {0, UINT8_MAX},         [DVM_BOOL] = {0, 1},
      [DVM_U16] = {0, UINT16_MAX},       [DVM_U32] = {0, UINT32_MAX},
      [DVM_U64] = {0, INT64_MAX}, /* the attribute is an int64 */
  };
  int from_int = v->kind == DVM_VAL_INT;
  if (is_float(dt)) {
    store_float(out, 0, dt, from_int ? (double)v->u.i : v->u.f);
    return NULL;
  }
  int64_t x = v->u.i;
  if (!from_int) { /* a float that is an integer of the dtype converts exactly */
    double f = v->u.f;
    if (!(f == trunc(f) && f >= -0x1p63 && f < 0x1p63))
      return ERR("constant_of_shape: value %g is not an integer of %s", f, dvm_dtype_name(dt));
    x = (int64_t)f;
  }
  if (x < limits[dt].lo || x > limits[dt].hi)
    return ERR("constant_of_shape: value %lld does not fit %s", (long long)x, dvm_dtype_name(dt));
  int64_t le = x; /* the low bytes of a little-endian int64 are the narrower int */
  memcpy(out, &le, dvm_dtype_size(dt));
  return NULL;
}

static dvm_status *constant_of_shape(const dvm_kernel_args *a) {
  const char *op = "constant_of_shape";
  dvm_status *st = dvm_cpu_check_io(a, op, 1, 1, 1, 0);
  if (st) return st;
  if (a->nattrs > 1) return ERR("%s: takes 1 attribute (value), got %d", op, a->nattrs);
  dvm_value in[2] = {dvm_value_tensor(a->in[0]), a->nattrs ? a->attrs[0] : dvm_value_int(0)};
  int rank;
  int64_t dims[DVM_MAX_RANK];
  dvm_tensor *y = a->out[0];
  uint64_t elem = 0;
  if ((st = dvm_constant_of_shape_infer(in, 2, &rank, dims)) ||
      (st = dvm_cpu_check_shape(op, y, 0, rank, dims)) ||
      (st = encode_value(&in[1], (dvm_dtype)y->dtype, &elem)))
    return st;
  dvm_cpu_fill(dvm_tensor_ptr(y), &elem, dvm_dtype_size((dvm_dtype)y->dtype),
               dvm_tensor_numel(y), dvm_kargs_threads(a));
  return NULL;
}

const dvm_kernel_def dvm_cpu_generate_kernels[] = {
    {"nonzero", DVM_DEVICE_CPU, nonzero, "nonzero"},
    {"range", DVM_DEVICE_CPU, range, "range"},
    {"constant_of_shape", DVM_DEVICE_CPU, constant_of_shape, "constant_of_shape"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
