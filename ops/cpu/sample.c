/* Sampling an image at computed points: grid_sample (ONNX GridSample),
 * affine_grid (ONNX AffineGrid: the points of an affine map) and
 * deform_conv (ONNX DeformConv: a convolution read at shifted points); their
 * geometry and checks in shapefuncs/window.h, shape functions of the same
 * names.
 *
 *   grid_sample(in: X, grid; attrs: mode:int, padding_mode:int,
 *               align_corners:int) -> Y
 *
 * dtypes: X, grid and Y f32, or all f64. The arithmetic follows ONNX
 * Runtime's CPU kernel: a normalized coordinate becomes an input coordinate
 * in the tensors' dtype (align_corners: [-1, 1] is [0, len - 1], else
 * [-0.5, len - 0.5]); nearest rounds it half to even; one outside those
 * bounds is clamped into [0, len - 1] (border) or reflected at them
 * (reflection); then nearest reads 1 input element per dim, linear 2 and
 * cubic 4 (Keys' kernel, a = -0.75), each index outside the input reading 0
 * (zeros), its clamp (border) or its reflection (reflection). Cubic with
 * border clamps the taps, not the coordinate, as ONNX Runtime and PyTorch
 * do (ONNX's reference clamps the coordinate first). Any number of
 * spatial dims up to 3, every mode (ONNX Runtime has no 3-D cubic; ONNX's
 * reference does). A NaN coordinate gives NaN. With align_corners a dim of
 * one element reflects every coordinate to 0.
 *
 * Per output point the taps of every dim combine into a list of input
 * offsets and weights, then each channel is the weighted sum. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/par.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/window.h"

/* Below this many output elements, one thread is faster. */
#define MIN_CHUNK ((int64_t)1 << 13)

/* Input elements one output point reads at most: 4 per dim, 3 dims. */
#define MAX_COMBOS 64

/* The input coordinate of normalized coordinate g along a dim of `len`
 * elements, computed in the tensors' dtype as ONNX Runtime does. */
static double denormalize(bool f64, double g, int64_t len, bool align_corners) {
  if (f64) return align_corners ? (g + 1) / 2 * (double)(len - 1) : ((g + 1) * (double)len - 1) / 2;
  float n = (float)g;
  return align_corners ? (n + 1) / 2.f * (float)(len - 1) : ((n + 1) * (float)len - 1) / 2.f;
}

/* x reflected at lo and hi until it lies between them. */
static double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (!(range > 0)) return lo;
  if (x >= lo && x <= hi) return x;
  double d = fmod(x < lo ? lo - x : x - hi, 2 * range);
  /* an even number of reflections leaves d past the near bound */
  if (d > range) return x < lo ? hi - (d - range) : lo + (d - range);
  return x < lo ? lo + d : hi - d;
}

typedef struct dim {
  int64_t len;
  double lo, hi; /* the coordinate bounds */
} dim;

/* Input index i of a tap, or -1 when it reads 0 (zeros padding). */
static int64_t pixel(const dvm_grid_sample *gs, const dim *d, int64_t i) {
  if (i >= 0 && i < d->len) return i;
  if (gs->padding == DVM_GRID_ZEROS) return -1;
  if (gs->padding == DVM_GRID_REFLECTION) i = (int64_t)reflect((double)i, d->lo, d->hi);
  return i < 0 ? 0 : i >= d->len ? d->len - 1 : i;
}

/* Keys' cubic weights of the 4 taps around a point at fraction f past the
 * second, as ONNX Runtime writes them. */
static void cubic_weights(double f, double *w) {
  const double a = -0.75;
  double x = f + 1;
  w[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  w[1] = ((a + 2) * f - (a + 3)) * f * f + 1;
  x = 1 - f;
  w[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
  x = 2 - f;
  w[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

/* The taps of input coordinate x along d: their count, indices and weights. */
static int dim_taps(const dvm_grid_sample *gs, const dim *d, double x, int64_t *idx, double *w) {
  if (isnan(x)) {
    idx[0] = 0;
    w[0] = NAN;
    return 1;
  }
  if (gs->mode == DVM_GRID_NEAREST) x = nearbyint(x);
  if (x < d->lo || x > d->hi) {
    if (gs->padding == DVM_GRID_BORDER && gs->mode != DVM_GRID_CUBIC) x = fmin(fmax(x, 0), (double)(d->len - 1));
    else if (gs->padding == DVM_GRID_REFLECTION) x = reflect(x, d->lo, d->hi);
    else x = fmin(fmax(x, d->lo - 4), d->hi + 4); /* the taps the same (all outside, or at the edge): small indices */
  }
  int n;
  int64_t base;
  if (gs->mode == DVM_GRID_NEAREST) {
    n = 1, base = (int64_t)nearbyint(x), w[0] = 1;
  } else if (gs->mode == DVM_GRID_LINEAR) {
    double f = floor(x);
    n = 2, base = (int64_t)f, w[0] = 1 - (x - f), w[1] = x - f;
  } else {
    double f = floor(x);
    n = 4, base = (int64_t)f - 1;
    cubic_weights(x - f, w);
  }
  for (int t = 0; t < n; t++) idx[t] = pixel(gs, d, base + t);
  return n;
}

/* y[c * ys] = sum of w[k] x[c * xs + off[k]] for each of the C channels. */
#define GATHER(NAME, T)                                                                      \
  static void NAME(const void *xv, void *yv, int64_t channels, int64_t xs, int64_t ys,       \
                   const int64_t *off, const double *w, int n) {                             \
    const T *x = xv;                                                                         \
    T *y = yv;                                                                               \
    for (int64_t c = 0; c < channels; c++) {                                                 \
      double s = 0;                                                                          \
      for (int k = 0; k < n; k++) s += w[k] * (double)x[c * xs + off[k]];                    \
      y[c * ys] = (T)s;                                                                      \
    }                                                                                        \
  }
GATHER(gather_f32, float)
GATHER(gather_f64, double)

typedef struct plan {
  dvm_grid_sample gs;
  int r;                /* spatial dims */
  dim d[DVM_WINDOW_MAX];
  int64_t stride[DVM_WINDOW_MAX]; /* of X's spatial dims */
  int64_t channels, cells, points;
  bool f64;
} plan;

/* Output point p of batch b: the combined taps of its dims, offsets into
 * one channel of X and weights; returns their count. */
static int point_taps(const plan *p, const void *grid, int64_t b, int64_t pt, int64_t *off, double *w) {
  int64_t idx[DVM_WINDOW_MAX][4];
  double wd[DVM_WINDOW_MAX][4];
  int nt[DVM_WINDOW_MAX];
  int64_t at = (b * p->points + pt) * p->r;
  for (int k = 0; k < p->r; k++) { /* the point's coordinate k is of dim r - 1 - k */
    double g = p->f64 ? ((const double *)grid)[at + k] : ((const float *)grid)[at + k];
    int d = p->r - 1 - k;
    nt[d] = dim_taps(&p->gs, &p->d[d], denormalize(p->f64, g, p->d[d].len, p->gs.align_corners), idx[d], wd[d]);
  }
  int n = 1;
  int64_t prev_off[MAX_COMBOS];
  double prev_w[MAX_COMBOS];
  off[0] = 0;
  w[0] = 1;
  for (int d = 0; d < p->r; d++) {
    memcpy(prev_off, off, sizeof(int64_t) * (size_t)n);
    memcpy(prev_w, w, sizeof(double) * (size_t)n);
    int m = 0;
    for (int c = 0; c < n; c++)
      for (int t = 0; t < nt[d]; t++) {
        if (idx[d][t] < 0) continue; /* reads 0 */
        off[m] = prev_off[c] + idx[d][t] * p->stride[d];
        w[m] = prev_w[c] * wd[d][t];
        m++;
      }
    n = m;
  }
  return n;
}

/* grid_sample's output points [s, e) (over batch x points), on the pool
 * (par.h). */
typedef struct points_job {
  const plan *p;
  const char *x, *grid;
  char *y;
  size_t esz;
  void (*gather)(const void *, void *, int64_t, int64_t, int64_t, const int64_t *, const double *, int);
} points_job;

static void points_range(void *ctx, int64_t s, int64_t e) {
  const points_job *j = ctx;
  const plan *p = j->p;
  for (int64_t i = s; i < e; i++) {
    int64_t b = i / p->points, pt = i % p->points, off[MAX_COMBOS];
    double w[MAX_COMBOS];
    int n = point_taps(p, j->grid, b, pt, off, w);
    j->gather(j->x + (size_t)(b * p->channels * p->cells) * j->esz,
              j->y + (size_t)(b * p->channels * p->points + pt) * j->esz, p->channels, p->cells, p->points, off, w, n);
  }
}

static dvm_status *grid_sample(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "grid_sample", 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *grid = a->in[1], *y = a->out[0];
  plan p = {0};
  int64_t want[DVM_MAX_RANK];
  st = dvm_grid_sample_setup(x->rank, x->dims, grid->rank, grid->dims, a->attrs, a->nattrs, &p.gs, want);
  if (st) return st;
  if ((x->dtype != DVM_F32 && x->dtype != DVM_F64) || grid->dtype != x->dtype || y->dtype != x->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "grid_sample: dtypes %s: want X, grid and Y all f32 or all f64",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  if (y->rank != x->rank || memcmp(y->dims, want, sizeof(int64_t) * (size_t)x->rank) != 0) {
    char sy[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "grid_sample: output Y %s, want %s", dvm_shape_str(sy, y->rank, y->dims),
                          dvm_shape_str(sw, x->rank, want));
  }
  int64_t total = dvm_tensor_numel(y);
  if (total == 0) return NULL;
  p.r = x->rank - 2;
  p.f64 = x->dtype == DVM_F64;
  p.channels = x->dims[1];
  p.cells = p.points = 1;
  for (int d = p.r - 1; d >= 0; d--) {
    int64_t len = x->dims[2 + d];
    p.d[d] = (dim){len, p.gs.align_corners ? 0 : -0.5, p.gs.align_corners ? (double)(len - 1) : (double)len - 0.5};
    p.stride[d] = p.cells;
    p.cells *= len;
    p.points *= want[2 + d];
  }
  int64_t work = x->dims[0] * p.points, nt = total / MIN_CHUNK, threads = dvm_kargs_threads(a);
  if (nt > threads) nt = threads;
  if (nt > work) nt = work;
  if (nt < 1) nt = 1;
  const char *px = dvm_tensor_ptr(x), *pg = dvm_tensor_ptr(grid);
  char *py = dvm_tensor_ptr(y);
  size_t esz = p.f64 ? sizeof(double) : sizeof(float);
  points_job j = {&p, px, pg, py, esz, p.f64 ? gather_f64 : gather_f32};
  dvm_par_for((int)nt, work, 1, points_range, &j);
  return NULL;
}

/* The base grid's coordinate i of n along one dim: the centres of n cells
 * spanning [-1, 1], or with align_corners n points from -1 to 1 (one point:
 * 1, as ONNX Runtime has it; ONNX's reference says -1). */
static double base_coord(int64_t i, int64_t n, bool align_corners) {
  if (align_corners) return n > 1 ? -1 + 2 * (double)i / (double)(n - 1) : 1;
  return -1 + (2 * (double)i + 1) / (double)n;
}

/* affine_grid(theta, size; align_corners) -> grid: each point of the base
 * grid (x, y[, z], 1) times its batch's theta. */
static dvm_status *affine_grid(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "affine_grid", 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *theta = a->in[0], *size = a->in[1], *y = a->out[0];
  int align = 0, rank;
  int64_t want[DVM_MAX_RANK];
  if (size->dtype != DVM_I64 || size->rank != 1 || size->dims[0] > DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "affine_grid: size must be an i64 vector of 4 or 5 values");
  st = dvm_attr_count("affine_grid", a->nattrs, 1, 1);
  if (!st) st = dvm_attr_flag("affine_grid", "align_corners", &a->attrs[0], &align);
  if (!st) st = dvm_affine_grid_setup(theta->rank, theta->dims, size->dims[0], dvm_tensor_ptr(size), &rank, want);
  if (st) return st;
  if ((theta->dtype != DVM_F32 && theta->dtype != DVM_F64) || y->dtype != theta->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "affine_grid: dtypes %s: want theta and grid both f32 or f64",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  if (y->rank != rank || memcmp(y->dims, want, sizeof(int64_t) * (size_t)rank) != 0) {
    char sy[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "affine_grid: output grid %s, want %s", dvm_shape_str(sy, y->rank, y->dims),
                          dvm_shape_str(sw, rank, want));
  }
  int r = rank - 2;
  int64_t points = 1;
  for (int d = 0; d < r; d++) points *= want[1 + d];
  bool f64 = theta->dtype == DVM_F64;
  const void *pt = dvm_tensor_ptr(theta);
  void *py = dvm_tensor_ptr(y);
  for (int64_t b = 0; b < want[0]; b++)
    for (int64_t p = 0; p < points; p++) {
      double base[4] = {0, 0, 0, 1}; /* x, y[, z], 1: the innermost dim first */
      int64_t rest = p;
      for (int d = r - 1; d >= 0; d--) {
        base[r - 1 - d] = base_coord(rest % want[1 + d], want[1 + d], align);
        rest /= want[1 + d];
      }
      base[r] = 1;
      for (int k = 0; k < r; k++) {
        double s = 0;
        for (int j = 0; j <= r; j++) {
          int64_t at = (b * r + k) * (r + 1) + j;
          s += (f64 ? ((const double *)pt)[at] : ((const float *)pt)[at]) * base[j];
        }
        int64_t o = (b * points + p) * r + k;
        if (f64) ((double *)py)[o] = s;
        else ((float *)py)[o] = (float)s;
      }
    }
  return NULL;
}

/* X's channel image [H, W] at (h, w), bilinear with 0 outside (the
 * deformable convolution's sampling, torchvision's and ONNX's). */
static double bilinear_zero(const float *img, int64_t H, int64_t W, double h, double w) {
  if (!(h > -1 && h < (double)H && w > -1 && w < (double)W)) return 0;
  double fh = floor(h), fw = floor(w), lh = h - fh, lw = w - fw;
  int64_t h0 = (int64_t)fh, w0 = (int64_t)fw;
  double v = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      int64_t hh = h0 + i, ww = w0 + j;
      if (hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
      v += (i ? lh : 1 - lh) * (j ? lw : 1 - lw) * img[hh * W + ww];
    }
  return v;
}

/* deform_conv(X, W, offset [, B] [, mask]; strides, pads, dilations, group,
 * offset_group, present) -> Y, f32: per batch, the columns of a
 * convolution ([C kH kW] x [oH oW]) read at the offset points (times the
 * mask), then per group W times them, plus B. */
static dvm_status *deform_conv(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check_range(a, "deform_conv", 3, 5, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nattrs != 6 || a->attrs[5].kind != DVM_VAL_INT || a->attrs[5].u.i < 0 || a->attrs[5].u.i > 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "deform_conv: takes 6 attributes, the last (present) 0 to 3");
  int64_t present = a->attrs[5].u.i;
  int nin = 3 + (int)(present & 1) + (int)(present >> 1);
  if (a->nin != nin)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "deform_conv: present = %lld wants %d inputs, got %d", (long long)present,
                          nin, a->nin);
  const dvm_tensor *x = a->in[0], *w = a->in[1], *off = a->in[2], *y = a->out[0];
  const dvm_tensor *b = present & 1 ? a->in[3] : NULL, *m = present & 2 ? a->in[nin - 1] : NULL;
  dvm_window win;
  int64_t group, og, want[DVM_MAX_RANK];
  st = dvm_deform_conv_setup(x->rank, x->dims, w->rank, w->dims, off->rank, off->dims, b ? b->rank : -1,
                             b ? b->dims : NULL, m ? m->rank : -1, m ? m->dims : NULL, a->attrs, 6, &win, &group,
                             &og, want);
  if (st) return st;
  for (int i = 0; i < a->nin; i++)
    if (a->in[i]->dtype != DVM_F32 || y->dtype != DVM_F32) {
      char got[64];
      return dvm_status_new(DVM_INVALID_ARGUMENT, "deform_conv: dtypes %s: want f32", dvm_kargs_dtypes(got, sizeof got, a));
    }
  if (y->rank != 4 || memcmp(y->dims, want, sizeof(int64_t) * 4) != 0) {
    char sy[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "deform_conv: output Y %s, want %s", dvm_shape_str(sy, y->rank, y->dims),
                          dvm_shape_str(sw, 4, want));
  }
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], Wd = x->dims[3], M = want[1], oH = want[2], oW = want[3];
  int64_t kH = w->dims[2], kW = w->dims[3], taps = kH * kW, P = oH * oW, cg = C / group, mg = M / group, cog = C / og;
  if (dvm_tensor_numel(y) == 0) return NULL;
  float *col = malloc(sizeof(float) * (size_t)(C * taps * P > 0 ? C * taps * P : 1));
  if (!col) return dvm_status_new(DVM_OUT_OF_MEMORY, "deform_conv: no memory for %lld columns", (long long)(C * taps * P));
  const float *px = dvm_tensor_ptr(x), *pw = dvm_tensor_ptr(w), *po = dvm_tensor_ptr(off);
  const float *pb = b ? dvm_tensor_ptr(b) : NULL, *pm = m ? dvm_tensor_ptr(m) : NULL;
  float *py = dvm_tensor_ptr(y);
  int threads = dvm_kargs_threads(a);
  for (int64_t n = 0; n < N; n++) {
    /* col[c, tap, p]: channel c at tap `tap` of output point p, shifted */
#pragma omp parallel for num_threads(threads) if (C * taps * P > 4096) schedule(static)
    for (int64_t ct = 0; ct < C * taps; ct++) {
      int64_t c = ct / taps, t = ct % taps, g = c / cog, i = t / kW, j = t % kW;
      const float *img = px + (n * C + c) * H * Wd;
      const float *dh = po + ((n * og + g) * 2 * taps + 2 * t) * P, *dw = dh + P;
      const float *mk = pm ? pm + ((n * og + g) * taps + t) * P : NULL;
      for (int64_t p = 0; p < P; p++) {
        int64_t oh = p / oW, ow = p % oW;
        double h = (double)(oh * win.stride[0] - win.pad_begin[0] + i * win.dilation[0]) + dh[p];
        double wv = (double)(ow * win.stride[1] - win.pad_begin[1] + j * win.dilation[1]) + dw[p];
        double v = bilinear_zero(img, H, Wd, h, wv);
        col[ct * P + p] = (float)(mk ? v * mk[p] : v);
      }
    }
    /* y[n, o] = B[o] + sum over its group's rows of W[o, row] col[row] */
#pragma omp parallel for num_threads(threads) if (M * cg * taps * P > 4096) schedule(static)
    for (int64_t o = 0; o < M; o++) {
      float *yo = py + (n * M + o) * P;
      const float *wo = pw + o * cg * taps, *cols = col + (o / mg) * cg * taps * P;
      for (int64_t p = 0; p < P; p++) yo[p] = pb ? pb[o] : 0;
      for (int64_t k = 0; k < cg * taps; k++) {
        float wk = wo[k];
        const float *ck = cols + k * P;
        for (int64_t p = 0; p < P; p++) yo[p] += wk * ck[p];
      }
    }
  }
  free(col);
  return NULL;
}

const dvm_kernel_def dvm_cpu_sample_kernels[] = {
    {"grid_sample", DVM_DEVICE_CPU, grid_sample, "grid_sample", DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64)},
    {"affine_grid", DVM_DEVICE_CPU, affine_grid, "affine_grid", DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64)},
    {"deform_conv", DVM_DEVICE_CPU, deform_conv, "deform_conv", DVM_DTYPE_BIT(DVM_F32)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
