/* LabelEncoder, CategoryMapper and OneHotEncoder: their attributes as the
 * constant inputs of kernels label_encoder and one_hot_encoder
 * (ops/cpu/ml_map.c).
 *
 * LabelEncoder (opset 2 on) maps keys_* to values_* (strings, int64s,
 * floats or, opset 4, tensors), default_* (or default_tensor) where no key
 * matches: "_Unused", -1 or -0.0 by the values' type, as the spec says.
 * LabelEncoder opset 1 and CategoryMapper map strings to int64s and back:
 * opset 1's classes_strings to their indices, CategoryMapper's cats_strings
 * to cats_int64s, the direction X's type. */
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "lower_ml.h"
#include "lowering.h"
#include "ops.h"

/* A constant tensor of the node's in the arena. */
static dvmc_tensor *tensor_of(lowering *L, dvm_dtype dt, int64_t n, const void *data) {
  dvmc_tensor *t = dvm_arena_alloc(&L->c->arena, 1, sizeof *t);
  if (t) *t = (dvmc_tensor){.dtype = dt, .rank = 1, .dims = {n}, .data = data, .nbytes = (size_t)n * dvm_dtype_size(dt)};
  return t;
}

/* Attribute a (strings, ints, floats or a tensor) as a tensor; NULL when
 * out of memory. */
static dvmc_tensor *attr_tensor(lowering *L, const dvmc_attr *a) {
  int64_t n = a->n;
  switch (a->type) {
  case DVMC_ATTR_STRINGS: return dvmc_tensor_strings(L->c, 1, &n, (size_t)n, a->strings, NULL);
  case DVMC_ATTR_INTS: return tensor_of(L, DVM_I64, n, a->ints);
  case DVMC_ATTR_FLOATS: {
    float *f = dvm_arena_alloc(&L->c->arena, (size_t)(n ? n : 1), sizeof *f);
    for (int64_t i = 0; f && i < n; i++) f[i] = (float)a->floats[i];
    return f ? tensor_of(L, DVM_F32, n, f) : NULL;
  }
  default: return (dvmc_tensor *)a->t;
  }
}

/* The first of n's attributes `names` present (NULL-ended), or NULL. */
static const dvmc_attr *first_of(const dvmc_node *n, const char *const *names) {
  for (; *names; names++) {
    const dvmc_attr *a = dvmc_attr_find(n, *names);
    if (a) return a;
  }
  return NULL;
}

/* One value of dtype dt as a tensor: a string, an int or a float. */
static dvmc_tensor *scalar(lowering *L, dvm_dtype dt, const char *s, int64_t i, double f) {
  int64_t one = 1;
  if (dt == DVM_STRING) return dvmc_tensor_strings(L->c, 1, &one, 1, &s, NULL);
  void *p = dvm_arena_alloc(&L->c->arena, 1, 8);
  if (!p) return NULL;
  if (dt == DVM_I64) *(int64_t *)p = i;
  else *(float *)p = (float)f;
  return tensor_of(L, dt, 1, p);
}

dvm_dtype dvmc_ml_map_dtype(const dvmc_node *n, bool *known) {
  static const char *const values[] = {"values_strings", "values_int64s", "values_floats", "values_tensor", NULL};
  const dvmc_attr *v = first_of(n, values);
  if (v) return v->type == DVMC_ATTR_STRINGS ? DVM_STRING : v->type == DVMC_ATTR_INTS ? DVM_I64
                : v->type == DVMC_ATTR_FLOATS ? DVM_F32 : v->t ? v->t->dtype : DVM_F32;
  const dvmc_value *x = n->nin ? n->in[0] : NULL;
  *known = x && x->typed;
  return *known && x->dtype == DVM_STRING ? DVM_I64 : DVM_STRING;
}

/* Strings to int64s and back: LabelEncoder opset 1 (classes_strings and
 * their indices), CategoryMapper (cats_strings and cats_int64s). */
static dvm_status *strings_and_ints(lowering *L, const dvmc_node *n, dvmc_tensor **keys, dvmc_tensor **vals,
                                    dvmc_tensor **def) {
  bool cat = !strcmp(n->op, "CategoryMapper"), from_text = n->in[0]->dtype == DVM_STRING;
  const dvmc_attr *s = dvmc_attr_find(n, cat ? "cats_strings" : "classes_strings"), *i = dvmc_attr_find(n, "cats_int64s");
  if (!s || s->type != DVMC_ATTR_STRINGS || (cat && (!i || i->type != DVMC_ATTR_INTS || i->n != s->n)))
    return lw_invalid(n, cat ? "needs cats_strings and as many cats_int64s" : "needs keys and values, or classes_strings");
  if (!from_text && n->in[0]->dtype != DVM_I64)
    return lw_unsupported(n, "X is %s: want string or int64", dvm_dtype_name(n->in[0]->dtype));
  dvmc_tensor *text = attr_tensor(L, s), *ints = cat ? attr_tensor(L, i) : NULL;
  if (!cat) {
    int64_t *idx = dvm_arena_alloc(&L->c->arena, (size_t)(s->n ? s->n : 1), sizeof *idx);
    for (int k = 0; idx && k < s->n; k++) idx[k] = k;
    ints = idx ? tensor_of(L, DVM_I64, s->n, idx) : NULL;
  }
  *keys = from_text ? text : ints;
  *vals = from_text ? ints : text;
  *def = from_text ? scalar(L, DVM_I64, NULL, dvmc_attr_int(n, "default_int64", -1), 0)
                   : scalar(L, DVM_STRING, dvmc_attr_string(n, "default_string", "_Unused"), 0, 0);
  return NULL;
}

/* The call of r's kernel on X and the constants t[k] (in order), attribute registers attrs. */
static dvm_status *call_consts(lowering *L, const dvmc_node *n, const op_rule *r, const char *const *what,
                               dvmc_tensor *const *t, int k, const int64_t *attrs, int nattrs) {
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  for (int i = 0; i < k && !st; i++)
    if ((c.ins[c.nin++] = lw_const_reg(L, n, what[i], t[i])) < 0) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int i = 0; i < nattrs; i++) c.attrs[c.nattrs++] = attrs[i];
  if (!st) st = lw_emit_call(L, n, r, &c);
  for (int i = 1; i < c.nin; i++) dvmc_fn_RELEASE(L->f, c.ins[i]);
  return st;
}

dvm_status *lw_lower_label_encoder(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const keys_names[] = {"keys_strings", "keys_int64s", "keys_floats", "keys_tensor", NULL};
  static const char *const values_names[] = {"values_strings", "values_int64s", "values_floats", "values_tensor", NULL};
  if (!n->in[0] || !n->in[0]->typed) return lw_unsupported(n, "X's type is not known");
  dvmc_tensor *t[3] = {0};
  const dvmc_attr *ka = first_of(n, keys_names), *va = first_of(n, values_names);
  dvm_status *st = NULL;
  if (!ka && !va) {
    st = strings_and_ints(L, n, &t[0], &t[1], &t[2]);
  } else {
    if (!ka || !va) return lw_invalid(n, "has %s but no %s", ka ? "keys" : "values", ka ? "values" : "keys");
    t[0] = attr_tensor(L, ka);
    t[1] = attr_tensor(L, va);
    const dvmc_attr *d = dvmc_attr_find(n, "default_tensor");
    dvm_dtype vt = t[1] ? t[1]->dtype : DVM_F32;
    t[2] = d ? (dvmc_tensor *)d->t
             : scalar(L, vt, dvmc_attr_string(n, "default_string", "_Unused"), dvmc_attr_int(n, "default_int64", -1),
                      dvmc_attr_float(n, "default_float", -0.0));
    if (t[0] && t[0]->dtype != n->in[0]->dtype)
      return lw_unsupported(n, "X is %s and the keys %s: want one type", dvm_dtype_name(n->in[0]->dtype),
                            dvm_dtype_name(t[0]->dtype));
    if (!d && vt != DVM_STRING && vt != DVM_I64 && vt != DVM_F32)
      return lw_unsupported(n, "%s values need default_tensor", dvm_dtype_name(vt));
  }
  if (st) return st;
  if (!t[0] || !t[1] || !t[2]) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  static const char *const what[] = {"keys", "values", "default"};
  return call_consts(L, n, r, what, t, 3, NULL, 0);
}

dvm_status *lw_lower_one_hot_encoder(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const cats_names[] = {"cats_strings", "cats_int64s", NULL};
  const dvmc_attr *ca = first_of(n, cats_names);
  if (!ca || (dvmc_attr_find(n, "cats_strings") && dvmc_attr_find(n, "cats_int64s")))
    return lw_invalid(n, "needs one of cats_strings and cats_int64s");
  if (!n->out[0] || !dvmc_value_shape_known(n->out[0])) return lw_unsupported(n, "X's rank is not known");
  dvmc_tensor *t = attr_tensor(L, ca);
  if (!t) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int64_t zeros = lw_emit_int(L, dvmc_attr_int(n, "zeros", 1));
  static const char *const what[] = {"cats"};
  return call_consts(L, n, r, what, &t, 1, &zeros, 1);
}
