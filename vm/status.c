/* Status values (see dvm/status.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/status.h"

struct dvm_status {
  dvm_code code;
  char *message;
};

/* Reporting out-of-memory must not need memory. */
static struct dvm_status oom_status = {DVM_OUT_OF_MEMORY, "out of memory"};

static const char *const code_names[DVM_CODE_COUNT] = {
    [DVM_OK] = "ok",
    [DVM_INVALID_ARGUMENT] = "invalid argument",
    [DVM_NOT_FOUND] = "not found",
    [DVM_CORRUPT] = "corrupt",
    [DVM_OUT_OF_MEMORY] = "out of memory",
    [DVM_RESOURCE_EXHAUSTED] = "resource exhausted",
    [DVM_UNIMPLEMENTED] = "unimplemented",
    [DVM_UNAVAILABLE] = "unavailable",
    [DVM_FAILED_PRECONDITION] = "failed precondition",
    [DVM_OUT_OF_RANGE] = "out of range",
    [DVM_IO] = "i/o error",
    [DVM_INTERNAL] = "internal error",
    [DVM_INTERRUPTED] = "interrupted",
};

const char *dvm_code_name(dvm_code code) {
  return (unsigned)code < DVM_CODE_COUNT ? code_names[code] : "unknown";
}

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

dvm_status *dvm_status_newv(dvm_code code, const char *fmt, va_list ap) {
  /* an out-of-memory status with a message (what, how many bytes) takes
   * memory if there is some; without one, or without memory, it is the
   * preallocated one */
  if (code == DVM_OUT_OF_MEMORY && !fmt[0]) return &oom_status;
  dvm_status *st = malloc(sizeof *st);
  if (!st) return &oom_status;
  st->code = code;
  st->message = vformat(fmt, ap);
  if (!st->message) {
    free(st);
    return &oom_status;
  }
  return st;
}

dvm_status *dvm_status_new(dvm_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(code, fmt, ap);
  va_end(ap);
  return st;
}

dvm_status *dvm_status_annotate(dvm_status *st, const char *fmt, ...) {
  if (!st || st == &oom_status) return st;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = vformat(fmt, ap);
  va_end(ap);
  if (!prefix) return st; /* keep the original message rather than lose it */
  size_t a = strlen(prefix), b = strlen(st->message);
  char *joined = malloc(a + 2 + b + 1);
  if (joined) {
    memcpy(joined, prefix, a);
    memcpy(joined + a, ": ", 2);
    memcpy(joined + a + 2, st->message, b + 1);
    free(st->message);
    st->message = joined;
  }
  free(prefix);
  return st;
}

dvm_code dvm_status_code(const dvm_status *st) { return st ? st->code : DVM_OK; }

const char *dvm_status_message(const dvm_status *st) { return st ? st->message : ""; }

void dvm_status_free(dvm_status *st) {
  if (!st || st == &oom_status) return;
  free(st->message);
  free(st);
}
