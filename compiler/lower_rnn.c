/* RNN, GRU and LSTM: one call of the rnn family's kernel for the whole
 * sequence (ops/cpu/rnn.c; docs/performance.md says why not a bytecode loop
 * of per-step kernels). */
#include <string.h>
#include <strings.h>

#include "lowering.h"
#include "ops/cpu/rnn.h"

/* RNN, GRU, LSTM's activations as the rnn kernels take them (ops/cpu/rnn.c):
 * kind, alpha, beta per function and direction. An alpha or beta is read
 * from the lists by the functions that take one, in order, as ONNX Runtime
 * does; a function without one gets its ONNX op's default. */
static dvm_status *rnn_acts(lowering *L, const dvmc_node *n, int nact, int dirs, call *c) {
  static const char *const dflt[] = {"Sigmoid", "Tanh", "Tanh"};
  static const struct {
    int kind, has_alpha, has_beta;
    float alpha, beta;
  } spec[] = {
      {DVM_RNN_AFFINE, 1, 1, 1.0f, 0.0f},     {DVM_RNN_LEAKYRELU, 1, 0, 0.01f, 0},
      {DVM_RNN_THRESHOLDEDRELU, 1, 0, 1.0f, 0}, {DVM_RNN_SCALEDTANH, 1, 1, 1.0f, 1.0f},
      {DVM_RNN_HARDSIGMOID, 1, 1, 0.2f, 0.5f}, {DVM_RNN_ELU, 1, 0, 1.0f, 0},
  };
  const dvmc_attr *names = dvmc_attr_find(n, "activations"), *al = dvmc_attr_find(n, "activation_alpha"),
                  *be = dvmc_attr_find(n, "activation_beta");
  if ((names && names->type != DVMC_ATTR_STRINGS) || (al && al->type != DVMC_ATTR_FLOATS) ||
      (be && be->type != DVMC_ATTR_FLOATS))
    return lw_unsupported(n, "activations must be strings, activation_alpha and activation_beta floats");
  int given = names ? names->n : 0, ia = 0, ib = 0;
  if (given && given != nact && given != nact * dirs)
    return lw_unsupported(n, "%d activations, want %d per direction", given, nact);
  for (int i = 0; i < nact * dirs; i++) {
    const char *name = given ? names->strings[i % given] : n->op[0] == 'R' ? "Tanh" : dflt[i % nact];
    int kind = -1;
    float alpha = 0, beta = 0;
    for (int k = 0; k < DVM_RNN_ACT_COUNT && kind < 0; k++)
      if (!strcasecmp(name, dvm_rnn_act_names[k])) kind = k;
    if (kind < 0) return lw_unsupported(n, "activation \"%s\" is not supported", name);
    for (size_t k = 0; k < sizeof spec / sizeof spec[0]; k++) {
      if (spec[k].kind != kind) continue;
      alpha = spec[k].has_alpha && al && ia < al->n ? (float)al->floats[ia++] : spec[k].alpha;
      beta = spec[k].has_beta && be && ib < be->n ? (float)be->floats[ib++] : spec[k].beta;
    }
    c->attrs[c->nattrs++] = lw_emit_int(L, kind);
    c->attrs[c->nattrs++] = lw_emit_float(L, alpha);
    c->attrs[c->nattrs++] = lw_emit_float(L, beta);
  }
  return NULL;
}

/* RNN, GRU, LSTM: one kernel call for the whole sequence (ops/cpu/rnn.c).
 * Omitted inputs are left out and named by the `present` attribute;
 * omitted outputs are given as empty tensors the kernel leaves alone.
 * com.microsoft DynamicQuantizeLSTM is LSTM's call with its four scale and
 * zero point inputs after the others, and W and R [dirs, k, 4 hidden]. */
dvm_status *lw_lower_rnn(lowering *L, const dvmc_node *n, const op_rule *r) {
  int quant = !strcmp(n->op, "DynamicQuantizeLSTM");
  int lstm = quant || !strcmp(n->op, "LSTM"), gru = !strcmp(n->op, "GRU"), nout = lstm ? 3 : 2;
  int nact = lstm ? 3 : gru ? 2 : 1, maxin = lstm ? 8 : 6, present = 0;
  const char *dir = dvmc_attr_string(n, "direction", "forward");
  int dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
  call c = {.kernel = r->kernel};
  dvm_status *st = NULL;
  dvmc_node head = *n; /* DynamicQuantizeLSTM: its LSTM inputs */
  if (quant) {
    if (n->nin != 12) return lw_unsupported(n, "needs 12 inputs (the scales and zero points last), got %d", n->nin);
    for (int i = 8; i < 12; i++)
      if (!n->in[i]) return lw_unsupported(n, "input %d (a weight's scale or zero point) is omitted", i);
    head.nin = 8;
  }
  if (head.nin < 3 || head.nin > maxin || !n->in[0] || !n->in[1] || !n->in[2])
    return lw_unsupported(n, "X, W and R are needed, and at most %d inputs", maxin);
  if (n->nout > nout) return lw_unsupported(n, "%d outputs, at most %d", n->nout, nout);
  /* f16 comes here as f32 (lw_via_f32); f64: ONNX Runtime (1.32) has no f64
   * RNN and its GRU and LSTM refuse f64 when run */
  if (!lw_is_f32(n->in[0]))
    return lw_unsupported(n, "dtype %s is not supported (f32%s only)",
                          n->in[0]->typed ? dvm_dtype_name(n->in[0]->dtype) : "unknown", quant ? "" : " and f16");
  const dvmc_value *rv = n->in[2];
  int64_t hs = dvmc_attr_int(n, "hidden_size", -1), rh;
  if (hs >= 0 && rv->rank == 3 && rv->dims[quant ? 1 : 2] && dvmc_expr_is_const(rv->dims[quant ? 1 : 2], &rh) && rh != hs)
    return lw_invalid(n, "hidden_size %lld but R's hidden dim is %lld", (long long)hs, (long long)rh);
  if ((st = lw_call_present(L, &head, 3, present, &c))) return st;
  for (int i = 8; quant && i < 12; i++) {
    int reg;
    if ((st = lw_reg_of(L, n->in[i], &reg))) return st;
    c.ins[c.nin++] = reg;
  }
  const char *specs[] = {"direction:e(forward,reverse,bidirectional)=forward", "layout:i=0", "clip:f=0",
                         lstm ? "input_forget:i=0" : gru ? "linear_before_reset:i=0" : "none:i=0"};
  for (int i = 0; i < 4; i++) {
    int reg = lw_lower_attr(L, n, specs[i], strlen(specs[i]), &st);
    if (reg < 0) return st;
    c.attrs[c.nattrs++] = reg;
  }
  if ((st = rnn_acts(L, n, nact, dirs, &c))) return st;
  /* output shapes: inference's, or the shape function on X, W, R */
  int64_t shapes[3], outs[3];
  int known = 1;
  for (int j = 0; j < n->nout; j++)
    if (n->out[j])
      known &= dvmc_value_shape_known(n->out[j]) && lw_all_emittable(L, n->out[j]->rank, n->out[j]->dims);
  if (known) {
    for (int j = 0; j < nout; j++)
      shapes[j] = j < n->nout && n->out[j] ? lw_shape_of_exprs(L, n->out[j]->rank, n->out[j]->dims) : -1;
  } else {
    int sf = dvmc_emit_shapefn(L->e, quant ? "qlstm" : "rnn");
    for (int j = 0; j < nout; j++) shapes[j] = dvmc_fn_reg(L->f);
    dvmc_fn_SHAPEFN(L->f, sf, (dvm_list){nout, shapes}, DVM_LIST(c.ins[0], c.ins[1], c.ins[2], c.attrs[2] /* layout */));
  }
  for (int j = 0; j < nout; j++) {
    const dvmc_value *o = j < n->nout ? n->out[j] : NULL;
    outs[j] = dvmc_fn_reg(L->f);
    if (!o) { /* not wanted: an empty tensor */
      if (shapes[j] >= 0) dvmc_fn_RELEASE(L->f, shapes[j]);
      int64_t zero = 0;
      int sh = lw_emit_shape(L, 1, &zero);
      lw_emit_alloc(L, (int)outs[j], DVM_F32, sh, 1, (const dvmc_expr *[]){dvmc_const(L->c->exprs, 0)});
      dvmc_fn_RELEASE(L->f, sh);
      continue;
    }
    lw_set_type(o, DVM_F32);
    lw_emit_alloc(L, (int)outs[j], DVM_F32, (int)shapes[j], o->rank, known ? o->dims : NULL);
    dvmc_fn_RELEASE(L->f, shapes[j]);
    if (!lw_bind(L, o, (int)outs[j])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  dvmc_fn_INVOKE(L->f, dvmc_emit_kernel(L->e, c.kernel, DVM_DEVICE_CPU, 1, NULL, 0), -1, (dvm_list){nout, outs},
                 (dvm_list){c.nin, c.ins}, (dvm_list){c.nattrs, c.attrs});
  for (int i = 0; i < c.nattrs; i++) dvmc_fn_RELEASE(L->f, c.attrs[i]);
  for (int j = 0; j < nout; j++)
    if (j >= n->nout || !n->out[j]) dvmc_fn_RELEASE(L->f, outs[j]);
  return NULL;
}
