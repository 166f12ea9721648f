/* Pooling with ONNX semantics over 1 to 3 spatial dims (geometry and checks
 * in shapefuncs/window.h; shape functions "pool" and "global_pool").
 *
 *   max_pool(in: X [N, C, s...]; attrs: kernel_shape:shape, strides:shape,
 *            pads:shape, dilations:shape, ceil_mode:int, storage_order:int)
 *            -> Y [N, C, o...] [, Indices i64 [N, C, o...]]
 *       f32, f64, i8, u8. Indices (when asked for, a second output) index X
 *       flattened: (n * C + c) * plane + the spatial position, row-major
 *       (storage_order 0) or column-major over the spatial dims (1); the
 *       first maximum in row-major window order wins.
 *   average_pool(in: X; attrs: kernel_shape, strides, pads, dilations,
 *            ceil_mode:int, count_include_pad:int) -> Y      f32, f64
 *       count_include_pad 1 divides by the window positions inside the
 *       padded input (not those past the end padding that ceil_mode adds).
 *   lp_pool(in: X; attrs: kernel_shape, strides, pads, dilations,
 *            ceil_mode:int, p:int) -> Y      f32, f64
 *       ONNX LpPool: (sum of |x|^p over the window)^(1/p); padding adds 0.
 *   global_average_pool(in: X [N, C, s...]) -> Y [N, C, 1...]   f32, f64
 *   global_max_pool(in: X) -> Y [N, C, 1...]                     f32, f64
 *   max_pool_nhwc(in: X; max_pool's attributes) -> Y              f32
 *       max_pool (values only) on X and Y stored channels last: dims
 *       [N, C, s...], bytes [N, s..., C] (pass conv_nhwc, between
 *       convolutions that keep that layout); vectorized over C.
 *   global_average_pool_nhwc(in: X) -> Y [N, C, 1...]             f32
 *       global_average_pool of X stored channels last (Y's bytes are the
 *       same either way).
 *
 * An empty strides, pads or dilations means the ONNX default. Pads must be
 * smaller than the kernel; with dilation a window can still miss the input
 * entirely, and then max_pool gives the dtype's lowest value and index -1,
 * and average_pool without count_include_pad gives 0 / 0 = NaN.
 *
 * Every spatial case runs as 3-D with leading dims of 1. Per dim, a table
 * gives each output position's first input position and its range of kernel
 * taps inside the input, so the window loops need no bounds checks and no
 * division. Planes (n, c) are independent and split among threads. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/par.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/window.h"

/* Below this much work (window taps), one thread is faster. */
#define MIN_WORK ((int64_t)1 << 15)

/* One output position along one dim. */
typedef struct tap {
  int64_t start;      /* its first input position, o * stride - pad_begin */
  int64_t kmin, kmax; /* kernel taps inside the input: [kmin, kmax) */
  int64_t padded;     /* taps inside the padded input (count_include_pad) */
} tap;

/* The inner dim's output range [lo, hi) whose windows have one kernel tap
 * inside X. */
typedef struct span {
  int64_t lo, hi;
} span;

typedef struct geom {
  int64_t planes, in[3], out[3], dil[3], stride, pad; /* stride, pad: inner dim */
  int64_t kernel[3], strides[3];
  int64_t mult[3];              /* max_pool index multiplier of each input dim */
  tap *taps[3];                 /* out[d] entries each */
  span *inner;                  /* the inner dim's kernel taps, kinner entries */
  double *count, *count_padded; /* the inner dim's taps inside X, inside its pads */
  int64_t kinner;
  void *mem;
} geom;

/* The tables of window w over X dims x (rank 2 + w->n) into Y dims y. */
static dvm_status *geom_make(const char *op, const dvm_window *w, const int64_t *x,
                             const int64_t *y, bool colmajor, geom *g) {
  int lead = 3 - w->n; /* dims of 1 in front */
  int64_t k[3], s[3], pb[3], pe[3], total = 0;
  g->planes = x[0] * x[1];
  for (int d = 0; d < 3; d++) {
    int i = d - lead;
    g->in[d] = i < 0 ? 1 : x[2 + i];
    g->out[d] = i < 0 ? 1 : y[2 + i];
    k[d] = i < 0 ? 1 : w->kernel[i];
    s[d] = i < 0 ? 1 : w->stride[i];
    g->dil[d] = i < 0 ? 1 : w->dilation[i];
    pb[d] = i < 0 ? 0 : w->pad_begin[i];
    pe[d] = i < 0 ? 0 : w->pad_end[i];
    total += g->out[d];
  }
  g->kinner = k[2];
  g->stride = s[2];
  memcpy(g->kernel, k, sizeof k);
  memcpy(g->strides, s, sizeof s);
  g->pad = pb[2];
  g->mem = malloc(sizeof(tap) * (size_t)total + sizeof(span) * (size_t)k[2] +
                  2 * sizeof(double) * (size_t)g->out[2]);
  if (!g->mem) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for window tables", op);
  tap *t = g->mem;
  g->inner = (span *)(t + total);
  g->count = (double *)(g->inner + k[2]);
  g->count_padded = g->count + g->out[2];
  for (int64_t kc = 0; kc < k[2]; kc++) {
    /* 0 <= o * s - pb + kc * dil < in */
    int64_t off = pb[2] - kc * g->dil[2], lo = off > 0 ? (off + s[2] - 1) / s[2] : 0;
    int64_t hi = g->in[2] - 1 + off < 0 ? 0 : (g->in[2] - 1 + off) / s[2] + 1;
    g->inner[kc].lo = lo;
    g->inner[kc].hi = hi > g->out[2] ? g->out[2] : hi < lo ? lo : hi;
  }
  for (int d = 0; d < 3; d++) {
    g->taps[d] = t;
    for (int64_t o = 0; o < g->out[d]; o++, t++) {
      int64_t start = o * s[d] - pb[d], dl = g->dil[d];
      t->start = start;
      /* windows start before the input's end (window_out sees to it), so
       * both divisions below are of numbers >= 0 */
      t->kmin = start >= 0 ? 0 : (-start + dl - 1) / dl;
      int64_t last = (g->in[d] - 1 - start) / dl + 1; /* taps before the input's end */
      t->kmax = last < k[d] ? last : k[d];
      if (t->kmax < t->kmin) t->kmax = t->kmin;
      int64_t plast = (g->in[d] + pe[d] - 1 - start) / dl + 1;
      t->padded = plast < k[d] ? plast : k[d];
    }
  }
  for (int64_t o = 0; o < g->out[2]; o++) {
    g->count[o] = (double)(g->taps[2][o].kmax - g->taps[2][o].kmin);
    g->count_padded[o] = (double)g->taps[2][o].padded;
  }
  /* the index of input position (a, b, c) is a*m0 + b*m1 + c*m2 */
  g->mult[0] = colmajor ? 1 : g->in[1] * g->in[2];
  g->mult[1] = colmajor ? g->in[0] : g->in[2];
  g->mult[2] = colmajor ? g->in[0] * g->in[1] : 1;
  return NULL;
}

static int pool_threads(const dvm_kernel_args *a, const geom *g, int64_t window) {
  int64_t work = g->planes * g->out[0] * g->out[1] * g->out[2] * window;
  int64_t t = dvm_kargs_threads(a);
  if (t > work / MIN_WORK) t = work / MIN_WORK;
  if (t > g->planes) t = g->planes;
  return t < 1 ? 1 : (int)t;
}

/* The window loops over a plane xp of dtype T: for each output (oa, ob, oc)
 * in order, BEFORE, then BODY for each input element v at (ia, ib, ic) of
 * its window inside X, then AFTER. */
#define WINDOW_LOOP(T, g, xp, BEFORE, BODY, AFTER)                     \
  for (int64_t oa = 0; oa < (g)->out[0]; oa++) {                       \
    const tap *ta = &(g)->taps[0][oa];                                 \
    for (int64_t ob = 0; ob < (g)->out[1]; ob++) {                     \
      const tap *tb = &(g)->taps[1][ob];                               \
      for (int64_t oc = 0; oc < (g)->out[2]; oc++) {                   \
        const tap *tc = &(g)->taps[2][oc];                             \
        BEFORE;                                                        \
        for (int64_t ka = ta->kmin; ka < ta->kmax; ka++) {             \
          int64_t ia = ta->start + ka * (g)->dil[0];                   \
          for (int64_t kb = tb->kmin; kb < tb->kmax; kb++) {           \
            int64_t ib = tb->start + kb * (g)->dil[1];                 \
            const T *row = (xp) + (ia * (g)->in[1] + ib) * (g)->in[2]; \
            for (int64_t kc = tc->kmin; kc < tc->kmax; kc++) {         \
              int64_t ic = tc->start + kc * (g)->dil[2];               \
              T v = row[ic];                                           \
              BODY;                                                    \
            }                                                          \
          }                                                            \
        }                                                              \
        AFTER;                                                         \
      }                                                                \
    }                                                                  \
  }

/* One plane of a window pool: x and y point at the plane, idx (max_pool
 * with indices) at its indices, base is the plane's first element in X,
 * flag is average_pool's count_include_pad, and tmp holds a row of X. */
typedef void (*plane_fn)(const geom *g, const void *x, void *y, int64_t *idx, int64_t base,
                         int flag, void *tmp);

/* yr[lo..hi) = OP(yr, row at o * S + off): one kernel column's tap for a
 * row of outputs, vectorized over the outputs. */
#define TAP_ROW(OP, S)                                                  \
  _Pragma("omp simd") for (int64_t o = sp->lo; o < sp->hi; o++) yr[o] = \
      OP(yr[o], row[o * (S) + off])

/* Values only (max_pool without indices, average_pool), separably: for a
 * row of outputs, the input rows their windows cover are combined into one
 * (contiguous, vectorized), then each kernel column adds its tap to every
 * output of the row. INIT starts each output; FINISH(T, yr, n, ta, tb) ends the row. */
#define VALUE_PLANE(name, T, INIT, OP, FINISH)                                                  \
  DVM_VEC static void name(const geom *g, const void *px, void *py, int64_t *idx, int64_t base, \
                           int include_pad, void *scratch) {                                    \
    const T *x = px;                                                                            \
    T *y = py, *tmp = scratch;                                                                  \
    int64_t n = g->out[2], s = g->stride, w = g->in[2];                                         \
    for (int64_t oa = 0; oa < g->out[0]; oa++) {                                                \
      const tap *ta = &g->taps[0][oa];                                                          \
      for (int64_t ob = 0; ob < g->out[1]; ob++, y += n) {                                      \
        const tap *tb = &g->taps[1][ob];                                                        \
        const T *row = NULL;                                                                    \
        for (int64_t ka = ta->kmin; ka < ta->kmax; ka++)                                        \
          for (int64_t kb = tb->kmin; kb < tb->kmax; kb++) {                                    \
            const T *r =                                                                        \
                x + ((ta->start + ka * g->dil[0]) * g->in[1] + tb->start + kb * g->dil[1]) * w; \
            if (!row) {                                                                         \
              row = r;                                                                          \
              continue;                                                                         \
            }                                                                                   \
            _Pragma("omp simd") for (int64_t j = 0; j < w; j++) tmp[j] = OP(row[j], r[j]);      \
            row = tmp;                                                                          \
          }                                                                                     \
        T *yr = y;                                                                              \
        for (int64_t o = 0; o < n; o++) yr[o] = INIT;                                           \
        for (int64_t kc = 0; row && kc < g->kinner; kc++) {                                     \
          const span *sp = &g->inner[kc];                                                       \
          int64_t off = kc * g->dil[2] - g->pad;                                                \
          if (s == 1)                                                                           \
            TAP_ROW(OP, 1);                                                                     \
          else if (s == 2)                                                                      \
            TAP_ROW(OP, 2);                                                                     \
          else                                                                                  \
            TAP_ROW(OP, s);                                                                     \
        }                                                                                       \
        FINISH(T, yr, n, ta, tb);                                                               \
      }                                                                                         \
    }                                                                                           \
  }

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define SUM(a, b) ((a) + (b))
#define NO_FINISH(T, yr, n, ta, tb)
/* the divisor: the taps inside X, or (count_include_pad) inside its pads */
#define AVERAGE(T, yr, n, ta, tb)                                              \
  do {                                                                         \
    T ab = (T)(include_pad ? ta->padded * tb->padded                           \
                           : (ta->kmax - ta->kmin) * (tb->kmax - tb->kmin));   \
    const double *c = include_pad ? g->count_padded : g->count;                \
    _Pragma("omp simd") for (int64_t o = 0; o < n; o++) yr[o] /= ab * (T)c[o]; \
  } while (0)

VALUE_PLANE(max_f32, float, -FLT_MAX, MAX, NO_FINISH)
VALUE_PLANE(max_f64, double, -DBL_MAX, MAX, NO_FINISH)
VALUE_PLANE(max_i8, int8_t, INT8_MIN, MAX, NO_FINISH)
VALUE_PLANE(max_u8, uint8_t, 0, MAX, NO_FINISH)
VALUE_PLANE(avg_f32, float, 0, SUM, AVERAGE)
VALUE_PLANE(avg_f64, double, 0, SUM, AVERAGE)

/* max_pool's values over one 2-D plane at stride 1 without dilation, by
 * whole planes: the plane is copied into the scratch between LOWEST pads,
 * to rows of pw = out + kernel - 1 columns, so that every tap is valid and
 * each kernel row, then each kernel column, is one loop over the whole
 * plane; then the rows go out. VALUE_PLANE's loops per output row are
 * mostly overhead and vector tails on short rows (an SPPF 5x5 over 10x10
 * took 3x this time), and took 1.4-2x it on rows of 80 to 320 columns too
 * (docs/performance.md). A plane holding a NaN goes window by window
 * instead (PER_ROW): where a NaN sits in a window's fold decides the
 * result, and the padding's taps, which this path folds in, would change
 * it from every other max_pool's (and the device's). */
static bool flat_max(const geom *g) {
  return g->out[0] == 1 && g->in[0] == 1 && g->strides[1] == 1 && g->strides[2] == 1 &&
         g->dil[1] == 1 && g->dil[2] == 1;
}

/* The scratch elements flat_max's planes take: the padded plane, then
 * the rows' maxima. */
static size_t flat_scratch(const geom *g) {
  int64_t pw = g->out[2] + g->kernel[2] - 1;
  return (size_t)((g->out[1] + g->kernel[1] - 1 + g->out[1]) * pw);
}

#define FLAT_MAX_PLANE(name, T, LOWEST, PER_ROW)                                                \
  DVM_VEC static void name(const geom *g, const void *px, void *py, int64_t *idx, int64_t base, \
                           int flag, void *scratch) {                                           \
    const T *x = px;                                                                            \
    T *y = py, *pad = scratch;                                                                  \
    int64_t h = g->in[1], w = g->in[2], oh = g->out[1], ow = g->out[2];                         \
    int64_t kh = g->kernel[1], kw = g->kernel[2], pw = ow + kw - 1, ph = oh + kh - 1;           \
    int64_t top = -g->taps[1][0].start, left = g->pad, n = oh * pw;                             \
    T *v = pad + ph * pw;                                                                       \
    int nan = 0;                                                                                \
    _Pragma("omp simd") for (int64_t i = 0; i < ph * pw; i++) pad[i] = LOWEST;                  \
    for (int64_t r = 0; r < h; r++) {                                                           \
      T *d = pad + (top + r) * pw + left;                                                       \
      const T *s = x + r * w;                                                                   \
      _Pragma("omp simd reduction(| : nan)") for (int64_t i = 0; i < w; i++) {                  \
        d[i] = s[i];                                                                            \
        nan |= s[i] != s[i];                                                                    \
      }                                                                                         \
    }                                                                                           \
    if (nan) {                                                                                  \
      PER_ROW(g, px, py, idx, base, flag, scratch);                                             \
      return;                                                                                   \
    }                                                                                           \
    /* v = the max of rows 0..kh-1 from v's row on; kh 1: a copy */                             \
    for (int64_t ka = 1, first = 1; ka < kh || first; ka++, first = 0) {                        \
      const T *a = first ? pad : v, *s = pad + (ka < kh ? ka : 0) * pw;                         \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) v[i] = MAX(a[i], s[i]);               \
    }                                                                                           \
    n -= kw - 1; /* the last row's last outputs read no further than its end */                 \
    for (int64_t kc = 1, first = 1; kc < kw || first; kc++, first = 0) {                        \
      const T *a = first ? v : pad, *s = v + (kc < kw ? kc : 0);                                \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) pad[i] = MAX(a[i], s[i]);             \
    }                                                                                           \
    for (int64_t r = 0; r < oh; r++) {                                                          \
      T *d = y + r * ow;                                                                        \
      const T *s = pad + r * pw;                                                                \
      _Pragma("omp simd") for (int64_t i = 0; i < ow; i++) d[i] = s[i];                         \
    }                                                                                           \
  }

FLAT_MAX_PLANE(flat_max_f32, float, -FLT_MAX, max_f32)
FLAT_MAX_PLANE(flat_max_f64, double, -DBL_MAX, max_f64)
FLAT_MAX_PLANE(flat_max_i8, int8_t, INT8_MIN, max_i8)
FLAT_MAX_PLANE(flat_max_u8, uint8_t, 0, max_u8)

/* max_pool with indices, window by window: the first maximum in the
 * window's row-major order; LOWEST and index -1 where a window misses X. */
#define ARGMAX_PLANE(name, T, LOWEST)                                                           \
  DVM_VEC static void name(const geom *g, const void *px, void *py, int64_t *idx, int64_t base, \
                           int flag, void *tmp) {                                               \
    const T *x = px;                                                                            \
    T *y = py, best = LOWEST;                                                                   \
    int64_t at = -1;                                                                            \
    WINDOW_LOOP(                                                                                \
        T, g, x, (best = LOWEST, at = -1),                                                      \
        if (v > best || at < 0) {                                                               \
          best = v;                                                                             \
          at = ia * g->mult[0] + ib * g->mult[1] + ic * g->mult[2];                             \
        },                                                                                      \
        *y++ = best;                                                                            \
        *idx++ = at < 0 ? -1 : base + at)                                                       \
  }

ARGMAX_PLANE(argmax_f32, float, -FLT_MAX)
ARGMAX_PLANE(argmax_f64, double, -DBL_MAX)
ARGMAX_PLANE(argmax_i8, int8_t, INT8_MIN)
ARGMAX_PLANE(argmax_u8, uint8_t, 0)

/* lp_pool: (sum over the window's taps inside X of |v|^p)^(1/p), in
 * double; pads add nothing (they hold zeros). p arrives as the flag. */
#define LP_PLANE(name, T)                                                                       \
  DVM_VEC static void name(const geom *g, const void *px, void *py, int64_t *idx, int64_t base, \
                           int p, void *tmp) {                                                  \
    (void)idx, (void)base, (void)tmp;                                                           \
    const T *x = px;                                                                            \
    T *y = py;                                                                                  \
    double acc = 0;                                                                             \
    WINDOW_LOOP(T, g, x, acc = 0,                                                               \
                acc += p == 1 ? fabs((double)v) : p == 2 ? (double)v * v : pow(fabs((double)v), p), \
                *y++ = (T)(p == 1 ? acc : p == 2 ? sqrt(acc) : pow(acc, 1.0 / p)))              \
  }

LP_PLANE(lp_f32, float)
LP_PLANE(lp_f64, double)

static const plane_fn max_fns[DVM_DTYPE_COUNT] = {
    [DVM_F32] = max_f32, [DVM_F64] = max_f64, [DVM_I8] = max_i8, [DVM_U8] = max_u8};
static const plane_fn flat_max_fns[DVM_DTYPE_COUNT] = {[DVM_F32] = flat_max_f32,
    [DVM_F64] = flat_max_f64, [DVM_I8] = flat_max_i8, [DVM_U8] = flat_max_u8};
static const plane_fn argmax_fns[DVM_DTYPE_COUNT] = {
    [DVM_F32] = argmax_f32, [DVM_F64] = argmax_f64, [DVM_I8] = argmax_i8, [DVM_U8] = argmax_u8};
static const plane_fn avg_fns[DVM_DTYPE_COUNT] = {[DVM_F32] = avg_f32, [DVM_F64] = avg_f64};
static const plane_fn lp_fns[DVM_DTYPE_COUNT] = {[DVM_F32] = lp_f32, [DVM_F64] = lp_f64};

typedef struct planes_job {
  const geom *g;
  plane_fn fn;
  size_t esz, row;
  const char *x;
  char *y, *tmp;
  int64_t *idx;
  int flag;
} planes_job;

static void planes_range(void *ctx, int64_t s, int64_t e) {
  const planes_job *j = ctx;
  const geom *g = j->g;
  int64_t plane = g->in[0] * g->in[1] * g->in[2], oplane = g->out[0] * g->out[1] * g->out[2];
  char *tmp = j->tmp + j->row * (size_t)dvm_par_slot();
  for (int64_t p = s; p < e; p++)
    j->fn(g, j->x + p * plane * (int64_t)j->esz, j->y + p * oplane * (int64_t)j->esz,
          j->idx ? j->idx + p * oplane : NULL, p * plane, j->flag, tmp);
}

/* Each thread gets `scratch` elements (a row of X, or flat_scratch). */
static dvm_status *run_planes(const char *op, const geom *g, plane_fn fn, size_t esz,
                              size_t scratch, const char *x, char *y, int64_t *idx, int flag,
                              int threads) {
  size_t row = (scratch * esz + 63) & ~(size_t)63;
  char *tmp = malloc(row * (size_t)threads);
  if (!tmp) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for %d rows", op, threads);
  planes_job j = {g, fn, esz, row, x, y, tmp, idx, flag};
  dvm_par_for(threads, g->planes, 1, planes_range, &j);
  free(tmp);
  return NULL;
}

/* The dtypes with an entry in a table indexed by dtype, as bits. */
#define DTYPE_BITS(fns, bits) \
  for (int dt_ = 0; dt_ < DVM_DTYPE_COUNT; dt_++) bits |= (uint32_t)(fns[dt_] != NULL) << dt_

/* Checks what all pools share: the tensors, one dtype among `ok` (bits),
 * and outputs of the shape `want`. nout_max > 1 lets max_pool take its
 * indices (i64) as a second output. */
static dvm_status *check(const dvm_kernel_args *a, const char *op, int nout_max, uint32_t ok,
                         const int64_t *want) {
  dvm_status *st = dvm_kargs_check(a, op, 1, a->nout == 2 && nout_max == 2 ? 2 : 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (x->dtype != y->dtype || !(ok >> x->dtype & 1) ||
      (a->nout == 2 && a->out[1]->dtype != DVM_I64)) {
    char got[64], list[64] = "";
    for (int dt = 0; dt < DVM_DTYPE_COUNT; dt++)
      if (ok >> dt & 1) strcat(strcat(list, list[0] ? ", " : ""), dvm_dtype_name((dvm_dtype)dt));
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want X and Y of one of %s%s", op,
                          dvm_kargs_dtypes(got, sizeof got, a), list,
                          nout_max == 2 ? ", Indices i64" : "");
  }
  for (int i = 0; i < a->nout; i++) {
    const dvm_tensor *o = a->out[i];
    if (o->rank != x->rank || memcmp(o->dims, want, sizeof(int64_t) * x->rank) != 0) {
      char so[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "%s: output %d %s != %s, what X %s and the attributes give", op, i,
                            dvm_shape_str(so, o->rank, o->dims), dvm_shape_str(sw, x->rank, want),
                            dvm_shape_str(sx, x->rank, x->dims));
    }
  }
  return NULL;
}

typedef enum pool_kind { POOL_MAX, POOL_AVERAGE, POOL_LP } pool_kind;

static dvm_status *window_pool(const dvm_kernel_args *a, pool_kind kind) {
  static const char *const names[] = {"max_pool", "average_pool", "lp_pool"};
  static const char *const flags[] = {"storage_order", "count_include_pad", "p"};
  const char *op = names[kind];
  bool max = kind == POOL_MAX;
  dvm_window w;
  int64_t want[DVM_MAX_RANK];
  int flag = 0;
  if (a->nin != 1 || !a->in[0]) return dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  const dvm_tensor *x = a->in[0];
  dvm_status *st = dvm_pool_setup(op, x->rank, x->dims, a->attrs, a->nattrs, &w, want);
  if (!st && a->nattrs != 6)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 6 attributes, got %d", op, a->nattrs);
  if (!st) {
    int64_t v = a->attrs[5].u.i;
    if (kind == POOL_LP ? v < 1 || v > 64 : v != 0 && v != 1)
      st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s must be %s, got %lld", op, flags[kind],
                          kind == POOL_LP ? "in 1..64" : "0 or 1", (long long)v);
    flag = (int)v;
  }
  const plane_fn *fns = kind == POOL_MAX ? max_fns : kind == POOL_AVERAGE ? avg_fns : lp_fns;
  uint32_t ok = 0;
  DTYPE_BITS(fns, ok);
  if (!st) st = check(a, op, max ? 2 : 1, ok, want);
  if (st || dvm_tensor_numel(a->out[0]) == 0) return st;
  geom g;
  st = geom_make(op, &w, x->dims, want, max && flag, &g);
  if (st) return st;
  int64_t window = 1;
  for (int i = 0; i < w.n; i++) window *= w.kernel[i];
  size_t scratch = (size_t)g.in[2];
  if (a->nout == 2) {
    fns = argmax_fns;
  } else if (max && flat_max(&g)) {
    fns = flat_max_fns;
    scratch = flat_scratch(&g);
  }
  st = run_planes(op, &g, fns[x->dtype], dvm_dtype_size((dvm_dtype)x->dtype), scratch, dvm_tensor_ptr(x),
                  dvm_tensor_ptr(a->out[0]), a->nout == 2 ? dvm_tensor_ptr(a->out[1]) : NULL, flag,
                  pool_threads(a, &g, window));
  free(g.mem);
  return st;
}

/* Global pools: one reduction of the n contiguous elements of each of
 * `planes` planes; sums in double, as a plane may be large and the loop is
 * bound by memory. Planes of fewer than SMALL_PLANE elements (a 2x2 map of
 * 1280 channels) are reduced 8 side by side, their elements in order, so
 * the 8 sums and the 8 final divisions are vector lanes where one plane
 * alone is a chain of scalar adds; larger planes one at a time. */
enum { SMALL_PLANE = 16 };

#define GLOBAL_PLANE(name, T, ACC, INIT, REDUCTION, STEP, FINISH)                  \
  DVM_VEC static void name(const void *px, void *py, int64_t n, int64_t planes) { \
    const T *x = px;                                                               \
    T *y = py;                                                                     \
    int64_t p = 0;                                                                 \
    for (; n < SMALL_PLANE && p + 8 <= planes; p += 8) {                           \
      ACC acc[8];                                                                  \
      for (int k = 0; k < 8; k++) acc[k] = INIT;                                   \
      for (int64_t i = 0; i < n; i++)                                              \
        _Pragma("omp simd") for (int k = 0; k < 8; k++) STEP(acc[k], x[(p + k) * n + i]); \
      for (int k = 0; k < 8; k++) y[p + k] = (T)(FINISH(acc[k]));                  \
    }                                                                              \
    for (; p < planes; p++) {                                                      \
      ACC acc = INIT;                                                              \
      _Pragma(REDUCTION) for (int64_t i = 0; i < n; i++) STEP(acc, x[p * n + i]);  \
      y[p] = (T)(FINISH(acc));                                                     \
    }                                                                              \
  }

#define SUM_ACC "omp simd reduction(+ : acc)"
#define MAX_ACC "omp simd reduction(max : acc)"
#define SUM_STEP(a, v) ((a) += (v))
#define MAX_STEP(a, v) ((a) = (v) > (a) ? (v) : (a))
#define MEAN_OF(a) (n ? (a) / (double)n : NAN)
#define MAX_OF(a) (a)
GLOBAL_PLANE(gavg_f32, float, double, 0.0, SUM_ACC, SUM_STEP, MEAN_OF)
GLOBAL_PLANE(gavg_f64, double, double, 0.0, SUM_ACC, SUM_STEP, MEAN_OF)
GLOBAL_PLANE(gmax_f32, float, float, -FLT_MAX, MAX_ACC, MAX_STEP, MAX_OF)
GLOBAL_PLANE(gmax_f64, double, double, -DBL_MAX, MAX_ACC, MAX_STEP, MAX_OF)

typedef void (*global_fn)(const void *, void *, int64_t, int64_t);

static const global_fn gavg_fns[DVM_DTYPE_COUNT] = {[DVM_F32] = gavg_f32, [DVM_F64] = gavg_f64};
static const global_fn gmax_fns[DVM_DTYPE_COUNT] = {[DVM_F32] = gmax_f32, [DVM_F64] = gmax_f64};

typedef struct global_job {
  global_fn fn;
  size_t esz;
  int64_t n;
  const char *x;
  char *y;
} global_job;

static void global_range(void *ctx, int64_t s, int64_t e) {
  const global_job *j = ctx;
  j->fn(j->x + s * j->n * (int64_t)j->esz, j->y + s * (int64_t)j->esz, j->n, e - s);
}

static dvm_status *global_pool(const dvm_kernel_args *a, bool max) {
  const char *op = max ? "global_max_pool" : "global_average_pool";
  const global_fn *fns = max ? gmax_fns : gavg_fns;
  int64_t want[DVM_MAX_RANK];
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (!st && a->nattrs != 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes no attributes, got %d", op, a->nattrs);
  if (!st) st = dvm_global_pool_setup(op, a->in[0]->rank, a->in[0]->dims, want);
  uint32_t ok = 0;
  DTYPE_BITS(fns, ok);
  if (!st) st = check(a, op, 1, ok, want);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  int64_t planes = x->dims[0] * x->dims[1];
  if (planes == 0) return NULL;
  int64_t n = dvm_tensor_numel(x) / planes, t = dvm_kargs_threads(a);
  if (t > planes * n / MIN_WORK) t = planes * n / MIN_WORK;
  global_fn fn = fns[x->dtype];
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  const char *px = dvm_tensor_ptr(x);
  char *py = dvm_tensor_ptr(a->out[0]);
  global_job j = {fn, esz, n, px, py};
  dvm_par_for((int)t, planes, 1, global_range, &j);
  return NULL;
}

/* ---- channels last (pass conv_nhwc) -------------------------------------- */

typedef struct nhwc_job {
  const geom *g;
  int64_t c;      /* channels */
  const float *x; /* [N, in..., C] */
  float *y;       /* [N, out..., C] */
} nhwc_job;

/* Rows (n, oa, ob) s..e of outputs: each output's C values the max over
 * its window's taps inside X (-FLT_MAX where it has none, as max_f32). */
DVM_VEC static void max_nhwc_rows(void *ctx, int64_t s, int64_t e) {
  const nhwc_job *j = ctx;
  const geom *g = j->g;
  int64_t c = j->c, rows = g->out[0] * g->out[1], in = g->in[0] * g->in[1] * g->in[2];
  for (int64_t r = s; r < e; r++) {
    int64_t n = r / rows, oa = r % rows / g->out[1], ob = r % g->out[1];
    const tap *ta = &g->taps[0][oa], *tb = &g->taps[1][ob];
    const float *x = j->x + n * in * c;
    float *y = j->y + r * g->out[2] * c;
    for (int64_t oc = 0; oc < g->out[2]; oc++, y += c) {
      const tap *tc = &g->taps[2][oc];
      _Pragma("omp simd") for (int64_t k = 0; k < c; k++) y[k] = -FLT_MAX;
      for (int64_t ka = ta->kmin; ka < ta->kmax; ka++)
        for (int64_t kb = tb->kmin; kb < tb->kmax; kb++) {
          const float *row = x + ((ta->start + ka * g->dil[0]) * g->in[1] + tb->start + kb * g->dil[1]) * g->in[2] * c;
          for (int64_t kc = tc->kmin; kc < tc->kmax; kc++) {
            const float *v = row + (tc->start + kc * g->dil[2]) * c;
            _Pragma("omp simd") for (int64_t k = 0; k < c; k++) y[k] = MAX(y[k], v[k]);
          }
        }
    }
  }
}

static dvm_status *max_pool_nhwc(const dvm_kernel_args *a) {
  const char *op = "max_pool_nhwc";
  dvm_window w;
  int64_t want[DVM_MAX_RANK];
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  const dvm_tensor *x = st ? NULL : a->in[0];
  if (!st) st = dvm_pool_setup(op, x->rank, x->dims, a->attrs, a->nattrs, &w, want);
  if (!st && a->nattrs != 6)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 6 attributes, got %d", op, a->nattrs);
  if (!st) st = check(a, op, 1, 1u << DVM_F32, want);
  if (st || dvm_tensor_numel(a->out[0]) == 0) return st;
  geom g;
  if ((st = geom_make(op, &w, x->dims, want, false, &g))) return st;
  int64_t window = 1, rows = x->dims[0] * g.out[0] * g.out[1];
  for (int i = 0; i < w.n; i++) window *= w.kernel[i];
  int64_t t = dvm_kargs_threads(a), work = dvm_tensor_numel(a->out[0]) * window;
  if (t > work / MIN_WORK) t = work / MIN_WORK;
  nhwc_job j = {&g, x->dims[1], dvm_tensor_ptr(x), dvm_tensor_ptr(a->out[0])};
  dvm_par_for(t < 1 ? 1 : (int)t, rows, 1, max_nhwc_rows, &j);
  free(g.mem);
  return NULL;
}

typedef struct gap_nhwc_job {
  int64_t c, n; /* channels, positions per image */
  const float *x;
  float *y;
} gap_nhwc_job;

/* Images s..e: each channel's mean over its n positions, summed in double. */
DVM_VEC static void gap_nhwc_images(void *ctx, int64_t s, int64_t e) {
  const gap_nhwc_job *j = ctx;
  double acc[256];
  for (int64_t i = s; i < e; i++)
    for (int64_t c0 = 0; c0 < j->c; c0 += 256) { /* channels in blocks of 256 */
      int64_t cn = j->c - c0 < 256 ? j->c - c0 : 256;
      for (int64_t k = 0; k < cn; k++) acc[k] = 0;
      for (int64_t p = 0; p < j->n; p++) {
        const float *v = j->x + (i * j->n + p) * j->c + c0;
        _Pragma("omp simd") for (int64_t k = 0; k < cn; k++) acc[k] += v[k];
      }
      for (int64_t k = 0; k < cn; k++) j->y[i * j->c + c0 + k] = j->n ? (float)(acc[k] / (double)j->n) : NAN;
    }
}

static dvm_status *global_average_pool_nhwc(const dvm_kernel_args *a) {
  const char *op = "global_average_pool_nhwc";
  int64_t want[DVM_MAX_RANK];
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (!st && a->nattrs != 0)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes no attributes, got %d", op, a->nattrs);
  if (!st) st = dvm_global_pool_setup(op, a->in[0]->rank, a->in[0]->dims, want);
  if (!st) st = check(a, op, 1, 1u << DVM_F32, want);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  int64_t images = x->dims[0], c = x->dims[1];
  if (images * c == 0) return NULL;
  int64_t n = dvm_tensor_numel(x) / (images * c), t = dvm_kargs_threads(a);
  if (t > images * c * n / MIN_WORK) t = images * c * n / MIN_WORK;
  gap_nhwc_job j = {c, n, dvm_tensor_ptr(x), dvm_tensor_ptr(a->out[0])};
  dvm_par_for(t < 1 ? 1 : (int)t, images, 1, gap_nhwc_images, &j);
  return NULL;
}

static dvm_status *max_pool(const dvm_kernel_args *a) { return window_pool(a, POOL_MAX); }
static dvm_status *average_pool(const dvm_kernel_args *a) { return window_pool(a, POOL_AVERAGE); }
static dvm_status *lp_pool(const dvm_kernel_args *a) { return window_pool(a, POOL_LP); }
static dvm_status *global_average_pool(const dvm_kernel_args *a) { return global_pool(a, false); }
static dvm_status *global_max_pool(const dvm_kernel_args *a) { return global_pool(a, true); }

const dvm_kernel_def dvm_cpu_pool_kernels[] = {
    {"max_pool", DVM_DEVICE_CPU, max_pool, "pool", .form = DVM_FORM_WINDOW_MAX},
    {"average_pool", DVM_DEVICE_CPU, average_pool, "pool", .form = DVM_FORM_WINDOW_AVERAGE},
    {"lp_pool", DVM_DEVICE_CPU, lp_pool, "pool"},
    {"global_average_pool", DVM_DEVICE_CPU, global_average_pool, "global_pool", .form = DVM_FORM_ROWS_GLOBAL_MEAN},
    {"global_max_pool", DVM_DEVICE_CPU, global_max_pool, "global_pool"},
    {"max_pool_nhwc", DVM_DEVICE_CPU, max_pool_nhwc, "pool"},
    {"global_average_pool_nhwc", DVM_DEVICE_CPU, global_average_pool_nhwc, "global_pool"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
