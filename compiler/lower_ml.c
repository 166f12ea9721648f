/* The ai.onnx.ml tree ensembles: TreeEnsembleClassifier and
 * TreeEnsembleRegressor (opsets 1 to 3) become one call of the kernel
 * "tree_ensemble" on X and the ensemble's words (ops/cpu/ml_tree.h), an
 * i32 constant that the kernel lays out for traversal once, when the
 * module is linked.
 *
 * Each tree's nodes are renumbered in depth-first order from its root (the
 * first node of each run of one tree id, as ONNX Runtime takes it), so a
 * child always follows its parent: a node reached twice (a cycle, or two
 * parents) is refused, and nodes no root reaches are dropped. */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "lower_ml.h"
#include "lowering.h"
#include "ops/cpu/ml_tree.h"

typedef struct {
  const int64_t *tree, *id, *feature, *yes, *no, *missing;
  const char **mode;
  double *value;
  int n, nmissing;
} nodes_in;

typedef struct {
  int64_t tree, id;
  int at;
} key;

static int key_cmp(const void *a, const void *b) {
  const key *x = a, *y = b;
  return x->tree != y->tree ? (x->tree < y->tree ? -1 : 1) : x->id != y->id ? (x->id < y->id ? -1 : 1) : 0;
}

/* The index of node (tree, id), or -1. */
static int find(const key *keys, int n, int64_t tree, int64_t id) {
  key k = {tree, id, 0};
  const key *f = bsearch(&k, keys, (size_t)n, sizeof k, key_cmp);
  return f ? f->at : -1;
}

dvm_status *lw_ml_ints(const dvmc_node *n, const char *name, const int64_t **out, int *count) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  *out = NULL;
  *count = 0;
  if (!a) return NULL;
  if (a->type != DVMC_ATTR_INTS) return lw_invalid(n, "attribute %s must be ints", name);
  *out = a->ints;
  *count = a->n;
  return NULL;
}

dvm_status *lw_ml_floats(lowering *L, const dvmc_node *n, const char *name, double **out, int *count) {
  char tname[64];
  snprintf(tname, sizeof tname, "%s_as_tensor", name);
  const dvmc_attr *a = dvmc_attr_find(n, name), *t = dvmc_attr_find(n, tname);
  *out = NULL;
  *count = 0;
  if (a && t) return lw_invalid(n, "has both %s and %s", name, tname);
  if (!a && !t) return NULL;
  if (a && a->type != DVMC_ATTR_FLOATS) return lw_invalid(n, "attribute %s must be floats", name);
  if (t && (t->type != DVMC_ATTR_TENSOR || (t->t->dtype != DVM_F32 && t->t->dtype != DVM_F64)))
    return lw_invalid(n, "attribute %s must be an f32 or f64 tensor", tname);
  size_t k = a ? (size_t)a->n : t->t->nbytes / dvm_dtype_size(t->t->dtype);
  if (k > INT32_MAX) return lw_unsupported(n, "attribute %s has more than 2^31 values", name);
  double *v = dvm_arena_alloc(&L->c->arena, k ? k : 1, sizeof *v);
  if (!v) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (size_t i = 0; i < k; i++)
    v[i] = a ? a->floats[i] : t->t->dtype == DVM_F32 ? ((const float *)t->t->data)[i] : ((const double *)t->t->data)[i];
  *out = v;
  *count = (int)k;
  return NULL;
}

int lw_ml_name(const char *s, const char *const *names) {
  for (int i = 0; names[i]; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

static const char *const mode_names[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT",
                                         "BRANCH_EQ", "BRANCH_NEQ", "LEAF", NULL};

static dvm_status *read_nodes(lowering *L, const dvmc_node *n, nodes_in *in) {
  int k[6];
  dvm_status *st;
  const char *names[] = {"nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_truenodeids",
                         "nodes_falsenodeids", "nodes_missing_value_tracks_true"};
  const int64_t **dst[] = {&in->tree, &in->id, &in->feature, &in->yes, &in->no, &in->missing};
  for (int i = 0; i < 6; i++)
    if ((st = lw_ml_ints(n, names[i], dst[i], &k[i]))) return st;
  int nv;
  if ((st = lw_ml_floats(L, n, "nodes_values", &in->value, &nv))) return st;
  const dvmc_attr *m = dvmc_attr_find(n, "nodes_modes");
  if (!m || m->type != DVMC_ATTR_STRINGS) return lw_invalid(n, "needs nodes_modes (strings)");
  in->n = m->n;
  in->mode = m->strings;
  in->nmissing = k[5];
  if (!in->n) return lw_invalid(n, "has no nodes");
  for (int i = 0; i < 5; i++)
    if (k[i] != in->n) return lw_invalid(n, "%s has %d values for %d nodes (nodes_modes)", names[i], k[i], in->n);
  if (nv != in->n) return lw_invalid(n, "nodes_values has %d values for %d nodes", nv, in->n);
  if (k[5] && k[5] != in->n) return lw_invalid(n, "%s has %d values for %d nodes", names[5], k[5], in->n);
  for (int i = 0; i < in->n; i++)
    if (lw_ml_name(in->mode[i], mode_names) < 0) return lw_invalid(n, "nodes_modes[%d] \"%s\" is not a node mode", i, in->mode[i]);
  return NULL;
}

typedef struct {
  int32_t *w;    /* the words */
  size_t nw, cap;
  int *order;    /* input node -> its new index, or -1 */
  int *stack;
  int next;      /* new nodes so far */
  int features;
} packing;

static int32_t bits_of(double v) {
  float f = (float)v;
  int32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

/* Depth-first from node `root`: new indices into p->order, and the node
 * listing (in new order) into out. Fails on a node reached twice or a
 * child that is not in the tree. */
static dvm_status *number_tree(const dvmc_node *n, const nodes_in *in, const key *keys, int root, packing *p,
                               int *out) {
  int sp = 0;
  p->stack[sp++] = root;
  while (sp) {
    int i = p->stack[--sp];
    if (p->order[i] >= 0)
      return lw_invalid(n, "node %lld of tree %lld is reached twice: not a tree", (long long)in->id[i],
                        (long long)in->tree[i]);
    out[p->next] = i;
    p->order[i] = p->next++;
    if (!strcmp(in->mode[i], "LEAF")) continue;
    int c[2] = {find(keys, in->n, in->tree[i], in->no[i]), find(keys, in->n, in->tree[i], in->yes[i])};
    for (int j = 0; j < 2; j++) {
      if (c[j] < 0)
        return lw_invalid(n, "node %lld of tree %lld: its %s node %lld is not in the tree", (long long)in->id[i],
                          (long long)in->tree[i], j ? "true" : "false", (long long)(j ? in->yes[i] : in->no[i]));
      p->stack[sp++] = c[j]; /* the true child is taken first */
    }
  }
  return NULL;
}

dvm_status *lw_lower_tree_ensemble(lowering *L, const dvmc_node *n, const op_rule *r) {
  int cls = !strcmp(n->op, "TreeEnsembleClassifier");
  const char *pre = cls ? "class" : "target";
  char name[4][32];
  const char *suffix[] = {"treeids", "nodeids", "ids", "weights"};
  for (int i = 0; i < 4; i++) snprintf(name[i], sizeof name[i], "%s_%s", pre, suffix[i]);
  nodes_in in;
  const int64_t *wt, *wn, *wid, *labels = NULL;
  int k[3], nweights, nbases, nlabels = 0;
  double *wv, *bases;
  dvm_status *st = read_nodes(L, n, &in);
  for (int i = 0; i < 3 && !st; i++) st = lw_ml_ints(n, name[i], i == 0 ? &wt : i == 1 ? &wn : &wid, &k[i]);
  if (!st) st = lw_ml_floats(L, n, name[3], &wv, &nweights);
  if (!st) st = lw_ml_floats(L, n, "base_values", &bases, &nbases);
  if (!st && cls) st = lw_ml_labels(L, n, "classlabels_int64s", &labels, &nlabels);
  if (st) return st;
  for (int i = 0; i < 3; i++)
    if (k[i] != nweights) return lw_invalid(n, "%s has %d values for %d weights (%s)", name[i], k[i], nweights, name[3]);
  int64_t targets = cls ? nlabels : dvmc_attr_int(n, "n_targets", 1);
  if (cls && targets < 2) return lw_unsupported(n, "%lld class labels (classlabels_int64s): want 2 or more", (long long)targets);
  if (targets < 1 || targets > 1 << 20) return lw_invalid(n, "n_targets %lld: want 1 to 2^20", (long long)targets);
  static const char *const aggs[] = {"SUM", "AVERAGE", "MIN", "MAX", NULL};
  static const char *const posts[] = {"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT", NULL};
  const char *agg_s = dvmc_attr_string(n, "aggregate_function", "SUM"), *post_s = dvmc_attr_string(n, "post_transform", "NONE");
  int agg = cls ? TE_SUM : lw_ml_name(agg_s, aggs), post = lw_ml_name(post_s, posts);
  if (agg < 0) return lw_invalid(n, "aggregate_function \"%s\" is not SUM, AVERAGE, MIN or MAX", agg_s);
  if (post < 0) return lw_invalid(n, "post_transform \"%s\" is not NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT", post_s);
  if (cls && targets == 2 ? nbases > 2 : nbases > targets)
    return lw_invalid(n, "%d base_values for %lld %s", nbases, (long long)targets, cls ? "classes" : "targets");

  /* nodes by (tree, id) */
  dvm_arena *ar = &L->c->arena;
  key *keys = dvm_arena_alloc(ar, (size_t)in.n, sizeof *keys);
  int *listing = dvm_arena_alloc(ar, (size_t)in.n, sizeof *listing), *wcount = dvm_arena_alloc(ar, (size_t)in.n, sizeof(int));
  packing p = {.order = dvm_arena_alloc(ar, (size_t)in.n, sizeof(int)), .stack = dvm_arena_alloc(ar, (size_t)in.n * 2 + 2, sizeof(int))};
  int *roots = dvm_arena_alloc(ar, (size_t)in.n, sizeof *roots);
  if (!keys || !listing || !wcount || !p.order || !p.stack || !roots) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int i = 0; i < in.n; i++) {
    keys[i] = (key){in.tree[i], in.id[i], i};
    p.order[i] = -1;
    wcount[i] = 0;
  }
  qsort(keys, (size_t)in.n, sizeof *keys, key_cmp);
  for (int i = 1; i < in.n; i++)
    if (!key_cmp(&keys[i - 1], &keys[i]))
      return lw_invalid(n, "node %lld of tree %lld is listed twice", (long long)keys[i].id, (long long)keys[i].tree);
  int trees = 0;
  for (int i = 0; i < in.n; i++) {
    if (i && in.tree[i] == in.tree[i - 1]) continue;
    roots[trees++] = p.next;
    if ((st = number_tree(n, &in, keys, i, &p, listing))) return st;
  }
  /* weights, by leaf in new order */
  int *wnode = dvm_arena_alloc(ar, (size_t)nweights + 1, sizeof *wnode);
  if (!wnode) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int all_positive = 1, one_class = 1;
  for (int i = 0; i < nweights; i++) {
    int at = find(keys, in.n, wt[i], wn[i]);
    if (at < 0) return lw_invalid(n, "weight %d names node %lld of tree %lld, which is not listed", i, (long long)wn[i], (long long)wt[i]);
    if (wid[i] < 0 || wid[i] >= targets)
      return lw_invalid(n, "%s[%d] = %lld is out of range for %lld %s", name[2], i, (long long)wid[i], (long long)targets,
                        cls ? "classes" : "targets");
    wnode[i] = at;
    if (p.order[at] >= 0 && !strcmp(in.mode[at], "LEAF")) wcount[p.order[at]]++;
    all_positive &= wv[i] >= 0;
    one_class &= wid[i] == wid[0];
  }
  int used = 0;
  for (int j = 0; j < p.next; j++) used += wcount[j];
  size_t nw = TE_HEADER + (size_t)trees + (size_t)p.next * TE_NODE_WORDS + (size_t)used * 2 + (size_t)nbases + (cls ? (size_t)targets * 2 : 0);
  int32_t *w = dvm_arena_alloc(ar, nw, sizeof *w);
  int *wstart = dvm_arena_alloc(ar, (size_t)p.next + 1, sizeof *wstart);
  if (!w || !wstart) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int32_t *wroots = w + TE_HEADER, *wnodes = wroots + trees, *wweights = wnodes + (size_t)p.next * TE_NODE_WORDS;
  int32_t *wbases = wweights + (size_t)used * 2;
  for (int j = 0, s = 0; j <= p.next; j++) {
    wstart[j] = s;
    if (j < p.next) s += wcount[j];
  }
  int64_t features = 0;
  for (int j = 0; j < p.next; j++) {
    int i = listing[j], mode = lw_ml_name(in.mode[i], mode_names);
    int32_t *o = wnodes + (size_t)j * TE_NODE_WORDS;
    o[0] = mode | (in.nmissing && in.missing[i] ? 1 << 8 : 0);
    if (mode == TE_LEAF) {
      o[1] = o[2] = 0;
      o[3] = wstart[j];
      o[4] = 0; /* counted as weights are placed */
      continue;
    }
    if (in.feature[i] < 0 || in.feature[i] >= INT32_MAX)
      return lw_invalid(n, "node %lld of tree %lld reads feature %lld", (long long)in.id[i], (long long)in.tree[i], (long long)in.feature[i]);
    if (in.feature[i] >= features) features = in.feature[i] + 1;
    o[1] = (int32_t)in.feature[i];
    o[2] = bits_of(in.value[i]);
    o[3] = p.order[find(keys, in.n, in.tree[i], in.yes[i])];
    o[4] = p.order[find(keys, in.n, in.tree[i], in.no[i])];
  }
  for (int i = 0; i < nweights; i++) {
    int j = p.order[wnode[i]];
    if (j < 0 || (wnodes[(size_t)j * TE_NODE_WORDS] & 0xff) != TE_LEAF) continue; /* ONNX Runtime reads leaves' weights only */
    int32_t *o = wnodes + (size_t)j * TE_NODE_WORDS, *dst = wweights + 2 * (size_t)(o[3] + o[4]++);
    dst[0] = (int32_t)wid[i];
    dst[1] = bits_of(wv[i]);
  }
  for (int i = 0; i < nbases; i++) wbases[i] = bits_of(bases[i]);
  for (int64_t c = 0; cls && c < targets; c++) {
    uint64_t u = (uint64_t)labels[c];
    wbases[nbases + 2 * c] = (int32_t)(uint32_t)u;
    wbases[nbases + 2 * c + 1] = (int32_t)(uint32_t)(u >> 32);
  }
  int32_t head[TE_HEADER] = {
      [TE_TREES] = trees, [TE_NODES] = p.next, [TE_WEIGHTS] = used, [TE_TARGETS] = (int32_t)targets,
      [TE_FEATURES] = (int32_t)features, [TE_AGGREGATE] = agg, [TE_POST] = post,
      [TE_FLAGS] = (cls ? TE_CLASSIFIER : 0) | (cls && targets == 2 && one_class && nweights ? TE_ONE_CLASS : 0) |
                   (all_positive ? TE_POSITIVE : 0),
      [TE_BASES] = nbases};
  memcpy(w, head, sizeof head);
  memcpy(wroots, roots, sizeof *roots * (size_t)trees);
  return lw_ml_call(L, n, r, w, nw, targets, cls);
}

dvm_status *lw_ml_labels(lowering *L, const dvmc_node *n, const char *name, const int64_t **out, int *count) {
  const dvmc_attr *s = dvmc_attr_find(n, "classlabels_strings");
  if (!s) return lw_ml_ints(n, name, out, count);
  if (s->type != DVMC_ATTR_STRINGS) return lw_invalid(n, "classlabels_strings is not a list of strings");
  if (dvmc_attr_find(n, name)) return lw_invalid(n, "has both %s and classlabels_strings", name);
  int64_t *idx = dvm_arena_alloc(&L->c->arena, (size_t)(s->n ? s->n : 1), sizeof *idx);
  if (!idx) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int i = 0; i < s->n; i++) idx[i] = i;
  *out = idx;
  *count = s->n;
  return NULL;
}

/* Output 0 of n, the class indices the call wrote, becomes its string
 * labels: a gather of the classlabels_strings constant by them. */
static dvm_status *gather_labels(lowering *L, const dvmc_node *n) {
  const dvmc_attr *s = dvmc_attr_find(n, "classlabels_strings");
  int64_t k = s->n;
  dvmc_tensor *t = dvmc_tensor_strings(L->c, 1, &k, (size_t)k, s->strings, NULL);
  char cname[160];
  snprintf(cname, sizeof cname, "%s.classlabels_strings", n->name);
  int kc = t ? dvmc_emit_const(L->e, cname, t) : -1, idx = lw_lookup(L, n->out[0]);
  if (kc < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int table = dvmc_fn_reg(L->f), shape = dvmc_fn_reg(L->f), out = dvmc_fn_reg(L->f), axis = lw_emit_int(L, 0);
  dvmc_fn_CONST(L->f, table, kc);
  dvmc_fn_SHAPE_OF(L->f, shape, idx);
  lw_emit_alloc(L, out, DVM_STRING, shape, 1, NULL);
  int kg = dvmc_emit_kernel(L->e, "gather", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, kg, -1, DVM_LIST(out), DVM_LIST(table, idx), DVM_LIST(axis));
  dvmc_fn_RELEASE(L->f, idx);
  dvmc_fn_RELEASE(L->f, table);
  dvmc_fn_RELEASE(L->f, shape);
  dvmc_fn_RELEASE(L->f, axis);
  lw_set_type(n->out[0], DVM_STRING);
  return lw_bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

int lw_ml_const(lowering *L, const dvmc_node *n, const char *what, dvm_dtype dt, void *data, size_t count) {
  dvmc_tensor *t = dvm_arena_alloc(&L->c->arena, 1, sizeof *t);
  if (!t) return -1;
  *t = (dvmc_tensor){.dtype = dt, .rank = 1, .dims = {(int64_t)count}, .data = data, .nbytes = count * dvm_dtype_size(dt)};
  char cname[160];
  snprintf(cname, sizeof cname, "%s.%s", n->name, what);
  int kc = dvmc_emit_const(L->e, cname, t), reg = dvmc_fn_reg(L->f);
  if (kc < 0) return -1;
  dvmc_fn_CONST(L->f, reg, kc);
  return reg;
}

dvm_status *lw_ml_call(lowering *L, const dvmc_node *n, const op_rule *r, int32_t *words, size_t nw, int64_t columns,
                       int cls) {
  int reg = lw_ml_const(L, n, "model", DVM_I32, words, nw);
  if (reg < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  if (st) return st;
  c.ins[c.nin++] = reg;
  c.attrs[c.nattrs++] = lw_emit_int(L, columns);
  c.attrs[c.nattrs++] = lw_emit_int(L, cls);
  c.label_index = cls && dvmc_attr_find(n, "classlabels_strings");
  st = lw_emit_call(L, n, r, &c);
  dvmc_fn_RELEASE(L->f, reg);
  if (!st && c.label_index && n->out[0]) st = gather_labels(L, n);
  return st;
}
