/* The blocks of a paged KV cache: reference counts, the free list (a
 * doubly linked list in the order blocks were freed) and the prefix index
 * (a chained hash table from a full block's hash to its id). */
#include <stdlib.h>
#include <string.h>

#include "kvblocks.h"

struct dvm_kv_blocks {
  int n, rows, nfree;
  int *refs;
  int *prev, *next;    /* the free list; -1 ends it */
  int head, tail;      /* oldest freed, newest freed */
  uint64_t *hash;      /* [n] a published block's hash */
  int *parent;         /* [n] its parent block (-1: first), -2: not published */
  int *chain, *bucket; /* [n] the next block in its bucket, [nbuckets] the first; -1 ends */
  uint64_t mask;       /* nbuckets - 1 */
  int32_t *ids;        /* [n * rows] a published block's ids */
};

dvm_status *dvm_kv_blocks_create(int n, int rows, dvm_kv_blocks **out) {
  if (n < 1 || rows < 1) return dvm_status_new(DVM_INVALID_ARGUMENT, "%d KV blocks of %d rows", n, rows);
  dvm_kv_blocks *kb = calloc(1, sizeof *kb);
  size_t nb = 1;
  while (nb < (size_t)n) nb *= 2;
  if (kb) {
    kb->refs = calloc((size_t)n * 5 + nb, sizeof *kb->refs);
    kb->hash = calloc((size_t)n, sizeof *kb->hash);
    kb->ids = calloc((size_t)n * (size_t)rows, sizeof *kb->ids);
  }
  if (!kb || !kb->refs || !kb->hash || !kb->ids) {
    dvm_kv_blocks_destroy(kb);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "%d KV blocks", n);
  }
  kb->n = kb->nfree = n, kb->rows = rows, kb->mask = nb - 1;
  kb->prev = kb->refs + n, kb->next = kb->prev + n, kb->parent = kb->next + n, kb->chain = kb->parent + n;
  kb->bucket = kb->chain + n;
  for (int i = 0; i < n; i++) kb->prev[i] = i - 1, kb->next[i] = i + 1 < n ? i + 1 : -1, kb->parent[i] = -2;
  for (size_t i = 0; i < nb; i++) kb->bucket[i] = -1;
  kb->head = 0, kb->tail = n - 1;
  *out = kb;
  return NULL;
}

void dvm_kv_blocks_destroy(dvm_kv_blocks *kb) {
  if (!kb) return;
  free(kb->refs);
  free(kb->hash);
  free(kb->ids);
  free(kb);
}

int dvm_kv_blocks_count(const dvm_kv_blocks *kb) { return kb->n; }
int dvm_kv_blocks_free(const dvm_kv_blocks *kb) { return kb->nfree; }
int dvm_kv_blocks_refs(const dvm_kv_blocks *kb, int id) { return kb->refs[id]; }

static void unlink_free(dvm_kv_blocks *kb, int id) {
  if (kb->prev[id] >= 0) kb->next[kb->prev[id]] = kb->next[id];
  else kb->head = kb->next[id];
  if (kb->next[id] >= 0) kb->prev[kb->next[id]] = kb->prev[id];
  else kb->tail = kb->prev[id];
  kb->nfree--;
}

/* Block id out of the prefix index. */
static void unpublish(dvm_kv_blocks *kb, int id) {
  if (kb->parent[id] == -2) return;
  int *p = &kb->bucket[kb->hash[id] & kb->mask];
  while (*p != id) p = &kb->chain[*p];
  *p = kb->chain[id];
  kb->parent[id] = -2;
}

int dvm_kv_blocks_take(dvm_kv_blocks *kb) {
  int id = kb->head;
  if (id < 0) return -1;
  unlink_free(kb, id);
  unpublish(kb, id);
  kb->refs[id] = 1;
  return id;
}

void dvm_kv_blocks_retain(dvm_kv_blocks *kb, int id) {
  if (kb->refs[id]++ == 0) unlink_free(kb, id);
}

void dvm_kv_blocks_release(dvm_kv_blocks *kb, int id) {
  if (--kb->refs[id] > 0) return;
  kb->prev[id] = kb->tail, kb->next[id] = -1;
  if (kb->tail >= 0) kb->next[kb->tail] = id;
  else kb->head = id;
  kb->tail = id;
  kb->nfree++;
}

uint64_t dvm_kv_blocks_hash(uint64_t parent, const int32_t *ids, int rows) {
  uint64_t h = parent ^ 0x9e3779b97f4a7c15u;
  for (int i = 0; i < rows; i++) { /* splitmix64's finalizer over each id */
    h += (uint64_t)(uint32_t)ids[i] + 0x9e3779b97f4a7c15u;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
    h ^= h >> 31;
  }
  return h;
}

int dvm_kv_blocks_find(const dvm_kv_blocks *kb, uint64_t hash, int parent_id, const int32_t *ids) {
  for (int id = kb->bucket[hash & kb->mask]; id >= 0; id = kb->chain[id])
    if (kb->hash[id] == hash && kb->parent[id] == parent_id &&
        memcmp(kb->ids + (size_t)id * kb->rows, ids, (size_t)kb->rows * sizeof *ids) == 0)
      return id;
  return -1;
}

void dvm_kv_blocks_publish(dvm_kv_blocks *kb, int id, uint64_t hash, int parent_id, const int32_t *ids) {
  if (kb->parent[id] != -2 || dvm_kv_blocks_find(kb, hash, parent_id, ids) >= 0) return;
  kb->hash[id] = hash, kb->parent[id] = parent_id;
  memcpy(kb->ids + (size_t)id * kb->rows, ids, (size_t)kb->rows * sizeof *ids);
  uint64_t b = hash & kb->mask;
  kb->chain[id] = kb->bucket[b];
  kb->bucket[b] = id;
}
