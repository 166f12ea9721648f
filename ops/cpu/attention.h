/* The attention core of the CPU kernels (ops/cpu/attention.c), shared by
 * ONNX Attention (sdpa) and ONNX Runtime's com.microsoft Attention and
 * QAttention (ops/cpu/contrib.c). */
#ifndef DVM_OPS_CPU_ATTENTION_H
#define DVM_OPS_CPU_ATTENTION_H

#include <stdint.h>

#include "dvm/status.h"
#include "shapefuncs/attention.h"

/* softmax(Q K^T * scale, softcapped, plus the bias) V per batch and q
 * head, in f32. d.rank 3: q rows [B, Sq] of ldq floats, the heads side by
 * side from column 0, y [B, Sq, Hq * Dv]; rank 4: q [B, Hq, Sq, D] (ldq
 * unused), y [B, Hq, Sq, Dv]. k and v are [B, Hkv, P + Skv, D or Dv], or,
 * where ldkv is not 0, rows [B, P + Skv] of ldkv floats with the heads
 * side by side from column 0 (read in place from a projection). The
 * bias: mask (an additive f32 bias or NULL, strides over [B, Hq, Sq, M],
 * 0 to broadcast; keys from M on masked), causal, the window (left,
 * right; -1 unbounded), nonpad (keys from nonpad[b] on masked; or NULL),
 * with offset `past`'s P, else nonpad[b] - Sq, else 0. A row whose bias is
 * all -inf gives zeros. qk (NULL: not wanted) [B, Hq, Sq, P + Skv] gets
 * the scores after softcap (mode 0, 1), with the bias (2), or after the
 * softmax (3). */
typedef struct dvm_attend {
  dvm_sdpa_dims d;
  const float *q, *k, *v;
  int64_t ldq, kv_rows, ldkv;
  const float *mask;
  int64_t mstride[4], mlen;
  const int64_t *nonpad;
  float *y, *qk;
  int causal, mode, past;
  float scale, softcap;
  int64_t left, right;
} dvm_attend;

/* Rotates the first 2 * half values of row in pairs (halves, or
 * neighbours when interleaved) by cosv and sinv ([half]): the rotary
 * embedding's step (RotaryEmbedding, com.microsoft RotaryEmbedding and
 * GroupQueryAttention). */
void dvm_cpu_rope_row(float *row, const float *cosv, const float *sinv, int64_t half, int interleaved);

/* Runs `at` on up to `threads` threads of the kernels' pool; fails naming
 * `op` when oneDNN fails or scratch runs out. */
DVM_MUST_USE dvm_status *dvm_cpu_attend(const char *op, const dvm_attend *at, int threads);

#endif
