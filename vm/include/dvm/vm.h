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
  /* Where tensors are allocated by default. DVM_DEVICE_CUDA needs a CUDA
   * device (else dvm_vm_create fails with DVM_UNAVAILABLE saying why) and a
   * module compiled with --target cuda; such a VM runs NAME@cuda for NAME
   * (dvm_vm_find_function). */
  dvm_device_kind device;
  int threads;            /* kernel threads; 0 = all cores */
  size_t pool_limit;      /* bytes held per device pool (in use + cached); 0 = none */
  int max_depth;          /* call frames; 0 = default (256) */
  uint64_t step_limit;    /* instructions per invocation; 0 = none */
  /* CUDA f32 matrix products may use TF32 tensor cores (10-bit mantissa
   * products, faster); 0 (the default) keeps them exact f32. */
  int allow_tf32;
  /* Tensor results a device holds are copied to the host before
   * dvm_vm_invoke returns (the default), or, when set, returned where they
   * are (dvm_tensor_device says where; dvm_tensor_to_dlpack passes them on
   * without a copy), the VM having waited for the device to finish them. */
  int results_on_device;
} dvm_vm_options;

DVM_API void dvm_vm_options_init(dvm_vm_options *opts);

/* Creates a VM for `m` (which it retains). `opts` may be NULL. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_create(dvm_module *m, const dvm_vm_options *opts, dvm_vm **out);
DVM_API void dvm_vm_destroy(dvm_vm *vm); /* NULL is fine */
DVM_API dvm_module *dvm_vm_module(const dvm_vm *vm); /* borrowed */

/* The module function this VM runs for entry `name`: NAME itself on the
 * CPU, NAME@cuda (the version compiled for CUDA) on a CUDA VM. Fails with
 * DVM_NOT_FOUND naming what is missing. */
#define DVM_CUDA_SUFFIX "@cuda"
DVM_API DVM_MUST_USE dvm_status *dvm_vm_find_function(const dvm_vm *vm, const char *name, int *out);

/* Whether a device of that kind is present: NULL and a description in buf
 * ("cpu", "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 132 SMs)"), or a
 * DVM_UNAVAILABLE status saying why not ("libcuda.so.1 not found (no
 * NVIDIA driver)"). */
DVM_API DVM_MUST_USE dvm_status *dvm_device_probe(dvm_device_kind kind, char *buf, size_t size);

/* The device `--device auto` means for module m: CUDA when a device is
 * present and m was compiled for it, else the CPU. buf says which and, for
 * the CPU, why ("cpu (... libcuda.so.1 not found (no NVIDIA driver))"). */
DVM_API dvm_device_kind dvm_device_auto(const dvm_module *m, char *buf, size_t size);

/* Runs function `f` with `args` (borrowed for the call) and writes its
 * results into `results[0..nresults)`, each holding one reference: clear
 * them with dvm_value_clear. `nresults` must equal the function's result
 * count. On failure no result is written and the VM stays usable. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_invoke(dvm_vm *vm, int f, const dvm_value *args, int nargs,
                                       dvm_value *results, int nresults);

/* dvm_vm_invoke with results bound to the caller's tensors (as ONNX
 * Runtime's IOBinding binds an output to a preallocated value): where
 * bound[k] holds a tensor (borrowed for the call; bound may be NULL, and
 * bound[k] of kind DVM_VAL_NONE leaves result k unbound), result k is that
 * tensor. The kernel that makes the result writes into it where the
 * function allocates the result itself (the compiler's `alloc_result`);
 * otherwise the result is copied into it after the run (counted in
 * dvm_vm_stats.result_copies). Its dtype, shape and device must be the
 * result's: a mismatch fails naming the result and both. A bound tensor
 * may also be an argument (a KV cache as both past and present) only
 * where the kernel that writes it reads that argument in place, as
 * GroupQueryAttention does. results[k] then holds a new reference to
 * bound[k]'s tensor. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_invoke_bound(dvm_vm *vm, int f, const dvm_value *args, int nargs,
                                             const dvm_value *bound, dvm_value *results, int nresults);

/* Asks a running invocation to stop at its next call or back-edge; it then
 * fails with DVM_INTERRUPTED. Safe from any thread. */
DVM_API void dvm_vm_interrupt(dvm_vm *vm);

typedef struct dvm_pool_stats {
  uint64_t in_use;    /* bytes handed out now */
  uint64_t peak;      /* most bytes in use at once */
  uint64_t requested; /* bytes asked for by the storages in use (before rounding to blocks) */
  uint64_t peak_requested; /* most such bytes at once: what dvm inspect --memory predicts */
  uint64_t cached;    /* bytes held for reuse */
  uint64_t allocs;    /* allocations from the system */
  uint64_t reuses;    /* allocations served from the cache */
  uint64_t limit;     /* 0 = none */
  uint64_t requested_total; /* bytes asked for by every allocation so far (for profiles) */
} dvm_pool_stats;

typedef struct dvm_vm_stats {
  dvm_pool_stats pool[DVM_DEVICE_COUNT];
  uint64_t invocations;
  uint64_t instructions; /* executed, all invocations */
  uint64_t kernel_calls;
  uint64_t host_syncs; /* times the host waited for a device (CUDA stream), all invocations */
  uint64_t result_copies; /* bound results copied in after a run (dvm_vm_invoke_bound) */
} dvm_vm_stats;

DVM_API void dvm_vm_get_stats(const dvm_vm *vm, dvm_vm_stats *out);

#ifdef __cplusplus
}
#endif
#endif
