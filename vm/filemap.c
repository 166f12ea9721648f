/* Storages over mapped data files, and constants read from them by rows.
 *
 * An external data file (vm/extdata.c) is mapped whole, private and
 * read-only, while its module links. A kernel that reads a constant of it
 * only by rows along its first axis (Gather of an embedding table) may ask
 * for a rows form (dvm_rows_form): the constant then stays in its file and
 * the form reads the rows asked for with pread, checking each block read
 * against the hash taken when the form was made, in the same pass that
 * hashed the whole constant for the load's check. A file changed after
 * load is then an error naming it, never an answer, and a table of which a
 * few rows are read costs no memory. pread, not the mapping: a file cut
 * short gives an error, not SIGBUS. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "object.h"

typedef struct mapping {
  void *p;
  size_t size;
  int fd;           /* the file, open while its module links; -1 after */
  const char *path; /* as the module names it, while its module links */
} mapping;

static void unmap(void *ctx) {
  mapping *mp = ctx;
  munmap(mp->p, mp->size);
  free(mp);
}

dvm_status *dvm_storage_map_file(int fd, const char *path, size_t size, dvm_storage **out) {
  mapping *mp = malloc(sizeof *mp);
  void *p = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  if (!mp || p == MAP_FAILED) {
    free(mp);
    return p == MAP_FAILED ? dvm_status_new(DVM_IO, "external file %s: mmap: %s", path, strerror(errno))
                           : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
#ifdef MADV_NOHUGEPAGE
  if (p) madvise(p, size, MADV_NOHUGEPAGE); /* pages go back one constant at a time */
#endif
  *mp = (mapping){p, size, fd, path};
  dvm_status *st = dvm_storage_wrap(DVM_DEVICE_CPU, p, size, unmap, mp, out);
  if (st) {
    unmap(mp);
    return st;
  }
  (*out)->droppable = true;
  return NULL;
}

void dvm_storage_file_closed(dvm_storage *s) {
  if (s->deleter == unmap) ((mapping *)s->ctx)->fd = -1, ((mapping *)s->ctx)->path = NULL;
}

enum { ROWS_BLOCK = 16384 }; /* bytes read and checked at a time (at least a row) */

typedef struct rows_form {
  int fd;
  char *path;
  uint64_t offset;           /* of the constant in the file */
  size_t nbytes, row, block; /* block: whole rows */
  uint64_t whole;            /* XXH3-64 of the constant, taken with the blocks' */
  uint64_t hashes[];         /* per block */
} rows_form;

static void rows_free(void *p) {
  rows_form *f = p;
  if (f->fd >= 0) close(f->fd);
  free(f->path);
  free(f);
}

dvm_status *dvm_file_read(int fd, const char *path, void *buf, size_t n, uint64_t at) {
  for (size_t got = 0; got < n;) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return dvm_status_new(DVM_IO, "reading \"%s\" at byte %llu: %s", path, (unsigned long long)(at + got),
                            r < 0 ? strerror(errno) : "the file is shorter than at load");
    got += (size_t)r;
  }
  return NULL;
}

dvm_status *dvm_rows_form(const dvm_tensor *t, size_t row, void **data, void (**free_data)(void *)) {
  const mapping *mp = t->storage->deleter == unmap ? t->storage->ctx : NULL;
  size_t nbytes = dvm_tensor_nbytes(t);
  if (!mp || mp->fd < 0 || !row || !nbytes || nbytes % row) return NULL; /* not in a file linking now: declined */
  size_t block = ROWS_BLOCK / row ? ROWS_BLOCK / row * row : row, nblocks = (nbytes + block - 1) / block;
  rows_form *f = calloc(1, sizeof *f + nblocks * sizeof f->hashes[0]);
  char *path = strdup(mp->path), *buf = malloc(block);
  XXH3_state_t *h = XXH3_createState();
  dvm_status *st = f && path && buf && h && XXH3_64bits_reset(h) == XXH_OK ? NULL
                   : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (f) *f = (rows_form){-1, path, t->offset, nbytes, row, block, 0};
  else free(path);
  if (!st && (f->fd = dup(mp->fd)) < 0) st = dvm_status_new(DVM_IO, "\"%s\": dup: %s", path, strerror(errno));
  for (size_t b = 0; !st && b < nblocks; b++) {
    size_t n = b + 1 < nblocks ? block : nbytes - b * block;
    if (!(st = dvm_file_read(f->fd, f->path, buf, n, f->offset + b * block))) {
      f->hashes[b] = XXH3_64bits(buf, n);
      XXH3_64bits_update(h, buf, n);
    }
  }
  if (!st) f->whole = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  free(buf);
  if (st) {
    if (f) rows_free(f);
    return st;
  }
  *data = f;
  *free_data = rows_free;
  return NULL;
}

dvm_status *dvm_rows_read(const void *form, int64_t r, int64_t n, void *dst) {
  const rows_form *f = form;
  size_t per = f->block / f->row, lo = (size_t)r, hi = (size_t)(r + n);
  char *buf = n > 0 ? malloc(f->block) : NULL;
  if (n > 0 && !buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = NULL;
  for (size_t b = lo / per; !st && b * per < hi; b++) {
    uint64_t at = f->offset + b * f->block;
    size_t len = f->nbytes - b * f->block < f->block ? f->nbytes - b * f->block : f->block;
    if ((st = dvm_file_read(f->fd, f->path, buf, len, at))) break;
    if (XXH3_64bits(buf, len) != f->hashes[b]) {
      st = dvm_status_new(DVM_CORRUPT, "bytes %llu..%llu of \"%s\" changed after the module was loaded",
                          (unsigned long long)at, (unsigned long long)(at + len), f->path);
      break;
    }
    size_t from = b * per > lo ? b * per : lo, to = (b + 1) * per < hi ? (b + 1) * per : hi;
    memcpy((char *)dst + (from - lo) * f->row, buf + (from - b * per) * f->row, (to - from) * f->row);
  }
  free(buf);
  return st;
}

bool dvm_rows_whole(const dvm_tensor *t, uint64_t *hash) {
  for (const dvm_packed *p = t->packed; p; p = p->next)
    if (p->free_data == rows_free) {
      *hash = ((const rows_form *)p->data)->whole;
      return true;
    }
  return false;
}
