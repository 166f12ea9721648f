/* Stepping and inspection (see dvm/debug.h). */
#include <stdlib.h>

#include "asm.h"
#include "dvm/debug.h"
#include "instr.h"
#include "vmimpl.h"

dvm_status *dvm_vm_start(dvm_vm *vm, int f, const dvm_value *args, int nargs) {
  if (vm->started)
    return dvm_status_new(DVM_FAILED_PRECONDITION, "a stepped invocation is under way: stop it first");
  int n = f >= 0 && (uint32_t)f < vm->m->nfuncs ? (int)vm->m->funcs[f].nresults : 0;
  dvm_value *held = calloc((size_t)(n ? n : 1), sizeof *held);
  if (!held) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = dvm_vm_begin(vm, f, args, nargs, held, n);
  if (st) {
    free(held);
    return st;
  }
  vm->held = held;
  vm->nheld = n;
  vm->started = 1;
  return NULL;
}

dvm_status *dvm_vm_step(dvm_vm *vm, uint64_t n, int *finished) {
  *finished = 0;
  if (!vm->started) return dvm_status_new(DVM_FAILED_PRECONDITION, "no invocation is under way");
  if (vm->nframes == 0) {
    *finished = 1;
    return NULL;
  }
  dvm_status *st = dvm_interp_run(vm, 0, n);
  if (st) {
    dvm_vm_stop(vm); /* the frames are gone: the invocation is over */
    return st;
  }
  *finished = vm->nframes == 0;
  if (*finished && (st = dvm_vm_deliver(vm, vm->held, vm->nheld))) dvm_vm_stop(vm);
  return st;
}

int dvm_vm_take_results(dvm_vm *vm, dvm_value *results, int n) {
  if (!vm->started || vm->nframes) return 0;
  int k = vm->nheld < n ? vm->nheld : n;
  for (int i = 0; i < k; i++) {
    results[i] = vm->held[i];
    vm->held[i].kind = DVM_VAL_NONE;
  }
  return k;
}

void dvm_vm_stop(dvm_vm *vm) {
  if (!vm->started) return;
  dvm_interp_unwind(vm, 0);
  for (int i = 0; i < vm->nheld; i++) dvm_value_clear(&vm->held[i]);
  free(vm->held);
  vm->held = NULL;
  vm->nheld = 0;
  vm->started = 0;
}

int dvm_vm_depth(const dvm_vm *vm) { return vm->started ? vm->nframes : 0; }

void dvm_vm_frame(const dvm_vm *vm, int level, dvm_frame_info *out) {
  const dvm_frame *fr = &vm->frames[vm->nframes - 1 - level];
  const dvm_func *fn = &vm->m->funcs[fr->func];
  out->function = (int)fr->func;
  out->instruction = dvm_func_instr_index(fn, fr->pc);
  out->nregs = (int)fn->nregs;
}

const dvm_value *dvm_vm_register(const dvm_vm *vm, int level, int reg) {
  const dvm_frame *fr = &vm->frames[vm->nframes - 1 - level];
  return &vm->regs[fr->base + (size_t)reg];
}

int dvm_function_instr_count(const dvm_module *m, int f) { return (int)m->funcs[f].ninstr; }

void dvm_function_instr(const dvm_module *m, int f, int i, dvm_instr_info *out) {
  const dvm_func *fn = &m->funcs[f];
  const int64_t *c = fn->code + fn->starts[i];
  out->opcode = dvm_opinfo_table[c[0]].name;
  out->node = fn->src[i];
  switch (c[0]) {
  case DVM_OP_INVOKE: out->callee = m->kernels[dvm_decode_INVOKE(c).kernel].name; break;
  case DVM_OP_SHAPEFN: out->callee = m->shapefns[dvm_decode_SHAPEFN(c).fn].name; break;
  case DVM_OP_HOSTCALL: out->callee = m->hostfns[dvm_decode_HOSTCALL(c).fn].name; break;
  case DVM_OP_CALL: out->callee = m->funcs[dvm_decode_CALL(c).func].name; break;
  default: out->callee = NULL; break;
  }
}

void dvm_function_print_instr(const dvm_module *m, int f, int i, FILE *out) {
  dvm_disasm_instr(m, &m->funcs[f], (uint32_t)i, out);
}

void dvm_module_kernel(const dvm_module *m, int k, dvm_kernel_info *out) {
  const dvm_kernel_ref *r = &m->kernels[k];
  *out = (dvm_kernel_info){r->name, (dvm_device_kind)r->device, (int)r->nvariants, r->payload,
                           r->payload_size};
}
