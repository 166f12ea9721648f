/* Fuzz target for the tree ensemble's words (ops/cpu/ml_tree.h), which
 * come from the module file: any bytes, as the i32 words of input 1 of
 * "tree_ensemble", must be refused with a message in the kernel's form or
 * be an ensemble the kernel walks (every walk ends: children follow their
 * parent) on three rows of X, some NaN. The prepack hook, given the same
 * words, must build a form or decline. A broken promise aborts. */
#include <math.h>
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
  int64_t nw = (int64_t)(size / 4), rows = 3, c = small(h, TE_TARGETS), f = small(h, TE_FEATURES);
  int cls = h[TE_FLAGS] & TE_CLASSIFIER;
  dvm_tensor *w = make(DVM_I32, 1, &nw), *x = make(DVM_F32, 2, (int64_t[]){rows, f});
  if (nw) memcpy(dvm_tensor_data(w), data, (size_t)nw * 4);
  float *xv = dvm_tensor_data(x);
  for (int64_t i = 0; i < rows * f; i++) xv[i] = i % 5 == 4 ? NAN : (float)(i % 7) * 0.25f - 0.5f;
  dvm_tensor *labels = make(DVM_I64, 1, &rows), *scores = make(DVM_F32, 2, (int64_t[]){rows, c});
  dvm_tensor *in[2] = {x, w}, *out[2] = {cls ? labels : scores, scores};
  dvm_value attrs[2] = {{.kind = DVM_VAL_INT}, {.kind = DVM_VAL_INT}};
  attrs[0].u.i = c;
  attrs[1].u.i = cls;
  const dvm_kernel_def *kd = dvm_ops_find("tree_ensemble", DVM_DEVICE_CPU);
  require(kd != NULL && kd->prepack != NULL);
  dvm_exec ex = {.threads = 1};
  dvm_kernel_args a = {in, 2, out, 1 + cls, attrs, 2, 0, NULL, 0, &ex};
  dvm_status *st = kd->fn(&a);
  if (st) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT || dvm_status_code(st) == DVM_OUT_OF_MEMORY);
    require(strncmp(dvm_status_message(st), "tree_ensemble: ", 15) == 0);
    dvm_status_free(st);
  }
  void *form = NULL;
  void (*free_form)(void *) = NULL;
  require(kd->prepack(w, 1, NULL, 0, &form, &free_form) == NULL);
  if (form) free_form(form);
  dvm_tensor_release(x);
  dvm_tensor_release(w);
  dvm_tensor_release(labels);
  dvm_tensor_release(scores);
  return 0;
}
