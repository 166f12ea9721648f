/* Runs the programs in tests/asm/: each .dvms file carries its own test
 * cases in comments, read by this driver:
 *
 *   ; RUN: FUNCTION             starts a case
 *   ; OPTION: NAME=VALUE        VM option: step_limit, max_depth, pool_limit
 *   ; ARG: VALUE                the next argument
 *   ; EXPECT: VALUE             the next expected result
 *   ; ERROR: TEXT               the run fails with a message containing TEXT
 *   ; LOAD-ERROR: TEXT          the file fails to assemble or load (no RUN)
 *
 * VALUE is `int N`, `float X`, `shape [d, ...]`, or a tensor
 * `DTYPE [d, ...] x0 x1 ...` (floats compare within 1e-5 relative).
 * Host functions used by the programs are registered here. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "asm.h"
#include "dvm/dvm.h"
#include "harness.h"

#define MAX_VALUES 16

/* ---- host functions for hostcall tests ---- */

static int64_t host_add3(int64_t a, int64_t b, int64_t c) { return a + b + c; }
static double host_scale(double x, int64_t k) { return x * (double)k; }
static dvm_tensor *host_double(dvm_tensor *t) {
  dvm_tensor *r;
  dvm_status *st = dvm_tensor_create(dvm_tensor_dtype(t), dvm_tensor_rank(t), dvm_tensor_dims(t), &r);
  if (st) {
    dvm_status_free(st);
    return NULL;
  }
  const float *a = dvm_tensor_data(t);
  float *b = dvm_tensor_data(r);
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) b[i] = 2 * a[i];
  return r;
}
static dvm_tensor *host_fail(dvm_tensor *t) { return NULL; }

/* ---- value syntax ---- */

static int parse_dims(char **p, int *rank, int64_t *dims) {
  char *s = strchr(*p, '[');
  if (!s) return 0;
  s++;
  *rank = 0;
  while (*s && *s != ']') {
    while (*s == ' ' || *s == ',') s++;
    if (*s == ']') break;
    dims[(*rank)++] = strtoll(s, &s, 10);
  }
  *p = *s ? s + 1 : s;
  return 1;
}

/* Parses VALUE into v (tensors are new references). */
static int parse_value(char *s, dvm_value *v) {
  while (*s == ' ') s++;
  char kind[16];
  int n = 0;
  if (sscanf(s, "%15s%n", kind, &n) != 1) return 0;
  char *rest = s + n;
  if (strcmp(kind, "int") == 0) {
    *v = dvm_value_int(strtoll(rest, NULL, 0));
    return 1;
  }
  if (strcmp(kind, "float") == 0) {
    *v = dvm_value_float(strtod(rest, NULL));
    return 1;
  }
  int rank;
  int64_t dims[DVM_MAX_RANK];
  if (!parse_dims(&rest, &rank, dims)) return 0;
  if (strcmp(kind, "shape") == 0) {
    v->kind = DVM_VAL_SHAPE;
    v->rank = (uint8_t)rank;
    memcpy(v->u.dims, dims, sizeof(int64_t) * rank);
    return 1;
  }
  dvm_dtype dt;
  dvm_tensor *t;
  if (!dvm_dtype_parse(kind, &dt)) return 0;
  dvm_status *st = dvm_tensor_create(dt, rank, dims, &t);
  if (st) {
    dvm_status_free(st);
    return 0;
  }
  for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
    double x = strtod(rest, &rest);
    void *d = dvm_tensor_data(t);
    switch (dt) {
    case DVM_F32: ((float *)d)[i] = (float)x; break;
    case DVM_F64: ((double *)d)[i] = x; break;
    case DVM_I32: ((int32_t *)d)[i] = (int32_t)x; break;
    case DVM_I64: ((int64_t *)d)[i] = (int64_t)x; break;
    default: ((uint8_t *)d)[i] = (uint8_t)x; break;
    }
  }
  *v = dvm_value_tensor(t);
  return 1;
}

static double element(const dvm_tensor *t, int64_t i) {
  const void *d = dvm_tensor_data(t);
  switch (dvm_tensor_dtype(t)) {
  case DVM_F32: return ((const float *)d)[i];
  case DVM_F64: return ((const double *)d)[i];
  case DVM_I32: return ((const int32_t *)d)[i];
  case DVM_I64: return (double)((const int64_t *)d)[i];
  default: return ((const uint8_t *)d)[i];
  }
}

static int same_value(const dvm_value *want, const dvm_value *got, char *why, size_t n) {
  if (want->kind != got->kind) {
    snprintf(why, n, "kind %s, expected %s", dvm_kind_name(got->kind), dvm_kind_name(want->kind));
    return 0;
  }
  switch (want->kind) {
  case DVM_VAL_INT:
    snprintf(why, n, "int %lld, expected %lld", (long long)got->u.i, (long long)want->u.i);
    return want->u.i == got->u.i;
  case DVM_VAL_FLOAT:
    snprintf(why, n, "float %g, expected %g", got->u.f, want->u.f);
    return fabs(want->u.f - got->u.f) <= 1e-12 * fabs(want->u.f);
  case DVM_VAL_SHAPE:
    snprintf(why, n, "shape differs");
    return want->rank == got->rank && !memcmp(want->u.dims, got->u.dims, sizeof(int64_t) * want->rank);
  case DVM_VAL_TENSOR: {
    const dvm_tensor *a = want->u.tensor, *b = got->u.tensor;
    char sa[96], sb[96];
    dvm_shape_format(sa, sizeof sa, dvm_tensor_dtype(a), dvm_tensor_rank(a), dvm_tensor_dims(a));
    dvm_shape_format(sb, sizeof sb, dvm_tensor_dtype(b), dvm_tensor_rank(b), dvm_tensor_dims(b));
    if (strcmp(sa, sb) != 0) {
      snprintf(why, n, "tensor %s, expected %s", sb, sa);
      return 0;
    }
    for (int64_t i = 0; i < dvm_tensor_numel(a); i++) {
      double x = element(a, i), y = element(b, i);
      if (!(fabs(x - y) <= 1e-5 * fabs(x) + 1e-6)) {
        snprintf(why, n, "element %lld is %g, expected %g", (long long)i, y, x);
        return 0;
      }
    }
    return 1;
  }
  default: snprintf(why, n, "cannot compare %s", dvm_kind_name(want->kind)); return 0;
  }
}

/* ---- cases ---- */

typedef struct {
  char func[64];
  dvm_vm_options opts;
  dvm_value args[MAX_VALUES], want[MAX_VALUES];
  int nargs, nwant;
  char error[256];
  int line;
} run_case;

static void clear_case(run_case *c) {
  for (int i = 0; i < c->nargs; i++) dvm_value_clear(&c->args[i]);
  for (int i = 0; i < c->nwant; i++) dvm_value_clear(&c->want[i]);
}

static void run_one(const char *file, dvm_module *m, run_case *c) {
  int f = dvm_module_find_function(m, c->func);
  harness_checks++;
  if (f < 0) {
    harness_failures++;
    fprintf(stderr, "%s:%d: no function %s\n", file, c->line, c->func);
    return;
  }
  dvm_vm *vm;
  dvm_status *st = dvm_vm_create(m, &c->opts, &vm);
  dvm_value got[MAX_VALUES] = {{0}};
  int nres = dvm_function_result_count(m, f);
  if (!st) st = dvm_vm_invoke(vm, f, c->args, c->nargs, got, nres);
  if (c->error[0]) {
    if (!st || !strstr(dvm_status_message(st), c->error)) {
      harness_failures++;
      fprintf(stderr, "%s:%d: expected error containing \"%s\", got: %s\n", file, c->line, c->error,
              st ? dvm_status_message(st) : "success");
    }
  } else if (st) {
    harness_failures++;
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, c->line, c->func, dvm_status_message(st));
  } else if (nres != c->nwant) {
    harness_failures++;
    fprintf(stderr, "%s:%d: %d results, %d expected\n", file, c->line, nres, c->nwant);
  } else {
    for (int i = 0; i < nres; i++) {
      char why[256];
      if (!same_value(&c->want[i], &got[i], why, sizeof why)) {
        harness_failures++;
        fprintf(stderr, "%s:%d: result %d: %s\n", file, c->line, i, why);
      }
    }
  }
  dvm_status_free(st);
  for (int i = 0; i < nres && i < MAX_VALUES; i++) dvm_value_clear(&got[i]);
  if (vm) {
    /* every storage went back to the pool: nothing leaked from the registers */
    dvm_vm_stats s;
    dvm_vm_get_stats(vm, &s);
    harness_checks++;
    if (s.pool[DVM_DEVICE_CPU].in_use != 0) {
      harness_failures++;
      fprintf(stderr, "%s:%d: %llu bytes still in use after the run\n", file, c->line,
              (unsigned long long)s.pool[DVM_DEVICE_CPU].in_use);
    }
  }
  dvm_vm_destroy(vm);
}

static void run_file(const char *dir, const char *name, const dvm_hostfn_registry *reg) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen(path, "rb");
  static char text[1 << 20];
  size_t len = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
  if (fp) fclose(fp);
  text[len] = 0;
  char load_error[256] = "";
  const char *le = strstr(text, "; LOAD-ERROR: ");
  if (le) sscanf(le + 14, "%255[^\n]", load_error);

  dvm_module *built = NULL, *m = NULL;
  uint8_t *bytes = NULL;
  size_t size = 0;
  dvm_load_options lo = {reg};
  dvm_status *st = dvm_asm_parse(text, len, path, &built);
  if (!st) st = dvm_bc_write(built, &bytes, &size);
  if (!st) st = dvm_module_load_memory(bytes, size, &lo, &m);
  dvm_module_release(built);
  free(bytes);
  harness_checks++;
  if (load_error[0]) {
    if (!st || !strstr(dvm_status_message(st), load_error)) {
      harness_failures++;
      fprintf(stderr, "%s: expected load error \"%s\", got: %s\n", path, load_error,
              st ? dvm_status_message(st) : "success");
    }
    dvm_status_free(st);
    dvm_module_release(m);
    return;
  }
  if (st) {
    harness_failures++;
    fprintf(stderr, "%s: %s\n", path, dvm_status_message(st));
    dvm_status_free(st);
    return;
  }
  run_case c;
  int have = 0, line = 0;
  for (char *p = text; *p; line++) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = 0;
    if (strncmp(p, "; RUN: ", 7) == 0) {
      if (have) {
        run_one(path, m, &c);
        clear_case(&c);
      }
      memset(&c, 0, sizeof c);
      dvm_vm_options_init(&c.opts);
      sscanf(p + 7, "%63s", c.func);
      c.line = line + 1;
      have = 1;
    } else if (have && strncmp(p, "; OPTION: ", 10) == 0) {
      char key[32];
      long long v;
      if (sscanf(p + 10, "%31[^=]=%lld", key, &v) == 2) {
        if (!strcmp(key, "step_limit")) c.opts.step_limit = (uint64_t)v;
        else if (!strcmp(key, "max_depth")) c.opts.max_depth = (int)v;
        else if (!strcmp(key, "pool_limit")) c.opts.pool_limit = (size_t)v;
      }
    } else if (have && strncmp(p, "; ARG: ", 7) == 0 && c.nargs < MAX_VALUES) {
      CHECK(parse_value(p + 7, &c.args[c.nargs++]));
    } else if (have && strncmp(p, "; EXPECT: ", 10) == 0 && c.nwant < MAX_VALUES) {
      CHECK(parse_value(p + 10, &c.want[c.nwant++]));
    } else if (have && strncmp(p, "; ERROR: ", 9) == 0) {
      snprintf(c.error, sizeof c.error, "%s", p + 9);
    }
    p = nl ? nl + 1 : p + strlen(p);
  }
  if (have) {
    run_one(path, m, &c);
    clear_case(&c);
  }
  dvm_module_release(m);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_programs DIR\n");
    return 2;
  }
  dvm_hostfn_registry *reg;
  CHECK_OK(dvm_hostfn_registry_create(&reg));
  CHECK_OK(dvm_hostfn_register(reg, "add3", "iii->i", (void (*)(void))host_add3));
  CHECK_OK(dvm_hostfn_register(reg, "scale", "fi->f", (void (*)(void))host_scale));
  CHECK_OK(dvm_hostfn_register(reg, "double", "t->t", (void (*)(void))host_double));
  CHECK_OK(dvm_hostfn_register(reg, "fail", "t->t", (void (*)(void))host_fail));
  CHECK_ERR(dvm_hostfn_register(reg, "bad", "x->i", (void (*)(void))host_add3), DVM_INVALID_ARGUMENT,
            "argument 0 is 'x'");
  CHECK_ERR(dvm_hostfn_register(reg, "add3", "iii->i", (void (*)(void))host_add3), DVM_INVALID_ARGUMENT,
            "already registered");
  DIR *d = opendir(argv[1]);
  if (!d) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n > 5 && strcmp(e->d_name + n - 5, ".dvms") == 0) {
      run_file(argv[1], e->d_name, reg);
      files++;
    }
  }
  closedir(d);
  CHECK(files > 0);
  dvm_hostfn_registry_destroy(reg);
  return harness_finish("programs");
}
