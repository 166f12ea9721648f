/* Checks of kernel arguments that every kernel makes before touching
 * memory, worded the same way for all of them. */
#ifndef DVM_OPS_KARGS_H
#define DVM_OPS_KARGS_H

#include "kernel.h"

/* Fails unless kernel `op` got exactly nin inputs and nout outputs, all
 * present and on device `dev`. */
DVM_MUST_USE dvm_status *dvm_kargs_check(const dvm_kernel_args *a, const char *op, int nin,
                                         int nout, dvm_device_kind dev);

/* The same for a kernel that takes nin_lo..nin_hi inputs and
 * nout_lo..nout_hi outputs (its optional ones left off the end). */
DVM_MUST_USE dvm_status *dvm_kargs_check_range(const dvm_kernel_args *a, const char *op, int nin_lo,
                                               int nin_hi, int nout_lo, int nout_hi, dvm_device_kind dev);

/* The threads a kernel may use: the VM's count, at least 1. */
int dvm_kargs_threads(const dvm_kernel_args *a);

/* "f32, i32 -> f32": the dtypes of a call that passed dvm_kargs_check,
 * for messages. */
char *dvm_kargs_dtypes(char *buf, size_t size, const dvm_kernel_args *a);

#endif
