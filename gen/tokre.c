/* The patterns of tokenizer.json (Split, Replace) with PCRE2 in UTF and
 * Unicode-property mode, where \p{L}, \p{N} and \s mean what they mean in
 * the Oniguruma expressions the tokenizers library runs. */
#include <string.h>

#include "tokimpl.h"

int tok_re_each(const tok_re *re, pcre2_match_data *md, const char *s, size_t n, tok_match_fn f, void *ctx) {
  size_t at = 0;
  while (at <= n) {
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, md, re->limits);
    if (rc == PCRE2_ERROR_NOMATCH) return 1;
    if (rc < 0) return 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[1] < ov[0]) return 0; /* \K in a lookahead: no such pattern in a tokenizer */
    if (!f(ctx, ov[0], ov[1])) return 1;
    if (ov[1] > ov[0]) {
      at = ov[1];
    } else { /* an empty match: on one character */
      if (ov[0] >= n) return 1;
      size_t c = tok_utf8_char((const unsigned char *)s + ov[0], n - ov[0]);
      at = ov[0] + (c ? c : 1);
    }
  }
  return 1;
}

typedef struct {
  const char *s, *with;
  size_t at; /* s is copied up to here */
  tok_buf *out;
  int ok;
} replacing;

static int replace_match(void *ctx, size_t start, size_t end) {
  replacing *r = ctx;
  r->ok = tok_buf_put(r->out, r->s + r->at, start - r->at) && tok_buf_put(r->out, r->with, strlen(r->with));
  r->at = end;
  return r->ok;
}

dvm_status *tok_re_replace(const tok_re *re, pcre2_match_data *md, const char *s, size_t n, const char *with,
                           const char *what, tok_buf *out) {
  replacing r = {s, with, 0, out, 1};
  if (!tok_re_each(re, md, s, n, replace_match, &r))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: the pattern failed to match (past its match limit)", what);
  return r.ok && tok_buf_put(out, s + r.at, n - r.at) ? NULL : tok_oom();
}
