/* The CPU kernels' one random number generator (the kernels of random.c:
 * random_normal, random_uniform, bernoulli, multinomial, dropout).
 *
 * Counter-based: draw i of a call is element i of the SplitMix64 stream
 * whose state starts at the call's key (Steele, Lea and Flood, "Fast
 * splittable pseudorandom number generators", OOPSLA 2014): the output
 * mix of key + (i + 1) * 0x9e3779b97f4a7c15. A draw depends on the key and
 * its index only, so a kernel may fill its output in any order, over any
 * threads, and no state lives between calls (VMs may call a kernel from
 * several threads at once).
 *
 * The key is a hash of the node's seed attribute when it has one (the
 * same numbers on every call, every run, every machine), else of the
 * clock's nanoseconds and a per-process count of calls (new numbers on
 * each call). */
#ifndef DVM_OPS_CPU_RANDOM_H
#define DVM_OPS_CPU_RANDOM_H

#include <stdint.h>

#include "dvm/value.h"

/* SplitMix64's output mix (a bijection of 64-bit words). */
static inline uint64_t dvm_rng_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Draw i (64 uniform bits) of the stream of `key`. */
static inline uint64_t dvm_rng_draw(uint64_t key, uint64_t i) {
  return dvm_rng_mix(key + (i + 1) * 0x9e3779b97f4a7c15ull);
}

/* Draw i as a double in [0, 1): its top 53 bits over 2^53. */
static inline double dvm_rng_unit(uint64_t key, uint64_t i) {
  return (double)(dvm_rng_draw(key, i) >> 11) * 0x1p-53;
}

/* The key of a call: from `seed` (an int, or a float by its bits as a
 * double), or a new one per call when seed is NULL. */
uint64_t dvm_rng_key(const dvm_value *seed);

#endif
