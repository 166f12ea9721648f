/* The words of the ai.onnx.ml linear models and SVMs: how the compiler
 * (compiler/lower_ml_linear.c) writes a LinearClassifier, LinearRegressor,
 * SVMClassifier or SVMRegressor for the kernels "linear_model"
 * (ops/cpu/ml_linear.c) and "svm" (ops/cpu/ml_svm.c), as an i32 constant
 * tensor (their input 1). Floats are stored by their IEEE-754 bits; class
 * labels as int64, two words each (low, high).
 *
 * linear_model:  header LM_HEADER words (below), then
 *   coefficients [rows, features], intercepts [rows], labels [labels]
 *
 * svm:           header SVM_HEADER words (below), then
 *   gamma, coef0, degree (the kernel's parameters),
 *   vectors per class [classes]            (an SVC classifier only)
 *   support vectors [vectors, features]    (SVC mode only)
 *   coefficients: SVC classifier [classes - 1, vectors], SVC regressor
 *     [vectors], linear classifier [classes, features], linear regressor
 *     [features]
 *   rho: [classes (classes - 1) / 2] for an SVC classifier, else [1]
 *   prob_a, prob_b [classes (classes - 1) / 2] each (SVM_PROBA only)
 *   labels [classes] (a classifier) */
#ifndef DVM_OPS_CPU_ML_MODEL_H
#define DVM_OPS_CPU_ML_MODEL_H

#include "kernel.h"
#include "ops/kargs.h"
#include "shapefuncs/ml.h"

enum { LM_ROWS, LM_FEATURES, LM_POST, LM_LABELS, LM_HEADER };

enum { SVM_SVC, SVM_KERNEL, SVM_CLASSES, SVM_VECTORS, SVM_FEATURES, SVM_POST, SVM_FLAGS, SVM_HEADER };

/* kernel_type, as ONNX names them */
enum { SVM_LINEAR, SVM_POLY, SVM_RBF, SVM_SIGMOID };

/* SVM_FLAGS bits: probabilities from prob_a and prob_b; no coefficient is
 * negative; a one-class regressor (its result is +1 or -1) */
enum { SVM_PROBA = 1, SVM_POSITIVE = 2, SVM_ONE_CLASS = 4 };

/* Label i of the two-word labels at w. */
static inline int64_t ml_label(const int32_t *w, int64_t i) {
  return (int64_t)((uint64_t)(uint32_t)w[2 * i] | (uint64_t)(uint32_t)w[2 * i + 1] << 32);
}

/* The checks both kernels make of their call (X f32, the words, columns
 * and classifier; (labels i64,) scores f32): its rows, columns and form. */
static inline dvm_status *ml_scores_call(const dvm_kernel_args *a, const char *fn, int64_t *n, int64_t *cols, int *cls) {
  dvm_status *st = dvm_kargs_check_range(a, fn, 2, 2, 1, 2, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  if ((st = dvm_ml_scores_infer(fn, x->rank, x->dims, a->attrs, a->nattrs, n, cols, cls))) return st;
  if (x->dtype != DVM_F32 || a->nout != 1 + *cls || (*cls && a->out[0]->dtype != DVM_I64) || a->out[*cls]->dtype != DVM_F32)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: want X f32, the model's words i32 and (labels i64,) scores f32", fn);
  return NULL;
}

#endif
