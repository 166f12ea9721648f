/* Shape functions of the classical machine learning ops:
 *   ml_scores (x, model; columns, classifier -> [N] and [N, columns], or
 *     [N, columns]): tree_ensemble, linear_model, svm
 *   array_feature_extractor (x, indices -> x's shape, its last dim the
 *     number of indices; x [F] gives [1, indices])
 *   feature_vectorizer (x0, x1, ...; dims -> [N, sum of dims], N from x0) */
#include "ml.h"

#include "attr.h"
#include "kernel.h"
#include "shape.h"

dvm_status *dvm_ml_scores_infer(const char *fn, int rank, const int64_t *dims, const dvm_value *attrs, int nattrs,
                                int64_t *rows, int64_t *columns, int *classifier) {
  dvm_status *st = dvm_attr_count(fn, nattrs, 2, 2);
  if (!st) st = dvm_attr_int(fn, "columns", &attrs[0], columns);
  if (!st) st = dvm_attr_flag(fn, "classifier", &attrs[1], classifier);
  if (st) return st;
  if (*columns < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: columns %lld, want >= 1", fn, (long long)*columns);
  if (rank != 1 && rank != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: X of rank %d, want [N, F] or [F]", fn, rank);
  *rows = rank == 2 ? dims[0] : 1;
  return NULL;
}

static dvm_status *shapefn_ml_scores(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r, cls;
  const int64_t *d;
  int64_t rows, cols;
  dvm_status *st = dvm_shape_check_counts("ml_scores", nin, 4, 4, nout, nout == 2 ? 2 : 1);
  if (!st) st = dvm_shape_arg("ml_scores", &in[0], 0, &r, &d);
  if (!st) st = dvm_ml_scores_infer("ml_scores", r, d, in + 2, nin - 2, &rows, &cols, &cls);
  if (!st && nout != 1 + cls) st = dvm_status_new(DVM_INVALID_ARGUMENT, "ml_scores: %d outputs, want %d", nout, 1 + cls);
  if (st) return st;
  int64_t scores[2] = {rows, cols};
  if (cls) dvm_shape_set(&out[0], 1, &rows);
  dvm_shape_set(&out[cls], 2, scores);
  return NULL;
}

dvm_status *dvm_array_feature_extractor_infer(int xrank, const int64_t *xdims, int64_t count, int *rank,
                                              int64_t *dims) {
  if (xrank < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "array_feature_extractor: X is a scalar, want rank >= 1");
  if (count < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "array_feature_extractor: no indices");
  if (xrank == 1) {
    *rank = 2;
    dims[0] = 1;
  } else {
    *rank = xrank;
    for (int i = 0; i < xrank - 1; i++) dims[i] = xdims[i];
  }
  dims[*rank - 1] = count;
  return NULL;
}

static dvm_status *shapefn_array_feature_extractor(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int xr, ir, r;
  const int64_t *xd, *id;
  int64_t d[DVM_MAX_RANK], count = 1;
  const char *fn = "array_feature_extractor";
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 2, nout, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &xr, &xd);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &ir, &id);
  for (int i = 0; !st && i < ir; i++) count *= id[i];
  if (!st) st = dvm_array_feature_extractor_infer(xr, xd, count, &r, d);
  if (!st) dvm_shape_set(&out[0], r, d);
  return st;
}

dvm_status *dvm_feature_vectorizer_infer(int rank, const int64_t *dims, const dvm_value *attr, int ninputs, int *k,
                                         const int64_t **sizes, int64_t *y) {
  const char *fn = "feature_vectorizer";
  dvm_status *st = dvm_attr_shape(fn, "inputdimensions", attr, k, sizes);
  if (st) return st;
  if (*k != ninputs) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %d inputs, %d input dims", fn, ninputs, *k);
  if (rank < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input 0 is a scalar, want [N, ...] or [F]", fn);
  y[0] = rank == 1 ? 1 : dims[0];
  y[1] = 0;
  for (int i = 0; i < *k; i++) {
    if ((*sizes)[i] < 0 || (*sizes)[i] > (1 << 30))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input dim %d is %lld", fn, i, (long long)(*sizes)[i]);
    y[1] += (*sizes)[i];
  }
  return NULL;
}

static dvm_status *shapefn_feature_vectorizer(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  const int64_t *d;
  int64_t y[2];
  const char *fn = "feature_vectorizer";
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, DVM_MAX_RANK + 1, nout, 1);
  int k;
  const int64_t *sizes;
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &r, &d);
  if (!st) st = dvm_feature_vectorizer_infer(r, d, &in[nin - 1], nin - 1, &k, &sizes, y);
  if (st) return st;
  dvm_shape_set(&out[0], 2, y);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_ml_table[] = {
    {"ml_scores", shapefn_ml_scores},
    {"array_feature_extractor", shapefn_array_feature_extractor},
    {"feature_vectorizer", shapefn_feature_vectorizer},
    {NULL, NULL},
};
