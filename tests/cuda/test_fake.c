/* dvm's CUDA runtime end to end on fake_cuda.c, a stand-in driver and
 * cuBLAS over host memory (meson points DVM_CUDA_DRIVER and DVM_CUBLAS at
 * it): device selection, entry-name resolution, copies, host syncs, pool
 * reuse, injected driver failures, cuBLAS products and gemm's C broadcast
 * (computed by the fake's host GEMM, checked against a plain loop here),
 * and the launcher of generated kernels (checked by its recorded launch). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"
#include "dvm/dlpack.h"
#include "dvm/dvm.h"
#include "harness.h"
#include "ops/cuda/gen_abi.h"
#include "payload_fixture.h"
#include "vm/asm.h"

typedef struct fake_launch {
  char entry[32];
  unsigned grid, block, shared;
  dvm_gen_params params;
} fake_launch;
static const fake_launch *(*last_launch)(void);
static int (*fake_count)(const char *what);
static int (*device_copy)(void *dst, const void *src, size_t n); /* device memory is closed to the host */

static dvm_module *load(const char *text) {
  dvm_module *built = NULL, *m = NULL;
  uint8_t *bytes = NULL;
  size_t size = 0;
  CHECK_OK(dvm_asm_parse(text, strlen(text), "fake.dvms", &built));
  if (!built) return NULL;
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, &m));
  dvm_module_release(built);
  free(bytes);
  return m;
}

static dvm_vm *cuda_vm_with(dvm_module *m, int tf32, int results_on_device) {
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.device = DVM_DEVICE_CUDA;
  o.allow_tf32 = tf32;
  o.results_on_device = results_on_device;
  dvm_vm *vm = NULL;
  CHECK_OK(dvm_vm_create(m, &o, &vm));
  return vm;
}

static dvm_vm *cuda_vm(dvm_module *m) { return cuda_vm_with(m, 0, 0); }

static dvm_tensor *randn(int rank, const int64_t *dims, unsigned *seed) {
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(DVM_F32, rank, dims, &t));
  float *d = dvm_tensor_data(t);
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    *seed = *seed * 1103515245u + 12345u;
    d[i] = (float)((*seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return t;
}

static const char matmul_prog[] =
    ".kernel matmul cuda 1\n"
    ".shapefn matmul\n"
    ".func \"main@cuda\" regs=7\n"
    "  .param a tensor f32 [?, ?, ?, ?]\n"
    "  .param b tensor f32 [?, ?, ?]\n"
    "  .result y tensor f32 [?, ?, ?, ?]\n"
    "  copy r2, r0, cuda\n"
    "  copy r3, r1, cuda\n"
    "  shapefn matmul, (r4), (r2, r3)\n"
    "  alloc r5, f32, r4, cuda\n"
    "  invoke matmul, -, (r5), (r2, r3), ()\n"
    "  copy r6, r5, cpu\n"
    "  ret (r6)\n"
    ".end\n";

/* a [A0, A1, m, k] x b [B0, m?.. k, n] with numpy broadcasting of dims 0-1
 * (b's batch dim aligns with a's dim 1) */
static void test_matmul(void) {
  dvm_module *m = load(matmul_prog);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (!vm) return;
  int f = -1;
  CHECK_OK(dvm_vm_find_function(vm, "main", &f));
  CHECK(f == 0);
  static const int64_t cases[][7] = {/* A0 A1 m k | B0 n */
                                     {1, 1, 1, 1, 1, 1}, {2, 1, 3, 4, 5, 6}, {3, 7, 13, 5, 7, 11},
                                     {1, 3, 65, 17, 1, 33}, {2, 2, 1, 129, 1, 3}};
  unsigned seed = 5;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t *s = cases[c];
    int64_t da[4] = {s[0], s[1], s[2], s[3]}, db[3] = {s[4], s[3], s[5]};
    dvm_tensor *a = randn(4, da, &seed), *b = randn(3, db, &seed);
    dvm_value args[2] = {dvm_value_tensor(a), dvm_value_tensor(b)}, res = {0};
    CHECK_OK(dvm_vm_invoke(vm, f, args, 2, &res, 1));
    int64_t b1 = s[1] > s[4] ? s[1] : s[4], M = s[2], K = s[3], N = s[5];
    if (res.kind == DVM_VAL_TENSOR) {
      const int64_t *dy = dvm_tensor_dims(res.u.tensor);
      CHECK(dvm_tensor_device(res.u.tensor) == DVM_DEVICE_CPU);
      CHECK(dy[0] == s[0] && dy[1] == b1 && dy[2] == M && dy[3] == N);
      const float *A = dvm_tensor_data(a), *B = dvm_tensor_data(b), *Y = dvm_tensor_data(res.u.tensor);
      double worst = 0;
      for (int64_t i0 = 0; i0 < s[0]; i0++)
        for (int64_t i1 = 0; i1 < b1; i1++)
          for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
              const float *pa = A + ((i0 * s[1] + (s[1] == 1 ? 0 : i1)) * M + i) * K;
              const float *pb = B + (s[4] == 1 ? 0 : i1) * K * N + j;
              double acc = 0;
              for (int64_t l = 0; l < K; l++) acc += (double)pa[l] * pb[l * N];
              double got = Y[((i0 * b1 + i1) * M + i) * N + j];
              if (fabs(got - acc) > worst) worst = fabs(got - acc);
            }
      if (worst > 1e-4) fprintf(stderr, "matmul case %zu: worst error %g\n", c, worst);
      CHECK(worst <= 1e-4);
    }
    dvm_value_clear(&res);
    dvm_tensor_release(a);
    dvm_tensor_release(b);
  }
  dvm_vm_stats st;
  dvm_vm_get_stats(vm, &st);
  /* each invocation waits once: for its result */
  CHECK(st.host_syncs == st.invocations);
  /* the same shapes again come from the cache */
  uint64_t allocs = st.pool[DVM_DEVICE_CUDA].allocs;
  int64_t da[4] = {1, 1, 1, 1}, db[3] = {1, 1, 1};
  dvm_tensor *a = randn(4, da, &seed), *b = randn(3, db, &seed);
  dvm_value args[2] = {dvm_value_tensor(a), dvm_value_tensor(b)}, res = {0};
  CHECK_OK(dvm_vm_invoke(vm, f, args, 2, &res, 1));
  dvm_value_clear(&res);
  dvm_vm_get_stats(vm, &st);
  CHECK(st.pool[DVM_DEVICE_CUDA].allocs == allocs && st.pool[DVM_DEVICE_CUDA].reuses >= 3);
  /* exact f32 products by default (CUBLAS_COMPUTE_32F); TF32 where the VM allows it */
  CHECK(fake_count("compute") == 68);
  dvm_vm *fast = cuda_vm_with(m, 1, 0);
  if (fast) {
    CHECK_OK(dvm_vm_invoke(fast, f, args, 2, &res, 1));
    dvm_value_clear(&res);
    CHECK(fake_count("compute") == 77);
    dvm_vm_destroy(fast);
  }
  /* a driver failure is a status naming the call; the VM stays usable */
  dvm_vm_destroy(vm);
  vm = cuda_vm(m);
  setenv("FAKE_CUDA_FAIL", "cuMemAlloc_v2", 1);
  CHECK_ERR(dvm_vm_invoke(vm, f, args, 2, &res, 1), DVM_RESOURCE_EXHAUSTED,
            "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2: fake failure)");
  unsetenv("FAKE_CUDA_FAIL");
  CHECK_OK(dvm_vm_invoke(vm, f, args, 2, &res, 1));
  dvm_value_clear(&res);
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

static const char const_prog[] =
    ".const w f32 [2, 3] x\"0000803f0000004000004040000080400000a0400000c040\"\n"
    ".kernel matmul cuda 1\n"
    ".shapefn matmul\n"
    ".func \"main@cuda\" regs=6\n"
    "  .param x tensor f32 [?, 2]\n"
    "  .result y tensor f32 [?, 3]\n"
    "  copy r1, r0, cuda\n"
    "  const r2, $w\n"
    "  copy r2, r2, cuda\n"
    "  shapefn matmul, (r3), (r1, r2)\n"
    "  alloc r4, f32, r3, cuda\n"
    "  invoke matmul, -, (r4), (r1, r2), ()\n"
    "  copy r5, r4, cpu\n"
    "  ret (r5)\n"
    ".end\n";

/* Two views of one constant, [2, 3] and [3, 2]: each its own device copy,
 * returned side by side, the second made per invocation and freed. */
static const char views_prog[] =
    ".const w f32 [2, 3] x\"0000803f0000004000004040000080400000a0400000c040\"\n"
    ".func \"main@cuda\" regs=9\n"
    "  .result a tensor f32 [2, 3]\n"
    "  .result b tensor f32 [3, 2]\n"
    "  const r0, $w\n"
    "  imm r1, 3\n"
    "  imm r2, 2\n"
    "  make_shape r3, (r1, r2)\n"
    "  reshape r4, r0, r3\n"
    "  copy r5, r0, cuda\n"
    "  copy r6, r4, cuda\n"
    "  copy r7, r5, cpu\n"
    "  copy r8, r6, cpu\n"
    "  ret (r7, r8)\n"
    ".end\n";

static void test_constant_views(void) {
  dvm_module *m = load(views_prog);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  for (int i = 0; vm && i < 3; i++) {
    dvm_value res[2] = {{0}};
    CHECK_OK(dvm_vm_invoke(vm, 0, NULL, 0, res, 2));
    if (res[0].kind != DVM_VAL_TENSOR || res[1].kind != DVM_VAL_TENSOR) continue;
    const float *a = dvm_tensor_data(res[0].u.tensor), *b = dvm_tensor_data(res[1].u.tensor);
    CHECK(dvm_tensor_dims(res[0].u.tensor)[0] == 2 && dvm_tensor_dims(res[1].u.tensor)[0] == 3);
    for (int k = 0; k < 6; k++) CHECK(a[k] == (float)(k + 1) && b[k] == (float)(k + 1));
    dvm_value_clear(&res[0]);
    dvm_value_clear(&res[1]);
  }
  dvm_vm_stats st;
  if (vm) dvm_vm_get_stats(vm, &st);
  CHECK(vm && st.pool[DVM_DEVICE_CUDA].in_use == 512); /* the two copies, kept */
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

/* A module constant is uploaded once per VM, then shared. */
static void test_constants(void) {
  dvm_module *m = load(const_prog);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (!vm) return;
  int64_t dx[2] = {1, 2};
  dvm_tensor *x = NULL;
  CHECK_OK(dvm_tensor_create(DVM_F32, 2, dx, &x));
  float *px = dvm_tensor_data(x);
  px[0] = 1, px[1] = 2;
  dvm_value arg = dvm_value_tensor(x), res = {0};
  dvm_vm_stats first, second;
  for (int i = 0; i < 2; i++) {
    CHECK_OK(dvm_vm_invoke(vm, 0, &arg, 1, &res, 1));
    const float *y = res.kind == DVM_VAL_TENSOR ? dvm_tensor_data(res.u.tensor) : NULL;
    CHECK(y && y[0] == 9 && y[1] == 12 && y[2] == 15);
    dvm_value_clear(&res);
    dvm_vm_get_stats(vm, i ? &second : &first);
  }
  /* the second run allocated nothing, and the weight's copy stays */
  CHECK(second.pool[DVM_DEVICE_CUDA].allocs == first.pool[DVM_DEVICE_CUDA].allocs);
  CHECK(second.pool[DVM_DEVICE_CUDA].in_use == 256 && first.pool[DVM_DEVICE_CUDA].in_use == 256);
  dvm_tensor_release(x);
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

static const char gemm_prog[] =
    ".kernel gemm cuda 1\n"
    ".shapefn gemm\n"
    ".func \"main@cuda\" regs=16\n"
    "  .param a tensor f32 [?, ?]\n"
    "  .param b tensor f32 [?, ?]\n"
    "  .param c tensor f32 [?, ?]\n"
    "  .param ta int\n"
    "  .param tb int\n"
    "  .param alpha float\n"
    "  .param beta float\n"
    "  .result y tensor f32 [?, ?]\n"
    "  copy r7, r0, cuda\n"
    "  copy r8, r1, cuda\n"
    "  copy r9, r2, cuda\n"
    "  shapefn gemm, (r10), (r7, r8, r9, r3, r4, r5, r6)\n"
    "  alloc r11, f32, r10, cuda\n"
    "  invoke gemm, -, (r11), (r7, r8, r9), (r3, r4, r5, r6)\n"
    "  copy r12, r11, cpu\n"
    "  ret (r12)\n"
    ".end\n";

static void test_gemm(void) {
  dvm_module *m = load(gemm_prog);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (!vm) return;
  static const int64_t cases[][7] = {/* M K N ta tb cr cc (C's dims) */
                                     {3, 5, 7, 0, 0, 3, 7}, {3, 5, 7, 1, 0, 1, 7}, {4, 2, 6, 0, 1, 4, 1},
                                     {5, 3, 2, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 1, 1}, {17, 13, 1, 0, 1, 17, 1}};
  unsigned seed = 9;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const int64_t *s = cases[c];
    int64_t M = s[0], K = s[1], N = s[2], ta = s[3], tb = s[4];
    int64_t da[2] = {ta ? K : M, ta ? M : K}, db[2] = {tb ? N : K, tb ? K : N}, dc[2] = {s[5], s[6]};
    dvm_tensor *a = randn(2, da, &seed), *b = randn(2, db, &seed), *ct = randn(2, dc, &seed);
    double alpha = 0.5, beta = -2.0;
    dvm_value args[7] = {dvm_value_tensor(a), dvm_value_tensor(b), dvm_value_tensor(ct),
                         dvm_value_int(ta), dvm_value_int(tb), dvm_value_float(alpha),
                         dvm_value_float(beta)},
              res = {0};
    CHECK_OK(dvm_vm_invoke(vm, 0, args, 7, &res, 1));
    if (res.kind == DVM_VAL_TENSOR) {
      const float *A = dvm_tensor_data(a), *B = dvm_tensor_data(b), *C = dvm_tensor_data(ct);
      const float *Y = dvm_tensor_data(res.u.tensor);
      double worst = 0;
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          double acc = 0;
          for (int64_t l = 0; l < K; l++)
            acc += (double)(ta ? A[l * M + i] : A[i * K + l]) * (tb ? B[j * K + l] : B[l * N + j]);
          double want = alpha * acc + beta * C[(s[5] == 1 ? 0 : i) * s[6] + (s[6] == 1 ? 0 : j)];
          if (fabs(Y[i * N + j] - want) > worst) worst = fabs(Y[i * N + j] - want);
        }
      if (worst > 1e-4) fprintf(stderr, "gemm case %zu: worst error %g\n", c, worst);
      CHECK(worst <= 1e-4);
    }
    dvm_value_clear(&res);
    dvm_tensor_release(a);
    dvm_tensor_release(b);
    dvm_tensor_release(ct);
  }
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

static const char gen_prog_head[] = ".kernel gen cuda 9 x\"";
static const char gen_prog_tail[] =
    "\"\n"
    ".func \"main@cuda\" regs=9\n"
    "  .param x tensor f32 [?, ?]\n"
    "  .param s tensor f32 *\n"
    "  .param b tensor f32 [?]\n"
    "  .param v int\n"
    "  .result y tensor f32 [?, ?]\n"
    "  copy r4, r0, cuda\n"
    "  copy r5, r1, cuda\n"
    "  copy r6, r2, cuda\n"
    "  shape_of r7, r4\n"
    "  alloc r8, f32, r7, cuda\n"
    "  invoke gen, r3, (r8), (r4, r5, r6), ()\n"
    "  ret (r8)\n"
    ".end\n";

static dvm_status *run_gen(dvm_vm *vm, int64_t rows, int64_t cols, int64_t ns, int64_t nb, int64_t v) {
  unsigned seed = 1;
  int64_t dx[2] = {rows, cols};
  dvm_tensor *x = randn(2, dx, &seed), *s = randn(1, &ns, &seed), *b = randn(1, &nb, &seed);
  dvm_value args[4] = {dvm_value_tensor(x), dvm_value_tensor(s), dvm_value_tensor(b), dvm_value_int(v)};
  dvm_value res = {0};
  dvm_status *st = dvm_vm_invoke(vm, 0, args, 4, &res, 1);
  /* the program returns its device tensor; the VM delivers it to the host */
  if (!st) CHECK(res.kind == DVM_VAL_TENSOR && dvm_tensor_device(res.u.tensor) == DVM_DEVICE_CPU);
  dvm_value_clear(&res);
  dvm_tensor_release(x);
  dvm_tensor_release(s);
  dvm_tensor_release(b);
  return st;
}

/* ROWS over x [3, 5] with a scale s of shape ds (rank 2) */
static dvm_status *run_gen_scale(dvm_vm *vm, const int64_t *ds) {
  unsigned seed = 2;
  int64_t dx[2] = {3, 5}, nb = 5;
  dvm_tensor *x = randn(2, dx, &seed), *s = randn(2, ds, &seed), *b = randn(1, &nb, &seed);
  dvm_value args[4] = {dvm_value_tensor(x), dvm_value_tensor(s), dvm_value_tensor(b), dvm_value_int(5)};
  dvm_value res = {0};
  dvm_status *st = dvm_vm_invoke(vm, 0, args, 4, &res, 1);
  dvm_value_clear(&res);
  dvm_tensor_release(x);
  dvm_tensor_release(s);
  dvm_tensor_release(b);
  return st;
}

/* A module of kernel "gen" with this payload, and the function `tail` */
static dvm_module *payload_module(const uint8_t *payload, const char *tail) {
  size_t n = strlen(gen_prog_head) + 2 * TOTAL + strlen(tail) + 1;
  char *text = malloc(n), *w = text;
  w += sprintf(w, "%s", gen_prog_head);
  for (int i = 0; i < TOTAL; i++) w += sprintf(w, "%02x", payload[i]);
  sprintf(w, "%s", tail);
  dvm_module *m = load(text);
  free(text);
  return m;
}

static dvm_module *gen_module(int kind) {
  uint8_t payload[TOTAL];
  build(payload);
  payload[6] = (uint8_t)kind;
  if (kind == DVM_GEN_ROWS) payload[CLASSES_AT + 1] = DVM_GEN_SUFFIX; /* a layer norm's scale */
  return payload_module(payload, gen_prog_tail);
}

/* ROWS: one block per row of input 0's innermost dim, n = that dim */
static void test_gen_rows(void) {
  dvm_module *m = gen_module(DVM_GEN_ROWS);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (vm) {
    /* x [3, 5]: 3 rows of 5, variant 5; both configs take 1 step: the first */
    CHECK_OK(run_gen(vm, 3, 5, 1, 5, 5));
    const fake_launch *l = last_launch();
    CHECK(strcmp(l->entry, "dvm_v5") == 0 && l->grid == 3 && l->block == 128);
    CHECK(l->params.n == 5 && l->params.rows == 3);
    CHECK_ERR(run_gen(vm, 3, 5, 1, 5, 7), DVM_INVALID_ARGUMENT, "expected n mod 8 = 5");
    /* input 1 as a SUFFIX of a ROWS kernel (a layer norm's scale): the
     * kernel reads n elements, or one; [1, 5] and [1, 1] are those, [3, 5]
     * has the reference's dims but is neither */
    CHECK_OK(run_gen_scale(vm, (const int64_t[]){1, 5}));
    CHECK_OK(run_gen_scale(vm, (const int64_t[]){1, 1}));
    CHECK_ERR(run_gen_scale(vm, (const int64_t[]){3, 5}), DVM_INVALID_ARGUMENT,
              "input 1 is f32[3,5], which its class \"suffix\" does not allow");
  }
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

static void test_gen(void) {
  dvm_module *m = gen_module(DVM_GEN_ELEMENTWISE);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (!vm) return;
  int modules = fake_count("modules");
  /* x [3, 5]: n = 15, variant 15 mod 8 = 7; config 1 (256 x 1) is one wave
   * of 1 step, config 0 one wave of 4 */
  CHECK_OK(run_gen(vm, 3, 5, 1, 5, 7));
  const fake_launch *l = last_launch();
  CHECK(strcmp(l->entry, "dvm_v7") == 0 && l->grid == 1 && l->block == 256 && l->shared == 1024);
  const dvm_gen_params *p = &l->params;
  CHECK(p->n == 15 && p->rows == 1 && p->dims[4] == 3 && p->dims[5] == 5 && p->dims[0] == 1);
  CHECK(p->strides[0][4] == 5 && p->strides[0][5] == 1 && p->strides[0][3] == 0);
  CHECK(p->strides[1][5] == 0 && p->strides[2][4] == 0 && p->strides[2][5] == 1);
  CHECK(p->numel[0] == 15 && p->numel[1] == 1 && p->numel[2] == 5);
  CHECK(p->ptr[0] && p->ptr[1] && p->ptr[2] && p->ptr[3] && p->ptr[4] == NULL);
  /* the baseline variant, and a second call that loads nothing again */
  CHECK_OK(run_gen(vm, 3, 5, 1, 5, 8));
  CHECK(strcmp(last_launch()->entry, "dvm_b") == 0);
  CHECK(fake_count("modules") == modules + 1);
  /* x [64, 64]: 4096 elements, config 0 is 8 blocks of 4 steps (one wave),
   * config 1 16 blocks of 1 step: config 1 again */
  CHECK_OK(run_gen(vm, 64, 64, 1, 64, 0));
  CHECK(strcmp(last_launch()->entry, "dvm_v0") == 0 && last_launch()->grid == 16);
  /* what the launcher refuses, before launching */
  int launches = fake_count("launches");
  CHECK_ERR(run_gen(vm, 3, 5, 1, 5, 3), DVM_INVALID_ARGUMENT,
            "variant 3 does not fit n = 15: expected n mod 8 = 7, or 8");
  CHECK_ERR(run_gen(vm, 3, 5, 2, 5, 7), DVM_INVALID_ARGUMENT,
            "input 1 is f32[2], which its class \"scalar\" does not allow");
  CHECK_ERR(run_gen(vm, 3, 5, 1, 4, 7), DVM_INVALID_ARGUMENT,
            "input 2 is f32[4], which its class \"strided\" does not allow");
  /* an i32 x would be read as f32 (the program has no guard to stop it) */
  int64_t dx[2] = {3, 5}, one = 1, five = 5;
  unsigned seed = 3;
  dvm_tensor *xi = NULL, *sv = randn(1, &one, &seed), *bv = randn(1, &five, &seed);
  CHECK_OK(dvm_tensor_create(DVM_I32, 2, dx, &xi));
  memset(dvm_tensor_data(xi), 0, dvm_tensor_nbytes(xi));
  dvm_value args[4] = {dvm_value_tensor(xi), dvm_value_tensor(sv), dvm_value_tensor(bv), dvm_value_int(7)};
  dvm_value res = {0};
  CHECK_ERR(dvm_vm_invoke(vm, 0, args, 4, &res, 1), DVM_INVALID_ARGUMENT,
            "gen: input 0 is i32; the kernel was generated for f32");
  dvm_tensor_release(xi);
  dvm_tensor_release(sv);
  dvm_tensor_release(bv);
  CHECK(fake_count("launches") == launches);
  dvm_vm_destroy(vm);
  /* DVM_CUDA_BASELINE=1: every call runs the bounds-checked baseline */
  setenv("DVM_CUDA_BASELINE", "1", 1);
  vm = cuda_vm(m);
  CHECK_OK(run_gen(vm, 3, 5, 1, 5, 7));
  CHECK(strcmp(last_launch()->entry, "dvm_b") == 0);
  unsetenv("DVM_CUDA_BASELINE");
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

/* A transpose: the one input PERMUTED, read through strides the launcher
 * computes from the call's perm attribute; x [2, 3, 5] transposed by perm
 * into an output of shape `out` (the launcher's check, not a shape
 * function's). */
static const char perm_tail[] =
    "\"\n"
    ".func \"main@cuda\" regs=12\n"
    "  .param x tensor f32 [?, ?, ?]\n"
    "  .param p0 int\n  .param p1 int\n  .param p2 int\n"
    "  .param o0 int\n  .param o1 int\n  .param o2 int\n"
    "  .param v int\n"
    "  .result y tensor f32 *\n"
    "  copy r8, r0, cuda\n"
    "  make_shape r9, (r1, r2, r3)\n"
    "  make_shape r10, (r4, r5, r6)\n"
    "  alloc r11, f32, r10, cuda\n"
    "  invoke gen, r7, (r11), (r8), (r9)\n"
    "  ret (r11)\n"
    ".end\n";

static dvm_status *run_perm(dvm_vm *vm, const int64_t *perm, const int64_t *out, int64_t v) {
  unsigned seed = 4;
  int64_t dx[3] = {2, 3, 5};
  dvm_tensor *x = randn(3, dx, &seed);
  dvm_value args[8] = {dvm_value_tensor(x)};
  for (int d = 0; d < 3; d++) args[1 + d] = dvm_value_int(perm[d]), args[4 + d] = dvm_value_int(out[d]);
  args[7] = dvm_value_int(v);
  dvm_value res = {0};
  dvm_status *st = dvm_vm_invoke(vm, 0, args, 8, &res, 1);
  dvm_value_clear(&res);
  dvm_tensor_release(x);
  return st;
}

static void test_gen_permuted(void) {
  uint8_t payload[TOTAL];
  build(payload);
  payload[8] = 1;
  payload[CLASSES_AT] = DVM_GEN_PERMUTED, payload[CLASSES_AT + 1] = payload[CLASSES_AT + 2] = 0;
  dvm_module *m = payload_module(payload, perm_tail);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (vm) {
    /* n = 30, variant 30 mod 8 = 6; output dim d reads x's dim perm[d] */
    CHECK_OK(run_perm(vm, (const int64_t[]){2, 0, 1}, (const int64_t[]){5, 2, 3}, 6));
    const dvm_gen_params *p = &last_launch()->params;
    CHECK(strcmp(last_launch()->entry, "dvm_v6") == 0 && p->n == 30);
    CHECK(p->dims[3] == 5 && p->dims[4] == 2 && p->dims[5] == 3 && p->dims[2] == 1);
    CHECK(p->strides[0][3] == 1 && p->strides[0][4] == 15 && p->strides[0][5] == 5);
    CHECK(p->strides[0][2] == 0 && p->ptr[0] && p->ptr[1] && p->ptr[2] == NULL);
    int launches = fake_count("launches");
    CHECK_ERR(run_perm(vm, (const int64_t[]){2, 2, 1}, (const int64_t[]){5, 2, 3}, 6),
              DVM_INVALID_ARGUMENT, "perm [2,2,1] is not a permutation");
    CHECK_ERR(run_perm(vm, (const int64_t[]){2, 0, 1}, (const int64_t[]){5, 3, 2}, 6),
              DVM_INVALID_ARGUMENT, "output 0 is f32[5,3,2]; the permuted input gives f32[5,2,3]");
    CHECK(fake_count("launches") == launches);
  }
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

/* A gather of x [2, 7, 5] by i64 indices along axis a into an output of
 * shape (o0, o1, o2), copied to the host: that copy is the host wait at
 * which a bad index recorded on the device is reported. */
static const char gather_tail[] =
    "\"\n"
    ".func \"main@cuda\" regs=12\n"
    "  .param x tensor f32 [?, ?, ?]\n"
    "  .param i tensor i64 *\n"
    "  .param a int\n"
    "  .param o0 int\n  .param o1 int\n  .param o2 int\n"
    "  .param v int\n"
    "  .result y tensor f32 *\n"
    "  copy r7, r0, cuda\n"
    "  copy r8, r1, cuda\n"
    "  make_shape r9, (r3, r4, r5)\n"
    "  alloc r10, f32, r9, cuda\n"
    "  invoke gen, r6, (r10), (r7, r8), (r2)\n"
    "  copy r11, r10, cpu\n"
    "  ret (r11)\n"
    ".end\n";

static dvm_status *run_gather(dvm_vm *vm, int64_t nidx, int64_t axis, const int64_t *out, int64_t v) {
  unsigned seed = 5;
  int64_t dx[3] = {2, 7, 5};
  dvm_tensor *x = randn(3, dx, &seed), *idx = NULL;
  CHECK_OK(dvm_tensor_create(DVM_I64, 1, &nidx, &idx));
  for (int64_t j = 0; j < nidx; j++) ((int64_t *)dvm_tensor_data(idx))[j] = j % 7;
  dvm_value args[8] = {dvm_value_tensor(x), dvm_value_tensor(idx), dvm_value_int(axis)};
  for (int d = 0; d < 3; d++) args[3 + d] = dvm_value_int(out[d]);
  args[6] = dvm_value_int(v);
  dvm_value res = {0};
  dvm_status *st = dvm_vm_invoke(vm, 0, args, 7, &res, 1);
  dvm_value_clear(&res);
  dvm_tensor_release(x);
  dvm_tensor_release(idx);
  return st;
}

static void test_gen_gather(void) {
  uint8_t payload[TOTAL];
  build(payload);
  payload[6] = DVM_GEN_GATHER, payload[8] = 2, payload[CLASSES_AT + 2] = 0;
  payload[DTYPES_AT + 1] = DVM_I64;
  dvm_module *m = payload_module(payload, gather_tail);
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  if (vm) {
    /* 3 indices along axis 1: y [2, 3, 5], n = 30, variant 6 */
    CHECK_OK(run_gather(vm, 3, 1, (const int64_t[]){2, 3, 5}, 6));
    const dvm_gen_params *p = &last_launch()->params;
    CHECK(strcmp(last_launch()->entry, "dvm_v6") == 0 && p->n == 30);
    CHECK(p->dims[2] == 1 && p->dims[3] == 2 && p->dims[4] == 3 && p->dims[5] == 5 && p->numel[0] == 7);
    CHECK(p->ptr[0] && p->ptr[1] && p->ptr[2] && p->ptr[3] && p->ptr[4] == NULL);
    /* what a kernel records (the stand-in runs none here: its images are
     * made up) fails the next host wait, once: the record is cleared */
    void *record = p->ptr[3];
    long long words[4] = {-1, 0, 0, 0};
    CHECK(device_copy(words, record, sizeof words) == 0 && words[0] == 0);
    CHECK(device_copy(record, (const long long[]){1, 2, 9, 7}, sizeof words) == 0);
    dvm_vm_stats st0, st1;
    dvm_vm_get_stats(vm, &st0);
    CHECK_ERR(run_gather(vm, 3, 1, (const int64_t[]){2, 3, 5}, 6), DVM_INVALID_ARGUMENT,
              "gather on cuda: indices[2] = 9 is out of range for an axis of size 7 (checked on "
              "the device, reported at the next host wait)");
    dvm_vm_get_stats(vm, &st1);
    CHECK(st1.host_syncs == st0.host_syncs + 1);
    /* the clear is queued on the VM's stream; the next call runs it */
    CHECK_OK(run_gather(vm, 3, 1, (const int64_t[]){2, 3, 5}, 6));
    CHECK(device_copy(words, record, sizeof words) == 0 && words[0] == 0);
    /* the launcher checks the call as the CPU gather's shape function does */
    int launches = fake_count("launches");
    CHECK_ERR(run_gather(vm, 3, 1, (const int64_t[]){2, 5, 3}, 6), DVM_INVALID_ARGUMENT,
              "output 0 is f32[2,5,3]; the gather gives f32[2,3,5]");
    CHECK_ERR(run_gather(vm, 3, 3, (const int64_t[]){2, 3, 5}, 6), DVM_INVALID_ARGUMENT, "axis");
    CHECK_ERR(run_gather(vm, 3, 1, (const int64_t[]){2, 3, 5}, 5), DVM_INVALID_ARGUMENT,
              "variant 5 does not fit n = 30");
    CHECK(fake_count("launches") == launches);
  }
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

/* A device tensor the function returns: copied to the host by default (a
 * counted wait); with results_on_device left there, the VM having waited
 * for it, and handed on through DLPack as a CUDA tensor. It outlives its VM. */
static void test_results_on_device(void) {
  dvm_module *m = gen_module(DVM_GEN_ELEMENTWISE);
  if (!m) return;
  unsigned seed = 6;
  int64_t dx[2] = {3, 5}, one = 1, five = 5;
  dvm_tensor *x = randn(2, dx, &seed), *s = randn(1, &one, &seed), *b = randn(1, &five, &seed);
  dvm_value args[4] = {dvm_value_tensor(x), dvm_value_tensor(s), dvm_value_tensor(b), dvm_value_int(7)};
  dvm_tensor *kept = NULL;
  for (int on_device = 0; on_device < 2; on_device++) {
    dvm_vm *vm = cuda_vm_with(m, 0, on_device);
    if (!vm) break;
    dvm_value res = {0};
    dvm_vm_stats st;
    CHECK_OK(dvm_vm_invoke(vm, 0, args, 4, &res, 1));
    dvm_vm_get_stats(vm, &st);
    CHECK(st.host_syncs == 1 && res.kind == DVM_VAL_TENSOR);
    if (res.kind == DVM_VAL_TENSOR) {
      dvm_tensor *y = res.u.tensor;
      CHECK(dvm_tensor_device(y) == (on_device ? DVM_DEVICE_CUDA : DVM_DEVICE_CPU));
      CHECK(dvm_tensor_numel(y) == 15);
      if (on_device) {
        DLManagedTensor *dl = NULL;
        CHECK_OK(dvm_tensor_to_dlpack(y, &dl));
        if (dl) {
          CHECK(dl->dl_tensor.device.device_type == kDLCUDA && dl->dl_tensor.data == dvm_tensor_data(y));
          dl->deleter(dl);
        }
        kept = y;
        res.kind = DVM_VAL_NONE; /* held past the VM */
      }
    }
    dvm_value_clear(&res);
    dvm_vm_destroy(vm);
  }
  /* its pool lives until this last storage goes */
  if (kept) CHECK(dvm_tensor_device(kept) == DVM_DEVICE_CUDA);
  dvm_tensor_release(kept);
  dvm_tensor_release(x);
  dvm_tensor_release(s);
  dvm_tensor_release(b);
  dvm_module_release(m);
}

/* A sequence result (a tuple, nested) holding tensors on the device comes
 * back with every tensor on the host, values intact. */
static int host_copy_of(const dvm_value *v, const dvm_tensor *x) {
  return v && v->kind == DVM_VAL_TENSOR && dvm_tensor_device(v->u.tensor) == DVM_DEVICE_CPU &&
         dvm_tensor_numel(v->u.tensor) == dvm_tensor_numel(x) &&
         !memcmp(dvm_tensor_data(v->u.tensor), dvm_tensor_data(x), dvm_tensor_nbytes(x));
}

static void test_tuple_results(void) {
  dvm_module *m = load(".func \"main@cuda\" regs=6\n"
                       "  .param x tensor f32 [?]\n"
                       "  .result s tuple f32\n"
                       "  copy r1, r0, cuda\n"
                       "  tuple r2, (r1, r0)\n"
                       "  imm r5, 0\n"
                       "  tuple r3, (r2)\n"
                       "  insert r4, r3, r5, r1\n"
                       "  ret (r4)\n"
                       ".end\n");
  if (!m) return;
  dvm_vm *vm = cuda_vm(m);
  unsigned seed = 9;
  int64_t n = 4;
  dvm_tensor *x = randn(1, &n, &seed);
  dvm_value arg = dvm_value_tensor(x), res = {0};
  if (vm) {
    CHECK_OK(dvm_vm_invoke(vm, 0, &arg, 1, &res, 1));
    CHECK(res.kind == DVM_VAL_TUPLE && dvm_tuple_size(res.u.tuple) == 2);
    if (res.kind == DVM_VAL_TUPLE && dvm_tuple_size(res.u.tuple) == 2) {
      const dvm_value *inner = dvm_tuple_get(res.u.tuple, 1);
      CHECK(host_copy_of(dvm_tuple_get(res.u.tuple, 0), x));
      CHECK(inner->kind == DVM_VAL_TUPLE && dvm_tuple_size(inner->u.tuple) == 2);
      if (inner->kind == DVM_VAL_TUPLE)
        CHECK(host_copy_of(dvm_tuple_get(inner->u.tuple, 0), x) && host_copy_of(dvm_tuple_get(inner->u.tuple, 1), x));
    }
  }
  dvm_value_clear(&res);
  dvm_vm_destroy(vm);
  dvm_tensor_release(x);
  dvm_module_release(m);
}

static void test_device(void) {
  char buf[256];
  CHECK_OK(dvm_device_probe(DVM_DEVICE_CUDA, buf, sizeof buf));
  CHECK(strcmp(buf, "cuda:0 (dvm fake GPU, sm_90, 132 SMs)") == 0);
  dvm_module *m = load(matmul_prog);
  if (!m) return;
  CHECK(dvm_device_auto(m, buf, sizeof buf) == DVM_DEVICE_CUDA);
  CHECK(strcmp(buf, "cuda:0 (dvm fake GPU, sm_90, 132 SMs)") == 0);
  dvm_module_release(m);
  static const char cpu_only[] = ".func main regs=1\n  .result y int\n  imm r0, 1\n  ret (r0)\n.end\n";
  m = load(cpu_only);
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.device = DVM_DEVICE_CUDA;
  dvm_vm *vm = NULL;
  CHECK_ERR(dvm_vm_create(m, &o, &vm), DVM_FAILED_PRECONDITION, "compiled for the CPU only");
  dvm_module_release(m);
}

int main(void) {
  void *fake = dlopen(getenv("DVM_CUDA_DRIVER"), RTLD_NOW | RTLD_LOCAL);
  if (!fake) {
    fprintf(stderr, "cannot open the fake driver: %s\n", dlerror());
    return 1;
  }
  *(void **)&last_launch = dlsym(fake, "fake_last_launch");
  *(void **)&fake_count = dlsym(fake, "fake_count");
  *(void **)&device_copy = dlsym(fake, "fake_device_copy");
  if (!last_launch || !fake_count || !device_copy) return 1;
  test_device();
  test_matmul();
  test_constants();
  test_constant_views();
  test_gemm();
  test_gen();
  test_gen_permuted();
  test_gen_gather();
  test_results_on_device();
  test_tuple_results();
  test_gen_rows();
  return harness_finish("cuda_fake");
}
