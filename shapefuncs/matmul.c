/* MatMul shapes (see matmul.h). */
#include "broadcast.h"
#include "matmul.h"
#include "kernel.h"
#include "shape.h"

dvm_status *dvm_matmul_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                             int64_t *out) {
  char sa[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE];
  if (ra < 1 || rb < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: %s x %s: operands need rank >= 1",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b));
  int64_t ka = a[ra - 1], kb = rb >= 2 ? b[rb - 2] : b[0];
  if (ka != kb)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: %s x %s: inner dims %lld != %lld",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b), (long long)ka,
                          (long long)kb);
  int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, r;
  int bad = dvm_broadcast_dims(ba, a, bb, b, &r, out);
  if (bad) /* named as a dim of the operands, counted from the right */
    return dvm_status_new(DVM_INVALID_ARGUMENT, "matmul: %s x %s: batch dim %d %lld != %lld",
                          dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b), bad - 2,
                          (long long)a[ba + bad], (long long)b[bb + bad]);
  if (ra >= 2) out[r++] = a[ra - 2];
  if (rb >= 2) out[r++] = b[rb - 1];
  *rank = r;
  return NULL;
}

dvm_status *dvm_shapefn_matmul(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int ra, rb, r;
  const int64_t *a, *b;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = dvm_shape_check_counts("matmul", nin, 2, 2, nout, 1);
  if (!st) st = dvm_shape_arg("matmul", &in[0], 0, &ra, &a);
  if (!st) st = dvm_shape_arg("matmul", &in[1], 1, &rb, &b);
  if (!st) st = dvm_matmul_shape(ra, a, rb, b, &r, dims);
  if (st) return st;
  dvm_shape_set(&out[0], r, dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_matmul_table[] = {
    {"matmul", dvm_shapefn_matmul},
    {NULL, NULL},
};
