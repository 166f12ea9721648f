/* The CPU kernels, by file; ops/optable.c names them. */
#ifndef DVM_OPS_CPU_KERNELS_H
#define DVM_OPS_CPU_KERNELS_H

#include "kernel.h"

/* binary.c */
dvm_status *dvm_cpu_add(const dvm_kernel_args *a);
dvm_status *dvm_cpu_mul(const dvm_kernel_args *a);

/* matmul.c */
dvm_status *dvm_cpu_matmul(const dvm_kernel_args *a);

#endif
