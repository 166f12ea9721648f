/* The shape rules of ops carrying a decode state (infer_rule.h):
 * LinearAttention, CausalConvWithState. */
#include "infer_rule.h"

/* LinearAttention: output [B, T, Hq dv] and present_state [B, Hkv, dk,
 * dv] from query [B, T, Hq dk], value [B, T, Hkv dv] and the head counts. */
void inf_rule_linear_attention(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *v = n->nin > 2 ? n->in[2] : NULL;
  int64_t hq = dvmc_attr_int(n, "q_num_heads", 0), hkv = dvmc_attr_int(n, "kv_num_heads", 0);
  inf_set_rank(n->out[0], 3);
  if (n->nout > 1) inf_set_rank(n->out[1], 4);
  if (!q || !v || q->rank != 3 || v->rank != 3 || hq <= 0 || hkv <= 0 || !q->dims[2] || !v->dims[2]) return;
  const dvmc_expr *dk = dvmc_floordiv(I->x, q->dims[2], dvmc_const(I->x, hq));
  const dvmc_expr *dv = dvmc_floordiv(I->x, v->dims[2], dvmc_const(I->x, hkv));
  inf_set_shape(n->out[0], 3, (const dvmc_expr *[]){q->dims[0], q->dims[1], dvmc_mul(I->x, dv, dvmc_const(I->x, hq))});
  if (n->nout > 1) inf_set_shape(n->out[1], 4, (const dvmc_expr *[]){q->dims[0], dvmc_const(I->x, hkv), dk, dv});
}

/* CausalConvWithState: output as input [B, C, L]; present_state [B, C,
 * K-1] with K weight [C, 1, K]'s last dim. */
void inf_rule_causal_conv(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL;
  inf_same_shape(n, 0);
  if (n->nout < 2) return;
  inf_set_rank(n->out[1], 3);
  if (!x || !w || x->rank != 3 || w->rank != 3 || !w->dims[2]) return;
  inf_set_shape(n->out[1], 3, (const dvmc_expr *[]){x->dims[0], x->dims[1], dvmc_add(I->x, w->dims[2], dvmc_const(I->x, -1))});
}
