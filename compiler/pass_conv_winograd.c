/* 3x3 convolutions by Winograd's minimal filtering, where oneDNN has it:
 *
 *   y = Conv|FusedConv(x, W[, B[, Z]])   ->  y = FusedConv(...) {dvm_algo = 1}
 *
 * for a 2-D conv with W [M, C, 3, 3] (constant dims, M and C at least 16:
 * oneDNN's Winograd kernels work on 16-channel blocks, padding the last,
 * so fewer channels would be mostly padding), group 1,
 * strides and dilations 1 (absent or all 1), on f32 X. fused_conv's algo 1
 * asks oneDNN for its Winograd convolution (ops/cpu/conv.c: F(2x2, 3x3)
 * or F(4x4, 3x3), AVX-512 only) and takes its choice of the direct
 * kernels where it has none for the call or where an output image has
 * fewer than half as many pixels as channels. Winograd trades multiplications
 * for transforms of the input and output tiles: ResNet's 3x3 convs take
 * half the time, and round about twice as far from the exact sum as the
 * direct kernel (docs/performance.md). Off: `--disable conv_winograd`. */
#include <string.h>

#include "ops.h"
#include "pass.h"

/* Attribute `name` of n is absent or every value of it is 1. */
static bool ones(const dvmc_node *n, const char *name) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  if (!a) return true;
  if (a->type != DVMC_ATTR_INTS) return false;
  for (int i = 0; i < a->n; i++)
    if (a->ints[i] != 1) return false;
  return true;
}

static bool winograd_shape(const dvmc_node *n) {
  bool conv = !strcmp(n->op, "Conv") && !n->domain[0];
  bool fused = !strcmp(n->op, "FusedConv") && !strcmp(n->domain, "com.microsoft");
  if (!(conv || fused) || n->nout != 1 || !n->out[0] || n->nin < 2 || !n->in[0] || !n->in[1]) return false;
  const dvmc_value *x = n->in[0], *w = n->in[1];
  int64_t m, c, k0, k1;
  return dvmc_pass_same_shape(x, x) && x->rank == 4 && w->rank == 4 && dvmc_expr_is_const(w->dims[0], &m) &&
         dvmc_expr_is_const(w->dims[1], &c) && m >= 16 && c >= 16 &&
         dvmc_expr_is_const(w->dims[2], &k0) && dvmc_expr_is_const(w->dims[3], &k1) && k0 == 3 && k1 == 3 &&
         dvmc_attr_int(n, "group", 1) == 1 &&
         ones(n, "strides") && ones(n, "dilations") && dvmc_attr_int(n, "dvm_algo", 0) == 0;
}

dvm_status *dvmc_pass_conv_winograd(dvmc_ctx *c, dvmc_graph *g, int *count) {
  int n = g->nnodes; /* replacing keeps every node in its slot */
  for (int i = 0; i < n; i++) {
    if (!g->nodes[i] || !winograd_shape(g->nodes[i])) continue;
    dvm_status *st = dvmc_pass_fused_conv(c, g, g->nodes[i], "dvm_algo", 1);
    if (st) return st;
    ++*count;
  }
  return NULL;
}
