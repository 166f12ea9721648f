/* What the benchmark programs share: a monotonic clock and exit on error. */
#ifndef DVM_BENCH_BENCH_H
#define DVM_BENCH_BENCH_H

#include <errno.h> /* program_invocation_short_name (GNU) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dvm/status.h"

static inline double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Exits with the message of st, naming the program, unless st is NULL. */
static inline void die(dvm_status *st) {
  if (!st) return;
  fprintf(stderr, "%s: %s\n", program_invocation_short_name, dvm_status_message(st));
  exit(1);
}

#endif
