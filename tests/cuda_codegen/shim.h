/* Host emulation of the CUDA C that compiler/cuda_codegen.c emits, so that
 * g++ builds the generated kernels into a shared object that runs on the
 * CPU without a GPU: test_emulate.c calls it directly, and the stand-in
 * driver (tests/cuda/fake_cuda.c) compiles each module's source with it at
 * load. A source is compiled as `#include "shim.h"`, the generated CUDA C,
 * `#include "shim_launch.h"` (the block scheduler, which needs the
 * source's dvm_gen_params).
 *
 * Faithful where races hide (docs/cuda.md, "What the emulation proves"):
 * - every thread of a block is a coroutine (ucontext) with its own stack;
 *   a thread runs until it reaches a barrier, a shuffle or its end, and
 *   then the scheduler picks another by the launch's schedule: always the
 *   lowest-numbered runnable thread, always the highest, or a random one;
 * - __syncthreads is the only block-wide barrier: it releases when every
 *   thread of the block has reached it (a thread that ended first is a
 *   divergence, reported);
 * - __shfl_xor_sync exchanges within one warp of 32 lanes: it releases
 *   when the 32 lanes of that warp have reached it, and each gets its
 *   partner's value; other warps run on (or not) as the schedule says;
 * - __shared__ variables live in one section of the object, poisoned
 *   (0xff bytes, a NaN in every float) at each block's start;
 * - blocks run one at a time in the schedule's order (forward, reversed
 *   or shuffled), so atomics are atomic: nothing else runs meanwhile. */
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

/* libm's functions that the generated code calls, declared here: <math.h>
 * in C++ costs g++ more time than the kernels themselves */
extern "C" {
float expf(float), logf(float), tanhf(float), erff(float), erfcf(float), powf(float, float),
    sqrtf(float), fabsf(float), rintf(float), fminf(float, float), fmaxf(float, float);
double floor(double), ceil(double), round(double), fabs(double), fmin(double, double),
    fmax(double, double);
}

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
/* one section for all of them, which the scheduler poisons per block */
#define __shared__ static __attribute__((section("dvm_emu_shared")))

struct dvm_emu_dim {
  unsigned x, y, z;
};
static dvm_emu_dim threadIdx, blockIdx, blockDim, gridDim;

/* what went wrong, for dvm_emu_launch to report */
enum { DVM_EMU_BAD_SHUFFLE = 1, DVM_EMU_DIVERGED, DVM_EMU_BAD_LAUNCH, DVM_EMU_NO_MEMORY };

/* where a thread stands */
enum { DVM_EMU_RUNNABLE, DVM_EMU_AT_BARRIER, DVM_EMU_AT_SHUFFLE, DVM_EMU_ENDED };

struct dvm_emu_thread {
  ucontext_t ctx;
  int state;
  unsigned mask;  /* of the shuffle it waits at */
  int lane_mask;
  float value;    /* its value, then its partner's */
};
static dvm_emu_thread dvm_emu_th[1024];
static unsigned dvm_emu_self; /* the running thread's linear index */
static ucontext_t dvm_emu_scheduler;

static void dvm_emu_stop(int state) {
  dvm_emu_th[dvm_emu_self].state = state;
  swapcontext(&dvm_emu_th[dvm_emu_self].ctx, &dvm_emu_scheduler);
}

static void __syncthreads(void) { dvm_emu_stop(DVM_EMU_AT_BARRIER); }

static float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  dvm_emu_thread *t = &dvm_emu_th[dvm_emu_self];
  t->mask = mask, t->lane_mask = lane_mask, t->value = v;
  dvm_emu_stop(DVM_EMU_AT_SHUFFLE);
  return t->value;
}

/* nothing else runs between the read and the write */
static unsigned long long atomicCAS(unsigned long long *a, unsigned long long cmp, unsigned long long v) {
  unsigned long long old = *a;
  if (old == cmp) *a = v;
  return old;
}
