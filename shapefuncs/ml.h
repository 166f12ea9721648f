/* Shapes of the classical machine learning kernels (ops/cpu/ml.c). */
#ifndef DVM_SHAPEFUNCS_ML_H
#define DVM_SHAPEFUNCS_ML_H

#include "dvm/value.h"

/* tree_ensemble: X [N, F] (or [F], one row) and the attributes targets
 * (>= 1) and classifier (0 or 1) give the outputs' shapes: a classifier's
 * labels [N] and scores [N, targets] (*nout 2), a regressor's scores
 * [N, targets] (*nout 1). */
DVM_MUST_USE dvm_status *dvm_tree_ensemble_infer(int rank, const int64_t *dims, const dvm_value *attrs, int nattrs,
                                                 int64_t *rows, int64_t *targets, int *classifier);

#endif
