/* Shapes of the selecting ops, worked out once for the shape functions and
 * the kernels (see movement.h for the pattern). Those marked "reads" need
 * their input's data (host tensors): their output dims depend on it.
 *   gather_nd(data, indices[, batch_dims]) -> indices.dims[:-1] + data.dims[b+k:]
 *   onehot(indices, depth[, values][, axis]) -> indices' dims with depth
 *                                     inserted at axis        (reads depth)
 *   compress(x, condition[, axis]) -> x's dims with dims[axis] the count of
 *                                     true conditions, or [count]  (reads condition)
 *   unique(x[, sorted[, axis]]) -> y, indices, inverse_indices, counts
 *                                                              (reads x)
 *   nms(boxes, scores[, max_per_class[, iou[, score]]][, center_point_box])
 *                                  -> [selected, 3]            (reads all) */
#ifndef DVM_SHAPEFUNCS_SELECT_H
#define DVM_SHAPEFUNCS_SELECT_H

#include "dvm/value.h"

/* Element i of p, of dtype dt, as a double or (floats truncated) an int64. */
double dvm_elem_f64(const void *p, dvm_dtype dt, int64_t i);
int64_t dvm_elem_i64(const void *p, dvm_dtype dt, int64_t i);

/* Input i of shape function fn, called what, as a host tensor. */
DVM_MUST_USE dvm_status *dvm_host_tensor(const char *fn, const dvm_value *in, int i,
                                         const char *what, const dvm_tensor **t);

/* gather_nd(data, indices[, batch_dims:int]) (ONNX GatherND-13): indices'
 * last dim k indexes data's dims b..b+k-1, after b batch dims that data
 * and indices share. */
typedef struct dvm_gather_nd_info {
  int batch_dims, k;
  int rank;
  int64_t dims[DVM_MAX_RANK];
} dvm_gather_nd_info;
DVM_MUST_USE dvm_status *dvm_gather_nd_infer(const dvm_value *in, int nin, dvm_gather_nd_info *p);

/* onehot(indices, depth[, values][, axis:int]): depth a one-element host
 * tensor of any numeric dtype (floats truncated), >= 1; axis in
 * [-r-1, r] for indices of rank r (default -1). */
typedef struct dvm_onehot_info {
  int axis; /* normalized */
  int64_t depth;
  int rank;
  int64_t dims[DVM_MAX_RANK];
} dvm_onehot_info;
DVM_MUST_USE dvm_status *dvm_onehot_infer(const dvm_value *in, int nin, dvm_onehot_info *p);

/* compress(x, condition[, axis:int]): condition a 1-D bool host tensor no
 * longer than the compressed dim (x flattened without axis); entries it
 * does not reach count as false. */
typedef struct dvm_compress_info {
  int axis; /* -1: x flattened */
  int64_t count;
  int rank;
  int64_t dims[DVM_MAX_RANK];
} dvm_compress_info;
DVM_MUST_USE dvm_status *dvm_compress_infer(const dvm_value *in, int nin, dvm_compress_info *p);

/* unique(x[, sorted:int[, axis:int]]): the distinct elements of x (axis
 * absent: x flattened) or its distinct slices along axis. Groups are in
 * ascending order (sorted, the default; slices compared element by element)
 * or in order of first occurrence. The arrays are malloc'ed; free with
 * dvm_unique_free. */
typedef struct dvm_unique_info {
  int axis;          /* -1: flattened */
  int64_t n;         /* elements or slices of x */
  int64_t groups;    /* distinct ones */
  int64_t *first;    /* [groups]: where each first occurs */
  int64_t *count;    /* [groups] */
  int64_t *inverse;  /* [n]: the group of each */
  int rank;          /* y's shape */
  int64_t dims[DVM_MAX_RANK];
} dvm_unique_info;
DVM_MUST_USE dvm_status *dvm_unique_run(const dvm_value *in, int nin, dvm_unique_info *p);
void dvm_unique_free(dvm_unique_info *p);

/* nms(boxes [B, N, 4] f32, scores [B, C, N] f32[, max_output_boxes_per_class
 * i64[, iou_threshold f32[, score_threshold f32]]][, center_point_box:int])
 * as ONNX NonMaxSuppression-11 (and ONNX Runtime): per batch and class,
 * boxes by descending score (ties: lower index first) over the score
 * threshold, each kept unless its IoU with a kept one is over the IoU
 * threshold, at most max per class. `sel` is malloc'ed: [count, 3] of
 * (batch, class, box); free it. `nin` counts the tensors, then one int
 * attribute may follow. */
typedef struct dvm_nms_info {
  int64_t count;
  int64_t *sel;
} dvm_nms_info;
DVM_MUST_USE dvm_status *dvm_nms_run(const dvm_value *in, int nin, dvm_nms_info *p);

#endif
