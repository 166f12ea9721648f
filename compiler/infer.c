/* Symbolic shape inference (see infer.h): one rule per op family. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "onnx_import.h"

#define MAX_ELEMS 16 /* contents tracked for integer tensors up to this size */

typedef struct {
  dvmc_ctx *c;
  dvmc_exprs *x;
  dvmc_graph *root; /* where constraints are collected */
  int depth;        /* inside If branches and Loop bodies: > 0 */
  int oom;
} inf;

bool dvmc_value_shape_known(const dvmc_value *v) {
  if (!v || v->rank < 0) return false;
  for (int d = 0; d < v->rank; d++)
    if (!v->dims[d]) return false;
  return true;
}

bool dvmc_value_elems_known(const dvmc_value *v) {
  if (!v || !v->elems) return false;
  for (int i = 0; i < v->nelems; i++)
    if (!v->elems[i]) return false;
  return true;
}

static void set_shape(dvmc_value *v, int rank, const dvmc_expr *const *dims) {
  if (!v || rank < 0 || rank > DVM_MAX_RANK) return;
  v->rank = rank;
  for (int d = 0; d < rank; d++) v->dims[d] = dims[d];
}

static void set_dtype(dvmc_value *v, dvm_dtype dt) {
  if (!v) return;
  v->typed = true;
  v->dtype = dt;
}

static void set_elems(inf *I, dvmc_value *v, int n, const dvmc_expr *const *e) {
  if (!v || n > MAX_ELEMS) return;
  const dvmc_expr **copy = dvm_arena_alloc(&I->c->arena, (size_t)(n ? n : 1), sizeof *copy);
  if (!copy) return;
  for (int i = 0; i < n; i++) copy[i] = e[i];
  v->elems = copy;
  v->nelems = n;
}

/* Contents of constant integer tensors, as expressions. */
static void const_elems(inf *I, dvmc_value *v) {
  const dvmc_tensor *t = v->constant;
  if (!t || v->elems || (t->dtype != DVM_I64 && t->dtype != DVM_I32) || t->rank > 1) return;
  int64_t n = t->rank ? t->dims[0] : 1;
  if (n > MAX_ELEMS) return;
  const dvmc_expr *e[MAX_ELEMS];
  for (int64_t i = 0; i < n; i++)
    e[i] = dvmc_const(I->x, t->dtype == DVM_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i]);
  set_elems(I, v, (int)n, e);
}

/* Constant ints of a value: from its elems when they are all constants. */
static int const_list(const dvmc_value *v, int64_t *out, int max) {
  if (!dvmc_value_elems_known(v) || v->nelems > max) return -1;
  for (int i = 0; i < v->nelems; i++)
    if (!dvmc_expr_is_const(v->elems[i], &out[i])) return -1;
  return v->nelems;
}

/* A list attribute or constant input (later opsets moved axes to inputs). */
static int ints_of(const dvmc_node *n, const char *attr, int input, int64_t *out, int max) {
  const dvmc_attr *a = dvmc_attr_find(n, attr);
  if (a && a->type == DVMC_ATTR_INTS && a->n <= max) {
    for (int i = 0; i < a->n; i++) out[i] = a->ints[i];
    return a->n;
  }
  if (input >= 0 && input < n->nin && n->in[input]) return const_list(n->in[input], out, max);
  return a ? -1 : -2; /* -2: absent */
}

static int norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? (int)axis : -1;
}

/* ---- rules ---- */

/* The broadcast of two dims. Where they are not provably equal and neither
 * is provably 1, a top-level node (one that always runs) records the
 * relation: equality when both are >= 2, else equality or one of them 1.
 * Two different constants are left to the kernel's error. */
static const dvmc_expr *bcast_dim(inf *I, const dvmc_node *n, const dvmc_expr *r, const dvmc_expr *e) {
  const dvmc_expr *one = dvmc_const(I->x, 1);
  if (!r || !e) return NULL;
  if (e == r || e == one) return r;
  if (r == one) return e;
  int64_t lo1, hi1, lo2, hi2;
  if (dvmc_expr_is_const(r, &lo1) && dvmc_expr_is_const(e, &lo2)) return NULL;
  dvmc_sym_range(r, &lo1, &hi1);
  dvmc_sym_range(e, &lo2, &hi2);
  dvmc_constraint k = {lo1 >= 2 && lo2 >= 2 ? DVMC_REL_EQ : DVMC_REL_EQ_OR_ONE, r, e, n, false, "they broadcast"};
  if (I->depth == 0 && !dvmc_graph_constrain(I->c, I->root, &k)) I->oom = 1;
  /* a == b or one is 1: max when neither can be 0 */
  return lo1 >= 1 && lo2 >= 1 ? dvmc_max(I->x, r, e) : NULL;
}

/* Dims an op needs equal (a matrix product's inner dims, concat's inputs
 * off its axis): where not provably equal, a top-level node records the
 * relation, as for broadcasts. Two different constants are left to the
 * kernel's error. */
static void require_equal(inf *I, const dvmc_node *n, const dvmc_expr *a, const dvmc_expr *b, const char *why) {
  int64_t ca, cb;
  if (!a || !b || a == b || (dvmc_expr_is_const(a, &ca) && dvmc_expr_is_const(b, &cb))) return;
  dvmc_constraint k = {DVMC_REL_EQ, a, b, n, false, why};
  if (I->depth == 0 && !dvmc_graph_constrain(I->c, I->root, &k)) I->oom = 1;
}

static const char inner[] = "they are the inner dims of a matrix product";

/* Numpy broadcasting of known dims; unknown where the relation is. */
static void broadcast(inf *I, const dvmc_node *n, int first, int count) {
  int rank = 0;
  for (int i = first; i < first + count; i++) {
    if (!n->in[i] || n->in[i]->rank < 0) return;
    if (n->in[i]->rank > rank) rank = n->in[i]->rank;
  }
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int k = 0; k < rank; k++) {
    const dvmc_expr *r = dvmc_const(I->x, 1);
    for (int i = first; i < first + count; i++) {
      const dvmc_value *v = n->in[i];
      int j = k - (rank - v->rank);
      if (j >= 0) r = bcast_dim(I, n, r, v->dims[j]);
    }
    d[k] = r;
  }
  set_shape(n->out[0], rank, d);
}

static void same_shape(const dvmc_node *n, int out) {
  if (n->nin && n->in[0] && out < n->nout && n->out[out]) set_shape(n->out[out], n->in[0]->rank, n->in[0]->dims);
}

static void matmul(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0], *b = n->nin > 1 ? n->in[1] : NULL;
  if (!a || !b || a->rank < 1 || b->rank < 1) return;
  int ra = a->rank, rb = b->rank;
  const dvmc_expr *d[DVM_MAX_RANK];
  int batch = (ra > rb ? ra : rb) - 2;
  if (batch < 0) batch = 0;
  int k = 0;
  for (int i = 0; i < batch; i++) { /* batch dims broadcast */
    int ia = i - (batch - (ra - 2)), ib = i - (batch - (rb - 2));
    const dvmc_expr *ea = ia >= 0 && ra >= 2 ? a->dims[ia] : dvmc_const(I->x, 1);
    const dvmc_expr *eb = ib >= 0 && rb >= 2 ? b->dims[ib] : dvmc_const(I->x, 1);
    d[k++] = bcast_dim(I, n, ea, eb);
  }
  require_equal(I, n, a->dims[ra - 1], b->dims[rb >= 2 ? rb - 2 : 0], inner);
  if (ra >= 2) d[k++] = a->dims[ra - 2];
  if (rb >= 2) d[k++] = b->dims[rb - 1];
  if (k <= DVM_MAX_RANK) set_shape(n->out[0], k, d);
}

static void gemm(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0], *b = n->nin > 1 ? n->in[1] : NULL;
  if (!a || !b || a->rank != 2 || b->rank != 2) return;
  int ta = dvmc_attr_int(n, "transA", 0) != 0, tb = dvmc_attr_int(n, "transB", 0) != 0;
  require_equal(I, n, a->dims[ta ? 0 : 1], b->dims[tb ? 1 : 0], inner);
  const dvmc_expr *d[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
  set_shape(n->out[0], 2, d);
}

static void transpose(const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int64_t perm[DVM_MAX_RANK];
  int k = ints_of(n, "perm", -1, perm, DVM_MAX_RANK);
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) {
    int p = k == -2 ? x->rank - 1 - i : (k == x->rank ? norm_axis(perm[i], x->rank) : -1);
    if (p < 0) return;
    d[i] = x->dims[p];
  }
  set_shape(n->out[0], x->rank, d);
}

/* The product of dims [lo, hi), or NULL. */
static const dvmc_expr *prod(inf *I, const dvmc_value *v, int lo, int hi) {
  const dvmc_expr *p = dvmc_const(I->x, 1);
  for (int i = lo; i < hi && p; i++) p = v->dims[i] ? dvmc_mul(I->x, p, v->dims[i]) : NULL;
  return p;
}

/* Reshape to a target known as expressions: 0 copies, -1 is the rest. */
static void reshape(inf *I, const dvmc_node *n) {
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
    const dvmc_expr *total = prod(I, x, 0, x->rank);
    if (!total || !known) return;
    d[infer_at] = dvmc_floordiv(I->x, total, known);
  }
  set_shape(n->out[0], s->nelems, d);
  if (dvmc_value_elems_known(x) && x->nelems == 1 && s->nelems <= 1) set_elems(I, n->out[0], x->nelems, x->elems);
}

static void squeeze_unsqueeze(inf *I, const dvmc_node *n, int unsqueeze) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int64_t axes[DVM_MAX_RANK];
  int k = ints_of(n, "axes", 1, axes, DVM_MAX_RANK);
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  if (unsqueeze) {
    int rank = x->rank + k;
    if (k < 0 || rank > DVM_MAX_RANK) return;
    int mark[DVM_MAX_RANK] = {0};
    for (int i = 0; i < k; i++) {
      int a = norm_axis(axes[i], rank);
      if (a < 0 || mark[a]) return;
      mark[a] = 1;
    }
    for (int i = 0, j = 0; i < rank; i++) d[r++] = mark[i] ? dvmc_const(I->x, 1) : x->dims[j++];
    set_shape(n->out[0], rank, d);
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
        int a = norm_axis(axes[i], x->rank);
        if (a < 0) return;
        drop[a] = 1;
      }
    }
    for (int i = 0; i < x->rank; i++)
      if (!drop[i]) d[r++] = x->dims[i];
    set_shape(n->out[0], r, d);
  }
  if (dvmc_value_elems_known(x)) set_elems(I, n->out[0], x->nelems, x->elems);
}

static void flatten(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = (int)dvmc_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank) return;
  const dvmc_expr *d[2] = {prod(I, x, 0, axis), prod(I, x, axis, x->rank)};
  set_shape(n->out[0], 2, d);
}

static void concat(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  const dvmc_expr *elems[MAX_ELEMS];
  int ne = 0, all = x->rank == 1;
  for (int i = 1; i < n->nin; i++) {
    if (!n->in[i] || n->in[i]->rank != x->rank) return;
    d[axis] = d[axis] && n->in[i]->dims[axis] ? dvmc_add(I->x, d[axis], n->in[i]->dims[axis]) : NULL;
    for (int k = 0; k < x->rank; k++)
      if (k != axis) require_equal(I, n, x->dims[k], n->in[i]->dims[k], "they are concatenated along another axis");
  }
  for (int i = 0; all && i < n->nin; i++) {
    all = dvmc_value_elems_known(n->in[i]) && ne + n->in[i]->nelems <= MAX_ELEMS;
    for (int k = 0; all && k < n->in[i]->nelems; k++) elems[ne++] = n->in[i]->elems[k];
  }
  set_shape(n->out[0], x->rank, d);
  if (all) set_elems(I, n->out[0], ne, elems);
}

static void gather(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *idx = n->nin > 1 ? n->in[1] : NULL;
  if (!x || !idx || x->rank < 1 || idx->rank < 0 || x->rank + idx->rank - 1 > DVM_MAX_RANK) return;
  int axis = norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  for (int i = 0; i < axis; i++) d[r++] = x->dims[i];
  for (int i = 0; i < idx->rank; i++) d[r++] = idx->dims[i];
  for (int i = axis + 1; i < x->rank; i++) d[r++] = x->dims[i];
  set_shape(n->out[0], r, d);
  int64_t ix[MAX_ELEMS];
  int k = const_list(idx, ix, MAX_ELEMS);
  if (x->rank == 1 && dvmc_value_elems_known(x) && k >= 0) { /* shape[i] of a shape */
    const dvmc_expr *e[MAX_ELEMS];
    for (int i = 0; i < k; i++) {
      int64_t j = ix[i] < 0 ? ix[i] + x->nelems : ix[i];
      if (j < 0 || j >= x->nelems) return;
      e[i] = x->elems[j];
    }
    set_elems(I, n->out[0], k, e);
  }
}

static void shape_op(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int64_t lo = dvmc_attr_int(n, "start", 0), hi = dvmc_attr_int(n, "end", x->rank);
  if (lo < 0) lo += x->rank;
  if (hi < 0) hi += x->rank;
  lo = lo < 0 ? 0 : lo > x->rank ? x->rank : lo;
  hi = hi < lo ? lo : hi > x->rank ? x->rank : hi;
  const dvmc_expr *len = dvmc_const(I->x, hi - lo);
  set_shape(n->out[0], 1, &len);
  set_elems(I, n->out[0], (int)(hi - lo), x->dims + lo);
}

/* Scalar arithmetic on contents (the dims math of exported graphs). */
static void elem_arith(inf *I, const dvmc_node *n) {
  if (n->nin != 2 || !dvmc_value_elems_known(n->in[0]) || !dvmc_value_elems_known(n->in[1])) return;
  const dvmc_value *a = n->in[0], *b = n->in[1];
  if (!a->typed || (a->dtype != DVM_I64 && a->dtype != DVM_I32)) return;
  int len = a->nelems > b->nelems ? a->nelems : b->nelems;
  if ((a->nelems != len && a->nelems != 1) || (b->nelems != len && b->nelems != 1)) return;
  const dvmc_expr *e[MAX_ELEMS];
  for (int i = 0; i < len; i++) {
    const dvmc_expr *x = a->elems[a->nelems == 1 ? 0 : i], *y = b->elems[b->nelems == 1 ? 0 : i];
    int64_t cy;
    if (!strcmp(n->op, "Add")) e[i] = dvmc_add(I->x, x, y);
    else if (!strcmp(n->op, "Sub")) e[i] = dvmc_sub(I->x, x, y);
    else if (!strcmp(n->op, "Mul")) e[i] = dvmc_mul(I->x, x, y);
    /* integer Div truncates; equal to floor for the non-negative dims it sees */
    else if (!strcmp(n->op, "Div") && dvmc_expr_is_const(y, &cy) && cy > 0) e[i] = dvmc_floordiv(I->x, x, y);
    else return;
    if (!e[i]) return;
  }
  set_elems(I, n->out[0], len, e);
}

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
    k = ints_of(n, "axes", 1, axes, DVM_MAX_RANK);
    if (k == -2) k = 0;
    if (k < 0) return;
    if (k == 0 && dvmc_attr_int(n, "noop_with_empty_axes", 0)) {
      same_shape(n, 0);
      return;
    }
  }
  int red[DVM_MAX_RANK] = {0};
  for (int i = 0; i < k; i++) {
    int a = norm_axis(axes[i], x->rank);
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
  set_shape(n->out[0], r, d);
}

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
    set_shape(n->out[0], x->rank, d);
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
    if (ints_of(n, "kernel_shape", -1, k, DVM_MAX_RANK) != sp) return;
    d[1] = x->dims[1];
  }
  int ns = ints_of(n, "strides", -1, s, DVM_MAX_RANK), nd = ints_of(n, "dilations", -1, dl, DVM_MAX_RANK);
  int np = ints_of(n, "pads", -1, p, 2 * DVM_MAX_RANK);
  int ceil_mode = (int)dvmc_attr_int(n, "ceil_mode", 0);
  if ((ns != -2 && ns != sp) || (nd != -2 && nd != sp) || (np != -2 && np != 2 * sp)) return;
  for (int i = 0; i < sp; i++) {
    int64_t st = ns == -2 ? 1 : s[i], di = nd == -2 ? 1 : dl[i], pads = np == -2 ? 0 : p[i] + p[sp + i];
    if (st < 1 || !x->dims[2 + i]) return;
    const dvmc_expr *span = dvmc_add(I->x, x->dims[2 + i], dvmc_const(I->x, pads - di * (k[i] - 1) - 1 + (ceil_mode ? st - 1 : 0)));
    d[2 + i] = dvmc_add(I->x, dvmc_floordiv(I->x, span, dvmc_const(I->x, st)), dvmc_const(I->x, 1));
    if (ceil_mode) return; /* ONNX also drops a last window that starts in the end padding */
  }
  set_shape(n->out[0], x->rank, d);
}

static void expand(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *s = n->nin > 1 ? n->in[1] : NULL;
  if (!x || x->rank < 0 || !dvmc_value_elems_known(s) || s->nelems > DVM_MAX_RANK) return;
  dvmc_value shape = {.rank = s->nelems};
  for (int i = 0; i < s->nelems; i++) shape.dims[i] = s->elems[i];
  dvmc_value *ins[2] = {(dvmc_value *)x, &shape};
  dvmc_node pair = *n;
  pair.in = ins;
  pair.nin = 2;
  broadcast(I, &pair, 0, 2);
}

static void constant_of_shape(inf *I, const dvmc_node *n) {
  const dvmc_value *s = n->in[0];
  if (!dvmc_value_elems_known(s) || s->nelems > DVM_MAX_RANK) return;
  set_shape(n->out[0], s->nelems, s->elems);
  const dvmc_attr *a = dvmc_attr_find(n, "value");
  set_dtype(n->out[0], a && a->t ? a->t->dtype : DVM_F32);
}

/* A dim only the run time knows (NonZero's count, a runtime TopK k): a
 * fresh symbol that lowering reads from the node's output once it has run
 * (lower.c), so what follows is arithmetic on it. Top-level nodes only: a
 * branch or loop body runs never or many times. */
static const dvmc_expr *data_dim(inf *I, const char *hint) {
  return I->depth == 0 ? dvmc_sym_fresh(I->x, hint) : NULL;
}

static void nonzero(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *d[2] = {dvmc_const(I->x, x->rank), data_dim(I, "nnz")};
  set_shape(n->out[0], 2, d);
}

/* TopK: the axis dim becomes k, known or read at run time. */
static void topk(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *k = n->nin > 1 ? n->in[1] : NULL;
  if (!x || x->rank < 1 || !k) return;
  int axis = norm_axis(dvmc_attr_int(n, "axis", -1), x->rank);
  if (axis < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  d[axis] = dvmc_value_elems_known(k) && k->nelems == 1 ? k->elems[0] : data_dim(I, "k");
  for (int i = 0; i < n->nout && i < 2; i++) set_shape(n->out[i], x->rank, d);
}

/* Range: ceil((limit - start) / delta) elements, for a positive constant
 * delta and start and limit known as expressions; else read at run time. */
static void range(inf *I, const dvmc_node *n) {
  if (n->nin != 3) return;
  const dvmc_expr *len = NULL;
  int known = 1;
  for (int i = 0; i < 3; i++) known &= dvmc_value_elems_known(n->in[i]) && n->in[i]->nelems == 1;
  int64_t delta;
  if (known && dvmc_expr_is_const(n->in[2]->elems[0], &delta) && delta > 0) {
    const dvmc_expr *span = dvmc_sub(I->x, n->in[1]->elems[0], n->in[0]->elems[0]);
    len = dvmc_floordiv(I->x, dvmc_add(I->x, span, dvmc_const(I->x, delta - 1)), dvmc_const(I->x, delta));
  }
  if (!len) len = data_dim(I, "len");
  set_shape(n->out[0], 1, &len);
}

/* ---- dtypes ---- */

/* Loop, If and Scan: each output takes the dtype of the body output it comes
 * from (a Loop body's outputs start with the condition), not of the node's
 * first input; so this runs after the bodies are inferred. */
static void control_dtypes(const dvmc_node *n) {
  static const char *const bodies[] = {"body", "then_branch", "else_branch", NULL};
  int skip = !strcmp(n->op, "Loop");
  for (int i = 0; bodies[i]; i++) {
    const dvmc_attr *a = dvmc_attr_find(n, bodies[i]);
    if (!a || a->type != DVMC_ATTR_GRAPH || !a->g) continue;
    for (int k = 0; k < n->nout && skip + k < a->g->noutputs; k++) {
      const dvmc_value *b = a->g->outputs[skip + k];
      if (n->out[k] && !n->out[k]->typed && b && b->typed) set_dtype(n->out[k], b->dtype);
    }
  }
}

static void dtypes(const dvmc_node *n) {
  static const char *const to_bool[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                        "And", "Or", "Xor", "Not", NULL};
  static const char *const to_i64[] = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", NULL};
  dvm_dtype dt;
  int fixed = 0;
  if (!strcmp(n->op, "Loop") || !strcmp(n->op, "If") || !strcmp(n->op, "Scan")) return;
  for (int i = 0; to_bool[i]; i++)
    if (!strcmp(n->op, to_bool[i])) dt = DVM_BOOL, fixed = 1;
  for (int i = 0; to_i64[i]; i++)
    if (!strcmp(n->op, to_i64[i])) dt = DVM_I64, fixed = 1;
  if (!strcmp(n->op, "Cast")) {
    if (!dvmc_onnx_dtype(dvmc_attr_int(n, "to", 0), &dt)) return;
    fixed = 1;
  }
  if (!fixed) {
    const dvmc_value *src = !strcmp(n->op, "Where") && n->nin > 1 ? n->in[1] : n->nin ? n->in[0] : NULL;
    if (!strcmp(n->op, "ConstantOfShape") || !src || !src->typed) return;
    dt = src->dtype;
  }
  if (n->nout && n->out[0] && !n->out[0]->typed) set_dtype(n->out[0], dt);
  if (!strcmp(n->op, "TopK") && n->nout > 1 && n->out[1]) set_dtype(n->out[1], DVM_I64);
}

/* ---- the pass ---- */

static int is(const dvmc_node *n, const char *const *ops) {
  for (int i = 0; ops[i]; i++)
    if (!strcmp(n->op, ops[i])) return 1;
  return 0;
}

static void infer_graph(inf *I, dvmc_graph *g);

static void infer_node(inf *I, const dvmc_node *n) {
  static const char *const binary[] = {"Add", "Sub", "Mul", "Div", "Pow", "Min", "Max", "Equal", "Less",
                                       "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                                       "Where", NULL};
  static const char *const unary[] = {"Relu", "Exp", "Log", "Sqrt", "Tanh", "Erf", "Sigmoid", "Gelu", "Neg",
                                      "Abs", "Not", "Reciprocal", "Clip", "Cast", "Identity", "Dropout",
                                      "Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization",
                                      "CumSum", "Trilu", NULL};
  for (int i = 0; i < n->nin; i++)
    if (n->in[i]) const_elems(I, n->in[i]);
  if (!n->nout || !n->out[0]) return;
  dtypes(n);
  if (is(n, binary)) {
    broadcast(I, n, 0, n->nin);
    elem_arith(I, n);
  } else if (is(n, unary)) {
    same_shape(n, 0);
    if ((!strcmp(n->op, "Cast") || !strcmp(n->op, "Identity")) && dvmc_value_elems_known(n->in[0]))
      set_elems(I, n->out[0], n->in[0]->nelems, n->in[0]->elems);
  } else if (!strcmp(n->op, "MatMul")) matmul(I, n);
  else if (!strcmp(n->op, "Gemm")) gemm(I, n);
  else if (!strcmp(n->op, "Transpose")) transpose(n);
  else if (!strcmp(n->op, "Reshape")) reshape(I, n);
  else if (!strcmp(n->op, "Squeeze")) squeeze_unsqueeze(I, n, 0);
  else if (!strcmp(n->op, "Unsqueeze")) squeeze_unsqueeze(I, n, 1);
  else if (!strcmp(n->op, "Flatten")) flatten(I, n);
  else if (!strcmp(n->op, "Concat")) concat(I, n);
  else if (!strcmp(n->op, "Gather")) gather(I, n);
  else if (!strcmp(n->op, "Shape")) shape_op(I, n);
  else if (!strcmp(n->op, "Expand")) expand(I, n);
  else if (!strcmp(n->op, "Range")) range(I, n);
  else if (!strcmp(n->op, "NonZero")) nonzero(I, n);
  else if (!strcmp(n->op, "TopK")) topk(I, n);
  else if (!strcmp(n->op, "ConstantOfShape")) constant_of_shape(I, n);
  else if (!strncmp(n->op, "Reduce", 6)) reduce(I, n, 0);
  else if (!strcmp(n->op, "ArgMax") || !strcmp(n->op, "ArgMin")) reduce(I, n, 1);
  else if (!strcmp(n->op, "Conv")) window(I, n, 1, 0);
  else if (!strcmp(n->op, "MaxPool") || !strcmp(n->op, "AveragePool")) window(I, n, 0, 0);
  else if (!strcmp(n->op, "GlobalAveragePool") || !strcmp(n->op, "GlobalMaxPool")) window(I, n, 0, 1);
  I->depth++;
  for (int a = 0; a < n->nattrs; a++)
    if (n->attrs[a].type == DVMC_ATTR_GRAPH && n->attrs[a].g) infer_graph(I, n->attrs[a].g);
  I->depth--;
  control_dtypes(n);
}

static void infer_graph(inf *I, dvmc_graph *g) {
  for (int i = 0; i < g->nvalues; i++) const_elems(I, g->values[i]);
  for (int i = 0; i < g->nnodes; i++) infer_node(I, g->nodes[i]);
}

/* Forgets what inference found (node outputs that are not constants), so
 * it can run again after unification. */
static void reset_graph(dvmc_graph *g) {
  for (int i = 0; i < g->nvalues; i++) {
    dvmc_value *v = g->values[i];
    if (!v->producer || v->constant) continue;
    v->rank = -1;
    v->elems = NULL;
    v->nelems = 0;
  }
  for (int i = 0; i < g->nnodes; i++)
    for (int a = 0; a < g->nodes[i]->nattrs; a++)
      if (g->nodes[i]->attrs[a].g) reset_graph(g->nodes[i]->attrs[a].g);
}

/* The position of sym's first appearance among g's input dims, or -1. */
static int input_pos(const dvmc_graph *g, const dvmc_expr *sym) {
  for (int i = 0; i < g->ninputs; i++)
    for (int d = 0; d < g->inputs[i]->rank; d++)
      if (g->inputs[i]->dims[d] == sym) return i * DVM_MAX_RANK + d;
  return -1;
}

/* Unifies the first pair of input symbols that a constraint says are
 * equal: the later one is replaced by the earlier wherever inputs name it,
 * which takes the intersection of their ranges. Sets *changed. */
static dvm_status *unify(inf *I, dvmc_graph *g, int *changed) {
  *changed = 0;
  for (int i = 0; i < g->nconstraints; i++) {
    dvmc_constraint *k = &g->constraints[i];
    int pa = input_pos(g, k->a), pb = input_pos(g, k->b);
    if (k->rel != DVMC_REL_EQ || k->unified || !dvmc_expr_sym_name(k->a) || !dvmc_expr_sym_name(k->b) ||
        pa < 0 || pb < 0)
      continue;
    if (pb < pa) {
      const dvmc_expr *t = k->a;
      k->a = k->b;
      k->b = t;
    }
    int64_t lo1, hi1, lo2, hi2;
    dvmc_sym_range(k->a, &lo1, &hi1);
    dvmc_sym_range(k->b, &lo2, &hi2);
    if (lo2 > hi1 || lo1 > hi2)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "node \"%s\": %s (%lld..%lld) and %s (%lld..%lld) must be equal (%s), "
                            "but their ranges do not meet",
                            k->node->name, dvmc_expr_sym_name(k->a), (long long)lo1, (long long)hi1,
                            dvmc_expr_sym_name(k->b), (long long)lo2, (long long)hi2, k->why);
    dvmc_sym_set_range(I->x, k->a, lo1 > lo2 ? lo1 : lo2, hi1 < hi2 ? hi1 : hi2);
    for (int v = 0; v < g->ninputs; v++)
      for (int d = 0; d < g->inputs[v]->rank; d++)
        if (g->inputs[v]->dims[d] == k->b) g->inputs[v]->dims[d] = k->a;
    k->unified = true;
    *changed = 1;
    return NULL;
  }
  return NULL;
}

dvm_status *dvmc_infer(dvmc_ctx *c, dvmc_graph *g) {
  inf I = {c, c->exprs, g, 0, 0};
  for (;;) {
    infer_graph(&I, g);
    if (I.oom) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    int changed;
    dvm_status *st = unify(&I, g, &changed);
    if (st || !changed) return st;
    /* start again from the inputs; the relations found are found again */
    int kept = 0;
    for (int i = 0; i < g->nconstraints; i++)
      if (g->constraints[i].unified) g->constraints[kept++] = g->constraints[i];
    g->nconstraints = kept;
    reset_graph(g);
  }
}
