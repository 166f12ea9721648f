/* The op table (optable.c): every kernel of ops/ by the name a .dvmb
 * kernel table uses. */
#ifndef DVM_OPS_OPTABLE_H
#define DVM_OPS_OPTABLE_H

#include "kernel.h"

/* The kernel of that name for that device, or NULL. */
const dvm_kernel_def *dvm_ops_find(const char *name, dvm_device_kind device);

#endif
