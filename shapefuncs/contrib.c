/* Shape functions of ONNX Runtime's contrib ops (ops/cpu/contrib.c), over
 * the kernels' inputs.
 *
 *   "embed_layernorm" (ids [B, S], segment_ids, word [V, H], ...) -> [B, S, H], [B]
 *     (also qembed_layernorm's)
 *   "attention" (x [B, S, Hin], weights [Hin, 3H], ...) -> [B, S, H]
 *     (also qattention's)
 *   "multihead_attention" (query [B, S, D], key, value [B, L, Dv], ...)
 *       -> [B, S, Dv]
 *   "fused_matmul" (a, b, transA, transB, alpha, transBatchA, transBatchB)
 *       -> matmul(op(a), op(b))
 *   "fused_gemm" (a, b[, c], transA, transB, alpha, beta, 2 more) -> Gemm's */
#include <string.h>

#include "kernel.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/matmul.h"
#include "shapefuncs/shape.h"

static dvm_status *shapefn_embed_layernorm(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int ri, rw;
  const int64_t *ids, *word;
  dvm_status *st = dvm_shape_check_counts("embed_layernorm", nin, 8, 19, nout, 2);
  if (!st) st = dvm_shape_arg("embed_layernorm", &in[0], 0, &ri, &ids);
  if (!st) st = dvm_shape_arg("embed_layernorm", &in[2], 2, &rw, &word);
  if (st) return st;
  if (ri != 2 || rw != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "embed_layernorm: ids and the word table must be 2-D");
  dvm_shape_set(&out[0], 3, (int64_t[]){ids[0], ids[1], word[1]});
  dvm_shape_set(&out[1], 1, ids);
  return NULL;
}

static dvm_status *shapefn_attention(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, rw;
  const int64_t *x, *w;
  dvm_status *st = dvm_shape_check_counts("attention", nin, 7, 12, nout, 1);
  if (!st) st = dvm_shape_arg("attention", &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg("attention", &in[1], 1, &rw, &w);
  if (st) return st;
  if (rx != 3 || rw != 2 || w[1] % 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "attention: x must be [B, S, Hin] and weights [Hin, 3H]");
  dvm_shape_set(&out[0], 3, (int64_t[]){x[0], x[1], w[1] / 3});
  return NULL;
}

static dvm_status *shapefn_multihead_attention(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "multihead_attention";
  int rq, rv;
  const int64_t *q, *v;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 8, 11, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rq, &q);
  if (!st) st = dvm_shape_arg(fn, &in[2], 2, &rv, &v);
  if (st) return st;
  if (rq != 3 || rv != 3) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query and value must be 3-D", fn);
  dvm_shape_set(&out[0], 3, (int64_t[]){q[0], q[1], v[2]});
  return NULL;
}

static dvm_status *shapefn_fused_matmul(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "fused_matmul";
  int r[2], ry;
  const int64_t *d[2];
  int64_t dims[2][DVM_MAX_RANK], t, y[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 7, 7, nout, 1);
  for (int k = 0; k < 2 && !st; k++) {
    st = dvm_shape_arg(fn, &in[k], k, &r[k], &d[k]);
    if (!st) st = dvm_attr_int(fn, k ? "transB" : "transA", &in[2 + k], &t);
    if (st) break;
    memcpy(dims[k], d[k], sizeof(int64_t) * (size_t)r[k]);
    if (t && r[k] < 2) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a transposed operand must have rank >= 2", fn);
    if (t) dims[k][r[k] - 1] = d[k][r[k] - 2], dims[k][r[k] - 2] = d[k][r[k] - 1];
  }
  if (!st) st = dvm_matmul_shape(r[0], dims[0], r[1], dims[1], &ry, y);
  if (!st) dvm_shape_set(&out[0], ry, y);
  return st;
}

static dvm_status *shapefn_fused_gemm(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "fused_gemm";
  int ra, rb, rc = -1, ta, tb;
  const int64_t *a, *b, *c = NULL;
  double alpha, beta;
  int64_t y[2];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 8, 9, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &ra, &a);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &rb, &b);
  if (!st && nin == 9) st = dvm_shape_arg(fn, &in[2], 2, &rc, &c);
  if (!st) st = dvm_gemm_attrs(in + nin - 6, &ta, &tb, &alpha, &beta);
  if (!st) st = dvm_gemm_shape(ra, a, rb, b, rc, c, ta, tb, y);
  if (!st) dvm_shape_set(&out[0], 2, y);
  return st;
}

const dvm_shapefn_def dvm_shapefn_contrib_table[] = {
    {"embed_layernorm", shapefn_embed_layernorm},
    {"attention", shapefn_attention},
    {"multihead_attention", shapefn_multihead_attention},
    {"fused_matmul", shapefn_fused_matmul},
    {"fused_gemm", shapefn_fused_gemm},
    {NULL, NULL},
};
