/* Lowering a graph to bytecode (see lower.h).
 *
 * v1 is straightforward and always correct: each node's output shapes come
 * from its kernel's shape function at run time (the op table in ops/ names
 * it), outputs are allocated (top-level ones of known size in the slots
 * the memory plan lays out at the end, plan.h; the rest from the pool),
 * and the kernel is invoked; registers are released after their last use,
 * which is where the plan sees a value die. ONNX attributes and constant inputs
 * become kernel attributes as each op's rule below says. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "ops/cpu/fused.h"
#include "kernel.h"
#include "infer.h"
#include "lower.h"
#include "ops.h"
#include "onnx_import.h"
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
  int fuse;                  /* fusion on */
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
  const dvmc_expr **data_syms; /* symbols read from a node's output (infer.c's data_dim), */
  int *data_regs;              /* and their registers */
  int ndata, data_cap;
} lowering;

/* ---- value -> register ---- */

static size_t slot(const lowering *L, const dvmc_value *v) {
  size_t h = ((uintptr_t)v >> 4) * 11400714819323198485ull;
  size_t i = h & (L->cap - 1);
  while (L->map[i].v && L->map[i].v != v) i = (i + 1) & (L->cap - 1);
  return i;
}

static int bind(lowering *L, const dvmc_value *v, int reg) {
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

static int lookup(const lowering *L, const dvmc_value *v) {
  if (!L->cap) return -1;
  size_t i = slot(L, v);
  return L->map[i].v ? L->map[i].reg : -1;
}

static dvm_status *node_status(dvm_code code, const dvmc_node *n, const char *fmt, va_list ap) {
  return dvm_status_annotate(dvm_status_newv(code, fmt, ap), "node \"%s\" (%s, opset %d)", n->name, n->op,
                             n->opset);
}

static dvm_status *unsupported(const dvmc_node *n, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *unsupported(const dvmc_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = node_status(DVM_UNIMPLEMENTED, n, fmt, ap);
  va_end(ap);
  return st;
}

/* A model that is wrong (not one dvm cannot do): a bad attribute value. */
static dvm_status *invalid(const dvmc_node *n, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *invalid(const dvmc_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = node_status(DVM_INVALID_ARGUMENT, n, fmt, ap);
  va_end(ap);
  return st;
}

static int foldable(const lowering *L, const dvmc_value *v);
static int bound(const lowering *L, const dvmc_expr *e, int data);
static int shape_of_exprs(lowering *L, int n, const dvmc_expr *const *e);
static int emit_int(lowering *L, int64_t v);
static void emit_alloc(lowering *L, int reg, dvm_dtype dt, int shape, int rank, const dvmc_expr *const *dims);

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

/* The register holding v; constants are loaded where first used, folded
 * shapes made into tensors where a kernel needs them as data. */
static dvm_status *reg_of(lowering *L, const dvmc_value *v, int *out) {
  int r = lookup(L, v);
  if (r < 0 && v->constant) {
    int k = dvmc_emit_const(L->e, v->name, v->constant);
    r = dvmc_fn_reg(L->f);
    if (k < 0 || !bind(L, v, r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    dvmc_fn_op2(L->f, DVM_OP_CONST, r, k);
    if (!scope(L, v)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  if (r < 0 && !v->constant && foldable(L, v)) { /* a folded shape, needed as data here */
    int sh = shape_of_exprs(L, v->nelems, v->elems), dims = dvmc_fn_reg(L->f), k;
    int64_t w[2 + 1] = {dims, v->rank, 0};
    if (v->rank) w[2] = emit_int(L, v->nelems);
    dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, w, 2 + v->rank);
    r = dvmc_fn_reg(L->f);
    emit_alloc(L, r, DVM_I64, dims, v->rank, (const dvmc_expr *[]){dvmc_const(L->c->exprs, v->nelems)});
    k = dvmc_emit_kernel(L->e, "from_shape", DVM_DEVICE_CPU, 1, NULL, 0);
    dvmc_fn_emit(L->f, DVM_OP_INVOKE, (int64_t[]){k, -1, 1, r, 0, 1, sh}, 7);
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, sh);
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, dims);
    if (!bind(L, v, r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
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
static void emit_alloc(lowering *L, int reg, dvm_dtype dt, int shape, int rank, const dvmc_expr *const *dims) {
  const dvmc_expr *bytes = dims ? dvmc_const(L->c->exprs, (int64_t)dvm_dtype_size(dt)) : NULL;
  for (int d = 0; bytes && d < rank; d++) bytes = dvmc_mul(L->c->exprs, bytes, dims[d]);
  /* slot sizes are computed after the guards: only guard-bound symbols there */
  if (L->plan && L->depth == 0 && bytes && bound(L, bytes, 0)) {
    if (L->nsites == L->sites_cap) {
      int cap = L->sites_cap ? L->sites_cap * 2 : 64;
      dvmc_plan_site *p = realloc(L->sites, (size_t)cap * sizeof *p);
      if (p) L->sites = p, L->sites_cap = cap;
    }
    if (L->nsites < L->sites_cap) {
      L->sites[L->nsites++] = (dvmc_plan_site){.word = dvmc_fn_here(L->f), .bytes = bytes};
      dvmc_fn_emit(L->f, DVM_OP_ALLOC_TENSOR, (int64_t[]){reg, L->arena, L->arena, dt, shape}, 5);
      return;
    }
  }
  L->unplanned++;
  dvmc_fn_emit(L->f, DVM_OP_ALLOC, (int64_t[]){reg, dt, shape, DVM_DEVICE_CPU}, 4);
}

/* ---- attributes ---- */

static int emit_int(lowering *L, int64_t v) {
  int r = dvmc_fn_reg(L->f);
  dvmc_fn_op2(L->f, DVM_OP_IMM, r, v);
  return r;
}

static int emit_float(lowering *L, double v) {
  int r = dvmc_fn_reg(L->f);
  int64_t bits;
  memcpy(&bits, &v, sizeof bits);
  dvmc_fn_op2(L->f, DVM_OP_FIMM, r, bits);
  return r;
}

static int emit_shape(lowering *L, int n, const int64_t *v) {
  int64_t w[2 + DVM_MAX_RANK];
  w[0] = dvmc_fn_reg(L->f);
  w[1] = n;
  for (int i = 0; i < n; i++) w[2 + i] = emit_int(L, v[i]);
  dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, w, 2 + n);
  return (int)w[0];
}

/* ---- symbolic dims as code ---- */

/* The register of a symbol read from a node's output, or -1. */
static int data_reg(const lowering *L, const dvmc_expr *sym) {
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
  case DVMC_E_SYM: return dvmc_fn_sym_find(L->f, dvmc_expr_sym_name(e)) >= 0 || (data && data_reg(L, e) >= 0);
  default:
    for (int i = 0; i < dvmc_expr_arity(e); i++)
      if (!bound(L, dvmc_expr_arg(e, i), data)) return 0;
    return 1;
  }
}

/* Whether e can be computed here. */
static int emittable(const lowering *L, const dvmc_expr *e) { return bound(L, e, 1); }

/* Reads the symbols that first appear in a top-level node's output dims
 * (data-dependent dims, infer.c) from the output once the node has run. */
static int bind_data_dims(lowering *L, const dvmc_node *n) {
  for (int i = 0; i < n->nout; i++) {
    const dvmc_value *v = n->out[i];
    int t = v ? lookup(L, v) : -1;
    for (int d = 0; t >= 0 && d < v->rank; d++) {
      const dvmc_expr *e = v->dims[d];
      if (!dvmc_expr_sym_name(e) || emittable(L, e)) continue;
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
      dvmc_fn_op3(L->f, DVM_OP_DIM, L->data_regs[L->ndata++], t, d);
    }
  }
  return 1;
}

static int all_emittable(const lowering *L, int n, const dvmc_expr *const *e) {
  for (int i = 0; i < n; i++)
    if (!emittable(L, e[i])) return 0;
  return 1;
}

/* The register holding e's value: scalar arithmetic on the symbols'
 * registers. Interning makes equal expressions one pointer, so the memo is
 * common-subexpression elimination for free. */
static int expr_reg(lowering *L, const dvmc_expr *e) {
  for (size_t i = 0; i < L->nmemo; i++)
    if (L->memo[i] == e) return L->memo_reg[i];
  int r;
  switch (dvmc_expr_kind_of(e)) {
  case DVMC_E_CONST: r = emit_int(L, dvmc_expr_value(e)); break;
  case DVMC_E_SYM: {
    int k = dvmc_fn_sym_find(L->f, dvmc_expr_sym_name(e));
    return k >= 0 ? dvmc_fn_sym_reg(L->f, k) : data_reg(L, e);
  }
  case DVMC_E_SUM:
    r = -1;
    for (int i = 0; i < dvmc_expr_arity(e); i++) {
      const dvmc_expr *m = dvmc_expr_arg(e, i);
      int64_t coef = dvmc_expr_coef(e, i);
      int t = dvmc_expr_kind_of(m) == DVMC_E_CONST ? emit_int(L, coef) : expr_reg(L, m);
      if (dvmc_expr_kind_of(m) != DVMC_E_CONST && coef != 1) {
        int c = emit_int(L, coef), p = dvmc_fn_reg(L->f);
        dvmc_fn_op3(L->f, DVM_OP_MUL, p, t, c);
        t = p;
      }
      if (r < 0) {
        r = t;
      } else {
        int sum = dvmc_fn_reg(L->f);
        dvmc_fn_op3(L->f, DVM_OP_ADD, sum, r, t);
        r = sum;
      }
    }
    break;
  case DVMC_E_PRODUCT:
    r = expr_reg(L, dvmc_expr_arg(e, 0));
    for (int i = 1; i < dvmc_expr_arity(e); i++) {
      int p = dvmc_fn_reg(L->f);
      dvmc_fn_op3(L->f, DVM_OP_MUL, p, r, expr_reg(L, dvmc_expr_arg(e, i)));
      r = p;
    }
    break;
  default: {
    static const dvm_opcode ops[] = {[DVMC_E_FLOORDIV] = DVM_OP_DIV, [DVMC_E_MOD] = DVM_OP_MOD,
                                     [DVMC_E_MIN] = DVM_OP_MIN, [DVMC_E_MAX] = DVM_OP_MAX};
    int a = expr_reg(L, dvmc_expr_arg(e, 0)), b = expr_reg(L, dvmc_expr_arg(e, 1));
    r = dvmc_fn_reg(L->f);
    dvmc_fn_op3(L->f, ops[dvmc_expr_kind_of(e)], r, a, b);
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
      if (!m || !mr) return r;
      L->memo_cap = cap;
    }
    L->memo[L->nmemo] = e;
    L->memo_reg[L->nmemo++] = r;
  }
  return r;
}

/* A shape value made of expressions (all emittable). */
static int shape_of_exprs(lowering *L, int n, const dvmc_expr *const *e) {
  int64_t w[2 + DVM_MAX_RANK];
  for (int i = 0; i < n; i++) w[2 + i] = expr_reg(L, e[i]);
  w[0] = dvmc_fn_reg(L->f);
  w[1] = n;
  dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, w, 2 + n);
  return (int)w[0];
}

/* Whether v's contents can be made from expressions here, so the node that
 * computes it need not run: the shape arithmetic of exported graphs. */
static int foldable(const lowering *L, const dvmc_value *v) {
  return v && v->typed && v->dtype == DVM_I64 && v->rank >= 0 && v->rank <= 1 && v->nelems <= DVM_MAX_RANK &&
         dvmc_value_elems_known(v) && all_emittable(L, v->nelems, v->elems);
}

/* Reads a constant integer tensor (an input turned attribute). */
static int const_ints(const dvmc_value *v, int64_t *out, int max) {
  const dvmc_tensor *t = v ? v->constant : NULL;
  if (!t || (t->dtype != DVM_I64 && t->dtype != DVM_I32) || t->rank > 1) return -1;
  int64_t n = t->rank ? t->dims[0] : 1;
  if (n > max) return -1;
  for (int64_t i = 0; i < n; i++)
    out[i] = t->dtype == DVM_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
  return (int)n;
}

static int const_float(const dvmc_value *v, double *out) {
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

/* One attribute from the rule's spec: SOURCES:K, SOURCES:K=DEFAULT or
 * SOURCES:K? (optional: left out when absent; optional ones come last).
 * SOURCES is an ONNX attribute name, @N (constant input N), or several
 * separated by | (the first present wins: attributes moved to inputs in
 * later opsets). K is i (int), f (float), s (ints as a shape) or
 * e(a,b,c) (a string, as its index in the list). Returns the register, -1
 * when an optional attribute is absent, -2 with *st set on error. */
static int lower_attr(lowering *L, const dvmc_node *n, const char *spec, size_t len, dvm_status **st) {
  char buf[160];
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, spec, len);
  buf[len] = 0;
  int optional = buf[len - 1] == '?';
  if (optional) buf[len - 1] = 0;
  char *colon = strchr(buf, ':');
  if (!colon) {
    *st = dvm_status_new(DVM_INTERNAL, "bad attribute spec %s", spec);
    return -2;
  }
  *colon++ = 0;
  char kind = *colon;
  char *eq = strchr(colon, '=');
  if (eq) *eq++ = 0;
  const dvmc_attr *a = NULL;
  const dvmc_value *in = NULL;
  int idx = -1;
  for (char *src = strtok(buf, "|"); src && !a && !in; src = strtok(NULL, "|")) {
    if (src[0] == '@') {
      idx = atoi(src + 1);
      in = idx < n->nin ? n->in[idx] : NULL;
    } else {
      a = dvmc_attr_find(n, src);
    }
  }
  if (!a && !in && optional) return -1;
  if (in && !in->constant) { /* computed at run time: read on the host */
    int t, r = dvmc_fn_reg(L->f);
    if ((*st = reg_of(L, in, &t))) return -2;
    const char *fn = kind == 'f' ? "itemf" : kind == 's' ? "ints" : kind == 'i' ? "item" : NULL;
    if (!fn) {
      *st = unsupported(n, "input %d (\"%s\") must be a constant here", idx, in->name);
      return -2;
    }
    dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){dvmc_emit_shapefn(L->e, fn), 1, r, 1, t}, 5);
    return r;
  }
  switch (kind) {
  case 'i': {
    int64_t v = eq ? strtoll(eq, NULL, 0) : 0;
    if (a && a->type != DVMC_ATTR_INT) {
      *st = unsupported(n, "attribute \"%s\" must be an int", a->name);
      return -2;
    }
    if (a && a->type == DVMC_ATTR_INT) v = a->i;
    else if (in && const_ints(in, &v, 1) != 1) {
      *st = unsupported(n, "input %d must be a one-element integer", idx);
      return -2;
    }
    return emit_int(L, v);
  }
  case 'f': {
    double v = eq ? strtod(eq, NULL) : 0;
    if (a && a->type != DVMC_ATTR_FLOAT && a->type != DVMC_ATTR_INT) {
      *st = unsupported(n, "attribute \"%s\" must be a number", a->name);
      return -2;
    }
    if (a && a->type == DVMC_ATTR_FLOAT) v = a->f;
    else if (a && a->type == DVMC_ATTR_INT) v = (double)a->i;
    else if (in && !const_float(in, &v)) {
      *st = unsupported(n, "input %d must be a one-element number", idx);
      return -2;
    }
    return emit_float(L, v);
  }
  case 's': {
    int64_t v[DVM_MAX_RANK];
    int k = 0;
    if (a) {
      if (a->type != DVMC_ATTR_INTS || a->n > DVM_MAX_RANK) {
        *st = unsupported(n, "attribute \"%s\" must be a list of at most %d ints", a->name, DVM_MAX_RANK);
        return -2;
      }
      k = a->n;
      if (k) memcpy(v, a->ints, sizeof(int64_t) * (size_t)k);
    } else if (in && (k = const_ints(in, v, DVM_MAX_RANK)) < 0) {
      *st = unsupported(n, "input %d must be a constant list of at most %d integers", idx, DVM_MAX_RANK);
      return -2;
    }
    return emit_shape(L, k, v);
  }
  case 'e': { /* e(a,b,c) */
    const char *want = a && a->type == DVMC_ATTR_STRING ? a->s : eq;
    int i = 0;
    for (const char *p = colon + 2; *p && *p != ')'; i++) {
      size_t l = strcspn(p, ",)");
      if (want && strlen(want) == l && !strncmp(p, want, l)) return emit_int(L, i);
      p += l + (p[l] == ',');
    }
    *st = unsupported(n, "attribute \"%s\" = \"%s\" is not supported", a ? a->name : "?", want ? want : "");
    return -2;
  }
  default: *st = dvm_status_new(DVM_INTERNAL, "bad attribute spec %s", spec); return -2;
  }
}

/* ---- op rules ---- */

typedef struct op_rule op_rule;
typedef dvm_status *(*lower_fn)(lowering *L, const dvmc_node *n, const op_rule *r);

struct op_rule {
  const char *op;     /* ONNX op type */
  const char *kernel; /* kernel, or NULL for special lowerings */
  const char *attrs;  /* attribute specs, space separated */
  const char *dtype;  /* output dtype: NULL = input 0's, "bool", "i64", "in1", "to" */
  int nin;            /* inputs passed to the kernel (rest are attributes); -1 = all */
  lower_fn lower;     /* NULL: the generic kernel lowering */
  int min_opset;      /* the first opset with these semantics */
};

/* The dtype of output i, by the op table's rule (ops.c). */
static dvm_status *out_dtype(const dvmc_node *n, int i, dvm_dtype *out) {
  bool known;
  dvm_status *st = dvmc_op_out_dtype(n, i, out, &known);
  return st ? st : known ? NULL : unsupported(n, "cannot tell the dtype of output %d", i);
}

/* Lowering decides dtypes as it goes: later nodes read them. */
static void set_type(const dvmc_value *v, dvm_dtype dt) {
  dvmc_value *w = (dvmc_value *)v;
  w->typed = true;
  w->dtype = dt;
}

/* One kernel call being put together: the generic lowering fills it from
 * the rule; special lowerings adjust it (computed pads, a payload). */
typedef struct {
  const char *kernel;  /* the kernel table entry's name ("einsum@0") */
  const void *payload;
  size_t payload_size;
  int64_t ins[64], attrs[32];
  int nin, nattrs;
} call;

/* The node's inputs that go to the kernel (the rule's count; trailing
 * omitted ones dropped). */
static dvm_status *call_inputs(lowering *L, const dvmc_node *n, const op_rule *r, call *c) {
  int nin = r->nin < 0 ? n->nin : (r->nin < n->nin ? r->nin : n->nin);
  while (nin > 0 && !n->in[nin - 1]) nin--;
  if (nin > 64) return unsupported(n, "more than 64 inputs");
  for (int i = 0; i < nin; i++) {
    int reg;
    dvm_status *st;
    if (!n->in[i]) return unsupported(n, "omitted optional input %d before a present one", i);
    if ((st = reg_of(L, n->in[i], &reg))) return st;
    c->ins[i] = reg;
  }
  c->nin = nin;
  c->kernel = r->kernel;
  return NULL;
}

/* The attributes of the rule's spec, in order; `pads_reg` (when >= 0)
 * stands for the "pads" attribute. */
static dvm_status *call_attrs(lowering *L, const dvmc_node *n, const char *spec, int pads_reg, call *c) {
  dvm_status *st = NULL;
  for (const char *p = spec ? spec : ""; *p;) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    int reg = pads_reg >= 0 && !strncmp(p, "pads:", 5) ? pads_reg : lower_attr(L, n, p, len, &st);
    if (reg == -2) return st;
    if (reg >= 0) {
      if (c->nattrs == 32) return unsupported(n, "more than 32 attributes");
      c->attrs[c->nattrs++] = reg;
    }
    p += len;
  }
  return NULL;
}

/* The CPU kernel of a kernel table name: its base, "fused@3" is "fused". */
static const dvm_kernel_def *cpu_kernel(const char *name, char base[64]) {
  snprintf(base, 64, "%.*s", (int)strcspn(name, "@"), name);
  return dvm_ops_find(base, DVM_DEVICE_CPU);
}

/* Output shapes (the kernel's shape function, or input 0's shape),
 * allocation, the kernel call; attribute registers released after. */
static dvm_status *emit_call(lowering *L, const dvmc_node *n, const op_rule *r, const call *c) {
  char base[64];
  const dvm_kernel_def *k = cpu_kernel(c->kernel, base);
  if (!k) return unsupported(n, "kernel \"%s\" is not in this dvm", base);
  const dvmc_value *in0 = n->nin ? n->in[0] : NULL;
  if (k->dtypes && in0 && in0->typed && !(k->dtypes & DVM_DTYPE_BIT(in0->dtype))) {
    char list[128] = "";
    for (int d = 0; d < DVM_DTYPE_COUNT; d++)
      if (k->dtypes & DVM_DTYPE_BIT(d))
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", dvm_dtype_name((dvm_dtype)d));
    return unsupported(n, "dtype %s is not supported (kernel %s takes %s)", dvm_dtype_name(in0->dtype), base, list);
  }
  int nout = n->nout;
  while (nout > 0 && !n->out[nout - 1]) nout--; /* trailing omitted optional outputs */
  for (int i = 0; i < nout; i++)
    if (!n->out[i]) return unsupported(n, "omitted output %d before a present one", i);
  if (!nout || nout > 16) return unsupported(n, "%d outputs", nout);
  int64_t outs[16], shapes[16], w[3 + 16 + 1 + 64 + 1 + 32];
  int nw = 0, known = 1;
  dvm_status *st;
  for (int i = 0; i < nout; i++)
    known &= dvmc_value_shape_known(n->out[i]) && all_emittable(L, n->out[i]->rank, n->out[i]->dims);
  if (known) { /* inference knows the shapes: arithmetic, no shape function */
    for (int i = 0; i < nout; i++) shapes[i] = shape_of_exprs(L, n->out[i]->rank, n->out[i]->dims);
  } else if (k->shapefn) {
    w[nw++] = dvmc_emit_shapefn(L->e, k->shapefn);
    w[nw++] = nout;
    for (int i = 0; i < nout; i++) w[nw++] = shapes[i] = dvmc_fn_reg(L->f);
    w[nw++] = c->nin + c->nattrs;
    for (int i = 0; i < c->nin; i++) w[nw++] = c->ins[i];
    for (int i = 0; i < c->nattrs; i++) w[nw++] = c->attrs[i];
    dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, w, nw);
  } else {
    if (!c->nin) return unsupported(n, "kernel \"%s\" has no shape function and no input", base);
    for (int i = 0; i < nout; i++) dvmc_fn_op2(L->f, DVM_OP_SHAPE_OF, shapes[i] = dvmc_fn_reg(L->f), c->ins[0]);
  }
  for (int i = 0; i < nout; i++) {
    dvm_dtype dt = DVM_F32;
    if ((st = out_dtype(n, i, &dt))) return st;
    outs[i] = dvmc_fn_reg(L->f);
    set_type(n->out[i], dt);
    emit_alloc(L, (int)outs[i], dt, (int)shapes[i], n->out[i]->rank, known ? n->out[i]->dims : NULL);
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, shapes[i]);
    if (!bind(L, n->out[i], (int)outs[i])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  nw = 0;
  w[nw++] = dvmc_emit_kernel(L->e, c->kernel, DVM_DEVICE_CPU, 1, c->payload, c->payload_size);
  w[nw++] = -1;
  w[nw++] = nout;
  for (int i = 0; i < nout; i++) w[nw++] = outs[i];
  w[nw++] = c->nin;
  for (int i = 0; i < c->nin; i++) w[nw++] = c->ins[i];
  w[nw++] = c->nattrs;
  for (int i = 0; i < c->nattrs; i++) w[nw++] = c->attrs[i];
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, w, nw);
  for (int i = 0; i < c->nattrs; i++) dvmc_fn_op1(L->f, DVM_OP_RELEASE, c->attrs[i]);
  return NULL;
}

/* The generic lowering: the rule's inputs and attributes, then the call. */
static dvm_status *lower_kernel(lowering *L, const dvmc_node *n, const op_rule *r) {
  call c = {0};
  dvm_status *st;
  if ((st = call_inputs(L, n, r, &c)) || (st = call_attrs(L, n, r->attrs, -1, &c))) return st;
  return emit_call(L, n, r, &c);
}

/* Reshape, Squeeze, Unsqueeze, Flatten: a shape function and a view. */
static dvm_status *lower_view(lowering *L, const dvmc_node *n, const op_rule *r) {
  int data, attr_regs[4], na = 0;
  if (!n->nin || !n->in[0] || n->nout != 1 || !n->out[0]) return unsupported(n, "needs one input and one output");
  dvm_status *st = reg_of(L, n->in[0], &data);
  if (st) return st;
  if (dvmc_value_shape_known(n->out[0]) && all_emittable(L, n->out[0]->rank, n->out[0]->dims)) {
    int shape = shape_of_exprs(L, n->out[0]->rank, n->out[0]->dims), out = dvmc_fn_reg(L->f);
    dvmc_fn_op3(L->f, DVM_OP_RESHAPE, out, data, shape);
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape);
    if (n->in[0]->typed) set_type(n->out[0], n->in[0]->dtype);
    return bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  int64_t w[16];
  int nw = 0;
  int sf = dvmc_emit_shapefn(L->e, r->kernel);
  int shape = dvmc_fn_reg(L->f);
  int64_t ins[4] = {data};
  int nins = 1;
  if (!strcmp(n->op, "Reshape")) { /* the target shape is a tensor input */
    int s;
    if (n->nin < 2 || !n->in[1]) return unsupported(n, "Reshape needs a shape input");
    if ((st = reg_of(L, n->in[1], &s))) return st;
    ins[nins++] = s;
  }
  for (const char *p = r->attrs ? r->attrs : ""; *p;) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    int reg = lower_attr(L, n, p, len, &st);
    if (reg == -2) return st;
    if (reg >= 0) attr_regs[na++] = reg;
    p += len;
  }
  w[nw++] = sf;
  w[nw++] = 1;
  w[nw++] = shape;
  w[nw++] = nins + na;
  for (int i = 0; i < nins; i++) w[nw++] = ins[i];
  for (int i = 0; i < na; i++) w[nw++] = attr_regs[i];
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, w, nw);
  int out = dvmc_fn_reg(L->f);
  dvmc_fn_op3(L->f, DVM_OP_RESHAPE, out, data, shape);
  if (n->in[0]->typed) set_type(n->out[0], n->in[0]->dtype);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape);
  for (int i = 0; i < na; i++) dvmc_fn_op1(L->f, DVM_OP_RELEASE, attr_regs[i]);
  return bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* Identity, Dropout (inference): the output is the input. */
static dvm_status *lower_alias(lowering *L, const dvmc_node *n, const op_rule *r) {
  int reg;
  for (int i = 1; i < n->nout; i++)
    if (n->out[i] && n->out[i]->uses) return unsupported(n, "output %d is not supported", i);
  if (!n->in[0] || !n->out[0]) return unsupported(n, "needs its input and output");
  dvm_status *st = reg_of(L, n->in[0], &reg);
  if (st) return st;
  int out = dvmc_fn_reg(L->f);
  dvmc_fn_op2(L->f, DVM_OP_MOVE, out, reg);
  if (n->in[0]->typed) set_type(n->out[0], n->in[0]->dtype);
  return bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

static dvm_status *lower_if(lowering *L, const dvmc_node *n, const op_rule *r);
static dvm_status *lower_window(lowering *L, const dvmc_node *n, const op_rule *r);
static dvm_status *lower_einsum(lowering *L, const dvmc_node *n, const op_rule *r);
static dvm_status *lower_resize(lowering *L, const dvmc_node *n, const op_rule *r);
static dvm_status *lower_loop(lowering *L, const dvmc_node *n, const op_rule *r);

/* ConstantOfShape: the value attribute gives the dtype and the fill. */
static dvm_status *lower_constant_of_shape(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (!n->nin || !n->in[0] || n->nout != 1 || !n->out[0]) return unsupported(n, "needs one input and one output");
  const dvmc_attr *a = dvmc_attr_find(n, "value");
  dvm_dtype dt = DVM_F32;
  double f = 0;
  int is_float = 1;
  if (a) {
    if (a->type != DVMC_ATTR_TENSOR || !a->t || a->t->nbytes != dvm_dtype_size(a->t->dtype))
      return unsupported(n, "attribute \"value\" must be a one-element tensor");
    dt = a->t->dtype;
    is_float = dt == DVM_F32 || dt == DVM_F64 || dt == DVM_F16 || dt == DVM_BF16;
    if (!const_float(&(dvmc_value){.constant = a->t}, &f) && dt != DVM_BOOL && dt != DVM_U8 && dt != DVM_I8)
      return unsupported(n, "attribute \"value\" of dtype %s is not supported", dvm_dtype_name(dt));
    if (dt == DVM_BOOL || dt == DVM_U8) f = *(const uint8_t *)a->t->data;
    if (dt == DVM_I8) f = *(const int8_t *)a->t->data;
  }
  int shape;
  dvm_status *st = reg_of(L, n->in[0], &shape);
  if (st) return st;
  int val = is_float ? emit_float(L, f) : emit_int(L, (int64_t)f);
  int sf = dvmc_emit_shapefn(L->e, "constant_of_shape"), s = dvmc_fn_reg(L->f), out = dvmc_fn_reg(L->f);
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){sf, 1, s, 2, shape, val}, 6);
  dvmc_fn_emit(L->f, DVM_OP_ALLOC, (int64_t[]){out, dt, s, DVM_DEVICE_CPU}, 4);
  int k = dvmc_emit_kernel(L->e, "constant_of_shape", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, (int64_t[]){k, -1, 1, out, 1, shape, 1, val}, 8);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, s);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, val);
  set_type(n->out[0], dt);
  (void)r;
  return bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* Min, Max (and Sum, Mean's relatives): n-ary, folded pairwise left to
 * right through the binary kernel; one input is a copy. */
static dvm_status *lower_nary(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin < 1 || n->nout != 1 || !n->out[0]) return unsupported(n, "needs inputs and one output");
  if (n->nin == 1) return lower_alias(L, n, r);
  const dvmc_value *acc = n->in[0];
  for (int i = 1; i < n->nin; i++) {
    dvmc_value *tmp = i == n->nin - 1 ? n->out[0] : dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
    if (!tmp) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    dvmc_value *ins[2] = {(dvmc_value *)acc, n->in[i]};
    dvmc_node pair = *n;
    pair.nin = 2;
    pair.in = ins;
    pair.nout = 1;
    pair.out = &tmp;
    dvm_status *st = lower_kernel(L, &pair, r);
    if (st) return st;
    if (i > 1) { /* the previous partial result is dead */
      int reg = lookup(L, acc);
      if (reg >= 0) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
    }
    acc = tmp;
  }
  return NULL;
}

/* A new value: a cast of v to dt, through the cast kernel. */
static dvm_status *cast_value(lowering *L, const dvmc_node *n, dvmc_value *v, dvm_dtype dt, dvmc_value **out) {
  static const op_rule cast = {"Cast", "cast", NULL, NULL, 1, NULL};
  dvmc_value *c = dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  if (!c) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  set_type(c, dt);
  dvmc_node node = *n;
  node.nin = 1;
  node.in = &v;
  node.nout = 1;
  node.out = &c;
  *out = c;
  return lower_kernel(L, &node, &cast);
}

/* Pow with an exponent of another dtype (ONNX allows it): both computed in
 * the float dtype among them, the result cast back to the base's. */
static dvm_status *lower_pow(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin != 2 || !n->in[0] || !n->in[1] || !n->in[0]->typed || !n->in[1]->typed || n->in[0]->dtype == n->in[1]->dtype)
    return lower_kernel(L, n, r);
  dvm_dtype a = n->in[0]->dtype, b = n->in[1]->dtype;
  int af = a == DVM_F32 || a == DVM_F64 || a == DVM_F16 || a == DVM_BF16;
  dvm_dtype work = af ? a : b;
  dvmc_value *x = n->in[0], *y = n->in[1], *out = n->out[0], *tmp;
  dvm_status *st = NULL;
  if (x->dtype != work && (st = cast_value(L, n, x, work, &x))) return st;
  if (y->dtype != work && (st = cast_value(L, n, y, work, &y))) return st;
  tmp = work == a ? out : dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  if (!tmp) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  set_type(tmp, work);
  dvmc_value *ins[2] = {x, y};
  dvmc_node pair = *n;
  pair.in = ins;
  pair.out = &tmp;
  pair.nout = 1;
  if ((st = lower_kernel(L, &pair, r))) return st;
  if (tmp != out) {
    dvmc_value *back;
    if ((st = cast_value(L, n, tmp, a, &back))) return st;
    int reg = lookup(L, back);
    if (!bind(L, out, reg)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    set_type(out, a);
  }
  return NULL;
}

/* Conv and the pools with auto_pad SAME_UPPER, SAME_LOWER or VALID: their
 * pads depend on the input's spatial dims, so the auto_pads shape function
 * computes them where the node runs. */
static dvm_status *lower_window(lowering *L, const dvmc_node *n, const op_rule *r) {
  const char *mode = dvmc_attr_string(n, "auto_pad", "NOTSET");
  static const char *const modes[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int m = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(mode, modes[i])) m = i;
  if (m < 0) return unsupported(n, "auto_pad \"%s\" is not supported", mode);
  if (m == 0) return lower_kernel(L, n, r);
  if (!strncmp(n->op, "ConvTranspose", 13)) return unsupported(n, "ConvTranspose with auto_pad is not supported");
  if (dvmc_attr_find(n, "pads")) return unsupported(n, "both auto_pad and pads are given");
  /* the pads computed, then the rule's attributes with pads replaced */
  dvm_status *st = NULL;
  int x, k;
  if ((st = reg_of(L, n->in[0], &x))) return st;
  int conv = !strcmp(n->op, "Conv");
  if (conv) {
    if (n->nin < 2 || !n->in[1]) return unsupported(n, "Conv needs W");
    if ((st = reg_of(L, n->in[1], &k))) return st;
  } else if ((k = lower_attr(L, n, "kernel_shape:s", 14, &st)) < 0) {
    return st;
  }
  int s = lower_attr(L, n, "strides:s", 9, &st), d = lower_attr(L, n, "dilations:s", 11, &st);
  if (s < 0 || d < 0) return st;
  int mr = emit_int(L, m), pads = dvmc_fn_reg(L->f);
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){dvmc_emit_shapefn(L->e, "auto_pads"), 1, pads, 5, x, k, s, d, mr}, 9);
  call c = {0};
  if (!(st = call_inputs(L, n, r, &c)) && !(st = call_attrs(L, n, r->attrs, pads, &c))) st = emit_call(L, n, r, &c);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, mr);
  if (!conv) dvmc_fn_op1(L->f, DVM_OP_RELEASE, k);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, s);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, d);
  return st;
}

/* Einsum: the equation is the kernel's payload (one kernel entry per
 * equation, "einsum@N"), and the output shape's sources, which shape
 * function "einsum" reads, are worked out here (shapefuncs/matmul.h). */
static dvm_status *lower_einsum(lowering *L, const dvmc_node *n, const op_rule *r) {
  const char *eq = dvmc_attr_string(n, "equation", NULL);
  if (!eq) return unsupported(n, "Einsum needs an equation");
  char terms[17][64];
  int nterms = 0;
  const char *arrow = strstr(eq, "->");
  size_t lhs = arrow ? (size_t)(arrow - eq) : strlen(eq);
  char cur[64];
  size_t cl = 0;
  for (size_t i = 0; i <= lhs; i++) { /* split the inputs, dropping spaces */
    char c = i < lhs ? eq[i] : ',';
    if (c == ' ') continue;
    if (c == ',') {
      if (nterms == 17 || cl >= sizeof cur) return unsupported(n, "equation \"%s\" is too long", eq);
      cur[cl] = 0;
      strcpy(terms[nterms++], cur);
      cl = 0;
    } else if (cl + 1 < sizeof cur) {
      cur[cl++] = c;
    }
  }
  if (nterms != n->nin) return unsupported(n, "equation \"%s\" has %d inputs, the node %d", eq, nterms, n->nin);
  /* each input's labels with "..." expanded to its ellipsis dims ('.' + k) */
  int lab[16][DVM_MAX_RANK], nl[16], ell_start[16], ell_len[16], emax = 0;
  for (int i = 0; i < nterms; i++) {
    const char *t = terms[i];
    const char *dots = strstr(t, "...");
    int letters = (int)strlen(t) - (dots ? 3 : 0);
    int rank = n->in[i] ? n->in[i]->rank : -1;
    if (dots && rank < 0) return unsupported(n, "\"...\" needs input %d's rank, which is not known here", i);
    ell_len[i] = dots ? rank - letters : 0;
    if (ell_len[i] < 0 || (!dots && rank >= 0 && rank != letters) || letters + ell_len[i] > DVM_MAX_RANK)
      return unsupported(n, "equation \"%s\" does not match input %d", eq, i);
    nl[i] = 0;
    ell_start[i] = -1;
    for (const char *p = t; *p;) {
      if (!strncmp(p, "...", 3)) {
        ell_start[i] = nl[i];
        for (int k = 0; k < ell_len[i]; k++) lab[i][nl[i]++] = 256 + k;
        p += 3;
      } else {
        lab[i][nl[i]++] = (unsigned char)*p++;
      }
    }
    if (ell_len[i] > emax) emax = ell_len[i];
  }
  /* the output's labels: given, or implicit (ellipsis, then letters seen once, sorted) */
  int out[DVM_MAX_RANK], no = 0, has_ell = 0;
  if (arrow) {
    for (const char *p = arrow + 2; *p; p++) {
      if (*p == ' ') continue;
      if (!strncmp(p, "...", 3)) {
        for (int k = 0; k < emax && no < DVM_MAX_RANK; k++) out[no++] = -1 - k;
        has_ell = 1;
        p += 2;
      } else if (no < DVM_MAX_RANK) {
        out[no++] = (unsigned char)*p;
      } else {
        return unsupported(n, "output of more than %d dims", DVM_MAX_RANK);
      }
    }
  } else {
    for (int k = 0; k < emax; k++) out[no++] = -1 - k;
    has_ell = emax > 0;
    for (int c = 'A'; c <= 'z'; c++) {
      int seen = 0;
      for (int i = 0; i < nterms; i++)
        for (int j = 0; j < nl[i]; j++) seen += lab[i][j] == c;
      if (seen == 1 && no < DVM_MAX_RANK) out[no++] = c;
    }
  }
  (void)has_ell;
  int64_t dims[DVM_MAX_RANK];
  for (int o = 0; o < no; o++) {
    int64_t code = 0;
    int shift = 0;
    for (int i = 0; i < nterms && shift < 64; i++)
      for (int j = 0; j < nl[i]; j++) {
        int match;
        if (out[o] >= 0) match = lab[i][j] == out[o] && !code;
        else { /* ellipsis dim e, right-aligned across inputs */
          int e = -1 - out[o], k = e - (emax - ell_len[i]);
          match = k >= 0 && j == ell_start[i] + k;
        }
        if (!match) continue;
        code |= (int64_t)(i * 16 + j + (shift ? 1 : 0)) << shift;
        shift += 8;
        if (out[o] >= 0) break;
      }
    if (!shift) return unsupported(n, "output label %c of \"%s\" is in no input", out[o] > 0 ? out[o] : '.', eq);
    dims[o] = code;
  }
  char name[32];
  snprintf(name, sizeof name, "einsum@%d", L->einsums++);
  dvm_status *st = NULL;
  call c = {0};
  if ((st = call_inputs(L, n, r, &c))) return st;
  c.kernel = name;
  c.payload = eq;
  c.payload_size = strlen(eq);
  c.attrs[c.nattrs++] = emit_shape(L, no, dims);
  return emit_call(L, n, r, &c);
}

/* Resize: the output sizes as the kernel's first attribute (from the sizes
 * input, or computed where the node runs from the scales input), then the
 * modes, then the model's scales when it gave them (the kernel maps
 * coordinates with those). `axes` expands to every dim. */
static dvm_status *lower_resize(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
  static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                       "tf_half_pixel_for_nearest", "half_pixel_symmetric", NULL};
  static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
  const char *const *tables[3] = {modes, coords, nearests};
  const char *names[3] = {"mode", "coordinate_transformation_mode", "nearest_mode"};
  const char *dflt[3] = {"nearest", "half_pixel", "round_prefer_floor"};
  int64_t enums[3];
  for (int t = 0; t < 3; t++) {
    const char *v = dvmc_attr_string(n, names[t], dflt[t]);
    enums[t] = -1;
    for (int i = 0; tables[t][i]; i++)
      if (!strcmp(v, tables[t][i])) enums[t] = i;
    if (enums[t] < 0) return unsupported(n, "%s \"%s\" is not supported", names[t], v);
  }
  if (strcmp(dvmc_attr_string(n, "keep_aspect_ratio_policy", "stretch"), "stretch"))
    return unsupported(n, "keep_aspect_ratio_policy other than stretch is not supported");
  const dvmc_value *x = n->nin > 0 ? n->in[0] : NULL;
  int opset10 = n->opset < 11;
  const dvmc_value *scales = opset10 ? (n->nin > 1 ? n->in[1] : NULL) : (n->nin > 2 ? n->in[2] : NULL);
  const dvmc_value *sizes = opset10 ? NULL : (n->nin > 3 ? n->in[3] : NULL);
  if (scales && scales->constant && scales->constant->nbytes == 0) scales = NULL; /* "" given as empty */
  if (!x || (!scales == !sizes)) return unsupported(n, "exactly one of scales and sizes is needed");
  const dvmc_tensor *given = scales ? scales->constant : sizes->constant;
  const dvmc_attr *axes = dvmc_attr_find(n, "axes");
  int rank = x->rank;
  if (!given && (axes || rank < 0))
    return unsupported(n, "%s computed at run time needs the input's rank and no axes", scales ? "scales" : "sizes");
  int64_t nvals = given ? (given->rank ? given->dims[0] : 1) : rank;
  if (rank < 0) rank = (int)nvals;
  if (rank > DVM_MAX_RANK || (axes ? axes->n != nvals : nvals != rank))
    return unsupported(n, "%lld %s for an input of rank %d", (long long)nvals, scales ? "scales" : "sizes", rank);
  /* per dim: a scale (1 where axes leave a dim), or a size (-1: keep) */
  double sc[DVM_MAX_RANK];
  int64_t sz[DVM_MAX_RANK];
  for (int d = 0; d < rank; d++) sc[d] = 1, sz[d] = -1;
  for (int64_t i = 0; given && i < nvals; i++) {
    int64_t d = axes ? axes->ints[i] : i;
    if (d < 0) d += rank;
    if (d < 0 || d >= rank) return unsupported(n, "axis %lld is out of range", (long long)(axes ? axes->ints[i] : i));
    if (scales) {
      if (given->dtype != DVM_F32) return unsupported(n, "scales must be f32");
      sc[d] = ((const float *)given->data)[i];
    } else {
      if (given->dtype != DVM_I64) return unsupported(n, "sizes must be i64");
      sz[d] = ((const int64_t *)given->data)[i];
    }
  }
  dvm_status *st;
  call c = {0};
  int xr;
  if ((st = reg_of(L, x, &xr))) return st;
  c.kernel = r->kernel;
  c.ins[c.nin++] = xr;
  int sizes_reg = dvmc_fn_reg(L->f), vals[DVM_MAX_RANK];
  if (!given) { /* the model computes them: read on the host */
    int t;
    if ((st = reg_of(L, scales ? scales : sizes, &t))) return st;
    if (sizes) {
      dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){dvmc_emit_shapefn(L->e, "ints"), 1, sizes_reg, 1, t}, 5);
    } else {
      int64_t w[4 + DVM_MAX_RANK + 1];
      int nw = 0;
      w[nw++] = dvmc_emit_shapefn(L->e, "floats");
      w[nw++] = rank;
      for (int d = 0; d < rank; d++) w[nw++] = vals[d] = dvmc_fn_reg(L->f);
      w[nw++] = 1;
      w[nw++] = t;
      dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, w, nw);
    }
  } else {
    for (int d = 0; d < rank; d++) vals[d] = scales ? emit_float(L, sc[d]) : emit_int(L, sz[d]);
  }
  if (scales || given) { /* the sizes attribute, from x's dims */
    int64_t w[4 + 2 + DVM_MAX_RANK];
    int nw = 0, by = emit_int(L, scales ? 0 : 1);
    w[nw++] = dvmc_emit_shapefn(L->e, "resize_sizes");
    w[nw++] = 1;
    w[nw++] = sizes_reg;
    w[nw++] = 2 + rank;
    w[nw++] = xr;
    w[nw++] = by;
    for (int d = 0; d < rank; d++) w[nw++] = vals[d];
    dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, w, nw);
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, by);
  }
  c.attrs[c.nattrs++] = sizes_reg;
  for (int t = 0; t < 3; t++) c.attrs[c.nattrs++] = emit_int(L, enums[t]);
  c.attrs[c.nattrs++] = emit_float(L, dvmc_attr_float(n, "cubic_coeff_a", -0.75));
  c.attrs[c.nattrs++] = emit_int(L, dvmc_attr_int(n, "exclude_outside", 0));
  c.attrs[c.nattrs++] = emit_int(L, dvmc_attr_int(n, "antialias", 0));
  if (scales)
    for (int d = 0; d < rank; d++) c.attrs[c.nattrs++] = vals[d];
  else if (given)
    for (int d = 0; d < rank; d++) dvmc_fn_op1(L->f, DVM_OP_RELEASE, vals[d]);
  return emit_call(L, n, r, &c);
}

/* Softmax before opset 13 flattens to 2-D at the axis: the same as opset
 * 13's only when the axis is the last one. */
static int is_f32(const dvmc_value *v);

/* HardSigmoid, max(0, min(1, alpha x + beta)), and HardSwish, x times it
 * with alpha 1/6 and beta 1/2: one call of the fused kernel on a program
 * of those steps (f32), with the shapes of an elementwise call. */
static dvm_status *lower_hard(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (!n->nin || !is_f32(n->in[0]))
    return unsupported(n, "dtype %s is not supported (f32 only)",
                       n->nin && n->in[0] && n->in[0]->typed ? dvm_dtype_name(n->in[0]->dtype) : "?");
  int swish = !strcmp(n->op, "HardSwish");
  double alpha = swish ? 1.0 / 6 : dvmc_attr_float(n, "alpha", 0.2), beta = swish ? 0.5 : dvmc_attr_float(n, "beta", 0.5);
  dvm_fused_builder b;
  dvm_fused_builder_init(&b);
  dvm_fused_input(&b, DVM_F32);
  int x = dvm_fused_load(&b, 0);
  int v = dvm_fused_op2(&b, DVM_FUSED_MUL, x, dvm_fused_const_f32(&b, alpha));
  v = dvm_fused_op2(&b, DVM_FUSED_ADD, v, dvm_fused_const_f32(&b, beta));
  v = dvm_fused_op2(&b, DVM_FUSED_MAX, v, dvm_fused_const_f32(&b, 0));
  v = dvm_fused_op2(&b, DVM_FUSED_MIN, v, dvm_fused_const_f32(&b, 1));
  if (swish) v = dvm_fused_op2(&b, DVM_FUSED_MUL, x, v);
  dvm_fused_store(&b, dvm_fused_output(&b, DVM_F32), v);
  void *payload;
  size_t size;
  dvm_status *st = dvm_fused_builder_finish(&b, &payload, &size);
  if (st) return dvm_status_annotate(st, "node \"%s\" (%s)", n->name, n->op);
  char name[32];
  snprintf(name, sizeof name, "fused@%d", L->fused++);
  call c = {0};
  if (!(st = call_inputs(L, n, r, &c))) {
    c.kernel = name;
    c.payload = payload;
    c.payload_size = size;
    st = emit_call(L, n, r, &c);
  }
  free(payload);
  return st;
}

static dvm_status *lower_softmax(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->opset < 13) {
    int64_t axis = dvmc_attr_int(n, "axis", 1), rank = n->in[0]->rank;
    if (!(axis == -1 || (rank >= 0 && axis == rank - 1)))
      return unsupported(n, "%s before opset 13 with axis %lld (2-D coercion) is not supported", n->op,
                         (long long)axis);
  }
  return lower_kernel(L, n, r);
}

/* SoftmaxCrossEntropyLoss: log_prob = LogSoftmax over axis 1 (output 1,
 * or a value of its own), then NegativeLogLikelihoodLoss of it with the
 * labels and weights, reduction and ignore_index. */
static dvm_status *lower_sce(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const op_rule logsoftmax = {"LogSoftmax", "logsoftmax", "axis:i=1", NULL, 1, NULL, 13};
  static const op_rule nll = {"NegativeLogLikelihoodLoss", "nll_loss", NULL, NULL, 3, NULL, 13};
  if (n->nin < 2 || !n->in[0] || !n->in[1] || !n->nout || !n->out[0]) return unsupported(n, "needs scores, labels and a loss output");
  dvmc_value *lp = n->nout > 1 && n->out[1] ? n->out[1] : dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  if (!lp) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvmc_value *x = n->in[0];
  dvmc_node step = *n;
  step.nin = 1;
  step.in = &x;
  step.nout = 1;
  step.out = &lp;
  dvm_status *st = lower_kernel(L, &step, &logsoftmax);
  if (st) return st;
  dvmc_value *ins[3] = {lp, n->in[1], n->nin > 2 ? n->in[2] : NULL};
  op_rule loss = nll;
  loss.attrs = r->attrs;
  step.nin = n->nin > 2 ? 3 : 2;
  step.in = ins;
  step.out = n->out;
  return lower_kernel(L, &step, &loss);
}

/* The lowering columns of the op table (ops.def), by row. */
#define lower__ NULL
static const op_rule rules[] = {
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) \
  {#name, kernel, attrs, dtype, nin, lower_##lower, opset},
#include "ops.def"
#undef OP
};

/* Attributes a rule does not map change the op's meaning: refuse them
 * rather than compute something else. */
static dvm_status *check_attrs(const dvmc_node *n, const op_rule *r) {
  static const char *const harmless[] = {"training_mode", "seed", "momentum", NULL};
  for (int i = 0; i < n->nattrs; i++) {
    const char *name = n->attrs[i].name;
    int known = 0;
    for (const char *p = r->attrs ? r->attrs : ""; *p && !known;) {
      size_t l = strcspn(p, ":| ");
      known = strlen(name) == l && !strncmp(p, name, l);
      p += l;
      p += strspn(p, "|");
      if (*p == ':') p += strcspn(p, " ");
      p += strspn(p, " ");
    }
    if (!strcmp(name, "to") && r->dtype && !strcmp(r->dtype, "to")) known = 1;
    if (!strcmp(name, "value") && !strcmp(n->op, "ConstantOfShape")) known = 1;
    if (!strcmp(name, "kernel_shape") && !strncmp(n->op, "Conv", 4)) known = 1; /* W's shape says it */
    if (!strcmp(name, "auto_pad") && n->attrs[i].type == DVMC_ATTR_STRING &&
        (r->lower == lower_window || !strcmp(n->attrs[i].s, "NOTSET")))
      known = 1;
    if (!strcmp(name, "equation") && r->lower == lower_einsum) known = 1;
    if (r->lower == lower_resize) known = 1; /* lower_resize reads or refuses each */
    for (int k = 0; harmless[k] && !known; k++)
      known = !strcmp(name, harmless[k]) && (n->attrs[i].type != DVMC_ATTR_INT || n->attrs[i].i == 0 ||
                                             strcmp(name, "training_mode") != 0);
    if (!known) return unsupported(n, "attribute \"%s\" is not supported", name);
  }
  return NULL;
}

/* Values no model may give, refused by node and attribute before anything
 * is emitted (ONNX Runtime refuses them too): window attributes of the
 * convolutions and pools, and an output dim inference found negative (a
 * window larger than its padded input). */
static dvm_status *check_values(const dvmc_node *n) {
  static const struct {
    const char *name;
    int64_t min;
  } least[] = {{"pads", 0}, {"output_padding", 0}, {"strides", 1}, {"dilations", 1}, {"kernel_shape", 1}, {"group", 1}};
  int window = !strcmp(n->op, "Conv") || !strcmp(n->op, "ConvTranspose") || !strcmp(n->op, "MaxPool") ||
               !strcmp(n->op, "AveragePool");
  for (int i = 0; window && i < n->nattrs; i++) {
    const dvmc_attr *a = &n->attrs[i];
    for (size_t k = 0; k < sizeof least / sizeof least[0]; k++) {
      if (strcmp(a->name, least[k].name)) continue;
      if (a->type == DVMC_ATTR_INT && a->i < least[k].min)
        return invalid(n, "attribute %s = %lld must be >= %lld", a->name, (long long)a->i, (long long)least[k].min);
      for (int j = 0; a->type == DVMC_ATTR_INTS && j < a->n; j++)
        if (a->ints[j] < least[k].min)
          return invalid(n, "attribute %s[%d] = %lld must be >= %lld", a->name, j, (long long)a->ints[j],
                         (long long)least[k].min);
    }
  }
  for (int k = 0; k < n->nout; k++)
    for (int d = 0; n->out[k] && d < n->out[k]->rank; d++) {
      int64_t v;
      if (n->out[k]->dims[d] && dvmc_expr_is_const(n->out[k]->dims[d], &v) && v < 0)
        return invalid(n, "output \"%s\" dim %d would be %lld: the attributes do not fit the input's shape",
                       n->out[k]->name, d, (long long)v);
    }
  return NULL;
}

static const op_rule *find_rule(const dvmc_node *n) { return n->def ? &rules[dvmc_op_index(n->def)] : NULL; }

/* Lowers the nodes of g (the main graph or a branch or loop body). Values
 * of g are released after their last use in g; values of enclosing graphs
 * are left alone (a loop body runs again), and g's outputs are kept for the
 * caller. */
static int owns(const dvmc_graph *g, const dvmc_value *v) {
  return v && v->id >= 0 && v->id < g->nvalues && g->values[v->id] == v;
}

/* The values of g a node reads: its inputs, and the values of g its
 * subgraphs read (a branch or loop body reading an outer value uses it
 * where the If or Loop runs). Each once, marked with the node's stamp. */
typedef struct {
  int *ids;
  int n, cap;
  int oom;
} id_list;

static void add_use(const dvmc_graph *g, const dvmc_value *v, int *mark, int stamp, id_list *l) {
  if (!owns(g, v) || mark[v->id] == stamp) return;
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

/* ---- fusion v1 ----
 *
 * Runs of consecutive f32 elementwise nodes whose outputs have one shape
 * (equal expressions: the same pointers) become one call of the fused
 * kernel, so intermediates never go to memory. A group's other inputs are
 * values broadcastable to that shape (checked symbolically) or f32 scalar
 * constants; values used outside the group are its outputs. */

/* The op table's fused-program op of an f32 elementwise node, or -1. */
static int fused_op_of(const dvmc_node *n) {
  int arity = n->def && n->def->nin == 1 ? 1 : 2;
  return n->def && n->def->fused >= 0 && n->nin == arity && n->nout == 1 && !n->nattrs ? n->def->fused : -1;
}

static int is_f32(const dvmc_value *v) { return v && v->typed && v->dtype == DVM_F32; }

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
  if (fused_op_of(n) < 0 || !is_f32(n->out[0]) || !dvmc_value_shape_known(n->out[0]) ||
      n->out[0]->rank != shape->rank || foldable(L, n->out[0]))
    return 0;
  for (int d = 0; d < shape->rank; d++)
    if (n->out[0]->dims[d] != shape->dims[d]) return 0;
  for (int k = 0; k < n->nin; k++) {
    const dvmc_value *v = n->in[k];
    int inside = 0;
    double c;
    for (int j = first; j < i && !inside; j++) inside = g->nodes[j]->out[0] == v;
    if (!inside && !scalar_const(v, &c) && !(is_f32(v) && broadcasts_to(v, shape))) return 0;
  }
  return 1;
}

/* The group starting at node i: its end (exclusive), at least i + 2, or i
 * when no group starts there. */
static int group_at(const lowering *L, const dvmc_graph *g, int i) {
  if (i >= g->nnodes || !joins(L, g, i, i, g->nodes[i]->out[0] ? g->nodes[i]->out[0] : NULL)) return i;
  int end = i + 1;
  while (end < g->nnodes && end - i < 64 && joins(L, g, i, end, g->nodes[i]->out[0])) end++;
  return end - i >= 2 ? end : i;
}

/* Lowers nodes [first, end) as one fused call; reads says who reads what,
 * outside the group too (a value read by a node past the group, by a
 * subgraph, or a graph output escapes). */
static dvm_status *lower_group(lowering *L, const dvmc_graph *g, int first, int end, const int *uses,
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
        if (nin == DVM_FUSED_MAX_INPUTS) return unsupported(n, "fused group with too many inputs");
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
    if (!owns(g, o) || uses[o->id] > read_inside) {
      if (nout == DVM_FUSED_MAX_OUTPUTS) return unsupported(n, "fused group with too many outputs");
      outs[nout] = o;
      dvm_fused_store(&b, dvm_fused_output(&b, DVM_F32), next_val[i - first]);
      nout++;
    }
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
  int nw = 0, shape_reg = shape_of_exprs(L, shape->rank, shape->dims);
  w[nw++] = kid;
  w[nw++] = -1;
  w[nw++] = nout;
  for (int k = 0; k < nout; k++) {
    int r = dvmc_fn_reg(L->f);
    emit_alloc(L, r, DVM_F32, shape_reg, shape->rank, shape->dims);
    if (!bind(L, outs[k], r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    w[nw++] = r;
  }
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape_reg);
  w[nw++] = nin;
  for (int k = 0; k < nin; k++) {
    int r;
    if ((st = reg_of(L, ext[k], &r))) return st;
    w[nw++] = r;
  }
  w[nw++] = 0;
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, w, nw);
  return NULL;
}

static dvm_status *lower_graph(lowering *L, const dvmc_graph *g) {
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
    if (owns(g, g->outputs[i])) uses[g->outputs[i]->id] += 1 << 24; /* kept for the caller */
  if (oom) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  size_t scoped_at = L->nscoped;
  int group_end = 0; /* nodes before it belong to the fused group emitted last */
  for (int i = 0; i < g->nnodes && !st; i++) {
    const dvmc_node *n = g->nodes[i];
    const op_rule *r = find_rule(n);
    dvmc_fn_loc(L->f, n->name);
    if (i >= group_end && L->fuse) {
      int end = group_at(L, g, i);
      if (end > i) {
        if ((st = lower_group(L, g, i, end, uses, reads))) break;
        for (int j = i; j < end; j++) /* the group's reads, now done */
          for (int k = 0; k < reads[j].n; k++) {
            int v = reads[j].ids[k], reg = lookup(L, g->values[v]);
            if (--uses[v] == 0 && reg >= 0) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
          }
        for (int j = i; j < end; j++) { /* outputs nothing reads */
          const dvmc_value *o = g->nodes[j]->out[0];
          int reg = lookup(L, o);
          if (reg >= 0 && owns(g, o) && uses[o->id] == 0) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
        }
        group_end = end;
        i = end - 1;
        continue;
      }
    }
    if (!r) {
      st = unsupported(n, "the op is not supported");
      break;
    }
    if (n->opset < r->min_opset) {
      st = unsupported(n, "opsets before %d are not supported for %s", r->min_opset, n->op);
      break;
    }
    int folded = n->nout > 0;
    for (int k = 0; k < n->nout; k++) folded &= foldable(L, n->out[k]);
    if (!folded && ((st = check_attrs(n, r)) || (st = check_values(n)) ||
                    (st = (r->lower ? r->lower : lower_kernel)(L, n, r))))
      break;
    if (!folded && L->depth == 0 && !bind_data_dims(L, n)) {
      st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
      break;
    }
    for (int k = 0; k < reads[i].n; k++) { /* values whose last reader this was */
      int v = reads[i].ids[k], reg = lookup(L, g->values[v]);
      if (--uses[v] == 0 && reg >= 0) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
    }
    for (int k = 0; k < n->nout; k++) { /* outputs nothing reads */
      int reg = n->out[k] ? lookup(L, n->out[k]) : -1;
      if (reg >= 0 && owns(g, n->out[k]) && uses[n->out[k]->id] == 0) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
    }
  }
  for (int i = 0; reads && i < g->nnodes; i++) free(reads[i].ids);
  free(reads);
  free(uses);
  free(mark);
  /* constants a branch or body loaded are that region's: drop them */
  if (L->depth > 0)
    for (size_t i = scoped_at; i < L->nscoped; i++) {
      int reg = lookup(L, L->scoped[i]);
      if (reg >= 0) {
        dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
        if (!bind(L, L->scoped[i], -1) && !st) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
      }
    }
  L->nscoped = scoped_at;
  return st;
}

/* If: the condition read on the host, then each branch inline, its outputs
 * moved into the If's. */
static dvm_status *lower_if(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *then_a = dvmc_attr_find(n, "then_branch"), *else_a = dvmc_attr_find(n, "else_branch");
  if (!then_a || !else_a || then_a->type != DVMC_ATTR_GRAPH || else_a->type != DVMC_ATTR_GRAPH)
    return unsupported(n, "If needs then_branch and else_branch graphs");
  const dvmc_graph *br[2] = {then_a->g, else_a->g};
  for (int k = 0; k < n->nout; k++)
    if (!n->out[k]) return unsupported(n, "omitted outputs are not supported");
  if (!n->nin || !n->in[0]) return unsupported(n, "If needs its condition");
  for (int b = 0; b < 2; b++)
    if (br[b]->noutputs != n->nout)
      return unsupported(n, "a branch has %d outputs, the If %d", br[b]->noutputs, n->nout);
  int cond, c = dvmc_fn_reg(L->f);
  dvm_status *st = reg_of(L, n->in[0], &cond);
  if (st) return st;
  int sf = dvmc_emit_shapefn(L->e, "item");
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){sf, 1, c, 1, cond}, 5);
  int out[64];
  if (n->nout > 64) return unsupported(n, "more than 64 outputs");
  for (int k = 0; k < n->nout; k++) out[k] = dvmc_fn_reg(L->f);
  uint32_t jz_at = dvmc_fn_here(L->f) + 2, jmp_at = 0; /* the target words to patch */
  dvmc_fn_op2(L->f, DVM_OP_JZ, c, 0);
  for (int b = 0; b < 2; b++) {
    if (b == 1) {
      jmp_at = dvmc_fn_here(L->f) + 1;
      dvmc_fn_op1(L->f, DVM_OP_JMP, 0);
      dvmc_fn_patch(L->f, jz_at, dvmc_fn_here(L->f));
    }
    L->depth++;
    st = lower_graph(L, br[b]);
    L->depth--;
    if (st) return st;
    dvmc_fn_loc(L->f, n->name);
    for (int k = 0; k < n->nout; k++) {
      int reg;
      if ((st = reg_of(L, br[b]->outputs[k], &reg))) return st;
      dvmc_fn_op2(L->f, DVM_OP_MOVE, out[k], reg);
      if (owns(br[b], br[b]->outputs[k])) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
      if (br[b]->outputs[k]->typed) set_type(n->out[k], br[b]->outputs[k]->dtype);
    }
  }
  dvmc_fn_patch(L->f, jmp_at, dvmc_fn_here(L->f));
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, c);
  for (int k = 0; k < n->nout; k++)
    if (!bind(L, n->out[k], out[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  (void)r;
  return NULL;
}

/* A scalar tensor of dtype dt holding the int in register v (Loop's
 * iteration number and condition, as its body sees them). */
static int scalar_tensor(lowering *L, dvm_dtype dt, int v) {
  int s = dvmc_fn_reg(L->f), t = dvmc_fn_reg(L->f);
  dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, (int64_t[]){s, 0}, 2);
  dvmc_fn_emit(L->f, DVM_OP_ALLOC, (int64_t[]){t, dt, s, DVM_DEVICE_CPU}, 4);
  int k = dvmc_emit_kernel(L->e, "fill", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, (int64_t[]){k, -1, 1, t, 0, 1, v}, 7);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, s);
  return t;
}

/* One Loop scan output: the body's value v, with a new axis 0, appended to
 * accumulator `acc` (taken as is on iteration 0, else concatenated: each
 * iteration copies what came before). */
static dvm_status *append_scan(lowering *L, const dvmc_node *n, const dvmc_value *v, int acc, int i) {
  int val;
  dvm_status *st = reg_of(L, v, &val);
  if (st) return st;
  if (!v->typed) return unsupported(n, "scan output \"%s\" has no known dtype", v->name);
  int axes = dvmc_fn_reg(L->f), zero = emit_int(L, 0), shape = dvmc_fn_reg(L->f), u = dvmc_fn_reg(L->f);
  int first = dvmc_fn_reg(L->f), out = dvmc_fn_reg(L->f);
  dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, (int64_t[]){axes, 1, zero}, 3);
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){dvmc_emit_shapefn(L->e, "unsqueeze"), 1, shape, 2, val, axes}, 6);
  dvmc_fn_op3(L->f, DVM_OP_RESHAPE, u, val, shape);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, axes);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape);
  dvmc_fn_op3(L->f, DVM_OP_EQ, first, i, zero);
  uint32_t to_concat = dvmc_fn_here(L->f) + 2;
  dvmc_fn_op2(L->f, DVM_OP_JZ, first, 0);
  dvmc_fn_op2(L->f, DVM_OP_MOVE, acc, u);
  uint32_t to_done = dvmc_fn_here(L->f) + 1;
  dvmc_fn_op1(L->f, DVM_OP_JMP, 0);
  dvmc_fn_patch(L->f, to_concat, dvmc_fn_here(L->f));
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){dvmc_emit_shapefn(L->e, "concat"), 1, shape, 3, acc, u, zero}, 7);
  dvmc_fn_emit(L->f, DVM_OP_ALLOC, (int64_t[]){out, v->dtype, shape, DVM_DEVICE_CPU}, 4);
  int k = dvmc_emit_kernel(L->e, "concat", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, (int64_t[]){k, -1, 1, out, 2, acc, u, 1, zero}, 9);
  dvmc_fn_op2(L->f, DVM_OP_MOVE, acc, out);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, out);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape);
  dvmc_fn_patch(L->f, to_done, dvmc_fn_here(L->f));
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, u);
  return NULL;
}

/* When no iteration ran, each used scan output is empty: [0, the body
 * value's dims] of the body value's dtype, as ONNX Runtime makes it (a dim
 * that cannot be computed outside the body is 0, an unknown rank gives
 * [0]). The shapes are made before the branch, where the memo of top-level
 * expressions stays valid. */
static dvm_status *empty_scans(lowering *L, const dvmc_node *n, const dvmc_graph *body, int ncarried,
                               int nscan, const int *scan, int i) {
  int shapes[64], any = 0, zero = emit_int(L, 0);
  for (int k = 0; k < nscan; k++) {
    const dvmc_value *o = ncarried + k < n->nout ? n->out[ncarried + k] : NULL;
    const dvmc_value *bv = body->outputs[1 + ncarried + k];
    shapes[k] = -1;
    if (!o) continue;
    if (!bv->typed) return unsupported(n, "scan output \"%s\" has no known dtype", bv->name);
    int rank = bv->rank >= 0 && bv->rank < DVM_MAX_RANK ? bv->rank : 0;
    int64_t w[3 + DVM_MAX_RANK];
    w[2] = zero;
    for (int d = 0; d < rank; d++) w[3 + d] = emittable(L, bv->dims[d]) ? expr_reg(L, bv->dims[d]) : zero;
    w[0] = shapes[k] = dvmc_fn_reg(L->f);
    w[1] = rank + 1;
    dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, w, 3 + rank);
    any = 1;
  }
  if (!any) return NULL;
  int none = dvmc_fn_reg(L->f);
  dvmc_fn_op3(L->f, DVM_OP_EQ, none, i, zero);
  uint32_t skip = dvmc_fn_here(L->f) + 2;
  dvmc_fn_op2(L->f, DVM_OP_JZ, none, 0);
  for (int k = 0; k < nscan; k++) {
    if (shapes[k] < 0) continue;
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, scan[k]);
    dvmc_fn_emit(L->f, DVM_OP_ALLOC,
                 (int64_t[]){scan[k], body->outputs[1 + ncarried + k]->dtype, shapes[k], DVM_DEVICE_CPU}, 4);
  }
  dvmc_fn_patch(L->f, skip, dvmc_fn_here(L->f));
  for (int k = 0; k < nscan; k++)
    if (shapes[k] >= 0) dvmc_fn_op1(L->f, DVM_OP_RELEASE, shapes[k]);
  return NULL;
}

/* Loop: a counted and/or conditional loop in bytecode; loop-carried values
 * move from the body's outputs back to its inputs; scan outputs grow by
 * concatenation (append_scan). */
static dvm_status *lower_loop(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *ba = dvmc_attr_find(n, "body");
  if (!ba || ba->type != DVMC_ATTR_GRAPH) return unsupported(n, "Loop needs a body graph");
  const dvmc_graph *body = ba->g;
  int ncarried = n->nin - 2;
  if (ncarried < 0 || body->ninputs != ncarried + 2 || body->noutputs < ncarried + 1)
    return unsupported(n, "Loop body inputs/outputs do not match its %d loop-carried values", ncarried);
  int nscan = body->noutputs - 1 - ncarried;
  if (n->nout > ncarried + nscan)
    return unsupported(n, "%d outputs for %d loop-carried values and %d scan outputs", n->nout, ncarried, nscan);
  for (int k = 0; k < ncarried; k++)
    if (!n->in[2 + k]) return unsupported(n, "loop-carried input %d is omitted", k);
  for (int k = 0; k < n->nout; k++)
    if (!n->out[k] && k < ncarried) return unsupported(n, "omitted loop-carried outputs are not supported");
  dvm_status *st;
  int sf = dvmc_emit_shapefn(L->e, "item");
  int trips = dvmc_fn_reg(L->f), cond = dvmc_fn_reg(L->f), i = dvmc_fn_reg(L->f), one = emit_int(L, 1);
  int car[64], scan[64], t;
  if (ncarried > 64 || nscan > 64) return unsupported(n, "more than 64 loop-carried values or scan outputs");
  if (nscan) { /* scan accumulators start as empty tensors, replaced on iteration 0 */
    int empty = dvmc_fn_reg(L->f);
    dvmc_fn_emit(L->f, DVM_OP_MAKE_SHAPE, (int64_t[]){empty, 1, emit_int(L, 0)}, 3);
    for (int k = 0; k < nscan; k++)
      dvmc_fn_emit(L->f, DVM_OP_ALLOC, (int64_t[]){scan[k] = dvmc_fn_reg(L->f), DVM_F32, empty, DVM_DEVICE_CPU}, 4);
    dvmc_fn_op1(L->f, DVM_OP_RELEASE, empty);
  }
  if (n->in[0]) {
    if ((st = reg_of(L, n->in[0], &t))) return st;
    dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){sf, 1, trips, 1, t}, 5);
  } else {
    dvmc_fn_op2(L->f, DVM_OP_IMM, trips, INT64_MAX);
  }
  if (n->in[1]) {
    if ((st = reg_of(L, n->in[1], &t))) return st;
    dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){sf, 1, cond, 1, t}, 5);
  } else {
    dvmc_fn_op2(L->f, DVM_OP_IMM, cond, 1);
  }
  dvmc_fn_op2(L->f, DVM_OP_IMM, i, 0);
  for (int k = 0; k < ncarried; k++) {
    int reg;
    if ((st = reg_of(L, n->in[2 + k], &reg))) return st;
    car[k] = dvmc_fn_reg(L->f);
    dvmc_fn_op2(L->f, DVM_OP_MOVE, car[k], reg);
  }
  uint32_t head = dvmc_fn_here(L->f);
  int go = dvmc_fn_reg(L->f);
  dvmc_fn_op3(L->f, DVM_OP_LT, go, i, trips);
  uint32_t exit1 = dvmc_fn_here(L->f) + 2;
  dvmc_fn_op2(L->f, DVM_OP_JZ, go, 0);
  uint32_t exit2 = dvmc_fn_here(L->f) + 2;
  dvmc_fn_op2(L->f, DVM_OP_JZ, cond, 0);
  /* the body's inputs: iteration number, condition, carried values */
  int it = scalar_tensor(L, DVM_I64, i), ct = scalar_tensor(L, DVM_BOOL, cond);
  if (!bind(L, body->inputs[0], it) || !bind(L, body->inputs[1], ct)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  set_type(body->inputs[0], DVM_I64);
  set_type(body->inputs[1], DVM_BOOL);
  for (int k = 0; k < ncarried; k++) {
    if (!bind(L, body->inputs[2 + k], car[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    if (n->in[2 + k]->typed) set_type(body->inputs[2 + k], n->in[2 + k]->dtype);
  }
  L->depth++;
  st = lower_graph(L, body);
  L->depth--;
  if (st) return st;
  dvmc_fn_loc(L->f, n->name);
  int nc;
  if ((st = reg_of(L, body->outputs[0], &nc))) return st;
  dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, (int64_t[]){sf, 1, cond, 1, nc}, 5);
  for (int k = 0; k < ncarried; k++) {
    int reg;
    if ((st = reg_of(L, body->outputs[1 + k], &reg))) return st;
    if (reg != car[k]) dvmc_fn_op2(L->f, DVM_OP_MOVE, car[k], reg);
    if (body->outputs[1 + k]->typed && !n->out[k]->typed) set_type(n->out[k], body->outputs[1 + k]->dtype);
  }
  for (int k = 0; k < nscan; k++)
    if ((st = append_scan(L, n, body->outputs[1 + ncarried + k], scan[k], i))) return st;
  for (int k = 0; k < body->noutputs; k++) { /* the body's outputs are the body's to drop */
    int reg = lookup(L, body->outputs[k]);
    int is_car = 0;
    for (int c = 0; c < ncarried; c++) is_car |= reg == car[c];
    if (reg >= 0 && !is_car && owns(body, body->outputs[k])) dvmc_fn_op1(L->f, DVM_OP_RELEASE, reg);
  }
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, it);
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, ct);
  dvmc_fn_op3(L->f, DVM_OP_ADD, i, i, one);
  dvmc_fn_op1(L->f, DVM_OP_JMP, head);
  dvmc_fn_patch(L->f, exit1, dvmc_fn_here(L->f));
  dvmc_fn_patch(L->f, exit2, dvmc_fn_here(L->f));
  for (int k = 0; k < n->nout && k < ncarried; k++) {
    if (n->in[2 + k] && n->in[2 + k]->typed && !n->out[k]->typed) set_type(n->out[k], n->in[2 + k]->dtype);
    if (!bind(L, n->out[k], car[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  if ((st = empty_scans(L, n, body, ncarried, nscan, scan, i))) return st;
  for (int k = 0; k < nscan; k++) {
    const dvmc_value *o = ncarried + k < n->nout ? n->out[ncarried + k] : NULL;
    if (o) set_type(o, body->outputs[1 + ncarried + k]->dtype);
    if (o ? !bind(L, o, scan[k]) : 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    if (!o) dvmc_fn_op1(L->f, DVM_OP_RELEASE, scan[k]);
  }
  (void)r;
  return NULL;
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
  const dvm_kernel_def *def = name ? cpu_kernel(name, base) : NULL;
  return def && def->inplace;
}

/* Applies the memory plan (plan.h) once the code is complete: the slots'
 * sizes are computed right after the guards (emitted at the end, then
 * moved to `head`); each slot's storage is made just before its first site
 * and its register released just after its last one (the views keep it
 * until they die); the sites left outside become plain allocs. */
static dvm_status *finish_plan(lowering *L, uint32_t head) {
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
  int zero = expr_reg(L, dvmc_const(L->c->exprs, 0));
  for (int k = 0; k < p.nslots; k++) size[k] = expr_reg(L, p.size[k]);
  dvmc_fn_hoist(L->f, head, from);
  uint32_t moved = dvmc_fn_here(L->f) - from;
  for (int k = 0; k < p.nslots; k++) reg[k] = dvmc_fn_reg(L->f);
  /* the edits, in code order (sites are), made in one pass over the code */
  dvmc_fn_edit *ed = malloc(2 * ((size_t)L->nsites + 1) * sizeof *ed);
  int ned = 0;
  code = dvmc_fn_code(L->f, &ncode);
  for (int i = 0; ed && i < L->nsites; i++) {
    uint32_t w = L->sites[i].word + moved;
    int k = L->sites[i].slot;
    if (k < 0) { /* a plain alloc: reg, dtype, shape */
      ed[ned++] = (dvmc_fn_edit){w, 1, DVM_OP_ALLOC, {code[w + 1], code[w + 4], code[w + 5], DVM_DEVICE_CPU}, 4};
      continue;
    }
    dvmc_fn_patch(L->f, w + 2, reg[k]);
    dvmc_fn_patch(L->f, w + 3, zero);
    if (p.first[k] == i) ed[ned++] = (dvmc_fn_edit){w, 0, DVM_OP_ALLOC_STORAGE, {reg[k], size[k], DVM_DEVICE_CPU, 64}, 4};
    if (p.last[k] == i) ed[ned++] = (dvmc_fn_edit){w + dvm_instr_length(code, ncode, w), 0, DVM_OP_RELEASE, {reg[k]}, 1};
  }
  int oom = !ed;
  if (ed) dvmc_fn_edit_code(L->f, ed, ned);
  free(ed);
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
    if (k->unified || !emittable(L, k->a) || !emittable(L, k->b)) continue;
    dvmc_fn_loc(L->f, k->node->name);
    int a = expr_reg(L, k->a), b = expr_reg(L, k->b), ok = dvmc_fn_reg(L->f);
    dvmc_fn_op3(L->f, DVM_OP_EQ, ok, a, b);
    if (k->rel == DVMC_REL_EQ_OR_ONE) {
      int one = expr_reg(L, dvmc_const(L->c->exprs, 1));
      for (int j = 0; j < 2; j++) { /* ok = ok || x == 1 */
        int t = dvmc_fn_reg(L->f);
        dvmc_fn_op3(L->f, DVM_OP_EQ, t, j ? b : a, one);
        dvmc_fn_op3(L->f, DVM_OP_MAX, ok, ok, t);
      }
    }
    char da[320], db[320], msg[1024];
    describe_dim(g, k->a, da, sizeof da);
    describe_dim(g, k->b, db, sizeof db);
    snprintf(msg, sizeof msg, "%s must equal %s%s (%s in node \"%s\"), got {} and {}", db, da,
             k->rel == DVMC_REL_EQ_OR_ONE ? " or one of them be 1" : "", k->why, k->node->name);
    dvmc_fn_emit(L->f, DVM_OP_CHECK_WITH, (int64_t[]){ok, dvmc_emit_string(L->e, msg), 2, b, a}, 5);
  }
}

static dvm_status *signature(lowering *L, const dvmc_value *v, dvm_sig *s) {
  memset(s, 0, sizeof *s);
  s->name = v->name;
  s->kind = DVM_VAL_TENSOR;
  s->dtype = (uint8_t)v->dtype;
  s->rank = (int8_t)v->rank;
  if (!v->typed) s->kind = DVM_VAL_NONE;
  for (int d = 0; d < v->rank; d++) {
    int64_t c;
    const char *sym = dvmc_expr_sym_name(v->dims[d]);
    if (dvmc_expr_is_const(v->dims[d], &c)) s->dims[d] = c;
    else if (sym && data_reg(L, v->dims[d]) < 0) { /* a data-dependent dim is no guard's */
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

dvm_status *dvmc_lower(dvmc_ctx *c, const dvmc_graph *g, const dvmc_options *opts, uint8_t **bytes,
                       size_t *size) {
  lowering L = {.c = c, .g = g, .fuse = !(opts && opts->no_fusion), .plan = !(opts && opts->no_plan)};
  dvm_status *st = dvmc_emit_create(&L.e);
  if (st) return st;
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
    if (!v->typed || v->rank < 0) {
      st = dvm_status_new(DVM_UNIMPLEMENTED, "graph input \"%s\" has no tensor type", v->name);
      goto done;
    }
    int r = dvmc_fn_param(L.f, &(dvm_sig){.name = v->name});
    if (!bind(&L, v, r)) {
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
    dvmc_fn_op2(L.f, DVM_OP_GUARD, i, i);
  }
  emit_constraints(&L, g);
  uint32_t head = dvmc_fn_here(L.f);
  L.arena = dvmc_fn_reg(L.f);
  if ((st = lower_graph(&L, g))) goto done;
  dvmc_fn_loc(L.f, NULL);
  int64_t w[1 + 256];
  if (g->noutputs > 256) {
    st = dvm_status_new(DVM_UNIMPLEMENTED, "more than 256 graph outputs");
    goto done;
  }
  w[0] = g->noutputs;
  for (int i = 0; i < g->noutputs; i++) {
    int reg;
    dvm_sig s;
    if ((st = reg_of(&L, g->outputs[i], &reg))) goto done;
    w[1 + i] = reg;
    signature(&L, g->outputs[i], &s);
    dvmc_fn_result(L.f, &s);
  }
  dvmc_fn_emit(L.f, DVM_OP_RET, w, 1 + g->noutputs);
  if (L.plan && (st = finish_plan(&L, head))) goto done;
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
