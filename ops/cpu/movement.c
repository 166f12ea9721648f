/* Data-movement kernels with ONNX semantics. They move bytes, so each works
 * on every dtype by element size (1, 2, 4 or 8 bytes). Output shapes and
 * the kernels' parameters come from shapefuncs/movement.h, called with the
 * kernel's tensors and attributes as its shape function is.
 *
 *   transpose(in: x; attrs: perm:shape) -> y           perm optional: reversed dims
 *   gather(in: data, indices; attrs: axis:int) -> y    indices i64 or i32, may be negative
 *   gather_elements(in: data, indices; attrs: axis:int) -> y
 *   slice(in: data, starts, ends[, axes[, steps]]) -> y   i64 or i32 host tensors
 *   concat(in: x0, ..., xn; attrs: axis:int) -> y
 *   copy_into(in: x; attrs: axis:int, at:int, n:int) -> y   y given, written in
 *          place: y[.., at:at+n, ..] = x[.., 0:n, ..] along axis, the rest of
 *          y kept; x has y's rank and its dims off the axis (Loop and Scan
 *          outputs, slice by slice; their full shape from shape function
 *          with_dim(x, axis, n): x's shape with dim axis set to n)
 *   split(in: x[, split]; attrs: axis:int, num_outputs:int) -> y0, ..., yk
 *                                      split: i64 sizes; both attrs optional
 *   expand(in: x, shape) -> y                          shape: i64, bidirectional broadcast
 *   tile(in: x, repeats) -> y                          repeats: i64, one per dim
 *   pad(in: data, pads[, value[, axes]]; attrs: mode:int) -> y
 *          pads: i64 [begins..., ends...] per axis (negative crops); value: a
 *          one-element tensor of data's dtype (default 0); axes: i64;
 *          mode 0 constant (default), 1 reflect, 2 edge, 3 wrap
 *   trilu(in: x[, k]; attrs: upper:int) -> y           k: one-element i64 (default 0);
 *                                                      upper 1 (default) or 0
 *   center_crop_pad(in: x, shape; attrs: axes:shape) -> y   ONNX CenterCropPad:
 *          a centred crop or zero pad of each axis to shape[i], by pad's code
 *   depth_to_space, space_to_depth(in: x [N, C, H, W]; attrs: blocksize:int,
 *          mode:int) -> y     mode 0 DCR, 1 CRD (shapefuncs/movement.h)
 * Every output has the dtype of input 0. Attributes marked optional may be
 * left out from the end of the list. Transpose, gather, gather_elements,
 * slice, concat, split, expand and tile take strings too: they copy the
 * element pointers, whose references the VM owns (vm/kernel.h); copy_into
 * too, managing the references of the slice it overwrites.
 *
 * Most of them are one strided copy: a plan of dims with a source and a
 * destination stride each (slice: steps, negative too; expand: 0 where a
 * dim broadcasts; transpose: permuted; tile: each dim split in (repeat,
 * dim)), simplified by dropping dims of 1 and merging neighbours that stay
 * contiguous, then run as rows of the innermost dim with counters for the
 * outer ones. A transpose whose innermost output dim is strided in the
 * source goes by blocks instead, 4 x 4 transposes in SIMD registers, so
 * that both sides stay in cache. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "object.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/movement.h"
#include "ops/cpu/par.h"
#include "ops/kargs.h"
#include "shapefuncs/movement.h"
#include "shapefuncs/shape.h"

enum { K_GATHER = 1 }; /* gather's row of dvm_cpu_movement_kernels: its forms' owner */

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* Below this many elements per thread, a fork costs more than it saves. */
#define MIN_CHUNK ((int64_t)1 << 15)

/* A transpose goes by blocks of BLOCK_ROWS positions of the source's
 * contiguous dim by BLOCK_COLS of the destination's (measured best on
 * transformer and CNN layouts; with more columns, source rows a power of
 * two apart thrash a cache set). */
#define BLOCK_ROWS 32
#define BLOCK_COLS 16

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* ---- shared checks ---- */

dvm_status *dvm_cpu_check_io(const dvm_kernel_args *a, const char *op, int min_in, int max_in,
                             int nout, int same_dtype) {
  if (a->nin < min_in || a->nin > max_in) {
    if (min_in == max_in) return ERR("%s: takes %d input%s, got %d", op, min_in,
                                     min_in == 1 ? "" : "s", a->nin);
    return ERR("%s: takes %d to %d inputs, got %d", op, min_in, max_in, a->nin);
  }
  if (nout < 0 && a->nout < 1) return ERR("%s: gives 1 or more outputs, got %d", op, a->nout);
  dvm_status *st = dvm_kargs_check(a, op, a->nin, nout < 0 ? a->nout : nout, DVM_DEVICE_CPU);
  if (st || !same_dtype) return st;
  for (int i = 0; i < a->nout; i++)
    if (a->out[i]->dtype != a->in[0]->dtype)
      return ERR("%s: output %d is %s, input 0 is %s", op, i,
                 dvm_dtype_name((dvm_dtype)a->out[i]->dtype),
                 dvm_dtype_name((dvm_dtype)a->in[0]->dtype));
  return NULL;
}

dvm_status *dvm_cpu_check_shape(const char *op, const dvm_tensor *t, int i, int rank,
                                const int64_t *dims) {
  if (t->rank == rank && memcmp(t->dims, dims, sizeof(int64_t) * (size_t)rank) == 0) return NULL;
  char got[DVM_SHAPE_STR_SIZE], want[DVM_SHAPE_STR_SIZE];
  return ERR("%s: output %d has shape %s, want %s", op, i, dvm_shape_str(got, t->rank, t->dims),
             dvm_shape_str(want, rank, dims));
}

/* The inputs then the attributes of a call, as its shape function takes
 * them; on the heap only for calls with many operands. */
typedef struct call_values {
  dvm_value *v;
  int n;
  dvm_value buf[16];
} call_values;

static dvm_status *values_make(const dvm_kernel_args *a, call_values *cv) {
  cv->n = a->nin + a->nattrs;
  cv->v = cv->buf;
  if (cv->n > 16 && !(cv->v = malloc(sizeof(dvm_value) * (size_t)cv->n)))
    return dvm_status_new(DVM_OUT_OF_MEMORY, "no memory for %d operands", cv->n);
  for (int i = 0; i < a->nin; i++) cv->v[i] = dvm_value_tensor(a->in[i]);
  for (int i = 0; i < a->nattrs; i++) cv->v[a->nin + i] = a->attrs[i];
  return NULL;
}

static void values_free(call_values *cv) {
  if (cv->v != cv->buf) free(cv->v);
}

/* Row-major strides in elements. */
static void strides_of(const dvm_tensor *t, int64_t *s) {
  int64_t n = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    s[i] = n;
    n *= t->dims[i];
  }
}

/* Threads worth forking for `work` elements. */
static int threads_for(const dvm_kernel_args *a, int64_t work) {
  int64_t nt = work / MIN_CHUNK, max = dvm_kargs_threads(a);
  return nt < 1 ? 1 : nt > max ? (int)max : (int)nt;
}

static int size_index(size_t esz) { return esz == 1 ? 0 : esz == 2 ? 1 : esz == 4 ? 2 : 3; }

/* ---- typed loops, one per element size ---- */

/* n elements: d[i * ds] = s[i * ss] */
typedef void (*row_fn)(int64_t n, const char *s, int64_t ss, char *d, int64_t ds);
/* a rows x cols block: d[i * ds + j] = s[i + j * ss] */
typedef void (*block_fn)(int64_t rows, int64_t cols, const char *s, int64_t ss, char *d,
                         int64_t ds);
typedef void (*fill_fn)(char *d, const char *v, int64_t n);
/* n elements: d[to[i]] = s[from[i]] */
typedef void (*pick_fn)(char *d, const char *s, const int64_t *to, const int64_t *from, int64_t n);
/* gather rows [r0, r1) of out [outer, m, inner] from data [outer, n, inner] */
typedef void (*gather_fn)(const char *data, int64_t n, int64_t inner, const void *idx, int idx64,
                          int64_t m, char *out, int64_t r0, int64_t r1);
/* len elements of a gather_elements row: out[j] = data[base + j * cs + k * as] */
typedef void (*gel_fn)(const char *data, int64_t base, int64_t cs, int64_t as, int64_t n,
                       const void *idx, int idx64, char *out, int64_t len);

/* The SIMD part of a block: 4 x 4 transposes in registers over the first
 * rows & ~3 rows and cols & ~3 columns; returns how many rows that is (the
 * rest is done element by element). Bytes are moved as integers. */
#ifdef __SSE2__
#include <emmintrin.h>

#define LOAD64(p) _mm_loadl_epi64((const __m128i *)(p))
#define LOAD128(p) _mm_loadu_si128((const __m128i *)(p))

static int64_t quads_uint32_t(int64_t rows, int64_t cols, const uint32_t *a, int64_t ss,
                              uint32_t *b, int64_t ds) {
  for (int64_t i = 0; i + 4 <= rows; i += 4)
    for (int64_t j = 0; j + 4 <= cols; j += 4) {
      const uint32_t *s = a + i + j * ss;
      __m128i r0 = LOAD128(s), r1 = LOAD128(s + ss), r2 = LOAD128(s + 2 * ss),
              r3 = LOAD128(s + 3 * ss);
      __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpacklo_epi32(r2, r3);
      __m128i t2 = _mm_unpackhi_epi32(r0, r1), t3 = _mm_unpackhi_epi32(r2, r3);
      uint32_t *d = b + i * ds + j;
      _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi64(t0, t1));
      _mm_storeu_si128((__m128i *)(d + ds), _mm_unpackhi_epi64(t0, t1));
      _mm_storeu_si128((__m128i *)(d + 2 * ds), _mm_unpacklo_epi64(t2, t3));
      _mm_storeu_si128((__m128i *)(d + 3 * ds), _mm_unpackhi_epi64(t2, t3));
    }
  return rows & ~(int64_t)3;
}

static int64_t quads_uint16_t(int64_t rows, int64_t cols, const uint16_t *a, int64_t ss,
                              uint16_t *b, int64_t ds) {
  for (int64_t i = 0; i + 4 <= rows; i += 4)
    for (int64_t j = 0; j + 4 <= cols; j += 4) {
      const uint16_t *s = a + i + j * ss;
      __m128i t0 = _mm_unpacklo_epi16(LOAD64(s), LOAD64(s + ss));
      __m128i t1 = _mm_unpacklo_epi16(LOAD64(s + 2 * ss), LOAD64(s + 3 * ss));
      __m128i lo = _mm_unpacklo_epi32(t0, t1), hi = _mm_unpackhi_epi32(t0, t1);
      uint16_t *d = b + i * ds + j;
      _mm_storel_epi64((__m128i *)d, lo);
      _mm_storel_epi64((__m128i *)(d + ds), _mm_unpackhi_epi64(lo, lo));
      _mm_storel_epi64((__m128i *)(d + 2 * ds), hi);
      _mm_storel_epi64((__m128i *)(d + 3 * ds), _mm_unpackhi_epi64(hi, hi));
    }
  return rows & ~(int64_t)3;
}

/* 8-byte elements: four 2 x 2 transposes. */
static int64_t quads_uint64_t(int64_t rows, int64_t cols, const uint64_t *a, int64_t ss,
                              uint64_t *b, int64_t ds) {
  for (int64_t i = 0; i + 4 <= rows; i += 4)
    for (int64_t j = 0; j + 4 <= cols; j += 4)
      for (int k = 0; k < 4; k++) {
        int64_t di = k >> 1 << 1, dj = (k & 1) << 1;
        const uint64_t *s = a + i + di + (j + dj) * ss;
        __m128i r0 = LOAD128(s), r1 = LOAD128(s + ss);
        uint64_t *d = b + (i + di) * ds + j + dj;
        _mm_storeu_si128((__m128i *)d, _mm_unpacklo_epi64(r0, r1));
        _mm_storeu_si128((__m128i *)(d + ds), _mm_unpackhi_epi64(r0, r1));
      }
  return rows & ~(int64_t)3;
}
static int64_t quads_uint8_t(int64_t rows, int64_t cols, const uint8_t *a, int64_t ss, uint8_t *b,
                             int64_t ds) {
  return 0; /* bytes go element by element */
}
#define QUADS(T, rows, cols, a, ss, b, ds) quads_##T(rows, cols, a, ss, b, ds)
#else
#define QUADS(T, rows, cols, a, ss, b, ds) 0
#endif

#define INDEX(p, is64, j) ((is64) ? ((const int64_t *)(p))[j] : ((const int32_t *)(p))[j])

#define LOOPS(T)                                                                             \
  static void row_##T(int64_t n, const char *s, int64_t ss, char *d, int64_t ds) {           \
    const T *a = (const T *)s;                                                               \
    T *b = (T *)d;                                                                           \
    if (ss == 1 && ds == 1) {                                                                \
      memcpy(b, a, sizeof(T) * (size_t)n);                                                   \
    } else if (ds == 1 && ss == 0) {                                                         \
      T v = a[0];                                                                            \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) b[i] = v;                          \
    } else if (ds == 1) {                                                                    \
      for (int64_t i = 0; i < n; i++) b[i] = a[i * ss];                                      \
    } else {                                                                                 \
      for (int64_t i = 0; i < n; i++) b[i * ds] = a[i * ss];                                 \
    }                                                                                        \
  }                                                                                          \
  static void block_##T(int64_t rows, int64_t cols, const char *s, int64_t ss, char *d,      \
                        int64_t ds) {                                                        \
    const T *a = (const T *)s;                                                               \
    T *b = (T *)d;                                                                           \
    int64_t i0 = QUADS(T, rows, cols, a, ss, b, ds), j0 = i0 ? cols & ~(int64_t)3 : 0;       \
    /* what the quads left: columns past j0 of their rows, then all of the rest */          \
    for (int64_t j = j0; j < cols; j++)                                                      \
      for (int64_t i = 0; i < i0; i++) b[i * ds + j] = a[i + j * ss];                        \
    for (int64_t j = 0; j < cols; j++)                                                       \
      for (int64_t i = i0; i < rows; i++) b[i * ds + j] = a[i + j * ss];                     \
  }                                                                                          \
  static void fill_##T(char *d, const char *v, int64_t n) {                                  \
    T x, *b = (T *)d;                                                                        \
    memcpy(&x, v, sizeof x);                                                                 \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) b[i] = x;                            \
  }                                                                                          \
  static void pick_##T(char *d, const char *s, const int64_t *to, const int64_t *from,       \
                       int64_t n) {                                                          \
    const T *a = (const T *)s;                                                               \
    T *b = (T *)d;                                                                           \
    for (int64_t i = 0; i < n; i++) b[to[i]] = a[from[i]];                                   \
  }                                                                                          \
  static void gather_##T(const char *data, int64_t n, int64_t inner, const void *idx,        \
                         int idx64, int64_t m, char *out, int64_t r0, int64_t r1) {          \
    const T *a = (const T *)data;                                                            \
    T *b = (T *)out;                                                                         \
    int64_t o = r0 / m, j = r0 % m;                                                          \
    for (int64_t r = r0; r < r1; r++) {                                                      \
      int64_t k = INDEX(idx, idx64, j);                                                      \
      const T *src = a + (o * n + (k < 0 ? k + n : k)) * inner;                              \
      if (inner == 1)                                                                        \
        b[r] = *src;                                                                         \
      else                                                                                   \
        memcpy(b + r * inner, src, sizeof(T) * (size_t)inner);                               \
      if (++j == m) j = 0, o++;                                                              \
    }                                                                                        \
  }                                                                                          \
  static void gel_##T(const char *data, int64_t base, int64_t cs, int64_t as, int64_t n,     \
                      const void *idx, int idx64, char *out, int64_t len) {                  \
    const T *a = (const T *)data + base;                                                     \
    T *b = (T *)out;                                                                         \
    for (int64_t j = 0; j < len; j++) {                                                      \
      int64_t k = INDEX(idx, idx64, j);                                                      \
      b[j] = a[j * cs + (k < 0 ? k + n : k) * as];                                           \
    }                                                                                        \
  }

LOOPS(uint8_t)
LOOPS(uint16_t)
LOOPS(uint32_t)
LOOPS(uint64_t)

#define BY_SIZE(f) {f##_uint8_t, f##_uint16_t, f##_uint32_t, f##_uint64_t}
static const row_fn rows[4] = BY_SIZE(row);
static const block_fn blocks[4] = BY_SIZE(block);
static const fill_fn fills[4] = BY_SIZE(fill);
static const pick_fn picks[4] = BY_SIZE(pick);
static const gather_fn gathers[4] = BY_SIZE(gather);
static const gel_fn gels[4] = BY_SIZE(gel);

typedef struct fill_job {
  fill_fn fn;
  char *dst;
  const void *elem;
  size_t esz;
} fill_job;

static void fill_range(void *ctx, int64_t s, int64_t e) {
  const fill_job *j = ctx;
  j->fn(j->dst + s * (int64_t)j->esz, j->elem, e - s);
}

void dvm_cpu_fill(void *dst, const void *elem, size_t esz, int64_t n, int threads) {
  int64_t nt = n / MIN_CHUNK;
  fill_job j = {fills[size_index(esz)], dst, elem, esz};
  dvm_par_for(nt < threads ? (int)nt : threads, n, 1, fill_range, &j);
}

/* ---- the strided copy ---- */

#define PLAN_MAX (2 * DVM_MAX_RANK)

typedef struct plan {
  int rank;                          /* dims innermost first */
  int64_t dims[PLAN_MAX];
  int64_t ss[PLAN_MAX], ds[PLAN_MAX]; /* source and destination strides, in elements */
} plan;

/* Adds the next dim outwards: dropped if 1, merged into the dim inside it
 * where both sides continue that dim's strides. */
static void plan_push(plan *p, int64_t dim, int64_t ss, int64_t ds) {
  int r = p->rank;
  if (dim == 1) return;
  if (r > 0 && ss == p->ss[r - 1] * p->dims[r - 1] && ds == p->ds[r - 1] * p->dims[r - 1]) {
    p->dims[r - 1] *= dim;
    return;
  }
  p->dims[r] = dim;
  p->ss[r] = ss;
  p->ds[r] = ds;
  p->rank++;
}

/* Elements [s, e) in plan order: counters set up once from s, then one
 * row call per innermost run. */
static void plan_walk(const plan *p, row_fn fn, int64_t esz, const char *src, char *dst,
                      int64_t s, int64_t e) {
  int64_t n = p->dims[0], i0 = s % n, row = s / n, idx[PLAN_MAX];
  int64_t so = i0 * p->ss[0], dof = i0 * p->ds[0];
  for (int d = 1; d < p->rank; d++) {
    idx[d] = row % p->dims[d];
    row /= p->dims[d];
    so += idx[d] * p->ss[d];
    dof += idx[d] * p->ds[d];
  }
  for (int64_t pos = s; pos < e;) {
    int64_t len = MIN(n - i0, e - pos);
    fn(len, src + so * esz, p->ss[0], dst + dof * esz, p->ds[0]);
    pos += len;
    so -= i0 * p->ss[0];
    dof -= i0 * p->ds[0];
    i0 = 0;
    for (int d = 1; d < p->rank; d++) {
      so += p->ss[d];
      dof += p->ds[d];
      if (++idx[d] < p->dims[d]) break;
      so -= p->ss[d] * p->dims[d];
      dof -= p->ds[d] * p->dims[d];
      idx[d] = 0;
    }
  }
}

/* Block rows [t0, t1) of a transpose: dim q is contiguous in the source
 * (ss[q] == 1) and dim 0 in the destination; a block row is BLOCK_ROWS
 * positions of q by all of dim 0, for one index of the other dims. */
static void plan_blocks(const plan *p, int q, block_fn fn, int64_t esz, const char *src,
                        char *dst, int64_t t0, int64_t t1) {
  int64_t nq = (p->dims[q] + BLOCK_ROWS - 1) / BLOCK_ROWS;
  for (int64_t t = t0; t < t1; t++) {
    int64_t rest = t / nq, r0 = t % nq * BLOCK_ROWS, so = r0, dof = r0 * p->ds[q];
    for (int d = 1; d < p->rank; d++) {
      if (d == q) continue;
      so += rest % p->dims[d] * p->ss[d];
      dof += rest % p->dims[d] * p->ds[d];
      rest /= p->dims[d];
    }
    int64_t nr = MIN(BLOCK_ROWS, p->dims[q] - r0);
    for (int64_t c0 = 0; c0 < p->dims[0]; c0 += BLOCK_COLS)
      fn(nr, MIN(BLOCK_COLS, p->dims[0] - c0), src + (so + c0 * p->ss[0]) * esz, p->ss[0],
         dst + (dof + c0) * esz, p->ds[q]);
  }
}

/* One plan_blocks or plan_walk call's arguments, for the pool (par.h). */
typedef struct plan_job {
  const plan *p;
  int q;
  block_fn blocks;
  row_fn rows;
  int64_t esz;
  const char *src;
  char *dst;
} plan_job;

static void plan_range(void *ctx, int64_t s, int64_t e) {
  const plan_job *j = ctx;
  if (j->q) plan_blocks(j->p, j->q, j->blocks, j->esz, j->src, j->dst, s, e);
  else plan_walk(j->p, j->rows, j->esz, j->src, j->dst, s, e);
}

/* Runs the plan (src and dst point at element 0 of each side). */
static void plan_run(plan *p, size_t esz, const char *src, char *dst, int threads) {
  if (p->rank == 0) { /* a single element */
    p->rank = 1;
    p->dims[0] = 1;
    p->ss[0] = p->ds[0] = 0;
  }
  int64_t total = 1, e = (int64_t)esz;
  for (int d = 0; d < p->rank; d++) total *= p->dims[d];
  int q = 0; /* a broadcast (source stride 0) is better done by rows */
  if (p->ds[0] == 1 && p->ss[0] != 1 && p->ss[0] != 0)
    for (int d = 1; d < p->rank && !q; d++)
      if (p->ss[d] == 1) q = d;
  int64_t nt = total / MIN_CHUNK;
  if (nt > threads) nt = threads;
  plan_job j = {p, q, blocks[size_index(esz)], rows[size_index(esz)], e, src, dst};
  if (q) { /* blocks of BLOCK_ROWS rows of dim q */
    int64_t per_q = (p->dims[q] + BLOCK_ROWS - 1) / BLOCK_ROWS;
    dvm_par_for((int)nt, total / p->dims[0] / p->dims[q] * per_q, 1, plan_range, &j);
  } else {
    dvm_par_for((int)nt, total, 1, plan_range, &j);
  }
}

/* ---- kernels ---- */

/* The common start: counts, devices, dtypes, then the call's values for
 * the shape function's infer function. */
static dvm_status *begin(const dvm_kernel_args *a, const char *op, int min_in, int max_in,
                         int nout, call_values *cv) {
  dvm_status *st = dvm_cpu_check_io(a, op, min_in, max_in, nout, 1);
  return st ? st : values_make(a, cv);
}

static dvm_status *transpose(const dvm_kernel_args *a) {
  call_values cv;
  dvm_transpose_info p;
  dvm_status *st = begin(a, "transpose", 1, 1, 1, &cv);
  if (st) return st;
  st = dvm_transpose_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape("transpose", y, 0, p.rank, p.dims))) return st;
  if (dvm_tensor_numel(y) == 0) return NULL;
  int64_t xs[DVM_MAX_RANK], ys[DVM_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  plan pl = {0};
  for (int i = p.rank - 1; i >= 0; i--) plan_push(&pl, p.dims[i], xs[p.perm[i]], ys[i]);
  plan_run(&pl, dvm_dtype_size((dvm_dtype)x->dtype), dvm_tensor_ptr(x), dvm_tensor_ptr(y),
           dvm_kargs_threads(a));
  return NULL;
}

/* One gather_fn call's arguments, for the pool (par.h). */
typedef struct gather_job {
  gather_fn fn;
  const char *data;
  int64_t n, inner;
  const void *idx;
  int idx64;
  int64_t m;
  char *out;
} gather_job;

static void gather_range(void *ctx, int64_t s, int64_t e) {
  const gather_job *j = ctx;
  j->fn(j->data, j->n, j->inner, j->idx, j->idx64, j->m, j->out, s, e);
}

/* Indices must be i64 or i32, each in [-n, n) for the dim of size n. */
static dvm_status *check_indices(const char *op, const dvm_tensor *data, const dvm_tensor *idx,
                                 int axis) {
  if (idx->dtype != DVM_I64 && idx->dtype != DVM_I32)
    return ERR("%s: indices are %s, want i64 or i32", op, dvm_dtype_name((dvm_dtype)idx->dtype));
  int64_t n = data->dims[axis], m = dvm_tensor_numel(idx);
  const void *p = dvm_tensor_ptr(idx);
  int is64 = idx->dtype == DVM_I64;
  for (int64_t j = 0; j < m; j++) {
    int64_t k = INDEX(p, is64, j);
    if (k < -n || k >= n) {
      char s[DVM_SHAPE_STR_SIZE];
      return ERR("%s: indices[%lld] = %lld is out of range for dim %d of data %s (size %lld)",
                 op, (long long)j, (long long)k, axis,
                 dvm_shape_str(s, data->rank, data->dims), (long long)n);
    }
  }
  return NULL;
}

/* gather along axis 0 of a constant left in its file (its rows form,
 * gather_prepack): each index's row read from the file, checked. */
static dvm_status *gather_rows(const void *form, const dvm_tensor *idx, int64_t m, int64_t row, int64_t n,
                               const dvm_tensor *y) {
  const void *pi = dvm_tensor_ptr(idx);
  char *py = dvm_tensor_ptr(y);
  dvm_status *st = NULL;
  for (int64_t j = 0; j < m && !st; j++) {
    int64_t k = INDEX(pi, idx->dtype == DVM_I64, j);
    st = dvm_rows_read(form, k < 0 ? k + n : k, 1, py + j * row);
  }
  return st ? dvm_status_annotate(st, "gather") : NULL;
}

/* Data that gather reads along axis 0 only (its axis attribute known 0,
 * or -rank) and that lies in an external data file: rows read from the
 * file when asked (dvm_rows_form), so an embedding table of which a few
 * rows are read costs no memory. */
static dvm_status *gather_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs, int nattrs,
                                  void **data, void (**free_data)(void *)) {
  if (input != 0 || nattrs < 1 || !attrs[0].known || t->rank < 1 ||
      (attrs[0].value != 0 && attrs[0].value != -(int64_t)t->rank))
    return NULL;
  size_t row = dvm_dtype_size((dvm_dtype)t->dtype);
  for (int i = 1; i < t->rank; i++) row *= (size_t)t->dims[i];
  return dvm_rows_form(t, row, data, free_data);
}

static dvm_status *gather(const dvm_kernel_args *a) {
  call_values cv;
  dvm_gather_info p;
  dvm_status *st = begin(a, "gather", 2, 2, 1, &cv);
  if (st) return st;
  st = dvm_gather_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape("gather", y, 0, p.rank, p.dims)) ||
      (st = check_indices("gather", x, idx, p.axis)))
    return st;
  int64_t outer = 1, inner = 1, m = dvm_tensor_numel(idx), n = x->dims[p.axis];
  for (int i = 0; i < p.axis; i++) outer *= x->dims[i];
  for (int i = p.axis + 1; i < x->rank; i++) inner *= x->dims[i];
  int64_t nrows = outer * m;
  if (nrows == 0 || inner == 0) return NULL;
  const void *form = p.axis == 0 ? dvm_tensor_packed(x, &dvm_cpu_movement_kernels[K_GATHER], 0) : NULL;
  if (form) return gather_rows(form, idx, m, inner * (int64_t)dvm_dtype_size((dvm_dtype)x->dtype), n, y);
  gather_fn fn = gathers[size_index(dvm_dtype_size((dvm_dtype)x->dtype))];
  const char *px = dvm_tensor_ptr(x);
  const void *pi = dvm_tensor_ptr(idx);
  char *py = dvm_tensor_ptr(y);
  gather_job j = {fn, px, n, inner, pi, idx->dtype == DVM_I64, m, py};
  dvm_par_for(threads_for(a, nrows * inner), nrows, 1, gather_range, &j);
  return NULL;
}

/* Rows [r0, r1) of gather_elements' output, each a run of its last dim. */
static void gel_rows(const dvm_tensor *x, const dvm_tensor *idx, int axis, char *out,
                     int64_t r0, int64_t r1) {
  int r = idx->rank, is64 = idx->dtype == DVM_I64;
  int64_t xs[DVM_MAX_RANK], pos[DVM_MAX_RANK], base = 0, len = idx->dims[r - 1], rest = r0;
  int64_t esz = (int64_t)dvm_dtype_size((dvm_dtype)x->dtype), isz = is64 ? 8 : 4;
  strides_of(x, xs);
  /* the data offset of each row skips the axis, which the indices give */
  for (int d = r - 2; d >= 0; d--) {
    pos[d] = rest % idx->dims[d];
    rest /= idx->dims[d];
    if (d != axis) base += pos[d] * xs[d];
  }
  gel_fn fn = gels[size_index((size_t)esz)];
  int64_t cs = axis == r - 1 ? 0 : 1, n = x->dims[axis];
  const char *px = dvm_tensor_ptr(x), *pi = dvm_tensor_ptr(idx);
  for (int64_t row = r0; row < r1; row++) {
    fn(px, base, cs, xs[axis], n, pi + row * len * isz, is64, out + row * len * esz, len);
    for (int d = r - 2; d >= 0; d--) {
      if (d != axis) base += xs[d];
      if (++pos[d] < idx->dims[d]) break;
      if (d != axis) base -= xs[d] * idx->dims[d];
      pos[d] = 0;
    }
  }
}

typedef struct gel_job {
  const dvm_tensor *x, *idx;
  int axis;
  char *out;
} gel_job;

static void gel_range(void *ctx, int64_t s, int64_t e) {
  const gel_job *j = ctx;
  gel_rows(j->x, j->idx, j->axis, j->out, s, e);
}

static dvm_status *gather_elements(const dvm_kernel_args *a) {
  call_values cv;
  dvm_gather_info p;
  const char *op = "gather_elements";
  dvm_status *st = begin(a, op, 2, 2, 1, &cv);
  if (st) return st;
  st = dvm_gather_elements_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape(op, y, 0, p.rank, p.dims)) ||
      (st = check_indices(op, x, idx, p.axis)))
    return st;
  int64_t total = dvm_tensor_numel(y);
  if (total == 0) return NULL;
  int64_t nrows = total / idx->dims[idx->rank - 1];
  char *py = dvm_tensor_ptr(y);
  gel_job j = {x, idx, p.axis, py};
  dvm_par_for(threads_for(a, total), nrows, 1, gel_range, &j);
  return NULL;
}

static dvm_status *slice(const dvm_kernel_args *a) {
  call_values cv;
  dvm_slice_info p;
  dvm_status *st = begin(a, "slice", 3, 5, 1, &cv);
  if (st) return st;
  st = dvm_slice_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape("slice", y, 0, p.rank, p.dims))) return st;
  if (dvm_tensor_numel(y) == 0) return NULL;
  int64_t xs[DVM_MAX_RANK], ys[DVM_MAX_RANK], off = 0;
  strides_of(x, xs);
  strides_of(y, ys);
  plan pl = {0};
  for (int i = p.rank - 1; i >= 0; i--) {
    off += p.start[i] * xs[i];
    plan_push(&pl, p.dims[i], p.step[i] * xs[i], ys[i]);
  }
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  plan_run(&pl, esz, (const char *)dvm_tensor_ptr(x) + off * (int64_t)esz, dvm_tensor_ptr(y),
           dvm_kargs_threads(a));
  return NULL;
}

/* Products of the dims before and after `axis`. */
static void outer_inner(const int64_t *dims, int rank, int axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= dims[i];
  for (int i = axis + 1; i < rank; i++) *inner *= dims[i];
}

/* Copies [outer, n] of src (rows ss apart) into dst (rows ds apart). */
static void copy_block(int64_t outer, int64_t n, size_t esz, const char *src, int64_t ss,
                       char *dst, int64_t ds, int threads) {
  if (outer == 0 || n == 0) return;
  plan pl = {0};
  plan_push(&pl, n, 1, 1);
  plan_push(&pl, outer, ss, ds);
  plan_run(&pl, esz, src, dst, threads);
}

/* Output rows this long or shorter are assembled one at a time from the
 * inputs' pieces (a Concat of NHWC tensors on channels: a few dozen
 * floats each), not input by input over the whole output, which would
 * write each cache line of it once per input. */
#define CONCAT_ROW_BYTES 4096

typedef struct concat_job {
  const dvm_kernel_args *a;
  const dvm_tensor *y;
  size_t esz;
  int64_t row, axis, tail;
} concat_job;

/* A piece of a row: pieces of one element of 4 or 8 bytes (a Concat of
 * [..., 1] maps on the last axis) are a move, not a call of memcpy. */
static inline void concat_piece(char *d, const char *s, size_t n) {
  if (n == 4)
    memcpy(d, s, 4);
  else if (n == 8)
    memcpy(d, s, 8);
  else if (n)
    memcpy(d, s, n);
}

static void concat_rows(void *ctx, int64_t r0, int64_t r1) {
  const concat_job *j = ctx;
  char *y = (char *)dvm_tensor_ptr(j->y);
  for (int64_t r = r0; r < r1; r++) {
    char *dst = y + r * j->row * (int64_t)j->esz;
    for (int i = 0; i < j->a->nin; i++) {
      size_t n = (size_t)(j->a->in[i]->dims[j->axis] * j->tail) * j->esz;
      concat_piece(dst, (const char *)dvm_tensor_ptr(j->a->in[i]) + (size_t)r * n, n);
      dst += n;
    }
  }
}

static dvm_status *concat(const dvm_kernel_args *a) {
  call_values cv;
  dvm_concat_info p;
  dvm_status *st = begin(a, "concat", 1, INT_MAX, 1, &cv);
  if (st) return st;
  st = dvm_concat_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape("concat", y, 0, p.rank, p.dims))) return st;
  for (int i = 1; i < a->nin; i++)
    if (a->in[i]->dtype != y->dtype)
      return ERR("concat: input %d is %s, input 0 is %s", i,
                 dvm_dtype_name((dvm_dtype)a->in[i]->dtype), dvm_dtype_name((dvm_dtype)y->dtype));
  int64_t outer, tail;
  outer_inner(p.dims, p.rank, p.axis, &outer, &tail);
  size_t esz = dvm_dtype_size((dvm_dtype)y->dtype);
  int64_t row = p.dims[p.axis] * tail, off = 0;
  if (outer > 1 && (size_t)row * esz <= CONCAT_ROW_BYTES) { /* short rows: each written whole, once */
    concat_job j = {a, y, esz, row, p.axis, tail};
    dvm_par_for(dvm_kargs_threads(a), outer, 1, concat_rows, &j);
    return NULL;
  }
  for (int i = 0; i < a->nin; i++) {
    int64_t n = a->in[i]->dims[p.axis] * tail;
    copy_block(outer, n, esz, dvm_tensor_ptr(a->in[i]), n,
               (char *)dvm_tensor_ptr(y) + off * (int64_t)esz, row, dvm_kargs_threads(a));
    off += n;
  }
  return NULL;
}

/* copy_into(out y; in x; attrs axis, at, n): y[.., at:at+n, ..] = x[..,
 * 0:n, ..] along `axis`, in place in y (the rest of y is left as it is);
 * x and y have one dtype and rank and equal dims off the axis. Loop and
 * Scan write each iteration's scan output slice with it, and a growing
 * Loop output its rows into a larger buffer (compiler/lower_control.c). */
static dvm_status *copy_into(const dvm_kernel_args *a) {
  const char *op = "copy_into";
  dvm_status *st = dvm_cpu_check_io(a, op, 1, 1, 1, 1);
  if (st) return st;
  int64_t v[3];
  if (a->nattrs != 3) return ERR("%s: takes 3 attributes (axis, at, n), got %d", op, a->nattrs);
  for (int k = 0; k < 3; k++) {
    if (a->attrs[k].kind != DVM_VAL_INT) return ERR("%s: attribute %d must be an int", op, k);
    v[k] = a->attrs[k].u.i;
  }
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int64_t axis = v[0], at = v[1], n = v[2];
  int bad = x->rank != y->rank || axis < 0 || axis >= y->rank, dim = -1;
  for (int i = 0; !bad && i < y->rank; i++)
    if (i != axis && x->dims[i] != y->dims[i]) bad = 1, dim = i;
  if (!bad && (n < 0 || n > x->dims[axis] || at < 0 || at > y->dims[axis] - n)) bad = 2;
  if (bad) {
    char xs[DVM_SHAPE_STR_SIZE], ys[DVM_SHAPE_STR_SIZE];
    dvm_shape_str(xs, x->rank, x->dims);
    dvm_shape_str(ys, y->rank, y->dims);
    if (bad == 2)
      return ERR("%s: %lld rows of input %s at %lld of output %s along axis %lld are out of range", op, (long long)n,
                 xs, (long long)at, ys, (long long)axis);
    if (dim >= 0)
      return ERR("%s: input %s does not fit output %s off axis %lld (dim %d differs; a Loop or Scan output's "
                 "slices must have one shape)", op, xs, ys, (long long)axis, dim);
    return ERR("%s: input %s and output %s along axis %lld: the ranks differ or the axis is out of range", op, xs, ys,
               (long long)axis);
  }
  int64_t outer, inner;
  outer_inner(y->dims, y->rank, (int)axis, &outer, &inner);
  if (y->dtype == DVM_STRING) { /* in place (DVM_STRINGS_UPDATE): the references of what is overwritten go */
    dvm_string *const *src = dvm_tensor_ptr(x);
    dvm_string **dst = (dvm_string **)dvm_tensor_ptr(y) + at * inner;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t e = 0; e < n * inner; e++) {
        dvm_string *s = src[o * x->dims[axis] * inner + e], **d = &dst[o * y->dims[axis] * inner + e];
        dvm_string_retain(s);
        dvm_string_release(*d);
        *d = s;
      }
    return NULL;
  }
  size_t esz = dvm_dtype_size((dvm_dtype)y->dtype);
  copy_block(outer, n * inner, esz, dvm_tensor_ptr(x), x->dims[axis] * inner,
             (char *)dvm_tensor_ptr(y) + at * inner * (int64_t)esz, y->dims[axis] * inner, dvm_kargs_threads(a));
  return NULL;
}

static dvm_status *split(const dvm_kernel_args *a) {
  call_values cv;
  int axis;
  dvm_status *st = begin(a, "split", 1, 2, -1, &cv);
  if (st) return st;
  int64_t buf[16], *sizes = buf;
  if (a->nout > 16 && !(sizes = malloc(sizeof(int64_t) * (size_t)a->nout))) {
    values_free(&cv);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "split: no memory for %d sizes", a->nout);
  }
  const dvm_tensor *x = a->in[0];
  int64_t dims[DVM_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  st = dvm_split_infer(cv.v, cv.n, a->nout, &axis, sizes);
  for (int i = 0; !st && i < a->nout; i++) {
    dims[axis] = sizes[i];
    st = dvm_cpu_check_shape("split", a->out[i], i, x->rank, dims);
  }
  values_free(&cv);
  if (sizes != buf) free(sizes);
  if (st) return st;
  int64_t outer, tail;
  outer_inner(x->dims, x->rank, axis, &outer, &tail);
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  int64_t row = x->dims[axis] * tail, off = 0;
  for (int i = 0; i < a->nout; i++) {
    int64_t n = a->out[i]->dims[axis] * tail;
    copy_block(outer, n, esz, (const char *)dvm_tensor_ptr(x) + off * (int64_t)esz, row,
               dvm_tensor_ptr(a->out[i]), n, dvm_kargs_threads(a));
    off += n;
  }
  return NULL;
}

/* Expand and tile: (x, a shape) -> y, whose shape `infer` gives and y must
 * have. */
static dvm_status *shaped_by_values(const dvm_kernel_args *a, const char *op,
                                    dvm_status *(*infer)(const dvm_value *, int, int *, int64_t *),
                                    int *rank, int64_t *dims) {
  call_values cv;
  dvm_status *st = begin(a, op, 2, 2, 1, &cv);
  if (st) return st;
  st = infer(cv.v, cv.n, rank, dims);
  values_free(&cv);
  return st ? st : dvm_cpu_check_shape(op, a->out[0], 0, *rank, dims);
}

static dvm_status *expand(const dvm_kernel_args *a) {
  int rank;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = shaped_by_values(a, "expand", dvm_expand_infer, &rank, dims);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (dvm_tensor_numel(y) == 0) return NULL;
  int64_t xs[DVM_MAX_RANK], ys[DVM_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  plan pl = {0};
  for (int i = rank - 1; i >= 0; i--) {
    int j = i - (rank - x->rank); /* x's dims align from the right */
    plan_push(&pl, dims[i], j >= 0 && x->dims[j] != 1 ? xs[j] : 0, ys[i]);
  }
  plan_run(&pl, dvm_dtype_size((dvm_dtype)x->dtype), dvm_tensor_ptr(x), dvm_tensor_ptr(y),
           dvm_kargs_threads(a));
  return NULL;
}

static dvm_status *tile(const dvm_kernel_args *a) {
  int rank;
  int64_t dims[DVM_MAX_RANK];
  dvm_status *st = shaped_by_values(a, "tile", dvm_tile_infer, &rank, dims);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (dvm_tensor_numel(y) == 0) return NULL;
  int64_t xs[DVM_MAX_RANK], ys[DVM_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  /* output dim i is [repeat, x dim i]: the repeat reads the same data again */
  plan pl = {0};
  for (int i = rank - 1; i >= 0; i--) {
    plan_push(&pl, x->dims[i], xs[i], ys[i]);
    plan_push(&pl, dims[i] / x->dims[i], 0, ys[i] * x->dims[i]);
  }
  plan_run(&pl, dvm_dtype_size((dvm_dtype)x->dtype), dvm_tensor_ptr(x), dvm_tensor_ptr(y),
           dvm_kargs_threads(a));
  return NULL;
}

/* Where border position i of a dim (i < 0 before the kept data, i >= n
 * after it) copies from, for the non-constant modes. */
static int64_t pad_source(int mode, int64_t i, int64_t n) {
  switch (mode) {
  case DVM_PAD_EDGE: return i < 0 ? 0 : n - 1;
  case DVM_PAD_WRAP: return (i % n + n) % n;
  default: { /* reflect, again and again for pads longer than the dim */
    if (n == 1) return 0;
    int64_t period = 2 * (n - 1), m = (i % period + period) % period;
    return m < n ? m : period - m;
  }
  }
}

/* The border of dim k: the positions it writes (to) and where each copies
 * from (the pad value, at 0, in constant mode). */
typedef struct pad_border {
  int k;
  int64_t n, *to, *from;
} pad_border;

/* Fills the border of dim k for outer indices [s, e) over the kept ranges
 * of the dims before k; the dims after k are complete already. */
static void pad_dim(const dvm_pad_info *p, const pad_border *bd, const int64_t *kept,
                    const int64_t *ys, const char *value, size_t esz, char *y, int64_t s,
                    int64_t e) {
  int k = bd->k, si = size_index(esz);
  int64_t idx[DVM_MAX_RANK], off = 0, rest = s, slab = ys[k], e8 = (int64_t)esz;
  for (int d = k - 1; d >= 0; d--) {
    idx[d] = rest % kept[d];
    rest /= kept[d];
    off += (idx[d] + (p->before[d] > 0 ? p->before[d] : 0)) * ys[d];
  }
  for (int64_t o = s; o < e; o++) {
    char *base = y + off * e8;
    if (slab == 1) {
      picks[si](base, p->mode == DVM_PAD_CONSTANT ? value : base, bd->to, bd->from, bd->n);
    } else {
      for (int64_t i = 0; i < bd->n; i++)
        if (p->mode == DVM_PAD_CONSTANT)
          fills[si](base + bd->to[i] * slab * e8, value, slab);
        else
          memcpy(base + bd->to[i] * slab * e8, base + bd->from[i] * slab * e8, (size_t)(slab * e8));
    }
    for (int d = k - 1; d >= 0; d--) {
      off += ys[d];
      if (++idx[d] < kept[d]) break;
      off -= ys[d] * kept[d];
      idx[d] = 0;
    }
  }
}

typedef struct pad_job {
  const dvm_pad_info *p;
  const pad_border *bd;
  const int64_t *kept, *ys;
  const char *value;
  size_t esz;
  char *y;
} pad_job;

static void pad_range(void *ctx, int64_t s, int64_t e) {
  const pad_job *j = ctx;
  pad_dim(j->p, j->bd, j->kept, j->ys, j->value, j->esz, j->y, s, e);
}

/* The border of dim k into bd, whose arrays have room for it. */
static void pad_border_of(const dvm_pad_info *p, int k, const int64_t *kept, pad_border *bd) {
  int64_t b = p->before[k] > 0 ? p->before[k] : 0;
  bd->k = k;
  bd->n = 0;
  for (int64_t t = 0; t < p->dims[k]; t++) {
    if (t == b) t += kept[k]; /* the kept data */
    if (t >= p->dims[k]) break;
    bd->to[bd->n] = t;
    bd->from[bd->n++] = p->mode == DVM_PAD_CONSTANT ? 0 : b + pad_source(p->mode, t - b, kept[k]);
  }
}

/* Pads (or crops) x into y as p says, with `value` (one element of x's
 * dtype) in constant mode. */
static dvm_status *pad_run(const dvm_kernel_args *a, const dvm_pad_info *pi, const char *value) {
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  const dvm_pad_info p = *pi;
  if (dvm_tensor_numel(y) == 0) return NULL;
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  int64_t xs[DVM_MAX_RANK], ys[DVM_MAX_RANK], kept[DVM_MAX_RANK], xoff = 0, yoff = 0, nkept = 1;
  strides_of(x, xs);
  strides_of(y, ys);
  plan pl = {0};
  for (int i = p.rank - 1; i >= 0; i--) {
    int64_t b = p.before[i], e = p.after[i];
    kept[i] = x->dims[i] + (b < 0 ? b : 0) + (e < 0 ? e : 0);
    nkept *= kept[i];
    xoff += (b < 0 ? -b : 0) * xs[i];
    yoff += (b > 0 ? b : 0) * ys[i];
    plan_push(&pl, kept[i], xs[i], ys[i]);
  }
  char *py = dvm_tensor_ptr(y);
  int threads = dvm_kargs_threads(a);
  if (nkept)
    plan_run(&pl, esz, (const char *)dvm_tensor_ptr(x) + xoff * (int64_t)esz,
             py + yoff * (int64_t)esz, threads);
  int64_t most = 0, buf[2 * 64];
  for (int k = 0; k < p.rank; k++)
    if (p.dims[k] - kept[k] > most) most = p.dims[k] - kept[k];
  pad_border bd = {0, 0, buf, buf + 64};
  if (most > 64) {
    if (!(bd.to = malloc(sizeof(int64_t) * 2 * (size_t)most)))
      return dvm_status_new(DVM_OUT_OF_MEMORY, "pad: no memory for a border of %lld",
                            (long long)most);
    bd.from = bd.to + most;
  }
  /* innermost dim first: the slabs each dim copies are then complete */
  for (int k = p.rank - 1; k >= 0; k--) {
    int64_t outer = 1;
    for (int d = 0; d < k; d++) outer *= kept[d];
    if (p.dims[k] == kept[k] || !outer) continue;
    pad_border_of(&p, k, kept, &bd);
    pad_job j = {&p, &bd, kept, ys, value, esz, py};
    dvm_par_for(threads_for(a, outer * bd.n * ys[k]), outer, 1, pad_range, &j);
  }
  if (bd.to != buf) free(bd.to);
  return NULL;
}

static dvm_status *pad(const dvm_kernel_args *a) {
  call_values cv;
  dvm_pad_info p;
  dvm_status *st = begin(a, "pad", 2, 4, 1, &cv);
  if (st) return st;
  st = dvm_pad_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape("pad", y, 0, p.rank, p.dims))) return st;
  if (a->nin > 2 && a->in[2]->dtype != x->dtype)
    return ERR("pad: value is %s, data is %s", dvm_dtype_name((dvm_dtype)a->in[2]->dtype),
               dvm_dtype_name((dvm_dtype)x->dtype));
  uint64_t zero = 0;
  return pad_run(a, &p, a->nin > 2 ? dvm_tensor_ptr(a->in[2]) : (const char *)&zero);
}

/* attrs: axes (a shape; empty: every dim) */
static dvm_status *center_crop_pad(const dvm_kernel_args *a) {
  call_values cv;
  dvm_pad_info p;
  dvm_status *st = begin(a, "center_crop_pad", 2, 2, 1, &cv);
  if (st) return st;
  st = dvm_center_crop_pad_infer(cv.v, cv.n, &p);
  values_free(&cv);
  if (st || (st = dvm_cpu_check_shape("center_crop_pad", a->out[0], 0, p.rank, p.dims))) return st;
  uint64_t zero = 0;
  return pad_run(a, &p, (const char *)&zero);
}

/* One loop over the space side [n, c, h, i, w, j] (i, j within a block)
 * and the depth side's channel of (c, i, j): DCR (i * b + j) * C + c, CRD
 * (c * b + i) * b + j. */
static dvm_status *depth_space(const dvm_kernel_args *a, bool to_space) {
  const char *op = to_space ? "depth_to_space" : "space_to_depth";
  call_values cv;
  dvm_depth_space p;
  dvm_status *st = begin(a, op, 1, 1, 1, &cv);
  if (st) return st;
  st = dvm_depth_space_infer(cv.v, cv.n, to_space, &p);
  values_free(&cv);
  if (st || (st = dvm_cpu_check_shape(op, a->out[0], 0, 4, p.dims))) return st;
  size_t esz = dvm_dtype_size((dvm_dtype)a->in[0]->dtype);
  const char *x = dvm_tensor_ptr(a->in[0]);
  char *y = dvm_tensor_ptr(a->out[0]);
  int64_t b = p.block, cd = p.c * b * b, hs = p.h * b, ws = p.w * b;
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t c = 0; c < p.c; c++)
      for (int64_t h = 0; h < p.h; h++)
        for (int64_t i = 0; i < b; i++)
          for (int64_t w = 0; w < p.w; w++)
            for (int64_t j = 0; j < b; j++) {
              int64_t ch = p.crd ? (c * b + i) * b + j : (i * b + j) * p.c + c;
              int64_t depth = ((n * cd + ch) * p.h + h) * p.w + w;
              int64_t space = ((n * p.c + c) * hs + h * b + i) * ws + w * b + j;
              int64_t from = to_space ? depth : space, to = to_space ? space : depth;
              memcpy(y + to * (int64_t)esz, x + from * (int64_t)esz, esz);
            }
  return NULL;
}
static dvm_status *depth_to_space(const dvm_kernel_args *a) { return depth_space(a, true); }
static dvm_status *space_to_depth(const dvm_kernel_args *a) { return depth_space(a, false); }

/* Rows [r0, r1) of trilu over matrices of m rows and n columns. */
static void trilu_rows(const char *x, char *y, int64_t m, int64_t n, int upper, int64_t k,
                       size_t esz, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r++) {
    int64_t i = r % m, c = upper ? i + k : i + k + 1; /* the first column of the upper part */
    c = c < 0 ? 0 : c > n ? n : c;
    const char *src = x + r * n * (int64_t)esz;
    char *dst = y + r * n * (int64_t)esz;
    int64_t c0 = upper ? c : 0, c1 = upper ? n : c; /* the kept columns; zeros around */
    memset(dst, 0, (size_t)c0 * esz);
    if (src != dst) /* in place, the kept part is there already */
      memcpy(dst + c0 * (int64_t)esz, src + c0 * (int64_t)esz, (size_t)(c1 - c0) * esz);
    memset(dst + c1 * (int64_t)esz, 0, (size_t)(n - c1) * esz);
  }
}

typedef struct trilu_job {
  const char *x;
  char *y;
  int64_t m, n;
  int upper;
  int64_t k;
  size_t esz;
} trilu_job;

static void trilu_range(void *ctx, int64_t s, int64_t e) {
  const trilu_job *j = ctx;
  trilu_rows(j->x, j->y, j->m, j->n, j->upper, j->k, j->esz, s, e);
}

static dvm_status *trilu(const dvm_kernel_args *a) {
  call_values cv;
  dvm_trilu_info p;
  dvm_status *st = begin(a, "trilu", 1, 2, 1, &cv);
  if (st) return st;
  st = dvm_trilu_infer(cv.v, cv.n, &p);
  values_free(&cv);
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  if (st || (st = dvm_cpu_check_shape("trilu", y, 0, x->rank, x->dims))) return st;
  int64_t total = dvm_tensor_numel(y), m = x->dims[x->rank - 2], n = x->dims[x->rank - 1];
  if (total == 0) return NULL;
  /* beyond the matrix, k changes nothing; clamped, i + k cannot overflow */
  int64_t k = p.k < -m ? -m : p.k > n ? n : p.k, nrows = total / n;
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  const char *px = dvm_tensor_ptr(x);
  char *py = dvm_tensor_ptr(y);
  trilu_job j = {px, py, m, n, p.upper, k, esz};
  dvm_par_for(threads_for(a, total), nrows, 1, trilu_range, &j);
  return NULL;
}

const dvm_kernel_def dvm_cpu_movement_kernels[] = {
    {"transpose", DVM_DEVICE_CPU, transpose, "transpose", .form = DVM_FORM_PERMUTED, .strings = 1},
    [K_GATHER] = {"gather", DVM_DEVICE_CPU, gather, "gather", .form = DVM_FORM_GATHER, .prepack = gather_prepack,
                  .prepack_replaces = 1, .strings = 1},
    {"gather_elements", DVM_DEVICE_CPU, gather_elements, "gather_elements", .strings = 1},
    {"slice", DVM_DEVICE_CPU, slice, "slice", .strings = 1, .form = DVM_FORM_SLICED},
    {"concat", DVM_DEVICE_CPU, concat, "concat", .strings = 1, .form = DVM_FORM_CONCAT},
    {"copy_into", DVM_DEVICE_CPU, copy_into, NULL, .strings = DVM_STRINGS_UPDATE},
    {"split", DVM_DEVICE_CPU, split, "split", .strings = 1, .form = DVM_FORM_SPLIT},
    {"expand", DVM_DEVICE_CPU, expand, "expand", .strings = 1},
    {"tile", DVM_DEVICE_CPU, tile, "tile", .strings = 1},
    {"pad", DVM_DEVICE_CPU, pad, "pad"},
    {"trilu", DVM_DEVICE_CPU, trilu, "trilu"},
    {"center_crop_pad", DVM_DEVICE_CPU, center_crop_pad, "center_crop_pad"},
    {"depth_to_space", DVM_DEVICE_CPU, depth_to_space, "depth_to_space"},
    {"space_to_depth", DVM_DEVICE_CPU, space_to_depth, "space_to_depth"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
