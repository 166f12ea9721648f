/* An infer request (KServe v2 JSON, with Triton's binary tensor data
 * extension) to tensors, checked against the model's signature before any
 * tensor is allocated: names, datatypes, ranks, constant dims, symbol
 * ranges and agreement, element counts (overflow-checked, bounded), and
 * binary sizes against the bytes actually present. Every failure is
 * DVM_INVALID_ARGUMENT naming the input and the fact. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static const struct {
  dvm_dtype dt;
  const char *name;
} datatypes[] = {
    {DVM_F32, "FP32"}, {DVM_F16, "FP16"}, {DVM_BF16, "BF16"}, {DVM_F64, "FP64"},
    {DVM_I8, "INT8"},  {DVM_I16, "INT16"}, {DVM_I32, "INT32"}, {DVM_I64, "INT64"},
    {DVM_U8, "UINT8"}, {DVM_BOOL, "BOOL"}, {DVM_U16, "UINT16"}, {DVM_U32, "UINT32"},
    {DVM_U64, "UINT64"}, {DVM_STRING, "BYTES"},
};

const char *dvms_datatype_name(dvm_dtype dt) {
  for (size_t i = 0; i < sizeof datatypes / sizeof datatypes[0]; i++)
    if (datatypes[i].dt == dt) return datatypes[i].name;
  return "?";
}

static dvm_status *bad(const char *fmt, ...) DVM_PRINTF(1, 2);
static dvm_status *bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(DVM_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return st;
}

static int find_sig(const dvms_sig *sig, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(sig[i].name, name) == 0) return i;
  return -1;
}

/* Binds the dims of input i to the signature, checking constants, symbol
 * ranges and that one symbol has one value across inputs. */
static dvm_status *check_shape(const dvms_sigs *sigs, int i, const int64_t *dims, int rank,
                               dvms_request *req) {
  const dvms_sig *s = &sigs->in[i];
  if (rank != s->rank) return bad("input \"%s\": rank %d, expected %d", s->name, rank, s->rank);
  for (int d = 0; d < rank; d++) {
    if (s->dims[d] >= 0 && dims[d] != s->dims[d])
      return bad("input \"%s\": dim %d is %lld, expected %lld", s->name, d, (long long)dims[d],
                 (long long)s->dims[d]);
    int k = s->sym[d];
    if (k < 0) continue;
    if (dims[d] < sigs->sym_lo[k] || dims[d] > sigs->sym_hi[k])
      return bad("input \"%s\": dim %d (%s) is %lld, must be in %lld..%lld", s->name, d,
                 sigs->sym_name[k], (long long)dims[d], (long long)sigs->sym_lo[k],
                 (long long)sigs->sym_hi[k]);
    if (req->sym[k] >= 0 && req->sym[k] != dims[d])
      return bad("input \"%s\": dim %d (%s) is %lld, but another input has %s = %lld", s->name, d,
                 sigs->sym_name[k], (long long)dims[d], sigs->sym_name[k], (long long)req->sym[k]);
    req->sym[k] = dims[d];
  }
  return NULL;
}

/* The text of inputs[idx]'s data in the body. */
typedef struct body_text {
  const char *body;
  dvms_span *spans;
  size_t nspans;
} body_text;

/* BYTES in KServe's binary form: each element's byte count (u32
 * little-endian), then its bytes, filling exactly n bytes. */
static dvm_status *bytes_binary(dvm_tensor *t, const uint8_t *p, size_t n, const char *name) {
  size_t at = 0;
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    if (n - at < 4) return bad("input \"%s\": binary data ends in element %lld's length", name, (long long)i);
    size_t len = (size_t)p[at] | (size_t)p[at + 1] << 8 | (size_t)p[at + 2] << 16 | (size_t)p[at + 3] << 24;
    at += 4;
    if (len > n - at)
      return bad("input \"%s\": element %lld has %zu bytes, %zu are left", name, (long long)i, len, n - at);
    dvm_status *st = dvm_tensor_set_string(t, i, (const char *)p + at, len);
    if (st) return st;
    at += len;
  }
  if (at != n) return bad("input \"%s\": %zu bytes of binary data after its last element", name, n - at);
  return NULL;
}

/* Strings of v (an array, nested or flat, of strings) into t from element *k on. */
static dvm_status *bytes_of(dvm_tensor *t, const json_t *v, int depth, int64_t *k, const char *name) {
  if (json_is_string(v)) {
    if (*k >= dvm_tensor_numel(t)) {
      ++*k; /* counted: the caller names the count */
      return NULL;
    }
    return dvm_tensor_set_string(t, (*k)++, json_string_value(v), json_string_length(v));
  }
  if (!json_is_array(v) || depth > DVM_MAX_RANK)
    return bad("input \"%s\": BYTES data must be strings (in arrays as deep as the shape)", name);
  for (size_t i = 0; i < json_array_size(v); i++) {
    dvm_status *st = bytes_of(t, json_array_get(v, i), depth + 1, k, name);
    if (st) return st;
  }
  return NULL;
}

/* BYTES in JSON: the data's text, an array of strings; *n their count. */
static dvm_status *bytes_json(dvm_tensor *t, const char *text, size_t size, const char *name, int64_t *n) {
  json_error_t err;
  json_t *v = json_loadb(text, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
  if (!v) return bad("input \"%s\": its data is not JSON: %s", name, err.text);
  dvm_status *st = bytes_of(t, v, 0, n, name);
  json_decref(v);
  return st;
}

static dvm_status *parse_input(const json_t *in, size_t idx, const dvms_sigs *sigs, int64_t max_elements,
                               const uint8_t *bin, size_t bin_size, size_t *bin_used, const body_text *text,
                               dvms_request *req) {
  const char *name = json_string_value(json_object_get(in, "name"));
  const char *datatype = json_string_value(json_object_get(in, "datatype"));
  const json_t *shape = json_object_get(in, "shape"), *data = json_object_get(in, "data");
  if (!json_is_object(in) || !name) return bad("inputs[%zu]: an object with a \"name\" string expected", idx);
  int i = find_sig(sigs->in, sigs->nin, name);
  if (i < 0) return bad("input \"%s\": the model has no such input", name);
  if (req->inputs[i]) return bad("input \"%s\": given twice", name);
  const dvms_sig *s = &sigs->in[i];
  if (!datatype) return bad("input \"%s\": \"datatype\" string expected", name);
  if (strcmp(datatype, dvms_datatype_name(s->dtype)) != 0)
    return bad("input \"%s\": datatype %s, expected %s", name, datatype, dvms_datatype_name(s->dtype));
  if (!json_is_array(shape) || json_array_size(shape) > DVM_MAX_RANK)
    return bad("input \"%s\": \"shape\" must be an array of at most %d dims", name, DVM_MAX_RANK);
  int64_t dims[DVM_MAX_RANK];
  int rank = (int)json_array_size(shape);
  for (int d = 0; d < rank; d++) {
    const json_t *v = json_array_get(shape, (size_t)d);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return bad("input \"%s\": shape[%d] must be a non-negative integer", name, d);
    dims[d] = json_integer_value(v);
  }
  dvm_status *st = check_shape(sigs, i, dims, rank, req);
  if (st) return st;
  int64_t numel;
  if ((st = dvm_shape_numel(rank, dims, &numel)) || numel > max_elements) {
    dvm_status_free(st);
    return bad("input \"%s\": more than %lld elements", name, (long long)max_elements);
  }
  bool text_in = s->dtype == DVM_STRING; /* BYTES: elements of their own lengths */
  size_t nbytes = text_in ? 0 : (size_t)numel * dvm_dtype_size(s->dtype);
  const json_t *params = json_object_get(in, "parameters");
  const json_t *bsize = params ? json_object_get(params, "binary_data_size") : NULL;
  if (bsize) {
    if (!json_is_integer(bsize) || json_integer_value(bsize) < 0)
      return bad("input \"%s\": binary_data_size must be a non-negative integer", name);
    if (text_in) nbytes = (size_t)json_integer_value(bsize);
    if ((uint64_t)json_integer_value(bsize) != nbytes)
      return bad("input \"%s\": binary_data_size is %lld, its shape needs %zu bytes", name,
                 (long long)json_integer_value(bsize), nbytes);
    if (nbytes > bin_size - *bin_used)
      return bad("input \"%s\": binary_data_size %zu but only %zu bytes of binary data remain", name,
                 nbytes, bin_size - *bin_used);
    if (data) return bad("input \"%s\": both binary_data_size and \"data\"", name);
  } else if (!data) {
    return bad("input \"%s\": no \"data\" and no binary_data_size", name);
  } else if (s->dtype == DVM_F16 || s->dtype == DVM_BF16) {
    return bad("input \"%s\": %s data must be sent as binary tensor data", name, datatype);
  }
  dvm_tensor *t;
  if ((st = dvm_tensor_create(s->dtype, rank, dims, &t))) return st;
  req->inputs[i] = t;
  if (bsize) {
    if (text_in) st = bytes_binary(t, bin + *bin_used, nbytes, name);
    else if (nbytes) memcpy(dvm_tensor_data(t), bin + *bin_used, nbytes);
    *bin_used += nbytes;
    return st;
  }
  const dvms_span *sp = idx < text->nspans && text->spans[idx].end ? &text->spans[idx] : NULL;
  if (!sp) return bad("input \"%s\": its \"data\" was not found in the request's text", name);
  int64_t n = 0;
  if ((st = (text_in ? bytes_json : dvms_json_fill)(t, text->body + sp->start, sp->end - sp->start, name, &n)))
    return st;
  if (n != numel) return bad("input \"%s\": data has %lld elements, its shape needs %lld", name, (long long)n, (long long)numel);
  return NULL;
}

static dvm_status *parse_outputs(const json_t *outputs, int binary_default, const dvms_sigs *sigs,
                                 dvms_request *req) {
  /* an empty list asks for nothing in particular: every output, as when
   * "outputs" is absent (Triton and a gRPC client, whose empty repeated
   * field cannot be told from a missing one, do the same) */
  if (!outputs || (json_is_array(outputs) && json_array_size(outputs) == 0)) {
    for (int i = 0; i < sigs->nout; i++) req->want[i] = binary_default ? DVMS_OUT_BINARY : DVMS_OUT_JSON;
    return NULL;
  }
  if (!json_is_array(outputs)) return bad("\"outputs\" must be an array");
  size_t k;
  const json_t *o;
  json_array_foreach(outputs, k, o) {
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name) return bad("outputs[%zu]: an object with a \"name\" string expected", k);
    int i = find_sig(sigs->out, sigs->nout, name);
    if (i < 0) return bad("output \"%s\": the model has no such output", name);
    const json_t *p = json_object_get(o, "parameters");
    const json_t *b = p ? json_object_get(p, "binary_data") : NULL;
    if (b && !json_is_boolean(b)) return bad("output \"%s\": binary_data must be a boolean", name);
    int binary = b ? json_is_true(b) : binary_default;
    req->want[i] = binary ? DVMS_OUT_BINARY : DVMS_OUT_JSON;
  }
  return NULL;
}

static dvm_status *parse(const json_t *root, const uint8_t *bin, size_t bin_size, const body_text *text,
                         const dvms_sigs *sigs, int64_t max_elements, dvms_request *req) {
  if (!json_is_object(root)) return bad("the request must be a JSON object");
  const json_t *id = json_object_get(root, "id");
  if (id) {
    if (!json_is_string(id)) return bad("\"id\" must be a string");
    if (!(req->id = strdup(json_string_value(id)))) return dvm_status_new(DVM_OUT_OF_MEMORY, "request id");
  }
  const json_t *params = json_object_get(root, "parameters");
  int binary_default = 0;
  if (params) {
    if (!json_is_object(params)) return bad("\"parameters\" must be an object");
    const json_t *b = json_object_get(params, "binary_data_output");
    if (b && !json_is_boolean(b)) return bad("binary_data_output must be a boolean");
    binary_default = b && json_is_true(b);
    const json_t *t = json_object_get(params, "timeout");
    if (t && (!json_is_integer(t) || json_integer_value(t) < 0))
      return bad("timeout must be a non-negative integer (microseconds)");
    if (t) req->timeout_us = json_integer_value(t);
    const json_t *pr = json_object_get(params, "priority");
    if (pr && (!json_is_integer(pr) || json_integer_value(pr) < 0))
      return bad("priority must be a non-negative integer");
    if (pr) req->priority = json_integer_value(pr);
  }
  const json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_array(inputs)) return bad("\"inputs\" must be an array");
  size_t used = 0, k;
  const json_t *in;
  json_array_foreach(inputs, k, in) {
    dvm_status *st = parse_input(in, k, sigs, max_elements, bin, bin_size, &used, text, req);
    if (st) return st;
  }
  for (int i = 0; i < sigs->nin; i++)
    if (!req->inputs[i]) return bad("input \"%s\" is missing", sigs->in[i].name);
  if (used != bin_size)
    return bad("%zu bytes of binary data follow the header, the inputs use %zu", bin_size, used);
  return parse_outputs(json_object_get(root, "outputs"), binary_default, sigs, req);
}

/* jansson reports an allocation that failed inside its parser as a
 * syntax error (at the token it was reading, or at line -1), so its
 * allocations go through json_alloc, which notes a failure for the thread
 * that parses. */
static _Thread_local int json_failed;

static void *json_alloc(size_t n) {
  void *p = malloc(n);
  if (!p) json_failed = 1;
  return p;
}

static pthread_once_t json_once = PTHREAD_ONCE_INIT;
static void json_setup(void) { json_set_alloc_funcs(json_alloc, free); }

dvm_status *dvms_request_parse(const uint8_t *body, size_t size, size_t header_len, const dvms_sigs *sigs,
                               int64_t max_elements, dvms_request *req) {
  *req = (dvms_request){0};
  for (int k = 0; k < DVMS_MAX_SYMS; k++) req->sym[k] = -1;
  size_t hlen = header_len ? header_len : size;
  if (hlen > size)
    return bad("Inference-Header-Content-Length %zu is larger than the body (%zu bytes)", header_len, size);
  char *skeleton;
  body_text text = {(const char *)body, NULL, 0};
  dvm_status *st = dvms_json_skeleton(text.body, hlen, &skeleton, &text.spans, &text.nspans);
  if (st) return st;
  json_error_t err;
  pthread_once(&json_once, json_setup);
  json_failed = 0;
  json_t *root = json_loadb(skeleton, hlen, JSON_REJECT_DUPLICATES, &err);
  if (json_failed || (!root && json_error_code(&err) == json_error_out_of_memory))
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory parsing the request's JSON (%zu bytes)", hlen);
  else if (!root)
    st = bad("malformed JSON at line %d, column %d: %s", err.line, err.column, err.text);
  else
    st = parse(root, body + hlen, size - hlen, &text, sigs, max_elements, req);
  json_decref(root);
  free(skeleton);
  free(text.spans);
  if (st) dvms_request_clear(req);
  return st;
}

void dvms_request_clear(dvms_request *req) {
  free(req->id);
  for (int i = 0; i < DVMS_MAX_IO; i++) dvm_tensor_release(req->inputs[i]);
  *req = (dvms_request){0};
}
