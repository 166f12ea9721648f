/* MatMul, Gemm and Einsum shapes (see matmul.h). */
#include "attr.h"
#include "broadcast.h"
#include "kernel.h"
#include "matmul.h"
#include "shape.h"

dvm_status *dvm_matmul_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                             int64_t *out) {
  char sa[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE];
  if (ra < 1 || rb < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: %s x %s: operands need rank >= 1",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b));
  int64_t ka = a[ra - 1], kb = rb >= 2 ? b[rb - 2] : b[0];
  if (ka != kb)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: %s x %s: inner dims %lld != %lld",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b), (long long)ka,
                          (long long)kb);
  int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, r;
  int bad = dvm_broadcast_dims(ba, a, bb, b, &r, out);
  if (bad) /* named as a dim of the operands, counted from the right */
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: %s x %s: batch dim %d %lld != %lld",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b), bad - 2,
                          (long long)a[ba + bad], (long long)b[bb + bad]);
  if (ra >= 2) out[r++] = a[ra - 2];
  if (rb >= 2) out[r++] = b[rb - 1];
  *rank = r;
  return NULL;
}

dvm_status *dvm_shapefn_matmul(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int ra, rb, r;
  const int64_t *a, *b;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("matmul", nin, 2, 2, nout, 1);
  if (!st) st = dvm_shape_arg("matmul", &in[0], 0, &ra, &a);
  if (!st) st = dvm_shape_arg("matmul", &in[1], 1, &rb, &b);
  if (!st) st = dvm_matmul_shape(ra, a, rb, b, &r, dims);
  if (st) return st;
  dvm_shape_set(&out[0], r, dims);
  return NULL;
}

/* Shape function "matmul_bias": A, B, bias, activation -> A B's shape (the
 * kernel checks the bias). */
static dvm_status *shapefn_matmul_bias(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("matmul_bias", nin, 4, 4, nout, 1);
  return st ? st : dvm_shapefn_matmul(in, 2, out, nout);
}

dvm_status *dvm_gemm_shape(int ra, const int64_t *a, int rb, const int64_t *b, int rc,
                           const int64_t *c, int trans_a, int trans_b, int64_t out[2]) {
  char sa[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE], sc[DVM_SHAPE_STR_SIZE];
  if (ra != 2 || rb != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gemm: A %s and B %s must both be 2-D",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b));
  int64_t m = a[trans_a], ka = a[!trans_a], kb = b[trans_b], n = b[!trans_b];
  if (ka != kb)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "gemm: A %s (transA %d) x B %s (transB %d): inner dims %lld != %lld",
                          dvm_shape_str(sa, ra, a), trans_a, dvm_shape_str(sb, rb, b), trans_b,
                          (long long)ka, (long long)kb);
  out[0] = m;
  out[1] = n;
  if (rc < 0) return NULL;
  /* unidirectional: C stretches to [M, N], never the other way */
  int bad = rc > 2 ? -3 : 0;
  for (int k = 1; k <= rc && k <= 2 && !bad; k++)
    if (c[rc - k] != 1 && c[rc - k] != out[2 - k]) bad = -k;
  if (bad)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gemm: C %s does not broadcast to %s",
                          dvm_shape_str(sc, rc, c), dvm_shape_str(sa, 2, out));
  return NULL;
}

dvm_status *dvm_gemm_attrs(const dvm_value attrs[4], int *trans_a, int *trans_b,
                          double *alpha, double *beta) {
  dvm_status *st = dvm_attr_flag("gemm", "transA", &attrs[0], trans_a);
  if (!st) st = dvm_attr_flag("gemm", "transB", &attrs[1], trans_b);
  if (!st) st = dvm_attr_float("gemm", "alpha", &attrs[2], alpha);
  if (!st) st = dvm_attr_float("gemm", "beta", &attrs[3], beta);
  return st;
}

/* (A, B[, C], transA:int, transB:int, alpha:float, beta:float) */
static dvm_status *shapefn_gemm(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("gemm", nin, 6, 7, nout, 1);
  if (st) return st;
  int nt = nin - 4, rank[3] = {0, 0, -1}, ta = 0, tb = 0;
  const int64_t *dims[3] = {NULL, NULL, NULL};
  for (int i = 0; i < nt && !st; i++) st = dvm_shape_arg("gemm", &in[i], i, &rank[i], &dims[i]);
  double alpha, beta;
  if (!st) st = dvm_gemm_attrs(&in[nt], &ta, &tb, &alpha, &beta);
  int64_t dims_out[2];
  if (!st)
    st = dvm_gemm_shape(rank[0], dims[0], rank[1], dims[1], rank[2], dims[2], ta, tb, dims_out);
  if (st) return st;
  dvm_shape_set(&out[0], 2, dims_out);
  return NULL;
}

/* Shape function "gemm_act": gemm's, with the activation attribute last. */
static dvm_status *shapefn_gemm_act(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("gemm_act", nin, 7, 8, nout, 1);
  return st ? st : shapefn_gemm(in, nin - 1, out, nout);
}

/* Einsum's output shape from the compiler's encoding: per output dim, the
 * (input, axis) codes whose dims it is, broadcast (see matmul.h). */
static dvm_status *shapefn_einsum(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("einsum", nin, 2, 17, nout, 1);
  int orank = 0, rank[16];
  const int64_t *codes = NULL, *dims[16];
  if (!st) st = dvm_attr_shape("einsum", "dims", &in[nin - 1], &orank, &codes);
  for (int i = 0; i < nin - 1 && !st; i++) st = dvm_shape_arg("einsum", &in[i], i, &rank[i], &dims[i]);
  if (st) return st;
  int64_t res[DVM_MAX_RANK];
  for (int d = 0; d < orank; d++) {
    int64_t e = codes[d];
    if (e < 0 || e >= (int64_t)1 << 56)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "einsum: dims[%d] = %lld is not a dim code",
                            d, (long long)e);
    int64_t code = e & 0xff, first = -1;
    for (int j = 1; j <= 7; j++) {
      int x = (int)(code >> 4), axis = (int)(code & 15);
      if (x >= nin - 1 || axis >= rank[x])
        return dvm_status_new(DVM_INVALID_ARGUMENT,
                              "einsum: dims[%d] names input %d axis %d, which %s", d, x, axis,
                              x >= nin - 1 ? "is not an input" : "is past its rank");
      int64_t v = dims[x][axis];
      if (first < 0 || res[d] == 1) { /* the first source, or one that stretches */
        first = code;
        res[d] = v;
      } else if (v != 1 && v != res[d]) {
        return dvm_status_new(DVM_INVALID_ARGUMENT,
                              "einsum: output dim %d: input %d axis %d is %lld but input %d "
                              "axis %d is %lld",
                              d, (int)(first >> 4), (int)(first & 15), (long long)res[d], x, axis,
                              (long long)v);
      }
      int64_t next = (e >> (8 * j)) & 0xff;
      if (!next) break;
      code = next - 1;
    }
  }
  dvm_shape_set(&out[0], orank, res);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_matmul_table[] = {
    {"matmul", dvm_shapefn_matmul, .dims_only = true},
    {"matmul_bias", shapefn_matmul_bias, .dims_only = true},
    {"gemm", shapefn_gemm},
    {"gemm_act", shapefn_gemm_act},
    {"einsum", shapefn_einsum},
    {NULL, NULL},
};
