/* The residual add before a LayerNorm, as one pass over memory (ONNX
 * Runtime's SkipLayerNormalization fusion):
 *
 *   s = Add(x, skip)     y = LayerNormalization(s, gamma[, beta]) over the last axis
 *
 * becomes y[, s] = com.microsoft.SkipLayerNormalization(x, skip, gamma[,
 * beta]) {epsilon}: its kernel (ops/cpu/contrib.c) runs the layernorm
 * kernel's rows on x + skip, computed row by row into the sum output where
 * s is read elsewhere too (pre-LN transformers: GPT-2's residual stream),
 * else into y and normalized there in place. Each row gets the same f32
 * add and the same normalization as the two kernels. Proven: x, skip and s
 * f32 of the same known dims (no broadcasting); the LayerNorm over the
 * last axis only, without its mean and inverse-deviation outputs, stash
 * type f32; gamma (and beta) f32 [H] with H the same expression as s's
 * last dim, defined before the Add (which the new node replaces in place,
 * so every reader of s and y comes after it). The bias of a product before
 * the Add is the product's epilogue already (pass_epilogue.c).
 *
 * A CPU rewrite: off in builds for CUDA, whose placement generates the
 * LayerNorm and the add but has no kernel for this op. */
#include <string.h>

#include "pass.h"

/* v is f32 [H] with H the expression `last`. */
static bool vec_of(const dvmc_value *v, const dvmc_expr *last) {
  return v && v->typed && v->dtype == DVM_F32 && v->rank == 1 && v->dims[0] == last;
}

/* v is defined before node `at` of g: a constant, an input, a value of an
 * enclosing graph, or made by an earlier node of g. */
static bool before(const dvmc_graph *g, const dvmc_value *v, const dvmc_node *at) {
  const dvmc_node *p = v->producer;
  bool in_g = p && p->id >= 0 && p->id < g->nnodes && g->nodes[p->id] == p;
  return !in_g || p->id < at->id;
}

/* ln is LayerNormalization over the last axis with only its output 0, f32
 * statistics: its epsilon in *eps. */
static bool layernorm_last(const dvmc_node *ln, float *eps) {
  if (strcmp(ln->op, "LayerNormalization") || ln->domain[0] || ln->nin < 2 || ln->nin > 3 || !ln->out[0] ||
      !ln->in[0] || !ln->in[1])
    return false;
  for (int i = 1; i < ln->nout; i++)
    if (ln->out[i]) return false;
  int r = ln->in[0]->rank;
  int64_t axis = dvmc_attr_int(ln, "axis", -1);
  const dvmc_attr *e = dvmc_attr_find(ln, "epsilon");
  if ((axis != -1 && axis != r - 1) || dvmc_attr_int(ln, "stash_type", 1) != 1 || (e && e->type != DVMC_ATTR_FLOAT))
    return false;
  *eps = e ? e->f : 1e-5f;
  return true;
}

dvm_status *dvmc_pass_skiplayernorm(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *ln = g->nodes[i];
    float eps;
    if (!ln || !layernorm_last(ln, &eps)) continue;
    dvmc_value *s = ln->in[0], *gamma = ln->in[1], *beta = ln->nin > 2 ? ln->in[2] : NULL;
    dvmc_node *add = s->producer;
    if (!add || s->uses < 1 || !before(g, s, ln) || strcmp(add->op, "Add") || add->domain[0] || add->nin != 2 ||
        add->nout != 1 || !dvmc_pass_same_shape(s, ln->out[0]) || !dvmc_pass_same_shape(add->in[0], s) ||
        !dvmc_pass_same_shape(add->in[1], s) || s->rank < 1)
      continue;
    const dvmc_expr *h = s->dims[s->rank - 1];
    if (!vec_of(gamma, h) || (beta && !vec_of(beta, h)) || !before(g, gamma, add) || (beta && !before(g, beta, add)))
      continue;
    bool keep_sum = s->uses > 1; /* read elsewhere (or a graph output): output 3 */
    dvmc_node *dead[2] = {add, ln};
    dvmc_value *in[4] = {add->in[0], add->in[1], gamma, beta};
    dvmc_value *outs[4] = {ln->out[0], NULL, NULL, keep_sum ? s : NULL};
    dvmc_attr attr = {.name = "epsilon", .type = DVMC_ATTR_FLOAT, .f = eps};
    dvm_status *st = dvmc_pass_replace_outs(c, g, dead, 2, add, "SkipLayerNormalization", in, beta ? 4 : 3, outs,
                                            keep_sum ? 4 : 1, &attr, 1);
    if (!st) st = dvmc_pass_set_domain(g->nodes[add->id], "com.microsoft");
    if (st) return st;
    ++*count;
  }
  return NULL;
}
