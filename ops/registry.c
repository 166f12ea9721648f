/* The default registry (vm/registry.h): the op table, the shape function
 * table and the device table, and the public functions that use it:
 * loading modules and asking for a device. */
#include "dvm/vm.h"
#include "ops/optable.h"
#include "registry.h"
#include "shapefuncs/registry.h"

static const dvm_registry default_registry = {
    .kernel = dvm_ops_find,
    .shapefn = dvm_shapefn_find,
    .device = dvm_device_get,
};

dvm_status *dvm_module_load_file(const char *path, const dvm_load_options *opts, dvm_module **out) {
  return dvm_module_load_file_with(&default_registry, path, opts, out);
}

dvm_status *dvm_module_load_memory(const void *data, size_t size, const dvm_load_options *opts,
                                   dvm_module **out) {
  return dvm_module_load_memory_with(&default_registry, data, size, opts, out);
}
