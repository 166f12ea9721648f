/* The generator: sequences, the KV cache and the steps that run the
 * model, through libdvm's public API only.
 *
 * The cache is one key and one value tensor per layer, [batch, kv_heads,
 * max_length, head_size], made once. Row b of it, [1, kv_heads,
 * max_length, head_size], is contiguous, so a sequence can also run alone
 * on a view of its row. Every step binds the tensors it passes as past to
 * the present results (dvm_vm_invoke_bound): the attention kernel finds
 * present's memory is past's and writes only the new rows.
 *
 * A sequence with several new tokens (a prompt) runs alone on its row, at
 * its own length. Sequences with one new token run together: each row's
 * attention_mask holds ones up to its own length (zeros after), so each
 * attends to its own past. A row with nothing new in such a step feeds
 * the position after what it ran (a full one repeats its last), so that
 * no key or value a sequence holds is written again. Rows after
 * the last one with a new token stay out of the step (a view of the
 * cache's first rows), so a server's idle slots at the end cost nothing.
 *
 * A model without a shared buffer (past_present_share_buffer false: the
 * builder's f16 models, whose MultiHeadAttention concatenates) takes a
 * past as long as what its rows hold and makes a present one step longer.
 * The generator keeps the same cache and passes a copy of the rows' held
 * positions, all rows of the step holding as many, then keeps present's
 * new positions in the cache: the copy per step ONNX Runtime GenAI makes
 * in this mode. Rows holding different lengths run alone, and a sequence
 * with a past takes new tokens one per step (such a graph's mask is made
 * for a prompt or one token).
 *
 * A paged cache (kv_block_size) is one key and one value pool per layer,
 * [blocks, kv_heads, block_rows, head_size]; block ids are the same in
 * every layer's pools (kvblocks.c counts their references). Sequence b's
 * table row holds its blocks in order; a step passes the kernel paged
 * tensors [rows, kv_heads, max_length, head_size] over the pools and a
 * copy of the rows' tables in which a row with nothing new points only at
 * the last block, kept for them, so that it never writes a block that a
 * sequence holds (one that may be shared). A fresh sequence first finds
 * its prompt's full blocks in the prefix index and runs only the rest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "genimpl.h"
#include "kvblocks.h"

enum { IDS, MASK, POS, NINPUTS };

struct dvm_generator {
  dvm_generator_config c;
  dvm_vm *vm;
  int f, nparams, nresults;
  int param[NINPUTS];       /* parameter index of input_ids, attention_mask, position_ids (-1: none) */
  dvm_dtype idtype[NINPUTS];
  int *past, *present;      /* [2 * layers]: key of layer l at 2l, value at 2l + 1 */
  int logits_result;
  int batch, max_length, chunk, budget; /* prefill_chunk, prefill_budget */
  int prefill_next;         /* the sequence whose prompt goes first in the next computation */
  dvm_tensor **cache;       /* [2 * layers] */
  dvm_dtype cache_dt;       /* the dtype of the model's cache inputs (a pool's elements may be f16) */
  dvm_tensor **rows;        /* [2 * layers * batch]: row b of cache[i] at i * batch + b */
  int32_t *tokens;          /* [batch * max_length] */
  int *len, *ran;           /* tokens, and those the cache holds */
  bool *done, *has_logits;
  float *logits;            /* [batch * vocab] */
  int *work;                /* [vocab] */
  dvm_generator_rng rng;    /* shared by the sequences without their own */
  dvm_generator_config *search; /* [batch]: each sequence's search settings */
  dvm_generator_rng *rngs;  /* [batch]: ... and its own random stream, where own_rng[b] */
  bool *own_rng;
  dvm_generator_logprobs *lp; /* [batch]: the last token's, where has_lp[b] */
  bool *has_lp;
  float *pick;              /* [vocab]: a copy of the logits that choosing may change, for a row with logprobs */
  dvm_value *args, *bound, *results;
  /* the paged cache (bs > 0): cache[] holds its pools, of kb's blocks and
   * the idle rows' one (id trash) */
  int bs, nblk, trash;            /* rows per block, table entries per sequence */
  dvm_kv_blocks *kb;
  int32_t *table, *step;          /* [batch * nblk]: each sequence's blocks; what a step passes */
  int *held, *published;          /* [batch]: blocks held, of them the first published in the prefix index */
  uint64_t *chain;                /* [batch]: the hash of the last published */
  int64_t prefix_queries, prefix_hits;
  char note[256];                 /* why paging, asked for, is off */
};

void dvm_generator_options_init(dvm_generator_options *o) {
  *o = (dvm_generator_options){.max_length = -1, .do_sample = -1, .top_k = -1, .top_p = -1,
                         .temperature = -1, .repetition_penalty = -1, .seed = -1, .kv_block_size = 0, .kv_budget = 0,
                         .kv_dtype = DVM_F32, .logprobs = -1};
}

/* ---- creation ---- */

/* The options over the config's search settings, each checked. */
static dvm_status *apply_options(dvm_generator_config *c, const dvm_generator_options *o) {
  if (o->max_length >= 0) {
    if (o->max_length < 1 || o->max_length > c->context_length)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "max_length %d out of range: 1 to the model's context_length %d",
                            o->max_length, c->context_length);
    c->max_length = o->max_length;
  }
  if (o->do_sample >= 0) c->do_sample = o->do_sample != 0;
  if (o->top_k >= 0) c->top_k = o->top_k;
  if (o->top_p >= 0) {
    if (!(o->top_p <= 1)) return dvm_status_new(DVM_INVALID_ARGUMENT, "top_p %g out of range (0, 1]", o->top_p);
    c->top_p = o->top_p;
  }
  if (o->temperature >= 0) {
    if (!(o->temperature > 0)) return dvm_status_new(DVM_INVALID_ARGUMENT, "temperature must be > 0, got %g", o->temperature);
    c->temperature = o->temperature;
  }
  if (o->repetition_penalty >= 0) {
    if (!(o->repetition_penalty > 0))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "repetition_penalty must be > 0, got %g", o->repetition_penalty);
    c->repetition_penalty = o->repetition_penalty;
  }
  if (o->seed >= 0) c->seed = o->seed;
  if (o->logprobs >= 0) {
    if (o->logprobs > DVM_GENERATOR_MAX_LOGPROBS)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "logprobs %d out of range: at most %d", o->logprobs,
                            DVM_GENERATOR_MAX_LOGPROBS);
    c->logprobs = o->logprobs;
  }
  return NULL;
}

/* 2l + v when `name` is layer l's key (v = 0) or value (v = 1) name as
 * the formats key and value make them, else -1. */
static int layer_role(const dvm_generator_config *c, const char *key, const char *value, const char *name) {
  char buf[160];
  for (int l = 0; l < c->layers; l++)
    for (int v = 0; v < 2; v++) {
      snprintf(buf, sizeof buf, v ? value : key, l);
      if (strcmp(buf, name) == 0) return 2 * l + v;
    }
  return -1;
}

/* Which of the config's inputs `name` is: IDS, MASK, POS, or NINPUTS + 2l
 * (+ 1) for the past key (value) of layer l; -1: none. */
static int input_role(const dvm_generator_config *c, const char *name) {
  const char *fixed[NINPUTS] = {c->input_ids, c->attention_mask, c->position_ids};
  for (int i = 0; i < NINPUTS; i++)
    if (fixed[i][0] && strcmp(fixed[i], name) == 0) return i;
  int r = layer_role(c, c->past_key, c->past_value, name);
  return r < 0 ? -1 : NINPUTS + r;
}

/* 0: logits, 1 + 2l (+ 1): present key (value) of layer l, -1: neither. */
static int result_role(const dvm_generator_config *c, const char *name) {
  if (strcmp(c->logits, name) == 0) return 0;
  int r = layer_role(c, c->present_key, c->present_value, name);
  return r < 0 ? -1 : 1 + r;
}

/* Binds the function's parameters and results to their roles. */
static dvm_status *map_signature(dvm_generator *g, const dvm_module *m, dvm_dtype *cache_dt) {
  const dvm_generator_config *c = &g->c;
  int n = 2 * c->layers;
  for (int i = 0; i < NINPUTS; i++) g->param[i] = -1;
  for (int i = 0; i < n; i++) g->past[i] = g->present[i] = -1;
  g->logits_result = -1;
  *cache_dt = DVM_DTYPE_COUNT;
  for (int p = 0; p < g->nparams; p++) {
    dvm_param_info in;
    dvm_function_param(m, g->f, p, &in);
    int role = input_role(c, in.name);
    if (role < 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "model input \"%s\" is none of genai_config.json's inputs", in.name);
    if (role < NINPUTS) {
      if (in.kind != DVM_VAL_TENSOR || (in.dtype != DVM_I64 && in.dtype != DVM_I32) || in.rank != 2)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "model input \"%s\" must be an int64 or int32 [batch, n] tensor", in.name);
      g->param[role] = p;
      g->idtype[role] = in.dtype;
      continue;
    }
    if (in.kind != DVM_VAL_TENSOR || in.rank != 4 || (in.dims[1].symbol == NULL && in.dims[1].value != c->kv_heads) ||
        (in.dims[3].symbol == NULL && in.dims[3].value != c->head_size))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "model input \"%s\" must be a [batch, %d, length, %d] tensor "
                            "(num_key_value_heads, head_size)", in.name, c->kv_heads, c->head_size);
    if (*cache_dt != DVM_DTYPE_COUNT && in.dtype != *cache_dt)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "model input \"%s\" is %s, another cache input %s", in.name,
                            dvm_dtype_name(in.dtype), dvm_dtype_name(*cache_dt));
    *cache_dt = in.dtype;
    g->past[role - NINPUTS] = p;
  }
  for (int r = 0; r < g->nresults; r++) {
    dvm_param_info out;
    dvm_function_result(m, g->f, r, &out);
    int role = result_role(c, out.name);
    if (role < 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "model output \"%s\" is none of genai_config.json's outputs", out.name);
    if (role == 0) {
      if (out.kind != DVM_VAL_TENSOR || (out.dtype != DVM_F32 && out.dtype != DVM_F16 && out.dtype != DVM_BF16) ||
          out.rank < 2 || out.rank > 3)
        return dvm_status_new(DVM_UNIMPLEMENTED, "model output \"%s\" must be f32, f16 or bf16 logits [batch, (n,) vocab]",
                              out.name);
      g->logits_result = r;
    } else {
      g->present[role - 1] = r;
    }
  }
  const char *missing = g->param[IDS] < 0 ? c->input_ids : g->param[MASK] < 0 ? c->attention_mask
                      : g->logits_result < 0 ? c->logits : NULL;
  char buf[160];
  for (int i = 0; !missing && i < n; i++) {
    int v = i % 2;
    if (g->past[i] < 0) snprintf(buf, sizeof buf, v ? c->past_value : c->past_key, i / 2), missing = buf;
    else if (g->present[i] < 0) snprintf(buf, sizeof buf, v ? c->present_value : c->present_key, i / 2), missing = buf;
  }
  if (!missing && c->position_ids[0] && g->param[POS] < 0) missing = c->position_ids;
  if (missing) return dvm_status_new(DVM_INVALID_ARGUMENT, "the model has no \"%s\", which genai_config.json names", missing);
  return NULL;
}

/* The cache, zeroed, and its row views. */
static dvm_status *make_cache(dvm_generator *g, dvm_dtype dt) {
  const dvm_generator_config *c = &g->c;
  int n = 2 * c->layers;
  int64_t dims[4] = {g->batch, c->kv_heads, g->max_length, c->head_size};
  for (int i = 0; i < n; i++) {
    dvm_status *st = dvm_tensor_create(dt, 4, dims, &g->cache[i]);
    if (st) return st;
    memset(dvm_tensor_data(g->cache[i]), 0, dvm_tensor_nbytes(g->cache[i]));
    size_t row = dvm_tensor_nbytes(g->cache[i]) / (size_t)g->batch;
    for (int b = 0; b < g->batch; b++) {
      char *data = (char *)dvm_tensor_data(g->cache[i]) + (size_t)b * row;
      int64_t one[4] = {1, c->kv_heads, g->max_length, c->head_size};
      if ((st = dvm_tensor_wrap(dt, 4, one, data, NULL, NULL, &g->rows[i * g->batch + b]))) return st;
    }
  }
  return NULL;
}

/* The paged cache's pools of n blocks, zeroed, and its tables. */
static dvm_status *make_pools(dvm_generator *g, dvm_dtype dt, int bs, int n) {
  const dvm_generator_config *c = &g->c;
  size_t B = (size_t)g->batch;
  g->bs = bs, g->nblk = (g->max_length + bs - 1) / bs, g->trash = n - 1;
  g->table = malloc(2 * B * (size_t)g->nblk * sizeof *g->table);
  g->step = g->table ? g->table + B * (size_t)g->nblk : NULL;
  g->held = calloc(2 * B, sizeof *g->held);
  g->published = g->held ? g->held + B : NULL;
  g->chain = calloc(B, sizeof *g->chain);
  if (!g->table || !g->held || !g->chain) return dvm_status_new(DVM_OUT_OF_MEMORY, "the KV cache's block tables");
  for (size_t i = 0; i < B * (size_t)g->nblk; i++) g->table[i] = g->trash;
  dvm_status *st = dvm_kv_blocks_create(n - 1, bs, &g->kb);
  int64_t dims[4] = {n, c->kv_heads, bs, c->head_size};
  for (int i = 0; i < 2 * c->layers && !st; i++)
    if (!(st = dvm_tensor_create(dt, 4, dims, &g->cache[i])))
      memset(dvm_tensor_data(g->cache[i]), 0, dvm_tensor_nbytes(g->cache[i]));
  return st;
}

/* Back to the contiguous cache (paging does not apply): the pools and
 * tables go. */
static void drop_pools(dvm_generator *g) {
  for (int i = 0; i < 2 * g->c.layers; i++) dvm_tensor_release(g->cache[i]), g->cache[i] = NULL;
  dvm_kv_blocks_destroy(g->kb);
  free(g->table);
  free(g->held);
  free(g->chain);
  g->kb = NULL, g->table = g->step = NULL, g->held = g->published = NULL, g->chain = NULL, g->bs = 0;
}

static dvm_status *invoke(dvm_generator *g, int b0, int nb, int n, const int *from, const int *to, const bool *keep);

/* The cache: paged when asked and the model allows it (one step of an
 * idle row, which the VM refuses if anything but GroupQueryAttention
 * would see the pools), else contiguous, saying why in g->note. An f16
 * cache for an f32 model (kv_dtype) is always paged, in blocks of
 * max_length rows when no block size is given (one per sequence: the
 * contiguous cache's layout), and fails where paging does not apply. */
static dvm_status *choose_cache(dvm_generator *g, const dvm_generator_options *o, dvm_dtype dt) {
  const dvm_generator_config *c = &g->c;
  if (o->kv_block_size < 0 || o->kv_block_size > g->max_length || o->kv_budget < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "kv_block_size %d must be 0 (not paged) to max_length %d, kv_budget "
                          "%lld >= 0", o->kv_block_size, g->max_length, (long long)o->kv_budget);
  g->cache_dt = dt;
  int half = o->kv_dtype == DVM_F16 && dt == DVM_F32; /* an f16 model's cache is f16 already */
  dvm_dtype pool = half ? DVM_F16 : dt;
  if (!o->kv_block_size && !half) return make_cache(g, dt);
  int bs = o->kv_block_size ? o->kv_block_size : g->max_length;
  /* one block: every layer's key and value rows */
  int64_t block = 2LL * c->layers * c->kv_heads * bs * c->head_size * (int64_t)dvm_dtype_size(pool);
  /* by default every sequence can reach max_length, as in the contiguous cache */
  int64_t budget = o->kv_block_size && o->kv_budget ? o->kv_budget
                 : block * ((int64_t)g->batch * ((g->max_length + bs - 1) / bs) + 1);
  int64_t n = budget / block;
  if (!c->share_buffer) snprintf(g->note, sizeof g->note, "search.past_present_share_buffer is false");
  else if (n < 2 || n > INT32_MAX)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "kv_budget %lld bytes holds %lld KV blocks of %lld bytes (%d rows of "
                          "every layer's key and value); a paged cache needs 2 to %d", (long long)budget,
                          (long long)n, (long long)block, bs, INT32_MAX);
  dvm_status *st = g->note[0] ? NULL : make_pools(g, pool, bs, (int)n);
  if (!st && g->bs) { /* the probe: sequence 0 is empty, its row idle */
    int from = 0, to = 1;
    bool keep = false;
    if ((st = invoke(g, 0, 1, 1, &from, &to, &keep))) {
      snprintf(g->note, sizeof g->note, "%s", dvm_status_message(st));
      dvm_status_free(st);
      st = NULL;
    }
  }
  if (st || !g->note[0]) return st;
  if (half)
    return dvm_status_new(DVM_UNIMPLEMENTED, "kv_dtype f16 needs a cache that only GroupQueryAttention reads and "
                          "writes, in a shared buffer: %s", g->note);
  drop_pools(g);
  return make_cache(g, dt);
}

static void seed(int64_t value, const void *salt, dvm_generator_rng *rng) {
  uint64_t s = (uint64_t)value;
  if (value < 0) { /* GenAI's random_seed -1: a different stream each time */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)salt;
  }
  dvm_generator_rng_seed(rng, s);
}

dvm_status *dvm_generator_create(dvm_module *m, const char *config_path, const dvm_generator_options *opts,
                                 dvm_generator **out) {
  dvm_generator_options defaults;
  if (!opts) dvm_generator_options_init(&defaults), opts = &defaults;
  *out = NULL;
  if (opts->batch_size < 0 || opts->threads < 0 || opts->prefill_chunk < 0 || opts->prefill_budget < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "batch_size, threads, prefill_chunk and prefill_budget must be >= 0, got %d, %d, %d and %d",
                          opts->batch_size, opts->threads, opts->prefill_chunk, opts->prefill_budget);
  if (opts->kv_dtype != DVM_F32 && opts->kv_dtype != DVM_F16)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "kv_dtype %s: the KV cache is f32 or f16",
                          dvm_dtype_name(opts->kv_dtype));
  dvm_generator *g = calloc(1, sizeof *g);
  if (!g) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = dvm_generator_config_read(config_path, &g->c);
  if (!st) st = apply_options(&g->c, opts);
  if (st) {
    free(g);
    return st;
  }
  const dvm_generator_config *c = &g->c;
  g->batch = opts->batch_size ? opts->batch_size : 1;
  g->max_length = c->max_length;
  g->chunk = opts->prefill_chunk;
  g->budget = opts->prefill_budget;
  g->f = dvm_module_find_function(m, "main");
  if (g->f < 0) g->f = 0;
  if (dvm_module_function_count(m) == 0) st = dvm_status_new(DVM_INVALID_ARGUMENT, "the module has no function");
  if (st) {
    free(g);
    return st;
  }
  g->nparams = dvm_function_param_count(m, g->f);
  g->nresults = dvm_function_result_count(m, g->f);
  size_t B = (size_t)g->batch, L = (size_t)c->layers, V = (size_t)c->vocab_size;
  g->past = calloc(4 * L, sizeof *g->past);
  g->present = g->past ? g->past + 2 * L : NULL;
  g->cache = calloc(2 * L * (1 + B), sizeof *g->cache);
  g->rows = g->cache ? g->cache + 2 * L : NULL;
  g->tokens = calloc(B * (size_t)g->max_length, sizeof *g->tokens);
  g->len = calloc(2 * B, sizeof *g->len);
  g->ran = g->len ? g->len + B : NULL;
  g->done = calloc(2 * B, sizeof *g->done);
  g->has_logits = g->done ? g->done + B : NULL;
  g->logits = calloc(B * V, sizeof *g->logits);
  g->work = calloc(V, sizeof *g->work);
  g->search = calloc(B, sizeof *g->search);
  g->rngs = calloc(B, sizeof *g->rngs);
  g->own_rng = calloc(B, sizeof *g->own_rng);
  g->lp = calloc(B, sizeof *g->lp);
  g->has_lp = calloc(B, sizeof *g->has_lp);
  g->pick = calloc(V, sizeof *g->pick);
  g->args = calloc((size_t)(g->nparams + 2 * g->nresults) + 1, sizeof *g->args);
  g->bound = g->args ? g->args + g->nparams : NULL;
  g->results = g->bound ? g->bound + g->nresults : NULL;
  if (!g->past || !g->cache || !g->tokens || !g->len || !g->done || !g->logits || !g->work || !g->search ||
      !g->rngs || !g->own_rng || !g->lp || !g->has_lp || !g->pick || !g->args) {
    dvm_generator_destroy(g);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  dvm_dtype cache_dt;
  dvm_vm_options vo;
  dvm_vm_options_init(&vo);
  vo.threads = opts->threads;
  if ((st = map_signature(g, m, &cache_dt)) || (st = dvm_vm_create(m, &vo, &g->vm)) ||
      (st = choose_cache(g, opts, cache_dt))) {
    dvm_generator_destroy(g);
    return st;
  }
  for (size_t b = 0; b < B; b++) g->search[b] = g->c, g->done[b] = true; /* empty: idle until appended to */
  seed(g->c.seed, g, &g->rng);
  *out = g;
  return NULL;
}

dvm_status *dvm_generator_model_file(const char *config_path, char *file, char *logits, size_t size) {
  dvm_generator_config c;
  dvm_status *st = dvm_generator_config_read(config_path, &c);
  if (st) return st;
  if (strlen(c.filename) >= size || strlen(c.logits) >= size)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: model.decoder.%s is too long", config_path,
                          strlen(c.filename) >= size ? "filename" : "outputs.logits");
  memcpy(file, c.filename, strlen(c.filename) + 1);
  memcpy(logits, c.logits, strlen(c.logits) + 1);
  return NULL;
}

void dvm_generator_destroy(dvm_generator *g) {
  if (!g) return;
  if (g->bs) drop_pools(g);
  for (int i = 0; g->cache && i < 2 * g->c.layers * (1 + g->batch); i++) dvm_tensor_release(g->cache[i]);
  dvm_vm_destroy(g->vm);
  free(g->past);
  free(g->cache);
  free(g->tokens);
  free(g->len);
  free(g->done);
  free(g->logits);
  free(g->work);
  free(g->search);
  free(g->rngs);
  free(g->own_rng);
  free(g->lp);
  free(g->has_lp);
  free(g->pick);
  free(g->args);
  free(g);
}

/* ---- steps ---- */

/* An int tensor [rows, cols] of dtype dt from int64 values. */
static dvm_status *int_tensor(dvm_dtype dt, int64_t rows, int64_t cols, const int64_t *v, dvm_tensor **out) {
  int64_t dims[2] = {rows, cols};
  dvm_status *st = dvm_tensor_create(dt, 2, dims, out);
  if (st) return st;
  void *d = dvm_tensor_data(*out);
  for (int64_t i = 0; i < rows * cols; i++)
    if (dt == DVM_I64) ((int64_t *)d)[i] = v[i];
    else ((int32_t *)d)[i] = (int32_t)v[i];
  return NULL;
}

/* Without a shared buffer: layer i's past for rows [b0, b0 + nb), each
 * holding P positions, as a tensor of its own [nb, kv_heads, P, head]. */
static dvm_status *past_copy(dvm_generator *g, int i, int b0, int nb, int P, dvm_tensor **out) {
  const dvm_generator_config *c = &g->c;
  const dvm_tensor *cache = g->cache[i];
  int64_t dims[4] = {nb, c->kv_heads, P, c->head_size};
  dvm_status *st = dvm_tensor_create(dvm_tensor_dtype(cache), 4, dims, out);
  if (st) return st;
  size_t pos = (size_t)c->head_size * dvm_dtype_size(dvm_tensor_dtype(cache)), n = (size_t)P * pos;
  char *dst = dvm_tensor_data(*out);
  for (int b = 0; b < nb; b++)
    for (int h = 0; h < c->kv_heads; h++, dst += n)
      memcpy(dst, (const char *)dvm_tensor_data(g->rows[i * g->batch + b0 + b]) + (size_t)h * g->max_length * pos, n);
  return NULL;
}

/* ... and present's positions [P, P + n) of those rows into the cache. */
static dvm_status *present_keep(dvm_generator *g, int i, int b0, int nb, int P, int n, const dvm_tensor *t) {
  const dvm_generator_config *c = &g->c;
  const int64_t *d = dvm_tensor_dims(t);
  if (dvm_tensor_rank(t) != 4 || d[0] != nb || d[1] != c->kv_heads || d[2] != P + n || d[3] != c->head_size ||
      dvm_tensor_dtype(t) != dvm_tensor_dtype(g->cache[i]))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "a present of the model is not [%d, %d, %d, %d] %s", nb, c->kv_heads,
                          P + n, c->head_size, dvm_dtype_name(dvm_tensor_dtype(g->cache[i])));
  size_t pos = (size_t)c->head_size * dvm_dtype_size(dvm_tensor_dtype(t));
  const char *src = dvm_tensor_data(t);
  for (int b = 0; b < nb; b++)
    for (int h = 0; h < c->kv_heads; h++, src += (size_t)(P + n) * pos)
      memcpy((char *)dvm_tensor_data(g->rows[i * g->batch + b0 + b]) + ((size_t)h * g->max_length + (size_t)P) * pos,
             src + (size_t)P * pos, (size_t)n * pos);
  return NULL;
}

/* One invocation over rows [b0, b0 + nb) (all of them, or one alone):
 * row b feeds tokens [from[b], to[b]) of its sequence, n = the most of
 * them; a row feeds to - from tokens, all rows the same count. Each row's
 * logits after its last token are kept when keep[b]. */
static dvm_status *invoke(dvm_generator *g, int b0, int nb, int n, const int *from, const int *to, const bool *keep) {
  const dvm_generator_config *c = &g->c;
  int T = 0;
  for (int b = 0; b < nb; b++)
    if (to[b] > T) T = to[b];
  int64_t *ids = malloc(((size_t)nb * (2 * (size_t)n + (size_t)T)) * sizeof *ids), *pos = ids + (size_t)nb * n,
          *mask = pos + (size_t)nb * n;
  if (!ids) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int b = 0; b < nb; b++) {
    for (int i = 0; i < n; i++) {
      int p = from[b] + i; /* an idle row's position past its tokens feeds id 0 */
      ids[b * n + i] = p < g->len[b0 + b] ? g->tokens[(size_t)(b0 + b) * g->max_length + p] : 0;
      pos[b * n + i] = from[b] + i;
    }
    for (int t = 0; t < T; t++) mask[(size_t)b * T + t] = t < to[b];
  }
  dvm_tensor *in[NINPUTS] = {NULL, NULL, NULL};
  const int64_t *vals[NINPUTS] = {ids, mask, pos};
  dvm_status *st = NULL;
  for (int k = 0; k < NINPUTS && !st; k++)
    if (g->param[k] >= 0) st = int_tensor(g->idtype[k], nb, k == MASK ? T : n, vals[k], &in[k]);
  free(ids);
  for (int k = 0; k < NINPUTS; k++)
    if (g->param[k] >= 0) g->args[g->param[k]] = dvm_value_tensor(in[k]);
  for (int r = 0; r < g->nresults; r++) g->bound[r] = (dvm_value){.kind = DVM_VAL_NONE};
  int P = from[0]; /* without a shared buffer, what every row holds */
  for (int b = 0; g->bs && b < nb; b++) /* an idle row writes only the trash block */
    for (int k = 0; k < g->nblk; k++)
      g->step[(size_t)(b0 + b) * g->nblk + k] = keep[b] ? g->table[(size_t)(b0 + b) * g->nblk + k] : g->trash;
  for (int i = 0; i < 2 * c->layers && !st; i++) {
    dvm_tensor *t = g->bs || nb == g->batch ? g->cache[i] : g->rows[i * g->batch + b0];
    if (g->bs) {
      int64_t dims[4] = {nb, c->kv_heads, g->max_length, c->head_size};
      dvm_tensor_pages pages = {g->step + (size_t)b0 * g->nblk, g->nblk, g->bs, g->trash + 1, dvm_tensor_dtype(t)};
      if ((st = dvm_tensor_wrap_paged(g->cache_dt, dims, dvm_tensor_data(t), &pages, &t))) break;
      g->args[g->past[i]] = g->bound[g->present[i]] = dvm_value_tensor(t);
    } else if (c->share_buffer && nb > 1 && nb < g->batch) { /* the first nb rows: a view of the cache */
      int64_t dims[4] = {nb, c->kv_heads, g->max_length, c->head_size};
      if ((st = dvm_tensor_wrap(dvm_tensor_dtype(t), 4, dims, dvm_tensor_data(t), NULL, NULL, &t))) break;
      g->args[g->past[i]] = g->bound[g->present[i]] = dvm_value_tensor(t);
    } else if (c->share_buffer) {
      dvm_tensor_retain(t);
      g->args[g->past[i]] = g->bound[g->present[i]] = dvm_value_tensor(t);
    } else if (!(st = past_copy(g, i, b0, nb, P, &t))) {
      g->args[g->past[i]] = dvm_value_tensor(t);
    }
  }
  if (!st) st = dvm_vm_invoke_bound(g->vm, g->f, g->args, g->nparams, g->bound, g->results, g->nresults);
  for (int k = 0; k < NINPUTS; k++) dvm_tensor_release(in[k]);
  for (int i = 0; i < 2 * c->layers; i++) {
    dvm_value *v = &g->args[g->past[i]];
    if (!st && !c->share_buffer) st = present_keep(g, i, b0, nb, P, n, g->results[g->present[i]].u.tensor);
    if (v->kind == DVM_VAL_TENSOR) dvm_tensor_release(v->u.tensor);
    *v = (dvm_value){.kind = DVM_VAL_NONE};
  }
  if (st) {
    for (int r = 0; r < g->nresults; r++) dvm_value_clear(&g->results[r]);
    return st;
  }
  const dvm_tensor *lt = g->results[g->logits_result].u.tensor;
  const int64_t *ld = dvm_tensor_dims(lt);
  int rank = dvm_tensor_rank(lt);
  int64_t s = rank == 3 ? ld[1] : 1;
  if (ld[0] != nb || ld[rank - 1] != c->vocab_size || s < 1)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "logits [%lld, ..., %lld] for %d sequences and a vocabulary of %d",
                        (long long)ld[0], (long long)ld[rank - 1], nb, c->vocab_size);
  const char *L = dvm_tensor_data(lt);
  size_t row = (size_t)c->vocab_size * dvm_dtype_size(dvm_tensor_dtype(lt));
  for (int b = 0; !st && b < nb; b++) {
    if (!keep[b]) continue;
    dvm_floats_to_f32(dvm_tensor_dtype(lt), L + ((size_t)b * s + (size_t)(s - 1)) * row,
                      g->logits + (size_t)(b0 + b) * c->vocab_size, (size_t)c->vocab_size);
    g->has_logits[b0 + b] = true;
  }
  for (int r = 0; r < g->nresults; r++) dvm_value_clear(&g->results[r]);
  return st;
}

/* ---- the paged cache's blocks ---- */

/* How many of fresh sequence b's prompt blocks the prefix index holds (all
 * but the last token's rows: it must run for the logits) into ids (may
 * be NULL), their last hash, and how many of them are free. */
static int prefix_blocks(const dvm_generator *g, int b, int32_t *ids, uint64_t *hash, int *revived) {
  const int32_t *seq = g->tokens + (size_t)b * g->max_length;
  uint64_t h = 0;
  int k = 0, parent = -1;
  for (; k < (g->len[b] - 1) / g->bs; k++) {
    uint64_t hk = dvm_kv_blocks_hash(h, seq + (size_t)k * g->bs, g->bs);
    int id = dvm_kv_blocks_find(g->kb, hk, parent, seq + (size_t)k * g->bs);
    if (id < 0) break;
    if (ids) ids[k] = id;
    *revived += dvm_kv_blocks_refs(g->kb, id) == 0;
    h = hk, parent = id;
  }
  *hash = h;
  return k;
}

int dvm_generator_kv_need(const dvm_generator *g, int b) {
  if (!g->bs || b < 0 || b >= g->batch || g->len[b] <= g->ran[b]) return 0;
  int held = g->held[b], revived = 0;
  uint64_t h;
  if (!g->ran[b] && !held) held = prefix_blocks(g, b, NULL, &h, &revived); /* a free one found leaves the free */
  return (g->len[b] + g->bs - 1) / g->bs - held + revived;
}

/* Each sequence's blocks for the rows it is about to run: a fresh one's
 * prompt prefix from the index (those rows do not run again), then free
 * blocks. Fails, taking none, when there are not enough. */
static dvm_status *take_blocks(dvm_generator *g) {
  int need = 0;
  for (int b = 0; b < g->batch; b++) need += dvm_generator_kv_need(g, b);
  if (need > dvm_kv_blocks_free(g->kb))
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "the KV cache has %d free blocks of %d rows, the sequences need %d",
                          dvm_kv_blocks_free(g->kb), g->bs, need);
  for (int b = 0; b < g->batch; b++) {
    if (g->len[b] <= g->ran[b]) continue;
    int32_t *tab = g->table + (size_t)b * g->nblk;
    if (!g->ran[b] && !g->held[b]) {
      int revived = 0, k = prefix_blocks(g, b, tab, &g->chain[b], &revived);
      for (int i = 0; i < k; i++) dvm_kv_blocks_retain(g->kb, tab[i]);
      g->held[b] = g->published[b] = k;
      g->ran[b] = k * g->bs;
      g->prefix_queries += g->len[b];
      g->prefix_hits += g->ran[b];
    }
    while (g->held[b] * g->bs < g->len[b]) tab[g->held[b]++] = dvm_kv_blocks_take(g->kb);
  }
  return NULL;
}

/* Sequence b's blocks that its rows have filled, into the prefix index. */
static void publish_blocks(dvm_generator *g, int b) {
  const int32_t *seq = g->tokens + (size_t)b * g->max_length, *tab = g->table + (size_t)b * g->nblk;
  for (int k = g->published[b]; (k + 1) * g->bs <= g->ran[b]; k = ++g->published[b]) {
    g->chain[b] = dvm_kv_blocks_hash(g->chain[b], seq + (size_t)k * g->bs, g->bs);
    dvm_kv_blocks_publish(g->kb, tab[k], g->chain[b], k ? tab[k - 1] : -1, seq + (size_t)k * g->bs);
  }
}

void dvm_generator_get_kv_stats(const dvm_generator *g, dvm_generator_kv_stats *out) {
  *out = (dvm_generator_kv_stats){.block_size = g->bs, .prefix_queries = g->prefix_queries,
                                  .prefix_hits = g->prefix_hits};
  out->dtype = g->bs ? dvm_tensor_dtype(g->cache[0]) : g->cache_dt;
  if (!g->bs) return;
  out->blocks = dvm_kv_blocks_count(g->kb);
  out->free = dvm_kv_blocks_free(g->kb);
  out->block_bytes = 2 * (size_t)g->c.layers * dvm_tensor_nbytes(g->cache[0]) / (size_t)(g->trash + 1);
}

const char *dvm_generator_kv_note(const dvm_generator *g) { return g->note; }

dvm_status *dvm_generator_compute_logits(dvm_generator *g) {
  int B = g->batch, step = 0;
  int *from = malloc(2 * (size_t)B * sizeof *from), *to = from + B;
  bool *keep = malloc((size_t)B * sizeof *keep);
  dvm_status *st = from && keep ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (!st && g->bs) st = take_blocks(g);
  bool share = g->c.share_buffer;
  /* prompts take turns at the budget: the first one left waiting goes first next time */
  int spent = 0, waiting = -1;
  for (int i = 0; i < B && !st; i++) {
    int b = (g->prefill_next + i) % B;
    /* without a shared buffer, a sequence with a past steps one token at a time */
    while (!st && g->len[b] - g->ran[b] >= 2 && !share && g->ran[b] > 0) {
      from[b] = g->ran[b], to[b] = g->ran[b] + 1, keep[b] = true;
      if (!(st = invoke(g, b, 1, 1, from + b, to + b, keep + b))) g->ran[b]++;
    }
    if (!st && g->len[b] - g->ran[b] >= 2) { /* a prompt, or its next chunk */
      int n = g->chunk && g->len[b] - g->ran[b] > g->chunk ? g->chunk : g->len[b] - g->ran[b];
      if (g->budget && spent && spent + n > g->budget) { /* whole chunks only: where they end stays the same */
        if (waiting < 0) waiting = b;
        continue;
      }
      spent += n;
      from[b] = g->ran[b], to[b] = g->ran[b] + n, keep[b] = true;
      if (!(st = invoke(g, b, 1, n, from + b, to + b, keep + b))) g->ran[b] = to[b];
      g->has_logits[b] &= g->ran[b] == g->len[b]; /* a chunk's last row is not the prompt's */
    }
    step |= g->len[b] - g->ran[b] == 1;
  }
  if (waiting >= 0) g->prefill_next = waiting;
  if (step && !st) {
    bool together = true;
    for (int b = 0; b < B; b++) {
      keep[b] = g->len[b] - g->ran[b] == 1; /* not a prompt between its chunks */
      /* A row with nothing new feeds the position after what it ran, whose
       * key and value its next token (or chunk) writes again: rewriting a
       * held one would put the decode step's arithmetic where its prompt's
       * was, which differs in the last bits. A full row (or one without a
       * shared buffer, whose present rows of idle rows are not kept)
       * repeats its last position; an empty row feeds position 0. */
      if (keep[b]) to[b] = g->len[b];
      else if (share && g->ran[b] < g->max_length) to[b] = g->ran[b] + 1;
      else to[b] = g->ran[b] ? g->ran[b] : 1;
      from[b] = to[b] - 1;
      together &= share || from[b] == from[0];
    }
    for (int b = 0; b < B && !st && !together; b++) /* rows holding different lengths: each alone */
      if (keep[b]) st = invoke(g, b, 1, 1, from + b, to + b, keep + b);
    int rows = B; /* rows past the last with a new token (idle or done) stay out of the step */
    while (rows > 1 && !keep[rows - 1]) rows--;
    if (!st && together) st = invoke(g, 0, rows, 1, from, to, keep);
    if (!st)
      for (int b = 0; b < B; b++) g->ran[b] += keep[b];
  }
  for (int b = 0; b < B && g->bs; b++) publish_blocks(g, b);
  free(from);
  free(keep);
  if (st && !share) /* a graph made for a shared buffer fails on a past as long as what is held */
    return dvm_status_annotate(st, "generator step (search.past_present_share_buffer is false: each past is as long "
                                   "as what its sequence holds)");
  return st ? dvm_status_annotate(st, "generator step") : NULL;
}

/* ---- sequences ---- */

static bool is_eos(const dvm_generator_config *c, int32_t t) {
  for (int e = 0; e < c->neos; e++)
    if (c->eos[e] == t) return true;
  return false;
}

dvm_status *dvm_generator_append(dvm_generator *g, const int32_t *const *tokens, const int *counts) {
  const dvm_generator_config *c = &g->c;
  for (int b = 0; b < g->batch; b++) {
    if (counts[b] < 0) return dvm_status_new(DVM_INVALID_ARGUMENT, "sequence %d: %d tokens", b, counts[b]);
    if (counts[b] > g->max_length - g->len[b])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "sequence %d: %d + %d tokens exceed max_length %d", b, g->len[b],
                            counts[b], g->max_length);
    for (int i = 0; i < counts[b]; i++)
      if (tokens[b][i] < 0 || tokens[b][i] >= c->vocab_size)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "sequence %d: token %d (%d) is outside the vocabulary (0 to %d)", b, i,
                              tokens[b][i], c->vocab_size - 1);
  }
  bool any = false;
  for (int b = 0; b < g->batch; b++) any |= g->len[b] + counts[b] > 0;
  if (!any) return dvm_status_new(DVM_INVALID_ARGUMENT, "no tokens in any sequence");
  for (int b = 0; b < g->batch; b++) {
    if (!counts[b]) continue;
    memcpy(g->tokens + (size_t)b * g->max_length + g->len[b], tokens[b], (size_t)counts[b] * sizeof **tokens);
    g->len[b] += counts[b];
    g->done[b] = g->len[b] >= g->max_length;
    g->has_logits[b] = false;
  }
  return NULL;
}

const float *dvm_generator_logits(const dvm_generator *g, int b) {
  return b >= 0 && b < g->batch && g->has_logits[b] ? g->logits + (size_t)b * g->c.vocab_size : NULL;
}

dvm_status *dvm_generator_next(dvm_generator *g) {
  if (dvm_generator_done(g)) return dvm_status_new(DVM_FAILED_PRECONDITION, "every sequence is done");
  dvm_status *st = dvm_generator_compute_logits(g);
  if (st) return st;
  int vocab = g->c.vocab_size;
  for (int b = 0; b < g->batch; b++) {
    g->has_lp[b] = false;
    if (g->done[b] || !g->has_logits[b]) continue; /* done, or a prompt between its chunks */
    int32_t *seq = g->tokens + (size_t)b * g->max_length;
    float *l = g->logits + (size_t)b * vocab, *pick = l;
    const dvm_generator_config *c = &g->search[b];
    double lse = 0;
    if (c->logprobs >= 0) { /* the raw logits' log-softmax; the choice works on a copy */
      lse = dvm_generator_logprobs_top(l, vocab, c->logprobs, g->work, &g->lp[b]);
      pick = memcpy(g->pick, l, (size_t)vocab * sizeof *l);
    }
    int32_t t = dvm_generator_choose(c, pick, seq, g->len[b], g->work, g->own_rng[b] ? &g->rngs[b] : &g->rng);
    if (c->logprobs >= 0) {
      g->lp[b].token = t;
      g->lp[b].logprob = (float)(l[t] - lse);
      g->has_lp[b] = true;
    }
    g->has_logits[b] = false;
    if (is_eos(&g->c, t)) { /* ends the sequence, and is not part of it (as in GenAI) */
      g->done[b] = true;
      continue;
    }
    seq[g->len[b]++] = t;
    g->done[b] = g->len[b] >= g->max_length;
  }
  return NULL;
}

const dvm_generator_logprobs *dvm_generator_token_logprobs(const dvm_generator *g, int b) {
  return b >= 0 && b < g->batch && g->has_lp[b] ? &g->lp[b] : NULL;
}

bool dvm_generator_get_rng(const dvm_generator *g, int b, uint64_t state[4]) {
  if (b < 0 || b >= g->batch || !g->own_rng[b]) return false;
  memcpy(state, g->rngs[b].s, sizeof g->rngs[b].s);
  return true;
}

dvm_status *dvm_generator_set_rng(dvm_generator *g, int b, const uint64_t state[4]) {
  if (b < 0 || b >= g->batch)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "sequence %d of a batch of %d", b, g->batch);
  if (!(state[0] | state[1] | state[2] | state[3]))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "sequence %d: an all-zero random state", b);
  memcpy(g->rngs[b].s, state, sizeof g->rngs[b].s);
  g->own_rng[b] = true;
  return NULL;
}

void dvm_generator_reset(dvm_generator *g, int b) {
  if (b < 0 || b >= g->batch) return;
  for (int k = 0; g->bs && k < g->held[b]; k++) {
    dvm_kv_blocks_release(g->kb, g->table[(size_t)b * g->nblk + k]);
    g->table[(size_t)b * g->nblk + k] = g->trash;
  }
  if (g->bs) g->held[b] = g->published[b] = 0, g->chain[b] = 0;
  g->len[b] = g->ran[b] = 0;
  g->done[b] = true;
  g->has_logits[b] = g->has_lp[b] = false;
  g->search[b] = g->c;
  g->own_rng[b] = false;
}

dvm_status *dvm_generator_set_search(dvm_generator *g, int b, const dvm_generator_options *o) {
  if (b < 0 || b >= g->batch)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "sequence %d of a batch of %d", b, g->batch);
  if (o->max_length >= 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "max_length is the generator's, not a sequence's");
  dvm_generator_config c = g->search[b];
  dvm_status *st = apply_options(&c, o);
  if (st) return dvm_status_annotate(st, "sequence %d", b);
  g->search[b] = c;
  if (o->seed >= 0) {
    seed(o->seed, g, &g->rngs[b]);
    g->own_rng[b] = true;
  }
  return NULL;
}

bool dvm_generator_done(const dvm_generator *g) {
  for (int b = 0; b < g->batch; b++)
    if (!g->done[b]) return false;
  return true;
}

bool dvm_generator_seq_done(const dvm_generator *g, int b) { return b < 0 || b >= g->batch || g->done[b]; }
int dvm_generator_batch_size(const dvm_generator *g) { return g->batch; }
int dvm_generator_max_length(const dvm_generator *g) { return g->max_length; }
int dvm_generator_vocab_size(const dvm_generator *g) { return g->c.vocab_size; }
dvm_vm *dvm_generator_vm(const dvm_generator *g) { return g->vm; }

const int32_t *dvm_generator_sequence(const dvm_generator *g, int b, int *length) {
  if (b < 0 || b >= g->batch) return NULL;
  *length = g->len[b];
  return g->tokens + (size_t)b * g->max_length;
}
