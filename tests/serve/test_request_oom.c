/* Allocation failure sweep of a server request, in SQLite's manner: the
 * k-th allocation fails, for k = 1, 2, ... until a request no longer
 * reaches a k-th, for tests/models/mlp.onnx served with batching off (one
 * request) and on (two requests at once, joined into one batch), with JSON
 * and with binary bodies. Each answer must be the unfailed one (200, the
 * same bytes) or 507 saying out of memory; the request right after must be
 * answered as if nothing had failed; and nothing may be left behind
 * (AddressSanitizer's leak check at exit, in the sanitizer build).
 *
 * The seam: the server runs in this process (dvms_server_start on a free
 * port of 127.0.0.1) and the test is its client over a socket, so a
 * request takes the path it takes in `dvm serve`: libmicrohttpd hands the
 * body to http.c, api.c routes it, request.c and jsondata.c parse it, the
 * batcher queues it and a worker runs it on its VM, reply.c writes the
 * answer. Before each armed request the model is loaded again, so its VMs'
 * pools start empty and the run allocates its tensors.
 *
 * What is counted: tests/oom.h wraps the allocators (malloc, calloc,
 * realloc, aligned_alloc, posix_memalign, strdup, strndup) at link time,
 * which reaches every allocation made by serve/, libdvm and the compiler
 * (static libraries linked here), from any thread, and jansson's (a shared
 * library) too, as request.c gives jansson an allocator of its own that
 * calls malloc. Not counted: libmicrohttpd's own allocations (its
 * per-connection memory), libc's internal ones (stdio, thread stacks) and
 * oneDNN's: a preload shim armed by an environment variable would reach
 * those too, but also every allocation of the test's client, and a
 * failure inside libmicrohttpd is answered by libmicrohttpd, not by dvm.
 * The client here allocates nothing while armed (static buffers), and the
 * other threads (idle workers, the connection watcher) allocate nothing. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oom.h"
#include "serve.h"

typedef struct answer {
  unsigned status;
  size_t len;        /* of body */
  char body[16384];
} answer;

/* An infer request's bytes, headers included. */
typedef struct request {
  char text[16384];
  size_t len;
} request;

/* The body for `rows` rows of x (16 values each): JSON, or a JSON header
 * and the binary tensor data, asking for binary output. */
static void make_request(request *q, const char *model, int rows, int binary) {
  float x[64 * 16];
  for (int i = 0; i < rows * 16; i++) x[i] = (float)((i * 37 + rows) % 19 - 9) / 7.0f;
  char body[12288];
  int n;
  size_t header = 0, nbin = (size_t)rows * 16 * sizeof(float);
  if (binary) {
    n = snprintf(body, sizeof body,
                 "{\"id\":\"b%d\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[%d,16],"
                 "\"parameters\":{\"binary_data_size\":%zu}}],\"parameters\":{\"binary_data_output\":true}}",
                 rows, rows, nbin);
    header = (size_t)n;
    memcpy(body + n, x, nbin);
    n += (int)nbin;
  } else {
    n = snprintf(body, sizeof body, "{\"id\":\"j%d\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[%d,16],"
                 "\"data\":[", rows, rows);
    for (int i = 0; i < rows * 16; i++) n += snprintf(body + n, sizeof body - (size_t)n, "%s%.9g", i ? "," : "", x[i]);
    n += snprintf(body + n, sizeof body - (size_t)n, "]}]}");
  }
  int h = snprintf(q->text, sizeof q->text,
                   "POST /v2/models/%s/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "Content-Length: %d\r\n", model, n);
  if (binary) h += snprintf(q->text + h, sizeof q->text - (size_t)h, "Inference-Header-Content-Length: %zu\r\n", header);
  h += snprintf(q->text + h, sizeof q->text - (size_t)h, "\r\n");
  memcpy(q->text + h, body, (size_t)n);
  q->len = (size_t)h + (size_t)n;
}

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Sends q on fd (whatever the server reads of it). */
static void send_all(int fd, const request *q) {
  for (size_t off = 0; off < q->len;) {
    ssize_t w = send(fd, q->text + off, q->len - off, MSG_NOSIGNAL);
    if (w <= 0) return;
    off += (size_t)w;
  }
}

/* Reads the response until the server closes fd; status 0 when there was
 * none. */
static void receive(int fd, answer *a) {
  static char raw[sizeof a->body + 1024];
  size_t n = 0;
  for (ssize_t r; n < sizeof raw && (r = recv(fd, raw + n, sizeof raw - n, 0)) > 0;) n += (size_t)r;
  close(fd);
  a->status = 0;
  a->len = 0;
  const char *end = memmem(raw, n, "\r\n\r\n", 4);
  if (n < 12 || !end || memcmp(raw, "HTTP/1.1 ", 9) != 0) return;
  a->status = (unsigned)atoi(raw + 9);
  a->len = n - (size_t)(end + 4 - raw);
  memcpy(a->body, end + 4, a->len);
}

/* Sends the n requests at once (each on its connection), then reads the
 * n answers. */
static void exchange(int port, const request *const *qs, answer *as, int n) {
  int fds[2];
  for (int i = 0; i < n; i++) fds[i] = dial(port);
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) send_all(fds[i], qs[i]);
  for (int i = 0; i < n; i++) {
    as[i].status = 0;
    if (fds[i] >= 0) receive(fds[i], &as[i]);
  }
}

/* A POST of path with an empty body. */
static void make_post(request *q, const char *path) {
  q->len = (size_t)snprintf(q->text, sizeof q->text,
                            "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                            path);
}

static int same(const answer *a, const answer *b) {
  return a->status == b->status && a->len == b->len && memcmp(a->body, b->body, a->len) == 0;
}

/* Before each k, `model` is loaded again (reset "load": its VMs' pools
 * start empty) or unloaded ("unload": its next load is its first); then
 * the requests `armed` are sent at once with the k-th allocation failing,
 * then `after` without a failure, whose answers must be the unfailed ones. */
typedef struct sweep_case {
  const char *what, *model, *reset;
  const request *armed[2], *after[2];
  int narmed, nafter;
} sweep_case;

static void sweep(int port, const sweep_case *c) {
  request reset;
  char path[160];
  snprintf(path, sizeof path, "/v2/repository/models/%s/%s", c->model, c->reset);
  make_post(&reset, path);
  answer ref[2], after_ref[2], got[2], one;
  exchange(port, c->armed, ref, c->narmed);
  exchange(port, c->after, after_ref, c->nafter);
  for (int i = 0; i < c->narmed; i++) CHECK(ref[i].status == 200);
  for (int i = 0; i < c->nafter; i++) CHECK(after_ref[i].status == 200);
  long failed = 0, k;
  for (k = 1; !harness_failures; k++) {
    exchange(port, (const request *const[]){&reset}, &one, 1);
    CHECK(one.status == 200);
    oom_counted = 0;
    oom_fail_at = k;
    exchange(port, c->armed, got, c->narmed);
    long reached = oom_counted;
    oom_fail_at = 0;
    for (int i = 0; i < c->narmed; i++) {
      if (same(&got[i], &ref[i])) continue;
      failed++;
      int clean = got[i].status == 507 && memmem(got[i].body, got[i].len, "out of memory", 13);
      CHECK(clean);
      if (!clean)
        fprintf(stderr, "%s, allocation %ld, request %d: %u %.*s\n", c->what, k, i, got[i].status,
                (int)(got[i].len < 300 ? got[i].len : 300), got[i].body);
    }
    exchange(port, c->after, got, c->nafter); /* and the server answers the next as before */
    for (int i = 0; i < c->nafter; i++) {
      CHECK(same(&got[i], &after_ref[i]));
      if (!same(&got[i], &after_ref[i])) fprintf(stderr, "%s, after allocation %ld: %u\n", c->what, k, got[i].status);
    }
    if (reached < k) break;
  }
  CHECK(failed > 10); /* the request allocates, so the sweep failed some */
  printf("%s: %ld allocations, %ld answers 507\n", c->what, k - 1, failed);
}

/* The sum of the inode numbers of the compiled models in the cache
 * folder: a compile replaces its entry by a new file. */
static unsigned long long cache_inodes(const char *cache) {
  unsigned long long sum = 0;
  DIR *d = opendir(cache);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, ".dvmb")) sum += e->d_ino;
  if (d) closedir(d);
  return sum;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f && fputs(text, f) >= 0);
  if (f) fclose(f);
}

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  char buf[1 << 16];
  CHECK(in && out);
  for (size_t n; in && out && (n = fread(buf, 1, sizeof buf, in)) > 0;) CHECK(fwrite(buf, 1, n, out) == n);
  if (in) fclose(in);
  if (out) fclose(out);
}

/* ROOT/repo/NAME/1/model.onnx (mlp.onnx) with its config, for each model. */
static void make_repo(const char *root, const char *onnx) {
  static const struct {
    const char *name, *config;
  } models[] = {
      {"mlp", "dim = batch=1..64\nworkers = 1\nthreads = 1\n"},
      {"mlpb", "dim = batch=1..64\nbatch = batch\nmax_batch = 4\nqueue_delay_us = 50000\nworkers = 1\nthreads = 1\n"},
  };
  char path[4096];
  snprintf(path, sizeof path, "%s/repo", root);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/cache", root);
  mkdir(path, 0755);
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    snprintf(path, sizeof path, "%s/repo/%s", root, models[i].name);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/repo/%s/config", root, models[i].name);
    write_file(path, models[i].config);
    snprintf(path, sizeof path, "%s/repo/%s/1", root, models[i].name);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/repo/%s/1/model.onnx", root, models[i].name);
    copy_file(onnx, path);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_request_oom MLP.onnx TMPDIR\n");
    return 2;
  }
  make_repo(argv[2], argv[1]);
  char root[4096], cache[4096];
  snprintf(root, sizeof root, "%s/repo", argv[2]);
  snprintf(cache, sizeof cache, "%s/cache", argv[2]);
  dvms_metrics *metrics = NULL;
  dvms_repo *repo = NULL;
  dvms_server *server = NULL;
  CHECK_OK(dvms_metrics_create(&metrics));
  dvms_repo_options ro = {.workers = 1, .cores = 1, .cache_dir = cache, .metrics = metrics};
  if (!harness_failures) CHECK_OK(dvms_repo_open(root, &ro, &repo));
  int loaded = 0, bad = 0;
  if (repo) dvms_repo_load_all(repo, &loaded, &bad);
  CHECK(loaded == 2 && bad == 0);
  FILE *log = fopen("/dev/null", "w");
  dvms_server_options so;
  dvms_server_options_init(&so);
  so.port = 0;
  so.access_log = log;
  if (!harness_failures) CHECK_OK(dvms_server_start(repo, metrics, &so, &server));
  if (harness_failures) return harness_finish("request_oom");
  int port = dvms_server_port(server);

  static request q[6];
  make_request(&q[0], "mlp", 3, 0);
  make_request(&q[1], "mlp", 5, 1);
  make_request(&q[2], "mlpb", 1, 0);
  make_request(&q[3], "mlpb", 3, 1);
  make_post(&q[4], "/v2/repository/models/mlp/load");
  make_post(&q[5], "/v2/repository/models/mlpb/load");
  const sweep_case cases[] = {
      {"unbatched JSON", "mlp", "load", {&q[0]}, {&q[0]}, 1, 1},
      {"unbatched binary", "mlp", "load", {&q[1]}, {&q[1]}, 1, 1},
      {"batched JSON and binary", "mlpb", "load", {&q[2], &q[3]}, {&q[2], &q[3]}, 2, 2},
      /* a reload (the old version serves on when it fails), then a request to it */
      {"model reload", "mlp", "load", {&q[4]}, {&q[0]}, 1, 1},
      /* a first load (the model table takes an entry), then a load that works */
      {"model load", "mlpb", "unload", {&q[5]}, {&q[5]}, 1, 1},
  };
  unsigned long long inodes = cache_inodes(cache);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) sweep(port, &cases[c]);
  CHECK(inodes && cache_inodes(cache) == inodes); /* out of memory loading an entry did not compile it again */
  dvms_server_stop(server, 5);
  dvms_repo_close(repo);
  dvms_metrics_destroy(metrics);
  fclose(log);
  return harness_finish("request_oom");
}
