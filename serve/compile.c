/* model.onnx in a repository, compiled at load the way `dvm compile` does
 * (tools/cmd_compile.c): import, fold, symbol ranges from the config's
 * `dim` lines, infer, graph rewrites, lower; the bytes are loaded as a module. With a cache
 * folder, the .dvmb is kept there under a key of the file's identity
 * (path, size, modification time), the compile settings and the compiler's
 * (compiler_id), and a later
 * load maps it instead of compiling; a cache entry that fails to load is
 * compiled again, and a cache that cannot be written is only not used. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fold.h"
#include "infer.h"
#include "ir.h"
#include "lower.h"
#include "onnx_import.h"
#include "pass.h"
#include "serve_compile.h"

typedef struct warn_to {
  const dvms_repo_options *o;
  const char *model;
} warn_to;

static void warn(void *ctx, const char *msg) {
  const warn_to *w = ctx;
  w->o->warn(w->o->warn_ctx, w->model, msg);
}

static dvm_status *compile(const char *path, const char *name, const dvms_config *cfg,
                           const dvms_repo_options *o, uint8_t **bytes, size_t *size) {
  dvmc_ctx *c;
  dvm_status *st = dvmc_ctx_create(&c);
  if (st) return st;
  dvmc_graph *g = NULL;
  int folded;
  dvmc_options co = {.function = cfg->function};
  if (!(st = dvmc_import_onnx(c, path, &g)) && !(st = dvmc_fold(c, g, &folded))) {
    for (int i = 0; i < cfg->ndims && !st; i++) st = dvm_status_annotate(dvmc_graph_set_dim(c, g, cfg->dims[i]), "dim");
    if (!st) st = dvmc_infer(c, g);
    if (!st && o->warn) dvmc_infer_disagreements(g, warn, &(warn_to){o, name});
    if (!st && !(st = dvmc_passes_run(c, g, 0, NULL))) st = dvmc_lower(c, g, &co, bytes, size);
  }
  dvmc_ctx_destroy(c);
  return st;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
  return h;
}

/* h extended with the identity (size, modification time) of the file that
 * holds this compiler: the dvm executable, or the library that links it
 * into another program. A rebuilt or upgraded dvm so compiles again rather
 * than load what an older compiler made, which may be loadable and still
 * differ (a fixed bug). */
static uint64_t compiler_id(uint64_t h) {
  Dl_info info;
  struct stat sb;
  int found = dladdr((void *)(uintptr_t)&compiler_id, &info) && info.dli_fname && info.dli_fname[0] &&
              stat(info.dli_fname, &sb) == 0;
  if (!found && stat("/proc/self/exe", &sb) != 0) return h;
  int64_t id[3] = {(int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec, (int64_t)sb.st_mtim.tv_nsec};
  return fnv(h, id, sizeof id);
}

/* CACHE/NAME-KEY.dvmb for the ONNX file at path and cfg; 0 if unstattable. */
static int cache_path(const char *cache, const char *name, const char *path, const dvms_config *cfg,
                      char *out, size_t size) {
  struct stat sb;
  char *abs = realpath(path, NULL);
  if (!abs || stat(abs, &sb) != 0) {
    free(abs);
    return 0;
  }
  uint64_t h = fnv(0xcbf29ce484222325ull, abs, strlen(abs) + 1);
  free(abs);
  int64_t id[3] = {(int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec, (int64_t)sb.st_mtim.tv_nsec};
  h = fnv(h, id, sizeof id);
  h = fnv(h, cfg->function, strlen(cfg->function) + 1);
  for (int i = 0; i < cfg->ndims; i++) h = fnv(h, cfg->dims[i], strlen(cfg->dims[i]) + 1);
  h = compiler_id(h);
  return snprintf(out, size, "%s/%s-%016llx.dvmb", cache, name, (unsigned long long)h) < (int)size;
}

/* Writes bytes to path through a temporary file and a rename, so a reader
 * never maps half a file; failure leaves no file. */
static void cache_write(const char *path, const uint8_t *bytes, size_t size) {
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return;
  int ok = fwrite(bytes, 1, size, f) == size;
  ok &= fclose(f) == 0;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

dvm_status *dvms_compile_onnx(const char *path, const char *name, const dvms_config *cfg,
                              const dvms_repo_options *o, dvm_module **out) {
  const char *cache = o->cache_dir;
  char cached[1100];
  int use_cache = cache && cache_path(cache, name, path, cfg, cached, sizeof cached);
  if (use_cache) {
    dvm_status *st = dvm_module_load_file(cached, NULL, out);
    if (!st) return NULL;
    dvm_status_free(st); /* absent or stale: compile it */
  }
  uint8_t *bytes = NULL;
  size_t size = 0;
  dvm_status *st = compile(path, name, cfg, o, &bytes, &size);
  if (!st) st = dvm_module_load_memory(bytes, size, NULL, out);
  if (!st && use_cache) cache_write(cached, bytes, size);
  free(bytes);
  return dvm_status_annotate(st, "compiling %s", path);
}
