/* An OpenAI /v1/completions or /v1/chat/completions request's JSON, or
 * a Triton generate request's, read and checked against a generation
 * model (its max_length, max_tokens, max_running, tokenizer and chat
 * template) before anything is queued: each field's type and range, the
 * fields dvm does not do refused by name, the prompt (text through the
 * tokenizer, token ids, or chat messages through chat.c) within
 * max_length. Errors are OpenAI's error bodies, or KServe's on Triton's
 * routes. Apart from the server so the fuzz target needs neither it nor
 * the engine. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

void dvms_kserve_error(dvms_http_reply *rp, unsigned status, const char *msg) {
  rp->status = status;
  rp->content_type = "application/json";
  dvms_buf_free(&rp->body);
  DVMS_PUT(&rp->body, "{\"error\":");
  dvms_buf_json_string(&rp->body, msg);
  DVMS_PUT(&rp->body, "}");
}

void dvms_openai_error(dvms_http_reply *rp, unsigned status, const char *param, const char *msg) {
  rp->status = status;
  rp->content_type = "application/json";
  dvms_buf_free(&rp->body);
  DVMS_PUT(&rp->body, "{\"error\":{\"message\":");
  dvms_buf_json_string(&rp->body, msg);
  dvms_buf_printf(&rp->body, ",\"type\":\"%s\",\"param\":", status < 500 ? "invalid_request_error" : "server_error");
  if (param) dvms_buf_json_string(&rp->body, param);
  else DVMS_PUT(&rp->body, "null");
  dvms_buf_printf(&rp->body, ",\"code\":%u}}", status);
}

/* The error body of r's route. */
static void refuse(const dvms_openai_req *r, dvms_http_reply *rp, unsigned status, const char *param, const char *msg) {
  if (r->triton) dvms_kserve_error(rp, status, msg);
  else dvms_openai_error(rp, status, param, msg);
}

/* ---- the request ---- */

void dvms_openai_req_clear(dvms_openai_req *r) {
  for (int i = 0; i < r->nstop; i++) free(r->stop[i]);
  free(r->prompt);
  *r = (dvms_openai_req){0};
}

/* A number field within [lo, hi] into *out (absent: unchanged); 0 and a
 * message naming it when it is not. */
static int number(json_t *req, const char *key, double lo, double hi, int integer, double *out, char *msg,
                  size_t size) {
  json_t *v = json_object_get(req, key);
  if (!v || json_is_null(v)) return 1;
  double x = json_number_value(v);
  if (!json_is_number(v) || (integer && !json_is_integer(v)) || !(x >= lo && x <= hi)) {
    snprintf(msg, size, "%s must be %s in [%g, %g]", key, integer ? "an integer" : "a number", lo, hi);
    return 0;
  }
  *out = x;
  return 1;
}

/* Fields OpenAI has and dvm does not do: refused unless absent or left at
 * their neutral value, never silently ignored. */
static const char *unsupported(json_t *req) {
  static const char *const keys[] = {"echo",       "suffix", "best_of",   "presence_penalty", "frequency_penalty",
                                     "logit_bias", "tools",  "functions", "response_format"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    json_t *v = json_object_get(req, keys[i]);
    if (!v || json_is_null(v) || json_is_false(v) || (json_is_number(v) && json_number_value(v) == 0) ||
        (!strcmp(keys[i], "best_of") && json_is_integer(v) && json_integer_value(v) == 1) ||
        (json_is_object(v) && json_object_size(v) == 0))
      continue;
    return keys[i];
  }
  return NULL;
}

/* The alternatives each token's log-probability comes with: completions'
 * `logprobs` (0 to 5, as OpenAI's), or chat's `logprobs: true` with
 * `top_logprobs` (0 to 20); -1 for none. 0 and the field's name in *field
 * (the message in msg) when one is bad. */
static int logprobs_of(const dvms_openai_req *r, json_t *req, int *k, const char **field, char *msg, size_t size) {
  json_t *lp = json_object_get(req, "logprobs"), *top = json_object_get(req, "top_logprobs");
  double n = -1;
  *k = -1;
  if (!r->chat) {
    if (top && !json_is_null(top)) {
      *field = "top_logprobs";
      snprintf(msg, size, "top_logprobs is chat's; completions take logprobs, an integer in [0, %d]",
               DVMS_MAX_COMPLETION_LOGPROBS);
      return 0;
    }
    if (!number(req, "logprobs", 0, DVMS_MAX_COMPLETION_LOGPROBS, 1, &n, msg, size)) {
      *field = "logprobs";
      return 0;
    }
    *k = (int)n;
    return 1;
  }
  if (lp && !json_is_null(lp) && !json_is_boolean(lp)) {
    *field = "logprobs";
    snprintf(msg, size, "logprobs must be true or false");
    return 0;
  }
  if (!number(req, "top_logprobs", 0, DVM_GENERATOR_MAX_LOGPROBS, 1, &n, msg, size)) {
    *field = "top_logprobs";
    return 0;
  }
  if (n >= 0 && !json_is_true(lp)) {
    *field = "top_logprobs";
    snprintf(msg, size, "top_logprobs needs logprobs: true");
    return 0;
  }
  *k = json_is_true(lp) ? (n < 0 ? 0 : (int)n) : -1;
  return 1;
}

static int stops(dvms_openai_req *r, json_t *req, char *msg, size_t size) {
  json_t *s = json_object_get(req, "stop"), *one;
  if (!s || json_is_null(s)) return 1;
  size_t i;
  if (json_is_string(s)) {
    one = s;
    goto add_one;
  }
  if (!json_is_array(s) || json_array_size(s) > DVMS_MAX_STOP) {
    snprintf(msg, size, "stop must be a string or a list of at most %d strings", DVMS_MAX_STOP);
    return 0;
  }
  json_array_foreach(s, i, one) {
  add_one:
    if (!json_is_string(one) || json_string_length(one) == 0) {
      snprintf(msg, size, "stop must hold non-empty strings");
      return 0;
    }
    if (!(r->stop[r->nstop] = strdup(json_string_value(one)))) {
      snprintf(msg, size, "out of memory");
      return 0;
    }
    size_t n = strlen(r->stop[r->nstop++]);
    if (n > r->maxstop) r->maxstop = n;
    if (json_is_string(s)) break;
  }
  return 1;
}

/* The prompt's ids: text through the tokenizer, or an array of ids. */
static dvm_status *prompt_ids(dvms_openai_req *r, const dvms_model *m, json_t *req) {
  dvms_buf text = {0};
  int add_special = 1;
  const char *what = "prompt";
  if (r->chat) {
    dvm_status *st = dvms_chat_prompt(m, json_object_get(req, "messages"), &text);
    if (st) {
      dvms_buf_free(&text);
      return st;
    }
    add_special = 0; /* the template writes its own BOS */
    what = "messages";
  } else {
    json_t *p = json_object_get(req, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_array(p) && json_array_size(p) > 0 && json_is_array(json_array_get(p, 0)))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt: a batch of prompts is not supported; send one per request");
    if (json_is_array(p) && json_array_size(p) > 0 && json_is_string(json_array_get(p, 0)))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt: a batch of prompts is not supported; send one per request");
    if (json_is_array(p)) {
      size_t i, n = json_array_size(p);
      json_t *v;
      if (!(r->prompt = malloc((n ? n : 1) * sizeof *r->prompt))) return dvm_status_new(DVM_OUT_OF_MEMORY, "the prompt");
      json_array_foreach(p, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
          return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt[%zu]: a token id expected", i);
        r->prompt[i] = (int32_t)json_integer_value(v);
      }
      r->g.prompt = r->prompt;
      r->g.nprompt = (int)n;
      return NULL;
    }
    if (!json_is_string(p)) return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt: a string or an array of token ids expected");
    dvms_buf_put(&text, json_string_value(p), json_string_length(p));
  }
  if (!m->tok) {
    dvms_buf_free(&text);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: the model has no tokenizer.json; give the prompt as token ids", what);
  }
  size_t n;
  dvm_status *st = text.failed ? dvm_status_new(DVM_OUT_OF_MEMORY, "the prompt")
                               : dvm_tokenizer_encode(m->tok, text.data ? text.data : "", text.len, add_special,
                                                      &r->prompt, &n);
  dvms_buf_free(&text);
  if (st) return dvm_status_annotate(st, "%s", what);
  if (n > INT32_MAX) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: too long", what);
  r->g.prompt = r->prompt;
  r->g.nprompt = (int)n;
  return NULL;
}

int dvms_openai_parse(const dvms_model *m, const void *json, dvms_openai_req *r, dvms_http_reply *rp) {
  json_t *req = (json_t *)json;
  char msg[256] = "";
  const char *bad = unsupported(req);
  if (bad) {
    snprintf(msg, sizeof msg, "%s is not supported by dvm serve", bad);
    refuse(r, rp, 400, bad, msg);
    return 0;
  }
  double temperature = 1, top_p = 1, n = 1, seed = -1, top_k = 0, rep = 1;
  int logprobs = -1;
  double max_length = m->max_length;
  double max_tokens = r->chat ? 0 : 16; /* OpenAI's defaults: 16, or up to the context for chat */
  json_t *stream = json_object_get(req, "stream");
  const char *mt = r->chat && json_object_get(req, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  int given = json_object_get(req, mt) && !json_is_null(json_object_get(req, mt));
  static const char *const fields[] = {"temperature", "top_p", "n", "seed", "top_k", "repetition_penalty"};
  const char *field = NULL;
  if (!number(req, "temperature", 0, 2, 0, &temperature, msg, sizeof msg)) field = fields[0];
  else if (!number(req, "top_p", 0, 1, 0, &top_p, msg, sizeof msg) || top_p <= 0) {
    field = fields[1];
    if (!msg[0]) snprintf(msg, sizeof msg, "top_p must be in (0, 1]");
  } else if (!number(req, "n", 1, m->cfg.max_running, 1, &n, msg, sizeof msg)) {
    field = fields[2];
    snprintf(msg, sizeof msg, "n must be an integer in [1, %d], the model's max_running", m->cfg.max_running);
  } else if (!number(req, "seed", 0, 9007199254740991.0, 1, &seed, msg, sizeof msg)) field = fields[3];
  else if (!number(req, "top_k", -1, 1 << 30, 1, &top_k, msg, sizeof msg)) field = fields[4];
  else if (!number(req, "repetition_penalty", 1e-6, 1e6, 0, &rep, msg, sizeof msg)) field = fields[5];
  else if (!number(req, mt, 1, 1 << 24, 1, &max_tokens, msg, sizeof msg))
    field = "max_tokens";
  else if (stream && !json_is_boolean(stream)) field = "stream", snprintf(msg, sizeof msg, "stream must be true or false");
  else if (!stops(r, req, msg, sizeof msg)) field = "stop";
  else logprobs_of(r, req, &logprobs, &field, msg, sizeof msg);
  if (field) {
    refuse(r, rp, 400, field, msg);
    return 0;
  }
  if (m->cfg.max_tokens && max_tokens > m->cfg.max_tokens) {
    snprintf(msg, sizeof msg, "max_tokens %.0f is more than the model's limit of %d", max_tokens, m->cfg.max_tokens);
    refuse(r, rp, 400, "max_tokens", msg);
    return 0;
  }
  r->stream = json_is_true(stream);
  r->n = (int)n;
  json_t *so = json_object_get(req, "stream_options");
  r->include_usage = json_is_true(json_object_get(so, "include_usage"));
  dvm_status *st = prompt_ids(r, m, req);
  if (!st && r->g.nprompt < 1) st = dvm_status_new(DVM_INVALID_ARGUMENT, "the prompt has no tokens");
  if (!st && r->g.nprompt >= (int)max_length)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "the prompt's %d tokens leave no room in the model's max_length of %.0f",
                        r->g.nprompt, max_length);
  if (!st && given && max_tokens > max_length - r->g.nprompt)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "max_tokens %.0f and the prompt's %d tokens pass the model's max_length of "
                        "%.0f", max_tokens, r->g.nprompt, max_length);
  if (st) {
    int oom = dvm_status_code(st) == DVM_OUT_OF_MEMORY;
    refuse(r, rp, oom ? 507 : 400, strstr(dvm_status_message(st), "max_tokens") ? "max_tokens" : r->chat ? "messages"
                                                                                                     : "prompt",
              dvm_status_message(st));
    dvm_status_free(st);
    return 0;
  }
  if (!given || !max_tokens) { /* the default: 16 (completions) or all (chat), within what is left */
    double left = max_length - r->g.nprompt;
    if (!max_tokens || max_tokens > left) max_tokens = left;
    if (m->cfg.max_tokens && max_tokens > m->cfg.max_tokens) max_tokens = m->cfg.max_tokens;
  }
  r->g.max_tokens = (int)max_tokens;
  dvm_generator_options *o = &r->g.search;
  dvm_generator_options_init(o);
  o->do_sample = temperature > 0;
  o->temperature = temperature > 0 ? temperature : -1;
  o->top_p = top_p;
  o->top_k = top_k < 0 ? 0 : (int)top_k; /* OpenAI samples from the whole vocabulary */
  o->repetition_penalty = rep;
  o->seed = (int64_t)seed;
  o->logprobs = logprobs;
  return 1;
}


/* Triton's generate parameters that dvm takes, by the names Triton's vLLM
 * backend reads (OpenAI's). */
static const char *const triton_params[] = {"max_tokens", "temperature", "top_p", "top_k", "seed", "stop",
                                            "repetition_penalty", "stream"};

/* Copies the parameters of `from` into o; 0 with the error in msg for
 * one dvm does not take or one given twice. */
static int triton_copy(json_t *o, json_t *from, int top, char *msg, size_t size) {
  const char *key;
  json_t *v;
  json_object_foreach(from, key, v) {
    if (top && (!strcmp(key, "text_input") || !strcmp(key, "parameters"))) continue;
    size_t i = 0, n = sizeof triton_params / sizeof triton_params[0];
    while (i < n && strcmp(key, triton_params[i])) i++;
    if (i == n) {
      snprintf(msg, size, "%.100s: not a parameter of dvm's generate (it takes max_tokens, temperature, top_p, top_k, "
               "seed, stop, repetition_penalty, stream)", key);
      return 0;
    }
    if (json_object_get(o, key)) {
      snprintf(msg, size, "%s is given both in parameters and beside text_input", key);
      return 0;
    }
    if (json_object_set(o, key, v)) {
      snprintf(msg, size, "out of memory");
      return 0;
    }
  }
  return 1;
}

int dvms_triton_parse(const dvms_model *m, const void *json, dvms_openai_req *r, dvms_http_reply *rp) {
  json_t *req = (json_t *)json, *text = json_object_get(req, "text_input"), *params = json_object_get(req, "parameters");
  char msg[256] = "";
  json_t *o = NULL, *stream;
  if (!json_is_string(text)) snprintf(msg, sizeof msg, "text_input: a string expected");
  else if (params && !json_is_object(params)) snprintf(msg, sizeof msg, "parameters: an object expected");
  else if (!(o = json_object())) snprintf(msg, sizeof msg, "out of memory");
  /* the spec passes other members on as parameters: so does dvm */
  else if (triton_copy(o, params, 0, msg, sizeof msg) && triton_copy(o, req, 1, msg, sizeof msg)) {
    if ((stream = json_object_get(o, "stream")) && (!json_is_boolean(stream) || json_is_true(stream) != r->stream))
      snprintf(msg, sizeof msg, "stream: %s answers %s", r->stream ? "generate_stream" : "generate",
               r->stream ? "a stream (true)" : "at once (false)");
    else if (json_object_set_new(o, "stream", json_boolean(r->stream)) || json_object_set(o, "prompt", text))
      snprintf(msg, sizeof msg, "out of memory");
  }
  if (msg[0]) {
    refuse(r, rp, strcmp(msg, "out of memory") ? 400 : 507, NULL, msg);
    json_decref(o);
    return 0;
  }
  int ok = dvms_openai_parse(m, o, r, rp);
  json_decref(o);
  return ok;
}
