/* Text to token ids and back, as the Hugging Face `tokenizers` library
 * does for a model folder's tokenizer.json: the BPE tokenizers of the
 * Llama, Mistral, Phi-3, Qwen2 and Gemma families (byte-level BPE with a
 * regex pre-tokenizer, and SentencePiece-style BPE with byte fallback).
 * docs/generation.md lists the components read; any other is an error
 * that names it and the file, never a different encoding.
 *
 * A tokenizer is immutable once loaded: any number of threads may encode
 * and decode with it at once. A stream belongs to one thread at a time. */
#ifndef DVM_TOKENIZER_H
#define DVM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dvm_tokenizer dvm_tokenizer;
typedef struct dvm_tokenizer_stream dvm_tokenizer_stream;

/* Loads `path`: a tokenizer.json file, or a folder holding one. *out is
 * freed with dvm_tokenizer_free. */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_load(const char *path, dvm_tokenizer **out);
/* The same from tokenizer.json's bytes (`name` names them in messages). */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_load_json(const char *json, size_t len, const char *name,
                                                         dvm_tokenizer **out);
DVM_API void dvm_tokenizer_free(dvm_tokenizer *t); /* NULL is fine */

/* The ids of `len` bytes of UTF-8 text (invalid UTF-8 is an error naming
 * the byte). Added tokens are matched first; with add_special, the
 * post-processor's special tokens (a BOS) are added as its template says.
 * *ids (malloc'ed, *n of them; not NULL even for none) is the caller's to
 * free(). */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_encode(const dvm_tokenizer *t, const char *text, size_t len,
                                                      int add_special, int32_t **ids, size_t *n);

/* The text of n ids, NUL-terminated, *len bytes (malloc'ed; the caller
 * free()s it). skip_special leaves out special added tokens; an id that
 * is no token is left out, as the tokenizers library does. */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_decode(const dvm_tokenizer *t, const int32_t *ids, size_t n,
                                                      int skip_special, char **text, size_t *len);

/* The id of a token (added or of the vocabulary), or -1. */
DVM_API int32_t dvm_tokenizer_token_id(const dvm_tokenizer *t, const char *token);

/* Incremental decoding for streaming, like ONNX Runtime GenAI's
 * TokenizerStream: each id gives the text it adds to what came before,
 * and nothing while its bytes do not yet end a character, so the pieces
 * joined are the decode of all the ids. The stream borrows t. */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_stream_create(const dvm_tokenizer *t, int skip_special,
                                                             dvm_tokenizer_stream **out);
/* *text (*len bytes, NUL-terminated) is borrowed until the next call. */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_stream_put(dvm_tokenizer_stream *s, int32_t id, const char **text,
                                                          size_t *len);
/* At the end of the ids: the text still held back (a character left
 * incomplete by the last ids, as U+FFFD), borrowed as above. */
DVM_API DVM_MUST_USE dvm_status *dvm_tokenizer_stream_finish(dvm_tokenizer_stream *s, const char **text, size_t *len);
DVM_API void dvm_tokenizer_stream_free(dvm_tokenizer_stream *s); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
