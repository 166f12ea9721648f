/* The ai.onnx.ml linear models, LinearClassifier and LinearRegressor:
 *
 *   linear_model(in: X, M; attrs: columns:int, classifier:int)
 *     -> labels, scores (a classifier) or scores (a regressor)
 *
 * X f32 [N, F] (or [F], one row); M the model's i32 words (ml_model.h);
 * labels i64 [N], scores f32 [N, columns]. As ONNX Runtime computes them:
 * s = W x + b per row (R rows of W); a regressor transforms each row (one
 * target: PROBIT only). A classifier of R > 1 rows labels a row with the
 * class of its highest score (the first of equals) and transforms it; of
 * one row, the label is labels[1] (or 1) where s > 0, else labels[0] (or
 * 0), and two labels make the scores [1 - s, s], untransformed. */
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/ml_model.h"
#include "ops/cpu/ml_post.h"
#include "ops/cpu/par.h"

typedef struct {
  int64_t rows, features, labels;
  int post;
  const float *w, *b;
  const int32_t *lab; /* two words per label */
} model;

static dvm_status *bad(const char *why, long long at) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "linear_model: model words: %s (at %lld)", why, at);
}

/* Reads and checks the words of M (ml_model.h) into *m. */
static dvm_status *read_model(const dvm_tensor *t, model *m) {
  if (t->dtype != DVM_I32 || t->rank != 1) return bad("want i32 [W]", 0);
  int64_t nw = t->dims[0];
  const int32_t *h = dvm_tensor_ptr(t);
  if (nw < LM_HEADER) return bad("shorter than the header", nw);
  for (int i = 0; i < LM_HEADER; i++)
    if (h[i] < 0) return bad("a negative header word", i);
  m->rows = h[LM_ROWS];
  m->features = h[LM_FEATURES];
  m->labels = h[LM_LABELS];
  m->post = h[LM_POST];
  if (m->rows < 1 || m->post > ML_PROBIT) return bad("header out of range", 0);
  /* each term is below 2^62: the header words are below 2^31 */
  if (LM_HEADER + m->rows * m->features + m->rows + 2 * m->labels != nw)
    return bad("its length does not match its header", nw);
  m->w = (const float *)(h + LM_HEADER);
  m->b = m->w + m->rows * m->features;
  m->lab = (const int32_t *)(m->b + m->rows);
  return NULL;
}

typedef struct {
  const model *m;
  const float *x;
  float *z;
  int64_t *y; /* labels, or NULL */
  int64_t cols;
} job;

static void rows(void *ctx, int64_t s, int64_t e) {
  const job *j = ctx;
  const model *m = j->m;
  int64_t R = m->rows, F = m->features;
  for (int64_t r = s; r < e; r++) {
    const float *x = j->x + r * F;
    float *z = j->z + r * j->cols;
    for (int64_t c = 0; c < R; c++) {
      const float *w = m->w + c * F;
      float acc = 0;
      for (int64_t f = 0; f < F; f++) acc += x[f] * w[f];
      z[c] = acc + m->b[c];
    }
    if (j->y && R > 1) {
      int64_t best = 0;
      for (int64_t c = 1; c < R; c++)
        if (z[c] > z[best]) best = c;
      j->y[r] = ml_label(m->lab, best);
    } else if (j->y) {
      j->y[r] = ml_label(m->lab, z[0] > 0);
    }
    if (R > 1) {
      ml_transform(m->post, z, R);
    } else if (j->y) {
      z[1] = m->post == ML_LOGISTIC ? ml_logistic(z[0]) : z[0];
      z[0] = 1 - z[1];
    } else if (m->post == ML_PROBIT) {
      z[0] = ml_probit(z[0]);
    }
  }
}

static dvm_status *linear_model(const dvm_kernel_args *a) {
  int cls;
  int64_t n, cols;
  dvm_status *st = ml_scores_call(a, "linear_model", &n, &cols, &cls);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  model m;
  if ((st = read_model(a->in[1], &m))) return st;
  int64_t features = x->rank == 2 ? x->dims[1] : x->dims[0];
  int64_t want = cls && m.rows == 1 ? 2 : m.rows;
  if (want != cols)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "linear_model: the model gives %lld scores a row, the call says %lld",
                          (long long)want, (long long)cols);
  if (cls && (m.rows > 1 ? m.labels < m.rows : m.labels != 2))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "linear_model: %lld labels for %lld classes", (long long)m.labels,
                          (long long)(m.rows > 1 ? m.rows : 2));
  if (cls && m.rows == 1 && m.post == ML_PROBIT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "linear_model: PROBIT of one score into two columns is not defined");
  if (features != m.features)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "linear_model: X has %lld features, the coefficients %lld",
                          (long long)features, (long long)m.features);
  const dvm_tensor *z = a->out[cls];
  if ((cls && dvm_tensor_numel(a->out[0]) != n) || dvm_tensor_numel(z) != n * cols)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "linear_model: outputs are not [%lld] and [%lld, %lld]", (long long)n,
                          (long long)n, (long long)cols);
  job j = {&m, dvm_tensor_ptr(x), dvm_tensor_ptr(z), cls ? dvm_tensor_ptr(a->out[0]) : NULL, cols};
  dvm_par_for(dvm_kargs_threads(a), n, 256, rows, &j);
  return NULL;
}

const dvm_kernel_def dvm_cpu_ml_linear_kernels[] = {
    {"linear_model", DVM_DEVICE_CPU, linear_model, "ml_scores", DVM_DTYPE_BIT(DVM_F32)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
