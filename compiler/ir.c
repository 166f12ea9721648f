/* The graph IR (see ir.h): contexts, graphs, values, nodes, attributes, and
 * the text form printed by `dvm compile --dump-ir`.
 *
 * Each graph keeps a hash map from value name to value, so that finding a
 * name costs the same in a model of 10^5 values as in one of 10. The map
 * lives beside the public struct: graphs are only made by dvmc_graph_new,
 * which allocates the larger private struct below.
 *
 * Text form (one line per item, indented two spaces per level):
 *
 *   graph main
 *     input  %ids: i64[batch, seq]
 *     const  %shape: i64[2] = [1, -1]
 *     const  %w0: f32[768, 768]
 *     %y: ? = MatMul(%ids, %w0)  ; node "MatMul_17"
 *     %r: ? = If(%c) {}  ; node "If_2"
 *       then_branch: graph then
 *         %t: ? = Add(%y, %w0)  ; node "Add_3"
 *         output %t
 *       else_branch: graph else
 *         ...
 *     output %y
 *
 * Values are written `%name`, the name quoted ("%\"a b\"") unless it is made
 * of letters, digits and _ . : / -; an omitted optional input or output is
 * `none`. Types are `dtype[dims]`: `?` for an unknown dim, `f32[*]` for an
 * unknown rank, `?` alone when nothing is known. Attributes other than graphs
 * are listed in braces in the order stored (ints; floats written so that
 * they read back to the same float, always with a "." or an exponent;
 * "strings"; [lists]; tensors as `i64[2] [1, -1]`); graph attributes follow
 * the node, indented. Data of at most 16 elements is written out. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "extdata.h"
#include "ir.h"
#include "ops.h"

/* A graph and its name -> value map (open addressing, linear probing). */
typedef struct graph_impl {
  dvmc_graph g;
  dvmc_value **slots;
  size_t cap, count; /* cap is a power of two, count <= cap / 2 */
} graph_impl;

#define PRINT_ELEMS 16

/* ---- the context ---- */

dvm_status *dvmc_ctx_create(dvmc_ctx **out) {
  *out = NULL;
  dvmc_ctx *c = calloc(1, sizeof *c);
  if (!c) return dvm_status_new(DVM_OUT_OF_MEMORY, "dvmc_ctx_create: out of memory");
  dvm_status *st = dvmc_exprs_create(&c->exprs);
  if (st) {
    free(c);
    return st;
  }
  *out = c;
  return NULL;
}

void dvmc_ctx_destroy(dvmc_ctx *c) {
  if (!c) return;
  dvmc_extdata_unmap(c);
  dvmc_exprs_destroy(c->exprs);
  dvm_arena_free(&c->arena);
  free(c);
}

/* ---- graphs and the name map ---- */

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

static dvmc_value *map_get(const graph_impl *gi, const char *name) {
  if (!gi->cap) return NULL;
  size_t mask = gi->cap - 1;
  for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
    dvmc_value *v = gi->slots[i];
    if (!v) return NULL;
    if (strcmp(v->name, name) == 0) return v;
  }
}

static void map_put_slot(dvmc_value **slots, size_t cap, dvmc_value *v) {
  size_t mask = cap - 1;
  size_t i = name_hash(v->name) & mask;
  while (slots[i]) i = (i + 1) & mask;
  slots[i] = v;
}

/* Adds v unless its name is already there (the first definition stays). */
static bool map_put(dvmc_ctx *c, graph_impl *gi, dvmc_value *v) {
  if ((gi->count + 1) * 2 > gi->cap) {
    size_t cap = gi->cap ? gi->cap * 2 : 64;
    dvmc_value **slots = dvm_arena_alloc(&c->arena, cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < gi->cap; i++)
      if (gi->slots[i]) map_put_slot(slots, cap, gi->slots[i]);
    gi->slots = slots;
    gi->cap = cap;
  }
  if (map_get(gi, v->name)) return true;
  map_put_slot(gi->slots, gi->cap, v);
  gi->count++;
  return true;
}

/* An arena array of pointers with room for one more than n: `items` itself
 * when it has room, else a copy twice the size (NULL when out of memory or at
 * the int limit). */
static void *grow(dvmc_ctx *c, void *items, int n, int *cap) {
  if (n < *cap) return items;
  if (*cap > (1 << 28)) return NULL;
  int ncap = *cap ? *cap * 2 : 16;
  void **p = dvm_arena_alloc(&c->arena, (size_t)ncap, sizeof *p);
  if (!p) return NULL;
  if (n) memcpy(p, items, (size_t)n * sizeof *p);
  *cap = ncap;
  return p;
}

dvmc_graph *dvmc_graph_new(dvmc_ctx *c, const char *name, dvmc_graph *parent) {
  graph_impl *gi = dvm_arena_alloc(&c->arena, 1, sizeof *gi);
  if (!gi) return NULL;
  gi->g.name = dvm_arena_strdup(&c->arena, name ? name : "");
  gi->g.parent = parent;
  return gi->g.name ? &gi->g : NULL;
}

dvmc_value *dvmc_value_new(dvmc_ctx *c, dvmc_graph *g, const char *name) {
  dvmc_value **values = grow(c, g->values, g->nvalues, &g->values_cap);
  if (!values) return NULL;
  g->values = values;
  dvmc_value *v = dvm_arena_alloc(&c->arena, 1, sizeof *v);
  if (!v) return NULL;
  v->name = dvm_arena_strdup(&c->arena, name ? name : "");
  if (!v->name) return NULL;
  v->rank = -1;
  v->id = g->nvalues;
  if (v->name[0] && !map_put(c, (graph_impl *)g, v)) return NULL;
  g->values[g->nvalues++] = v;
  return v;
}

dvmc_value *dvmc_value_find(const dvmc_graph *g, const char *name) {
  if (!name || !name[0]) return NULL;
  for (; g; g = g->parent) {
    dvmc_value *v = map_get((const graph_impl *)g, name);
    if (v) return v;
  }
  return NULL;
}

dvmc_node *dvmc_node_new(dvmc_ctx *c, dvmc_graph *g, const char *op, int nin, int nout) {
  if (nin < 0 || nout < 0) return NULL;
  dvmc_node **nodes = grow(c, g->nodes, g->nnodes, &g->nodes_cap);
  if (!nodes) return NULL;
  g->nodes = nodes;
  dvmc_node *n = dvm_arena_alloc(&c->arena, 1, sizeof *n);
  if (!n) return NULL;
  char gen[64];
  snprintf(gen, sizeof gen, "_%d", c->unnamed++);
  size_t oplen = strlen(op), genlen = strlen(gen);
  char *name = dvm_arena_alloc(&c->arena, oplen + genlen + 1, 1);
  n->op = dvm_arena_strdup(&c->arena, op);
  n->def = dvmc_op_find("", op);
  n->domain = "";
  n->opset = c->opset;
  n->nin = nin;
  n->nout = nout;
  n->in = dvm_arena_alloc(&c->arena, nin ? (size_t)nin : 1, sizeof *n->in);
  n->out = dvm_arena_alloc(&c->arena, nout ? (size_t)nout : 1, sizeof *n->out);
  if (!name || !n->op || !n->in || !n->out) return NULL;
  memcpy(name, op, oplen);
  memcpy(name + oplen, gen, genlen + 1);
  n->name = name;
  n->id = g->nnodes;
  g->nodes[g->nnodes++] = n;
  return n;
}

bool dvmc_graph_constrain(dvmc_ctx *c, dvmc_graph *g, const dvmc_constraint *k) {
  for (int i = 0; i < g->nconstraints; i++) {
    const dvmc_constraint *o = &g->constraints[i];
    if (o->rel == k->rel && ((o->a == k->a && o->b == k->b) || (o->a == k->b && o->b == k->a))) return true;
  }
  if (g->nconstraints == g->constraints_cap) { /* the arena cannot grow a block: copy */
    int cap = g->constraints_cap ? 2 * g->constraints_cap : 8;
    dvmc_constraint *p = dvm_arena_alloc(&c->arena, (size_t)cap, sizeof *p);
    if (!p) return false;
    if (g->nconstraints) memcpy(p, g->constraints, (size_t)g->nconstraints * sizeof *p);
    g->constraints = p;
    g->constraints_cap = cap;
  }
  g->constraints[g->nconstraints++] = *k;
  return true;
}

/* ---- attributes ---- */

/* Decimal digits at s, within long long; *end after them. */
static bool dim_value(const char *s, const char **end, long long *out) {
  char *e;
  if (*s < '0' || *s > '9') return false;
  errno = 0;
  *out = strtoll(s, &e, 10);
  *end = e;
  return errno != ERANGE;
}

dvm_status *dvmc_graph_set_dim(dvmc_ctx *c, const dvmc_graph *g, const char *spec) {
  long long lo, hi;
  /* the last '=': the bounds hold none, so the name may hold any character */
  const char *eq = strrchr(spec, '='), *p;
  bool ok = eq && eq > spec && dim_value(eq + 1, &p, &lo);
  if (ok && *p) ok = p[0] == '.' && p[1] == '.' && dim_value(p + 2, &p, &hi) && !*p;
  else hi = lo;
  if (!ok || hi < lo)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: expected NAME=N or NAME=LO..HI with 0 <= LO <= HI <= %lld",
                          spec, LLONG_MAX);
  size_t n = (size_t)(eq - spec);
  for (int k = 0; k < g->ninputs; k++)
    for (int d = 0; d < g->inputs[k]->rank; d++) {
      const char *s = dvmc_expr_sym_name(g->inputs[k]->dims[d]);
      if (s && strlen(s) == n && memcmp(s, spec, n) == 0) {
        dvmc_sym_set_range(c->exprs, dvmc_sym(c->exprs, s), lo, hi);
        return NULL;
      }
    }
  bool ident = strspn(spec, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") == n;
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: no input of the model has a dim named \"%.*s\"%s", spec, (int)n, spec,
                        ident ? "" : " (a dim_param that is not an identifier of letters, digits and '_' is an "
                                     "unknown dim, which has no name)");
}

const dvmc_attr *dvmc_attr_find(const dvmc_node *n, const char *name) {
  for (int i = 0; i < n->nattrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

int64_t dvmc_attr_int(const dvmc_node *n, const char *name, int64_t dflt) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  return a && a->type == DVMC_ATTR_INT ? a->i : dflt;
}

int64_t dvmc_attr_ints_at(const dvmc_node *n, const char *name, int k, int64_t dflt) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  return a && a->type == DVMC_ATTR_INTS && k >= 0 && k < a->n ? a->ints[k] : dflt;
}

double dvmc_attr_float(const dvmc_node *n, const char *name, double dflt) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  return a && a->type == DVMC_ATTR_FLOAT ? a->f : dflt;
}

const char *dvmc_attr_string(const dvmc_node *n, const char *name, const char *dflt) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  return a && a->type == DVMC_ATTR_STRING ? a->s : dflt;
}

/* ---- printing ---- */

static bool plain_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == ':' || ch == '/' || ch == '-';
}

static void print_quoted(const char *s, FILE *out) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(out, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", out);
    else if (*p == '\t')
      fputs("\\t", out);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(out, "\\x%02x", *p);
    else
      fputc(*p, out);
  }
  fputc('"', out);
}

/* A name bare when it is made of plain characters, else quoted. */
static void print_name(const char *s, FILE *out) {
  const char *p = s;
  while (*p && plain_char((unsigned char)*p)) p++;
  if (*s && !*p)
    fputs(s, out);
  else
    print_quoted(s, out);
}

static void print_value_ref(const dvmc_value *v, FILE *out) {
  if (!v) {
    fputs("none", out);
    return;
  }
  fputc('%', out);
  print_name(v->name, out);
}

/* Shortest text that reads back to the same number: as a float when `f32`,
 * else as a double. Plain decimals from 1e-4 up to 1e16, exponents outside;
 * integral values get ".0" so they read as floats. */
static void print_number(double v, bool f32, FILE *out) {
  char buf[64];
  if (isnan(v)) {
    fputs("nan", out);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", out);
    return;
  }
  int prec = 1;
  for (; prec < 17; prec++) {
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (f32 ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
  }
  snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
  int exp10 = atoi(strchr(buf, 'e') + 1);
  if (v != 0 && (exp10 < -4 || exp10 >= 16)) {
    fputs(buf, out);
    return;
  }
  int decimals = prec - 1 - exp10;
  snprintf(buf, sizeof buf, "%.*f", decimals > 0 ? decimals : 0, v);
  fputs(buf, out);
  if (!strchr(buf, '.')) fputs(".0", out);
}

static float half_to_float(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = ldexpf((float)mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = ldexpf((float)(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

static float bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

static void print_elem(const dvmc_tensor *t, size_t i, FILE *out) {
  const unsigned char *p = (const unsigned char *)t->data + i * dvm_dtype_size(t->dtype);
  union {
    float f;
    double d;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
  } u;
  memcpy(&u, p, dvm_dtype_size(t->dtype));
  switch (t->dtype) {
  case DVM_F32: print_number(u.f, true, out); break;
  case DVM_F16: print_number(half_to_float(u.u16), true, out); break;
  case DVM_BF16: print_number(bf16_to_float(u.u16), true, out); break;
  case DVM_F64: print_number(u.d, false, out); break;
  case DVM_I8: fprintf(out, "%d", u.i8); break;
  case DVM_I16: fprintf(out, "%d", u.i16); break;
  case DVM_I32: fprintf(out, "%" PRId32, u.i32); break;
  case DVM_I64: fprintf(out, "%" PRId64, u.i64); break;
  case DVM_U8: fprintf(out, "%u", u.u8); break;
  case DVM_U16: fprintf(out, "%u", u.u16); break;
  case DVM_U32: fprintf(out, "%" PRIu32, u.u32); break;
  case DVM_U64: fprintf(out, "%" PRIu64, u.u64); break;
  case DVM_BOOL: fputs(u.u8 ? "true" : "false", out); break;
  default: fputc('?', out); break;
  }
}

/* "i64[2]", then `sep` and the data when it is small: "i64[2] = [1, -1]". */
static void print_tensor(const dvmc_tensor *t, const char *sep, FILE *out) {
  fprintf(out, "%s[", dvm_dtype_name(t->dtype));
  size_t numel = 1;
  for (int i = 0; i < t->rank; i++) {
    fprintf(out, "%s%" PRId64, i ? ", " : "", t->dims[i]);
    if (t->dims[i] < 0 || __builtin_mul_overflow(numel, (size_t)t->dims[i], &numel))
      numel = SIZE_MAX;
  }
  fputc(']', out);
  if (numel > PRINT_ELEMS || numel * dvm_dtype_size(t->dtype) > t->nbytes) return;
  fprintf(out, "%s[", sep);
  for (size_t i = 0; i < numel; i++) {
    if (i) fputs(", ", out);
    print_elem(t, i, out);
  }
  fputc(']', out);
}

const char *dvmc_kind_name(dvmc_kind k) {
  static const char *const names[] = {"tensor", "sequence", "optional tensor", "optional sequence"};
  return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

void dvmc_value_print_type(const dvmc_value *v, FILE *out) {
  if (v->kind != DVMC_TENSOR) { /* "seq(f32)", "opt(f32)", "opt(seq(f32))" */
    const char *dt = v->typed ? dvm_dtype_name(v->dtype) : "?";
    fprintf(out, v->kind == DVMC_SEQUENCE ? "seq(%s)" : v->kind == DVMC_OPT_TENSOR ? "opt(%s)" : "opt(seq(%s))", dt);
    return;
  }
  if (!v->typed && v->rank < 0) {
    fputc('?', out);
    return;
  }
  fputs(v->typed ? dvm_dtype_name(v->dtype) : "?", out);
  if (v->rank < 0) {
    fputs("[*]", out);
    return;
  }
  fputc('[', out);
  for (int i = 0; i < v->rank && i < DVM_MAX_RANK; i++) {
    if (i) fputs(", ", out);
    if (v->dims[i])
      dvmc_expr_print(v->dims[i], out);
    else
      fputc('?', out);
  }
  fputc(']', out);
}

static void print_attr_value(const dvmc_attr *a, FILE *out) {
  switch (a->type) {
  case DVMC_ATTR_FLOAT: print_number(a->f, (double)(float)a->f == a->f, out); break;
  case DVMC_ATTR_INT: fprintf(out, "%" PRId64, a->i); break;
  case DVMC_ATTR_STRING: print_quoted(a->s, out); break;
  case DVMC_ATTR_TENSOR: print_tensor(a->t, " ", out); break;
  case DVMC_ATTR_GRAPH: fputs("graph", out); break;
  case DVMC_ATTR_TYPE: dvmc_value_print_type(a->type_of, out); break;
  case DVMC_ATTR_FLOATS:
  case DVMC_ATTR_INTS:
  case DVMC_ATTR_STRINGS:
    fputc('[', out);
    for (int i = 0; i < a->n; i++) {
      if (i) fputs(", ", out);
      if (a->type == DVMC_ATTR_FLOATS)
        print_number(a->floats[i], (double)(float)a->floats[i] == a->floats[i], out);
      else if (a->type == DVMC_ATTR_INTS)
        fprintf(out, "%" PRId64, a->ints[i]);
      else
        print_quoted(a->strings[i], out);
    }
    fputc(']', out);
    break;
  }
}

static void print_body(const dvmc_graph *g, int ind, FILE *out);

static void print_node(const dvmc_node *n, int ind, FILE *out) {
  fprintf(out, "%*s", ind, "");
  for (int i = 0; i < n->nout; i++) {
    if (i) fputs(", ", out);
    print_value_ref(n->out[i], out);
    if (n->out[i]) {
      fputs(": ", out);
      dvmc_value_print_type(n->out[i], out);
      if (n->out[i]->elems) { /* contents known as expressions: "{batch, seq, 4, 8}" */
        fputs(" {", out);
        for (int k = 0; k < n->out[i]->nelems; k++) {
          if (k) fputs(", ", out);
          dvmc_expr_print(n->out[i]->elems[k], out);
        }
        fputc('}', out);
      }
    }
  }
  if (n->nout) fputs(" = ", out);
  if (n->domain[0]) {
    print_name(n->domain, out);
    fputs("::", out);
  }
  print_name(n->op, out);
  fputc('(', out);
  for (int i = 0; i < n->nin; i++) {
    if (i) fputs(", ", out);
    print_value_ref(n->in[i], out);
  }
  fputc(')', out);
  int shown = 0;
  for (int i = 0; i < n->nattrs; i++) {
    const dvmc_attr *a = &n->attrs[i];
    if (a->type == DVMC_ATTR_GRAPH) continue;
    fputs(shown++ ? ", " : " {", out);
    print_name(a->name, out);
    fputc('=', out);
    print_attr_value(a, out);
  }
  if (shown) fputc('}', out);
  fputs("  ; node ", out);
  print_quoted(n->name, out);
  if (n->shape_lost) fprintf(out, "  ; shapes unknown from here: %s", n->shape_lost);
  fputc('\n', out);
  for (int i = 0; i < n->nattrs; i++) {
    const dvmc_attr *a = &n->attrs[i];
    if (a->type != DVMC_ATTR_GRAPH || !a->g) continue;
    fprintf(out, "%*s", ind + 2, "");
    print_name(a->name, out);
    fputs(": graph ", out);
    print_name(a->g->name, out);
    fputc('\n', out);
    print_body(a->g, ind + 4, out);
  }
}

static void print_body(const dvmc_graph *g, int ind, FILE *out) {
  for (int i = 0; i < g->ninputs; i++) {
    fprintf(out, "%*sinput  ", ind, "");
    print_value_ref(g->inputs[i], out);
    fputs(": ", out);
    dvmc_value_print_type(g->inputs[i], out);
    fputc('\n', out);
  }
  for (int i = 0; i < g->nvalues; i++) {
    const dvmc_value *v = g->values[i];
    if (!v->constant || v->producer) continue;
    fprintf(out, "%*sconst  ", ind, "");
    print_value_ref(v, out);
    fputs(": ", out);
    print_tensor(v->constant, " = ", out);
    fputc('\n', out);
  }
  for (int i = 0; i < g->nnodes; i++) print_node(g->nodes[i], ind, out);
  for (int i = 0; i < g->noutputs; i++) {
    fprintf(out, "%*soutput ", ind, "");
    print_value_ref(g->outputs[i], out);
    fputc('\n', out);
  }
}

void dvmc_graph_print(const dvmc_graph *g, FILE *out) {
  fputs("graph ", out);
  print_name(g->name, out);
  fputc('\n', out);
  print_body(g, 2, out);
  for (int i = 0; i < g->nconstraints; i++) {
    const dvmc_constraint *k = &g->constraints[i];
    fputs("  constraint ", out);
    dvmc_expr_print(k->b, out);
    fputs(" == ", out);
    dvmc_expr_print(k->a, out);
    fputs(k->rel == DVMC_REL_EQ_OR_ONE ? ", or one of them is 1" : "", out);
    fputs(k->unified ? " (unified)" : "", out);
    fputs("  ; node ", out);
    print_quoted(k->node->name, out);
    fprintf(out, ": %s\n", k->why);
  }
}

/* A JSON string: control bytes as \u00XX, so any name reads back. */
static void print_json_string(const char *s, FILE *out) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p == '"' || *p == '\\')
      fprintf(out, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      fprintf(out, "\\u%04x", *p);
    else
      fputc(*p, out);
  fputc('"', out);
}

void dvmc_graph_print_shapes(const dvmc_graph *g, FILE *out) {
  fputs("{\"values\": [", out);
  int first = 1;
  for (int i = 0; i < g->nvalues; i++) {
    const dvmc_value *v = g->values[i];
    int input = 0;
    for (int k = 0; k < g->ninputs; k++) input |= g->inputs[k] == v;
    if (!v->producer && !input) continue; /* constants, and values a rewrite left unmade */
    fputs(first ? "\n  {\"name\": " : ",\n  {\"name\": ", out);
    first = 0;
    print_json_string(v->name, out);
    fputs(", \"dtype\": ", out);
    if (v->typed)
      print_json_string(dvm_dtype_name(v->dtype), out);
    else
      fputs("null", out);
    fputs(", \"dims\": ", out);
    if (v->rank < 0) {
      fputs("null", out);
    } else {
      fputc('[', out);
      for (int d = 0; d < v->rank; d++) {
        char buf[512];
        if (d) fputs(", ", out);
        if (v->dims[d])
          print_json_string(dvmc_expr_str(v->dims[d], buf, sizeof buf), out);
        else
          fputs("null", out);
      }
      fputc(']', out);
    }
    if (v->producer) {
      fputs(", \"node\": ", out);
      print_json_string(v->producer->name, out);
      fputs(", \"op\": ", out);
      print_json_string(v->producer->op, out);
    }
    fputc('}', out);
  }
  fputs("\n]}\n", out);
}

dvmc_tensor *dvmc_tensor_strings(dvmc_ctx *c, int rank, const int64_t *dims, size_t n, const char *const *s,
                                 const size_t *lens) {
  size_t total = 8 * n;
  for (size_t i = 0; i < n; i++) total += lens ? lens[i] : strlen(s[i]);
  dvmc_tensor *t = dvm_arena_alloc(&c->arena, 1, sizeof *t);
  uint8_t *blob = dvm_arena_alloc(&c->arena, total ? total : 1, 1);
  if (!t || !blob) return NULL;
  *t = (dvmc_tensor){.dtype = DVM_STRING, .rank = rank, .data = blob, .nbytes = total};
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  uint8_t *text = blob + 8 * n;
  for (size_t i = 0; i < n; i++) {
    size_t len = lens ? lens[i] : strlen(s[i]);
    for (int b = 0; b < 8; b++) blob[8 * i + (size_t)b] = (uint8_t)((uint64_t)len >> 8 * b);
    if (len) memcpy(text, s[i], len);
    text += len;
  }
  return t;
}
