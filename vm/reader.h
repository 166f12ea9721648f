/* The one bounds-checked reader for untrusted bytes: every read compares
 * lengths, never pointers past the end. A failed read latches `bad`, so a
 * parser may read a whole record and check once. */
#ifndef DVM_READER_H
#define DVM_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct dvm_reader {
  const uint8_t *p;
  size_t len, pos;
  bool bad;
} dvm_reader;

static inline dvm_reader dvm_reader_make(const uint8_t *p, size_t len) {
  dvm_reader r = {p, len, 0, false};
  return r;
}

static inline size_t dvm_reader_left(const dvm_reader *r) { return r->bad ? 0 : r->len - r->pos; }

static inline const uint8_t *dvm_reader_take(dvm_reader *r, size_t n) {
  if (r->bad || n > r->len - r->pos) {
    r->bad = true;
    return NULL;
  }
  const uint8_t *p = r->p + r->pos;
  r->pos += n;
  return p;
}

static inline uint64_t dvm_reader_le(dvm_reader *r, size_t n) {
  const uint8_t *p = dvm_reader_take(r, n);
  uint64_t v = 0;
  if (p)
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static inline uint8_t dvm_reader_u8(dvm_reader *r) { return (uint8_t)dvm_reader_le(r, 1); }
static inline uint16_t dvm_reader_u16(dvm_reader *r) { return (uint16_t)dvm_reader_le(r, 2); }
static inline uint32_t dvm_reader_u32(dvm_reader *r) { return (uint32_t)dvm_reader_le(r, 4); }
static inline uint64_t dvm_reader_u64(dvm_reader *r) { return dvm_reader_le(r, 8); }
static inline int64_t dvm_reader_i64(dvm_reader *r) { return (int64_t)dvm_reader_le(r, 8); }

/* True if `count` records of at least `min_size` bytes could still follow:
 * the check that keeps absurd counts from becoming absurd allocations. */
static inline bool dvm_reader_can_hold(const dvm_reader *r, uint64_t count, size_t min_size) {
  return !r->bad && count <= (r->len - r->pos) / (min_size ? min_size : 1);
}

#endif
