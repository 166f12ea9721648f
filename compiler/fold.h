/* Graph rewrites on constants, run after import and before inference:
 * a BatchNormalization whose input is a Conv's output, read by nothing
 * else, with every weight and statistic constant, is folded into the
 * Conv's weights and bias (as ONNX Runtime and TensorRT do), so the CNN
 * runs one kernel per Conv instead of two passes. */
#ifndef DVMC_FOLD_H
#define DVMC_FOLD_H

#include "ir.h"

/* Rewrites g and its subgraphs; adds the number of folds to *folded. */
DVM_MUST_USE dvm_status *dvmc_fold(dvmc_ctx *c, dvmc_graph *g, int *folded);

#endif
