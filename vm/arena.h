/* A bump allocator for module metadata: everything is freed at once. */
#ifndef DVM_ARENA_H
#define DVM_ARENA_H

#include <stddef.h>

typedef struct dvm_arena_block dvm_arena_block;

typedef struct dvm_arena {
  dvm_arena_block *head;
  size_t used, cap;
} dvm_arena;

/* Zeroed memory aligned to 16, or NULL when out of memory or on overflow of
 * n * size. */
void *dvm_arena_alloc(dvm_arena *a, size_t n, size_t size);
char *dvm_arena_strdup(dvm_arena *a, const char *s);
void dvm_arena_free(dvm_arena *a);

#endif
