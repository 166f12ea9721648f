/* Depthwise 2-D convolutions of f32 (group = C = M: W [C, 1, kh, kw]) on
 * channels-first X and Y as direct loops, for conv.c (conv_dw.h). Any
 * kernel size, stride, dilation and pads (conv.c calls them at strides 1
 * and 2 along W into rows of at least 32 and 16 columns, where they
 * measured faster than oneDNN).
 *
 * Per plane (image, channel): at strides 1 and 2, X's rows are copied
 * between zeros (the pads, and up to where the last columns' taps read),
 * so that every tap of every column lies inside a row; the columns are
 * then made 16 at a time (a last block overlapping the one before), summed
 * over the taps in registers, a tap's 16 inputs one load at
 * stride 1 and two loads and a shuffle of the even ones at stride 2: by
 * tiles of 4 output rows for the square 3x3, 5x5 and 7x7 kernels (FAST_TILES; each
 * input vector loaded once for every row it is a tap of: on PP-OCRv4
 * rec's 5x5 a vector load per 2.5 multiply-adds, where a row at a time
 * loaded one per multiply-add), else a row at a time. Rows
 * of fewer than 16 columns, larger strides, or no memory for the copy:
 * the columns at the edges one by one, over the taps inside X.
 *
 * oneDNN's depthwise kernels want channels in 16-channel blocks
 * (nChw16c), so a channels-first conv copied X in and Y out around its
 * call: 1.5 and 3 times these loops' time on PP-OCRv4 det's 1x48x64x64
 * and 1x96x160x160 (stride 2) convs (docs/performance.md). Channels last
 * (conv_nhwc's regions) oneDNN reads and writes the tensors as they are,
 * and there it measured faster than such loops (twice as fast on
 * MobileNetV2's 16-channel 32x32 one), so conv.c keeps it there.
 *
 * The loops are built for AVX-512, AVX2 and the baseline, the best picked
 * when the library loads (elementwise.h's DVM_EW_CLONES). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a * b + c as one fused multiply-add where the ISA has it (the v3 and v4
 * clones): the sums round once per tap, as oneDNN's do */
#pragma GCC optimize("fp-contract=fast")

#include "ops/cpu/conv_dw.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/par.h"

typedef float v16 __attribute__((vector_size(16 * sizeof(float)), aligned(4))); /* (unaligned loads) */

/* r[0], r[s], ..., r[15 s] for s 1 or 2 (16 s floats read); a macro: a
 * function returning a v16 would change its ABI with the ISA (GCC's -Wpsabi). */
#define LD(r, s)                                                                                             \
  ((s) == 1 ? *(const v16 *)(r)                                                                              \
            : __builtin_shufflevector(*(const v16 *)(r), *(const v16 *)((r) + 16), 0, 2, 4, 6, 8, 10, 12, 14, 16, \
                                      18, 20, 22, 24, 26, 28, 30))

/* The window's input rows for a tile of output rows: in[i] is X's row
 * iy0 + i g (NULL: in the pads) for i < rows_in. */
#define TILE_ROWS_MAX (DVM_CONV_DW_ROWS > 16 ? DVM_CONV_DW_ROWS : 16)

/* Output columns [o, o + 16 nb) of output rows [0, nr) (y: the first, yw
 * floats apart): the bias plus every tap inside the input rows in[] (X's
 * rows g apart: output row r, kernel row ky reads in[(r sh + ky dh) / g]).
 * Each input vector is loaded once and added into every output row whose
 * window holds it, so a tile of nr rows loads (nr - 1) sh + kh rows' taps
 * for nr kh rows' sums; the nr nb sums stay in registers. Always inlined:
 * the callers pass constants for nr, nb and s (and, in the specialized
 * tiles, the kernel, strides and dilations), so the loops unroll. */
static inline __attribute__((always_inline)) void tile(float *restrict y, int64_t yw, int64_t o, int nr, int nb,
                                                       const float *const *in, int64_t g, const float *restrict wt,
                                                       float bias, int64_t kh, int64_t kw, int64_t sh, int64_t s,
                                                       int64_t dh, int64_t dw, int64_t pl) {
  v16 acc[4][4];
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
    for (int b = 0; b < nb; b++) acc[r][b] = (v16){0} + bias;
  const int64_t rows_in = ((nr - 1) * sh + (kh - 1) * dh) / g + 1;
#pragma GCC unroll 16
  for (int64_t i = 0; i < rows_in; i++) {
    if (!in[i]) continue;
    int64_t ky[4]; /* the kernel row that input row i is for output row r; -1: none */
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++) {
      int64_t off = i * g - r * sh;
      ky[r] = off >= 0 && off % dh == 0 && off / dh < kh ? off / dh : -1;
    }
    const float *row = in[i] + o * s - pl;
#pragma GCC unroll 8
    for (int64_t kx = 0; kx < kw; kx++) {
      v16 v[4];
#pragma GCC unroll 4
      for (int b = 0; b < nb; b++) v[b] = LD(row + kx * dw + 16 * s * b, s);
#pragma GCC unroll 4
      for (int r = 0; r < nr; r++)
        if (ky[r] >= 0)
#pragma GCC unroll 4
          for (int b = 0; b < nb; b++) acc[r][b] += wt[ky[r] * kw + kx] * v[b];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
    for (int b = 0; b < nb; b++) *(v16 *)(y + r * yw + o + 16 * b) = acc[r][b];
}
/* Columns [a, last + 16) of output rows [0, nr), nb blocks of 16 at a time
 * (then single blocks; the last may overlap the one before). */
static inline __attribute__((always_inline)) void cols(float *restrict y, int64_t yw, int64_t a, int64_t last, int nr,
                                                       int nb, const float *const *in, int64_t g,
                                                       const float *restrict wt, float bias, int64_t kh, int64_t kw,
                                                       int64_t sh, int64_t s, int64_t dh, int64_t dw, int64_t pl) {
  int64_t o = a;
  for (; o + 16 * (nb - 1) <= last; o += 16 * nb) tile(y, yw, o, nr, nb, in, g, wt, bias, kh, kw, sh, s, dh, dw, pl);
  for (; o <= last; o += 16) tile(y, yw, o, nr, 1, in, g, wt, bias, kh, kw, sh, s, dh, dw, pl);
  if (o - 16 != last) tile(y, yw, last, nr, 1, in, g, wt, bias, kh, kw, sh, s, dh, dw, pl);
}

/* The specialized tiles: square kernels of K at strides SH along H and SW
 * along W, no dilation, FAST_ROWS output rows by FAST_COLS blocks at a
 * time (each input row's taps loaded once for up to FAST_ROWS rows' sums). */
#define FAST_TILES(X) X(3, 1, 1) X(3, 2, 2) X(3, 2, 1) X(5, 1, 1) X(5, 2, 2) X(5, 2, 1) X(7, 1, 1) X(7, 2, 2)
#define FAST_ROWS 4
#define FAST_COLS 2

/* The length of a row of X padded for conv d: the begin pad, X's row and
 * zeros up to where the last block's taps read (tile: o s + (kw - 1) dw
 * + 16 s floats for o up to ow - 16). */
static int64_t padded_width(const dvm_conv_dw *d) {
  int64_t need = d->ow * d->sw + (d->kw - 1) * d->dw;
  return d->pl + d->w > need ? d->pl + d->w : need;
}

/* Plane p (n C + c) of channels-first X and Y; padded: NULL, or a buffer
 * of h padded rows (padded_width), zero where X's rows do not reach. At
 * strides 1 and 2 along W, the columns whose every tap lies inside the
 * input row ([a, last + 16): every column once padded, where the row has
 * 16) by tiles: FAST_ROWS output rows at a time for FAST_TILES' kernels
 * (the rows past the last whole tile one at a time), else one row at a time; the
 * other columns one by one. (The build has -fno-strict-aliasing: d's
 * fields are read into locals, and the pointers are restrict, so that
 * stores into Y do not make the loops reload them.) */
DVM_EW_CLONES static void plane(const dvm_conv_dw *d, int64_t p, float *restrict padded) {
  const int64_t c = p % d->c, s = d->sw, h = d->h, oh = d->oh, ow = d->ow, kh = d->kh, kw = d->kw;
  const int64_t sh = d->sh, dh = d->dh, dw = d->dw, pt = d->pt;
  int64_t w = d->w, pl = d->pl;
  const float *restrict x = d->x + p * h * w, *restrict wt = d->wt + c * kh * kw;
  if (padded) { /* X's rows into the zeros of the padded rows: every column's taps inside a row */
    int64_t wp = padded_width(d);
    for (int64_t iy = 0; iy < h; iy++) memcpy(padded + iy * wp + pl, x + iy * w, sizeof(float) * (size_t)w);
    x = padded, w = wp, pl = 0;
  }
  const float bias = d->b ? d->b[c] : 0.0f;
  /* tiles start in [a, last]: o s - pl >= 0, o s + (kw - 1) dw - pl + 16 s <= w, o + 16 <= ow */
  int64_t a = (pl + s - 1) / s, lim = w - 16 * s - (kw - 1) * dw + pl, last = lim < 0 ? -1 : lim / s;
  if (last > ow - 16) last = ow - 16;
  if (s > 2) last = -1;
  /* a FAST_TILES kernel: its key ((K 4 + SH) 4 + SW) 2, plus 1 for FAST_ROWS-row tiles (single rows where Y has
   * fewer) */
  int64_t fast = last >= a && kh == kw && sh <= 2 && dh == 1 && dw == 1 ? ((kh * 4 + sh) * 4 + s) * 2 + (oh >= FAST_ROWS)
                                                                        : 0;
#define FAST_KEY(K, SH, SW) fast >> 1 == (K * 4 + SH) * 4 + SW ||
  if (!(FAST_TILES(FAST_KEY) 0)) fast = 0;
#undef FAST_KEY
  const int64_t g = fast ? 1 : dh;
  int64_t nr = fast & 1 ? FAST_ROWS : 1, rows_in = ((nr - 1) * sh + (kh - 1) * dh) / g + 1;
  const float *in[TILE_ROWS_MAX];
  for (int64_t oy = 0; oy < oh; oy += nr) {
    if (oy + nr > oh) { /* the rows past the last whole tile one at a time */
      fast &= ~(int64_t)1, nr = 1;
      rows_in = ((kh - 1) * dh) / g + 1;
    }
    float *restrict y = d->y + (p * oh + oy) * ow;
    for (int64_t i = 0; i < rows_in; i++) {
      int64_t iy = oy * sh - pt + i * g;
      in[i] = iy < 0 || iy >= h ? NULL : x + iy * w;
    }
    switch (fast) {
#define FAST_CASE(K, SH, SW)                                                                                 \
  case ((K * 4 + SH) * 4 + SW) * 2 + 1:                                                                     \
    cols(y, ow, a, last, FAST_ROWS, FAST_COLS, in, 1, wt, bias, K, K, SH, SW, 1, 1, pl);                     \
    break;                                                                                                   \
  case ((K * 4 + SH) * 4 + SW) * 2:                                                                         \
    cols(y, ow, a, last, 1, 4, in, 1, wt, bias, K, K, SH, SW, 1, 1, pl);                                     \
    break;
      FAST_TILES(FAST_CASE)
#undef FAST_CASE
    default:
      if (last < a) break;
      if (s == 1) /* (a constant stride in each: LD's branch goes) */
        cols(y, ow, a, last, 1, 4, in, g, wt, bias, kh, kw, sh, 1, dh, dw, pl);
      else
        cols(y, ow, a, last, 1, 4, in, g, wt, bias, kh, kw, sh, 2, dh, dw, pl);
    }
    int64_t done = last >= a ? last + 16 : a; /* columns [a, done) made by tiles */
    for (int64_t r = 0; r < nr; r++, y += ow) {
      for (int64_t q = 0; q < ow; q++) { /* the rest, one by one: the taps inside X */
        if (q == a) q = done;
        if (q >= ow) break;
        float acc = bias;
        for (int64_t ky = 0; ky < kh; ky++) {
          int64_t iy = (oy + r) * sh + ky * dh - pt;
          for (int64_t kx = 0; kx < kw && iy >= 0 && iy < h; kx++) {
            int64_t ix = q * s + kx * dw - pl;
            if (ix >= 0 && ix < w) acc += wt[ky * kw + kx] * x[iy * w + ix];
          }
        }
        y[q] = acc;
      }
      if (d->post) d->post(d->ctx, y, ow);
    }
  }
}

static void planes(void *ctx, int64_t p0, int64_t p1) {
  const dvm_conv_dw *d = ctx;
  /* zeros where the padded rows pass X's; without the memory, the edges one by one */
  float *padded = d->sw <= 2 ? calloc((size_t)(d->h * padded_width(d)), sizeof(float)) : NULL;
  for (int64_t p = p0; p < p1; p++) plane(d, p, padded);
  free(padded);
}

void dvm_cpu_conv_dw(const dvm_conv_dw *d, int threads) { dvm_par_for(threads, d->n * d->c, 1, planes, (void *)d); }
