/* genai_config.json, as ONNX Runtime GenAI's model builder writes it, read
 * with jansson against one table of the fields the generator knows: each
 * is used, ignored (it does not change what a greedy or sampling decoder
 * computes) or refused unless it has the value the generator implements.
 * A field the table does not name is refused too, so a config for
 * something else (paged attention, sliding windows, embeddings as input)
 * is an error rather than a silently different model. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "genimpl.h"

typedef enum { F_OBJ, F_INT, F_I64, F_NUM, F_BOOL, F_NAME, F_FMT, F_EOS, F_NONE, F_IGNORED } ftype;

#define AT(f) offsetof(dvm_generator_config, f)
#define NONE ((size_t)-1)

typedef struct field {
  const char *path;
  ftype type;
  int required;
  size_t off;       /* where it goes; NONE: checked only */
  double lo, hi;    /* the range of a number, int or bool (0, 1) */
  const char *why;  /* said when the value is out of range */
} field;

static const char beams[] = "beam search is not supported";
static const field fields[] = {
    {"model", F_OBJ, 1, NONE, 0, 0, NULL},
    {"model.type", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.bos_token_id", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.bot_token_id", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.eot_token_id", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.bor_token_id", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.eor_token_id", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.context_length", F_INT, 1, AT(context_length), 1, 1 << 30, NULL},
    {"model.eos_token_id", F_EOS, 1, NONE, 0, 0, NULL},
    {"model.pad_token_id", F_INT, 0, AT(pad), 0, 1 << 30, NULL},
    {"model.vocab_size", F_INT, 1, AT(vocab_size), 1, 1 << 30, NULL},
    {"model.decoder", F_OBJ, 1, NONE, 0, 0, NULL},
    {"model.decoder.session_options", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.decoder.filename", F_NAME, 1, AT(filename), 0, 0, NULL},
    {"model.decoder.head_size", F_INT, 1, AT(head_size), 1, 1 << 16, NULL},
    {"model.decoder.hidden_size", F_INT, 0, NONE, 1, 1 << 24, NULL},
    {"model.decoder.num_attention_heads", F_INT, 1, AT(num_heads), 1, 1 << 16, NULL},
    {"model.decoder.num_key_value_heads", F_INT, 1, AT(kv_heads), 1, 1 << 16, NULL},
    {"model.decoder.num_hidden_layers", F_INT, 1, AT(layers), 1, 1 << 16, NULL},
    /* the builder writes it for models with a window (Mistral) even when no layer uses it */
    {"model.decoder.sliding_window", F_OBJ, 0, NONE, 0, 0, NULL},
    {"model.decoder.sliding_window.layers", F_NONE, 0, NONE, 0, 0, "sliding-window attention is not supported"},
    {"model.decoder.sliding_window.window_size", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.decoder.sliding_window.slide_key_value_cache", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.decoder.sliding_window.slide_inputs", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.decoder.sliding_window.cache_slack", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"model.decoder.inputs", F_OBJ, 1, NONE, 0, 0, NULL},
    {"model.decoder.inputs.input_ids", F_NAME, 1, AT(input_ids), 0, 0, NULL},
    {"model.decoder.inputs.attention_mask", F_NAME, 1, AT(attention_mask), 0, 0, NULL},
    {"model.decoder.inputs.position_ids", F_NAME, 0, AT(position_ids), 0, 0, NULL},
    {"model.decoder.inputs.past_key_names", F_FMT, 1, AT(past_key), 0, 0, NULL},
    {"model.decoder.inputs.past_value_names", F_FMT, 1, AT(past_value), 0, 0, NULL},
    {"model.decoder.outputs", F_OBJ, 1, NONE, 0, 0, NULL},
    {"model.decoder.outputs.logits", F_NAME, 1, AT(logits), 0, 0, NULL},
    {"model.decoder.outputs.present_key_names", F_FMT, 1, AT(present_key), 0, 0, NULL},
    {"model.decoder.outputs.present_value_names", F_FMT, 1, AT(present_value), 0, 0, NULL},
    {"search", F_OBJ, 0, NONE, 0, 0, NULL},
    {"search.max_length", F_INT, 0, AT(max_length), 1, 1 << 30, NULL},
    {"search.min_length", F_INT, 0, AT(min_length), 0, 1 << 30, NULL},
    {"search.do_sample", F_BOOL, 0, AT(do_sample), 0, 1, NULL},
    {"search.top_k", F_INT, 0, AT(top_k), 0, 1 << 30, NULL},
    {"search.top_p", F_NUM, 0, AT(top_p), 0, 1, NULL},
    {"search.temperature", F_NUM, 0, AT(temperature), 1e-6, 1e6, NULL},
    {"search.repetition_penalty", F_NUM, 0, AT(repetition_penalty), 1e-6, 1e6, NULL},
    {"search.random_seed", F_I64, 0, AT(seed), -1, 9007199254740992.0, NULL},
    {"search.num_beams", F_INT, 0, NONE, 1, 1, beams},
    {"search.num_return_sequences", F_INT, 0, NONE, 1, 1, "one sequence per prompt"},
    {"search.no_repeat_ngram_size", F_INT, 0, NONE, 0, 0, "n-gram blocking is not supported"},
    {"search.past_present_share_buffer", F_BOOL, 0, AT(share_buffer), 0, 1, NULL},
    /* beam search's alone */
    {"search.diversity_penalty", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"search.length_penalty", F_IGNORED, 0, NONE, 0, 0, NULL},
    {"search.early_stopping", F_IGNORED, 0, NONE, 0, 0, NULL},
};
enum { NFIELDS = sizeof fields / sizeof fields[0] };

typedef struct reader {
  const char *file;
  dvm_generator_config *c;
  int seen[NFIELDS];
} reader;

static dvm_status *bad(const reader *r, const char *path, const char *what) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s: %s", r->file, path, what);
}

/* A name: a plain string, or a format with exactly one %d. */
static dvm_status *read_name(const reader *r, const field *f, const json_t *v, char *dst, size_t size) {
  const char *s = json_string_value(v);
  if (!s || !*s) return bad(r, f->path, "must be a non-empty string");
  if (strlen(s) >= size) return bad(r, f->path, "is too long");
  const char *pct = strchr(s, '%');
  int one_d = pct && pct[1] == 'd' && !strchr(pct + 1, '%');
  if (f->type == F_FMT ? !one_d : pct != NULL)
    return bad(r, f->path, f->type == F_FMT ? "must hold exactly one %d (the layer) and no other %"
                                            : "must not hold a %");
  memcpy(dst, s, strlen(s) + 1);
  return NULL;
}

static dvm_status *read_number(const reader *r, const field *f, const json_t *v, double *x) {
  if (f->type == F_BOOL ? !json_is_boolean(v) : f->type != F_NUM ? !json_is_integer(v) : !json_is_number(v))
    return bad(r, f->path, f->type == F_BOOL ? "must be true or false" : f->type != F_NUM ? "must be an integer"
                                                                                      : "must be a number");
  *x = f->type == F_BOOL ? json_is_true(v) : json_number_value(v);
  if (*x < f->lo || *x > f->hi) {
    char msg[256];
    if (f->type == F_BOOL) snprintf(msg, sizeof msg, "must be %s%s%s", f->lo ? "true" : "false", f->why ? ": " : "", f->why ? f->why : "");
    else snprintf(msg, sizeof msg, "%.17g is out of range [%.17g, %.17g]%s%s", *x, f->lo, f->hi, f->why ? ": " : "", f->why ? f->why : "");
    return bad(r, f->path, msg);
  }
  return NULL;
}

static dvm_status *read_eos(const reader *r, const field *f, const json_t *v) {
  dvm_generator_config *c = r->c;
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (n == 0 || n > DVM_GENERATOR_MAX_EOS) return bad(r, f->path, "must name 1 to 16 tokens");
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
    if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > (1 << 30))
      return bad(r, f->path, "must be a token id or an array of them");
    c->eos[i] = (int)json_integer_value(e);
  }
  c->neos = (int)n;
  return NULL;
}

static dvm_status *read_object(reader *r, const char *path, const json_t *obj) {
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    char full[256];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    int i = 0;
    while (i < NFIELDS && strcmp(fields[i].path, full) != 0) i++;
    if (i == NFIELDS) return bad(r, full, "unknown field (not one the generator supports)");
    const field *f = &fields[i];
    r->seen[i] = 1;
    dvm_status *st = NULL;
    double x = 0;
    char *dst = f->off == NONE ? NULL : (char *)r->c + f->off;
    switch (f->type) {
    case F_OBJ:
      st = json_is_object(v) ? read_object(r, full, v) : bad(r, full, "must be an object");
      break;
    case F_NAME: case F_FMT: st = read_name(r, f, v, dst, 128); break;
    case F_EOS: st = read_eos(r, f, v); break;
    case F_NONE:
      if (!json_is_array(v) || json_array_size(v)) {
        char msg[160];
        snprintf(msg, sizeof msg, "must be an empty list: %s", f->why);
        st = bad(r, full, msg);
      }
      break;
    case F_IGNORED: break;
    default:
      if ((st = read_number(r, f, v, &x)) || !dst) break;
      if (f->type == F_NUM) *(double *)dst = x;
      else if (f->type == F_I64) *(int64_t *)dst = json_integer_value(v);
      else *(int *)dst = (int)x;
    }
    if (st) return st;
  }
  return NULL;
}

dvm_status *dvm_generator_config_read(const char *path, dvm_generator_config *out) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) {
    FILE *f = fopen(path, "rb");
    if (!f) return dvm_status_new(DVM_NOT_FOUND, "%s: cannot open: %s", path, err.text);
    fclose(f);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: line %d: %s", path, err.line, err.text);
  }
  *out = (dvm_generator_config){.pad = -1, .top_k = 50, .top_p = 1.0, .temperature = 1.0,
                          .repetition_penalty = 1.0, .seed = -1, .logprobs = -1};
  const char *base = strrchr(path, '/');
  reader r = {.file = base ? base + 1 : path, .c = out};
  dvm_status *st = json_is_object(root) ? read_object(&r, "", root) : bad(&r, "(top)", "must be an object");
  for (int i = 0; !st && i < NFIELDS; i++)
    if (fields[i].required && !r.seen[i]) st = bad(&r, fields[i].path, "missing");
  json_decref(root);
  if (st) return st;
  if (out->filename[strcspn(out->filename, "/")] || strcmp(out->filename, "..") == 0)
    return bad(&r, "model.decoder.filename", "must be a file name in the model folder");
  if (out->num_heads % out->kv_heads)
    return bad(&r, "model.decoder.num_key_value_heads", "must divide num_attention_heads");
  for (int e = 0; e < out->neos; e++)
    if (out->eos[e] >= out->vocab_size) return bad(&r, "model.eos_token_id", "is outside the vocabulary (model.vocab_size)");
  if (!out->max_length) out->max_length = out->context_length;
  if (out->max_length > out->context_length)
    return bad(&r, "search.max_length", "exceeds model.context_length");
  return NULL;
}
