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

dvm_status *dvm_tuple_create(int n, const dvm_value *items, dvm_tuple **out) {
  if (n < 0) return dvm_status_new(DVM_INVALID_ARGUMENT, "negative tuple size %d", n);
  int depth = 1;
  for (int i = 0; i < n; i++)
    if (items[i].kind == DVM_VAL_TUPLE && items[i].u.tuple->depth >= depth)
      depth = items[i].u.tuple->depth + 1;
  if (depth > DVM_MAX_TUPLE_DEPTH)
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "tuples nest deeper than %d", DVM_MAX_TUPLE_DEPTH);
  dvm_tuple *t = malloc(sizeof *t + sizeof(dvm_value) * (size_t)n);
  if (!t) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  atomic_init(&t->refs, 1);
  t->n = n;
  t->depth = depth;
  for (int i = 0; i < n; i++) {
    t->items[i] = items[i];
    dvm_value_retain(&items[i]);
  }
  *out = t;
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
