/* The caching allocator: one pool per device per VM.
 *
 * Blocks are rounded up to size classes (four per power of two) and kept on
 * free lists when released, so steady-state invocations allocate nothing from
 * the system; results are blocks of their exact size, kept apart. A
 * storage returns to its pool when its last reference goes, from whatever
 * thread that happens on, so the pool has a lock; the pool lives until the
 * VM and every storage it handed out are gone. */
#ifndef DVM_POOL_H
#define DVM_POOL_H

#include "dvm/vm.h"
#include "object.h"

typedef struct dvm_device dvm_device;

#define DVM_POOL_MAX_ALIGN 256

DVM_MUST_USE dvm_status *dvm_pool_create(const dvm_device *dev, size_t limit, dvm_pool **out);
/* Drops the owner's reference; cached blocks are freed now, blocks still in
 * use when their storages are released. */
void dvm_pool_destroy(dvm_pool *p);

/* A storage of at least `size` bytes aligned to `align` (a power of two, at
 * most DVM_POOL_MAX_ALIGN). Fails with DVM_RESOURCE_EXHAUSTED past the limit, after
 * freeing cached blocks to make room. */
DVM_MUST_USE dvm_status *dvm_pool_alloc(dvm_pool *p, size_t size, size_t align,
                                        dvm_storage **out);
/* A storage of exactly `size` bytes, for a function's result (the memory
 * plan counts results at their size, so this is what keeps the pool's
 * peak at the plan's). Exact blocks are cached apart from the classes: the
 * smallest cached one at least `size` is reused; one over twice the size
 * that served 16 requests in a row is given back for one of the size
 * asked; a miss frees the cached exact blocks it outgrew and, when there
 * were some, takes its size class instead, so that results that grow
 * miss once a class, not every time. */
DVM_MUST_USE dvm_status *dvm_pool_alloc_exact(dvm_pool *p, size_t size, size_t align, dvm_storage **out);
void dvm_pool_get_stats(dvm_pool *p, dvm_pool_stats *out);
/* An invocation begins: blocks handed out in it or in the one before are
 * its working set, which the CPU pool's bound does not free. */
void dvm_pool_begin(dvm_pool *p);
/* Frees all cached blocks. */
void dvm_pool_trim(dvm_pool *p);

/* Called by dvm_storage_release. */
void dvm_pool_return(dvm_storage *s);

#endif
