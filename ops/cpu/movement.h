/* Helpers shared by the CPU kernels that move bytes (movement.c) and fill
 * them (generate.c). They work on any dtype by element size. */
#ifndef DVM_OPS_CPU_MOVEMENT_H
#define DVM_OPS_CPU_MOVEMENT_H

#include "kernel.h"

/* Fails unless kernel `op` got min_in..max_in inputs and nout outputs (any
 * number >= 1 for nout < 0), all on the CPU, the outputs of input 0's
 * dtype unless same_dtype is 0. */
DVM_MUST_USE dvm_status *dvm_cpu_check_io(const dvm_kernel_args *a, const char *op, int min_in,
                                          int max_in, int nout, int same_dtype);

/* Fails unless output i of `op` has the shape rank/dims:
 * "transpose: output 0 has shape [2,3], want [3,2]". */
DVM_MUST_USE dvm_status *dvm_cpu_check_shape(const char *op, const dvm_tensor *t, int i, int rank,
                                             const int64_t *dims);

/* n copies of the esz-byte element at elem (esz 1, 2, 4 or 8) into dst,
 * with up to `threads` threads. */
void dvm_cpu_fill(void *dst, const void *elem, size_t esz, int64_t n, int threads);

#endif
