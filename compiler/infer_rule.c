/* The helpers every shape rule uses (infer_rule.h). */
#include <string.h>

#include "infer_rule.h"

void inf_set_shape(dvmc_value *v, int rank, const dvmc_expr *const *dims) {
  if (!v || rank < 0 || rank > DVM_MAX_RANK) return;
  v->rank = rank;
  for (int d = 0; d < rank; d++) v->dims[d] = dims[d];
}

/* The rank alone: dims the rule cannot tell stay NULL (at top level they
 * become symbols read from the output: fill_data_dims). */
void inf_set_rank(dvmc_value *v, int rank) {
  const dvmc_expr *none[DVM_MAX_RANK] = {0};
  if (v && v->rank < 0) inf_set_shape(v, rank, none);
}

void inf_set_dtype(dvmc_value *v, dvm_dtype dt) {
  if (!v) return;
  v->typed = true;
  v->dtype = dt;
}

void inf_set_elems(inf *I, dvmc_value *v, int n, const dvmc_expr *const *e) {
  if (!v || n > MAX_ELEMS) return;
  const dvmc_expr **copy = dvm_arena_alloc(&I->c->arena, (size_t)(n ? n : 1), sizeof *copy);
  if (!copy) return;
  for (int i = 0; i < n; i++) copy[i] = e[i];
  v->elems = copy;
  v->nelems = n;
}

/* Constant ints of a value: from its elems when they are all constants. */
int inf_const_list(const dvmc_value *v, int64_t *out, int max) {
  if (!dvmc_value_elems_known(v) || v->nelems > max) return -1;
  for (int i = 0; i < v->nelems; i++)
    if (!dvmc_expr_is_const(v->elems[i], &out[i])) return -1;
  return v->nelems;
}

/* A list attribute or constant input (later opsets moved axes to inputs). */
int inf_ints_of(const dvmc_node *n, const char *attr, int input, int64_t *out, int max) {
  const dvmc_attr *a = dvmc_attr_find(n, attr);
  if (a && a->type == DVMC_ATTR_INTS && a->n <= max) {
    for (int i = 0; i < a->n; i++) out[i] = a->ints[i];
    return a->n;
  }
  if (input >= 0 && input < n->nin && n->in[input]) return inf_const_list(n->in[input], out, max);
  return a ? -1 : -2; /* -2: absent */
}

/* A list attribute or input as expressions: an attribute's ints, or an
 * input's known contents (constants or dims, as Shape -> Gather chains make
 * them). Returns the count, -1 when unknown, -2 when absent. */
int inf_exprs_of(inf *I, const dvmc_node *n, const char *attr, int input, const dvmc_expr **out, int max) {
  const dvmc_attr *a = attr ? dvmc_attr_find(n, attr) : NULL;
  if (a) {
    if (a->type != DVMC_ATTR_INTS || a->n > max) return -1;
    for (int i = 0; i < a->n; i++) out[i] = dvmc_const(I->x, a->ints[i]);
    return a->n;
  }
  if (input < 0 || input >= n->nin || !n->in[input]) return -2;
  const dvmc_value *v = n->in[input];
  if (!dvmc_value_elems_known(v) || v->nelems > max) return -1;
  for (int i = 0; i < v->nelems; i++) out[i] = v->elems[i];
  return v->nelems;
}

int inf_is(const dvmc_node *n, const char *const *ops) {
  for (int i = 0; ops[i]; i++)
    if (!strcmp(n->op, ops[i])) return 1;
  return 0;
}

int inf_norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? (int)axis : -1;
}

/* The broadcast of two dims. Where they are not provably equal and neither
 * is provably 1, a top-level node (one that always runs) records the
 * relation: equality when both are >= 2, else equality or one of them 1.
 * Two different constants are left to the kernel's error. */
const dvmc_expr *inf_bcast_dim(inf *I, const dvmc_node *n, const dvmc_expr *r, const dvmc_expr *e) {
  const dvmc_expr *one = dvmc_const(I->x, 1);
  if (!r || !e) return NULL;
  if (e == r || e == one) return r;
  if (r == one) return e;
  int64_t lo1, hi1, lo2, hi2;
  /* a against min(a, X) (a slice of a fixed-size table by a dim, as the
   * position ids of BERT exports): they broadcast only when equal, that
   * is a <= X; the run checks it, and the result is a */
  for (int k = 0; k < 2; k++) {
    const dvmc_expr *a = k ? e : r, *m = k ? r : e;
    if (dvmc_expr_kind_of(m) == DVMC_E_MIN && (dvmc_expr_arg(m, 0) == a || dvmc_expr_arg(m, 1) == a)) {
      const dvmc_expr *other = dvmc_expr_arg(m, 0) == a ? dvmc_expr_arg(m, 1) : dvmc_expr_arg(m, 0);
      dvmc_sym_range(other, &lo1, &hi1);
      if (lo1 < 2) break; /* min(a, 1) broadcasts against any a */
      int64_t c, alo, ahi;
      dvmc_sym_range(a, &alo, &ahi);
      if (I->depth == 0 && dvmc_expr_sym_name(a) && dvmc_expr_is_const(other, &c) && c >= alo) {
        /* an input symbol: its range ends at c, the input guard checks it,
         * and inference runs again with min(a, c) = a */
        dvmc_sym_set_range(I->x, a, alo, c < ahi ? c : ahi);
        I->narrowed = 1;
        return a;
      }
      dvmc_constraint k2 = {DVMC_REL_EQ, a, m, n, false, "they broadcast"};
      if (I->depth == 0 && !dvmc_graph_constrain(I->c, I->root, &k2)) I->oom = 1;
      return a;
    }
  }
  if (dvmc_expr_is_const(r, &lo1) && dvmc_expr_is_const(e, &lo2)) return NULL;
  dvmc_sym_range(r, &lo1, &hi1);
  dvmc_sym_range(e, &lo2, &hi2);
  dvmc_constraint k = {lo1 >= 2 && lo2 >= 2 ? DVMC_REL_EQ : DVMC_REL_EQ_OR_ONE, r, e, n, false, "they broadcast"};
  if (I->depth == 0 && !dvmc_graph_constrain(I->c, I->root, &k)) I->oom = 1;
  /* a == b or one is 1: max when neither can be 0 */
  return lo1 >= 1 && lo2 >= 1 ? dvmc_max(I->x, r, e) : NULL;
}

/* Dims an op needs equal (a matrix product's inner dims, concat's inputs
 * off its axis): where not provably equal, a top-level node records the
 * relation, as for broadcasts. Two different constants are left to the
 * kernel's error. */
void inf_require_equal(inf *I, const dvmc_node *n, const dvmc_expr *a, const dvmc_expr *b, const char *why) {
  int64_t ca, cb;
  if (!a || !b || a == b || (dvmc_expr_is_const(a, &ca) && dvmc_expr_is_const(b, &cb))) return;
  dvmc_constraint k = {DVMC_REL_EQ, a, b, n, false, why};
  if (I->depth == 0 && !dvmc_graph_constrain(I->c, I->root, &k)) I->oom = 1;
}

/* Numpy broadcasting of known dims; unknown where the relation is. */
void inf_broadcast(inf *I, const dvmc_node *n, int first, int count) {
  int rank = 0;
  for (int i = first; i < first + count; i++) {
    if (!n->in[i] || n->in[i]->rank < 0) return;
    if (n->in[i]->rank > rank) rank = n->in[i]->rank;
  }
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int k = 0; k < rank; k++) {
    const dvmc_expr *r = dvmc_const(I->x, 1);
    for (int i = first; i < first + count; i++) {
      const dvmc_value *v = n->in[i];
      int j = k - (rank - v->rank);
      if (j >= 0) r = inf_bcast_dim(I, n, r, v->dims[j]);
    }
    d[k] = r;
  }
  inf_set_shape(n->out[0], rank, d);
}

void inf_same_shape(const dvmc_node *n, int out) {
  if (n->nin && n->in[0] && out < n->nout && n->out[out]) inf_set_shape(n->out[out], n->in[0]->rank, n->in[0]->dims);
}

/* The product of dims [lo, hi), or NULL. */
const dvmc_expr *inf_prod(inf *I, const dvmc_value *v, int lo, int hi) {
  const dvmc_expr *p = dvmc_const(I->x, 1);
  for (int i = lo; i < hi && p; i++) p = v->dims[i] ? dvmc_mul(I->x, p, v->dims[i]) : NULL;
  return p;
}

/* A dim only the run time knows (NonZero's count, a runtime TopK k): a
 * fresh symbol that lowering reads from the node's output once it has run
 * (lower_values.c), so what follows is arithmetic on it. Top-level nodes only: a
 * branch or loop body runs never or many times. */
const dvmc_expr *inf_data_dim(inf *I, const char *hint) {
  return I->depth == 0 ? dvmc_sym_fresh(I->x, hint) : NULL;
}

/* Ops whose outputs have input 0's rank whatever their dims: where the
 * rule cannot tell the dims, the rank still holds. */
void inf_keep_rank(const dvmc_node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->in[0] && n->in[0]->rank >= 0) inf_set_rank(n->out[i], n->in[0]->rank);
}

/* Forgets the shapes and contents inference found for g's node outputs. */
void inf_reset_values(dvmc_graph *g) {
  for (int i = 0; i < g->nvalues; i++) {
    dvmc_value *v = g->values[i];
    if (!v->producer || v->constant) continue;
    v->rank = -1;
    v->elems = NULL;
    v->nelems = 0;
  }
}

/* SHAPE _: the kernel's shape function tells at run time. */
void inf_rule_none(inf *I, const dvmc_node *n) {
  (void)I, (void)n;
}
