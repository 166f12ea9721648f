/* Shapes of the text kernels (ops/cpu/text.c). */
#ifndef DVM_SHAPEFUNCS_TEXT_H
#define DVM_SHAPEFUNCS_TEXT_H

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

#endif
