/* CPU kernels against references computed here with naive loops in double,
 * on random inputs, with outputs poisoned before each run so that an element
 * the kernel fails to write is caught. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "asm.h"
#include "harness.h"
#include "kernel.h"
#include "object.h"
#include "ops/cpu/isa.h"
#include "ops/cpu/nbits.h"
#include "ops/cpu/pgemm.h"
#include "ops/optable.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* A tensor of the shape written as "[2,3]" ("[]" is a scalar). */
static dvm_tensor *make(dvm_dtype dt, const char *shape) {
  int64_t dims[DVM_MAX_RANK];
  int rank = 0;
  for (const char *p = shape + 1; *p && *p != ']';) {
    char *end;
    dims[rank++] = strtoll(p, &end, 10);
    p = *end == ',' ? end + 1 : end;
  }
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(dt, rank, dims, &t));
  return t;
}

static double get(const dvm_tensor *t, int64_t i) {
  const void *p = dvm_tensor_ptr(t);
  switch (t->dtype) {
  case DVM_F32: return ((const float *)p)[i];
  case DVM_F64: return ((const double *)p)[i];
  case DVM_I32: return ((const int32_t *)p)[i];
  default: return (double)((const int64_t *)p)[i];
  }
}

static void set(dvm_tensor *t, int64_t i, double v) {
  void *p = dvm_tensor_ptr(t);
  switch (t->dtype) {
  case DVM_F32: ((float *)p)[i] = (float)v; break;
  case DVM_F64: ((double *)p)[i] = v; break;
  case DVM_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  default: ((int64_t *)p)[i] = (int64_t)v; break;
  }
}

/* Floats in [-2, 2); integers in [-1000, 1000], whose sums and products
 * double holds exactly. */
static void fill_random(dvm_tensor *t) {
  int64_t n = dvm_tensor_numel(t);
  int is_float = t->dtype == DVM_F32 || t->dtype == DVM_F64;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rnd();
    double unit = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
    set(t, i, is_float ? unit * 4 - 2 : (double)(r % 2001) - 1000);
  }
}

/* NaN for floats, 0xCD bytes for integers: values no correct run writes. */
static void poison(dvm_tensor *t) {
  int64_t n = dvm_tensor_numel(t);
  if (t->dtype == DVM_F32 || t->dtype == DVM_F64)
    for (int64_t i = 0; i < n; i++) set(t, i, NAN);
  else
    memset(dvm_tensor_ptr(t), 0xCD, dvm_tensor_nbytes(t));
}

static dvm_status *call(const char *name, dvm_tensor **in, int nin, dvm_tensor **out, int nout,
                        int threads) {
  const dvm_kernel_def *k = dvm_ops_find(name, DVM_DEVICE_CPU);
  if (!k) return dvm_status_new(DVM_NOT_FOUND, "no kernel %s", name);
  dvm_exec ex = {.threads = threads};
  dvm_kernel_args a = {.in = in, .nin = nin, .out = out, .nout = nout, .exec = &ex};
  return k->fn(&a);
}

static dvm_status *call2(const char *name, dvm_tensor *x, dvm_tensor *y, dvm_tensor *o,
                         int threads) {
  dvm_tensor *in[2] = {x, y}, *out[1] = {o};
  return call(name, in, 2, out, 1, threads);
}

static const char *fmt(const dvm_tensor *t, char *buf) {
  return dvm_shape_format(buf, 200, (dvm_dtype)t->dtype, t->rank, t->dims);
}

/* ---- add, mul ---------------------------------------------------------- */

/* The numpy broadcast of two shapes, written out independently of the
 * library's. */
static void ref_broadcast(const dvm_tensor *a, const dvm_tensor *b, int *rank, int64_t *dims) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    dims[i] = da == 1 ? db : da;
  }
  *rank = r;
}

/* Element index in t for output coordinates c (of rank r), broadcasting. */
static int64_t ref_index(const dvm_tensor *t, int r, const int64_t *c) {
  int64_t idx = 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dims[i];
    idx = idx * d + (d == 1 ? 0 : c[i + r - t->rank]);
  }
  return idx;
}

static void ref_binary(int mul, const dvm_tensor *a, const dvm_tensor *b, const dvm_tensor *o,
                       double *want) {
  int64_t n = dvm_tensor_numel(o), c[DVM_MAX_RANK];
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i;
    for (int d = o->rank - 1; d >= 0; d--) {
      c[d] = rest % o->dims[d];
      rest /= o->dims[d];
    }
    double x = get(a, ref_index(a, o->rank, c)), y = get(b, ref_index(b, o->rank, c));
    want[i] = mul ? x * y : x + y;
  }
}

/* Exact: f32 sums and products rounded from double are the f32 results. */
static int same(const dvm_tensor *o, int64_t i, double want) {
  return o->dtype == DVM_F32 ? get(o, i) == (double)(float)want : get(o, i) == want;
}

static void check_binary(const char *op, dvm_dtype dt, const char *sa, const char *sb,
                         int threads, int in_place) {
  dvm_tensor *a = make(dt, sa), *b = make(dt, sb), *o;
  int rank;
  int64_t dims[DVM_MAX_RANK];
  ref_broadcast(a, b, &rank, dims);
  CHECK_OK(dvm_tensor_create(dt, rank, dims, &o));
  fill_random(a);
  fill_random(b);
  int64_t n = dvm_tensor_numel(o);
  double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
  ref_binary(strcmp(op, "mul") == 0, a, b, o, want);
  if (in_place) { /* the output is the first input's memory */
    dvm_tensor_release(o);
    o = a;
    dvm_tensor_retain(o);
  } else {
    poison(o);
  }
  dvm_status *st = call2(op, a, b, o, threads);
  int64_t bad = -1;
  for (int64_t i = 0; !st && i < n && bad < 0; i++)
    if (!same(o, i, want[i])) bad = i;
  harness_checks++;
  if (st || bad >= 0) {
    char b1[200], b2[200];
    harness_failures++;
    fprintf(stderr, "%s %s %s, threads %d%s: ", op, fmt(a, b1), fmt(b, b2), threads,
            in_place ? ", in place" : "");
    if (st)
      fprintf(stderr, "%s\n", dvm_status_message(st));
    else
      fprintf(stderr, "element %lld is %g, want %g\n", (long long)bad, get(o, bad), want[bad]);
  }
  dvm_status_free(st);
  free(want);
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);
}

static const char *const binary_shapes[][2] = {
    /* same shape */
    {"[]", "[]"}, {"[1]", "[1]"}, {"[7]", "[7]"}, {"[13]", "[13]"}, {"[31]", "[31]"},
    {"[65]", "[65]"}, {"[257]", "[257]"}, {"[1025]", "[1025]"}, {"[7,13]", "[7,13]"},
    {"[3,5,7]", "[3,5,7]"}, {"[2,3,1,5]", "[2,3,1,5]"},
    {"[2,1,3,1,2,1,2,3]", "[2,1,3,1,2,1,2,3]"},
    /* scalar */
    {"[]", "[7,13]"}, {"[65,31]", "[]"}, {"[1]", "[1025]"}, {"[1,1]", "[31,7]"},
    {"[257]", "[1]"}, {"[]", "[1,1]"},
    /* row */
    {"[7,13]", "[13]"}, {"[31]", "[7,31]"}, {"[65,257]", "[257]"}, {"[13,65]", "[1,65]"},
    {"[3,7,13]", "[1,1,13]"},
    /* column */
    {"[7,13]", "[7,1]"}, {"[31,1]", "[31,7]"}, {"[257,65]", "[257,1]"}, {"[3,7,13]", "[3,7,1]"},
    /* rank extension */
    {"[2,3,4]", "[3,4]"}, {"[5]", "[2,3,5]"}, {"[4,3,5]", "[3,5]"}, {"[2,7,13]", "[7,13]"},
    /* both sides, and broadcasts in the middle */
    {"[7,1]", "[1,13]"}, {"[1,13]", "[7,1]"}, {"[3,1,5]", "[4,1]"},
    {"[2,1,3,1]", "[1,4,1,5]"}, {"[65,1,7]", "[1,31,1]"}, {"[1,1025]", "[13,1]"},
    {"[4,1,5]", "[4,3,5]"}, {"[2,3,1,5]", "[2,1,7,1]"}, {"[8,1,6,1,4,1,2,1]", "[7,1,5,1,3,1,2]"},
    /* zero-sized */
    {"[0]", "[0]"}, {"[0]", "[]"}, {"[0,3]", "[3]"}, {"[0,3]", "[1,3]"}, {"[2,0]", "[2,1]"},
    {"[1,0]", "[5,1]"}, {"[0,7]", "[0,1]"}, {"[3,0,2]", "[1,2]"},
    /* big enough to be split between threads, mid-row */
    {"[1025,257]", "[1025,257]"}, {"[1025,257]", "[257]"}, {"[1025,257]", "[1025,1]"},
    {"[33,1,129]", "[1,65,129]"}, {"[70001]", "[]"}, {"[70001]", "[70001]"},
};

static void test_binary(void) {
  static const char *const ops[] = {"add", "mul"};
  static const dvm_dtype dts[] = {DVM_F32, DVM_F64, DVM_I32, DVM_I64};
  static const int threads[] = {1, 3};
  for (int op = 0; op < 2; op++)
    for (int d = 0; d < 4; d++)
      for (size_t s = 0; s < sizeof binary_shapes / sizeof binary_shapes[0]; s++)
        for (int t = 0; t < 2; t++)
          check_binary(ops[op], dts[d], binary_shapes[s][0], binary_shapes[s][1], threads[t], 0);
  /* in place: output and first input are one tensor */
  for (int d = 0; d < 4; d++) {
    check_binary("add", dts[d], "[1025,257]", "[1025,257]", 2, 1);
    check_binary("mul", dts[d], "[31]", "[31]", 1, 1);
  }
}

/* Integers wrap, as in numpy; computed here in unsigned arithmetic. */
static void test_binary_wrap(void) {
  dvm_tensor *a = make(DVM_I32, "[3]"), *b = make(DVM_I32, "[3]"), *o = make(DVM_I32, "[3]");
  int32_t *pa = dvm_tensor_ptr(a), *pb = dvm_tensor_ptr(b), *po = dvm_tensor_ptr(o);
  const int32_t x[3] = {INT32_MAX, INT32_MIN, 65536}, y[3] = {1, -1, 65536};
  memcpy(pa, x, sizeof x);
  memcpy(pb, y, sizeof y);
  CHECK_OK(call2("add", a, b, o, 1));
  for (int i = 0; i < 3; i++) CHECK(po[i] == (int32_t)((uint32_t)x[i] + (uint32_t)y[i]));
  CHECK_OK(call2("mul", a, b, o, 1));
  for (int i = 0; i < 3; i++) CHECK(po[i] == (int32_t)((uint32_t)x[i] * (uint32_t)y[i]));
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);
}

static void test_binary_errors(void) {
  dvm_tensor *f23 = make(DVM_F32, "[2,3]"), *f3 = make(DVM_F32, "[3]"), *f4 = make(DVM_F32, "[4]");
  dvm_tensor *i3 = make(DVM_I32, "[3]"), *b23 = make(DVM_BOOL, "[2,3]");
  dvm_tensor *f32_ = make(DVM_F32, "[3,2]"), *f123 = make(DVM_F32, "[1,2,3]");
  dvm_tensor *f223 = make(DVM_F32, "[2,2,3]");
  CHECK_ERR(call2("add", f23, i3, f23, 1), DVM_INVALID_ARGUMENT,
            "add: dtypes f32, i32 -> f32: want one of f32, f16, bf16, f64, i8, i16, i32, i64, u8, u16, u32, u64, the same for all");
  CHECK_ERR(call2("mul", f3, f3, i3, 1), DVM_INVALID_ARGUMENT, "mul: dtypes f32, f32 -> i32");
  CHECK_ERR(call2("add", b23, b23, b23, 1), DVM_INVALID_ARGUMENT, "add: dtypes bool, bool -> bool");
  CHECK_ERR(call2("add", f23, f4, f23, 1), DVM_INVALID_ARGUMENT,
            "add: broadcast: [2,3] vs [4]: dim -1 3 != 4");
  CHECK_ERR(call2("mul", f23, f3, f32_, 1), DVM_INVALID_ARGUMENT,
            "mul: output [3,2] != [2,3], the broadcast of [2,3] and [3]");
  /* leading 1s past the inputs' rank are accepted (a folded constant's rank), other dims not */
  CHECK_OK(call2("add", f23, f3, f123, 1));
  CHECK_ERR(call2("add", f23, f3, f223, 1), DVM_INVALID_ARGUMENT,
            "add: output [2,2,3] != [2,3], the broadcast of [2,3] and [3]");
  CHECK_ERR(call2("add", f23, f3, f3, 1), DVM_INVALID_ARGUMENT, "add: output [3] != [2,3]");
  CHECK_ERR(call2("add", f23, NULL, f23, 1), DVM_INVALID_ARGUMENT, "add: input 1 is missing");
  CHECK_ERR(call2("add", f23, f23, NULL, 1), DVM_INVALID_ARGUMENT, "add: output 0 is missing");
  dvm_tensor *in[3] = {f23, f23, f23};
  CHECK_ERR(call("add", in, 1, in, 1, 1), DVM_INVALID_ARGUMENT,
            "add: takes 2 inputs and 1 output, got 1 and 1");
  CHECK_ERR(call("mul", in, 2, in, 2, 1), DVM_INVALID_ARGUMENT,
            "mul: takes 2 inputs and 1 output, got 2 and 2");
  /* a tensor that claims to live on another device is refused, not read */
  f4->storage->device = DVM_DEVICE_CUDA;
  CHECK_ERR(call2("add", f4, f4, f4, 1), DVM_INVALID_ARGUMENT,
            "add: input 0 is on cuda, the kernel runs on cpu");
  f4->storage->device = DVM_DEVICE_CPU;
  /* no exec context: one thread */
  dvm_tensor *big = make(DVM_F32, "[100000]");
  fill_random(big);
  dvm_tensor *bin[2] = {big, big}, *bout[1] = {big};
  dvm_kernel_args args = {.in = bin, .nin = 2, .out = bout, .nout = 1};
  CHECK_OK(dvm_ops_find("add", DVM_DEVICE_CPU)->fn(&args));
  dvm_tensor *all[] = {f23, f3, f4, i3, b23, f32_, f123, f223, big};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dvm_tensor_release(all[i]);
}

/* ---- matmul ------------------------------------------------------------ */

static void check_matmul(const char *sa, const char *sb, const char *so, int threads) {
  dvm_tensor *a = make(DVM_F32, sa), *b = make(DVM_F32, sb), *o = make(DVM_F32, so);
  fill_random(a);
  fill_random(b);
  poison(o);
  /* operands as [batch..., M, K] and [batch..., K, N], the output as
   * [batch..., M, N], batch aligned from the right */
  int ra = a->rank, rb = b->rank;
  int64_t m = ra >= 2 ? a->dims[ra - 2] : 1, k = a->dims[ra - 1], n = rb >= 2 ? b->dims[rb - 1] : 1;
  int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, br = ba > bb ? ba : bb;
  int64_t bdims[DVM_MAX_RANK], batch = 1;
  for (int i = 0; i < br; i++) {
    int ia = i - (br - ba), ib = i - (br - bb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    bdims[i] = da == 1 ? db : da;
    batch *= bdims[i];
  }
  const float *pa = dvm_tensor_ptr(a), *pb = dvm_tensor_ptr(b), *po = dvm_tensor_ptr(o);
  dvm_status *st = call2("matmul", a, b, o, threads);
  double worst = 0;
  int64_t bad = -1;
  for (int64_t q = 0; !st && q < batch && bad < 0; q++) {
    int64_t c[DVM_MAX_RANK], rest = q, qa = 0, qb = 0;
    for (int i = br - 1; i >= 0; i--) {
      c[i] = rest % bdims[i];
      rest /= bdims[i];
    }
    for (int i = 0; i < ba; i++) qa = qa * a->dims[i] + (a->dims[i] == 1 ? 0 : c[i + br - ba]);
    for (int i = 0; i < bb; i++) qb = qb * b->dims[i] + (b->dims[i] == 1 ? 0 : c[i + br - bb]);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < k; l++) {
          double p = (double)pa[(qa * m + i) * k + l] * pb[(qb * k + l) * n + j];
          sum += p;
          mag += fabs(p);
        }
        int64_t at = (q * m + i) * n + j;
        double err = fabs(po[at] - sum), tol = 2.0 * (double)(k + 1) * FLT_EPSILON * mag;
        if (!(err <= tol)) bad = at; /* NaN (unwritten) fails too */
        if (err > worst) worst = err;
      }
  }
  harness_checks++;
  if (st || bad >= 0) {
    harness_failures++;
    fprintf(stderr, "matmul %s x %s -> %s, threads %d: ", sa, sb, so, threads);
    if (st)
      fprintf(stderr, "%s\n", dvm_status_message(st));
    else
      fprintf(stderr, "element %lld is %g (worst error %g)\n", (long long)bad, po[bad], worst);
  }
  dvm_status_free(st);
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);
}

static void test_matmul_sizes(void) {
  static const int sizes[] = {1, 7, 64, 65, 129};
  char sa[64], sb[64], so[64];
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++)
      for (int l = 0; l < 5; l++) {
        int m = sizes[i], n = sizes[j], k = sizes[l];
        snprintf(sa, sizeof sa, "[%d,%d]", m, k);
        snprintf(sb, sizeof sb, "[%d,%d]", k, n);
        snprintf(so, sizeof so, "[%d,%d]", m, n);
        check_matmul(sa, sb, so, 1 + (i + j + l) % 2);
      }
}

static const char *const matmul_shapes[][3] = {
    /* batched, one right operand for all: a single product */
    {"[3,7,13]", "[13,5]", "[3,7,5]"}, {"[3,7,13]", "[1,13,5]", "[3,7,5]"},
    {"[2,3,65,129]", "[129,64]", "[2,3,65,64]"},
    /* batched with broadcast batch dims */
    {"[2,3,7,13]", "[3,13,5]", "[2,3,7,5]"}, {"[7,13]", "[4,13,5]", "[4,7,5]"},
    {"[2,1,7,13]", "[1,3,13,5]", "[2,3,7,5]"}, {"[4,1,7,13]", "[4,13,5]", "[4,4,7,5]"},
    {"[1,3,7,13]", "[2,1,13,5]", "[2,3,7,5]"}, {"[2,65,129]", "[2,129,64]", "[2,65,64]"},
    {"[1,1,1,1,1,1,7,13]", "[13,5]", "[1,1,1,1,1,1,7,5]"},
    {"[2,1,2,1,2,1,7,13]", "[1,2,1,2,1,2,13,5]", "[2,2,2,2,2,2,7,5]"},
    /* 1-D operands */
    {"[13]", "[13,5]", "[5]"}, {"[7,13]", "[13]", "[7]"}, {"[13]", "[13]", "[]"},
    {"[13]", "[3,13,5]", "[3,5]"}, {"[2,3,7,13]", "[13]", "[2,3,7]"}, {"[129]", "[129]", "[]"},
    /* zero-sized */
    {"[0,13]", "[13,5]", "[0,5]"}, {"[7,13]", "[13,0]", "[7,0]"}, {"[7,0]", "[0,5]", "[7,5]"},
    {"[0,7,13]", "[13,5]", "[0,7,5]"}, {"[3,7,0]", "[3,0,5]", "[3,7,5]"},
    {"[2,0,7,13]", "[13,5]", "[2,0,7,5]"}, {"[0]", "[0]", "[]"}, {"[0]", "[0,5]", "[5]"},
};

static void test_matmul_batched(void) {
  for (size_t i = 0; i < sizeof matmul_shapes / sizeof matmul_shapes[0]; i++)
    for (int t = 1; t <= 2; t++)
      check_matmul(matmul_shapes[i][0], matmul_shapes[i][1], matmul_shapes[i][2], t);
}

static void test_matmul_errors(void) {
  dvm_tensor *a = make(DVM_F32, "[2,3]"), *b = make(DVM_F32, "[4,5]"), *o = make(DVM_F32, "[2,5]");
  CHECK_ERR(call2("matmul", a, b, o, 1), DVM_INVALID_ARGUMENT,
            "matmul: [2,3] x [4,5]: inner dims 3 != 4");
  dvm_tensor *b34 = make(DVM_F32, "[3,4]"), *o42 = make(DVM_F32, "[4,2]");
  dvm_tensor *o24 = make(DVM_F32, "[2,4]");
  CHECK_ERR(call2("matmul", a, b34, o42, 1), DVM_INVALID_ARGUMENT,
            "matmul: output [4,2] != [2,4], the product of [2,3] x [3,4]");
  CHECK_ERR(call2("matmul", a, b34, o, 1), DVM_INVALID_ARGUMENT,
            "matmul: output [2,5] != [2,4]");
  dvm_tensor *d = make(DVM_F64, "[2,3]"), *d34 = make(DVM_F64, "[3,4]");
  dvm_tensor *d24 = make(DVM_F64, "[2,4]");
  CHECK_ERR(call2("matmul", a, d34, o24, 1), DVM_INVALID_ARGUMENT,
            "matmul: dtypes f32, f64 -> f32: want f32, f16 and bf16 (computed in f32), or f64 throughout");
  CHECK_ERR(call2("matmul", d, d34, o24, 1), DVM_INVALID_ARGUMENT, "matmul: dtypes f64, f64 -> f32");
  dvm_tensor *s = make(DVM_F32, "[]");
  CHECK_ERR(call2("matmul", s, b34, o24, 1), DVM_INVALID_ARGUMENT,
            "matmul: [] x [3,4]: operands need rank >= 1");
  dvm_tensor *x = make(DVM_F32, "[2,3,4]"), *y = make(DVM_F32, "[5,4,6]");
  dvm_tensor *z = make(DVM_F32, "[2,3,6]");
  CHECK_ERR(call2("matmul", x, y, z, 1), DVM_INVALID_ARGUMENT,
            "matmul: [2,3,4] x [5,4,6]: batch dim -3 2 != 5");
  dvm_tensor *in[2] = {a, b34}, *out[2] = {o24, o24};
  CHECK_ERR(call("matmul", in, 2, out, 2, 1), DVM_INVALID_ARGUMENT,
            "matmul: takes 2 inputs and 1 output, got 2 and 2");
  CHECK_ERR(call2("matmul", NULL, b34, o24, 1), DVM_INVALID_ARGUMENT, "matmul: input 0 is missing");
  dvm_tensor *all[] = {a, b, o, b34, o42, o24, d, d34, d24, s, x, y, z};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dvm_tensor_release(all[i]);
}

/* The prepack hook: linking a module packs matmul's constant B when `const`
 * loads it into the register the invoke reads as input 1, and not when
 * another write replaced it first or the constant feeds input 0. */
static void test_prepack(void) {
  char src[2048], hex[60 * 8 + 1]; /* 60 floats of zeros */
  memset(hex, '0', 60 * 8);
  hex[60 * 8] = 0;
  snprintf(src, sizeof src,
           ".kernel matmul cpu 1\n"
           ".const w f32 [3, 20] x\"%s\"\n"
           ".const v f32 [3, 20] x\"%s\"\n"
           ".func main regs=5\n"
           "  .param x tensor f32 [2, 3]\n"
           "  .result y any\n"
           "  imm r1, 2\n  imm r2, 20\n  make_shape r3, (r1, r2)\n"
           "  alloc r4, f32, r3, cpu\n"
           "  const r1, $w\n"
           "  invoke matmul, -, (r4), (r0, r1), ()\n"
           "  const r2, $v\n  move r2, r0\n"
           "  invoke matmul, -, (r4), (r0, r2), ()\n"
           "  invoke matmul, -, (r4), (r1, r0), ()\n"
           "  ret (r4)\n"
           ".end\n",
           hex, hex);
  dvm_module *built = NULL, *m = NULL;
  uint8_t *bytes = NULL;
  size_t size = 0;
  CHECK_OK(dvm_asm_parse(src, strlen(src), "prepack.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, &m));
  const dvm_kernel_def *mm = dvm_ops_find("matmul", DVM_DEVICE_CPU);
  int packs = dvm_isa_chosen() != DVM_ISA_GENERIC;
  CHECK(mm->prepack != NULL);
  CHECK((dvm_tensor_packed(m->consts[0].tensor, mm, 1) != NULL) == packs);
  CHECK(dvm_tensor_packed(m->consts[0].tensor, mm, 0) == NULL);
  CHECK(dvm_tensor_packed(m->consts[1].tensor, mm, 1) == NULL);
  dvm_module_release(m);
  dvm_module_release(built);
  free(bytes);

  /* gemm packs B for the transB an `imm` gives (w: 1), both ways when the
   * register's value is not known at link (v: a move) */
  snprintf(src, sizeof src,
           ".kernel gemm cpu 1\n"
           ".const w f32 [20, 3] x\"%s\"\n"
           ".const v f32 [20, 3] x\"%s\"\n"
           ".func main regs=11\n"
           "  .param x tensor f32 [2, 3]\n"
           "  .result y any\n"
           "  imm r1, 2\n  imm r2, 20\n  make_shape r3, (r1, r2)\n"
           "  alloc r4, f32, r3, cpu\n"
           "  imm r5, 0\n  imm r6, 1\n  fimm r7, 1.0\n  fimm r8, 0.0\n"
           "  const r9, $w\n"
           "  invoke gemm, -, (r4), (r0, r9), (r5, r6, r7, r8)\n"
           "  const r10, $v\n  move r6, r6\n"
           "  invoke gemm, -, (r4), (r0, r10), (r5, r6, r7, r8)\n"
           "  ret (r4)\n"
           ".end\n",
           hex, hex);
  CHECK_OK(dvm_asm_parse(src, strlen(src), "prepack_gemm.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, &m));
  const dvm_kernel_def *gm = dvm_ops_find("gemm", DVM_DEVICE_CPU);
  const dvm_gemm_packs *w = dvm_tensor_packed(m->consts[0].tensor, gm, 1);
  const dvm_gemm_packs *v = dvm_tensor_packed(m->consts[1].tensor, gm, 1);
  CHECK((w != NULL) == packs && (v != NULL) == packs);
  if (w) CHECK(w->b[0] == NULL && w->b[1] != NULL);
  if (v) CHECK(v->b[0] != NULL && v->b[1] != NULL);
  dvm_module_release(m);
  dvm_module_release(built);
  free(bytes);
}

/* Each packed-GEMM variant this CPU has, against a double-precision
 * reference: row counts across the block splits and A's packing (packed
 * where A's rows are 4 KiB apart, K 1024, and from 96 rows at every K:
 * 95 is read in place; 4 x 4 transposes with an overlapping last group,
 * leftover steps of K), panel tails, A plain and transposed, B plain
 * and transposed, alpha and beta, one and two threads. A's rows 1024
 * floats apart at other K (packed, with leftover steps of K) are
 * test_pgemm_strided_a's. */
/* A's rows 1024 floats apart (4 KiB: packed) at K not a multiple of 4:
 * the packing's leftover steps, against a double-precision reference. */
static void test_pgemm_strided_a(void) {
  static const int64_t ms[] = {2, 7, 13, 30}, ks[] = {1, 3, 9, 70};
  const int64_t n = 17, sm = 1024;
  float *a = malloc(sizeof(float) * (size_t)(30 * sm)), *b = malloc(sizeof(float) * 70 * 17);
  float *c = malloc(sizeof(float) * 30 * 17);
  for (int64_t i = 0; i < 30 * sm; i++) a[i] = (float)((int64_t)(rnd() % 13) - 6) / 4;
  for (int64_t i = 0; i < 70 * 17; i++) b[i] = (float)((int64_t)(rnd() % 17) - 8) / 8;
  for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
    int64_t k = ks[ki];
    dvm_pgemm_b *pb = dvm_pgemm_pack(b, k, n, n, 1);
    if (!pb) continue; /* no packed path on this CPU (or DVM_CPU_ISA=generic) */
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
      int64_t m = ms[mi], bad = 0;
      dvm_pgemm_run(pb, m, a, sm, 1, 1, 0, c, n, 2, NULL);
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          double want = 0;
          for (int64_t l = 0; l < k; l++) want += (double)a[i * sm + l] * b[l * n + j];
          bad += fabs(c[i * n + j] - want) > 1e-4 * (1 + fabs(want));
        }
      if (bad) fprintf(stderr, "pgemm A rows %lld apart m=%lld k=%lld: %lld wrong\n", (long long)sm, (long long)m,
                       (long long)k, (long long)bad);
      CHECK(bad == 0);
    }
    dvm_pgemm_free(pb);
  }
  free(a);
  free(b);
  free(c);
}

static void test_pgemm_variants(void) {
  static const int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 25, 95, 96, 97, 131};
  static const int64_t ns[] = {1, 15, 16, 17, 31, 32, 33, 100}, ks[] = {1, 3, 9, 70, 1024};
  int ran = 0;
  for (int isa = DVM_ISA_AVX2; isa < DVM_ISA_COUNT; isa++) {
    if (!dvm_isa_supported((dvm_isa)isa)) {
      CHECK(dvm_pgemm_pack_isa((dvm_isa)isa, (const float[]){1}, 1, 1, 1, 1) == NULL);
      continue;
    }
    ran++;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
      for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
        for (int tb = 0; tb < 2; tb++) {
          int64_t k = ks[ki], n = ns[ni], mmax = 131;
          if (k == 1024 && n % 16 != 1) continue; /* the long K at two panel tails is enough */
          float *b = malloc(sizeof(float) * (size_t)(k * n)), *a = malloc(sizeof(float) * (size_t)(mmax * k));
          float *c = malloc(sizeof(float) * (size_t)(mmax * n));
          for (int64_t i = 0; i < k * n; i++) b[i] = (float)((int64_t)(rnd() % 17) - 8) / 8;
          for (int64_t i = 0; i < mmax * k; i++) a[i] = (float)((int64_t)(rnd() % 13) - 6) / 4;
          /* B [k, n] at b[l * n + j], or stored transposed [n, k] at b[j * k + l] */
          int64_t sk = tb ? 1 : n, sn = tb ? k : 1;
          dvm_pgemm_b *pb = dvm_pgemm_pack_isa((dvm_isa)isa, b, k, n, sk, sn);
          CHECK(pb && (int)dvm_pgemm_isa(pb) == isa && dvm_pgemm_k(pb) == k && dvm_pgemm_n(pb) == n);
          for (size_t mi = 0; pb && mi < sizeof ms / sizeof *ms; mi++) {
            int64_t m = ms[mi], ta = (int64_t)(mi + ni) % 2;
            /* A [m, k] at a[i * k + l], or stored transposed [k, m] at a[l * m + i] */
            int64_t am = ta ? 1 : k, ak = ta ? m : 1;
            float alpha = mi % 2 ? 0.5f : 1, beta = mi % 3 == 1 ? -2 : 0;
            for (int64_t i = 0; i < m * n; i++) c[i] = (float)(i % 5);
            dvm_pgemm_run(pb, m, a, am, ak, alpha, beta, c, n, 1 + (int)(mi % 2), NULL);
            int bad = 0;
            for (int64_t i = 0; i < m; i++)
              for (int64_t j = 0; j < n; j++) {
                double want = beta * (double)((i * n + j) % 5);
                double dot = 0;
                for (int64_t l = 0; l < k; l++) dot += (double)a[i * am + l * ak] * b[l * sk + j * sn];
                want += alpha * dot;
                bad += fabs(c[i * n + j] - want) > 1e-4 * (1 + fabs(want));
              }
            if (bad)
              fprintf(stderr, "pgemm %s m=%lld k=%lld n=%lld transA=%lld transB=%d: %d wrong\n",
                      dvm_isa_name((dvm_isa)isa), (long long)m, (long long)k, (long long)n, (long long)ta, tb,
                      bad);
            CHECK(bad == 0);
          }
          dvm_pgemm_free(pb);
          free(a);
          free(b);
          free(c);
        }
  }
  /* the chosen variant is supported, and is the best one unless
   * DVM_CPU_ISA names a lower one (meson runs this test both ways) */
  dvm_isa chosen = dvm_isa_chosen();
  CHECK(dvm_isa_supported(chosen));
  const char *want = getenv("DVM_CPU_ISA");
  if (want && dvm_isa_supported(DVM_ISA_AVX2) && strcmp(want, "avx2") == 0) CHECK(chosen == DVM_ISA_AVX2);
  if (!want) CHECK(chosen + 1 == DVM_ISA_COUNT || !dvm_isa_supported((dvm_isa)(chosen + 1)));
  printf("packed GEMM variants run: %d (chosen: %s)\n", ran, dvm_isa_name(chosen));
}

/* MatMulNBits' AMX tiles (16 rows) against its VNNI tiles (4 rows at a
 * time) on the same packed weights: both sum the same i32 dots and scale
 * them in the same order, so every bit must agree. Needs a CPU with AMX. */
static void test_nbits_amx(void) {
  if (!dvm_isa_amx_int8()) {
    printf("MatMulNBits AMX tiles: not checked (no AMX here, or DVM_CPU_AMX=0)\n");
    return;
  }
  static const int64_t blocks[] = {16, 32, 64, 128, 256};
  int ran = 0;
  for (int bits = 4; bits <= 8; bits += 4)
    for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++)
      for (int zp = 0; zp < 2; zp++)
        for (int r = 12; r <= DVM_NBITS_AMX_ROWS; r += 4) {
          const int64_t block = blocks[bi], k = 3 * block - 5, n = 16, kb = 3, kp = kb * block;
          CHECK(dvm_nbits_rows(1, r) == DVM_NBITS_AMX_ROWS);
          uint8_t *codes = malloc((size_t)(n * kb * block * bits / 8));
          float *scales = malloc(sizeof(float) * (size_t)(n * kb)), *zps = malloc(sizeof(float) * (size_t)(n * kb));
          int8_t *av = malloc((size_t)(r * kp));
          float *asc = malloc(sizeof(float) * (size_t)(r * kb)), *asum = malloc(sizeof(float) * (size_t)(r * kb));
          for (int64_t i = 0; i < n * kb * block * bits / 8; i++) codes[i] = (uint8_t)rnd();
          for (int64_t i = 0; i < n * kb; i++) {
            scales[i] = (float)(rnd() % 1000 + 1) / 4096.f;
            zps[i] = (float)(rnd() % (1u << bits));
          }
          for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < kb; j++) {
              int32_t sum = 0;
              for (int64_t t = 0; t < block; t++) {
                int8_t v = j * block + t < k ? (int8_t)(rnd() % 255 - 127) : 0;
                av[i * kp + j * block + t] = v;
                sum += v;
              }
              asc[i * kb + j] = (float)(rnd() % 1000 + 1) / 8192.f;
              asum[i * kb + j] = (float)sum;
            }
          dvm_nbits_b *pb = dvm_nbits_pack_b(codes, k, n, bits, block);
          dvm_nbits_q *ps = dvm_nbits_pack_q(scales, NULL, 0, n, kb);
          dvm_nbits_q *pz = zp ? dvm_nbits_pack_q(zps, NULL, 0, n, kb) : NULL;
          CHECK(pb && ps && (pz || !zp));
          const dvm_nbits_a a = {.v = av, .scale = asc, .sum = asum, .kp = kp};
          uint8_t *scratch = aligned_alloc(64, dvm_nbits_scratch(pb, 1, r) + 64);
          float amx[DVM_NBITS_AMX_ROWS * 16], vnni[DVM_NBITS_AMX_ROWS * 16];
          const float zdef = (float)(1 << (bits - 1));
          dvm_nbits_tile(1, pb, ps, pz, zdef, &a, 0, r, 0, scratch, amx, 16);
          for (int i0 = 0; i0 < r; i0 += DVM_NBITS_MR)
            dvm_nbits_tile(1, pb, ps, pz, zdef, &a, i0, DVM_NBITS_MR, 0, NULL, vnni + i0 * 16, 16);
          int differ = memcmp(amx, vnni, sizeof(float) * (size_t)(r * 16)) != 0;
          if (differ)
            fprintf(stderr, "nbits AMX bits=%d block=%lld zp=%d rows=%d: differs from the VNNI tiles\n", bits,
                    (long long)block, zp, r);
          CHECK(!differ);
          ran++;
          free(scratch);
          dvm_nbits_b_free(pb);
          dvm_nbits_q_free(ps);
          dvm_nbits_q_free(pz);
          free(codes), free(scales), free(zps), free(av), free(asc), free(asum);
        }
  printf("MatMulNBits AMX tiles checked against VNNI: %d cases\n", ran);
}

static void test_table(void) {
  CHECK(dvm_ops_find("add", DVM_DEVICE_CPU) != NULL);
  CHECK(dvm_ops_find("mul", DVM_DEVICE_CPU) != NULL);
  CHECK(dvm_ops_find("matmul", DVM_DEVICE_CPU) != NULL);
  CHECK(dvm_ops_find("add", DVM_DEVICE_CUDA) == NULL);
  CHECK(dvm_ops_find("no such kernel", DVM_DEVICE_CPU) == NULL);
  const dvm_kernel_def *k = dvm_ops_find("mul", DVM_DEVICE_CPU);
  CHECK(k && strcmp(k->name, "mul") == 0 && k->device == DVM_DEVICE_CPU);
}

int main(void) {
  test_table();
  test_binary();
  test_binary_wrap();
  test_binary_errors();
  test_matmul_sizes();
  test_matmul_batched();
  test_matmul_errors();
  test_prepack();
  test_pgemm_variants();
  test_pgemm_strided_a();
  test_nbits_amx();
  return harness_finish("kernels");
}
