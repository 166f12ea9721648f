/* Kernels of the ONNX string ops.
 *
 *   string_concat(in: X, Y) -> Z: X[i] and Y[i] joined, both broadcast
 *       (ONNX multidirectional, shape function "broadcast"); all strings.
 *   regex_full_match(in: X, pattern [1]) -> Y bool: whether the whole of
 *       X[i] matches the pattern, both strings. ONNX Runtime's patterns are
 *       RE2's; they are compiled here by PCRE2 in UTF mode, which reads
 *       RE2's syntax alike and also takes what RE2 refuses (lookaround,
 *       backreferences). A pattern that does not compile, or an element
 *       that is not UTF-8, is an error naming it.
 *   string_normalizer(in: X [C] or [1, C], stopwords [S]; attrs:
 *       case_change:int (0 none, 1 lower, 2 upper), case_sensitive:int)
 *       -> Y: X's words that are no stopword (compared in lower case unless
 *       case_sensitive), in that case; [max(kept, 1)] or [1, max(kept, 1)],
 *       one "" when none is kept (shape function "string_normalizer").
 *       Cases are Unicode's simple mappings (utf8proc); ONNX Runtime's
 *       `locale` is not read.
 *   string_split(in: X, delimiter [1]; attrs: maxsplit:int, -1 any) -> Y
 *       [X..., most pieces], Z i64 [X...]: each element cut by the
 *       delimiter, or by runs of spaces when it is "", as ONNX Runtime
 *       cuts (shapefuncs/text.h), the pieces padded with "", their counts
 *       (shape function "string_split").
 *
 * Strings are made on the calling thread (dvm_string_make). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/text.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

static dvm_status *all_strings(const dvm_kernel_args *a, const char *op) {
  for (int i = 0; i < a->nin + a->nout; i++) {
    const dvm_tensor *t = i < a->nin ? a->in[i] : a->out[i - a->nin];
    if (t->dtype != DVM_STRING && !(i >= a->nin && !strcmp(op, "regex_full_match"))) {
      char got[64];
      return ERR("%s: dtypes %s: want strings", op, dvm_kargs_dtypes(got, sizeof got, a));
    }
  }
  return NULL;
}

static dvm_status *string_concat(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "string_concat", 2, 1, DVM_DEVICE_CPU);
  if (st || (st = all_strings(a, "string_concat")) ||
      (st = dvm_ew_check_broadcast("string_concat", a->in, 2, a->out[0])))
    return st;
  const dvm_tensor *o = a->out[0];
  int64_t total = dvm_tensor_numel(o);
  if (!total) return NULL;
  dvm_ew_plan p;
  dvm_ew_cursor c;
  dvm_ew_plan_make(&p, 2, a->in, o->rank, o->dims);
  dvm_ew_cursor_seek(&p, &c, 0);
  const char *px = dvm_tensor_ptr(a->in[0]), *py = dvm_tensor_ptr(a->in[1]);
  dvm_string **pz = dvm_tensor_ptr(o);
  char *buf = NULL;
  size_t cap = 0;
  while (c.pos < total && !st) {
    int64_t n = dvm_ew_cursor_run(&p, &c, total);
    for (int64_t j = 0; j < n && !st; j++) {
      size_t nx, ny;
      const char *sx = dvm_string_bytes(*(dvm_string *const *)(px + c.off[0] + j * p.stride[0][0]), &nx);
      const char *sy = dvm_string_bytes(*(dvm_string *const *)(py + c.off[1] + j * p.stride[0][1]), &ny);
      if (nx + ny > cap) {
        char *b = realloc(buf, cap = 2 * (nx + ny));
        if (!b) st = dvm_status_new(DVM_OUT_OF_MEMORY, "string_concat: no memory for %zu bytes", nx + ny);
        else buf = b;
      }
      if (st) break;
      if (nx) memcpy(buf, sx, nx);
      if (ny) memcpy(buf + nx, sy, ny);
      st = dvm_string_make(a->exec, buf, nx + ny, &pz[c.pos + j]);
    }
    dvm_ew_cursor_advance(&p, &c, n);
  }
  free(buf);
  return st;
}

static dvm_status *regex_full_match(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "regex_full_match", 2, 1, DVM_DEVICE_CPU);
  if (st || (st = all_strings(a, "regex_full_match"))) return st;
  const dvm_tensor *x = a->in[0], *pat = a->in[1], *y = a->out[0];
  if (y->dtype != DVM_BOOL || dvm_tensor_numel(pat) != 1 || y->rank != x->rank ||
      memcmp(y->dims, x->dims, sizeof(int64_t) * x->rank))
    return ERR("regex_full_match: want one pattern and Y bool of X's shape");
  size_t plen;
  const char *ps = dvm_tensor_string(pat, 0, &plen);
  int code;
  PCRE2_SIZE at;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)ps, plen, PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &code, &at, NULL);
  if (!re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(code, msg, sizeof msg);
    return ERR("regex_full_match: pattern \"%.80s\" at byte %zu: %s", ps, (size_t)at, (const char *)msg);
  }
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  uint8_t *py = dvm_tensor_ptr(y);
  for (int64_t i = 0; md && i < dvm_tensor_numel(x) && !st; i++) {
    size_t n;
    const char *s = dvm_tensor_string(x, i, &n);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    py[i] = rc >= 0;
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(rc, msg, sizeof msg);
      st = ERR("regex_full_match: element %lld: %s", (long long)i, (const char *)msg);
    }
  }
  if (!md) st = dvm_status_new(DVM_OUT_OF_MEMORY, "regex_full_match: no memory for match data");
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return st;
}

static dvm_status *string_normalizer(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "string_normalizer", 2, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nattrs != 2 || a->attrs[0].kind != DVM_VAL_INT || a->attrs[1].kind != DVM_VAL_INT ||
      (uint64_t)a->attrs[0].u.i > 2 || a->out[0]->dtype != DVM_STRING)
    return ERR("string_normalizer: want attributes case_change 0..2 and case_sensitive, and Y string");
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  int64_t c = dvm_tensor_numel(x), kept;
  uint8_t *keep = malloc((size_t)(c ? c : 1));
  if (!keep) return dvm_status_new(DVM_OUT_OF_MEMORY, "string_normalizer: no memory");
  st = dvm_strnorm_keep(x, a->in[1], a->attrs[1].u.i != 0, keep, &kept);
  if (!st && dvm_tensor_numel(y) != (kept ? kept : 1)) st = ERR("string_normalizer: Y has not the kept words' count");
  dvm_string **py = dvm_tensor_ptr(y);
  for (int64_t i = 0, o = 0; i < c && !st; i++) {
    if (!keep[i]) continue;
    size_t n;
    const char *s = dvm_tensor_string(x, i, &n);
    char *cased = NULL, what[48];
    snprintf(what, sizeof what, "string_normalizer: element %lld", (long long)i);
    if (a->attrs[0].u.i && (st = dvm_text_case(s, n, a->attrs[0].u.i == 2, what, &cased, &n))) break;
    st = dvm_string_make(a->exec, cased ? cased : s, n, &py[o++]);
    free(cased);
  }
  free(keep);
  return st;
}

static dvm_status *string_split(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "string_split", 2, 2, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0], *z = a->out[1];
  if (x->dtype != DVM_STRING || a->in[1]->dtype != DVM_STRING || dvm_tensor_numel(a->in[1]) != 1 ||
      y->dtype != DVM_STRING || z->dtype != DVM_I64 || a->nattrs != 1 || a->attrs[0].kind != DVM_VAL_INT)
    return ERR("string_split: want X and one delimiter strings, maxsplit; Y string and Z i64");
  int64_t n = dvm_tensor_numel(x), most = y->rank == x->rank + 1 ? y->dims[x->rank] : -1;
  if (dvm_tensor_numel(z) != n || most < 0 || (most && dvm_tensor_numel(y) != n * most))
    return ERR("string_split: Y and Z are not [X..., pieces] and [X...]");
  size_t dn;
  const char *d = dvm_tensor_string(a->in[1], 0, &dn);
  dvm_string **py = dvm_tensor_ptr(y);
  int64_t *pz = dvm_tensor_ptr(z);
  for (int64_t i = 0; i < n && !st; i++) {
    size_t len;
    const char *s = dvm_tensor_string(x, i, &len), *piece;
    dvm_split it;
    dvm_split_start(&it, s, len, d, dn, a->attrs[0].u.i);
    int64_t k = 0;
    while (!st && dvm_split_next(&it, &piece, &len)) {
      if (k >= most) st = ERR("string_split: element %lld has more than %lld pieces", (long long)i, (long long)most);
      else st = dvm_string_make(a->exec, piece, len, &py[i * most + k++]);
    }
    pz[i] = k;
  }
  return st;
}

const dvm_kernel_def dvm_cpu_strings_kernels[] = {
    {"string_normalizer", DVM_DEVICE_CPU, string_normalizer, "string_normalizer", .strings = 1},
    {"string_split", DVM_DEVICE_CPU, string_split, "string_split", .strings = 1},
    {"string_concat", DVM_DEVICE_CPU, string_concat, "broadcast", .strings = 1},
    {"regex_full_match", DVM_DEVICE_CPU, regex_full_match, NULL, .strings = 1},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
