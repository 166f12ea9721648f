/* The decoder: token strings back to text through the steps of
 * tokenizer.json's "decoder" (ByteLevel, Metaspace, Replace, ByteFallback,
 * Fuse, Strip), each step turning a list of strings into another as the
 * tokenizers library's decode_chain does; then the list joined. Also the
 * UTF-8 and ByteLevel character helpers the other parts use. */
#include <stdlib.h>
#include <string.h>

#include "tokimpl.h"

size_t tok_utf8_char(const unsigned char *s, size_t n) {
  if (!n) return 0;
  unsigned char c = s[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return len;
}

static uint32_t utf8_cp(const unsigned char *s, size_t len) {
  static const unsigned char lead_mask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = s[0] & lead_mask[len];
  for (size_t i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3F);
  return cp;
}

/* The length of the maximal invalid subpart at s (Unicode's "maximal
 * subpart" rule, which Rust's from_utf8_lossy follows): at least 1. */
static size_t invalid_run(const unsigned char *s, size_t n) {
  unsigned char c = s[0], lo = 0x80, hi = 0xBF;
  size_t len;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 1;
  size_t i = 1;
  if (i < n && s[i] >= lo && s[i] <= hi)
    for (i = 2; i < len && i < n && (s[i] & 0xC0) == 0x80;) i++;
  return i;
}

int tok_utf8_lossy(const char *s, size_t n, tok_buf *out) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t c = tok_utf8_char(u + i, n - i);
    if (c) {
      if (!tok_buf_put(out, s + i, c)) return 0;
      i += c;
    } else {
      if (!tok_buf_put(out, "\xEF\xBF\xBD", 3)) return 0;
      i += invalid_run(u + i, n - i);
    }
  }
  return 1;
}

/* GPT-2's table: the printable bytes are themselves; the others (0-32,
 * 127-160, 173) are 256 on, in order. */
static uint32_t bytelevel_cp(unsigned char b) {
  if (b <= 32) return 256u + b;
  if (b >= 127 && b <= 160) return 256u + 33 + (b - 127u);
  if (b == 173) return 256u + 67;
  return b;
}

size_t tok_bytelevel_char(unsigned char byte, char c[2]) {
  uint32_t cp = bytelevel_cp(byte);
  if (cp < 0x80) {
    c[0] = (char)cp;
    return 1;
  }
  c[0] = (char)(0xC0 | cp >> 6), c[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

int tok_bytelevel_byte(uint32_t cp) {
  if (cp < 256) return bytelevel_cp((unsigned char)cp) == cp ? (int)cp : -1;
  if (cp < 256 + 33) return (int)(cp - 256);
  if (cp < 256 + 67) return (int)(cp - 256 - 33 + 127);
  return cp == 256 + 67 ? 173 : -1;
}

#define PIECE(l, i) ((l)->text.p + (l)->s[i].off)

/* One token's bytes through ByteLevel: each character's byte, or the
 * token's own bytes when a character has none. */
static int bytelevel_token(const char *s, size_t n, tok_buf *out) {
  size_t start = out->len;
  for (size_t i = 0; i < n;) {
    size_t c = tok_utf8_char((const unsigned char *)s + i, n - i);
    int b = c ? tok_bytelevel_byte(utf8_cp((const unsigned char *)s + i, c)) : -1;
    if (b < 0) {
      out->len = start;
      return tok_buf_put(out, s, n);
    }
    unsigned char byte = (unsigned char)b;
    if (!tok_buf_put(out, &byte, 1)) return 0;
    i += c;
  }
  return 1;
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The byte of a "<0xXX>" token, or -1 (Rust's u8::from_str_radix on XX,
 * which takes a '+' sign too). */
static int fallback_byte(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  if (s[3] == '+') return hexval(s[4]);
  int h = hexval(s[3]), l = hexval(s[4]);
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

/* The pending bytes of ByteFallback as one string, or one U+FFFD each
 * when they are not UTF-8. */
static int flush_bytes(tok_buf *bytes, tok_pieces *out) {
  if (!bytes->len) return 1;
  int ok = 1;
  size_t valid = 0;
  while (valid < bytes->len) {
    size_t c = tok_utf8_char((const unsigned char *)bytes->p + valid, bytes->len - valid);
    if (!c) break;
    valid += c;
  }
  if (valid == bytes->len) ok = tok_pieces_add(out, bytes->p, bytes->len, 0);
  else
    for (size_t i = 0; i < bytes->len && ok; i++) ok = tok_pieces_add(out, "\xEF\xBF\xBD", 3, 0);
  bytes->len = 0;
  return ok;
}

static dvm_status *step(const tok_dec *k, pcre2_match_data *md, const tok_pieces *in, tok_pieces *out) {
  tok_buf b = {0};
  int ok = 1;
  switch (k->kind) {
  case TD_BYTELEVEL:
    for (size_t i = 0; i < in->n && ok; i++) ok = bytelevel_token(PIECE(in, i), in->s[i].len, &b);
    if (ok) {
      tok_buf text = {0};
      ok = tok_utf8_lossy(b.p ? b.p : "", b.len, &text) && tok_pieces_add(out, text.p ? text.p : "", text.len, 0);
      free(text.p);
    }
    break;
  case TD_FUSE:
    for (size_t i = 0; i < in->n && ok; i++) ok = tok_buf_put(&b, PIECE(in, i), in->s[i].len);
    ok = ok && tok_pieces_add(out, b.p ? b.p : "", b.len, 0);
    break;
  case TD_METASPACE: {
    size_t r = strlen(k->rep);
    for (size_t i = 0; i < in->n && ok; i++) {
      const char *s = PIECE(in, i);
      size_t n = in->s[i].len;
      b.len = 0;
      for (size_t j = 0; j < n && ok;) {
        if (j + r <= n && memcmp(s + j, k->rep, r) == 0) {
          if (i > 0 || k->prepend == PREPEND_NEVER) ok = tok_buf_put(&b, " ", 1);
          j += r;
        } else {
          ok = tok_buf_put(&b, s + j, 1), j++;
        }
      }
      ok = ok && tok_pieces_add(out, b.p ? b.p : "", b.len, 0);
    }
    break;
  }
  case TD_REPLACE:
    for (size_t i = 0; i < in->n && ok; i++) {
      b.len = 0;
      dvm_status *st = tok_re_replace(&k->re, md, PIECE(in, i), in->s[i].len, k->text, "decoder Replace", &b);
      if (st) {
        free(b.p);
        return st;
      }
      ok = tok_pieces_add(out, b.p, b.len, 0);
    }
    break;
  case TD_BYTEFALLBACK:
    for (size_t i = 0; i < in->n && ok; i++) {
      int byte = fallback_byte(PIECE(in, i), in->s[i].len);
      if (byte >= 0) {
        unsigned char c = (unsigned char)byte;
        ok = tok_buf_put(&b, &c, 1);
      } else {
        ok = flush_bytes(&b, out) && tok_pieces_add(out, PIECE(in, i), in->s[i].len, 0);
      }
    }
    ok = ok && flush_bytes(&b, out);
    break;
  case TD_STRIP: {
    size_t r = strlen(k->rep);
    for (size_t i = 0; i < in->n && ok; i++) {
      const char *s = PIECE(in, i);
      size_t start = 0, stop = in->s[i].len;
      for (int j = 0; j < k->start && start + r <= stop && memcmp(s + start, k->rep, r) == 0; j++) start += r;
      size_t end = in->s[i].len;
      for (int j = 0; j < k->stop && end >= r && memcmp(s + end - r, k->rep, r) == 0; j++) end -= r;
      ok = tok_pieces_add(out, s + start, end > start ? end - start : 0, 0);
    }
    break;
  }
  }
  free(b.p);
  return ok ? NULL : tok_oom();
}

dvm_status *tok_decode_tokens(const dvm_tokenizer *t, pcre2_match_data *md, const char **tokens, size_t n,
                              tok_buf *out) {
  out->len = 0;
  if (!tok_buf_put(out, "", 0)) return tok_oom();
  if (!t->has_decoder) { /* the tokenizers library joins with spaces */
    for (size_t i = 0; i < n; i++)
      if ((i && !tok_buf_put(out, " ", 1)) || !tok_buf_put(out, tokens[i], strlen(tokens[i]))) return tok_oom();
    return NULL;
  }
  tok_pieces cur = {0}, next = {0};
  dvm_status *st = NULL;
  for (size_t i = 0; i < n && !st; i++)
    if (!tok_pieces_add(&cur, tokens[i], strlen(tokens[i]), 0)) st = tok_oom();
  for (size_t i = 0; i < t->n_dec && !st; i++) {
    next.n = 0, next.text.len = 0;
    st = step(&t->dec[i], md, &cur, &next);
    tok_pieces swap = cur;
    cur = next, next = swap;
  }
  for (size_t i = 0; i < cur.n && !st; i++)
    if (!tok_buf_put(out, PIECE(&cur, i), cur.s[i].len)) st = tok_oom();
  free(cur.text.p), free(cur.s), free(next.text.p), free(next.s);
  return st;
}
