/* Shape functions of text ops: "tfidf" (TfIdfVectorizer: x; mode,
 * min_gram, max_gram, max_skip, size -> [size] or [B, size]),
 * "string_normalizer" and "string_split" (their outputs' sizes read from
 * the text, with the helpers their kernels share, ops/cpu/strings.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text.h"

#include "attr.h"
#include "kernel.h"
#include "shape.h"

dvm_status *dvm_tfidf_infer(int rank, const int64_t *dims, const dvm_value *attrs, int nattrs, dvm_tfidf_info *p) {
  const char *fn = "tfidf";
  static const char *const names[] = {"mode", "min_gram", "max_gram", "max_skip", "size"};
  int64_t *v[] = {&p->mode, &p->min_gram, &p->max_gram, &p->max_skip, &p->size};
  dvm_status *st = dvm_attr_count(fn, nattrs, 5, 5);
  for (int i = 0; i < 5 && !st; i++) st = dvm_attr_int(fn, names[i], &attrs[i], v[i]);
  if (st) return st;
  if (p->mode < 0 || p->mode > 2 || p->min_gram < 1 || p->max_gram < p->min_gram || p->max_skip < 0 || p->size < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attributes mode %lld, min_gram %lld, max_gram %lld, max_skip %lld, "
                          "size %lld: want mode 0..2, 1 <= min_gram <= max_gram, max_skip >= 0, size >= 1", fn,
                          (long long)p->mode, (long long)p->min_gram, (long long)p->max_gram, (long long)p->max_skip,
                          (long long)p->size);
  if (rank > 2) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input of rank %d, want [C] or [B, C]", fn, rank);
  p->rank = rank == 2 ? 2 : 1;
  p->dims[0] = rank == 2 ? dims[0] : p->size;
  p->dims[1] = p->size;
  return NULL;
}

static dvm_status *shapefn_tfidf(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  const int64_t *d;
  dvm_tfidf_info p;
  dvm_status *st = dvm_shape_check_counts("tfidf", nin, 6, 6, nout, 1);
  if (!st) st = dvm_shape_arg("tfidf", &in[0], 0, &r, &d);
  if (!st) st = dvm_tfidf_infer(r, d, in + 1, nin - 1, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}


/* ---- StringNormalizer and StringSplit ---- */


dvm_status *dvm_text_case(const char *s, size_t n, int upper, const char *what, char **out, size_t *outn) {
  char *buf = malloc(4 * n + 1); /* a code point's case takes at most 4 bytes */
  size_t o = 0;
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for %zu bytes", what, 4 * n);
  for (size_t i = 0; i < n;) {
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
    if (k <= 0) {
      free(buf);
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s is not UTF-8 (byte %zu)", what, i);
    }
    o += (size_t)utf8proc_encode_char(upper ? utf8proc_toupper(c) : utf8proc_tolower(c), (utf8proc_uint8_t *)buf + o);
    i += (size_t)k;
  }
  *out = buf;
  *outn = o;
  return NULL;
}

/* Element i of string tensor t as compared: as it is, or lower-cased (*own malloc'ed). */
static dvm_status *compared(const dvm_tensor *t, int64_t i, bool sensitive, const char *what, const char **s,
                            size_t *n, char **own) {
  *own = NULL;
  *s = dvm_tensor_string(t, i, n);
  if (sensitive) return NULL;
  char name[64];
  snprintf(name, sizeof name, "string_normalizer: %s %lld", what, (long long)i);
  dvm_status *st = dvm_text_case(*s, *n, 0, name, own, n);
  if (!st) *s = *own;
  return st;
}

dvm_status *dvm_strnorm_keep(const dvm_tensor *x, const dvm_tensor *stop, bool sensitive, uint8_t *keep,
                             int64_t *kept) {
  int r = dvm_tensor_rank(x);
  if (dvm_tensor_dtype(x) != DVM_STRING || dvm_tensor_dtype(stop) != DVM_STRING || r < 1 || r > 2 ||
      (r == 2 && dvm_tensor_dims(x)[0] != 1))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "string_normalizer: want X string [C] or [1, C] and stopwords string");
  int64_t c = dvm_tensor_numel(x), ns = dvm_tensor_numel(stop);
  dvm_status *st = NULL;
  *kept = 0;
  for (int64_t i = 0; i < c && !st; i++) {
    const char *s;
    size_t n;
    char *own;
    bool drop = false;
    if ((st = compared(x, i, sensitive, "element", &s, &n, &own))) break;
    for (int64_t j = 0; j < ns && !drop && !st; j++) {
      const char *w;
      size_t wn;
      char *wown;
      if (!(st = compared(stop, j, sensitive, "stopword", &w, &wn, &wown))) drop = wn == n && !memcmp(w, s, n);
      free(wown);
    }
    free(own);
    if (keep) keep[i] = !drop;
    *kept += !drop;
  }
  return st;
}

void dvm_split_start(dvm_split *it, const char *s, size_t n, const char *d, size_t dn, int64_t maxsplit) {
  *it = (dvm_split){n || dn == 0 ? s : NULL, s + n, d, dn, maxsplit};
  while (!dn && it->end > it->p && it->end[-1] == ' ') it->end--;
}

static bool space(char c) { return c == ' '; }

bool dvm_split_next(dvm_split *it, const char **s, size_t *n) {
  if (!it->dn) { /* runs of white space */
    while (it->p < it->end && space(*it->p)) it->p++;
    if (it->p == it->end) return false;
    const char *q = it->p;
    if (it->left != 0)
      while (q < it->end && !space(*q)) q++;
    else
      q = it->end; /* the rest (its trailing spaces dropped at the start) */
    *s = it->p;
    *n = (size_t)(q - it->p);
    it->p = q;
    if (it->left > 0) it->left--;
    return true;
  }
  if (!it->p) return false; /* the last piece was given */
  const char *q = NULL;
  for (const char *c = it->p; it->left != 0 && c + it->dn <= it->end && !q; c++)
    if (!memcmp(c, it->d, it->dn)) q = c;
  *s = it->p;
  *n = (size_t)((q ? q : it->end) - it->p);
  it->p = q ? q + it->dn : NULL;
  if (q && it->left > 0) it->left--;
  return true;
}

/* string_normalizer(X, stopwords; attrs: case_change, case_sensitive) */
static dvm_status *shapefn_string_normalizer(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("string_normalizer", nin, 4, 4, nout, 1);
  if (st) return st;
  if (in[0].kind != DVM_VAL_TENSOR || in[1].kind != DVM_VAL_TENSOR || in[3].kind != DVM_VAL_INT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "string_normalizer: want X, stopwords, case_change, case_sensitive");
  int64_t kept;
  if ((st = dvm_strnorm_keep(in[0].u.tensor, in[1].u.tensor, in[3].u.i != 0, NULL, &kept))) return st;
  int64_t d[2] = {1, kept ? kept : 1};
  int r = dvm_tensor_rank(in[0].u.tensor);
  dvm_shape_set(&out[0], r, d + 2 - r);
  return NULL;
}

/* string_split(X, delimiter [1]; attrs: maxsplit) -> Y [X..., most pieces], Z [X...] */
static dvm_status *shapefn_string_split(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("string_split", nin, 3, 3, nout, 2);
  if (st) return st;
  if (in[0].kind != DVM_VAL_TENSOR || in[1].kind != DVM_VAL_TENSOR || in[2].kind != DVM_VAL_INT ||
      dvm_tensor_dtype(in[0].u.tensor) != DVM_STRING || dvm_tensor_dtype(in[1].u.tensor) != DVM_STRING ||
      dvm_tensor_numel(in[1].u.tensor) != 1 || dvm_tensor_rank(in[0].u.tensor) >= DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "string_split: want X string of rank < %d, one delimiter, maxsplit",
                          DVM_MAX_RANK);
  const dvm_tensor *x = in[0].u.tensor;
  size_t dn;
  const char *d = dvm_tensor_string(in[1].u.tensor, 0, &dn);
  int64_t most = 0;
  for (int64_t i = 0; i < dvm_tensor_numel(x); i++) {
    size_t n;
    const char *s = dvm_tensor_string(x, i, &n), *piece;
    dvm_split it;
    dvm_split_start(&it, s, n, d, dn, in[2].u.i);
    int64_t k = 0;
    while (dvm_split_next(&it, &piece, &n)) k++;
    if (k > most) most = k;
  }
  int r = dvm_tensor_rank(x);
  int64_t dims[DVM_MAX_RANK];
  memcpy(dims, dvm_tensor_dims(x), sizeof(int64_t) * (size_t)r);
  dims[r] = most;
  dvm_shape_set(&out[0], r + 1, dims);
  dvm_shape_set(&out[1], r, dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_text_table[] = {
    {"tfidf", shapefn_tfidf},
    {"string_normalizer", shapefn_string_normalizer},
    {"string_split", shapefn_string_split},
    {NULL, NULL},
};
