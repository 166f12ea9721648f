/* CPU kernels: movement (see families.def). Not written yet. */
#include "ops/cpu/kernels.h"

const dvm_kernel_def dvm_cpu_movement_kernels[] = {
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
