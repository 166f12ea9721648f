/* Shapes of the signal ops (see signal.h). */
#include <string.h>

#include "kernel.h"
#include "movement.h"
#include "shape.h"
#include "signal.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* Value i as an int: a one-element integer tensor or an int attribute. */
static dvm_status *int_at(const char *fn, const dvm_value *in, int nin, int i, const char *what,
                          int64_t *out) {
  if (i >= nin) return ERR("%s: %s is missing", fn, what);
  if (in[i].kind == DVM_VAL_INT) {
    *out = in[i].u.i;
    return NULL;
  }
  int n;
  dvm_status *st = dvm_movement_ints(fn, in, i, what, 1, out, &n);
  if (!st && n != 1) st = ERR("%s: %s has no value", fn, what);
  return st;
}

dvm_status *dvm_window_fn_infer(const dvm_value *in, int nin, int64_t *size, int *periodic) {
  const char *fn = "window";
  int64_t p;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 2, 1, 1);
  if (!st) st = int_at(fn, in, nin, 0, "size", size);
  if (!st) st = int_at(fn, in, nin, 1, "periodic", &p);
  if (st) return st;
  if (*size < 0) return ERR("%s: size %lld is negative", fn, (long long)*size);
  if (p != 0 && p != 1) return ERR("%s: periodic %lld is not 0 or 1", fn, (long long)p);
  *periodic = (int)p;
  return NULL;
}

dvm_status *dvm_mel_infer(const dvm_value *in, int nin, int64_t *dims) {
  const char *fn = "mel_weight_matrix";
  int64_t mel, len;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 5, 5, 1, 1);
  if (!st) st = int_at(fn, in, nin, 0, "num_mel_bins", &mel);
  if (!st) st = int_at(fn, in, nin, 1, "dft_length", &len);
  if (st) return st;
  if (mel < 0 || len < 1)
    return ERR("%s: num_mel_bins %lld and dft_length %lld: want >= 0 and >= 1", fn, (long long)mel,
               (long long)len);
  dims[0] = len / 2 + 1;
  dims[1] = mel;
  return NULL;
}

dvm_status *dvm_dft_infer(const dvm_value *in, int nin, dvm_dft_info *p) {
  const char *fn = "dft";
  int r;
  const int64_t *d;
  int64_t len, axis, inv, one;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 5, 5, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = int_at(fn, in, nin, 1, "dft_length", &len);
  if (!st) st = int_at(fn, in, nin, 2, "axis", &axis);
  if (!st) st = int_at(fn, in, nin, 3, "inverse", &inv);
  if (!st) st = int_at(fn, in, nin, 4, "onesided", &one);
  if (st) return st;
  char s[DVM_SHAPE_STR_SIZE];
  if (r < 2 || (d[r - 1] != 1 && d[r - 1] != 2))
    return ERR("%s: input %s must be [..., 1] (real) or [..., 2] (complex)", fn, dvm_shape_str(s, r, d));
  if (axis < -r || axis >= r) return ERR("%s: axis %lld is out of range for rank %d", fn, (long long)axis, r);
  p->axis = (int)(axis < 0 ? axis + r : axis);
  if (p->axis == r - 1) return ERR("%s: axis %lld is the last dim of %s (real, imaginary)", fn, (long long)axis, dvm_shape_str(s, r, d));
  if ((inv != 0 && inv != 1) || (one != 0 && one != 1))
    return ERR("%s: inverse %lld and onesided %lld must be 0 or 1", fn, (long long)inv, (long long)one);
  int64_t m = d[p->axis];
  p->n = len > 0 ? len : inv && one ? 2 * (m - 1) : m;
  if (p->n < 1) return ERR("%s: transform length %lld of %s is not positive", fn, (long long)p->n, dvm_shape_str(s, r, d));
  p->rank = r;
  p->inverse = (int)inv;
  p->onesided = (int)one;
  memcpy(p->dims, d, sizeof(int64_t) * (size_t)r);
  p->dims[p->axis] = !inv && one ? p->n / 2 + 1 : p->n;
  p->dims[r - 1] = inv && one ? 1 : 2;
  return NULL;
}

dvm_status *dvm_stft_infer(const dvm_value *in, int nin, dvm_stft_info *p) {
  const char *fn = "stft";
  int r, rw = -1;
  const int64_t *d, *dw = NULL;
  int64_t step, frame, one;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 4, 5, 1, 1);
  int win = nin == 5;
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st && win) st = dvm_shape_arg(fn, &in[1], 1, &rw, &dw);
  if (!st) st = int_at(fn, in, nin, 1 + win, "frame_step", &step);
  if (!st) st = int_at(fn, in, nin, 2 + win, "frame_length", &frame);
  if (!st) st = int_at(fn, in, nin, 3 + win, "onesided", &one);
  if (st) return st;
  char s[DVM_SHAPE_STR_SIZE];
  if (r != 3 || (d[2] != 1 && d[2] != 2))
    return ERR("%s: signal %s must be [batch, length, 1 or 2]", fn, dvm_shape_str(s, r, d));
  if (win && rw != 1) return ERR("%s: window %s must have rank 1", fn, dvm_shape_str(s, rw, dw));
  if (frame <= 0) frame = win ? dw[0] : d[1];
  if (win && dw[0] != frame)
    return ERR("%s: window %s does not have frame_length %lld", fn, dvm_shape_str(s, rw, dw), (long long)frame);
  if (step < 1) return ERR("%s: frame_step %lld is not positive", fn, (long long)step);
  if (one != 0 && one != 1) return ERR("%s: onesided %lld is not 0 or 1", fn, (long long)one);
  if (frame < 1 || frame > d[1])
    return ERR("%s: frame_length %lld does not fit signal %s", fn, (long long)frame, dvm_shape_str(s, r, d));
  p->batch = d[0];
  p->len = d[1];
  p->step = step;
  p->frame = frame;
  p->frames = (d[1] - frame) / step + 1;
  p->bins = one ? frame / 2 + 1 : frame;
  p->onesided = (int)one;
  int64_t dims[4] = {d[0], p->frames, p->bins, 2};
  memcpy(p->dims, dims, sizeof dims);
  return NULL;
}

static dvm_status *shapefn_window(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int64_t size;
  int periodic;
  dvm_status *st = dvm_shape_check_counts("window", nin, 2, 2, nout, 1);
  if (!st) st = dvm_window_fn_infer(in, nin, &size, &periodic);
  if (!st) dvm_shape_set(&out[0], 1, &size);
  return st;
}

static dvm_status *shapefn_mel(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int64_t dims[2];
  dvm_status *st = dvm_shape_check_counts("mel_weight_matrix", nin, 5, 5, nout, 1);
  if (!st) st = dvm_mel_infer(in, nin, dims);
  if (!st) dvm_shape_set(&out[0], 2, dims);
  return st;
}

static dvm_status *shapefn_dft(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_dft_info p;
  dvm_status *st = dvm_shape_check_counts("dft", nin, 5, 5, nout, 1);
  if (!st) st = dvm_dft_infer(in, nin, &p);
  if (!st) dvm_shape_set(&out[0], p.rank, p.dims);
  return st;
}

static dvm_status *shapefn_stft(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_stft_info p;
  dvm_status *st = dvm_shape_check_counts("stft", nin, 4, 5, nout, 1);
  if (!st) st = dvm_stft_infer(in, nin, &p);
  if (!st) dvm_shape_set(&out[0], 4, p.dims);
  return st;
}

const dvm_shapefn_def dvm_shapefn_signal_table[] = {
    {"window", shapefn_window},
    {"mel_weight_matrix", shapefn_mel},
    {"dft", shapefn_dft},
    {"stft", shapefn_stft},
    {NULL, NULL},
};
