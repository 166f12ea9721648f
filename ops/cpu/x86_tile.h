/* What the hand-written x86 integer tiles (nbits_tile.c, qgemm.c) share:
 * their functions' target attributes, so that one binary carries each
 * ISA's tile and runs the one isa.h chooses, and an unaligned 4-byte load.
 * Included only where DVM_EW_X86. */
#ifndef DVM_OPS_CPU_X86_TILE_H
#define DVM_OPS_CPU_X86_TILE_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define DVM_TILE_AVX2 __attribute__((target("avx2,fma")))
#define DVM_TILE_AVX512 __attribute__((target("avx512f,avx512bw,avx2,fma")))
#define DVM_TILE_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma")))
#define DVM_TILE_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vnni,avx2,fma")))
#define DVM_TILE_INLINE static inline __attribute__((always_inline))

static inline int32_t dvm_tile_load32(const void *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

#endif
