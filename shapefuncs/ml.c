/* Shape functions of the classical machine learning ops: "tree_ensemble"
 * (x, ensemble; targets, classifier -> [N] and [N, targets], or
 * [N, targets]). */
#include "ml.h"

#include "attr.h"
#include "kernel.h"
#include "shape.h"

dvm_status *dvm_tree_ensemble_infer(int rank, const int64_t *dims, const dvm_value *attrs, int nattrs,
                                    int64_t *rows, int64_t *targets, int *classifier) {
  const char *fn = "tree_ensemble";
  dvm_status *st = dvm_attr_count(fn, nattrs, 2, 2);
  if (!st) st = dvm_attr_int(fn, "targets", &attrs[0], targets);
  if (!st) st = dvm_attr_flag(fn, "classifier", &attrs[1], classifier);
  if (st) return st;
  if (*targets < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: targets %lld, want >= 1", fn, (long long)*targets);
  if (rank != 1 && rank != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X of rank %d, want [N, F] or [F]", fn, rank);
  *rows = rank == 2 ? dims[0] : 1;
  return NULL;
}

static dvm_status *shapefn_tree_ensemble(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r, cls;
  const int64_t *d;
  int64_t rows, targets;
  dvm_status *st = dvm_shape_check_counts("tree_ensemble", nin, 4, 4, nout, nout == 2 ? 2 : 1);
  if (!st) st = dvm_shape_arg("tree_ensemble", &in[0], 0, &r, &d);
  if (!st) st = dvm_tree_ensemble_infer(r, d, in + 2, nin - 2, &rows, &targets, &cls);
  if (!st && nout != 1 + cls)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "tree_ensemble: %d outputs, want %d", nout, 1 + cls);
  if (st) return st;
  int64_t scores[2] = {rows, targets};
  if (cls) dvm_shape_set(&out[0], 1, &rows);
  dvm_shape_set(&out[cls], 2, scores);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_ml_table[] = {
    {"tree_ensemble", shapefn_tree_ensemble},
    {NULL, NULL},
};
