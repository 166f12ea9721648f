/* A decode step of many rows as dvm serve's generation engine runs it: a
 * generator of R sequences whose prompts (random token ids) have lengths
 * drawn in [LO, HI], so that each row attends over its own past; after the
 * prompts and one step, STEPS greedy decode steps are timed and the VM's
 * profile splits their time by kernel.
 *   bench_gen_step MODEL.dvmb CONFIG [--rows 1,2,4,...] [--past LO HI]
 *                  [--block N] [--kv-dtype f32,f16] [--steps N] [--threads N] [--seed N] [--top N]
 * --block N: a paged cache of N-token blocks (0: contiguous); --kv-dtype:
 * the cache's dtypes to compare, each row count run with each in turn
 * (an f16 cache without --block is one block per sequence). For each
 * row count prints ms per step (process CPU time, and wall), per row, and
 * the kernels with the most time (their share of the step's wall time,
 * scaled to its CPU time); then one JSON line per row count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "dvm/dvm.h"

#define MAX_KERNELS 64

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct kernel_time {
  const char *name;
  uint64_t ns, calls;
} kernel_time;

static int by_time(const void *a, const void *b) {
  const kernel_time *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* The profile's invoke sites summed by kernel, most time first; the count. */
static int kernel_times(const dvm_profile *p, kernel_time *k) {
  int n = 0;
  for (int i = 0; i < dvm_profile_site_count(p); i++) {
    dvm_profile_site s;
    dvm_profile_get_site(p, i, &s);
    if (!s.callee || strcmp(s.opcode, "invoke")) continue;
    int j = 0;
    while (j < n && strcmp(k[j].name, s.callee)) j++;
    if (j == n) {
      if (n == MAX_KERNELS) continue;
      k[n++] = (kernel_time){s.callee, 0, 0};
    }
    k[j].ns += s.ns;
    k[j].calls += s.calls;
  }
  qsort(k, (size_t)n, sizeof *k, by_time);
  return n;
}

typedef struct opts {
  const char *dvmb, *config;
  int rows[16], nrows, lo, hi, block, steps, threads, top;
  dvm_dtype kv[2];
  int nkv;
  unsigned seed;
} opts;

static void run(dvm_module *m, const opts *o, int rows, dvm_dtype kv) {
  dvm_generator_options go;
  dvm_generator_options_init(&go);
  go.batch_size = rows;
  go.threads = o->threads;
  go.max_length = o->hi + o->steps + 2;
  go.kv_block_size = o->block;
  go.kv_dtype = kv;
  dvm_generator *g;
  die(dvm_generator_create(m, o->config, &go, &g));
  int32_t **prompts = calloc((size_t)rows, sizeof *prompts);
  int *lens = calloc((size_t)rows, sizeof *lens);
  if (!prompts || !lens) die(dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory"));
  unsigned s = o->seed + (unsigned)rows, vocab = (unsigned)dvm_generator_vocab_size(g);
  int past = 0;
  for (int b = 0; b < rows; b++) {
    lens[b] = o->lo + (int)(rand_r(&s) % (unsigned)(o->hi - o->lo + 1));
    past += lens[b];
    if (!(prompts[b] = malloc(sizeof(int32_t) * (size_t)lens[b]))) die(dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory"));
    for (int t = 0; t < lens[b]; t++) prompts[b][t] = (int32_t)(rand_r(&s) % vocab);
  }
  die(dvm_generator_append(g, (const int32_t *const *)prompts, lens));
  die(dvm_generator_next(g)); /* the prompts, each alone */
  die(dvm_generator_next(g)); /* one decode step before the timed ones */
  dvm_profile *p;
  die(dvm_profile_create(m, 0, 0, &p));
  die(dvm_vm_set_profile(dvm_generator_vm(g), p));
  double w0 = now(), c0 = cpu_now();
  for (int i = 0; i < o->steps; i++) die(dvm_generator_next(g));
  double wall = (now() - w0) / o->steps * 1e3, cpu = (cpu_now() - c0) / o->steps * 1e3;
  dvm_profile_totals tot;
  dvm_profile_get_totals(p, &tot);
  kernel_time k[MAX_KERNELS];
  int nk = kernel_times(p, k);
  /* wall shares scaled to CPU time: on a shared machine wall time holds waits */
  double scale = cpu / wall, step_ns = wall * 1e6;
  const char *kvn = dvm_dtype_name(kv);
  printf("rows %d (past %d on average, %s, %s cache): %.2f ms CPU per step (%.2f wall), %.3f per row; VM %.1f%%\n",
         rows, past / rows, o->block ? "paged" : "contiguous", kvn, cpu, wall, cpu / rows,
         100.0 * (double)tot.ns / o->steps / step_ns);
  printf("{\"rows\": %d, \"paged\": %d, \"kv_dtype\": \"%s\", \"cpu_ms\": %.3f, \"wall_ms\": %.3f, \"kernels\": {",
         rows, o->block, kvn, cpu, wall);
  for (int i = 0; i < nk; i++)
    printf("%s\"%s\": %.3f", i ? ", " : "", k[i].name, (double)k[i].ns / o->steps / 1e6 * scale);
  printf("}}\n");
  for (int i = 0; i < nk && i < o->top; i++)
    printf("  %-32s %8.3f ms %5.1f%%  %llu calls\n", k[i].name, (double)k[i].ns / o->steps / 1e6 * scale,
           100.0 * (double)k[i].ns / o->steps / step_ns, (unsigned long long)(k[i].calls / (uint64_t)o->steps));
  die(dvm_vm_set_profile(dvm_generator_vm(g), NULL));
  dvm_profile_destroy(p);
  dvm_generator_destroy(g);
  for (int b = 0; b < rows; b++) free(prompts[b]);
  free(prompts);
  free(lens);
}

static void usage(void) {
  fprintf(stderr, "usage: bench_gen_step MODEL.dvmb CONFIG [--rows 1,2,4,...] [--past LO HI] [--block N] "
                  "[--kv-dtype f32,f16] [--steps N] [--threads N] [--seed N] [--top N]\n");
  exit(2);
}

int main(int argc, char **argv) {
  if (argc < 3) usage();
  opts o = {.dvmb = argv[1], .config = argv[2], .lo = 16, .hi = 700, .steps = 5, .threads = 1, .top = 8, .seed = 1};
  const char *rows = "1,2,4,8,16", *kv = "f32";
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--rows") && more) rows = argv[++i];
    else if (!strcmp(a, "--past") && i + 2 < argc) {
      o.lo = atoi(argv[++i]);
      o.hi = atoi(argv[++i]);
    } else if (!strcmp(a, "--block") && more) o.block = atoi(argv[++i]);
    else if (!strcmp(a, "--steps") && more) o.steps = atoi(argv[++i]);
    else if (!strcmp(a, "--threads") && more) o.threads = atoi(argv[++i]);
    else if (!strcmp(a, "--seed") && more) o.seed = (unsigned)atoi(argv[++i]);
    else if (!strcmp(a, "--top") && more) o.top = atoi(argv[++i]);
    else if (!strcmp(a, "--kv-dtype") && more) kv = argv[++i];
    else usage();
  }
  for (const char *p = kv; *p; p += *p == ',') {
    if (o.nkv == 2 || (strncmp(p, "f32", 3) && strncmp(p, "f16", 3)) || (p[3] && p[3] != ',')) usage();
    o.kv[o.nkv++] = p[1] == '1' ? DVM_F16 : DVM_F32;
    p += 3;
  }
  for (const char *p = rows; *p && o.nrows < 16; p += *p == ',') {
    char *end;
    o.rows[o.nrows++] = (int)strtol(p, &end, 10);
    if (end == p || o.rows[o.nrows - 1] < 1) usage();
    p = end;
  }
  if (o.lo < 1 || o.hi < o.lo || o.steps < 1 || o.threads < 0 || o.block < 0) usage();
  dvm_module *m;
  die(dvm_module_load_file(o.dvmb, NULL, &m));
  for (int i = 0; i < o.nrows; i++)
    for (int k = 0; k < o.nkv; k++) run(m, &o, o.rows[i], o.kv[k]);
  dvm_module_release(m);
  return 0;
}
