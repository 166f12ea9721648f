/* The op table: every kernel under the name a .dvmb kernel table uses, for
 * its device, with the shape function of its outputs. The tables live with
 * their kernels, one per family; adding a kernel is adding one entry there. */
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "ops/optable.h"
#include "ops/cpu/kernels.h"
#include "ops/cuda/kernels.h"

static const dvm_kernel_def *const tables[] = {
#define FAMILY(f) dvm_cpu_##f##_kernels,
#include "ops/cpu/families.def"
#undef FAMILY
    dvm_cuda_blas_kernels,
    dvm_cuda_gen_kernels,
};

/* A linear scan: lookups happen when a module is linked, not per call. */
const dvm_kernel_def *dvm_ops_find(const char *name, dvm_device_kind device) {
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const dvm_kernel_def *k = tables[t]; k->name; k++)
      if (k->device == device && strcmp(k->name, name) == 0) return k;
  return NULL;
}

const dvm_kernel_def *dvm_ops_find_entry(const char *name, dvm_device_kind device, char base[64]) {
  snprintf(base, 64, "%.*s", (int)strcspn(name, "@"), name);
  return dvm_ops_find(base, device);
}
