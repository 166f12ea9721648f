/* Inputs of shape-function tests written as text (see input() below),
 * shared by the shape-function test programs. */
#ifndef DVM_TESTS_SHAPEFUNCS_INPUT_H
#define DVM_TESTS_SHAPEFUNCS_INPUT_H

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "object.h"

/* A tensor of dtype dt holding the values of the list at p ("1,-2,3]"),
 * 1-D, or 0-D when scalar. */
static dvm_tensor *tensor_of(dvm_dtype dt, const char *p, int scalar) {
  double v[64];
  int64_t iv[64]; /* integers read as integers: int64 extremes do not fit a double */
  int n = 0;
  while (*p && *p != ']' && n < 64) {
    char *end;
    v[n] = strtod(p, &end);
    iv[n++] = strtoll(p, NULL, 10);
    p = *end == ',' ? end + 1 : end;
  }
  int64_t dims[1] = {n};
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(dt, scalar ? 0 : 1, dims, &t));
  for (int i = 0; t && i < n; i++) {
    void *d = dvm_tensor_ptr(t);
    switch (dt) {
    case DVM_F32: ((float *)d)[i] = (float)v[i]; break;
    case DVM_I32: ((int32_t *)d)[i] = (int32_t)iv[i]; break;
    default: ((int64_t *)d)[i] = iv[i]; break;
    }
  }
  return t;
}

/* An input written as text:
 *   [2,3]    a shape value (any dims, negative ones too)
 *   t[2,3]   an f32 tensor of that shape, all zeros
 *   l[2,-1]  an i64 1-D tensor holding 2, -1;  w[..] the same in i32
 *   x[0,1.5] an f32 1-D tensor holding those values
 *   s5       an i64 0-D tensor holding 5;  F2.5 an f32 0-D tensor
 *   i3       the int 3;  f0.5 the float 0.5;  n a none */
static dvm_value input(const char *s, dvm_tensor **keep) {
  dvm_value v = {0};
  switch (*s) {
  case 'i': return dvm_value_int(strtoll(s + 1, NULL, 10));
  case 'f': return dvm_value_float(strtod(s + 1, NULL));
  case 'n': return v;
  case 'l': *keep = tensor_of(DVM_I64, s + 2, 0); return dvm_value_tensor(*keep);
  case 'w': *keep = tensor_of(DVM_I32, s + 2, 0); return dvm_value_tensor(*keep);
  case 'x': *keep = tensor_of(DVM_F32, s + 2, 0); return dvm_value_tensor(*keep);
  case 's': *keep = tensor_of(DVM_I64, s + 1, 1); return dvm_value_tensor(*keep);
  case 'F': *keep = tensor_of(DVM_F32, s + 1, 1); return dvm_value_tensor(*keep);
  default: break;
  }
  int tensor = *s == 't';
  const char *p = s + tensor + 1; /* past "[" */
  int rank = 0;
  while (*p && *p != ']') {
    char *end;
    int64_t d = strtoll(p, &end, 10);
    if (rank < DVM_MAX_RANK) v.u.dims[rank] = d;
    rank++;
    p = *end == ',' ? end + 1 : end;
  }
  v.kind = DVM_VAL_SHAPE;
  v.rank = (uint8_t)rank;
  if (tensor) {
    CHECK_OK(dvm_tensor_create(DVM_F32, rank, v.u.dims, keep));
    if (*keep) memset(dvm_tensor_ptr(*keep), 0, dvm_tensor_nbytes(*keep));
    v = dvm_value_tensor(*keep);
  }
  return v;
}

#endif
