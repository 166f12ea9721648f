/* Activations kept channels last (NHWC) between convolutions.
 *
 * oneDNN's fast f32 convolutions (brgconv, brdgmm_dw, the blocked 1x1)
 * read and write NHWC; dvm's tensors are NCHW, so every conv reordered X
 * in and Y out (16-24% of the convolutions' time, docs/performance.md).
 * Where a Conv or FusedConv's output y is read by convolutions alone, each
 * reading it as X or as a FusedConv's Z (the residual Add, pass conv_add):
 *
 *   y = Conv|FusedConv(x, W[, B[, Z]])   ->  y = FusedConv(...) {dvm_layout |= 2}
 *   z = Conv|FusedConv(y, W2[, B2])      ->  z = FusedConv(y, ...) {dvm_layout |= 1}
 *   u = FusedConv(v, W3, B3, y)          ->  u = FusedConv(v, W3, B3, y) {dvm_layout |= 4}
 *
 * the producer writes y channels last and every reader reads it so
 * (fused_conv's layout attribute, ops/cpu/conv.c); y's dims stay [N, C,
 * s...], only its bytes are ordered [N, s..., C]. A Conv becomes a
 * FusedConv with no activation (the same conv). Proven: y is f32 with
 * known rank, not a graph output, and every one of its uses (counted at
 * import, a subgraph's and the outputs' included) is input 0 (X) or 3 (Z)
 * of a convolution of this graph, none of them reading y as W or B. Not
 * done: chains through elementwise ops or pools (they read NCHW),
 * ConvTranspose. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "pass.h"

enum { X_LAST = 1, Y_LAST = 2, Z_LAST = 4 };

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

/* Every use of y is input 0 or 3 (Z) of a convolution of g (conv_node). */
static bool read_by_convs(const dvmc_graph *g, const dvmc_value *y) {
  int uses = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const dvmc_node *n = g->nodes[i];
    for (int j = 0; n && j < n->nin; j++) {
      if (n->in[j] != y) continue;
      if ((j != 0 && j != 3) || !conv_node(n)) return false;
      uses++;
    }
  }
  return uses > 0 && uses == y->uses;
}

dvm_status *dvmc_pass_conv_nhwc(dvmc_ctx *c, dvmc_graph *g, int *count) {
  int *layout = calloc((size_t)g->nnodes + 1, sizeof *layout);
  if (!layout) return dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *p = g->nodes[i];
    if (!conv_node(p) || !read_by_convs(g, p->out[0])) continue;
    layout[i] |= Y_LAST;
    for (int k = 0; k < g->nnodes; k++) {
      const dvmc_node *r = g->nodes[k];
      if (r && r->in[0] == p->out[0]) layout[k] |= X_LAST;
      if (r && r->nin > 3 && r->in[3] == p->out[0]) layout[k] |= Z_LAST;
    }
    ++*count;
  }
  dvm_status *st = NULL;
  int n = g->nnodes; /* replacing keeps every node in its slot */
  for (int i = 0; i < n && !st; i++)
    if (layout[i]) st = dvmc_pass_fused_conv(c, g, g->nodes[i], "dvm_layout", layout[i]);
  free(layout);
  return st;
}
