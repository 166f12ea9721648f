/* Resize with ONNX semantics (opset 11-19), any rank; geometry and checks in
 * shapefuncs/window.h, shape function "resize".
 *
 *   resize(in: X; attrs: sizes:shape, mode:int, coordinate_transformation_mode:int,
 *          nearest_mode:int [, cubic_coeff_a:float, exclude_outside:int,
 *          antialias:int [, scale_0:float, ..., scale_{rank-1}:float]]) -> Y [sizes]
 *
 *   mode: 0 nearest, 1 linear (n-linear over every resized dim), 2 cubic.
 *   coordinate_transformation_mode: 0 half_pixel, 1 asymmetric, 2 align_corners,
 *     3 pytorch_half_pixel, 4 tf_half_pixel_for_nearest, 5 half_pixel_symmetric,
 *     6 tf_crop_and_resize (its roi start and end per dim and
 *     extrapolation_value follow the scales: an output whose coordinate
 *     along any dim falls outside [0, in - 1] is extrapolation_value; f32).
 *   nearest_mode: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
 *   cubic_coeff_a (default -0.75), exclude_outside and antialias (default 0)
 *     as in ONNX. The scales, when given, are the model's (ONNX maps output
 *     to input coordinates with them, not with sizes / input, and they differ
 *     when sizes were rounded or keep_aspect_ratio_policy applied); without
 *     them the scale of a dim is sizes[d] / X.dims[d]. The compiler turns
 *     ONNX scales into sizes with dvm_resize_scaled_size and `axes` into
 *     full-rank sizes and scales.
 *   A dim kept at its size with scale 1 is copied as is in every mode (the
 *     batch and channel dims of an image; ONNX's reference would shift them
 *     by one under tf_half_pixel_for_nearest with a ceil rounding, which
 *     ONNX Runtime does not have at all). With scales given, align_corners,
 *     pytorch_half_pixel and half_pixel_symmetric take the output length
 *     as in * scale, not as the whole size, as ONNX's reference and its
 *     test data do (ONNX Runtime uses the size: the two differ for scales
 *     that do not give whole sizes).
 *   dtypes: nearest any (it moves elements); linear and cubic f32.
 *
 * Each dim gets a table of taps: per output index, the input indices and
 * weights that make it (nearest 1, linear 2, cubic 4, antialias more),
 * computed once per call in double. Dims whose table is the identity in
 * front fold into one batch dim. An output row (all dims but the last) is
 * then the weighted sum of the input rows that the taps of its outer dims
 * select, each read through the last dim's taps (a nearest upscale of it
 * by a whole factor, each input repeated in turn, as a stream). */
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

/* Below this many output elements, one thread is faster. */
#define MIN_CHUNK ((int64_t)1 << 14)

/* Antialias taps per output at most (a downscale by 1 / 1024 or so). */
#define MAX_TAPS 4096

typedef struct axis {
  int64_t in, out, taps;
  int64_t *idx;  /* out * taps input indices, clamped into [0, in) */
  float *w;      /* out * taps weights (linear and cubic) */
  bool *outside; /* tf_crop_and_resize: per output, extrapolated; else NULL */
  bool identity;
  int64_t repeat; /* nearest, out = in * repeat, output o from input o / repeat; else 0 */
} axis;

/* The ONNX cubic convolution kernel with coefficient a at distance x. */
static double cubic(double x, double a) {
  x = fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/* The input index nearest x under ONNX nearest_mode. */
static int64_t nearest(dvm_resize_nearest mode, double x) {
  double f = floor(x);
  switch (mode) {
  case DVM_RESIZE_ROUND_PREFER_FLOOR:
    return (int64_t)(x - f == 0.5 ? f : round(x));
  case DVM_RESIZE_ROUND_PREFER_CEIL:
    return (int64_t)(x - f == 0.5 ? f + 1 : round(x));
  case DVM_RESIZE_FLOOR:
    return (int64_t)f;
  default:
    return (int64_t)ceil(x);
  }
}

/* Whether dim d of in -> out elements is copied as is. */
static bool copies(const dvm_resize *r, int d, int64_t in, int64_t out) {
  return in == out && r->scale[d] == 1 &&
         (r->coord != DVM_RESIZE_TF_CROP_AND_RESIZE || (r->roi_start[d] == 0 && r->roi_end[d] == 1));
}

/* Taps per output index along a dim of scale `scale` (ONNX's reference:
 * linear and cubic read n taps around x, n/2 on each side of it, from an
 * input padded by its edge values; antialias widens n by 1 / scale when
 * downscaling). */
static double taps_for(const dvm_resize *r, int d, const axis *ax) {
  double scale = r->scale[d];
  if (r->mode == DVM_RESIZE_NEAREST || copies(r, d, ax->in, ax->out)) return 1;
  double half = r->mode == DVM_RESIZE_LINEAR ? 1 : 2;
  if (!r->antialias || scale >= 1) return 2 * half;
  /* from start = floor(-half / scale) + 1 to 2 - start, as the reference */
  return 2 - 2 * (floor(-half / scale) + 1);
}

/* The weight of tap t of n for an input at `ratio` past tap n/2 - 1 (the
 * tap left of x), with the filter stretched by 1 / s. */
static double tap_weight(const dvm_resize *r, int64_t t, int64_t n, double ratio, double s) {
  double d = ((double)(t - n / 2 + 1) - ratio) * s;
  return r->mode == DVM_RESIZE_LINEAR ? fmax(0.0, 1 - fabs(d)) : cubic(d, r->cubic_a);
}

/* f where a nearest axis repeats each input f > 1 times in turn (an
 * integer upscale, as FPNs' asymmetric floor ones), else 0. */
static int64_t repeat_of(const axis *ax) {
  if (ax->in <= 0 || ax->out % ax->in || ax->out == ax->in) return 0;
  int64_t f = ax->out / ax->in;
  for (int64_t o = 0; o < ax->out; o++)
    if (ax->idx[o] != o / f) return 0;
  return f;
}

/* Whether the taps of `ax` copy input o to output o. */
static bool axis_is_identity(const axis *ax) {
  if (ax->in != ax->out) return false;
  for (int64_t o = 0; o < ax->out; o++) {
    float at_o = 0;
    for (int64_t t = 0; t < ax->taps; t++) {
      float w = ax->w ? ax->w[o * ax->taps + t] : 1;
      if (ax->idx[o * ax->taps + t] == o)
        at_o += w;
      else if (w != 0)
        return false;
    }
    if (at_o != 1) return false;
  }
  return true;
}

static void axis_fill(const dvm_resize *r, int d, axis *ax) {
  double scale = r->scale[d];
  /* antialias stretches the filter when downscaling */
  double s = r->antialias && scale < 1 ? scale : 1.0;
  bool norm = s < 1 || r->exclude_outside; /* plain weights sum to 1 */
  int64_t n = ax->taps, in = ax->in;
  if (copies(r, d, in, ax->out)) { /* copied as is, whatever the coordinate mode */
    for (int64_t o = 0; o < in; o++) {
      ax->idx[o] = o;
      if (ax->w) ax->w[o] = 1;
    }
    ax->identity = true;
    if (ax->outside) memset(ax->outside, 0, (size_t)in);
    return;
  }
  /* beyond this every tap is outside X: the same taps, and no overflow */
  double far = (double)(in + n + 2);
  for (int64_t o = 0; o < ax->out; o++) {
    double x = dvm_resize_coord_in(r, d, o, in, ax->out);
    if (ax->outside) ax->outside[o] = !(x >= 0 && x <= (double)(in - 1));
    x = fmin(fmax(x, -far), far);
    int64_t *idx = ax->idx + o * n;
    if (r->mode == DVM_RESIZE_NEAREST) {
      int64_t i = nearest(r->nearest, x);
      idx[0] = i < 0 ? 0 : i >= in ? in - 1 : i;
      continue;
    }
    /* the tap left of x; an integer x counts as the right end of its
     * interval (ratio 1), as the reference has it */
    double f = floor(x);
    int64_t left = (int64_t)f - (x == f);
    double ratio = x - (double)left, sum = 0;
    for (int64_t t = 0; t < n; t++) {
      int64_t i = left + t - n / 2 + 1;
      bool out = i < 0 || i >= in;
      idx[t] = i < 0 ? 0 : i >= in ? in - 1 : i; /* the edge value stands for outside */
      if (!(r->exclude_outside && out)) sum += tap_weight(r, t, n, ratio, s);
    }
    for (int64_t t = 0; t < n; t++) {
      int64_t i = left + t - n / 2 + 1;
      double w = r->exclude_outside && (i < 0 || i >= in) ? 0 : tap_weight(r, t, n, ratio, s);
      ax->w[o * n + t] = (float)(norm && sum != 0 ? w / sum : w);
    }
  }
  ax->identity = axis_is_identity(ax);
  ax->repeat = r->mode == DVM_RESIZE_NEAREST && !ax->outside ? repeat_of(ax) : 0;
}

/* Nearest: y rows gathered through the last dim's indices; elements are
 * moved as bytes of their size. */
#define NEAREST_ROW(name, T)                                                            \
  DVM_VEC static void name(const void *src, void *dst, const int64_t *idx, int64_t n) { \
    const T *s = src;                                                                   \
    T *d = dst;                                                                         \
    for (int64_t x = 0; x < n; x++) d[x] = s[idx[x]];                                   \
  }
NEAREST_ROW(row_1, uint8_t)
NEAREST_ROW(row_2, uint16_t)
NEAREST_ROW(row_4, uint32_t)
NEAREST_ROW(row_8, uint64_t)

typedef void (*row_fn)(const void *, void *, const int64_t *, int64_t);

/* Nearest by an integer factor f: each of n inputs f times in turn, a
 * stream instead of a gather through the index table (2: unrolled). */
#define REPEAT_ROW(name, T)                                                             \
  DVM_VEC static void name(const void *src, void *dst, int64_t f, int64_t n) {          \
    const T *s = src;                                                                   \
    T *d = dst;                                                                         \
    if (f == 2) {                                                                       \
      _Pragma("omp simd") for (int64_t x = 0; x < n; x++) {                             \
        T v = s[x];                                                                     \
        d[2 * x] = v;                                                                   \
        d[2 * x + 1] = v;                                                               \
      }                                                                                 \
      return;                                                                           \
    }                                                                                   \
    for (int64_t x = 0; x < n; x++)                                                     \
      for (int64_t k = 0; k < f; k++) d[x * f + k] = s[x];                              \
  }
REPEAT_ROW(repeat_1, uint8_t)
REPEAT_ROW(repeat_2, uint16_t)
REPEAT_ROW(repeat_4, uint32_t)
REPEAT_ROW(repeat_8, uint64_t)

typedef void (*repeat_fn)(const void *, void *, int64_t, int64_t);

static repeat_fn repeat_for(size_t esz) {
  return esz == 1 ? repeat_1 : esz == 2 ? repeat_2 : esz == 4 ? repeat_4 : repeat_8;
}

/* y += wc * (the row src read through N taps per output, idx and w). */
#define LERP_TAPS(N)                                                               \
  for (int64_t x = 0; x < out; x++) {                                              \
    float s = 0;                                                                   \
    for (int64_t t = 0; t < (N); t++) s += src[idx[x * (N) + t]] * w[x * (N) + t]; \
    y[x] += wc * s;                                                                \
  }

/* y += wc * (the row src read through the taps of `ax`); the common tap
 * counts get loops of a known length. */
DVM_VEC static void lerp_row(const float *src, float *y, const axis *ax, float wc) {
  int64_t n = ax->taps, out = ax->out;
  const int64_t *idx = ax->idx;
  const float *w = ax->w;
  if (ax->identity) {
#pragma omp simd
    for (int64_t x = 0; x < out; x++) y[x] += wc * src[x];
  } else if (n == 2) {
    LERP_TAPS(2)
  } else if (n == 4) {
    LERP_TAPS(4)
  } else {
    LERP_TAPS(n)
  }
}

typedef struct plan {
  int rank; /* dims after folding the identity ones in front */
  axis ax[DVM_MAX_RANK];
  int64_t stride[DVM_MAX_RANK]; /* input element stride of each dim */
  int64_t rows, combos;         /* output rows; input rows per output row at most */
  size_t esz;
  bool nearest;
  float extrapolation;
} plan;

/* Output rows [r0, r1): off and wt hold plan->combos entries of scratch. */
static void run_rows(const plan *p, const char *x, char *y, int64_t r0, int64_t r1, int64_t *off,
                     float *wt) {
  int last = p->rank - 1;
  const axis *in = &p->ax[last];
  row_fn gather = NULL;
  repeat_fn repeat = NULL;
  if (p->nearest && p->esz <= 8) gather = p->esz == 1 ? row_1 : p->esz == 2 ? row_2 : p->esz == 4 ? row_4 : row_8;
  if (gather && in->repeat) repeat = repeat_for(p->esz);
  int64_t prev = -1;
  for (int64_t row = r0; row < r1; row++) {
    /* the row's outer indices, and the input rows its taps select */
    int64_t o[DVM_MAX_RANK], rest = row, nc = 1;
    bool outside = false;
    for (int d = last - 1; d >= 0; d--) {
      o[d] = rest % p->ax[d].out;
      rest /= p->ax[d].out;
      outside |= p->ax[d].outside && p->ax[d].outside[o[d]];
    }
    char *yr = y + row * in->out * (int64_t)p->esz;
    if (outside) { /* tf_crop_and_resize outside X (f32) */
      for (int64_t i = 0; i < in->out; i++) ((float *)yr)[i] = p->extrapolation;
      prev = -1;
      continue;
    }
    off[0] = 0;
    wt[0] = 1;
    for (int d = 0; d < last; d++) {
      const axis *ax = &p->ax[d];
      int64_t n = ax->taps, base = o[d] * n;
      for (int64_t c = nc - 1; c >= 0; c--) { /* back to front: c * n >= c */
        int64_t oc = off[c];
        float wc = wt[c];
        for (int64_t t = n - 1; t >= 0; t--) {
          off[c * n + t] = oc + ax->idx[base + t] * p->stride[d];
          wt[c * n + t] = ax->w ? wc * ax->w[base + t] : wc;
        }
      }
      nc *= n;
    }
    if (p->nearest) {
      /* upscaling reads one input row into several output rows in turn */
      if (row > r0 && off[0] == prev)
        memcpy(yr, yr - in->out * (int64_t)p->esz, (size_t)in->out * p->esz);
      else if (repeat)
        repeat(x + off[0] * (int64_t)p->esz, yr, in->repeat, in->in);
      else if (gather)
        gather(x + off[0] * (int64_t)p->esz, yr, in->idx, in->out);
      else /* elements of trailing copied dims (NHWC's channels) */
        for (int64_t i = 0; i < in->out; i++)
          memcpy(yr + i * (int64_t)p->esz, x + (off[0] + in->idx[i]) * (int64_t)p->esz, p->esz);
      prev = off[0];
    } else {
      memset(yr, 0, sizeof(float) * (size_t)in->out);
      for (int64_t c = 0; c < nc; c++)
        if (wt[c] != 0) lerp_row((const float *)x + off[c], (float *)yr, in, wt[c]);
    }
    if (in->outside)
      for (int64_t i = 0; i < in->out; i++)
        if (in->outside[i]) ((float *)yr)[i] = p->extrapolation;
  }
}

static dvm_status *check(const dvm_kernel_args *a, dvm_resize *r, int64_t *want) {
  dvm_status *st = dvm_kargs_check(a, "resize", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  st = dvm_resize_setup(x->rank, x->dims, a->attrs, a->nattrs, r, want);
  if (st) return st;
  if (x->dtype != y->dtype ||
      ((r->mode != DVM_RESIZE_NEAREST || r->coord == DVM_RESIZE_TF_CROP_AND_RESIZE) && x->dtype != DVM_F32)) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "resize: dtypes %s: want X and Y of one dtype, f32 for linear, cubic and "
                          "tf_crop_and_resize",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  if (y->rank != x->rank || memcmp(y->dims, want, sizeof(int64_t) * x->rank) != 0) {
    char sy[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "resize: output Y %s != sizes %s",
                          dvm_shape_str(sy, y->rank, y->dims), dvm_shape_str(sw, x->rank, want));
  }
  return NULL;
}

/* run_rows over the pool (par.h), with each thread's slice of the
 * offsets and weights scratch. */
typedef struct rows_job {
  const plan *p;
  const char *x;
  char *y;
  int64_t *off;
  float *wt;
} rows_job;

static void rows_range(void *ctx, int64_t s, int64_t e) {
  const rows_job *j = ctx;
  int64_t t = dvm_par_slot();
  run_rows(j->p, j->x, j->y, s, e, j->off + t * j->p->combos, j->wt + t * j->p->combos);
}

/* Nearest by whole factors fw of the last dim and fh of the one before
 * (1 where that one is copied), everything in front copied: input rows in
 * order, each streamed into its fh output rows, with none of run_rows'
 * index arithmetic per output row (most of the time on rows of 10 to 40
 * elements: a YOLO neck's x2 upsample over 1x256x10x10 took 3x ONNX
 * Runtime's time). */
typedef struct repeat_job {
  repeat_fn fn;
  const char *x;
  char *y;
  int64_t w, fw, fh;
  size_t esz;
} repeat_job;

static void repeat_range(void *ctx, int64_t s, int64_t e) {
  const repeat_job *j = ctx;
  size_t out = (size_t)(j->w * j->fw) * j->esz;
  for (int64_t r = s; r < e; r++) {
    char *d = j->y + (size_t)(r * j->fh) * out;
    for (int64_t k = 0; k < j->fh; k++) /* again from L1: cheaper than a call of memcpy */
      j->fn(j->x + (size_t)(r * j->w) * j->esz, d + (size_t)k * out, j->fw, j->w);
  }
}

static dvm_status *resize(const dvm_kernel_args *a) {
  dvm_resize r;
  int64_t want[DVM_MAX_RANK];
  dvm_status *st = check(a, &r, want);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int64_t total = dvm_tensor_numel(y);
  if (total == 0) return NULL;
  plan p = {.esz = dvm_dtype_size((dvm_dtype)x->dtype),
            .nearest = r.mode == DVM_RESIZE_NEAREST,
            .rows = 1,
            .combos = 1,
            .extrapolation = (float)r.extrapolation};
  bool crop = r.coord == DVM_RESIZE_TF_CROP_AND_RESIZE;
  int64_t cells = 0;
  axis all[DVM_MAX_RANK];
  for (int d = 0; d < x->rank; d++) {
    all[d] = (axis){.in = x->dims[d], .out = want[d]};
    double taps = taps_for(&r, d, &all[d]);
    if (taps > MAX_TAPS)
      return dvm_status_new(DVM_UNIMPLEMENTED,
                            "resize: antialias at scale %g of dim %d needs %.0f taps per output, "
                            "over %d",
                            r.scale[d], d, taps, MAX_TAPS);
    all[d].taps = (int64_t)taps;
    cells += want[d] * all[d].taps;
  }
  int64_t flags = 0;
  for (int d = 0; crop && d < x->rank; d++) flags += want[d];
  char *mem = malloc((size_t)cells * (sizeof(int64_t) + sizeof(float)) + (size_t)flags);
  if (!mem) return dvm_status_new(DVM_OUT_OF_MEMORY, "resize: no memory for tap tables");
  int64_t *ip = (int64_t *)mem;
  float *wp = (float *)(mem + (size_t)cells * sizeof(int64_t));
  bool *fp = (bool *)(mem + (size_t)cells * (sizeof(int64_t) + sizeof(float)));
  for (int d = 0; d < x->rank; d++) {
    all[d].idx = ip;
    all[d].w = p.nearest ? NULL : wp;
    all[d].outside = crop ? fp : NULL;
    ip += want[d] * all[d].taps;
    wp += want[d] * all[d].taps;
    fp += crop ? want[d] : 0;
    axis_fill(&r, d, &all[d]);
  }
  /* nearest: copied dims at the end make one element of their size where
   * that is over 8 bytes (NHWC's channels: rows of memcpy, not a gather
   * per element) */
  int rank = x->rank, keep = rank;
  size_t wide = p.esz;
  while (p.nearest && !crop && keep > 1 && all[keep - 1].identity) wide *= (size_t)all[--keep].in;
  if (wide > 8) p.esz = wide, rank = keep;
  /* identity dims in front fold into one; the last dim always stays */
  int first = 0;
  int64_t batch = 1;
  while (first < rank - 1 && all[first].identity) batch *= all[first++].in;
  p.ax[p.rank++] = (axis){.in = batch, .out = batch, .taps = 1, .idx = NULL, .outside = NULL, .identity = true};
  for (int d = first; d < rank; d++) p.ax[p.rank++] = all[d];
  int64_t s = 1;
  for (int d = p.rank - 1; d >= 0; d--) {
    p.stride[d] = s;
    s *= p.ax[d].in;
  }
  /* the batch dim's taps: index o with weight 1 */
  int64_t *bidx = malloc(sizeof(int64_t) * (size_t)(batch > 0 ? batch : 1));
  if (!bidx) {
    free(mem);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "resize: no memory for tap tables");
  }
  for (int64_t b = 0; b < batch; b++) bidx[b] = b;
  p.ax[0].idx = bidx;
  for (int d = 0; d < p.rank - 1; d++) {
    p.rows *= p.ax[d].out;
    p.combos *= p.ax[d].taps;
  }
  int64_t nt = total / MIN_CHUNK, threads = dvm_kargs_threads(a);
  if (nt > threads) nt = threads;
  if (nt > p.rows) nt = p.rows;
  if (nt < 1) nt = 1;
  const axis *w = &p.ax[p.rank - 1], *h = p.rank == 3 ? &p.ax[1] : NULL;
  if (p.nearest && p.esz <= 8 && w->repeat && p.rank <= 3 && (!h || h->repeat)) {
    repeat_job j = {repeat_for(p.esz), dvm_tensor_ptr(x), dvm_tensor_ptr(y), w->in, w->repeat,
                    h ? h->repeat : 1, p.esz};
    dvm_par_for((int)nt, p.ax[0].in * (h ? h->in : 1), 1, repeat_range, &j);
    free(bidx);
    free(mem);
    return NULL;
  }
  int64_t *off = malloc((size_t)(nt * p.combos) * (sizeof(int64_t) + sizeof(float)));
  if (!off) {
    free(bidx);
    free(mem);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "resize: no memory for %lld input rows per output row",
                          (long long)p.combos);
  }
  float *wt = (float *)(off + nt * p.combos);
  const char *px = dvm_tensor_ptr(x);
  char *py = dvm_tensor_ptr(y);
  rows_job j = {&p, px, py, off, wt};
  dvm_par_for((int)nt, p.rows, 1, rows_range, &j);
  free(off);
  free(bidx);
  free(mem);
  return NULL;
}

const dvm_kernel_def dvm_cpu_resize_kernels[] = {
    {"resize", DVM_DEVICE_CPU, resize, "resize", .form = DVM_FORM_RESIZE},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
