/* Allocation failure sweeps, in SQLite's manner: the k-th allocation that
 * libdvm makes (tests/oom.h: malloc, calloc, realloc, aligned_alloc,
 * posix_memalign, strdup, strndup) fails, for k = 1, 2, ... until the
 * operation no longer reaches a k-th, while loading a module from its
 * file and while creating a VM and running it. Each
 * failure must come back as a status, never a crash, leave nothing behind
 * (AddressSanitizer's leak check at exit, in the sanitizer build) and
 * leave the next attempt working. tests/oom.h wraps the allocators at link
 * time, so every call from libdvm's objects is counted. */
#include <stdio.h>
#include <stdlib.h>

#include "dvm/dvm.h"
#include "dvm/asm.h"
#include "oom.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: tesw_oom MATMUL.dvms TMPDIR\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  char text[8192];
  size_t len = f ? fread(text, 1, sizeof text, f) : 0;
  if (f) fclose(f);
  uint8_t *bytes;
  size_t size;
  CHECK_OK(dvm_asm_assemble(text, len, argv[1], &bytes, &size));
  char path[4096];
  snprintf(path, sizeof path, "%s/oom.dvmb", argv[2]);
  f = fopen(path, "wb");
  CHECK(f && fwrite(bytes, 1, size, f) == size);
  if (f) fclose(f);
  free(bytes);
  if (harness_failures) return 1;

  long failed = 0;
  dvm_module *m = NULL;
  OOM_SWEEP(k, failed, dvm_module_load_file(path, NULL, &m), (dvm_module_release(m), m = NULL));
  CHECK(failed > 5); /* it allocates, so the sweep failed some */
  printf("load: %ld allocations failed in turn\n", failed);

  CHECK_OK(dvm_module_load_file(path, NULL, &m));
  int64_t dims[2] = {3, 2};
  dvm_tensor *x;
  CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &x));
  float *xd = dvm_tensor_data(x);
  for (int i = 0; i < 6; i++) xd[i] = (float)(i % 2 == 0) + (i >= 4);
  dvm_value arg = dvm_value_tensor(x), r = {0};
  dvm_vm *vm = NULL;
  failed = 0;
  OOM_SWEEP(k, failed, dvm_vm_create(m, NULL, &vm), (dvm_vm_destroy(vm), vm = NULL));
  printf("vm: %ld allocations failed in turn\n", failed);
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  failed = 0;
  /* a fresh VM each time, so its pool holds nothing from the last run */
  OOM_SWEEP(k, failed, dvm_vm_invoke(vm, 0, &arg, 1, &r, 1), {
    const float *y = dvm_tensor_data(r.u.tensor);
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 3 && y[6] == 6 && y[8] == 12); /* x = [[1, 0], [1, 0], [2, 1]] */
    dvm_value_clear(&r);
    dvm_vm_destroy(vm);
    CHECK_OK(dvm_vm_create(m, NULL, &vm));
  });
  CHECK(failed > 0);
  printf("run: %ld allocations failed in turn\n", failed);
  CHECK_OK(dvm_vm_invoke(vm, 0, &arg, 1, &r, 1)); /* and the VM still runs */
  dvm_value_clear(&r);
  dvm_vm_destroy(vm);
  dvm_tensor_release(x);
  dvm_module_release(m);
  return harness_finish("oom");
}
