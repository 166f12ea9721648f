/* Host-side cost of the VM, in one run:
 *   - interpreter cost per instruction of scalar shape arithmetic
 *   - alloc_tensor + release from a warm pool (and alloc, which also takes a
 *     storage from the pool), with the loop's own cost subtracted
 *   - a whole trivial invocation through the library API
 * Prints a table and one JSON line. Usage: bench_vm [--quick] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asm.h"
#include "bench.h"
#include "dvm/dvm.h"

static const char program[] =
    /* n iterations of 8 scalar instructions (the loop control included) */
    ".func scalar regs=8\n"
    "  .param n int\n"
    "  .result r int\n"
    "  imm r1, 0\n  imm r2, 1\n  imm r3, 3\n  imm r4, 0\n"
    "L0:\n"
    "  add r1, r1, r2\n  mul r5, r1, r3\n  sub r5, r5, r1\n  max r4, r4, r5\n"
    "  min r6, r5, r3\n  add r4, r4, r6\n"
    "  lt r7, r1, r0\n  jnz r7, L0\n"
    "  ret (r4)\n"
    ".end\n"
    /* the loop alone: the baseline subtracted from the allocation loops */
    ".func loop regs=8\n"
    "  .param n int\n"
    "  .result r int\n"
    "  imm r1, 0\n  imm r2, 1\n"
    "L0:\n"
    "  add r1, r1, r2\n  lt r7, r1, r0\n  jnz r7, L0\n"
    "  ret (r1)\n"
    ".end\n"
    ".func alloc_tensor regs=8\n"
    "  .param n int\n"
    "  .result r int\n"
    "  imm r1, 0\n  imm r2, 1\n  imm r3, 4096\n  imm r4, 0\n"
    "  alloc_storage r5, r3, cpu, 64\n"
    "L0:\n"
    "  alloc_tensor_i r6, r5, r4, f32, [16, 64]\n  release r6\n"
    "  add r1, r1, r2\n  lt r7, r1, r0\n  jnz r7, L0\n"
    "  ret (r1)\n"
    ".end\n"
    ".func alloc regs=8\n"
    "  .param n int\n"
    "  .result r int\n"
    "  imm r1, 0\n  imm r2, 1\n  imm r3, 16\n  imm r4, 64\n"
    "  make_shape r5, (r3, r4)\n"
    "L0:\n"
    "  alloc r6, f32, r5, cpu\n  release r6\n"
    "  add r1, r1, r2\n  lt r7, r1, r0\n  jnz r7, L0\n"
    "  ret (r1)\n"
    ".end\n"
    ".func trivial regs=1\n"
    "  .param x int\n"
    "  .result y int\n"
    "  ret (r0)\n"
    ".end\n"
    ".func guarded regs=2\n"
    "  .sym n r1 1 1000000\n"
    "  .param x tensor f32 [n]\n"
    "  .result y tensor f32 [n]\n"
    "  guard r0, 0\n"
    "  ret (r0)\n"
    ".end\n";

/* Best of `reps` runs of function f with n: seconds, and instructions per run. */
static double time_loop(dvm_vm *vm, int f, int64_t n, int reps, double *instrs) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    dvm_vm_stats before, after;
    dvm_vm_get_stats(vm, &before);
    dvm_value arg = dvm_value_int(n), res;
    double t0 = now();
    die(dvm_vm_invoke(vm, f, &arg, 1, &res, 1));
    double t = now() - t0;
    dvm_vm_get_stats(vm, &after);
    *instrs = (double)(after.instructions - before.instructions);
    if (t < best) best = t;
  }
  return best;
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  int64_t n = quick ? 100000 : 10000000;
  int reps = quick ? 1 : 5;
  dvm_module *built, *m;
  uint8_t *bytes;
  size_t size;
  die(dvm_asm_parse(program, sizeof program - 1, "bench_vm", &built));
  die(dvm_bc_write(built, &bytes, &size));
  die(dvm_module_load_memory(bytes, size, NULL, &m));
  dvm_vm *vm;
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.threads = 1;
  die(dvm_vm_create(m, &o, &vm));

  double ins, ins_loop;
  double t_scalar = time_loop(vm, dvm_module_find_function(m, "scalar"), n, reps, &ins);
  double ns_per_instr = 1e9 * t_scalar / ins;
  double t_loop = time_loop(vm, dvm_module_find_function(m, "loop"), n, reps, &ins_loop);
  double t_at = time_loop(vm, dvm_module_find_function(m, "alloc_tensor"), n, reps, &ins);
  double t_al = time_loop(vm, dvm_module_find_function(m, "alloc"), n, reps, &ins);
  double ns_alloc_tensor = 1e9 * (t_at - t_loop) / (double)n;
  double ns_alloc = 1e9 * (t_al - t_loop) / (double)n;

  /* trivial invocations through the API */
  int64_t calls = quick ? 10000 : 2000000;
  double best_trivial = 1e30, best_guarded = 1e30;
  int64_t dims[1] = {128};
  dvm_tensor *x;
  die(dvm_tensor_create(DVM_F32, 1, dims, &x));
  for (int r = 0; r < reps; r++) {
    int ft = dvm_module_find_function(m, "trivial"), fg = dvm_module_find_function(m, "guarded");
    dvm_value a = dvm_value_int(1), res;
    double t0 = now();
    for (int64_t i = 0; i < calls; i++) die(dvm_vm_invoke(vm, ft, &a, 1, &res, 1));
    double t = (now() - t0) / (double)calls;
    if (t < best_trivial) best_trivial = t;
    a = dvm_value_tensor(x);
    t0 = now();
    for (int64_t i = 0; i < calls; i++) {
      die(dvm_vm_invoke(vm, fg, &a, 1, &res, 1));
      dvm_value_clear(&res);
    }
    t = (now() - t0) / (double)calls;
    if (t < best_guarded) best_guarded = t;
  }
  dvm_tensor_release(x);

  printf("%-52s %10s %10s\n", "measure", "ns", "target");
  printf("%-52s %10.2f %10s\n", "interpreter, per scalar instruction", ns_per_instr, "<= 10");
  printf("%-52s %10.2f %10s\n", "loop overhead per iteration (3 instructions)", 1e9 * t_loop / (double)n, "");
  printf("%-52s %10.2f %10s\n", "alloc_tensor + release (warm pool)", ns_alloc_tensor, "<= 100");
  printf("%-52s %10.2f %10s\n", "alloc (storage from pool + tensor) + release", ns_alloc, "");
  printf("%-52s %10.2f %10s\n", "dvm_vm_invoke, trivial function (int in, int out)", 1e9 * best_trivial, "<= 1000");
  printf("%-52s %10.2f %10s\n", "dvm_vm_invoke, tensor in/out with a guard", 1e9 * best_guarded, "");
  printf("{\"bench\":\"vm\",\"ns_per_instruction\":%.3f,\"ns_alloc_tensor_release\":%.2f,"
         "\"ns_alloc_release\":%.2f,\"ns_invoke_trivial\":%.1f,\"ns_invoke_guarded\":%.1f}\n",
         ns_per_instr, ns_alloc_tensor, ns_alloc, 1e9 * best_trivial, 1e9 * best_guarded);
  dvm_vm_destroy(vm);
  dvm_module_release(m);
  dvm_module_release(built);
  free(bytes);
  return 0;
}
