/* Fuzz target for the words of the ai.onnx.ml linear models and SVMs
 * (ops/cpu/ml_model.h), which come from the module file. The first byte
 * picks the kernel ("linear_model" or "svm", bit 0) and whether it is
 * called as a classifier (bit 1); the rest, as i32 words of input 1, must
 * be refused with a message in the kernel's form or be a model the kernel
 * scores three rows of X with (some NaN), the columns and features it is
 * called with read from the words' header. A broken promise aborts. */
#include <math.h>
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
  int64_t nw = (int64_t)(size / 4), rows = 3;
  int64_t f = small(h, svm ? SVM_FEATURES : LM_FEATURES), k = small(h, svm ? SVM_CLASSES : LM_ROWS);
  int64_t c = !cls ? (svm ? 1 : k) : svm && h[SVM_SVC] && !(h[SVM_FLAGS] & SVM_PROBA) ? (k > 2 ? k * (k - 1) / 2 : 2)
                                    : k < 2 ? 2 : k; /* the columns each form scores */
  dvm_tensor *w = make(DVM_I32, 1, &nw), *x = make(DVM_F32, 2, (int64_t[]){rows, f});
  if (nw) memcpy(dvm_tensor_data(w), data, (size_t)nw * 4);
  float *xv = dvm_tensor_data(x);
  for (int64_t i = 0; i < rows * f; i++) xv[i] = i % 5 == 4 ? NAN : (float)(i % 7) * 0.25f - 0.5f;
  dvm_tensor *labels = make(DVM_I64, 1, &rows), *scores = make(DVM_F32, 2, (int64_t[]){rows, c});
  dvm_tensor *in[2] = {x, w}, *out[2] = {cls ? labels : scores, scores};
  dvm_value attrs[2] = {{.kind = DVM_VAL_INT}, {.kind = DVM_VAL_INT}};
  attrs[0].u.i = c;
  attrs[1].u.i = cls;
  const char *name = svm ? "svm" : "linear_model";
  const dvm_kernel_def *kd = dvm_ops_find(name, DVM_DEVICE_CPU);
  require(kd != NULL);
  dvm_exec ex = {.threads = 1};
  dvm_kernel_args a = {in, 2, out, 1 + cls, attrs, 2, 0, NULL, 0, &ex};
  dvm_status *st = kd->fn(&a);
  if (st) {
    size_t l = strlen(name);
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT || dvm_status_code(st) == DVM_OUT_OF_MEMORY);
    require(strncmp(dvm_status_message(st), name, l) == 0 && dvm_status_message(st)[l] == ':');
    dvm_status_free(st);
  }
  dvm_tensor_release(x);
  dvm_tensor_release(w);
  dvm_tensor_release(labels);
  dvm_tensor_release(scores);
  return 0;
}
