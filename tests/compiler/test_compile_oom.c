/* Allocation failure sweeps of the compiler: dvmc_compile_memory of the
 * fixture models (an MLP; If and Loop with their subgraphs; BERT and ResNet
 * through the graph rewrites, fusion and the memory plan) with the k-th
 * allocation failing, for every k the compile reaches (tests/oom.h). Each
 * failure must be DVM_OUT_OF_MEMORY, never a crash or another error, leave
 * nothing behind (AddressSanitizer's leak check at exit, in the sanitizer
 * build), and the compile right after it must give the same bytes as one
 * that never failed. The ONNX parse is counted too: protobuf-c allocates
 * through the compiler's arena. A model with external data is compiled
 * with its weights copied and referred to where they lie. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvmc.h"
#include "oom.h"

static const uint8_t *model, *expect;
static size_t model_size, expect_size;
static const char *model_dir;           /* where its external data is */
static const dvmc_compile_options *opts;

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
  dvm_status *st = dvmc_compile_memory(model, model_size, model_dir, opts, &bytes, &size);
  if (!st) {
    if (!same_as_expected(bytes, size)) {
      CHECK(!"a compile that succeeded gave the expected bytes");
      fprintf(stderr, "allocation %ld failed and the compile succeeded with other bytes\n", oom_fail_at);
    }
    return NULL;
  }
  CHECK(!bytes && !size);
  oom_fail_at = 0;
  dvm_status *again = dvmc_compile_memory(model, model_size, model_dir, opts, &bytes, &size);
  CHECK_OK(again);
  CHECK(same_as_expected(bytes, size));
  return st;
}

static void sweep(const char *dir, const char *name, const dvmc_compile_options *o) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  static uint8_t data[1 << 17];
  model_size = f ? fread(data, 1, sizeof data, f) : 0;
  CHECK(f && model_size > 0 && model_size < sizeof data);
  if (f) fclose(f);
  model = data;
  model_dir = dir;
  opts = o;
  uint8_t *bytes;
  CHECK_OK(dvmc_compile_memory(model, model_size, model_dir, opts, &bytes, &expect_size));
  expect = bytes;
  long failed = 0;
  OOM_SWEEP(k, failed, compile(), (void)0);
  CHECK(failed > 100); /* a compile allocates a lot, so the sweep failed many */
  printf("%s%s: %ld allocations failed in turn\n", name, o && o->data_dir ? " (data referred to)" : "", failed);
  free(bytes);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_compile_oom MODELS_DIR EXTDATA_DIR\n");
    return 2;
  }
  static const char *const models[] = {"mlp.onnx", "control.onnx", "bert.onnx", "resnet.onnx"};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) sweep(argv[1], models[i], NULL);
  dvmc_compile_options refer;
  dvmc_compile_options_init(&refer);
  refer.data_dir = argv[2];
  sweep(argv[2], "extdata.onnx", NULL);
  sweep(argv[2], "extdata.onnx", &refer);
  return harness_finish("compile_oom");
}
