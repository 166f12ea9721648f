/* f16 and bf16 as storage types: conversions to and from f32 that round
 * to nearest even, keep NaN a (quiet) NaN and turn values beyond f16's
 * range into infinity. Branch-free (selects on integer masks), so loops
 * over them vectorize; one header for the kernels, the shape functions and
 * the compiler. */
#ifndef DVM_HALF_H
#define DVM_HALF_H

#include <stdint.h>
#include <string.h>

static inline float dvm_ew_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint32_t dvm_ew_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* c ? a : b on bit patterns, without a branch. */
static inline uint32_t dvm_ew_sel(int c, uint32_t a, uint32_t b) {
  uint32_t m = 0u - (uint32_t)(c != 0);
  return (a & m) | (b & ~m);
}

static inline float dvm_f16_to_f32(uint16_t h) {
  uint32_t em = (uint32_t)(h & 0x7fffu) << 13, s = (uint32_t)(h & 0x8000u) << 16;
  /* rebiasing the exponent by a multiply also normalizes subnormals */
  uint32_t r = dvm_ew_f32_bits(dvm_ew_bits_f32(em) * 0x1p112f);
  r = dvm_ew_sel(em >= 0x7c00u << 13, em | 0x7f800000u, r); /* inf, NaN */
  return dvm_ew_bits_f32(r | s);
}

static inline uint16_t dvm_f32_to_f16(float f) {
  uint32_t x = dvm_ew_f32_bits(f), s = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t big = dvm_ew_sel(x > 0x7f800000u, 0x7e00u, 0x7c00u);
  /* below 2^-14 the result is subnormal: adding 0.5 rounds the value to
   * a multiple of 2^-24 in the float unit */
  uint32_t sub = dvm_ew_f32_bits(dvm_ew_bits_f32(x) + 0.5f) - 0x3f000000u;
  /* rebias (-112 << 23), add half an ulp minus one plus the odd bit: RNE */
  uint32_t nor = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
  uint32_t r = dvm_ew_sel(x >= 0x47800000u, big, dvm_ew_sel(x < 0x38800000u, sub, nor));
  return (uint16_t)(r | s);
}

static inline float dvm_bf16_to_f32(uint16_t h) { return dvm_ew_bits_f32((uint32_t)h << 16); }

static inline uint16_t dvm_f32_to_bf16(float f) {
  uint32_t x = dvm_ew_f32_bits(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)dvm_ew_sel((x & 0x7fffffffu) > 0x7f800000u, (x >> 16) | 0x40u, r);
}

#endif
