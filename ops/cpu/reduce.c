/* CPU kernels: reduce (see families.def). Not written yet. */
#include "ops/cpu/kernels.h"

const dvm_kernel_def dvm_cpu_reduce_kernels[] = {
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
