/* Stepping and inspection: what `dvm repl` is built on, for embedders too.
 *
 * dvm_vm_start begins an invocation without running it; dvm_vm_step runs a
 * number of instructions and pauses, or finishes; between steps the frames,
 * registers and current instructions can be read. Instructions are named by
 * their index in their function, as in `dvm disasm`. */
#ifndef DVM_DEBUG_H
#define DVM_DEBUG_H

#include <stdio.h>

#include "dvm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Begins invoking f with args (borrowed), paused before the first
 * instruction. Fails if a started invocation is under way. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_start(dvm_vm *vm, int f, const dvm_value *args, int nargs);

/* Runs up to n instructions. *finished becomes 1 when the function has
 * returned (its results wait in dvm_vm_take_results). On a runtime error
 * the invocation ends (frames released) and the status says where. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_step(dvm_vm *vm, uint64_t n, int *finished);

/* Moves the finished invocation's results into results[0..n) (each holds
 * one reference); returns how many there were. */
DVM_API int dvm_vm_take_results(dvm_vm *vm, dvm_value *results, int n);

/* Abandons a started invocation, releasing its frames and results. */
DVM_API void dvm_vm_stop(dvm_vm *vm);

/* Frames of the paused invocation: level 0 is the innermost. */
typedef struct dvm_frame_info {
  int function;
  int instruction; /* the next to run */
  int nregs;
} dvm_frame_info;

DVM_API int dvm_vm_depth(const dvm_vm *vm);
DVM_API void dvm_vm_frame(const dvm_vm *vm, int level, dvm_frame_info *out);
/* Register `reg` of the frame at `level` (borrowed; valid until the next step). */
DVM_API const dvm_value *dvm_vm_register(const dvm_vm *vm, int level, int reg);

/* What an instruction is, for listings and breakpoints. */
typedef struct dvm_instr_info {
  const char *opcode;
  const char *node;   /* source node, or NULL */
  const char *callee; /* kernel, shape function, host function or function it names, or NULL */
} dvm_instr_info;

DVM_API int dvm_function_instr_count(const dvm_module *m, int f);
DVM_API void dvm_function_instr(const dvm_module *m, int f, int i, dvm_instr_info *out);
/* Prints instruction i of f as `dvm disasm` does (no newline). */
DVM_API void dvm_function_print_instr(const dvm_module *m, int f, int i, FILE *out);

/* Kernel table entry k (0 <= k < dvm_module_kernel_count), for listings
 * such as `dvm inspect`: the payload is the entry's bytes as the file has
 * them (a fused program, a DVMG payload of generated CUDA kernels:
 * docs/bytecode.md), borrowed for as long as m lives. */
typedef struct dvm_kernel_info {
  const char *name;
  dvm_device_kind device;
  int nvariants; /* how many the bytecode may select from (1: none) */
  const void *payload;
  size_t payload_size;
} dvm_kernel_info;

DVM_API void dvm_module_kernel(const dvm_module *m, int k, dvm_kernel_info *out);

#ifdef __cplusplus
}
#endif
#endif
