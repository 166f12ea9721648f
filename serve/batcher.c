/* A model's queue and its workers. Each worker owns one VM and is its own
 * batcher: it takes the oldest queued request, waits up to the model's
 * queue delay for compatible ones (same dims except the batch symbol and,
 * for a padded symbol, the same length bucket) until max_batch rows are
 * there, joins them along dim 0, padding the padded symbol's dims only to
 * the longest in the batch, runs one invocation, and slices each request's
 * results back out. A batch that fails is run again one request at a time,
 * so a request that is too large for the pool fails alone. Requests whose
 * deadline passed in the queue are answered with a timeout, not run. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

double dvms_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void dvms_cond_init(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

void dvms_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu, double until) {
  struct timespec t;
  t.tv_sec = (time_t)until;
  t.tv_nsec = (long)((until - (double)t.tv_sec) * 1e9);
  pthread_cond_timedwait(c, mu, &t);
}

static int batching(const dvms_model *m) { return m->batch_sym >= 0 && m->cfg.max_batch > 1; }

static int bucket(const dvms_model *m, int64_t len) {
  if (m->cfg.pad_to_max) return 0;
  int k = 0;
  while (k < m->cfg.nbuckets && len > m->cfg.buckets[k]) k++;
  return k;
}

/* Whether b may run in one invocation with a. */
static int compatible(const dvms_model *m, const dvms_job *a, const dvms_job *b) {
  const dvms_sigs *s = &m->sigs;
  for (int k = 0; k < s->nsyms; k++) {
    if (k == m->batch_sym) continue;
    if (k == m->pad_sym) {
      if (bucket(m, a->req->sym[k]) != bucket(m, b->req->sym[k])) return 0;
    } else if (a->req->sym[k] != b->req->sym[k]) {
      return 0;
    }
  }
  for (int i = 0; i < s->nin; i++) /* dims the signature leaves open */
    for (int d = 0; d < s->in[i].rank; d++)
      if (s->in[i].sym[d] < 0 && dvm_tensor_dims(a->req->inputs[i])[d] != dvm_tensor_dims(b->req->inputs[i])[d])
        return 0;
  return 1;
}

static void finish(dvms_job *job, dvm_status *st) {
  job->status = st;
  job->state = DVMS_JOB_DONE;
  job->finished = dvms_now();
  pthread_cond_signal(&job->done);
}

static void unlink_job(dvms_model *m, dvms_job *j) {
  if (j->prev) j->prev->next = j->next;
  else m->head = j->next;
  if (j->next) j->next->prev = j->prev;
  else m->tail = j->prev;
  j->next = j->prev = NULL;
  m->queued--;
  dvms_metrics_queue(m->metrics, m->name, m->queued);
}

/* 0 (no priority given) ranks after every level, as Triton's default. */
static uint64_t rank(const dvms_job *j) { return j->req->priority ? (uint64_t)j->req->priority : UINT64_MAX; }

/* Queues job after every job of its priority or a higher one (FIFO within a level). */
static void insert(dvms_model *m, dvms_job *job) {
  dvms_job *after = m->tail;
  while (after && rank(after) > rank(job)) after = after->prev;
  job->prev = after;
  job->next = after ? after->next : m->head;
  if (job->next) job->next->prev = job;
  else m->tail = job;
  if (after) after->next = job;
  else m->head = job;
}

/* Rows queued that could join head's batch, up to max_batch. */
static int64_t ready_rows(const dvms_model *m, const dvms_job *head) {
  int64_t rows = 0;
  for (const dvms_job *j = head; j && rows < m->cfg.max_batch; j = j->next)
    if (compatible(m, head, j)) rows += j->rows ? j->rows : 1;
  return rows;
}

/* Takes head and the compatible jobs after it into batch (mu held). */
static int take(dvms_model *m, dvms_job **batch, double now) {
  int n = 0;
  int64_t rows = 0;
  dvms_job *head = NULL;
  for (dvms_job *j = m->head, *next; j && n < m->cfg.max_batch; j = next) {
    next = j->next;
    if (j->deadline > 0 && now > j->deadline) {
      unlink_job(m, j);
      finish(j, dvm_status_new(DVM_INTERRUPTED, "the request's deadline passed after %.1f ms in the queue",
                               (now - j->enqueued) * 1e3));
      continue;
    }
    if (head && (!batching(m) || rows + j->rows > m->cfg.max_batch || !compatible(m, head, j))) continue;
    if (!head) head = j;
    unlink_job(m, j);
    j->state = DVMS_JOB_RUNNING;
    j->started = now;
    batch[n++] = j;
    rows += j->rows;
    if (!batching(m)) break;
  }
  return n;
}

/* n elements of src from element so on into dst from element d: bytes, or
 * for strings each element's text (a string tensor's data are references
 * that only its storage owns). */
static dvm_status *copy_run(dvm_tensor *dst, int64_t d, const dvm_tensor *src, int64_t so, int64_t n) {
  if (dvm_tensor_dtype(src) != DVM_STRING) {
    size_t es = dvm_dtype_size(dvm_tensor_dtype(src));
    memcpy((char *)dvm_tensor_data(dst) + (size_t)d * es, (const char *)dvm_tensor_data(src) + (size_t)so * es,
           (size_t)n * es);
    return NULL;
  }
  dvm_status *st = NULL;
  for (int64_t i = 0; i < n && !st; i++) {
    size_t len;
    const char *text = dvm_tensor_string(src, so + i, &len);
    st = dvm_tensor_set_string(dst, d + i, text, len);
  }
  return st;
}

/* Copies the block `cd` from element so of src (dims sd) to element d of
 * dst (dims dd); both row-major with rank dims. */
static dvm_status *copy_block(dvm_tensor *dst, int64_t d, const int64_t *dd, const dvm_tensor *src, int64_t so,
                              const int64_t *sd, const int64_t *cd, int rank) {
  if (rank <= 1) return copy_run(dst, d, src, so, rank ? cd[0] : 1);
  int64_t ds = 1, ss = 1;
  for (int k = 1; k < rank; k++) {
    ds *= dd[k];
    ss *= sd[k];
  }
  dvm_status *st = NULL;
  for (int64_t i = 0; i < cd[0] && !st; i++)
    st = copy_block(dst, d + i * ds, dd + 1, src, so + i * ss, sd + 1, cd + 1, rank - 1);
  return st;
}

static int64_t row_elements(const dvm_tensor *t) {
  const int64_t *d = dvm_tensor_dims(t);
  return d[0] ? dvm_tensor_numel(t) / d[0] : 0;
}

/* Fills t with v converted to its dtype (f16/bf16: only 0, checked at load). */
static void fill_value(dvm_tensor *t, double v) {
  char *p = dvm_tensor_data(t);
  size_t es = dvm_dtype_size(dvm_tensor_dtype(t)), n = dvm_tensor_nbytes(t);
  if (!n) return;
  switch (dvm_tensor_dtype(t)) {
  case DVM_F32: *(float *)p = (float)v; break;
  case DVM_F64: *(double *)p = v; break;
  case DVM_I8: *(int8_t *)p = (int8_t)v; break;
  case DVM_I16: *(int16_t *)p = (int16_t)v; break;
  case DVM_I32: *(int32_t *)p = (int32_t)v; break;
  case DVM_I64: *(int64_t *)p = (int64_t)v; break;
  case DVM_U8: case DVM_BOOL: *(uint8_t *)p = (uint8_t)v; break;
  case DVM_U16: *(uint16_t *)p = (uint16_t)v; break;
  case DVM_U32: *(uint32_t *)p = (uint32_t)v; break;
  case DVM_U64: *(uint64_t *)p = (uint64_t)v; break;
  default: memset(p, 0, es); break;
  }
  for (size_t done = es; done < n; done *= 2) memcpy(p + done, p, done < n - done ? done : n - done);
}

/* The dims of input/output sig `s` for a job: batch dim `rows`, the padded
 * symbol's dims `len`, the rest from `like`. */
static void job_dims(const dvms_model *m, const dvms_sig *s, const int64_t *like, int64_t rows, int64_t len,
                     int64_t *dims) {
  for (int d = 0; d < s->rank; d++)
    dims[d] = s->sym[d] == m->batch_sym && d == 0 ? rows : s->sym[d] >= 0 && s->sym[d] == m->pad_sym ? len : like[d];
}

static void record_pool(dvms_model *m, int w) {
  dvm_vm_stats st;
  dvm_vm_get_stats(m->vms[w], &st);
  pthread_mutex_lock(&m->mu);
  m->pools[w] = st.pool[m->device];
  dvm_pool_stats sum = {0};
  for (int i = 0; i < m->nworkers; i++) {
    sum.in_use += m->pools[i].in_use;
    sum.peak += m->pools[i].peak;
    sum.cached += m->pools[i].cached;
  }
  pthread_mutex_unlock(&m->mu);
  dvms_metrics_pool(m->metrics, m->name, &sum);
}

static dvm_status *invoke(dvms_model *m, int w, dvm_tensor *const *inputs, dvm_value *results) {
  dvm_value args[DVMS_MAX_IO];
  for (int i = 0; i < m->sigs.nin; i++) args[i] = dvm_value_tensor(inputs[i]);
  return dvm_vm_invoke(m->vms[w], m->function, args, m->sigs.nin, results, m->sigs.nout);
}

/* Runs one job on its own tensors; its results are its outputs. */
static dvm_status *run_one(dvms_model *m, int w, dvms_job *job) {
  dvm_value results[DVMS_MAX_IO];
  double t0 = dvms_now();
  dvm_status *st = invoke(m, w, job->req->inputs, results);
  if (st) return st;
  int64_t elements = 0;
  for (int i = 0; i < m->sigs.nin; i++) elements += dvm_tensor_numel(job->req->inputs[i]);
  dvms_metrics_batch(m->metrics, m->name, (int)job->rows, dvms_now() - t0, elements, 0);
  job->batch_rows = (int)job->rows;
  for (int o = 0; o < m->sigs.nout; o++) {
    if (job->req->want[o]) job->outs[o] = results[o].u.tensor;
    else dvm_value_clear(&results[o]);
  }
  return NULL;
}

/* Joins the jobs' inputs, runs them once, slices the results back. */
static dvm_status *run_batch(dvms_model *m, int w, dvms_job **jobs, int n) {
  const dvms_sigs *s = &m->sigs;
  int64_t rows = 0, len = -1;
  for (int j = 0; j < n; j++) {
    rows += jobs[j]->rows;
    if (m->pad_sym >= 0 && jobs[j]->req->sym[m->pad_sym] > len) len = jobs[j]->req->sym[m->pad_sym];
  }
  if (m->pad_sym >= 0 && m->cfg.pad_to_max) len = s->sym_hi[m->pad_sym];
  dvm_tensor *in[DVMS_MAX_IO] = {0};
  dvm_value results[DVMS_MAX_IO];
  dvm_status *st = NULL;
  int64_t elements = 0, real = 0;
  for (int i = 0; i < s->nin && !st; i++) {
    int64_t dims[DVM_MAX_RANK];
    const dvm_tensor *first = jobs[0]->req->inputs[i];
    job_dims(m, &s->in[i], dvm_tensor_dims(first), rows, len, dims);
    if ((st = dvm_tensor_create(s->in[i].dtype, s->in[i].rank, dims, &in[i]))) break;
    int64_t mine = 0;
    for (int j = 0; j < n; j++) mine += dvm_tensor_numel(jobs[j]->req->inputs[i]);
    elements += dvm_tensor_numel(in[i]);
    real += mine;
    /* some of it is padding (strings' is "", as created) */
    if (mine < dvm_tensor_numel(in[i]) && s->in[i].dtype != DVM_STRING) fill_value(in[i], m->pad_value[i]);
    int64_t at = 0;
    for (int j = 0; j < n && !st; j++) {
      const dvm_tensor *t = jobs[j]->req->inputs[i];
      st = copy_block(in[i], at, dims, t, 0, dvm_tensor_dims(t), dvm_tensor_dims(t), s->in[i].rank);
      at += row_elements(in[i]) * jobs[j]->rows;
    }
  }
  double t0 = dvms_now();
  if (!st) st = invoke(m, w, in, results);
  for (int i = 0; i < s->nin; i++) dvm_tensor_release(in[i]);
  if (st) return st;
  dvms_metrics_batch(m->metrics, m->name, (int)rows, dvms_now() - t0, elements, elements - real);
  for (int o = 0; o < s->nout && !st; o++) {
    const dvm_tensor *r = results[o].u.tensor;
    int64_t at = 0;
    for (int j = 0; j < n && !st; j++) {
      dvms_job *job = jobs[j];
      int64_t dims[DVM_MAX_RANK];
      int64_t jlen = m->pad_sym >= 0 ? job->req->sym[m->pad_sym] : -1;
      job_dims(m, &s->out[o], dvm_tensor_dims(r), job->rows, jlen, dims);
      if (job->req->want[o] && !(st = dvm_tensor_create(dvm_tensor_dtype(r), s->out[o].rank, dims, &job->outs[o])))
        st = copy_block(job->outs[o], 0, dims, r, at, dvm_tensor_dims(r), dims, s->out[o].rank);
      at += row_elements(r) * job->rows;
      job->batch_rows = (int)rows;
    }
  }
  for (int o = 0; o < s->nout; o++) dvm_value_clear(&results[o]);
  return st;
}

static int needs_join(const dvms_model *m, dvms_job **jobs, int n) {
  if (n > 1) return 1;
  return m->pad_sym >= 0 && m->cfg.pad_to_max && jobs[0]->req->sym[m->pad_sym] != m->sigs.sym_hi[m->pad_sym];
}

typedef struct worker_arg {
  dvms_model *m;
  int w;
  dvms_job **batch;   /* max_batch entries */
  dvm_status **each;  /* max_batch entries */
} worker_arg;

/* Runs a taken batch; when it fails, runs its jobs one at a time so each
 * gets its own answer. Sets each[j]. */
static void run(dvms_model *m, const worker_arg *a, int n) {
  dvms_job **batch = a->batch;
  for (int j = 0; j < n; j++) a->each[j] = NULL;
  dvm_status *st = needs_join(m, batch, n) ? run_batch(m, a->w, batch, n) : run_one(m, a->w, batch[0]);
  if (!st || n == 1) {
    a->each[0] = st;
    return;
  }
  dvm_status_free(st);
  for (int j = 0; j < n; j++) {
    for (int o = 0; o < m->sigs.nout; o++) {
      dvm_tensor_release(batch[j]->outs[o]);
      batch[j]->outs[o] = NULL;
    }
    a->each[j] = needs_join(m, batch + j, 1) ? run_batch(m, a->w, batch + j, 1) : run_one(m, a->w, batch[j]);
  }
}

static void *worker(void *p) {
  worker_arg *a = p;
  dvms_model *m = a->m;
  pthread_mutex_lock(&m->mu);
  for (;;) {
    while (!m->stop && !m->head) pthread_cond_wait(&m->work, &m->mu);
    if (!m->head) break;
    double now = dvms_now(), until = m->head->enqueued + (double)m->cfg.queue_delay_us * 1e-6;
    if (batching(m) && !m->stop && now < until && ready_rows(m, m->head) < m->cfg.max_batch) {
      dvms_cond_wait_until(&m->work, &m->mu, until);
      continue;
    }
    int n = take(m, a->batch, now);
    if (!n) continue;
    pthread_mutex_unlock(&m->mu);
    run(m, a, n);
    record_pool(m, a->w);
    pthread_mutex_lock(&m->mu);
    for (int j = 0; j < n; j++) finish(a->batch[j], a->each[j]);
  }
  pthread_mutex_unlock(&m->mu);
  free(a->batch);
  free(a->each);
  free(a);
  return NULL;
}

dvm_status *dvms_batcher_start(dvms_model *m, int threads) {
  int n = m->nworkers;
  m->threads = calloc((size_t)n, sizeof *m->threads);
  m->vms = calloc((size_t)n, sizeof *m->vms);
  m->pools = calloc((size_t)n, sizeof *m->pools);
  if (!m->threads || !m->vms || !m->pools) { /* nothing to stop: dvms_batcher_stop looks at threads */
    free(m->threads);
    free(m->vms);
    free(m->pools);
    m->threads = NULL;
    m->vms = NULL;
    m->pools = NULL;
    return dvm_status_new(DVM_OUT_OF_MEMORY, "model %s: workers", m->name);
  }
  pthread_mutex_init(&m->mu, NULL);
  dvms_cond_init(&m->work);
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.threads = threads;
  o.pool_limit = (size_t)m->cfg.pool_limit;
  if (strcmp(m->cfg.device, "cuda") == 0) o.device = DVM_DEVICE_CUDA;
  char why[256];
  if (strcmp(m->cfg.device, "auto") == 0) o.device = dvm_device_auto(m->module, why, sizeof why);
  m->device = o.device;
  for (int w = 0; w < n; w++) {
    dvm_status *st = dvm_vm_create(m->module, &o, &m->vms[w]);
    if (!st) st = dvm_vm_find_function(m->vms[w], m->cfg.function, &m->function);
    if (st) return st;
  }
  for (int w = 0; w < n; w++) {
    worker_arg *a = calloc(1, sizeof *a);
    if (a) {
      a->batch = calloc((size_t)m->cfg.max_batch, sizeof *a->batch);
      a->each = calloc((size_t)m->cfg.max_batch, sizeof *a->each);
    }
    if (!a || !a->batch || !a->each) {
      if (a) {
        free(a->batch);
        free(a->each);
      }
      free(a);
      return dvm_status_new(DVM_OUT_OF_MEMORY, "model %s: workers", m->name);
    }
    a->m = m;
    a->w = w;
    if (pthread_create(&m->threads[w], NULL, worker, a) != 0) {
      free(a->batch);
      free(a->each);
      free(a);
      return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "model %s: cannot start worker %d", m->name, w);
    }
    m->nstarted = w + 1;
  }
  return NULL;
}

void dvms_batcher_stop(dvms_model *m) {
  if (!m->threads) return;
  pthread_mutex_lock(&m->mu);
  m->stop = 1;
  pthread_cond_broadcast(&m->work);
  pthread_mutex_unlock(&m->mu);
  for (int w = 0; w < m->nstarted; w++) pthread_join(m->threads[w], NULL);
  for (int w = 0; w < m->nworkers; w++) dvm_vm_destroy(m->vms[w]);
  free(m->threads);
  free(m->vms);
  free(m->pools);
  m->threads = NULL;
  pthread_cond_destroy(&m->work);
  pthread_mutex_destroy(&m->mu);
}

dvm_status *dvms_batcher_submit(dvms_model *m, dvms_job *job, dvms_request *req, double timeout_s) {
  *job = (dvms_job){.req = req, .state = DVMS_JOB_QUEUED};
  job->rows = m->batch_sym >= 0 ? req->sym[m->batch_sym] : 1;
  job->enqueued = dvms_now();
  job->deadline = timeout_s > 0 ? job->enqueued + timeout_s : 0;
  dvms_cond_init(&job->done);
  pthread_mutex_lock(&m->mu);
  dvm_status *st = NULL;
  if (m->stop) {
    st = dvm_status_new(DVM_UNAVAILABLE, "model %s is being unloaded", m->name);
  } else if (m->queued >= m->cfg.max_queue) {
    st = dvm_status_new(DVM_RESOURCE_EXHAUSTED, "model %s: %lld requests are queued (max_queue)", m->name,
                        (long long)m->queued);
  } else {
    insert(m, job);
    m->queued++;
    dvms_metrics_queue(m->metrics, m->name, m->queued);
    pthread_cond_broadcast(&m->work);
  }
  pthread_mutex_unlock(&m->mu);
  if (st) job->state = DVMS_JOB_DONE;
  return st;
}

int dvms_batcher_wait(dvms_model *m, dvms_job *job, double until) {
  pthread_mutex_lock(&m->mu);
  while (job->state != DVMS_JOB_DONE && dvms_now() < until) dvms_cond_wait_until(&job->done, &m->mu, until);
  int done = job->state == DVMS_JOB_DONE;
  pthread_mutex_unlock(&m->mu);
  return done;
}

int dvms_batcher_cancel(dvms_model *m, dvms_job *job) {
  pthread_mutex_lock(&m->mu);
  int taken = job->state == DVMS_JOB_QUEUED;
  if (taken) {
    unlink_job(m, job);
    job->state = DVMS_JOB_DONE;
  }
  pthread_mutex_unlock(&m->mu);
  return taken;
}

void dvms_job_clear(dvms_job *job) {
  pthread_cond_destroy(&job->done);
  for (int o = 0; o < DVMS_MAX_IO; o++) dvm_tensor_release(job->outs[o]);
  dvm_status_free(job->status);
  *job = (dvms_job){0};
}
