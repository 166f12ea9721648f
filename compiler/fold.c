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

/* y = BatchNormalization(Conv(x, W, b)) with every parameter a constant and
 * the Conv's output read by nothing else becomes Conv(x, W', b'):
 * s = scale / sqrt(var + eps) per output channel, W' = W s, b' = (b - mean)
 * s + B. Returns 1 when it folded, 0 when the pattern does not hold, -1
 * when out of memory. */
static int fold_bn(dvmc_ctx *c, dvmc_graph *g, dvmc_node *bn) {
  if (strcmp(bn->op, "BatchNormalization") || bn->domain[0] || bn->nin != 5 || bn->nout != 1 ||
      dvmc_attr_int(bn, "training_mode", 0))
    return 0;
  dvmc_value *x = bn->in[0];
  dvmc_node *conv = x ? x->producer : NULL;
  if (!conv || strcmp(conv->op, "Conv") || conv->domain[0] || conv->nout != 1 || x->uses != 1)
    return 0;
  const dvmc_tensor *w = conv->nin > 1 && conv->in[1] ? conv->in[1]->constant : NULL;
  if (!w || w->dtype != DVM_F32 || w->rank < 3) return 0;
  int64_t ch = w->dims[0], per = 1;
  for (int d = 1; d < w->rank; d++) per *= w->dims[d];
  const float *scale = vec(bn->in[1], ch), *bias = vec(bn->in[2], ch), *mean = vec(bn->in[3], ch),
              *var = vec(bn->in[4], ch);
  const dvmc_value *cb = conv->nin > 2 ? conv->in[2] : NULL;
  const float *b0 = cb ? vec(cb, ch) : NULL;
  if (!scale || !bias || !mean || !var || (cb && !b0)) return 0;
  double eps = dvmc_attr_float(bn, "epsilon", 1e-5);
  dvmc_tensor *w2 = dvmc_fold_f32(c, w->rank, w->dims, (size_t)(ch * per)), *b2 = dvmc_fold_f32(c, 1, &ch, (size_t)ch);
  dvmc_value **in = dvm_arena_alloc(&c->arena, 3, sizeof *in);
  if (!w2 || !b2 || !in) return -1;
  const float *wd = w->data;
  float *wo = (float *)w2->data, *bo = (float *)b2->data;
  for (int64_t o = 0; o < ch; o++) {
    double s = scale[o] / sqrt((double)var[o] + eps);
    for (int64_t i = 0; i < per; i++) wo[o * per + i] = (float)(wd[o * per + i] * s);
    bo[o] = (float)(((b0 ? b0[o] : 0.0) - mean[o]) * s + bias[o]);
  }
  in[0] = conv->in[0];
  if (!(in[1] = dvmc_fold_const(c, g, bn->name, "W", w2)) || !(in[2] = dvmc_fold_const(c, g, bn->name, "B", b2)))
    return -1;
  for (int i = 1; i < conv->nin; i++)
    if (conv->in[i]) conv->in[i]->uses--;
  for (int i = 1; i < 5; i++) bn->in[i]->uses--;
  in[1]->uses = in[2]->uses = 1;
  conv->in = in;
  conv->nin = 3;
  /* the Conv now makes the BatchNormalization's output; x is read by nothing */
  conv->out[0] = bn->out[0];
  bn->out[0]->producer = conv;
  x->uses = 0;
  x->producer = NULL;
  return 1;
}

dvm_status *dvmc_fold(dvmc_ctx *c, dvmc_graph *g, int *folded) {
  int kept = 0;
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *n = g->nodes[i];
    for (int a = 0; a < n->nattrs; a++) {
      dvm_status *st = n->attrs[a].g ? dvmc_fold(c, n->attrs[a].g, folded) : NULL;
      if (st) return st;
    }
    int r = fold_bn(c, g, n);
    if (r < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "folding node \"%s\"", n->name);
    *folded += r;
    if (!r) (g->nodes[kept] = n)->id = kept, kept++;
  }
  g->nnodes = kept;
  return NULL;
}
