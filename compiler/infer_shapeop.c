/* The shape rules of shapes as data (infer_rule.h): Shape, Size. */
#include "infer_rule.h"

void inf_rule_shape(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int64_t lo = dvmc_attr_int(n, "start", 0), hi = dvmc_attr_int(n, "end", x->rank);
  if (lo < 0) lo += x->rank;
  if (hi < 0) hi += x->rank;
  lo = lo < 0 ? 0 : lo > x->rank ? x->rank : lo;
  hi = hi < lo ? lo : hi > x->rank ? x->rank : hi;
  const dvmc_expr *len = dvmc_const(I->x, hi - lo);
  inf_set_shape(n->out[0], 1, &len);
  inf_set_elems(I, n->out[0], (int)(hi - lo), x->dims + lo);
}

/* Size: a scalar whose content is the product of the dims. */
void inf_rule_size(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  inf_set_shape(n->out[0], 0, NULL);
  const dvmc_expr *p = x && x->rank >= 0 ? inf_prod(I, x, 0, x->rank) : NULL;
  if (p) inf_set_elems(I, n->out[0], 1, &p);
}
