/* Fuzz target for the configuration files a model folder brings: the
 * first byte picks the reader, the rest is the file's bytes, written to a
 * scratch folder (the readers take paths, as dvm and dvm serve call them).
 *   0 genai_config.json (gen/config.c): read, or refused with a message
 *     that names the file; one that is read holds what the generator
 *     relies on (heads a multiple of the kv heads, every EOS in the
 *     vocabulary, max_length within context_length, the model file a
 *     name in the folder, every name NUL-terminated);
 *   1 dvm serve's model config (serve/config.c): read, or refused naming
 *     the file and line; the values within the ranges serve.h states;
 *   2 tokenizer_config.json (serve/chat.c): a chat form dvm serve writes,
 *     or none with the reason.
 * A broken promise aborts. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gen/genimpl.h"
#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

static const char *const files[] = {"genai_config.json", "config", "tokenizer_config.json"};
static char dir[64];

static void remove_dir(void) {
  char path[128];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void write_file(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  require(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
}

static int terminated(const char *s, size_t size) { return memchr(s, 0, size) != NULL; }

static void genai_config(const char *path) {
  dvm_generator_config c;
  dvm_status *st = dvm_generator_config_read(path, &c);
  if (st) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT || dvm_status_code(st) == DVM_UNIMPLEMENTED);
    require(strstr(dvm_status_message(st), "genai_config.json") != NULL);
    dvm_status_free(st);
    return;
  }
  require(c.kv_heads >= 1 && c.num_heads % c.kv_heads == 0 && c.head_size >= 1 && c.layers >= 1);
  require(c.neos >= 1 && c.neos <= DVM_GENERATOR_MAX_EOS);
  for (int e = 0; e < c.neos; e++) require(c.eos[e] >= 0 && c.eos[e] < c.vocab_size);
  require(c.max_length >= 1 && c.max_length <= c.context_length);
  require(terminated(c.filename, sizeof c.filename) && !strchr(c.filename, '/') && strcmp(c.filename, ".."));
  const char *names[] = {c.input_ids, c.attention_mask, c.position_ids, c.past_key, c.past_value, c.logits,
                         c.present_key, c.present_value};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) require(terminated(names[i], sizeof c.input_ids));
}

static void serve_config(const char *path) {
  dvms_config c;
  dvms_config_defaults(&c);
  dvm_status *st = dvms_config_read(path, &c);
  if (st) {
    require(dvm_status_code(st) == DVM_INVALID_ARGUMENT && !strncmp(dvm_status_message(st), path, strlen(path)) &&
            dvm_status_message(st)[strlen(path)] == ':');
    dvm_status_free(st);
    return;
  }
  require(c.max_batch >= 1 && c.npad_inputs >= 0 && c.npad_inputs <= DVMS_MAX_IO);
  require(c.nbuckets >= 0 && c.nbuckets <= DVMS_MAX_BUCKETS && c.ndims >= 0 && c.ndims <= 8);
  for (int b = 1; b < c.nbuckets; b++) require(c.buckets[b] > c.buckets[b - 1]);
  for (int p = 0; p < c.npad_inputs; p++) require(terminated(c.pad_input[p], sizeof c.pad_input[p]));
  require(terminated(c.function, sizeof c.function) && terminated(c.batch, sizeof c.batch) &&
          terminated(c.pad, sizeof c.pad) && terminated(c.device, sizeof c.device));
  require(c.max_queue >= 1 && c.timeout_us >= 0 && c.pool_limit >= 0 && c.kv_budget >= 0);
}

static void chat_config(void) {
  static const char *const forms[] = {"chatml", "chatml+sys", "llama2", "inst", "header", "tagged", "tagged+bos",
                                      "turn"};
  static dvms_model m;
  memset(&m, 0, sizeof m);
  dvms_chat_read_config(&m, dir);
  int known = !m.chat_template[0] && m.chat_error[0];
  for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) known |= !strcmp(m.chat_template, forms[i]);
  require(known && terminated(m.bos, sizeof m.bos) && terminated(m.eos, sizeof m.eos));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/dvm_fuzz_config_XXXXXX");
    require(mkdtemp(dir) != NULL && atexit(remove_dir) == 0);
  }
  if (!size) return 0;
  int which = data[0] % 3;
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, files[which]);
  write_file(path, data + 1, size - 1);
  if (which == 0) genai_config(path);
  else if (which == 1) serve_config(path);
  else chat_config();
  return 0;
}
