/* dvm inspect: what a module holds, through the public API only. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/cuda/gen_abi.h"
#include "cli.h"
#include "dvmc.h"
#include "dvm/debug.h"

#define MAX_DIMS 64

static const char usage[] =
    "usage: dvm inspect MODEL.dvmb\n"
    "       dvm inspect --memory MODEL.dvmb [--dim SYMBOL=N]...\n"
    "       dvm inspect --host MODEL.dvmb\n"
    "  lists functions with their symbolic signatures, constants and kernels;\n"
    "  --memory prints each function's peak memory as a formula of its symbols\n"
    "  and, with a value for every symbol, its value;\n"
    "  --host lists what each NAME@cuda function still runs on the host: each call,\n"
    "  the bytes it copies to the host and back, why; then the calls by kernel and totals\n";

/* ---- the peak formula: integers, symbols, + - * ^, floordiv mod min max ---- */

typedef struct {
  const char *p;
  const char *const *names; /* the symbols' values */
  const int64_t *values;
  int n;
  const char *err; /* the first error */
} formula;

static int64_t sum(formula *f);

static int64_t fail(formula *f, const char *err) {
  if (!f->err) f->err = err;
  return 0;
}

static void skip(formula *f) {
  while (*f->p == ' ') f->p++;
}

static int64_t floordiv(formula *f, int64_t a, int64_t b, int mod) {
  if (b == 0) return fail(f, "division by zero");
  if (a == INT64_MIN && b == -1) return fail(f, "overflow");
  int64_t q = a / b, r = a % b;
  if (r && (r < 0) != (b < 0)) q--, r += b;
  return mod ? r : q;
}

static int64_t atom(formula *f) {
  skip(f);
  if (*f->p == '(') {
    f->p++;
    int64_t v = sum(f);
    skip(f);
    if (*f->p++ != ')') return fail(f, "expected )");
    return v;
  }
  if (*f->p >= '0' && *f->p <= '9') return strtoll(f->p, (char **)&f->p, 10);
  size_t n = strspn(f->p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
  if (!n) return fail(f, "expected a number or a name");
  const char *name = f->p;
  f->p += n;
  skip(f);
  if (*f->p == '(') { /* floordiv, mod, min, max of two */
    f->p++;
    int64_t a = sum(f);
    skip(f);
    if (*f->p++ != ',') return fail(f, "expected ,");
    int64_t b = sum(f);
    skip(f);
    if (*f->p++ != ')') return fail(f, "expected )");
    if (!strncmp(name, "floordiv", n) && n == 8) return floordiv(f, a, b, 0);
    if (!strncmp(name, "mod", n) && n == 3) return floordiv(f, a, b, 1);
    if (!strncmp(name, "min", n) && n == 3) return a < b ? a : b;
    if (!strncmp(name, "max", n) && n == 3) return a > b ? a : b;
    return fail(f, "unknown function");
  }
  for (int i = 0; i < f->n; i++)
    if (strlen(f->names[i]) == n && !strncmp(f->names[i], name, n)) return f->values[i];
  return fail(f, "a symbol has no value");
}

static int64_t power(formula *f) {
  int64_t v = atom(f), r = 1;
  skip(f);
  if (*f->p != '^') return v;
  f->p++;
  skip(f);
  for (int64_t e = strtoll(f->p, (char **)&f->p, 10); e > 0; e--)
    if (__builtin_mul_overflow(r, v, &r)) return fail(f, "overflow");
  return r;
}

static int64_t product(formula *f) {
  int64_t v = power(f);
  for (skip(f); *f->p == '*'; skip(f)) {
    f->p++;
    if (__builtin_mul_overflow(v, power(f), &v)) return fail(f, "overflow");
  }
  return v;
}

static int64_t sum(formula *f) {
  skip(f);
  int neg = *f->p == '-';
  if (neg) f->p++;
  int64_t v = product(f);
  if (neg && __builtin_sub_overflow(0, v, &v)) return fail(f, "overflow");
  for (skip(f); *f->p == '+' || *f->p == '-'; skip(f)) {
    int minus = *f->p++ == '-';
    int64_t t = product(f);
    if (minus ? __builtin_sub_overflow(v, t, &v) : __builtin_add_overflow(v, t, &v)) return fail(f, "overflow");
  }
  return v;
}

static int inspect_memory(const char *path, int ndims, char **dims) {
  dvm_module *m;
  dvm_status *st = dvm_module_load_file(path, NULL, &m);
  if (st) return dvm_cli_fail("inspect", st);
  const char *names[MAX_DIMS];
  int64_t values[MAX_DIMS];
  for (int i = 0; i < ndims; i++) {
    char *eq = strrchr(dims[i], '='), *end; /* N holds no '=': the name is all before the last */
    values[i] = eq ? strtoll(eq + 1, &end, 10) : -1;
    if (!eq || eq == dims[i] || !eq[1] || *end || values[i] < 0) {
      dvm_module_release(m);
      return dvm_cli_usage_error("inspect", "--dim %s: expected SYMBOL=N with N >= 0", dims[i]);
    }
    *eq = 0;
    names[i] = dims[i];
  }
  int rc = DVM_EXIT_OK;
  for (int fn = 0; fn < dvm_module_function_count(m) && rc == DVM_EXIT_OK; fn++) {
    const char *peak = dvm_function_info(m, fn, "peak");
    printf("function %s\n", dvm_function_name(m, fn));
    if (!peak) {
      printf("  peak: not recorded (compiled with --no-plan, or not by dvm compile)\n");
      continue;
    }
    const char *unplanned = dvm_function_info(m, fn, "unplanned"), *bound = dvm_function_info(m, fn, "peak_bound");
    printf("  peak = %s bytes\n", peak);
    if (bound) printf("  with its results bound (dvm_vm_invoke_bound): peak = %s bytes\n", bound);
    if (unplanned)
      printf("  (a lower bound: %s tensors are sized only at run time or made inside If or Loop bodies, "
             "and the pool holds them beside this)\n", unplanned);
    int have = 0;
    for (int s = 0; s < dvm_function_symbol_count(m, fn); s++) {
      dvm_symbol_info y;
      dvm_function_symbol(m, fn, s, &y);
      for (int i = 0; i < ndims; i++)
        if (!strcmp(names[i], y.name)) {
          have++;
          if (values[i] < y.lo || values[i] > y.hi)
            rc = dvm_cli_usage_error("inspect", "--dim %s=%lld: outside the symbol's range %lld..%lld", y.name,
                                     (long long)values[i], (long long)y.lo, (long long)y.hi);
        }
    }
    if (rc != DVM_EXIT_OK || !ndims) continue;
    formula f = {.p = peak, .names = names, .values = values, .n = ndims};
    int64_t v = sum(&f), vb = 0;
    if (!f.err && *f.p) f.err = "unexpected text";
    if (!f.err && bound) {
      f.p = bound;
      vb = sum(&f);
      if (!f.err && *f.p) f.err = "unexpected text";
    }
    if (f.err && have < dvm_function_symbol_count(m, fn)) {
      rc = dvm_cli_usage_error("inspect", "function %s: give every symbol a value with --dim", dvm_function_name(m, fn));
    } else if (f.err) {
      rc = dvm_cli_fail("inspect", dvm_status_new(DVM_OUT_OF_RANGE, "function %s: peak formula: %s",
                                                  dvm_function_name(m, fn), f.err));
    } else {
      for (int k = !bound; k < 2; k++) { /* the bound value first: scripts read the last line's */
        int64_t x = k ? v : vb;
        fputs(k ? "  at" : "  with its results bound, at", stdout);
        for (int i = 0; i < ndims; i++) printf("%s %s=%lld", i ? "," : "", names[i], (long long)values[i]);
        printf(": %lld bytes (%.1f MiB)\n", (long long)x, (double)x / (1 << 20));
      }
    }
  }
  dvm_module_release(m);
  return rc;
}

/* ---- what runs on the host in NAME@cuda functions ---- */

static int inspect_host(const char *path) {
  char *bytes, *text;
  size_t size;
  dvm_status *st = dvm_cli_read_file(path, &bytes, &size);
  if (!st) {
    st = dvmc_cuda_host_report(bytes, size, &text);
    free(bytes);
  }
  if (st) return dvm_cli_fail("inspect", dvm_status_annotate(st, "%s", path));
  fputs(text, stdout);
  free(text);
  return DVM_EXIT_OK;
}

/* ---- the kernel table, with the variant tables of generated kernels ---- */

static unsigned rd16(const uint8_t *p) { return p[0] | p[1] << 8; }
static uint32_t rd32(const uint8_t *p) {
  return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A DVMG payload (ops/cuda/gen_abi.h): its kind, configs, input classes,
 * dtypes, images and the entry names each variant index runs. The file is not
 * trusted: every table is checked against the payload's size. */
static void print_gen(const uint8_t *p, size_t size) {
  if (size < DVM_GEN_HEADER_SIZE || memcmp(p, DVM_GEN_MAGIC, 4) != 0) {
    puts("    payload: not a DVMG payload");
    return;
  }
  unsigned nconfigs = p[7], nin = p[8], nout = p[9], tile = rd16(p + 10);
  uint32_t nimages = rd32(p + 12);
  size_t classes = DVM_GEN_HEADER_SIZE + 8 * (size_t)nconfigs;
  size_t images = (classes + nin + 7) & ~(size_t)7;
  if (rd16(p + 4) != DVM_GEN_VERSION || tile == 0 || images > size || nimages > (size - images) / 16) {
    printf("    payload: DVMG version %u, truncated or malformed\n", rd16(p + 4));
    return;
  }
  static const char *const kinds[] = {[DVM_GEN_ELEMENTWISE] = "elementwise", [DVM_GEN_ROWS] = "rows",
                                       [DVM_GEN_GATHER] = "gather", [DVM_GEN_CONCAT] = "concat",
                                       [DVM_GEN_SPLIT] = "split", [DVM_GEN_WINDOW] = "window",
                                       [DVM_GEN_RESIZE] = "resize", [DVM_GEN_CONV] = "conv",
                                       [DVM_GEN_CONV_TRANSPOSE] = "conv_transpose",
                                       [DVM_GEN_MATMUL_NBITS] = "matmul_nbits"};
  int gather = p[6] == DVM_GEN_GATHER, concat = p[6] == DVM_GEN_CONCAT || p[6] == DVM_GEN_SPLIT;
  int window = p[6] == DVM_GEN_WINDOW || p[6] == DVM_GEN_RESIZE || p[6] == DVM_GEN_CONV ||
               p[6] == DVM_GEN_CONV_TRANSPOSE;
  int nbits = p[6] == DVM_GEN_MATMUL_NBITS;
  printf("    %s, %u inputs, %u outputs, tile T = %u\n",
         p[6] >= 1 && p[6] <= DVM_GEN_MATMUL_NBITS ? kinds[p[6]] : "unknown kind", nin, nout, tile);
  for (unsigned c = 0; c < nconfigs; c++)
    printf("    config %u: block %u, %u per thread, %u shared bytes\n", c,
           rd16(p + DVM_GEN_HEADER_SIZE + 8 * c), rd16(p + DVM_GEN_HEADER_SIZE + 8 * c + 2),
           rd32(p + DVM_GEN_HEADER_SIZE + 8 * c + 4));
  static const char *const class_names[] = {"same", "scalar", "suffix", "strided", "permuted", "sliced"};
  fputs(gather   ? "    inputs: data, indices (indexed along the call's axis)"
        : concat ? "    inputs: joined or cut along the call's axis"
        : window ? "    inputs: read through the call's window or coordinates"
        : nbits  ? "    inputs: A, B's codes, scales[, zero points][, bias] (by the call's present)"
                 : "    inputs:", stdout);
  for (unsigned k = 0; k < nin && !gather && !concat && !window && !nbits; k++)
    printf(" %s", p[classes + k] <= DVM_GEN_SLICED ? class_names[p[classes + k]] : "?");
  uint32_t dtypes = rd32(p + 24);
  fputs("\n    dtypes:", stdout);
  for (unsigned k = 0; k < nin + nout; k++) {
    int dt = dtypes <= size && nin + nout <= size - dtypes ? p[dtypes + k] : -1;
    printf("%s %s", k == nin ? " ->" : "",
           dt >= 0 && dt < DVM_DTYPE_COUNT ? dvm_dtype_name((dvm_dtype)dt) : "?");
  }
  fputs("\n    images:", stdout);
  for (uint32_t i = 0; i < nimages; i++) {
    uint32_t arch = rd32(p + images + 16 * i), bytes = rd32(p + images + 16 * i + 12);
    if (arch) printf("%s sm_%u %u bytes", i ? "," : "", arch, bytes);
    else printf("%s PTX %u bytes", i ? "," : "", bytes);
  }
  printf("\n    variants: 0..%u run dvm_v<n mod %u>, %u runs dvm_b "
         "(bounds-checked baseline)\n", tile - 1, tile, tile);
}

static void print_kernels(const dvm_module *m) {
  for (int k = 0; k < dvm_module_kernel_count(m); k++) {
    dvm_kernel_info info;
    dvm_module_kernel(m, k, &info);
    printf("  kernel %d %s (%s, %d variant%s)\n", k, info.name, dvm_device_name(info.device),
           info.nvariants, info.nvariants == 1 ? "" : "s");
    if (info.device == DVM_DEVICE_CUDA && strncmp(info.name, "gen@", 4) == 0)
      print_gen(info.payload, info.payload_size);
  }
}

int dvm_cmd_inspect(int argc, char **argv) {
  static const struct option opts[] = {
      {"memory", no_argument, 0, 'm'}, {"host", no_argument, 0, 'H'}, {"dim", required_argument, 0, 'D'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  char *dims[MAX_DIMS];
  int ndims = 0, memory = 0, host = 0;
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "mD:h", opts, NULL)) != -1;) {
    switch (c) {
    case 'm': memory = 1; break;
    case 'H': host = 1; break;
    case 'D':
      if (ndims == MAX_DIMS) return dvm_cli_usage_error("inspect", "too many --dim");
      dims[ndims++] = optarg;
      break;
    case 'h': fputs(usage, stdout); return DVM_EXIT_OK;
    default: fputs(usage, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || (ndims && !memory) || (host && memory)) {
    fputs(usage, stderr);
    return DVM_EXIT_USAGE;
  }
  if (memory) return inspect_memory(argv[optind], ndims, dims);
  if (host) return inspect_host(argv[optind]);
  dvm_module *m;
  dvm_status *st = dvm_module_load_file(argv[optind], NULL, &m);
  if (st) return dvm_cli_fail("inspect", st);
  printf("module %s\n", argv[optind]);
  printf("constants: %d (%zu bytes)\n", dvm_module_constant_count(m), dvm_module_constant_bytes(m));
  for (int i = 0; i < dvm_module_constant_count(m); i++) { /* text is short and tells what a model maps */
    const char *name;
    const dvm_tensor *t = dvm_module_constant(m, i, &name);
    if (!t || dvm_tensor_dtype(t) != DVM_STRING) continue;
    printf("  %s: ", name);
    dvm_cli_print_tensor(stdout, t, 16);
    putchar('\n');
  }
  printf("kernels: %d\n", dvm_module_kernel_count(m));
  print_kernels(m);
  int nf = dvm_module_function_count(m);
  printf("functions: %d\n", nf);
  for (int f = 0; f < nf; f++) {
    printf("\nfunction %s\n", dvm_function_name(m, f));
    for (int s = 0; s < dvm_function_symbol_count(m, f); s++) {
      dvm_symbol_info y;
      dvm_function_symbol(m, f, s, &y);
      printf("  symbol %s in %lld..%lld\n", y.name, (long long)y.lo, (long long)y.hi);
    }
    for (int p = 0; p < dvm_function_param_count(m, f); p++) {
      dvm_param_info info;
      dvm_function_param(m, f, p, &info);
      fputs("  input  ", stdout);
      dvm_cli_print_param(stdout, &info);
      putchar('\n');
    }
    for (int p = 0; p < dvm_function_result_count(m, f); p++) {
      dvm_param_info info;
      dvm_function_result(m, f, p, &info);
      fputs("  output ", stdout);
      dvm_cli_print_param(stdout, &info);
      putchar('\n');
    }
  }
  dvm_module_release(m);
  return DVM_EXIT_OK;
}
