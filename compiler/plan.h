/* Memory planning: which top-level tensors share one arena per invocation,
 * and at what offsets.
 *
 * Lowering emits each top-level tensor whose byte size is an expression of
 * the symbols as an `alloc_tensor` in the arena register (a site). The plan
 * reads the finished code: registers that alias (move, reshape, tuple,
 * get) form one class, live from its site to the last instruction that
 * names any of them, to the end of any loop that names one. Sites in a
 * loop and classes that reach `ret` (results) keep their own allocation;
 * the others take, in code order, a slot whose occupant is dead and whose
 * size is provably >= theirs (equal expressions first), or a new slot at
 * the end of the arena. Offsets are multiples of 64. */
#ifndef DVMC_PLAN_H
#define DVMC_PLAN_H

#include "expr.h"

typedef struct dvmc_plan_site {
  uint32_t word;          /* the site's alloc_tensor: its word offset */
  const dvmc_expr *bytes; /* the tensor's byte size */
  int slot;               /* out: its arena slot, or -1: its own allocation */
} dvmc_plan_site;

typedef struct dvmc_plan {
  int nslots;
  const dvmc_expr **offset; /* per slot (malloc'ed) */
  const dvmc_expr *arena;   /* the arena's bytes */
  const dvmc_expr *peak;    /* arena + the sites outside it */
  int reused;               /* sites placed in a slot another site used before */
} dvmc_plan;

/* Plans the sites (in code order) of the code words; *out is filled, free
 * it with dvmc_plan_free. */
DVM_MUST_USE dvm_status *dvmc_plan_memory(dvmc_exprs *x, const int64_t *code, uint32_t ncode, dvmc_plan_site *sites,
                                          int nsites, dvmc_plan *out);
void dvmc_plan_free(dvmc_plan *p);

#endif
