/* The types a model declares for graph outputs and value_info, against
 * what inference found (infer.h). Exporters write stale or approximate
 * declarations; ONNX Runtime warns about them and runs the model, so dvm
 * does too: a disagreement is a warning naming the value, never an error,
 * and the inferred type is the one used. */
#include <stdio.h>
#include <string.h>

#include "infer.h"

/* "f32[N, 4]" for messages; dims as declared (? for symbolic) or inferred. */
static void put_type(char *buf, size_t size, bool typed, dvm_dtype dt, int rank, const int64_t *fixed,
                     const dvmc_expr *const *dims) {
  size_t n = (size_t)snprintf(buf, size, "%s", typed ? dvm_dtype_name(dt) : "?");
  if (rank < 0) {
    snprintf(buf + n, size - n, "[*]");
    return;
  }
  for (int i = 0; i < rank && n + 1 < size; i++) {
    char e[64] = "?";
    if (fixed && fixed[i] > 0) snprintf(e, sizeof e, "%lld", (long long)fixed[i]);
    else if (dims && dims[i]) dvmc_expr_str(dims[i], e, sizeof e);
    n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "[", e);
  }
  if (n + 1 < size) snprintf(buf + n, size - n, "%s", rank ? "]" : "[]");
}

/* Whether what v declares contradicts what inference knows: another
 * dtype, another rank, or a fixed dim where inference has another
 * constant. A symbolic declaration contradicts nothing. */
static bool disagrees(const dvmc_value *v) {
  const dvmc_declared *d = v->declared;
  if (d->typed && v->typed && d->dtype != v->dtype) return true;
  if (d->rank < 0 || v->rank < 0) return false;
  if (d->rank != v->rank) return true;
  for (int i = 0; i < d->rank; i++) {
    int64_t c;
    if (d->dims[i] > 0 && v->dims[i] && dvmc_expr_is_const(v->dims[i], &c) && c != d->dims[i]) return true;
  }
  return false;
}

int dvmc_infer_disagreements(const dvmc_graph *g, void (*warn)(void *ctx, const char *msg), void *ctx) {
  int count = 0;
  for (int i = 0; i < g->nvalues; i++) {
    const dvmc_value *v = g->values[i];
    if (!v || !v->declared || !disagrees(v)) continue;
    const dvmc_declared *d = v->declared;
    char want[256], got[256], msg[700];
    put_type(want, sizeof want, d->typed, d->dtype, d->rank, d->dims, NULL);
    put_type(got, sizeof got, v->typed, v->dtype, v->rank, NULL, v->dims);
    snprintf(msg, sizeof msg, "%s \"%s\" is declared %s, inference gives %s%s%s%s: the declaration is ignored",
             d->role, v->name, want, got, v->producer ? " (node \"" : "", v->producer ? v->producer->name : "",
             v->producer ? "\")" : "");
    if (warn) warn(ctx, msg);
    count++;
  }
  for (int i = 0; i < g->nnodes; i++)
    for (int a = 0; g->nodes[i] && a < g->nodes[i]->nattrs; a++)
      if (g->nodes[i]->attrs[a].type == DVMC_ATTR_GRAPH)
        count += dvmc_infer_disagreements(g->nodes[i]->attrs[a].g, warn, ctx);
  return count;
}
