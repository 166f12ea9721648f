/* dvm._dvm, the CPython extension under the Python package: shared
 * declarations of its files (ext.c: the module and its errors; module.c:
 * the Module type and running; tensor.c: tensors between NumPy, DLPack and
 * dvm; strings.c: string tensors; compile.c: the compiler; generator.c: the
 * generator for dvm.genai).
 * It uses libdvm's public API and the compiler's (dvmc.h), nothing else of
 * dvm. */
#ifndef DVM_PY_EXT_H
#define DVM_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL dvm_py_ARRAY_API
#ifndef DVM_PY_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>
#if NPY_ABI_VERSION < 0x02000000 /* NumPy 1.x headers (NumPy 2 has the accessor) */
#define PyDataType_ELSIZE(d) ((npy_intp)(d)->elsize)
#endif

#include "dvm/dlpack.h"
#include "dvm/dvm.h"

/* Exceptions: dvm.Error and its subclasses (created in ext.c). */
extern PyObject *dvm_py_Error, *dvm_py_InvalidInput, *dvm_py_CompileError, *dvm_py_UnsupportedOp,
    *dvm_py_OutOfMemory, *dvm_py_DeviceError;

/* Raises the exception st's code maps to (a compile error when `compiling`)
 * with st's message, frees st and returns NULL. */
PyObject *dvm_py_raise(dvm_status *st, int compiling);

/* ---- tensor.c ---- */
extern PyTypeObject dvm_py_TensorType;
/* Prepares the dtype tables (bfloat16 from ml_dtypes when it is installed). */
int dvm_py_tensor_init(void);
/* The value for parameter p from obj: an int or float for scalar
 * parameters, else a tensor wrapping a NumPy array's memory (obj's own
 * when it is C-contiguous, aligned and native-endian), a DLPack producer's
 * tensor, or a NumPy conversion of scalars and sequences. *out holds one
 * reference. Returns -1 with an exception set on failure. */
int dvm_py_to_value(PyObject *obj, const dvm_param_info *p, dvm_value *out);
/* A result as a Python object: CPU tensors become NumPy arrays over the
 * tensor's memory (the array's base is a dvm.Tensor holding it), device
 * tensors dvm.Tensor objects, scalars ints and floats, shapes and tuples
 * tuples; arrays over the module's constants are read-only. Takes the
 * value's reference (clears *v) on success and on failure. */
PyObject *dvm_py_from_value(dvm_value *v, const dvm_module *m);
/* "f32" -> numpy dtype name, for signatures; NULL for no dtype. */
const char *dvm_py_dtype_name(dvm_dtype dt);

/* ---- strings.c ---- */
/* A string tensor for parameter p from obj: a NumPy text, bytes or object
 * array (or what NumPy makes one of) of str (as UTF-8) and bytes. */
int dvm_py_strings_in(PyObject *obj, const dvm_param_info *p, dvm_value *out);
/* A NumPy object array of str over a copy of t's elements (UTF-8; an
 * element that is not raises UnicodeDecodeError). */
PyObject *dvm_py_strings_out(const dvm_tensor *t);

/* ---- module.c ---- */
extern PyTypeObject dvm_py_ModuleType;

PyMODINIT_FUNC PyInit__dvm(void);

/* The dvm_module of a dvm._dvm.Module (borrowed), or NULL with an exception set. */
dvm_module *dvm_py_module_of(PyObject *obj);

/* ---- generator.c ---- */
extern PyTypeObject dvm_py_GeneratorType;
PyObject *dvm_py_generator_model_file(PyObject *self, PyObject *arg);
extern const char dvm_py_generator_model_file_doc[];

/* ---- compile.c ---- */
PyObject *dvm_py_compile(PyObject *self, PyObject *args, PyObject *kwargs);
extern const char dvm_py_compile_doc[];
PyObject *dvm_py_compiler_id(PyObject *self, PyObject *unused);

#endif
