/* Throughput of the fused elementwise kernel as a fraction of a plain
 * copy's bandwidth, on tensors larger than the last-level cache, at 1 and 2
 * threads, in one run.
 *
 * Each chain reads and writes its big tensors once (small broadcast rows
 * and columns stay in cache); its bandwidth is those bytes over the median
 * time, and "of copy" divides it by memcpy's bandwidth (bytes read and
 * written over the median time) at the same thread count (one memcpy per
 * thread over its half). Programs are built with the
 * builder of ops/cpu/fused.h, as the compiler builds them, and every result
 * is checked against a plain C loop.
 *
 * The copy and each chain are timed alternately, iteration by iteration, so
 * that a machine whose load drifts slows both alike.
 *
 * Usage: bench_fused [--quick] [--elems N] [--iters N] [--chain NAME]
 *   --quick: small tensors, one iteration: a test that it runs and is right.
 *   --chain: only the chain of that name (as printed). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "kernel.h"
#include "object.h"
#include "ops/cpu/fused.h"
#include "ops/optable.h"

#define ROW 1024 /* the inner dim; rows and columns broadcast along it */

static dvm_tensor *tensor(dvm_dtype dt, int64_t rows, int64_t cols) {
  int64_t dims[2] = {rows, cols};
  dvm_tensor *t;
  die(dvm_tensor_create(dt, 2, dims, &t));
  return t;
}

static float uniform(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return (float)(*s >> 40) / (float)(1 << 24) * 4.0f - 2.0f;
}

typedef struct chain {
  const char *name;
  int nin;           /* inputs: x [rows, ROW], then as `shapes` says */
  const char *shapes; /* per extra input: r = row [1, ROW], c = column [rows, 1], m = mask row */
  dvm_dtype out;
  int big_bytes;     /* bytes per element read and written in full-size tensors */
} chain;

static const chain chains[] = {
    {"relu(x*w+b)", 3, "rr", DVM_F32, 8},
    {"gelu(x+b)", 2, "r", DVM_F32, 8},
    {"where(m,x,-inf)", 2, "m", DVM_F32, 8},
    {"exp(x-max)", 2, "c", DVM_F32, 8},
    {"f16(x*s)", 1, "", DVM_F16, 6},
};
#define NCHAINS (int)(sizeof chains / sizeof chains[0])

/* The program of chain k, through the builder. */
static void build(int k, void **payload, size_t *size) {
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  int x = dvm_fused_load(&b, dvm_fused_input(&b, DVM_F32)), y = -1;
  const char *s = chains[k].shapes;
  int in1 = s[0] ? dvm_fused_input(&b, s[0] == 'm' ? DVM_BOOL : DVM_F32) : -1;
  int in2 = s[0] && s[1] ? dvm_fused_input(&b, DVM_F32) : -1;
  dvm_fused_output(&b, chains[k].out);
  switch (k) {
  case 0:
    y = dvm_fused_op2(&b, DVM_FUSED_MUL, x, dvm_fused_load(&b, in1));
    y = dvm_fused_op2(&b, DVM_FUSED_ADD, y, dvm_fused_load(&b, in2));
    y = dvm_fused_op1(&b, DVM_FUSED_RELU, y);
    break;
  case 1:
    y = dvm_fused_op1(&b, DVM_FUSED_GELU, dvm_fused_op2(&b, DVM_FUSED_ADD, x, dvm_fused_load(&b, in1)));
    break;
  case 2:
    y = dvm_fused_where(&b, dvm_fused_load(&b, in1), x, dvm_fused_const_f32(&b, -INFINITY));
    break;
  case 3:
    y = dvm_fused_op1(&b, DVM_FUSED_EXP, dvm_fused_op2(&b, DVM_FUSED_SUB, x, dvm_fused_load(&b, in1)));
    break;
  case 4:
    y = dvm_fused_op2(&b, DVM_FUSED_MUL, x, dvm_fused_const_f32(&b, 0.125));
    break;
  }
  dvm_fused_store(&b, 0, y);
  die(dvm_fused_builder_finish(&b, payload, size));
}

/* What chain k gives for element (r, c), in plain C. */
static float reference(int k, dvm_tensor *const *in, int64_t r, int64_t c) {
  const float *x = dvm_tensor_ptr(in[0]);
  float v = x[r * ROW + c];
  const float *a = in[1] ? dvm_tensor_ptr(in[1]) : NULL, *b = in[2] ? dvm_tensor_ptr(in[2]) : NULL;
  switch (k) {
  case 0: return fmaxf(v * a[c] + b[c], 0.0f);
  case 1: { double u = (double)v + a[c]; return (float)(0.5 * u * erfc(-u / sqrt(2.0))); }
  case 2: return ((const uint8_t *)a)[c] ? v : -INFINITY;
  case 3: return expf(v - a[r]);
  default: return v * 0.125f;
  }
}

static float out_at(const dvm_tensor *o, int64_t i) {
  if (o->dtype == DVM_F32) return ((const float *)dvm_tensor_ptr(o))[i];
  uint16_t h = ((const uint16_t *)dvm_tensor_ptr(o))[i]; /* f16: decode it here, independently */
  int e = h >> 10 & 31, m = h & 1023;
  float mag = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(m + 1024), e - 25);
  return h >> 15 ? -mag : mag;
}

/* Checks every element of a sample of rows; returns the number wrong. */
static int64_t check(int k, dvm_tensor *const *in, const dvm_tensor *o, int64_t rows) {
  int64_t bad = 0;
  float tol = chains[k].out == DVM_F16 ? 1e-3f : 2e-6f;
  for (int64_t r = 0; r < rows; r += rows > 64 ? rows / 61 : 1)
    for (int64_t c = 0; c < ROW; c++) {
      float want = reference(k, in, r, c), got = out_at(o, r * ROW + c);
      if (!(got == want || fabsf(got - want) <= tol * (1.0f + fabsf(want)))) {
        if (bad++ < 3)
          fprintf(stderr, "bench_fused: %s: [%lld,%lld] = %g, want %g\n", chains[k].name,
                  (long long)r, (long long)c, got, want);
      }
    }
  return bad;
}

static double median(double *t, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      double s = t[j];
      t[j] = t[j - 1];
      t[j - 1] = s;
    }
  return t[n / 2];
}

/* One memcpy of `bytes` split over `threads` threads: seconds. */
static double time_copy(char *dst, const char *src, size_t bytes, int threads) {
  double t0 = now();
#pragma omp parallel num_threads(threads)
  {
    size_t part = bytes / (size_t)omp_get_num_threads() & ~(size_t)63;
    size_t s = part * (size_t)omp_get_thread_num();
    size_t n = omp_get_thread_num() == omp_get_num_threads() - 1 ? bytes - s : part;
    memcpy(dst + s, src + s, n);
  }
  return now() - t0;
}

int main(int argc, char **argv) {
  int quick = 0, iters = 9;
  int64_t elems = (int64_t)64 << 20;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--elems") == 0 && i + 1 < argc)
      elems = strtoll(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--chain") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: bench_fused [--quick] [--elems N] [--iters N] [--chain NAME]\n");
      return 2;
    }
  }
  if (quick) elems = 3 * ROW + 5 * ROW, iters = 1;
  if (iters < 1 || iters > 64) iters = 9;
  int64_t rows = elems / ROW > 0 ? elems / ROW : 1;
  elems = rows * ROW;

  uint64_t seed = 42;
  dvm_tensor *x = tensor(DVM_F32, rows, ROW), *row1 = tensor(DVM_F32, 1, ROW),
             *row2 = tensor(DVM_F32, 1, ROW), *col = tensor(DVM_F32, rows, 1),
             *mask = tensor(DVM_BOOL, 1, ROW), *y = tensor(DVM_F32, rows, ROW),
             *y16 = tensor(DVM_F16, rows, ROW);
  float *px = dvm_tensor_ptr(x);
  for (int64_t i = 0; i < elems; i++) px[i] = uniform(&seed);
  for (int64_t i = 0; i < ROW; i++) {
    ((float *)dvm_tensor_ptr(row1))[i] = uniform(&seed);
    ((float *)dvm_tensor_ptr(row2))[i] = uniform(&seed);
    ((uint8_t *)dvm_tensor_ptr(mask))[i] = uniform(&seed) > 0;
  }
  for (int64_t r = 0; r < rows; r++) ((float *)dvm_tensor_ptr(col))[r] = uniform(&seed);

  printf("fused elementwise vs memcpy: %lld x %d f32 (%.0f MiB per tensor), median of %d\n",
         (long long)rows, ROW, (double)elems * 4 / 1048576.0, iters);
  printf("%-16s %9s %7s %7s %7s  %9s %7s %7s %7s\n", "chain", "1t ms", "GB/s", "copy", "of copy",
         "2t ms", "GB/s", "copy", "of copy");
  const dvm_kernel_def *kd = dvm_ops_find("fused", DVM_DEVICE_CPU);
  if (!kd) die(dvm_status_new(DVM_NOT_FOUND, "no kernel \"fused\""));
  char json[1024];
  size_t jn = (size_t)snprintf(json, sizeof json, "{\"bench\":\"fused\",\"elems\":%lld",
                               (long long)elems);
  int64_t wrong = 0;
  for (int k = 0; k < NCHAINS; k++) {
    if (only && strcmp(only, chains[k].name) != 0) continue;
    void *payload;
    size_t size;
    build(k, &payload, &size);
    const char *s = chains[k].shapes;
    dvm_tensor *in[3] = {x, NULL, NULL};
    for (int j = 0; s[j]; j++)
      in[j + 1] = s[j] == 'm' ? mask : s[j] == 'c' ? col : j == 0 ? row1 : row2;
    dvm_tensor *out[1] = {chains[k].out == DVM_F16 ? y16 : y};
    double ms[3], gbs[3], copy_gbs[3];
    for (int th = 1; th <= 2; th++) {
      dvm_exec ex = {.threads = th};
      dvm_kernel_args a = {in, chains[k].nin, out, 1, NULL, 0, 0, payload, size, &ex};
      double tf[64], tc[64];
      die(kd->fn(&a)); /* warm */
      for (int it = 0; it < iters; it++) {
        tc[it] = time_copy(dvm_tensor_ptr(y), dvm_tensor_ptr(x), (size_t)elems * 4, th);
        double t0 = now();
        die(kd->fn(&a));
        tf[it] = now() - t0;
      }
      double sec = median(tf, iters);
      ms[th] = sec * 1e3;
      gbs[th] = (double)chains[k].big_bytes * (double)elems / sec / 1e9;
      copy_gbs[th] = 8.0 * (double)elems / median(tc, iters) / 1e9;
      if (chains[k].out == DVM_F32 || th == 2) wrong += check(k, in, out[0], rows);
    }
    printf("%-16s %9.2f %7.1f %7.1f %6.0f%%  %9.2f %7.1f %7.1f %6.0f%%\n", chains[k].name, ms[1],
           gbs[1], copy_gbs[1], 100 * gbs[1] / copy_gbs[1], ms[2], gbs[2], copy_gbs[2],
           100 * gbs[2] / copy_gbs[2]);
    jn += (size_t)snprintf(json + jn, sizeof json - jn, ",\"%s\":[%.3f,%.3f]", chains[k].name,
                           gbs[1] / copy_gbs[1], gbs[2] / copy_gbs[2]);
    free(payload);
  }
  printf("%s}\n", json);
  dvm_tensor *all[] = {x, row1, row2, col, mask, y, y16};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dvm_tensor_release(all[i]);
  if (wrong) {
    fprintf(stderr, "bench_fused: %lld wrong elements\n", (long long)wrong);
    return 1;
  }
  return 0;
}
