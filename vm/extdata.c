/* External constants (section external, docs/bytecode.md 3.9): bytes that
 * stay in the files the model came with, mapped at load (vm/filemap.c), checked against
 * the hash the compiler recorded, and held so that a file changed after
 * load cannot change an answer (docs/bytecode.md 3.9 says why this way):
 *
 * - a constant that kernels read only through the forms they packed of it
 *   at link is packed from the mapping, then hashed there; its plain pages
 *   go back and are never read again;
 * - a constant that a kernel reads only by rows, through the rows form it
 *   asked for (an embedding table that Gather reads a few rows of), stays
 *   in its file, checked as it is read (vm/filemap.c);
 * - any other is read once (pread) into memory of its own, and that copy
 *   is hashed and used. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "bytecode.h"
#include "object.h"

typedef struct extfile {
  const char *path; /* as the module names it */
  int fd;
  size_t size;
  dvm_storage *map; /* the whole file, private and read-only */
} extfile;

static dvm_status *open_file(const char *dir, extfile *f, const char *cname) {
  char *full = malloc(strlen(dir) + strlen(f->path) + 2);
  if (!full) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  sprintf(full, "%s/%s", dir, f->path);
  dvm_status *st = NULL;
  struct stat sb;
  f->fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f->fd < 0 || fstat(f->fd, &sb) != 0)
    st = dvm_status_new(errno == ENOENT ? DVM_NOT_FOUND : DVM_IO, "constant \"%s\": external file %s: %s",
                        cname, full, strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    st = dvm_status_new(DVM_IO, "constant \"%s\": external file %s is not a regular file", cname, full);
  free(full);
  if (st) return st;
  f->size = (size_t)sb.st_size;
  return dvm_storage_map_file(f->fd, f->path, f->size, &f->map);
}

/* Maps each file once and points every external constant at its bytes. */
static dvm_status *map_files(dvm_module *m, const char *dir, extfile *files, uint32_t *nfiles) {
  for (uint32_t i = 0; i < m->nconsts; i++) {
    dvm_const *c = &m->consts[i];
    if (!c->ext_path) continue;
    if (!dir)
      return dvm_status_new(DVM_UNIMPLEMENTED, "constant \"%s\" is in the file \"%s\", but the module "
                                               "was loaded from memory, without a folder to find it in",
                            c->name, c->ext_path);
    uint32_t k = 0;
    while (k < *nfiles && strcmp(files[k].path, c->ext_path) != 0) k++;
    if (k == *nfiles) {
      files[k] = (extfile){c->ext_path, -1, 0, NULL};
      ++*nfiles;
      dvm_status *st = open_file(dir, &files[k], c->name);
      if (st) return st;
    }
    if (c->ext_offset > files[k].size || c->nbytes > files[k].size - c->ext_offset)
      return dvm_status_new(DVM_CORRUPT, "constant \"%s\": bytes %llu..%llu of \"%s\" lie past its end (%zu bytes)",
                            c->name, (unsigned long long)c->ext_offset,
                            (unsigned long long)(c->ext_offset + c->nbytes), c->ext_path, files[k].size);
    c->storage = files[k].map;
    c->data = (const uint8_t *)files[k].map->ptr + c->ext_offset;
  }
  return NULL;
}

/* h, the XXH3-64 of c's bytes as read, against the module's. */
static dvm_status *hash_check(const dvm_const *c, uint64_t h) {
  if (h == c->ext_hash) return NULL;
  return dvm_status_new(DVM_CORRUPT, "constant \"%s\": bytes %llu..%llu of \"%s\" have XXH3-64 %016llx, the "
                                     "module expects %016llx (the file changed after compiling)",
                        c->name, (unsigned long long)c->ext_offset,
                        (unsigned long long)(c->ext_offset + c->nbytes), c->ext_path,
                        (unsigned long long)h, (unsigned long long)c->ext_hash);
}

static void free_copy(void *p) { free(p); }

/* Reads c's bytes into memory of its own, checks them, and moves c's
 * tensor onto them. */
static dvm_status *copy_const(dvm_const *c, int fd) {
  size_t padded = (c->nbytes + 63) & ~(size_t)63;
  uint8_t *buf = aligned_alloc(64, padded ? padded : 64);
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = dvm_file_read(fd, c->ext_path, buf, c->nbytes, c->ext_offset);
  if (st) st = dvm_status_annotate(st, "constant \"%s\"", c->name);
  dvm_storage *s = NULL;
  if (!st) st = hash_check(c, XXH3_64bits(buf, c->nbytes));
  if (!st) st = dvm_storage_wrap(DVM_DEVICE_CPU, buf, c->nbytes, free_copy, buf, &s);
  if (st) {
    free(buf);
    return st;
  }
  dvm_storage_release(c->tensor->storage);
  c->tensor->storage = s;
  c->tensor->offset = 0;
  c->storage = s;
  c->data = buf;
  return NULL;
}

dvm_status *dvm_extdata_settle(dvm_module *m, dvm_const *c) {
  uint64_t whole;
  dvm_status *st = hash_check(c, dvm_rows_whole(c->tensor, &whole) ? whole : XXH3_64bits(c->data, c->nbytes));
  if (st) return st;
  m->released += dvm_tensor_drop_pages(c->tensor);
  c->settled = true;
  return NULL;
}

/* Holds every external constant so that nothing reads its file after
 * load: as its forms (settled as they were made, link.c) or as a checked
 * copy, as above. */
static dvm_status *seal(dvm_module *m, extfile *files) {
  dvm_status *st = NULL;
  for (uint32_t i = 0; i < m->nconsts && !st; i++) {
    dvm_const *c = &m->consts[i];
    if (!c->ext_path || c->settled) continue;
    if (dvm_const_packed_only(c)) {
      st = dvm_extdata_settle(m, c);
      continue;
    }
    uint32_t k = 0;
    while (strcmp(files[k].path, c->ext_path) != 0) k++;
    st = copy_const(c, files[k].fd);
  }
  return st;
}

dvm_status *dvm_extdata_link(dvm_module *m, const char *dir, const dvm_load_options *opts) {
  uint32_t next = 0, nfiles = 0;
  for (uint32_t i = 0; i < m->nconsts; i++) next += m->consts[i].ext_path != NULL;
  extfile *files = calloc(next + 1, sizeof *files);
  if (!files) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = map_files(m, dir, files, &nfiles);
  if (!st) st = dvm_module_link(m, opts);
  if (!st) st = seal(m, files);
  for (uint32_t k = 0; k < nfiles; k++) {
    if (files[k].fd >= 0) close(files[k].fd);
    if (files[k].map) dvm_storage_file_closed(files[k].map); /* rows forms hold their own */
    dvm_storage_release(files[k].map); /* constants left on it hold their own reference */
  }
  free(files);
  return st;
}
