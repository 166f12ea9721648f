/* The ai.onnx.ml linear models, SVMs, Scaler and Imputer: each is one
 * kernel call. LinearClassifier and LinearRegressor become
 * "linear_model", SVMClassifier and SVMRegressor "svm", on X and the
 * model's words (ops/cpu/ml_model.h), an i32 constant written here after
 * the attributes are checked against each other; Scaler's and Imputer's
 * lists become constant inputs of "scaler" and "imputer". */
#include <string.h>

#include "lower_ml.h"
#include "ops/cpu/ml_model.h"

static const char *const posts[] = {"NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT", NULL};

static int32_t bits_of(double v) {
  float f = (float)v;
  int32_t b;
  memcpy(&b, &f, sizeof b);
  return b;
}

static int32_t *put_floats(int32_t *w, const double *v, int64_t k) {
  for (int64_t i = 0; i < k; i++) *w++ = bits_of(v[i]);
  return w;
}

static int32_t *put_labels(int32_t *w, const int64_t *labels, int k) {
  for (int i = 0; i < k; i++) {
    *w++ = (int32_t)(uint32_t)(uint64_t)labels[i];
    *w++ = (int32_t)(uint32_t)((uint64_t)labels[i] >> 32);
  }
  return w;
}

/* The post transform's index, the class labels (a classifier's: string
 * labels by index, lw_ml_labels) into *post, *labels and *nl. */
static dvm_status *common(lowering *L, const dvmc_node *n, int cls, int *post, const int64_t **labels, int *nl) {
  const char *p = dvmc_attr_string(n, "post_transform", "NONE");
  *labels = NULL;
  *nl = 0;
  if ((*post = lw_ml_name(p, posts)) < 0)
    return lw_invalid(n, "post_transform \"%s\" is not NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT", p);
  if (!cls) return NULL;
  dvm_status *st = lw_ml_labels(L, n, "classlabels_ints", labels, nl);
  if (!st && !*nl) st = lw_invalid(n, "has no class labels (classlabels_ints)");
  return st;
}

dvm_status *lw_lower_linear(lowering *L, const dvmc_node *n, const op_rule *r) {
  int cls = !strcmp(n->op, "LinearClassifier"), post, nl, nc, ni;
  const int64_t *labels;
  double *coef, *icpt;
  dvm_status *st = common(L, n, cls, &post, &labels, &nl);
  if (!st) st = lw_ml_floats(L, n, "coefficients", &coef, &nc);
  if (!st) st = lw_ml_floats(L, n, "intercepts", &icpt, &ni);
  if (st) return st;
  /* as ONNX Runtime: a classifier has a class per intercept; a regressor
   * reads its intercepts only when there is one per target */
  int64_t rows = cls ? ni : dvmc_attr_int(n, "targets", 1);
  if (rows < 1 || rows > 1 << 20)
    return lw_invalid(n, cls ? "has %lld intercepts: want 1 or more (one per class)" : "targets %lld: want 1 to 2^20",
                      (long long)rows);
  if (!nc || nc % rows) return lw_invalid(n, "%d coefficients for %lld rows: not a whole number of features", nc, (long long)rows);
  int64_t features = nc / rows;
  if (cls && rows > 1 && nl < rows)
    return lw_invalid(n, "%d class labels (classlabels_ints) for %lld classes (intercepts)", nl, (long long)rows);
  if (cls && rows == 1 && nl != 2)
    return lw_invalid(n, "%d class labels (classlabels_ints) for one intercept: want 2 (a binary classifier)", nl);
  if (cls && rows == 1 && post == 4)
    return lw_unsupported(n, "PROBIT of one score with two class labels: ONNX Runtime leaves the second column undefined");
  size_t nw = LM_HEADER + (size_t)(rows * features + rows) + 2 * (size_t)nl;
  int32_t *w = dvm_arena_alloc(&L->c->arena, nw, sizeof *w);
  if (!w) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int32_t head[LM_HEADER] = {[LM_ROWS] = (int32_t)rows, [LM_FEATURES] = (int32_t)features, [LM_POST] = post, [LM_LABELS] = nl};
  memcpy(w, head, sizeof head);
  int32_t *p = put_floats(w + LM_HEADER, coef, rows * features);
  for (int64_t i = 0; i < rows; i++) *p++ = ni == rows ? bits_of(icpt[i]) : 0;
  put_labels(p, labels, nl);
  return lw_ml_call(L, n, r, w, nw, cls && rows == 1 ? 2 : rows, cls);
}

dvm_status *lw_lower_svm(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const kernels[] = {"LINEAR", "POLY", "RBF", "SIGMOID", NULL};
  int cls = !strcmp(n->op, "SVMClassifier"), post, nl, nk, nc, nrho, nsv, npa, npb, nvpc;
  const int64_t *labels, *vpc;
  double *kp, *coef, *rho, *sv, *pa, *pb;
  dvm_status *st = common(L, n, cls, &post, &labels, &nl);
  if (!st) st = lw_ml_floats(L, n, "kernel_params", &kp, &nk);
  if (!st) st = lw_ml_floats(L, n, "coefficients", &coef, &nc);
  if (!st) st = lw_ml_floats(L, n, "rho", &rho, &nrho);
  if (!st) st = lw_ml_floats(L, n, "support_vectors", &sv, &nsv);
  if (!st) st = lw_ml_floats(L, n, "prob_a", &pa, &npa);
  if (!st) st = lw_ml_floats(L, n, "prob_b", &pb, &npb);
  if (!st) st = lw_ml_ints(n, "vectors_per_class", &vpc, &nvpc);
  if (st) return st;
  const char *ks = dvmc_attr_string(n, "kernel_type", "LINEAR");
  int kernel = lw_ml_name(ks, kernels);
  if (kernel < 0) return lw_invalid(n, "kernel_type \"%s\" is not LINEAR, POLY, RBF or SIGMOID", ks);
  if (nk && nk < 3) return lw_invalid(n, "kernel_params has %d values: want gamma, coef0 and degree", nk);
  if (!nc || !nrho) return lw_invalid(n, "needs coefficients and rho");
  int64_t K = cls ? nl : 1, V = 0;
  if (cls) {
    if (K < 2 || K > 65535) return lw_invalid(n, "%lld class labels: want 2 to 65535", (long long)K);
    for (int i = 0; i < nvpc; i++) {
      if (vpc[i] < 0 || vpc[i] > INT32_MAX - V) return lw_invalid(n, "vectors_per_class[%d] = %lld", i, (long long)vpc[i]);
      V += vpc[i];
    }
    if (V && nvpc != K) return lw_invalid(n, "vectors_per_class has %d values for %lld classes", nvpc, (long long)K);
  } else {
    V = dvmc_attr_int(n, "n_supports", 0);
    if (V < 0 || V > INT32_MAX) return lw_invalid(n, "n_supports %lld", (long long)V);
  }
  int svc = V > 0, proba = cls && npa > 0;
  int64_t pairs = cls && svc ? K * (K - 1) / 2 : 1;
  int64_t F = svc ? nsv / V : cls ? nc / K : nc;
  int64_t coefs = svc ? (cls ? (K - 1) * V : V) : (cls ? K : 1) * F;
  if (svc && nsv != V * F)
    return lw_invalid(n, "%d support_vectors values for %lld vectors: not a whole number of features", nsv, (long long)V);
  if (nc < coefs || (!svc && nc != coefs))
    return lw_invalid(n, "%d coefficients, want %lld", nc, (long long)coefs);
  if (nrho < pairs) return lw_invalid(n, "%d rho values, want %lld", nrho, (long long)pairs);
  if (npa != npb || (proba && npa < pairs))
    return lw_invalid(n, "prob_a and prob_b have %d and %d values, want %lld each (or none)", npa, npb, (long long)pairs);
  if (proba && !svc) return lw_unsupported(n, "prob_a and prob_b without support vectors (linear mode)");
  if (cls && svc && K == 2 && !proba && post == 4)
    return lw_unsupported(n, "PROBIT of one score into two columns: ONNX Runtime leaves the second column undefined");
  int positive = 1;
  for (int64_t i = 0; i < coefs; i++) positive &= coef[i] >= 0;
  int flags = (proba ? SVM_PROBA : 0) | (positive ? SVM_POSITIVE : 0) |
              (!cls && dvmc_attr_int(n, "one_class", 0) ? SVM_ONE_CLASS : 0);
  size_t nw = SVM_HEADER + 3 + (size_t)((cls && svc ? K : 0) + (svc ? V * F : 0) + coefs + pairs + (proba ? 2 * pairs : 0)) +
              (cls ? 2 * (size_t)K : 0);
  int32_t *w = dvm_arena_alloc(&L->c->arena, nw, sizeof *w);
  if (!w) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int32_t head[SVM_HEADER] = {[SVM_SVC] = svc, [SVM_KERNEL] = svc ? kernel : SVM_LINEAR, [SVM_CLASSES] = (int32_t)K,
                              [SVM_VECTORS] = (int32_t)V, [SVM_FEATURES] = (int32_t)F, [SVM_POST] = post, [SVM_FLAGS] = flags};
  memcpy(w, head, sizeof head);
  double params[3] = {nk ? kp[0] : 0, nk ? kp[1] : 0, nk ? kp[2] : 0};
  int32_t *p = put_floats(w + SVM_HEADER, params, 3);
  for (int64_t i = 0; cls && svc && i < K; i++) *p++ = (int32_t)vpc[i];
  p = put_floats(p, sv, svc ? V * F : 0);
  p = put_floats(p, coef, coefs);
  p = put_floats(p, rho, pairs);
  if (proba) p = put_floats(put_floats(p, pa, pairs), pb, pairs);
  put_labels(p, labels, cls ? (int)K : 0);
  int64_t cols = !cls ? 1 : svc && !proba ? (K > 2 ? pairs : 2) : K;
  return lw_ml_call(L, n, r, w, nw, cols, cls);
}

/* Inputs X, then one constant per entry of v (f32 or i64 lists). */
static dvm_status *call_with(lowering *L, const dvmc_node *n, const op_rule *r, int k, const char *const *what,
                             dvm_dtype dt, void *const *data, const size_t *count) {
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  int regs[2];
  for (int i = 0; i < k && !st; i++)
    if ((regs[i] = c.ins[c.nin++] = lw_ml_const(L, n, what[i], dt, data[i], count[i])) < 0)
      st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (!st) st = lw_emit_call(L, n, r, &c);
  for (int i = 0; i < k && !st; i++) dvmc_fn_RELEASE(L->f, regs[i]);
  return st;
}

/* The doubles v as floats in the arena. */
static float *as_floats(lowering *L, const double *v, int k) {
  float *f = dvm_arena_alloc(&L->c->arena, (size_t)(k ? k : 1), sizeof *f);
  for (int i = 0; f && i < k; i++) f[i] = (float)v[i];
  return f;
}

dvm_status *lw_lower_scaler(lowering *L, const dvmc_node *n, const op_rule *r) {
  double *off, *sc;
  int no, ns;
  dvm_status *st = lw_ml_floats(L, n, "offset", &off, &no);
  if (!st) st = lw_ml_floats(L, n, "scale", &sc, &ns);
  if (st) return st;
  if (!ns || no != ns) return lw_invalid(n, "has %d offsets and %d scales: want as many of each, at least one", no, ns);
  float *o = as_floats(L, off, no), *s = as_floats(L, sc, ns);
  if (!o || !s) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  static const char *const what[] = {"offset", "scale"};
  return call_with(L, n, r, 2, what, DVM_F32, (void *const[]){o, s}, (size_t[]){(size_t)no, (size_t)ns});
}

dvm_status *lw_lower_imputer(lowering *L, const dvmc_node *n, const op_rule *r) {
  double *fv;
  const int64_t *iv;
  int nf, ni;
  dvm_status *st = lw_ml_floats(L, n, "imputed_value_floats", &fv, &nf);
  if (!st) st = lw_ml_ints(n, "imputed_value_int64s", &iv, &ni);
  if (st) return st;
  if (!nf == !ni) return lw_invalid(n, "needs one of imputed_value_floats and imputed_value_int64s, not %s", nf ? "both" : "neither");
  dvm_dtype dt = nf ? DVM_F32 : DVM_I64, x = n->in[0] ? n->in[0]->dtype : dt;
  if (x != dt)
    return lw_unsupported(n, "X is %s and the imputed values %s: want them of one dtype", dvm_dtype_name(x), dvm_dtype_name(dt));
  static const char *const what[] = {"values", "replaced"};
  if (nf) {
    float *v = as_floats(L, fv, nf), *rep = dvm_arena_alloc(&L->c->arena, 1, sizeof *rep);
    if (!v || !rep) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    *rep = (float)dvmc_attr_float(n, "replaced_value_float", 0);
    return call_with(L, n, r, 2, what, dt, (void *const[]){v, rep}, (size_t[]){(size_t)nf, 1});
  }
  int64_t *rep = dvm_arena_alloc(&L->c->arena, 1, sizeof *rep);
  if (!rep) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  *rep = dvmc_attr_int(n, "replaced_value_int64", 0);
  return call_with(L, n, r, 2, what, dt, (void *const[]){(void *)iv, rep}, (size_t[]){(size_t)ni, 1});
}
