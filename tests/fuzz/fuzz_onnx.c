/* Fuzz target for the ONNX importer and the compiler behind it. Any input
 * must give a graph or an error that names the source ("<memory>: ...")
 * with the code of a bad file (corrupt) or a refused feature
 * (unimplemented); a graph is then inferred, rewritten and lowered, which
 * may refuse it but not fail otherwise. A graph must hang
 * together: ids are indices, each output's producer is its node, each named
 * value is found by its name, every input of a node is defined; and it must
 * print, the same way twice. A broken promise aborts, which the fuzzer
 * reports. No model directory is given, so external data is refused and the
 * target never opens a file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fold.h"
#include "infer.h"
#include "lower.h"
#include "onnx_import.h"
#include "pass.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

static void check_graph(const dvmc_graph *g, int depth) {
  require(depth < 64);
  for (int i = 0; i < g->nvalues; i++) {
    const dvmc_value *v = g->values[i];
    require(v->id == i && v->name);
    require(v->rank >= -1 && v->rank <= DVM_MAX_RANK);
    if (v->name[0]) require(dvmc_value_find(g, v->name) == v);
    if (v->constant) {
      require(v->constant->rank == v->rank && v->constant->dtype == v->dtype);
      require(v->constant->nbytes == 0 || v->constant->data);
    }
  }
  for (int i = 0; i < g->ninputs; i++) require(g->inputs[i] && !g->inputs[i]->producer);
  for (int i = 0; i < g->noutputs; i++) require(g->outputs[i] != NULL);
  for (int i = 0; i < g->nnodes; i++) {
    const dvmc_node *n = g->nodes[i];
    require(n->id == i && n->name && n->op && n->domain);
    for (int j = 0; j < n->nin; j++)
      if (n->in[j]) require(dvmc_value_find(g, n->in[j]->name) == n->in[j]);
    for (int j = 0; j < n->nout; j++)
      if (n->out[j]) require(n->out[j]->producer == n);
    for (int j = 0; j < n->nattrs; j++) {
      const dvmc_attr *a = &n->attrs[j];
      require(a->name != NULL);
      if (a->type == DVMC_ATTR_GRAPH) {
        require(a->g && a->g->parent == g);
        check_graph(a->g, depth + 1);
      }
    }
  }
}

static char *print_graph(const dvmc_graph *g, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  require(f != NULL);
  dvmc_graph_print(g, f);
  require(fclose(f) == 0);
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dvmc_ctx *c = NULL;
  dvmc_graph *g = NULL;
  require(dvmc_ctx_create(&c) == NULL);
  dvm_status *st = dvmc_import_onnx_memory(c, data, size, NULL, &g);
  if (st) {
    dvm_code code = dvm_status_code(st);
    require(code == DVM_CORRUPT || code == DVM_UNIMPLEMENTED || code == DVM_OUT_OF_MEMORY);
    require(code == DVM_OUT_OF_MEMORY ||
            strncmp(dvm_status_message(st), "<memory>: ", 10) == 0);
    require(g == NULL);
    dvm_status_free(st);
  } else {
    require(g != NULL && g->parent == NULL);
    check_graph(g, 0);
    size_t n1 = 0, n2 = 0;
    char *a = print_graph(g, &n1), *b = print_graph(g, &n2);
    require(n1 == n2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    /* the rewrites on constants keep the graph well formed */
    int folded = 0;
    require(dvmc_fold(c, g, &folded) == NULL);
    check_graph(g, 0);
    /* inference, the graph rewrites and lowering read every op's
     * attributes and inputs: a model may be refused (unimplemented, or an
     * invalid attribute), never crash or make bytecode the verifier
     * refuses (an internal error) */
    uint8_t *bytes = NULL;
    size_t nbytes = 0;
    st = dvmc_infer(c, g);
    if (!st) st = dvmc_passes_run(c, g, 0, NULL);
    if (!st) st = dvmc_lower(c, g, NULL, &bytes, &nbytes);
    if (st) {
      dvm_code code = dvm_status_code(st);
      require(code == DVM_UNIMPLEMENTED || code == DVM_INVALID_ARGUMENT || code == DVM_OUT_OF_MEMORY);
      dvm_status_free(st);
    }
    free(bytes);
  }
  dvmc_ctx_destroy(c);
  return 0;
}
