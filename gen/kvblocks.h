/* The blocks of a paged KV cache (kvblocks.c): ids 0 to n - 1, each with a
 * reference count (the sequences whose block tables hold it). A block
 * whose count falls to 0 is free; free blocks are taken again oldest
 * freed first, and until then a full one keeps the prefix it holds, so a
 * later prompt with that prefix finds it (vLLM's prefix cache). A full
 * block is known by a hash of the token ids up to its end (its parent's
 * hash and its own ids); a hit is checked against its ids and its parent
 * block, never trusted on the hash alone. */
#ifndef DVM_KVBLOCKS_H
#define DVM_KVBLOCKS_H

#include <stdint.h>

#include "dvm/status.h"

typedef struct dvm_kv_blocks dvm_kv_blocks;

/* n blocks of `rows` token rows each. */
DVM_MUST_USE dvm_status *dvm_kv_blocks_create(int n, int rows, dvm_kv_blocks **out);
void dvm_kv_blocks_destroy(dvm_kv_blocks *kb); /* NULL is fine */

int dvm_kv_blocks_count(const dvm_kv_blocks *kb); /* n */
int dvm_kv_blocks_free(const dvm_kv_blocks *kb);  /* those with no reference */
int dvm_kv_blocks_refs(const dvm_kv_blocks *kb, int id);

/* A free block for new rows (one reference; it forgets its prefix), or
 * -1 when none is free. */
int dvm_kv_blocks_take(dvm_kv_blocks *kb);
/* One reference more (a free block leaves the free list), or one less. */
void dvm_kv_blocks_retain(dvm_kv_blocks *kb, int id);
void dvm_kv_blocks_release(dvm_kv_blocks *kb, int id);

/* The hash of a full block's `rows` ids after the prefix hashed `parent`
 * (0 for the first block). */
uint64_t dvm_kv_blocks_hash(uint64_t parent, const int32_t *ids, int rows);
/* The block that holds ids after parent block `parent_id` (-1: the first
 * block) under `hash`, or -1. */
int dvm_kv_blocks_find(const dvm_kv_blocks *kb, uint64_t hash, int parent_id, const int32_t *ids);
/* Block id, full now with ids after parent_id, is found under hash from now
 * on (unless another block already is: the first stays). */
void dvm_kv_blocks_publish(dvm_kv_blocks *kb, int id, uint64_t hash, int parent_id, const int32_t *ids);

#endif
