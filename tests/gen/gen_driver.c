/* Runs the generator as an embedder would, for test_generate.py:
 *   gen_driver [--kv-f16=BLOCK] CONFIG MODEL.dvmb LOGITS.f32 MAX_LENGTH SAMPLE SEED PROMPT...
 * (PROMPT: comma-separated ids; SAMPLE: 0 greedy, else do_sample with
 * top_k 0 and the config's other settings; --kv-f16: kv_dtype f16 with
 * kv_block_size BLOCK). Writes the logits of every step ([steps, batch,
 * vocab] f32, 0 for a sequence without logits in a step) to LOGITS.f32
 * and one JSON line to stdout: each sequence's tokens, the steps, what
 * the VM allocated and copied, to show that a decode step leaves the
 * cache where it is, and the cache's dtype and blocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/dvm.h"

static int fail(dvm_status *st) {
  fprintf(stderr, "gen_driver: %s\n", dvm_status_message(st));
  dvm_status_free(st);
  return 1;
}

int main(int argc, char **argv) {
  int kv_f16 = argc > 1 && strncmp(argv[1], "--kv-f16=", 9) == 0, block = kv_f16 ? atoi(argv[1] + 9) : 0;
  argc -= kv_f16, argv += kv_f16;
  if (argc < 8) {
    fprintf(stderr, "usage: gen_driver [--kv-f16=BLOCK] CONFIG MODEL.dvmb LOGITS.f32 MAX_LENGTH SAMPLE SEED "
                    "PROMPT...\n");
    return 2;
  }
  int B = argc - 7;
  int32_t **prompts = calloc((size_t)B, sizeof *prompts);
  int *lens = calloc((size_t)B, sizeof *lens);
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
  o.max_length = atoi(argv[4]);
  if (kv_f16) o.kv_dtype = DVM_F16, o.kv_block_size = block;
  if (atoi(argv[5])) {
    o.do_sample = 1;
    o.top_k = 0;
    o.seed = atoll(argv[6]);
  }
  dvm_generator *g;
  st = dvm_generator_create(m, argv[1], &o, &g);
  dvm_module_release(m);
  if (st) return fail(st);
  FILE *lf = fopen(argv[3], "wb");
  int V = dvm_generator_vocab_size(g), steps = 0;
  float *zero = calloc((size_t)V, sizeof *zero);
  if (!(st = dvm_generator_append(g, (const int32_t *const *)prompts, lens))) {
    while (!dvm_generator_done(g)) {
      if ((st = dvm_generator_compute_logits(g))) break;
      for (int b = 0; b < B; b++) {
        const float *l = dvm_generator_logits(g, b);
        fwrite(l ? l : zero, sizeof *zero, (size_t)V, lf);
      }
      steps++;
      if ((st = dvm_generator_next(g))) break;
    }
  }
  fclose(lf);
  if (st) return fail(st);
  dvm_vm_stats s;
  dvm_vm_get_stats(dvm_generator_vm(g), &s);
  dvm_generator_kv_stats kv;
  dvm_generator_get_kv_stats(g, &kv);
  printf("{\"steps\": %d, \"invocations\": %llu, \"result_copies\": %llu, \"peak_requested\": %llu, "
         "\"kv_dtype\": \"%s\", \"kv_block_size\": %d, \"kv_blocks\": %d, \"kv_block_bytes\": %zu, \"tokens\": [",
         steps, (unsigned long long)s.invocations, (unsigned long long)s.result_copies,
         (unsigned long long)s.pool[DVM_DEVICE_CPU].peak_requested, dvm_dtype_name(kv.dtype), kv.block_size,
         kv.blocks, kv.block_bytes);
  for (int b = 0; b < B; b++) {
    int n;
    const int32_t *seq = dvm_generator_sequence(g, b, &n);
    printf("%s[", b ? ", " : "");
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", seq[i]);
    printf("]");
  }
  printf("]}\n");
  dvm_generator_destroy(g);
  for (int b = 0; b < B; b++) free(prompts[b]);
  free(prompts);
  free(lens);
  free(zero);
  return 0;
}
