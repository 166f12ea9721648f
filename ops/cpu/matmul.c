/* MatMul with ONNX semantics (see shapefuncs/matmul.h), f32, through
 * oneDNN's row-major dnnl_sgemm: one call per batch matrix, or one call in
 * all when the right operand has no batch of its own and the left one is a
 * dense stack of matrices (the [batch, seq, k] x [k, n] of linear layers),
 * which then reads as a single [batch * seq, k] matrix. */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/matmul.h"
#include "shapefuncs/shape.h"

static dvm_status *check(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "matmul", 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  if (x->dtype != DVM_F32 || y->dtype != DVM_F32 || o->dtype != DVM_F32) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: dtypes %s: only f32 is supported",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  int rank;
  int64_t dims[DVM_MAX_RANK];
  st = dvm_matmul_shape(x->rank, x->dims, y->rank, y->dims, &rank, dims);
  if (st) return st;
  if (o->rank != rank || memcmp(o->dims, dims, sizeof(int64_t) * (size_t)rank) != 0) {
    char so[DVM_SHAPE_STR_SIZE], sp[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE],
        sy[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: output %s != %s, the product of %s x %s",
                          dvm_shape_str(so, o->rank, o->dims), dvm_shape_str(sp, rank, dims),
                          dvm_shape_str(sx, x->rank, x->dims), dvm_shape_str(sy, y->rank, y->dims));
  }
  return NULL;
}

static dvm_status *sgemm(int64_t m, int64_t n, int64_t k, const float *x, const float *y,
                         float *c) {
  dnnl_status_t s = dnnl_sgemm('N', 'N', m, n, k, 1.0f, x, k, y, n, 0.0f, c, n);
  if (s != dnnl_success)
    return dvm_status_new(DVM_INTERNAL, "matmul: dnnl_sgemm(%lld, %lld, %lld) failed: %s",
                          (long long)m, (long long)n, (long long)k, dnnl_status2str(s));
  return NULL;
}

/* Per output batch dim, the stride in elements of an operand with `rank`
 * dims whose last `mat` form the matrix (0 where it broadcasts); returns the
 * operand's number of matrices. */
static int64_t batch_strides(const dvm_tensor *t, int mat, int br, int64_t *strides) {
  int tb = t->rank - mat;
  int64_t s = 1;
  for (int d = tb; d < t->rank; d++) s *= t->dims[d];
  int64_t count = 1;
  for (int i = br - 1; i >= 0; i--) {
    int j = i - (br - tb);
    int64_t d = j >= 0 ? t->dims[j] : 1;
    strides[i] = d == 1 ? 0 : s;
    s *= d;
    count *= d;
  }
  return count;
}

static dvm_status *matmul(const dvm_kernel_args *a) {
  dvm_status *st = check(a);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  int xm = x->rank >= 2 ? 2 : 1, ym = y->rank >= 2 ? 2 : 1; /* matrix dims of each */
  int64_t m = xm == 2 ? x->dims[x->rank - 2] : 1, k = x->dims[x->rank - 1];
  int64_t n = ym == 2 ? y->dims[y->rank - 1] : 1;
  int br = o->rank - (xm - 1) - (ym - 1); /* the output's batch dims come first */
  const float *px = dvm_tensor_ptr(x), *py = dvm_tensor_ptr(y);
  float *pc = dvm_tensor_ptr(o);
  int64_t total = dvm_tensor_numel(o);
  if (total == 0) return NULL;
  if (k == 0) { /* an empty sum; BLAS would reject lda = 0 */
    memset(pc, 0, sizeof(float) * (size_t)total);
    return NULL;
  }
  int threads = dvm_kargs_threads(a);
  /* oneDNN sizes its OpenMP teams by the calling thread's setting */
  if (threads != omp_get_max_threads()) omp_set_num_threads(threads);

  int64_t sx[DVM_MAX_RANK], sy[DVM_MAX_RANK], batch = total / (m * n);
  int64_t nx = batch_strides(x, xm, br, sx), ny = batch_strides(y, ym, br, sy);
  if (ny == 1 && nx == batch) return sgemm(batch * m, n, k, px, py, pc);

  int64_t idx[DVM_MAX_RANK] = {0}, ox = 0, oy = 0;
  for (int64_t q = 0; q < batch; q++) {
    st = sgemm(m, n, k, px + ox, py + oy, pc + q * m * n);
    if (st) return st;
    for (int i = br - 1; i >= 0; i--) { /* next batch index, innermost first */
      ox += sx[i];
      oy += sy[i];
      if (++idx[i] < o->dims[i]) break;
      ox -= sx[i] * o->dims[i];
      oy -= sy[i] * o->dims[i];
      idx[i] = 0;
    }
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_matmul_kernels[] = {
    {"matmul", DVM_DEVICE_CPU, matmul, "matmul"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
