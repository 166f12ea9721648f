/* The shape rules of the ai.onnx.ml ops (infer_rule.h). */
#include <string.h>

#include "infer_rule.h"

/* TreeEnsembleClassifier: labels [N] and scores [N, classes];
 * TreeEnsembleRegressor: scores [N, n_targets]; N is X's first dim ([F]
 * is one row). */
void inf_rule_tree_ensemble(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || (x->rank != 1 && x->rank != 2)) return;
  int cls = !strcmp(n->op, "TreeEnsembleClassifier");
  int64_t targets = dvmc_attr_int(n, "n_targets", 1);
  if (cls) {
    const dvmc_attr *labels = dvmc_attr_find(n, "classlabels_int64s");
    if (!labels) labels = dvmc_attr_find(n, "classlabels_strings");
    if (!labels) return;
    targets = labels->n;
  }
  const dvmc_expr *d[2] = {x->rank == 2 ? x->dims[0] : dvmc_const(I->x, 1), dvmc_const(I->x, targets)};
  if (cls && n->nout > 0 && n->out[0]) inf_set_shape(n->out[0], 1, d);
  if (n->nout > cls && n->out[cls]) inf_set_shape(n->out[cls], 2, d);
}
