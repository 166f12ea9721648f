/* matmul.c's product engine, for the kernels that have products of their
 * own (com.microsoft Attention, FusedMatMul, FusedGemm; the recurrent ops):
 * row-major f32 (or f64) products split over the kernels' pool (par.h),
 * each part a single-threaded dnnl_sgemm, so that no kernel runs oneDNN on
 * an OpenMP team beside the pool (two pools in one process fight for the
 * cores: libgomp's workers spin after their region on the core a pool
 * worker needs). */
#ifndef DVM_OPS_CPU_PRODUCT_H
#define DVM_OPS_CPU_PRODUCT_H

#include <stdint.h>

#include "dvm/status.h"
#include "ops/cpu/epilogue.h"
#include "dvm/tensor.h"

/* For each batch index q: C = alpha op(A) op(B) + beta C, row-major, op
 * transposing where ta/tb is 'T', in f32 (or f64). The matrices of q sit
 * at element offsets sum(idx_i * s*_i) over the batch dims (a stride 0
 * broadcasts). */
typedef struct dvm_product {
  int f64;
  char ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const void *a, *b;
  void *c;
  int nbatch;
  int64_t bdims[DVM_MAX_RANK], sa[DVM_MAX_RANK], sb[DVM_MAX_RANK], sc[DVM_MAX_RANK];
  const dvm_epilogue *epi; /* f32 only; NULL: none */
  int64_t j0;              /* the first column of c in the whole product (the bias's index) */
} dvm_product;

/* Runs p on up to `threads` threads of the pool: a batch's products, or
 * one product's rows or columns (parts of at least 64), each part's
 * epilogue applied by the thread that computed it. Fails naming `op` when
 * oneDNN fails. */
DVM_MUST_USE dvm_status *dvm_cpu_product_run(const char *op, const dvm_product *p, int threads);

/* Per batch dim of a product's output (nb of them, right-aligned with the
 * operand's own), the stride in elements of an operand of `rank` dims
 * whose last `mat` (1 or 2) form its matrix: 0 where it broadcasts. Returns
 * how many matrices the operand holds. */
int64_t dvm_cpu_product_strides(int rank, const int64_t *dims, int mat, int nb, int64_t *strides);

#endif
