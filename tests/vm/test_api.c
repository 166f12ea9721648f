/* The embedding API: loading, signatures, invocation errors, statistics and
 * pool reuse, the VM staying usable after failures, DLPack, tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asm.h"
#include "dvm/dlpack.h"
#include "dvm/dvm.h"
#include "harness.h"

/* z = x + y; %s: how z is allocated */
static const char program_fmt[] =
    ".kernel add cpu 1\n"
    ".shapefn broadcast\n"
    ".func main regs=5\n"
    "  .sym n r4 1 1000\n"
    "  .param x tensor f32 [n]\n"
    "  .param y tensor f32 [n]\n"
    "  .result z tensor f32 [n]\n"
    "  guard r0, 0\n"
    "  guard r1, 1\n"
    "  shapefn broadcast, (r2), (r0, r1)\n"
    "  %s\n"
    "  invoke add, -, (r3), (r0, r1), ()\n"
    "  ret (r3)\n"
    ".end\n";

/* A module from assembly text, through a .dvmb file. */
static dvm_module *load_text(const char *text) {
  dvm_module *built, *m = NULL;
  uint8_t *bytes;
  size_t size;
  CHECK_OK(dvm_asm_parse(text, strlen(text), "api.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  char path[] = "/tmp/dvm_api_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0 && write(fd, bytes, size) == (ssize_t)size);
  close(fd);
  CHECK_OK(dvm_module_load_file(path, NULL, &m));
  unlink(path);
  dvm_module_release(built);
  free(bytes);
  return m;
}

/* The program with z allocated by `alloc` (a size-class block), or by
 * `alloc_result` (a block of its exact size). */
static dvm_module *load(const char *alloc) {
  char text[1024];
  int len = snprintf(text, sizeof text, program_fmt, alloc);
  CHECK(len > 0 && (size_t)len < sizeof text);
  return load_text(text);
}

static dvm_tensor *vec(int64_t n, float start) {
  dvm_tensor *t;
  CHECK_OK(dvm_tensor_create(DVM_F32, 1, &n, &t));
  float *d = dvm_tensor_data(t);
  for (int64_t i = 0; i < n; i++) d[i] = start + (float)i;
  return t;
}

static void test_signatures(dvm_module *m) {
  CHECK(dvm_module_function_count(m) == 1);
  CHECK(dvm_module_find_function(m, "main") == 0);
  CHECK(dvm_module_find_function(m, "nope") == -1);
  CHECK(dvm_function_param_count(m, 0) == 2 && dvm_function_result_count(m, 0) == 1);
  dvm_param_info p;
  dvm_function_param(m, 0, 1, &p);
  CHECK(strcmp(p.name, "y") == 0 && p.kind == DVM_VAL_TENSOR && p.dtype == DVM_F32 && p.rank == 1);
  CHECK(p.dims[0].symbol && strcmp(p.dims[0].symbol, "n") == 0);
  dvm_symbol_info s;
  dvm_function_symbol(m, 0, 0, &s);
  CHECK(strcmp(s.name, "n") == 0 && s.lo == 1 && s.hi == 1000);
}

static void test_invoke(dvm_module *m) {
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  for (int64_t n = 1; n <= 64; n++) {
    dvm_tensor *x = vec(n, 1), *y = vec(n, 10);
    dvm_value args[2] = {dvm_value_tensor(x), dvm_value_tensor(y)}, r;
    CHECK_OK(dvm_vm_invoke(vm, 0, args, 2, &r, 1));
    const float *z = dvm_tensor_data(r.u.tensor);
    CHECK(dvm_tensor_numel(r.u.tensor) == n && z[n - 1] == 11 + 2 * (float)(n - 1));
    dvm_value_clear(&r);
    dvm_tensor_release(x);
    dvm_tensor_release(y);
  }
  dvm_vm_stats st;
  dvm_vm_get_stats(vm, &st);
  CHECK(st.invocations == 64 && st.kernel_calls == 64);
  CHECK(st.pool[DVM_DEVICE_CPU].in_use == 0);
  /* results of up to 1024 bytes fit in a few size classes: the pool reuses */
  CHECK(st.pool[DVM_DEVICE_CPU].reuses > 50 && st.pool[DVM_DEVICE_CPU].allocs < 14);

  /* wrong counts and mismatched symbols are errors, and the VM stays usable */
  dvm_tensor *x = vec(3, 0), *y = vec(4, 0);
  dvm_value args[2] = {dvm_value_tensor(x), dvm_value_tensor(y)}, r;
  CHECK_ERR(dvm_vm_invoke(vm, 0, args, 1, &r, 1), DVM_INVALID_ARGUMENT, "takes 2 inputs, got 1");
  CHECK_ERR(dvm_vm_invoke(vm, 0, args, 2, &r, 2), DVM_INVALID_ARGUMENT, "returns 1 results");
  CHECK_ERR(dvm_vm_invoke(vm, 3, args, 2, &r, 1), DVM_NOT_FOUND, "no function 3");
  CHECK_ERR(dvm_vm_invoke(vm, 0, args, 2, &r, 1), DVM_INVALID_ARGUMENT,
            "input \"y\" dim 0 (n) must be 3, the value of n bound by an earlier input, got 4");
  args[1] = dvm_value_tensor(x);
  CHECK_OK(dvm_vm_invoke(vm, 0, args, 2, &r, 1));
  dvm_value_clear(&r);
  dvm_tensor_release(x);
  dvm_tensor_release(y);
  dvm_vm_destroy(vm);
}

static void test_pool_limit(dvm_module *m) {
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.pool_limit = 2048;
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, &o, &vm));
  dvm_tensor *big = vec(1000, 0), *small = vec(10, 0);
  dvm_value a[2] = {dvm_value_tensor(big), dvm_value_tensor(big)}, r;
  CHECK_ERR(dvm_vm_invoke(vm, 0, a, 2, &r, 1), DVM_RESOURCE_EXHAUSTED, "pool limit of 2048 bytes");
  a[0] = a[1] = dvm_value_tensor(small);
  CHECK_OK(dvm_vm_invoke(vm, 0, a, 2, &r, 1)); /* usable afterwards */
  /* a result outliving its VM keeps its storage valid */
  dvm_vm_destroy(vm);
  CHECK(((float *)dvm_tensor_data(r.u.tensor))[9] == 18);
  dvm_value_clear(&r);
  dvm_tensor_release(big);
  dvm_tensor_release(small);
}

static void invoke_once(dvm_vm *vm, int64_t n) {
  dvm_tensor *x = vec(n, 0);
  dvm_value a[2] = {dvm_value_tensor(x), dvm_value_tensor(x)}, r;
  CHECK_OK(dvm_vm_invoke(vm, 0, a, 2, &r, 1));
  dvm_value_clear(&r);
  dvm_tensor_release(x);
}

/* Shapes that vary: a CPU pool keeps at most twice its peak in use cached
 * (on a miss it frees blocks of classes no longer asked for); a shape that
 * repeats still reuses its block every time. */
static void test_pool_varying_shapes(dvm_module *m) {
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  for (int64_t n = 1000; n >= 100; n -= 50) invoke_once(vm, n); /* one result block at a time, 13 classes */
  dvm_vm_stats st;
  dvm_vm_get_stats(vm, &st);
  const dvm_pool_stats *p = &st.pool[DVM_DEVICE_CPU];
  CHECK(p->peak == 4096 && p->in_use == 0);
  CHECK(p->cached <= 2 * p->peak); /* without the bound it kept a block of every class */
  uint64_t allocs = p->allocs;
  for (int i = 0; i < 10; i++) invoke_once(vm, 100);
  dvm_vm_get_stats(vm, &st);
  CHECK(st.pool[DVM_DEVICE_CPU].allocs == allocs);
  dvm_vm_destroy(vm);
}

/* Results are blocks of their exact size (the memory plan counts them so):
 * reused while the size repeats or shrinks a little, given back after 16
 * runs in a row at under half of it, and taken a size class large when
 * the size grew past the cached block. */
static void test_pool_exact_results(dvm_module *m) {
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  dvm_vm_stats st;
  const dvm_pool_stats *p = &st.pool[DVM_DEVICE_CPU];
  invoke_once(vm, 1000);
  dvm_vm_get_stats(vm, &st);
  CHECK(p->peak == 4000 && p->peak_requested == 4000 && p->cached == 4000 && p->allocs == 1);
  for (int i = 0; i < 10; i++) invoke_once(vm, 1000);
  for (int i = 0; i < 15; i++) invoke_once(vm, 400); /* 1600 bytes in the 4000-byte block */
  dvm_vm_get_stats(vm, &st);
  CHECK(p->allocs == 1 && p->reuses == 25 && p->cached == 4000);
  invoke_once(vm, 400); /* the 16th in a row under half: a block of its own */
  dvm_vm_get_stats(vm, &st);
  CHECK(p->allocs == 2 && p->cached == 1600);
  invoke_once(vm, 401); /* 1604 bytes outgrow it: its class, 1792 */
  invoke_once(vm, 448);
  dvm_vm_get_stats(vm, &st);
  CHECK(p->allocs == 3 && p->cached == 1792 && p->in_use == 0);
  dvm_vm_destroy(vm);
}

/* A miss takes a cached block of up to three classes larger (under twice
 * the size) before it maps a new one: with more distinct classes than
 * twice the peak holds, a repeating run otherwise freed and remapped the
 * same blocks every time (PP-OCR det: three 10-14 MB blocks a run). */
static void test_pool_larger_class(dvm_module *m) {
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  invoke_once(vm, 1000); /* 4000 bytes: the 4096 class */
  dvm_vm_stats st;
  dvm_vm_get_stats(vm, &st);
  uint64_t allocs = st.pool[DVM_DEVICE_CPU].allocs;
  invoke_once(vm, 800); /* 3584 class, one below: takes the 4096 block */
  invoke_once(vm, 600); /* 2560 class, three below: takes it too */
  dvm_vm_get_stats(vm, &st);
  CHECK(st.pool[DVM_DEVICE_CPU].allocs == allocs && st.pool[DVM_DEVICE_CPU].in_use == 0);
  invoke_once(vm, 500); /* 2048 class, four below: a block of its own */
  dvm_vm_get_stats(vm, &st);
  CHECK(st.pool[DVM_DEVICE_CPU].allocs == allocs + 1);
  dvm_vm_destroy(vm);
}

static void test_load_errors(void) {
  dvm_module *m;
  CHECK_ERR(dvm_module_load_file("/nonexistent/x.dvmb", NULL, &m), DVM_NOT_FOUND, "x.dvmb");
  CHECK_ERR(dvm_module_load_file("/tmp", NULL, &m), DVM_IO, "not a regular file");
  CHECK_ERR(dvm_module_load_memory("abc", 3, NULL, &m), DVM_CORRUPT, "shorter than the 32-byte header");
  dvm_vm *vm;
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.device = DVM_DEVICE_CUDA;
  dvm_module *ok = load("alloc r3, f32, r2, cpu");
  CHECK_ERR(dvm_vm_create(ok, &o, &vm), DVM_UNAVAILABLE, "CUDA device is not available");
  dvm_module_release(ok);
}

static void test_tensors(void) {
  int64_t dims[3] = {2, 0, 3};
  dvm_tensor *t;
  CHECK_OK(dvm_tensor_create(DVM_I64, 3, dims, &t));
  CHECK(dvm_tensor_numel(t) == 0 && dvm_tensor_nbytes(t) == 0);
  dvm_tensor_release(t);
  int64_t bad[1] = {-1};
  CHECK_ERR(dvm_tensor_create(DVM_F32, 1, bad, &t), DVM_INVALID_ARGUMENT, "negative");
  int64_t huge[2] = {INT64_MAX / 2, 4};
  CHECK_ERR(dvm_tensor_create(DVM_F32, 2, huge, &t), DVM_OUT_OF_RANGE, "overflows");
  CHECK_ERR(dvm_tensor_create(DVM_F32, 9, dims, &t), DVM_INVALID_ARGUMENT, "rank 9");
  char buf[64];
  CHECK(strcmp(dvm_shape_format(buf, sizeof buf, DVM_BF16, 3, dims), "bf16[2,0,3]") == 0);
}

static int freed;
static void count_free(DLManagedTensor *self) { freed++; }

static void test_dlpack(void) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  DLManagedTensor mt = {0};
  mt.dl_tensor.data = data;
  mt.dl_tensor.device.device_type = kDLCPU;
  mt.dl_tensor.ndim = 2;
  mt.dl_tensor.dtype.code = kDLFloat;
  mt.dl_tensor.dtype.bits = 32;
  mt.dl_tensor.dtype.lanes = 1;
  mt.dl_tensor.shape = shape;
  mt.deleter = count_free;
  dvm_tensor *t;
  CHECK_OK(dvm_tensor_from_dlpack(&mt, &t));
  CHECK(dvm_tensor_data(t) == data && dvm_tensor_dims(t)[1] == 3);
  DLManagedTensor *out;
  CHECK_OK(dvm_tensor_to_dlpack(t, &out));
  dvm_tensor_release(t);
  CHECK(freed == 0); /* the export still holds the tensor */
  CHECK(out->dl_tensor.data == data && out->dl_tensor.shape[0] == 2 && out->dl_tensor.strides == NULL);
  out->deleter(out);
  CHECK(freed == 1);
  int64_t strides[2] = {1, 2};
  mt.dl_tensor.strides = strides;
  CHECK_ERR(dvm_tensor_from_dlpack(&mt, &t), DVM_INVALID_ARGUMENT, "not dense row-major");
  mt.dl_tensor.strides = NULL;
  mt.dl_tensor.dtype.bits = 128;
  CHECK_ERR(dvm_tensor_from_dlpack(&mt, &t), DVM_INVALID_ARGUMENT, "has no dvm dtype");
  CHECK(freed == 1); /* failed imports leave ownership with the caller */
}

/* A run whose blocks over its course need more than twice its peak: four
 * stages of about 64 KB in use each, as 1, 2, 4 and 8 blocks (each stage's
 * class four or more below the last's, so none serves another). From the
 * third run on, the pool maps nothing: the bound frees only blocks that
 * neither this run nor the last used, and these are used every run. */
static void test_pool_working_set(void) {
  char text[4096];
  int len = snprintf(text, sizeof text, ".func main regs=9\n  .result r int\n");
  for (int stage = 0, n = 1; stage < 4; stage++, n *= 2) {
    len += snprintf(text + len, sizeof text - (size_t)len, "  imm r0, %d\n", 64000 / n - 200 * stage);
    for (int b = 1; b <= n; b++) len += snprintf(text + len, sizeof text - (size_t)len, "  alloc_storage r%d, r0, cpu, 64\n", b);
    for (int b = 1; b <= n; b++) len += snprintf(text + len, sizeof text - (size_t)len, "  release r%d\n", b);
  }
  snprintf(text + len, sizeof text - (size_t)len, "  imm r0, 0\n  ret (r0)\n.end\n");
  dvm_module *m = load_text(text);
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  dvm_vm_stats st;
  const dvm_pool_stats *p = &st.pool[DVM_DEVICE_CPU];
  uint64_t allocs = 0;
  for (int run = 0; run < 6; run++) {
    dvm_value r;
    CHECK_OK(dvm_vm_invoke(vm, 0, NULL, 0, &r, 1));
    dvm_vm_get_stats(vm, &st);
    if (run == 1) allocs = p->allocs;
  }
  CHECK(p->cached > 2 * p->peak); /* the working set is over the bound */
  CHECK(p->allocs == allocs && p->allocs == 15 && p->in_use == 0);
  dvm_vm_destroy(vm);
  dvm_module_release(m);
}

int main(void) {
  test_pool_working_set();
  dvm_module *m = load("alloc r3, f32, r2, cpu");
  test_signatures(m);
  test_invoke(m);
  test_pool_limit(m);
  test_pool_varying_shapes(m);
  test_pool_larger_class(m);
  dvm_module_release(m);
  m = load("alloc_result r3, f32, r2, cpu, 0");
  test_pool_exact_results(m);
  dvm_module_release(m);
  test_load_errors();
  test_tensors();
  test_dlpack();
  return harness_finish("api");
}
