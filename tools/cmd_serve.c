/* dvm serve: the inference server (serve/, docs/serving.md). Loads the
 * repository, listens, and waits for SIGTERM or SIGINT to drain and exit 0. */
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

static const char usage_text[] =
    "usage: dvm serve MODEL_REPOSITORY [options]\n"
    "  --http-port N        port to listen on (default 8000; 0: any free port)\n"
    "  --host ADDR          IPv4 address to listen on (default 127.0.0.1; 0.0.0.0 in a container)\n"
    "  --workers N          VMs per model unless its config says (default 1)\n"
    "  --threads N          kernel threads shared by a model's workers (default: all cores)\n"
    "  --max-body BYTES     largest request body (default 67108864)\n"
    "  --max-elements N     largest tensor in a request, in elements (default 16777216)\n"
    "  --max-connections N  open connections at once (default 256; 16 more answer health or 503)\n"
    "  --max-per-client N   open connections from one address (default: half of --max-connections)\n"
    "  --header-timeout S   seconds for a request's headers, or idle between requests (default 30)\n"
    "  --body-timeout S     seconds for a request's body (default 60)\n"
    "  --drain-seconds S    on SIGTERM, how long to wait for requests in flight (default 30)\n"
    "  --cache-dir DIR      keep model.onnx files compiled at load here, for the next load\n"
    "  --no-access-log      no JSON access log on stderr\n"
    "Layout: REPO/NAME/VERSION/model.dvmb (or model.onnx), optional REPO/NAME/config.\n";

static int number(const char *flag, const char *v, long long lo, long long hi, long long *out) {
  char *end;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end || x < lo || x > hi) {
    dvm_cli_usage_error("serve", "%s %s: a number in %lld..%lld expected", flag, v, lo, hi);
    return 0;
  }
  *out = x;
  return 1;
}

static void warn(void *ctx, const char *model, const char *msg) {
  (void)ctx;
  fprintf(stderr, "dvm serve: model %s: warning: %s\n", model, msg);
}

int dvm_cmd_serve(int argc, char **argv) {
  static const struct option opts[] = {
      {"http-port", required_argument, 0, 'p'}, {"host", required_argument, 0, 'H'},
      {"workers", required_argument, 0, 'w'}, {"threads", required_argument, 0, 't'},
      {"max-body", required_argument, 0, 'b'}, {"max-elements", required_argument, 0, 'e'},
      {"max-connections", required_argument, 0, 'c'}, {"drain-seconds", required_argument, 0, 'd'},
      {"max-per-client", required_argument, 0, 'P'}, {"header-timeout", required_argument, 0, 'T'},
      {"body-timeout", required_argument, 0, 'B'}, {"cache-dir", required_argument, 0, 'C'}, {"no-access-log", no_argument, 0, 'n'},
      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  dvms_server_options so;
  dvms_server_options_init(&so);
  so.access_log = stderr;
  const char *cache_dir = NULL;
  long long workers = 1, threads = sysconf(_SC_NPROCESSORS_ONLN), x, drain = 30;
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
    switch (c) {
    case 'p': if (!number("--http-port", optarg, 0, 65535, &x)) return DVM_EXIT_USAGE; so.port = (int)x; break;
    case 'H': so.host = optarg; break;
    case 'w': if (!number("--workers", optarg, 1, 256, &workers)) return DVM_EXIT_USAGE; break;
    case 't': if (!number("--threads", optarg, 1, 4096, &threads)) return DVM_EXIT_USAGE; break;
    case 'b': if (!number("--max-body", optarg, 1, 1LL << 40, &x)) return DVM_EXIT_USAGE; so.max_body = (size_t)x; break;
    case 'e': if (!number("--max-elements", optarg, 1, 1LL << 40, &x)) return DVM_EXIT_USAGE; so.max_elements = x; break;
    case 'c': if (!number("--max-connections", optarg, 1, 100000, &x)) return DVM_EXIT_USAGE; so.max_connections = (int)x; break;
    case 'P': if (!number("--max-per-client", optarg, 1, 100000, &x)) return DVM_EXIT_USAGE; so.max_per_client = (int)x; break;
    case 'T': if (!number("--header-timeout", optarg, 1, 86400, &x)) return DVM_EXIT_USAGE; so.header_timeout = (double)x; break;
    case 'B': if (!number("--body-timeout", optarg, 1, 86400, &x)) return DVM_EXIT_USAGE; so.body_timeout = (double)x; break;
    case 'd': if (!number("--drain-seconds", optarg, 0, 3600, &drain)) return DVM_EXIT_USAGE; break;
    case 'C': cache_dir = optarg; break;
    case 'n': so.access_log = NULL; break;
    case 'h': fputs(usage_text, stdout); return DVM_EXIT_OK;
    default: fputs(usage_text, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fputs(usage_text, stderr);
    return DVM_EXIT_USAGE;
  }
#ifdef __GLIBC__
  /* glibc gives each new thread a malloc arena of its own, up to 8 per
   * core, and an arena keeps what was freed in it: with a thread per
   * connection, RSS grew with every connection thread that got a fresh
   * arena (+11.5% over 20,000 requests after a warm-up, +4.1% with two
   * arenas: docs/performance.md). MALLOC_ARENA_MAX, when set, still rules. */
  if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 2);
#endif
  /* Signals go to sigwait below, not to whichever thread runs. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  dvms_metrics *metrics;
  dvms_repo *repo = NULL;
  dvms_server *server = NULL;
  dvm_status *st = dvms_metrics_create(&metrics);
  dvms_repo_options ro = {.workers = (int)workers, .cores = (int)threads, .cache_dir = cache_dir,
                          .metrics = metrics, .warn = warn};
  if (!st) st = dvms_repo_open(argv[optind], &ro, &repo);
  if (!st) st = dvms_server_start(repo, metrics, &so, &server);
  if (st) {
    dvms_repo_close(repo);
    dvms_metrics_destroy(metrics);
    return dvm_cli_fail("serve", st);
  }
  fprintf(stderr, "dvm serve: listening on %s:%d\n", so.host, dvms_server_port(server));
  int loaded, failed;
  dvms_repo_load_all(repo, &loaded, &failed);
  fprintf(stderr, "dvm serve: %d models loaded, %d failed (see POST /v2/repository/index)\n", loaded, failed);
  int sig;
  sigwait(&sigs, &sig);
  fprintf(stderr, "dvm serve: %s: draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  dvms_server_stop(server, (double)drain);
  dvms_repo_close(repo);
  dvms_metrics_destroy(metrics);
  fprintf(stderr, "dvm serve: stopped\n");
  return DVM_EXIT_OK;
}
