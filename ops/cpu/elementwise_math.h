/* Float math for elementwise kernels, written so that a loop calling it
 * vectorizes: every branch is a select on values computed unconditionally
 * (through integer masks: see dvm_ew_fsel), there are no calls into libm,
 * and float -> int conversions go through bit tricks (a NaN reaching a C
 * conversion would be undefined behaviour).
 *
 * Largest errors against the correctly rounded result, over samples of
 * every binade and dense samples where the functions bend (checked by
 * tests/ops/test_unary.py): exp, log 1 ulp; tanh, erf 1.5 ulp; sigmoid 2.5
 * ulp; gelu 5 ulp, in the far negative tail too, where 1 + erf(x) would
 * lose every digit. gelu's tanh form rounds its tanh argument y in f32, so
 * its relative error grows as |y| ulp in the negative tail (2e-5 at x = -6).
 *
 * The f16 and bf16 conversions and the bit helpers are vm/half.h's. */
#ifndef DVM_OPS_CPU_ELEMENTWISE_MATH_H
#define DVM_OPS_CPU_ELEMENTWISE_MATH_H

#include <stdint.h>
#include <string.h>

#include "half.h"

/* The math functions below are always inlined: called out of line (GCC
 * declines to inline them into a loop that calls two of them, or into the
 * unary kernels' clones), each element paid a call into the scalar default
 * build, 4-15x slower than the vector loop. */
#define DVM_EW_MATH static inline __attribute__((always_inline))

/* a b + c rounded once, for the polynomials below (exp's, erfc's, erf's):
 * one instruction in the x86-64-v3 and v4 clones and on targets with FMA,
 * libm's (exact, scalar, slow) fmaf in the baseline x86-64 clone: the same
 * bits in every clone. Products written plainly GCC contracts into FMAs
 * in the v3 and v4 clones only, so there a result can differ from the
 * baseline clone's (erf by an ulp). Against a multiply and an add: GELU (erf)
 * 18% and sigmoid 14% less time on Zen 4 (docs/performance.md "FMA in the
 * math functions"), accuracy as before or better. */
#define DVM_EW_FMA(a, b, c) __builtin_fmaf((a), (b), (c))

/* c ? a : b for floats. A plain ?: on a float comparison is not
 * if-converted (so not vectorized) under -ftrapping-math, GCC's default:
 * the comparison might raise an exception the branch would have skipped. */
static inline float dvm_ew_fsel(int c, float a, float b) {
  return dvm_ew_bits_f32(dvm_ew_sel(c, dvm_ew_f32_bits(a), dvm_ew_f32_bits(b)));
}

static inline double dvm_ew_dsel(int c, double a, double b) {
  uint64_t m = 0u - (uint64_t)(c != 0), ua, ub;
  memcpy(&ua, &a, 8);
  memcpy(&ub, &b, 8);
  ua = (ua & m) | (ub & ~m);
  memcpy(&a, &ua, 8);
  return a;
}

/* min and max that return NaN if either side is NaN (np.minimum). */
#define DVM_EW_MINMAX(name, T, SEL, OP)                                      \
  static inline T name(T x, T y) { return SEL((x OP y) | (x != x), x, y); }
#define DVM_EW_ISEL(c, a, b) ((c) ? (a) : (b))
DVM_EW_MINMAX(dvm_ew_min_f32, float, dvm_ew_fsel, <)
DVM_EW_MINMAX(dvm_ew_max_f32, float, dvm_ew_fsel, >)
DVM_EW_MINMAX(dvm_ew_min_f64, double, dvm_ew_dsel, <)
DVM_EW_MINMAX(dvm_ew_max_f64, double, dvm_ew_dsel, >)
#define DVM_EW_MINMAX_INT(sfx, T)                    \
  DVM_EW_MINMAX(dvm_ew_min_##sfx, T, DVM_EW_ISEL, <) \
  DVM_EW_MINMAX(dvm_ew_max_##sfx, T, DVM_EW_ISEL, >)
DVM_EW_MINMAX_INT(i8, int8_t)
DVM_EW_MINMAX_INT(i16, int16_t)
DVM_EW_MINMAX_INT(i32, int32_t)
DVM_EW_MINMAX_INT(i64, int64_t)
DVM_EW_MINMAX_INT(u8, uint8_t)
DVM_EW_MINMAX_INT(u16, uint16_t)
DVM_EW_MINMAX_INT(u32, uint32_t)
DVM_EW_MINMAX_INT(u64, uint64_t)
#define DVM_EW_MIN(x, y) _Generic((x), float: dvm_ew_min_f32, double: dvm_ew_min_f64, \
    int8_t: dvm_ew_min_i8, int16_t: dvm_ew_min_i16, int32_t: dvm_ew_min_i32,         \
    int64_t: dvm_ew_min_i64, uint8_t: dvm_ew_min_u8, uint16_t: dvm_ew_min_u16,       \
    uint32_t: dvm_ew_min_u32, uint64_t: dvm_ew_min_u64)(x, y)
#define DVM_EW_MAX(x, y) _Generic((x), float: dvm_ew_max_f32, double: dvm_ew_max_f64, \
    int8_t: dvm_ew_max_i8, int16_t: dvm_ew_max_i16, int32_t: dvm_ew_max_i32,         \
    int64_t: dvm_ew_max_i64, uint8_t: dvm_ew_max_u8, uint16_t: dvm_ew_max_u16,       \
    uint32_t: dvm_ew_max_u32, uint64_t: dvm_ew_max_u64)(x, y)

/* 2^n for n in [-126, 127]. */
static inline float dvm_ew_pow2i(int32_t n) { return dvm_ew_bits_f32((uint32_t)(n + 127) << 23); }

/* Cephes' expf in three steps. x = n ln2 + r, |r| <= ln2/2: n rounds
 * x/ln2 to an integer (in a float's low bits), and r is x - n ln2 with ln2
 * in two parts, the first of 9 bits so that n times it is exact (and the
 * FMAs round each step once). */
DVM_EW_MATH float dvm_ew_exp_reduce(float x, int32_t *n) {
  float t = DVM_EW_FMA(x, 1.44269504088896341f, 0x1.8p23f);
  *n = (int32_t)(dvm_ew_f32_bits(t) - dvm_ew_f32_bits(0x1.8p23f));
  float fn = t - 0x1.8p23f;
  return DVM_EW_FMA(fn, 2.12194440e-4f, DVM_EW_FMA(fn, -0.693359375f, x));
}

/* e^r for |r| <= ln2/2: 1 + r + r^2 p(r), p of degree 5, all in FMAs
 * (Horner to the end: one instruction fewer than p r r + r + 1, and no
 * product left for the compiler to contract differently in each caller,
 * so a value is the same bits in every loop that computes it). */
DVM_EW_MATH float dvm_ew_exp_poly(float r) {
  float p = 1.9875691500e-4f;
  p = DVM_EW_FMA(p, r, 1.3981999507e-3f);
  p = DVM_EW_FMA(p, r, 8.3334519073e-3f);
  p = DVM_EW_FMA(p, r, 4.1665795894e-2f);
  p = DVM_EW_FMA(p, r, 1.6666665459e-1f);
  p = DVM_EW_FMA(p, r, 5.0000001201e-1f);
  return DVM_EW_FMA(DVM_EW_FMA(p, r, 1.0f), r, 1.0f);
}

/* e^r 2^n, 2^n in two halves (n >> 1 is GCC's and Clang's arithmetic
 * shift: floor) so that results down to the subnormals round once. The
 * caller clamps x to [-104, 89]: e^x is then inf above and 0 below the
 * float range; NaN stays NaN throughout. */
DVM_EW_MATH float dvm_ew_exp_scale(float r, int32_t n) {
  int32_t n1 = n >> 1;
  return dvm_ew_exp_poly(r) * dvm_ew_pow2i(n1) * dvm_ew_pow2i(n - n1);
}

DVM_EW_MATH float dvm_ew_exp_clamp(float x) {
  float xc = dvm_ew_fsel(x < -104.0f, -104.0f, x);
  return dvm_ew_fsel(xc > 89.0f, 89.0f, xc);
}

DVM_EW_MATH float dvm_ew_expf(float x) {
  int32_t n;
  float r = dvm_ew_exp_reduce(dvm_ew_exp_clamp(x), &n);
  return dvm_ew_exp_scale(r, n);
}

/* dvm_ew_expf where DVM_EW_EXP_MID(x): e^x and 2^n are normal floats, so
 * 2^n is one factor and no clamp is needed (the same bits: scaling by a
 * power of two in one step or two is exact in the normal range). */
#define DVM_EW_EXP_MID(x) (((x) >= -87.0f) & ((x) <= 88.0f))
DVM_EW_MATH float dvm_ew_expf_mid(float x) {
  int32_t n;
  float r = dvm_ew_exp_reduce(x, &n);
  return dvm_ew_exp_poly(r) * dvm_ew_pow2i(n);
}

/* e^(hi + lo) for |lo| < 0.1, lo carrying bits that hi + lo would round
 * away. */
DVM_EW_MATH float dvm_ew_expf_hl(float hi, float lo) {
  int32_t n;
  float r = dvm_ew_exp_reduce(dvm_ew_exp_clamp(hi), &n) + lo;
  return dvm_ew_exp_scale(r, n);
}

/* Cephes' logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) by a
 * polynomial in m - 1. */
DVM_EW_MATH float dvm_ew_logf(float x) {
  int small = x < 0x1p-126f; /* subnormal: scale into the normal range */
  float xs = dvm_ew_fsel(small, x * 0x1p23f, x);
  uint32_t ix = dvm_ew_f32_bits(xs);
  int32_t e = (int32_t)((ix >> 23) & 0xffu) - 126 - (small ? 23 : 0);
  float m = dvm_ew_bits_f32((ix & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
  int lo = m < 0.707106781186547524f;
  e -= lo;
  m = dvm_ew_fsel(lo, m + m - 1.0f, m - 1.0f);
  float fe = (float)e, z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += fe * -2.12194440e-4f;
  y += -0.5f * z;
  float r = m + y + fe * 0.693359375f;
  r = dvm_ew_fsel(x == 0.0f, -__builtin_inff(), r);
  r = dvm_ew_fsel(x == __builtin_inff(), x, r);
  r = dvm_ew_fsel(x < 0.0f, __builtin_nanf(""), r);
  return dvm_ew_fsel(x != x, x, r);
}

/* Where erf switches from its polynomial to 1 - erfc. */
#define DVM_EW_ERF_SPLIT 0.927734375f

/* erfc(t) e^t^2 = w g(w) for t in [0, 10.5] (beyond, erfc is 0 in float),
 * w = 1/(1+t), g fitted as a polynomial (relative error 2e-8; g is between
 * 0.56 and 1, so its terms do not cancel). */
DVM_EW_MATH float dvm_ew_erfc_ratio(float t) {
  float w = 1.0f / (1.0f + t), v = (w - 0.543478261f) * 2.19047619f; /* v in [-1, 1] */
  float g = -1.215670345e-04f;
  g = DVM_EW_FMA(g, v, 1.779781014e-04f);
  g = DVM_EW_FMA(g, v, 3.105603391e-04f);
  g = DVM_EW_FMA(g, v, -1.024390804e-03f);
  g = DVM_EW_FMA(g, v, 1.191610005e-03f);
  g = DVM_EW_FMA(g, v, 3.922753676e-04f);
  g = DVM_EW_FMA(g, v, -6.149554159e-03f);
  g = DVM_EW_FMA(g, v, 1.470410079e-02f);
  g = DVM_EW_FMA(g, v, -4.419443198e-03f);
  g = DVM_EW_FMA(g, v, -8.177631348e-02f);
  g = DVM_EW_FMA(g, v, 2.016099691e-01f);
  g = DVM_EW_FMA(g, v, 8.751047254e-01f);
  return w * g;
}

/* erfc(t) = r e where t^2 = c a^2 with c 1 or 1/2 (a = |x| for the gelu of
 * x): r = dvm_ew_erfc_ratio(t), e = e^-t^2 with the exponent taken from a,
 * not from the rounded t, and split into an exact c a_hi^2 (a_hi: a's top
 * 12 bits) and a small rest, so e keeps its relative accuracy where t^2 is
 * large. The factors are returned apart for callers that scale the
 * product, which can be subnormal when the scaled result is not. The
 * caller clamps a. */
DVM_EW_MATH float dvm_ew_erfc_parts(float t, float a, float c, float *r_out) {
  float ah = dvm_ew_bits_f32(dvm_ew_f32_bits(a) & 0xfffff000u), al = a - ah;
  *r_out = dvm_ew_erfc_ratio(t);
  return dvm_ew_expf_hl(-(c * (ah * ah)), -(c * (al * (a + ah))));
}

/* erf(x) for |x| <= DVM_EW_ERF_SPLIT: x + x p(x^2) (N. Juffa's minimax). */
DVM_EW_MATH float dvm_ew_erf_core(float x) {
  float s = x * x;
  float r = -5.96761703e-4f;
  r = DVM_EW_FMA(r, s, 4.99119423e-3f);
  r = DVM_EW_FMA(r, s, -2.67681349e-2f);
  r = DVM_EW_FMA(r, s, 1.12819925e-1f);
  r = DVM_EW_FMA(r, s, -3.76125336e-1f);
  r = DVM_EW_FMA(r, s, 1.28379166e-1f);
  return r * x + x;
}

/* Above the split erf is 1 - erfc(|x|) with the sign of x. erf is 1 in
 * float from 3.92 and erfc there is below 2^-25: |x| is clamped to 4, and
 * e^-x^2 needs neither the split exponent nor subnormal results (an error
 * in erfc of a few of its own ulps is a fraction of one of erf's). */
DVM_EW_MATH float dvm_ew_erff(float x) {
  float t = __builtin_fabsf(x);
  t = dvm_ew_fsel(t > 4.0f, 4.0f, t);
  int32_t n;
  float r = dvm_ew_exp_reduce(-(t * t), &n);
  float tail = 1.0f - dvm_ew_erfc_ratio(t) * (dvm_ew_exp_poly(r) * dvm_ew_pow2i(n));
  tail = dvm_ew_bits_f32(dvm_ew_f32_bits(tail) | (dvm_ew_f32_bits(x) & 0x80000000u));
  return dvm_ew_fsel(t > DVM_EW_ERF_SPLIT, tail, dvm_ew_erf_core(x));
}

/* Cephes' tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above,
 * with the sign of x. tanh is 1 in float from 9.01, so 2|x| is clamped to
 * 20: e^2|x| is never subnormal and takes 2^n in one step. */
DVM_EW_MATH float dvm_ew_tanhf(float x) {
  float t = __builtin_fabsf(x), z = x * x;
  float p = -5.70498872745e-3f;
  p = DVM_EW_FMA(p, z, 2.06390887954e-2f);
  p = DVM_EW_FMA(p, z, -5.37397155531e-2f);
  p = DVM_EW_FMA(p, z, 1.33314422036e-1f);
  p = DVM_EW_FMA(p, z, -3.33332819422e-1f);
  float small = DVM_EW_FMA(p * z, x, x);
  int32_t n;
  float r = dvm_ew_exp_reduce(dvm_ew_fsel(t > 10.0f, 20.0f, t + t), &n);
  float big = 1.0f - 2.0f / (dvm_ew_exp_poly(r) * dvm_ew_pow2i(n) + 1.0f);
  big = dvm_ew_bits_f32(dvm_ew_f32_bits(big) | (dvm_ew_f32_bits(x) & 0x80000000u));
  return dvm_ew_fsel(t < 0.625f, small, big);
}

/* 1 / (1 + e^-x), as e^x / (1 + e^x) for negative x so that the result
 * keeps its digits down to the subnormals. e = e^-|x| = p 2^n. |x| is
 * clamped to 87 for positive x (e^-87 is normal, and 1 + e is 1 from
 * 2^-24 on) and to 104 for negative x (the result is e there, 0 from
 * -103.98 on). From 2^-127 down (n < -126) the result e is made from bits
 * and never meets the arithmetic: a subnormal operand or result costs a
 * microcode assist for the whole vector on x86 (a Sigmoid over conv
 * outputs of |x| up to 380 took 2.7x its time on Zen 4,
 * docs/performance.md). p 2^(n + 149), below 2^23, rounded to an integer
 * by adding 2^23 in the same FMA, is its bit pattern, rounded once as
 * p 2^n would be; 1 + that is not subnormal either. (At n = -126, |x| in
 * 87.33..87.68, e may still be subnormal and pay the assist.) n < -126
 * exactly from a = 0x1.5ebb84p+6 on (n falls with a): a comparison that a
 * NaN fails, so a NaN of either sign stays NaN through the division. */
DVM_EW_MATH float dvm_ew_sigmoidf(float x) {
  int neg = x < 0.0f;
  float a = __builtin_fabsf(x), lim = dvm_ew_fsel(neg, 104.0f, 87.0f);
  a = dvm_ew_fsel(a > lim, lim, a);
  int32_t n;
  float p = dvm_ew_exp_poly(dvm_ew_exp_reduce(-a, &n));
  int tiny = a >= 0x1.5ebb84p+6f;
  float v = DVM_EW_FMA(p, dvm_ew_pow2i(tiny ? n + 149 : n), tiny ? 0x1p23f : 0.0f);
  float sub = dvm_ew_bits_f32(dvm_ew_f32_bits(v) - dvm_ew_f32_bits(0x1p23f));
  return dvm_ew_fsel(tiny, sub, dvm_ew_fsel(neg, v, 1.0f) / (1.0f + v));
}

/* dvm_ew_sigmoidf where DVM_EW_SIGMOID_MID(x) (false for NaN): e^-|x| is
 * never subnormal, and |x| is clamped as an integer, in one instruction
 * (the same bits). */
#define DVM_EW_SIGMOID_MID(x) ((x) >= -87.0f)
DVM_EW_MATH float dvm_ew_sigmoidf_mid(float x) {
  uint32_t ab = dvm_ew_f32_bits(x) & 0x7fffffffu, lim = dvm_ew_f32_bits(87.0f);
  int32_t n;
  float p = dvm_ew_exp_poly(dvm_ew_exp_reduce(-dvm_ew_bits_f32(ab < lim ? ab : lim), &n));
  float e = p * dvm_ew_pow2i(n);
  return dvm_ew_fsel(x < 0.0f, e, 1.0f) / (1.0f + e);
}

/* x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 = x erfc(-x / sqrt 2) / 2, and
 * for x > 0 x (2 - erfc(x / sqrt 2)) / 2: one erfc, no cancellation on
 * either side. x/2 scales erfc's rational factor before its exponential
 * one so that no step is subnormal unless the result is. */
DVM_EW_MATH float dvm_ew_geluf(float x) {
  float a = __builtin_fabsf(x);
  a = dvm_ew_fsel(a > 14.8f, 14.8f, a);
  float h = 0.5f * x, r, e = dvm_ew_erfc_parts(a * 0.707106781186547524f, a, 0.5f, &r);
  float y = dvm_ew_fsel(x < 0.0f, (h * r) * e, h * (2.0f - r * e));
  return dvm_ew_fsel(x == -__builtin_inff(), -0.0f, y);
}

/* ONNX Gelu approximate="tanh": x (1 + tanh(y)) / 2 = x sigmoid(2y), with
 * y = sqrt(2/pi) (x + 0.044715 x^3); the sigmoid form keeps the negative
 * tail accurate. */
DVM_EW_MATH float dvm_ew_gelu_tanhf(float x) {
  float y = 0.797884560802865356f * (x + 0.044715f * x * x * x);
  float r = x * dvm_ew_sigmoidf(2.0f * y);
  return dvm_ew_fsel(x == -__builtin_inff(), -0.0f, r);
}

/* dst[i] = F for x = src[i], i < n (floats; dst may be src), F and FAST
 * expressions of x: each block of DVM_EW_MID_BLOCK inputs that all meet
 * MID (an int expression of x, or 0) takes FAST, a cheaper form of F for
 * such inputs (unary_math.h's MID column). The test costs two vector
 * instructions per vector; on Zen 4, sigmoid's and exp's forms for the
 * normal range take 2/3 of their general ones' time (docs/performance.md
 * "Sigmoid and exp a block at a time"). */
#define DVM_EW_MID_BLOCK 64
#define DVM_EW_MID_LOOP(n, src, dst, MID, FAST, F)                                          \
  do {                                                                                      \
    int64_t b_ = 0;                                                                         \
    for (; b_ + DVM_EW_MID_BLOCK <= (n); b_ += DVM_EW_MID_BLOCK) {                          \
      const float *s_ = (src) + b_;                                                         \
      float *d_ = (dst) + b_;                                                               \
      int mid_ = 1;                                                                         \
      _Pragma("omp simd reduction(& : mid_)") for (int j_ = 0; j_ < DVM_EW_MID_BLOCK; j_++) { \
        float x = s_[j_];                                                                   \
        (void)x;                                                                            \
        mid_ &= (MID);                                                                      \
      }                                                                                     \
      if (mid_)                                                                             \
        _Pragma("omp simd") for (int j_ = 0; j_ < DVM_EW_MID_BLOCK; j_++) {                 \
          float x = s_[j_];                                                                 \
          (void)x;                                                                          \
          d_[j_] = (FAST);                                                                  \
        }                                                                                   \
      else                                                                                  \
        _Pragma("omp simd") for (int j_ = 0; j_ < DVM_EW_MID_BLOCK; j_++) {                 \
          float x = s_[j_];                                                                 \
          d_[j_] = (F);                                                                     \
        }                                                                                   \
    }                                                                                       \
    _Pragma("omp simd") for (int64_t j_ = b_; j_ < (n); j_++) {                             \
      float x = (src)[j_];                                                                  \
      (dst)[j_] = (F);                                                                      \
    }                                                                                       \
  } while (0)

/* Per dtype: storage type, compute type, its unsigned twin (integers wrap:
 * they are computed there, where overflow is defined; U must not promote to
 * int), load and store conversions. The elementwise kernels' one table. */
#define DVM_EW_SAME(v) (v)
#define T_f32 float, float, float, DVM_EW_SAME, DVM_EW_SAME
#define T_f64 double, double, double, DVM_EW_SAME, DVM_EW_SAME
#define T_f16 uint16_t, float, float, dvm_f16_to_f32, dvm_f32_to_f16
#define T_bf16 uint16_t, float, float, dvm_bf16_to_f32, dvm_f32_to_bf16
#define T_i8 int8_t, int8_t, uint32_t, DVM_EW_SAME, DVM_EW_SAME
#define T_i16 int16_t, int16_t, uint32_t, DVM_EW_SAME, DVM_EW_SAME
#define T_i32 int32_t, int32_t, uint32_t, DVM_EW_SAME, DVM_EW_SAME
#define T_i64 int64_t, int64_t, uint64_t, DVM_EW_SAME, DVM_EW_SAME
#define T_u8 uint8_t, uint8_t, uint32_t, DVM_EW_SAME, DVM_EW_SAME
#define T_u16 uint16_t, uint16_t, uint32_t, DVM_EW_SAME, DVM_EW_SAME
#define T_u32 uint32_t, uint32_t, uint32_t, DVM_EW_SAME, DVM_EW_SAME
#define T_u64 uint64_t, uint64_t, uint64_t, DVM_EW_SAME, DVM_EW_SAME
#define T_bool uint8_t, uint8_t, uint8_t, DVM_EW_SAME, DVM_EW_SAME

#endif
