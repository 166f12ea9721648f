/* A choice's log-probabilities as OpenAI writes them: completions'
 * {"tokens", "token_logprobs", "top_logprobs", "text_offset"} and chat's
 * {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}, from what
 * the engine kept of each token (dvm_generator_logprobs) and the text the
 * tokenizer's stream gave each chosen token, so that the tokens' texts
 * joined are the answer's text. An alternative's text is its decode after
 * the token before it (a SentencePiece decoder drops the space a token
 * alone begins with), or alone when that decode does not extend the
 * previous one's (a character split between tokens). */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

void dvms_logprobs_piece(dvms_logprobs *lp, const char *piece, size_t len) {
  dvms_buf_put(&lp->text, piece, len);
  lp->ends[lp->n++] = lp->text.len;
}

void dvms_logprobs_tail(dvms_logprobs *lp, const char *tail, size_t len) {
  if (!lp->n || !len) return;
  dvms_buf_put(&lp->text, tail, len);
  lp->ends[lp->n - 1] = lp->text.len;
}

void dvms_logprobs_cut(dvms_logprobs *lp, size_t at) {
  while (lp->n && (lp->n == 1 ? 0 : lp->ends[lp->n - 2]) >= at && lp->ends[lp->n - 1] > at) lp->n--;
}

int dvms_logprobs_ready(const dvms_logprobs *lp, size_t to) {
  int i = lp->sent;
  while (i < lp->n && lp->ends[i] <= to) i++;
  return i;
}

void dvms_logprobs_free(dvms_logprobs *lp) {
  dvms_buf_free(&lp->text);
  free(lp->ends);
  *lp = (dvms_logprobs){0};
}

/* vLLM's floor: a token the model rules out (-inf) or a NaN is written as
 * -9999, which JSON can carry. */
static void number(dvms_buf *b, float x) { dvms_buf_printf(b, "%.9g", x >= -9999.0f ? (double)x : -9999.0); }

/* The text of token `id` after token `prev` into out (emptied first). */
static void alternative(const dvm_tokenizer *tok, int32_t prev, int32_t id, dvms_buf *out) {
  int32_t ids[2] = {prev, id};
  char *both = NULL, *one = NULL;
  size_t nboth = 0, none = 0;
  out->len = 0;
  dvm_status *st = dvm_tokenizer_decode(tok, ids, 2, 0, &both, &nboth);
  if (!st) st = dvm_tokenizer_decode(tok, ids, 1, 0, &one, &none);
  if (!st && nboth >= none && !memcmp(both, one, none)) {
    dvms_buf_put(out, both + none, nboth - none);
  } else if (!st) {
    free(both);
    both = NULL;
    if (!(st = dvm_tokenizer_decode(tok, ids + 1, 1, 0, &both, &nboth))) dvms_buf_put(out, both, nboth);
  }
  if (st) out->failed = 1; /* only memory fails here (the ids are the vocabulary's) */
  dvm_status_free(st);
  free(both);
  free(one);
  if (!out->data) dvms_buf_put(out, "", 0);
}

/* A chat entry: {"token", "logprob", "bytes"} (open: the caller closes it). */
static void chat_entry(dvms_buf *b, const char *text, size_t len, float logprob) {
  DVMS_PUT(b, "{\"token\":");
  dvms_buf_json_stringn(b, text, len);
  DVMS_PUT(b, ",\"logprob\":");
  number(b, logprob);
  DVMS_PUT(b, ",\"bytes\":[");
  for (size_t i = 0; i < len; i++) dvms_buf_printf(b, "%s%u", i ? "," : "", (unsigned char)text[i]);
  DVMS_PUT(b, "]");
}

/* Token e's alternatives (its text `text`, len bytes, after token prev),
 * inside the caller's brackets: chat's {"token", "logprob", "bytes"}
 * entries, or completions' text: logprob members of the k and the token
 * chosen, as OpenAI's dict holds it too. alt is the caller's scratch. */
static void alternatives(dvms_buf *b, const dvm_generator_logprobs *e, const char *text, size_t len, int32_t prev,
                         const dvm_tokenizer *tok, int chat, dvms_buf *alt) {
  int chosen = 0;
  for (int j = 0; j < e->k; j++) {
    if (j) DVMS_PUT(b, ",");
    if (e->top[j] == e->token) {
      alt->len = 0;
      dvms_buf_put(alt, text, len);
      chosen = 1;
    } else {
      alternative(tok, prev, e->top[j], alt);
    }
    if (chat) {
      chat_entry(b, alt->data, alt->len, e->top_logprob[j]);
      DVMS_PUT(b, "}");
    } else {
      dvms_buf_json_stringn(b, alt->data, alt->len);
      DVMS_PUT(b, ":");
      number(b, e->top_logprob[j]);
    }
  }
  if (!chat && !chosen) {
    if (e->k) DVMS_PUT(b, ",");
    dvms_buf_json_stringn(b, text, len);
    DVMS_PUT(b, ":");
    number(b, e->logprob);
  }
}

void dvms_logprobs_write(dvms_buf *b, dvms_logprobs *lp, const dvms_gen *g, const dvm_tokenizer *tok, int chat,
                         int upto) {
  dvms_buf alt = {0};
  static const char *const lists[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
  for (int pass = chat ? 2 : 0; pass < (chat ? 3 : 4); pass++) { /* chat's list is its entries' */
    dvms_buf_printf(b, "%s\"%s\":[", pass == (chat ? 2 : 0) ? "{" : "],", chat ? "content" : lists[pass]);
    long chars = lp->chars;
    for (int i = lp->sent; i < upto; i++) {
      const dvm_generator_logprobs *e = &g->logprobs[i];
      size_t start = i ? lp->ends[i - 1] : 0;
      const char *text = lp->text.data + start;
      size_t len = lp->ends[i] - start;
      int32_t prev = i ? g->tokens[i - 1] : g->prompt[g->nprompt - 1];
      if (i > lp->sent) DVMS_PUT(b, ",");
      if (pass == 0) {
        dvms_buf_json_stringn(b, text, len);
      } else if (pass == 1) {
        number(b, e->logprob);
      } else if (pass == 3) {
        dvms_buf_printf(b, "%ld", chars);
      } else if (chat) {
        chat_entry(b, text, len, e->logprob);
        DVMS_PUT(b, ",\"top_logprobs\":[");
        alternatives(b, e, text, len, prev, tok, chat, &alt);
        DVMS_PUT(b, "]}");
      } else {
        DVMS_PUT(b, "{");
        alternatives(b, e, text, len, prev, tok, chat, &alt);
        DVMS_PUT(b, "}");
      }
      for (size_t c = 0; c < len; c++) /* characters (code points), as Python counts them */
        chars += ((unsigned char)text[c] & 0xC0) != 0x80;
    }
    if (pass == 3) lp->chars = chars;
  }
  DVMS_PUT(b, "]}");
  if (alt.failed) b->failed = 1;
  dvms_buf_free(&alt);
  lp->sent = upto;
}
