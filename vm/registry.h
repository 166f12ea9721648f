/* What a module is linked against: the kernels and shape functions its
 * tables may name, and the devices its VMs run on. The VM knows none of
 * them itself; the registry handed to the loader is the module's for its
 * life, and the VMs made from it find their devices there. libdvm's
 * public load functions pass the default one (ops/registry.c). */
#ifndef DVM_REGISTRY_H
#define DVM_REGISTRY_H

#include "device.h"
#include "kernel.h"

typedef struct dvm_registry {
  /* The kernel of that name for that device, or NULL. */
  const dvm_kernel_def *(*kernel)(const char *name, dvm_device_kind device);
  /* The shape function of that name, or NULL. */
  const dvm_shapefn_def *(*shapefn)(const char *name);
  /* The device of that kind, or a DVM_UNAVAILABLE status saying why not. */
  DVM_MUST_USE dvm_status *(*device)(dvm_device_kind kind, const dvm_device **out);
} dvm_registry;

/* dvm_module_load_file and dvm_module_load_memory (dvm/module.h) linked
 * against `reg`, which must outlive the module. */
DVM_MUST_USE dvm_status *dvm_module_load_file_with(const dvm_registry *reg, const char *path,
                                                   const dvm_load_options *opts, dvm_module **out);
DVM_MUST_USE dvm_status *dvm_module_load_memory_with(const dvm_registry *reg, const void *data,
                                                     size_t size, const dvm_load_options *opts,
                                                     dvm_module **out);

#endif
