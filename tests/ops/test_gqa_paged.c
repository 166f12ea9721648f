/* GroupQueryAttention over a paged KV cache (dvm_tensor_wrap_paged) against
 * the same call over the contiguous cache: random inputs, block tables in a
 * shuffled order, block sizes that divide the cache's length and that do
 * not (1, 4, 5, 16 rows for 37), decode steps of entries at different
 * lengths and prompts with and without a past; outputs and every row of
 * the cache must agree. Then the errors: a table entry outside the pool,
 * a paged past whose present is not itself.
 * With f16 pools (a half-precision cache) the contiguous call runs on the
 * same keys and values rounded to f16 and must give the same output, bit
 * for bit in a decode step (the same sums in the same order), and its new
 * rows rounded to f16 must be the pools'; meson runs it under each
 * DVM_CPU_ISA, so every conversion variant is checked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "harness.h"
#include "kernel.h"
#include "object.h"
#include "ops/optable.h"

enum { HQ = 4, HKV = 2, D = 20, L = 37 }; /* D: a 16-lane vector and a tail */

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static float rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)(rng >> 40) / (float)(1 << 24) * 2 - 1;
}

static dvm_tensor *make(dvm_dtype dt, int rank, const int64_t *dims) {
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(dt, rank, dims, &t));
  if (dt == DVM_F32)
    for (int64_t i = 0; i < dvm_tensor_numel(t); i++) ((float *)dvm_tensor_ptr(t))[i] = rnd();
  return t;
}

/* The kernel on query, key, value, past key and value (bound as present),
 * seqlens_k and total; y the output. */
static dvm_status *gqa(dvm_tensor *q, dvm_tensor *k, dvm_tensor *v, dvm_tensor *pk, dvm_tensor *pv, dvm_tensor *pk_out,
                       dvm_tensor *seqlens, dvm_tensor *total, dvm_tensor *y) {
  const dvm_kernel_def *def = dvm_ops_find("group_query_attention", DVM_DEVICE_CPU);
  dvm_tensor *in[7] = {q, k, v, pk, pv, seqlens, total}, *out[3] = {y, pk_out, pv};
  dvm_value attrs[9] = {{.kind = DVM_VAL_INT, .u.i = 0x7F | (7 << 16)}, {.kind = DVM_VAL_INT, .u.i = HQ},
                        {.kind = DVM_VAL_INT, .u.i = HKV},          {.kind = DVM_VAL_FLOAT, .u.f = 0},
                        {.kind = DVM_VAL_FLOAT, .u.f = 0},          {.kind = DVM_VAL_INT, .u.i = 0},
                        {.kind = DVM_VAL_INT, .u.i = 0},            {.kind = DVM_VAL_INT, .u.i = -1},
                        {.kind = DVM_VAL_INT, .u.i = 0}};
  dvm_exec ex = {.threads = 2};
  dvm_kernel_args a = {.in = in, .nin = 7, .out = out, .nout = 3, .attrs = attrs, .nattrs = 9, .exec = &ex};
  return def->fn(&a);
}

/* Element e of row r of a pool (f32 or f16) as f32. */
static float pool_at(const dvm_tensor *pool, int64_t r, int e) {
  return pool->dtype == DVM_F16 ? dvm_f16_to_f32(((const uint16_t *)dvm_tensor_ptr(pool))[r * D + e])
                                : ((const float *)dvm_tensor_ptr(pool))[r * D + e];
}

/* B entries of S new tokens after past[b] rows, with blocks of bs rows; a
 * pool of f16 elements when half. */
static void one_case(int B, int S, const int *past, int bs, int half) {
  int nblk = (L + bs - 1) / bs, nb = B * nblk + 3; /* a few blocks no entry holds */
  int32_t *table = malloc(sizeof(int32_t) * (size_t)(B * nblk)), *perm = malloc(sizeof(int32_t) * (size_t)nb);
  for (int i = 0; i < nb; i++) perm[i] = i;
  for (int i = nb - 1; i > 0; i--) { /* a shuffled table */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int j = (int)(rng % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  memcpy(table, perm, sizeof(int32_t) * (size_t)(B * nblk));
  int64_t cd[4] = {B, HKV, L, D}, pd[4] = {nb, HKV, bs, D}, qd[3] = {B, S, HQ * D}, kd[3] = {B, S, HKV * D};
  dvm_dtype pdt = half ? DVM_F16 : DVM_F32;
  dvm_tensor *ck = make(DVM_F32, 4, cd), *cv = make(DVM_F32, 4, cd), *pool[2] = {make(pdt, 4, pd), make(pdt, 4, pd)};
  /* the pools hold the contiguous cache's rows where the table puts them
   * (an f16 pool: the rows rounded, and the contiguous cache rounded too) */
  for (int i = 0; i < 2; i++)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < HKV; h++)
        for (int t = 0; t < L; t++)
          for (int e = 0; e < D; e++) {
            int64_t r = ((int64_t)table[b * nblk + t / bs] * HKV + h) * bs + t % bs;
            float *c = (float *)dvm_tensor_ptr(i ? cv : ck) + (((int64_t)b * HKV + h) * L + t) * D + e;
            if (half) {
              ((uint16_t *)dvm_tensor_ptr(pool[i]))[r * D + e] = dvm_f32_to_f16(*c);
              *c = dvm_f16_to_f32(dvm_f32_to_f16(*c));
            } else {
              ((float *)dvm_tensor_ptr(pool[i]))[r * D + e] = *c;
            }
          }
  dvm_tensor *q = make(DVM_F32, 3, qd), *k = make(DVM_F32, 3, kd), *v = make(DVM_F32, 3, kd);
  /* the f32 call's new rows rounded as the f16 call must round them */
  dvm_tensor *kc = make(DVM_F32, 3, kd), *vc = make(DVM_F32, 3, kd);
  for (int64_t i = 0; i < B * S * HKV * D; i++)
    for (int j = 0; j < 2; j++) {
      float x = ((float *)dvm_tensor_ptr(j ? v : k))[i];
      ((float *)dvm_tensor_ptr(j ? vc : kc))[i] = half ? dvm_f16_to_f32(dvm_f32_to_f16(x)) : x;
    }
  int64_t one = B, scalar = 1;
  dvm_tensor *seqlens = make(DVM_I32, 1, &one), *total = make(DVM_I32, 1, &scalar);
  int32_t most = 0;
  for (int b = 0; b < B; b++) {
    ((int32_t *)dvm_tensor_ptr(seqlens))[b] = past[b] + S - 1;
    most = past[b] + S > most ? past[b] + S : most;
  }
  *(int32_t *)dvm_tensor_ptr(total) = most;
  dvm_tensor *y0 = make(DVM_F32, 3, qd), *y1 = make(DVM_F32, 3, qd), *paged[2];
  dvm_tensor_pages pages = {table, nblk, bs, nb, pdt};
  for (int i = 0; i < 2; i++) CHECK_OK(dvm_tensor_wrap_paged(DVM_F32, cd, dvm_tensor_ptr(pool[i]), &pages, &paged[i]));
  CHECK_OK(gqa(q, kc, vc, ck, cv, ck, seqlens, total, y0));
  CHECK_OK(gqa(q, k, v, paged[0], paged[1], paged[0], seqlens, total, y1));
  double worst = 0, tol = half && S == 1 ? 0 : 1e-5;
  for (int64_t i = 0; i < B * S * HQ * D; i++)
    worst = fmax(worst, fabs(((float *)dvm_tensor_ptr(y0))[i] - ((float *)dvm_tensor_ptr(y1))[i]));
  int rows_differ = 0;
  for (int i = 0; i < 2; i++)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < HKV; h++)
        for (int t = 0; t < L; t++) {
          int64_t r = ((int64_t)table[b * nblk + t / bs] * HKV + h) * bs + t % bs;
          const float *c = (float *)dvm_tensor_ptr(i ? cv : ck) + (((int64_t)b * HKV + h) * L + t) * D;
          int differ = 0;
          for (int e = 0; e < D; e++)
            differ |= pool_at(pool[i], r, e) != (half ? dvm_f16_to_f32(dvm_f32_to_f16(c[e])) : c[e]);
          rows_differ += differ;
        }
  if (worst > tol || rows_differ)
    fprintf(stderr, "B %d S %d bs %d %s: output differs by %g, %d cache rows differ\n", B, S, bs, half ? "f16" : "f32",
            worst, rows_differ);
  CHECK(worst <= tol && rows_differ == 0);

  /* a table entry outside the pool, then a present that is not the paged past */
  table[nblk - 1] = nb;
  int reaches_last = past[0] + S > (nblk - 1) * bs;
  if (reaches_last)
    CHECK_ERR(gqa(q, k, v, paged[0], paged[1], paged[0], seqlens, total, y1), DVM_INVALID_ARGUMENT,
              "outside the pool's");
  table[nblk - 1] = perm[nblk - 1];
  CHECK_ERR(gqa(q, k, v, paged[0], paged[1], ck, seqlens, total, y1), DVM_INVALID_ARGUMENT, "must be its present");
  *(int32_t *)dvm_tensor_ptr(total) = L + 1; /* rows the table does not cover */
  if (S == 1)
    CHECK_ERR(gqa(q, k, v, paged[0], paged[1], paged[0], seqlens, total, y1), DVM_INVALID_ARGUMENT,
              "total_sequence_length 38 is past the paged cache's 37 rows");
  dvm_tensor *all[] = {ck, cv, pool[0], pool[1], q, k, v, kc, vc, seqlens, total, y0, y1, paged[0], paged[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dvm_tensor_release(all[i]);
  free(table);
  free(perm);
}

int main(void) {
  static const int sizes[] = {1, 4, 5, 16};
  for (int half = 0; half < 2; half++)
    for (int i = 0; i < 4; i++) {
      one_case(3, 1, (const int[]){0, 17, L - 1}, sizes[i], half); /* decode steps at different lengths */
      one_case(1, 7, (const int[]){0}, sizes[i], half);            /* a first prompt */
      one_case(1, 6, (const int[]){10}, sizes[i], half);           /* a prompt after a shared prefix */
      one_case(1, 1, (const int[]){L - 1}, sizes[i], half);        /* the last row */
    }
  return harness_finish("gqa_paged");
}
