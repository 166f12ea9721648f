/* dvm._dvm.Module: a loaded module, its signatures, and running its
 * functions from any number of Python threads.
 *
 * The C API's threading contract is one VM per thread at a time. A Module
 * keeps idle VMs per configuration (device, kernel threads, where results
 * stay, TF32); a call takes one (or creates one), runs it with the GIL released,
 * and puts it back. The lists are touched only while holding the GIL. */
#include <string.h>

#include "ext.h"

#define MAX_CONFIGS 8 /* distinct (device, threads, results_on_device, tf32) */
#define MAX_IDLE 32   /* idle VMs kept per configuration; more are destroyed */
#define MAX_ARGS 256

typedef struct {
  dvm_vm_options opts;
  int nidle;
  dvm_vm *idle[MAX_IDLE];
} vm_list;

typedef struct {
  PyObject_HEAD
  dvm_module *m;
  dvm_device_kind auto_device; /* what device="auto" means for this module */
  PyObject *auto_why;          /* and why (str) */
  PyObject **param_names;      /* per function: a tuple of input names (str) */
  PyObject **result_names;     /* per function: a tuple of result names */
  int nconfigs;
  vm_list configs[MAX_CONFIGS];
} ModuleObject;

static PyObject *names_of(const dvm_module *m, int f, int results) {
  int n = results ? dvm_function_result_count(m, f) : dvm_function_param_count(m, f);
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    dvm_param_info info;
    if (results) dvm_function_result(m, f, i, &info);
    else dvm_function_param(m, f, i, &info);
    PyObject *s = PyUnicode_InternFromString(info.name);
    if (!s) Py_CLEAR(t);
    else PyTuple_SET_ITEM(t, i, s);
  }
  return t;
}

static void module_clear_vms(ModuleObject *self) {
  for (int c = 0; c < self->nconfigs; c++)
    for (int i = 0; i < self->configs[c].nidle; i++) dvm_vm_destroy(self->configs[c].idle[i]);
  self->nconfigs = 0;
}

static void module_free_names(ModuleObject *self) {
  int n = self->m ? dvm_module_function_count(self->m) : 0;
  for (int f = 0; f < n; f++) {
    if (self->param_names) Py_XDECREF(self->param_names[f]);
    if (self->result_names) Py_XDECREF(self->result_names[f]);
  }
  PyMem_Free(self->param_names);
  PyMem_Free(self->result_names);
  self->param_names = self->result_names = NULL;
}

static void module_dealloc(ModuleObject *self) {
  module_clear_vms(self);
  module_free_names(self);
  Py_XDECREF(self->auto_why);
  dvm_module_release(self->m);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int module_init(ModuleObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"source", "data_dir", NULL};
  PyObject *src, *dir_obj = Py_None, *dir = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:Module", kw, &src, &dir_obj)) return -1;
  if (dir_obj != Py_None && !PyUnicode_FSConverter(dir_obj, &dir)) return -1;
  dvm_load_options lo = {.data_dir = dir ? PyBytes_AS_STRING(dir) : NULL};
  if (self->m) {
    Py_XDECREF(dir);
    PyErr_SetString(PyExc_RuntimeError, "Module is already loaded");
    return -1;
  }
  dvm_module *m = NULL;
  dvm_status *st;
  if (PyObject_CheckBuffer(src)) {
    Py_buffer view;
    if (PyObject_GetBuffer(src, &view, PyBUF_SIMPLE) < 0) {
      Py_XDECREF(dir);
      return -1;
    }
    Py_BEGIN_ALLOW_THREADS st = dvm_module_load_memory(view.buf, (size_t)view.len, &lo, &m);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
  } else {
    PyObject *path;
    if (!PyUnicode_FSConverter(src, &path)) {
      Py_XDECREF(dir);
      return -1;
    }
    const char *p = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS st = dvm_module_load_file(p, &lo, &m);
    Py_END_ALLOW_THREADS Py_DECREF(path);
  }
  Py_XDECREF(dir);
  if (st) {
    dvm_py_raise(st, 0);
    return -1;
  }
  self->m = m;
  char why[320];
  self->auto_device = dvm_device_auto(m, why, sizeof why);
  self->auto_why = PyUnicode_FromString(why);
  int n = dvm_module_function_count(m);
  self->param_names = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
  self->result_names = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
  if (!self->auto_why || !self->param_names || !self->result_names) {
    PyErr_NoMemory();
    return -1;
  }
  for (int f = 0; f < n; f++)
    if (!(self->param_names[f] = names_of(m, f, 0)) || !(self->result_names[f] = names_of(m, f, 1))) return -1;
  return 0;
}

static int check_loaded(ModuleObject *self) {
  if (self->m) return 0;
  PyErr_SetString(PyExc_RuntimeError, "Module was not loaded (its __init__ did not run or failed)");
  return -1;
}

dvm_module *dvm_py_module_of(PyObject *obj) {
  if (!PyObject_TypeCheck(obj, &dvm_py_ModuleType)) {
    PyErr_Format(PyExc_TypeError, "expected a dvm._dvm.Module, got %s", Py_TYPE(obj)->tp_name);
    return NULL;
  }
  return check_loaded((ModuleObject *)obj) < 0 ? NULL : ((ModuleObject *)obj)->m;
}

/* ---- signatures ---- */

static PyObject *param_tuple(const dvm_param_info *p) {
  PyObject *dims;
  if (p->rank < 0) {
    dims = Py_None;
    Py_INCREF(dims);
  } else {
    dims = PyList_New(p->rank);
    for (int d = 0; dims && d < p->rank; d++) {
      const dvm_dim_info *di = &p->dims[d];
      PyObject *o = di->symbol ? PyUnicode_FromString(di->symbol)
                    : di->value >= 0 ? PyLong_FromLongLong(di->value) : (Py_INCREF(Py_None), Py_None);
      if (!o) Py_CLEAR(dims);
      else PyList_SET_ITEM(dims, d, o);
    }
  }
  if (!dims) return NULL;
  const char *kind = p->kind == DVM_VAL_NONE ? "any" : dvm_kind_name(p->kind);
  /* a tuple (a sequence or optional) has the dtype of the tensors inside, when it says one */
  const char *dtype = p->kind == DVM_VAL_TENSOR || (p->kind == DVM_VAL_TUPLE && p->dtype < DVM_DTYPE_COUNT)
                          ? dvm_py_dtype_name(p->dtype) : NULL;
  return Py_BuildValue("(sszN)", p->name, kind, dtype, dims);
}

static PyObject *module_signatures(ModuleObject *self, PyObject *unused) {
  if (check_loaded(self) < 0) return NULL;
  const dvm_module *m = self->m;
  int n = dvm_module_function_count(m);
  PyObject *out = PyList_New(n);
  for (int f = 0; out && f < n; f++) {
    int np = dvm_function_param_count(m, f), nr = dvm_function_result_count(m, f);
    int ns = dvm_function_symbol_count(m, f);
    PyObject *ps = PyList_New(np), *rs = PyList_New(nr), *ss = PyList_New(ns), *item = NULL;
    int ok = ps && rs && ss;
    for (int i = 0; ok && i < np; i++) {
      dvm_param_info info;
      dvm_function_param(m, f, i, &info);
      PyObject *o = param_tuple(&info);
      if (!(ok = o != NULL)) break;
      PyList_SET_ITEM(ps, i, o);
    }
    for (int i = 0; ok && i < nr; i++) {
      dvm_param_info info;
      dvm_function_result(m, f, i, &info);
      PyObject *o = param_tuple(&info);
      if (!(ok = o != NULL)) break;
      PyList_SET_ITEM(rs, i, o);
    }
    for (int i = 0; ok && i < ns; i++) {
      dvm_symbol_info y;
      dvm_function_symbol(m, f, i, &y);
      PyObject *o = Py_BuildValue("(sLL)", y.name, (long long)y.lo, (long long)y.hi);
      if (!(ok = o != NULL)) break;
      PyList_SET_ITEM(ss, i, o);
    }
    if (ok) item = Py_BuildValue("(sOOOz)", dvm_function_name(m, f), ps, rs, ss, dvm_function_info(m, f, "peak"));
    Py_XDECREF(ps);
    Py_XDECREF(rs);
    Py_XDECREF(ss);
    if (!item) Py_CLEAR(out);
    else PyList_SET_ITEM(out, f, item);
  }
  return out;
}

static PyObject *module_kernels(ModuleObject *self, PyObject *unused) {
  if (check_loaded(self) < 0) return NULL;
  int n = dvm_module_kernel_count(self->m);
  PyObject *out = PyList_New(n);
  for (int k = 0; out && k < n; k++) {
    dvm_kernel_info info;
    dvm_module_kernel(self->m, k, &info);
    PyObject *o = Py_BuildValue("(ssi)", info.name, dvm_device_name(info.device), info.nvariants);
    if (!o) Py_CLEAR(out);
    else PyList_SET_ITEM(out, k, o);
  }
  return out;
}

static PyObject *module_auto_device(ModuleObject *self, void *unused) {
  if (check_loaded(self) < 0) return NULL;
  return Py_BuildValue("(sO)", dvm_device_name(self->auto_device), self->auto_why);
}

static PyObject *module_sizes(ModuleObject *self, PyObject *unused) {
  if (check_loaded(self) < 0) return NULL;
  return Py_BuildValue("{s:i,s:n,s:i,s:n}", "constants", dvm_module_constant_count(self->m), "constant_bytes",
                       (Py_ssize_t)dvm_module_constant_bytes(self->m), "kernels", dvm_module_kernel_count(self->m),
                       "released_bytes", (Py_ssize_t)dvm_module_released_bytes(self->m));
}

/* ---- running ---- */

static vm_list *config_for(ModuleObject *self, const dvm_vm_options *o) {
  for (int c = 0; c < self->nconfigs; c++) {
    const dvm_vm_options *k = &self->configs[c].opts;
    if (k->device == o->device && k->threads == o->threads && k->results_on_device == o->results_on_device &&
        k->allow_tf32 == o->allow_tf32)
      return &self->configs[c];
  }
  if (self->nconfigs == MAX_CONFIGS) { /* rarely: forget the idle VMs of the first */
    vm_list *l = &self->configs[0];
    for (int i = 0; i < l->nidle; i++) dvm_vm_destroy(l->idle[i]);
    memmove(self->configs, self->configs + 1, sizeof(vm_list) * (MAX_CONFIGS - 1));
    self->nconfigs--;
  }
  vm_list *l = &self->configs[self->nconfigs++];
  l->opts = *o;
  l->nidle = 0;
  return l;
}

static void put_back(ModuleObject *self, const dvm_vm_options *o, dvm_vm *vm) {
  vm_list *l = config_for(self, o);
  if (l->nidle < MAX_IDLE) l->idle[l->nidle++] = vm;
  else dvm_vm_destroy(vm);
}

/* Finds inputs[name] for each parameter; an input missing from the dict is
 * left empty for the VM to name; a name that is no input is an error. */
static int bind_dict(ModuleObject *self, int f, PyObject *inputs, int np, PyObject **items) {
  PyObject *names = self->param_names[f];
  Py_ssize_t found = 0;
  for (int i = 0; i < np; i++) {
    items[i] = PyDict_GetItemWithError(inputs, PyTuple_GET_ITEM(names, i));
    if (items[i]) found++;
    else if (PyErr_Occurred()) return -1;
  }
  if (found == PyDict_GET_SIZE(inputs)) return 0;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(inputs, &pos, &key, &value)) {
    int known = 0;
    for (int i = 0; i < np && !known; i++) {
      int eq = PyObject_RichCompareBool(key, PyTuple_GET_ITEM(names, i), Py_EQ);
      if (eq < 0) return -1;
      known = eq;
    }
    if (!known) {
      PyErr_Format(dvm_py_InvalidInput, "function \"%s\" has no input named %R (its inputs: %R)",
                   dvm_function_name(self->m, f), key, names);
      return -1;
    }
  }
  return 0;
}

/* Whether result r of function f is a sequence of maps (the function's
 * info "maps", docs/bytecode.md 3.8). */
static int is_maps(const dvm_module *m, int f, int r) {
  const char *p = dvm_function_info(m, f, "maps");
  for (char *end; p && *p; p = *end ? end + 1 : end)
    if (strtol(p, &end, 10) == r) return 1;
  return 0;
}

/* A sequence of maps as ONNX Runtime returns it: from the tuple (labels
 * [C], values [N, C]), a list of N dicts {label: value}. Takes pair. */
static PyObject *maps_of(PyObject *pair) {
  PyObject *keys = NULL, *rows = NULL, *out = NULL;
  if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2 &&
      (keys = PyObject_CallMethod(PyTuple_GET_ITEM(pair, 0), "tolist", NULL)) &&
      (rows = PyObject_CallMethod(PyTuple_GET_ITEM(pair, 1), "tolist", NULL)) && PyList_Check(keys) &&
      PyList_Check(rows) && (out = PyList_New(PyList_GET_SIZE(rows)))) {
    for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(rows); i++) {
      PyObject *row = PyList_GET_ITEM(rows, i), *d = PyDict_New();
      for (Py_ssize_t j = 0; d && PyList_Check(row) && j < PyList_GET_SIZE(keys) && j < PyList_GET_SIZE(row); j++)
        if (PyDict_SetItem(d, PyList_GET_ITEM(keys, j), PyList_GET_ITEM(row, j)) < 0) Py_CLEAR(d);
      if (!d) Py_CLEAR(out);
      else PyList_SET_ITEM(out, i, d);
    }
  } else if (!PyErr_Occurred()) {
    PyErr_SetString(dvm_py_Error, "a sequence of maps that is not the tuple (labels, values)");
  }
  Py_XDECREF(keys);
  Py_XDECREF(rows);
  Py_DECREF(pair);
  return out;
}

/* What one invocation did: the counters as differences over the call, the
 * pools' gauges as the VM has them after it (peak: since the VM was made;
 * VMs are reused across calls). */
static PyObject *stats_dict(const dvm_vm_stats *before, const dvm_vm_stats *after) {
  PyObject *d = Py_BuildValue("{s:K,s:K,s:K}", "instructions",
                              (unsigned long long)(after->instructions - before->instructions), "kernel_calls",
                              (unsigned long long)(after->kernel_calls - before->kernel_calls), "host_syncs",
                              (unsigned long long)(after->host_syncs - before->host_syncs));
  for (int dev = 0; d && dev < DVM_DEVICE_COUNT; dev++) {
    const dvm_pool_stats *p = &after->pool[dev], *q = &before->pool[dev];
    if (dev != DVM_DEVICE_CPU && !p->allocs) continue; /* a device this VM never used */
    PyObject *o = Py_BuildValue("{s:K,s:K,s:K,s:K,s:K}", "in_use", (unsigned long long)p->in_use, "peak",
                                (unsigned long long)p->peak, "cached", (unsigned long long)p->cached, "allocs",
                                (unsigned long long)(p->allocs - q->allocs), "reuses",
                                (unsigned long long)(p->reuses - q->reuses));
    char key[32];
    snprintf(key, sizeof key, "%s_pool", dvm_device_name((dvm_device_kind)dev));
    if (!o || PyDict_SetItemString(d, key, o) < 0) Py_CLEAR(d);
    Py_XDECREF(o);
  }
  return d;
}

static PyObject *run_impl(ModuleObject *self, PyObject *args, PyObject *kwargs, int want_stats) {
  static char *kw[] = {"inputs", "function", "device", "threads", "results_on_device", "tf32", NULL};
  PyObject *inputs, *threads_obj = Py_None;
  const char *fname = "main", *devname = "auto";
  int on_device = 0, tf32 = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$ssOpp:run", kw, &inputs, &fname, &devname, &threads_obj,
                                   &on_device, &tf32))
    return NULL;
  if (check_loaded(self) < 0) return NULL;
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.results_on_device = on_device;
  o.allow_tf32 = tf32;
  if (strcmp(devname, "auto") == 0) o.device = self->auto_device;
  else if (!dvm_device_parse(devname, &o.device))
    return PyErr_Format(PyExc_ValueError, "unknown device \"%s\" (cpu, cuda, auto)", devname);
  if (threads_obj != Py_None) {
    long t = PyLong_AsLong(threads_obj);
    if (t == -1 && PyErr_Occurred()) return NULL;
    if (t < 1) return PyErr_Format(PyExc_ValueError, "threads must be >= 1 (or None for all cores), got %ld", t);
    o.threads = (int)t;
  }
  int is_dict = PyDict_Check(inputs);
  if (!is_dict && !PyList_Check(inputs) && !PyTuple_Check(inputs))
    return PyErr_Format(PyExc_TypeError, "inputs must be a dict (name: value) or a list, not %.80s",
                        Py_TYPE(inputs)->tp_name);

  vm_list *l = config_for(self, &o);
  dvm_vm *vm = l->nidle ? l->idle[--l->nidle] : NULL;
  dvm_status *st = vm ? NULL : dvm_vm_create(self->m, &o, &vm);
  if (st) return dvm_py_raise(st, 0);
  int f;
  if ((st = dvm_vm_find_function(vm, fname, &f))) {
    put_back(self, &o, vm);
    return dvm_py_raise(st, 0);
  }
  int np = dvm_function_param_count(self->m, f), nr = dvm_function_result_count(self->m, f);
  Py_ssize_t nargs = is_dict ? np : PySequence_Fast_GET_SIZE(inputs);
  PyObject *result = NULL, *items[MAX_ARGS];
  dvm_value argv[MAX_ARGS], resv[MAX_ARGS]; /* only the first nargs are cleared: they are large */
  if (nargs > MAX_ARGS || nr > MAX_ARGS) {
    PyErr_Format(dvm_py_InvalidInput, "more than %d inputs or results", MAX_ARGS);
    nargs = 0;
    goto done;
  }
  memset(argv, 0, sizeof argv[0] * (size_t)nargs);
  if (is_dict) {
    if (bind_dict(self, f, inputs, np, items) < 0) goto done;
  } else {
    for (Py_ssize_t i = 0; i < nargs; i++) items[i] = PySequence_Fast_GET_ITEM(inputs, i);
  }
  for (Py_ssize_t i = 0; i < nargs; i++) {
    dvm_param_info info;
    if (i < np) dvm_function_param(self->m, f, (int)i, &info);
    else info = (dvm_param_info){.name = "(extra)", .kind = DVM_VAL_NONE, .rank = -1};
    if (items[i] && dvm_py_to_value(items[i], &info, &argv[i]) < 0) goto done;
  }
  dvm_vm_stats before = {0}, after = {0}; /* only when asked: each reads the pools under their locks */
  if (want_stats) dvm_vm_get_stats(vm, &before);
  Py_BEGIN_ALLOW_THREADS st = dvm_vm_invoke(vm, f, argv, (int)nargs, resv, nr);
  Py_END_ALLOW_THREADS if (want_stats) dvm_vm_get_stats(vm, &after);
  if (st) {
    dvm_py_raise(st, 0);
    goto done;
  }
  result = PyDict_New();
  for (int r = 0; r < nr; r++) {
    PyObject *val = result ? dvm_py_from_value(&resv[r], self->m) : (dvm_value_clear(&resv[r]), NULL);
    if (val && is_maps(self->m, f, r)) val = maps_of(val);
    if (!val || PyDict_SetItem(result, PyTuple_GET_ITEM(self->result_names[f], r), val) < 0) Py_CLEAR(result);
    Py_XDECREF(val);
  }
  if (result && want_stats) {
    PyObject *s = stats_dict(&before, &after);
    PyObject *pair = s ? PyTuple_Pack(2, result, s) : NULL;
    Py_XDECREF(s);
    Py_SETREF(result, pair);
  }
done:
  for (Py_ssize_t i = 0; i < nargs; i++) dvm_value_clear(&argv[i]);
  put_back(self, &o, vm);
  return result;
}

static PyObject *module_run(ModuleObject *self, PyObject *args, PyObject *kwargs) {
  return run_impl(self, args, kwargs, 0);
}

static PyObject *module_run_with_stats(ModuleObject *self, PyObject *args, PyObject *kwargs) {
  return run_impl(self, args, kwargs, 1);
}

static PyObject *module_close(ModuleObject *self, PyObject *unused) {
  module_clear_vms(self);
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"run", (PyCFunction)(void (*)(void))module_run, METH_VARARGS | METH_KEYWORDS,
     "run($self, inputs, *, function='main', device='auto', threads=None, results_on_device=False, tf32=False)\n--\n\n"
     "Runs a function of the module. `inputs` is a dict (input name: value) or a list in the\n"
     "function's order; a value is a NumPy array (used in place when C-contiguous, aligned and\n"
     "native-endian), any object with __dlpack__ (a CPU torch tensor...), a Python scalar or a\n"
     "sequence. Returns {result name: value}: NumPy arrays over the VM's result memory (no copy;\n"
     "their base is a dvm.Tensor), or dvm.Tensor objects for results left on a device when\n"
     "results_on_device=True. device is \"cpu\", \"cuda\" or \"auto\" (cuda when present and the module\n"
     "was compiled for it); threads is the number of kernel threads (None: all cores); tf32 lets\n"
     "CUDA f32 matrix products use TF32 tensor cores.\n"
     "Safe to call from many threads at once: each call runs on a VM of its own, without the GIL.\n"
     "Errors raise dvm.InvalidInput (wrong or missing inputs) or another dvm.Error with the VM's\n"
     "message."},
    {"run_with_stats", (PyCFunction)(void (*)(void))module_run_with_stats, METH_VARARGS | METH_KEYWORDS,
     "run_with_stats($self, inputs, *, function='main', device='auto', threads=None, results_on_device=False, "
     "tf32=False)\n--\n\n"
     "As run, and returns (results, stats): what this call did, as `dvm run --stats` prints it.\n"
     "stats = {\"instructions\", \"kernel_calls\", \"host_syncs\": counts over this call;\n"
     "\"cpu_pool\" (and \"cuda_pool\" where the call used the device): {\"in_use\", \"peak\",\n"
     "\"cached\": bytes after the call (peak since the VM was made: VMs are reused across calls),\n"
     "\"allocs\", \"reuses\": allocations from the system and from the pool's cache during it}}."},
    {"_signatures", (PyCFunction)module_signatures, METH_NOARGS,
     "_signatures() -> [(name, params, results, symbols, peak)]: the raw signatures, which\n"
     "Module.functions presents."},
    {"_sizes", (PyCFunction)module_sizes, METH_NOARGS, "_sizes() -> {constants, constant_bytes, kernels, released_bytes}."},
    {"_kernels", (PyCFunction)module_kernels, METH_NOARGS,
     "_kernels() -> [(name, device, variants)]: the kernel table, for inspect."},
    {"close_vms", (PyCFunction)module_close, METH_NOARGS,
     "close_vms() -> None: frees the idle VMs (and the memory their pools cache); the next run makes new ones."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef module_getset[] = {
    {"auto_device", (getter)module_auto_device, NULL,
     "(device, why): what device=\"auto\" runs on for this module, and why (e.g. no CUDA driver).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject dvm_py_ModuleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dvm._dvm.Module",
    .tp_basicsize = sizeof(ModuleObject),
    .tp_dealloc = (destructor)module_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Module(source): a verified .dvmb module loaded from a path (memory-mapped) or from "
              "bytes (copied). Use dvm.Module, dvm.load or dvm.compile.",
    .tp_methods = module_methods,
    .tp_getset = module_getset,
    .tp_init = (initproc)module_init,
    .tp_new = PyType_GenericNew,
};
