/* Shape functions of the quantized ops, over the kernels' inputs
 * (ops/cpu/quant.c): they take the shapes of MatMul and Conv from the
 * operands the zero points and scales sit between.
 *
 *   "dynamic_quantize_linear" (x) -> x's shape, [], []
 *   "matmul_integer" (a, b, up to 5 more) -> matmul(a, b)
 *   "qlinear_matmul" (a, a_scale, a_zp, b, ...) -> matmul(a, b)
 *   "conv_integer" (x, w[, x_zp[, w_zp]], 4 conv attrs) -> conv(x, w)
 *   "qlinear_conv" (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B],
 *       4 conv attrs) -> conv(x, w)
 *   "matmul_nbits" (a [.., K], b, scales, ..., present, K, N, bits,
 *       block_size, accuracy_level, weight_prepacked) -> [.., N]
 *   "gather_block_quantized" (data [R, .., Kq], indices, scales[, zp],
 *       gather_axis, quantize_axis, block_size, bits)
 *       -> [indices.., .., Kq * 8 / bits] (ops/cpu/nbits.c) */
#include <string.h>

#include "kernel.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/matmul.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/window.h"

static dvm_status *shapefn_dynamic_quantize(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  const int64_t *x;
  dvm_status *st = dvm_shape_check_counts("dynamic_quantize_linear", nin, 1, 1, nout, 3);
  if (!st) st = dvm_shape_arg("dynamic_quantize_linear", &in[0], 0, &r, &x);
  if (st) return st;
  dvm_shape_set(&out[0], r, x);
  dvm_shape_set(&out[1], 0, NULL);
  dvm_shape_set(&out[2], 0, NULL);
  return NULL;
}

/* matmul(in[ia], in[ib]) */
static dvm_status *product(const char *fn, const dvm_value *in, int ia, int ib, dvm_value *out) {
  int ra, rb, r;
  const int64_t *a, *b;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_arg(fn, &in[ia], ia, &ra, &a);
  if (!st) st = dvm_shape_arg(fn, &in[ib], ib, &rb, &b);
  if (!st) st = dvm_matmul_shape(ra, a, rb, b, &r, dims);
  if (!st) dvm_shape_set(&out[0], r, dims);
  return st;
}

static dvm_status *shapefn_matmul_integer(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("matmul_integer", nin, 2, 7, nout, 1);
  return st ? st : product("matmul_integer", in, 0, 1, out);
}

static dvm_status *shapefn_qlinear_matmul(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("qlinear_matmul", nin, 8, 8, nout, 1);
  return st ? st : product("qlinear_matmul", in, 0, 3, out);
}

/* conv(in[0], in[iw]) with the last four values as its attributes. */
static dvm_status *conv(const char *fn, const dvm_value *in, int nin, int iw, dvm_value *out) {
  int rx, rw;
  const int64_t *x, *w;
  int64_t dims[DVM_MAX_RANK], group;
  dvm_window win;
  dvm_status *st = dvm_shape_arg(fn, &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg(fn, &in[iw], iw, &rw, &w);
  if (!st) st = dvm_conv_setup(false, rx, x, rw, w, -1, NULL, in + nin - 4, 4, &win, &group, dims);
  if (!st) dvm_shape_set(&out[0], rx, dims);
  return st;
}

static dvm_status *shapefn_conv_integer(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("conv_integer", nin, 6, 8, nout, 1);
  return st ? st : conv("conv_integer", in, nin, 1, out);
}

static dvm_status *shapefn_qlinear_conv(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("qlinear_conv", nin, 12, 13, nout, 1);
  return st ? st : conv("qlinear_conv", in, nin, 3, out);
}

static dvm_status *shapefn_matmul_nbits(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "matmul_nbits";
  int r;
  const int64_t *a;
  int64_t n, dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 10, 13, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &a);
  if (!st) st = dvm_attr_int(fn, "N", &in[nin - 5], &n);
  if (st) return st;
  if (r < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: A must have rank 1 or more", fn);
  memcpy(dims, a, sizeof(int64_t) * (size_t)r);
  dims[r - 1] = n;
  dvm_shape_set(&out[0], r, dims);
  return NULL;
}

static dvm_status *shapefn_gather_block_quantized(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "gather_block_quantized";
  int rd, ri;
  const int64_t *d, *i;
  int64_t bits, dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts(fn, nin, 7, 8, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rd, &d);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &ri, &i);
  if (!st) st = dvm_attr_int(fn, "bits", &in[nin - 1], &bits);
  if (st) return st;
  if (bits != 4 && bits != 8)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s: bits %lld is not supported (4 and 8 are)", fn, (long long)bits);
  if (rd < 2 || ri + rd - 1 > DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: data of rank %d and indices of rank %d: want data of "
                          "rank 2 or more and an output of rank at most %d", fn, rd, ri, DVM_MAX_RANK);
  memcpy(dims, i, sizeof(int64_t) * (size_t)ri);
  memcpy(dims + ri, d + 1, sizeof(int64_t) * (size_t)(rd - 1));
  dims[ri + rd - 2] *= 8 / bits;
  dvm_shape_set(&out[0], ri + rd - 1, dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_quant_table[] = {
    {"dynamic_quantize_linear", shapefn_dynamic_quantize},
    {"matmul_integer", shapefn_matmul_integer},
    {"qlinear_matmul", shapefn_qlinear_matmul},
    {"conv_integer", shapefn_conv_integer},
    {"qlinear_conv", shapefn_qlinear_conv},
    {"matmul_nbits", shapefn_matmul_nbits},
    {"gather_block_quantized", shapefn_gather_block_quantized},
    {NULL, NULL},
};
