/* Symbolic shape inference: each value's dtype, rank and dims as canonical
 * expressions over the input symbols, and the contents of small integer
 * tensors (the Shape -> Gather -> Concat chains of exported models) as
 * expressions too. A dim only the run time knows (NonZero's count) is a
 * fresh symbol that lowering reads from the node's output. What cannot be
 * known stays unknown (NULL dims, rank -1):
 * lowering then asks the kernel's shape function at run time, so inference
 * only ever makes code faster, never wrong; kernels still check every shape
 * they are given. */
#ifndef DVMC_INFER_H
#define DVMC_INFER_H

#include "ir.h"

/* Infers g and its subgraphs in place, collecting on g the relations among
 * dims that its top-level broadcasts imply (ir.h). Input symbols that a
 * relation says are equal are unified: the later is replaced by the earlier
 * in g's inputs, and inference runs again. Fails when out of memory or when
 * unified symbols' ranges do not meet. */
DVM_MUST_USE dvm_status *dvmc_infer(dvmc_ctx *c, dvmc_graph *g);

/* After dvmc_infer: how many of g's node outputs (of *total) have shapes
 * inference could not tell; each node where such a loss starts (its inputs
 * known, an output not) gets the reason in shape_lost, and *first is the
 * first of them. Fusion and memory planning skip those values. */
int dvmc_infer_unknown(dvmc_graph *g, int *total, const dvmc_node **first);

/* After dvmc_infer: calls warn (when not NULL) with a message for each
 * value of g and its subgraphs whose declared type (a graph output's,
 * value_info's: ir.h) contradicts the inferred one, and returns how many
 * (declared.c). The inferred type is the one used. */
int dvmc_infer_disagreements(const dvmc_graph *g, void (*warn)(void *ctx, const char *msg), void *ctx);

/* True when every dim of v is known. */
bool dvmc_value_shape_known(const dvmc_value *v);
/* True when v's contents are known expressions (elems). */
bool dvmc_value_elems_known(const dvmc_value *v);

#endif
