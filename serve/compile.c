/* model.onnx in a repository, compiled at load the way `dvm compile` does
 * (tools/cmd_compile.c): import, fold, symbol ranges from the config's
 * `dim` lines, infer, lower; the bytes are loaded as a module. */
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "infer.h"
#include "ir.h"
#include "lower.h"
#include "onnx_import.h"
#include "serve_compile.h"

static dvm_status *set_dim(dvmc_ctx *c, const dvmc_graph *g, const char *spec) {
  char name[64];
  long long lo, hi;
  if (sscanf(spec, "%63[^=]=%lld..%lld", name, &lo, &hi) != 3 || lo < 0 || hi < lo)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "dim %s: expected NAME=LO..HI with 0 <= LO <= HI", spec);
  for (int k = 0; k < g->ninputs; k++)
    for (int d = 0; d < g->inputs[k]->rank; d++) {
      const char *s = dvmc_expr_sym_name(g->inputs[k]->dims[d]);
      if (s && strcmp(s, name) == 0) {
        dvmc_sym_set_range(c->exprs, dvmc_sym(c->exprs, name), lo, hi);
        return NULL;
      }
    }
  return dvm_status_new(DVM_INVALID_ARGUMENT, "dim %s: no input of the model has a dim named \"%s\"", spec, name);
}

dvm_status *dvms_compile_onnx(const char *path, const dvms_config *cfg, dvm_module **out) {
  dvmc_ctx *c;
  dvm_status *st = dvmc_ctx_create(&c);
  if (st) return st;
  dvmc_graph *g = NULL;
  uint8_t *bytes = NULL;
  size_t size = 0;
  int folded;
  dvmc_options co = {.function = cfg->function};
  if (!(st = dvmc_import_onnx(c, path, &g)) && !(st = dvmc_fold(c, g, &folded))) {
    for (int i = 0; i < cfg->ndims && !st; i++) st = set_dim(c, g, cfg->dims[i]);
    if (!st && !(st = dvmc_infer(c, g)) && !(st = dvmc_lower(c, g, &co, &bytes, &size)))
      st = dvm_module_load_memory(bytes, size, NULL, out);
  }
  free(bytes);
  dvmc_ctx_destroy(c);
  return dvm_status_annotate(st, "compiling %s", path);
}
