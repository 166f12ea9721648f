/* The VM's seams (vm/registry.h, vm/device.h): a module is linked against
 * the registry it is loaded with, and its VMs reach memory, copies and
 * kernels only through the devices found there. A registry made here puts
 * a counting device, over host memory, in the place of CUDA, with an add
 * kernel of its own. */
#include <stdlib.h>
#include <string.h>

#include "asm.h"
#include "device.h"
#include "dvm/dvm.h"
#include "harness.h"
#include "registry.h"
#include "shapefuncs/registry.h"

static const char program[] =
    ".kernel add cuda 1\n"
    ".shapefn broadcast\n"
    ".func \"main@cuda\" regs=7\n"
    "  .sym n r6 1 1000\n"
    "  .param x tensor f32 [n]\n"
    "  .param y tensor f32 [n]\n"
    "  .result z tensor f32 [n]\n"
    "  guard r0, 0\n"
    "  guard r1, 1\n"
    "  copy r2, r0, cuda\n"
    "  copy r3, r1, cuda\n"
    "  shapefn broadcast, (r4), (r2, r3)\n"
    "  alloc r5, f32, r4, cuda\n"
    "  invoke add, -, (r5), (r2, r3), ()\n"
    "  ret (r5)\n"
    ".end\n";

static struct {
  int alloc, free, stream_create, stream_destroy, stream_copy, stream_sync, launch;
} calls;

/* The stand-in device: the CPU's memory and copies, every call counted. */
static const dvm_device *cpu(void) { return dvm_device_cpu(); }

static dvm_status *fake_alloc(const dvm_device *d, size_t size, void **out) {
  calls.alloc++;
  return cpu()->alloc(cpu(), size, out);
}

static void fake_free(const dvm_device *d, void *ptr, size_t size) {
  calls.free++;
  cpu()->free(cpu(), ptr, size);
}

static dvm_status *fake_copy(const dvm_device *d, void *dst, dvm_device_kind dst_dev, const void *src,
                             dvm_device_kind src_dev, size_t n) {
  if (n) memcpy(dst, src, n);
  return NULL;
}

static dvm_status *fake_sync(const dvm_device *d) { return NULL; }

static void fake_describe(const dvm_device *d, char *buf, size_t size) { snprintf(buf, size, "fake"); }

static dvm_status *fake_stream_create(const dvm_device *d, uint64_t *syncs, dvm_stream **out) {
  dvm_stream *s = malloc(sizeof *s);
  if (!s) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  s->dev = d;
  calls.stream_create++;
  *out = s;
  return NULL;
}

static void fake_stream_destroy(dvm_stream *s) {
  calls.stream_destroy++;
  free(s);
}

static dvm_status *fake_stream_copy(dvm_stream *s, void *dst, dvm_device_kind dst_dev, const void *src,
                                    dvm_device_kind src_dev, size_t n) {
  calls.stream_copy++;
  return fake_copy(s->dev, dst, dst_dev, src, src_dev, n);
}

static dvm_status *fake_stream_sync(dvm_stream *s) {
  calls.stream_sync++;
  return NULL;
}

static dvm_status *fake_launch(dvm_stream *s, const dvm_kernel_def *k, const dvm_kernel_args *a) {
  calls.launch++;
  CHECK(a->exec->streams[DVM_DEVICE_CUDA] == s);
  return k->fn(a);
}

static const dvm_device fake_device = {
    .kind = DVM_DEVICE_CUDA,
    .name = "fake",
    .alloc = fake_alloc,
    .free = fake_free,
    .copy = fake_copy,
    .sync = fake_sync,
    .describe = fake_describe,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_copy = fake_stream_copy,
    .stream_sync = fake_stream_sync,
    .launch = fake_launch,
};

/* z = x + y over f32 vectors of one length (all the program passes). */
static dvm_status *add(const dvm_kernel_args *a) {
  const float *x = dvm_tensor_ptr(a->in[0]), *y = dvm_tensor_ptr(a->in[1]);
  float *z = dvm_tensor_ptr(a->out[0]);
  for (int64_t i = 0; i < a->out[0]->dims[0]; i++) z[i] = x[i] + y[i];
  return NULL;
}

static const dvm_kernel_def fake_add = {"add", DVM_DEVICE_CUDA, add, NULL};

static const dvm_kernel_def *kernel(const char *name, dvm_device_kind device) {
  return device == DVM_DEVICE_CUDA && strcmp(name, "add") == 0 ? &fake_add : NULL;
}

static const dvm_kernel_def *no_kernel(const char *name, dvm_device_kind device) { return NULL; }

static const dvm_shapefn_def *no_shapefn(const char *name) { return NULL; }

static dvm_status *device(dvm_device_kind kind, const dvm_device **out) {
  *out = kind == DVM_DEVICE_CUDA ? &fake_device : dvm_device_cpu();
  return NULL;
}

static dvm_status *load(const dvm_registry *reg, dvm_module **out) {
  dvm_module *built;
  uint8_t *bytes = NULL;
  size_t size = 0;
  CHECK_OK(dvm_asm_parse(program, sizeof program - 1, "registry.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  dvm_status *st = dvm_module_load_memory_with(reg, bytes, size, NULL, out);
  dvm_module_release(built);
  free(bytes);
  return st;
}

static void test_link(void) {
  dvm_module *m = NULL;
  dvm_registry no_kernels = {no_kernel, dvm_shapefn_find, device};
  CHECK_ERR(load(&no_kernels, &m), DVM_NOT_FOUND, "kernel \"add\" for cuda is not in this dvm's op table");
  dvm_registry no_shapefns = {kernel, no_shapefn, device};
  CHECK_ERR(load(&no_shapefns, &m), DVM_NOT_FOUND, "shape function \"broadcast\" is not in this dvm");
  CHECK(m == NULL);
}

static void test_device(void) {
  dvm_registry reg = {kernel, dvm_shapefn_find, device};
  dvm_module *m = NULL;
  CHECK_OK(load(&reg, &m));
  if (!m) return;
  char buf[64];
  CHECK(dvm_device_auto(m, buf, sizeof buf) == DVM_DEVICE_CUDA && strcmp(buf, "fake") == 0);
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.device = DVM_DEVICE_CUDA;
  dvm_vm *vm = NULL;
  CHECK_OK(dvm_vm_create(m, &o, &vm));
  CHECK(calls.stream_create == 1 && calls.alloc == 0);
  int f = -1;
  CHECK_OK(dvm_vm_find_function(vm, "main", &f));
  int64_t n = 7;
  dvm_tensor *x, *y;
  CHECK_OK(dvm_tensor_create(DVM_F32, 1, &n, &x));
  CHECK_OK(dvm_tensor_create(DVM_F32, 1, &n, &y));
  for (int i = 0; i < n; i++) {
    ((float *)dvm_tensor_data(x))[i] = (float)i;
    ((float *)dvm_tensor_data(y))[i] = 10.0f * (float)i;
  }
  dvm_value args[2] = {dvm_value_tensor(x), dvm_value_tensor(y)}, z = {0};
  CHECK_OK(dvm_vm_invoke(vm, f, args, 2, &z, 1));
  /* two uploads, the add, and the result's way back to the host: all on
   * the VM's one stream of the device */
  CHECK(calls.launch == 1 && calls.stream_copy == 3 && calls.stream_create == 1);
  CHECK(calls.alloc >= 1 && z.kind == DVM_VAL_TENSOR);
  if (z.kind != DVM_VAL_TENSOR) return;
  CHECK(dvm_tensor_device(z.u.tensor) == DVM_DEVICE_CPU);
  for (int i = 0; i < n; i++) CHECK(((float *)dvm_tensor_data(z.u.tensor))[i] == 11.0f * (float)i);
  dvm_value_clear(&z);
  /* left on the device: one wait on its stream instead of the copy back */
  dvm_vm_destroy(vm);
  o.results_on_device = 1;
  CHECK_OK(dvm_vm_create(m, &o, &vm));
  CHECK_OK(dvm_vm_invoke(vm, f, args, 2, &z, 1));
  CHECK(calls.launch == 2 && calls.stream_copy == 5 && calls.stream_sync == 1);
  CHECK(z.kind == DVM_VAL_TENSOR && dvm_tensor_device(z.u.tensor) == DVM_DEVICE_CUDA);
  dvm_value_clear(&z);
  dvm_vm_destroy(vm);
  CHECK(calls.stream_destroy == 2 && calls.free == calls.alloc);
  dvm_tensor_release(x);
  dvm_tensor_release(y);
  dvm_module_release(m);
}

int main(void) {
  test_link();
  test_device();
  return harness_finish("registry");
}
