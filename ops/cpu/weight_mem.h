/* Memory for the kernels' own forms of constant weights (packed B, oneDNN
 * layouts), read whole by every call that uses them. */
#ifndef DVM_OPS_CPU_WEIGHT_MEM_H
#define DVM_OPS_CPU_WEIGHT_MEM_H

#include <stddef.h>

/* bytes of memory, 64-byte aligned; from 2 MiB on, 2 MiB aligned and its
 * whole 2 MiB pieces asked for on 2 MiB pages (MADV_HUGEPAGE), the rest on
 * 4 KiB pages. NULL when out of memory. Free with free(). */
void *dvm_weight_alloc(size_t bytes);

/* The same, but on 4 KiB pages until dvm_weight_settle: for a form written
 * out of order while its source is given back (pgemm.c), so that it grows
 * as the source shrinks instead of taking its 2 MiB pages at the first
 * write. */
void *dvm_weight_alloc_lazy(size_t bytes);
/* p (from dvm_weight_alloc_lazy), now written, moved onto 2 MiB pages:
 * at once where the kernel can (MADV_COLLAPSE, Linux 6.1), else as its
 * khugepaged gets to it. */
void dvm_weight_settle(void *p, size_t bytes);

#endif
