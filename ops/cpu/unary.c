/* Elementwise kernels of one input; the output has the input's shape (shape
 * function "same").
 *
 *   the float math ops of unary_math.h with kernels of their own (sqrt,
 *       exp, log, tanh, erf, sigmoid, reciprocal, ...) (in: X) -> Y
 *       f32 f64, and f16 bf16 computed in f32 and rounded once.
 *       f32 math is dvm's own vectorized code (ops/cpu/elementwise_math.h,
 *       errors of about 1-2 ulp); f64 is libm's.
 *   gelu (in: X; attrs: approximate:int, optional, 0 = "none" (default),
 *       1 = "tanh") -> Y, dtypes as above: ONNX Gelu,
 *       x (1 + erf(x / sqrt 2)) / 2, or x (1 + tanh(sqrt(2/pi)
 *       (x + 0.044715 x^3))) / 2.
 *   sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, ceil,
 *       floor, round (halves to even), softplus, softsign, mish (in: X)
 *       -> Y, f32 f64 f16 bf16 (libm's math for each): the ONNX ops.
 *   elu, leaky_relu, thresholded_relu, celu, swish (attrs: alpha:float),
 *       selu (attrs: alpha, gamma), shrink (attrs: bias, lambd) (in: X)
 *       -> Y, the same dtypes: the ONNX activations of those names.
 *   isnan, isinf (attrs: detect_negative, detect_positive, ints) (in: X)
 *       -> Y bool, X f32 f64 f16 bf16.
 *   bitwise_not (in: X) -> Y: ~x, i8 i16 i32 i64 u8.
 *   sign (in: X) -> Y: -1, 0 or 1 (floats keep -0 and NaN), dtypes as relu.
 *   relu, neg, abs (in: X) -> Y: f32 f64 f16 bf16 i8 i16 i32 i64 u8.
 *       Integers wrap: neg and abs of INT_MIN are INT_MIN. relu keeps NaN.
 *   not (in: X bool) -> Y bool: a byte other than 0 is true; outputs 0 or 1.
 *   clip (in: X; attrs: lo:float, hi:float) -> Y, dtypes as relu.
 *       min(max(x, lo), hi): NaN stays NaN, lo > hi gives hi everywhere (as
 *       ONNX says); an absent ONNX bound is passed as -inf or +inf. Bounds
 *       may also be ints; for integer X they are rounded inward (ceil(lo),
 *       floor(hi)) and saturated to X's range. A NaN bound is an error.
 *   identity (in: X) -> Y, any dtype: a copy.
 *   cast (in: X) -> Y, X and Y any of f32 f16 bf16 f64 i8 i16 i32 i64 u8
 *       bool, or one of them string (ops/cpu/cast_string.c); Y's dtype is
 *       the target (ONNX Cast):
 *       - float to float rounds to nearest even once (f64 -> f16 included);
 *         beyond the target's range gives +-inf; NaN stays NaN.
 *       - float to integer truncates toward zero. NaN, +-inf and values
 *         outside i32 (for i8 i16 i32 u8 targets) or i64 (for i64) give the
 *         type's minimum, then i8 i16 u8 keep the low bits of that i32, as
 *         x86 (and NumPy and ONNX Runtime on it) do: 300.7 -> u8 44,
 *         -1.5 -> u8 255, NaN -> i32 -2147483648, NaN -> u8 0.
 *       - integer to integer keeps the low bits (two's complement).
 *       - integer to float rounds to nearest even.
 *       - to bool: x != 0 (NaN is true); from bool: 0 or 1.
 *
 * Every kernel checks its dtypes, that the output has the input's shape
 * and its attributes' count and kinds. An output may be the same memory as
 * its input (of the same dtype size). */
#include <math.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/cast_string.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/unary_math.h"
#include "ops/kargs.h"
#include "shapefuncs/shape.h"

/* Below this many elements per thread, a fork costs more than it saves. */
#define MIN_CHUNK ((int64_t)1 << 15)

/* Clip's bounds, or an activation's first and second parameters (Elu's
 * alpha, Selu's alpha and gamma, Shrink's bias and lambd), in each compute
 * type. */
typedef struct params {
  float lo_f, hi_f;
  double lo_d, hi_d;
  int64_t lo_i, hi_i;
} params;

typedef void (*un_fn)(int64_t n, const void *x, void *o, const params *p);

/* The f64 forms of elementwise_math.h's f32 functions, on libm. */
static double sigmoid_d(double x) {
  double e = exp(x < 0 ? x : -x);
  return (x < 0 ? e : 1.0) / (1.0 + e);
}
static double gelu_d(double x) {
  return x == -INFINITY ? -0.0 : 0.5 * x * erfc(-x * 0.70710678118654752440);
}
static double gelu_tanh_d(double x) {
  double y = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
  return x == -INFINITY ? -0.0 : x / (1.0 + exp(-2.0 * y));
}
/* abs that wraps: abs(INT_MIN) is INT_MIN */
#define IABS(name, T, U) \
  static T name(T x) { return x < 0 ? (T)-(U)x : x; }
IABS(iabs8, int8_t, uint32_t)
IABS(iabs16, int16_t, uint32_t)
IABS(iabs32, int32_t, uint32_t)
IABS(iabs64, int64_t, uint64_t)
#define UABS(name, T) \
  static T name(T x) { return x; }
UABS(uabs8, uint8_t)
UABS(uabs16, uint16_t)
UABS(uabs32, uint32_t)
UABS(uabs64, uint64_t)

/* The ops, on a compute value v of type C (U: C's unsigned twin). */
#define RELU(C, U, v, p, name) DVM_EW_MAX(v, (C)0)
#define NEG(C, U, v, p, name) (C)(-(U)(v))
#define ABS(C, U, v, p, name) _Generic((v), float: fabsf, double: fabs, int8_t: iabs8, int16_t: iabs16, \
    int32_t: iabs32, int64_t: iabs64, uint8_t: uabs8, uint16_t: uabs16, uint32_t: uabs32, \
    uint64_t: uabs64)(v)
#define NOT(C, U, v, p, name) ((v) == 0)
#define LO(v, p) _Generic((v), float: (p)->lo_f, double: (p)->lo_d, default: (p)->lo_i)
#define HI(v, p) _Generic((v), float: (p)->hi_f, double: (p)->hi_d, default: (p)->hi_i)
#define CLIP(C, U, v, p, name) clip_##C(v, (C)LO(v, p), (C)HI(v, p))
/* libm's function f for v's type; the parameters A and B as v's type */
#define M(fn, v) _Generic((v), float: fn##f, double: fn)(v)
#define A(v, p) (__typeof__(v))LO(v, p)
#define B(v, p) (__typeof__(v))HI(v, p)
#define SIN(C, U, v, p, name) M(sin, v)
#define COS(C, U, v, p, name) M(cos, v)
#define TAN(C, U, v, p, name) M(tan, v)
#define ASIN(C, U, v, p, name) M(asin, v)
#define ACOS(C, U, v, p, name) M(acos, v)
#define ATAN(C, U, v, p, name) M(atan, v)
#define SINH(C, U, v, p, name) M(sinh, v)
#define COSH(C, U, v, p, name) M(cosh, v)
#define ASINH(C, U, v, p, name) M(asinh, v)
#define ACOSH(C, U, v, p, name) M(acosh, v)
#define ATANH(C, U, v, p, name) M(atanh, v)
#define CEIL(C, U, v, p, name) M(ceil, v)
#define FLOOR(C, U, v, p, name) M(floor, v)
#define ROUND(C, U, v, p, name) M(nearbyint, v) /* halves to even */
/* -1, 0 or 1; floats keep -0 and NaN */
#define SIGN(C, U, v, p, name) ((v) > 0 ? (C)1 : (v) == 0 || (v) != (v) ? (v) : (C)-1)
/* log(1 + e^x) without overflow */
#define SOFTPLUS(C, U, v, p, name) ((v) > 0 ? (v) + M(log1p, M(exp, -(v))) : M(log1p, M(exp, v)))
#define SOFTSIGN(C, U, v, p, name) ((v) / (1 + M(fabs, v)))
#define MISH(C, U, v, p, name) ((v) * M(tanh, SOFTPLUS(C, U, v, p, name)))
#define ELU(C, U, v, p, name) ((v) < 0 ? A(v, p) * M(expm1, v) : (v))
#define SELU(C, U, v, p, name) (B(v, p) * ((v) > 0 ? (v) : A(v, p) * M(expm1, v)))
#define LEAKY_RELU(C, U, v, p, name) ((v) < 0 ? A(v, p) * (v) : (v))
#define THRESHOLDED_RELU(C, U, v, p, name) ((v) > A(v, p) ? (v) : (C)0)
#define CELU(C, U, v, p, name) ((v) > 0 ? (v) : A(v, p) * M(expm1, (v) / A(v, p)))
#define SHRINK(C, U, v, p, name) ((v) < -B(v, p) ? (v) + A(v, p) : (v) > B(v, p) ? (v) - A(v, p) : (C)0)
#define SWISH(C, U, v, p, name) ((v) / (1 + M(exp, -A(v, p) * (v))))
/* to bool; IsInf's parameters say which signs count */
#define BITWISE_NOT(C, U, v, p, name) (C)(~(U)(v))
#define ISNAN(C, U, v, p, name) ((v) != (v))
#define ISINF(C, U, v, p, name) (isinf(v) && ((v) < 0 ? A(v, p) != 0 : B(v, p) != 0))

#define CLIP_FN(C, SEL)                                   \
  static inline C clip_##C(C v, C lo, C hi) {             \
    C t = SEL(v < lo, lo, v);                             \
    return SEL(t > hi, hi, t);                            \
  }
CLIP_FN(float, dvm_ew_fsel) CLIP_FN(double, dvm_ew_dsel) CLIP_FN(int8_t, DVM_EW_ISEL)
CLIP_FN(int16_t, DVM_EW_ISEL) CLIP_FN(int32_t, DVM_EW_ISEL) CLIP_FN(int64_t, DVM_EW_ISEL)
CLIP_FN(uint8_t, DVM_EW_ISEL) CLIP_FN(uint16_t, DVM_EW_ISEL) CLIP_FN(uint32_t, DVM_EW_ISEL)
CLIP_FN(uint64_t, DVM_EW_ISEL)


#define UN_LOOP(fn, OP, name, TS, C, U, LD, ST)                                         \
  DVM_EW_CLONES static void fn(int64_t n, const void *px, void *po, const params *p) {   \
    const TS *x = px;                                                                     \
    TS *o = po;                                                                           \
    (void)p;                                                                              \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                 \
      C v = LD(x[i]);                                                                     \
      o[i] = ST(OP(C, U, v, p, name));                                                    \
    }                                                                                     \
  }
/* the same, to a bool output */
#define UN_BOOL_LOOP(fn, OP, name, TS, C, U, LD, ST)                                    \
  DVM_EW_CLONES static void fn(int64_t n, const void *px, void *po, const params *p) {   \
    const TS *x = px;                                                                     \
    uint8_t *o = po;                                                                      \
    (void)p;                                                                              \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                 \
      C v = LD(x[i]);                                                                     \
      o[i] = (uint8_t)(OP(C, U, v, p, name));                                             \
    }                                                                                     \
  }
#define UN(op, OP, dt) UN_(op##_##dt, OP, op, T_##dt)
#define UN_(name, OP, ...) UN_LOOP(name, OP, __VA_ARGS__)
#define FLOATS(op, OP) UN(op, OP, f32) UN(op, OP, f64) UN(op, OP, f16) UN(op, OP, bf16)
#define UNB(op, OP, dt) UNB_(op##_##dt, OP, op, T_##dt)
#define UNB_(name, OP, ...) UN_BOOL_LOOP(name, OP, __VA_ARGS__)
#define FLOATS_BOOL(op, OP) UNB(op, OP, f32) UNB(op, OP, f64) UNB(op, OP, f16) UNB(op, OP, bf16)
#define INTS(op, OP) UN(op, OP, i8) UN(op, OP, i16) UN(op, OP, i32) UN(op, OP, i64) UN(op, OP, u8) \
    UN(op, OP, u16) UN(op, OP, u32) UN(op, OP, u64)
#define NUMS(op, OP) FLOATS(op, OP) INTS(op, OP)

/* unary_math.h's rows: f32 (f16 and bf16 computed in it) and f64; the f32
 * loop a block at a time (DVM_EW_MID_LOOP) */
#define X(name, code, text, own, f32, f64, ...)            \
  DVM_EW_MATH float math_f32_##name(float x) { return f32; } \
  static inline double math_f64_##name(double x) { return f64; }
DVM_UNARY_MATH(X)
#undef X
#define MATH(C, U, v, p, name) _Generic((v), float: math_f32_##name, double: math_f64_##name)(v)
#define X(name, code, text, own, expr, expr64, cuda, mid, mid_expr)                         \
  DVM_EW_CLONES static void name##_f32(int64_t n, const void *px, void *po, const params *p) { \
    (void)p;                                                                             \
    DVM_EW_MID_LOOP(n, (const float *)px, (float *)po, mid, mid_expr, expr);              \
  }                                                                                      \
  UN(name, MATH, f64) UN(name, MATH, f16) UN(name, MATH, bf16)
DVM_UNARY_MATH(X)
#undef X
NUMS(relu, RELU) NUMS(neg, NEG) NUMS(abs, ABS) NUMS(clip, CLIP)
UN(not, NOT, bool)
FLOATS(sin, SIN) FLOATS(cos, COS) FLOATS(tan, TAN) FLOATS(asin, ASIN) FLOATS(acos, ACOS)
FLOATS(atan, ATAN) FLOATS(sinh, SINH) FLOATS(cosh, COSH) FLOATS(asinh, ASINH)
FLOATS(acosh, ACOSH) FLOATS(atanh, ATANH) FLOATS(ceil, CEIL) FLOATS(floor, FLOOR)
FLOATS(round, ROUND) NUMS(sign, SIGN) FLOATS(softplus, SOFTPLUS) FLOATS(softsign, SOFTSIGN)
FLOATS(mish, MISH) FLOATS(elu, ELU) FLOATS(selu, SELU) FLOATS(leaky_relu, LEAKY_RELU)
FLOATS(thresholded_relu, THRESHOLDED_RELU) FLOATS(celu, CELU) FLOATS(shrink, SHRINK)
FLOATS(swish, SWISH) INTS(bitwise_not, BITWISE_NOT)
FLOATS_BOOL(isnan, ISNAN) FLOATS_BOOL(isinf, ISINF)

typedef enum op_id {
#define X(name, ...) OP_##name,
  DVM_UNARY_MATH(X)
#undef X
  OP_RELU, OP_NEG, OP_ABS, OP_NOT, OP_CLIP,
  OP_SIN, OP_COS, OP_TAN, OP_ASIN, OP_ACOS, OP_ATAN, OP_SINH, OP_COSH, OP_ASINH, OP_ACOSH,
  OP_ATANH, OP_CEIL, OP_FLOOR, OP_ROUND, OP_SIGN, OP_SOFTPLUS, OP_SOFTSIGN, OP_MISH, OP_ELU,
  OP_SELU, OP_LEAKY_RELU, OP_THRESHOLDED_RELU, OP_CELU, OP_SHRINK, OP_SWISH, OP_ISNAN, OP_ISINF,
  OP_BITWISE_NOT,
  OP_COUNT
} op_id;

typedef struct op_def {
  const char *name;
  un_fn fn[DVM_DTYPE_COUNT]; /* the dtypes: the non-empty entries */
  int nparams;               /* number attributes, into params' lo and hi */
  int to_bool;               /* the output is bool, not the input's dtype */
} op_def;

#define F_FLOATS(op) [DVM_F32] = op##_f32, [DVM_F64] = op##_f64, [DVM_F16] = op##_f16, \
    [DVM_BF16] = op##_bf16
#define F_INTS(op) [DVM_I8] = op##_i8, [DVM_I16] = op##_i16, [DVM_I32] = op##_i32, \
    [DVM_I64] = op##_i64, [DVM_U8] = op##_u8, [DVM_U16] = op##_u16, [DVM_U32] = op##_u32, \
    [DVM_U64] = op##_u64
#define F_NUMS(op) F_FLOATS(op), F_INTS(op)

static const op_def ops[OP_COUNT] = {
#define X(name, code, text, ...) [OP_##name] = {text, {F_FLOATS(name)}},
    DVM_UNARY_MATH(X)
#undef X
    [OP_RELU] = {"relu", {F_NUMS(relu)}},
    [OP_NEG] = {"neg", {F_NUMS(neg)}},
    [OP_ABS] = {"abs", {F_NUMS(abs)}},
    [OP_NOT] = {"not", {[DVM_BOOL] = not_bool}},
    [OP_CLIP] = {"clip", {F_NUMS(clip)}},
    [OP_SIN] = {"sin", {F_FLOATS(sin)}},
    [OP_COS] = {"cos", {F_FLOATS(cos)}},
    [OP_TAN] = {"tan", {F_FLOATS(tan)}},
    [OP_ASIN] = {"asin", {F_FLOATS(asin)}},
    [OP_ACOS] = {"acos", {F_FLOATS(acos)}},
    [OP_ATAN] = {"atan", {F_FLOATS(atan)}},
    [OP_SINH] = {"sinh", {F_FLOATS(sinh)}},
    [OP_COSH] = {"cosh", {F_FLOATS(cosh)}},
    [OP_ASINH] = {"asinh", {F_FLOATS(asinh)}},
    [OP_ACOSH] = {"acosh", {F_FLOATS(acosh)}},
    [OP_ATANH] = {"atanh", {F_FLOATS(atanh)}},
    [OP_CEIL] = {"ceil", {F_FLOATS(ceil)}},
    [OP_FLOOR] = {"floor", {F_FLOATS(floor)}},
    [OP_ROUND] = {"round", {F_FLOATS(round)}},
    [OP_SIGN] = {"sign", {F_NUMS(sign)}},
    [OP_SOFTPLUS] = {"softplus", {F_FLOATS(softplus)}},
    [OP_SOFTSIGN] = {"softsign", {F_FLOATS(softsign)}},
    [OP_MISH] = {"mish", {F_FLOATS(mish)}},
    [OP_ELU] = {"elu", {F_FLOATS(elu)}, 1},
    [OP_SELU] = {"selu", {F_FLOATS(selu)}, 2},
    [OP_LEAKY_RELU] = {"leaky_relu", {F_FLOATS(leaky_relu)}, 1},
    [OP_THRESHOLDED_RELU] = {"thresholded_relu", {F_FLOATS(thresholded_relu)}, 1},
    [OP_CELU] = {"celu", {F_FLOATS(celu)}, 1},
    [OP_SHRINK] = {"shrink", {F_FLOATS(shrink)}, 2},
    [OP_SWISH] = {"swish", {F_FLOATS(swish)}, 1},
    [OP_ISNAN] = {"isnan", {F_FLOATS(isnan)}, 0, 1},
    [OP_ISINF] = {"isinf", {F_FLOATS(isinf)}, 2, 1},
    [OP_BITWISE_NOT] = {"bitwise_not", {F_INTS(bitwise_not)}},
};

/* One input, one output of the input's shape and (unless any_out) dtype,
 * and nattrs attributes. */
static dvm_status *check(const dvm_kernel_args *a, const char *op, int nattrs, int any_out) {
  dvm_status *st = dvm_kargs_check(a, op, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nattrs != nattrs)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %d attribute%s, got %d", op, nattrs,
                          nattrs == 1 ? "" : "s", a->nattrs);
  const dvm_tensor *x = a->in[0], *o = a->out[0];
  if (!any_out && o->dtype != x->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: the output must have the input's",
                          op, dvm_kargs_dtypes(got, sizeof got, a));
  }
  if (o->rank != x->rank || memcmp(o->dims, x->dims, sizeof(int64_t) * x->rank) != 0) {
    char so[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s != %s, the input's shape", op,
                          dvm_shape_str(so, o->rank, o->dims), dvm_shape_str(sx, x->rank, x->dims));
  }
  return NULL;
}

typedef struct run_ctx {
  un_fn fn;
  const char *x;
  char *o;
  size_t xsz, osz;
  const params *p;
} run_ctx;

static void run_range(void *ctx, int64_t s, int64_t e) {
  const run_ctx *r = ctx;
  r->fn(e - s, r->x + s * (int64_t)r->xsz, r->o + s * (int64_t)r->osz, r->p);
}

static void run(const dvm_kernel_args *a, un_fn fn, const params *p) {
  const dvm_tensor *x = a->in[0], *o = a->out[0];
  run_ctx r = {fn, dvm_tensor_ptr(x), dvm_tensor_ptr(o), dvm_dtype_size((dvm_dtype)x->dtype),
               dvm_dtype_size((dvm_dtype)o->dtype), p};
  dvm_ew_parallel(a, dvm_tensor_numel(o), MIN_CHUNK, run_range, &r);
}

static dvm_status *unary(const dvm_kernel_args *a, op_id id, int nattrs, const params *p) {
  const op_def *op = &ops[id];
  dvm_status *st = check(a, op->name, nattrs, op->to_bool);
  if (st) return st;
  if (op->to_bool && a->out[0]->dtype != DVM_BOOL)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: the output must be bool, got %s", op->name,
                          dvm_dtype_name((dvm_dtype)a->out[0]->dtype));
  un_fn fn = op->fn[a->in[0]->dtype];
  if (!fn) {
    char got[64], want[128] = "";
    for (int dt = 0; dt < DVM_DTYPE_COUNT; dt++)
      if (op->fn[dt]) strcat(strcat(want, want[0] ? ", " : ""), dvm_dtype_name((dvm_dtype)dt));
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want one of %s", op->name,
                          dvm_kargs_dtypes(got, sizeof got, a), want);
  }
  run(a, fn, p);
  return NULL;
}

/* Attribute i of kernel op as a number (float or int). */
static dvm_status *number_attr(const dvm_kernel_args *a, const char *op, int i, const char *what,
                               double *out) {
  const dvm_value *v = &a->attrs[i];
  if (v->kind == DVM_VAL_FLOAT)
    *out = v->u.f;
  else if (v->kind == DVM_VAL_INT)
    *out = (double)v->u.i;
  else
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute %d (%s) must be a float or an int, got %s",
                          op, i, what, dvm_kind_name((dvm_kind)v->kind));
  if (isnan(*out))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: attribute %d (%s) is NaN", op, i, what);
  return NULL;
}

/* ceil(lo) and floor(hi) within [min, max]; for u64 (max == -1, all
 * bits) the bound's bits as uint64. */
static int64_t int_bound(double v, int up, int64_t min, int64_t max) {
  v = up ? ceil(v) : floor(v);
  if (max == -1) return v <= 0 ? 0 : v >= 0x1p64 ? -1 : (int64_t)(uint64_t)v;
  return v <= (double)min ? min : v >= (double)max ? max : (int64_t)v;
}

static dvm_status *clip(const dvm_kernel_args *a) {
  dvm_status *st = check(a, "clip", 2, 0);
  if (st) return st;
  double lo = 0, hi = 0;
  if ((st = number_attr(a, "clip", 0, "lo", &lo)) || (st = number_attr(a, "clip", 1, "hi", &hi)))
    return st;
  static const int64_t range[DVM_DTYPE_COUNT][2] = {
      [DVM_I8] = {INT8_MIN, INT8_MAX}, [DVM_I16] = {INT16_MIN, INT16_MAX},
      [DVM_I32] = {INT32_MIN, INT32_MAX}, [DVM_I64] = {INT64_MIN, INT64_MAX}, [DVM_U8] = {0, UINT8_MAX},
      [DVM_U16] = {0, UINT16_MAX}, [DVM_U32] = {0, UINT32_MAX}, [DVM_U64] = {0, -1}};
  int64_t min = range[a->in[0]->dtype][0], max = range[a->in[0]->dtype][1];
  params p = {(float)lo, (float)hi, lo, hi, int_bound(lo, 1, min, max), int_bound(hi, 0, min, max)};
  return unary(a, OP_CLIP, 2, &p);
}

static dvm_status *gelu(const dvm_kernel_args *a) {
  int64_t approx = 0;
  if (a->nattrs >= 1) {
    const dvm_value *v = &a->attrs[0];
    if (v->kind != DVM_VAL_INT || v->u.i < 0 || v->u.i > 1)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "gelu: attribute 0 (approximate) must be the int 0 (none) or 1 (tanh)");
    approx = v->u.i;
  }
  params p = {0};
  return unary(a, approx ? OP_GELU_TANH : OP_GELU, a->nattrs >= 1 ? 1 : 0, &p);
}

/* The ops of the table with nparams number attributes (none for most). */
static dvm_status *with_params(const dvm_kernel_args *a, op_id id) {
  const op_def *op = &ops[id];
  double v[2] = {0, 0};
  dvm_status *st;
  for (int i = 0; i < op->nparams && a->nattrs == op->nparams; i++) /* else unary() says */
    if ((st = number_attr(a, op->name, i, i ? "second parameter" : "first parameter", &v[i]))) return st;
  params p = {(float)v[0], (float)v[1], v[0], v[1], 0, 0};
  return unary(a, id, op->nparams, &p);
}

static dvm_status *identity(const dvm_kernel_args *a) {
  dvm_status *st = check(a, "identity", 0, 0);
  if (st) return st;
  void *x = dvm_tensor_ptr(a->in[0]), *o = dvm_tensor_ptr(a->out[0]);
  if (x != o) memmove(o, x, dvm_tensor_nbytes(a->in[0]));
  return NULL;
}

/* ---- cast ----
 * Through a wide value in blocks: floats load as double, integers and bool
 * as int64; each target stores from either. A few float pairs go direct. */

#define BLOCK 1024

/* d rounded to float toward zero with the last bit set when inexact
 * ("round to odd"): rounding that to f16 or bf16 is then the same as
 * rounding d directly. */
static inline float round_odd_f32(double d) {
  float f = (float)d;
  if ((double)f != d && f == f) {
    uint32_t b = dvm_ew_f32_bits(f);
    if (fabs((double)f) > fabs(d)) b--;
    f = dvm_ew_bits_f32(b | 1u);
  }
  return f;
}

/* float -> integer as documented above */
static inline int64_t d_to_i64(double d) {
  return d >= -0x1p63 && d < 0x1p63 ? (int64_t)d : INT64_MIN;
}
static inline int64_t d_to_i32(double d) {
  return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
}
static inline uint64_t d_to_u64(double d) {
  return d >= 0x1p63 && d < 0x1p64 ? (uint64_t)d : (uint64_t)d_to_i64(d);
}

typedef void (*load_fn)(int64_t n, const void *src, void *wide);
typedef void (*store_fn)(int64_t n, const void *wide, void *dst);

#define LOAD(name, TS, TW, EXPR)                                                  \
  DVM_EW_CLONES static void name(int64_t n, const void *src, void *wide) {       \
    const TS *s = src;                                                            \
    TW *w = wide;                                                                 \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) w[i] = (TW)(EXPR);        \
  }
LOAD(load_f32, float, double, s[i])
LOAD(load_f16, uint16_t, double, dvm_f16_to_f32(s[i]))
LOAD(load_bf16, uint16_t, double, dvm_bf16_to_f32(s[i]))
LOAD(load_f64, double, double, s[i])
LOAD(load_i8, int8_t, int64_t, s[i])
LOAD(load_i16, int16_t, int64_t, s[i])
LOAD(load_i32, int32_t, int64_t, s[i])
LOAD(load_i64, int64_t, int64_t, s[i])
LOAD(load_u8, uint8_t, int64_t, s[i])
LOAD(load_u16, uint16_t, int64_t, s[i])
LOAD(load_u32, uint32_t, int64_t, s[i])
LOAD(load_u64, uint64_t, int64_t, s[i]) /* the bits; float targets read them as uint64 */
LOAD(load_bool, uint8_t, int64_t, s[i] != 0)

#define STORE(name, TW, TD, EXPR)                                                 \
  DVM_EW_CLONES static void name(int64_t n, const void *wide, void *dst) {       \
    const TW *w = wide;                                                           \
    TD *d = dst;                                                                  \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                         \
      TW v = w[i];                                                                \
      d[i] = (TD)(EXPR);                                                          \
    }                                                                             \
  }
STORE(dstore_f32, double, float, v)
STORE(dstore_f16, double, uint16_t, dvm_f32_to_f16(round_odd_f32(v)))
STORE(dstore_bf16, double, uint16_t, dvm_f32_to_bf16(round_odd_f32(v)))
STORE(dstore_f64, double, double, v)
STORE(dstore_i8, double, int8_t, (uint8_t)d_to_i32(v))
STORE(dstore_i16, double, int16_t, (uint16_t)d_to_i32(v))
STORE(dstore_i32, double, int32_t, d_to_i32(v))
STORE(dstore_i64, double, int64_t, d_to_i64(v))
STORE(dstore_u8, double, uint8_t, (uint8_t)d_to_i32(v))
STORE(dstore_bool, double, uint8_t, v != 0)
STORE(dstore_u16, double, uint16_t, (uint16_t)d_to_i32(v))
STORE(dstore_u32, double, uint32_t, (uint32_t)d_to_i64(v))
STORE(dstore_u64, double, uint64_t, d_to_u64(v))
STORE(istore_f32, int64_t, float, v)
STORE(istore_f16, int64_t, uint16_t, dvm_f32_to_f16(round_odd_f32((double)v)))
STORE(istore_bf16, int64_t, uint16_t, dvm_f32_to_bf16(round_odd_f32((double)v)))
STORE(istore_f64, int64_t, double, v)
STORE(istore_i8, int64_t, int8_t, (uint8_t)v)
STORE(istore_i16, int64_t, int16_t, (uint16_t)v)
STORE(istore_i32, int64_t, int32_t, (uint32_t)v)
STORE(istore_i64, int64_t, int64_t, v)
STORE(istore_u8, int64_t, uint8_t, (uint8_t)v)
STORE(istore_bool, int64_t, uint8_t, v != 0)
STORE(istore_u16, int64_t, uint16_t, (uint16_t)v)
STORE(istore_u32, int64_t, uint32_t, (uint32_t)v)
STORE(istore_u64, int64_t, uint64_t, (uint64_t)v)
/* from u64 (its bits in the int64 block) to the floats */
STORE(ustore_f32, int64_t, float, (uint64_t)v)
STORE(ustore_f16, int64_t, uint16_t, dvm_f32_to_f16(round_odd_f32((double)(uint64_t)v)))
STORE(ustore_bf16, int64_t, uint16_t, dvm_f32_to_bf16(round_odd_f32((double)(uint64_t)v)))
STORE(ustore_f64, int64_t, double, (uint64_t)v)

#define BY_DTYPE(p) {[DVM_F32] = p##f32, [DVM_F16] = p##f16, [DVM_BF16] = p##bf16, \
    [DVM_F64] = p##f64, [DVM_I8] = p##i8, [DVM_I16] = p##i16, [DVM_I32] = p##i32, \
    [DVM_I64] = p##i64, [DVM_U8] = p##u8, [DVM_BOOL] = p##bool, [DVM_U16] = p##u16, \
    [DVM_U32] = p##u32, [DVM_U64] = p##u64}
static const load_fn loads[DVM_DTYPE_COUNT] = BY_DTYPE(load_);
static const store_fn dstores[DVM_DTYPE_COUNT] = BY_DTYPE(dstore_);
static const store_fn istores[DVM_DTYPE_COUNT] = BY_DTYPE(istore_);
static const store_fn ustores[DVM_DTYPE_COUNT] = {[DVM_F32] = ustore_f32, [DVM_F16] = ustore_f16,
                                                  [DVM_BF16] = ustore_bf16, [DVM_F64] = ustore_f64};

static int is_float(int dt) { return dt == DVM_F32 || dt == DVM_F16 || dt == DVM_BF16 || dt == DVM_F64; }

/* The common pairs of mixed-precision models go in one pass. */
#define DIRECT(name, TS, TD, CONV)                                                     \
  DVM_EW_CLONES static void name(int64_t n, const void *px, void *po, const params *p) { \
    const TS *x = px;                                                                  \
    TD *o = po;                                                                        \
    (void)p;                                                                           \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) o[i] = CONV(x[i]);             \
  }
DIRECT(f32_to_bf16, float, uint16_t, dvm_f32_to_bf16)
DIRECT(bf16_to_f32, uint16_t, float, dvm_bf16_to_f32)
static void f32_to_f16(int64_t n, const void *x, void *o, const params *p) {
  dvm_ew_f32_to_f16_n(n, x, o);
}
static void f16_to_f32(int64_t n, const void *x, void *o, const params *p) {
  dvm_ew_f16_to_f32_n(n, x, o);
}

static const un_fn direct[DVM_DTYPE_COUNT][DVM_DTYPE_COUNT] = {
    [DVM_F32][DVM_F16] = f32_to_f16, [DVM_F32][DVM_BF16] = f32_to_bf16,
    [DVM_F16][DVM_F32] = f16_to_f32, [DVM_BF16][DVM_F32] = bf16_to_f32};

typedef struct cast_ctx {
  int from, to;
  const char *x;
  char *o;
} cast_ctx;

static void cast_range(void *ctx, int64_t s, int64_t e) {
  const cast_ctx *c = ctx;
  _Alignas(64) char wide[BLOCK * 8];
  size_t xsz = dvm_dtype_size((dvm_dtype)c->from), osz = dvm_dtype_size((dvm_dtype)c->to);
  store_fn st = is_float(c->from) ? dstores[c->to]
                : c->from == DVM_U64 && is_float(c->to) ? ustores[c->to] : istores[c->to];
  for (int64_t i = s; i < e; i += BLOCK) {
    int64_t n = e - i < BLOCK ? e - i : BLOCK;
    loads[c->from](n, c->x + i * (int64_t)xsz, wide);
    st(n, wide, c->o + i * (int64_t)osz);
  }
}

static dvm_status *cast(const dvm_kernel_args *a) {
  dvm_status *st = check(a, "cast", 0, 1);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *o = a->out[0];
  if (x->dtype == o->dtype) return identity(a);
  if (x->dtype == DVM_STRING || o->dtype == DVM_STRING) return dvm_cpu_cast_string(a);
  if (direct[x->dtype][o->dtype]) {
    run(a, direct[x->dtype][o->dtype], NULL);
    return NULL;
  }
  cast_ctx c = {x->dtype, o->dtype, dvm_tensor_ptr(x), dvm_tensor_ptr(o)};
  dvm_ew_parallel(a, dvm_tensor_numel(o), MIN_CHUNK, cast_range, &c);
  return NULL;
}

/* ---- bitcast: the bytes, as the output's dtype of the same size ---- */

static dvm_status *bitcast(const dvm_kernel_args *a) {
  dvm_status *st = check(a, "bitcast", 0, 1);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *o = a->out[0];
  if (dvm_dtype_size((dvm_dtype)x->dtype) != dvm_dtype_size((dvm_dtype)o->dtype)) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "bitcast: dtypes %s: want two of one size",
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  void *xp = dvm_tensor_ptr(x), *op = dvm_tensor_ptr(o);
  if (xp != op) memmove(op, xp, dvm_tensor_nbytes(x));
  return NULL;
}

#define KERNEL(name, id) \
  static dvm_status *name(const dvm_kernel_args *a) { return with_params(a, id); }
/* unary_math.h's rows with kernels of their own */
#define OWN_1(name) KERNEL(kernel_##name, OP_##name)
#define OWN_0(name)
#define X(name, code, text, own, ...) OWN_##own(name)
DVM_UNARY_MATH(X)
#undef X
#undef OWN_1
#undef OWN_0
KERNEL(relu, OP_RELU)
KERNEL(neg, OP_NEG)
KERNEL(abs_, OP_ABS)
KERNEL(not_, OP_NOT)
KERNEL(sin_, OP_SIN)
KERNEL(cos_, OP_COS)
KERNEL(tan_, OP_TAN)
KERNEL(asin_, OP_ASIN)
KERNEL(acos_, OP_ACOS)
KERNEL(atan_, OP_ATAN)
KERNEL(sinh_, OP_SINH)
KERNEL(cosh_, OP_COSH)
KERNEL(asinh_, OP_ASINH)
KERNEL(acosh_, OP_ACOSH)
KERNEL(atanh_, OP_ATANH)
KERNEL(ceil_, OP_CEIL)
KERNEL(floor_, OP_FLOOR)
KERNEL(round_, OP_ROUND)
KERNEL(sign, OP_SIGN)
KERNEL(softplus, OP_SOFTPLUS)
KERNEL(softsign, OP_SOFTSIGN)
KERNEL(mish, OP_MISH)
KERNEL(elu, OP_ELU)
KERNEL(selu, OP_SELU)
KERNEL(leaky_relu, OP_LEAKY_RELU)
KERNEL(thresholded_relu, OP_THRESHOLDED_RELU)
KERNEL(celu, OP_CELU)
KERNEL(shrink, OP_SHRINK)
KERNEL(swish, OP_SWISH)
KERNEL(isnan_, OP_ISNAN)
KERNEL(isinf_, OP_ISINF)
KERNEL(bitwise_not, OP_BITWISE_NOT)

#define INTS_BITS DVM_DTYPES_INTEGER
#define NUMS_BITS (DVM_DTYPES_FLOAT | INTS_BITS)

const dvm_kernel_def dvm_cpu_unary_kernels[] = {
#define OWN_1(name, text) {text, DVM_DEVICE_CPU, kernel_##name, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
#define OWN_0(name, text)
#define X(name, code, text, own, ...) OWN_##own(name, text)
    DVM_UNARY_MATH(X)
#undef X
#undef OWN_1
#undef OWN_0
    {"gelu", DVM_DEVICE_CPU, gelu, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"relu", DVM_DEVICE_CPU, relu, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"neg", DVM_DEVICE_CPU, neg, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"abs", DVM_DEVICE_CPU, abs_, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"not", DVM_DEVICE_CPU, not_, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"clip", DVM_DEVICE_CPU, clip, "same", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"identity", DVM_DEVICE_CPU, identity, "same"},
    {"cast", DVM_DEVICE_CPU, cast, "same", .form = DVM_FORM_ELEMENTWISE, .strings = 1},
    {"bitcast", DVM_DEVICE_CPU, bitcast, "same", .inplace = 1},
    {"sin", DVM_DEVICE_CPU, sin_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"cos", DVM_DEVICE_CPU, cos_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"tan", DVM_DEVICE_CPU, tan_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"asin", DVM_DEVICE_CPU, asin_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"acos", DVM_DEVICE_CPU, acos_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"atan", DVM_DEVICE_CPU, atan_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"sinh", DVM_DEVICE_CPU, sinh_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"cosh", DVM_DEVICE_CPU, cosh_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"asinh", DVM_DEVICE_CPU, asinh_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"acosh", DVM_DEVICE_CPU, acosh_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"atanh", DVM_DEVICE_CPU, atanh_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"ceil", DVM_DEVICE_CPU, ceil_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"floor", DVM_DEVICE_CPU, floor_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"round", DVM_DEVICE_CPU, round_, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"softplus", DVM_DEVICE_CPU, softplus, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"softsign", DVM_DEVICE_CPU, softsign, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"mish", DVM_DEVICE_CPU, mish, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"elu", DVM_DEVICE_CPU, elu, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"selu", DVM_DEVICE_CPU, selu, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"leaky_relu", DVM_DEVICE_CPU, leaky_relu, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"thresholded_relu", DVM_DEVICE_CPU, thresholded_relu, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"celu", DVM_DEVICE_CPU, celu, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"shrink", DVM_DEVICE_CPU, shrink, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"swish", DVM_DEVICE_CPU, swish, "same", .dtypes = DVM_DTYPES_FLOAT, .inplace = 1},
    {"bitwise_not", DVM_DEVICE_CPU, bitwise_not, "same", .dtypes = INTS_BITS, .inplace = 1},
    {"sign", DVM_DEVICE_CPU, sign, "same", .dtypes = NUMS_BITS, .inplace = 1},
    {"isnan", DVM_DEVICE_CPU, isnan_, "same", .dtypes = DVM_DTYPES_FLOAT},
    {"isinf", DVM_DEVICE_CPU, isinf_, "same", .dtypes = DVM_DTYPES_FLOAT},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
