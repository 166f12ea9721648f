/* A stand-in for libcuda.so.1 and libcublas.so on machines without a GPU
 * (docs/cuda-runtime.md, "The stand-in driver"): it runs dvm's generated
 * kernels on the host and keeps the driver's rules honest.
 * - The device reports compute capability 0.1 (DVM_GEN_SOURCE_SM), so the
 *   launcher hands it each kernel's CUDA C source, which it compiles with
 *   the emulation of tests/cuda_codegen/shim.h (fake_module.c). With
 *   FAKE_CUDA_SM=90 (test_fake.c, whose payloads carry made-up images) it
 *   reports sm_90 instead, gets cubins, and only records their launches.
 * - Device memory is separate, guarded and closed to the host
 *   (fake_mem.c); copies, memsets, launches and cuBLAS products are
 *   queued per stream and run when the host waits (fake_queue.c).
 * - cuBLAS's strided-batched product is computed on the host (f32 only).
 * FAKE_CUDA_FAIL=NAME makes that entry point fail with out-of-memory.
 * test_fake.c reads back the last launch and counters (fake_last_launch,
 * fake_count) and reads and writes device memory (fake_device_copy). */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "ops/cuda/payload.h"

#define API __attribute__((visibility("default")))

static int fails(const char *name) {
  const char *f = getenv("FAKE_CUDA_FAIL");
  return f && strcmp(f, name) == 0;
}
#define FAILS_AS(name) if (fails(#name)) return FAKE_OUT_OF_MEMORY

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
       : !strcmp(what, "modules") ? modules : !strcmp(what, "compute") ? last_compute
       : !strcmp(what, "kernels") ? fake_kernels_run : -1;
}

static int sm(void) {
  const char *s = getenv("FAKE_CUDA_SM");
  return s && *s ? atoi(s) : DVM_GEN_SOURCE_SM;
}
static int device(fake_ptr p, size_t n) { return n == 0 || fake_mem_inside(p, n); }
#define DEV(p) ((void *)(uintptr_t)(p))

/* A copy the host waits for (cuMemcpy), and test_fake.c's access to
 * device memory, which the host cannot touch directly. */
static CUresult copy_now(void *dst, const void *src, size_t n) {
  fake_stream *s = fake_stream_new();
  if (!s) return FAKE_OUT_OF_MEMORY;
  CUresult r = fake_enqueue_copy(s, dst, src, n);
  if (!r) r = fake_stream_run(s);
  fake_stream_free(s);
  return r;
}
API int fake_device_copy(void *dst, const void *src, size_t n) { return copy_now(dst, src, n); }

API CUresult cuInit(unsigned f) {
  fake_mem_catch_faults();
  return 0;
}
API CUresult cuGetErrorName(CUresult e, const char **s) {
  *s = e == FAKE_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : e == FAKE_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
     : e == FAKE_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS" : e == FAKE_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED"
     : e == FAKE_INVALID_SOURCE ? "CUDA_ERROR_INVALID_SOURCE" : e == FAKE_NOT_READY ? "CUDA_ERROR_NOT_READY"
     : "CUDA_ERROR_FAKE";
  return 0;
}
API CUresult cuGetErrorString(CUresult e, const char **s) {
  *s = e == FAKE_ILLEGAL_ADDRESS || e == FAKE_LAUNCH_FAILED ? "fake failure (the stand-in said why on stderr)"
                                                            : "fake failure";
  return 0;
}
API CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
API CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
API CUresult cuDeviceGetName(char *name, int len, int d) { strncpy(name, "dvm fake GPU", (size_t)len); return 0; }
API CUresult cuDeviceGetAttribute(int *v, int a, int d) {
  *v = a == 16 ? 132 : a == 39 ? 2048 : a == 75 ? sm() / 10 : a == 76 ? sm() % 10 : a == 97 ? 232448 : 0;
  return 0;
}
API CUresult cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)80 << 30; return 0; }
static int ctx_token;
static _Thread_local void *current;
API CUresult cuDevicePrimaryCtxRetain(void **c, int d) { *c = &ctx_token; return 0; }
API CUresult cuCtxGetCurrent(void **c) { *c = current; return 0; }
API CUresult cuCtxSetCurrent(void *c) { current = c; return 0; }

/* ---- memory and copies ---- */

API CUresult cuMemAlloc_v2(fake_ptr *p, size_t n) {
  FAILS_AS(cuMemAlloc_v2);
  if (!current) return FAKE_INVALID_CONTEXT; /* dvm must enter first */
  if (n == 0) return FAKE_INVALID_VALUE;
  allocs++;
  return fake_mem_alloc(n, p);
}
API CUresult cuMemFree_v2(fake_ptr p) {
  frees++;
  return fake_mem_free(p);
}
API CUresult cuMemAllocHost_v2(void **p, size_t n) { return (*p = malloc(n)) ? 0 : FAKE_OUT_OF_MEMORY; }
API CUresult cuMemFreeHost(void *p) { free(p); return 0; }
API CUresult cuMemcpy(fake_ptr d, fake_ptr s, size_t n) {
  if (!device(d, n) || !device(s, n)) return FAKE_INVALID_VALUE;
  return copy_now(DEV(d), DEV(s), n);
}
/* FAKE_CUDA_COPIES=PATH: one line per copy between host and device,
 * "htod BYTES" or "dtoh BYTES", for tests that count what crosses */
static void trace_copy(const char *dir, size_t n) {
  const char *path = getenv("FAKE_CUDA_COPIES");
  FILE *f = path && *path ? fopen(path, "a") : NULL;
  if (!f) return;
  fprintf(f, "%s %zu\n", dir, n);
  fclose(f);
}
API CUresult cuMemcpyHtoDAsync_v2(fake_ptr d, const void *s, size_t n, void *st) {
  if (!device(d, n)) return FAKE_INVALID_VALUE;
  trace_copy("htod", n);
  return fake_enqueue_copy(fake_stream_of(st), DEV(d), s, n);
}
API CUresult cuMemcpyDtoHAsync_v2(void *d, fake_ptr s, size_t n, void *st) {
  if (!device(s, n)) return FAKE_INVALID_VALUE;
  trace_copy("dtoh", n);
  return fake_enqueue_copy(fake_stream_of(st), d, DEV(s), n);
}
API CUresult cuMemcpyDtoDAsync_v2(fake_ptr d, fake_ptr s, size_t n, void *st) {
  return device(d, n) && device(s, n) ? fake_enqueue_copy(fake_stream_of(st), DEV(d), DEV(s), n)
                                      : FAKE_INVALID_VALUE;
}
API CUresult cuMemsetD16Async(fake_ptr d, unsigned short v, size_t n, void *st) {
  return device(d, 2 * n) ? fake_enqueue_set(fake_stream_of(st), d, v, 2, n) : FAKE_INVALID_VALUE;
}
API CUresult cuMemsetD32Async(fake_ptr d, unsigned v, size_t n, void *st) {
  return device(d, 4 * n) ? fake_enqueue_set(fake_stream_of(st), d, v, 4, n) : FAKE_INVALID_VALUE;
}

/* ---- streams and events ---- */

API CUresult cuCtxSynchronize(void) { return fake_run_all(); }
API CUresult cuStreamCreate(void **s, unsigned f) { return (*s = fake_stream_new()) ? 0 : FAKE_OUT_OF_MEMORY; }
API CUresult cuStreamDestroy_v2(void *s) {
  fake_stream_free(s);
  return 0;
}
API CUresult cuStreamSynchronize(void *s) {
  syncs++;
  return fake_stream_run(fake_stream_of(s));
}
API CUresult cuEventCreate(void **e, unsigned f) { return (*e = fake_event_new()) ? 0 : FAKE_OUT_OF_MEMORY; }
API CUresult cuEventDestroy_v2(void *e) {
  fake_event_free(e);
  return 0;
}
API CUresult cuEventRecord(void *e, void *s) { return fake_enqueue_event(fake_stream_of(s), e); }
/* Asked, the device has just finished: the work before the event runs
 * now (a GPU may be that fast; only work nobody waited for stays undone). */
API CUresult cuEventQuery(void *e) { return fake_event_wait(e); }
API CUresult cuEventSynchronize(void *e) { return fake_event_wait(e); }

/* ---- modules and launches ---- */

API CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v) {
  FAILS_AS(cuModuleLoadDataEx);
  char *log = NULL;
  size_t logsize = 0;
  for (unsigned i = 0; i < n; i++) {
    if (o[i] == 5) log = v[i];
    if (o[i] == 6) logsize = (size_t)(uintptr_t)v[i];
  }
  CUresult r = fake_module_load(image, sm() == DVM_GEN_SOURCE_SM, (fake_module **)m, log, log ? logsize : 0);
  modules += r == 0;
  return r;
}
API CUresult cuModuleUnload(void *m) {
  fake_module_unload(m);
  return 0;
}
API CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
  return fake_module_function(m, name, (fake_function **)f);
}
API CUresult cuFuncSetAttribute(void *f, int a, int v) { return 0; }
API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *b, void *f, int bs, size_t smem) { *b = 2048 / bs; return 0; }
/* Every generated kernel takes one dvm_gen_params (gen_abi.h). */
API CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned smem, void *s, void **params, void **extra) {
  const fake_function *fn = f;
  launches++;
  memcpy(last.entry, fn->name, sizeof last.entry);
  last.grid = gx, last.block = bx, last.shared = smem;
  memcpy(&last.params, params[0], sizeof last.params);
  return fake_enqueue_launch(fake_stream_of(s), fn, (unsigned[]){gx, gy, gz}, (unsigned[]){bx, by, bz},
                             params[0]);
}

/* ---- cuBLAS ---- */

typedef struct blas {
  void *stream;
} blas;
API int cublasCreate_v2(void **h) { return (*h = calloc(1, sizeof(blas))) ? 0 : 3; }
API int cublasDestroy_v2(void *h) { free(h); return 0; }
API int cublasSetStream_v2(void *h, void *s) { ((blas *)h)->stream = s; return 0; }
API int cublasSetMathMode(void *h, int m) { return 0; }
API const char *cublasGetStatusName(int s) { return s == 7 ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_NOT_SUPPORTED"; }
/* Column-major C = alpha op(A) op(B) + beta C, f32 only (status 15,
 * NOT_SUPPORTED, otherwise), queued on the handle's stream. */
API int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                   const void *a, int at, int lda, long long sa, const void *b, int bt,
                                   int ldb, long long sb, const void *beta, void *c, int ct, int ldc,
                                   long long sc, int batch, int compute, int algo) {
  if (at != 0 || bt != 0 || ct != 0 || (compute != 68 && compute != 77)) return 15;
  if (!device((fake_ptr)(uintptr_t)c, 4)) return 7; /* operands are device memory */
  last_compute = compute;
  fake_gemm g = {ta, tb, m, n, k, lda, ldb, ldc, batch, *(const float *)alpha, *(const float *)beta,
                 (fake_ptr)(uintptr_t)a, (fake_ptr)(uintptr_t)b, (fake_ptr)(uintptr_t)c, sa, sb, sc};
  return fake_enqueue_gemm(fake_stream_of(((blas *)h)->stream), &g) ? 3 : 0;
}
