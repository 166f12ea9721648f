/* The generator's parts: genai_config.json as read (config.c) and token
 * choice (sample.c), used by generator.c. */
#ifndef DVM_GENIMPL_H
#define DVM_GENIMPL_H

#include <stdint.h>

#include "dvm/generate.h"

#define DVM_GENERATOR_MAX_EOS 16

/* Names are printf formats with one %d (the layer) where the config's are. */
typedef struct dvm_generator_config {
  char filename[128];
  char input_ids[128], attention_mask[128], position_ids[128]; /* position_ids "" when absent */
  char past_key[128], past_value[128], logits[128], present_key[128], present_value[128];
  int head_size, num_heads, kv_heads, layers;
  int context_length, vocab_size;
  int eos[DVM_GENERATOR_MAX_EOS], neos;
  int pad;
  /* search */
  int max_length, min_length, do_sample, top_k;
  int share_buffer; /* past and present one buffer (GroupQueryAttention), else present = past + new */
  double top_p, temperature, repetition_penalty;
  int64_t seed;
  int logprobs; /* not the file's: dvm_generator_options.logprobs (-1: none) */
} dvm_generator_config;

/* Reads and checks path; messages name the field ("genai_config.json:
 * model.decoder.head_size: ..."). */
DVM_MUST_USE dvm_status *dvm_generator_config_read(const char *path, dvm_generator_config *out);

/* The sampler's state: xoshiro256** seeded by splitmix64. */
typedef struct dvm_generator_rng {
  uint64_t s[4];
} dvm_generator_rng;

void dvm_generator_rng_seed(dvm_generator_rng *r, uint64_t seed);

/* The next token from one sequence's logits (vocab floats, changed in
 * place by the penalty and the temperature), given the tokens so far.
 * `work` holds vocab ints. */
int32_t dvm_generator_choose(const dvm_generator_config *c, float *logits, const int32_t *seq, int len, int *work,
                       dvm_generator_rng *rng);

/* The log-softmax of one sequence's logits (vocab floats, unchanged) in
 * one pass: its k most likely tokens and their log-probabilities into
 * out->top, out->top_logprob and out->k; returns the log of the sum of
 * exp(logits), which a logit less is its token's log-probability. `work`
 * holds k ints. */
double dvm_generator_logprobs_top(const float *logits, int vocab, int k, int *work, dvm_generator_logprobs *out);

#endif
