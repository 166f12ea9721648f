/* The lowering's shared state and functions, for its files only (the
 * compiler's entry point is lower.h):
 *
 *   lower.c          the walk over a graph (use counts, releases), the
 *                    function's signature and guards, the memory plan
 *   lower_values.c   values to registers, constants, allocation, symbolic
 *                    dims as scalar code
 *   lower_call.c     attributes and the generic kernel call
 *   lower_ops.c      the op table's lowering columns and the special
 *                    lowerings of single ops
 *   lower_fuse.c     elementwise chains as one fused kernel call
 *   lower_stitch.c   row stitching: reductions over the last axis with
 *                    their elementwise producers and consumers, one call
 *   lower_control.c  If and Loop
 *   lower_scan.c     Scan
 *   lower_seq.c      sequences and optionals (tuples in the VM)
 *   lower_rnn.c      RNN, GRU, LSTM
 *
 * Names shared between these files start with lw_; a special lowering
 * named X in ops.def is lw_lower_X. */
#ifndef DVMC_LOWERING_H
#define DVMC_LOWERING_H

#include "emit.h"
#include "infer.h"
#include "ir.h"
#include "kernel.h"
#include "plan.h"

typedef struct {
  const dvmc_value *v;
  int reg;
} binding;

typedef struct {
  dvmc_ctx *c;
  dvmc_emit *e;
  dvmc_fn *f;
  binding *map; /* open addressing on the value pointer */
  size_t cap, n;
  const dvmc_graph *g;
  int depth;                 /* inside branches and loop bodies: > 0 */
  int einsums;               /* einsum kernel entries so far */
  int fused;                 /* fused kernel entries so far */
  int tfidfs;                /* tfidf kernel entries so far */
  int fuse;                  /* fusion on */
  int stitch;                /* row stitching on (lower_stitch.c) */
  const dvmc_expr **memo;    /* expressions computed in top-level code, */
  int *memo_reg;             /* and their registers (they dominate the rest) */
  size_t nmemo, memo_cap;
  const dvmc_value **scoped; /* constants loaded there, dropped on leaving */
  size_t nscoped, scoped_cap;
  int plan;                  /* memory planning on: top-level tensors are sites */
  int arena;                 /* a placeholder: each site's storage and offset until the plan fills them */
  dvmc_plan_site *sites;
  int nsites, sites_cap;
  int unplanned;             /* tensors left to the pool: sized at run time, or in a branch or body */
  const dvmc_expr **data_syms; /* symbols read from a node's output (inf_data_dim), */
  int *data_regs;              /* and their registers */
  int ndata, data_cap;
} lowering;

typedef struct op_rule op_rule;
typedef dvm_status *lower_fn(lowering *L, const dvmc_node *n, const op_rule *r);

/* A row of the op table (ops.def) as the lowering reads it. */
struct op_rule {
  const char *op;     /* ONNX op type */
  const char *kernel; /* kernel, or NULL for special lowerings */
  const char *attrs;  /* attribute specs, space separated (lw_lower_attr) */
  const char *dtype;  /* output dtype rule (ops.c) */
  int nin;            /* inputs passed to the kernel (rest are attributes); -1 = all */
  lower_fn *lower;    /* its LOWER column's lw_lower_X; lw_lower_kernel for _ */
  int min_opset;      /* the first opset with these semantics */
};

/* One kernel call being put together: the generic lowering fills it from
 * the rule; special lowerings adjust it (computed pads, a payload). */
typedef struct {
  const char *kernel; /* the kernel table entry's name ("einsum@0") */
  const void *payload;
  size_t payload_size;
  int64_t ins[64], attrs[32];
  int nin, nattrs;
  /* set: output 0 is what the kernel writes, i64 indices into the
   * classifier's string labels, which the node's label output gathers */
  bool label_index;
} call;

/* The values of a graph one node reads (ids), each once. */
typedef struct {
  int *ids;
  int n, cap;
  int oom;
} id_list;

/* lower_values.c */
int lw_bind(lowering *L, const dvmc_value *v, int reg); /* 0: out of memory */
int lw_lookup(const lowering *L, const dvmc_value *v);  /* the register, or -1 */
dvm_status *lw_unsupported(const dvmc_node *n, const char *fmt, ...) DVM_PRINTF(2, 3);
dvm_status *lw_invalid(const dvmc_node *n, const char *fmt, ...) DVM_PRINTF(2, 3);
DVM_MUST_USE dvm_status *lw_reg_of(lowering *L, const dvmc_value *v, int *out);
int lw_drop_scoped(lowering *L, size_t from); /* 0: out of memory */
void lw_emit_alloc(lowering *L, int reg, dvm_dtype dt, int shape, int rank, const dvmc_expr *const *dims);
int lw_emit_int(lowering *L, int64_t v);
/* A register holding constant t (NULL: its making ran out of memory) of
 * node n, named "<node>.<what>"; -1 out of memory. */
int lw_const_reg(lowering *L, const dvmc_node *n, const char *what, const dvmc_tensor *t);
int lw_emit_float(lowering *L, double v);
int lw_emit_shape(lowering *L, int n, const int64_t *v);
int lw_data_reg(const lowering *L, const dvmc_expr *sym);
int lw_emittable(const lowering *L, const dvmc_expr *e);
int lw_all_emittable(const lowering *L, int n, const dvmc_expr *const *e);
int lw_bind_data_dims(lowering *L, const dvmc_node *n); /* 0: out of memory */
int lw_expr_reg(lowering *L, const dvmc_expr *e);
int lw_shape_of_exprs(lowering *L, int n, const dvmc_expr *const *e);
int lw_foldable(const lowering *L, const dvmc_value *v);
int lw_const_ints(const dvmc_value *v, int64_t *out, int max);
int lw_const_float(const dvmc_value *v, double *out);
int lw_is_f32(const dvmc_value *v);

/* lower_call.c */
int lw_lower_attr(lowering *L, const dvmc_node *n, const char *spec, size_t len, dvm_status **st);
void lw_set_type(const dvmc_value *v, dvm_dtype dt);
DVM_MUST_USE dvm_status *lw_call_inputs(lowering *L, const dvmc_node *n, const op_rule *r, call *c);
DVM_MUST_USE dvm_status *lw_call_attrs(lowering *L, const dvmc_node *n, const char *spec, int pads_reg, call *c);
DVM_MUST_USE dvm_status *lw_call_present(lowering *L, const dvmc_node *n, int first, int present, call *c);
DVM_MUST_USE dvm_status *lw_emit_call(lowering *L, const dvmc_node *n, const op_rule *r, const call *c);
DVM_MUST_USE dvm_status *lw_emit_call_fixed(lowering *L, const dvmc_node *n, call *c, int nfixed, const char *shapefn,
                                            dvm_dtype dt);
DVM_MUST_USE dvm_status *lw_lower_kernel(lowering *L, const dvmc_node *n, const op_rule *r);
DVM_MUST_USE dvm_status *lw_check_values(const dvmc_node *n);

/* lower_ops.c: the special lowerings of ops.def's LOWER column */
const op_rule *lw_find_rule(const dvmc_node *n);
DVM_MUST_USE dvm_status *lw_check_attrs(const dvmc_node *n, const op_rule *r);
/* A new value: a cast of v to dt, through the cast kernel (*out its value). */
DVM_MUST_USE dvm_status *lw_cast_value(lowering *L, const dvmc_node *n, dvmc_value *v, dvm_dtype dt, dvmc_value **out);
/* n lowered by r->lower on f32 copies of its f16 inputs, its f16 outputs
 * cast back: an f16 node whose kernel computes f32 only. */
DVM_MUST_USE dvm_status *lw_via_f32(lowering *L, const dvmc_node *n, const op_rule *r);
/* The special lowerings, lw_lower_X for each X of ops.def's LOWER column,
 * defined in lower_ops.c or the file of their family (above); a row's _
 * names the generic kernel call. */
#define lw_lower__ lw_lower_kernel
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) lower_fn lw_lower_##lower;
#include "ops.def"
#undef OP

/* lower_control.c: loop pieces Loop and Scan share */
int lw_scalar_tensor(lowering *L, dvm_dtype dt, int v);
/* Output k of a Loop or Scan node when something reads it (a node, a
 * subgraph, or as a graph output), else NULL: a scan output that is
 * omitted or read by nothing is not accumulated. */
const dvmc_value *lw_scan_read(const dvmc_node *n, int k);
void lw_put_scan(lowering *L, int val, dvm_dtype dt, int acc, int i, int at, int width, int axis, int zero);
DVM_MUST_USE dvm_status *lw_empty_scans(lowering *L, const dvmc_node *n, const dvmc_value *const *outs,
                                        const dvmc_value *const *bouts, int nscan, const int *scan, const int *axes,
                                        int i);

/* lower_seq.c */
void lw_set_kind(const dvmc_value *v, dvmc_kind k);
/* Refuses sequence and optional inputs to ops that take tensors only. */
DVM_MUST_USE dvm_status *lw_check_kinds(const dvmc_node *n);

/* lower_fuse.c */
/* The end (exclusive) of the elementwise group at node i, or i. */
int lw_group_at(const lowering *L, const dvmc_graph *g, int i);
/* Lowers nodes [first, end) as one fused call (a row program when one is a
 * row reduction); uses and reads say who reads each value. */
DVM_MUST_USE dvm_status *lw_lower_group(lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                                        const id_list *reads);
/* Whether lw_lower_group would lower nodes [first, end) (and not decline
 * with an error). */
int lw_group_builds(const lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                    const id_list *reads);
/* n is an f32 elementwise node the fused program has an op for. */
int lw_fuses(const dvmc_node *n);
/* v is a one-element f32 constant, folded into a fused program. */
int lw_fuse_scalar(const dvmc_value *v);
/* v's known shape broadcasts to that of `shape`. */
int lw_broadcasts_to(const dvmc_value *v, const dvmc_value *shape);

/* lower_stitch.c */
struct dvm_fused_builder;
/* The end (exclusive) of the stitched group at node i, or i. */
int lw_stitch_at(lowering *L, const dvmc_graph *g, int i, const int *uses, const id_list *reads);
/* n reduces the last axis of its f32 input keeping it, as a row program can. */
int lw_is_row_reduction(const dvmc_node *n);
/* v is a per-row value of rows of shape s: s's leading dims, then 1. */
int lw_is_row_value(const dvmc_value *v, const dvmc_value *s);
/* What lw_lower_group does with node n of a stitched group other than an
 * elementwise op: 0 (it is one), a row reduction, Clip or Expand (one
 * operand, lw_emit_stitch_special), or nothing (a folded shape node). */
enum { LW_STITCH_REDUCE = 1, LW_STITCH_CLIP, LW_STITCH_EXPAND, LW_STITCH_FOLDED };
int lw_stitch_special(const lowering *L, const dvmc_node *n);
/* Adds node n (lw_stitch_special's kinds) of operand value x to program b;
 * its value. */
int lw_emit_stitch_special(struct dvm_fused_builder *b, const dvmc_node *n, int x);

/* lower.c */
int lw_owns(const dvmc_graph *g, const dvmc_value *v);
DVM_MUST_USE dvm_status *lw_lower_graph(lowering *L, const dvmc_graph *g);

#endif
