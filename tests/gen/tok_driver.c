/* The tokenizer (dvm/tokenizer.h) as an embedder uses it, for
 * test_tokenizer.py:
 *   tok_driver PATH < requests
 * loads PATH (tokenizer.json or its folder), or prints "ERR message" and
 * exits 1; then answers each line of stdin with one line:
 *   E FLAG HEX   encode the text HEX (its bytes in hex), FLAG 1 with the
 *                special tokens: "ids" (space-separated)
 *   D FLAG IDS   decode IDS (comma-separated; may be empty), FLAG 1 skipping
 *                special tokens: the text in hex
 *   S FLAG IDS   the same through a stream, one id at a time: each piece's
 *                hex, then what the stream's finish gives, joined by "/"
 *   T 0 HEX      the id of the token HEX (-1: none)
 * or "ERR message" when the call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/dvm.h"

static void hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
}

static int nibble(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

static int fail(dvm_status *st) {
  printf("ERR %s\n", dvm_status_message(st));
  dvm_status_free(st);
  return 1;
}

static int32_t *parse_ids(char *s, size_t *n) {
  int32_t *ids = malloc((strlen(s) / 2 + 1) * sizeof *ids);
  *n = 0;
  for (char *p = s; *p && *p != '\n'; p += *p == ',') ids[(*n)++] = (int32_t)strtol(p, &p, 10);
  return ids;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tok_driver PATH < requests\n");
    return 2;
  }
  dvm_tokenizer *t;
  dvm_status *st = dvm_tokenizer_load(argv[1], &t);
  if (st) return fail(st);
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, stdin) > 0) {
    char op = line[0];
    int flag = line[2] == '1';
    char *arg = line + 4;
    if (op == 'E' || op == 'T') {
      size_t len = strcspn(arg, "\n") / 2;
      char *text = malloc(len + 1);
      for (size_t i = 0; i < len; i++) text[i] = (char)(nibble(arg[2 * i]) << 4 | nibble(arg[2 * i + 1]));
      text[len] = 0;
      if (op == 'T') {
        printf("%d\n", dvm_tokenizer_token_id(t, text));
        free(text);
        fflush(stdout);
        continue;
      }
      int32_t *ids;
      size_t n;
      st = dvm_tokenizer_encode(t, text, len, flag, &ids, &n);
      free(text);
      if (st) {
        fail(st);
        continue;
      }
      for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
      printf("\n");
      free(ids);
    } else if (op == 'D') {
      size_t n, len;
      int32_t *ids = parse_ids(arg, &n);
      char *text;
      st = dvm_tokenizer_decode(t, ids, n, flag, &text, &len);
      free(ids);
      if (st) {
        fail(st);
        continue;
      }
      hex(text, len);
      printf("\n");
      free(text);
    } else if (op == 'S') {
      size_t n;
      int32_t *ids = parse_ids(arg, &n);
      dvm_tokenizer_stream *s = NULL;
      st = dvm_tokenizer_stream_create(t, flag, &s);
      for (size_t i = 0; i < n && !st; i++) {
        const char *piece;
        size_t len;
        st = dvm_tokenizer_stream_put(s, ids[i], &piece, &len);
        if (!st && i) printf("/");
        if (!st) hex(piece, len);
      }
      const char *rest;
      size_t len;
      if (!st && !(st = dvm_tokenizer_stream_finish(s, &rest, &len))) {
        printf("%s", n ? "/" : "");
        hex(rest, len);
      }
      dvm_tokenizer_stream_free(s);
      free(ids);
      if (st) fail(st);
      else printf("\n");
    }
    fflush(stdout);
  }
  free(line);
  dvm_tokenizer_free(t);
  return 0;
}
