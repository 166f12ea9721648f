/* The shape rules of attention with a KV cache (infer_rule.h): ONNX
 * Attention, com.microsoft GroupQueryAttention. */
#include "infer_rule.h"

/* ONNX Attention: Y as Q with V's head size; present_key and
 * present_value [B, Hkv, P + Skv, head size] (P from past_key, when
 * given); qk_matmul_output [B, Hq, Sq, P + Skv]. 3-D Q, K, V are
 * [B, S, heads * head size], the heads from q_num_heads and kv_num_heads.
 * A dim inference cannot tell is left to the shape function. */
void inf_rule_sdpa(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *k = n->nin > 1 ? n->in[1] : NULL, *v = n->nin > 2 ? n->in[2] : NULL;
  const dvmc_value *past = n->nin > 4 ? n->in[4] : NULL;
  static const int ranks[4] = {-1, 4, 4, 4};
  for (int i = 0; i < n->nout && i < 4; i++) inf_set_rank(n->out[i], i ? ranks[i] : q ? q->rank : -1);
  if (!q || !k || !v || (q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank) return;
  if (past && past->rank != 4) return;
  int four = q->rank == 4;
  int64_t qh = dvmc_attr_int(n, "q_num_heads", 0), kvh = dvmc_attr_int(n, "kv_num_heads", 0);
  if (!four && (qh <= 0 || kvh <= 0)) return;
  const dvmc_expr *hq = four ? q->dims[1] : dvmc_const(I->x, qh), *hkv = four ? k->dims[1] : dvmc_const(I->x, kvh);
  const dvmc_expr *skv = k->dims[four ? 2 : 1], *dh = k->dims[four ? 3 : 2], *dv = v->dims[four ? 3 : 2];
  if (!four) {
    dh = dh ? dvmc_floordiv(I->x, dh, hkv) : NULL;
    dv = dv ? dvmc_floordiv(I->x, dv, hkv) : NULL;
  }
  const dvmc_expr *t = skv && (!past || past->dims[2]) ? past ? dvmc_add(I->x, past->dims[2], skv) : skv : NULL;
  const dvmc_expr *y[4] = {q->dims[0], q->dims[1], four ? q->dims[2] : dv ? dvmc_mul(I->x, hq, dv) : NULL, four ? dv : NULL};
  const dvmc_expr *outs[4][4] = {{0}, {q->dims[0], hkv, t, dh}, {q->dims[0], hkv, t, dv},
                                 {q->dims[0], hq, q->dims[four ? 2 : 1], t}};
  for (int i = 0; i < 4; i++) outs[0][i] = y[i];
  for (int i = 0; i < n->nout && i < 4; i++) {
    int r = i ? 4 : q->rank, all = 1;
    for (int d = 0; d < r; d++) all &= outs[i][d] != NULL;
    if (all) inf_set_shape(n->out[i], r, outs[i]);
  }
}

/* com.microsoft GroupQueryAttention: output [B, S, Hq D] (query's shape,
 * or its Hq parts of packed QKV); present_key and present_value [B, Hkv,
 * max(P, T), D], P past_key's length (0 without one) and T the value of
 * total_sequence_length where inference knows it as an expression (the
 * builder's graph takes it from attention_mask's shape), else left to the
 * shape function. When past and present share one buffer, as a generator
 * binds them, T <= P, so the memory plan bounds a step by the cache's
 * length. */
void inf_rule_gqa(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *past = n->nin > 3 ? n->in[3] : NULL, *total = n->nin > 6 ? n->in[6] : NULL;
  int64_t hq = dvmc_attr_int(n, "num_heads", 0), hkv = dvmc_attr_int(n, "kv_num_heads", 0), w;
  int packed = n->nin < 2 || !n->in[1];
  for (int i = 0; i < n->nout && i < 3; i++) inf_set_rank(n->out[i], i ? 4 : 3);
  if (!q || q->rank != 3 || hq <= 0 || hkv <= 0 || !q->dims[2] || !dvmc_expr_is_const(q->dims[2], &w)) return;
  int64_t d = w / (packed ? hq + 2 * hkv : hq);
  const dvmc_expr *t = total && dvmc_value_elems_known(total) && total->nelems == 1 ? total->elems[0] : NULL;
  if (t && past) t = past->rank == 4 && past->dims[2] ? dvmc_max(I->x, past->dims[2], t) : NULL;
  const dvmc_expr *y[3] = {q->dims[0], q->dims[1], dvmc_const(I->x, hq * d)};
  const dvmc_expr *kv[4] = {q->dims[0], dvmc_const(I->x, hkv), t, dvmc_const(I->x, d)};
  if (n->nout) inf_set_shape(n->out[0], 3, y);
  for (int i = 1; i < n->nout && i < 3; i++) inf_set_shape(n->out[i], 4, kv);
}
