/* A residual Add (and a Relu after it) as the epilogue of the Conv before
 * it, as ONNX Runtime fuses Conv + Add + Relu:
 *
 *   y = Conv(x, W, B)
 *   s = Add(y, z) or Add(z, y)            ->  r = FusedConv(x, W, B, z)
 *   [r = Relu(s)]                              {activation Relu when the Relu is there}
 *
 * FusedConv's input Z is added after the bias and before the activation;
 * the kernel copies Z into the memory the conv writes and adds by oneDNN's
 * sum post-op (ops/cpu/conv.c), so the Add's pass over y and z and the
 * Relu's are gone; with pass conv_nhwc the sum stays channels last when
 * convolutions read it (ResNet's blocks: every conv output then NHWC).
 * Proven: y, z, s (and r) are f32 of the same known dims (no broadcast),
 * y and s are read only by the next op of the pattern, the Conv has its
 * bias (FusedConv's Z comes after B; an omitted B before it is refused) and
 * is a default-domain Conv (an activation fused before the Add by conv_act
 * is not linear: that FusedConv is left alone). Where both operands are
 * such Convs (a block's downsampling path), the later one in node order
 * takes the other as Z. */
#include <string.h>

#include "ops.h"
#include "pass.h"

/* v is made by a default-domain Conv with a bias, read once (by the Add). */
static dvmc_node *conv_of(const dvmc_graph *g, const dvmc_value *v) {
  dvmc_node *n = dvmc_pass_only(g, v, "Conv", 1);
  return n && n->nin == 3 && n->in[0] && n->in[1] && n->in[2] && dvmc_pass_same_shape(n->in[0], n->in[0]) ? n
                                                                                                            : NULL;
}

/* The first node of g reading v. */
static dvmc_node *reader(const dvmc_graph *g, const dvmc_value *v) {
  for (int i = 0; i < g->nnodes; i++)
    for (int j = 0; g->nodes[i] && j < g->nodes[i]->nin; j++)
      if (g->nodes[i]->in[j] == v) return g->nodes[i];
  return NULL;
}

dvm_status *dvmc_pass_conv_add(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *add = g->nodes[i];
    if (!add || strcmp(add->op, "Add") || add->domain[0] || add->nin != 2 || add->nout != 1 ||
        add->in[0] == add->in[1] || !dvmc_pass_same_shape(add->in[0], add->in[1]) ||
        !dvmc_pass_same_shape(add->out[0], add->in[0]))
      continue;
    dvmc_node *a = conv_of(g, add->in[0]), *b = conv_of(g, add->in[1]);
    int k = b && (!a || b->id > a->id); /* the operand whose Conv takes the other as Z */
    dvmc_node *conv = k ? b : a;
    if (!conv) continue;
    dvmc_node *dead[3] = {conv, add}, *relu = add->out[0]->uses == 1 ? reader(g, add->out[0]) : NULL;
    int ndead = 2;
    if (relu && !strcmp(relu->op, "Relu") && !relu->domain[0] && relu->nin == 1 && relu->nout == 1 &&
        dvmc_pass_same_shape(relu->out[0], add->out[0]))
      dead[ndead++] = relu;
    else
      relu = NULL;
    dvmc_attr attrs[16];
    int na = 0;
    if (conv->nattrs > 15) continue;
    for (int j = 0; j < conv->nattrs; j++) attrs[na++] = conv->attrs[j];
    if (relu) attrs[na++] = (dvmc_attr){.name = "activation", .type = DVMC_ATTR_STRING, .s = "Relu"};
    dvmc_value *in[4] = {conv->in[0], conv->in[1], conv->in[2], add->in[1 - k]};
    dvmc_value *out = relu ? relu->out[0] : add->out[0];
    dvm_status *st = dvmc_pass_replace(c, g, dead, ndead, "FusedConv", in, 4, out, attrs, na);
    if (st) return st;
    out->producer->opset = 1;
    if ((st = dvmc_pass_set_domain(out->producer, "com.microsoft"))) return st;
    ++*count;
  }
  return NULL;
}
