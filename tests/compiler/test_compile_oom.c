/* Allocation failure sweeps of the compiler: dvmc_compile_memory of the
 * fixture models (an MLP; If and Loop with their subgraphs; BERT and ResNet
 * through the graph rewrites, fusion and the memory plan) with the k-th
 * allocation failing, for every k the compile reaches (tests/oom.h). Each
 * failure must be DVM_OUT_OF_MEMORY, never a crash or another error, leave
 * nothing behind (AddressSanitizer's leak check at exit, in the sanitizer
 * build), and the compile right after it must give the same bytes as one
 * that never failed. The ONNX parse is counted too: protobuf-c allocates
 * through the compiler's arena. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvmc.h"
#include "oom.h"

static const uint8_t *model, *expect;
static size_t model_size, expect_size;

static int same_as_expected(uint8_t *bytes, size_t size) {
  int same = bytes && size == expect_size && memcmp(bytes, expect, size) == 0;
  free(bytes);
  return same;
}

/* One compile under the current failure; after a failure, one that must
 * not fail and must give the expected bytes. */
static dvm_status *compile(void) {
  uint8_t *bytes;
  size_t size;
  dvm_status *st = dvmc_compile_memory(model, model_size, NULL, NULL, &bytes, &size);
  if (!st) {
    if (!same_as_expected(bytes, size)) {
      CHECK(!"a compile that succeeded gave the expected bytes");
      fprintf(stderr, "allocation %ld failed and the compile succeeded with other bytes\n", oom_fail_at);
    }
    return NULL;
  }
  CHECK(!bytes && !size);
  oom_fail_at = 0;
  dvm_status *again = dvmc_compile_memory(model, model_size, NULL, NULL, &bytes, &size);
  CHECK_OK(again);
  CHECK(same_as_expected(bytes, size));
  return st;
}

static void sweep(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  static uint8_t data[1 << 17];
  model_size = f ? fread(data, 1, sizeof data, f) : 0;
  CHECK(f && model_size > 0 && model_size < sizeof data);
  if (f) fclose(f);
  model = data;
  uint8_t *bytes;
  CHECK_OK(dvmc_compile_memory(model, model_size, NULL, NULL, &bytes, &expect_size));
  expect = bytes;
  long failed = 0;
  OOM_SWEEP(k, failed, compile(), (void)0);
  CHECK(failed > 100); /* a compile allocates a lot, so the sweep failed many */
  printf("%s: %ld allocations failed in turn\n", name, failed);
  free(bytes);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_compile_oom MODELS_DIR\n");
    return 2;
  }
  sweep(argv[1], "mlp.onnx");
  sweep(argv[1], "control.onnx");
  sweep(argv[1], "bert.onnx");
  sweep(argv[1], "resnet.onnx");
  return harness_finish("compile_oom");
}
