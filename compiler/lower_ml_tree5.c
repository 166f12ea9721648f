/* ai.onnx.ml TreeEnsemble (opset 5), the one op that replaces the
 * classifier and regressor pair, as one call of "tree_ensemble" on X and
 * the ensemble's words (ops/cpu/ml_tree.h), as lower_ml.c writes those of
 * TreeEnsembleRegressor: each tree numbered depth-first from its root (an
 * interior node reached twice is refused; a leaf reached twice is written
 * twice), each leaf one weight (its target id and value). Set membership
 * (BRANCH_MEMBER) is refused. */
#include <string.h>

#include "lower_ml.h"
#include "ops/cpu/ml_post.h"
#include "ops/cpu/ml_tree.h"

/* The doubles of tensor attribute `name` (f32 or f64; u8 too with
 * `modes`), in the arena; *count 0 and NULL when absent. */
static dvm_status *tensor_of(lowering *L, const dvmc_node *n, const char *name, int modes, double **out, int *count) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  *out = NULL;
  *count = 0;
  if (!a) return NULL;
  dvm_dtype dt = a->type == DVMC_ATTR_TENSOR ? a->t->dtype : DVM_F32;
  if (a->type != DVMC_ATTR_TENSOR || !(dt == DVM_F32 || dt == DVM_F64 || (modes && dt == DVM_U8)))
    return lw_invalid(n, "attribute %s must be a %s tensor", name, modes ? "u8" : "f32 or f64");
  size_t k = a->t->nbytes / dvm_dtype_size(dt);
  if (k > INT32_MAX) return lw_unsupported(n, "attribute %s has more than 2^31 values", name);
  double *v = dvm_arena_alloc(&L->c->arena, k ? k : 1, sizeof *v);
  if (!v) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (size_t i = 0; i < k; i++)
    v[i] = dt == DVM_F32 ? ((const float *)a->t->data)[i] : dt == DVM_F64 ? ((const double *)a->t->data)[i]
                                                                             : ((const uint8_t *)a->t->data)[i];
  *out = v;
  *count = (int)k;
  return NULL;
}

static int32_t bits_of(double v) {
  float f = (float)v;
  int32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

typedef struct {
  const int64_t *feature, *yes, *no, *yes_leaf, *no_leaf, *missing, *target;
  const double *split, *mode, *weight;
  int nodes, leaves, nmissing;
} forest;

/* Entries (interior node or leaf) the walk from each root writes; a node's
 * new index in *seen (-1: not yet). */
typedef struct {
  int32_t *nodes, *weights; /* TE_NODE_WORDS, and 2 words, each */
  int count, nweights, cap;
  int *seen, *stack;
} walk;

/* Writes tree `root` depth-first (the true child right after its parent). */
static dvm_status *put_tree(const dvmc_node *n, const forest *f, int root, walk *w) {
  int sp = 0;
  w->stack[sp++] = root; /* >= 0: interior node i; < 0: leaf -1 - j */
  int *parent_slot = w->stack + f->nodes + f->leaves + 1; /* where each entry's index goes, or -1 */
  parent_slot[0] = -1;
  while (sp) {
    int e = w->stack[--sp], slot = parent_slot[sp], at = w->count++;
    if (at >= w->cap) return lw_invalid(n, "its trees reach more entries than they list: not trees");
    if (slot >= 0) w->nodes[slot] = at;
    int32_t *o = w->nodes + (size_t)at * TE_NODE_WORDS;
    if (e < 0) {
      int j = -1 - e;
      o[0] = TE_LEAF;
      o[1] = o[2] = 0;
      o[3] = w->nweights;
      o[4] = 1;
      w->weights[2 * w->nweights] = (int32_t)f->target[j];
      w->weights[2 * w->nweights++ + 1] = bits_of(f->weight[j]);
      continue;
    }
    if (w->seen[e]) return lw_invalid(n, "node %d is reached twice: not a tree", e);
    w->seen[e] = 1;
    int mode = (int)f->mode[e];
    if (mode > TE_NEQ) return lw_unsupported(n, "node %d: mode %d (BRANCH_MEMBER, set membership) is not supported", e, mode);
    if (f->feature[e] < 0 || f->feature[e] >= INT32_MAX) return lw_invalid(n, "node %d reads feature %lld", e, (long long)f->feature[e]);
    o[0] = mode | (f->nmissing && f->missing[e] ? 1 << 8 : 0);
    o[1] = (int32_t)f->feature[e];
    o[2] = bits_of(f->split[e]);
    int64_t child[2] = {f->no[e], f->yes[e]};
    int leaf[2] = {f->no_leaf[e] != 0, f->yes_leaf[e] != 0};
    for (int c = 0; c < 2; c++) { /* false first: the true child is taken first */
      if (child[c] < 0 || child[c] >= (leaf[c] ? f->leaves : f->nodes))
        return lw_invalid(n, "node %d: its %s %s %lld is out of range", e, c ? "true" : "false", leaf[c] ? "leaf" : "node",
                          (long long)child[c]);
      parent_slot[sp] = at * TE_NODE_WORDS + 4 - c;
      w->stack[sp++] = leaf[c] ? -1 - (int)child[c] : (int)child[c];
    }
  }
  return NULL;
}

dvm_status *lw_lower_tree_ensemble5(lowering *L, const dvmc_node *n, const op_rule *r) {
  forest f = {0};
  int k[8], nsplit, nmode, nweight;
  const char *names[] = {"nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids", "nodes_trueleafs",
                         "nodes_falseleafs", "nodes_missing_value_tracks_true", "leaf_targetids", "tree_roots"};
  const int64_t *roots, **dst[] = {&f.feature, &f.yes, &f.no, &f.yes_leaf, &f.no_leaf, &f.missing, &f.target, &roots};
  dvm_status *st = NULL;
  for (int i = 0; i < 8 && !st; i++) st = lw_ml_ints(n, names[i], dst[i], &k[i]);
  if (!st) st = tensor_of(L, n, "nodes_splits", 0, (double **)&f.split, &nsplit);
  if (!st) st = tensor_of(L, n, "nodes_modes", 1, (double **)&f.mode, &nmode);
  if (!st) st = tensor_of(L, n, "leaf_weights", 0, (double **)&f.weight, &nweight);
  if (st) return st;
  if (dvmc_attr_find(n, "membership_values")) return lw_unsupported(n, "membership_values (BRANCH_MEMBER) are not supported");
  f.nodes = k[0];
  f.leaves = k[6];
  f.nmissing = k[5];
  int trees = k[7];
  for (int i = 1; i < 5; i++)
    if (k[i] != f.nodes) return lw_invalid(n, "%s has %d values for %d nodes (nodes_featureids)", names[i], k[i], f.nodes);
  if (nsplit != f.nodes || nmode != f.nodes || (f.nmissing && f.nmissing != f.nodes))
    return lw_invalid(n, "nodes_splits, nodes_modes and nodes_missing_value_tracks_true have %d, %d and %d values for %d "
                      "nodes", nsplit, nmode, f.nmissing, f.nodes);
  if (nweight != f.leaves) return lw_invalid(n, "leaf_weights has %d values for %d leaves (leaf_targetids)", nweight, f.leaves);
  if (!trees || !f.nodes) return lw_invalid(n, "has no trees (tree_roots) or no nodes");
  int64_t targets = dvmc_attr_int(n, "n_targets", 0);
  if (targets < 1 || targets > 1 << 20) return lw_invalid(n, "n_targets %lld: want 1 to 2^20", (long long)targets);
  for (int j = 0; j < f.leaves; j++)
    if (f.target[j] < 0 || f.target[j] >= targets)
      return lw_invalid(n, "leaf_targetids[%d] = %lld is out of range for %lld targets", j, (long long)f.target[j], (long long)targets);
  /* opset 5's aggregates: AVERAGE, SUM, MIN, MAX. Its post transforms
   * are read as ONNX Runtime reads them, NONE, LOGISTIC, SOFTMAX,
   * SOFTMAX_ZERO, PROBIT (ml_post.h's order), though the ONNX spec
   * numbers SOFTMAX 1 and LOGISTIC 2. */
  static const int aggs[] = {TE_AVERAGE, TE_SUM, TE_MIN, TE_MAX};
  int64_t agg = dvmc_attr_int(n, "aggregate_function", 1), post = dvmc_attr_int(n, "post_transform", 0);
  if (agg < 0 || agg > 3) return lw_invalid(n, "aggregate_function %lld: want 0 to 3", (long long)agg);
  if (post < 0 || post > 4) return lw_invalid(n, "post_transform %lld: want 0 to 4", (long long)post);

  /* every node once and each leaf at most once per parent: at most
   * nodes + 2 nodes entries (a leaf per child slot) */
  dvm_arena *ar = &L->c->arena;
  walk w = {.cap = 3 * f.nodes + trees};
  w.nodes = dvm_arena_alloc(ar, (size_t)w.cap * TE_NODE_WORDS, sizeof(int32_t));
  w.weights = dvm_arena_alloc(ar, (size_t)w.cap * 2, sizeof(int32_t));
  w.seen = dvm_arena_alloc(ar, (size_t)f.nodes, sizeof(int));
  w.stack = dvm_arena_alloc(ar, 2 * ((size_t)f.nodes + f.leaves + 2), sizeof(int));
  int32_t *rootw = dvm_arena_alloc(ar, (size_t)trees, sizeof *rootw);
  if (!w.nodes || !w.weights || !w.seen || !w.stack || !rootw) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  memset(w.seen, 0, sizeof *w.seen * (size_t)f.nodes);
  for (int t = 0; t < trees; t++) {
    if (roots[t] < 0 || roots[t] >= f.nodes) return lw_invalid(n, "tree_roots[%d] = %lld is not a node", t, (long long)roots[t]);
    rootw[t] = w.count;
    if ((st = put_tree(n, &f, (int)roots[t], &w))) return st;
  }
  int64_t features = 0;
  for (int i = 0; i < w.count; i++) {
    const int32_t *o = w.nodes + (size_t)i * TE_NODE_WORDS;
    if ((o[0] & 0xff) != TE_LEAF && o[1] >= features) features = o[1] + 1;
  }
  size_t nw = TE_HEADER + (size_t)trees + (size_t)w.count * TE_NODE_WORDS + 2 * (size_t)w.nweights;
  int32_t *words = dvm_arena_alloc(ar, nw, sizeof *words);
  if (!words) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int32_t head[TE_HEADER] = {[TE_TREES] = trees, [TE_NODES] = w.count, [TE_WEIGHTS] = w.nweights,
                             [TE_TARGETS] = (int32_t)targets, [TE_FEATURES] = (int32_t)features,
                             [TE_AGGREGATE] = aggs[agg], [TE_POST] = (int32_t)post, [TE_FLAGS] = 0, [TE_BASES] = 0};
  memcpy(words, head, sizeof head);
  memcpy(words + TE_HEADER, rootw, sizeof *rootw * (size_t)trees);
  memcpy(words + TE_HEADER + trees, w.nodes, sizeof *words * (size_t)w.count * TE_NODE_WORDS);
  memcpy(words + TE_HEADER + trees + (size_t)w.count * TE_NODE_WORDS, w.weights, sizeof *words * 2 * (size_t)w.nweights);
  return lw_ml_call(L, n, r, words, nw, targets, 0);
}
