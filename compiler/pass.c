/* The table of graph rewrites and what they share (pass.h). */
#include <string.h>

#include "infer.h"
#include "pass.h"

static const dvmc_pass passes[] = {
    {"layernorm", "ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul scale[, Add bias] over the last "
                  "axis -> LayerNormalization",
     dvmc_pass_layernorm},
    {"gelu", "x * 0.5 * (1 + Erf(x / sqrt 2)) -> Gelu; 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> "
             "Gelu(tanh); either fuses with a bias add before it",
     dvmc_pass_gelu},
};

_Static_assert(sizeof passes / sizeof passes[0] <= 32, "dvmc_passes_run's mask holds 32 passes");

int dvmc_pass_count(void) { return (int)(sizeof passes / sizeof passes[0]); }
const dvmc_pass *dvmc_pass_at(int i) { return &passes[i]; }

int dvmc_pass_find(const char *name) {
  for (int i = 0; i < dvmc_pass_count(); i++)
    if (!strcmp(passes[i].name, name)) return i;
  return -1;
}

/* Drops the slots replaced nodes left NULL and renumbers the rest. */
static void compact(dvmc_graph *g) {
  int kept = 0;
  for (int i = 0; i < g->nnodes; i++)
    if (g->nodes[i]) (g->nodes[kept] = g->nodes[i])->id = kept, kept++;
  g->nnodes = kept;
}

static dvm_status *run_on(dvmc_ctx *c, dvmc_graph *g, int pass, int *counts) {
  for (int i = 0; i < g->nnodes; i++)
    for (int a = 0; a < g->nodes[i]->nattrs; a++) {
      dvmc_graph *sub = g->nodes[i]->attrs[a].g;
      dvm_status *st = sub ? run_on(c, sub, pass, counts) : NULL;
      if (st) return st;
    }
  int n = 0;
  dvm_status *st = passes[pass].run(c, g, &n);
  compact(g);
  if (counts) counts[pass] += n;
  return st;
}

dvm_status *dvmc_passes_run(dvmc_ctx *c, dvmc_graph *g, uint32_t disabled, int *counts) {
  for (int p = 0; p < dvmc_pass_count(); p++) {
    dvm_status *st = disabled >> p & 1 ? NULL : run_on(c, g, p, counts);
    if (st) return dvm_status_annotate(st, "pass %s", passes[p].name);
  }
  return NULL;
}

/* ---- helpers -------------------------------------------------------------- */

static bool in_graph(const dvmc_graph *g, const dvmc_node *n) {
  return n && n->id >= 0 && n->id < g->nnodes && g->nodes[n->id] == n;
}

dvmc_node *dvmc_pass_only(const dvmc_graph *g, const dvmc_value *v, const char *op, int uses) {
  dvmc_node *n = v ? v->producer : NULL;
  if (!in_graph(g, n) || v->uses != uses || strcmp(n->op, op) || n->domain[0] || n->nout != 1 || n->out[0] != v)
    return NULL;
  return n;
}

bool dvmc_pass_scalar(const dvmc_value *v, float *out) {
  const dvmc_tensor *t = v ? v->constant : NULL;
  if (!t || t->dtype != DVM_F32 || t->nbytes != sizeof(float)) return false;
  memcpy(out, t->data, sizeof *out);
  return true;
}

bool dvmc_pass_scalar_is(const dvmc_value *v, float x) {
  float f;
  return dvmc_pass_scalar(v, &f) && f == x;
}

bool dvmc_pass_same_shape(const dvmc_value *a, const dvmc_value *b) {
  if (!a || !b || !a->typed || !b->typed || a->dtype != DVM_F32 || b->dtype != DVM_F32 ||
      !dvmc_value_shape_known(a) || !dvmc_value_shape_known(b) || a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

dvmc_value *dvmc_pass_other(const dvmc_node *n, const dvmc_value *v) {
  if (n->nin != 2 || (n->in[0] == v) == (n->in[1] == v)) return NULL;
  return n->in[0] == v ? n->in[1] : n->in[0];
}

dvm_status *dvmc_pass_replace(dvmc_ctx *c, dvmc_graph *g, dvmc_node *const *dead, int ndead, const char *op,
                              dvmc_value *const *in, int nin, dvmc_value *out, const dvmc_attr *attrs,
                              int nattrs) {
  int at = out->producer->id;
  dvmc_node *n = dvmc_node_new(c, g, op, nin, 1);
  dvmc_attr *a = nattrs ? dvm_arena_alloc(&c->arena, (size_t)nattrs, sizeof *a) : NULL;
  if (!n || (nattrs && !a)) return dvm_status_new(DVM_OUT_OF_MEMORY, "replacing node \"%s\"", out->producer->name);
  g->nnodes--; /* appended by dvmc_node_new; it takes the producer's slot instead */
  n->name = out->producer->name;
  for (int i = 0; i < ndead; i++) {
    for (int k = 0; k < dead[i]->nin; k++)
      if (dead[i]->in[k]) dead[i]->in[k]->uses--;
    for (int k = 0; k < dead[i]->nout; k++)
      if (dead[i]->out[k]) dead[i]->out[k]->producer = NULL;
    g->nodes[dead[i]->id] = NULL;
  }
  for (int i = 0; i < nin; i++) (n->in[i] = in[i])->uses++;
  if (nattrs) memcpy(a, attrs, sizeof *a * (size_t)nattrs);
  n->attrs = a;
  n->nattrs = nattrs;
  n->out[0] = out;
  out->producer = n;
  n->id = at;
  g->nodes[at] = n;
  return NULL;
}
