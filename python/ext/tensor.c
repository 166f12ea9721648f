/* Tensors between NumPy, DLPack and dvm, without copies where the layout
 * allows: inputs wrap the array's memory (dvm_tensor_wrap), results become
 * arrays over the VM's memory whose base is a dvm.Tensor holding the
 * result's reference. */
#include <string.h>

#include "ext.h"

/* ml_dtypes.bfloat16 when installed (NumPy has no bfloat16); else bfloat16
 * results are returned as uint16 bit patterns. */
static PyArray_Descr *bf16_descr;

int dvm_py_tensor_init(void) {
  PyObject *mod = PyImport_ImportModule("ml_dtypes");
  if (!mod) {
    PyErr_Clear();
    return 0;
  }
  PyObject *type = PyObject_GetAttrString(mod, "bfloat16");
  Py_DECREF(mod);
  if (!type) {
    PyErr_Clear();
    return 0;
  }
  int ok = PyArray_DescrConverter(type, &bf16_descr);
  Py_DECREF(type);
  if (!ok) {
    PyErr_Clear();
    bf16_descr = NULL;
  }
  return 0;
}

static const int npy_of[DVM_DTYPE_COUNT] = {
    [DVM_F32] = NPY_FLOAT32, [DVM_F16] = NPY_FLOAT16, [DVM_BF16] = NPY_UINT16, [DVM_F64] = NPY_FLOAT64,
    [DVM_I8] = NPY_INT8,     [DVM_I16] = NPY_INT16,   [DVM_I32] = NPY_INT32,   [DVM_I64] = NPY_INT64,
    [DVM_U8] = NPY_UINT8,    [DVM_BOOL] = NPY_BOOL,   [DVM_U16] = NPY_UINT16,  [DVM_U32] = NPY_UINT32,
    [DVM_U64] = NPY_UINT64,  [DVM_STRING] = NPY_OBJECT,
};

static PyArray_Descr *descr_of(dvm_dtype dt) { /* a new reference */
  if (dt == DVM_BF16 && bf16_descr) {
    Py_INCREF(bf16_descr);
    return bf16_descr;
  }
  return PyArray_DescrFromType(npy_of[dt]);
}

static const char *const numpy_names[DVM_DTYPE_COUNT] = {
    [DVM_F32] = "float32", [DVM_F16] = "float16", [DVM_BF16] = "bfloat16", [DVM_F64] = "float64",
    [DVM_I8] = "int8",     [DVM_I16] = "int16",   [DVM_I32] = "int32",     [DVM_I64] = "int64",
    [DVM_U8] = "uint8",    [DVM_BOOL] = "bool",    [DVM_U16] = "uint16",    [DVM_U32] = "uint32",
    [DVM_U64] = "uint64",  [DVM_STRING] = "str",
};

const char *dvm_py_dtype_name(dvm_dtype dt) {
  return (unsigned)dt < DVM_DTYPE_COUNT ? numpy_names[dt] : NULL;
}

/* The dvm dtype of a NumPy dtype; false when dvm has none. */
static bool dtype_of(PyArray_Descr *d, dvm_dtype *out) {
  if (bf16_descr && d->typeobj == bf16_descr->typeobj) {
    *out = DVM_BF16;
    return true;
  }
  npy_intp size = PyDataType_ELSIZE(d);
  switch (d->kind) {
  case 'f': *out = size == 4 ? DVM_F32 : size == 2 ? DVM_F16 : DVM_F64; return size == 2 || size == 4 || size == 8;
  case 'i': *out = size == 1 ? DVM_I8 : size == 2 ? DVM_I16 : size == 4 ? DVM_I32 : DVM_I64; return size <= 8 && size != 3;
  case 'u': *out = size == 1 ? DVM_U8 : size == 2 ? DVM_U16 : size == 4 ? DVM_U32 : DVM_U64; return size <= 8 && size != 3;
  case 'b': *out = DVM_BOOL; return size == 1;
  default: return false;
  }
}

/* ---- dvm.Tensor: one reference to a dvm tensor ---- */

typedef struct {
  PyObject_HEAD
  dvm_tensor *t;
  int readonly; /* a module's constant, shared by every VM (and maybe by its file) */
} TensorObject;

static void tensor_dealloc(TensorObject *self) {
  dvm_tensor_release(self->t);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tensor_new_from(dvm_tensor *t) { /* takes t's reference */
  TensorObject *o = PyObject_New(TensorObject, &dvm_py_TensorType);
  if (!o) {
    dvm_tensor_release(t);
    return NULL;
  }
  o->t = t;
  o->readonly = 0;
  return (PyObject *)o;
}

static void capsule_deleter(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, "dltensor")) return; /* consumed: the consumer owns it */
  DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
  if (mt && mt->deleter) mt->deleter(mt);
}

/* A new tensor of t's dtype and shape holding a copy of its bytes. */
static dvm_status *copy_of(const dvm_tensor *t, dvm_tensor **out) {
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU)
    return dvm_status_new(DVM_UNIMPLEMENTED, "a copy of a tensor on the %s device for DLPack: copy it there "
                          "with the consumer instead", dvm_device_name(dvm_tensor_device(t)));
  dvm_status *st = dvm_tensor_create(dvm_tensor_dtype(t), dvm_tensor_rank(t), dvm_tensor_dims(t), out);
  if (!st) memcpy(dvm_tensor_data(*out), dvm_tensor_data(t), dvm_tensor_nbytes(t));
  return st;
}

static PyObject *tensor_dlpack(TensorObject *self, PyObject *args, PyObject *kwargs) {
  /* stream, max_version, dl_device: the tensor is ready (the VM has waited
   * for its device) and is handed on as it is. A read-only one (a module
   * constant) goes as a copy: the DLPack this exports (0.6) cannot mark a
   * tensor read-only, and a consumer writing into a constant would change
   * every VM's answers or fault on a read-only page. */
  static char *kw[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = NULL, *max_version = NULL, *dl_device = NULL, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO", kw, &stream, &max_version, &dl_device, &copy))
    return NULL;
  if (self->readonly && copy == Py_False)
    return PyErr_Format(PyExc_BufferError, "the tensor is a module constant, read-only, and DLPack 0.6 "
                        "cannot say so: export it with copy=None or copy=True");
  dvm_tensor *t = NULL; /* a reference of this call's: a copy, or self's retained */
  DLManagedTensor *mt;
  dvm_status *st = NULL;
  if (self->readonly || copy == Py_True) st = copy_of(self->t, &t);
  else dvm_tensor_retain(t = self->t);
  if (!st) st = dvm_tensor_to_dlpack(t, &mt);
  dvm_tensor_release(t); /* mt holds its own */
  if (st) return dvm_py_raise(st, 0);
  PyObject *cap = PyCapsule_New(mt, "dltensor", capsule_deleter);
  if (!cap) mt->deleter(mt);
  return cap;
}

static PyObject *tensor_dlpack_device(TensorObject *self, PyObject *unused) {
  return Py_BuildValue("(ii)", dvm_tensor_device(self->t) == DVM_DEVICE_CUDA ? kDLCUDA : kDLCPU, 0);
}

static PyObject *shape_tuple(const int64_t *dims, int rank) {
  PyObject *s = PyTuple_New(rank);
  for (int i = 0; s && i < rank; i++) PyTuple_SET_ITEM(s, i, PyLong_FromLongLong(dims[i]));
  return s;
}

static PyObject *tensor_shape(TensorObject *self, void *unused) {
  return shape_tuple(dvm_tensor_dims(self->t), dvm_tensor_rank(self->t));
}
static PyObject *tensor_dtype(TensorObject *self, void *unused) {
  return PyUnicode_FromString(numpy_names[dvm_tensor_dtype(self->t)]);
}
static PyObject *tensor_device(TensorObject *self, void *unused) {
  return PyUnicode_FromString(dvm_device_name(dvm_tensor_device(self->t)));
}
static PyObject *tensor_data_ptr(TensorObject *self, void *unused) {
  return PyLong_FromVoidPtr(dvm_tensor_data(self->t));
}

static PyObject *array_over(PyObject *tensor, int readonly);

static PyObject *tensor_numpy(TensorObject *self, PyObject *unused) {
  if (dvm_tensor_device(self->t) != DVM_DEVICE_CPU)
    return PyErr_Format(dvm_py_InvalidInput, "the tensor is on the %s device: pass it on with DLPack "
                        "(e.g. torch.from_dlpack), or run with results_on_device=False",
                        dvm_device_name(dvm_tensor_device(self->t)));
  return array_over((PyObject *)self, self->readonly);
}

static PyObject *tensor_repr(TensorObject *self) {
  char buf[160];
  dvm_shape_format(buf, sizeof buf, dvm_tensor_dtype(self->t), dvm_tensor_rank(self->t), dvm_tensor_dims(self->t));
  return PyUnicode_FromFormat("<dvm.Tensor %s on %s>", buf, dvm_device_name(dvm_tensor_device(self->t)));
}

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, ...) -> PyCapsule: the tensor for another framework, no copy."},
    {"__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device_type, device_id) as DLPack numbers them."},
    {"numpy", (PyCFunction)tensor_numpy, METH_NOARGS,
     "numpy() -> numpy.ndarray over the tensor's memory (CPU tensors only; no copy)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_shape, NULL, "The dims, a tuple of ints.", NULL},
    {"dtype", (getter)tensor_dtype, NULL, "The element type's NumPy name (\"float32\", \"bfloat16\", ...).", NULL},
    {"device", (getter)tensor_device, NULL, "Where the memory is: \"cpu\" or \"cuda\".", NULL},
    {"data_ptr", (getter)tensor_data_ptr, NULL, "The address of the first element (a device address on a device).", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject dvm_py_TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dvm.Tensor",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_repr = (reprfunc)tensor_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tensor the VM made: the base of the NumPy arrays dvm returns, or a result left "
              "on a device (run(..., results_on_device=True)). Pass it to other frameworks with "
              "DLPack (torch.from_dlpack(t)); .numpy() views a CPU tensor as an array.",
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
};

/* A NumPy array over a CPU Tensor's memory; the array holds the Tensor. */
static PyObject *array_over(PyObject *tensor, int readonly) {
  dvm_tensor *t = ((TensorObject *)tensor)->t;
  npy_intp dims[DVM_MAX_RANK];
  int rank = dvm_tensor_rank(t);
  for (int i = 0; i < rank; i++) dims[i] = (npy_intp)dvm_tensor_dims(t)[i];
  void *data = dvm_tensor_nbytes(t) ? dvm_tensor_data(t) : NULL;
  PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr_of(dvm_tensor_dtype(t)), rank, dims, NULL,
                                       data, readonly ? NPY_ARRAY_CARRAY_RO : NPY_ARRAY_CARRAY, NULL);
  if (!arr || !data) return arr; /* an empty array owns its own (empty) memory */
  Py_INCREF(tensor);
  if (PyArray_SetBaseObject((PyArrayObject *)arr, tensor) < 0) {
    Py_DECREF(arr);
    return NULL;
  }
  return arr;
}

/* ---- inputs ---- */

static void release_array(void *ctx) { /* the last reference may go on any thread */
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF((PyObject *)ctx);
  PyGILState_Release(g);
}

/* Wraps arr (a C-contiguous, aligned, native-endian array: a reference the
 * tensor takes over on success). */
static int wrap_array(PyArrayObject *arr, const dvm_param_info *p, dvm_value *out) {
  dvm_dtype dt;
  if (!dtype_of(PyArray_DESCR(arr), &dt)) {
    PyObject *s = PyObject_Str((PyObject *)PyArray_DESCR(arr));
    PyErr_Format(dvm_py_InvalidInput, "input \"%s\": NumPy dtype %S has no dvm dtype", p->name, s);
    Py_XDECREF(s);
    return -1;
  }
  int rank = PyArray_NDIM(arr);
  if (rank > DVM_MAX_RANK) {
    PyErr_Format(dvm_py_InvalidInput, "input \"%s\": rank %d is more than dvm's %d", p->name, rank, DVM_MAX_RANK);
    return -1;
  }
  int64_t dims[DVM_MAX_RANK];
  for (int i = 0; i < rank; i++) dims[i] = PyArray_DIM(arr, i);
  dvm_tensor *t;
  dvm_status *st = dvm_tensor_wrap(dt, rank, dims, PyArray_DATA(arr), release_array, arr, &t);
  if (st) {
    dvm_py_raise(dvm_status_annotate(st, "input \"%s\"", p->name), 0);
    return -1;
  }
  *out = dvm_value_tensor(t);
  return 0;
}

static int from_dlpack(PyObject *obj, const dvm_param_info *p, dvm_value *out) {
  PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
  if (!cap) return -1;
  DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
  if (!mt) {
    Py_DECREF(cap);
    return -1;
  }
  dvm_tensor *t;
  dvm_status *st = dvm_tensor_from_dlpack(mt, &t);
  if (st) { /* the capsule still owns mt and frees it */
    Py_DECREF(cap);
    dvm_py_raise(dvm_status_annotate(st, "input \"%s\"", p->name), 0);
    return -1;
  }
  PyCapsule_SetName(cap, "used_dltensor"); /* dvm owns it now */
  Py_DECREF(cap);
  *out = dvm_value_tensor(t);
  return 0;
}

/* A sequence or optional input (a tuple parameter): a list or tuple of
 * arrays, or of such lists (an optional is [] or [value]; None is []),
 * each array in the parameter's dtype. */
static int to_tuple(PyObject *obj, const dvm_param_info *p, dvm_value *out, int depth) {
  if (PyArray_Check(obj) || !(obj == Py_None || PyList_Check(obj) || PyTuple_Check(obj)) || depth >= 64)
    return PyErr_Format(dvm_py_InvalidInput, "input \"%s\" is a sequence or optional: pass a list of arrays "
                                             "([] or [value] for an optional), not %.80s", p->name,
                        Py_TYPE(obj)->tp_name), -1;
  PyObject *seq = obj == Py_None ? PyList_New(0) : PySequence_Fast(obj, "a sequence");
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  dvm_value *items = PyMem_Calloc((size_t)(n ? n : 1), sizeof *items);
  dvm_param_info ip = {.name = p->name, .kind = p->dtype < DVM_DTYPE_COUNT ? DVM_VAL_TENSOR : DVM_VAL_NONE,
                       .dtype = p->dtype < DVM_DTYPE_COUNT ? p->dtype : DVM_F32, .rank = -1};
  int rc = items ? 0 : (PyErr_NoMemory(), -1);
  for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
    PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
    rc = PyList_Check(o) || PyTuple_Check(o) ? to_tuple(o, p, &items[i], depth + 1) : dvm_py_to_value(o, &ip, &items[i]);
  }
  dvm_tuple *t = NULL;
  dvm_status *st = rc == 0 ? dvm_tuple_create((int)n, items, &t) : NULL;
  for (Py_ssize_t i = 0; i < n && items; i++) dvm_value_clear(&items[i]);
  PyMem_Free(items);
  Py_DECREF(seq);
  if (st) return dvm_py_raise(dvm_status_annotate(st, "input \"%s\"", p->name), 0), -1;
  if (rc == 0) *out = (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = t};
  return rc;
}

int dvm_py_to_value(PyObject *obj, const dvm_param_info *p, dvm_value *out) {
  if (p->kind == DVM_VAL_TUPLE) return to_tuple(obj, p, out, 0);
  if (p->kind == DVM_VAL_INT) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      PyObject *i = PyNumber_Index(obj);
      if (!i) return PyErr_Format(dvm_py_InvalidInput, "input \"%s\" is an int; got %.80s", p->name,
                                  Py_TYPE(obj)->tp_name), -1;
      v = PyLong_AsLongLong(i);
      Py_DECREF(i);
      if (v == -1 && PyErr_Occurred()) return -1;
    }
    *out = dvm_value_int(v);
    return 0;
  }
  if (p->kind == DVM_VAL_FLOAT) {
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred())
      return PyErr_Format(dvm_py_InvalidInput, "input \"%s\" is a float; got %.80s", p->name, Py_TYPE(obj)->tp_name), -1;
    *out = dvm_value_float(v);
    return 0;
  }
  if (p->kind == DVM_VAL_SHAPE) {
    PyObject *seq = PySequence_Fast(obj, "a shape input takes a sequence of ints");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    dvm_value v = {.kind = DVM_VAL_SHAPE, .rank = (uint8_t)n};
    for (Py_ssize_t i = 0; i < n && i < DVM_MAX_RANK; i++)
      v.u.dims[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    if (PyErr_Occurred()) return -1;
    if (n > DVM_MAX_RANK)
      return PyErr_Format(dvm_py_InvalidInput, "input \"%s\": rank %zd is more than dvm's %d", p->name, n, DVM_MAX_RANK), -1;
    *out = v;
    return 0;
  }
  /* text: a string parameter, or text, bytes or objects where the type is open */
  char kind = PyArray_Check(obj) ? PyArray_DESCR((PyArrayObject *)obj)->kind : 0;
  if ((p->kind == DVM_VAL_TENSOR && p->dtype == DVM_STRING) || kind == 'U' || kind == 'S' || kind == 'O')
    return dvm_py_strings_in(obj, p, out);
  if (!PyArray_Check(obj) && PyObject_HasAttrString(obj, "__dlpack__")) return from_dlpack(obj, p, out);
  /* arrays in their own dtype (checked by the VM), in native byte order;
   * scalars and sequences converted to the parameter's dtype */
  PyArray_Descr *want = NULL;
  if (PyArray_Check(obj)) {
    PyArray_Descr *d = PyArray_DESCR((PyArrayObject *)obj);
    if (!PyArray_ISNBO(d->byteorder) && !(want = PyArray_DescrNewByteorder(d, NPY_NATIVE))) return -1;
  } else if (p->kind == DVM_VAL_TENSOR) {
    want = descr_of(p->dtype);
  }
  PyObject *arr = PyArray_FromAny(obj, want, 0, 0, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_NOTSWAPPED, NULL);
  if (!arr) { /* NumPy's reason, as an input error naming the input */
    if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_Format(dvm_py_InvalidInput, "input \"%s\": %S", p->name, value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -1;
  }
  if (wrap_array((PyArrayObject *)arr, p, out) < 0) {
    Py_DECREF(arr);
    return -1;
  }
  return 0;
}

/* ---- results ---- */

PyObject *dvm_py_from_value(dvm_value *v, const dvm_module *m) {
  PyObject *r = NULL;
  switch ((dvm_kind)v->kind) {
  case DVM_VAL_INT: r = PyLong_FromLongLong(v->u.i); break;
  case DVM_VAL_FLOAT: r = PyFloat_FromDouble(v->u.f); break;
  case DVM_VAL_SHAPE: r = shape_tuple(v->u.dims, v->rank); break;
  case DVM_VAL_TENSOR: {
    dvm_tensor *t = v->u.tensor;
    if (dvm_tensor_dtype(t) == DVM_STRING) { /* a copy: str objects, not the VM's bytes */
      r = dvm_py_strings_out(t);
      dvm_value_clear(v);
      return r;
    }
    v->kind = DVM_VAL_NONE; /* the Tensor takes the reference */
    PyObject *obj = tensor_new_from(t);
    if (!obj) return NULL;
    ((TensorObject *)obj)->readonly = dvm_module_holds(m, t);
    if (dvm_tensor_device(t) != DVM_DEVICE_CPU) return obj;
    r = array_over(obj, ((TensorObject *)obj)->readonly);
    Py_DECREF(obj);
    return r;
  }
  case DVM_VAL_TUPLE: {
    int n = dvm_tuple_size(v->u.tuple);
    r = PyTuple_New(n);
    for (int i = 0; r && i < n; i++) {
      dvm_value item = *dvm_tuple_get(v->u.tuple, i);
      dvm_value_retain(&item);
      PyObject *o = dvm_py_from_value(&item, m);
      if (!o) Py_CLEAR(r);
      else PyTuple_SET_ITEM(r, i, o);
    }
    break;
  }
  default:
    PyErr_Format(dvm_py_Error, "a result of kind %s has no Python form", dvm_kind_name((dvm_kind)v->kind));
  }
  dvm_value_clear(v);
  return r;
}
