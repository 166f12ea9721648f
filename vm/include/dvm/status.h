/* Status values: every fallible dvm call returns one.
 *
 * NULL means success. Anything else is a heap object the caller owns and must
 * pass to dvm_status_free (or hand on, e.g. by returning it). Out-of-memory is
 * reported with a preallocated status, so reporting it never allocates. */
#ifndef DVM_STATUS_H
#define DVM_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DVM_API __attribute__((visibility("default")))
#define DVM_MUST_USE __attribute__((warn_unused_result))
#define DVM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DVM_API
#define DVM_MUST_USE
#define DVM_PRINTF(f, a)
#endif

typedef enum dvm_code {
  DVM_OK = 0,
  DVM_INVALID_ARGUMENT,  /* bad input from the caller: a tensor, shape, flag */
  DVM_NOT_FOUND,         /* a named function, file, kernel or symbol is missing */
  DVM_CORRUPT,           /* a file failed to parse or verify */
  DVM_OUT_OF_MEMORY,     /* the system allocator failed */
  DVM_RESOURCE_EXHAUSTED,/* a configured limit: pool size, frame depth, steps */
  DVM_UNIMPLEMENTED,     /* a feature dvm does not have (yet) */
  DVM_UNAVAILABLE,       /* a device or library is not present on this machine */
  DVM_FAILED_PRECONDITION, /* a program check failed (guard, check, fatal) */
  DVM_OUT_OF_RANGE,      /* an index or arithmetic result out of range */
  DVM_IO,                /* reading or writing a file failed */
  DVM_INTERNAL,          /* a bug in dvm */
  DVM_INTERRUPTED,       /* stopped by dvm_vm_interrupt or a step budget */
  DVM_CODE_COUNT
} dvm_code;

typedef struct dvm_status dvm_status;

/* A new status with a printf-style message. Never returns NULL: if the
 * message cannot be allocated the preallocated out-of-memory status is
 * returned instead, as it is for DVM_OUT_OF_MEMORY with an empty message
 * (that one is never annotated). */
DVM_API dvm_status *dvm_status_new(dvm_code code, const char *fmt, ...) DVM_PRINTF(2, 3);
DVM_API dvm_status *dvm_status_newv(dvm_code code, const char *fmt, va_list ap);

/* Prefixes the message with context ("while loading f: " + old message).
 * Consumes `st` and returns the annotated status; NULL stays NULL. */
DVM_API dvm_status *dvm_status_annotate(dvm_status *st, const char *fmt, ...) DVM_PRINTF(2, 3);

DVM_API dvm_code dvm_status_code(const dvm_status *st);      /* DVM_OK for NULL */
DVM_API const char *dvm_status_message(const dvm_status *st); /* "" for NULL; owned by st */
DVM_API const char *dvm_code_name(dvm_code code);
DVM_API void dvm_status_free(dvm_status *st);                /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
