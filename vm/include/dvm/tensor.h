/* Tensors: a dtype, a shape and a reference-counted storage plus byte offset.
 * Storage is row-major and dense; views (reshape) share the storage. */
#ifndef DVM_TENSOR_H
#define DVM_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DVM_MAX_RANK 8

typedef enum dvm_dtype {
  DVM_F32 = 0,
  DVM_F16,
  DVM_BF16,
  DVM_F64,
  DVM_I8,
  DVM_I16,
  DVM_I32,
  DVM_I64,
  DVM_U8,
  DVM_BOOL,
  DVM_U16, /* after bool: dtype values are serialized in .dvmb files */
  DVM_U32,
  DVM_U64,
  DVM_STRING, /* UTF-8 text, one immutable reference-counted string per element (below) */
  DVM_DTYPE_COUNT
} dvm_dtype;

typedef enum dvm_device_kind {
  DVM_DEVICE_CPU = 0,
  DVM_DEVICE_CUDA = 1,
  DVM_DEVICE_COUNT
} dvm_device_kind;

DVM_API size_t dvm_dtype_size(dvm_dtype dt);
DVM_API const char *dvm_dtype_name(dvm_dtype dt);       /* "f32", "i64", ... */
DVM_API bool dvm_dtype_parse(const char *name, dvm_dtype *out);
/* n floats of dtype dt (f32, f16 or bf16) at src as f32 at dst; false
 * for any other dtype. */
DVM_API bool dvm_floats_to_f32(dvm_dtype dt, const void *src, float *dst, size_t n);
DVM_API const char *dvm_device_name(dvm_device_kind dev); /* "cpu", "cuda" */
DVM_API bool dvm_device_parse(const char *name, dvm_device_kind *out);

typedef struct dvm_tensor dvm_tensor;

/* A new CPU tensor with uninitialized contents, 64-byte aligned (a
 * DVM_STRING tensor: every element ""). `*out` holds one reference;
 * release it. */
DVM_API DVM_MUST_USE dvm_status *dvm_tensor_create(dvm_dtype dt, int rank, const int64_t *dims,
                                           dvm_tensor **out);

/* Wraps caller memory without copying (any dtype but DVM_STRING). `deleter(ctx)` runs when the last
 * reference goes (may be NULL when the caller outlives the tensor).
 * `data` must stay valid and unmodified-by-others while dvm uses it. */
DVM_API DVM_MUST_USE dvm_status *dvm_tensor_wrap(dvm_dtype dt, int rank, const int64_t *dims,
                                         void *data, void (*deleter)(void *ctx), void *ctx,
                                         dvm_tensor **out);

/* A paged KV cache (vLLM's PagedAttention layout): a tensor of logical
 * dims [batch, heads, length, head_size] whose rows lie in blocks of a
 * pool [blocks, heads, block_rows, head_size] at `pool`: row t of entry b
 * (all heads) is row t % block_rows of block table[b * table_stride + t /
 * block_rows]. Only kernels that read and write through the table accept
 * it (GroupQueryAttention on the CPU); any other use of it, or of a view
 * of its storage, is an error (kernel, copy, host function, result copy).
 * The pool and the table are borrowed: they must outlive the tensor, and
 * the table may change between invocations (not during one). The pool's
 * elements are the tensor's dtype, or IEEE f16 for an f32 tensor (a
 * half-precision KV cache: the kernel converts as it reads and writes). */
typedef struct dvm_tensor_pages {
  const int32_t *table;
  int64_t table_stride; /* entries per batch entry: at least ceil(length / block_rows) */
  int64_t block_rows;   /* > 0 */
  int64_t blocks;       /* in the pool: a table entry read must be in [0, blocks) */
  dvm_dtype pool_dtype; /* the tensor's dtype, or DVM_F16 under DVM_F32 */
} dvm_tensor_pages;

DVM_API DVM_MUST_USE dvm_status *dvm_tensor_wrap_paged(dvm_dtype dt, const int64_t dims[4], void *pool,
                                                       const dvm_tensor_pages *pages, dvm_tensor **out);

DVM_API void dvm_tensor_retain(dvm_tensor *t);
DVM_API void dvm_tensor_release(dvm_tensor *t); /* NULL is fine */

DVM_API dvm_dtype dvm_tensor_dtype(const dvm_tensor *t);
DVM_API int dvm_tensor_rank(const dvm_tensor *t);
DVM_API const int64_t *dvm_tensor_dims(const dvm_tensor *t); /* rank entries; borrowed */
DVM_API int64_t dvm_tensor_numel(const dvm_tensor *t);
DVM_API size_t dvm_tensor_nbytes(const dvm_tensor *t);
DVM_API dvm_device_kind dvm_tensor_device(const dvm_tensor *t);
DVM_API void *dvm_tensor_data(const dvm_tensor *t); /* device pointer for device tensors */

/* DVM_STRING tensors. An element is a byte string (UTF-8 where text is
 * meant; it may hold NULs); the tensor's storage owns its elements and
 * releases them with itself. dvm_tensor_data gives the element pointers,
 * which only libdvm and kernels read.
 *
 * Element i of t (row-major): its bytes, NUL-terminated, borrowed from t,
 * and their count in *len (NULL is fine). */
DVM_API const char *dvm_tensor_string(const dvm_tensor *t, int64_t i, size_t *len);
/* Sets element i of t to a copy of len bytes at s. For a tensor the caller
 * made (dvm_tensor_create) and has not handed to anyone yet. */
DVM_API DVM_MUST_USE dvm_status *dvm_tensor_set_string(dvm_tensor *t, int64_t i, const char *s, size_t len);

/* Formats "f32[2,3]" into buf (always NUL-terminated); returns buf. */
DVM_API char *dvm_shape_format(char *buf, size_t size, dvm_dtype dt, int rank, const int64_t *dims);

/* Checked element count: fails on a negative dim or on overflow. */
DVM_API DVM_MUST_USE dvm_status *dvm_shape_numel(int rank, const int64_t *dims, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
