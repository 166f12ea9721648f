/* A growable byte buffer for response bodies. An allocation failure sets
 * `failed` and stops growth, so callers check once at the end. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static int reserve(dvms_buf *b, size_t n) {
  if (b->failed) return 0;
  if (b->len + n + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = 1;
    return 0;
  }
  b->data = p;
  b->cap = cap;
  return 1;
}

void dvms_buf_put(dvms_buf *b, const void *p, size_t n) {
  if (!reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

void dvms_buf_printf(dvms_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void dvms_buf_json_string(dvms_buf *b, const char *s) { dvms_buf_json_stringn(b, s, strlen(s)); }

void dvms_buf_json_stringn(dvms_buf *b, const char *s, size_t n) {
  dvms_buf_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s, *end = p + n; p < end; p++) {
    if (*p == '"' || *p == '\\') {
      char e[2] = {'\\', (char)*p};
      dvms_buf_put(b, e, 2);
    } else if (*p < 0x20) {
      dvms_buf_printf(b, "\\u%04x", *p);
    } else {
      dvms_buf_put(b, p, 1);
    }
  }
  dvms_buf_put(b, "\"", 1);
}

void dvms_buf_free(dvms_buf *b) {
  free(b->data);
  *b = (dvms_buf){0};
}
