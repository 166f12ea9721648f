/* Kernels that draw random numbers, all from the one generator of
 * random.h (counter-based: element i's draws are a hash of the call's key
 * and i, so a seeded call gives the same numbers on every call, run and
 * thread count, and an unseeded one new numbers on each call). `seed`,
 * last and optional in each, is the node's seed attribute (a float for
 * the ONNX random ops, an int for dropout).
 *
 *   random_normal(in: [x]; attrs: mean:float, scale:float[, seed]) -> y
 *   random_uniform(in: [x]; attrs: low:float, high:float[, seed]) -> y
 *        y f32, f64, f16 or bf16, of the shape the caller allocates; with
 *        x (any dtype, never read) y must have x's shape. Normal: mean +
 *        scale * z, z standard normal by Box-Muller from draws 2i and
 *        2i + 1. Uniform: low + (high - low) * u, u in [0, 1) from draw i
 *        (53 bits), rounded to y's dtype and, where that rounding reaches
 *        high, the dtype's next value below it; low above high is an error.
 *   bernoulli(in: p; attrs: [seed]) -> y
 *        p f32, f64, f16 or bf16, every element in [0, 1] (else an error
 *        naming it); y of p's shape, any integer or float dtype or bool:
 *        1 where draw i's u < p[i] (probability p), else 0.
 *   multinomial(in: x; attrs: sample_size:int[, seed]) -> y
 *        x [batch, classes] f32, f64, f16 or bf16: unnormalized
 *        log-probabilities; y i32 or i64 [batch, sample_size]: sample j
 *        of row b is class k with probability softmax(x[b])[k], from draw
 *        b * sample_size + j. -inf is probability 0; NaN or +inf, or a
 *        row that is all -inf (or has no classes) while samples are
 *        wanted, is an error naming it.
 *   dropout(in: x; attrs: ratio:float, training:int[, seed]) -> y[, mask]
 *        x f32, f64, f16 or bf16; mask bool. Training with ratio r in
 *        (0, 1): element i kept (mask true) when draw i's top 24 bits are
 *        at least r * 2^24, and scaled by 1 / (1 - r), else 0; otherwise
 *        y = x and the mask all true.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/movement.h"
#include "ops/cpu/par.h"
#include "ops/cpu/random.h"
#include "ops/kargs.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* Elements per chunk of the thread pool's loops. */
#define CHUNK 4096

uint64_t dvm_rng_key(const dvm_value *seed) {
  uint64_t s;
  if (seed && seed->kind == DVM_VAL_INT) {
    s = (uint64_t)seed->u.i;
  } else if (seed) {
    double f = seed->u.f;
    memcpy(&s, &f, sizeof s);
  } else { /* no seed: the clock's nanoseconds and a count of calls */
    static _Atomic uint64_t calls;
    struct timespec ts = {0};
    timespec_get(&ts, TIME_UTC);
    s = dvm_rng_mix((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
        dvm_rng_mix(atomic_fetch_add(&calls, 1) + 0x9e3779b97f4a7c15ull);
  }
  return dvm_rng_mix(s ^ 0x5851f42d4c957f2dull);
}

static int is_float(dvm_dtype dt) {
  return dt == DVM_F32 || dt == DVM_F64 || dt == DVM_F16 || dt == DVM_BF16;
}

/* Element i of a float tensor of dtype dt, as a double. */
static double load_float(const void *p, int64_t i, dvm_dtype dt) {
  switch (dt) {
  case DVM_F32: return ((const float *)p)[i];
  case DVM_F64: return ((const double *)p)[i];
  case DVM_F16: return dvm_f16_to_f32(((const uint16_t *)p)[i]);
  default: return dvm_bf16_to_f32(((const uint16_t *)p)[i]); /* bf16 */
  }
}

/* Stores v as element i of p, of float dtype dt; with below_high, a value
 * that rounds to `high` or above is stored as the dtype's next value down. */
static void store_float(void *p, int64_t i, dvm_dtype dt, double v, int below_high, double high) {
  switch (dt) {
  case DVM_F32: {
    float f = (float)v;
    ((float *)p)[i] = below_high && f >= high ? nextafterf(f, -INFINITY) : f;
    break;
  }
  case DVM_F64: ((double *)p)[i] = below_high && v >= high ? nextafter(v, -INFINITY) : v; break;
  default: { /* f16, bf16: sign and magnitude, the magnitude's bits in order */
    uint16_t h = dt == DVM_F16 ? dvm_f32_to_f16((float)v) : dvm_f32_to_bf16((float)v);
    if (below_high && (dt == DVM_F16 ? dvm_f16_to_f32(h) : dvm_bf16_to_f32(h)) >= high)
      h = (h & 0x7fff) == 0 ? 0x8001 : (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
    ((uint16_t *)p)[i] = h;
  }
  }
}

/* The optional seed: attribute `at` when the call has it. */
static uint64_t key_of(const dvm_kernel_args *a, int at) {
  return dvm_rng_key(a->nattrs > at ? &a->attrs[at] : NULL);
}

/* Fails unless the call has `count` attributes (`names`) and optionally
 * one more (the seed), all numbers. */
static dvm_status *check_attrs(const dvm_kernel_args *a, const char *op, int count, const char *names) {
  int ok = a->nattrs == count || a->nattrs == count + 1;
  for (int i = 0; ok && i < a->nattrs; i++)
    ok = a->attrs[i].kind == DVM_VAL_FLOAT || a->attrs[i].kind == DVM_VAL_INT;
  return ok ? NULL : ERR("%s: takes %s and an optional seed (numbers), got %d attributes", op, names, a->nattrs);
}

static double num(const dvm_value *v) { return v->kind == DVM_VAL_INT ? (double)v->u.i : v->u.f; }

/* ---- random_normal, random_uniform ---- */

typedef struct fill_job {
  void *y;
  dvm_dtype dt;
  uint64_t key;
  double a, b; /* mean and scale, or low and high */
  int uniform;
} fill_job;

static void fill_chunk(void *ctx, int64_t s, int64_t e) {
  const fill_job *j = ctx;
  for (int64_t i = s; i < e; i++) {
    if (j->uniform) {
      store_float(j->y, i, j->dt, j->a + (j->b - j->a) * dvm_rng_unit(j->key, (uint64_t)i), j->b > j->a, j->b);
    } else { /* Box-Muller: u1 in (0, 1] so its log is finite */
      double u1 = 1 - dvm_rng_unit(j->key, 2 * (uint64_t)i), u2 = dvm_rng_unit(j->key, 2 * (uint64_t)i + 1);
      double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
      store_float(j->y, i, j->dt, j->a + j->b * z, 0, 0);
    }
  }
}

static dvm_status *random_fill(const dvm_kernel_args *a, const char *op, int uniform) {
  dvm_status *st = dvm_kargs_check_range(a, op, 0, 1, 1, 1, DVM_DEVICE_CPU);
  if (st || (st = check_attrs(a, op, 2, uniform ? "low and high" : "mean and scale"))) return st;
  const dvm_tensor *y = a->out[0];
  dvm_dtype dt = (dvm_dtype)y->dtype;
  if (!is_float(dt)) return ERR("%s: output is %s, want f32, f64, f16 or bf16", op, dvm_dtype_name(dt));
  if (a->nin && (st = dvm_cpu_check_shape(op, y, 0, a->in[0]->rank, a->in[0]->dims))) return st;
  fill_job j = {dvm_tensor_ptr(y), dt, key_of(a, 2), num(&a->attrs[0]), num(&a->attrs[1]), uniform};
  if (uniform && j.a > j.b) return ERR("%s: low %g is above high %g", op, j.a, j.b);
  dvm_par_for(dvm_kargs_threads(a), dvm_tensor_numel(y), CHUNK, fill_chunk, &j);
  return NULL;
}

static dvm_status *random_normal(const dvm_kernel_args *a) { return random_fill(a, "random_normal", 0); }
static dvm_status *random_uniform(const dvm_kernel_args *a) { return random_fill(a, "random_uniform", 1); }

/* ---- bernoulli ---- */

typedef struct bern_job {
  const void *p;
  dvm_dtype pdt;
  char *y;
  size_t esz;
  uint64_t one, key; /* `one`: the bytes of 1 in y's dtype */
} bern_job;

static void bern_chunk(void *ctx, int64_t s, int64_t e) {
  const bern_job *j = ctx;
  for (int64_t i = s; i < e; i++) {
    uint64_t v = dvm_rng_unit(j->key, (uint64_t)i) < load_float(j->p, i, j->pdt) ? j->one : 0;
    memcpy(j->y + (size_t)i * j->esz, &v, j->esz); /* little-endian: the low bytes */
  }
}

/* The bytes of 1 in dtype dt (integers, floats, bool), little-endian. */
static uint64_t one_of(dvm_dtype dt) {
  float f = 1;
  double d = 1;
  uint32_t u32;
  uint64_t u64;
  switch (dt) {
  case DVM_F32: memcpy(&u32, &f, 4); return u32;
  case DVM_F64: memcpy(&u64, &d, 8); return u64;
  case DVM_F16: return dvm_f32_to_f16(1);
  case DVM_BF16: return dvm_f32_to_bf16(1);
  default: return 1;
  }
}

static dvm_status *bernoulli(const dvm_kernel_args *a) {
  const char *op = "bernoulli";
  dvm_status *st = dvm_kargs_check_range(a, op, 1, 1, 1, 1, DVM_DEVICE_CPU);
  if (st || (st = check_attrs(a, op, 0, "no other attribute"))) return st;
  const dvm_tensor *p = a->in[0], *y = a->out[0];
  dvm_dtype pdt = (dvm_dtype)p->dtype, ydt = (dvm_dtype)y->dtype;
  if (!is_float(pdt) || !(is_float(ydt) || dvm_dtype_is_int(ydt) || ydt == DVM_BOOL))
    return ERR("%s: %s: want p of a float dtype and y of a number dtype or bool", op,
               dvm_kargs_dtypes((char[96]){0}, 96, a));
  if ((st = dvm_cpu_check_shape(op, y, 0, p->rank, p->dims))) return st;
  const void *pp = dvm_tensor_ptr(p);
  int64_t n = dvm_tensor_numel(p);
  for (int64_t i = 0; i < n; i++) {
    double v = load_float(pp, i, pdt);
    if (!(v >= 0 && v <= 1)) return ERR("%s: p[%lld] = %g is not a probability in [0, 1]", op, (long long)i, v);
  }
  bern_job j = {pp, pdt, dvm_tensor_ptr(y), dvm_dtype_size(ydt), one_of(ydt), key_of(a, 0)};
  dvm_par_for(dvm_kargs_threads(a), n, CHUNK, bern_chunk, &j);
  return NULL;
}

/* ---- multinomial ---- */

typedef struct multi_job {
  const void *x;
  dvm_dtype xdt;
  int64_t classes, samples;
  double *cdf; /* [batch, classes] */
  void *y;
  int i64;
  uint64_t key;
} multi_job;

/* Rows [s, e): each row's running sums of exp(x - max), then each sample
 * the first class whose running sum exceeds u * total. */
static void multi_rows(void *ctx, int64_t s, int64_t e) {
  const multi_job *j = ctx;
  int64_t c = j->classes;
  for (int64_t b = s; b < e; b++) {
    double *cdf = j->cdf + b * c;
    double max = -INFINITY, total = 0;
    for (int64_t k = 0; k < c; k++) max = fmax(max, load_float(j->x, b * c + k, j->xdt));
    for (int64_t k = 0; k < c; k++) cdf[k] = total += exp(load_float(j->x, b * c + k, j->xdt) - max);
    for (int64_t t = 0; t < j->samples; t++) {
      int64_t i = b * j->samples + t;
      double to_find = dvm_rng_unit(j->key, (uint64_t)i) * total;
      int64_t lo = 0, hi = c - 1; /* the first k with cdf[k] > to_find; the last class if rounding left none */
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > to_find) hi = mid;
        else lo = mid + 1;
      }
      while (lo > 0 && cdf[lo] == cdf[lo - 1]) lo--; /* never a class of probability 0 */
      if (j->i64) ((int64_t *)j->y)[i] = lo;
      else ((int32_t *)j->y)[i] = (int32_t)lo;
    }
  }
}

static dvm_status *multinomial(const dvm_kernel_args *a) {
  const char *op = "multinomial";
  dvm_status *st = dvm_kargs_check_range(a, op, 1, 1, 1, 1, DVM_DEVICE_CPU);
  if (st || (st = check_attrs(a, op, 1, "sample_size"))) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  dvm_dtype xdt = (dvm_dtype)x->dtype;
  if (!is_float(xdt) || x->rank != 2 || (y->dtype != DVM_I32 && y->dtype != DVM_I64))
    return ERR("%s: %s: want x a 2-D float tensor and y i32 or i64", op, dvm_kargs_dtypes((char[96]){0}, 96, a));
  if (a->attrs[0].kind != DVM_VAL_INT || a->attrs[0].u.i < 0)
    return ERR("%s: sample_size must be an int >= 0", op);
  int64_t batch = x->dims[0], classes = x->dims[1], samples = a->attrs[0].u.i, want[2] = {batch, samples};
  if ((st = dvm_cpu_check_shape(op, y, 0, 2, want))) return st;
  if (!batch || !samples) return NULL;
  const void *px = dvm_tensor_ptr(x);
  for (int64_t b = 0; b < batch; b++) {
    int any = 0;
    for (int64_t k = 0; k < classes; k++) {
      double v = load_float(px, b * classes + k, xdt);
      if (isnan(v) || v == INFINITY)
        return ERR("%s: x[%lld, %lld] is %g, not a log-probability", op, (long long)b, (long long)k, v);
      any |= v != -INFINITY;
    }
    if (!any) return ERR("%s: row %lld of x [%lld,%lld] has no class of probability above 0", op, (long long)b,
                         (long long)batch, (long long)classes);
  }
  double *cdf = malloc(sizeof(double) * (size_t)(batch * classes));
  if (!cdf) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: x [%lld,%lld]", op, (long long)batch, (long long)classes);
  multi_job j = {px, xdt, classes, samples, cdf, dvm_tensor_ptr(y), y->dtype == DVM_I64, key_of(a, 1)};
  /* rows per chunk: about CHUNK draws */
  dvm_par_for(dvm_kargs_threads(a), batch, samples >= CHUNK ? 1 : CHUNK / samples, multi_rows, &j);
  free(cdf);
  return NULL;
}

/* ---- dropout ---- */

typedef struct drop_job {
  const char *x;
  char *y;
  uint8_t *mask;
  dvm_dtype dt;
  int training;
  uint32_t cut;
  double scale;
  uint64_t key;
} drop_job;

static void drop_chunk(void *ctx, int64_t s, int64_t e) {
  const drop_job *j = ctx;
  for (int64_t i = s; i < e; i++) {
    int keep = !j->training || (uint32_t)(dvm_rng_draw(j->key, (uint64_t)i) >> 40) >= j->cut;
    if (j->mask) j->mask[i] = (uint8_t)keep;
    store_float(j->y, i, j->dt, keep ? load_float(j->x, i, j->dt) * j->scale : 0, 0, 0);
  }
}

static dvm_status *dropout(const dvm_kernel_args *a) {
  const char *op = "dropout";
  dvm_status *st = dvm_kargs_check_range(a, op, 1, 1, 1, 2, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0], *mask = a->nout > 1 ? a->out[1] : NULL;
  dvm_dtype dt = (dvm_dtype)x->dtype;
  if (!is_float(dt) || y->dtype != x->dtype || (mask && mask->dtype != DVM_BOOL))
    return ERR("%s: %s: want x and y of one float dtype and a bool mask", op,
               dvm_kargs_dtypes((char[96]){0}, 96, a));
  if (a->nattrs < 2 || a->nattrs > 3 || a->attrs[0].kind != DVM_VAL_FLOAT || a->attrs[1].kind != DVM_VAL_INT ||
      (a->nattrs == 3 && a->attrs[2].kind != DVM_VAL_INT))
    return ERR("%s: takes attributes ratio (a float), training (an int) and an optional seed", op);
  if ((st = dvm_cpu_check_shape(op, y, 0, x->rank, x->dims)) ||
      (mask && (st = dvm_cpu_check_shape(op, mask, 1, x->rank, x->dims))))
    return st;
  double ratio = a->attrs[0].u.f;
  int training = a->attrs[1].u.i != 0 && ratio != 0;
  if (training && !(ratio > 0 && ratio < 1))
    return ERR("%s: ratio %g is not in [0, 1)", op, ratio);
  drop_job j = {dvm_tensor_ptr(x), dvm_tensor_ptr(y), mask ? dvm_tensor_ptr(mask) : NULL, dt, training,
                (uint32_t)ceil(ratio * (1 << 24)), training ? 1 / (1 - ratio) : 1, key_of(a, 2)};
  dvm_par_for(dvm_kargs_threads(a), dvm_tensor_numel(x), CHUNK, drop_chunk, &j);
  return NULL;
}

const dvm_kernel_def dvm_cpu_random_kernels[] = {
    {"random_normal", DVM_DEVICE_CPU, random_normal, NULL},
    {"random_uniform", DVM_DEVICE_CPU, random_uniform, NULL},
    {"bernoulli", DVM_DEVICE_CPU, bernoulli, NULL, DVM_DTYPES_FLOAT},
    {"multinomial", DVM_DEVICE_CPU, multinomial, "multinomial", DVM_DTYPES_FLOAT},
    {"dropout", DVM_DEVICE_CPU, dropout, NULL},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
