/* CUDA C for generated kernels (ops/cuda/gen_abi.h is the contract with
 * their launcher): elementwise kernels from a fused program (docs/fused.md)
 * and ROWS kernels (softmax, log-softmax, layer norm, reductions over the
 * last axis), each as T variants with a fully known tail plus one
 * bounds-checked baseline, for every block configuration; then the DVMG
 * payload that carries the source and NVRTC's images (docs/cuda.md). */
#ifndef DVMC_CUDA_CODEGEN_H
#define DVMC_CUDA_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"
#include "dvm/tensor.h"

/* Elements per thread-step, and so the variants per configuration. */
#define DVMC_CUDA_TILE 4
/* Block configurations, in the payload's order. */
#define DVMC_CUDA_NCONFIGS 2
extern const uint16_t dvmc_cuda_blocks[DVMC_CUDA_NCONFIGS];

/* The CUDA C of an elementwise kernel running the fused program `prog`
 * (validated first) with inputs indexed per `classes` (nin of
 * DVM_GEN_SAME...). *src is malloc'ed. */
DVM_MUST_USE dvm_status *dvmc_cuda_elementwise(const void *prog, size_t size,
                                               const uint8_t *classes, char **src);

typedef enum dvmc_rows_op {
  DVMC_ROWS_SOFTMAX,
  DVMC_ROWS_LOGSOFTMAX,
  DVMC_ROWS_LAYERNORM,
  DVMC_ROWS_SUM,
  DVMC_ROWS_MEAN,
  DVMC_ROWS_MAX,
  DVMC_ROWS_MIN,
} dvmc_rows_op;

/* A ROWS kernel. Inputs: x, then for layer norm scale and optionally bias
 * (n elements each); output y: x's shape, or one element per row for the
 * reductions. dtypes: f32, f16 or bf16 (dt[0..nin-1] inputs, dt[nin]
 * output). */
DVM_MUST_USE dvm_status *dvmc_cuda_rows(dvmc_rows_op op, int nin, const dvm_dtype *dt,
                                        double epsilon, char **src);

/* Compiles `src` with NVRTC (sm_80 and sm_90 cubins, compute_80 PTX) and
 * lays out the DVMG payload (*payload malloc'ed). `name` names the
 * program in errors. */
DVM_MUST_USE dvm_status *dvmc_cuda_payload(int kind, int nin, int nout, const uint8_t *classes,
                                           const char *src, const char *name, void **payload,
                                           size_t *size);

#endif
