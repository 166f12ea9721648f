/* The op table: each kernel under the name a .dvmb kernel table uses, for
 * its device. Adding a kernel is adding one entry. */
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"

static const dvm_kernel_def kernels[] = {
    {"add", DVM_DEVICE_CPU, dvm_cpu_add},
    {"mul", DVM_DEVICE_CPU, dvm_cpu_mul},
    {"matmul", DVM_DEVICE_CPU, dvm_cpu_matmul},
};

/* A linear scan: lookups happen when a module is linked, not per call. */
const dvm_kernel_def *dvm_ops_find(const char *name, dvm_device_kind device) {
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
    if (kernels[i].device == device && strcmp(kernels[i].name, name) == 0) return &kernels[i];
  return NULL;
}
