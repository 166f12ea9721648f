/* What the shape rules share (infer.h is the pass's interface). infer.c
 * runs the pass; the rules of ops.def's SHAPE column are defined one file
 * per shape-function family, named like shapefuncs/ (infer_matmul.c,
 * infer_movement.c, ...), with the helpers below (infer_rule.c). A rule
 * reads a node's inputs and attributes and sets what it can tell of its
 * outputs; what it cannot tell stays unknown. */
#ifndef DVMC_INFER_RULE_H
#define DVMC_INFER_RULE_H

#include "infer.h"
#include "onnx_import.h"
#include "ops.h"

#define MAX_ELEMS 16 /* contents tracked for integer tensors up to this size */

typedef struct {
  dvmc_ctx *c;
  dvmc_exprs *x;
  dvmc_graph *root; /* where constraints are collected */
  int depth;        /* inside If branches and Loop bodies: > 0 */
  int narrowed;     /* a symbol's range was narrowed: infer again */
  int oom;
} inf;

/* A value's shape, rank alone, dtype, contents (up to MAX_ELEMS). */
void inf_set_shape(dvmc_value *v, int rank, const dvmc_expr *const *dims);
void inf_set_rank(dvmc_value *v, int rank);
void inf_set_dtype(dvmc_value *v, dvm_dtype dt);
void inf_set_elems(inf *I, dvmc_value *v, int n, const dvmc_expr *const *e);
/* Output `out` has input 0's shape. */
void inf_same_shape(const dvmc_node *n, int out);
/* Every output has input 0's rank, where the rule could not tell its dims. */
void inf_keep_rank(const dvmc_node *n);

/* Reading attributes and inputs. */
int inf_const_list(const dvmc_value *v, int64_t *out, int max);
int inf_ints_of(const dvmc_node *n, const char *attr, int input, int64_t *out, int max);
int inf_exprs_of(inf *I, const dvmc_node *n, const char *attr, int input, const dvmc_expr **out, int max);
int inf_is(const dvmc_node *n, const char *const *ops); /* n's op is one of ops (NULL-ended) */
int inf_norm_axis(int64_t axis, int rank);              /* -1 when out of range */
const dvmc_expr *inf_prod(inf *I, const dvmc_value *v, int lo, int hi);

/* Dims and their relations. */
const dvmc_expr *inf_bcast_dim(inf *I, const dvmc_node *n, const dvmc_expr *r, const dvmc_expr *e);
void inf_require_equal(inf *I, const dvmc_node *n, const dvmc_expr *a, const dvmc_expr *b, const char *why);
void inf_broadcast(inf *I, const dvmc_node *n, int first, int count);
const dvmc_expr *inf_data_dim(inf *I, const char *hint);

/* The pass, for the rules of ops with subgraphs (infer.c). */
void inf_graph(inf *I, dvmc_graph *g);
void inf_reset_values(dvmc_graph *g);

/* The rules, inf_rule_X for each X of ops.def's SHAPE column; a row's _
 * names inf_rule_none, which tells nothing (the kernel's shape function
 * gives the shapes at run time). */
typedef void inf_rule(inf *I, const dvmc_node *n);
#define inf_rule__ inf_rule_none
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) inf_rule inf_rule_##shape;
#include "ops.def"
#undef OP

#endif
