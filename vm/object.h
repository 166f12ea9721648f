/* Internal layout of storages, tensors and tuples, shared by libdvm, ops/
 * and shapefuncs/. Embedders see only the opaque types. */
#ifndef DVM_OBJECT_H
#define DVM_OBJECT_H

#include <stdatomic.h>

#include "dvm/value.h"

typedef struct dvm_pool dvm_pool;

struct dvm_storage {
  atomic_int refs;
  uint8_t device;    /* dvm_device_kind */
  void *ptr;
  size_t size;       /* usable bytes */
  dvm_pool *pool;    /* the pool it returns to; NULL for external memory */
  size_t block;      /* pool block size (its size class, or the exact size asked) */
  bool exact;        /* a pool block of the exact size asked (dvm_pool_alloc_exact) */
  uint32_t oversized; /* exact: requests in a row it served at over twice their size */
  uint64_t used;      /* the pool's invocation count when it was last handed out */
  void (*deleter)(void *ctx); /* external memory only */
  void *ctx;
  /* Whole pages of its own (a module's bytes, a mapped data file): those of
   * constants that nothing reads plain after load may be given back
   * (dvm_tensor_drop_pages). */
  bool droppable;
  /* A paged KV cache's pool (dvm_tensor_wrap_paged): block_rows > 0. */
  dvm_tensor_pages pages;
  /* Holds the elements of DVM_STRING tensors: a dvm_string pointer per 8
   * bytes, each one reference, released with the storage. Such a storage is
   * the only one a string tensor views, and a string tensor the only view
   * of it (vm/string.c). */
  bool strings;
};

static inline bool dvm_storage_paged(const dvm_storage *s) { return s->pages.block_rows > 0; }

/* An element of a DVM_STRING tensor: immutable bytes and a count of
 * references; NULL stands for "". */
typedef struct dvm_string {
  atomic_int refs;
  size_t len;
  char bytes[]; /* len bytes, then a NUL */
} dvm_string;

/* A new string of len bytes copied from s, holding one reference; NULL
 * when len is 0. */
DVM_MUST_USE dvm_status *dvm_string_new(const char *s, size_t len, dvm_string **out);
void dvm_string_retain(dvm_string *s);    /* NULL is fine */
void dvm_string_release(dvm_string *s);   /* NULL is fine */

static inline const char *dvm_string_bytes(const dvm_string *s, size_t *len) {
  if (len) *len = s ? s->len : 0;
  return s ? s->bytes : "";
}

/* Releases the n strings at p and sets them to NULL (""). */
void dvm_strings_clear(dvm_string **p, size_t n);

/* A module's string constant in the .dvmb data (docs/bytecode.md): numel
 * little-endian u64 byte counts, then the elements' bytes one after the
 * other. Checks that the blob of nbytes is one for numel elements. */
DVM_MUST_USE dvm_status *dvm_strings_blob_check(const uint8_t *blob, size_t nbytes, int64_t numel);
/* The elements of a checked blob into t, a new string tensor of numel. */
DVM_MUST_USE dvm_status *dvm_strings_blob_read(const uint8_t *blob, dvm_tensor *t);

/* A form of a constant tensor that a kernel built for one of its inputs
 * when the module was linked (dvm_kernel_def.prepack), e.g. a matmul weight
 * in its microkernel's layout. Read-only from then on, so every VM and
 * thread uses it without locking. */
typedef struct dvm_packed {
  struct dvm_packed *next;
  const void *owner; /* the dvm_kernel_def that built it */
  int input;         /* the input index it was built for */
  void *data;
  void (*free_data)(void *data);
} dvm_packed;

struct dvm_tensor {
  atomic_int refs;
  uint8_t dtype;
  uint8_t rank;
  dvm_storage *storage; /* holds one reference */
  size_t offset;        /* bytes into storage */
  dvm_packed *packed;   /* forms built at link; freed with the tensor */
  /* Set by the linker only around a prepack hook's call, when nothing but
   * the form being built reads the plain bytes (dvm_tensor_consumed). */
  bool consumable;
  int64_t dims[DVM_MAX_RANK];
};

/* Nesting is bounded so that releasing a tuple, which recurses, cannot
 * exhaust the stack however a program builds it. */
#define DVM_MAX_TUPLE_DEPTH 64
/* ... and so is the item count, so that an int index always fits. */
#define DVM_MAX_TUPLE_SIZE (1 << 24)

struct dvm_tuple {
  atomic_int refs;
  int n;
  int depth; /* 1 + the deepest tuple inside */
  dvm_value items[];
};

/* A storage over external memory: never pooled; deleter(ctx) at the end. */
DVM_MUST_USE dvm_status *dvm_storage_wrap(dvm_device_kind dev, void *ptr, size_t size,
                                          void (*deleter)(void *), void *ctx,
                                          dvm_storage **out);
void dvm_storage_retain(dvm_storage *s);
void dvm_storage_release(dvm_storage *s);

/* dvm_tensor_wrap for memory on `dev` (a device address for CUDA). */
DVM_MUST_USE dvm_status *dvm_tensor_wrap_on(dvm_device_kind dev, dvm_dtype dt, int rank, const int64_t *dims,
                                            void *data, void (*deleter)(void *), void *ctx, dvm_tensor **out);

/* A tensor view of `s` (retained) at byte `offset`; checks that the view
 * fits in the storage. */
DVM_MUST_USE dvm_status *dvm_tensor_view(dvm_storage *s, size_t offset, dvm_dtype dt, int rank,
                                         const int64_t *dims, dvm_tensor **out);

/* Attaches `data`, a form of t that kernel `owner` built for its input
 * `input`; t owns it from then on (free_data(data) when t is freed, or now
 * on failure). Only while t is not yet shared: at link time. */
DVM_MUST_USE dvm_status *dvm_tensor_attach_packed(dvm_tensor *t, const void *owner, int input,
                                                  void *data, void (*free_data)(void *));

/* Gives back to the system the whole pages inside t's bytes where its
 * storage is droppable, and returns how many bytes; 0 for any other
 * storage. For a constant whose kernels read a packed form instead: the
 * plain bytes were read to pack it, which made them resident. Only for a
 * constant nothing reads plain again: its pages read as zeros afterwards
 * (vm/extdata.c decides, docs/kernels.md). */
size_t dvm_tensor_drop_pages(const dvm_tensor *t);

/* For a prepack hook: bytes [offset, offset + size) of t's plain data are
 * read for the last time. Where t is consumable (its storage droppable)
 * their whole pages go back now, not after the hook, so that packing a
 * weight holds little more than its form; elsewhere nothing happens. */
void dvm_tensor_consumed(const dvm_tensor *t, size_t offset, size_t size);

/* A storage over the whole of file fd (size bytes), mapped private and
 * read-only, its pages droppable; path names it in messages. Its rows
 * forms may be made until dvm_storage_file_closed (vm/filemap.c). */
DVM_MUST_USE dvm_status *dvm_storage_map_file(int fd, const char *path, size_t size, dvm_storage **out);
void dvm_storage_file_closed(dvm_storage *s);
/* n bytes of file fd (named path in messages) at offset `at` into buf:
 * an error naming the file and the byte where it is shorter. */
DVM_MUST_USE dvm_status *dvm_file_read(int fd, const char *path, void *buf, size_t n, uint64_t at);

/* For a prepack hook of a kernel that reads t only by rows along its
 * first axis, each `row` bytes (Gather of an embedding table): a form that
 * reads rows from t's external data file when asked instead of holding
 * them, or *data left NULL where t is not in a file mapped by this load.
 * Its blocks' hashes are taken at once, with the whole's, which the load
 * checks against the module's (vm/extdata.c). */
DVM_MUST_USE dvm_status *dvm_rows_form(const dvm_tensor *t, size_t row, void **data, void (**free_data)(void *));
/* Rows [r, r + n) of such a form into dst, each block read checked: an
 * error naming the file and bytes where the file changed since load. */
DVM_MUST_USE dvm_status *dvm_rows_read(const void *form, int64_t r, int64_t n, void *dst);
/* Whether t has a rows form, and the XXH3-64 of t's bytes it read. */
bool dvm_rows_whole(const dvm_tensor *t, uint64_t *hash);

/* The form `owner` built of t for its input `input`, or NULL. */
static inline const void *dvm_tensor_packed(const dvm_tensor *t, const void *owner, int input) {
  for (const dvm_packed *p = t->packed; p; p = p->next)
    if (p->owner == owner && p->input == input) return p->data;
  return NULL;
}

static inline void *dvm_tensor_ptr(const dvm_tensor *t) {
  return (char *)t->storage->ptr + t->offset;
}

/* Overflow-checked size arithmetic, the one place it is done. */
static inline int dvm_mul_overflows(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

#endif
