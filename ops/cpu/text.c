/* Text: tfidf (ONNX TfIdfVectorizer over integer tokens).
 *
 *   tfidf(in: X; attrs: mode:int, min_gram:int, max_gram:int, max_skip:int,
 *         size:int) -> Y
 *
 * X i32 or i64, [C] (a scalar is one token) or [B, C]; Y f32, [size] or
 * [B, size] (shapefuncs/text.h). The kernel table entry's payload lists the
 * n-grams, in little-endian int64 words: G, then G records (n, column,
 * weight as IEEE-754 double bits, the n tokens); it comes from the module
 * file, so it is checked on every call.
 *
 * As ONNX Runtime counts: for each skip distance d = 1 .. max_skip + 1,
 * each start s and each length n = 1 .. max_gram in turn, the tokens
 * X[s + j*d], j < n (all inside the row) are looked up among the n-grams of
 * length n; a match of length >= min_gram (>= 2 when d > 1: unigrams count
 * once) adds 1 to its column (mode 0, TF), sets the column to its weight
 * (mode 1, IDF: the last match's), or adds its weight (mode 2, TFIDF).
 * Unweighted n-grams weigh 1. (ONNX's reference reads the weights per
 * column instead; with no weights, or one n-gram per column, the two agree.) */
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/text.h"

#define MAX_GRAM 64

static dvm_status *bad(const char *why) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "tfidf: payload: %s", why);
}

/* Checks the payload; *recs and *g are its records and their count. */
static dvm_status *decode(const void *payload, size_t size, int64_t columns, const int64_t **recs, int64_t *g) {
  if (!payload || size % 8) return bad("missing, or not a whole number of int64 words");
  int64_t nw = (int64_t)(size / 8), pos = 1;
  const int64_t *p = payload;
  if (nw < 1 || p[0] < 0) return bad("no n-gram count");
  for (int64_t k = 0; k < p[0]; k++) {
    if (nw - pos < 3) return bad("a record runs past the end");
    int64_t n = p[pos], col = p[pos + 1];
    if (n < 1 || n > MAX_GRAM || col < 0 || col >= columns) return bad("a record's length or column is out of range");
    if (nw - pos - 3 < n) return bad("a record runs past the end");
    pos += 3 + n;
  }
  if (pos != nw) return bad("words after the last record");
  *recs = p + 1;
  *g = p[0];
  return NULL;
}

static inline int64_t token(const void *x, int i64, int64_t i) {
  return i64 ? ((const int64_t *)x)[i] : ((const int32_t *)x)[i];
}

/* The record of length n whose tokens are row[s + j*d], or NULL. */
static const int64_t *lookup(const int64_t *recs, int64_t g, int64_t n, const void *row, int i64, int64_t s, int64_t d) {
  for (int64_t k = 0, pos = 0; k < g; pos += 3 + recs[pos], k++) {
    if (recs[pos] != n) continue;
    int64_t j = 0;
    while (j < n && token(row, i64, s + j * d) == recs[pos + 3 + j]) j++;
    if (j == n) return recs + pos;
  }
  return NULL;
}

static dvm_status *tfidf(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "tfidf", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  dvm_tfidf_info p;
  const int64_t *recs = NULL;
  int64_t g = 0;
  if ((st = dvm_tfidf_infer(x->rank, x->dims, a->attrs, a->nattrs, &p)) ||
      (st = decode(a->payload, a->payload_size, p.size, &recs, &g)))
    return st;
  if ((x->dtype != DVM_I32 && x->dtype != DVM_I64) || y->dtype != DVM_F32) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "tfidf: dtypes %s: want X i32 or i64, Y f32",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  if (y->rank != p.rank || memcmp(y->dims, p.dims, sizeof(int64_t) * (size_t)p.rank) != 0) {
    char sy[DVM_SHAPE_STR_SIZE], sw[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "tfidf: output Y %s, want %s", dvm_shape_str(sy, y->rank, y->dims),
                          dvm_shape_str(sw, p.rank, p.dims));
  }
  int64_t rows = x->rank == 2 ? x->dims[0] : 1, len = x->rank == 2 ? x->dims[1] : x->rank == 1 ? x->dims[0] : 1;
  const char *px = dvm_tensor_ptr(x);
  float *py = dvm_tensor_ptr(y);
  int i64 = x->dtype == DVM_I64;
  size_t esz = i64 ? 8 : 4;
  for (int64_t b = 0; b < rows; b++) {
    const void *row = px + (size_t)(b * len) * esz;
    float *out = py + b * p.size;
    for (int64_t c = 0; c < p.size; c++) out[c] = 0;
    for (int64_t d = 1; d <= p.max_skip + 1; d++) {
      int64_t first = d > 1 && p.min_gram == 1 ? 2 : p.min_gram;
      if (first > p.max_gram) break;
      for (int64_t s = 0; s + (first - 1) * d < len; s++)
        for (int64_t n = first; n <= p.max_gram && s + (n - 1) * d < len; n++) {
          const int64_t *r = lookup(recs, g, n, row, i64, s, d);
          if (!r) continue;
          double w;
          memcpy(&w, &r[2], sizeof w);
          out[r[1]] = p.mode == 0 ? out[r[1]] + 1 : p.mode == 1 ? (float)w : (float)(out[r[1]] + w);
        }
    }
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_text_kernels[] = {
    {"tfidf", DVM_DEVICE_CPU, tfidf, "tfidf", DVM_DTYPE_BIT(DVM_I32) | DVM_DTYPE_BIT(DVM_I64)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
