/* The shape rule of TfIdfVectorizer (infer_rule.h). */
#include "infer_rule.h"

/* TfIdfVectorizer: [C] -> [size], [B, C] -> [B, size], size one more
 * than the largest of ngram_indexes. */
void inf_rule_tfidf(inf *I, const dvmc_node *n) {
  const dvmc_attr *idx = dvmc_attr_find(n, "ngram_indexes");
  const dvmc_value *x = n->in[0];
  if (!idx || idx->type != DVMC_ATTR_INTS || !x || x->rank < 0 || x->rank > 2) return;
  int64_t size = 0;
  for (int i = 0; i < idx->n; i++)
    if (idx->ints[i] >= size) size = idx->ints[i] + 1;
  const dvmc_expr *d[2] = {x->rank == 2 ? x->dims[0] : NULL, dvmc_const(I->x, size)};
  if (x->rank == 2) inf_set_shape(n->out[0], 2, d);
  else inf_set_shape(n->out[0], 1, d + 1);
}
