/* The device interface: everything the VM needs from a device, as a table.
 * A device is one implementation of it: the CPU (device.c), which is also
 * the host; CUDA (ops/cuda/device.c). The VM finds devices through the
 * registry its module was loaded with (registry.h) and never calls one
 * otherwise. */
#ifndef DVM_DEVICE_H
#define DVM_DEVICE_H

#include <stdint.h>

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "kernel.h"

/* A device's queue for one VM: copies and kernels on it run in the order
 * they were queued, and the host waits for them only where the calls below
 * say so. Like the VM, it belongs to one thread at a time. A device's own
 * stream type begins with this head. */
typedef struct dvm_stream {
  const struct dvm_device *dev;
} dvm_stream;

typedef struct dvm_device {
  dvm_device_kind kind;
  const char *name;
  /* Memory for the caching pools (pool.c). */
  DVM_MUST_USE dvm_status *(*alloc)(const struct dvm_device *d, size_t size, void **out);
  /* ptr from alloc, with the size it was asked for */
  void (*free)(const struct dvm_device *d, void *ptr, size_t size);
  /* Copies between host and this device (either direction) or within it,
   * on no stream: the host may read or reuse its buffer on return. */
  DVM_MUST_USE dvm_status *(*copy)(const struct dvm_device *d, void *dst, dvm_device_kind dst_dev,
                                   const void *src, dvm_device_kind src_dev, size_t n);
  /* Waits for all work on the device, of every stream: memory that no
   * pool of dvm made (DLPack) may still be written on a stream dvm does
   * not know. */
  DVM_MUST_USE dvm_status *(*sync)(const struct dvm_device *d);
  /* What the device is, for dvm_device_probe: "cpu", "cuda:0 (NVIDIA
   * H100 80GB HBM3, sm_90, 132 SMs)". */
  void (*describe)(const struct dvm_device *d, char *buf, size_t size);

  /* A new stream for one VM, whose host waits are counted in *syncs. */
  DVM_MUST_USE dvm_status *(*stream_create)(const struct dvm_device *d, uint64_t *syncs,
                                            dvm_stream **out);
  /* Waits for everything queued, then frees the stream and what its
   * kernels keep on it. */
  void (*stream_destroy)(dvm_stream *s);
  /* Copies n bytes between the host and this device, or within it, in
   * stream order. The host may reuse src at once; a copy to host memory
   * waits for the stream (a counted sync), so the host may read dst at
   * once. */
  DVM_MUST_USE dvm_status *(*stream_copy)(dvm_stream *s, void *dst, dvm_device_kind dst_dev,
                                          const void *src, dvm_device_kind src_dev, size_t n);
  /* Waits for everything queued on s (a counted sync). A fault a kernel
   * recorded on the device since the last wait is reported here. */
  DVM_MUST_USE dvm_status *(*stream_sync)(dvm_stream *s);
  /* Runs kernel k of this device with a, on s: queued in stream order,
   * or, on the host, done on return. The kernel finds s in
   * a->exec->streams[its device]. */
  DVM_MUST_USE dvm_status *(*launch)(dvm_stream *s, const dvm_kernel_def *k,
                                     const dvm_kernel_args *a);
} dvm_device;

/* The CPU: the host, always present. */
const dvm_device *dvm_device_cpu(void);

#endif
