/* OpenAI's routes on generation models: /v1/models, /v1/completions and
 * /v1/chat/completions, answered whole or streamed as server-sent events
 * (data: {chunk} ... data: [DONE]) as OpenAI and vLLM send them. A request
 * is checked, encoded with the model's tokenizer (or given as token ids),
 * queued in the model's engine (llm.c), and its tokens are decoded as they
 * come; a stop string ends it where it starts (the text after is never
 * sent: text that might begin one is held back), a client that goes away
 * cancels it. Errors are OpenAI's {"error": {"message", "type", "param",
 * "code"}}. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

#define MAX_STOP 4
#define PUT(b, literal) dvms_buf_put(b, literal, sizeof literal - 1)

typedef struct call {
  dvms_api *api;
  dvms_model *m;
  dvms_gen g;
  int chat, stream, include_usage;
  char id[48];
  long long created;
  int32_t *prompt;
  dvm_tokenizer_stream *ts;
  char *stop[MAX_STOP];
  int nstop;
  size_t maxstop;
  dvms_buf text; /* decoded so far */
  size_t sent;   /* of text, answered */
  int seen;      /* tokens decoded */
  int finish;    /* DVMS_FINISH_* once over; stop strings count as EOS */
  int (*gone)(void *);
  void *gone_ctx;
  /* streaming */
  dvms_buf out;
  size_t out_at;
  int phase;     /* 0 tokens, 1 [DONE] written, 2 over */
  int began;     /* the first chunk (the chat role) was written */
} call;

static void oai_error(dvms_http_reply *rp, unsigned status, const char *param, const char *msg) {
  rp->status = status;
  rp->content_type = "application/json";
  dvms_buf_free(&rp->body);
  PUT(&rp->body, "{\"error\":{\"message\":");
  dvms_buf_json_string(&rp->body, msg);
  dvms_buf_printf(&rp->body, ",\"type\":\"%s\",\"param\":", status < 500 ? "invalid_request_error" : "server_error");
  if (param) dvms_buf_json_string(&rp->body, param);
  else PUT(&rp->body, "null");
  dvms_buf_printf(&rp->body, ",\"code\":%u}}", status);
}

static const char *finish_name(int f) { return f == DVMS_FINISH_LENGTH ? "length" : "stop"; }

static void call_free(call *c) {
  if (c->g.state == DVMS_GEN_QUEUED || c->g.state == DVMS_GEN_RUNNING) dvms_llm_cancel(c->m, &c->g);
  dvms_gen_clear(&c->g);
  dvm_tokenizer_stream_free(c->ts);
  for (int i = 0; i < c->nstop; i++) free(c->stop[i]);
  free(c->prompt);
  dvms_buf_free(&c->text);
  dvms_buf_free(&c->out);
  dvms_model_release(c->m);
  free(c);
}

/* ---- the request ---- */

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
  static const char *const keys[] = {"logprobs", "top_logprobs", "echo", "suffix", "best_of", "presence_penalty",
                                     "frequency_penalty", "logit_bias", "tools", "functions", "response_format"};
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

static int stops(call *c, json_t *req, char *msg, size_t size) {
  json_t *s = json_object_get(req, "stop"), *one;
  if (!s || json_is_null(s)) return 1;
  size_t i;
  if (json_is_string(s)) {
    one = s;
    goto add_one;
  }
  if (!json_is_array(s) || json_array_size(s) > MAX_STOP) {
    snprintf(msg, size, "stop must be a string or a list of at most %d strings", MAX_STOP);
    return 0;
  }
  json_array_foreach(s, i, one) {
  add_one:
    if (!json_is_string(one) || json_string_length(one) == 0) {
      snprintf(msg, size, "stop must hold non-empty strings");
      return 0;
    }
    if (!(c->stop[c->nstop] = strdup(json_string_value(one)))) {
      snprintf(msg, size, "out of memory");
      return 0;
    }
    size_t n = strlen(c->stop[c->nstop++]);
    if (n > c->maxstop) c->maxstop = n;
    if (json_is_string(s)) break;
  }
  return 1;
}

/* The prompt's ids: text through the tokenizer, or an array of ids. */
static dvm_status *prompt_ids(call *c, json_t *req) {
  dvms_buf text = {0};
  int add_special = 1;
  const char *what = "prompt";
  if (c->chat) {
    dvm_status *st = dvms_chat_prompt(c->m, json_object_get(req, "messages"), &text);
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
      if (!(c->prompt = malloc((n ? n : 1) * sizeof *c->prompt))) return dvm_status_new(DVM_OUT_OF_MEMORY, "the prompt");
      json_array_foreach(p, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
          return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt[%zu]: a token id expected", i);
        c->prompt[i] = (int32_t)json_integer_value(v);
      }
      c->g.prompt = c->prompt;
      c->g.nprompt = (int)n;
      return NULL;
    }
    if (!json_is_string(p)) return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt: a string or an array of token ids expected");
    dvms_buf_put(&text, json_string_value(p), json_string_length(p));
  }
  if (!c->m->tok) {
    dvms_buf_free(&text);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: the model has no tokenizer.json; give the prompt as token ids", what);
  }
  size_t n;
  dvm_status *st = text.failed ? dvm_status_new(DVM_OUT_OF_MEMORY, "the prompt")
                               : dvm_tokenizer_encode(c->m->tok, text.data ? text.data : "", text.len, add_special,
                                                      &c->prompt, &n);
  dvms_buf_free(&text);
  if (st) return dvm_status_annotate(st, "%s", what);
  if (n > INT32_MAX) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: too long", what);
  c->g.prompt = c->prompt;
  c->g.nprompt = (int)n;
  return NULL;
}

/* Reads and checks the request into c; 0 with the error answered. */
static int parse(call *c, json_t *req, dvms_http_reply *rp) {
  char msg[256] = "";
  const char *bad = unsupported(req);
  if (bad) {
    snprintf(msg, sizeof msg, "%s is not supported by dvm serve", bad);
    oai_error(rp, 400, bad, msg);
    return 0;
  }
  double temperature = 1, top_p = 1, n = 1, seed = -1, top_k = 0, rep = 1;
  double max_length = dvms_llm_max_length(c->m);
  double max_tokens = c->chat ? 0 : 16; /* OpenAI's defaults: 16, or up to the context for chat */
  json_t *stream = json_object_get(req, "stream");
  const char *mt = c->chat && json_object_get(req, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  int given = json_object_get(req, mt) && !json_is_null(json_object_get(req, mt));
  static const char *const fields[] = {"temperature", "top_p", "n", "seed", "top_k", "repetition_penalty"};
  const char *field = NULL;
  if (!number(req, "temperature", 0, 2, 0, &temperature, msg, sizeof msg)) field = fields[0];
  else if (!number(req, "top_p", 0, 1, 0, &top_p, msg, sizeof msg) || top_p <= 0) {
    field = fields[1];
    if (!msg[0]) snprintf(msg, sizeof msg, "top_p must be in (0, 1]");
  } else if (!number(req, "n", 1, 1, 1, &n, msg, sizeof msg)) {
    field = fields[2];
    snprintf(msg, sizeof msg, "n must be 1: dvm serve makes one choice per request");
  } else if (!number(req, "seed", 0, 9007199254740991.0, 1, &seed, msg, sizeof msg)) field = fields[3];
  else if (!number(req, "top_k", -1, 1 << 30, 1, &top_k, msg, sizeof msg)) field = fields[4];
  else if (!number(req, "repetition_penalty", 1e-6, 1e6, 0, &rep, msg, sizeof msg)) field = fields[5];
  else if (!number(req, mt, 1, 1 << 24, 1, &max_tokens, msg, sizeof msg))
    field = "max_tokens";
  else if (stream && !json_is_boolean(stream)) field = "stream", snprintf(msg, sizeof msg, "stream must be true or false");
  else if (!stops(c, req, msg, sizeof msg)) field = "stop";
  if (field) {
    oai_error(rp, 400, field, msg);
    return 0;
  }
  if (c->m->cfg.max_tokens && max_tokens > c->m->cfg.max_tokens) {
    snprintf(msg, sizeof msg, "max_tokens %.0f is more than the model's limit of %d", max_tokens, c->m->cfg.max_tokens);
    oai_error(rp, 400, "max_tokens", msg);
    return 0;
  }
  c->stream = json_is_true(stream);
  json_t *so = json_object_get(req, "stream_options");
  c->include_usage = json_is_true(json_object_get(so, "include_usage"));
  dvm_status *st = prompt_ids(c, req);
  if (!st && c->g.nprompt >= (int)max_length)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "the prompt's %d tokens leave no room in the model's max_length of %.0f",
                        c->g.nprompt, max_length);
  if (st) {
    int oom = dvm_status_code(st) == DVM_OUT_OF_MEMORY;
    oai_error(rp, oom ? 507 : 400, c->chat ? "messages" : "prompt", dvm_status_message(st));
    dvm_status_free(st);
    return 0;
  }
  if (!given || !max_tokens) { /* the default: 16 (completions) or all (chat), within what is left */
    double left = max_length - c->g.nprompt;
    if (!max_tokens || max_tokens > left) max_tokens = left;
    if (c->m->cfg.max_tokens && max_tokens > c->m->cfg.max_tokens) max_tokens = c->m->cfg.max_tokens;
  }
  c->g.max_tokens = (int)max_tokens;
  dvm_generator_options *o = &c->g.search;
  dvm_generator_options_init(o);
  o->do_sample = temperature > 0;
  o->temperature = temperature > 0 ? temperature : -1;
  o->top_p = top_p;
  o->top_k = top_k < 0 ? 0 : (int)top_k; /* OpenAI samples from the whole vocabulary */
  o->repetition_penalty = rep;
  o->seed = (int64_t)seed;
  return 1;
}

/* ---- tokens to text ---- */

/* Decodes the tokens that came (up to n), ends at a stop string. */
static dvm_status *take(call *c, int n) {
  for (; c->seen < n && c->finish == DVMS_FINISH_NONE; c->seen++) {
    const char *piece;
    size_t len;
    dvm_status *st = dvm_tokenizer_stream_put(c->ts, c->g.tokens[c->seen], &piece, &len);
    if (st) return st;
    size_t from = c->text.len > c->maxstop ? c->text.len - c->maxstop : 0;
    dvms_buf_put(&c->text, piece, len);
    if (c->text.failed) return dvm_status_new(DVM_OUT_OF_MEMORY, "the answer's text");
    for (size_t at = from; at < c->text.len && c->finish == DVMS_FINISH_NONE; at++)
      for (int k = 0; k < c->nstop && c->finish == DVMS_FINISH_NONE; k++) {
        size_t L = strlen(c->stop[k]);
        if (c->text.len - at >= L && !memcmp(c->text.data + at, c->stop[k], L)) {
          c->text.len = at; /* the stop string and what follows are not answered */
          c->finish = DVMS_FINISH_EOS;
          dvms_llm_cancel(c->m, &c->g);
        }
      }
  }
  return NULL;
}

/* How much of the text may be answered now: all once over, else what
 * cannot be the start of a stop string, cut at a character's start. */
static size_t ready(const call *c) {
  if (c->finish != DVMS_FINISH_NONE || !c->maxstop) return c->text.len;
  size_t end = c->text.len >= c->maxstop - 1 ? c->text.len - (c->maxstop - 1) : 0;
  while (end > c->sent && end < c->text.len && ((unsigned char)c->text.data[end] & 0xC0) == 0x80) end--;
  return end > c->sent ? end : c->sent;
}

/* Waits for the next tokens (watching the client) and takes them; returns
 * 0, or -1 when the client went (the sequence is cancelled). */
static int advance(call *c, dvm_status **st) {
  for (;;) {
    int n, done = dvms_llm_wait(c->m, &c->g, c->seen, dvms_now() + 0.05, &n);
    if (n > c->seen || done) {
      if ((*st = take(c, n))) return 0;
      if (c->finish == DVMS_FINISH_NONE && done && c->seen == n) {
        c->finish = c->g.finish;
        const char *tail;
        size_t len;
        if (c->g.finish != DVMS_FINISH_ERROR && !(*st = dvm_tokenizer_stream_finish(c->ts, &tail, &len)))
          dvms_buf_put(&c->text, tail, len);
        if (c->g.finish == DVMS_FINISH_ERROR) *st = c->g.status, c->g.status = NULL;
      }
      return 0;
    }
    if (c->gone && c->gone(c->gone_ctx)) {
      dvms_llm_cancel(c->m, &c->g);
      return -1;
    }
  }
}

/* ---- answers ---- */

static void head(const call *c, dvms_buf *b, int chunk) {
  dvms_buf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", c->id,
                  c->chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion", c->created);
  dvms_buf_json_string(b, c->m->name);
}

static void usage(const call *c, dvms_buf *b) {
  dvms_buf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", c->g.nprompt,
                  c->seen, c->g.nprompt + c->seen);
}

/* A JSON string of text[from, to). */
static void text_json(dvms_buf *b, const call *c, size_t from, size_t to) {
  dvms_buf_json_stringn(b, c->text.data ? c->text.data + from : "", to - from);
}

static void whole(call *c, dvms_http_reply *rp) {
  dvms_buf *b = &rp->body;
  head(c, b, 0);
  PUT(b, ",\"choices\":[{\"index\":0,");
  dvms_buf_put(b, c->chat ? "\"message\":{\"role\":\"assistant\",\"content\":" : "\"text\":",
               c->chat ? 40 : 7);
  text_json(b, c, 0, c->text.len);
  dvms_buf_printf(b, "%s,%s\"finish_reason\":\"%s\"}],", c->chat ? "}" : "", c->chat ? "" : "\"logprobs\":null,",
                  finish_name(c->finish));
  usage(c, b);
  PUT(b, "}");
  rp->status = 200;
  rp->content_type = "application/json";
}

/* One server-sent event: text[from, to) and, when over, the finish reason. */
static void chunk(call *c, size_t from, size_t to, const char *finish) {
  dvms_buf *b = &c->out;
  PUT(b, "data: ");
  head(c, b, 1);
  PUT(b, ",\"choices\":[{\"index\":0,");
  if (c->chat) {
    PUT(b, "\"delta\":{");
    if (!c->began) PUT(b, "\"role\":\"assistant\"");
    if (from < to || !finish) { /* the last chunk's delta may be empty */
      if (!c->began) PUT(b, ",");
      PUT(b, "\"content\":");
      text_json(b, c, from, to);
    }
    PUT(b, "},");
  } else {
    PUT(b, "\"text\":");
    text_json(b, c, from, to);
    PUT(b, ",\"logprobs\":null,");
  }
  c->began = 1;
  if (finish) dvms_buf_printf(b, "\"finish_reason\":\"%s\"}]", finish);
  else PUT(b, "\"finish_reason\":null}]");
  PUT(b, "}\n\n");
}

/* The next bytes of a stream: an event for each step's tokens, then the
 * last with the finish reason (and the usage when asked), then [DONE]. */
static long stream_read(void *ctx, char *buf, size_t max) {
  call *c = ctx;
  while (c->out_at == c->out.len) {
    c->out.len = c->out_at = 0;
    if (c->phase == 2) return 0;
    if (c->phase == 1) {
      c->phase = 2;
      return 0;
    }
    dvm_status *st = NULL;
    if (c->finish == DVMS_FINISH_NONE && advance(c, &st) < 0) return -1;
    if (st) { /* an error after the 200: said in the stream, as vLLM does */
      PUT(&c->out, "data: {\"error\":{\"message\":");
      dvms_buf_json_string(&c->out, dvm_status_message(st));
      PUT(&c->out, ",\"type\":\"server_error\"}}\n\n");
      dvm_status_free(st);
      c->finish = DVMS_FINISH_ERROR;
    }
    size_t to = ready(c);
    if (c->finish == DVMS_FINISH_ERROR) {
      PUT(&c->out, "data: [DONE]\n\n");
      c->phase = 1;
    } else if (c->finish != DVMS_FINISH_NONE) {
      chunk(c, c->sent, to, finish_name(c->finish));
      c->sent = to;
      if (c->include_usage) {
        PUT(&c->out, "data: ");
        head(c, &c->out, 1);
        PUT(&c->out, ",\"choices\":[],");
        usage(c, &c->out);
        PUT(&c->out, "}\n\n");
      }
      PUT(&c->out, "data: [DONE]\n\n");
      c->phase = 1;
    } else { /* an event per step, even with no text yet (a character or a stop string incomplete) */
      chunk(c, c->sent, to, NULL);
      c->sent = to;
    }
    if (c->out.failed) return -1;
  }
  size_t n = c->out.len - c->out_at < max ? c->out.len - c->out_at : max;
  memcpy(buf, c->out.data + c->out_at, n);
  c->out_at += n;
  return (long)n;
}

static void stream_done(void *ctx) { call_free(ctx); }

static void generate(dvms_api *api, dvms_model *m, int chat, const dvms_http_request *rq, dvms_http_reply *rp,
                     json_t *req) {
  call *c = calloc(1, sizeof *c);
  if (!c) {
    oai_error(rp, 507, NULL, "out of memory");
    dvms_model_release(m);
    return;
  }
  static atomic_llong serial;
  c->api = api;
  c->m = m;
  c->chat = chat;
  c->created = (long long)time(NULL);
  snprintf(c->id, sizeof c->id, "%s-%lld-%lld", chat ? "chatcmpl" : "cmpl", c->created,
           (long long)atomic_fetch_add(&serial, 1));
  c->gone = rq->gone;
  c->gone_ctx = rq->gone_ctx;
  if (!parse(c, req, rp)) {
    dvms_metrics_request(api->metrics, m->name, rp->status == 507 ? DVMS_POOL : DVMS_CLIENT_ERROR, -1);
    call_free(c);
    return;
  }
  dvm_status *st = c->m->tok ? dvm_tokenizer_stream_create(c->m->tok, 1, &c->ts)
                             : dvm_status_new(DVM_INVALID_ARGUMENT, "the model has no tokenizer.json to write text with");
  if (!st) st = dvms_llm_submit(m, &c->g);
  if (st) {
    dvm_code code = dvm_status_code(st);
    unsigned status = code == DVM_RESOURCE_EXHAUSTED ? 503 : code == DVM_OUT_OF_MEMORY ? 507 : 400;
    if (status == 503) rp->retry_after = 1;
    oai_error(rp, status, status == 400 ? "max_tokens" : NULL, dvm_status_message(st));
    dvms_metrics_request(api->metrics, m->name, status == 503 ? DVMS_OVERLOAD : status == 507 ? DVMS_POOL
                                                                                               : DVMS_CLIENT_ERROR, -1);
    dvm_status_free(st);
    call_free(c);
    return;
  }
  if (c->stream) {
    rp->status = 200;
    rp->content_type = "text/event-stream";
    rp->stream_read = stream_read;
    rp->stream_done = stream_done;
    rp->stream_ctx = c;
    dvms_metrics_request(api->metrics, m->name, DVMS_OK, -1);
    return;
  }
  while (c->finish == DVMS_FINISH_NONE && !st)
    if (advance(c, &st) < 0) {
      oai_error(rp, 499, NULL, "the client closed the connection");
      dvms_metrics_request(api->metrics, m->name, DVMS_CANCELLED, -1);
      call_free(c);
      return;
    }
  if (st) {
    oai_error(rp, dvm_status_code(st) == DVM_OUT_OF_MEMORY ? 507 : 500, NULL, dvm_status_message(st));
    dvms_metrics_request(api->metrics, m->name, DVMS_FAILED, -1);
    dvm_status_free(st);
  } else {
    whole(c, rp);
    dvms_metrics_request(api->metrics, m->name, DVMS_OK, -1);
  }
  call_free(c);
}

static void list_models(dvms_api *api, dvms_http_reply *rp) {
  dvms_model *ms[256];
  int n = dvms_repo_llms(api->repo, ms, 256);
  PUT(&rp->body, "{\"object\":\"list\",\"data\":[");
  for (int i = 0; i < n; i++) {
    dvms_buf_put(&rp->body, i ? ",{\"id\":" : "{\"id\":", i ? 7 : 6);
    dvms_buf_json_string(&rp->body, ms[i]->name);
    dvms_buf_printf(&rp->body, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"dvm\",\"max_model_len\":%d}",
                    dvms_llm_max_length(ms[i]));
    dvms_model_release(ms[i]);
  }
  PUT(&rp->body, "]}");
  rp->status = 200;
  rp->content_type = "application/json";
}

void dvms_openai_handle(dvms_api *api, char **p, int n, const dvms_http_request *rq, dvms_http_reply *rp) {
  int post = !strcmp(rq->method, "POST");
  int chat = n == 3 && !strcmp(p[1], "chat") && !strcmp(p[2], "completions");
  if (n == 2 && !strcmp(p[1], "models")) {
    post ? oai_error(rp, 405, NULL, "method not allowed") : list_models(api, rp);
    return;
  }
  if (!chat && !(n == 2 && !strcmp(p[1], "completions"))) {
    oai_error(rp, 404, NULL, "no such route");
    return;
  }
  if (!post) {
    oai_error(rp, 405, NULL, "method not allowed");
    return;
  }
  if (rq->draining) {
    oai_error(rp, 503, NULL, "the server is shutting down");
    return;
  }
  json_error_t err;
  json_t *req = json_loadb((const char *)rq->body, rq->size, JSON_REJECT_DUPLICATES, &err);
  char msg[300];
  if (!json_is_object(req)) {
    snprintf(msg, sizeof msg, "the body is not a JSON object: %s (line %d, column %d)", req ? "another value" : err.text,
             err.line, err.column);
    oai_error(rp, 400, NULL, msg);
    json_decref(req);
    return;
  }
  json_t *model = json_object_get(req, "model");
  dvms_model *m = json_is_string(model) ? dvms_repo_get(api->repo, json_string_value(model), NULL) : NULL;
  if (json_is_string(model)) snprintf(rp->model, sizeof rp->model, "%s", json_string_value(model));
  if (!m || !m->llm) {
    snprintf(msg, sizeof msg, json_is_string(model) ? "model \"%.200s\" is %s" : "model: a model's name expected%.0s%s",
             json_is_string(model) ? json_string_value(model) : "", m ? "not a generation model" : "not loaded");
    oai_error(rp, json_is_string(model) ? 404 : 400, "model", msg);
    dvms_model_release(m);
  } else {
    generate(api, m, chat, rq, rp, req);
  }
  json_decref(req);
}
