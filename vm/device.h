/* The device interface: everything the VM needs from a device, as a table.
 * CPU is built in; CUDA fills the same table when its driver loads. */
#ifndef DVM_DEVICE_H
#define DVM_DEVICE_H

#include "dvm/status.h"
#include "dvm/tensor.h"

typedef struct dvm_device {
  dvm_device_kind kind;
  const char *name;
  DVM_MUST_USE dvm_status *(*alloc)(const struct dvm_device *d, size_t size, void **out);
  /* ptr from alloc, with the size it was asked for */
  void (*free)(const struct dvm_device *d, void *ptr, size_t size);
  /* Copies between host and this device (either direction) or within it. */
  DVM_MUST_USE dvm_status *(*copy)(const struct dvm_device *d, void *dst, dvm_device_kind dst_dev,
                                   const void *src, dvm_device_kind src_dev, size_t n);
  DVM_MUST_USE dvm_status *(*sync)(const struct dvm_device *d);
} dvm_device;

/* The device of that kind, or an DVM_UNAVAILABLE status saying why not. */
DVM_MUST_USE dvm_status *dvm_device_get(dvm_device_kind kind, const dvm_device **out);

#endif
