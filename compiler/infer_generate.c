/* The shape rules of generators (infer_rule.h): ConstantOfShape, NonZero,
 * Range, the random ops. */
#include "infer_rule.h"

static void constant_of_shape(inf *I, const dvmc_node *n) {
  const dvmc_value *s = n->in[0];
  if (!dvmc_value_elems_known(s) || s->nelems > DVM_MAX_RANK) return;
  inf_set_shape(n->out[0], s->nelems, s->elems);
  const dvmc_attr *a = dvmc_attr_find(n, "value");
  inf_set_dtype(n->out[0], a && a->t ? a->t->dtype : DVM_F32);
}

/* ConstantOfShape of a small known length: its contents are the value. */
static void constant_elems(inf *I, const dvmc_node *n) {
  const dvmc_value *o = n->out[0];
  const dvmc_attr *a = dvmc_attr_find(n, "value");
  int64_t len, v = 0;
  if (!o || o->rank != 1 || !o->dims[0] || !dvmc_expr_is_const(o->dims[0], &len) || len > MAX_ELEMS) return;
  if (a && a->t && a->t->dtype == DVM_I64 && a->t->nbytes == 8) v = *(const int64_t *)a->t->data;
  else if (a && a->t && a->t->dtype == DVM_I32 && a->t->nbytes == 4) v = *(const int32_t *)a->t->data;
  else if (a) return;
  const dvmc_expr *e[MAX_ELEMS];
  for (int64_t i = 0; i < len; i++) e[i] = dvmc_const(I->x, v);
  inf_set_elems(I, (dvmc_value *)o, (int)len, e);
}

void inf_rule_constant_of_shape(inf *I, const dvmc_node *n) {
  constant_of_shape(I, n);
  constant_elems(I, n);
}

void inf_rule_nonzero(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *d[2] = {dvmc_const(I->x, x->rank), inf_data_dim(I, "nnz")};
  inf_set_shape(n->out[0], 2, d);
}

/* Range: ceil((limit - start) / delta) elements, for a positive constant
 * delta and start and limit known as expressions; else read at run time. */
void inf_rule_range(inf *I, const dvmc_node *n) {
  if (n->nin != 3) return;
  const dvmc_expr *len = NULL;
  int known = 1;
  for (int i = 0; i < 3; i++) known &= dvmc_value_elems_known(n->in[i]) && n->in[i]->nelems == 1;
  int64_t delta;
  if (known && dvmc_expr_is_const(n->in[2]->elems[0], &delta) && delta > 0) {
    const dvmc_expr *span = dvmc_sub(I->x, n->in[1]->elems[0], n->in[0]->elems[0]);
    len = dvmc_floordiv(I->x, dvmc_add(I->x, span, dvmc_const(I->x, delta - 1)), dvmc_const(I->x, delta));
  }
  if (!len) len = inf_data_dim(I, "len");
  inf_set_shape(n->out[0], 1, &len);
}

/* RandomNormal, RandomUniform: the dims of the shape attribute. */
void inf_rule_random(inf *I, const dvmc_node *n) {
  int64_t v[DVM_MAX_RANK];
  const dvmc_expr *d[DVM_MAX_RANK];
  int k = inf_ints_of(n, "shape", -1, v, DVM_MAX_RANK);
  for (int i = 0; i < k; i++) d[i] = dvmc_const(I->x, v[i]);
  if (k >= 0) inf_set_shape(n->out[0], k, d);
}

/* Multinomial: [batch, sample_size] for x [batch, classes]. */
void inf_rule_multinomial(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  inf_set_rank(n->out[0], 2);
  if (x && x->rank == 2 && x->dims[0])
    inf_set_shape(n->out[0], 2, (const dvmc_expr *[]){x->dims[0], dvmc_const(I->x, dvmc_attr_int(n, "sample_size", 1))});
}
