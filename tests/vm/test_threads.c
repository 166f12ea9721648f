/* The thread-safety contract: one module shared by 8 threads, each with its
 * own VM, many invocations of varying shapes, every result checked. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "asm.h"
#include "dvm/dvm.h"
#include "harness.h"

#define THREADS 8
#define ITERS 300

/* y = (x @ w) + x[:, :1] broadcast... kept simple: y = x @ w, z = y * y */
static const char program[] =
    ".const w f32 [4, 3] x\"0000803f000000000000000000000000"
    "0000803f000000000000000000000000"
    "0000803f0000803f0000803f0000803f\"\n"
    ".kernel matmul cpu 1\n"
    ".kernel mul cpu 1\n"
    ".shapefn matmul\n"
    ".func main regs=6\n"
    "  .sym batch r5 1 1000\n"
    "  .param x tensor f32 [batch, 4]\n"
    "  .result z tensor f32 [batch, 3]\n"
    "  guard r0, 0\n"
    "  const r1, $w\n"
    "  shapefn matmul, (r2), (r0, r1)\n"
    "  alloc r3, f32, r2, cpu\n"
    "  invoke matmul, -, (r3), (r0, r1), ()\n"
    "  alloc r4, f32, r2, cpu\n"
    "  invoke mul, -, (r4), (r3, r3), ()\n"
    "  ret (r4)\n"
    ".end\n";

typedef struct {
  dvm_module *m;
  int id;
  int failures;
} worker;

static void *run(void *arg) {
  worker *w = arg;
  dvm_vm *vm;
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.threads = 1;
  dvm_status *st = dvm_vm_create(w->m, &o, &vm);
  if (st) {
    dvm_status_free(st);
    w->failures++;
    return NULL;
  }
  unsigned seed = (unsigned)w->id * 7919u + 1;
  for (int it = 0; it < ITERS; it++) {
    int64_t dims[2] = {1 + rand_r(&seed) % 97, 4};
    dvm_tensor *x;
    if ((st = dvm_tensor_create(DVM_F32, 2, dims, &x))) break;
    float *xd = dvm_tensor_data(x);
    for (int64_t i = 0; i < dims[0] * 4; i++) xd[i] = (float)(rand_r(&seed) % 17) - 8;
    dvm_value a = dvm_value_tensor(x), r = {0};
    st = dvm_vm_invoke(vm, 0, &a, 1, &r, 1);
    if (!st) {
      const float *z = dvm_tensor_data(r.u.tensor);
      if (dvm_tensor_dims(r.u.tensor)[0] != dims[0]) w->failures++;
      for (int64_t i = 0; i < dims[0]; i++)
        for (int j = 0; j < 3; j++) {
          float y = xd[i * 4 + j] + xd[i * 4 + 3];
          if (z[i * 3 + j] != y * y) w->failures++;
        }
    }
    dvm_value_clear(&r);
    dvm_tensor_release(x);
    if (st) break;
  }
  if (st) {
    fprintf(stderr, "thread %d: %s\n", w->id, dvm_status_message(st));
    dvm_status_free(st);
    w->failures++;
  }
  dvm_vm_destroy(vm);
  return NULL;
}

int main(void) {
  dvm_module *built, *m;
  uint8_t *bytes;
  size_t size;
  CHECK_OK(dvm_asm_parse(program, sizeof program - 1, "threads.dvms", &built));
  CHECK_OK(dvm_bc_write(built, &bytes, &size));
  CHECK_OK(dvm_module_load_memory(bytes, size, NULL, &m));
  dvm_module_release(built);
  free(bytes);
  pthread_t th[THREADS];
  worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){m, i, 0};
    CHECK(pthread_create(&th[i], NULL, run, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK(w[i].failures == 0);
  }
  dvm_module_release(m);
  return harness_finish("threads");
}
