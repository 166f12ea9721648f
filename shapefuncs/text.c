/* Shape functions of text ops: "tfidf" (TfIdfVectorizer: x; mode,
 * min_gram, max_gram, max_skip, size -> [size] or [B, size]). */
#include "text.h"

#include "attr.h"
#include "kernel.h"
#include "shape.h"

dvm_status *dvm_tfidf_infer(int rank, const int64_t *dims, const dvm_value *attrs, int nattrs, dvm_tfidf_info *p) {
  const char *fn = "tfidf";
  static const char *const names[] = {"mode", "min_gram", "max_gram", "max_skip", "size"};
  int64_t *v[] = {&p->mode, &p->min_gram, &p->max_gram, &p->max_skip, &p->size};
  dvm_status *st = dvm_attr_count(fn, nattrs, 5, 5);
  for (int i = 0; i < 5 && !st; i++) st = dvm_attr_int(fn, names[i], &attrs[i], v[i]);
  if (st) return st;
  if (p->mode < 0 || p->mode > 2 || p->min_gram < 1 || p->max_gram < p->min_gram || p->max_skip < 0 || p->size < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attributes mode %lld, min_gram %lld, max_gram %lld, max_skip %lld, "
                          "size %lld: want mode 0..2, 1 <= min_gram <= max_gram, max_skip >= 0, size >= 1", fn,
                          (long long)p->mode, (long long)p->min_gram, (long long)p->max_gram, (long long)p->max_skip,
                          (long long)p->size);
  if (rank > 2) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input of rank %d, want [C] or [B, C]", fn, rank);
  p->rank = rank == 2 ? 2 : 1;
  p->dims[0] = rank == 2 ? dims[0] : p->size;
  p->dims[1] = p->size;
  return NULL;
}

static dvm_status *shapefn_tfidf(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int r;
  const int64_t *d;
  dvm_tfidf_info p;
  dvm_status *st = dvm_shape_check_counts("tfidf", nin, 6, 6, nout, 1);
  if (!st) st = dvm_shape_arg("tfidf", &in[0], 0, &r, &d);
  if (!st) st = dvm_tfidf_infer(r, d, in + 1, nin - 1, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_text_table[] = {
    {"tfidf", shapefn_tfidf},
    {NULL, NULL},
};
