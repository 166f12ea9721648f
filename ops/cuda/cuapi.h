/* The CUDA driver API as dvm uses it: the few types and constants it needs,
 * declared here so the build needs no CUDA headers (check_headers.c proves
 * them equal to cuda.h's where the toolkit is installed), and one table of
 * entry points filled from libcuda.so.1 with dlopen/dlsym at run time, so a
 * binary without a GPU or driver still loads and says why CUDA is missing.
 *
 * Every driver result goes through dvm_cuda_check, which names the call and
 * the driver's error name and string. */
#ifndef DVM_OPS_CUDA_CUAPI_H
#define DVM_OPS_CUDA_CUAPI_H

#include <stddef.h>

#include "dvm/status.h"

#ifndef DVM_CUDA_TYPES_FROM_CUDA_H /* check_headers.c takes them from cuda.h */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef int CUdevice_attribute;
typedef int CUjit_option;
typedef int CUfunction_attribute;
#endif

#define DVM_CUDA_SUCCESS 0
#define DVM_CUDA_ERROR_OUT_OF_MEMORY 2
#define DVM_CUDA_ERROR_NO_DEVICE 100
#define DVM_CUDA_ERROR_NOT_READY 600
#define DVM_CU_ATTR_SM_COUNT 16            /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
#define DVM_CU_ATTR_MAX_THREADS_PER_SM 39  /* ..._MAX_THREADS_PER_MULTIPROCESSOR */
#define DVM_CU_ATTR_CC_MAJOR 75            /* ..._COMPUTE_CAPABILITY_MAJOR */
#define DVM_CU_ATTR_CC_MINOR 76            /* ..._COMPUTE_CAPABILITY_MINOR */
#define DVM_CU_ATTR_SMEM_OPTIN 97          /* ..._MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
#define DVM_CU_JIT_ERROR_LOG_BUFFER 5
#define DVM_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define DVM_CU_FUNC_MAX_DYNAMIC_SHARED 8   /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
#define DVM_CU_STREAM_NON_BLOCKING 1
#define DVM_CU_EVENT_DISABLE_TIMING 2

/* X(symbol in libcuda, return type, parameters). The names are the
 * versioned symbols that cuda.h's macros map the plain names to. */
#define DVM_CUDA_API(X)                                                                          \
  X(cuInit, CUresult, (unsigned flags))                                                          \
  X(cuGetErrorName, CUresult, (CUresult e, const char **s))                                      \
  X(cuGetErrorString, CUresult, (CUresult e, const char **s))                                    \
  X(cuDeviceGetCount, CUresult, (int *n))                                                        \
  X(cuDeviceGet, CUresult, (CUdevice * d, int ordinal))                                          \
  X(cuDeviceGetName, CUresult, (char *name, int len, CUdevice d))                                \
  X(cuDeviceGetAttribute, CUresult, (int *v, CUdevice_attribute a, CUdevice d))                 \
  X(cuDeviceTotalMem_v2, CUresult, (size_t * bytes, CUdevice d))                                 \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * c, CUdevice d))                             \
  X(cuCtxGetCurrent, CUresult, (CUcontext * c))                                                  \
  X(cuCtxSetCurrent, CUresult, (CUcontext c))                                                    \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr * p, size_t bytes))                                    \
  X(cuMemFree_v2, CUresult, (CUdeviceptr p))                                                     \
  X(cuMemAllocHost_v2, CUresult, (void **p, size_t bytes))                                       \
  X(cuMemFreeHost, CUresult, (void *p))                                                          \
  X(cuMemcpy, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes))                        \
  X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr dst, const void *src, size_t n, CUstream s))    \
  X(cuMemcpyDtoHAsync_v2, CUresult, (void *dst, CUdeviceptr src, size_t n, CUstream s))          \
  X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))    \
  X(cuMemsetD16Async, CUresult, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s))       \
  X(cuMemsetD32Async, CUresult, (CUdeviceptr dst, unsigned v, size_t n, CUstream s))             \
  X(cuCtxSynchronize, CUresult, (void))                                                          \
  X(cuStreamCreate, CUresult, (CUstream * s, unsigned flags))                                    \
  X(cuStreamDestroy_v2, CUresult, (CUstream s))                                                  \
  X(cuStreamSynchronize, CUresult, (CUstream s))                                                 \
  X(cuEventCreate, CUresult, (CUevent * e, unsigned flags))                                      \
  X(cuEventDestroy_v2, CUresult, (CUevent e))                                                    \
  X(cuEventRecord, CUresult, (CUevent e, CUstream s))                                            \
  X(cuEventQuery, CUresult, (CUevent e))                                                         \
  X(cuEventSynchronize, CUresult, (CUevent e))                                                   \
  X(cuModuleLoadDataEx, CUresult,                                                                \
    (CUmodule * m, const void *image, unsigned n, CUjit_option *opts, void **vals))              \
  X(cuModuleUnload, CUresult, (CUmodule m))                                                      \
  X(cuModuleGetFunction, CUresult, (CUfunction * f, CUmodule m, const char *name))               \
  X(cuFuncSetAttribute, CUresult, (CUfunction f, CUfunction_attribute a, int v))                 \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult,                                       \
    (int *blocks, CUfunction f, int block_size, size_t dynamic_smem))                            \
  X(cuLaunchKernel, CUresult,                                                                    \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
     unsigned smem, CUstream s, void **params, void **extra))

typedef struct dvm_cuda_api {
#define DVM_CUDA_FIELD(name, ret, params) ret(*name) params;
  DVM_CUDA_API(DVM_CUDA_FIELD)
#undef DVM_CUDA_FIELD
} dvm_cuda_api;

/* The device dvm runs on (ordinal 0) and what the cost models read. */
typedef struct dvm_cuda_device {
  const dvm_cuda_api *api;
  CUdevice dev;
  CUcontext ctx; /* the primary context, retained for the process's life */
  char name[128];
  int sm;        /* compute capability as 10 * major + minor: 80, 90, ... */
  int sm_count;
  int max_threads_per_sm;
  int smem_optin; /* bytes of shared memory a block may opt in to */
  size_t total_mem;
} dvm_cuda_device;

/* Loads the driver and initializes device 0, once per process (thread-safe).
 * Fails with DVM_UNAVAILABLE saying why: "libcuda.so.1 not found (no NVIDIA
 * driver)", "no CUDA device", or the failing call. Later calls return the
 * same answer. */
DVM_MUST_USE dvm_status *dvm_cuda_device_get(const dvm_cuda_device **out);

/* The device after a successful dvm_cuda_device_get (no check, no lock:
 * it is written once, before that call returns). */
const dvm_cuda_device *dvm_cuda_device_loaded(void);

/* NULL when r is success; otherwise a status naming `call` and the driver's
 * error name and description ("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out
 * of memory)"). Out of memory maps to DVM_RESOURCE_EXHAUSTED. */
DVM_MUST_USE dvm_status *dvm_cuda_check(const dvm_cuda_api *api, CUresult r, const char *call);

/* Makes the device's context current on this thread (driver calls need it;
 * VMs move between threads and storages return to pools from any thread). */
DVM_MUST_USE dvm_status *dvm_cuda_enter(const dvm_cuda_device *d);

/* Calls api->fn(args) and turns its result into a status naming fn. */
#define DVM_CU(api, fn, ...) dvm_cuda_check((api), (api)->fn(__VA_ARGS__), #fn)

#endif
