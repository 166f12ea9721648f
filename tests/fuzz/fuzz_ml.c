/* Fuzz target for the words of the ai.onnx.ml linear models and SVMs
 * (ops/cpu/ml_model.h), which come from the module file. The first byte
 * picks the kernel ("linear_model" or "svm", bit 0) and whether it is
 * called as a classifier (bit 1); the rest, as i32 words of input 1, must
 * be refused with a message in the kernel's form or be a model the kernel
 * scores three rows of X with (some NaN), the columns and features it is
 * called with read from the words' header. A broken promise aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_kernel.h"
#include "kernel.h"
#include "ops/cpu/ml_model.h"
#include "ops/optable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int svm = data[0] & 1, cls = (data[0] >> 1) & 1;
  data++;
  size--;
  int32_t h[SVM_HEADER] = {0};
  memcpy(h, data, size < sizeof h ? size : sizeof h);
  int64_t f = small(h, svm ? SVM_FEATURES : LM_FEATURES), k = small(h, svm ? SVM_CLASSES : LM_ROWS);
  int64_t c = !cls ? (svm ? 1 : k) : svm && h[SVM_SVC] && !(h[SVM_FLAGS] & SVM_PROBA) ? (k > 2 ? k * (k - 1) / 2 : 2)
                                    : k < 2 ? 2 : k; /* the columns each form scores */
  const char *name = svm ? "svm" : "linear_model";
  const dvm_kernel_def *kd = dvm_ops_find(name, DVM_DEVICE_CPU);
  require(kd != NULL);
  dvm_tensor *w = words(data, size);
  score_words(kd, name, w, f, c, cls);
  dvm_tensor_release(w);
  return 0;
}
