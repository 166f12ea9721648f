/* String tensors between NumPy and dvm: NumPy's text ('U'), bytes ('S')
 * and object arrays of str or bytes in; object arrays of str out, as ONNX
 * Runtime returns them. Both ways copy: a dvm string tensor owns its
 * elements. */
#include "ext.h"

int dvm_py_strings_in(PyObject *obj, const dvm_param_info *p, dvm_value *out) {
  PyArrayObject *arr =
      (PyArrayObject *)PyArray_FromAny(obj, PyArray_DescrFromType(NPY_OBJECT), 0, 0, NPY_ARRAY_CARRAY_RO, NULL);
  if (!arr) return -1;
  int rank = PyArray_NDIM(arr);
  if (rank > DVM_MAX_RANK) {
    Py_DECREF(arr);
    return PyErr_Format(dvm_py_InvalidInput, "input \"%s\": rank %d is more than dvm's %d", p->name, rank,
                        DVM_MAX_RANK), -1;
  }
  int64_t dims[DVM_MAX_RANK];
  for (int i = 0; i < rank; i++) dims[i] = PyArray_DIM(arr, i);
  dvm_tensor *t;
  dvm_status *st = dvm_tensor_create(DVM_STRING, rank, dims, &t);
  if (st) {
    Py_DECREF(arr);
    return dvm_py_raise(dvm_status_annotate(st, "input \"%s\"", p->name), 0), -1;
  }
  PyObject **items = PyArray_DATA(arr);
  for (npy_intp i = 0; i < PyArray_SIZE(arr) && !st; i++) {
    const char *s = NULL;
    Py_ssize_t n = 0;
    if (PyUnicode_Check(items[i])) {
      if (!(s = PyUnicode_AsUTF8AndSize(items[i], &n))) break; /* a lone surrogate: Python says so */
    } else if (PyBytes_Check(items[i])) {
      s = PyBytes_AS_STRING(items[i]);
      n = PyBytes_GET_SIZE(items[i]);
    } else {
      PyErr_Format(dvm_py_InvalidInput, "input \"%s\" is a string tensor: element %zd is %.80s, not str or bytes",
                   p->name, (Py_ssize_t)i, Py_TYPE(items[i])->tp_name);
      break;
    }
    st = dvm_tensor_set_string(t, i, s, (size_t)n);
  }
  Py_DECREF(arr);
  if (st) dvm_py_raise(dvm_status_annotate(st, "input \"%s\"", p->name), 0);
  if (PyErr_Occurred()) {
    dvm_tensor_release(t);
    return -1;
  }
  *out = dvm_value_tensor(t);
  return 0;
}

PyObject *dvm_py_strings_out(const dvm_tensor *t) {
  npy_intp dims[DVM_MAX_RANK];
  int rank = dvm_tensor_rank(t);
  for (int i = 0; i < rank; i++) dims[i] = (npy_intp)dvm_tensor_dims(t)[i];
  PyObject *arr = PyArray_SimpleNew(rank, dims, NPY_OBJECT);
  if (!arr) return NULL;
  PyObject **items = PyArray_DATA((PyArrayObject *)arr);
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    size_t len;
    const char *s = dvm_tensor_string(t, i, &len);
    PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "strict");
    if (!u) {
      Py_DECREF(arr);
      return NULL;
    }
    Py_XSETREF(items[i], u); /* the new array holds None */
  }
  return arr;
}
