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
 * of a convolution of this graph, none of them reading y as W or B, or
 * input 0 of one of these pools:
 *
 *   m = MaxPool(y)            ->  m = dvm.MaxPoolNhwc(y)   (m channels last too)
 *   g = GlobalAveragePool(y)  ->  g = dvm.GlobalAveragePoolNhwc(y)
 *
 * a MaxPool (f32, rank 3 to 5, no Indices output) whose output m is read by
 * convolutions alone (as X or Z, which then read it channels last; m's
 * dims known, so not after a ceil_mode pool, whose dims inference leaves
 * open), or any GlobalAveragePool (its [N, C, 1...] output is the same
 * bytes either way). Not done: chains through elementwise ops, other pools,
 * Resize or Concat (they read NCHW), ConvTranspose. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "pass.h"

enum { X_LAST = 1, Y_LAST = 2, Z_LAST = 4, POOL = 8 }; /* POOL: a pool made channels last */

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

static bool read_by_convs(const dvmc_graph *g, const dvmc_value *y, bool pools);

/* n is a default-domain `op` with input X (f32, rank 3 to 5) and one output. */
static bool one_in_out(const dvmc_node *n, const char *op) {
  return n && !strcmp(n->op, op) && !n->domain[0] && n->nin == 1 && n->in[0] && n->out[0] &&
         (n->nout == 1 || (n->nout == 2 && !n->out[1])) && dvmc_pass_same_shape(n->in[0], n->in[0]) &&
         n->in[0]->rank >= 3 && n->in[0]->rank <= 5;
}

/* n is a pool that can read X channels last: a MaxPool (values only) whose
 * output only convolutions read (it then writes that channels last too), or
 * a GlobalAveragePool (its [N, C, 1...] output is the same bytes either way). */
static bool pool_node(const dvmc_graph *g, const dvmc_node *n) {
  return (one_in_out(n, "MaxPool") && read_by_convs(g, n->out[0], false)) || one_in_out(n, "GlobalAveragePool");
}

/* Every use of y is input 0 or 3 (Z) of a convolution of g (conv_node), or
 * (pools) input 0 of a pool_node. */
static bool read_by_convs(const dvmc_graph *g, const dvmc_value *y, bool pools) {
  int uses = 0;
  for (int i = 0; i < g->nnodes; i++) {
    const dvmc_node *n = g->nodes[i];
    for (int j = 0; n && j < n->nin; j++) {
      if (n->in[j] != y) continue;
      if (!(((j == 0 || j == 3) && conv_node(n)) || (pools && j == 0 && pool_node(g, n)))) return false;
      uses++;
    }
  }
  return uses > 0 && uses == y->uses;
}

/* The convolutions of g reading v get X_LAST or Z_LAST. */
static void mark_readers(const dvmc_graph *g, const dvmc_value *v, int *layout) {
  for (int k = 0; k < g->nnodes; k++) {
    const dvmc_node *r = g->nodes[k];
    if (!r || !conv_node(r)) continue;
    if (r->in[0] == v) layout[k] |= X_LAST;
    if (r->nin > 3 && r->in[3] == v) layout[k] |= Z_LAST;
  }
}

/* Pool n as its channels-last op (dvm.MaxPoolNhwc, dvm.GlobalAveragePoolNhwc). */
static dvm_status *pool_nhwc(dvmc_ctx *c, dvmc_graph *g, dvmc_node *n) {
  dvmc_value *out = n->out[0];
  const char *op = !strcmp(n->op, "MaxPool") ? "MaxPoolNhwc" : "GlobalAveragePoolNhwc";
  dvm_status *st = dvmc_pass_replace(c, g, &n, 1, op, n->in, n->nin, out, n->attrs, n->nattrs);
  return st ? st : dvmc_pass_set_domain(out->producer, "dvm");
}

dvm_status *dvmc_pass_conv_nhwc(dvmc_ctx *c, dvmc_graph *g, int *count) {
  int *layout = calloc((size_t)g->nnodes + 1, sizeof *layout);
  if (!layout) return dvm_status_new(DVM_OUT_OF_MEMORY, "pass conv_nhwc");
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *p = g->nodes[i];
    if (!conv_node(p) || !read_by_convs(g, p->out[0], true)) continue;
    layout[i] |= Y_LAST;
    mark_readers(g, p->out[0], layout);
    for (int k = 0; k < g->nnodes; k++) {
      dvmc_node *r = g->nodes[k];
      if (!r || r->in[0] != p->out[0] || conv_node(r)) continue;
      layout[k] |= POOL; /* a pool_node (read_by_convs): its output's readers read it channels last */
      if (!strcmp(r->op, "MaxPool")) mark_readers(g, r->out[0], layout);
      ++*count;
    }
    ++*count;
  }
  dvm_status *st = NULL;
  int n = g->nnodes; /* replacing keeps every node in its slot */
  for (int i = 0; i < n && !st; i++)
    if (layout[i] & POOL) st = pool_nhwc(c, g, g->nodes[i]);
    else if (layout[i]) st = dvmc_pass_fused_conv(c, g, g->nodes[i], "dvm_layout", layout[i]);
  free(layout);
  return st;
}
