/* The shape rules of windows over images (infer_rule.h): Conv,
 * ConvTranspose, the pools, Resize, Col2Im, MaxUnpool, GridSample,
 * AffineGrid. */
#include <string.h>

#include "infer_rule.h"

/* Conv and pools: floor((in + pads - dil*(k-1) - 1) / stride) + 1 (ceil for
 * ceil_mode), with explicit pads; others are left to the shape function. */
static void window(inf *I, const dvmc_node *n, int conv, int global) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 3) return;
  int sp = x->rank - 2;
  const dvmc_expr *d[DVM_MAX_RANK];
  d[0] = x->dims[0];
  if (global) {
    d[1] = x->dims[1];
    for (int i = 0; i < sp; i++) d[2 + i] = dvmc_const(I->x, 1);
    inf_set_shape(n->out[0], x->rank, d);
    return;
  }
  const char *ap = dvmc_attr_string(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") != 0) return;
  int64_t k[DVM_MAX_RANK], s[DVM_MAX_RANK], dl[DVM_MAX_RANK], p[2 * DVM_MAX_RANK];
  if (conv) {
    const dvmc_value *w = n->nin > 1 ? n->in[1] : NULL;
    if (!w || w->rank != x->rank) return;
    for (int i = 0; i < sp; i++)
      if (!dvmc_expr_is_const(w->dims[2 + i], &k[i])) return;
    d[1] = w->dims[0];
  } else {
    if (inf_ints_of(n, "kernel_shape", -1, k, DVM_MAX_RANK) != sp) return;
    d[1] = x->dims[1];
  }
  int ns = inf_ints_of(n, "strides", -1, s, DVM_MAX_RANK), nd = inf_ints_of(n, "dilations", -1, dl, DVM_MAX_RANK);
  int np = inf_ints_of(n, "pads", -1, p, 2 * DVM_MAX_RANK);
  int ceil_mode = (int)dvmc_attr_int(n, "ceil_mode", 0);
  if ((ns != -2 && ns != sp) || (nd != -2 && nd != sp) || (np != -2 && np != 2 * sp)) return;
  for (int i = 0; i < sp; i++) {
    int64_t st = ns == -2 ? 1 : s[i], di = nd == -2 ? 1 : dl[i], pads = np == -2 ? 0 : p[i] + p[sp + i];
    if (st < 1 || !x->dims[2 + i]) return;
    const dvmc_expr *span = dvmc_add(I->x, x->dims[2 + i], dvmc_const(I->x, pads - di * (k[i] - 1) - 1 + (ceil_mode ? st - 1 : 0)));
    d[2 + i] = dvmc_add(I->x, dvmc_floordiv(I->x, span, dvmc_const(I->x, st)), dvmc_const(I->x, 1));
    if (ceil_mode) return; /* ONNX also drops a last window that starts in the end padding */
  }
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_conv(inf *I, const dvmc_node *n) { window(I, n, 1, 0), inf_keep_rank(n); }

void inf_rule_pool(inf *I, const dvmc_node *n) { window(I, n, 0, 0), inf_keep_rank(n); }

void inf_rule_global_pool(inf *I, const dvmc_node *n) { window(I, n, 0, 1); }

/* ConvTranspose with explicit pads (or none): stride (in - 1) +
 * output_padding + dil (k - 1) + 1 - pads, or output_shape when given. */
static void conv_transpose(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL;
  if (!x || !w || x->rank < 3 || w->rank != x->rank || !w->dims[1]) return;
  int sp = x->rank - 2;
  const dvmc_expr *d[DVM_MAX_RANK];
  d[0] = x->dims[0];
  d[1] = dvmc_mul(I->x, w->dims[1], dvmc_const(I->x, dvmc_attr_int(n, "group", 1)));
  int64_t s[DVM_MAX_RANK], dl[DVM_MAX_RANK], p[2 * DVM_MAX_RANK], op[DVM_MAX_RANK], os[DVM_MAX_RANK];
  int nos = inf_ints_of(n, "output_shape", -1, os, DVM_MAX_RANK);
  const char *ap = dvmc_attr_string(n, "auto_pad", "NOTSET");
  int same = !strncmp(ap, "SAME_", 5); /* in * stride, without output_shape */
  if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0 && !same) return;
  int ns = inf_ints_of(n, "strides", -1, s, DVM_MAX_RANK), nd = inf_ints_of(n, "dilations", -1, dl, DVM_MAX_RANK);
  int np = inf_ints_of(n, "pads", -1, p, 2 * DVM_MAX_RANK), no = inf_ints_of(n, "output_padding", -1, op, DVM_MAX_RANK);
  if ((ns != -2 && ns != sp) || (nd != -2 && nd != sp) || (np != -2 && np != 2 * sp) || (no != -2 && no != sp) ||
      (nos != -2 && nos != sp))
    return;
  for (int i = 0; i < sp; i++) {
    int64_t k, st = ns == -2 ? 1 : s[i], di = nd == -2 ? 1 : dl[i], pads = np == -2 ? 0 : p[i] + p[sp + i];
    if (nos == sp) {
      d[2 + i] = dvmc_const(I->x, os[i]);
      continue;
    }
    if (!x->dims[2 + i] || !dvmc_expr_is_const(w->dims[2 + i], &k)) return;
    int64_t opad = no == -2 ? 0 : op[i];
    if (same && opad + di * (k - 1) + 1 >= st) { /* else as without pads (dvm_window_transpose_pads) */
      d[2 + i] = dvmc_mul(I->x, x->dims[2 + i], dvmc_const(I->x, st));
      continue;
    }
    const dvmc_expr *in = dvmc_sub(I->x, x->dims[2 + i], dvmc_const(I->x, 1));
    d[2 + i] = dvmc_add(I->x, dvmc_mul(I->x, in, dvmc_const(I->x, st)),
                        dvmc_const(I->x, (no == -2 ? 0 : op[i]) + di * (k - 1) + 1 - pads));
  }
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_conv_transpose(inf *I, const dvmc_node *n) { conv_transpose(I, n), inf_keep_rank(n); }

/* floor(d * s) for a float scale, exactly: s is p / 2^k. */
static const dvmc_expr *scaled(inf *I, const dvmc_expr *d, double s) {
  int k = 0;
  while (s != (double)(int64_t)s && k < 30) s *= 2, k++;
  if (s != (double)(int64_t)s || s < 0) return NULL;
  return dvmc_floordiv(I->x, dvmc_mul(I->x, d, dvmc_const(I->x, (int64_t)s)), dvmc_const(I->x, (int64_t)1 << k));
}

/* Resize (and Upsample): sizes when given, else floor(d * scale). */
static void resize(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int sizes_at = n->opset >= 11 ? 3 : -1, scales_at = n->opset >= 11 ? 2 : 1;
  if (sizes_at >= 0 && sizes_at < n->nin && n->in[sizes_at]) {
    if (strcmp(dvmc_attr_string(n, "keep_aspect_ratio_policy", "stretch"), "stretch")) return; /* by X's dims */
    if (inf_exprs_of(I, n, NULL, sizes_at, d, DVM_MAX_RANK) != x->rank || dvmc_attr_find(n, "axes")) return;
    inf_set_shape(n->out[0], x->rank, d);
    return;
  }
  const dvmc_value *sv = scales_at < n->nin ? n->in[scales_at] : NULL;
  const dvmc_tensor *t = sv ? sv->constant : NULL;
  const dvmc_attr *sa = dvmc_attr_find(n, "scales");
  if (dvmc_attr_find(n, "axes")) return;
  for (int i = 0; i < x->rank; i++) {
    double s;
    if (t && t->dtype == DVM_F32 && t->rank == 1 && t->dims[0] == x->rank) s = ((const float *)t->data)[i];
    else if (!t && sa && sa->type == DVMC_ATTR_FLOATS && sa->n == x->rank) s = sa->floats[i];
    else return;
    if (!(d[i] = x->dims[i] ? scaled(I, x->dims[i], (float)s) : NULL)) return;
  }
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_resize(inf *I, const dvmc_node *n) { resize(I, n), inf_keep_rank(n); }

/* Col2Im: [N, C / inf_prod(block), image_shape...]. */
void inf_rule_col2im(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *img = n->nin > 1 ? n->in[1] : NULL;
  int64_t k;
  if (!x || x->rank != 3 || !img || img->rank != 1 || !img->dims[0] || !dvmc_expr_is_const(img->dims[0], &k) ||
      k < 1 || k > DVM_MAX_RANK - 2)
    return;
  const dvmc_expr *im[DVM_MAX_RANK], *bl[DVM_MAX_RANK], *d[DVM_MAX_RANK] = {x->dims[0]};
  if (inf_exprs_of(I, n, NULL, 1, im, DVM_MAX_RANK) == k)
    for (int i = 0; i < k; i++) d[2 + i] = im[i];
  if (inf_exprs_of(I, n, NULL, 2, bl, DVM_MAX_RANK) == k && x->dims[1]) {
    const dvmc_expr *prod = dvmc_const(I->x, 1);
    for (int i = 0; i < k; i++) prod = dvmc_mul(I->x, prod, bl[i]);
    d[1] = dvmc_floordiv(I->x, x->dims[1], prod);
  }
  inf_set_shape(n->out[0], 2 + (int)k, d);
}

/* MaxUnpool: [N, C, (in - 1) stride + kernel - pads...], or output_shape. */
void inf_rule_max_unpool(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 3) return;
  int r = x->rank;
  const dvmc_expr *d[DVM_MAX_RANK];
  if (n->nin > 2 && n->in[2]) {
    if (inf_exprs_of(I, n, NULL, 2, d, DVM_MAX_RANK) == r) inf_set_shape(n->out[0], r, d);
    inf_set_rank(n->out[0], r);
    return;
  }
  const dvmc_attr *k = dvmc_attr_find(n, "kernel_shape"), *s = dvmc_attr_find(n, "strides"),
                  *p = dvmc_attr_find(n, "pads");
  if (!k || k->type != DVMC_ATTR_INTS || k->n != r - 2 || (s && s->n != r - 2) || (p && p->n != 2 * (r - 2))) {
    inf_set_rank(n->out[0], r);
    return;
  }
  d[0] = x->dims[0], d[1] = x->dims[1];
  for (int i = 0; i < r - 2; i++) {
    int64_t st = s ? s->ints[i] : 1, pads = p ? p->ints[i] + p->ints[r - 2 + i] : 0;
    d[2 + i] = !x->dims[2 + i] ? NULL
                               : dvmc_add(I->x, dvmc_mul(I->x, dvmc_sub(I->x, x->dims[2 + i], dvmc_const(I->x, 1)), dvmc_const(I->x, st)),
                                          dvmc_const(I->x, k->ints[i] - pads));
  }
  inf_set_shape(n->out[0], r, d);
}

/* GridSample: X's [N, C], then the grid's dims between its batch and its
 * coordinates. */
void inf_rule_grid_sample(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *x = n->in[0], *g = n->nin > 1 ? n->in[1] : NULL;
  if (!x || x->rank < 3) return;
  if (!g || g->rank != x->rank) return inf_keep_rank(n);
  const dvmc_expr *d[DVM_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int i = 2; i < x->rank; i++) d[i] = g->dims[i - 1];
  inf_set_shape(n->out[0], x->rank, d);
}

/* AffineGrid: [N, H, W, 2] or [N, D, H, W, 3] from size's contents (its
 * length alone gives the rank). */
void inf_rule_affine_grid(inf *I, const dvmc_node *n) {
  const dvmc_value *t = n->in[0], *s = n->nin > 1 ? n->in[1] : NULL;
  const dvmc_expr *e[DVM_MAX_RANK], *d[DVM_MAX_RANK] = {0};
  int64_t len;
  if (!t || !s || s->rank != 1 || !s->dims[0] || !dvmc_expr_is_const(s->dims[0], &len) || (len != 4 && len != 5)) return;
  int k = inf_exprs_of(I, n, NULL, 1, e, DVM_MAX_RANK), r = (int)len - 2;
  d[0] = t->rank == 3 ? t->dims[0] : NULL;
  for (int i = 0; i < r; i++) d[1 + i] = k == len ? e[2 + i] : NULL;
  d[1 + r] = dvmc_const(I->x, r);
  inf_set_shape(n->out[0], r + 2, d);
}
