/* Graph rewrites on constants, run after import and before inference:
 * a BatchNormalization or an Add of a per-channel constant whose input is
 * a Conv's or ConvTranspose's output, read by nothing else, with every
 * weight and statistic constant, is folded into the conv's weights and
 * bias (as ONNX Runtime and TensorRT do for BatchNormalization), so the
 * CNN runs one kernel per conv instead of more passes. */
#ifndef DVMC_FOLD_H
#define DVMC_FOLD_H

#include "ir.h"

/* Rewrites g and its subgraphs; adds the number of folds to *folded. */
DVM_MUST_USE dvm_status *dvmc_fold(dvmc_ctx *c, dvmc_graph *g, int *folded);

/* For rewrites that make constants (here and pass_conv_act.c): a new
 * constant value named after `base` (unique in g) holding t; an f32
 * tensor of the given dims in the arena, its data left to the caller.
 * NULL when out of memory. */
dvmc_value *dvmc_fold_const(dvmc_ctx *c, dvmc_graph *g, const char *base, const char *what, const dvmc_tensor *t);
dvmc_tensor *dvmc_fold_f32(dvmc_ctx *c, int rank, const int64_t *dims, size_t count);

#endif
