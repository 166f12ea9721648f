/* Host emulation of the CUDA C that compiler/cuda_codegen.c emits, so that
 * g++ builds the generated kernels into a shared object which
 * test_emulate.c runs on the CPU, without a GPU. The test compiles
 * `#include "shim.h"`, the generated source, `#include "shim_launch.h"`
 * (the launcher, which needs the source's dvm_gen_params).
 *
 * Threaded mode (ROWS kernels): every thread of a block is a coroutine
 * (ucontext) with its own stack; __syncthreads switches back to the
 * launcher, which resumes each thread in turn, so all of them run up to
 * the barrier before any passes it. A warp shuffle writes the thread's
 * value to an exchange array, waits at a barrier, reads its partner's, and
 * waits again (the generated code reaches every shuffle with the whole
 * block, as it must reach __syncthreads). Blocks run one after another, so
 * __shared__ is plain static storage. Serial mode (ELEMENTWISE kernels,
 * which never synchronize): the threads of each block run one after
 * another; a barrier reached there is an error. */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

/* libm's functions that the generated code calls, declared here: <math.h>
 * in C++ costs g++ more time than the kernels themselves */
extern "C" {
float expf(float), logf(float), tanhf(float), erff(float), erfcf(float), powf(float, float),
    sqrtf(float), fabsf(float), rintf(float);
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

struct dvm_emu_dim {
  unsigned x, y, z;
};
static dvm_emu_dim threadIdx, blockIdx, blockDim, gridDim;

/* what went wrong, for dvm_emu_launch to report */
enum { DVM_EMU_SERIAL_BARRIER = 1, DVM_EMU_BAD_SHUFFLE, DVM_EMU_DIVERGED, DVM_EMU_BAD_LAUNCH };
static int dvm_emu_error;
static int dvm_emu_threaded;
static ucontext_t dvm_emu_launcher, dvm_emu_ctx[1024];
static float dvm_emu_xchg[1024];

static void __syncthreads(void) {
  if (!dvm_emu_threaded) dvm_emu_error = DVM_EMU_SERIAL_BARRIER;
  else swapcontext(&dvm_emu_ctx[threadIdx.x], &dvm_emu_launcher);
}

/* threads run one at a time: compare-and-swap is a plain one */
static unsigned long long atomicCAS(unsigned long long *a, unsigned long long cmp, unsigned long long v) {
  unsigned long long old = *a;
  if (old == cmp) *a = v;
  return old;
}

static float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  unsigned me = threadIdx.x, other = me ^ (unsigned)lane_mask;
  /* the partner must be in the same warp, and the whole warp taking part */
  if (mask != 0xffffffffu || other / 32 != me / 32 || other >= blockDim.x) {
    dvm_emu_error = DVM_EMU_BAD_SHUFFLE;
    other = me;
  }
  dvm_emu_xchg[me] = v;
  __syncthreads();
  float w = dvm_emu_xchg[other];
  __syncthreads();
  return w;
}
