/* Shapes of the recurrent ops (ONNX RNN, GRU, LSTM), shared by their
 * kernels (ops/cpu/rnn.c) and the shape function:
 *
 *   "rnn" (x, w, r; layout:int) -> Y, Y_h[, Y_c]
 *     x [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1),
 *     w [dirs, gates * hidden, input], r [dirs, gates * hidden, hidden];
 *     Y [seq, dirs, batch, hidden] or [batch, seq, dirs, hidden], the
 *     states [dirs, batch, hidden] or [batch, dirs, hidden].
 *   "qlstm" (x, w, r; layout:int) -> Y, Y_h, Y_c
 *     com.microsoft DynamicQuantizeLSTM's: the same with w [dirs, input, 4
 *     hidden] and r [dirs, hidden, 4 hidden]. */
#ifndef DVM_SHAPEFUNCS_RNN_H
#define DVM_SHAPEFUNCS_RNN_H

#include "dvm/value.h"

typedef struct dvm_rnn_dims {
  int64_t seq, batch, input, dirs, hidden;
} dvm_rnn_dims;

/* The dims of op `op` from x, w and r, checked against each other and, when
 * gates > 0, against that many gates (RNN 1, GRU 3, LSTM 4; 0: any). */
DVM_MUST_USE dvm_status *dvm_rnn_dims_of(const char *op, int gates, int64_t layout, int xr,
                                         const int64_t *x, int wr, const int64_t *w, int rr,
                                         const int64_t *r, dvm_rnn_dims *out);

/* Y's shape (4 dims) and a state's (3 dims) in that layout. */
void dvm_rnn_y_shape(const dvm_rnn_dims *d, int64_t layout, int64_t y[4]);
void dvm_rnn_state_shape(const dvm_rnn_dims *d, int64_t layout, int64_t s[3]);

#endif
