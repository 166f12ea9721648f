/* The CUDA kernel tables: cuBLAS products (blas.c) and the launcher of
 * generated kernels (gen.c). Their shape functions are the CPU ones'. */
#ifndef DVM_OPS_CUDA_KERNELS_H
#define DVM_OPS_CUDA_KERNELS_H

#include "kernel.h"

extern const dvm_kernel_def dvm_cuda_blas_kernels[];
extern const dvm_kernel_def dvm_cuda_gen_kernels[];

#endif
