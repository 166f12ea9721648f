/* The shape rules of normalizations with more than one output
 * (infer_rule.h): LayerNormalization, BatchNormalization. */
#include "infer_rule.h"

/* LayerNormalization: Y as X; Mean and InvStdDev keep X's dims before the
 * axis and are 1 from it on. */
void inf_rule_layernorm(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  inf_same_shape(n, 0);
  if (!x || x->rank < 0) return;
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", -1), x->rank);
  const dvmc_expr *d[DVM_MAX_RANK];
  if (axis < 0) return;
  for (int i = 0; i < x->rank; i++) d[i] = i < axis ? x->dims[i] : dvmc_const(I->x, 1);
  for (int i = 1; i < n->nout; i++) inf_set_shape(n->out[i], x->rank, d);
}

/* BatchNormalization: Y as X; training mode's running mean and variance
 * as the scale, [C]. */
void inf_rule_batchnorm(inf *I, const dvmc_node *n) {
  (void)I;
  inf_same_shape(n, 0);
  for (int i = 1; i < n->nout && n->nin > 1 && n->in[1]; i++) inf_set_shape(n->out[i], n->in[1]->rank, n->in[1]->dims);
}
