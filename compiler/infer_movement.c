/* The shape rules of data movement (infer_rule.h): Transpose, Reshape and
 * its kin, Concat, Gather, GatherElements, Expand, Slice, Split, Tile, Pad,
 * CenterCropPad, DepthToSpace and SpaceToDepth. */
#include <string.h>

#include "infer_rule.h"

/* v's dims, all constants, into out (and their row-major strides into
 * stride); false when one is not a constant. */
static bool const_dims(const dvmc_value *v, int64_t *out, int64_t *stride) {
  if (v->rank < 0) return false;
  for (int i = 0; i < v->rank; i++)
    if (v->rank == 1 && dvmc_value_elems_known(v)) out[i] = v->nelems; /* (a shape's length) */
    else if (!v->dims[i] || !dvmc_expr_is_const(v->dims[i], &out[i])) return false;
  for (int64_t i = v->rank - 1, s = 1; i >= 0; s *= out[i--]) stride[i] = s;
  return true;
}

/* y's contents from x's, whose y[o] (o a multi-index into ydims) is x's
 * element base + sum of o[k] step[k]: how Transpose and Slice move the
 * elements of a small integer tensor (torch.onnx's F.pad reverses its pads
 * with a 2-D Slice and Transpose). */
static void moved_elems(inf *I, dvmc_value *y, const dvmc_value *x, int rank, const int64_t *ydims,
                        const int64_t *step, int64_t base) {
  int64_t count = 1, o[DVM_MAX_RANK] = {0};
  for (int k = 0; k < rank; k++) count = ydims[k] <= 0 ? 0 : count > MAX_ELEMS ? count : count * ydims[k];
  if (count > MAX_ELEMS) return;
  const dvmc_expr *e[MAX_ELEMS];
  for (int64_t i = 0; i < count; i++) {
    int64_t at = base;
    for (int k = 0; k < rank; k++) at += o[k] * step[k];
    if (at < 0 || at >= x->nelems) return;
    e[i] = x->elems[at];
    for (int k = rank - 1; k >= 0 && ++o[k] == ydims[k]; k--) o[k] = 0;
  }
  inf_set_elems(I, y, (int)count, e);
}

void inf_rule_transpose(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int64_t perm[DVM_MAX_RANK], xd[DVM_MAX_RANK], xs[DVM_MAX_RANK], yd[DVM_MAX_RANK], step[DVM_MAX_RANK];
  int k = inf_ints_of(n, "perm", -1, perm, DVM_MAX_RANK);
  const dvmc_expr *d[DVM_MAX_RANK];
  bool consts = dvmc_value_elems_known(x) && const_dims(x, xd, xs);
  for (int i = 0; i < x->rank; i++) {
    int p = k == -2 ? x->rank - 1 - i : (k == x->rank ? inf_norm_axis(perm[i], x->rank) : -1);
    if (p < 0) return;
    d[i] = x->dims[p];
    if (consts) yd[i] = xd[p], step[i] = xs[p];
  }
  inf_set_shape(n->out[0], x->rank, d);
  if (consts) moved_elems(I, n->out[0], x, x->rank, yd, step, 0);
}

/* Reshape to a target known as expressions: 0 copies, -1 is the rest. */
void inf_rule_reshape(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *s = n->nin > 1 ? n->in[1] : NULL;
  if (!x || !dvmc_value_elems_known(s) || s->nelems > DVM_MAX_RANK) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int infer_at = -1, allowzero = (int)dvmc_attr_int(n, "allowzero", 0);
  const dvmc_expr *known = dvmc_const(I->x, 1);
  for (int i = 0; i < s->nelems; i++) {
    int64_t c;
    if (dvmc_expr_is_const(s->elems[i], &c) && c == -1) {
      if (infer_at >= 0) return;
      infer_at = i;
      continue;
    }
    if (dvmc_expr_is_const(s->elems[i], &c) && c == 0 && !allowzero) {
      if (i >= x->rank || !x->dims[i]) return;
      d[i] = x->dims[i];
    } else if (dvmc_expr_is_const(s->elems[i], &c) && c < 0) {
      return;
    } else {
      d[i] = s->elems[i];
    }
    known = dvmc_mul(I->x, known, d[i]);
  }
  if (infer_at >= 0) {
    if (x->rank < 0) return;
    const dvmc_expr *total = inf_prod(I, x, 0, x->rank);
    if (!total || !known) return;
    d[infer_at] = dvmc_floordiv(I->x, total, known);
  }
  inf_set_shape(n->out[0], s->nelems, d);
  if (dvmc_value_elems_known(x)) inf_set_elems(I, n->out[0], x->nelems, x->elems); /* the same order */
}

static void squeeze_unsqueeze(inf *I, const dvmc_node *n, int unsqueeze) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int64_t axes[DVM_MAX_RANK];
  int k = inf_ints_of(n, "axes", 1, axes, DVM_MAX_RANK);
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  if (unsqueeze) {
    int rank = x->rank + k;
    if (k < 0 || rank > DVM_MAX_RANK) return;
    int mark[DVM_MAX_RANK] = {0};
    for (int i = 0; i < k; i++) {
      int a = inf_norm_axis(axes[i], rank);
      if (a < 0 || mark[a]) return;
      mark[a] = 1;
    }
    for (int i = 0, j = 0; i < rank; i++) d[r++] = mark[i] ? dvmc_const(I->x, 1) : x->dims[j++];
    inf_set_shape(n->out[0], rank, d);
  } else {
    int drop[DVM_MAX_RANK] = {0};
    int64_t one;
    if (k == -2) { /* every dim of 1 */
      for (int i = 0; i < x->rank; i++)
        if (!x->dims[i]) return;
        else drop[i] = dvmc_expr_is_const(x->dims[i], &one) && one == 1;
    } else if (k < 0) {
      return;
    } else {
      for (int i = 0; i < k; i++) {
        int a = inf_norm_axis(axes[i], x->rank);
        if (a < 0) return;
        drop[a] = 1;
      }
    }
    for (int i = 0; i < x->rank; i++)
      if (!drop[i]) d[r++] = x->dims[i];
    inf_set_shape(n->out[0], r, d);
  }
  if (dvmc_value_elems_known(x)) inf_set_elems(I, n->out[0], x->nelems, x->elems);
}

/* Squeeze by axes computed at run time: the rank still follows from their
 * count. */
void inf_rule_squeeze(inf *I, const dvmc_node *n) {
  squeeze_unsqueeze(I, n, 0);
  const dvmc_value *x = n->in[0], *axes = n->nin > 1 ? n->in[1] : NULL;
  int64_t k;
  if (x && x->rank >= 0 && axes && axes->rank == 1 && axes->dims[0] && dvmc_expr_is_const(axes->dims[0], &k) &&
      k > 0 && k <= x->rank)
    inf_set_rank(n->out[0], x->rank - (int)k);
}

void inf_rule_unsqueeze(inf *I, const dvmc_node *n) { squeeze_unsqueeze(I, n, 1); }

void inf_rule_flatten(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = (int)dvmc_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank) return;
  const dvmc_expr *d[2] = {inf_prod(I, x, 0, axis), inf_prod(I, x, axis, x->rank)};
  inf_set_shape(n->out[0], 2, d);
}

void inf_rule_concat(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  const dvmc_expr *elems[MAX_ELEMS];
  int ne = 0, all = x->rank == 1;
  for (int i = 1; i < n->nin; i++) {
    if (!n->in[i] || n->in[i]->rank != x->rank) return;
    d[axis] = d[axis] && n->in[i]->dims[axis] ? dvmc_add(I->x, d[axis], n->in[i]->dims[axis]) : NULL;
    for (int k = 0; k < x->rank; k++)
      if (k != axis) inf_require_equal(I, n, x->dims[k], n->in[i]->dims[k], "they are concatenated along another axis");
  }
  for (int i = 0; all && i < n->nin; i++) {
    all = dvmc_value_elems_known(n->in[i]) && ne + n->in[i]->nelems <= MAX_ELEMS;
    for (int k = 0; all && k < n->in[i]->nelems; k++) elems[ne++] = n->in[i]->elems[k];
  }
  inf_set_shape(n->out[0], x->rank, d);
  if (all) inf_set_elems(I, n->out[0], ne, elems);
}

void inf_rule_gather(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *idx = n->nin > 1 ? n->in[1] : NULL;
  if (!x || !idx || x->rank < 1 || idx->rank < 0 || x->rank + idx->rank - 1 > DVM_MAX_RANK) return;
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  for (int i = 0; i < axis; i++) d[r++] = x->dims[i];
  for (int i = 0; i < idx->rank; i++) d[r++] = idx->dims[i];
  for (int i = axis + 1; i < x->rank; i++) d[r++] = x->dims[i];
  inf_set_shape(n->out[0], r, d);
  int64_t ix[MAX_ELEMS];
  int k = inf_const_list(idx, ix, MAX_ELEMS);
  if (x->rank == 1 && dvmc_value_elems_known(x) && k >= 0) { /* shape[i] of a shape */
    const dvmc_expr *e[MAX_ELEMS];
    for (int i = 0; i < k; i++) {
      int64_t j = ix[i] < 0 ? ix[i] + x->nelems : ix[i];
      if (j < 0 || j >= x->nelems) return;
      e[i] = x->elems[j];
    }
    inf_set_elems(I, n->out[0], k, e);
  }
}

void inf_rule_gather_elements(inf *I, const dvmc_node *n) {
  (void)I;
  if (n->nin > 1 && n->in[1]) inf_set_shape(n->out[0], n->in[1]->rank, n->in[1]->dims);
}

void inf_rule_expand(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *s = n->nin > 1 ? n->in[1] : NULL;
  if (!x || x->rank < 0 || !dvmc_value_elems_known(s) || s->nelems > DVM_MAX_RANK) return;
  dvmc_value shape = {.rank = s->nelems};
  for (int i = 0; i < s->nelems; i++) shape.dims[i] = s->elems[i];
  dvmc_value *ins[2] = {(dvmc_value *)x, &shape};
  dvmc_node pair = *n;
  pair.in = ins;
  pair.nin = 2;
  inf_broadcast(I, &pair, 0, 2);
}

/* One axis of Slice, as ONNX specifies: a negative start or end counts from
 * the end of dim d, then start is clamped to [0, d] ([0, d-1] for a
 * negative step) and end to [0, d] ([-1, d-1]); "to the end" (INT64_MAX,
 * INT64_MIN) is clamped like any other. Expressions other than constants
 * must be provably non-negative. NULL when unknown. */
static const dvmc_expr *slice_len(inf *I, const dvmc_expr *d, const dvmc_expr *s, const dvmc_expr *e, int64_t t) {
  const int64_t huge = (int64_t)1 << 62;
  const dvmc_expr *bound[2], *lo = dvmc_const(I->x, t > 0 ? 0 : -1);
  const dvmc_expr *top = t > 0 ? d : dvmc_sub(I->x, d, dvmc_const(I->x, 1));
  for (int k = 0; k < 2; k++) {
    const dvmc_expr *v = k ? e : s, *low = k ? lo : dvmc_const(I->x, 0);
    int64_t c;
    if (!v || !d) return NULL;
    if (dvmc_expr_is_const(v, &c) && c >= huge) v = top;
    else if (dvmc_expr_is_const(v, &c) && c <= -huge) v = low;
    else if (dvmc_expr_is_const(v, &c) && c < 0) v = dvmc_max(I->x, low, dvmc_add(I->x, d, v));
    else if (!dvmc_expr_nonneg(v)) return NULL;
    bound[k] = dvmc_min(I->x, v, top);
  }
  const dvmc_expr *span = t > 0 ? dvmc_sub(I->x, bound[1], bound[0]) : dvmc_sub(I->x, bound[0], bound[1]);
  int64_t a = t > 0 ? t : -t;
  const dvmc_expr *len = dvmc_floordiv(I->x, dvmc_add(I->x, span, dvmc_const(I->x, a - 1)), dvmc_const(I->x, a));
  return dvmc_max(I->x, dvmc_const(I->x, 0), len);
}

static void slice(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *st[DVM_MAX_RANK], *en[DVM_MAX_RANK], *ax[DVM_MAX_RANK], *sp[DVM_MAX_RANK];
  int old = n->opset < 10;
  int ns = inf_exprs_of(I, n, old ? "starts" : NULL, 1, st, DVM_MAX_RANK);
  int ne = inf_exprs_of(I, n, old ? "ends" : NULL, 2, en, DVM_MAX_RANK);
  int na = inf_exprs_of(I, n, old ? "axes" : NULL, 3, ax, DVM_MAX_RANK);
  int np = old ? -2 : inf_exprs_of(I, n, NULL, 4, sp, DVM_MAX_RANK);
  if (ns < 0 || ne != ns || (na != -2 && na != ns) || (np != -2 && np != ns)) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  /* the contents too where X's dims and every start and end are constants:
   * per axis of X the first element, step and count (all of it by default) */
  int64_t xd[DVM_MAX_RANK], xs[DVM_MAX_RANK], first[DVM_MAX_RANK] = {0}, step[DVM_MAX_RANK], len[DVM_MAX_RANK];
  bool consts = dvmc_value_elems_known(x) && const_dims(x, xd, xs);
  for (int i = 0; consts && i < x->rank; i++) step[i] = 1, len[i] = xd[i];
  for (int i = 0; i < ns; i++) {
    int64_t a = i, t = 1, s, e;
    if ((na >= 0 && !dvmc_expr_is_const(ax[i], &a)) || (np >= 0 && !dvmc_expr_is_const(sp[i], &t)) || t == 0) return;
    int k = inf_norm_axis(a, x->rank);
    if (k < 0) return;
    d[k] = slice_len(I, x->dims[k], st[i], en[i], t);
    consts = consts && dvmc_expr_is_const(st[i], &s) && dvmc_expr_is_const(en[i], &e);
    if (!consts) continue;
    int64_t dim = xd[k]; /* clamped as slice_len does */
    s = s < 0 ? s + dim : s;
    e = e < 0 ? e + dim : e;
    s = t > 0 ? (s < 0 ? 0 : s > dim ? dim : s) : (s < 0 ? 0 : s > dim - 1 ? dim - 1 : s);
    e = t > 0 ? (e < 0 ? 0 : e > dim ? dim : e) : (e < -1 ? -1 : e > dim - 1 ? dim - 1 : e);
    int64_t span = t > 0 ? e - s : s - e, a_t = t > 0 ? t : -t;
    first[k] = s;
    step[k] = t;
    len[k] = span <= 0 ? 0 : (span + a_t - 1) / a_t;
  }
  inf_set_shape(n->out[0], x->rank, d);
  if (!consts) return;
  int64_t base = 0;
  for (int k = 0; k < x->rank; k++) base += first[k] * xs[k], step[k] *= xs[k];
  moved_elems(I, n->out[0], x, x->rank, len, step, base);
}

void inf_rule_slice(inf *I, const dvmc_node *n) { slice(I, n), inf_keep_rank(n); }

/* Split into the sizes of input 1 (attribute "split" before opset 13), or
 * into num_outputs (the outputs) parts of ceil(d / parts), the last the rest. */
static void split(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = inf_norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0 || !x->dims[axis]) return;
  const dvmc_expr *sizes[64];
  int k = inf_exprs_of(I, n, n->opset < 13 ? "split" : NULL, 1, sizes, 64);
  if (k == -1 || (k >= 0 && k != n->nout) || n->nout > 64) return;
  if (k < 0) {
    const dvmc_expr *parts = dvmc_const(I->x, n->nout);
    const dvmc_expr *each = dvmc_floordiv(I->x, dvmc_add(I->x, x->dims[axis], dvmc_const(I->x, n->nout - 1)), parts);
    for (int i = 0; i < n->nout; i++)
      sizes[i] = i < n->nout - 1 ? each : dvmc_sub(I->x, x->dims[axis], dvmc_mul(I->x, each, dvmc_const(I->x, n->nout - 1)));
    /* num_outputs parts of ceil(d / parts) leave none for the last (5 into
     * 4): no shape, so that an If branch that never runs still compiles
     * (AffineGrid's expansion splits a 3-D size 4 ways in its 2-D branch);
     * where it runs, the kernel's shape function refuses it */
    int64_t last;
    if (dvmc_expr_is_const(sizes[n->nout - 1], &last) && last < 0) return;
  }
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  for (int i = 0; i < n->nout; i++) {
    d[axis] = sizes[i];
    inf_set_shape(n->out[i], x->rank, d);
  }
}

void inf_rule_split(inf *I, const dvmc_node *n) { split(I, n), inf_keep_rank(n); }

static void tile(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  const dvmc_expr *r[DVM_MAX_RANK], *d[DVM_MAX_RANK];
  if (!x || x->rank < 0 || inf_exprs_of(I, n, NULL, 1, r, DVM_MAX_RANK) != x->rank) return;
  for (int i = 0; i < x->rank; i++) d[i] = dvmc_mul(I->x, x->dims[i], r[i]);
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_tile(inf *I, const dvmc_node *n) { tile(I, n), inf_keep_rank(n); }

/* Pad: begins and ends from input 1 ("pads" before opset 11), on the axes
 * of input 3 (opset 18) or all. */
static void pad(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *p[2 * DVM_MAX_RANK], *ax[DVM_MAX_RANK], *d[DVM_MAX_RANK];
  int np = inf_exprs_of(I, n, n->opset < 11 ? "pads" : NULL, 1, p, 2 * DVM_MAX_RANK);
  int na = inf_exprs_of(I, n, NULL, 3, ax, DVM_MAX_RANK);
  int naxes = na == -2 ? x->rank : na;
  if (np != 2 * naxes || na == -1) return;
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  for (int i = 0; i < naxes; i++) {
    int64_t a = i;
    if (na >= 0 && !dvmc_expr_is_const(ax[i], &a)) return;
    int k = inf_norm_axis(a, x->rank);
    if (k < 0) return;
    d[k] = dvmc_add(I->x, d[k], dvmc_add(I->x, p[i], p[naxes + i]));
  }
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_pad(inf *I, const dvmc_node *n) { pad(I, n), inf_keep_rank(n); }

/* CenterCropPad: shape[i] on axes[i] (all dims when there is no axes). */
static void center_crop_pad(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  const dvmc_expr *sh[DVM_MAX_RANK], *d[DVM_MAX_RANK];
  const dvmc_attr *axes = dvmc_attr_find(n, "axes");
  if (!x || x->rank < 0 || (axes && (axes->type != DVMC_ATTR_INTS || axes->n > x->rank))) return;
  int na = axes ? axes->n : x->rank;
  if (inf_exprs_of(I, n, NULL, 1, sh, DVM_MAX_RANK) != na) return;
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  for (int i = 0; i < na; i++) {
    int k = inf_norm_axis(axes ? axes->ints[i] : i, x->rank);
    if (k < 0) return;
    d[k] = sh[i];
  }
  inf_set_shape(n->out[0], x->rank, d);
}

void inf_rule_center_crop_pad(inf *I, const dvmc_node *n) { center_crop_pad(I, n), inf_keep_rank(n); }

/* DepthToSpace: [N, C / b^2, H b, W b]; SpaceToDepth: [N, C b^2, H / b, W / b]. */
void inf_rule_depth_space(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  int64_t b = dvmc_attr_int(n, "blocksize", 0);
  if (!x || x->rank != 4 || b < 1) return;
  for (int i = 0; i < 4; i++)
    if (!x->dims[i]) {
      inf_set_rank(n->out[0], 4);
      return;
    }
  const dvmc_expr *bb = dvmc_const(I->x, b), *b2 = dvmc_const(I->x, b * b), *d[4] = {x->dims[0]};
  bool to_space = !strcmp(n->op, "DepthToSpace");
  for (int i = 1; i < 4; i++)
    d[i] = to_space ? (i == 1 ? dvmc_floordiv(I->x, x->dims[1], b2) : dvmc_mul(I->x, x->dims[i], bb))
                    : (i == 1 ? dvmc_mul(I->x, x->dims[1], b2) : dvmc_floordiv(I->x, x->dims[i], bb));
  inf_set_shape(n->out[0], 4, d);
}
