/* The table of graph rewrites and what they share (pass.h). */
#include <string.h>

#include "infer.h"
#include "ops.h"
#include "pass.h"

static const dvmc_pass passes[] = {
    {"quant_const", "QuantizeLinear or DequantizeLinear of constants (per tensor or per axis) -> a constant: "
                    "quantize_static's weights and biases dequantized once, at compile time",
     dvmc_pass_quant_const},
    {"quant_float", "MatMulInteger, Cast to f32, Mul by a_scale * b_scale[, Add bias [N]] -> "
                    "MatMulIntegerToFloat (com.microsoft): the i32 product scaled and biased as it is written "
                    "(CPU builds)",
     dvmc_pass_quant_float, true},
    {"layernorm", "ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul scale[, Add bias] over the last "
                  "axis -> LayerNormalization",
     dvmc_pass_layernorm},
    {"gelu", "x * 0.5 * (1 + Erf(x / sqrt 2)) -> Gelu; 0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3))) -> "
             "Gelu(tanh); either fuses with a bias add before it",
     dvmc_pass_gelu},
    {"epilogue", "MatMul, Add bias [N] over the last axis[, Relu, Gelu, Sigmoid or Tanh] -> dvm.MatMulBias; Gemm, "
                 "one of those -> dvm.GemmAct: the kernels add the bias and activate each output block as they "
                 "compute it (CPU builds)",
     dvmc_pass_epilogue, true},
    {"skiplayernorm", "Add(x, skip) of one shape, then LayerNormalization over the last axis -> "
                      "SkipLayerNormalization (com.microsoft), also giving the sum where it is read elsewhere "
                      "(CPU builds)",
     dvmc_pass_skiplayernorm, true},
    {"rmsnorm", "Pow 2 or Mul(x, x), ReduceMean over the last axis, Add eps, Sqrt, Div or Reciprocal and Mul, Mul "
                "scale -> RMSNormalization (CPU builds)",
     dvmc_pass_rmsnorm, true},
    {"pad_conv", "Pad with zeros on spatial dims by constant pads, read only as a Conv's X (or through a "
                 "QuantizeLinear/DequantizeLinear pair of the Pad's input's scale and zero point) -> the Conv's pads "
                 "(the nodes that computed the pads go with it)",
     dvmc_pass_pad_conv},
    {"conv_act", "Conv [* s + b] [Relu, LeakyRelu, Tanh, Sigmoid, Clip, HardSigmoid, HardSwish, x Sigmoid(x), "
                 "x Clip(x + 3, 0, 6) / 6] [* s + b] -> FusedConv (oneDNN post-ops; s, b one-element constants, the "
                 "first pair folded into W and B)",
     dvmc_pass_conv_act},
    {"conv_add", "Conv with a bias, Add of a tensor of its dims[, Relu] -> FusedConv with input Z, added before "
                 "the activation (oneDNN's sum post-op; CPU builds)",
     dvmc_pass_conv_add, true},
    {"conv_nhwc", "values between convolutions (conv outputs read by convolutions as X or Z, MaxPool, "
                  "GlobalAveragePool, and the elementwise ops, per-tensor QuantizeLinear and DequantizeLinear, "
                  "channel Concats and Resizes by scales between them) "
                  "-> kept channels last (NHWC): FusedConvs and dvm pools read and write them so, the ops between "
                  "run on dvm.LayoutView views as [N, H, W, C]: no reorders (CPU builds)",
     dvmc_pass_conv_nhwc, true},
    {"qdq_pair", "QuantizeLinear (u8 or i8, per tensor) read only by a DequantizeLinear -> dvm.QuantizeDequantize: "
                 "x snapped to the grid in one pass, the codes never stored (CPU builds)",
     dvmc_pass_qdq_pair, true},
    {"conv_winograd", "2-D Conv or FusedConv, 3x3, stride 1, no dilation or groups, 16 channels or more -> "
                      "FusedConv with dvm_algo 1: "
                      "oneDNN's Winograd convolution where it has one for the call (CPU builds)",
     dvmc_pass_conv_winograd, true},
    {"attention", "Softmax(Q K^T * scale [+ mask | causal Where]) V between the head Reshapes and Transposes -> "
                  "Attention on the 3-D q, k, v (CPU builds)",
     dvmc_pass_attention, true},
};

_Static_assert(sizeof passes / sizeof passes[0] <= 32, "dvmc_passes_run's mask holds 32 passes");

int dvmc_pass_count(void) { return (int)(sizeof passes / sizeof passes[0]); }
const dvmc_pass *dvmc_pass_at(int i) { return &passes[i]; }

void dvmc_pass_describe(int i, dvmc_pass_info *out) {
  *out = (dvmc_pass_info){passes[i].name, passes[i].what, passes[i].cpu_only};
}

uint32_t dvmc_passes_cpu_only(void) {
  uint32_t mask = 0;
  for (int i = 0; i < dvmc_pass_count(); i++)
    if (passes[i].cpu_only) mask |= 1u << i;
  return mask;
}

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

bool dvmc_pass_mean_last(const dvmc_node *n, int r) {
  if (n->nout != 1 || dvmc_attr_int(n, "keepdims", 1) != 1) return false;
  const dvmc_attr *a = dvmc_attr_find(n, "axes");
  int64_t axis;
  if (a && a->type == DVMC_ATTR_INTS && a->n == 1 && n->nin == 1)
    axis = a->ints[0];
  else if (!a && n->nin == 2 && n->in[1] && n->in[1]->constant && n->in[1]->constant->dtype == DVM_I64 &&
           n->in[1]->constant->nbytes == sizeof(int64_t))
    memcpy(&axis, n->in[1]->constant->data, sizeof axis);
  else
    return false;
  return axis == -1 || axis == r - 1;
}

dvmc_value *dvmc_pass_other(const dvmc_node *n, const dvmc_value *v) {
  if (n->nin != 2 || (n->in[0] == v) == (n->in[1] == v)) return NULL;
  return n->in[0] == v ? n->in[1] : n->in[0];
}

dvm_status *dvmc_pass_replace(dvmc_ctx *c, dvmc_graph *g, dvmc_node *const *dead, int ndead, const char *op,
                              dvmc_value *const *in, int nin, dvmc_value *out, const dvmc_attr *attrs,
                              int nattrs) {
  return dvmc_pass_replace_outs(c, g, dead, ndead, out->producer, op, in, nin, &out, 1, attrs, nattrs);
}

dvm_status *dvmc_pass_replace_outs(dvmc_ctx *c, dvmc_graph *g, dvmc_node *const *dead, int ndead,
                                   const dvmc_node *at, const char *op, dvmc_value *const *in, int nin,
                                   dvmc_value *const *outs, int nout, const dvmc_attr *attrs, int nattrs) {
  int slot = at->id;
  dvmc_node *n = dvmc_node_new(c, g, op, nin, nout);
  dvmc_attr *a = nattrs ? dvm_arena_alloc(&c->arena, (size_t)nattrs, sizeof *a) : NULL;
  if (!n || (nattrs && !a)) return dvm_status_new(DVM_OUT_OF_MEMORY, "replacing node \"%s\"", at->name);
  g->nnodes--; /* appended by dvmc_node_new; it takes at's slot instead */
  n->name = at->name;
  for (int i = 0; i < ndead; i++) {
    for (int k = 0; k < dead[i]->nin; k++)
      if (dead[i]->in[k]) dead[i]->in[k]->uses--;
    for (int k = 0; k < dead[i]->nout; k++)
      if (dead[i]->out[k]) dead[i]->out[k]->producer = NULL;
    g->nodes[dead[i]->id] = NULL;
  }
  for (int i = 0; i < nin; i++)
    if ((n->in[i] = in[i])) in[i]->uses++;
  if (nattrs) memcpy(a, attrs, sizeof *a * (size_t)nattrs);
  n->attrs = a;
  n->nattrs = nattrs;
  for (int i = 0; i < nout; i++)
    if ((n->out[i] = outs[i])) outs[i]->producer = n;
  n->id = slot;
  g->nodes[slot] = n;
  return NULL;
}

void dvmc_pass_drop_unread(dvmc_graph *g, dvmc_value *v) {
  dvmc_node *n = v ? v->producer : NULL;
  if (!in_graph(g, n) || n->domain[0]) return;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k] && n->out[k]->uses) return;
  for (int k = 0; k < n->nout; k++)
    if (n->out[k]) n->out[k]->producer = NULL;
  g->nodes[n->id] = NULL;
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] && --n->in[k]->uses == 0) dvmc_pass_drop_unread(g, n->in[k]);
}

dvm_status *dvmc_pass_insert(dvmc_ctx *c, dvmc_graph *g, int at, const char *op, const char *domain,
                             dvmc_value *const *in, int nin, dvmc_value *out, const dvmc_attr *attrs, int nattrs) {
  dvmc_node *n = dvmc_node_new(c, g, op, nin, 1); /* appended: moved to `at` below */
  dvmc_attr *a = nattrs ? dvm_arena_alloc(&c->arena, (size_t)nattrs, sizeof *a) : NULL;
  if (!n || (nattrs && !a)) return dvm_status_new(DVM_OUT_OF_MEMORY, "inserting a node %s", op);
  memmove(&g->nodes[at + 1], &g->nodes[at], sizeof *g->nodes * (size_t)(g->nnodes - 1 - at));
  g->nodes[at] = n;
  for (int i = at; i < g->nnodes; i++)
    if (g->nodes[i]) g->nodes[i]->id = i;
  for (int i = 0; i < nin; i++)
    if ((n->in[i] = in[i])) in[i]->uses++;
  if (nattrs) memcpy(a, attrs, sizeof *a * (size_t)nattrs);
  n->attrs = a;
  n->nattrs = nattrs;
  n->out[0] = out;
  out->producer = n;
  return dvmc_pass_set_domain(n, domain);
}

dvm_status *dvmc_pass_set_domain(dvmc_node *n, const char *domain) {
  const dvmc_op *def = dvmc_op_find(domain, n->op);
  if (!def) return dvm_status_new(DVM_INTERNAL, "no op %s.%s in the op table", domain, n->op);
  n->domain = domain;
  n->def = def;
  return NULL;
}

dvm_status *dvmc_pass_fused_conv(dvmc_ctx *c, dvmc_graph *g, dvmc_node *n, const char *name, int64_t value) {
  dvmc_attr *attrs = dvm_arena_alloc(&c->arena, (size_t)n->nattrs + 1, sizeof *attrs);
  if (!attrs) return dvm_status_new(DVM_OUT_OF_MEMORY, "rewriting node \"%s\"", n->name);
  int na = 0;
  for (int a = 0; a < n->nattrs; a++)
    if (strcmp(n->attrs[a].name, name)) attrs[na++] = n->attrs[a];
  attrs[na++] = (dvmc_attr){.name = name, .type = DVMC_ATTR_INT, .i = value};
  dvmc_value *out = n->out[0];
  dvm_status *st = dvmc_pass_replace(c, g, &n, 1, "FusedConv", n->in, n->nin, out, attrs, na);
  if (st) return st;
  out->producer->opset = 1;
  return dvmc_pass_set_domain(out->producer, "com.microsoft");
}
