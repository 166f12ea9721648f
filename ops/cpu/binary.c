/* Elementwise binary kernels (add, mul) with numpy broadcasting.
 *
 * A call is reduced to a plan: the output dims with size-1 dims dropped and
 * neighbours merged wherever both inputs stay contiguous across them, with
 * each input's element stride per dim (0 where it broadcasts). The innermost
 * plan dim then has input strides of 0 or 1, so it runs as one of three
 * vectorized row loops (vector-vector, scalar-vector, vector-scalar) and the
 * outer dims are walked with counters: no div/mod per element. Same-shape
 * inputs become one row of the vector-vector loop; a scalar, one row of a
 * scalar loop; a bias row, rows of the vector-vector loop; a column, rows of
 * a scalar loop.
 *
 * The output may be the same memory as an input of the same shape. */
#include <omp.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/broadcast.h"
#include "shapefuncs/shape.h"

/* Below this many elements per thread, a fork costs more than it saves. */
#define MIN_CHUNK ((int64_t)1 << 15)

/* n elements of o = a op b, each of a and b either advancing or a scalar. */
typedef void (*row_fn)(int64_t n, const void *a, const void *b, void *o);

enum { ROW_VV, ROW_SV, ROW_VS, ROW_KINDS };

/* Integers wrap as in numpy: they are computed in the unsigned type U,
 * where overflow is defined (U must not promote to int). */
#define ADD(x, y) ((x) + (y))
#define MUL(x, y) ((x) * (y))

/* "omp simd" vectorizes without a run-time alias check (GCC's -O2 cost
 * model would not); an output that is exactly an input is still right, as
 * each element is read before it is written. */
#define ROW_LOOP(name, T, U, OP, A, B)                                    \
  static void name(int64_t n, const void *pa, const void *pb, void *po) { \
    const T *a = pa, *b = pb;                                             \
    T *o = po;                                                            \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                   \
      o[i] = (T)OP((U)(A), (U)(B));                                       \
  }

#define ROW_LOOPS(name, T, U, OP)            \
  ROW_LOOP(name##_vv, T, U, OP, a[i], b[i]) \
  ROW_LOOP(name##_sv, T, U, OP, a[0], b[i]) \
  ROW_LOOP(name##_vs, T, U, OP, a[i], b[0])

#define DTYPE_LOOPS(op, OP)                  \
  ROW_LOOPS(op##_f32, float, float, OP)      \
  ROW_LOOPS(op##_f64, double, double, OP)    \
  ROW_LOOPS(op##_i32, int32_t, uint32_t, OP) \
  ROW_LOOPS(op##_i64, int64_t, uint64_t, OP)

DTYPE_LOOPS(add, ADD)
DTYPE_LOOPS(mul, MUL)

#define ROWS(name) {name##_vv, name##_sv, name##_vs}
#define DTYPE_ROWS(op)                                   \
  {[DVM_F32] = ROWS(op##_f32), [DVM_F64] = ROWS(op##_f64), \
   [DVM_I32] = ROWS(op##_i32), [DVM_I64] = ROWS(op##_i64)}

enum { OP_ADD, OP_MUL, OP_COUNT };

static const char *const op_names[OP_COUNT] = {"add", "mul"};

/* The dtypes an op supports are the non-empty entries. */
static const row_fn rows[OP_COUNT][DVM_DTYPE_COUNT][ROW_KINDS] = {
    [OP_ADD] = DTYPE_ROWS(add),
    [OP_MUL] = DTYPE_ROWS(mul),
};

/* Dims innermost first; strides in elements. */
typedef struct plan {
  int rank;
  int64_t dims[DVM_MAX_RANK];
  int64_t sa[DVM_MAX_RANK], sb[DVM_MAX_RANK];
} plan;

/* The input dim aligned with output dim i (from the right); 1 where the
 * input has fewer dims. */
static int64_t dim_at(const dvm_tensor *t, int rank_out, int i) {
  int j = i - (rank_out - t->rank);
  return j >= 0 ? t->dims[j] : 1;
}

static void plan_make(plan *p, const dvm_tensor *a, const dvm_tensor *b, const dvm_tensor *o) {
  int64_t ca = 1, cb = 1; /* each input's contiguous stride at dim i */
  p->rank = 0;
  for (int i = o->rank - 1; i >= 0; i--) {
    int64_t d = o->dims[i], da = dim_at(a, o->rank, i), db = dim_at(b, o->rank, i);
    int64_t sa = da == 1 ? 0 : ca, sb = db == 1 ? 0 : cb;
    ca *= da;
    cb *= db;
    if (d == 1) continue;
    int r = p->rank;
    if (r > 0 && sa == p->sa[r - 1] * p->dims[r - 1] && sb == p->sb[r - 1] * p->dims[r - 1]) {
      p->dims[r - 1] *= d;
      continue;
    }
    p->dims[r] = d;
    p->sa[r] = sa;
    p->sb[r] = sb;
    p->rank++;
  }
  if (p->rank == 0) { /* a single element */
    p->rank = 1;
    p->dims[0] = 1;
    p->sa[0] = p->sb[0] = 0;
  }
}

/* Output elements [s, e): counters are set up once from s, then each row
 * is one call of the row loop. */
static void plan_walk(const plan *p, row_fn fn, size_t esz, const char *a, const char *b, char *o,
                      int64_t s, int64_t e) {
  int64_t n = p->dims[0], i0 = s % n, row = s / n;
  int64_t idx[DVM_MAX_RANK], oa = i0 * p->sa[0], ob = i0 * p->sb[0];
  for (int d = 1; d < p->rank; d++) {
    idx[d] = row % p->dims[d];
    row /= p->dims[d];
    oa += idx[d] * p->sa[d];
    ob += idx[d] * p->sb[d];
  }
  for (int64_t pos = s; pos < e;) {
    int64_t len = n - i0 < e - pos ? n - i0 : e - pos;
    fn(len, a + oa * (int64_t)esz, b + ob * (int64_t)esz, o + pos * (int64_t)esz);
    pos += len;
    oa -= i0 * p->sa[0];
    ob -= i0 * p->sb[0];
    i0 = 0;
    for (int d = 1; d < p->rank; d++) {
      oa += p->sa[d];
      ob += p->sb[d];
      if (++idx[d] < p->dims[d]) break;
      oa -= p->sa[d] * p->dims[d];
      ob -= p->sb[d] * p->dims[d];
      idx[d] = 0;
    }
  }
}

static dvm_status *check(const dvm_kernel_args *a, int op) {
  const char *name = op_names[op];
  dvm_status *st = dvm_kargs_check(a, name, 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  if (x->dtype != y->dtype || x->dtype != o->dtype || !rows[op][x->dtype][ROW_VV]) {
    char got[64], want[128] = "";
    for (int dt = 0; dt < DVM_DTYPE_COUNT; dt++)
      if (rows[op][dt][ROW_VV])
        strcat(strcat(want, want[0] ? ", " : ""), dvm_dtype_name((dvm_dtype)dt));
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want one of %s, the same for all",
                          name, dvm_kargs_dtypes(got, sizeof got, a), want);
  }
  int rank;
  int64_t dims[DVM_MAX_RANK];
  st = dvm_broadcast_shape(x->rank, x->dims, y->rank, y->dims, &rank, dims);
  if (st) return dvm_status_annotate(st, "%s", name);
  if (o->rank != rank || memcmp(o->dims, dims, sizeof(int64_t) * (size_t)rank) != 0) {
    char so[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE],
        sy[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s != %s, the broadcast of %s and %s",
                          name, dvm_shape_str(so, o->rank, o->dims), dvm_shape_str(sb, rank, dims),
                          dvm_shape_str(sx, x->rank, x->dims), dvm_shape_str(sy, y->rank, y->dims));
  }
  return NULL;
}

static dvm_status *binary(const dvm_kernel_args *a, int op) {
  dvm_status *st = check(a, op);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  int64_t total = dvm_tensor_numel(o);
  if (total == 0) return NULL;
  plan p;
  plan_make(&p, x, y, o);
  /* with both inner strides 0 the plan is one element, which any kind does */
  int kind = p.sa[0] && !p.sb[0] ? ROW_VS : !p.sa[0] && p.sb[0] ? ROW_SV : ROW_VV;
  row_fn fn = rows[op][x->dtype][kind];
  size_t esz = dvm_dtype_size((dvm_dtype)o->dtype);
  const char *pa = dvm_tensor_ptr(x), *pb = dvm_tensor_ptr(y);
  char *po = dvm_tensor_ptr(o);
  int64_t nt = total / MIN_CHUNK, threads = dvm_kargs_threads(a);
  if (nt > threads) nt = threads;
  if (nt <= 1) {
    plan_walk(&p, fn, esz, pa, pb, po, 0, total);
    return NULL;
  }
#pragma omp parallel num_threads((int)nt)
  {
    /* chunks of whole 64-element blocks, so threads never share a cache line */
    int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    int64_t chunk = ((total + n - 1) / n + 63) & ~(int64_t)63;
    int64_t s = t * chunk < total ? t * chunk : total, e = s + chunk < total ? s + chunk : total;
    plan_walk(&p, fn, esz, pa, pb, po, s, e);
  }
  return NULL;
}

static dvm_status *add(const dvm_kernel_args *a) { return binary(a, OP_ADD); }
static dvm_status *mul(const dvm_kernel_args *a) { return binary(a, OP_MUL); }

const dvm_kernel_def dvm_cpu_binary_kernels[] = {
    {"add", DVM_DEVICE_CPU, add, "broadcast"},
    {"mul", DVM_DEVICE_CPU, mul, "broadcast"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
