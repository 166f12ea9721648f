/* Depthwise 2-D convolutions of f32 (group = C = M: W [C, 1, kh, kw]) on
 * channels-first X and Y as direct loops, for conv.c (conv_dw.h). Any
 * kernel size, stride, dilation and pads (conv.c calls them at strides 1
 * and 2 along W into rows of at least 64 columns, where they measured
 * faster than oneDNN; narrower rows are mostly the edges below).
 *
 * Per plane (image, channel) and output row: at strides 1 and 2, the
 * columns whose every tap lies inside the input row are made 16 at a time
 * (four such blocks at once where the row has room), each summed over the
 * taps in registers, a tap's 16 inputs one load at stride 1 and two
 * loads and a shuffle of the even ones at stride 2; the few columns at
 * the edges (and every column at larger strides) one by one, over the taps
 * inside X: zero pads add nothing.
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
 * ky (NULL: in the pads). */
static inline void block(float *restrict y, int64_t o, int n, const float *const *rows, const float *restrict wt,
                         float bias, int64_t kh, int64_t kw, int64_t s, int64_t dw, int64_t pl) {
  v16 a[4];
  for (int j = 0; j < n; j++) a[j] = (v16){0} + bias;
  for (int64_t ky = 0; ky < kh; ky++)
    if (rows[ky])
      for (int64_t kx = 0; kx < kw; kx++) {
        const float *r = rows[ky] + o * s + kx * dw - pl, wv = wt[ky * kw + kx];
        for (int j = 0; j < n; j++) a[j] += wv * LD(r + 16 * s * j, s);
      }
  for (int j = 0; j < n; j++) *(v16 *)(y + o + 16 * j) = a[j];
}

/* Plane p (n C + c) of channels-first X and Y. Per output row: at strides
 * 1 and 2, the columns whose every tap lies inside the input row ([a,
 * last + 16)) 16 at a time in registers (block; a last block may overlap
 * the one before); the others one by one. (The build has
 * -fno-strict-aliasing: d's fields are read into locals, and the pointers
 * are restrict, so that stores into Y do not make the loops reload them.) */
DVM_EW_CLONES static void plane(const dvm_conv_dw *d, int64_t p) {
  const int64_t c = p % d->c, s = d->sw, w = d->w, h = d->h, ow = d->ow, kh = d->kh, kw = d->kw;
  const int64_t sh = d->sh, dh = d->dh, dw = d->dw, pt = d->pt, pl = d->pl;
  const float *restrict x = d->x + p * h * w, *restrict wt = d->wt + c * kh * kw;
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
    int64_t o = a, done = a; /* columns [a, done) made by blocks */
    if (last >= a) {
      for (; o + 48 <= last; o += 64) block(y, o, 4, rows, wt, bias, kh, kw, s, dw, pl);
      for (; o <= last; o += 16) block(y, o, 1, rows, wt, bias, kh, kw, s, dw, pl);
      if (o - 16 != last) block(y, last, 1, rows, wt, bias, kh, kw, s, dw, pl);
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
  for (int64_t p = p0; p < p1; p++) plane(ctx, p);
}


void dvm_cpu_conv_dw(const dvm_conv_dw *d, int threads) { dvm_par_for(threads, d->n * d->c, 1, planes, (void *)d); }
