/* Shapes of the data-movement ops with ONNX semantics: the views (reshape,
 * squeeze, unsqueeze, flatten) and the copies (transpose, gather, slice,
 * concat, split, expand, tile, pad, trilu).
 *
 * Each op's shape is worked out once, by a dvm_<op>_infer function that
 * takes the shape function's inputs (the kernel's inputs, then its
 * attributes) and also returns what the kernel needs besides the shape
 * (normalized axes, slice starts and steps, pads). The shape functions are
 * these plus the output values; the kernels call the same functions on their
 * tensors, so the two cannot disagree.
 *
 * Data inputs may be tensors or shape values (the compiler infers shapes
 * without data); inputs that hold numbers (slice starts, pads, a reshape
 * target) are i64 or i32 host tensors, or shape values where no number is
 * negative. */
#ifndef DVM_SHAPEFUNCS_MOVEMENT_H
#define DVM_SHAPEFUNCS_MOVEMENT_H

#include "dvm/value.h"

/* Input i of shape function fn, called `what` in messages, as a list of at
 * most max ints into out[0..*n): the dims of a shape value, or the elements
 * of an i64 or i32 host tensor of rank 0 or 1. */
DVM_MUST_USE dvm_status *dvm_movement_ints(const char *fn, const dvm_value *in, int i,
                                           const char *what, int max, int64_t *out, int *n);

/* Input i of fn, called `what`, as an int value. */
DVM_MUST_USE dvm_status *dvm_movement_int(const char *fn, const dvm_value *in, int i,
                                          const char *what, int64_t *out);

/* axis in [-rank, rank) as an index in [0, rank); fails with
 * "gather: axis 3 is out of range for rank 2". */
DVM_MUST_USE dvm_status *dvm_movement_axis(const char *fn, int64_t axis, int rank, int *out);

/* transpose(x[, perm:shape]): perm defaults to reversing the dims. */
typedef struct dvm_transpose_info {
  int rank;
  int perm[DVM_MAX_RANK];    /* output dim i is input dim perm[i] */
  int64_t dims[DVM_MAX_RANK]; /* the output shape */
} dvm_transpose_info;
DVM_MUST_USE dvm_status *dvm_transpose_infer(const dvm_value *in, int nin, dvm_transpose_info *p);

/* gather(data, indices[, axis:int]) and gather_elements(data, indices[,
 * axis:int]); axis defaults to 0. Gather gives data.dims[:axis] +
 * indices.dims + data.dims[axis+1:]; gather_elements gives the indices'
 * shape, which must have data's rank and no dim over data's, except at
 * axis. */
typedef struct dvm_gather_info {
  int axis; /* normalized */
  int rank;
  int64_t dims[DVM_MAX_RANK];
} dvm_gather_info;
DVM_MUST_USE dvm_status *dvm_gather_infer(const dvm_value *in, int nin, dvm_gather_info *p);
DVM_MUST_USE dvm_status *dvm_gather_elements_infer(const dvm_value *in, int nin,
                                                   dvm_gather_info *p);

/* slice(data, starts, ends[, axes[, steps]]) (ONNX Slice-13): negative
 * starts and ends count from the end and are clamped; steps may be
 * negative, never 0; axes default to 0..n-1, steps to 1. */
typedef struct dvm_slice_info {
  int rank;
  int64_t start[DVM_MAX_RANK]; /* the first element taken, per data dim */
  int64_t step[DVM_MAX_RANK];
  int64_t dims[DVM_MAX_RANK];  /* elements taken per dim: the output shape */
} dvm_slice_info;
DVM_MUST_USE dvm_status *dvm_slice_infer(const dvm_value *in, int nin, dvm_slice_info *p);

/* concat(x0, ..., xn, axis:int): one or more inputs of one rank >= 1,
 * equal in every dim but axis. */
typedef struct dvm_concat_info {
  int axis;
  int rank;
  int64_t dims[DVM_MAX_RANK];
} dvm_concat_info;
DVM_MUST_USE dvm_status *dvm_concat_infer(const dvm_value *in, int nin, dvm_concat_info *p);

/* split(x[, split][, axis:int[, num_outputs:int]]) into nout outputs along
 * axis (default 0): sizes from the `split` tensor (nout of them, summing to
 * the dim), else ceil(dim / nout) each with a smaller or empty tail (ONNX
 * Split-18); num_outputs, when given, must be nout. Writes the sizes. */
DVM_MUST_USE dvm_status *dvm_split_infer(const dvm_value *in, int nin, int nout, int *axis,
                                         int64_t *sizes);

/* expand(x, shape): the broadcast of x's shape with `shape` (either may
 * stretch a dim of 1). tile(x, repeats): dim i times repeats[i]. */
DVM_MUST_USE dvm_status *dvm_expand_infer(const dvm_value *in, int nin, int *rank, int64_t *dims);
DVM_MUST_USE dvm_status *dvm_tile_infer(const dvm_value *in, int nin, int *rank, int64_t *dims);

/* pad(data, pads[, value[, axes]][, mode:int]): pads holds the begin pads
 * of each axis (default: all dims) then the end pads; negative pads crop
 * first. A reflect, edge or wrap pad needs a non-empty dim to copy from. */
enum { DVM_PAD_CONSTANT, DVM_PAD_REFLECT, DVM_PAD_EDGE, DVM_PAD_WRAP, DVM_PAD_MODES };
typedef struct dvm_pad_info {
  int rank, mode;
  int64_t before[DVM_MAX_RANK], after[DVM_MAX_RANK]; /* per data dim */
  int64_t dims[DVM_MAX_RANK];
} dvm_pad_info;
DVM_MUST_USE dvm_status *dvm_pad_infer(const dvm_value *in, int nin, dvm_pad_info *p);

/* center_crop_pad(x, shape, axes): ONNX CenterCropPad as a pad (negative
 * pads crop) to shape[i] on axes[i] (axes empty: every dim), centred: a
 * crop starts at floor((d - s) / 2), a pad puts floor((s - d) / 2) first. */
DVM_MUST_USE dvm_status *dvm_center_crop_pad_infer(const dvm_value *in, int nin, dvm_pad_info *p);

/* depth_to_space / space_to_depth(x, blocksize:int, mode:int): x of rank 4;
 * mode 0 DCR, 1 CRD. The space side is [n, c, h * b, w * b], the depth
 * side [n, c * b * b, h, w]; dims is the output's shape. */
typedef struct dvm_depth_space {
  int64_t block, n, c, h, w;
  int crd;
  int64_t dims[4];
} dvm_depth_space;
DVM_MUST_USE dvm_status *dvm_depth_space_infer(const dvm_value *in, int nin, bool to_space,
                                               dvm_depth_space *p);

/* trilu(x[, k][, upper:int]): x of rank >= 2; k a one-element i64 or i32
 * tensor (default 0), upper 1 (default) or 0. The output has x's shape. */
typedef struct dvm_trilu_info {
  int upper;
  int64_t k;
} dvm_trilu_info;
DVM_MUST_USE dvm_status *dvm_trilu_infer(const dvm_value *in, int nin, dvm_trilu_info *p);

#endif
