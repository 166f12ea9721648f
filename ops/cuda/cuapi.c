/* Loading the CUDA driver at run time (see cuapi.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/cuapi.h"

static dvm_cuda_api api;
static dvm_cuda_device device;
static dvm_status *load_error; /* why the device is missing, or NULL */
static pthread_once_t once = PTHREAD_ONCE_INIT;

dvm_status *dvm_cuda_check(const dvm_cuda_api *a, CUresult r, const char *call) {
  if (r == DVM_CUDA_SUCCESS) return NULL;
  const char *name = NULL, *desc = NULL;
  if (a->cuGetErrorName(r, &name) != DVM_CUDA_SUCCESS || !name) name = "unknown CUresult";
  if (a->cuGetErrorString(r, &desc) != DVM_CUDA_SUCCESS || !desc) desc = "no description";
  dvm_code code = r == DVM_CUDA_ERROR_OUT_OF_MEMORY ? DVM_RESOURCE_EXHAUSTED
                  : r == DVM_CUDA_ERROR_NO_DEVICE       ? DVM_UNAVAILABLE
                                                        : DVM_INTERNAL;
  return dvm_status_new(code, "%s: %s (%d: %s)", call, name, (int)r, desc);
}

static dvm_status *resolve(void *lib) {
#define DVM_CUDA_RESOLVE(fn, ret, params)                                                     \
  if (!(*(void **)&api.fn = dlsym(lib, #fn)))                                                 \
    return dvm_status_new(DVM_UNAVAILABLE, "the CUDA driver lacks %s (driver too old?)", #fn);
  DVM_CUDA_API(DVM_CUDA_RESOLVE)
#undef DVM_CUDA_RESOLVE
  return NULL;
}

static dvm_status *attr(int a, int *v, const char *what) {
  return dvm_status_annotate(DVM_CU(&api, cuDeviceGetAttribute, v, a, device.dev), "%s", what);
}

static dvm_status *init_device(void) {
  int n = 0;
  dvm_status *st = DVM_CU(&api, cuInit, 0);
  if (st && dvm_status_code(st) == DVM_UNAVAILABLE)
    return dvm_status_annotate(st, "no CUDA device");
  if (!st) st = DVM_CU(&api, cuDeviceGetCount, &n);
  if (st) return st;
  if (n < 1) return dvm_status_new(DVM_UNAVAILABLE, "no CUDA device (the driver sees none)");
  int major = 0, minor = 0;
  device.api = &api;
  if ((st = DVM_CU(&api, cuDeviceGet, &device.dev, 0)) ||
      (st = DVM_CU(&api, cuDeviceGetName, device.name, (int)sizeof device.name, device.dev)) ||
      (st = attr(DVM_CU_ATTR_CC_MAJOR, &major, "compute capability")) ||
      (st = attr(DVM_CU_ATTR_CC_MINOR, &minor, "compute capability")) ||
      (st = attr(DVM_CU_ATTR_SM_COUNT, &device.sm_count, "multiprocessor count")) ||
      (st = attr(DVM_CU_ATTR_MAX_THREADS_PER_SM, &device.max_threads_per_sm, "threads per SM")) ||
      (st = attr(DVM_CU_ATTR_SMEM_OPTIN, &device.smem_optin, "shared memory per block")) ||
      (st = DVM_CU(&api, cuDeviceTotalMem_v2, &device.total_mem, device.dev)) ||
      (st = DVM_CU(&api, cuDevicePrimaryCtxRetain, &device.ctx, device.dev)))
    return st;
  device.sm = 10 * major + minor;
  return NULL;
}

/* Runs once. The library stays loaded for the process's life: kernels,
 * storages and pools may still call into it until exit. */
static void load(void) {
  /* DVM_CUDA_DRIVER names another driver library: unusual installs, and
   * tests that check what happens without one */
  const char *path = getenv("DVM_CUDA_DRIVER");
  if (!path || !*path) path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    load_error = dvm_status_new(DVM_UNAVAILABLE, "%s not found (no NVIDIA driver)", path);
    return;
  }
  dvm_status *st = resolve(lib);
  if (!st) st = init_device();
  if (st) {
    load_error = dvm_status_annotate(st, "CUDA driver %s", path);
    memset(&device, 0, sizeof device);
  }
}

/* A copy of the stored reason, as the caller owns what it gets. */
dvm_status *dvm_cuda_device_get(const dvm_cuda_device **out) {
  pthread_once(&once, load);
  if (load_error) return dvm_status_new(dvm_status_code(load_error), "%s", dvm_status_message(load_error));
  *out = &device;
  return NULL;
}

const dvm_cuda_device *dvm_cuda_device_loaded(void) { return &device; }

dvm_status *dvm_cuda_enter(const dvm_cuda_device *d) {
  CUcontext cur = NULL;
  dvm_status *st = DVM_CU(d->api, cuCtxGetCurrent, &cur);
  if (!st && cur != d->ctx) st = DVM_CU(d->api, cuCtxSetCurrent, d->ctx);
  return st;
}
