/* The post transforms of the ai.onnx.ml classifiers and regressors, as
 * ONNX Runtime computes them (its ml_common.h): the tree ensembles
 * (ml.c), the linear models and the SVMs (ml_linear.c, ml_svm.c). */
#ifndef DVM_OPS_CPU_ML_POST_H
#define DVM_OPS_CPU_ML_POST_H

#include <float.h>
#include <math.h>
#include <stdint.h>

/* post_transform, as the op attribute names them */
enum { ML_NONE, ML_LOGISTIC, ML_SOFTMAX, ML_SOFTMAX_ZERO, ML_PROBIT };

static inline float ml_logistic(float v) {
  float p = 1 / (1 + expf(-fabsf(v)));
  return v < 0 ? 1 - p : p;
}

/* ONNX Runtime's probit: sqrt(2) erfinv(2v - 1), with its approximation of
 * erfinv (so the two agree to float rounding). */
static inline float ml_probit(float v) {
  float x = 2 * v - 1, sgn = x < 0 ? -1.0f : 1.0f;
  x = (1 - x) * (1 + x);
  float l = logf(x), a = 2 / (3.14159f * 0.147f) + 0.5f * l, b = 1 / 0.147f * l;
  return 1.41421356f * sgn * sqrtf(-a + sqrtf(a * a - b));
}

/* The post transform of k >= 2 scores, in place. */
static inline void ml_transform(int post, float *s, int64_t k) {
  if (post == ML_PROBIT || post == ML_LOGISTIC) {
    for (int64_t i = 0; i < k; i++) s[i] = post == ML_PROBIT ? ml_probit(s[i]) : ml_logistic(s[i]);
  } else if (post == ML_SOFTMAX || post == ML_SOFTMAX_ZERO) {
    float mx = -FLT_MAX, sum = 0, e0 = 0;
    for (int64_t i = 0; i < k; i++) mx = s[i] > mx ? s[i] : mx;
    if (post == ML_SOFTMAX_ZERO) e0 = expf(-mx);
    for (int64_t i = 0; i < k; i++) {
      if (post == ML_SOFTMAX_ZERO && s[i] <= 0.0000001f && s[i] >= -0.0000001f) {
        s[i] *= e0; /* zeros stay zero */
        continue;
      }
      s[i] = expf(s[i] - mx);
      sum += s[i];
    }
    for (int64_t i = 0; i < k; i++) s[i] /= sum;
  }
}

#endif
