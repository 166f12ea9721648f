/* The tree ensemble's words: how the compiler (compiler/lower_ml.c) writes
 * an ai.onnx.ml TreeEnsembleClassifier or TreeEnsembleRegressor for the
 * kernel "tree_ensemble" (ops/cpu/ml.c), as an i32 constant tensor (its
 * input 1). Floats are stored by their IEEE-754 bits.
 *
 *   header   TE_HEADER words, indexed by the enum below
 *   roots    one per tree: the index of its first node
 *   nodes    TE_NODE_WORDS each: mode | missing_tracks_true << 8, feature,
 *            threshold, true node, false node (indices into nodes, of the
 *            same tree); a LEAF has its first weight and weight count in
 *            the two node words
 *   weights  two each: target (or class index), value
 *   bases    the base_values
 *   labels   classifiers: one int64 class label per class, as two words
 *            (low, high) */
#ifndef DVM_OPS_CPU_ML_TREE_H
#define DVM_OPS_CPU_ML_TREE_H

enum {
  TE_TREES,
  TE_NODES,
  TE_WEIGHTS,
  TE_TARGETS,  /* targets, or classes */
  TE_FEATURES, /* 1 + the largest feature index a node reads */
  TE_AGGREGATE,
  TE_POST,
  TE_FLAGS,
  TE_BASES,
  TE_HEADER
};

#define TE_NODE_WORDS 5

/* node modes, as ONNX names them */
enum { TE_LEQ, TE_LT, TE_GTE, TE_GT, TE_EQ, TE_NEQ, TE_LEAF };
enum { TE_SUM, TE_AVERAGE, TE_MIN, TE_MAX };
/* TE_POST: a post transform of ml_post.h (ML_NONE ... ML_PROBIT) */
/* TE_FLAGS bits: a classifier; its weights name one class only (ONNX
 * Runtime's binary case); none of its weights is negative */
enum { TE_CLASSIFIER = 1, TE_ONE_CLASS = 2, TE_POSITIVE = 4 };

#endif
