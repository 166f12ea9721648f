/* The paged KV cache's block pool (gen/kvblocks.c): reference counts, the
 * free list's order, the prefix index (a hit needs the same ids and parent,
 * not only the hash), and freed blocks found again until taken. */
#include "gen/kvblocks.h"
#include "harness.h"

int main(void) {
  dvm_kv_blocks *kb;
  CHECK_ERR(dvm_kv_blocks_create(0, 4, &kb), DVM_INVALID_ARGUMENT, "0 KV blocks");
  CHECK_OK(dvm_kv_blocks_create(3, 4, &kb));
  const int32_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 2, 3, 5};
  int x = dvm_kv_blocks_take(kb), y = dvm_kv_blocks_take(kb), z = dvm_kv_blocks_take(kb);
  CHECK(x == 0 && y == 1 && z == 2 && dvm_kv_blocks_free(kb) == 0);
  CHECK(dvm_kv_blocks_take(kb) == -1); /* none free */

  uint64_t ha = dvm_kv_blocks_hash(0, a, 4), hb = dvm_kv_blocks_hash(ha, b, 4);
  CHECK(ha != dvm_kv_blocks_hash(0, c, 4) && hb != dvm_kv_blocks_hash(0, b, 4)); /* the prefix counts */
  dvm_kv_blocks_publish(kb, x, ha, -1, a);
  dvm_kv_blocks_publish(kb, y, hb, x, b);
  CHECK(dvm_kv_blocks_find(kb, ha, -1, a) == x && dvm_kv_blocks_find(kb, hb, x, b) == y);
  CHECK(dvm_kv_blocks_find(kb, ha, -1, c) == -1); /* same hash, other ids */
  CHECK(dvm_kv_blocks_find(kb, hb, z, b) == -1);  /* other parent */
  dvm_kv_blocks_publish(kb, z, ha, -1, a);        /* a second block of the same prefix: the first stays */
  CHECK(dvm_kv_blocks_find(kb, ha, -1, a) == x);

  /* shared: a second reference; freed only when both go */
  dvm_kv_blocks_retain(kb, x);
  CHECK(dvm_kv_blocks_refs(kb, x) == 2);
  dvm_kv_blocks_release(kb, x);
  CHECK(dvm_kv_blocks_free(kb) == 0 && dvm_kv_blocks_refs(kb, x) == 1);
  dvm_kv_blocks_release(kb, y);
  dvm_kv_blocks_release(kb, x);
  dvm_kv_blocks_release(kb, z);
  CHECK(dvm_kv_blocks_free(kb) == 3);

  /* freed blocks keep their prefix: found again, a hit leaves the free list */
  CHECK(dvm_kv_blocks_find(kb, ha, -1, a) == x);
  dvm_kv_blocks_retain(kb, x);
  CHECK(dvm_kv_blocks_free(kb) == 2 && dvm_kv_blocks_refs(kb, x) == 1);
  /* taken oldest freed first (y, then z), and a taken block forgets its prefix */
  CHECK(dvm_kv_blocks_take(kb) == y && dvm_kv_blocks_find(kb, hb, x, b) == -1);
  CHECK(dvm_kv_blocks_take(kb) == z && dvm_kv_blocks_take(kb) == -1);
  dvm_kv_blocks_release(kb, x);
  CHECK(dvm_kv_blocks_take(kb) == x && dvm_kv_blocks_find(kb, ha, -1, a) == -1);
  dvm_kv_blocks_destroy(kb);

  /* many blocks through one bucket chain and back: every one found, then none */
  CHECK_OK(dvm_kv_blocks_create(64, 1, &kb));
  for (int32_t i = 0; i < 64; i++) {
    int id = dvm_kv_blocks_take(kb);
    dvm_kv_blocks_publish(kb, id, (uint64_t)i * 64, -1, &i); /* hashes that share a bucket */
  }
  int found = 0;
  for (int32_t i = 0; i < 64; i++) found += dvm_kv_blocks_find(kb, (uint64_t)i * 64, -1, &i) == i;
  CHECK(found == 64);
  for (int i = 0; i < 64; i++) dvm_kv_blocks_release(kb, i);
  int in_order = 0;
  for (int i = 0; i < 64; i++) in_order += dvm_kv_blocks_take(kb) == i;
  CHECK(in_order == 64);
  found = 0;
  for (int32_t i = 0; i < 64; i++) found += dvm_kv_blocks_find(kb, (uint64_t)i * 64, -1, &i) >= 0;
  CHECK(found == 0);
  dvm_kv_blocks_destroy(kb);
  return harness_finish("kvblocks");
}
