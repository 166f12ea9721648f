/* Lowering a graph to bytecode: every node becomes shape computation (its
 * kernel's shape function), allocation and a kernel call; views become
 * `reshape`; registers are released after their last use. */
#ifndef DVMC_LOWER_H
#define DVMC_LOWER_H

#include "ir.h"

typedef struct dvmc_options {
  const char *function; /* name of the entry function; default "main" */
  int no_fusion;        /* keep every elementwise node its own kernel call */
  int no_stitch;        /* keep reductions out of fused groups (no row stitching) */
  int no_plan;          /* no arena: every tensor its own allocation */
  /* The folder the .dvmb goes to: weights the model keeps in external
   * data files inside it are referenced there, not copied (NULL: copied) */
  const char *data_dir;
} dvmc_options;

/* Compiles graph g into .dvmb bytes (*bytes malloc'ed). Errors name the
 * node, its op and its opset when an op or attribute is not supported. */
DVM_MUST_USE dvm_status *dvmc_lower(dvmc_ctx *c, const dvmc_graph *g, const dvmc_options *opts,
                                    uint8_t **bytes, size_t *size);

#endif
