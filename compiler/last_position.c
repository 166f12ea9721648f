/* Only the last position of an output (dvmc_compile_options.last_position):
 * a generator samples from the logits after each sequence's last token, so
 * of logits [batch, seq, vocab] it reads row seq - 1 alone. Walking back
 * from that output through elementwise nodes (a final softcap, a Cast) to
 * the MatMul or MatMulNBits that makes its rows, the product's input A
 * [batch, seq, k] is replaced by Gather(A, [-1], axis 1), [batch, 1, k],
 * and the values from there to the output get 1 on axis 1. A prompt of
 * n tokens then skips n - 1 rows of the model's largest product (the
 * vocabulary projection) and holds one row of logits instead of n. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fold.h"
#include "ops.h"
#include "pass.h"

#define MAX_CHAIN 16 /* elementwise nodes between the product and the output */

static bool is_product(const dvmc_node *n) {
  return (!n->domain[0] && strcmp(n->op, "MatMul") == 0) ||
         (strcmp(n->domain, "com.microsoft") == 0 && strcmp(n->op, "MatMulNBits") == 0);
}

/* n's input that carries the rows when n is elementwise and its other
 * inputs are constants of rank 0 or 1 (the same for every position); else
 * NULL. */
static dvmc_value *rows_input(const dvmc_node *n) {
  if (n->domain[0] || n->nout != 1 || !n->def || (n->def->fused < 0 && strcmp(n->op, "Cast") != 0)) return NULL;
  dvmc_value *rows = NULL;
  for (int i = 0; i < n->nin; i++) {
    dvmc_value *v = n->in[i];
    if (!v || (v->constant && v->rank <= 1)) continue;
    if (rows) return NULL;
    rows = v;
  }
  return rows;
}

/* The [1] i64 constant -1: the last index. */
static dvmc_value *last_index(dvmc_ctx *c, dvmc_graph *g, const char *base) {
  dvmc_tensor *t = dvm_arena_alloc(&c->arena, 1, sizeof *t);
  int64_t *data = dvm_arena_alloc(&c->arena, 1, sizeof *data);
  if (!t || !data) return NULL;
  *data = -1;
  *t = (dvmc_tensor){.dtype = DVM_I64, .rank = 1, .dims = {1}, .data = data, .nbytes = sizeof *data};
  return dvmc_fold_const(c, g, base, "last_index", t);
}

dvm_status *dvmc_last_position(dvmc_ctx *c, dvmc_graph *g, const char *output, int *count) {
  dvmc_value *v = NULL;
  for (int i = 0; i < g->noutputs; i++)
    if (strcmp(g->outputs[i]->name, output) == 0) v = g->outputs[i];
  if (!v) return dvm_status_new(DVM_INVALID_ARGUMENT, "last_position: the model has no output \"%s\"", output);
  /* the values from the product's output to `output`, each read by the
   * next alone (the output by nothing but the caller) */
  dvmc_value *chain[MAX_CHAIN + 1];
  int n = 0;
  dvmc_node *p = v->producer;
  while (p && v->rank == 3 && v->uses == 1 && n <= MAX_CHAIN) {
    chain[n++] = v;
    if (is_product(p)) break;
    if (!(v = rows_input(p))) return NULL;
    p = v->producer;
  }
  if (!p || !is_product(p) || n == 0 || chain[n - 1]->producer != p) return NULL; /* left as it is */
  dvmc_value *a = p->in[0];
  if (!a || a->rank != 3 || !a->typed) return NULL;
  const dvmc_expr *one = dvmc_const(c->exprs, 1);
  size_t len = strlen(a->name) + sizeof ".last_row" + 20;
  char *name = dvm_arena_alloc(&c->arena, len, 1);
  if (name) snprintf(name, len, "%s.last_row", a->name);
  for (int i = 1; name && dvmc_value_find(g, name); i++) snprintf(name, len, "%s.last_row%d", a->name, i);
  dvmc_value *idx = last_index(c, g, a->name), *last = name ? dvmc_value_new(c, g, name) : NULL;
  if (!one || !idx || !last) return dvm_status_new(DVM_OUT_OF_MEMORY, "last_position");
  last->typed = true;
  last->dtype = a->dtype;
  last->rank = 3;
  last->dims[0] = a->dims[0];
  last->dims[1] = one;
  last->dims[2] = a->dims[2];
  dvmc_attr axis = {.name = "axis", .type = DVMC_ATTR_INT, .i = 1};
  dvmc_value *in[2] = {a, idx};
  dvm_status *st = dvmc_pass_insert(c, g, p->id, "Gather", "", in, 2, last, &axis, 1);
  if (st) return st;
  p->in[0] = last;
  last->uses++;
  a->uses--;
  for (int i = 0; i < n; i++) chain[i]->dims[1] = one;
  ++*count;
  return NULL;
}
