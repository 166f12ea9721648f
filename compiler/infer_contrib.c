/* The shape rules of ONNX Runtime's com.microsoft ops (infer_rule.h):
 * SkipLayerNormalization, EmbedLayerNormalization, Attention,
 * MultiHeadAttention. */
#include "infer_rule.h"

/* com.microsoft SkipLayerNormalization: the output and the sum (output 3)
 * as the input. */
void inf_rule_skip_layernorm(inf *I, const dvmc_node *n) {
  (void)I;
  inf_same_shape(n, 0);
  if (n->nout > 3 && n->in[0]) inf_set_shape(n->out[3], n->in[0]->rank, n->in[0]->dims);
}

/* com.microsoft EmbedLayerNormalization: [B, S, H] from the ids and the
 * word table, mask_index [B]; the embedding sum (output 2) as output 0. */
void inf_rule_embed_layernorm(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *ids = n->in[0], *word = n->nin > 2 ? n->in[2] : NULL;
  if (!ids || !word || ids->rank != 2 || word->rank != 2) return;
  const dvmc_expr *d[3] = {ids->dims[0], ids->dims[1], word->dims[1]};
  for (int i = 0; i < n->nout; i++) inf_set_shape(n->out[i], i == 1 ? 1 : 3, d);
}

/* com.microsoft Attention: [B, S, H] from x [B, S, Hin] and the packed
 * weights [Hin, 3H]. */
void inf_rule_attention(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL;
  int64_t h3;
  if (!x || !w || x->rank != 3 || w->rank != 2 || !w->dims[1] || !dvmc_expr_is_const(w->dims[1], &h3) || h3 % 3) return;
  const dvmc_expr *d[3] = {x->dims[0], x->dims[1], dvmc_const(I->x, h3 / 3)};
  inf_set_shape(n->out[0], 3, d);
}

/* com.microsoft MultiHeadAttention: y [B, S, N dv] from 3-D query [B, S,
 * N dh] and value [B, L, N dv] (or 4-D [B, N, L, dv]); present_key and
 * present_value [B, N, P + L, dh or dv] (P from past_key, when given); qk
 * [B, N, S, P + L]. A dim inference cannot tell is left to the shape
 * function. */
void inf_rule_mha(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *k = n->nin > 1 ? n->in[1] : NULL, *v = n->nin > 2 ? n->in[2] : NULL;
  const dvmc_value *past = n->nin > 6 ? n->in[6] : NULL;
  for (int i = 1; i < n->nout && i < 4; i++) inf_set_rank(n->out[i], 4);
  int64_t heads = dvmc_attr_int(n, "num_heads", 0);
  if (!q || !k || !v || q->rank != 3 || (v->rank != 3 && v->rank != 4) || k->rank != v->rank || heads <= 0) return;
  if (past && past->rank != 4) return;
  int four = v->rank == 4;
  const dvmc_expr *N = dvmc_const(I->x, heads), *l = k->dims[four ? 2 : 1];
  const dvmc_expr *dh = q->dims[2] ? dvmc_floordiv(I->x, q->dims[2], N) : NULL;
  const dvmc_expr *dv = four ? v->dims[3] : v->dims[2] ? dvmc_floordiv(I->x, v->dims[2], N) : NULL;
  const dvmc_expr *t = l && (!past || past->dims[2]) ? past ? dvmc_add(I->x, past->dims[2], l) : l : NULL;
  const dvmc_expr *outs[4][4] = {{q->dims[0], q->dims[1], four ? (dv ? dvmc_mul(I->x, N, dv) : NULL) : v->dims[2]},
                                 {q->dims[0], N, t, dh}, {q->dims[0], N, t, dv}, {q->dims[0], N, q->dims[1], t}};
  for (int i = 0; i < n->nout && i < 4; i++) {
    int r = i ? 4 : 3, all = 1;
    for (int d = 0; d < r; d++) all &= outs[i][d] != NULL;
    if (all) inf_set_shape(n->out[i], r, outs[i]);
  }
}
