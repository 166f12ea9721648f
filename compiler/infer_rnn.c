/* The shape rule of the recurrent ops (infer_rule.h): RNN, GRU, LSTM,
 * DynamicQuantizeLSTM. */
#include <string.h>

#include "infer_rule.h"

/* RNN, GRU, LSTM (and DynamicQuantizeLSTM): Y [seq, dirs, batch, hidden]
 * and the states [dirs, batch, hidden] (layout 1: batch first), seq, batch
 * from X, dirs from W (or the direction), hidden from R (or hidden_size). */
void inf_rule_rnn(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL, *r = n->nin > 2 ? n->in[2] : NULL;
  if (!x || x->rank != 3) return;
  int layout = dvmc_attr_int(n, "layout", 0) != 0;
  const char *dir = dvmc_attr_string(n, "direction", "forward");
  int64_t hs = dvmc_attr_int(n, "hidden_size", 0);
  const dvmc_expr *seq = x->dims[layout ? 1 : 0], *batch = x->dims[layout ? 0 : 1];
  const dvmc_expr *dirs = w && w->rank == 3 && w->dims[0] ? w->dims[0] : dvmc_const(I->x, strcmp(dir, "bidirectional") ? 1 : 2);
  int hd = strcmp(n->op, "DynamicQuantizeLSTM") ? 2 : 1; /* its R is [dirs, hidden, 4 hidden] */
  const dvmc_expr *hidden = r && r->rank == 3 && r->dims[hd] ? r->dims[hd] : hs > 0 ? dvmc_const(I->x, hs) : NULL;
  const dvmc_expr *y[4] = {seq, dirs, batch, hidden}, *s[3] = {dirs, batch, hidden};
  if (layout) y[0] = batch, y[1] = seq, y[2] = dirs, s[0] = batch, s[1] = dirs;
  inf_set_rank(n->out[0], 4);
  if (seq && batch && hidden) inf_set_shape(n->out[0], 4, y);
  for (int i = 1; i < n->nout; i++) {
    inf_set_rank(n->out[i], 3);
    if (batch && hidden) inf_set_shape(n->out[i], 3, s);
  }
}
