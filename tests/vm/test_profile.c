/* The profiler: per-site counts and times add up to the invocation's
 * totals (and to the VM's own counters), kernel sites carry their node and
 * shapes, the trace holds one event per invocation and kernel call, and a
 * detached profile measures nothing more. */
#include <stdlib.h>
#include <string.h>

#include "asm.h"
#include "dvm/dvm.h"
#include "harness.h"

/* main doubles x three times in a loop, then once more in a called function */
static const char program[] =
    ".kernel add cpu 1\n"
    ".shapefn broadcast\n"
    ".func main regs=8\n"
    "  .sym n r7 1 1000\n"
    "  .param x tensor f32 [n]\n"
    "  .result z tensor f32 [n]\n"
    "  guard r0, 0\n"
    "  imm r1, 3\n"
    "  imm r2, 1\n"
    "  move r3, r0\n"
    "L1:\n"
    "  .loc double_in_loop\n"
    "  shapefn broadcast, (r4), (r3, r3)\n"
    "  alloc r5, f32, r4, cpu\n"
    "  invoke add, -, (r5), (r3, r3), ()\n"
    "  .loc -\n"
    "  move r3, r5\n"
    "  sub r1, r1, r2\n"
    "  jnz r1, L1\n"
    "  call @twice, (r6), (r3)\n"
    "  ret (r6)\n"
    ".end\n"
    ".func twice regs=3\n"
    "  .param x tensor f32 [?]\n"
    "  .result y tensor f32 [?]\n"
    "  shapefn broadcast, (r1), (r0, r0)\n"
    "  alloc r2, f32, r1, cpu\n"
    "  .loc \"double \\\"called\\\"\"\n"
    "  invoke add, -, (r2), (r0, r0), ()\n"
    "  ret (r2)\n"
    ".end\n";

static dvm_module *load(const char *name) {
  dvm_module *built, *m = NULL;
  uint8_t *bytes;
  size_t size;
  CHECK_OK(dvm_asm_parse(program, sizeof program - 1, name, &built));
  if (!built) return NULL;
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, &m));
  dvm_module_release(built);
  free(bytes);
  return m;
}

static void run(dvm_vm *vm, int64_t n) {
  dvm_tensor *x;
  CHECK_OK(dvm_tensor_create(DVM_F32, 1, &n, &x));
  float *d = dvm_tensor_data(x);
  for (int64_t i = 0; i < n; i++) d[i] = (float)i;
  dvm_value arg = dvm_value_tensor(x), r = {0};
  CHECK_OK(dvm_vm_invoke(vm, 0, &arg, 1, &r, 1));
  CHECK(r.kind == DVM_VAL_TENSOR && ((const float *)dvm_tensor_data(r.u.tensor))[n - 1] == 16 * (float)(n - 1));
  dvm_value_clear(&r);
  dvm_tensor_release(x);
}

static int find_site(const dvm_profile *p, int func, const char *opcode, dvm_profile_site *out) {
  for (int i = 0; i < dvm_profile_site_count(p); i++) {
    dvm_profile_get_site(p, i, out);
    if (out->function == func && strcmp(out->opcode, opcode) == 0) return 1;
  }
  return 0;
}

static void test_totals(dvm_module *m) {
  dvm_vm *vm;
  dvm_profile *p;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  CHECK_OK(dvm_profile_create(m, 1, 0, &p));
  run(vm, 4); /* before attaching: not measured */
  dvm_vm_stats before, after;
  dvm_vm_get_stats(vm, &before);
  CHECK_OK(dvm_vm_set_profile(vm, p));
  run(vm, 1000);
  run(vm, 1000);
  run(vm, 7); /* other shapes at the same sites */
  CHECK_OK(dvm_vm_set_profile(vm, NULL));
  dvm_vm_get_stats(vm, &after);
  run(vm, 5); /* after detaching: not measured */

  dvm_profile_totals t;
  dvm_profile_get_totals(p, &t);
  CHECK(t.invocations == 3);
  uint64_t calls = 0, ns = 0, kernels = 0, allocs = 0, bytes = 0;
  for (int i = 0; i < dvm_profile_site_count(p); i++) {
    dvm_profile_site s;
    dvm_profile_get_site(p, i, &s);
    CHECK(s.calls > 0 && s.ns > 0);
    calls += s.calls;
    ns += s.ns;
    allocs += s.allocs;
    bytes += s.alloc_bytes;
    if (strcmp(s.opcode, "invoke") == 0) kernels += s.calls;
  }
  /* main: 4 + 3 * 6 + 2 (call, ret); twice: 4 */
  CHECK(calls == t.instructions && t.instructions == 3 * (24 + 4));
  CHECK(t.instructions == after.instructions - before.instructions);
  CHECK(kernels == t.kernel_calls && t.kernel_calls == 3 * 4);
  CHECK(t.kernel_calls == after.kernel_calls - before.kernel_calls);
  uint64_t pool_allocs = after.pool[DVM_DEVICE_CPU].allocs + after.pool[DVM_DEVICE_CPU].reuses -
                         before.pool[DVM_DEVICE_CPU].allocs - before.pool[DVM_DEVICE_CPU].reuses;
  CHECK(allocs == t.allocs && t.allocs == 3 * 4 && t.allocs == pool_allocs);
  CHECK(bytes == t.alloc_bytes && bytes == 2 * 4 * 4000 + 4 * 4 * 7);
  CHECK(ns <= t.ns && ns > 0);
  CHECK(t.host_syncs == 0);

  dvm_profile_site s;
  CHECK(find_site(p, 0, "invoke", &s));
  CHECK(s.calls == 9 && s.node && strcmp(s.node, "double_in_loop") == 0 && strcmp(s.callee, "add") == 0);
  CHECK(strcmp(s.shapes, "f32[1000] f32[1000] -> f32[1000]") == 0 && s.shapes_vary);
  CHECK(find_site(p, 1, "invoke", &s));
  CHECK(s.calls == 3 && strcmp(s.node, "double \"called\"") == 0);
  CHECK(find_site(p, 0, "alloc", &s) && s.allocs == 9 && s.alloc_bytes == 2 * 3 * 4000 + 3 * 28);

  /* the trace: one event per invocation and per kernel call */
  CHECK(t.events == 3 + 12 && t.events_dropped == 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK_OK(dvm_profile_write_trace(p, f));
  fclose(f);
  int complete = 0, kernel = 0;
  for (const char *q = buf; (q = strstr(q, "\"ph\":\"X\"")); q++) complete++;
  for (const char *q = buf; (q = strstr(q, "\"cat\":\"kernel\"")); q++) kernel++;
  CHECK(complete == 15 && kernel == 12);
  CHECK(strncmp(buf, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 39) == 0);
  CHECK(strstr(buf, "\"node\":\"double \\\"called\\\"\"") != NULL);
  free(buf);

  /* the report names the busiest site's node and every class */
  buf = NULL;
  f = open_memstream(&buf, &len);
  CHECK_OK(dvm_profile_print(p, 0, f));
  fclose(f);
  CHECK(strstr(buf, "profile: 3 invocations") && strstr(buf, "double_in_loop") && strstr(buf, "instruction class"));
  free(buf);

  dvm_profile_reset(p);
  dvm_profile_get_totals(p, &t);
  CHECK(t.invocations == 0 && t.events == 0 && dvm_profile_site_count(p) == 0);
  dvm_vm_destroy(vm);
  dvm_profile_destroy(p);
}

static void test_errors(dvm_module *m, dvm_module *other) {
  dvm_vm *vm;
  dvm_profile *p;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  CHECK_OK(dvm_profile_create(other, 0, 0, &p));
  CHECK_ERR(dvm_vm_set_profile(vm, p), DVM_INVALID_ARGUMENT, "another module");
  CHECK_ERR(dvm_profile_write_trace(p, stdout), DVM_FAILED_PRECONDITION, "without trace");
  dvm_profile_destroy(p);
  /* the trace keeps at most max_events and counts the rest */
  CHECK_OK(dvm_profile_create(m, 1, 5, &p));
  CHECK_OK(dvm_vm_set_profile(vm, p));
  run(vm, 3);
  run(vm, 3);
  dvm_profile_totals t;
  dvm_profile_get_totals(p, &t);
  CHECK(t.events == 5 && t.events_dropped == 5);
  dvm_vm_destroy(vm);
  dvm_profile_destroy(p);
}

int main(void) {
  dvm_module *m = load("profile.dvms"), *other = load("other.dvms");
  if (!m || !other) return 1;
  test_totals(m);
  test_errors(m, other);
  dvm_module_release(m);
  dvm_module_release(other);
  return harness_finish("profile");
}
