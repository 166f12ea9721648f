/* The tokenizer's parts (dvm/tokenizer.h), shared by the files of gen/ that
 * make it: tokload.c reads tokenizer.json into the tables below, toknorm.c
 * normalizes, tokpre.c pre-tokenizes, tokbpe.c runs the BPE model,
 * tokdecode.c turns tokens back into text, tokmap.c holds the hash maps,
 * tokre.c the regular expressions, tokenizer.c ties them together. Each
 * component of tokenizer.json becomes a flat list of steps (a Sequence is
 * its members in order). */
#ifndef DVM_GEN_TOKIMPL_H
#define DVM_GEN_TOKIMPL_H

#include <stddef.h>
#include <stdint.h>

#include "dvm/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

static inline dvm_status *tok_oom(void) { return dvm_status_new(DVM_OUT_OF_MEMORY, ""); }

/* A growable byte string. */
typedef struct tok_buf {
  char *p;
  size_t len, cap;
} tok_buf;

int tok_buf_put(tok_buf *b, const void *s, size_t n); /* 0: out of memory */

/* A list of pieces of text: spans of one buffer. `first` marks a piece
 * that starts where the input did (Metaspace's prepend_scheme "first"). */
typedef struct tok_span {
  size_t off, len;
  int first;
} tok_span;

typedef struct tok_pieces {
  tok_buf text;
  tok_span *s;
  size_t n, cap;
} tok_pieces;

int tok_pieces_add(tok_pieces *p, const char *s, size_t n, int first); /* 0: out of memory */

/* A pattern of tokenizer.json: {"String": s} (literal) or {"Regex": r}. */
typedef struct tok_re {
  pcre2_code *code;
  pcre2_match_context *limits; /* a bound on backtracking, so no pattern runs for ever */
} tok_re;

/* Calls f for each match of re in s[0..n), in order, non-overlapping, as
 * the tokenizers library's find_iter (an empty match moves on one
 * character); f returns 0 to stop. Returns 0 on a matching error. */
typedef int (*tok_match_fn)(void *ctx, size_t start, size_t end);
int tok_re_each(const tok_re *re, pcre2_match_data *md, const char *s, size_t n, tok_match_fn f, void *ctx);
/* Appends s[0..n) to out with each match of re made `with` (a Replace
 * normalizer or decoder). `what` names the step in the error. */
dvm_status *tok_re_replace(const tok_re *re, pcre2_match_data *md, const char *s, size_t n, const char *with,
                           const char *what, tok_buf *out);

/* String -> int32 map, keys copied. */
typedef struct tok_strmap {
  struct tok_strslot *slot;
  size_t cap, n;
  tok_buf keys;
} tok_strmap;

int tok_strmap_put(tok_strmap *m, const char *s, size_t n, int32_t v); /* 0: out of memory */
int32_t tok_strmap_get(const tok_strmap *m, const char *s, size_t n);  /* -1: absent */
void tok_strmap_free(tok_strmap *m);

/* (left id, right id) -> (rank, merged id). */
typedef struct tok_pairmap {
  struct tok_pairslot *slot;
  size_t cap, n;
} tok_pairmap;

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *id); /* 0: absent */
void tok_pairmap_free(tok_pairmap *m);

/* Normalizer steps. */
typedef enum { TN_NFC, TN_NFD, TN_NFKC, TN_NFKD, TN_PREPEND, TN_REPLACE } tok_norm_kind;
typedef struct tok_norm {
  tok_norm_kind kind;
  tok_re re;         /* TN_REPLACE */
  const char *text;  /* TN_PREPEND: what is prepended; TN_REPLACE: the replacement */
} tok_norm;

/* Pre-tokenizer steps. */
typedef enum { TP_SPLIT, TP_BYTELEVEL, TP_METASPACE } tok_pre_kind;
typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_WITH_PREVIOUS, SPLIT_WITH_NEXT, SPLIT_CONTIGUOUS } tok_split_behavior;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } tok_prepend;
typedef struct tok_pre {
  tok_pre_kind kind;
  tok_re re;                   /* TP_SPLIT; TP_BYTELEVEL with use_regex: GPT-2's */
  tok_split_behavior behavior; /* TP_SPLIT */
  int invert;                  /* TP_SPLIT */
  int add_prefix_space;        /* TP_BYTELEVEL */
  int use_regex;               /* TP_BYTELEVEL */
  tok_prepend prepend;         /* TP_METASPACE */
  int split;                   /* TP_METASPACE */
  char rep[8];                 /* TP_METASPACE: the replacement character, UTF-8 */
} tok_pre;

/* Decoder steps. */
typedef enum { TD_BYTELEVEL, TD_METASPACE, TD_REPLACE, TD_BYTEFALLBACK, TD_FUSE, TD_STRIP } tok_dec_kind;
typedef struct tok_dec {
  tok_dec_kind kind;
  tok_re re;           /* TD_REPLACE */
  const char *text;    /* TD_REPLACE: the replacement */
  char rep[8];         /* TD_METASPACE: the replacement character; TD_STRIP: content */
  tok_prepend prepend; /* TD_METASPACE */
  int start, stop;     /* TD_STRIP */
} tok_dec;

/* An added token of tokenizer.json's "added_tokens". */
typedef struct tok_added {
  const char *content; /* as written */
  const char *match;   /* what is matched: content, normalized when `normalized` */
  size_t match_len;
  int32_t id;
  int special, normalized, single_word, lstrip, rstrip;
} tok_added;

struct dvm_tokenizer {
  char **owned;      /* the strings the steps and added tokens point to */
  size_t n_owned;
  tok_norm *norm;
  size_t n_norm;
  tok_pre *pre;
  size_t n_pre;
  tok_dec *dec;
  size_t n_dec;
  int has_decoder;
  /* the post-processor's single-sequence template, flattened: ids, with
   * TEMPLATE_SEQ where the text's ids go */
  int32_t *tmpl;
  size_t n_tmpl;
  tok_added *added;
  size_t n_added;
  /* the BPE model */
  tok_strmap vocab;
  tok_buf vocab_text;  /* the vocabulary's tokens, NUL-separated */
  const char **id_token; /* id -> token (model vocabulary), NULL for a hole */
  int32_t n_ids;       /* ids below this may have a token */
  tok_pairmap merges;
  int32_t unk;         /* -1: none */
  const char *unk_name;/* unk_token when it is not in the vocabulary (an error at encode) */
  int byte_fallback, fuse_unk, ignore_merges;
  int32_t byte_id[256];/* <0xXX> tokens for byte_fallback; -1 where absent */
  int32_t max_id;      /* the largest id of the model or an added token */
};

#define TEMPLATE_SEQ INT32_MIN

/* Each returns NULL or an error; `piece` is one piece of text, `first`
 * whether it starts the input. */
dvm_status *tok_normalize(const dvm_tokenizer *t, pcre2_match_data *md, const char *s, size_t n, tok_buf *out);
dvm_status *tok_pretokenize(const dvm_tokenizer *t, pcre2_match_data *md, const char *s, size_t n, int first,
                            tok_pieces *out);
dvm_status *tok_bpe(const dvm_tokenizer *t, const char *word, size_t n, int32_t **ids, size_t *n_ids, size_t *cap);
dvm_status *tok_decode_tokens(const dvm_tokenizer *t, pcre2_match_data *md, const char **tokens, size_t n,
                              tok_buf *out);

/* Reads tokenizer.json's text (`name` is the file, for messages). */
dvm_status *tok_load(const char *json, size_t len, const char *name, dvm_tokenizer *t);
void tok_clear(dvm_tokenizer *t);

/* UTF-8 helpers (tokdecode.c): the length of the valid character at s
 * (0 if none), and s made valid as Rust's from_utf8_lossy does. */
size_t tok_utf8_char(const unsigned char *s, size_t n);
int tok_utf8_lossy(const char *s, size_t n, tok_buf *out);
/* ByteLevel's printable character for a byte, in UTF-8 (1 or 2 bytes
 * written to c; returns how many), and the byte of such a character
 * (code point cp), or -1 for any other. */
size_t tok_bytelevel_char(unsigned char byte, char c[2]);
int tok_bytelevel_byte(uint32_t cp);

#endif
