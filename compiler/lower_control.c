/* Control flow: If and Loop as jumps in the bytecode, their subgraphs
 * lowered inline (lw_lower_graph at depth > 0); the loop pieces Scan
 * shares (lower_scan.c). */
#include <stdint.h>

#include "lowering.h"

/* If: the condition read on the host, then each branch inline, its outputs
 * moved into the If's. */
dvm_status *lw_lower_if(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *then_a = dvmc_attr_find(n, "then_branch"), *else_a = dvmc_attr_find(n, "else_branch");
  if (!then_a || !else_a || then_a->type != DVMC_ATTR_GRAPH || else_a->type != DVMC_ATTR_GRAPH)
    return lw_unsupported(n, "If needs then_branch and else_branch graphs");
  const dvmc_graph *br[2] = {then_a->g, else_a->g};
  for (int k = 0; k < n->nout; k++)
    if (!n->out[k]) return lw_unsupported(n, "omitted outputs are not supported");
  if (!n->nin || !n->in[0]) return lw_unsupported(n, "If needs its condition");
  for (int b = 0; b < 2; b++)
    if (br[b]->noutputs != n->nout)
      return lw_unsupported(n, "a branch has %d outputs, the If %d", br[b]->noutputs, n->nout);
  int cond, c = dvmc_fn_reg(L->f);
  dvm_status *st = lw_reg_of(L, n->in[0], &cond);
  if (st) return st;
  int sf = dvmc_emit_shapefn(L->e, "item");
  dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(c), DVM_LIST(cond));
  int out[64];
  if (n->nout > 64) return lw_unsupported(n, "more than 64 outputs");
  for (int k = 0; k < n->nout; k++) out[k] = dvmc_fn_reg(L->f);
  uint32_t jz_at = dvmc_fn_here(L->f), jmp_at = 0; /* the jumps to patch */
  dvmc_fn_JZ(L->f, c, 0);
  for (int b = 0; b < 2; b++) {
    if (b == 1) {
      jmp_at = dvmc_fn_here(L->f);
      dvmc_fn_JMP(L->f, 0);
      dvmc_fn_set_target(L->f, jz_at, dvmc_fn_here(L->f));
    }
    /* the branch's outputs are made (a folded shape, a constant) and
     * moved inside the branch too: depth > 0 until they are */
    size_t scoped_at = L->nscoped;
    L->depth++;
    st = lw_lower_graph(L, br[b]);
    dvmc_fn_loc(L->f, n->name);
    for (int k = 0; k < n->nout && !st; k++) {
      int reg;
      const dvmc_value *o = br[b]->outputs[k];
      if ((st = lw_reg_of(L, o, &reg))) break;
      dvmc_fn_MOVE(L->f, out[k], reg);
      if (lw_owns(br[b], o)) { /* released here, so not again with the region's loads */
        dvmc_fn_RELEASE(L->f, reg);
        if (!lw_bind(L, o, -1)) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
      }
      if (o->typed) lw_set_type(n->out[k], o->dtype);
      if (b == 1 && o->kind != n->out[k]->kind && !st)
        st = lw_unsupported(n, "output %d is %s %s in one branch and %s %s in the other", k,
                            dvmc_kind_is_optional(n->out[k]->kind) ? "an" : "a", dvmc_kind_name(n->out[k]->kind),
                            dvmc_kind_is_optional(o->kind) ? "an" : "a", dvmc_kind_name(o->kind));
      lw_set_kind(n->out[k], o->kind);
    }
    if (!lw_drop_scoped(L, scoped_at) && !st) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    L->depth--;
    if (st) return st;
  }
  dvmc_fn_set_target(L->f, jmp_at, dvmc_fn_here(L->f));
  dvmc_fn_RELEASE(L->f, c);
  for (int k = 0; k < n->nout; k++)
    if (!lw_bind(L, n->out[k], out[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  (void)r;
  return NULL;
}

/* A scalar tensor of dtype dt holding the int in register v (Loop's
 * iteration number and condition, as its body sees them; Scan's slice
 * index). */
int lw_scalar_tensor(lowering *L, dvm_dtype dt, int v) {
  int s = dvmc_fn_reg(L->f), t = dvmc_fn_reg(L->f);
  dvmc_fn_MAKE_SHAPE(L->f, s, DVM_NO_LIST);
  dvmc_fn_ALLOC(L->f, t, dt, s, DVM_DEVICE_CPU);
  int k = dvmc_emit_kernel(L->e, "fill", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(t), DVM_NO_LIST, DVM_LIST(v));
  dvmc_fn_RELEASE(L->f, s);
  return t;
}

const dvmc_value *lw_scan_read(const dvmc_node *n, int k) {
  const dvmc_value *o = k < n->nout ? n->out[k] : NULL;
  return o && o->uses > 0 ? o : NULL;
}

/* Register of val with a new axis of 1 at `axis` (a view). */
static int unsqueezed(lowering *L, int val, int axis) {
  int axes = dvmc_fn_reg(L->f), shape = dvmc_fn_reg(L->f), u = dvmc_fn_reg(L->f);
  dvmc_fn_MAKE_SHAPE(L->f, axes, DVM_LIST(lw_emit_int(L, axis)));
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "unsqueeze"), DVM_LIST(shape), DVM_LIST(val, axes));
  dvmc_fn_RESHAPE(L->f, u, val, shape);
  dvmc_fn_RELEASE(L->f, axes);
  dvmc_fn_RELEASE(L->f, shape);
  return u;
}

/* dst[.., at:at+n, ..] = src[.., 0:n, ..] along `axis` (registers), in
 * place in dst: the copy_into kernel, which fails naming both shapes when
 * src does not fit (a scan output whose shape changes between
 * iterations). */
static void copy_rows(lowering *L, int dst, int src, int axis, int at, int n) {
  int k = dvmc_emit_kernel(L->e, "copy_into", DVM_DEVICE_CPU, 1, NULL, 0);
  dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(dst), DVM_LIST(src), DVM_LIST(axis, at, n));
}

/* Register `out` gets a new tensor of dtype dt shaped like x (a tensor
 * register) with dim `axis` set to register n. */
static void alloc_with_dim(lowering *L, int out, dvm_dtype dt, int x, int axis, int n) {
  int shape = dvmc_fn_reg(L->f);
  dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, "with_dim"), DVM_LIST(shape), DVM_LIST(x, axis, n));
  dvmc_fn_ALLOC(L->f, out, dt, shape, DVM_DEVICE_CPU);
  dvmc_fn_RELEASE(L->f, shape);
}

/* One scan output step when the number of slices (register width) is
 * known before the loop (Scan): on iteration i == 0, acc becomes a tensor
 * of dtype dt shaped like the tensor in register val with a new axis
 * `axis` of `width` (filled with zeros when `zero`: opset 8's padding);
 * every iteration writes val there at index `at` (a register), in place:
 * each slice is copied once. */
void lw_put_scan(lowering *L, int val, dvm_dtype dt, int acc, int i, int at, int width, int axis, int zero) {
  int ax = lw_emit_int(L, axis), u = unsqueezed(L, val, axis);
  uint32_t to_put = dvmc_fn_here(L->f);
  dvmc_fn_JNZ(L->f, i, 0);
  dvmc_fn_RELEASE(L->f, acc);
  alloc_with_dim(L, acc, dt, u, ax, width);
  if (zero) {
    int k = dvmc_emit_kernel(L->e, "fill", DVM_DEVICE_CPU, 1, NULL, 0);
    dvmc_fn_INVOKE(L->f, k, -1, DVM_LIST(acc), DVM_NO_LIST, DVM_LIST(lw_emit_int(L, 0)));
  }
  dvmc_fn_set_target(L->f, to_put, dvmc_fn_here(L->f));
  copy_rows(L, acc, u, ax, at, lw_emit_int(L, 1));
  dvmc_fn_RELEASE(L->f, u);
}

/* Loop's scan outputs step, where the number of iterations is not known
 * before the loop (the condition may stop it before the trip count, which
 * may be "infinite"): scan[k] (its first `cap` rows along axis 0 in use up
 * to i) gets the body's val[k] at row i. When i reaches cap, every
 * accumulator moves to a new one of min(max(2 cap, 16), trips) rows, its
 * i rows copied: each row is copied O(1) times on average. */
static void loop_put_scans(lowering *L, int nscan, const int *val, const dvm_dtype *dt, const int *scan, int i,
                           int cap, int trips) {
  int u[64], fresh[64], zero = lw_emit_int(L, 0), one = lw_emit_int(L, 1);
  for (int k = 0; k < nscan; k++) u[k] = unsqueezed(L, val[k], 0);
  int full = dvmc_fn_reg(L->f), grown = dvmc_fn_reg(L->f);
  dvmc_fn_EQ(L->f, full, i, cap);
  uint32_t to_put = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, full, 0);
  dvmc_fn_ADD(L->f, grown, cap, cap);
  dvmc_fn_MAX(L->f, grown, grown, lw_emit_int(L, 16));
  dvmc_fn_MIN(L->f, grown, grown, trips);
  for (int k = 0; k < nscan; k++) alloc_with_dim(L, fresh[k] = dvmc_fn_reg(L->f), dt[k], u[k], zero, grown);
  uint32_t to_move = dvmc_fn_here(L->f); /* on iteration 0, the accumulators are placeholders */
  dvmc_fn_JZ(L->f, i, 0);
  for (int k = 0; k < nscan; k++) copy_rows(L, fresh[k], scan[k], zero, zero, i);
  dvmc_fn_set_target(L->f, to_move, dvmc_fn_here(L->f));
  for (int k = 0; k < nscan; k++) {
    dvmc_fn_MOVE(L->f, scan[k], fresh[k]);
    dvmc_fn_RELEASE(L->f, fresh[k]);
  }
  dvmc_fn_MOVE(L->f, cap, grown);
  dvmc_fn_set_target(L->f, to_put, dvmc_fn_here(L->f));
  for (int k = 0; k < nscan; k++) {
    copy_rows(L, scan[k], u[k], zero, i, one);
    dvmc_fn_RELEASE(L->f, u[k]);
  }
}

/* After the loop: each used accumulator scan[k] (used[k]) with more rows
 * than the i iterations filled (cap) is copied to exactly i rows. */
static void loop_trim_scans(lowering *L, int nscan, const int *used, const dvm_dtype *dt, const int *scan, int i,
                            int cap) {
  int more = dvmc_fn_reg(L->f), zero = lw_emit_int(L, 0);
  dvmc_fn_NE(L->f, more, cap, i);
  uint32_t to_done = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, more, 0);
  for (int k = 0; k < nscan; k++) {
    if (!used[k]) continue;
    int t = dvmc_fn_reg(L->f);
    alloc_with_dim(L, t, dt[k], scan[k], zero, i);
    copy_rows(L, t, scan[k], zero, zero, i);
    dvmc_fn_MOVE(L->f, scan[k], t);
    dvmc_fn_RELEASE(L->f, t);
  }
  dvmc_fn_set_target(L->f, to_done, dvmc_fn_here(L->f));
}

/* When no iteration ran (i == 0), each of the nscan accumulators scan[k]
 * whose output outs[k] is used becomes empty: the body value bouts[k]'s
 * dims with 0 inserted at axes[k] (NULL: all 0), its dtype, as ONNX
 * Runtime makes it (a dim that cannot be computed outside the body is 0;
 * an unknown rank gives [0] at axis 0, and fails otherwise). The shapes are
 * made before the branch, where the memo of top-level expressions stays
 * valid. */
dvm_status *lw_empty_scans(lowering *L, const dvmc_node *n, const dvmc_value *const *outs,
                           const dvmc_value *const *bouts, int nscan, const int *scan, const int *axes, int i) {
  int shapes[64], any = 0, zero = lw_emit_int(L, 0);
  for (int k = 0; k < nscan; k++) {
    const dvmc_value *bv = bouts[k];
    int axis = axes ? axes[k] : 0;
    shapes[k] = -1;
    if (!outs[k]) continue;
    if (!bv->typed) return lw_unsupported(n, "scan output \"%s\" has no known dtype", bv->name);
    if ((bv->rank < 0 && axis) || bv->rank >= DVM_MAX_RANK)
      return lw_unsupported(n, "scan output \"%s\" at axis %d has no known rank", bv->name, axis);
    int rank = bv->rank >= 0 ? bv->rank : 0;
    int64_t w[1 + DVM_MAX_RANK];
    for (int d = 0, j = 0; d <= rank; d++) {
      const dvmc_expr *e = d == axis ? NULL : bv->dims[j++];
      w[d] = e && lw_emittable(L, e) ? lw_expr_reg(L, e) : zero;
    }
    shapes[k] = dvmc_fn_reg(L->f);
    dvmc_fn_MAKE_SHAPE(L->f, shapes[k], (dvm_list){rank + 1, w});
    any = 1;
  }
  if (!any) return NULL;
  int none = dvmc_fn_reg(L->f);
  dvmc_fn_EQ(L->f, none, i, zero);
  uint32_t skip = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, none, 0);
  for (int k = 0; k < nscan; k++) {
    if (shapes[k] < 0) continue;
    dvmc_fn_RELEASE(L->f, scan[k]);
    dvmc_fn_ALLOC(L->f, scan[k], bouts[k]->dtype, shapes[k], DVM_DEVICE_CPU);
  }
  dvmc_fn_set_target(L->f, skip, dvmc_fn_here(L->f));
  for (int k = 0; k < nscan; k++)
    if (shapes[k] >= 0) dvmc_fn_RELEASE(L->f, shapes[k]);
  return NULL;
}

/* Loop: a counted and/or conditional loop in bytecode; loop-carried values
 * move from the body's outputs back to its inputs; scan outputs that
 * something reads (lw_scan_read) are written row by row into accumulators
 * that grow geometrically (loop_put_scans), cut to the iteration count
 * after the loop; the others are not kept. */
dvm_status *lw_lower_loop(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *ba = dvmc_attr_find(n, "body");
  if (!ba || ba->type != DVMC_ATTR_GRAPH) return lw_unsupported(n, "Loop needs a body graph");
  const dvmc_graph *body = ba->g;
  int ncarried = n->nin - 2;
  if (ncarried < 0 || body->ninputs != ncarried + 2 || body->noutputs < ncarried + 1)
    return lw_unsupported(n, "Loop body inputs/outputs do not match its %d loop-carried values", ncarried);
  int nscan = body->noutputs - 1 - ncarried;
  if (n->nout > ncarried + nscan)
    return lw_unsupported(n, "%d outputs for %d loop-carried values and %d scan outputs", n->nout, ncarried, nscan);
  for (int k = 0; k < ncarried; k++)
    if (!n->in[2 + k]) return lw_unsupported(n, "loop-carried input %d is omitted", k);
  for (int k = 0; k < n->nout; k++)
    if (!n->out[k] && k < ncarried) return lw_unsupported(n, "omitted loop-carried outputs are not supported");
  dvm_status *st;
  int sf = dvmc_emit_shapefn(L->e, "item");
  int trips = dvmc_fn_reg(L->f), cond = dvmc_fn_reg(L->f), i = dvmc_fn_reg(L->f), one = lw_emit_int(L, 1);
  int car[64], scan[64], wrap[64] = {0}, t;
  if (ncarried > 64 || nscan > 64) return lw_unsupported(n, "more than 64 loop-carried values or scan outputs");
  if (nscan) { /* scan accumulators start as empty tensors, replaced on iteration 0 */
    int empty = dvmc_fn_reg(L->f);
    dvmc_fn_MAKE_SHAPE(L->f, empty, DVM_LIST(lw_emit_int(L, 0)));
    for (int k = 0; k < nscan; k++)
      dvmc_fn_ALLOC(L->f, scan[k] = dvmc_fn_reg(L->f), DVM_F32, empty, DVM_DEVICE_CPU);
    dvmc_fn_RELEASE(L->f, empty);
  }
  if (n->in[0]) {
    if ((st = lw_reg_of(L, n->in[0], &t))) return st;
    dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(trips), DVM_LIST(t));
  } else {
    dvmc_fn_IMM(L->f, trips, INT64_MAX);
  }
  if (n->in[1]) {
    if ((st = lw_reg_of(L, n->in[1], &t))) return st;
    dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(cond), DVM_LIST(t));
  } else {
    dvmc_fn_IMM(L->f, cond, 1);
  }
  dvmc_fn_IMM(L->f, i, 0);
  int cap = dvmc_fn_reg(L->f); /* rows the scan accumulators have */
  dvmc_fn_IMM(L->f, cap, 0);
  for (int k = 0; k < ncarried; k++) {
    int reg;
    if ((st = lw_reg_of(L, n->in[2 + k], &reg))) return st;
    car[k] = dvmc_fn_reg(L->f);
    dvmc_fn_MOVE(L->f, car[k], reg);
  }
  uint32_t head = dvmc_fn_here(L->f);
  int go = dvmc_fn_reg(L->f);
  dvmc_fn_LT(L->f, go, i, trips);
  uint32_t exit1 = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, go, 0);
  uint32_t exit2 = dvmc_fn_here(L->f);
  dvmc_fn_JZ(L->f, cond, 0);
  /* the body's inputs: iteration number, condition, carried values */
  int it = lw_scalar_tensor(L, DVM_I64, i), ct = lw_scalar_tensor(L, DVM_BOOL, cond);
  if (!lw_bind(L, body->inputs[0], it) || !lw_bind(L, body->inputs[1], ct)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  lw_set_type(body->inputs[0], DVM_I64);
  lw_set_type(body->inputs[1], DVM_BOOL);
  for (int k = 0; k < ncarried; k++) {
    if (!lw_bind(L, body->inputs[2 + k], car[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    if (n->in[2 + k]->typed) lw_set_type(body->inputs[2 + k], n->in[2 + k]->dtype);
    lw_set_kind(body->inputs[2 + k], n->in[2 + k]->kind);
  }
  /* the body's outputs are made and moved inside the body too: depth > 0
   * until the loop's back edge */
  size_t scoped_at = L->nscoped;
  L->depth++;
  if ((st = lw_lower_graph(L, body))) return st;
  dvmc_fn_loc(L->f, n->name);
  int nc;
  if ((st = lw_reg_of(L, body->outputs[0], &nc))) return st;
  dvmc_fn_SHAPEFN(L->f, sf, DVM_LIST(cond), DVM_LIST(nc));
  int src[64], clash = 0; /* a body that passes carried values on swapped moves them through temporaries */
  for (int k = 0; k < ncarried; k++) {
    const dvmc_value *bo = body->outputs[1 + k];
    dvmc_kind ck = n->in[2 + k]->kind;
    if ((st = lw_reg_of(L, bo, &src[k]))) return st;
    /* an optional carried value the body makes a value of: held wrapped */
    wrap[k] = ck != bo->kind && dvmc_kind_is_optional(ck) && bo->kind == (ck == DVMC_OPT_SEQUENCE ? DVMC_SEQUENCE : DVMC_TENSOR);
    if (ck != bo->kind && !wrap[k])
      return lw_unsupported(n, "loop-carried value %d is %s %s, the body's output %s %s", k,
                            dvmc_kind_is_optional(ck) ? "an" : "a", dvmc_kind_name(ck),
                            dvmc_kind_is_optional(bo->kind) ? "an" : "a", dvmc_kind_name(bo->kind));
    if (body->outputs[1 + k]->typed && !n->out[k]->typed) lw_set_type(n->out[k], body->outputs[1 + k]->dtype);
    for (int j = 0; j < ncarried; j++) clash |= j != k && src[k] == car[j];
  }
  for (int k = 0; k < ncarried && clash; k++) {
    int tmp = dvmc_fn_reg(L->f);
    dvmc_fn_MOVE(L->f, tmp, src[k]);
    src[k] = tmp;
  }
  for (int k = 0; k < ncarried; k++) {
    if (wrap[k]) dvmc_fn_TUPLE(L->f, car[k], DVM_LIST(src[k]));
    else if (src[k] != car[k]) dvmc_fn_MOVE(L->f, car[k], src[k]);
    if (clash) dvmc_fn_RELEASE(L->f, src[k]);
  }
  /* only the scan outputs something reads are accumulated (put[] of them) */
  int val[64], used[64], nput = 0, pval[64], pscan[64];
  dvm_dtype sdt[64], pdt[64];
  for (int k = 0; k < nscan; k++) {
    const dvmc_value *v = body->outputs[1 + ncarried + k];
    if (v->kind != DVMC_TENSOR)
      return lw_unsupported(n, "scan output %d is a %s; scan outputs of tensors only are supported", k,
                            dvmc_kind_name(v->kind));
    if ((st = lw_reg_of(L, v, &val[k]))) return st;
    if (!v->typed) return lw_unsupported(n, "scan output \"%s\" has no known dtype", v->name);
    sdt[k] = v->dtype;
    used[k] = lw_scan_read(n, ncarried + k) != NULL;
    if (used[k]) pval[nput] = val[k], pdt[nput] = sdt[k], pscan[nput] = scan[k], nput++;
  }
  if (nput) loop_put_scans(L, nput, pval, pdt, pscan, i, cap, trips);
  for (int k = 0; k < body->noutputs; k++) { /* the body's outputs are the body's to drop */
    int reg = lw_lookup(L, body->outputs[k]);
    int is_car = 0;
    for (int c = 0; c < ncarried; c++) is_car |= reg == car[c];
    if (reg >= 0 && !is_car && lw_owns(body, body->outputs[k])) {
      dvmc_fn_RELEASE(L->f, reg);
      if (!lw_bind(L, body->outputs[k], -1)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    }
  }
  if (!lw_drop_scoped(L, scoped_at)) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  L->depth--;
  dvmc_fn_RELEASE(L->f, it);
  dvmc_fn_RELEASE(L->f, ct);
  dvmc_fn_ADD(L->f, i, i, one);
  dvmc_fn_JMP(L->f, head);
  dvmc_fn_set_target(L->f, exit1, dvmc_fn_here(L->f));
  dvmc_fn_set_target(L->f, exit2, dvmc_fn_here(L->f));
  for (int k = 0; k < n->nout && k < ncarried; k++) {
    if (n->in[2 + k] && n->in[2 + k]->typed && !n->out[k]->typed) lw_set_type(n->out[k], n->in[2 + k]->dtype);
    lw_set_kind(n->out[k], n->in[2 + k]->kind);
    if (wrap[k]) { /* the body's kind: what the optional holds, which it must */
      char msg[512];
      snprintf(msg, sizeof msg, "node \"%s\" (Loop): loop-carried value %d is an empty optional after the loop", n->name, k);
      int len = dvmc_fn_reg(L->f);
      dvmc_fn_LEN(L->f, len, car[k]);
      dvmc_fn_CHECK(L->f, len, dvmc_emit_string(L->e, msg));
      dvmc_fn_RELEASE(L->f, len);
      dvmc_fn_GET(L->f, car[k], car[k], 0);
      lw_set_kind(n->out[k], body->outputs[1 + k]->kind);
    }
    if (!lw_bind(L, n->out[k], car[k])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  if (nscan) loop_trim_scans(L, nscan, used, sdt, scan, i, cap);
  const dvmc_value *outs[64] = {0};
  for (int k = 0; k < nscan; k++) outs[k] = lw_scan_read(n, ncarried + k);
  if ((st = lw_empty_scans(L, n, outs, (const dvmc_value *const *)body->outputs + 1 + ncarried, nscan, scan, NULL, i)))
    return st;
  for (int k = 0; k < nscan; k++) { /* an output nothing reads is left unbound, its placeholder released */
    const dvmc_value *o = outs[k];
    if (o) lw_set_type(o, body->outputs[1 + ncarried + k]->dtype);
    if (o ? !lw_bind(L, o, scan[k]) : 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    if (!o) dvmc_fn_RELEASE(L->f, scan[k]);
  }
  (void)r;
  return NULL;
}

