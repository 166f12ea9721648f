/* The parts of the stand-in driver (fake_cuda.c): device memory
 * (fake_mem.c), streams and their queued work (fake_queue.c), modules of
 * generated kernels compiled for the host (fake_module.c). Nothing here
 * is exported: the library's exports are the driver's and cuBLAS's names. */
#ifndef DVM_TESTS_CUDA_FAKE_H
#define DVM_TESTS_CUDA_FAKE_H

#include <stddef.h>

#include "ops/cuda/gen_abi.h"

typedef int CUresult;
typedef unsigned long long fake_ptr;

/* the driver's error codes the stand-in returns */
enum {
  FAKE_INVALID_VALUE = 1,
  FAKE_OUT_OF_MEMORY = 2,
  FAKE_INVALID_IMAGE = 200,
  FAKE_INVALID_CONTEXT = 201,
  FAKE_INVALID_SOURCE = 300,
  FAKE_INVALID_HANDLE = 400,
  FAKE_NOT_FOUND = 500,
  FAKE_NOT_READY = 600,
  FAKE_ILLEGAL_ADDRESS = 700,
  FAKE_LAUNCH_FAILED = 719,
};

/* ---- device memory: its own mappings, closed to the host ---- */

/* n bytes (n > 0) poisoned with 0xff, ending against a guard page, with
 * a red zone of canary bytes before and after. */
CUresult fake_mem_alloc(size_t n, fake_ptr *p);
/* FAKE_INVALID_VALUE unless p starts a live allocation; its pages stay
 * reserved and closed, so later touches fault. */
CUresult fake_mem_free(fake_ptr p);
/* Whether [p, p + n) lies within one live allocation's n bytes. */
int fake_mem_inside(fake_ptr p, size_t n);
/* Opens device memory to the running "device" (1) or closes it (0):
 * closed, any touch from the host faults. */
void fake_mem_open(int open);
/* 0 when every red zone is intact; else says which on stderr and 1. */
int fake_mem_check_zones(void);
/* A SIGSEGV handler that names the device allocation a fault touched. */
void fake_mem_catch_faults(void);

/* ---- modules ---- */

typedef struct fake_module fake_module;
typedef struct fake_function {
  fake_module *module;
  void *kernel; /* NULL in a module that is only recorded (a cubin) */
  char name[32];
} fake_function;

/* A module from an image: with `source` (the device reports
 * DVM_GEN_SOURCE_SM), CUDA C compiled for the host with the emulation
 * (tests/cuda_codegen/shim.h) by g++, cached by a hash of the source and
 * the shim in $FAKE_CUDA_CACHE (default /tmp/dvm-fake-cuda-UID); else an
 * image (cubin, PTX) that the host cannot run, whose launches are only
 * recorded. On failure, what g++ said goes into log (if any). */
CUresult fake_module_load(const char *image, int source, fake_module **m, char *log, size_t logsize);
void fake_module_unload(fake_module *m);
CUresult fake_module_function(fake_module *m, const char *name, fake_function **f);
/* Runs f over the grid in the given schedule (shim_launch.h);
 * what the emulation reports (0: fine). */
int fake_module_run(const fake_function *f, const unsigned *grid, const unsigned *block, int schedule,
                    unsigned long long seed, const dvm_gen_params *p);

/* ---- streams ---- */

typedef struct fake_stream fake_stream;
typedef struct fake_event fake_event;

typedef struct fake_gemm {
  int ta, tb, m, n, k, lda, ldb, ldc, batch;
  float alpha, beta;
  fake_ptr a, b, c;
  long long sa, sb, sc;
} fake_gemm;

fake_stream *fake_stream_new(void);
void fake_stream_free(fake_stream *s);
/* The stream of a NULL handle: the context's own. */
fake_stream *fake_stream_of(void *handle);
CUresult fake_enqueue_copy(fake_stream *s, void *dst, const void *src, size_t n);
CUresult fake_enqueue_set(fake_stream *s, fake_ptr dst, unsigned value, int width, size_t n);
CUresult fake_enqueue_launch(fake_stream *s, const fake_function *f, const unsigned *grid,
                             const unsigned *block, const dvm_gen_params *p);
CUresult fake_enqueue_gemm(fake_stream *s, const fake_gemm *g);
CUresult fake_enqueue_event(fake_stream *s, fake_event *e);
/* Runs what s has queued; the first error (sticky, as on a device). */
CUresult fake_stream_run(fake_stream *s);
/* Runs every stream's queue. */
CUresult fake_run_all(void);

fake_event *fake_event_new(void);
void fake_event_free(fake_event *e);
/* Runs the work queued before e, if it has not run. */
CUresult fake_event_wait(fake_event *e);

/* How many kernels ran, for fake_count. */
extern int fake_kernels_run;

#endif
