/* The default-domain ONNX attention ops (opsets 23 to 25), computed in f32
 * (f16 and bf16 storage converted on the way in and out; sdpa takes no
 * bf16: the compiler refuses it, see lw_lower_sdpa).
 *
 *   sdpa(in: Q, K, V, then the present ones of attn_mask, past_key,
 *       past_value, nonpad_kv_seqlen; attrs: present:int, is_causal,
 *       q_num_heads, kv_num_heads, scale:float, softcap:float,
 *       qk_matmul_output_mode, left_window_size, right_window_size)
 *       -> Y, present_key, present_value, qk_matmul_output
 *     ONNX Attention. present: bit i (3..6) says input i of the ONNX node
 *     is given (they follow V in order), bit 8 + j that output j is wanted
 *     (an unwanted one is an empty tensor the kernel leaves alone), bit 16
 *     that scale was given (else 1/sqrt(head size)). Q, K, V are 4-D
 *     [B, heads, S, head size] or 3-D [B, S, heads * head size] (the head
 *     counts then from q_num_heads and kv_num_heads); q heads a multiple
 *     of kv heads (GQA, MQA). Per batch and q head: scores = Q K^T * scale
 *     over the keys past ++ K (T = P + Skv of them), softcap
 *     c tanh(scores / c) when c > 0, plus the bias: the mask (bool: false
 *     is -inf; float: added; broadcast right-aligned to [B, Hq, Sq, M],
 *     keys from M on masked), causal (key j > i + offset masked), the
 *     window (p - left <= j <= p + right, p = i + offset, -1 unbounded),
 *     nonpad (keys from nonpad_kv_seqlen[b] on masked); offset is P with a
 *     past, nonpad_kv_seqlen[b] - Sq with nonpad, else 0. Softmax by rows
 *     (a row whose bias is all -inf gives zeros), times V. present_key and
 *     present_value are the concatenated keys and values [B, Hkv, T, D];
 *     qk_matmul_output [B, Hq, Sq, T] the scores after softcap (modes 0
 *     and 1), with the bias (2) or after softmax (3). As onnx's reference
 *     implementation (onnx/reference/ops/op_attention.py).
 *   rotary_embedding(in: x, cos_cache, sin_cache[, position_ids]; attrs:
 *       interleaved, rotary_embedding_dim, num_heads) -> y
 *     ONNX RotaryEmbedding: x 4-D [B, H, S, D] or 3-D [B, S, H * D]
 *     (num_heads); the first rd = rotary_embedding_dim (0: D) of each head
 *     rotated in pairs (halves, or neighbours when interleaved) by
 *     cos/sin_cache[position_ids[b, s]] ([P, rd / 2]) or, without
 *     position ids, cos/sin_cache[b, s] ([B, S, rd / 2]).
 *
 * Shape functions "sdpa" (shapefuncs/attention.c) and "same". The core,
 * dvm_cpu_attend (attention.h), also runs com.microsoft Attention and
 * QAttention (contrib.c). Products go to oneDNN's sgemm, single-threaded,
 * on the threads of the kernels' pool (par.h): one task per (batch,
 * q head, block of up to 64 queries). */
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/attention.h"
#include "shapefuncs/shape.h"

/* Queries per task: the keys' products and the softmax of that many rows,
 * whose scores stay in L2 (64 x T floats up to T = 1024, fewer rows for
 * more keys). Blocks of 64 rather than 32 take 5 to 8% less time at
 * BERT-base's 128 and 384 keys (docs/performance.md). */
static int64_t block_rows(int64_t T) {
  int64_t qb = 64;
  while (qb > 8 && qb * T > 65536) qb /= 2;
  return qb;
}

static dvm_status *oom(const char *op) { return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op); }

/* A float tensor as f32: its own memory, or a converted copy (owned). */
static float *as_f32(const dvm_tensor *t, float **owned) {
  *owned = NULL;
  if (t->dtype == DVM_F32) return dvm_tensor_ptr(t);
  int64_t n = dvm_tensor_numel(t);
  float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (p) dvm_vec_load(t->dtype, dvm_tensor_ptr(t), p, n);
  return *owned = p;
}

/* ---- sdpa ---- */

typedef struct attend_job {
  const dvm_attend *at;
  atomic_int failed;
} attend_job;

/* The keys [*lo, *hi) that query i of batch b may see by causal, the
 * window, nonpad and the mask's length: each is an interval. */
static void key_range(const dvm_attend *j, int64_t b, int64_t i, int64_t T, int64_t *lo, int64_t *hi) {
  int64_t p = i + (j->nonpad && !j->past ? j->nonpad[b] - j->d.sq : j->d.past), l = 0, h = T;
  if (j->mask && j->mlen < h) h = j->mlen;
  if (j->causal && p + 1 < h) h = p + 1;
  if (j->right >= 0 && p + j->right + 1 < h) h = p + j->right + 1;
  if (j->nonpad && j->nonpad[b] < h) h = j->nonpad[b];
  if (j->left >= 0 && p - j->left > l) l = p - j->left;
  if (l > T) l = T;
  *lo = l, *hi = h > l ? h : l;
}

/* One row of scores (softcapped) plus its bias, softmax'd in place (NaN
 * spreads over the row as in the reference; a row whose bias is all -inf
 * gives zeros); qk gets what its mode asks (NULL: nothing). */
DVM_VEC static void softmax_row(float *row, const float *bias, int64_t T, float softcap, int open, float *qk, int mode) {
  if (softcap > 0)
    for (int64_t c = 0; c < T; c++) row[c] = softcap * tanhf(row[c] / softcap);
  if (qk && mode < 2) memcpy(qk, row, sizeof(float) * (size_t)T);
  float mx = -INFINITY, sum = 0;
  int nan = 0;
#pragma omp simd reduction(max : mx) reduction(| : nan)
  for (int64_t c = 0; c < T; c++) {
    float x = row[c] + bias[c];
    row[c] = x;
    nan |= x != x;
    mx = x > mx ? x : mx;
  }
  if (qk && mode == 2) memcpy(qk, row, sizeof(float) * (size_t)T);
  if (!open) {
    memset(row, 0, sizeof(float) * (size_t)T);
  } else {
    mx = nan ? NAN : mx == -INFINITY ? 0 : mx;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < T; c++) sum += row[c] = dvm_ew_expf(row[c] - mx);
    float inv = 1.0f / (sum == 0 ? 1.0f : sum);
#pragma omp simd
    for (int64_t c = 0; c < T; c++) row[c] *= inv;
  }
  if (qk && mode == 3) memcpy(qk, row, sizeof(float) * (size_t)T);
}

/* The common row: no softcap, no qk output. Softmax over the keys [lo, hi)
 * plus the mask's row m (NULL: none), by the softmax kernel's row
 * (norm.c); the keys outside, and every key of a row whose mask is all
 * -inf there, get 0; a NaN in the range makes the row NaN, as in
 * softmax_row. */
DVM_VEC static void softmax_keys(float *row, int64_t T, int64_t lo, int64_t hi, const float *m) {
  int open = lo < hi;
  if (m && open) {
    int finite = 0;
#pragma omp simd reduction(| : finite)
    for (int64_t c = lo; c < hi; c++) {
      row[c] += m[c];
      finite |= m[c] != -INFINITY;
    }
    open = finite;
  }
  if (!open) {
    memset(row, 0, sizeof(float) * (size_t)T);
    return;
  }
  dvm_cpu_softmax_row(row + lo, row + lo, hi - lo);
  float out = row[lo] != row[lo] ? NAN : 0.0f;
  for (int64_t c = 0; c < lo; c++) row[c] = out;
  for (int64_t c = hi; c < T; c++) row[c] = out;
}

/* One (batch, q head, block of qb queries): p is qb * T floats of scratch
 * and T more for a row's bias. Only the keys some row of the block may
 * see (below the largest key_range end: half of them on average when
 * causal) enter the products. */
static int attend_task(const dvm_attend *j, int64_t task, float *p) {
  const dvm_sdpa_dims *d = &j->d;
  int64_t T = d->past + d->skv, qb = block_rows(T);
  int64_t blocks = (d->sq + qb - 1) / qb, bh = task / blocks, i0 = task % blocks * qb;
  int64_t b = bh / d->hq, h = bh % d->hq, kvh = h / (d->hq / d->hkv);
  int64_t rows = d->sq - i0 < qb ? d->sq - i0 : qb;
  int64_t ldq = d->rank == 3 ? j->ldq : d->dh, ldy = d->rank == 3 ? d->hq * d->dv : d->dv;
  const float *q = j->q + (d->rank == 3 ? b * d->sq * ldq + h * d->dh : bh * d->sq * d->dh) + i0 * ldq;
  int64_t kr = j->kv_rows ? j->kv_rows : T, ldk = j->ldkv ? j->ldkv : d->dh, ldv = j->ldkv ? j->ldkv : d->dv;
  const float *k = j->k + (j->ldkv ? b * T * ldk + kvh * d->dh : (b * d->hkv + kvh) * kr * d->dh);
  const float *v = j->v + (j->ldkv ? b * T * ldv + kvh * d->dv : (b * d->hkv + kvh) * kr * d->dv);
  float *y = j->y + (d->rank == 3 ? b * d->sq * ldy + h * d->dv : bh * d->sq * d->dv) + i0 * ldy;
  float *bias = p + qb * T;
  int fast = !j->qk && !(j->softcap > 0) && (!j->mask || j->mstride[3] == 1);
  int64_t tn = fast ? 0 : T; /* the keys that enter the products */
  for (int64_t r = 0; fast && r < rows; r++) {
    int64_t lo, hi;
    key_range(j, b, i0 + r, T, &lo, &hi);
    if (hi > tn) tn = hi;
  }
  if (tn && d->dh) {
    if (dnnl_sgemm('N', 'T', rows, tn, d->dh, j->scale, q, ldq, k, ldk, 0.0f, p, T) != dnnl_success) return 0;
  } else {
    for (int64_t r = 0; r < rows; r++) memset(p + r * T, 0, sizeof(float) * (size_t)tn);
  }
  for (int64_t r = 0; r < rows; r++) {
    int64_t i = i0 + r, lo, hi, open = 0;
    key_range(j, b, i, T, &lo, &hi);
    const float *m = j->mask ? j->mask + b * j->mstride[0] + h * j->mstride[1] + i * j->mstride[2] : NULL;
    if (fast) {
      softmax_keys(p + r * T, tn, lo, hi, m);
      continue;
    }
    for (int64_t c = 0; c < T; c++) {
      bias[c] = c < lo || c >= hi ? -INFINITY : m ? m[c * j->mstride[3]] : 0.0f;
      open |= !(bias[c] == -INFINITY);
    }
    softmax_row(p + r * T, bias, T, j->softcap, (int)open, j->qk ? j->qk + (bh * d->sq + i) * T : NULL, j->mode);
  }
  if (!d->dv) return 1;
  if (!tn) {
    for (int64_t r = 0; r < rows; r++) memset(y + r * ldy, 0, sizeof(float) * (size_t)d->dv);
    return 1;
  }
  return dnnl_sgemm('N', 'N', rows, d->dv, tn, 1.0f, p, T, v, ldv, 0.0f, y, ldy) == dnnl_success;
}

static void attend_tasks(const void *job, int64_t t0, int64_t t1) {
  attend_job *j = (attend_job *)job;
  int64_t T = j->at->d.past + j->at->d.skv;
  float *p = malloc(sizeof(float) * (size_t)((block_rows(T) + 1) * T + 1));
  if (!p) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t t = t0; t < t1; t++)
    if (!attend_task(j->at, t, p)) atomic_store(&j->failed, 1);
  free(p);
}

dvm_status *dvm_cpu_attend(const char *op, const dvm_attend *at, int threads) {
  const dvm_sdpa_dims *d = &at->d;
  attend_job j = {at, 0};
  /* oneDNN sizes its OpenMP team by the calling thread's setting: 1, as
   * on the pool's workers */
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  int64_t qb = block_rows(d->past + d->skv);
  dvm_vec_parallel(threads, d->b * d->hq * ((d->sq + qb - 1) / qb), attend_tasks, &j);
  if (atomic_load(&j.failed)) return dvm_status_new(DVM_INTERNAL, "%s: oneDNN sgemm failed or out of memory", op);
  return NULL;
}

/* past ++ x into dst [B, Hkv, T, w] (x 4-D, or 3-D [B, S, Hkv * w]). */
static void concat_kv(const dvm_sdpa_dims *d, const float *past, const float *x, int64_t w, float *dst) {
  int64_t T = d->past + d->skv;
  for (int64_t b = 0; b < d->b; b++)
    for (int64_t h = 0; h < d->hkv; h++) {
      float *o = dst + (b * d->hkv + h) * T * w;
      if (d->past) memcpy(o, past + (b * d->hkv + h) * d->past * w, sizeof(float) * (size_t)(d->past * w));
      for (int64_t s = 0; s < d->skv; s++) {
        const float *src = d->rank == 3 ? x + (b * d->skv + s) * d->hkv * w + h * w : x + ((b * d->hkv + h) * d->skv + s) * w;
        memcpy(o + (d->past + s) * w, src, sizeof(float) * (size_t)w);
      }
    }
}

/* The mask as an f32 bias (bool: 0 or -inf) and its strides over
 * [B, Hq, Sq, M], right-aligned broadcasting. */
static dvm_status *mask_setup(const char *op, const dvm_tensor *m, dvm_attend *j, float **owned) {
  const dvm_sdpa_dims *d = &j->d;
  int64_t want[4] = {d->b, d->hq, d->sq, -1}, stride = 1, T = d->past + d->skv;
  char s[DVM_SHAPE_STR_SIZE];
  *owned = NULL;
  if (m->rank < 1 || m->rank > 4 || m->dims[m->rank - 1] > T)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attn_mask %s must have rank 1 to 4 and at most %lld keys", op,
                          dvm_shape_str(s, m->rank, m->dims), (long long)T);
  j->mlen = m->dims[m->rank - 1];
  for (int k = 3; k >= 0; k--) {
    int md = m->rank - 4 + k;
    int64_t n = md >= 0 ? m->dims[md] : 1;
    if (k < 3 && n != 1 && n != want[k])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attn_mask %s does not broadcast to [%lld, %lld, %lld, keys]", op,
                            dvm_shape_str(s, m->rank, m->dims), (long long)d->b, (long long)d->hq, (long long)d->sq);
    j->mstride[k] = n == 1 && k < 3 ? 0 : stride;
    stride *= n;
  }
  int64_t n = dvm_tensor_numel(m);
  if (m->dtype == DVM_BOOL) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!p) return oom(op);
    const uint8_t *src = dvm_tensor_ptr(m);
    for (int64_t i = 0; i < n; i++) p[i] = src[i] ? 0.0f : -INFINITY;
    j->mask = *owned = p;
    return NULL;
  }
  if (!dvm_vec_is_float(m->dtype))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attn_mask is %s: want bool or a float dtype", op,
                          dvm_dtype_name((dvm_dtype)m->dtype));
  j->mask = as_f32(m, owned);
  return j->mask ? NULL : oom(op);
}

static dvm_status *sdpa_attrs(const char *op, const dvm_kernel_args *a, int64_t v[9], double f[2]) {
  static const char *const names[] = {"present", "is_causal", "q_num_heads", "kv_num_heads", "scale", "softcap",
                                      "qk_matmul_output_mode", "left_window_size", "right_window_size"};
  dvm_status *st = dvm_attr_count(op, a->nattrs, 9, 9);
  for (int i = 0; i < 9 && !st; i++)
    st = i == 4 || i == 5 ? dvm_attr_float(op, names[i], &a->attrs[i], &f[i - 4])
                          : dvm_attr_int(op, names[i], &a->attrs[i], &v[i]);
  if (!st && (v[6] < 0 || v[6] > 3))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: qk_matmul_output_mode %lld is not 0 to 3", op, (long long)v[6]);
  if (!st && (v[7] < -1 || v[8] < -1))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: window sizes must be -1 or >= 0", op);
  return st;
}

static dvm_status *sdpa(const dvm_kernel_args *a) {
  const char *op = "sdpa";
  int64_t v[9];
  double f[2];
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 7, 4, 4, DVM_DEVICE_CPU);
  if (!st) st = sdpa_attrs(op, a, v, f);
  if (st) return st;
  int present = (int)v[0], next = 3;
  const dvm_tensor *in[7] = {a->in[0], a->in[1], a->in[2]};
  for (int i = 3; i < 7; i++)
    if (present & (1 << i)) {
      if (next >= a->nin) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: present names more inputs than given", op);
      in[i] = a->in[next++];
    }
  if (next != a->nin) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %d inputs, present names %d", op, a->nin, next);
  const dvm_tensor *q = in[0], *pk = in[4], *pv = in[5], *np = in[6];
  if ((pk == NULL) != (pv == NULL))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_key and past_value go together", op);
  if (np && pk) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: nonpad_kv_seqlen with a past cache", op);
  for (int i = 0; i < 6; i++)
    if (in[i] && i != 3 && in[i]->dtype != q->dtype)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d is %s, Q %s", op, i, dvm_dtype_name((dvm_dtype)in[i]->dtype),
                            dvm_dtype_name((dvm_dtype)q->dtype));
  if (!dvm_vec_is_float(q->dtype))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Q is %s: want f32, f16 or bf16", op, dvm_dtype_name((dvm_dtype)q->dtype));
  dvm_attend j = {.causal = v[1] != 0, .mode = (int)v[6], .past = pk != NULL, .softcap = (float)f[1], .left = v[7],
                .right = v[8]};
  if ((st = dvm_sdpa_dims_of(op, q->rank, q->dims, in[1]->rank, in[1]->dims, in[2]->rank, in[2]->dims,
                             pk ? pk->rank : -1, pk ? pk->dims : NULL, v[2], v[3], &j.d)))
    return st;
  const dvm_sdpa_dims *d = &j.d;
  int64_t T = d->past + d->skv;
  if (pv && (pv->rank != 4 || pv->dims[0] != d->b || pv->dims[1] != d->hkv || pv->dims[2] != d->past ||
             pv->dims[3] != d->dv))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: past_value must be [%lld, %lld, %lld, %lld]", op, (long long)d->b,
                          (long long)d->hkv, (long long)d->past, (long long)d->dv);
  if (np) {
    if (np->dtype != DVM_I64 || np->rank != 1 || np->dims[0] != d->b)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: nonpad_kv_seqlen must be i64 [%lld]", op, (long long)d->b);
    j.nonpad = dvm_tensor_ptr(np);
    for (int64_t b = 0; b < d->b; b++)
      if (j.nonpad[b] < 0 || j.nonpad[b] > T)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: nonpad_kv_seqlen[%lld] = %lld is outside [0, %lld]", op,
                              (long long)b, (long long)j.nonpad[b], (long long)T);
  }
  j.scale = present & DVM_SDPA_HAS_SCALE ? (float)f[0] : 1.0f / sqrtf((float)d->dh);
  /* everything as f32: converted inputs, the concatenated keys and values
   * (in present_key/value when f32 and wanted), the outputs */
  int want[4];
  for (int o = 0; o < 4; o++) want[o] = (present >> (8 + o)) & 1;
  int64_t nkv = d->b * d->hkv * T, ny = d->b * d->hq * d->sq * d->dv, nqk = d->b * d->hq * d->sq * T;
  int f32 = q->dtype == DVM_F32;
  float *owned[6] = {0}, *pasts[2] = {0};
  float *kv[2] = {want[1] && f32 ? dvm_tensor_ptr(a->out[1]) : NULL, want[2] && f32 ? dvm_tensor_ptr(a->out[2]) : NULL};
  float *scratch[4] = {0};
  for (int i = 0; i < 2; i++)
    if (!kv[i] && !(kv[i] = scratch[i] = malloc(sizeof(float) * (size_t)(nkv * (i ? d->dv : d->dh) + 1)))) goto nomem;
  j.y = f32 ? dvm_tensor_ptr(a->out[0]) : (scratch[2] = malloc(sizeof(float) * (size_t)(ny + 1)));
  if (want[3]) j.qk = f32 ? dvm_tensor_ptr(a->out[3]) : (scratch[3] = malloc(sizeof(float) * (size_t)(nqk + 1)));
  if (!j.y || (want[3] && !j.qk)) goto nomem;
  const float *qkv[3];
  for (int i = 0; i < 3; i++)
    if (!(qkv[i] = as_f32(in[i], &owned[i]))) goto nomem;
  for (int i = 0; pk && i < 2; i++)
    if (!(pasts[i] = as_f32(in[4 + i], &owned[3 + i]))) goto nomem;
  if (in[3] && (st = mask_setup(op, in[3], &j, &owned[5]))) goto done;
  concat_kv(d, pasts[0], qkv[1], d->dh, kv[0]);
  concat_kv(d, pasts[1], qkv[2], d->dv, kv[1]);
  j.q = qkv[0], j.k = kv[0], j.v = kv[1];
  j.ldq = d->hq * d->dh;
  if ((st = dvm_cpu_attend(op, &j, dvm_kargs_threads(a)))) goto done;
  if (!f32) {
    dvm_vec_store(q->dtype, j.y, dvm_tensor_ptr(a->out[0]), ny);
    for (int i = 0; i < 2; i++)
      if (want[1 + i]) dvm_vec_store(q->dtype, kv[i], dvm_tensor_ptr(a->out[1 + i]), nkv * (i ? d->dv : d->dh));
    if (want[3]) dvm_vec_store(q->dtype, j.qk, dvm_tensor_ptr(a->out[3]), nqk);
  }
  goto done;
nomem:
  st = oom(op);
done:
  for (int i = 0; i < 6; i++) free(owned[i]);
  for (int i = 0; i < 4; i++) free(scratch[i]);
  return st;
}

/* ---- rotary embeddings ---- */

void dvm_cpu_rope_row(float *row, const float *cosv, const float *sinv, int64_t half, int interleaved) {
  for (int64_t k = 0; k < half; k++) {
    int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
    float x1 = row[i1], x2 = row[i2];
    row[i1] = cosv[k] * x1 - sinv[k] * x2;
    row[i2] = sinv[k] * x1 + cosv[k] * x2;
  }
}

/* y = x with the first rd of each of the H heads of D rotated by the
 * caches' row crow[b * S + s] ([rows, rd / 2], x's dtype); x 4-D
 * [B, H, S, D] or 3-D [B, S, H * D]. The rows are in range. */
static dvm_status *rotate(const char *op, const dvm_tensor *x, int64_t H, int64_t D, int64_t rd, int inter,
                          const dvm_tensor *cs, const dvm_tensor *sn, const int64_t *crow, dvm_tensor *y) {
  int64_t B = x->dims[0], S = x->dims[x->rank == 4 ? 2 : 1], half = rd / 2;
  float *buf = malloc(sizeof(float) * (size_t)(D + rd + 1));
  if (!buf) return oom(op);
  float *row = buf, *cosv = buf + D, *sinv = cosv + half;
  int dt = x->dtype;
  size_t es = dvm_dtype_size((dvm_dtype)dt);
  const char *xp = dvm_tensor_ptr(x), *cp = dvm_tensor_ptr(cs), *sp = dvm_tensor_ptr(sn);
  char *yp = dvm_tensor_ptr(y);
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++) {
      int64_t r = crow[b * S + s];
      dvm_vec_load(dt, cp + (size_t)(r * half) * es, cosv, half);
      dvm_vec_load(dt, sp + (size_t)(r * half) * es, sinv, half);
      for (int64_t h = 0; h < H; h++) {
        int64_t at = x->rank == 4 ? ((b * H + h) * S + s) * D : (b * S + s) * H * D + h * D;
        dvm_vec_load(dt, xp + (size_t)at * es, row, D);
        dvm_cpu_rope_row(row, cosv, sinv, half, inter);
        dvm_vec_store(dt, row, yp + (size_t)at * es, D);
      }
    }
  free(buf);
  return NULL;
}

/* The cache rows of positions p (B * S of them; p == crow allowed),
 * checked against the caches' `rows`. */
static dvm_status *check_rows(const char *op, const int64_t *p, int64_t n, int64_t rows) {
  for (int64_t i = 0; i < n; i++)
    if (p[i] < 0 || p[i] >= rows)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: position %lld (of token %lld) is outside the caches' %lld rows",
                            op, (long long)p[i], (long long)i, (long long)rows);
  return NULL;
}

static dvm_status *rotary_attrs(const char *op, const dvm_kernel_args *a, int n, int64_t *inter, int64_t *rd,
                                int64_t *heads) {
  dvm_status *st = dvm_attr_count(op, a->nattrs, n, n);
  if (!st) st = dvm_attr_int(op, "interleaved", &a->attrs[0], inter);
  if (!st) st = dvm_attr_int(op, "rotary_embedding_dim", &a->attrs[1], rd);
  if (!st) st = dvm_attr_int(op, "num_heads", &a->attrs[2], heads);
  return st;
}

static dvm_status *check_rotary_io(const char *op, const dvm_tensor *x, const dvm_tensor *cs, const dvm_tensor *sn,
                                   const dvm_tensor *y) {
  char s1[DVM_SHAPE_STR_SIZE];
  if (!dvm_vec_is_float(x->dtype) || cs->dtype != x->dtype || sn->dtype != x->dtype || y->dtype != x->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input, caches and output must share one float dtype", op);
  if (x->rank != 3 && x->rank != 4)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %s must be 3-D or 4-D", op, dvm_shape_str(s1, x->rank, x->dims));
  return NULL;
}

static dvm_status *rotary_embedding(const dvm_kernel_args *a) {
  const char *op = "rotary_embedding";
  int64_t inter, rd, heads;
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 4, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = rotary_attrs(op, a, 3, &inter, &rd, &heads);
  const dvm_tensor *x = a->in[0], *cs = a->in[1], *sn = a->in[2], *pos = a->nin > 3 ? a->in[3] : NULL;
  if (!st) st = check_rotary_io(op, x, cs, sn, a->out[0]);
  if (st) return st;
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  if (x->rank == 3 && heads <= 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a 3-D input needs num_heads > 0", op);
  int64_t B = x->dims[0], H = x->rank == 4 ? x->dims[1] : heads, S = x->dims[x->rank == 4 ? 2 : 1];
  int64_t D = x->rank == 4 ? x->dims[3] : (x->dims[2] % heads ? -1 : x->dims[2] / heads);
  if (D < 0) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: hidden size %lld is not divisible by num_heads %lld", op,
                                   (long long)x->dims[2], (long long)heads);
  if (!rd) rd = D;
  int64_t half = rd / 2;
  if (rd < 0 || rd > D || rd % 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: rotary_embedding_dim %lld must be even and at most the head size %lld",
                          op, (long long)rd, (long long)D);
  int ok = cs->rank == sn->rank && !memcmp(cs->dims, sn->dims, sizeof(int64_t) * (size_t)cs->rank) &&
           cs->rank == (pos ? 2 : 3) && cs->dims[cs->rank - 1] == half &&
           (pos || (cs->dims[0] == B && cs->dims[1] == S));
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: caches %s and %s must be %s with last dim %lld", op,
                          dvm_shape_str(s1, cs->rank, cs->dims), dvm_shape_str(s2, sn->rank, sn->dims),
                          pos ? "[positions, rd / 2]" : "[B, S, rd / 2]", (long long)half);
  if (pos && (pos->dtype != DVM_I64 || pos->rank != 2 || pos->dims[0] != B || pos->dims[1] != S))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: position_ids must be i64 [%lld, %lld]", op, (long long)B, (long long)S);
  int64_t *rows = NULL;
  if (pos) {
    if ((st = check_rows(op, dvm_tensor_ptr(pos), B * S, cs->dims[0]))) return st;
  } else { /* the caches are per token: row b * S + s */
    if (!(rows = malloc(sizeof(int64_t) * (size_t)(B * S + 1)))) return oom(op);
    for (int64_t i = 0; i < B * S; i++) rows[i] = i;
  }
  st = rotate(op, x, H, D, rd, (int)inter, cs, sn, pos ? dvm_tensor_ptr(pos) : rows, a->out[0]);
  free(rows);
  return st;
}

/* com.microsoft RotaryEmbedding: the head size is twice cos_cache's
 * width without rotary_embedding_dim, else hidden / num_heads, as ONNX
 * Runtime derives it; positions from position_ids [B, S], or one start
 * ([1] or a scalar) plus s. */
static dvm_status *contrib_rotary_embedding(const dvm_kernel_args *a) {
  const char *op = "contrib_rotary_embedding";
  int64_t inter, rd, heads;
  dvm_status *st = dvm_kargs_check(a, op, 4, 1, DVM_DEVICE_CPU);
  if (!st) st = rotary_attrs(op, a, 3, &inter, &rd, &heads);
  const dvm_tensor *x = a->in[0], *pos = a->in[1], *cs = a->in[2], *sn = a->in[3];
  if (!st) st = check_rotary_io(op, x, cs, sn, a->out[0]);
  if (st) return st;
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE];
  if (cs->rank != 2 || sn->rank != 2 || memcmp(cs->dims, sn->dims, sizeof(int64_t) * 2))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: cos_cache %s and sin_cache %s must be one 2-D shape", op,
                          dvm_shape_str(s1, cs->rank, cs->dims), dvm_shape_str(s2, sn->rank, sn->dims));
  if (rd > 0 && heads <= 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: rotary_embedding_dim needs num_heads", op);
  int four = x->rank == 4;
  int64_t B = x->dims[0], S = x->dims[four ? 2 : 1], hidden = four ? x->dims[1] * x->dims[3] : x->dims[2];
  int64_t D = rd ? hidden / heads : 2 * cs->dims[1], H = heads > 0 ? heads : D ? hidden / D : 0;
  if (!rd) rd = D;
  if (D <= 0 || H * D != hidden || (four && (H != x->dims[1] || D != x->dims[3])) || rd > D || rd % 2 ||
      cs->dims[1] != rd / 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %s, cos_cache %s, num_heads %lld and rotary_embedding_dim "
                          "%lld do not fit: heads of D (2 x the caches' width without rotary_embedding_dim), the "
                          "caches [positions, rotary_embedding_dim / 2]", op, dvm_shape_str(s1, x->rank, x->dims),
                          dvm_shape_str(s2, cs->rank, cs->dims), (long long)heads, (long long)rd);
  int64_t n = dvm_tensor_numel(pos);
  const int64_t *pp = dvm_tensor_ptr(pos);
  int each = pos->rank == 2 && pos->dims[0] == B && pos->dims[1] == S;
  if (pos->dtype != DVM_I64 || !(each || (pos->rank <= 1 && n == 1)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: position_ids %s must be i64 [%lld, %lld], [1] or a scalar", op,
                          dvm_shape_str(s1, pos->rank, pos->dims), (long long)B, (long long)S);
  int64_t *rows = malloc(sizeof(int64_t) * (size_t)(B * S + 1));
  if (!rows) return oom(op);
  for (int64_t i = 0; i < B * S; i++) rows[i] = each ? pp[i] : pp[0] + i % S;
  st = check_rows(op, rows, B * S, cs->dims[0]);
  if (!st) st = rotate(op, x, H, D, rd, (int)inter, cs, sn, rows, a->out[0]);
  free(rows);
  return st;
}

#define FLOATS (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F16) | DVM_DTYPE_BIT(DVM_BF16))
const dvm_kernel_def dvm_cpu_attention_kernels[] = {
    {"sdpa", DVM_DEVICE_CPU, sdpa, "sdpa", .dtypes = DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F16)},
    {"rotary_embedding", DVM_DEVICE_CPU, rotary_embedding, "same", .dtypes = FLOATS},
    {"contrib_rotary_embedding", DVM_DEVICE_CPU, contrib_rotary_embedding, "same", .dtypes = FLOATS},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
