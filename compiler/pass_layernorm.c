/* LayerNorm from the ops PyTorch exports it as (torch.nn.LayerNorm before
 * opset 17, and hand-written `(x - u) / sqrt(s + eps) * w + b`):
 *
 *   m = ReduceMean(x, axes=[last])      d = Sub(x, m)
 *   p = Pow(d, 2) or Mul(d, d)          v = ReduceMean(p, axes=[last])
 *   s = Sqrt(Add(v, eps))               n = Div(d, s)
 *   y = Mul(n, scale) [then Add(y, bias)]   (either operand order)
 *
 * becomes y = LayerNormalization(x, scale[, bias]) {axis=-1, epsilon=eps}:
 * one kernel that reads x twice and writes y once, where the chain is two
 * reductions and an elementwise group with three tensors the size of x.
 * Proven, not assumed: x is f32 of known rank; both means are over the
 * last axis only and keep it; eps and the exponent are one-element f32
 * constants (2 exactly); scale and bias are f32 [D] with D the same
 * expression as x's last dim, and y has x's dims; every intermediate is
 * read only inside the pattern. */
#include <string.h>

#include "pass.h"

/* v is f32 [D] with D the expression `last`. */
static bool vec_of(const dvmc_value *v, const dvmc_expr *last) {
  return v && v->typed && v->dtype == DVM_F32 && v->rank == 1 && v->dims[0] == last;
}

/* Rewrites the pattern ending at node `end` (the Mul by scale, or the Add
 * of bias after it) and sets *done, or leaves g as it is when the pattern
 * does not hold. */
static dvm_status *match(dvmc_ctx *c, dvmc_graph *g, dvmc_node *end, int *done) {
  dvmc_node *dead[11];
  int nd = 0;
  dvmc_value *bias = NULL, *y = end->out[0];
  dvmc_node *mul = end;
  if (!strcmp(end->op, "Add")) { /* Add(Mul(n, scale), bias) */
    dvmc_node *m = NULL;
    for (int k = 0; k < 2 && !m; k++)
      if ((m = dvmc_pass_only(g, end->in[k], "Mul", 1))) bias = end->in[1 - k];
    if (!m) return NULL;
    dead[nd++] = end;
    mul = m;
  }
  if (strcmp(mul->op, "Mul") || mul->nin != 2) return NULL;
  dvmc_node *div = NULL;
  dvmc_value *scale = NULL;
  for (int k = 0; k < 2 && !div; k++)
    if ((div = dvmc_pass_only(g, mul->in[k], "Div", 1))) scale = mul->in[1 - k];
  if (!div) return NULL;
  dead[nd++] = mul;
  dead[nd++] = div;
  dvmc_value *d = div->in[0];
  dvmc_node *sqrt = dvmc_pass_only(g, div->in[1], "Sqrt", 1);
  dvmc_node *add = sqrt ? dvmc_pass_only(g, sqrt->in[0], "Add", 1) : NULL;
  if (!add || add->nin != 2) return NULL;
  dvmc_node *var = NULL;
  dvmc_value *eps_v = NULL;
  for (int k = 0; k < 2 && !var; k++)
    if ((var = dvmc_pass_only(g, add->in[k], "ReduceMean", 1))) eps_v = add->in[1 - k];
  float eps;
  if (!var || !dvmc_pass_scalar(eps_v, &eps)) return NULL;
  /* d is read by the square (once by Pow, twice by Mul(d, d)) and the Div */
  dvmc_node *sq = dvmc_pass_only(g, var->in[0], "Pow", 1);
  int d_uses = 2;
  if (sq && (sq->in[0] != d || !dvmc_pass_scalar_is(sq->in[1], 2.0f))) return NULL;
  if (!sq && (sq = dvmc_pass_only(g, var->in[0], "Mul", 1)) && sq->in[0] == d && sq->in[1] == d) d_uses = 3;
  else if (!sq) return NULL;
  dvmc_node *sub = dvmc_pass_only(g, d, "Sub", d_uses);
  if (!sub || sub->nin != 2) return NULL;
  dvmc_value *x = sub->in[0];
  dvmc_node *mean = dvmc_pass_only(g, sub->in[1], "ReduceMean", 1);
  if (!mean || mean->in[0] != x || !dvmc_pass_same_shape(x, y) || x->rank < 1 || !dvmc_pass_mean_last(mean, x->rank) ||
      !dvmc_pass_mean_last(var, x->rank))
    return NULL;
  const dvmc_expr *last = x->dims[x->rank - 1];
  if (!vec_of(scale, last) || (bias && !vec_of(bias, last))) return NULL;
  dead[nd++] = sqrt;
  dead[nd++] = add;
  dead[nd++] = var;
  dead[nd++] = sq;
  dead[nd++] = sub;
  dead[nd++] = mean;
  dvmc_value *in[3] = {x, scale, bias};
  dvmc_attr attrs[2] = {{.name = "axis", .type = DVMC_ATTR_INT, .i = -1},
                        {.name = "epsilon", .type = DVMC_ATTR_FLOAT, .f = eps}};
  *done = 1;
  return dvmc_pass_replace(c, g, dead, nd, "LayerNormalization", in, bias ? 3 : 2, y, attrs, 2);
}

dvm_status *dvmc_pass_layernorm(dvmc_ctx *c, dvmc_graph *g, int *count) {
  /* from the end, so a pattern is matched at its last node (the bias Add)
   * before a shorter one could be at the Mul */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    dvmc_node *n = g->nodes[i];
    if (!n || n->domain[0] || n->nout != 1 || n->nin != 2 || (strcmp(n->op, "Add") && strcmp(n->op, "Mul")))
      continue;
    int done = 0;
    dvm_status *st = match(c, g, n, &done);
    if (st) return st;
    *count += done;
  }
  return NULL;
}
