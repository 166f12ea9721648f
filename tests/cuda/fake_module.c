/* The stand-in driver's modules (fake.h): the CUDA C source of a
 * generated kernel compiled by g++ between tests/cuda_codegen/shim.h and
 * shim_launch.h into a shared object, loaded with dlopen, its entries
 * found with dlsym and run by the emulation's dvm_emu_launch. */
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake.h"

extern char **environ;

typedef int (*launch_fn)(void *kernel, const unsigned *grid, const unsigned *block, int schedule,
                         unsigned long long seed, const dvm_gen_params *p);

struct fake_module {
  void *so; /* NULL: a recorded-only image */
  launch_fn launch;
  int nfn;
  fake_function fn[DVM_GEN_MAX_TILE + 1];
};

static uint64_t fnv(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
  return h;
}

/* h folded over a whole file; 0 when it cannot be read */
static uint64_t fnv_file(uint64_t h, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  char b[4096];
  for (size_t k; (k = fread(b, 1, sizeof b, f)) > 0;) h = fnv(h, b, k);
  fclose(f);
  return h;
}

static const char *shim_dir(void) {
  const char *d = getenv("FAKE_CUDA_SHIM");
  return d && *d ? d : FAKE_CUDA_SHIM_DIR;
}

/* g++ on cc into so, its messages into log; 0 when it succeeded */
static int compile(const char *cc, const char *so, const char *errs) {
  char inc[512];
  snprintf(inc, sizeof inc, "-I%s", shim_dir());
  char *argv[] = {"g++", "-x", "c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off",
                  "-w", inc, "-o", (char *)so, (char *)cc, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, errs, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int status = 1;
  if (posix_spawnp(&pid, "g++", &fa, NULL, argv, environ) == 0)
    while (waitpid(pid, &status, 0) < 0) continue;
  else status = 1;
  posix_spawn_file_actions_destroy(&fa);
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void read_log(const char *path, char *log, size_t size) {
  if (!log || !size) return;
  FILE *f = fopen(path, "rb");
  size_t k = f ? fread(log, 1, size - 1, f) : 0;
  log[k] = 0;
  if (f) fclose(f);
}

/* The shared object of src, compiled unless the cache has it. */
static CUresult build(const char *src, char *so, size_t sosize, char *log, size_t logsize) {
  char dir[256], shim[512], launch[512];
  const char *cache = getenv("FAKE_CUDA_CACHE");
  if (cache && *cache) snprintf(dir, sizeof dir, "%s", cache);
  else snprintf(dir, sizeof dir, "/tmp/dvm-fake-cuda-%u", (unsigned)getuid());
  (void)mkdir(dir, 0700);
  snprintf(shim, sizeof shim, "%s/shim.h", shim_dir());
  snprintf(launch, sizeof launch, "%s/shim_launch.h", shim_dir());
  uint64_t h = fnv_file(fnv_file(0xcbf29ce484222325ull, shim), launch);
  if (!h) {
    snprintf(log, logsize, "fake_cuda: cannot read %s", shim);
    return FAKE_INVALID_SOURCE;
  }
  h = fnv(h, src, strlen(src));
  snprintf(so, sosize, "%s/%016llx.so", dir, (unsigned long long)h);
  if (access(so, R_OK) == 0) return 0;
  /* made under names of this build's own, then renamed: other test
   * processes, and other threads of this one (dvm serve's workers each
   * load the module), may build the same source at once */
  static atomic_uint builds;
  unsigned n = atomic_fetch_add(&builds, 1);
  char cc[300], tmp[300], errs[300];
  snprintf(cc, sizeof cc, "%s/%016llx.%d.%u.cc", dir, (unsigned long long)h, (int)getpid(), n);
  snprintf(tmp, sizeof tmp, "%s/%016llx.%d.%u.so", dir, (unsigned long long)h, (int)getpid(), n);
  snprintf(errs, sizeof errs, "%s/%016llx.%d.%u.log", dir, (unsigned long long)h, (int)getpid(), n);
  FILE *f = fopen(cc, "w");
  if (!f) {
    snprintf(log, logsize, "fake_cuda: cannot write %s", cc);
    return FAKE_INVALID_SOURCE;
  }
  fprintf(f, "#include \"shim.h\"\n%s\n#include \"shim_launch.h\"\n", src);
  fclose(f);
  int bad = compile(cc, tmp, errs);
  if (bad) read_log(errs, log, logsize);
  else if (rename(tmp, so) != 0) bad = 1;
  unlink(cc), unlink(errs), unlink(tmp);
  return bad ? FAKE_INVALID_SOURCE : 0;
}

CUresult fake_module_load(const char *image, int source, fake_module **out, char *log, size_t logsize) {
  fake_module *m = calloc(1, sizeof *m);
  if (!m) return FAKE_OUT_OF_MEMORY;
  if (source) {
    char so[300];
    CUresult r = build(image, so, sizeof so, log, logsize);
    if (!r && !(m->so = dlopen(so, RTLD_NOW | RTLD_LOCAL))) {
      snprintf(log, logsize, "fake_cuda: %s", dlerror());
      r = FAKE_INVALID_IMAGE;
    }
    if (!r && !(*(void **)&m->launch = dlsym(m->so, "dvm_emu_launch"))) r = FAKE_INVALID_IMAGE;
    if (r) {
      if (m->so) dlclose(m->so);
      free(m);
      return r;
    }
  }
  *out = m;
  return 0;
}

void fake_module_unload(fake_module *m) {
  if (m->so) dlclose(m->so);
  free(m);
}

CUresult fake_module_function(fake_module *m, const char *name, fake_function **f) {
  for (int i = 0; i < m->nfn; i++)
    if (strcmp(m->fn[i].name, name) == 0) {
      *f = &m->fn[i];
      return 0;
    }
  void *k = m->so ? dlsym(m->so, name) : NULL;
  if ((m->so && !k) || m->nfn == DVM_GEN_MAX_TILE + 1 || strlen(name) >= sizeof m->fn[0].name)
    return FAKE_NOT_FOUND;
  fake_function *fn = &m->fn[m->nfn++];
  fn->module = m, fn->kernel = k;
  strcpy(fn->name, name);
  *f = fn;
  return 0;
}

int fake_module_run(const fake_function *f, const unsigned *grid, const unsigned *block, int schedule,
                    unsigned long long seed, const dvm_gen_params *p) {
  return f->module->launch(f->kernel, grid, block, schedule, seed, p);
}
