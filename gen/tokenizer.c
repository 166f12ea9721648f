/* The tokenizer (dvm/tokenizer.h): the encoding pipeline of the tokenizers
 * library (added tokens first, then normalizer, pre-tokenizer and BPE on
 * the text between them, then the post-processor's template), decoding,
 * and the stream that decodes token by token. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "tokimpl.h"

dvm_status *dvm_tokenizer_load_json(const char *json, size_t len, const char *name, dvm_tokenizer **out) {
  *out = NULL;
  dvm_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return tok_oom();
  dvm_status *st = tok_load(json, len, name, t);
  if (st) {
    dvm_tokenizer_free(t);
    return st;
  }
  *out = t;
  return NULL;
}

dvm_status *dvm_tokenizer_load(const char *path, dvm_tokenizer **out) {
  *out = NULL;
  struct stat sb;
  char file[4096];
  int dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
  if (snprintf(file, sizeof file, dir ? "%s/tokenizer.json" : "%s", path) >= (int)sizeof file)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: path too long", path);
  FILE *f = fopen(file, "rb");
  if (!f) return dvm_status_new(errno == ENOENT ? DVM_NOT_FOUND : DVM_IO, "%s: %s", file, strerror(errno));
  tok_buf b = {0};
  char chunk[65536];
  size_t n;
  int ok = 1;
  while (ok && (n = fread(chunk, 1, sizeof chunk, f)) > 0) ok = tok_buf_put(&b, chunk, n);
  int err = ferror(f);
  fclose(f);
  dvm_status *st = !ok ? tok_oom() : err ? dvm_status_new(DVM_IO, "%s: read failed", file)
                                     : dvm_tokenizer_load_json(b.p ? b.p : "", b.len, file, out);
  free(b.p);
  return st;
}

void dvm_tokenizer_free(dvm_tokenizer *t) {
  if (!t) return;
  tok_clear(t);
  free(t);
}

int32_t dvm_tokenizer_token_id(const dvm_tokenizer *t, const char *token) {
  for (size_t i = 0; i < t->n_added; i++)
    if (strcmp(t->added[i].content, token) == 0) return t->added[i].id;
  return tok_strmap_get(&t->vocab, token, strlen(token));
}

/* Unicode's White_Space and Rust regex's \w, for the added tokens' lstrip,
 * rstrip and single_word. */
static int is_space(int32_t c) {
  return (c >= 9 && c <= 13) || c == 0x85 ||
         (c > 0x7F && (utf8proc_category(c) == UTF8PROC_CATEGORY_ZS || c == 0x2028 || c == 0x2029)) || c == ' ';
}

static int is_word(int32_t c) {
  utf8proc_category_t k = utf8proc_category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
         k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

static int32_t cp_at(const char *s, size_t n, size_t *len) { /* the character at s */
  utf8proc_int32_t c;
  utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
  *len = l > 0 ? (size_t)l : 1;
  return l > 0 ? c : -1;
}

static int32_t cp_before(const char *s, size_t end, size_t *len) { /* the character that ends at s + end */
  size_t i = end;
  while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
  if (i > 0) i--;
  return cp_at(s + i, end - i, len);
}

/* A piece of the text between added tokens, or an added token's id. */
typedef struct {
  size_t start, end;
  int32_t id; /* -1: text */
} part;

typedef struct {
  part *p;
  size_t n, cap;
} parts;

static int part_add(parts *ps, size_t start, size_t end, int32_t id) {
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? 2 * ps->cap : 16;
    part *p = realloc(ps->p, cap * sizeof *p);
    if (!p) return 0;
    ps->p = p, ps->cap = cap;
  }
  ps->p[ps->n++] = (part){start, end, id};
  return 1;
}

/* The added tokens (normalized or not) in s, leftmost first and the
 * longest there, as the tokenizers library's find_matches, with the
 * text between them. */
static int find_added(const dvm_tokenizer *t, int normalized, const char *s, size_t n, parts *out) {
  out->n = 0;
  unsigned char firsts[256] = {0};
  for (size_t k = 0; k < t->n_added; k++)
    if (t->added[k].normalized == normalized) firsts[(unsigned char)t->added[k].match[0]] = 1;
  size_t done = 0; /* the text is split up to here */
  for (size_t at = 0; at < n;) {
    const tok_added *best = NULL;
    if (firsts[(unsigned char)s[at]])
      for (size_t k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if (a->normalized == normalized && a->match_len <= n - at && (!best || a->match_len > best->match_len) &&
            memcmp(s + at, a->match, a->match_len) == 0)
          best = a;
      }
    size_t start = at, stop = best ? at + best->match_len : at, l;
    if (best && best->single_word &&
        ((start > 0 && is_word(cp_before(s, start, &l))) || (stop < n && is_word(cp_at(s + stop, n - stop, &l)))))
      best = NULL;
    if (!best) {
      at++;
      continue;
    }
    if (best->lstrip)
      while (start > done && is_space(cp_before(s, start, &l))) start -= l;
    if (best->rstrip)
      while (stop < n && is_space(cp_at(s + stop, n - stop, &l))) stop += l;
    if ((done < start && !part_add(out, done, start, -1)) || !part_add(out, start, stop, best->id)) return 0;
    done = at = stop;
  }
  return done == n || part_add(out, done, n, -1);
}

typedef struct {
  int32_t *ids;
  size_t n, cap;
} idlist;

static dvm_status *push_id(idlist *l, int32_t id) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    int32_t *p = realloc(l->ids, cap * sizeof *p);
    if (!p) return tok_oom();
    l->ids = p, l->cap = cap;
  }
  l->ids[l->n++] = id;
  return NULL;
}

/* The ids of one piece of text between non-normalized added tokens. */
static dvm_status *encode_piece(const dvm_tokenizer *t, pcre2_match_data *md, const char *s, size_t n, int first,
                                tok_buf *norm, parts *sub, tok_pieces *words, idlist *out) {
  dvm_status *st = tok_normalize(t, md, s, n, norm);
  if (st) return st;
  if (!find_added(t, 1, norm->p, norm->len, sub)) return tok_oom();
  for (size_t i = 0; i < sub->n && !st; i++) {
    part p = sub->p[i];
    if (p.id >= 0) {
      st = push_id(out, p.id);
      continue;
    }
    st = tok_pretokenize(t, md, norm->p + p.start, p.end - p.start, first && p.start == 0, words);
    for (size_t w = 0; w < words->n && !st; w++)
      st = tok_bpe(t, words->text.p + words->s[w].off, words->s[w].len, &out->ids, &out->n, &out->cap);
  }
  return st;
}

dvm_status *dvm_tokenizer_encode(const dvm_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                                 size_t *n) {
  *ids = NULL, *n = 0;
  for (size_t i = 0; i < len;) {
    size_t c = tok_utf8_char((const unsigned char *)text + i, len - i);
    if (!c) return dvm_status_new(DVM_INVALID_ARGUMENT, "text: byte %zu (0x%02X) is not valid UTF-8", i, (unsigned char)text[i]);
    i += c;
  }
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  parts top = {0}, sub = {0};
  tok_buf norm = {0};
  tok_pieces words = {0};
  idlist body = {0}, all = {0};
  dvm_status *st = md ? NULL : tok_oom();
  if (!st && !find_added(t, 0, text, len, &top)) st = tok_oom();
  for (size_t i = 0; i < top.n && !st; i++) {
    part p = top.p[i];
    st = p.id >= 0 ? push_id(&body, p.id)
                   : encode_piece(t, md, text + p.start, p.end - p.start, p.start == 0, &norm, &sub, &words, &body);
  }
  if (!add_special || !t->n_tmpl) {
    all = body, body = (idlist){0};
  } else {
    for (size_t i = 0; i < t->n_tmpl && !st; i++)
      if (t->tmpl[i] != TEMPLATE_SEQ) st = push_id(&all, t->tmpl[i]);
      else
        for (size_t k = 0; k < body.n && !st; k++) st = push_id(&all, body.ids[k]);
  }
  if (!st && !all.ids && !(all.ids = malloc(sizeof *all.ids))) st = tok_oom();
  if (!st) *ids = all.ids, *n = all.n;
  else free(all.ids);
  pcre2_match_data_free(md);
  free(top.p), free(sub.p), free(norm.p), free(words.text.p), free(words.s), free(body.ids);
  return st;
}

/* The added token with this id, or NULL. */
static const tok_added *added_by_id(const dvm_tokenizer *t, int32_t id) {
  for (size_t i = 0; i < t->n_added; i++)
    if (t->added[i].id == id) return &t->added[i];
  return NULL;
}

static dvm_status *decode_into(const dvm_tokenizer *t, pcre2_match_data *md, const int32_t *ids, size_t n,
                               int skip_special, tok_buf *out) {
  const char **tokens = malloc((n ? n : 1) * sizeof *tokens);
  if (!tokens) return tok_oom();
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const tok_added *a = t->n_added ? added_by_id(t, ids[i]) : NULL;
    if (a && !(skip_special && a->special)) tokens[k++] = a->content;
    else if (!a && ids[i] >= 0 && ids[i] < t->n_ids && t->id_token[ids[i]]) tokens[k++] = t->id_token[ids[i]];
  }
  dvm_status *st = tok_decode_tokens(t, md, tokens, k, out);
  free(tokens);
  return st;
}

dvm_status *dvm_tokenizer_decode(const dvm_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                                 size_t *len) {
  *text = NULL, *len = 0;
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  if (!md) return tok_oom();
  tok_buf out = {0};
  dvm_status *st = decode_into(t, md, ids, n, skip_special, &out);
  pcre2_match_data_free(md);
  if (st) {
    free(out.p);
    return st;
  }
  *text = out.p, *len = out.len;
  return NULL;
}

struct dvm_tokenizer_stream {
  const dvm_tokenizer *t;
  int skip_special;
  pcre2_match_data *md;
  idlist ids;
  size_t prefix, read; /* decoding starts at ids[prefix]; text up to ids[read] has been given */
  tok_buf before, now, piece;
};

dvm_status *dvm_tokenizer_stream_create(const dvm_tokenizer *t, int skip_special, dvm_tokenizer_stream **out) {
  dvm_tokenizer_stream *s = calloc(1, sizeof *s);
  if (!s || !(s->md = pcre2_match_data_create(1, NULL))) {
    free(s);
    return tok_oom();
  }
  s->t = t, s->skip_special = skip_special;
  *out = s;
  return NULL;
}

/* The text is the difference of two decodes a few tokens back, so that
 * decoders that treat a word's first piece differently (SentencePiece's
 * leading space) read it in context, as the tokenizers library's
 * DecodeStream does. */
/* The text ids[prefix..] adds to ids[prefix..read), or nothing while it
 * ends in an incomplete character (unless `all`). */
static dvm_status *stream_text(dvm_tokenizer_stream *s, int all, const char **text, size_t *len) {
  *text = "", *len = 0;
  dvm_status *st = decode_into(s->t, s->md, s->ids.ids + s->prefix, s->read - s->prefix, s->skip_special, &s->before);
  if (!st) st = decode_into(s->t, s->md, s->ids.ids + s->prefix, s->ids.n - s->prefix, s->skip_special, &s->now);
  if (st) return st;
  if (s->now.len <= s->before.len ||
      (!all && s->now.len >= 3 && memcmp(s->now.p + s->now.len - 3, "\xEF\xBF\xBD", 3) == 0))
    return NULL; /* an incomplete character, or a token that writes nothing */
  size_t from = s->before.len;
  while (from < s->now.len && ((unsigned char)s->now.p[from] & 0xC0) == 0x80) from++; /* a character's start */
  s->piece.len = 0;
  if (!tok_buf_put(&s->piece, s->now.p + from, s->now.len - from)) return tok_oom();
  s->prefix = s->read, s->read = s->ids.n;
  *text = s->piece.p, *len = s->piece.len;
  return NULL;
}

/* The text is the difference of two decodes a few tokens back, so that
 * decoders that treat a word's first piece differently (SentencePiece's
 * leading space) read it in context, as the tokenizers library's
 * DecodeStream does. */
dvm_status *dvm_tokenizer_stream_put(dvm_tokenizer_stream *s, int32_t id, const char **text, size_t *len) {
  *text = "", *len = 0;
  dvm_status *st = push_id(&s->ids, id);
  return st ? st : stream_text(s, 0, text, len);
}

dvm_status *dvm_tokenizer_stream_finish(dvm_tokenizer_stream *s, const char **text, size_t *len) {
  return stream_text(s, 1, text, len);
}

void dvm_tokenizer_stream_free(dvm_tokenizer_stream *s) {
  if (!s) return;
  pcre2_match_data_free(s->md);
  free(s->ids.ids), free(s->before.p), free(s->now.p), free(s->piece.p);
  free(s);
}
