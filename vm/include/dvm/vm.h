/* VM instances: registers, frames, memory pools and threads for running the
 * functions of one module.
 *
 * A VM belongs to one thread at a time (it may move between threads, but two
 * threads must never use it at once). Many VMs may share one module. */
#ifndef DVM_VM_H
#define DVM_VM_H

#include "dvm/module.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dvm_vm dvm_vm;

typedef struct dvm_vm_options {
  dvm_device_kind device; /* where tensors are allocated by default */
  int threads;            /* kernel threads; 0 = all cores */
  size_t pool_limit;      /* bytes held per device pool (in use + cached); 0 = none */
  int max_depth;          /* call frames; 0 = default (256) */
  uint64_t step_limit;    /* instructions per invocation; 0 = none */
} dvm_vm_options;

DVM_API void dvm_vm_options_init(dvm_vm_options *opts);

/* Creates a VM for `m` (which it retains). `opts` may be NULL. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_create(dvm_module *m, const dvm_vm_options *opts, dvm_vm **out);
DVM_API void dvm_vm_destroy(dvm_vm *vm); /* NULL is fine */
DVM_API dvm_module *dvm_vm_module(const dvm_vm *vm); /* borrowed */

/* Runs function `f` with `args` (borrowed for the call) and writes its
 * results into `results[0..nresults)`, each holding one reference: clear
 * them with dvm_value_clear. `nresults` must equal the function's result
 * count. On failure no result is written and the VM stays usable. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_invoke(dvm_vm *vm, int f, const dvm_value *args, int nargs,
                                       dvm_value *results, int nresults);

/* Asks a running invocation to stop at its next call or back-edge; it then
 * fails with DVM_INTERRUPTED. Safe from any thread. */
DVM_API void dvm_vm_interrupt(dvm_vm *vm);

typedef struct dvm_pool_stats {
  uint64_t in_use;    /* bytes handed out now */
  uint64_t peak;      /* most bytes in use at once */
  uint64_t cached;    /* bytes held for reuse */
  uint64_t allocs;    /* allocations from the system */
  uint64_t reuses;    /* allocations served from the cache */
  uint64_t limit;     /* 0 = none */
} dvm_pool_stats;

typedef struct dvm_vm_stats {
  dvm_pool_stats pool[DVM_DEVICE_COUNT];
  uint64_t invocations;
  uint64_t instructions; /* executed, all invocations */
  uint64_t kernel_calls;
  uint64_t host_syncs;
} dvm_vm_stats;

DVM_API void dvm_vm_get_stats(const dvm_vm *vm, dvm_vm_stats *out);

#ifdef __cplusplus
}
#endif
#endif
