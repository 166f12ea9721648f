/* What the elementwise kernels (binary.c, unary.c, fused.c) share: the
 * broadcast plan that walks inputs of any broadcastable shapes in rows, the
 * split of a flat range over threads, and the build of hot loops for more
 * than one instruction set.
 *
 * The plan: output dims with size-1 dims dropped and neighbours merged
 * wherever every input stays contiguous across them, innermost first, with
 * each input's byte stride per dim (0 where it broadcasts). The innermost
 * plan dim then has input strides of 0 or the element size, so a row is a
 * contiguous or a repeated-scalar stream per input, and the outer dims are
 * walked with counters: no div/mod per element. */
#ifndef DVM_OPS_CPU_ELEMENTWISE_H
#define DVM_OPS_CPU_ELEMENTWISE_H

#include <math.h>

#include "kernel.h"

/* Most inputs one plan handles (the fused kernel's limit). */
#define DVM_EW_MAX_IN 16

typedef struct dvm_ew_plan {
  int rank, nin;
  int64_t dims[DVM_MAX_RANK];                   /* innermost first */
  int64_t stride[DVM_MAX_RANK][DVM_EW_MAX_IN];  /* bytes */
} dvm_ew_plan;

/* The plan of nin (<= DVM_EW_MAX_IN) inputs broadcast to out_dims (their
 * broadcast, checked by the caller). A zero-sized or single-element output
 * gives one dim. */
void dvm_ew_plan_make(dvm_ew_plan *p, int nin, dvm_tensor *const *in, int out_rank,
                      const int64_t *out_dims);

/* A position in the output and the matching byte offset in each input. */
typedef struct dvm_ew_cursor {
  int64_t pos, i0;              /* flat output element; index in the row */
  int64_t idx[DVM_MAX_RANK];    /* index in each outer plan dim */
  int64_t off[DVM_EW_MAX_IN];
} dvm_ew_cursor;

void dvm_ew_cursor_seek(const dvm_ew_plan *p, dvm_ew_cursor *c, int64_t pos);

/* Elements from c->pos to the end of its row or to `end`, whichever is
 * first. */
static inline int64_t dvm_ew_cursor_run(const dvm_ew_plan *p, const dvm_ew_cursor *c, int64_t end) {
  int64_t n = p->dims[0] - c->i0;
  return n < end - c->pos ? n : end - c->pos;
}

/* Moves the cursor n (<= dvm_ew_cursor_run) elements on. */
void dvm_ew_cursor_advance(const dvm_ew_plan *p, dvm_ew_cursor *c, int64_t n);

/* n elements of a row: in[k] points at input k's first element of the row
 * (advancing or repeated, as the plan's inner stride says), out at the
 * output's (always advancing). */
typedef void (*dvm_ew_row_fn)(int64_t n, const char *const *in, char *out);

/* Runs fn over the rows of output elements [s, e); out_esz is the output's
 * element size. Short rows (up to 64 elements) of a two-dim plan whose
 * inputs each run on across rows or repeat their row (a bias [4] over
 * [m, 4]) go to fn 256 elements at a time, the repeating inputs from their
 * row laid end to end. */
void dvm_ew_walk(const dvm_ew_plan *p, dvm_ew_row_fn fn, const char *const *in, char *out,
                 size_t out_esz, int64_t s, int64_t e);

/* Calls fn(ctx, s, e) over [0, total) on up to the kernel's threads (the
 * pool of par.h): one call when total is under min_chunk per thread, else
 * ranges that start at multiples of 64 elements (cache lines of the
 * output apart). */
void dvm_ew_parallel(const dvm_kernel_args *a, int64_t total, int64_t min_chunk,
                     void (*fn)(void *ctx, int64_t s, int64_t e), void *ctx);

/* A broadcast call of nin inputs and one output: fails unless the output
 * has the broadcast shape of the inputs (the "broadcast" shape function's
 * result), naming the kernel `op` and the shapes. */
DVM_MUST_USE dvm_status *dvm_ew_check_broadcast(const char *op, dvm_tensor *const *in, int nin,
                                                const dvm_tensor *out);

/* Outputs at least this large are written with streaming (non-temporal)
 * stores: they would not stay in cache anyway, and streaming skips reading
 * each line in before it is overwritten, a third of the traffic of a
 * copy-like kernel. */
#define DVM_EW_STREAM_MIN_BYTES ((int64_t)16 << 20)

/* memcpy with streaming stores where the machine has them; call
 * dvm_ew_stream_fence before another thread may read dst. */
void dvm_ew_stream_copy(void *dst, const void *src, size_t bytes);
void dvm_ew_stream_fence(void);

/* n conversions between f32 and f16, with the F16C instructions where the
 * machine has them (the same results as dvm_f32_to_f16 and dvm_f16_to_f32
 * but for the payload bits of NaNs). */
void dvm_ew_f32_to_f16_n(int64_t n, const float *src, uint16_t *dst);
void dvm_ew_f16_to_f32_n(int64_t n, const uint16_t *src, float *dst);

/* x86 code chosen at run time (AVX, F16C) is built with GCC only: clang 14
 * (the fuzz builds) knows neither f16c in __builtin_cpu_supports nor these
 * target_clones. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DVM_EW_X86 1
#else
#define DVM_EW_X86 0
#endif

/* Hot loops are built for x86-64-v4 (AVX-512 F, BW, DQ, VL) and x86-64-v3
 * (AVX2, FMA, F16C) besides the baseline, and the best the CPU has is
 * picked when the library loads (GNU ifunc). Elementwise results are the
 * same either way: C11 mode does not contract a * b + c into an FMA. Sums
 * over a row (the reductions, softmax, the normalizations) keep one partial
 * per vector lane, so their last bits depend on the vector width. */
#if DVM_EW_X86 && defined(__ELF__) && !defined(DVM_NO_CLONES)
#define DVM_EW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DVM_EW_CLONES
#endif

/* pow by one exponent e for all x, without libm's pow where e is one
 * of these: 2 and 3 are x * x and x * x * x, as ONNX Runtime computes them
 * (the same bits); 4 is (x x)(x x), 1 is x, -1 a division, 0.5 and -0.5
 * go through sqrt (with pow's +0 at -0 and +inf at -inf): within an ulp or
 * two of pow (ONNX Runtime's pow is not correctly rounded either), and a
 * vector loop instead of a call per element. */
enum { DVM_EW_POW_ANY, DVM_EW_POW_1, DVM_EW_POW_2, DVM_EW_POW_3, DVM_EW_POW_4, DVM_EW_POW_M1, DVM_EW_POW_HALF,
       DVM_EW_POW_MHALF };
static inline int dvm_ew_pow_kind(double e) {
  return e == 1 ? DVM_EW_POW_1 : e == 2 ? DVM_EW_POW_2 : e == 3 ? DVM_EW_POW_3 : e == 4 ? DVM_EW_POW_4
       : e == -1 ? DVM_EW_POW_M1 : e == 0.5 ? DVM_EW_POW_HALF : e == -0.5 ? DVM_EW_POW_MHALF : DVM_EW_POW_ANY;
}
#define DVM_EW_POW_SQRT(x) ((x) == -INFINITY ? INFINITY : _Generic((x), float: sqrtf, double: sqrt)(x) + 0)
/* A switch over kind (not DVM_EW_POW_ANY) that runs LOOP(expr, ...), the
 * loop computing expr of x for each element, for its exponent. */
#define DVM_EW_POW_CASES(kind, LOOP, x, ...)                                     \
  switch (kind) {                                                                \
  case DVM_EW_POW_1: LOOP(x, __VA_ARGS__); break;                                \
  case DVM_EW_POW_2: LOOP((x) * (x), __VA_ARGS__); break;                        \
  case DVM_EW_POW_3: LOOP((x) * (x) * (x), __VA_ARGS__); break;                  \
  case DVM_EW_POW_4: LOOP(((x) * (x)) * ((x) * (x)), __VA_ARGS__); break;        \
  case DVM_EW_POW_M1: LOOP(1 / (x), __VA_ARGS__); break;                         \
  case DVM_EW_POW_HALF: LOOP(DVM_EW_POW_SQRT(x), __VA_ARGS__); break;            \
  default: LOOP(1 / DVM_EW_POW_SQRT(x), __VA_ARGS__); break;                     \
  }

#endif
