/* The parts of the cuBLAS kernels (blas.c) that need no device, apart for
 * the tests: dtype rules and the batch plan of a matmul. */
#ifndef DVM_OPS_CUDA_BLAS_H
#define DVM_OPS_CUDA_BLAS_H

#include "kernel.h"

/* Fails unless cuBLAS takes A x B -> Y in these dtypes: A and B one of
 * f32, f16, bf16 and equal; Y theirs or f32. */
DVM_MUST_USE dvm_status *dvm_cuda_blas_dtypes(const char *op, dvm_dtype a, dvm_dtype b, dvm_dtype y);

/* How a matmul x @ y -> o runs: m, n, k; per output batch dim its size and
 * each operand's element stride (0 = broadcast); the trailing batch dims
 * [run_start, nbatch) merged into one strided-batched call of run_count
 * products with strides run_sa/sb/sc; the dims before it are looped over. */
typedef struct dvm_cuda_blas_plan_t {
  int64_t m, n, k;
  int nbatch, run_start;
  int64_t bdims[DVM_MAX_RANK], sa[DVM_MAX_RANK], sb[DVM_MAX_RANK], sc[DVM_MAX_RANK];
  int64_t run_count, run_sa, run_sb, run_sc;
} dvm_cuda_blas_plan_t;

/* Checks shapes as the CPU kernel does (o must be the product's shape) and
 * fills the plan; fails where a size is past cuBLAS's int range. */
DVM_MUST_USE dvm_status *dvm_cuda_blas_plan(const dvm_tensor *x, const dvm_tensor *y,
                                            const dvm_tensor *o, dvm_cuda_blas_plan_t *p);

#endif
