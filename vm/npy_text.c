/* .npy text arrays as string tensors (npy_text.h). */
#include <stdlib.h>
#include <string.h>

#include "npy_text.h"
#include "object.h"

size_t dvm_utf8_len(const uint8_t *p, size_t n) {
  if (p[0] < 0x80) return 1;
  size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (!len || p[0] > 0xf4 || len > n) return 0;
  uint32_t c = p[0] & (0x7fu >> len);
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    c = c << 6 | (p[i] & 0x3fu);
  }
  static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  return len;
}

static uint32_t get_u32(const uint8_t *p, bool swap) {
  return swap ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
              : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Code point c as UTF-8 at out; its byte count. */
static size_t put_utf8(uint32_t c, char *out) {
  if (c < 0x80) return out[0] = (char)c, 1;
  if (c < 0x800) return out[0] = (char)(0xc0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3f)), 2;
  if (c < 0x10000) {
    out[0] = (char)(0xe0 | c >> 12);
    out[1] = (char)(0x80 | (c >> 6 & 0x3f));
    out[2] = (char)(0x80 | (c & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | c >> 18);
  out[1] = (char)(0x80 | (c >> 12 & 0x3f));
  out[2] = (char)(0x80 | (c >> 6 & 0x3f));
  out[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

dvm_status *dvm_npy_text_read(const uint8_t *src, size_t width, bool ucs4, bool swap, dvm_tensor *t) {
  int64_t numel = dvm_tensor_numel(t);
  size_t item = ucs4 ? 4 * width : width;
  char *buf = malloc(4 * width + 1);
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "no memory for a text element of %zu bytes", item);
  dvm_status *st = NULL;
  for (int64_t i = 0; i < numel && !st; i++, src += item) {
    size_t n = width;
    if (ucs4)
      while (n && !get_u32(src + 4 * (n - 1), swap)) n--;
    else
      while (n && !src[n - 1]) n--;
    size_t len = 0;
    for (size_t k = 0; ucs4 && k < n && !st; k++) {
      uint32_t c = get_u32(src + 4 * k, swap);
      if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        st = dvm_status_new(DVM_INVALID_ARGUMENT, "data: element %lld: code point %u (0x%x) is not a character",
                            (long long)i, c, c);
      else
        len += put_utf8(c, buf + len);
    }
    if (!st) st = dvm_tensor_set_string(t, i, ucs4 ? buf : (const char *)src, ucs4 ? len : n);
  }
  free(buf);
  return st;
}

dvm_status *dvm_npy_text_width(const dvm_tensor *t, size_t *chars) {
  *chars = 0;
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    size_t len, n = 0;
    const uint8_t *p = (const uint8_t *)dvm_tensor_string(t, i, &len);
    for (size_t k = 0, step; k < len; k += step, n++)
      if (!(step = dvm_utf8_len(p + k, len - k)))
        return dvm_status_new(DVM_INVALID_ARGUMENT, "string element %lld is not UTF-8 (byte %zu); .npy text is "
                              "Unicode", (long long)i, k);
    if (n > *chars) *chars = n;
  }
  return NULL;
}

/* The code point of the valid UTF-8 sequence of len bytes at p. */
static uint32_t code_point(const uint8_t *p, size_t len) {
  uint32_t c = len == 1 ? p[0] : p[0] & (0x7fu >> len);
  for (size_t i = 1; i < len; i++) c = c << 6 | (p[i] & 0x3fu);
  return c;
}

void dvm_npy_text_write(const dvm_tensor *t, size_t chars, uint8_t *dst) {
  memset(dst, 0, (size_t)dvm_tensor_numel(t) * chars * 4);
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++, dst += chars * 4) {
    size_t len, n = 0;
    const uint8_t *p = (const uint8_t *)dvm_tensor_string(t, i, &len);
    for (size_t k = 0, step; k < len; k += step, n++) {
      step = dvm_utf8_len(p + k, len - k);
      uint32_t c = code_point(p + k, step);
      for (int b = 0; b < 4; b++) dst[4 * n + (size_t)b] = (uint8_t)(c >> 8 * b);
    }
  }
}
