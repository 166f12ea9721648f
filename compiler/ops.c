/* The op table as data (ops.h), and the output dtype rules. */
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "ops.h"
#include "ops/cpu/fused.h"

#define DVM_FUSED__ (-1)
#define PRESENT(x) (sizeof #x > 2) /* a column other than _ */

static const dvmc_op table[] = {
#define OP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) \
  {"", #name, kernel, attrs, dtype, nin, opset, DVM_FUSED_##fused, PRESENT(shape), PRESENT(lower)},
#define MSOP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) \
  {"com.microsoft", #name, kernel, attrs, dtype, nin, opset, DVM_FUSED_##fused, PRESENT(shape), PRESENT(lower)},
#define MLOP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) \
  {"ai.onnx.ml", #name, kernel, attrs, dtype, nin, opset, DVM_FUSED_##fused, PRESENT(shape), PRESENT(lower)},
#define DVMOP(name, kernel, dtype, nin, lower, shape, opset, fused, attrs) \
  {"dvm", #name, kernel, attrs, dtype, nin, opset, DVM_FUSED_##fused, PRESENT(shape), PRESENT(lower)},
#include "ops.def"
#undef DVMOP
#undef MLOP
#undef MSOP
#undef OP
};

int dvmc_op_count(void) { return (int)(sizeof table / sizeof table[0]); }
const dvmc_op *dvmc_op_at(int i) { return &table[i]; }

void dvmc_op_describe(int i, dvmc_op_info *out) {
  const dvmc_op *op = &table[i];
  *out = (dvmc_op_info){op->domain, op->name, op->kernel, op->dtype, op->min_opset, op->shape_rule, op->fused >= 0};
}

/* A linear scan: once per node at import. */
const dvmc_op *dvmc_op_find(const char *domain, const char *name) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(table[i].name, name) && !strcmp(table[i].domain, domain)) return &table[i];
  return NULL;
}

/* The rule's field for output i: fields are comma-separated, the last
 * repeats. */
static void field(const char *rule, int i, char out[16]) {
  const char *p = rule ? rule : "";
  for (int k = 0;; k++) {
    size_t l = strcspn(p, ",");
    if (k == i || !p[l]) {
      snprintf(out, 16, "%.*s", (int)l, p);
      return;
    }
    p += l + 1;
  }
}

/* Output i of an If (either branch), a Loop (its body's output i + 1,
 * or for a loop-carried value its initial value), a Scan (its body's
 * output i, or for a state its initial value) or a SequenceMap (its body's
 * output i). */
static const dvmc_value *body_source(const dvmc_node *n, int i) {
  if (!strcmp(n->op, "If")) {
    for (int a = 0; a < n->nattrs; a++) {
      const dvmc_graph *g = n->attrs[a].type == DVMC_ATTR_GRAPH ? n->attrs[a].g : NULL;
      if (g && i < g->noutputs && g->outputs[i] && g->outputs[i]->typed) return g->outputs[i];
    }
    return NULL;
  }
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  const dvmc_graph *g = b && b->type == DVMC_ATTR_GRAPH ? b->g : NULL;
  if (!strcmp(n->op, "Scan")) {
    int first = n->opset < 9, states = n->nin - first - (int)dvmc_attr_int(n, "num_scan_inputs", 0);
    if (g && i < g->noutputs && g->outputs[i] && g->outputs[i]->typed) return g->outputs[i];
    return i < states && first + i < n->nin ? n->in[first + i] : NULL;
  }
  if (!strcmp(n->op, "SequenceMap")) /* its outputs are sequences of the body's */
    return g && i < g->noutputs && g->outputs[i] && g->outputs[i]->typed ? g->outputs[i] : NULL;
  if (g && i + 1 < g->noutputs && g->outputs[i + 1] && g->outputs[i + 1]->typed) return g->outputs[i + 1];
  return i + 2 < n->nin ? n->in[i + 2] : NULL;
}

dvmc_kind dvmc_op_out_kind(const dvmc_node *n, int i) {
  static const char *const sequences[] = {"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
                                          "SplitToSequence", "SequenceMap"};
  const dvmc_value *x = n->nin ? n->in[0] : NULL;
  if (!strcmp(n->op, "ZipMap")) return DVMC_SEQUENCE; /* of maps: the tuple (labels, probabilities) */
  if (n->domain[0]) return DVMC_TENSOR;
  for (size_t k = 0; k < sizeof sequences / sizeof *sequences; k++)
    if (!strcmp(n->op, sequences[k])) return DVMC_SEQUENCE;
  if (!strcmp(n->op, "Optional")) {
    const dvmc_attr *t = dvmc_attr_find(n, "type");
    dvmc_kind of = x ? x->kind : t && t->type == DVMC_ATTR_TYPE && t->type_of ? t->type_of->kind : DVMC_TENSOR;
    return of == DVMC_SEQUENCE ? DVMC_OPT_SEQUENCE : DVMC_OPT_TENSOR;
  }
  if (!strcmp(n->op, "OptionalGetElement"))
    return !x || x->kind == DVMC_OPT_TENSOR ? DVMC_TENSOR : x->kind == DVMC_OPT_SEQUENCE ? DVMC_SEQUENCE : x->kind;
  if (!strcmp(n->op, "Identity")) return x ? x->kind : DVMC_TENSOR;
  if (!strcmp(n->op, "If") || !strcmp(n->op, "Loop")) {
    const dvmc_value *src = body_source(n, i);
    return src ? src->kind : DVMC_TENSOR;
  }
  return DVMC_TENSOR;
}

dvm_status *dvmc_op_out_dtype(const dvmc_node *n, int i, dvm_dtype *out, bool *known) {
  char f[16];
  *known = true;
  field(n->def ? n->def->dtype : NULL, i, f);
  char *bar = strchr(f, '|'); /* "inN|DT" or "dtype|DT": input N's dtype or the
                                 dtype attribute's, DT when that is absent */
  if (bar) {
    *bar = 0;
    int k = atoi(f + 2);
    if (!strcmp(f, "dtype") ? !dvmc_attr_find(n, "dtype") : k >= n->nin || !n->in[k])
      memmove(f, bar + 1, strlen(bar + 1) + 1);
  }
  for (int d = 0; d < DVM_DTYPE_COUNT; d++)
    if (!strcmp(f, dvm_dtype_name((dvm_dtype)d))) {
      *out = (dvm_dtype)d;
      return NULL;
    }
  if (!strcmp(f, "dtype") && !dvmc_attr_find(n, "dtype")) strcpy(f, "in0"); /* EyeLike, the *Like ops */
  if (!strcmp(f, "to") || !strcmp(f, "dtype")) {
    int64_t to = dvmc_attr_int(n, f, 0);
    if (dvmc_onnx_dtype(to, out)) return NULL;
    return dvm_status_new(DVM_UNIMPLEMENTED, "node \"%s\" (%s, opset %d): cast to ONNX type %lld is not supported",
                          n->name, n->op, n->opset, (long long)to);
  }
  if (!strcmp(f, "map")) {
    *out = dvmc_ml_map_dtype(n, known);
    return NULL;
  }
  if (!strcmp(f, "labels")) { /* a classifier's labels: classlabels_strings' or the ints' */
    *out = dvmc_attr_find(n, "classlabels_strings") ? DVM_STRING : DVM_I64;
    return NULL;
  }
  if (!strcmp(f, "output_datatype")) { /* the signal generators' attribute, f32 by default */
    int64_t to = dvmc_attr_int(n, "output_datatype", 1);
    if (dvmc_onnx_dtype(to, out)) return NULL;
    return dvm_status_new(DVM_UNIMPLEMENTED, "node \"%s\" (%s, opset %d): output_datatype %lld is not supported",
                          n->name, n->op, n->opset, (long long)to);
  }
  if (!strcmp(f, "value")) {
    const dvmc_attr *a = dvmc_attr_find(n, "value");
    *out = a && a->t ? a->t->dtype : DVM_F32;
    return NULL;
  }
  if (n->out[i] && n->out[i]->typed) { /* set by inference, or by whoever made the node */
    *out = n->out[i]->dtype;
    return NULL;
  }
  const dvmc_value *src = !strcmp(f, "body") ? body_source(n, i)
                          : !strncmp(f, "in", 2) ? (atoi(f + 2) < n->nin ? n->in[atoi(f + 2)] : NULL)
                                              : (n->nin ? n->in[0] : NULL);
  *known = src && src->typed;
  if (*known) *out = src->dtype;
  return NULL;
}
