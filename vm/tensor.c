/* Dtypes, storages and tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "half.h"
#include "object.h"
#include "pool.h"

static const struct {
  const char *name;
  size_t size;
} dtypes[DVM_DTYPE_COUNT] = {
    [DVM_F32] = {"f32", 4}, [DVM_F16] = {"f16", 2}, [DVM_BF16] = {"bf16", 2},
    [DVM_F64] = {"f64", 8}, [DVM_I8] = {"i8", 1},   [DVM_I16] = {"i16", 2},
    [DVM_I32] = {"i32", 4}, [DVM_I64] = {"i64", 8}, [DVM_U8] = {"u8", 1},
    [DVM_BOOL] = {"bool", 1}, [DVM_U16] = {"u16", 2}, [DVM_U32] = {"u32", 4},
    [DVM_U64] = {"u64", 8}, [DVM_STRING] = {"string", sizeof(dvm_string *)},
};

static const char *const device_names[DVM_DEVICE_COUNT] = {"cpu", "cuda"};

size_t dvm_dtype_size(dvm_dtype dt) { return (unsigned)dt < DVM_DTYPE_COUNT ? dtypes[dt].size : 0; }

bool dvm_floats_to_f32(dvm_dtype dt, const void *src, float *dst, size_t n) {
  const uint16_t *h = src;
  switch (dt) {
  case DVM_F32: memcpy(dst, src, n * sizeof *dst); return true;
  case DVM_F16: for (size_t i = 0; i < n; i++) dst[i] = dvm_f16_to_f32(h[i]); return true;
  case DVM_BF16: for (size_t i = 0; i < n; i++) dst[i] = dvm_bf16_to_f32(h[i]); return true;
  default: return false;
  }
}

const char *dvm_dtype_name(dvm_dtype dt) {
  return (unsigned)dt < DVM_DTYPE_COUNT ? dtypes[dt].name : "?";
}

bool dvm_dtype_parse(const char *name, dvm_dtype *out) {
  for (int i = 0; i < DVM_DTYPE_COUNT; i++)
    if (strcmp(name, dtypes[i].name) == 0) {
      *out = (dvm_dtype)i;
      return true;
    }
  return false;
}

const char *dvm_device_name(dvm_device_kind dev) {
  return (unsigned)dev < DVM_DEVICE_COUNT ? device_names[dev] : "?";
}

bool dvm_device_parse(const char *name, dvm_device_kind *out) {
  for (int i = 0; i < DVM_DEVICE_COUNT; i++)
    if (strcmp(name, device_names[i]) == 0) {
      *out = (dvm_device_kind)i;
      return true;
    }
  return false;
}

char *dvm_shape_format(char *buf, size_t size, dvm_dtype dt, int rank, const int64_t *dims) {
  size_t n = 0;
  if (size == 0) return buf;
  buf[0] = 0;
#define PUT(...)                                                         \
  do {                                                                   \
    int k = snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__);     \
    if (k > 0) n += (size_t)k;                                           \
  } while (0)
  if ((unsigned)dt < DVM_DTYPE_COUNT) PUT("%s", dtypes[dt].name);
  PUT("[");
  for (int i = 0; i < rank; i++) PUT(i ? ",%lld" : "%lld", (long long)dims[i]);
  PUT("]");
#undef PUT
  return buf;
}

dvm_status *dvm_shape_numel(int rank, const int64_t *dims, int64_t *out) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "dim %d is negative (%lld)", i,
                            (long long)dims[i]);
    if (__builtin_mul_overflow(n, dims[i], &n))
      return dvm_status_new(DVM_OUT_OF_RANGE, "element count overflows int64");
  }
  *out = n;
  return NULL;
}

/* Checks dtype, rank and dims; returns the byte size. */
static dvm_status *tensor_bytes(dvm_dtype dt, int rank, const int64_t *dims, size_t *out) {
  if ((unsigned)dt >= DVM_DTYPE_COUNT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "unknown dtype %d", (int)dt);
  if (rank < 0 || rank > DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "rank %d is outside 0..%d", rank, DVM_MAX_RANK);
  int64_t n;
  dvm_status *st = dvm_shape_numel(rank, dims, &n);
  if (st) return st;
  if (dvm_mul_overflows((size_t)n, dtypes[dt].size, out))
    return dvm_status_new(DVM_OUT_OF_RANGE, "tensor byte size overflows");
  return NULL;
}

dvm_status *dvm_storage_wrap(dvm_device_kind dev, void *ptr, size_t size, void (*deleter)(void *),
                             void *ctx, dvm_storage **out) {
  dvm_storage *s = calloc(1, sizeof *s);
  if (!s) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  atomic_init(&s->refs, 1);
  s->device = (uint8_t)dev;
  s->ptr = ptr;
  s->size = size;
  s->deleter = deleter;
  s->ctx = ctx;
  *out = s;
  return NULL;
}

void dvm_storage_retain(dvm_storage *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

void dvm_storage_release(dvm_storage *s) {
  if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
  if (s->strings) dvm_strings_clear(s->ptr, s->size / sizeof(dvm_string *));
  if (s->pool) {
    dvm_pool_return(s);
    return;
  }
  if (s->deleter) s->deleter(s->ctx);
  free(s);
}

/* The whole pages of bytes [offset, offset + bytes) of t's data given
 * back; how many bytes. */
static size_t drop_range(const dvm_tensor *t, size_t offset, size_t bytes) {
  const dvm_storage *s = t->storage;
  long page = sysconf(_SC_PAGESIZE);
  if (!s->droppable || bytes == 0 || page <= 0) return 0;
  uintptr_t start = (uintptr_t)s->ptr + t->offset + offset, mask = (uintptr_t)page - 1;
  uintptr_t lo = (start + mask) & ~mask, hi = (start + bytes) & ~mask; /* neighbours keep theirs */
  return hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0 ? hi - lo : 0;
}

size_t dvm_tensor_drop_pages(const dvm_tensor *t) { return drop_range(t, 0, dvm_tensor_nbytes(t)); }

void dvm_tensor_consumed(const dvm_tensor *t, size_t offset, size_t size) {
  if (t->consumable && offset <= dvm_tensor_nbytes(t) && size <= dvm_tensor_nbytes(t) - offset)
    drop_range(t, offset, size);
}

dvm_status *dvm_tensor_view(dvm_storage *s, size_t offset, dvm_dtype dt, int rank,
                            const int64_t *dims, dvm_tensor **out) {
  size_t bytes;
  dvm_status *st = tensor_bytes(dt, rank, dims, &bytes);
  if (st) return st;
  if (offset > s->size || bytes > s->size - offset)
    return dvm_status_new(DVM_OUT_OF_RANGE,
                          "tensor of %zu bytes at offset %zu does not fit in a storage of %zu bytes",
                          bytes, offset, s->size);
  /* a string's pointer is read from no other bytes, and written as no other data */
  if ((dt == DVM_STRING) != s->strings)
    return dvm_status_new(DVM_INVALID_ARGUMENT, dt == DVM_STRING ? "a string tensor views only a storage of strings"
                                                                 : "a %s tensor cannot view a storage of strings",
                          dvm_dtype_name(dt));
  if (dt == DVM_STRING && (offset || bytes != s->size))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "a string tensor views the whole of its storage");
  dvm_tensor *t = malloc(sizeof *t);
  if (!t) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  atomic_init(&t->refs, 1);
  t->dtype = (uint8_t)dt;
  t->rank = (uint8_t)rank;
  t->storage = s;
  t->offset = offset;
  t->packed = NULL;
  t->consumable = false;
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank); /* dims may be NULL at rank 0 */
  dvm_storage_retain(s);
  *out = t;
  return NULL;
}

static void free_aligned(void *p) { free(p); }

dvm_status *dvm_tensor_create(dvm_dtype dt, int rank, const int64_t *dims, dvm_tensor **out) {
  size_t bytes;
  dvm_status *st = tensor_bytes(dt, rank, dims, &bytes);
  if (st) return st;
  /* aligned_alloc wants a multiple of the alignment and a non-zero size */
  size_t padded = (bytes + 63) & ~(size_t)63;
  if (padded < bytes) return dvm_status_new(DVM_OUT_OF_RANGE, "tensor byte size overflows");
  void *data = aligned_alloc(64, padded ? padded : 64);
  if (!data) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (dt == DVM_STRING) memset(data, 0, bytes); /* every element "" */
  dvm_storage *s = NULL;
  st = dvm_storage_wrap(DVM_DEVICE_CPU, data, bytes, free_aligned, data, &s);
  if (st) {
    free(data);
    return st;
  }
  s->strings = dt == DVM_STRING;
  st = dvm_tensor_view(s, 0, dt, rank, dims, out);
  dvm_storage_release(s);
  return st;
}

dvm_status *dvm_tensor_wrap(dvm_dtype dt, int rank, const int64_t *dims, void *data,
                            void (*deleter)(void *), void *ctx, dvm_tensor **out) {
  return dvm_tensor_wrap_on(DVM_DEVICE_CPU, dt, rank, dims, data, deleter, ctx, out);
}

dvm_status *dvm_tensor_wrap_on(dvm_device_kind dev, dvm_dtype dt, int rank, const int64_t *dims, void *data,
                               void (*deleter)(void *), void *ctx, dvm_tensor **out) {
  size_t bytes;
  dvm_status *st = tensor_bytes(dt, rank, dims, &bytes);
  if (st) return st;
  if (dt == DVM_STRING)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "string tensors own their elements: make one with "
                          "dvm_tensor_create and set them with dvm_tensor_set_string, not wrap memory");
  if (!data && bytes) return dvm_status_new(DVM_INVALID_ARGUMENT, "tensor data is NULL");
  dvm_storage *s = NULL;
  st = dvm_storage_wrap(dev, data, bytes, deleter, ctx, &s);
  if (st) return st;
  st = dvm_tensor_view(s, 0, dt, rank, dims, out);
  if (st) {
    s->deleter = NULL; /* on failure the caller keeps its memory */
  }
  dvm_storage_release(s);
  return st;
}

dvm_status *dvm_tensor_wrap_paged(dvm_dtype dt, const int64_t dims[4], void *pool, const dvm_tensor_pages *pages,
                                  dvm_tensor **out) {
  size_t bytes; /* the logical size: checks the dims */
  dvm_status *st = tensor_bytes(dt, 4, dims, &bytes);
  if (st) return st;
  if (dt == DVM_STRING) return dvm_status_new(DVM_INVALID_ARGUMENT, "paged tensor: strings are not paged");
  if (!pool || !pages->table || pages->block_rows < 1 || pages->blocks < 1 ||
      pages->table_stride < (dims[2] + pages->block_rows - 1) / pages->block_rows)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "paged tensor: a pool, a table, block_rows >= 1, blocks >= 1 and "
                          "table_stride >= length / block_rows (%lld) are needed", (long long)dims[2]);
  if (pages->pool_dtype != dt && !(dt == DVM_F32 && pages->pool_dtype == DVM_F16))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "paged tensor: a pool of %s elements under %s (the tensor's dtype, "
                          "or f16 under f32)", dvm_dtype_name(pages->pool_dtype), dvm_dtype_name(dt));
  size_t block = (size_t)dims[1] * (size_t)pages->block_rows * (size_t)dims[3] * dtypes[pages->pool_dtype].size, size;
  if (dvm_mul_overflows(block, (size_t)pages->blocks, &size))
    return dvm_status_new(DVM_OUT_OF_RANGE, "paged tensor: pool byte size overflows");
  dvm_storage *s = NULL;
  if ((st = dvm_storage_wrap(DVM_DEVICE_CPU, pool, size, NULL, NULL, &s))) return st;
  s->pages = *pages;
  dvm_tensor *t = malloc(sizeof *t);
  if (!t) {
    dvm_storage_release(s);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  /* not dvm_tensor_view: the logical tensor is not the pool's bytes */
  *t = (dvm_tensor){.dtype = (uint8_t)dt, .rank = 4, .storage = s};
  atomic_init(&t->refs, 1);
  memcpy(t->dims, dims, 4 * sizeof *dims);
  *out = t;
  return NULL;
}

dvm_status *dvm_tensor_attach_packed(dvm_tensor *t, const void *owner, int input, void *data,
                                     void (*free_data)(void *)) {
  dvm_packed *p = malloc(sizeof *p);
  if (!p) {
    free_data(data);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  *p = (dvm_packed){t->packed, owner, input, data, free_data};
  t->packed = p;
  return NULL;
}

void dvm_tensor_retain(dvm_tensor *t) { atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); }

void dvm_tensor_release(dvm_tensor *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  dvm_storage_release(t->storage);
  while (t->packed) {
    dvm_packed *p = t->packed;
    t->packed = p->next;
    p->free_data(p->data);
    free(p);
  }
  free(t);
}

dvm_dtype dvm_tensor_dtype(const dvm_tensor *t) { return (dvm_dtype)t->dtype; }
int dvm_tensor_rank(const dvm_tensor *t) { return t->rank; }
const int64_t *dvm_tensor_dims(const dvm_tensor *t) { return t->dims; }
dvm_device_kind dvm_tensor_device(const dvm_tensor *t) { return (dvm_device_kind)t->storage->device; }
void *dvm_tensor_data(const dvm_tensor *t) { return dvm_tensor_ptr(t); }

int64_t dvm_tensor_numel(const dvm_tensor *t) {
  int64_t n = 1; /* validated when the tensor was made */
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

size_t dvm_tensor_nbytes(const dvm_tensor *t) {
  return (size_t)dvm_tensor_numel(t) * dtypes[t->dtype].size;
}
