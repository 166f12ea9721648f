/* The CUDA backend on a machine without it (meson points DVM_CUDA_DRIVER
 * at a library that does not exist, so this runs the same with a GPU):
 * clear DVM_UNAVAILABLE statuses, the automatic device choice, entry-name
 * resolution, copies that share, and the cuBLAS kernels' checks that come
 * before any device call. */
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"
#include "dvm/dvm.h"
#include "harness.h"
#include "kernel.h"
#include "ops/cuda/blas.h"
#include "ops/optable.h"
#include "vm/asm.h"

static const char program[] =
    ".kernel matmul cuda 1\n"
    ".func main regs=2\n"
    "  .param x tensor f32 [?]\n"
    "  .result y tensor f32 [?]\n"
    "  copy r1, r0, cpu\n"
    "  ret (r1)\n"
    ".end\n"
    ".func \"main@cuda\" regs=3\n"
    "  .param x tensor f32 [?]\n"
    "  .result y tensor f32 [?]\n"
    "  copy r1, r0, cuda\n"
    "  copy r2, r1, cpu\n"
    "  ret (r2)\n"
    ".end\n";

static dvm_module *load(const char *text, size_t len) {
  dvm_module *built, *m = NULL;
  uint8_t *bytes = NULL;
  size_t size = 0;
  CHECK_OK(dvm_asm_parse(text, len, "nodev.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, &m));
  dvm_module_release(built);
  free(bytes);
  return m;
}

static void test_device(dvm_module *m) {
  char buf[256];
  CHECK_ERR(dvm_device_probe(DVM_DEVICE_CUDA, buf, sizeof buf), DVM_UNAVAILABLE,
            "/nonexistent/libcuda.so.1 not found (no NVIDIA driver)");
  CHECK_OK(dvm_device_probe(DVM_DEVICE_CPU, buf, sizeof buf));
  CHECK(strcmp(buf, "cpu") == 0);
  CHECK(dvm_device_auto(m, buf, sizeof buf) == DVM_DEVICE_CPU);
  CHECK(strstr(buf, "cpu (") == buf && strstr(buf, "not found (no NVIDIA driver)"));
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.device = DVM_DEVICE_CUDA;
  dvm_vm *vm = NULL;
  CHECK_ERR(dvm_vm_create(m, &o, &vm), DVM_UNAVAILABLE,
            "the CUDA device is not available: /nonexistent/libcuda.so.1 not found");
  CHECK(vm == NULL);
}

static void test_cpu_vm(dvm_module *m) {
  dvm_vm *vm;
  CHECK_OK(dvm_vm_create(m, NULL, &vm));
  int f = -1;
  CHECK_OK(dvm_vm_find_function(vm, "main", &f));
  CHECK(f == 0);
  CHECK_OK(dvm_vm_find_function(vm, "main@cuda", &f)); /* asked for by its full name */
  CHECK(f == 1);
  CHECK_ERR(dvm_vm_find_function(vm, "nope", &f), DVM_NOT_FOUND, "no function \"nope\"");
  int64_t n = 5;
  dvm_tensor *x;
  CHECK_OK(dvm_tensor_create(DVM_F32, 1, &n, &x));
  dvm_value arg = dvm_value_tensor(x), res = {0};
  dvm_vm_stats before, after;
  dvm_vm_get_stats(vm, &before);
  /* a copy to the device the tensor is on is the same tensor */
  CHECK_OK(dvm_vm_invoke(vm, 0, &arg, 1, &res, 1));
  CHECK(res.kind == DVM_VAL_TENSOR && res.u.tensor == x);
  dvm_vm_get_stats(vm, &after);
  CHECK(after.pool[DVM_DEVICE_CPU].allocs == before.pool[DVM_DEVICE_CPU].allocs);
  CHECK(after.host_syncs == 0);
  dvm_value_clear(&res);
  /* the CUDA version on a CPU VM needs the device for its copy */
  CHECK_ERR(dvm_vm_invoke(vm, 1, &arg, 1, &res, 1), DVM_UNAVAILABLE, "libcuda.so.1 not found");
  dvm_tensor_release(x);
  dvm_vm_destroy(vm);
}

static void test_cpu_only_module(void) {
  static const char cpu_only[] = ".func main regs=1\n  .result y int\n  imm r0, 1\n  ret (r0)\n.end\n";
  dvm_module *m = load(cpu_only, sizeof cpu_only - 1);
  char buf[256];
  CHECK(dvm_device_auto(m, buf, sizeof buf) == DVM_DEVICE_CPU);
  CHECK(strstr(buf, "cpu (the module has no CUDA functions") == buf);
  dvm_module_release(m);
}

static dvm_tensor *shaped(dvm_dtype dt, dvm_device_kind dev, int rank, const int64_t *dims) {
  static float fake[1]; /* never read: the checks fail or plan first */
  dvm_storage *s;
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_storage_wrap(dev, fake, (size_t)1 << 40, NULL, NULL, &s));
  CHECK_OK(dvm_tensor_view(s, 0, dt, rank, dims, &t));
  dvm_storage_release(s);
  return t;
}

static void test_blas_checks(void) {
  CHECK_OK(dvm_cuda_blas_dtypes("matmul", DVM_F32, DVM_F32, DVM_F32));
  CHECK_OK(dvm_cuda_blas_dtypes("matmul", DVM_F16, DVM_F16, DVM_F32));
  CHECK_OK(dvm_cuda_blas_dtypes("matmul", DVM_BF16, DVM_BF16, DVM_BF16));
  CHECK_ERR(dvm_cuda_blas_dtypes("matmul", DVM_F16, DVM_F32, DVM_F32), DVM_UNIMPLEMENTED,
            "A is f16 and B is f32");
  CHECK_ERR(dvm_cuda_blas_dtypes("gemm", DVM_BF16, DVM_BF16, DVM_F16), DVM_UNIMPLEMENTED,
            "bf16 inputs give bf16 or f32, not f16");
  CHECK_ERR(dvm_cuda_blas_dtypes("matmul", DVM_F64, DVM_F64, DVM_F64), DVM_INVALID_ARGUMENT,
            "must be f32, f16 or bf16");

  /* [2,1,3,4] x [5,4,6] -> [2,5,3,6]: the inner batch dim (5) is one
   * strided call with A broadcast (stride 0); the outer one (2) a loop */
  int64_t da[] = {2, 1, 3, 4}, db[] = {5, 4, 6}, dout[] = {2, 5, 3, 6};
  dvm_tensor *a = shaped(DVM_F32, DVM_DEVICE_CPU, 4, da), *b = shaped(DVM_F32, DVM_DEVICE_CPU, 3, db);
  dvm_tensor *o = shaped(DVM_F32, DVM_DEVICE_CPU, 4, dout);
  dvm_cuda_blas_plan_t p;
  CHECK_OK(dvm_cuda_blas_plan(a, b, o, &p));
  CHECK(p.m == 3 && p.k == 4 && p.n == 6 && p.nbatch == 2 && p.run_start == 1 && p.run_count == 5);
  CHECK(p.run_sa == 0 && p.run_sb == 24 && p.run_sc == 18);
  CHECK(p.sa[0] == 12 && p.sb[0] == 0 && p.sc[0] == 90);
  dvm_tensor_release(o);
  int64_t bad[] = {2, 5, 3, 7};
  o = shaped(DVM_F32, DVM_DEVICE_CPU, 4, bad);
  CHECK_ERR(dvm_cuda_blas_plan(a, b, o, &p), DVM_INVALID_ARGUMENT, "the product is f32[2,5,3,6]");
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);

  /* [7,3,4] x [4,6]: all 7 in one call, B shared; [4] x [4] -> []: one dot */
  int64_t d7[] = {7, 3, 4}, d46[] = {4, 6}, d736[] = {7, 3, 6}, d4[] = {4};
  a = shaped(DVM_F32, DVM_DEVICE_CPU, 3, d7);
  b = shaped(DVM_F32, DVM_DEVICE_CPU, 2, d46);
  o = shaped(DVM_F32, DVM_DEVICE_CPU, 3, d736);
  CHECK_OK(dvm_cuda_blas_plan(a, b, o, &p));
  CHECK(p.run_start == 0 && p.run_count == 7 && p.run_sa == 12 && p.run_sb == 0 && p.run_sc == 18);
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);
  a = shaped(DVM_F32, DVM_DEVICE_CPU, 1, d4);
  b = shaped(DVM_F32, DVM_DEVICE_CPU, 1, d4);
  o = shaped(DVM_F32, DVM_DEVICE_CPU, 0, NULL);
  CHECK_OK(dvm_cuda_blas_plan(a, b, o, &p));
  CHECK(p.m == 1 && p.n == 1 && p.k == 4 && p.nbatch == 0 && p.run_count == 1);
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);

  /* the kernels through the op table: checks before any device call */
  const dvm_kernel_def *mm = dvm_ops_find("matmul", DVM_DEVICE_CUDA);
  const dvm_kernel_def *gm = dvm_ops_find("gemm", DVM_DEVICE_CUDA);
  CHECK(mm && gm && dvm_ops_find("gen", DVM_DEVICE_CUDA));
  CHECK(mm && strcmp(mm->shapefn, "matmul") == 0 && gm && strcmp(gm->shapefn, "gemm") == 0);
  if (!mm || !gm) return;
  int64_t d23[] = {2, 3}, d34[] = {3, 4}, d24[] = {2, 4};
  a = shaped(DVM_F32, DVM_DEVICE_CPU, 2, d23);
  b = shaped(DVM_F16, DVM_DEVICE_CUDA, 2, d34);
  o = shaped(DVM_F32, DVM_DEVICE_CUDA, 2, d24);
  dvm_tensor *in[2] = {a, b}, *out[1] = {o};
  dvm_kernel_args args = {in, 2, out, 1, NULL, 0, 0, NULL, 0, NULL};
  CHECK_ERR(mm->fn(&args), DVM_INVALID_ARGUMENT, "input 0 is on cpu, the kernel runs on cuda");
  dvm_tensor_release(a);
  in[0] = a = shaped(DVM_F32, DVM_DEVICE_CUDA, 2, d23);
  CHECK_ERR(mm->fn(&args), DVM_UNIMPLEMENTED, "A is f32 and B is f16");
  dvm_tensor_release(b);
  in[1] = b = shaped(DVM_F32, DVM_DEVICE_CUDA, 2, d23);
  CHECK_ERR(mm->fn(&args), DVM_INVALID_ARGUMENT, "inner dims 3 != 2");
  dvm_value attrs[4] = {dvm_value_int(0), dvm_value_int(1), dvm_value_float(1), dvm_value_float(0)};
  dvm_kernel_args gargs = {in, 2, out, 1, attrs, 4, 0, NULL, 0, NULL};
  /* gemm with transB: [2,3] x [2,3]^T = [2,2], but Y is [2,4] */
  CHECK_ERR(gm->fn(&gargs), DVM_INVALID_ARGUMENT, "gemm: output must be [2, 2]");
  gargs.nattrs = 3;
  CHECK_ERR(gm->fn(&gargs), DVM_INVALID_ARGUMENT, "gemm");
  dvm_tensor_release(a);
  dvm_tensor_release(b);
  dvm_tensor_release(o);
}

int main(void) {
  dvm_module *m = load(program, sizeof program - 1);
  if (!m) return harness_finish("cuda_nodev");
  test_device(m);
  test_cpu_vm(m);
  test_cpu_only_module();
  test_blas_checks();
  dvm_module_release(m);
  return harness_finish("cuda_nodev");
}
