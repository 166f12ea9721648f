/* Signal ops with ONNX semantics; shapes from shapefuncs/signal.h. All
 * compute in double and store in the output's dtype (f32 or f64).
 *
 *   hann_window, hamming_window, blackman_window(in: size; attrs:
 *       periodic:int) -> y [size]
 *     n over N = size (periodic) or size - 1 (symmetric): Hann
 *     sin^2(pi n / N), Hamming 25/46 - 21/46 cos(2 pi n / N), Blackman
 *     0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N), as ONNX's reference.
 *   mel_weight_matrix(in: num_mel_bins, dft_length, sample_rate (integer
 *       scalars), lower_edge_hertz, upper_edge_hertz (float scalars)) -> y
 *     [dft_length / 2 + 1, num_mel_bins] triangular filters on the mel
 *     scale, bin edges floor((dft_length + 1) f / sample_rate), as ONNX's
 *     reference computes them.
 *   dft(in: x; attrs: dft_length:int (0: the default), axis:int,
 *       inverse:int, onesided:int) -> y
 *     x [..., 1] real or [..., 2] complex, transformed along `axis` with
 *     length n (the signal cut or zero-padded to n); forward: the n bins,
 *     or the first n / 2 + 1 when onesided; inverse: 1/n sum X e^(+i...),
 *     complex; inverse and onesided: the real signal of a one-sided
 *     spectrum (numpy's irfft: the imaginary parts of the 0 and n / 2 bins
 *     are dropped), y [..., n, 1].
 *   stft(in: signal [batch, length, 1 or 2][, window [frame_length]];
 *       attrs: frame_step:int, frame_length:int (0: the window's or the
 *       signal's length), onesided:int) -> y [batch, frames, bins, 2]
 *     each frame times the window, then its DFT.
 *
 * The transforms are direct sums over a table of n twiddles, O(n^2) per
 * line: meant for the short transforms of feature extraction. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/movement.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/signal.h"

#define F32_F64 (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64))
#define PI 3.14159265358979323846

static dvm_status *oom(const char *op) {
  return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
}

/* The call's operands, as its shape function takes them. */
static int operands(const dvm_kernel_args *a, dvm_value *v, int max) {
  int n = 0;
  for (int i = 0; i < a->nin && n < max; i++) v[n++] = dvm_value_tensor(a->in[i]);
  for (int i = 0; i < a->nattrs && n < max; i++) v[n++] = a->attrs[i];
  return n;
}

static double get(const dvm_tensor *t, int64_t i) {
  return t->dtype == DVM_F64 ? ((const double *)dvm_tensor_ptr(t))[i]
                             : ((const float *)dvm_tensor_ptr(t))[i];
}

static void put(const dvm_tensor *t, int64_t i, double v) {
  if (t->dtype == DVM_F64) ((double *)dvm_tensor_ptr(t))[i] = v;
  else ((float *)dvm_tensor_ptr(t))[i] = (float)v;
}

/* Fails unless output 0 (and, for n_float > 0, inputs from `first_float`
 * on) are f32 or f64 and the output has the shape rank/dims. */
static dvm_status *check_out(const char *op, const dvm_kernel_args *a, int first_float, int rank,
                             const int64_t *dims) {
  const dvm_tensor *y = a->out[0];
  char got[64], sy[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
  bool ok = F32_F64 >> y->dtype & 1;
  for (int i = first_float; i < a->nin; i++) ok = ok && (F32_F64 >> a->in[i]->dtype & 1);
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want f32 or f64 %s", op,
                          dvm_kargs_dtypes(got, sizeof got, a), first_float < a->nin ? "data and output" : "output");
  if (y->rank != rank || memcmp(y->dims, dims, sizeof(int64_t) * (size_t)rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s, want %s", op, dvm_shape_str(sy, y->rank, y->dims),
                          dvm_shape_str(sw, rank, dims));
  return NULL;
}

/* ---- window functions ---- */

typedef enum { HANN, HAMMING, BLACKMAN } window_kind;

static dvm_status *window_fn(const dvm_kernel_args *a, window_kind kind) {
  static const char *const names[] = {"hann_window", "hamming_window", "blackman_window"};
  const char *op = names[kind];
  dvm_value v[2];
  int64_t size;
  int periodic;
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_window_fn_infer(v, operands(a, v, 2), &size, &periodic);
  if (!st) st = check_out(op, a, 1, 1, &size);
  if (st) return st;
  double n1 = (double)(periodic ? size : size - 1);
  for (int64_t i = 0; i < size; i++) {
    double t = 2 * PI * (double)i / n1, y;
    if (kind == HANN) y = pow(sin(PI * (double)i / n1), 2);
    else if (kind == HAMMING) y = 25.0 / 46 - (1 - 25.0 / 46) * cos(t);
    else y = 0.42 - 0.5 * cos(t) + 0.08 * cos(2 * t);
    put(a->out[0], i, y);
  }
  return NULL;
}

static dvm_status *hann_window(const dvm_kernel_args *a) { return window_fn(a, HANN); }
static dvm_status *hamming_window(const dvm_kernel_args *a) { return window_fn(a, HAMMING); }
static dvm_status *blackman_window(const dvm_kernel_args *a) { return window_fn(a, BLACKMAN); }

/* ---- mel_weight_matrix ---- */

static dvm_status *mel_weight_matrix(const dvm_kernel_args *a) {
  static const char op[] = "mel_weight_matrix";
  dvm_value v[5];
  int64_t dims[2], len, rate;
  dvm_status *st = dvm_kargs_check(a, op, 5, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_mel_infer(v, operands(a, v, 5), dims);
  if (!st) st = check_out(op, a, 3, 2, dims);
  if (st) return st;
  int nv;
  if ((st = dvm_movement_ints(op, v, 1, "dft_length", 1, &len, &nv)) ||
      (st = dvm_movement_ints(op, v, 2, "sample_rate", 1, &rate, &nv)))
    return st;
  if (rate < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: sample_rate %lld is not positive", op, (long long)rate);
  if (dvm_tensor_numel(a->in[3]) != 1 || dvm_tensor_numel(a->in[4]) != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: lower_edge_hertz and upper_edge_hertz must have one element", op);
  int64_t mel = dims[1], bins = dims[0];
  int64_t *edge = malloc(sizeof(int64_t) * (size_t)(mel + 2));
  if (!edge) return oom(op);
  /* as the reference: the edges' mel values in f32, the rest in double */
  double lo = (double)(2595.0f * log1pf((float)get(a->in[3], 0) / 700.0f)) / log(10.0);
  double hi = (double)(2595.0f * log1pf((float)get(a->in[4], 0) / 700.0f)) / log(10.0);
  double step = (hi - lo) / (double)(mel + 2);
  for (int64_t i = 0; i < mel + 2; i++) {
    double f = 700 * expm1(((double)i * step + lo) / 2595 * log(10.0));
    edge[i] = (int64_t)floor((double)(len + 1) * f / (double)rate);
  }
  memset(dvm_tensor_ptr(a->out[0]), 0, (size_t)(bins * mel) * dvm_dtype_size((dvm_dtype)a->out[0]->dtype));
  for (int64_t i = 0; i < mel && !st; i++) {
    int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    if (l < 0 || c < l || h < c || h > bins || (c == bins && c > l))
      st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: mel bin %lld spans spectrogram bins %lld..%lld, past the %lld there are",
                          op, (long long)i, (long long)l, (long long)h, (long long)bins);
    if (st) break;
    if (c == l) put(a->out[0], c * mel + i, 1);
    else
      for (int64_t j = l; j <= c && j < bins; j++) put(a->out[0], j * mel + i, (double)(j - l) / (double)(c - l));
    for (int64_t j = c; j < h; j++) put(a->out[0], j * mel + i, (double)(h - j) / (double)(h - c));
  }
  free(edge);
  return st;
}

/* ---- dft, stft ---- */

/* One line of a transform: the m input values (re, im) at x with stride
 * xs, the out values at y with stride ys; tw holds cos, sin of 2 pi k / n. */
static void dft_line(const double *xr, const double *xi, int64_t m, double *yr, double *yi, int64_t nout,
                     int64_t n, const double *tw, int inverse) {
  double sign = inverse ? 1 : -1, scale = inverse ? 1.0 / (double)n : 1;
  int64_t use = m < n ? m : n;
  for (int64_t k = 0; k < nout; k++) {
    double sr = 0, si = 0;
    for (int64_t j = 0, at = 0; j < use; j++, at = (at + k) % n) {
      double c = tw[2 * at], s = sign * tw[2 * at + 1];
      sr += xr[j] * c - xi[j] * s;
      si += xr[j] * s + xi[j] * c;
    }
    yr[k] = sr * scale;
    yi[k] = si * scale;
  }
}

/* numpy's irfft of m one-sided bins to n real values. */
static void irfft_line(const double *xr, const double *xi, int64_t m, double *y, int64_t n, const double *tw) {
  int64_t half = n / 2, use = m < half + 1 ? m : half + 1;
  for (int64_t t = 0; t < n; t++) {
    double s = use > 0 ? xr[0] : 0;
    for (int64_t k = 1, at = t % n; k < use; k++, at = (at + t) % n) {
      double w = (n % 2 == 0 && k == half) ? 1 : 2; /* Nyquist bin once, the others with their mirror */
      s += w * (xr[k] * tw[2 * at] - xi[k] * tw[2 * at + 1]);
    }
    y[t] = s / (double)n;
  }
  (void)xi;
}

static double *twiddles(int64_t n) {
  double *tw = malloc(sizeof(double) * 2 * (size_t)n);
  for (int64_t k = 0; tw && k < n; k++) {
    tw[2 * k] = cos(2 * PI * (double)k / (double)n);
    tw[2 * k + 1] = sin(2 * PI * (double)k / (double)n);
  }
  return tw;
}

static dvm_status *dft(const dvm_kernel_args *a) {
  static const char op[] = "dft";
  dvm_value v[5];
  dvm_dft_info p;
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_dft_infer(v, operands(a, v, 5), &p);
  if (!st) st = check_out(op, a, 0, p.rank, p.dims);
  if (!st && a->in[0]->dtype != a->out[0]->dtype)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s, input %s: want one dtype", op,
                        dvm_dtype_name((dvm_dtype)a->out[0]->dtype), dvm_dtype_name((dvm_dtype)a->in[0]->dtype));
  if (st || dvm_tensor_numel(a->out[0]) == 0) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int r = p.rank;
  int64_t outer = 1, inner = 1, m = x->dims[p.axis], nout = p.dims[p.axis];
  for (int i = 0; i < p.axis; i++) outer *= x->dims[i];
  for (int i = p.axis + 1; i < r - 1; i++) inner *= x->dims[i];
  int64_t xc = x->dims[r - 1], yc = p.dims[r - 1], big = m > nout ? m : nout;
  double *tw = twiddles(p.n), *buf = malloc(sizeof(double) * 4 * (size_t)(big > p.n ? big : p.n));
  if (!tw || !buf) {
    free(tw), free(buf);
    return oom(op);
  }
  double *xr = buf, *xi = buf + big, *yr = buf + 2 * big, *yi = buf + 3 * big;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      for (int64_t j = 0; j < m; j++) {
        int64_t at = ((o * m + j) * inner + in) * xc;
        xr[j] = get(x, at);
        xi[j] = xc == 2 ? get(x, at + 1) : 0;
      }
      if (p.inverse && p.onesided) irfft_line(xr, xi, m, yr, p.n, tw);
      else dft_line(xr, xi, m, yr, yi, nout, p.n, tw, p.inverse);
      for (int64_t k = 0; k < nout; k++) {
        int64_t at = ((o * nout + k) * inner + in) * yc;
        put(y, at, yr[k]);
        if (yc == 2) put(y, at + 1, yi[k]);
      }
    }
  free(tw);
  free(buf);
  return NULL;
}

static dvm_status *stft(const dvm_kernel_args *a) {
  static const char op[] = "stft";
  dvm_value v[5];
  dvm_stft_info p;
  dvm_status *st = dvm_kargs_check_range(a, op, 1, 2, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_stft_infer(v, operands(a, v, 5), &p);
  if (!st) st = check_out(op, a, 0, 4, p.dims);
  if (st || dvm_tensor_numel(a->out[0]) == 0) return st;
  const dvm_tensor *x = a->in[0], *w = a->nin > 1 ? a->in[1] : NULL, *y = a->out[0];
  int64_t l = p.frame, xc = x->dims[2];
  double *tw = twiddles(l), *buf = malloc(sizeof(double) * 4 * (size_t)l);
  if (!tw || !buf) {
    free(tw), free(buf);
    return oom(op);
  }
  double *xr = buf, *xi = buf + l, *yr = buf + 2 * l, *yi = buf + 3 * l;
  for (int64_t b = 0; b < p.batch; b++)
    for (int64_t f = 0; f < p.frames; f++) {
      for (int64_t j = 0; j < l; j++) {
        int64_t at = (b * p.len + f * p.step + j) * xc;
        double g = w ? get(w, j) : 1;
        xr[j] = get(x, at) * g;
        xi[j] = xc == 2 ? get(x, at + 1) * g : 0;
      }
      dft_line(xr, xi, l, yr, yi, p.bins, l, tw, 0);
      for (int64_t k = 0; k < p.bins; k++) {
        int64_t at = ((b * p.frames + f) * p.bins + k) * 2;
        put(y, at, yr[k]);
        put(y, at + 1, yi[k]);
      }
    }
  free(tw);
  free(buf);
  return NULL;
}

const dvm_kernel_def dvm_cpu_signal_kernels[] = {
    {"hann_window", DVM_DEVICE_CPU, hann_window, "window"},
    {"hamming_window", DVM_DEVICE_CPU, hamming_window, "window"},
    {"blackman_window", DVM_DEVICE_CPU, blackman_window, "window"},
    {"mel_weight_matrix", DVM_DEVICE_CPU, mel_weight_matrix, "mel_weight_matrix"},
    {"dft", DVM_DEVICE_CPU, dft, "dft", .dtypes = F32_F64},
    {"stft", DVM_DEVICE_CPU, stft, "stft", .dtypes = F32_F64},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
