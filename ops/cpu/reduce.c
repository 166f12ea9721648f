/* Reductions: reduce_*, argmax/argmin, cumsum and topk.
 *
 *   reduce_sum, reduce_prod, reduce_max, reduce_min
 *     (in: data; attrs: axes:shape, keepdims:int, noop_with_empty_axes:int) -> reduced
 *     f32, f64, i32, i64, u32, u64, and f16/bf16 computed in f32; reduce_max and
 *     reduce_min also take bool. Output dtype = data's.
 *   reduce_mean (same) -> reduced; f32, f64, f16, bf16.
 *   reduce_l1, reduce_l2, reduce_sum_square, reduce_log_sum,
 *     reduce_log_sum_exp (same) -> reduced; f32, f64, f16, bf16: the sum of
 *     |x|, sqrt of the sum of x^2, the sum of x^2, log of the sum, and
 *     log of the sum of exp (computed as m + log sum exp(x - m), m the
 *     max, so large x do not overflow). Empty: 0, 0, 0, -inf, -inf.
 *     ONNX ReduceX with axes as an attribute (the compiler turns the axes
 *     input of opset 13/18 into one): axes in [-rank, rank), no repeats;
 *     empty axes reduce every axis, or none (a copy) when
 *     noop_with_empty_axes = 1. Shape function "reduce". An empty reduction
 *     gives 0 (sum), 1 (prod), 0 (mean: undefined in ONNX, 0 in ONNX
 *     Runtime), and for max/min the lowest/highest value of the dtype
 *     (-inf/+inf for floats), as ONNX opset 18 says.
 *     Integer sums and products wrap.
 *   argmax, argmin (in: data; attrs: axis:int, keepdims:int, select_last_index:int)
 *     -> indices i64; data f32, f64, f16, bf16, i32, i64, u32, u64. The first (or,
 *     with select_last_index, the last) extreme; a NaN counts as the
 *     largest value for argmax and the smallest for argmin, as in NumPy.
 *     An empty axis is an error unless the output is empty too (data
 *     [0, 0] gives an empty i64 array, as in ONNX Runtime). Shape function
 *     "argreduce".
 *   cumsum (in: x; attrs: axis:int, exclusive:int, reverse:int) -> y
 *     ONNX CumSum with the axis as an attribute, not a 0-d tensor input (the
 *     compiler reads the constant). f32, f64, i32, i64, u32, u64, f16/bf16 summed in
 *     f32. y has x's shape and dtype (shape function "same").
 *   nll_loss (in: input, target[, weight]; attrs: reduction:int (0 none,
 *     1 sum, 2 mean), ignore_index:int) -> loss: ONNX
 *     NegativeLogLikelihoodLoss; input [N, C, d...] and weight [C] f32,
 *     f64, f16 or bf16, target [N, d...] i64 or i32 in [0, C) unless
 *     ignored; loss [N, d...] (none) or [] in input's dtype. Mean over
 *     nothing (every target ignored) is NaN. Shape function "nll_loss".
 *   hardmax (in: x; attrs: axis:int) -> y: ONNX Hardmax, 1 at the first
 *     maximum along the axis, 0 elsewhere; f32, f64, f16, bf16.
 *   lp_normalization (in: x; attrs: axis:int, p:int) -> y: ONNX
 *     LpNormalization, x over its L1 or L2 norm along the axis; f32, f64,
 *     f16, bf16 (computed in double).
 *   cumprod (the same) -> y: ONNX CumProd, running products, as cumsum
 *     (integers wrap).
 *   topk (in: x, k; attrs: axis:int, largest:int, sorted:int) -> values, indices
 *     ONNX TopK: k is a host i64 (or i32) tensor of one element, 0 <= k <=
 *     the axis' dim; values have x's dtype (f32, f64, f16, bf16, i32, i64),
 *     indices are i64. Equal values keep the lower index first; NaN ranks
 *     above every number. The output is always sorted (sorted = 0 allows
 *     any order, so sorted is right). Shape function "topk", data-dependent.
 *
 * Every kernel views its data as [O, R, I]: R the axis (or merged run of
 * reduced axes), O the dims before, I those after. Rows of I elements are
 * the vectorized unit; a reduction over several separate runs of axes is
 * done one run per pass. */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/reduce.h"
#include "shapefuncs/shape.h"

/* Below this many elements a fork costs more than it saves. */
#define MIN_PAR ((int64_t)1 << 15)
/* Columns per task when rows are reduced column-wise. */
#define COL_CHUNK 1024
/* Independent accumulators of a row reduction: enough vectors in flight to
 * hide the add latency. */
#define LANES 16

static dvm_status *oom(const char *op) {
  return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
}

static int threads_for(const dvm_kernel_args *a, int64_t work) {
  int t = dvm_kargs_threads(a);
  return work >= MIN_PAR ? t : 1;
}

/* Fails unless t has exactly the shape (rank, dims); names `what`. */
static dvm_status *check_shape(const char *op, const char *what, const dvm_tensor *t, int rank,
                               const int64_t *dims) {
  if (t->rank == rank && memcmp(t->dims, dims, sizeof(int64_t) * (size_t)rank) == 0) return NULL;
  char st[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s != %s, the shape it must have", op, what,
                        dvm_shape_str(st, t->rank, t->dims), dvm_shape_str(sw, rank, dims));
}

/* dims as [O, R, I] around axis. */
static void split3(const dvm_tensor *t, int axis, int64_t *o, int64_t *r, int64_t *i) {
  *o = *i = 1;
  for (int d = 0; d < axis; d++) *o *= t->dims[d];
  for (int d = axis + 1; d < t->rank; d++) *i *= t->dims[d];
  *r = t->dims[axis];
}

/* The whole of t as f32: its own memory when it is f32, else a converted
 * copy in *owned (free it). */
static dvm_status *as_f32(const char *op, const dvm_tensor *t, const float **out, float **owned) {
  int64_t n = dvm_tensor_numel(t);
  *owned = NULL;
  if (t->dtype == DVM_F32) {
    *out = dvm_tensor_ptr(t);
    return NULL;
  }
  if (!(*owned = malloc(sizeof(float) * (size_t)(n ? n : 1)))) return oom(op);
  dvm_vec_load(t->dtype, dvm_tensor_ptr(t), *owned, n);
  *out = *owned;
  return NULL;
}

/* ---- reduce_* ------------------------------------------------------------ */

/* The ops from R_L1 on are sums of a mapped input (|x|, x^2, exp(x - max)),
 * some mapped after (sqrt, log, + max): see mapped(). */
enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_SUM_SQUARE, R_LOG_SUM, R_LOG_SUM_EXP, R_OPS };
static const char *const reduce_names[R_OPS] = {
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1",
    "reduce_l2", "reduce_sum_square", "reduce_log_sum", "reduce_log_sum_exp"};

/* One pass over [no, nr, ni]: out[o, i] = op over r of in[o, r, i]; a
 * task is one o and a chunk of COL_CHUNK columns. */
typedef struct pass_job {
  const void *in;
  void *out;
  int64_t nr, ni;
} pass_job;

/* Integers add and multiply in the unsigned type U, where overflow wraps
 * (U must not promote to int). Max and min propagate NaN, as NumPy does,
 * through selects that vectorize (elementwise_math.h); bools are u8. */
#define ADD(U, a, b) ((U)(a) + (U)(b))
#define MUL(U, a, b) ((U)(a) * (U)(b))
#define MAX(U, a, b) DVM_EW_MAX(a, b)
#define MIN(U, a, b) DVM_EW_MIN(a, b)
#define BMAX(U, a, b) ((a) > (b) ? (a) : (b))
#define BMIN(U, a, b) ((a) < (b) ? (a) : (b))

#define PASS(name, T, U, OP, INIT)                                                         \
  DVM_VEC static void name(const void *job, int64_t t0, int64_t t1) {                      \
    const pass_job *j = job;                                                               \
    const T *in = j->in;                                                                   \
    T *out = j->out;                                                                       \
    int64_t nr = j->nr, ni = j->ni;                                                        \
    int64_t chunks = (ni + COL_CHUNK - 1) / COL_CHUNK;                                     \
    for (int64_t t = t0; t < t1; t++) {                                                    \
      int64_t o = t / chunks, i0 = t % chunks * COL_CHUNK;                                 \
      int64_t n = ni - i0 < COL_CHUNK ? ni - i0 : COL_CHUNK;                               \
      const T *x = in + o * nr * ni + i0;                                                  \
      T *y = out + o * ni + i0;                                                            \
      if (ni == 1) { /* a row: LANES running results, then combined */                     \
        T acc[LANES];                                                                      \
        for (int l = 0; l < LANES; l++) acc[l] = INIT;                                     \
        int64_t r = 0;                                                                     \
        for (; r + LANES <= nr; r += LANES)                                                \
          _Pragma("omp simd") for (int l = 0; l < LANES; l++) acc[l] =                     \
              (T)OP(U, acc[l], x[r + l]);                                                  \
        for (; r < nr; r++) acc[0] = (T)OP(U, acc[0], x[r]);                               \
        for (int l = 1; l < LANES; l++) acc[0] = (T)OP(U, acc[0], acc[l]);                 \
        y[0] = acc[0];                                                                     \
        continue;                                                                          \
      }                                                                                    \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = INIT;                     \
      for (int64_t r = 0; r < nr; r++, x += ni)                                            \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (T)OP(U, y[i], x[i]);   \
    }                                                                                      \
  }

#define PASSES(T, U, S, LO, HI)             \
  PASS(sum_##S, T, U, ADD, (T)0)            \
  PASS(prod_##S, T, U, MUL, (T)1)           \
  PASS(max_##S, T, U, MAX, LO)              \
  PASS(min_##S, T, U, MIN, HI)

PASSES(float, float, f32, -INFINITY, INFINITY)
PASSES(double, double, f64, -INFINITY, INFINITY)
PASSES(int32_t, uint32_t, i32, INT32_MIN, INT32_MAX)
PASSES(int64_t, uint64_t, i64, INT64_MIN, INT64_MAX)
PASSES(uint32_t, uint32_t, u32, 0, UINT32_MAX)
PASSES(uint64_t, uint64_t, u64, 0, UINT64_MAX)
PASS(max_u8, uint8_t, uint8_t, BMAX, 0)
PASS(min_u8, uint8_t, uint8_t, BMIN, 1)

/* Passes by op and by the dtype they compute in; the dtypes an op takes
 * are those with an entry, plus f16 and bf16 wherever f32 has one. Mean is
 * a sum, then scaled. */
static const dvm_vec_range_fn passes[R_OPS][DVM_DTYPE_COUNT] = {
    [R_SUM] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64, [DVM_I32] = sum_i32, [DVM_I64] = sum_i64,
               [DVM_U32] = sum_u32, [DVM_U64] = sum_u64},
    [R_MEAN] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64},
    [R_MAX] = {[DVM_F32] = max_f32, [DVM_F64] = max_f64, [DVM_I32] = max_i32, [DVM_I64] = max_i64,
               [DVM_BOOL] = max_u8, [DVM_U32] = max_u32, [DVM_U64] = max_u64},
    [R_MIN] = {[DVM_F32] = min_f32, [DVM_F64] = min_f64, [DVM_I32] = min_i32, [DVM_I64] = min_i64,
               [DVM_BOOL] = min_u8, [DVM_U32] = min_u32, [DVM_U64] = min_u64},
    [R_PROD] = {[DVM_F32] = prod_f32, [DVM_F64] = prod_f64, [DVM_I32] = prod_i32,
                [DVM_I64] = prod_i64, [DVM_U32] = prod_u32, [DVM_U64] = prod_u64},
    [R_L1] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64},
    [R_L2] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64},
    [R_SUM_SQUARE] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64},
    [R_LOG_SUM] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64},
    [R_LOG_SUM_EXP] = {[DVM_F32] = sum_f32, [DVM_F64] = sum_f64},
};

static int compute_dtype(int dt) { return dt == DVM_F16 || dt == DVM_BF16 ? DVM_F32 : dt; }

/* The value of an empty reduction in compute dtype cdt, written to *out. */
static void empty_value(int op, int cdt, void *out) {
  /* a pass over no rows writes its INIT */
  if (op == R_MEAN) { /* the spec says undefined; ONNX Runtime gives 0 */
    if (cdt == DVM_F32) *(float *)out = 0;
    else *(double *)out = 0;
    return;
  }
  pass_job j = {out, out, 0, 1};
  passes[op][cdt](&j, 0, 1);
}

static void run_pass(const dvm_kernel_args *a, dvm_vec_range_fn fn, const void *in, void *out,
                     int64_t no, int64_t nr, int64_t ni) {
  pass_job j = {in, out, nr, ni};
  dvm_vec_parallel(threads_for(a, no * nr * ni), no * ((ni + COL_CHUNK - 1) / COL_CHUNK), fn, &j);
}

static void scale(int cdt, void *p, int64_t n, double s) {
  if (cdt == DVM_F64) {
    double *d = p;
    for (int64_t i = 0; i < n; i++) d[i] *= s;
  } else {
    float *f = p, fs = (float)s;
    for (int64_t i = 0; i < n; i++) f[i] *= fs;
  }
}

static dvm_status *reduce_check(const dvm_kernel_args *a, int op, unsigned *mask) {
  const char *name = reduce_names[op];
  dvm_status *st = dvm_kargs_check(a, name, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int cdt = compute_dtype(x->dtype);
  if (x->dtype != y->dtype || !passes[op][cdt]) {
    char got[64], want[128] = "";
    for (int dt = 0; dt < DVM_DTYPE_COUNT; dt++)
      if (passes[op][compute_dtype(dt)])
        strcat(strcat(want, want[0] ? ", " : ""), dvm_dtype_name((dvm_dtype)dt));
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want one of %s, the same for both",
                          name, dvm_kargs_dtypes(got, sizeof got, a), want);
  }
  int keepdims, r;
  int64_t dims[DVM_MAX_RANK];
  if ((st = dvm_reduce_attrs(name, x->rank, a->attrs, a->nattrs, mask, &keepdims))) return st;
  dvm_reduce_dims(x->rank, x->dims, *mask, keepdims, &r, dims);
  return check_shape(name, "output", y, r, dims);
}

/* Reduces `in` (compute dtype cdt, dims given) over the axes in mask into
 * `out`, one pass per run of adjacent reduced axes, innermost first. */
static dvm_status *reduce_passes(const dvm_kernel_args *a, int op, int cdt, int rank,
                                 const int64_t *dims_in, unsigned mask, const void *in,
                                 void *out) {
  /* drop dims of 1, merge neighbours reduced alike */
  int64_t g[DVM_MAX_RANK];
  int red[DVM_MAX_RANK], n = 0;
  for (int d = 0; d < rank; d++) {
    if (dims_in[d] == 1) continue;
    int rd = (mask >> d) & 1;
    if (n > 0 && red[n - 1] == rd) {
      g[n - 1] *= dims_in[d];
    } else {
      g[n] = dims_in[d];
      red[n++] = rd;
    }
  }
  size_t esz = dvm_dtype_size((dvm_dtype)cdt);
  int64_t total = 1;
  for (int k = 0; k < n; k++) total *= g[k];
  int last = -1; /* the outermost reduced run */
  for (int k = 0; k < n && last < 0; k++)
    if (red[k]) last = k;
  if (last < 0) { /* nothing to reduce: a copy */
    memcpy(out, in, esz * (size_t)total);
    return NULL;
  }
  const void *src = in;
  void *tmp = NULL;
  for (int k = n - 1; k >= 0; k--) {
    if (!red[k]) continue;
    int64_t no = 1, ni = 1;
    for (int j = 0; j < k; j++) no *= g[j];
    for (int j = k + 1; j < n; j++) ni *= g[j];
    void *dst = out;
    if (k != last && !(dst = malloc(esz * (size_t)(no * ni)))) {
      free(tmp);
      return oom(reduce_names[op]);
    }
    run_pass(a, passes[op][cdt], src, dst, no, g[k], ni);
    free(tmp);
    tmp = dst == out ? NULL : dst;
    src = dst;
    g[k] = 1;
  }
  return NULL;
}

/* For each element of an input of dims (rank, dims), the index of its
 * reduced output (the reduced axes in mask dropped), in row-major order. */
static void out_index(int rank, const int64_t *dims, unsigned mask, int64_t *oi) {
  int64_t stride[DVM_MAX_RANK], idx[DVM_MAX_RANK] = {0}, s = 1, n = 1, cur = 0;
  for (int d = rank - 1; d >= 0; d--) {
    stride[d] = mask & (1u << d) ? 0 : s;
    if (!(mask & (1u << d))) s *= dims[d];
    n *= dims[d];
  }
  for (int64_t i = 0; i < n; i++) {
    oi[i] = cur;
    for (int d = rank - 1; d >= 0; d--) { /* the next multi-index */
      cur += stride[d];
      if (++idx[d] < dims[d]) break;
      cur -= stride[d] * dims[d];
      idx[d] = 0;
    }
  }
}

/* The sums of a mapped input, on a copy of x in compute dtype T: L1 sums
 * |x|, L2 and SumSquare x^2 (L2 then takes the sqrt), LogSum x (then the
 * log), LogSumExp exp(x - m) with m the reduced max (then log + m; m is
 * taken as 0 where it is not finite, so all -inf gives -inf). */
#define MAPPED(name, T, SUFFIX)                                                           \
  static dvm_status *name(const dvm_kernel_args *a, int op, unsigned mask, T *x, T *out) { \
    const dvm_tensor *t = a->in[0];                                                      \
    int64_t n = dvm_tensor_numel(t), nout = dvm_tensor_numel(a->out[0]);                 \
    T *m = NULL;                                                                         \
    int64_t *oi = NULL;                                                                  \
    dvm_status *st = NULL;                                                               \
    if (op == R_LOG_SUM_EXP) {                                                           \
      if (!(m = malloc(sizeof(T) * (size_t)nout)) || !(oi = malloc(sizeof(int64_t) * (size_t)(n ? n : 1)))) { \
        free(m);                                                                         \
        return oom(reduce_names[op]);                                                    \
      }                                                                                  \
      if (n) st = reduce_passes(a, R_MAX, SUFFIX, t->rank, t->dims, mask, x, m);          \
      else for (int64_t i = 0; i < nout; i++) m[i] = 0;                                  \
      for (int64_t i = 0; i < nout; i++) m[i] = isfinite(m[i]) ? m[i] : 0;               \
      out_index(t->rank, t->dims, mask, oi);                                             \
      for (int64_t i = 0; i < n; i++) x[i] = exp(x[i] - m[oi[i]]);                        \
    } else if (op == R_L1) {                                                             \
      for (int64_t i = 0; i < n; i++) x[i] = fabs(x[i]);                                  \
    } else if (op != R_LOG_SUM) {                                                        \
      for (int64_t i = 0; i < n; i++) x[i] = x[i] * x[i];                                 \
    }                                                                                    \
    if (!st && n) st = reduce_passes(a, R_SUM, SUFFIX, t->rank, t->dims, mask, x, out);   \
    else if (!st) for (int64_t i = 0; i < nout; i++) out[i] = 0;                         \
    for (int64_t i = 0; !st && i < nout; i++)                                            \
      out[i] = op == R_L2 ? sqrt(out[i]) : op == R_LOG_SUM ? log(out[i])                 \
             : op == R_LOG_SUM_EXP ? log(out[i]) + m[i] : out[i];                        \
    free(m);                                                                             \
    free(oi);                                                                            \
    return st;                                                                           \
  }
MAPPED(mapped_f32, float, DVM_F32)
MAPPED(mapped_f64, double, DVM_F64)

/* The mapped ops: x copied to the compute dtype, mapped, reduced. */
static dvm_status *mapped(const dvm_kernel_args *a, int op, unsigned mask) {
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int64_t n = dvm_tensor_numel(x), nout = dvm_tensor_numel(y);
  if (x->dtype == DVM_F64) {
    double *c = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!c) return oom(reduce_names[op]);
    if (n) memcpy(c, dvm_tensor_ptr(x), sizeof(double) * (size_t)n);
    dvm_status *st = mapped_f64(a, op, mask, c, dvm_tensor_ptr(y));
    free(c);
    return st;
  }
  float *c = malloc(sizeof(float) * (size_t)(n ? n : 1)), *out = c ? malloc(sizeof(float) * (size_t)nout) : NULL;
  if (!out) {
    free(c);
    return oom(reduce_names[op]);
  }
  dvm_vec_load(x->dtype, dvm_tensor_ptr(x), c, n);
  dvm_status *st = mapped_f32(a, op, mask, c, out);
  if (!st) dvm_vec_store(y->dtype, out, dvm_tensor_ptr(y), nout);
  free(c);
  free(out);
  return st;
}

static dvm_status *reduce(const dvm_kernel_args *a, int op) {
  unsigned mask;
  dvm_status *st = reduce_check(a, op, &mask);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int64_t nout = dvm_tensor_numel(y), nin = dvm_tensor_numel(x), count = 1;
  if (nout == 0) return NULL;
  if (op >= R_L1) return mapped(a, op, mask);
  for (int d = 0; d < x->rank; d++)
    if (mask & (1u << d)) count *= x->dims[d];
  int cdt = compute_dtype(x->dtype);
  size_t esz = dvm_dtype_size((dvm_dtype)cdt);
  const void *in = dvm_tensor_ptr(x);
  float *in_owned = NULL;
  void *out = dvm_tensor_ptr(y), *out_owned = NULL;
  if (cdt != x->dtype) {
    const float *f = NULL;
    if ((st = as_f32(reduce_names[op], x, &f, &in_owned))) return st;
    in = f;
    if (!(out = out_owned = malloc(esz * (size_t)nout))) {
      free(in_owned);
      return oom(reduce_names[op]);
    }
  }
  if (nin == 0) { /* an empty reduction (count is 0): every output is its value */
    empty_value(op, cdt, out);
    for (int64_t i = 1; i < nout; i++) memcpy((char *)out + i * esz, out, esz);
  } else {
    st = reduce_passes(a, op, cdt, x->rank, x->dims, mask, in, out);
    if (!st && op == R_MEAN) scale(cdt, out, nout, 1.0 / (double)count);
  }
  if (!st && out_owned) dvm_vec_store(y->dtype, out_owned, dvm_tensor_ptr(y), nout);
  free(in_owned);
  free(out_owned);
  return st;
}

#define REDUCE_KERNEL(name, OP) \
  static dvm_status *name(const dvm_kernel_args *a) { return reduce(a, OP); }
REDUCE_KERNEL(reduce_sum, R_SUM)
REDUCE_KERNEL(reduce_mean, R_MEAN)
REDUCE_KERNEL(reduce_max, R_MAX)
REDUCE_KERNEL(reduce_min, R_MIN)
REDUCE_KERNEL(reduce_prod, R_PROD)
REDUCE_KERNEL(reduce_l1, R_L1)
REDUCE_KERNEL(reduce_l2, R_L2)
REDUCE_KERNEL(reduce_sum_square, R_SUM_SQUARE)
REDUCE_KERNEL(reduce_log_sum, R_LOG_SUM)
REDUCE_KERNEL(reduce_log_sum_exp, R_LOG_SUM_EXP)

/* ---- argmax, argmin ------------------------------------------------------ */

/* The values of the dtypes argmax, cumsum and topk read, as T. */
#define LOAD_f32(p, i) (((const float *)(p))[i])
#define LOAD_f64(p, i) (((const double *)(p))[i])
#define LOAD_i32(p, i) (((const int32_t *)(p))[i])
#define LOAD_i64(p, i) (((const int64_t *)(p))[i])
#define LOAD_u32(p, i) (((const uint32_t *)(p))[i])
#define LOAD_u64(p, i) (((const uint64_t *)(p))[i])
#define LOAD_f16(p, i) dvm_f16_to_f32(((const uint16_t *)(p))[i])
#define LOAD_bf16(p, i) dvm_bf16_to_f32(((const uint16_t *)(p))[i])

/* Over [no, nr, ni], a task per lane (o, i): the index along r of the
 * first (or last) value that `better` ranks above the rest; a NaN beats
 * every number (and the first NaN the later ones), so best is NaN once
 * seen. */
typedef struct arg_job {
  const void *x;
  int64_t *out;
  int64_t nr, ni;
  int last;
} arg_job;

#define GT(a, b) ((a) > (b) || ((a) != (a) && (b) == (b)))
#define LT(a, b) ((a) < (b) || ((a) != (a) && (b) == (b)))

#define ARG(name, T, LOAD, BETTER)                                                          \
  static void name(const void *job, int64_t t0, int64_t t1) {                               \
    const arg_job *j = job;                                                                 \
    const void *x = j->x;                                                                   \
    int64_t nr = j->nr, ni = j->ni;                                                         \
    for (int64_t t = t0; t < t1; t++) {                                                     \
      int64_t o = t / ni, i = t % ni, base = o * nr * ni + i, best_r = 0;                   \
      T best = LOAD(x, base);                                                               \
      for (int64_t r = 1; r < nr; r++) {                                                    \
        T v = LOAD(x, base + r * ni);                                                       \
        if (BETTER(v, best) || (j->last && v == best)) {                                    \
          best = v;                                                                         \
          best_r = r;                                                                       \
        }                                                                                   \
      }                                                                                     \
      j->out[t] = best_r;                                                                   \
    }                                                                                       \
  }

#define ARGS(S, T)                       \
  ARG(argmax_##S, T, LOAD_##S, GT)       \
  ARG(argmin_##S, T, LOAD_##S, LT)

ARGS(f32, float)
ARGS(f64, double)
ARGS(f16, float)
ARGS(bf16, float)
ARGS(i32, int32_t)
ARGS(i64, int64_t)
ARGS(u32, uint32_t)
ARGS(u64, uint64_t)

#define ARG_ROW(S) {argmax_##S, argmin_##S}
static const dvm_vec_range_fn args_by_dtype[DVM_DTYPE_COUNT][2] = {
    [DVM_F32] = ARG_ROW(f32), [DVM_F64] = ARG_ROW(f64), [DVM_F16] = ARG_ROW(f16),
    [DVM_BF16] = ARG_ROW(bf16), [DVM_I32] = ARG_ROW(i32), [DVM_I64] = ARG_ROW(i64),
    [DVM_U32] = ARG_ROW(u32), [DVM_U64] = ARG_ROW(u64),
};

static dvm_status *argreduce(const dvm_kernel_args *a, int is_min) {
  const char *name = is_min ? "argmin" : "argmax";
  dvm_status *st = dvm_kargs_check(a, name, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (!args_by_dtype[x->dtype][0] || y->dtype != DVM_I64) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: dtypes %s: want f32, f64, f16, bf16, i32 or i64 -> i64", name,
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  int axis, keepdims, last, r;
  int64_t dims[DVM_MAX_RANK], no, nr, ni;
  if ((st = dvm_argreduce_attrs(name, x->rank, x->dims, a->attrs, a->nattrs, &axis, &keepdims,
                                &last)))
    return st;
  dvm_reduce_dims(x->rank, x->dims, 1u << axis, keepdims, &r, dims);
  if ((st = check_shape(name, "output", y, r, dims))) return st;
  split3(x, axis, &no, &nr, &ni);
  arg_job j = {dvm_tensor_ptr(x), dvm_tensor_ptr(y), nr, ni, last};
  dvm_vec_parallel(threads_for(a, no * nr * ni), no * ni, args_by_dtype[x->dtype][is_min], &j);
  return NULL;
}

static dvm_status *argmax(const dvm_kernel_args *a) { return argreduce(a, 0); }
static dvm_status *argmin(const dvm_kernel_args *a) { return argreduce(a, 1); }

/* ---- cumsum -------------------------------------------------------------- */

/* Over [no, nr, ni], a task per outer index o: running sums along r,
 * each step a row of ni. */
typedef struct cumsum_job {
  const void *x;
  void *y;
  int64_t nr, ni;
  int exclusive, reverse;
} cumsum_job;

#define CUMSUM(name, T, U, OP, INIT)                                                        \
  DVM_VEC static void name(const void *job, int64_t o0, int64_t o1) {                      \
    const cumsum_job *j = job;                                                              \
    int64_t nr = j->nr, ni = j->ni, step = j->reverse ? -ni : ni, exclusive = j->exclusive; \
    for (int64_t o = o0; o < o1; o++) {                                                     \
      int64_t first = o * nr * ni + (j->reverse ? (nr - 1) * ni : 0);                       \
      const T *xs = (const T *)j->x + first;                                                \
      T *ys = (T *)j->y + first;                                                            \
      if (exclusive)                                                                        \
        _Pragma("omp simd") for (int64_t i = 0; i < ni; i++) ys[i] = INIT;                  \
      else                                                                                  \
        _Pragma("omp simd") for (int64_t i = 0; i < ni; i++) ys[i] = xs[i];                 \
      /* y[r] = y[r-1] op x[r], or x[r-1] when exclusive */                                 \
      for (int64_t r = 1; r < nr; r++) {                                                    \
        T *yr = ys + r * step;                                                              \
        const T *prev = yr - step, *xr = xs + (r - exclusive) * step;                       \
        _Pragma("omp simd") for (int64_t i = 0; i < ni; i++) yr[i] = (T)OP(U, prev[i], xr[i]); \
      }                                                                                     \
    }                                                                                       \
  }

CUMSUM(cumsum_f32, float, float, ADD, 0)
CUMSUM(cumsum_f64, double, double, ADD, 0)
CUMSUM(cumsum_i32, int32_t, uint32_t, ADD, 0)
CUMSUM(cumsum_i64, int64_t, uint64_t, ADD, 0)
CUMSUM(cumprod_f32, float, float, MUL, 1)
CUMSUM(cumprod_f64, double, double, MUL, 1)
CUMSUM(cumprod_i32, int32_t, uint32_t, MUL, 1)
CUMSUM(cumprod_i64, int64_t, uint64_t, MUL, 1)
CUMSUM(cumsum_u32, uint32_t, uint32_t, ADD, 0)
CUMSUM(cumsum_u64, uint64_t, uint64_t, ADD, 0)
CUMSUM(cumprod_u32, uint32_t, uint32_t, MUL, 1)
CUMSUM(cumprod_u64, uint64_t, uint64_t, MUL, 1)

/* by product (0 sum, 1 product) and compute dtype */
static const dvm_vec_range_fn cumsums[2][DVM_DTYPE_COUNT] = {
    {[DVM_F32] = cumsum_f32, [DVM_F64] = cumsum_f64, [DVM_I32] = cumsum_i32, [DVM_I64] = cumsum_i64,
     [DVM_U32] = cumsum_u32, [DVM_U64] = cumsum_u64},
    {[DVM_F32] = cumprod_f32, [DVM_F64] = cumprod_f64, [DVM_I32] = cumprod_i32, [DVM_I64] = cumprod_i64,
     [DVM_U32] = cumprod_u32, [DVM_U64] = cumprod_u64},
};

/* cumsum, or cumprod (prod set) */
static dvm_status *cumulative(const dvm_kernel_args *a, int prod) {
  const char *name = prod ? "cumprod" : "cumsum";
  dvm_status *st = dvm_kargs_check(a, name, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int cdt = compute_dtype(x->dtype);
  if (x->dtype != y->dtype || !cumsums[prod][cdt]) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: dtypes %s: want one of f32, f16, bf16, f64, i32, i64, u32, u64, the same for "
                          "both",
                          name, dvm_kargs_dtypes(got, sizeof got, a));
  }
  int axis, exclusive, reverse;
  if (!(st = dvm_attr_count(name, a->nattrs, 3, 3)) && x->rank == 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: x must have rank >= 1, got a scalar", name);
  if (!st) st = dvm_attr_axis(name, "axis", &a->attrs[0], x->rank, &axis);
  if (!st) st = dvm_attr_flag(name, "exclusive", &a->attrs[1], &exclusive);
  if (!st) st = dvm_attr_flag(name, "reverse", &a->attrs[2], &reverse);
  if (!st) st = check_shape(name, "output", y, x->rank, x->dims);
  if (st) return st;
  int64_t no, nr, ni, n = dvm_tensor_numel(x);
  if (n == 0) return NULL;
  split3(x, axis, &no, &nr, &ni);
  const void *in = dvm_tensor_ptr(x);
  float *owned = NULL;
  void *out = dvm_tensor_ptr(y);
  if (cdt != x->dtype) { /* in f32: x converted, then y */
    if (!(owned = malloc(sizeof(float) * 2 * (size_t)n))) return oom(name);
    dvm_vec_load(x->dtype, in, owned, n);
    in = owned;
    out = owned + n;
  }
  cumsum_job j = {in, out, nr, ni, exclusive, reverse};
  dvm_vec_parallel(threads_for(a, n), no, cumsums[prod][cdt], &j);
  if (owned) dvm_vec_store(y->dtype, out, dvm_tensor_ptr(y), n);
  free(owned);
  return NULL;
}

static dvm_status *cumsum(const dvm_kernel_args *a) { return cumulative(a, 0); }
static dvm_status *cumprod(const dvm_kernel_args *a) { return cumulative(a, 1); }

/* ---- topk ---------------------------------------------------------------- */

/* Candidates of one lane: key and index along the axis. Keys of float
 * dtypes are doubles (every f16, bf16, f32 and f64 exactly), of integer
 * dtypes int64. */
typedef struct cand_f {
  double key;
  int64_t idx;
} cand_f;
typedef struct cand_i {
  int64_t key;
  int64_t idx;
} cand_i;

/* a ranks before b: a larger (smaller) key, then the lower index. NaN is
 * the largest key: first for largest, last for smallest. A strict total
 * order whatever the keys, as sorting needs. */
static int ranks_f(const cand_f *a, const cand_f *b, int largest) {
  int an = a->key != a->key, bn = b->key != b->key;
  if (an || bn) return an && bn ? a->idx < b->idx : largest ? an : bn;
  if (a->key != b->key) return largest ? a->key > b->key : a->key < b->key;
  return a->idx < b->idx;
}

static int ranks_i(const cand_i *a, const cand_i *b, int largest) {
  if (a->key != b->key) return largest ? a->key > b->key : a->key < b->key;
  return a->idx < b->idx;
}

/* A binary heap of the k best so far, the worst at the root; then sorted
 * best first into out. */
#define TOPK_LANE(name, C, RANKS)                                                   \
  static void name##_sift(C *h, int64_t n, int64_t i, int largest) {               \
    for (;;) {                                                                     \
      int64_t l = 2 * i + 1, w = i;                                                \
      if (l < n && RANKS(&h[w], &h[l], largest)) w = l;                              \
      if (l + 1 < n && RANKS(&h[w], &h[l + 1], largest)) w = l + 1;                  \
      if (w == i) return;                                                          \
      C tmp = h[i];                                                                \
      h[i] = h[w];                                                                 \
      h[w] = tmp;                                                                  \
      i = w;                                                                       \
    }                                                                              \
  }                                                                                \
  static void name(C *h, int64_t k, int64_t nr, int largest) {                     \
    /* h holds the lane's nr candidates in index order; keep the k best */        \
    for (int64_t i = k / 2 - 1; i >= 0; i--) name##_sift(h, k, i, largest);        \
    for (int64_t r = k; r < nr; r++)                                               \
      if (RANKS(&h[r], &h[0], largest)) {                                            \
        h[0] = h[r];                                                               \
        name##_sift(h, k, 0, largest);                                             \
      }                                                                            \
    for (int64_t n = k - 1; n > 0; n--) { /* pop the worst to the back */          \
      C tmp = h[0];                                                                \
      h[0] = h[n];                                                                 \
      h[n] = tmp;                                                                  \
      name##_sift(h, n, 0, largest);                                               \
    }                                                                              \
  }

TOPK_LANE(topk_f, cand_f, ranks_f)
TOPK_LANE(topk_i, cand_i, ranks_i)

/* A task per lane (o, i). */
typedef struct topk_job {
  const dvm_tensor *x;
  void *values;
  int64_t *indices;
  int64_t no, nr, ni, k;
  int largest;
  atomic_int failed; /* a thread found no memory for its candidates */
} topk_job;

#define TOPK_GATHER(C, LOAD)                                                         \
  for (int64_t r = 0; r < j->nr; r++) {                                              \
    ((C *)h)[r].key = LOAD(px, base + r * j->ni);                                    \
    ((C *)h)[r].idx = r;                                                             \
  }

static void topk_lanes(const void *job, int64_t t0, int64_t t1) {
  topk_job *j = (topk_job *)job;
  int dt = j->x->dtype, is_float = dt != DVM_I32 && dt != DVM_I64;
  void *h = malloc(sizeof(cand_f) * (size_t)j->nr); /* cand_i is the same size */
  if (!h) {
    atomic_store(&j->failed, 1);
    return;
  }
  size_t esz = dvm_dtype_size((dvm_dtype)dt);
  const char *px = dvm_tensor_ptr(j->x);
  char *pv = j->values;
  for (int64_t t = t0; t < t1; t++) {
    int64_t o = t / j->ni, i = t % j->ni, base = o * j->nr * j->ni + i;
    int64_t obase = o * j->k * j->ni + i;
    switch (dt) {
    case DVM_F32: TOPK_GATHER(cand_f, LOAD_f32) break;
    case DVM_F64: TOPK_GATHER(cand_f, LOAD_f64) break;
    case DVM_F16: TOPK_GATHER(cand_f, LOAD_f16) break;
    case DVM_BF16: TOPK_GATHER(cand_f, LOAD_bf16) break;
    case DVM_I32: TOPK_GATHER(cand_i, LOAD_i32) break;
    default: TOPK_GATHER(cand_i, LOAD_i64) break;
    }
    if (is_float)
      topk_f(h, j->k, j->nr, j->largest);
    else
      topk_i(h, j->k, j->nr, j->largest);
    for (int64_t q = 0; q < j->k; q++) {
      int64_t idx = is_float ? ((cand_f *)h)[q].idx : ((cand_i *)h)[q].idx;
      int64_t at = obase + q * j->ni;
      j->indices[at] = idx;
      memcpy(pv + at * (int64_t)esz, px + (base + idx * j->ni) * (int64_t)esz, esz);
    }
  }
  free(h);
}

static dvm_status *topk(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "topk", 2, 2, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *vals = a->out[0], *idx = a->out[1];
  int dt = x->dtype;
  if ((!dvm_vec_is_float(dt) && dt != DVM_F64 && dt != DVM_I32 && dt != DVM_I64) ||
      vals->dtype != dt || idx->dtype != DVM_I64) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "topk: dtypes %s: want x f32, f64, f16, bf16, i32 or i64, k i64 -> x's "
                          "dtype, i64",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  int axis, largest, sorted;
  int64_t k;
  if (!(st = dvm_attr_count("topk", a->nattrs, 3, 3)) && x->rank == 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "topk: x must have rank >= 1, got a scalar");
  if (!st) st = dvm_attr_axis("topk", "axis", &a->attrs[0], x->rank, &axis);
  if (!st) st = dvm_attr_flag("topk", "largest", &a->attrs[1], &largest);
  if (!st) st = dvm_attr_flag("topk", "sorted", &a->attrs[2], &sorted);
  dvm_value kv = dvm_value_tensor(a->in[1]);
  if (!st) st = dvm_topk_k("topk", &kv, x->dims[axis], &k);
  if (st) return st;
  int64_t dims[DVM_MAX_RANK];
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  dims[axis] = k;
  if ((st = check_shape("topk", "values", vals, x->rank, dims)) ||
      (st = check_shape("topk", "indices", idx, x->rank, dims)))
    return st;
  topk_job j = {x, dvm_tensor_ptr(vals), dvm_tensor_ptr(idx), 0, 0, 0, k, largest, 0};
  split3(x, axis, &j.no, &j.nr, &j.ni);
  if (k == 0) return NULL;
  dvm_vec_parallel(threads_for(a, dvm_tensor_numel(x)), j.no * j.ni, topk_lanes, &j);
  return atomic_load(&j.failed) ? oom("topk") : NULL;
}

/* ---- nll_loss ------------------------------------------------------------ */

/* Element i of a float tensor of dtype dt, as a double. */
static double load_float(int dt, const void *p, int64_t i) {
  switch (dt) {
  case DVM_F32: return LOAD_f32(p, i);
  case DVM_F64: return LOAD_f64(p, i);
  case DVM_F16: return LOAD_f16(p, i);
  default: return LOAD_bf16(p, i);
  }
}

static void store_float(int dt, void *p, int64_t i, double v) {
  switch (dt) {
  case DVM_F32: ((float *)p)[i] = (float)v; break;
  case DVM_F64: ((double *)p)[i] = v; break;
  case DVM_F16: ((uint16_t *)p)[i] = dvm_f32_to_f16((float)v); break;
  default: ((uint16_t *)p)[i] = dvm_f32_to_bf16((float)v); break;
  }
}

/* ONNX NegativeLogLikelihoodLoss: loss[n, d] = -input[n, t, d] * weight[t]
 * with t = target[n, d] (0 where t is ignore_index); none keeps them, sum
 * adds them, mean divides the sum by the sum of the weights taken (the
 * count without weights). Computed in double. */
static dvm_status *nll_loss(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "nll_loss", a->nin, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nin < 2 || a->nin > 3 || a->nattrs != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "nll_loss: takes input, target[, weight] and 2 attributes");
  dvm_value v[5];
  int nv = 0, reduction, rank;
  for (int i = 0; i < a->nin; i++) v[nv++] = dvm_value_tensor(a->in[i]);
  v[nv++] = a->attrs[0];
  v[nv++] = a->attrs[1];
  int64_t ignore;
  const int64_t *dims;
  if ((st = dvm_nll_loss_check("nll_loss", v, nv, &reduction, &ignore, &rank, &dims))) return st;
  const dvm_tensor *x = a->in[0], *t = a->in[1], *w = a->nin > 2 ? a->in[2] : NULL, *y = a->out[0];
  int fl = x->dtype == DVM_F32 || x->dtype == DVM_F64 || x->dtype == DVM_F16 || x->dtype == DVM_BF16;
  if (!fl || y->dtype != x->dtype || (w && w->dtype != x->dtype) || (t->dtype != DVM_I64 && t->dtype != DVM_I32)) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "nll_loss: dtypes %s: want a float input, weight and output of one dtype, an "
                          "i32 or i64 target", dvm_kargs_dtypes(got, sizeof got, a));
  }
  if ((st = check_shape("nll_loss", "output", y, rank, dims))) return st;
  int64_t nb = x->dims[0], nc = x->dims[1], ni = dvm_tensor_numel(t) / (nb ? nb : 1);
  const void *px = dvm_tensor_ptr(x), *pt = dvm_tensor_ptr(t), *pw = w ? dvm_tensor_ptr(w) : NULL;
  void *py = dvm_tensor_ptr(y);
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < nb; n++)
    for (int64_t i = 0; i < ni; i++) {
      int64_t k = n * ni + i;
      int64_t c = t->dtype == DVM_I64 ? ((const int64_t *)pt)[k] : ((const int32_t *)pt)[k];
      double loss = 0, wc = 0;
      if (c != ignore) {
        if (c < 0 || c >= nc)
          return dvm_status_new(DVM_INVALID_ARGUMENT, "nll_loss: target element %lld is %lld, not in [0, %lld)",
                                (long long)k, (long long)c, (long long)nc);
        wc = pw ? load_float(x->dtype, pw, c) : 1;
        loss = -load_float(x->dtype, px, (n * nc + c) * ni + i) * wc;
      }
      if (reduction == 0) store_float(y->dtype, py, k, loss);
      sum += loss;
      wsum += wc;
    }
  if (reduction) store_float(y->dtype, py, 0, reduction == 2 ? sum / wsum : sum);
  return NULL;
}

/* ---- hardmax ------------------------------------------------------------- */

/* ONNX Hardmax (opset 13): 1 at the first maximum along the axis (argmax's
 * choice, so a NaN wins), 0 elsewhere. */
static dvm_status *hardmax(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "hardmax", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int fl = x->dtype == DVM_F32 || x->dtype == DVM_F64 || x->dtype == DVM_F16 || x->dtype == DVM_BF16;
  if (!fl || y->dtype != x->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "hardmax: dtypes %s: want f32, f64, f16 or bf16, the same for both",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  int axis;
  if (!(st = dvm_attr_count("hardmax", a->nattrs, 1, 1)) && x->rank == 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "hardmax: x must have rank >= 1, got a scalar");
  if (!st) st = dvm_attr_axis("hardmax", "axis", &a->attrs[0], x->rank, &axis);
  if (!st) st = check_shape("hardmax", "output", y, x->rank, x->dims);
  if (st) return st;
  int64_t no, nr, ni, n = dvm_tensor_numel(x);
  split3(x, axis, &no, &nr, &ni);
  void *py = dvm_tensor_ptr(y);
  if (n) memset(py, 0, dvm_tensor_nbytes(y));
  if (n == 0) return NULL;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(no * ni));
  if (!idx) return oom("hardmax");
  arg_job j = {dvm_tensor_ptr(x), idx, nr, ni, 0};
  dvm_vec_parallel(threads_for(a, n), no * ni, args_by_dtype[x->dtype][0], &j);
  for (int64_t t = 0; t < no * ni; t++) store_float(y->dtype, py, (t / ni * nr + idx[t]) * ni + t % ni, 1);
  free(idx);
  return NULL;
}

/* ---- lp_normalization ---------------------------------------------------- */

/* ONNX LpNormalization: x divided by its L1 (p = 1) or L2 (p = 2) norm
 * along the axis, in double; a zero norm (all zeros) gives 0, as ONNX
 * Runtime. */
static dvm_status *lp_normalization(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "lp_normalization", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int fl = x->dtype == DVM_F32 || x->dtype == DVM_F64 || x->dtype == DVM_F16 || x->dtype == DVM_BF16;
  if (!fl || y->dtype != x->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "lp_normalization: dtypes %s: want f32, f64, f16 or bf16, the same for both",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  int axis;
  int64_t p = 0;
  if (!(st = dvm_attr_count("lp_normalization", a->nattrs, 2, 2)) && x->rank == 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "lp_normalization: x must have rank >= 1, got a scalar");
  if (!st) st = dvm_attr_axis("lp_normalization", "axis", &a->attrs[0], x->rank, &axis);
  if (!st) st = dvm_attr_int("lp_normalization", "p", &a->attrs[1], &p);
  if (!st && p != 1 && p != 2) st = dvm_status_new(DVM_INVALID_ARGUMENT, "lp_normalization: p must be 1 or 2, got %lld", (long long)p);
  if (!st) st = check_shape("lp_normalization", "output", y, x->rank, x->dims);
  if (st) return st;
  int64_t no, nr, ni;
  split3(x, axis, &no, &nr, &ni);
  const void *px = dvm_tensor_ptr(x);
  void *py = dvm_tensor_ptr(y);
  for (int64_t t = 0; t < no * ni; t++) {
    int64_t base = t / ni * nr * ni + t % ni;
    double norm = 0;
    for (int64_t r = 0; r < nr; r++) {
      double v = load_float(x->dtype, px, base + r * ni);
      norm += p == 1 ? fabs(v) : v * v;
    }
    if (p == 2) norm = sqrt(norm);
    for (int64_t r = 0; r < nr; r++)
      store_float(y->dtype, py, base + r * ni, norm == 0 ? 0 : load_float(x->dtype, px, base + r * ni) / norm);
  }
  return NULL;
}

/* what reduce_sum, reduce_prod, argmax and cumsum take (their tables) */
#define NUMS (DVM_DTYPES_FLOAT | DVM_DTYPES_INT | DVM_DTYPE_BIT(DVM_U32) | DVM_DTYPE_BIT(DVM_U64))

const dvm_kernel_def dvm_cpu_reduce_kernels[] = {
    {"lp_normalization", DVM_DEVICE_CPU, lp_normalization, "same", .dtypes = DVM_DTYPES_FLOAT},
    {"hardmax", DVM_DEVICE_CPU, hardmax, "same", .dtypes = DVM_DTYPES_FLOAT},
    {"nll_loss", DVM_DEVICE_CPU, nll_loss, "nll_loss", .dtypes = DVM_DTYPES_FLOAT},
    {"reduce_sum", DVM_DEVICE_CPU, reduce_sum, "reduce", .dtypes = NUMS, .form = DVM_FORM_ROWS_SUM},
    {"reduce_mean", DVM_DEVICE_CPU, reduce_mean, "reduce", .dtypes = DVM_DTYPES_FLOAT,
     .form = DVM_FORM_ROWS_MEAN},
    {"reduce_max", DVM_DEVICE_CPU, reduce_max, "reduce", .dtypes = NUMS | DVM_DTYPE_BIT(DVM_BOOL),
     .form = DVM_FORM_ROWS_MAX},
    {"reduce_min", DVM_DEVICE_CPU, reduce_min, "reduce", .dtypes = NUMS | DVM_DTYPE_BIT(DVM_BOOL),
     .form = DVM_FORM_ROWS_MIN},
    {"reduce_prod", DVM_DEVICE_CPU, reduce_prod, "reduce", .dtypes = NUMS},
    {"reduce_l1", DVM_DEVICE_CPU, reduce_l1, "reduce", .dtypes = DVM_DTYPES_FLOAT},
    {"reduce_l2", DVM_DEVICE_CPU, reduce_l2, "reduce", .dtypes = DVM_DTYPES_FLOAT},
    {"reduce_sum_square", DVM_DEVICE_CPU, reduce_sum_square, "reduce", .dtypes = DVM_DTYPES_FLOAT},
    {"reduce_log_sum", DVM_DEVICE_CPU, reduce_log_sum, "reduce", .dtypes = DVM_DTYPES_FLOAT},
    {"reduce_log_sum_exp", DVM_DEVICE_CPU, reduce_log_sum_exp, "reduce", .dtypes = DVM_DTYPES_FLOAT},
    {"argmax", DVM_DEVICE_CPU, argmax, "argreduce", .dtypes = NUMS},
    {"argmin", DVM_DEVICE_CPU, argmin, "argreduce", .dtypes = NUMS},
    {"cumsum", DVM_DEVICE_CPU, cumsum, "same", .dtypes = NUMS},
    {"cumprod", DVM_DEVICE_CPU, cumprod, "same", .dtypes = NUMS},
    {"topk", DVM_DEVICE_CPU, topk, "topk", .dtypes = DVM_DTYPES_FLOAT | DVM_DTYPES_INT},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
