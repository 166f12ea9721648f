/* Scan as a bytecode loop over its body, the way Loop is lowered
 * (lower_control.c): iteration t gathers slice t of every scan input along
 * its axis (slice T-1-t for a reverse direction), binds the body's inputs
 * to the states and the slices, runs the body (lowered inline, once),
 * moves its state outputs back and writes each scan output's slice t in
 * place along its axis (slice T-1-t for a reverse direction) of a tensor
 * made on iteration 0 with T slices (lw_put_scan), for the scan outputs
 * something reads (lw_scan_read; the others are not kept). Opset 8 has an optional
 * sequence_lens input first and a batch axis 0 on every input and output:
 * there the scan runs once per batch row inside an outer loop, for that
 * row's length (a reverse input from its last step within the length),
 * its scan outputs padded with zeros to the longest, as ONNX Runtime. */
#include <stdint.h>
#include <stdio.h>

#include "lowering.h"

enum { MAX_IO = 64 };

typedef struct {
  const dvmc_node *n;
  const dvmc_graph *body;
  int ns, m, nk; /* states, scan inputs, scan outputs */
  int in_axis[MAX_IO], in_rev[MAX_IO], out_axis[MAX_IO], out_rev[MAX_IO];
  const dvmc_value *used[MAX_IO]; /* the scan outputs' node outputs (NULL: omitted or read by nothing) */
} scan_spec;

/* Slice idx (a scalar i64 tensor) of tensor x along axis (Gather). */
static int gather_at(lowering *L, int x, dvm_dtype dt, int idx, int axis) {
  int ax = lw_emit_int(L, axis), shape = dvmc_fn_reg(L->f), out = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "gather"), DVM_LIST(shape), DVM_LIST(x, idx, ax));
  dvmc_fn_ALLOC(L->f, out, dt, shape, DVM_DEVICE_CPU);
  int k = dvmc_emit_kernel(L->e, "gather", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(out), DVM_LIST(x, idx), DVM_LIST(ax));
  dvmc_fn_RELEASE(L->f, shape);
  return out;
}

/* Register `len` gets x[0]'s dim axis[0]; every other x[j]'s dim axis[j]
 * must equal it (a run-time check naming the node). */
static int common_dim(lowering *L, const dvmc_node *n, int nx, const int *x, const int *axis, const char *what) {
  int len = dvmc_fn_reg(L->f);
  dvmc_fn_DIM(L->f, len, x[0], axis[0]);
  for (int j = 1; j < nx; j++) {
    int d = dvmc_fn_reg(L->f), ok = dvmc_fn_reg(L->f);
    char msg[512];
    dvmc_fn_DIM(L->f, d, x[j], axis[j]);
    dvmc_fn_EQ(L->f, ok, d, len);
    snprintf(msg, sizeof msg, "node \"%s\" (Scan): %s %d has {} along its axis %d, %s 0 has {}", n->name, what, j,
             axis[j], what);
    dvmc_fn_CHECK_WITH(L->f, ok, dvmc_emit_string(L->e, msg), DVM_LIST(d, len));
  }
  return len;
}

/* Accumulators for scan outputs: empty f32 tensors, replaced on the first
 * iteration. */
static void empty_accumulators(lowering *L, int n, int *acc) {
  if (!n) return;
  int empty = dvmc_fn_reg(L->f);
  dvmc_fn_MAKE_SHAPE(L->f, empty, DVM_LIST(lw_emit_int(L, 0)));
  for (int k = 0; k < n; k++)
    dvmc_fn_ALLOC(L->f, acc[k] = dvmc_fn_reg(L->f), DVM_F32, empty, DVM_DEVICE_CPU);
  dvmc_fn_RELEASE(L->f, empty);
}

/* The scan loop over tensors in registers: states s[] (dtypes sdt[]),
 * moved into fresh registers car[] that hold the final states after it;
 * scan inputs x[] (dtypes xdt[]); the scan outputs end in ys[]. steps >=
 * 0: a register holding the number of steps (checked to be 1 to the scan
 * inputs' length; a reverse input or output starts at step steps - 1,
 * and the scan outputs have the scan inputs' length, zeros past steps);
 * *full gets the register of the scan inputs' length. */
static dvm_status *scan_loop(lowering *L, const scan_spec *S, const int *s, const dvm_dtype *sdt, const int *x,
                             const dvm_dtype *xdt, int *car, int *ys, int steps, int *full) {
  const dvmc_node *n = S->n;
  const dvmc_graph *body = S->body;
  dvm_status *st;
  int len = *full = common_dim(L, n, S->m, x, S->in_axis, "scan input");
  if (steps >= 0) {
    int ok = dvmc_fn_reg(L->f), le = dvmc_fn_reg(L->f);
    char msg[256];
    snprintf(msg, sizeof msg, "node \"%s\" (Scan, opset 8): sequence_lens entry {} is outside [1, {}]", n->name);
    dvmc_fn_GE(L->f, ok, steps, lw_emit_int(L, 1));
    dvmc_fn_LE(L->f, le, steps, len);
    dvmc_fn_MUL(L->f, ok, ok, le);
    dvmc_fn_CHECK_WITH(L->f, ok, dvmc_emit_string(L->e, msg), DVM_LIST(steps, len));
    len = steps;
  }
  for (int k = 0; k < S->ns; k++) {
    car[k] = dvmc_fn_reg(L->f);
    dvmc_fn_MOVE(L->f, car[k], s[k]);
  }
  empty_accumulators(L, S->nk, ys);
  int i = dvmc_fn_reg(L->f), one = lw_emit_int(L, 1), last = dvmc_fn_reg(L->f), any_rev = 0;
  dvmc_fn_IMM(L->f, i, 0);
  dvmc_fn_SUB(L->f, last, len, one);
  for (int j = 0; j < S->m; j++) any_rev |= S->in_rev[j]; /* bit 1: a reverse input, 2: a reverse output */
  for (int k = 0; k < S->nk; k++) any_rev |= 2 * S->out_rev[k];
  uint32_t head = dvmc_fn_here(L->f);
  int go = dvmc_fn_reg(L->f);
  dvmc_fn_LT(L->f, go, i, len);
  uint32_t exit = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, go, 0);
  /* everything up to the back edge is the loop's: depth > 0 */
  L->depth++;
  int it = lw_scalar_tensor(L, DVM_I64, i), rt = -1, ri = -1, slice[MAX_IO];
  if (any_rev) { /* the step from the end: last - i */
    dvmc_fn_SUB(L->f, ri = dvmc_fn_reg(L->f), last, i);
    if (any_rev & 1) rt = lw_scalar_tensor(L, DVM_I64, ri);
  }
  for (int j = 0; j < S->m; j++) slice[j] = gather_at(L, x[j], xdt[j], S->in_rev[j] ? rt : it, S->in_axis[j]);
  for (int k = 0; k < S->ns + S->m; k++) {
    if (!lw_bind(L, body->inputs[k], k < S->ns ? car[k] : slice[k - S->ns])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    lw_set_type(body->inputs[k], k < S->ns ? sdt[k] : xdt[k - S->ns]);
  }
  size_t scoped_at = L->nscoped;
  if ((st = lw_lower_graph(L, body))) return st;
  dvmc_fn_loc(L->f, n->name);
  /* states move back through temporaries: a body may swap them */
  int tmp[MAX_IO];
  for (int k = 0; k < S->ns; k++) {
    int reg;
    if ((st = lw_reg_of(L, body->outputs[k], &reg))) return st;
    dvmc_fn_MOVE(L->f, tmp[k] = dvmc_fn_reg(L->f), reg);
  }
  for (int k = 0; k < S->ns; k++) {
    dvmc_fn_MOVE(L->f, car[k], tmp[k]);
    dvmc_fn_RELEASE(L->f, tmp[k]);
  }
  for (int k = 0; k < S->nk; k++) {
    const dvmc_value *v = body->outputs[S->ns + k];
    int val;
    if ((st = lw_reg_of(L, v, &val))) return st;
    if (!v->typed) return lw_unsupported(n, "scan output \"%s\" has no known dtype", v->name);
    if (S->used[k])
      lw_put_scan(L, val, v->dtype, ys[k], i, S->out_rev[k] ? ri : i, steps >= 0 ? *full : len, S->out_axis[k],
                  steps >= 0);
  }
  for (int k = 0; k < body->noutputs; k++) { /* the body's outputs are the body's to drop */
    int reg = lw_lookup(L, body->outputs[k]), is_car = 0;
    for (int c = 0; c < S->ns; c++) is_car |= reg == car[c];
    if (reg >= 0 && !is_car && lw_owns(body, body->outputs[k])) {
      dvmc_fn_RELEASE(L->f, reg);
      if (!lw_bind(L, body->outputs[k], -1)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    }
  }
  if (!lw_drop_scoped(L, scoped_at)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int j = 0; j < S->m; j++) dvmc_fn_RELEASE(L->f, slice[j]);
  dvmc_fn_RELEASE(L->f, it);
  if (rt >= 0) dvmc_fn_RELEASE(L->f, rt);
  L->depth--;
  dvmc_fn_ADD(L->f, i, i, one);
  dvmc_fn_JMP(L->f, head);
  dvmc_fn_set_target(L->f, exit, dvmc_fn_here(L->f));
  return lw_empty_scans(L, n, S->used, (const dvmc_value *const *)body->outputs + S->ns, S->nk, ys, S->out_axis, i);
}

/* Opset 8: the scan once per row b of the batch axis 0 (for lens[b]
 * steps when lens >= 0, the sequence_lens register), its final states
 * and scan outputs joined along a new axis 0 (accS, accY). */
static dvm_status *batch_loop(lowering *L, const scan_spec *S, const int *s, const dvm_dtype *sdt, const int *x,
                              const dvm_dtype *xdt, int lens, int *accS, int *accY) {
  const dvmc_node *n = S->n;
  int all[2 * MAX_IO], zeros[2 * MAX_IO] = {0};
  for (int k = 0; k < S->m; k++) all[k] = x[k];
  for (int k = 0; k < S->ns; k++) all[S->m + k] = s[k];
  int batch = common_dim(L, n, S->m + S->ns, all, zeros, "input");
  if (lens >= 0) { /* one length per row */
    int d = dvmc_fn_reg(L->f), ok = dvmc_fn_reg(L->f);
    char msg[256];
    snprintf(msg, sizeof msg, "node \"%s\" (Scan, opset 8): sequence_lens has {} entries for a batch of {}", n->name);
    dvmc_fn_DIM(L->f, d, lens, 0);
    dvmc_fn_EQ(L->f, ok, d, batch);
    dvmc_fn_CHECK_WITH(L->f, ok, dvmc_emit_string(L->e, msg), DVM_LIST(d, batch));
  }
  empty_accumulators(L, S->ns, accS);
  empty_accumulators(L, S->nk, accY);
  int b = dvmc_fn_reg(L->f), one = lw_emit_int(L, 1);
  dvmc_fn_IMM(L->f, b, 0);
  uint32_t head = dvmc_fn_here(L->f);
  int go = dvmc_fn_reg(L->f);
  dvmc_fn_LT(L->f, go, b, batch);
  uint32_t exit = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, go, 0);
  L->depth++;
  int bt = lw_scalar_tensor(L, DVM_I64, b), sb[MAX_IO], xb[MAX_IO], car[MAX_IO], ys[MAX_IO];
  for (int k = 0; k < S->ns; k++) sb[k] = gather_at(L, s[k], sdt[k], bt, 0);
  for (int k = 0; k < S->m; k++) xb[k] = gather_at(L, x[k], xdt[k], bt, 0);
  int steps = -1, full, lt = lens >= 0 ? gather_at(L, lens, DVM_I64, bt, 0) : -1;
  if (lt >= 0)
    dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "item"), DVM_LIST(steps = dvmc_fn_reg(L->f)), DVM_LIST(lt));
  dvm_status *st = scan_loop(L, S, sb, sdt, xb, xdt, car, ys, steps, &full);
  if (st) return st;
  if (lt >= 0) dvmc_fn_RELEASE(L->f, lt);
  for (int k = 0; k < S->ns; k++) {
    lw_put_scan(L, car[k], sdt[k], accS[k], b, b, batch, 0, 0);
    dvmc_fn_RELEASE(L->f, car[k]);
    dvmc_fn_RELEASE(L->f, sb[k]);
  }
  for (int k = 0; k < S->nk; k++) {
    if (S->used[k]) lw_put_scan(L, ys[k], S->body->outputs[S->ns + k]->dtype, accY[k], b, b, batch, 0, 0);
    dvmc_fn_RELEASE(L->f, ys[k]);
  }
  for (int k = 0; k < S->m; k++) dvmc_fn_RELEASE(L->f, xb[k]);
  dvmc_fn_RELEASE(L->f, bt);
  L->depth--;
  dvmc_fn_ADD(L->f, b, b, one);
  dvmc_fn_JMP(L->f, head);
  dvmc_fn_set_target(L->f, exit, dvmc_fn_here(L->f));
  int ok = dvmc_fn_reg(L->f);
  char msg[256];
  snprintf(msg, sizeof msg, "node \"%s\" (Scan, opset 8): a batch of {} rows is not supported (at least 1)", n->name);
  dvmc_fn_GE(L->f, ok, batch, one);
  dvmc_fn_CHECK_WITH(L->f, ok, dvmc_emit_string(L->e, msg), DVM_LIST(batch));
  return NULL;
}

/* Entry k of axes attribute `name` made non-negative for rank `rank` (-1:
 * unknown), into *out; an error when it is out of range or needs the rank. */
static dvm_status *axis_of(const dvmc_node *n, const char *name, int k, int rank, int *out) {
  int64_t a = dvmc_attr_ints_at(n, name, k, 0);
  if (a < 0 && rank < 0) return lw_unsupported(n, "%s[%d] = %lld needs a known rank", name, k, (long long)a);
  if (a < 0) a += rank;
  if (a < 0 || (rank >= 0 && a >= rank))
    return lw_invalid(n, "%s[%d] = %lld is out of range for rank %d", name, k, (long long)dvmc_attr_ints_at(n, name, k, 0),
                      rank);
  *out = (int)a;
  return NULL;
}

/* A list attribute has `want` entries when present; directions are 0 or 1. */
static dvm_status *check_list(const dvmc_node *n, const char *name, int want, int directions) {
  const dvmc_attr *a = dvmc_attr_find(n, name);
  if (!a) return NULL;
  if (a->type != DVMC_ATTR_INTS || a->n != want)
    return lw_invalid(n, "attribute %s must have %d entries", name, want);
  for (int k = 0; directions && k < a->n; k++)
    if (a->ints[k] != 0 && a->ints[k] != 1)
      return lw_invalid(n, "%s[%d] = %lld must be 0 (forward) or 1 (reverse)", name, k, (long long)a->ints[k]);
  return NULL;
}

dvm_status *lw_lower_scan(lowering *L, const dvmc_node *n, const op_rule *r) {
  (void)r;
  const dvmc_attr *ba = dvmc_attr_find(n, "body");
  if (!ba || ba->type != DVMC_ATTR_GRAPH) return lw_unsupported(n, "Scan needs a body graph");
  scan_spec S = {.n = n, .body = ba->g};
  const dvmc_graph *body = S.body;
  int v8 = n->opset < 9, first = v8;
  S.m = (int)dvmc_attr_int(n, "num_scan_inputs", 0);
  S.ns = n->nin - first - S.m;
  S.nk = body->noutputs - S.ns;
  if (S.m < 1 || S.ns < 0) return lw_invalid(n, "num_scan_inputs = %d does not fit its %d inputs", S.m, n->nin);
  if (body->ninputs != S.ns + S.m || S.nk < 0)
    return lw_invalid(n, "the body's %d inputs and %d outputs do not fit %d states and %d scan inputs", body->ninputs,
                      body->noutputs, S.ns, S.m);
  if (n->nout > S.ns + S.nk) return lw_invalid(n, "%d outputs for %d states and %d scan outputs", n->nout, S.ns, S.nk);
  if (S.ns + S.m > MAX_IO || S.nk > MAX_IO) return lw_unsupported(n, "more than %d inputs or scan outputs", MAX_IO);
  int lens = -1;
  if (v8 && n->nin && n->in[0]) {
    const dvmc_value *sl = n->in[0];
    if ((sl->typed && sl->dtype != DVM_I64) || (sl->rank >= 0 && sl->rank != 1))
      return lw_invalid(n, "sequence_lens must be i64 [batch]");
    dvm_status *st = lw_reg_of(L, sl, &lens);
    if (st) return st;
  }
  dvm_status *st;
  if ((st = check_list(n, v8 ? "directions" : "scan_input_directions", S.m, 1)) ||
      (st = check_list(n, "scan_input_axes", S.m, 0)) || (st = check_list(n, "scan_output_axes", S.nk, 0)) ||
      (st = check_list(n, "scan_output_directions", S.nk, 1)))
    return st;
  int s[MAX_IO], x[MAX_IO];
  dvm_dtype sdt[MAX_IO], xdt[MAX_IO];
  for (int k = 0; k < S.ns + S.m; k++) {
    const dvmc_value *v = n->in[first + k];
    int reg;
    if (!v) return lw_unsupported(n, "input %d is omitted", first + k);
    if (!v->typed) return lw_unsupported(n, "input \"%s\" has no known dtype", v->name);
    if ((st = lw_reg_of(L, v, &reg))) return st;
    if (k < S.ns) s[k] = reg, sdt[k] = v->dtype;
    else x[k - S.ns] = reg, xdt[k - S.ns] = v->dtype;
  }
  for (int j = 0; j < S.m; j++) {
    S.in_rev[j] = (int)dvmc_attr_ints_at(n, v8 ? "directions" : "scan_input_directions", j, 0);
    if (!v8 && (st = axis_of(n, "scan_input_axes", j, n->in[S.ns + j]->rank, &S.in_axis[j]))) return st;
  }
  for (int k = 0; k < S.nk; k++) {
    const dvmc_value *o = body->outputs[S.ns + k];
    S.out_rev[k] = (int)dvmc_attr_ints_at(n, "scan_output_directions", k, 0);
    if (!v8 && (st = axis_of(n, "scan_output_axes", k, o->rank >= 0 ? o->rank + 1 : -1, &S.out_axis[k]))) return st;
    S.used[k] = lw_scan_read(n, S.ns + k);
  }
  int fs[MAX_IO], ys[MAX_IO];
  int full;
  st = v8 ? batch_loop(L, &S, s, sdt, x, xdt, lens, fs, ys) : scan_loop(L, &S, s, sdt, x, xdt, fs, ys, -1, &full);
  if (st) return st;
  for (int k = 0; k < S.ns + S.nk; k++) { /* a scan output nothing reads stays the empty placeholder, released */
    const dvmc_value *o = k < S.ns ? (k < n->nout ? n->out[k] : NULL) : S.used[k - S.ns];
    int reg = k < S.ns ? fs[k] : ys[k - S.ns];
    if (!o) {
      dvmc_fn_RELEASE(L->f, reg);
      continue;
    }
    lw_set_type(o, k < S.ns ? sdt[k] : body->outputs[k]->dtype);
    if (!lw_bind(L, o, reg)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  return NULL;
}
