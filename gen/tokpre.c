/* The pre-tokenizer: splits a normalized piece of text into the words the
 * BPE model sees (Split, ByteLevel, Metaspace), each step applied to every
 * piece the step before made. Splitting follows the tokenizers library's
 * SplitDelimiterBehavior; empty pieces are dropped. */
#include <stdlib.h>
#include <string.h>

#include "tokimpl.h"

typedef struct {
  size_t start, end;
  int match;
} seg;

typedef struct {
  seg *s;
  size_t n, cap, at; /* at: the input is covered up to here */
  int ok;
} segs;

static int seg_add(segs *g, size_t start, size_t end, int match) {
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 16;
    seg *s = realloc(g->s, cap * sizeof *s);
    if (!s) return g->ok = 0;
    g->s = s, g->cap = cap;
  }
  g->s[g->n++] = (seg){start, end, match};
  return 1;
}

static int on_match(void *ctx, size_t start, size_t end) {
  segs *g = ctx;
  if (start > g->at && !seg_add(g, g->at, start, 0)) return 0;
  g->at = end;
  return seg_add(g, start, end, 1);
}

/* Adds the pieces of s[0..n) that g's matches and the behaviour make. */
static int split_by(const segs *g, tok_split_behavior how, int invert, const char *s, int first, tok_pieces *out) {
  size_t n = 0;
  seg *m = malloc((g->n ? g->n : 1) * sizeof *m);
  if (!m) return 0;
  int prev = 0;
  for (size_t i = 0; i < g->n; i++) {
    seg x = g->s[i];
    x.match ^= invert;
    switch (how) {
    case SPLIT_REMOVED:
      if (!x.match) m[n++] = x;
      break;
    case SPLIT_ISOLATED: m[n++] = x; break;
    case SPLIT_WITH_PREVIOUS:
      if (x.match && !prev && n) m[n - 1].end = x.end;
      else m[n++] = x;
      break;
    case SPLIT_CONTIGUOUS:
      if (x.match == prev && n) m[n - 1].end = x.end;
      else m[n++] = x;
      break;
    case SPLIT_WITH_NEXT: break; /* below, walking backwards */
    }
    prev = x.match;
  }
  if (how == SPLIT_WITH_NEXT) {
    prev = 0;
    for (size_t i = g->n; i-- > 0;) {
      seg x = g->s[i];
      x.match ^= invert;
      if (x.match && !prev && n) m[n - 1].start = x.start;
      else m[n++] = x;
      prev = x.match;
    }
    for (size_t i = 0; i < n / 2; i++) {
      seg x = m[i];
      m[i] = m[n - 1 - i], m[n - 1 - i] = x;
    }
  }
  int ok = 1;
  for (size_t i = 0; i < n && ok; i++)
    if (m[i].end > m[i].start) ok = tok_pieces_add(out, s + m[i].start, m[i].end - m[i].start, first && m[i].start == 0);
  free(m);
  return ok;
}

/* The segments of s[0..n) by re (the tokenizers library's find_matches). */
static dvm_status *find(const tok_re *re, pcre2_match_data *md, const char *s, size_t n, segs *g) {
  g->n = 0, g->at = 0, g->ok = 1;
  if (!tok_re_each(re, md, s, n, on_match, g))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "pre-tokenizer: the pattern failed to match (past its match limit)");
  if (!g->ok || (g->at < n && !seg_add(g, g->at, n, 0))) return tok_oom();
  return NULL;
}

/* s[0..n) with each ' ' made rep, after rep when `prefix`. */
static int metaspace(const char *s, size_t n, const char *rep, int prefix, tok_buf *b) {
  size_t r = strlen(rep);
  b->len = 0;
  if (prefix && !tok_buf_put(b, rep, r)) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == ' ' ? tok_buf_put(b, rep, r) : tok_buf_put(b, s + i, 1))) return 0;
  return 1;
}

static dvm_status *step(const tok_pre *k, pcre2_match_data *md, const char *s, size_t n, int first, segs *g,
                        tok_buf *tmp, tok_pieces *out) {
  dvm_status *st;
  switch (k->kind) {
  case TP_SPLIT:
    if ((st = find(&k->re, md, s, n, g))) return st;
    return split_by(g, k->behavior, k->invert, s, first, out) ? NULL : tok_oom();
  case TP_BYTELEVEL: {
    tmp->len = 0;
    if ((k->add_prefix_space && s[0] != ' ' && !tok_buf_put(tmp, " ", 1)) || !tok_buf_put(tmp, s, n)) return tok_oom();
    if (k->use_regex) {
      if ((st = find(&k->re, md, tmp->p, tmp->len, g))) return st;
    } else {
      g->n = 0;
      if (!seg_add(g, 0, tmp->len, 0)) return tok_oom();
    }
    /* each segment is a piece (Isolated), each of its bytes a printable character */
    tok_buf mapped = {0};
    int ok = 1;
    for (size_t i = 0; i < g->n && ok; i++) {
      seg x = g->s[i];
      mapped.len = 0;
      for (size_t j = x.start; j < x.end && ok; j++) {
        char c[2];
        ok = tok_buf_put(&mapped, c, tok_bytelevel_char((unsigned char)tmp->p[j], c));
      }
      if (ok && x.end > x.start) ok = tok_pieces_add(out, mapped.p, mapped.len, first && x.start == 0);
    }
    free(mapped.p);
    return ok ? NULL : tok_oom();
  }
  case TP_METASPACE: {
    const char *rep = k->rep;
    size_t r = strlen(rep);
    /* after ' ' becomes rep, as the tokenizers library checks it */
    int prefix = (k->prepend == PREPEND_ALWAYS || (k->prepend == PREPEND_FIRST && first)) && s[0] != ' ' &&
                 !(n >= r && memcmp(s, rep, r) == 0);
    if (!metaspace(s, n, rep, prefix, tmp)) return tok_oom();
    if (!k->split) return tok_pieces_add(out, tmp->p, tmp->len, first) ? NULL : tok_oom();
    g->n = 0, g->at = 0, g->ok = 1;
    for (const char *p = tmp->p, *end = tmp->p + tmp->len; (p = memmem(p, (size_t)(end - p), rep, r)); p += r)
      if (!on_match(g, (size_t)(p - tmp->p), (size_t)(p - tmp->p) + r)) return tok_oom();
    if (g->at < tmp->len && !seg_add(g, g->at, tmp->len, 0)) return tok_oom();
    return split_by(g, SPLIT_WITH_NEXT, 0, tmp->p, first, out) ? NULL : tok_oom();
  }
  }
  return dvm_status_new(DVM_INTERNAL, "pre-tokenizer step %d", (int)k->kind);
}

dvm_status *tok_pretokenize(const dvm_tokenizer *t, pcre2_match_data *md, const char *s, size_t n, int first,
                            tok_pieces *out) {
  out->n = 0, out->text.len = 0;
  if (!n) return NULL;
  if (!tok_pieces_add(out, s, n, first)) return tok_oom();
  tok_pieces next = {0};
  tok_buf tmp = {0};
  segs g = {0};
  dvm_status *st = NULL;
  for (size_t i = 0; i < t->n_pre && !st; i++) {
    next.n = 0, next.text.len = 0;
    for (size_t j = 0; j < out->n && !st; j++)
      st = step(&t->pre[i], md, out->text.p + out->s[j].off, out->s[j].len, out->s[j].first, &g, &tmp, &next);
    tok_pieces swap = *out;
    *out = next, next = swap;
  }
  free(next.text.p);
  free(next.s);
  free(tmp.p);
  free(g.s);
  return st;
}
