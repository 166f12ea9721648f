/* Shapes of RNN, GRU and LSTM (see rnn.h). */
#include "shapefuncs/rnn.h"

#include "kernel.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

dvm_status *dvm_rnn_dims_of(const char *op, int gates, int64_t layout, int xr, const int64_t *x,
                            int wr, const int64_t *w, int rr, const int64_t *r, dvm_rnn_dims *out) {
  char a[DVM_SHAPE_STR_SIZE], b[DVM_SHAPE_STR_SIZE], c[DVM_SHAPE_STR_SIZE];
  if (layout != 0 && layout != 1) return ERR("%s: layout must be 0 or 1, got %lld", op, (long long)layout);
  if (xr != 3 || wr != 3 || rr != 3) return ERR("%s: X, W and R must be 3-D, got %d, %d and %d dims", op, xr, wr, rr);
  int64_t hidden = r[2];
  int ok = (w[0] == 1 || w[0] == 2) && r[0] == w[0] && w[2] == x[2] && r[1] == w[1] && hidden > 0 &&
           w[1] % hidden == 0 && (gates ? w[1] == gates * hidden : (w[1] / hidden == 1 || w[1] / hidden == 3 || w[1] / hidden == 4));
  if (!ok)
    return ERR("%s: X %s, W %s and R %s do not fit [dirs (1 or 2), gates x hidden, input] and "
               "[dirs, gates x hidden, hidden]%s",
               op, dvm_shape_str(a, xr, x), dvm_shape_str(b, wr, w), dvm_shape_str(c, rr, r),
               gates == 4 ? " with 4 gates" : gates == 3 ? " with 3 gates" : gates == 1 ? " with 1 gate" : "");
  *out = (dvm_rnn_dims){.seq = x[layout ? 1 : 0], .batch = x[layout ? 0 : 1], .input = x[2],
                        .dirs = w[0], .hidden = hidden};
  return NULL;
}

void dvm_rnn_y_shape(const dvm_rnn_dims *d, int64_t layout, int64_t y[4]) {
  if (layout) y[0] = d->batch, y[1] = d->seq, y[2] = d->dirs;
  else y[0] = d->seq, y[1] = d->dirs, y[2] = d->batch;
  y[3] = d->hidden;
}

void dvm_rnn_state_shape(const dvm_rnn_dims *d, int64_t layout, int64_t s[3]) {
  s[0] = layout ? d->batch : d->dirs;
  s[1] = layout ? d->dirs : d->batch;
  s[2] = d->hidden;
}

/* quant: DynamicQuantizeLSTM's W and R, [dirs, k, n] (rnn.h). */
static dvm_status *shapes(const char *fn, int quant, const dvm_value *in, int nin, dvm_value *out, int nout) {
  int xr, wr, rr;
  const int64_t *x, *w, *r;
  int64_t layout, y[4], s[3], wd[3], rd[3];
  dvm_rnn_dims d;
  if (nout != 2 && nout != 3) return ERR("%s: gives 2 or 3 shapes, asked for %d", fn, nout);
  dvm_status *st = dvm_shape_check_counts(fn, nin, 4, 4, nout, nout);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &xr, &x);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &wr, &w);
  if (!st) st = dvm_shape_arg(fn, &in[2], 2, &rr, &r);
  if (!st) st = dvm_attr_int(fn, "layout", &in[3], &layout);
  if (st) return st;
  if (quant && wr == 3 && rr == 3) {
    wd[0] = w[0], wd[1] = w[2], wd[2] = w[1], rd[0] = r[0], rd[1] = r[2], rd[2] = r[1];
    w = wd, r = rd;
  }
  if ((st = dvm_rnn_dims_of(fn, nout == 3 ? 4 : 0, layout, xr, x, wr, w, rr, r, &d))) return st;
  dvm_rnn_y_shape(&d, layout, y);
  dvm_rnn_state_shape(&d, layout, s);
  dvm_shape_set(&out[0], 4, y);
  for (int i = 1; i < nout; i++) dvm_shape_set(&out[i], 3, s);
  return NULL;
}

static dvm_status *shapefn_rnn(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return shapes("rnn", 0, in, nin, out, nout);
}

static dvm_status *shapefn_qlstm(const dvm_value *in, int nin, dvm_value *out, int nout) {
  return shapes("qlstm", 1, in, nin, out, nout);
}

const dvm_shapefn_def dvm_shapefn_rnn_table[] = {
    {"rnn", shapefn_rnn},
    {"qlstm", shapefn_qlstm},
    {NULL, NULL},
};
