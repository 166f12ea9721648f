/* .npy text arrays ('U': UCS-4 code points, 'S': bytes, each a fixed
 * number per element, NUL-padded) as DVM_STRING tensors (vm/npy.c). */
#ifndef DVM_NPY_TEXT_H
#define DVM_NPY_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"
#include "dvm/tensor.h"

/* Length of the UTF-8 sequence at p[0..n), or 0 if it is malformed
 * (truncated, overlong, a surrogate or past U+10FFFF). */
size_t dvm_utf8_len(const uint8_t *p, size_t n);

/* Fills string tensor t from its numel items at src, `width` units each
 * (code points when ucs4, in the other byte order when swap; else bytes),
 * trailing NULs dropped as NumPy does: UTF-8 from code points, bytes as
 * they are. A code point that is no character is an error naming it. */
DVM_MUST_USE dvm_status *dvm_npy_text_read(const uint8_t *src, size_t width, bool ucs4, bool swap, dvm_tensor *t);

/* The most code points an element of string tensor t has; an element that
 * is not UTF-8 is an error naming it. */
DVM_MUST_USE dvm_status *dvm_npy_text_width(const dvm_tensor *t, size_t *chars);

/* t's elements as little-endian UCS-4 items of `chars` code points at dst. */
void dvm_npy_text_write(const dvm_tensor *t, size_t chars, uint8_t *dst);

#endif
