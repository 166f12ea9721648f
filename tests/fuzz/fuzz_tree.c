/* Fuzz target for the tree ensemble's words (ops/cpu/ml_tree.h), which
 * come from the module file: any bytes, as the i32 words of input 1 of
 * "tree_ensemble", must be refused with a message in the kernel's form or
 * be an ensemble the kernel walks (every walk ends: children follow their
 * parent) on three rows of X, some NaN. The prepack hook, given the same
 * words, must build a form or decline. A broken promise aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_kernel.h"
#include "kernel.h"
#include "ops/cpu/ml_tree.h"
#include "ops/optable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int32_t h[TE_HEADER] = {0};
  memcpy(h, data, size < sizeof h ? size : sizeof h);
  const dvm_kernel_def *kd = dvm_ops_find("tree_ensemble", DVM_DEVICE_CPU);
  require(kd != NULL && kd->prepack != NULL);
  dvm_tensor *w = words(data, size);
  score_words(kd, "tree_ensemble", w, small(h, TE_FEATURES), small(h, TE_TARGETS), h[TE_FLAGS] & TE_CLASSIFIER);
  void *form = NULL;
  void (*free_form)(void *) = NULL;
  require(kd->prepack(w, 1, NULL, 0, &form, &free_form) == NULL);
  if (form) free_form(form);
  dvm_tensor_release(w);
  return 0;
}
