/* Products on CUDA through cuBLAS, loaded at run time (dlopen) like the
 * driver, so nothing links it.
 *
 *   matmul (in: A, B) -> Y      ONNX MatMul, batch broadcasting included
 *   gemm (in: A, B[, C]; attrs: transA, transB, alpha, beta) -> Y
 *
 * Shapes and shape functions are the CPU kernels' (shapefuncs/matmul.h).
 * A and B share one dtype, f32, f16 or bf16; Y is that dtype or f32; the
 * products accumulate in f32 (CUBLAS_COMPUTE_32F), so f32 is exact f32 by
 * default: a VM created with allow_tf32 lets f32 products use TF32 tensor
 * cores (CUBLAS_COMPUTE_32F_FAST_TF32), faster and with a 10-bit mantissa.
 *
 * Row-major products are column-major ones transposed: Y = A B is Y^T =
 * B^T A^T, which cuBLAS reads straight from the row-major buffers. Batches
 * run as cublasGemmStridedBatchedEx over the longest run of trailing batch
 * dims whose strides merge (a broadcast operand has stride 0), looping over
 * the rest. Gemm's C is broadcast into Y first with rank-1 products against
 * a vector of ones, so beta C needs no other kernel. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/blas.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/stream.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/matmul.h"

typedef struct cublasContext *cublasHandle_t;
typedef int cublasStatus_t;

#define CUBLAS_OP_N 0
#define CUBLAS_OP_T 1
#define CUBLAS_DEFAULT_MATH 0
#define CUBLAS_COMPUTE_32F 68
#define CUBLAS_COMPUTE_32F_FAST_TF32 77
#define CUBLAS_GEMM_DEFAULT (-1)
#define CUDA_R_32F 0
#define CUDA_R_16F 2
#define CUDA_R_16BF 14

#define DVM_CUBLAS_API(X)                                                                        \
  X(cublasCreate_v2, (cublasHandle_t * h))                                                       \
  X(cublasDestroy_v2, (cublasHandle_t h))                                                        \
  X(cublasSetStream_v2, (cublasHandle_t h, CUstream s))                                          \
  X(cublasSetMathMode, (cublasHandle_t h, int mode))                                             \
  X(cublasGemmStridedBatchedEx,                                                                  \
    (cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha, const void *a,    \
     int atype, int lda, long long sa, const void *b, int btype, int ldb, long long sb,          \
     const void *beta, void *c, int ctype, int ldc, long long sc, int batch, int compute,        \
     int algo))

typedef struct blas_api {
#define FIELD(fn, params) cublasStatus_t(*fn) params;
  DVM_CUBLAS_API(FIELD)
#undef FIELD
  const char *(*cublasGetStatusName)(cublasStatus_t s);
} blas_api;

static blas_api api;
static dvm_status *load_error;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  const char *env = getenv("DVM_CUBLAS");
  void *lib = NULL;
  if (env && *env) lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; !lib && !(env && *env) && i < sizeof names / sizeof names[0]; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    load_error = dvm_status_new(DVM_UNAVAILABLE, "cuBLAS not found (%s)",
                                env && *env ? env : "libcublas.so.13, .12 or libcublas.so");
    return;
  }
#define RESOLVE(fn, params)                                                                   \
  if (!(*(void **)&api.fn = dlsym(lib, #fn))) {                                               \
    load_error = dvm_status_new(DVM_UNAVAILABLE, "cuBLAS lacks %s (too old?)", #fn);          \
    return;                                                                                   \
  }
  DVM_CUBLAS_API(RESOLVE)
  RESOLVE(cublasGetStatusName, ())
#undef RESOLVE
}

static dvm_status *check(cublasStatus_t s, const char *call) {
  if (s == 0) return NULL;
  const char *name = api.cublasGetStatusName(s);
  return dvm_status_new(s == 3 /* CUBLAS_STATUS_ALLOC_FAILED */ ? DVM_RESOURCE_EXHAUSTED : DVM_INTERNAL,
                        "%s: %s (%d)", call, name ? name : "unknown cublasStatus_t", (int)s);
}

#define BLAS(fn, ...) check(api.fn(__VA_ARGS__), #fn)

/* ---- per-VM state: the handle on the VM's stream, and scratch ----------- */

typedef struct blas_vm {
  const dvm_cuda_device *dev;
  CUstream stream;
  cublasHandle_t h;
  CUdeviceptr scratch;
  size_t scratch_size;
} blas_vm;

static void blas_vm_free(void *p) {
  blas_vm *b = p;
  if (!dvm_cuda_enter(b->dev)) {
    (void)b->dev->api->cuStreamSynchronize(b->stream);
    if (b->scratch) (void)b->dev->api->cuMemFree_v2(b->scratch);
    if (b->h) (void)api.cublasDestroy_v2(b->h);
  }
  free(b);
}

static dvm_status *blas_vm_get(dvm_cuda_stream *cu, blas_vm **out) {
  if (cu->slot[DVM_CUDA_SLOT_BLAS]) {
    *out = cu->slot[DVM_CUDA_SLOT_BLAS];
    return NULL;
  }
  pthread_once(&once, load);
  if (load_error) return dvm_status_new(DVM_UNAVAILABLE, "%s", dvm_status_message(load_error));
  blas_vm *b = calloc(1, sizeof *b);
  if (!b) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  b->dev = cu->dev;
  b->stream = cu->stream;
  dvm_status *st = dvm_cuda_enter(cu->dev);
  if (!st) st = BLAS(cublasCreate_v2, &b->h);
  if (!st) st = BLAS(cublasSetStream_v2, b->h, cu->stream);
  if (!st) st = BLAS(cublasSetMathMode, b->h, CUBLAS_DEFAULT_MATH);
  if (st) {
    blas_vm_free(b);
    return st;
  }
  cu->slot[DVM_CUDA_SLOT_BLAS] = b;
  cu->slot_free[DVM_CUDA_SLOT_BLAS] = blas_vm_free;
  *out = b;
  return NULL;
}

static dvm_status *scratch(blas_vm *b, size_t bytes, CUdeviceptr *out) {
  const dvm_cuda_api *a = b->dev->api;
  if (bytes > b->scratch_size) {
    dvm_status *st = NULL;
    if (b->scratch) { /* queued products may still read it */
      if ((st = DVM_CU(a, cuStreamSynchronize, b->stream))) return st;
      (void)a->cuMemFree_v2(b->scratch);
      b->scratch = 0;
      b->scratch_size = 0;
    }
    if ((st = DVM_CU(a, cuMemAlloc_v2, &b->scratch, bytes))) return st;
    b->scratch_size = bytes;
  }
  *out = b->scratch;
  return NULL;
}

/* ---- dtypes and argument checks (no device needed) ----------------------- */

static int cuda_type(dvm_dtype dt) {
  switch (dt) {
  case DVM_F32: return CUDA_R_32F;
  case DVM_F16: return CUDA_R_16F;
  case DVM_BF16: return CUDA_R_16BF;
  default: return -1;
  }
}

dvm_status *dvm_cuda_blas_dtypes(const char *op, dvm_dtype a, dvm_dtype b, dvm_dtype y) {
  if (cuda_type(a) < 0 || cuda_type(b) < 0 || cuda_type(y) < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s on cuda: %s x %s -> %s: operands must be f32, f16 or bf16", op,
                          dvm_dtype_name(a), dvm_dtype_name(b), dvm_dtype_name(y));
  if (a != b)
    return dvm_status_new(DVM_UNIMPLEMENTED,
                          "%s on cuda: A is %s and B is %s; cuBLAS takes one input dtype (cast one)",
                          op, dvm_dtype_name(a), dvm_dtype_name(b));
  if (y != a && y != DVM_F32)
    return dvm_status_new(DVM_UNIMPLEMENTED, "%s on cuda: %s inputs give %s or f32, not %s", op,
                          dvm_dtype_name(a), dvm_dtype_name(a), dvm_dtype_name(y));
  return NULL;
}

static dvm_status *fits_int(const char *op, const char *what, int64_t v) {
  if (v <= INT_MAX) return NULL;
  return dvm_status_new(DVM_OUT_OF_RANGE, "%s on cuda: %s = %lld is past cuBLAS's int range", op,
                        what, (long long)v);
}

dvm_status *dvm_cuda_blas_plan(const dvm_tensor *x, const dvm_tensor *y, const dvm_tensor *o,
                               dvm_cuda_blas_plan_t *p) {
  int rank;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_matmul_shape(x->rank, x->dims, y->rank, y->dims, &rank, dims);
  if (st) return st;
  if (o->rank != rank || memcmp(o->dims, dims, sizeof(int64_t) * (size_t)rank) != 0) {
    char so[96], se[96];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: output is %s, the product is %s",
                          dvm_shape_format(so, sizeof so, (dvm_dtype)o->dtype, o->rank, o->dims),
                          dvm_shape_format(se, sizeof se, (dvm_dtype)o->dtype, rank, dims));
  }
  memset(p, 0, sizeof *p);
  int xm = x->rank >= 2 ? 2 : 1, ym = y->rank >= 2 ? 2 : 1;
  p->m = xm == 2 ? x->dims[x->rank - 2] : 1;
  p->k = x->dims[x->rank - 1];
  p->n = ym == 2 ? y->dims[y->rank - 1] : 1;
  int br = rank - (xm - 1) - (ym - 1), bx = x->rank - xm, by = y->rank - ym;
  /* element strides of each operand per output batch dim; 0 = broadcast */
  int64_t sx = p->m * p->k, sy = p->k * p->n, so = p->m * p->n;
  for (int i = br - 1; i >= 0; i--) {
    int jx = i - (br - bx), jy = i - (br - by);
    p->bdims[i] = dims[i];
    p->sa[i] = jx >= 0 && x->dims[jx] != 1 ? sx : 0;
    p->sb[i] = jy >= 0 && y->dims[jy] != 1 ? sy : 0;
    p->sc[i] = so;
    if (jx >= 0) sx *= x->dims[jx];
    if (jy >= 0) sy *= y->dims[jy];
    so *= dims[i];
  }
  /* the strided-batched run: trailing batch dims that merge into one */
  int s = br;
  int64_t count = 1;
  if (br > 0) {
    s = br - 1;
    count = dims[br - 1];
    while (s > 0 && p->sa[s - 1] == p->sa[s] * p->bdims[s] && p->sb[s - 1] == p->sb[s] * p->bdims[s] &&
           p->sc[s - 1] == p->sc[s] * p->bdims[s])
      count *= dims[--s];
  }
  p->nbatch = br;
  p->run_start = s;
  p->run_count = count;
  p->run_sa = br ? p->sa[br - 1] : 0;
  p->run_sb = br ? p->sb[br - 1] : 0;
  p->run_sc = br ? p->sc[br - 1] : 0;
  if ((st = fits_int("matmul", "m", p->m)) || (st = fits_int("matmul", "n", p->n)) ||
      (st = fits_int("matmul", "k", p->k)) || (st = fits_int("matmul", "batch", count)))
    return st;
  return NULL;
}

/* ---- the products --------------------------------------------------------- */

/* Row-major Y[m, n] (ldy) = alpha op(A) op(B) + beta Y over `batch`
 * strided products, as the column-major Y^T = op(B)^T op(A)^T. */
typedef struct gemm_call {
  int ta, tb;
  int64_t m, n, k, lda, ldb, ldy, sa, sb, sy, batch;
  const void *a, *b;
  void *y;
  int ab_type, y_type;
  float alpha, beta;
} gemm_call;

static dvm_status *run(int tf32, blas_vm *bv, const gemm_call *g) {
  /* f32 inputs may take TF32 tensor cores where the VM allows it */
  int compute = tf32 && g->ab_type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return BLAS(cublasGemmStridedBatchedEx, bv->h, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N,
              g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &g->alpha, g->b,
              g->ab_type, (int)g->ldb, g->sb, g->a, g->ab_type, (int)g->lda, g->sa, &g->beta, g->y,
              g->y_type, (int)g->ldy, g->sy, (int)g->batch, compute, CUBLAS_GEMM_DEFAULT);
}

static dvm_status *zero(dvm_cuda_stream *cu, const dvm_tensor *o) {
  size_t bytes = dvm_tensor_nbytes(o);
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)dvm_tensor_ptr(o);
  return bytes % 4 ? DVM_CU(cu->dev->api, cuMemsetD16Async, p, 0, bytes / 2, cu->stream)
                   : DVM_CU(cu->dev->api, cuMemsetD32Async, p, 0, bytes / 4, cu->stream);
}

static dvm_status *cuda_state(const dvm_kernel_args *a, const char *op, dvm_cuda_stream **cu,
                              blas_vm **bv) {
  *cu = dvm_cuda_stream_of(a);
  if (!*cu) return dvm_status_new(DVM_INTERNAL, "%s: the VM has no CUDA state", op);
  dvm_status *st = blas_vm_get(*cu, bv);
  return st ? st : dvm_cuda_enter((*cu)->dev);
}

static dvm_status *matmul(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "matmul", 2, 1, DVM_DEVICE_CUDA);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  dvm_cuda_blas_plan_t p;
  if ((st = dvm_cuda_blas_dtypes("matmul", (dvm_dtype)x->dtype, (dvm_dtype)y->dtype, (dvm_dtype)o->dtype)) ||
      (st = dvm_cuda_blas_plan(x, y, o, &p)))
    return st;
  if (dvm_tensor_numel(o) == 0) return NULL;
  dvm_cuda_stream *cu;
  blas_vm *bv;
  if ((st = cuda_state(a, "matmul", &cu, &bv))) return st;
  if (p.k == 0) return zero(cu, o);
  size_t ex = dvm_dtype_size((dvm_dtype)x->dtype), eo = dvm_dtype_size((dvm_dtype)o->dtype);
  gemm_call g = {.m = p.m, .n = p.n, .k = p.k, .lda = p.k, .ldb = p.n, .ldy = p.n,
                 .sa = p.run_sa, .sb = p.run_sb, .sy = p.run_sc, .batch = p.run_count,
                 .ab_type = cuda_type((dvm_dtype)x->dtype), .y_type = cuda_type((dvm_dtype)o->dtype),
                 .alpha = 1, .beta = 0};
  int64_t outer = 1;
  for (int i = 0; i < p.run_start; i++) outer *= p.bdims[i];
  for (int64_t it = 0; it < outer && !st; it++) {
    int64_t offa = 0, offb = 0, offc = 0, rem = it;
    for (int i = p.run_start - 1; i >= 0; i--) {
      int64_t idx = rem % p.bdims[i];
      rem /= p.bdims[i];
      offa += idx * p.sa[i];
      offb += idx * p.sb[i];
      offc += idx * p.sc[i];
    }
    g.a = (const char *)dvm_tensor_ptr(x) + offa * (int64_t)ex;
    g.b = (const char *)dvm_tensor_ptr(y) + offb * (int64_t)ex;
    g.y = (char *)dvm_tensor_ptr(o) + offc * (int64_t)eo;
    st = run(a->exec->allow_tf32, bv, &g);
  }
  return st;
}

/* Y = u v^T (rank 1: row-major Y[i][j] = u[i] v[j]) in Y's dtype. */
static dvm_status *outer(blas_vm *bv, int type, int64_t m, int64_t n, const void *u, const void *v,
                         void *y) {
  gemm_call g = {.m = m, .n = n, .k = 1, .lda = 1, .ldb = n, .ldy = n, .batch = 1, .a = u, .b = v,
                 .y = y, .ab_type = type, .y_type = type, .alpha = 1, .beta = 0};
  return run(0, bv, &g); /* exact: it copies C into Y */
}

/* Y = C broadcast to [m, n] (C's dtype is Y's). */
static dvm_status *broadcast_c(dvm_cuda_stream *cu, blas_vm *bv, const dvm_tensor *c, const dvm_tensor *o,
                               int64_t m, int64_t n) {
  const dvm_cuda_api *api_ = cu->dev->api;
  int rc = c->rank, type = cuda_type((dvm_dtype)o->dtype);
  int64_t cr = rc == 2 ? c->dims[0] : 1, cc = rc >= 1 ? c->dims[rc - 1] : 1;
  size_t es = dvm_dtype_size((dvm_dtype)o->dtype);
  CUdeviceptr yp = (CUdeviceptr)(uintptr_t)dvm_tensor_ptr(o), cp = (CUdeviceptr)(uintptr_t)dvm_tensor_ptr(c);
  if (cr == m && cc == n)
    return DVM_CU(api_, cuMemcpyDtoDAsync_v2, yp, cp, (size_t)(m * n) * es, cu->stream);
  int64_t len = m > n ? m : n;
  CUdeviceptr ones, vec;
  dvm_status *st = scratch(bv, (size_t)(len + n) * es, &ones);
  if (st) return st;
  vec = ones + (CUdeviceptr)((size_t)len * es);
  /* 1.0 in each dtype's bits, so the ones need no kernel */
  st = es == 4 ? DVM_CU(api_, cuMemsetD32Async, ones, 0x3f800000u, (size_t)len, cu->stream)
               : DVM_CU(api_, cuMemsetD16Async, ones, c->dtype == DVM_F16 ? 0x3c00 : 0x3f80,
                        (size_t)len, cu->stream);
  if (st) return st;
  const void *u = cr == m ? (const void *)(uintptr_t)cp : (const void *)(uintptr_t)ones;
  const void *v = cc == n ? (const void *)(uintptr_t)cp : (const void *)(uintptr_t)ones;
  if (cr != m && cc != n) { /* one value: v = c * ones_n first */
    if ((st = outer(bv, type, n, 1, (const void *)(uintptr_t)ones, (const void *)(uintptr_t)cp,
                    (void *)(uintptr_t)vec)))
      return st;
    v = (const void *)(uintptr_t)vec;
  }
  return outer(bv, type, m, n, u, v, (void *)(uintptr_t)yp);
}

static dvm_status *gemm(const dvm_kernel_args *a) {
  static const char op[] = "gemm";
  if (a->nin < 2 || a->nin > 3 || a->nout != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 2 or 3 inputs and 1 output, got %d and %d",
                          op, a->nin, a->nout);
  int ta = 0, tb = 0;
  double alpha = 0, beta = 0;
  dvm_status *st = dvm_kargs_check(a, op, a->nin, 1, DVM_DEVICE_CUDA);
  if (!st) st = dvm_attr_count(op, a->nattrs, 4, 4);
  if (!st) st = dvm_gemm_attrs(a->attrs, &ta, &tb, &alpha, &beta);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *c = a->nin > 2 ? a->in[2] : NULL, *o = a->out[0];
  int64_t dims[2];
  if ((st = dvm_cuda_blas_dtypes(op, (dvm_dtype)x->dtype, (dvm_dtype)y->dtype, (dvm_dtype)o->dtype)) ||
      (st = dvm_gemm_shape(x->rank, x->dims, y->rank, y->dims, c ? c->rank : -1, c ? c->dims : NULL,
                           ta, tb, dims)))
    return st;
  if (o->rank != 2 || o->dims[0] != dims[0] || o->dims[1] != dims[1])
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gemm: output must be [%lld, %lld]",
                          (long long)dims[0], (long long)dims[1]);
  int use_c = c && beta != 0;
  if (use_c && c->dtype != o->dtype)
    return dvm_status_new(DVM_UNIMPLEMENTED, "gemm on cuda: C is %s but Y is %s; they must match",
                          dvm_dtype_name((dvm_dtype)c->dtype), dvm_dtype_name((dvm_dtype)o->dtype));
  int64_t m = dims[0], n = dims[1], k = x->dims[!ta];
  if ((st = fits_int(op, "m", m)) || (st = fits_int(op, "n", n)) || (st = fits_int(op, "k", k)))
    return st;
  if (m * n == 0) return NULL;
  dvm_cuda_stream *cu;
  blas_vm *bv;
  if ((st = cuda_state(a, op, &cu, &bv))) return st;
  if (k == 0 && use_c)
    return dvm_status_new(DVM_UNIMPLEMENTED, "gemm on cuda: K = 0 with a C term (beta C alone)");
  if (k == 0) return zero(cu, o);
  if (use_c && (st = broadcast_c(cu, bv, c, o, m, n))) return st;
  gemm_call g = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = x->dims[1], .ldb = y->dims[1],
                 .ldy = n, .batch = 1, .a = dvm_tensor_ptr(x), .b = dvm_tensor_ptr(y),
                 .y = dvm_tensor_ptr(o), .ab_type = cuda_type((dvm_dtype)x->dtype),
                 .y_type = cuda_type((dvm_dtype)o->dtype), .alpha = (float)alpha,
                 .beta = use_c ? (float)beta : 0};
  return run(a->exec->allow_tf32, bv, &g);
}

#define CUBLAS_DTYPES (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F16) | DVM_DTYPE_BIT(DVM_BF16))

const dvm_kernel_def dvm_cuda_blas_kernels[] = {
    {"matmul", DVM_DEVICE_CUDA, matmul, "matmul", CUBLAS_DTYPES},
    {"gemm", DVM_DEVICE_CUDA, gemm, "gemm", CUBLAS_DTYPES},
    {0},
};
