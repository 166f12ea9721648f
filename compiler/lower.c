/* Lowering a graph to bytecode (see lower.h; the files it is made of are
 * listed in lowering.h).
 *
 * v1 is straightforward and always correct: each node's output shapes come
 * from inference as scalar code, or from its kernel's shape function at
 * run time; outputs are allocated (top-level ones of known size in the
 * slots the memory plan lays out at the end, plan.h; the rest from the
 * pool), and the kernel is invoked; registers are released after their
 * last use, which is where the plan sees a value die. ONNX attributes and
 * constant inputs become kernel attributes as each op's row in ops.def says. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lower.h"
#include "lowering.h"
#include "ops/optable.h"

/* Whether v is g's own value (not an enclosing graph's). */
int lw_owns(const dvmc_graph *g, const dvmc_value *v) {
  return v && v->id >= 0 && v->id < g->nvalues && g->values[v->id] == v;
}

/* n's input 0 is f16 and its kernel takes f32 but not f16: it runs on f32
 * copies (lw_via_f32), as ONNX Runtime runs such nodes. */
static int f32_only(const dvmc_node *n, const op_rule *r) {
  char base[64];
  const dvmc_value *x = n->nin ? n->in[0] : NULL;
  const dvm_kernel_def *k = x && x->typed && x->dtype == DVM_F16 && r->kernel ? dvm_ops_find_entry(r->kernel, DVM_DEVICE_CPU, base) : NULL;
  return k && (k->dtypes & DVM_DTYPE_BIT(DVM_F32)) && !(k->dtypes & DVM_DTYPE_BIT(DVM_F16));
}

/* The values of g a node reads: its inputs, and the values of g its
 * subgraphs read (a branch or loop body reading an outer value uses it
 * where the If or Loop runs). Each once, marked with the node's stamp. */
static void add_use(const dvmc_graph *g, const dvmc_value *v, int *mark, int stamp, id_list *l) {
  if (!lw_owns(g, v) || mark[v->id] == stamp) return;
  mark[v->id] = stamp;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    int *p = realloc(l->ids, sizeof *p * (size_t)cap);
    if (!p) {
      l->oom = 1;
      return;
    }
    l->ids = p;
    l->cap = cap;
  }
  l->ids[l->n++] = v->id;
}

static void node_uses(const dvmc_graph *g, const dvmc_node *n, int *mark, int stamp, id_list *l) {
  for (int k = 0; k < n->nin; k++) add_use(g, n->in[k], mark, stamp, l);
  for (int a = 0; a < n->nattrs; a++) {
    const dvmc_graph *sub = n->attrs[a].type == DVMC_ATTR_GRAPH ? n->attrs[a].g : NULL;
    for (int i = 0; sub && i < sub->nnodes; i++) node_uses(g, sub->nodes[i], mark, stamp, l);
    for (int i = 0; sub && i < sub->noutputs; i++) add_use(g, sub->outputs[i], mark, stamp, l);
  }
}

/* Lowers the nodes of g (the main graph or a branch or loop body). Values
 * of g are released after their last use in g; values of enclosing graphs
 * are left alone (a loop body runs again), and g's outputs are kept for the
 * caller. */
dvm_status *lw_lower_graph(lowering *L, const dvmc_graph *g) {
  dvm_status *st = NULL;
  size_t nv = (size_t)(g->nvalues ? g->nvalues : 1);
  int *uses = calloc(nv, sizeof *uses), *mark = malloc(nv * sizeof *mark);
  id_list *reads = calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof *reads);
  int oom = !uses || !mark || !reads;
  for (size_t v = 0; !oom && v < nv; v++) mark[v] = -1;
  for (int i = 0; !oom && i < g->nnodes; i++) {
    node_uses(g, g->nodes[i], mark, i, &reads[i]);
    oom |= reads[i].oom;
    for (int k = 0; k < reads[i].n; k++) uses[reads[i].ids[k]]++;
  }
  for (int i = 0; !oom && i < g->noutputs; i++)
    if (lw_owns(g, g->outputs[i])) uses[g->outputs[i]->id] += 1 << 24; /* kept for the caller */
  if (oom) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  size_t scoped_at = L->nscoped;
  int group_end = 0; /* nodes before it belong to the fused group emitted last */
  for (int i = 0; i < g->nnodes && !st; i++) {
    const dvmc_node *n = g->nodes[i];
    const op_rule *r = lw_find_rule(n);
    dvmc_fn_loc(L->f, n->name);
    if (i >= group_end && L->fuse) {
      int end = L->stitch ? lw_stitch_at(L, g, i, uses, reads) : i;
      if (end == i) end = lw_group_at(L, g, i);
      if (end > i) {
        if ((st = lw_lower_group(L, g, i, end, uses, reads))) break;
        for (int j = i; j < end; j++) /* the group's reads, now done */
          for (int k = 0; k < reads[j].n; k++) {
            int v = reads[j].ids[k], reg = lw_lookup(L, g->values[v]);
            if (--uses[v] == 0 && reg >= 0) dvmc_fn_RELEASE(L->f, reg);
          }
        for (int j = i; j < end; j++) { /* outputs nothing reads */
          const dvmc_value *o = g->nodes[j]->out[0];
          int reg = lw_lookup(L, o);
          if (reg >= 0 && lw_owns(g, o) && uses[o->id] == 0) dvmc_fn_RELEASE(L->f, reg);
        }
        group_end = end;
        i = end - 1;
        continue;
      }
    }
    if (!r) {
      st = lw_unsupported(n, "the op is not supported");
      break;
    }
    if (n->opset < r->min_opset) {
      st = lw_unsupported(n, "opsets before %d are not supported for %s", r->min_opset, n->op);
      break;
    }
    int folded = n->nout > 0;
    for (int k = 0; k < n->nout; k++) folded &= lw_foldable(L, n->out[k]);
    if (!folded && ((st = lw_check_attrs(n, r)) || (st = lw_check_values(n)) || (st = lw_check_kinds(n)) ||
                    (st = f32_only(n, r) ? lw_via_f32(L, n, r) : r->lower(L, n, r))))
      break;
    if (!folded && L->depth == 0 && !lw_bind_data_dims(L, n)) {
      st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
      break;
    }
    for (int k = 0; k < reads[i].n; k++) { /* values whose last reader this was */
      int v = reads[i].ids[k], reg = lw_lookup(L, g->values[v]);
      if (--uses[v] == 0 && reg >= 0) dvmc_fn_RELEASE(L->f, reg);
    }
    for (int k = 0; k < n->nout; k++) { /* outputs nothing reads */
      int reg = n->out[k] ? lw_lookup(L, n->out[k]) : -1;
      if (reg >= 0 && lw_owns(g, n->out[k]) && uses[n->out[k]->id] == 0) dvmc_fn_RELEASE(L->f, reg);
    }
  }
  for (int i = 0; reads && i < g->nnodes; i++) free(reads[i].ids);
  free(reads);
  free(uses);
  free(mark);
  /* constants a branch or body loaded are that region's: drop them */
  if (L->depth > 0 && !lw_drop_scoped(L, scoped_at) && !st) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  L->nscoped = scoped_at;
  return st;
}

/* ---- the function ---- */

/* Whether every symbol e names is an identifier (the info section's rule). */
static int identifiers_only(const dvmc_expr *e) {
  const char *name = dvmc_expr_sym_name(e);
  if (name)
    return (isalpha((unsigned char)name[0]) || name[0] == '_') &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") == strlen(name);
  if (dvmc_expr_kind_of(e) == DVMC_E_CONST) return 1;
  for (int i = 0; i < dvmc_expr_arity(e); i++)
    if (!identifiers_only(dvmc_expr_arg(e, i))) return 0;
  return 1;
}

/* The memory plan's question: may this kernel's output 0 take an input's
 * memory (dvm_kernel_def.inplace). */
static int kernel_inplace(void *ctx, int64_t k) {
  const char *name = dvmc_emit_kernel_name(ctx, k);
  char base[64];
  const dvm_kernel_def *def = name ? dvm_ops_find_entry(name, DVM_DEVICE_CPU, base) : NULL;
  return def && def->inplace;
}

/* Applies the memory plan (plan.h) once the code is complete: the slots'
 * sizes are computed right after the guards (emitted at the end, then
 * moved to `head`); each slot's storage is made just before its first site
 * and its register released just after its last one (the views keep it
 * until they die); the sites left outside become plain allocs. */
static dvm_status *finish_plan(lowering *L, uint32_t head) {
  if (dvmc_emit_out_of_memory(L->e)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  uint32_t ncode;
  const int64_t *code = dvmc_fn_code(L->f, &ncode);
  dvmc_plan p;
  dvm_status *st = dvmc_plan_memory(L->c->exprs, code, ncode, L->sites, L->nsites, kernel_inplace, L->e, &p);
  if (st) return st;
  int *reg = malloc(2 * ((size_t)p.nslots + 1) * sizeof *reg), *size = reg + p.nslots + 1; /* storages, sizes */
  if (!reg) {
    dvmc_plan_free(&p);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  uint32_t from = dvmc_fn_here(L->f);
  L->nmemo = 0; /* the body's registers are not set yet where this runs */
  dvmc_fn_loc(L->f, "memory plan");
  int zero = lw_expr_reg(L, dvmc_const(L->c->exprs, 0));
  for (int k = 0; k < p.nslots; k++) size[k] = lw_expr_reg(L, p.size[k]);
  dvmc_fn_hoist(L->f, head, from);
  uint32_t moved = dvmc_fn_here(L->f) - from;
  for (int k = 0; k < p.nslots; k++) reg[k] = dvmc_fn_reg(L->f);
  /* the edits, in code order (sites are), made in one pass over the code */
  dvmc_fn_edit *ed = malloc(3 * ((size_t)L->nsites + 1) * sizeof *ed);
  dvm_words ins = {0}; /* the edits' instructions */
  int ned = 0, oom = !ed;
  code = dvmc_fn_code(L->f, &ncode);
  for (int i = 0; ed && i < L->nsites; i++) {
    uint32_t w = L->sites[i].word + moved;
    int k = L->sites[i].slot;
    dvm_ops_ALLOC_TENSOR a = dvm_decode_ALLOC_TENSOR(code + w);
    if (k < 0) { /* a plain alloc */
      ed[ned++] = (dvmc_fn_edit){w, 1, ins.n};
      dvm_encode_ALLOC(&ins, &oom, a.dst, a.dtype, a.shape, DVM_DEVICE_CPU);
      continue;
    }
    if (p.first[k] == i) {
      ed[ned++] = (dvmc_fn_edit){w, 0, ins.n};
      dvm_encode_ALLOC_STORAGE(&ins, &oom, reg[k], size[k], DVM_DEVICE_CPU, 64);
    }
    ed[ned++] = (dvmc_fn_edit){w, 1, ins.n}; /* at the slot's start */
    dvm_encode_ALLOC_TENSOR(&ins, &oom, a.dst, reg[k], zero, a.dtype, a.shape);
    if (p.last[k] == i) {
      ed[ned++] = (dvmc_fn_edit){(uint32_t)(a.end - code), 0, ins.n};
      dvm_encode_RELEASE(&ins, &oom, reg[k]);
    }
  }
  if (!oom) dvmc_fn_edit_code(L->f, ed, ned, &ins);
  free(ed);
  free(ins.v);
  free(reg);
  if (oom) {
    dvmc_plan_free(&p);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  /* the peak formula for tools, where the file can hold it: the verifier
   * takes up to 4096 bytes naming symbols that are identifiers */
  char buf[4097];
  if (strlen(dvmc_expr_str(p.peak, buf, sizeof buf)) < sizeof buf - 1 && identifiers_only(p.peak)) {
    dvmc_fn_info(L->f, "peak", buf);
    if (p.peak_bound != p.peak && strlen(dvmc_expr_str(p.peak_bound, buf, sizeof buf)) < sizeof buf - 1 &&
        identifiers_only(p.peak_bound))
      dvmc_fn_info(L->f, "peak_bound", buf);
    /* tensors the formula does not count make it a lower bound */
    snprintf(buf, sizeof buf, "%d", L->unplanned);
    if (L->unplanned) dvmc_fn_info(L->f, "unplanned", buf);
  }
  dvmc_plan_free(&p);
  return NULL;
}

/* A dim for messages: the first input dim that is e, else e's text. */
static void describe_dim(const dvmc_graph *g, const dvmc_expr *e, char *buf, size_t size) {
  char t[256];
  dvmc_expr_str(e, t, sizeof t);
  for (int i = 0; i < g->ninputs; i++)
    for (int d = 0; d < g->inputs[i]->rank; d++)
      if (g->inputs[i]->dims[d] == e) {
        snprintf(buf, size, "input \"%s\" dim %d (%s)", g->inputs[i]->name, d, t);
        return;
      }
  snprintf(buf, size, "dim %s", t);
}

/* The relations inference collected (ir.h), checked right after the guards
 * so that inputs whose dims do not fit fail there, named, rather than
 * inside a kernel. Relations over dims no guard binds stay the kernels'. */
static void emit_constraints(lowering *L, const dvmc_graph *g) {
  for (int i = 0; i < g->nconstraints; i++) {
    const dvmc_constraint *k = &g->constraints[i];
    if (k->unified || !lw_emittable(L, k->a) || !lw_emittable(L, k->b)) continue;
    dvmc_fn_loc(L->f, k->node->name);
    int a = lw_expr_reg(L, k->a), b = lw_expr_reg(L, k->b), ok = dvmc_fn_reg(L->f);
    dvmc_fn_EQ(L->f, ok, a, b);
    if (k->rel == DVMC_REL_EQ_OR_ONE) {
      int one = lw_expr_reg(L, dvmc_const(L->c->exprs, 1));
      for (int j = 0; j < 2; j++) { /* ok = ok || x == 1 */
        int t = dvmc_fn_reg(L->f);
        dvmc_fn_EQ(L->f, t, j ? b : a, one);
        dvmc_fn_MAX(L->f, ok, ok, t);
      }
    }
    char da[320], db[320], msg[1024];
    describe_dim(g, k->a, da, sizeof da);
    describe_dim(g, k->b, db, sizeof db);
    snprintf(msg, sizeof msg, "%s must equal %s%s (%s in node \"%s\"), got {} and {}", db, da,
             k->rel == DVMC_REL_EQ_OR_ONE ? " or one of them be 1" : "", k->why, k->node->name);
    dvmc_fn_CHECK_WITH(L->f, ok, dvmc_emit_string(L->e, msg), DVM_LIST(b, a));
  }
}

static dvm_status *signature(lowering *L, const dvmc_value *v, dvm_sig *s) {
  memset(s, 0, sizeof *s);
  s->name = v->name;
  if (v->kind != DVMC_TENSOR) { /* a sequence or optional: a tuple of tensors of its dtype */
    s->kind = DVM_VAL_TUPLE;
    s->dtype = v->typed ? (uint8_t)(1 + v->dtype) : 0;
    s->rank = -1;
    return NULL;
  }
  s->kind = DVM_VAL_TENSOR;
  s->dtype = (uint8_t)v->dtype;
  s->rank = (int8_t)v->rank;
  if (!v->typed) s->kind = DVM_VAL_NONE;
  for (int d = 0; d < v->rank; d++) {
    int64_t c;
    const char *sym = dvmc_expr_sym_name(v->dims[d]);
    if (dvmc_expr_is_const(v->dims[d], &c)) s->dims[d] = c;
    else if (sym && lw_data_reg(L, v->dims[d]) < 0) { /* a data-dependent dim is no guard's */
      int64_t lo, hi;
      dvmc_sym_range(v->dims[d], &lo, &hi);
      int k = dvmc_fn_sym(L->f, sym, lo, hi);
      s->dims[d] = DVM_DIM_SYM(k);
    } else {
      s->dims[d] = DVM_DIM_ANY;
    }
  }
  return NULL;
}

/* A result that its own `alloc` makes becomes `alloc_result`
 * (dvmc_plan_results), so a caller that binds that result
 * (dvm_vm_invoke_bound) has it written in place. */
static dvm_status *bind_results(lowering *L) {
  uint32_t ncode;
  const int64_t *code = dvmc_fn_code(L->f, &ncode);
  int nregs = dvmc_fn_nregs(L->f);
  int *result_of = malloc(((size_t)nregs + 1) * sizeof *result_of);
  dvmc_fn_edit *ed = malloc(((size_t)L->g->noutputs + 1) * sizeof *ed);
  dvm_words ins = {0};
  int oom = 0, ned = 0;
  dvm_status *st = result_of && ed ? dvmc_plan_results(code, ncode, nregs, result_of) : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t w = 0; !st && w < ncode; w += dvm_instr_length(code, ncode, w)) {
    if (code[w] != DVM_OP_ALLOC) continue;
    dvm_ops_ALLOC a = dvm_decode_ALLOC(code + w);
    if (result_of[a.dst] < 0) continue;
    ed[ned++] = (dvmc_fn_edit){w, 1, ins.n};
    dvm_encode_ALLOC_RESULT(&ins, &oom, a.dst, a.dtype, a.shape, a.device, result_of[a.dst]);
  }
  if (!st && oom) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (!st && ned) dvmc_fn_edit_code(L->f, ed, ned, &ins);
  free(ins.v);
  free(result_of);
  free(ed);
  return st;
}

dvm_status *dvmc_lower(dvmc_ctx *c, const dvmc_graph *g, const dvmc_options *opts, uint8_t **bytes,
                       size_t *size) {
  lowering L = {.c = c, .g = g, .fuse = !(opts && opts->no_fusion),
                .stitch = !(opts && (opts->no_fusion || opts->no_stitch)), .plan = !(opts && opts->no_plan)};
  dvm_status *st = dvmc_emit_create(&L.e);
  if (st) return st;
  if (opts && opts->data_dir) dvmc_emit_reference(L.e, c, opts->data_dir);
  L.f = dvmc_emit_func(L.e, opts && opts->function ? opts->function : "main");
  if (!L.f) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }
  /* parameters take the first registers, in order */
  dvm_sig sigs[256];
  if (g->ninputs > 256) {
    st = dvm_status_new(DVM_UNIMPLEMENTED, "more than 256 graph inputs");
    goto done;
  }
  for (int i = 0; i < g->ninputs; i++) {
    const dvmc_value *v = g->inputs[i];
    if (!v->typed || (v->rank < 0 && v->kind == DVMC_TENSOR)) {
      st = dvm_status_new(DVM_UNIMPLEMENTED, "graph input \"%s\" has no tensor type", v->name);
      goto done;
    }
    int r = dvmc_fn_param(L.f, &(dvm_sig){.name = v->name});
    if (!lw_bind(&L, v, r)) {
      st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
      goto done;
    }
  }
  /* signatures name symbols, which take registers after the parameters */
  for (int i = 0; i < g->ninputs; i++) signature(&L, g->inputs[i], &sigs[i]);
  /* (the params were pushed with placeholder signatures: set them now) */
  for (int i = 0; i < g->ninputs; i++) {
    dvmc_fn_set_param(L.f, i, &sigs[i]);
    dvmc_fn_loc(L.f, "input");
    dvmc_fn_GUARD(L.f, i, i);
  }
  emit_constraints(&L, g);
  uint32_t head = dvmc_fn_here(L.f);
  L.arena = dvmc_fn_reg(L.f);
  if ((st = lw_lower_graph(&L, g))) goto done;
  dvmc_fn_loc(L.f, NULL);
  int64_t w[256];
  if (g->noutputs > 256) {
    st = dvm_status_new(DVM_UNIMPLEMENTED, "more than 256 graph outputs");
    goto done;
  }
  char maps[256 * 4] = "";
  for (int i = 0; i < g->noutputs; i++) {
    int reg;
    dvm_sig s;
    if ((st = lw_reg_of(&L, g->outputs[i], &reg))) goto done;
    w[i] = reg;
    signature(&L, g->outputs[i], &s);
    dvmc_fn_result(L.f, &s);
    const dvmc_node *p = g->outputs[i]->producer;
    if (p && !strcmp(p->op, "ZipMap")) snprintf(maps + strlen(maps), sizeof maps - strlen(maps), "%s%d", maps[0] ? " " : "", i);
  }
  if (maps[0]) dvmc_fn_info(L.f, "maps", maps); /* ZipMap's (labels, probabilities) tuples (lower_strings.c) */
  dvmc_fn_RET(L.f, (dvm_list){g->noutputs, w});
  if (L.plan && (st = finish_plan(&L, head))) goto done;
  if ((st = bind_results(&L))) goto done;
  st = dvmc_emit_finish(L.e, bytes, size);
done:
  free(L.map);
  free(L.scoped);
  free(L.memo);
  free(L.memo_reg);
  free(L.data_syms);
  free(L.data_regs);
  free(L.sites);
  dvmc_emit_destroy(L.e);
  return st;
}
