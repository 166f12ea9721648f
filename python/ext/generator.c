/* dvm._dvm.Generator: libdvm's generator (dvm/generate.h) for dvm.genai.
 *
 * A thin wrapper: the config's search settings come in through the
 * genai_config.json the caller names (dvm.genai writes its overlays into
 * one), batch size and threads as options. The generator belongs to one
 * thread at a time, so a call that finds it in use by another Python
 * thread (which released the GIL while the model runs) raises instead of
 * entering it twice. */
#include <string.h>

#include "ext.h"

#include "dvm/generate.h"

typedef struct {
  PyObject_HEAD
  dvm_generator *g;
  PyObject *module; /* the dvm._dvm.Module, kept alive beside the generator's own reference */
  int busy;
} GeneratorObject;

static void generator_dealloc(GeneratorObject *self) {
  dvm_generator_destroy(self->g);
  Py_XDECREF(self->module);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int generator_init(GeneratorObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"module", "config_path", "batch_size", "threads", "kv_dtype", "kv_block_size", "kv_budget",
                       NULL};
  PyObject *mod, *path;
  int batch = 0, threads = 0, block = 0;
  long long budget = 0;
  const char *kv = "f32";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O&|ii$siL:Generator", kw, &dvm_py_ModuleType, &mod,
                                   PyUnicode_FSConverter, &path, &batch, &threads, &kv, &block, &budget))
    return -1;
  if (strcmp(kv, "f32") && strcmp(kv, "f16")) {
    Py_DECREF(path);
    PyErr_Format(PyExc_ValueError, "kv_dtype must be \"f32\" or \"f16\", got \"%s\"", kv);
    return -1;
  }
  if (self->g) {
    Py_DECREF(path);
    PyErr_SetString(PyExc_RuntimeError, "Generator is already made");
    return -1;
  }
  dvm_module *m = dvm_py_module_of(mod);
  if (!m) {
    Py_DECREF(path);
    return -1;
  }
  dvm_generator_options o;
  dvm_generator_options_init(&o);
  o.batch_size = batch;
  o.threads = threads;
  o.kv_dtype = strcmp(kv, "f16") ? DVM_F32 : DVM_F16;
  o.kv_block_size = block;
  o.kv_budget = budget;
  dvm_status *st;
  const char *p = PyBytes_AS_STRING(path);
  Py_BEGIN_ALLOW_THREADS st = dvm_generator_create(m, p, &o, &self->g);
  Py_END_ALLOW_THREADS Py_DECREF(path);
  if (st) {
    dvm_py_raise(st, 0);
    return -1;
  }
  Py_INCREF(mod);
  self->module = mod;
  return 0;
}

/* Takes the generator for a call; 0 on success, -1 with an exception set. */
static int enter(GeneratorObject *self) {
  if (!self->g) {
    PyErr_SetString(PyExc_RuntimeError, "Generator was not made (its __init__ did not run or failed)");
    return -1;
  }
  if (self->busy) {
    PyErr_SetString(dvm_py_Error, "the generator is in use by another thread (one thread at a time)");
    return -1;
  }
  self->busy = 1;
  return 0;
}

/* The sequence index arg names; -1 with an exception set when it is not one. */
static int seq_arg(GeneratorObject *self, PyObject *arg) {
  long b = PyLong_AsLong(arg);
  if (b == -1 && PyErr_Occurred()) return -1;
  if (enter(self) < 0) return -1;
  self->busy = 0;
  int n = dvm_generator_batch_size(self->g);
  if (b >= 0 && b < n) return (int)b;
  PyErr_Format(PyExc_IndexError, "sequence %ld out of range: the batch has %d", b, n);
  return -1;
}

/* Runs f(g) with the GIL released. */
static PyObject *run(GeneratorObject *self, dvm_status *(*f)(dvm_generator *)) {
  if (enter(self) < 0) return NULL;
  dvm_status *st;
  Py_BEGIN_ALLOW_THREADS st = f(self->g);
  Py_END_ALLOW_THREADS self->busy = 0;
  if (st) return dvm_py_raise(st, 0);
  Py_RETURN_NONE;
}

static PyObject *generator_append(GeneratorObject *self, PyObject *rows) {
  if (enter(self) < 0) return NULL;
  int n = dvm_generator_batch_size(self->g);
  PyObject *seq = PySequence_Fast(rows, "append: expected a sequence of token arrays, one per sequence");
  PyArrayObject **arr = PyMem_Calloc((size_t)n, sizeof *arr);
  const int32_t **tokens = PyMem_Calloc((size_t)n, sizeof *tokens);
  int *counts = PyMem_Calloc((size_t)n, sizeof *counts);
  PyObject *r = NULL;
  if (!seq || !arr || !tokens || !counts) {
    if (seq) PyErr_NoMemory();
    goto done;
  }
  if (PySequence_Fast_GET_SIZE(seq) != n) {
    PyErr_Format(dvm_py_InvalidInput, "append: %zd token rows for a batch of %d sequences",
                 PySequence_Fast_GET_SIZE(seq), n);
    goto done;
  }
  for (int b = 0; b < n; b++) {
    PyObject *o = PySequence_Fast_GET_ITEM(seq, b);
    /* safe casts only: an int64 id past int32 must not wrap into the vocabulary */
    arr[b] = (PyArrayObject *)PyArray_FROMANY(o, NPY_INT32, 1, 1, NPY_ARRAY_IN_ARRAY);
    if (!arr[b]) goto done;
    tokens[b] = PyArray_DATA(arr[b]);
    counts[b] = (int)PyArray_DIM(arr[b], 0);
    if (PyArray_DIM(arr[b], 0) > INT32_MAX) {
      PyErr_Format(dvm_py_InvalidInput, "append: sequence %d: too many tokens", b);
      goto done;
    }
  }
  dvm_status *st;
  Py_BEGIN_ALLOW_THREADS st = dvm_generator_append(self->g, tokens, counts);
  Py_END_ALLOW_THREADS if (st) dvm_py_raise(st, 0);
  else r = (Py_INCREF(Py_None), Py_None);
done:
  for (int b = 0; arr && b < n; b++) Py_XDECREF(arr[b]);
  PyMem_Free(arr);
  PyMem_Free(tokens);
  PyMem_Free(counts);
  Py_XDECREF(seq);
  self->busy = 0;
  return r;
}

static PyObject *generator_compute_logits(GeneratorObject *self, PyObject *unused) {
  return run(self, dvm_generator_compute_logits);
}

static PyObject *generator_next(GeneratorObject *self, PyObject *unused) {
  return run(self, dvm_generator_next);
}

/* A NumPy copy of n items at p (the generator's memory is borrowed only
 * until its next call). */
static PyObject *copy_out(const void *p, npy_intp n, int type) {
  PyObject *a = PyArray_SimpleNew(1, &n, type);
  if (a && n) memcpy(PyArray_DATA((PyArrayObject *)a), p, (size_t)n * PyArray_ITEMSIZE((PyArrayObject *)a));
  return a;
}

static PyObject *generator_logits(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0) return NULL;
  const float *l = dvm_generator_logits(self->g, b);
  if (!l) Py_RETURN_NONE;
  return copy_out(l, dvm_generator_vocab_size(self->g), NPY_FLOAT32);
}

static PyObject *generator_sequence(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0) return NULL;
  int n = 0;
  const int32_t *s = dvm_generator_sequence(self->g, b, &n);
  return copy_out(s, n, NPY_INT32);
}

static PyObject *generator_seq_done(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0) return NULL;
  return PyBool_FromLong(dvm_generator_seq_done(self->g, b));
}

static PyObject *generator_reset(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0 || enter(self) < 0) return NULL;
  dvm_generator_reset(self->g, b);
  self->busy = 0;
  Py_RETURN_NONE;
}

/* set_search(b, **settings): dvm_generator_set_search with the settings
 * given (the others keep the generator's). */
static PyObject *generator_set_search(GeneratorObject *self, PyObject *args, PyObject *kwargs) {
  static char *kw[] = {"b", "do_sample", "top_k", "top_p", "temperature", "repetition_penalty", "seed", "logprobs",
                       NULL};
  PyObject *barg;
  dvm_generator_options o;
  dvm_generator_options_init(&o);
  int do_sample = -1;
  long long seed = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$pidddLi:set_search", kw, &barg, &do_sample, &o.top_k, &o.top_p,
                                   &o.temperature, &o.repetition_penalty, &seed, &o.logprobs))
    return NULL;
  if (seed < -1) return PyErr_Format(dvm_py_InvalidInput, "set_search: seed must be 0 or more, got %lld", seed);
  o.do_sample = do_sample;
  o.seed = seed;
  int b = seq_arg(self, barg);
  if (b < 0 || enter(self) < 0) return NULL;
  dvm_status *st = dvm_generator_set_search(self->g, b, &o);
  self->busy = 0;
  if (st) return dvm_py_raise(st, 0);
  Py_RETURN_NONE;
}

/* token_logprobs(b): dvm_generator_token_logprobs as (token, logprob,
 * [(id, logprob), ...]), or None. */
static PyObject *generator_token_logprobs(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0 || enter(self) < 0) return NULL;
  const dvm_generator_logprobs *lp = dvm_generator_token_logprobs(self->g, b);
  self->busy = 0;
  if (!lp) Py_RETURN_NONE;
  PyObject *top = PyList_New(lp->k);
  for (int i = 0; top && i < lp->k; i++) {
    PyObject *pair = Py_BuildValue("(id)", lp->top[i], (double)lp->top_logprob[i]);
    if (!pair) {
      Py_CLEAR(top);
      break;
    }
    PyList_SET_ITEM(top, i, pair);
  }
  return top ? Py_BuildValue("(idN)", lp->token, (double)lp->logprob, top) : NULL;
}

/* rng(b): sequence b's own random stream as four ints, or None. */
static PyObject *generator_rng(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0 || enter(self) < 0) return NULL;
  uint64_t s[4];
  bool own = dvm_generator_get_rng(self->g, b, s);
  self->busy = 0;
  if (!own) Py_RETURN_NONE;
  return Py_BuildValue("(KKKK)", (unsigned long long)s[0], (unsigned long long)s[1], (unsigned long long)s[2],
                       (unsigned long long)s[3]);
}

/* set_rng(b, state): dvm_generator_set_rng with what rng(b) gave. */
static PyObject *generator_set_rng(GeneratorObject *self, PyObject *args) {
  PyObject *barg;
  unsigned long long s[4];
  if (!PyArg_ParseTuple(args, "O(KKKK):set_rng", &barg, &s[0], &s[1], &s[2], &s[3])) return NULL;
  int b = seq_arg(self, barg);
  if (b < 0 || enter(self) < 0) return NULL;
  uint64_t state[4] = {s[0], s[1], s[2], s[3]};
  dvm_status *st = dvm_generator_set_rng(self->g, b, state);
  self->busy = 0;
  if (st) return dvm_py_raise(st, 0);
  Py_RETURN_NONE;
}

static PyObject *generator_done(GeneratorObject *self, PyObject *unused) {
  if (enter(self) < 0) return NULL;
  self->busy = 0;
  return PyBool_FromLong(dvm_generator_done(self->g));
}

static PyObject *generator_stats(GeneratorObject *self, PyObject *unused) {
  if (enter(self) < 0) return NULL;
  self->busy = 0;
  dvm_vm_stats s;
  dvm_vm_get_stats(dvm_generator_vm(self->g), &s);
  dvm_generator_kv_stats kv;
  dvm_generator_get_kv_stats(self->g, &kv);
  return Py_BuildValue("{s:K,s:K,s:K,s:s,s:i,s:n,s:i,s:i,s:L,s:L,s:s}", "invocations",
                       (unsigned long long)s.invocations, "kernel_calls", (unsigned long long)s.kernel_calls,
                       "result_copies", (unsigned long long)s.result_copies, "kv_dtype", dvm_dtype_name(kv.dtype),
                       "kv_block_size", kv.block_size, "kv_block_bytes", (Py_ssize_t)kv.block_bytes, "kv_blocks",
                       kv.blocks, "kv_free", kv.free, "prefix_queries", (long long)kv.prefix_queries, "prefix_hits",
                       (long long)kv.prefix_hits, "kv_note", dvm_generator_kv_note(self->g));
}

/* kv_need(b): the blocks sequence b takes at the next step (0 without a
 * paged cache). */
static PyObject *generator_kv_need(GeneratorObject *self, PyObject *arg) {
  int b = seq_arg(self, arg);
  if (b < 0 || enter(self) < 0) return NULL;
  int need = dvm_generator_kv_need(self->g, b);
  self->busy = 0;
  return PyLong_FromLong(need);
}

enum { BATCH_SIZE, MAX_LENGTH, VOCAB_SIZE };

static PyObject *get_int(GeneratorObject *self, void *which) {
  if (enter(self) < 0) return NULL;
  self->busy = 0;
  const dvm_generator *g = self->g;
  switch ((intptr_t)which) {
  case BATCH_SIZE: return PyLong_FromLong(dvm_generator_batch_size(g));
  case MAX_LENGTH: return PyLong_FromLong(dvm_generator_max_length(g));
  default: return PyLong_FromLong(dvm_generator_vocab_size(g));
  }
}

static PyGetSetDef generator_getset[] = {
    {"batch_size", (getter)get_int, NULL, "Sequences in the batch.", (void *)BATCH_SIZE},
    {"max_length", (getter)get_int, NULL, "Tokens per sequence, prompt included.", (void *)MAX_LENGTH},
    {"vocab_size", (getter)get_int, NULL, "Logits per token.", (void *)VOCAB_SIZE},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef generator_methods[] = {
    {"append", (PyCFunction)generator_append, METH_O,
     "append(rows): rows[b] (int32 tokens, possibly none) appended to sequence b; all or nothing."},
    {"compute_logits", (PyCFunction)generator_compute_logits, METH_NOARGS,
     "compute_logits(): runs the model on the tokens appended since it last ran."},
    {"next", (PyCFunction)generator_next, METH_NOARGS,
     "next(): chooses and appends each unfinished sequence's next token (computing logits first if needed)."},
    {"logits", (PyCFunction)generator_logits, METH_O,
     "logits(b) -> float32 [vocab] (a copy): sequence b's logits after its last token, or None before any."},
    {"sequence", (PyCFunction)generator_sequence, METH_O, "sequence(b) -> int32 array (a copy): its tokens."},
    {"seq_done", (PyCFunction)generator_seq_done, METH_O, "seq_done(b) -> bool."},
    {"reset", (PyCFunction)generator_reset, METH_O,
     "reset(b): empties sequence b for a new one (done, the generator's search settings again)."},
    {"set_search", (PyCFunction)(void (*)(void))generator_set_search, METH_VARARGS | METH_KEYWORDS,
     "set_search(b, *, do_sample, top_k, top_p, temperature, repetition_penalty, seed, logprobs): sequence b's own "
     "search settings until its reset; those not given keep the generator's."},
    {"token_logprobs", (PyCFunction)generator_token_logprobs, METH_O,
     "token_logprobs(b) -> (token, logprob, [(id, logprob), ...]) or None: the log-probabilities (the model's raw "
     "log_softmax) of the token the last next() chose for b and of its `logprobs` most likely tokens."},
    {"rng", (PyCFunction)generator_rng, METH_O,
     "rng(b) -> (4 ints) or None: where sequence b's own random stream (a seed's) stands."},
    {"set_rng", (PyCFunction)generator_set_rng, METH_VARARGS,
     "set_rng(b, state): sequence b draws on from `state` (what rng(b) gave), until its reset."},
    {"done", (PyCFunction)generator_done, METH_NOARGS, "done() -> bool: every sequence is done."},
    {"kv_need", (PyCFunction)generator_kv_need, METH_O,
     "kv_need(b) -> int: the paged cache's blocks sequence b takes at the next step."},
    {"stats", (PyCFunction)generator_stats, METH_NOARGS,
     "stats() -> {invocations, kernel_calls, result_copies, kv_dtype, kv_block_size, kv_block_bytes, kv_blocks, "
     "kv_free, prefix_queries, prefix_hits, kv_note}: its VM's counts since it was made, and its KV cache: element "
     "dtype, blocks (kv_block_size 0: contiguous, kv_note says why when paging was asked for), free blocks and "
     "prompt tokens found already computed."},
    {NULL, NULL, 0, NULL}};

const char dvm_py_generator_model_file_doc[] =
    "generator_model_file(config_path) -> (str, str): checks genai_config.json as the generator reads it "
    "and returns model.decoder.filename and model.decoder.outputs.logits.";

PyObject *dvm_py_generator_model_file(PyObject *self, PyObject *arg) {
  PyObject *path;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  char name[256], logits[256];
  dvm_status *st = dvm_generator_model_file(PyBytes_AS_STRING(path), name, logits, sizeof name);
  Py_DECREF(path);
  if (st) return dvm_py_raise(st, 0);
  PyObject *file = PyUnicode_DecodeFSDefault(name);
  return file ? Py_BuildValue("(Ns)", file, logits) : NULL;
}

PyTypeObject dvm_py_GeneratorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dvm._dvm.Generator",
    .tp_basicsize = sizeof(GeneratorObject),
    .tp_dealloc = (destructor)generator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Generator(module, config_path, batch_size=0, threads=0): libdvm's generator over a module "
              "compiled from a model folder and its genai_config.json. dvm.genai.Generator is the API to use.",
    .tp_methods = generator_methods,
    .tp_getset = generator_getset,
    .tp_init = (initproc)generator_init,
    .tp_new = PyType_GenericNew,
};
