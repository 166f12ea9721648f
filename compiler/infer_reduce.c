/* The shape rules of reductions (infer_rule.h): Reduce*, ArgMax and ArgMin,
 * TopK, the losses. */
#include <string.h>

#include "infer_rule.h"

static void reduce(inf *I, const dvmc_node *n, int arg) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int keep = (int)dvmc_attr_int(n, "keepdims", 1);
  int64_t axes[DVM_MAX_RANK];
  int k;
  if (arg) {
    axes[0] = dvmc_attr_int(n, "axis", 0);
    k = 1;
  } else {
    k = inf_ints_of(n, "axes", 1, axes, DVM_MAX_RANK);
    if (k == -2) k = 0;
    if (k < 0) return;
    if (k == 0 && dvmc_attr_int(n, "noop_with_empty_axes", 0)) {
      inf_same_shape(n, 0);
      return;
    }
  }
  int red[DVM_MAX_RANK] = {0};
  for (int i = 0; i < k; i++) {
    int a = inf_norm_axis(axes[i], x->rank);
    if (a < 0) return;
    red[a] = 1;
  }
  if (k == 0)
    for (int i = 0; i < x->rank; i++) red[i] = 1;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!red[i]) d[r++] = x->dims[i];
    else if (keep) d[r++] = dvmc_const(I->x, 1);
  inf_set_shape(n->out[0], r, d);
}

void inf_rule_reduce(inf *I, const dvmc_node *n) {
  reduce(I, n, 0);
  if (dvmc_attr_int(n, "keepdims", 1)) inf_keep_rank(n);
}

void inf_rule_arg(inf *I, const dvmc_node *n) { reduce(I, n, 1); }

/* TopK: the axis dim becomes k, known or read at run time. */
static void topk(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *k = n->nin > 1 ? n->in[1] : NULL;
  if (!x || x->rank < 1 || !k) return;
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", -1), x->rank);
  if (axis < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  d[axis] = dvmc_value_elems_known(k) && k->nelems == 1 ? k->elems[0] : inf_data_dim(I, "k");
  for (int i = 0; i < n->nout && i < 2; i++) inf_set_shape(n->out[i], x->rank, d);
}

void inf_rule_topk(inf *I, const dvmc_node *n) { topk(I, n), inf_keep_rank(n); }

/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: the loss has the
 * target's shape (reduction none) or none; SCE's log_prob the input's. */
void inf_rule_nll_loss(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *t = n->nin > 1 ? n->in[1] : NULL;
  if (strcmp(dvmc_attr_string(n, "reduction", "mean"), "none")) inf_set_shape(n->out[0], 0, NULL);
  else if (t) inf_set_shape(n->out[0], t->rank, t->dims);
  inf_same_shape(n, 1);
}
