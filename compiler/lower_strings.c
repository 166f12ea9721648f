/* The ONNX string ops whose attributes are strings (each a constant string
 * tensor input of its kernel, ops/cpu/strings.c), and ZipMap. */
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "lowering.h"

dvm_status *lw_lower_regex_full_match(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *p = dvmc_attr_find(n, "pattern");
  if (!p) return lw_invalid(n, "has no pattern");
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  if (st) return st;
  int64_t one = 1;
  int reg = c.ins[c.nin++] = lw_const_reg(L, n, "pattern", dvmc_tensor_strings(L->c, 1, &one, 1, &p->s, NULL));
  if (reg < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  st = lw_emit_call(L, n, r, &c);
  dvmc_fn_RELEASE(L->f, reg);
  return st;
}

/* ZipMap: the tuple (labels [C], X [N, C]) of the labels constant (strings
 * or int64s) and the probabilities as they are; a run-time check that X has
 * a column per label. The module's function info "maps" lists the results
 * that are such tuples (lower.c), for clients that make maps of them. */
dvm_status *lw_lower_zipmap(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *s = dvmc_attr_find(n, "classlabels_strings"), *i = dvmc_attr_find(n, "classlabels_int64s");
  if (!s == !i) return lw_invalid(n, "needs one of classlabels_strings and classlabels_int64s");
  const dvmc_value *x = n->in[0];
  if (!x || !x->typed || x->dtype != DVM_F32 || x->rank != 2)
    return lw_unsupported(n, "X must be f32 [N, C]");
  int64_t k = s ? s->n : i->n;
  dvmc_tensor *t = s ? dvmc_tensor_strings(L->c, 1, &k, (size_t)k, s->strings, NULL)
                     : dvm_arena_alloc(&L->c->arena, 1, sizeof *t);
  if (!t) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (i) *t = (dvmc_tensor){.dtype = DVM_I64, .rank = 1, .dims = {k}, .data = i->ints, .nbytes = (size_t)k * 8};
  char msg[200];
  int xr, labels = lw_const_reg(L, n, "labels", t), out = dvmc_fn_reg(L->f);
  if (labels < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = lw_reg_of(L, x, &xr);
  if (st) return st;
  int cols = dvmc_fn_reg(L->f), want = lw_emit_int(L, k), ok = dvmc_fn_reg(L->f);
  dvmc_fn_DIM(L->f, cols, xr, 1);
  dvmc_fn_EQ(L->f, ok, cols, want);
  snprintf(msg, sizeof msg, "node \"%.80s\" (ZipMap): X must have a column per label (%lld)", n->name, (long long)k);
  dvmc_fn_CHECK(L->f, ok, dvmc_emit_string(L->e, msg));
  dvmc_fn_TUPLE(L->f, out, DVM_LIST(labels, xr));
  dvmc_fn_RELEASE(L->f, labels);
  dvmc_fn_RELEASE(L->f, cols);
  dvmc_fn_RELEASE(L->f, want);
  dvmc_fn_RELEASE(L->f, ok);
  ((dvmc_value *)n->out[0])->typed = false; /* items of two dtypes */
  return lw_bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* The call of r's kernel on X and the constant string tensor t, then int attributes. */
static dvm_status *call_with_strings(lowering *L, const dvmc_node *n, const op_rule *r, const char *what,
                                     const dvmc_tensor *t, const int64_t *attrs, int nattrs) {
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  if (st) return st;
  int reg = c.ins[c.nin++] = lw_const_reg(L, n, what, t);
  if (reg < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int i = 0; i < nattrs; i++) c.attrs[c.nattrs++] = lw_emit_int(L, attrs[i]);
  st = lw_emit_call(L, n, r, &c);
  dvmc_fn_RELEASE(L->f, reg);
  return st;
}

dvm_status *lw_lower_string_normalizer(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const actions[] = {"NONE", "LOWER", "UPPER"};
  const char *act = dvmc_attr_string(n, "case_change_action", "NONE");
  int64_t attrs[2] = {-1, dvmc_attr_int(n, "is_case_sensitive", 0)};
  for (int i = 0; i < 3; i++)
    if (!strcmp(act, actions[i])) attrs[0] = i;
  if (attrs[0] < 0) return lw_invalid(n, "case_change_action \"%s\" is not NONE, LOWER or UPPER", act);
  const dvmc_attr *sw = dvmc_attr_find(n, "stopwords");
  int64_t k = sw ? sw->n : 0;
  static const char *const none[1] = {""};
  return call_with_strings(L, n, r, "stopwords", dvmc_tensor_strings(L->c, 1, &k, (size_t)k, sw ? sw->strings : none, NULL),
                           attrs, 2);
}

dvm_status *lw_lower_string_split(lowering *L, const dvmc_node *n, const op_rule *r) {
  const char *d = dvmc_attr_string(n, "delimiter", "");
  int64_t one = 1, maxsplit = dvmc_attr_int(n, "maxsplit", -1);
  if (maxsplit < 0) maxsplit = -1; /* any number of splits */
  return call_with_strings(L, n, r, "delimiter", dvmc_tensor_strings(L->c, 1, &one, 1, &d, NULL), &maxsplit, 1);
}
