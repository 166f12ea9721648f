/* The float unary math ops, one row each. The unary kernels (unary.c: f32,
 * f64, and f16/bf16 computed in f32), the fused program's opcodes and
 * loops (fused.h, fused.c: f32) and the CUDA code generator
 * (compiler/cuda_codegen.c) are all made from these rows; an ONNX op that
 * is one of them is a row of compiler/ops.def naming it as KERNEL and
 * FUSED.
 *
 *   NAME  the fused opcode (DVM_FUSED_NAME)
 *   CODE  its encoding (docs/fused.md); a code is never reused
 *   TEXT  the opcode's and the CPU kernel's name
 *   OWN   1: a kernel TEXT of its own, taking no attributes; 0: computed by
 *         a kernel written by hand (gelu, with its approximate attribute)
 *   F32   the f32 value for x (dvm's vectorizable math, elementwise_math.h)
 *   F64   the f64 value for x (libm, or unary.c's static helpers)
 *   CUDA  the CUDA f32 expression, x being %1$s
 *   MID   0, or a condition on an f32 x under which MID_F32 gives F32's
 *         value more cheaply: the f32 loops (DVM_EW_MID_LOOP) take it for
 *         each block of inputs that all meet MID
 *   MID_F32  that value (0 where MID is 0) */
#ifndef DVM_OPS_CPU_UNARY_MATH_H
#define DVM_OPS_CPU_UNARY_MATH_H

#define DVM_UNARY_MATH(X)                                                                              \
  X(SQRT, 26, "sqrt", 1, sqrtf(x), sqrt(x), "sqrtf(%1$s)", 0, 0)                                       \
  X(EXP, 27, "exp", 1, dvm_ew_expf(x), exp(x), "expf(%1$s)", DVM_EW_EXP_MID(x), dvm_ew_expf_mid(x))    \
  X(LOG, 28, "log", 1, dvm_ew_logf(x), log(x), "logf(%1$s)", 0, 0)                                     \
  X(TANH, 29, "tanh", 1, dvm_ew_tanhf(x), tanh(x), "tanhf(%1$s)", 0, 0)                                \
  X(ERF, 30, "erf", 1, dvm_ew_erff(x), erf(x), "erff(%1$s)", 0, 0)                                     \
  X(SIGMOID, 31, "sigmoid", 1, dvm_ew_sigmoidf(x), sigmoid_d(x), "1.0f / (1.0f + expf(-%1$s))",        \
    DVM_EW_SIGMOID_MID(x), dvm_ew_sigmoidf_mid(x))                                                     \
  /* CUDA gelu: erfc keeps the negative tail's digits; -inf gives -0 */                                \
  X(GELU, 32, "gelu", 0, dvm_ew_geluf(x), gelu_d(x),                                                   \
    "%1$s == dvm_bits(0xff800000u) ? -0.0f : 0.5f * %1$s * erfcf(-0.70710678118654752f * %1$s)", 0, 0) \
  X(GELU_TANH, 33, "gelu_tanh", 0, dvm_ew_gelu_tanhf(x), gelu_tanh_d(x),                               \
    "%1$s == dvm_bits(0xff800000u) ? -0.0f : %1$s / (1.0f + expf(-2.0f * (0.79788456080286536f * "     \
    "(%1$s + 0.044715f * %1$s * %1$s * %1$s))))", 0, 0)                                                \
  X(RECIPROCAL, 34, "reciprocal", 1, 1.0f / x, 1.0 / x, "1.0f / %1$s", 0, 0)

#endif
