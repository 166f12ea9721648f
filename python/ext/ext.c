/* dvm._dvm: the module, its exceptions, and the mapping of dvm status codes
 * to them. */
#define DVM_PY_IMPORT_ARRAY
#include <ctype.h>

#include "ext.h"

PyObject *dvm_py_Error, *dvm_py_InvalidInput, *dvm_py_CompileError, *dvm_py_UnsupportedOp,
    *dvm_py_OutOfMemory, *dvm_py_DeviceError;

static PyObject *class_of(dvm_code code, int compiling) {
  switch (code) {
  case DVM_UNIMPLEMENTED: return compiling ? dvm_py_UnsupportedOp : dvm_py_Error;
  case DVM_OUT_OF_MEMORY:
  case DVM_RESOURCE_EXHAUSTED: return dvm_py_OutOfMemory;
  case DVM_UNAVAILABLE: return dvm_py_DeviceError;
  case DVM_INVALID_ARGUMENT:
  case DVM_FAILED_PRECONDITION:
  case DVM_OUT_OF_RANGE: return compiling ? dvm_py_CompileError : dvm_py_InvalidInput;
  default: return compiling ? dvm_py_CompileError : dvm_py_Error;
  }
}

PyObject *dvm_py_raise(dvm_status *st, int compiling) {
  dvm_code code = dvm_status_code(st);
  PyObject *cls = class_of(code, compiling);
  const char *msg = dvm_status_message(st);
  PyObject *exc = PyObject_CallFunction(cls, "s", *msg ? msg : dvm_code_name(code));
  dvm_status_free(st);
  if (!exc) return NULL;
  char id[64]; /* "invalid argument" -> "INVALID_ARGUMENT" */
  snprintf(id, sizeof id, "%s", dvm_code_name(code));
  for (char *p = id; *p; p++) *p = *p == ' ' ? '_' : (char)toupper((unsigned char)*p);
  PyObject *name = PyUnicode_FromString(id);
  if (name && PyObject_SetAttrString(exc, "code", name) == 0) PyErr_SetObject(cls, exc);
  Py_XDECREF(name);
  Py_DECREF(exc);
  return NULL;
}

static int add_error(PyObject *mod, PyObject **slot, const char *name, PyObject *base, const char *doc) {
  char full[64];
  snprintf(full, sizeof full, "dvm.%s", name);
  *slot = PyErr_NewExceptionWithDoc(full, doc, base, NULL);
  if (!*slot) return -1;
  Py_INCREF(*slot);
  return PyModule_AddObject(mod, name, *slot) < 0 ? (Py_DECREF(*slot), -1) : 0;
}

static PyObject *py_probe(PyObject *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  dvm_device_kind dev;
  if (!name) return NULL;
  if (!dvm_device_parse(name, &dev)) return PyErr_Format(PyExc_ValueError, "unknown device \"%s\" (cpu, cuda)", name);
  char buf[256];
  dvm_status *st = dvm_device_probe(dev, buf, sizeof buf);
  if (st) {
    PyObject *r = Py_BuildValue("(Os)", Py_False, dvm_status_message(st));
    dvm_status_free(st);
    return r;
  }
  return Py_BuildValue("(Os)", Py_True, buf);
}

static PyMethodDef methods[] = {
    {"compile", (PyCFunction)(void (*)(void))dvm_py_compile, METH_VARARGS | METH_KEYWORDS, dvm_py_compile_doc},
    {"generator_model_file", dvm_py_generator_model_file, METH_O, dvm_py_generator_model_file_doc},
    {"compiler_id", dvm_py_compiler_id, METH_NOARGS,
     "compiler_id() -> int: differs between builds of the compiler, for keys of caches of compiled files."},
    {"probe", py_probe, METH_O,
     "probe(device) -> (present, description): whether a device (\"cpu\", \"cuda\") is there, "
     "what it is, or why it is not."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "dvm._dvm",
    "The C extension under the dvm package: modules, running and compiling over libdvm. "
    "Use the dvm package, not this module.",
    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__dvm(void) {
  import_array();
  if (dvm_py_tensor_init() < 0) return NULL;
  if (PyType_Ready(&dvm_py_TensorType) < 0 || PyType_Ready(&dvm_py_ModuleType) < 0 ||
      PyType_Ready(&dvm_py_GeneratorType) < 0)
    return NULL;
  PyObject *mod = PyModule_Create(&moduledef);
  if (!mod) return NULL;
  PyObject *errs = NULL;
  if (add_error(mod, &dvm_py_Error, "Error", NULL,
                "A dvm failure. `code` names the dvm status code (e.g. \"INVALID_ARGUMENT\"); the "
                "message is the VM's or the compiler's, naming the input, dim, symbol or node.") < 0 ||
      !(errs = PyTuple_Pack(2, dvm_py_Error, PyExc_ValueError)) ||
      add_error(mod, &dvm_py_InvalidInput, "InvalidInput", errs,
                "An input does not fit the function: a missing input, a wrong dtype, rank or shape, "
                "a dim outside its symbol's range, a failed check of the program.") < 0 ||
      add_error(mod, &dvm_py_CompileError, "CompileError", dvm_py_Error,
                "The model could not be compiled (malformed, inconsistent, or refused).") < 0 ||
      add_error(mod, &dvm_py_UnsupportedOp, "UnsupportedOp", dvm_py_CompileError,
                "The model uses an op, attribute or type dvm does not support; the message names "
                "the node.") < 0 ||
      add_error(mod, &dvm_py_OutOfMemory, "OutOfMemory", dvm_py_Error,
                "Memory ran out, or a configured limit (pool size, call depth, steps) was reached.") < 0 ||
      add_error(mod, &dvm_py_DeviceError, "DeviceError", dvm_py_Error,
                "A device (CUDA) is not available or failed.") < 0) {
    Py_XDECREF(errs);
    Py_DECREF(mod);
    return NULL;
  }
  Py_DECREF(errs);
  Py_INCREF(&dvm_py_TensorType);
  Py_INCREF(&dvm_py_ModuleType);
  Py_INCREF(&dvm_py_GeneratorType);
  if (PyModule_AddObject(mod, "Tensor", (PyObject *)&dvm_py_TensorType) < 0 ||
      PyModule_AddObject(mod, "Module", (PyObject *)&dvm_py_ModuleType) < 0 ||
      PyModule_AddObject(mod, "Generator", (PyObject *)&dvm_py_GeneratorType) < 0) {
    Py_DECREF(mod);
    return NULL;
  }
  return mod;
}
