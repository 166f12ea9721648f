/* Values: what a VM register, a function argument or a result holds. */
#ifndef DVM_VALUE_H
#define DVM_VALUE_H

#include "dvm/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dvm_kind {
  DVM_VAL_NONE = 0,
  DVM_VAL_INT,     /* int64 scalar (shape arithmetic, attributes) */
  DVM_VAL_FLOAT,   /* double scalar (attributes) */
  DVM_VAL_SHAPE,   /* up to DVM_MAX_RANK int64 dims, held inline */
  DVM_VAL_TENSOR,
  DVM_VAL_STORAGE, /* raw device memory that tensors are views of */
  DVM_VAL_TUPLE,
  DVM_KIND_COUNT
} dvm_kind;

typedef struct dvm_storage dvm_storage;
typedef struct dvm_tuple dvm_tuple;

typedef struct dvm_value {
  uint8_t kind; /* dvm_kind */
  uint8_t rank; /* DVM_VAL_SHAPE only */
  union {
    int64_t i;
    double f;
    int64_t dims[DVM_MAX_RANK];
    dvm_tensor *tensor;
    dvm_storage *storage;
    dvm_tuple *tuple;
  } u;
} dvm_value;

DVM_API const char *dvm_kind_name(dvm_kind k);

static inline dvm_value dvm_value_int(int64_t i) {
  dvm_value v = {.kind = DVM_VAL_INT};
  v.u.i = i;
  return v;
}
static inline dvm_value dvm_value_float(double f) {
  dvm_value v = {.kind = DVM_VAL_FLOAT};
  v.u.f = f;
  return v;
}
/* Borrows t: the value does not own a reference until passed to a call that
 * says so. */
static inline dvm_value dvm_value_tensor(dvm_tensor *t) {
  dvm_value v = {.kind = DVM_VAL_TENSOR};
  v.u.tensor = t;
  return v;
}

/* Reference counting through a value (tensors, storages, tuples); scalars and
 * shapes need none. dvm_value_clear releases and sets the kind to NONE. */
DVM_API void dvm_value_retain(const dvm_value *v);
DVM_API void dvm_value_clear(dvm_value *v);

/* Tuples: n values; the tuple holds a reference to each. */
DVM_API DVM_MUST_USE dvm_status *dvm_tuple_create(int n, const dvm_value *items, dvm_tuple **out);
DVM_API int dvm_tuple_size(const dvm_tuple *t);
DVM_API const dvm_value *dvm_tuple_get(const dvm_tuple *t, int i); /* borrowed */
DVM_API void dvm_tuple_release(dvm_tuple *t);
/* A new tuple: t's items with v inserted before item pos (0..size), or
 * without item pos (0..size-1); t and v are borrowed and left as they
 * were; *out holds one reference; release it. ONNX sequences and optionals
 * are tuples (docs/bytecode.md, section 4.3). */
DVM_API DVM_MUST_USE dvm_status *dvm_tuple_insert(const dvm_tuple *t, int pos, const dvm_value *v,
                                                  dvm_tuple **out);
DVM_API DVM_MUST_USE dvm_status *dvm_tuple_erase(const dvm_tuple *t, int pos, dvm_tuple **out);

#ifdef __cplusplus
}
#endif
#endif
