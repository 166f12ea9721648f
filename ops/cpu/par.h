/* The kernels' thread pool: parallel loops in which the calling thread
 * never waits for a worker that has not started.
 *
 * An OpenMP region ends at a barrier that every thread of its team must
 * reach, so on a loaded machine, where a worker's vCPU runs another
 * process for a while, the caller sits idle until that worker is
 * scheduled, does its share and arrives: 2-thread runs measured 4 to 6
 * times slower than 1-thread ones (docs/performance.md). Here the work is
 * cut into more chunks than threads, every participant (the caller
 * first) claims chunks from one counter, and the caller waits only for
 * chunks that were claimed, that is running: chunks a late worker never
 * claimed are done by whoever is there. */
#ifndef DVM_OPS_CPU_PAR_H
#define DVM_OPS_CPU_PAR_H

#include <stdint.h>

typedef void (*dvm_par_fn)(void *ctx, int64_t s, int64_t e);

/* Calls fn(ctx, s, e) on ranges that cover [0, n) once, on up to
 * `threads` threads (the caller's included), each range a multiple of
 * `align` items (but the last). Runs everything on the caller when
 * threads <= 1, when n <= align, inside another dvm_par_for, or while
 * another thread's loop holds the pool (then it does not wait for it). */
void dvm_par_for(int threads, int64_t n, int64_t align, dvm_par_fn fn, void *ctx);

/* The calling participant's slot in the running loop: 0 for the caller,
 * 1 to threads - 1 for workers (per-thread scratch); 0 outside a loop. */
int dvm_par_slot(void);

#endif
