/* RMSNorm from the ops PyTorch exports it as (LLaMA's and T5's
 * `x * rsqrt(mean(x^2) + eps) * w`, or `x / sqrt(...)`):
 *
 *   p = Pow(x, 2) or Mul(x, x)       m = ReduceMean(p, axes=[last])
 *   s = Sqrt(Add(m, eps))            n = Mul(x, Reciprocal(s)) or Div(x, s)
 *   y = Mul(n, scale)                (either operand order)
 *
 * becomes y = RMSNormalization(x, scale) {axis=-1, epsilon=eps} (ONNX
 * opset 23; the node gets that opset): the layernorm kernel's rows without
 * the mean, one read of x for the sum of squares and one for y, where the
 * chain is a reduction and an elementwise group. Proven: x f32 of known
 * rank, y of x's dims; the mean over the last axis only, kept; eps and the
 * exponent one-element f32 constants (2 exactly); scale f32 [D] with D the
 * same expression as x's last dim; every intermediate read only inside the
 * pattern. The kernel sums the squares in its own order, so results match
 * the chain's to rounding, not bitwise.
 *
 * A CPU rewrite: off in builds for CUDA, whose placement generates the
 * chain but has no RMSNormalization kernel. */
#include <string.h>

#include "pass.h"

/* The first ONNX opset with RMSNormalization. */
#define RMS_OPSET 23

/* s is Sqrt(Add(ReduceMean(x^2 over the last axis), eps)), nodes into
 * dead; the constant in *eps. */
static bool root_mean_square(const dvmc_graph *g, const dvmc_value *s, const dvmc_value *x, dvmc_node **dead,
                             int *nd, float *eps) {
  dvmc_node *sqrt = dvmc_pass_only(g, s, "Sqrt", 1);
  dvmc_node *add = sqrt ? dvmc_pass_only(g, sqrt->in[0], "Add", 1) : NULL;
  if (!add || add->nin != 2) return false;
  dvmc_node *mean = NULL;
  dvmc_value *eps_v = NULL;
  for (int k = 0; k < 2 && !mean; k++)
    if ((mean = dvmc_pass_only(g, add->in[k], "ReduceMean", 1))) eps_v = add->in[1 - k];
  if (!mean || !dvmc_pass_scalar(eps_v, eps) || !dvmc_pass_mean_last(mean, x->rank)) return false;
  dvmc_node *sq = dvmc_pass_only(g, mean->in[0], "Pow", 1);
  if (sq && (sq->nin != 2 || sq->in[0] != x || !dvmc_pass_scalar_is(sq->in[1], 2.0f))) return false;
  if (!sq && (!(sq = dvmc_pass_only(g, mean->in[0], "Mul", 1)) || sq->nin != 2 || sq->in[0] != x || sq->in[1] != x))
    return false;
  dead[(*nd)++] = sqrt;
  dead[(*nd)++] = add;
  dead[(*nd)++] = mean;
  dead[(*nd)++] = sq;
  return true;
}

/* v is x / s or x * Reciprocal(s) (either order): x, the nodes into dead;
 * NULL when not. */
static dvmc_value *normalized(const dvmc_graph *g, const dvmc_value *v, dvmc_node **dead, int *nd,
                              dvmc_value **s) {
  dvmc_node *div = dvmc_pass_only(g, v, "Div", 1);
  if (div && div->nin == 2) {
    dead[(*nd)++] = div;
    *s = div->in[1];
    return div->in[0];
  }
  dvmc_node *mul = dvmc_pass_only(g, v, "Mul", 1);
  for (int k = 0; mul && mul->nin == 2 && k < 2; k++) {
    dvmc_node *rec = dvmc_pass_only(g, mul->in[k], "Reciprocal", 1);
    if (!rec || rec->nin != 1) continue;
    dead[(*nd)++] = mul;
    dead[(*nd)++] = rec;
    *s = rec->in[0];
    return mul->in[1 - k];
  }
  return NULL;
}

static dvm_status *match(dvmc_ctx *c, dvmc_graph *g, dvmc_node *end, int *done) {
  dvmc_value *y = end->out[0];
  for (int k = 0; k < 2; k++) {
    dvmc_node *dead[8] = {end};
    int nd = 1;
    dvmc_value *scale = end->in[1 - k], *s = NULL;
    dvmc_value *x = normalized(g, end->in[k], dead, &nd, &s);
    float eps;
    if (!x || !dvmc_pass_same_shape(x, y) || x->rank < 1 || !root_mean_square(g, s, x, dead, &nd, &eps)) continue;
    const dvmc_value *sc = scale;
    if (!sc || !sc->typed || sc->dtype != DVM_F32 || sc->rank != 1 || sc->dims[0] != x->dims[x->rank - 1]) continue;
    dvmc_value *in[2] = {x, scale};
    dvmc_attr attrs[2] = {{.name = "axis", .type = DVMC_ATTR_INT, .i = -1},
                          {.name = "epsilon", .type = DVMC_ATTR_FLOAT, .f = eps}};
    dvm_status *st = dvmc_pass_replace(c, g, dead, nd, "RMSNormalization", in, 2, y, attrs, 2);
    if (st) return st;
    if (y->producer->opset < RMS_OPSET) y->producer->opset = RMS_OPSET;
    *done = 1;
    return NULL;
  }
  return NULL;
}

dvm_status *dvmc_pass_rmsnorm(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = g->nnodes - 1; i >= 0; i--) {
    dvmc_node *n = g->nodes[i];
    if (!n || n->domain[0] || n->nout != 1 || n->nin != 2 || strcmp(n->op, "Mul")) continue;
    int done = 0;
    dvm_status *st = match(c, g, n, &done);
    if (st) return st;
    *count += done;
  }
  return NULL;
}
