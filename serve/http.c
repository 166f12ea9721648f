/* The HTTP front: libmicrohttpd with a thread per connection, so a
 * handler may wait for its batch; each waiting handler also watches its
 * socket and cancels its queued work when the client goes away. Bodies are
 * collected up to max_body (a larger Content-Length is refused before any
 * of it is read), then routed by api.c. One JSON access-log line per
 * request. Connections have deadlines (conns.c) and a cap per client
 * address; past max_connections, a few spares answer health and metrics
 * and refuse the rest with 503, so a crowd of idle or slow clients neither
 * hangs a new one nor hides the server's health. Shutdown: stop accepting,
 * answer new requests 503, wait for those in flight, close. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

struct dvms_server {
  struct MHD_Daemon *daemon;
  dvms_conns *conns;
  dvms_api api;
  dvms_server_options opts;
  atomic_int draining;
  atomic_int inflight;
  pthread_mutex_t log_mu;
};

typedef struct conn_req {
  dvms_buf body;
  int too_large;
  int spare; /* on a spare connection: only health and metrics */
  void *conn; /* its record in conns.c */
  double t0;
} conn_req;

void dvms_server_options_init(dvms_server_options *o) {
  *o = (dvms_server_options){.host = "127.0.0.1", .port = 8000, .max_body = 64u << 20,
                             .max_elements = 16 << 20, .max_connections = 256, .header_timeout = 30,
                             .body_timeout = 60};
}

static int client_gone(void *ctx) {
  struct MHD_Connection *c = ctx;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci) return 0;
  struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void access_log(dvms_server *s, struct MHD_Connection *c, const char *method, const char *url,
                       const conn_req *r, const dvms_http_reply *rp, size_t bytes_out) {
  FILE *f = s->opts.access_log;
  if (!f) return;
  char remote[64] = "-", when[32];
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (ci && ci->client_addr->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, remote, sizeof remote);
  time_t now = time(NULL);
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
  dvms_buf line = {0};
  dvms_buf_printf(&line, "{\"time\":\"%s\",\"remote\":\"%s\",\"method\":", when, remote);
  dvms_buf_json_string(&line, method);
  dvms_buf_put(&line, ",\"path\":", 8);
  dvms_buf_json_string(&line, url);
  dvms_buf_printf(&line, ",\"status\":%u,\"bytes_in\":%zu,\"bytes_out\":%zu,\"ms\":%.3f", rp->status,
                  r->body.len, bytes_out, (dvms_now() - r->t0) * 1e3);
  if (rp->model[0]) {
    dvms_buf_put(&line, ",\"model\":", 9);
    dvms_buf_json_string(&line, rp->model);
  }
  if (rp->id[0]) {
    dvms_buf_put(&line, ",\"id\":", 6);
    dvms_buf_json_string(&line, rp->id);
  }
  if (rp->batch_rows)
    dvms_buf_printf(&line, ",\"queue_ms\":%.3f,\"compute_ms\":%.3f,\"batch\":%d", rp->queue_ms, rp->compute_ms,
                    rp->batch_rows);
  dvms_buf_put(&line, "}\n", 2);
  if (!line.failed) {
    pthread_mutex_lock(&s->log_mu);
    fwrite(line.data, 1, line.len, f);
    fflush(f);
    pthread_mutex_unlock(&s->log_mu);
  }
  dvms_buf_free(&line);
}

/* A streamed body: its reader runs in the connection's thread (so it may
 * block for the next bytes); the request counts as in flight until the
 * stream is freed, so a drain waits for it. */
typedef struct stream {
  dvms_server *s;
  long (*read)(void *ctx, char *buf, size_t max);
  void (*done)(void *ctx);
  void *ctx;
  int counted;
} stream;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  stream *x = cls;
  long n = x->read(x->ctx, buf, max);
  return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls) {
  stream *x = cls;
  x->done(x->ctx);
  if (x->counted) atomic_fetch_sub(&x->s->inflight, 1);
  free(x);
}

/* The response of rp: its body, or its stream (taken over; counted: it
 * holds an in-flight count to give back). */
static struct MHD_Response *make_response(dvms_server *s, dvms_http_reply *rp, int counted) {
  if (rp->stream_read) {
    stream *x = malloc(sizeof *x);
    struct MHD_Response *resp = x ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, x, stream_free) : NULL;
    if (!resp) { /* the stream still ends as a freed one would */
      rp->stream_done(rp->stream_ctx);
      if (counted) atomic_fetch_sub(&s->inflight, 1);
      free(x);
      return NULL;
    }
    *x = (stream){s, rp->stream_read, rp->stream_done, rp->stream_ctx, counted};
    rp->stream_read = NULL;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return resp;
  }
  size_t len = rp->body.len;
  struct MHD_Response *resp = len ? MHD_create_response_from_buffer(len, rp->body.data, MHD_RESPMEM_MUST_FREE)
                                  : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (resp && len) rp->body = (dvms_buf){0}; /* the response owns it now */
  return resp;
}

static enum MHD_Result send_reply(dvms_server *s, struct MHD_Connection *c, dvms_http_reply *rp, int close,
                                  int counted) {
  struct MHD_Response *resp = make_response(s, rp, counted);
  if (rp->content_type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rp->content_type);
  char num[32];
  if (rp->header_len) {
    snprintf(num, sizeof num, "%zu", rp->header_len);
    MHD_add_response_header(resp, "Inference-Header-Content-Length", num);
  }
  if (rp->retry_after) {
    snprintf(num, sizeof num, "%d", rp->retry_after);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, num);
  }
  if (close || atomic_load(&s->draining)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ok = MHD_queue_response(c, rp->status, resp);
  MHD_destroy_response(resp);
  dvms_metrics_http(s->api.metrics, rp->status);
  return ok;
}

/* Without memory for the request's record: a prepared answer, which
 * closes the connection (its body is not read). */
static enum MHD_Result out_of_memory(dvms_server *s, struct MHD_Connection *c) {
  static const char body[] = "{\"error\":\"out of memory\"}";
  struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result ok = MHD_queue_response(c, 507, resp);
  MHD_destroy_response(resp);
  dvms_metrics_http(s->api.metrics, 507);
  return ok;
}

static void reply_error(dvms_http_reply *rp, unsigned status, const char *msg) {
  rp->status = status;
  rp->content_type = "application/json";
  dvms_buf_printf(&rp->body, "{\"error\":\"%s\"}", msg);
}

static int parse_size(const char *v, size_t *out) {
  char *end;
  if (!v || *v < '0' || *v > '9') return 0;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end || errno == ERANGE || x > SIZE_MAX) return 0;
  *out = (size_t)x;
  return 1;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
  dvms_server *s = cls;
  conn_req *r = *con_cls;
  if (!r) {
    if (!(r = calloc(1, sizeof *r))) return out_of_memory(s, c);
    r->t0 = dvms_now();
    *con_cls = r;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->conn = ci ? ci->socket_context : NULL;
    r->spare = dvms_conns_spare(r->conn) && strncmp(url, "/v2/health/", 11) != 0 && strcmp(url, "/metrics") != 0;
    size_t declared;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && parse_size(cl, &declared) && declared > s->opts.max_body) r->too_large = 1;
    dvms_conns_phase(s->conns, r->conn, DVMS_CONN_BODY);
    if (!r->too_large && !r->spare) return MHD_YES;
  } else if (*upload_size) {
    if (r->body.len + *upload_size > s->opts.max_body) r->too_large = 1;
    else dvms_buf_put(&r->body, upload_data, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  dvms_conns_phase(s->conns, r->conn, DVMS_CONN_WORK);
  dvms_http_reply rp = {0};
  int counted = 0; /* a stream holds its in-flight count */
  if (r->spare) {
    char msg[96];
    snprintf(msg, sizeof msg, "the server has its limit of %d connections open; try again", s->opts.max_connections);
    reply_error(&rp, 503, msg);
    rp.retry_after = 1;
  } else if (r->too_large) {
    char msg[96];
    snprintf(msg, sizeof msg, "the body is larger than the server's limit of %zu bytes", s->opts.max_body);
    reply_error(&rp, 413, msg);
  } else if (r->body.failed) {
    reply_error(&rp, 507, "out of memory reading the body");
  } else {
    /* Only requests that came before the drain are waited for: later ones
     * get a quick 503, and a steady stream of them must not hold it up. */
    int draining = atomic_load(&s->draining);
    if (!draining) atomic_fetch_add(&s->inflight, 1);
    dvms_http_request rq = {.method = method, .url = url, .body = (const uint8_t *)r->body.data,
                            .size = r->body.len, .draining = draining, .gone = client_gone, .gone_ctx = c};
    const char *hl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    if (hl && !parse_size(hl, &rq.header_len)) rq.bad_header_len = 1;
    if (!rq.body) rq.body = (const uint8_t *)"";
    dvms_api_handle(&s->api, &rq, &rp);
    counted = !draining;
    if (counted && !rp.stream_read) atomic_fetch_sub(&s->inflight, 1), counted = 0;
  }
  size_t out = rp.body.len;
  enum MHD_Result ok = send_reply(s, c, &rp, r->spare, counted);
  access_log(s, c, method, url, r, &rp, out);
  dvms_buf_free(&rp.body);
  return ok;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
  dvms_server *s = cls;
  conn_req *r = *con_cls;
  if (!r) return;
  dvms_conns_phase(s->conns, r->conn, DVMS_CONN_HEADERS); /* for the next request */
  dvms_buf_free(&r->body);
  free(r);
  *con_cls = NULL;
}

static void notify(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_ConnectionNotificationCode code) {
  dvms_server *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    dvms_conns_closed(s->conns, *ctx);
    *ctx = NULL;
    return;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (ci) dvms_conns_opened(s->conns, ci->connect_fd, ctx);
}

dvm_status *dvms_server_start(dvms_repo *repo, dvms_metrics *metrics, const dvms_server_options *o,
                              dvms_server **out) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
  if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "--host %s: an IPv4 address expected", o->host);
  dvms_server *s = calloc(1, sizeof *s);
  if (!s) return dvm_status_new(DVM_OUT_OF_MEMORY, "server");
  s->opts = *o;
  s->api = (dvms_api){.repo = repo, .metrics = metrics, .max_elements = o->max_elements};
  int per_client = o->max_per_client > 0 ? o->max_per_client : (o->max_connections + 1) / 2;
  dvm_status *st = dvms_conns_create(o->max_connections, o->header_timeout, o->body_timeout, &s->conns);
  if (st) {
    free(s);
    return st;
  }
  pthread_mutex_init(&s->log_mu, NULL);
  s->daemon = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, (uint16_t)o->port, NULL,
      NULL, handle, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
      MHD_OPTION_NOTIFY_CONNECTION, notify, s,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->max_connections + DVMS_SPARE_CONNECTIONS),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)per_client, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
      MHD_OPTION_END);
  if (!s->daemon) {
    dvms_conns_free(s->conns);
    pthread_mutex_destroy(&s->log_mu);
    free(s);
    return dvm_status_new(DVM_UNAVAILABLE, "cannot listen on %s:%d (in use, or not an address of this machine)",
                          o->host, o->port);
  }
  *out = s;
  return NULL;
}

int dvms_server_port(const dvms_server *s) {
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
  return di ? di->port : -1;
}

void dvms_server_stop(dvms_server *s, double drain_s) {
  if (!s) return;
  atomic_store(&s->draining, 1);
  MHD_socket fd = MHD_quiesce_daemon(s->daemon);
  double until = dvms_now() + drain_s;
  while (atomic_load(&s->inflight) > 0 && dvms_now() < until) {
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  MHD_stop_daemon(s->daemon);
  if (fd != MHD_INVALID_SOCKET) close(fd);
  dvms_conns_free(s->conns);
  pthread_mutex_destroy(&s->log_mu);
  free(s);
}
