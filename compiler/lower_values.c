/* Values as registers: the value -> register map, constants loaded where
 * first used, allocation (memory-plan sites at top level), and symbolic
 * dims computed as scalar code from the guards' registers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>

#include "lowering.h"

/* ---- value -> register ---- */

static size_t slot(const lowering *L, const dvmc_value *v) {
  size_t h = ((uintptr_t)v >> 4) * 11400714819323198485ull;
  size_t i = h & (L->cap - 1);
  while (L->map[i].v && L->map[i].v != v) i = (i + 1) & (L->cap - 1);
  return i;
}

int lw_bind(lowering *L, const dvmc_value *v, int reg) {
  if ((L->n + 1) * 2 > L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 256;
    binding *old = L->map;
    size_t oldcap = L->cap;
    L->map = calloc(cap, sizeof *L->map);
    if (!L->map) {
      L->map = old;
      return 0;
    }
    L->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].v) L->map[slot(L, old[i].v)] = old[i];
    free(old);
  }
  size_t i = slot(L, v);
  if (!L->map[i].v) L->n++;
  L->map[i] = (binding){v, reg};
  return 1;
}

int lw_lookup(const lowering *L, const dvmc_value *v) {
  if (!L->cap) return -1;
  size_t i = slot(L, v);
  return L->map[i].v ? L->map[i].reg : -1;
}

static dvm_status *node_status(dvm_code code, const dvmc_node *n, const char *fmt, va_list ap) {
  return dvm_status_annotate(dvm_status_newv(code, fmt, ap), "node \"%s\" (%s, opset %d)", n->name, n->op,
                             n->opset);
}

dvm_status *lw_unsupported(const dvmc_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = node_status(DVM_UNIMPLEMENTED, n, fmt, ap);
  va_end(ap);
  return st;
}

/* A model that is wrong (not one dvm cannot do): a bad attribute value. */
dvm_status *lw_invalid(const dvmc_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = node_status(DVM_INVALID_ARGUMENT, n, fmt, ap);
  va_end(ap);
  return st;
}

static int bound(const lowering *L, const dvmc_expr *e, int data);

/* A value loaded inside a branch or loop body (a constant, a folded shape)
 * is that region's: lower_graph drops it on leaving, so code after the
 * region loads it again. Returns 0 when out of memory. */
static int scope(lowering *L, const dvmc_value *v) {
  if (L->depth == 0) return 1;
  if (L->nscoped == L->scoped_cap) {
    size_t cap = L->scoped_cap ? L->scoped_cap * 2 : 32;
    const dvmc_value **p = realloc(L->scoped, cap * sizeof *p);
    if (!p) return 0;
    L->scoped = p;
    L->scoped_cap = cap;
  }
  L->scoped[L->nscoped++] = v;
  return 1;
}

/* Releases and unbinds the values loaded in the current region since
 * scoped[from] (scope); 0 when out of memory. */
int lw_drop_scoped(lowering *L, size_t from) {
  int ok = 1;
  for (size_t i = from; i < L->nscoped; i++) {
    int reg = lw_lookup(L, L->scoped[i]);
    if (reg < 0) continue;
    dvmc_fn_RELEASE(L->f, reg);
    ok &= lw_bind(L, L->scoped[i], -1);
  }
  L->nscoped = from;
  return ok;
}

/* The register holding v; constants are loaded where first used, folded
 * shapes made into tensors where a kernel needs them as data. */
dvm_status *lw_reg_of(lowering *L, const dvmc_value *v, int *out) {
  if (!v) return dvm_status_new(DVM_INVALID_ARGUMENT, "an input the node needs is omitted");
  int r = lw_lookup(L, v);
  if (r < 0 && v->constant) {
    int k = dvmc_emit_const(L->e, v->name, v->constant);
    r = dvmc_fn_reg(L->f);
    if (k < 0 || !lw_bind(L, v, r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    dvmc_fn_CONST(L->f, r, k);
    if (!scope(L, v)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  if (r < 0 && !v->constant && lw_foldable(L, v)) { /* a folded shape, needed as data here */
    int sh = lw_shape_of_exprs(L, v->nelems, v->elems), dims = dvmc_fn_reg(L->f), k;
    int64_t n = v->rank ? lw_emit_int(L, v->nelems) : 0;
    dvmc_fn_MAKE_SHAPE(L->f, dims, (dvm_list){v->rank, &n});
    r = dvmc_fn_reg(L->f);
    lw_emit_alloc(L, r, DVM_I64, dims, v->rank, (const dvmc_expr *[]){dvmc_const(L->c->exprs, v->nelems)});
    k = dvmc_emit_kernel(L->e, "from_shape", DVM_DEVICE_CPU, 1, NULL, 0);
    dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(r), DVM_NO_LIST, DVM_LIST(sh));
    dvmc_fn_RELEASE(L->f, sh);
    dvmc_fn_RELEASE(L->f, dims);
    if (!lw_bind(L, v, r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    if (!scope(L, v)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  if (r < 0) return dvm_status_new(DVM_INTERNAL, "value \"%s\" is used before it is defined", v->name);
  *out = r;
  return NULL;
}

/* ---- allocation ---- */

/* Allocates tensor `reg` of shape register `shape`. At top level, with its
 * dims known as expressions (dims not NULL), it is a site: an
 * alloc_tensor whose storage and offset operands the plan fills in at the end
 * (finish_plan). */
void lw_emit_alloc(lowering *L, int reg, dvm_dtype dt, int shape, int rank, const dvmc_expr *const *dims) {
  const dvmc_expr *bytes = dims ? dvmc_const(L->c->exprs, (int64_t)dvm_dtype_size(dt)) : NULL;
  for (int d = 0; bytes && d < rank; d++) bytes = dvmc_mul(L->c->exprs, bytes, dims[d]);
  /* slot sizes are computed after the guards: only guard-bound symbols there;
   * strings own their elements, so they take no slot (vm/string.c) */
  if (L->plan && L->depth == 0 && bytes && dt != DVM_STRING && bound(L, bytes, 0)) {
    if (L->nsites == L->sites_cap) {
      int cap = L->sites_cap ? L->sites_cap * 2 : 64;
      dvmc_plan_site *p = realloc(L->sites, (size_t)cap * sizeof *p);
      if (p) L->sites = p, L->sites_cap = cap;
      else L->c->oom = true; /* an unplanned alloc instead would change the bytes */
    }
    if (L->nsites < L->sites_cap) {
      L->sites[L->nsites++] = (dvmc_plan_site){.word = dvmc_fn_here(L->f), .bytes = bytes};
      dvmc_fn_ALLOC_TENSOR(L->f, reg, L->arena, L->arena, dt, shape);
      return;
    }
  }
  L->unplanned++;
  dvmc_fn_ALLOC(L->f, reg, dt, shape, DVM_DEVICE_CPU);
}

/* ---- attributes ---- */

int lw_emit_int(lowering *L, int64_t v) {
  int r = dvmc_fn_reg(L->f);
  dvmc_fn_IMM(L->f, r, v);
  return r;
}

int lw_const_reg(lowering *L, const dvmc_node *n, const char *what, const dvmc_tensor *t) {
  char name[160];
  snprintf(name, sizeof name, "%s.%s", n->name, what);
  int k = t ? dvmc_emit_const(L->e, name, t) : -1, r;
  if (k < 0) return -1;
  dvmc_fn_CONST(L->f, r = dvmc_fn_reg(L->f), k);
  return r;
}

int lw_emit_float(lowering *L, double v) {
  int r = dvmc_fn_reg(L->f);
  int64_t bits;
  memcpy(&bits, &v, sizeof bits);
  dvmc_fn_FIMM(L->f, r, bits);
  return r;
}

int lw_emit_shape(lowering *L, int n, const int64_t *v) {
  int64_t w[DVM_MAX_RANK];
  int r = dvmc_fn_reg(L->f);
  for (int i = 0; i < n; i++) w[i] = lw_emit_int(L, v[i]);
  dvmc_fn_MAKE_SHAPE(L->f, r, (dvm_list){n, w});
  return r;
}

/* ---- symbolic dims as code ---- */

/* The register of a symbol read from a node's output, or -1. */
int lw_data_reg(const lowering *L, const dvmc_expr *sym) {
  for (int i = 0; i < L->ndata; i++)
    if (L->data_syms[i] == sym) return L->data_regs[i];
  return -1;
}

/* Whether every symbol of e is bound: by a guard, or (with data) read from
 * a node's output. */
static int bound(const lowering *L, const dvmc_expr *e, int data) {
  if (!e) return 0;
  switch (dvmc_expr_kind_of(e)) {
  case DVMC_E_CONST: return 1;
  case DVMC_E_SYM: return dvmc_fn_sym_find(L->f, dvmc_expr_sym_name(e)) >= 0 || (data && lw_data_reg(L, e) >= 0);
  default:
    for (int i = 0; i < dvmc_expr_arity(e); i++)
      if (!bound(L, dvmc_expr_arg(e, i), data)) return 0;
    return 1;
  }
}

/* Whether e can be computed here. */
int lw_emittable(const lowering *L, const dvmc_expr *e) { return bound(L, e, 1); }

/* Reads the symbols that first appear in a top-level node's output dims
 * (data-dependent dims, infer.c) from the output once the node has run. */
int lw_bind_data_dims(lowering *L, const dvmc_node *n) {
  for (int i = 0; i < n->nout; i++) {
    const dvmc_value *v = n->out[i];
    int t = v ? lw_lookup(L, v) : -1;
    for (int d = 0; t >= 0 && d < v->rank; d++) {
      const dvmc_expr *e = v->dims[d];
      if (!dvmc_expr_sym_name(e) || lw_emittable(L, e)) continue;
      if (L->ndata == L->data_cap) {
        int cap = L->data_cap ? 2 * L->data_cap : 8;
        const dvmc_expr **s = realloc(L->data_syms, (size_t)cap * sizeof *s);
        if (s) L->data_syms = s;
        int *r = s ? realloc(L->data_regs, (size_t)cap * sizeof *r) : NULL;
        if (!r) return 0;
        L->data_regs = r;
        L->data_cap = cap;
      }
      L->data_syms[L->ndata] = e;
      L->data_regs[L->ndata] = dvmc_fn_reg(L->f);
      dvmc_fn_DIM(L->f, L->data_regs[L->ndata++], t, d);
    }
  }
  return 1;
}

int lw_all_emittable(const lowering *L, int n, const dvmc_expr *const *e) {
  for (int i = 0; i < n; i++)
    if (!lw_emittable(L, e[i])) return 0;
  return 1;
}

/* The register holding e's value: scalar arithmetic on the symbols'
 * registers. Interning makes equal expressions one pointer, so the memo is
 * common-subexpression elimination for free. */
int lw_expr_reg(lowering *L, const dvmc_expr *e) {
  for (size_t i = 0; i < L->nmemo; i++)
    if (L->memo[i] == e) return L->memo_reg[i];
  int r;
  switch (dvmc_expr_kind_of(e)) {
  case DVMC_E_CONST: r = lw_emit_int(L, dvmc_expr_value(e)); break;
  case DVMC_E_SYM: {
    int k = dvmc_fn_sym_find(L->f, dvmc_expr_sym_name(e));
    return k >= 0 ? dvmc_fn_sym_reg(L->f, k) : lw_data_reg(L, e);
  }
  case DVMC_E_SUM:
    r = -1;
    for (int i = 0; i < dvmc_expr_arity(e); i++) {
      const dvmc_expr *m = dvmc_expr_arg(e, i);
      int64_t coef = dvmc_expr_coef(e, i);
      int t = dvmc_expr_kind_of(m) == DVMC_E_CONST ? lw_emit_int(L, coef) : lw_expr_reg(L, m);
      if (dvmc_expr_kind_of(m) != DVMC_E_CONST && coef != 1) {
        int c = lw_emit_int(L, coef), p = dvmc_fn_reg(L->f);
        dvmc_fn_MUL(L->f, p, t, c);
        t = p;
      }
      if (r < 0) {
        r = t;
      } else {
        int sum = dvmc_fn_reg(L->f);
        dvmc_fn_ADD(L->f, sum, r, t);
        r = sum;
      }
    }
    break;
  case DVMC_E_PRODUCT:
    r = lw_expr_reg(L, dvmc_expr_arg(e, 0));
    for (int i = 1; i < dvmc_expr_arity(e); i++) {
      int p = dvmc_fn_reg(L->f);
      dvmc_fn_MUL(L->f, p, r, lw_expr_reg(L, dvmc_expr_arg(e, i)));
      r = p;
    }
    break;
  default: {
    static void (*const ops[])(dvmc_fn *, int64_t, int64_t, int64_t) = {
        [DVMC_E_FLOORDIV] = dvmc_fn_DIV, [DVMC_E_MOD] = dvmc_fn_MOD, [DVMC_E_MIN] = dvmc_fn_MIN,
        [DVMC_E_MAX] = dvmc_fn_MAX};
    int a = lw_expr_reg(L, dvmc_expr_arg(e, 0)), b = lw_expr_reg(L, dvmc_expr_arg(e, 1));
    r = dvmc_fn_reg(L->f);
    ops[dvmc_expr_kind_of(e)](L->f, r, a, b);
    break;
  }
  }
  if (L->depth == 0 && L->nmemo < 1u << 20) { /* only top-level code dominates what follows */
    if (L->nmemo == L->memo_cap) {
      size_t cap = L->memo_cap ? L->memo_cap * 2 : 64;
      const dvmc_expr **m = realloc(L->memo, cap * sizeof *m);
      int *mr = m ? realloc(L->memo_reg, cap * sizeof *mr) : NULL;
      if (m) L->memo = m;
      if (mr) L->memo_reg = mr;
      if (!m || !mr) {
        L->c->oom = true; /* fewer reuses would change the bytes, not just the speed */
        return r;
      }
      L->memo_cap = cap;
    }
    L->memo[L->nmemo] = e;
    L->memo_reg[L->nmemo++] = r;
  }
  return r;
}

/* A shape value made of expressions (all emittable). */
int lw_shape_of_exprs(lowering *L, int n, const dvmc_expr *const *e) {
  int64_t w[DVM_MAX_RANK];
  for (int i = 0; i < n; i++) w[i] = lw_expr_reg(L, e[i]);
  int r = dvmc_fn_reg(L->f);
  dvmc_fn_MAKE_SHAPE(L->f, r, (dvm_list){n, w});
  return r;
}

/* Whether v's contents can be made from expressions here, so the node that
 * computes it need not run: the shape arithmetic of exported graphs. */
int lw_foldable(const lowering *L, const dvmc_value *v) {
  return v && v->typed && v->dtype == DVM_I64 && v->rank >= 0 && v->rank <= 1 && v->nelems <= DVM_MAX_RANK &&
         dvmc_value_elems_known(v) && lw_all_emittable(L, v->nelems, v->elems);
}

/* Reads a constant integer tensor (an input turned attribute). */
int lw_const_ints(const dvmc_value *v, int64_t *out, int max) {
  const dvmc_tensor *t = v ? v->constant : NULL;
  if (!t || (t->dtype != DVM_I64 && t->dtype != DVM_I32) || t->rank > 1) return -1;
  int64_t n = t->rank ? t->dims[0] : 1;
  if (n > max) return -1;
  for (int64_t i = 0; i < n; i++)
    out[i] = t->dtype == DVM_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
  return (int)n;
}

int lw_const_float(const dvmc_value *v, double *out) {
  const dvmc_tensor *t = v ? v->constant : NULL;
  if (!t || t->nbytes != dvm_dtype_size(t->dtype)) return 0;
  switch (t->dtype) {
  case DVM_F32: *out = *(const float *)t->data; return 1;
  case DVM_F64: *out = *(const double *)t->data; return 1;
  case DVM_I64: *out = (double)*(const int64_t *)t->data; return 1;
  case DVM_I32: *out = *(const int32_t *)t->data; return 1;
  default: return 0;
  }
}

int lw_is_f32(const dvmc_value *v) { return v && v->typed && v->dtype == DVM_F32; }
