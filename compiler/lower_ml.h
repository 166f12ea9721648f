/* What the ai.onnx.ml lowerings share (lower_ml.c: the trees and these
 * helpers; lower_ml_linear.c: linear models, SVMs, Scaler, Imputer). */
#ifndef DVMC_LOWER_ML_H
#define DVMC_LOWER_ML_H

#include "lowering.h"

/* The ints of attribute `name` (*count of them; NULL and 0 when absent). */
DVM_MUST_USE dvm_status *lw_ml_ints(const dvmc_node *n, const char *name, const int64_t **out, int *count);
/* The floats of attribute `name` or of `name`_as_tensor (f32 or f64),
 * copied as doubles into the arena (NULL and 0 when absent). */
DVM_MUST_USE dvm_status *lw_ml_floats(lowering *L, const dvmc_node *n, const char *name, double **out, int *count);
/* A classifier's class labels: the ints of attribute `name`, or, where it
 * has classlabels_strings, their indices 0..n-1 (the call labels rows by
 * index, and lw_ml_call gathers the strings by it). */
DVM_MUST_USE dvm_status *lw_ml_labels(lowering *L, const dvmc_node *n, const char *name, const int64_t **out,
                                      int *count);
/* The index of s in the NULL-ended names, or -1. */
int lw_ml_name(const char *s, const char *const *names);
/* A register holding an i32, i64 or f32 constant [count] of n's, named
 * "<node>.<what>" (data in the arena), or -1 out of memory. */
int lw_ml_const(lowering *L, const dvmc_node *n, const char *what, dvm_dtype dt, void *data, size_t count);
/* The call of r's kernel on n's input 0 and the model's words (an i32
 * constant of nw words, in the arena), with the attributes columns and
 * classifier (the kernels' ml_scores shape function). */
DVM_MUST_USE dvm_status *lw_ml_call(lowering *L, const dvmc_node *n, const op_rule *r, int32_t *words, size_t nw,
                                    int64_t columns, int cls);

#endif
