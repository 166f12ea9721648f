/* Values and tuples. */
#include <stdlib.h>

#include "object.h"

static const char *const kind_names[DVM_KIND_COUNT] = {
    "none", "int", "float", "shape", "tensor", "storage", "tuple",
};

const char *dvm_kind_name(dvm_kind k) { return (unsigned)k < DVM_KIND_COUNT ? kind_names[k] : "?"; }

void dvm_value_retain(const dvm_value *v) {
  switch (v->kind) {
  case DVM_VAL_TENSOR: dvm_tensor_retain(v->u.tensor); break;
  case DVM_VAL_STORAGE: dvm_storage_retain(v->u.storage); break;
  case DVM_VAL_TUPLE: atomic_fetch_add_explicit(&v->u.tuple->refs, 1, memory_order_relaxed); break;
  default: break;
  }
}

void dvm_value_clear(dvm_value *v) {
  switch (v->kind) {
  case DVM_VAL_TENSOR: dvm_tensor_release(v->u.tensor); break;
  case DVM_VAL_STORAGE: dvm_storage_release(v->u.storage); break;
  case DVM_VAL_TUPLE: dvm_tuple_release(v->u.tuple); break;
  default: break;
  }
  v->kind = DVM_VAL_NONE;
}

/* A tuple of n items (set by the caller) one deeper than the deepest
 * tuple among `items` and `extra` (NULL: none). */
static dvm_status *tuple_new(int n, const dvm_value *items, int nitems, const dvm_value *extra,
                             dvm_tuple **out) {
  if (n < 0) return dvm_status_new(DVM_INVALID_ARGUMENT, "negative tuple size %d", n);
  if (n > DVM_MAX_TUPLE_SIZE)
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "a tuple of more than %d items", DVM_MAX_TUPLE_SIZE);
  int depth = 1;
  for (int i = 0; i <= nitems; i++) {
    const dvm_value *v = i < nitems ? &items[i] : extra;
    if (v && v->kind == DVM_VAL_TUPLE && v->u.tuple->depth >= depth) depth = v->u.tuple->depth + 1;
  }
  if (depth > DVM_MAX_TUPLE_DEPTH)
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "tuples nest deeper than %d", DVM_MAX_TUPLE_DEPTH);
  dvm_tuple *t = malloc(sizeof *t + sizeof(dvm_value) * (size_t)n);
  if (!t) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  atomic_init(&t->refs, 1);
  t->n = n;
  t->depth = depth;
  *out = t;
  return NULL;
}

dvm_status *dvm_tuple_create(int n, const dvm_value *items, dvm_tuple **out) {
  dvm_tuple *t;
  dvm_status *st = tuple_new(n, items, n, NULL, &t);
  if (st) return st;
  for (int i = 0; i < n; i++) {
    t->items[i] = items[i];
    dvm_value_retain(&items[i]);
  }
  *out = t;
  return NULL;
}

dvm_status *dvm_tuple_insert(const dvm_tuple *t, int pos, const dvm_value *v, dvm_tuple **out) {
  if (pos < 0 || pos > t->n)
    return dvm_status_new(DVM_OUT_OF_RANGE, "insert position %d out of range (size %d)", pos, t->n);
  dvm_tuple *u;
  dvm_status *st = tuple_new(t->n + 1, t->items, t->n, v, &u);
  if (st) return st;
  for (int i = 0; i <= t->n; i++) {
    u->items[i] = i < pos ? t->items[i] : i == pos ? *v : t->items[i - 1];
    dvm_value_retain(&u->items[i]);
  }
  *out = u;
  return NULL;
}

dvm_status *dvm_tuple_erase(const dvm_tuple *t, int pos, dvm_tuple **out) {
  if (pos < 0 || pos >= t->n)
    return dvm_status_new(DVM_OUT_OF_RANGE, "erase position %d out of range (size %d)", pos, t->n);
  dvm_tuple *u;
  dvm_status *st = tuple_new(t->n - 1, t->items, t->n, NULL, &u);
  if (st) return st;
  for (int i = 0; i < t->n - 1; i++) {
    u->items[i] = t->items[i < pos ? i : i + 1];
    dvm_value_retain(&u->items[i]);
  }
  *out = u;
  return NULL;
}

int dvm_tuple_size(const dvm_tuple *t) { return t->n; }

const dvm_value *dvm_tuple_get(const dvm_tuple *t, int i) {
  return i >= 0 && i < t->n ? &t->items[i] : NULL;
}

void dvm_tuple_release(dvm_tuple *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
  for (int i = 0; i < t->n; i++) dvm_value_clear(&t->items[i]);
  free(t);
}
