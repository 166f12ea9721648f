/* Bound results (dvm_vm_invoke_bound): alloc_result writes into the
 * caller's tensor, a result the function makes otherwise is copied in, a
 * mismatch is an error naming the result, and the verifier checks the
 * result index. A paged KV cache (dvm_tensor_wrap_paged) reaches no kernel
 * that does not read it through its table, and is never copied. */
#include <stdlib.h>
#include <string.h>

#include "asm.h"
#include "bytecode.h"
#include "dvm/dvm.h"
#include "harness.h"

/* z = x + y is allocated as result 0; w = z + y by a plain alloc */
static const char program[] =
    ".kernel add cpu 1\n"
    ".shapefn broadcast\n"
    ".func main regs=6\n"
    "  .sym n r5 1 1000\n"
    "  .param x tensor f32 [n]\n"
    "  .param y tensor f32 [n]\n"
    "  .result z tensor f32 [n]\n"
    "  .result w tensor f32 [n]\n"
    "  guard r0, 0\n"
    "  guard r1, 1\n"
    "  shapefn broadcast, (r2), (r0, r1)\n"
    "  alloc_result r3, f32, r2, cpu, %d\n"
    "  invoke add, -, (r3), (r0, r1), ()\n"
    "  alloc r4, f32, r2, cpu\n"
    "  invoke add, -, (r4), (r3, r1), ()\n"
    "  ret (r3, r4)\n"
    ".end\n";

static dvm_status *build(int result, dvm_module **out) {
  char text[sizeof program + 16];
  snprintf(text, sizeof text, program, result);
  dvm_module *built;
  uint8_t *bytes;
  size_t size;
  dvm_status *st = dvm_asm_parse(text, strlen(text), "bound.dvms", &built);
  if (st) return st;
  st = dvm_bc_write(built, &bytes, &size);
  dvm_module_release(built);
  if (st) return st;
  CHECK(size > 10 && bytes[10] == 3); /* alloc_result needs a 1.3 reader */
  st = dvm_module_load_memory(bytes, size, NULL, out);
  free(bytes);
  return st;
}

/* y = x + x, y made by the given allocation (a plain alloc, or
 * alloc_result: the bound tensor itself) */
static const char paged_program[] =
    ".kernel add cpu 1\n"
    ".shapefn broadcast\n"
    ".func main regs=3\n"
    "  .param x tensor f32 [1,2,8,4]\n"
    "  .result y tensor f32 [1,2,8,4]\n"
    "  guard r0, 0\n"
    "  shapefn broadcast, (r1), (r0, r0)\n"
    "  %s\n"
    "  invoke add, -, (r2), (r0, r0), ()\n"
    "  ret (r2)\n"
    ".end\n";

static dvm_vm *paged_vm(const char *alloc, dvm_module **m) {
  char text[sizeof paged_program + 64];
  snprintf(text, sizeof text, paged_program, alloc);
  dvm_module *built;
  uint8_t *bytes;
  size_t size;
  CHECK_OK(dvm_asm_parse(text, strlen(text), "paged.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  dvm_module_release(built);
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, m));
  free(bytes);
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(*m, NULL, &vm));
  return vm;
}

static void paged_refused(void) {
  dvm_module *m, *m_result;
  dvm_vm *vm = paged_vm("alloc r2, f32, r1, cpu", &m), *vm_result = paged_vm("alloc_result r2, f32, r1, cpu, 0", &m_result);
  float pool[2 * 2 * 4 * 4] = {0};
  int32_t table[2] = {1, 0};
  dvm_tensor_pages pages = {table, 2, 4, 2};
  int64_t dims[4] = {1, 2, 8, 4};
  dvm_tensor *paged, *plain;
  CHECK_OK(dvm_tensor_wrap_paged(DVM_F32, dims, pool, &pages, &paged));
  CHECK_OK(dvm_tensor_create(DVM_F32, 4, dims, &plain));
  memset(dvm_tensor_data(plain), 0, dvm_tensor_nbytes(plain));
  dvm_value arg = dvm_value_tensor(paged), res, bound = dvm_value_tensor(paged);
  CHECK_ERR(dvm_vm_invoke(vm, 0, &arg, 1, &res, 1), DVM_UNIMPLEMENTED,
            "add: r0 is a paged KV cache, which only kernels reading it through its block table take");
  arg = dvm_value_tensor(plain);
  CHECK_ERR(dvm_vm_invoke_bound(vm, 0, &arg, 1, &bound, &res, 1), DVM_UNIMPLEMENTED,
            "a paged KV cache is not copied");
  /* the bound paged tensor as the kernel's output */
  CHECK_ERR(dvm_vm_invoke_bound(vm_result, 0, &arg, 1, &bound, &res, 1), DVM_UNIMPLEMENTED,
            "add: r2 is a paged KV cache, which only kernels reading it through its block table take");
  pages.block_rows = 0;
  dvm_tensor *bad = NULL;
  CHECK_ERR(dvm_tensor_wrap_paged(DVM_F32, dims, pool, &pages, &bad), DVM_INVALID_ARGUMENT, "block_rows >= 1");
  pages.block_rows = 4, pages.pool_dtype = DVM_F16; /* f16 elements only under an f32 tensor */
  CHECK_ERR(dvm_tensor_wrap_paged(DVM_I32, dims, pool, &pages, &bad), DVM_INVALID_ARGUMENT,
            "paged tensor: a pool of f16 elements under i32 (the tensor's dtype, or f16 under f32)");
  dvm_tensor_release(paged);
  dvm_tensor_release(plain);
  dvm_vm_destroy(vm);
  dvm_vm_destroy(vm_result);
  dvm_module_release(m);
  dvm_module_release(m_result);
}

static dvm_tensor *vec(dvm_dtype dt, int64_t n, float start) {
  dvm_tensor *t;
  CHECK_OK(dvm_tensor_create(dt, 1, &n, &t));
  for (int64_t i = 0; dt == DVM_F32 && i < n; i++) ((float *)dvm_tensor_data(t))[i] = start + (float)i;
  return t;
}

static uint64_t copies(dvm_vm *vm) {
  dvm_vm_stats s;
  dvm_vm_get_stats(vm, &s);
  return s.result_copies;
}

int main(void) {
  dvm_module *m;
  CHECK_ERR(build(2, &m), DVM_CORRUPT, "operand 4: result 2 out of range (2)");
  CHECK_OK(build(0, &m));
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  dvm_tensor *x = vec(DVM_F32, 5, 1), *y = vec(DVM_F32, 5, 10), *z = vec(DVM_F32, 5, 0), *w = vec(DVM_F32, 5, 0);
  dvm_value args[2] = {dvm_value_tensor(x), dvm_value_tensor(y)}, res[2];

  /* z written in place; w made by the function, then copied in */
  dvm_value bound[2] = {dvm_value_tensor(z), dvm_value_tensor(w)};
  CHECK_OK(dvm_vm_invoke_bound(vm, 0, args, 2, bound, res, 2));
  CHECK(res[0].u.tensor == z && res[1].u.tensor == w && copies(vm) == 1);
  CHECK(((float *)dvm_tensor_data(z))[4] == 5 + 14 && ((float *)dvm_tensor_data(w))[4] == 19 + 14);
  dvm_value_clear(&res[0]);
  dvm_value_clear(&res[1]);

  /* unbound: the function's own tensors, as dvm_vm_invoke */
  bound[1] = (dvm_value){.kind = DVM_VAL_NONE};
  CHECK_OK(dvm_vm_invoke_bound(vm, 0, args, 2, bound, res, 2));
  CHECK(res[0].u.tensor == z && res[1].u.tensor != w && copies(vm) == 1);
  dvm_value_clear(&res[0]);
  dvm_value_clear(&res[1]);
  CHECK_OK(dvm_vm_invoke(vm, 0, args, 2, res, 2));
  CHECK(res[0].u.tensor != z && ((float *)dvm_tensor_data(res[0].u.tensor))[0] == 11);
  dvm_value_clear(&res[0]);
  dvm_value_clear(&res[1]);

  /* a cache's pattern: the bound result is also the argument the kernel reads in place */
  bound[0] = dvm_value_tensor(x);
  CHECK_OK(dvm_vm_invoke_bound(vm, 0, args, 2, bound, res, 2));
  CHECK(res[0].u.tensor == x && ((float *)dvm_tensor_data(x))[2] == 3 + 12);
  dvm_value_clear(&res[0]);
  dvm_value_clear(&res[1]);

  /* mismatches, and the VM usable after them */
  dvm_tensor *short_z = vec(DVM_F32, 4, 0), *int_w = vec(DVM_I32, 5, 0);
  bound[0] = dvm_value_tensor(short_z);
  CHECK_ERR(dvm_vm_invoke_bound(vm, 0, args, 2, bound, res, 2), DVM_INVALID_ARGUMENT,
            "instruction 3 (alloc_result): result \"z\": the bound tensor is f32[4] on cpu, the function makes f32[5] on cpu");
  bound[0] = (dvm_value){.kind = DVM_VAL_NONE};
  bound[1] = dvm_value_tensor(int_w);
  CHECK_ERR(dvm_vm_invoke_bound(vm, 0, args, 2, bound, res, 2), DVM_INVALID_ARGUMENT,
            "result \"w\": the bound tensor is i32[5], the function made f32[5]");
  CHECK_OK(dvm_vm_invoke_bound(vm, 0, args, 2, NULL, res, 2));
  dvm_value_clear(&res[0]);
  dvm_value_clear(&res[1]);

  dvm_tensor_release(short_z);
  dvm_tensor_release(int_w);
  dvm_tensor_release(x);
  dvm_tensor_release(y);
  dvm_tensor_release(z);
  dvm_tensor_release(w);
  dvm_vm_destroy(vm);
  dvm_module_release(m);
  paged_refused();
  return harness_finish("bound");
}
