/* The greedy choice (gen/sample.c) against the scalar loop that defines
 * it (the first token whose logit is above every one before it) at vocab
 * sizes around its blocks of 16 (1, 2, 15, 16, 17, 31, 33, 97, 32000,
 * 32003): random logits with many ties, +0 and -0, -inf (every logit, or
 * every one but the last), NaNs anywhere (never chosen, but for the first
 * logit: then token 0), the largest in the tail past the last block, and
 * one best logit at each position. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gen/genimpl.h"
#include "harness.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (uint32_t)(rng >> 32);
}

static int32_t reference(const float *l, int vocab) {
  int best = 0;
  for (int t = 1; t < vocab; t++)
    if (l[t] > l[best]) best = t;
  return best;
}

int main(void) {
  static const int sizes[] = {1, 2, 15, 16, 17, 31, 33, 97, 32000, 32003};
  dvm_generator_config c = {.repetition_penalty = 1.0};
  float *l = malloc(sizeof(float) * 32003), *copy = malloc(sizeof(float) * 32003);
  int *work = malloc(sizeof(int) * 32003);
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int vocab = c.vocab_size = sizes[s];
    for (int trial = 0; trial < 40; trial++) {
      for (int t = 0; t < vocab; t++) l[t] = (float)(next() % 7) - 3; /* ties among 7 values */
      int kind = trial % 8;
      if (kind == 1) l[next() % vocab] = NAN, l[next() % vocab] = 9; /* a NaN and a clear best */
      if (kind == 2) l[0] = NAN;                                      /* NaN first: token 0 */
      if (kind == 3)
        for (int t = 0; t < vocab; t++) l[t] = -INFINITY;
      if (kind == 4) {
        for (int t = 0; t < vocab; t++) l[t] = -INFINITY;
        l[vocab - 1] = -1e30f;
      }
      if (kind == 5)
        for (int t = 0; t < vocab; t++) l[t] = next() % 2 ? 0.0f : -0.0f;
      if (kind == 6) l[vocab - 1 - (int)(next() % (vocab < 15 ? vocab : 15))] = 100; /* in the tail */
      if (kind == 7)
        for (int t = 0; t < vocab; t++) l[t] = (float)(int32_t)next() * 0x1p-20f;
      memcpy(copy, l, sizeof(float) * (size_t)vocab);
      int32_t got = dvm_generator_choose(&c, copy, NULL, 0, work, NULL), want = reference(l, vocab);
      if (got != want) fprintf(stderr, "vocab %d trial %d: chose %d, the first most likely is %d\n", vocab, trial, got,
                               want);
      CHECK(got == want);
    }
    /* a single best at every position (of a large vocabulary: its first and last 48) */
    for (int t = 0; t < vocab; t++) l[t] = (float)(next() % 7) - 3;
    for (int p = 0; p < vocab; p = p == 47 && vocab > 96 ? vocab - 48 : p + 1) {
      float keep = l[p];
      l[p] = 9;
      memcpy(copy, l, sizeof(float) * (size_t)vocab);
      int32_t got = dvm_generator_choose(&c, copy, NULL, 0, work, NULL);
      if (got != p) fprintf(stderr, "vocab %d: chose %d, the best is %d\n", vocab, got, p);
      CHECK(got == p);
      l[p] = keep;
    }
  }
  free(l);
  free(copy);
  free(work);
  return harness_finish("sample");
}
