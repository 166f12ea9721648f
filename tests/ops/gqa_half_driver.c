/* GroupQueryAttention on an f16 paged cache, for test_gqa_half.py:
 *   gqa_half_driver DIR B S HQ HKV D L BS TOTAL
 * reads DIR/q.f32 [B, S, HQ D], k.f32 and v.f32 [B, S, HKV D], pk.f32 and
 * pv.f32 [B, HKV, L, D] (the past, stored into f16 pools of BS-row blocks
 * laid out in reverse order) and seqlens.i32 [B]; runs the kernel (no
 * rotary, default scale) with total_sequence_length TOTAL and writes
 * DIR/y.f32 and the cache read back, pk_out.f32 and pv_out.f32 [B, HKV, L,
 * D] as f32. Exit 1 with the kernel's error on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernel.h"
#include "object.h"
#include "ops/optable.h"

static int failed(const char *what) {
  fprintf(stderr, "gqa_half_driver: %s\n", what);
  return 1;
}

/* t's bytes from or to DIR/name. */
static int io(const char *dir, const char *name, dvm_tensor *t, int write) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, write ? "wb" : "rb");
  size_t n = dvm_tensor_nbytes(t);
  int ok = f && (write ? fwrite(dvm_tensor_ptr(t), 1, n, f) : fread(dvm_tensor_ptr(t), 1, n, f)) == n;
  if (f) fclose(f);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 10) return failed("usage: gqa_half_driver DIR B S HQ HKV D L BS TOTAL");
  const char *dir = argv[1];
  int64_t B = atoll(argv[2]), S = atoll(argv[3]), HQ = atoll(argv[4]), HKV = atoll(argv[5]), D = atoll(argv[6]),
          L = atoll(argv[7]), BS = atoll(argv[8]), nblk = (L + BS - 1) / BS, nb = B * nblk;
  int64_t qd[3] = {B, S, HQ * D}, kd[3] = {B, S, HKV * D}, cd[4] = {B, HKV, L, D}, pd[4] = {nb, HKV, BS, D};
  dvm_tensor *q, *k, *v, *y, *seq, *tot, *past[2], *pool[2], *paged[2];
  int64_t one = 1;
  if (dvm_tensor_create(DVM_F32, 3, qd, &q) || dvm_tensor_create(DVM_F32, 3, kd, &k) ||
      dvm_tensor_create(DVM_F32, 3, kd, &v) || dvm_tensor_create(DVM_F32, 3, qd, &y) ||
      dvm_tensor_create(DVM_I32, 1, &B, &seq) || dvm_tensor_create(DVM_I32, 1, &one, &tot))
    return failed("out of memory");
  int32_t *table = malloc(sizeof(int32_t) * (size_t)nb);
  for (int64_t i = 0; i < nb; i++) table[i] = (int32_t)(nb - 1 - i);
  dvm_tensor_pages pages = {table, nblk, BS, nb, DVM_F16};
  for (int i = 0; i < 2; i++) {
    if (dvm_tensor_create(DVM_F32, 4, cd, &past[i]) || dvm_tensor_create(DVM_F16, 4, pd, &pool[i]) ||
        dvm_tensor_wrap_paged(DVM_F32, cd, dvm_tensor_ptr(pool[i]), &pages, &paged[i]))
      return failed("out of memory");
    memset(dvm_tensor_ptr(pool[i]), 0, dvm_tensor_nbytes(pool[i]));
  }
  if (!io(dir, "q.f32", q, 0) || !io(dir, "k.f32", k, 0) || !io(dir, "v.f32", v, 0) || !io(dir, "pk.f32", past[0], 0) ||
      !io(dir, "pv.f32", past[1], 0) || !io(dir, "seqlens.i32", seq, 0))
    return failed("cannot read the inputs");
  *(int32_t *)dvm_tensor_ptr(tot) = atoi(argv[9]);
  /* row t of entry b, head h: row t % BS of block table[b * nblk + t / BS] */
  for (int i = 0; i < 2; i++)
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < HKV; h++)
        for (int64_t t = 0; t < L; t++) {
          uint16_t *r = (uint16_t *)dvm_tensor_ptr(pool[i]) + ((table[b * nblk + t / BS] * HKV + h) * BS + t % BS) * D;
          const float *c = (const float *)dvm_tensor_ptr(past[i]) + ((b * HKV + h) * L + t) * D;
          for (int64_t e = 0; e < D; e++) r[e] = dvm_f32_to_f16(c[e]);
        }
  dvm_value attrs[9] = {{.kind = DVM_VAL_INT, .u.i = 0x7F | (7 << 16)}, {.kind = DVM_VAL_INT, .u.i = HQ},
                        {.kind = DVM_VAL_INT, .u.i = HKV},          {.kind = DVM_VAL_FLOAT, .u.f = 0},
                        {.kind = DVM_VAL_FLOAT, .u.f = 0},          {.kind = DVM_VAL_INT, .u.i = 0},
                        {.kind = DVM_VAL_INT, .u.i = 0},            {.kind = DVM_VAL_INT, .u.i = -1},
                        {.kind = DVM_VAL_INT, .u.i = 0}};
  dvm_tensor *in[7] = {q, k, v, paged[0], paged[1], seq, tot}, *out[3] = {y, paged[0], paged[1]};
  dvm_exec ex = {.threads = 2};
  dvm_kernel_args a = {.in = in, .nin = 7, .out = out, .nout = 3, .attrs = attrs, .nattrs = 9, .exec = &ex};
  dvm_status *st = dvm_ops_find("group_query_attention", DVM_DEVICE_CPU)->fn(&a);
  if (st) return failed(dvm_status_message(st));
  for (int i = 0; i < 2; i++) /* the pools back in the logical layout */
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < HKV; h++)
        for (int64_t t = 0; t < L; t++) {
          const uint16_t *r =
              (const uint16_t *)dvm_tensor_ptr(pool[i]) + ((table[b * nblk + t / BS] * HKV + h) * BS + t % BS) * D;
          float *c = (float *)dvm_tensor_ptr(past[i]) + ((b * HKV + h) * L + t) * D;
          for (int64_t e = 0; e < D; e++) c[e] = dvm_f16_to_f32(r[e]);
        }
  if (!io(dir, "y.f32", y, 1) || !io(dir, "pk_out.f32", past[0], 1) || !io(dir, "pv_out.f32", past[1], 1))
    return failed("cannot write the outputs");
  dvm_tensor *all[] = {q, k, v, y, seq, tot, past[0], past[1], pool[0], pool[1], paged[0], paged[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) dvm_tensor_release(all[i]);
  free(table);
  return 0;
}
