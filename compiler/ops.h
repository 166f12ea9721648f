/* The op table: one row per ONNX op dvm compiles (ops.def), as data for
 * the passes. Import gives each node its row (dvmc_node.def); inference,
 * lowering and fusion find their rules by the row's index. */
#ifndef DVMC_OPS_H
#define DVMC_OPS_H

#include <stdbool.h>

#include "dvmc.h"
#include "ir.h"

typedef struct dvmc_op {
  const char *domain; /* "" (the default ONNX domain), "com.microsoft" or "ai.onnx.ml" */
  const char *name;   /* ONNX op type */
  const char *kernel; /* CPU kernel, or NULL for special lowerings */
  const char *attrs;  /* kernel attribute specs (lower_call.c) */
  const char *dtype;  /* output dtype rule (ops.def) */
  int nin;            /* inputs passed to the kernel; -1 all */
  int min_opset;
  int fused;          /* dvm_fused_op of a fusable f32 elementwise op, or -1 */
  bool shape_rule;    /* inference has a symbolic rule for it */
  bool special;       /* lowered by its own function, not the generic call */
} dvmc_op;

/* The row of op `name` of `domain` ("" or "ai.onnx": the default one), or
 * NULL. */
const dvmc_op *dvmc_op_find(const char *domain, const char *name);
const dvmc_op *dvmc_op_at(int i); /* 0 <= i < dvmc_op_count() (dvmc.h) */
static inline int dvmc_op_index(const dvmc_op *op) { return (int)(op - dvmc_op_at(0)); }

/* The dtype of node n's output i by its row's rule: a fixed dtype (bool,
 * i64, Cast's "to", ConstantOfShape's value, a subgraph's output), else the
 * dtype already set on the output, else that of the input the rule names.
 * False when it cannot be told yet; an error for a bad "to". */
DVM_MUST_USE dvm_status *dvmc_op_out_dtype(const dvmc_node *n, int i, dvm_dtype *out, bool *known);
/* What LabelEncoder's or CategoryMapper's attributes map X to (lower_ml_map.c);
 * *known false where that is X's type's and X's is not known. */
dvm_dtype dvmc_ml_map_dtype(const dvmc_node *n, bool *known);

/* The kind of node n's output i (ir.h): a sequence or optional from the
 * sequence and optional ops and what carries them (Identity, If, Loop), a
 * tensor otherwise. Lowering sets the same (lower_seq.c). */
dvmc_kind dvmc_op_out_kind(const dvmc_node *n, int i);

#endif
