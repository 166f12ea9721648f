/* String tensors between NumPy and dvm: NumPy's text ('U'), bytes ('S')
 * and object arrays of str or bytes in (text and bytes read as they lie,
 * without a Python object per element); object arrays of str out, as ONNX
 * Runtime returns them. Both ways copy: a dvm string tensor owns its
 * elements. */
#include "ext.h"

/* Code point c as UTF-8 at out; its byte count (c a Unicode scalar value). */
static size_t put_utf8(uint32_t c, char *out) {
  if (c < 0x80) return out[0] = (char)c, 1;
  if (c < 0x800) return out[0] = (char)(0xc0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3f)), 2;
  if (c < 0x10000) {
    out[0] = (char)(0xe0 | c >> 12);
    out[1] = (char)(0x80 | (c >> 6 & 0x3f));
    out[2] = (char)(0x80 | (c & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | c >> 18);
  out[1] = (char)(0x80 | (c >> 12 & 0x3f));
  out[2] = (char)(0x80 | (c >> 6 & 0x3f));
  out[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

/* Element i of a C-contiguous native text ('U', code points) or bytes ('S')
 * array into t, trailing NULs dropped as NumPy does; -1 with an exception
 * set for a code point that is no character. No Python object per element. */
static int text_item(PyArrayObject *arr, npy_intp i, char *buf, dvm_tensor *t, const dvm_param_info *p) {
  npy_intp size = PyDataType_ELSIZE(PyArray_DESCR(arr));
  const char *item = (const char *)PyArray_DATA(arr) + i * size;
  size_t len = 0;
  if (PyArray_DESCR(arr)->kind == 'S') {
    for (len = (size_t)size; len && !item[len - 1]; len--) {}
    memcpy(buf, item, len);
  } else {
    const uint32_t *u = (const uint32_t *)item;
    npy_intp n = size / 4;
    while (n && !u[n - 1]) n--;
    for (npy_intp k = 0; k < n; k++) {
      if (u[k] > 0x10ffff || (u[k] >= 0xd800 && u[k] <= 0xdfff))
        return PyErr_Format(dvm_py_InvalidInput, "input \"%s\": element %zd: code point 0x%x is not a character",
                            p->name, (Py_ssize_t)i, u[k]), -1;
      len += put_utf8(u[k], buf + len);
    }
  }
  dvm_status *st = dvm_tensor_set_string(t, i, buf, len);
  return st ? (dvm_py_raise(dvm_status_annotate(st, "input \"%s\"", p->name), 0), -1) : 0;
}

int dvm_py_strings_in(PyObject *obj, const dvm_param_info *p, dvm_value *out) {
  /* text and bytes arrays are read as they lie; anything else through objects */
  char kind = PyArray_Check(obj) ? PyArray_DESCR((PyArrayObject *)obj)->kind : 0;
  PyArrayObject *arr;
  if (kind == 'U' || kind == 'S') {
    PyArray_Descr *d = PyArray_DESCR((PyArrayObject *)obj);
    Py_INCREF(d);
    if (!PyArray_ISNBO(d->byteorder)) Py_SETREF(d, PyArray_DescrNewByteorder(d, NPY_NATIVE));
    arr = d ? (PyArrayObject *)PyArray_FromAny(obj, d, 0, 0, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_NOTSWAPPED, NULL) : NULL;
  } else {
    kind = 'O';
    arr = (PyArrayObject *)PyArray_FromAny(obj, PyArray_DescrFromType(NPY_OBJECT), 0, 0, NPY_ARRAY_CARRAY_RO, NULL);
  }
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
  if (kind != 'O') {
    char *buf = PyMem_Malloc((size_t)PyDataType_ELSIZE(PyArray_DESCR(arr)) + 1); /* 4 UTF-8 bytes a code point at most */
    int rc = buf ? 0 : (PyErr_NoMemory(), -1);
    for (npy_intp i = 0; i < PyArray_SIZE(arr) && rc == 0; i++) rc = text_item(arr, i, buf, t, p);
    PyMem_Free(buf);
    Py_DECREF(arr);
    if (rc < 0) {
      dvm_tensor_release(t);
      return -1;
    }
    *out = dvm_value_tensor(t);
    return 0;
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
