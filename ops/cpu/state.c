/* Ops that carry a state from one decode step to the next (opsets 24 and
 * 27): the recurrent linear attention, the causal depthwise convolution
 * with its carry, and the KV-cache write. Inputs and outputs f32, f16 or
 * bf16 (tensor_scatter: any dtype), computed in f32.
 *
 *   linear_attention(in: query, key, value[, past_state][, decay][, beta];
 *       attrs: present:int, q_num_heads:int, kv_num_heads:int, scale:float,
 *       update_rule:int, chunk_size:int) -> output, present_state
 *     ONNX LinearAttention. `present` is the bit mask of the node's inputs
 *     given (bit i: input i; the omitted ones are not passed).
 *     query [B, T, Hq dk], key [B, T, Hkv dk], value [B, T, Hkv dv],
 *     past_state [B, Hkv, dk, dv] (zeros without it), decay [B, T, Hkv dk]
 *     or [B, T, Hkv] (log-space gate), beta [B, T, Hkv] or [B, T, 1].
 *     update_rule 0 linear, 1 gated, 2 delta, 3 gated_delta: per token
 *       S *= exp(g)                      (gated, gated_delta)
 *       u = beta (v - S^T k), else u = v (delta, gated_delta)
 *       S += k u^T;  o = scale q^T S
 *     query head h reads key/value head h / (Hq / Hkv). scale 0 means
 *     1/sqrt(dk). output [B, T, Hq dv] (query's dtype), present_state
 *     (past_state's dtype, or query's). chunk_size is a hint: ignored.
 *   causal_conv_with_state(in: input[, weight][, bias][, past_state];
 *       attrs: present:int, activation:int) -> output, present_state
 *     ONNX CausalConvWithState: input [B, C, L], weight [C, 1, K], bias
 *     [C], past_state [B, C, K-1] (zeros without it); over the padded
 *     sequence p = past_state ++ input, y[t] = bias + sum_j w[j] p[t + j],
 *     rounded to the dtype, then activation 1 or 2 (silu, swish) y
 *     sigmoid(y); present_state is p's last K-1 positions.
 *   tensor_scatter(in: past_cache, update[, write_indices]; attrs:
 *       axis:int, mode:int) -> present_cache
 *     ONNX TensorScatter: past_cache with update's sequence written at
 *     write_indices[b] (0 without them) on axis (not 0), per batch row b;
 *     mode 1 (circular) wraps the index modulo the cache's length, mode 0
 *     (linear) fails when it would run past the end.
 *
 * Shape functions "linear_attention", "causal_conv_with_state" and "same". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"

static dvm_status *want_float(const char *op, const char *what, const dvm_tensor *t) {
  if (dvm_vec_is_float(t->dtype)) return NULL;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s is %s: want f32, f16 or bf16", op, what, dvm_dtype_name(t->dtype));
}

/* t's elements as f32: its own data, or a copy in *owned (free it). */
static const float *as_f32(const dvm_tensor *t, float **owned) {
  *owned = NULL;
  if (t->dtype == DVM_F32) return dvm_tensor_ptr(t);
  int64_t n = dvm_tensor_numel(t);
  float *c = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (c) dvm_vec_load(t->dtype, dvm_tensor_ptr(t), c, n);
  return *owned = c;
}

/* Where f32 results for t go: its own data, or scratch in *owned, stored
 * into t by finish_f32. */
static float *out_f32(dvm_tensor *t, float **owned) {
  *owned = NULL;
  if (t->dtype == DVM_F32) return dvm_tensor_ptr(t);
  int64_t n = dvm_tensor_numel(t);
  return *owned = malloc(sizeof(float) * (size_t)(n ? n : 1));
}

static void finish_f32(dvm_tensor *t, float *owned) {
  if (owned) dvm_vec_store(t->dtype, owned, dvm_tensor_ptr(t), dvm_tensor_numel(t));
}

static int dims_are(const dvm_tensor *t, int rank, const int64_t *d) {
  if (t->rank != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != d[i]) return 0;
  return 1;
}

/* ---- linear_attention ---- */

enum { RULE_LINEAR, RULE_GATED, RULE_DELTA, RULE_GATED_DELTA };

typedef struct {
  int64_t B, T, Hq, Hkv, dk, dv, gw, bw; /* gw, bw: decay's and beta's widths per token */
  int gated, delta;
  float scale;
  const float *q, *k, *v, *past, *g, *beta;
  float *y, *state, *u; /* u: dv floats of scratch per task */
} la_job;

/* Tasks are (b, kv head) pairs: each runs its head's recurrence over T. */
static void la_range(const void *p, int64_t t0, int64_t t1) {
  const la_job *j = p;
  int64_t G = j->Hq / j->Hkv, dk = j->dk, dv = j->dv;
  for (int64_t task = t0; task < t1; task++) {
    int64_t b = task / j->Hkv, h = task % j->Hkv;
    float *S = j->state + task * dk * dv, *u = j->u + task * dv;
    if (j->past) memcpy(S, j->past + task * dk * dv, sizeof(float) * (size_t)(dk * dv));
    else memset(S, 0, sizeof(float) * (size_t)(dk * dv));
    for (int64_t t = 0; t < j->T; t++) {
      int64_t bt = b * j->T + t;
      const float *k = j->k + (bt * j->Hkv + h) * dk, *v = j->v + (bt * j->Hkv + h) * dv;
      if (j->gated) {
        const float *g = j->g + bt * j->gw + (j->gw == j->Hkv ? h : h * dk);
        for (int64_t d = 0; d < dk; d++) {
          float e = expf(g[j->gw == j->Hkv ? 0 : d]);
          for (int64_t m = 0; m < dv; m++) S[d * dv + m] *= e;
        }
      }
      if (j->delta) {
        float be = j->beta[bt * j->bw + (j->bw == 1 ? 0 : h)];
        for (int64_t m = 0; m < dv; m++) u[m] = 0;
        for (int64_t d = 0; d < dk; d++)
          for (int64_t m = 0; m < dv; m++) u[m] += S[d * dv + m] * k[d];
        for (int64_t m = 0; m < dv; m++) u[m] = be * (v[m] - u[m]);
      } else {
        memcpy(u, v, sizeof(float) * (size_t)dv);
      }
      for (int64_t d = 0; d < dk; d++)
        for (int64_t m = 0; m < dv; m++) S[d * dv + m] += k[d] * u[m];
      for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {
        const float *q = j->q + (bt * j->Hq + qh) * dk;
        float *y = j->y + (bt * j->Hq + qh) * dv;
        for (int64_t m = 0; m < dv; m++) y[m] = 0;
        for (int64_t d = 0; d < dk; d++)
          for (int64_t m = 0; m < dv; m++) y[m] += q[d] * S[d * dv + m];
        for (int64_t m = 0; m < dv; m++) y[m] *= j->scale;
      }
    }
  }
}

static dvm_status *linear_attention(const dvm_kernel_args *a) {
  const char *op = "linear_attention";
  int64_t mask, hq, hkv, rule, chunk;
  double scale;
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 6, 2, 2, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(op, a->nattrs, 6, 6);
  if (!st) st = dvm_attr_int(op, "present", &a->attrs[0], &mask);
  if (!st) st = dvm_attr_int(op, "q_num_heads", &a->attrs[1], &hq);
  if (!st) st = dvm_attr_int(op, "kv_num_heads", &a->attrs[2], &hkv);
  if (!st) st = dvm_attr_float(op, "scale", &a->attrs[3], &scale);
  if (!st) st = dvm_attr_int(op, "update_rule", &a->attrs[4], &rule);
  if (!st) st = dvm_attr_int(op, "chunk_size", &a->attrs[5], &chunk);
  if (st) return st;
  la_job j = {.gated = rule == RULE_GATED || rule == RULE_GATED_DELTA, .delta = rule == RULE_DELTA || rule == RULE_GATED_DELTA};
  if (rule < 0 || rule > RULE_GATED_DELTA)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: update_rule %lld is not 0..3", op, (long long)rule);
  if ((mask & 7) != 7 || mask >> 6 || (!!(mask & 16)) != j.gated || (!!(mask & 32)) != j.delta)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: the inputs given (mask %lld) do not fit update rule %lld: decay is for the gated "
                          "rules, beta for the delta rules",
                          op, (long long)mask, (long long)rule);
  int npresent = 0;
  for (int i = 0; i < 6; i++) npresent += (int)(mask >> i & 1);
  if (npresent != a->nin) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: mask %lld names %d inputs, got %d", op, (long long)mask, npresent, a->nin);
  const dvm_tensor *in[6] = {0};
  for (int i = 0, k = 0; i < 6; i++)
    if (mask >> i & 1) in[i] = a->in[k++];
  static const char *const names[6] = {"query", "key", "value", "past_state", "decay", "beta"};
  for (int i = 0; i < 6; i++)
    if (in[i] && (st = want_float(op, names[i], in[i]))) return st;
  const dvm_tensor *q = in[0], *k = in[1], *v = in[2], *past = in[3], *g = in[4], *be = in[5];
  if (hq <= 0 || hkv <= 0 || hq % hkv)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: q_num_heads %lld must be a positive multiple of kv_num_heads %lld", op,
                          (long long)hq, (long long)hkv);
  if (q->rank != 3 || k->rank != 3 || v->rank != 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query, key and value must be 3-D [B, T, H*D]", op);
  j.B = q->dims[0], j.T = q->dims[1], j.Hq = hq, j.Hkv = hkv;
  if (q->dims[2] % hq || v->dims[2] % hkv)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query's last dim %lld and value's %lld must divide by %lld and %lld heads",
                          op, (long long)q->dims[2], (long long)v->dims[2], (long long)hq, (long long)hkv);
  j.dk = q->dims[2] / hq, j.dv = v->dims[2] / hkv;
  if (!dims_are(k, 3, (int64_t[]){j.B, j.T, hkv * j.dk}) || v->dims[0] != j.B || v->dims[1] != j.T)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: key must be [%lld, %lld, %lld] and value [%lld, %lld, Hkv*dv]", op,
                          (long long)j.B, (long long)j.T, (long long)(hkv * j.dk), (long long)j.B, (long long)j.T);
  int64_t sd[4] = {j.B, hkv, j.dk, j.dv};
  if (past && !dims_are(past, 4, sd))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_state must be [%lld, %lld, %lld, %lld]", op, (long long)sd[0],
                          (long long)sd[1], (long long)sd[2], (long long)sd[3]);
  if (g) {
    j.gw = g->rank == 3 ? g->dims[2] : -1;
    if (g->rank != 3 || g->dims[0] != j.B || g->dims[1] != j.T || (j.gw != hkv && j.gw != hkv * j.dk))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: decay must be [%lld, %lld, %lld or %lld]", op, (long long)j.B,
                            (long long)j.T, (long long)hkv, (long long)(hkv * j.dk));
  }
  if (be) {
    j.bw = be->rank == 3 ? be->dims[2] : -1;
    if (be->rank != 3 || be->dims[0] != j.B || be->dims[1] != j.T || (j.bw != hkv && j.bw != 1))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: beta must be [%lld, %lld, %lld or 1]", op, (long long)j.B,
                            (long long)j.T, (long long)hkv);
  }
  dvm_tensor *y = a->out[0], *ps = a->out[1];
  if (!dims_are(y, 3, (int64_t[]){j.B, j.T, hq * j.dv}) || !dims_are(ps, 4, sd) || y->dtype != q->dtype ||
      ps->dtype != (past ? past : q)->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: outputs must be %s [%lld, %lld, %lld] and %s [%lld, %lld, %lld, %lld]",
                          op, dvm_dtype_name(q->dtype), (long long)j.B, (long long)j.T, (long long)(hq * j.dv),
                          dvm_dtype_name((past ? past : q)->dtype), (long long)sd[0], (long long)sd[1], (long long)sd[2],
                          (long long)sd[3]);
  j.scale = scale != 0 ? (float)scale : 1.0f / sqrtf((float)j.dk);
  float *own[9] = {0};
  const float **src[6] = {&j.q, &j.k, &j.v, &j.past, &j.g, &j.beta};
  int oom = 0;
  for (int i = 0; i < 6; i++)
    if (in[i]) oom |= !(*src[i] = as_f32(in[i], &own[i]));
  j.y = out_f32(y, &own[6]);
  j.state = out_f32(ps, &own[7]);
  j.u = own[8] = malloc(sizeof(float) * (size_t)(j.B * hkv * j.dv + 1));
  oom |= !j.y || !j.state || !j.u;
  if (!oom) {
    dvm_vec_parallel(dvm_kargs_threads(a), j.B * hkv, la_range, &j);
    finish_f32(y, own[6]);
    finish_f32(ps, own[7]);
  }
  for (int i = 0; i < 9; i++) free(own[i]);
  return oom ? dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for f32 copies", op) : NULL;
}

/* ---- causal_conv_with_state ---- */

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

static dvm_status *causal_conv_with_state(const dvm_kernel_args *a) {
  const char *op = "causal_conv_with_state";
  int64_t mask, act;
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 4, 2, 2, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(op, a->nattrs, 2, 2);
  if (!st) st = dvm_attr_int(op, "present", &a->attrs[0], &mask);
  if (!st) st = dvm_attr_int(op, "activation", &a->attrs[1], &act);
  if (st) return st;
  int npresent = 0;
  for (int i = 0; i < 4; i++) npresent += (int)(mask >> i & 1);
  if ((mask & 3) != 3 || mask >> 4 || npresent != a->nin || act < 0 || act > 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: mask %lld or activation %lld does not fit %d inputs", op,
                          (long long)mask, (long long)act, a->nin);
  const dvm_tensor *in[4] = {0};
  for (int i = 0, k = 0; i < 4; i++)
    if (mask >> i & 1) in[i] = a->in[k++];
  const dvm_tensor *x = in[0], *w = in[1], *bias = in[2], *past = in[3];
  for (int i = 0; i < 4; i++)
    if (in[i] && (in[i]->dtype != x->dtype || (st = want_float(op, "input", in[i]))))
      return st ? st : dvm_status_new(DVM_INVALID_ARGUMENT, "%s: every input must be %s like input 0", op, dvm_dtype_name(x->dtype));
  if (x->rank != 3 || w->rank != 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input must be [B, C, L] and weight [C, 1, K]", op);
  int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], K = w->dims[2];
  if (w->dims[0] != C || w->dims[1] != 1 || K < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: weight must be [%lld, 1, K >= 1]", op, (long long)C);
  if (bias && !dims_are(bias, 1, &C)) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: bias must be [%lld]", op, (long long)C);
  int64_t sd[3] = {B, C, K - 1};
  if (past && !dims_are(past, 3, sd))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_state must be [%lld, %lld, %lld]", op, (long long)B,
                          (long long)C, (long long)(K - 1));
  dvm_tensor *y = a->out[0], *ps = a->out[1];
  if (!dims_are(y, 3, x->dims) || !dims_are(ps, 3, sd) || y->dtype != x->dtype || ps->dtype != x->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: outputs must be %s [%lld, %lld, %lld] and [%lld, %lld, %lld]", op,
                          dvm_dtype_name(x->dtype), (long long)B, (long long)C, (long long)L, (long long)B, (long long)C,
                          (long long)(K - 1));
  float *own[6] = {0};
  const float *xf = as_f32(x, &own[0]), *wf = as_f32(w, &own[1]);
  const float *bf = bias ? as_f32(bias, &own[2]) : NULL, *pf = past ? as_f32(past, &own[3]) : NULL;
  float *yf = out_f32(y, &own[4]), *sf = out_f32(ps, &own[5]);
  float *p = malloc(sizeof(float) * (size_t)(L + K));
  int round = x->dtype != DVM_F32 && act;
  if (!xf || !wf || (bias && !bf) || (past && !pf) || !yf || !sf || !p) {
    for (int i = 0; i < 6; i++) free(own[i]);
    free(p);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for f32 copies", op);
  }
  for (int64_t bc = 0; bc < B * C; bc++) {
    int64_t c = bc % C;
    const float *wc = wf + c * K;
    if (pf) memcpy(p, pf + bc * (K - 1), sizeof(float) * (size_t)(K - 1));
    else memset(p, 0, sizeof(float) * (size_t)(K - 1));
    memcpy(p + K - 1, xf + bc * L, sizeof(float) * (size_t)L);
    float *yc = yf + bc * L;
    for (int64_t t = 0; t < L; t++) {
      float s = bf ? bf[c] : 0;
      for (int64_t i = 0; i < K; i++) s += wc[i] * p[t + i];
      yc[t] = s;
    }
    if (round) { /* the convolution's result in the dtype, as the activation reads it */
      dvm_vec_store(x->dtype, yc, p, L);
      dvm_vec_load(x->dtype, p, yc, L);
    }
    if (act)
      for (int64_t t = 0; t < L; t++) yc[t] *= sigmoid(yc[t]);
    /* present_state: the padded sequence's last K-1 positions */
    for (int64_t i = 0; i < K - 1; i++) {
      int64_t at = L + i; /* in p = past ++ x */
      sf[bc * (K - 1) + i] = at < K - 1 ? (pf ? pf[bc * (K - 1) + at] : 0) : xf[bc * L + at - (K - 1)];
    }
  }
  finish_f32(y, own[4]);
  finish_f32(ps, own[5]);
  for (int i = 0; i < 6; i++) free(own[i]);
  free(p);
  return NULL;
}

/* ---- tensor_scatter ---- */

static dvm_status *tensor_scatter(const dvm_kernel_args *a) {
  const char *op = "tensor_scatter";
  int64_t axis, mode;
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 3, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(op, a->nattrs, 2, 2);
  if (!st) st = dvm_attr_int(op, "axis", &a->attrs[0], &axis);
  if (!st) st = dvm_attr_int(op, "mode", &a->attrs[1], &mode);
  if (st) return st;
  const dvm_tensor *past = a->in[0], *up = a->in[1], *wi = a->nin > 2 ? a->in[2] : NULL;
  dvm_tensor *y = a->out[0];
  int r = past->rank;
  if (axis < 0) axis += r;
  if (axis < 1 || axis >= r || mode < 0 || mode > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: axis %lld must be in [1, %d) (not the batch axis 0), mode 0 or 1", op,
                          (long long)axis, r);
  if (up->dtype != past->dtype || y->dtype != past->dtype || !dims_are(y, r, past->dims) || up->rank != r)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: update and the output must be %s of past_cache's rank %d", op,
                          dvm_dtype_name(past->dtype), r);
  for (int i = 0; i < r; i++)
    if (i != axis && up->dims[i] != past->dims[i])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: update dim %d is %lld, past_cache's %lld (only axis %lld may differ)", op,
                            i, (long long)up->dims[i], (long long)past->dims[i], (long long)axis);
  int64_t B = past->dims[0], max = past->dims[axis], seq = up->dims[axis];
  if (seq > max)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: update's sequence %lld is longer than the cache's %lld", op,
                          (long long)seq, (long long)max);
  if (wi && (wi->dtype != DVM_I64 || !dims_are(wi, 1, &B)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: write_indices must be i64 [%lld]", op, (long long)B);
  const int64_t *idx = wi ? dvm_tensor_ptr(wi) : NULL;
  int64_t rows = 1, inner = dvm_dtype_size(past->dtype); /* rows: the dims before axis; inner: bytes after it */
  for (int i = 0; i < axis; i++) rows *= past->dims[i];
  for (int i = (int)axis + 1; i < r; i++) inner *= past->dims[i];
  for (int64_t b = 0; idx && b < B; b++)
    if (idx[b] < 0 || (!mode && idx[b] + seq > max))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: write_indices[%lld] = %lld with %lld updates does not fit a cache of %lld%s",
                            op, (long long)b, (long long)idx[b], (long long)seq, (long long)max,
                            mode ? "" : " (linear mode)");
  char *dst = dvm_tensor_ptr(y);
  const char *src = dvm_tensor_ptr(up);
  if (dst != (const char *)dvm_tensor_ptr(past)) memcpy(dst, dvm_tensor_ptr(past), (size_t)(rows * max * inner));
  int64_t per_batch = B ? rows / B : 0;
  for (int64_t row = 0; row < rows && max > 0; row++) {
    int64_t start = idx ? idx[row / per_batch] : 0;
    for (int64_t s = 0; s < seq; s++)
      memcpy(dst + (row * max + (start + s) % max) * inner, src + (row * seq + s) * inner, (size_t)inner);
  }
  return NULL;
}

#define FLOATS (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F16) | DVM_DTYPE_BIT(DVM_BF16))

const dvm_kernel_def dvm_cpu_state_kernels[] = {
    {"linear_attention", DVM_DEVICE_CPU, linear_attention, "linear_attention", .dtypes = FLOATS},
    {"causal_conv_with_state", DVM_DEVICE_CPU, causal_conv_with_state, "causal_conv_with_state", .dtypes = FLOATS},
    {"tensor_scatter", DVM_DEVICE_CPU, tensor_scatter, "same"},
    {NULL, 0, NULL, NULL},
};
