/* model.onnx in a repository, compiled at load through the compiler's API
 * (dvmc.h) with the config's function and `dim` lines; the bytes are loaded
 * as a module. With a cache folder, the .dvmb is kept there under a key of
 * the content of the model's folder (model.onnx and its data files), the
 * compile settings and the compiler's identity (dvmc_compiler_id), and a
 * later load reads it instead of compiling; a cache entry that fails to load is
 * compiled again (but not when memory ran out), and a cache that cannot be
 * written is only not used. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "dvmc.h"
#include "serve_compile.h"

typedef struct warn_to {
  const dvms_repo_options *o;
  const char *model;
} warn_to;

/* The compiler's warnings go to the repository's; its notes and progress
 * are for a person at a terminal, not a server's log. */
static void warn(void *ctx, dvmc_diag_kind kind, const char *msg) {
  const warn_to *w = ctx;
  if (kind == DVMC_DIAG_WARNING) w->o->warn(w->o->warn_ctx, w->model, msg);
}

static dvm_status *compile(const char *path, const char *name, const dvms_config *cfg,
                           const dvms_repo_options *o, uint8_t **bytes, size_t *size) {
  const char *dims[sizeof cfg->dims / sizeof cfg->dims[0]];
  for (int i = 0; i < cfg->ndims; i++) dims[i] = cfg->dims[i];
  dvmc_compile_options co;
  dvmc_compile_options_init(&co);
  co.function = cfg->function;
  co.dims = dims;
  co.ndims = cfg->ndims;
  if (cfg->last_position[0]) co.last_position = cfg->last_position;
  warn_to w = {o, name};
  if (o->warn) {
    co.diag = warn;
    co.diag_ctx = &w;
  }
  return dvmc_compile_file(path, &co, bytes, size);
}

/* XXH3-64 of the names and bytes of the regular files in the folder of
 * `path`, in name order: the ONNX file and the data files it may refer to.
 * Content, not sizes and modification times, which a different model
 * shares after `cp -p` or a reproducible build. 1 when hashed, 0 if one
 * cannot be read, -1 without memory to list the folder. */
static int folder_hash(const char *path, XXH3_state_t *x) {
  char dir[1100];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return 0;
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  struct dirent **list = NULL;
  errno = 0;
  int n = scandir(slash ? dir : ".", &list, NULL, alphasort), ok = n >= 0 ? 1 : errno == ENOMEM ? -1 : 0;
  for (int i = 0; i < n; i++) {
    char file[1400];
    struct stat sb;
    snprintf(file, sizeof file, "%s/%s", slash ? dir : ".", list[i]->d_name);
    if (ok && list[i]->d_name[0] != '.' && stat(file, &sb) == 0 && S_ISREG(sb.st_mode)) {
      FILE *f = fopen(file, "rb");
      char buf[1 << 16];
      XXH3_64bits_update(x, list[i]->d_name, strlen(list[i]->d_name) + 1);
      for (size_t got; f && (got = fread(buf, 1, sizeof buf, f)) > 0;) XXH3_64bits_update(x, buf, got);
      ok = f && !ferror(f);
      if (f) fclose(f);
    }
    free(list[i]);
  }
  free(list);
  return ok;
}

/* CACHE/NAME-KEY.dvmb for the ONNX file at path and cfg: 1, or 0 if its
 * folder cannot be read, -1 without memory to make the key. */
static int cache_path(const char *cache, const char *name, const char *path, const dvms_config *cfg,
                      char *out, size_t size) {
  XXH3_state_t *x = XXH3_createState();
  int ok = !x ? -1 : XXH3_64bits_reset(x) == XXH_OK ? folder_hash(path, x) : 0;
  if (ok > 0) {
    XXH3_64bits_update(x, cfg->function, strlen(cfg->function) + 1);
    for (int i = 0; i < cfg->ndims; i++) XXH3_64bits_update(x, cfg->dims[i], strlen(cfg->dims[i]) + 1);
    XXH3_64bits_update(x, cfg->last_position, strlen(cfg->last_position) + 1);
    uint64_t compiler = dvmc_compiler_id(); /* another dvm compiles again */
    XXH3_64bits_update(x, &compiler, sizeof compiler);
    ok = snprintf(out, size, "%s/%s-%016llx.dvmb", cache, name, (unsigned long long)XXH3_64bits_digest(x)) <
         (int)size;
  }
  XXH3_freeState(x);
  return ok;
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
  int use_cache = cache ? cache_path(cache, name, path, cfg, cached, sizeof cached) : 0;
  if (use_cache < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "the cache key of %s", path);
  if (use_cache) {
    dvm_status *st = dvm_module_load_file(cached, NULL, out);
    /* out of memory is not a stale entry: compiling would need more */
    if (!st || dvm_status_code(st) == DVM_OUT_OF_MEMORY) return st;
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
