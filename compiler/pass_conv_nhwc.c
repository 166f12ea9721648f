/* Activations kept channels last (NHWC) between convolutions.
 *
 * oneDNN's fast f32 convolutions (brgconv, brdgmm_dw, the blocked 1x1)
 * read and write NHWC; dvm's tensors are NCHW, so every conv reordered X
 * in and Y out (16-24% of the convolutions' time, docs/performance.md).
 * The pass finds the values that can be kept channels last — a region
 * whose edges are convolutions — and rewrites what makes and reads them:
 *
 *   y = Conv|FusedConv(x, W[, B[, Z]])   ->  y = FusedConv(...) {dvm_layout |= 2}
 *   z = Conv|FusedConv(y, W2[, B2])      ->  z = FusedConv(y, ...) {dvm_layout |= 1}
 *   u = FusedConv(v, W3, B3, y)          ->  u = FusedConv(v, W3, B3, y) {dvm_layout |= 4}
 *
 * the producer writes y channels last and every reader reads it so
 * (fused_conv's layout attribute, ops/cpu/conv.c); y's dims stay [N, C,
 * s...], only its bytes are ordered [N, s..., C]. A Conv becomes a
 * FusedConv with no activation (the same conv). The pools:
 *
 *   m = MaxPool(y)            ->  m = dvm.MaxPoolNhwc(y)   (m channels last too)
 *   g = GlobalAveragePool(y)  ->  g = dvm.GlobalAveragePoolNhwc(y)
 *
 * (a GlobalAveragePool's [N, C, 1...] output is the same bytes either
 * way). Between convolutions the region also carries the ops that do not
 * care about the order of a tensor's axes once their attributes are
 * permuted: f32 elementwise ops (ops.def's fused-chain ops, HardSigmoid,
 * HardSwish, LeakyRelu, Clip), QuantizeLinear and DequantizeLinear with
 * one scale and zero point (quantize_static's pairs between convolutions:
 * the integers between them are kept channels last too), Concat on the
 * channel axis, and Resize by
 * constant scales of 1 on N and C. Such a node runs on the views of its
 * inputs as [N, s..., C] (dvm.LayoutView: the same bytes with permuted
 * dims, no copy), with Concat's axis the last and Resize's scales
 * permuted, and makes its output in that form; a convolution or pool that
 * reads it gets it back as [N, C, s...] through another view. Operands of
 * an elementwise node outside the region must be one element, or
 * [N, C, 1...] (an SE block's per-channel scale: its [N, 1..., C] view is
 * the same bytes); at least one operand is in the region. PP-OCR's FPN
 * (SE scales, nearest upsampling, the residual Adds, the Concat of its
 * four levels) so runs without reorders.
 *
 * Proven for every value y of the region: y is f32 (or a carried
 * QuantizeLinear's integers) with known dims of
 * rank 3 to 5 (4 where a carried op makes or reads it), not a graph
 * output, made by a convolution, a MaxPool of the region or a carried
 * node, and every one of its uses (counted at import, a subgraph's and
 * the outputs' included) is input 0 (X) or 3 (Z) of a convolution of this
 * graph, input 0 of a pool as above, or a region operand of a carried
 * node; the region shrinks until that holds everywhere. Not carried:
 * other pools, Split, Slice, ConvTranspose, Resize by sizes. */
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "infer.h"
#include "ops.h"
#include "pass.h"

enum { X_LAST = 1, Y_LAST = 2, Z_LAST = 4 };

/* How a carried node reads an input (slot): */
enum { NOT_READ, REGION, PER_CHANNEL, AS_IS };

typedef struct {
  dvmc_ctx *c;
  dvmc_graph *g;
  int nvalues; /* g's values before the pass: those `in` and `twin` cover */
  bool *in;    /* by value id: kept channels last */
  dvmc_value **twin; /* by value id: its [N, s..., C] view, once made */
} region;

/* n is a convolution this pass can give a layout: a default-domain Conv or
 * a com.microsoft FusedConv on f32 X and Y of known ranks 3 to 5. */
static bool conv_node(const dvmc_node *n) {
  if (!n || n->nout != 1 || n->nin < 2 || !n->out[0] || !n->in[0]) return false;
  bool conv = !strcmp(n->op, "Conv") && !n->domain[0];
  bool fused = !strcmp(n->op, "FusedConv") && !strcmp(n->domain, "com.microsoft");
  const dvmc_value *x = n->in[0], *y = n->out[0];
  return (conv || fused) && dvmc_pass_same_shape(x, x) && dvmc_pass_same_shape(y, y) && x->rank >= 3 &&
         x->rank <= 5 && y->rank == x->rank;
}

/* n is a default-domain `op` with input X (f32, rank 3 to 5) and one output. */
static bool one_in_out(const dvmc_node *n, const char *op) {
  return n && !strcmp(n->op, op) && !n->domain[0] && n->nin == 1 && n->in[0] && n->out[0] &&
         (n->nout == 1 || (n->nout == 2 && !n->out[1])) && dvmc_pass_same_shape(n->in[0], n->in[0]) &&
         n->in[0]->rank >= 3 && n->in[0]->rank <= 5;
}

/* v is typed (any dtype), of rank 4, its dims known. */
static bool known4(const dvmc_value *v) { return v && v->typed && dvmc_value_shape_known(v) && v->rank == 4; }

/* A QuantizeLinear or DequantizeLinear with one scale (and zero point) for
 * the whole tensor: elementwise whatever the order of x's axes. */
static bool qdq_node(const dvmc_node *n) {
  if ((strcmp(n->op, "QuantizeLinear") && strcmp(n->op, "DequantizeLinear")) || n->nin < 2 ||
      dvmc_attr_int(n, "block_size", 0) || !known4(n->in[0]) || !known4(n->out[0]))
    return false;
  for (int j = 1; j < n->nin; j++) {
    const dvmc_value *v = n->in[j];
    int64_t d;
    if (!v || !dvmc_value_shape_known(v) || v->rank > 1 ||
        (v->rank == 1 && (!dvmc_expr_is_const(v->dims[0], &d) || d != 1)))
      return false;
  }
  return true;
}

/* An elementwise op: a fused-chain op (ops.def's FUSED column) or an
 * activation on f32, or a per-tensor QuantizeLinear or DequantizeLinear. */
static bool elementwise(const dvmc_node *n) {
  static const char *const more[] = {"HardSigmoid", "HardSwish", "LeakyRelu", "Clip"};
  if (!n->def || n->domain[0] || n->nout != 1 || !n->out[0]) return false;
  if (n->def->fused >= 0 || qdq_node(n)) return true;
  for (size_t i = 0; i < sizeof more / sizeof *more; i++)
    if (!strcmp(n->op, more[i])) return true;
  return false;
}

static bool concat_node(const dvmc_node *n) {
  int64_t axis = dvmc_attr_int(n, "axis", 0);
  return !strcmp(n->op, "Concat") && !n->domain[0] && n->nout == 1 && n->out[0] && n->nin > 0 &&
         (axis == 1 || axis == -3);
}

/* Resize of a 4-D X by constant f32 scales [1, 1, sh, sw] (sizes absent,
 * no axes), in any mode but tf_crop_and_resize (the only one reading roi). */
static bool resize_node(const dvmc_node *n) {
  if (strcmp(n->op, "Resize") || n->domain[0] || n->nout != 1 || !n->out[0] || n->nin < 3 || n->nin > 4 ||
      !n->in[0] || (n->nin == 4 && n->in[3]) || dvmc_attr_find(n, "axes") ||
      !strcmp(dvmc_attr_string(n, "coordinate_transformation_mode", ""), "tf_crop_and_resize"))
    return false;
  const dvmc_tensor *s = n->in[2] ? n->in[2]->constant : NULL;
  if (!s || s->dtype != DVM_F32 || s->rank != 1 || s->dims[0] != 4) return false;
  const float *f = s->data;
  return f[0] == 1 && f[1] == 1;
}

static bool carried(const dvmc_node *n) { return n && (elementwise(n) || concat_node(n) || resize_node(n)); }

static bool kept(const region *R, const dvmc_value *v) {
  return v && v->id >= 0 && v->id < R->nvalues && R->g->values[v->id] == v && R->in[v->id];
}

/* v has known dims, those from index `from` on all 1. */
static bool ones_from(const dvmc_value *v, int from) {
  if (!v || !dvmc_value_shape_known(v)) return false;
  for (int d = from; d < v->rank; d++) {
    int64_t k;
    if (!dvmc_expr_is_const(v->dims[d], &k) || k != 1) return false;
  }
  return true;
}

/* How carried node n reads input j. */
static int slot(const region *R, const dvmc_node *n, int j) {
  const dvmc_value *v = n->in[j];
  if (resize_node(n)) return j ? AS_IS : kept(R, v) ? REGION : NOT_READ;
  if (!v) return AS_IS; /* an omitted optional input (Clip's bounds) */
  if (n->out[0]->rank != 4) return NOT_READ;
  if (kept(R, v)) return v->rank == 4 ? REGION : NOT_READ; /* (a 1-D or 3-D conv's output: another view) */
  if (concat_node(n)) return NOT_READ;
  if (ones_from(v, 0) && v->rank <= 4) return AS_IS;
  return dvmc_pass_same_shape(v, v) && v->rank == 4 && ones_from(v, 2) ? PER_CHANNEL : NOT_READ;
}

/* Carried node n runs channels last: its output is in the region, it reads
 * each input somehow and at least one from the region. */
static bool node_on(const region *R, const dvmc_node *n) {
  if (!carried(n) || !kept(R, n->out[0]) || n->out[0]->rank != 4) return false;
  int from_region = 0;
  for (int j = 0; j < n->nin; j++) {
    int s = slot(R, n, j);
    if (s == NOT_READ) return false;
    from_region += s == REGION;
  }
  return from_region > 0;
}

/* Node n may read region value v as its input j. */
static bool use_ok(const region *R, const dvmc_node *n, int j) {
  if (conv_node(n)) return j == 0 || j == 3;
  if (one_in_out(n, "MaxPool")) return kept(R, n->out[0]);
  if (one_in_out(n, "GlobalAveragePool")) return true;
  return node_on(R, n) && slot(R, n, j) == REGION;
}

/* v's maker writes it channels last and every reader reads it so. */
static bool value_ok(const region *R, const dvmc_value *v) {
  const dvmc_node *p = v->producer;
  if (!(conv_node(p) || (one_in_out(p, "MaxPool") && kept(R, p->in[0])) || node_on(R, p))) return false;
  int uses = 0;
  for (int i = 0; i < R->g->nnodes; i++) {
    const dvmc_node *n = R->g->nodes[i];
    for (int j = 0; n && j < n->nin; j++) {
      if (n->in[j] != v) continue;
      if (!use_ok(R, n, j)) return false;
      uses++;
    }
  }
  return uses > 0 && uses == v->uses;
}

/* The values that may be kept channels last at all: f32 of known rank 3
 * to 5, made in g by a convolution, a MaxPool or a carried node. */
static bool candidate(const dvmc_graph *g, const dvmc_value *v) {
  const dvmc_node *p = v->producer;
  if (!p || p->id < 0 || p->id >= g->nnodes || g->nodes[p->id] != p || p->out[0] != v) return false;
  if (!strcmp(p->op, "QuantizeLinear")) return carried(p); /* its integers */
  return dvmc_pass_same_shape(v, v) && v->rank >= 3 && v->rank <= 5 &&
         (conv_node(p) || one_in_out(p, "MaxPool") || (carried(p) && v->rank == 4));
}

/* The largest region: start from every candidate, drop what breaks. */
static void solve(region *R) {
  for (int i = 0; i < R->nvalues; i++) R->in[i] = candidate(R->g, R->g->values[i]);
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < R->nvalues; i++)
      if (R->in[i] && !value_ok(R, R->g->values[i])) R->in[i] = false, changed = true;
  }
}

/* The perm of a view from [N, C, s...] to [N, s..., C] (to_last) or back. */
static int64_t *view_perm(dvmc_ctx *c, int r, bool to_last) {
  int64_t *perm = dvm_arena_alloc(&c->arena, (size_t)r, sizeof *perm);
  if (!perm) return NULL;
  perm[0] = 0;
  for (int d = 1; d < r; d++) perm[d] = to_last ? (d == r - 1 ? 1 : d + 1) : (d == 1 ? r - 1 : d - 1);
  return perm;
}

/* A new value "v:nhwc": v's dtype, its dims as [N, s..., C]. */
static dvmc_value *nhwc_value(region *R, const dvmc_value *v) {
  size_t len = strlen(v->name) + 6;
  char *name = dvm_arena_alloc(&R->c->arena, len, 1);
  int64_t *perm = view_perm(R->c, v->rank, true);
  if (!name || !perm) return NULL;
  snprintf(name, len, "%s:nhwc", v->name);
  dvmc_value *t = dvmc_value_new(R->c, R->g, name);
  if (!t) return NULL;
  t->typed = true;
  t->dtype = v->dtype;
  t->rank = v->rank;
  for (int d = 0; d < v->rank; d++) t->dims[d] = v->dims[perm[d]];
  return t;
}

/* out = dvm.LayoutView(v) in slot `at`: v's bytes with dims permuted to
 * [N, s..., C] (to_last) or back to [N, C, s...]. */
static dvm_status *layout_view(region *R, dvmc_value *v, bool to_last, int at, dvmc_value *out) {
  int64_t *perm = view_perm(R->c, v->rank, to_last);
  if (!perm) return dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
  dvmc_attr a = {.name = "perm", .type = DVMC_ATTR_INTS, .n = v->rank, .ints = perm};
  return dvmc_pass_insert(R->c, R->g, at, "LayoutView", "dvm", &v, 1, out, &a, 1);
}

/* v's [N, s..., C] form: the output of the carried node that makes it, or
 * a view made right after v's maker (first in g where v has none). */
static dvm_status *twin(region *R, dvmc_value *v, dvmc_value **out) {
  if ((*out = R->twin[v->id])) return NULL;
  if (!(*out = R->twin[v->id] = nhwc_value(R, v))) return dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
  return layout_view(R, v, true, v->producer ? v->producer->id + 1 : 0, *out);
}

/* Carried node n (output o, `uses` of them by carried nodes) rewritten to
 * run on the [N, H, W, C] views and make o's; o's other readers
 * (convolutions, pools) get the [N, C, H, W] view of that. */
static dvm_status *carry(region *R, dvmc_node *n, int uses) {
  dvmc_ctx *c = R->c;
  dvmc_value *o = n->out[0], **in = dvm_arena_alloc(&c->arena, (size_t)n->nin, sizeof *in);
  dvmc_attr *attrs = dvm_arena_alloc(&c->arena, (size_t)n->nattrs + 1, sizeof *attrs);
  dvmc_value *t = nhwc_value(R, o);
  if (!in || !attrs || !t) return dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
  dvm_status *st = NULL;
  for (int j = 0; j < n->nin && !st; j++) {
    int s = slot(R, n, j);
    in[j] = n->in[j];
    if (s == REGION || s == PER_CHANNEL) st = twin(R, n->in[j], &in[j]);
  }
  if (st) return st;
  bool concat = concat_node(n);
  int na = 0;
  for (int a = 0; a < n->nattrs; a++)
    if (!concat || strcmp(n->attrs[a].name, "axis")) attrs[na++] = n->attrs[a];
  if (concat) attrs[na++] = (dvmc_attr){.name = "axis", .type = DVMC_ATTR_INT, .i = 3};
  if (resize_node(n)) { /* scales [1, 1, sh, sw] -> [1, sh, sw, 1] */
    const float *f = n->in[2]->constant->data;
    int64_t four = 4;
    dvmc_tensor *s = dvmc_fold_f32(c, 1, &four, 4);
    if (!s || !(in[2] = dvmc_fold_const(c, R->g, n->name, "scales", s)))
      return dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
    float *p = (float *)s->data;
    p[0] = f[0], p[1] = f[2], p[2] = f[3], p[3] = f[1];
  }
  int opset = n->opset;
  if ((st = dvmc_pass_replace_outs(c, R->g, &n, 1, n, n->op, in, n->nin, &t, 1, attrs, na))) return st;
  t->producer->opset = opset;
  R->twin[o->id] = t;
  return o->uses == uses ? NULL : layout_view(R, t, false, t->producer->id + 1, o);
}

dvm_status *dvmc_pass_conv_nhwc(dvmc_ctx *c, dvmc_graph *g, int *count) {
  region R = {.c = c, .g = g, .nvalues = g->nvalues};
  R.in = calloc((size_t)g->nvalues + 1, sizeof *R.in);
  R.twin = calloc((size_t)g->nvalues + 1, sizeof *R.twin);
  int nn = g->nnodes;
  dvmc_node **todo = calloc((size_t)nn + 1, sizeof *todo);
  int *uses = calloc((size_t)g->nvalues + 1, sizeof *uses);
  dvm_status *st = NULL;
  if (!R.in || !R.twin || !todo || !uses) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
    goto out;
  }
  solve(&R);
  int ncarried = 0;
  /* convolutions and pools first, in their slots; then the carried nodes,
   * in order, which insert views (moving the slots on) */
  for (int i = 0; i < nn && !st; i++) {
    dvmc_node *n = g->nodes[i];
    if (!n) continue;
    if (conv_node(n)) {
      int layout = (kept(&R, n->in[0]) ? X_LAST : 0) | (kept(&R, n->out[0]) ? Y_LAST : 0) |
                   (n->nin > 3 && kept(&R, n->in[3]) ? Z_LAST : 0);
      if (layout) st = dvmc_pass_fused_conv(c, g, n, "dvm_layout", layout), ++*count;
    } else if ((one_in_out(n, "MaxPool") && kept(&R, n->out[0])) ||
               (one_in_out(n, "GlobalAveragePool") && kept(&R, n->in[0]))) {
      dvmc_value *out = n->out[0];
      const char *op = !strcmp(n->op, "MaxPool") ? "MaxPoolNhwc" : "GlobalAveragePoolNhwc";
      st = dvmc_pass_replace(c, g, &n, 1, op, n->in, n->nin, out, n->attrs, n->nattrs);
      if (!st) st = dvmc_pass_set_domain(out->producer, "dvm");
      ++*count;
    } else if (node_on(&R, n)) {
      todo[ncarried++] = n;
    }
  }
  /* uses of each value by carried nodes, counted before any is rewritten */
  for (int i = 0; i < ncarried; i++)
    for (int j = 0; j < todo[i]->nin; j++)
      if (slot(&R, todo[i], j) == REGION) uses[todo[i]->in[j]->id]++;
  for (int i = 0; i < ncarried && !st; i++) st = carry(&R, todo[i], uses[todo[i]->out[0]->id]), ++*count;
out:
  free(R.in);
  free(R.twin);
  free(todo);
  free(uses);
  return st;
}
