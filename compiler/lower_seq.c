/* Sequences and optionals: the ONNX values the VM holds as tuples
 * (docs/bytecode.md 4.3). A sequence is a tuple of tensors; an optional a
 * tuple of none or one item (a tensor or a sequence). The ops are tuple
 * instructions (tuple, len, at, insert, erase, get); positions are read
 * from their tensors with the "item" shape function. SplitToSequence slices
 * in a bytecode loop, ConcatFromSequence concatenates in one, SequenceMap
 * runs its body in one, like Loop. */
#include <string.h>

#include "lowering.h"
#include "onnx_import.h"

void lw_set_kind(const dvmc_value *v, dvmc_kind k) { ((dvmc_value *)v)->kind = k; }

/* Ops whose lowering takes values of any kind; every other op takes
 * tensors only (lw_check_kinds). */
static const char *const any_kind_ops[] = {
    "Identity", "If", "Loop", "SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceInsert",
    "SequenceErase", "SequenceLength", "SplitToSequence", "SequenceMap", "ConcatFromSequence", "Optional", "OptionalHasElement",
    "OptionalGetElement",
};

dvm_status *lw_check_kinds(const dvmc_node *n) {
  for (size_t i = 0; i < sizeof any_kind_ops / sizeof *any_kind_ops; i++)
    if (!strcmp(n->op, any_kind_ops[i]) && !n->domain[0]) return NULL;
  for (int k = 0; k < n->nin; k++)
    if (n->in[k] && n->in[k]->kind != DVMC_TENSOR)
      return lw_unsupported(n, "input %d (\"%s\") is %s %s; the op takes tensors", k, n->in[k]->name,
                            dvmc_kind_is_optional(n->in[k]->kind) ? "an" : "a", dvmc_kind_name(n->in[k]->kind));
  return NULL;
}

/* An int register holding the one-element tensor v (a position). */
static dvm_status *item(lowering *L, const dvmc_value *v, int *out) {
  int t;
  dvm_status *st = lw_reg_of(L, v, &t);
  if (st) return st;
  *out = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "item"), DVM_LIST(*out), DVM_LIST(t));
  return NULL;
}

static dvm_status *bind_out(lowering *L, const dvmc_node *n, int reg, dvmc_kind kind, bool typed, dvm_dtype dt) {
  lw_set_kind(n->out[0], kind);
  if (typed) lw_set_type(n->out[0], dt);
  return lw_bind(L, n->out[0], reg) ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

static dvm_status *need(const dvmc_node *n, int k, dvmc_kind kind) {
  if (k >= n->nin || !n->in[k]) return lw_unsupported(n, "input %d is missing", k);
  if (n->in[k]->kind != kind)
    return lw_unsupported(n, "input %d (\"%s\") is %s %s, expected %s %s", k, n->in[k]->name,
                          dvmc_kind_is_optional(n->in[k]->kind) ? "an" : "a", dvmc_kind_name(n->in[k]->kind),
                          dvmc_kind_is_optional(kind) ? "an" : "a", dvmc_kind_name(kind));
  return NULL;
}

/* A tensor going into sequence s must have its dtype. */
static dvm_status *same_dtype(const dvmc_node *n, const dvmc_value *s, const dvmc_value *t) {
  if (s->typed && t->typed && s->dtype != t->dtype)
    return lw_invalid(n, "\"%s\" is %s, the sequence's tensors %s", t->name, dvm_dtype_name(t->dtype),
                      dvm_dtype_name(s->dtype));
  return NULL;
}

static dvm_status *construct(lowering *L, const dvmc_node *n) {
  int64_t w[256];
  if (n->nin > 256) return lw_unsupported(n, "more than 256 inputs");
  int seq = dvmc_fn_reg(L->f);
  for (int k = 0; k < n->nin; k++) {
    dvm_status *st = need(n, k, DVMC_TENSOR);
    if (!st) st = same_dtype(n, n->in[0], n->in[k]);
    if (st) return st;
    int r;
    if ((st = lw_reg_of(L, n->in[k], &r))) return st;
    w[k] = r;
  }
  dvmc_fn_TUPLE(L->f, seq, (dvm_list){n->nin, w});
  return bind_out(L, n, seq, DVMC_SEQUENCE, n->nin && n->in[0]->typed, n->nin ? n->in[0]->dtype : DVM_F32);
}

static dvm_status *empty(lowering *L, const dvmc_node *n) {
  dvm_dtype dt = DVM_F32;
  int64_t onnx = dvmc_attr_int(n, "dtype", 1);
  if (!dvmc_onnx_dtype(onnx, &dt)) return lw_unsupported(n, "dtype %lld is not supported", (long long)onnx);
  int r = dvmc_fn_reg(L->f);
  dvmc_fn_TUPLE(L->f, r, DVM_NO_LIST);
  return bind_out(L, n, r, DVMC_SEQUENCE, true, dt);
}

static dvm_status *at(lowering *L, const dvmc_node *n) {
  int s, i, r = dvmc_fn_reg(L->f);
  dvm_status *st = need(n, 0, DVMC_SEQUENCE);
  if (!st) st = need(n, 1, DVMC_TENSOR);
  if (st || (st = lw_reg_of(L, n->in[0], &s)) || (st = item(L, n->in[1], &i))) return st;
  dvmc_fn_AT(L->f, r, s, i);
  dvmc_fn_RELEASE(L->f, i);
  return bind_out(L, n, r, DVMC_TENSOR, n->in[0]->typed, n->in[0]->dtype);
}

/* SequenceInsert (position: the end unless given), SequenceErase (the
 * last unless given). */
static dvm_status *insert_erase(lowering *L, const dvmc_node *n, int insert) {
  int s, t = -1, i, r = dvmc_fn_reg(L->f), pos = insert ? 2 : 1;
  dvm_status *st = need(n, 0, DVMC_SEQUENCE);
  if (!st && insert && !(st = need(n, 1, DVMC_TENSOR))) st = same_dtype(n, n->in[0], n->in[1]);
  if (st || (st = lw_reg_of(L, n->in[0], &s)) || (insert && (st = lw_reg_of(L, n->in[1], &t)))) return st;
  if (pos < n->nin && n->in[pos]) {
    if ((st = item(L, n->in[pos], &i))) return st;
  } else if (insert) {
    dvmc_fn_LEN(L->f, i = dvmc_fn_reg(L->f), s);
  } else {
    i = lw_emit_int(L, -1);
  }
  if (insert) dvmc_fn_INSERT(L->f, r, s, i, t);
  else dvmc_fn_ERASE(L->f, r, s, i);
  dvmc_fn_RELEASE(L->f, i);
  return bind_out(L, n, r, DVMC_SEQUENCE, n->in[0]->typed, n->in[0]->dtype);
}

static dvm_status *length(lowering *L, const dvmc_node *n) {
  int s, len = dvmc_fn_reg(L->f);
  dvm_status *st = need(n, 0, DVMC_SEQUENCE);
  if (st || (st = lw_reg_of(L, n->in[0], &s))) return st;
  dvmc_fn_LEN(L->f, len, s);
  int t = lw_scalar_tensor(L, DVM_I64, len);
  dvmc_fn_RELEASE(L->f, len);
  return bind_out(L, n, t, DVMC_TENSOR, true, DVM_I64);
}

/* Optional: of its input, or empty of the type its attribute names. */
static dvm_status *optional(lowering *L, const dvmc_node *n) {
  int r = dvmc_fn_reg(L->f);
  if (n->nin && n->in[0]) {
    const dvmc_value *x = n->in[0];
    if (dvmc_kind_is_optional(x->kind)) return lw_unsupported(n, "an optional of an optional is not supported");
    int reg;
    dvm_status *st = lw_reg_of(L, x, &reg);
    if (st) return st;
    dvmc_fn_TUPLE(L->f, r, DVM_LIST(reg));
    return bind_out(L, n, r, x->kind == DVMC_SEQUENCE ? DVMC_OPT_SEQUENCE : DVMC_OPT_TENSOR, x->typed, x->dtype);
  }
  const dvmc_attr *a = dvmc_attr_find(n, "type");
  if (!a || a->type != DVMC_ATTR_TYPE || !a->type_of) return lw_invalid(n, "an empty Optional needs its \"type\"");
  const dvmc_value *t = a->type_of;
  if (t->kind != DVMC_TENSOR && t->kind != DVMC_SEQUENCE)
    return lw_unsupported(n, "an optional of an optional is not supported");
  dvmc_fn_TUPLE(L->f, r, DVM_NO_LIST);
  return bind_out(L, n, r, t->kind == DVMC_SEQUENCE ? DVMC_OPT_SEQUENCE : DVMC_OPT_TENSOR, t->typed, t->dtype);
}

/* OptionalHasElement: false without an input, true for a tensor or
 * sequence, else whether the optional holds one. */
static dvm_status *has_element(lowering *L, const dvmc_node *n) {
  const dvmc_value *x = n->nin ? n->in[0] : NULL;
  int has;
  if (x && dvmc_kind_is_optional(x->kind)) {
    int reg;
    dvm_status *st = lw_reg_of(L, x, &reg);
    if (st) return st;
    dvmc_fn_LEN(L->f, has = dvmc_fn_reg(L->f), reg);
  } else {
    has = lw_emit_int(L, x != NULL);
  }
  int t = lw_scalar_tensor(L, DVM_BOOL, has);
  dvmc_fn_RELEASE(L->f, has);
  return bind_out(L, n, t, DVMC_TENSOR, true, DVM_BOOL);
}

/* OptionalGetElement: what the optional holds (an error at run time when
 * it is empty); a tensor or sequence is itself. */
static dvm_status *get_element(lowering *L, const dvmc_node *n) {
  const dvmc_value *x = n->nin ? n->in[0] : NULL;
  int reg, r = dvmc_fn_reg(L->f);
  if (!x) return lw_unsupported(n, "input 0 is missing");
  dvm_status *st = lw_reg_of(L, x, &reg);
  if (st) return st;
  if (!dvmc_kind_is_optional(x->kind)) {
    dvmc_fn_MOVE(L->f, r, reg);
    return bind_out(L, n, r, x->kind, x->typed, x->dtype);
  }
  char msg[512];
  snprintf(msg, sizeof msg, "node \"%s\" (OptionalGetElement): input \"%s\" is an empty optional", n->name, x->name);
  int len = dvmc_fn_reg(L->f);
  dvmc_fn_LEN(L->f, len, reg);
  dvmc_fn_CHECK(L->f, len, dvmc_emit_string(L->e, msg));
  dvmc_fn_RELEASE(L->f, len);
  dvmc_fn_GET(L->f, r, reg, 0);
  return bind_out(L, n, r, x->kind == DVMC_OPT_SEQUENCE ? DVMC_SEQUENCE : DVMC_TENSOR, x->typed, x->dtype);
}

/* A 1-D i64 tensor [v] of the int in register v (Slice's starts, ends, axes). */
static int int_tensor1(lowering *L, int v) {
  int s = dvmc_fn_reg(L->f), dims = lw_emit_shape(L, 1, (int64_t[]){1}), t = dvmc_fn_reg(L->f);
  dvmc_fn_MAKE_SHAPE(L->f, s, DVM_LIST(v));
  dvmc_fn_ALLOC(L->f, t, DVM_I64, dims, DVM_DEVICE_CPU);
  int k = dvmc_emit_kernel(L->e, "from_shape", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(t), DVM_NO_LIST, DVM_LIST(s));
  dvmc_fn_RELEASE(L->f, s);
  dvmc_fn_RELEASE(L->f, dims);
  return t;
}

/* SplitToSequence: with split a 1-D tensor of k lengths (k known here),
 * the Split kernel's k outputs; with split a scalar (chunks of that size,
 * the last one smaller) or omitted (chunks of 1, axis dropped unless
 * keepdims), a loop of slices. */
static dvm_status *split_to_sequence(lowering *L, const dvmc_node *n) {
  const dvmc_value *x = n->nin ? n->in[0] : NULL, *split = n->nin > 1 ? n->in[1] : NULL;
  dvm_status *st = need(n, 0, DVMC_TENSOR);
  if (!st && split) st = need(n, 1, DVMC_TENSOR);
  if (st) return st;
  if (x->rank < 0) return lw_unsupported(n, "input \"%s\" has a rank known only at run time", x->name);
  int64_t axis = dvmc_attr_int(n, "axis", 0), keepdims = dvmc_attr_int(n, "keepdims", 1), k;
  if (axis < -x->rank || axis >= x->rank)
    return lw_invalid(n, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
  if (axis < 0) axis += x->rank;
  int xr, seq = dvmc_fn_reg(L->f);
  if ((st = lw_reg_of(L, x, &xr))) return st;
  if (split && split->rank != 0) {
    if (split->rank != 1 || !split->dims[0] || !dvmc_expr_is_const(split->dims[0], &k) || k > 256)
      return lw_unsupported(n, "split \"%s\" must be a scalar or a 1-D tensor of at most 256 lengths known at "
                               "compile time", split->name);
    int sp, ax = lw_emit_int(L, axis);
    if ((st = lw_reg_of(L, split, &sp))) return st;
    int64_t outs[256];
    int sf = dvmc_emit_shapefn(L->e, "split");
    for (int64_t i = 0; i < k; i++) outs[i] = dvmc_fn_reg(L->f);
    dvmc_fn_SHAPEFN(L->f, sf, (dvm_list){k, outs}, DVM_LIST(xr, sp, ax));
    int kern = dvmc_emit_kernel(L->e, "split", DVM_DEVICE_CPU, 1, NULL, 0);
    for (int64_t i = 0; i < k; i++) {
      int t = dvmc_fn_reg(L->f);
      dvmc_fn_ALLOC(L->f, t, x->dtype, outs[i], DVM_DEVICE_CPU);
      dvmc_fn_RELEASE(L->f, outs[i]);
      outs[i] = t;
    }
    dvmc_fn_INVOKE(L->f, kern, -1, (dvm_list){k, outs}, DVM_LIST(xr, sp), DVM_LIST(ax));
    dvmc_fn_TUPLE(L->f, seq, (dvm_list){k, outs});
    for (int64_t i = 0; i < k; i++) dvmc_fn_RELEASE(L->f, outs[i]);
    dvmc_fn_RELEASE(L->f, ax);
    return bind_out(L, n, seq, DVMC_SEQUENCE, x->typed, x->dtype);
  }
  /* the loop: start = 0; while start < dim: item [start, min(start + chunk, dim)) */
  int dim = dvmc_fn_reg(L->f), chunk, start = dvmc_fn_reg(L->f), end = dvmc_fn_reg(L->f), go = dvmc_fn_reg(L->f);
  dvmc_fn_DIM(L->f, dim, xr, axis);
  if (split) {
    if ((st = item(L, split, &chunk))) return st;
    char msg[512];
    snprintf(msg, sizeof msg, "node \"%s\" (SplitToSequence): split must be positive, got {}", n->name);
    int zero = lw_emit_int(L, 0), ok = dvmc_fn_reg(L->f);
    dvmc_fn_GT(L->f, ok, chunk, zero);
    dvmc_fn_CHECK_WITH(L->f, ok, dvmc_emit_string(L->e, msg), DVM_LIST(chunk));
  } else {
    chunk = lw_emit_int(L, 1);
  }
  int axes = int_tensor1(L, lw_emit_int(L, axis)), squeeze = !split && !keepdims;
  int sq_axes = squeeze ? lw_emit_shape(L, 1, (int64_t[]){axis}) : -1;
  dvmc_fn_TUPLE(L->f, seq, DVM_NO_LIST);
  dvmc_fn_IMM(L->f, start, 0);
  uint32_t head = dvmc_fn_here(L->f);
  dvmc_fn_LT(L->f, go, start, dim);
  uint32_t exit = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, go, 0);
  dvmc_fn_ADD(L->f, end, start, chunk);
  dvmc_fn_MIN(L->f, end, end, dim);
  int st_t = int_tensor1(L, start), en_t = int_tensor1(L, end), shape = dvmc_fn_reg(L->f), piece = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "slice"), DVM_LIST(shape), DVM_LIST(xr, st_t, en_t, axes));
  dvmc_fn_ALLOC(L->f, piece, x->dtype, shape, DVM_DEVICE_CPU);
  int kern = dvmc_emit_kernel(L->e, "slice", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, kern, -1, DVM_LIST(piece), DVM_LIST(xr, st_t, en_t, axes), DVM_NO_LIST);
  if (squeeze) {
    int sq = dvmc_fn_reg(L->f), view = dvmc_fn_reg(L->f);
    dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "squeeze"), DVM_LIST(sq), DVM_LIST(piece, sq_axes));
    dvmc_fn_RESHAPE(L->f, view, piece, sq);
    dvmc_fn_MOVE(L->f, piece, view);
    dvmc_fn_RELEASE(L->f, view);
    dvmc_fn_RELEASE(L->f, sq);
  }
  int len = dvmc_fn_reg(L->f);
  dvmc_fn_LEN(L->f, len, seq);
  dvmc_fn_INSERT(L->f, seq, seq, len, piece);
  int regs[] = {len, piece, shape, st_t, en_t};
  for (size_t i = 0; i < sizeof regs / sizeof *regs; i++) dvmc_fn_RELEASE(L->f, regs[i]);
  dvmc_fn_MOVE(L->f, start, end);
  dvmc_fn_JMP(L->f, head);
  dvmc_fn_set_target(L->f, exit, dvmc_fn_here(L->f));
  int after[] = {axes, dim, chunk, start, end, go, sq_axes};
  for (size_t i = 0; i < sizeof after / sizeof *after; i++)
    if (after[i] >= 0) dvmc_fn_RELEASE(L->f, after[i]);
  return bind_out(L, n, seq, DVMC_SEQUENCE, x->typed, x->dtype);
}

/* Item i of sequence s, given a new axis `axes` (a shape register) when
 * axes >= 0 (a view). */
static int concat_item(lowering *L, int s, int i, int axes) {
  int item = dvmc_fn_reg(L->f);
  dvmc_fn_AT(L->f, item, s, i);
  if (axes < 0) return item;
  int shape = dvmc_fn_reg(L->f), u = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "unsqueeze"), DVM_LIST(shape), DVM_LIST(item, axes));
  dvmc_fn_RESHAPE(L->f, u, item, shape);
  dvmc_fn_RELEASE(L->f, item);
  dvmc_fn_RELEASE(L->f, shape);
  return u;
}

/* ConcatFromSequence: the items joined along axis (with new_axis, each
 * given a new axis there first): item 0, then a bytecode loop that
 * concatenates each next item to what came before (copying it: quadratic
 * in the item count). An empty sequence is an error at run time, as in
 * ONNX Runtime. */
static dvm_status *concat_from_sequence(lowering *L, const dvmc_node *n) {
  dvm_status *st = need(n, 0, DVMC_SEQUENCE);
  int s;
  if (st || (st = lw_reg_of(L, n->in[0], &s))) return st;
  if (!n->in[0]->typed) return lw_unsupported(n, "the sequence's dtype is not known");
  dvm_dtype dt = n->in[0]->dtype;
  int64_t axis = dvmc_attr_int(n, "axis", INT64_MIN), new_axis = dvmc_attr_int(n, "new_axis", 0);
  if (axis == INT64_MIN) return lw_invalid(n, "needs its \"axis\" attribute");
  if (new_axis != 0 && new_axis != 1) return lw_invalid(n, "new_axis must be 0 or 1, got %lld", (long long)new_axis);
  int len = dvmc_fn_reg(L->f), i = dvmc_fn_reg(L->f), go = dvmc_fn_reg(L->f);
  int one = lw_emit_int(L, 1), ax = lw_emit_int(L, axis), axes = -1;
  int concat = dvmc_emit_kernel(L->e, "concat", DVM_DEVICE_CPU, 1, NULL, 0);
  char msg[512];
  snprintf(msg, sizeof msg, "node \"%s\" (ConcatFromSequence): the sequence is empty", n->name);
  dvmc_fn_LEN(L->f, len, s);
  dvmc_fn_CHECK(L->f, len, dvmc_emit_string(L->e, msg));
  if (new_axis) dvmc_fn_MAKE_SHAPE(L->f, axes = dvmc_fn_reg(L->f), DVM_LIST(ax));
  dvmc_fn_IMM(L->f, i, 0);
  int acc = concat_item(L, s, i, axes);
  dvmc_fn_IMM(L->f, i, 1);
  uint32_t head = dvmc_fn_here(L->f);
  dvmc_fn_LT(L->f, go, i, len);
  uint32_t exit = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, go, 0);
  int item = concat_item(L, s, i, axes), shape = dvmc_fn_reg(L->f), out = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "concat"), DVM_LIST(shape), DVM_LIST(acc, item, ax));
  dvmc_fn_ALLOC(L->f, out, dt, shape, DVM_DEVICE_CPU);
  dvmc_fn_INVOKE(L->f, concat, -1, DVM_LIST(out), DVM_LIST(acc, item), DVM_LIST(ax));
  dvmc_fn_MOVE(L->f, acc, out);
  int done[] = {out, shape, item};
  for (size_t k = 0; k < sizeof done / sizeof *done; k++) dvmc_fn_RELEASE(L->f, done[k]);
  dvmc_fn_ADD(L->f, i, i, one);
  dvmc_fn_JMP(L->f, head);
  dvmc_fn_set_target(L->f, exit, dvmc_fn_here(L->f));
  int after[] = {len, i, go, one, ax, axes};
  for (size_t k = 0; k < sizeof after / sizeof *after; k++)
    if (after[k] >= 0) dvmc_fn_RELEASE(L->f, after[k]);
  return bind_out(L, n, acc, DVMC_TENSOR, true, dt);
}

/* SequenceMap: the body once per item of the first input (a sequence);
 * a sequence input gives the body its item, a tensor input itself; each
 * body output is appended to an output sequence. */
static dvm_status *sequence_map(lowering *L, const dvmc_node *n) {
  const dvmc_attr *ba = dvmc_attr_find(n, "body");
  if (!ba || ba->type != DVMC_ATTR_GRAPH) return lw_unsupported(n, "SequenceMap needs a body graph");
  const dvmc_graph *body = ba->g;
  if (body->ninputs != n->nin || body->noutputs != n->nout || n->nin > 64 || n->nout > 64)
    return lw_unsupported(n, "the body's %d inputs and %d outputs must match the node's %d and %d (at most 64)",
                          body->ninputs, body->noutputs, n->nin, n->nout);
  dvm_status *st = need(n, 0, DVMC_SEQUENCE);
  if (st) return st;
  int in[64], outs[64], len = dvmc_fn_reg(L->f), i = dvmc_fn_reg(L->f), go = dvmc_fn_reg(L->f), one = lw_emit_int(L, 1);
  for (int k = 0; k < n->nin; k++) {
    if (!n->in[k]) return lw_unsupported(n, "input %d is omitted", k);
    if (n->in[k]->kind != DVMC_TENSOR && n->in[k]->kind != DVMC_SEQUENCE)
      return lw_unsupported(n, "input %d is an optional", k);
    if ((st = lw_reg_of(L, n->in[k], &in[k]))) return st;
  }
  for (int k = 0; k < n->nout; k++) {
    if (!n->out[k]) return lw_unsupported(n, "output %d is omitted", k);
    dvmc_fn_TUPLE(L->f, outs[k] = dvmc_fn_reg(L->f), DVM_NO_LIST);
  }
  dvmc_fn_LEN(L->f, len, in[0]);
  dvmc_fn_IMM(L->f, i, 0);
  uint32_t head = dvmc_fn_here(L->f);
  dvmc_fn_LT(L->f, go, i, len);
  uint32_t exit = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, go, 0);
  int items[64];
  for (int k = 0; k < n->nin; k++) { /* fresh registers: the body may release its inputs */
    items[k] = dvmc_fn_reg(L->f);
    if (n->in[k]->kind == DVMC_SEQUENCE) dvmc_fn_AT(L->f, items[k], in[k], i);
    else dvmc_fn_MOVE(L->f, items[k], in[k]);
    if (!lw_bind(L, body->inputs[k], items[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    lw_set_kind(body->inputs[k], DVMC_TENSOR);
    if (n->in[k]->typed) lw_set_type(body->inputs[k], n->in[k]->dtype);
  }
  size_t scoped_at = L->nscoped;
  L->depth++;
  if ((st = lw_lower_graph(L, body))) return st;
  dvmc_fn_loc(L->f, n->name);
  for (int k = 0; k < n->nout; k++) {
    const dvmc_value *o = body->outputs[k];
    int reg, at = dvmc_fn_reg(L->f);
    if (o->kind != DVMC_TENSOR) return lw_unsupported(n, "body output %d is not a tensor", k);
    if ((st = lw_reg_of(L, o, &reg))) return st;
    dvmc_fn_LEN(L->f, at, outs[k]);
    dvmc_fn_INSERT(L->f, outs[k], outs[k], at, reg);
    dvmc_fn_RELEASE(L->f, at);
    if (o->typed) lw_set_type(n->out[k], o->dtype);
    lw_set_kind(n->out[k], DVMC_SEQUENCE);
  }
  for (int k = 0; k < n->nout; k++) { /* the body's outputs are the body's to drop */
    int reg = lw_lookup(L, body->outputs[k]);
    if (reg >= 0 && lw_owns(body, body->outputs[k])) {
      dvmc_fn_RELEASE(L->f, reg);
      if (!lw_bind(L, body->outputs[k], -1)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    }
  }
  if (!lw_drop_scoped(L, scoped_at)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  L->depth--;
  for (int k = 0; k < n->nin; k++) dvmc_fn_RELEASE(L->f, items[k]);
  dvmc_fn_ADD(L->f, i, i, one);
  dvmc_fn_JMP(L->f, head);
  dvmc_fn_set_target(L->f, exit, dvmc_fn_here(L->f));
  int after[] = {len, i, go, one};
  for (size_t k = 0; k < sizeof after / sizeof *after; k++) dvmc_fn_RELEASE(L->f, after[k]);
  for (int k = 0; k < n->nout; k++)
    if (!lw_bind(L, n->out[k], outs[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  return NULL;
}

dvm_status *lw_lower_sequence(lowering *L, const dvmc_node *n, const op_rule *r) {
  (void)r;
  for (int k = 1; k < n->nout; k++)
    if (n->out[k] && strcmp(n->op, "SequenceMap")) return lw_unsupported(n, "has one output");
  if (!n->nout || !n->out[0]) return lw_unsupported(n, "needs its output");
  const char *op = n->op;
  if (!strcmp(op, "SequenceConstruct")) return construct(L, n);
  if (!strcmp(op, "SequenceEmpty")) return empty(L, n);
  if (!strcmp(op, "SequenceAt")) return at(L, n);
  if (!strcmp(op, "SequenceInsert")) return insert_erase(L, n, 1);
  if (!strcmp(op, "SequenceErase")) return insert_erase(L, n, 0);
  if (!strcmp(op, "SequenceLength")) return length(L, n);
  if (!strcmp(op, "SplitToSequence")) return split_to_sequence(L, n);
  if (!strcmp(op, "SequenceMap")) return sequence_map(L, n);
  if (!strcmp(op, "ConcatFromSequence")) return concat_from_sequence(L, n);
  if (!strcmp(op, "Optional")) return optional(L, n);
  if (!strcmp(op, "OptionalHasElement")) return has_element(L, n);
  if (!strcmp(op, "OptionalGetElement")) return get_element(L, n);
  return lw_unsupported(n, "the op is not supported");
}
