/* The CUDA device (vm/device.h): device memory for the caching pools,
 * copies for callers that have no VM stream, and the VMs' streams
 * (stream.c), on which their copies and kernels are queued. */
#include <stdint.h>
#include <stdio.h>

#include "ops/cuda/cuapi.h"
#include "ops/cuda/stream.h"

/* The device: only reachable through cuda_device, which is handed out
 * after it loaded. */
#define cudev dvm_cuda_device_loaded()

static dvm_status *cuda_alloc(const dvm_device *d, size_t size, void **out) {
  CUdeviceptr p = 0;
  dvm_status *st = dvm_cuda_enter(cudev);
  if (!st) st = DVM_CU(cudev->api, cuMemAlloc_v2, &p, size ? size : 1);
  if (st) return st;
  *out = (void *)(uintptr_t)p;
  return NULL;
}

/* Frees happen when a pool trims or dies, rarely: the wait makes sure no
 * queued kernel of any stream still reads the block. Errors have nowhere
 * to go here; the next checked call reports a broken context. */
static void cuda_free(const dvm_device *d, void *ptr, size_t size) {
  (void)size;
  if (dvm_cuda_enter(cudev)) return;
  (void)cudev->api->cuCtxSynchronize();
  (void)cudev->api->cuMemFree_v2((CUdeviceptr)(uintptr_t)ptr);
}

/* Synchronous: the host may read or reuse its buffer when this returns. */
static dvm_status *cuda_copy(const dvm_device *d, void *dst, dvm_device_kind dst_dev,
                             const void *src, dvm_device_kind src_dev, size_t n) {
  dvm_status *st = dvm_cuda_enter(cudev);
  if (!st && n)
    st = DVM_CU(cudev->api, cuMemcpy, (CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n);
  return st;
}

static dvm_status *cuda_sync(const dvm_device *d) {
  dvm_status *st = dvm_cuda_enter(cudev);
  return st ? st : DVM_CU(cudev->api, cuCtxSynchronize);
}

static void cuda_describe(const dvm_device *d, char *buf, size_t size) {
  snprintf(buf, size, "cuda:0 (%s, sm_%d, %d SMs)", cudev->name, cudev->sm, cudev->sm_count);
}

/* Driver calls need the context current, and a VM may move between
 * threads between two launches. */
static dvm_status *cuda_launch(dvm_stream *s, const dvm_kernel_def *k, const dvm_kernel_args *a) {
  dvm_status *st = dvm_cuda_enter(cudev);
  return st ? st : k->fn(a);
}

static const dvm_device cuda_device = {
    .kind = DVM_DEVICE_CUDA,
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .describe = cuda_describe,
    .stream_create = dvm_cuda_stream_create,
    .stream_destroy = dvm_cuda_stream_destroy,
    .stream_copy = dvm_cuda_stream_copy,
    .stream_sync = dvm_cuda_stream_sync,
    .launch = cuda_launch,
};

dvm_status *dvm_cuda_device_entry(const dvm_device **out) {
  const dvm_cuda_device *d;
  dvm_status *st = dvm_cuda_device_get(&d);
  if (st) return dvm_status_annotate(st, "the CUDA device is not available");
  *out = &cuda_device;
  return NULL;
}
