/* Lowering a graph to bytecode (see lower.h).
 *
 * v1 is straightforward and always correct: each node's output shapes come
 * from its kernel's shape function at run time (the op table in ops/ names
 * it), outputs are allocated from the pool, and the kernel is invoked;
 * registers are released after their last use so memory returns to the
 * pool as soon as a value is dead. ONNX attributes and constant inputs
 * become kernel attributes as each op's rule below says. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "kernel.h"
#include "lower.h"

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

static dvm_status *unsupported(const dvmc_node *n, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *unsupported(const dvmc_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(DVM_UNIMPLEMENTED, fmt, ap);
  va_end(ap);
  return dvm_status_annotate(st, "node \"%s\" (%s, opset %d)", n->name, n->op, n->opset);
}

/* The register holding v; constants are loaded where first used. */
static dvm_status *reg_of(lowering *L, const dvmc_value *v, int *out) {
  int r = lookup(L, v);
  if (r < 0 && v->constant) {
    int k = dvmc_emit_const(L->e, v->name, v->constant);
    r = dvmc_fn_reg(L->f);
    if (k < 0 || !bind(L, v, r)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    dvmc_fn_op2(L->f, DVM_OP_CONST, r, k);
  }
  if (r < 0) return dvm_status_new(DVM_INTERNAL, "value \"%s\" is used before it is defined", v->name);
  *out = r;
  return NULL;
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

/* One attribute from the rule's spec: "name:K", "name:K=default",
 * "name:K?" (optional: left out when absent, which must be at the end) or
 * "@N:K[=default]" (constant input N). K is i (int), f (float), s (ints as
 * a shape), or e(a,b,c) (a string enum, its index). Returns the register,
 * -1 when an optional attribute is absent, -2 with *st set on error. */
static int lower_attr(lowering *L, const dvmc_node *n, const char *spec, size_t len, dvm_status **st) {
  char buf[160];
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, spec, len);
  buf[len] = 0;
  char *colon = strchr(buf, ':');
  char *eq = strchr(buf, '=');
  int optional = buf[len - 1] == '?';
  if (optional) buf[len - 1] = 0;
  if (eq) *eq++ = 0;
  *colon++ = 0;
  char kind = *colon;
  const char *name = buf;
  if (buf[0] == '@') { /* a constant input */
    int idx = atoi(buf + 1);
    const dvmc_value *v = idx < n->nin ? n->in[idx] : NULL;
    if (!v) {
      if (optional) return -1;
      if (!eq) {
        *st = unsupported(n, "input %d is required", idx);
        return -2;
      }
    } else if (!v->constant) {
      *st = unsupported(n, "input %d (\"%s\") must be a constant here", idx, v->name);
      return -2;
    }
    if (kind == 'f') {
      double d = eq ? strtod(eq, NULL) : 0;
      if (v && !const_float(v, &d)) {
        *st = unsupported(n, "input %d must be a one-element number", idx);
        return -2;
      }
      return emit_float(L, d);
    }
    int64_t ints[DVM_MAX_RANK];
    int k = v ? const_ints(v, ints, DVM_MAX_RANK) : 1;
    if (!v) ints[0] = eq ? strtoll(eq, NULL, 0) : 0;
    if (k < 0) {
      *st = unsupported(n, "input %d must be a constant i64 list of at most %d values", idx, DVM_MAX_RANK);
      return -2;
    }
    return kind == 's' ? emit_shape(L, k, ints) : emit_int(L, ints[0]);
  }
  const dvmc_attr *a = dvmc_attr_find(n, name);
  if (!a && optional) return -1;
  switch (kind) {
  case 'i': return emit_int(L, a && a->type == DVMC_ATTR_INT ? a->i : (eq ? strtoll(eq, NULL, 0) : 0));
  case 'f': return emit_float(L, a && a->type == DVMC_ATTR_FLOAT ? a->f : (eq ? strtod(eq, NULL) : 0));
  case 's': {
    if (a && (a->type != DVMC_ATTR_INTS || a->n > DVM_MAX_RANK)) {
      *st = unsupported(n, "attribute \"%s\" must be a list of at most %d ints", name, DVM_MAX_RANK);
      return -2;
    }
    return a ? emit_shape(L, a->n, a->ints) : emit_shape(L, 0, NULL);
  }
  case 'e': { /* e(a,b,c) */
    const char *s = a && a->type == DVMC_ATTR_STRING ? a->s : eq;
    const char *opts = colon + 2;
    int idx = 0;
    for (const char *p = opts; *p && *p != ')'; idx++) {
      size_t l = strcspn(p, ",)");
      if (s && strlen(s) == l && strncmp(p, s, l) == 0) return emit_int(L, idx);
      p += l + (p[l] == ',');
    }
    *st = unsupported(n, "attribute \"%s\" = \"%s\" is not supported", name, s ? s : "");
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
};

static const struct {
  int onnx;
  dvm_dtype dt;
} onnx_types[] = {{1, DVM_F32}, {2, DVM_U8},  {3, DVM_I8},   {5, DVM_I16}, {6, DVM_I32},
                  {7, DVM_I64}, {9, DVM_BOOL}, {10, DVM_F16}, {11, DVM_F64}, {16, DVM_BF16}};

/* The dtype of output i: fixed by the rule, named by Cast's "to", else the
 * type import or inference gave it, else that of the input it follows. */
static dvm_status *out_dtype(const dvmc_node *n, const op_rule *r, int i, dvm_dtype *out) {
  const char *rule = r->dtype ? r->dtype : "";
  if (!strcmp(rule, "bool") || !strcmp(rule, "i64")) {
    *out = rule[0] == 'b' ? DVM_BOOL : DVM_I64;
    return NULL;
  }
  if (!strcmp(rule, "to")) {
    int64_t to = dvmc_attr_int(n, "to", 0);
    for (size_t k = 0; k < sizeof onnx_types / sizeof onnx_types[0]; k++)
      if (onnx_types[k].onnx == to) {
        *out = onnx_types[k].dt;
        return NULL;
      }
    return unsupported(n, "cast to ONNX type %lld is not supported", (long long)to);
  }
  if (n->out[i]->typed) {
    *out = n->out[i]->dtype;
    return NULL;
  }
  const dvmc_value *src = !strcmp(rule, "in1") ? (n->nin > 1 ? n->in[1] : NULL) : (n->nin ? n->in[0] : NULL);
  if (!src || !src->typed) return unsupported(n, "cannot tell the dtype of output %d", i);
  *out = src->dtype;
  return NULL;
}

/* The generic lowering: shape function, allocation, kernel call. */
static dvm_status *lower_kernel(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvm_kernel_def *k = dvm_ops_find(r->kernel, DVM_DEVICE_CPU);
  if (!k) return unsupported(n, "kernel \"%s\" is not in this dvm", r->kernel);
  int nin = r->nin < 0 ? n->nin : (r->nin < n->nin ? r->nin : n->nin);
  while (nin > 0 && !n->in[nin - 1]) nin--; /* trailing omitted optional inputs */
  int64_t ins[64], attrs[32], outs[16], shapes[16];
  int nattrs = 0;
  if (nin > 64 || n->nout > 16) return unsupported(n, "too many inputs or outputs");
  dvm_status *st = NULL;
  for (int i = 0; i < nin; i++) {
    int reg;
    if (!n->in[i]) return unsupported(n, "omitted optional input %d before a present one", i);
    if ((st = reg_of(L, n->in[i], &reg))) return st;
    ins[i] = reg;
  }
  for (const char *p = r->attrs ? r->attrs : ""; *p;) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    int reg = lower_attr(L, n, p, len, &st);
    if (reg == -2) return st;
    if (reg >= 0) attrs[nattrs++] = reg;
    p += len;
  }
  /* output shapes */
  if (k->shapefn) {
    int sf = dvmc_emit_shapefn(L->e, k->shapefn);
    int64_t w[2 + 16 + 1 + 64 + 32];
    int nw = 0;
    w[nw++] = sf;
    w[nw++] = n->nout;
    for (int i = 0; i < n->nout; i++) w[nw++] = shapes[i] = dvmc_fn_reg(L->f);
    w[nw++] = nin + nattrs;
    for (int i = 0; i < nin; i++) w[nw++] = ins[i];
    for (int i = 0; i < nattrs; i++) w[nw++] = attrs[i];
    dvmc_fn_emit(L->f, DVM_OP_SHAPEFN, w, nw);
  } else {
    for (int i = 0; i < n->nout; i++) {
      shapes[i] = dvmc_fn_reg(L->f);
      dvmc_fn_op2(L->f, DVM_OP_SHAPE_OF, shapes[i], ins[0]);
    }
  }
  for (int i = 0; i < n->nout; i++) {
    dvm_dtype dt;
    if ((st = out_dtype(n, r, i, &dt))) return st;
    outs[i] = dvmc_fn_reg(L->f);
    dvmc_fn_emit(L->f, DVM_OP_ALLOC, (int64_t[]){outs[i], dt, shapes[i], DVM_DEVICE_CPU}, 4);
    if (!bind(L, n->out[i], (int)outs[i])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  for (int i = 0; i < n->nout; i++) dvmc_fn_op1(L->f, DVM_OP_RELEASE, shapes[i]);
  int kid = dvmc_emit_kernel(L->e, r->kernel, DVM_DEVICE_CPU, 1, NULL, 0);
  int64_t w[3 + 16 + 1 + 64 + 1 + 32];
  int nw = 0;
  w[nw++] = kid;
  w[nw++] = -1;
  w[nw++] = n->nout;
  for (int i = 0; i < n->nout; i++) w[nw++] = outs[i];
  w[nw++] = nin;
  for (int i = 0; i < nin; i++) w[nw++] = ins[i];
  w[nw++] = nattrs;
  for (int i = 0; i < nattrs; i++) w[nw++] = attrs[i];
  dvmc_fn_emit(L->f, DVM_OP_INVOKE, w, nw);
  for (int i = 0; i < nattrs; i++) dvmc_fn_op1(L->f, DVM_OP_RELEASE, attrs[i]);
  return NULL;
}

/* Reshape, Squeeze, Unsqueeze, Flatten: a shape function and a view. */
static dvm_status *lower_view(lowering *L, const dvmc_node *n, const op_rule *r) {
  int data, attr_regs[4], na = 0;
  dvm_status *st = reg_of(L, n->in[0], &data);
  if (st) return st;
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
  dvmc_fn_op1(L->f, DVM_OP_RELEASE, shape);
  for (int i = 0; i < na; i++) dvmc_fn_op1(L->f, DVM_OP_RELEASE, attr_regs[i]);
  return bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* Identity, Dropout (inference): the output is the input. */
static dvm_status *lower_alias(lowering *L, const dvmc_node *n, const op_rule *r) {
  int reg;
  dvm_status *st = reg_of(L, n->in[0], &reg);
  if (st) return st;
  int out = dvmc_fn_reg(L->f);
  dvmc_fn_op2(L->f, DVM_OP_MOVE, out, reg);
  return bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* The table: one line per ONNX op. Attribute specs follow lower_attr. */
static const op_rule rules[] = {
    {"Add", "add", NULL, NULL, -1, NULL},
    {"Mul", "mul", NULL, NULL, -1, NULL},
    {"MatMul", "matmul", NULL, NULL, -1, NULL},
    {"Reshape", "reshape", "allowzero:i=0", NULL, 2, lower_view},
    {"Flatten", "flatten", "axis:i=1", NULL, 1, lower_view},
    {"Squeeze", "squeeze", "@1:s?", NULL, 1, lower_view},
    {"Unsqueeze", "unsqueeze", "@1:s", NULL, 1, lower_view},
    {"Identity", NULL, NULL, NULL, 1, lower_alias},
    {"Dropout", NULL, NULL, NULL, 1, lower_alias},
};

static const op_rule *find_rule(const char *op) {
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
    if (!strcmp(rules[i].op, op)) return &rules[i];
  return NULL;
}

/* ---- the function ---- */

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
    else if (sym) {
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
  lowering L = {.c = c, .g = g};
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
  /* uses left per value: a register is released after its last use, so
   * its memory goes back to the pool while the rest of the graph runs;
   * graph outputs are never released */
  int *uses = calloc((size_t)(g->nvalues ? g->nvalues : 1), sizeof *uses);
  if (!uses) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nin; k++)
      if (g->nodes[i]->in[k] && g->nodes[i]->in[k]->id < g->nvalues) uses[g->nodes[i]->in[k]->id]++;
  for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i]->id] += 1 << 24;
  for (int i = 0; i < g->nnodes && !st; i++) {
    const dvmc_node *n = g->nodes[i];
    const op_rule *r = find_rule(n->op);
    dvmc_fn_loc(L.f, n->name);
    if (!r) {
      st = unsupported(n, "the op is not supported");
      break;
    }
    if ((st = (r->lower ? r->lower : lower_kernel)(&L, n, r))) break;
    for (int k = 0; k < n->nin; k++) {
      const dvmc_value *v = n->in[k];
      int reg = v ? lookup(&L, v) : -1;
      if (reg >= 0 && v->id < g->nvalues && --uses[v->id] == 0) dvmc_fn_op1(L.f, DVM_OP_RELEASE, reg);
    }
    for (int k = 0; k < n->nout; k++) { /* outputs nothing reads */
      int reg = lookup(&L, n->out[k]);
      if (reg >= 0 && n->out[k]->id < g->nvalues && uses[n->out[k]->id] == 0)
        dvmc_fn_op1(L.f, DVM_OP_RELEASE, reg);
    }
  }
  free(uses);
  if (st) goto done;
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
  st = dvmc_emit_finish(L.e, bytes, size);
done:
  free(L.map);
  dvmc_emit_destroy(L.e);
  return st;
}
