/* Symbolic shape inference (see infer.h): one rule per op family. */
#include <stdlib.h>
#include <string.h>

#include "infer.h"
#include "onnx_import.h"
#include "ops.h"

#define MAX_ELEMS 16 /* contents tracked for integer tensors up to this size */

typedef struct {
  dvmc_ctx *c;
  dvmc_exprs *x;
  dvmc_graph *root; /* where constraints are collected */
  int depth;        /* inside If branches and Loop bodies: > 0 */
  int narrowed;     /* a symbol's range was narrowed: infer again */
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

/* The rank alone: dims the rule cannot tell stay NULL (at top level they
 * become symbols read from the output: fill_data_dims). */
static void set_rank(dvmc_value *v, int rank) {
  const dvmc_expr *none[DVM_MAX_RANK] = {0};
  if (v && v->rank < 0) set_shape(v, rank, none);
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

/* A list attribute or input as expressions: an attribute's ints, or an
 * input's known contents (constants or dims, as Shape -> Gather chains make
 * them). Returns the count, -1 when unknown, -2 when absent. */
static int exprs_of(inf *I, const dvmc_node *n, const char *attr, int input, const dvmc_expr **out, int max) {
  const dvmc_attr *a = attr ? dvmc_attr_find(n, attr) : NULL;
  if (a) {
    if (a->type != DVMC_ATTR_INTS || a->n > max) return -1;
    for (int i = 0; i < a->n; i++) out[i] = dvmc_const(I->x, a->ints[i]);
    return a->n;
  }
  if (input < 0 || input >= n->nin || !n->in[input]) return -2;
  const dvmc_value *v = n->in[input];
  if (!dvmc_value_elems_known(v) || v->nelems > max) return -1;
  for (int i = 0; i < v->nelems; i++) out[i] = v->elems[i];
  return v->nelems;
}

static int is(const dvmc_node *n, const char *const *ops) {
  for (int i = 0; ops[i]; i++)
    if (!strcmp(n->op, ops[i])) return 1;
  return 0;
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
  /* a against min(a, X) (a slice of a fixed-size table by a dim, as the
   * position ids of BERT exports): they broadcast only when equal, that
   * is a <= X; the run checks it, and the result is a */
  for (int k = 0; k < 2; k++) {
    const dvmc_expr *a = k ? e : r, *m = k ? r : e;
    if (dvmc_expr_kind_of(m) == DVMC_E_MIN && (dvmc_expr_arg(m, 0) == a || dvmc_expr_arg(m, 1) == a)) {
      const dvmc_expr *other = dvmc_expr_arg(m, 0) == a ? dvmc_expr_arg(m, 1) : dvmc_expr_arg(m, 0);
      dvmc_sym_range(other, &lo1, &hi1);
      if (lo1 < 2) break; /* min(a, 1) broadcasts against any a */
      int64_t c, alo, ahi;
      dvmc_sym_range(a, &alo, &ahi);
      if (I->depth == 0 && dvmc_expr_sym_name(a) && dvmc_expr_is_const(other, &c) && c >= alo) {
        /* an input symbol: its range ends at c, the input guard checks it,
         * and inference runs again with min(a, c) = a */
        dvmc_sym_set_range(I->x, a, alo, c < ahi ? c : ahi);
        I->narrowed = 1;
        return a;
      }
      dvmc_constraint k2 = {DVMC_REL_EQ, a, m, n, false, "they broadcast"};
      if (I->depth == 0 && !dvmc_graph_constrain(I->c, I->root, &k2)) I->oom = 1;
      return a;
    }
  }
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

static void rule_matmul(inf *I, const dvmc_node *n) {
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

static void rule_gemm(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0], *b = n->nin > 1 ? n->in[1] : NULL;
  if (!a || !b || a->rank != 2 || b->rank != 2) return;
  int ta = dvmc_attr_int(n, "transA", 0) != 0, tb = dvmc_attr_int(n, "transB", 0) != 0;
  require_equal(I, n, a->dims[ta ? 0 : 1], b->dims[tb ? 1 : 0], inner);
  const dvmc_expr *d[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
  set_shape(n->out[0], 2, d);
}

static void rule_transpose(inf *I, const dvmc_node *n) {
  (void)I;
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
static void rule_reshape(inf *I, const dvmc_node *n) {
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

static void rule_flatten(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = (int)dvmc_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank) return;
  const dvmc_expr *d[2] = {prod(I, x, 0, axis), prod(I, x, axis, x->rank)};
  set_shape(n->out[0], 2, d);
}

static void rule_concat(inf *I, const dvmc_node *n) {
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

static void rule_gather(inf *I, const dvmc_node *n) {
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

static void rule_shape(inf *I, const dvmc_node *n) {
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

static void rule_expand(inf *I, const dvmc_node *n) {
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
 * (lower_values.c), so what follows is arithmetic on it. Top-level nodes only: a
 * branch or loop body runs never or many times. */
static const dvmc_expr *data_dim(inf *I, const char *hint) {
  return I->depth == 0 ? dvmc_sym_fresh(I->x, hint) : NULL;
}

static void rule_nonzero(inf *I, const dvmc_node *n) {
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
static void rule_range(inf *I, const dvmc_node *n) {
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
  int ns = exprs_of(I, n, old ? "starts" : NULL, 1, st, DVM_MAX_RANK);
  int ne = exprs_of(I, n, old ? "ends" : NULL, 2, en, DVM_MAX_RANK);
  int na = exprs_of(I, n, old ? "axes" : NULL, 3, ax, DVM_MAX_RANK);
  int np = old ? -2 : exprs_of(I, n, NULL, 4, sp, DVM_MAX_RANK);
  if (ns < 0 || ne != ns || (na != -2 && na != ns) || (np != -2 && np != ns)) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  int64_t lo[DVM_MAX_RANK], hi[DVM_MAX_RANK], step[DVM_MAX_RANK];
  int consts = x->rank == 1 && dvmc_value_elems_known(x);
  for (int i = 0; i < ns; i++) {
    int64_t a = i, t = 1;
    if ((na >= 0 && !dvmc_expr_is_const(ax[i], &a)) || (np >= 0 && !dvmc_expr_is_const(sp[i], &t)) || t == 0) return;
    int k = norm_axis(a, x->rank);
    if (k < 0) return;
    d[k] = slice_len(I, x->dims[k], st[i], en[i], t);
    consts = consts && dvmc_expr_is_const(st[i], &lo[i]) && dvmc_expr_is_const(en[i], &hi[i]);
    step[i] = t;
  }
  set_shape(n->out[0], x->rank, d);
  if (consts && ns == 1) { /* a slice of a shape: its contents, clamped as above */
    int64_t len = x->nelems, s = lo[0], e = hi[0], t = step[0];
    s = s < 0 ? s + len : s;
    e = e < 0 ? e + len : e;
    s = t > 0 ? (s < 0 ? 0 : s > len ? len : s) : (s < 0 ? 0 : s > len - 1 ? len - 1 : s);
    e = t > 0 ? (e < 0 ? 0 : e > len ? len : e) : (e < -1 ? -1 : e > len - 1 ? len - 1 : e);
    const dvmc_expr *el[MAX_ELEMS];
    int m = 0;
    for (int64_t j = s; t > 0 ? j < e : j > e; j += t) el[m++] = x->elems[j];
    set_elems(I, n->out[0], m, el);
  }
}

/* Split into the sizes of input 1 (attribute "split" before opset 13), or
 * into num_outputs (the outputs) parts of ceil(d / parts), the last the rest. */
static void split(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  int axis = norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0 || !x->dims[axis]) return;
  const dvmc_expr *sizes[64];
  int k = exprs_of(I, n, n->opset < 13 ? "split" : NULL, 1, sizes, 64);
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
    set_shape(n->out[i], x->rank, d);
  }
}

static void tile(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  const dvmc_expr *r[DVM_MAX_RANK], *d[DVM_MAX_RANK];
  if (!x || x->rank < 0 || exprs_of(I, n, NULL, 1, r, DVM_MAX_RANK) != x->rank) return;
  for (int i = 0; i < x->rank; i++) d[i] = dvmc_mul(I->x, x->dims[i], r[i]);
  set_shape(n->out[0], x->rank, d);
}

/* Pad: begins and ends from input 1 ("pads" before opset 11), on the axes
 * of input 3 (opset 18) or all. */
static void pad(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *p[2 * DVM_MAX_RANK], *ax[DVM_MAX_RANK], *d[DVM_MAX_RANK];
  int np = exprs_of(I, n, n->opset < 11 ? "pads" : NULL, 1, p, 2 * DVM_MAX_RANK);
  int na = exprs_of(I, n, NULL, 3, ax, DVM_MAX_RANK);
  int naxes = na == -2 ? x->rank : na;
  if (np != 2 * naxes || na == -1) return;
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  for (int i = 0; i < naxes; i++) {
    int64_t a = i;
    if (na >= 0 && !dvmc_expr_is_const(ax[i], &a)) return;
    int k = norm_axis(a, x->rank);
    if (k < 0) return;
    d[k] = dvmc_add(I->x, d[k], dvmc_add(I->x, p[i], p[naxes + i]));
  }
  set_shape(n->out[0], x->rank, d);
}

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
    if (exprs_of(I, n, NULL, sizes_at, d, DVM_MAX_RANK) != x->rank || dvmc_attr_find(n, "axes")) return;
    set_shape(n->out[0], x->rank, d);
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
  set_shape(n->out[0], x->rank, d);
}

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
  int nos = ints_of(n, "output_shape", -1, os, DVM_MAX_RANK);
  const char *ap = dvmc_attr_string(n, "auto_pad", "NOTSET");
  int same = !strncmp(ap, "SAME_", 5); /* in * stride, without output_shape */
  if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0 && !same) return;
  int ns = ints_of(n, "strides", -1, s, DVM_MAX_RANK), nd = ints_of(n, "dilations", -1, dl, DVM_MAX_RANK);
  int np = ints_of(n, "pads", -1, p, 2 * DVM_MAX_RANK), no = ints_of(n, "output_padding", -1, op, DVM_MAX_RANK);
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
  set_shape(n->out[0], x->rank, d);
}

/* Size: a scalar whose content is the product of the dims. */
static void rule_size(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  set_shape(n->out[0], 0, NULL);
  const dvmc_expr *p = x && x->rank >= 0 ? prod(I, x, 0, x->rank) : NULL;
  if (p) set_elems(I, n->out[0], 1, &p);
}

/* Equal, Where, Min, Max on contents: what the exporters' shape logic
 * (expand with -1, clamped lengths) computes. A comparison is known where
 * the expressions are the same (true) or their ranges do not meet (false). */
static void elem_select(inf *I, const dvmc_node *n) {
  static const char *const ops[] = {"Equal", "Where", "Min", "Max", NULL};
  int nin = n->nin, len = 0;
  if (!is(n, ops) || (!strcmp(n->op, "Where") ? nin != 3 : nin != 2)) return;
  for (int i = 0; i < nin; i++) {
    if (!dvmc_value_elems_known(n->in[i])) return;
    if (n->in[i]->nelems > len) len = n->in[i]->nelems;
  }
  for (int i = 0; i < nin; i++)
    if (n->in[i]->nelems != len && n->in[i]->nelems != 1) return;
  const dvmc_expr *e[MAX_ELEMS], *one = dvmc_const(I->x, 1), *zero = dvmc_const(I->x, 0);
  for (int i = 0; i < len; i++) {
    const dvmc_expr *a = n->in[0]->elems[n->in[0]->nelems == 1 ? 0 : i];
    const dvmc_expr *b = n->in[1]->elems[n->in[1]->nelems == 1 ? 0 : i];
    int64_t alo, ahi, blo, bhi, c;
    if (!strcmp(n->op, "Equal")) {
      dvmc_sym_range(a, &alo, &ahi);
      dvmc_sym_range(b, &blo, &bhi);
      e[i] = a == b ? one : (ahi < blo || bhi < alo) ? zero : NULL;
    } else if (!strcmp(n->op, "Where")) {
      const dvmc_expr *y = n->in[2]->elems[n->in[2]->nelems == 1 ? 0 : i];
      e[i] = dvmc_expr_is_const(a, &c) ? (c ? b : y) : NULL;
    } else {
      e[i] = !strcmp(n->op, "Min") ? dvmc_min(I->x, a, b) : dvmc_max(I->x, a, b);
    }
    if (!e[i]) return;
  }
  set_elems(I, n->out[0], len, e);
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
  set_elems(I, (dvmc_value *)o, (int)len, e);
}

/* Forgets the shapes and contents inference found for g's node outputs. */
static void reset_values(dvmc_graph *g) {
  for (int i = 0; i < g->nvalues; i++) {
    dvmc_value *v = g->values[i];
    if (!v->producer || v->constant) continue;
    v->rank = -1;
    v->elems = NULL;
    v->nelems = 0;
  }
}

/* ---- the rules of the op table (ops.def's SHAPE column) ---- */

static void rule_broadcast(inf *I, const dvmc_node *n) {
  broadcast(I, n, 0, n->nin);
  elem_arith(I, n);
  elem_select(I, n);
}

/* Output 0 has input 0's shape (and for Cast and Identity its contents). */
static void rule_same(inf *I, const dvmc_node *n) {
  same_shape(n, 0);
  if ((!strcmp(n->op, "Cast") || !strcmp(n->op, "Identity")) && dvmc_value_elems_known(n->in[0]))
    set_elems(I, n->out[0], n->in[0]->nelems, n->in[0]->elems);
}

/* Dropout: y and the mask both have x's shape. */
static void rule_dropout(inf *I, const dvmc_node *n) {
  (void)I;
  same_shape(n, 0), same_shape(n, 1);
}

/* RandomNormal, RandomUniform: the dims of the shape attribute. */
static void rule_random(inf *I, const dvmc_node *n) {
  int64_t v[DVM_MAX_RANK];
  const dvmc_expr *d[DVM_MAX_RANK];
  int k = ints_of(n, "shape", -1, v, DVM_MAX_RANK);
  for (int i = 0; i < k; i++) d[i] = dvmc_const(I->x, v[i]);
  if (k >= 0) set_shape(n->out[0], k, d);
}

/* Multinomial: [batch, sample_size] for x [batch, classes]. */
static void rule_multinomial(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  set_rank(n->out[0], 2);
  if (x && x->rank == 2 && x->dims[0])
    set_shape(n->out[0], 2, (const dvmc_expr *[]){x->dims[0], dvmc_const(I->x, dvmc_attr_int(n, "sample_size", 1))});
}

/* Squeeze by axes computed at run time: the rank still follows from their
 * count. */
static void rule_squeeze(inf *I, const dvmc_node *n) {
  squeeze_unsqueeze(I, n, 0);
  const dvmc_value *x = n->in[0], *axes = n->nin > 1 ? n->in[1] : NULL;
  int64_t k;
  if (x && x->rank >= 0 && axes && axes->rank == 1 && axes->dims[0] && dvmc_expr_is_const(axes->dims[0], &k) &&
      k > 0 && k <= x->rank)
    set_rank(n->out[0], x->rank - (int)k);
}
static void rule_unsqueeze(inf *I, const dvmc_node *n) { squeeze_unsqueeze(I, n, 1); }
/* Ops whose outputs have input 0's rank whatever their dims: where the
 * rule cannot tell the dims, the rank still holds. */
static void keep_rank(const dvmc_node *n) {
  for (int i = 0; i < n->nout; i++)
    if (n->in[0] && n->in[0]->rank >= 0) set_rank(n->out[i], n->in[0]->rank);
}

static void rule_topk(inf *I, const dvmc_node *n) { topk(I, n), keep_rank(n); }
static void rule_slice(inf *I, const dvmc_node *n) { slice(I, n), keep_rank(n); }
static void rule_split(inf *I, const dvmc_node *n) { split(I, n), keep_rank(n); }
static void rule_tile(inf *I, const dvmc_node *n) { tile(I, n), keep_rank(n); }
/* CenterCropPad: shape[i] on axes[i] (all dims when there is no axes). */
static void center_crop_pad(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  const dvmc_expr *sh[DVM_MAX_RANK], *d[DVM_MAX_RANK];
  const dvmc_attr *axes = dvmc_attr_find(n, "axes");
  if (!x || x->rank < 0 || (axes && (axes->type != DVMC_ATTR_INTS || axes->n > x->rank))) return;
  int na = axes ? axes->n : x->rank;
  if (exprs_of(I, n, NULL, 1, sh, DVM_MAX_RANK) != na) return;
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[i];
  for (int i = 0; i < na; i++) {
    int k = norm_axis(axes ? axes->ints[i] : i, x->rank);
    if (k < 0) return;
    d[k] = sh[i];
  }
  set_shape(n->out[0], x->rank, d);
}
static void rule_center_crop_pad(inf *I, const dvmc_node *n) { center_crop_pad(I, n), keep_rank(n); }

/* The one element of input i when inference knows it, else NULL. */
static const dvmc_expr *elem_of(inf *I, const dvmc_node *n, int i) {
  const dvmc_expr *e[1];
  return exprs_of(I, n, NULL, i, e, 1) == 1 ? e[0] : NULL;
}

/* HannWindow, HammingWindow, BlackmanWindow: [size]. */
static void rule_window_fn(inf *I, const dvmc_node *n) {
  const dvmc_expr *size = elem_of(I, n, 0);
  if (size) set_shape(n->out[0], 1, &size);
  set_rank(n->out[0], 1);
}

/* MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins]. */
static void rule_mel(inf *I, const dvmc_node *n) {
  const dvmc_expr *mel = elem_of(I, n, 0), *len = elem_of(I, n, 1);
  if (mel && len)
    set_shape(n->out[0], 2, (const dvmc_expr *[]){
        dvmc_add(I->x, dvmc_floordiv(I->x, len, dvmc_const(I->x, 2)), dvmc_const(I->x, 1)), mel});
  set_rank(n->out[0], 2);
}

/* DFT: x's dims but along the axis (the transform's length, or half of it
 * plus one for a one-sided forward transform) and the last (1 for an
 * inverse to a real signal, else 2). The axis is an attribute before
 * opset 20, input 2 from it. */
static void rule_dft(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 2) return;
  int r = x->rank;
  int64_t axis = n->opset < 20 ? dvmc_attr_int(n, "axis", 1) : -2;
  int64_t inv = dvmc_attr_int(n, "inverse", 0), one = dvmc_attr_int(n, "onesided", 0);
  const dvmc_expr *d[DVM_MAX_RANK], *len = NULL, *ax = NULL;
  if (n->opset >= 20 && n->nin > 2 && n->in[2] && (!(ax = elem_of(I, n, 2)) || !dvmc_expr_is_const(ax, &axis))) {
    set_rank(n->out[0], r);
    return;
  }
  int k = norm_axis(axis, r);
  if (k < 0 || k == r - 1 || !x->dims[k]) {
    set_rank(n->out[0], r);
    return;
  }
  if (n->nin > 1 && n->in[1]) len = elem_of(I, n, 1);
  else if (inv && one) len = dvmc_mul(I->x, dvmc_sub(I->x, x->dims[k], dvmc_const(I->x, 1)), dvmc_const(I->x, 2));
  else len = x->dims[k];
  for (int i = 0; i < r; i++) d[i] = x->dims[i];
  d[k] = !len ? NULL : !inv && one ? dvmc_add(I->x, dvmc_floordiv(I->x, len, dvmc_const(I->x, 2)), dvmc_const(I->x, 1)) : len;
  d[r - 1] = dvmc_const(I->x, inv && one ? 1 : 2);
  set_shape(n->out[0], r, d);
}

/* STFT: [batch, (length - frame) / step + 1, bins, 2], the frame being
 * frame_length, or the window's length, or the signal's. */
static void rule_stft(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 2 ? n->in[2] : NULL;
  if (!x || x->rank != 3) return;
  const dvmc_expr *step = elem_of(I, n, 1), *frame = NULL, *d[4] = {x->dims[0], NULL, NULL, dvmc_const(I->x, 2)};
  if (n->nin > 3 && n->in[3]) frame = elem_of(I, n, 3);
  else frame = w ? (w->rank == 1 ? w->dims[0] : NULL) : x->dims[1];
  if (frame && step && x->dims[1])
    d[1] = dvmc_add(I->x, dvmc_floordiv(I->x, dvmc_sub(I->x, x->dims[1], frame), step), dvmc_const(I->x, 1));
  if (frame)
    d[2] = dvmc_attr_int(n, "onesided", 1) ? dvmc_add(I->x, dvmc_floordiv(I->x, frame, dvmc_const(I->x, 2)), dvmc_const(I->x, 1)) : frame;
  set_shape(n->out[0], 4, d);
}

/* Det: X's dims but the last two. */
static void rule_det(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *x = n->in[0];
  if (x && x->rank >= 2) set_shape(n->out[0], x->rank - 2, x->dims);
}

/* Col2Im: [N, C / prod(block), image_shape...]. */
static void rule_col2im(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *img = n->nin > 1 ? n->in[1] : NULL;
  int64_t k;
  if (!x || x->rank != 3 || !img || img->rank != 1 || !img->dims[0] || !dvmc_expr_is_const(img->dims[0], &k) ||
      k < 1 || k > DVM_MAX_RANK - 2)
    return;
  const dvmc_expr *im[DVM_MAX_RANK], *bl[DVM_MAX_RANK], *d[DVM_MAX_RANK] = {x->dims[0]};
  if (exprs_of(I, n, NULL, 1, im, DVM_MAX_RANK) == k)
    for (int i = 0; i < k; i++) d[2 + i] = im[i];
  if (exprs_of(I, n, NULL, 2, bl, DVM_MAX_RANK) == k && x->dims[1]) {
    const dvmc_expr *prod = dvmc_const(I->x, 1);
    for (int i = 0; i < k; i++) prod = dvmc_mul(I->x, prod, bl[i]);
    d[1] = dvmc_floordiv(I->x, x->dims[1], prod);
  }
  set_shape(n->out[0], 2 + (int)k, d);
}

/* MaxUnpool: [N, C, (in - 1) stride + kernel - pads...], or output_shape. */
static void rule_max_unpool(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 3) return;
  int r = x->rank;
  const dvmc_expr *d[DVM_MAX_RANK];
  if (n->nin > 2 && n->in[2]) {
    if (exprs_of(I, n, NULL, 2, d, DVM_MAX_RANK) == r) set_shape(n->out[0], r, d);
    set_rank(n->out[0], r);
    return;
  }
  const dvmc_attr *k = dvmc_attr_find(n, "kernel_shape"), *s = dvmc_attr_find(n, "strides"),
                  *p = dvmc_attr_find(n, "pads");
  if (!k || k->type != DVMC_ATTR_INTS || k->n != r - 2 || (s && s->n != r - 2) || (p && p->n != 2 * (r - 2))) {
    set_rank(n->out[0], r);
    return;
  }
  d[0] = x->dims[0], d[1] = x->dims[1];
  for (int i = 0; i < r - 2; i++) {
    int64_t st = s ? s->ints[i] : 1, pads = p ? p->ints[i] + p->ints[r - 2 + i] : 0;
    d[2 + i] = !x->dims[2 + i] ? NULL
                               : dvmc_add(I->x, dvmc_mul(I->x, dvmc_sub(I->x, x->dims[2 + i], dvmc_const(I->x, 1)), dvmc_const(I->x, st)),
                                          dvmc_const(I->x, k->ints[i] - pads));
  }
  set_shape(n->out[0], r, d);
}

/* DepthToSpace: [N, C / b^2, H b, W b]; SpaceToDepth: [N, C b^2, H / b, W / b]. */
static void rule_depth_space(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  int64_t b = dvmc_attr_int(n, "blocksize", 0);
  if (!x || x->rank != 4 || b < 1) return;
  for (int i = 0; i < 4; i++)
    if (!x->dims[i]) {
      set_rank(n->out[0], 4);
      return;
    }
  const dvmc_expr *bb = dvmc_const(I->x, b), *b2 = dvmc_const(I->x, b * b), *d[4] = {x->dims[0]};
  bool to_space = !strcmp(n->op, "DepthToSpace");
  for (int i = 1; i < 4; i++)
    d[i] = to_space ? (i == 1 ? dvmc_floordiv(I->x, x->dims[1], b2) : dvmc_mul(I->x, x->dims[i], bb))
                    : (i == 1 ? dvmc_mul(I->x, x->dims[1], b2) : dvmc_floordiv(I->x, x->dims[i], bb));
  set_shape(n->out[0], 4, d);
}
static void rule_pad(inf *I, const dvmc_node *n) { pad(I, n), keep_rank(n); }
static void rule_resize(inf *I, const dvmc_node *n) { resize(I, n), keep_rank(n); }
static void rule_conv_transpose(inf *I, const dvmc_node *n) { conv_transpose(I, n), keep_rank(n); }
static void rule_reduce(inf *I, const dvmc_node *n) {
  reduce(I, n, 0);
  if (dvmc_attr_int(n, "keepdims", 1)) keep_rank(n);
}

/* LayerNormalization: Y as X; Mean and InvStdDev keep X's dims before the
 * axis and are 1 from it on. */
static void rule_layernorm(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  same_shape(n, 0);
  if (!x || x->rank < 0) return;
  int axis = norm_axis(dvmc_attr_int(n, "axis", -1), x->rank);
  const dvmc_expr *d[DVM_MAX_RANK];
  if (axis < 0) return;
  for (int i = 0; i < x->rank; i++) d[i] = i < axis ? x->dims[i] : dvmc_const(I->x, 1);
  for (int i = 1; i < n->nout; i++) set_shape(n->out[i], x->rank, d);
}

/* BatchNormalization: Y as X; training mode's running mean and variance
 * as the scale, [C]. */
static void rule_batchnorm(inf *I, const dvmc_node *n) {
  (void)I;
  same_shape(n, 0);
  for (int i = 1; i < n->nout && n->nin > 1 && n->in[1]; i++) set_shape(n->out[i], n->in[1]->rank, n->in[1]->dims);
}
static void rule_arg(inf *I, const dvmc_node *n) { reduce(I, n, 1); }
static void rule_conv(inf *I, const dvmc_node *n) { window(I, n, 1, 0), keep_rank(n); }
static void rule_pool(inf *I, const dvmc_node *n) { window(I, n, 0, 0), keep_rank(n); }
static void rule_global_pool(inf *I, const dvmc_node *n) { window(I, n, 0, 1); }

/* AffineGrid: [N, H, W, 2] or [N, D, H, W, 3] from size's contents (its
 * length alone gives the rank). */
static void rule_affine_grid(inf *I, const dvmc_node *n) {
  const dvmc_value *t = n->in[0], *s = n->nin > 1 ? n->in[1] : NULL;
  const dvmc_expr *e[DVM_MAX_RANK], *d[DVM_MAX_RANK] = {0};
  int64_t len;
  if (!t || !s || s->rank != 1 || !s->dims[0] || !dvmc_expr_is_const(s->dims[0], &len) || (len != 4 && len != 5)) return;
  int k = exprs_of(I, n, NULL, 1, e, DVM_MAX_RANK), r = (int)len - 2;
  d[0] = t->rank == 3 ? t->dims[0] : NULL;
  for (int i = 0; i < r; i++) d[1 + i] = k == len ? e[2 + i] : NULL;
  d[1 + r] = dvmc_const(I->x, r);
  set_shape(n->out[0], r + 2, d);
}

/* GridSample: X's [N, C], then the grid's dims between its batch and its
 * coordinates. */
static void rule_grid_sample(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *x = n->in[0], *g = n->nin > 1 ? n->in[1] : NULL;
  if (!x || x->rank < 3) return;
  if (!g || g->rank != x->rank) return keep_rank(n);
  const dvmc_expr *d[DVM_MAX_RANK] = {x->dims[0], x->dims[1]};
  for (int i = 2; i < x->rank; i++) d[i] = g->dims[i - 1];
  set_shape(n->out[0], x->rank, d);
}

static void rule_constant_of_shape(inf *I, const dvmc_node *n) {
  constant_of_shape(I, n);
  constant_elems(I, n);
}

/* NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: the loss has the
 * target's shape (reduction none) or none; SCE's log_prob the input's. */
static void rule_nll_loss(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *t = n->nin > 1 ? n->in[1] : NULL;
  if (strcmp(dvmc_attr_string(n, "reduction", "mean"), "none")) set_shape(n->out[0], 0, NULL);
  else if (t) set_shape(n->out[0], t->rank, t->dims);
  same_shape(n, 1);
}

static void rule_gather_elements(inf *I, const dvmc_node *n) {
  (void)I;
  if (n->nin > 1 && n->in[1]) set_shape(n->out[0], n->in[1]->rank, n->in[1]->dims);
}

/* GatherND: indices.dims[:-1] + data.dims[batch_dims + k:], for a known k
 * (indices' last dim). */
static void rule_gather_nd(inf *I, const dvmc_node *n) {
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
  set_shape(n->out[0], r, d);
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
static void rule_onehot(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0 || x->rank >= DVM_MAX_RANK || n->nin < 2) return;
  int axis = norm_axis(dvmc_attr_int(n, "axis", -1), x->rank + 1);
  if (axis < 0) return;
  int64_t depth;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0, j = 0; i <= x->rank; i++)
    d[i] = i != axis ? x->dims[j++] : const_number(n->in[1], &depth) && depth > 0 ? dvmc_const(I->x, depth) : data_dim(I, "depth");
  set_shape(n->out[0], x->rank + 1, d);
}

/* Compress, Unique: the count of what they keep is read at run time. */
static void rule_compress(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  if (!dvmc_attr_find(n, "axis")) {
    d[0] = data_dim(I, "count");
    set_shape(n->out[0], 1, d);
    return;
  }
  int axis = norm_axis(dvmc_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return;
  for (int i = 0; i < x->rank; i++) d[i] = i == axis ? data_dim(I, "count") : x->dims[i];
  set_shape(n->out[0], x->rank, d);
}

static void rule_unique(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0];
  if (!x || x->rank < 0) return;
  const dvmc_expr *u = data_dim(I, "unique"), *d[DVM_MAX_RANK], *all = NULL;
  int axis = -1;
  if (dvmc_attr_find(n, "axis") && (axis = norm_axis(dvmc_attr_int(n, "axis", 0), x->rank)) < 0) return;
  if (axis < 0) {
    all = dvmc_const(I->x, 1);
    for (int i = 0; i < x->rank && all; i++) all = x->dims[i] ? dvmc_mul(I->x, all, x->dims[i]) : NULL;
    set_shape(n->out[0], 1, &u);
  } else {
    for (int i = 0; i < x->rank; i++) d[i] = i == axis ? u : x->dims[i];
    set_shape(n->out[0], x->rank, d);
    all = x->dims[axis];
  }
  for (int i = 1; i < n->nout; i++) set_shape(n->out[i], 1, i == 2 ? &all : &u);
}

/* NonMaxSuppression: [selected, 3]. */
static void rule_nms(inf *I, const dvmc_node *n) {
  const dvmc_expr *d[2] = {data_dim(I, "selected"), dvmc_const(I->x, 3)};
  set_shape(n->out[0], 2, d);
}

/* Einsum without ellipses: each letter's dim from the inputs that name it
 * (repeated ones must be equal), the output's from its letters (implicit:
 * the letters named once, in alphabetical order). */
static void rule_einsum(inf *I, const dvmc_node *n) {
  const char *eq = dvmc_attr_string(n, "equation", NULL);
  if (!eq || strstr(eq, "...")) return;
  const dvmc_expr *dim[128] = {0};
  int count[128] = {0}, in = 0, pos = 0;
  const char *p = eq;
  for (; *p && !(p[0] == '-' && p[1] == '>'); p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == ',') {
      if (in >= n->nin || !n->in[in] || n->in[in]->rank != pos) return;
      in++, pos = 0;
    } else if (ch < 128 && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) {
      const dvmc_value *v = in < n->nin ? n->in[in] : NULL;
      if (!v || pos >= v->rank || !v->dims[pos]) return;
      if (dim[ch] && dim[ch] != v->dims[pos]) require_equal(I, n, dim[ch], v->dims[pos], "einsum names them with one letter");
      if (!dim[ch]) dim[ch] = v->dims[pos];
      count[ch]++, pos++;
    } else if (ch != ' ') {
      return;
    }
  }
  if (in != n->nin - 1 || !n->in[in] || n->in[in]->rank != pos) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  if (*p) {
    for (p += 2; *p; p++) {
      unsigned char ch = (unsigned char)*p;
      if (ch == ' ') continue;
      if (ch >= 128 || !dim[ch] || r == DVM_MAX_RANK) return;
      d[r++] = dim[ch];
    }
  } else {
    for (int ch = 'A'; ch <= 'z'; ch++)
      if (count[ch] == 1) {
        if (r == DVM_MAX_RANK) return;
        d[r++] = dim[ch];
      }
  }
  set_shape(n->out[0], r, d);
}

static bool same_dims(const dvmc_value *a, const dvmc_value *b) {
  if (!a || !b || a->rank < 0 || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (!a->dims[d] || a->dims[d] != b->dims[d]) return false;
  return true;
}

static void infer_graph(inf *I, dvmc_graph *g);

/* If: an output whose shape both branches agree on has it. */
static void rule_if(inf *I, const dvmc_node *n) {
  const dvmc_attr *t = dvmc_attr_find(n, "then_branch"), *e = dvmc_attr_find(n, "else_branch");
  if (!t || !e || !t->g || !e->g) return;
  for (int i = 0; i < n->nout && i < t->g->noutputs && i < e->g->noutputs; i++)
    if (same_dims(t->g->outputs[i], e->g->outputs[i]))
      set_shape(n->out[i], t->g->outputs[i]->rank, t->g->outputs[i]->dims);
}

/* Loop: a loop-carried value whose shape the body keeps has it (the body
 * is inferred with its inputs at the initial values' shapes; an input
 * whose shape the body changes is inferred again as unknown); a scan
 * output is [trip count, its per-iteration shape], the trip count read at
 * run time at top level. */
static void rule_loop(inf *I, const dvmc_node *n) {
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  dvmc_graph *g = b ? b->g : NULL;
  int carried = n->nin - 2;
  if (!g || carried < 0 || g->ninputs != carried + 2 || g->noutputs < carried + 1) return;
  for (int pass = 0; pass < 2; pass++) {
    int again = 0;
    for (int k = 0; k < carried; k++) {
      const dvmc_value *body_out = g->outputs[k + 1];
      dvmc_value *body_in = g->inputs[k + 2];
      if (pass == 0 && n->in[k + 2]) set_shape(body_in, n->in[k + 2]->rank, n->in[k + 2]->dims);
      if (pass == 1 && !same_dims(body_in, body_out)) body_in->rank = -1;
    }
    I->depth++;
    infer_graph(I, g);
    I->depth--;
    for (int k = 0; k < carried; k++) again |= g->inputs[k + 2]->rank >= 0 && !same_dims(g->inputs[k + 2], g->outputs[k + 1]);
    if (!again) break;
    reset_values(g);
  }
  for (int k = 0; k < carried && k < n->nout; k++)
    if (same_dims(g->inputs[k + 2], g->outputs[k + 1])) set_shape(n->out[k], g->inputs[k + 2]->rank, g->inputs[k + 2]->dims);
  const dvmc_expr *trips = NULL;
  for (int k = carried; k < n->nout && k + 1 < g->noutputs; k++) {
    const dvmc_value *o = g->outputs[k + 1];
    if (!dvmc_value_shape_known(o) || o->rank + 1 > DVM_MAX_RANK) continue;
    if (!trips && !(trips = data_dim(I, "trips"))) return;
    const dvmc_expr *d[DVM_MAX_RANK];
    d[0] = trips;
    for (int i = 0; i < o->rank; i++) d[i + 1] = o->dims[i];
    set_shape(n->out[k], o->rank + 1, d);
  }
}

/* x's dims without axes a and b (-1: none); the rank left. */
static int dims_without(const dvmc_value *x, int a, int b, const dvmc_expr **d) {
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (i != a && i != b) d[r++] = x->dims[i];
  return r;
}

/* Scan: the body is inferred with its state inputs at the initial states'
 * shapes (again, as unknown, where the body changes them, as Loop's) and
 * its scan inputs at the scan inputs' shapes less their scan axis; a final
 * state whose shape the body keeps has it, a scan output is the body's
 * with the scan length inserted at its axis. Opset 8 has a batch axis 0 on
 * every input and output (after its sequence_lens input) and scans axis 1. */
static void rule_scan(inf *I, const dvmc_node *n) {
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  dvmc_graph *g = b ? b->g : NULL;
  int v8 = n->opset < 9, first = v8, m = (int)dvmc_attr_int(n, "num_scan_inputs", 0);
  int ns = n->nin - first - m;
  if (!g || m <= 0 || ns < 0 || g->ninputs != ns + m || g->noutputs < ns) return;
  const dvmc_value *x0 = n->in[first + ns];
  int ax0 = v8 ? 1 : (int)dvmc_attr_ints_at(n, "scan_input_axes", 0, 0);
  if (!x0 || x0->rank < 1) return;
  if (ax0 < 0) ax0 += x0->rank;
  if (ax0 < 0 || ax0 >= x0->rank) return;
  const dvmc_expr *len = x0->dims[ax0], *batch = v8 ? x0->dims[0] : NULL, *d[DVM_MAX_RANK], *d0[DVM_MAX_RANK] = {0};
  for (int pass = 0; pass < 2; pass++) {
    int again = 0;
    for (int k = 0; k < ns + m; k++) {
      const dvmc_value *x = n->in[first + k];
      dvmc_value *in = g->inputs[k];
      if (pass == 1) { /* a state whose dims the body changes: unknown dims, or rank */
        if (k < ns && !same_dims(in, g->outputs[k])) {
          if (in->rank == g->outputs[k]->rank) set_shape(in, in->rank, d0);
          else in->rank = -1;
        }
        continue;
      }
      if (!x || x->rank < 0) continue;
      int a = k < ns ? (v8 ? 0 : -1) : (v8 ? 1 : (int)dvmc_attr_ints_at(n, "scan_input_axes", k - ns, 0));
      if (a < -1 || (k >= ns && a < 0)) a += x->rank;
      if (k >= ns && (a < 0 || a >= x->rank)) continue;
      set_shape(in, dims_without(x, v8 ? 0 : -1, a, d), d);
    }
    I->depth++;
    infer_graph(I, g);
    I->depth--;
    for (int k = 0; k < ns; k++) again |= dvmc_value_shape_known(g->inputs[k]) && !same_dims(g->inputs[k], g->outputs[k]);
    if (!again) break;
    reset_values(g);
  }
  for (int k = 0; k < n->nout && k < g->noutputs; k++) {
    const dvmc_value *o = g->outputs[k];
    int r = o->rank + (k >= ns) + v8;
    if (!n->out[k] || o->rank < 0 || r > DVM_MAX_RANK) continue;
    if (k < ns && !same_dims(g->inputs[k], o)) {
      if (g->inputs[k]->rank == o->rank) set_rank(n->out[k], r);
      continue;
    }
    int a = k < ns ? -1 : v8 ? 1 : (int)dvmc_attr_ints_at(n, "scan_output_axes", k - ns, 0);
    if (k >= ns && a < 0) a += r;
    if (k >= ns && (a < v8 || a >= r)) continue;
    for (int i = 0, j = 0; i < r; i++)
      d[i] = v8 && i == 0 ? batch : i == a ? len : o->dims[j++];
    set_shape(n->out[k], r, d);
  }
}

/* TfIdfVectorizer: [C] -> [size], [B, C] -> [B, size], size one more
 * than the largest of ngram_indexes. */
static void rule_tfidf(inf *I, const dvmc_node *n) {
  const dvmc_attr *idx = dvmc_attr_find(n, "ngram_indexes");
  const dvmc_value *x = n->in[0];
  if (!idx || idx->type != DVMC_ATTR_INTS || !x || x->rank < 0 || x->rank > 2) return;
  int64_t size = 0;
  for (int i = 0; i < idx->n; i++)
    if (idx->ints[i] >= size) size = idx->ints[i] + 1;
  const dvmc_expr *d[2] = {x->rank == 2 ? x->dims[0] : NULL, dvmc_const(I->x, size)};
  if (x->rank == 2) set_shape(n->out[0], 2, d);
  else set_shape(n->out[0], 1, d + 1);
}

/* SequenceLength, OptionalHasElement: a scalar. */
static void rule_scalar(inf *I, const dvmc_node *n) {
  (void)I;
  set_shape(n->out[0], 0, NULL);
}

/* SequenceMap: its body sees an item of each sequence input (a tensor of
 * a shape known at run time only, whatever the body declares) and each
 * tensor input as it is; its outputs are sequences (no shape). */
static void rule_sequence_map(inf *I, const dvmc_node *n) {
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  dvmc_graph *g = b ? b->g : NULL;
  if (!g || g->ninputs != n->nin) return;
  for (int k = 0; k < n->nin; k++) {
    if (!n->in[k]) continue;
    if (n->in[k]->kind == DVMC_TENSOR) set_shape(g->inputs[k], n->in[k]->rank, n->in[k]->dims);
    else g->inputs[k]->rank = -1;
  }
  I->depth++;
  infer_graph(I, g);
  I->depth--;
}

/* LinearAttention: output [B, T, Hq dv] and present_state [B, Hkv, dk,
 * dv] from query [B, T, Hq dk], value [B, T, Hkv dv] and the head counts. */
static void rule_linear_attention(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *v = n->nin > 2 ? n->in[2] : NULL;
  int64_t hq = dvmc_attr_int(n, "q_num_heads", 0), hkv = dvmc_attr_int(n, "kv_num_heads", 0);
  set_rank(n->out[0], 3);
  if (n->nout > 1) set_rank(n->out[1], 4);
  if (!q || !v || q->rank != 3 || v->rank != 3 || hq <= 0 || hkv <= 0 || !q->dims[2] || !v->dims[2]) return;
  const dvmc_expr *dk = dvmc_floordiv(I->x, q->dims[2], dvmc_const(I->x, hq));
  const dvmc_expr *dv = dvmc_floordiv(I->x, v->dims[2], dvmc_const(I->x, hkv));
  set_shape(n->out[0], 3, (const dvmc_expr *[]){q->dims[0], q->dims[1], dvmc_mul(I->x, dv, dvmc_const(I->x, hq))});
  if (n->nout > 1) set_shape(n->out[1], 4, (const dvmc_expr *[]){q->dims[0], dvmc_const(I->x, hkv), dk, dv});
}

/* CausalConvWithState: output as input [B, C, L]; present_state [B, C,
 * K-1] with K weight [C, 1, K]'s last dim. */
static void rule_causal_conv(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL;
  same_shape(n, 0);
  if (n->nout < 2) return;
  set_rank(n->out[1], 3);
  if (!x || !w || x->rank != 3 || w->rank != 3 || !w->dims[2]) return;
  set_shape(n->out[1], 3, (const dvmc_expr *[]){x->dims[0], x->dims[1], dvmc_add(I->x, w->dims[2], dvmc_const(I->x, -1))});
}

/* MatMulNBits: A's shape with its last dim N. */
static void rule_matmul_nbits(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0];
  if (!a || a->rank < 1) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < a->rank; i++) d[i] = a->dims[i];
  d[a->rank - 1] = dvmc_const(I->x, dvmc_attr_int(n, "N", 0));
  set_shape(n->out[0], a->rank, d);
}

/* GatherBlockQuantized (gather_axis 0, the only one taken): indices'
 * dims, then data's after the first, the last times the codes per byte. */
static void rule_gather_block_quantized(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *idx = n->nin > 1 ? n->in[1] : NULL;
  int64_t bits = dvmc_attr_int(n, "bits", 4);
  if (!x || !idx || x->rank < 2 || idx->rank < 0 || x->rank + idx->rank - 1 > DVM_MAX_RANK ||
      norm_axis(dvmc_attr_int(n, "gather_axis", 0), x->rank) != 0 || (bits != 4 && bits != 8))
    return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  for (int i = 0; i < idx->rank; i++) d[r++] = idx->dims[i];
  for (int i = 1; i < x->rank; i++) d[r++] = x->dims[i];
  if (d[r - 1]) d[r - 1] = dvmc_mul(I->x, d[r - 1], dvmc_const(I->x, 8 / bits));
  set_shape(n->out[0], r, d);
}

/* DynamicQuantizeLinear: y as x; its scale and zero point are scalars. */
static void rule_dynamic_quantize(inf *I, const dvmc_node *n) {
  (void)I;
  same_shape(n, 0);
  for (int i = 1; i < n->nout; i++) set_shape(n->out[i], 0, NULL);
}

/* QLinearMatMul and QLinearConv: MatMul's and Conv's rules on a and b (x
 * and w), which sit at inputs 0 and 3 between their scales and zero
 * points. */
static void on_operands(inf *I, const dvmc_node *n, void (*rule)(inf *, const dvmc_node *)) {
  if (n->nin < 4) return;
  dvmc_value *ops[2] = {n->in[0], n->in[3]};
  dvmc_node m = *n;
  m.in = ops;
  m.nin = 2;
  rule(I, &m);
}
static void rule_qlinear_matmul(inf *I, const dvmc_node *n) { on_operands(I, n, rule_matmul); }
static void rule_qlinear_conv(inf *I, const dvmc_node *n) { on_operands(I, n, rule_conv); }

/* com.microsoft SkipLayerNormalization: the output and the sum (output 3)
 * as the input. */
static void rule_skip_layernorm(inf *I, const dvmc_node *n) {
  (void)I;
  same_shape(n, 0);
  if (n->nout > 3 && n->in[0]) set_shape(n->out[3], n->in[0]->rank, n->in[0]->dims);
}

/* com.microsoft EmbedLayerNormalization: [B, S, H] from the ids and the
 * word table, mask_index [B]; the embedding sum (output 2) as output 0. */
static void rule_embed_layernorm(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *ids = n->in[0], *word = n->nin > 2 ? n->in[2] : NULL;
  if (!ids || !word || ids->rank != 2 || word->rank != 2) return;
  const dvmc_expr *d[3] = {ids->dims[0], ids->dims[1], word->dims[1]};
  for (int i = 0; i < n->nout; i++) set_shape(n->out[i], i == 1 ? 1 : 3, d);
}

/* com.microsoft Attention: [B, S, H] from x [B, S, Hin] and the packed
 * weights [Hin, 3H]. */
static void rule_attention(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL;
  int64_t h3;
  if (!x || !w || x->rank != 3 || w->rank != 2 || !w->dims[1] || !dvmc_expr_is_const(w->dims[1], &h3) || h3 % 3) return;
  const dvmc_expr *d[3] = {x->dims[0], x->dims[1], dvmc_const(I->x, h3 / 3)};
  set_shape(n->out[0], 3, d);
}

/* com.microsoft MultiHeadAttention: y [B, S, N dv] from 3-D query [B, S,
 * N dh] and value [B, L, N dv] (or 4-D [B, N, L, dv]); present_key and
 * present_value [B, N, P + L, dh or dv] (P from past_key, when given); qk
 * [B, N, S, P + L]. A dim inference cannot tell is left to the shape
 * function. */
static void rule_mha(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *k = n->nin > 1 ? n->in[1] : NULL, *v = n->nin > 2 ? n->in[2] : NULL;
  const dvmc_value *past = n->nin > 6 ? n->in[6] : NULL;
  for (int i = 1; i < n->nout && i < 4; i++) set_rank(n->out[i], 4);
  int64_t heads = dvmc_attr_int(n, "num_heads", 0);
  if (!q || !k || !v || q->rank != 3 || (v->rank != 3 && v->rank != 4) || k->rank != v->rank || heads <= 0) return;
  if (past && past->rank != 4) return;
  int four = v->rank == 4;
  const dvmc_expr *N = dvmc_const(I->x, heads), *l = k->dims[four ? 2 : 1];
  const dvmc_expr *dh = q->dims[2] ? dvmc_floordiv(I->x, q->dims[2], N) : NULL;
  const dvmc_expr *dv = four ? v->dims[3] : v->dims[2] ? dvmc_floordiv(I->x, v->dims[2], N) : NULL;
  const dvmc_expr *t = l && (!past || past->dims[2]) ? past ? dvmc_add(I->x, past->dims[2], l) : l : NULL;
  const dvmc_expr *outs[4][4] = {{q->dims[0], q->dims[1], four ? (dv ? dvmc_mul(I->x, N, dv) : NULL) : v->dims[2]},
                                 {q->dims[0], N, t, dh}, {q->dims[0], N, t, dv}, {q->dims[0], N, q->dims[1], t}};
  for (int i = 0; i < n->nout && i < 4; i++) {
    int r = i ? 4 : 3, all = 1;
    for (int d = 0; d < r; d++) all &= outs[i][d] != NULL;
    if (all) set_shape(n->out[i], r, outs[i]);
  }
}

/* com.microsoft GroupQueryAttention: output [B, S, Hq D] (query's shape,
 * or its Hq parts of packed QKV); present_key and present_value [B, Hkv,
 * max(P, T), D], P past_key's length (0 without one) and T the value of
 * total_sequence_length where inference knows it as an expression (the
 * builder's graph takes it from attention_mask's shape), else left to the
 * shape function. When past and present share one buffer, as a generator
 * binds them, T <= P, so the memory plan bounds a step by the cache's
 * length. */
static void rule_gqa(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *past = n->nin > 3 ? n->in[3] : NULL, *total = n->nin > 6 ? n->in[6] : NULL;
  int64_t hq = dvmc_attr_int(n, "num_heads", 0), hkv = dvmc_attr_int(n, "kv_num_heads", 0), w;
  int packed = n->nin < 2 || !n->in[1];
  for (int i = 0; i < n->nout && i < 3; i++) set_rank(n->out[i], i ? 4 : 3);
  if (!q || q->rank != 3 || hq <= 0 || hkv <= 0 || !q->dims[2] || !dvmc_expr_is_const(q->dims[2], &w)) return;
  int64_t d = w / (packed ? hq + 2 * hkv : hq);
  const dvmc_expr *t = total && dvmc_value_elems_known(total) && total->nelems == 1 ? total->elems[0] : NULL;
  if (t && past) t = past->rank == 4 && past->dims[2] ? dvmc_max(I->x, past->dims[2], t) : NULL;
  const dvmc_expr *y[3] = {q->dims[0], q->dims[1], dvmc_const(I->x, hq * d)};
  const dvmc_expr *kv[4] = {q->dims[0], dvmc_const(I->x, hkv), t, dvmc_const(I->x, d)};
  if (n->nout) set_shape(n->out[0], 3, y);
  for (int i = 1; i < n->nout && i < 3; i++) set_shape(n->out[i], 4, kv);
}

/* ONNX Attention: Y as Q with V's head size; present_key and
 * present_value [B, Hkv, P + Skv, head size] (P from past_key, when
 * given); qk_matmul_output [B, Hq, Sq, P + Skv]. 3-D Q, K, V are
 * [B, S, heads * head size], the heads from q_num_heads and kv_num_heads.
 * A dim inference cannot tell is left to the shape function. */
static void rule_sdpa(inf *I, const dvmc_node *n) {
  const dvmc_value *q = n->in[0], *k = n->nin > 1 ? n->in[1] : NULL, *v = n->nin > 2 ? n->in[2] : NULL;
  const dvmc_value *past = n->nin > 4 ? n->in[4] : NULL;
  static const int ranks[4] = {-1, 4, 4, 4};
  for (int i = 0; i < n->nout && i < 4; i++) set_rank(n->out[i], i ? ranks[i] : q ? q->rank : -1);
  if (!q || !k || !v || (q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank) return;
  if (past && past->rank != 4) return;
  int four = q->rank == 4;
  int64_t qh = dvmc_attr_int(n, "q_num_heads", 0), kvh = dvmc_attr_int(n, "kv_num_heads", 0);
  if (!four && (qh <= 0 || kvh <= 0)) return;
  const dvmc_expr *hq = four ? q->dims[1] : dvmc_const(I->x, qh), *hkv = four ? k->dims[1] : dvmc_const(I->x, kvh);
  const dvmc_expr *skv = k->dims[four ? 2 : 1], *dh = k->dims[four ? 3 : 2], *dv = v->dims[four ? 3 : 2];
  if (!four) {
    dh = dh ? dvmc_floordiv(I->x, dh, hkv) : NULL;
    dv = dv ? dvmc_floordiv(I->x, dv, hkv) : NULL;
  }
  const dvmc_expr *t = skv && (!past || past->dims[2]) ? past ? dvmc_add(I->x, past->dims[2], skv) : skv : NULL;
  const dvmc_expr *y[4] = {q->dims[0], q->dims[1], four ? q->dims[2] : dv ? dvmc_mul(I->x, hq, dv) : NULL, four ? dv : NULL};
  const dvmc_expr *outs[4][4] = {{0}, {q->dims[0], hkv, t, dh}, {q->dims[0], hkv, t, dv},
                                 {q->dims[0], hq, q->dims[four ? 2 : 1], t}};
  for (int i = 0; i < 4; i++) outs[0][i] = y[i];
  for (int i = 0; i < n->nout && i < 4; i++) {
    int r = i ? 4 : q->rank, all = 1;
    for (int d = 0; d < r; d++) all &= outs[i][d] != NULL;
    if (all) set_shape(n->out[i], r, outs[i]);
  }
}

/* com.microsoft FusedMatMul: MatMul's rule on the operands with their
 * last two dims swapped where transA or transB says. */
static void rule_fused_matmul(inf *I, const dvmc_node *n) {
  if (n->nin < 2 || !n->in[0] || !n->in[1]) return;
  dvmc_value ops[2] = {*n->in[0], *n->in[1]};
  dvmc_value *p[2] = {&ops[0], &ops[1]};
  for (int k = 0; k < 2; k++) {
    if (!dvmc_attr_int(n, k ? "transB" : "transA", 0)) continue;
    if (ops[k].rank < 2) return;
    const dvmc_expr *t = ops[k].dims[ops[k].rank - 1];
    ops[k].dims[ops[k].rank - 1] = ops[k].dims[ops[k].rank - 2];
    ops[k].dims[ops[k].rank - 2] = t;
  }
  dvmc_node m = *n;
  m.in = p;
  m.nin = 2;
  rule_matmul(I, &m);
}

/* RNN, GRU, LSTM (and DynamicQuantizeLSTM): Y [seq, dirs, batch, hidden]
 * and the states [dirs, batch, hidden] (layout 1: batch first), seq, batch
 * from X, dirs from W (or the direction), hidden from R (or hidden_size). */
static void rule_rnn(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *w = n->nin > 1 ? n->in[1] : NULL, *r = n->nin > 2 ? n->in[2] : NULL;
  if (!x || x->rank != 3) return;
  int layout = dvmc_attr_int(n, "layout", 0) != 0;
  const char *dir = dvmc_attr_string(n, "direction", "forward");
  int64_t hs = dvmc_attr_int(n, "hidden_size", 0);
  const dvmc_expr *seq = x->dims[layout ? 1 : 0], *batch = x->dims[layout ? 0 : 1];
  const dvmc_expr *dirs = w && w->rank == 3 && w->dims[0] ? w->dims[0] : dvmc_const(I->x, strcmp(dir, "bidirectional") ? 1 : 2);
  int hd = strcmp(n->op, "DynamicQuantizeLSTM") ? 2 : 1; /* its R is [dirs, hidden, 4 hidden] */
  const dvmc_expr *hidden = r && r->rank == 3 && r->dims[hd] ? r->dims[hd] : hs > 0 ? dvmc_const(I->x, hs) : NULL;
  const dvmc_expr *y[4] = {seq, dirs, batch, hidden}, *s[3] = {dirs, batch, hidden};
  if (layout) y[0] = batch, y[1] = seq, y[2] = dirs, s[0] = batch, s[1] = dirs;
  set_rank(n->out[0], 4);
  if (seq && batch && hidden) set_shape(n->out[0], 4, y);
  for (int i = 1; i < n->nout; i++) {
    set_rank(n->out[i], 3);
    if (batch && hidden) set_shape(n->out[i], 3, s);
  }
}

typedef void (*shape_rule)(inf *I, const dvmc_node *n);
#define rule__ NULL
static const shape_rule rules[] = {
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) rule_##shape,
#include "ops.def"
#undef OP
};

/* ---- the pass ---- */

static void infer_node(inf *I, const dvmc_node *n) {
  for (int i = 0; i < n->nin; i++)
    if (n->in[i]) const_elems(I, n->in[i]);
  if (!n->nout || !n->out[0]) return;
  int loop = n->def && (rules[dvmc_op_index(n->def)] == rule_loop || rules[dvmc_op_index(n->def)] == rule_scan ||
                          rules[dvmc_op_index(n->def)] == rule_sequence_map);
  I->depth++; /* subgraphs first: If's and Loop's outputs come from them */
  for (int a = 0; a < n->nattrs && !loop; a++)
    if (n->attrs[a].type == DVMC_ATTR_GRAPH && n->attrs[a].g) infer_graph(I, n->attrs[a].g);
  I->depth--;
  if (n->def && rules[dvmc_op_index(n->def)]) rules[dvmc_op_index(n->def)](I, n);
  /* at top level a dim no rule can tell is a symbol read from the output
   * once the node has run (lower_values.c), so what follows is arithmetic on it */
  for (int i = 0; i < n->nout && I->depth == 0; i++)
    for (int d = 0; n->out[i] && d < n->out[i]->rank; d++)
      if (!n->out[i]->dims[d]) n->out[i]->dims[d] = data_dim(I, "d");
  for (int i = 0; i < n->nout; i++) {
    dvm_dtype dt;
    bool known;
    if (n->out[i]) n->out[i]->kind = dvmc_op_out_kind(n, i);
    dvm_status *st = n->out[i] && !n->out[i]->typed ? dvmc_op_out_dtype(n, i, &dt, &known) : NULL;
    if (st) dvm_status_free(st); /* a bad "to": lowering reports it */
    else if (n->out[i] && !n->out[i]->typed && known) set_dtype(n->out[i], dt);
  }
}

static void infer_graph(inf *I, dvmc_graph *g) {
  for (int i = 0; i < g->nvalues; i++) const_elems(I, g->values[i]);
  for (int i = 0; i < g->nnodes; i++) infer_node(I, g->nodes[i]);
}

/* Forgets what inference found (node outputs that are not constants), so
 * it can run again after unification. */
static void reset_graph(dvmc_graph *g) {
  reset_values(g);
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

/* Why node n's outputs are unknown while its inputs are known, or NULL
 * when they are known or the loss came from an input. */
static const char *lost_at(const dvmc_node *n) {
  int out_unknown = 0;
  for (int i = 0; i < n->nout; i++)
    out_unknown |= n->out[i] && n->out[i]->kind == DVMC_TENSOR && !dvmc_value_shape_known(n->out[i]);
  if (!out_unknown) return NULL;
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && !dvmc_value_shape_known(n->in[i])) return NULL;
  if (!n->def) return "dvm does not know this op";
  if (!n->def->shape_rule) return "the op has no symbolic shape rule";
  static const char *const data_ops[] = {"NonZero", "TopK", "Range", "OneHot", "Compress", "Unique", "NonMaxSuppression", NULL};
  if (is(n, data_ops))
    return "its output's size depends on data (inside a branch or loop body)";
  for (int i = 1; i < n->nin; i++) {
    const dvmc_value *v = n->in[i];
    if (v && v->typed && (v->dtype == DVM_I64 || v->dtype == DVM_I32) && !dvmc_value_elems_known(v))
      return "an integer input it reads (shape, axes, sizes) is computed from data";
  }
  return "its rule cannot tell from these attributes and inputs";
}

int dvmc_infer_unknown(dvmc_graph *g, int *total, const dvmc_node **first) {
  int unknown = 0;
  *total = 0;
  *first = NULL;
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *n = g->nodes[i];
    n->shape_lost = lost_at(n);
    if (n->shape_lost && !*first) *first = n;
    for (int k = 0; k < n->nout; k++) /* sequences and optionals have no shape to know */
      if (n->out[k] && n->out[k]->kind == DVMC_TENSOR) ++*total, unknown += !dvmc_value_shape_known(n->out[k]);
  }
  return unknown;
}

dvm_status *dvmc_infer(dvmc_ctx *c, dvmc_graph *g) {
  inf I = {c, c->exprs, g, 0, 0, 0};
  for (;;) {
    I.narrowed = 0;
    infer_graph(&I, g);
    if (I.oom) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    int changed;
    dvm_status *st = unify(&I, g, &changed);
    if (st) return st;
    if (!changed && !I.narrowed) return NULL;
    /* start again from the inputs; the relations found are found again */
    int kept = 0;
    for (int i = 0; i < g->nconstraints; i++)
      if (g->constraints[i].unified) g->constraints[kept++] = g->constraints[i];
    g->nconstraints = kept;
    reset_graph(g);
  }
}
