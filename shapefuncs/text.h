/* Shapes of the text kernels (ops/cpu/text.c). */
#ifndef DVM_SHAPEFUNCS_TEXT_H
#define DVM_SHAPEFUNCS_TEXT_H

#include <stdbool.h>

#include "dvm/value.h"

/* TfIdfVectorizer's attributes, as the kernel "tfidf" takes them. */
typedef struct dvm_tfidf_info {
  int64_t mode; /* 0 TF, 1 IDF, 2 TFIDF */
  int64_t min_gram, max_gram, max_skip;
  int64_t size; /* output columns */
  int rank;     /* of the output: 1, or 2 for a batch of rows */
  int64_t dims[2];
} dvm_tfidf_info;

/* Checks x's shape (rank 0 or 1: one row; 2: [B, C], B rows) and the attrs
 * mode, min_gram, max_gram, max_skip, size (ints: mode 0..2,
 * 1 <= min_gram <= max_gram, max_skip >= 0, size >= 1) and gives the
 * output shape, [size] or [B, size]. */
DVM_MUST_USE dvm_status *dvm_tfidf_infer(int rank, const int64_t *dims, const dvm_value *attrs, int nattrs,
                                         dvm_tfidf_info *p);

/* ---- the string ops whose output shapes depend on the text ---- */

/* StringNormalizer's kept words: the elements of x (a string tensor [C] or
 * [1, C]) not among stop's, compared as they are (sensitive) or in lower
 * case; keep[i] set for each (keep may be NULL), *kept their count. Its
 * output is [max(kept, 1)] or [1, max(kept, 1)] (one "" when none is kept,
 * as ONNX Runtime gives). Text folded for comparison must be UTF-8. */
DVM_MUST_USE dvm_status *dvm_strnorm_keep(const dvm_tensor *x, const dvm_tensor *stop, bool sensitive, uint8_t *keep,
                                          int64_t *kept);

/* s (n bytes of UTF-8) in lower (upper 0) or upper case, malloc'ed into
 * *out (*outn bytes); an error naming `what` where s is not UTF-8. */
DVM_MUST_USE dvm_status *dvm_text_case(const char *s, size_t n, int upper, const char *what, char **out, size_t *outn);

/* StringSplit's pieces of one string, as ONNX Runtime cuts them: with a
 * delimiter (dn > 0), the pieces between its occurrences (none of ""),
 * as Python's str.split(d, maxsplit); without, runs of spaces (' ' only)
 * separate, and the string's own leading and trailing spaces are dropped,
 * the last piece's too. left: the splits still allowed (-1: any). */
typedef struct dvm_split {
  const char *p, *end, *d;
  size_t dn;
  int64_t left;
} dvm_split;
void dvm_split_start(dvm_split *it, const char *s, size_t n, const char *d, size_t dn, int64_t maxsplit);
/* The next piece into *s, *n; false when there is none. */
bool dvm_split_next(dvm_split *it, const char **s, size_t *n);

#endif
