/* A QuantizeLinear read only by a DequantizeLinear as one op:
 *
 *   q = QuantizeLinear(x, s, z)   y = DequantizeLinear(q, s2, z2)
 *     ->  y = dvm.QuantizeDequantize(x, s, z, s2, z2)
 *
 * quantize_static leaves such a pair on every activation between ops that
 * have no quantized kernel here (MobileNetV2: 66, between its convolutions,
 * residual Adds, the pool and the classifier), and dvm runs those ops in
 * f32; the pair then snaps x to the quantization grid. Its kernel
 * (ops/cpu/quant_pair.c) makes y in one pass, bitwise the two kernels'
 * values, where they wrote the codes and read them back, and divides by s
 * only near a rounding tie. The pair is not dropped, as ONNX Runtime's
 * QDQFinalCleanupTransformer may when asked: the grid is part of the
 * model's results. s2 and z2 may differ from s and z (the kernel
 * dequantizes with its own pair).
 *
 * Proven: both nodes of the default domain, all five inputs present (a
 * pair without zero points stays), x and y f32, q u8 or i8 (z's dtype, as
 * z2's), each scale and zero point one element (rank 0 or [1]), no
 * block_size; q read by nothing else. Runs after conv_nhwc, which carries
 * the two nodes channels last between convolutions: the rewrite holds in
 * either layout. Off: `--disable qdq_pair`. A CPU rewrite (the kernel is
 * the CPU's). */
#include <string.h>

#include "infer.h"
#include "pass.h"

/* v is typed `dtype` with one element: rank 0, or [1]. */
static bool one_of(const dvmc_value *v, int dtype) {
  int64_t d;
  return v && v->typed && (int)v->dtype == dtype && dvmc_value_shape_known(v) &&
         (v->rank == 0 || (v->rank == 1 && dvmc_expr_is_const(v->dims[0], &d) && d == 1));
}

static bool typed_as(const dvmc_value *v, int dtype) { return v && v->typed && (int)v->dtype == dtype; }

/* dq's QuantizeLinear when the pair is as above, else NULL. */
static dvmc_node *pair_of(const dvmc_graph *g, const dvmc_node *dq) {
  if (strcmp(dq->op, "DequantizeLinear") || dq->domain[0] || dq->nin != 3 || dq->nout != 1 ||
      dvmc_attr_int(dq, "block_size", 0))
    return NULL;
  dvmc_node *q = dvmc_pass_only(g, dq->in[0], "QuantizeLinear", 1);
  if (!q || q->nin != 3 || dvmc_attr_int(q, "block_size", 0)) return NULL;
  const dvmc_value *z = q->in[2];
  int codes = z && z->typed ? (int)z->dtype : -1;
  if ((codes != DVM_U8 && codes != DVM_I8) || !typed_as(q->out[0], codes) || !one_of(z, codes) ||
      !one_of(dq->in[2], codes) || !one_of(q->in[1], DVM_F32) || !one_of(dq->in[1], DVM_F32) ||
      !typed_as(q->in[0], DVM_F32) || !typed_as(dq->out[0], DVM_F32))
    return NULL;
  return q;
}

dvm_status *dvmc_pass_qdq_pair(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = 0; i < g->nnodes; i++) {
    dvmc_node *dq = g->nodes[i], *q = dq ? pair_of(g, dq) : NULL;
    if (!q) continue;
    dvmc_node *dead[2] = {q, dq};
    dvmc_value *in[5] = {q->in[0], q->in[1], q->in[2], dq->in[1], dq->in[2]};
    dvmc_value *y = dq->out[0];
    dvm_status *st = dvmc_pass_replace(c, g, dead, 2, "QuantizeDequantize", in, 5, y, NULL, 0);
    if (!st) st = dvmc_pass_set_domain(y->producer, "dvm");
    if (st) return st;
    ++*count;
  }
  return NULL;
}
