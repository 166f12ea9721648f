/* .npy reading and writing: numpy-written fixtures of every dtype, byte
 * order, format version and layout; byte-identical and round-trip writes;
 * and a table of malformed inputs, each failing with its own message.
 * argv[1] is the fixtures folder (tests/fixtures/npy, made by
 * make_npy_fixtures.py, whose value formulas are repeated here). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "dvm/npy.h"

static const char *fixtures;

static char *fixture_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", fixtures, name);
  return buf;
}

static dvm_tensor *load(const char *name) {
  char path[4096];
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_npy_read_file(fixture_path(path, sizeof path, name), &t));
  return t;
}

/* The raw bytes of a fixture file, malloc'ed. */
static uint8_t *slurp(const char *name, size_t *size) {
  char path[4096];
  FILE *f = fopen(fixture_path(path, sizeof path, name), "rb");
  uint8_t *buf = malloc(4096);
  *size = f && buf ? fread(buf, 1, 4096, f) : 0;
  if (f) fclose(f);
  return buf;
}

static bool has_shape(const dvm_tensor *t, dvm_dtype dt, int rank, const int64_t *dims) {
  return dvm_tensor_dtype(t) == dt && dvm_tensor_rank(t) == rank &&
         memcmp(dvm_tensor_dims(t), dims, sizeof(int64_t) * (size_t)rank) == 0;
}

/* ---- fixtures of every dtype ---- */

static const struct {
  const char *code;
  dvm_dtype dt;
} codes[] = {
    {"f2", DVM_F16}, {"f4", DVM_F32}, {"f8", DVM_F64}, {"i1", DVM_I8},   {"i2", DVM_I16},
    {"i4", DVM_I32}, {"i8", DVM_I64}, {"u1", DVM_U8},  {"b1", DVM_BOOL},
};
#define NCODES (sizeof codes / sizeof codes[0])

/* Element k of the 2x3 fixture of `dt` in host bytes (see the script). */
static void expected_elem(dvm_dtype dt, int k, void *out) {
  static const uint16_t f16[6] = {0xbe00, 0xba00, 0x0000, 0x3a00, 0x3e00, 0x4080};
  double f = (k - 2) * 0.75;
  int64_t i = k - 2;
  switch (dt) {
  case DVM_F16: memcpy(out, &f16[k], 2); break;
  case DVM_F32: *(float *)out = (float)f; break;
  case DVM_F64: *(double *)out = f; break;
  case DVM_I8: *(int8_t *)out = (int8_t)(i * 3); break;
  case DVM_I16: *(int16_t *)out = (int16_t)(i * 1000); break;
  case DVM_I32: *(int32_t *)out = (int32_t)(i * 100000007); break;
  case DVM_I64: *(int64_t *)out = i * INT64_C(1000000000007); break;
  case DVM_U8: *(uint8_t *)out = (uint8_t)(k * 50); break;
  default: *(uint8_t *)out = k % 3 == 0; break;
  }
}

static void check_2x3(const char *name, dvm_dtype dt) {
  static const int64_t dims[2] = {2, 3};
  dvm_tensor *t = load(name);
  if (!t) return;
  CHECK(has_shape(t, dt, 2, dims));
  size_t isz = dvm_dtype_size(dt);
  uint8_t want[48];
  for (int k = 0; k < 6; k++) expected_elem(dt, k, want + k * isz);
  bool ok = dvm_tensor_nbytes(t) == 6 * isz && memcmp(dvm_tensor_data(t), want, 6 * isz) == 0;
  CHECK(ok);
  if (!ok) fprintf(stderr, "  in %s\n", name);
  dvm_tensor_release(t);
}

static void test_dtypes(void) {
  char name[64];
  for (size_t i = 0; i < NCODES; i++) {
    snprintf(name, sizeof name, "%s_le.npy", codes[i].code);
    check_2x3(name, codes[i].dt);
    snprintf(name, sizeof name, "%s_be.npy", codes[i].code);
    check_2x3(name, codes[i].dt);
  }
}

/* Versions 2.0 and 3.0, '=' order, and headers numpy reads but does not
 * write (other key order, double quotes, Python 2 "3L" dims). */
static void test_header_variants(void) {
  const char *names[] = {"f4_v2.npy", "f4_v3.npy", "native_f4.npy", "reordered_f4.npy",
                         "py2_long_f4.npy"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_2x3(names[i], DVM_F32);
}

static void test_fortran(void) {
  static const int64_t d2[2] = {2, 3}, d3[3] = {2, 3, 4};
  dvm_tensor *t = load("fortran_2x3_f4.npy");
  if (t) {
    CHECK(has_shape(t, DVM_F32, 2, d2));
    const float *v = dvm_tensor_data(t);
    for (int k = 0; k < 6; k++) CHECK(v[k] == (float)k);
    dvm_tensor_release(t);
  }
  t = load("fortran_2x3x4_i4.npy"); /* also big-endian */
  if (t) {
    CHECK(has_shape(t, DVM_I32, 3, d3));
    const int32_t *v = dvm_tensor_data(t);
    for (int k = 0; k < 24; k++) CHECK(v[k] == k);
    dvm_tensor_release(t);
  }
}

static void test_shapes(void) {
  static const int64_t e1[2] = {0, 3}, e2[3] = {2, 0, 4};
  dvm_tensor *t = load("scalar_f8.npy");
  if (t) {
    CHECK(has_shape(t, DVM_F64, 0, e1) && dvm_tensor_numel(t) == 1);
    CHECK(*(const double *)dvm_tensor_data(t) == 3.5);
    dvm_tensor_release(t);
  }
  if ((t = load("empty_0x3_f4.npy"))) {
    CHECK(has_shape(t, DVM_F32, 2, e1) && dvm_tensor_nbytes(t) == 0);
    dvm_tensor_release(t);
  }
  if ((t = load("empty_2x0x4_i8.npy"))) {
    CHECK(has_shape(t, DVM_I64, 3, e2) && dvm_tensor_nbytes(t) == 0);
    dvm_tensor_release(t);
  }
  static const int64_t r8[8] = {1, 2, 1, 2, 1, 2, 1, 2}, r1[1] = {5};
  if ((t = load("rank8_i2.npy"))) {
    CHECK(has_shape(t, DVM_I16, 8, r8));
    const int16_t *v = dvm_tensor_data(t);
    for (int k = 0; k < 16; k++) CHECK(v[k] == k);
    dvm_tensor_release(t);
  }
  if ((t = load("vec_i4.npy"))) {
    CHECK(has_shape(t, DVM_I32, 1, r1));
    const int32_t *v = dvm_tensor_data(t);
    for (int k = 0; k < 5; k++) CHECK(v[k] == k);
    dvm_tensor_release(t);
  }
}

/* ---- writing ---- */

/* Written files are byte-identical to what numpy.save made. */
static void test_write_like_numpy(void) {
  const char *names[] = {"scalar_f8.npy", "empty_0x3_f4.npy", "empty_2x0x4_i8.npy",
                         "rank8_i2.npy", "vec_i4.npy", "zero_wide_u1.npy"};
  char name[64];
  for (size_t i = 0; i < NCODES + sizeof names / sizeof names[0]; i++) {
    if (i < NCODES) snprintf(name, sizeof name, "%s_le.npy", codes[i].code);
    else snprintf(name, sizeof name, "%s", names[i - NCODES]);
    size_t size, wsize = 0;
    uint8_t *want = slurp(name, &size);
    void *got = NULL;
    dvm_tensor *t = load(name);
    if (t) CHECK_OK(dvm_npy_write_memory(t, &got, &wsize));
    bool ok = got && wsize == size && memcmp(got, want, size) == 0;
    CHECK(ok);
    if (!ok) fprintf(stderr, "  in %s\n", name);
    free(got);
    free(want);
    dvm_tensor_release(t);
  }
}

static dvm_tensor *patterned(dvm_dtype dt, int rank, const int64_t *dims) {
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(dt, rank, dims, &t));
  if (!t) return NULL;
  uint8_t *p = dvm_tensor_data(t);
  for (size_t i = 0; i < dvm_tensor_nbytes(t); i++)
    p[i] = dt == DVM_BOOL ? (uint8_t)(i % 2) : (uint8_t)(i * 37 + 1);
  return t;
}

static bool same_tensor(const dvm_tensor *a, const dvm_tensor *b) {
  return has_shape(b, dvm_tensor_dtype(a), dvm_tensor_rank(a), dvm_tensor_dims(a)) &&
         dvm_tensor_nbytes(a) == dvm_tensor_nbytes(b) &&
         memcmp(dvm_tensor_data(a), dvm_tensor_data(b), dvm_tensor_nbytes(a)) == 0;
}

static void test_round_trip(void) {
  static const struct {
    int rank;
    int64_t dims[DVM_MAX_RANK];
  } shapes[] = {{0, {0}}, {1, {0}}, {1, {7}}, {3, {2, 3, 4}}, {8, {1, 2, 1, 2, 1, 2, 1, 3}}};
  for (int dt = 0; dt < DVM_DTYPE_COUNT; dt++) {
    if (dt == DVM_BF16 || dt == DVM_STRING) continue; /* strings: test_text */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      dvm_tensor *t = patterned((dvm_dtype)dt, shapes[s].rank, shapes[s].dims), *back = NULL;
      void *buf = NULL;
      size_t size = 0;
      if (t) CHECK_OK(dvm_npy_write_memory(t, &buf, &size));
      CHECK(size % 64 == (size_t)dvm_tensor_nbytes(t) % 64);
      if (buf) CHECK_OK(dvm_npy_read_memory(buf, size, "round trip", &back));
      CHECK(back && same_tensor(t, back));
      free(buf);
      dvm_tensor_release(t);
      dvm_tensor_release(back);
    }
  }
}

static void test_files(void) {
  char path[4096];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/dvm_npy_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  static const int64_t dims[2] = {3, 5};
  dvm_tensor *t = patterned(DVM_I64, 2, dims), *back = NULL;
  CHECK_OK(dvm_npy_write_file(path, t));
  CHECK_OK(dvm_npy_read_file(path, &back));
  CHECK(back && same_tensor(t, back));
  dvm_tensor_release(back);
  dvm_tensor_release(t);
  unlink(path);

  CHECK_ERR(dvm_npy_read_file("no/such/file.npy", &back), DVM_NOT_FOUND,
            "no/such/file.npy: cannot open");
  CHECK_ERR(dvm_npy_read_file(fixtures, &back), DVM_IO, "cannot read");
  CHECK_ERR(dvm_npy_read_file("/dev/null", &back), DVM_INVALID_ARGUMENT,
            "/dev/null: truncated: 0 bytes");
  t = patterned(DVM_F32, 0, dims);
  CHECK_ERR(dvm_npy_write_file("no/such/dir/x.npy", t), DVM_NOT_FOUND,
            "no/such/dir/x.npy: cannot create");
  if (access("/dev/full", W_OK) == 0)
    CHECK_ERR(dvm_npy_write_file("/dev/full", t), DVM_IO, "/dev/full: cannot write");
  dvm_tensor_release(t);
}

/* A pipe has no size to go by: the reader grows its buffer as data comes. */
static void test_pipe(void) {
  char path[4096];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/dvm_npy_fifo_%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  if (mkfifo(path, 0600) != 0) {
    printf("npy: skipping the pipe test: cannot make a fifo\n");
    return;
  }
  static const int64_t dims[2] = {100, 30};
  dvm_tensor *t = patterned(DVM_F64, 2, dims), *back = NULL;
  fflush(NULL);
  pid_t child = fork();
  if (child == 0) /* the writer */
    _exit(dvm_npy_write_file(path, t) ? 1 : 0);
  CHECK(child > 0);
  if (child > 0) {
    CHECK_OK(dvm_npy_read_file(path, &back));
    CHECK(back && same_tensor(t, back));
    int status = 1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  dvm_tensor_release(back);
  dvm_tensor_release(t);
  unlink(path);
}

static void test_bf16(void) {
  static const int64_t dims[1] = {4};
  dvm_tensor *t = patterned(DVM_BF16, 1, dims);
  void *buf = NULL;
  size_t size;
  CHECK_ERR(dvm_npy_write_memory(t, &buf, &size), DVM_INVALID_ARGUMENT,
            "cannot write a bf16 tensor as .npy: .npy has no bf16 dtype");
  CHECK_ERR(dvm_npy_write_file("unused.npy", t), DVM_INVALID_ARGUMENT,
            "unused.npy: cannot write a bf16 tensor");
  CHECK(access("unused.npy", F_OK) != 0);
  dvm_tensor_release(t);
}

/* ---- malformed input ---- */

/* A .npy image of exactly the right size (so the sanitizers see any read
 * past it): preamble, `header` padded as numpy pads it, `data` zero bytes. */
static uint8_t *make_npy(int version, const char *header, size_t data, size_t *size) {
  size_t pre = version == 1 ? 10 : 12, hlen = strlen(header);
  size_t padded = hlen + 1 + (64 - (pre + hlen + 1) % 64) % 64;
  uint8_t *p = calloc(1, pre + padded + data);
  memcpy(p, "\x93NUMPY", 6);
  p[6] = (uint8_t)version;
  for (size_t i = 0; i < pre - 8; i++) p[8 + i] = (uint8_t)(padded >> (8 * i));
  memcpy(p + pre, header, hlen);
  memset(p + pre + hlen, ' ', padded - hlen - 1);
  p[pre + padded - 1] = '\n';
  *size = pre + padded + data;
  return p;
}

static dvm_status *read_bytes(const uint8_t *p, size_t size) {
  dvm_tensor *t = NULL;
  /* an exact-size copy, so a read past `size` is a read past the block */
  uint8_t *copy = malloc(size ? size : 1);
  memcpy(copy, p, size);
  dvm_status *st = dvm_npy_read_memory(copy, size, "bad.npy", &t);
  free(copy);
  if (!st) {
    dvm_tensor_release(t);
    return NULL;
  }
  return st;
}

#define F4_2X3 "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"

static const struct {
  int version;
  const char *header;
  size_t data;
  const char *expect;
} bad_headers[] = {
    {1, "{'descr': '<f4', 'fortran_order': False, }", 24, "bad.npy: header: missing key 'shape'"},
    {1, "{'fortran_order': False, 'shape': (), }", 4, "header: missing key 'descr'"},
    {1, "{'descr': '<f4', 'shape': (), }", 4, "header: missing key 'fortran_order'"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'foo': 1}", 4,
     "header: unknown key 'foo'"},
    {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4,
     "header: duplicate key 'descr'"},
    {1, "{'descr': '<M8', 'fortran_order': False, 'shape': (), }", 8,
     "header: unsupported dtype descr '<M8'"},
    {1, "{'descr': '<U2', 'fortran_order': False, 'shape': (), }", 7,
     "bad.npy: data is 7 bytes, shape string[] needs 8"},
    {1, "{'descr': '<U2x', 'fortran_order': False, 'shape': (), }", 8, "unsupported dtype descr '<U2x'"},
    {1, "{'descr': '|U0', 'fortran_order': False, 'shape': (1, 4294967296), }", 0,
     "header: dtype descr '|U0' has width 0 (NumPy writes at least 1)"},
    {1, "{'descr': '|S99999999999999999999', 'fortran_order': False, 'shape': (), }", 8,
     "unsupported dtype descr '|S99999999999999999999'"},
    {1, "{'descr': '|S3', 'fortran_order': True, 'shape': (2, 1), }", 6, NULL},
    {1, "{'descr': '<u16', 'fortran_order': False, 'shape': (), }", 16,
     "unsupported dtype descr '<u16'"},
    {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (), }", 8,
     "unsupported dtype descr '<c8'"},
    {1, "{'descr': '|O', 'fortran_order': False, 'shape': (), }", 8,
     "unsupported dtype descr '|O'"},
    {1, "{'descr': '<U5', 'fortran_order': False, 'shape': (), }", 20, NULL},
    {1, "{'descr': '<V2', 'fortran_order': False, 'shape': (), }", 2,
     "unsupported dtype descr '<V2'"},
    {1, "{'descr': '', 'fortran_order': False, 'shape': (), }", 0, "unsupported dtype descr ''"},
    {1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", 4,
     "unsupported dtype descr [('a', '<f4')] (only plain dtypes, not structured ones)"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 0,
     "bad.npy: header: shape dim 1 is negative (-3)"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
     "header: shape dim 0 is too large (99999999999999999999)"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }", 0,
     "header: shape dim 0 is too large (9223372036854775808)"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0,
     "header: shape f32[4294967296,4294967296] has more elements than int64 can count"},
    {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 0,
     "header: shape f64[2305843009213693952] is too large: its byte size overflows"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 4,
     "header: shape has more than 8 dims"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12,
     "header: shape (3) is not a tuple: a 1-d shape needs a trailing comma"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", 12,
     "header: expected a tuple for shape at offset 50, found [3], }"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,,), }", 12,
     "header: expected an integer dim at offset 53, found ,), }"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }", 12,
     "header: expected ',' or ')' in the shape at offset 53, found 4), }"},
    {1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (), }", 4,
     "header: fortran_order must be True or False, found 0"},
    {1, "{'descr': '<f4', 'fortran_order': 'no', 'shape': (), }", 4,
     "header: expected True or False for fortran_order at offset 34, found 'no', 'shape': (), }"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), ", 12,
     "header: expected a string key at offset 118, found the end"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", 12,
     "header: expected ',' or '}' at offset 118, found the end"},
    {1, "{'descr': '<f4', 'fortran_order': False 'shape': (3,)}", 12,
     "header: expected ',' or '}' at offset 40, found 'shape'"},
    {1, "{'descr' '<f4', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: expected ':' at offset 9"},
    {1, "{'descr: '<f4', 'fortran_order': False, 'shape': (3,)}", 12,
     "unknown key 'descr: '"},
    {1, "{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", 12,
     "header: unsupported dtype descr '<f4, ' (dvm reads f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1, and text: U<n> S<n>)"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", 12,
     "header: expected only padding after the dict at offset 56, found x"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n\n", 12, NULL},
    {1, "{'des\\x63r': '<f4', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: escape in the string at offset 1 is not supported"},
    {1, "{'descr\n': '<f4', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: unterminated string at offset 1"},
    {1, "['descr', '<f4']", 12, "header: expected '{' at offset 0, found ['descr'"},
    {1, "", 12, "header: expected '{' at offset 54, found the end"},
    {1, "{'descr': '<f\xe9', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: byte 0xe9 at offset 13 is not ASCII (format 1.0"},
    {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), '\x80': 0}", 12,
     "header: byte 0x80 at offset 57 is not ASCII (format 2.0"},
    {3, "{'descr': '<f\xc3\xa9', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: unsupported dtype descr '<f\\xc3\\xa9'"},
    {3, "{'descr': '<f\xc3', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: not valid UTF-8 at offset 13"},
    {3, "{'descr': '<f\xed\xa0\x80', 'fortran_order': False, 'shape': (3,)}", 12,
     "header: not valid UTF-8 at offset 13"}, /* a surrogate */
    /* Python 2's "3L" is accepted in 1.0 and 2.0 only, as numpy does */
    {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}", 12,
     "header: expected ',' or ')' in the shape at offset 52, found L,)}"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 40,
     "bad.npy: data is 40 bytes, shape f32[3,4] needs 48"},
    {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 52,
     "bad.npy: data is 52 bytes, shape f32[3,4] needs 48"},
    {2, "{'descr': '>i8', 'fortran_order': True, 'shape': (0, 1000000), }", 8,
     "data is 8 bytes, shape i64[0,1000000] needs 0"},
    {1, "{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }", 2, NULL},
    {1, "{'descr': 'i4', 'fortran_order': False, 'shape': (2,), }", 8, NULL},
    {1, "{'descr': '>u8', 'fortran_order': False, 'shape': (2,), }", 16, NULL},
    {1, "{'descr': '<u2', 'fortran_order': False, 'shape': (), }", 2, NULL},
    {1, "{'descr': '|u4', 'fortran_order': False, 'shape': (1,), }", 4, NULL},
    {1, "{'descr':'<f4','fortran_order':True,'shape':(),}", 4, NULL},
};

static void test_bad_headers(void) {
  for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
    size_t size;
    uint8_t *p =
        make_npy(bad_headers[i].version, bad_headers[i].header, bad_headers[i].data, &size);
    if (bad_headers[i].expect)
      CHECK_ERR(read_bytes(p, size), DVM_INVALID_ARGUMENT, bad_headers[i].expect);
    else
      CHECK_OK(read_bytes(p, size));
    free(p);
  }
}

/* ---- text: 'U' (UCS-4) and 'S' (bytes) arrays as string tensors ---- */

static uint8_t *text_npy(const char *header, const uint32_t *units, size_t n, size_t unit, size_t *size) {
  uint8_t *p = make_npy(1, header, n * unit, size), *d = p + *size - n * unit;
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < unit; b++) d[i * unit + b] = (uint8_t)(units[i] >> 8 * (header[11] == '>' ? unit - 1 - b : b));
  return p;
}

static bool has_string(const dvm_tensor *t, int64_t i, const char *s, size_t n) {
  size_t len;
  const char *p = dvm_tensor_string(t, i, &len);
  return len == n && memcmp(p, s, n) == 0;
}

static void test_text(void) {
  /* [2, 2] of 3 code points: "ab", "é€", "", "a\0b" (trailing NULs are padding) */
  static const uint32_t u[] = {'a', 'b', 0, 0xe9, 0x20ac, 0, 0, 0, 0, 'a', 0, 'b'};
  size_t size, wsize;
  uint8_t *p = text_npy("{'descr': '<U3', 'fortran_order': False, 'shape': (2, 2), }", u, 12, 4, &size);
  dvm_tensor *t = NULL, *back = NULL;
  void *w = NULL;
  CHECK_OK(dvm_npy_read_memory(p, size, "u.npy", &t));
  CHECK(t && has_shape(t, DVM_STRING, 2, (int64_t[]){2, 2}));
  CHECK(t && has_string(t, 0, "ab", 2) && has_string(t, 1, "\xc3\xa9\xe2\x82\xac", 5) && has_string(t, 2, "", 0) &&
        has_string(t, 3, "a\0b", 3));
  /* written as NumPy does: '<U3', the same bytes */
  if (t) CHECK_OK(dvm_npy_write_memory(t, &w, &wsize));
  CHECK(w && wsize == size && memcmp(w, p, size) == 0);
  if (w) CHECK_OK(dvm_npy_read_memory(w, wsize, "again", &back));
  CHECK(back && has_string(back, 1, "\xc3\xa9\xe2\x82\xac", 5));
  free(w);
  free(p);
  dvm_tensor_release(back);
  dvm_tensor_release(t);

  static const uint32_t be[] = {'h', 'i'}, fortran[] = {'a', 'b', 'c', 'd', 'e', 'f'};
  p = text_npy("{'descr': '>U2', 'fortran_order': False, 'shape': (), }", be, 2, 4, &size);
  CHECK_OK(dvm_npy_read_memory(p, size, "be.npy", &t));
  CHECK(t && has_string(t, 0, "hi", 2));
  dvm_tensor_release(t);
  free(p);
  /* column-major [2, 3] of one code point: C order reads a c e b d f */
  p = text_npy("{'descr': '<U1', 'fortran_order': True, 'shape': (2, 3), }", fortran, 6, 4, &size);
  CHECK_OK(dvm_npy_read_memory(p, size, "f.npy", &t));
  CHECK(t && has_string(t, 1, "c", 1) && has_string(t, 3, "b", 1) && has_string(t, 5, "f", 1));
  dvm_tensor_release(t);
  free(p);

  /* bytes as they are; what is not UTF-8 is not written as text */
  static const uint32_t s[] = {'a', 'b', 0, 0, 0xff, 0, 'x', 0};
  p = text_npy("{'descr': '|S4', 'fortran_order': False, 'shape': (2,), }", s, 8, 1, &size);
  CHECK_OK(dvm_npy_read_memory(p, size, "s.npy", &t));
  CHECK(t && has_string(t, 0, "ab", 2) && has_string(t, 1, "\xff\0x", 3));
  if (t) CHECK_ERR(dvm_npy_write_memory(t, &w, &wsize), DVM_INVALID_ARGUMENT, "string element 1 is not UTF-8 (byte 0)");
  dvm_tensor_release(t);
  free(p);

  static const uint32_t bad[] = {'a', 0xd800};
  p = text_npy("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", bad, 2, 4, &size);
  CHECK_ERR(read_bytes(p, size), DVM_INVALID_ARGUMENT, "bad.npy: data: element 0: code point 55296 (0xd800) is not a character");
  free(p);
}

/* Every proper prefix of a valid file fails, with the message of the part
 * it cuts. */
static void test_truncation(void) {
  size_t size;
  uint8_t *p = make_npy(1, F4_2X3, 24, &size);
  CHECK_OK(read_bytes(p, size));
  char want[64];
  for (size_t n = 0; n < size; n++) {
    if (n < 10) snprintf(want, sizeof want, "bad.npy: truncated: %zu bytes", n);
    else if (n < size - 24) snprintf(want, sizeof want, "header length 118 runs past the end");
    else snprintf(want, sizeof want, "data is %zu bytes, shape f32[2,3] needs 24", n - (size - 24));
    CHECK_ERR(read_bytes(p, n), DVM_INVALID_ARGUMENT, want);
  }
  free(p);
  p = make_npy(2, F4_2X3, 24, &size);
  CHECK_ERR(read_bytes(p, 11), DVM_INVALID_ARGUMENT,
            "truncated: 11 bytes, a version 2.0 preamble needs 12");
  free(p);
}

static void test_bad_preamble(void) {
  size_t size;
  uint8_t *p = make_npy(1, F4_2X3, 24, &size);
  struct {
    size_t at;
    uint8_t byte;
    const char *expect;
  } cases[] = {
      {0, 0x92, "bad.npy: not a .npy file (bad magic)"},
      {5, 'y', "not a .npy file (bad magic)"},
      {6, 4, "unsupported format version 4.0 (dvm reads 1.0, 2.0 and 3.0)"},
      {6, 0, "unsupported format version 0.0"},
      {7, 1, "unsupported format version 1.1"},
      {9, 0x10, "header length 4214 runs past the end (142 bytes follow the preamble)"},
      {8, 0, "bad.npy: header: expected '{' at offset 0, found the end"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t keep = p[cases[i].at];
    p[cases[i].at] = cases[i].byte;
    CHECK_ERR(read_bytes(p, size), DVM_INVALID_ARGUMENT, cases[i].expect);
    p[cases[i].at] = keep;
  }
  CHECK_ERR(read_bytes(p, 3), DVM_INVALID_ARGUMENT, "truncated: 3 bytes");
  CHECK_ERR(read_bytes((const uint8_t *)"PK\x03\x04", 4), DVM_INVALID_ARGUMENT, "bad magic");
  dvm_tensor *t;
  CHECK_ERR(dvm_npy_read_memory("x", 1, NULL, &t), DVM_INVALID_ARGUMENT,
            ".npy data: not a .npy file");
  free(p);

  /* bools must be 0 or 1 */
  p = make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", 4, &size);
  p[size - 2] = 2;
  CHECK_ERR(read_bytes(p, size), DVM_INVALID_ARGUMENT, "bad.npy: data: bool element 2 is 2");
  free(p);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
    return 2;
  }
  fixtures = argv[1];
  test_dtypes();
  test_header_variants();
  test_fortran();
  test_shapes();
  test_write_like_numpy();
  test_round_trip();
  test_files();
  test_pipe();
  test_bf16();
  test_bad_headers();
  test_text();
  test_truncation();
  test_bad_preamble();
  return harness_finish("npy");
}
