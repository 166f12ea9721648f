/* Graph rewrites on symbolic shapes, run after inference and before
 * lowering: each pass (pass_*.c) replaces a pattern that exporters spell
 * out in small ops (a decomposed LayerNorm, GELU) by the one op whose
 * kernel does it in one pass over memory. A pass rewrites only what it
 * proves: every dim compared is the same interned expression, every
 * constant is the exact value, and every intermediate is read by nothing
 * outside the pattern. Each can be switched off (`dvm compile --disable
 * NAME`) to compare results.
 *
 * The table of passes (name, one line, the function) is here; the helpers
 * below are what the passes share. */
#ifndef DVMC_PASS_H
#define DVMC_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include "dvmc.h"
#include "ir.h"

typedef struct dvmc_pass {
  const char *name; /* for --disable and --list-passes */
  const char *what; /* one line */
  /* Rewrites g's top-level nodes; adds the number of rewrites to *count. */
  DVM_MUST_USE dvm_status *(*run)(dvmc_ctx *c, dvmc_graph *g, int *count);
  /* makes an op only the CPU kernels have: off in builds for CUDA */
  bool cpu_only;
} dvmc_pass;

/* 0 <= i < dvmc_pass_count(); dvmc_pass_find names them (dvmc.h). */
const dvmc_pass *dvmc_pass_at(int i);

/* The mask (as dvmc_passes_run's `disabled`) of the cpu_only passes: what
 * a build that is placed for CUDA (dvmc_place_cuda) adds to `disabled`. */
uint32_t dvmc_passes_cpu_only(void);

/* Runs, in table order, each pass whose bit (1 << index) is clear in
 * `disabled` on g and its subgraphs, after dvmc_infer; counts (NULL, or
 * dvmc_pass_count() ints, zeroed by the caller) gets each pass's number of
 * rewrites. Fails only when out of memory. */
DVM_MUST_USE dvm_status *dvmc_passes_run(dvmc_ctx *c, dvmc_graph *g, uint32_t disabled, int *counts);

/* ---- for the passes ------------------------------------------------------- */

/* v's producer when it is a default-domain `op` node of g with one output,
 * and v is read exactly `uses` times (so by nothing outside the pattern
 * that reads it that often, and not a graph output); else NULL. */
dvmc_node *dvmc_pass_only(const dvmc_graph *g, const dvmc_value *v, const char *op, int uses);
/* v is a one-element f32 constant: true and *out its value. */
bool dvmc_pass_scalar(const dvmc_value *v, float *out);
/* v is a one-element f32 constant equal to x exactly. */
bool dvmc_pass_scalar_is(const dvmc_value *v, float x);
/* a and b are f32 with the same rank and the same known dims. */
bool dvmc_pass_same_shape(const dvmc_value *a, const dvmc_value *b);
/* n is ReduceMean over the last axis of its rank-r input, keeping it: axes
 * [-1] or [r-1] as the attribute (before opset 18) or a constant input. */
bool dvmc_pass_mean_last(const dvmc_node *n, int r);
/* n's input that is not `v` of a two-input node, or NULL when neither or
 * both are v (for the commutative Add and Mul). */
dvmc_value *dvmc_pass_other(const dvmc_node *n, const dvmc_value *v);

/* Replaces the nodes `dead` (all of g, the one that makes `out` among
 * them) by one node `op`(in...) with attributes attrs (copied) that makes
 * `out`, in the place of out's producer so the order stays topological.
 * The dead nodes' slots are left NULL until dvmc_passes_run compacts g.
 * NULL, or an out-of-memory status. */
DVM_MUST_USE dvm_status *dvmc_pass_replace(dvmc_ctx *c, dvmc_graph *g, dvmc_node *const *dead, int ndead,
                                           const char *op, dvmc_value *const *in, int nin, dvmc_value *out,
                                           const dvmc_attr *attrs, int nattrs);

/* The same with nout outputs (NULL: an omitted one) and the new node in
 * the slot of `at`, one of the dead nodes: the caller proves that every
 * input is made before at and every reader of an output comes after it. */
DVM_MUST_USE dvm_status *dvmc_pass_replace_outs(dvmc_ctx *c, dvmc_graph *g, dvmc_node *const *dead, int ndead,
                                                const dvmc_node *at, const char *op, dvmc_value *const *in,
                                                int nin, dvmc_value *const *outs, int nout,
                                                const dvmc_attr *attrs, int nattrs);

/* v's producer, a default-domain node of g none of whose outputs is read
 * any more (a rewrite took the last reader), removed (its slot left NULL),
 * and so on up through the producers of its inputs: the values only it
 * needed (the shape arithmetic of a Pad folded into a Conv) are not
 * computed. */
void dvmc_pass_drop_unread(dvmc_graph *g, dvmc_value *v);
/* A new node `op` of `domain` (in...) making out, in slot `at` (0 to
 * g->nnodes) of g, the nodes from there on moved one slot later: the caller
 * proves every input is made before `at` and every reader of out comes
 * after it. NULL, or an out-of-memory status. */
DVM_MUST_USE dvm_status *dvmc_pass_insert(dvmc_ctx *c, dvmc_graph *g, int at, const char *op, const char *domain,
                                          dvmc_value *const *in, int nin, dvmc_value *out, const dvmc_attr *attrs,
                                          int nattrs);

/* Makes n, a node dvmc_pass_replace made, an op of `domain` (the op table's
 * row of that domain and n's op: "dvm" for the rewrites' own ops). NULL, or
 * an internal error where the table has no such row. */
DVM_MUST_USE dvm_status *dvmc_pass_set_domain(dvmc_node *n, const char *domain);

/* Replaces n, a Conv or FusedConv with one output, by a com.microsoft
 * FusedConv of its inputs and attributes with the int attribute `name`
 * set to value (conv_nhwc's dvm_layout, conv_winograd's dvm_algo). */
DVM_MUST_USE dvm_status *dvmc_pass_fused_conv(dvmc_ctx *c, dvmc_graph *g, dvmc_node *n, const char *name,
                                              int64_t value);
/* Not in the table: run when dvmc_compile_options.last_position names an
 * output (last_position.c); adds 1 to *count when it rewrote. */
DVM_MUST_USE dvm_status *dvmc_last_position(dvmc_ctx *c, dvmc_graph *g, const char *output, int *count);

/* The passes, in the order they run (pass.c's table). */
DVM_MUST_USE dvm_status *dvmc_pass_quant_const(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_quant_float(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_layernorm(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_gelu(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_epilogue(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_skiplayernorm(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_rmsnorm(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_pad_conv(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_conv_act(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_conv_add(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_conv_nhwc(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_qdq_pair(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_conv_winograd(dvmc_ctx *c, dvmc_graph *g, int *count);
DVM_MUST_USE dvm_status *dvmc_pass_attention(dvmc_ctx *c, dvmc_graph *g, int *count);

#endif
