/* tokenizer.json, as the Hugging Face tokenizers library writes it, read
 * with jansson into the steps of tokimpl.h. Each component's "type" is
 * looked up in a table of those dvm implements; any other, and any
 * setting that would change the encoding in a way dvm does not implement,
 * is an error naming the file, the place and the value. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokimpl.h"

#define MAX_ID (1 << 22) /* ids are below this (the largest vocabularies are ~256K) */

/* GPT-2's pre-tokenization pattern, which ByteLevel's use_regex means. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct {
  const char *file;
  dvm_tokenizer *t;
} loader;

static dvm_status *bad(const loader *L, dvm_code code, const char *where, const char *fmt, ...) DVM_PRINTF(4, 5);
static dvm_status *bad(const loader *L, dvm_code code, const char *where, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dvm_status_new(code, "%s: %s: %s", L->file, where, msg);
}

/* A copy of s that the tokenizer owns. */
static char *keep(dvm_tokenizer *t, const char *s, size_t n) {
  char **o = realloc(t->owned, (t->n_owned + 1) * sizeof *o);
  if (!o) return NULL;
  t->owned = o;
  char *c = malloc(n + 1);
  if (!c) return NULL;
  memcpy(c, s, n);
  c[n] = 0;
  return t->owned[t->n_owned++] = c;
}

static const char *type_of(const json_t *j) {
  const char *s = json_string_value(json_object_get(j, "type"));
  return s ? s : "";
}

/* A string field; NULL (and *st set) when missing or not a string. */
static const char *str_field(const loader *L, const json_t *j, const char *key, const char *where, dvm_status **st) {
  const json_t *v = json_object_get(j, key);
  if (json_is_string(v)) return json_string_value(v);
  *st = bad(L, DVM_CORRUPT, where, "\"%s\" must be a string", key);
  return NULL;
}

/* A boolean field; `dflt` when missing. -1 (and *st set) when not a boolean. */
static int bool_field(const loader *L, const json_t *j, const char *key, int dflt, const char *where, dvm_status **st) {
  const json_t *v = json_object_get(j, key);
  if (!v) return dflt;
  if (json_is_boolean(v)) return json_is_true(v);
  *st = bad(L, DVM_CORRUPT, where, "\"%s\" must be true or false", key);
  return -1;
}

static dvm_status *compile(const loader *L, const char *pattern, size_t len, int literal, const char *where, tok_re *re) {
  int err;
  PCRE2_SIZE at;
  re->code = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP), &err, &at, NULL);
  if (!re->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return err == PCRE2_ERROR_NOMEMORY ? tok_oom()
                                       : bad(L, DVM_UNIMPLEMENTED, where, "pattern \"%s\" at %zu: %s", pattern, (size_t)at, msg);
  }
  pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* without a JIT it is interpreted: the same matches */
  if (!(re->limits = pcre2_match_context_create(NULL))) return tok_oom();
  pcre2_set_match_limit(re->limits, 1000000);
  return NULL;
}

/* {"String": s} or {"Regex": r}. */
static dvm_status *pattern(const loader *L, const json_t *j, const char *where, tok_re *re) {
  const json_t *p = json_object_get(j, "pattern");
  const json_t *s = json_object_get(p, "String"), *r = json_object_get(p, "Regex");
  if (json_is_string(s)) return compile(L, json_string_value(s), json_string_length(s), 1, where, re);
  if (json_is_string(r)) return compile(L, json_string_value(r), json_string_length(r), 0, where, re);
  return bad(L, DVM_CORRUPT, where, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
}

/* One character, as Metaspace's replacement and Strip's content are. */
static dvm_status *one_char(const loader *L, const json_t *j, const char *key, const char *where, char out[8]) {
  dvm_status *st = NULL;
  const char *s = str_field(L, j, key, where, &st);
  if (st) return st;
  size_t n = strlen(s);
  if (!n || tok_utf8_char((const unsigned char *)s, n) != n)
    return bad(L, DVM_CORRUPT, where, "\"%s\" must be one character, got \"%s\"", key, s);
  memcpy(out, s, n + 1);
  return NULL;
}

static dvm_status *prepend_scheme(const loader *L, const json_t *j, const char *where, tok_prepend *out) {
  const json_t *s = json_object_get(j, "prepend_scheme");
  if (!s) { /* files before prepend_scheme: add_prefix_space */
    dvm_status *st = NULL;
    int a = bool_field(L, j, "add_prefix_space", 1, where, &st);
    *out = a ? PREPEND_ALWAYS : PREPEND_NEVER;
    return st;
  }
  static const char *const names[] = {[PREPEND_ALWAYS] = "always", [PREPEND_FIRST] = "first", [PREPEND_NEVER] = "never"};
  for (int i = 0; i < 3; i++)
    if (json_is_string(s) && strcmp(json_string_value(s), names[i]) == 0) {
      *out = (tok_prepend)i;
      return NULL;
    }
  return bad(L, DVM_CORRUPT, where, "\"prepend_scheme\" must be \"always\", \"first\" or \"never\"");
}

/* Appends the members of a component (one, or a Sequence's, flattened)
 * to a list of steps; `add` reads one member. */
typedef dvm_status *(*add_fn)(loader *L, const json_t *j, const char *where);

static dvm_status *members(loader *L, const json_t *j, const char *where, const char *seq_key, add_fn add) {
  if (json_is_null(j)) return NULL;
  if (!json_is_object(j)) return bad(L, DVM_CORRUPT, where, "expected an object or null");
  if (strcmp(type_of(j), "Sequence") != 0) return add(L, j, where);
  const json_t *list = json_object_get(j, seq_key);
  if (!json_is_array(list)) return bad(L, DVM_CORRUPT, where, "a Sequence needs the array \"%s\"", seq_key);
  for (size_t i = 0; i < json_array_size(list); i++) {
    char sub[256];
    snprintf(sub, sizeof sub, "%s.%s[%zu]", where, seq_key, i);
    dvm_status *st = members(L, json_array_get(list, i), sub, seq_key, add);
    if (st) return st;
  }
  return NULL;
}

static void *grow(void *p, size_t n, size_t size) { return realloc(p, (n + 1) * size); }

static dvm_status *add_norm(loader *L, const json_t *j, const char *where) {
  static const char *const forms[] = {[TN_NFC] = "NFC", [TN_NFD] = "NFD", [TN_NFKC] = "NFKC", [TN_NFKD] = "NFKD"};
  dvm_tokenizer *t = L->t;
  tok_norm *a = grow(t->norm, t->n_norm, sizeof *a);
  if (!a) return tok_oom();
  t->norm = a;
  tok_norm *k = memset(&a[t->n_norm], 0, sizeof *k);
  const char *type = type_of(j);
  dvm_status *st = NULL;
  for (int i = TN_NFC; i <= TN_NFKD; i++)
    if (strcmp(type, forms[i]) == 0) {
      k->kind = (tok_norm_kind)i;
      t->n_norm++;
      return NULL;
    }
  if (strcmp(type, "Prepend") == 0) {
    const char *s = str_field(L, j, "prepend", where, &st);
    if (st) return st;
    k->kind = TN_PREPEND;
    if (!(k->text = keep(t, s, strlen(s)))) return tok_oom();
  } else if (strcmp(type, "Replace") == 0) {
    const char *s = str_field(L, j, "content", where, &st);
    if (st) return st;
    k->kind = TN_REPLACE;
    if (!(k->text = keep(t, s, strlen(s)))) return tok_oom();
    if ((st = pattern(L, j, where, &k->re))) return st;
  } else {
    return bad(L, DVM_UNIMPLEMENTED, where, "normalizer type \"%s\" is not supported (dvm reads NFC, NFD, NFKC, NFKD, "
               "Prepend, Replace and Sequence)", type);
  }
  t->n_norm++;
  return NULL;
}

static dvm_status *add_pre(loader *L, const json_t *j, const char *where) {
  static const char *const behaviors[] = {[SPLIT_REMOVED] = "Removed", [SPLIT_ISOLATED] = "Isolated",
                                          [SPLIT_WITH_PREVIOUS] = "MergedWithPrevious",
                                          [SPLIT_WITH_NEXT] = "MergedWithNext", [SPLIT_CONTIGUOUS] = "Contiguous"};
  dvm_tokenizer *t = L->t;
  tok_pre *a = grow(t->pre, t->n_pre, sizeof *a);
  if (!a) return tok_oom();
  t->pre = a;
  tok_pre *k = memset(&a[t->n_pre], 0, sizeof *k);
  const char *type = type_of(j);
  dvm_status *st = NULL;
  if (strcmp(type, "Split") == 0) {
    k->kind = TP_SPLIT;
    const char *b = str_field(L, j, "behavior", where, &st);
    if (st) return st;
    k->behavior = (tok_split_behavior)-1;
    for (int i = 0; i < 5; i++)
      if (strcmp(b, behaviors[i]) == 0) k->behavior = (tok_split_behavior)i;
    if ((int)k->behavior < 0) return bad(L, DVM_CORRUPT, where, "unknown split behavior \"%s\"", b);
    k->invert = bool_field(L, j, "invert", 0, where, &st);
    if (!st) st = pattern(L, j, where, &k->re);
  } else if (strcmp(type, "ByteLevel") == 0) {
    k->kind = TP_BYTELEVEL;
    k->add_prefix_space = bool_field(L, j, "add_prefix_space", 1, where, &st);
    if (!st) k->use_regex = bool_field(L, j, "use_regex", 1, where, &st);
    if (!st && k->use_regex) st = compile(L, gpt2_pattern, sizeof gpt2_pattern - 1, 0, where, &k->re);
  } else if (strcmp(type, "Metaspace") == 0) {
    k->kind = TP_METASPACE;
    st = one_char(L, j, "replacement", where, k->rep);
    if (!st) st = prepend_scheme(L, j, where, &k->prepend);
    if (!st) k->split = bool_field(L, j, "split", 1, where, &st);
  } else if (strcmp(type, "Digits") == 0) { /* Rust's char::is_numeric is \p{N} */
    k->kind = TP_SPLIT;
    int individual = bool_field(L, j, "individual_digits", 0, where, &st);
    k->behavior = individual ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS;
    if (!st) st = compile(L, "\\p{N}", 5, 0, where, &k->re);
  } else {
    return bad(L, DVM_UNIMPLEMENTED, where, "pre-tokenizer type \"%s\" is not supported (dvm reads Split, ByteLevel, "
               "Metaspace, Digits and Sequence)", type);
  }
  t->n_pre++; /* counted even on an error, so that its pattern is freed */
  return st;
}

static dvm_status *add_dec(loader *L, const json_t *j, const char *where) {
  static const char *const plain[] = {[TD_BYTELEVEL] = "ByteLevel", [TD_BYTEFALLBACK] = "ByteFallback", [TD_FUSE] = "Fuse"};
  dvm_tokenizer *t = L->t;
  tok_dec *a = grow(t->dec, t->n_dec, sizeof *a);
  if (!a) return tok_oom();
  t->dec = a;
  tok_dec *k = memset(&a[t->n_dec], 0, sizeof *k);
  const char *type = type_of(j);
  dvm_status *st = NULL;
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
    if (plain[i] && strcmp(type, plain[i]) == 0) {
      k->kind = (tok_dec_kind)i;
      t->n_dec++;
      return NULL;
    }
  if (strcmp(type, "Metaspace") == 0) {
    k->kind = TD_METASPACE;
    st = one_char(L, j, "replacement", where, k->rep);
    if (!st) st = prepend_scheme(L, j, where, &k->prepend);
  } else if (strcmp(type, "Replace") == 0) {
    k->kind = TD_REPLACE;
    const char *s = str_field(L, j, "content", where, &st);
    if (!st && !(k->text = keep(t, s, strlen(s)))) return tok_oom();
    if (!st) st = pattern(L, j, where, &k->re);
  } else if (strcmp(type, "Strip") == 0) {
    k->kind = TD_STRIP;
    st = one_char(L, j, "content", where, k->rep);
    json_int_t start = json_integer_value(json_object_get(j, "start")), stop = json_integer_value(json_object_get(j, "stop"));
    if (!st && (!json_is_integer(json_object_get(j, "start")) || !json_is_integer(json_object_get(j, "stop")) ||
                start < 0 || stop < 0 || start > 1 << 20 || stop > 1 << 20))
      st = bad(L, DVM_CORRUPT, where, "\"start\" and \"stop\" must be counts");
    k->start = (int)start, k->stop = (int)stop;
  } else {
    return bad(L, DVM_UNIMPLEMENTED, where, "decoder type \"%s\" is not supported (dvm reads ByteLevel, Metaspace, "
               "Replace, ByteFallback, Fuse, Strip and Sequence)", type);
  }
  t->n_dec++;
  return st;
}

static dvm_status *tmpl_add(dvm_tokenizer *t, int32_t id) {
  int32_t *a = grow(t->tmpl, t->n_tmpl, sizeof *a);
  if (!a) return tok_oom();
  t->tmpl = a;
  t->tmpl[t->n_tmpl++] = id;
  return NULL;
}

/* [token, id] of BertProcessing and RobertaProcessing. */
static dvm_status *pair_id(loader *L, const json_t *j, const char *key, const char *where) {
  const json_t *p = json_object_get(j, key), *id = json_array_get(p, 1);
  if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= MAX_ID)
    return bad(L, DVM_CORRUPT, where, "\"%s\" must be [token, id]", key);
  return tmpl_add(L->t, (int32_t)json_integer_value(id));
}

static dvm_status *add_post(loader *L, const json_t *j, const char *where) {
  const char *type = type_of(j);
  dvm_tokenizer *t = L->t;
  dvm_status *st;
  if (strcmp(type, "ByteLevel") == 0) return NULL; /* it trims offsets only */
  if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
    if (t->n_tmpl) return bad(L, DVM_UNIMPLEMENTED, where, "a second template in a Sequence is not supported");
    if ((st = pair_id(L, j, "cls", where)) || (st = tmpl_add(t, TEMPLATE_SEQ))) return st;
    return pair_id(L, j, "sep", where);
  }
  if (strcmp(type, "TemplateProcessing") != 0)
    return bad(L, DVM_UNIMPLEMENTED, where, "post-processor type \"%s\" is not supported (dvm reads "
               "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and Sequence)", type);
  if (t->n_tmpl) return bad(L, DVM_UNIMPLEMENTED, where, "a second template in a Sequence is not supported");
  const json_t *single = json_object_get(j, "single"), *specials = json_object_get(j, "special_tokens");
  if (!json_is_array(single)) return bad(L, DVM_CORRUPT, where, "\"single\" must be an array");
  int seqs = 0;
  for (size_t i = 0; i < json_array_size(single); i++) {
    const json_t *item = json_array_get(single, i), *sp = json_object_get(item, "SpecialToken");
    if (json_object_get(item, "Sequence")) {
      if (seqs++) return bad(L, DVM_CORRUPT, where, "\"single\" names the sequence twice");
      if ((st = tmpl_add(t, TEMPLATE_SEQ))) return st;
      continue;
    }
    const char *name = json_string_value(json_object_get(sp, "id"));
    const json_t *ids = json_object_get(json_object_get(specials, name ? name : ""), "ids");
    if (!name || !json_is_array(ids))
      return bad(L, DVM_CORRUPT, where, "single[%zu]: a SpecialToken whose ids \"special_tokens\" does not give", i);
    for (size_t k = 0; k < json_array_size(ids); k++) {
      const json_t *id = json_array_get(ids, k);
      if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= MAX_ID)
        return bad(L, DVM_CORRUPT, where, "special_tokens \"%s\": ids[%zu] is not a token id", name, k);
      if ((st = tmpl_add(t, (int32_t)json_integer_value(id)))) return st;
    }
  }
  return seqs ? NULL : tmpl_add(t, TEMPLATE_SEQ); /* a template without the text would drop it */
}

/* The model: BPE's vocabulary and merges. */
static dvm_status *model(loader *L, const json_t *m) {
  dvm_tokenizer *t = L->t;
  dvm_status *st = NULL;
  if (!json_is_object(m)) return bad(L, DVM_CORRUPT, "model", "missing");
  if (strcmp(type_of(m), "BPE") != 0)
    return bad(L, DVM_UNIMPLEMENTED, "model", "type \"%s\" is not supported (dvm reads BPE)", type_of(m));
  const json_t *drop = json_object_get(m, "dropout");
  if (drop && !json_is_null(drop) && json_number_value(drop) != 0)
    return bad(L, DVM_UNIMPLEMENTED, "model", "dropout is not supported (it makes encoding random)");
  static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const json_t *a = json_object_get(m, affixes[i]);
    if (a && !json_is_null(a) && !(json_is_string(a) && !*json_string_value(a)))
      return bad(L, DVM_UNIMPLEMENTED, "model", "%s is not supported", affixes[i]);
  }
  t->byte_fallback = bool_field(L, m, "byte_fallback", 0, "model", &st);
  if (!st) t->fuse_unk = bool_field(L, m, "fuse_unk", 0, "model", &st);
  if (!st) t->ignore_merges = bool_field(L, m, "ignore_merges", 0, "model", &st);
  if (st) return st;
  const json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
  if (!json_is_object(vocab)) return bad(L, DVM_CORRUPT, "model.vocab", "must be an object of token: id");
  if (merges && !json_is_array(merges)) return bad(L, DVM_CORRUPT, "model.merges", "must be an array");
  const char *key;
  const json_t *v;
  size_t *offs = NULL;
  json_object_foreach((json_t *)vocab, key, v) {
    json_int_t id = json_integer_value(v);
    if (!json_is_integer(v) || id < 0 || id >= MAX_ID) {
      free(offs);
      return bad(L, DVM_CORRUPT, "model.vocab", "\"%s\": id must be an integer in [0, %d)", key, MAX_ID);
    }
    if (id >= t->n_ids) {
      size_t *o = realloc(offs, (size_t)(id + 1) * sizeof *o);
      if (!o) {
        free(offs);
        return tok_oom();
      }
      for (int32_t i = t->n_ids; i <= id; i++) o[i] = (size_t)-1;
      offs = o, t->n_ids = (int32_t)id + 1;
    }
    size_t len = strlen(key);
    offs[id] = t->vocab_text.len;
    if (!tok_strmap_put(&t->vocab, key, len, (int32_t)id) || !tok_buf_put(&t->vocab_text, key, len + 1)) {
      free(offs);
      return tok_oom();
    }
  }
  if (!(t->id_token = calloc(t->n_ids ? (size_t)t->n_ids : 1, sizeof *t->id_token))) {
    free(offs);
    return tok_oom();
  }
  for (int32_t i = 0; i < t->n_ids; i++)
    if (offs[i] != (size_t)-1) t->id_token[i] = t->vocab_text.p + offs[i];
  free(offs);
  t->max_id = t->n_ids - 1;
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_id[b] = tok_strmap_get(&t->vocab, name, 6);
  }
  const json_t *unk = json_object_get(m, "unk_token");
  t->unk = -1;
  if (json_is_string(unk)) {
    t->unk = tok_strmap_get(&t->vocab, json_string_value(unk), json_string_length(unk));
    if (t->unk < 0 && !(t->unk_name = keep(t, json_string_value(unk), json_string_length(unk)))) return tok_oom();
  } else if (unk && !json_is_null(unk)) {
    return bad(L, DVM_CORRUPT, "model", "\"unk_token\" must be a string or null");
  }
  tok_buf joined = {0};
  for (size_t i = 0; i < json_array_size(merges) && !st; i++) {
    const json_t *e = json_array_get(merges, i);
    const char *a, *b;
    size_t na, nb;
    if (json_is_string(e)) { /* "a b" */
      a = json_string_value(e);
      const char *sp = strchr(a, ' ');
      if (!sp) {
        st = bad(L, DVM_CORRUPT, "model.merges", "[%zu] \"%s\" is not two tokens and a space", i, a);
        break;
      }
      na = (size_t)(sp - a), b = sp + 1, nb = strlen(b);
    } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
               json_is_string(json_array_get(e, 1))) { /* [a, b], as transformers 5 writes */
      a = json_string_value(json_array_get(e, 0)), na = json_string_length(json_array_get(e, 0));
      b = json_string_value(json_array_get(e, 1)), nb = json_string_length(json_array_get(e, 1));
    } else {
      st = bad(L, DVM_CORRUPT, "model.merges", "[%zu] must be \"a b\" or [a, b]", i);
      break;
    }
    joined.len = 0;
    if (!tok_buf_put(&joined, a, na) || !tok_buf_put(&joined, b, nb)) {
      st = tok_oom();
      break;
    }
    int32_t ia = tok_strmap_get(&t->vocab, a, na), ib = tok_strmap_get(&t->vocab, b, nb),
            iab = tok_strmap_get(&t->vocab, joined.p, joined.len);
    if (ia < 0 || ib < 0 || iab < 0)
      st = bad(L, DVM_CORRUPT, "model.merges", "[%zu] \"%.*s\" + \"%.*s\": \"%s\" is not in the vocabulary", i, (int)na,
               a, (int)nb, b, ia < 0 ? "first" : ib < 0 ? "second" : joined.p);
    else if (!tok_pairmap_put(&t->merges, ia, ib, (int32_t)i, iab))
      st = tok_oom();
  }
  free(joined.p);
  return st;
}

/* "added_tokens": each content's id is the vocabulary's, else the next
 * free one, as the tokenizers library assigns them (it ignores "id"). */
static dvm_status *added(loader *L, const json_t *list, pcre2_match_data *md) {
  dvm_tokenizer *t = L->t;
  if (!list || json_is_null(list)) return NULL;
  if (!json_is_array(list)) return bad(L, DVM_CORRUPT, "added_tokens", "must be an array");
  int32_t next = (int32_t)t->vocab.n;
  t->added = calloc(json_array_size(list) + 1, sizeof *t->added);
  if (!t->added) return tok_oom();
  for (size_t i = 0; i < json_array_size(list); i++) {
    const json_t *e = json_array_get(list, i);
    char where[64];
    snprintf(where, sizeof where, "added_tokens[%zu]", i);
    dvm_status *st = NULL;
    const char *content = str_field(L, e, "content", where, &st);
    if (st) return st;
    if (!*content) continue; /* ignored, as in tokenizers */
    tok_added a = {0};
    a.special = bool_field(L, e, "special", 0, where, &st);
    if (!st) a.normalized = bool_field(L, e, "normalized", !a.special, where, &st);
    if (!st) a.single_word = bool_field(L, e, "single_word", 0, where, &st);
    if (!st) a.lstrip = bool_field(L, e, "lstrip", 0, where, &st);
    if (!st) a.rstrip = bool_field(L, e, "rstrip", 0, where, &st);
    if (st) return st;
    size_t k = 0;
    while (k < t->n_added && strcmp(t->added[k].content, content) != 0) k++;
    a.id = k < t->n_added ? t->added[k].id : tok_strmap_get(&t->vocab, content, strlen(content));
    if (a.id < 0) {
      if (next >= MAX_ID) return bad(L, DVM_CORRUPT, where, "too many tokens");
      a.id = next++;
    }
    if (!(a.content = keep(t, content, strlen(content)))) return tok_oom();
    a.match = a.content, a.match_len = strlen(content);
    if (a.normalized && t->n_norm) { /* matched as the normalizer makes it */
      tok_buf nb = {0};
      st = tok_normalize(t, md, content, strlen(content), &nb);
      if (!st && !(a.match = keep(t, nb.p, nb.len))) st = tok_oom();
      a.match_len = nb.len;
      free(nb.p);
      if (st) return st;
    }
    t->added[k] = a;
    if (k == t->n_added) t->n_added++;
    if (a.id > t->max_id) t->max_id = a.id;
  }
  return NULL;
}

dvm_status *tok_load(const char *text, size_t len, const char *name, dvm_tokenizer *t) {
  loader L = {name, t};
  json_error_t err;
  json_t *j = json_loadb(text, len, 0, &err);
  if (!j) return dvm_status_new(DVM_CORRUPT, "%s: line %d column %d: %s", name, err.line, err.column, err.text);
  dvm_status *st = NULL;
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  const json_t *trunc = json_object_get(j, "truncation"), *pad = json_object_get(j, "padding");
  if (!md) st = tok_oom();
  else if (!json_is_object(j)) st = bad(&L, DVM_CORRUPT, "(top)", "expected an object");
  else if (trunc && !json_is_null(trunc)) st = bad(&L, DVM_UNIMPLEMENTED, "truncation", "is not supported (must be null)");
  else if (pad && !json_is_null(pad) &&
           strcmp(json_string_value(json_object_get(pad, "strategy")) ? json_string_value(json_object_get(pad, "strategy")) : "", "BatchLongest") != 0)
    st = bad(&L, DVM_UNIMPLEMENTED, "padding", "only null or BatchLongest (which pads no single text) is supported");
  if (!st) st = model(&L, json_object_get(j, "model"));
  if (!st) st = members(&L, json_object_get(j, "normalizer"), "normalizer", "normalizers", add_norm);
  if (!st) st = members(&L, json_object_get(j, "pre_tokenizer"), "pre_tokenizer", "pretokenizers", add_pre);
  if (!st) st = members(&L, json_object_get(j, "post_processor"), "post_processor", "processors", add_post);
  if (!st) st = members(&L, json_object_get(j, "decoder"), "decoder", "decoders", add_dec);
  t->has_decoder = json_is_object(json_object_get(j, "decoder"));
  if (!st) st = added(&L, json_object_get(j, "added_tokens"), md);
  pcre2_match_data_free(md);
  json_decref(j);
  return st;
}

static void re_free(tok_re *re) {
  pcre2_code_free(re->code);
  pcre2_match_context_free(re->limits);
}

void tok_clear(dvm_tokenizer *t) {
  for (size_t i = 0; i < t->n_norm; i++) re_free(&t->norm[i].re);
  for (size_t i = 0; i < t->n_pre; i++) re_free(&t->pre[i].re);
  for (size_t i = 0; i < t->n_dec; i++) re_free(&t->dec[i].re);
  for (size_t i = 0; i < t->n_owned; i++) free(t->owned[i]);
  free(t->owned), free(t->norm), free(t->pre), free(t->dec), free(t->tmpl), free(t->added);
  free(t->vocab_text.p), free(t->id_token);
  tok_strmap_free(&t->vocab);
  tok_pairmap_free(&t->merges);
}
