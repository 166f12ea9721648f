/* Shapes of the signal ops (ops/cpu/signal.c): window functions, the mel
 * weight matrix, DFT and STFT. Inputs that are numbers (sizes, lengths)
 * are one-element i64 or i32 host tensors; attributes follow the inputs
 * as the kernels take them.
 *
 *   window(size; periodic:int) -> [size] (hann_window, hamming_window,
 *       blackman_window)
 *   mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge,
 *       upper_edge) -> [dft_length / 2 + 1, num_mel_bins]
 *   dft(x; dft_length:int, axis:int, inverse:int, onesided:int) -> y
 *   stft(signal[, window]; frame_step:int, frame_length:int, onesided:int)
 *       -> [batch, frames, bins, 2] */
#ifndef DVM_SHAPEFUNCS_SIGNAL_H
#define DVM_SHAPEFUNCS_SIGNAL_H

#include "dvm/value.h"

/* window: the length, and whether periodic. */
DVM_MUST_USE dvm_status *dvm_window_fn_infer(const dvm_value *in, int nin, int64_t *size, int *periodic);

/* mel_weight_matrix: the output's [bins, mel bins]. */
DVM_MUST_USE dvm_status *dvm_mel_infer(const dvm_value *in, int nin, int64_t *dims);

/* dft: x [..., m, ..., 1 or 2] transformed along `axis` (not the last
 * dim) with length n (dft_length, or m, or for an inverse of a one-sided
 * spectrum 2 (m - 1)); y has x's dims but along the axis (forward
 * one-sided n / 2 + 1, else n) and the last (1 for an inverse of a
 * one-sided spectrum, else 2). */
typedef struct dvm_dft_info {
  int rank, axis, inverse, onesided;
  int64_t n;
  int64_t dims[DVM_MAX_RANK];
} dvm_dft_info;
DVM_MUST_USE dvm_status *dvm_dft_infer(const dvm_value *in, int nin, dvm_dft_info *p);

/* stft: signal [batch, len, 1 or 2]; frames of frame_length (or the
 * window's length, or len) every frame_step. */
typedef struct dvm_stft_info {
  int64_t batch, len, step, frame, frames, bins;
  int onesided;
  int64_t dims[4];
} dvm_stft_info;
DVM_MUST_USE dvm_status *dvm_stft_infer(const dvm_value *in, int nin, dvm_stft_info *p);

#endif
