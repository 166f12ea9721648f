/* NVRTC through dlopen (see nvrtc.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc.h"

typedef int nvrtc_result; /* nvrtcResult: 0 is NVRTC_SUCCESS */
typedef struct nvrtc_program *nvrtc_program;

/* The entry points dvm uses: name, return type, parameters. */
#define NVRTC_FUNCS(X)                                                                           \
  X(nvrtcGetErrorString, const char *, (nvrtc_result))                                           \
  X(nvrtcCreateProgram, nvrtc_result,                                                            \
    (nvrtc_program *, const char *, const char *, int, const char *const *, const char *const *)) \
  X(nvrtcDestroyProgram, nvrtc_result, (nvrtc_program *))                                        \
  X(nvrtcCompileProgram, nvrtc_result, (nvrtc_program, int, const char *const *))                \
  X(nvrtcGetProgramLogSize, nvrtc_result, (nvrtc_program, size_t *))                             \
  X(nvrtcGetProgramLog, nvrtc_result, (nvrtc_program, char *))                                   \
  X(nvrtcGetPTXSize, nvrtc_result, (nvrtc_program, size_t *))                                    \
  X(nvrtcGetPTX, nvrtc_result, (nvrtc_program, char *))                                          \
  X(nvrtcGetCUBINSize, nvrtc_result, (nvrtc_program, size_t *))                                  \
  X(nvrtcGetCUBIN, nvrtc_result, (nvrtc_program, char *))

static struct {
#define X(name, ret, params) ret(*name) params;
  NVRTC_FUNCS(X)
#undef X
} api;

static const char *const lib_names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so"};
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* empty once loaded */

static void load(void) {
  void *lib = NULL;
  /* DVM_NVRTC_PATH names the one library to try (docs/cuda.md) */
  const char *path = getenv("DVM_NVRTC_PATH");
  if (path && *path) {
    if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
      snprintf(load_error, sizeof load_error,
               "NVRTC is not available: cannot load DVM_NVRTC_PATH=%s (%s)", path, dlerror());
      return;
    }
  }
  for (size_t i = 0; i < sizeof lib_names / sizeof lib_names[0] && !lib; i++)
    lib = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(load_error, sizeof load_error,
             "NVRTC is not available: cannot load libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12 "
             "or /usr/local/cuda/lib64/libnvrtc.so (%s)", dlerror());
    return;
  }
#define X(fname, ret, params)                                                                  \
  if (!(*(void **)&api.fname = dlsym(lib, #fname))) {                                           \
    snprintf(load_error, sizeof load_error, "NVRTC is not usable: libnvrtc has no %s", #fname); \
    dlclose(lib);                                                                               \
    return;                                                                                     \
  }
  NVRTC_FUNCS(X)
#undef X
}

dvm_status *dvmc_nvrtc_load(void) {
  pthread_once(&once, load);
  return load_error[0] ? dvm_status_new(DVM_UNAVAILABLE, "%s", load_error) : NULL;
}

static dvm_status *fail(const char *call, nvrtc_result r, const char *name) {
  return dvm_status_new(DVM_INTERNAL, "NVRTC %s failed for \"%s\": %s (%d)", call, name,
                        api.nvrtcGetErrorString(r), r);
}

/* The compile log, or a placeholder when it cannot be had. */
static char *program_log(nvrtc_program p) {
  size_t n = 0;
  char *log = NULL;
  if (api.nvrtcGetProgramLogSize(p, &n) == 0 && n && (log = malloc(n + 1))) {
    if (api.nvrtcGetProgramLog(p, log) != 0) log[0] = 0;
    log[n] = 0;
  }
  return log;
}

dvm_status *dvmc_nvrtc_compile(const char *src, const char *name, int arch, void **image,
                               size_t *size) {
  dvm_status *st = dvmc_nvrtc_load();
  if (st) return st;
  char arch_opt[48];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", arch > 0 ? "sm" : "compute",
           arch > 0 ? arch : -arch);
  /* -fmad=false: CUDA would contract a * b + c, the CPU kernels never do */
  const char *opts[] = {arch_opt, "--std=c++17", "-fmad=false"};
  nvrtc_program p;
  nvrtc_result r = api.nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
  if (r) return fail("nvrtcCreateProgram", r, name);
  r = api.nvrtcCompileProgram(p, 3, opts);
  if (r) {
    char *log = program_log(p);
    st = dvm_status_new(DVM_INTERNAL, "NVRTC could not compile \"%s\" for %s: %s (%d)\n%s", name,
                        arch_opt + 21, api.nvrtcGetErrorString(r), r, log ? log : "(no log)");
    free(log);
    api.nvrtcDestroyProgram(&p);
    return st;
  }
  size_t n = 0;
  r = arch > 0 ? api.nvrtcGetCUBINSize(p, &n) : api.nvrtcGetPTXSize(p, &n);
  if (r) st = fail(arch > 0 ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize", r, name);
  char *buf = st ? NULL : malloc(n ? n : 1);
  if (!st && !buf) st = dvm_status_new(DVM_OUT_OF_MEMORY, "NVRTC image of \"%s\"", name);
  if (!st && (r = arch > 0 ? api.nvrtcGetCUBIN(p, buf) : api.nvrtcGetPTX(p, buf)))
    st = fail(arch > 0 ? "nvrtcGetCUBIN" : "nvrtcGetPTX", r, name);
  api.nvrtcDestroyProgram(&p);
  if (st) {
    free(buf);
    return st;
  }
  *image = buf;
  *size = n;
  return NULL;
}
