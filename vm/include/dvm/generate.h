/* Generation: a decoder LLM run token by token over a KV cache.
 *
 * A generator runs a module compiled from a model folder as ONNX Runtime
 * GenAI's builder writes it (model.onnx + genai_config.json): the
 * decoder's inputs input_ids, attention_mask, [position_ids] and each
 * layer's past key and value, its outputs logits and each layer's present
 * key and value. It owns one VM, the sequences, and the KV cache: per
 * layer a key and a value tensor [batch, kv_heads, max_length, head_size],
 * allocated once when it is created and bound as both the past input and
 * the present output of every step (dvm_vm_invoke_bound), so a step writes
 * only the new rows. Or, with kv_block_size, a paged cache: per layer a
 * key and a value pool of blocks of kv_block_size token rows, which each
 * sequence takes as it grows and gives back at its reset, sharing the full
 * blocks of a prompt prefix another sequence holds or held (vLLM's
 * PagedAttention and prefix cache). docs/generation.md says what the
 * config fields mean and what is refused.
 *
 * A generator belongs to one thread at a time, like its VM. */
#ifndef DVM_GENERATE_H
#define DVM_GENERATE_H

#include "dvm/vm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dvm_generator dvm_generator;

/* Each search setting left negative (as dvm_generator_options_init leaves them)
 * takes the value of genai_config.json's "search" object. */
typedef struct dvm_generator_options {
  int batch_size;   /* sequences; 0 = 1 */
  int threads;      /* kernel threads of its VM; 0 = all cores */
  int max_length;   /* tokens per sequence, prompt included, at most context_length */
  int do_sample;    /* 0: greedy (the most likely token); 1: sample */
  int top_k;        /* sample among the k most likely tokens; 0 = all */
  double top_p;     /* ... then among the fewest whose probabilities reach p, in (0, 1] */
  double temperature;        /* > 0: logits are divided by it before the softmax */
  double repetition_penalty; /* > 0: a seen token's logit l becomes l / r (l > 0) or l * r */
  int64_t seed;     /* the sampler's seed (search.random_seed; -1 there: from the clock) */
  int kv_block_size; /* > 0: a paged cache of blocks of this many token rows; 0: contiguous */
  int64_t kv_budget; /* the paged cache's bytes (every layer's key and value pools, in blocks,
                        one of them where idle rows write); 0: room for every sequence at
                        max_length (the contiguous cache's bytes, rounded up to blocks, + 1) */
  int prefill_chunk; /* > 0: a prompt runs at most this many tokens per computation (chunked
                        prefill: decode steps go on between its chunks); 0: whole */
  int prefill_budget; /* > 0: prompt tokens per computation over all prompts: a prompt's next
                         chunk waits for a later one when it would pass the budget, unless it
                         is the computation's first (vLLM's max_num_batched_tokens, less the
                         decode rows); 0: every prompt's next chunk */
  dvm_dtype kv_dtype; /* DVM_F32 (the default): the cache in the model's dtype; DVM_F16: an f32 model's
                         keys and values kept as IEEE f16 (half the bytes; GroupQueryAttention converts
                         as it reads and writes). An f16 cache is paged (without kv_block_size, in
                         blocks of max_length rows: one per sequence) and needs what paging needs; a
                         model whose cache is f16 already is unaffected */
  int logprobs;       /* >= 0: each token chosen comes with its log-probability and this many most likely
                         alternatives' (at most DVM_GENERATOR_MAX_LOGPROBS), read with
                         dvm_generator_token_logprobs; negative (the default): none, at no cost */
} dvm_generator_options;

#define DVM_GENERATOR_MAX_LOGPROBS 20

DVM_API void dvm_generator_options_init(dvm_generator_options *opts);

/* A generator for module `m` (retained) and the model folder's
 * genai_config.json at `config_path`. Fails with a message naming the
 * field for a missing, unknown or out-of-range field of the file or of
 * opts, and for a module whose inputs and outputs are not the config's.
 * *out is destroyed with dvm_generator_destroy. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_create(dvm_module *m, const char *config_path,
                                                      const dvm_generator_options *opts, dvm_generator **out);
DVM_API void dvm_generator_destroy(dvm_generator *g); /* NULL is fine */

/* Reads and checks genai_config.json at config_path as
 * dvm_generator_create does, and writes its model.decoder.filename (the
 * ONNX file in the model folder) into file and its
 * model.decoder.outputs.logits (the output a generator reads the last
 * position of: dvmc_compile_options.last_position) into logits; each
 * buffer holds size bytes. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_model_file(const char *config_path, char *file, char *logits,
                                                          size_t size);

/* Appends counts[b] tokens (tokens[b], borrowed) to sequence b for each of
 * the batch's sequences; counts may differ and may be 0 (a sequence left
 * empty stays idle: it is done and its row only keeps the batch's shape
 * in a step). Fails, appending nothing, for a token outside the vocabulary,
 * a sequence that would pass max_length, or no tokens in any sequence. A
 * sequence that was done is no longer. The model runs on them at the next
 * dvm_generator_compute_logits or dvm_generator_next. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_append(dvm_generator *g, const int32_t *const *tokens,
                                                      const int *counts);

/* Runs the model on the tokens appended since it last ran: each sequence
 * with several new tokens alone (its own length, no padding; at most
 * prefill_chunk of them, when set: the rest at the next calls, and no
 * logits until its last; within prefill_budget over all of them, taking
 * turns), those with one new token together in one step. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_compute_logits(dvm_generator *g);

/* Sequence b's logits after its last token (vocab_size floats, borrowed
 * until the next call that runs the model), or NULL before any. */
DVM_API const float *dvm_generator_logits(const dvm_generator *g, int b);

/* Computes the logits if needed, then chooses the next token of each
 * sequence that is not done (repetition penalty, then greedy or
 * temperature, top-k and top-p sampling, as ONNX Runtime GenAI) and
 * appends it, unless it is an EOS token: that ends the sequence without
 * joining it (as in ONNX Runtime GenAI). A sequence is done after its EOS
 * or at max_length. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_next(dvm_generator *g);

/* Empties sequence b for a new one (a server's slot): no tokens, done,
 * the generator's search settings again. What its row of the cache holds
 * is overwritten as the next sequence's tokens run; the other sequences
 * go on as they were. */
DVM_API void dvm_generator_reset(dvm_generator *g, int b);

/* Sequence b's own search settings until its next reset: do_sample,
 * top_k, top_p, temperature, repetition_penalty, logprobs as in
 * dvm_generator_create's options (a negative field keeps the generator's;
 * max_length must be left negative), and a seed >= 0 gives the sequence a
 * random stream of its own (else it shares the generator's). Fails, naming
 * the field, for an out-of-range value, changing nothing. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_set_search(dvm_generator *g, int b, const dvm_generator_options *opts);

/* A chosen token's log-probability under the model's own distribution:
 * log_softmax of the logits the model gave, before the repetition
 * penalty, the EOS held back below min_length, temperature, top-k and
 * top-p (vLLM's default), and the k most likely tokens' (the sequence's
 * logprobs setting), most likely first, ties by the lower id. */
typedef struct dvm_generator_logprobs {
  int32_t token;  /* the token chosen (an EOS too, though it does not join the sequence) */
  float logprob;
  int k;
  int32_t top[DVM_GENERATOR_MAX_LOGPROBS];
  float top_logprob[DVM_GENERATOR_MAX_LOGPROBS];
} dvm_generator_logprobs;

/* Sequence b's entry for the token the last dvm_generator_next chose
 * (borrowed until the next call that changes the generator), or NULL when
 * that call chose none for it or its logprobs setting is negative. */
DVM_API const dvm_generator_logprobs *dvm_generator_token_logprobs(const dvm_generator *g, int b);

/* Sequence b's own random stream where it stands (four words of its
 * state): true, or false when it has none (no seed: it draws from the
 * generator's). With dvm_generator_set_rng a server that empties a
 * sequence and rebuilds it (a preemption) has it draw on from there. */
DVM_API bool dvm_generator_get_rng(const dvm_generator *g, int b, uint64_t state[4]);
/* Gives sequence b its own random stream at `state` (after
 * dvm_generator_set_search, which a seed there overrides, and until its
 * reset). Fails for an all-zero state, which the stream never reaches. */
DVM_API DVM_MUST_USE dvm_status *dvm_generator_set_rng(dvm_generator *g, int b, const uint64_t state[4]);

DVM_API bool dvm_generator_done(const dvm_generator *g);          /* every sequence */
DVM_API bool dvm_generator_seq_done(const dvm_generator *g, int b);
DVM_API int dvm_generator_batch_size(const dvm_generator *g);
DVM_API int dvm_generator_max_length(const dvm_generator *g);
DVM_API int dvm_generator_vocab_size(const dvm_generator *g);
/* Sequence b's tokens (borrowed until the next append or next). */
DVM_API const int32_t *dvm_generator_sequence(const dvm_generator *g, int b, int *length);
/* The paged cache. Paging needs a shared buffer (past_present_share_buffer)
 * whose pasts and presents only GroupQueryAttention reads and writes: a
 * generator asked for it checks that with one step at creation and, where
 * it does not hold, keeps the contiguous cache; dvm_generator_kv_note then
 * says why (else ""). A sequence takes its blocks when the model runs on
 * it (dvm_generator_compute_logits fails, changing no sequence, when none
 * is free); dvm_generator_kv_need says how many it will take, so that a
 * scheduler can make room first (reset a sequence: its blocks are free at
 * once). */
typedef struct dvm_generator_kv_stats {
  int block_size;        /* token rows per block; 0: not paged */
  int blocks;            /* the sequences' blocks (the pool's but the idle rows' one) */
  int free;              /* of them, held by no sequence */
  size_t block_bytes;    /* one block of every layer's key and value */
  dvm_dtype dtype;       /* the cache's elements: the model's dtype, or f16 (kv_dtype) */
  int64_t prefix_queries; /* prompt tokens looked up among full blocks held or freed */
  int64_t prefix_hits;    /* ... and found there (not computed again) */
} dvm_generator_kv_stats;

DVM_API void dvm_generator_get_kv_stats(const dvm_generator *g, dvm_generator_kv_stats *out);
DVM_API const char *dvm_generator_kv_note(const dvm_generator *g);
/* Free blocks sequence b takes at its next computation (0 when not paged). */
DVM_API int dvm_generator_kv_need(const dvm_generator *g, int b);

/* Its VM (borrowed), e.g. for dvm_vm_get_stats. */
DVM_API dvm_vm *dvm_generator_vm(const dvm_generator *g);

#ifdef __cplusplus
}
#endif
#endif
