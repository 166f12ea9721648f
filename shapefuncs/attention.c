/* Shape functions of the ONNX attention ops (ops/cpu/attention.c), over
 * the kernels' inputs and attributes.
 *
 *   "sdpa" (Q, K, V, the present optional inputs, 9 attributes: present,
 *       is_causal, q_num_heads, kv_num_heads, ...) -> Y, present_key,
 *       present_value, qk_matmul_output
 *     Y is Q's shape with V's head size ([B, Hq, Sq, Dv] or
 *     [B, Sq, Hq * Dv]); present_key [B, Hkv, P + Skv, D], present_value
 *     the same with Dv, qk_matmul_output [B, Hq, Sq, P + Skv].
 *   "group_query_attention" (the given ones of query, key, value,
 *       past_key, past_value, seqlens_k, total_sequence_length, ...; 9
 *       attributes: present, num_heads, kv_num_heads, ...) -> output
 *       [B, S, Hq D], present_key and present_value [B, Hkv, max(total,
 *       P), D]: total_sequence_length's value is read. */
#include "shapefuncs/attention.h"

#include <string.h>

#include "kernel.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"

dvm_status *dvm_sdpa_dims_of(const char *fn, int qr, const int64_t *q, int kr, const int64_t *k, int vr,
                             const int64_t *v, int pr, const int64_t *p, int64_t q_heads, int64_t kv_heads,
                             dvm_sdpa_dims *d) {
  char s[3][DVM_SHAPE_STR_SIZE];
  if ((qr != 3 && qr != 4) || kr != qr || vr != qr)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Q %s, K %s and V %s must all be 3-D or all 4-D", fn,
                          dvm_shape_str(s[0], qr, q), dvm_shape_str(s[1], kr, k), dvm_shape_str(s[2], vr, v));
  d->rank = qr;
  d->b = q[0];
  if (qr == 4) {
    d->hq = q[1], d->sq = q[2], d->dh = q[3], d->hkv = k[1], d->skv = k[2], d->dv = v[3];
    if (k[3] != d->dh || v[0] != d->b || k[0] != d->b || v[1] != d->hkv || v[2] != d->skv)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Q %s, K %s and V %s do not fit [B, H, S, head size]", fn,
                            dvm_shape_str(s[0], qr, q), dvm_shape_str(s[1], kr, k), dvm_shape_str(s[2], vr, v));
  } else {
    if (q_heads <= 0 || kv_heads <= 0 || q[2] % q_heads || k[2] % kv_heads || v[2] % kv_heads)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: 3-D Q %s, K %s and V %s need q_num_heads and kv_num_heads "
                            "(%lld, %lld) dividing their hidden sizes", fn, dvm_shape_str(s[0], qr, q),
                            dvm_shape_str(s[1], kr, k), dvm_shape_str(s[2], vr, v), (long long)q_heads,
                            (long long)kv_heads);
    d->hq = q_heads, d->sq = q[1], d->dh = q[2] / q_heads, d->hkv = kv_heads, d->skv = k[1], d->dv = v[2] / kv_heads;
    if (k[2] / kv_heads != d->dh || k[0] != d->b || v[0] != d->b || v[1] != d->skv)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Q %s, K %s and V %s do not fit [B, S, heads * head size]", fn,
                            dvm_shape_str(s[0], qr, q), dvm_shape_str(s[1], kr, k), dvm_shape_str(s[2], vr, v));
  }
  if (d->hkv <= 0 || d->hq % d->hkv)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %lld q heads are not a multiple of %lld kv heads", fn,
                          (long long)d->hq, (long long)d->hkv);
  d->past = 0;
  if (pr >= 0) {
    if (pr != 4 || p[0] != d->b || p[1] != d->hkv || p[3] != d->dh)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_key %s must be [%lld, %lld, past, %lld]", fn,
                            dvm_shape_str(s[0], pr, p), (long long)d->b, (long long)d->hkv, (long long)d->dh);
    d->past = p[2];
  }
  return NULL;
}

static dvm_status *shapefn_sdpa(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "sdpa";
  int r[4] = {-1, -1, -1, -1};
  const int64_t *dims[4] = {0};
  int64_t present, qh, kvh;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 12, 16, nout, 4);
  if (!st) st = dvm_attr_int(fn, "present", &in[nin - 9], &present);
  if (!st) st = dvm_attr_int(fn, "q_num_heads", &in[nin - 7], &qh);
  if (!st) st = dvm_attr_int(fn, "kv_num_heads", &in[nin - 6], &kvh);
  for (int i = 0; i < 3 && !st; i++) st = dvm_shape_arg(fn, &in[i], i, &r[i], &dims[i]);
  if (!st && (present & (1 << 4))) { /* past_key follows the mask when there is one */
    int at = 3 + ((present >> 3) & 1);
    st = dvm_shape_arg(fn, &in[at], at, &r[3], &dims[3]);
  }
  dvm_sdpa_dims d;
  if (!st) st = dvm_sdpa_dims_of(fn, r[0], dims[0], r[1], dims[1], r[2], dims[2], r[3], dims[3], qh, kvh, &d);
  if (st) return st;
  int64_t t = d.past + d.skv;
  if (d.rank == 4) dvm_shape_set(&out[0], 4, (int64_t[]){d.b, d.hq, d.sq, d.dv});
  else dvm_shape_set(&out[0], 3, (int64_t[]){d.b, d.sq, d.hq * d.dv});
  dvm_shape_set(&out[1], 4, (int64_t[]){d.b, d.hkv, t, d.dh});
  dvm_shape_set(&out[2], 4, (int64_t[]){d.b, d.hkv, t, d.dv});
  dvm_shape_set(&out[3], 4, (int64_t[]){d.b, d.hq, d.sq, t});
  return NULL;
}

dvm_status *dvm_gqa_dims_of(const char *fn, int64_t heads, int64_t kv_heads, const dvm_tensor *q,
                            const dvm_tensor *k, const dvm_tensor *v, const dvm_tensor *pk, const dvm_tensor *pv,
                            const dvm_tensor *total, dvm_gqa_dims *d) {
  char s[3][DVM_SHAPE_STR_SIZE];
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: num_heads %lld must be a positive multiple of kv_num_heads %lld",
                          fn, (long long)heads, (long long)kv_heads);
  if (!k != !v) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: key and value go together (both absent: packed QKV)", fn);
  int64_t parts = k ? heads : heads + 2 * kv_heads;
  if (q->rank != 3 || q->dims[2] % parts)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query %s must be [batch, sequence, %lld x head size]%s", fn,
                          dvm_shape_str(s[0], q->rank, q->dims), (long long)parts, k ? "" : " (packed QKV)");
  *d = (dvm_gqa_dims){.b = q->dims[0], .s = q->dims[1], .hq = heads, .hkv = kv_heads, .d = q->dims[2] / parts,
                      .ldq = q->dims[2]};
  const int64_t kv[3] = {d->b, d->s, kv_heads * d->d};
  if (k && (k->rank != 3 || v->rank != 3 || memcmp(k->dims, kv, sizeof kv) || memcmp(v->dims, kv, sizeof kv)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: key %s and value %s must be %s", fn,
                          dvm_shape_str(s[0], k->rank, k->dims), dvm_shape_str(s[1], v->rank, v->dims),
                          dvm_shape_str(s[2], 3, kv));
  if (!pk != !pv) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_key and past_value go together", fn);
  int64_t p = 0;
  if (pk) {
    p = pk->rank == 4 ? pk->dims[2] : -1;
    const int64_t want[4] = {d->b, kv_heads, p, d->d};
    if (pk->rank != 4 || pv->rank != 4 || memcmp(pk->dims, want, sizeof want) || memcmp(pv->dims, want, sizeof want))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_key %s and past_value %s must be [%lld, %lld, past, %lld]",
                            fn, dvm_shape_str(s[0], pk->rank, pk->dims), dvm_shape_str(s[1], pv->rank, pv->dims),
                            (long long)d->b, (long long)kv_heads, (long long)d->d);
  }
  if (total->dtype != DVM_I32 || dvm_tensor_numel(total) != 1 || total->rank > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: total_sequence_length %s must be one i32", fn,
                          dvm_shape_str(s[0], total->rank, total->dims));
  if (total->storage->device != DVM_DEVICE_CPU)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: total_sequence_length must be on the host", fn);
  d->total = *(const int32_t *)dvm_tensor_ptr(total);
  if (d->total < d->s)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: total_sequence_length %lld is below the %lld new tokens", fn,
                          (long long)d->total, (long long)d->s);
  d->present = d->total > p ? d->total : p;
  return NULL;
}

static dvm_status *shapefn_gqa(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "group_query_attention";
  int64_t present, heads, kv;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 12, 21, nout, 3);
  if (!st) st = dvm_attr_int(fn, "present", &in[nin - 9], &present);
  if (!st) st = dvm_attr_int(fn, "num_heads", &in[nin - 8], &heads);
  if (!st) st = dvm_attr_int(fn, "kv_num_heads", &in[nin - 7], &kv);
  if (st) return st;
  const dvm_tensor *t[7] = {0}; /* query, key, value, past_key, past_value, seqlens_k, total_sequence_length */
  for (int i = 0, at = 0; i < 7; i++) {
    if (!(present & (1 << i))) continue;
    if (at >= nin - 9 || in[at].kind != DVM_VAL_TENSOR || !in[at].u.tensor)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d is not a tensor", fn, at);
    t[i] = in[at++].u.tensor;
  }
  if (!t[0] || !t[6]) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query and total_sequence_length needed", fn);
  dvm_gqa_dims d;
  if ((st = dvm_gqa_dims_of(fn, heads, kv, t[0], t[1], t[2], t[3], t[4], t[6], &d))) return st;
  dvm_shape_set(&out[0], 3, (int64_t[]){d.b, d.s, d.hq * d.d});
  for (int i = 1; i < 3; i++) dvm_shape_set(&out[i], 4, (int64_t[]){d.b, d.hkv, d.present, d.d});
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_attention_table[] = {
    {"sdpa", shapefn_sdpa},
    {"group_query_attention", shapefn_gqa},
    {NULL, NULL},
};
