/* The shape rules of the selecting ops (infer_rule.h), as shapefuncs/select.c:
 * selections whose sizes depend on data (Compress, Unique,
 * NonMaxSuppression) and indexed reads (GatherND, OneHot). */
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

/* GatherND: indices.dims[:-1] + data.dims[batch_dims + k:], for a known k
 * (indices' last dim). */
void inf_rule_gather_nd(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *x = n->in[0], *idx = n->nin > 1 ? n->in[1] : NULL;
  int64_t k, b = dvmc_attr_int(n, "batch_dims", 0);
  if (!x || !idx || x->rank < 1 || idx->rank < 1 || !idx->dims[idx->rank - 1] ||
      !dvmc_expr_is_const(idx->dims[idx->rank - 1], &k) || b < 0 || k < 1 || b + k > x->rank ||
      idx->rank - 1 + x->rank - b - k > DVM_MAX_RANK)
    return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  for (int i = 0; i < idx->rank - 1; i++) d[r++] = idx->dims[i];
  for (int i = (int)(b + k); i < x->rank; i++) d[r++] = x->dims[i];
  inf_set_shape(n->out[0], r, d);
}

/* A one-element numeric constant as an int (floats truncated). */
static int const_number(const dvmc_value *v, int64_t *out) {
  const dvmc_tensor *t = v ? v->constant : NULL;
  if (!t || t->nbytes != dvm_dtype_size(t->dtype)) return 0;
  switch (t->dtype) {
  case DVM_F32:
  case DVM_F64: { /* truncated; NaN and what int64 cannot hold are not known */
    double f = t->dtype == DVM_F32 ? *(const float *)t->data : *(const double *)t->data;
    if (!(f > -0x1p62 && f < 0x1p62)) return 0;
    *out = (int64_t)f;
    return 1;
  }
  case DVM_I32: *out = *(const int32_t *)t->data; return 1;
  case DVM_I64: *out = *(const int64_t *)t->data; return 1;
  default: return 0;
  }
}

/* OneHot: indices' dims with depth at axis (read at run time unless a
 * constant). */
void inf_rule_onehot(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0 || x->rank >= DVM_MAX_RANK || n->nin < 2) return;
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", -1), x->rank + 1);
  if (axis < 0) return;
  int64_t depth;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0, j = 0; i <= x->rank; i++)
    d[i] = i != axis ? x->dims[j++] : const_number(n->in[1], &depth) && depth > 0 ? dvmc_const(I->x, depth) : inf_data_dim(I, "depth");
  inf_set_shape(n->out[0], x->rank + 1, d);
}
