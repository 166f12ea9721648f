/* Scaled dot-product attention from the ops PyTorch exports it as (Hugging
 * Face's BERT and GPT-2 self-attention at opset 14):
 *
 *   Q = Transpose(Reshape(q, [B, Sq, H, dh]), [0, 2, 1, 3])
 *   Kt = Transpose(Reshape(k, [B, Skv, H, dh]), [0, 2, 3, 1])
 *   V = Transpose(Reshape(v, [B, Skv, H, dv]), [0, 2, 1, 3])
 *   s = MatMul(Q, Kt), scaled: Div or Mul by one-element constants, on the
 *       scores or on Q and Kt before the product
 *   then either or neither of
 *     Where(causal, s, -FLT_MAX or -inf) with causal the top-left corner
 *       (Slices from 0 on the last two axes, through Identity) of a
 *       constant bool [1, 1, N, M] lower triangle (GPT-2's `bias` buffer)
 *     Add(s, mask) with mask f32 [.., Skv] broadcasting to [B, H, Sq, Skv]
 *       (BERT's extended attention mask) — not both
 *   y = Reshape(Transpose(MatMul(Softmax(s, last axis), V), [0, 2, 1, 3]),
 *               [B, Sq, H * dv])
 *
 * becomes y = Attention(q, k, v[, mask]) {q_num_heads = kv_num_heads = H,
 * scale = the product of the constants, is_causal} on the 3-D [B, S,
 * H * d] tensors: the sdpa kernel (ops/cpu/attention.c), which splits the
 * heads itself, keeps one block of query rows' scores in cache at a time
 * and runs the (batch, head, block) tasks on the thread pool, instead of
 * three head transposes, a [B, H, Sq, Skv] score tensor written and read
 * by four ops, and the output transpose. The Reshapes, Transposes and
 * shape arithmetic nothing else reads are dropped with the pattern.
 *
 * Proven: H, dh and dv constants with the 3-D hidden sizes H * dh and
 * H * dv; B, Sq, Skv the same interned expressions on every side; Softmax
 * over the last axis (opset 13 on); the mask's last dim Skv and its others
 * 1 or the scores'; every intermediate of the chain read only inside it.
 * The two differ only in rows with no finite score (an Add mask of -inf
 * everywhere): Softmax gives NaN there, the kernel zeros; the causal rows
 * always keep key 0. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "infer.h"
#include "pass.h"

#define MAX_DEAD 16

typedef struct pattern {
  dvmc_node *dead[MAX_DEAD];
  int n;
  double scale;
} pattern;

/* The readers of v that only take its shape: Shape nodes whose output is
 * known as expressions (lowering never runs them; when the pattern goes,
 * drop_unused takes them with the Reshape sizes they feed). */
static int shape_reads(const dvmc_graph *g, const dvmc_value *v) {
  int n = 0;
  for (int i = 0; v && i < g->nnodes; i++) {
    const dvmc_node *s = g->nodes[i];
    if (s && !strcmp(s->op, "Shape") && !s->domain[0] && s->nin == 1 && s->in[0] == v && s->nout == 1 &&
        dvmc_value_elems_known(s->out[0]))
      n++;
  }
  return n;
}

/* v's producer op read once (besides shape_reads), recorded as dead; NULL
 * when it is not. */
static dvmc_node *take(const dvmc_graph *g, pattern *p, const dvmc_value *v, const char *op) {
  dvmc_node *n = dvmc_pass_only(g, v, op, 1 + shape_reads(g, v));
  if (!n || p->n == MAX_DEAD) return NULL;
  return p->dead[p->n++] = n;
}

static bool is_const(const dvmc_expr *e, int64_t want) {
  int64_t x;
  return e && dvmc_expr_is_const(e, &x) && x == want;
}

/* v is a one-element f32 known before the run: a constant, or the Pow,
 * Sqrt or f32 Cast of such (GPT-2's v.size(-1) ** 0.5, a Cast of the
 * head size that inference knows). */
static bool scalar_of(const dvmc_value *v, float *out, int depth) {
  if (dvmc_pass_scalar(v, out)) return true;
  const dvmc_node *n = v ? v->producer : NULL;
  int64_t x;
  float a, b;
  if (!n || depth > 4 || n->domain[0] || n->nout != 1 || !v->typed || v->dtype != DVM_F32 || v->rank > 1 ||
      (v->rank == 1 && !is_const(v->dims[0], 1)))
    return false;
  if (!strcmp(n->op, "Cast") && n->nin == 1 && n->in[0]->typed && n->in[0]->dtype == DVM_I64 &&
      dvmc_value_elems_known(n->in[0]) && n->in[0]->nelems == 1 && dvmc_expr_is_const(n->in[0]->elems[0], &x))
    return *out = (float)x, true;
  if (!strcmp(n->op, "Sqrt") && n->nin == 1 && scalar_of(n->in[0], &a, depth + 1)) return *out = sqrtf(a), true;
  if (!strcmp(n->op, "Pow") && n->nin == 2 && scalar_of(n->in[0], &a, depth + 1) && scalar_of(n->in[1], &b, depth + 1))
    return *out = powf(a, b), true;
  return false;
}

/* Peels Mul and Div by one-element constants off *v into p->scale. */
static void peel_scale(const dvmc_graph *g, pattern *p, dvmc_value **v) {
  for (;;) {
    dvmc_node *n = dvmc_pass_only(g, *v, "Mul", 1 + shape_reads(g, *v));
    float f;
    if (n && n->nin == 2 && p->n < MAX_DEAD) {
      int k = scalar_of(n->in[1], &f, 0) ? 0 : scalar_of(n->in[0], &f, 0) ? 1 : -1;
      if (k < 0 || !dvmc_pass_same_shape(n->in[k], *v)) return;
      p->dead[p->n++] = n, p->scale *= f, *v = n->in[k];
      continue;
    }
    n = dvmc_pass_only(g, *v, "Div", 1 + shape_reads(g, *v));
    if (!n || n->nin != 2 || p->n == MAX_DEAD || !scalar_of(n->in[1], &f, 0) || f == 0 ||
        !dvmc_pass_same_shape(n->in[0], *v))
      return;
    p->dead[p->n++] = n, p->scale /= f, *v = n->in[0];
  }
}

static bool perm_is(const dvmc_node *n, const int64_t want[4]) {
  const dvmc_attr *a = dvmc_attr_find(n, "perm");
  if (!a || a->type != DVMC_ATTR_INTS || a->n != 4) return false;
  for (int i = 0; i < 4; i++)
    if (a->ints[i] != want[i]) return false;
  return true;
}

/* The heads of a 3-D f32 tensor: t is Transpose(Reshape(x, [B, S, H, d]),
 * perm) read only there; *x, *heads, *size. The Reshape and Transpose are
 * not recorded as dead (their shapes may be read elsewhere; drop_unused
 * takes them when nothing is left). */
static bool heads_of(const dvmc_value *t, const int64_t perm[4], dvmc_value **x, int64_t *heads, int64_t *size) {
  const dvmc_node *tr = t ? t->producer : NULL;
  if (!tr || strcmp(tr->op, "Transpose") || tr->domain[0] || tr->nin != 1 || !perm_is(tr, perm)) return false;
  const dvmc_value *r = tr->in[0];
  const dvmc_node *rs = r->producer;
  if (!rs || strcmp(rs->op, "Reshape") || rs->domain[0] || rs->nout != 1 || r->rank != 4) return false;
  dvmc_value *in = rs->in[0];
  int64_t hidden;
  if (!in->typed || in->dtype != DVM_F32 || in->rank != 3 || !dvmc_value_shape_known(in) ||
      !dvmc_value_shape_known(r) || in->dims[0] != r->dims[0] || in->dims[1] != r->dims[1] ||
      !dvmc_expr_is_const(r->dims[2], heads) || !dvmc_expr_is_const(r->dims[3], size) ||
      !dvmc_expr_is_const(in->dims[2], &hidden) || *heads < 1 || *heads * *size != hidden)
    return false;
  *x = in;
  return true;
}

/* Entry i of a small integer tensor as an expression (constant data or
 * known elements); NULL when unknown. */
static bool int_at(const dvmc_value *v, int i, int64_t *out) {
  if (!v) return false;
  const dvmc_tensor *t = v->constant;
  if (t && t->dtype == DVM_I64 && t->rank == 1 && t->dims[0] > i) {
    memcpy(out, (const int64_t *)t->data + i, sizeof *out);
    return true;
  }
  return dvmc_value_elems_known(v) && i < v->nelems && dvmc_expr_is_const(v->elems[i], out);
}

static int64_t ints_len(const dvmc_value *v) {
  if (v && v->constant && v->constant->rank == 1) return v->constant->dims[0];
  return v && dvmc_value_elems_known(v) && v->rank == 1 ? v->nelems : -1;
}

/* cond [1, 1, Sq, Skv] is the top-left corner of a constant bool lower
 * triangle: Slices (opset 10 on) starting at 0 with step 1 on the last
 * two axes of a constant C [1, 1, N, M] with C[i][j] = j <= i. */
static bool causal(const dvmc_value *cond, const dvmc_expr *sq, const dvmc_expr *skv) {
  if (!cond || !cond->typed || cond->dtype != DVM_BOOL || cond->rank != 4 || !is_const(cond->dims[0], 1) ||
      !is_const(cond->dims[1], 1) || cond->dims[2] != sq || cond->dims[3] != skv)
    return false;
  const dvmc_value *v = cond;
  for (int depth = 0; !v->constant; depth++) {
    const dvmc_node *s = v->producer;
    if (s && !strcmp(s->op, "Identity") && !s->domain[0] && s->nin == 1 && depth <= 4) { /* a shared buffer */
      v = s->in[0];
      continue;
    }
    if (depth > 4 || !s || strcmp(s->op, "Slice") || s->domain[0] || s->nin < 3 || s->opset < 10) return false;
    int64_t n = ints_len(s->in[1]);
    if (n < 1 || ints_len(s->in[2]) != n || (s->nin > 3 && s->in[3] && ints_len(s->in[3]) != n) ||
        (s->nin > 4 && s->in[4] && ints_len(s->in[4]) != n))
      return false;
    for (int i = 0; i < n; i++) {
      int64_t start, axis = i, step = 1;
      if (!int_at(s->in[1], i, &start) || start != 0) return false;
      if (s->nin > 3 && s->in[3] && !int_at(s->in[3], i, &axis)) return false;
      if (s->nin > 4 && s->in[4] && (!int_at(s->in[4], i, &step) || step != 1)) return false;
      if (axis != 2 && axis != 3 && axis != -1 && axis != -2) return false;
    }
    v = s->in[0];
  }
  const dvmc_tensor *t = v->constant;
  if (t->dtype != DVM_BOOL || t->rank != 4 || t->dims[0] != 1 || t->dims[1] != 1) return false;
  const uint8_t *c = t->data;
  for (int64_t i = 0; i < t->dims[2]; i++)
    for (int64_t j = 0; j < t->dims[3]; j++)
      if (!c[i * t->dims[3] + j] != !(j <= i)) return false;
  return true;
}

/* mask is f32 [.., Skv] broadcasting to scores [B, H, Sq, Skv] without
 * growing them. */
static bool mask_fits(const dvmc_value *mask, const dvmc_value *scores) {
  if (!mask || !mask->typed || mask->dtype != DVM_F32 || mask->rank < 1 || mask->rank > 4 ||
      !dvmc_value_shape_known(mask) || mask->dims[mask->rank - 1] != scores->dims[3])
    return false;
  for (int k = 0; k < mask->rank - 1; k++) {
    const dvmc_expr *d = mask->dims[k], *want = scores->dims[4 - mask->rank + k];
    if (d != want && !is_const(d, 1)) return false;
  }
  return true;
}

/* Drops v's producer when nothing reads its outputs any more (a Reshape,
 * Transpose or shape computation the pattern read), then its inputs'. */
static void drop_unused(dvmc_graph *g, dvmc_value *v, int depth) {
  dvmc_node *n = v ? v->producer : NULL;
  if (!n || depth > 32 || n->id < 0 || n->id >= g->nnodes || g->nodes[n->id] != n) return;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] && n->out[k]->uses) return;
  for (int a = 0; a < n->nattrs; a++)
    if (n->attrs[a].type == DVMC_ATTR_GRAPH) return;
  g->nodes[n->id] = NULL;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k]) n->out[k]->producer = NULL;
  for (int k = 0; k < n->nin; k++)
    if (n->in[k]) {
      n->in[k]->uses--;
      drop_unused(g, n->in[k], depth + 1);
    }
}

static const int64_t heads_perm[4] = {0, 2, 1, 3}, keys_perm[4] = {0, 2, 3, 1};

/* Rewrites the pattern ending at the Reshape `out` and sets *done, or
 * leaves g as it is. */
static dvm_status *match(dvmc_ctx *c, dvmc_graph *g, dvmc_node *out, int *done) {
  pattern p = {.dead = {out}, .n = 1, .scale = 1.0};
  /* the output: Reshape(Transpose(pv, [0, 2, 1, 3]), [B, Sq, H * dv]) */
  dvmc_node *tr = take(g, &p, out->in[0], "Transpose");
  if (!tr || tr->nin != 1 || !perm_is(tr, heads_perm)) return NULL;
  dvmc_node *pv = take(g, &p, tr->in[0], "MatMul");
  if (!pv || pv->nin != 2) return NULL;
  dvmc_value *y = out->out[0];
  /* probabilities and values */
  dvmc_node *sm = take(g, &p, pv->in[0], "Softmax");
  dvmc_value *q, *k, *v, *mask = NULL;
  int64_t hq, hk, hv, dh, dk, dv;
  if (!sm || sm->nin != 1 || sm->opset < 13 || !heads_of(pv->in[1], heads_perm, &v, &hv, &dv)) return NULL;
  dvmc_value *s = sm->in[0];
  if (!s->typed || s->dtype != DVM_F32 || s->rank != 4 || !dvmc_value_shape_known(s)) return NULL;
  int64_t axis = dvmc_attr_int(sm, "axis", -1);
  if (axis != -1 && axis != 3) return NULL;
  /* the mask, or the causal Where */
  int is_causal = 0;
  dvmc_node *n = dvmc_pass_only(g, s, "Add", 1 + shape_reads(g, s));
  if (n && n->nin == 2 && p.n < MAX_DEAD) {
    int side = mask_fits(n->in[1], s) && dvmc_pass_same_shape(n->in[0], s)   ? 0
               : mask_fits(n->in[0], s) && dvmc_pass_same_shape(n->in[1], s) ? 1
                                                                              : -1;
    if (side < 0) return NULL;
    p.dead[p.n++] = n, mask = n->in[1 - side], s = n->in[side];
  } else if ((n = dvmc_pass_only(g, s, "Where", 1 + shape_reads(g, s))) && n->nin == 3 && p.n < MAX_DEAD) {
    float fill;
    if (!dvmc_pass_scalar(n->in[2], &fill) || !(fill == -FLT_MAX || fill == -INFINITY) ||
        !dvmc_pass_same_shape(n->in[1], s) || !causal(n->in[0], s->dims[2], s->dims[3]))
      return NULL;
    p.dead[p.n++] = n, is_causal = 1, s = n->in[1];
  }
  /* the scaled product */
  peel_scale(g, &p, &s);
  dvmc_node *qk = take(g, &p, s, "MatMul");
  if (!qk || qk->nin != 2) return NULL;
  dvmc_value *qt = qk->in[0], *kt = qk->in[1];
  peel_scale(g, &p, &qt);
  peel_scale(g, &p, &kt);
  if (!heads_of(qt, heads_perm, &q, &hq, &dh) || !heads_of(kt, keys_perm, &k, &hk, &dk)) return NULL;
  /* B, Sq and Skv the same everywhere, one head count */
  if (hq != hk || hk != hv || dh != dk || q->dims[0] != s->dims[0] || k->dims[0] != s->dims[0] ||
      v->dims[0] != s->dims[0] || q->dims[1] != s->dims[2] || k->dims[1] != s->dims[3] || v->dims[1] != k->dims[1] ||
      !is_const(s->dims[1], hq))
    return NULL;
  int64_t hidden;
  if (!y->typed || y->dtype != DVM_F32 || y->rank != 3 || !dvmc_value_shape_known(y) || y->dims[0] != q->dims[0] ||
      y->dims[1] != q->dims[1] || !dvmc_expr_is_const(y->dims[2], &hidden) || hidden != hq * dv)
    return NULL;
  /* the inputs the dead nodes read, for drop_unused after */
  dvmc_value *frontier[MAX_DEAD * 3];
  int nf = 0;
  for (int i = 0; i < p.n; i++)
    for (int j = 0; j < p.dead[i]->nin; j++)
      if (p.dead[i]->in[j] && nf < MAX_DEAD * 3) frontier[nf++] = p.dead[i]->in[j];
  dvmc_value *in[4] = {q, k, v, mask};
  dvmc_attr attrs[4] = {{.name = "q_num_heads", .type = DVMC_ATTR_INT, .i = hq},
                        {.name = "kv_num_heads", .type = DVMC_ATTR_INT, .i = hq},
                        {.name = "scale", .type = DVMC_ATTR_FLOAT, .f = (float)p.scale},
                        {.name = "is_causal", .type = DVMC_ATTR_INT, .i = 1}};
  dvm_status *st = dvmc_pass_replace(c, g, p.dead, p.n, "Attention", in, mask ? 4 : 3, y, attrs, 3 + is_causal);
  if (st) return st;
  y->producer->opset = 23; /* the ONNX Attention of opset 23, whatever the model's */
  for (int i = 0; i < nf; i++) drop_unused(g, frontier[i], 0);
  *done = 1;
  return NULL;
}

dvm_status *dvmc_pass_attention(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = g->nnodes - 1; i >= 0; i--) {
    dvmc_node *n = g->nodes[i];
    if (!n || strcmp(n->op, "Reshape") || n->domain[0] || n->nout != 1 || n->nin < 1) continue;
    int done = 0;
    dvm_status *st = match(c, g, n, &done);
    if (st) return st;
    *count += done;
  }
  return NULL;
}
