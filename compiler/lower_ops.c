/* The op table's lowering columns (ops.def), and the special lowerings of
 * ops that are more than one kernel call with their attributes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowering.h"
#include "ops.h"
#include "half.h"
#include "ops/cpu/fused.h"
#include "shapefuncs/attention.h"
#include "onnx_import.h"
#include "shapefuncs/window.h"
/* Reshape, Squeeze, Unsqueeze, Flatten, dvm.LayoutView: a shape function (or
 * the known dims) and a view. */
dvm_status *lw_lower_view(lowering *L, const dvmc_node *n, const op_rule *r) {
  int data, na = 0;
  if (!n->nin || !n->in[0] || n->nout != 1 || !n->out[0]) return lw_unsupported(n, "needs one input and one output");
  dvm_status *st = lw_reg_of(L, n->in[0], &data);
  if (st) return st;
  if (dvmc_value_shape_known(n->out[0]) && lw_all_emittable(L, n->out[0]->rank, n->out[0]->dims)) {
    int shape = lw_shape_of_exprs(L, n->out[0]->rank, n->out[0]->dims), out = dvmc_fn_reg(L->f);
    dvmc_fn_RESHAPE(L->f, out, data, shape);
    dvmc_fn_RELEASE(L->f, shape);
    if (n->in[0]->typed) lw_set_type(n->out[0], n->in[0]->dtype);
    return lw_bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  /* dvm.LayoutView (pass conv_nhwc) is made only where its dims are known */
  if (!r->kernel) return lw_unsupported(n, "its output's dims are not known");
  int sf = dvmc_emit_shapefn(L->e, r->kernel);
  int shape = dvmc_fn_reg(L->f);
  int64_t args[16] = {data};
  int nins = 1;
  if (!strcmp(n->op, "Reshape")) { /* the target shape is a tensor input */
    int s;
    if (n->nin < 2 || !n->in[1]) return lw_unsupported(n, "Reshape needs a shape input");
    if ((st = lw_reg_of(L, n->in[1], &s))) return st;
    args[nins++] = s;
  }
  for (const char *p = r->attrs ? r->attrs : ""; *p;) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    int reg = lw_lower_attr(L, n, p, len, &st);
    if (reg == -2) return st;
    if (reg >= 0) args[nins + na++] = reg;
    p += len;
  }
  dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(shape), (dvm_list){nins + na, args});
  int out = dvmc_fn_reg(L->f);
  dvmc_fn_RESHAPE(L->f, out, data, shape);
  if (n->in[0]->typed) lw_set_type(n->out[0], n->in[0]->dtype);
  dvmc_fn_RELEASE(L->f, shape);
  for (int i = 0; i < na; i++) dvmc_fn_RELEASE(L->f, args[nins + i]);
  return lw_bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* Identity (and Dropout at inference): the output is the input. */
dvm_status *lw_lower_alias(lowering *L, const dvmc_node *n, const op_rule *r) {
  int reg;
  for (int i = 1; i < n->nout; i++)
    if (n->out[i] && n->out[i]->uses) return lw_unsupported(n, "output %d is not supported", i);
  if (!n->in[0] || !n->out[0]) return lw_unsupported(n, "needs its input and output");
  dvm_status *st = lw_reg_of(L, n->in[0], &reg);
  if (st) return st;
  int out = dvmc_fn_reg(L->f);
  dvmc_fn_MOVE(L->f, out, reg);
  if (n->in[0]->typed) lw_set_type(n->out[0], n->in[0]->dtype);
  lw_set_kind(n->out[0], n->in[0]->kind);
  return lw_bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* Dropout. At inference (training_mode, input 2 from opset 12, absent or
 * a constant false) or with a constant ratio of 0, y is x and the mask all
 * true: an alias and a fill. Otherwise the dropout kernel, which draws
 * its mask at run time when training_mode is true and the ratio not 0. */
dvm_status *lw_lower_dropout(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (!n->nin || !n->in[0] || !n->out[0]) return lw_unsupported(n, "needs its input and output");
  if (n->nout > 1 && n->out[1] && n->opset < 10)
    return lw_unsupported(n, "the mask output before opset 10 (of the input's dtype, not bool) is not supported");
  const dvmc_tensor *t = n->nin > 2 && n->in[2] ? n->in[2]->constant : NULL;
  double ratio = -1;
  int off = !(n->nin > 2 && n->in[2]) || (t && t->nbytes == 1 && !*(const uint8_t *)t->data) ||
            (n->nin > 1 && n->in[1] && lw_const_float(n->in[1], &ratio) && ratio == 0);
  if (!off) return lw_lower_kernel(L, n, r);
  const dvmc_value *mask = n->nout > 1 ? n->out[1] : NULL;
  dvmc_node first = *n;
  first.nout = 1;
  dvm_status *st = lw_lower_alias(L, &first, r);
  if (st || !mask) return st;
  int x, s = dvmc_fn_reg(L->f), m = dvmc_fn_reg(L->f), one = lw_emit_int(L, 1);
  if ((st = lw_reg_of(L, n->in[0], &x))) return st;
  dvmc_fn_SHAPE_OF(L->f, s, x);
  dvmc_fn_ALLOC(L->f, m, DVM_BOOL, s, DVM_DEVICE_CPU);
  int k = dvmc_emit_kernel(L->e, "fill", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(m), DVM_NO_LIST, DVM_LIST(one));
  dvmc_fn_RELEASE(L->f, s);
  dvmc_fn_RELEASE(L->f, one);
  lw_set_type(mask, DVM_BOOL);
  return lw_bind(L, mask, m) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* The random ops (ops/cpu/random.c): the generic call, which runs on every
 * run and draws anew (nothing folds a node or shares one node's call with
 * another). Refused up front: an output dtype the kernel lacks, and
 * RandomNormal or RandomUniform without their shape attribute. */
dvm_status *lw_lower_random(lowering *L, const dvmc_node *n, const op_rule *r) {
  uint32_t want = DVM_DTYPES_FLOAT;
  const char *names = "f32, f64, f16 or bf16";
  if (!strcmp(n->op, "Bernoulli"))
    want |= DVM_DTYPES_INTEGER | DVM_DTYPE_BIT(DVM_BOOL), names = "a number dtype or bool";
  if (!strcmp(n->op, "Multinomial")) want = DVM_DTYPES_INT, names = "i32 or i64";
  if (!n->nout || !n->out[0]) return lw_unsupported(n, "needs its output");
  const dvmc_attr *shape = dvmc_attr_find(n, "shape");
  if (r->nin == 0 && (!shape || shape->type != DVMC_ATTR_INTS))
    return lw_invalid(n, "attribute \"shape\" (a list of ints) is required");
  dvm_dtype dt;
  bool known;
  dvm_status *st = dvmc_op_out_dtype(n, 0, &dt, &known);
  if (st) return st;
  if (known && !(want & DVM_DTYPE_BIT(dt)))
    return lw_unsupported(n, "output dtype %s is not supported (want %s)", dvm_dtype_name(dt), names);
  return lw_lower_kernel(L, n, r);
}

/* The one element of t: *f for the float dtypes (f16 and bf16 widened
 * exactly), *i for the integer ones and bool; false for a u64 above
 * INT64_MAX (the kernel's attribute is an int64) or another dtype. */
static bool scalar_value(const dvmc_tensor *t, double *f, int64_t *i, bool *is_float) {
  const void *p = t->data;
  *is_float = true;
  switch (t->dtype) {
  case DVM_F32: *f = *(const float *)p; return true;
  case DVM_F64: *f = *(const double *)p; return true;
  case DVM_F16: *f = dvm_f16_to_f32(*(const uint16_t *)p); return true;
  case DVM_BF16: *f = dvm_bf16_to_f32(*(const uint16_t *)p); return true;
  default: break;
  }
  *is_float = false;
  switch (t->dtype) {
  case DVM_I8: *i = *(const int8_t *)p; return true;
  case DVM_I16: *i = *(const int16_t *)p; return true;
  case DVM_I32: *i = *(const int32_t *)p; return true;
  case DVM_I64: *i = *(const int64_t *)p; return true;
  case DVM_U8: case DVM_BOOL: *i = *(const uint8_t *)p; return true;
  case DVM_U16: *i = *(const uint16_t *)p; return true;
  case DVM_U32: *i = *(const uint32_t *)p; return true;
  case DVM_U64: {
    uint64_t u = *(const uint64_t *)p;
    *i = (int64_t)u;
    return u <= INT64_MAX;
  }
  default: return false;
  }
}

/* ConstantOfShape: the value attribute gives the dtype and the fill (any
 * number dtype or bool; f32 0 when absent). */
dvm_status *lw_lower_constant_of_shape(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (!n->nin || !n->in[0] || n->nout != 1 || !n->out[0]) return lw_unsupported(n, "needs one input and one output");
  const dvmc_attr *a = dvmc_attr_find(n, "value");
  dvm_dtype dt = DVM_F32;
  double f = 0;
  int64_t iv = 0;
  bool is_float = true;
  if (a) {
    if (a->type != DVMC_ATTR_TENSOR || !a->t || a->t->nbytes != dvm_dtype_size(a->t->dtype))
      return lw_unsupported(n, "attribute \"value\" must be a one-element tensor");
    dt = a->t->dtype;
    if (!scalar_value(a->t, &f, &iv, &is_float))
      return lw_unsupported(n, "attribute \"value\" of dtype %s%s is not supported", dvm_dtype_name(dt),
                            dt == DVM_U64 ? " above 2^63 - 1" : "");
  }
  int shape;
  dvm_status *st = lw_reg_of(L, n->in[0], &shape);
  if (st) return st;
  int val = is_float ? lw_emit_float(L, f) : lw_emit_int(L, iv);
  int sf = dvmc_emit_shapefn(L->e, "constant_of_shape"), s = dvmc_fn_reg(L->f), out = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(s), DVM_LIST(shape, val));
  dvmc_fn_ALLOC(L->f, out, dt, s, DVM_DEVICE_CPU);
  int k = dvmc_emit_kernel(L->e, "constant_of_shape", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(out), DVM_LIST(shape), DVM_LIST(val));
  dvmc_fn_RELEASE(L->f, s);
  dvmc_fn_RELEASE(L->f, val);
  lw_set_type(n->out[0], dt);
  (void)r;
  return lw_bind(L, n->out[0], out) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

/* Min, Max (and Sum, Mean's relatives): n-ary, folded pairwise left to
 * right through the binary kernel; one input is a copy. */
dvm_status *lw_lower_nary(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin < 1 || n->nout != 1 || !n->out[0]) return lw_unsupported(n, "needs inputs and one output");
  if (n->nin == 1) return lw_lower_alias(L, n, r);
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
    dvm_status *st = lw_lower_kernel(L, &pair, r);
    if (st) return st;
    if (i > 1) { /* the previous partial result is dead */
      int reg = lw_lookup(L, acc);
      if (reg >= 0) dvmc_fn_RELEASE(L->f, reg);
    }
    acc = tmp;
  }
  return NULL;
}

/* BitCast: the bytes as the dtype of `to`, which must have the input's
 * size; no byte becomes a bool (dvm's bools are 0 or 1). */
dvm_status *lw_lower_bitcast(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin != 1 || !n->in[0] || n->nout != 1 || !n->out[0]) return lw_unsupported(n, "needs one input and one output");
  dvm_dtype from = n->in[0]->typed ? n->in[0]->dtype : DVM_DTYPE_COUNT, to;
  int64_t onnx_to = dvmc_attr_int(n, "to", 0);
  if (!dvmc_onnx_dtype(onnx_to, &to))
    return lw_unsupported(n, "target type %lld is not supported", (long long)onnx_to);
  if (from == DVM_DTYPE_COUNT) return lw_unsupported(n, "the input's dtype is unknown");
  if (dvm_dtype_size(from) != dvm_dtype_size(to))
    return lw_invalid(n, "%s and %s differ in width", dvm_dtype_name(from), dvm_dtype_name(to));
  if (to == DVM_BOOL && from != DVM_BOOL)
    return lw_unsupported(n, "a bitcast of %s to bool is not supported (dvm's bools are 0 or 1)",
                          dvm_dtype_name(from));
  return lw_lower_kernel(L, n, r);
}

dvm_status *lw_cast_value(lowering *L, const dvmc_node *n, dvmc_value *v, dvm_dtype dt, dvmc_value **out) {
  static const op_rule cast = {"Cast", "cast", NULL, NULL, 1, NULL};
  dvmc_value *c = dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  if (!c) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  lw_set_type(c, dt);
  dvmc_node node = *n;
  node.nin = 1;
  node.in = &v;
  node.nout = 1;
  node.out = &c;
  *out = c;
  return lw_lower_kernel(L, &node, &cast);
}

/* n's lowering r->lower run on f32: each f16 input cast to f32, each f16
 * output made in f32 and cast back, the f32 copies released after. This is
 * how ONNX Runtime's CPU provider runs an f16 node its kernel computes in
 * f32 only (it inserts the same casts), so results round as its do. An
 * output inference left untyped is input 0's f16. */
dvm_status *lw_via_f32(lowering *L, const dvmc_node *n, const op_rule *r) {
  dvmc_value **ins = dvm_arena_alloc(&L->c->arena, (size_t)n->nin + 1, sizeof *ins);
  dvmc_value **outs = dvm_arena_alloc(&L->c->arena, (size_t)n->nout + 1, sizeof *outs), *back;
  if (!ins || !outs) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st;
  for (int i = 0; i < n->nin; i++) {
    ins[i] = n->in[i];
    if (ins[i] && ins[i]->typed && ins[i]->dtype == DVM_F16 && (st = lw_cast_value(L, n, n->in[i], DVM_F32, &ins[i])))
      return st;
  }
  for (int j = 0; j < n->nout; j++) {
    const dvmc_value *o = n->out[j];
    if (!(outs[j] = n->out[j]) || (o->typed && o->dtype != DVM_F16)) continue; /* untyped: as input 0 */
    if (!(outs[j] = dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL))) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    lw_set_type(outs[j], DVM_F32);
    outs[j]->rank = o->rank;
    for (int k = 0; k < o->rank; k++) outs[j]->dims[k] = o->dims[k];
  }
  dvmc_node m = *n;
  m.in = ins;
  m.out = outs;
  if ((st = r->lower(L, &m, r))) return st;
  for (int j = 0; j < n->nout; j++) {
    if (outs[j] == n->out[j]) continue;
    if ((st = lw_cast_value(L, n, outs[j], DVM_F16, &back))) return st;
    if (!lw_bind(L, n->out[j], lw_lookup(L, back))) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    lw_set_type(n->out[j], DVM_F16);
    dvmc_fn_RELEASE(L->f, lw_lookup(L, outs[j]));
  }
  for (int i = 0; i < n->nin; i++)
    if (ins[i] != n->in[i]) dvmc_fn_RELEASE(L->f, lw_lookup(L, ins[i]));
  return NULL;
}

/* Mean: the inputs summed as Sum does (a chain of the rule's kernel, add),
 * then divided by their count, a scalar constant; f16 and bf16 in f32,
 * rounded once at the end (as ONNX Runtime does). */
dvm_status *lw_lower_mean(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const op_rule div = {"Div", "div", NULL, NULL, -1, NULL, 7};
  static const op_rule cast = {"Cast", "cast", NULL, NULL, 1, NULL, 7};
  if (n->nin < 1 || n->nout != 1 || !n->out[0]) return lw_unsupported(n, "needs inputs and one output");
  const dvmc_value *x = n->in[0];
  dvm_dtype dt = x && x->typed ? x->dtype : DVM_DTYPE_COUNT;
  if (dt != DVM_F32 && dt != DVM_F64 && dt != DVM_F16 && dt != DVM_BF16)
    return lw_unsupported(n, "dtype %s is not supported (f32, f64, f16, bf16)", dvm_dtype_name(dt));
  if (n->nin == 1) return lw_lower_alias(L, n, r);
  dvm_dtype work = dt == DVM_F64 ? DVM_F64 : DVM_F32;
  dvmc_value **ins = dvm_arena_alloc(&L->c->arena, (size_t)n->nin, sizeof *ins);
  dvmc_value *sum = dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL), *count = dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  dvmc_value *mean = work == dt ? n->out[0] : dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  dvmc_tensor *t = dvm_arena_alloc(&L->c->arena, 1, sizeof *t);
  void *data = dvm_arena_alloc(&L->c->arena, 1, 8);
  if (!ins || !sum || !count || !mean || !t || !data) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st;
  for (int i = 0; i < n->nin; i++) {
    ins[i] = n->in[i];
    if (work != dt && (st = lw_cast_value(L, n, n->in[i], work, &ins[i]))) return st;
  }
  lw_set_type(sum, work);
  lw_set_type(mean, work);
  dvmc_node step = *n;
  step.in = ins;
  step.out = &sum;
  if ((st = lw_lower_nary(L, &step, r))) return st;
  float f = (float)n->nin; /* exact: n->nin < 2^24 */
  if (work == DVM_F32) memcpy(data, &f, 4);
  else *(double *)data = n->nin;
  *t = (dvmc_tensor){.dtype = work, .rank = 0, .data = data, .nbytes = dvm_dtype_size(work)};
  char name[48]; /* constants of one name are one: the name says the value */
  snprintf(name, sizeof name, "dvm.mean_count.%s.%d", dvm_dtype_name(work), n->nin);
  if (!(count->name = dvm_arena_strdup(&L->c->arena, name))) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  count->constant = t;
  lw_set_type(count, work);
  count->rank = 0;
  dvmc_value *pair[2] = {sum, count};
  step.nin = 2;
  step.in = pair;
  step.out = &mean;
  if ((st = lw_lower_kernel(L, &step, &div))) return st;
  int reg = lw_lookup(L, sum);
  if (reg >= 0) dvmc_fn_RELEASE(L->f, reg);
  if (mean == n->out[0]) return NULL;
  step.nin = 1;
  step.in = &mean;
  step.out = n->out;
  if ((st = lw_lower_kernel(L, &step, &cast))) return st;
  if ((reg = lw_lookup(L, mean)) >= 0) dvmc_fn_RELEASE(L->f, reg);
  return NULL;
}

/* Pow with an exponent of another dtype (ONNX allows it): both computed in
 * the float dtype among them, the result cast back to the base's. */
dvm_status *lw_lower_pow(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin != 2 || !n->in[0] || !n->in[1] || !n->in[0]->typed || !n->in[1]->typed || n->in[0]->dtype == n->in[1]->dtype)
    return lw_lower_kernel(L, n, r);
  dvm_dtype a = n->in[0]->dtype, b = n->in[1]->dtype;
  int af = a == DVM_F32 || a == DVM_F64 || a == DVM_F16 || a == DVM_BF16;
  dvm_dtype work = af ? a : b;
  dvmc_value *x = n->in[0], *y = n->in[1], *out = n->out[0], *tmp;
  dvm_status *st = NULL;
  if (x->dtype != work && (st = lw_cast_value(L, n, x, work, &x))) return st;
  if (y->dtype != work && (st = lw_cast_value(L, n, y, work, &y))) return st;
  tmp = work == a ? out : dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  if (!tmp) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  lw_set_type(tmp, work);
  dvmc_value *ins[2] = {x, y};
  dvmc_node pair = *n;
  pair.in = ins;
  pair.out = &tmp;
  pair.nout = 1;
  if ((st = lw_lower_kernel(L, &pair, r))) return st;
  if (tmp != out) {
    dvmc_value *back;
    if ((st = lw_cast_value(L, n, tmp, a, &back))) return st;
    int reg = lw_lookup(L, back);
    if (!lw_bind(L, out, reg)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    lw_set_type(out, a);
  }
  return NULL;
}

/* Conv and the pools with auto_pad SAME_UPPER, SAME_LOWER or VALID: their
 * pads depend on the input's spatial dims, so the auto_pads shape function
 * computes them where the node runs. */
/* An f16 or bf16 Conv: the f32 kernel on f32 copies of X, W and B, its
 * output cast back (the copies released after). */
static dvm_status *conv_via_f32(lowering *L, const dvmc_node *n, const op_rule *r) {
  dvmc_value *ins[3] = {0}, *y, *back;
  dvm_status *st;
  dvm_dtype dt = n->in[0]->dtype;
  if (n->nin > 3 || n->nout != 1 || !n->out[0]) return lw_unsupported(n, "Conv takes X, W[, B] and makes Y");
  for (int i = 0; i < n->nin; i++)
    if (n->in[i] && (st = lw_cast_value(L, n, n->in[i], DVM_F32, &ins[i]))) return st;
  if (!(y = dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL))) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  lw_set_type(y, DVM_F32);
  dvmc_node m = *n;
  m.in = ins;
  m.out = &y;
  if ((st = lw_lower_window(L, &m, r)) || (st = lw_cast_value(L, n, y, dt, &back))) return st;
  if (!lw_bind(L, n->out[0], lw_lookup(L, back))) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  lw_set_type(n->out[0], dt);
  for (int i = 0; i < n->nin + 1; i++) {
    int reg = i < n->nin ? (ins[i] ? lw_lookup(L, ins[i]) : -1) : lw_lookup(L, y);
    if (reg >= 0) dvmc_fn_RELEASE(L->f, reg);
  }
  return NULL;
}

/* ConvTranspose with output_shape or auto_pad SAME_*: pads and
 * output_padding computed where the node runs from X's dims (shape
 * function "transpose_pads"), then the kernel call with them. */
static dvm_status *lower_transpose_pads(lowering *L, const dvmc_node *n, const op_rule *r, int mode) {
  if (dvmc_attr_find(n, "pads")) return lw_unsupported(n, "pads with output_shape or auto_pad is not supported");
  if (n->nin < 2 || !n->in[0] || !n->in[1]) return lw_unsupported(n, "needs X and W");
  dvm_status *st = NULL;
  call c = {0};
  if ((st = lw_call_inputs(L, n, r, &c))) return st;
  int s = lw_lower_attr(L, n, "strides:s", 9, &st), d = lw_lower_attr(L, n, "dilations:s", 11, &st);
  int g = lw_lower_attr(L, n, "group:i=1", 9, &st), op = lw_lower_attr(L, n, "output_padding:s", 16, &st);
  int os = lw_lower_attr(L, n, "output_shape:s", 14, &st);
  if (s < 0 || d < 0 || g < 0 || op < 0 || os < 0) return st;
  int mr = lw_emit_int(L, mode), pads = dvmc_fn_reg(L->f), outpad = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "transpose_pads"), DVM_LIST(pads, outpad), DVM_LIST(c.ins[0], c.ins[1], s, d, op, os, mr));
  dvmc_fn_RELEASE(L->f, op);
  dvmc_fn_RELEASE(L->f, os);
  dvmc_fn_RELEASE(L->f, mr);
  int attrs[] = {s, pads, d, g, outpad};
  for (int i = 0; i < 5; i++) c.attrs[c.nattrs++] = attrs[i];
  return lw_emit_call(L, n, r, &c);
}

dvm_status *lw_lower_window(lowering *L, const dvmc_node *n, const op_rule *r) {
  int conv = !strcmp(n->op, "Conv") || !strcmp(n->op, "FusedConv");
  int64_t layout = dvmc_attr_int(n, "dvm_layout", 0);
  if (!strcmp(n->op, "FusedConv") && (layout < 0 || layout > 7))
    return lw_invalid(n, "attribute dvm_layout = %lld must be 0 to 7 (bit 0: X channels last, bit 1: Y, bit 2: Z)",
                      (long long)layout);
  int64_t algo = dvmc_attr_int(n, "dvm_algo", 0);
  if (!strcmp(n->op, "FusedConv") && (algo < 0 || algo > 1))
    return lw_invalid(n, "attribute dvm_algo = %lld must be 0 or 1 (1: Winograd where oneDNN has it)", (long long)algo);
  if (conv && n->nin && n->in[0] && n->in[0]->typed &&
      (n->in[0]->dtype == DVM_F16 || n->in[0]->dtype == DVM_BF16))
    return conv_via_f32(L, n, r);
  const char *mode = dvmc_attr_string(n, "auto_pad", "NOTSET");
  static const char *const modes[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int m = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(mode, modes[i])) m = i;
  if (m < 0) return lw_unsupported(n, "auto_pad \"%s\" is not supported", mode);
  if (!strcmp(n->op, "ConvTranspose")) {
    if (dvmc_attr_find(n, "output_shape") || m == DVM_AUTO_PAD_SAME_UPPER || m == DVM_AUTO_PAD_SAME_LOWER)
      return lower_transpose_pads(L, n, r, m);
    if (m == DVM_AUTO_PAD_VALID && dvmc_attr_find(n, "pads")) return lw_unsupported(n, "both auto_pad and pads are given");
    return lw_lower_kernel(L, n, r); /* NOTSET, or VALID: no pads */
  }
  if (m == 0) return lw_lower_kernel(L, n, r);
  if (dvmc_attr_find(n, "pads")) return lw_unsupported(n, "both auto_pad and pads are given");
  /* the pads computed, then the rule's attributes with pads replaced */
  dvm_status *st = NULL;
  int x, k;
  if (!n->nin || !n->in[0]) return lw_unsupported(n, "needs its input X");
  if ((st = lw_reg_of(L, n->in[0], &x))) return st;
  if (conv) {
    if (n->nin < 2 || !n->in[1]) return lw_unsupported(n, "Conv needs W");
    if ((st = lw_reg_of(L, n->in[1], &k))) return st;
  } else if ((k = lw_lower_attr(L, n, "kernel_shape:s", 14, &st)) < 0) {
    return st;
  }
  int s = lw_lower_attr(L, n, "strides:s", 9, &st), d = lw_lower_attr(L, n, "dilations:s", 11, &st);
  if (s < 0 || d < 0) return st;
  int mr = lw_emit_int(L, m), pads = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "auto_pads"), DVM_LIST(pads), DVM_LIST(x, k, s, d, mr));
  call c = {0};
  if (!(st = lw_call_inputs(L, n, r, &c)) && !(st = lw_call_attrs(L, n, r->attrs, pads, &c))) st = lw_emit_call(L, n, r, &c);
  dvmc_fn_RELEASE(L->f, mr);
  if (!conv) dvmc_fn_RELEASE(L->f, k);
  dvmc_fn_RELEASE(L->f, s);
  dvmc_fn_RELEASE(L->f, d);
  return st;
}

/* Pad with an omitted constant_value before present axes (opset 18): the
 * default value, a zero of data's dtype, is made a constant for it. */
dvm_status *lw_lower_pad(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin < 4 || n->in[2] || !n->in[3]) return lw_lower_kernel(L, n, r);
  const dvmc_value *x = n->in[0];
  if (!x || !x->typed) return lw_unsupported(n, "needs its data's dtype for the default constant_value");
  static const uint64_t zero = 0;
  dvmc_tensor t = {.dtype = x->dtype, .rank = 0, .data = &zero, .nbytes = dvm_dtype_size(x->dtype)};
  char name[64];
  snprintf(name, sizeof name, "dvm.pad.zero.%s", dvm_dtype_name(x->dtype));
  int k = dvmc_emit_const(L->e, name, &t), zr = dvmc_fn_reg(L->f);
  if (k < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvmc_fn_CONST(L->f, zr, k);
  call c = {.kernel = r->kernel, .nin = 4};
  dvm_status *st = NULL;
  for (int i = 0; i < 4 && !st; i++) {
    int reg = zr;
    if (i != 2) st = lw_reg_of(L, n->in[i], &reg);
    c.ins[i] = reg;
  }
  if (!st) st = lw_call_attrs(L, n, r->attrs, -1, &c);
  if (!st) st = lw_emit_call(L, n, r, &c);
  dvmc_fn_RELEASE(L->f, zr);
  return st;
}

/* A kernel call on some of the node's inputs (those present among `pick`,
 * in order) with the attribute spec `attrs`: for ops whose optional
 * inputs are attributes of the kernel, or may be omitted in between. */
static dvm_status *lower_picked(lowering *L, const dvmc_node *n, const op_rule *r, const int *pick, int npick,
                                const char *attrs) {
  call c = {.kernel = r->kernel};
  dvm_status *st = NULL;
  for (int i = 0; i < npick && !st; i++)
    if (pick[i] < n->nin && n->in[pick[i]]) {
      int reg;
      if (!(st = lw_reg_of(L, n->in[pick[i]], &reg))) c.ins[c.nin++] = reg;
    }
  if (!st) st = lw_call_attrs(L, n, attrs, -1, &c);
  return st ? st : lw_emit_call(L, n, r, &c);
}

/* DFT: the axis is an attribute (default 1) before opset 20, input 2
 * (default -2) from it; dft_length (input 1) may be omitted before it. */
dvm_status *lw_lower_dft(lowering *L, const dvmc_node *n, const op_rule *r) {
  return lower_picked(L, n, r, (const int[]){0}, 1,
                      n->opset < 20 ? "@1:i=0 axis:i=1 inverse:i=0 onesided:i=0" : "@1:i=0 @2:i=-2 inverse:i=0 onesided:i=0");
}

/* STFT: signal and window go to the kernel, frame_step and frame_length
 * (input 3, after an omitted window maybe) as attributes. */
dvm_status *lw_lower_stft(lowering *L, const dvmc_node *n, const op_rule *r) {
  return lower_picked(L, n, r, (const int[]){0, 2}, 2, r->attrs);
}

/* BatchNormalization: training_mode 1 normalizes by the batch's statistics
 * and gives the running mean and variance (kernel batchnorm_train). */
dvm_status *lw_lower_batchnorm(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (!dvmc_attr_int(n, "training_mode", 0)) return lw_lower_kernel(L, n, r);
  if (n->nout != 3 || !n->out[1] || !n->out[2])
    return lw_unsupported(n, "training_mode 1 with %d outputs: dvm gives Y, running_mean and running_var together", n->nout);
  op_rule t = *r;
  t.kernel = "batchnorm_train";
  t.attrs = "epsilon:f=1e-5 momentum:f=0.9";
  return lw_lower_kernel(L, n, &t);
}

/* Einsum: the equation is the kernel's payload (one kernel entry per
 * equation, "einsum@N"), and the output shape's sources, which shape
 * function "einsum" reads, are worked out here (shapefuncs/matmul.h). */
dvm_status *lw_lower_einsum(lowering *L, const dvmc_node *n, const op_rule *r) {
  const char *eq = dvmc_attr_string(n, "equation", NULL);
  if (!eq) return lw_unsupported(n, "Einsum needs an equation");
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
      if (nterms == 17 || cl >= sizeof cur) return lw_unsupported(n, "equation \"%s\" is too long", eq);
      cur[cl] = 0;
      strcpy(terms[nterms++], cur);
      cl = 0;
    } else if (cl + 1 < sizeof cur) {
      cur[cl++] = c;
    }
  }
  if (nterms != n->nin) return lw_unsupported(n, "equation \"%s\" has %d inputs, the node %d", eq, nterms, n->nin);
  /* each input's labels with "..." expanded to its ellipsis dims ('.' + k) */
  int lab[16][DVM_MAX_RANK], nl[16], ell_start[16], ell_len[16], emax = 0;
  for (int i = 0; i < nterms; i++) {
    const char *t = terms[i];
    const char *dots = strstr(t, "...");
    int letters = (int)strlen(t) - (dots ? 3 : 0);
    int rank = n->in[i] ? n->in[i]->rank : -1;
    if (dots && rank < 0) return lw_unsupported(n, "\"...\" needs input %d's rank, which is not known here", i);
    ell_len[i] = dots ? rank - letters : 0;
    if (ell_len[i] < 0 || (!dots && rank >= 0 && rank != letters) || letters + ell_len[i] > DVM_MAX_RANK)
      return lw_unsupported(n, "equation \"%s\" does not match input %d", eq, i);
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
        return lw_unsupported(n, "output of more than %d dims", DVM_MAX_RANK);
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
    if (!shift) return lw_unsupported(n, "output label %c of \"%s\" is in no input", out[o] > 0 ? out[o] : '.', eq);
    dims[o] = code;
  }
  char name[32];
  snprintf(name, sizeof name, "einsum@%d", L->einsums++);
  dvm_status *st = NULL;
  call c = {0};
  if ((st = lw_call_inputs(L, n, r, &c))) return st;
  c.kernel = name;
  c.payload = eq;
  c.payload_size = strlen(eq);
  c.attrs[c.nattrs++] = lw_emit_shape(L, no, dims);
  return lw_emit_call(L, n, r, &c);
}

/* TfIdfVectorizer over integer tokens: the pool's n-grams of lengths
 * min_gram_length..max_gram_length, each with its output column and
 * weight, as the kernel's payload (one kernel entry per node, "tfidf@N";
 * the format is at ops/cpu/text.c). n-grams are numbered as ONNX numbers
 * them (ngram_counts[i] starts the (i+1)-grams), n-gram k having column
 * ngram_indexes[k] and weight weights[k]; a pool that lists an n-gram
 * twice is refused, as ONNX Runtime refuses it. */
dvm_status *lw_lower_tfidf(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *counts = dvmc_attr_find(n, "ngram_counts"), *idx = dvmc_attr_find(n, "ngram_indexes");
  const dvmc_attr *pool = dvmc_attr_find(n, "pool_int64s"), *wa = dvmc_attr_find(n, "weights");
  if (dvmc_attr_find(n, "pool_strings"))
    return lw_unsupported(n, "a pool of strings (pool_strings) is not supported: dvm has no string tensors");
  if (!counts || !idx || !pool || counts->type != DVMC_ATTR_INTS || idx->type != DVMC_ATTR_INTS ||
      pool->type != DVMC_ATTR_INTS || (wa && wa->type != DVMC_ATTR_FLOATS))
    return lw_invalid(n, "needs ngram_counts, ngram_indexes and pool_int64s (ints), and weights as floats");
  const char *mode_s = dvmc_attr_string(n, "mode", "");
  int64_t mode = !strcmp(mode_s, "TF") ? 0 : !strcmp(mode_s, "IDF") ? 1 : !strcmp(mode_s, "TFIDF") ? 2 : -1;
  int64_t lo = dvmc_attr_int(n, "min_gram_length", 0), hi = dvmc_attr_int(n, "max_gram_length", 0);
  int64_t skip = dvmc_attr_int(n, "max_skip_count", -1), size = 0;
  if (mode < 0) return lw_invalid(n, "mode \"%s\" is not TF, IDF or TFIDF", mode_s);
  if (lo < 1 || hi < lo || hi > 64 || skip < 0)
    return lw_unsupported(n, "min_gram_length %lld, max_gram_length %lld, max_skip_count %lld: want "
                             "1 <= min <= max <= 64, skip >= 0", (long long)lo, (long long)hi, (long long)skip);
  for (int i = 0; i < idx->n; i++) {
    if (idx->ints[i] < 0) return lw_invalid(n, "ngram_indexes[%d] is negative", i);
    if (idx->ints[i] >= size) size = idx->ints[i] + 1;
  }
  if (!size) return lw_invalid(n, "ngram_indexes is empty");
  if (wa && wa->n && wa->n != idx->n)
    return lw_invalid(n, "%d weights for %d n-grams (ngram_indexes)", wa->n, idx->n);
  /* words: G, then records (n, column, weight bits, tokens) */
  size_t cap = 1 + (size_t)pool->n * 4;
  int64_t *words = dvm_arena_alloc(&L->c->arena, cap, sizeof *words);
  if (!words) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  size_t nw = 1;
  int64_t g = 0, id = 0;
  for (int i = 0, len = 1; i < counts->n; i++, len++) {
    int64_t start = counts->ints[i], end = i + 1 < counts->n ? counts->ints[i + 1] : pool->n;
    if (start < 0 || end > pool->n || end < start)
      return lw_invalid(n, "ngram_counts[%d] = %lld does not fit the pool of %d", i, (long long)start, pool->n);
    for (int64_t k = 0; k < (end - start) / len; k++, id++) {
      const int64_t *tok = pool->ints + start + k * len;
      if (len < lo || len > hi) continue;
      if (id >= idx->n) return lw_invalid(n, "n-gram %lld has no entry in ngram_indexes", (long long)id);
      for (size_t p = 1; p < nw; p += 3 + (size_t)words[p]) /* ONNX Runtime refuses a repeat too */
        if (words[p] == len && !memcmp(words + p + 3, tok, sizeof *tok * (size_t)len))
          return lw_invalid(n, "n-gram %lld of the pool repeats an earlier one", (long long)id);
      double w = wa && wa->n ? wa->floats[id] : 1.0;
      words[nw++] = len;
      words[nw++] = idx->ints[id];
      memcpy(&words[nw++], &w, sizeof w);
      memcpy(words + nw, tok, sizeof *tok * (size_t)len);
      nw += (size_t)len;
      g++;
    }
  }
  words[0] = g;
  char name[32];
  snprintf(name, sizeof name, "tfidf@%d", L->tfidfs++);
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  if (st) return st;
  c.kernel = name;
  c.payload = words;
  c.payload_size = nw * sizeof *words;
  int64_t attrs[] = {mode, lo, hi, skip, size};
  for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) c.attrs[c.nattrs++] = lw_emit_int(L, attrs[i]);
  return lw_emit_call(L, n, r, &c);
}

/* The kernel attributes after sizes that every Resize call has: the three
 * modes, cubic_coeff_a, exclude_outside, antialias. */
static void resize_mode_attrs(lowering *L, const dvmc_node *n, const int64_t enums[3], call *c) {
  for (int t = 0; t < 3; t++) c->attrs[c->nattrs++] = lw_emit_int(L, enums[t]);
  c->attrs[c->nattrs++] = lw_emit_float(L, dvmc_attr_float(n, "cubic_coeff_a", -0.75));
  c->attrs[c->nattrs++] = lw_emit_int(L, dvmc_attr_int(n, "exclude_outside", 0));
  c->attrs[c->nattrs++] = lw_emit_int(L, dvmc_attr_int(n, "antialias", 0));
}

/* The node's `axes` as a shape register (empty: every dim). */
static int resize_axes_reg(lowering *L, const dvmc_node *n) {
  const dvmc_attr *axes = dvmc_attr_find(n, "axes");
  return lw_emit_shape(L, axes ? (int)axes->n : 0, axes ? axes->ints : NULL);
}

/* Resize whose sizes and coordinate scales the run decides: `axes` over
 * scales or sizes the model computes, keep_aspect_ratio_policy (it needs
 * X's dims), tf_crop_and_resize (its roi, constant or computed, expanded
 * over `axes`). Shape functions "resize_params" and "resize_roi" make the
 * kernel's attributes where the node runs. */
static dvm_status *lower_resize_params(lowering *L, const dvmc_node *n, const op_rule *r, const int64_t enums[3],
                                       const dvmc_value *vals, int by_sizes, int policy, const dvmc_value *roi) {
  const dvmc_value *x = n->in[0];
  int rank = x->rank;
  dvm_status *st;
  int xr, vr, rr = -1;
  if ((st = lw_reg_of(L, x, &xr)) || (st = lw_reg_of(L, vals, &vr)) || (roi && (st = lw_reg_of(L, roi, &rr)))) return st;
  call c = {0};
  c.kernel = r->kernel;
  c.ins[c.nin++] = xr;
  int sizes_reg = dvmc_fn_reg(L->f), scales[DVM_MAX_RANK];
  int ax = resize_axes_reg(L, n), by = lw_emit_int(L, by_sizes), pol = lw_emit_int(L, policy);
  int64_t dsts[2 * DVM_MAX_RANK] = {sizes_reg};
  int sf = dvmc_emit_shapefn(L->e, "resize_params");
  for (int d = 0; d < rank; d++) dsts[1 + d] = scales[d] = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, sf, (dvm_list){1 + rank, dsts}, DVM_LIST(xr, vr, ax, by, pol));
  dvmc_fn_RELEASE(L->f, by);
  dvmc_fn_RELEASE(L->f, pol);
  c.attrs[c.nattrs++] = sizes_reg;
  resize_mode_attrs(L, n, enums, &c);
  for (int d = 0; d < rank; d++) c.attrs[c.nattrs++] = scales[d];
  if (roi) {
    int rk = lw_emit_int(L, rank);
    sf = dvmc_emit_shapefn(L->e, "resize_roi");
    for (int d = 0; d < 2 * rank; d++) dsts[d] = c.attrs[c.nattrs++] = dvmc_fn_reg(L->f);
    dvmc_fn_SHAPEFN(L->f, sf, (dvm_list){2 * rank, dsts}, DVM_LIST(rr, ax, rk));
    dvmc_fn_RELEASE(L->f, rk);
    c.attrs[c.nattrs++] = lw_emit_float(L, dvmc_attr_float(n, "extrapolation_value", 0));
  }
  dvmc_fn_RELEASE(L->f, ax);
  return lw_emit_call(L, n, r, &c);
}

/* Resize (and Upsample, as Resize with asymmetric coordinates and floor
 * rounding): the output sizes as the kernel's first attribute (from the
 * sizes input, or computed where the node runs from the scales input), then
 * the modes, then the model's scales when it gave them (the kernel maps
 * coordinates with those). Constant `axes` values expand to every dim; the
 * cases the run decides go to lower_resize_params. */
dvm_status *lw_lower_resize(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
  static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                                       "tf_half_pixel_for_nearest", "half_pixel_symmetric", "tf_crop_and_resize", NULL};
  static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
  static const char *const policies[] = {"stretch", "not_larger", "not_smaller", NULL};
  const char *const *tables[4] = {modes, coords, nearests, policies};
  const char *names[4] = {"mode", "coordinate_transformation_mode", "nearest_mode", "keep_aspect_ratio_policy"};
  int upsample = !strcmp(n->op, "Upsample");
  const char *dflt[4] = {"nearest", upsample ? "asymmetric" : "half_pixel", upsample ? "floor" : "round_prefer_floor",
                         "stretch"};
  int64_t enums[4];
  for (int t = 0; t < 4; t++) {
    if (upsample && (t == 1 || t == 2) && dvmc_attr_find(n, names[t]))
      return lw_unsupported(n, "attribute \"%s\" is not supported", names[t]);
    const char *v = dvmc_attr_string(n, names[t], dflt[t]);
    if (upsample && t == 0 && !strcmp(v, "bilinear")) v = "linear"; /* Upsample-7's name */
    enums[t] = -1;
    for (int i = 0; tables[t][i]; i++)
      if (!strcmp(v, tables[t][i])) enums[t] = i;
    if (enums[t] < 0 || (upsample && t == 0 && enums[t] == 2))
      return lw_unsupported(n, "%s \"%s\" is not supported", names[t], v);
  }
  const dvmc_value *x = n->nin > 0 ? n->in[0] : NULL;
  int opset10 = upsample || n->opset < 11;
  const dvmc_value *scales = opset10 ? (n->nin > 1 ? n->in[1] : NULL) : (n->nin > 2 ? n->in[2] : NULL);
  const dvmc_value *sizes = opset10 ? NULL : (n->nin > 3 ? n->in[3] : NULL);
  const dvmc_value *roi = opset10 ? NULL : (n->nin > 1 ? n->in[1] : NULL);
  const dvmc_attr *sattr = upsample && !scales ? dvmc_attr_find(n, "scales") : NULL; /* Upsample-7 */
  if (scales && scales->constant && scales->constant->nbytes == 0) scales = NULL; /* "" given as empty */
  if (roi && roi->constant && roi->constant->nbytes == 0) roi = NULL;
  if (!x || (!scales == !sizes && !sattr)) return lw_unsupported(n, "exactly one of scales and sizes is needed");
  const dvmc_tensor *given = scales ? scales->constant : sizes ? sizes->constant : NULL;
  const dvmc_attr *axes = dvmc_attr_find(n, "axes");
  int rank = x->rank, crop = enums[1] == 6;
  if (crop && !roi) return lw_unsupported(n, "tf_crop_and_resize needs roi");
  if (crop && x->typed && x->dtype != DVM_F32)
    return lw_unsupported(n, "tf_crop_and_resize of %s is not supported (f32 only)", dvm_dtype_name(x->dtype));
  if (crop || (enums[3] && sizes) || (!given && !sattr && axes)) {
    if (rank < 0) return lw_unsupported(n, "%s needs the input's rank", crop ? "tf_crop_and_resize" : axes ? "axes" : "keep_aspect_ratio_policy");
    return lower_resize_params(L, n, r, enums, scales ? scales : sizes, !scales, sizes ? (int)enums[3] : 0, crop ? roi : NULL);
  }
  if (!given && !sattr && rank < 0)
    return lw_unsupported(n, "%s computed at run time needs the input's rank", scales ? "scales" : "sizes");
  int64_t nvals = sattr ? sattr->n : given ? (given->rank ? given->dims[0] : 1) : rank;
  if (rank < 0) rank = (int)nvals;
  if (rank > DVM_MAX_RANK || (axes ? axes->n != nvals : nvals != rank))
    return lw_unsupported(n, "%lld %s for an input of rank %d", (long long)nvals, sizes ? "sizes" : "scales", rank);
  /* per dim: a scale (1 where axes leave a dim), or a size (-1: keep) */
  double sc[DVM_MAX_RANK];
  int64_t sz[DVM_MAX_RANK];
  for (int d = 0; d < rank; d++) sc[d] = 1, sz[d] = -1;
  for (int64_t i = 0; (given || sattr) && i < nvals; i++) {
    int64_t d = axes ? axes->ints[i] : i;
    if (d < 0) d += rank;
    if (d < 0 || d >= rank) return lw_unsupported(n, "axis %lld is out of range", (long long)(axes ? axes->ints[i] : i));
    if (sattr) {
      sc[d] = sattr->floats[i];
    } else if (scales) {
      if (given->dtype != DVM_F32) return lw_unsupported(n, "scales must be f32");
      sc[d] = ((const float *)given->data)[i];
    } else {
      if (given->dtype != DVM_I64) return lw_unsupported(n, "sizes must be i64");
      sz[d] = ((const int64_t *)given->data)[i];
    }
  }
  int by_scales = scales || sattr;
  int known = given || sattr;
  dvm_status *st;
  call c = {0};
  int xr;
  if ((st = lw_reg_of(L, x, &xr))) return st;
  c.kernel = r->kernel;
  c.ins[c.nin++] = xr;
  int sizes_reg = dvmc_fn_reg(L->f);
  int64_t vals[DVM_MAX_RANK];
  if (!known) { /* the model computes them: read on the host */
    int t;
    if ((st = lw_reg_of(L, scales ? scales : sizes, &t))) return st;
    if (sizes) {
      dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "ints"), DVM_LIST(sizes_reg), DVM_LIST(t));
    } else {
      int sf = dvmc_emit_shapefn(L->e, "floats");
      for (int d = 0; d < rank; d++) vals[d] = dvmc_fn_reg(L->f);
      dvmc_fn_SHAPEFN(L->f, sf, (dvm_list){rank, vals}, DVM_LIST(t));
    }
  } else {
    for (int d = 0; d < rank; d++) vals[d] = by_scales ? lw_emit_float(L, sc[d]) : lw_emit_int(L, sz[d]);
  }
  if (by_scales || known) { /* the sizes attribute, from x's dims */
    int64_t args[2 + DVM_MAX_RANK];
    int by = lw_emit_int(L, by_scales ? 0 : 1);
    int sf = dvmc_emit_shapefn(L->e, "resize_sizes");
    args[0] = xr, args[1] = by;
    for (int d = 0; d < rank; d++) args[2 + d] = vals[d];
    dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(sizes_reg), (dvm_list){2 + rank, args});
    dvmc_fn_RELEASE(L->f, by);
  }
  c.attrs[c.nattrs++] = sizes_reg;
  resize_mode_attrs(L, n, enums, &c);
  if (by_scales)
    for (int d = 0; d < rank; d++) c.attrs[c.nattrs++] = vals[d];
  else if (known)
    for (int d = 0; d < rank; d++) dvmc_fn_RELEASE(L->f, vals[d]);
  return lw_emit_call(L, n, r, &c);
}


/* DeformConv: X, W, offset, then B and mask where present (either may be
 * omitted), and the kernel's last attribute says which came (bit 0 B, bit 1
 * mask). */
dvm_status *lw_lower_deform(lowering *L, const dvmc_node *n, const op_rule *r) {
  call c = {0};
  int present = 0;
  dvm_status *st;
  if (n->nin < 3 || n->nin > 5) return lw_unsupported(n, "%d inputs, want 3 to 5", n->nin);
  for (int i = 0; i < n->nin; i++) {
    int reg;
    if (!n->in[i]) {
      if (i < 3) return lw_unsupported(n, "needs X, W and offset");
      continue;
    }
    if (i >= 3) present |= 1 << (i - 3);
    if ((st = lw_reg_of(L, n->in[i], &reg))) return st;
    c.ins[c.nin++] = reg;
  }
  c.kernel = r->kernel;
  if ((st = lw_call_attrs(L, n, r->attrs, -1, &c))) return st;
  c.attrs[c.nattrs++] = lw_emit_int(L, present);
  return lw_emit_call(L, n, r, &c);
}

/* HardSigmoid, max(0, min(1, alpha x + beta)), and HardSwish, x times it
 * with alpha 1/6 and beta 1/2: one call of the fused kernel on a program
 * of those steps (f32), with the shapes of an elementwise call. */
dvm_status *lw_lower_hard(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (!n->nin || !lw_is_f32(n->in[0]))
    return lw_unsupported(n, "dtype %s is not supported (f32 only)",
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
  if (!(st = lw_call_inputs(L, n, r, &c))) {
    c.kernel = name;
    c.payload = payload;
    c.payload_size = size;
    st = lw_emit_call(L, n, r, &c);
  }
  free(payload);
  return st;
}

/* Softmax before opset 13 flattens to 2-D at the axis: the same as opset
 * 13's only when the axis is the last one. */
dvm_status *lw_lower_softmax(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->opset < 13) {
    int64_t axis = dvmc_attr_int(n, "axis", 1), rank = n->in[0]->rank;
    if (!(axis == -1 || (rank >= 0 && axis == rank - 1)))
      return lw_unsupported(n, "%s before opset 13 with axis %lld (2-D coercion) is not supported", n->op,
                         (long long)axis);
  }
  return lw_lower_kernel(L, n, r);
}

/* com.microsoft SkipLayerNormalization: outputs 0 (the normalized sum)
 * and 3 (the sum) are the kernel's 0 and 1; the mean and inverse standard
 * deviation (1, 2) are not computed. */
dvm_status *lw_lower_skip_layernorm(lowering *L, const dvmc_node *n, const op_rule *r) {
  for (int i = 1; i < 3 && i < n->nout; i++)
    if (n->out[i]) return lw_unsupported(n, "output %d (mean or inverse standard deviation) is not supported", i);
  if (n->nout > 4) return lw_unsupported(n, "%d outputs", n->nout);
  dvmc_value *outs[2] = {n->out[0], n->nout > 3 ? n->out[3] : NULL};
  dvmc_node m = *n;
  m.out = outs;
  m.nout = 2;
  call c = {0};
  dvm_status *st;
  if ((st = lw_call_inputs(L, &m, r, &c)) || (st = lw_call_attrs(L, &m, r->attrs, -1, &c))) return st;
  return lw_emit_call(L, &m, r, &c);
}

/* com.microsoft EmbedLayerNormalization. Segment ids (input 1) and the
 * segment table (input 4) may be left out together, as DistilBERT's
 * optimized form does: the kernel then gets an empty tensor for each and
 * adds no segment row. */
dvm_status *lw_lower_embed_layernorm(lowering *L, const dvmc_node *n, const op_rule *r) {
  int seg = n->nin > 1 && n->in[1], segtab = n->nin > 4 && n->in[4];
  if (seg != segtab) return lw_invalid(n, "segment_ids and segment_embedding must be given together");
  if (seg) return lw_lower_kernel(L, n, r);
  for (int i = 0; i < 7; i++)
    if (i != 1 && i != 4 && (i >= n->nin || !n->in[i])) return lw_unsupported(n, "input %d is needed", i);
  call c = {.kernel = r->kernel};
  dvm_status *st;
  int64_t zero = 0;
  int empty[2], shape = lw_emit_shape(L, 1, &zero);
  for (int k = 0; k < 2; k++) {
    empty[k] = dvmc_fn_reg(L->f);
    lw_emit_alloc(L, empty[k], k ? DVM_F32 : DVM_I32, shape, 1, (const dvmc_expr *[]){dvmc_const(L->c->exprs, 0)});
  }
  dvmc_fn_RELEASE(L->f, shape);
  for (int i = 0; i < n->nin && i < r->nin; i++) {
    int reg;
    if (i == 1 || i == 4) {
      c.ins[c.nin++] = empty[i == 4];
      continue;
    }
    if (!n->in[i]) break; /* trailing optional mask or position ids */
    if ((st = lw_reg_of(L, n->in[i], &reg))) return st;
    c.ins[c.nin++] = reg;
  }
  for (int i = c.nin; i < n->nin && i < r->nin; i++)
    if (n->in[i]) return lw_unsupported(n, "omitted optional input %d before a present one", c.nin);
  if ((st = lw_call_attrs(L, n, r->attrs, -1, &c)) || (st = lw_emit_call(L, n, r, &c))) return st;
  for (int k = 0; k < 2; k++) dvmc_fn_RELEASE(L->f, empty[k]);
  return NULL;
}

/* com.microsoft Attention and QAttention without their past state,
 * attention bias or past length (inputs from 4 and 8 on): refused by
 * name rather than dropped. */
dvm_status *lw_lower_contrib_attention(lowering *L, const dvmc_node *n, const op_rule *r) {
  for (int i = n->op[0] == 'Q' ? 8 : 4; i < n->nin; i++)
    if (n->in[i]) return lw_unsupported(n, "input %d (past state or attention bias) is not supported", i);
  return lw_lower_kernel(L, n, r);
}

/* ONNX Attention: one call of the sdpa kernel (ops/cpu/attention.c).
 * Omitted optional inputs are left out and named by the `present`
 * attribute (with the wanted outputs and whether scale was given); the
 * kernel always gets four outputs, an unwanted one an empty tensor. */
dvm_status *lw_lower_sdpa(lowering *L, const dvmc_node *n, const op_rule *r) {
  if (n->nin < 3 || n->nin > 7 || !n->in[0] || !n->in[1] || !n->in[2] || n->nout < 1 || n->nout > 4 || !n->out[0])
    return lw_unsupported(n, "Q, K, V and Y are needed, at most 7 inputs and 4 outputs");
  const dvmc_value *q = n->in[0];
  /* bf16 is refused rather than computed in f32: onnx's reference rounds
   * every step to bf16 and lands up to a bf16 ulp (0.4%) away */
  if (!q->typed || !(q->dtype == DVM_F32 || q->dtype == DVM_F16))
    return lw_unsupported(n, "dtype %s is not supported (kernel sdpa takes f32, f16)",
                          q->typed ? dvm_dtype_name(q->dtype) : "unknown");
  /* the softmax runs in f32 whatever softmax_precision asks: at least
   * f16's and bf16's precision, and the probabilities are rounded to Q's
   * dtype (at most f32) before the product with V in any case */
  int64_t sp = dvmc_attr_int(n, "softmax_precision", 1);
  if (sp != 1 && sp != 10 && sp != 11 && sp != 16) /* FLOAT, FLOAT16, DOUBLE, BFLOAT16 */
    return lw_unsupported(n, "softmax_precision %lld is not a float type dvm knows", (long long)sp);
  int has_past = n->nin > 4 && n->in[4], has_pv = n->nin > 5 && n->in[5];
  if (has_past != has_pv) return lw_invalid(n, "past_key and past_value must be given together");
  if (has_past && n->nin > 6 && n->in[6]) return lw_invalid(n, "nonpad_kv_seqlen cannot be combined with a past cache");
  call c = {.kernel = r->kernel};
  dvm_status *st = NULL;
  int present = dvmc_attr_find(n, "scale") ? DVM_SDPA_HAS_SCALE : 0;
  if ((st = lw_call_present(L, n, 3, present, &c))) return st;
  static const char *const specs[] = {"is_causal:i=0", "q_num_heads:i=0", "kv_num_heads:i=0", "scale:f=0",
                                      "softcap:f=0", "qk_matmul_output_mode:i=0", "left_window_size:i=-1",
                                      "right_window_size:i=-1"};
  for (int i = 0; i < 8; i++) {
    int reg = lw_lower_attr(L, n, specs[i], strlen(specs[i]), &st);
    if (reg < 0) return st;
    c.attrs[c.nattrs++] = reg;
  }
  return lw_emit_call_fixed(L, n, &c, 4, "sdpa", q->dtype);
}

/* Ops whose optional inputs may be omitted anywhere (LinearAttention,
 * CausalConvWithState): the kernel gets the given inputs in order and, as
 * its first attribute, the bit mask of which of the node's inputs they are. */
dvm_status *lw_lower_present(lowering *L, const dvmc_node *n, const op_rule *r) {
  call c = {0};
  int64_t mask = 0;
  dvm_status *st;
  if (n->nin > 32) return lw_unsupported(n, "%d inputs", n->nin);
  if (!strcmp(n->op, "LinearAttention")) { /* decay for the gated rules, beta for the delta rules, and only there */
    const char *rule = dvmc_attr_string(n, "update_rule", "gated_delta");
    int gated = !strcmp(rule, "gated") || !strcmp(rule, "gated_delta"), delta = strstr(rule, "delta") != NULL;
    int has_decay = n->nin > 4 && n->in[4], has_beta = n->nin > 5 && n->in[5];
    if (has_decay != gated || has_beta != delta)
      return lw_invalid(n, "update_rule \"%s\" %s decay and %s beta", rule, gated ? "needs" : "takes no",
                        delta ? "needs" : "takes no");
  }
  for (int i = 0; i < n->nin; i++) {
    if (!n->in[i]) continue;
    int reg;
    if ((st = lw_reg_of(L, n->in[i], &reg))) return st;
    c.ins[c.nin++] = reg;
    mask |= (int64_t)1 << i;
  }
  c.kernel = r->kernel;
  c.attrs[c.nattrs++] = lw_emit_int(L, mask);
  if ((st = lw_call_attrs(L, n, r->attrs, -1, &c))) return st;
  return lw_emit_call(L, n, r, &c);
}

/* com.microsoft MultiHeadAttention, the forms ONNX Runtime's CPU kernel
 * runs: f32 3-D query; key and value 3-D ([B, L, D]) or 4-D ([B, N, L,
 * H]: a cache passed as key and value, no bias or past); bias,
 * key_padding_mask, attention_bias, past_key/past_value; outputs y,
 * present_key, present_value and qk. The kernel gets the given inputs
 * (bits 0..7 of `present`) and always four outputs (bits 8..11: which
 * the node wants). Packed QKV or KV (5-D, or key omitted), which ONNX
 * Runtime's CPU kernel does not implement either, past_sequence_length
 * and cache_indirection are refused naming what. */
dvm_status *lw_lower_mha(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const later[] = {"past_sequence_length", "cache_indirection"};
  if (n->nin > 10 || n->nout > 4) return lw_unsupported(n, "%d inputs and %d outputs (at most 10 and 4)", n->nin, n->nout);
  for (int i = 8; i < n->nin; i++)
    if (n->in[i]) return lw_unsupported(n, "input %d (%s) is not supported", i, later[i - 8]);
  if (!n->nout || !n->out[0]) return lw_unsupported(n, "output 0 is needed");
  if (n->nin < 3 || !n->in[1] || !n->in[2])
    return lw_unsupported(n, "packed QKV or packed KV (key or value omitted) is not supported (nor by ONNX Runtime's "
                          "CPU kernel)");
  int has_pk = n->nin > 6 && n->in[6], has_pv = n->nin > 7 && n->in[7];
  if (has_pk != has_pv) return lw_invalid(n, "past_key and past_value must be given together");
  for (int i = 0; i < 3; i++) {
    const dvmc_value *v = n->in[i];
    if (v->typed && v->dtype != DVM_F32)
      return lw_unsupported(n, "dtype %s is not supported (f32 only)", dvm_dtype_name(v->dtype));
    if (v->rank >= 0 && v->rank != 3 && (i == 0 || v->rank != 4))
      return lw_unsupported(n, "input %d is %d-D: query must be 3-D, key and value 3-D or 4-D (packed QKV and KV are "
                            "not supported, nor by ONNX Runtime's CPU kernel)", i, v->rank);
  }
  const dvmc_value *m = n->nin > 4 ? n->in[4] : NULL;
  if (m && m->rank >= 0 && (m->rank < 1 || m->rank > 3))
    return lw_unsupported(n, "a %d-D key_padding_mask is not supported ([B], [B, T] or [B, S, T])", m->rank);
  if (m && m->rank == 1 && m->dims[0] && n->in[0]->rank == 3 && n->in[0]->dims[0] && m->dims[0] != n->in[0]->dims[0]) {
    int64_t mb, qb;
    if (dvmc_expr_is_const(m->dims[0], &mb) && dvmc_expr_is_const(n->in[0]->dims[0], &qb) && mb != qb)
      return lw_unsupported(n, "a key_padding_mask [%lld] (start and end positions) is not supported", (long long)mb);
  }
  call c = {.kernel = r->kernel};
  dvm_status *st;
  if ((st = lw_call_present(L, n, 0, 0, &c)) || (st = lw_call_attrs(L, n, r->attrs, -1, &c))) return st;
  return lw_emit_call_fixed(L, n, &c, 4, "multihead_attention", DVM_F32);
}

/* GroupQueryAttention's attributes outside its row that lw_lower_gqa
 * accepts at the values the kernel computes, or refuses. */
static const char *const gqa_checked[] = {"causal", "sliding_window_cache", "qk_output", "k_quant_type", "v_quant_type",
                                          "kv_cache_bit_width", "qk_norm_epsilon", "q_norm_epsilon", "k_norm_epsilon",
                                          NULL};

/* com.microsoft GroupQueryAttention (ops/cpu/gqa.c), f32: the given ones
 * of its first 12 inputs, named by bits 0..11 of `present` (16..18: the
 * wanted outputs), always three outputs. What else the op defines (a
 * quantized cache, per-head Q and K norms, right-padded query chunks, a
 * window-sized cache, bidirectional attention, the QK output) is refused
 * by name. */
dvm_status *lw_lower_gqa(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const char *const later[] = {"k_scale", "v_scale", "q_norm_weight", "k_norm_weight", "query_seqlens"};
  if (n->nin > 17 || n->nout > 4) return lw_unsupported(n, "%d inputs and %d outputs (at most 17 and 4)", n->nin, n->nout);
  for (int i = 12; i < n->nin; i++)
    if (n->in[i]) return lw_unsupported(n, "input %d (%s) is not supported", i, later[i - 12]);
  if (n->nout > 3 && n->out[3]) return lw_unsupported(n, "output 3 (output_qk) is not supported");
  if (!n->nout || !n->out[0] || n->nin < 7 || !n->in[0] || !n->in[5] || !n->in[6])
    return lw_invalid(n, "query, seqlens_k, total_sequence_length and output are needed");
  if (n->in[0]->typed && n->in[0]->dtype != DVM_F32)
    return lw_unsupported(n, "dtype %s is not supported (f32 only)", dvm_dtype_name(n->in[0]->dtype));
  if (dvmc_attr_int(n, "causal", 1) != 1) return lw_unsupported(n, "causal 0 (bidirectional attention) is not supported");
  if (dvmc_attr_int(n, "sliding_window_cache", 0))
    return lw_unsupported(n, "sliding_window_cache 1 (a window-sized cache) is not supported");
  if (dvmc_attr_int(n, "qk_output", 0)) return lw_unsupported(n, "qk_output is not supported");
  for (int i = 0; i < 2; i++) {
    const char *q = dvmc_attr_string(n, i ? "v_quant_type" : "k_quant_type", "NONE");
    if (strcmp(q, "NONE")) return lw_unsupported(n, "%s \"%s\" (a quantized cache) is not supported", i ? "v_quant_type" : "k_quant_type", q);
  }
  call c = {.kernel = r->kernel};
  int64_t present = 0;
  dvm_status *st;
  for (int i = 0; i < n->nin; i++) {
    int reg;
    if (!n->in[i]) continue;
    if ((st = lw_reg_of(L, n->in[i], &reg))) return st;
    c.ins[c.nin++] = reg;
    present |= 1 << i;
  }
  dvmc_node m = *n;
  m.nout = n->nout < 3 ? n->nout : 3;
  for (int j = 0; j < m.nout; j++)
    if (n->out[j]) present |= 1 << (16 + j);
  c.attrs[c.nattrs++] = lw_emit_int(L, present);
  if ((st = lw_call_attrs(L, n, r->attrs, -1, &c))) return st;
  return lw_emit_call_fixed(L, &m, &c, 3, "group_query_attention", DVM_F32);
}

/* SoftmaxCrossEntropyLoss: log_prob = LogSoftmax over axis 1 (output 1,
 * or a value of its own), then NegativeLogLikelihoodLoss of it with the
 * labels and weights, reduction and ignore_index. */
dvm_status *lw_lower_sce(lowering *L, const dvmc_node *n, const op_rule *r) {
  static const op_rule logsoftmax = {"LogSoftmax", "logsoftmax", "axis:i=1", NULL, 1, NULL, 13};
  static const op_rule nll = {"NegativeLogLikelihoodLoss", "nll_loss", NULL, NULL, 3, NULL, 13};
  if (n->nin < 2 || !n->in[0] || !n->in[1] || !n->nout || !n->out[0])
    return lw_unsupported(n, "needs scores, labels and a loss output");
  dvmc_value *lp = n->nout > 1 && n->out[1] ? n->out[1] : dvmc_value_new(L->c, (dvmc_graph *)L->g, NULL);
  if (!lp) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvmc_value *x = n->in[0];
  dvmc_node step = *n;
  step.nin = 1;
  step.in = &x;
  step.nout = 1;
  step.out = &lp;
  dvm_status *st = lw_lower_kernel(L, &step, &logsoftmax);
  if (st) return st;
  dvmc_value *ins[3] = {lp, n->in[1], n->nin > 2 ? n->in[2] : NULL};
  op_rule loss = nll;
  loss.attrs = r->attrs;
  step.nin = n->nin > 2 ? 3 : 2;
  step.in = ins;
  step.out = n->out;
  return lw_lower_kernel(L, &step, &loss);
}

/* The lowering columns of the op table (ops.def), by row. */
static const op_rule rules[] = {
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) \
  {#name, kernel, attrs, dtype, nin, lw_lower_##lower, opset},
#include "ops.def"
#undef OP
};

/* Attributes a rule does not map change the op's meaning: refuse them
 * rather than compute something else. */
dvm_status *lw_check_attrs(const dvmc_node *n, const op_rule *r) {
  static const char *const harmless[] = {"training_mode", "seed", "momentum", NULL};
  for (int i = 0; i < n->nattrs; i++) {
    const char *name = n->attrs[i].name;
    int known = 0;
    for (const char *p = r->attrs ? r->attrs : ""; *p && !known;) {
      size_t l = strcspn(p, ":|[ ");
      known = strlen(name) == l && !strncmp(p, name, l);
      p += l;
      p += strspn(p, "|");
      if (*p == ':' || *p == '[') p += strcspn(p, " ");
      p += strspn(p, " ");
    }
    if ((!strcmp(name, "to") || !strcmp(name, "dtype") || !strcmp(name, "output_datatype")) && r->dtype &&
        strlen(name) == strcspn(r->dtype, "|") && !strncmp(r->dtype, name, strlen(name)))
      known = 1; /* the dtype rule reads it ("dtype" or "dtype|f32") */
    if (!strcmp(name, "shape") && r->lower == lw_lower_random) known = 1; /* the shape rule's */
    if (!strcmp(name, "training_mode") && r->lower == lw_lower_batchnorm) known = 1;
    if (!strcmp(name, "value") && !strcmp(n->op, "ConstantOfShape")) known = 1;
    /* Cast's saturate only applies to float8 targets, which dvm has none of */
    if (!strcmp(name, "saturate") && (!strcmp(n->op, "Cast") || !strcmp(n->op, "CastLike"))) known = 1;
    if (!strcmp(name, "kernel_shape") &&
        (!strncmp(n->op, "Conv", 4) || !strcmp(n->op, "DeformConv") || !strcmp(n->op, "FusedConv")))
      known = 1; /* W's shape says it */
    if (!strcmp(name, "auto_pad") && n->attrs[i].type == DVMC_ATTR_STRING &&
        (r->lower == lw_lower_window || !strcmp(n->attrs[i].s, "NOTSET")))
      known = 1;
    if (!strcmp(name, "output_shape") && r->lower == lw_lower_window) known = 1; /* ConvTranspose's */
    if (!strcmp(name, "equation") && r->lower == lw_lower_einsum) known = 1;
    if (r->lower == lw_lower_resize) known = 1; /* lw_lower_resize reads or refuses each */
    for (int k = 0; r->lower == lw_lower_gqa && gqa_checked[k] && !known; k++) known = !strcmp(name, gqa_checked[k]);
    /* ONNX Runtime's CPU kernel of com.microsoft RotaryEmbedding reads
     * neither (the same results with any value) */
    if ((!strcmp(name, "scale") || !strcmp(name, "is_packed_batching")) && r->kernel &&
        !strcmp(r->kernel, "contrib_rotary_embedding"))
      known = 1;
    /* the layernorm kernels compute in f32, which stash_type 1 asks for
     * (ONNX Runtime writes it on its fused LayerNormalization and
     * SimplifiedLayerNormalization) */
    if (!strcmp(name, "stash_type") && n->attrs[i].type == DVMC_ATTR_INT && n->attrs[i].i == 1 && r->kernel &&
        (!strcmp(r->kernel, "layernorm") || !strcmp(r->kernel, "rmsnorm")))
      known = 1;
    for (int k = 0; harmless[k] && !known; k++)
      known = !strcmp(name, harmless[k]) && (n->attrs[i].type != DVMC_ATTR_INT || n->attrs[i].i == 0 ||
                                             strcmp(name, "training_mode") != 0);
    if (!known) return lw_unsupported(n, "attribute \"%s\" is not supported", name);
  }
  return NULL;
}

const op_rule *lw_find_rule(const dvmc_node *n) { return n->def ? &rules[dvmc_op_index(n->def)] : NULL; }
