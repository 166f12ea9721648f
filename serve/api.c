/* The KServe v2 REST routes (and Triton's repository and config
 * extensions; its generate extension is openai.c's) on top of the
 * repository and the batcher. Errors are
 * KServe error bodies, {"error": "..."}, with the status codes listed in
 * docs/serving.md. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define VERSION "0.1.0"

/* An out-of-memory status's message may name only what was being
 * allocated ("583 bytes for the request's JSON"): the answer says what
 * happened. */
static void error_status(dvms_http_reply *rp, unsigned status, dvm_status *st) {
  const char *msg = dvm_status_message(st);
  if (dvm_status_code(st) == DVM_OUT_OF_MEMORY && !strstr(msg, "out of memory")) {
    char full[512];
    snprintf(full, sizeof full, "out of memory: %s", msg);
    dvms_kserve_error(rp, status, full);
  } else {
    dvms_kserve_error(rp, status, msg);
  }
  dvm_status_free(st);
}

static void ok_json(dvms_http_reply *rp) {
  rp->status = 200;
  rp->content_type = "application/json";
}

static void write_sig(dvms_buf *b, const dvms_sig *s) {
  dvms_buf_put(b, "{\"name\":", 8);
  dvms_buf_json_string(b, s->name);
  dvms_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", dvms_datatype_name(s->dtype));
  for (int d = 0; d < s->rank; d++) dvms_buf_printf(b, "%s%" PRId64, d ? "," : "", s->dims[d]);
  dvms_buf_put(b, "]}", 2);
}

static void write_sigs(dvms_buf *b, const char *key, const dvms_sig *s, int n) {
  dvms_buf_printf(b, ",\"%s\":[", key);
  for (int i = 0; i < n; i++) {
    if (i) dvms_buf_put(b, ",", 1);
    write_sig(b, &s[i]);
  }
  dvms_buf_put(b, "]", 1);
}

static void model_metadata(dvms_api *api, dvms_model *m, dvms_http_reply *rp) {
  dvms_buf *b = &rp->body;
  int64_t vs[16];
  int nv = dvms_repo_versions(api->repo, m->name, vs, 16);
  dvms_buf_put(b, "{\"name\":", 8);
  dvms_buf_json_string(b, m->name);
  dvms_buf_put(b, ",\"versions\":[", 13);
  for (int i = 0; i < nv; i++) dvms_buf_printf(b, "%s\"%" PRId64 "\"", i ? "," : "", vs[i]);
  dvms_buf_put(b, "],\"platform\":\"dvm\"", 18);
  write_sigs(b, "inputs", m->sigs.in, m->sigs.nin);
  write_sigs(b, "outputs", m->sigs.out, m->sigs.nout);
  dvms_buf_put(b, "}", 1);
  ok_json(rp);
}

/* Triton's model configuration, as far as dvm has the same notions. */
static void model_config(dvms_model *m, dvms_http_reply *rp) {
  dvms_buf *b = &rp->body;
  const dvms_config *c = &m->cfg;
  dvms_buf_put(b, "{\"name\":", 8);
  dvms_buf_json_string(b, m->name);
  dvms_buf_printf(b, ",\"platform\":\"dvm\",\"max_batch_size\":%d", m->batch_sym >= 0 ? c->max_batch : 0);
  if (m->batch_sym >= 0)
    dvms_buf_printf(b, ",\"dynamic_batching\":{\"max_queue_delay_microseconds\":%" PRId64 "}", c->queue_delay_us);
  dvms_buf_printf(b, ",\"instance_group\":[{\"count\":%d,\"kind\":\"%s\"}]", m->nworkers,
                  m->device == DVM_DEVICE_CUDA ? "KIND_GPU" : "KIND_CPU");
  write_sigs(b, "input", m->sigs.in, m->sigs.nin);
  write_sigs(b, "output", m->sigs.out, m->sigs.nout);
  dvms_buf_put(b, "}", 1);
  ok_json(rp);
}

static int outcome_of(dvm_code code, unsigned *status) {
  switch (code) {
  case DVM_INTERRUPTED: *status = 504; return DVMS_TIMEOUT;
  case DVM_RESOURCE_EXHAUSTED: case DVM_OUT_OF_MEMORY: *status = 507; return DVMS_POOL;
  case DVM_INVALID_ARGUMENT: case DVM_FAILED_PRECONDITION: case DVM_OUT_OF_RANGE:
    *status = 400;
    return DVMS_CLIENT_ERROR;
  default: *status = 500; return DVMS_FAILED;
  }
}

/* Waits for the job, watching the client and the deadline. Returns the
 * outcome when the request ends without a result (cancelled, timed out),
 * else -1. */
static int await(dvms_model *m, dvms_job *job, const dvms_http_request *rq) {
  for (;;) {
    double now = dvms_now(), until = now + 0.05;
    if (job->deadline > 0 && job->deadline < until) until = job->deadline;
    if (dvms_batcher_wait(m, job, until)) return -1;
    if (rq->gone && rq->gone(rq->gone_ctx)) {
      if (dvms_batcher_cancel(m, job)) return DVMS_CANCELLED;
    } else if (job->deadline > 0 && dvms_now() >= job->deadline) {
      if (dvms_batcher_cancel(m, job)) return DVMS_TIMEOUT;
    }
  }
}

static void infer(dvms_api *api, dvms_model *m, const dvms_http_request *rq, dvms_http_reply *rp) {
  dvms_request req;
  snprintf(rp->model, sizeof rp->model, "%s", m->name);
  if (rq->draining) {
    dvms_kserve_error(rp, 503, "the server is shutting down");
    dvms_metrics_request(api->metrics, m->name, DVMS_OVERLOAD, -1);
    return;
  }
  if (m->llm) {
    dvms_kserve_error(rp, 400, "a generation model: use /v1/completions, /v1/chat/completions or its generate route");
    dvms_metrics_request(api->metrics, m->name, DVMS_CLIENT_ERROR, -1);
    return;
  }
  if (rq->bad_header_len) {
    dvms_kserve_error(rp, 400, "Inference-Header-Content-Length is not a number of bytes");
    dvms_metrics_request(api->metrics, m->name, DVMS_CLIENT_ERROR, -1);
    return;
  }
  dvm_status *st = dvms_request_parse(rq->body, rq->size, rq->header_len, &m->sigs, api->max_elements, &req);
  if (st) { /* 400, or 507 when memory ran out */
    unsigned status;
    int outcome = outcome_of(dvm_status_code(st), &status);
    error_status(rp, status, st);
    dvms_metrics_request(api->metrics, m->name, outcome, -1);
    return;
  }
  if (req.id) snprintf(rp->id, sizeof rp->id, "%s", req.id);
  int64_t timeout_us = req.timeout_us ? req.timeout_us : m->cfg.timeout_us;
  dvms_job job;
  if ((st = dvms_batcher_submit(m, &job, &req, (double)timeout_us * 1e-6))) {
    rp->retry_after = 1;
    error_status(rp, 503, st);
    dvms_metrics_request(api->metrics, m->name, DVMS_OVERLOAD, -1);
  } else {
    int outcome = await(m, &job, rq);
    double queue_s = job.started > 0 ? job.started - job.enqueued : dvms_now() - job.enqueued;
    rp->queue_ms = queue_s * 1e3;
    if (job.started > 0) rp->compute_ms = (job.finished - job.started) * 1e3;
    rp->batch_rows = job.batch_rows;
    if (outcome == DVMS_CANCELLED) {
      dvms_kserve_error(rp, 499, "the client closed the connection");
    } else if (outcome == DVMS_TIMEOUT) {
      dvms_kserve_error(rp, 504, "the request's deadline passed in the queue");
    } else if (job.status) {
      unsigned status;
      outcome = outcome_of(dvm_status_code(job.status), &status);
      error_status(rp, status, job.status);
      job.status = NULL;
    } else {
      outcome = DVMS_OK;
      ok_json(rp);
      dvms_reply_write(&rp->body, m->name, m->version, &req, &m->sigs, job.outs, &rp->header_len);
      if (rp->header_len) rp->content_type = "application/octet-stream";
    }
    dvms_metrics_request(api->metrics, m->name, outcome, queue_s);
  }
  dvms_job_clear(&job);
  dvms_request_clear(&req);
}

static void server_metadata(dvms_http_reply *rp) {
  dvms_buf_printf(&rp->body, "{\"name\":\"dvm\",\"version\":\"%s\",\"extensions\":[\"binary_tensor_data\","
                             "\"model_repository\",\"generate\"]}", VERSION);
  ok_json(rp);
}

/* /v2/models/NAME[/versions/V][/ready|/infer|/config|/generate|/generate_stream] */
static void models(dvms_api *api, char **p, int n, const dvms_http_request *rq, dvms_http_reply *rp) {
  const char *version = NULL, *action = NULL;
  int k = 3;
  if (n >= 5 && strcmp(p[3], "versions") == 0) {
    version = p[4];
    k = 5;
  }
  if (n > k + 1) {
    dvms_kserve_error(rp, 404, "no such route");
    return;
  }
  if (n == k + 1) action = p[k];
  int post = strcmp(rq->method, "POST") == 0;
  int generate = action && (strcmp(action, "generate") == 0 || strcmp(action, "generate_stream") == 0);
  if (action && (strcmp(action, "infer") == 0 || generate) ? !post : post) {
    dvms_kserve_error(rp, 405, "method not allowed");
    return;
  }
  dvms_model *m = dvms_repo_get(api->repo, p[2], version);
  snprintf(rp->model, sizeof rp->model, "%s", p[2]);
  if (!m) {
    char msg[400];
    snprintf(msg, sizeof msg, "model \"%s\"%s%s is not loaded", p[2], version ? " version " : "", version ? version : "");
    dvms_kserve_error(rp, 404, msg);
    return;
  }
  if (!action) model_metadata(api, m, rp);
  else if (strcmp(action, "ready") == 0) rp->status = 200; /* health answers are the status, no body */
  else if (strcmp(action, "config") == 0) model_config(m, rp);
  else if (strcmp(action, "infer") == 0) infer(api, m, rq, rp);
  else if (generate) dvms_generate_handle(api, m, strcmp(action, "generate_stream") == 0, rq, rp);
  else dvms_kserve_error(rp, 404, "no such route");
  dvms_model_release(m);
}

/* /v2/repository/index, /v2/repository/models/NAME/load|unload */
static void repository(dvms_api *api, char **p, int n, const dvms_http_request *rq, dvms_http_reply *rp) {
  if (strcmp(rq->method, "POST") != 0) {
    dvms_kserve_error(rp, 405, "method not allowed");
    return;
  }
  if (n == 3 && strcmp(p[2], "index") == 0) {
    dvms_repo_index(api->repo, &rp->body);
    ok_json(rp);
    return;
  }
  if (n != 5 || strcmp(p[2], "models") != 0) {
    dvms_kserve_error(rp, 404, "no such route");
    return;
  }
  snprintf(rp->model, sizeof rp->model, "%s", p[3]);
  dvm_status *st;
  if (strcmp(p[4], "load") == 0) st = dvms_repo_load(api->repo, p[3]);
  else if (strcmp(p[4], "unload") == 0) st = dvms_repo_unload(api->repo, p[3]);
  else {
    dvms_kserve_error(rp, 404, "no such route");
    return;
  }
  if (st) {
    dvm_code code = dvm_status_code(st);
    error_status(rp, code == DVM_NOT_FOUND ? 404 : code == DVM_OUT_OF_MEMORY ? 507 : 400, st);
    return;
  }
  ok_json(rp);
}

void dvms_api_handle(dvms_api *api, const dvms_http_request *rq, dvms_http_reply *rp) {
  char path[1024], *p[12], *save = NULL;
  int n = 0;
  rp->status = 0;
  snprintf(path, sizeof path, "%s", rq->url);
  for (char *t = strtok_r(path, "/", &save); t && n < 12; t = strtok_r(NULL, "/", &save)) p[n++] = t;
  int get = strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;
  if (n == 1 && strcmp(p[0], "metrics") == 0 && get) {
    dvms_metrics_write(api->metrics, &rp->body);
    rp->status = 200;
    rp->content_type = "text/plain; version=0.0.4";
  } else if (n >= 1 && strcmp(p[0], "v1") == 0) {
    dvms_openai_handle(api, p, n, rq, rp);
  } else if (n == 0 || strcmp(p[0], "v2") != 0) {
    dvms_kserve_error(rp, 404, "no such route");
  } else if (n == 1) {
    get ? server_metadata(rp) : dvms_kserve_error(rp, 405, "method not allowed");
  } else if (n == 3 && strcmp(p[1], "health") == 0 && get) {
    if (strcmp(p[2], "live") == 0) rp->status = 200;
    else if (strcmp(p[2], "ready") == 0)
      rp->status = !rq->draining && dvms_repo_ready(api->repo) ? 200 : 400; /* the v2 spec: 4xx is false */
    else dvms_kserve_error(rp, 404, "no such route");
  } else if (n >= 3 && strcmp(p[1], "models") == 0) {
    models(api, p, n, rq, rp);
  } else if (n >= 3 && strcmp(p[1], "repository") == 0) {
    repository(api, p, n, rq, rp);
  } else {
    dvms_kserve_error(rp, 404, "no such route");
  }
  if (rp->body.failed) dvms_kserve_error(rp, 507, "out of memory writing the response");
}
