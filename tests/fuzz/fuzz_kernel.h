/* What the fuzz targets of kernels' words share (fuzz_tree.c, fuzz_ml.c):
 * a broken promise aborts, so the fuzzer and the replay test see it, and
 * a scoring kernel called on fuzzed words. */
#ifndef DVM_TESTS_FUZZ_KERNEL_H
#define DVM_TESTS_FUZZ_KERNEL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "kernel.h"

static void require(int ok) {
  if (!ok) abort();
}

/* A zeroed tensor. */
static dvm_tensor *make(dvm_dtype dt, int rank, const int64_t *dims) {
  dvm_tensor *t = NULL;
  require(!dvm_tensor_create(dt, rank, dims, &t));
  memset(dvm_tensor_data(t), 0, dvm_tensor_nbytes(t));
  return t;
}

/* A header word read as a small count (1..64 otherwise). */
static int64_t small(const int32_t *h, int i) { return h[i] >= 1 && h[i] <= 64 ? h[i] : 1; }

/* The bytes as i32 words (a tail of fewer than 4 dropped). */
static dvm_tensor *words(const uint8_t *data, size_t size) {
  int64_t nw = (int64_t)(size / 4);
  dvm_tensor *w = make(DVM_I32, 1, &nw);
  if (nw) memcpy(dvm_tensor_data(w), data, (size_t)nw * 4);
  return w;
}

/* Scoring kernel kd (`name`) on words w and three rows of f features
 * (some NaN), with c score columns and, as a classifier (cls), labels: it
 * scores them or refuses with a message "NAME: ...". */
static void score_words(const dvm_kernel_def *kd, const char *name, dvm_tensor *w, int64_t f, int64_t c, int cls) {
  int64_t rows = 3;
  dvm_tensor *x = make(DVM_F32, 2, (int64_t[]){rows, f});
  float *xv = dvm_tensor_data(x);
  for (int64_t i = 0; i < rows * f; i++) xv[i] = i % 5 == 4 ? NAN : (float)(i % 7) * 0.25f - 0.5f;
  dvm_tensor *labels = make(DVM_I64, 1, &rows), *scores = make(DVM_F32, 2, (int64_t[]){rows, c});
  dvm_tensor *in[2] = {x, w}, *out[2] = {cls ? labels : scores, scores};
  dvm_value attrs[2] = {{.kind = DVM_VAL_INT}, {.kind = DVM_VAL_INT}};
  attrs[0].u.i = c;
  attrs[1].u.i = cls;
  dvm_exec ex = {.threads = 1};
  dvm_kernel_args a = {in, 2, out, 1 + cls, attrs, 2, 0, NULL, 0, &ex};
  dvm_status *st = kd->fn(&a);
  if (st) {
    size_t l = strlen(name);
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT || dvm_status_code(st) == DVM_OUT_OF_MEMORY);
    require(strncmp(dvm_status_message(st), name, l) == 0 && strncmp(dvm_status_message(st) + l, ": ", 2) == 0);
    dvm_status_free(st);
  }
  dvm_tensor_release(x);
  dvm_tensor_release(labels);
  dvm_tensor_release(scores);
}

#endif
