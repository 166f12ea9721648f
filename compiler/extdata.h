/* The model's external data files as the compiler sees them: each mapped
 * once, read-only, so that weights the compiler only passes through are
 * never copied, and a constant whose bytes still lie in a file can be
 * written as a reference to them (section external, docs/bytecode.md 3.9). */
#ifndef DVMC_EXTDATA_H
#define DVMC_EXTDATA_H

#include "ir.h"

/* The bytes of the file `path` (which fd has open, `size` bytes): mapped
 * on first use, unmapped with the context. */
DVM_MUST_USE dvm_status *dvmc_extdata_map(dvmc_ctx *c, const char *path, int fd, size_t size,
                                          const uint8_t **out);

/* Whether t's bytes lie in one of c's mapped files at a 64-byte aligned
 * offset, in a file inside folder `dir` (the .dvmb's): then *path is its
 * path relative to dir and *offset where the bytes start. */
bool dvmc_extdata_find(dvmc_ctx *c, const char *dir, const dvmc_tensor *t, const char **path,
                       uint64_t *offset);

/* The XXH3-64 of t's bytes, which dvmc_extdata_find found in a file; the
 * whole pages among them are given back to the file. */
uint64_t dvmc_extdata_hash(const dvmc_tensor *t);

void dvmc_extdata_unmap(dvmc_ctx *c);

#endif
