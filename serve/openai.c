/* The generation routes over a model's engine (llm.c): OpenAI's
 * /v1/models, /v1/completions and /v1/chat/completions, and Triton's
 * generate extension (/v2/models/NAME/generate and generate_stream),
 * answered whole or streamed as server-sent events. A request is checked
 * (oairequest.c), encoded with the model's tokenizer (or given as token
 * ids), and queued as one sequence per choice (`n`); each choice's tokens
 * are decoded as they come; a stop string ends a choice where it starts
 * (the text after is never sent: text that might begin one is held back),
 * a client that goes away cancels them all. Errors are OpenAI's {"error":
 * {"message", "type", "param", "code"}}, or Triton's {"error": "..."} on
 * its routes. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

/* One choice: its own sequence in the engine, its own text. */
typedef struct choice {
  dvms_gen g;
  dvm_tokenizer_stream *ts;
  dvms_buf text; /* decoded so far */
  size_t sent;   /* of text, answered */
  int seen;      /* tokens decoded */
  int finish;    /* DVMS_FINISH_* once over; stop strings count as EOS */
  int chunked;   /* tokens seen at its last event; -1 once its last event is written */
  dvms_logprobs lp; /* its tokens' texts, when the request asks for logprobs (lp.ends set) */
} choice;

typedef struct call {
  dvms_model *m;
  dvms_openai_req r;
  char id[48];
  long long created;
  choice *ch; /* [r.n] */
  int (*gone)(void *);
  void *gone_ctx;
  /* streaming */
  dvms_buf out;
  size_t out_at;
  int phase;  /* 0 tokens, 1 the end written, 2 over */
} call;

static const char *finish_name(int f) { return f == DVMS_FINISH_LENGTH ? "length" : "stop"; }

static void call_free(call *c) {
  for (int k = 0; c->ch && k < c->r.n; k++) {
    choice *h = &c->ch[k];
    if (h->g.state == DVMS_GEN_QUEUED || h->g.state == DVMS_GEN_RUNNING) dvms_llm_cancel(c->m, &h->g);
    dvms_gen_clear(&h->g);
    dvm_tokenizer_stream_free(h->ts);
    dvms_buf_free(&h->text);
    dvms_logprobs_free(&h->lp);
  }
  free(c->ch);
  dvms_gen_clear(&c->r.g);
  dvms_openai_req_clear(&c->r);
  dvms_buf_free(&c->out);
  dvms_model_release(c->m);
  free(c);
}

/* ---- tokens to text ---- */

/* Decodes the tokens of h that came (up to n), ends at a stop string. */
static dvm_status *take(call *c, choice *h, int n) {
  for (; h->seen < n && h->finish == DVMS_FINISH_NONE; h->seen++) {
    const char *piece;
    size_t len;
    dvm_status *st = dvm_tokenizer_stream_put(h->ts, h->g.tokens[h->seen], &piece, &len);
    if (st) return st;
    size_t from = h->text.len > c->r.maxstop ? h->text.len - c->r.maxstop : 0;
    dvms_buf_put(&h->text, piece, len);
    if (h->lp.ends) dvms_logprobs_piece(&h->lp, piece, len);
    if (h->text.failed || h->lp.text.failed) return dvm_status_new(DVM_OUT_OF_MEMORY, "the answer's text");
    for (size_t at = from; at < h->text.len && h->finish == DVMS_FINISH_NONE; at++)
      for (int k = 0; k < c->r.nstop && h->finish == DVMS_FINISH_NONE; k++) {
        size_t L = strlen(c->r.stop[k]);
        if (h->text.len - at >= L && !memcmp(h->text.data + at, c->r.stop[k], L)) {
          h->text.len = at; /* the stop string and what follows are not answered */
          if (h->lp.ends) dvms_logprobs_cut(&h->lp, at);
          h->finish = DVMS_FINISH_EOS;
          dvms_llm_cancel(c->m, &h->g);
        }
      }
  }
  return NULL;
}

/* Takes h's tokens up to n and, once its sequence is done and all are
 * taken, ends it with the tokenizer's last text (or the engine's error). */
static dvm_status *settle(call *c, choice *h, int n, int done) {
  dvm_status *st = take(c, h, n);
  if (st || h->finish != DVMS_FINISH_NONE || !done || h->seen != n) return st;
  h->finish = h->g.finish;
  if (h->g.finish == DVMS_FINISH_ERROR) {
    st = h->g.status;
    h->g.status = NULL;
    return st;
  }
  const char *tail;
  size_t len;
  if ((st = dvm_tokenizer_stream_finish(h->ts, &tail, &len))) return st;
  dvms_buf_put(&h->text, tail, len);
  if (h->lp.ends) dvms_logprobs_tail(&h->lp, tail, len);
  return NULL;
}

/* How much of h's text may be answered now: all once over, else what
 * cannot be the start of a stop string, cut at a character's start. */
static size_t ready(const call *c, const choice *h) {
  if (h->finish != DVMS_FINISH_NONE || !c->r.maxstop) return h->text.len;
  size_t end = h->text.len >= c->r.maxstop - 1 ? h->text.len - (c->r.maxstop - 1) : 0;
  while (end > h->sent && end < h->text.len && ((unsigned char)h->text.data[end] & 0xC0) == 0x80) end--;
  return end > h->sent ? end : h->sent;
}

static choice *unfinished(call *c) {
  for (int k = 0; k < c->r.n; k++)
    if (c->ch[k].finish == DVMS_FINISH_NONE) return &c->ch[k];
  return NULL;
}

/* Waits for the next tokens of any choice (watching the client) and takes
 * every choice's; returns 0, or -1 when the client went (the sequences are
 * cancelled). The engine hands out a step's tokens together, so waiting on
 * the first unfinished choice and then looking at all misses none. */
static int advance(call *c, dvm_status **st) {
  for (;;) {
    choice *w = unfinished(c);
    if (!w) return 0;
    int n, moved = 0;
    dvms_llm_wait(c->m, &w->g, w->seen, dvms_now() + 0.05, &n);
    for (int k = 0; k < c->r.n; k++) {
      choice *h = &c->ch[k];
      if (h->finish != DVMS_FINISH_NONE) continue;
      int done = dvms_llm_wait(c->m, &h->g, INT_MAX, 0, &n); /* a look, no wait */
      if (n > h->seen || done) {
        moved = 1;
        if ((*st = settle(c, h, n, done))) return 0;
      }
    }
    if (moved) return 0;
    if (c->gone && c->gone(c->gone_ctx)) {
      for (int k = 0; k < c->r.n; k++) dvms_llm_cancel(c->m, &c->ch[k].g);
      return -1;
    }
  }
}

/* ---- answers ---- */

static void head(const call *c, dvms_buf *b, int chunk) {
  if (c->r.triton) {
    DVMS_PUT(b, "{\"model_name\":");
    dvms_buf_json_string(b, c->m->name);
    dvms_buf_printf(b, ",\"model_version\":\"%lld\"", (long long)c->m->version);
    return;
  }
  dvms_buf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", c->id,
                  c->r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion", c->created);
  dvms_buf_json_string(b, c->m->name);
}

static void usage(const call *c, dvms_buf *b) {
  int made = 0;
  for (int k = 0; k < c->r.n; k++) made += c->ch[k].seen;
  dvms_buf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", c->r.g.nprompt,
                  made, c->r.g.nprompt + made);
}

/* "logprobs": h's entries up to token upto, or null when not asked for. */
static void logprobs_json(const call *c, dvms_buf *b, choice *h, int upto) {
  DVMS_PUT(b, "\"logprobs\":");
  if (h->lp.ends) dvms_logprobs_write(b, &h->lp, &h->g, c->m->tok, c->r.chat, upto);
  else DVMS_PUT(b, "null");
  DVMS_PUT(b, ",");
}

/* A JSON string of h's text[from, to). */
static void text_json(dvms_buf *b, const choice *h, size_t from, size_t to) {
  dvms_buf_json_stringn(b, h->text.data ? h->text.data + from : "", to - from);
}

static void whole(call *c, dvms_http_reply *rp) {
  dvms_buf *b = &rp->body;
  head(c, b, 0);
  if (c->r.triton) {
    DVMS_PUT(b, ",\"text_output\":");
    text_json(b, &c->ch[0], 0, c->ch[0].text.len);
  } else {
    DVMS_PUT(b, ",\"choices\":[");
    for (int k = 0; k < c->r.n; k++) {
      choice *h = &c->ch[k];
      dvms_buf_printf(b, "%s{\"index\":%d,", k ? "," : "", k);
      if (c->r.chat) DVMS_PUT(b, "\"message\":{\"role\":\"assistant\",\"content\":");
      else DVMS_PUT(b, "\"text\":");
      text_json(b, h, 0, h->text.len);
      dvms_buf_printf(b, "%s", c->r.chat ? "}," : ",");
      logprobs_json(c, b, h, h->lp.n);
      dvms_buf_printf(b, "\"finish_reason\":\"%s\"}", finish_name(h->finish));
    }
    DVMS_PUT(b, "],");
    usage(c, b);
  }
  DVMS_PUT(b, "}");
  rp->status = 200;
  rp->content_type = "application/json";
}

/* One server-sent event of choice k: its text[from, to), the logprobs of
 * the tokens whose text it completes (all that are left, when over) and,
 * when over, the finish reason. */
static void chunk(call *c, int k, size_t from, size_t to, const char *finish) {
  dvms_buf *b = &c->out;
  choice *h = &c->ch[k];
  int first = h->chunked == 0;
  DVMS_PUT(b, "data: ");
  head(c, b, 1);
  if (c->r.triton) {
    DVMS_PUT(b, ",\"text_output\":");
    text_json(b, h, from, to);
    DVMS_PUT(b, "}\n\n");
    return;
  }
  dvms_buf_printf(b, ",\"choices\":[{\"index\":%d,", k);
  if (c->r.chat) {
    DVMS_PUT(b, "\"delta\":{");
    if (first) DVMS_PUT(b, "\"role\":\"assistant\"");
    if (from < to || !finish) { /* the last chunk's delta may be empty */
      if (first) DVMS_PUT(b, ",");
      DVMS_PUT(b, "\"content\":");
      text_json(b, h, from, to);
    }
    DVMS_PUT(b, "},");
  } else {
    DVMS_PUT(b, "\"text\":");
    text_json(b, h, from, to);
    DVMS_PUT(b, ",");
  }
  logprobs_json(c, b, h, finish ? h->lp.n : dvms_logprobs_ready(&h->lp, to));
  if (finish) dvms_buf_printf(b, "\"finish_reason\":\"%s\"}]", finish);
  else DVMS_PUT(b, "\"finish_reason\":null}]");
  DVMS_PUT(b, "}\n\n");
}

/* The events of a step: one for each choice whose tokens came (even with
 * no text yet: a character or a stop string incomplete), its last with the
 * finish reason; 1 once every choice's last is written. */
static int step_events(call *c) {
  int over = 1;
  for (int k = 0; k < c->r.n; k++) {
    choice *h = &c->ch[k];
    if (h->chunked < 0) continue;
    size_t to = ready(c, h);
    if (h->finish != DVMS_FINISH_NONE) {
      chunk(c, k, h->sent, to, finish_name(h->finish));
      h->chunked = -1;
    } else {
      over = 0;
      if (h->seen == h->chunked) continue;
      chunk(c, k, h->sent, to, NULL);
      h->chunked = h->seen;
    }
    h->sent = to;
  }
  return over;
}

/* The next bytes of a stream: the events of each step, then (OpenAI) the
 * usage when asked and [DONE]. */
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
    if (unfinished(c) && advance(c, &st) < 0) return -1;
    if (st) { /* an error after the 200: said in the stream, as vLLM and Triton do */
      DVMS_PUT(&c->out, "data: {\"error\":");
      if (!c->r.triton) DVMS_PUT(&c->out, "{\"message\":");
      dvms_buf_json_string(&c->out, dvm_status_message(st));
      if (!c->r.triton) DVMS_PUT(&c->out, ",\"type\":\"server_error\"}");
      DVMS_PUT(&c->out, "}\n\n");
      dvm_status_free(st);
      c->phase = 1;
    } else if (step_events(c)) {
      if (c->r.include_usage && !c->r.triton) {
        DVMS_PUT(&c->out, "data: ");
        head(c, &c->out, 1);
        DVMS_PUT(&c->out, ",\"choices\":[],");
        usage(c, &c->out);
        DVMS_PUT(&c->out, "}\n\n");
      }
      c->phase = 1;
    }
    if (c->phase == 1 && !c->r.triton) DVMS_PUT(&c->out, "data: [DONE]\n\n");
    if (c->out.failed) return -1;
  }
  size_t n = c->out.len - c->out_at < max ? c->out.len - c->out_at : max;
  memcpy(buf, c->out.data + c->out_at, n);
  c->out_at += n;
  return (long)n;
}

static void stream_done(void *ctx) { call_free(ctx); }

static void fail(const call *c, dvms_http_reply *rp, unsigned status, const char *param, const char *msg) {
  if (c->r.triton) dvms_kserve_error(rp, status, msg);
  else dvms_openai_error(rp, status, param, msg);
}

/* Queues one sequence per choice; choice k samples with seed + k, so the
 * first is what the same request with n = 1 makes. */
static dvm_status *submit(call *c) {
  if (!c->m->tok) return dvm_status_new(DVM_INVALID_ARGUMENT, "the model has no tokenizer.json to write text with");
  if (!(c->ch = calloc((size_t)c->r.n, sizeof *c->ch))) return dvm_status_new(DVM_OUT_OF_MEMORY, "the choices");
  for (int k = 0; k < c->r.n; k++) {
    choice *h = &c->ch[k];
    h->g.prompt = c->r.g.prompt;
    h->g.nprompt = c->r.g.nprompt;
    h->g.max_tokens = c->r.g.max_tokens;
    h->g.search = c->r.g.search;
    if (h->g.search.seed >= 0) h->g.search.seed += k;
    if (h->g.search.logprobs >= 0 && !(h->lp.ends = malloc((size_t)h->g.max_tokens * sizeof *h->lp.ends)))
      return dvm_status_new(DVM_OUT_OF_MEMORY, "the choices' logprobs");
    dvm_status *st = dvm_tokenizer_stream_create(c->m->tok, 1, &h->ts);
    if (!st) st = dvms_llm_submit(c->m, &h->g);
    if (st) return st; /* call_free cancels those queued */
  }
  return NULL;
}

enum { COMPLETION, CHAT, TRITON };

/* Answers request `req` of `kind` to m (whose reference it takes over);
 * stream: Triton's route (OpenAI's request says itself). */
static void generate(dvms_api *api, dvms_model *m, int kind, int stream, const dvms_http_request *rq,
                     dvms_http_reply *rp, json_t *req) {
  call *c = calloc(1, sizeof *c);
  if (!c) {
    kind == TRITON ? dvms_kserve_error(rp, 507, "out of memory") : dvms_openai_error(rp, 507, NULL, "out of memory");
    dvms_model_release(m);
    return;
  }
  static atomic_llong serial;
  c->m = m;
  c->r.chat = kind == CHAT;
  c->r.triton = kind == TRITON;
  c->r.stream = stream;
  c->created = (long long)time(NULL);
  snprintf(c->id, sizeof c->id, "%s-%lld-%lld", c->r.chat ? "chatcmpl" : "cmpl", c->created,
           (long long)atomic_fetch_add(&serial, 1));
  c->gone = rq->gone;
  c->gone_ctx = rq->gone_ctx;
  if (!(c->r.triton ? dvms_triton_parse : dvms_openai_parse)(m, req, &c->r, rp)) {
    dvms_metrics_request(api->metrics, m->name, rp->status == 507 ? DVMS_POOL : DVMS_CLIENT_ERROR, -1);
    call_free(c);
    return;
  }
  dvm_status *st = submit(c);
  if (st) {
    dvm_code code = dvm_status_code(st);
    unsigned status = code == DVM_RESOURCE_EXHAUSTED ? 503 : code == DVM_OUT_OF_MEMORY ? 507 : 400;
    if (status == 503) rp->retry_after = 1;
    fail(c, rp, status, status == 400 ? "prompt" : NULL, dvm_status_message(st));
    dvms_metrics_request(api->metrics, m->name, status == 503 ? DVMS_OVERLOAD : status == 507 ? DVMS_POOL
                                                                                               : DVMS_CLIENT_ERROR, -1);
    dvm_status_free(st);
    call_free(c);
    return;
  }
  if (c->r.stream) {
    rp->status = 200;
    rp->content_type = "text/event-stream";
    rp->stream_read = stream_read;
    rp->stream_done = stream_done;
    rp->stream_ctx = c;
    dvms_metrics_request(api->metrics, m->name, DVMS_OK, -1);
    return;
  }
  while (unfinished(c) && !st)
    if (advance(c, &st) < 0) {
      fail(c, rp, 499, NULL, "the client closed the connection");
      dvms_metrics_request(api->metrics, m->name, DVMS_CANCELLED, -1);
      call_free(c);
      return;
    }
  if (st) {
    fail(c, rp, dvm_status_code(st) == DVM_OUT_OF_MEMORY ? 507 : 500, NULL, dvm_status_message(st));
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
  DVMS_PUT(&rp->body, "{\"object\":\"list\",\"data\":[");
  for (int i = 0; i < n; i++) {
    dvms_buf_put(&rp->body, i ? ",{\"id\":" : "{\"id\":", i ? 7 : 6);
    dvms_buf_json_string(&rp->body, ms[i]->name);
    dvms_buf_printf(&rp->body, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"dvm\",\"max_model_len\":%d}",
                    ms[i]->max_length);
    dvms_model_release(ms[i]);
  }
  DVMS_PUT(&rp->body, "]}");
  rp->status = 200;
  rp->content_type = "application/json";
}

/* The body as a JSON object, or 0 with a 400 in rp. */
static json_t *body_object(const dvms_http_request *rq, dvms_http_reply *rp, int triton) {
  json_error_t err;
  json_t *req = json_loadb((const char *)rq->body, rq->size, JSON_REJECT_DUPLICATES, &err);
  if (json_is_object(req)) return req;
  char msg[300];
  snprintf(msg, sizeof msg, "the body is not a JSON object: %s (line %d, column %d)", req ? "another value" : err.text,
           err.line, err.column);
  triton ? dvms_kserve_error(rp, 400, msg) : dvms_openai_error(rp, 400, NULL, msg);
  json_decref(req);
  return NULL;
}

void dvms_generate_handle(dvms_api *api, dvms_model *m, int stream, const dvms_http_request *rq,
                          dvms_http_reply *rp) {
  if (!m->llm) {
    dvms_kserve_error(rp, 400, "not a generation model: generate needs a model folder with genai_config.json");
    return;
  }
  if (rq->draining) {
    dvms_kserve_error(rp, 503, "the server is shutting down");
    return;
  }
  json_t *req = body_object(rq, rp, 1);
  if (!req) return;
  generate(api, dvms_model_retain(m), TRITON, stream, rq, rp, req);
  json_decref(req);
}

void dvms_openai_handle(dvms_api *api, char **p, int n, const dvms_http_request *rq, dvms_http_reply *rp) {
  int post = !strcmp(rq->method, "POST");
  int chat = n == 3 && !strcmp(p[1], "chat") && !strcmp(p[2], "completions");
  if (n == 2 && !strcmp(p[1], "models")) {
    post ? dvms_openai_error(rp, 405, NULL, "method not allowed") : list_models(api, rp);
    return;
  }
  if (!chat && !(n == 2 && !strcmp(p[1], "completions"))) {
    dvms_openai_error(rp, 404, NULL, "no such route");
    return;
  }
  if (!post) {
    dvms_openai_error(rp, 405, NULL, "method not allowed");
    return;
  }
  if (rq->draining) {
    dvms_openai_error(rp, 503, NULL, "the server is shutting down");
    return;
  }
  json_t *req = body_object(rq, rp, 0);
  if (!req) return;
  char msg[300];
  json_t *model = json_object_get(req, "model");
  dvms_model *m = json_is_string(model) ? dvms_repo_get(api->repo, json_string_value(model), NULL) : NULL;
  if (json_is_string(model)) snprintf(rp->model, sizeof rp->model, "%s", json_string_value(model));
  if (!m || !m->llm) {
    snprintf(msg, sizeof msg, json_is_string(model) ? "model \"%.200s\" is %s" : "model: a model's name expected%.0s%s",
             json_is_string(model) ? json_string_value(model) : "", m ? "not a generation model" : "not loaded");
    dvms_openai_error(rp, json_is_string(model) ? 404 : 400, "model", msg);
    dvms_model_release(m);
  } else {
    generate(api, m, chat ? CHAT : COMPLETION, 0, rq, rp, req);
  }
  json_decref(req);
}
