/* A minimal test harness: CHECK macros that count failures and report the
 * place, and a main-side summary. Each test program returns non-zero when a
 * check failed, and 77 (meson's skip) when it cannot run here. */
#ifndef DVM_TEST_HARNESS_H
#define DVM_TEST_HARNESS_H

#include <stdio.h>
#include <string.h>

#include "dvm/status.h"

static int harness_failures;
static int harness_checks;

#define CHECK(cond)                                                            \
  do {                                                                         \
    harness_checks++;                                                          \
    if (!(cond)) {                                                             \
      harness_failures++;                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* Expects success; prints and frees the status otherwise. */
#define CHECK_OK(expr)                                                         \
  do {                                                                         \
    dvm_status *st_ = (expr);                                                  \
    harness_checks++;                                                          \
    if (st_) {                                                                 \
      harness_failures++;                                                      \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr,     \
              dvm_status_message(st_));                                        \
      dvm_status_free(st_);                                                    \
    }                                                                          \
  } while (0)

/* Expects failure with `code` and a message containing `substr`. */
#define CHECK_ERR(expr, code, substr)                                          \
  do {                                                                         \
    dvm_status *st_ = (expr);                                                  \
    harness_checks++;                                                          \
    if (!st_ || dvm_status_code(st_) != (code) ||                              \
        !strstr(dvm_status_message(st_), (substr))) {                          \
      harness_failures++;                                                      \
      fprintf(stderr, "%s:%d: %s: expected %s error containing \"%s\", got %s: %s\n", \
              __FILE__, __LINE__, #expr, dvm_code_name(code), (substr),        \
              st_ ? dvm_code_name(dvm_status_code(st_)) : "success",           \
              dvm_status_message(st_));                                        \
    }                                                                          \
    dvm_status_free(st_);                                                      \
  } while (0)

static inline int harness_finish(const char *name) {
  printf("%s: %d checks, %d failed\n", name, harness_checks, harness_failures);
  return harness_failures ? 1 : 0;
}

#endif
