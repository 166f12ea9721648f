/* The compile pipeline behind dvmc.h: import, fold, symbol ranges, infer,
 * graph rewrites, lower, place for CUDA, in that order, written once for
 * every caller. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <xxhash.h>

#include "dvmc.h"
#include "fold.h"
#include "infer.h"
#include "ir.h"
#include "lower.h"
#include "onnx_import.h"
#include "pass.h"
#include "place_cuda.h"

void dvmc_compile_options_init(dvmc_compile_options *o) { *o = (dvmc_compile_options){0}; }

static void say(const dvmc_compile_options *o, dvmc_diag_kind kind, const char *fmt, ...) DVM_PRINTF(3, 4);
static void say(const dvmc_compile_options *o, dvmc_diag_kind kind, const char *fmt, ...) {
  if (!o->diag) return;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  o->diag(o->diag_ctx, kind, msg);
}

static void warn(void *ctx, const char *msg) {
  const dvmc_compile_options *o = ctx;
  o->diag(o->diag_ctx, DVMC_DIAG_WARNING, msg);
}

/* Each --dim once: a second range for one name is a mistake to report,
 * not one to settle by taking the last. */
static dvm_status *set_dims(dvmc_ctx *c, const dvmc_graph *g, const dvmc_compile_options *o) {
  for (int i = 0; i < o->ndims; i++) {
    const char *eq = strrchr(o->dims[i], '='); /* the name is all before the last '=' */
    size_t n = eq ? (size_t)(eq - o->dims[i]) : strlen(o->dims[i]);
    for (int j = 0; j < i; j++) {
      const char *eqj = strrchr(o->dims[j], '=');
      if (eq && eqj && eqj - o->dims[j] == eq - o->dims[i] && strncmp(o->dims[j], o->dims[i], n) == 0)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "dim: %.*s is given twice (%s, %s)", (int)n, o->dims[i],
                              o->dims[j], o->dims[i]);
    }
    dvm_status *st = dvmc_graph_set_dim(c, g, o->dims[i]);
    if (st) return dvm_status_annotate(st, "dim");
  }
  return NULL;
}

static dvm_status *disabled_mask(const dvmc_compile_options *o, uint32_t *mask) {
  *mask = o->cuda ? dvmc_passes_cpu_only() : 0;
  for (int i = 0; i < o->ndisable; i++) {
    int p = dvmc_pass_find(o->disable[i]);
    if (p < 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "disable: no pass '%s' (dvm compile --list-passes names them)",
                            o->disable[i]);
    *mask |= 1u << p;
  }
  return NULL;
}

/* Everything after import; `what` names the model in lowering's errors. */
static dvm_status *compile_graph(dvmc_ctx *c, dvmc_graph *g, const char *what, const dvmc_compile_options *o,
                                 uint32_t disabled, uint8_t **bytes, size_t *size) {
  say(o, DVMC_DIAG_PROGRESS, "imported %d nodes", g->nnodes);
  int folded = 0;
  dvm_status *st = dvmc_fold(c, g, &folded);
  if (st) return st;
  if (folded) say(o, DVMC_DIAG_PROGRESS, "folded %d BatchNormalization nodes into Convs", folded);
  if ((st = set_dims(c, g, o))) return st;
  if ((st = dvmc_infer(c, g))) return st;
  if (o->diag) dvmc_infer_disagreements(g, warn, (void *)o);
  int rewrites[32] = {0}, last = 0;
  if (o->last_position && (st = dvmc_last_position(c, g, o->last_position, &last))) return st;
  if (last) say(o, DVMC_DIAG_PROGRESS, "output %s computed for its last position only", o->last_position);
  if ((st = dvmc_passes_run(c, g, disabled, rewrites))) return st;
  for (int i = 0; i < dvmc_pass_count(); i++)
    if (rewrites[i]) say(o, DVMC_DIAG_PROGRESS, "pass %s rewrote %d patterns", dvmc_pass_at(i)->name, rewrites[i]);
  int total;
  const dvmc_node *lost;
  int unknown = dvmc_infer_unknown(g, &total, &lost);
  if (unknown && lost)
    say(o, DVMC_DIAG_NOTE, "%d of %d values have unknown shapes; fusion and memory planning skip them; "
        "first at node \"%s\" (%s): %s", unknown, total, lost->name, lost->op, lost->shape_lost);
  else if (unknown)
    say(o, DVMC_DIAG_NOTE, "%d of %d values have unknown shapes; fusion and memory planning skip them", unknown,
        total);
  if (o->dump_ir) dvmc_graph_print(g, o->dump_ir);
  if (o->dump_shapes) dvmc_graph_print_shapes(g, o->dump_shapes);
  if (o->no_lower) return NULL;
  /* row programs run on the CPU only (place_cuda.c refuses them) */
  dvmc_options lo = {.function = o->function, .no_fusion = o->no_fusion, .no_stitch = o->no_stitch || o->cuda,
                     .no_plan = o->no_plan, .data_dir = o->data_dir};
  if ((st = dvmc_lower(c, g, &lo, bytes, size))) return dvm_status_annotate(st, "%s", what);
  if (!o->cuda) return NULL;
  uint8_t *placed;
  if ((st = dvmc_place_cuda(*bytes, *size, &placed, size))) return dvm_status_annotate(st, "%s", what);
  free(*bytes);
  *bytes = placed;
  say(o, DVMC_DIAG_PROGRESS, "placed for CUDA");
  return NULL;
}

/* Imports the model at path, or else in data, then compiles it. */
static dvm_status *compile(const char *path, const void *data, size_t data_size, const char *model_dir,
                           const dvmc_compile_options *o, uint8_t **bytes, size_t *size) {
  dvmc_compile_options defaults;
  if (!o) {
    dvmc_compile_options_init(&defaults);
    o = &defaults;
  }
  *bytes = NULL;
  *size = 0;
  uint32_t disabled;
  dvm_status *st = disabled_mask(o, &disabled);
  if (st) return st;
  dvmc_ctx *c;
  if ((st = dvmc_ctx_create(&c))) return st;
  dvmc_graph *g;
  st = path ? dvmc_import_onnx(c, path, &g) : dvmc_import_onnx_memory(c, data, data_size, model_dir, &g);
  if (!st) st = compile_graph(c, g, path ? path : "<memory>", o, disabled, bytes, size);
  /* where a failed allocation looked like an unknown shape, whatever came
   * of it is out of memory */
  if (c->oom || dvmc_exprs_out_of_memory(c->exprs)) {
    dvm_status_free(st);
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory");
  }
  dvmc_ctx_destroy(c);
  if (st) {
    free(*bytes);
    *bytes = NULL;
    *size = 0;
  }
  return st;
}

dvm_status *dvmc_compile_file(const char *path, const dvmc_compile_options *o, uint8_t **bytes, size_t *size) {
  return compile(path, NULL, 0, NULL, o, bytes, size);
}

dvm_status *dvmc_compile_memory(const void *data, size_t data_size, const char *model_dir,
                                const dvmc_compile_options *o, uint8_t **bytes, size_t *size) {
  return compile(NULL, data, data_size, model_dir, o, bytes, size);
}

/* The identity of the file that holds this code (the dvm executable, or
 * the library that links the compiler into another program): XXH3-64 of
 * its bytes, once. Not its size and modification time, which two builds
 * share where builds are reproducible or copied with `cp -p`. */
static uint64_t compiler_id;

static void hash_compiler(void) {
  Dl_info info;
  const char *path = dladdr((void *)(uintptr_t)&dvmc_compiler_id, &info) && info.dli_fname && info.dli_fname[0]
                         ? info.dli_fname : "/proc/self/exe";
  FILE *f = fopen(path, "rb");
  XXH3_state_t *x = XXH3_createState();
  if (f && x && XXH3_64bits_reset(x) == XXH_OK) {
    char buf[1 << 16];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) XXH3_64bits_update(x, buf, n);
    if (!ferror(f)) compiler_id = XXH3_64bits_digest(x);
  }
  XXH3_freeState(x);
  if (f) fclose(f);
}

uint64_t dvmc_compiler_id(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, hash_compiler);
  return compiler_id;
}
