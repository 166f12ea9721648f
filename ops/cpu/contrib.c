/* ONNX Runtime's contrib ops (domain com.microsoft) that its transformers
 * optimizer writes for BERT- and GPT-2-style models, with its CPU
 * semantics; f32.
 *
 *   fast_gelu(in: x[, bias]) -> y
 *     y = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), v = x + bias;
 *     bias is [H], x's last dim.
 *   bias_gelu(in: a[, bias]) -> y
 *     y = 0.5 v (1 + erf(v / sqrt 2)), v = a + bias; bias [H] (without
 *     it, com.microsoft Gelu). Both GELUs are the Gelu op's vector code
 *     (elementwise_math.h), over rows split on the thread pool.
 *   skip_layernorm(in: x, skip, gamma[, beta[, bias]]; attrs: epsilon:float)
 *       -> y[, sum]
 *     sum = x + skip + bias, y = layernorm(sum) over the last dim H, times
 *     gamma plus beta; skip has x's shape; gamma, beta, bias [H]. The layernorm
 *     kernel's vectorized rows, in parallel (norm.h).
 *   skip_rmsnorm(in: x, skip, gamma[, bias]; attrs: epsilon:float) -> y[, sum]
 *     com.microsoft SkipSimplifiedLayerNormalization: skip_layernorm with
 *     the mean taken as 0 and no beta, y = sum / sqrt(mean(sum^2) + eps)
 *     * gamma.
 *   embed_layernorm(in: ids, segment_ids, word, pos, seg, gamma, beta[, mask
 *       [, position_ids]]; attrs: epsilon:float) -> y, mask_index
 *     y[b, s] = layernorm(word[ids[b, s]] + pos[position_ids[b, s] or s] +
 *     seg[segment_ids[b, s]]) * gamma + beta; ids etc. i32 [B, S] (position
 *     ids may be [1, S]); segment_ids and seg both empty ([0]) add no
 *     segment row (the model leaves them out); mask_index i32 [B]: the
 *     count of ones in mask's row (0 without a mask), as ONNX Runtime
 *     computes it.
 *   attention(in: x, weights, bias[, mask_index]; attrs: num_heads:int,
 *       unidirectional:int, scale:float, mask_filter_value:float) -> y
 *     qkv = x [B, S, Hin] . weights [Hin, 3H] + bias; per head (H / N
 *     wide) softmax(q k^T * scale + mask) v, heads concatenated: [B, S, H].
 *     scale 0 means 1/sqrt(H / N). mask_index: i32 [B] (keys from that
 *     position on are masked: right padding) or [B, S] (0 masks a key);
 *     masked scores get mask_filter_value added, as ONNX Runtime does.
 *     unidirectional 1 masks keys after the query (causal).
 *
 *   multihead_attention(in: the given ones of query, key, value, bias,
 *       key_padding_mask, attention_bias, past_key, past_value; attrs:
 *       present:int (bits 0..7: which of those the node gives; 8..11:
 *       which outputs it wants), num_heads:int, unidirectional,
 *       scale:float, mask_filter_value:float) -> y, present_key,
 *       present_value, qk
 *     com.microsoft MultiHeadAttention as ONNX Runtime's CPU kernel runs
 *     it: query [B, S, D], key [B, L, D], value [B, L, Dv] (bias [2D +
 *     Dv] added to the three), or key and value 4-D [B, N, L, D / N] and
 *     [B, N, L, Dv / N] (a cache: no bias, no past); past_key and
 *     past_value [B, N, P, D / N], [B, N, P, Dv / N] go before the keys
 *     and values: T = P + L of them; present_key and present_value are
 *     those [B, N, T, ..]. Per head softmax(q k^T * scale + mask +
 *     attention_bias) v: y [B, S, Dv]; qk [B, N, S, T] the scores before
 *     the softmax, mask and bias added. key_padding_mask i32 [B] (key
 *     lengths), [B, T] or [B, S, T] (0 masks a key) adds
 *     mask_filter_value; unidirectional (S = L only) adds -FLT_MAX to the
 *     keys after query i's (key P + i), as ONNX Runtime; attention_bias
 *     f32 [B or 1, N or 1, S, T]. Unwanted outputs are empty tensors.
 *   qembed_layernorm(in: ids, segment_ids, word, pos, seg, gamma, beta, mask,
 *       5 scales, 5 zero points; attrs: epsilon:float) -> y, mask_index
 *     com.microsoft QEmbedLayerNormalization: embed_layernorm with the
 *     tables, gamma and beta as u8/i8 codes, dequantized row by row.
 *   qattention(in: x, weights, bias, x_scale, w_scale[, mask_index[, x_zp[,
 *       w_zp]]]; attrs: as attention) -> y
 *     com.microsoft QAttention: attention from u8/i8 x and weights.
 *   fused_matmul(in: a, b; attrs: transA, transB, alpha:float, transBatchA,
 *       transBatchB) -> y
 *     alpha * op(a) op(b) with MatMul's broadcasting; op transposes the
 *     last two dims when trans* is 1; transBatch* must be 0.
 *   fused_gemm(in: a, b[, c]; attrs: transA, transB, alpha, beta,
 *       activation:int, activation_alpha:float) -> y
 *     act(alpha op(a) op(b) + beta c), Gemm's shapes; activation 0 Relu,
 *     1 Tanh, 2 Sigmoid, 3 LeakyRelu (slope activation_alpha).
 *
 * Ids out of their table's range fail naming the position. Shape function
 * "embed_layernorm" (y [B, S, H], mask_index [B]), "attention"
 * ([B, S, 3H / 3]), "multihead_attention" (y, present_key, present_value, qk), "fused_matmul" and "fused_gemm".
 *
 * Products run on the kernels' pool (par.h) by matmul.c's engine
 * (product.h), each part a single-threaded sgemm; attention's weights,
 * constant in the models ONNX Runtime's optimizer writes, are packed at
 * link for pgemm.c's microkernel (attention_prepack). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/norm.h"
#include "ops/cpu/pgemm.h"
#include "ops/cpu/product.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attention.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/matmul.h"
#include "shapefuncs/shape.h"

static dvm_status *want_f32(const char *op, const dvm_kernel_args *a, int n) {
  for (int i = 0; i < n; i++)
    if (a->in[i]->dtype != DVM_F32)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d is %s: want f32", op, i,
                            dvm_dtype_name((dvm_dtype)a->in[i]->dtype));
  return NULL;
}

static int64_t last_dim(const dvm_tensor *t) { return t->rank ? t->dims[t->rank - 1] : 1; }

/* A vector input that must be [h]. */
static dvm_status *want_vec(const char *op, const char *what, const dvm_tensor *t, int64_t h) {
  if (t->rank == 1 && t->dims[0] == h) return NULL;
  char s[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s must be [%lld]", op, what,
                        dvm_shape_str(s, t->rank, t->dims), (long long)h);
}

/* ---- the GELUs ---- */

/* y = gelu(x + bias) over rows of h, with the elementwise kernels' GELUs
 * (elementwise_math.h): vectorized, and as exact as the Gelu op's. Without
 * a bias, a loop of its own: one loop with `b ? b[i] : 0` was vectorized
 * only for a bias, and ran scalar (4x slower) for Gelu and FastGelu
 * without one. */
#define GELU_ROWS(name, GELU)                                                                  \
  DVM_VEC static void name(const float *x, const float *b, int64_t rows, int64_t h, float *y) { \
    for (int64_t r = 0; r < rows; r++, x += h, y += h)                                          \
      if (b)                                                                                    \
        _Pragma("omp simd") for (int64_t i = 0; i < h; i++) y[i] = GELU(x[i] + b[i]);           \
      else                                                                                      \
        _Pragma("omp simd") for (int64_t i = 0; i < h; i++) y[i] = GELU(x[i] + 0.0f);           \
  }
GELU_ROWS(gelu_erf_rows, dvm_ew_geluf)
GELU_ROWS(gelu_tanh_rows, dvm_ew_gelu_tanhf)

typedef struct gelu_job {
  const float *x, *b;
  float *y;
  int64_t h;
  int tanh_form;
} gelu_job;

static void gelu_part(void *ctx, int64_t s, int64_t e) {
  const gelu_job *j = ctx;
  (j->tanh_form ? gelu_tanh_rows : gelu_erf_rows)(j->x + s * j->h, j->b, e - s, j->h, j->y + s * j->h);
}

static dvm_status *gelu_with_bias(const dvm_kernel_args *a, const char *op, int tanh_form) {
  dvm_status *st = dvm_kargs_check_range(a, op, 1, 2, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = want_f32(op, a, a->nin);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *b = a->nin > 1 ? a->in[1] : NULL;
  int64_t h = last_dim(x), n = dvm_tensor_numel(x);
  if (b && (st = want_vec(op, "bias", b, h))) return st;
  if (n == 0) return NULL;
  gelu_job j = {dvm_tensor_ptr(x), b ? dvm_tensor_ptr(b) : NULL, dvm_tensor_ptr(a->out[0]), h, tanh_form};
  /* parts of at least 16K elements: below, waking a worker costs more */
  dvm_par_for(dvm_kargs_threads(a), n / h, (16384 + h - 1) / h, gelu_part, &j);
  return NULL;
}

static dvm_status *fast_gelu(const dvm_kernel_args *a) { return gelu_with_bias(a, "fast_gelu", 1); }
static dvm_status *bias_gelu(const dvm_kernel_args *a) { return gelu_with_bias(a, "bias_gelu", 0); }

/* ---- layer norms ---- */

/* y = (v - mean) / sqrt(var + eps) * gamma + beta over one row of h. */
static void norm_row(const float *v, int64_t h, float eps, const float *gamma, const float *beta, float *y) {
  double sum = 0, sq = 0;
  for (int64_t j = 0; j < h; j++) sum += v[j];
  float mean = (float)(sum / (double)h);
  for (int64_t j = 0; j < h; j++) sq += (double)(v[j] - mean) * (v[j] - mean);
  float inv = 1.0f / sqrtf((float)(sq / (double)h) + eps);
  for (int64_t j = 0; j < h; j++) y[j] = (v[j] - mean) * inv * gamma[j] + (beta ? beta[j] : 0.0f);
}

static dvm_status *epsilon_of(const char *op, const dvm_kernel_args *a, float *eps) {
  double e = 0;
  dvm_status *st = dvm_attr_count(op, a->nattrs, 1, 1);
  if (!st) st = dvm_attr_float(op, "epsilon", &a->attrs[0], &e);
  *eps = (float)e;
  return st;
}

/* skip_layernorm (x, skip, gamma[, beta[, bias]]) or, rms, skip_rmsnorm
 * (x, skip, gamma[, bias]). */
static dvm_status *skip_norm(const dvm_kernel_args *a, const char *op, int rms) {
  float eps;
  dvm_status *st = dvm_kargs_check_range(a, op, 3, rms ? 4 : 5, 1, 2, DVM_DEVICE_CPU);
  if (!st) st = want_f32(op, a, a->nin);
  if (!st) st = epsilon_of(op, a, &eps);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *skip = a->in[1];
  int64_t h = last_dim(x), n = dvm_tensor_numel(x);
  char sx[DVM_SHAPE_STR_SIZE], ss[DVM_SHAPE_STR_SIZE];
  if (skip->rank != x->rank || memcmp(skip->dims, x->dims, sizeof(int64_t) * (size_t)x->rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: skip %s must have x's shape %s", op,
                          dvm_shape_str(ss, skip->rank, skip->dims), dvm_shape_str(sx, x->rank, x->dims));
  static const char *const names[2][3] = {{"gamma", "beta", "bias"}, {"gamma", "bias"}};
  for (int i = 2; i < a->nin; i++)
    if ((st = want_vec(op, names[rms][i - 2], a->in[i], h))) return st;
  int at_bias = rms ? 3 : 4;
  const float *beta = !rms && a->nin > 3 ? dvm_tensor_ptr(a->in[3]) : NULL;
  const float *bias = a->nin > at_bias ? dvm_tensor_ptr(a->in[at_bias]) : NULL;
  dvm_cpu_skip_layernorm_rows(dvm_kargs_threads(a), h ? n / h : 0, h, dvm_tensor_ptr(x), dvm_tensor_ptr(skip), bias,
                              dvm_tensor_ptr(a->in[2]), beta, eps, rms,
                              a->nout > 1 ? dvm_tensor_ptr(a->out[1]) : NULL, dvm_tensor_ptr(a->out[0]));
  return NULL;
}

static dvm_status *skip_layernorm(const dvm_kernel_args *a) { return skip_norm(a, "skip_layernorm", 0); }
static dvm_status *skip_rmsnorm(const dvm_kernel_args *a) { return skip_norm(a, "skip_rmsnorm", 1); }

/* An embedding table or a vector: f32, or u8/i8 codes with a scale and a
 * zero point (QEmbedLayerNormalization's). */
typedef struct table {
  const dvm_tensor *t;
  float scale;
  int32_t zp;
} table;

static void row_of(const table *tb, int64_t r, int64_t h, float *out) {
  if (tb->t->dtype == DVM_F32) {
    memcpy(out, (const float *)dvm_tensor_ptr(tb->t) + r * h, sizeof(float) * (size_t)h);
    return;
  }
  dvm_cpu_quant_dequant_bytes(tb->t, r * h, h, tb->scale, tb->zp, out);
}

/* EmbedLayerNormalization from ids and segment ids (i32 [B, S]), the word,
 * position and segment tables, gamma and beta (tab[0..5)), the mask and
 * position ids (i32, or NULL). */
static dvm_status *embed(const char *op, const dvm_tensor *ids, const dvm_tensor *seg, const table *tab,
                         const dvm_tensor *mask, const dvm_tensor *pos, float eps, dvm_tensor *y, dvm_tensor *mi) {
  const dvm_tensor *ints[4] = {ids, seg, mask, pos};
  for (int i = 0; i < 4; i++)
    if (ints[i] && ints[i]->dtype != DVM_I32)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: ids, segment ids, mask and position ids must be i32", op);
  if (ids->rank != 2) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input ids must be [batch, seq]", op);
  int64_t B = ids->dims[0], S = ids->dims[1], H = last_dim(tab[0].t);
  /* both segment inputs empty [0]: left out of the model, no segment row */
  int noseg = seg->rank == 1 && seg->dims[0] == 0 && tab[2].t->rank == 1 && tab[2].t->dims[0] == 0;
  char s1[DVM_SHAPE_STR_SIZE];
  for (int i = 0; i < 5; i++) {
    const dvm_tensor *t = tab[i].t;
    if (i == 2 && noseg) continue;
    if (t->rank != (i < 3 ? 2 : 1) || t->dims[t->rank - 1] != H)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s does not fit hidden size %lld", op,
                            i < 3 ? "an embedding table" : "gamma or beta", dvm_shape_str(s1, t->rank, t->dims),
                            (long long)H);
  }
  for (int i = noseg ? 2 : 1; i < 4; i++) {
    const dvm_tensor *t = ints[i];
    if (t && !(t->rank == 2 && t->dims[1] == S && (t->dims[0] == B || (i == 3 && t->dims[0] == 1))))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s does not fit ids [%lld, %lld]", op,
                            i == 1 ? "segment ids" : i == 2 ? "mask" : "position ids",
                            dvm_shape_str(s1, t->rank, t->dims), (long long)B, (long long)S);
  }
  const int32_t *idp = dvm_tensor_ptr(ids), *segp = noseg ? NULL : dvm_tensor_ptr(seg);
  const int32_t *mp = mask ? dvm_tensor_ptr(mask) : NULL, *posp = pos ? dvm_tensor_ptr(pos) : NULL;
  float *yp = dvm_tensor_ptr(y);
  int32_t *mip = dvm_tensor_ptr(mi);
  float *v = malloc(sizeof(float) * (size_t)(5 * H + 1)), *gamma = v + 2 * H, *beta = v + 3 * H;
  if (!v) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
  row_of(&tab[3], 0, H, gamma);
  row_of(&tab[4], 0, H, beta);
  for (int64_t b = 0; b < B; b++) {
    int32_t ones = 0;
    for (int64_t s = 0; s < S; s++) {
      int64_t k = b * S + s;
      int64_t row[3] = {idp[k], posp ? posp[(pos->dims[0] == 1 ? 0 : b * S) + s] : s, segp ? segp[k] : 0};
      for (int t = 0; t < (segp ? 3 : 2); t++) {
        if (row[t] < 0 || row[t] >= tab[t].t->dims[0]) {
          free(v);
          return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s id %lld at [%lld, %lld] is out of range [0, %lld)", op,
                                t == 0 ? "input" : t == 1 ? "position" : "segment", (long long)row[t], (long long)b,
                                (long long)s, (long long)tab[t].t->dims[0]);
        }
        row_of(&tab[t], row[t], H, t ? v + H : v);
        for (int64_t j = 0; t && j < H; j++) v[j] += v[H + j];
      }
      norm_row(v, H, eps, gamma, beta, yp + k * H);
      ones += mp && mp[k] == 1;
    }
    mip[b] = ones;
  }
  free(v);
  return NULL;
}

static dvm_status *embed_layernorm(const dvm_kernel_args *a) {
  const char *op = "embed_layernorm";
  float eps;
  dvm_status *st = dvm_kargs_check_range(a, op, 7, 9, 2, 2, DVM_DEVICE_CPU);
  if (!st) st = epsilon_of(op, a, &eps);
  if (st) return st;
  table tab[5];
  for (int i = 0; i < 5; i++) {
    if (a->in[2 + i]->dtype != DVM_F32)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d is %s: want f32", op, 2 + i,
                            dvm_dtype_name((dvm_dtype)a->in[2 + i]->dtype));
    tab[i] = (table){a->in[2 + i], 1, 0};
  }
  return embed(op, a->in[0], a->in[1], tab, a->nin > 7 ? a->in[7] : NULL, a->nin > 8 ? a->in[8] : NULL, eps,
               a->out[0], a->out[1]);
}

/* com.microsoft QEmbedLayerNormalization: the tables, gamma and beta as
 * u8/i8 codes (inputs 2-6) with their scales (8-12) and zero points
 * (13-17), all one element; input 7 the mask. */
static dvm_status *qembed_layernorm(const dvm_kernel_args *a) {
  const char *op = "qembed_layernorm";
  float eps;
  dvm_status *st = dvm_kargs_check_range(a, op, 18, 18, 2, 2, DVM_DEVICE_CPU);
  if (!st) st = epsilon_of(op, a, &eps);
  if (st) return st;
  table tab[5];
  for (int i = 0; i < 5; i++) {
    const dvm_tensor *q = a->in[2 + i], *s = a->in[8 + i], *z = a->in[13 + i];
    if ((q->dtype != DVM_U8 && q->dtype != DVM_I8) || z->dtype != q->dtype || s->dtype != DVM_F32 ||
        dvm_tensor_numel(s) != 1 || dvm_tensor_numel(z) != 1)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d must be u8 or i8 codes with one f32 scale and one "
                            "zero point of their dtype", op, 2 + i);
    tab[i] = (table){q, *(const float *)dvm_tensor_ptr(s), dvm_cpu_quant_int_at(z, 0)};
  }
  return embed(op, a->in[0], a->in[1], tab, a->in[7], NULL, eps, a->out[0], a->out[1]);
}

/* ---- attention ---- */

typedef struct attn {
  int64_t heads, uni, B, S, Hin, H3;
  float scale, filter;
  const dvm_tensor *mask;
} attn;

/* The attributes (from attrs[0]: num_heads, unidirectional, scale,
 * mask_filter_value) and the shapes of x, the weights, the bias and the
 * mask. */
static dvm_status *attn_setup(const char *op, const dvm_kernel_args *a, const dvm_tensor *mask, attn *t) {
  dvm_status *st = dvm_attr_count(op, a->nattrs, 4, 4);
  double scale = 0, filter = 0;
  memset(t, 0, sizeof *t);
  if (!st) st = dvm_attr_int(op, "num_heads", &a->attrs[0], &t->heads);
  if (!st) st = dvm_attr_int(op, "unidirectional", &a->attrs[1], &t->uni);
  if (!st) st = dvm_attr_float(op, "scale", &a->attrs[2], &scale);
  if (!st) st = dvm_attr_float(op, "mask_filter_value", &a->attrs[3], &filter);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *w = a->in[1];
  char sx[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
  if (x->rank != 3 || w->rank != 2 || w->dims[0] != x->dims[2] || w->dims[1] % 3 || t->heads < 1 ||
      (w->dims[1] / 3) % t->heads)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: x %s and weights %s must be [B, S, Hin] and [Hin, 3H], H "
                          "divisible by num_heads %lld", op, dvm_shape_str(sx, x->rank, x->dims),
                          dvm_shape_str(sw, w->rank, w->dims), (long long)t->heads);
  t->B = x->dims[0], t->S = x->dims[1], t->Hin = x->dims[2], t->H3 = w->dims[1];
  if ((st = want_vec(op, "bias", a->in[2], t->H3))) return st;
  if (a->in[2]->dtype != DVM_F32) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: bias must be f32", op);
  if (mask && (mask->dtype != DVM_I32 || !((mask->rank == 1 && mask->dims[0] == t->B) ||
                                           (mask->rank == 2 && mask->dims[0] == t->B && mask->dims[1] == t->S))))
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: mask_index %s: only i32 [B] (end positions) or [B, S] (0/1) masks "
                          "are supported", op, dvm_shape_str(sx, mask->rank, mask->dims));
  t->mask = mask;
  t->scale = scale != 0 ? (float)scale : 1.0f / sqrtf((float)(t->H3 / 3 / t->heads));
  t->filter = (float)filter;
  return NULL;
}

/* Attention over the projected qkv [B, S, 3H] into y [B, S, H] by the
 * attention core (ops/cpu/attention.h), q, k and v read in place (rows
 * of 3H); the mask as an additive bias of 0 and mask_filter_value: one
 * row of keys per batch entry [B, S] (the same for every query), or with
 * unidirectional [B, S, S]. Building and reading [B, S, S] for a padding
 * mask cost more than the softmax itself at BERT's 4 x 128. */
static dvm_status *attend(const char *op, const attn *t, const float *qkv, float *yp, int threads) {
  int64_t S = t->S, H3 = t->H3, H = H3 / 3, hs = H / t->heads, B = t->B;
  const int32_t *mp = t->mask ? dvm_tensor_ptr(t->mask) : NULL;
  if (!B || !S || !hs) return NULL;
  int64_t rows = t->uni ? S : mp ? 1 : 0; /* the bias's rows per batch entry */
  float *bias = rows ? malloc(sizeof(float) * (size_t)(B * rows * S)) : NULL;
  if (rows && !bias) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < S; j++) {
        int off = (t->uni && j > i) || (mp && (t->mask->rank == 1 ? j >= mp[b] : mp[b * S + j] == 0));
        bias[(b * rows + i) * S + j] = off ? t->filter : 0.0f;
      }
  dvm_attend at = {.d = {3, B, t->heads, t->heads, S, S, 0, hs, hs}, .q = qkv, .k = qkv + H, .v = qkv + 2 * H,
                   .ldq = H3, .ldkv = H3, .mask = bias, .mstride = {rows * S, 0, rows > 1 ? S : 0, 1}, .mlen = S,
                   .y = yp, .scale = t->scale, .left = -1, .right = -1};
  dvm_status *st = dvm_cpu_attend(op, &at, threads);
  free(bias);
  return st;
}

/* The rows of this file's kernel table that prepack. */
enum { K_ATTENTION = 5 };

/* attention's weights [Hin, 3H] (input 1), constant in the models ONNX
 * Runtime's optimizer writes: packed at link for pgemm.c, as matmul packs
 * its constant B (no AVX2, or no memory: the product on the pool). */
static dvm_status *attention_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs, int nattrs,
                                     void **data, void (**free_data)(void *)) {
  (void)attrs, (void)nattrs;
  if (input != 1 || t->dtype != DVM_F32 || t->rank != 2) return NULL;
  *data = dvm_pgemm_pack(dvm_tensor_ptr(t), t->dims[0], t->dims[1], t->dims[1], 1);
  *free_data = dvm_pgemm_free;
  return NULL;
}

/* qkv [B S, 3H] = x [B S, Hin] . weights + bias, the bias added to each
 * part of qkv by the thread that computed it: on the weights' packed form
 * when there is one, else split over the pool. */
static dvm_status *project(const char *op, const dvm_kernel_args *a, const attn *t, float *qkv) {
  const dvm_tensor *w = a->in[1];
  const float *x = dvm_tensor_ptr(a->in[0]);
  int threads = dvm_kargs_threads(a);
  dvm_epilogue epi = {dvm_tensor_ptr(a->in[2]), DVM_EPI_NONE};
  const dvm_pgemm_b *pb = dvm_tensor_packed(w, &dvm_cpu_contrib_kernels[K_ATTENTION], 1);
  if (pb && dvm_pgemm_k(pb) == t->Hin && dvm_pgemm_n(pb) == t->H3) {
    dvm_pgemm_run(pb, t->B * t->S, x, t->Hin, 1, 1.0f, 0.0f, qkv, t->H3, threads, &epi);
    return NULL;
  }
  dvm_product p = {.ta = 'N', .tb = 'N', .m = t->B * t->S, .n = t->H3, .k = t->Hin, .lda = t->Hin, .ldb = t->H3,
                   .ldc = t->H3, .alpha = 1, .a = x, .b = dvm_tensor_ptr(w), .c = qkv, .epi = &epi};
  return dvm_cpu_product_run(op, &p, threads);
}

static dvm_status *attention(const dvm_kernel_args *a) {
  const char *op = "attention";
  attn t;
  dvm_status *st = dvm_kargs_check_range(a, op, 3, 4, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = want_f32(op, a, 3);
  if (!st) st = attn_setup(op, a, a->nin > 3 ? a->in[3] : NULL, &t);
  if (st) return st;
  float *qkv = malloc(sizeof(float) * (size_t)(t.B * t.S * t.H3 + 1));
  if (!qkv) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
  st = project(op, a, &t, qkv);
  if (!st) st = attend(op, &t, qkv, dvm_tensor_ptr(a->out[0]), dvm_kargs_threads(a));
  free(qkv);
  return st;
}

/* com.microsoft QAttention (x, weights as u8/i8 codes, bias, x_scale,
 * w_scale[, mask[, x_zp[, w_zp]]]): qkv = (x - x_zp)(w - w_zp) x_scale
 * w_scale + bias, then as attention. The product is MatMulIntegerToFloat's
 * (quant.h): summed exactly in i32 as ONNX Runtime's, on oneDNN's u8s8
 * GEMM with VNNI; w_scale and w_zp one element or [3H]. */
static dvm_status *qattention(const dvm_kernel_args *a) {
  const char *op = "qattention";
  attn t;
  dvm_status *st = dvm_kargs_check_range(a, op, 5, 8, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = attn_setup(op, a, a->nin > 5 ? a->in[5] : NULL, &t);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *w = a->in[1], *xs = a->in[3], *ws = a->in[4];
  const dvm_tensor *xz = a->nin > 6 ? a->in[6] : NULL, *wz = a->nin > 7 ? a->in[7] : NULL;
  int per = dvm_tensor_numel(ws) != 1;
  if ((x->dtype != DVM_U8 && x->dtype != DVM_I8) || (w->dtype != DVM_U8 && w->dtype != DVM_I8) ||
      xs->dtype != DVM_F32 || ws->dtype != DVM_F32 || dvm_tensor_numel(xs) != 1 ||
      (per && (ws->rank != 1 || ws->dims[0] != t.H3)) || (xz && (xz->dtype != x->dtype || dvm_tensor_numel(xz) != 1)) ||
      (wz && (wz->dtype != w->dtype || (dvm_tensor_numel(wz) != 1 && (wz->rank != 1 || wz->dims[0] != t.H3)))))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: x and w must be u8 or i8 codes with f32 scales and zero points "
                          "of their dtypes (one element; w's may have %lld)", op, (long long)t.H3);
  float *qkv = malloc(sizeof(float) * (size_t)(t.B * t.S * t.H3 + 1));
  if (!qkv) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
  st = dvm_cpu_quant_matmul_f32(op, x, xz, xs, w, wz, ws, a->in[2], NULL, qkv, dvm_kargs_threads(a));
  if (!st) st = attend(op, &t, qkv, dvm_tensor_ptr(a->out[0]), dvm_kargs_threads(a));
  free(qkv);
  return st;
}

/* k (3-D [B, L, N w] plus bias b, or 4-D [B, N, L, w]) after the past
 * ([B, N, P, w] or NULL) into dst [B, N, P + L, w]. */
static void mha_keys(const dvm_mha_dims *m, const float *past, const float *k, const float *b, int64_t w, float *dst) {
  int64_t T = m->p + m->l;
  for (int64_t bi = 0; bi < m->b; bi++)
    for (int64_t h = 0; h < m->n; h++) {
      float *o = dst + (bi * m->n + h) * T * w;
      if (m->p) memcpy(o, past + (bi * m->n + h) * m->p * w, sizeof(float) * (size_t)(m->p * w));
      for (int64_t l = 0; l < m->l; l++) {
        const float *src = m->kv4 ? k + ((bi * m->n + h) * m->l + l) * w : k + (bi * m->l + l) * m->n * w + h * w;
        for (int64_t j = 0; j < w; j++) o[(m->p + l) * w + j] = src[j] + (b ? b[h * w + j] : 0.0f);
      }
    }
}

/* com.microsoft MultiHeadAttention (see the head comment): q (+ bias)
 * copied to [B, S, D], the keys and values (past ++ new, + bias) to
 * [B, N, T, head size] (into present_key and present_value when wanted),
 * key_padding_mask, unidirectional and attention_bias summed into one
 * additive bias [B, N or 1, S, T], then the attention core. */
static dvm_status *multihead_attention(const dvm_kernel_args *a) {
  const char *op = "multihead_attention";
  int64_t present, N, uni;
  double scale, filter;
  dvm_status *st = dvm_attr_count(op, a->nattrs, 5, 5);
  if (!st) st = dvm_attr_int(op, "present", &a->attrs[0], &present);
  if (!st) st = dvm_attr_int(op, "num_heads", &a->attrs[1], &N);
  if (!st) st = dvm_attr_int(op, "unidirectional", &a->attrs[2], &uni);
  if (!st) st = dvm_attr_float(op, "scale", &a->attrs[3], &scale);
  if (!st) st = dvm_attr_float(op, "mask_filter_value", &a->attrs[4], &filter);
  if (!st) st = dvm_kargs_check_range(a, op, 3, 8, 4, 4, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *in[8] = {0};
  int k = 0;
  for (int i = 0; i < 8; i++)
    if (present >> i & 1) {
      if (k >= a->nin) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: fewer inputs than `present` names", op);
      in[i] = a->in[k++];
    }
  if (k != a->nin || (present & 7) != 7 || present >> 12)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query, key and value must be given (`present` %lld)", op,
                          (long long)present);
  for (int i = 0; i < 8; i++)
    if (in[i] && i != 4 && in[i]->dtype != DVM_F32)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input %d must be f32", op, i);
  const dvm_tensor *q = in[0], *kt = in[1], *vt = in[2], *bt = in[3], *mt = in[4], *ab = in[5], *pk = in[6], *pv = in[7];
  char s0[DVM_SHAPE_STR_SIZE];
  dvm_mha_dims m;
  if ((st = dvm_mha_dims_of(op, N, q->rank, q->dims, kt->rank, kt->dims, vt->rank, vt->dims, pk ? pk->rank : -1,
                            pk ? pk->dims : NULL, pv ? pv->rank : -1, pv ? pv->dims : NULL, &m)))
    return st;
  int64_t B = m.b, S = m.s, T = m.p + m.l, D = N * m.dh, Dv = N * m.dv;
  if (bt && m.kv4) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: bias with a 4-D key and value", op);
  if (bt && (st = want_vec(op, "bias", bt, 2 * D + Dv))) return st;
  if (mt && (mt->dtype != DVM_I32 || !((mt->rank == 1 && mt->dims[0] == B) ||
                                       (mt->rank == 2 && mt->dims[0] == B && mt->dims[1] == T) ||
                                       (mt->rank == 3 && mt->dims[0] == B && mt->dims[1] == S && mt->dims[2] == T))))
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: key_padding_mask %s: only i32 [B] (key lengths), [B, %lld] or "
                          "[B, S, %lld] (0/1) masks are supported", op, dvm_shape_str(s0, mt->rank, mt->dims),
                          (long long)T, (long long)T);
  if (ab && (ab->rank != 4 || (ab->dims[0] != B && ab->dims[0] != 1) || (ab->dims[1] != N && ab->dims[1] != 1) ||
             ab->dims[2] != S || ab->dims[3] != T))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attention_bias %s must be [B or 1, num_heads or 1, S, %lld]", op,
                          dvm_shape_str(s0, ab->rank, ab->dims), (long long)T);
  if (uni && S != m.l)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: unidirectional with %lld queries and %lld new keys: only equal "
                          "numbers are supported", op, (long long)S, (long long)m.l);
  const int64_t want[4][4] = {{B, S, Dv}, {B, N, T, m.dh}, {B, N, T, m.dv}, {B, N, S, T}};
  float *outs[4];
  for (int j = 0; j < 4; j++) {
    dvm_tensor *o = a->out[j];
    outs[j] = present >> (8 + j) & 1 ? dvm_tensor_ptr(o) : NULL;
    if (outs[j] && (o->dtype != DVM_F32 || o->rank != (j ? 4 : 3) ||
                    memcmp(o->dims, want[j], sizeof(int64_t) * (size_t)o->rank)))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %d must be f32 %s", op, j,
                            dvm_shape_str(s0, j ? 4 : 3, want[j]));
  }
  int causal = uni && S > 1;
  int64_t NM = ab && ab->dims[1] == N ? N : 1, nm = (mt || ab || causal) ? B * NM * S * T : 0;
  int64_t nq = B * S * D, nk = outs[1] ? 0 : B * N * T * m.dh, nv = outs[2] ? 0 : B * N * T * m.dv;
  float *buf = malloc(sizeof(float) * (size_t)(nq + nk + nv + nm + 1));
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
  float *qb = buf, *kb = outs[1] ? outs[1] : qb + nq, *vb = outs[2] ? outs[2] : qb + nq + nk;
  float *bias = nm ? qb + nq + nk + nv : NULL;
  const float *qp = dvm_tensor_ptr(q), *bp = bt ? dvm_tensor_ptr(bt) : NULL;
  for (int64_t r = 0; r < B * S; r++)
    for (int64_t j = 0; j < D; j++) qb[r * D + j] = qp[r * D + j] + (bp ? bp[j] : 0.0f);
  mha_keys(&m, pk ? dvm_tensor_ptr(pk) : NULL, dvm_tensor_ptr(kt), bp ? bp + D : NULL, m.dh, kb);
  mha_keys(&m, pv ? dvm_tensor_ptr(pv) : NULL, dvm_tensor_ptr(vt), bp ? bp + 2 * D : NULL, m.dv, vb);
  const int32_t *mp = mt ? dvm_tensor_ptr(mt) : NULL;
  const float *abp = ab ? dvm_tensor_ptr(ab) : NULL;
  for (int64_t b = 0; nm && b < B; b++)
    for (int64_t h = 0; h < NM; h++)
      for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < T; j++) {
          int pad = mp && (mt->rank == 1 ? j >= mp[b] : mt->rank == 2 ? mp[b * T + j] == 0 : mp[(b * S + i) * T + j] == 0);
          float v = abp ? abp[(((ab->dims[0] == 1 ? 0 : b) * ab->dims[1] + h) * S + i) * T + j] : 0.0f;
          if (pad) v += (float)filter;
          if (causal && j > m.p + i) v += -FLT_MAX;
          bias[((b * NM + h) * S + i) * T + j] = v;
        }
  dvm_attend at = {.d = {3, B, N, N, S, m.l, m.p, m.dh, m.dv}, .q = qb, .k = kb, .v = vb, .ldq = D, .mask = bias,
                   .mstride = {NM * S * T, NM == N ? S * T : 0, T, 1}, .mlen = T, .y = outs[0], .qk = outs[3],
                   .mode = 2, .past = 1, .scale = scale != 0 ? (float)scale : 1.0f / sqrtf((float)m.dh),
                   .left = -1, .right = -1};
  st = B && S ? dvm_cpu_attend(op, &at, dvm_kargs_threads(a)) : NULL;
  free(buf);
  return st;
}

/* ---- products ---- */

/* The dims of a 2-D-or-more operand as the product reads it: a 1-D a is
 * [1, K], a 1-D b [K, 1]; trans swaps the last two. */
static void operand_dims(const dvm_tensor *t, int is_b, int trans, int *r, int64_t *d) {
  *r = t->rank < 2 ? 2 : t->rank;
  if (t->rank < 2) {
    d[0] = is_b ? (t->rank ? t->dims[0] : 1) : 1;
    d[1] = is_b ? 1 : (t->rank ? t->dims[0] : 1);
  } else {
    memcpy(d, t->dims, sizeof(int64_t) * (size_t)t->rank);
  }
  if (trans) {
    int64_t x = d[*r - 1];
    d[*r - 1] = d[*r - 2];
    d[*r - 2] = x;
  }
}

static dvm_status *fused_matmul(const dvm_kernel_args *a) {
  const char *op = "fused_matmul";
  int64_t ta = 0, tb = 0, tba = 0, tbb = 0;
  double alpha = 1;
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 2, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = want_f32(op, a, 2);
  if (!st) st = dvm_attr_count(op, a->nattrs, 5, 5);
  if (!st) st = dvm_attr_int(op, "transA", &a->attrs[0], &ta);
  if (!st) st = dvm_attr_int(op, "transB", &a->attrs[1], &tb);
  if (!st) st = dvm_attr_float(op, "alpha", &a->attrs[2], &alpha);
  if (!st) st = dvm_attr_int(op, "transBatchA", &a->attrs[3], &tba);
  if (!st) st = dvm_attr_int(op, "transBatchB", &a->attrs[4], &tbb);
  if (st) return st;
  if (tba || tbb) return dvm_status_new(DVM_UNIMPLEMENTED, "%s: transBatchA and transBatchB are not supported", op);
  const dvm_tensor *x = a->in[0], *w = a->in[1];
  if ((ta && x->rank < 2) || (tb && w->rank < 2))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a transposed operand must have rank >= 2", op);
  int ra, rb, ry;
  int64_t da[DVM_MAX_RANK], db[DVM_MAX_RANK], dy[DVM_MAX_RANK];
  operand_dims(x, 0, (int)ta, &ra, da);
  operand_dims(w, 1, (int)tb, &rb, db);
  if ((st = dvm_matmul_shape(ra, da, rb, db, &ry, dy))) return st;
  /* the stored dims (untransposed) for the batch strides and leading dims */
  operand_dims(x, 0, 0, &ra, da);
  operand_dims(w, 1, 0, &rb, db);
  dvm_product p = {.ta = ta ? 'T' : 'N', .tb = tb ? 'T' : 'N', .m = dy[ry - 2], .n = dy[ry - 1],
                   .k = ta ? da[ra - 2] : da[ra - 1], .lda = da[ra - 1], .ldb = db[rb - 1], .ldc = dy[ry - 1],
                   .alpha = alpha, .a = dvm_tensor_ptr(x), .b = dvm_tensor_ptr(w), .c = dvm_tensor_ptr(a->out[0]),
                   .nbatch = ry - 2};
  dvm_cpu_product_strides(ra, da, 2, p.nbatch, p.sa);
  dvm_cpu_product_strides(rb, db, 2, p.nbatch, p.sb);
  int64_t size = p.m * p.n;
  for (int i = p.nbatch - 1; i >= 0; i--) {
    p.bdims[i] = dy[i];
    p.sc[i] = size;
    size *= dy[i];
  }
  return dvm_cpu_product_run(op, &p, dvm_kargs_threads(a));
}

static dvm_status *fused_gemm(const dvm_kernel_args *a) {
  const char *op = "fused_gemm";
  int ta, tb;
  double alpha, beta, act_alpha;
  int64_t act;
  dvm_status *st = dvm_kargs_check_range(a, op, 2, 3, 1, 1, DVM_DEVICE_CPU);
  if (!st) st = want_f32(op, a, a->nin);
  if (!st) st = dvm_attr_count(op, a->nattrs, 6, 6);
  if (!st) st = dvm_gemm_attrs(a->attrs, &ta, &tb, &alpha, &beta);
  if (!st) st = dvm_attr_int(op, "activation", &a->attrs[4], &act);
  if (!st) st = dvm_attr_float(op, "activation_alpha", &a->attrs[5], &act_alpha);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *w = a->in[1], *c = a->nin > 2 ? a->in[2] : NULL;
  int64_t dy[2];
  if ((st = dvm_gemm_shape(x->rank, x->dims, w->rank, w->dims, c ? c->rank : -1, c ? c->dims : NULL, ta, tb, dy)))
    return st;
  int64_t M = dy[0], N = dy[1], K = ta ? x->dims[0] : x->dims[1];
  float *y = dvm_tensor_ptr(a->out[0]);
  const float *cp = c ? dvm_tensor_ptr(c) : NULL;
  /* c broadcast to [M, N]: its last dim is N or 1, its first (if 2-D) M or 1 */
  int64_t cn = c && c->rank ? c->dims[c->rank - 1] : 1, cm = c && c->rank == 2 ? c->dims[0] : 1;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++)
      y[i * N + j] = cp && beta != 0 ? (float)beta * cp[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)] : 0.0f;
  dvm_product p = {.ta = ta ? 'T' : 'N', .tb = tb ? 'T' : 'N', .m = M, .n = N, .k = K, .lda = x->dims[1],
                   .ldb = w->dims[1], .ldc = N, .alpha = alpha, .beta = 1, .a = dvm_tensor_ptr(x),
                   .b = dvm_tensor_ptr(w), .c = y};
  if ((st = dvm_cpu_product_run(op, &p, dvm_kargs_threads(a)))) return st;
  for (int64_t i = 0; i < M * N; i++) {
    float v = y[i];
    y[i] = act == 0 ? (v > 0 ? v : 0) : act == 1 ? tanhf(v) : act == 2 ? 1.0f / (1.0f + expf(-v))
                                                              : (v > 0 ? v : (float)act_alpha * v);
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_contrib_kernels[] = {
    {"fast_gelu", DVM_DEVICE_CPU, fast_gelu, NULL, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"bias_gelu", DVM_DEVICE_CPU, bias_gelu, NULL, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"skip_layernorm", DVM_DEVICE_CPU, skip_layernorm, NULL, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"skip_rmsnorm", DVM_DEVICE_CPU, skip_rmsnorm, NULL, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"embed_layernorm", DVM_DEVICE_CPU, embed_layernorm, "embed_layernorm", .dtypes = DVM_DTYPE_BIT(DVM_I32)},
    [K_ATTENTION] = {"attention", DVM_DEVICE_CPU, attention, "attention", .prepack = attention_prepack,
                     .prepack_replaces = 1, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"qembed_layernorm", DVM_DEVICE_CPU, qembed_layernorm, "embed_layernorm", .dtypes = DVM_DTYPE_BIT(DVM_I32)},
    {"qattention", DVM_DEVICE_CPU, qattention, "attention",
     .dtypes = DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_I8)},
    {"multihead_attention", DVM_DEVICE_CPU, multihead_attention, "multihead_attention",
     .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"fused_matmul", DVM_DEVICE_CPU, fused_matmul, "fused_matmul", .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {"fused_gemm", DVM_DEVICE_CPU, fused_gemm, "fused_gemm", .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
