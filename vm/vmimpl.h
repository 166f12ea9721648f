/* The VM instance's layout, shared by vm.c (lifecycle, API) and interp.c
 * (the interpreter loop). */
#ifndef DVM_VMIMPL_H
#define DVM_VMIMPL_H

#include "bytecode.h"
#include "constcopy.h"
#include "device.h"
#include "dvm/vm.h"
#include "pool.h"

typedef struct dvm_frame {
  uint32_t func;
  uint32_t pc;           /* word offset of the current instruction */
  size_t base;           /* first register in vm->regs */
  const int64_t *dsts;   /* caller's result registers (the call's list items); NULL for the entry frame */
} dvm_frame;

struct dvm_vm {
  dvm_module *m;
  dvm_vm_options opts;
  dvm_pool *pools[DVM_DEVICE_COUNT]; /* made on first use */
  dvm_exec exec;                     /* exec.streams: made on first use */
  dvm_constcopy consts[DVM_DEVICE_COUNT]; /* device copies of module constants */
  dvm_value *regs;
  size_t regs_cap;
  dvm_frame *frames;
  int nframes;
  dvm_value *results; /* the entry frame's results go here */
  const dvm_value *bound; /* the entry frame's bound results (dvm_vm_invoke_bound), or NULL */
  dvm_value *scratch; /* shape function arguments and results */
  size_t scratch_cap;
  atomic_int interrupt;
  uint64_t inv_steps; /* instructions executed by the current invocation */
  int paused;         /* the last run stopped at its budget, frames intact */
  int started;        /* an invocation begun with dvm_vm_start is under way */
  dvm_value *held;    /* results of a started invocation, until taken */
  int nheld;
  dvm_vm_stats stats;
  struct dvm_profile *profile; /* attached by dvm_vm_set_profile, or NULL */
};

/* The VM's stream on a device (vm/device.h), made on first use: at
 * creation on the VM's own device, at the first copy or kernel there on
 * another. */
DVM_MUST_USE dvm_status *dvm_vm_stream(dvm_vm *vm, dvm_device_kind dev, dvm_stream **out);

/* The pool for a device, made on first use. */
DVM_MUST_USE dvm_status *dvm_vm_pool(dvm_vm *vm, dvm_device_kind dev, dvm_pool **out);

/* Runs from the top frame until the frame count drops to `stop`, or until
 * `budget` instructions have run (then vm->paused is set and the frames
 * stay, ready to resume). On failure every frame above `stop` is unwound
 * and its registers released. */
DVM_MUST_USE dvm_status *dvm_interp_run(dvm_vm *vm, int stop, uint64_t budget);

/* Checks and binds the arguments of an invocation and pushes its frame;
 * results will be written to `results`. */
DVM_MUST_USE dvm_status *dvm_vm_begin(dvm_vm *vm, int f, const dvm_value *args, int nargs,
                                      dvm_value *results, int nresults);

/* `copy`: src on device dev into *dst (released first), shared when it is
 * already there (see interp.c). */
DVM_MUST_USE dvm_status *dvm_vm_copy(dvm_vm *vm, dvm_tensor *src, dvm_device_kind dev, dvm_value *dst);

/* Copies src's bytes into dst (same byte size), on whichever devices they
 * are. */
DVM_MUST_USE dvm_status *dvm_vm_copy_into(dvm_vm *vm, dvm_tensor *dst, const dvm_tensor *src);

/* The entry function's results as the caller gets them: tensors a device
 * holds copied to the host (inside tuples too), or, with opts.results_on_device, left there once
 * the device has finished writing them. On failure every result is cleared. */
DVM_MUST_USE dvm_status *dvm_vm_deliver(dvm_vm *vm, dvm_value *results, int n);

/* Runs like dvm_interp_run(vm, stop, UINT64_MAX), one instruction at a
 * time, into vm->profile (profile.c). */
DVM_MUST_USE dvm_status *dvm_profile_run(dvm_vm *vm, int stop);

/* Pops every frame, releasing registers (after a failed or abandoned run). */
void dvm_interp_unwind(dvm_vm *vm, int stop);

/* Pushes a frame for function f whose registers start zeroed. */
DVM_MUST_USE dvm_status *dvm_vm_push_frame(dvm_vm *vm, uint32_t f, const int64_t *dsts);

#endif
