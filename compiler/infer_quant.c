/* The shape rules of quantized ops (infer_rule.h): DynamicQuantizeLinear,
 * QLinearMatMul, QLinearConv, and the block-quantized MatMulNBits and
 * GatherBlockQuantized. */
#include "infer_rule.h"

/* DynamicQuantizeLinear: y as x; its scale and zero point are scalars. */
void inf_rule_dynamic_quantize(inf *I, const dvmc_node *n) {
  (void)I;
  inf_same_shape(n, 0);
  for (int i = 1; i < n->nout; i++) inf_set_shape(n->out[i], 0, NULL);
}

/* QLinearMatMul and QLinearConv: MatMul's and Conv's rules on a and b (x
 * and w), which sit at inputs 0 and 3 between their scales and zero
 * points. */
static void on_operands(inf *I, const dvmc_node *n, void (*rule)(inf *, const dvmc_node *)) {
  if (n->nin < 4) return;
  dvmc_value *ops[2] = {n->in[0], n->in[3]};
  dvmc_node m = *n;
  m.in = ops;
  m.nin = 2;
  rule(I, &m);
}

void inf_rule_qlinear_matmul(inf *I, const dvmc_node *n) { on_operands(I, n, inf_rule_matmul); }

void inf_rule_qlinear_conv(inf *I, const dvmc_node *n) { on_operands(I, n, inf_rule_conv); }

/* MatMulNBits: A's shape with its last dim N. */
void inf_rule_matmul_nbits(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0];
  if (!a || a->rank < 1) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  for (int i = 0; i < a->rank; i++) d[i] = a->dims[i];
  d[a->rank - 1] = dvmc_const(I->x, dvmc_attr_int(n, "N", 0));
  inf_set_shape(n->out[0], a->rank, d);
}

/* GatherBlockQuantized (gather_axis 0, the only one taken): indices'
 * dims, then data's after the first, the last times the codes per byte. */
void inf_rule_gather_block_quantized(inf *I, const dvmc_node *n) {
  const dvmc_value *x = n->in[0], *idx = n->nin > 1 ? n->in[1] : NULL;
  int64_t bits = dvmc_attr_int(n, "bits", 4);
  if (!x || !idx || x->rank < 2 || idx->rank < 0 || x->rank + idx->rank - 1 > DVM_MAX_RANK ||
      inf_norm_axis(dvmc_attr_int(n, "gather_axis", 0), x->rank) != 0 || (bits != 4 && bits != 8))
    return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  for (int i = 0; i < idx->rank; i++) d[r++] = idx->dims[i];
  for (int i = 1; i < x->rank; i++) d[r++] = x->dims[i];
  if (d[r - 1]) d[r - 1] = dvmc_mul(I->x, d[r - 1], dvmc_const(I->x, 8 / bits));
  inf_set_shape(n->out[0], r, d);
}
