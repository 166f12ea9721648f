/* Depthwise 2-D convolutions of f32 on channels-first tensors as direct
 * loops (conv_dw.c), for conv.c: W [C, 1, kh, kw], group C, C output
 * channels. */
#ifndef DVM_OPS_CPU_CONV_DW_H
#define DVM_OPS_CPU_CONV_DW_H

#include <stdint.h>

/* The most kernel rows the loops take (larger kernels stay on oneDNN). */
#define DVM_CONV_DW_ROWS 64

typedef struct dvm_conv_dw {
  int64_t n, c, h, w, oh, ow; /* X [n, c, h, w], Y [n, c, oh, ow] */
  int64_t kh, kw, sh, sw, dh, dw, pt, pl; /* the window: kernel, strides, dilations, begin pads */
  const float *x, *wt, *b;    /* b: NULL or [c] */
  float *y;
  /* the epilogue, applied to each finished output row of n values; NULL: none */
  void (*post)(const void *ctx, float *y, int64_t n);
  const void *ctx;
} dvm_conv_dw;

/* Y of d on up to `threads` threads of the pool (the caller's included). */
void dvm_cpu_conv_dw(const dvm_conv_dw *d, int threads);

#endif
