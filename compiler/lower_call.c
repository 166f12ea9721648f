/* The generic lowering: a node's inputs and attributes (the op table's
 * ATTRS spec) become one kernel call, with its output shapes (from
 * inference, or the kernel's shape function at run time) and allocations. */
#include <stdlib.h>
#include <string.h>

#include "lowering.h"
#include "ops.h"
#include "ops/optable.h"
/* One attribute from the rule's spec: SOURCES:K, SOURCES:K=DEFAULT or
 * SOURCES:K? (optional: left out when absent; optional ones come last).
 * SOURCES is an ONNX attribute name, NAME[I] (element I of a list of
 * floats, absent when the list is shorter), @N (constant input N), or several
 * separated by | (the first present wins: attributes moved to inputs in
 * later opsets). K is i (int), f (float), s (ints as a shape) or
 * e(a,b,c) (a string, as its index in the list). Returns the register, -1
 * when an optional attribute is absent, -2 with *st set on error. */
int lw_lower_attr(lowering *L, const dvmc_node *n, const char *spec, size_t len, dvm_status **st) {
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
  double elem = 0;
  bool has_elem = false;
  for (char *src = strtok(buf, "|"); src && !a && !in && !has_elem; src = strtok(NULL, "|")) {
    char *bracket = strchr(src, '[');
    if (src[0] == '@') {
      idx = atoi(src + 1);
      in = idx < n->nin ? n->in[idx] : NULL;
    } else if (bracket) {
      int at = atoi(bracket + 1);
      *bracket = 0;
      const dvmc_attr *list = dvmc_attr_find(n, src);
      if (list && list->type != DVMC_ATTR_FLOATS) {
        *st = lw_unsupported(n, "attribute \"%s\" must be a list of floats", list->name);
        return -2;
      }
      if (list && at < list->n) elem = list->floats[at], has_elem = true;
    } else {
      a = dvmc_attr_find(n, src);
    }
  }
  if (has_elem) {
    if (kind != 'f') {
      *st = dvm_status_new(DVM_INTERNAL, "bad attribute spec %s", spec);
      return -2;
    }
    return lw_emit_float(L, elem);
  }
  if (!a && !in && optional) return -1;
  if (in && !in->constant) { /* computed at run time: read on the host */
    int t, r = dvmc_fn_reg(L->f);
    if ((*st = lw_reg_of(L, in, &t))) return -2;
    const char *fn = kind == 'f' ? "itemf" : kind == 's' ? "ints" : kind == 'i' ? "item" : NULL;
    if (!fn) {
      *st = lw_unsupported(n, "input %d (\"%s\") must be a constant here", idx, in->name);
      return -2;
    }
    dvmc_fn_SHAPEFN(L->f, dvmc_emit_shapefn(L->e, fn), DVM_LIST(r), DVM_LIST(t));
    return r;
  }
  switch (kind) {
  case 'i': {
    int64_t v = eq ? strtoll(eq, NULL, 0) : 0;
    if (a && a->type != DVMC_ATTR_INT) {
      *st = lw_unsupported(n, "attribute \"%s\" must be an int", a->name);
      return -2;
    }
    if (a && a->type == DVMC_ATTR_INT) v = a->i;
    else if (in && in->constant && in->constant->dtype == DVM_BOOL && in->constant->nbytes == 1)
      v = *(const uint8_t *)in->constant->data; /* a condition: Dropout's training_mode */
    else if (in && lw_const_ints(in, &v, 1) != 1) {
      *st = lw_unsupported(n, "input %d must be a one-element integer", idx);
      return -2;
    }
    return lw_emit_int(L, v);
  }
  case 'f': {
    double v = eq ? strtod(eq, NULL) : 0;
    if (a && a->type != DVMC_ATTR_FLOAT && a->type != DVMC_ATTR_INT) {
      *st = lw_unsupported(n, "attribute \"%s\" must be a number", a->name);
      return -2;
    }
    if (a && a->type == DVMC_ATTR_FLOAT) v = a->f;
    else if (a && a->type == DVMC_ATTR_INT) v = (double)a->i;
    else if (in && !lw_const_float(in, &v)) {
      *st = lw_unsupported(n, "input %d must be a one-element number", idx);
      return -2;
    }
    return lw_emit_float(L, v);
  }
  case 's': {
    int64_t v[DVM_MAX_RANK];
    int k = 0;
    if (a) {
      if (a->type != DVMC_ATTR_INTS || a->n > DVM_MAX_RANK) {
        *st = lw_unsupported(n, "attribute \"%s\" must be a list of at most %d ints", a->name, DVM_MAX_RANK);
        return -2;
      }
      k = a->n;
      if (k) memcpy(v, a->ints, sizeof(int64_t) * (size_t)k);
    } else if (in && (k = lw_const_ints(in, v, DVM_MAX_RANK)) < 0) {
      *st = lw_unsupported(n, "input %d must be a constant list of at most %d integers", idx, DVM_MAX_RANK);
      return -2;
    }
    return lw_emit_shape(L, k, v);
  }
  case 'e': { /* e(a,b,c) */
    const char *want = a && a->type == DVMC_ATTR_STRING ? a->s : eq;
    int i = 0;
    for (const char *p = colon + 2; *p && *p != ')'; i++) {
      size_t l = strcspn(p, ",)");
      if (want && strlen(want) == l && !strncmp(p, want, l)) return lw_emit_int(L, i);
      p += l + (p[l] == ',');
    }
    *st = lw_unsupported(n, "attribute \"%s\" = \"%s\" is not supported", a ? a->name : "?", want ? want : "");
    return -2;
  }
  default: *st = dvm_status_new(DVM_INTERNAL, "bad attribute spec %s", spec); return -2;
  }
}

/* The dtype of output i, by the op table's rule (ops.c). */
static dvm_status *out_dtype(const dvmc_node *n, int i, dvm_dtype *out) {
  bool known;
  dvm_status *st = dvmc_op_out_dtype(n, i, out, &known);
  return st ? st : known ? NULL : lw_unsupported(n, "cannot tell the dtype of output %d", i);
}

/* Lowering decides dtypes as it goes: later nodes read them. */
void lw_set_type(const dvmc_value *v, dvm_dtype dt) {
  dvmc_value *w = (dvmc_value *)v;
  w->typed = true;
  w->dtype = dt;
}

/* The node's inputs that go to the kernel (the rule's count; trailing
 * omitted ones dropped). */
dvm_status *lw_call_inputs(lowering *L, const dvmc_node *n, const op_rule *r, call *c) {
  int nin = r->nin < 0 ? n->nin : (r->nin < n->nin ? r->nin : n->nin);
  while (nin > 0 && !n->in[nin - 1]) nin--;
  if (nin > 64) return lw_unsupported(n, "more than 64 inputs");
  for (int i = 0; i < nin; i++) {
    int reg;
    dvm_status *st;
    if (!n->in[i]) return lw_unsupported(n, "omitted optional input %d before a present one", i);
    if ((st = lw_reg_of(L, n->in[i], &reg))) return st;
    c->ins[i] = reg;
  }
  c->nin = nin;
  c->kernel = r->kernel;
  return NULL;
}

/* The node's given inputs into c, omitted ones left out, then the
 * kernel's `present` attribute: `present` with a bit for each given input
 * from `first` on (bit i) and each wanted output (bit 8 + j). For kernels
 * whose optional inputs and outputs may be omitted anywhere (RNN, GRU,
 * LSTM, sdpa). */
dvm_status *lw_call_present(lowering *L, const dvmc_node *n, int first, int present, call *c) {
  for (int i = 0; i < n->nin; i++) {
    int reg;
    if (!n->in[i]) continue;
    dvm_status *st = lw_reg_of(L, n->in[i], &reg);
    if (st) return st;
    c->ins[c->nin++] = reg;
    if (i >= first) present |= 1 << i;
  }
  for (int j = 0; j < n->nout; j++)
    if (n->out[j]) present |= 1 << (8 + j);
  c->attrs[c->nattrs++] = lw_emit_int(L, present);
  return NULL;
}

/* The attributes of the rule's spec, in order; `pads_reg` (when >= 0)
 * stands for the "pads" attribute. */
dvm_status *lw_call_attrs(lowering *L, const dvmc_node *n, const char *spec, int pads_reg, call *c) {
  dvm_status *st = NULL;
  for (const char *p = spec ? spec : ""; *p;) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, " ");
    if (!len) break;
    int reg = pads_reg >= 0 && !strncmp(p, "pads:", 5) ? pads_reg : lw_lower_attr(L, n, p, len, &st);
    if (reg == -2) return st;
    if (reg >= 0) {
      if (c->nattrs == 32) return lw_unsupported(n, "more than 32 attributes");
      c->attrs[c->nattrs++] = reg;
    }
    p += len;
  }
  return NULL;
}

/* Shape function sf on c's inputs and attributes, into registers dsts. */
static void call_shapefn(lowering *L, int sf, int ndsts, const int64_t *dsts, const call *c) {
  int64_t args[64 + 32];
  memcpy(args, c->ins, sizeof(int64_t) * (size_t)c->nin);
  memcpy(args + c->nin, c->attrs, sizeof(int64_t) * (size_t)c->nattrs);
  dvmc_fn_SHAPEFN(L->f, sf, (dvm_list){ndsts, dsts}, (dvm_list){c->nin + c->nattrs, args});
}

/* Output shapes (the kernel's shape function, or input 0's shape),
 * allocation, the kernel call; attribute registers released after. */
/* The invoke of c's CPU kernel (with payload) into registers outs, then
 * the release of its attribute registers. */
static void emit_invoke(lowering *L, const call *c, const void *payload, size_t payload_size, int nout,
                        const int64_t *outs) {
  dvmc_fn_INVOKE(L->f, dvmc_emit_kernel(L->e, c->kernel, DVM_DEVICE_CPU, 1, payload, payload_size), -1,
                 (dvm_list){nout, outs}, (dvm_list){c->nin, c->ins}, (dvm_list){c->nattrs, c->attrs});
  for (int i = 0; i < c->nattrs; i++) dvmc_fn_RELEASE(L->f, c->attrs[i]);
}

dvm_status *lw_emit_call(lowering *L, const dvmc_node *n, const op_rule *r, const call *c) {
  char base[64];
  const dvm_kernel_def *k = dvm_ops_find_entry(c->kernel, DVM_DEVICE_CPU, base);
  if (!k) return lw_unsupported(n, "kernel \"%s\" is not in this dvm", base);
  const dvmc_value *in0 = n->nin ? n->in[0] : NULL;
  if (k->dtypes && in0 && in0->typed && !(k->dtypes & DVM_DTYPE_BIT(in0->dtype))) {
    char list[128] = "";
    for (int d = 0; d < DVM_DTYPE_COUNT; d++)
      if (k->dtypes & DVM_DTYPE_BIT(d))
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", dvm_dtype_name((dvm_dtype)d));
    return lw_unsupported(n, "dtype %s is not supported (kernel %s takes %s)", dvm_dtype_name(in0->dtype), base, list);
  }
  for (int i = 0; i < c->nin && !k->strings; i++)
    if (n->in[i] && n->in[i]->typed && n->in[i]->dtype == DVM_STRING)
      return lw_unsupported(n, "string tensors are not supported (input %d; kernel %s)", i, base);
  int nout = n->nout;
  while (nout > 0 && !n->out[nout - 1]) nout--; /* trailing omitted optional outputs */
  for (int i = 0; i < nout; i++)
    if (!n->out[i]) return lw_unsupported(n, "omitted output %d before a present one", i);
  if (!nout || nout > 16) return lw_unsupported(n, "%d outputs", nout);
  int64_t outs[16], shapes[16];
  int known = 1;
  dvm_status *st;
  for (int i = 0; i < nout; i++)
    known &= dvmc_value_shape_known(n->out[i]) && lw_all_emittable(L, n->out[i]->rank, n->out[i]->dims);
  if (known) { /* inference knows the shapes: arithmetic, no shape function */
    for (int i = 0; i < nout; i++) shapes[i] = lw_shape_of_exprs(L, n->out[i]->rank, n->out[i]->dims);
  } else if (k->shapefn) {
    int sf = dvmc_emit_shapefn(L->e, k->shapefn);
    for (int i = 0; i < nout; i++) shapes[i] = dvmc_fn_reg(L->f);
    call_shapefn(L, sf, nout, shapes, c);
  } else {
    if (!c->nin) return lw_unsupported(n, "kernel \"%s\" has no shape function and no input", base);
    for (int i = 0; i < nout; i++) dvmc_fn_SHAPE_OF(L->f, shapes[i] = dvmc_fn_reg(L->f), c->ins[0]);
  }
  for (int i = 0; i < nout; i++) {
    dvm_dtype dt = DVM_I64;
    if (!(c->label_index && i == 0) && (st = out_dtype(n, i, &dt))) return st;
    if (dt == DVM_STRING && !k->strings)
      return lw_unsupported(n, "string tensors are not supported (output %d; kernel %s)", i, base);
    outs[i] = dvmc_fn_reg(L->f);
    lw_set_type(n->out[i], dt);
    lw_emit_alloc(L, (int)outs[i], dt, (int)shapes[i], n->out[i]->rank, known ? n->out[i]->dims : NULL);
    dvmc_fn_RELEASE(L->f, shapes[i]);
    if (!lw_bind(L, n->out[i], (int)outs[i])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  emit_invoke(L, c, c->payload, c->payload_size, nout, outs);
  return NULL;
}

/* A call whose kernel always gets nfixed (at most 8) outputs of dtype dt:
 * an output the node omits is an empty tensor, released after the call.
 * Shapes from inference, or the shape function `shapefn` on the call's
 * inputs and attributes. */
dvm_status *lw_emit_call_fixed(lowering *L, const dvmc_node *n, call *c, int nfixed, const char *shapefn, dvm_dtype dt) {
  if (nfixed > 8 || n->nout > nfixed) return lw_unsupported(n, "%d outputs, at most %d", n->nout, nfixed);
  /* output shapes: inference's, or the shape function on the call's arguments */
  int64_t shapes[8], outs[8];
  int known = 1;
  for (int j = 0; j < n->nout; j++)
    if (n->out[j])
      known &= dvmc_value_shape_known(n->out[j]) && lw_all_emittable(L, n->out[j]->rank, n->out[j]->dims);
  if (known) {
    for (int j = 0; j < nfixed; j++)
      shapes[j] = j < n->nout && n->out[j] ? lw_shape_of_exprs(L, n->out[j]->rank, n->out[j]->dims) : -1;
  } else {
    int sf = dvmc_emit_shapefn(L->e, shapefn);
    for (int j = 0; j < nfixed; j++) shapes[j] = dvmc_fn_reg(L->f);
    call_shapefn(L, sf, nfixed, shapes, c);
  }
  for (int j = 0; j < nfixed; j++) {
    const dvmc_value *o = j < n->nout ? n->out[j] : NULL;
    outs[j] = dvmc_fn_reg(L->f);
    if (shapes[j] >= 0 && !o) dvmc_fn_RELEASE(L->f, shapes[j]);
    if (!o) { /* not wanted: an empty tensor */
      int64_t zero = 0;
      int sh = lw_emit_shape(L, 1, &zero);
      lw_emit_alloc(L, (int)outs[j], dt, sh, 1, (const dvmc_expr *[]){dvmc_const(L->c->exprs, 0)});
      dvmc_fn_RELEASE(L->f, sh);
      continue;
    }
    lw_set_type(o, dt);
    lw_emit_alloc(L, (int)outs[j], dt, (int)shapes[j], o->rank, known ? o->dims : NULL);
    dvmc_fn_RELEASE(L->f, shapes[j]);
    if (!lw_bind(L, o, (int)outs[j])) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  emit_invoke(L, c, NULL, 0, nfixed, outs);
  for (int j = 0; j < nfixed; j++)
    if (j >= n->nout || !n->out[j]) dvmc_fn_RELEASE(L->f, outs[j]);
  return NULL;
}

/* The generic lowering: the rule's inputs and attributes, then the call. */
dvm_status *lw_lower_kernel(lowering *L, const dvmc_node *n, const op_rule *r) {
  call c = {0};
  dvm_status *st;
  if ((st = lw_call_inputs(L, n, r, &c)) || (st = lw_call_attrs(L, n, r->attrs, -1, &c))) return st;
  return lw_emit_call(L, n, r, &c);
}

/* Values no model may give, refused by node and attribute before anything
 * is emitted (ONNX Runtime refuses them too): window attributes of the
 * convolutions and pools, and an output dim inference found negative (a
 * window larger than its padded input). */
dvm_status *lw_check_values(const dvmc_node *n) {
  static const struct {
    const char *name;
    int64_t min;
  } least[] = {{"pads", 0}, {"output_padding", 0}, {"strides", 1}, {"dilations", 1}, {"kernel_shape", 1}, {"group", 1}};
  int window = !strcmp(n->op, "Conv") || !strcmp(n->op, "FusedConv") || !strcmp(n->op, "ConvTranspose") ||
               !strcmp(n->op, "MaxPool") || !strcmp(n->op, "MaxPoolNhwc") ||
               !strcmp(n->op, "AveragePool");
  for (int i = 0; window && i < n->nattrs; i++) {
    const dvmc_attr *a = &n->attrs[i];
    for (size_t k = 0; k < sizeof least / sizeof least[0]; k++) {
      if (strcmp(a->name, least[k].name)) continue;
      if (a->type == DVMC_ATTR_INT && a->i < least[k].min)
        return lw_invalid(n, "attribute %s = %lld must be >= %lld", a->name, (long long)a->i, (long long)least[k].min);
      for (int j = 0; a->type == DVMC_ATTR_INTS && j < a->n; j++)
        if (a->ints[j] < least[k].min)
          return lw_invalid(n, "attribute %s[%d] = %lld must be >= %lld", a->name, j, (long long)a->ints[j],
                         (long long)least[k].min);
    }
  }
  for (int k = 0; k < n->nout; k++)
    for (int d = 0; n->out[k] && d < n->out[k]->rank; d++) {
      int64_t v;
      if (n->out[k]->dims[d] && dvmc_expr_is_const(n->out[k]->dims[d], &v) && v < 0)
        return lw_invalid(n, "output \"%s\" dim %d would be %lld: the attributes do not fit the input's shape",
                       n->out[k]->name, d, (long long)v);
    }
  return NULL;
}

