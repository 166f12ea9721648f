/* The BPE model: a word's characters become vocabulary ids (or their bytes'
 * <0xXX> tokens with byte_fallback, or unk_token), then adjacent pairs are
 * merged, the lowest-ranked merge first and the leftmost of equal ranks,
 * until no pair has a merge. The queue holds candidates that later merges
 * may make stale; a candidate is used only if its pair still makes the
 * same token, as the tokenizers library checks. */
#include <stdlib.h>

#include "tokimpl.h"

typedef struct {
  int32_t id, prev, next; /* prev/next: neighbours, -1 at the ends */
  int gone;               /* merged into its left neighbour */
} sym;

typedef struct {
  int32_t rank, pos, id;
} cand;

static int before(cand a, cand b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

typedef struct {
  cand *c;
  size_t n, cap;
} heap;

static int heap_push(heap *h, cand x) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 16;
    cand *c = realloc(h->c, cap * sizeof *c);
    if (!c) return 0;
    h->c = c, h->cap = cap;
  }
  size_t i = h->n++;
  for (; i && before(x, h->c[(i - 1) / 2]); i = (i - 1) / 2) h->c[i] = h->c[(i - 1) / 2];
  h->c[i] = x;
  return 1;
}

static cand heap_pop(heap *h) {
  cand top = h->c[0], x = h->c[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, m = l + 1 < h->n && before(h->c[l + 1], h->c[l]) ? l + 1 : l;
    if (l >= h->n || !before(h->c[m], x)) break;
    h->c[i] = h->c[m], i = m;
  }
  if (h->n) h->c[i] = x;
  return top;
}

typedef struct {
  sym *s;
  size_t n, cap;
} word;

static int word_add(word *w, int32_t id) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 16;
    sym *s = realloc(w->s, cap * sizeof *s);
    if (!s) return 0;
    w->s = s, w->cap = cap;
  }
  w->s[w->n] = (sym){id, (int32_t)w->n - 1, -1, 0};
  if (w->n) w->s[w->n - 1].next = (int32_t)w->n;
  w->n++;
  return 1;
}

/* The word's symbols before merging (the tokenizers library's merge_word). */
static dvm_status *symbols(const dvm_tokenizer *t, const char *s, size_t n, word *w) {
  int32_t unk = -1; /* an unknown character waiting to be added (fuse_unk joins a run of them) */
  for (size_t i = 0; i < n;) {
    size_t c = tok_utf8_char((const unsigned char *)s + i, n - i);
    if (!c) c = 1; /* not reached: the text is valid UTF-8 */
    int32_t id = tok_strmap_get(&t->vocab, s + i, c);
    if (id >= 0) {
      if (unk >= 0 && !word_add(w, unk)) return tok_oom();
      unk = -1;
      if (!word_add(w, id)) return tok_oom();
      i += c;
      continue;
    }
    if (t->byte_fallback) {
      size_t j = 0;
      while (j < c && t->byte_id[(unsigned char)s[i + j]] >= 0) j++;
      if (j == c) { /* as in tokenizers, a waiting unk comes after these */
        for (j = 0; j < c; j++)
          if (!word_add(w, t->byte_id[(unsigned char)s[i + j]])) return tok_oom();
        i += c;
        continue;
      }
    }
    if (t->unk_name) return dvm_status_new(DVM_INVALID_ARGUMENT, "unk_token \"%s\" is not in the vocabulary", t->unk_name);
    if (t->unk >= 0) {
      if (unk >= 0 && !t->fuse_unk && !word_add(w, unk)) return tok_oom();
      unk = t->unk;
    } /* without unk_token the character is left out, as in tokenizers */
    i += c;
  }
  if (unk >= 0 && !word_add(w, unk)) return tok_oom();
  return NULL;
}

static int push_pair(const dvm_tokenizer *t, heap *h, const word *w, int32_t pos) {
  int32_t rank, id, next = w->s[pos].next;
  if (next < 0 || !tok_pairmap_get(&t->merges, w->s[pos].id, w->s[next].id, &rank, &id)) return 1;
  return heap_push(h, (cand){rank, pos, id});
}

dvm_status *tok_bpe(const dvm_tokenizer *t, const char *s, size_t n, int32_t **ids, size_t *n_ids, size_t *cap) {
  int32_t whole = t->ignore_merges ? tok_strmap_get(&t->vocab, s, n) : -1;
  word w = {0};
  heap h = {0};
  dvm_status *st = NULL;
  if (whole >= 0) {
    if (!word_add(&w, whole)) st = tok_oom();
  } else {
    st = symbols(t, s, n, &w);
    for (size_t i = 0; !st && i + 1 < w.n; i++)
      if (!push_pair(t, &h, &w, (int32_t)i)) st = tok_oom();
    while (!st && h.n) {
      cand c = heap_pop(&h);
      sym *a = &w.s[c.pos];
      int32_t rank, id;
      if (a->gone || a->next < 0 || !tok_pairmap_get(&t->merges, a->id, w.s[a->next].id, &rank, &id) || id != c.id)
        continue;
      sym *b = &w.s[a->next];
      b->gone = 1;
      a->id = c.id, a->next = b->next;
      if (b->next >= 0) w.s[b->next].prev = c.pos;
      if ((a->prev >= 0 && !push_pair(t, &h, &w, a->prev)) || !push_pair(t, &h, &w, c.pos)) st = tok_oom();
    }
  }
  for (int32_t i = w.n ? 0 : -1; !st && i >= 0; i = w.s[i].next) {
    if (*n_ids == *cap) {
      size_t nc = *cap ? 2 * *cap : 64;
      int32_t *p = realloc(*ids, nc * sizeof *p);
      if (!p) {
        st = tok_oom();
        break;
      }
      *ids = p, *cap = nc;
    }
    (*ids)[(*n_ids)++] = w.s[i].id;
  }
  free(w.s);
  free(h.c);
  return st;
}
