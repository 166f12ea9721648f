/* The activations of the recurrent kernels (ops/cpu/rnn.c), by number:
 * the compiler turns ONNX's `activations` strings into these. */
#ifndef DVM_OPS_CPU_RNN_H
#define DVM_OPS_CPU_RNN_H

enum {
  DVM_RNN_RELU,
  DVM_RNN_TANH,
  DVM_RNN_SIGMOID,
  DVM_RNN_AFFINE,          /* alpha x + beta */
  DVM_RNN_LEAKYRELU,       /* alpha */
  DVM_RNN_THRESHOLDEDRELU, /* alpha */
  DVM_RNN_SCALEDTANH,      /* alpha tanh(beta x) */
  DVM_RNN_HARDSIGMOID,     /* clamp(alpha x + beta, 0, 1) */
  DVM_RNN_ELU,             /* alpha */
  DVM_RNN_SOFTSIGN,
  DVM_RNN_SOFTPLUS,
  DVM_RNN_ACT_COUNT
};

/* ONNX's names of the activations above, in that order. */
extern const char *const dvm_rnn_act_names[DVM_RNN_ACT_COUNT];

#endif
