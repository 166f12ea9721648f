/* dvm._dvm.compile: an ONNX model to .dvmb bytes with the compiler library,
 * through the passes `dvm compile` runs (tools/cmd_compile.c), in the same
 * order: import, fold, symbol ranges, inference, graph rewrites, lowering,
 * CUDA placement. */
#include <stdlib.h>
#include <string.h>

#include "ext.h"
#include "fold.h"
#include "infer.h"
#include "ir.h"
#include "lower.h"
#include "onnx_import.h"
#include "pass.h"
#include "place_cuda.h"

#define MAX_DIMS 64

const char dvm_py_compile_doc[] =
    "compile($module, model, dims, *, function=None, cuda=False, fusion=True, plan=True, model_dir=None,\n"
    "        dump_ir=False, lower=True, disable=(), stitch=True)\n--\n\n"
    "Compiles an ONNX model (a path, or the model's bytes) to .dvmb bytes. dims is a list of\n"
    "(name, lo, hi) symbol ranges. With dump_ir, returns (bytes or None, the inferred graph as\n"
    "`dvm compile --dump-ir` prints it); lower=False stops before lowering (bytes None).\n"
    "disable: names of graph rewrites to skip (`dvm compile --list-passes`).\n"
    "stitch=False keeps reductions out of fused groups (`dvm compile --no-stitch`).\n"
    "Use dvm.compile, which returns a Module.";

typedef struct {
  char name[128];
  long long lo, hi;
} dim_range;

/* Everything after import, without the GIL; *ir (when ir is not NULL)
 * gets the inferred graph's listing (malloc'ed), and lowering is skipped
 * unless `lower`. */
/* One warning per line, for dvm_py_compile to raise as Python warnings. */
static void collect_warning(void *ctx, const char *msg) { fprintf(ctx, "%s\n", msg); }

static dvm_status *compile_graph(dvmc_ctx *c, dvmc_graph *g, const dim_range *dims, int ndims,
                                 const dvmc_options *co, uint32_t disabled, int cuda, int lower, char **ir,
                                 char **warnings, const char *what, uint8_t **bytes, size_t *size) {
  int folded = 0;
  dvm_status *st = dvmc_fold(c, g, &folded);
  if (st) return st;
  for (int i = 0; i < ndims; i++) {
    char spec[192];
    snprintf(spec, sizeof spec, "%.127s=%lld..%lld", dims[i].name, dims[i].lo, dims[i].hi);
    if ((st = dvmc_graph_set_dim(c, g, spec))) return dvm_status_annotate(st, "dims");
  }
  if ((st = dvmc_infer(c, g))) return st;
  size_t wlen;
  FILE *w = open_memstream(warnings, &wlen);
  if (!w) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvmc_infer_disagreements(g, collect_warning, w);
  fclose(w);
  if ((st = dvmc_passes_run(c, g, disabled | (cuda ? dvmc_passes_cpu_only() : 0), NULL))) return st;
  if (ir) {
    size_t len;
    FILE *f = open_memstream(ir, &len);
    if (!f) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    dvmc_graph_print(g, f);
    fclose(f);
  }
  if (!lower) return NULL;
  if ((st = dvmc_lower(c, g, co, bytes, size))) return dvm_status_annotate(st, "%s", what);
  if (cuda) {
    uint8_t *placed;
    if ((st = dvmc_place_cuda(*bytes, *size, &placed, size))) return dvm_status_annotate(st, "%s", what);
    free(*bytes);
    *bytes = placed;
  }
  return NULL;
}

/* disable: an iterable of pass names, as a mask of their indices. */
static int parse_disable(PyObject *names, uint32_t *mask) {
  PyObject *it = PyObject_GetIter(names), *item;
  if (!it) return -1;
  while ((item = PyIter_Next(it))) {
    const char *name = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
    int p = name ? dvmc_pass_find(name) : -1;
    if (p < 0) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "disable: no pass %R (dvm compile --list-passes)", item);
      Py_DECREF(item);
      Py_DECREF(it);
      return -1;
    }
    *mask |= 1u << p;
    Py_DECREF(item);
  }
  Py_DECREF(it);
  return PyErr_Occurred() ? -1 : 0;
}

static int parse_dims(PyObject *list, dim_range *dims, int *ndims) {
  PyObject *seq = PySequence_Fast(list, "dims must be a list of (name, lo, hi)");
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n > MAX_DIMS) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "more than %d dims", MAX_DIMS);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    const char *name;
    dim_range *d = &dims[i];
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sLL;dims: expected (name, lo, hi)", &name, &d->lo,
                          &d->hi)) {
      Py_DECREF(seq);
      return -1;
    }
    if (d->lo < 0 || d->hi < d->lo || strlen(name) >= sizeof d->name) {
      PyErr_Format(PyExc_ValueError, "dims: \"%s\" = %lld..%lld: expected 0 <= lo <= hi (and a name under 128 bytes)",
                   name, d->lo, d->hi);
      Py_DECREF(seq);
      return -1;
    }
    strcpy(d->name, name);
  }
  *ndims = (int)n;
  Py_DECREF(seq);
  return 0;
}

PyObject *dvm_py_compile(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"model", "dims", "function", "cuda", "fusion", "plan", "model_dir", "dump_ir", "lower",
                       "disable", "stitch", NULL};
  PyObject *model, *dims_obj, *dir_obj = Py_None, *disable_obj = NULL;
  const char *function = NULL;
  int cuda = 0, fusion = 1, plan = 1, dump_ir = 0, lower = 1, stitch = 1;
  char *ir = NULL, *warnings = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$zpppOppOp:compile", kw, &model, &dims_obj, &function, &cuda,
                                   &fusion, &plan, &dir_obj, &dump_ir, &lower, &disable_obj, &stitch))
    return NULL;
  uint32_t disabled = 0;
  if (disable_obj && parse_disable(disable_obj, &disabled) < 0) return NULL;
  dim_range dims[MAX_DIMS];
  int ndims = 0;
  if (parse_dims(dims_obj, dims, &ndims) < 0) return NULL;
  char *fn_copy = function ? strdup(function) : NULL;
  PyObject *path = NULL, *dir = NULL;
  Py_buffer view = {0};
  int have_view = 0;
  if (PyObject_CheckBuffer(model)) {
    if (PyObject_GetBuffer(model, &view, PyBUF_SIMPLE) < 0) goto fail;
    have_view = 1;
    if (dir_obj != Py_None && !PyUnicode_FSConverter(dir_obj, &dir)) goto fail;
  } else if (!PyUnicode_FSConverter(model, &path)) {
    goto fail;
  }
  /* row programs run on the CPU only (place_cuda.c refuses them) */
  dvmc_options co = {.function = fn_copy, .no_fusion = !fusion, .no_stitch = !stitch || cuda, .no_plan = !plan};
  uint8_t *bytes = NULL;
  size_t size = 0;
  dvm_status *st;
  Py_BEGIN_ALLOW_THREADS
  dvmc_ctx *c = NULL;
  dvmc_graph *g = NULL;
  const char *what = path ? PyBytes_AS_STRING(path) : "<memory>";
  st = dvmc_ctx_create(&c);
  if (!st)
    st = path ? dvmc_import_onnx(c, what, &g)
              : dvmc_import_onnx_memory(c, view.buf, (size_t)view.len, dir ? PyBytes_AS_STRING(dir) : NULL, &g);
  if (!st) st = compile_graph(c, g, dims, ndims, &co, disabled, cuda, lower, dump_ir ? &ir : NULL, &warnings, what,
                            &bytes, &size);
  dvmc_ctx_destroy(c);
  Py_END_ALLOW_THREADS
  if (have_view) PyBuffer_Release(&view);
  Py_XDECREF(path);
  Py_XDECREF(dir);
  free(fn_copy);
  /* declared types that inference contradicts: UserWarnings, as the CLI's "warning:" lines */
  for (char *line = warnings, *end; !st && line && *line; line = end + 1) {
    end = strchr(line, '\n');
    *end = 0;
    if (PyErr_WarnEx(PyExc_UserWarning, line, 1) < 0) {
      free(warnings);
      free(bytes);
      free(ir);
      return NULL;
    }
  }
  free(warnings);
  if (st) {
    free(bytes);
    free(ir);
    return dvm_py_raise(st, 1);
  }
  PyObject *out = bytes ? PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)size) : (Py_INCREF(Py_None), Py_None);
  free(bytes);
  if (out && dump_ir) out = Py_BuildValue("(Ns)", out, ir ? ir : "");
  free(ir);
  return out;
fail:
  if (have_view) PyBuffer_Release(&view);
  Py_XDECREF(path);
  Py_XDECREF(dir);
  free(fn_copy);
  return NULL;
}
