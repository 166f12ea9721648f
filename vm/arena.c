/* A bump allocator (see arena.h). */
#include <stdlib.h>
#include <string.h>

#include "arena.h"

struct dvm_arena_block {
  dvm_arena_block *next;
  _Alignas(16) unsigned char data[];
};

void *dvm_arena_alloc(dvm_arena *a, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes) || bytes > ((size_t)1 << 48)) return NULL;
  bytes = (bytes + 15) & ~(size_t)15;
  if (!a->head || a->cap - a->used < bytes) {
    size_t cap = bytes > 65536 ? bytes : 65536;
    dvm_arena_block *b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = a->head;
    a->head = b;
    a->used = 0;
    a->cap = cap;
  }
  void *p = a->head->data + a->used;
  a->used += bytes;
  memset(p, 0, bytes);
  return p;
}

char *dvm_arena_strdup(dvm_arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = dvm_arena_alloc(a, n, 1);
  if (d) memcpy(d, s, n);
  return d;
}

void dvm_arena_free(dvm_arena *a) {
  while (a->head) {
    dvm_arena_block *b = a->head;
    a->head = b->next;
    free(b);
  }
  a->used = a->cap = 0;
}
