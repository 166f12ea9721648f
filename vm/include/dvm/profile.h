/* Profiling: where an invocation spends its time.
 *
 * Attach a profile to a VM (dvm_vm_set_profile) and every later
 * dvm_vm_invoke on it is measured instruction by instruction: per call site
 * (function, instruction; its source node, kernel and the shapes it saw) the
 * calls, the time, the allocations and the host syncs. With `trace` set each
 * kernel call is also kept as an event for a Chrome trace (Perfetto opens it).
 * A VM with no profile attached pays one pointer test per invocation.
 *
 * Times are wall-clock on the host: a CUDA kernel's time is its launch (the
 * device runs asynchronously); what waits for the device shows as the
 * instruction that synchronizes (a copy to the host), counted in host_syncs.
 * Stepped invocations (dvm/debug.h) are not profiled. */
#ifndef DVM_PROFILE_H
#define DVM_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "dvm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dvm_profile dvm_profile;

/* A profile for the functions of m (which it retains). trace: keep up to
 * max_events kernel-call events for dvm_profile_write_trace (0 = a default
 * of 1,000,000; later events are counted as dropped). */
DVM_API DVM_MUST_USE dvm_status *dvm_profile_create(dvm_module *m, int trace, size_t max_events,
                                                    dvm_profile **out);
DVM_API void dvm_profile_destroy(dvm_profile *p); /* NULL is fine; detach it from its VM first */

/* Attaches p to vm (borrowed until detached with NULL or vm is destroyed);
 * a profile is attached to one VM at a time. Fails if p was made for
 * another module. */
DVM_API DVM_MUST_USE dvm_status *dvm_vm_set_profile(dvm_vm *vm, dvm_profile *p);

/* Forgets everything measured so far (keeps the attachment). */
DVM_API void dvm_profile_reset(dvm_profile *p);

/* One call site: an instruction that ran at least once. */
typedef struct dvm_profile_site {
  int function, instruction; /* as in dvm disasm */
  const char *opcode;        /* "invoke", "alloc", ... */
  const char *node;          /* source node, or NULL */
  const char *callee;        /* kernel, shape function, host function or function, or NULL */
  const char *shapes;        /* a kernel's operands at its first call: "f32[1,8] f32[8,8] -> f32[1,8]"; "" otherwise */
  int shapes_vary;           /* a later call saw other shapes */
  uint64_t calls;
  uint64_t ns;               /* total wall time */
  uint64_t allocs;           /* storages handed out by the VM's pools (new or reused) */
  uint64_t alloc_bytes;      /* their bytes */
  uint64_t host_syncs;       /* waits for a device */
} dvm_profile_site;

/* Sites in the order they first ran; the strings are borrowed from the
 * module and the profile, valid until the next reset or destroy. */
DVM_API int dvm_profile_site_count(const dvm_profile *p);
DVM_API void dvm_profile_get_site(const dvm_profile *p, int i, dvm_profile_site *out);

typedef struct dvm_profile_totals {
  uint64_t invocations;
  uint64_t ns;            /* wall time of the profiled invocations, end to end */
  uint64_t instructions, kernel_calls, allocs, alloc_bytes, host_syncs;
  uint64_t events, events_dropped; /* trace events kept, and not kept for lack of room */
} dvm_profile_totals;

DVM_API void dvm_profile_get_totals(const dvm_profile *p, dvm_profile_totals *out);

/* Writes the report: totals, then the `top` call sites with the most time
 * (0 = all), then time per op (kernel) and per instruction class, each
 * sorted by total time. Fails (DVM_IO) if writing fails. */
DVM_API DVM_MUST_USE dvm_status *dvm_profile_print(const dvm_profile *p, int top, FILE *out);

/* Writes the kept events as Chrome trace JSON ({"traceEvents": [...]}, one
 * complete event per invocation and per kernel call, times in
 * microseconds). Fails if the profile was made without trace, or writing
 * fails. */
DVM_API DVM_MUST_USE dvm_status *dvm_profile_write_trace(const dvm_profile *p, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
