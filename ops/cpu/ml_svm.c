/* The ai.onnx.ml support vector machines, SVMClassifier and SVMRegressor:
 *
 *   svm(in: X, M; attrs: columns:int, classifier:int)
 *     -> labels, scores (a classifier) or scores (a regressor)
 *
 * X f32 [N, F] (or [F], one row); M the model's i32 words (ml_model.h);
 * labels i64 [N], scores f32 [N, columns]. As ONNX Runtime computes them
 * (libsvm's one-vs-one scheme):
 * - a kernel k(x, v): LINEAR x.v, POLY (gamma x.v + coef0)^degree, RBF
 *   exp(-gamma |x - v|^2), SIGMOID tanh(gamma x.v + coef0);
 * - SVC mode (support vectors): a regressor is sum_v coef[v] k(x, v) + rho;
 *   a classifier scores each pair of classes i < j, sum over the support
 *   vectors of both classes of their coefficient (row j - 1 for class i's,
 *   row i for class j's) times k(x, v), plus rho[pair], and the pair's vote
 *   goes to i when the score is > 0, else to j; the label is the class of
 *   most votes (the first of equals). Scores are the pairs' (two classes:
 *   [-s, s] with no post transform, else [1 - p, p], p = logistic(s) for
 *   LOGISTIC, else s), or, with prob_a
 *   and prob_b, each class's probability by pairwise coupling (libsvm's
 *   multiclass_probability, as ONNX Runtime writes it), then transformed;
 * - linear mode (no support vectors): class c scores x.coef[c] + rho[0];
 *   the label is the class of the highest score, with ONNX Runtime's rule
 *   for two classes (class 1 if the best score is > 0, or >= 0.5 with no
 *   negative coefficient);
 * - a one-class regressor's result is 1 where it is > 0, else -1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/ml_model.h"
#include "ops/cpu/ml_post.h"
#include "ops/cpu/par.h"

typedef struct {
  const int32_t *h;
  int64_t classes, vectors, features, pairs, coefs;
  int svc, cls;
  float gamma, coef0, degree;
  const int32_t *per_class; /* vectors per class */
  const float *sv, *coef, *rho, *proba, *probb;
  const int32_t *labels; /* two words each */
  int32_t *start;        /* first vector of each class (allocated) */
} model;

static dvm_status *bad(const char *why, long long at) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "svm: model words: %s (at %lld)", why, at);
}

/* Reads and checks the words of M into *m (m->start to be freed). */
static dvm_status *read_model(const dvm_tensor *t, int cls, model *m) {
  if (t->dtype != DVM_I32 || t->rank != 1) return bad("want i32 [W]", 0);
  int64_t nw = t->dims[0];
  const int32_t *h = dvm_tensor_ptr(t);
  if (nw < SVM_HEADER) return bad("shorter than the header", nw);
  for (int i = 0; i < SVM_HEADER; i++)
    if (h[i] < 0) return bad("a negative header word", i);
  *m = (model){.h = h, .classes = h[SVM_CLASSES], .vectors = h[SVM_VECTORS], .features = h[SVM_FEATURES],
               .svc = h[SVM_SVC], .cls = cls};
  int64_t K = m->classes, V = m->vectors, F = m->features;
  if (m->svc > 1 || h[SVM_KERNEL] > SVM_SIGMOID || h[SVM_POST] > ML_PROBIT || h[SVM_FLAGS] > 7 ||
      (cls ? K < 2 || K > 65535 : K != 1) || (m->svc ? V < 1 : V != 0) || ((h[SVM_FLAGS] & SVM_PROBA) && !(cls && m->svc)))
    return bad("header out of range", 0);
  m->pairs = cls && m->svc ? K * (K - 1) / 2 : 1;
  m->coefs = m->svc ? (cls ? (K - 1) * V : V) : (cls ? K : 1) * F;
  int64_t want = SVM_HEADER + 3 + (cls && m->svc ? K : 0) + (m->svc ? V * F : 0) + m->coefs + m->pairs +
                 (h[SVM_FLAGS] & SVM_PROBA ? 2 * m->pairs : 0) + (cls ? 2 * K : 0);
  if (want != nw) return bad("its length does not match its header", nw);
  const float *p = (const float *)(h + SVM_HEADER);
  m->gamma = p[0];
  m->coef0 = p[1];
  m->degree = p[2];
  m->per_class = (const int32_t *)(p + 3);
  m->sv = (const float *)(m->per_class + (cls && m->svc ? K : 0));
  m->coef = m->sv + (m->svc ? V * F : 0);
  m->rho = m->coef + m->coefs;
  m->proba = m->rho + m->pairs;
  m->probb = m->proba + m->pairs;
  m->labels = (const int32_t *)(m->rho + m->pairs + (h[SVM_FLAGS] & SVM_PROBA ? 2 * m->pairs : 0));
  if (cls && m->svc) {
    m->start = malloc(sizeof *m->start * (size_t)K);
    if (!m->start) return dvm_status_new(DVM_OUT_OF_MEMORY, "svm: out of memory");
    int64_t at = 0;
    for (int64_t c = 0; c < K; c++) {
      m->start[c] = (int32_t)at;
      at += m->per_class[c];
      if (m->per_class[c] < 0 || at > V) {
        free(m->start);
        return bad("vectors per class do not add up to the vectors", SVM_HEADER + 3 + c);
      }
    }
    if (at != V) {
      free(m->start);
      return bad("vectors per class do not add up to the vectors", SVM_HEADER + 3);
    }
  }
  return NULL;
}

/* The columns the model scores a row into. */
static int64_t columns(const model *m) {
  if (!m->cls) return 1;
  if (m->svc && !(m->h[SVM_FLAGS] & SVM_PROBA)) return m->classes > 2 ? m->pairs : 2;
  return m->classes;
}

/* Sums in eight lanes (vectorized; ONNX Runtime's order differs too):
 * x.v, or |x - v|^2 with `dist`. */
static inline float sum8(const float *a, const float *b, int64_t n, int dist) {
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; l++) acc[l] += dist ? (a[i + l] - b[i + l]) * (a[i + l] - b[i + l]) : a[i + l] * b[i + l];
  for (; i < n; i++) acc[i & 7] += dist ? (a[i] - b[i]) * (a[i] - b[i]) : a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static float dot(const float *a, const float *b, int64_t n) { return sum8(a, b, n, 0); }

/* k[v] = k(x, v) for each support vector v, of the model's kernel. */
static void kernels(const model *m, const float *x, float *k) {
  int64_t F = m->features, V = m->vectors;
  const float *sv = m->sv;
  switch (m->h[SVM_KERNEL]) {
  case SVM_POLY:
    for (int64_t v = 0; v < V; v++) {
      float b = m->gamma * dot(x, sv + v * F, F) + m->coef0;
      k[v] = m->degree == 2 ? b * b : m->degree == 3 ? b * b * b : powf(b, m->degree);
    }
    break;
  case SVM_RBF:
    for (int64_t v = 0; v < V; v++) k[v] = expf(-m->gamma * sum8(x, sv + v * F, F, 1));
    break;
  case SVM_SIGMOID:
    for (int64_t v = 0; v < V; v++) k[v] = tanhf(m->gamma * dot(x, sv + v * F, F) + m->coef0);
    break;
  default:
    for (int64_t v = 0; v < V; v++) k[v] = dot(x, sv + v * F, F);
  }
}

/* libsvm's pairwise coupling (Wu, Lin and Weng 2004, method 2) as ONNX
 * Runtime computes it in floats: r [K, K] pairwise probabilities, p [K]
 * the classes'; q [K, K] and qp [K] scratch. */
static void coupling(int64_t K, const float *r, float *p, float *q, float *qp) {
  float eps = 0.005f / (float)K;
  memset(q, 0, sizeof *q * (size_t)(K * K));
  for (int64_t i = 0; i < K; i++) {
    p[i] = 1.0f / (float)K;
    for (int64_t j = 0; j < i; j++) {
      q[i * K + i] += r[j * K + i] * r[j * K + i];
      q[i * K + j] = q[j * K + i];
    }
    for (int64_t j = i + 1; j < K; j++) {
      q[i * K + i] += r[j * K + i] * r[j * K + i];
      q[i * K + j] = -r[j * K + i] * r[i * K + j];
    }
  }
  for (int it = 0; it < 100; it++) {
    float pqp = 0, err = 0;
    for (int64_t i = 0; i < K; i++) {
      qp[i] = 0;
      for (int64_t j = 0; j < K; j++) qp[i] += q[i * K + j] * p[j];
      pqp += p[i] * qp[i];
    }
    for (int64_t i = 0; i < K; i++) err = fabsf(qp[i] - pqp) > err ? fabsf(qp[i] - pqp) : err;
    if (err < eps) break;
    for (int64_t i = 0; i < K; i++) {
      float diff = (-qp[i] + pqp) / q[i * K + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * K + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < K; j++) {
        qp[j] = (qp[j] + diff * q[i * K + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

typedef struct {
  const model *m;
  const float *x;
  float *z;
  int64_t *y;
  int64_t cols;
  float *scratch; /* per thread: kernels [V], pairs, and with probabilities r [K, K], q [K, K], qp [K] */
  int32_t *votes; /* per thread: [K] */
  size_t per_thread;
} job;

/* One row of an SVC classifier: its label and scores z. */
static void svc_row(const job *j, const float *x, float *z, int64_t *y, float *k, int32_t *votes) {
  const model *m = j->m;
  int64_t K = m->classes, V = m->vectors;
  int proba = m->h[SVM_FLAGS] & SVM_PROBA, post = m->h[SVM_POST];
  kernels(m, x, k);
  float *s = proba ? k + V : z, *r = k + V + m->pairs, *q = r + K * K, *qp = q + K * K;
  memset(votes, 0, sizeof *votes * (size_t)K);
  for (int64_t i = 0, pair = 0; i < K - 1; i++)
    for (int64_t c = i + 1; c < K; c++, pair++) {
      double sum = 0; /* in double, as ONNX Runtime sums */
      const float *ci = m->coef + (c - 1) * V + m->start[i], *cj = m->coef + i * V + m->start[c];
      for (int32_t t = 0; t < m->per_class[i]; t++) sum += ci[t] * k[m->start[i] + t];
      for (int32_t t = 0; t < m->per_class[c]; t++) sum += cj[t] * k[m->start[c] + t];
      sum += m->rho[pair];
      s[pair] = (float)sum;
      votes[sum > 0 ? i : c]++;
    }
  int64_t best = 0;
  for (int64_t c = 1; c < K; c++)
    if (votes[c] > votes[best]) best = c;
  *y = ml_label(m->labels, best);
  if (proba) {
    memset(r, 0, sizeof *r * (size_t)(K * K));
    for (int64_t i = 0, pair = 0; i < K - 1; i++)
      for (int64_t c = i + 1; c < K; c++, pair++) {
        float p = 1 - ml_logistic(s[pair] * m->proba[pair] + m->probb[pair]);
        p = fminf(fmaxf(p, 1.0e-7f), 1 - 1.0e-7f);
        r[i * K + c] = p;
        r[c * K + i] = 1 - p;
      }
    coupling(K, r, z, q, qp);
    ml_transform(post, z, K);
  } else if (K > 2) {
    ml_transform(post, z, m->pairs);
  } else if (post == ML_NONE) {
    z[1] = z[0];
    z[0] = -z[1];
  } else {
    z[1] = post == ML_LOGISTIC ? ml_logistic(z[0]) : z[0];
    z[0] = 1 - z[1];
  }
}

static void rows(void *ctx, int64_t s, int64_t e) {
  const job *j = ctx;
  const model *m = j->m;
  int64_t K = m->classes, V = m->vectors, F = m->features;
  float *k = j->scratch + (size_t)dvm_par_slot() * j->per_thread;
  int32_t *votes = j->votes + (size_t)dvm_par_slot() * (size_t)K;
  for (int64_t r = s; r < e; r++) {
    const float *x = j->x + r * F;
    float *z = j->z + r * j->cols;
    if (m->cls && m->svc) {
      svc_row(j, x, z, j->y + r, k, votes);
    } else if (m->cls) { /* linear mode */
      int64_t best = 0;
      for (int64_t c = 0; c < K; c++) {
        z[c] = dot(x, m->coef + c * F, F) + m->rho[0];
        if (z[c] > z[best]) best = c;
      }
      int pos = m->h[SVM_FLAGS] & SVM_POSITIVE, proba = m->h[SVM_FLAGS] & SVM_PROBA;
      if (K == 2 && !proba && ((pos && z[best] >= 0.5f) || (!pos && z[best] > 0))) best = 1;
      j->y[r] = ml_label(m->labels, best);
      ml_transform(m->h[SVM_POST], z, K);
    } else {
      float v;
      if (m->svc) {
        kernels(m, x, k);
        v = dot(m->coef, k, V) + m->rho[0];
      } else {
        v = dot(x, m->coef, F) + m->rho[0];
      }
      z[0] = m->h[SVM_FLAGS] & SVM_ONE_CLASS ? (v > 0 ? 1.0f : -1.0f) : v;
    }
  }
}

static dvm_status *svm(const dvm_kernel_args *a) {
  int cls;
  int64_t n, cols;
  dvm_status *st = ml_scores_call(a, "svm", &n, &cols, &cls);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  model m;
  if ((st = read_model(a->in[1], cls, &m))) return st;
  int64_t features = x->rank == 2 ? x->dims[1] : x->dims[0];
  const dvm_tensor *z = a->out[cls];
  if (columns(&m) != cols)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "svm: the model gives %lld scores a row, the call says %lld",
                        (long long)columns(&m), (long long)cols);
  else if (cls && m.svc && m.classes == 2 && !(m.h[SVM_FLAGS] & SVM_PROBA) && m.h[SVM_POST] == ML_PROBIT)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "svm: PROBIT of one score into two columns is not defined");
  else if (features != m.features)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "svm: X has %lld features, the model %lld", (long long)features,
                        (long long)m.features);
  else if ((cls && dvm_tensor_numel(a->out[0]) != n) || dvm_tensor_numel(z) != n * cols)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "svm: outputs are not [%lld] and [%lld, %lld]", (long long)n,
                        (long long)n, (long long)cols);
  int threads = dvm_kargs_threads(a);
  int64_t K = m.classes;
  job j = {&m, dvm_tensor_ptr(x), dvm_tensor_ptr(z), cls ? dvm_tensor_ptr(a->out[0]) : NULL, cols, NULL, NULL,
           (size_t)(m.vectors + m.pairs + (m.h[SVM_FLAGS] & SVM_PROBA ? 2 * K * K + K : 0))};
  if (!st) {
    j.scratch = malloc(sizeof *j.scratch * j.per_thread * (size_t)threads);
    j.votes = malloc(sizeof *j.votes * (size_t)(K * threads));
    if (!j.scratch || !j.votes) st = dvm_status_new(DVM_OUT_OF_MEMORY, "svm: out of memory for scratch");
  }
  if (!st) dvm_par_for(threads, n, 64, rows, &j);
  free(j.scratch);
  free(j.votes);
  free(m.start);
  return st;
}

const dvm_kernel_def dvm_cpu_ml_svm_kernels[] = {
    {"svm", DVM_DEVICE_CPU, svm, "ml_scores", DVM_DTYPE_BIT(DVM_F32)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
