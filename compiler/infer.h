/* Symbolic shape inference: each value's dtype, rank and dims as canonical
 * expressions over the input symbols, and the contents of small integer
 * tensors (the Shape -> Gather -> Concat chains of exported models) as
 * expressions too. What cannot be known stays unknown (NULL dims, rank -1):
 * lowering then asks the kernel's shape function at run time, so inference
 * only ever makes code faster, never wrong; kernels still check every shape
 * they are given. */
#ifndef DVMC_INFER_H
#define DVMC_INFER_H

#include "ir.h"

/* Infers g and its subgraphs in place. Fails only when out of memory. */
DVM_MUST_USE dvm_status *dvmc_infer(dvmc_ctx *c, dvmc_graph *g);

/* True when every dim of v is known. */
bool dvmc_value_shape_known(const dvmc_value *v);
/* True when v's contents are known expressions (elems). */
bool dvmc_value_elems_known(const dvmc_value *v);

#endif
