/* The CPU kernel tables, one per family (families.def). */
#ifndef DVM_OPS_CPU_KERNELS_H
#define DVM_OPS_CPU_KERNELS_H

#include "kernel.h"

#define FAMILY(f) extern const dvm_kernel_def dvm_cpu_##f##_kernels[];
#include "ops/cpu/families.def"
#undef FAMILY

#endif
