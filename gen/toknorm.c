/* The normalizer: Unicode normal forms (utf8proc), Prepend and Replace,
 * applied in order to each piece of text between added tokens. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokimpl.h"

/* Rewrites s[0..n) into out (emptied first) by one step. */
static dvm_status *step(const tok_norm *k, pcre2_match_data *md, const char *s, size_t n, tok_buf *out) {
  static const utf8proc_option_t forms[] = {
      [TN_NFC] = UTF8PROC_STABLE | UTF8PROC_COMPOSE,
      [TN_NFD] = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
      [TN_NFKC] = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
      [TN_NFKD] = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
  };
  out->len = 0;
  switch (k->kind) {
  case TN_NFC: case TN_NFD: case TN_NFKC: case TN_NFKD: {
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t len = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r, forms[k->kind]);
    if (len < 0) {
      free(r);
      return len == UTF8PROC_ERROR_NOMEM ? tok_oom()
                                         : dvm_status_new(DVM_INVALID_ARGUMENT, "normalizer: %s", utf8proc_errmsg(len));
    }
    int ok = tok_buf_put(out, r, (size_t)len);
    free(r);
    return ok ? NULL : tok_oom();
  }
  case TN_PREPEND:
    if (n && !tok_buf_put(out, k->text, strlen(k->text))) return tok_oom();
    return tok_buf_put(out, s, n) ? NULL : tok_oom();
  case TN_REPLACE: return tok_re_replace(&k->re, md, s, n, k->text, "normalizer Replace", out);
  }
  return dvm_status_new(DVM_INTERNAL, "normalizer step %d", (int)k->kind);
}

dvm_status *tok_normalize(const dvm_tokenizer *t, pcre2_match_data *md, const char *s, size_t n, tok_buf *out) {
  tok_buf tmp = {0};
  out->len = 0;
  if (!tok_buf_put(out, s, n)) return tok_oom();
  dvm_status *st = NULL;
  for (size_t i = 0; i < t->n_norm && !st; i++) {
    st = step(&t->norm[i], md, out->p, out->len, &tmp);
    tok_buf swap = *out;
    *out = tmp, tmp = swap;
  }
  free(tmp.p);
  return st;
}
