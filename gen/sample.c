/* Choosing the next token, with ONNX Runtime GenAI's semantics (its CPU
 * search): the repetition penalty on every token already in the sequence,
 * EOS held back below min_length, then the most likely token, or a sample:
 * the top_k most likely tokens, softmax of logits / temperature over them,
 * and a threshold drawn uniformly in [0, top_p) walked down their
 * probabilities (top_p 0 or 1 keeps them all). The random stream is our
 * own (xoshiro256**), so a seed reproduces dvm's choices, not GenAI's.
 * And, when a sequence asks, the log-softmax of its raw logits (vLLM's
 * logprobs). */
#include <math.h>
#include <string.h>

#include "genimpl.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

void dvm_generator_rng_seed(dvm_generator_rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* Uniform in [0, 1). */
static double uniform(dvm_generator_rng *r) {
  uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return (double)(out >> 11) * 0x1.0p-53;
}

/* Whether token i comes before token j: a higher logit, ties by the
 * lower id. */
static int before(const float *l, int i, int j) { return l[i] > l[j] || (l[i] == l[j] && i < j); }

/* Puts t at h[at] of the heap h[0..n) (the worst token at the root) and
 * sifts it down. */
static void sift_down(const float *l, int *h, int n, int at, int t) {
  for (int c; (c = 2 * at + 1) < n; at = c) {
    if (c + 1 < n && before(l, h[c], h[c + 1])) c++;
    if (!before(l, t, h[c])) break;
    h[at] = h[c];
  }
  h[at] = t;
}

/* Adds token t to the heap h of the n best so far (at most k, the worst
 * at the root). */
static void heap_offer(const float *l, int *h, int *n, int k, int t) {
  if (*n < k) {
    int at = (*n)++;
    for (; at > 0 && before(l, h[(at - 1) / 2], t); at = (at - 1) / 2) h[at] = h[(at - 1) / 2];
    h[at] = t;
  } else if (k && before(l, t, h[0])) {
    sift_down(l, h, k, 0, t);
  }
}

/* The heap h[0..n) sorted in place, most likely first. */
static void heap_sort(const float *l, int *h, int n) {
  for (; n > 1; n--) { /* the worst left goes last */
    int worst = h[0];
    sift_down(l, h, n - 1, 0, h[n - 1]);
    h[n - 1] = worst;
  }
}

/* The k most likely token ids into h[0..k), most likely first: a heap of
 * the k best over one pass, then sorted out of it. */
static void top_k(const float *l, int vocab, int k, int *h) {
  int n = 0;
  for (int t = 0; t < vocab; t++) heap_offer(l, h, &n, k, t);
  heap_sort(l, h, n);
}

double dvm_generator_logprobs_top(const float *l, int vocab, int k, int *work, dvm_generator_logprobs *out) {
  /* an online softmax: the sum of exp(l - m) rescaled when the largest
   * logit m so far grows, so that no exp overflows */
  double m = -INFINITY, sum = 0;
  int n = 0;
  for (int t = 0; t < vocab; t++) {
    double x = l[t];
    if (x > m) {
      sum = sum * exp(m - x) + 1;
      m = x;
    } else if (x > -INFINITY) { /* then so is m; a -inf (or NaN) adds nothing */
      sum += exp(x - m);
    }
    heap_offer(l, work, &n, k, t);
  }
  heap_sort(l, work, n);
  double lse = m + log(sum);
  out->k = n;
  for (int i = 0; i < n; i++) {
    out->top[i] = work[i];
    out->top_logprob[i] = (float)(l[work[i]] - lse);
  }
  return lse;
}

enum { LANES = 16 };

/* The most likely token: the first t whose logit is the largest (a NaN
 * never is, unless the first logit is one: then 0), as a scalar loop
 * taking t where l[t] > l[best] finds it. In two passes that the compiler
 * vectorizes: the largest logit in LANES lanes, then the first block of
 * LANES holding it. */
static int32_t argmax(const float *l, int vocab) {
  if (l[0] != l[0]) return 0;
  float lane[LANES], m = l[0];
  int t = 0;
  for (int i = 0; i < LANES; i++) lane[i] = m;
  for (; t + LANES <= vocab; t += LANES)
    for (int i = 0; i < LANES; i++) lane[i] = l[t + i] > lane[i] ? l[t + i] : lane[i];
  for (int i = 0; i < LANES; i++) m = lane[i] > m ? lane[i] : m;
  for (; t < vocab; t++) m = l[t] > m ? l[t] : m;
  for (t = 0; t + LANES <= vocab; t += LANES) {
    int hit = 0;
    for (int i = 0; i < LANES; i++) hit |= l[t + i] == m;
    if (hit) break;
  }
  while (l[t] != m) t++;
  return t;
}

int32_t dvm_generator_choose(const dvm_generator_config *c, float *l, const int32_t *seq, int len, int *work,
                       dvm_generator_rng *rng) {
  int vocab = c->vocab_size;
  if (c->repetition_penalty != 1.0) {
    memset(work, 0, (size_t)vocab * sizeof *work);
    for (int i = 0; i < len; i++) {
      int t = seq[i];
      if (work[t]) continue;
      work[t] = 1;
      l[t] = l[t] < 0 ? l[t] * (float)c->repetition_penalty : l[t] / (float)c->repetition_penalty;
    }
  }
  if (len < c->min_length)
    for (int e = 0; e < c->neos; e++) l[c->eos[e]] = -INFINITY;
  if (!c->do_sample) return argmax(l, vocab);
  int k = c->top_k <= 0 || c->top_k > vocab ? vocab : c->top_k;
  top_k(l, vocab, k, work);
  /* probabilities of the k, in place of their logits */
  double sum = 0, top = l[work[0]];
  for (int i = 0; i < k; i++) sum += l[work[i]] = (float)exp((l[work[i]] - top) / c->temperature);
  double p = c->top_p <= 0 || c->top_p >= 1 ? 1 : c->top_p;
  double threshold = uniform(rng) * p * sum;
  for (int i = 0; i < k - 1; i++)
    if ((threshold -= l[work[i]]) <= 0) return work[i];
  return work[k - 1];
}
