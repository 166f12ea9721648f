/* What a token's logprobs cost beside its choice (gen/sample.c): per row
 * of logits at vocabulary sizes of real models (Llama 2's 32000, Llama
 * 3's 128256, Qwen2's 151936), the greedy choice every token pays, and
 * the log-softmax with its top k (0, 5, 20) plus the copy of the row the
 * choice then works on, which only a sequence asking for logprobs pays.
 * The variants take turns in each round; prints the fastest round's CPU
 * microseconds per row of each (the thread's own time: the machine may be
 * shared), then one JSON line per vocabulary.
 *   bench_logprobs [--rounds N] [--quick] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/genimpl.h"

enum { VARIANTS = 4 };
static const int top[VARIANTS] = {-1, 0, 5, 20}; /* -1: the greedy choice alone */

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  int rounds = 15, quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1, rounds = 2;
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_logprobs [--rounds N] [--quick]\n");
      return 2;
    }
  }
  static const int vocabs[] = {32000, 128256, 151936};
  int nv = quick ? 1 : 3, reps = quick ? 2 : 50;
  float *l = malloc(sizeof(float) * 151936), *copy = malloc(sizeof(float) * 151936);
  int *work = malloc(sizeof(int) * 151936);
  if (!l || !copy || !work || rounds < 1) return 1;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  printf("%8s %12s %12s %12s %12s   (CPU us per row, fastest of %d rounds)\n", "vocab", "greedy", "+logprobs 0",
         "+logprobs 5", "+logprobs 20", rounds);
  for (int v = 0; v < nv; v++) {
    int vocab = vocabs[v];
    for (int t = 0; t < vocab; t++) { /* logits of a trained model's spread: a few far above the rest */
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      l[t] = (float)((double)(s >> 11) * 0x1p-53 * 8 - 4) + (t % 997 == 0 ? 10.0f : 0.0f);
    }
    dvm_generator_config c = {.vocab_size = vocab, .repetition_penalty = 1.0};
    dvm_generator_logprobs out;
    volatile double sink = 0;
    double best[VARIANTS];
    for (int k = 0; k < VARIANTS; k++) best[k] = INFINITY;
    for (int r = 0; r < rounds; r++)
      for (int k = 0; k < VARIANTS; k++) {
        double t0 = cpu_now();
        for (int i = 0; i < reps; i++) {
          if (top[k] >= 0) {
            sink += dvm_generator_logprobs_top(l, vocab, top[k], work, &out);
            memcpy(copy, l, sizeof(float) * (size_t)vocab);
            sink += dvm_generator_choose(&c, copy, NULL, 0, work, NULL);
          } else {
            sink += dvm_generator_choose(&c, l, NULL, 0, work, NULL); /* greedy leaves l as it was */
          }
        }
        best[k] = fmin(best[k], (cpu_now() - t0) / reps * 1e6);
      }
    printf("%8d %12.1f %12.1f %12.1f %12.1f\n", vocab, best[0], best[1], best[2], best[3]);
    printf("{\"vocab\":%d,\"greedy_us\":%.2f,\"logprobs0_us\":%.2f,\"logprobs5_us\":%.2f,\"logprobs20_us\":%.2f}\n",
           vocab, best[0], best[1], best[2], best[3]);
    if (!(sink == sink)) return 1; /* keeps the work */
  }
  free(l);
  free(copy);
  free(work);
  return 0;
}
