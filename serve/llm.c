/* A generation model's engine: one thread over one dvm_generator whose
 * batch rows are slots. Each iteration it frees the slots of cancelled
 * requests, admits waiting requests into free slots (FIFO; with
 * continuous_batching = 0 only when no sequence runs), runs one
 * dvm_generator_next over every running sequence (a new prompt's prefill
 * alone at its length, then one decode step of all rows, each at its own
 * length), hands each new token to its request and frees the slot of a
 * sequence that ended (EOS, max_tokens, max_length). A request that comes
 * while a step runs joins at the next one; nothing is padded to the
 * longest sequence.
 *
 * With a paged cache (kv_block_size) a slot holds KV blocks only for the
 * rows its sequence has. Before a step, while the running sequences need
 * more blocks than are free, the most recently admitted one is preempted
 * (vLLM's recompute policy): its slot and blocks are freed and its request
 * goes back to the head of the queue; admitted again, it runs its prompt
 * and the tokens it had made as one prompt and goes on from there, so its
 * client sees no token twice, its random stream where it stood (a seeded
 * sampled sequence makes what it makes alone). A waiting request is
 * admitted only when its blocks and the running ones' fit. */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

struct dvms_llm {
  dvm_generator *gen;
  pthread_mutex_t mu;
  pthread_cond_t work;
  pthread_t thread;
  dvms_gen *head, *tail; /* waiting, oldest first */
  int64_t waiting;
  dvms_gen **slots;      /* [max_running]: the request in each row, or NULL */
  int running, nslots, stop;
  dvms_model *m;
  int32_t *seq;          /* [max_length]: a readmitted request's prompt and tokens */
  int64_t admissions;
  dvms_kv_metrics kv;    /* blocks, block_bytes, peak, preemptions; the rest from the generator */
};

static void publish(dvms_llm *l) {
  dvms_metrics_gen_state(l->m->metrics, l->m->name, l->running, l->waiting);
  dvm_generator_kv_stats st;
  dvm_generator_get_kv_stats(l->gen, &st);
  if (!st.block_size) return;
  l->kv.used = st.blocks - st.free;
  l->kv.peak = l->kv.used > l->kv.peak ? l->kv.used : l->kv.peak;
  l->kv.prefix_queries = (uint64_t)st.prefix_queries, l->kv.prefix_hits = (uint64_t)st.prefix_hits;
  dvms_metrics_gen_kv(l->m->metrics, l->m->name, &l->kv);
}

/* The blocks the running sequences take at the next step. */
static int running_need(const dvms_llm *l) {
  int need = 0;
  for (int s = 0; s < l->nslots; s++)
    if (l->slots[s]) need += dvm_generator_kv_need(l->gen, s);
  return need;
}

static int free_blocks(const dvms_llm *l) {
  dvm_generator_kv_stats st;
  dvm_generator_get_kv_stats(l->gen, &st);
  return st.free;
}

/* Ends g (l->mu held): its slot, if any, is free again. */
static void finish(dvms_llm *l, dvms_gen *g, int why, dvm_status *st) {
  if (g->state == DVMS_GEN_RUNNING) {
    dvm_generator_reset(l->gen, g->slot);
    l->slots[g->slot] = NULL;
    l->running--;
  }
  g->state = DVMS_GEN_DONE;
  g->finish = why;
  g->status = st;
  pthread_cond_broadcast(&g->cond);
}

/* The newest running sequence back to the head of the queue, its slot
 * and blocks free (l->mu held). */
static void preempt(dvms_llm *l) {
  int s = -1;
  for (int i = 0; i < l->nslots; i++)
    if (l->slots[i] && (s < 0 || l->slots[i]->admitted > l->slots[s]->admitted)) s = i;
  dvms_gen *g = l->slots[s];
  g->has_rng = dvm_generator_get_rng(l->gen, s, g->rng);
  dvm_generator_reset(l->gen, s);
  l->slots[s] = NULL;
  l->running--;
  g->state = DVMS_GEN_QUEUED;
  g->next = l->head;
  l->head = g;
  if (!l->tail) l->tail = g;
  l->waiting++;
  l->kv.preemptions++;
}

/* Puts the oldest waiting request into free slot s (l->mu held): its
 * prompt, and the tokens it made before a preemption. Returns 0, leaving
 * it waiting, when its blocks and the running sequences' do not fit. */
static int admit(dvms_llm *l, int s) {
  dvms_gen *g = l->head;
  const int32_t *toks[256] = {0}; /* max_running is at most 256 (config.c) */
  int counts[256] = {0};
  toks[s] = g->prompt;
  counts[s] = g->nprompt + g->ntokens;
  if (g->ntokens) {
    memcpy(l->seq, g->prompt, (size_t)g->nprompt * sizeof *l->seq);
    memcpy(l->seq + g->nprompt, g->tokens, (size_t)g->ntokens * sizeof *l->seq);
    toks[s] = l->seq;
  }
  dvm_generator_reset(l->gen, s);
  int need = running_need(l);
  dvm_status *st = dvm_generator_set_search(l->gen, s, &g->search);
  if (!st && g->has_rng) st = dvm_generator_set_rng(l->gen, s, g->rng);
  if (!st) st = dvm_generator_append(l->gen, toks, counts);
  if (!st && need + dvm_generator_kv_need(l->gen, s) > free_blocks(l)) {
    dvm_generator_reset(l->gen, s);
    return 0;
  }
  l->head = g->next;
  if (!l->head) l->tail = NULL;
  g->next = NULL;
  l->waiting--;
  if (st) {
    finish(l, g, DVMS_FINISH_ERROR, st);
    return 1;
  }
  g->state = DVMS_GEN_RUNNING;
  g->slot = s;
  g->admitted = l->admissions++;
  l->slots[s] = g;
  l->running++;
  if (!g->ntokens) dvms_metrics_gen_prompt(l->m->metrics, l->m->name, g->nprompt, -1);
  return 1;
}

/* After a step (l->mu held): each running sequence's new token to its
 * request, and the end of those that ended (a cancelled one ends at the
 * next iteration's start). */
static void deliver(dvms_llm *l, const int *before, double now) {
  for (int s = 0; s < l->nslots; s++) {
    dvms_gen *g = l->slots[s];
    if (!g) continue;
    int len;
    const int32_t *seq = dvm_generator_sequence(l->gen, s, &len);
    if (len > before[s]) {
      const dvm_generator_logprobs *lp = dvm_generator_token_logprobs(l->gen, s);
      if (g->logprobs && lp) g->logprobs[g->ntokens] = *lp;
      g->tokens[g->ntokens++] = seq[len - 1];
      if (g->ntokens == 1) dvms_metrics_gen_prompt(l->m->metrics, l->m->name, 0, now - g->enqueued), g->first = now;
      else dvms_metrics_gen_token(l->m->metrics, l->m->name, now - g->last);
      g->last = now;
      pthread_cond_broadcast(&g->cond);
    }
    if (g->ntokens >= g->max_tokens) finish(l, g, DVMS_FINISH_LENGTH, NULL);
    else if (dvm_generator_seq_done(l->gen, s))
      finish(l, g, len >= dvm_generator_max_length(l->gen) ? DVMS_FINISH_LENGTH : DVMS_FINISH_EOS, NULL);
  }
}

static void *engine(void *arg) {
  dvms_llm *l = arg;
  int *before = calloc((size_t)l->nslots, sizeof *before);
  pthread_mutex_lock(&l->mu);
  for (;;) {
    for (int s = 0; s < l->nslots; s++)
      if (l->slots[s] && l->slots[s]->cancel) finish(l, l->slots[s], DVMS_FINISH_CANCELLED, NULL);
    while (l->running && running_need(l) > free_blocks(l)) preempt(l);
    int one_at_a_time = !l->m->cfg.continuous_batching;
    for (int s = 0; s < l->nslots && l->head && !(one_at_a_time && l->running); s++)
      if (!l->slots[s] && !admit(l, s)) break;
    publish(l);
    if (!l->running) {
      if (l->stop && !l->head) break;
      if (!l->head) pthread_cond_wait(&l->work, &l->mu);
      continue;
    }
    for (int s = 0; s < l->nslots; s++) dvm_generator_sequence(l->gen, s, &before[s]);
    int running = l->running;
    pthread_mutex_unlock(&l->mu);
    double t0 = dvms_now();
    dvm_status *st = before ? dvm_generator_next(l->gen) : dvm_status_new(DVM_OUT_OF_MEMORY, "the engine's state");
    double now = dvms_now();
    dvms_metrics_batch(l->m->metrics, l->m->name, running, now - t0, 0, 0); /* sequences per step */
    pthread_mutex_lock(&l->mu);
    if (st) { /* every running sequence fails with it */
      for (int s = 0; s < l->nslots; s++)
        if (l->slots[s]) finish(l, l->slots[s], DVMS_FINISH_ERROR, dvm_status_new(dvm_status_code(st), "%s",
                                                                                  dvm_status_message(st)));
      dvm_status_free(st);
      if (!before) break;
      continue;
    }
    deliver(l, before, now);
  }
  publish(l);
  pthread_mutex_unlock(&l->mu);
  free(before);
  return NULL;
}

dvm_status *dvms_llm_start(dvms_model *m, const char *config, int threads, const dvms_repo_options *ro) {
  dvms_llm *l = calloc(1, sizeof *l);
  if (!l) return dvm_status_new(DVM_OUT_OF_MEMORY, "model %s: its engine", m->name);
  l->m = m;
  l->nslots = m->cfg.max_running;
  dvm_generator_options o;
  dvm_generator_options_init(&o);
  o.batch_size = l->nslots;
  o.threads = threads;
  if (m->cfg.max_length) o.max_length = m->cfg.max_length;
  o.kv_block_size = m->cfg.kv_block_size;
  o.kv_budget = m->cfg.kv_budget;
  o.kv_dtype = m->cfg.kv_f16 ? DVM_F16 : DVM_F32;
  o.prefill_chunk = m->cfg.prefill_chunk;
  o.prefill_budget = m->cfg.prefill_budget;
  dvm_status *st = dvm_generator_create(m->module, config, &o, &l->gen);
  if (!st && (!(l->slots = calloc((size_t)l->nslots, sizeof *l->slots)) ||
              !(l->seq = malloc((size_t)dvm_generator_max_length(l->gen) * sizeof *l->seq))))
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "model %s: its slots", m->name);
  if (!st && dvm_generator_kv_note(l->gen)[0] && ro->warn) {
    char msg[400];
    snprintf(msg, sizeof msg, "paged KV cache off (kv_block_size %d): %s", m->cfg.kv_block_size,
             dvm_generator_kv_note(l->gen));
    ro->warn(ro->warn_ctx, m->name, msg);
  }
  if (!st) {
    dvm_generator_kv_stats ks;
    dvm_generator_get_kv_stats(l->gen, &ks);
    l->kv.blocks = ks.blocks, l->kv.block_bytes = ks.block_bytes;
  }
  if (!st) {
    for (int s = 0; s < l->nslots; s++) dvm_generator_reset(l->gen, s);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    if (pthread_create(&l->thread, NULL, engine, l) != 0) {
      pthread_mutex_destroy(&l->mu);
      pthread_cond_destroy(&l->work);
      st = dvm_status_new(DVM_UNAVAILABLE, "model %s: cannot start its engine thread", m->name);
    }
  }
  if (st) {
    dvm_generator_destroy(l->gen);
    free(l->slots);
    free(l->seq);
    free(l);
    return st;
  }
  m->llm = l;
  m->max_length = dvm_generator_max_length(l->gen);
  publish(l);
  return NULL;
}

void dvms_llm_stop(dvms_model *m) {
  dvms_llm *l = m->llm;
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_signal(&l->work);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->work);
  dvm_generator_destroy(l->gen);
  free(l->slots);
  free(l->seq);
  free(l);
  m->llm = NULL;
}

dvm_status *dvms_llm_submit(dvms_model *m, dvms_gen *g) {
  dvms_llm *l = m->llm;
  int vocab = dvm_generator_vocab_size(l->gen);
  if (g->nprompt < 1 || g->max_tokens < 1 || g->max_tokens > m->max_length - g->nprompt)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%d prompt tokens and max_tokens %d: at least 1 each, at most %d together",
                          g->nprompt, g->max_tokens, m->max_length);
  for (int i = 0; i < g->nprompt; i++)
    if (g->prompt[i] < 0 || g->prompt[i] >= vocab)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "prompt token %d (%d) is outside the vocabulary (0 to %d)", i,
                            g->prompt[i], vocab - 1);
  dvm_generator_kv_stats kv;
  dvm_generator_get_kv_stats(l->gen, &kv);
  int64_t rows = (int64_t)g->nprompt + g->max_tokens - 1; /* the last token never runs */
  if (kv.block_size && (rows + kv.block_size - 1) / kv.block_size > kv.blocks)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%d prompt tokens and max_tokens %d need %lld KV blocks of %d rows; "
                          "the model's kv_budget holds %d", g->nprompt, g->max_tokens,
                          (long long)((rows + kv.block_size - 1) / kv.block_size), kv.block_size, kv.blocks);
  g->tokens = malloc((size_t)g->max_tokens * sizeof *g->tokens);
  if (g->search.logprobs >= 0) g->logprobs = malloc((size_t)g->max_tokens * sizeof *g->logprobs);
  if (!g->tokens || (g->search.logprobs >= 0 && !g->logprobs)) {
    free(g->tokens);
    free(g->logprobs);
    g->tokens = NULL, g->logprobs = NULL;
    return dvm_status_new(DVM_OUT_OF_MEMORY, "%d tokens of a request", g->max_tokens);
  }
  dvms_cond_init(&g->cond);
  pthread_mutex_lock(&l->mu);
  if (l->waiting >= m->cfg.max_queue || l->stop) {
    int64_t waiting = l->waiting;
    pthread_mutex_unlock(&l->mu);
    pthread_cond_destroy(&g->cond);
    free(g->tokens);
    free(g->logprobs);
    g->tokens = NULL, g->logprobs = NULL;
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "model %s has %lld requests waiting, its max_queue", m->name,
                          (long long)waiting);
  }
  g->state = DVMS_GEN_QUEUED;
  g->enqueued = dvms_now();
  if (l->tail) l->tail->next = g;
  else l->head = g;
  l->tail = g;
  l->waiting++;
  publish(l);
  pthread_cond_signal(&l->work);
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

int dvms_llm_wait(dvms_model *m, dvms_gen *g, int have, double until, int *n) {
  dvms_llm *l = m->llm;
  pthread_mutex_lock(&l->mu);
  while (g->state != DVMS_GEN_DONE && g->ntokens <= have && dvms_now() < until)
    dvms_cond_wait_until(&g->cond, &l->mu, until);
  *n = g->ntokens;
  int done = g->state == DVMS_GEN_DONE;
  pthread_mutex_unlock(&l->mu);
  return done;
}

void dvms_llm_cancel(dvms_model *m, dvms_gen *g) {
  dvms_llm *l = m->llm;
  pthread_mutex_lock(&l->mu);
  if (g->state == DVMS_GEN_QUEUED) {
    dvms_gen **p = &l->head, *prev = NULL;
    while (*p != g) prev = *p, p = &(*p)->next;
    *p = g->next;
    if (l->tail == g) l->tail = prev;
    l->waiting--;
    finish(l, g, DVMS_FINISH_CANCELLED, NULL);
    publish(l);
  } else if (g->state == DVMS_GEN_RUNNING) {
    g->cancel = 1;
    pthread_cond_signal(&l->work);
    while (g->state != DVMS_GEN_DONE) pthread_cond_wait(&g->cond, &l->mu);
  }
  pthread_mutex_unlock(&l->mu);
}

void dvms_gen_clear(dvms_gen *g) {
  if (g->tokens) pthread_cond_destroy(&g->cond);
  free(g->tokens);
  free(g->logprobs);
  dvm_status_free(g->status);
  *g = (dvms_gen){0};
}
