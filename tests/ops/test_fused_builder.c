/* The fused program builder (ops/cpu/fused.h): the bytes it encodes (those
 * of docs/fused.md's example), its register assignment, every mistake it
 * reports, and programs it builds run by the kernel. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "kernel.h"
#include "object.h"
#include "ops/cpu/fused.h"
#include "ops/optable.h"

/* docs/fused.md, section 8 */
static const char gelu_hex[] =
    "44564d46010003010400070000000000000000000000000001000000000000000000000000000000"
    "01010100000000000000000000000000080200010000000000000000000000000103020000000000"
    "00000000000000000602020300000000000000000000000020020200000000000000000000000000"
    "02000200000000000000000000000000";

static int same_hex(const void *p, size_t n, const char *hex) {
  if (strlen(hex) != 2 * n) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v != ((const uint8_t *)p)[i]) return 0;
  }
  return 1;
}

static void test_docs_example(void) {
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  int x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  int w = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  int y = dvm_fused_op2(&b, DVM_FUSED_MUL, x, w);
  int bias = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F32);
  y = dvm_fused_op2(&b, DVM_FUSED_ADD, y, bias);
  dvm_fused_store(&b, 0, dvm_fused_op1(&b, DVM_FUSED_GELU, y));
  void *p;
  size_t n;
  CHECK_OK(dvm_fused_builder_finish(&b, &p, &n));
  CHECK(n == 136 && same_hex(p, n, gelu_hex));
  CHECK_OK(dvm_fused_validate(p, n));
  free(p);
}

/* A chain of 40 unary ops on one value needs two registers: the load's own
 * and one that every op writes over its operand. */
static void test_register_reuse(void) {
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  int v = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F32);
  for (int i = 0; i < 40; i++) v = dvm_fused_op1(&b, i % 2 ? DVM_FUSED_TANH : DVM_FUSED_NEG, v);
  dvm_fused_store(&b, 0, v);
  void *p;
  size_t n;
  CHECK_OK(dvm_fused_builder_finish(&b, &p, &n));
  CHECK(n > 8 && ((uint8_t *)p)[8] == 2);
  free(p);
  /* 33 values live at once do not fit */
  dvm_fused_builder_init(&b);
  int in = dvm_fused_input(&b, DVM_F32), vals[33];
  dvm_fused_output(&b, DVM_F32);
  for (int i = 0; i < 33; i++) vals[i] = dvm_fused_load(&b, in);
  v = vals[0];
  for (int i = 1; i < 33; i++) v = dvm_fused_op2(&b, DVM_FUSED_ADD, v, vals[i]);
  dvm_fused_store(&b, 0, v);
  CHECK_ERR(dvm_fused_builder_finish(&b, &p, &n), DVM_INVALID_ARGUMENT,
            "fused builder: more than 32 registers live at instruction 32");
  CHECK(p == NULL && n == 0);
}

/* Each mistake is kept; calls after it return -1; finish returns it. */
static void test_mistakes(void) {
  dvm_fused_builder b;
  void *p;
  size_t n;
  struct {
    int what;
    const char *message;
  } cases[] = {
      {0, "fused builder: add of f32 and i64 values"},
      {1, "fused builder: exp does not take i64 values"},
      {2, "fused builder: where of f32, f32 and f32 values: want bool, then two of one type"},
      {3, "fused builder: store: output 0 is i32, the value f32"},
      {4, "fused builder: store: no output 1"},
      {5, "fused builder: load: no input 2"},
      {6, "fused builder: input 1: dtype f64 is not f32, f16, bf16, i32, i64 or bool"},
      {7, "fused builder: mul: no value 99"},
      {8, "fused builder: opcode 2 is not a unary op"},
      {9, "fused builder: a program needs an input and an output"},
      {10, "fused builder: cast to dtype 6: want f32, i64 or bool"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    dvm_fused_builder_init(&b);
    int x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
    int i = cases[k].what != 9 ? dvm_fused_cast(&b, x, DVM_I64) : 0;
    if (cases[k].what != 9) dvm_fused_output(&b, cases[k].what == 3 ? DVM_I32 : DVM_F32);
    switch (cases[k].what) {
    case 0: CHECK(dvm_fused_op2(&b, DVM_FUSED_ADD, x, i) == -1); break;
    case 1: CHECK(dvm_fused_op1(&b, DVM_FUSED_EXP, i) == -1); break;
    case 2: CHECK(dvm_fused_where(&b, x, x, x) == -1); break;
    case 3: dvm_fused_store(&b, 0, x); break;
    case 4: dvm_fused_store(&b, 1, x); break;
    case 5: CHECK(dvm_fused_load(&b, 2) == -1); break;
    case 6: CHECK(dvm_fused_input(&b, DVM_F64) == -1); break;
    case 7: CHECK(dvm_fused_op2(&b, DVM_FUSED_MUL, x, 99) == -1); break;
    case 8: CHECK(dvm_fused_op1(&b, DVM_FUSED_STORE, x) == -1); break;
    case 10: CHECK(dvm_fused_cast(&b, x, DVM_I32) == -1); break;
    }
    /* sticky: later calls do nothing */
    if (cases[k].what != 9) CHECK(dvm_fused_op1(&b, DVM_FUSED_NEG, x) == -1);
    CHECK_ERR(dvm_fused_builder_finish(&b, &p, &n), DVM_INVALID_ARGUMENT, cases[k].message);
  }
}

static dvm_tensor *vec(dvm_dtype dt, int64_t n) {
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(dt, 1, &n, &t));
  return t;
}

/* relu(x) * 2 as f16 and x < 0 as bool, from a program with a constant,
 * a compare and two outputs, through the kernel. */
static void test_run(void) {
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  int x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F16);
  dvm_fused_output(&b, DVM_BOOL);
  int two = dvm_fused_const_f32(&b, 2.0);
  dvm_fused_store(&b, 0, dvm_fused_op2(&b, DVM_FUSED_MUL, dvm_fused_op1(&b, DVM_FUSED_RELU, x), two));
  dvm_fused_store(&b, 1, dvm_fused_op2(&b, DVM_FUSED_LESS, x, dvm_fused_const_f32(&b, 0.0)));
  void *p;
  size_t size;
  CHECK_OK(dvm_fused_builder_finish(&b, &p, &size));
  int64_t n = 1000;
  dvm_tensor *in[1] = {vec(DVM_F32, n)}, *out[2] = {vec(DVM_F16, n), vec(DVM_BOOL, n)};
  float *px = dvm_tensor_ptr(in[0]);
  for (int64_t i = 0; i < n; i++) px[i] = (float)(i - 500) / 8;
  const dvm_kernel_def *k = dvm_ops_find("fused", DVM_DEVICE_CPU);
  dvm_exec ex = {.threads = 2};
  dvm_kernel_args a = {in, 1, out, 2, NULL, 0, 0, p, size, &ex};
  CHECK(k && strcmp(k->shapefn, "broadcast") == 0);
  CHECK_OK(k->fn(&a));
  const uint16_t *h = dvm_tensor_ptr(out[0]);
  const uint8_t *neg = dvm_tensor_ptr(out[1]);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = px[i] > 0 ? 2 * px[i] : 0; /* exact in f16: multiples of 1/4 up to 125 */
    int e = h[i] >> 10 & 31, m = h[i] & 1023;
    float got = e ? ldexpf((float)(m + 1024), e - 25) : ldexpf((float)m, -24);
    bad += got != want || neg[i] != (px[i] < 0) || h[i] >> 15;
  }
  CHECK(bad == 0);
  /* the same payload, cut short, is refused by the kernel */
  a.payload_size = size - 1;
  CHECK_ERR(k->fn(&a), DVM_INVALID_ARGUMENT, "fused: program:");
  free(p);
  dvm_tensor_release(in[0]);
  dvm_tensor_release(out[0]);
  dvm_tensor_release(out[1]);
}

/* A row program, softmax over the last dim (exp(x - max) / sum), and
 * (x - min) * mean: against a double reference at row lengths 1, 7, 769
 * and 13000 (registers on the heap), 0 to 67 rows, 2 threads; then the
 * rules row programs add. */
static void test_rows(void) {
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  int x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F32);
  dvm_fused_output(&b, DVM_F32);
  int e = dvm_fused_op1(&b, DVM_FUSED_EXP, dvm_fused_op2(&b, DVM_FUSED_SUB, x, dvm_fused_row_reduce(&b, DVM_FUSED_ROW_MAX, x)));
  dvm_fused_store(&b, 0, dvm_fused_op2(&b, DVM_FUSED_DIV, e, dvm_fused_row_reduce(&b, DVM_FUSED_ROW_SUM, e)));
  int lo = dvm_fused_row_reduce(&b, DVM_FUSED_ROW_MIN, x), mean = dvm_fused_row_reduce(&b, DVM_FUSED_ROW_MEAN, x);
  dvm_fused_store(&b, 1, dvm_fused_op2(&b, DVM_FUSED_MUL, dvm_fused_op2(&b, DVM_FUSED_SUB, x, lo), mean));
  void *p;
  size_t size;
  CHECK_OK(dvm_fused_builder_finish(&b, &p, &size));
  CHECK(((uint8_t *)p)[9] == DVM_FUSED_ROWS);
  const dvm_kernel_def *k = dvm_ops_find("fused", DVM_DEVICE_CPU);
  dvm_exec ex = {.threads = 2};
  const int64_t lens[] = {1, 7, 769, 13000}, rows[] = {0, 1, 5, 67};
  for (int li = 0; li < 4; li++)
    for (int ri = 0; ri < 4; ri++) {
      int64_t dims[2] = {rows[ri], lens[li]}, len = lens[li];
      dvm_tensor *in[1] = {NULL}, *out[2] = {NULL, NULL};
      CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &in[0]));
      CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &out[0]));
      CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &out[1]));
      float *px = dvm_tensor_ptr(in[0]), *y0 = dvm_tensor_ptr(out[0]), *y1 = dvm_tensor_ptr(out[1]);
      for (int64_t i = 0; i < rows[ri] * len; i++) px[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f;
      dvm_kernel_args a = {in, 1, out, 2, NULL, 0, 0, p, size, &ex};
      CHECK_OK(k->fn(&a));
      int bad = 0;
      for (int64_t r = 0; r < rows[ri]; r++) {
        const float *xr = px + r * len;
        double mx = -INFINITY, mn = INFINITY, sum = 0, s = 0;
        for (int64_t j = 0; j < len; j++) mx = xr[j] > mx ? xr[j] : mx, mn = xr[j] < mn ? xr[j] : mn, s += xr[j];
        for (int64_t j = 0; j < len; j++) sum += exp(xr[j] - mx);
        for (int64_t j = 0; j < len; j++) {
          double w0 = exp(xr[j] - mx) / sum, w1 = (xr[j] - mn) * (s / (double)len);
          bad += fabs(y0[r * len + j] - w0) > 1e-6 + 1e-4 * fabs(w0) || fabs(y1[r * len + j] - w1) > 1e-4 + 1e-4 * fabs(w1);
        }
      }
      if (bad) fprintf(stderr, "rows %lld x %lld: %d wrong\n", (long long)rows[ri], (long long)len, bad);
      CHECK(bad == 0);
      dvm_tensor_release(in[0]);
      dvm_tensor_release(out[0]);
      dvm_tensor_release(out[1]);
    }
  /* per-row ops (add, sqrt, greater: once per row), a row sum stored as
   * it is (its register the output), a where of per-row values and rows */
  dvm_fused_builder_init(&b);
  x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F32);
  dvm_fused_output(&b, DVM_F32);
  dvm_fused_store(&b, 0, dvm_fused_row_reduce(&b, DVM_FUSED_ROW_SUM, x));
  int qv = dvm_fused_op1(&b, DVM_FUSED_SQRT, dvm_fused_op2(&b, DVM_FUSED_ADD, dvm_fused_row_reduce(&b, DVM_FUSED_ROW_MEAN, x),
                                                          dvm_fused_const_f32(&b, 3.0)));
  int big = dvm_fused_op2(&b, DVM_FUSED_GREATER, qv, dvm_fused_const_f32(&b, 1.7));
  dvm_fused_store(&b, 1, dvm_fused_where(&b, big, qv, x));
  void *p2;
  size_t size2;
  CHECK_OK(dvm_fused_builder_finish(&b, &p2, &size2));
  for (int li = 0; li < 4; li++) {
    int64_t dims[2] = {37, lens[li]}, len = lens[li];
    dvm_tensor *in[1] = {NULL}, *out[2] = {NULL, NULL};
    CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &in[0]));
    CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &out[0]));
    CHECK_OK(dvm_tensor_create(DVM_F32, 2, dims, &out[1]));
    float *px = dvm_tensor_ptr(in[0]), *y0 = dvm_tensor_ptr(out[0]), *y1 = dvm_tensor_ptr(out[1]);
    for (int64_t i = 0; i < 37 * len; i++) px[i] = (float)((i * 7919) % 1000) / 250.0f - 2.0f;
    dvm_kernel_args a = {in, 1, out, 2, NULL, 0, 0, p2, size2, &ex};
    CHECK_OK(k->fn(&a));
    int bad = 0;
    for (int64_t r = 0; r < 37; r++) {
      double sum = 0;
      for (int64_t j = 0; j < len; j++) sum += px[r * len + j];
      double qq = sqrt(sum / (double)len + 3.0);
      for (int64_t j = 0; j < len; j++) {
        double w1 = qq > 1.7 ? qq : px[r * len + j];
        bad += fabs(y0[r * len + j] - sum) > 1e-3 + 1e-5 * fabs(sum) || fabs(y1[r * len + j] - w1) > 1e-5;
      }
    }
    if (bad) fprintf(stderr, "per-row ops, rows of %lld: %d wrong\n", (long long)len, bad);
    CHECK(bad == 0);
    dvm_tensor_release(in[0]);
    dvm_tensor_release(out[0]);
    dvm_tensor_release(out[1]);
  }
  free(p2);
  /* a scalar output has no rows */
  dvm_tensor *s_in[1] = {NULL}, *s_out[2] = {NULL, NULL};
  CHECK_OK(dvm_tensor_create(DVM_F32, 0, NULL, &s_in[0]));
  CHECK_OK(dvm_tensor_create(DVM_F32, 0, NULL, &s_out[0]));
  CHECK_OK(dvm_tensor_create(DVM_F32, 0, NULL, &s_out[1]));
  dvm_kernel_args a = {s_in, 1, s_out, 2, NULL, 0, 0, p, size, &ex};
  CHECK_ERR(k->fn(&a), DVM_INVALID_ARGUMENT, "fused: a row program needs an output of rank 1 or more, got a scalar");
  /* flags: unknown ones, and row reductions without the rows flag */
  uint8_t *q = p;
  q[9] = 3;
  CHECK_ERR(dvm_fused_validate(p, size), DVM_INVALID_ARGUMENT, "fused: program: unknown flags 0x03 (want 0 or 0x01, rows)");
  q[9] = 0;
  CHECK_ERR(dvm_fused_validate(p, size), DVM_INVALID_ARGUMENT,
            "fused: program: instruction 1 (row_max): a row reduction needs the rows flag in the header");
  free(p);
  dvm_tensor_release(s_in[0]);
  dvm_tensor_release(s_out[0]);
  dvm_tensor_release(s_out[1]);
  /* the builder: f32 only, and only reductions */
  dvm_fused_builder_init(&b);
  x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F32);
  CHECK(dvm_fused_row_reduce(&b, DVM_FUSED_ROW_SUM, dvm_fused_cast(&b, x, DVM_I64)) == -1);
  CHECK_ERR(dvm_fused_builder_finish(&b, &p, &size), DVM_INVALID_ARGUMENT, "fused builder: row_sum does not take i64 values");
  dvm_fused_builder_init(&b);
  x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32));
  dvm_fused_output(&b, DVM_F32);
  CHECK(dvm_fused_row_reduce(&b, DVM_FUSED_EXP, x) == -1);
  CHECK_ERR(dvm_fused_builder_finish(&b, &p, &size), DVM_INVALID_ARGUMENT, "fused builder: opcode 27 is not a row reduction");
}

int main(void) {
  test_docs_example();
  test_register_reuse();
  test_mistakes();
  test_run();
  test_rows();
  return harness_finish("fused builder");
}
