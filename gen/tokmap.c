/* The tokenizer's containers: growable strings and piece lists, and the
 * two open-addressing hash maps (token -> id, id pair -> merge). */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tokimpl.h"

int tok_buf_put(tok_buf *b, const void *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return 0;
    b->p = p, b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0; /* always a C string */
  return 1;
}

int tok_pieces_add(tok_pieces *p, const char *s, size_t n, int first) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 16;
    tok_span *a = realloc(p->s, cap * sizeof *a);
    if (!a) return 0;
    p->s = a, p->cap = cap;
  }
  p->s[p->n] = (tok_span){p->text.len, n, first};
  if (!tok_buf_put(&p->text, s, n)) return 0;
  p->n++;
  return 1;
}

struct tok_strslot {
  size_t off; /* into keys; the key's bytes */
  uint32_t len;
  int32_t v;  /* -1: empty slot */
};

static int strmap_grow(tok_strmap *m) {
  size_t cap = m->cap ? 2 * m->cap : 64;
  struct tok_strslot *s = malloc(cap * sizeof *s);
  if (!s) return 0;
  for (size_t i = 0; i < cap; i++) s[i].v = -1;
  for (size_t i = 0; i < m->cap; i++) {
    if (m->slot[i].v < 0) continue;
    size_t h = XXH3_64bits(m->keys.p + m->slot[i].off, m->slot[i].len) & (cap - 1);
    while (s[h].v >= 0) h = (h + 1) & (cap - 1);
    s[h] = m->slot[i];
  }
  free(m->slot);
  m->slot = s, m->cap = cap;
  return 1;
}

static size_t strmap_find(const tok_strmap *m, const char *s, size_t n) {
  size_t h = XXH3_64bits(s, n) & (m->cap - 1);
  while (m->slot[h].v >= 0 && !(m->slot[h].len == n && memcmp(m->keys.p + m->slot[h].off, s, n) == 0))
    h = (h + 1) & (m->cap - 1);
  return h;
}

int tok_strmap_put(tok_strmap *m, const char *s, size_t n, int32_t v) {
  if (n > UINT32_MAX) return 0;
  if (2 * (m->n + 1) > m->cap && !strmap_grow(m)) return 0;
  size_t h = strmap_find(m, s, n);
  if (m->slot[h].v < 0) {
    m->slot[h].off = m->keys.len, m->slot[h].len = (uint32_t)n;
    if (!tok_buf_put(&m->keys, s, n)) return 0;
    m->n++;
  }
  m->slot[h].v = v;
  return 1;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *s, size_t n) {
  return m->cap ? m->slot[strmap_find(m, s, n)].v : -1;
}

void tok_strmap_free(tok_strmap *m) {
  free(m->slot);
  free(m->keys.p);
}

struct tok_pairslot {
  uint64_t key;
  int32_t rank, id; /* rank -1: empty slot */
};

static size_t pair_hash(uint64_t key, size_t cap) { return (size_t)(XXH3_64bits(&key, sizeof key) & (cap - 1)); }

static int pairmap_grow(tok_pairmap *m) {
  size_t cap = m->cap ? 2 * m->cap : 64;
  struct tok_pairslot *s = malloc(cap * sizeof *s);
  if (!s) return 0;
  for (size_t i = 0; i < cap; i++) s[i].rank = -1;
  for (size_t i = 0; i < m->cap; i++) {
    if (m->slot[i].rank < 0) continue;
    size_t h = pair_hash(m->slot[i].key, cap);
    while (s[h].rank >= 0) h = (h + 1) & (cap - 1);
    s[h] = m->slot[i];
  }
  free(m->slot);
  m->slot = s, m->cap = cap;
  return 1;
}

static size_t pairmap_find(const tok_pairmap *m, uint64_t key) {
  size_t h = pair_hash(key, m->cap);
  while (m->slot[h].rank >= 0 && m->slot[h].key != key) h = (h + 1) & (m->cap - 1);
  return h;
}

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
  if (2 * (m->n + 1) > m->cap && !pairmap_grow(m)) return 0;
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t h = pairmap_find(m, key);
  if (m->slot[h].rank < 0) m->n++;
  m->slot[h] = (struct tok_pairslot){key, rank, id}; /* a later merge of the same pair wins, as in tokenizers */
  return 1;
}

int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
  if (!m->cap) return 0;
  const struct tok_pairslot *s = &m->slot[pairmap_find(m, (uint64_t)(uint32_t)a << 32 | (uint32_t)b)];
  if (s->rank < 0) return 0;
  *rank = s->rank, *id = s->id;
  return 1;
}

void tok_pairmap_free(tok_pairmap *m) { free(m->slot); }
