/* The CUDA stream of one VM (see stream.h). */
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/stream.h"

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

dvm_status *dvm_cuda_stream_create(const dvm_device *dev, uint64_t *syncs, dvm_stream **out) {
  const dvm_cuda_device *d = dvm_cuda_device_loaded(); /* dev is handed out once it loaded */
  dvm_cuda_stream *s = calloc(1, sizeof *s);
  if (!s) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  s->head.dev = dev;
  s->dev = d;
  s->syncs = syncs;
  /* non-blocking: the legacy default stream that libraries may use must
   * not serialize with this VM's work */
  dvm_status *st;
  if ((st = dvm_cuda_enter(d)) ||
      (st = DVM_CU(d->api, cuStreamCreate, &s->stream, DVM_CU_STREAM_NON_BLOCKING)) ||
      (st = DVM_CU(d->api, cuEventCreate, &s->staging_free, DVM_CU_EVENT_DISABLE_TIMING))) {
    dvm_cuda_stream_destroy(&s->head);
    return st;
  }
  *out = &s->head;
  return NULL;
}

void dvm_cuda_stream_destroy(dvm_stream *head) {
  dvm_cuda_stream *s = (dvm_cuda_stream *)head;
  const dvm_cuda_api *a = s->dev->api;
  if (!dvm_cuda_enter(s->dev) && s->stream) (void)a->cuStreamSynchronize(s->stream);
  for (int i = 0; i < DVM_CUDA_SLOTS; i++)
    if (s->slot[i]) s->slot_free[i](s->slot[i]);
  if (s->staging) (void)a->cuMemFreeHost(s->staging);
  if (s->errors) (void)a->cuMemFree_v2(s->errors);
  if (s->errors_host) (void)a->cuMemFreeHost(s->errors_host);
  if (s->staging_free) (void)a->cuEventDestroy_v2(s->staging_free);
  if (s->stream) (void)a->cuStreamDestroy_v2(s->stream);
  free(s);
}

static dvm_status *wait_counted(dvm_cuda_stream *s, dvm_status *st) {
  if (!st) (*s->syncs)++;
  return st;
}

#define ERROR_BYTES (DVM_CUDA_ERROR_WORDS * sizeof(long long))

dvm_status *dvm_cuda_stream_errors(dvm_cuda_stream *s, CUdeviceptr *out) {
  const dvm_cuda_api *a = s->dev->api;
  dvm_status *st = NULL;
  if (!s->errors && !(st = dvm_cuda_enter(s->dev))) {
    if (!s->errors_host && (st = DVM_CU(a, cuMemAllocHost_v2, (void **)&s->errors_host, ERROR_BYTES)))
      return st;
    memset(s->errors_host, 0, ERROR_BYTES);
    if ((st = DVM_CU(a, cuMemAlloc_v2, &s->errors, ERROR_BYTES))) return st;
    if ((st = DVM_CU(a, cuMemsetD32Async, s->errors, 0, ERROR_BYTES / 4, s->stream))) {
      (void)a->cuMemFree_v2(s->errors);
      s->errors = 0;
    }
  }
  *out = s->errors;
  return st;
}

/* What the record says, once the stream is idle; the record cleared. */
static dvm_status *recorded(dvm_cuda_stream *s) {
  long long *e = s->errors_host;
  if (!e[0]) return NULL;
  dvm_status *st = dvm_status_new(DVM_INVALID_ARGUMENT,
                                  "gather on cuda: indices[%lld] = %lld is out of range for an "
                                  "axis of size %lld (checked on the device, reported at the "
                                  "next host wait)", e[1], e[2], e[3]);
  memset(e, 0, ERROR_BYTES);
  dvm_status *clear = DVM_CU(s->dev->api, cuMemsetD32Async, s->errors, 0, ERROR_BYTES / 4, s->stream);
  dvm_status_free(clear); /* a broken stream fails the next call anyway */
  return st;
}

dvm_status *dvm_cuda_stream_sync(dvm_stream *head) {
  dvm_cuda_stream *s = (dvm_cuda_stream *)head;
  const dvm_cuda_api *a = s->dev->api;
  dvm_status *st = dvm_cuda_enter(s->dev);
  if (!st && s->errors)
    st = DVM_CU(a, cuMemcpyDtoHAsync_v2, s->errors_host, s->errors, ERROR_BYTES, s->stream);
  if (!st) st = wait_counted(s, DVM_CU(a, cuStreamSynchronize, s->stream));
  return st || !s->errors ? st : recorded(s);
}

/* The staging buffer, at least n bytes, free for the host to use: waits
 * for an upload still reading it (a counted sync only if it has to wait). */
static dvm_status *staging(dvm_cuda_stream *s, size_t n) {
  const dvm_cuda_api *a = s->dev->api;
  dvm_status *st = NULL;
  if (s->staging_busy) {
    CUresult r = a->cuEventQuery(s->staging_free);
    if (r == DVM_CUDA_ERROR_NOT_READY)
      st = wait_counted(s, DVM_CU(a, cuEventSynchronize, s->staging_free));
    else
      st = dvm_cuda_check(a, r, "cuEventQuery");
    if (st) return st;
    s->staging_busy = 0;
  }
  if (n <= s->staging_size) return NULL;
  size_t size = s->staging_size ? s->staging_size : 1 << 16;
  while (size < n) size *= 2;
  if (s->staging) (void)a->cuMemFreeHost(s->staging);
  s->staging = NULL;
  s->staging_size = 0;
  if ((st = DVM_CU(a, cuMemAllocHost_v2, &s->staging, size))) return st;
  s->staging_size = size;
  return NULL;
}

dvm_status *dvm_cuda_stream_copy(dvm_stream *head, void *dst, dvm_device_kind dst_dev,
                                 const void *src, dvm_device_kind src_dev, size_t n) {
  dvm_cuda_stream *s = (dvm_cuda_stream *)head;
  const dvm_cuda_api *a = s->dev->api;
  dvm_status *st = dvm_cuda_enter(s->dev);
  if (st || n == 0) return st;
  int to_dev = dst_dev == DVM_DEVICE_CUDA, from_dev = src_dev == DVM_DEVICE_CUDA;
  if (to_dev && from_dev) return DVM_CU(a, cuMemcpyDtoDAsync_v2, DPTR(dst), DPTR(src), n, s->stream);
  if (to_dev) {
    if ((st = staging(s, n))) return st;
    memcpy(s->staging, src, n);
    if ((st = DVM_CU(a, cuMemcpyHtoDAsync_v2, DPTR(dst), s->staging, n, s->stream)) ||
        (st = DVM_CU(a, cuEventRecord, s->staging_free, s->stream)))
      return st;
    s->staging_busy = 1;
    return NULL;
  }
  if (from_dev) {
    if ((st = staging(s, n)) ||
        (st = DVM_CU(a, cuMemcpyDtoHAsync_v2, s->staging, DPTR(src), n, s->stream)) ||
        (st = dvm_cuda_stream_sync(head)))
      return st;
    memcpy(dst, s->staging, n);
    return NULL;
  }
  return dvm_status_new(DVM_INTERNAL, "cuda copy asked to copy %s -> %s", dvm_device_name(src_dev),
                        dvm_device_name(dst_dev));
}
