/* Memory planning: which top-level tensors share storage, one after
 * another.
 *
 * Lowering emits each top-level tensor whose byte size is an expression of
 * the symbols as an `alloc_tensor` (a site). The plan reads the finished
 * code: registers that alias (move, reshape, tuple, get, at, insert,
 * erase) form one class,
 * live from its site to the last instruction that names any of them, to
 * the end of any loop that names one. Sites in a loop and classes that
 * reach `ret` (results) keep their own allocation; the others, in code
 * order, take the slot of an input of the same size expression that dies
 * in the site's own call when that kernel allows it (in place), else join
 * the slot of a dead tensor of that size when nothing may allocate between
 * that death and the site, or start a new slot. A slot is one storage from
 * its first site to its last occupant's death, so at every allocation the
 * plan holds at most what allocating each tensor at its site and
 * returning it at its death would, and one tensor less at each call done
 * in place. */
#ifndef DVMC_PLAN_H
#define DVMC_PLAN_H

#include "expr.h"

typedef struct dvmc_plan_site {
  uint32_t word;          /* the site's alloc_tensor: its word offset */
  const dvmc_expr *bytes; /* the tensor's byte size */
  int slot;               /* out: its slot, or -1: its own allocation */
} dvmc_plan_site;

typedef struct dvmc_plan {
  int nslots;
  const dvmc_expr **size; /* per slot: its storage's bytes (malloc'ed) */
  int *first, *last;      /* per slot: the index of its first and last site (malloc'ed) */
  const dvmc_expr *peak;  /* the most bytes of sites live where one is made */
  const dvmc_expr *peak_bound; /* the same when the results alloc_result makes are bound (not the pool's) */
  int reused;             /* sites placed in a slot another site used before */
  int inplace;            /* of those, sites that took their own call's input's */
} dvmc_plan;

/* Whether kernel table entry `kernel` lets its output 0 take the memory of
 * an input (dvm_kernel_def.inplace). */
typedef int (*dvmc_plan_inplace_fn)(void *ctx, int64_t kernel);

/* Plans the sites (in code order) of the code words; inplace (NULL: never)
 * answers for kernels. *out is filled, free it with dvmc_plan_free. */
DVM_MUST_USE dvm_status *dvmc_plan_memory(dvmc_exprs *x, const int64_t *code, uint32_t ncode, dvmc_plan_site *sites,
                                          int nsites, dvmc_plan_inplace_fn inplace, void *ctx, dvmc_plan *out);
void dvmc_plan_free(dvmc_plan *p);

/* result_of[r] for each of the code's nregs registers: k when r is written
 * once and named once by the `ret` that ends the code (so a tensor its
 * alloc makes is result k's own, and alloc_result may take the caller's
 * instead), else -1. */
DVM_MUST_USE dvm_status *dvmc_plan_results(const int64_t *code, uint32_t ncode, int nregs, int *result_of);

#endif
