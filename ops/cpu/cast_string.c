/* Cast to and from strings, as ONNX Runtime does.
 *
 * To text: floats (f16 and bf16 widened to f32, f32 and f64 as they are)
 * as printf's "%.8g", NaN as "NaN", infinities as "INF" and "-INF";
 * integers in decimal; bools "1" and "0".
 * From text: floats through strtod, then rounded to the dtype; signed
 * integers through strtoll, wrapped to the dtype's width; unsigned ones and
 * bool through strtoull (so "-1" is the largest u64; a bool is true when
 * the number is not 0). As C++'s stod/stoll/stoull, which ONNX Runtime
 * calls: leading space and trailing text are allowed; an element with no
 * number, or one out of the parser's range (a double's overflow or
 * underflow, an int64's), is an error naming it. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "ops/cpu/cast_string.h"
#include "ops/kargs.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

/* Element i of x as text into buf; its length. */
static int format(const dvm_tensor *x, int64_t i, char *buf, size_t size) {
  const void *p = dvm_tensor_ptr(x);
  double f;
  switch ((dvm_dtype)x->dtype) {
  case DVM_F32: f = ((const float *)p)[i]; break;
  case DVM_F64: f = ((const double *)p)[i]; break;
  case DVM_F16: f = dvm_f16_to_f32(((const uint16_t *)p)[i]); break;
  case DVM_BF16: f = dvm_bf16_to_f32(((const uint16_t *)p)[i]); break;
  case DVM_I8: return snprintf(buf, size, "%d", ((const int8_t *)p)[i]);
  case DVM_I16: return snprintf(buf, size, "%d", ((const int16_t *)p)[i]);
  case DVM_I32: return snprintf(buf, size, "%" PRId32, ((const int32_t *)p)[i]);
  case DVM_I64: return snprintf(buf, size, "%" PRId64, ((const int64_t *)p)[i]);
  case DVM_U8: case DVM_BOOL: return snprintf(buf, size, "%u", ((const uint8_t *)p)[i]);
  case DVM_U16: return snprintf(buf, size, "%u", ((const uint16_t *)p)[i]);
  case DVM_U32: return snprintf(buf, size, "%" PRIu32, ((const uint32_t *)p)[i]);
  default: return snprintf(buf, size, "%" PRIu64, ((const uint64_t *)p)[i]);
  }
  if (isnan(f)) return snprintf(buf, size, "NaN");
  if (isinf(f)) return snprintf(buf, size, f < 0 ? "-INF" : "INF");
  return snprintf(buf, size, "%.8g", f);
}

static dvm_status *to_text(const dvm_kernel_args *a) {
  const dvm_tensor *x = a->in[0];
  dvm_string **o = dvm_tensor_ptr(a->out[0]);
  for (int64_t i = 0; i < dvm_tensor_numel(x); i++) {
    char buf[64];
    int n = format(x, i, buf, sizeof buf);
    dvm_status *st = dvm_string_make(a->exec, buf, (size_t)n, &o[i]);
    if (st) return st;
  }
  return NULL;
}

typedef enum { PARSE_FLOAT, PARSE_SIGNED, PARSE_UNSIGNED } parse_kind;

/* The number at the start of s (NUL-terminated) as kind says: an error
 * naming element i when there is none or it is out of range. */
static dvm_status *parse(const char *s, int64_t i, parse_kind kind, double *f, uint64_t *u) {
  char *end;
  errno = 0;
  if (kind == PARSE_FLOAT) *f = strtod(s, &end);
  else if (kind == PARSE_SIGNED) *u = (uint64_t)strtoll(s, &end, 10);
  else *u = strtoull(s, &end, 10);
  if (end == s) return ERR("cast: string element %lld (\"%.40s\") is not a number", (long long)i, s);
  if (errno == ERANGE) return ERR("cast: string element %lld (\"%.40s\") is out of range", (long long)i, s);
  return NULL;
}

static dvm_status *from_text(const dvm_kernel_args *a) {
  const dvm_tensor *o = a->out[0];
  dvm_string *const *x = dvm_tensor_ptr(a->in[0]);
  void *p = dvm_tensor_ptr(o);
  dvm_dtype dt = (dvm_dtype)o->dtype;
  parse_kind kind = dt == DVM_F32 || dt == DVM_F64 || dt == DVM_F16 || dt == DVM_BF16 ? PARSE_FLOAT
                    : dvm_dtype_is_int(dt) && dt != DVM_U8 && dt != DVM_U16 && dt != DVM_U32 && dt != DVM_U64
                        ? PARSE_SIGNED
                        : PARSE_UNSIGNED;
  for (int64_t i = 0; i < dvm_tensor_numel(o); i++) {
    double f = 0;
    uint64_t u = 0;
    dvm_status *st = parse(dvm_string_bytes(x[i], NULL), i, kind, &f, &u);
    if (st) return st;
    switch (dt) {
    case DVM_F32: ((float *)p)[i] = (float)f; break;
    case DVM_F64: ((double *)p)[i] = f; break;
    case DVM_F16: ((uint16_t *)p)[i] = dvm_f32_to_f16((float)f); break;
    case DVM_BF16: ((uint16_t *)p)[i] = dvm_f32_to_bf16((float)f); break;
    case DVM_BOOL: ((uint8_t *)p)[i] = u != 0; break;
    case DVM_I8: case DVM_U8: ((uint8_t *)p)[i] = (uint8_t)u; break;
    case DVM_I16: case DVM_U16: ((uint16_t *)p)[i] = (uint16_t)u; break;
    case DVM_I32: case DVM_U32: ((uint32_t *)p)[i] = (uint32_t)u; break;
    default: ((uint64_t *)p)[i] = u; break;
    }
  }
  return NULL;
}

dvm_status *dvm_cpu_cast_string(const dvm_kernel_args *a) {
  const dvm_tensor *x = a->in[0], *o = a->out[0];
  dvm_dtype other = (dvm_dtype)(x->dtype == DVM_STRING ? o->dtype : x->dtype);
  if (other == DVM_STRING || (unsigned)other >= DVM_DTYPE_COUNT) { /* string to string is a copy (unary.c) */
    char got[64];
    return ERR("cast: dtypes %s: strings cast to and from numbers and bools", dvm_kargs_dtypes(got, sizeof got, a));
  }
  return x->dtype == DVM_STRING ? from_text(a) : to_text(a);
}
