/* A zero Pad of a convolution's input folded into the convolution's pads:
 *
 *   p = Pad(x, pads[, 0])            (mode constant, pads known constants,
 *   y = Conv|FusedConv(p, W[, ...])   0 on N and C, >= 0 elsewhere)
 *     ->  y = Conv|FusedConv(x, W[, ...]) {pads += Pad's spatial pads}
 *
 * as ONNX Runtime's PadFusion does. PyTorch exports of TensorFlow-style
 * "same" padding (Hugging Face's MobileNetV2, EfficientNet) put such a Pad,
 * with its pads computed by a chain of ConstantOfShape, Concat, Reshape,
 * Slice, Transpose and Cast, before every convolution: each Pad copied the
 * activation, and, being no convolution, cut the channels-last regions of
 * pass conv_nhwc, so every conv reordered its input and output
 * (docs/performance.md). Inference knows those pads as constants; the
 * chain that computed them goes with the Pad (dvmc_pass_drop_unread).
 *
 * Proven: p is read by the convolution alone (as X) and is not a graph
 * output; the Pad has no axes input (opset 18), its value is absent or an
 * f32 constant 0, and its pads are 2 r constants for X's rank r (3 to 5);
 * the convolution has no auto_pad (or NOTSET).
 *
 * ONNX Runtime's quantize_static puts the Pad between quantized values,
 *
 *   a = DequantizeLinear(q, s, z)   p = Pad(a, pads[, 0])
 *   x = DequantizeLinear(QuantizeLinear(p, s, z), s, z)   y = Conv(x, W...)
 *     ->  y = Conv(a, W...) {pads += Pad's spatial pads}
 *
 * which folds too when all three share one scale and zero point: a's
 * elements are (q - z) s, which QuantizeLinear maps back to q exactly
 * (|q - z| <= 255, so (q - z) s / s rounds to q - z) and
 * DequantizeLinear to a's own values, and the pad's zeros go to z and
 * back to 0, the conv's own padding. Proven besides: s a one-element f32
 * constant, finite and > 0; z absent (u8 0) or a one-element u8 or i8
 * constant, q of its dtype; no block_size; p read by the QuantizeLinear
 * alone, its output by the DequantizeLinear alone, x by the conv alone (a
 * may have other readers). quantize_static's MobileNetV2 so loses its 52
 * Pads with a QuantizeLinear and a DequantizeLinear each
 * (docs/performance.md). Off: `--disable pad_conv`. */
#include <math.h>
#include <string.h>

#include "infer.h"
#include "ops.h"
#include "pass.h"

static bool conv_op(const dvmc_node *n) {
  return (!strcmp(n->op, "Conv") && !n->domain[0]) || (!strcmp(n->op, "FusedConv") && !strcmp(n->domain, "com.microsoft"));
}

/* The Pad's pads as constants: 2 r of them, r = X's rank; else -1. */
static int const_pads(const dvmc_node *pad, int64_t *out) {
  int r = pad->in[0] ? pad->in[0]->rank : -1;
  if (r < 3 || r > 5) return -1;
  if (pad->opset < 11) {
    const dvmc_attr *a = dvmc_attr_find(pad, "pads");
    if (!a || a->type != DVMC_ATTR_INTS || a->n != 2 * r) return -1;
    memcpy(out, a->ints, sizeof *out * (size_t)a->n);
    return r;
  }
  const dvmc_value *p = pad->nin > 1 ? pad->in[1] : NULL;
  if (!dvmc_value_elems_known(p) || p->nelems != 2 * r) return -1;
  for (int i = 0; i < 2 * r; i++)
    if (!dvmc_expr_is_const(p->elems[i], &out[i])) return -1;
  return r;
}

/* The Pad pads x with zeros on spatial dims only. */
static bool zero_spatial_pad(const dvmc_node *pad, int64_t *pads, int *rank) {
  if (strcmp(dvmc_attr_string(pad, "mode", "constant"), "constant")) return false;
  if (pad->opset < 11 ? dvmc_attr_find(pad, "value") && dvmc_attr_find(pad, "value")->f != 0
                      : pad->nin > 2 && pad->in[2] && !dvmc_pass_scalar_is(pad->in[2], 0.0f))
    return false;
  if (pad->nin > 3 && pad->in[3]) return false; /* axes */
  int r = const_pads(pad, pads);
  if (r < 0 || pads[0] || pads[1] || pads[r] || pads[r + 1]) return false;
  for (int i = 0; i < 2 * r; i++)
    if (pads[i] < 0) return false;
  *rank = r;
  return true;
}

/* One scale and zero point of a QuantizeLinear or DequantizeLinear. */
typedef struct {
  float s;
  int dtype; /* the quantized dtype: u8 or i8 */
  int32_t z;
} qparam;

/* n's scale and zero point when they are per tensor as the header says. */
static bool qparam_of(const dvmc_node *n, qparam *p) {
  bool dq = !strcmp(n->op, "DequantizeLinear");
  if (n->nin < 2 || dvmc_attr_int(n, "block_size", 0) || !dvmc_pass_scalar(n->in[1], &p->s) || !isfinite(p->s) ||
      !(p->s > 0))
    return false;
  const dvmc_value *zv = n->nin > 2 ? n->in[2] : NULL;
  const dvmc_tensor *z = zv ? zv->constant : NULL;
  if (zv && (!z || z->nbytes != 1 || (z->dtype != DVM_U8 && z->dtype != DVM_I8))) return false;
  p->dtype = z ? (int)z->dtype : DVM_U8;
  p->z = !z ? 0 : z->dtype == DVM_U8 ? *(const uint8_t *)z->data : *(const int8_t *)z->data;
  const dvmc_value *x = n->in[0];
  return !dq || (x && x->typed && (int)x->dtype == p->dtype);
}

static bool same_qparam(const qparam *a, const qparam *b) {
  return a->s == b->s && a->dtype == b->dtype && a->z == b->z;
}

/* The Pad that conv X x comes from through quantize_static's
 * QuantizeLinear and DequantizeLinear (the header's second form), its
 * two nodes in q[2]; NULL where the form does not hold. */
static dvmc_node *pad_behind_qdq(const dvmc_graph *g, const dvmc_value *x, dvmc_node **q) {
  dvmc_node *dq2 = dvmc_pass_only(g, x, "DequantizeLinear", 1);
  dvmc_node *q2 = dq2 ? dvmc_pass_only(g, dq2->in[0], "QuantizeLinear", 1) : NULL;
  dvmc_node *pad = q2 ? dvmc_pass_only(g, q2->in[0], "Pad", 1) : NULL;
  const dvmc_value *a = pad ? pad->in[0] : NULL;
  dvmc_node *dq1 = a ? a->producer : NULL;
  qparam p1, p2, p3;
  if (!dq1 || strcmp(dq1->op, "DequantizeLinear") || dq1->domain[0] || !qparam_of(dq1, &p1) ||
      !qparam_of(q2, &p2) || !qparam_of(dq2, &p3) || !same_qparam(&p1, &p2) || !same_qparam(&p2, &p3))
    return NULL;
  q[0] = q2, q[1] = dq2;
  return pad;
}

/* Conv n with X = the Pad's input and the Pad's pads added to its own; the
 * nodes `between` (the Pad's QuantizeLinear and DequantizeLinear, or none)
 * go with the Pad. */
static dvm_status *fold(dvmc_ctx *c, dvmc_graph *g, dvmc_node *pad, dvmc_node *const *between, int nbetween,
                        dvmc_node *n, const int64_t *pads, int r) {
  int s = r - 2;
  int64_t *sum = dvm_arena_alloc(&c->arena, (size_t)(2 * s), sizeof *sum);
  dvmc_attr *attrs = dvm_arena_alloc(&c->arena, (size_t)n->nattrs + 1, sizeof *attrs);
  dvmc_value **in = dvm_arena_alloc(&c->arena, (size_t)n->nin, sizeof *in);
  if (!sum || !attrs || !in) return dvm_status_new(DVM_OUT_OF_MEMORY, "folding node \"%s\"", pad->name);
  const dvmc_attr *own = dvmc_attr_find(n, "pads");
  for (int i = 0; i < s; i++) {
    sum[i] = pads[2 + i] + (own ? own->ints[i] : 0);
    sum[s + i] = pads[r + 2 + i] + (own ? own->ints[s + i] : 0);
  }
  int na = 0;
  for (int a = 0; a < n->nattrs; a++)
    if (strcmp(n->attrs[a].name, "pads")) attrs[na++] = n->attrs[a];
  attrs[na++] = (dvmc_attr){.name = "pads", .type = DVMC_ATTR_INTS, .n = 2 * s, .ints = sum};
  memcpy(in, n->in, sizeof *in * (size_t)n->nin);
  in[0] = pad->in[0];
  dvmc_value *pads_in = pad->opset < 11 ? NULL : pad->in[1], *value = pad->nin > 2 ? pad->in[2] : NULL;
  const char *domain = n->domain;
  int opset = n->opset;
  dvmc_node *dead[4] = {pad, n};
  memcpy(dead + 2, between, sizeof *dead * (size_t)nbetween);
  dvm_status *st = dvmc_pass_replace(c, g, dead, 2 + nbetween, n->op, in, n->nin, n->out[0], attrs, na);
  if (st) return st;
  n = n->out[0]->producer;
  n->opset = opset;
  if ((st = dvmc_pass_set_domain(n, domain))) return st;
  dvmc_pass_drop_unread(g, pads_in);
  dvmc_pass_drop_unread(g, value);
  return NULL;
}

dvm_status *dvmc_pass_pad_conv(dvmc_ctx *c, dvmc_graph *g, int *count) {
  int nn = g->nnodes; /* replacing keeps the conv in its slot */
  for (int i = 0; i < nn; i++) {
    dvmc_node *n = g->nodes[i];
    if (!n || !conv_op(n) || n->nin < 2 || n->nout != 1 || !n->out[0]) continue;
    dvmc_node *between[2], *pad = dvmc_pass_only(g, n->in[0], "Pad", 1);
    int nbetween = 0;
    if (!pad && (pad = pad_behind_qdq(g, n->in[0], between))) nbetween = 2;
    const dvmc_attr *own = dvmc_attr_find(n, "pads");
    int64_t pads[2 * DVM_MAX_RANK];
    int r;
    if (!pad || !zero_spatial_pad(pad, pads, &r) || strcmp(dvmc_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") ||
        (own && (own->type != DVMC_ATTR_INTS || own->n != 2 * (r - 2))))
      continue;
    dvm_status *st = fold(c, g, pad, between, nbetween, n, pads, r);
    if (st) return st;
    ++*count;
  }
  return NULL;
}
