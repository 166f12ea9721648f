/* f16 rows of a KV cache to and from f32 (gqa_half.h), one variant per
 * ISA, chosen once. vcvtph2ps is exact and vcvtps2ph with the rounding
 * immediate 0 rounds to nearest even, as dvm_f16_to_f32 and dvm_f32_to_f16
 * do, so every variant gives the same bits. */
#include "ops/cpu/gqa_half.h"

#include <pthread.h>

#include "half.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/isa.h"

typedef void store_fn(const float *, uint16_t *, int64_t);

static void load_generic(const uint16_t *s, float *d, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = dvm_f16_to_f32(s[i]);
}

static void store_generic(const float *s, uint16_t *d, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = dvm_f32_to_f16(s[i]);
}

#if DVM_EW_X86
#include <immintrin.h>

__attribute__((target("avx2,f16c"))) static void load_256(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
  load_generic(s + i, d + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void store_256(const float *s, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), 0));
  store_generic(s + i, d + i, n - i);
}

__attribute__((target("avx512f"))) static void load_512(const uint16_t *s, float *d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
  load_generic(s + i, d + i, n - i);
}

__attribute__((target("avx512f"))) static void store_512(const float *s, uint16_t *d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(s + i), 0));
  store_generic(s + i, d + i, n - i);
}
#endif

static dvm_gqa_half_load_fn *load_chosen = load_generic;
static store_fn *store_chosen = store_generic;

static void choose(void) {
#if DVM_EW_X86
  dvm_isa isa = dvm_isa_chosen();
  if (isa == DVM_ISA_AVX512F) load_chosen = load_512, store_chosen = store_512;
  else if (isa == DVM_ISA_AVX2 && __builtin_cpu_supports("f16c")) load_chosen = load_256, store_chosen = store_256;
#endif
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

dvm_gqa_half_load_fn *dvm_gqa_half_loader(void) {
  pthread_once(&once, choose);
  return load_chosen;
}

void dvm_gqa_half_store(const float *src, uint16_t *dst, int64_t n) {
  pthread_once(&once, choose);
  store_chosen(src, dst, n);
}
