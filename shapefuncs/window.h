/* Sliding windows: the geometry of conv, conv_transpose and pooling, and the
 * output sizes and coordinate rules of resize. The shape functions "conv",
 * "conv_transpose", "pool", "global_pool" and "resize" are built on these
 * helpers, the kernels read their attributes and check their outputs with
 * them, and the compiler resolves ONNX auto_pad and ConvTranspose
 * output_shape into explicit pads with them.
 *
 * Attribute lists, as the kernels and shape functions take them (after the
 * tensor inputs); a shape attribute may be empty for its ONNX default:
 *   conv:           strides, pads, dilations, group:int
 *   conv_transpose: strides, pads, dilations, group:int, output_padding
 *   pool:           kernel_shape, strides, pads, dilations, ceil_mode:int
 *                   [, one more int the kernel reads]
 *   resize:         sizes, mode:int, coordinate_transformation_mode:int,
 *                   nearest_mode:int [, cubic_coeff_a:float,
 *                   exclude_outside:int, antialias:int [, scale:float for
 *                   each dim of X [, roi_start:float for each dim,
 *                   roi_end:float for each dim, extrapolation_value:float]]]
 *                   (the roi and extrapolation_value with
 *                   tf_crop_and_resize, and only with it)
 * pads hold all begins then all ends: [x1_begin, x2_begin, x1_end, x2_end].
 *
 * The shape functions take the kernel's inputs then these attributes:
 *   "conv", "conv_transpose": X, W [, B] (B is there when the count says so)
 *   "pool": X; one output, or two alike (max_pool's values and indices)
 *   "global_pool": X alone; "resize": X. */
#ifndef DVM_SHAPEFUNCS_WINDOW_H
#define DVM_SHAPEFUNCS_WINDOW_H

#include <stdbool.h>

#include "dvm/value.h"

/* Spatial dims a window may have: 1-D (N,C,L), 2-D (N,C,H,W), 3-D. */
#define DVM_WINDOW_MAX 3

typedef struct dvm_window {
  int n; /* spatial dims */
  int64_t kernel[DVM_WINDOW_MAX];
  int64_t stride[DVM_WINDOW_MAX];
  int64_t dilation[DVM_WINDOW_MAX];
  int64_t pad_begin[DVM_WINDOW_MAX];
  int64_t pad_end[DVM_WINDOW_MAX];
  int64_t out_pad[DVM_WINDOW_MAX]; /* conv_transpose output_padding; 0 otherwise */
  bool ceil_mode;                  /* pooling */
} dvm_window;

/* ONNX auto_pad. */
typedef enum dvm_auto_pad {
  DVM_AUTO_PAD_NOTSET,     /* explicit pads */
  DVM_AUTO_PAD_SAME_UPPER, /* output ceil(in / stride); an odd total pads the end more */
  DVM_AUTO_PAD_SAME_LOWER, /* the same; an odd total pads the begin more */
  DVM_AUTO_PAD_VALID,      /* no padding */
} dvm_auto_pad;

/* The pads of one spatial dim of Conv, MaxPool or AveragePool under auto_pad
 * (ONNX: total = max(0, (ceil(in / stride) - 1) * stride + (kernel - 1) *
 * dilation + 1 - in)). NOTSET and VALID give 0, 0. All arguments >= 1 but in
 * (>= 0). */
void dvm_window_auto_pads(dvm_auto_pad mode, int64_t in, int64_t kernel, int64_t stride,
                          int64_t dilation, int64_t *pad_begin, int64_t *pad_end);

/* The pads of one spatial dim of ConvTranspose that give `out` output
 * elements (its output_shape attribute), or in * stride when out < 0
 * (auto_pad SAME_*; ONNX Runtime's min(in * stride, the size without pads)
 * where the window covers less than a stride), as the ONNX spec and
 * reference say: total = stride *
 * (in - 1) + out_pad + (kernel - 1) * dilation + 1 - out; SAME_UPPER puts
 * floor(total / 2) at the begin, any other mode (NOTSET with output_shape,
 * SAME_LOWER) at the end. A negative end pad (an output larger than the
 * window reaches) is added to *out_pad instead, as pads are >= 0: those
 * elements hold the bias alone. Fails when the begin pad would be negative
 * (dvm has no way to shift the output). */
DVM_MUST_USE dvm_status *dvm_window_transpose_pads(dvm_auto_pad mode, int64_t in, int64_t kernel,
                                                   int64_t stride, int64_t dilation,
                                                   int64_t *out_pad, int64_t out,
                                                   int64_t *pad_begin, int64_t *pad_end);

/* fused_conv's attributes after conv's four: activation, its two
 * parameters, post_scale, post_shift, layout, algo (ops/cpu/conv.c). */
#define DVM_CONV_EPILOGUE_ATTRS 7

/* fused_conv's activations (its "activation" attribute). */
enum {
  DVM_CONV_IDENTITY, DVM_CONV_RELU, DVM_CONV_TANH, DVM_CONV_SIGMOID, DVM_CONV_LEAKY_RELU, DVM_CONV_CLIP,
  DVM_CONV_HARD_SIGMOID, DVM_CONV_HARD_SWISH, DVM_CONV_SWISH, DVM_CONV_ACTS
};

/* fused_conv's epilogue: y = post_scale act(y) + post_shift, act with
 * alpha and beta; layout's bits say which of X, Y and Z are channels
 * last; algo 1 asks for Winograd. */
typedef struct dvm_conv_epilogue {
  int64_t act, layout, algo;
  double alpha, beta, post_scale, post_shift;
} dvm_conv_epilogue;

/* The epilogue attrs[4, 4 + DVM_CONV_EPILOGUE_ATTRS) of a fused_conv call
 * (nattrs counts conv's four too; with those alone, the identity),
 * checked, alpha's and beta's NaN defaults resolved (leaky relu's slope
 * 0.01, clip unbounded, hard sigmoid 0.2 y + 0.5). */
DVM_MUST_USE dvm_status *dvm_conv_epilogue_attrs(const char *op, const dvm_value *attrs, int nattrs,
                                                 dvm_conv_epilogue *out);

/* conv (transpose false) or conv_transpose: X [N, C, spatial...], W (conv
 * [M, C/group, k...], conv_transpose [C, M/group, k...]), B [M] or none
 * (rb < 0); attrs as listed above. Checks them all, fills *win (kernel from
 * W) and *group, and sets out[0..rx) to Y's dims. */
DVM_MUST_USE dvm_status *dvm_conv_setup(bool transpose, int rx, const int64_t *x, int rw,
                                        const int64_t *w, int rb, const int64_t *b,
                                        const dvm_value *attrs, int nattrs, dvm_window *win,
                                        int64_t *group, int64_t *out);

/* max_pool / average_pool (named by op): X [N, C, spatial...]; attrs as
 * listed above, where a sixth one must be an int (the kernel checks its
 * value). Fills *win and sets out[0..rx). ceil_mode follows ONNX: the last
 * window must start inside the input or the begin padding. */
DVM_MUST_USE dvm_status *dvm_pool_setup(const char *op, int rx, const int64_t *x,
                                        const dvm_value *attrs, int nattrs, dvm_window *win,
                                        int64_t *out);

/* col2im: input [N, C * prod(block), L], the image's n spatial dims and the
 * block's, attrs dilations, pads, strides (shapes; empty for the
 * defaults). L must be the count of block positions. Fills *win (kernel:
 * the block) and sets out[0..2 + n) to [N, C, image...]. */
DVM_MUST_USE dvm_status *dvm_col2im_setup(int rx, const int64_t *x, int n, const int64_t *image, int nb,
                                          const int64_t *block, const dvm_value *attrs, int nattrs,
                                          dvm_window *win, int64_t *out);

/* max_unpool: X [N, C, spatial...], attrs kernel_shape, pads, strides; the
 * output is [N, C, (in - 1) * stride + kernel - pads...], or output_shape
 * (nshape >= 0 values) when given, which may only be larger. */
DVM_MUST_USE dvm_status *dvm_max_unpool_setup(int rx, const int64_t *x, const dvm_value *attrs, int nattrs,
                                              int nshape, const int64_t *shape, dvm_window *win, int64_t *out);

/* Global pools: X [N, C, spatial...] -> [N, C, 1, ...]. */
DVM_MUST_USE dvm_status *dvm_global_pool_setup(const char *op, int rx, const int64_t *x,
                                               int64_t *out);

typedef enum dvm_resize_mode {
  DVM_RESIZE_NEAREST,
  DVM_RESIZE_LINEAR,
  DVM_RESIZE_CUBIC,
  DVM_RESIZE_MODE_COUNT
} dvm_resize_mode;

/* ONNX coordinate_transformation_mode. */
typedef enum dvm_resize_coord {
  DVM_RESIZE_HALF_PIXEL,
  DVM_RESIZE_ASYMMETRIC,
  DVM_RESIZE_ALIGN_CORNERS,
  DVM_RESIZE_PYTORCH_HALF_PIXEL,
  DVM_RESIZE_TF_HALF_PIXEL_FOR_NEAREST,
  DVM_RESIZE_HALF_PIXEL_SYMMETRIC,
  DVM_RESIZE_TF_CROP_AND_RESIZE, /* roi start + o (end - start) (in - 1) / (out - 1) */
  DVM_RESIZE_COORD_COUNT
} dvm_resize_coord;

/* ONNX nearest_mode. */
typedef enum dvm_resize_nearest {
  DVM_RESIZE_ROUND_PREFER_FLOOR,
  DVM_RESIZE_ROUND_PREFER_CEIL,
  DVM_RESIZE_FLOOR,
  DVM_RESIZE_CEIL,
  DVM_RESIZE_NEAREST_COUNT
} dvm_resize_nearest;

typedef struct dvm_resize {
  dvm_resize_mode mode;
  dvm_resize_coord coord;
  dvm_resize_nearest nearest;
  double cubic_a;       /* cubic_coeff_a, -0.75 by default */
  bool exclude_outside; /* cubic: drop taps outside the input, renormalize */
  bool antialias;       /* linear/cubic: widen the filter when downscaling */
  /* Per dim, out / in as the coordinate transform uses it: the model's
   * scale when given, else sizes[d] / in[d]. */
  double scale[DVM_MAX_RANK];
  /* Per dim, the output length as a real number: sizes[d], or in[d] *
   * scale[d] when the model gave scales (what ONNX's align_corners,
   * pytorch_half_pixel and half_pixel_symmetric divide by, as its reference
   * and test data have it). */
  double length[DVM_MAX_RANK];
  /* tf_crop_and_resize: the region of X per dim, as fractions of in - 1,
   * and the value of outputs whose coordinate falls outside X. */
  double roi_start[DVM_MAX_RANK], roi_end[DVM_MAX_RANK];
  double extrapolation;
} dvm_resize;

/* resize: X and the attrs listed above. Checks them, fills *r and sets
 * out[0..rx) to sizes. */
DVM_MUST_USE dvm_status *dvm_resize_setup(int rx, const int64_t *x, const dvm_value *attrs,
                                          int nattrs, dvm_resize *r, int64_t *out);

/* ONNX Resize's output size from a scale: floor(in * scale), for the
 * compiler when the model gives scales instead of sizes. */
int64_t dvm_resize_scaled_size(int64_t in, double scale);

/* The input coordinate (a real number) that output index `o` maps to along
 * dim d of `in` -> `out` elements (scale, length and roi from r). */
double dvm_resize_coord_in(const dvm_resize *r, int d, int64_t o, int64_t in, int64_t out);

/* GridSample: X [N, C, D_1..D_r] read at the points of grid [N, O_1..O_r, r]
 * (r = 1 to DVM_WINDOW_MAX; a point lists its coordinates innermost dim
 * first, x then y then z, each normalized to [-1, 1]) -> Y [N, C, O_1..O_r].
 *   grid_sample(in: X, grid; attrs: mode:int, padding_mode:int,
 *               align_corners:int) -> Y
 *   mode: ONNX's names at opset 16 then 20: 0 bilinear, 1 nearest,
 *     2 bicubic, 3 linear (= bilinear), 4 cubic (= bicubic).
 *   padding_mode: 0 zeros, 1 border, 2 reflection. */
typedef enum dvm_grid_mode { DVM_GRID_LINEAR, DVM_GRID_NEAREST, DVM_GRID_CUBIC } dvm_grid_mode;
typedef enum dvm_grid_padding {
  DVM_GRID_ZEROS,
  DVM_GRID_BORDER,
  DVM_GRID_REFLECTION,
  DVM_GRID_PADDING_COUNT
} dvm_grid_padding;

typedef struct dvm_grid_sample {
  dvm_grid_mode mode;
  dvm_grid_padding padding;
  bool align_corners;
} dvm_grid_sample;

/* grid_sample: X, grid and the attrs above. Checks them, fills *gs and sets
 * out[0..rx) to Y's dims. */
DVM_MUST_USE dvm_status *dvm_grid_sample_setup(int rx, const int64_t *x, int rg, const int64_t *g,
                                               const dvm_value *attrs, int nattrs,
                                               dvm_grid_sample *gs, int64_t *out);

/* AffineGrid: theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D) and the output
 * size [N, C, H, W] or [N, C, D, H, W] (size's values) -> grid
 * [N, H, W, 2] or [N, D, H, W, 3].
 *   affine_grid(in: theta, size (i64, on the host); attrs: align_corners:int) -> grid
 * Checks them and sets out[0..*rank) to the grid's dims. */
DVM_MUST_USE dvm_status *dvm_affine_grid_setup(int rt, const int64_t *theta, int64_t nsize,
                                               const int64_t *size, int *rank, int64_t *out);

/* DeformConv: X [N, C, H, W], W [M, C/group, kH, kW], offset [N,
 * offset_group * 2 * kH * kW, oH, oW] (per tap a row then a column shift),
 * then B [M] and mask [N, offset_group * kH * kW, oH, oW] when present.
 *   deform_conv(in: X, W, offset [, B] [, mask]; attrs: strides, pads,
 *               dilations, group:int, offset_group:int, present:int) -> Y
 * present: bit 0 B is among the inputs, bit 1 mask (in that order). Checks
 * them and sets out[0..4) to Y's dims [N, M, oH, oW] (conv's). The inputs'
 * shapes: x, w, off, then b and mask (rank -1 when absent). */
DVM_MUST_USE dvm_status *dvm_deform_conv_setup(int rx, const int64_t *x, int rw, const int64_t *w,
                                               int roff, const int64_t *off, int rb,
                                               const int64_t *b, int rm, const int64_t *mask,
                                               const dvm_value *attrs, int nattrs,
                                               dvm_window *win, int64_t *group,
                                               int64_t *offset_group, int64_t *out);

#endif
