/* The shape rules of control flow and sequences (infer_rule.h): If, Loop
 * and Scan (their bodies inferred through the pass), SequenceMap, the
 * scalar results of sequences and optionals. */
#include "infer_rule.h"

static bool same_dims(const dvmc_value *a, const dvmc_value *b) {
  if (!a || !b || a->rank < 0 || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (!a->dims[d] || a->dims[d] != b->dims[d]) return false;
  return true;
}

/* If: an output whose shape both branches agree on has it. */
void inf_rule_if(inf *I, const dvmc_node *n) {
  const dvmc_attr *t = dvmc_attr_find(n, "then_branch"), *e = dvmc_attr_find(n, "else_branch");
  if (!t || !e || !t->g || !e->g) return;
  for (int i = 0; i < n->nout && i < t->g->noutputs && i < e->g->noutputs; i++)
    if (same_dims(t->g->outputs[i], e->g->outputs[i]))
      inf_set_shape(n->out[i], t->g->outputs[i]->rank, t->g->outputs[i]->dims);
}

/* Loop: a loop-carried value whose shape the body keeps has it (the body
 * is inferred with its inputs at the initial values' shapes; an input
 * whose shape the body changes is inferred again as unknown); a scan
 * output is [trip count, its per-iteration shape], the trip count read at
 * run time at top level. */
void inf_rule_loop(inf *I, const dvmc_node *n) {
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  dvmc_graph *g = b ? b->g : NULL;
  int carried = n->nin - 2;
  if (!g || carried < 0 || g->ninputs != carried + 2 || g->noutputs < carried + 1) return;
  for (int pass = 0; pass < 2; pass++) {
    int again = 0;
    for (int k = 0; k < carried; k++) {
      const dvmc_value *body_out = g->outputs[k + 1];
      dvmc_value *body_in = g->inputs[k + 2];
      if (pass == 0 && n->in[k + 2]) inf_set_shape(body_in, n->in[k + 2]->rank, n->in[k + 2]->dims);
      if (pass == 1 && !same_dims(body_in, body_out)) body_in->rank = -1;
    }
    I->depth++;
    inf_graph(I, g);
    I->depth--;
    for (int k = 0; k < carried; k++) again |= g->inputs[k + 2]->rank >= 0 && !same_dims(g->inputs[k + 2], g->outputs[k + 1]);
    if (!again) break;
    inf_reset_values(g);
  }
  for (int k = 0; k < carried && k < n->nout; k++)
    if (same_dims(g->inputs[k + 2], g->outputs[k + 1])) inf_set_shape(n->out[k], g->inputs[k + 2]->rank, g->inputs[k + 2]->dims);
  const dvmc_expr *trips = NULL;
  for (int k = carried; k < n->nout && k + 1 < g->noutputs; k++) {
    const dvmc_value *o = g->outputs[k + 1];
    if (!dvmc_value_shape_known(o) || o->rank + 1 > DVM_MAX_RANK) continue;
    if (!trips && !(trips = inf_data_dim(I, "trips"))) return;
    const dvmc_expr *d[DVM_MAX_RANK];
    d[0] = trips;
    for (int i = 0; i < o->rank; i++) d[i + 1] = o->dims[i];
    inf_set_shape(n->out[k], o->rank + 1, d);
  }
}

/* x's dims without axes a and b (-1: none); the rank left. */
static int dims_without(const dvmc_value *x, int a, int b, const dvmc_expr **d) {
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (i != a && i != b) d[r++] = x->dims[i];
  return r;
}

/* Scan: the body is inferred with its state inputs at the initial states'
 * shapes (again, as unknown, where the body changes them, as Loop's) and
 * its scan inputs at the scan inputs' shapes less their scan axis; a final
 * state whose shape the body keeps has it, a scan output is the body's
 * with the scan length inserted at its axis. Opset 8 has a batch axis 0 on
 * every input and output (after its sequence_lens input) and scans axis 1. */
void inf_rule_scan(inf *I, const dvmc_node *n) {
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  dvmc_graph *g = b ? b->g : NULL;
  int v8 = n->opset < 9, first = v8, m = (int)dvmc_attr_int(n, "num_scan_inputs", 0);
  int ns = n->nin - first - m;
  if (!g || m <= 0 || ns < 0 || g->ninputs != ns + m || g->noutputs < ns) return;
  const dvmc_value *x0 = n->in[first + ns];
  int ax0 = v8 ? 1 : (int)dvmc_attr_ints_at(n, "scan_input_axes", 0, 0);
  if (!x0 || x0->rank < 1) return;
  if (ax0 < 0) ax0 += x0->rank;
  if (ax0 < 0 || ax0 >= x0->rank) return;
  const dvmc_expr *len = x0->dims[ax0], *batch = v8 ? x0->dims[0] : NULL, *d[DVM_MAX_RANK], *d0[DVM_MAX_RANK] = {0};
  for (int pass = 0; pass < 2; pass++) {
    int again = 0;
    for (int k = 0; k < ns + m; k++) {
      const dvmc_value *x = n->in[first + k];
      dvmc_value *in = g->inputs[k];
      if (pass == 1) { /* a state whose dims the body changes: unknown dims, or rank */
        if (k < ns && !same_dims(in, g->outputs[k])) {
          if (in->rank == g->outputs[k]->rank) inf_set_shape(in, in->rank, d0);
          else in->rank = -1;
        }
        continue;
      }
      if (!x || x->rank < 0) continue;
      int a = k < ns ? (v8 ? 0 : -1) : (v8 ? 1 : (int)dvmc_attr_ints_at(n, "scan_input_axes", k - ns, 0));
      if (a < -1 || (k >= ns && a < 0)) a += x->rank;
      if (k >= ns && (a < 0 || a >= x->rank)) continue;
      inf_set_shape(in, dims_without(x, v8 ? 0 : -1, a, d), d);
    }
    I->depth++;
    inf_graph(I, g);
    I->depth--;
    for (int k = 0; k < ns; k++) again |= dvmc_value_shape_known(g->inputs[k]) && !same_dims(g->inputs[k], g->outputs[k]);
    if (!again) break;
    inf_reset_values(g);
  }
  for (int k = 0; k < n->nout && k < g->noutputs; k++) {
    const dvmc_value *o = g->outputs[k];
    int r = o->rank + (k >= ns) + v8;
    if (!n->out[k] || o->rank < 0 || r > DVM_MAX_RANK) continue;
    if (k < ns && !same_dims(g->inputs[k], o)) {
      if (g->inputs[k]->rank == o->rank) inf_set_rank(n->out[k], r);
      continue;
    }
    int a = k < ns ? -1 : v8 ? 1 : (int)dvmc_attr_ints_at(n, "scan_output_axes", k - ns, 0);
    if (k >= ns && a < 0) a += r;
    if (k >= ns && (a < v8 || a >= r)) continue;
    for (int i = 0, j = 0; i < r; i++)
      d[i] = v8 && i == 0 ? batch : i == a ? len : o->dims[j++];
    inf_set_shape(n->out[k], r, d);
  }
}

/* SequenceLength, OptionalHasElement: a scalar. */
void inf_rule_scalar(inf *I, const dvmc_node *n) {
  (void)I;
  inf_set_shape(n->out[0], 0, NULL);
}

/* SequenceMap: its body sees an item of each sequence input (a tensor of
 * a shape known at run time only, whatever the body declares) and each
 * tensor input as it is; its outputs are sequences (no shape). */
void inf_rule_sequence_map(inf *I, const dvmc_node *n) {
  const dvmc_attr *b = dvmc_attr_find(n, "body");
  dvmc_graph *g = b ? b->g : NULL;
  if (!g || g->ninputs != n->nin) return;
  for (int k = 0; k < n->nin; k++) {
    if (!n->in[k]) continue;
    if (n->in[k]->kind == DVMC_TENSOR) inf_set_shape(g->inputs[k], n->in[k]->rank, n->in[k]->dims);
    else g->inputs[k]->rank = -1;
  }
  I->depth++;
  inf_graph(I, g);
  I->depth--;
}
