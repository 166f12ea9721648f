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

/* The length of an ints or floats attribute (0 when absent). */
static int64_t count_of(const dvmc_node *n, const char *name) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  return a && (a->type == DVMC_ATTR_INTS || a->type == DVMC_ATTR_FLOATS || a->type == DVMC_ATTR_STRINGS) ? a->n : 0;
}

/* LinearClassifier, LinearRegressor, SVMClassifier, SVMRegressor: labels
 * [N] (classifiers) and scores [N, columns], columns as lower_ml_linear.c
 * counts them (ONNX Runtime's). */
void inf_rule_ml_scores(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || (x->rank != 1 && x->rank != 2)) return;
  int cls = !strcmp(n->op, "LinearClassifier") || !strcmp(n->op, "SVMClassifier");
  int64_t labels = count_of(n, "classlabels_ints") + count_of(n, "classlabels_strings"), cols;
  if (!strcmp(n->op, "LinearClassifier")) {
    int64_t rows = count_of(n, "intercepts");
    cols = rows == 1 ? 2 : rows;
  } else if (!strcmp(n->op, "LinearRegressor")) {
    cols = dvmc_attr_int(n, "targets", 1);
  } else if (!strcmp(n->op, "SVMClassifier")) {
    const dvmc_attr *v = dvmc_attr_find(n, "vectors_per_class");
    int64_t vectors = 0;
    for (int i = 0; v && v->type == DVMC_ATTR_INTS && i < v->n; i++) vectors += v->ints[i];
    cols = vectors > 0 && !count_of(n, "prob_a") ? (labels > 2 ? labels * (labels - 1) / 2 : 2) : labels;
  } else {
    cols = 1;
  }
  if (cols < 1) return;
  const dvmc_expr *d[2] = {x->rank == 2 ? x->dims[0] : dvmc_const(I->x, 1), dvmc_const(I->x, cols)};
  if (cls && n->nout > 0 && n->out[0]) inf_set_shape(n->out[0], 1, d);
  if (n->nout > cls && n->out[cls]) inf_set_shape(n->out[cls], 2, d);
}

/* ArrayFeatureExtractor: X's shape, its last dim the number of indices
 * (X [F] gives [1, indices]). */
void inf_rule_array_feature_extractor(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *idx = n->nin > 1 ? n->in[1] : NULL;
  if (!x || !idx || x->rank < 1 || x->rank > DVM_MAX_RANK || !dvmc_value_shape_known(idx) || !n->out[0]) return;
  const dvmc_expr *count = dvmc_const(I->x, 1), *d[DVM_MAX_RANK];
  for (int i = 0; i < idx->rank; i++) count = dvmc_mul(I->x, count, idx->dims[i]);
  int rank = x->rank == 1 ? 2 : x->rank;
  for (int i = 0; i < rank - 1; i++) d[i] = x->rank == 1 ? dvmc_const(I->x, 1) : x->dims[i];
  d[rank - 1] = count;
  inf_set_shape(n->out[0], rank, d);
}

/* FeatureVectorizer: [N, the sum of inputdimensions], N input 0's first
 * dim ([F] is one row). */
void inf_rule_feature_vectorizer(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  const dvmc_attr *a = dvmc_attr_find(n, "inputdimensions");
  if (!x || x->rank < 1 || !a || a->type != DVMC_ATTR_INTS || !n->out[0]) return;
  int64_t sum = 0;
  for (int i = 0; i < a->n; i++) sum += a->ints[i];
  const dvmc_expr *d[2] = {x->rank == 1 ? dvmc_const(I->x, 1) : x->dims[0], dvmc_const(I->x, sum)};
  inf_set_shape(n->out[0], 2, d);
}

/* OneHotEncoder: X's shape and one more dim, the categories. */
void inf_rule_one_hot_encoder(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || !n->out[0] || !dvmc_value_shape_known(x) || x->rank >= DVM_MAX_RANK) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  d[x->rank] = dvmc_const(I->x, count_of(n, "cats_strings") + count_of(n, "cats_int64s"));
  inf_set_shape(n->out[0], x->rank + 1, d);
}
