/* The compiler's public API (compiler/include/dvmc.h), used the way its
 * clients use it: only dvmc.h and libdvm's public headers. argv[1] is
 * tests/models, argv[2] tests/cli (the .pb fixtures), argv[3] the folder
 * of extdata.onnx and its data file (make_extdata_model.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/dvm.h"
#include "dvmc.h"
#include "harness.h"

static const char *models, *fixtures, *extdir;

static char *path_of(const char *dir, const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

static void *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc(n > 0 ? (size_t)n : 1);
  *size = p ? fread(p, 1, (size_t)n, f) : 0;
  fclose(f);
  return p;
}

/* The symbol range module bytes declare for `sym` of main. */
static void range_of(const uint8_t *bytes, size_t size, const char *sym, int64_t *lo, int64_t *hi) {
  dvm_module *m;
  *lo = *hi = -1;
  dvm_status *st = dvm_module_load_memory(bytes, size, NULL, &m);
  CHECK_OK(st);
  if (st) return;
  int f = dvm_module_find_function(m, "main");
  for (int i = 0; f >= 0 && i < dvm_function_symbol_count(m, f); i++) {
    dvm_symbol_info s;
    dvm_function_symbol(m, f, i, &s);
    if (!strcmp(s.name, sym)) *lo = s.lo, *hi = s.hi;
  }
  dvm_module_release(m);
}

typedef struct said {
  int kinds[3];
  char first_progress[128];
} said;

static void collect(void *ctx, dvmc_diag_kind kind, const char *msg) {
  said *s = ctx;
  if (kind == DVMC_DIAG_PROGRESS && !s->kinds[kind]) snprintf(s->first_progress, sizeof s->first_progress, "%s", msg);
  s->kinds[kind]++;
}

/* A path and the same bytes from memory compile alike; NULL options are the defaults. */
static void test_file_and_memory(void) {
  const char *mlp = path_of(models, "mlp.onnx");
  uint8_t *a, *b, *c;
  size_t na, nb, nc, n;
  dvmc_compile_options o;
  dvmc_compile_options_init(&o);
  CHECK_OK(dvmc_compile_file(mlp, &o, &a, &na));
  void *data = read_all(mlp, &n);
  CHECK(data != NULL);
  CHECK_OK(dvmc_compile_memory(data, n, NULL, &o, &b, &nb));
  CHECK_OK(dvmc_compile_file(mlp, NULL, &c, &nc));
  CHECK(na > 0 && na == nb && nb == nc && !memcmp(a, b, na) && !memcmp(b, c, nb));
  /* broken bytes: a corrupt model named "<memory>", no bytes */
  uint8_t *d = (uint8_t *)1;
  size_t nd = 1;
  CHECK_ERR(dvmc_compile_memory(data, n / 2, NULL, &o, &d, &nd), DVM_CORRUPT, "<memory>");
  CHECK(d == NULL && nd == 0);
  free(data);
  free(a);
  free(b);
  free(c);
}

/* Ranges and fixed dims reach the module's signature; a wrong one is named. */
static void test_dims(void) {
  const char *mlp = path_of(models, "mlp.onnx");
  dvmc_compile_options o;
  dvmc_compile_options_init(&o);
  const char *range[] = {"batch=2..9"}, *fixed[] = {"batch=5"}, *wrong[] = {"zzz=1..2"}, *bad[] = {"batch=x"};
  uint8_t *bytes;
  size_t size;
  int64_t lo, hi;
  o.dims = range;
  o.ndims = 1;
  CHECK_OK(dvmc_compile_file(mlp, &o, &bytes, &size));
  range_of(bytes, size, "batch", &lo, &hi);
  CHECK(lo == 2 && hi == 9);
  free(bytes);
  o.dims = fixed;
  CHECK_OK(dvmc_compile_file(mlp, &o, &bytes, &size));
  range_of(bytes, size, "batch", &lo, &hi);
  CHECK(lo == 5 && hi == 5);
  free(bytes);
  o.dims = wrong;
  CHECK_ERR(dvmc_compile_file(mlp, &o, &bytes, &size), DVM_INVALID_ARGUMENT, "no input of the model has a dim named \"zzz\"");
  o.dims = bad;
  CHECK_ERR(dvmc_compile_file(mlp, &o, &bytes, &size), DVM_INVALID_ARGUMENT, "batch=x: expected NAME=N or NAME=LO..HI");
}

/* Passes by name; a wrong name refused before anything is read. */
static void test_passes(void) {
  CHECK(dvmc_pass_count() > 0);
  for (int i = 0; i < dvmc_pass_count(); i++) {
    dvmc_pass_info p;
    dvmc_pass_describe(i, &p);
    CHECK(p.name && p.what && dvmc_pass_find(p.name) == i);
  }
  CHECK(dvmc_pass_find("nosuch") == -1);
  const char *bert = path_of(models, "bert.onnx");
  /* the epilogue pass takes the Gelu that the gelu pass makes into the matmul */
  const char *one[] = {"epilogue"}, *two[] = {"epilogue", "gelu"}, *nosuch[] = {"gelu", "nosuch"};
  dvmc_compile_options o;
  dvmc_compile_options_init(&o);
  o.no_lower = true;
  uint8_t *bytes = (uint8_t *)1;
  size_t size;
  for (int n = 1; n <= 2; n++) {
    char *ir = NULL;
    size_t len;
    o.disable = n == 1 ? one : two;
    o.ndisable = n;
    o.dump_ir = open_memstream(&ir, &len);
    CHECK_OK(dvmc_compile_file(bert, &o, &bytes, &size));
    fclose(o.dump_ir);
    CHECK(bytes == NULL && size == 0); /* no_lower: the listing only */
    CHECK(ir && strstr(ir, "graph bert") && (strstr(ir, "= Gelu(") != NULL) == (n == 1));
    free(ir);
  }
  o.dump_ir = NULL;
  o.disable = nosuch;
  o.ndisable = 2;
  CHECK_ERR(dvmc_compile_file("/nonexistent.onnx", &o, &bytes, &size), DVM_INVALID_ARGUMENT, "no pass 'nosuch'");
}

/* Progress lines come to diag; nothing else is said of a clean model. */
static void test_diag(void) {
  said s = {{0}, ""};
  dvmc_compile_options o;
  dvmc_compile_options_init(&o);
  o.diag = collect;
  o.diag_ctx = &s;
  uint8_t *bytes;
  size_t size;
  CHECK_OK(dvmc_compile_file(path_of(models, "bert.onnx"), &o, &bytes, &size));
  free(bytes);
  CHECK(s.kinds[DVMC_DIAG_PROGRESS] >= 2 && !strncmp(s.first_progress, "imported ", 9));
  CHECK(s.kinds[DVMC_DIAG_WARNING] == 0);
}

/* Weights in an external data file are referred to when the .dvmb goes to
 * their folder (data_dir), copied without one or for another folder; a
 * model from memory finds its data file in model_dir, and without one it
 * is an error. */
static void test_external_data(void) {
  char model[4096];
  snprintf(model, sizeof model, "%s/extdata.onnx", extdir);
  const size_t weights = (16 * 64 + 64) * sizeof(float);
  uint8_t *copied = NULL, *other = NULL, *ref = NULL, *mem = NULL;
  size_t nc, no, nr, nm, n = 0;
  void *data = read_all(model, &n);
  CHECK(data != NULL);
  if (!data) return;
  dvmc_compile_options o;
  dvmc_compile_options_init(&o);
  CHECK_OK(dvmc_compile_file(model, &o, &copied, &nc));
  o.data_dir = models;
  CHECK_OK(dvmc_compile_file(model, &o, &other, &no));
  o.data_dir = extdir;
  CHECK_OK(dvmc_compile_file(model, &o, &ref, &nr));
  if (!copied || !other || !ref) goto done;
  CHECK(no == nc && !memcmp(other, copied, nc));
  CHECK(nr < weights && nc > weights);
  dvm_module *m = NULL;
  CHECK_OK(dvm_module_load_memory(copied, nc, NULL, &m));
  dvm_module_release(m);
  /* a module that refers to files cannot be loaded from memory: it has no folder */
  CHECK_ERR(dvm_module_load_memory(ref, nr, NULL, &m), DVM_UNIMPLEMENTED, "");
  CHECK_ERR(dvmc_compile_memory(data, n, NULL, &o, &mem, &nm), DVM_UNIMPLEMENTED,
            "external data file \"extdata.onnx.data\", but the model was given in memory without its directory");
  CHECK_OK(dvmc_compile_memory(data, n, extdir, &o, &mem, &nm));
  CHECK(mem && nm == nr && !memcmp(mem, ref, nr));
done:
  free(data);
  free(copied);
  free(other);
  free(ref);
  free(mem);
}

static void test_tables(void) {
  int add = 0;
  for (int i = 0; i < dvmc_op_count(); i++) {
    dvmc_op_info op;
    dvmc_op_describe(i, &op);
    CHECK(op.name && op.domain && op.min_opset >= 1);
    if (!strcmp(op.name, "Add") && !op.domain[0]) add = op.fuses && op.shape_rule && op.kernel;
  }
  CHECK(add);
  CHECK(dvmc_compiler_id() != 0 && dvmc_compiler_id() == dvmc_compiler_id());
}

static void test_pb(void) {
  size_t n;
  void *data = read_all(path_of(fixtures, "x_3x2_f32.pb"), &n);
  CHECK(data != NULL);
  dvm_tensor *t = NULL;
  CHECK_OK(dvmc_read_tensor_pb(data, n, "x.pb", &t));
  CHECK(t && dvm_tensor_dtype(t) == DVM_F32 && dvm_tensor_rank(t) == 2 && dvm_tensor_dims(t)[0] == 3 &&
        dvm_tensor_dims(t)[1] == 2);
  dvm_tensor_release(t);
  CHECK_ERR(dvmc_read_tensor_pb(data, n - 3, "x.pb", &t), DVM_CORRUPT, "x.pb");
  free(data);
  data = read_all(path_of(fixtures, "seq_2_f32.pb"), &n);
  CHECK(data != NULL);
  dvm_value v = {0};
  CHECK_OK(dvmc_read_sequence_pb(data, n, "seq.pb", &v));
  CHECK(v.kind == DVM_VAL_TUPLE && dvm_tuple_size(v.u.tuple) == 2);
  dvm_value_clear(&v);
  free(data);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_api MODELS_DIR PB_FIXTURES_DIR EXTDATA_DIR\n");
    return 2;
  }
  models = argv[1];
  fixtures = argv[2];
  extdir = argv[3];
  test_file_and_memory();
  test_dims();
  test_passes();
  test_diag();
  test_external_data();
  test_tables();
  test_pb();
  return harness_finish("compiler_api");
}
