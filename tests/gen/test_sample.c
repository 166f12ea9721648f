/* The greedy choice (gen/sample.c) against the scalar loop that defines
 * it (the first token whose logit is above every one before it) at vocab
 * sizes around its blocks of 16 (1, 2, 15, 16, 17, 31, 33, 97, 32000,
 * 32003): random logits with many ties, +0 and -0, -inf (every logit, or
 * every one but the last), NaNs anywhere (never chosen, but for the first
 * logit: then token 0), the largest in the tail past the last block, and
 * one best logit at each position. And the log-softmax with its top k
 * (dvm_generator_logprobs_top) against a two-pass one in double and a
 * sort, at the same sizes and k of 0, 1, 5 and 20 (more than some
 * vocabularies): ties (the lower id first), logits around 1e4 (whose exp
 * overflows without the maximum taken out) and -inf ones, the first
 * among them. */
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

/* The log-softmax of l by its definition: the maximum, then the sum. */
static double reference_lse(const float *l, int vocab) {
  double m = -INFINITY, sum = 0;
  for (int t = 0; t < vocab; t++) m = l[t] > m ? l[t] : m;
  for (int t = 0; t < vocab; t++) sum += exp(l[t] - m);
  return m + log(sum);
}

/* Whether token i ranks before j: a higher logit, ties by the lower id. */
static const float *ranked;
static int by_rank(const void *a, const void *b) {
  int i = *(const int *)a, j = *(const int *)b;
  if (ranked[i] != ranked[j]) return ranked[i] > ranked[j] ? -1 : 1;
  return i - j;
}

static void check_logprobs(const float *l, int vocab, int *work, int *order) {
  static const int ks[] = {0, 1, 5, 20};
  double want = reference_lse(l, vocab);
  for (int t = 0; t < vocab; t++) order[t] = t;
  ranked = l;
  qsort(order, (size_t)vocab, sizeof *order, by_rank);
  for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
    dvm_generator_logprobs out;
    double lse = dvm_generator_logprobs_top(l, vocab, ks[i], work, &out);
    int k = ks[i] < vocab ? ks[i] : vocab;
    if (!(fabs(lse - want) <= 1e-9 * fmax(1, fabs(want))))
      fprintf(stderr, "vocab %d k %d: log-sum-exp %.17g, want %.17g\n", vocab, ks[i], lse, want);
    CHECK(fabs(lse - want) <= 1e-9 * fmax(1, fabs(want)));
    CHECK(out.k == k);
    for (int j = 0; j < out.k; j++) {
      double lp = l[order[j]] - want; /* -inf for a token ruled out */
      if (out.top[j] != order[j] || !(out.top_logprob[j] == lp || fabs(out.top_logprob[j] - lp) <= 1e-5))
        fprintf(stderr, "vocab %d k %d: top %d is %d (%g), want %d (%g)\n", vocab, ks[i], j, out.top[j],
                out.top_logprob[j], order[j], lp);
      CHECK(out.top[j] == order[j]);
      CHECK(out.top_logprob[j] == lp || fabs(out.top_logprob[j] - lp) <= 1e-5);
    }
  }
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
  int *work = malloc(sizeof(int) * 32003), *order = malloc(sizeof(int) * 32003);
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
    for (int trial = 0; trial < 4; trial++) {
      for (int t = 0; t < vocab; t++) l[t] = (float)(next() % 7) - 3; /* ties */
      if (trial == 1)
        for (int t = 0; t < vocab; t++) l[t] = 1e4f + (float)(next() % 1000) * 0.25f;
      if (trial == 2)
        for (int t = 0; t < vocab; t += 3) l[t] = -INFINITY;
      if (trial == 3)
        for (int t = 0; t < vocab; t++) l[t] = (float)(int32_t)next() * 0x1p-26f;
      if (trial == 2) l[vocab > 1] = 0; /* a finite one, after the -inf first */
      check_logprobs(l, vocab, work, order);
    }
  }
  free(order);
  free(l);
  free(copy);
  free(work);
  return harness_finish("sample");
}
