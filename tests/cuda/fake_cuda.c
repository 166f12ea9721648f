/* A stand-in for libcuda.so.1 and libcublas.so on machines without a GPU,
 * for test_fake.c: "device" memory is host memory, streams and events do
 * nothing, kernels are not run but each launch is recorded, and cuBLAS's
 * strided-batched product is computed on the host (f32 only). It lets the
 * tests run dvm's CUDA runtime end to end: loading, pools, copies, host
 * syncs, the cuBLAS call arguments (checked by their results) and the
 * launcher of generated kernels (checked by its recorded launches).
 * FAKE_CUDA_FAIL=NAME makes that entry point fail with out-of-memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/gen_abi.h"

#define API __attribute__((visibility("default")))
typedef int CUresult;

static int fails(const char *name) {
  const char *f = getenv("FAKE_CUDA_FAIL");
  return f && strcmp(f, name) == 0;
}
#define FAILS_AS(name) if (fails(#name)) return 2

/* what test_fake.c reads back (it dlopens this same library) */
typedef struct fake_launch {
  char entry[32];
  unsigned grid, block, shared;
  dvm_gen_params params;
} fake_launch;
static fake_launch last;
static int launches, syncs, allocs, frees, modules;
static int last_compute; /* cuBLAS compute type of the last product: 68 f32, 77 TF32 */
API const fake_launch *fake_last_launch(void) { return &last; }
API int fake_count(const char *what) {
  return !strcmp(what, "launches") ? launches : !strcmp(what, "syncs") ? syncs
       : !strcmp(what, "allocs") ? allocs : !strcmp(what, "frees") ? frees
       : !strcmp(what, "modules") ? modules : !strcmp(what, "compute") ? last_compute : -1;
}

API CUresult cuInit(unsigned f) { return 0; }
API CUresult cuGetErrorName(CUresult e, const char **s) { *s = e == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE"; return 0; }
API CUresult cuGetErrorString(CUresult e, const char **s) { *s = "fake failure"; return 0; }
API CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
API CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
API CUresult cuDeviceGetName(char *name, int len, int d) { strncpy(name, "dvm fake GPU", (size_t)len); return 0; }
API CUresult cuDeviceGetAttribute(int *v, int a, int d) {
  *v = a == 16 ? 132 : a == 39 ? 2048 : a == 75 ? 9 : a == 76 ? 0 : a == 97 ? 232448 : 0;
  return 0;
}
API CUresult cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)80 << 30; return 0; }
static int ctx_token;
static _Thread_local void *current;
API CUresult cuDevicePrimaryCtxRetain(void **c, int d) { *c = &ctx_token; return 0; }
API CUresult cuCtxGetCurrent(void **c) { *c = current; return 0; }
API CUresult cuCtxSetCurrent(void *c) { current = c; return 0; }
API CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) {
  FAILS_AS(cuMemAlloc_v2);
  if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT: dvm must enter first */
  allocs++;
  *p = (unsigned long long)(uintptr_t)malloc(n);
  return 0;
}
API CUresult cuMemFree_v2(unsigned long long p) { frees++; free((void *)(uintptr_t)p); return 0; }
API CUresult cuMemAllocHost_v2(void **p, size_t n) { *p = malloc(n); return 0; }
API CUresult cuMemFreeHost(void *p) { free(p); return 0; }
API CUresult cuMemcpy(unsigned long long d, unsigned long long s, size_t n) { memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
API CUresult cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *st) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
API CUresult cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *st) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
API CUresult cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *st) { memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
API CUresult cuMemsetD16Async(unsigned long long d, unsigned short v, size_t n, void *st) {
  for (size_t i = 0; i < n; i++) ((unsigned short *)(uintptr_t)d)[i] = v;
  return 0;
}
API CUresult cuMemsetD32Async(unsigned long long d, unsigned v, size_t n, void *st) {
  for (size_t i = 0; i < n; i++) ((unsigned *)(uintptr_t)d)[i] = v;
  return 0;
}
API CUresult cuCtxSynchronize(void) { return 0; }
static int token;
API CUresult cuStreamCreate(void **s, unsigned f) { *s = &token; return 0; }
API CUresult cuStreamDestroy_v2(void *s) { return 0; }
API CUresult cuStreamSynchronize(void *s) { syncs++; return 0; }
API CUresult cuEventCreate(void **e, unsigned f) { *e = &token; return 0; }
API CUresult cuEventDestroy_v2(void *e) { return 0; }
API CUresult cuEventRecord(void *e, void *s) { return 0; }
API CUresult cuEventQuery(void *e) { return 0; }
API CUresult cuEventSynchronize(void *e) { return 0; }
API CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v) {
  FAILS_AS(cuModuleLoadDataEx);
  modules++;
  *m = &token;
  return 0;
}
API CUresult cuModuleUnload(void *m) { return 0; }
/* a function is its entry name, kept in a table for the process's life */
static char names[1024][32];
static int nnames;
API CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
  int i = 0;
  while (i < nnames && strcmp(names[i], name) != 0) i++;
  if (i == nnames) {
    if (nnames == 1024 || strlen(name) >= sizeof names[0]) return 500; /* CUDA_ERROR_NOT_FOUND */
    strcpy(names[nnames++], name);
  }
  *f = names[i];
  return 0;
}
API CUresult cuFuncSetAttribute(void *f, int a, int v) { return 0; }
API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *b, void *f, int bs, size_t sm) { *b = 2048 / bs; return 0; }
API CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned smem, void *s, void **params, void **extra) {
  launches++;
  strncpy(last.entry, f, sizeof last.entry - 1);
  last.grid = gx, last.block = bx, last.shared = smem;
  memcpy(&last.params, params[0], sizeof last.params);
  return 0;
}

/* ---- cuBLAS ---- */
API int cublasCreate_v2(void **h) { *h = &token; return 0; }
API int cublasDestroy_v2(void *h) { return 0; }
API int cublasSetStream_v2(void *h, void *s) { return 0; }
API int cublasSetMathMode(void *h, int m) { return 0; }
API const char *cublasGetStatusName(int s) { return "CUBLAS_STATUS_NOT_SUPPORTED"; }
/* Column-major C = alpha op(A) op(B) + beta C, f32 only (status 15,
 * NOT_SUPPORTED, otherwise). */
API int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                   const void *a, int at, int lda, long long sa, const void *b, int bt,
                                   int ldb, long long sb, const void *beta, void *c, int ct, int ldc,
                                   long long sc, int batch, int compute, int algo) {
  if (at != 0 || bt != 0 || ct != 0 || (compute != 68 && compute != 77)) return 15;
  last_compute = compute;
  float al = *(const float *)alpha, be = *(const float *)beta;
  for (int p = 0; p < batch; p++) {
    const float *A = (const float *)a + p * sa, *B = (const float *)b + p * sb;
    float *C = (float *)c + p * sc;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        double acc = 0;
        for (int l = 0; l < k; l++)
          acc += (double)(ta ? A[l + i * lda] : A[i + l * lda]) * (tb ? B[j + l * ldb] : B[l + j * ldb]);
        C[i + j * ldc] = (float)(al * acc + (be != 0 ? be * C[i + j * ldc] : 0));
      }
  }
  return 0;
}
