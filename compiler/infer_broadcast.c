/* The shape rules of elementwise ops (infer_rule.h): broadcasting, with the
 * scalar arithmetic and selections on the contents of small integer tensors
 * that exported graphs compute dims with, and one input's shape. */
#include <string.h>

#include "infer_rule.h"

/* The known contents of n's first nin inputs pair up element by element
 * into len outputs: each input is one element or len of them, and those
 * of len are in one order (of more than one dim only beside the same dims:
 * [2, 1] and [1, 2] broadcast to 4). */
static bool paired(const dvmc_node *n, int nin, int len) {
  const dvmc_value *first = NULL;
  for (int i = 0; i < nin; i++) {
    const dvmc_value *v = n->in[i];
    if (v->nelems != len && v->nelems != 1) return false;
    if (v->nelems == 1 || len == 1) continue;
    if (first && (first->rank > 1 || v->rank > 1)) {
      if (first->rank != v->rank) return false;
      for (int d = 0; d < v->rank; d++)
        if (first->dims[d] != v->dims[d]) return false;
    }
    if (!first) first = v;
  }
  return true;
}

/* Scalar arithmetic on contents (the dims math of exported graphs). */
static void elem_arith(inf *I, const dvmc_node *n) {
  if (n->nin != 2 || !dvmc_value_elems_known(n->in[0]) || !dvmc_value_elems_known(n->in[1])) return;
  const dvmc_value *a = n->in[0], *b = n->in[1];
  if (!a->typed || (a->dtype != DVM_I64 && a->dtype != DVM_I32)) return;
  int len = a->nelems > b->nelems ? a->nelems : b->nelems;
  if (!paired(n, 2, len)) return;
  const dvmc_expr *e[MAX_ELEMS];
  for (int i = 0; i < len; i++) {
    const dvmc_expr *x = a->elems[a->nelems == 1 ? 0 : i], *y = b->elems[b->nelems == 1 ? 0 : i];
    int64_t cy;
    if (!strcmp(n->op, "Add")) e[i] = dvmc_add(I->x, x, y);
    else if (!strcmp(n->op, "Sub")) e[i] = dvmc_sub(I->x, x, y);
    else if (!strcmp(n->op, "Mul")) e[i] = dvmc_mul(I->x, x, y);
    /* integer Div truncates; equal to floor for the non-negative dims it sees */
    else if (!strcmp(n->op, "Div") && dvmc_expr_is_const(y, &cy) && cy > 0) e[i] = dvmc_floordiv(I->x, x, y);
    else return;
    if (!e[i]) return;
  }
  inf_set_elems(I, n->out[0], len, e);
}

/* Equal, Where, Min, Max on contents: what the exporters' shape logic
 * (expand with -1, clamped lengths) computes. A comparison is known where
 * the expressions are the same (true) or their ranges do not meet (false). */
static void elem_select(inf *I, const dvmc_node *n) {
  static const char *const ops[] = {"Equal", "Where", "Min", "Max", NULL};
  int nin = n->nin, len = 0;
  if (!inf_is(n, ops) || (!strcmp(n->op, "Where") ? nin != 3 : nin != 2)) return;
  for (int i = 0; i < nin; i++) {
    if (!dvmc_value_elems_known(n->in[i])) return;
    if (n->in[i]->nelems > len) len = n->in[i]->nelems;
  }
  if (!paired(n, nin, len)) return;
  const dvmc_expr *e[MAX_ELEMS], *one = dvmc_const(I->x, 1), *zero = dvmc_const(I->x, 0);
  for (int i = 0; i < len; i++) {
    const dvmc_expr *a = n->in[0]->elems[n->in[0]->nelems == 1 ? 0 : i];
    const dvmc_expr *b = n->in[1]->elems[n->in[1]->nelems == 1 ? 0 : i];
    int64_t alo, ahi, blo, bhi, c;
    if (!strcmp(n->op, "Equal")) {
      dvmc_sym_range(a, &alo, &ahi);
      dvmc_sym_range(b, &blo, &bhi);
      e[i] = a == b ? one : (ahi < blo || bhi < alo) ? zero : NULL;
    } else if (!strcmp(n->op, "Where")) {
      const dvmc_expr *y = n->in[2]->elems[n->in[2]->nelems == 1 ? 0 : i];
      e[i] = dvmc_expr_is_const(a, &c) ? (c ? b : y) : NULL;
    } else {
      e[i] = !strcmp(n->op, "Min") ? dvmc_min(I->x, a, b) : dvmc_max(I->x, a, b);
    }
    if (!e[i]) return;
  }
  inf_set_elems(I, n->out[0], len, e);
}

void inf_rule_broadcast(inf *I, const dvmc_node *n) {
  inf_broadcast(I, n, 0, n->nin);
  elem_arith(I, n);
  elem_select(I, n);
}

/* Output 0 has input 0's shape (and for Cast and Identity its contents). */
void inf_rule_same(inf *I, const dvmc_node *n) {
  inf_same_shape(n, 0);
  if ((!strcmp(n->op, "Cast") || !strcmp(n->op, "Identity")) && dvmc_value_elems_known(n->in[0]))
    inf_set_elems(I, n->out[0], n->in[0]->nelems, n->in[0]->elems);
}

/* Dropout: y and the mask both have x's shape. */
void inf_rule_dropout(inf *I, const dvmc_node *n) {
  (void)I;
  inf_same_shape(n, 0), inf_same_shape(n, 1);
}
