/* Run limits and SIGINT for the commands that run a VM (see runlimits.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli.h"
#include "runlimits.h"

/* What the handlers touch: the VM to interrupt (dvm_vm_interrupt is one
 * atomic store, safe in a handler) and which signal stopped it. */
static dvm_vm *volatile watched;
static volatile sig_atomic_t stopped_by;
static double watched_timeout;

static void on_signal(int sig) {
  if (sig == SIGINT && stopped_by == SIGINT) { /* a second Ctrl-C: stop now */
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  stopped_by = sig;
  if (watched) dvm_vm_interrupt(watched);
}

int dvm_cli_limit_option(const char *cmd, int c, const char *arg, dvm_vm_options *vo, double *timeout) {
  char *end;
  errno = 0;
  if (c == 'O') {
    double s = strtod(arg, &end);
    if (*end || end == arg || !(s > 0) || s > 1e9)
      return dvm_cli_usage_error(cmd, "--timeout %s: expected a number of seconds > 0", arg);
    *timeout = s;
    return 0;
  }
  unsigned long long v = strtoull(arg, &end, 10), unit = 1;
  if (c == 'M' && *end && !end[1]) {
    const char *units = "KMG", *u = strchr(units, *end);
    if (u) unit = 1ull << (10 * (u - units + 1)), end++;
  }
  if (*end || end == arg || arg[0] == '-' || errno || v == 0 || v > UINT64_MAX / unit)
    return dvm_cli_usage_error(cmd, "--%s %s: expected a whole number > 0%s",
                               c == 'S' ? "max-steps" : "memory-limit", arg, c == 'M' ? " (K, M or G may follow)" : "");
  if (c == 'S') vo->step_limit = v;
  else vo->pool_limit = (size_t)(v * unit);
  return 0;
}

void dvm_cli_watch(dvm_vm *vm, double timeout) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  stopped_by = 0;
  watched = vm;
  watched_timeout = timeout;
  sigaction(SIGINT, &sa, NULL);
  if (timeout > 0) {
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval t = {{0, 0}, {(time_t)timeout, (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)}};
    if (!t.it_value.tv_sec && !t.it_value.tv_usec) t.it_value.tv_usec = 1;
    setitimer(ITIMER_REAL, &t, NULL);
  }
}

void dvm_cli_unwatch(void) {
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  watched = NULL;
}

int dvm_cli_stopped(void) { return stopped_by != 0; }

int dvm_cli_run_fail(const char *cmd, dvm_status *st) {
  if (dvm_status_code(st) != DVM_INTERRUPTED || !stopped_by) return dvm_cli_fail(cmd, st);
  /* the message is "WHERE: interrupted", WHERE naming function, instruction and node */
  const char *msg = dvm_status_message(st), *tail = ": interrupted";
  size_t n = strlen(msg), t = strlen(tail);
  int len = (int)(n > t && !strcmp(msg + n - t, tail) ? n - t : n), rc;
  if (stopped_by == SIGINT) {
    fprintf(stderr, "dvm %s: interrupted (SIGINT) at %.*s\n", cmd, len, msg);
    rc = DVM_EXIT_INTERRUPTED;
  } else {
    fprintf(stderr, "dvm %s: error: timed out after %g s at %.*s\n", cmd, watched_timeout, len, msg);
    rc = DVM_EXIT_RUNTIME;
  }
  dvm_status_free(st);
  return rc;
}
