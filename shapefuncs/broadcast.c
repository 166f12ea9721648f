/* Broadcasting of shapes (see broadcast.h). */
#include <limits.h>
#include <string.h>

#include "broadcast.h"
#include "kernel.h"
#include "shape.h"

int dvm_broadcast_dims(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                       int64_t *out) {
  int r = ra > rb ? ra : rb;
  int64_t d[DVM_MAX_RANK]; /* out may alias an input */
  for (int k = 1; k <= r; k++) {
    int64_t da = k <= ra ? a[ra - k] : 1, db = k <= rb ? b[rb - k] : 1;
    if (da != db && da != 1 && db != 1) return -k;
    d[r - k] = da == 1 ? db : da;
  }
  memcpy(out, d, sizeof(int64_t) * (size_t)r);
  *rank = r;
  return 0;
}

dvm_status *dvm_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank,
                                int64_t *out) {
  int bad = dvm_broadcast_dims(ra, a, rb, b, rank, out);
  if (!bad) return NULL;
  char sa[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "broadcast: %s vs %s: dim %d %lld != %lld",
                        dvm_shape_str(sa, ra, a), dvm_shape_str(sb, rb, b), bad,
                        (long long)a[ra + bad], (long long)b[rb + bad]);
}

dvm_status *dvm_shapefn_broadcast(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("broadcast", nin, 2, INT_MAX, nout, 1);
  int rank, ri;
  const int64_t *di;
  int64_t dims[DVM_MAX_RANK];
  if (!st) st = dvm_shape_arg("broadcast", &in[0], 0, &rank, &di);
  if (st) return st;
  memcpy(dims, di, sizeof(int64_t) * (size_t)rank);
  /* numbers after the first two are the kernel's attributes (mod's fmod) */
  for (int i = 1; i < nin && (i < 2 || (in[i].kind != DVM_VAL_INT && in[i].kind != DVM_VAL_FLOAT)); i++) {
    st = dvm_shape_arg("broadcast", &in[i], i, &ri, &di);
    if (!st) st = dvm_broadcast_shape(rank, dims, ri, di, &rank, dims);
    if (st) return st;
  }
  dvm_shape_set(&out[0], rank, dims);
  return NULL;
}

dvm_status *dvm_shapefn_same(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_status *st = dvm_shape_check_counts("same", nin, 1, INT_MAX, nout, 1);
  int rank;
  const int64_t *dims;
  if (!st) st = dvm_shape_arg("same", &in[0], 0, &rank, &dims);
  if (st) return st;
  dvm_shape_set(&out[0], rank, dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_broadcast_table[] = {
    {"broadcast", dvm_shapefn_broadcast, .dims_only = true},
    {"same", dvm_shapefn_same, .dims_only = true},
    {NULL, NULL},
};
