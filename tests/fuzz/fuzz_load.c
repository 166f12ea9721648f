/* Fuzz target for the .dvmb loader and verifier. Any input (with its size
 * and checksum fields made right) must load or be refused with a status;
 * what loads must round-trip through the text form to the same canonical
 * bytes, and must run without crashing: every function without parameters
 * is invoked under a step and memory budget (its errors are expected, a
 * crash is not). A broken promise aborts, which the fuzzer reports.
 *
 * Stand-ins for the host functions of tests/corrupt/base.dvms and
 * tests/asm are registered under the same names and signatures, so that the
 * seeds made from those programs link and run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "asm.h"
#include "dvm/vm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

static int64_t twice(int64_t x) { return (int64_t)((uint64_t)x * 2); }
static int64_t add3(int64_t a, int64_t b, int64_t c) {
  return (int64_t)((uint64_t)a + (uint64_t)b + (uint64_t)c); /* wraps, never UB */
}
static double scale(double x, int64_t k) { return x * (double)k; }
static dvm_tensor *same(dvm_tensor *t) {
  dvm_tensor_retain(t);
  return t;
}
static dvm_tensor *fail(dvm_tensor *t) { return NULL; }

static dvm_hostfn_registry *registry(void) {
  static dvm_hostfn_registry *reg;
  if (!reg) {
    require(!dvm_hostfn_registry_create(&reg));
    require(!dvm_hostfn_register(reg, "twice", "i->i", (void (*)(void))twice));
    require(!dvm_hostfn_register(reg, "add3", "iii->i", (void (*)(void))add3));
    require(!dvm_hostfn_register(reg, "scale", "fi->f", (void (*)(void))scale));
    require(!dvm_hostfn_register(reg, "double", "t->t", (void (*)(void))same));
    require(!dvm_hostfn_register(reg, "fail", "t->t", (void (*)(void))fail));
  }
  return reg;
}

/* Canonical bytes of m and of its disassembly reassembled are the same. */
static void check_roundtrip(const dvm_module *m) {
  uint8_t *a = NULL, *b = NULL;
  size_t na = 0, nb = 0, ntext = 0;
  char *text = NULL;
  dvm_module *again = NULL;
  require(!dvm_bc_write(m, &a, &na));
  FILE *out = open_memstream(&text, &ntext);
  require(out != NULL);
  dvm_disasm_module(m, out);
  require(fclose(out) == 0);
  dvm_status *st = dvm_asm_parse(text, ntext, "disassembly", &again);
  if (st) {
    fprintf(stderr, "the disassembly does not assemble: %s\n%s", dvm_status_message(st), text);
    abort();
  }
  require(!dvm_bc_write(again, &b, &nb));
  require(na == nb && memcmp(a, b, na) == 0);
  dvm_module_release(again);
  free(text);
  free(a);
  free(b);
}

static void run_all(dvm_module *m) {
  dvm_vm_options opts;
  dvm_vm_options_init(&opts);
  opts.threads = 1;
  opts.step_limit = 10000;
  opts.pool_limit = 64u << 20;
  /* frames of up to 2^20 registers each: keep their sum under the
   * fuzzer's malloc limit */
  opts.max_depth = 16;
  dvm_vm *vm = NULL;
  require(!dvm_vm_create(m, &opts, &vm));
  for (int f = 0; f < dvm_module_function_count(m); f++) {
    if (dvm_function_param_count(m, f) != 0) continue;
    int n = dvm_function_result_count(m, f);
    dvm_value *results = calloc((size_t)n + 1, sizeof *results);
    require(results != NULL);
    dvm_status *st = dvm_vm_invoke(vm, f, NULL, 0, results, n);
    require(!st || dvm_status_code(st) != DVM_INTERNAL);
    dvm_status_free(st);
    for (int i = 0; i < n; i++) dvm_value_clear(&results[i]);
    free(results);
  }
  dvm_vm_destroy(vm);
}

/* The header's size and checksum made to match the input: a random change
 * would almost never keep the crc32 right, and the fuzzer would see nothing
 * past it. (tests/corrupt covers those two checks.) */
static uint8_t *fix_header(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  require(copy != NULL);
  if (size) memcpy(copy, data, size);
  if (size < DVM_BC_HEADER_SIZE) return copy;
  uint32_t crc = (uint32_t)crc32_z(0, copy + DVM_BC_HEADER_SIZE, size - DVM_BC_HEADER_SIZE);
  for (int i = 0; i < 8; i++) copy[16 + i] = (uint8_t)((uint64_t)size >> (8 * i));
  for (int i = 0; i < 4; i++) copy[24 + i] = (uint8_t)(crc >> (8 * i));
  return copy;
}

/* A module with external constants (docs/bytecode.md 3.9) cannot load from
 * memory: it is loaded again from a file in a scratch folder that holds the
 * "w.bin" tests/corrupt/ext.dvms names (byte i is i * 7 + 1), so that the
 * mapping, range and hash checks run too. */
static char dir[] = "/tmp/dvm_fuzz_load_XXXXXX";
static char path[sizeof dir + 16];

static void remove_folder(void) {
  snprintf(path, sizeof path, "%s/w.bin", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/m.dvmb", dir);
  remove(path);
  remove(dir);
}

static dvm_status *load_from_folder(const uint8_t *bytes, size_t size, const dvm_load_options *lo,
                                    dvm_module **m) {
  if (!path[0]) {
    require(mkdtemp(dir) != NULL);
    atexit(remove_folder);
    uint8_t w[4096];
    for (int i = 0; i < 4096; i++) w[i] = (uint8_t)(i * 7 + 1);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    FILE *f = fopen(path, "wb");
    require(f && fwrite(w, 1, sizeof w, f) == sizeof w && fclose(f) == 0);
    snprintf(path, sizeof path, "%s/m.dvmb", dir);
  }
  FILE *f = fopen(path, "wb");
  require(f && fwrite(bytes, 1, size, f) == size && fclose(f) == 0);
  return dvm_module_load_file(path, lo, m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dvm_load_options lo = {registry()};
  dvm_module *m = NULL;
  uint8_t *fixed = fix_header(data, size);
  dvm_status *st = dvm_module_load_memory(fixed, size, &lo, &m);
  if (st && dvm_status_code(st) == DVM_UNIMPLEMENTED) {
    dvm_status_free(st);
    st = load_from_folder(fixed, size, &lo, &m);
  }
  free(fixed);
  if (st) {
    /* refused: corrupt, or naming a kernel, shape or host function this
     * dvm does not have, or one of a signature other than registered */
    dvm_code code = dvm_status_code(st);
    require(code == DVM_CORRUPT || code == DVM_NOT_FOUND || code == DVM_INVALID_ARGUMENT ||
            code == DVM_OUT_OF_MEMORY || code == DVM_IO);
    require(dvm_status_message(st)[0] != 0);
    dvm_status_free(st);
    return 0;
  }
  check_roundtrip(m);
  run_all(m);
  dvm_module_release(m);
  return 0;
}
