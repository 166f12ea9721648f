/* com.microsoft GroupQueryAttention on the CPU, f32, as ONNX Runtime's CPU
 * kernel computes it (the decoder attention of the LLMs that ONNX Runtime
 * GenAI's model builder writes).
 *
 *   group_query_attention(in: the given ones of query, key, value,
 *       past_key, past_value, seqlens_k, total_sequence_length,
 *       cos_cache, sin_cache, position_ids, attention_bias, head_sink;
 *       attrs: present:int (bits 0..11: which of those the node gives,
 *       16..18: which outputs it wants), num_heads, kv_num_heads,
 *       scale:float, softcap:float, do_rotary, rotary_interleaved,
 *       local_window_size, smooth_softmax) -> output, present_key,
 *       present_value
 *     query [B, S, Hq D], key and value [B, S, Hkv D]; or packed QKV
 *     [B, S, (Hq + 2 Hkv) D] with key and value absent. past_key and
 *     past_value [B, Hkv, P, D] (BNSH); present_key and present_value
 *     [B, Hkv, Tp, D], Tp = max(total_sequence_length, P). seqlens_k
 *     (i32 [B]) is each entry's total length T_b less 1. The call is a
 *     first prompt when S equals total_sequence_length (entry b's past is
 *     0 and its first T_b query rows are its tokens: right padding), else
 *     entry b's past is T_b - S (one token, or several with batch 1).
 *     Entry b's keys are past_key's first past_b rows then the S new
 *     ones, written at rows past_b.. of present; query row s (at position
 *     pos = past_b + s) sees keys [0, pos], the last local_window_size of
 *     them when that is > 0 (-1: all). Scores q k * scale (0: 1 /
 *     sqrt(D)), softcapped (c tanh(x / c) when softcap > 0), plus
 *     attention_bias ([B or 1, Hq or 1, S, total_sequence_length]), then
 *     softmax: smooth_softmax adds exp(0) to the denominator, head_sink
 *     ([Hq]) exp(sink[h]); output rows past an entry's tokens are 0.
 *     With do_rotary, query and the new keys are rotated first, by
 *     cos/sin_cache ([positions, rd / 2], rd <= D) at position_ids
 *     ([B, S]; a first prompt reads only its first, position_ids[0, 0] +
 *     s for every entry, as ONNX Runtime) or, without them, at s (a first
 *     prompt) or past_b + s.
 *
 * present and past in one buffer (the same data pointer, as ONNX Runtime
 * decides it): only the new rows are written, at each entry's own
 * position. A paged cache (dvm_tensor_wrap_paged: the server's blocks) is
 * such a buffer whose row t of entry b lies in block table[b][t /
 * block_rows]; every table entry the call reaches is checked against the
 * pool, and a paged past must be its own present. A paged cache's pools
 * may hold f16 (a half-precision KV cache): new rows are rounded to f16 as
 * they are written (after the rotary), and each row read is converted into
 * an f32 row of scratch, in L1, which the f32 arithmetic then reads, so
 * the result is the f32 cache's on keys and values rounded to f16.
 * Without a shared buffer, present gets past's first past_b rows, the new
 * rows, and zeros after them (ONNX Runtime's copy mode). Unwanted
 * present outputs are empty tensors; the keys and values then go to
 * scratch.
 *
 * One task per (entry, kv head, query row): the query heads sharing a kv
 * head read each key and value row once, by vectorized dot products (the
 * decode step: one pass over the cache). Prompts without a sink go to
 * the attention core (attention.h): sgemm per block of queries, per
 * entry over its own rows only. Shape function "group_query_attention"
 * (shapefuncs/attention.c). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/attention.h"
#include "ops/cpu/gqa_half.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attention.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"

#define OP "group_query_attention"

enum { Q_, K_, V_, PK, PV, SEQLENS, TOTAL, COS, SIN, POS, BIAS, SINK, NIN_ };

/* present's keys and values: [b, hkv, tp, d], or pools [blocks, hkv, bs,
 * d] read through a block table of `stride` entries per entry, of f32 or
 * (half, paged only) f16 elements. */
typedef struct gqa_cache {
  char *k, *v;
  const int32_t *table; /* NULL: not paged */
  int64_t stride, bs, hkv, tp, d;
  dvm_gqa_half_load_fn *half; /* f16 elements: their conversion to f32; NULL: f32 */
} gqa_cache;

static int64_t elem_size(const gqa_cache *c) { return c->half ? 2 : 4; }

/* Row t of entry b's kv head h in *k and *v; how many of the n rows from
 * t on follow it there (all n unless paged: to the block's end). */
static int64_t kv_rows(const gqa_cache *c, int64_t b, int64_t h, int64_t t, int64_t n, char **k, char **v) {
  int64_t off = ((b * c->hkv + h) * c->tp + t) * c->d, run = n;
  if (c->table) {
    int64_t r = t % c->bs;
    off = (((int64_t)c->table[b * c->stride + t / c->bs] * c->hkv + h) * c->bs + r) * c->d;
    run = c->bs - r < n ? c->bs - r : n;
  }
  *k = c->k + off * elem_size(c), *v = c->v + off * elem_size(c);
  return run;
}

typedef struct gqa_job {
  const float *q; /* rows of ldq: query heads at columns h * d */
  int64_t ldq;
  gqa_cache c;    /* present */
  const float *bias;  /* attention_bias or NULL: strides over [b, hq, s], rows of blen */
  int64_t bstride[3], blen;
  const float *sink; /* [hq] or NULL */
  float *y;          /* [b, s, hq d] */
  const int64_t *past, *rows; /* per entry: keys before its first query row; its query rows */
  int64_t s, hq, hkv, d, tp, window;
  float scale, softcap;
  int smooth;
  atomic_int failed;
} gqa_job;

/* softmax of row[0, n) with one more logit, `sink`, in the denominator
 * (-inf: none), as ONNX Runtime's smooth softmax. */
DVM_VEC static void sink_softmax(float *row, int64_t n, float sink) {
  if (sink == -INFINITY) {
    dvm_cpu_softmax_row(row, row, n);
    return;
  }
  float mx = sink, sum = 0;
  for (int64_t c = 0; c < n; c++) mx = row[c] > mx ? row[c] : mx;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; c++) sum += row[c] = dvm_ew_expf(row[c] - mx);
  float inv = 1.0f / (sum + dvm_ew_expf(sink - mx));
#pragma omp simd
  for (int64_t c = 0; c < n; c++) row[c] *= inv;
}

/* Entry b's key (value: its value) rows of kv head h from row t on, one
 * at a time; on a paged cache with the next block's rows (pk, pv: NULL
 * where there is none) at hand for prefetching. An f16 cache's rows are
 * converted up to CHUNK at a time (those left in the block) into the ring
 * buf of RING rows, each chunk after the last, so that the 3 rows before
 * a chunk stay valid while it is converted (the value sums hold four):
 * a chunk that wraps starts at 0, which is then more than CHUNK + 3 rows
 * before the end of the last one. */
enum { CHUNK = 16, RING = 2 * CHUNK + 4 };

typedef struct kv_iter {
  const gqa_cache *c;
  int64_t b, h, t, end, left, value;
  char *k, *v, *pk, *pv;
  float *buf;             /* RING rows of d floats (f16 only) */
  const float *next;      /* the converted rows not yet returned */
  int64_t nbuf, pos;      /* how many; the row of buf where the next chunk goes */
} kv_iter;

static kv_iter kv_begin(const gqa_cache *c, int64_t b, int64_t h, int64_t t, int64_t end, int value, float *buf) {
  return (kv_iter){c, b, h, t, end, 0, value, NULL, NULL, NULL, NULL, buf, NULL, 0, 0};
}

/* The next row as stored; the same row of the next block towards the
 * cache: a paged entry's blocks lie anywhere in the pool, where the
 * hardware's prefetcher starts over. */
static inline __attribute__((always_inline)) const char *kv_raw(kv_iter *it) {
  const gqa_cache *c = it->c;
  if (!it->left) {
    it->left = kv_rows(c, it->b, it->h, it->t, it->end - it->t, &it->k, &it->v);
    it->pk = it->pv = NULL;
    if (c->table && it->t + it->left < it->end)
      kv_rows(c, it->b, it->h, it->t + it->left, 1, &it->pk, &it->pv);
  }
  const char *r = it->value ? it->v : it->k;
  int64_t row = c->d * elem_size(c);
  if (it->pk) {
    const char *p = it->value ? it->pv : it->pk;
    for (int64_t o = 0; o < row; o += 64) __builtin_prefetch(p + o);
    it->pk += row, it->pv += row;
  }
  it->k += row, it->v += row, it->t++, it->left--;
  return r;
}

/* The next row as f32. */
static inline __attribute__((always_inline)) const float *kv_next(kv_iter *it) {
  if (!it->c->half) return (const float *)kv_raw(it);
  if (!it->nbuf) {
    const char *r = kv_raw(it);
    int64_t n = 1 + (it->left < CHUNK - 1 ? it->left : CHUNK - 1);
    if (it->pos + n > RING) it->pos = 0;
    float *to = it->buf + it->pos * it->c->d;
    it->c->half((const uint16_t *)r, to, n * it->c->d);
    for (int64_t i = 1; i < n; i++) kv_raw(it);
    it->next = to, it->nbuf = n, it->pos += n;
  }
  const float *r = it->next;
  it->next += it->c->d, it->nbuf--;
  return r;
}

#define LANES 16

/* q . k over d: lane l sums the products of the elements l mod 16 in
 * order, then the lanes in a halving tree. One order on every ISA, in
 * vertical adds: a reduction kept in order is a chain of scalar adds. */
static inline float dot_lanes(const float *q, const float *k, int64_t d) {
  float acc[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= d; i += LANES)
    for (int l = 0; l < LANES; l++) acc[l] += q[i + l] * k[i + l];
  for (int l = 0; i + l < d; l++) acc[l] += q[i + l] * k[i + l];
  for (int l = 0; l < 8; l++) acc[l] += acc[l + 8]; /* the tree, unrolled: each step a vector add */
  for (int l = 0; l < 4; l++) acc[l] += acc[l + 4];
  for (int l = 0; l < 2; l++) acc[l] += acc[l + 2];
  return acc[0] + acc[1];
}

/* One query row s of entry b for the g query heads of kv head kvh: sc is
 * g * tp floats of scratch, then RING * d for f16 rows as f32. Values
 * are summed four rows a time counted from the first, so a paged cache
 * sums in the contiguous one's order. */
DVM_VEC static void attend_row(const gqa_job *j, int64_t b, int64_t kvh, int64_t s, float *sc) {
  int64_t g = j->hq / j->hkv, d = j->d, tp = j->tp, h0 = kvh * g;
  float *y = j->y + (b * j->s + s) * j->hq * d + h0 * d;
  memset(y, 0, sizeof(float) * (size_t)(g * d));
  if (s >= j->rows[b]) return; /* padding after the entry's tokens */
  int64_t pos = j->past[b] + s, lo = j->window > 0 && pos >= j->window ? pos - j->window + 1 : 0, n = pos + 1 - lo;
  const float *q = j->q + (b * j->s + s) * j->ldq + h0 * d;
  kv_iter it = kv_begin(&j->c, b, kvh, lo, lo + n, 0, sc + g * tp);
  for (int64_t c = 0; c < n; c++) { /* each key row once for the g heads */
    const float *kr = kv_next(&it);
    for (int64_t h = 0; h < g; h++) sc[h * tp + c] = dot_lanes(q + h * d, kr, d) * j->scale;
  }
  for (int64_t h = 0; h < g; h++) {
    float *row = sc + h * tp;
    if (j->softcap > 0)
      for (int64_t c = 0; c < n; c++) row[c] = j->softcap * tanhf(row[c] / j->softcap);
    if (j->bias) {
      const float *br = j->bias + b * j->bstride[0] + (h0 + h) * j->bstride[1] + s * j->bstride[2] + lo;
#pragma omp simd
      for (int64_t c = 0; c < n; c++) row[c] += br[c];
    }
    sink_softmax(row, n, j->sink ? j->sink[h0 + h] : j->smooth ? 0.0f : -INFINITY);
  }
  /* each value row once; four at a time, so y is loaded and stored once per four */
  int64_t c = 0;
  it = kv_begin(&j->c, b, kvh, lo, lo + n, 1, sc + g * tp);
  for (; c + 4 <= n; c += 4) {
    const float *v0 = kv_next(&it), *v1 = kv_next(&it), *v2 = kv_next(&it), *v3 = kv_next(&it);
    for (int64_t h = 0; h < g; h++) {
      const float *p = sc + h * tp + c;
      float *yh = y + h * d;
#pragma omp simd
      for (int64_t i = 0; i < d; i++) yh[i] += p[0] * v0[i] + p[1] * v1[i] + p[2] * v2[i] + p[3] * v3[i];
    }
  }
  for (; c < n; c++) {
    const float *vf = kv_next(&it);
    for (int64_t h = 0; h < g; h++) {
      float p = sc[h * tp + c], *yh = y + h * d;
#pragma omp simd
      for (int64_t i = 0; i < d; i++) yh[i] += p * vf[i];
    }
  }
}

static void attend_rows(const void *job, int64_t t0, int64_t t1) {
  gqa_job *j = (gqa_job *)job;
  float *sc = malloc(sizeof(float) * (size_t)(j->hq / j->hkv * j->tp + RING * j->d + 1));
  if (!sc) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t t = t0; t < t1; t++) attend_row(j, t / (j->hkv * j->s), t / j->s % j->hkv, t % j->s, sc);
  free(sc);
}

static dvm_status *oom(void) { return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", OP); }

/* Entry b's first n rows of a paged cache into k and v ([hkv, n, d], f32). */
static void gather_rows(const gqa_cache *c, int64_t b, int64_t n, float *k, float *v) {
  char *kr, *vr;
  for (int64_t h = 0; h < c->hkv; h++)
    for (int64_t t = 0, run; t < n; t += run) {
      run = kv_rows(c, b, h, t, n - t, &kr, &vr);
      float *kd = k + (h * n + t) * c->d, *vd = v + (h * n + t) * c->d;
      if (c->half) {
        c->half((const uint16_t *)kr, kd, run * c->d);
        c->half((const uint16_t *)vr, vd, run * c->d);
      } else {
        memcpy(kd, kr, sizeof(float) * (size_t)(run * c->d));
        memcpy(vd, vr, sizeof(float) * (size_t)(run * c->d));
      }
    }
}

/* A prompt's rows through the attention core, entry by entry over its own
 * rows: no sink (the core's softmax has none). A paged entry's rows are
 * gathered first (the core reads rows at one stride). */
static dvm_status *attend_prompt(const gqa_job *j, int64_t B, int threads) {
  float *kv = NULL;
  if (j->c.table && !(kv = malloc(sizeof(float) * (size_t)(2 * j->hkv * j->tp * j->d) + 1))) return oom();
  for (int64_t b = 0; b < B; b++) {
    int64_t rows = j->rows[b], n = j->past[b] + rows;
    float *k = (float *)j->c.k + b * j->hkv * j->tp * j->d, *v = (float *)j->c.v + b * j->hkv * j->tp * j->d;
    if (kv) gather_rows(&j->c, b, n, k = kv, v = kv + j->hkv * n * j->d);
    dvm_attend at = {
        .d = {.rank = 3, .b = 1, .hq = j->hq, .hkv = j->hkv, .sq = rows, .skv = rows, .past = j->past[b], .dh = j->d,
              .dv = j->d},
        .q = j->q + b * j->s * j->ldq, .ldq = j->ldq, .k = k, .v = v, .kv_rows = kv ? n : j->tp,
        .y = j->y + b * j->s * j->hq * j->d,
        .causal = 1, .past = 1, .scale = j->scale, .softcap = j->softcap, .left = j->window > 0 ? j->window - 1 : -1,
        .right = -1};
    if (j->bias) {
      at.mask = j->bias + b * j->bstride[0];
      at.mstride[1] = j->bstride[1], at.mstride[2] = j->bstride[2], at.mstride[3] = 1, at.mlen = j->blen;
    }
    dvm_status *st = rows ? dvm_cpu_attend(OP, &at, threads) : NULL;
    if (st) {
      free(kv);
      return st;
    }
    memset(j->y + (b * j->s + rows) * j->hq * j->d, 0, sizeof(float) * (size_t)((j->s - rows) * j->hq * j->d));
  }
  free(kv);
  return NULL;
}

static dvm_status *bad(const char *what, const dvm_tensor *t, const char *want) {
  char s[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %s %s must be %s", OP, what,
                        dvm_dtype_name((dvm_dtype)t->dtype), dvm_shape_str(s, t->rank, t->dims), want);
}


static const char *const input_names[NIN_] = {"query", "key", "value", "past_key", "past_value", "seqlens_k",
                                              "total_sequence_length", "cos_cache", "sin_cache", "position_ids",
                                              "attention_bias", "head_sink"};

/* The node's inputs from the kernel's by `present`'s bits, f32 but for the
 * integer ones. */
static dvm_status *map_inputs(const dvm_kernel_args *a, int64_t present, const dvm_tensor **in) {
  int next = 0;
  for (int i = 0; i < NIN_; i++)
    if (present & (1 << i)) {
      if (next >= a->nin) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: present names more inputs than given", OP);
      in[i] = a->in[next++];
    }
  if (next != a->nin || !in[Q_] || !in[SEQLENS] || !in[TOTAL])
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %d inputs do not fit present %lld (query, seqlens_k and "
                          "total_sequence_length needed)", OP, a->nin, (long long)present);
  for (int i = 0; i < NIN_; i++)
    if (in[i] && i != SEQLENS && i != TOTAL && i != POS && in[i]->dtype != DVM_F32) return bad(input_names[i], in[i], "f32");
  return NULL;
}

/* The optional inputs' shapes into j: position_ids, attention_bias,
 * head_sink; *half the rotary caches' width (do_rotary). */
static dvm_status *check_options(const dvm_gqa_dims *g, const dvm_tensor *const *in, int rotary, gqa_job *j,
                                 int64_t *half) {
  const dvm_tensor *pos = in[POS], *bias = in[BIAS], *sink = in[SINK], *c = in[COS], *s = in[SIN];
  *half = 0;
  if (rotary) {
    if (!c || !s) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: do_rotary needs cos_cache and sin_cache", OP);
    *half = c->rank == 2 ? c->dims[1] : -1;
    if (c->rank != 2 || s->rank != 2 || memcmp(c->dims, s->dims, sizeof(int64_t) * 2) || 2 * *half > g->d)
      return bad("cos_cache (and sin_cache)", c, "[positions, at most head size / 2], both one shape");
  }
  if (pos && (pos->dtype != DVM_I64 || pos->rank != 2 || pos->dims[0] != g->b || pos->dims[1] != g->s))
    return bad("position_ids", pos, "i64 [batch, sequence]");
  if (bias) {
    const int64_t *d = bias->dims;
    if (bias->rank != 4 || (d[0] != 1 && d[0] != g->b) || (d[1] != 1 && d[1] != g->hq) || d[2] != g->s ||
        d[3] < g->total)
      return bad("attention_bias", bias, "[batch or 1, num_heads or 1, sequence, total_sequence_length]");
    j->blen = d[3];
    j->bstride[2] = d[3];
    j->bstride[1] = d[1] == 1 ? 0 : g->s * d[3];
    j->bstride[0] = d[0] == 1 ? 0 : d[1] * g->s * d[3];
    j->bias = dvm_tensor_ptr(bias);
  }
  if (sink && (sink->rank != 1 || sink->dims[0] != g->hq)) return bad("head_sink", sink, "[num_heads]");
  j->sink = sink ? dvm_tensor_ptr(sink) : NULL;
  if (j->window == 0 || j->window < -1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: local_window_size %lld must be -1 (none) or positive", OP,
                          (long long)j->window);
  return NULL;
}

/* Each entry's past (the keys before its first query row) and query
 * rows from seqlens_k, checked against past_key's pastn rows and
 * present's. */
static dvm_status *entries(const dvm_gqa_dims *g, const int32_t *seqlens, int first, int64_t pastn, int64_t *past,
                           int64_t *rows) {
  for (int64_t b = 0; b < g->b; b++) {
    int64_t t = (int64_t)seqlens[b] + 1;
    past[b] = first ? 0 : t - g->s;
    rows[b] = first ? t : g->s;
    if (t < 1 || (first && t > g->s) || (!first && (past[b] < 0 || past[b] > pastn || t > g->present)))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: seqlens_k[%lld] = %d does not fit %s (%lld new tokens, %lld "
                            "past rows, total_sequence_length %lld)", OP, (long long)b, seqlens[b],
                            first ? "a first prompt" : "the past", (long long)g->s, (long long)pastn,
                            (long long)g->total);
  }
  return NULL;
}

/* present_key (i 0) or present_value's memory: the output, which may be
 * the past's own (*shared; a partial overlap fails), or, when it is not
 * wanted, scratch (*owned). */
static dvm_status *present_of(const dvm_gqa_dims *g, const dvm_tensor *past, const dvm_tensor *out, int wanted,
                              int i, float **p, float **owned, int *shared) {
  size_t bytes = sizeof(float) * (size_t)(g->b * g->hkv * g->present * g->d);
  *shared = 0;
  if (!wanted) return (*p = *owned = malloc(bytes + 1)) ? NULL : oom();
  *p = dvm_tensor_ptr(out);
  if (!past) return NULL;
  const char *pp = dvm_tensor_ptr(past), *po = (const char *)*p;
  size_t pn = sizeof(float) * (size_t)dvm_tensor_numel(past);
  *shared = pp == po;
  if (*shared ? past->dims[2] == g->present : !(po < pp + pn && pp < po + bytes)) return NULL;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s overlaps %s without being it row for row (%lld rows, present "
                        "%lld)", OP, i ? "present_value" : "present_key", input_names[PK + i],
                        (long long)past->dims[2], (long long)g->present);
}

/* A paged past_key and past_value: their own presents (both wanted), and
 * every table entry of the rows the call writes or reads (each entry's
 * first past_b + S: a first prompt's padding rows are written too) within
 * the pool. The table into c. */
static dvm_status *check_pages(const dvm_gqa_dims *g, const dvm_tensor *const *in, dvm_tensor *const *out,
                               int64_t present, const int64_t *past, gqa_cache *c) {
  const dvm_storage *pk = in[PK]->storage;
  const dvm_tensor_pages *p = &pk->pages;
  if (!in[PV] || in[PV]->storage == pk || !dvm_storage_paged(in[PV]->storage) ||
      in[PV]->storage->pages.table != p->table || in[PV]->storage->pages.block_rows != p->block_rows ||
      in[PV]->storage->pages.pool_dtype != p->pool_dtype ||
      (present & (3 << 17)) != (3 << 17) || out[1]->storage != pk || out[2]->storage != in[PV]->storage)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a paged past_key needs a paged past_value of its own pool on the "
                          "same table and element dtype, and each must be its present", OP);
  if (in[PK]->dims[2] != g->present) /* the table covers the past's rows only */
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: total_sequence_length %lld is past the paged cache's %lld rows",
                          OP, (long long)g->total, (long long)in[PK]->dims[2]);
  for (int64_t b = 0; b < g->b; b++)
    for (int64_t i = 0; i * p->block_rows < past[b] + g->s; i++) {
      int32_t id = p->table[b * p->table_stride + i];
      if (id < 0 || id >= p->blocks)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: block table entry %lld of entry %lld is %d, outside the "
                              "pool's %lld blocks", OP, (long long)i, (long long)b, id, (long long)p->blocks);
    }
  *c = (gqa_cache){.k = dvm_tensor_ptr(in[PK]), .v = dvm_tensor_ptr(in[PV]), .table = p->table,
                   .stride = p->table_stride, .bs = p->block_rows, .hkv = g->hkv, .tp = g->present, .d = g->d,
                   .half = p->pool_dtype == DVM_F16 ? dvm_gqa_half_loader() : NULL};
  return NULL;
}

/* Copy mode: each entry's past rows into present (or zeros past them). */
static void copy_past(const dvm_gqa_dims *g, const float *past, int64_t pastn, const int64_t *per, float *present) {
  for (int64_t b = 0; b < g->b; b++)
    for (int64_t h = 0; h < g->hkv; h++) {
      float *o = present + (b * g->hkv + h) * g->present * g->d;
      if (per[b]) memcpy(o, past + (b * g->hkv + h) * pastn * g->d, sizeof(float) * (size_t)(per[b] * g->d));
      int64_t end = per[b] + g->s;
      memset(o + end * g->d, 0, sizeof(float) * (size_t)((g->present - end) * g->d));
    }
}

/* Entry b's new keys and values into present at rows past.., the keys
 * rotated at positions pos (NULL: no rotary) by the caches' rows cs, sn
 * of half floats; an f16 cache's rounded after that (tmp: d floats). */
static void append_kv(const dvm_gqa_dims *g, const float *key, const float *value, int64_t ldkv, int64_t past,
                      const int64_t *pos, const float *cs, const float *sn, int64_t half, int inter,
                      const gqa_cache *c, int64_t b, float *tmp) {
  for (int64_t s = 0; s < g->s; s++)
    for (int64_t h = 0; h < g->hkv; h++) {
      char *kr, *vr;
      kv_rows(c, b, h, past + s, 1, &kr, &vr);
      float *k = c->half ? tmp : (float *)kr;
      memcpy(k, key + s * ldkv + h * g->d, sizeof(float) * (size_t)g->d);
      if (pos) dvm_cpu_rope_row(k, cs + pos[s] * half, sn + pos[s] * half, half, inter);
      if (c->half) {
        dvm_gqa_half_store(k, (uint16_t *)kr, g->d);
        dvm_gqa_half_store(value + s * ldkv + h * g->d, (uint16_t *)vr, g->d);
      } else {
        memcpy(vr, value + s * ldkv + h * g->d, sizeof(float) * (size_t)g->d);
      }
    }
}

/* The rotary position of every (entry, token) into posn, checked against
 * the caches' rows: position_ids (a first prompt reads only its first,
 * as ONNX Runtime), else s in a first prompt, past_b + s after. Queries
 * rotated into q ([B, S, Hq D]). */
static dvm_status *rotate_queries(const dvm_gqa_dims *g, const dvm_tensor *const *in, int first, const int64_t *per,
                                  int64_t half, int inter, int64_t *posn, float *q) {
  const int64_t *pid = in[POS] ? dvm_tensor_ptr(in[POS]) : NULL;
  const float *qp = dvm_tensor_ptr(in[Q_]), *cs = dvm_tensor_ptr(in[COS]), *sn = dvm_tensor_ptr(in[SIN]);
  for (int64_t b = 0; b < g->b; b++)
    for (int64_t s = 0; s < g->s; s++) {
      int64_t p = posn[b * g->s + s] = pid ? (first ? pid[0] + s : pid[b * g->s + s]) : first ? s : per[b] + s;
      if (p < 0 || p >= in[COS]->dims[0])
        return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: position %lld (entry %lld, token %lld) is outside the rotary "
                              "caches' %lld rows", OP, (long long)p, (long long)b, (long long)s,
                              (long long)in[COS]->dims[0]);
      float *row = q + (b * g->s + s) * g->hq * g->d;
      memcpy(row, qp + (b * g->s + s) * g->ldq, sizeof(float) * (size_t)(g->hq * g->d));
      for (int64_t h = 0; h < g->hq; h++) dvm_cpu_rope_row(row + h * g->d, cs + p * half, sn + p * half, half, inter);
    }
  return NULL;
}

static dvm_status *group_query_attention(const dvm_kernel_args *a) {
  int64_t v[9];
  double f[2];
  static const char *const names[] = {"present", "num_heads", "kv_num_heads", "scale", "softcap",
                                      "do_rotary", "rotary_interleaved", "local_window_size", "smooth_softmax"};
  dvm_status *st = dvm_kargs_check_range(a, OP, 3, NIN_, 3, 3, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(OP, a->nattrs, 9, 9);
  for (int i = 0; i < 9 && !st; i++)
    st = i == 3 || i == 4 ? dvm_attr_float(OP, names[i], &a->attrs[i], &f[i - 3])
                          : dvm_attr_int(OP, names[i], &a->attrs[i], &v[i]);
  const dvm_tensor *in[NIN_] = {0};
  if (!st) st = map_inputs(a, v[0], in);
  dvm_gqa_dims g;
  if (!st) st = dvm_gqa_dims_of(OP, v[1], v[2], in[Q_], in[K_], in[V_], in[PK], in[PV], in[TOTAL], &g);
  if (st) return st;
  const dvm_tensor *sl = in[SEQLENS];
  if (sl->dtype != DVM_I32 || sl->rank != 1 || sl->dims[0] != g.b) return bad("seqlens_k", sl, "i32 [batch]");
  int first = g.s == g.total, rotary = v[5] != 0, inter = v[6] != 0;
  if (!first && g.s > 1 && g.b != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %lld new tokens after a past need batch 1, got %lld (as ONNX "
                          "Runtime)", OP, (long long)g.s, (long long)g.b);
  gqa_job j = {.q = dvm_tensor_ptr(in[Q_]), .ldq = g.ldq, .s = g.s, .hq = g.hq, .hkv = g.hkv, .d = g.d,
               .tp = g.present, .window = v[7], .scale = f[0] != 0 ? (float)f[0] : 1.0f / sqrtf((float)g.d),
               .softcap = (float)f[1], .smooth = v[8] != 0};
  int64_t half, pastn = in[PK] ? in[PK]->dims[2] : 0;
  if ((st = check_options(&g, in, rotary, &j, &half))) return st;
  /* scratch: each entry's past and rows, the rotary positions; unwanted
   * present outputs and the rotated queries */
  int64_t *per = malloc(sizeof(int64_t) * (size_t)(2 * g.b + g.b * g.s + 1));
  float *pres[2] = {0}, *owned[4] = {0}; /* unwanted presents, rotated queries, an f16 cache's row */
  int shared[2] = {0, 0};
  if (!per) return oom();
  j.past = per, j.rows = per + g.b;
  st = entries(&g, dvm_tensor_ptr(sl), first, pastn, per, per + g.b);
  int paged = in[PK] && dvm_storage_paged(in[PK]->storage);
  if (!st && (paged || (in[PV] && dvm_storage_paged(in[PV]->storage))))
    st = paged ? check_pages(&g, in, a->out, v[0], per, &j.c)
               : dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a paged past_value needs a paged past_key", OP);
  for (int i = 0; i < 2 && !st && !paged; i++)
    st = present_of(&g, in[PK + i], a->out[1 + i], (v[0] >> (17 + i)) & 1, i, &pres[i], &owned[i], &shared[i]);
  for (int i = 0; i < 2 && !st && !paged; i++)
    if (!shared[i]) copy_past(&g, in[PK + i] ? dvm_tensor_ptr(in[PK + i]) : NULL, pastn, per, pres[i]);
  int64_t *posn = rotary ? per + 2 * g.b : NULL;
  if (!st && rotary) {
    if (!(owned[2] = malloc(sizeof(float) * (size_t)(g.b * g.s * g.hq * g.d + 1)))) st = oom();
    if (!st) st = rotate_queries(&g, in, first, per, half, inter, posn, owned[2]);
    j.q = owned[2], j.ldq = g.hq * g.d;
  }
  if (st) goto done;
  const float *qp = dvm_tensor_ptr(in[Q_]), *cs = rotary ? dvm_tensor_ptr(in[COS]) : NULL;
  const float *sn = rotary ? dvm_tensor_ptr(in[SIN]) : NULL;
  const float *kp = in[K_] ? dvm_tensor_ptr(in[K_]) : qp + g.hq * g.d;
  const float *vp = in[V_] ? dvm_tensor_ptr(in[V_]) : kp + g.hkv * g.d;
  int64_t ldkv = in[K_] ? g.hkv * g.d : g.ldq;
  if (!paged) j.c = (gqa_cache){.k = (char *)pres[0], .v = (char *)pres[1], .hkv = g.hkv, .tp = g.present, .d = g.d};
  if (j.c.half && !(owned[3] = malloc(sizeof(float) * (size_t)g.d))) {
    st = oom();
    goto done;
  }
  for (int64_t b = 0; b < g.b; b++)
    append_kv(&g, kp + b * g.s * ldkv, vp + b * g.s * ldkv, ldkv, per[b], posn ? posn + b * g.s : NULL, cs, sn, half,
              inter, &j.c, b, owned[3]);
  j.y = dvm_tensor_ptr(a->out[0]);
  if (g.s > 1 && !j.sink && !j.smooth) {
    st = attend_prompt(&j, g.b, dvm_kargs_threads(a));
  } else {
    dvm_vec_parallel(dvm_kargs_threads(a), g.b * g.hkv * g.s, attend_rows, &j);
    if (atomic_load(&j.failed)) st = oom();
  }
done:
  for (int i = 0; i < 4; i++) free(owned[i]);
  free(per);
  return st;
}

const dvm_kernel_def dvm_cpu_gqa_kernels[] = {
    {"group_query_attention", DVM_DEVICE_CPU, group_query_attention, "group_query_attention",
     .dtypes = DVM_DTYPE_BIT(DVM_F32), .paged = 1},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
