/* Graph rewrites on constants (see fold.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fold.h"

/* An f32 constant of rank 1 and n elements, or NULL. */
static const float *vec(const dvmc_value *v, int64_t n) {
  const dvmc_tensor *t = v ? v->constant : NULL;
  return t && t->dtype == DVM_F32 && t->rank == 1 && t->dims[0] == n ? t->data : NULL;
}

dvmc_value *dvmc_fold_const(dvmc_ctx *c, dvmc_graph *g, const char *base, const char *what, const dvmc_tensor *t) {
  char name[256];
  snprintf(name, sizeof name, "%s.%s", base, what);
  for (int i = 1; dvmc_value_find(g, name); i++) snprintf(name, sizeof name, "%s.%s%d", base, what, i);
  dvmc_value *v = dvmc_value_new(c, g, name);
  if (!v) return NULL;
  for (int d = 0; d < t->rank; d++)
    if (!(v->dims[d] = dvmc_const(c->exprs, t->dims[d]))) return NULL;
  v->typed = true;
  v->dtype = t->dtype;
  v->rank = t->rank;
  v->constant = t;
  return v;
}

dvmc_tensor *dvmc_fold_f32(dvmc_ctx *c, int rank, const int64_t *dims, size_t count) {
  dvmc_tensor *t = dvm_arena_alloc(&c->arena, 1, sizeof *t);
  float *data = dvm_arena_alloc(&c->arena, count ? count : 1, sizeof(float));
  if (!t || !data) return NULL;
  *t = (dvmc_tensor){.dtype = DVM_F32, .rank = rank, .data = data, .nbytes = count * sizeof(float)};
  memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

/* A default-domain Conv or ConvTranspose with a constant f32 W (rank 3 on)
 * making x, which nothing else reads: *ch its output channels. */
static dvmc_node *conv_of(const dvmc_value *x, int64_t *ch) {
  dvmc_node *conv = x ? x->producer : NULL;
  if (!conv || conv->domain[0] || conv->nout != 1 || x->uses != 1) return NULL;
  bool transpose = !strcmp(conv->op, "ConvTranspose");
  if (!transpose && strcmp(conv->op, "Conv")) return NULL;
  const dvmc_tensor *w = conv->nin > 1 && conv->in[1] ? conv->in[1]->constant : NULL;
  if (!w || w->dtype != DVM_F32 || w->rank < 3) return NULL;
  int64_t group = dvmc_attr_int(conv, "group", 1);
  if (group < 1 || (transpose && w->dims[0] % group)) return NULL;
  *ch = transpose ? w->dims[1] * group : w->dims[0];
  return conv;
}

/* The output channel of W's element i: W is [M, C/group, k...] for Conv,
 * [C, M/group, k...] for ConvTranspose. */
static int64_t out_channel(const dvmc_node *conv, const dvmc_tensor *w, int64_t i) {
  int64_t per = 1;
  for (int d = 1; d < w->rank; d++) per *= w->dims[d];
  if (strcmp(conv->op, "ConvTranspose")) return i / per;
  int64_t k = per / w->dims[1], in = i / per, groups = dvmc_attr_int(conv, "group", 1);
  return in / (w->dims[0] / groups) * w->dims[1] + i % per / k;
}

/* conv (making x) makes y instead, with W s and bias b (ch each; s NULL:
 * W as it is): x is read by nothing. -1 when out of memory. */
static int refold(dvmc_ctx *c, dvmc_graph *g, dvmc_node *conv, dvmc_value *x, dvmc_value *y, const char *name,
                  const double *s, const double *b, int64_t ch) {
  const dvmc_tensor *w = conv->in[1]->constant;
  size_t nw = 1;
  for (int d = 0; d < w->rank; d++) nw *= (size_t)w->dims[d];
  dvmc_tensor *b2 = dvmc_fold_f32(c, 1, &ch, (size_t)ch), *w2 = s ? dvmc_fold_f32(c, w->rank, w->dims, nw) : NULL;
  dvmc_value **in = dvm_arena_alloc(&c->arena, 3, sizeof *in);
  if (!b2 || (s && !w2) || !in) return -1;
  for (int64_t o = 0; o < ch; o++) ((float *)b2->data)[o] = (float)b[o];
  for (size_t i = 0; s && i < nw; i++)
    ((float *)w2->data)[i] = (float)(((const float *)w->data)[i] * s[out_channel(conv, w, (int64_t)i)]);
  in[0] = conv->in[0];
  in[1] = s ? dvmc_fold_const(c, g, name, "W", w2) : conv->in[1];
  if (!in[1] || !(in[2] = dvmc_fold_const(c, g, name, "B", b2))) return -1;
  for (int i = 1; i < conv->nin; i++)
    if (conv->in[i]) conv->in[i]->uses--;
  in[1]->uses++;
  in[2]->uses++;
  conv->in = in;
  conv->nin = 3;
  conv->out[0] = y;
  y->producer = conv;
  x->uses = 0;
  x->producer = NULL;
  return 1;
}

/* conv's bias as doubles into b (ch), 0 where it has none; false where
 * it has one that is not an f32 constant of ch elements. */
static bool bias_of(const dvmc_node *conv, int64_t ch, double *b) {
  const dvmc_value *cb = conv->nin > 2 ? conv->in[2] : NULL;
  const float *b0 = cb ? vec(cb, ch) : NULL;
  if (cb && !b0) return false;
  for (int64_t o = 0; o < ch; o++) b[o] = b0 ? b0[o] : 0.0;
  return true;
}

/* Folds into a Conv or ConvTranspose (constant W and bias, its output x
 * read by n alone), n one of
 *   y = Add(x, k) or Add(k, x), k an f32 constant of one value per output
 *       channel ([M, 1...] or [1, M, 1...], rank at most x's) or of one
 *       value: b' = b + k (exporters that keep the bias apart, as
 *       paddle2onnx does for ConvTranspose);
 *   y = BatchNormalization(x, scale, B, mean, var), all constant, not
 *       training: s = scale / sqrt(var + eps) per output channel, W' = W s,
 *       b' = (b - mean) s + B;
 * which goes: the conv makes y. Returns 1 when it folded, 0 when the
 * pattern does not hold, -1 when out of memory. */
static int fold_into_conv(dvmc_ctx *c, dvmc_graph *g, dvmc_node *n) {
  bool add = !strcmp(n->op, "Add") && n->nin == 2;
  bool bn = !strcmp(n->op, "BatchNormalization") && n->nin == 5 && !dvmc_attr_int(n, "training_mode", 0);
  if (n->domain[0] || n->nout != 1 || !n->out[0] || !(add || bn)) return 0;
  int64_t ch;
  int xi = add && n->in[0] && n->in[0]->constant ? 1 : 0;
  dvmc_value *x = n->in[xi];
  dvmc_node *conv = conv_of(x, &ch);
  if (!conv || ch > (1 << 24)) return 0;
  double *b = dvm_arena_alloc(&c->arena, (size_t)ch, sizeof *b), *s = NULL;
  if (!b) return -1;
  if (!bias_of(conv, ch, b)) return 0;
  if (add) {
    const dvmc_tensor *k = n->in[1 - xi] ? n->in[1 - xi]->constant : NULL;
    int rank = conv->in[1]->constant->rank;
    if (!k || k->dtype != DVM_F32 || k->rank > rank) return 0;
    int64_t count = 1;
    for (int d = 0; d < k->rank; d++) {
      int at = rank - k->rank + d; /* the dim of x it lines up with */
      if (k->dims[d] != 1 && !(at == 1 && k->dims[d] == ch)) return 0;
      count *= k->dims[d];
    }
    const float *kd = k->data;
    for (int64_t o = 0; o < ch; o++) b[o] += kd[count == 1 ? 0 : o];
    n->in[1 - xi]->uses--;
  } else {
    const float *scale = vec(n->in[1], ch), *bias = vec(n->in[2], ch), *mean = vec(n->in[3], ch),
                *var = vec(n->in[4], ch);
    if (!scale || !bias || !mean || !var) return 0;
    if (!(s = dvm_arena_alloc(&c->arena, (size_t)ch, sizeof *s))) return -1;
    double eps = dvmc_attr_float(n, "epsilon", 1e-5);
    for (int64_t o = 0; o < ch; o++) {
      s[o] = scale[o] / sqrt((double)var[o] + eps);
      b[o] = (b[o] - mean[o]) * s[o] + bias[o];
    }
    for (int i = 1; i < 5; i++) n->in[i]->uses--;
  }
  return refold(c, g, conv, x, n->out[0], n->name, s, b, ch);
}

dvm_status *dvmc_fold(dvmc_ctx *c, dvmc_graph *g, int *folded) {
  int kept = 0;
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *n = g->nodes[i];
    for (int a = 0; a < n->nattrs; a++) {
      dvm_status *st = n->attrs[a].g ? dvmc_fold(c, n->attrs[a].g, folded) : NULL;
      if (st) return st;
    }
    int r = fold_into_conv(c, g, n);
    if (r < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "folding node \"%s\"", n->name);
    *folded += r;
    if (!r) (g->nodes[kept] = n)->id = kept, kept++;
  }
  g->nnodes = kept;
  return NULL;
}
