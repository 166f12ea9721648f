/* NumPy .npy files: reading into and writing from dvm tensors.
 *
 * Reading accepts format versions 1.0, 2.0 and 3.0 (3.0 has a UTF-8 header)
 * and the dtypes dvm shares with NumPy:
 *
 *   f16 '<f2'  f32 '<f4'  f64 '<f8'  i8 '|i1'  i16 '<i2'  i32 '<i4'
 *   i64 '<i8'  u8 '|u1'   bool '|b1'  u16 '<u2'  u32 '<u4'  u64 '<u8'
 *   string: text '<U<n>' (n UCS-4 code points, read as UTF-8) or bytes
 *   '|S<n>' (read as they are); trailing NULs are padding, as in NumPy
 *
 * in either byte order ('<', '>', '|', '=' or none); big-endian data is
 * swapped into host order. Arrays saved with fortran_order True are
 * transposed on read, so the tensor is always dense C (row-major) order with
 * the shape written in the file. Any other descr (complex, objects,
 * structured dtypes) is an error naming it. Rank is at most
 * DVM_MAX_RANK; 0-d arrays and zero-sized dims are fine.
 *
 * The file is untrusted: every malformed header, size or byte count is a
 * DVM_INVALID_ARGUMENT status whose message names the source and the fact
 * ("x.npy: header: shape dim 2 is negative (-3)"); a missing file is
 * DVM_NOT_FOUND, other OS failures DVM_IO. Bool elements must be 0 or 1.
 *
 * Writing produces what numpy.save does for a C-order array: version 1.0,
 * little-endian descr, header padded with spaces and a newline so the data
 * starts at a multiple of 64 bytes. bf16 has no NumPy dtype and cannot be
 * written. A string tensor is written as '<U<n>', n its longest element's
 * code points (at least 1); an element that is not UTF-8 is an error
 * naming it. */
#ifndef DVM_NPY_H
#define DVM_NPY_H

#include <stddef.h>

#include "dvm/status.h"
#include "dvm/tensor.h"

/* Reads the file at `path`. `*out` holds one reference; release it. */
DVM_API DVM_MUST_USE dvm_status *dvm_npy_read_file(const char *path, dvm_tensor **out);

/* Reads `size` bytes of .npy at `data` (borrowed for the call); `what` names
 * the source in error messages (NULL: ".npy data"). `*out` holds one
 * reference; release it. */
DVM_API DVM_MUST_USE dvm_status *dvm_npy_read_memory(const void *data, size_t size, const char *what,
                                                     dvm_tensor **out);

/* Writes CPU tensor `t` (borrowed) to `path`, replacing the file. */
DVM_API DVM_MUST_USE dvm_status *dvm_npy_write_file(const char *path, const dvm_tensor *t);

/* Encodes CPU tensor `t` (borrowed). `*out` is malloc'ed, `*size` bytes long;
 * the caller frees it. */
DVM_API DVM_MUST_USE dvm_status *dvm_npy_write_memory(const dvm_tensor *t, void **out, size_t *size);

#endif
