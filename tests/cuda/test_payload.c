/* DVMG payloads (ops/cuda/payload.h), no GPU needed: a valid payload built
 * here byte by byte, then every malformed variant of it, each rejected by
 * the rule that names it; a permuted input's strides; image choice per architecture; the summary
 * `dvm disasm` shows; the occupancy
 * cost model and grid sizes. */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "dvm/tensor.h"
#include "ops/cuda/payload.h"
#include "payload_fixture.h"

static dvm_status *read_mutated(size_t size, void (*mutate)(uint8_t *p)) {
  uint8_t *p = malloc(TOTAL);
  build(p);
  if (mutate) mutate(p);
  dvm_gen_payload g;
  dvm_status *st = dvm_gen_payload_read(p, size, &g);
  free(p);
  return st;
}

#define MUT(name, body) static void name(uint8_t *p) { body; }
MUT(bad_magic, p[0] = 'X')
MUT(bad_version, put16(p + 4, 1))
MUT(bad_kind, p[6] = 11)
MUT(split_three, p[6] = DVM_GEN_SPLIT)
MUT(concat_ok, p[6] = DVM_GEN_CONCAT)
MUT(concat_mixed, concat_ok(p); p[DTYPES_AT + 1] = DVM_I64)
/* a gather: data f32, indices i64, output f32 (the fixture's third input
 * becomes padding) */
MUT(gather_ok, p[6] = DVM_GEN_GATHER; p[8] = 2; p[CLASSES_AT + 2] = 0; p[DTYPES_AT + 1] = DVM_I64)
MUT(gather_three, p[6] = DVM_GEN_GATHER)
MUT(gather_f32_indices, gather_ok(p); p[DTYPES_AT + 1] = DVM_F32)
MUT(gather_cast, gather_ok(p); p[DTYPES_AT + 2] = DVM_F16)
MUT(zero_configs, p[7] = 0)
MUT(many_configs, p[7] = DVM_GEN_MAX_CONFIGS + 1)
MUT(zero_inputs, p[8] = 0)
MUT(many_inputs, p[8] = DVM_GEN_MAX_IN + 1)
MUT(zero_outputs, p[9] = 0)
MUT(many_outputs, p[9] = DVM_GEN_MAX_OUT + 1)
MUT(zero_tile, put16(p + 10, 0))
MUT(big_tile, put16(p + 10, DVM_GEN_MAX_TILE + 1))
MUT(zero_images, put32(p + 12, 0))
MUT(many_images, put32(p + 12, 1000000))
MUT(reserved, p[28] = 1)
MUT(block_zero, put16(p + 32, 0))
MUT(block_big, put16(p + 32, 2048))
MUT(per_thread_zero, put16(p + 42, 0))
MUT(shared_big, put32(p + 44, 1u << 30))
MUT(bad_class, p[CLASSES_AT + 1] = 9)
MUT(old_version, put16(p + 4, 3))
MUT(class_past_sliced, p[CLASSES_AT + 1] = DVM_GEN_SLICED + 1)
MUT(permuted_of_three, p[CLASSES_AT + 2] = DVM_GEN_PERMUTED)
MUT(sliced_of_three, p[CLASSES_AT + 2] = DVM_GEN_SLICED)
MUT(permuted_rows, p[6] = DVM_GEN_ROWS; p[8] = 1; p[CLASSES_AT] = DVM_GEN_PERMUTED)
MUT(permuted_one, p[8] = 1; p[CLASSES_AT] = DVM_GEN_PERMUTED; p[CLASSES_AT + 1] = 0;
    p[CLASSES_AT + 2] = 0)
MUT(sliced_one, permuted_one(p); p[CLASSES_AT] = DVM_GEN_SLICED)
MUT(padding, p[CLASSES_AT + NIN] = 1)
MUT(image_past_end, put32(p + TABLE_AT + 16 * 2 + 8, IMG_AT(2) + 8))
MUT(image_size_overflow, put32(p + TABLE_AT + 16 * 1 + 12, 0xfffffff0u))
MUT(image_unaligned, put32(p + TABLE_AT + 8, IMG_AT(0) + 4))
MUT(image_in_tables, put32(p + TABLE_AT + 8, TABLE_AT))
MUT(image_overlap, put32(p + TABLE_AT + 16 + 8, IMG_AT(0) + 8))
MUT(image_over_source, put32(p + TABLE_AT + 8, SRC_AT))
MUT(image_empty, put32(p + TABLE_AT + 16 + 12, 0))
MUT(image_reserved, put32(p + TABLE_AT + 4, 7))
MUT(image_arch, put32(p + TABLE_AT, 5))
MUT(image_dup_arch, put32(p + TABLE_AT + 16, 80))
MUT(image_not_elf, p[IMG_AT(1)] = 'X')
MUT(source_past_end, put32(p + 20, TOTAL))
MUT(source_unaligned, put32(p + 16, SRC_AT + 1))
MUT(no_ptx, put32(p + 12, 2))
MUT(bad_dtype, p[DTYPES_AT + 3] = DVM_DTYPE_COUNT)
MUT(dtypes_past_end, put32(p + 24, (TOTAL + 7) / 8 * 8))
MUT(dtypes_unaligned, put32(p + 24, DTYPES_AT + 2))
MUT(dtypes_over_source, put32(p + 24, SRC_AT))
MUT(image_over_dtypes, put32(p + TABLE_AT + 8, DTYPES_AT))
/* a window pool and a resize: one input (the fixture's others become
 * padding), f32 in and out; a resize of u8 */
MUT(window_ok, p[6] = DVM_GEN_WINDOW; p[8] = 1; p[CLASSES_AT + 1] = 0; p[CLASSES_AT + 2] = 0)
MUT(window_three, p[6] = DVM_GEN_WINDOW)
MUT(window_f16, window_ok(p); p[DTYPES_AT] = DVM_F16; p[DTYPES_AT + 1] = DVM_F16)
MUT(window_cast, window_ok(p); p[DTYPES_AT + 1] = DVM_I64)
MUT(resize_ok, window_ok(p); p[6] = DVM_GEN_RESIZE; p[DTYPES_AT] = DVM_U8; p[DTYPES_AT + 1] = DVM_U8)
MUT(resize_strings, resize_ok(p); p[DTYPES_AT] = DVM_STRING; p[DTYPES_AT + 1] = DVM_STRING)
MUT(resize_two_outputs, resize_ok(p); p[9] = 2)
/* a conv of X, W and B, f32 throughout */
MUT(conv_ok, p[6] = DVM_GEN_CONV)
MUT(conv_one, window_ok(p); p[6] = DVM_GEN_CONV)
MUT(conv_f16_w, conv_ok(p); p[DTYPES_AT + 1] = DVM_F16)
/* a conv_transpose of X, W and B, f32 throughout */
MUT(convt_ok, p[6] = DVM_GEN_CONV_TRANSPOSE)
MUT(convt_one, window_ok(p); p[6] = DVM_GEN_CONV_TRANSPOSE)
MUT(convt_f16_b, convt_ok(p); p[DTYPES_AT + 2] = DVM_F16)
/* a matmul_nbits of A, B's codes and scales */
MUT(nbits_ok, p[6] = DVM_GEN_MATMUL_NBITS; p[DTYPES_AT + 1] = DVM_U8)
MUT(nbits_f32_b, p[6] = DVM_GEN_MATMUL_NBITS)
MUT(nbits_two, window_ok(p); p[6] = DVM_GEN_MATMUL_NBITS; p[8] = 2)
MUT(nbits_u8_y, nbits_ok(p); p[DTYPES_AT + 3] = DVM_U8)

/* --write-seeds DIR: each payload test_read reads, valid or refused, as a
 * seed of tests/fuzz/fuzz_gen.c (corpus/gen). */
static const char *seed_dir;
static int nseeds;

static void seed(void (*mutate)(uint8_t *p)) {
  if (!seed_dir) return;
  uint8_t *p = malloc(TOTAL);
  char path[4096];
  build(p);
  if (mutate) mutate(p);
  snprintf(path, sizeof path, "%s/seed_%02d", seed_dir, nseeds++);
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(p, 1, TOTAL, f) == TOTAL);
  if (f) fclose(f);
  free(p);
}

static void test_read(void) {
  dvm_gen_payload g;
  uint8_t *p = malloc(TOTAL);
  build(p);
  CHECK_OK(dvm_gen_payload_read(p, TOTAL, &g));
  CHECK(g.kind == DVM_GEN_ELEMENTWISE && g.nconfigs == 2 && g.nin == 3 && g.nout == 1);
  CHECK(g.tile == 8 && g.nimages == 3 && g.configs[0].block == 128 && g.configs[1].shared == 1024);
  CHECK(g.classes[2] == DVM_GEN_STRIDED && g.images[1].arch == 90 && g.images[1].size == IMG_SIZE);
  CHECK(g.dtypes[0] == DVM_F32 && g.dtypes[3] == DVM_F32);
  CHECK(g.images[2].data == p + IMG_AT(2) && g.source_size == SRC_SIZE && g.source == (char *)p + SRC_AT);
  free(p);

  /* every truncation fails, never reads past the end */
  for (size_t n = 0; n < TOTAL; n++) {
    dvm_status *st = read_mutated(n, NULL);
    CHECK(dvm_status_code(st) == DVM_CORRUPT);
    dvm_status_free(st);
  }
  static const struct {
    void (*mutate)(uint8_t *);
    const char *msg;
  } cases[] = {
      {bad_magic, "bad magic"}, {bad_version, "version 1"}, {bad_kind, "kind 11, expected 1 (elementwise), 2 (rows), 3 (gather), 4 (concat), 5 (split), 6 (window), 7 (resize), 8 (conv), 9 (conv_transpose) or 10 (matmul_nbits)"},
      {split_three, "a split takes 1 input, not 3"},
      {concat_mixed, "concat: input 1 is i64, input 0 f32"},
      {gather_three, "a gather takes 2 inputs and 1 output, not 3 and 1"},
      {gather_f32_indices, "gather: indices are f32, expected i32 or i64"},
      {gather_cast, "gather: output is f16, data f32"},
      {zero_configs, "0 configs"}, {many_configs, "9 configs"}, {zero_inputs, "0 inputs"},
      {many_inputs, "17 inputs"}, {zero_outputs, "0 outputs"}, {many_outputs, "9 outputs"},
      {zero_tile, "tile 0"}, {big_tile, "tile 65"}, {zero_images, "0 images"},
      {many_images, "1000000 images"}, {reserved, "reserved bytes"},
      {block_zero, "config 0: block of 0"}, {block_big, "block of 2048"},
      {per_thread_zero, "config 1: per_thread is 0"}, {shared_big, "shared memory"},
      {bad_class, "input 1: class 9"}, {padding, "padding byte"},
      {old_version, "version 3, this dvm reads version 8"},
      {class_past_sliced, "input 1: class 6, expected 0..5"},
      {permuted_of_three, "input 2: class permuted needs an elementwise kernel of one input"},
      {sliced_of_three, "input 2: class sliced needs an elementwise kernel of one input"},
      {permuted_rows, "input 0: class permuted needs an elementwise kernel of one input"},
      {image_past_end, "image 2 (PTX): bytes"}, {image_size_overflow, "past the end"},
      {image_unaligned, "image 0 (sm_80): offset"}, {image_in_tables, "inside the header"},
      {image_overlap, "overlap"}, {image_over_source, "overlap"}, {image_empty, "is empty"},
      {image_reserved, "reserved field is 7"}, {image_arch, "arch 5"},
      {image_dup_arch, "same arch"}, {image_not_elf, "not a cubin"},
      {source_past_end, "source: bytes"}, {source_unaligned, "source: offset"},
      {bad_dtype, "output 0: dtype code 14 is not a dtype"}, {dtypes_past_end, "dtypes: bytes"},
      {dtypes_unaligned, "dtypes: offset"}, {dtypes_over_source, "source: bytes"},
      {image_over_dtypes, "image 0 (sm_80): bytes"},
      {window_three, "a window pool takes 1 input and 1 output, not 3 and 1"},
      {window_f16, "window pool: input is f16, expected f32"},
      {window_cast, "window pool: output is i64, input f32"},
      {resize_strings, "resize: input is string, which is not copied as bits"},
      {resize_two_outputs, "a resize takes 1 input and 1 output, not 1 and 2"},
      {conv_one, "a conv takes 2 to 4 inputs and 1 output, not 1 and 1"},
      {conv_f16_w, "conv: input 1 is f16, expected f32"},
      {convt_one, "a conv_transpose takes 2 or 3 inputs and 1 output, not 1 and 1"},
      {convt_f16_b, "conv_transpose: input 2 is f16, expected f32"},
      {nbits_f32_b, "matmul_nbits: input 1 is f32, expected u8"},
      {nbits_two, "a matmul_nbits takes 3 to 5 inputs and 1 output, not 2 and 1"},
      {nbits_u8_y, "matmul_nbits: output 0 is u8, expected f32"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK_ERR(read_mutated(TOTAL, cases[i].mutate), DVM_CORRUPT, cases[i].msg);
    seed(cases[i].mutate);
  }
  static void (*const valid[])(uint8_t *) = {NULL, no_ptx, permuted_one, sliced_one, concat_ok, gather_ok,
                                              window_ok, resize_ok, conv_ok, convt_ok, nbits_ok};
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) seed(valid[i]);
  /* a table that fits once images are dropped is still whole */
  CHECK_OK(read_mutated(TOTAL, no_ptx));
  /* the one input of an elementwise kernel may be permuted */
  CHECK_OK(read_mutated(TOTAL, permuted_one));
  CHECK_OK(read_mutated(TOTAL, sliced_one));
  CHECK_OK(read_mutated(TOTAL, concat_ok));
  CHECK_OK(read_mutated(TOTAL, gather_ok));
  CHECK_OK(read_mutated(TOTAL, window_ok));
  CHECK_OK(read_mutated(TOTAL, resize_ok));
  CHECK_OK(read_mutated(TOTAL, conv_ok));
  CHECK_OK(read_mutated(TOTAL, convt_ok));
  CHECK_OK(read_mutated(TOTAL, nbits_ok));
}

/* A gather's [outer, m, inner] and axis size, the output's shape and the
 * axis checked as the CPU gather checks them. */
static void test_gather(void) {
  dvm_tensor *x = NULL, *idx = NULL, *y = NULL, *bad = NULL;
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){2, 7, 5}, &x));
  CHECK_OK(dvm_tensor_create(DVM_I64, 2, (int64_t[]){3, 4}, &idx));
  CHECK_OK(dvm_tensor_create(DVM_F32, 4, (int64_t[]){2, 3, 4, 5}, &y));
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){2, 12, 5}, &bad));
  memset(dvm_tensor_data(idx), 0, dvm_tensor_nbytes(idx));
  long long dims[DVM_GEN_MAX_RANK], size = 0;
  dvm_value axis = dvm_value_int(1), neg = dvm_value_int(-2), far = dvm_value_int(3);
  CHECK_OK(dvm_gen_gather_extents(x, idx, y, &axis, 1, dims, &size));
  CHECK(dims[0] == 1 && dims[2] == 1 && dims[3] == 2 && dims[4] == 12 && dims[5] == 5 && size == 7);
  CHECK_OK(dvm_gen_gather_extents(x, idx, y, &neg, 1, dims, &size));
  CHECK(dims[3] == 2 && dims[4] == 12 && dims[5] == 5 && size == 7);
  CHECK_ERR(dvm_gen_gather_extents(x, idx, bad, &axis, 1, dims, &size), DVM_INVALID_ARGUMENT,
            "output 0 is f32[2,12,5]; the gather gives f32[2,3,4,5]");
  CHECK_ERR(dvm_gen_gather_extents(x, idx, y, &far, 1, dims, &size), DVM_INVALID_ARGUMENT, "axis");
  dvm_value two[2] = {axis, axis};
  CHECK_ERR(dvm_gen_gather_extents(x, idx, y, two, 2, dims, &size), DVM_INVALID_ARGUMENT, "at most one");
  dvm_tensor_release(x);
  dvm_tensor_release(idx);
  dvm_tensor_release(y);
  dvm_tensor_release(bad);
}

/* A permuted input's strides over the output's right-aligned dims; the
 * perm and the output's shape checked as the CPU transpose checks them. */
static void test_permuted(void) {
  dvm_tensor *x = NULL, *y = NULL, *bad = NULL;
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){2, 3, 5}, &x));
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){5, 2, 3}, &y));
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){5, 3, 2}, &bad));
  long long s[DVM_GEN_MAX_RANK];
  dvm_value perm = {.kind = DVM_VAL_SHAPE, .rank = 3, .u.dims = {2, 0, 1}};
  CHECK_OK(dvm_gen_permuted_strides(x, y, &perm, 1, s));
  CHECK(s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 1 && s[4] == 15 && s[5] == 5);
  /* no perm: dims reversed */
  CHECK_OK(dvm_gen_permuted_strides(x, bad, NULL, 0, s));
  CHECK(s[3] == 1 && s[4] == 5 && s[5] == 15);
  CHECK_ERR(dvm_gen_permuted_strides(x, bad, &perm, 1, s), DVM_INVALID_ARGUMENT,
            "output 0 is f32[5,3,2]; the permuted input gives f32[5,2,3]");
  dvm_value dup = {.kind = DVM_VAL_SHAPE, .rank = 3, .u.dims = {2, 2, 1}};
  CHECK_ERR(dvm_gen_permuted_strides(x, y, &dup, 1, s), DVM_INVALID_ARGUMENT, "not a permutation");
  dvm_value two[2] = {perm, perm};
  CHECK_ERR(dvm_gen_permuted_strides(x, y, two, 2, s), DVM_INVALID_ARGUMENT, "at most one");
  dvm_tensor_release(x);
  dvm_tensor_release(y);
  dvm_tensor_release(bad);
}

/* A sliced input's strides and offset: x [2, 3, 5] from row 1 of its
 * middle dim, its last backwards by 2 from 4; the output's shape checked
 * as the CPU slice's, the attribute count and a step of 0 refused. */
static void test_sliced(void) {
  dvm_tensor *x = NULL, *y = NULL, *bad = NULL;
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){2, 3, 5}, &x));
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){2, 2, 3}, &y));
  CHECK_OK(dvm_tensor_create(DVM_F32, 3, (int64_t[]){2, 2, 2}, &bad));
  long long s[DVM_GEN_MAX_RANK], off = -1;
  dvm_value a[4] = {{.kind = DVM_VAL_SHAPE, .rank = 2, .u.dims = {1, -1}},   /* starts */
                    {.kind = DVM_VAL_SHAPE, .rank = 2, .u.dims = {9, -9}},   /* ends */
                    {.kind = DVM_VAL_SHAPE, .rank = 2, .u.dims = {1, 2}},    /* axes */
                    {.kind = DVM_VAL_SHAPE, .rank = 2, .u.dims = {1, -2}}};  /* steps */
  CHECK_OK(dvm_gen_sliced_strides(x, y, a, 4, s, &off));
  CHECK(s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 15 && s[4] == 5 && s[5] == -2);
  CHECK(off == 1 * 5 + 4);
  CHECK_ERR(dvm_gen_sliced_strides(x, bad, a, 4, s, &off), DVM_INVALID_ARGUMENT,
            "output 0 is f32[2,2,2]; the sliced input gives f32[2,2,3]");
  CHECK_ERR(dvm_gen_sliced_strides(x, y, a, 1, s, &off), DVM_INVALID_ARGUMENT, "2 to 4 attributes");
  a[3].u.dims[0] = 0;
  CHECK_ERR(dvm_gen_sliced_strides(x, y, a, 4, s, &off), DVM_INVALID_ARGUMENT, "step 0");
  dvm_tensor_release(x);
  dvm_tensor_release(y);
  dvm_tensor_release(bad);
}

static void test_image(void) {
  dvm_gen_payload g;
  uint8_t *p = malloc(TOTAL);
  build(p);
  CHECK_OK(dvm_gen_payload_read(p, TOTAL, &g));
  dvm_gen_image im;
  CHECK_OK(dvm_gen_payload_image(&g, 80, &im));
  CHECK(im.arch == 80 && im.data == p + IMG_AT(0));
  CHECK_OK(dvm_gen_payload_image(&g, 90, &im));
  CHECK(im.arch == 90 && im.data == p + IMG_AT(1));
  CHECK_OK(dvm_gen_payload_image(&g, 86, &im)); /* no sm_86 cubin: the PTX */
  CHECK(im.arch == 0 && im.data == p + IMG_AT(2));
  /* the host emulation gets the CUDA C source */
  CHECK_OK(dvm_gen_payload_image(&g, DVM_GEN_SOURCE_SM, &im));
  CHECK(im.arch == DVM_GEN_SOURCE_SM && im.data == p + SRC_AT && im.size == SRC_SIZE);
  put32(p + 12, 2); /* sm_80 and sm_90 only */
  CHECK_OK(dvm_gen_payload_read(p, TOTAL, &g));
  CHECK_ERR(dvm_gen_payload_image(&g, 86, &im), DVM_UNAVAILABLE, "no cubin for this device (sm_86) and no PTX");
  CHECK_ERR(dvm_gen_payload_image(&g, 75, &im), DVM_UNAVAILABLE, "it has sm_80, sm_90");
  put32(p + 20, 0); /* no source */
  CHECK_OK(dvm_gen_payload_read(p, TOTAL, &g));
  CHECK_ERR(dvm_gen_payload_image(&g, DVM_GEN_SOURCE_SM, &im), DVM_UNAVAILABLE, "no CUDA C source");
  free(p);
}

/* What `dvm disasm` shows of a payload (the gen kernel's describe hook):
 * read with the checked reader, so a malformed payload is named, not shown. */
static void test_describe(void) {
  uint8_t *p = malloc(TOTAL);
  build(p);
  dvm_payload_desc d;
  CHECK_OK(dvm_gen_payload_describe(p, TOTAL, &d));
  CHECK(strcmp(d.summary, "elementwise, T=8: variants v0..v7 by n mod 8, then the bounds-checked "
                          "baseline; configs 0:block 128 x 4 1:block 256 x 1; images sm_80 (20 bytes) "
                          "sm_90 (20 bytes) ptx (20 bytes)") == 0);
  CHECK(strcmp(d.language, "CUDA C") == 0);
  CHECK(d.source == (const char *)p + SRC_AT && d.source_size == SRC_SIZE);
  p[6] = DVM_GEN_ROWS;
  CHECK_OK(dvm_gen_payload_describe(p, TOTAL, &d));
  CHECK(strncmp(d.summary, "rows, T=8:", 10) == 0);
  put32(p + 20, 0); /* no source */
  CHECK_OK(dvm_gen_payload_describe(p, TOTAL, &d));
  CHECK(d.source_size == 0);
  CHECK_ERR(dvm_gen_payload_describe(p, TOTAL - 1, &d), DVM_CORRUPT, "past the end");
  p[0] = 'X';
  CHECK_ERR(dvm_gen_payload_describe(p, TOTAL, &d), DVM_CORRUPT, "bad magic");
  free(p);
}

static void test_choose(void) {
  dvm_gen_payload g;
  uint8_t *p = malloc(TOTAL);
  build(p);
  CHECK_OK(dvm_gen_payload_read(p, TOTAL, &g));
  free(p);
  /* config 0 covers 512 elements a block, config 1 256 */
  dvm_gen_shape s = {1000, 1};
  CHECK(dvm_gen_grid(&g, 0, s) == 2 && dvm_gen_grid(&g, 1, s) == 4);
  s.n = 512;
  CHECK(dvm_gen_grid(&g, 0, s) == 1);
  s.n = 1;
  CHECK(dvm_gen_grid(&g, 0, s) == 1 && dvm_gen_grid(&g, 1, s) == 1);
  int bps[2] = {4, 8};
  /* small n: one wave either way; config 1's threads do 1 element, not 4 */
  s.n = 1000;
  CHECK(dvm_gen_choose(&g, s, 132, bps) == 1);
  /* 1e8 elements: config 0 is 195313 blocks in 370 waves of 528, 4 steps
   * each (1480); config 1 390625 blocks in 370 waves of 1056, 1 step (370) */
  s.n = 100000000;
  CHECK(dvm_gen_choose(&g, s, 132, bps) == 1);
  /* if config 1 fits only 1 block per SM: 2960 waves of 1 step lose */
  int low1[2] = {4, 1};
  CHECK(dvm_gen_choose(&g, s, 132, low1) == 0);
  /* a config that cannot be resident is never chosen */
  int only0[2] = {4, 0};
  CHECK(dvm_gen_choose(&g, s, 132, only0) == 0);
  int none[2] = {0, 0};
  CHECK(dvm_gen_choose(&g, s, 132, none) == -1);
  /* rows: one block per row; fewer steps per row wins at equal waves */
  g.kind = DVM_GEN_ROWS;
  s = (dvm_gen_shape){.n = 1000, .rows = 7};
  CHECK(dvm_gen_grid(&g, 0, s) == 7 && dvm_gen_grid(&g, 1, s) == 7);
  CHECK(dvm_gen_choose(&g, s, 132, bps) == 1); /* ceil(1000/256) = 4 steps < ceil(1000/128) = 8 */
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) seed_dir = argv[2];
  test_read();
  test_image();
  test_describe();
  test_choose();
  test_permuted();
  test_sliced();
  test_gather();
  return harness_finish("cuda_payload");
}
