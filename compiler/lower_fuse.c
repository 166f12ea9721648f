/* Fusion: runs of consecutive f32 elementwise nodes whose outputs have
 * one shape (equal expressions: the same pointers) become one call of the
 * fused kernel, so intermediates never go to memory. A group's other inputs
 * are values broadcastable to that shape (checked symbolically) or f32
 * scalar constants; values used outside the group are its outputs. */
#include <stdlib.h>
#include <string.h>

#include "lowering.h"
#include "ops.h"
#include "ops/cpu/fused.h"

/* The op table's fused-program op of an f32 elementwise node, or -1. */
static int fused_op_of(const dvmc_node *n) {
  int arity = n->def && n->def->nin == 1 ? 1 : 2;
  /* the one fused op with an attribute: Gelu's approximate="tanh" */
  if (n->def && n->def->fused == DVM_FUSED_GELU && n->nin == 1 && n->nout == 1 && n->nattrs == 1 &&
      !strcmp(dvmc_attr_string(n, "approximate", ""), "tanh"))
    return DVM_FUSED_GELU_TANH;
  return n->def && n->def->fused >= 0 && n->nin == arity && n->nout == 1 && !n->nattrs ? n->def->fused : -1;
}


int lw_fuses(const dvmc_node *n) { return fused_op_of(n) >= 0; }

/* A one-element f32 constant, folded into the program. */
static int scalar_const(const dvmc_value *v, double *out) {
  return v && v->constant && v->constant->dtype == DVM_F32 && v->constant->nbytes == 4 &&
         (*out = *(const float *)v->constant->data, 1);
}

int lw_fuse_scalar(const dvmc_value *v) {
  double c;
  return scalar_const(v, &c);
}

/* v broadcasts to the group's shape: each of its dims (aligned right) is the
 * group's or 1. */
int lw_broadcasts_to(const dvmc_value *v, const dvmc_value *shape) {
  if (!dvmc_value_shape_known(v) || v->rank > shape->rank) return 0;
  for (int d = 0; d < v->rank; d++) {
    int64_t c;
    const dvmc_expr *e = v->dims[d], *t = shape->dims[shape->rank - v->rank + d];
    if (e != t && !(dvmc_expr_is_const(e, &c) && c == 1)) return 0;
  }
  return 1;
}

/* Whether node n can join a group whose shape is that of `shape`, given
 * the nodes already in it (first..i-1). */
static int joins(const lowering *L, const dvmc_graph *g, int first, int i, const dvmc_value *shape) {
  const dvmc_node *n = g->nodes[i];
  if (fused_op_of(n) < 0 || !lw_is_f32(n->out[0]) || !dvmc_value_shape_known(n->out[0]) ||
      n->out[0]->rank != shape->rank || lw_foldable(L, n->out[0]))
    return 0;
  for (int d = 0; d < shape->rank; d++)
    if (n->out[0]->dims[d] != shape->dims[d]) return 0;
  for (int k = 0; k < n->nin; k++) {
    const dvmc_value *v = n->in[k];
    int inside = 0;
    double c;
    for (int j = first; j < i && !inside; j++) inside = g->nodes[j]->out[0] == v;
    if (!inside && !scalar_const(v, &c) && !(lw_is_f32(v) && lw_broadcasts_to(v, shape))) return 0;
  }
  return 1;
}

/* The group starting at node i: its end (exclusive), at least i + 2, or i
 * when no group starts there. */
/* Whether nodes [first, end) read a value that is not made inside them
 * and not a scalar constant: a fused program needs an input (a chain of
 * constants alone, Sqrt(2) -> Div, is lowered node by node). */
static int reads_input(const dvmc_graph *g, int first, int end) {
  for (int i = first; i < end; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++) {
      const dvmc_value *v = g->nodes[i]->in[k];
      int inside = 0;
      double c;
      for (int j = first; j < i && !inside; j++) inside = g->nodes[j]->out[0] == v;
      if (!inside && !scalar_const(v, &c)) return 1;
    }
  return 0;
}

int lw_group_at(const lowering *L, const dvmc_graph *g, int i) {
  if (i >= g->nnodes || !joins(L, g, i, i, g->nodes[i]->out[0] ? g->nodes[i]->out[0] : NULL)) return i;
  int end = i + 1;
  while (end < g->nnodes && end - i < 64 && joins(L, g, i, end, g->nodes[i]->out[0])) end++;
  return end - i >= 2 && reads_input(g, i, end) ? end : i;
}

/* v has the dims of s (the same expressions). */
static int same_dims(const dvmc_value *v, const dvmc_value *s) {
  if (v->rank != s->rank) return 0;
  for (int d = 0; d < s->rank; d++)
    if (v->dims[d] != s->dims[d]) return 0;
  return 1;
}

/* A group's program and what its call reads and writes. */
typedef struct group {
  dvm_fused_builder b;
  const dvmc_value *shape; /* of the outputs (a row program's: the rows') */
  const dvmc_value *ext[DVM_FUSED_MAX_INPUTS], *outs[DVM_FUSED_MAX_OUTPUTS];
  int nin, nout;
} group;

/* Builds the program of nodes [first, end) into *q (q->b.error: a mistake,
 * which this frees when it returns another status); reads says who reads
 * what, outside the group too (a value read by a node past the group, by a
 * subgraph, or a graph output escapes). A group with a row reduction is a
 * row program over the rows of the first one's input (lower_stitch.c). */
static dvm_status *build(const lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                         const id_list *reads, group *q) {
  dvm_fused_builder *b = &q->b;
  dvm_fused_builder_init(b);
  int next_val[64];
  q->nin = q->nout = 0;
  q->shape = g->nodes[first]->out[0];
  for (int i = first; i < end; i++)
    if (lw_is_row_reduction(g->nodes[i])) {
      q->shape = g->nodes[i]->in[0];
      break;
    }
  dvm_status *st = NULL;
  for (int i = first; i < end && !st; i++) {
    const dvmc_node *n = g->nodes[i];
    int special = lw_stitch_special(L, n); /* a row reduction, Clip, Expand, or folded */
    next_val[i - first] = -1;
    if (special == LW_STITCH_FOLDED) continue; /* shape arithmetic: no code */
    int ops[2], nops = special ? 1 : n->nin;
    for (int k = 0; k < nops; k++) {
      const dvmc_value *v = n->in[k];
      int found = -1;
      double c;
      for (int j = first; j < i && found < 0; j++)
        if (g->nodes[j]->out[0] == v) found = next_val[j - first];
      if (found < 0 && scalar_const(v, &c)) found = dvm_fused_const_f32(b, c);
      for (int e = 0; e < q->nin && found < 0; e++)
        if (q->ext[e] == v) found = dvm_fused_load(b, e);
      if (found < 0) {
        if (q->nin == DVM_FUSED_MAX_INPUTS) {
          st = lw_unsupported(n, "fused group with too many inputs");
          break;
        }
        q->ext[q->nin] = v;
        dvm_fused_input(b, DVM_F32);
        found = dvm_fused_load(b, q->nin++);
      }
      ops[k] = found;
    }
    if (st) break;
    dvm_fused_op f = (dvm_fused_op)fused_op_of(n);
    next_val[i - first] = special ? lw_emit_stitch_special(b, n, ops[0])
                          : n->nin == 1          ? dvm_fused_op1(b, f, ops[0])
                                                 : dvm_fused_op2(b, f, ops[0], ops[1]);
    /* escapes: read after the group or kept for the caller */
    const dvmc_value *o = n->out[0];
    int read_inside = 0;
    for (int j = i + 1; j < end; j++)
      for (int k = 0; k < reads[j].n; k++) read_inside += g->values[reads[j].ids[k]] == o;
    if (!lw_owns(g, o) || uses[o->id] > read_inside) {
      if (q->nout == DVM_FUSED_MAX_OUTPUTS) st = lw_unsupported(n, "fused group with too many outputs");
      else if (!same_dims(o, q->shape)) /* outputs have the group's shape */
        st = lw_unsupported(n, "a per-row value of a stitched group read after it");
      else {
        q->outs[q->nout] = o;
        dvm_fused_store(b, dvm_fused_output(b, DVM_F32), next_val[i - first]);
        q->nout++;
      }
    }
  }
  if (st) {
    dvm_status_free(b->error);
    b->error = NULL;
  }
  return st;
}

int lw_group_builds(const lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                    const id_list *reads) {
  (void)L;
  group *q = malloc(sizeof *q);
  if (!q) return 0;
  dvm_status *st = build(L, g, first, end, uses, reads, q);
  void *payload = NULL;
  size_t size;
  if (!st && q->nout) st = dvm_fused_builder_finish(&q->b, &payload, &size);
  else dvm_status_free(q->b.error);
  int ok = !st && q->nout;
  dvm_status_free(st);
  free(payload);
  free(q);
  return ok;
}

/* Lowers nodes [first, end) as one fused call, built into *q. */
static dvm_status *lower_built(lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                               const id_list *reads, group *q) {
  dvm_status *st = build(L, g, first, end, uses, reads, q);
  if (st) return st;
  if (!q->nout) { /* nothing reads what the group makes: dead code, not a call */
    dvm_status_free(q->b.error);
    return NULL;
  }
  void *payload;
  size_t size;
  st = dvm_fused_builder_finish(&q->b, &payload, &size);
  if (st) return dvm_status_annotate(st, "fusing nodes \"%s\" to \"%s\"", g->nodes[first]->name, g->nodes[end - 1]->name);
  char name[32];
  snprintf(name, sizeof name, q->b.rows ? "fused@stitch%d" : "fused@%d", L->fused++);
  int kid = dvmc_emit_kernel(L->e, name, DVM_DEVICE_CPU, 1, payload, size);
  free(payload);
  int64_t outs[DVM_FUSED_MAX_OUTPUTS], ins[DVM_FUSED_MAX_INPUTS];
  int shape_reg = lw_shape_of_exprs(L, q->shape->rank, q->shape->dims);
  for (int k = 0; k < q->nout; k++) {
    int r = dvmc_fn_reg(L->f);
    lw_emit_alloc(L, r, DVM_F32, shape_reg, q->shape->rank, q->shape->dims);
    if (!lw_bind(L, q->outs[k], r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    outs[k] = r;
  }
  dvmc_fn_RELEASE(L->f, shape_reg);
  for (int k = 0; k < q->nin; k++) {
    int r;
    if ((st = lw_reg_of(L, q->ext[k], &r))) return st;
    ins[k] = r;
  }
  dvmc_fn_INVOKE(L->f, kid, -1, (dvm_list){q->nout, outs}, (dvm_list){q->nin, ins}, DVM_NO_LIST);
  return NULL;
}


/* Lowers nodes [first, end) as one fused call. */
dvm_status *lw_lower_group(lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                               const id_list *reads) {
  group *q = malloc(sizeof *q);
  if (!q) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = lower_built(L, g, first, end, uses, reads, q);
  free(q);
  return st;
}
