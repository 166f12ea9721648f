/* Recurrent ops: ONNX RNN, GRU and LSTM (opset 14: layout), one kernel
 * call per node that runs the whole sequence.
 *
 *   rnn, gru, lstm (in: X, W, R[, B][, sequence_lens][, initial_h][, initial_c][, P];
 *       attrs: present:int, direction:int, layout:int, clip:float, extra:int,
 *              then per activation kind:int, alpha:float, beta:float) -> Y, Y_h[, Y_c]
 *     The inputs are the node's present ones in ONNX order; bit i of
 *     `present` (3 <= i <= 7) says ONNX input i (B, sequence_lens,
 *     initial_h, initial_c, P) is there, and bit 8 + j that output j is
 *     wanted (an unwanted one is still passed, any shape, and left alone).
 *     direction 0 forward, 1 reverse, 2 bidirectional; clip bounds every
 *     gate's input (inf: none); extra is GRU's linear_before_reset and
 *     LSTM's input_forget (0 for RNN). The activations, one per function
 *     (RNN f; GRU f, g; LSTM f, g, h) and direction, forward's first; kind
 *     indexes dvm_rnn_act_names. X, W, R, B, initial states, P and outputs
 *     f32 (an f16 node is cast around the call: compiler/lower_rnn.c),
 *     sequence_lens i32 in [0, seq]. Shapes: shapefuncs/rnn.h; W's
 *     gate order is ONNX's (LSTM i, o, f, c; GRU z, r, h), P is
 *     [dirs, 3 hidden] (i, o, f). A batch entry past its length keeps its
 *     state and gets zeros in Y; going in reverse it starts at its own
 *     last step; one of length 0 (or seq 0) gets zero states in Y_h and
 *     Y_c, as ONNX Runtime gives it (the spec does not say).
 *   dynamic_quantize_lstm (in: as lstm, then W_scale, W_zero_point, R_scale,
 *       R_zero_point; attrs: as lstm, layout 0) -> Y, Y_h, Y_c
 *     com.microsoft DynamicQuantizeLSTM: W [dirs, input, 4 hidden] and R
 *     [dirs, hidden, 4 hidden] are u8 or i8 codes (note: [k, n], not
 *     ONNX's [n, k]); scale and zero point [dirs] (per tensor) or [dirs, 4
 *     hidden] (per column), the zero points W's and R's dtype, one value
 *     per direction (i8: 0), as ONNX Runtime requires. As ONNX Runtime's
 *     CPU kernel (rnn_helpers.cc, ComputeGemm for u8 weights): X's rows of
 *     the steps any batch entry runs are quantized to u8 at once, and each
 *     step's states (all batch rows; rows already finished count as 0 when
 *     Y is wanted, as their last state when not), with
 *     dynamic_quantize_linear's scale and zero point; the products are
 *     exact i32 sums, times a_scale * w_scale; biases are added after the
 *     two products.
 *
 * How: per direction, one product projects X for all steps at once (with
 * both biases added, except GRU's recurrent h bias under
 * linear_before_reset); then per step one product of the states against R
 * for the whole batch (GRU without linear_before_reset: two, the second on
 * r * h) and one pass over each batch row for the gates (products: see
 * FEW_ROWS). Measured against the same cell as a bytecode Loop over
 * per-step kernels (bench/bench_rnn.py, docs/performance.md): 1.6x faster
 * at one batch row, as fast or slower from 8 rows on, where the loop's
 * MatMul had the packed microkernel (pgemm.c) this kernel now uses too.
 * Threads: the products on the kernels' pool (product.h, pgemm.h), the
 * two directions of a bidirectional node as two parts on it.
 * dynamic_quantize_lstm's constant W and R are packed at link for the
 * quantized tiles (qgemm.h: VNNI or AVX2), which give the same exact i32
 * sums as its own loops (used for weights given at run time). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/par.h"
#include "ops/cpu/pgemm.h"
#include "ops/cpu/product.h"
#include "ops/cpu/qgemm.h"
#include "ops/cpu/quant.h"
#include "ops/cpu/rnn.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/rnn.h"
#include "shapefuncs/shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

const char *const dvm_rnn_act_names[DVM_RNN_ACT_COUNT] = {
    "Relu",     "Tanh",      "Sigmoid", "Affine",   "LeakyRelu", "ThresholdedRelu",
    "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus",
};

typedef struct act {
  int kind;
  float alpha, beta;
} act;

/* dynamic_quantize_lstm's sigmoid and tanh: ONNX Runtime's (MLAS's FMA3
 * kernels, Eigen's rational approximations with each multiply-add fused),
 * which equal its LSTM's bit for bit (checked against its Sigmoid and Tanh
 * on 10^5 values). Its states then are ONNX Runtime's, and so are the next
 * step's u8 codes: a state an ulp off can move one by a step. Inlined, with
 * DVM_EW_FMA and selects (elementwise_math.h), so that activate's loops
 * vectorize: called out of line on libm's fmaf they took half of the op's
 * time. */
enum { ACT_ORT_SIGMOID = DVM_RNN_ACT_COUNT, ACT_ORT_TANH };

DVM_EW_MATH float ort_logistic(float x) {
  x = dvm_ew_fsel(x < -18.0f, -18.0f, dvm_ew_fsel(x > 18.0f, 18.0f, x));
  float x2 = x * x;
  float p = DVM_EW_FMA(x2, 4.37031012579801e-11f, 1.15627324459942e-07f);
  p = DVM_EW_FMA(p, x2, 6.08574864600143e-05f);
  p = DVM_EW_FMA(p, x2, 8.51377133304701e-03f);
  p = DVM_EW_FMA(p, x2, 2.48287947061529e-01f);
  p = p * x;
  float q = DVM_EW_FMA(x2, 6.10247389755681e-13f, 5.76102136993427e-09f);
  q = DVM_EW_FMA(q, x2, 6.29106785017040e-06f);
  q = DVM_EW_FMA(q, x2, 1.70198817374094e-03f);
  q = DVM_EW_FMA(q, x2, 1.16817656904453e-01f);
  q = DVM_EW_FMA(q, x2, 9.93151921023180e-01f);
  float r = p / q + 0.5f;
  return dvm_ew_fsel(r < 0.0f, 0.0f, dvm_ew_fsel(r > 1.0f, 1.0f, r));
}

DVM_EW_MATH float ort_tanh(float x) {
  x = dvm_ew_fsel(x < -9.0f, -9.0f, dvm_ew_fsel(x > 9.0f, 9.0f, x));
  float x2 = x * x;
  float p = DVM_EW_FMA(x2, -2.76076847742355e-16f, 2.00018790482477e-13f);
  p = DVM_EW_FMA(p, x2, -8.60467152213735e-11f);
  p = DVM_EW_FMA(p, x2, 5.12229709037114e-08f);
  p = DVM_EW_FMA(p, x2, 1.48572235717979e-05f);
  p = DVM_EW_FMA(p, x2, 6.37261928875436e-04f);
  p = DVM_EW_FMA(p, x2, 4.89352455891786e-03f);
  p = p * x;
  float q = DVM_EW_FMA(x2, 1.19825839466702e-06f, 1.18534705686654e-04f);
  q = DVM_EW_FMA(q, x2, 2.26843463243900e-03f);
  q = DVM_EW_FMA(q, x2, 4.89352518554385e-03f);
  return p / q;
}

/* x = f(clip(x)) over n floats. */
DVM_VEC static void activate(const act *f, float clip, float *x, int64_t n) {
  if (clip < INFINITY)
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] < -clip ? -clip : x[i] > clip ? clip : x[i];
  float a = f->alpha, b = f->beta;
  switch (f->kind) {
  case DVM_RNN_RELU:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
    break;
  case DVM_RNN_TANH:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = dvm_ew_tanhf(x[i]);
    break;
  case DVM_RNN_SIGMOID:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = dvm_ew_sigmoidf(x[i]);
    break;
  case DVM_RNN_AFFINE:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = a * x[i] + b;
    break;
  case DVM_RNN_LEAKYRELU:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] >= 0 ? x[i] : a * x[i];
    break;
  case DVM_RNN_THRESHOLDEDRELU:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] > a ? x[i] : 0;
    break;
  case DVM_RNN_SCALEDTANH:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = a * dvm_ew_tanhf(b * x[i]);
    break;
  case DVM_RNN_HARDSIGMOID:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
      float v = a * x[i] + b;
      x[i] = v < 0 ? 0 : v > 1 ? 1 : v;
    }
    break;
  case DVM_RNN_ELU:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] >= 0 ? x[i] : a * (dvm_ew_expf(x[i]) - 1);
    break;
  case DVM_RNN_SOFTSIGN:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1 + fabsf(x[i]));
    break;
  case ACT_ORT_SIGMOID:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = ort_logistic(x[i]);
    break;
  case ACT_ORT_TANH:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) x[i] = ort_tanh(x[i]);
    break;
  default: /* softplus, log(1 + e^x) without overflow */
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++)
      x[i] = (x[i] > 0 ? x[i] : 0) + dvm_ew_logf(1 + dvm_ew_expf(-fabsf(x[i])));
    break;
  }
}

enum { K_RNN, K_GRU, K_LSTM, K_QLSTM };

/* A constant W's or R's codes packed at link, one product per direction. */
typedef struct qpacked {
  int64_t dirs;
  dvm_qgemm_b *dir[];
} qpacked;

static void qpacked_free(void *p) {
  qpacked *q = p;
  for (int64_t d = 0; d < q->dirs; d++) dvm_qgemm_free(q->dir[d]);
  free(q);
}

/* A constant f32 W's or R's form, made at link: packed for pgemm.c's
 * microkernel per direction (GRU's R in two parts, the z and r columns
 * [0, 2 hidden) and the h columns, which it multiplies apart), or, where
 * pgemm cannot pack (no AVX2, no memory), transposed to [dirs, k, n]. */
typedef struct fform {
  float *t; /* the transposed form, or NULL */
  int64_t dirs;
  dvm_pgemm_b *part[][2];
} fform;

static void fform_free(void *p) {
  fform *f = p;
  for (int64_t d = 0; d < f->dirs; d++) dvm_pgemm_free(f->part[d][0]), dvm_pgemm_free(f->part[d][1]);
  free(f->t);
  free(f);
}

/* One call, as the kernel reads it. */
typedef struct rnn {
  const char *op;
  int kind, gates, nact; /* nact: activations per direction */
  dvm_rnn_dims d;
  int64_t layout;
  int dir, extra, wt, rt; /* wt, rt: W, R transposed ([dirs, k, n]) */
  const fform *wf, *rf;   /* W's and R's packed forms, or NULL */
  int threads;
  float clip;
  act acts[2 * 3];
  const float *x, *w, *r, *b, *p, *h0, *c0;
  const int32_t *lens;
  float *y, *yh, *yc;
  /* dynamic_quantize_lstm: W, R codes; their scales and zero points */
  int quant;
  const dvm_tensor *wq, *rq, *wscale, *wzp, *rscale, *rzp;
  const qpacked *wpk, *rpk; /* W's and R's codes packed at link, or NULL */
  uint8_t *qa;  /* u8 codes of the rows being multiplied */
  int32_t *sum; /* [gates x hidden], or [seq x batch, gates x hidden] with packed weights */
  float *mult;  /* [gates x hidden] */
  unsigned char *count; /* [batch]: state rows that count in its range */
} rnn;

/* The weights' products, by which form of the weight (B) there is and
 * how many rows of A: constant W and R packed at link (pgemm.h), any
 * rows; else W and R as the model has them, [n, k] rows, or transposed
 * to [k, n] (R per call when the sequence is long enough to repay it, or
 * by the prepack hook where pgemm cannot pack):
 *   few rows, B^T: row updates, each row of B^T read once for all rows of
 *     A, the sums in registers, no horizontal sums;
 *   few rows, B: dot products of rows (a horizontal sum per element);
 *   more rows: sgemm (matmul.c's engine, on the pool), which packs B itself.
 * sgemm at few rows packs all of B on every call (all of R, each step).
 * One row, input 64, hidden 128, 100 steps, 1 thread (bench/bench_rnn.py):
 * sgemm 1107 us, dot products 1327 us, row updates 506 us. */
#define FEW_ROWS 16

/* R transposed per call from this many steps on (the transpose costs
 * about what a few steps of dot products do). */
#define TRANSPOSE_STEPS 4

/* C [m, n] (rows ldc apart) = A [m, k] B^T, B [n, k] rows ldb apart, by
 * dot products. */
DVM_VEC static void product_dots(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                                 int64_t ldb, float *c, int64_t ldc) {
  for (int64_t j = 0; j < n; j++) {
    const float *bj = b + j * ldb;
    for (int64_t i = 0; i < m; i++) {
      const float *ai = a + i * k;
      float s = 0;
      _Pragma("omp simd reduction(+ : s)") for (int64_t l = 0; l < k; l++) s += ai[l] * bj[l];
      c[i * ldc + j] = s;
    }
  }
}

/* Eight floats, loaded from and stored to any float address. */
typedef float v8 __attribute__((vector_size(32), aligned(4)));

/* Columns of C one accumulator block holds: 8 AVX registers. */
#define BLOCK 64

/* C [m, n] (rows ldc apart) = A [m, k] B, B [k, n] with rows ldb apart:
 * per block of BLOCK columns and row of A, the sums stay in registers over
 * all of k (GCC's vector types: with `omp simd` on an array it kept them in
 * memory). The rows go inside the blocks, so that B is read from memory
 * once, not once per row: the block (k x 256 bytes) stays in L2 for the
 * next row. */
DVM_VEC static void product_rows(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                                 int64_t ldb, float *c, int64_t ldc) {
  int64_t full = n - n % BLOCK;
  for (int64_t j0 = 0; j0 < full; j0 += BLOCK)
    for (int64_t i = 0; i < m; i++) {
      const float *ai = a + i * k;
      v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
      for (int64_t l = 0; l < k; l++) {
        const v8 *bl = (const v8 *)(b + l * ldb + j0);
        float x = ai[l];
        s0 += x * bl[0], s1 += x * bl[1], s2 += x * bl[2], s3 += x * bl[3];
        s4 += x * bl[4], s5 += x * bl[5], s6 += x * bl[6], s7 += x * bl[7];
      }
      v8 *ci = (v8 *)(c + i * ldc + j0);
      ci[0] = s0, ci[1] = s1, ci[2] = s2, ci[3] = s3, ci[4] = s4, ci[5] = s5, ci[6] = s6, ci[7] = s7;
    }
  for (int64_t i = 0; i < m && full < n; i++) {
    const float *ai = a + i * k;
    float *ci = c + i * ldc + full;
    memset(ci, 0, sizeof(float) * (size_t)(n - full));
    for (int64_t l = 0; l < k; l++) {
      const float *bl = b + l * ldb + full;
      float x = ai[l];
      _Pragma("omp simd") for (int64_t j = 0; j < n - full; j++) ci[j] += x * bl[j];
    }
  }
}

/* A few rows' product, its columns [s, e) a part on the pool. */
typedef struct few_job {
  int64_t m, k, ldb, ldc;
  const float *a, *b;
  int bt;
  float *c;
} few_job;

static void few_cols(void *ctx, int64_t s, int64_t e) {
  const few_job *j = ctx;
  if (j->bt) product_rows(j->m, e - s, j->k, j->a, j->b + s, j->ldb, j->c + s, j->ldc);
  else product_dots(j->m, e - s, j->k, j->a, j->b + s * j->ldb, j->ldb, j->c + s, j->ldc);
}

/* Multiply-adds from which a few rows' product is split over the pool,
 * in parts of BLOCK columns: tens of microseconds of one step's work,
 * where waking a worker costs a few. A judgement, not a measurement: the
 * machine of 2026-12-03 was too loaded to time 2 threads against 1.
 * silero-vad's steps (64 Ki) stay on one thread, ddddocr's (1 Mi) split. */
#define FEW_SPLIT (1 << 18)

/* C [m, n] (rows ldc apart) = A [m, k] times the weight: packed (pb), or
 * b transposed (bt: [k, n], rows ldb apart) or not ([n, k], rows ldb
 * apart); on up to `threads` threads of the pool. pgemm streams its
 * panels front to back, where b's rows, 4 n bytes apart, cost a page per
 * row of a column block (ddddocr's LSTM, n = 2048: about 4x slower,
 * docs/performance.md). */
static dvm_status *product(const char *op, const dvm_pgemm_b *pb, int64_t m, int64_t n, int64_t k, const float *a,
                           const float *b, int bt, int64_t ldb, float *c, int64_t ldc, int threads) {
  if (!m || !n) return NULL;
  if (m <= FEW_ROWS && m * n * k < FEW_SPLIT) threads = 1;
  if (pb) {
    dvm_pgemm_run(pb, m, a, k, 1, 1.0f, 0.0f, c, ldc, threads, NULL);
    return NULL;
  }
  if (m <= FEW_ROWS || !k) {
    few_job j = {m, k, ldb, ldc, a, b, bt, c};
    dvm_par_for(threads, n, BLOCK, few_cols, &j);
    return NULL;
  }
  dvm_product p = {.ta = 'N', .tb = bt ? 'N' : 'T', .m = m, .n = n, .k = k, .lda = k, .ldb = ldb, .ldc = ldc,
                   .alpha = 1, .a = a, .b = b, .c = c};
  return dvm_cpu_product_run(op, &p, threads);
}

/* hp's columns [j0, j1) (rows GH apart) = a [batch, hidden] times R's
 * columns [j0, j1) of direction dir: its packed parts within them, or the
 * plain (or transposed) R. */
static dvm_status *recurrent(const rnn *c, int dir, const float *a, int64_t j0, int64_t j1, float *hp) {
  int64_t H = c->d.hidden, GH = c->gates * H, B = c->d.batch;
  const float *r = c->r + dir * GH * H;
  if (!c->rf)
    return product(c->op, NULL, B, j1 - j0, H, a, c->rt ? r + j0 : r + j0 * H, c->rt, c->rt ? GH : H, hp + j0, GH,
                   c->threads);
  dvm_status *st = NULL;
  int64_t n0 = dvm_pgemm_n(c->rf->part[dir][0]);
  for (int q = 0; q < 2 && !st; q++) {
    int64_t s = q ? n0 : 0, e = q ? GH : n0;
    if (s >= j0 && e <= j1 && s < e)
      st = product(c->op, c->rf->part[dir][q], B, e - s, H, a, NULL, 0, 0, hp + s, GH, c->threads);
  }
  return st;
}

/* One direction's quantized weight (dynamic_quantize_lstm): codes [k, n],
 * u8 or i8, its zero point and scale(s), one or one per column; pb, its
 * codes packed for the VNNI (or AVX2) tiles when the weight is constant. */
typedef struct qweight {
  const uint8_t *u;
  const int8_t *s;
  int32_t zp;
  const float *scale;
  int per_col;
  const dvm_qgemm_b *pb;
} qweight;

static qweight qweight_of(const dvm_tensor *w, const dvm_tensor *scale, const dvm_tensor *zp, const qpacked *pk,
                          int dir) {
  int64_t k = w->dims[1], n = w->dims[2], per = scale->rank == 2, at = dir * (per ? n : 1);
  const char *p = (const char *)dvm_tensor_ptr(w) + dir * k * n;
  qweight q = {.zp = dvm_cpu_quant_int_at(zp, at), .scale = (const float *)dvm_tensor_ptr(scale) + at,
               .per_col = (int)per, .pb = pk ? pk->dir[dir] : NULL};
  if (w->dtype == DVM_I8) q.s = (const int8_t *)p;
  else q.u = (const uint8_t *)p;
  return q;
}

/* o = (o when add, else 0) + sum * mult, n of each. */
DVM_VEC static void scaled_row(float *o, const int32_t *sum, const float *mult, int64_t n, int add) {
  if (add)
    for (int64_t j = 0; j < n; j++) o[j] = o[j] + (float)sum[j] * mult[j];
  else
    for (int64_t j = 0; j < n; j++) o[j] = (float)sum[j] * mult[j];
}

/* C [m, n] (contiguous) = (or += when add) a [m, k] quantized to u8 with
 * DynamicQuantizeLinear's scale and zero point (the range over the rows
 * whose count[i] is set, all when count is NULL) times w's codes less
 * their zero point: exact i32 sums, each times a_scale * w's scale, as
 * ONNX Runtime's quantized GEMM of its LSTM does. */
DVM_VEC static dvm_status *qproduct(const rnn *c, int64_t m, int64_t n, int64_t k, const float *a,
                                    const unsigned char *count, const qweight *w, float *out, int add) {
  float lo = 0, hi = 0, scale;
  uint8_t za;
  for (int64_t i = 0; i < m; i++)
    if (!count || count[i])
      for (int64_t l = 0; l < k; l++) {
        float v = a[i * k + l];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
  dvm_cpu_quant_u8_params(lo, hi, &scale, &za);
  dvm_cpu_quant_u8(a, m * k, scale, za, c->qa);
  for (int64_t j = 0; j < n; j++) c->mult[j] = scale * w->scale[w->per_col ? j : 0];
  if (w->pb) { /* the same exact sums, from the tiles */
    int32_t az = za;
    dvm_status *st = dvm_qgemm_run(w->pb, c->qa, 0, m, &az, 1, &w->zp, 1, 1, c->sum);
    if (st) return st;
    for (int64_t i = 0; i < m; i++) scaled_row(out + i * n, c->sum + i * n, c->mult, n, add);
    return NULL;
  }
  for (int64_t i = 0; i < m; i++) {
    int32_t *sum = c->sum;
    memset(sum, 0, sizeof(int32_t) * (size_t)n);
    for (int64_t l = 0; l < k; l++) {
      int32_t x = (int32_t)c->qa[i * k + l] - za, zp = w->zp;
      if (!x) continue;
      if (w->s) {
        const int8_t *b = w->s + l * n;
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) sum[j] += x * ((int32_t)b[j] - zp);
      } else {
        const uint8_t *b = w->u + l * n;
        _Pragma("omp simd") for (int64_t j = 0; j < n; j++) sum[j] += x * ((int32_t)b[j] - zp);
      }
    }
    scaled_row(out + i * n, sum, c->mult, n, add);
  }
  return NULL;
}

/* W [dirs, n, k] (or R) as [dirs, k, n]: the form the products read. */
static void transpose_dirs(const float *w, int64_t dirs, int64_t n, int64_t k, float *wt) {
  for (int64_t d = 0; d < dirs; d++)
    for (int64_t j = 0; j < n; j++)
      for (int64_t l = 0; l < k; l++) wt[(d * k + l) * n + j] = w[(d * n + j) * k + l];
}

/* Element offsets of step t, batch b, direction dir in X's rows, Y and a
 * state, by layout. */
static int64_t x_row(const rnn *c, int64_t t, int64_t b) {
  return c->layout ? b * c->d.seq + t : t * c->d.batch + b;
}
static int64_t y_at(const rnn *c, int64_t t, int dir, int64_t b) {
  const dvm_rnn_dims *d = &c->d;
  return (c->layout ? (b * d->seq + t) * d->dirs + dir : (t * d->dirs + dir) * d->batch + b) * d->hidden;
}
static int64_t state_at(const rnn *c, int dir, int64_t b) {
  return (c->layout ? b * c->d.dirs + dir : dir * c->d.batch + b) * c->d.hidden;
}

/* The cell of one batch row at one step: pre holds its gates' inputs from
 * X and the state (gates x hidden), h and cs its state, updated. */
DVM_VEC static void lstm_cell(const rnn *c, const act *f, const float *p, float *pre, float *h, float *cs) {
  int64_t H = c->d.hidden;
  float *gi = pre, *go = pre + H, *gf = pre + 2 * H, *gc = pre + 3 * H;
  if (p)
    for (int64_t k = 0; k < H; k++) gi[k] += p[k] * cs[k], gf[k] += p[2 * H + k] * cs[k];
  activate(&f[0], c->clip, gi, H);
  if (c->extra) /* input_forget: the forget gate is 1 - the input gate */
    for (int64_t k = 0; k < H; k++) gf[k] = 1 - gi[k];
  else
    activate(&f[0], c->clip, gf, H);
  activate(&f[1], c->clip, gc, H);
  for (int64_t k = 0; k < H; k++) cs[k] = gf[k] * cs[k] + gi[k] * gc[k];
  if (p)
    for (int64_t k = 0; k < H; k++) go[k] += p[H + k] * cs[k];
  activate(&f[0], c->clip, go, H);
  memcpy(gc, cs, sizeof(float) * (size_t)H);
  activate(&f[2], INFINITY, gc, H);
  for (int64_t k = 0; k < H; k++) h[k] = go[k] * gc[k];
}

/* The floats of one direction's scratch: xp [rows of X, gates x hidden];
 * hp [batch, gates x hidden]; h, cs, rh [batch, hidden]. */
static size_t dir_scratch(const rnn *c) {
  const dvm_rnn_dims *d = &c->d;
  return (size_t)((d->seq * d->batch + d->batch) * c->gates * d->hidden + 3 * d->batch * d->hidden);
}

/* One direction over the whole sequence, on its scratch (dir_scratch,
 * zeroed). */
static dvm_status *run_dir(const rnn *c, int dir, float *xp) {
  const dvm_rnn_dims *d = &c->d;
  int64_t H = d->hidden, G = c->gates, GH = G * H, S = d->seq, B = d->batch;
  float *hp = xp + S * B * GH, *h = hp + B * GH, *cs = h + B * H, *rh = cs + B * H;
  const float *w = c->w + dir * GH * d->input;
  const float *bias = c->b ? c->b + dir * 2 * GH : NULL, *p = c->p ? c->p + dir * 3 * H : NULL;
  const act *f = &c->acts[dir * c->nact];
  int reverse = c->dir == 1 || dir == 1, gru_lbr = c->kind == K_GRU && c->extra;
  qweight qw, qr;
  dvm_status *st = NULL;
  if (c->quant) { /* X's rows of the steps some entry runs (layout 0: the first max length x B) */
    int64_t steps = c->lens ? 0 : S;
    for (int64_t b = 0; c->lens && b < B; b++) steps = c->lens[b] > steps ? c->lens[b] : steps;
    qw = qweight_of(c->wq, c->wscale, c->wzp, c->wpk, dir), qr = qweight_of(c->rq, c->rscale, c->rzp, c->rpk, dir);
    if ((st = qproduct(c, steps * B, GH, d->input, c->x, NULL, &qw, xp, 0))) return st;
  } else if ((st = product(c->op, c->wf ? c->wf->part[dir][0] : NULL, S * B, GH, d->input, c->x, w, c->wt,
                           c->wt ? GH : d->input, xp, GH, c->threads))) {
    return st;
  }
  if (bias && !c->quant) /* quantized: added after both products, as ONNX Runtime adds them */
    for (int64_t i = 0; i < S * B; i++)
      for (int64_t k = 0; k < GH; k++) /* GRU's recurrent h bias goes inside r * (.) */
        xp[i * GH + k] += bias[k] + (gru_lbr && k >= 2 * H ? 0 : bias[GH + k]);
  for (int64_t b = 0; b < B; b++) {
    float *hb = h + b * H, *cb = cs + b * H;
    if (c->h0) memcpy(hb, c->h0 + state_at(c, dir, b), sizeof(float) * (size_t)H);
    else memset(hb, 0, sizeof(float) * (size_t)H);
    if (c->c0) memcpy(cb, c->c0 + state_at(c, dir, b), sizeof(float) * (size_t)H);
    else memset(cb, 0, sizeof(float) * (size_t)H);
  }
  for (int64_t s = 0; s < S; s++) {
    /* GRU without linear_before_reset multiplies by R_h only after r */
    int64_t n1 = c->kind == K_GRU && !c->extra ? 2 * H : GH;
    if (c->quant) { /* ONNX Runtime's previous-state rows: 0 past the end with Y, the last state without */
      for (int64_t b = 0; b < B; b++) {
        int64_t len = c->lens ? c->lens[b] : S;
        c->count[b] = s == 0 || s <= len || (!c->y && len > 0);
      }
      if ((st = qproduct(c, B, GH, H, h, c->count, &qr, hp, 0))) return st;
    } else if ((st = recurrent(c, dir, h, 0, n1, hp))) {
      return st;
    }
    if (c->kind == K_GRU) { /* z and r first, for every row */
      for (int64_t b = 0; b < B; b++) {
        int64_t len = c->lens ? c->lens[b] : S, t = reverse ? len - 1 - s : s;
        float *pre = hp + b * GH;
        if (s >= len) continue;
        const float *xr = xp + x_row(c, t, b) * GH;
        for (int64_t k = 0; k < 2 * H; k++) pre[k] += xr[k];
        activate(&f[0], c->clip, pre, 2 * H);
        for (int64_t k = 0; k < H; k++) rh[b * H + k] = pre[H + k] * h[b * H + k];
      }
      if (!c->extra && (st = recurrent(c, dir, rh, 2 * H, GH, hp))) return st;
    }
    for (int64_t b = 0; b < B; b++) {
      int64_t len = c->lens ? c->lens[b] : S, t = reverse ? len - 1 - s : s;
      if (s >= len) continue;
      float *pre = hp + b * GH, *hb = h + b * H;
      const float *xr = xp + x_row(c, t, b) * GH;
      if (c->kind == K_LSTM && c->quant) {
        for (int64_t k = 0; k < GH; k++) pre[k] = (pre[k] + xr[k]) + (bias ? bias[k] + bias[GH + k] : 0.0f);
        lstm_cell(c, f, p, pre, hb, cs + b * H);
      } else if (c->kind == K_LSTM) {
        for (int64_t k = 0; k < GH; k++) pre[k] += xr[k];
        lstm_cell(c, f, p, pre, hb, cs + b * H);
      } else if (c->kind == K_GRU) {
        float *z = pre, *rg = pre + H, *gh = pre + 2 * H;
        if (c->extra) /* h~ = g(x W_h + r * (h R_h + Rb_h)) */
          for (int64_t k = 0; k < H; k++) gh[k] = xr[2 * H + k] + rg[k] * (gh[k] + (bias ? bias[GH + 2 * H + k] : 0));
        else
          for (int64_t k = 0; k < H; k++) gh[k] += xr[2 * H + k];
        activate(&f[1], c->clip, gh, H);
        for (int64_t k = 0; k < H; k++) hb[k] = (1 - z[k]) * gh[k] + z[k] * hb[k];
      } else {
        for (int64_t k = 0; k < H; k++) pre[k] += xr[k];
        activate(&f[0], c->clip, pre, H);
        memcpy(hb, pre, sizeof(float) * (size_t)H);
      }
      if (c->y) memcpy(c->y + y_at(c, t, dir, b), hb, sizeof(float) * (size_t)H);
    }
  }
  for (int64_t b = 0; b < B; b++) { /* an empty sequence's states are 0, as ONNX Runtime has them */
    int empty = (c->lens ? c->lens[b] : S) == 0;
    if (empty) memset(h + b * H, 0, sizeof(float) * (size_t)H), memset(cs + b * H, 0, sizeof(float) * (size_t)H);
    if (c->yh) memcpy(c->yh + state_at(c, dir, b), h + b * H, sizeof(float) * (size_t)H);
    if (c->yc) memcpy(c->yc + state_at(c, dir, b), cs + b * H, sizeof(float) * (size_t)H);
  }
  return NULL;
}

/* Fails unless tensor t (ONNX input or output `what`) is f32 (or i32)
 * with exactly these dims. */
static dvm_status *check_tensor(const char *op, const char *what, const dvm_tensor *t,
                                dvm_dtype dt, int rank, const int64_t *dims) {
  char a[DVM_SHAPE_STR_SIZE], b[DVM_SHAPE_STR_SIZE];
  if (t->dtype != dt)
    return ERR("%s: %s must be %s, got %s", op, what, dvm_dtype_name(dt), dvm_dtype_name((dvm_dtype)t->dtype));
  int ok = t->rank == rank;
  for (int i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
  if (!ok)
    return ERR("%s: %s must be %s, got %s", op, what, dvm_shape_str(a, rank, dims),
               dvm_shape_str(b, t->rank, t->dims));
  return NULL;
}

/* dynamic_quantize_lstm's W and R (u8 or i8) and their scales and zero
 * points (inputs nin to nin + 3), checked as ONNX Runtime checks them. */
static dvm_status *quant_setup(const dvm_kernel_args *a, rnn *c, int nin) {
  static const char *const names[] = {"W_scale", "W_zero_point", "R_scale", "R_zero_point"};
  const char *op = c->op;
  int64_t GH = c->gates * c->d.hidden;
  for (int m = 0; m < 2; m++) {
    const dvm_tensor *w = a->in[1 + m], *scale = a->in[nin + 2 * m], *zp = a->in[nin + 2 * m + 1];
    if (w->dtype != DVM_U8 && w->dtype != DVM_I8)
      return ERR("%s: %s must be u8 or i8, got %s", op, m ? "R" : "W", dvm_dtype_name((dvm_dtype)w->dtype));
    if (w->dims[1] > (1 << 15))
      return ERR("%s: %s has %lld rows: i32 sums of more than 32768 products could overflow", op, m ? "R" : "W",
                 (long long)w->dims[1]);
    for (int q = 0; q < 2; q++) {
      const dvm_tensor *t = q ? zp : scale;
      dvm_dtype dt = q ? (dvm_dtype)w->dtype : DVM_F32;
      if (t->dtype != dt || !(t->rank == 1 || t->rank == 2) || t->dims[0] != c->d.dirs || (t->rank == 2 && t->dims[1] != GH))
        return ERR("%s: %s must be %s [%lld] (per tensor) or [%lld, %lld] (per column)", op, names[2 * m + q],
                   dvm_dtype_name(dt), (long long)c->d.dirs, (long long)c->d.dirs, (long long)GH);
    }
    int64_t nz = dvm_tensor_numel(zp);
    for (int64_t i = 0; zp->rank == 2 && i < nz; i++) { /* ONNX Runtime uses one zero point per direction */
      int32_t v = dvm_cpu_quant_int_at(zp, i), first = dvm_cpu_quant_int_at(zp, 0);
      if (w->dtype == DVM_I8 ? v != 0 : v != first)
        return ERR("%s: per-column %s must be %s", op, names[2 * m + 1], w->dtype == DVM_I8 ? "0 (i8 weights)" : "one value");
    }
  }
  c->wq = a->in[1], c->rq = a->in[2];
  c->wscale = a->in[nin], c->wzp = a->in[nin + 1], c->rscale = a->in[nin + 2], c->rzp = a->in[nin + 3];
  return NULL;
}

/* Reads the attributes and checks every tensor; fills c. */
static dvm_status *setup(const dvm_kernel_args *a, int kind, rnn *c) {
  static const char *const ops[] = {"rnn", "gru", "lstm", "dynamic_quantize_lstm"};
  int quant = kind == K_QLSTM, nq = quant ? 4 : 0; /* the scales and zero points after the LSTM's inputs */
  const char *op = ops[kind];
  if (quant) kind = K_LSTM;
  static const int gates[] = {1, 3, 4}, nacts[] = {1, 2, 3};
  static const char *const in_names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  static const char *const out_names[] = {"Y", "Y_h", "Y_c"};
  int nout = kind == K_LSTM ? 3 : 2, nin = a->nin - nq;
  int64_t present, dir, layout, extra;
  double clip;
  *c = (rnn){.op = op, .kind = kind, .gates = gates[kind], .nact = nacts[kind], .quant = quant};
  if (nin < 3 || nin > (kind == K_LSTM ? 8 : 6))
    return ERR("%s: takes %d to %d inputs, got %d", op, 3 + nq, (kind == K_LSTM ? 8 : 6) + nq, nin + nq);
  dvm_status *st = dvm_kargs_check(a, op, nin + nq, nout, DVM_DEVICE_CPU);
  if (!st) st = dvm_attr_count(op, a->nattrs, 5, 5 + 6 * c->nact);
  if (!st) st = dvm_attr_int(op, "present", &a->attrs[0], &present);
  if (!st) st = dvm_attr_int(op, "direction", &a->attrs[1], &dir);
  if (!st) st = dvm_attr_int(op, "layout", &a->attrs[2], &layout);
  if (!st) st = dvm_attr_float(op, "clip", &a->attrs[3], &clip);
  if (!st) st = dvm_attr_int(op, "extra", &a->attrs[4], &extra);
  if (st) return st;
  if (dir < 0 || dir > 2) return ERR("%s: direction must be 0, 1 or 2, got %lld", op, (long long)dir);
  if (extra && kind == K_RNN) return ERR("%s: extra must be 0, got %lld", op, (long long)extra);
  c->dir = (int)dir, c->layout = layout, c->extra = extra != 0, c->clip = clip > 0 ? (float)clip : INFINITY;
  const dvm_tensor *x = a->in[0], *w = a->in[1], *r = a->in[2];
  int64_t wd[3], rd[3]; /* quantized W and R are [dirs, k, n]: ONNX's dims for the check */
  for (int i = 0; i < 3; i++) {
    wd[i] = w->rank == 3 && quant && i ? w->dims[3 - i] : w->dims[i < w->rank ? i : 0];
    rd[i] = r->rank == 3 && quant && i ? r->dims[3 - i] : r->dims[i < r->rank ? i : 0];
  }
  if (quant && layout) return ERR("%s: layout must be 0", op);
  if ((st = dvm_rnn_dims_of(op, c->gates, layout, x->rank, x->dims, w->rank, wd, r->rank, rd, &c->d)))
    return st;
  int dirs = (int)c->d.dirs;
  if ((dir == 2) != (dirs == 2))
    return ERR("%s: W has %d direction%s, the direction attribute says %s", op, dirs,
               dirs == 1 ? "" : "s", dir == 2 ? "bidirectional" : "one");
  int nattrs = 5 + 3 * dirs * c->nact;
  if (a->nattrs != nattrs) return ERR("%s: takes %d attributes here, got %d", op, nattrs, a->nattrs);
  for (int i = 0; i < dirs * c->nact; i++) {
    int64_t k;
    double al, be;
    const dvm_value *v = &a->attrs[5 + 3 * i];
    if ((st = dvm_attr_int(op, "activation", &v[0], &k)) || (st = dvm_attr_float(op, "alpha", &v[1], &al)) ||
        (st = dvm_attr_float(op, "beta", &v[2], &be)))
      return st;
    if (k < 0 || k >= DVM_RNN_ACT_COUNT) return ERR("%s: activation %lld is not one of %d", op, (long long)k, DVM_RNN_ACT_COUNT);
    c->acts[i] = (act){(int)k, (float)al, (float)be};
    if (quant && (k == DVM_RNN_SIGMOID || k == DVM_RNN_TANH))
      c->acts[i].kind = k == DVM_RNN_SIGMOID ? ACT_ORT_SIGMOID : ACT_ORT_TANH;
  }
  const dvm_tensor *in[8] = {x, w, r};
  int next = 3;
  for (int i = 3; i < 8; i++)
    if (present >> i & 1) {
      if (next >= nin || (i == 7 && kind != K_LSTM) || (i == 6 && kind != K_LSTM))
        return ERR("%s: attribute present says input %s is there, but it is not", op, in_names[i]);
      in[i] = a->in[next++];
    }
  if (next != nin) return ERR("%s: got %d inputs, attribute present names %d", op, nin + nq, next + nq);
  int64_t GH = c->gates * c->d.hidden, sdims[3], ydims[4];
  dvm_rnn_state_shape(&c->d, layout, sdims);
  dvm_rnn_y_shape(&c->d, layout, ydims);
  const int64_t bd[2] = {dirs, 2 * GH}, ld[1] = {c->d.batch}, pd[2] = {dirs, 3 * c->d.hidden};
  for (int i = 0; i < 3 && !st; i++)
    st = check_tensor(op, in_names[i], in[i], quant && i ? (dvm_dtype)in[i]->dtype : DVM_F32, in[i]->rank, in[i]->dims);
  if (!st && quant) st = quant_setup(a, c, nin);
  if (!st && in[3]) st = check_tensor(op, "B", in[3], DVM_F32, 2, bd);
  if (!st && in[4]) st = check_tensor(op, "sequence_lens", in[4], DVM_I32, 1, ld);
  if (!st && in[5]) st = check_tensor(op, "initial_h", in[5], DVM_F32, 3, sdims);
  if (!st && in[6]) st = check_tensor(op, "initial_c", in[6], DVM_F32, 3, sdims);
  if (!st && in[7]) st = check_tensor(op, "P", in[7], DVM_F32, 2, pd);
  float *outs[3] = {NULL, NULL, NULL};
  for (int j = 0; j < nout && !st; j++)
    if (present >> (8 + j) & 1) {
      st = j ? check_tensor(op, out_names[j], a->out[j], DVM_F32, 3, sdims)
             : check_tensor(op, "Y", a->out[0], DVM_F32, 4, ydims);
      outs[j] = dvm_tensor_ptr(a->out[j]);
    }
  if (st) return st;
  c->x = dvm_tensor_ptr(x), c->w = dvm_tensor_ptr(w), c->r = dvm_tensor_ptr(r);
  c->b = in[3] ? dvm_tensor_ptr(in[3]) : NULL;
  c->lens = in[4] ? dvm_tensor_ptr(in[4]) : NULL;
  c->h0 = in[5] ? dvm_tensor_ptr(in[5]) : NULL;
  c->c0 = in[6] ? dvm_tensor_ptr(in[6]) : NULL;
  c->p = in[7] ? dvm_tensor_ptr(in[7]) : NULL;
  c->y = outs[0], c->yh = outs[1], c->yc = outs[2];
  for (int64_t b = 0; c->lens && b < c->d.batch; b++)
    if (c->lens[b] < 0 || c->lens[b] > c->d.seq)
      return ERR("%s: sequence_lens[%lld] is %d, outside [0, %lld]", op, (long long)b, c->lens[b],
                 (long long)c->d.seq);
  return NULL;
}

/* The directions of a bidirectional op are independent: one a part on the
 * pool, with its own scratch (their products' own splits then run on the
 * thread of their direction). */
typedef struct dirs_job {
  const rnn *c;
  float *scratch;
  dvm_status *st[2];
} dirs_job;

static void dirs_part(void *ctx, int64_t s, int64_t e) {
  dirs_job *j = ctx;
  for (int64_t dir = s; dir < e; dir++) j->st[dir] = run_dir(j->c, (int)dir, j->scratch + dir * dir_scratch(j->c));
}

static dvm_status *run(const dvm_kernel_args *a, int kind) {
  rnn c;
  dvm_status *st = setup(a, kind, &c);
  if (st) return st;
  c.threads = dvm_kargs_threads(a);
  const dvm_rnn_dims *d = &c.d;
  int64_t GH = c.gates * d->hidden;
  size_t rows = (size_t)(d->seq * d->batch), bh = (size_t)(d->batch * d->hidden);
  float *xp = calloc(1, sizeof(float) * (dir_scratch(&c) * (size_t)d->dirs + 1)); /* each direction's */
  if (!xp) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for %zu steps of scratch", c.op, rows);
  /* W's and R's forms made at link: packed, or transposed; R transposed
   * here for a long sequence */
  c.wf = c.quant ? NULL : dvm_tensor_packed(a->in[1], &dvm_cpu_rnn_kernels[kind], 1);
  c.rf = c.quant ? NULL : dvm_tensor_packed(a->in[2], &dvm_cpu_rnn_kernels[kind], 2);
  const float *wt = c.wf ? c.wf->t : NULL, *rt = c.rf ? c.rf->t : NULL;
  if (wt) c.wf = NULL;
  if (rt) c.rf = NULL;
  float *tr = NULL;
  if (c.quant) { /* the u8 rows, the i32 sums (all rows' for the tiles), the scales, the rows that count */
    c.wpk = dvm_tensor_packed(a->in[1], &dvm_cpu_rnn_kernels[kind], 1);
    c.rpk = dvm_tensor_packed(a->in[2], &dvm_cpu_rnn_kernels[kind], 2);
    size_t rowsq = rows * (size_t)d->input > bh ? rows * (size_t)d->input : bh;
    size_t sums = (size_t)GH * (c.wpk || c.rpk ? (rows > (size_t)d->batch ? rows : (size_t)d->batch) : 1);
    rowsq = (rowsq + 7) & ~(size_t)7;
    c.qa = malloc(rowsq + sizeof(int32_t) * sums + sizeof(float) * (size_t)GH + (size_t)d->batch + 1);
    if (!c.qa) {
      free(xp);
      return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for %zu steps of scratch", c.op, rows);
    }
    c.sum = (int32_t *)(void *)(c.qa + rowsq), c.mult = (float *)(void *)(c.sum + sums);
    c.count = (unsigned char *)(c.mult + GH);
  }
  if (!c.quant && !rt && !c.rf && d->seq >= TRANSPOSE_STEPS && (tr = malloc(sizeof(float) * (size_t)(d->dirs * GH * d->hidden))))
    transpose_dirs(c.r, d->dirs, GH, d->hidden, tr), rt = tr;
  if (wt) c.w = wt, c.wt = 1;
  if (rt) c.r = rt, c.rt = 1;
  if (c.y && c.lens) memset(c.y, 0, sizeof(float) * rows * (size_t)(d->dirs * d->hidden));
  dirs_job j = {&c, xp, {NULL, NULL}};
  /* dynamic_quantize_lstm's directions share its u8 scratch: one at a time */
  dvm_par_for(c.quant ? 1 : c.threads, d->dirs, 1, dirs_part, &j);
  st = j.st[0] ? j.st[0] : j.st[1];
  if (j.st[0]) dvm_status_free(j.st[1]);
  free(tr);
  free(c.qa);
  free(xp);
  return st;
}

/* W (input 1) and R (input 2), constant f32 [dirs, n, k]: packed once at
 * link for pgemm.c (GRU's R in two parts: fform), or, where that cannot
 * be, transposed to [dirs, k, n], the form the kernel's own loops read. */
static dvm_status *rnn_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs,
                               int nattrs, void **data, void (**free_data)(void *)) {
  (void)attrs, (void)nattrs;
  if ((input != 1 && input != 2) || t->dtype != DVM_F32 || t->rank != 3) return NULL;
  int64_t dirs = t->dims[0], n = t->dims[1], k = t->dims[2];
  /* GRU's R ([dirs, 3 hidden, hidden]): z and r apart from h */
  int64_t n0 = input == 2 && n == 3 * k ? 2 * k : n;
  fform *f = calloc(1, sizeof *f + sizeof(f->part[0]) * (size_t)dirs);
  if (!f) return NULL;
  f->dirs = dirs;
  const float *w = dvm_tensor_ptr(t);
  int packed = 1;
  for (int64_t d = 0; d < dirs && packed; d++) {
    f->part[d][0] = dvm_pgemm_pack(w + d * n * k, k, n0, 1, k);
    f->part[d][1] = n0 < n ? dvm_pgemm_pack(w + (d * n + n0) * k, k, n - n0, 1, k) : NULL;
    packed = f->part[d][0] && (n0 == n || f->part[d][1]);
  }
  size_t count = (size_t)(dirs * n * k);
  float *tr = packed ? NULL : malloc(sizeof(float) * (count ? count : 1));
  if (!packed) {
    fform_free(f);
    f = tr ? calloc(1, sizeof *f) : NULL;
    if (!f) { /* the kernel transposes per call instead */
      free(tr);
      return NULL;
    }
    transpose_dirs(w, dirs, n, k, f->t = tr);
  }
  *data = f;
  *free_data = fform_free;
  return NULL;
}

/* dynamic_quantize_lstm's W (input 1) and R (input 2), constant u8 or i8
 * codes [dirs, k, n], packed once at link for the quantized tiles
 * (qgemm.h); kept only where every direction packs (a CPU without the
 * tiles, or no memory: the kernel's own loops). */
static dvm_status *qlstm_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs, int nattrs,
                                 void **data, void (**free_data)(void *)) {
  (void)attrs, (void)nattrs;
  if ((input != 1 && input != 2) || (t->dtype != DVM_U8 && t->dtype != DVM_I8) || t->rank != 3 ||
      t->dims[1] > (1 << 15)) /* longer i32 dot products could overflow */
    return NULL;
  int64_t dirs = t->dims[0], k = t->dims[1], n = t->dims[2];
  qpacked *q = calloc(1, sizeof *q + sizeof(q->dir[0]) * (size_t)dirs);
  if (!q) return NULL;
  q->dirs = dirs;
  for (int64_t d = 0; d < dirs; d++)
    if (!(q->dir[d] = dvm_qgemm_pack((const int8_t *)dvm_tensor_ptr(t) + d * k * n, t->dtype == DVM_I8, k, n))) {
      qpacked_free(q);
      return NULL;
    }
  *data = q;
  *free_data = qpacked_free;
  return NULL;
}

static dvm_status *rnn_kernel(const dvm_kernel_args *a) { return run(a, K_RNN); }
static dvm_status *gru_kernel(const dvm_kernel_args *a) { return run(a, K_GRU); }
static dvm_status *lstm_kernel(const dvm_kernel_args *a) { return run(a, K_LSTM); }
static dvm_status *qlstm_kernel(const dvm_kernel_args *a) { return run(a, K_QLSTM); }

#define F32 DVM_DTYPE_BIT(DVM_F32)
const dvm_kernel_def dvm_cpu_rnn_kernels[] = {
    [K_RNN] = {"rnn", DVM_DEVICE_CPU, rnn_kernel, "rnn", F32, .prepack = rnn_prepack, .prepack_replaces = 1},
    [K_GRU] = {"gru", DVM_DEVICE_CPU, gru_kernel, "rnn", F32, .prepack = rnn_prepack, .prepack_replaces = 1},
    [K_LSTM] = {"lstm", DVM_DEVICE_CPU, lstm_kernel, "rnn", F32, .prepack = rnn_prepack, .prepack_replaces = 1},
    [K_QLSTM] = {"dynamic_quantize_lstm", DVM_DEVICE_CPU, qlstm_kernel, "qlstm", F32, .prepack = qlstm_prepack},
    [K_QLSTM + 1] = {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
