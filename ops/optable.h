/* The op table (optable.c): every kernel of ops/ by the name a .dvmb
 * kernel table uses. */
#ifndef DVM_OPS_OPTABLE_H
#define DVM_OPS_OPTABLE_H

#include "kernel.h"

/* The kernel of that name for that device, or NULL. */
const dvm_kernel_def *dvm_ops_find(const char *name, dvm_device_kind device);

/* The kernel that a .dvmb kernel table entry named `name` stands for on
 * that device: the one named by what precedes '@' ("fused@3": "fused"),
 * which is written to `base`; NULL when there is none. */
const dvm_kernel_def *dvm_ops_find_entry(const char *name, dvm_device_kind device, char base[64]);

#endif
