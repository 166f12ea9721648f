/* CPU kernels: resize (see families.def). Not written yet. */
#include "ops/cpu/kernels.h"

const dvm_kernel_def dvm_cpu_resize_kernels[] = {
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
