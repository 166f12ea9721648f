/* The "data" of an infer request's inputs, read from the JSON text
 * straight into tensors. A document tree of a 57 MiB body of numbers took
 * jansson over 1 GB (a json_t and malloc's share per element); so jansson
 * parses only the request's skeleton, a copy of the body with each
 * inputs[k].data value blanked to spaces (newlines kept, so that its
 * error positions are the body's), and each value is read element by
 * element into its tensor. A request then holds its body, the skeleton,
 * the skeleton's small tree and its tensors. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* JSON's whitespace, and what ends a scalar (strchr would also match the
 * NUL that ends its set, and a NUL byte is neither). */
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static int ends_scalar(char c, const char *closers) { return is_space(c) || c == ',' || (c && strchr(closers, c)); }

/* The index after the string that starts at s[i] ('"'), or 0 if it does
 * not end. */
static size_t string_end(const char *s, size_t n, size_t i) {
  for (i++; i < n; i++) {
    if (s[i] == '\\') i++;
    else if (s[i] == '"') return i + 1;
  }
  return 0;
}

/* The index after the value that starts at s[i]: a string, a container
 * (brackets matched, strings skipped) or a scalar; 0 if it does not end. */
static size_t value_end(const char *s, size_t n, size_t i) {
  if (s[i] == '"') return string_end(s, n, i);
  if (s[i] != '[' && s[i] != '{') {
    while (i < n && !ends_scalar(s[i], "]}")) i++;
    return i;
  }
  size_t depth = 0;
  for (; i < n; i++) {
    if (s[i] == '"') {
      if (!(i = string_end(s, n, i))) return 0;
      i--;
    } else if (s[i] == '[' || s[i] == '{') {
      depth++;
    } else if ((s[i] == ']' || s[i] == '}') && --depth == 0) {
      return i + 1;
    }
  }
  return 0;
}

/* Whether the string s[start..end) (quotes included) is `key`, escapes
 * decoded ("d\u0061ta" is "data"). */
static int key_is(const char *s, size_t start, size_t end, const char *key) {
  size_t i = start + 1, j = 0;
  for (end--; i < end; j++) {
    unsigned c = (unsigned char)s[i++];
    if (c == '\\' && i < end) {
      c = (unsigned char)s[i++];
      if (c == 'u') {
        char hex[5] = {0};
        if (end - i < 4) return 0;
        memcpy(hex, s + i, 4);
        i += 4;
        c = (unsigned)strtoul(hex, NULL, 16);
      }
    }
    if (!key[j] || c != (unsigned char)key[j]) return 0;
  }
  return !key[j];
}

/* Beyond this many JSON values outside the inputs' data a request is
 * refused: a real one has a few per input, and a tree of millions of
 * small values is what the skeleton is there to avoid. */
#define MAX_VALUES 4096

dvm_status *dvms_json_skeleton(const char *body, size_t n, char **skeleton, dvms_span **spans, size_t *nspans) {
  *skeleton = NULL;
  *spans = NULL;
  *nspans = 0;
  dvms_span *sp = NULL;
  size_t nsp = 0, values = 0;
  /* The path to here: open[0] is the root, open[1] the inputs array when
   * the root's key was "inputs", open[2] an input object; k counts the
   * inputs. */
  int depth = 0, inputs = 0;
  size_t k = 0, key_start = 0;
  char open[3] = {0};
  char *sk = malloc(n + 1);
  if (!sk) return dvm_status_new(DVM_OUT_OF_MEMORY, "%zu bytes for the request's JSON", n);
  memcpy(sk, body, n);
  sk[n] = 0;
  for (size_t i = 0; i < n && values <= MAX_VALUES; i++) {
    char c = body[i];
    if (c == '"') {
      size_t e = string_end(body, n, i);
      if (!e) break; /* malformed: jansson says where */
      key_start = i;
      i = e - 1;
    } else if (c == ':') {
      values++;
      size_t ks = key_start, ke = body[ks] == '"' ? string_end(body, n, ks) : 0;
      if (!ke) continue;
      if (depth == 1 && (inputs = key_is(body, ks, ke, "inputs"))) k = 0;
      if (depth != 3 || !inputs || open[1] != '[' || open[2] != '{' || !key_is(body, ks, ke, "data")) continue;
      size_t v = i + 1;
      while (v < n && is_space(body[v])) v++;
      size_t e = v < n ? value_end(body, n, v) : 0;
      if (!e) break;
      if (k >= nsp) {
        dvms_span *grown = realloc(sp, (k + 1) * sizeof *sp);
        if (!grown) {
          free(sp);
          free(sk);
          return dvm_status_new(DVM_OUT_OF_MEMORY, "the request's inputs");
        }
        memset(grown + nsp, 0, (k + 1 - nsp) * sizeof *sp);
        sp = grown;
        nsp = k + 1;
      }
      sp[k] = (dvms_span){v, e};
      for (size_t j = v; j < e; j++) /* "data": 0, so that the key stays */
        if (sk[j] != '\n') sk[j] = j == v ? '0' : ' ';
      i = e - 1;
    } else if (c == '[' || c == '{') {
      values++;
      if (depth < 3) open[depth] = c;
      depth++;
    } else if (c == ']' || c == '}') {
      if (depth == 0) break; /* a closer with nothing open: jansson says where */
      if (depth-- == 2) inputs = 0;
    } else if (c == ',') {
      values++;
      k += depth == 2 && inputs;
    }
  }
  if (values > MAX_VALUES) {
    free(sp);
    free(sk);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "the request has more than %d JSON values besides its inputs' data",
                          MAX_VALUES);
  }
  *skeleton = sk;
  *spans = sp;
  *nspans = nsp;
  return NULL;
}

static dvm_status *bad_element(const char *name, int64_t i, const char *what) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": element %lld %s", name, (long long)i, what);
}

/* JSON's number grammar over s[0..n); *integer when it has no fraction or
 * exponent. */
static int json_number(const char *s, size_t n, int *integer) {
  size_t i = s[0] == '-';
  if (i >= n || s[i] < '0' || s[i] > '9' || (s[i] == '0' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9'))
    return 0;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  *integer = i == n;
  if (i < n && s[i] == '.') {
    if (++i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  return i == n;
}

/* Stores the scalar s[0..n) as element i of t; the dtype decides what is
 * valid, and every value must fit it (a float too, not as infinity). */
static dvm_status *store(dvm_tensor *t, int64_t i, const char *s, size_t n, const char *name) {
  void *d = dvm_tensor_data(t);
  dvm_dtype dt = dvm_tensor_dtype(t);
  if (dt == DVM_BOOL) {
    int yes = n == 4 && memcmp(s, "true", 4) == 0, no = n == 5 && memcmp(s, "false", 5) == 0;
    if (!yes && !no) return bad_element(name, i, "is not a boolean");
    ((uint8_t *)d)[i] = (uint8_t)yes;
    return NULL;
  }
  int integer;
  char text[400];
  if (!json_number(s, n, &integer)) return bad_element(name, i, dt == DVM_F32 || dt == DVM_F64 ? "is not a number" : "is not an integer");
  if (n >= sizeof text) return bad_element(name, i, "has too many digits");
  memcpy(text, s, n);
  text[n] = 0;
  errno = 0;
  if (dt == DVM_F32 || dt == DVM_F64) {
    double x = strtod(text, NULL);
    if (isinf(x) || (dt == DVM_F32 && fabs(x) > FLT_MAX))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": element %lld (%s) is out of range for %s", name,
                            (long long)i, text, dvms_datatype_name(dt));
    if (dt == DVM_F64) ((double *)d)[i] = x;
    else ((float *)d)[i] = (float)x;
    return NULL;
  }
  if (!integer) return bad_element(name, i, "is not an integer");
  static const int64_t lo[] = {[DVM_I8] = INT8_MIN, [DVM_I16] = INT16_MIN, [DVM_I32] = INT32_MIN,
                               [DVM_I64] = INT64_MIN, [DVM_U8] = 0, [DVM_U16] = 0, [DVM_U32] = 0, [DVM_U64] = 0};
  static const int64_t hi[] = {[DVM_I8] = INT8_MAX, [DVM_I16] = INT16_MAX, [DVM_I32] = INT32_MAX,
                               [DVM_I64] = INT64_MAX, [DVM_U8] = UINT8_MAX, [DVM_U16] = UINT16_MAX,
                               [DVM_U32] = UINT32_MAX};
  int64_t x = 0;
  uint64_t u = 0;
  int ok;
  if (dt == DVM_U64) {
    u = strtoull(text, NULL, 10);
    ok = errno != ERANGE && text[0] != '-';
  } else {
    x = strtoll(text, NULL, 10);
    ok = errno != ERANGE && x >= lo[dt] && x <= hi[dt];
  }
  if (!ok)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": element %lld (%s) is out of range for %s", name,
                          (long long)i, text, dvms_datatype_name(dt));
  switch (dt) {
  case DVM_I8: ((int8_t *)d)[i] = (int8_t)x; break;
  case DVM_I16: ((int16_t *)d)[i] = (int16_t)x; break;
  case DVM_I32: ((int32_t *)d)[i] = (int32_t)x; break;
  case DVM_U8: ((uint8_t *)d)[i] = (uint8_t)x; break;
  case DVM_U16: ((uint16_t *)d)[i] = (uint16_t)x; break;
  case DVM_U32: ((uint32_t *)d)[i] = (uint32_t)x; break;
  case DVM_U64: ((uint64_t *)d)[i] = u; break;
  default: ((int64_t *)d)[i] = x; break;
  }
  return NULL;
}

dvm_status *dvms_json_fill(dvm_tensor *t, const char *s, size_t n, const char *name, int64_t *count) {
  int depth = 0, want_value = 1; /* a value (or ']' right after '[') comes next, else ',' or ']' */
  int after_open = 0;
  int64_t numel = dvm_tensor_numel(t);
  *count = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (is_space(c)) continue;
    if (want_value && c == '[') {
      if (++depth > DVM_MAX_RANK) return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": data is nested too deeply", name);
      after_open = 1;
      continue;
    }
    if (c == ']' && depth > 0 && (!want_value || after_open)) {
      depth--;
      want_value = after_open = 0;
      continue;
    }
    if (c == ',' && depth > 0 && !want_value) {
      want_value = 1;
      after_open = 0;
      continue;
    }
    if (!want_value || c == ',' || c == ']')
      return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": malformed data at character %zu of its value", name, i);
    size_t e = i;
    while (e < n && !ends_scalar(s[e], "]")) e++;
    if (*count >= numel) return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": data has more elements than its shape holds", name);
    dvm_status *st = store(t, *count, s + i, e - i, name);
    if (st) return st;
    ++*count;
    want_value = after_open = 0;
    i = e - 1;
    if (depth == 0) break; /* a lone scalar */
  }
  if (depth != 0 || want_value)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": malformed data (unbalanced brackets)", name);
  return NULL;
}
