/* Normalizations: softmax, logsoftmax, layernorm, batchnorm (inference).
 *
 *   softmax, logsoftmax (in: x; attrs: axis:int) -> y
 *     ONNX opset 13: along one axis, in [-rank, rank). f32, and f16/bf16
 *     storage computed in f32, or f64 computed in f64 by a plain loop; y
 *     has x's shape and dtype (no shape function "same"). Numerically
 *     stable: exp(x - max) over the axis.
 *   layernorm (in: X, Scale[, B]; attrs: axis:int, epsilon:float)
 *       -> Y[, Mean[, InvStdDev]]
 *     ONNX LayerNormalization (opset 17): normalizes over the dims from axis
 *     on; Scale and B broadcast to those dims. X, Scale, B, Y: f32, f16 or
 *     bf16 each; Mean and InvStdDev (X's shape with those dims 1; stash_type
 *     1, computed in f32) f32, f16 or bf16. Shape function "layernorm".
 *   rmsnorm (in: X, Scale[, B]; attrs: axis:int, epsilon:float)
 *       -> Y[, InvStdDev]
 *     ONNX RMSNormalization (opset 23) and ONNX Runtime's
 *     SimplifiedLayerNormalization (with its inv_std_var output): layernorm
 *     with the mean taken as 0, x / sqrt(mean(x^2) + epsilon) * Scale
 *     (+ B); the same dtypes.
 *   batchnorm (in: X, scale, B, input_mean, input_var; attrs: epsilon:float) -> Y
 *     ONNX BatchNormalization in inference mode (training_mode = 0): X is
 *     [N, C, ...] (rank >= 2), the others [C]; all f32, f16 or bf16. Y has
 *     X's shape and dtype (shape function "same").
 *
 * All compute in f32 on rows: the reduced axis is made contiguous where it
 * is (softmax on the last axis, layernorm always), else worked on columns
 * of the [O, R, I] view. f16 and bf16 tensors are converted to f32 copies
 * first. y may be x's memory: every pass reads an element before it writes
 * it, and later passes read only y. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/norm.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/reduce.h"
#include "shapefuncs/shape.h"

/* Below this many elements a fork costs more than it saves. */
#define MIN_PAR ((int64_t)1 << 14)
/* Columns per task of a softmax along a non-last axis. */
#define COLS 64

static int threads_for(const dvm_kernel_args *a, int64_t work) {
  return work >= MIN_PAR ? dvm_kargs_threads(a) : 1;
}

static dvm_status *oom(const char *op) {
  return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
}

static dvm_status *check_dtype(const char *op, const char *what, const dvm_tensor *t) {
  if (dvm_vec_is_float(t->dtype)) return NULL;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s is %s: want f32, f16 or bf16", op, what,
                        dvm_dtype_name((dvm_dtype)t->dtype));
}

static dvm_status *check_same_shape(const char *op, const char *what, const dvm_tensor *t,
                                    const dvm_tensor *like, const char *like_name) {
  if (t->rank == like->rank &&
      memcmp(t->dims, like->dims, sizeof(int64_t) * (size_t)t->rank) == 0)
    return NULL;
  char st[DVM_SHAPE_STR_SIZE], sl[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s != %s %s", op, what,
                        dvm_shape_str(st, t->rank, t->dims), like_name,
                        dvm_shape_str(sl, like->rank, like->dims));
}

/* f32 views of an input and an output: the tensors' own memory when f32,
 * else scratch (the input converted) that `finish` stores back. */
typedef struct f32_io {
  const float *x;
  float *y;
  float *owned;
} f32_io;

static dvm_status *io_begin(const char *op, const dvm_tensor *x, const dvm_tensor *y,
                            f32_io *io) {
  int64_t n = dvm_tensor_numel(x);
  io->owned = NULL;
  io->x = dvm_tensor_ptr(x);
  io->y = dvm_tensor_ptr(y);
  if (x->dtype == DVM_F32 && y->dtype == DVM_F32) return NULL;
  /* one buffer, x converted, computed in place */
  if (!(io->owned = malloc(sizeof(float) * (size_t)(n ? n : 1)))) return oom(op);
  dvm_vec_load(x->dtype, dvm_tensor_ptr(x), io->owned, n);
  io->x = io->y = io->owned;
  return NULL;
}

static void io_finish(f32_io *io, const dvm_tensor *y) {
  if (io->owned) dvm_vec_store(y->dtype, io->owned, dvm_tensor_ptr(y), dvm_tensor_numel(y));
  free(io->owned);
}

/* ---- softmax, logsoftmax ------------------------------------------------- */

typedef struct softmax_job {
  const float *x;
  float *y;
  int64_t nr, ni;
  int log;
} softmax_job;

/* e^x for x <= 0 (softmax's shifted inputs), NaN kept: x = n ln2 + r as
 * in elementwise_math.h's expf, e^r by N. Juffa's degree-6 minimax
 * polynomial, without what x <= 0 does not need (the clamp from above,
 * rounding subnormal results once: they are far below any softmax's
 * resolution). r takes ln2 in one part, not two: 12% faster, and exact
 * enough with its product fused: within 1.4 ulp for x >= -20, 4.5 ulp
 * down to -87.3. Every step is an explicit FMA (DVM_EW_FMA), as in
 * elementwise_math.h: one instruction in the x86-64-v3 and v4 clones,
 * libm's exact fmaf in the baseline one, so every clone gives the same
 * bits (softmax is bound by this exp: FMA made it 1.4x faster, 0.44 ms
 * against 0.61 for 8x128x768 on one core). */
static inline float exp_le0(float x) {
  /* n >= -127, whose 2^n has exponent bits 0: the value 0 */
  x = dvm_ew_fsel(x < -88.0f, -88.0f, x);
  float t = DVM_EW_FMA(x, 1.44269504088896341f, 0x1.8p23f); /* rounds x / ln2 to an integer */
  uint32_t e = dvm_ew_f32_bits(t) - dvm_ew_f32_bits(0x1.8p23f) + 127u; /* n + 127 */
  float fn = t - 0x1.8p23f;
  float r = DVM_EW_FMA(-fn, 0.693147180559945f, x);
  float p = 1.37805939e-3f;
  p = DVM_EW_FMA(p, r, 8.37312452e-3f);
  p = DVM_EW_FMA(p, r, 4.16695364e-2f);
  p = DVM_EW_FMA(p, r, 1.66664720e-1f);
  p = DVM_EW_FMA(p, r, 4.99999851e-1f);
  p = DVM_EW_FMA(p, r, 1.0f);
  p = DVM_EW_FMA(p, r, 1.0f);
  return p * dvm_ew_bits_f32(e << 23); /* a NaN x: p is NaN, whatever e */
}

/* Rows up to this long reduce in GCC/Clang vectors of 8 floats, in
 * registers (row_max, row_sum): `omp simd reduction` keeps its partial
 * results in a per-lane array in memory and finishes each row with a scalar
 * loop over it, a third of a 128-element row's time. Longer rows keep the
 * omp simd reductions: their max loop (vmaxps, where a vector compare and
 * blend take two steps) and their exp pass with the sum fused in run
 * faster once the finishing cost is spread over the row (measured at 128
 * and 768 elements, docs/performance.md). */
#define SHORT_ROW 256

/* Vector locals only: a vector passed by value would change the baseline
 * build's ABI. */
typedef float vf8 __attribute__((vector_size(8 * sizeof(float))));
typedef int32_t vi8 __attribute__((vector_size(8 * sizeof(float))));

static inline float max2(float a, float b) { return a > b ? a : b; }

/* The max of x[0, n); a NaN among them may or may not be kept (the sum of
 * exps then makes the row NaN anyway). Short rows in two partial maxes, so
 * that the steps' latency overlaps. */
static inline float row_max(const float *x, int64_t n) {
  float r = -INFINITY;
  if (n > SHORT_ROW) {
#pragma omp simd reduction(max : r)
    for (int64_t i = 0; i < n; i++) r = max2(x[i], r);
    return r;
  }
  vf8 m0 = {r, r, r, r, r, r, r, r}, m1 = m0, v, w;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    memcpy(&v, x + i, sizeof v);
    memcpy(&w, x + i + 8, sizeof w);
    vi8 gv = v > m0, gw = w > m1;
    m0 = (vf8)(((vi8)v & gv) | ((vi8)m0 & ~gv));
    m1 = (vf8)(((vi8)w & gw) | ((vi8)m1 & ~gw));
  }
  vi8 g = m1 > m0;
  m0 = (vf8)(((vi8)m1 & g) | ((vi8)m0 & ~g));
  r = max2(max2(max2(m0[0], m0[1]), max2(m0[2], m0[3])),
           max2(max2(m0[4], m0[5]), max2(m0[6], m0[7])));
  for (; i < n; i++) r = max2(x[i], r);
  return r;
}

/* The sum of x[0, n) in two partial sums (as above): softmax's short
 * rows, and LayerNorm's rows of any length (layernorm_rows). Always
 * inlined: GCC otherwise called it out of line from layernorm_rows. */
static inline __attribute__((always_inline)) float row_sum(const float *x, int64_t n) {
  vf8 s0 = {0}, s1 = {0}, v, w;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    memcpy(&v, x + i, sizeof v);
    memcpy(&w, x + i + 8, sizeof w);
    s0 += v;
    s1 += w;
  }
  s0 += s1;
  float r = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
  for (; i < n; i++) r += x[i];
  return r;
}

/* A short row's exps go to y and are summed from there, in L1. A NaN
 * anywhere gives a NaN sum, so a NaN row, as it should. */
DVM_VEC void dvm_cpu_softmax_row(const float *x, float *y, int64_t n) {
  float m = row_max(x, n), s = 0;
  if (n <= SHORT_ROW) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = exp_le0(x[i] - m);
    s = row_sum(y, n);
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) {
      float v = exp_le0(x[i] - m);
      y[i] = v;
      s += v;
    }
  }
  float inv = 1.0f / s;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

/* A task per row of nr elements (the axis is the last one). Logsoftmax's
 * short rows' exps go to e (it reads x again, which y may overwrite). */
DVM_VEC static void softmax_rows(const void *job, int64_t r0, int64_t r1) {
  const softmax_job *j = job;
  int64_t n = j->nr;
  float e[SHORT_ROW];
  for (int64_t row = r0; row < r1; row++) {
    const float *x = j->x + row * n;
    float *y = j->y + row * n;
    if (!j->log) {
      dvm_cpu_softmax_row(x, y, n);
      continue;
    }
    float m = row_max(x, n), s = 0;
    if (n <= SHORT_ROW) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) e[i] = exp_le0(x[i] - m);
      s = row_sum(e, n);
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; i++) s += exp_le0(x[i] - m);
    }
    /* (x - m) - log(s): m + log(s) would lose log(s) when m is large */
    float ls = logf(s);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
  }
}

/* A task per (o, chunk of COLS columns) of [O, nr, ni]: the axis is
 * strided, so each pass runs along rows of the chunk's columns. */
DVM_VEC static void softmax_cols(const void *job, int64_t t0, int64_t t1) {
  const softmax_job *j = job;
  int64_t nr = j->nr, ni = j->ni, chunks = (ni + COLS - 1) / COLS;
  float m[COLS], s[COLS];
  for (int64_t t = t0; t < t1; t++) {
    int64_t o = t / chunks, i0 = t % chunks * COLS, c = ni - i0 < COLS ? ni - i0 : COLS;
    const float *x = j->x + o * nr * ni + i0;
    float *y = j->y + o * nr * ni + i0;
    for (int64_t i = 0; i < c; i++) {
      m[i] = -INFINITY;
      s[i] = 0;
    }
    for (int64_t r = 0; r < nr; r++)
#pragma omp simd
      for (int64_t i = 0; i < c; i++) m[i] = x[r * ni + i] > m[i] ? x[r * ni + i] : m[i];
    if (j->log) {
      for (int64_t r = 0; r < nr; r++)
#pragma omp simd
        for (int64_t i = 0; i < c; i++) s[i] += exp_le0(x[r * ni + i] - m[i]);
      for (int64_t i = 0; i < c; i++) s[i] = logf(s[i]);
      for (int64_t r = 0; r < nr; r++)
#pragma omp simd
        for (int64_t i = 0; i < c; i++) y[r * ni + i] = (x[r * ni + i] - m[i]) - s[i];
    } else {
      for (int64_t r = 0; r < nr; r++)
#pragma omp simd
        for (int64_t i = 0; i < c; i++) {
          float e = exp_le0(x[r * ni + i] - m[i]);
          y[r * ni + i] = e;
          s[i] += e;
        }
      for (int64_t i = 0; i < c; i++) s[i] = 1.0f / s[i];
      for (int64_t r = 0; r < nr; r++)
#pragma omp simd
        for (int64_t i = 0; i < c; i++) y[r * ni + i] *= s[i];
    }
  }
}

/* f64 (ONNX's attention expansions with softmax_precision DOUBLE): a
 * plain loop per (outer, inner) column of the [no, nr, ni] view. */
static void softmax_f64(const double *x, double *y, int64_t no, int64_t nr, int64_t ni, int lg) {
  for (int64_t o = 0; o < no; o++)
    for (int64_t i = 0; i < ni; i++) {
      const double *xc = x + o * nr * ni + i;
      double *yc = y + o * nr * ni + i, mx = -INFINITY, sum = 0;
      for (int64_t r = 0; r < nr; r++) mx = isnan(xc[r * ni]) || isnan(mx) ? NAN : xc[r * ni] > mx ? xc[r * ni] : mx;
      for (int64_t r = 0; r < nr; r++) sum += exp(xc[r * ni] - mx);
      for (int64_t r = 0; r < nr; r++) yc[r * ni] = lg ? xc[r * ni] - mx - log(sum) : exp(xc[r * ni] - mx) / sum;
    }
}

static dvm_status *softmax_any(const dvm_kernel_args *a, int log) {
  const char *op = log ? "logsoftmax" : "softmax";
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int axis;
  if (x->dtype != DVM_F64 && (st = check_dtype(op, "x", x))) return st;
  if (y->dtype != x->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: y is %s, x %s: want the same", op,
                          dvm_dtype_name((dvm_dtype)y->dtype), dvm_dtype_name((dvm_dtype)x->dtype));
  if (!(st = dvm_attr_count(op, a->nattrs, 1, 1)) && x->rank == 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: x must have rank >= 1, got a scalar", op);
  if (!st) st = dvm_attr_axis(op, "axis", &a->attrs[0], x->rank, &axis);
  if (!st) st = check_same_shape(op, "y", y, x, "x");
  if (st) return st;
  int64_t n = dvm_tensor_numel(x), no = 1, ni = 1, nr = x->dims[axis];
  if (n == 0) return NULL;
  for (int d = 0; d < axis; d++) no *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) ni *= x->dims[d];
  if (x->dtype == DVM_F64) {
    softmax_f64(dvm_tensor_ptr(x), dvm_tensor_ptr(y), no, nr, ni, log);
    return NULL;
  }
  f32_io io;
  if ((st = io_begin(op, x, y, &io))) return st;
  softmax_job j = {io.x, io.y, nr, ni, log};
  int threads = threads_for(a, n);
  if (ni == 1)
    dvm_vec_parallel(threads, no, softmax_rows, &j);
  else
    dvm_vec_parallel(threads, no * ((ni + COLS - 1) / COLS), softmax_cols, &j);
  io_finish(&io, y);
  return NULL;
}

static dvm_status *softmax(const dvm_kernel_args *a) { return softmax_any(a, 0); }
static dvm_status *logsoftmax(const dvm_kernel_args *a) { return softmax_any(a, 1); }

/* ---- layernorm ----------------------------------------------------------- */

/* n f32 values of parameter t (f32, f16 or bf16) broadcast to the last
 * dims of shape (rank, dims) whose product is n. */
static void expand_param(const dvm_tensor *t, int rank, const int64_t *dims, int64_t n,
                         float *out) {
  int64_t tn = dvm_tensor_numel(t);
  if (tn == n) { /* already the full shape (or the same count of 1s) */
    dvm_vec_load(t->dtype, dvm_tensor_ptr(t), out, n);
    return;
  }
  float v;
  for (int64_t i = 0; i < n; i++) { /* once per call, so div/mod is fine */
    int64_t rest = i, idx = 0, stride = 1;
    for (int k = 1; k <= rank; k++) {
      int64_t c = rest % dims[rank - k];
      rest /= dims[rank - k];
      if (k <= t->rank) {
        int64_t d = t->dims[t->rank - k];
        idx += (d == 1 ? 0 : c) * stride;
        stride *= d;
      }
    }
    dvm_vec_load(t->dtype, (const char *)dvm_tensor_ptr(t) + idx * (int64_t)dvm_dtype_size((dvm_dtype)t->dtype), &v, 1);
    out[i] = v;
  }
}

typedef struct layernorm_job {
  const float *x, *scale, *bias; /* bias may be NULL */
  float *y, *mean, *inv;         /* mean, inv may be NULL */
  int64_t n;
  float eps;
  int rms; /* RMSNormalization: the mean taken as 0 */
  /* skip layernorm: x is x + skip[ + add], written to sum (or, where sum
   * is NULL, to y, normalized there in place) first; else skip is NULL */
  const float *skip, *add;
  float *sum;
} layernorm_job;

/* One row in double, for rows whose f32 sums overflow (|x| near the f32
 * range's end): the mean and the variance are then finite, and so is y, as
 * the spec's formula gives (a constant row of 3e38 gives 0, as in ONNX
 * Runtime). Returns the inverse standard deviation. */
static float layernorm_row_wide(const float *x, const float *g, const float *b, float *y, int64_t n,
                                float eps, int rms, float *mean_out) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n && !rms; i++) sum += x[i];
  double mean = sum / (double)n;
  for (int64_t i = 0; i < n; i++) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
  double inv = 1.0 / sqrt(sq / (double)n + eps);
  for (int64_t i = 0; i < n; i++) y[i] = (float)(((double)x[i] - mean) * inv * g[i] + (b ? b[i] : 0.0f));
  *mean_out = (float)mean;
  return (float)inv;
}

/* The sum of (x[i] - mean)^2 over a row, in two partial sums of 8 lanes
 * held in registers, as row_sum does. An `omp simd reduction` keeps its
 * lanes in memory and finishes each row with a scalar loop over them, and
 * its one accumulator waits on each add: LayerNorm over [128, n] took 35%
 * less time this way at n = 37 to 320 and 17% less at 768 (one core, Zen
 * 4; docs/performance.md "LayerNorm's reductions in registers"). The
 * square and the add round apart (C11 mode contracts nothing). */
static inline float row_sq_dev(const float *x, float mean, int64_t n) {
  vf8 s0 = {0}, s1 = {0}, m = {mean, mean, mean, mean, mean, mean, mean, mean}, v, w;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    memcpy(&v, x + i, sizeof v);
    memcpy(&w, x + i + 8, sizeof w);
    v -= m;
    w -= m;
    s0 += v * v;
    s1 += w * w;
  }
  s0 += s1;
  float r = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
  for (; i < n; i++) r += (x[i] - mean) * (x[i] - mean);
  return r;
}

/* A task per row of n elements. */
DVM_VEC static void layernorm_rows(const void *job, int64_t r0, int64_t r1) {
  const layernorm_job *j = job;
  int64_t n = j->n;
  const float *g = j->scale, *b = j->bias;
  for (int64_t row = r0; row < r1; row++) {
    const float *x = j->x + row * n;
    float *y = j->y + row * n;
    if (j->skip) { /* the row of the residual sum, then x is that */
      const float *s = j->skip + row * n, *add = j->add;
      float *to = j->sum ? j->sum + row * n : y;
      if (add) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) to[i] = x[i] + s[i] + add[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) to[i] = x[i] + s[i];
      }
      x = to;
    }
    /* the reductions in registers (row_sum, row_sq_dev); two passes: the
     * variance of x - mean does not cancel */
    float mean = (j->rms ? 0.0f : row_sum(x, n)) / (float)n, sq = row_sq_dev(x, mean, n);
    float inv = 1.0f / sqrtf(sq / (float)n + j->eps);
    if (!isfinite(sq)) { /* overflowed (or an inf/NaN in x, which stays NaN) */
      inv = layernorm_row_wide(x, g, b, y, n, j->eps, j->rms, &mean);
    } else if (b) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * g[i] + b[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * g[i];
    }
    if (j->mean) j->mean[row] = mean;
    if (j->inv) j->inv[row] = inv;
  }
}

/* layernorm, or rmsnorm (rms: no mean; its second output is InvStdDev) */
static dvm_status *norm_layer(const dvm_kernel_args *a, const char *op, int rms) {
  if (a->nin < 2 || a->nin > 3 || a->nout < 1 || a->nout > (rms ? 2 : 3))
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: takes 2 or 3 inputs and 1 to 3 outputs, got %d and %d", op, a->nin,
                          a->nout);
  dvm_status *st = dvm_kargs_check(a, op, a->nin, a->nout, DVM_DEVICE_CPU);
  if (st) return st;
  static const char *const in_names[] = {"X", "Scale", "B"}, *const out_names[] = {"Y", "Mean", "InvStdDev"};
  for (int i = 0; i < a->nin && !st; i++) st = check_dtype(op, in_names[i], a->in[i]);
  for (int i = 0; i < a->nout && !st; i++) st = check_dtype(op, out_names[i + rms * (i > 0)], a->out[i]);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *g = a->in[1], *b = a->nin > 2 ? a->in[2] : NULL;
  int axis;
  double eps;
  if ((st = dvm_layernorm_check(op, x->rank, x->dims, g->rank, g->dims, b ? b->rank : -1,
                                b ? b->dims : NULL, a->attrs, a->nattrs, &axis, &eps)))
    return st;
  if ((st = check_same_shape(op, "Y", a->out[0], x, "X"))) return st;
  int64_t rows = 1, n = 1, stat_dims[DVM_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    *(d < axis ? &rows : &n) *= x->dims[d];
    stat_dims[d] = d < axis ? x->dims[d] : 1;
  }
  for (int i = 1; i < a->nout; i++) {
    const dvm_tensor *t = a->out[i];
    if (t->rank != x->rank || memcmp(t->dims, stat_dims, sizeof(int64_t) * (size_t)x->rank)) {
      char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s != %s, X's dims up to axis %d", op,
                            out_names[i + rms], dvm_shape_str(s1, t->rank, t->dims),
                            dvm_shape_str(s2, x->rank, stat_dims), axis);
    }
  }
  if (rows * n == 0 && a->nout == 1) return NULL;
  /* scale, bias, mean, inv: f32 scratch after the converted X when needed */
  int64_t need = 2 * n + 2 * rows;
  float *params = malloc(sizeof(float) * (size_t)(need ? need : 1));
  if (!params) return oom(op);
  f32_io io;
  if ((st = io_begin(op, x, a->out[0], &io))) {
    free(params);
    return st;
  }
  layernorm_job j = {io.x, params, NULL, io.y, NULL, NULL, n, (float)eps, rms, NULL, NULL, NULL};
  expand_param(g, x->rank, x->dims, n, params);
  if (b) expand_param(b, x->rank, x->dims, n, params + n), j.bias = params + n;
  /* the statistics outputs, in order: Mean then InvStdDev, or InvStdDev alone */
  float **stats[2] = {rms ? &j.inv : &j.mean, &j.inv};
  for (int i = 1; i < a->nout; i++)
    *stats[i - 1] = a->out[i]->dtype == DVM_F32 ? dvm_tensor_ptr(a->out[i]) : params + 2 * n + (i - 1) * rows;
  dvm_vec_parallel(threads_for(a, rows * n), rows, layernorm_rows, &j);
  io_finish(&io, a->out[0]);
  for (int i = 1; i < a->nout; i++) {
    float *src = *stats[i - 1];
    if ((void *)src != dvm_tensor_ptr(a->out[i]))
      dvm_vec_store(a->out[i]->dtype, src, dvm_tensor_ptr(a->out[i]), rows);
  }
  free(params);
  return NULL;
}

void dvm_cpu_skip_layernorm_rows(int threads, int64_t rows, int64_t n, const float *x, const float *skip,
                                  const float *bias, const float *gamma, const float *beta, float eps, int rms,
                                  float *sum, float *y) {
  layernorm_job j = {x, gamma, beta, y, NULL, NULL, n, eps, rms, skip, bias, sum};
  if (rows > 0 && n > 0) dvm_vec_parallel(rows * n >= MIN_PAR ? threads : 1, rows, layernorm_rows, &j);
}

/* ---- instance_norm and group_norm rows (f32) -------------------------- */

typedef struct group_job {
  const float *x, *scale, *bias;
  float *y;
  int64_t groups, cg, s; /* groups per image, channels per group, elements per channel */
  float eps;
} group_job;

/* A row whose f32 sums overflow, in double (as layernorm_row_wide):
 * *mean and the inverse standard deviation. */
static float group_row_wide(const float *x, int64_t n, float eps, float *mean_out) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  double mean = sum / (double)n;
  for (int64_t i = 0; i < n; i++) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
  *mean_out = (float)mean;
  return (float)(1.0 / sqrt(sq / (double)n + eps));
}

/* A task per (image, group) row of cg * s elements: its mean and variance
 * in registers (row_sum, row_sq_dev, two passes), then per channel y =
 * (x - mean) * (inv * scale[c]) + bias[c]. */
DVM_VEC static void group_rows(const void *job, int64_t r0, int64_t r1) {
  const group_job *j = job;
  int64_t n = j->cg * j->s;
  for (int64_t row = r0; row < r1; row++) {
    const float *x = j->x + row * n;
    float *y = j->y + row * n;
    float mean = row_sum(x, n) / (float)n, sq = row_sq_dev(x, mean, n);
    float inv = 1.0f / sqrtf(sq / (float)n + j->eps);
    if (!isfinite(sq)) inv = group_row_wide(x, n, j->eps, &mean); /* (an inf or NaN in x stays NaN) */
    for (int64_t k = 0; k < j->cg; k++) {
      int64_t c = row % j->groups * j->cg + k;
      float mul = inv * j->scale[c], add = j->bias[c];
      const float *xc = x + k * j->s;
      float *yc = y + k * j->s;
#pragma omp simd
      for (int64_t i = 0; i < j->s; i++) yc[i] = (xc[i] - mean) * mul + add;
    }
  }
}

void dvm_cpu_group_norm_rows(int threads, int64_t images, int64_t groups, int64_t cg, int64_t s, const float *x,
                             const float *scale, const float *bias, float eps, float *y) {
  group_job j = {x, scale, bias, y, groups, cg, s, eps};
  int64_t rows = images * groups;
  if (rows > 0 && cg * s > 0) dvm_vec_parallel(rows * cg * s >= MIN_PAR ? threads : 1, rows, group_rows, &j);
}

static dvm_status *layernorm(const dvm_kernel_args *a) { return norm_layer(a, "layernorm", 0); }
static dvm_status *rmsnorm(const dvm_kernel_args *a) { return norm_layer(a, "rmsnorm", 1); }

/* ---- batchnorm ----------------------------------------------------------- */

typedef struct batchnorm_job {
  const float *x, *mul, *add;
  float *y;
  int64_t c, s; /* channels, elements per channel and sample */
} batchnorm_job;

/* A task per (sample, channel) row: y = x * mul[c] + add[c]. */
DVM_VEC static void batchnorm_rows(const void *job, int64_t r0, int64_t r1) {
  const batchnorm_job *j = job;
  for (int64_t row = r0; row < r1; row++) {
    const float *x = j->x + row * j->s;
    float *y = j->y + row * j->s, m = j->mul[row % j->c], p = j->add[row % j->c];
#pragma omp simd
    for (int64_t i = 0; i < j->s; i++) y[i] = x[i] * m + p;
  }
}

static dvm_status *batchnorm(const dvm_kernel_args *a) {
  static const char op[] = "batchnorm";
  static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
  dvm_status *st = dvm_kargs_check(a, op, 5, 1, DVM_DEVICE_CPU);
  for (int i = 0; i < 5 && !st; i++) st = check_dtype(op, names[i], a->in[i]);
  if (!st) st = check_dtype(op, "Y", a->out[0]);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  double eps;
  if (x->rank < 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X must be [N, C, ...], got rank %d", op,
                          x->rank);
  int64_t c = x->dims[1];
  for (int i = 1; i < 5; i++) {
    const dvm_tensor *p = a->in[i];
    if (p->rank != 1 || p->dims[0] != c) {
      char sp[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s must be [%lld], the channels of X %s",
                            op, names[i], dvm_shape_str(sp, p->rank, p->dims), (long long)c,
                            dvm_shape_str(sx, x->rank, x->dims));
    }
  }
  if ((st = dvm_attr_count(op, a->nattrs, 1, 1)) ||
      (st = dvm_attr_float(op, "epsilon", &a->attrs[0], &eps)) ||
      (st = check_same_shape(op, "Y", y, x, "X")))
    return st;
  int64_t n = dvm_tensor_numel(x);
  if (n == 0) return NULL;
  float *p = malloc(sizeof(float) * 6 * (size_t)c);
  if (!p) return oom(op);
  for (int i = 1; i < 5; i++) dvm_vec_load(a->in[i]->dtype, dvm_tensor_ptr(a->in[i]), p + (i - 1) * c, c);
  float *mul = p + 4 * c, *add = p + 5 * c;
  for (int64_t k = 0; k < c; k++) { /* (x - mean) / sqrt(var + eps) * scale + B */
    mul[k] = p[k] / sqrtf(p[3 * c + k] + (float)eps);
    add[k] = p[c + k] - p[2 * c + k] * mul[k];
  }
  f32_io io;
  if ((st = io_begin(op, x, y, &io))) {
    free(p);
    return st;
  }
  batchnorm_job j = {io.x, mul, add, io.y, c, n / (x->dims[0] * c)};
  dvm_vec_parallel(threads_for(a, n), x->dims[0] * c, batchnorm_rows, &j);
  io_finish(&io, y);
  free(p);
  return NULL;
}

#define F32_F16_BF16 (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F16) | DVM_DTYPE_BIT(DVM_BF16))

const dvm_kernel_def dvm_cpu_norm_kernels[] = {
    {"softmax", DVM_DEVICE_CPU, softmax, "same", .dtypes = F32_F16_BF16 | DVM_DTYPE_BIT(DVM_F64), .inplace = 1,
     .form = DVM_FORM_ROWS_SOFTMAX},
    {"logsoftmax", DVM_DEVICE_CPU, logsoftmax, "same", .dtypes = F32_F16_BF16 | DVM_DTYPE_BIT(DVM_F64), .inplace = 1,
     .form = DVM_FORM_ROWS_LOGSOFTMAX},
    {"layernorm", DVM_DEVICE_CPU, layernorm, "layernorm", .inplace = 1, .form = DVM_FORM_ROWS_LAYERNORM},
    {"rmsnorm", DVM_DEVICE_CPU, rmsnorm, "layernorm", .inplace = 1, .form = DVM_FORM_ROWS_RMSNORM},
    {"batchnorm", DVM_DEVICE_CPU, batchnorm, "same", .inplace = 1},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
