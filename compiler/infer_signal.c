/* The shape rules of signal processing (infer_rule.h): the window
 * functions, MelWeightMatrix, DFT, STFT. */
#include "infer_rule.h"

/* The one element of input i when inference knows it, else NULL. */
static const dvmc_expr *elem_of(inf *I, const dvmc_node *n, int i) {
  const dvmc_expr *e[1];
  return inf_exprs_of(I, n, NULL, i, e, 1) == 1 ? e[0] : NULL;
}

/* HannWindow, HammingWindow, BlackmanWindow: [size]. */
void inf_rule_window_fn(inf *I, const dvmc_node *n) {
  const dvmc_expr *size = elem_of(I, n, 0);
  if (size) inf_set_shape(n->out[0], 1, &size);
  inf_set_rank(n->out[0], 1);
}

/* MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins]. */
void inf_rule_mel(inf *I, const dvmc_node *n) {
  const dvmc_expr *mel = elem_of(I, n, 0), *len = elem_of(I, n, 1);
  if (mel && len)
    inf_set_shape(n->out[0], 2, (const dvmc_expr *[]){
        dvmc_add(I->x, dvmc_floordiv(I->x, len, dvmc_const(I->x, 2)), dvmc_const(I->x, 1)), mel});
  inf_set_rank(n->out[0], 2);
}

/* DFT: x's dims but along the axis (the transform's length, or half of it
 * plus one for a one-sided forward transform) and the last (1 for an
 * inverse to a real signal, else 2). The axis is an attribute before
 * opset 20, input 2 from it. */
void inf_rule_dft(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 2) return;
  int r = x->rank;
  int64_t axis = n->opset < 20 ? dvmc_attr_int(n, "axis", 1) : -2;
  int64_t inv = dvmc_attr_int(n, "inverse", 0), one = dvmc_attr_int(n, "onesided", 0);
  const dvmc_expr *d[DVM_MAX_RANK], *len = NULL, *ax = NULL;
  if (n->opset >= 20 && n->nin > 2 && n->in[2] && (!(ax = elem_of(I, n, 2)) || !dvmc_expr_is_const(ax, &axis))) {
    inf_set_rank(n->out[0], r);
    return;
  }
  int k = inf_norm_axis(axis, r);
  if (k < 0 || k == r - 1 || !x->dims[k]) {
    inf_set_rank(n->out[0], r);
    return;
  }
  if (n->nin > 1 && n->in[1]) len = elem_of(I, n, 1);
  else if (inv && one) len = dvmc_mul(I->x, dvmc_sub(I->x, x->dims[k], dvmc_const(I->x, 1)), dvmc_const(I->x, 2));
  else len = x->dims[k];
  for (int i = 0; i < r; i++) d[i] = x->dims[i];
  d[k] = !len ? NULL : !inv && one ? dvmc_add(I->x, dvmc_floordiv(I->x, len, dvmc_const(I->x, 2)), dvmc_const(I->x, 1)) : len;
  d[r - 1] = dvmc_const(I->x, inv && one ? 1 : 2);
  inf_set_shape(n->out[0], r, d);
}

/* STFT: [batch, (length - frame) / step + 1, bins, 2], the frame being
 * frame_length, or the window's length, or the signal's. */
void inf_rule_stft(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 2 ? n->in[2] : NULL;
  if (!x || x->rank != 3) return;
  const dvmc_expr *step = elem_of(I, n, 1), *frame = NULL, *d[4] = {x->dims[0], NULL, NULL, dvmc_const(I->x, 2)};
  if (n->nin > 3 && n->in[3]) frame = elem_of(I, n, 3);
  else frame = w ? (w->rank == 1 ? w->dims[0] : NULL) : x->dims[1];
  if (frame && step && x->dims[1])
    d[1] = dvmc_add(I->x, dvmc_floordiv(I->x, dvmc_sub(I->x, x->dims[1], frame), step), dvmc_const(I->x, 1));
  if (frame)
    d[2] = dvmc_attr_int(n, "onesided", 1) ? dvmc_add(I->x, dvmc_floordiv(I->x, frame, dvmc_const(I->x, 2)), dvmc_const(I->x, 1)) : frame;
  inf_set_shape(n->out[0], 4, d);
}
