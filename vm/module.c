/* Loading modules (read, verify, link) and the signature API. */
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytecode.h"
#include "registry.h"

typedef struct {
  void *p;
  size_t size;
  bool mapped;
} file_bytes;

static void free_bytes(void *ctx) {
  file_bytes *fb = ctx;
  if (fb->mapped) munmap(fb->p, fb->size);
  else free(fb->p);
  free(fb);
}

dvm_status *dvm_module_new_empty(dvm_module **out) {
  dvm_module *m = calloc(1, sizeof *m);
  if (!m) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  atomic_init(&m->refs, 1);
  *out = m;
  return NULL;
}

/* Takes ownership of fb (even on failure). `dir`: where external
 * constants' paths start (opts->data_dir, else the file's folder; NULL for
 * a module given in memory without one). */
static dvm_status *load(const dvm_registry *reg, file_bytes *fb, const char *dir, const dvm_load_options *opts,
                        dvm_module **out) {
  dvm_module *m = NULL;
  dvm_status *st = dvm_module_new_empty(&m);
  if (st) {
    free_bytes(fb);
    return st;
  }
  m->reg = reg;
  m->bytes = fb->p;
  m->size = fb->size;
  st = dvm_storage_wrap(DVM_DEVICE_CPU, fb->p, fb->size, free_bytes, fb, &m->data);
  if (st) {
    free_bytes(fb);
    free(m);
    return st;
  }
  m->data->droppable = fb->mapped;
  if ((st = dvm_bc_read(m, fb->p, fb->size)) || (st = dvm_verify_module(m)) ||
      (st = dvm_extdata_link(m, dir, opts))) {
    dvm_module_release(m);
    return st;
  }
  /* read-only from now on, as a mapping of the file was: a write through a
   * result that is a constant faults instead of changing every VM's answers */
  if (fb->mapped) mprotect(fb->p, fb->size, PROT_READ);
  *out = m;
  return NULL;
}

dvm_status *dvm_module_load_memory_with(const dvm_registry *reg, const void *data, size_t size,
                                        const dvm_load_options *opts, dvm_module **out) {
  file_bytes *fb = malloc(sizeof *fb);
  void *copy = aligned_alloc(DVM_BC_DATA_ALIGN, (size + DVM_BC_DATA_ALIGN) & ~(size_t)(DVM_BC_DATA_ALIGN - 1));
  if (!fb || !copy) {
    free(fb);
    free(copy);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  if (size) memcpy(copy, data, size);
  *fb = (file_bytes){copy, size, false};
  return load(reg, fb, opts ? opts->data_dir : NULL, opts, out);
}

/* Reads the file into private memory instead of mapping it: a mapping is
 * not a snapshot, so a file written in place after load would change the
 * module's answers, and one cut short would end the process with SIGBUS on
 * the next read. Anonymous pages, so that the plain bytes of weights that
 * kernels read only packed can still be given back (vm/extdata.c). */
static dvm_status *read_file(int fd, const char *path, size_t size, void **out) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: %zu bytes to read it into", path, size);
#ifdef MADV_NOHUGEPAGE
  madvise(p, size, MADV_NOHUGEPAGE); /* pages go back one constant at a time */
#endif
  for (size_t got = 0; got < size;) {
    ssize_t r = pread(fd, (uint8_t *)p + got, size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      dvm_status *st = dvm_status_new(DVM_IO, "%s: %s", path, r < 0 ? strerror(errno) : "the file shrank while loading");
      munmap(p, size);
      return st;
    }
    got += (size_t)r;
  }
  *out = p;
  return NULL;
}

dvm_status *dvm_module_load_file_with(const dvm_registry *reg, const char *path,
                                      const dvm_load_options *opts, dvm_module **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO is refused, not waited on */
  if (fd < 0)
    return dvm_status_new(errno == ENOENT ? DVM_NOT_FOUND : DVM_IO, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return dvm_status_new(DVM_IO, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  void *p = NULL;
  dvm_status *st = size ? read_file(fd, path, size, &p) : dvm_status_new(DVM_CORRUPT, "%s: file is empty", path);
  close(fd);
  if (st) return st;
  file_bytes *fb = malloc(sizeof *fb);
  if (!fb) {
    munmap(p, size);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  *fb = (file_bytes){p, size, true};
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
  if (!dir) {
    free_bytes(fb);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  st = load(reg, fb, opts && opts->data_dir ? opts->data_dir : dir, opts, out);
  free(dir);
  return dvm_status_annotate(st, "%s", path);
}

void dvm_module_retain(dvm_module *m) { atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed); }

void dvm_module_release(dvm_module *m) {
  if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  for (uint32_t i = 0; i < m->nconsts; i++) dvm_tensor_release(m->consts[i].tensor);
  if (m->data) dvm_storage_release(m->data);
  dvm_arena_free(&m->arena);
  free(m);
}

int dvm_module_function_count(const dvm_module *m) { return (int)m->nfuncs; }

int dvm_module_find_function(const dvm_module *m, const char *name) {
  for (uint32_t i = 0; i < m->nfuncs; i++)
    if (strcmp(m->funcs[i].name, name) == 0) return (int)i;
  return -1;
}

const char *dvm_function_name(const dvm_module *m, int f) { return m->funcs[f].name; }
int dvm_function_param_count(const dvm_module *m, int f) { return (int)m->funcs[f].nparams; }
int dvm_function_result_count(const dvm_module *m, int f) { return (int)m->funcs[f].nresults; }
int dvm_function_symbol_count(const dvm_module *m, int f) { return (int)m->funcs[f].nsyms; }

static void sig_info(const dvm_func *fn, const dvm_sig *s, dvm_param_info *out) {
  out->name = s->name;
  out->kind = (dvm_kind)s->kind;
  out->dtype = s->kind != DVM_VAL_TUPLE ? (dvm_dtype)s->dtype
              : dvm_sig_item_dtype(s) >= 0 ? (dvm_dtype)dvm_sig_item_dtype(s) : DVM_DTYPE_COUNT;
  out->rank = s->rank;
  for (int d = 0; d < s->rank; d++) {
    int sym = dvm_dim_symbol(s->dims[d]);
    out->dims[d].value = sym >= 0 ? -1 : s->dims[d];
    out->dims[d].symbol = sym >= 0 ? fn->syms[sym].name : NULL;
  }
}

void dvm_function_param(const dvm_module *m, int f, int i, dvm_param_info *out) {
  sig_info(&m->funcs[f], &m->funcs[f].params[i], out);
}

void dvm_function_result(const dvm_module *m, int f, int i, dvm_param_info *out) {
  sig_info(&m->funcs[f], &m->funcs[f].results[i], out);
}

void dvm_function_symbol(const dvm_module *m, int f, int i, dvm_symbol_info *out) {
  const dvm_sym *s = &m->funcs[f].syms[i];
  out->name = s->name;
  out->lo = s->lo;
  out->hi = s->hi;
}

const char *dvm_function_info(const dvm_module *m, int f, const char *key) {
  const dvm_func *fn = &m->funcs[f];
  for (uint32_t i = 0; i < fn->ninfo; i++)
    if (strcmp(fn->info[i].key, key) == 0) return fn->info[i].value;
  return NULL;
}

bool dvm_module_holds(const dvm_module *m, const dvm_tensor *t) {
  if (t->storage == m->data) return true;
  for (uint32_t i = 0; i < m->nconsts; i++) /* external constants have storages of their own */
    if (m->consts[i].storage && m->consts[i].storage == t->storage) return true;
  for (uint32_t i = 0; i < m->nconsts; i++) /* and so do strings */
    if (m->consts[i].dtype == DVM_STRING && m->consts[i].tensor && m->consts[i].tensor->storage == t->storage)
      return true;
  return false;
}

int dvm_module_constant_count(const dvm_module *m) { return (int)m->nconsts; }

const dvm_tensor *dvm_module_constant(const dvm_module *m, int i, const char **name) {
  if (i < 0 || (uint32_t)i >= m->nconsts) return NULL;
  if (name) *name = m->consts[i].name;
  return m->consts[i].tensor;
}

size_t dvm_module_constant_bytes(const dvm_module *m) {
  size_t n = 0;
  for (uint32_t i = 0; i < m->nconsts; i++) n += m->consts[i].nbytes;
  return n;
}

int dvm_module_kernel_count(const dvm_module *m) { return (int)m->nkernels; }

size_t dvm_module_released_bytes(const dvm_module *m) { return m->released; }
