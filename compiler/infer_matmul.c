/* The shape rules of matrix products (infer_rule.h): MatMul, Gemm,
 * FusedMatMul, Einsum, and Det. */
#include <string.h>

#include "infer_rule.h"

static const char inner[] = "they are the inner dims of a matrix product";

void inf_rule_matmul(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0], *b = n->nin > 1 ? n->in[1] : NULL;
  if (!a || !b || a->rank < 1 || b->rank < 1) return;
  int ra = a->rank, rb = b->rank;
  const dvmc_expr *d[DVM_MAX_RANK];
  int batch = (ra > rb ? ra : rb) - 2;
  if (batch < 0) batch = 0;
  int k = 0;
  for (int i = 0; i < batch; i++) { /* batch dims broadcast */
    int ia = i - (batch - (ra - 2)), ib = i - (batch - (rb - 2));
    const dvmc_expr *ea = ia >= 0 && ra >= 2 ? a->dims[ia] : dvmc_const(I->x, 1);
    const dvmc_expr *eb = ib >= 0 && rb >= 2 ? b->dims[ib] : dvmc_const(I->x, 1);
    d[k++] = inf_bcast_dim(I, n, ea, eb);
  }
  inf_require_equal(I, n, a->dims[ra - 1], b->dims[rb >= 2 ? rb - 2 : 0], inner);
  if (ra >= 2) d[k++] = a->dims[ra - 2];
  if (rb >= 2) d[k++] = b->dims[rb - 1];
  if (k <= DVM_MAX_RANK) inf_set_shape(n->out[0], k, d);
}

void inf_rule_gemm(inf *I, const dvmc_node *n) {
  const dvmc_value *a = n->in[0], *b = n->nin > 1 ? n->in[1] : NULL;
  if (!a || !b || a->rank != 2 || b->rank != 2) return;
  int ta = dvmc_attr_int(n, "transA", 0) != 0, tb = dvmc_attr_int(n, "transB", 0) != 0;
  inf_require_equal(I, n, a->dims[ta ? 0 : 1], b->dims[tb ? 1 : 0], inner);
  const dvmc_expr *d[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
  inf_set_shape(n->out[0], 2, d);
}

/* com.microsoft FusedMatMul: MatMul's rule on the operands with their
 * last two dims swapped where transA or transB says. */
void inf_rule_fused_matmul(inf *I, const dvmc_node *n) {
  if (n->nin < 2 || !n->in[0] || !n->in[1]) return;
  dvmc_value ops[2] = {*n->in[0], *n->in[1]};
  dvmc_value *p[2] = {&ops[0], &ops[1]};
  for (int k = 0; k < 2; k++) {
    if (!dvmc_attr_int(n, k ? "transB" : "transA", 0)) continue;
    if (ops[k].rank < 2) return;
    const dvmc_expr *t = ops[k].dims[ops[k].rank - 1];
    ops[k].dims[ops[k].rank - 1] = ops[k].dims[ops[k].rank - 2];
    ops[k].dims[ops[k].rank - 2] = t;
  }
  dvmc_node m = *n;
  m.in = p;
  m.nin = 2;
  inf_rule_matmul(I, &m);
}

/* Einsum without ellipses: each letter's dim from the inputs that name it
 * (repeated ones must be equal), the output's from its letters (implicit:
 * the letters named once, in alphabetical order). */
void inf_rule_einsum(inf *I, const dvmc_node *n) {
  const char *eq = dvmc_attr_string(n, "equation", NULL);
  if (!eq || strstr(eq, "...")) return;
  const dvmc_expr *dim[128] = {0};
  int count[128] = {0}, in = 0, pos = 0;
  const char *p = eq;
  for (; *p && !(p[0] == '-' && p[1] == '>'); p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == ',') {
      if (in >= n->nin || !n->in[in] || n->in[in]->rank != pos) return;
      in++, pos = 0;
    } else if (ch < 128 && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) {
      const dvmc_value *v = in < n->nin ? n->in[in] : NULL;
      if (!v || pos >= v->rank || !v->dims[pos]) return;
      if (dim[ch] && dim[ch] != v->dims[pos]) inf_require_equal(I, n, dim[ch], v->dims[pos], "einsum names them with one letter");
      if (!dim[ch]) dim[ch] = v->dims[pos];
      count[ch]++, pos++;
    } else if (ch != ' ') {
      return;
    }
  }
  if (in != n->nin - 1 || !n->in[in] || n->in[in]->rank != pos) return;
  const dvmc_expr *d[DVM_MAX_RANK];
  int r = 0;
  if (*p) {
    for (p += 2; *p; p++) {
      unsigned char ch = (unsigned char)*p;
      if (ch == ' ') continue;
      if (ch >= 128 || !dim[ch] || r == DVM_MAX_RANK) return;
      d[r++] = dim[ch];
    }
  } else {
    for (int ch = 'A'; ch <= 'z'; ch++)
      if (count[ch] == 1) {
        if (r == DVM_MAX_RANK) return;
        d[r++] = dim[ch];
      }
  }
  inf_set_shape(n->out[0], r, d);
}

/* Det: X's dims but the last two. */
void inf_rule_det(inf *I, const dvmc_node *n) {
  (void)I;
  const dvmc_value *x = n->in[0];
  if (x && x->rank >= 2) inf_set_shape(n->out[0], x->rank - 2, x->dims);
}
