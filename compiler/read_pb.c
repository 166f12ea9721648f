/* ONNX protobuf values as dvm values (dvmc.h): the compiler's importer
 * reads the protobuf, and the result is copied out of its arena. */
#include <stdlib.h>
#include <string.h>

#include "dvmc.h"
#include "object.h"
#include "onnx_import.h"

static dvm_status *tensor_of(const dvmc_tensor *t, dvm_tensor **out) {
  dvm_status *st = dvm_tensor_create(t->dtype, t->rank, t->dims, out);
  if (st) return st;
  if (t->dtype != DVM_STRING) {
    if (t->nbytes) memcpy(dvm_tensor_data(*out), t->data, t->nbytes);
  } else if ((st = dvm_strings_blob_read(t->data, *out))) { /* the importer's blob (dvmc_tensor_strings) */
    dvm_tensor_release(*out);
  }
  return st;
}

dvm_status *dvmc_read_tensor_pb(const void *data, size_t size, const char *what, dvm_tensor **out) {
  dvmc_ctx *c;
  const dvmc_tensor *t;
  dvm_status *st = dvmc_ctx_create(&c);
  if (st) return st;
  if (!(st = dvmc_import_tensor_memory(c, data, size, what, &t))) st = tensor_of(t, out);
  dvmc_ctx_destroy(c);
  return st;
}

/* A tensor, or a list of values as a tuple. */
static dvm_status *value_of(const dvmc_pbvalue *v, dvm_value *out) {
  if (v->tensor) {
    dvm_tensor *t;
    dvm_status *st = tensor_of(v->tensor, &t);
    if (!st) *out = dvm_value_tensor(t);
    return st;
  }
  dvm_value *items = calloc((size_t)(v->n ? v->n : 1), sizeof *items);
  dvm_status *st = items ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int i = 0; i < v->n && !st; i++) st = value_of(&v->items[i], &items[i]);
  dvm_tuple *t = NULL;
  if (!st) st = dvm_tuple_create(v->n, items, &t);
  for (int i = 0; i < v->n && items; i++) dvm_value_clear(&items[i]); /* the tuple holds its own */
  free(items);
  if (!st) *out = (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = t};
  return st;
}

dvm_status *dvmc_read_sequence_pb(const void *data, size_t size, const char *what, dvm_value *out) {
  dvmc_ctx *c;
  const dvmc_pbvalue *v;
  dvm_status *st = dvmc_ctx_create(&c);
  if (st) return st;
  if (!(st = dvmc_import_sequence_memory(c, data, size, what, &v))) st = value_of(v, out);
  dvmc_ctx_destroy(c);
  return st;
}
