/* External data files, mapped (see extdata.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "extdata.h"

struct dvmc_extfile {
  struct dvmc_extfile *next;
  char *path;        /* as opened: the model's folder, then the location */
  const uint8_t *base;
  size_t size;
  char *rel_dir;     /* the folder rel was made for, and rel (NULL: not inside) */
  char *rel;
};

dvm_status *dvmc_extdata_map(dvmc_ctx *c, const char *path, int fd, size_t size, const uint8_t **out) {
  for (dvmc_extfile *f = c->extfiles; f; f = f->next)
    if (strcmp(f->path, path) == 0 && f->size == size) {
      *out = f->base;
      return NULL;
    }
  dvmc_extfile *f = calloc(1, sizeof *f);
  void *p = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  if (!f || !(f->path = strdup(path)) || p == MAP_FAILED) {
    if (p && p != MAP_FAILED) munmap(p, size);
    int mapped = p != MAP_FAILED;
    if (f) free(f->path);
    free(f);
    return mapped ? dvm_status_new(DVM_OUT_OF_MEMORY, "")
                  : dvm_status_new(DVM_IO, "mapping external data file %s failed", path);
  }
  f->base = p;
  f->size = size;
  f->next = c->extfiles;
  c->extfiles = f;
  *out = f->base;
  return NULL;
}

/* f's path relative to dir when f lies inside dir (every link resolved).
 * Without memory for it, c->oom: the constant must not be copied into
 * the module instead, which would be another module. */
static const char *relative(dvmc_ctx *c, dvmc_extfile *f, const char *dir) {
  if (f->rel_dir && strcmp(f->rel_dir, dir) == 0) return f->rel;
  free(f->rel_dir);
  free(f->rel);
  f->rel = NULL;
  errno = 0;
  char *root = realpath(dir, NULL), *real = root ? realpath(f->path, NULL) : NULL;
  if (errno == ENOMEM) c->oom = true;
  size_t n = root ? strlen(root) : 0;
  const char *inside = !real ? NULL
                       : strcmp(root, "/") == 0 ? real + 1
                       : strncmp(real, root, n) == 0 && real[n] == '/' ? real + n + 1 : NULL;
  if (inside && !(f->rel = strdup(inside))) c->oom = true;
  if (!(f->rel_dir = strdup(dir))) c->oom = true;
  free(real);
  free(root);
  return f->rel;
}

bool dvmc_extdata_find(dvmc_ctx *c, const char *dir, const dvmc_tensor *t, const char **path,
                       uint64_t *offset) {
  const uint8_t *p = t->data;
  for (dvmc_extfile *f = c->extfiles; f && p; f = f->next) {
    if (p < f->base || p >= f->base + f->size || t->nbytes > (size_t)(f->base + f->size - p)) continue;
    uint64_t off = (uint64_t)(p - f->base);
    const char *rel = relative(c, f, dir);
    if (!rel || off % 64) return false; /* 64: the loader's alignment (DVM_BC_DATA_ALIGN) */
    *path = rel;
    *offset = off;
    return true;
  }
  return false;
}

uint64_t dvmc_extdata_hash(const dvmc_tensor *t) {
  uint64_t h = XXH3_64bits(t->data, t->nbytes);
  /* its pages are not read again: the compile's RSS stays that of the
   * constants it makes, not of the files it reads */
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t mask = page > 0 ? (uintptr_t)page - 1 : 0, start = (uintptr_t)t->data;
  uintptr_t lo = (start + mask) & ~mask, hi = (start + t->nbytes) & ~mask;
  if (page > 0 && hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
  return h;
}

void dvmc_extdata_unmap(dvmc_ctx *c) {
  while (c->extfiles) {
    dvmc_extfile *f = c->extfiles;
    c->extfiles = f->next;
    if (f->size) munmap((void *)f->base, f->size);
    free(f->path);
    free(f->rel_dir);
    free(f->rel);
    free(f);
  }
}
