/* Prometheus text metrics (exposition format 0.0.4), per model: requests
 * by outcome, queue and compute time histograms, the batch-size histogram,
 * elements computed and elements that were padding, requests queued now,
 * pool bytes in use and peak; and HTTP responses by status code. A
 * generation model's series take vLLM's names (vllm:..., label
 * model_name), so dashboards made for vLLM read them. One mutex: updates
 * are a few additions per request. */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define MAX_MODELS 64
static const double time_bounds[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                     0.1,    0.2,   0.5,   1,     2,    5,    10};
#define NTIME (sizeof time_bounds / sizeof time_bounds[0])
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128};
#define NBATCH (sizeof batch_bounds / sizeof batch_bounds[0])
static const char *const outcome_names[DVMS_OUTCOMES] = {
    "success", "client_error", "timeout", "overload", "pool_exhausted", "failed", "cancelled"};

typedef struct hist {
  uint64_t counts[16]; /* per bound, not cumulative; the last is +Inf */
  double sum;
  uint64_t n;
} hist;

typedef struct series {
  char model[128];
  uint64_t outcomes[DVMS_OUTCOMES];
  hist queue, compute, batch;
  uint64_t real_elements, padded_elements;
  uint64_t pool_in_use, pool_peak, pool_cached;
  int64_t queued;
  int gen; /* a generation model: its vllm: series are written */
  int running;
  int64_t waiting;
  uint64_t prompt_tokens, generation_tokens;
  hist ttft, tpot;
  int paged;
  dvms_kv_metrics kv;
} series;

struct dvms_metrics {
  pthread_mutex_t mu;
  series models[MAX_MODELS];
  int nmodels;
  uint64_t http[600];
};

dvm_status *dvms_metrics_create(dvms_metrics **out) {
  dvms_metrics *m = calloc(1, sizeof *m);
  if (!m) return dvm_status_new(DVM_OUT_OF_MEMORY, "metrics");
  pthread_mutex_init(&m->mu, NULL);
  *out = m;
  return NULL;
}

void dvms_metrics_destroy(dvms_metrics *m) {
  if (!m) return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

/* The series of `model`, created on first use; NULL past MAX_MODELS. */
static series *find(dvms_metrics *m, const char *model) {
  for (int i = 0; i < m->nmodels; i++)
    if (strcmp(m->models[i].model, model) == 0) return &m->models[i];
  if (m->nmodels == MAX_MODELS) return NULL;
  series *s = &m->models[m->nmodels++];
  snprintf(s->model, sizeof s->model, "%s", model);
  return s;
}

static void observe(hist *h, const double *bounds, size_t n, double v) {
  size_t k = 0;
  while (k < n && v > bounds[k]) k++;
  h->counts[k]++;
  h->sum += v;
  h->n++;
}

void dvms_metrics_request(dvms_metrics *m, const char *model, int outcome, double queue_s) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) {
    s->outcomes[outcome]++;
    if (queue_s >= 0) observe(&s->queue, time_bounds, NTIME, queue_s);
  }
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_batch(dvms_metrics *m, const char *model, int rows, double compute_s,
                        int64_t real_elements, int64_t padded_elements) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) {
    observe(&s->compute, time_bounds, NTIME, compute_s);
    observe(&s->batch, batch_bounds, NBATCH, rows);
    s->real_elements += (uint64_t)real_elements;
    s->padded_elements += (uint64_t)padded_elements;
  }
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_pool(dvms_metrics *m, const char *model, const dvm_pool_stats *sum) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) {
    s->pool_in_use = sum->in_use;
    s->pool_peak = sum->peak;
    s->pool_cached = sum->cached;
  }
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_queue(dvms_metrics *m, const char *model, int64_t queued) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) s->queued = queued;
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_gen_state(dvms_metrics *m, const char *model, int running, int64_t waiting) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) s->gen = 1, s->running = running, s->waiting = waiting;
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_gen_prompt(dvms_metrics *m, const char *model, int tokens, double ttft_s) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) {
    s->prompt_tokens += (uint64_t)tokens;
    if (ttft_s >= 0) observe(&s->ttft, time_bounds, NTIME, ttft_s), s->generation_tokens++;
  }
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_gen_token(dvms_metrics *m, const char *model, double since_last_s) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) observe(&s->tpot, time_bounds, NTIME, since_last_s), s->generation_tokens++;
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_gen_kv(dvms_metrics *m, const char *model, const dvms_kv_metrics *kv) {
  pthread_mutex_lock(&m->mu);
  series *s = find(m, model);
  if (s) s->paged = 1, s->kv = *kv;
  pthread_mutex_unlock(&m->mu);
}

void dvms_metrics_http(dvms_metrics *m, unsigned status) {
  pthread_mutex_lock(&m->mu);
  m->http[status < 600 ? status : 0]++;
  pthread_mutex_unlock(&m->mu);
}

static void write_hist_label(dvms_buf *b, const char *name, const char *label, const char *model, const hist *h,
                             const double *bounds, size_t n) {
  uint64_t cum = 0;
  for (size_t k = 0; k < n; k++) {
    cum += h->counts[k];
    dvms_buf_printf(b, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name, label, model, bounds[k], (unsigned long long)cum);
  }
  dvms_buf_printf(b, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label, model, (unsigned long long)h->n);
  dvms_buf_printf(b, "%s_sum{%s=\"%s\"} %.9g\n%s_count{%s=\"%s\"} %llu\n", name, label, model, h->sum, name,
                  label, model, (unsigned long long)h->n);
}

static void write_hist(dvms_buf *b, const char *name, const char *model, const hist *h, const double *bounds,
                       size_t n) {
  write_hist_label(b, name, "model", model, h, bounds, n);
}

/* One metric family: its HELP and TYPE lines, then a line per model. */
#define FAMILY(name, type, help, line)                                                           \
  do {                                                                                           \
    dvms_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);                  \
    for (int i = 0; i < m->nmodels; i++) {                                                       \
      const series *s = &m->models[i];                                                           \
      line;                                                                                      \
    }                                                                                            \
  } while (0)

void dvms_metrics_write(dvms_metrics *m, dvms_buf *b) {
  pthread_mutex_lock(&m->mu);
  FAMILY("dvm_requests_total", "counter", "Infer requests by model and outcome.",
         for (int o = 0; o < DVMS_OUTCOMES; o++) dvms_buf_printf(b,
             "dvm_requests_total{model=\"%s\",outcome=\"%s\"} %llu\n", s->model, outcome_names[o],
             (unsigned long long)s->outcomes[o]));
  FAMILY("dvm_queue_seconds", "histogram", "Time a request waited in its model's queue.",
         write_hist(b, "dvm_queue_seconds", s->model, &s->queue, time_bounds, NTIME));
  FAMILY("dvm_compute_seconds", "histogram", "Time of one invocation (one batch).",
         write_hist(b, "dvm_compute_seconds", s->model, &s->compute, time_bounds, NTIME));
  FAMILY("dvm_batch_size", "histogram", "Rows per invocation.",
         write_hist(b, "dvm_batch_size", s->model, &s->batch, batch_bounds, NBATCH));
  FAMILY("dvm_input_elements_total", "counter", "Input elements computed, padding included.",
         dvms_buf_printf(b, "dvm_input_elements_total{model=\"%s\"} %llu\n", s->model,
                         (unsigned long long)s->real_elements));
  FAMILY("dvm_padding_elements_total", "counter", "Input elements that were padding (waste).",
         dvms_buf_printf(b, "dvm_padding_elements_total{model=\"%s\"} %llu\n", s->model,
                         (unsigned long long)s->padded_elements));
  FAMILY("dvm_queued_requests", "gauge", "Requests waiting in the model's queue now.",
         dvms_buf_printf(b, "dvm_queued_requests{model=\"%s\"} %lld\n", s->model, (long long)s->queued));
  FAMILY("dvm_pool_bytes_in_use", "gauge", "Bytes the model's VM pools hand out now.",
         dvms_buf_printf(b, "dvm_pool_bytes_in_use{model=\"%s\"} %llu\n", s->model,
                         (unsigned long long)s->pool_in_use));
  FAMILY("dvm_pool_bytes_peak", "gauge", "Most bytes the model's VM pools handed out at once.",
         dvms_buf_printf(b, "dvm_pool_bytes_peak{model=\"%s\"} %llu\n", s->model,
                         (unsigned long long)s->pool_peak));
  FAMILY("dvm_pool_bytes_cached", "gauge", "Bytes the model's VM pools keep for reuse (freed blocks, by size class).",
         dvms_buf_printf(b, "dvm_pool_bytes_cached{model=\"%s\"} %llu\n", s->model,
                         (unsigned long long)s->pool_cached));
  FAMILY("vllm:num_requests_running", "gauge", "Sequences in the generation engine's slots now.",
         if (s->gen) dvms_buf_printf(b, "vllm:num_requests_running{model_name=\"%s\"} %d\n", s->model, s->running));
  FAMILY("vllm:num_requests_waiting", "gauge", "Generation requests waiting for a slot now.",
         if (s->gen) dvms_buf_printf(b, "vllm:num_requests_waiting{model_name=\"%s\"} %lld\n", s->model,
                                     (long long)s->waiting));
  FAMILY("vllm:prompt_tokens_total", "counter", "Prompt tokens admitted.",
         if (s->gen) dvms_buf_printf(b, "vllm:prompt_tokens_total{model_name=\"%s\"} %llu\n", s->model,
                                     (unsigned long long)s->prompt_tokens));
  FAMILY("vllm:generation_tokens_total", "counter", "Tokens generated.",
         if (s->gen) dvms_buf_printf(b, "vllm:generation_tokens_total{model_name=\"%s\"} %llu\n", s->model,
                                     (unsigned long long)s->generation_tokens));
  FAMILY("vllm:time_to_first_token_seconds", "histogram", "Time from queueing to a request's first token.",
         if (s->gen) write_hist_label(b, "vllm:time_to_first_token_seconds", "model_name", s->model, &s->ttft,
                                      time_bounds, NTIME));
  FAMILY("vllm:time_per_output_token_seconds", "histogram", "Time between a sequence's successive tokens.",
         if (s->gen) write_hist_label(b, "vllm:time_per_output_token_seconds", "model_name", s->model, &s->tpot,
                                      time_bounds, NTIME));
  FAMILY("vllm:cpu_cache_usage_perc", "gauge", "Fraction of the paged KV cache's blocks in use (1 = all).",
         if (s->paged) dvms_buf_printf(b, "vllm:cpu_cache_usage_perc{model_name=\"%s\"} %g\n", s->model,
                                       (double)s->kv.used / s->kv.blocks));
  FAMILY("vllm:num_preemptions_total", "counter", "Sequences preempted (blocks freed, requeued) for KV blocks.",
         if (s->paged) dvms_buf_printf(b, "vllm:num_preemptions_total{model_name=\"%s\"} %llu\n", s->model,
                                       (unsigned long long)s->kv.preemptions));
  FAMILY("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         if (s->paged) dvms_buf_printf(b, "vllm:prefix_cache_queries_total{model_name=\"%s\"} %llu\n", s->model,
                                       (unsigned long long)s->kv.prefix_queries));
  FAMILY("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache (not computed again).",
         if (s->paged) dvms_buf_printf(b, "vllm:prefix_cache_hits_total{model_name=\"%s\"} %llu\n", s->model,
                                       (unsigned long long)s->kv.prefix_hits));
  FAMILY("dvm_kv_blocks", "gauge", "The paged KV cache's blocks: total, in use now, most in use at once.",
         if (s->paged) dvms_buf_printf(b, "dvm_kv_blocks{model=\"%s\",state=\"total\"} %d\n"
                                          "dvm_kv_blocks{model=\"%s\",state=\"used\"} %d\n"
                                          "dvm_kv_blocks{model=\"%s\",state=\"peak\"} %d\n",
                                       s->model, s->kv.blocks, s->model, s->kv.used, s->model, s->kv.peak));
  FAMILY("dvm_kv_block_bytes", "gauge", "Bytes of one KV block (every layer's key and value).",
         if (s->paged) dvms_buf_printf(b, "dvm_kv_block_bytes{model=\"%s\"} %zu\n", s->model, s->kv.block_bytes));
  dvms_buf_printf(b, "# HELP dvm_http_responses_total HTTP responses by status code.\n"
                     "# TYPE dvm_http_responses_total counter\n");
  for (unsigned c = 100; c < 600; c++)
    if (m->http[c]) dvms_buf_printf(b, "dvm_http_responses_total{code=\"%u\"} %llu\n", c, (unsigned long long)m->http[c]);
  pthread_mutex_unlock(&m->mu);
}
