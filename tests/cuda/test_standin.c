/* The stand-in driver's own rules (fake_cuda.c), through its driver entry
 * points: fresh device memory is poisoned; queued work runs only when the
 * host waits, so a copy read without a wait is not there yet; the host
 * touching device memory faults (in a child process); copies past an
 * allocation are refused; a kernel's write into the red zone past its
 * allocation fails the next wait; every grid and block dimension runs.
 * Kernels are CUDA C compiled by g++ with the emulation (shim.h); skips
 * (77) without g++. usage: DVM_CUDA_DRIVER=libfake_cuda.so test_standin */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ops/cuda/gen_abi.h"

#define STR_(x) #x
#define STR(x) STR_(x)

typedef unsigned long long dptr;
static int (*cuInit)(unsigned);
static int (*cuCtxSetCurrent)(void *);
static int (*cuDevicePrimaryCtxRetain)(void **, int);
static int (*cuMemAlloc)(dptr *, size_t);
static int (*cuMemFree)(dptr);
static int (*cuMemcpyHtoDAsync)(dptr, const void *, size_t, void *);
static int (*cuMemcpyDtoHAsync)(void *, dptr, size_t, void *);
static int (*cuStreamCreate)(void **, unsigned);
static int (*cuStreamSynchronize)(void *);
static int (*cuModuleLoadDataEx)(void **, const void *, unsigned, int *, void **);
static int (*cuModuleGetFunction)(void **, void *, const char *);
static int (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void *, void **, void **);

/* every thread of a 3-D grid of 3-D blocks writes its global index, and
 * one writes past the end when n says so */
static const char source[] =
    STR(DVM_GEN_PARAMS_DECL) "\n"
    "extern \"C\" __global__ void ids(const dvm_gen_params p) {\n"
    "  unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
    "  unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "  unsigned i = b * blockDim.x * blockDim.y * blockDim.z + t;\n"
    "  ((int *)p.ptr[0])[i] = (int)i;\n"
    "  if (p.n && i == 0) ((int *)p.ptr[0])[p.rows] = -1;\n"
    "}\n";

static int launch(void *fn, void *s, dptr out, long long overrun_at) {
  dvm_gen_params p;
  memset(&p, 0, sizeof p);
  p.ptr[0] = (void *)(uintptr_t)out;
  p.n = overrun_at >= 0, p.rows = overrun_at;
  void *args[1] = {&p};
  return cuLaunchKernel(fn, 2, 3, 2, 4, 2, 3, 0, s, args, NULL);
}

int main(void) {
  if (system("g++ --version >/dev/null 2>&1") != 0) {
    printf("SKIP: no g++ to compile CUDA C for the host\n");
    return 77;
  }
  void *lib = dlopen(getenv("DVM_CUDA_DRIVER"), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 1;
#define SYM(f, name) *(void **)&f = dlsym(lib, name); CHECK(f != NULL)
  SYM(cuInit, "cuInit");
  SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
  SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  SYM(cuMemAlloc, "cuMemAlloc_v2");
  SYM(cuMemFree, "cuMemFree_v2");
  SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  SYM(cuStreamCreate, "cuStreamCreate");
  SYM(cuStreamSynchronize, "cuStreamSynchronize");
  SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx");
  SYM(cuModuleGetFunction, "cuModuleGetFunction");
  SYM(cuLaunchKernel, "cuLaunchKernel");
  if (harness_failures) return harness_finish("cuda_standin");
  void *ctx, *s, *mod, *fn;
  CHECK(cuInit(0) == 0 && cuDevicePrimaryCtxRetain(&ctx, 0) == 0 && cuCtxSetCurrent(ctx) == 0);
  CHECK(cuStreamCreate(&s, 1) == 0);

  /* fresh memory is poisoned; a copy back is there only after the wait */
  enum { N = 2 * 3 * 2 * 4 * 2 * 3 }; /* threads in the grid */
  dptr d;
  CHECK(cuMemAlloc(&d, N * sizeof(int)) == 0);
  int host[N];
  memset(host, 0, sizeof host);
  CHECK(cuMemcpyDtoHAsync(host, d, sizeof host, s) == 0);
  CHECK(host[0] == 0);
  CHECK(cuStreamSynchronize(s) == 0);
  CHECK(host[0] == -1 && host[N - 1] == -1);

  /* the host touching device memory dies of it */
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    volatile int *p = (volatile int *)(uintptr_t)d;
    _exit(*p == 12345 ? 0 : 3);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);

  /* copies past the allocation are refused */
  CHECK(cuMemcpyHtoDAsync(d + 4, host, sizeof host, s) != 0);

  /* a kernel over a 2x3x2 grid of 4x2x3 blocks writes every index */
  int log_opt[2] = {5, 6};
  char log[2048] = "";
  void *log_val[2] = {log, (void *)(uintptr_t)sizeof log};
  CHECK(cuModuleLoadDataEx(&mod, source, 2, log_opt, log_val) == 0);
  if (log[0]) fprintf(stderr, "%s\n", log);
  CHECK(cuModuleGetFunction(&fn, mod, "ids") == 0);
  CHECK(launch(fn, s, d, -1) == 0);
  CHECK(cuMemcpyDtoHAsync(host, d, sizeof host, s) == 0 && cuStreamSynchronize(s) == 0);
  int all = 1;
  for (int i = 0; i < N; i++) all &= host[i] == i;
  CHECK(all);

  /* one int past the end lands in the red zone: the wait fails, and stays
   * failed (sticky, as a device's illegal address is) */
  CHECK(launch(fn, s, d, N) == 0);
  CHECK(cuStreamSynchronize(s) == 700);
  CHECK(cuStreamSynchronize(s) == 700);
  CHECK(cuMemFree(d) != 0); /* its red zone is still damaged */
  return harness_finish("cuda_standin");
}
