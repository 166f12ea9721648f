/* The default registry (vm/registry.h): the op table, the shape function
 * table and the devices, and the public functions that use it: loading
 * modules and asking for a device. A new device is one more entry in
 * `devices`. */
#include "dvm/vm.h"
#include "ops/cuda/stream.h"
#include "ops/optable.h"
#include "registry.h"
#include "shapefuncs/registry.h"

static dvm_status *cpu_entry(const dvm_device **out) {
  *out = dvm_device_cpu();
  return NULL;
}

/* Each device's entry: the device, or DVM_UNAVAILABLE saying why not. */
static dvm_status *(*const devices[DVM_DEVICE_COUNT])(const dvm_device **out) = {
    [DVM_DEVICE_CPU] = cpu_entry,
    [DVM_DEVICE_CUDA] = dvm_cuda_device_entry,
};

static dvm_status *device(dvm_device_kind kind, const dvm_device **out) {
  if ((unsigned)kind >= DVM_DEVICE_COUNT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "unknown device %d", (int)kind);
  return devices[kind](out);
}

static const dvm_registry default_registry = {
    .kernel = dvm_ops_find,
    .shapefn = dvm_shapefn_find,
    .device = device,
};

dvm_status *dvm_module_load_file(const char *path, const dvm_load_options *opts, dvm_module **out) {
  return dvm_module_load_file_with(&default_registry, path, opts, out);
}

dvm_status *dvm_module_load_memory(const void *data, size_t size, const dvm_load_options *opts,
                                   dvm_module **out) {
  return dvm_module_load_memory_with(&default_registry, data, size, opts, out);
}

dvm_status *dvm_device_probe(dvm_device_kind kind, char *buf, size_t size) {
  const dvm_device *d;
  dvm_status *st = device(kind, &d);
  if (!st) d->describe(d, buf, size);
  return st;
}
