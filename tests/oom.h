/* Allocation failure injection for the sweeps (tests/vm/test_oom.c,
 * tests/compiler/test_compile_oom.c, tests/serve/test_request_oom.c,
 * tests/python/oom_ext.c), in SQLite's manner: the k-th allocation
 * (malloc, calloc, realloc, aligned_alloc, posix_memalign, and strdup and
 * strndup, which allocate inside libc) fails, for k = 1, 2, ... until
 * the operation no longer reaches a k-th. The allocators are wrapped at
 * link time (-Wl,--wrap, tests/meson.build's oom_wrap), so every call from
 * the objects linked statically into the test is counted, on any thread
 * (the counter is atomic); calls made inside shared libraries
 * (libprotobuf-c, jansson, oneDNN) are not. Include it in one file of a
 * test program: it defines the wrappers, unless that file defines its own
 * (OOM_OWN_WRAPPERS) around oom_fails(). */
#ifndef DVM_TEST_OOM_H
#define DVM_TEST_OOM_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/status.h"
#include "harness.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t max);

static _Atomic long oom_fail_at, oom_counted; /* oom_fail_at 0: none fails */

static int oom_fails(void) { return oom_fail_at && ++oom_counted == oom_fail_at; }
#ifndef OOM_OWN_WRAPPERS
void *__wrap_malloc(size_t n) { return oom_fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return oom_fails() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return oom_fails() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return oom_fails() ? NULL : __real_aligned_alloc(a, n); }
int __wrap_posix_memalign(void **p, size_t a, size_t n) { return oom_fails() ? ENOMEM : __real_posix_memalign(p, a, n); }
#endif
/* strdup's malloc is libc's own call, which the link cannot wrap */
char *__wrap_strdup(const char *s) { return __wrap_strndup(s, strlen(s)); }
char *__wrap_strndup(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  char *p = __wrap_malloc(n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = 0;
  }
  return p;
}

/* Runs op (a dvm_status * expression) with the k-th allocation failing,
 * for every k it reaches, counting in `failed` the runs that failed (each
 * checked to be DVM_OUT_OF_MEMORY); `undo` runs after each success. */
#define OOM_SWEEP(k, failed, op, undo)                                                       \
  for (long k = 1;; k++) {                                                                 \
    oom_counted = 0;                                                                       \
    oom_fail_at = k;                                                                       \
    dvm_status *sw_ = (op);                                                                \
    long reached_ = oom_counted;                                                           \
    oom_fail_at = 0;                                                                       \
    if (sw_) {                                                                             \
      failed++;                                                                            \
      CHECK(dvm_status_code(sw_) == DVM_OUT_OF_MEMORY);                                    \
      if (dvm_status_code(sw_) != DVM_OUT_OF_MEMORY)                                       \
        fprintf(stderr, "allocation %ld: %s\n", k, dvm_status_message(sw_));               \
      dvm_status_free(sw_);                                                                \
    } else {                                                                               \
      undo;                                                                                \
    }                                                                                      \
    if (reached_ < k) break; /* the whole operation ran without a k-th allocation */      \
  }

#endif
