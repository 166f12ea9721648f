/* A model's `config` file: `key = value` lines, '#' starts a comment.
 * Keys and defaults are listed in docs/serving.md; an unknown key or a bad
 * value fails the model's load, naming the file and line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

void dvms_config_defaults(dvms_config *c) {
  *c = (dvms_config){0};
  strcpy(c->function, "main");
  c->max_batch = 8;
  c->queue_delay_us = 2000;
  c->max_queue = 256;
  strcpy(c->device, "auto");
  c->max_running = 8;
  c->continuous_batching = 1;
  c->kv_block_size = 16;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
  return s;
}

static int int_value(const char *v, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end || x < lo || x > hi) return 0;
  *out = x;
  return 1;
}

static int copy(char *dst, size_t size, const char *v) {
  if (strlen(v) >= size) return 0;
  strcpy(dst, v);
  return 1;
}

static int set(dvms_config *c, const char *key, char *v) {
  int64_t x;
  if (!strcmp(key, "function")) return copy(c->function, sizeof c->function, v);
  if (!strcmp(key, "batch")) return copy(c->batch, sizeof c->batch, v);
  if (!strcmp(key, "pad")) return copy(c->pad, sizeof c->pad, v);
  if (!strcmp(key, "device"))
    return (!strcmp(v, "cpu") || !strcmp(v, "cuda") || !strcmp(v, "auto")) && copy(c->device, sizeof c->device, v);
  if (!strcmp(key, "dim")) return c->ndims < 8 && copy(c->dims[c->ndims++], sizeof c->dims[0], v);
  if (!strcmp(key, "max_batch")) return int_value(v, 1, 1 << 20, &x) && (c->max_batch = (int)x, 1);
  if (!strcmp(key, "workers")) return int_value(v, 1, 256, &x) && (c->workers = (int)x, 1);
  if (!strcmp(key, "threads")) return int_value(v, 1, 1024, &x) && (c->threads = (int)x, 1);
  if (!strcmp(key, "pad_to_max")) return int_value(v, 0, 1, &x) && (c->pad_to_max = (int)x, 1);
  if (!strcmp(key, "max_running")) return int_value(v, 1, 256, &x) && (c->max_running = (int)x, 1);
  if (!strcmp(key, "max_tokens")) return int_value(v, 0, 1 << 24, &x) && (c->max_tokens = (int)x, 1);
  if (!strcmp(key, "max_length")) return int_value(v, 0, 1 << 24, &x) && (c->max_length = (int)x, 1);
  if (!strcmp(key, "continuous_batching")) return int_value(v, 0, 1, &x) && (c->continuous_batching = (int)x, 1);
  if (!strcmp(key, "kv_block_size")) return int_value(v, 0, 1 << 16, &x) && (c->kv_block_size = (int)x, 1);
  if (!strcmp(key, "prefill_chunk")) return int_value(v, 0, 1 << 24, &x) && (c->prefill_chunk = (int)x, 1);
  if (!strcmp(key, "prefill_budget")) return int_value(v, 0, 1 << 24, &x) && (c->prefill_budget = (int)x, 1);
  if (!strcmp(key, "kv_budget")) return int_value(v, 0, INT64_MAX, &c->kv_budget);
  if (!strcmp(key, "kv_dtype")) return (!strcmp(v, "f32") || !strcmp(v, "f16")) && (c->kv_f16 = v[1] == '1', 1);
  if (!strcmp(key, "queue_delay_us")) return int_value(v, 0, 60000000, &c->queue_delay_us);
  if (!strcmp(key, "max_queue")) return int_value(v, 1, 1 << 24, &c->max_queue);
  if (!strcmp(key, "timeout_us")) return int_value(v, 0, INT64_MAX / 2, &c->timeout_us);
  if (!strcmp(key, "pool_limit")) return int_value(v, 0, INT64_MAX, &c->pool_limit);
  if (!strcmp(key, "pad_value")) {
    char *colon = strrchr(v, ':'), *end;
    if (!colon || c->npad_inputs == DVMS_MAX_IO) return 0;
    *colon = 0;
    double d = strtod(colon + 1, &end);
    if (end == colon + 1 || *end || !isfinite(d)) return 0; /* 1e400 is no pad value */
    c->pad_value[c->npad_inputs] = d;
    return copy(c->pad_input[c->npad_inputs++], sizeof c->pad_input[0], trim(v));
  }
  if (!strcmp(key, "pad_buckets")) {
    c->nbuckets = 0;
    for (char *t = strtok(v, " \t,"); t; t = strtok(NULL, " \t,")) {
      if (c->nbuckets == DVMS_MAX_BUCKETS || !int_value(t, 1, INT64_MAX, &x)) return 0;
      if (c->nbuckets && x <= c->buckets[c->nbuckets - 1]) return 0;
      c->buckets[c->nbuckets++] = x;
    }
    return c->nbuckets > 0;
  }
  return -1;
}

dvm_status *dvms_config_read(const char *path, dvms_config *c) {
  FILE *f = fopen(path, "r");
  if (!f) return dvm_status_new(DVM_IO, "%s: cannot open", path);
  char line[512];
  dvm_status *st = NULL;
  for (int n = 1; !st && fgets(line, sizeof line, f); n++) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = trim(line);
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s:%d: expected KEY = VALUE", path, n);
      break;
    }
    *eq = 0;
    char *key = trim(s), *value = trim(eq + 1);
    int ok = set(c, key, value);
    if (ok < 0) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s:%d: unknown key \"%s\"", path, n, key);
    else if (!ok) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s:%d: bad value for %s", path, n, key);
  }
  fclose(f);
  return st;
}
