/* A Conv and the elementwise ops after it, as one FusedConv whose kernel
 * applies them as oneDNN post-ops while each block of Y is in cache
 * (ops/cpu/conv.c):
 *
 *   y = Conv(x, W[, B])
 *   [Mul by a one-element constant s] [Add a one-element constant b]
 *       folded into W' = W s, B' = B s + b (W, B constants)
 *   [activation]: Relu, LeakyRelu, Tanh, Sigmoid, Clip (constant bounds),
 *       HardSigmoid, HardSwish; y * Sigmoid(y) (swish);
 *       y * HardSigmoid(y) with alpha 1/6, beta 1/2, and
 *       y * Clip(y + 3, 0, 6) / 6 (or * (1/6)) (hard swish)
 *   [Mul by a one-element constant] [Add a one-element constant], after
 *       an activation: dvm_post_scale, dvm_post_shift
 *
 * becomes FusedConv(x, W'[, B']) (com.microsoft, with activation and
 * activation_params as ONNX Runtime spells them), or Conv(x, W', B') when
 * only the scale and shift were found. Proven: every value of the chain is
 * f32 of the dims of y (so no constant broadcasts it wider), read only by
 * the next op of the chain (the two reads of y * f(y) by the pattern
 * alone), every constant exact (3, 0, 6, 1/6 as f32, ...). Not fused: a
 * residual Add (oneDNN's sum post-op needs the addend in Y's blocked
 * layout first: a copy in for a copy saved). */
#include <math.h>
#include <string.h>

#include "fold.h"
#include "ops.h"
#include "pass.h"

#define MAX_DEAD 12

/* The activations, as FusedConv's activation attribute names them. */
enum { IDENTITY, RELU, TANH, SIGMOID, LEAKY_RELU, CLIP, HARD_SIGMOID, HARD_SWISH, SWISH };
static const char *const act_names[] = {"Identity", "Relu", "Tanh", "Sigmoid", "LeakyRelu",
                                        "Clip", "HardSigmoid", "HardSwish", "Swish"};

typedef struct chain {
  const dvmc_value *y; /* the Conv's output: every value of the chain has its dims */
  dvmc_node *dead[MAX_DEAD];
  int n;
} chain;

/* The nodes of g reading v, up to max; their count (a node once). */
static int readers(const dvmc_graph *g, const dvmc_value *v, dvmc_node **out, int max) {
  int k = 0;
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *n = g->nodes[i];
    for (int j = 0; n && j < n->nin; j++)
      if (n->in[j] == v) {
        if (k < max) out[k] = n;
        k++;
        break;
      }
  }
  return k;
}

/* n is a default-domain `op` with one output of y's dims; recorded dead. */
static bool take(chain *ch, dvmc_node *n, const char *op) {
  if (!n || strcmp(n->op, op) || n->domain[0] || n->nout != 1 || !dvmc_pass_same_shape(n->out[0], ch->y) ||
      ch->n == MAX_DEAD)
    return false;
  ch->dead[ch->n++] = n;
  return true;
}

/* The one node reading v (v read once, by it alone), when it is `op`. */
static dvmc_node *next(const dvmc_graph *g, chain *ch, const dvmc_value *v, const char *op) {
  dvmc_node *n;
  if (v->uses != 1 || readers(g, v, &n, 1) != 1) return NULL;
  return take(ch, n, op) ? n : NULL;
}

/* n(v, c) or n(c, v) with c a one-element constant: true and *c. */
static bool by_scalar(const dvmc_node *n, const dvmc_value *v, float *c) {
  const dvmc_value *o = n->nin == 2 ? dvmc_pass_other(n, v) : NULL;
  return o && dvmc_pass_scalar(o, c);
}

/* Mul by a scalar and/or Add of a scalar after *v (in that order):
 * *scale, *shift and *v moved past them; false when neither. */
static bool affine(const dvmc_graph *g, chain *ch, dvmc_value **v, float *scale, float *shift) {
  int at = ch->n;
  bool any = false;
  *scale = 1;
  *shift = 0;
  dvmc_node *n = next(g, ch, *v, "Mul");
  if (n && by_scalar(n, *v, scale)) *v = n->out[0], any = true;
  else ch->n = at;
  at = ch->n;
  n = next(g, ch, *v, "Add");
  if (n && by_scalar(n, *v, shift)) *v = n->out[0], any = true;
  else ch->n = at;
  return any;
}

/* Clip's bounds: constant inputs (opset 11 on; absent: unbounded) or the
 * min and max attributes (before). */
static bool clip_bounds(const dvmc_node *n, float *lo, float *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (n->nin == 1) {
    *lo = (float)dvmc_attr_float(n, "min", -INFINITY);
    *hi = (float)dvmc_attr_float(n, "max", INFINITY);
    return true;
  }
  return (n->nin < 2 || !n->in[1] || dvmc_pass_scalar(n->in[1], lo)) &&
         (n->nin < 3 || !n->in[2] || dvmc_pass_scalar(n->in[2], hi));
}

/* y * Clip(y + 3, 0, 6) / 6 (or * (1/6)), m the Mul reading y and c the other
 * reader: the Add; *v past the division. */
static bool hard_swish_clip(const dvmc_graph *g, chain *ch, const dvmc_value *y, dvmc_node *add, dvmc_node *m,
                            dvmc_value **v) {
  float k, lo, hi;
  if (!take(ch, add, "Add") || !by_scalar(add, y, &k) || k != 3) return false;
  dvmc_node *clip = next(g, ch, add->out[0], "Clip");
  if (!clip || clip->in[0] != add->out[0] || !clip_bounds(clip, &lo, &hi) || lo != 0 || hi != 6) return false;
  if (!take(ch, m, "Mul") || m->nin != 2 || dvmc_pass_other(m, y) != clip->out[0] || clip->out[0]->uses != 1)
    return false;
  int at = ch->n;
  dvmc_node *d = next(g, ch, m->out[0], "Div");
  if (d && d->in[0] == m->out[0] && dvmc_pass_scalar_is(d->in[1], 6.0f)) {
    *v = d->out[0];
    return true;
  }
  ch->n = at;
  d = next(g, ch, m->out[0], "Mul");
  if (!d || !by_scalar(d, m->out[0], &k) || k != 1.0f / 6.0f) return false;
  *v = d->out[0];
  return true;
}

/* The activation reading *v: its kind and parameters, *v moved past it;
 * IDENTITY (nothing taken) when none. */
static int activation(const dvmc_graph *g, chain *ch, dvmc_value **v, float p[2]) {
  int at = ch->n;
  dvmc_node *r[2];
  int nr = (*v)->uses <= 2 ? readers(g, *v, r, 2) : 0;
  if (nr == 1 && (*v)->uses == 1) {
    static const char *const ops[] = {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish"};
    static const int acts[] = {RELU, TANH, SIGMOID, LEAKY_RELU, CLIP, HARD_SIGMOID, HARD_SWISH};
    for (int i = 0; i < 7; i++) {
      if (!take(ch, r[0], ops[i])) continue;
      if (r[0]->in[0] != *v) break;
      p[0] = acts[i] == LEAKY_RELU ? (float)dvmc_attr_float(r[0], "alpha", 0.01)
                                   : (float)dvmc_attr_float(r[0], "alpha", 0.2);
      p[1] = (float)dvmc_attr_float(r[0], "beta", 0.5);
      if (acts[i] == CLIP && !clip_bounds(r[0], &p[0], &p[1])) break;
      *v = r[0]->out[0];
      return acts[i];
    }
  }
  ch->n = at;
  if (nr != 2 || (*v)->uses != 2) return IDENTITY;
  /* y * f(y): one reader a Mul of y and f(y), the other f */
  for (int m = 0; m < 2; m++) {
    dvmc_node *f = r[1 - m], *mul = r[m];
    ch->n = at;
    if (!strcmp(f->op, "Add")) {
      if (hard_swish_clip(g, ch, *v, f, mul, v)) return HARD_SWISH;
      continue;
    }
    bool sig = take(ch, f, "Sigmoid"), hsig = !sig && take(ch, f, "HardSigmoid");
    if (!(sig || hsig) || f->in[0] != *v || f->out[0]->uses != 1 || !take(ch, mul, "Mul") || mul->nin != 2 ||
        dvmc_pass_other(mul, *v) != f->out[0])
      continue;
    if (hsig && ((float)dvmc_attr_float(f, "alpha", 0.2) != 1.0f / 6.0f || dvmc_attr_float(f, "beta", 0.5) != 0.5))
      continue;
    *v = mul->out[0];
    return sig ? SWISH : HARD_SWISH;
  }
  ch->n = at;
  return IDENTITY;
}

/* W' = W s and B' = B s + b as new constants in in[1], in[2]; false when
 * W or B is not a constant (or out of memory: *oom). */
static bool fold_affine(dvmc_ctx *c, dvmc_graph *g, const dvmc_node *conv, float s, float b, dvmc_value **in,
                        bool *oom) {
  const dvmc_tensor *w = conv->nin > 1 && conv->in[1] ? conv->in[1]->constant : NULL;
  const dvmc_value *bv = conv->nin > 2 ? conv->in[2] : NULL;
  const dvmc_tensor *bt = bv ? bv->constant : NULL;
  if (!w || w->dtype != DVM_F32 || w->rank < 3 || (bv && (!bt || bt->dtype != DVM_F32 || bt->rank != 1 ||
                                                        bt->dims[0] != w->dims[0])))
    return false;
  int64_t m = w->dims[0], per = 1;
  for (int d = 1; d < w->rank; d++) per *= w->dims[d];
  dvmc_tensor *w2 = dvmc_fold_f32(c, w->rank, w->dims, (size_t)(m * per)), *b2 = dvmc_fold_f32(c, 1, &m, (size_t)m);
  if (!w2 || !b2) return !(*oom = true);
  const float *wd = w->data, *bd = bt ? bt->data : NULL;
  float *wo = (float *)w2->data, *bo = (float *)b2->data;
  for (int64_t i = 0; i < m * per; i++) wo[i] = wd[i] * s;
  for (int64_t o = 0; o < m; o++) bo[o] = (bd ? bd[o] : 0.0f) * s + b;
  if (!(in[1] = dvmc_fold_const(c, g, conv->name, "W", w2)) || !(in[2] = dvmc_fold_const(c, g, conv->name, "B", b2)))
    return !(*oom = true);
  return true;
}

dvm_status *dvmc_pass_conv_act(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *conv = g->nodes[i];
    if (!conv || strcmp(conv->op, "Conv") || conv->domain[0] || conv->nout != 1 || conv->nin < 2 || conv->nattrs > 12 ||
        !dvmc_pass_same_shape(conv->out[0], conv->out[0]) || !dvmc_pass_same_shape(conv->in[0], conv->in[0]))
      continue;
    chain ch = {.y = conv->out[0], .dead = {conv}, .n = 1};
    dvmc_value *v = conv->out[0], *in[3] = {conv->in[0], conv->in[1], conv->nin > 2 ? conv->in[2] : NULL};
    int nin = in[2] ? 3 : 2;
    float s, b, p[2] = {0, 0}, ps = 1, psh = 0;
    bool oom = false, pre = affine(g, &ch, &v, &s, &b);
    if (pre && !fold_affine(c, g, conv, s, b, in, &oom)) {
      if (oom) return dvm_status_new(DVM_OUT_OF_MEMORY, "fusing node \"%s\"", conv->name);
      ch.n = 1; /* not foldable: the activation cannot be reached either */
      continue;
    }
    if (pre) nin = 3;
    int act = activation(g, &ch, &v, p);
    bool post = act != IDENTITY && affine(g, &ch, &v, &ps, &psh);
    if (!pre && act == IDENTITY) continue;
    dvmc_attr attrs[16];
    int na = 0;
    for (int a = 0; a < conv->nattrs; a++) attrs[na++] = conv->attrs[a];
    if (act != IDENTITY) {
      double *params = dvm_arena_alloc(&c->arena, 2, sizeof *params);
      if (!params) return dvm_status_new(DVM_OUT_OF_MEMORY, "fusing node \"%s\"", conv->name);
      params[0] = p[0];
      params[1] = p[1];
      attrs[na++] = (dvmc_attr){.name = "activation", .type = DVMC_ATTR_STRING, .s = act_names[act]};
      if (act == LEAKY_RELU || act == CLIP || act == HARD_SIGMOID)
        attrs[na++] = (dvmc_attr){.name = "activation_params", .type = DVMC_ATTR_FLOATS, .n = act == LEAKY_RELU ? 1 : 2,
                                  .floats = params};
    }
    if (post) {
      attrs[na++] = (dvmc_attr){.name = "dvm_post_scale", .type = DVMC_ATTR_FLOAT, .f = ps};
      attrs[na++] = (dvmc_attr){.name = "dvm_post_shift", .type = DVMC_ATTR_FLOAT, .f = psh};
    }
    bool fused = act != IDENTITY;
    /* the output keeps its value; the dead nodes' slots are compacted later */
    dvm_status *st = dvmc_pass_replace(c, g, ch.dead, ch.n, fused ? "FusedConv" : "Conv", in, nin, v, attrs, na);
    if (st) return st;
    if (fused) {
      v->producer->domain = "com.microsoft";
      v->producer->opset = 1;
      v->producer->def = dvmc_op_find("com.microsoft", "FusedConv");
    }
    ++*count;
  }
  return NULL;
}
