/* Placement for CUDA: adds to a compiled module, for each function NAME, a
 * clone "NAME@cuda" that keeps tensors on the CUDA device (docs/cuda.md).
 *
 * It works on the emitted bytecode, after lowering: allocations move to
 * the device; fused elementwise calls become generated kernels ("gen@N",
 * with their DVMG payload compiled by NVRTC and a variant register set
 * from the extent just before the call); softmax, log-softmax, layer norm
 * over the last axis, reductions over trailing axes and global average
 * pools become generated ROWS kernels (trailing axes reshaped into one);
 * transposes of f32, i32 and i64 become generated copies reading their
 * input through the perm (DVM_GEN_PERMUTED);
 * matmul and gemm run on the device by name; every other kernel runs on
 * the host between copies. Inputs are copied to the device on entry,
 * results back to the CPU before `ret`. The CPU functions stay as they
 * are, so the file runs anywhere. */
#ifndef DVMC_PLACE_CUDA_H
#define DVMC_PLACE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"

/* Reads the module in (in, in_size) and writes the module with the clones
 * to *out (malloc'ed). Fails when NVRTC is unavailable, naming it. */
DVM_MUST_USE dvm_status *dvmc_place_cuda(const uint8_t *in, size_t in_size, uint8_t **out,
                                         size_t *out_size);

#endif
