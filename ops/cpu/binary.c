/* Elementwise kernels of two or three inputs with numpy (ONNX
 * multidirectional) broadcasting; all take shape function "broadcast".
 *
 *   add, sub, mul, div, pow, min, max (in: A, B) -> C
 *       f32 f64 i8 i16 i32 i64 u8, and f16 bf16 computed in f32 and
 *       rounded once; A, B and C of one dtype.
 *       Integers wrap (two's complement). div of integers truncates toward
 *       zero as C and ONNX Runtime do; a zero divisor anywhere in B fails
 *       with "div: integer division by zero", and INT_MIN / -1 wraps to
 *       INT_MIN. pow of integers is exact modulo 2^bits; a negative
 *       exponent gives 1/x^-e truncated: 0, or +-1 for x = +-1 (0 for
 *       x = 0). Float pow by one exponent of 1, 2, 3, 4, -1, 0.5 or -0.5
 *       is computed by multiplies, a division or sqrt (elementwise.h).
 *       min and max return NaN if either side is NaN (np.minimum);
 *       ONNX Min/Max of more than two inputs is a chain of these.
 *   equal, less, greater, less_equal, greater_equal (in: A, B) -> C bool
 *       A and B of one of the dtypes above, or bool or string for equal
 *       (strings equal when their bytes are); NaN compares unequal to
 *       everything.
 *   and, or, xor (in: A, B) -> C, all bool. A bool byte other than 0 is true;
 *       outputs are 0 or 1.
 *   mod (in: A, B; attrs: fmod:int) -> C, the dtypes of add: ONNX Mod, the
 *       remainder of the floored division (the sign of B) for fmod 0, of the
 *       truncated one (C's %, fmod()) for fmod 1; an integer zero divisor
 *       fails as in div.
 *   bitwise_and, bitwise_or, bitwise_xor (in: A, B) -> C; bit_shift (in: A,
 *       B; attrs: direction:int, 0 left, 1 right) -> C: i8 i16 i32 i64 u8.
 *       Right shifts of signed values are arithmetic; a shift by a negative
 *       amount or the width or more gives -1 (negative A shifted right) or 0.
 *   prelu (in: X, slope) -> Y: X < 0 ? X * slope : X; f32 f64 f16 bf16.
 *       ONNX PRelu broadcasts slope to X one way; the compiler's shape
 *       rule gives the two-way broadcast, which is X's shape when valid.
 *   where (in: C bool, X, Y) -> Z: C ? X : Y elementwise, all three
 *       broadcast; X, Y and Z of one dtype, any dtype (strings too).
 *       Where on strings copies the element pointers: the VM owns their
 *       references (vm/kernel.h); it never runs in place on them.
 *
 * Outputs are checked to have the broadcast shape. An output may be the
 * same memory as an input of its own shape and dtype size; not for the
 * comparisons: a broadcast input of another dtype can have the output's
 * byte size and not its shape (i64 [2, 1] < i64 [2] -> bool [2, 2]), and
 * the memory plan matches sizes in bytes.
 *
 * The inner row of the broadcast plan (elementwise.h) has each input
 * advancing or repeated, so every op has one vectorized loop per pattern:
 * vector-vector, scalar-vector and vector-scalar (eight for where). Same-
 * shape inputs become one row; a bias row, rows of the vector-vector loop;
 * a column, rows of a scalar loop. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/par.h"
#if DVM_EW_X86
#include <immintrin.h>
#endif
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/broadcast.h"
#include "shapefuncs/shape.h"

/* Below this many elements per thread, a fork costs more than it saves. */
#define MIN_CHUNK ((int64_t)1 << 15)

/* ---- the broadcast plan (elementwise.h) ---- */

/* The input dim aligned with output dim i (from the right); 1 where the
 * input has fewer dims. */
static int64_t dim_at(const dvm_tensor *t, int rank_out, int i) {
  int j = i - (rank_out - t->rank);
  return j >= 0 ? t->dims[j] : 1;
}

void dvm_ew_plan_make(dvm_ew_plan *p, int nin, dvm_tensor *const *in, int out_rank,
                      const int64_t *out_dims) {
  int64_t contig[DVM_EW_MAX_IN]; /* each input's dense stride at dim i */
  for (int k = 0; k < nin; k++) contig[k] = (int64_t)dvm_dtype_size((dvm_dtype)in[k]->dtype);
  p->nin = nin;
  p->rank = 0;
  for (int i = out_rank - 1; i >= 0; i--) {
    int64_t d = out_dims[i], s[DVM_EW_MAX_IN];
    for (int k = 0; k < nin; k++) {
      int64_t dk = dim_at(in[k], out_rank, i);
      s[k] = dk == 1 ? 0 : contig[k];
      contig[k] *= dk;
    }
    if (d == 1) continue;
    int r = p->rank, merge = r > 0;
    for (int k = 0; k < nin && merge; k++)
      merge = s[k] == p->stride[r - 1][k] * p->dims[r - 1];
    if (merge) {
      p->dims[r - 1] *= d;
      continue;
    }
    p->dims[r] = d;
    memcpy(p->stride[r], s, sizeof(int64_t) * (size_t)nin);
    p->rank++;
  }
  if (p->rank == 0) { /* a single element */
    p->rank = 1;
    p->dims[0] = 1;
    memset(p->stride[0], 0, sizeof(int64_t) * (size_t)nin);
  }
}

void dvm_ew_cursor_seek(const dvm_ew_plan *p, dvm_ew_cursor *c, int64_t pos) {
  int64_t n = p->dims[0], row = pos / n;
  c->pos = pos;
  c->i0 = pos % n;
  for (int k = 0; k < p->nin; k++) c->off[k] = c->i0 * p->stride[0][k];
  for (int d = 1; d < p->rank; d++) {
    c->idx[d] = row % p->dims[d];
    row /= p->dims[d];
    for (int k = 0; k < p->nin; k++) c->off[k] += c->idx[d] * p->stride[d][k];
  }
}

void dvm_ew_cursor_advance(const dvm_ew_plan *p, dvm_ew_cursor *c, int64_t n) {
  c->pos += n;
  c->i0 += n;
  if (c->i0 < p->dims[0]) {
    for (int k = 0; k < p->nin; k++) c->off[k] += n * p->stride[0][k];
    return;
  }
  /* the row is done: back to its start, then one step in the outer dims */
  for (int k = 0; k < p->nin; k++) c->off[k] -= (c->i0 - n) * p->stride[0][k];
  c->i0 = 0;
  for (int d = 1; d < p->rank; d++) {
    for (int k = 0; k < p->nin; k++) c->off[k] += p->stride[d][k];
    if (++c->idx[d] < p->dims[d]) return;
    for (int k = 0; k < p->nin; k++) c->off[k] -= p->stride[d][k] * p->dims[d];
    c->idx[d] = 0;
  }
}

static void walk_rows(const dvm_ew_plan *p, dvm_ew_row_fn fn, const char *const *in, char *out,
                      size_t out_esz, int64_t s, int64_t e) {
  dvm_ew_cursor c;
  const char *ptr[DVM_EW_MAX_IN];
  dvm_ew_cursor_seek(p, &c, s);
  while (c.pos < e) {
    int64_t n = dvm_ew_cursor_run(p, &c, e);
    for (int k = 0; k < p->nin; k++) ptr[k] = in[k] + c.off[k];
    fn(n, ptr, out + c.pos * (int64_t)out_esz);
    dvm_ew_cursor_advance(p, &c, n);
  }
}

/* Rows shorter than WIDE_ROWS elements cost a call each: where every input
 * either runs on across rows or repeats its row (a bias [4] over [m, 4]),
 * calls take whole rows WIDE_ROWS elements at a time, the repeating inputs
 * read from their row laid end to end. */
#define WIDE_ROWS 256
#define WIDE_IN 3

static int wide(const dvm_ew_plan *p) {
  if (p->rank != 2 || p->dims[0] > WIDE_ROWS / 4 || p->nin > WIDE_IN) return 0;
  for (int k = 0; k < p->nin; k++) {
    int64_t s0 = p->stride[0][k], s1 = p->stride[1][k];
    if (s1 != s0 * p->dims[0] && !(s1 == 0 && s0 != 0)) return 0;
  }
  return 1;
}

static void walk_wide(const dvm_ew_plan *p, dvm_ew_row_fn fn, const char *const *in, char *out,
                      size_t out_esz, int64_t s, int64_t e) {
  _Alignas(64) char rep[WIDE_IN][WIDE_ROWS * 8];
  const char *ptr[WIDE_IN];
  int64_t r = p->dims[0], span = WIDE_ROWS / r * r;
  for (int k = 0; k < p->nin; k++)
    if (p->stride[1][k] == 0 && p->stride[0][k] != 0)
      for (int64_t i = 0; i < span; i += r) memcpy(rep[k] + i * p->stride[0][k], in[k], (size_t)(r * p->stride[0][k]));
  int64_t pos = s + (r - s % r) % r; /* the first row start */
  if (pos > e) pos = e;
  walk_rows(p, fn, in, out, out_esz, s, pos);
  for (int64_t n; (n = (e - pos) / r * r) > 0; pos += n) {
    if (n > span) n = span;
    for (int k = 0; k < p->nin; k++)
      ptr[k] = p->stride[1][k] == 0 && p->stride[0][k] != 0 ? rep[k] : in[k] + pos / r * p->stride[1][k];
    fn(n, ptr, out + pos * (int64_t)out_esz);
  }
  walk_rows(p, fn, in, out, out_esz, pos, e);
}

void dvm_ew_walk(const dvm_ew_plan *p, dvm_ew_row_fn fn, const char *const *in, char *out,
                 size_t out_esz, int64_t s, int64_t e) {
  (wide(p) ? walk_wide : walk_rows)(p, fn, in, out, out_esz, s, e);
}

void dvm_ew_parallel(const dvm_kernel_args *a, int64_t total, int64_t min_chunk,
                     void (*fn)(void *ctx, int64_t s, int64_t e), void *ctx) {
  int64_t nt = total / min_chunk, threads = dvm_kargs_threads(a);
  if (nt > threads) nt = threads;
  if (nt <= 1) {
    fn(ctx, 0, total);
    return;
  }
  dvm_par_for((int)nt, total, 64, fn, ctx);
}

#if DVM_EW_X86
/* dst 32-byte aligned, bytes a multiple of 32 */
__attribute__((target("avx"))) static void stream_avx(char *d, const char *s, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 32)
    _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
}
#endif

void dvm_ew_stream_copy(void *dst, const void *src, size_t bytes) {
#if DVM_EW_X86
  char *d = dst;
  const char *s = src;
  size_t head = (size_t)(-(uintptr_t)d & 31);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  size_t body = (bytes - head) & ~(size_t)31;
  if (__builtin_cpu_supports("avx")) {
    stream_avx(d + head, s + head, body);
  } else {
    for (size_t i = head; i < head + body; i += 16)
      _mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
  }
  memcpy(d + head + body, s + head + body, bytes - head - body);
#else
  memcpy(dst, src, bytes);
#endif
}

DVM_EW_CLONES static void f32_to_f16_sw(int64_t n, const float *s, uint16_t *d) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = dvm_f32_to_f16(s[i]);
}

DVM_EW_CLONES static void f16_to_f32_sw(int64_t n, const uint16_t *s, float *d) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = dvm_f16_to_f32(s[i]);
}

#if DVM_EW_X86
__attribute__((target("avx,f16c"))) static void f32_to_f16_hw(int64_t n, const float *s, uint16_t *d) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  f32_to_f16_sw(n - i, s + i, d + i);
}

__attribute__((target("avx,f16c"))) static void f16_to_f32_hw(int64_t n, const uint16_t *s, float *d) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  f16_to_f32_sw(n - i, s + i, d + i);
}
#endif

void dvm_ew_f32_to_f16_n(int64_t n, const float *src, uint16_t *dst) {
#if DVM_EW_X86
  if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")) {
    f32_to_f16_hw(n, src, dst);
    return;
  }
#endif
  f32_to_f16_sw(n, src, dst);
}

void dvm_ew_f16_to_f32_n(int64_t n, const uint16_t *src, float *dst) {
#if DVM_EW_X86
  if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")) {
    f16_to_f32_hw(n, src, dst);
    return;
  }
#endif
  f16_to_f32_sw(n, src, dst);
}

void dvm_ew_stream_fence(void) {
#if DVM_EW_X86
  _mm_sfence();
#endif
}

dvm_status *dvm_ew_check_broadcast(const char *op, dvm_tensor *const *in, int nin,
                                   const dvm_tensor *out) {
  int rank = in[0]->rank;
  int64_t dims[DVM_MAX_RANK];
  memcpy(dims, in[0]->dims, sizeof(int64_t) * (size_t)rank);
  for (int k = 1; k < nin; k++) {
    dvm_status *st = dvm_broadcast_shape(rank, dims, in[k]->rank, in[k]->dims, &rank, dims);
    if (st) return dvm_status_annotate(st, "%s", op);
  }
  /* leading 1s past the inputs' rank move no element: the fused kernel
   * folds one-element constants into its program, and their rank still
   * counts in the output's ([1,5,7] * [1,1,1,1] is [1,1,5,7]) */
  int lead = out->rank - rank;
  for (int d = 0; d < lead; d++)
    if (out->dims[d] != 1) lead = -1;
  if (lead >= 0 && memcmp(out->dims + lead, dims, sizeof(int64_t) * (size_t)rank) == 0) return NULL;
  /* "[2,3]", "[2,3] and [3]", "[2,3], [3] and [1]" */
  char so[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE], list[DVM_EW_MAX_IN * DVM_SHAPE_STR_SIZE];
  size_t len = 0;
  for (int k = 0; k < nin; k++) {
    char s[DVM_SHAPE_STR_SIZE];
    const char *sep = k == 0 ? "" : k == nin - 1 ? " and " : ", ";
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", sep,
                            dvm_shape_str(s, in[k]->rank, in[k]->dims));
  }
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s != %s, the broadcast of %s", op,
                        dvm_shape_str(so, out->rank, out->dims), dvm_shape_str(sb, rank, dims),
                        list);
}

/* ---- row loops ---- */

enum { ROW_VV, ROW_SV, ROW_VS, ROW_KINDS };


#define TO_BOOL(v) ((uint8_t)(v))

/* The ops, on compute values x and y of type C. */
#define ADD(C, U, x, y) (C)((U)(x) + (U)(y))
#define SUB(C, U, x, y) (C)((U)(x) - (U)(y))
#define MUL(C, U, x, y) (C)((U)(x) * (U)(y))
#define FDIV(C, U, x, y) ((x) / (y))
/* 0 never reaches the divide (its error is raised before the loop) */
#define IDIV(C, U, x, y) ((y) == -1 ? (C)(0u - (U)(x)) : (y) == 0 ? (C)0 : (C)((x) / (y)))
#define UDIV(C, U, x, y) ((y) == 0 ? (C)0 : (C)((x) / (y)))
#define FPOW(C, U, x, y) _Generic((x), float: powf, double: pow)(x, y)
#define IPOW(C, U, x, y) (C)(U)ipow((int64_t)(x), (int64_t)(y))
#define MIN(C, U, x, y) DVM_EW_MIN(x, y)
#define MAX(C, U, x, y) DVM_EW_MAX(x, y)
#define EQ(C, U, x, y) ((x) == (y))
#define LT(C, U, x, y) ((x) < (y))
#define GT(C, U, x, y) ((x) > (y))
#define LE(C, U, x, y) ((x) <= (y))
#define GE(C, U, x, y) ((x) >= (y))
#define AND(C, U, x, y) (((x) != 0) & ((y) != 0))
#define OR(C, U, x, y) (((x) != 0) | ((y) != 0))
#define XOR(C, U, x, y) (((x) != 0) ^ ((y) != 0))
#define BIT_AND(C, U, x, y) (C)((U)(x) & (U)(y))
#define BIT_OR(C, U, x, y) (C)((U)(x) | (U)(y))
#define BIT_XOR(C, U, x, y) (C)((U)(x) ^ (U)(y))
/* Mod: fmod 1 truncates (the sign of x), fmod 0 floors (the sign of y).
 * A zero integer divisor never reaches these (an error before the loop);
 * INT_MIN % -1 is 0. */
#define TMOD(C, U, x, y) ((y) == -1 || (y) == 0 ? (C)0 : (C)((x) % (y)))
#define UMOD(C, U, x, y) ((y) == 0 ? (C)0 : (C)((x) % (y)))
#define FLOOR_IMOD(C, U, x, y) floor_mod(TMOD(C, U, x, y), y)
#define FMOD(C, U, x, y) _Generic((x), float: fmodf, double: fmod)(x, y)
#define FLOOR_FMOD(C, U, x, y) _Generic((x), float: floor_fmodf, double: floor_fmod)(x, y)
#define PRELU(C, U, x, y) ((x) < 0 ? (x) * (y) : (x))
/* BitShift: a shift by a negative amount or by the width or more leaves
 * only the sign fill (-1 for a negative x shifted right, else 0). */
#define BITS(x) (uint64_t)(sizeof(x) * 8)
#define OUT_OF_RANGE(x, y) ((uint64_t)(int64_t)(y) >= BITS(x))
#define SIGN_FILL(C, x) ((x) > 0 || (x) == 0 ? (C)0 : (C)-1)
#define SHL(C, U, x, y) (OUT_OF_RANGE(x, y) ? (C)0 : (C)((U)(x) << (y)))
#define SHR(C, U, x, y) (OUT_OF_RANGE(x, y) ? SIGN_FILL(C, x) : (C)((x) >> (y)))

/* the truncated remainder r of x by y moved to y's sign */
static inline int64_t floor_mod(int64_t r, int64_t y) { return r != 0 && (r < 0) != (y < 0) ? r + y : r; }
#define FLOOR_FMOD_FN(name, T, FM)                                \
  static inline T name(T x, T y) {                                \
    T r = FM(x, y);                                               \
    if (r != 0 && (r < 0) != (y < 0)) return r + y;               \
    return r == 0 ? copysign##T##_(0, y) : r;                     \
  }
#define copysignfloat_ copysignf
#define copysigndouble_ copysign
FLOOR_FMOD_FN(floor_fmodf, float, fmodf)
FLOOR_FMOD_FN(floor_fmod, double, fmod)

/* x^e modulo 2^64 (the low bits serve narrower types); e < 0 as 1/x^-e
 * truncated. */
static uint64_t ipow(int64_t x, int64_t e) {
  if (e < 0) return x == 1 ? 1 : x == -1 ? ((e & 1) ? (uint64_t)-1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)x;
  for (; e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return r;
}

/* Values are loaded before the select so that the loop if-converts. */
#define ROW_LOOP(name, TS, C, U, LD, TO, ST, OP, A, B)                                \
  DVM_EW_CLONES static void name(int64_t n, const char *const *in, char *po) {       \
    const TS *a = (const TS *)in[0], *b = (const TS *)in[1];                          \
    TO *o = (TO *)po;                                                                 \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                             \
      C x = LD(A), y = LD(B);                                                         \
      o[i] = ST(OP(C, U, x, y));                                                      \
    }                                                                                 \
  }

#define ROWS(name, OP, TO_, ST_, TS, C, U, LD, ST)                   \
  ROW_LOOP(name##_vv, TS, C, U, LD, TO_, ST_, OP, a[i], b[i])        \
  ROW_LOOP(name##_sv, TS, C, U, LD, TO_, ST_, OP, a[0], b[i])        \
  ROW_LOOP(name##_vs, TS, C, U, LD, TO_, ST_, OP, a[i], b[0])
/* the output in the input's storage type, or bool */
#define ROWS_SAME(name, OP, TS, C, U, LD, ST) ROWS(name, OP, TS, ST, TS, C, U, LD, ST)
#define ROWS_BOOL(name, OP, TS, C, U, LD, ST) ROWS(name, OP, uint8_t, TO_BOOL, TS, C, U, LD, ST)
#define ARITH(op, OP, dt) ROWS_SAME_(op##_##dt, OP, T_##dt)
#define ROWS_SAME_(name, OP, ...) ROWS_SAME(name, OP, __VA_ARGS__)
#define CMP(op, OP, dt) ROWS_BOOL_(op##_##dt, OP, T_##dt)
#define ROWS_BOOL_(name, OP, ...) ROWS_BOOL(name, OP, __VA_ARGS__)

#define FLOATS(X, op, OP) X(op, OP, f32) X(op, OP, f64) X(op, OP, f16) X(op, OP, bf16)
#define SINTS(X, op, OP) X(op, OP, i8) X(op, OP, i16) X(op, OP, i32) X(op, OP, i64)
#define UINTS(X, op, OP) X(op, OP, u8) X(op, OP, u16) X(op, OP, u32) X(op, OP, u64)
#define INTS(X, op, OP) SINTS(X, op, OP) UINTS(X, op, OP)

FLOATS(ARITH, add, ADD) INTS(ARITH, add, ADD)
FLOATS(ARITH, sub, SUB) INTS(ARITH, sub, SUB)
FLOATS(ARITH, mul, MUL) INTS(ARITH, mul, MUL)
FLOATS(ARITH, div, FDIV) SINTS(ARITH, div, IDIV) UINTS(ARITH, div, UDIV)
SINTS(ARITH, pow, IPOW) ARITH(pow, IPOW, u8)
FLOATS(ARITH, min, MIN) INTS(ARITH, min, MIN)
FLOATS(ARITH, max, MAX) INTS(ARITH, max, MAX)
FLOATS(CMP, equal, EQ) INTS(CMP, equal, EQ) CMP(equal, EQ, bool)
FLOATS(CMP, less, LT) INTS(CMP, less, LT)
FLOATS(CMP, greater, GT) INTS(CMP, greater, GT)
FLOATS(CMP, less_equal, LE) INTS(CMP, less_equal, LE)
FLOATS(CMP, greater_equal, GE) INTS(CMP, greater_equal, GE)
CMP(and, AND, bool) CMP(or, OR, bool) CMP(xor, XOR, bool)

static bool strings_equal(const dvm_string *a, const dvm_string *b) {
  size_t na, nb;
  const char *pa = dvm_string_bytes(a, &na), *pb = dvm_string_bytes(b, &nb);
  return na == nb && !memcmp(pa, pb, na);
}
#define STRING_ROW(name, A, B)                                                     \
  static void name(int64_t n, const char *const *in, char *po) {                   \
    dvm_string *const *a = (dvm_string *const *)in[0], *const *b = (dvm_string *const *)in[1]; \
    for (int64_t i = 0; i < n; i++) po[i] = strings_equal(A, B);                   \
  }
STRING_ROW(equal_string_vv, a[i], b[i]) STRING_ROW(equal_string_sv, a[0], b[i]) STRING_ROW(equal_string_vs, a[i], b[0])
INTS(ARITH, bitwise_and, BIT_AND) INTS(ARITH, bitwise_or, BIT_OR) INTS(ARITH, bitwise_xor, BIT_XOR)
INTS(ARITH, shl, SHL) INTS(ARITH, shr, SHR)
FLOATS(ARITH, fmod, FMOD) SINTS(ARITH, fmod, TMOD) UINTS(ARITH, fmod, UMOD)
FLOATS(ARITH, mod, FLOOR_FMOD) SINTS(ARITH, mod, FLOOR_IMOD) UINTS(ARITH, mod, UMOD)
FLOATS(ARITH, prelu, PRELU)

/* Float pow: libm's, except that an exponent of 2 (variance, squared
 * error) is a multiply (as in the fused kernel) and vectorizes; a scalar
 * exponent that dvm_ew_pow_kind knows (elementwise.h) runs its vector
 * loop. */
#define POW_ROW(name, TS, C, U, LD, ST, A, B)                                          \
  DVM_EW_CLONES static void name(int64_t n, const char *const *in, char *po) {        \
    const TS *a = (const TS *)in[0], *b = (const TS *)in[1];                           \
    TS *o = (TS *)po;                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                  \
      C x = LD(A), e = LD(B);                                                          \
      o[i] = ST(e == 2 ? x * x : FPOW(C, U, x, e));                                    \
    }                                                                                  \
  }
#define POW_LOOP(expr, C, LD, ST)                                                      \
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                \
    C x = LD(a[i]);                                                                    \
    o[i] = ST(expr);                                                                   \
  }
#define POW_VS(name, TS, C, U, LD, ST)                                                 \
  DVM_EW_CLONES static void name(int64_t n, const char *const *in, char *po) {        \
    const TS *a = (const TS *)in[0];                                                   \
    TS *o = (TS *)po;                                                                  \
    C e = LD(*(const TS *)in[1]);                                                      \
    int kind = dvm_ew_pow_kind(e);                                                     \
    if (kind == DVM_EW_POW_ANY) {                                                      \
      for (int64_t i = 0; i < n; i++) o[i] = ST(FPOW(C, U, LD(a[i]), e));              \
      return;                                                                          \
    }                                                                                  \
    DVM_EW_POW_CASES(kind, POW_LOOP, x, C, LD, ST)                                     \
  }
#define POW_FLOAT(dt) POW_FLOAT_(pow_##dt, T_##dt)
#define POW_FLOAT_(name, ...) POW_FLOAT__(name, __VA_ARGS__)
#define POW_FLOAT__(name, TS, C, U, LD, ST)         \
  POW_ROW(name##_vv, TS, C, U, LD, ST, a[i], b[i])  \
  POW_ROW(name##_sv, TS, C, U, LD, ST, a[0], b[i])  \
  POW_VS(name##_vs, TS, C, U, LD, ST)
POW_FLOAT(f32) POW_FLOAT(f64) POW_FLOAT(f16) POW_FLOAT(bf16)

/* ---- the op table ---- */

typedef enum op_id {
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MIN, OP_MAX,
  OP_EQUAL, OP_LESS, OP_GREATER, OP_LESS_EQUAL, OP_GREATER_EQUAL,
  OP_AND, OP_OR, OP_XOR, OP_BITWISE_AND, OP_BITWISE_OR, OP_BITWISE_XOR, OP_SHL, OP_SHR,
  OP_MOD, OP_FMOD, OP_PRELU, OP_COUNT
} op_id;

typedef struct op_def {
  const char *name;
  int to_bool;                                       /* output bool, not the input dtype */
  dvm_ew_row_fn rows[DVM_DTYPE_COUNT][ROW_KINDS];    /* the dtypes: the non-empty entries */
} op_def;

#define R3(name) {name##_vv, name##_sv, name##_vs}
#define R_FLOATS(op) [DVM_F32] = R3(op##_f32), [DVM_F64] = R3(op##_f64), \
    [DVM_F16] = R3(op##_f16), [DVM_BF16] = R3(op##_bf16)
#define R_SINTS(op) [DVM_I8] = R3(op##_i8), [DVM_I16] = R3(op##_i16), [DVM_I32] = R3(op##_i32), \
    [DVM_I64] = R3(op##_i64)
#define R_INTS(op) R_SINTS(op), [DVM_U8] = R3(op##_u8), [DVM_U16] = R3(op##_u16), \
    [DVM_U32] = R3(op##_u32), [DVM_U64] = R3(op##_u64)
#define R_NUM(op) R_FLOATS(op), R_INTS(op)

static const op_def ops[OP_COUNT] = {
    [OP_ADD] = {"add", 0, {R_NUM(add)}},
    [OP_SUB] = {"sub", 0, {R_NUM(sub)}},
    [OP_MUL] = {"mul", 0, {R_NUM(mul)}},
    [OP_DIV] = {"div", 0, {R_NUM(div)}},
    [OP_POW] = {"pow", 0, {R_FLOATS(pow), R_SINTS(pow), [DVM_U8] = R3(pow_u8)}},
    [OP_MIN] = {"min", 0, {R_NUM(min)}},
    [OP_MAX] = {"max", 0, {R_NUM(max)}},
    [OP_EQUAL] = {"equal", 1, {R_NUM(equal), [DVM_BOOL] = R3(equal_bool), [DVM_STRING] = R3(equal_string)}},
    [OP_LESS] = {"less", 1, {R_NUM(less)}},
    [OP_GREATER] = {"greater", 1, {R_NUM(greater)}},
    [OP_LESS_EQUAL] = {"less_equal", 1, {R_NUM(less_equal)}},
    [OP_GREATER_EQUAL] = {"greater_equal", 1, {R_NUM(greater_equal)}},
    [OP_AND] = {"and", 1, {[DVM_BOOL] = R3(and_bool)}},
    [OP_OR] = {"or", 1, {[DVM_BOOL] = R3(or_bool)}},
    [OP_XOR] = {"xor", 1, {[DVM_BOOL] = R3(xor_bool)}},
    [OP_BITWISE_AND] = {"bitwise_and", 0, {R_INTS(bitwise_and)}},
    [OP_BITWISE_OR] = {"bitwise_or", 0, {R_INTS(bitwise_or)}},
    [OP_BITWISE_XOR] = {"bitwise_xor", 0, {R_INTS(bitwise_xor)}},
    [OP_SHL] = {"bit_shift", 0, {R_INTS(shl)}},
    [OP_SHR] = {"bit_shift", 0, {R_INTS(shr)}},
    [OP_MOD] = {"mod", 0, {R_NUM(mod)}},
    [OP_FMOD] = {"mod", 0, {R_NUM(fmod)}},
    [OP_PRELU] = {"prelu", 0, {R_FLOATS(prelu)}},
};

static dvm_status *check(const dvm_kernel_args *a, const op_def *op) {
  dvm_status *st = dvm_kargs_check(a, op->name, 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  int want_out = op->to_bool ? DVM_BOOL : x->dtype;
  if (x->dtype != y->dtype || o->dtype != want_out || !op->rows[x->dtype][ROW_VV]) {
    char got[64], want[128] = "";
    for (int dt = 0; dt < DVM_DTYPE_COUNT; dt++)
      if (op->rows[dt][ROW_VV])
        strcat(strcat(want, want[0] ? ", " : ""), dvm_dtype_name((dvm_dtype)dt));
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: want one of %s, %s", op->name,
                          dvm_kargs_dtypes(got, sizeof got, a), want,
                          op->to_bool ? "the same for both inputs, and a bool output"
                                      : "the same for all");
  }
  return dvm_ew_check_broadcast(op->name, a->in, 2, o);
}

/* The first zero among n integers of esz bytes each, or -1. */
static int64_t find_zero(const unsigned char *p, size_t esz, int64_t n) {
  for (int64_t i = 0; i < n; i++, p += esz) {
    unsigned char any = 0;
    for (size_t b = 0; b < esz; b++) any |= p[b];
    if (!any) return i;
  }
  return -1;
}

typedef struct walk_ctx {
  const dvm_ew_plan *plan;
  dvm_ew_row_fn fn;
  const char *const *in;
  char *out;
  size_t out_esz;
} walk_ctx;

static void walk_range(void *ctx, int64_t s, int64_t e) {
  const walk_ctx *w = ctx;
  dvm_ew_walk(w->plan, w->fn, w->in, w->out, w->out_esz, s, e);
}

/* Runs the row loops of `rows` (one per inner-stride pattern, indexed by
 * bit k set where input k advances) over the output. */
static void run_rows(const dvm_kernel_args *a, int nin, const dvm_ew_row_fn *rows) {
  const dvm_tensor *o = a->out[0];
  int64_t total = dvm_tensor_numel(o);
  if (total == 0) return;
  dvm_ew_plan p;
  dvm_ew_plan_make(&p, nin, a->in, o->rank, o->dims);
  int kind = 0;
  const char *in[3];
  for (int k = 0; k < nin; k++) {
    kind |= (p.stride[0][k] != 0) << k;
    in[k] = dvm_tensor_ptr(a->in[k]);
  }
  walk_ctx w = {&p, rows[kind], in, dvm_tensor_ptr(o), dvm_dtype_size((dvm_dtype)o->dtype)};
  dvm_ew_parallel(a, total, MIN_CHUNK, walk_range, &w);
}

static dvm_status *binary(const dvm_kernel_args *a, op_id id) {
  const op_def *op = &ops[id];
  dvm_status *st = check(a, op);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1];
  if (dvm_tensor_numel(a->out[0]) == 0) return NULL;
  if ((id == OP_DIV || id == OP_MOD || id == OP_FMOD) && dvm_dtype_is_int((dvm_dtype)x->dtype)) {
    int64_t z = find_zero(dvm_tensor_ptr(y), dvm_dtype_size((dvm_dtype)y->dtype), dvm_tensor_numel(y));
    if (z >= 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: integer division by zero (divisor element %lld)",
                            op->name, (long long)z);
  }
  /* by bit: input 0 advances, input 1 advances; both scalar is one element */
  const dvm_ew_row_fn *r = op->rows[x->dtype];
  const dvm_ew_row_fn rows[4] = {r[ROW_VV], r[ROW_VS], r[ROW_SV], r[ROW_VV]};
  run_rows(a, 2, rows);
  return NULL;
}

/* ---- where ---- */

/* One loop per pattern of advancing (v) and repeated (s) inputs, in the
 * order condition, x, y; per element size, as where only moves bytes. */
#define WHERE_ROW(name, T, C, X, Y)                                              \
  DVM_EW_CLONES static void name(int64_t n, const char *const *in, char *po) {  \
    const uint8_t *c = (const uint8_t *)in[0];                                   \
    const T *x = (const T *)in[1], *y = (const T *)in[2];                        \
    T *o = (T *)po;                                                              \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                        \
      T vx = X, vy = Y;                                                          \
      o[i] = C ? vx : vy;                                                        \
    }                                                                            \
  }
#define WHERE_ROWS(T, s)                               \
  WHERE_ROW(where##s##_sss, T, c[0], x[0], y[0])       \
  WHERE_ROW(where##s##_vss, T, c[i], x[0], y[0])       \
  WHERE_ROW(where##s##_svs, T, c[0], x[i], y[0])       \
  WHERE_ROW(where##s##_vvs, T, c[i], x[i], y[0])       \
  WHERE_ROW(where##s##_ssv, T, c[0], x[0], y[i])       \
  WHERE_ROW(where##s##_vsv, T, c[i], x[0], y[i])       \
  WHERE_ROW(where##s##_svv, T, c[0], x[i], y[i])       \
  WHERE_ROW(where##s##_vvv, T, c[i], x[i], y[i])
WHERE_ROWS(uint8_t, 1) WHERE_ROWS(uint16_t, 2) WHERE_ROWS(uint32_t, 4) WHERE_ROWS(uint64_t, 8)

#define WHERE_TABLE(s) {where##s##_sss, where##s##_vss, where##s##_svs, where##s##_vvs, \
    where##s##_ssv, where##s##_vsv, where##s##_svv, where##s##_vvv}

/* by log2 of the element size */
static const dvm_ew_row_fn where_rows[4][8] = {
    WHERE_TABLE(1), WHERE_TABLE(2), WHERE_TABLE(4), WHERE_TABLE(8)};

static dvm_status *where(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "where", 3, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *c = a->in[0], *x = a->in[1], *y = a->in[2], *o = a->out[0];
  if (c->dtype != DVM_BOOL || x->dtype != y->dtype || o->dtype != x->dtype) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "where: dtypes %s: want a bool condition, then one dtype for x, y and "
                          "the output", dvm_kargs_dtypes(got, sizeof got, a));
  }
  if ((st = dvm_ew_check_broadcast("where", a->in, 3, o))) return st;
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  run_rows(a, 3, where_rows[esz == 1 ? 0 : esz == 2 ? 1 : esz == 4 ? 2 : 3]);
  return NULL;
}

#define KERNEL(op, id) \
  static dvm_status *op(const dvm_kernel_args *a) { return binary(a, id); }
KERNEL(add, OP_ADD)
KERNEL(sub, OP_SUB)
KERNEL(mul, OP_MUL)
KERNEL(div_, OP_DIV)
KERNEL(pow_, OP_POW)
KERNEL(min_, OP_MIN)
KERNEL(max_, OP_MAX)
KERNEL(equal, OP_EQUAL)
KERNEL(less, OP_LESS)
KERNEL(greater, OP_GREATER)
KERNEL(less_equal, OP_LESS_EQUAL)
KERNEL(greater_equal, OP_GREATER_EQUAL)
KERNEL(and_, OP_AND)
KERNEL(or_, OP_OR)
KERNEL(xor_, OP_XOR)
KERNEL(bitwise_and, OP_BITWISE_AND)
KERNEL(bitwise_or, OP_BITWISE_OR)
KERNEL(bitwise_xor, OP_BITWISE_XOR)
KERNEL(prelu, OP_PRELU)

/* An op whose variant is its one int attribute (0 picks `if0`). */
static dvm_status *by_flag(const dvm_kernel_args *a, const char *name, op_id if0, op_id if1) {
  if (a->nattrs != 1 || a->attrs[0].kind != DVM_VAL_INT || (uint64_t)a->attrs[0].u.i > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes one attribute, the int 0 or 1", name);
  return binary(a, a->attrs[0].u.i ? if1 : if0);
}
/* attrs: fmod (0: floored, 1: truncated) */
static dvm_status *mod(const dvm_kernel_args *a) { return by_flag(a, "mod", OP_MOD, OP_FMOD); }
/* attrs: direction (0: left, 1: right) */
static dvm_status *bit_shift(const dvm_kernel_args *a) { return by_flag(a, "bit_shift", OP_SHL, OP_SHR); }

const dvm_kernel_def dvm_cpu_binary_kernels[] = {
    {"add", DVM_DEVICE_CPU, add, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"sub", DVM_DEVICE_CPU, sub, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"mul", DVM_DEVICE_CPU, mul, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"div", DVM_DEVICE_CPU, div_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"pow", DVM_DEVICE_CPU, pow_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"min", DVM_DEVICE_CPU, min_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"max", DVM_DEVICE_CPU, max_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"equal", DVM_DEVICE_CPU, equal, "broadcast", .form = DVM_FORM_ELEMENTWISE, .strings = 1},
    {"less", DVM_DEVICE_CPU, less, "broadcast", .form = DVM_FORM_ELEMENTWISE},
    {"greater", DVM_DEVICE_CPU, greater, "broadcast", .form = DVM_FORM_ELEMENTWISE},
    {"less_equal", DVM_DEVICE_CPU, less_equal, "broadcast", .form = DVM_FORM_ELEMENTWISE},
    {"greater_equal", DVM_DEVICE_CPU, greater_equal, "broadcast", .form = DVM_FORM_ELEMENTWISE},
    {"and", DVM_DEVICE_CPU, and_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"or", DVM_DEVICE_CPU, or_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"xor", DVM_DEVICE_CPU, xor_, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE},
    {"where", DVM_DEVICE_CPU, where, "broadcast", .inplace = 1, .form = DVM_FORM_ELEMENTWISE, .strings = 1},
    {"bitwise_and", DVM_DEVICE_CPU, bitwise_and, "broadcast", .inplace = 1},
    {"bitwise_or", DVM_DEVICE_CPU, bitwise_or, "broadcast", .inplace = 1},
    {"bitwise_xor", DVM_DEVICE_CPU, bitwise_xor, "broadcast", .inplace = 1},
    {"bit_shift", DVM_DEVICE_CPU, bit_shift, "broadcast", .inplace = 1},
    {"mod", DVM_DEVICE_CPU, mod, "broadcast", .inplace = 1},
    {"prelu", DVM_DEVICE_CPU, prelu, "broadcast", .inplace = 1},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
