/* dvm._dvm.compile: an ONNX model to .dvmb bytes through the compiler's
 * API (dvmc.h), the one `dvm compile` uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvmc.h"
#include "ext.h"

#define MAX_DIMS 64
#define MAX_SPEC 192 /* "NAME=LO..HI" */

const char dvm_py_compile_doc[] =
    "compile($module, model, dims, *, function=None, cuda=False, fusion=True, plan=True, model_dir=None,\n"
    "        dump_ir=False, lower=True, disable=(), stitch=True, last_position=None, data_dir=None)\n--\n\n"
    "Compiles an ONNX model (a path, or the model's bytes) to .dvmb bytes. dims is a list of\n"
    "(name, lo, hi) symbol ranges. With dump_ir, returns (bytes or None, the inferred graph as\n"
    "`dvm compile --dump-ir` prints it); lower=False stops before lowering (bytes None).\n"
    "disable: names of graph rewrites to skip (`dvm compile --list-passes`).\n"
    "stitch=False keeps reductions out of fused groups (`dvm compile --no-stitch`).\n"    "data_dir: the folder the .dvmb will be loaded with (Module(data_dir=)): the model's external\n"
    "data files inside it are referred to, not copied.\n"
    "Use dvm.compile, which returns a Module.";

/* One warning per line, for dvm_py_compile to raise as Python warnings. */
static void collect_warning(void *ctx, dvmc_diag_kind kind, const char *msg) {
  if (kind == DVMC_DIAG_WARNING) fprintf(ctx, "%s\n", msg);
}

/* disable: an iterable of pass names, checked here so that a wrong one is
 * a ValueError; *seq keeps the names alive for the call. */
static int parse_disable(PyObject *names, PyObject **seq, const char **out, int *n) {
  *seq = PySequence_Fast(names, "disable must be an iterable of pass names");
  if (!*seq) return -1;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(*seq);
  if (count > MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "disable: more than %d names", MAX_DIMS);
    return -1;
  }
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(*seq, i);
    const char *name = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
    if (!name || dvmc_pass_find(name) < 0) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "disable: no pass %R (dvm compile --list-passes)", item);
      return -1;
    }
    out[i] = name;
  }
  *n = (int)count;
  return 0;
}

/* dims: (name, lo, hi) tuples as "NAME=LO..HI" specs. */
static int parse_dims(PyObject *list, char (*specs)[MAX_SPEC], int *ndims) {
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
    long long lo, hi;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sLL;dims: expected (name, lo, hi)", &name, &lo, &hi)) {
      Py_DECREF(seq);
      return -1;
    }
    if (lo < 0 || hi < lo || strlen(name) >= 128) {
      PyErr_Format(PyExc_ValueError, "dims: \"%s\" = %lld..%lld: expected 0 <= lo <= hi (and a name under 128 bytes)",
                   name, lo, hi);
      Py_DECREF(seq);
      return -1;
    }
    snprintf(specs[i], MAX_SPEC, "%s=%lld..%lld", name, lo, hi);
  }
  *ndims = (int)n;
  Py_DECREF(seq);
  return 0;
}

/* Raises each collected warning line as a UserWarning, as the CLI prints
 * its "warning:" lines; -1 when one became an error. */
static int raise_warnings(char *warnings) {
  for (char *line = warnings, *end; line && *line; line = end + 1) {
    end = strchr(line, '\n');
    *end = 0;
    if (PyErr_WarnEx(PyExc_UserWarning, line, 1) < 0) return -1;
  }
  return 0;
}

PyObject *dvm_py_compile(PyObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"model", "dims", "function", "cuda", "fusion", "plan", "model_dir", "dump_ir", "lower",
                       "disable", "stitch", "last_position", "data_dir", NULL};
  PyObject *model, *dims_obj, *dir_obj = Py_None, *disable_obj = NULL, *data_dir_obj = Py_None, *data_dir = NULL;
  const char *function = NULL, *last_position = NULL;
  int cuda = 0, fusion = 1, plan = 1, dump_ir = 0, lower = 1, stitch = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$zpppOppOpzO:compile", kw, &model, &dims_obj, &function, &cuda,
                                   &fusion, &plan, &dir_obj, &dump_ir, &lower, &disable_obj, &stitch,
                                   &last_position, &data_dir_obj))
    return NULL;
  char specs[MAX_DIMS][MAX_SPEC];
  const char *dims[MAX_DIMS], *disable[MAX_DIMS];
  dvmc_compile_options co;
  dvmc_compile_options_init(&co);
  PyObject *disable_seq = NULL, *path = NULL, *dir = NULL, *out = NULL;
  Py_buffer view = {0};
  int have_view = 0;
  char *ir = NULL, *warnings = NULL;
  size_t ir_len, warnings_len;
  if ((disable_obj && parse_disable(disable_obj, &disable_seq, disable, &co.ndisable) < 0) ||
      parse_dims(dims_obj, specs, &co.ndims) < 0)
    goto done;
  for (int i = 0; i < co.ndims; i++) dims[i] = specs[i];
  if (PyObject_CheckBuffer(model)) {
    if (PyObject_GetBuffer(model, &view, PyBUF_SIMPLE) < 0) goto done;
    have_view = 1;
    if (dir_obj != Py_None && !PyUnicode_FSConverter(dir_obj, &dir)) goto done;
  } else if (!PyUnicode_FSConverter(model, &path)) {
    goto done;
  }
  if (data_dir_obj != Py_None && !PyUnicode_FSConverter(data_dir_obj, &data_dir)) goto done;
  co.data_dir = data_dir ? PyBytes_AS_STRING(data_dir) : NULL;
  co.function = function; /* args holds it and last_position for the call */
  co.last_position = last_position;
  co.dims = dims;
  co.disable = disable;
  co.cuda = cuda;
  co.no_fusion = !fusion;
  co.no_stitch = !stitch;
  co.no_plan = !plan;
  co.no_lower = !lower;
  co.dump_ir = dump_ir ? open_memstream(&ir, &ir_len) : NULL;
  FILE *w = open_memstream(&warnings, &warnings_len);
  if ((dump_ir && !co.dump_ir) || !w) {
    if (co.dump_ir) fclose(co.dump_ir);
    if (w) fclose(w);
    PyErr_NoMemory();
    goto done;
  }
  co.diag = collect_warning;
  co.diag_ctx = w;
  uint8_t *bytes;
  size_t size;
  dvm_status *st;
  Py_BEGIN_ALLOW_THREADS
  st = path ? dvmc_compile_file(PyBytes_AS_STRING(path), &co, &bytes, &size)
            : dvmc_compile_memory(view.buf, (size_t)view.len, dir ? PyBytes_AS_STRING(dir) : NULL, &co, &bytes, &size);
  Py_END_ALLOW_THREADS
  fclose(w);
  if (co.dump_ir) fclose(co.dump_ir);
  if (st) {
    dvm_py_raise(st, 1);
  } else if (raise_warnings(warnings) == 0) {
    out = bytes ? PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)size) : (Py_INCREF(Py_None), Py_None);
    if (out && dump_ir) out = Py_BuildValue("(Ns)", out, ir ? ir : "");
  }
  free(bytes);
done:
  if (have_view) PyBuffer_Release(&view);
  Py_XDECREF(disable_seq);
  Py_XDECREF(path);
  Py_XDECREF(dir);
  Py_XDECREF(data_dir);
  free(ir);
  free(warnings);
  return out;
}

PyObject *dvm_py_compiler_id(PyObject *self, PyObject *unused) {
  return PyLong_FromUnsignedLongLong(dvmc_compiler_id());
}
