/* An infer response: KServe v2 JSON, with each output either as a JSON
 * "data" array or as binary tensor data after the JSON (Triton's
 * extension: "parameters": {"binary_data_size": N}, and the JSON's length
 * in Inference-Header-Content-Length). Numbers are written by hand rather
 * than through jansson: f32 with 9 significant digits (enough to read back
 * the same float) is twice as short and several times faster to write
 * than a json_real per element (docs/serving.md). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include <utf8proc.h>

#include "serve.h"

/* JSON has no NaN or infinity: those are written as null (binary output
 * keeps them). */
static void write_real(dvms_buf *b, double x, const char *fmt) {
  if (isfinite(x)) dvms_buf_printf(b, fmt, x);
  else dvms_buf_put(b, "null", 4);
}

static void write_data(dvms_buf *b, const dvm_tensor *t) {
  const void *d = dvm_tensor_data(t);
  int64_t n = dvm_tensor_numel(t);
  dvms_buf_put(b, "[", 1);
  for (int64_t i = 0; i < n; i++) {
    if (i) dvms_buf_put(b, ",", 1);
    switch (dvm_tensor_dtype(t)) {
    case DVM_F32: write_real(b, (double)((const float *)d)[i], "%.9g"); break;
    case DVM_F64: write_real(b, ((const double *)d)[i], "%.17g"); break;
    case DVM_I8: dvms_buf_printf(b, "%d", ((const int8_t *)d)[i]); break;
    case DVM_I16: dvms_buf_printf(b, "%d", ((const int16_t *)d)[i]); break;
    case DVM_I32: dvms_buf_printf(b, "%" PRId32, ((const int32_t *)d)[i]); break;
    case DVM_I64: dvms_buf_printf(b, "%" PRId64, ((const int64_t *)d)[i]); break;
    case DVM_U8: dvms_buf_printf(b, "%u", ((const uint8_t *)d)[i]); break;
    case DVM_U16: dvms_buf_printf(b, "%u", ((const uint16_t *)d)[i]); break;
    case DVM_U32: dvms_buf_printf(b, "%" PRIu32, ((const uint32_t *)d)[i]); break;
    case DVM_U64: dvms_buf_printf(b, "%" PRIu64, ((const uint64_t *)d)[i]); break;
    case DVM_BOOL: dvms_buf_printf(b, "%s", ((const uint8_t *)d)[i] ? "true" : "false"); break;
    case DVM_STRING: {
      size_t len;
      const char *s = dvm_tensor_string(t, i, &len);
      dvms_buf_json_stringn(b, s, len);
      break;
    }
    default: dvms_buf_put(b, "null", 4); break; /* f16/bf16 go out as binary (see below) */
    }
  }
  dvms_buf_put(b, "]", 1);
}

/* The binary form of a tensor: its bytes; BYTES (strings) as KServe's
 * binary extension has them, each element's byte count (u32
 * little-endian) then its bytes. */
static size_t binary_size(const dvm_tensor *t) {
  if (dvm_tensor_dtype(t) != DVM_STRING) return dvm_tensor_nbytes(t);
  size_t n = 0, len;
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) n += 4 + (dvm_tensor_string(t, i, &len), len);
  return n;
}

static void put_binary(dvms_buf *b, const dvm_tensor *t) {
  if (dvm_tensor_dtype(t) != DVM_STRING) {
    dvms_buf_put(b, dvm_tensor_data(t), dvm_tensor_nbytes(t));
    return;
  }
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    size_t len;
    const char *s = dvm_tensor_string(t, i, &len);
    uint8_t n[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
    dvms_buf_put(b, n, 4);
    dvms_buf_put(b, s, len);
  }
}

/* Whether every element of string tensor t is UTF-8, as JSON text must be. */
static int all_utf8(const dvm_tensor *t) {
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    size_t len;
    const uint8_t *s = (const uint8_t *)dvm_tensor_string(t, i, &len);
    for (utf8proc_int32_t c; len;) {
      utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)len, &c);
      if (k <= 0) return 0;
      s += k;
      len -= (size_t)k;
    }
  }
  return 1;
}

/* JSON has no half-precision numbers, nor strings of bytes that are not
 * UTF-8: those always go as binary. */
static int binary(const dvms_request *req, int i, const dvm_tensor *t) {
  dvm_dtype dt = dvm_tensor_dtype(t);
  return req->want[i] == DVMS_OUT_BINARY || dt == DVM_F16 || dt == DVM_BF16 || (dt == DVM_STRING && !all_utf8(t));
}

void dvms_reply_write(dvms_buf *b, const char *model, int64_t version, const dvms_request *req,
                      const dvms_sigs *sigs, dvm_tensor *const *outs, size_t *header_len) {
  dvms_buf_put(b, "{\"model_name\":", 14);
  dvms_buf_json_string(b, model);
  dvms_buf_printf(b, ",\"model_version\":\"%" PRId64 "\"", version);
  if (req->id) {
    dvms_buf_put(b, ",\"id\":", 6);
    dvms_buf_json_string(b, req->id);
  }
  dvms_buf_put(b, ",\"outputs\":[", 12);
  int first = 1, any_binary = 0;
  for (int i = 0; i < sigs->nout; i++) {
    const dvm_tensor *t = outs[i];
    if (!t) continue;
    dvm_dtype dt = dvm_tensor_dtype(t);
    dvms_buf_put(b, first ? "{\"name\":" : ",{\"name\":", first ? 8 : 9);
    first = 0;
    dvms_buf_json_string(b, sigs->out[i].name);
    dvms_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", dvms_datatype_name(dt));
    for (int d = 0; d < dvm_tensor_rank(t); d++)
      dvms_buf_printf(b, "%s%" PRId64, d ? "," : "", dvm_tensor_dims(t)[d]);
    dvms_buf_put(b, "]", 1);
    if (binary(req, i, t)) {
      dvms_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", binary_size(t));
      any_binary = 1;
    } else {
      dvms_buf_put(b, ",\"data\":", 8);
      write_data(b, t);
      dvms_buf_put(b, "}", 1);
    }
  }
  dvms_buf_put(b, "]}", 2);
  *header_len = any_binary ? b->len : 0;
  if (!any_binary) return;
  for (int i = 0; i < sigs->nout; i++) {
    const dvm_tensor *t = outs[i];
    if (t && binary(req, i, t)) put_binary(b, t);
  }
}
