/* The model repository: REPO/NAME/VERSION/model.dvmb (or model.onnx,
 * compiled at load) and an optional REPO/NAME/config. A version folder
 * with genai_config.json is a generation model: its decoder is compiled
 * for the logits of the last position (as dvm generate does) and served
 * by an engine (llm.c) with the folder's tokenizer. Each model name has
 * an entry holding its loaded versions; a request takes a reference to one
 * version, so unloading or reloading never pulls a model from under a
 * request: the last reference stops its workers and frees it. A model that
 * fails to load records why and leaves the others (and a version that was
 * serving before a failed reload) alone. */
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve.h"
#include "serve_compile.h"

#define MAX_VERSIONS 16
#define MAX_ENTRIES 256

typedef struct entry {
  char name[128];
  int ready;
  char reason[512];
  dvms_model *versions[MAX_VERSIONS]; /* ascending */
  int nversions;
} entry;

struct dvms_repo {
  char *root;
  dvms_repo_options opts;
  pthread_mutex_t mu;   /* entries */
  pthread_mutex_t load; /* one load or unload at a time */
  entry *entries[MAX_ENTRIES];
  int nentries;
  int loaded_all;
};

static int valid_name(const char *s) {
  if (!*s || strlen(s) >= 128 || s[0] == '.') return 0;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return 0;
  return 1;
}

static int parse_version(const char *s, int64_t *v) {
  if (!*s || strlen(s) > 18) return 0;
  for (const char *p = s; *p; p++)
    if (!isdigit((unsigned char)*p)) return 0;
  *v = strtoll(s, NULL, 10);
  return 1;
}

dvm_status *dvms_repo_open(const char *root, const dvms_repo_options *o, dvms_repo **out) {
  struct stat sb;
  if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return dvm_status_new(DVM_NOT_FOUND, "%s: not a model repository folder", root);
  dvms_repo *r = calloc(1, sizeof *r);
  if (!r || !(r->root = strdup(root))) {
    free(r);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "repository");
  }
  r->opts = *o;
  pthread_mutex_init(&r->mu, NULL);
  pthread_mutex_init(&r->load, NULL);
  *out = r;
  return NULL;
}

dvms_model *dvms_model_retain(dvms_model *m) {
  atomic_fetch_add(&m->refs, 1);
  return m;
}

void dvms_model_release(dvms_model *m) {
  if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
  dvms_batcher_stop(m);
  dvms_llm_stop(m);
  dvm_tokenizer_free(m->tok);
  dvm_module_release(m->module);
  free(m);
}

/* The signature of function f as dvms_sigs; tensors only. */
static dvm_status *read_sigs(const dvm_module *mod, int f, dvms_sigs *s) {
  int nin = dvm_function_param_count(mod, f), nout = dvm_function_result_count(mod, f);
  int nsym = dvm_function_symbol_count(mod, f);
  if (nin > DVMS_MAX_IO || nout > DVMS_MAX_IO || nsym > DVMS_MAX_SYMS)
    return dvm_status_new(DVM_UNIMPLEMENTED, "more than %d inputs, outputs or symbols", DVMS_MAX_IO);
  s->nsyms = nsym;
  for (int k = 0; k < nsym; k++) {
    dvm_symbol_info si;
    dvm_function_symbol(mod, f, k, &si);
    snprintf(s->sym_name[k], sizeof s->sym_name[k], "%s", si.name);
    s->sym_lo[k] = si.lo;
    s->sym_hi[k] = si.hi;
  }
  s->nin = nin;
  s->nout = nout;
  for (int i = 0; i < nin + nout; i++) {
    dvm_param_info p;
    dvms_sig *g = i < nin ? &s->in[i] : &s->out[i - nin];
    if (i < nin) dvm_function_param(mod, f, i, &p);
    else dvm_function_result(mod, f, i - nin, &p);
    if (p.kind != DVM_VAL_TENSOR || p.rank < 0)
      return dvm_status_new(DVM_UNIMPLEMENTED, "%s \"%s\" is not a tensor of known rank; only those are served",
                            i < nin ? "input" : "output", p.name);
    snprintf(g->name, sizeof g->name, "%s", p.name);
    g->dtype = p.dtype;
    g->rank = p.rank;
    for (int d = 0; d < p.rank; d++) {
      g->dims[d] = p.dims[d].symbol ? -1 : p.dims[d].value;
      g->sym[d] = -1;
      for (int k = 0; p.dims[d].symbol && k < nsym; k++)
        if (strcmp(s->sym_name[k], p.dims[d].symbol) == 0) g->sym[d] = k;
    }
  }
  return NULL;
}

static int find_sym(const dvms_sigs *s, const char *name) {
  for (int k = 0; k < s->nsyms; k++)
    if (strcmp(s->sym_name[k], name) == 0) return k;
  return -1;
}

/* Checks the config's batching and padding rules against the signature. */
static dvm_status *check_batching(dvms_model *m) {
  dvms_sigs *s = &m->sigs;
  const dvms_config *c = &m->cfg;
  m->batch_sym = m->pad_sym = -1;
  if (c->batch[0] && (m->batch_sym = find_sym(s, c->batch)) < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "batch = %s: the function has no such symbol", c->batch);
  if (c->pad[0] && (m->pad_sym = find_sym(s, c->pad)) < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "pad = %s: the function has no such symbol", c->pad);
  if (m->pad_sym >= 0 && m->pad_sym == m->batch_sym)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "pad and batch name the same symbol");
  for (int i = 0; i < s->nin + s->nout && m->batch_sym >= 0; i++) {
    const dvms_sig *g = i < s->nin ? &s->in[i] : &s->out[i - s->nin];
    for (int d = 0; d < g->rank; d++)
      if ((d == 0) != (g->sym[d] == m->batch_sym))
        return dvm_status_new(DVM_INVALID_ARGUMENT, "batch = %s: \"%s\" must have it as its first dim and only there",
                              c->batch, g->name);
    if (g->rank == 0)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "batch = %s: \"%s\" is a scalar", c->batch, g->name);
  }
  for (int p = 0; p < c->npad_inputs; p++) {
    int found = 0;
    for (int i = 0; i < s->nin; i++)
      if (strcmp(s->in[i].name, c->pad_input[p]) == 0) {
        if (s->in[i].dtype == DVM_STRING)
          return dvm_status_new(DVM_INVALID_ARGUMENT, "pad_value %s: a string input pads with empty strings and takes "
                                "no pad_value", c->pad_input[p]);
        if ((s->in[i].dtype == DVM_F16 || s->in[i].dtype == DVM_BF16) && c->pad_value[p] != 0)
          return dvm_status_new(DVM_UNIMPLEMENTED, "pad_value %s: f16/bf16 inputs pad with 0 only", c->pad_input[p]);
        m->pad_value[i] = c->pad_value[p];
        found = 1;
      }
    if (!found) return dvm_status_new(DVM_INVALID_ARGUMENT, "pad_value %s: no such input", c->pad_input[p]);
  }
  for (int i = 0; i < s->nin && m->pad_sym >= 0; i++) {
    int has = 0, given = 0;
    for (int d = 0; d < s->in[i].rank; d++) has |= s->in[i].sym[d] == m->pad_sym;
    for (int p = 0; p < c->npad_inputs; p++) given |= strcmp(s->in[i].name, c->pad_input[p]) == 0;
    if (has && !given && s->in[i].dtype != DVM_STRING)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "pad = %s: input \"%s\" has it but no pad_value", c->pad, s->in[i].name);
  }
  if (m->batch_sym >= 0 && m->cfg.max_batch > s->sym_hi[m->batch_sym]) /* a batch the guards would refuse */
    m->cfg.max_batch = (int)s->sym_hi[m->batch_sym];
  if (m->pad_sym >= 0 && c->pad_to_max && s->sym_hi[m->pad_sym] > (1 << 20))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "pad_to_max: symbol %s has no small maximum (%lld)", c->pad,
                          (long long)s->sym_hi[m->pad_sym]);
  if (m->pad_sym >= 0 && !c->nbuckets) { /* powers of two from 8 up to the maximum */
    dvms_config *w = &m->cfg;
    for (int64_t b = 8; w->nbuckets < DVMS_MAX_BUCKETS; b *= 2) {
      w->buckets[w->nbuckets++] = b;
      if (b >= s->sym_hi[m->pad_sym]) break;
    }
  }
  return NULL;
}

/* A generation model from the folder `dir` holding genai_config.json. */
static dvm_status *load_llm(dvms_repo *r, dvms_model *m, const char *dir, const char *config) {
  char file[256], path[1400];
  dvm_status *st = dvm_generator_model_file(config, file, m->cfg.last_position, sizeof file);
  if (st) return st;
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  if (access(path, F_OK) == 0 && (st = dvm_tokenizer_load(path, &m->tok))) return st;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  if ((st = dvms_compile_onnx(path, m->name, &m->cfg, &r->opts, &m->module))) return st;
  dvms_chat_read_config(m, dir);
  return dvms_llm_start(m, config, m->cfg.threads ? m->cfg.threads : r->opts.cores, &r->opts);
}

static dvm_status *load_version(dvms_repo *r, const char *name, int64_t version, dvms_model **out) {
  char dir[1024], path[1100];
  snprintf(dir, sizeof dir, "%s/%s/%lld", r->root, name, (long long)version);
  dvms_model *m = calloc(1, sizeof *m);
  if (!m) return dvm_status_new(DVM_OUT_OF_MEMORY, "model %s", name);
  snprintf(m->name, sizeof m->name, "%s", name);
  m->version = version;
  atomic_init(&m->refs, 1);
  m->metrics = r->opts.metrics;
  dvms_config_defaults(&m->cfg);
  dvm_status *st = NULL;
  snprintf(path, sizeof path, "%s/%s/config", r->root, name);
  if (access(path, F_OK) == 0) st = dvms_config_read(path, &m->cfg);
  snprintf(path, sizeof path, "%s/genai_config.json", dir);
  if (!st && access(path, F_OK) == 0) {
    if ((st = load_llm(r, m, dir, path))) {
      dvms_model_release(m);
      return dvm_status_annotate(st, "model %s version %lld", name, (long long)version);
    }
    *out = m;
    return NULL;
  }
  if (!st) {
    snprintf(path, sizeof path, "%s/model.dvmb", dir);
    if (access(path, F_OK) == 0) {
      st = dvm_module_load_file(path, NULL, &m->module);
    } else {
      snprintf(path, sizeof path, "%s/model.onnx", dir);
      st = access(path, F_OK) == 0 ? dvms_compile_onnx(path, name, &m->cfg, &r->opts, &m->module)
                                   : dvm_status_new(DVM_NOT_FOUND, "%s: no model.dvmb or model.onnx", dir);
    }
  }
  if (!st) {
    int f = dvm_module_find_function(m->module, m->cfg.function);
    st = f < 0 ? dvm_status_new(DVM_NOT_FOUND, "%s: no function \"%s\"", path, m->cfg.function)
               : read_sigs(m->module, f, &m->sigs);
  }
  if (!st) st = check_batching(m);
  if (!st) {
    m->nworkers = m->cfg.workers ? m->cfg.workers : r->opts.workers;
    int threads = m->cfg.threads ? m->cfg.threads : r->opts.cores / m->nworkers;
    st = dvms_batcher_start(m, threads < 1 ? 1 : threads);
  }
  if (st) {
    dvms_model_release(m);
    return dvm_status_annotate(st, "model %s version %lld", name, (long long)version);
  }
  dvms_metrics_pool(m->metrics, name, &(dvm_pool_stats){0}); /* its series exist from now on, at zero */
  *out = m;
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The index of `name`'s entry, or -1 (r->mu held). */
static int find_entry(const dvms_repo *r, const char *name) {
  for (int i = 0; i < r->nentries; i++)
    if (strcmp(r->entries[i]->name, name) == 0) return i;
  return -1;
}

/* A new entry for `name` (r->mu held); NULL when full. */
static entry *add_entry(dvms_repo *r, const char *name) {
  if (r->nentries == MAX_ENTRIES) return NULL;
  entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  snprintf(e->name, sizeof e->name, "%s", name);
  r->entries[r->nentries++] = e;
  return e;
}

static dvm_status *load_versions(dvms_repo *r, const char *name, dvms_model **models, int *n) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", r->root, name);
  DIR *d = opendir(dir);
  if (!d) return dvm_status_new(DVM_NOT_FOUND, "model %s: no folder %s", name, dir);
  int64_t vs[MAX_VERSIONS];
  int nv = 0;
  for (struct dirent *de; (de = readdir(d));) {
    int64_t v;
    if (parse_version(de->d_name, &v) && nv < MAX_VERSIONS) vs[nv++] = v;
  }
  closedir(d);
  if (!nv) return dvm_status_new(DVM_NOT_FOUND, "model %s: no version folders (%s/1, ...)", name, dir);
  qsort(vs, (size_t)nv, sizeof vs[0], cmp_i64);
  *n = 0;
  for (int i = 0; i < nv; i++) {
    dvm_status *st = load_version(r, name, vs[i], &models[i]);
    if (st) {
      for (int j = 0; j < i; j++) dvms_model_release(models[j]);
      return st;
    }
    *n = i + 1;
  }
  return NULL;
}

dvm_status *dvms_repo_load(dvms_repo *r, const char *name) {
  if (strlen(name) >= sizeof ((entry *)NULL)->name)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "model name of %zu characters: at most %zu", strlen(name),
                          sizeof ((entry *)NULL)->name - 1);
  if (!valid_name(name))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "model name \"%s\": letters, digits, '_', '-', '.' only", name);
  pthread_mutex_lock(&r->load);
  dvms_model *models[MAX_VERSIONS], *old[MAX_VERSIONS];
  int n = 0, nold = 0;
  dvm_status *st = load_versions(r, name, models, &n);
  char dir[1024];
  struct stat sb;
  snprintf(dir, sizeof dir, "%s/%s", r->root, name);
  int folder = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
  pthread_mutex_lock(&r->mu);
  int at = find_entry(r, name);
  /* only a model of the repository takes an entry, loaded or with the
   * reason it failed: not any name a client asks to load */
  entry *e = at >= 0 ? r->entries[at] : folder || !st ? add_entry(r, name) : NULL;
  if (!e) {
    if (!st && r->nentries == MAX_ENTRIES) st = dvm_status_new(DVM_RESOURCE_EXHAUSTED, "more than %d models", MAX_ENTRIES);
    else if (!st) st = dvm_status_new(DVM_OUT_OF_MEMORY, "model %s: its entry", name);
  } else if (st) {
    snprintf(e->reason, sizeof e->reason, "%s", dvm_status_message(st));
    e->ready = e->nversions > 0; /* a failed reload keeps what was serving */
  } else {
    nold = e->nversions;
    memcpy(old, e->versions, sizeof old[0] * (size_t)nold);
    memcpy(e->versions, models, sizeof models[0] * (size_t)n);
    e->nversions = n;
    e->ready = 1;
    e->reason[0] = 0;
  }
  pthread_mutex_unlock(&r->mu);
  if (st)
    for (int i = 0; i < n; i++) dvms_model_release(models[i]);
  for (int i = 0; i < nold; i++) dvms_model_release(old[i]);
  pthread_mutex_unlock(&r->load);
  return st;
}

void dvms_repo_load_all(dvms_repo *r, int *loaded, int *failed) {
  *loaded = *failed = 0;
  DIR *d = opendir(r->root);
  if (d) {
    for (struct dirent *de; (de = readdir(d));) {
      char path[1100];
      struct stat sb;
      snprintf(path, sizeof path, "%s/%s", r->root, de->d_name);
      if (de->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
      dvm_status *st = dvms_repo_load(r, de->d_name);
      ++*(st ? failed : loaded);
      dvm_status_free(st);
    }
    closedir(d);
  }
  pthread_mutex_lock(&r->mu);
  r->loaded_all = 1;
  pthread_mutex_unlock(&r->mu);
}

dvm_status *dvms_repo_unload(dvms_repo *r, const char *name) {
  pthread_mutex_lock(&r->load);
  pthread_mutex_lock(&r->mu);
  dvms_model *old[MAX_VERSIONS];
  int nold = 0, at = find_entry(r, name);
  entry *e = at >= 0 ? r->entries[at] : NULL;
  if (e) { /* its slot is free again; the index lists its folder as not loaded */
    nold = e->nversions;
    memcpy(old, e->versions, sizeof old[0] * (size_t)nold);
    r->entries[at] = r->entries[--r->nentries];
    free(e);
  }
  pthread_mutex_unlock(&r->mu);
  for (int i = 0; i < nold; i++) dvms_model_release(old[i]);
  pthread_mutex_unlock(&r->load);
  return at >= 0 ? NULL : dvm_status_new(DVM_NOT_FOUND, "model %s is not in the repository's index", name);
}

dvms_model *dvms_repo_get(dvms_repo *r, const char *name, const char *version) {
  int64_t v = -1;
  if (version && !parse_version(version, &v)) return NULL;
  dvms_model *m = NULL;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->nentries && !m; i++) {
    entry *e = r->entries[i];
    if (strcmp(e->name, name) != 0 || !e->nversions) continue;
    if (v < 0) m = e->versions[e->nversions - 1];
    for (int k = 0; k < e->nversions && v >= 0; k++)
      if (e->versions[k]->version == v) m = e->versions[k];
  }
  if (m) atomic_fetch_add(&m->refs, 1);
  pthread_mutex_unlock(&r->mu);
  return m;
}

int dvms_repo_llms(dvms_repo *r, dvms_model **out, int max) {
  int n = 0;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->nentries && n < max; i++) {
    entry *e = r->entries[i];
    dvms_model *m = e->nversions ? e->versions[e->nversions - 1] : NULL;
    if (m && m->llm) atomic_fetch_add(&m->refs, 1), out[n++] = m;
  }
  pthread_mutex_unlock(&r->mu);
  return n;
}

int dvms_repo_versions(dvms_repo *r, const char *name, int64_t *vs, int max) {
  int n = 0;
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->nentries; i++)
    if (strcmp(r->entries[i]->name, name) == 0)
      for (int k = 0; k < r->entries[i]->nversions && n < max; k++) vs[n++] = r->entries[i]->versions[k]->version;
  pthread_mutex_unlock(&r->mu);
  return n;
}

static void index_row(dvms_buf *b, int *first, const char *name, int64_t version, const char *state,
                      const char *reason) {
  dvms_buf_put(b, *first ? "{\"name\":" : ",{\"name\":", *first ? 8 : 9);
  *first = 0;
  dvms_buf_json_string(b, name);
  if (version >= 0) dvms_buf_printf(b, ",\"version\":\"%lld\"", (long long)version);
  dvms_buf_printf(b, ",\"state\":\"%s\"", state);
  if (reason && *reason) {
    dvms_buf_put(b, ",\"reason\":", 10);
    dvms_buf_json_string(b, reason);
  }
  dvms_buf_put(b, "}", 1);
}

void dvms_repo_index(dvms_repo *r, dvms_buf *b) {
  int first = 1;
  dvms_buf_put(b, "[", 1);
  pthread_mutex_lock(&r->mu);
  for (int i = 0; i < r->nentries; i++) {
    entry *e = r->entries[i];
    for (int k = 0; k < e->nversions; k++) index_row(b, &first, e->name, e->versions[k]->version, "READY", NULL);
    if (!e->nversions) index_row(b, &first, e->name, -1, "UNAVAILABLE", e->reason);
  }
  pthread_mutex_unlock(&r->mu);
  /* models on disk that were never loaded */
  DIR *d = opendir(r->root);
  for (struct dirent *de; d && (de = readdir(d));) {
    if (!valid_name(de->d_name)) continue;
    int known = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nentries; i++) known |= strcmp(r->entries[i]->name, de->d_name) == 0;
    pthread_mutex_unlock(&r->mu);
    if (!known) index_row(b, &first, de->d_name, -1, "UNAVAILABLE", "not loaded");
  }
  if (d) closedir(d);
  dvms_buf_put(b, "]", 1);
}

int dvms_repo_ready(dvms_repo *r) {
  pthread_mutex_lock(&r->mu);
  int ready = r->loaded_all;
  pthread_mutex_unlock(&r->mu);
  return ready;
}

void dvms_repo_close(dvms_repo *r) {
  if (!r) return;
  while (r->nentries) dvm_status_free(dvms_repo_unload(r, r->entries[0]->name));
  pthread_mutex_destroy(&r->mu);
  pthread_mutex_destroy(&r->load);
  free(r->root);
  free(r);
}
