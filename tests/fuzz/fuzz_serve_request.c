/* Fuzz target for dvm serve's infer-request parser (serve/request.c) and
 * response writer (serve/reply.c), and its OpenAI request reader
 * (serve/oairequest.c with the chat templates of serve/chat.c). The first
 * byte chooses: bit 1 clear, the infer request, with the framing of bit 0:
 * set means the next two bytes (little-endian) are the
 * Inference-Header-Content-Length and binary tensor data follows the JSON,
 * and bit 2 adds an input "text", BYTES [batch], which then stands in for
 * the output (JSON strings, or length-prefixed binary elements);
 * bit 1 set, an OpenAI request (bit 2: chat; bits 3-4 and 0: the chat
 * template, ChatML, ChatML with Qwen2's system message, Llama-2's [INST],
 * Mistral's, Llama 3's headers, Phi-3's tags with and without BOS, Gemma's
 * turns; bit 5: none; bit 6: Triton's generate request instead, bit 7 its stream
 * route) to a model of max_length 64, max_tokens 40 and max_running 8
 * without a tokenizer (text prompts are refused after the template is
 * written). The rest is the body. An OpenAI or generate request must be
 * refused with a 400 or 507 and an error body that is JSON of its route's
 * form, or read into a prompt of 1 to 63 token ids with max_tokens within
 * what max_length leaves, 1 to max_running choices (one for generate,
 * streamed as its route says) and logprobs within their limits. Any input must give a request that keeps every
 * promise (signature dtypes and ranks, symbol ranges, the element limit)
 * or an invalid-argument error; a parsed request's response must be valid
 * JSON of the length the writer reports. A broken promise aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ELEMENTS 4096

static void require(int ok) {
  if (!ok) abort();
}

/* ids i64[batch, seq], mask f32[batch, seq], flags bool[3](, text string[batch]) -> hidden f32[batch, seq, 4] */
static void signature(dvms_sigs *s, int text) {
  *s = (dvms_sigs){.nin = 3 + text, .nout = 1, .nsyms = 2};
  strcpy(s->sym_name[0], "batch");
  strcpy(s->sym_name[1], "seq");
  s->sym_lo[0] = s->sym_lo[1] = 1;
  s->sym_hi[0] = 64;
  s->sym_hi[1] = 128;
  const struct { const char *name; dvm_dtype dt; int rank; } io[] = {
      {"ids", DVM_I64, 2}, {"mask", DVM_F32, 2}, {"flags", DVM_BOOL, 1}, {"hidden", DVM_F32, 3}};
  for (int i = 0; i < 4; i++) {
    dvms_sig *g = i < 3 ? &s->in[i] : &s->out[0];
    strcpy(g->name, io[i].name);
    g->dtype = io[i].dt;
    g->rank = io[i].rank;
    for (int d = 0; d < g->rank; d++) {
      g->dims[d] = -1;
      g->sym[d] = d < 2 ? d : -1;
    }
  }
  s->in[2].dims[0] = 3;
  s->in[2].sym[0] = -1;
  s->out[0].dims[2] = 4;
  s->out[0].sym[2] = -1;
  if (text) s->in[3] = (dvms_sig){.name = "text", .dtype = DVM_STRING, .rank = 1, .dims = {-1}, .sym = {0}};
}

/* The bytes a tensor goes out as in binary: BYTES elements length-prefixed. */
static size_t binary_size(const dvm_tensor *t) {
  if (dvm_tensor_dtype(t) != DVM_STRING) return dvm_tensor_nbytes(t);
  size_t n = 0, len;
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) n += 4 + (dvm_tensor_string(t, i, &len), len);
  return n;
}

static void openai(uint8_t mode, const uint8_t *body, size_t size) {
  static const char *const templates[] = {"chatml", "chatml+sys", "llama2", "inst",
                                          "header", "tagged", "tagged+bos", "turn"};
  dvms_model m = {.max_length = 64};
  dvms_config_defaults(&m.cfg);
  m.cfg.max_tokens = 40;
  snprintf(m.chat_template, sizeof m.chat_template, "%s", mode & 32 ? "" : templates[((mode >> 3) & 3) | (mode & 1) << 2]);
  strcpy(m.chat_error, "no chat template");
  strcpy(m.bos, "<s>");
  strcpy(m.eos, "</s>");
  json_t *req = json_loadb((const char *)body, size, 0, NULL);
  if (!req) return;
  int triton = (mode & 64) != 0;
  dvms_openai_req r = {.chat = !triton && (mode & 4), .triton = triton, .stream = triton && (mode & 128)};
  dvms_http_reply rp = {0};
  if ((triton ? dvms_triton_parse : dvms_openai_parse)(&m, req, &r, &rp)) {
    require(r.n >= 1 && r.n <= m.cfg.max_running && (!triton || (r.n == 1 && r.stream == ((mode & 128) != 0))));
    require(r.g.nprompt >= 1 && r.g.nprompt < m.max_length && r.g.prompt == r.prompt);
    require(r.g.max_tokens >= 1 && r.g.max_tokens <= m.max_length - r.g.nprompt && r.g.max_tokens <= 40);
    for (int i = 0; i < r.g.nprompt; i++) require(r.prompt[i] >= 0);
    for (int i = 0; i < r.nstop; i++) require(strlen(r.stop[i]) >= 1 && strlen(r.stop[i]) <= r.maxstop);
    /* none, or chat's top_logprobs (0 to 20), completions' logprobs (0 to 5) */
    require(r.g.search.logprobs >= -1 &&
            r.g.search.logprobs <= (r.chat ? DVM_GENERATOR_MAX_LOGPROBS : DVMS_MAX_COMPLETION_LOGPROBS));
  } else {
    require(rp.status == 400 || rp.status == 507 || rp.status == 404);
    json_t *back = json_loadb(rp.body.data, rp.body.len, 0, NULL);
    json_t *e = json_object_get(back, "error");
    require(back && json_is_string(triton ? e : json_object_get(e, "message")));
    json_decref(back);
  }
  dvms_openai_req_clear(&r);
  dvms_buf_free(&rp.body);
  json_decref(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  if (data[0] & 2) {
    openai(data[0], data + 3, size - 3);
    return 0;
  }
  dvms_sigs sigs;
  signature(&sigs, (data[0] & 4) != 0);
  size_t header_len = data[0] & 1 ? (size_t)data[1] | (size_t)data[2] << 8 : 0;
  dvms_request req;
  dvm_status *st = dvms_request_parse(data + 3, size - 3, header_len, &sigs, MAX_ELEMENTS, &req);
  if (st) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT || dvm_status_code(st) == DVM_OUT_OF_MEMORY);
    require(dvm_status_message(st)[0] != 0);
    dvm_status_free(st);
    return 0;
  }
  for (int i = 0; i < sigs.nin; i++) {
    const dvm_tensor *t = req.inputs[i];
    require(t && dvm_tensor_dtype(t) == sigs.in[i].dtype && dvm_tensor_rank(t) == sigs.in[i].rank);
    require(dvm_tensor_numel(t) <= MAX_ELEMENTS);
    for (int d = 0; d < sigs.in[i].rank; d++) {
      int k = sigs.in[i].sym[d];
      int64_t v = dvm_tensor_dims(t)[d];
      require(k < 0 ? v == sigs.in[i].dims[d] : v == req.sym[k] && v >= sigs.sym_lo[k] && v <= sigs.sym_hi[k]);
    }
  }
  require(req.want[0] >= DVMS_OUT_JSON && req.want[0] <= DVMS_OUT_BINARY);
  /* the mask (or the text) stands in for the output */
  dvms_buf b = {0};
  size_t json_len;
  dvm_tensor *outs[1] = {req.inputs[sigs.nin == 4 ? 3 : 1]};
  dvms_reply_write(&b, "fuzz\"model", 1, &req, &sigs, outs, &json_len);
  require(!b.failed);
  size_t expect = json_len ? b.len - json_len : 0;
  require(expect == (json_len ? binary_size(outs[0]) : 0) && (req.want[0] != DVMS_OUT_BINARY || json_len));
  json_error_t err;
  /* a BYTES element may hold NUL, written \u0000 */
  json_t *back = json_loadb(b.data, json_len ? json_len : b.len, JSON_ALLOW_NUL, &err);
  require(back != NULL);
  json_decref(back);
  dvms_buf_free(&b);
  dvms_request_clear(&req);
  return 0;
}
