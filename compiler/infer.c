/* Symbolic shape inference (see infer.h): the pass, which runs the rule the
 * op table names for each node (infer_rule.h; the rules, one file per op
 * family, are infer_<family>.c). */
#include "infer_rule.h"

bool dvmc_value_shape_known(const dvmc_value *v) {
  if (!v || v->rank < 0) return false;
  for (int d = 0; d < v->rank; d++)
    if (!v->dims[d]) return false;
  return true;
}

bool dvmc_value_elems_known(const dvmc_value *v) {
  if (!v || !v->elems) return false;
  for (int i = 0; i < v->nelems; i++)
    if (!v->elems[i]) return false;
  return true;
}

/* Contents of constant integer tensors, as expressions. */
static void const_elems(inf *I, dvmc_value *v) {
  const dvmc_tensor *t = v->constant;
  if (!t || v->elems || (t->dtype != DVM_I64 && t->dtype != DVM_I32) || t->rank > 1) return;
  int64_t n = t->rank ? t->dims[0] : 1;
  if (n > MAX_ELEMS) return;
  const dvmc_expr *e[MAX_ELEMS];
  for (int64_t i = 0; i < n; i++)
    e[i] = dvmc_const(I->x, t->dtype == DVM_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i]);
  inf_set_elems(I, v, (int)n, e);
}

/* The rule of each row of the op table (ops.def's SHAPE column). */
static inf_rule *const rules[] = {
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) inf_rule_##shape,
#include "ops.def"
#undef OP
};

static void infer_node(inf *I, const dvmc_node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i]) const_elems(I, n->in[i]);
  if (!n->nout || !n->out[0]) return;
  inf_rule *rule = n->def ? rules[dvmc_op_index(n->def)] : inf_rule_none;
  int loop = rule == inf_rule_loop || rule == inf_rule_scan || rule == inf_rule_sequence_map;
  I->depth++; /* subgraphs first: If's and Loop's outputs come from them */
  for (int a = 0; a < n->nattrs && !loop; a++)
    if (n->attrs[a].type == DVMC_ATTR_GRAPH && n->attrs[a].g) inf_graph(I, n->attrs[a].g);
  I->depth--;
  rule(I, n);
  /* at top level a dim no rule can tell is a symbol read from the output
   * once the node has run (lower_values.c), so what follows is arithmetic on it */
  for (int i = 0; i < n->nout && I->depth == 0; i++)
    for (int d = 0; n->out[i] && d < n->out[i]->rank; d++)
      if (!n->out[i]->dims[d]) n->out[i]->dims[d] = inf_data_dim(I, "d");
  for (int i = 0; i < n->nout; i++) {
    dvm_dtype dt;
    bool known;
    if (n->out[i]) n->out[i]->kind = dvmc_op_out_kind(n, i);
    dvm_status *st = n->out[i] && !n->out[i]->typed ? dvmc_op_out_dtype(n, i, &dt, &known) : NULL;
    if (st) dvm_status_free(st); /* a bad "to": lowering reports it */
    else if (n->out[i] && !n->out[i]->typed && known) inf_set_dtype(n->out[i], dt);
  }
}

void inf_graph(inf *I, dvmc_graph *g) {
  for (int i = 0; i < g->nvalues; i++) const_elems(I, g->values[i]);
  for (int i = 0; i < g->nnodes; i++) infer_node(I, g->nodes[i]);
}

/* Forgets what inference found (node outputs that are not constants), so
 * it can run again after unification. */
static void reset_graph(dvmc_graph *g) {
  inf_reset_values(g);
  for (int i = 0; i < g->nnodes; i++)
    for (int a = 0; a < g->nodes[i]->nattrs; a++)
      if (g->nodes[i]->attrs[a].g) reset_graph(g->nodes[i]->attrs[a].g);
}

/* The position of sym's first appearance among g's input dims, or -1. */
static int input_pos(const dvmc_graph *g, const dvmc_expr *sym) {
  for (int i = 0; i < g->ninputs; i++)
    for (int d = 0; d < g->inputs[i]->rank; d++)
      if (g->inputs[i]->dims[d] == sym) return i * DVM_MAX_RANK + d;
  return -1;
}

/* Unifies the first pair of input symbols that a constraint says are
 * equal: the later one is replaced by the earlier wherever inputs name it,
 * which takes the intersection of their ranges. Sets *changed. */
static dvm_status *unify(inf *I, dvmc_graph *g, int *changed) {
  *changed = 0;
  for (int i = 0; i < g->nconstraints; i++) {
    dvmc_constraint *k = &g->constraints[i];
    int pa = input_pos(g, k->a), pb = input_pos(g, k->b);
    if (k->rel != DVMC_REL_EQ || k->unified || !dvmc_expr_sym_name(k->a) || !dvmc_expr_sym_name(k->b) ||
        pa < 0 || pb < 0)
      continue;
    if (pb < pa) {
      const dvmc_expr *t = k->a;
      k->a = k->b;
      k->b = t;
    }
    int64_t lo1, hi1, lo2, hi2;
    dvmc_sym_range(k->a, &lo1, &hi1);
    dvmc_sym_range(k->b, &lo2, &hi2);
    if (lo2 > hi1 || lo1 > hi2)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "node \"%s\": %s (%lld..%lld) and %s (%lld..%lld) must be equal (%s), "
                            "but their ranges do not meet",
                            k->node->name, dvmc_expr_sym_name(k->a), (long long)lo1, (long long)hi1,
                            dvmc_expr_sym_name(k->b), (long long)lo2, (long long)hi2, k->why);
    dvmc_sym_set_range(I->x, k->a, lo1 > lo2 ? lo1 : lo2, hi1 < hi2 ? hi1 : hi2);
    for (int v = 0; v < g->ninputs; v++)
      for (int d = 0; d < g->inputs[v]->rank; d++)
        if (g->inputs[v]->dims[d] == k->b) g->inputs[v]->dims[d] = k->a;
    k->unified = true;
    *changed = 1;
    return NULL;
  }
  return NULL;
}

/* Why node n's outputs are unknown while its inputs are known, or NULL
 * when they are known or the loss came from an input. */
static const char *lost_at(const dvmc_node *n) {
  int out_unknown = 0;
  for (int i = 0; i < n->nout; i++)
    out_unknown |= n->out[i] && n->out[i]->kind == DVMC_TENSOR && !dvmc_value_shape_known(n->out[i]);
  if (!out_unknown) return NULL;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && !dvmc_value_shape_known(n->in[i])) return NULL;
  if (!n->def) return "dvm does not know this op";
  if (!n->def->shape_rule) return "the op has no symbolic shape rule";
  static const char *const data_ops[] = {"NonZero", "TopK", "Range", "OneHot", "Compress", "Unique", "NonMaxSuppression", NULL};
  if (inf_is(n, data_ops))
    return "its output's size depends on data (inside a branch or loop body)";
  for (int i = 1; i < n->nin; i++) {
    const dvmc_value *v = n->in[i];
    if (v && v->typed && (v->dtype == DVM_I64 || v->dtype == DVM_I32) && !dvmc_value_elems_known(v))
      return "an integer input it reads (shape, axes, sizes) is computed from data";
  }
  return "its rule cannot tell from these attributes and inputs";
}

int dvmc_infer_unknown(dvmc_graph *g, int *total, const dvmc_node **first) {
  int unknown = 0;
  *total = 0;
  *first = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *n = g->nodes[i];
    n->shape_lost = lost_at(n);
    if (n->shape_lost && !*first) *first = n;
    for (int k = 0; k < n->nout; k++) /* sequences and optionals have no shape to know */
      if (n->out[k] && n->out[k]->kind == DVMC_TENSOR) ++*total, unknown += !dvmc_value_shape_known(n->out[k]);
  }
  return unknown;
}

dvm_status *dvmc_infer(dvmc_ctx *c, dvmc_graph *g) {
  inf I = {c, c->exprs, g, 0, 0, 0};
  for (;;) {
    I.narrowed = 0;
    inf_graph(&I, g);
    if (I.oom) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    int changed;
    dvm_status *st = unify(&I, g, &changed);
    if (st) return st;
    if (!changed && !I.narrowed) return NULL;
    /* start again from the inputs; the relations found are found again */
    int kept = 0;
    for (int i = 0; i < g->nconstraints; i++)
      if (g->constraints[i].unified) g->constraints[kept++] = g->constraints[i];
    g->nconstraints = kept;
    reset_graph(g);
  }
}
