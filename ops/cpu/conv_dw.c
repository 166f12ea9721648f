/* Depthwise 2-D convolutions of f32 (group = C = M: W [C, 1, kh, kw]) on
 * channels-first X and Y as direct loops, for conv.c (conv_dw.h). Any
 * kernel size, stride, dilation and pads (conv.c calls them at strides 1
 * and 2 along W into rows of at least 32 and 16 columns, where they
 * measured faster than oneDNN).
 *
 * Per plane (image, channel): at strides 1 and 2, X's rows are copied
 * between zeros (the pads, and up to where the last columns' taps read),
 * so that every tap of every column lies inside a row; per output row the
 * columns are then made 16 at a time (four such blocks at once where the
 * row has room, a last block overlapping the one before), each summed over
 * the taps in registers (two sums, of the even and the odd kernel columns,
 * so that each add waits on half the taps), a tap's 16 inputs one load at
 * stride 1 and two loads and a shuffle of the even ones at stride 2. Rows
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

/* Output columns [o, o + 16 n) of one row (n 1 or 4: four sums at once, so
 * that each tap's adds need not wait on the last ones): the bias plus
 * every tap, all inside the input row; rows[ky] is the window's input row
 * ky (NULL: in the pads). Always inlined, so that n and s are constants
 * in each copy and the sums stay in registers. */
static inline __attribute__((always_inline)) void block(float *restrict y, int64_t o, int n, const float *const *rows,
                                                        const float *restrict wt, float bias, int64_t kh, int64_t kw,
                                                        int64_t s, int64_t dw, int64_t pl) {
  v16 a[4], e[4]; /* the sums of the even and the odd kernel columns, so each add waits on half the taps */
#pragma GCC unroll 4
  for (int j = 0; j < n; j++) a[j] = (v16){0} + bias, e[j] = (v16){0};
  for (int64_t ky = 0; ky < kh; ky++) {
    const float *r = rows[ky] ? rows[ky] + o * s - pl : NULL, *wr = wt + ky * kw;
    int64_t kx = 0;
    for (; r && kx + 1 < kw; kx += 2) {
      const float *r0 = r + kx * dw, *r1 = r0 + dw;
#pragma GCC unroll 4
      for (int j = 0; j < n; j++) {
        a[j] += wr[kx] * LD(r0 + 16 * s * j, s);
        e[j] += wr[kx + 1] * LD(r1 + 16 * s * j, s);
      }
    }
    if (r && kx < kw)
#pragma GCC unroll 4
      for (int j = 0; j < n; j++) a[j] += wr[kx] * LD(r + kx * dw + 16 * s * j, s);
  }
#pragma GCC unroll 4
  for (int j = 0; j < n; j++) *(v16 *)(y + o + 16 * j) = a[j] + e[j];
}

/* Columns [a, last + 16) of a row, 16 at a time (four blocks at once where
 * the row has room; the last block may overlap the one before). */
static inline __attribute__((always_inline)) void blocks(float *restrict y, int64_t a, int64_t last,
                                                         const float *const *rows, const float *restrict wt,
                                                         float bias, int64_t kh, int64_t kw, int64_t s, int64_t dw,
                                                         int64_t pl) {
  int64_t o = a;
  for (; o + 48 <= last; o += 64) block(y, o, 4, rows, wt, bias, kh, kw, s, dw, pl);
  for (; o <= last; o += 16) block(y, o, 1, rows, wt, bias, kh, kw, s, dw, pl);
  if (o - 16 != last) block(y, last, 1, rows, wt, bias, kh, kw, s, dw, pl);
}

/* The length of a row of X padded for conv d: the begin pad, X's row and
 * zeros up to where the last block's taps read (block: o s + (kw - 1) dw
 * + 16 s floats for o up to ow - 16). */
static int64_t padded_width(const dvm_conv_dw *d) {
  int64_t need = d->ow * d->sw + (d->kw - 1) * d->dw;
  return d->pl + d->w > need ? d->pl + d->w : need;
}

/* Plane p (n C + c) of channels-first X and Y; padded: NULL, or a buffer
 * of h padded rows (padded_width), zero where X's rows do not reach. Per
 * output row: at strides 1 and 2, the columns whose every tap lies inside
 * the input row ([a, last + 16): every column once padded, where the row
 * has 16) by blocks; the others one by one. (The build has
 * -fno-strict-aliasing: d's fields are read into locals, and the pointers
 * are restrict, so that stores into Y do not make the loops reload them.) */
DVM_EW_CLONES static void plane(const dvm_conv_dw *d, int64_t p, float *restrict padded) {
  const int64_t c = p % d->c, s = d->sw, h = d->h, ow = d->ow, kh = d->kh, kw = d->kw;
  const int64_t sh = d->sh, dh = d->dh, dw = d->dw, pt = d->pt;
  int64_t w = d->w, pl = d->pl;
  const float *restrict x = d->x + p * h * w, *restrict wt = d->wt + c * kh * kw;
  if (padded) { /* X's rows into the zeros of the padded rows: every column's taps inside a row */
    int64_t wp = padded_width(d);
    for (int64_t iy = 0; iy < h; iy++) memcpy(padded + iy * wp + pl, x + iy * w, sizeof(float) * (size_t)w);
    x = padded, w = wp, pl = 0;
  }
  const float bias = d->b ? d->b[c] : 0.0f;
  const float *rows[DVM_CONV_DW_ROWS];
  /* blocks start in [a, last]: o s - pl >= 0, o s + (kw - 1) dw - pl + 16 s <= w, o + 16 <= ow */
  int64_t a = (pl + s - 1) / s, lim = w - 16 * s - (kw - 1) * dw + pl, last = lim < 0 ? -1 : lim / s;
  if (last > ow - 16) last = ow - 16;
  if (s > 2) last = -1;
  for (int64_t oy = 0; oy < d->oh; oy++) {
    float *restrict y = d->y + (p * d->oh + oy) * ow;
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * sh + ky * dh - pt;
      rows[ky] = iy < 0 || iy >= h ? NULL : x + iy * w;
    }
    int64_t done = a; /* columns [a, done) made by blocks */
    if (last >= a) {
      if (s == 1) /* (a constant stride in each: LD's branch goes) */
        blocks(y, a, last, rows, wt, bias, kh, kw, 1, dw, pl);
      else
        blocks(y, a, last, rows, wt, bias, kh, kw, 2, dw, pl);
      done = last + 16;
    }
    for (int64_t q = 0; q < ow; q++) { /* the rest, one by one: the taps inside X */
      if (q == a) q = done;
      if (q >= ow) break;
      float acc = bias;
      for (int64_t ky = 0; ky < kh; ky++) {
        int64_t iy = oy * sh + ky * dh - pt;
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

static void planes(void *ctx, int64_t p0, int64_t p1) {
  const dvm_conv_dw *d = ctx;
  /* zeros where the padded rows pass X's; without the memory, the edges one by one */
  float *padded = d->sw <= 2 ? calloc((size_t)(d->h * padded_width(d)), sizeof(float)) : NULL;
  for (int64_t p = p0; p < p1; p++) plane(d, p, padded);
  free(padded);
}


void dvm_cpu_conv_dw(const dvm_conv_dw *d, int threads) { dvm_par_for(threads, d->n * d->c, 1, planes, (void *)d); }
