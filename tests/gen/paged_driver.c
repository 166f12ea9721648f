/* Runs the generator with a paged KV cache for test_paged.py:
 *   paged_driver [--kv-f16] CONFIG MODEL.dvmb MAX_LENGTH BLOCK_SIZE BUDGET CHUNK PROMPT...
 * (BLOCK_SIZE 0: the contiguous cache; BUDGET bytes, 0: the default;
 * CHUNK: prefill_chunk, or CHUNK:N with prefill_budget N; --kv-f16:
 * kv_dtype f16).
 * Sequence 0 runs its prompt and one step first; the others join at the
 * next step; then all run greedy to max_length. Prints one JSON line:
 * each sequence's tokens, why paging is off (""), the blocks, those in
 * use after sequence 0's first step, after every sequence's first and at
 * most, the prefix counts, the most invocations of the model in one
 * step after the others joined, and the free blocks after every reset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/dvm.h"

static int fail(dvm_status *st) {
  fprintf(stderr, "paged_driver: %s\n", dvm_status_message(st));
  dvm_status_free(st);
  return 1;
}

static int used(const dvm_generator *g) {
  dvm_generator_kv_stats s;
  dvm_generator_get_kv_stats(g, &s);
  return s.blocks - s.free;
}

int main(int argc, char **argv) {
  int kv_f16 = argc > 1 && strcmp(argv[1], "--kv-f16") == 0;
  argc -= kv_f16, argv += kv_f16;
  if (argc < 8) {
    fprintf(stderr, "usage: paged_driver CONFIG MODEL.dvmb MAX_LENGTH BLOCK_SIZE BUDGET CHUNK PROMPT...\n");
    return 2;
  }
  int B = argc - 7;
  int32_t **prompts = calloc((size_t)B, sizeof *prompts);
  int *lens = calloc((size_t)B, sizeof *lens), *none = calloc((size_t)B, sizeof *none);
  for (int b = 0; b < B; b++) {
    prompts[b] = calloc(strlen(argv[7 + b]) + 1, sizeof **prompts);
    for (char *p = argv[7 + b]; *p; p += *p == ',') prompts[b][lens[b]++] = (int32_t)strtol(p, &p, 10);
  }
  dvm_module *m;
  dvm_status *st = dvm_module_load_file(argv[2], NULL, &m);
  if (st) return fail(st);
  dvm_generator_options o;
  dvm_generator_options_init(&o);
  o.batch_size = B;
  o.threads = 1;
  o.max_length = atoi(argv[3]);
  o.kv_block_size = atoi(argv[4]);
  o.kv_budget = atoll(argv[5]);
  if (kv_f16) o.kv_dtype = DVM_F16;
  char *budget;
  o.prefill_chunk = (int)strtol(argv[6], &budget, 10); /* CHUNK or CHUNK:BUDGET */
  o.prefill_budget = *budget == ':' ? atoi(budget + 1) : 0;
  dvm_generator *g;
  st = dvm_generator_create(m, argv[1], &o, &g);
  dvm_module_release(m);
  if (st) return fail(st);
  int first = 0, all = 0, peak = 0;
  uint64_t most = 0; /* invocations in one step */
  /* sequence 0 alone first, then the others join */
  int count0 = lens[0];
  lens[0] = 0;
  none[0] = count0;
  if (!(st = dvm_generator_append(g, (const int32_t *const *)prompts, none)) && !(st = dvm_generator_next(g))) {
    first = used(g);
    if (B > 1) st = dvm_generator_append(g, (const int32_t *const *)prompts, lens);
    for (int step = 0; !st && !dvm_generator_done(g); step++) {
      dvm_vm_stats s0, s1;
      dvm_vm_get_stats(dvm_generator_vm(g), &s0);
      if (!(st = dvm_generator_next(g))) {
        dvm_vm_get_stats(dvm_generator_vm(g), &s1);
        most = s1.invocations - s0.invocations > most ? s1.invocations - s0.invocations : most;
        peak = used(g) > peak ? used(g) : peak;
        if (!step) all = used(g);
      }
    }
  }
  if (st) return fail(st);
  dvm_generator_kv_stats s;
  dvm_generator_get_kv_stats(g, &s);
  printf("{\"note\": \"");
  for (const char *c = dvm_generator_kv_note(g); *c; c++) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
  printf("\", \"blocks\": %d, \"block_bytes\": %zu, \"first\": %d, \"all\": %d, \"peak\": %d, "
         "\"prefix_queries\": %lld, \"prefix_hits\": %lld, \"most_invocations\": %llu, \"tokens\": [", s.blocks,
         s.block_bytes, first, all, peak, (long long)s.prefix_queries, (long long)s.prefix_hits,
         (unsigned long long)most);
  for (int b = 0; b < B; b++) {
    int n;
    const int32_t *seq = dvm_generator_sequence(g, b, &n);
    printf("%s[", b ? ", " : "");
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", seq[i]);
    printf("]");
  }
  for (int b = 0; b < B; b++) dvm_generator_reset(g, b);
  dvm_generator_get_kv_stats(g, &s);
  printf("], \"free_after_reset\": %d}\n", s.free);
  dvm_generator_destroy(g);
  for (int b = 0; b < B; b++) free(prompts[b]);
  free(prompts);
  free(lens);
  free(none);
  return 0;
}
