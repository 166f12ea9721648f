/* Shape functions of ONNX Runtime's contrib ops (ops/cpu/contrib.c), over
 * the kernels' inputs.
 *
 *   "embed_layernorm" (ids [B, S], segment_ids, word [V, H], ...) -> [B, S, H], [B]
 *     (also qembed_layernorm's)
 *   "attention" (x [B, S, Hin], weights [Hin, 3H], ...) -> [B, S, H]
 *     (also qattention's)
 *   "multihead_attention" (the given ones of query, key, value, bias,
 *       key_padding_mask, attention_bias, past_key, past_value; present,
 *       num_heads and 3 more) -> y [B, S, N dv], present_key [B, N, P + L,
 *       dh], present_value [B, N, P + L, dv], qk [B, N, S, P + L] (dims:
 *       attention.h's dvm_mha_dims_of)
 *   "fused_matmul" (a, b, transA, transB, alpha, transBatchA, transBatchB)
 *       -> matmul(op(a), op(b))
 *   "fused_gemm" (a, b[, c], transA, transB, alpha, beta, 2 more) -> Gemm's */
#include <string.h>

#include "kernel.h"
#include "shapefuncs/attention.h"
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

dvm_status *dvm_mha_dims_of(const char *fn, int64_t heads, int qr, const int64_t *q, int kr, const int64_t *k,
                            int vr, const int64_t *v, int pr, const int64_t *pk, int pvr, const int64_t *pv,
                            dvm_mha_dims *d) {
  char a[DVM_SHAPE_STR_SIZE], b[DVM_SHAPE_STR_SIZE], c[DVM_SHAPE_STR_SIZE];
  int kv4 = kr == 4 && vr == 4;
  int ok = heads > 0 && qr == 3 && q[2] % heads == 0 && (kv4 || (kr == 3 && vr == 3)) && k[0] == q[0] && v[0] == q[0];
  *d = (dvm_mha_dims){.b = q[0], .s = q[1], .n = heads, .dh = ok ? q[2] / heads : 0, .kv4 = kv4};
  if (ok && kv4) {
    ok = pr < 0 && k[1] == heads && v[1] == heads && k[2] == v[2] && k[3] == d->dh;
    d->l = k[2], d->dv = v[3];
  } else if (ok) {
    ok = k[2] == q[2] && v[1] == k[1] && v[2] % heads == 0;
    d->l = k[1], d->dv = v[2] / heads;
  }
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query %s, key %s and value %s must be [B, S, D], [B, L, D] and "
                          "[B, L, Dv] (or 4-D [B, N, L, D / N] and [B, N, L, Dv / N], then without past), D and Dv "
                          "divisible by num_heads %lld", fn, dvm_shape_str(a, qr, q), dvm_shape_str(b, kr, k),
                          dvm_shape_str(c, vr, v), (long long)heads);
  if ((pr < 0) != (pvr < 0)) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_key and past_value go together", fn);
  if (pr >= 0) {
    const int64_t want[2][4] = {{d->b, heads, pk[2], d->dh}, {d->b, heads, pk[2], d->dv}};
    const int64_t *got[2] = {pk, pv};
    const int rk[2] = {pr, pvr};
    for (int i = 0; i < 2; i++)
      if (rk[i] != 4 || memcmp(got[i], want[i], sizeof want[i]))
        return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s must be %s", fn, i ? "past_value" : "past_key",
                              dvm_shape_str(a, rk[i], got[i]), dvm_shape_str(b, 4, want[i]));
    d->p = pk[2];
  }
  return NULL;
}

static dvm_status *shapefn_multihead_attention(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "multihead_attention";
  int r[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, k = 0;
  const int64_t *d[8] = {0};
  int64_t present, heads;
  dvm_mha_dims m;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 8, 13, nout, 4);
  if (!st) st = dvm_attr_int(fn, "present", &in[nin - 5], &present);
  if (!st) st = dvm_attr_int(fn, "num_heads", &in[nin - 4], &heads);
  for (int i = 0; i < 8 && !st; i++) {
    if (!(present >> i & 1)) continue;
    if (k >= nin - 5) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: fewer inputs than `present` names", fn);
    else st = dvm_shape_arg(fn, &in[k], k, &r[i], &d[i]);
    k++;
  }
  if (!st && (present & 7) != 7) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query, key and value must be given", fn);
  if (!st) st = dvm_mha_dims_of(fn, heads, r[0], d[0], r[1], d[1], r[2], d[2], r[6], d[6], r[7], d[7], &m);
  if (st) return st;
  int64_t t = m.p + m.l;
  dvm_shape_set(&out[0], 3, (int64_t[]){m.b, m.s, m.n * m.dv});
  dvm_shape_set(&out[1], 4, (int64_t[]){m.b, m.n, t, m.dh});
  dvm_shape_set(&out[2], 4, (int64_t[]){m.b, m.n, t, m.dv});
  dvm_shape_set(&out[3], 4, (int64_t[]){m.b, m.n, m.s, t});
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
