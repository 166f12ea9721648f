/* dvm serve: an inference server on the Open Inference Protocol (KServe v2
 * REST) over libdvm's public API. The pieces, one file each:
 *
 *   http.c     the HTTP front (libmicrohttpd, a thread per connection):
 *              bodies, limits, disconnect watch, access log, shutdown
 *   conns.c    the open connections: header and body deadlines
 *   api.c      the KServe v2 routes: health, metadata, infer, repository
 *   request.c  an infer request's JSON (+ binary tensor data) to tensors
 *   reply.c    an infer response to JSON (+ binary tensor data)
 *   config.c   a model's `config` file
 *   repo.c     the model repository: load, unload, look up, index
 *   batcher.c  a model's queue and its workers (a VM each): dynamic
 *              batching along the batch symbol, padding in buckets
 *   metrics.c  Prometheus text metrics
 *   llm.c      a generation model's engine: continuous batching of
 *              sequences over one dvm_generator
 *   openai.c   the OpenAI routes (/v1/completions, /v1/chat/completions,
 *              /v1/models) and Triton's generate extension over llm.c
 *   oairequest.c  such a request's JSON, read and checked
 *   chat.c     chat messages to a prompt by the model's chat template
 *
 * Nothing here prints except through the access log FILE the caller gives;
 * errors are dvm_status values. Design and rules: docs/serving.md. */
#ifndef DVM_SERVE_H
#define DVM_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "dvm/dvm.h"

#define DVMS_MAX_IO 16   /* inputs or outputs of a served function */
#define DVMS_MAX_SYMS 16 /* symbols of a served function */

/* ---- a growable byte buffer (request.c, reply.c, api.c) ---- */
typedef struct dvms_buf {
  char *data;
  size_t len, cap;
  int failed; /* an allocation failed: the content is incomplete */
} dvms_buf;
void dvms_buf_put(dvms_buf *b, const void *p, size_t n);
void dvms_buf_printf(dvms_buf *b, const char *fmt, ...) DVM_PRINTF(2, 3);
void dvms_buf_json_string(dvms_buf *b, const char *s); /* quoted and escaped */
void dvms_buf_json_stringn(dvms_buf *b, const char *s, size_t n); /* n bytes, NULs included */
void dvms_buf_free(dvms_buf *b);
/* A string literal only: "" literal fails to compile for anything else (a ?:
 * of literals would take the wrong sizeof). */
#define DVMS_PUT(b, literal) dvms_buf_put(b, "" literal, sizeof("" literal) - 1)

/* ---- signatures: what a request is checked against ---- */
typedef struct dvms_sig {
  char name[64];
  dvm_dtype dtype;
  int rank;
  int64_t dims[DVM_MAX_RANK]; /* >= 0 constant, -1 any */
  int sym[DVM_MAX_RANK];      /* index into dvms_sigs.syms, or -1 */
} dvms_sig;

typedef struct dvms_sigs {
  dvms_sig in[DVMS_MAX_IO], out[DVMS_MAX_IO];
  int nin, nout;
  char sym_name[DVMS_MAX_SYMS][64];
  int64_t sym_lo[DVMS_MAX_SYMS], sym_hi[DVMS_MAX_SYMS];
  int nsyms;
} dvms_sigs;

/* The KServe v2 datatype name of a dvm dtype ("FP32", "INT64", ...). */
const char *dvms_datatype_name(dvm_dtype dt);

/* ---- the inputs' data in a request's JSON text (jsondata.c) ---- */
typedef struct dvms_span {
  size_t start, end; /* a value's bytes in the body; end 0: none */
} dvms_span;
/* *skeleton: a copy of body[0..n) with each inputs[k].data value blanked to
 * a 0 (*spans[k] says where it was; malloc'ed, as is the copy). Refuses a
 * request of more than a few thousand other JSON values. */
DVM_MUST_USE dvm_status *dvms_json_skeleton(const char *body, size_t n, char **skeleton, dvms_span **spans,
                                            size_t *nspans);
/* Reads the JSON value s[0..n) (a scalar or nested arrays, row-major) into
 * t, each element checked against t's dtype; *count: elements read. */
DVM_MUST_USE dvm_status *dvms_json_fill(dvm_tensor *t, const char *s, size_t n, const char *name, int64_t *count);

/* ---- an infer request, parsed ---- */
enum { DVMS_OUT_NONE = 0, DVMS_OUT_JSON, DVMS_OUT_BINARY };

typedef struct dvms_request {
  char *id;                            /* NULL when the request has none */
  dvm_tensor *inputs[DVMS_MAX_IO];     /* in signature order; one reference each */
  int64_t sym[DVMS_MAX_SYMS];          /* the value of each symbol, -1 if unbound */
  int want[DVMS_MAX_IO];               /* per output: DVMS_OUT_* */
  int64_t timeout_us;                  /* parameters.timeout; 0 = none given */
  int64_t priority;                    /* parameters.priority: 1 first, 2 next, ...; 0 = last */
} dvms_request;

/* Parses an infer request body against `sigs`. header_len is the
 * Inference-Header-Content-Length (0: the whole body is JSON); binary
 * tensor data follows the header in input order. No input may exceed
 * max_elements elements. Fails with DVM_INVALID_ARGUMENT naming the
 * input and the fact; on failure `req` holds nothing. */
DVM_MUST_USE dvm_status *dvms_request_parse(const uint8_t *body, size_t size, size_t header_len,
                                            const dvms_sigs *sigs, int64_t max_elements,
                                            dvms_request *req);
void dvms_request_clear(dvms_request *req);

/* Writes the response for results `outs` (nout of them, in signature
 * order; NULL where not wanted) into b; *header_len is the JSON part's
 * length when any output is binary, else 0. */
void dvms_reply_write(dvms_buf *b, const char *model, int64_t version, const dvms_request *req,
                      const dvms_sigs *sigs, dvm_tensor *const *outs, size_t *header_len);

/* ---- a model's config file ---- */
#define DVMS_MAX_BUCKETS 16
typedef struct dvms_config {
  char function[64];         /* function = main */
  char batch[64];            /* batch = SYMBOL (empty: no batching) */
  int max_batch;             /* max_batch = 8 (rows per invocation) */
  int64_t queue_delay_us;    /* queue_delay_us = 2000 */
  char pad[64];              /* pad = SYMBOL (empty: no padding) */
  char pad_input[DVMS_MAX_IO][64];
  double pad_value[DVMS_MAX_IO];
  int npad_inputs;           /* pad_value = INPUT:VALUE (one line each) */
  int64_t buckets[DVMS_MAX_BUCKETS];
  int nbuckets;              /* pad_buckets = 16 32 64 (default 8 16 32 64 ...) */
  int pad_to_max;            /* pad_to_max = 1: pad to the symbol's maximum (a baseline) */
  int workers;               /* workers = N (VMs); 0 = the server's --workers */
  int threads;               /* threads = N kernel threads per worker; 0 = cores / workers */
  char device[16];           /* device = auto | cpu | cuda */
  int64_t max_queue;         /* max_queue = 256 queued requests */
  int64_t timeout_us;        /* timeout_us = 0 (none): default per-request deadline */
  int64_t pool_limit;        /* pool_limit = BYTES per VM pool (0: none) */
  char dims[8][96];
  int ndims;                 /* dim = NAME=LO..HI, for model.onnx compiled at load */
  /* a generation model (a folder with genai_config.json) */
  int max_running;           /* max_running = 8 sequences at once (the generator's batch) */
  int max_tokens;            /* max_tokens = N new tokens per request; 0: up to max_length */
  int max_length;            /* max_length = N tokens per sequence; 0: genai_config.json's */
  int continuous_batching;   /* continuous_batching = 1; 0: one sequence at a time */
  int kv_block_size;         /* kv_block_size = 16 token rows per KV block; 0: the contiguous cache */
  int64_t kv_budget;         /* kv_budget = BYTES of KV blocks; 0: the contiguous cache's */
  int kv_f16;                /* kv_dtype = f32 | f16: an f32 model's KV cache in half precision */
  int prefill_chunk;         /* prefill_chunk = N prompt tokens per step; 0: a prompt whole */
  int prefill_budget;        /* prefill_budget = N prompt tokens per step over all prompts; 0: none */
  char last_position[128];   /* not a key: the logits output compiled for its last position only */
} dvms_config;

void dvms_config_defaults(dvms_config *c);
/* Reads `key = value` lines ('#' comments) from path into c. */
DVM_MUST_USE dvm_status *dvms_config_read(const char *path, dvms_config *c);

/* ---- metrics ---- */
typedef struct dvms_metrics dvms_metrics;
enum { DVMS_OK, DVMS_CLIENT_ERROR, DVMS_TIMEOUT, DVMS_OVERLOAD, DVMS_POOL, DVMS_FAILED,
       DVMS_CANCELLED, DVMS_OUTCOMES };
DVM_MUST_USE dvm_status *dvms_metrics_create(dvms_metrics **out);
void dvms_metrics_destroy(dvms_metrics *m);
void dvms_metrics_request(dvms_metrics *m, const char *model, int outcome, double queue_s);
void dvms_metrics_batch(dvms_metrics *m, const char *model, int rows, double compute_s,
                        int64_t real_elements, int64_t padded_elements);
/* The model's pools, summed over its workers: in_use, peak, cached. */
void dvms_metrics_pool(dvms_metrics *m, const char *model, const dvm_pool_stats *sum);
void dvms_metrics_queue(dvms_metrics *m, const char *model, int64_t queued);
void dvms_metrics_http(dvms_metrics *m, unsigned status);
/* A generation model's series (vLLM's names): sequences running and
 * waiting now, prompt and generated tokens, time to the first token and
 * between tokens. */
void dvms_metrics_gen_state(dvms_metrics *m, const char *model, int running, int64_t waiting);
void dvms_metrics_gen_prompt(dvms_metrics *m, const char *model, int tokens, double ttft_s);
void dvms_metrics_gen_token(dvms_metrics *m, const char *model, double since_last_s); /* < 0: the first */
/* A generation model's paged KV cache now: blocks (the sequences'), used
 * now and at most so far, bytes per block, and the counts so far. */
typedef struct dvms_kv_metrics {
  int blocks, used, peak;
  size_t block_bytes;
  uint64_t preemptions, prefix_queries, prefix_hits;
} dvms_kv_metrics;
void dvms_metrics_gen_kv(dvms_metrics *m, const char *model, const dvms_kv_metrics *kv);
void dvms_metrics_write(dvms_metrics *m, dvms_buf *b);

/* ---- a loaded model version, its queue and workers ---- */
typedef struct dvms_job dvms_job;
typedef struct dvms_model dvms_model;
typedef struct dvms_llm dvms_llm;

struct dvms_model {
  char name[128];
  int64_t version;
  atomic_int refs;
  dvm_module *module;
  int function;
  dvm_device_kind device; /* where its VMs run */
  dvms_sigs sigs;
  dvms_config cfg;
  int batch_sym, pad_sym; /* symbol indices or -1 */
  double pad_value[DVMS_MAX_IO];
  dvms_metrics *metrics;
  /* the queue */
  pthread_mutex_t mu;
  pthread_cond_t work;
  dvms_job *head, *tail;
  int64_t queued;
  int stop;
  /* the workers */
  int nworkers, nstarted;
  pthread_t *threads;
  dvm_vm **vms;
  dvm_pool_stats *pools; /* per worker (the model's device), under mu */
  /* a generation model: its engine and tokenizer instead of workers */
  dvms_llm *llm;
  int max_length;         /* tokens per sequence, prompt included */
  dvm_tokenizer *tok;
  char chat_template[16]; /* "chatml"(+sys), "llama2", "inst", "header", "tagged"(+bos), "turn", or "" (none) */
  char chat_error[256];   /* why chat is refused, when chat_template is "" */
  char bos[64], eos[64];  /* tokenizer_config.json's bos_token and eos_token */
};

enum { DVMS_JOB_QUEUED, DVMS_JOB_RUNNING, DVMS_JOB_DONE };

struct dvms_job {
  dvms_job *next, *prev;
  dvms_request *req;
  int state;
  int64_t rows;           /* the request's batch dim (1 when unbatched) */
  double enqueued, started, finished, deadline; /* seconds (monotonic); deadline 0 = none */
  int batch_rows;         /* rows of the invocation it ran in */
  dvm_tensor *outs[DVMS_MAX_IO];
  dvm_status *status;     /* on failure */
  pthread_cond_t done;
};

/* Starts the workers of a loaded model. */
DVM_MUST_USE dvm_status *dvms_batcher_start(dvms_model *m, int threads);
/* Stops them after the queue is empty (they finish what is queued). */
void dvms_batcher_stop(dvms_model *m);
/* Queues a job (req borrowed until the job is done). Fails with
 * DVM_RESOURCE_EXHAUSTED when max_queue requests are waiting. */
DVM_MUST_USE dvm_status *dvms_batcher_submit(dvms_model *m, dvms_job *job, dvms_request *req,
                                             double timeout_s);
/* Waits until the job is done or `until` (monotonic seconds) passes;
 * returns 1 when done. */
int dvms_batcher_wait(dvms_model *m, dvms_job *job, double until);
/* Takes a job off the queue if it has not started (deadline passed, client
 * gone): returns 1 if taken, 0 if it is running or done (then wait). */
int dvms_batcher_cancel(dvms_model *m, dvms_job *job);
void dvms_job_clear(dvms_job *job);
double dvms_now(void);
void dvms_cond_init(pthread_cond_t *c); /* on the monotonic clock */
void dvms_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu, double until);

/* ---- a generation model's engine (llm.c) ---- */
enum { DVMS_GEN_NEW, DVMS_GEN_QUEUED, DVMS_GEN_RUNNING, DVMS_GEN_DONE };
/* why a sequence ended: its EOS, max_tokens or max_length, cancelled, failed */
enum { DVMS_FINISH_NONE, DVMS_FINISH_EOS, DVMS_FINISH_LENGTH, DVMS_FINISH_CANCELLED, DVMS_FINISH_ERROR };

typedef struct dvms_gen dvms_gen;
typedef struct dvms_repo_options dvms_repo_options;
struct dvms_gen {
  /* the request, set before dvms_llm_submit and borrowed until it is done */
  const int32_t *prompt;
  int nprompt, max_tokens;
  dvm_generator_options search; /* per-sequence settings (dvm_generator_set_search) */
  /* the engine's, under its mutex */
  dvms_gen *next;
  int state, slot, finish, cancel;
  int64_t admitted;  /* when it last took a slot (the engine's count): the newest is preempted first */
  int32_t *tokens; /* [max_tokens]; the first ntokens are final */
  dvm_generator_logprobs *logprobs; /* [max_tokens], each token's, when search.logprobs >= 0 */
  int ntokens;
  uint64_t rng[4];    /* its random stream where a preemption left it, when has_rng */
  int has_rng;
  dvm_status *status; /* DVMS_FINISH_ERROR: why; the caller's to free */
  double enqueued, first, last;
  pthread_cond_t cond;
};

/* Starts the engine of model m, compiled from the genai_config.json at
 * `config` (m->cfg: max_running, max_length, max_queue,
 * continuous_batching, kv_block_size, kv_budget), with `threads` kernel
 * threads; o->warn hears why a paged cache, asked for, is not used. */
DVM_MUST_USE dvm_status *dvms_llm_start(dvms_model *m, const char *config, int threads,
                                        const dvms_repo_options *o);
/* Finishes what runs and what is queued, then stops. */
void dvms_llm_stop(dvms_model *m);
/* Queues g (FIFO). Fails with DVM_RESOURCE_EXHAUSTED when max_queue
 * requests are waiting, DVM_INVALID_ARGUMENT for a prompt or max_tokens
 * the model cannot take (naming it). */
DVM_MUST_USE dvm_status *dvms_llm_submit(dvms_model *m, dvms_gen *g);
/* Waits until g has more than `have` tokens, is done, or `until` passes;
 * *n: its tokens now; returns 1 when it is done. */
int dvms_llm_wait(dvms_model *m, dvms_gen *g, int have, double until, int *n);
/* Ends g (a client gone, a stop string): taken off the queue, or its slot
 * freed at the next step; returns once the engine has let go of it. */
void dvms_llm_cancel(dvms_model *m, dvms_gen *g);
void dvms_gen_clear(dvms_gen *g);

/* ---- a choice's log-probabilities as OpenAI writes them (logprobs.c) ---- */
typedef struct dvms_logprobs {
  dvms_buf text;  /* the chosen tokens' texts from the tokenizer's stream, one after another */
  size_t *ends;   /* [max_tokens]: text.len after each */
  int n;          /* tokens whose entries are answered (a stop string cuts the others off) */
  int sent;       /* of them, written */
  long chars;     /* characters of the texts written (completions' text_offset) */
} dvms_logprobs;
/* The text of the next token. */
void dvms_logprobs_piece(dvms_logprobs *lp, const char *piece, size_t len);
/* The tokenizer's last text (an incomplete character), the last token's. */
void dvms_logprobs_tail(dvms_logprobs *lp, const char *tail, size_t len);
/* The answer's text ends at byte `at` (a stop string): only the tokens
 * whose text starts before it, or lies before it (an empty one, which a
 * stream may have sent), keep their entries. */
void dvms_logprobs_cut(dvms_logprobs *lp, size_t at);
/* The tokens whose text lies within the first `to` bytes. */
int dvms_logprobs_ready(const dvms_logprobs *lp, size_t to);
/* Writes the entries of tokens [lp->sent, upto) of g (g->logprobs, its
 * tokens and prompt) as chat's or completions' logprobs object, the
 * alternatives' texts by tok. */
void dvms_logprobs_write(dvms_buf *b, dvms_logprobs *lp, const dvms_gen *g, const dvm_tokenizer *tok, int chat,
                         int upto);
void dvms_logprobs_free(dvms_logprobs *lp);

/* ---- chat messages to a prompt (chat.c) ---- */
/* The prompt text of a JSON array of {role, content} messages by m's chat
 * template, ending with the assistant's turn opened. Fails with
 * DVM_INVALID_ARGUMENT naming what is unsupported. */
DVM_MUST_USE dvm_status *dvms_chat_prompt(const dvms_model *m, const void *messages /* json_t */, dvms_buf *out);
/* Recognises the chat template in the model folder's
 * tokenizer_config.json, filling m->chat_template (or chat_error), bos, eos. */
void dvms_chat_read_config(dvms_model *m, const char *dir);

/* ---- the repository ---- */
typedef struct dvms_repo dvms_repo;
struct dvms_repo_options {
  int workers;           /* default VMs per model */
  int cores;             /* kernel threads to share among a model's workers */
  const char *cache_dir; /* compiled model.onnx files are kept here; NULL: none */
  dvms_metrics *metrics; /* borrowed */
  /* called with each compile warning (a declared type that inference
   * contradicts) of a model.onnx compiled at load; NULL: dropped */
  void (*warn)(void *ctx, const char *model, const char *msg);
  void *warn_ctx;
};

DVM_MUST_USE dvm_status *dvms_repo_open(const char *root, const dvms_repo_options *o, dvms_repo **out);
void dvms_repo_close(dvms_repo *r); /* unloads everything */
/* Loads (or reloads) every version of model `name`: the new versions
 * replace the old ones only when all of them loaded. */
DVM_MUST_USE dvm_status *dvms_repo_load(dvms_repo *r, const char *name);
/* Loads every model in the repository; failures are recorded in the index
 * (and counted in *failed) without stopping the others. */
void dvms_repo_load_all(dvms_repo *r, int *loaded, int *failed);
DVM_MUST_USE dvm_status *dvms_repo_unload(dvms_repo *r, const char *name);
/* The model `name` at `version` (NULL: the highest), with a reference the
 * caller releases with dvms_model_release; NULL when not loaded. */
dvms_model *dvms_repo_get(dvms_repo *r, const char *name, const char *version);
void dvms_model_release(dvms_model *m);
dvms_model *dvms_model_retain(dvms_model *m); /* another reference to m; returns m */
/* The highest version of every loaded generation model, each with a
 * reference; returns the count. */
int dvms_repo_llms(dvms_repo *r, dvms_model **out, int max);
/* All versions loaded of `name` (ascending) into vs; returns the count. */
int dvms_repo_versions(dvms_repo *r, const char *name, int64_t *vs, int max);
/* The repository index as Triton writes it: [{"name","version","state","reason"}]. */
void dvms_repo_index(dvms_repo *r, dvms_buf *b);
/* 1 when every model that should be loaded is loaded. */
int dvms_repo_ready(dvms_repo *r);

/* ---- the open connections (conns.c) ---- */
/* A connection waits for its headers (also between requests), then for
 * its body, then works without a deadline. */
enum { DVMS_CONN_HEADERS, DVMS_CONN_BODY, DVMS_CONN_WORK };
typedef struct dvms_conns dvms_conns;
/* Past header_s or body_s seconds (0: none) in its phase, a connection's
 * socket is shut down. Those opened while `max` were open are spares. */
DVM_MUST_USE dvm_status *dvms_conns_create(int max, double header_s, double body_s, dvms_conns **out);
void dvms_conns_free(dvms_conns *cs);
/* From libmicrohttpd's connection notifications: *ctx is the connection's
 * record (NULL, and its socket shut down, when all max + DVMS_SPARE_CONNECTIONS
 * are in use, which libmicrohttpd's limit prevents). */
void dvms_conns_opened(dvms_conns *cs, int fd, void **ctx);
void dvms_conns_closed(dvms_conns *cs, void *ctx);
void dvms_conns_phase(dvms_conns *cs, void *ctx, int phase);
/* 1 for a connection beyond max, which gets only health and metrics. */
int dvms_conns_spare(void *ctx);

/* ---- the server ---- */
typedef struct dvms_server_options {
  const char *host;       /* "127.0.0.1" */
  int port;               /* 8000 */
  size_t max_body;        /* bytes, default 64 MiB */
  int64_t max_elements;   /* per tensor, default 16M */
  int max_connections;    /* default 256, and DVMS_SPARE_CONNECTIONS more for 503s and health */
  int max_per_client;     /* connections from one address; default max_connections / 2 */
  double header_timeout;  /* seconds to send the headers, or to idle between requests; 30 */
  double body_timeout;    /* seconds to send the body; 60 */
  FILE *access_log;       /* a JSON line per request; NULL: none */
} dvms_server_options;

#define DVMS_SPARE_CONNECTIONS 16
typedef struct dvms_server dvms_server;
void dvms_server_options_init(dvms_server_options *o);
DVM_MUST_USE dvm_status *dvms_server_start(dvms_repo *repo, dvms_metrics *metrics,
                                           const dvms_server_options *o, dvms_server **out);
/* The port it listens on (the one chosen when asked for port 0). */
int dvms_server_port(const dvms_server *s);
/* Graceful stop: no new connections, new requests answered 503, waits up
 * to drain_s for those in flight, then closes. */
void dvms_server_stop(dvms_server *s, double drain_s);

/* The route handler behind http.c (api.c): fills status, body and headers. */
typedef struct dvms_http_request {
  const char *method, *url;
  const uint8_t *body;
  size_t size;
  size_t header_len;        /* Inference-Header-Content-Length, 0 if absent */
  int bad_header_len;       /* the header was present but not a number */
  int draining;             /* the server is shutting down */
  int (*gone)(void *ctx);   /* 1 once the client has disconnected */
  void *gone_ctx;
} dvms_http_request;

typedef struct dvms_http_reply {
  unsigned status;
  dvms_buf body;
  const char *content_type;
  size_t header_len;        /* >0: send Inference-Header-Content-Length */
  int retry_after;          /* >0: send Retry-After */
  /* a streamed body instead (text/event-stream): read blocks until it has
   * bytes and returns their count (at most max), 0 at the end, -1 to
   * abort; done frees ctx (after the last read, or when the client went) */
  long (*stream_read)(void *ctx, char *buf, size_t max);
  void (*stream_done)(void *ctx);
  void *stream_ctx;
  /* for the access log */
  char model[128];
  char id[64];
  double queue_ms, compute_ms;
  int batch_rows;
} dvms_http_reply;

typedef struct dvms_api {
  dvms_repo *repo;
  dvms_metrics *metrics;
  int64_t max_elements;
} dvms_api;

void dvms_api_handle(dvms_api *api, const dvms_http_request *rq, dvms_http_reply *rp);
/* An OpenAI completions or chat request, read and checked (openai.c). */
#define DVMS_MAX_STOP 4
#define DVMS_MAX_COMPLETION_LOGPROBS 5 /* OpenAI's limit on completions' logprobs */
typedef struct dvms_openai_req {
  int chat, triton, stream, include_usage;
  int n;           /* choices: sequences of the same prompt */
  dvms_gen g;      /* prompt, nprompt, max_tokens, search: ready for dvms_llm_submit */
  int32_t *prompt; /* malloc'ed */
  char *stop[DVMS_MAX_STOP];
  int nstop;
  size_t maxstop;  /* the longest stop string's bytes */
} dvms_openai_req;
/* Reads the JSON object `json` (a json_t) of a request to generation
 * model m (r->chat set: /v1/chat/completions) into r: 1, or 0 with the
 * error answered in rp (400 naming the field, 507 without memory). A
 * prompt fits m->max_length with max_tokens; the caller clears r with
 * dvms_openai_req_clear either way. */
int dvms_openai_parse(const dvms_model *m, const void *json, dvms_openai_req *r, dvms_http_reply *rp);
/* Reads Triton's generate request `json` ({"text_input", "parameters"})
 * to m into r (r->stream set by the caller: the route) as
 * dvms_openai_parse does, with KServe's error bodies. */
int dvms_triton_parse(const dvms_model *m, const void *json, dvms_openai_req *r, dvms_http_reply *rp);
void dvms_openai_req_clear(dvms_openai_req *r); /* not r->g: dvms_gen_clear */
/* OpenAI's {"error": {"message", "type", "param", "code"}} with a status;
 * param may be NULL. */
void dvms_openai_error(dvms_http_reply *rp, unsigned status, const char *param, const char *msg);
/* KServe's {"error": "..."} with a status. */
void dvms_kserve_error(dvms_http_reply *rp, unsigned status, const char *msg);
/* /v1/... (openai.c): p the path's n parts. */
void dvms_openai_handle(dvms_api *api, char **p, int n, const dvms_http_request *rq, dvms_http_reply *rp);
/* /v2/models/NAME/generate or, stream set, generate_stream (openai.c)
 * to m (borrowed). */
void dvms_generate_handle(dvms_api *api, dvms_model *m, int stream, const dvms_http_request *rq, dvms_http_reply *rp);

#endif
