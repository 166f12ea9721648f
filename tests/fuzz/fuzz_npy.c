/* Fuzz target for the .npy reader. Any input must give a tensor or an
 * invalid-argument error that names the source; a tensor must come back
 * unchanged through write and read, and writing it again must give the
 * same bytes. A broken promise aborts, which the fuzzer reports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

/* Strings by their bytes, other dtypes by theirs. */
static int same_data(const dvm_tensor *a, const dvm_tensor *b) {
  if (dvm_tensor_dtype(a) != DVM_STRING) return memcmp(dvm_tensor_data(a), dvm_tensor_data(b), dvm_tensor_nbytes(a)) == 0;
  for (int64_t i = 0; i < dvm_tensor_numel(a); i++) {
    size_t na, nb;
    const char *pa = dvm_tensor_string(a, i, &na), *pb = dvm_tensor_string(b, i, &nb);
    if (na != nb || memcmp(pa, pb, na)) return 0;
  }
  return 1;
}

static int same_tensor(const dvm_tensor *a, const dvm_tensor *b) {
  int rank = dvm_tensor_rank(a);
  return dvm_tensor_dtype(a) == dvm_tensor_dtype(b) && rank == dvm_tensor_rank(b) &&
         memcmp(dvm_tensor_dims(a), dvm_tensor_dims(b), sizeof(int64_t) * (size_t)rank) == 0 && same_data(a, b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dvm_tensor *t = NULL, *back = NULL;
  dvm_status *st = dvm_npy_read_memory(data, size, "fuzz.npy", &t);
  if (st) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT);
    require(strncmp(dvm_status_message(st), "fuzz.npy: ", 10) == 0);
    dvm_status_free(st);
    return 0;
  }
  void *buf = NULL, *again = NULL;
  size_t n = 0, n2 = 0;
  /* 'S' bytes that are not UTF-8 are not written as text */
  if (dvm_tensor_dtype(t) == DVM_STRING && (st = dvm_npy_write_memory(t, &buf, &n))) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT && strstr(dvm_status_message(st), "not UTF-8"));
    dvm_status_free(st);
    dvm_tensor_release(t);
    return 0;
  }
  require(buf || !dvm_npy_write_memory(t, &buf, &n));
  require(!dvm_npy_read_memory(buf, n, "rewritten", &back));
  require(same_tensor(t, back));
  require(!dvm_npy_write_memory(back, &again, &n2));
  require(n == n2 && memcmp(buf, again, n) == 0);
  free(buf);
  free(again);
  dvm_tensor_release(t);
  dvm_tensor_release(back);
  return 0;
}
