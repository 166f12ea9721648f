/* The elements of DVM_STRING tensors: immutable reference-counted byte
 * strings, the storages that own them, and the form string constants take
 * in a .dvmb file. */
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "object.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

dvm_status *dvm_string_new(const char *s, size_t len, dvm_string **out) {
  *out = NULL;
  if (!len) return NULL;
  if (len > SIZE_MAX - sizeof(dvm_string) - 1) return dvm_status_new(DVM_OUT_OF_RANGE, "string of %zu bytes", len);
  dvm_string *p = malloc(sizeof *p + len + 1);
  if (!p) return dvm_status_new(DVM_OUT_OF_MEMORY, "no memory for a string of %zu bytes", len);
  atomic_init(&p->refs, 1);
  p->len = len;
  memcpy(p->bytes, s, len);
  p->bytes[len] = 0;
  *out = p;
  return NULL;
}

void dvm_string_retain(dvm_string *s) {
  if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void dvm_string_release(dvm_string *s) {
  if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) free(s);
}

void dvm_strings_clear(dvm_string **p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    dvm_string_release(p[i]);
    p[i] = NULL;
  }
}

static dvm_status *element_check(const dvm_tensor *t, int64_t i) {
  if (t->dtype != DVM_STRING)
    return ERR("tensor is %s, not a string tensor", dvm_dtype_name((dvm_dtype)t->dtype));
  if (i < 0 || i >= dvm_tensor_numel(t))
    return dvm_status_new(DVM_OUT_OF_RANGE, "element %lld of a tensor of %lld", (long long)i,
                          (long long)dvm_tensor_numel(t));
  return NULL;
}

const char *dvm_tensor_string(const dvm_tensor *t, int64_t i, size_t *len) {
  dvm_status *st = element_check(t, i);
  if (st) {
    dvm_status_free(st);
    if (len) *len = 0;
    return "";
  }
  return dvm_string_bytes(((dvm_string *const *)dvm_tensor_ptr(t))[i], len);
}

dvm_status *dvm_tensor_set_string(dvm_tensor *t, int64_t i, const char *s, size_t len) {
  dvm_string *n;
  dvm_status *st = element_check(t, i);
  if (st || (st = dvm_string_new(s, len, &n))) return st;
  dvm_string **p = (dvm_string **)dvm_tensor_ptr(t) + i;
  dvm_string_release(*p);
  *p = n;
  return NULL;
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int b = 7; b >= 0; b--) v = v << 8 | p[b];
  return v;
}

dvm_status *dvm_strings_blob_check(const uint8_t *blob, size_t nbytes, int64_t numel) {
  if ((uint64_t)numel > nbytes / 8)
    return ERR("string data of %zu bytes cannot hold the byte counts of %lld elements", nbytes, (long long)numel);
  size_t left = nbytes - (size_t)numel * 8;
  for (int64_t i = 0; i < numel; i++) {
    uint64_t n = get_u64(blob + 8 * i);
    if (n > left) return ERR("string element %lld: %llu bytes, %zu left in its data", (long long)i,
                             (unsigned long long)n, left);
    left -= n;
  }
  if (left) return ERR("string data has %zu bytes after its last element", left);
  return NULL;
}

dvm_status *dvm_strings_blob_read(const uint8_t *blob, dvm_tensor *t) {
  int64_t numel = dvm_tensor_numel(t);
  const uint8_t *text = blob + 8 * numel;
  dvm_string **p = (dvm_string **)dvm_tensor_ptr(t);
  for (int64_t i = 0; i < numel; i++) {
    size_t n = (size_t)get_u64(blob + 8 * i);
    dvm_status *st = dvm_string_new((const char *)text, n, &p[i]);
    if (st) return st;
    text += n;
  }
  return NULL;
}

dvm_status *dvm_string_make(dvm_exec *ex, const char *s, size_t len, dvm_string **out) {
  if (ex->nmade == ex->made_cap) {
    size_t cap = ex->made_cap ? 2 * ex->made_cap : 64;
    dvm_string **m = realloc(ex->made, cap * sizeof *m);
    if (!m) return dvm_status_new(DVM_OUT_OF_MEMORY, "no memory for the strings a kernel makes");
    ex->made = m;
    ex->made_cap = cap;
  }
  dvm_status *st = dvm_string_new(s, len, out);
  if (!st && *out) ex->made[ex->nmade++] = *out;
  return st;
}

void dvm_strings_made_drop(dvm_exec *ex) {
  dvm_strings_clear(ex->made, ex->nmade);
  ex->nmade = 0;
}
