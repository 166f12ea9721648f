/* Linear algebra on the last two dims:
 *
 *   det(in: X [..., M, M]) -> Y [...]     f32, f64 (shape function "det")
 *     ONNX Det: LU decomposition with partial pivoting, in double; a
 *     singular matrix gives 0, M = 0 gives 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/shape.h"

/* The determinant of the m x m matrix a (row-major; overwritten). */
static double det_of(double *a, int64_t m) {
  double det = 1;
  for (int64_t c = 0; c < m; c++) {
    int64_t p = c;
    for (int64_t r = c + 1; r < m; r++)
      if (fabs(a[r * m + c]) > fabs(a[p * m + c])) p = r;
    if (a[p * m + c] == 0) return 0;
    if (p != c) {
      for (int64_t k = 0; k < m; k++) {
        double t = a[c * m + k];
        a[c * m + k] = a[p * m + k];
        a[p * m + k] = t;
      }
      det = -det;
    }
    det *= a[c * m + c];
    for (int64_t r = c + 1; r < m; r++) {
      double f = a[r * m + c] / a[c * m + c];
      for (int64_t k = c; k < m; k++) a[r * m + k] -= f * a[c * m + k];
    }
  }
  return det;
}

static dvm_status *det(const dvm_kernel_args *a) {
  static const char op[] = "det";
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  char s1[DVM_SHAPE_STR_SIZE], s2[DVM_SHAPE_STR_SIZE], got[64];
  if ((x->dtype != DVM_F32 && x->dtype != DVM_F64) || y->dtype != x->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want X and Y both f32 or both f64", op,
                          dvm_kargs_dtypes(got, sizeof got, a));
  if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X %s must be [..., M, M]", op, dvm_shape_str(s1, x->rank, x->dims));
  if (y->rank != x->rank - 2 || memcmp(y->dims, x->dims, sizeof(int64_t) * (size_t)y->rank))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Y %s must be X's %s without the last two dims", op,
                          dvm_shape_str(s1, y->rank, y->dims), dvm_shape_str(s2, x->rank, x->dims));
  int64_t m = x->dims[x->rank - 1], mm = m * m, n = dvm_tensor_numel(y);
  double *buf = malloc(sizeof(double) * (size_t)(mm ? mm : 1));
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for a %lld x %lld matrix", op, (long long)m, (long long)m);
  bool f64 = x->dtype == DVM_F64;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t k = 0; k < mm; k++)
      buf[k] = f64 ? ((const double *)dvm_tensor_ptr(x))[i * mm + k] : ((const float *)dvm_tensor_ptr(x))[i * mm + k];
    double d = det_of(buf, m);
    if (f64) ((double *)dvm_tensor_ptr(y))[i] = d;
    else ((float *)dvm_tensor_ptr(y))[i] = (float)d;
  }
  free(buf);
  return NULL;
}

const dvm_kernel_def dvm_cpu_linalg_kernels[] = {
    {"det", DVM_DEVICE_CPU, det, "det", .dtypes = DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
