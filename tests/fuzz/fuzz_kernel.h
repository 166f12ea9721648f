/* What the fuzz targets of kernels' words share (fuzz_tree.c, fuzz_ml.c):
 * a broken promise aborts, so the fuzzer and the replay test see it. */
#ifndef DVM_TESTS_FUZZ_KERNEL_H
#define DVM_TESTS_FUZZ_KERNEL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/tensor.h"

static void require(int ok) {
  if (!ok) abort();
}

/* A zeroed tensor. */
static dvm_tensor *make(dvm_dtype dt, int rank, const int64_t *dims) {
  dvm_tensor *t = NULL;
  require(!dvm_tensor_create(dt, rank, dims, &t));
  memset(dvm_tensor_data(t), 0, dvm_tensor_nbytes(t));
  return t;
}

/* A header word read as a small count (1..64 otherwise). */
static int64_t small(const int32_t *h, int i) { return h[i] >= 1 && h[i] <= 64 ? h[i] : 1; }

#endif
