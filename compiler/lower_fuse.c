/* Fusion v1: runs of consecutive f32 elementwise nodes whose outputs have
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


/* A one-element f32 constant, folded into the program. */
static int scalar_const(const dvmc_value *v, double *out) {
  return v && v->constant && v->constant->dtype == DVM_F32 && v->constant->nbytes == 4 &&
         (*out = *(const float *)v->constant->data, 1);
}

/* v broadcasts to the group's shape: each of its dims (aligned right) is the
 * group's or 1. */
static int broadcasts_to(const dvmc_value *v, const dvmc_value *shape) {
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
    if (!inside && !scalar_const(v, &c) && !(lw_is_f32(v) && broadcasts_to(v, shape))) return 0;
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

/* Lowers nodes [first, end) as one fused call; reads says who reads what,
 * outside the group too (a value read by a node past the group, by a
 * subgraph, or a graph output escapes). */
dvm_status *lw_lower_group(lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
                               const id_list *reads) {
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  const dvmc_value *ext[DVM_FUSED_MAX_INPUTS], *outs[DVM_FUSED_MAX_OUTPUTS];
  int next_val[64], nin = 0, nout = 0;
  const dvmc_value *shape = g->nodes[first]->out[0];
  for (int i = first; i < end; i++) {
    const dvmc_node *n = g->nodes[i];
    int ops[2];
    for (int k = 0; k < n->nin; k++) {
      const dvmc_value *v = n->in[k];
      int found = -1;
      double c;
      for (int j = first; j < i && found < 0; j++)
        if (g->nodes[j]->out[0] == v) found = next_val[j - first];
      if (found < 0 && scalar_const(v, &c)) found = dvm_fused_const_f32(&b, c);
      for (int e = 0; e < nin && found < 0; e++)
        if (ext[e] == v) found = dvm_fused_load(&b, e);
      if (found < 0) {
        if (nin == DVM_FUSED_MAX_INPUTS) return lw_unsupported(n, "fused group with too many inputs");
        ext[nin] = v;
        dvm_fused_input(&b, DVM_F32);
        found = dvm_fused_load(&b, nin++);
      }
      ops[k] = found;
    }
    dvm_fused_op f = (dvm_fused_op)fused_op_of(n);
    next_val[i - first] = n->nin == 1 ? dvm_fused_op1(&b, f, ops[0]) : dvm_fused_op2(&b, f, ops[0], ops[1]);
    /* escapes: read after the group or kept for the caller */
    const dvmc_value *o = n->out[0];
    int read_inside = 0;
    for (int j = i + 1; j < end; j++)
      for (int k = 0; k < reads[j].n; k++) read_inside += g->values[reads[j].ids[k]] == o;
    if (!lw_owns(g, o) || uses[o->id] > read_inside) {
      if (nout == DVM_FUSED_MAX_OUTPUTS) return lw_unsupported(n, "fused group with too many outputs");
      outs[nout] = o;
      dvm_fused_store(&b, dvm_fused_output(&b, DVM_F32), next_val[i - first]);
      nout++;
    }
  }
  if (!nout) { /* nothing reads what the group makes: dead code, not a call */
    dvm_status_free(b.error);
    return NULL;
  }
  void *payload;
  size_t size;
  dvm_status *st = dvm_fused_builder_finish(&b, &payload, &size);
  if (st) return dvm_status_annotate(st, "fusing nodes \"%s\" to \"%s\"", g->nodes[first]->name, g->nodes[end - 1]->name);
  char name[32];
  snprintf(name, sizeof name, "fused@%d", L->fused++);
  int kid = dvmc_emit_kernel(L->e, name, DVM_DEVICE_CPU, 1, payload, size);
  free(payload);
  int64_t w[3 + 1 + DVM_FUSED_MAX_OUTPUTS + 1 + DVM_FUSED_MAX_INPUTS + 1];
  int nw = 0, shape_reg = lw_shape_of_exprs(L, shape->rank, shape->dims);
  w[nw++] = kid;
  w[nw++] = -1;
  w[nw++] = nout;
  for (int k = 0; k < nout; k++) {
    int r = dvmc_fn_reg(L->f);
    lw_emit_alloc(L, r, DVM_F32, shape_reg, shape->rank, shape->dims);
    if (!lw_bind(L, outs[k], r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    w[nw++] = r;
  }
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape_reg);
  w[nw++] = nin;
  for (int k = 0; k < nin; k++) {
    int r;
    if ((st = lw_reg_of(L, ext[k], &r))) return st;
    w[nw++] = r;
  }
  w[nw++] = 0;
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, w, nw);
  return NULL;
}

