/* Fuzz target for the tokenizer (dvm/tokenizer.h): the input is a
 * tokenizer.json, then a NUL byte and a text (without the NUL: the text
 * "Hello, wörld 42 <s>!"). Loading must give a tokenizer or an error
 * that names the file; a loaded tokenizer must encode the text or refuse
 * it with an invalid-argument error (invalid UTF-8, an unk_token missing
 * from the vocabulary); the ids must decode, and stream piece by piece
 * into valid UTF-8. A broken promise aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

static int valid_utf8(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t len = u[i] < 0x80 ? 1 : (u[i] & 0xE0) == 0xC0 ? 2 : (u[i] & 0xF0) == 0xE0 ? 3 : (u[i] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || i + len > n) return 0;
    for (size_t k = 1; k < len; k++)
      if ((u[i + k] & 0xC0) != 0x80) return 0;
    i += len;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char dflt[] = "Hello, w\xC3\xB6rld 42 <s>!";
  const uint8_t *nul = memchr(data, 0, size);
  size_t json_len = nul ? (size_t)(nul - data) : size;
  const char *text = nul ? (const char *)nul + 1 : dflt;
  size_t text_len = nul ? size - json_len - 1 : sizeof dflt - 1;
  dvm_tokenizer *t;
  dvm_status *st = dvm_tokenizer_load_json((const char *)data, json_len, "fuzz.json", &t);
  if (st) {
    dvm_code c = dvm_status_code(st);
    require(c == DVM_CORRUPT || c == DVM_UNIMPLEMENTED || c == DVM_OUT_OF_MEMORY);
    require(c == DVM_OUT_OF_MEMORY || strncmp(dvm_status_message(st), "fuzz.json: ", 11) == 0);
    dvm_status_free(st);
    return 0;
  }
  for (int special = 0; special < 2; special++) {
    int32_t *ids;
    size_t n;
    st = dvm_tokenizer_encode(t, text, text_len, special, &ids, &n);
    if (st) {
      require(dvm_status_code(st) == DVM_INVALID_ARGUMENT);
      dvm_status_free(st);
      continue;
    }
    char *out;
    size_t len;
    require(!dvm_tokenizer_decode(t, ids, n, special, &out, &len));
    require(valid_utf8(out, len));
    free(out);
    dvm_tokenizer_stream *s;
    require(!dvm_tokenizer_stream_create(t, 1, &s));
    for (size_t i = 0; i <= n; i++) {
      const char *piece;
      require(!(i < n ? dvm_tokenizer_stream_put(s, ids[i], &piece, &len) : dvm_tokenizer_stream_finish(s, &piece, &len)));
      require(valid_utf8(piece, len));
    }
    dvm_tokenizer_stream_free(s);
    free(ids);
  }
  dvm_tokenizer_free(t);
  return 0;
}
