/* Row stitching (DISC's input/stitch fusion, on rows): a run of
 * consecutive f32 nodes that all work on rows of one innermost length L,
 *
 *   elementwise producers of shape S = [..., L]
 *   -> reductions over the last axis keeping it (ReduceSum, ReduceMean,
 *      ReduceMax, ReduceMin, ReduceSumSquare, ReduceL1, ReduceL2): shape
 *      P = [..., 1], S's leading dims
 *   -> elementwise consumers of shape S or P, reading both,
 *
 * becomes one call of the fused kernel running a row program (docs/fused.md
 * 6.3): block by block of whole rows, a row's intermediates in the
 * thread's scratch, so the input is read once and the output written once.
 * A decomposed LayerNorm, RMSNorm, L2-normalize or softmax that no named
 * pass matched is one pass over memory. Per-row values live broadcast along
 * the row in the program's registers; only S-shaped values may leave the
 * group (a per-row value read after it ends the group before it).
 * Clip with constant bounds and Expand to S join too (F.normalize's
 * ReduceL2, Clip, Expand, Div), and shape arithmetic between members
 * (folded: no code) does not end a run. Lowering stitches only what lw_lower_group can build: a run that breaks a
 * program limit or whose per-row value escapes is left to the per-node
 * lowering and elementwise fusion. `dvm compile --no-stitch` turns it off. */
#include <string.h>

#include "lowering.h"
#include "ops/cpu/fused.h"
#include "pass.h"

/* Reduce ops by name, with what the program does for each: an elementwise
 * op on the input first (or -1), the row reduction, and one after (or -1). */
static const struct {
  const char *op;
  int before, reduce, after;
} reductions[] = {
    {"ReduceSum", -1, DVM_FUSED_ROW_SUM, -1},
    {"ReduceMean", -1, DVM_FUSED_ROW_MEAN, -1},
    {"ReduceMax", -1, DVM_FUSED_ROW_MAX, -1},
    {"ReduceMin", -1, DVM_FUSED_ROW_MIN, -1},
    {"ReduceSumSquare", DVM_FUSED_MUL, DVM_FUSED_ROW_SUM, -1},
    {"ReduceL1", DVM_FUSED_ABS, DVM_FUSED_ROW_SUM, -1},
    {"ReduceL2", DVM_FUSED_MUL, DVM_FUSED_ROW_SUM, DVM_FUSED_SQRT},
};

/* The row of `reductions` for n when n reduces the last axis of its f32
 * input of known shape, keeping it; else -1. */
static int reduction_of(const dvmc_node *n) {
  if (n->domain[0] || n->nout != 1 || !n->in[0] || !lw_is_f32(n->in[0]) || !lw_is_f32(n->out[0]) ||
      !dvmc_value_shape_known(n->in[0]) || n->in[0]->rank < 1 ||
      !dvmc_pass_mean_last(n, n->in[0]->rank))
    return -1;
  for (size_t k = 0; k < sizeof reductions / sizeof reductions[0]; k++)
    if (!strcmp(n->op, reductions[k].op)) return (int)k;
  return -1;
}

int lw_is_row_reduction(const dvmc_node *n) { return reduction_of(n) >= 0; }

/* Clip(x[, min][, max]) of f32 x with one-element f32 constants or none
 * (opset 11 on: bounds as inputs), as PyTorch's F.normalize exports it
 * after its ReduceL2. */
static int is_clip(const dvmc_node *n) {
  if (n->domain[0] || strcmp(n->op, "Clip") || n->opset < 11 || n->nattrs || n->nout != 1 || n->nin < 1 ||
      !lw_is_f32(n->in[0]))
    return 0;
  for (int k = 1; k < n->nin; k++)
    if (n->in[k] && !lw_fuse_scalar(n->in[k])) return 0;
  return 1;
}

/* Expand of f32 x: within a group a value already stands for its
 * broadcast, so it is x (the output's shape is checked by the caller). */
static int is_expand(const dvmc_node *n) {
  return !n->domain[0] && !strcmp(n->op, "Expand") && n->nin == 2 && n->nout == 1 && lw_is_f32(n->in[0]) &&
         lw_is_f32(n->out[0]);
}

int lw_stitch_special(const lowering *L, const dvmc_node *n) {
  if (n->nout >= 1 && n->out[0]) {
    int folded = 1;
    for (int k = 0; k < n->nout; k++) folded &= n->out[k] && lw_foldable(L, n->out[k]);
    if (folded) return LW_STITCH_FOLDED;
  }
  return lw_is_row_reduction(n) ? LW_STITCH_REDUCE : is_clip(n) ? LW_STITCH_CLIP : is_expand(n) ? LW_STITCH_EXPAND : 0;
}

int lw_emit_stitch_special(dvm_fused_builder *b, const dvmc_node *n, int x) {
  if (is_expand(n)) return x;
  if (is_clip(n)) {
    for (int k = 1; k < n->nin && k < 3; k++)
      if (n->in[k])
        x = dvm_fused_op2(b, k == 1 ? DVM_FUSED_MAX : DVM_FUSED_MIN, x,
                          dvm_fused_const_f32(b, *(const float *)n->in[k]->constant->data));
    return x;
  }
  int k = reduction_of(n);
  if (k < 0) return -1;
  int ops = reductions[k].before;
  if (ops == DVM_FUSED_MUL) x = dvm_fused_op2(b, DVM_FUSED_MUL, x, x);
  else if (ops >= 0) x = dvm_fused_op1(b, (dvm_fused_op)ops, x);
  x = dvm_fused_row_reduce(b, (dvm_fused_op)reductions[k].reduce, x);
  return reductions[k].after >= 0 ? dvm_fused_op1(b, (dvm_fused_op)reductions[k].after, x) : x;
}

/* v has shape s (the same dim expressions). */
static int same_dims(const dvmc_value *v, const dvmc_value *s) {
  if (!dvmc_value_shape_known(v) || v->rank != s->rank) return 0;
  for (int d = 0; d < s->rank; d++)
    if (v->dims[d] != s->dims[d]) return 0;
  return 1;
}

int lw_is_row_value(const dvmc_value *v, const dvmc_value *s) {
  int64_t one;
  if (!dvmc_value_shape_known(v) || v->rank != s->rank || !dvmc_expr_is_const(v->dims[s->rank - 1], &one) ||
      one != 1)
    return 0;
  for (int d = 0; d + 1 < s->rank; d++)
    if (v->dims[d] != s->dims[d]) return 0;
  return 1;
}

/* v is made by one of nodes [first, i). */
static int made_inside(const dvmc_graph *g, int first, int i, const dvmc_value *v) {
  for (int j = first; j < i; j++)
    if (g->nodes[j]->out[0] == v) return 1;
  return 0;
}

/* Whether node i joins the run from first over rows of shape s. */
static int stitch_joins(const lowering *L, const dvmc_graph *g, int first, int i, const dvmc_value *s) {
  const dvmc_node *n = g->nodes[i];
  int special = lw_stitch_special(L, n);
  if (special == LW_STITCH_FOLDED) return i > first; /* shape arithmetic between members: no code */
  if (n->nout != 1 || !n->out[0]) return 0;
  if (special == LW_STITCH_REDUCE)
    return same_dims(n->in[0], s) && lw_is_row_value(n->out[0], s);
  const dvmc_value *o = n->out[0];
  if ((!special && !lw_fuses(n)) || !lw_is_f32(o) || (!same_dims(o, s) && !lw_is_row_value(o, s))) return 0;
  for (int k = 0; k < (special ? 1 : n->nin); k++) {
    const dvmc_value *v = n->in[k];
    if (!made_inside(g, first, i, v) && !lw_fuse_scalar(v) && !(lw_is_f32(v) && lw_broadcasts_to(v, o)))
      return 0;
  }
  return 1;
}

int lw_stitch_at(lowering *L, const dvmc_graph *g, int i, const int *uses, const id_list *reads) {
  const dvmc_node *n = g->nodes[i];
  const dvmc_value *s = NULL;
  if (lw_is_row_reduction(n)) s = n->in[0];
  else if (n->nout == 1 && n->out[0] && lw_fuses(n) && lw_is_f32(n->out[0]) && dvmc_value_shape_known(n->out[0]) &&
           n->out[0]->rank >= 1)
    s = n->out[0];
  if (!s || !stitch_joins(L, g, i, i, s)) return i;
  int end = i + 1, reduces = lw_is_row_reduction(n);
  while (end < g->nnodes && end - i < 64 && stitch_joins(L, g, i, end, s)) reduces += lw_is_row_reduction(g->nodes[end++]);
  if (!reduces) return i;
  /* what lw_lower_group would build: a run it cannot (a per-row value
   * read after the run, a program limit) is declined, trimmed of nodes
   * after its last reduction first */
  while (end > i) {
    if (lw_group_builds(L, g, i, end, uses, reads)) return end;
    if (lw_is_row_reduction(g->nodes[end - 1])) break;
    end--;
  }
  return i;
}
