/* The f32 output of an integer product as one kernel: what ONNX Runtime's
 * quantize_dynamic makes of a MatMul,
 *
 *   p = MatMulInteger(a, b, a_zp, b_zp)   f = Cast(p, to f32)
 *   s = Mul(a_scale, b_scale)             y = Mul(f, s)   [z = Add(y, bias)]
 *
 * (Mul and Add in either operand order) becomes y (or z) =
 * com.microsoft.MatMulIntegerToFloat(a, b, a_scale, b_scale, a_zp, b_zp[,
 * bias]), as ONNX Runtime's own optimizer does: its kernel
 * (ops/cpu/quant.c) writes acc * scale[n] + bias[n] from the i32 product
 * while it is in cache, where the separate kernels wrote the i32 product,
 * an f32 copy, the scaled copy and the biased one. The kernel computes
 * a_scale * b_scale[n], (float)acc times that, plus the bias, each rounded
 * in f32 as the Mul, Cast, Mul and Add kernels do, so results are bitwise
 * those of the rewritten ops (a zero may change sign where there is no
 * bias: it adds +0). Proven: the product's both zero points given, b of
 * rank >= 2, p read only by the Cast, f only by its Mul, y only by the Add
 * where one is taken; one of the scales a one-element f32 (a_scale), the
 * other f32 with one element or [N] (b_scale), N the product's last dim
 * (the same expression); bias f32 [N]; y (and z) of f's known dims. s
 * stays where something else reads it; the Mul is rewritten without the
 * bias where no such Add reads it.
 *
 * A CPU rewrite: off in builds for CUDA, as the other com.microsoft
 * rewrites. */
#include <string.h>

#include "pass.h"

static bool is_f32(const dvmc_value *v) { return v && v->typed && v->dtype == DVM_F32; }

/* v is one f32 element: rank 0, or every dim the constant 1. */
static bool one_f32(const dvmc_value *v) {
  if (!is_f32(v) || v->rank < 0) return false;
  for (int i = 0; i < v->rank; i++) {
    int64_t d;
    if (!dvmc_expr_is_const(v->dims[i], &d) || d != 1) return false;
  }
  return true;
}

/* v is f32 [n] with n the expression `last`. */
static bool vec_of(const dvmc_value *v, const dvmc_expr *last) {
  return is_f32(v) && v->rank == 1 && v->dims[0] == last;
}

/* ONNX's TensorProto.FLOAT, Cast's `to` */
#define ONNX_FLOAT 1

/* mul is Mul(Cast(MatMulInteger(...)), Mul(a_scale, b_scale)) as above:
 * the product (*mi), the Cast (*cast), the scales' Mul (*sm) and which of
 * its inputs is a_scale (*ai); else false. */
static bool scaled_product(const dvmc_graph *g, const dvmc_node *mul, dvmc_node **mi, dvmc_node **cast_out,
                           dvmc_node **sm, int *ai) {
  if (strcmp(mul->op, "Mul") || mul->domain[0] || mul->nin != 2 || mul->nout != 1) return false;
  for (int k = 0; k < 2; k++) {
    dvmc_node *cast = dvmc_pass_only(g, mul->in[k], "Cast", 1);
    dvmc_node *m = cast && cast->nin == 1 ? dvmc_pass_only(g, cast->in[0], "MatMulInteger", 1) : NULL;
    dvmc_value *f = mul->in[k], *s = mul->in[1 - k];
    if (!m || dvmc_attr_int(cast, "to", 0) != ONNX_FLOAT || !dvmc_pass_same_shape(f, mul->out[0]) || f->rank < 1 ||
        m->nin != 4 || !m->in[2] || !m->in[3] || !m->in[1] || !m->in[1]->typed || m->in[1]->rank < 2)
      continue;
    dvmc_node *s_mul = s ? s->producer : NULL;
    if (!s_mul || strcmp(s_mul->op, "Mul") || s_mul->domain[0] || s_mul->nin != 2 || s_mul->nout != 1 ||
        !is_f32(s))
      continue;
    const dvmc_expr *n = f->dims[f->rank - 1];
    if (m->in[1]->dims[m->in[1]->rank - 1] != n) continue;
    for (int a = 0; a < 2; a++) {
      const dvmc_value *as = s_mul->in[a], *bs = s_mul->in[1 - a];
      if (one_f32(as) && (one_f32(bs) || vec_of(bs, n))) {
        *mi = m;
        *cast_out = cast;
        *sm = s_mul;
        *ai = a;
        return true;
      }
    }
  }
  return false;
}

dvm_status *dvmc_pass_quant_float(dvmc_ctx *c, dvmc_graph *g, int *count) {
  /* from the end, so an Add is matched before the Mul under it */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    dvmc_node *n = g->nodes[i], *mul = NULL, *add = NULL, *mi, *cast, *sm;
    dvmc_value *bias = NULL;
    int ai;
    if (!n) continue;
    if (!strcmp(n->op, "Add") && !n->domain[0] && n->nin == 2 && n->nout == 1) {
      for (int k = 0; k < 2 && !add; k++) {
        dvmc_node *m = dvmc_pass_only(g, n->in[k], "Mul", 1);
        if (m && scaled_product(g, m, &mi, &cast, &sm, &ai) && dvmc_pass_same_shape(n->in[k], n->out[0]) &&
            vec_of(n->in[1 - k], n->in[k]->dims[n->in[k]->rank - 1]))
          mul = m, add = n, bias = n->in[1 - k];
      }
    }
    if (!add && !(scaled_product(g, n, &mi, &cast, &sm, &ai) && (mul = n))) continue;
    dvmc_node *dead[5] = {mi, cast, mul};
    int ndead = 3;
    if (add) dead[ndead++] = add;
    if (sm->out[0]->uses == 1) dead[ndead++] = sm;
    dvmc_value *in[7] = {mi->in[0], mi->in[1], sm->in[ai], sm->in[1 - ai], mi->in[2], mi->in[3], bias};
    dvmc_value *out = add ? add->out[0] : mul->out[0];
    dvm_status *st = dvmc_pass_replace(c, g, dead, ndead, "MatMulIntegerToFloat", in, bias ? 7 : 6, out, NULL, 0);
    if (!st) st = dvmc_pass_set_domain(out->producer, "com.microsoft");
    if (st) return st;
    ++*count;
  }
  return NULL;
}
