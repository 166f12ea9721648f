/* Cast between strings and numbers (ops/cpu/cast_string.c), for the cast
 * kernel (unary.c) when its input or output is a string tensor. */
#ifndef DVM_OPS_CPU_CAST_STRING_H
#define DVM_OPS_CPU_CAST_STRING_H

#include "kernel.h"

/* a->in[0] to a->out[0], one of them DVM_STRING, the other a number or
 * bool dtype (checked), of one shape (checked by the caller). */
DVM_MUST_USE dvm_status *dvm_cpu_cast_string(const dvm_kernel_args *a);

#endif
