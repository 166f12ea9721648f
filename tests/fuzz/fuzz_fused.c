/* Fuzz target for the fused elementwise program (docs/fused.md): any bytes
 * must be refused by the validator with a message in the documented form,
 * or be a program the kernel runs without error on tensors of the dtypes
 * it declares, broadcast from [7] and [1]. The kernel is a pure function
 * of its inputs, so a second run over re-poisoned outputs must give the
 * same bytes: an element left unwritten shows as a difference; so must a
 * run with output 0 in the memory of a copy of each same-size input (the
 * memory plan's in place, which the kernel allows). A broken promise
 * aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/fused.h"
#include "ops/optable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

enum { N = 7 };

static dvm_tensor *make(uint8_t dt, int64_t n, uint8_t fill) {
  dvm_tensor *t = NULL;
  require(!dvm_tensor_create((dvm_dtype)dt, 1, &n, &t));
  memset(dvm_tensor_data(t), fill, dvm_tensor_nbytes(t));
  return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dvm_status *st = dvm_fused_validate(data, size);
  if (st) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT);
    require(strncmp(dvm_status_message(st), "fused: program: ", 16) == 0);
    dvm_status_free(st);
    return 0;
  }
  int nin = data[6], nout = data[7];
  dvm_tensor *in[16], *out[8];
  for (int k = 0; k < nin; k++) {
    /* bool inputs must hold 0 or 1 bytes in real tensors; any byte is
     * allowed by the format, so odd patterns are fine here */
    in[k] = make(data[16 + k], k % 2 ? 1 : N, (uint8_t)(0x3c + 17 * k));
    if (data[16 + k] == DVM_BOOL) memset(dvm_tensor_data(in[k]), k & 1, dvm_tensor_nbytes(in[k]));
  }
  for (int k = 0; k < nout; k++) out[k] = make(data[16 + nin + k], N, 0xa5);
  const dvm_kernel_def *kd = dvm_ops_find("fused", DVM_DEVICE_CPU);
  require(kd != NULL);
  dvm_exec ex = {.threads = 1};
  dvm_kernel_args a = {in, nin, out, nout, NULL, 0, 0, data, size, &ex};
  require(kd->fn(&a) == NULL);
  /* a pure function of its inputs: a second run gives the same bytes */
  for (int k = 0; k < nout; k++) {
    size_t nb = dvm_tensor_nbytes(out[k]);
    void *first = malloc(nb);
    require(first != NULL);
    memcpy(first, dvm_tensor_data(out[k]), nb);
    memset(dvm_tensor_data(out[k]), 0x5a, nb);
    require(kd->fn(&a) == NULL);
    require(memcmp(first, dvm_tensor_data(out[k]), nb) == 0);
    free(first);
  }
  /* output 0 over input k: a view of the input's dtype on output 0's
   * memory holding the input's bytes */
  size_t nb0 = nout ? dvm_tensor_nbytes(out[0]) : 0;
  void *want = malloc(nb0 ? nb0 : 1);
  require(want != NULL);
  if (nout) memcpy(want, dvm_tensor_data(out[0]), nb0);
  for (int k = 0; k < nin && nout; k++) {
    if (dvm_tensor_nbytes(in[k]) != nb0) continue;
    dvm_tensor *view = NULL, *saved = in[k];
    require(!dvm_tensor_wrap((dvm_dtype)data[16 + k], 1, (int64_t[]){N}, dvm_tensor_data(out[0]), NULL, NULL, &view));
    memcpy(dvm_tensor_data(out[0]), dvm_tensor_data(saved), nb0);
    in[k] = view;
    require(kd->fn(&a) == NULL);
    require(memcmp(want, dvm_tensor_data(out[0]), nb0) == 0);
    in[k] = saved;
    dvm_tensor_release(view);
  }
  free(want);
  for (int k = 0; k < nin; k++) dvm_tensor_release(in[k]);
  for (int k = 0; k < nout; k++) dvm_tensor_release(out[k]);
  return 0;
}
