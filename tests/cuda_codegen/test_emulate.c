/* The generated CUDA kernels, run on the host: compiler/cuda_codegen.c's
 * source for fused programs and ROWS kernels, compiled by g++ as C++ with
 * shim.h (the CUDA built-ins; ROWS blocks as real threads) into shared
 * objects, called with a filled dvm_gen_params, and compared with the CPU
 * kernels (fused, transpose, softmax, logsoftmax, layernorm, rmsnorm, reduce_*) on random
 * inputs with NaN, infinities and wrapping integers, at extents 1, primes,
 * T*k + r for every residue r and just past a block: every variant that
 * fits n and the baseline, every configuration, every input class.
 * A wrong variant is shown to fail. Each kernel's form (vm/kernel.h), by
 * which placement picks its generator, is the one checked here. usage: test_emulate SHIM_DIR [rows] (rows: the ROWS kernels only). Skips
 * (77) without g++. */
#include <dlfcn.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compiler/cuda_codegen.h"
#include "harness.h"
#include "kernel.h"
#include "object.h"
#include "ops/cpu/fused.h"
#include "ops/cpu/vec.h"
#include "ops/cuda/gen_abi.h"
#include "ops/cuda/payload.h"
#include "ops/optable.h"
#include "shapefuncs/movement.h"
#include "shapefuncs/window.h"

extern char **environ;

#define T DVMC_CUDA_TILE

typedef int (*launch_fn)(void *kernel, const unsigned *grid, const unsigned *block, int schedule,
                         unsigned long long seed, const dvm_gen_params *p);

/* One generated source on its way to a loaded shared object. */
typedef struct unit {
  char *src;
  char path[256]; /* without extension */
  pid_t pid;
  void *so;
  launch_fn launch;
} unit;

static const char *shim_dir;
static char tmp_dir[] = "/tmp/dvm_emulate_XXXXXX";
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static uint64_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* Writes the source between the two halves of the shim and starts g++. */
static void unit_start(unit *u, int id) {
  snprintf(u->path, sizeof u->path, "%s/k%d", tmp_dir, id);
  char cc[300], so[300], inc[300];
  snprintf(cc, sizeof cc, "%s.cc", u->path);
  snprintf(so, sizeof so, "%s.so", u->path);
  snprintf(inc, sizeof inc, "-I%s", shim_dir);
  FILE *f = fopen(cc, "w");
  CHECK(f != NULL);
  if (!f) return;
  fprintf(f, "#include \"shim.h\"\n%s\n#include \"shim_launch.h\"\n", u->src);
  fclose(f);
  /* -ffp-contract=off: NVRTC runs with -fmad=false, the CPU never contracts */
  char *argv[] = {"g++", "-x", "c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off",
                  "-Wall", "-Wno-unused-variable", "-Wno-unused-function", "-Werror", inc,
                  "-o", so, cc, "-pthread", NULL};
  CHECK(posix_spawnp(&u->pid, "g++", NULL, NULL, argv, environ) == 0);
}

static void unit_finish(unit *u) {
  int status = 0;
  CHECK(waitpid(u->pid, &status, 0) == u->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char so[300];
  snprintf(so, sizeof so, "%s.so", u->path);
  u->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!u->so) fprintf(stderr, "%s: %s\n", so, dlerror());
  CHECK(u->so != NULL);
  if (u->so) *(void **)&u->launch = dlsym(u->so, "dvm_emu_launch");
}

/* Compiles all units, two g++ at a time. */
static void units_build(unit *all, int n) {
  unit **u = malloc(sizeof *u * (size_t)n);
  int m = 0;
  CHECK(u != NULL);
  if (!u) return;
  for (int i = 0; i < n; i++)
    if (all[i].src) u[m++] = &all[i];
  for (int i = 0; i < m; i++) {
    if (i >= 2) unit_finish(u[i - 2]);
    unit_start(u[i], i);
  }
  for (int i = m > 2 ? m - 2 : 0; i < m; i++) unit_finish(u[i]);
  free(u);
}

/* ---- tensors ---- */

static dvm_tensor *make(dvm_dtype dt, int rank, const int64_t *dims) {
  dvm_tensor *t = NULL;
  CHECK_OK(dvm_tensor_create(dt, rank, dims, &t));
  return t;
}

/* Random values: floats mostly in [-2, 2) with a NaN, infinities and
 * large values at fixed places; integers over their whole range. */
static void fill(dvm_tensor *t, int specials) {
  int64_t n = dvm_tensor_numel(t);
  void *p = dvm_tensor_ptr(t);
  static const float special[] = {NAN, INFINITY, -INFINITY, 3e38f, -7e4f, 0.0f, -0.0f};
  float *tmp = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rnd();
    switch (t->dtype) {
    case DVM_I32: ((int32_t *)p)[i] = (int32_t)r; break;
    case DVM_I64: ((int64_t *)p)[i] = (r & 1) ? (int64_t)r : (int64_t)(r >> 40) - (1 << 23); break;
    case DVM_BOOL: ((uint8_t *)p)[i] = (uint8_t)(r >> 60); break; /* any nonzero byte is true */
    case DVM_U8: ((uint8_t *)p)[i] = (uint8_t)(r >> 56); break;
    default:
      tmp[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 4 - 2);
      if (specials && i % 11 == 5) tmp[i] = special[(i / 11) % 7];
    }
  }
  if (dvm_vec_is_float(t->dtype)) dvm_vec_store(t->dtype, tmp, p, n);
  free(tmp);
}

/* Whether emulated output e matches the CPU's c, element by element;
 * floats within rtol relative (plus atol, plus one unit of f16/bf16).
 * Says where not, unless `what` is NULL. */
static int matches(const dvm_tensor *e, const dvm_tensor *c, double rtol, const double *atol,
                const char *what) {
  int64_t n = dvm_tensor_numel(c);
  if (!dvm_vec_is_float(c->dtype)) {
    if (memcmp(dvm_tensor_ptr(e), dvm_tensor_ptr(c), dvm_tensor_nbytes(c)) == 0) return 1;
    if (what) fprintf(stderr, "%s: %s output differs\n", what, dvm_dtype_name(c->dtype));
    return 0;
  }
  float *a = malloc(sizeof(float) * (size_t)n * 2), *b = a + n;
  dvm_vec_load(e->dtype, dvm_tensor_ptr(e), a, n);
  dvm_vec_load(c->dtype, dvm_tensor_ptr(c), b, n);
  double ulp = c->dtype == DVM_F16 ? 1.0 / 1024 : c->dtype == DVM_BF16 ? 1.0 / 128 : 0;
  int ok = 1;
  for (int64_t i = 0; i < n && ok; i++) {
    double d = fabs((double)a[i] - b[i]), tol = (rtol + ulp) * fabs(b[i]) + atol[i] + ulp * 1e-3;
    if (isnan(b[i]) ? !isnan(a[i]) : isinf(b[i]) ? a[i] != b[i] : !(d <= tol)) {
      if (what) fprintf(stderr, "%s: element %lld: %.9g, the CPU gives %.9g\n", what, (long long)i, a[i], b[i]);
      ok = 0;
    }
  }
  free(a);
  return ok;
}

/* 0x5a bytes: finite floats no correct run computes here, a bool that is
 * neither 0 nor 1 */
static void poison(dvm_tensor *t) { memset(dvm_tensor_ptr(t), 0x5a, dvm_tensor_nbytes(t)); }

/* dims right-aligned to DVM_GEN_MAX_RANK with leading 1s */
static void align(const dvm_tensor *t, long long *out) {
  int lead = DVM_GEN_MAX_RANK - t->rank;
  for (int d = 0; d < DVM_GEN_MAX_RANK; d++) out[d] = d < lead ? 1 : t->dims[d - lead];
}

/* The parameter block as the launcher fills it: the reference shape, each
 * input's broadcast strides and element count, the pointers. */
static void params(dvm_gen_params *p, const dvm_tensor *ref, dvm_tensor **in, int nin,
                   dvm_tensor **out, int nout) {
  memset(p, 0, sizeof *p);
  align(ref, p->dims);
  for (int k = 0; k < nin; k++) {
    long long d[DVM_GEN_MAX_RANK], stride = 1;
    align(in[k], d);
    for (int q = DVM_GEN_MAX_RANK - 1; q >= 0; q--) {
      p->strides[k][q] = d[q] == 1 ? 0 : stride;
      stride *= d[q];
    }
    p->numel[k] = dvm_tensor_numel(in[k]);
    p->ptr[k] = dvm_tensor_ptr(in[k]);
  }
  for (int o = 0; o < nout; o++) p->ptr[nin + o] = dvm_tensor_ptr(out[o]);
}

static dvm_status *cpu(const char *name, const void *payload, size_t size, dvm_tensor **in,
                       int nin, dvm_tensor **out, int nout, const dvm_value *attrs, int nattrs) {
  const dvm_kernel_def *k = dvm_ops_find(name, DVM_DEVICE_CPU);
  if (!k) return dvm_status_new(DVM_NOT_FOUND, "no CPU kernel %s", name);
  dvm_exec ex = {.threads = 1};
  dvm_kernel_args a = {.in = in, .nin = nin, .out = out, .nout = nout, .attrs = attrs,
                       .nattrs = nattrs, .payload = payload, .payload_size = size, .exec = &ex};
  return k->fn(&a);
}

/* Runs entry `variant` (T: the baseline) of config c; 0 on success.
 * Launches take the emulation's schedules in turn (lowest thread first,
 * highest first, random), the random one seeded by the launch's number. */
static int launch(const unit *u, int c, int variant, unsigned grid, const dvm_gen_params *p) {
  static unsigned long long launches;
  char name[32];
  if (variant < T) snprintf(name, sizeof name, "dvm_v%d", variant);
  else snprintf(name, sizeof name, "dvm_b");
  void *k = u->so ? dlsym(u->so, name) : NULL;
  CHECK(k != NULL);
  if (!k) return -1;
  unsigned g[3] = {grid, 1, 1}, b[3] = {dvmc_cuda_blocks[c], 1, 1};
  launches++;
  int rc = u->launch(k, g, b, (int)(launches % 3), launches, p);
  if (rc) fprintf(stderr, "%s: the emulation reports %d\n", name, rc);
  return rc;
}

/* ---- elementwise ---- */

/* Programs that use every op in every register type it takes, through
 * every input and output dtype. */
static void prog_math(dvm_fused_builder *b) {
  int x = dvm_fused_load(b, dvm_fused_input(b, DVM_F32));
  int y = dvm_fused_load(b, dvm_fused_input(b, DVM_F16));
  int z = dvm_fused_load(b, dvm_fused_input(b, DVM_BF16));
  int o0 = dvm_fused_output(b, DVM_F32), o1 = dvm_fused_output(b, DVM_F16),
      o2 = dvm_fused_output(b, DVM_BF16);
  int t = dvm_fused_op2(b, DVM_FUSED_MUL, dvm_fused_op1(b, DVM_FUSED_TANH, y),
                        dvm_fused_op1(b, DVM_FUSED_ERF, z));
  t = dvm_fused_op2(b, DVM_FUSED_ADD, dvm_fused_op1(b, DVM_FUSED_EXP, x), t);
  t = dvm_fused_op2(b, DVM_FUSED_SUB, t,
                    dvm_fused_op2(b, DVM_FUSED_DIV, dvm_fused_op1(b, DVM_FUSED_SIGMOID, x),
                                  dvm_fused_op1(b, DVM_FUSED_SQRT, y)));
  dvm_fused_store(b, o0, t);
  t = dvm_fused_op2(b, DVM_FUSED_ADD, dvm_fused_op1(b, DVM_FUSED_GELU, x),
                    dvm_fused_op1(b, DVM_FUSED_GELU_TANH, y));
  t = dvm_fused_op2(b, DVM_FUSED_ADD, t, dvm_fused_op1(b, DVM_FUSED_RECIPROCAL, z));
  t = dvm_fused_op2(b, DVM_FUSED_ADD, t, dvm_fused_op1(b, DVM_FUSED_LOG, x));
  t = dvm_fused_op2(b, DVM_FUSED_ADD, t, dvm_fused_op2(b, DVM_FUSED_POW, y, z));
  dvm_fused_store(b, o1, t);
  t = dvm_fused_op2(b, DVM_FUSED_SUB, dvm_fused_op1(b, DVM_FUSED_RELU, x),
                    dvm_fused_op1(b, DVM_FUSED_ABS, y));
  int mm = dvm_fused_op2(b, DVM_FUSED_MUL, dvm_fused_op2(b, DVM_FUSED_MIN, x, z),
                         dvm_fused_op2(b, DVM_FUSED_MAX, y, dvm_fused_op1(b, DVM_FUSED_NEG, z)));
  t = dvm_fused_op2(b, DVM_FUSED_ADD, dvm_fused_op2(b, DVM_FUSED_ADD, t, mm),
                    dvm_fused_const_f32(b, 1.5));
  dvm_fused_store(b, o2, dvm_fused_op1(b, DVM_FUSED_MOV, t));
}

static void prog_logic(dvm_fused_builder *b) {
  int x = dvm_fused_load(b, dvm_fused_input(b, DVM_F32));
  int k = dvm_fused_load(b, dvm_fused_input(b, DVM_I32));
  int q = dvm_fused_load(b, dvm_fused_input(b, DVM_I64));
  int m = dvm_fused_load(b, dvm_fused_input(b, DVM_BOOL));
  int oi = dvm_fused_output(b, DVM_I64), ob = dvm_fused_output(b, DVM_BOOL),
      of = dvm_fused_output(b, DVM_F32), o32 = dvm_fused_output(b, DVM_I32);
  int c = dvm_fused_op2(b, DVM_FUSED_GREATER, x, dvm_fused_const_f32(b, 0.25));
  int d = dvm_fused_op2(b, DVM_FUSED_LESS_EQUAL, x, dvm_fused_const_f32(b, -0.5));
  int e = dvm_fused_op2(b, DVM_FUSED_GREATER_EQUAL, k, q);
  int w = dvm_fused_where(b, c, dvm_fused_op2(b, DVM_FUSED_ADD, k, q),
                          dvm_fused_op2(b, DVM_FUSED_SUB, dvm_fused_op2(b, DVM_FUSED_MUL, k, q),
                                        dvm_fused_op1(b, DVM_FUSED_NEG, q)));
  w = dvm_fused_op2(b, DVM_FUSED_MIN, w, dvm_fused_op1(b, DVM_FUSED_ABS, q));
  w = dvm_fused_op2(b, DVM_FUSED_MAX, w,
                    dvm_fused_op1(b, DVM_FUSED_RELU, dvm_fused_op2(b, DVM_FUSED_SUB, k, q)));
  w = dvm_fused_op2(b, DVM_FUSED_ADD, w, dvm_fused_const_i64(b, INT64_MIN + 3));
  dvm_fused_store(b, oi, w);
  int eq = dvm_fused_op2(b, DVM_FUSED_EQUAL, m, c);
  int l = dvm_fused_op2(b, DVM_FUSED_OR, dvm_fused_op2(b, DVM_FUSED_LESS, k, q),
                        dvm_fused_op2(b, DVM_FUSED_EQUAL, k, q));
  l = dvm_fused_op2(b, DVM_FUSED_XOR, dvm_fused_op1(b, DVM_FUSED_NOT, eq),
                    dvm_fused_op2(b, DVM_FUSED_OR, d, l));
  l = dvm_fused_op2(b, DVM_FUSED_OR, dvm_fused_op2(b, DVM_FUSED_AND, m, c), l);
  l = dvm_fused_op2(b, DVM_FUSED_AND, l, dvm_fused_op2(b, DVM_FUSED_EQUAL, x, x));
  dvm_fused_store(b, ob, dvm_fused_op2(b, DVM_FUSED_XOR, l, dvm_fused_cast(b, x, DVM_BOOL)));
  int f = dvm_fused_op2(b, DVM_FUSED_ADD, dvm_fused_cast(b, k, DVM_F32), dvm_fused_cast(b, m, DVM_F32));
  f = dvm_fused_op2(b, DVM_FUSED_ADD, f, dvm_fused_where(b, e, x, dvm_fused_cast(b, q, DVM_F32)));
  f = dvm_fused_op2(b, DVM_FUSED_MAX, f, dvm_fused_op2(b, DVM_FUSED_MIN, x, dvm_fused_const_f32(b, 0)));
  f = dvm_fused_op2(b, DVM_FUSED_ADD, f, dvm_fused_cast(b, dvm_fused_cast(b, q, DVM_BOOL), DVM_F32));
  dvm_fused_store(b, of, f);
  int i = dvm_fused_cast(b, dvm_fused_op2(b, DVM_FUSED_MUL, x, dvm_fused_const_f32(b, 1e9)), DVM_I64);
  i = dvm_fused_op2(b, DVM_FUSED_ADD, i, dvm_fused_cast(b, m, DVM_I64));
  dvm_fused_store(b, o32, i);
}

/* A load after a store: output 0 over input 1 (in place) must not change
 * what the load reads. Three inputs, so that every rotation of classes
 * broadcasts to the output. */
static void prog_late(dvm_fused_builder *b) {
  int x = dvm_fused_load(b, dvm_fused_input(b, DVM_F32));
  int in1 = dvm_fused_input(b, DVM_F32);
  int z = dvm_fused_load(b, dvm_fused_input(b, DVM_F32));
  int o0 = dvm_fused_output(b, DVM_F32), o1 = dvm_fused_output(b, DVM_F32);
  dvm_fused_store(b, o0, dvm_fused_op2(b, DVM_FUSED_MUL, x, z));
  dvm_fused_store(b, o1, dvm_fused_op2(b, DVM_FUSED_SUB, dvm_fused_load(b, in1), x));
}

static const struct {
  const char *name;
  void (*build)(dvm_fused_builder *);
} progs[] = {{"math", prog_math}, {"logic", prog_logic}, {"late", prog_late}};
#define NPROGS (int)(sizeof progs / sizeof progs[0])

/* Output shapes: n = 1, primes, every residue mod T, past a block's tile
 * (128 * T, 256 * T), several blocks. */
static const int64_t ew_shapes[][3] = {
    {1, 1, 1}, {1, 2, 1},   {1, 1, 3},   {1, 2, 2},   {1, 5, 1},   {1, 1, 7},    {1, 2, 13},
    {2, 3, 5}, {1, 3, 43},  {1, 4, 33},  {1, 1, 257}, {1, 3, 171}, {1, 2, 512},  {1, 2, 515},
    {5, 1, 207}, {1, 7, 293}};

/* An input's shape for its class against the output's [a, b, c]: SUFFIX
 * [c], STRIDED [a, b, 1], so that any two classes but SCALAR broadcast to
 * the output, as the CPU kernel wants. */
static dvm_tensor *input_for(int cls, dvm_dtype dt, const int64_t *o) {
  int64_t d[3] = {o[0], o[1], o[2]};
  switch (cls) {
  case DVM_GEN_SCALAR: return make(dt, 0, d);
  case DVM_GEN_SUFFIX: return make(dt, 1, d + 2);
  case DVM_GEN_STRIDED: d[2] = 1; return make(dt, 3, d);
  default: return make(dt, 3, d);
  }
}

/* One program with one class per input, at every shape, against the CPU
 * (kernel `fused` running it, or `kernel` with attrs when the program
 * stands for that one op), in every config, variant n mod T and the
 * baseline. */
static void ew_check(const unit *u, const void *prog, size_t size, const uint8_t *cls,
                     const char *kernel, const dvm_value *attrs, int nattrs) {
  const uint8_t *h = prog;
  int nin = h[6], nout = h[7];
  for (size_t s = 0; s < sizeof ew_shapes / sizeof ew_shapes[0]; s++) {
    const int64_t *o = ew_shapes[s];
    dvm_tensor *in[DVM_GEN_MAX_IN], *ref[DVM_GEN_MAX_OUT], *out[DVM_GEN_MAX_OUT];
    for (int k = 0; k < nin; k++) fill(in[k] = input_for(cls[k], (dvm_dtype)h[16 + k], o), 1);
    for (int k = 0; k < nout; k++) {
      ref[k] = make((dvm_dtype)h[16 + nin + k], 3, o);
      out[k] = make((dvm_dtype)h[16 + nin + k], 3, o);
    }
    if (kernel) CHECK_OK(cpu(kernel, NULL, 0, in, nin, ref, nout, attrs, nattrs));
    else CHECK_OK(cpu("fused", prog, size, in, nin, ref, nout, NULL, 0));
    int64_t n = o[0] * o[1] * o[2];
    double *atol = calloc((size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++) atol[i] = 1e-6;
    dvm_gen_params p;
    params(&p, ref[0], in, nin, out, nout);
    p.n = n, p.rows = 1;
    for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
      for (int v = (int)(n % T); v <= T; v += T - (int)(n % T)) {
        char what[96];
        snprintf(what, sizeof what, "elementwise classes %d%d%d%d n %lld config %d variant %d",
                 cls[0], cls[1], cls[2], nin > 3 ? cls[3] : 0, (long long)n, c, v);
        for (int k = 0; k < nout; k++) poison(out[k]);
        long long per_block = (long long)dvmc_cuda_blocks[c] * T;
        CHECK(launch(u, c, v, (unsigned)((n + per_block - 1) / per_block), &p) == 0);
        for (int k = 0; k < nout; k++) {
          char whatk[128];
          snprintf(whatk, sizeof whatk, "%s output %d", what, k);
          CHECK(matches(out[k], ref[k], 1e-5, atol, whatk));
        }
        if (v == T) break;
      }
    /* output 0 over each same-shape input of its element size, as the
     * memory plan's in place gives it: the same results */
    for (int k = 0; k < nin; k++) {
      if (cls[k] != DVM_GEN_SAME || dvm_dtype_size(in[k]->dtype) != dvm_dtype_size(out[0]->dtype)) continue;
      dvm_gen_params ip = p;
      for (int v = (int)(n % T); v <= T; v += T) {
        char what[96];
        snprintf(what, sizeof what, "elementwise in place over input %d n %lld variant %d", k, (long long)n, v);
        memcpy(dvm_tensor_ptr(out[0]), dvm_tensor_ptr(in[k]), dvm_tensor_nbytes(in[k]));
        ip.ptr[k] = ip.ptr[nin] = dvm_tensor_ptr(out[0]);
        CHECK(launch(u, 0, v, (unsigned)((n + 255) / 256), &ip) == 0);
        for (int j = 0; j < nout; j++) CHECK(matches(out[j], ref[j], 1e-5, atol, what));
      }
    }
    /* the check can fail: variant 0 leaves the n mod T tail unwritten */
    if (n % T) {
      poison(out[0]);
      CHECK(launch(u, 0, 0, 1, &p) == 0);
      CHECK(!matches(out[0], ref[0], 1e-5, atol, NULL));
    }
    free(atol);
    for (int k = 0; k < nin; k++) dvm_tensor_release(in[k]);
    for (int k = 0; k < nout; k++) dvm_tensor_release(ref[k]), dvm_tensor_release(out[k]);
  }
}

/* ---- standalone ops: dvmc_cuda_op_program ---- */

#define AI(v) {DVMC_ATTR_INT, v, 0}
#define AF(v) {DVMC_ATTR_FLOAT, 0, v}

/* Single CPU kernels (dtypes: inputs, then the output) as one-op programs;
 * every op, every register type, each conversion DVMF does exactly. */
static const struct op_case {
  const char *kernel;
  int nin;
  dvm_dtype dt[4];
  int nattrs;
  dvmc_cuda_attr at[2];
} op_cases[] = {
    {"add", 2, {DVM_F32, DVM_F32, DVM_F32}, 0, {{0}}},
    {"sub", 2, {DVM_I32, DVM_I32, DVM_I32}, 0, {{0}}},
    {"mul", 2, {DVM_I64, DVM_I64, DVM_I64}, 0, {{0}}},
    {"div", 2, {DVM_BF16, DVM_BF16, DVM_BF16}, 0, {{0}}},
    {"pow", 2, {DVM_F16, DVM_F16, DVM_F16}, 0, {{0}}},
    {"min", 2, {DVM_F32, DVM_F32, DVM_F32}, 0, {{0}}},
    {"max", 2, {DVM_I32, DVM_I32, DVM_I32}, 0, {{0}}},
    {"equal", 2, {DVM_F32, DVM_F32, DVM_BOOL}, 0, {{0}}},
    {"less", 2, {DVM_I64, DVM_I64, DVM_BOOL}, 0, {{0}}},
    {"greater", 2, {DVM_I32, DVM_I32, DVM_BOOL}, 0, {{0}}},
    {"less_equal", 2, {DVM_BF16, DVM_BF16, DVM_BOOL}, 0, {{0}}},
    {"greater_equal", 2, {DVM_F16, DVM_F16, DVM_BOOL}, 0, {{0}}},
    {"and", 2, {DVM_BOOL, DVM_BOOL, DVM_BOOL}, 0, {{0}}},
    {"or", 2, {DVM_BOOL, DVM_BOOL, DVM_BOOL}, 0, {{0}}},
    {"xor", 2, {DVM_BOOL, DVM_BOOL, DVM_BOOL}, 0, {{0}}},
    {"where", 3, {DVM_BOOL, DVM_I64, DVM_I64, DVM_I64}, 0, {{0}}},
    {"where", 3, {DVM_BOOL, DVM_BF16, DVM_BF16, DVM_BF16}, 0, {{0}}},
    {"not", 1, {DVM_BOOL, DVM_BOOL}, 0, {{0}}},
    {"sqrt", 1, {DVM_F32, DVM_F32}, 0, {{0}}},
    {"exp", 1, {DVM_F16, DVM_F16}, 0, {{0}}},
    {"log", 1, {DVM_BF16, DVM_BF16}, 0, {{0}}},
    {"tanh", 1, {DVM_F32, DVM_F32}, 0, {{0}}},
    {"erf", 1, {DVM_F32, DVM_F32}, 0, {{0}}},
    {"sigmoid", 1, {DVM_F32, DVM_F32}, 0, {{0}}},
    {"reciprocal", 1, {DVM_F32, DVM_F32}, 0, {{0}}},
    {"relu", 1, {DVM_I32, DVM_I32}, 0, {{0}}},
    {"neg", 1, {DVM_I64, DVM_I64}, 0, {{0}}},
    {"abs", 1, {DVM_F16, DVM_F16}, 0, {{0}}},
    {"gelu", 1, {DVM_F32, DVM_F32}, 0, {{0}}},
    {"gelu", 1, {DVM_F32, DVM_F32}, 1, {AI(1)}},
    {"clip", 1, {DVM_F32, DVM_F32}, 2, {AF(-0.5), AF(0.75)}},
    {"clip", 1, {DVM_F16, DVM_F16}, 2, {AI(0), AF(INFINITY)}},
    {"cast", 1, {DVM_I64, DVM_F32}, 0, {{0}}},
    {"cast", 1, {DVM_F32, DVM_F16}, 0, {{0}}},
    {"cast", 1, {DVM_BF16, DVM_I64}, 0, {{0}}},
    {"cast", 1, {DVM_F32, DVM_BOOL}, 0, {{0}}},
    {"cast", 1, {DVM_BOOL, DVM_BF16}, 0, {{0}}},
    {"cast", 1, {DVM_I64, DVM_I32}, 0, {{0}}},
    {"cast", 1, {DVM_I32, DVM_F16}, 0, {{0}}},
};
#define NOPS (int)(sizeof op_cases / sizeof op_cases[0])

/* The attributes as the CPU kernel takes them. */
static int cpu_attrs(const struct op_case *c, dvm_value *v) {
  for (int q = 0; q < c->nattrs; q++)
    v[q] = c->at[q].kind == DVMC_ATTR_INT ? dvm_value_int(c->at[q].i) : dvm_value_float(c->at[q].f);
  return c->nattrs;
}

/* Calls that stay on the host: no exact DVMF form, or nothing the CPU
 * kernel accepts. */
static void op_program_refusals(void) {
  static const struct op_case no[] = {
      {"div", 2, {DVM_I32, DVM_I32, DVM_I32}, 0, {{0}}},        /* truncating */
      {"pow", 2, {DVM_I64, DVM_I64, DVM_I64}, 0, {{0}}},
      {"add", 2, {DVM_F32, DVM_F16, DVM_F32}, 0, {{0}}},        /* mixed */
      {"add", 2, {DVM_F64, DVM_F64, DVM_F64}, 0, {{0}}},        /* no f64 in DVMF */
      {"less", 2, {DVM_F32, DVM_F32, DVM_F32}, 0, {{0}}},       /* not to bool */
      {"equal", 2, {DVM_BOOL, DVM_BOOL, DVM_BOOL}, 0, {{0}}},   /* bytes, not truth */
      {"and", 2, {DVM_I32, DVM_I32, DVM_I32}, 0, {{0}}},
      {"where", 3, {DVM_F32, DVM_F32, DVM_F32, DVM_F32}, 0, {{0}}},
      {"cast", 1, {DVM_F32, DVM_I32}, 0, {{0}}},                /* INT32_MIN outside */
      {"cast", 1, {DVM_I64, DVM_BF16}, 0, {{0}}},               /* two roundings */
      {"cast", 1, {DVM_U8, DVM_F32}, 0, {{0}}},
      {"clip", 1, {DVM_I32, DVM_I32}, 2, {AI(0), AI(5)}},       /* rounds bounds inward */
      {"clip", 1, {DVM_F32, DVM_F32}, 2, {AF(NAN), AF(1)}},     /* an error on the CPU */
      {"clip", 1, {DVM_F32, DVM_F32}, 2, {{0}, AF(1)}},         /* unknown bound */
      {"gelu", 1, {DVM_F32, DVM_F32}, 1, {{0}}},
      {"gelu", 1, {DVM_F32, DVM_F32}, 1, {AI(2)}},
      {"relu", 1, {DVM_F32, DVM_F32}, 1, {AI(0)}},
  };
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    void *prog = (void *)1;
    size_t size = 0;
    CHECK_OK(dvmc_cuda_op_program(no[i].kernel, no[i].nin, no[i].dt, no[i].nattrs, no[i].at, &prog, &size));
    if (prog) fprintf(stderr, "case %zu (%s): a program where the host must run it\n", i, no[i].kernel);
    CHECK(prog == NULL);
  }
}

/* ---- transpose: one PERMUTED input ---- */

static const dvm_dtype tr_dtypes[] = {DVM_F32, DVM_I32, DVM_I64};
#define NTR (int)(sizeof tr_dtypes / sizeof tr_dtypes[0])

/* Input shapes and perms (rank 0: none, dims reversed): n = 1, primes,
 * every residue mod T, a BERT head split, rank 6, dims of 1. */
static const struct {
  int rank;
  int64_t dims[DVM_GEN_MAX_RANK];
  int nperm;
  int64_t perm[DVM_GEN_MAX_RANK];
} tr_cases[] = {
    {1, {1}, 1, {0}},
    {3, {2, 3, 5}, 3, {2, 0, 1}},
    {3, {1, 7, 13}, 3, {0, 2, 1}},
    {4, {3, 1, 43, 2}, 4, {3, 2, 1, 0}},
    {2, {5, 129}, 2, {1, 0}},
    {2, {17, 31}, 0, {0}},
    {4, {1, 7, 12, 64}, 4, {0, 2, 1, 3}},
    {4, {2, 13, 3, 11}, 4, {0, 2, 3, 1}},
    {6, {2, 3, 4, 5, 1, 7}, 6, {5, 3, 1, 0, 2, 4}},
};

/* A generated transpose of dtype dt against the CPU transpose, every
 * config, variant n mod T and the baseline; strides from the launcher's
 * own dvm_gen_permuted_strides. */
static void tr_check(const unit *u, dvm_dtype dt) {
  for (size_t s = 0; s < sizeof tr_cases / sizeof tr_cases[0]; s++) {
    int rank = tr_cases[s].rank;
    int64_t yd[DVM_GEN_MAX_RANK];
    for (int d = 0; d < rank; d++)
      yd[d] = tr_cases[s].dims[tr_cases[s].nperm ? tr_cases[s].perm[d] : rank - 1 - d];
    dvm_tensor *x = make(dt, rank, tr_cases[s].dims), *ref = make(dt, rank, yd),
               *out = make(dt, rank, yd);
    fill(x, 1);
    dvm_value perm = {.kind = DVM_VAL_SHAPE, .rank = tr_cases[s].nperm};
    for (int d = 0; d < tr_cases[s].nperm; d++) perm.u.dims[d] = tr_cases[s].perm[d];
    int nattrs = tr_cases[s].nperm ? 1 : 0;
    CHECK_OK(cpu("transpose", NULL, 0, &x, 1, &ref, 1, &perm, nattrs));
    dvm_gen_params p;
    params(&p, ref, &x, 1, &out, 1);
    CHECK_OK(dvm_gen_permuted_strides(x, out, &perm, nattrs, p.strides[0]));
    int64_t n = dvm_tensor_numel(ref);
    p.n = n, p.rows = 1;
    double *atol = calloc((size_t)n, sizeof(double));
    for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
      for (int v = (int)(n % T); v <= T; v += T - (int)(n % T)) {
        char what[96];
        snprintf(what, sizeof what, "transpose %s case %zu n %lld config %d variant %d",
                 dvm_dtype_name(dt), s, (long long)n, c, v);
        poison(out);
        long long per_block = (long long)dvmc_cuda_blocks[c] * T;
        CHECK(launch(u, c, v, (unsigned)((n + per_block - 1) / per_block), &p) == 0);
        /* bit for bit: a transpose moves values, NaNs included */
        CHECK(memcmp(dvm_tensor_ptr(out), dvm_tensor_ptr(ref), dvm_tensor_nbytes(ref)) == 0);
        if (memcmp(dvm_tensor_ptr(out), dvm_tensor_ptr(ref), dvm_tensor_nbytes(ref)))
          fprintf(stderr, "%s: differs from the CPU\n", what);
        if (v == T) break;
      }
    /* the check can fail: row-major strides over y's dims read x in its
     * own order, a copy */
    if (rank > 1) {
      long long stride = 1;
      for (int d = DVM_GEN_MAX_RANK - 1; d >= 0; d--) {
        p.strides[0][d] = p.dims[d] == 1 ? 0 : stride;
        stride *= p.dims[d];
      }
      poison(out);
      CHECK(launch(u, 0, T, 1, &p) == 0);
      CHECK(!matches(out, ref, 1e-5, atol, NULL));
    }
    free(atol);
    dvm_tensor_release(x);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
  /* f16, bf16 and bool stay on the host: a register would not carry them */
  static const dvm_dtype host[] = {DVM_F16, DVM_BF16, DVM_BOOL, DVM_U8};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
    void *prog = (void *)1;
    size_t size = 0;
    CHECK_OK(dvmc_cuda_transpose_program(host[i], &prog, &size));
    CHECK(prog == NULL);
  }
}

/* ---- slice: one SLICED input ---- */

/* Input shapes and slices (starts, ends, axes, steps; the first nattrs of
 * them): n = 1, steps backwards and past the dim, bounds past either end,
 * every residue mod T, past a block's tile, rank 6, an empty result. */
static const struct {
  int rank;
  int64_t dims[DVM_GEN_MAX_RANK];
  int nattrs, n;
  int64_t v[4][2];
} sl_cases[] = {
    {1, {1}, 2, 1, {{0}, {1}}},
    {3, {2, 3, 5}, 4, 2, {{1, -1}, {9, -9}, {1, 2}, {1, -2}}},
    {2, {17, 31}, 3, 1, {{3}, {-2}, {1}}},
    {2, {5, 129}, 3, 1, {{0}, {129}, {-1}}},
    {4, {3, 1, 43, 2}, 4, 1, {{-1}, {-100}, {0}, {-1}}},
    {3, {1, 7, 13}, 4, 1, {{2}, {13}, {2}, {4}}},
    {6, {2, 3, 4, 5, 1, 7}, 4, 2, {{6, 0}, {-8, 5}, {5, 3}, {-3, 2}}},
    {2, {4, 6}, 3, 1, {{5}, {2}, {0}}},
};

/* A generated slice of dtype dt against the CPU slice, every config,
 * variant n mod T and the baseline; strides and offset from the
 * launcher's own dvm_gen_sliced_strides. */
static void sl_check(const unit *u, dvm_dtype dt) {
  for (size_t s = 0; s < sizeof sl_cases / sizeof sl_cases[0]; s++) {
    int rank = sl_cases[s].rank, na = sl_cases[s].nattrs, nv = sl_cases[s].n;
    dvm_tensor *x = make(dt, rank, sl_cases[s].dims), *in[5] = {x};
    dvm_value v[5] = {dvm_value_tensor(x)};
    for (int k = 0; k < na; k++) {
      int64_t d = nv;
      in[1 + k] = make(DVM_I64, 1, &d);
      memcpy(dvm_tensor_ptr(in[1 + k]), sl_cases[s].v[k], sizeof(int64_t) * (size_t)nv);
      v[1 + k] = (dvm_value){.kind = DVM_VAL_SHAPE, .rank = nv};
      memcpy(v[1 + k].u.dims, sl_cases[s].v[k], sizeof(int64_t) * (size_t)nv);
    }
    fill(x, 1);
    dvm_slice_info info;
    CHECK_OK(dvm_slice_infer(v, 1 + na, &info));
    dvm_tensor *ref = make(dt, rank, info.dims), *out = make(dt, rank, info.dims);
    CHECK_OK(cpu("slice", NULL, 0, in, 1 + na, &ref, 1, NULL, 0));
    dvm_gen_params p;
    long long offset = -1;
    params(&p, ref, &x, 1, &out, 1);
    CHECK_OK(dvm_gen_sliced_strides(x, out, v + 1, na, p.strides[0], &offset));
    p.ptr[0] = (char *)p.ptr[0] + offset * (long long)dvm_dtype_size(dt);
    int64_t n = dvm_tensor_numel(ref);
    p.n = n, p.rows = 1;
    for (int c = 0; c < DVMC_CUDA_NCONFIGS && n; c++)
      for (int var = (int)(n % T); var <= T; var += T - (int)(n % T)) {
        poison(out);
        long long per_block = (long long)dvmc_cuda_blocks[c] * T;
        CHECK(launch(u, c, var, (unsigned)((n + per_block - 1) / per_block), &p) == 0);
        /* bit for bit: a slice moves values, NaNs included */
        int same = !memcmp(dvm_tensor_ptr(out), dvm_tensor_ptr(ref), dvm_tensor_nbytes(ref));
        CHECK(same);
        if (!same)
          fprintf(stderr, "slice %s case %zu n %lld config %d variant %d: differs from the CPU\n",
                  dvm_dtype_name(dt), s, (long long)n, c, var);
        if (var == T) break;
      }
    CHECK(n || s == sizeof sl_cases / sizeof sl_cases[0] - 1); /* only the last is empty */
    for (int k = 0; k <= na; k++) dvm_tensor_release(in[k]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
}

/* ---- concat ---- */

/* every element size */
static const dvm_dtype cc_dtypes[] = {DVM_F32, DVM_F16, DVM_I64, DVM_U8};
#define NCC (int)(sizeof cc_dtypes / sizeof cc_dtypes[0])

/* Inputs (their sizes along the axis; the other dims shared) and axes:
 * one input, an empty one, n = 1, primes, a negative axis, inner 1, past a
 * block's tile. */
static const struct {
  int rank, axis, nin;
  int64_t dims[3];  /* the shared dims (the axis's entry unused) */
  int64_t sizes[4]; /* each input's along the axis */
} cc_cases[] = {
    {1, 0, 3, {0}, {1, 0, 2}},
    {3, 1, 3, {2, 0, 5}, {3, 1, 4}},
    {2, -1, 2, {17, 0}, {31, 2}},
    {2, 0, 2, {0, 129}, {3, 4}},
    {2, 1, 1, {5, 0}, {7}},
    {3, 2, 4, {1, 1, 0}, {1, 1, 1, 1}},
};

/* A generated concat of dtype dt against the CPU concat, bit for bit,
 * every config, variant n mod T and the baseline; extents from the
 * launcher's own dvm_gen_concat_extents. */
static void cc_check(const unit *u, dvm_dtype dt) {
  for (size_t s = 0; s < sizeof cc_cases / sizeof cc_cases[0]; s++) {
    int rank = cc_cases[s].rank, nin = cc_cases[s].nin;
    int axis = cc_cases[s].axis < 0 ? cc_cases[s].axis + rank : cc_cases[s].axis;
    int64_t d[3], yd[3];
    memcpy(yd, cc_cases[s].dims, sizeof yd);
    yd[axis] = 0;
    dvm_tensor *in[4];
    for (int k = 0; k < nin; k++) {
      memcpy(d, cc_cases[s].dims, sizeof d);
      d[axis] = cc_cases[s].sizes[k];
      yd[axis] += d[axis];
      in[k] = make(dt, rank, d);
      fill(in[k], 1);
    }
    dvm_tensor *ref = make(dt, rank, yd), *out = make(dt, rank, yd);
    dvm_value ax = dvm_value_int(cc_cases[s].axis);
    CHECK_OK(cpu("concat", NULL, 0, in, nin, &ref, 1, &ax, 1));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    CHECK_OK(dvm_gen_concat_extents(in, nin, out, &ax, 1, p.dims, p.numel));
    for (int k = 0; k < nin; k++) p.ptr[k] = dvm_tensor_ptr(in[k]);
    p.ptr[nin] = dvm_tensor_ptr(out);
    int64_t n = dvm_tensor_numel(ref);
    p.n = n, p.rows = 1;
    for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
      for (int v = (int)(n % T); v <= T; v += T - (int)(n % T)) {
        poison(out);
        long long per_block = (long long)dvmc_cuda_blocks[c] * T;
        CHECK(launch(u + nin - 1, c, v, (unsigned)((n + per_block - 1) / per_block), &p) == 0);
        int same = memcmp(dvm_tensor_ptr(out), dvm_tensor_ptr(ref), dvm_tensor_nbytes(ref)) == 0;
        CHECK(same);
        if (!same)
          fprintf(stderr, "concat %s case %zu n %lld config %d variant %d: differs from the CPU\n",
                  dvm_dtype_name(dt), s, (long long)n, c, v);
        if (v == T) break;
      }
    for (int k = 0; k < nin; k++) dvm_tensor_release(in[k]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
}

/* ---- split ---- */

/* Inputs and their cuts (sizes along the axis; 0: in equal parts, the
 * last smaller): one part, an empty part, n = 1, a negative axis, inner 1,
 * past a block's tile. */
static const struct {
  int rank, axis, nout, given;
  int64_t dims[3];
  int64_t sizes[3];
} sp_cases[] = {
    {1, 0, 3, 1, {3}, {1, 0, 2}},
    {3, 1, 2, 1, {2, 8, 5}, {3, 5}},
    {2, -1, 3, 0, {17, 31}, {0}},
    {2, 0, 2, 1, {7, 129}, {3, 4}},
    {2, 1, 1, 1, {5, 7}, {7}},
    {3, 2, 3, 0, {1, 1, 3}, {0}},
};

/* A generated split of dtype dt against the CPU split, bit for bit, every
 * config, variant n mod T and the baseline; extents from the launcher's
 * own dvm_gen_split_extents. */
static void sp_check(const unit *u, dvm_dtype dt) {
  for (size_t s = 0; s < sizeof sp_cases / sizeof sp_cases[0]; s++) {
    int rank = sp_cases[s].rank, nout = sp_cases[s].nout, axis = sp_cases[s].axis;
    dvm_tensor *in[2] = {make(dt, rank, sp_cases[s].dims)}, *ref[3], *out[3];
    fill(in[0], 1);
    dvm_value attrs[2] = {{.kind = DVM_VAL_SHAPE, .rank = nout}, dvm_value_int(axis)};
    memcpy(attrs[0].u.dims, sp_cases[s].sizes, sizeof(int64_t) * (size_t)nout);
    int64_t nsz = nout, sizes[3];
    if (sp_cases[s].given) {
      in[1] = make(DVM_I64, 1, &nsz);
      memcpy(dvm_tensor_ptr(in[1]), sp_cases[s].sizes, sizeof(int64_t) * (size_t)nout);
    }
    dvm_value v[3] = {dvm_value_tensor(in[0]), attrs[0], attrs[1]};
    int ax;
    CHECK_OK(dvm_split_infer(sp_cases[s].given ? v : (dvm_value[]){v[0], v[2]}, sp_cases[s].given ? 3 : 2,
                             nout, &ax, sizes));
    for (int k = 0; k < nout; k++) {
      int64_t d[3];
      memcpy(d, sp_cases[s].dims, sizeof d);
      d[ax] = sizes[k];
      ref[k] = make(dt, rank, d), out[k] = make(dt, rank, d);
    }
    CHECK_OK(cpu("split", NULL, 0, in, 1 + sp_cases[s].given, ref, nout, attrs + 1, 1));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    const dvm_value *ga = sp_cases[s].given ? attrs : attrs + 1;
    CHECK_OK(dvm_gen_split_extents(in[0], out, nout, ga, 1 + sp_cases[s].given, p.dims, p.numel));
    p.ptr[0] = dvm_tensor_ptr(in[0]);
    for (int k = 0; k < nout; k++) p.ptr[1 + k] = dvm_tensor_ptr(out[k]);
    int64_t n = dvm_tensor_numel(in[0]);
    p.n = n, p.rows = 1;
    for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
      for (int var = (int)(n % T); var <= T; var += T - (int)(n % T)) {
        for (int k = 0; k < nout; k++) poison(out[k]);
        long long per_block = (long long)dvmc_cuda_blocks[c] * T;
        CHECK(launch(u + nout - 1, c, var, (unsigned)((n + per_block - 1) / per_block), &p) == 0);
        int same = 1;
        for (int k = 0; k < nout; k++)
          same &= !memcmp(dvm_tensor_ptr(out[k]), dvm_tensor_ptr(ref[k]), dvm_tensor_nbytes(ref[k]));
        CHECK(same);
        if (!same)
          fprintf(stderr, "split %s case %zu n %lld config %d variant %d: differs from the CPU\n",
                  dvm_dtype_name(dt), s, (long long)n, c, var);
        if (var == T) break;
      }
    dvm_tensor_release(in[0]);
    if (sp_cases[s].given) dvm_tensor_release(in[1]);
    for (int k = 0; k < nout; k++) dvm_tensor_release(ref[k]), dvm_tensor_release(out[k]);
  }
}

/* ---- gather ---- */

/* data and index dtypes: every element size, both index dtypes */
static const dvm_dtype ga_dtypes[][2] = {
    {DVM_F32, DVM_I64}, {DVM_F16, DVM_I32}, {DVM_I64, DVM_I64}, {DVM_U8, DVM_I32}};
#define NGA (int)(sizeof ga_dtypes / sizeof ga_dtypes[0])

/* data shapes, axes and index shapes: an embedding lookup by a batch of
 * token ids, n = 1, primes, inner 1, every residue mod T, a rank-0 index,
 * a negative axis, just past a block and its tile */
static const struct {
  int rank;
  int64_t dims[4];
  int axis, irank;
  int64_t idims[2];
} ga_cases[] = {
    {2, {13, 5}, 0, 2, {2, 3}}, {1, {7}, 0, 1, {1}},       {3, {3, 11, 4}, 1, 1, {5}},
    {3, {2, 3, 17}, -1, 1, {9}}, {2, {5, 4}, 1, 0, {0}},   {2, {6, 3}, 0, 1, {7}},
    {2, {1031, 1}, 0, 1, {513}}, {4, {2, 3, 5, 2}, 2, 2, {2, 2}},
};

static void fill_bytes(dvm_tensor *t) {
  uint8_t *p = dvm_tensor_ptr(t);
  for (size_t i = 0; i < dvm_tensor_nbytes(t); i++) p[i] = (uint8_t)(rnd() >> 56);
}

static void set_index(dvm_tensor *t, int64_t j, int64_t v) {
  if (t->dtype == DVM_I32) ((int32_t *)dvm_tensor_ptr(t))[j] = (int32_t)v;
  else ((int64_t *)dvm_tensor_ptr(t))[j] = v;
}

/* A generated gather against the CPU gather, bit for bit, every config,
 * variant n mod T and the baseline, extents from the launcher's own
 * dvm_gen_gather_extents; then indices out of range on either side, which
 * the kernel must record (position, index, size) instead of reading. */
static void ga_check(const unit *u, const dvm_dtype *dt) {
  for (size_t s = 0; s < sizeof ga_cases / sizeof ga_cases[0]; s++) {
    int rank = ga_cases[s].rank, irank = ga_cases[s].irank;
    int axis = ga_cases[s].axis < 0 ? ga_cases[s].axis + rank : ga_cases[s].axis;
    int64_t size = ga_cases[s].dims[axis], yd[6], yr = 0;
    for (int d = 0; d < axis; d++) yd[yr++] = ga_cases[s].dims[d];
    for (int d = 0; d < irank; d++) yd[yr++] = ga_cases[s].idims[d];
    for (int d = axis + 1; d < rank; d++) yd[yr++] = ga_cases[s].dims[d];
    dvm_tensor *in[2] = {make(dt[0], rank, ga_cases[s].dims), make(dt[1], irank, ga_cases[s].idims)};
    dvm_tensor *ref = make(dt[0], (int)yr, yd), *out = make(dt[0], (int)yr, yd);
    fill_bytes(in[0]);
    int64_t m = dvm_tensor_numel(in[1]), n = dvm_tensor_numel(ref);
    for (int64_t j = 0; j < m; j++) set_index(in[1], j, (int64_t)(rnd() % (uint64_t)(2 * size)) - size);
    dvm_value ax = dvm_value_int(ga_cases[s].axis);
    CHECK_OK(cpu("gather", NULL, 0, in, 2, &ref, 1, &ax, 1));
    long long record[DVM_GEN_ERROR_WORDS] = {0};
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    CHECK_OK(dvm_gen_gather_extents(in[0], in[1], out, &ax, 1, p.dims, &p.numel[0]));
    p.ptr[0] = dvm_tensor_ptr(in[0]), p.ptr[1] = dvm_tensor_ptr(in[1]);
    p.ptr[2] = dvm_tensor_ptr(out), p.ptr[3] = record;
    p.n = n, p.rows = 1;
    for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
      for (int v = (int)(n % T); v <= T; v += T - (int)(n % T)) {
        poison(out);
        long long per_block = (long long)dvmc_cuda_blocks[c] * T;
        unsigned grid = (unsigned)((n + per_block - 1) / per_block);
        CHECK(launch(u, c, v, grid, &p) == 0);
        int same = memcmp(dvm_tensor_ptr(out), dvm_tensor_ptr(ref), dvm_tensor_nbytes(ref)) == 0;
        CHECK(same && record[0] == 0);
        if (!same || record[0])
          fprintf(stderr, "gather %s by %s case %zu n %lld config %d variant %d: %s\n",
                  dvm_dtype_name(dt[0]), dvm_dtype_name(dt[1]), s, (long long)n, c, v,
                  same ? "an error was recorded" : "differs from the CPU");
        if (v == T) break;
      }
    /* one bad index past each end; the CPU refuses it too */
    int64_t j = m / 2, bad[2] = {size, -size - 1};
    for (int b = 0; b < 2; b++) {
      set_index(in[1], j, bad[b]);
      memset(record, 0, sizeof record);
      CHECK(launch(u, 0, T, 1, &p) == 0);
      CHECK(record[0] == 1 && record[1] == j && record[2] == bad[b] && record[3] == size);
      dvm_status *refused = cpu("gather", NULL, 0, in, 2, &ref, 1, &ax, 1);
      CHECK(refused != NULL);
      dvm_status_free(refused);
    }
    dvm_tensor_release(in[0]);
    dvm_tensor_release(in[1]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
}

/* ---- window pools and resize: tiled over the output ---- */

/* Runs u with p over an output of n elements in every config, the
 * variant n mod T and the baseline, and compares out with the CPU's ref
 * bit for bit; `what` names the case. */
static void tiled_same(const unit *u, const dvm_gen_params *p, int64_t n, dvm_tensor *out,
                       const dvm_tensor *ref, const char *what) {
  for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
    for (int v = (int)(n % T); v <= T; v += T - (int)(n % T)) {
      poison(out);
      long long per_block = (long long)dvmc_cuda_blocks[c] * T;
      CHECK(launch(u, c, v, (unsigned)((n + per_block - 1) / per_block), p) == 0);
      int same = memcmp(dvm_tensor_ptr(out), dvm_tensor_ptr(ref), dvm_tensor_nbytes(ref)) == 0;
      CHECK(same);
      if (!same) {
        fprintf(stderr, "%s n %lld config %d variant %d: differs from the CPU\n", what, (long long)n, c, v);
        for (int64_t i = 0; i < n && out->dtype == DVM_F32; i++) /* the first that differs */
          if (memcmp((float *)dvm_tensor_ptr(out) + i, (const float *)dvm_tensor_ptr(ref) + i, 4)) {
            fprintf(stderr, "  element %lld: %.9g, the CPU gives %.9g\n", (long long)i,
                    ((float *)dvm_tensor_ptr(out))[i], ((const float *)dvm_tensor_ptr(ref))[i]);
            break;
          }
      }
      if (v == T) break;
    }
}

static dvm_value shape_value(int n, const int64_t *v) {
  dvm_value s = {.kind = DVM_VAL_SHAPE, .rank = n};
  for (int k = 0; k < n; k++) s.u.dims[k] = v[k];
  return s;
}

/* Pools: X's dims, kernel, strides, pads (begins then ends), dilations
 * (an empty list: the default), ceil_mode, count_include_pad. n = 1, a
 * stride of 2 with pads (resnet's stem), big windows with big pads
 * (ddddocr's 13 by 6), primes, an uneven window with its stride (PP-OCR
 * rec's), ceil_mode's partial window, dilation, count_include_pad, 1-D
 * and 3-D, no images, past a block's tile. */
static const struct {
  int rank;
  int64_t x[5], k[3], s[3], pads[6], dil[3];
  int ceil, include;
} wi_cases[] = {
    {4, {1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0}, 0, 0},
    {4, {2, 3, 7, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0},
    {4, {1, 2, 19, 23}, {13, 13}, {1, 1}, {6, 6, 6, 6}, {0}, 0, 0},
    {4, {1, 3, 6, 9}, {3, 2}, {3, 2}, {0, 0, 0, 0}, {0}, 0, 0},
    {4, {1, 2, 8, 7}, {3, 3}, {2, 2}, {0, 1, 0, 1}, {0}, 1, 0},
    {4, {1, 1, 9, 10}, {3, 2}, {1, 2}, {2, 1, 1, 0}, {2, 3}, 0, 0},
    {4, {2, 2, 7, 5}, {3, 3}, {2, 1}, {1, 1, 2, 1}, {0}, 1, 1},
    {3, {2, 3, 29}, {4}, {3}, {1, 2}, {0}, 0, 1},
    {5, {1, 2, 5, 6, 7}, {2, 3, 3}, {1, 2, 2}, {0, 1, 1, 1, 1, 0}, {2, 1, 2}, 0, 1},
    {4, {0, 3, 5, 5}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0}, 0, 0},
    {4, {1, 3, 31, 37}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {0}, 0, 0},
};

/* A generated max_pool (avg 0) or average_pool (1) against the CPU's, bit
 * for bit, geometry from the launcher's dvm_gen_window_geometry. */
static void wi_check(const unit *u, int avg) {
  const char *op = avg ? "average_pool" : "max_pool";
  for (size_t s = 0; s < sizeof wi_cases / sizeof wi_cases[0]; s++) {
    int rank = wi_cases[s].rank, n = rank - 2;
    dvm_value at[6] = {shape_value(n, wi_cases[s].k), shape_value(n, wi_cases[s].s),
                       shape_value(2 * n, wi_cases[s].pads),
                       shape_value(wi_cases[s].dil[0] ? n : 0, wi_cases[s].dil),
                       dvm_value_int(wi_cases[s].ceil), dvm_value_int(avg ? wi_cases[s].include : 0)};
    dvm_window w;
    int64_t yd[5];
    CHECK_OK(dvm_pool_setup(op, rank, wi_cases[s].x, at, 6, &w, yd));
    dvm_tensor *x = make(DVM_F32, rank, wi_cases[s].x), *ref = make(DVM_F32, rank, yd),
               *out = make(DVM_F32, rank, yd);
    fill(x, 1);
    CHECK_OK(cpu(op, NULL, 0, &x, 1, &ref, 1, at, 6));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    CHECK_OK(dvm_gen_window_geometry(op, x, out, at, 6, p.dims, p.geom));
    p.ptr[0] = dvm_tensor_ptr(x), p.ptr[1] = dvm_tensor_ptr(out);
    p.n = dvm_tensor_numel(ref), p.rows = 1;
    char what[64];
    snprintf(what, sizeof what, "%s case %zu", op, s);
    if (p.n) tiled_same(u, &p, p.n, out, ref, what);
    dvm_tensor_release(x);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
  /* an output of another shape is refused */
  int64_t xd[4] = {1, 1, 4, 4}, bad[4] = {1, 1, 3, 4}, one = 1;
  dvm_value at[6] = {shape_value(2, (int64_t[]){2, 2}), shape_value(0, &one), shape_value(0, &one),
                     shape_value(0, &one), dvm_value_int(0), dvm_value_int(0)};
  dvm_tensor *x = make(DVM_F32, 4, xd), *y = make(DVM_F32, 4, bad);
  dvm_gen_params p;
  CHECK_ERR(dvm_gen_window_geometry(op, x, y, at, 6, p.dims, p.geom), DVM_INVALID_ARGUMENT, "gives");
  dvm_tensor_release(x);
  dvm_tensor_release(y);
}

static const dvm_dtype rs_dtypes[] = {DVM_F32, DVM_F16, DVM_U8, DVM_I64};
#define NRS (int)(sizeof rs_dtypes / sizeof rs_dtypes[0])

/* Resizes: X's dims and the output's, mode, coordinate transformation,
 * nearest_mode, scales (0: none given). FPNs' nearest asymmetric floor
 * upscale by 2, a downscale, every coordinate transformation and
 * rounding, batch and channel dims that tf_half_pixel_for_nearest with
 * ceil would shift were they not copied, n = 1, rank 3 and 6, an empty
 * output, past a block's tile,
 * SegFormer's linear half_pixel, linear asymmetric (whole coordinates:
 * taps of weight 0, whose infinities the CPU skips), align_corners and
 * pytorch_half_pixel to a size of 1, scales that do not give whole sizes. */
static const struct {
  int rank;
  int64_t x[6], y[6];
  int mode, coord, nearest;
  double scale[6];
} rs_cases[] = {
    {4, {1, 2, 5, 7}, {1, 2, 10, 14}, 0, 1, 2, {0}},
    {4, {1, 1, 13, 11}, {1, 1, 5, 4}, 0, 0, 0, {0}},
    {3, {2, 3, 4}, {2, 3, 9}, 0, 2, 1, {0}},
    {4, {1, 1, 1, 1}, {1, 1, 3, 2}, 0, 4, 3, {0}},
    {4, {2, 3, 4, 5}, {2, 3, 7, 3}, 0, 4, 3, {0}},
    {4, {1, 2, 6, 5}, {1, 2, 9, 3}, 0, 5, 0, {0}},
    {4, {1, 2, 6, 5}, {1, 2, 4, 11}, 0, 3, 1, {0}},
    {6, {1, 1, 1, 2, 3, 4}, {1, 1, 1, 3, 3, 7}, 0, 1, 0, {0}},
    {4, {0, 3, 4, 4}, {0, 3, 8, 8}, 0, 1, 2, {0}},
    {4, {2, 3, 10, 11}, {2, 3, 20, 22}, 0, 1, 2, {0}},
    {4, {1, 1, 1, 1}, {1, 1, 1, 1}, 0, 1, 2, {0}},
    {4, {1, 2, 8, 9}, {1, 2, 32, 36}, 1, 0, 0, {0}},
    {4, {1, 2, 6, 7}, {1, 2, 12, 14}, 1, 1, 0, {0}},
    {4, {1, 1, 10, 10}, {1, 1, 7, 3}, 1, 0, 0, {0}},
    {4, {1, 2, 5, 6}, {1, 2, 9, 1}, 1, 3, 0, {0}},
    {3, {2, 3, 7}, {2, 3, 13}, 1, 2, 0, {0}},
    {4, {1, 2, 7, 9}, {1, 2, 10, 20}, 1, 0, 0, {1, 1, 1.5, 2.3}},
    {4, {1, 2, 7, 9}, {1, 2, 10, 20}, 0, 2, 1, {1, 1, 1.5, 2.3}},
};

/* A generated resize of dtype dt against the CPU's, bit for bit (linear
 * cases for f32 only, as on the CPU), geometry from the launcher's
 * dvm_gen_resize_geometry. */
static void rs_check(const unit *u, dvm_dtype dt) {
  for (size_t s = 0; s < sizeof rs_cases / sizeof rs_cases[0]; s++) {
    if (rs_cases[s].mode == DVM_RESIZE_LINEAR && dt != DVM_F32) continue;
    int rank = rs_cases[s].rank, nattrs = rs_cases[s].scale[0] ? 7 + rank : 4;
    dvm_value at[7 + DVM_GEN_MAX_RANK] = {shape_value(rank, rs_cases[s].y), dvm_value_int(rs_cases[s].mode),
                                          dvm_value_int(rs_cases[s].coord), dvm_value_int(rs_cases[s].nearest),
                                          dvm_value_float(-0.75), dvm_value_int(0), dvm_value_int(0)};
    for (int d = 0; d < rank && nattrs > 4; d++) at[7 + d] = dvm_value_float(rs_cases[s].scale[d]);
    dvm_tensor *x = make(dt, rank, rs_cases[s].x), *ref = make(dt, rank, rs_cases[s].y),
               *out = make(dt, rank, rs_cases[s].y);
    if (dt == DVM_F32 || dt == DVM_F16) fill(x, 1);
    else fill_bytes(x);
    CHECK_OK(cpu("resize", NULL, 0, &x, 1, &ref, 1, at, nattrs));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    CHECK_OK(dvm_gen_resize_geometry(x, out, at, nattrs, p.dims, p.geom, p.real));
    p.ptr[0] = dvm_tensor_ptr(x), p.ptr[1] = dvm_tensor_ptr(out);
    p.n = dvm_tensor_numel(ref), p.rows = 1;
    char what[64];
    snprintf(what, sizeof what, "resize %s case %zu", dvm_dtype_name(dt), s);
    if (p.n) tiled_same(u, &p, p.n, out, ref, what);
    dvm_tensor_release(x);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
  /* what the kernel has no code for is refused: cubic, and linear of
   * another dtype than f32 */
  int64_t xd[2] = {2, 3}, yd[2] = {4, 6};
  dvm_value at[4] = {shape_value(2, yd), dvm_value_int(DVM_RESIZE_CUBIC), dvm_value_int(0), dvm_value_int(0)};
  dvm_tensor *x = make(dt, 2, xd), *y = make(dt, 2, yd);
  dvm_gen_params p;
  CHECK_ERR(dvm_gen_resize_geometry(x, y, at, 4, p.dims, p.geom, p.real), DVM_UNIMPLEMENTED, "nearest");
  at[1] = dvm_value_int(DVM_RESIZE_LINEAR);
  if (dt != DVM_F32)
    CHECK_ERR(dvm_gen_resize_geometry(x, y, at, 4, p.dims, p.geom, p.real), DVM_INVALID_ARGUMENT, "f32");
  dvm_tensor_release(x);
  dvm_tensor_release(y);
}

/* A conv's, conv_transpose's or matmul_nbits' unit u run on p, out
 * against the CPU's ref, every config and the variants that fit, within
 * 1e-5 relative plus atol: the rounding of `terms` products (each under
 * 4) in another order, scaled. p.n and p.rows are set here. */
static void conv_runs(const unit *u, dvm_gen_params *p, dvm_tensor *out, const dvm_tensor *ref, int64_t terms,
                      double scale, const char *name, size_t s) {
  int64_t ny = dvm_tensor_numel(ref);
  p->n = ny, p->rows = 1;
  double *atol = malloc(sizeof(double) * (size_t)(ny ? ny : 1));
  for (int64_t i = 0; i < ny; i++) atol[i] = 1e-6 * (double)(terms * 4 + 4) * fabs(scale);
  char what[64];
  for (int c = 0; c < DVMC_CUDA_NCONFIGS && ny; c++)
    for (int v = (int)(ny % T); v <= T; v += T - (int)(ny % T)) {
      poison(out);
      long long per_block = (long long)dvmc_cuda_blocks[c] * T;
      CHECK(launch(u, c, v, (unsigned)((ny + per_block - 1) / per_block), p) == 0);
      snprintf(what, sizeof what, "%s case %zu config %d variant %d", name, s, c, v);
      CHECK(matches(out, ref, 1e-5, atol, what));
      if (v == T) break;
    }
  free(atol);
}

/* Convolutions: X's and W's dims, group, strides, pads, dilations (an
 * empty list: the default), B and Z given, and fused_conv's epilogue
 * (act < 0: a plain conv). n = 1, resnet's stem (3x3 stride 2, relu),
 * depthwise with relu6 (MobileNet's), groups with dilation and uneven
 * pads, pointwise without B, 1-D with leaky relu's default slope, 3-D
 * with sigmoid, a residual Z with post_scale and post_shift, hard sigmoid's
 * defaults, hard swish, swish, tanh, no input channels (the bias alone), no
 * images, past a block's tile. */
static const struct {
  int rank, group, nin, act;
  int64_t x[5], w[5], s[3], pads[6], dil[3];
  double alpha, beta, scale, shift;
} cv_cases[] = {
    {4, 1, 2, -1, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0, 0, 0}, {0}, 0, 0, 1, 0},
    {4, 1, 3, 1, {1, 3, 17, 19}, {8, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {0}, 0, 0, 1, 0},
    {4, 6, 3, 5, {1, 6, 7, 9}, {6, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 6, 1, 0},
    {4, 2, 3, -1, {2, 4, 5, 6}, {6, 2, 3, 2}, {1, 2}, {1, 0, 2, 1}, {2, 3}, 0, 0, 1, 0},
    {4, 1, 2, -1, {1, 16, 4, 5}, {7, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {0}, 0, 0, 1, 0},
    {3, 1, 3, 4, {2, 3, 29}, {4, 3, 5}, {2}, {2, 2}, {0}, NAN, 0, 1, 0},
    {5, 1, 3, 3, {1, 2, 4, 5, 6}, {3, 2, 2, 3, 3}, {1, 1, 2}, {1, 1, 1, 0, 1, 1}, {0}, 0, 0, 1, 0},
    {4, 1, 4, 1, {1, 4, 6, 6}, {4, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 0.5, 1},
    {4, 1, 3, 6, {1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, NAN, NAN, 1, 0},
    {4, 1, 3, 7, {1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 2, -1},
    {4, 1, 2, 8, {1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {0}, 0, 0, 1, 0},
    {4, 1, 3, 2, {1, 2, 5, 5}, {3, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {0}, 0, 0, 1, 0},
    {4, 1, 3, 0, {1, 0, 3, 3}, {2, 0, 1, 1}, {1, 1}, {0, 0, 0, 0}, {0}, 0, 0, 1, 0},
    {4, 1, 3, -1, {0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 1, 0},
    {4, 1, 3, 1, {1, 3, 31, 37}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, 0, 0, 1, 0},
};

/* A generated conv (units for 2, 3 and 4 inputs) against the CPU's conv
 * or fused_conv (inputs in [-2, 2): each term under 4), geometry from the
 * launcher's dvm_gen_conv_geometry. */
static void cv_check(const unit *u) {
  for (size_t s = 0; s < sizeof cv_cases / sizeof cv_cases[0]; s++) {
    int rank = cv_cases[s].rank, n = rank - 2, nin = cv_cases[s].nin, fused = cv_cases[s].act >= 0;
    dvm_value at[4 + DVM_CONV_EPILOGUE_ATTRS] = {
        shape_value(n, cv_cases[s].s), shape_value(2 * n, cv_cases[s].pads),
        shape_value(cv_cases[s].dil[0] ? n : 0, cv_cases[s].dil), dvm_value_int(cv_cases[s].group),
        dvm_value_int(cv_cases[s].act), dvm_value_float(cv_cases[s].alpha), dvm_value_float(cv_cases[s].beta),
        dvm_value_float(cv_cases[s].scale), dvm_value_float(cv_cases[s].shift), dvm_value_int(0), dvm_value_int(0)};
    int nattrs = fused ? 4 + DVM_CONV_EPILOGUE_ATTRS : 4;
    dvm_window w;
    int64_t group, yd[5], m = cv_cases[s].w[0];
    CHECK_OK(dvm_conv_setup(false, rank, cv_cases[s].x, rank, cv_cases[s].w, nin > 2 ? 1 : -1, &m, at, 4, &w,
                            &group, yd));
    dvm_tensor *in[4] = {make(DVM_F32, rank, cv_cases[s].x), make(DVM_F32, rank, cv_cases[s].w)};
    if (nin > 2) in[2] = make(DVM_F32, 1, &m);
    if (nin > 3) in[3] = make(DVM_F32, rank, yd);
    for (int k = 0; k < nin; k++) fill(in[k], 0);
    dvm_tensor *ref = make(DVM_F32, rank, yd), *out = make(DVM_F32, rank, yd);
    CHECK_OK(cpu(fused ? "fused_conv" : "conv", NULL, 0, in, nin, &ref, 1, at, nattrs));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    CHECK_OK(dvm_gen_conv_geometry(false, in, nin, out, at, nattrs, p.dims, p.geom, p.real));
    for (int k = 0; k < nin; k++) p.ptr[k] = dvm_tensor_ptr(in[k]);
    p.ptr[nin] = dvm_tensor_ptr(out);
    int64_t terms = cv_cases[s].w[1];
    for (int d = 2; d < rank; d++) terms *= cv_cases[s].w[d];
    conv_runs(u + nin - 2, &p, out, ref, terms, cv_cases[s].scale, "conv", s);
    for (int k = 0; k < nin; k++) dvm_tensor_release(in[k]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
  /* a channels-last layout has no generated kernel; Z must be the output's shape */
  int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1}, zd[4] = {1, 2, 3, 2}, two = 2, none = 0;
  dvm_value at[4 + DVM_CONV_EPILOGUE_ATTRS] = {
      shape_value(0, &none), shape_value(0, &none), shape_value(0, &none), dvm_value_int(1), dvm_value_int(0),
      dvm_value_float(0), dvm_value_float(0), dvm_value_float(1), dvm_value_float(0), dvm_value_int(1),
      dvm_value_int(0)};
  dvm_tensor *in[4] = {make(DVM_F32, 4, xd), make(DVM_F32, 4, wd), make(DVM_F32, 1, &two), make(DVM_F32, 4, zd)};
  dvm_tensor *y = make(DVM_F32, 4, xd);
  dvm_gen_params p;
  CHECK_ERR(dvm_gen_conv_geometry(false, in, 3, y, at, 11, p.dims, p.geom, p.real), DVM_UNIMPLEMENTED,
            "channels last");
  at[9] = dvm_value_int(0);
  CHECK_ERR(dvm_gen_conv_geometry(false, in, 4, y, at, 11, p.dims, p.geom, p.real), DVM_INVALID_ARGUMENT, "Z is");
  for (int k = 0; k < 4; k++) dvm_tensor_release(in[k]);
  dvm_tensor_release(y);
}

/* Transposed convolutions: X's and W's ([C, M/group, k...]) dims, group,
 * strides, pads, dilations, output_padding (an empty list: the default),
 * B given. n = 1; PP-OCR's 2x2 stride-2 upsample; 3x3 stride 2 with
 * output_padding; groups with stride 3, dilation 2 and uneven pads, whose
 * output_padding reaches past every tap (the bias alone there); depthwise
 * over 17 channels; 1-D with stride 3; 3-D; no input channels; no images;
 * past a block's tile. */
static const struct {
  int rank, group, bias;
  int64_t x[5], w[5], s[3], pads[6], dil[3], opad[3];
} ct_cases[] = {
    {4, 1, 0, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0, 0, 0}, {0}, {0}},
    {4, 1, 1, {1, 17, 2, 7}, {17, 3, 2, 2}, {2, 2}, {0, 0, 0, 0}, {0}, {0}},
    {4, 1, 1, {2, 3, 7, 13}, {3, 17, 3, 3}, {2, 2}, {1, 1, 1, 1}, {0}, {1, 1}},
    {4, 3, 1, {2, 6, 2, 7}, {6, 1, 3, 2}, {3, 2}, {1, 0, 2, 1}, {2, 2}, {2, 1}},
    {4, 17, 0, {1, 17, 7, 7}, {17, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {0}, {1, 1}},
    {3, 1, 0, {2, 3, 13}, {3, 2, 4}, {3}, {2, 1}, {0}, {1}},
    {5, 1, 1, {1, 2, 2, 3, 1}, {2, 3, 2, 2, 3}, {2, 1, 3}, {1, 1, 0, 0, 0, 1}, {0}, {1, 0, 0}},
    {4, 1, 1, {1, 0, 3, 3}, {0, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {0}, {0}},
    {4, 1, 1, {0, 3, 5, 5}, {3, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0}, {0}},
    {4, 1, 1, {1, 3, 17, 19}, {3, 4, 3, 3}, {2, 2}, {1, 1, 1, 1}, {0}, {1, 1}},
};

/* A generated conv_transpose (units for 2 and 3 inputs) against the
 * CPU's conv_transpose, geometry from the launcher's
 * dvm_gen_conv_geometry. */
static void ct_check(const unit *u) {
  for (size_t s = 0; s < sizeof ct_cases / sizeof ct_cases[0]; s++) {
    int rank = ct_cases[s].rank, n = rank - 2, nin = 2 + ct_cases[s].bias;
    dvm_value at[5] = {shape_value(n, ct_cases[s].s), shape_value(2 * n, ct_cases[s].pads),
                       shape_value(ct_cases[s].dil[0] ? n : 0, ct_cases[s].dil), dvm_value_int(ct_cases[s].group),
                       shape_value(ct_cases[s].opad[0] ? n : 0, ct_cases[s].opad)};
    dvm_window w;
    int64_t group, yd[5], m = ct_cases[s].w[1] * ct_cases[s].group;
    CHECK_OK(dvm_conv_setup(true, rank, ct_cases[s].x, rank, ct_cases[s].w, nin > 2 ? 1 : -1, &m, at, 5, &w,
                            &group, yd));
    dvm_tensor *in[3] = {make(DVM_F32, rank, ct_cases[s].x), make(DVM_F32, rank, ct_cases[s].w)};
    if (nin > 2) in[2] = make(DVM_F32, 1, &m);
    for (int k = 0; k < nin; k++) fill(in[k], 0);
    dvm_tensor *ref = make(DVM_F32, rank, yd), *out = make(DVM_F32, rank, yd);
    CHECK_OK(cpu("conv_transpose", NULL, 0, in, nin, &ref, 1, at, 5));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    CHECK_OK(dvm_gen_conv_geometry(true, in, nin, out, at, 5, p.dims, p.geom, p.real));
    for (int k = 0; k < nin; k++) p.ptr[k] = dvm_tensor_ptr(in[k]);
    p.ptr[nin] = dvm_tensor_ptr(out);
    int64_t terms = ct_cases[s].x[1] / ct_cases[s].group;
    for (int d = 2; d < rank; d++) terms *= ct_cases[s].w[d];
    conv_runs(u + nin - 2, &p, out, ref, terms, 1, "conv_transpose", s);
    for (int k = 0; k < nin; k++) dvm_tensor_release(in[k]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
  /* the launcher's checks: the attribute count, and W against X */
  int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {3, 2, 1, 1}, none = 0;
  dvm_value at[5] = {shape_value(0, &none), shape_value(0, &none), shape_value(0, &none), dvm_value_int(1),
                     shape_value(0, &none)};
  dvm_tensor *in[2] = {make(DVM_F32, 4, xd), make(DVM_F32, 4, wd)}, *y = make(DVM_F32, 4, xd);
  dvm_gen_params p;
  CHECK_ERR(dvm_gen_conv_geometry(true, in, 2, y, at, 4, p.dims, p.geom, p.real), DVM_INVALID_ARGUMENT,
            "a conv_transpose of 2 inputs and 4 attributes");
  CHECK_ERR(dvm_gen_conv_geometry(true, in, 2, y, at, 5, p.dims, p.geom, p.real), DVM_INVALID_ARGUMENT,
            "does not fit X");
  for (int k = 0; k < 2; k++) dvm_tensor_release(in[k]);
  dvm_tensor_release(y);
}

/* MatMulNBits: A's dims (rank 2 or 3), N, bits, block_size, zero points
 * (0 none, 1 u8 packed, 2 f32), bias, and a B of [N, 0, ..] (an omitted
 * projection: Y is the bias). Decoding (M 1) and prefill (M 3, 17), K
 * not a multiple of the block, N prime, odd block counts (u8 zero points
 * packed two to a byte with a spare nibble), the largest block. Each
 * case's inputs pick its unit: 3, 4 (input 3 f32) or 5 (input 3 u8). */
static const struct {
  int rank;
  int64_t a[3], n, bits, block;
  int zp, bias, empty;
} nb_cases[] = {
    {2, {1, 37}, 13, 4, 16, 0, 0, 0},       {2, {3, 100}, 7, 8, 32, 1, 1, 0},
    {3, {1, 17, 130}, 11, 4, 64, 1, 1, 0}, {2, {1, 256}, 5, 4, 256, 2, 0, 0},
    {2, {3, 45}, 3, 8, 16, 0, 1, 0},       {2, {17, 61}, 2, 8, 128, 2, 0, 0},
    {2, {3, 16}, 5, 4, 16, 0, 1, 1},       {2, {1, 300}, 31, 4, 32, 1, 1, 0},
};

/* A generated matmul_nbits (units of 3, 4 and 5 inputs) against the CPU's
 * at accuracy_level 0 (f32 sums): within the rounding of a sum of K
 * terms in another order (each under 4 * 2^bits), geometry from the
 * launcher's dvm_gen_nbits_geometry. */
static void nb_check(const unit *u) {
  for (size_t s = 0; s < sizeof nb_cases / sizeof nb_cases[0]; s++) {
    int rank = nb_cases[s].rank, zp = nb_cases[s].zp;
    int64_t k = nb_cases[s].a[rank - 1], n = nb_cases[s].n, bits = nb_cases[s].bits, block = nb_cases[s].block;
    int64_t kb = (k + block - 1) / block, bd[3] = {n, nb_cases[s].empty ? 0 : kb, block * bits / 8};
    int64_t sd[2] = {n, kb}, zd[2] = {n, zp == 1 ? (kb * bits + 7) / 8 : kb}, yd[3];
    memcpy(yd, nb_cases[s].a, sizeof yd);
    yd[rank - 1] = n;
    dvm_tensor *in[5] = {make(DVM_F32, rank, nb_cases[s].a), make(DVM_U8, 3, bd), make(DVM_F32, 2, sd)};
    int nin = 3;
    if (zp) in[nin++] = make(zp == 1 ? DVM_U8 : DVM_F32, 2, zd);
    if (nb_cases[s].bias) in[nin++] = make(DVM_F32, 1, &n);
    for (int q = 0; q < nin; q++) fill(in[q], 0);
    int64_t present = 7 | (zp ? 8 : 0) | (nb_cases[s].bias ? 32 : 0);
    dvm_value at[7] = {dvm_value_int(present), dvm_value_int(k), dvm_value_int(n), dvm_value_int(bits),
                       dvm_value_int(block), dvm_value_int(0), dvm_value_int(0)};
    dvm_tensor *ref = make(DVM_F32, rank, yd), *out = make(DVM_F32, rank, yd);
    CHECK_OK(cpu("matmul_nbits", NULL, 0, in, nin, &ref, 1, at, 7));
    dvm_gen_params p;
    memset(&p, 0, sizeof p);
    dvm_kernel_args a = {.in = in, .nin = nin, .out = &out, .nout = 1, .attrs = at, .nattrs = 7};
    CHECK_OK(dvm_gen_nbits_geometry(&a, p.geom));
    for (int q = 0; q < nin; q++) p.ptr[q] = dvm_tensor_ptr(in[q]);
    p.ptr[nin] = dvm_tensor_ptr(out);
    conv_runs(&u[nin - 3], &p, out, ref, k, (double)(1 << bits), "matmul_nbits", s);
    for (int q = 0; q < nin; q++) dvm_tensor_release(in[q]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
  /* the CPU kernel's refusals, named: g_idx; an output of another shape */
  int64_t ad[2] = {2, 32}, bd[3] = {4, 2, 8}, sd[2] = {4, 2}, yd[2] = {2, 4}, bad[2] = {2, 5}, gd = 32;
  dvm_tensor *in[4] = {make(DVM_F32, 2, ad), make(DVM_U8, 3, bd), make(DVM_F32, 2, sd), make(DVM_I32, 1, &gd)};
  dvm_tensor *y = make(DVM_F32, 2, yd), *wrong = make(DVM_F32, 2, bad);
  dvm_value at[7] = {dvm_value_int(7 | 16), dvm_value_int(32), dvm_value_int(4), dvm_value_int(4),
                     dvm_value_int(16), dvm_value_int(0), dvm_value_int(0)};
  dvm_gen_params p;
  dvm_kernel_args a = {.in = in, .nin = 4, .out = &y, .nout = 1, .attrs = at, .nattrs = 7};
  CHECK_ERR(dvm_gen_nbits_geometry(&a, p.geom), DVM_UNIMPLEMENTED, "g_idx");
  at[0] = dvm_value_int(7);
  a.nin = 3, a.out = &wrong;
  CHECK_ERR(dvm_gen_nbits_geometry(&a, p.geom), DVM_INVALID_ARGUMENT, "output");
  for (int q = 0; q < 4; q++) dvm_tensor_release(in[q]);
  dvm_tensor_release(y);
  dvm_tensor_release(wrong);
}

/* ---- rows ---- */

static const struct {
  dvm_kernel_form op;
  const char *kernel;
  int nin;
} rows_ops[] = {{DVM_FORM_ROWS_SOFTMAX, "softmax", 1},   {DVM_FORM_ROWS_LOGSOFTMAX, "logsoftmax", 1},
                {DVM_FORM_ROWS_LAYERNORM, "layernorm", 2}, {DVM_FORM_ROWS_LAYERNORM, "layernorm", 3},
                {DVM_FORM_ROWS_RMSNORM, "rmsnorm", 2},
                {DVM_FORM_ROWS_SUM, "reduce_sum", 1},    {DVM_FORM_ROWS_MEAN, "reduce_mean", 1},
                {DVM_FORM_ROWS_MAX, "reduce_max", 1},    {DVM_FORM_ROWS_MIN, "reduce_min", 1}};
#define NROWS (int)(sizeof rows_ops / sizeof rows_ops[0])

/* dtypes of x, scale, bias and y: all f32, or mixed (the CPU kernels want
 * y in x's dtype except for layer norm) */
static void rows_dtypes(int q, int mixed, dvm_dtype *dt) {
  int nin = rows_ops[q].nin;
  static const dvm_dtype ln[] = {DVM_F16, DVM_BF16, DVM_F32};
  for (int k = 0; k <= nin; k++) dt[k] = DVM_F32;
  if (!mixed) return;
  if (rows_ops[q].op == DVM_FORM_ROWS_LAYERNORM || rows_ops[q].op == DVM_FORM_ROWS_RMSNORM) {
    for (int k = 0; k < nin; k++) dt[k] = ln[k];
    dt[nin] = DVM_BF16;
  } else {
    dt[0] = dt[1] = DVM_BF16;
  }
}

/* Row lengths: 1, primes, every residue, just past a block and its tile.
 * Every barrier of the threaded emulation switches through all the
 * block's threads, so mixed dtypes take the first few only. */
static const int64_t row_lengths[] = {3, 13, 257, 1030, 1, 2, 4, 7, 32, 129, 513, 1027};
#define MIXED_LENGTHS 4

static void rows_check(const unit *u, int q, const dvm_dtype *dt, int nlengths) {
  int nin = rows_ops[q].nin, reduce = rows_ops[q].op >= DVM_FORM_ROWS_SUM;
  double eps = 1e-5;
  for (int s = 0; s < nlengths; s++) {
    int64_t n = row_lengths[s], rows = 2, xd[2] = {rows, n}, yd[2] = {rows, 1};
    dvm_tensor *in[3], *ref, *out;
    in[0] = make(dt[0], 2, xd);
    fill(in[0], 0);
    /* a NaN in the last row, which all of it (or its result) carries */
    if (n >= 3) {
      float nan = NAN;
      dvm_vec_store(dt[0], &nan, (char *)dvm_tensor_ptr(in[0]) + dvm_dtype_size(dt[0]) * (size_t)((rows - 1) * n + 1), 1);
    }
    /* scale [n]; a bias of [1], broadcast */
    int64_t one = 1;
    if (nin > 1) fill(in[1] = make(dt[1], 1, &n), 0);
    if (nin > 2) fill(in[2] = make(dt[2], 1, &one), 0);
    ref = make(dt[nin], 2, reduce ? yd : xd);
    out = make(dt[nin], 2, reduce ? yd : xd);
    dvm_value attrs[3];
    int nattrs = 1;
    attrs[0] = dvm_value_int(-1);
    if (rows_ops[q].op == DVM_FORM_ROWS_LAYERNORM || rows_ops[q].op == DVM_FORM_ROWS_RMSNORM) {
      attrs[1] = dvm_value_float(eps);
      nattrs = 2;
    } else if (reduce) {
      attrs[0] = (dvm_value){.kind = DVM_VAL_SHAPE, .rank = 1, .u.dims = {-1}};
      attrs[1] = dvm_value_int(1);
      attrs[2] = dvm_value_int(0);
      nattrs = 3;
    }
    CHECK_OK(cpu(rows_ops[q].kernel, NULL, 0, in, nin, &ref, 1, attrs, nattrs));
    /* tolerances: reductions add in another order, so a row's magnitude */
    int64_t ny = dvm_tensor_numel(ref);
    double *atol = calloc((size_t)ny, sizeof(double));
    float *x = malloc(sizeof(float) * (size_t)(rows * n));
    dvm_vec_load(dt[0], dvm_tensor_ptr(in[0]), x, rows * n);
    for (int64_t i = 0; i < ny; i++) {
      int64_t r = reduce ? i : i / n;
      double mag = 0;
      for (int64_t j = 0; j < n; j++) mag += fabs(x[r * n + j]);
      atol[i] = 1e-6 + 1e-6 * (rows_ops[q].op == DVM_FORM_ROWS_MEAN ? mag / (double)n
                                : rows_ops[q].op == DVM_FORM_ROWS_SUM ? mag : 4);
    }
    free(x);
    char name[256];
    dvm_gen_params p;
    params(&p, in[0], in, nin, &out, 1);
    p.n = n, p.rows = rows;
    for (int c = 0; c < DVMC_CUDA_NCONFIGS; c++)
      for (int v = (int)(n % T); v <= T; v += T - (int)(n % T)) {
        /* three launches in a row: each of the emulation's schedules */
        for (int sched = 0; sched < 3; sched++) {
          snprintf(name, sizeof name, "%s (%d inputs, %s) n %lld config %d variant %d",
                   rows_ops[q].kernel, nin, dvm_dtype_name(dt[0]), (long long)n, c, v);
          poison(out);
          /* one block per row, as the launcher does; the baseline with
           * fewer, through the kernel's grid-stride loop over rows */
          CHECK(launch(u, c, v, (unsigned)(v == T ? rows - 1 : rows), &p) == 0);
          CHECK(matches(out, ref, 1e-5, atol, name));
        }
        if (v == T) break;
      }
    /* y over x, as the memory plan's in place gives it */
    if (!reduce && dt[0] == dt[nin]) {
      dvm_gen_params ip = p;
      memcpy(dvm_tensor_ptr(out), dvm_tensor_ptr(in[0]), dvm_tensor_nbytes(out));
      ip.ptr[0] = ip.ptr[nin] = dvm_tensor_ptr(out);
      snprintf(name, sizeof name, "%s (%d inputs, %s) n %lld in place", rows_ops[q].kernel, nin,
               dvm_dtype_name(dt[0]), (long long)n);
      CHECK(launch(u, 0, (int)(n % T), (unsigned)rows, &ip) == 0);
      CHECK(matches(out, ref, 1e-5, atol, name));
    }
    free(atol);
    for (int k = 0; k < nin; k++) dvm_tensor_release(in[k]);
    dvm_tensor_release(ref);
    dvm_tensor_release(out);
  }
}

/* ---- forms: the generator each kernel's form (vm/kernel.h) picks is the
 * one checked against that kernel here ---- */

static dvm_kernel_form form_of(const char *kernel) {
  const dvm_kernel_def *k = dvm_ops_find(kernel, DVM_DEVICE_CPU);
  return k ? k->form : DVM_FORM_NONE;
}

/* A kernel of form ELEMENTWISE that an op of compiler/ops.def calls has a
 * case in op_cases. */
static void elementwise_has_case(const char *kernel) {
  if (!kernel || form_of(kernel) != DVM_FORM_ELEMENTWISE) return;
  int found = 0;
  for (int i = 0; i < NOPS; i++) found |= strcmp(op_cases[i].kernel, kernel) == 0;
  if (!found) fprintf(stderr, "kernel %s is of form ELEMENTWISE but op_cases has no case of it\n", kernel);
  CHECK(found);
}

static void kernel_forms(void) {
  for (int q = 0; q < NROWS; q++) CHECK(form_of(rows_ops[q].kernel) == rows_ops[q].op);
  for (int i = 0; i < NOPS; i++) CHECK(form_of(op_cases[i].kernel) == DVM_FORM_ELEMENTWISE);
  CHECK(form_of("transpose") == DVM_FORM_PERMUTED);
  CHECK(form_of("gather") == DVM_FORM_GATHER);
  CHECK(form_of("fused") == DVM_FORM_FUSED);
  CHECK(form_of("slice") == DVM_FORM_SLICED);
  CHECK(form_of("concat") == DVM_FORM_CONCAT);
  CHECK(form_of("split") == DVM_FORM_SPLIT);
  CHECK(form_of("max_pool") == DVM_FORM_WINDOW_MAX);
  CHECK(form_of("average_pool") == DVM_FORM_WINDOW_AVERAGE);
  CHECK(form_of("resize") == DVM_FORM_RESIZE);
  CHECK(form_of("conv") == DVM_FORM_CONV);
  CHECK(form_of("fused_conv") == DVM_FORM_CONV);
  CHECK(form_of("conv_transpose") == DVM_FORM_CONV_TRANSPOSE);
  CHECK(form_of("matmul_nbits") == DVM_FORM_MATMUL_NBITS);
  /* a ROWS mean of its input with the axes from 2 on merged (placement's
   * reshape; test_host_report.py runs it against ONNX Runtime) */
  CHECK(form_of("global_average_pool") == DVM_FORM_ROWS_GLOBAL_MEAN);
#define OP(name, kernel, ...) elementwise_has_case(kernel);
#include "ops.def"
#undef OP
  /* a kernel of another form has no one-op program */
  dvm_dtype dt[2] = {DVM_F32, DVM_F32};
  void *prog = NULL;
  size_t size = 0;
  CHECK_ERR(dvmc_cuda_op_program("transpose", 1, dt, 0, NULL, &prog, &size), DVM_INTERNAL,
            "kernel \"transpose\" has no elementwise op");
  CHECK(prog == NULL);
}

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 3 && strcmp(argv[2], "rows") == 0)) {
    fprintf(stderr, "usage: test_emulate SHIM_DIR [rows]\n");
    return 2;
  }
  shim_dir = argv[1];
  kernel_forms();
  if (system("g++ --version >/dev/null 2>&1") != 0) {
    printf("SKIP: no g++ to compile the generated CUDA C for the host\n");
    return harness_failures ? harness_finish("test_emulate") : 77;
  }
  CHECK(mkdtemp(tmp_dir) != NULL);
  enum { NEW = NPROGS * 4, NRU = NROWS * 2, NTU = NEW + NRU + NOPS, NSU = NTU + NTR, NGU = NSU + NTR,
         NCU = NGU + NGA, NPU = NCU + NCC * 4, NWU = NPU + NCC * 3, NRU2 = NWU + 2, NVU = NRU2 + NRS, NXU = NVU + 3,
         NBU = NXU + 2, NU = NBU + 3 };
  unit u[NU] = {0};
  void *prog[NPROGS] = {0};
  size_t size[NPROGS];
  uint8_t cls[NEW][DVM_GEN_MAX_IN];
  /* each program with its inputs rotated through the four classes */
  for (int g = 0; g < NPROGS; g++) {
    dvm_fused_builder b;
    dvm_fused_builder_init(&b);
    progs[g].build(&b);
    CHECK_OK(dvm_fused_builder_finish(&b, &prog[g], &size[g]));
    for (int r = 0; r < 4 && prog[g]; r++) {
      int i = g * 4 + r;
      for (int k = 0; k < DVM_GEN_MAX_IN; k++) cls[i][k] = (uint8_t)((k + r) % 4);
      CHECK_OK(dvmc_cuda_elementwise(prog[g], size[g], cls[i], &u[i].src));
    }
  }
  for (int q = 0; q < NROWS; q++)
    for (int mixed = 0; mixed < 2; mixed++) {
      dvm_dtype dt[4];
      rows_dtypes(q, mixed, dt);
      CHECK_OK(dvmc_cuda_rows(rows_ops[q].op, rows_ops[q].nin, dt, 1e-5, &u[NEW + 2 * q + mixed].src));
    }
  /* unary ops read their input as SAME (the CPU wants the output's
   * shape); the others take in turn pairs of classes that broadcast to
   * the output (input_for), and where's third input any class */
  static const uint8_t pairs[][2] = {
      {DVM_GEN_SAME, DVM_GEN_SCALAR},    {DVM_GEN_SCALAR, DVM_GEN_SAME},
      {DVM_GEN_SUFFIX, DVM_GEN_SAME},    {DVM_GEN_SAME, DVM_GEN_STRIDED},
      {DVM_GEN_STRIDED, DVM_GEN_SUFFIX}, {DVM_GEN_SUFFIX, DVM_GEN_STRIDED}};
  void *oprog[NOPS] = {0};
  size_t osize[NOPS];
  uint8_t ocls[NOPS][3] = {{0}};
  for (int i = 0; i < NOPS; i++) {
    const struct op_case *c = &op_cases[i];
    if (c->nin > 1) ocls[i][0] = pairs[i % 6][0], ocls[i][1] = pairs[i % 6][1];
    if (c->nin > 2) ocls[i][2] = (uint8_t)(i % 4);
    CHECK_OK(dvmc_cuda_op_program(c->kernel, c->nin, c->dt, c->nattrs, c->at, &oprog[i], &osize[i]));
    if (oprog[i]) CHECK_OK(dvmc_cuda_elementwise(oprog[i], osize[i], ocls[i], &u[NEW + NRU + i].src));
  }
  op_program_refusals();
  for (int i = 0; i < NTR; i++) {
    void *tprog = NULL;
    size_t tsize = 0;
    uint8_t pcls = DVM_GEN_PERMUTED, scls = DVM_GEN_SLICED;
    CHECK_OK(dvmc_cuda_transpose_program(tr_dtypes[i], &tprog, &tsize));
    if (tprog) CHECK_OK(dvmc_cuda_elementwise(tprog, tsize, &pcls, &u[NTU + i].src));
    if (tprog) CHECK_OK(dvmc_cuda_elementwise(tprog, tsize, &scls, &u[NSU + i].src));
    free(tprog);
  }
  for (int i = 0; i < NGA; i++) CHECK_OK(dvmc_cuda_gather(ga_dtypes[i][0], ga_dtypes[i][1], &u[NGU + i].src));
  for (int i = 0; i < NCC * 4; i++) CHECK_OK(dvmc_cuda_concat(cc_dtypes[i / 4], i % 4 + 1, &u[NCU + i].src));
  for (int i = 0; i < NCC * 3; i++) CHECK_OK(dvmc_cuda_split(cc_dtypes[i / 3], i % 3 + 1, &u[NPU + i].src));
  CHECK_OK(dvmc_cuda_window(DVM_FORM_WINDOW_MAX, DVM_F32, &u[NWU].src));
  CHECK_OK(dvmc_cuda_window(DVM_FORM_WINDOW_AVERAGE, DVM_F32, &u[NWU + 1].src));
  for (int i = 0; i < NRS; i++) CHECK_OK(dvmc_cuda_resize(rs_dtypes[i], &u[NRU2 + i].src));
  for (int i = 0; i < 3; i++) CHECK_OK(dvmc_cuda_conv(i + 2, &u[NVU + i].src));
  for (int i = 0; i < 2; i++) CHECK_OK(dvmc_cuda_conv_transpose(i + 2, &u[NXU + i].src));
  for (int i = 0; i < 3; i++) CHECK_OK(dvmc_cuda_matmul_nbits(i + 3, i == 2 ? DVM_U8 : DVM_F32, &u[NBU + i].src));
  for (int i = 0; i < NU; i++)
    if (!u[i].src) {
      fprintf(stderr, "a source was not generated\n");
      return harness_finish("test_emulate");
    }
  /* "rows": the ROWS kernels only (test_mutations.sh) */
  for (int i = 0; i < NU && argc == 3; i++)
    if (i < NEW || i >= NEW + NRU) free(u[i].src), u[i].src = NULL;
  units_build(u, NU);
  for (int i = 0; i < NEW; i++)
    if (u[i].launch) ew_check(&u[i], prog[i / 4], size[i / 4], cls[i], NULL, NULL, 0);
  for (int i = 0; i < NOPS; i++)
    if (u[NEW + NRU + i].launch) {
      dvm_value attrs[2];
      int nattrs = cpu_attrs(&op_cases[i], attrs);
      ew_check(&u[NEW + NRU + i], oprog[i], osize[i], ocls[i], op_cases[i].kernel, attrs, nattrs);
    }
  for (int i = 0; i < NTR; i++)
    if (u[NTU + i].launch) tr_check(&u[NTU + i], tr_dtypes[i]);
  for (int i = 0; i < NTR; i++)
    if (u[NSU + i].launch) sl_check(&u[NSU + i], tr_dtypes[i]);
  for (int i = 0; i < NGA; i++)
    if (u[NGU + i].launch) ga_check(&u[NGU + i], ga_dtypes[i]);
  for (int i = 0; i < NCC; i++) /* its units of 1..4 inputs */
    if (u[NCU + 4 * i].launch && u[NCU + 4 * i + 3].launch) cc_check(&u[NCU + 4 * i], cc_dtypes[i]);
  for (int i = 0; i < NCC; i++) /* its units of 1..3 outputs */
    if (u[NPU + 3 * i].launch && u[NPU + 3 * i + 2].launch) sp_check(&u[NPU + 3 * i], cc_dtypes[i]);
  for (int avg = 0; avg < 2; avg++)
    if (u[NWU + avg].launch) wi_check(&u[NWU + avg], avg);
  for (int i = 0; i < NRS; i++)
    if (u[NRU2 + i].launch) rs_check(&u[NRU2 + i], rs_dtypes[i]);
  if (u[NVU].launch && u[NVU + 1].launch && u[NVU + 2].launch) cv_check(&u[NVU]);
  if (u[NXU].launch && u[NXU + 1].launch) ct_check(&u[NXU]);
  if (u[NBU].launch && u[NBU + 1].launch && u[NBU + 2].launch) nb_check(&u[NBU]);
  for (int q = 0; q < NROWS; q++)
    for (int mixed = 0; mixed < 2; mixed++) {
      dvm_dtype dt[4];
      rows_dtypes(q, mixed, dt);
      if (u[NEW + 2 * q + mixed].launch)
        rows_check(&u[NEW + 2 * q + mixed], q, dt,
                   mixed ? MIXED_LENGTHS : (int)(sizeof row_lengths / sizeof row_lengths[0]));
    }
  for (int i = 0; i < NU; i++) {
    free(u[i].src);
    if (u[i].so) dlclose(u[i].so);
  }
  for (int g = 0; g < NPROGS; g++) free(prog[g]);
  for (int i = 0; i < NOPS; i++) free(oprog[i]);
  char rm[64];
  snprintf(rm, sizeof rm, "rm -rf %s", tmp_dir);
  CHECK(system(rm) == 0);
  return harness_finish("test_emulate");
}
