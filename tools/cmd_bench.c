/* dvm bench: random inputs of given shapes, warm-up, timed invocations;
 * median, p10 and p90 latency and the pool's peak, plus one JSON line. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "runlimits.h"

#define MAX_INPUTS 64

static const char usage_text[] =
    "usage: dvm bench MODEL.dvmb [options]\n"
    "  --shape NAME=DxDx...   shape of an input (\"scalar\" for 0-d); inputs whose dims are\n"
    "                         all known need none\n"
    "  --dim SYMBOL=N         value of a symbol, filling every input dim that names it\n"
    "  --range NAME=LO..HI    values of an integer input (default: 0..9; bool: 0..1)\n"
    "  --function NAME        function to run (default: main, or the only one)\n"
    "  --threads N            kernel threads (default: all cores)\n"
    "  --iters N              timed invocations (default 100)\n"
    "  --warmup N             untimed invocations first (default 10)\n"
    "  --device cpu|cuda|auto (default auto: cuda when present and compiled for, else cpu)\n"
    "  --tf32                 CUDA f32 matrix products may use TF32 tensor cores\n"
    "  --verbose              say which device auto picked, and why\n"
    "  --profile              after the timed runs, profile up to 20 more invocations and print\n"
    "                         time per call site, op and instruction class\n"
    "  --trace FILE           write those invocations as a Chrome trace (JSON; opens in Perfetto)\n"
    DVM_CLI_LIMIT_USAGE
    "prints median, p10, p90 and the peak pool memory, then one JSON line\n";

/* NAME=TEXT from the command line: NAME is everything before the last
 * '=' (no value holds one), so a name may hold any character. */
typedef struct {
  const char *name; /* not terminated: len bytes */
  int len;
  const char *text;
} named;

static int parse_named(const char *arg, named *out) {
  const char *eq = strrchr(arg, '=');
  if (!eq || eq == arg) return 0;
  *out = (named){arg, (int)(eq - arg), eq + 1};
  return 1;
}

static int named_is(const named *x, const char *name) {
  return strlen(name) == (size_t)x->len && strncmp(x->name, name, (size_t)x->len) == 0;
}

static const named *find(const named *list, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (named_is(&list[i], name)) return &list[i];
  return NULL;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill_random(dvm_tensor *t, int64_t lo, int64_t hi, uint64_t *seed) {
  void *d = dvm_tensor_data(t);
  int64_t n = dvm_tensor_numel(t);
  uint64_t span = (uint64_t)(hi - lo) + 1;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rng_next(seed);
    double u = (double)(r >> 11) * 0x1.0p-53 * 2 - 1; /* [-1, 1) */
    int64_t k = lo + (int64_t)(r % span);
    switch (dvm_tensor_dtype(t)) {
    case DVM_F32: ((float *)d)[i] = (float)u; break;
    case DVM_F64: ((double *)d)[i] = u; break;
    case DVM_F16: case DVM_BF16: {
      float f = (float)u; /* bf16: the top half of the f32; f16: 0 (tiny) is fine for timing */
      uint32_t b;
      memcpy(&b, &f, sizeof b);
      ((uint16_t *)d)[i] = dvm_tensor_dtype(t) == DVM_BF16 ? (uint16_t)(b >> 16) : 0x3c00;
      break;
    }
    case DVM_I8: ((int8_t *)d)[i] = (int8_t)k; break;
    case DVM_I16: ((int16_t *)d)[i] = (int16_t)k; break;
    case DVM_I32: ((int32_t *)d)[i] = (int32_t)k; break;
    case DVM_I64: ((int64_t *)d)[i] = k; break;
    case DVM_U8: ((uint8_t *)d)[i] = (uint8_t)k; break;
    case DVM_U16: ((uint16_t *)d)[i] = (uint16_t)k; break;
    case DVM_U32: ((uint32_t *)d)[i] = (uint32_t)k; break;
    case DVM_U64: ((uint64_t *)d)[i] = (uint64_t)k; break;
    case DVM_BOOL: ((uint8_t *)d)[i] = (uint8_t)(r & 1); break;
    default: break;
    }
  }
}

/* The dims of input p: --shape, else the signature with --dim values. */
static dvm_status *input_dims(const dvm_param_info *p, const named *shape, const named *dims, int ndims,
                              int *rank, int64_t *out) {
  if (shape) {
    *rank = 0;
    if (strcmp(shape->text, "scalar") == 0) return NULL;
    for (char *s = (char *)shape->text; *s;) {
      char *end;
      long long v = strtoll(s, &end, 10);
      if (end == s || v < 0 || *rank == DVM_MAX_RANK || (*end && *end != 'x'))
        return dvm_status_new(DVM_INVALID_ARGUMENT, "--shape %.*s=%s: expected dims like 1x128", shape->len, shape->name, shape->text);
      out[(*rank)++] = v;
      s = *end ? end + 1 : end;
    }
    return NULL;
  }
  if (p->rank < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" has no fixed rank: give --shape %s=...", p->name, p->name);
  *rank = p->rank;
  for (int d = 0; d < p->rank; d++) {
    if (p->dims[d].symbol) {
      const named *v = find(dims, ndims, p->dims[d].symbol);
      if (!v)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" dim %d is %s: give --dim %s=N or --shape %s=...",
                              p->name, d, p->dims[d].symbol, p->dims[d].symbol, p->name);
      out[d] = atoll(v->text);
    } else if (p->dims[d].value < 0) {
      return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" dim %d is unknown: give --shape %s=...", p->name, d, p->name);
    } else {
      out[d] = p->dims[d].value;
    }
  }
  return NULL;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int dvm_cmd_bench(int argc, char **argv) {
  static const struct option opts[] = {
      {"shape", required_argument, 0, 's'}, {"dim", required_argument, 0, 'D'},
      {"range", required_argument, 0, 'r'}, {"function", required_argument, 0, 'f'},
      {"threads", required_argument, 0, 't'}, {"iters", required_argument, 0, 'n'},
      {"warmup", required_argument, 0, 'w'}, {"device", required_argument, 0, 'd'},
      {"tf32", no_argument, 0, 'T'}, {"help", no_argument, 0, 'h'}, {"verbose", no_argument, 0, 'v'},
      {"profile", no_argument, 0, 'P'}, {"trace", required_argument, 0, 'R'}, DVM_CLI_LIMIT_OPTIONS, {0, 0, 0, 0}};
  named shapes[MAX_INPUTS], dims[MAX_INPUTS], ranges[MAX_INPUTS];
  int nshapes = 0, ndims = 0, nranges = 0, iters = 100, warmup = 10, verbose = 0, profile = 0, bad;
  double timeout = 0;
  const char *fname = NULL, *trace = NULL;
  dvm_profile *prof = NULL;
  dvm_vm_options vo;
  dvm_vm_options_init(&vo);
  int device_auto = 1;
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "s:D:r:f:t:n:w:d:hv", opts, NULL)) != -1;) {
    switch (c) {
    case 's': if (nshapes == MAX_INPUTS || !parse_named(optarg, &shapes[nshapes++])) return dvm_cli_usage_error("bench", "bad --shape %s", optarg); break;
    case 'D': if (ndims == MAX_INPUTS || !parse_named(optarg, &dims[ndims++])) return dvm_cli_usage_error("bench", "bad --dim %s", optarg); break;
    case 'r': if (nranges == MAX_INPUTS || !parse_named(optarg, &ranges[nranges++])) return dvm_cli_usage_error("bench", "bad --range %s", optarg); break;
    case 'f': fname = optarg; break;
    case 't': vo.threads = atoi(optarg); if (vo.threads < 1) return dvm_cli_usage_error("bench", "--threads must be >= 1"); break;
    case 'n': iters = atoi(optarg); if (iters < 1) return dvm_cli_usage_error("bench", "--iters must be >= 1"); break;
    case 'w': warmup = atoi(optarg); if (warmup < 0) return dvm_cli_usage_error("bench", "--warmup must be >= 0"); break;
    case 'd':
      device_auto = strcmp(optarg, "auto") == 0;
      if (!device_auto && !dvm_device_parse(optarg, &vo.device)) return dvm_cli_usage_error("bench", "unknown device \"%s\"", optarg);
      break;
    case 'T': vo.allow_tf32 = 1; break;
    case 'v': verbose = 1; break;
    case 'P': profile = 1; break;
    case 'R': trace = optarg; break;
    case 'S': case 'O': case 'M':
      if ((bad = dvm_cli_limit_option("bench", c, optarg, &vo, &timeout))) return bad;
      break;
    case 'h': fputs(usage_text, stdout); return DVM_EXIT_OK;
    default: fputs(usage_text, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fputs(usage_text, stderr);
    return dvm_cli_usage_error("bench", "expected one MODEL.dvmb");
  }
  dvm_module *m;
  dvm_status *st = dvm_module_load_file(argv[optind], NULL, &m);
  if (st) return dvm_cli_fail("bench", st);
  int rc = DVM_EXIT_OK, f = fname ? dvm_module_find_function(m, fname) : dvm_module_find_function(m, "main");
  if (f < 0 && !fname && dvm_module_function_count(m) == 1) f = 0;
  int np = 0, nr = 0;
  dvm_value args[MAX_INPUTS] = {{0}}, res[MAX_INPUTS] = {{0}};
  double *times = NULL;
  dvm_vm *vm = NULL;
  uint64_t seed = 42;
  if (f < 0) {
    rc = dvm_cli_usage_error("bench", "no function \"%s\"", fname ? fname : "main");
    goto done;
  }
  np = dvm_function_param_count(m, f);
  nr = dvm_function_result_count(m, f);
  if (np > MAX_INPUTS || nr > MAX_INPUTS) {
    rc = dvm_cli_usage_error("bench", "more than %d inputs or results", MAX_INPUTS);
    goto done;
  }
  for (int i = 0; i < nshapes; i++) {
    int known = 0;
    for (int p = 0; p < np; p++) {
      dvm_param_info info;
      dvm_function_param(m, f, p, &info);
      known |= named_is(&shapes[i], info.name);
    }
    if (!known) {
      rc = dvm_cli_usage_error("bench", "--shape %.*s: the function has no input of that name", shapes[i].len, shapes[i].name);
      goto done;
    }
  }
  for (int p = 0; p < np; p++) {
    dvm_param_info info;
    dvm_function_param(m, f, p, &info);
    if (info.kind != DVM_VAL_TENSOR) {
      rc = dvm_cli_usage_error("bench", "input \"%s\" is a %s: dvm bench feeds tensors only", info.name,
                               dvm_kind_name(info.kind));
      goto done;
    }
    int rank = 0;
    int64_t d[DVM_MAX_RANK];
    dvm_tensor *t;
    if ((st = input_dims(&info, find(shapes, nshapes, info.name), dims, ndims, &rank, d)) ||
        (st = dvm_tensor_create(info.dtype, rank, d, &t))) {
      rc = dvm_cli_fail("bench", st);
      goto done;
    }
    int64_t lo = 0, hi = 9;
    const named *r = find(ranges, nranges, info.name);
    if (r && sscanf(r->text, "%lld..%lld", (long long *)&lo, (long long *)&hi) != 2) {
      dvm_tensor_release(t);
      rc = dvm_cli_usage_error("bench", "--range %.*s=%s: expected LO..HI", r->len, r->name, r->text);
      goto done;
    }
    fill_random(t, lo, hi < lo ? lo : hi, &seed);
    args[p] = dvm_value_tensor(t);
  }
  if (device_auto) vo.device = dvm_cli_auto_device(m, verbose);
  if ((st = dvm_vm_create(m, &vo, &vm)) || (st = dvm_vm_find_function(vm, dvm_function_name(m, f), &f))) {
    rc = dvm_cli_fail("bench", st);
    goto done;
  }
  times = malloc(sizeof(double) * (size_t)iters);
  if (!times) {
    rc = dvm_cli_fail("bench", dvm_status_new(DVM_OUT_OF_MEMORY, ""));
    goto done;
  }
  dvm_cli_watch(vm, timeout); /* the limits cover all the invocations */
  for (int i = 0; i < warmup + iters; i++) {
    double t0 = dvm_cli_now();
    st = dvm_vm_invoke(vm, f, args, np, res, nr);
    double t = dvm_cli_now() - t0;
    if (!st && dvm_cli_stopped()) /* between two invocations */
      st = dvm_status_new(DVM_INTERRUPTED, "function \"%s\", after invocation %d of %d: interrupted",
                          dvm_function_name(m, f), i + 1, warmup + iters);
    if (st) {
      dvm_cli_unwatch();
      rc = dvm_cli_run_fail("bench", st);
      goto done;
    }
    for (int r = 0; r < nr; r++) dvm_value_clear(&res[r]);
    if (i >= warmup) times[i - warmup] = t * 1e3;
  }
  dvm_cli_unwatch();
  qsort(times, (size_t)iters, sizeof(double), cmp_double);
  double med = times[iters / 2], p10 = times[iters / 10], p90 = times[(iters * 9) / 10 < iters ? (iters * 9) / 10 : iters - 1];
  dvm_vm_stats s;
  dvm_vm_get_stats(vm, &s);
  uint64_t peak = s.pool[vo.device].peak, asked = s.pool[vo.device].peak_requested;
  printf("%s: %d iterations after %d warm-up, ", dvm_function_name(m, f), iters, warmup);
  if (vo.threads) printf("%d threads\n", vo.threads);
  else printf("threads: all cores\n");
  printf("latency ms: median %.4f  p10 %.4f  p90 %.4f  min %.4f\n", med, p10, p90, times[0]);
  double syncs = (double)s.host_syncs / (double)s.invocations;
  printf("peak pool memory: %llu bytes (%s; %llu bytes requested)\n", (unsigned long long)peak,
         dvm_device_name(vo.device), (unsigned long long)asked);
  if (vo.device == DVM_DEVICE_CUDA) printf("host syncs per invocation: %.2f\n", syncs);
  printf("{\"model\":\"%s\",\"function\":\"%s\",\"device\":\"%s\",\"iters\":%d,\"median_ms\":%.6f,"
         "\"p10_ms\":%.6f,\"p90_ms\":%.6f,\"min_ms\":%.6f,\"peak_bytes\":%llu,"
         "\"peak_requested_bytes\":%llu,\"host_syncs\":%.2f}\n",
         argv[optind], dvm_function_name(m, f), dvm_device_name(vo.device), iters, med, p10, p90,
         times[0], (unsigned long long)peak, (unsigned long long)asked, syncs);
  if (profile || trace) { /* separate from the timed runs, which it would slow down */
    fflush(stdout);
    if ((st = dvm_cli_profile_attach(vm, trace, &prof))) {
      rc = dvm_cli_fail("bench", st);
      goto done;
    }
    for (int i = 0; i < (iters < 20 ? iters : 20) && !st; i++) {
      st = dvm_vm_invoke(vm, f, args, np, res, nr);
      for (int r = 0; r < nr && !st; r++) dvm_value_clear(&res[r]);
    }
    if (st) {
      rc = dvm_cli_run_fail("bench", st);
      goto done;
    }
    putchar('\n');
    if ((st = dvm_cli_profile_finish(vm, prof, trace, profile))) rc = dvm_cli_fail("bench", st);
  }
done:
  free(times);
  for (int i = 0; i < np; i++) dvm_value_clear(&args[i]);
  dvm_vm_destroy(vm);
  dvm_profile_destroy(prof);
  dvm_module_release(m);
  return rc;
}
