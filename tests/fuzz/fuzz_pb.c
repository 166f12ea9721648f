/* Fuzz target for the readers of ONNX .pb value files that `dvm run`
 * takes as inputs: a TensorProto (dvmc_import_tensor_memory) and a
 * SequenceProto or OptionalProto (dvmc_import_sequence_memory). Each input
 * goes to both. Any input must give a well-formed value or an error with
 * the code of a bad file (corrupt), a refused feature (unimplemented) or
 * too much memory, naming the source. A broken promise aborts, which the
 * fuzzer reports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

static void check_error(dvm_status *st) {
  dvm_code code = dvm_status_code(st);
  require(code == DVM_CORRUPT || code == DVM_UNIMPLEMENTED || code == DVM_OUT_OF_MEMORY);
  require(strstr(dvm_status_message(st), "fuzz.pb") != NULL);
  dvm_status_free(st);
}

/* A string tensor's bytes: each element's length in 8 little-endian bytes,
 * then their texts (dvmc_tensor_strings). */
static size_t string_bytes(const dvmc_tensor *t, size_t numel) {
  require(t->nbytes >= 8 * numel);
  size_t n = 8 * numel;
  for (size_t i = 0; i < numel; i++) {
    uint64_t len = 0;
    for (int b = 0; b < 8; b++) len |= (uint64_t)((const uint8_t *)t->data)[8 * i + (size_t)b] << 8 * b;
    require(len <= t->nbytes - n);
    n += (size_t)len;
  }
  return n;
}

static void check_tensor(const dvmc_tensor *t) {
  require(t && t->rank >= 0 && t->rank <= DVM_MAX_RANK && t->dtype < DVM_DTYPE_COUNT);
  size_t numel = 1;
  for (int i = 0; i < t->rank; i++) {
    require(t->dims[i] >= 0);
    numel *= (size_t)t->dims[i];
  }
  require(t->nbytes == 0 || t->data);
  size_t n = t->dtype == DVM_STRING ? string_bytes(t, numel) : numel * dvm_dtype_size(t->dtype);
  require(t->nbytes == n);
  if (n) (void)((const volatile uint8_t *)t->data)[n - 1]; /* readable to its end (ASan) */
}

static void check_value(const dvmc_pbvalue *v, int depth) {
  require(depth < 256);
  if (v->tensor) {
    check_tensor(v->tensor);
    return;
  }
  require(v->n >= 0 && (v->n == 0 || v->items));
  for (int i = 0; i < v->n; i++) check_value(&v->items[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dvmc_ctx *c;
  if (dvmc_ctx_create(&c)) return 0;
  const dvmc_tensor *t = NULL;
  dvm_status *st = dvmc_import_tensor_memory(c, data, size, "fuzz.pb", &t);
  if (st) check_error(st);
  else check_tensor(t);
  const dvmc_pbvalue *v = NULL;
  st = dvmc_import_sequence_memory(c, data, size, "fuzz.pb", &v);
  if (st) check_error(st);
  else check_value(v, 0);
  dvmc_ctx_destroy(c);
  return 0;
}
