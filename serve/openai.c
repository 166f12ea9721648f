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


typedef struct call {
  dvms_model *m;
  dvms_openai_req r;
  char id[48];
  long long created;
  dvm_tokenizer_stream *ts;
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

static const char *finish_name(int f) { return f == DVMS_FINISH_LENGTH ? "length" : "stop"; }

static void call_free(call *c) {
  if (c->r.g.state == DVMS_GEN_QUEUED || c->r.g.state == DVMS_GEN_RUNNING) dvms_llm_cancel(c->m, &c->r.g);
  dvms_gen_clear(&c->r.g);
  dvms_openai_req_clear(&c->r);
  dvm_tokenizer_stream_free(c->ts);
  dvms_buf_free(&c->text);
  dvms_buf_free(&c->out);
  dvms_model_release(c->m);
  free(c);
}

/* ---- tokens to text ---- */

/* Decodes the tokens that came (up to n), ends at a stop string. */
static dvm_status *take(call *c, int n) {
  for (; c->seen < n && c->finish == DVMS_FINISH_NONE; c->seen++) {
    const char *piece;
    size_t len;
    dvm_status *st = dvm_tokenizer_stream_put(c->ts, c->r.g.tokens[c->seen], &piece, &len);
    if (st) return st;
    size_t from = c->text.len > c->r.maxstop ? c->text.len - c->r.maxstop : 0;
    dvms_buf_put(&c->text, piece, len);
    if (c->text.failed) return dvm_status_new(DVM_OUT_OF_MEMORY, "the answer's text");
    for (size_t at = from; at < c->text.len && c->finish == DVMS_FINISH_NONE; at++)
      for (int k = 0; k < c->r.nstop && c->finish == DVMS_FINISH_NONE; k++) {
        size_t L = strlen(c->r.stop[k]);
        if (c->text.len - at >= L && !memcmp(c->text.data + at, c->r.stop[k], L)) {
          c->text.len = at; /* the stop string and what follows are not answered */
          c->finish = DVMS_FINISH_EOS;
          dvms_llm_cancel(c->m, &c->r.g);
        }
      }
  }
  return NULL;
}

/* How much of the text may be answered now: all once over, else what
 * cannot be the start of a stop string, cut at a character's start. */
static size_t ready(const call *c) {
  if (c->finish != DVMS_FINISH_NONE || !c->r.maxstop) return c->text.len;
  size_t end = c->text.len >= c->r.maxstop - 1 ? c->text.len - (c->r.maxstop - 1) : 0;
  while (end > c->sent && end < c->text.len && ((unsigned char)c->text.data[end] & 0xC0) == 0x80) end--;
  return end > c->sent ? end : c->sent;
}

/* Waits for the next tokens (watching the client) and takes them; returns
 * 0, or -1 when the client went (the sequence is cancelled). */
static int advance(call *c, dvm_status **st) {
  for (;;) {
    int n, done = dvms_llm_wait(c->m, &c->r.g, c->seen, dvms_now() + 0.05, &n);
    if (n > c->seen || done) {
      if ((*st = take(c, n))) return 0;
      if (c->finish == DVMS_FINISH_NONE && done && c->seen == n) {
        c->finish = c->r.g.finish;
        const char *tail;
        size_t len;
        if (c->r.g.finish != DVMS_FINISH_ERROR && !(*st = dvm_tokenizer_stream_finish(c->ts, &tail, &len)))
          dvms_buf_put(&c->text, tail, len);
        if (c->r.g.finish == DVMS_FINISH_ERROR) *st = c->r.g.status, c->r.g.status = NULL;
      }
      return 0;
    }
    if (c->gone && c->gone(c->gone_ctx)) {
      dvms_llm_cancel(c->m, &c->r.g);
      return -1;
    }
  }
}

/* ---- answers ---- */

static void head(const call *c, dvms_buf *b, int chunk) {
  dvms_buf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", c->id,
                  c->r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion", c->created);
  dvms_buf_json_string(b, c->m->name);
}

static void usage(const call *c, dvms_buf *b) {
  dvms_buf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}", c->r.g.nprompt,
                  c->seen, c->r.g.nprompt + c->seen);
}

/* A JSON string of text[from, to). */
static void text_json(dvms_buf *b, const call *c, size_t from, size_t to) {
  dvms_buf_json_stringn(b, c->text.data ? c->text.data + from : "", to - from);
}

static void whole(call *c, dvms_http_reply *rp) {
  dvms_buf *b = &rp->body;
  head(c, b, 0);
  DVMS_PUT(b, ",\"choices\":[{\"index\":0,");
  dvms_buf_put(b, c->r.chat ? "\"message\":{\"role\":\"assistant\",\"content\":" : "\"text\":",
               c->r.chat ? 40 : 7);
  text_json(b, c, 0, c->text.len);
  dvms_buf_printf(b, "%s,%s\"finish_reason\":\"%s\"}],", c->r.chat ? "}" : "", c->r.chat ? "" : "\"logprobs\":null,",
                  finish_name(c->finish));
  usage(c, b);
  DVMS_PUT(b, "}");
  rp->status = 200;
  rp->content_type = "application/json";
}

/* One server-sent event: text[from, to) and, when over, the finish reason. */
static void chunk(call *c, size_t from, size_t to, const char *finish) {
  dvms_buf *b = &c->out;
  DVMS_PUT(b, "data: ");
  head(c, b, 1);
  DVMS_PUT(b, ",\"choices\":[{\"index\":0,");
  if (c->r.chat) {
    DVMS_PUT(b, "\"delta\":{");
    if (!c->began) DVMS_PUT(b, "\"role\":\"assistant\"");
    if (from < to || !finish) { /* the last chunk's delta may be empty */
      if (!c->began) DVMS_PUT(b, ",");
      DVMS_PUT(b, "\"content\":");
      text_json(b, c, from, to);
    }
    DVMS_PUT(b, "},");
  } else {
    DVMS_PUT(b, "\"text\":");
    text_json(b, c, from, to);
    DVMS_PUT(b, ",\"logprobs\":null,");
  }
  c->began = 1;
  if (finish) dvms_buf_printf(b, "\"finish_reason\":\"%s\"}]", finish);
  else DVMS_PUT(b, "\"finish_reason\":null}]");
  DVMS_PUT(b, "}\n\n");
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
      DVMS_PUT(&c->out, "data: {\"error\":{\"message\":");
      dvms_buf_json_string(&c->out, dvm_status_message(st));
      DVMS_PUT(&c->out, ",\"type\":\"server_error\"}}\n\n");
      dvm_status_free(st);
      c->finish = DVMS_FINISH_ERROR;
    }
    size_t to = ready(c);
    if (c->finish == DVMS_FINISH_ERROR) {
      DVMS_PUT(&c->out, "data: [DONE]\n\n");
      c->phase = 1;
    } else if (c->finish != DVMS_FINISH_NONE) {
      chunk(c, c->sent, to, finish_name(c->finish));
      c->sent = to;
      if (c->r.include_usage) {
        DVMS_PUT(&c->out, "data: ");
        head(c, &c->out, 1);
        DVMS_PUT(&c->out, ",\"choices\":[],");
        usage(c, &c->out);
        DVMS_PUT(&c->out, "}\n\n");
      }
      DVMS_PUT(&c->out, "data: [DONE]\n\n");
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
    dvms_openai_error(rp, 507, NULL, "out of memory");
    dvms_model_release(m);
    return;
  }
  static atomic_llong serial;
  c->m = m;
  c->r.chat = chat;
  c->created = (long long)time(NULL);
  snprintf(c->id, sizeof c->id, "%s-%lld-%lld", chat ? "chatcmpl" : "cmpl", c->created,
           (long long)atomic_fetch_add(&serial, 1));
  c->gone = rq->gone;
  c->gone_ctx = rq->gone_ctx;
  if (!dvms_openai_parse(m, req, &c->r, rp)) {
    dvms_metrics_request(api->metrics, m->name, rp->status == 507 ? DVMS_POOL : DVMS_CLIENT_ERROR, -1);
    call_free(c);
    return;
  }
  dvm_status *st = c->m->tok ? dvm_tokenizer_stream_create(c->m->tok, 1, &c->ts)
                             : dvm_status_new(DVM_INVALID_ARGUMENT, "the model has no tokenizer.json to write text with");
  if (!st) st = dvms_llm_submit(m, &c->r.g);
  if (st) {
    dvm_code code = dvm_status_code(st);
    unsigned status = code == DVM_RESOURCE_EXHAUSTED ? 503 : code == DVM_OUT_OF_MEMORY ? 507 : 400;
    if (status == 503) rp->retry_after = 1;
    dvms_openai_error(rp, status, status == 400 ? "prompt" : NULL, dvm_status_message(st));
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
  while (c->finish == DVMS_FINISH_NONE && !st)
    if (advance(c, &st) < 0) {
      dvms_openai_error(rp, 499, NULL, "the client closed the connection");
      dvms_metrics_request(api->metrics, m->name, DVMS_CANCELLED, -1);
      call_free(c);
      return;
    }
  if (st) {
    dvms_openai_error(rp, dvm_status_code(st) == DVM_OUT_OF_MEMORY ? 507 : 500, NULL, dvm_status_message(st));
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
  json_error_t err;
  json_t *req = json_loadb((const char *)rq->body, rq->size, JSON_REJECT_DUPLICATES, &err);
  char msg[300];
  if (!json_is_object(req)) {
    snprintf(msg, sizeof msg, "the body is not a JSON object: %s (line %d, column %d)", req ? "another value" : err.text,
             err.line, err.column);
    dvms_openai_error(rp, 400, NULL, msg);
    json_decref(req);
    return;
  }
  json_t *model = json_object_get(req, "model");
  dvms_model *m = json_is_string(model) ? dvms_repo_get(api->repo, json_string_value(model), NULL) : NULL;
  if (json_is_string(model)) snprintf(rp->model, sizeof rp->model, "%s", json_string_value(model));
  if (!m || !m->llm) {
    snprintf(msg, sizeof msg, json_is_string(model) ? "model \"%.200s\" is %s" : "model: a model's name expected%.0s%s",
             json_is_string(model) ? json_string_value(model) : "", m ? "not a generation model" : "not loaded");
    dvms_openai_error(rp, json_is_string(model) ? 404 : 400, "model", msg);
    dvms_model_release(m);
  } else {
    generate(api, m, chat, rq, rp, req);
  }
  json_decref(req);
}
