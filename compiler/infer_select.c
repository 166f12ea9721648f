/* The shape rules of selections whose sizes depend on data (infer_rule.h):
 * Compress, Unique, NonMaxSuppression. */
#include "infer_rule.h"

/* Compress, Unique: the count of what they keep is read at run time. */
void inf_rule_compress(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  if (!dvmc_attr_find(n, "axis")) {
    d[0] = inf_data_dim(I, "count");
    inf_set_shape(n->out[0], 1, d);
    return;
  }
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return;
  for (int i = 0; i < x->rank; i++) d[i] = i == axis ? inf_data_dim(I, "count") : x->dims[i];
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_unique(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *u = inf_data_dim(I, "unique"), *d[DVM_MAX_RANK], *all = NULL;
  int axis = -1;
  if (dvmc_attr_find(n, "axis") && (axis = inf_norm_axis(dvmc_attr_int(n, "axis", 0), x->rank)) < 0) return;
  if (axis < 0) {
    all = dvmc_const(I->x, 1);
    for (int i = 0; i < x->rank && all; i++) all = x->dims[i] ? dvmc_mul(I->x, all, x->dims[i]) : NULL;
    inf_set_shape(n->out[0], 1, &u);
  } else {
    for (int i = 0; i < x->rank; i++) d[i] = i == axis ? u : x->dims[i];
    inf_set_shape(n->out[0], x->rank, d);
    all = x->dims[axis];
  }
  for (int i = 1; i < n->nout; i++) inf_set_shape(n->out[i], 1, i == 2 ? &all : &u);
}

/* NonMaxSuppression: [selected, 3]. */
void inf_rule_nms(inf *I, const dvmc_node *n) {
  const dvmc_expr *d[2] = {inf_data_dim(I, "selected"), dvmc_const(I->x, 3)};
  inf_set_shape(n->out[0], 2, d);
}
