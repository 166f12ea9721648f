/* Memory for the kernels' own forms of constant weights (packed B, oneDNN
 * layouts), read whole by every call that uses them. */
#ifndef DVM_OPS_CPU_WEIGHT_MEM_H
#define DVM_OPS_CPU_WEIGHT_MEM_H

#include <stddef.h>

/* bytes of memory, 64-byte aligned; from 2 MiB on, 2 MiB aligned and its
 * whole 2 MiB pieces asked for on 2 MiB pages (MADV_HUGEPAGE), the rest on
 * 4 KiB pages. NULL when out of memory. Free with free(). */
void *dvm_weight_alloc(size_t bytes);

#endif
