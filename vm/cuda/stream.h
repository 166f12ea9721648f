/* The CUDA state of one VM: its stream, the pinned staging buffer of its
 * host copies, the count of host waits, and slots where CUDA kernels keep
 * per-VM state (a cuBLAS handle, loaded modules). Like the VM, it belongs
 * to one thread at a time, so it has no lock.
 *
 * Everything is queued on the one stream in program order, so a kernel
 * always sees the copies and kernels before it, and a pool block released
 * by one op and handed to the next is reused in stream order. The host
 * waits only to read device data (a copy to the host) and to reuse the
 * staging buffer while an upload from it may still be running. */
#ifndef DVM_CUDA_STREAM_H
#define DVM_CUDA_STREAM_H

#include <stdint.h>

#include "cuda/cuapi.h"
#include "device.h"
#include "object.h"

/* The words of the device error record: as DVM_GEN_ERROR_WORDS of
 * ops/cuda/gen_abi.h, whose kernels write it (checked there). */
#define DVM_CUDA_ERROR_WORDS 4

enum { DVM_CUDA_SLOT_BLAS, DVM_CUDA_SLOT_GEN, DVM_CUDA_SLOTS };

typedef struct dvm_cuda_vm {
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
  /* device copies of module constants, uploaded once per VM: an open
   * addressing table from a constant's bytes (offset, dtype, shape) to its
   * copy (one reference) */
  struct dvm_cuda_const *consts;
  size_t nconsts, consts_cap;
  void *slot[DVM_CUDA_SLOTS];
  void (*slot_free[DVM_CUDA_SLOTS])(void *);
} dvm_cuda_vm;

/* The CUDA entry of the device table, or DVM_UNAVAILABLE saying why. */
DVM_MUST_USE dvm_status *dvm_cuda_device_entry(const dvm_device **out);

/* A new state whose host waits are counted in *syncs. */
DVM_MUST_USE dvm_status *dvm_cuda_vm_create(uint64_t *syncs, dvm_cuda_vm **out);
/* Waits for the stream, frees the slots, the stream and the staging. */
void dvm_cuda_vm_destroy(dvm_cuda_vm *s); /* NULL is fine */

/* Copies n bytes host->device, device->host or device->device on the
 * stream. Uploads go through the staging buffer, so the host buffer may be
 * reused at once; downloads wait for the stream (one counted sync), so the
 * host may read dst at once. */
DVM_MUST_USE dvm_status *dvm_cuda_vm_copy(dvm_cuda_vm *s, void *dst, dvm_device_kind dst_dev,
                                          const void *src, dvm_device_kind src_dev, size_t n);

/* The device copy of module constant `host` (a view of the module's data)
 * made by an earlier call for the same bytes and shape, or NULL. Constants
 * are immutable and the VM holds the module, so a copy stays valid for the
 * VM's life. */
dvm_tensor *dvm_cuda_vm_const_find(const dvm_cuda_vm *s, const dvm_tensor *host);
/* Remembers `dev` (retained) as the device copy of `host`. */
DVM_MUST_USE dvm_status *dvm_cuda_vm_const_add(dvm_cuda_vm *s, const dvm_tensor *host, dvm_tensor *dev);

/* Waits for everything queued on the stream (one counted sync). A check
 * that a kernel recorded on the device since the last wait (an index out
 * of range) is reported here, as the wait's error, and the record cleared. */
DVM_MUST_USE dvm_status *dvm_cuda_vm_sync(dvm_cuda_vm *s);

/* The device error record (DVM_CUDA_ERROR_WORDS zeroed words), made at
 * first use. */
DVM_MUST_USE dvm_status *dvm_cuda_vm_errors(dvm_cuda_vm *s, CUdeviceptr *out);

#endif
