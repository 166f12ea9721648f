/* The CUDA stream of one VM (the device interface's dvm_stream, vm/device.h):
 * its CUstream, the pinned staging buffer of its host copies, the count of
 * host waits, and slots where CUDA kernels keep per-VM state (a cuBLAS
 * handle, loaded modules). Like the VM, it belongs to one thread at a
 * time, so it has no lock.
 *
 * Everything is queued on the one stream in program order, so a kernel
 * always sees the copies and kernels before it, and a pool block released
 * by one op and handed to the next is reused in stream order. The host
 * waits only to read device data (a copy to the host) and to reuse the
 * staging buffer while an upload from it may still be running. */
#ifndef DVM_OPS_CUDA_STREAM_H
#define DVM_OPS_CUDA_STREAM_H

#include <stdint.h>

#include "device.h"
#include "object.h"
#include "ops/cuda/cuapi.h"

/* The words of the device error record: as DVM_GEN_ERROR_WORDS of
 * ops/cuda/gen_abi.h, whose kernels write it (checked there). */
#define DVM_CUDA_ERROR_WORDS 4

enum { DVM_CUDA_SLOT_BLAS, DVM_CUDA_SLOT_GEN, DVM_CUDA_SLOTS };

typedef struct dvm_cuda_stream {
  dvm_stream head; /* first: the device interface's view */
  const dvm_cuda_device *dev;
  CUstream stream;
  void *staging; /* pinned host memory */
  size_t staging_size;
  CUevent staging_free; /* recorded after the last upload from staging */
  int staging_busy;
  uint64_t *syncs; /* the VM's host_syncs statistic */
  /* the device error record of kernels that check their data (a gather's
   * indices: ops/cuda/gen_abi.h), and its pinned host copy, read at every
   * wait; made at first use */
  CUdeviceptr errors;
  long long *errors_host;
  void *slot[DVM_CUDA_SLOTS];
  void (*slot_free[DVM_CUDA_SLOTS])(void *);
} dvm_cuda_stream;

/* The CUDA entry of the device table (device.c), or DVM_UNAVAILABLE
 * saying why. */
DVM_MUST_USE dvm_status *dvm_cuda_device_entry(const dvm_device **out);

/* The stream a CUDA kernel runs on: its VM's, which the VM makes before the
 * kernel's launch; NULL for a kernel called outside a VM. */
static inline dvm_cuda_stream *dvm_cuda_stream_of(const dvm_kernel_args *a) {
  return a->exec ? (dvm_cuda_stream *)a->exec->streams[DVM_DEVICE_CUDA] : NULL;
}

/* The stream operations of the device interface (vm/device.h). */
DVM_MUST_USE dvm_status *dvm_cuda_stream_create(const dvm_device *d, uint64_t *syncs, dvm_stream **out);
void dvm_cuda_stream_destroy(dvm_stream *s);
DVM_MUST_USE dvm_status *dvm_cuda_stream_copy(dvm_stream *s, void *dst, dvm_device_kind dst_dev,
                                              const void *src, dvm_device_kind src_dev, size_t n);
DVM_MUST_USE dvm_status *dvm_cuda_stream_sync(dvm_stream *s);

/* The device error record (DVM_CUDA_ERROR_WORDS zeroed words), made at
 * first use. */
DVM_MUST_USE dvm_status *dvm_cuda_stream_errors(dvm_cuda_stream *s, CUdeviceptr *out);

#endif
