/* Shapes of the classical machine learning kernels (ops/cpu/ml.c). */
#ifndef DVM_SHAPEFUNCS_ML_H
#define DVM_SHAPEFUNCS_ML_H

#include "dvm/value.h"

/* The scoring kernels (tree_ensemble, linear_model, svm) of kernel `fn`:
 * X [N, F] (or [F], one row) and the attributes columns (>= 1) and
 * classifier (0 or 1) give the outputs' shapes: a classifier's labels [N]
 * and scores [N, columns], a regressor's scores [N, columns]. */
DVM_MUST_USE dvm_status *dvm_ml_scores_infer(const char *fn, int rank, const int64_t *dims, const dvm_value *attrs,
                                             int nattrs, int64_t *rows, int64_t *columns, int *classifier);

/* array_feature_extractor: X's shape and the number of indices (>= 1) give
 * Z's: X's, its last dim `count`; X [F] gives [1, count]. */
DVM_MUST_USE dvm_status *dvm_array_feature_extractor_infer(int xrank, const int64_t *xdims, int64_t count, int *rank,
                                                           int64_t *dims);

/* feature_vectorizer: input 0's shape and the attribute inputdimensions
 * (*k sizes, one per input: ninputs) give Y's, y = [N, sum of sizes]; N is
 * input 0's first dim ([F] is one row). */
DVM_MUST_USE dvm_status *dvm_feature_vectorizer_infer(int rank, const int64_t *dims, const dvm_value *attr, int ninputs,
                                                      int *k, const int64_t **sizes, int64_t *y);

#endif
