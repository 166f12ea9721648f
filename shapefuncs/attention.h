/* The dims of the ONNX attention ops, shared by the sdpa kernel
 * (ops/cpu/attention.c) and its shape function (shapefuncs/attention.c). */
#ifndef DVM_SHAPEFUNCS_ATTENTION_H
#define DVM_SHAPEFUNCS_ATTENTION_H

#include "dvm/value.h"

/* sdpa's `present` attribute: bits 3..6 the given optional inputs (the
 * ONNX node's attn_mask, past_key, past_value, nonpad_kv_seqlen), bits
 * 8..11 the wanted outputs, and this bit: scale was given. */
#define DVM_SDPA_HAS_SCALE (1 << 16)

typedef struct dvm_sdpa_dims {
  int rank;                 /* of Q, K and V: 3 or 4 */
  int64_t b, hq, hkv, sq, skv, past, dh, dv; /* head sizes dh (Q, K), dv (V) */
} dvm_sdpa_dims;

/* The dims from Q, K, V (all 3-D or all 4-D) and past_key (prank < 0:
 * none), with q_heads and kv_heads for 3-D inputs; fails naming `fn`. */
DVM_MUST_USE dvm_status *dvm_sdpa_dims_of(const char *fn, int qr, const int64_t *q, int kr, const int64_t *k, int vr,
                                          const int64_t *v, int pr, const int64_t *p, int64_t q_heads,
                                          int64_t kv_heads, dvm_sdpa_dims *d);

/* com.microsoft MultiHeadAttention's dims (ops/cpu/contrib.c and the
 * "multihead_attention" shape function): query [b, s, n dh]; key and
 * value [b, l, n dh] and [b, l, n dv], or 4-D [b, n, l, dh] and [b, n, l,
 * dv] (kv4: a cache given as key and value, then no past); past_key and
 * past_value [b, n, p, dh] and [b, n, p, dv] (pr < 0: none, p 0). */
typedef struct dvm_mha_dims {
  int64_t b, s, n, l, p, dh, dv;
  int kv4;
} dvm_mha_dims;

DVM_MUST_USE dvm_status *dvm_mha_dims_of(const char *fn, int64_t heads, int qr, const int64_t *q, int kr,
                                         const int64_t *k, int vr, const int64_t *v, int pr, const int64_t *pk,
                                         int pvr, const int64_t *pv, dvm_mha_dims *d);

/* com.microsoft GroupQueryAttention's dims (ops/cpu/gqa.c and the
 * "group_query_attention" shape function): query [b, s, hq d] and key,
 * value [b, s, hkv d], or packed QKV [b, s, (hq + 2 hkv) d] (key and
 * value NULL), rows of ldq floats; past_key and past_value [b, hkv, p, d]
 * (NULL: none); total (total_sequence_length, an i32 scalar or [1]) and
 * present = max(total, p), the rows of present_key and present_value. */
typedef struct dvm_gqa_dims {
  int64_t b, s, hq, hkv, d, ldq, total, present;
} dvm_gqa_dims;

DVM_MUST_USE dvm_status *dvm_gqa_dims_of(const char *fn, int64_t heads, int64_t kv_heads, const dvm_tensor *q,
                                         const dvm_tensor *k, const dvm_tensor *v, const dvm_tensor *pk,
                                         const dvm_tensor *pv, const dvm_tensor *total, dvm_gqa_dims *d);

#endif
