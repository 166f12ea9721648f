/* Products: matmul, gemm, einsum, all through one engine over oneDNN's
 * row-major dnnl_sgemm (f32), except matmul and gemm with a constant f32 B,
 * which their prepack hooks pack when the module is linked: those run
 * ops/cpu/pgemm.c's microkernel on the packed B (for any number of rows),
 * and the plain B is not read again (its pages are given back at load).
 *
 *   matmul (in: A, B) -> Y
 *     ONNX MatMul (shapes and batch broadcasting: shapefuncs/matmul.h).
 *     A, B and Y each f32, f16 or bf16; f16 and bf16 are converted to f32
 *     and accumulated in f32, so f32 stays exact to sgemm. Or f64
 *     throughout, computed in f64 by einsum's plain loop. Shape function
 *     "matmul".
 *   matmul_bias (in: A, B, bias; attrs: activation:int) -> Y
 *     dvm's MatMulBias (compiler/pass_epilogue.c): Y = act(A B + bias),
 *     bias f32 [N] over the last axis, act by epilogue.h's dvm_epi_act
 *     (none, relu, gelu, gelu tanh, sigmoid, tanh); all f32. The add and
 *     the activation run on each part of Y right after its product, in the
 *     thread that computed it (epilogue.h). Shape function "matmul_bias".
 *   gemm_act (in: A, B[, C]; attrs: transA, transB, alpha, beta, activation:int) -> Y
 *     dvm's GemmAct (compiler/pass_epilogue.c): act(Gemm), the activation
 *     (as matmul_bias's) applied to each part of Y after its product; f32.
 *     Shape function "gemm_act".
 *   gemm (in: A, B[, C]; attrs: transA:int, transB:int, alpha:float, beta:float) -> Y
 *     ONNX Gemm: Y = alpha op(A) op(B) + beta C, A and B 2-D, C broadcast
 *     unidirectionally to [M, N]. Dtypes as matmul. Shape function "gemm".
 *   einsum (in: x0, ..., x{n-1}; attrs: dims:shape; payload: the equation) -> Y
 *     ONNX Einsum, 1 to 16 inputs. The equation ("bhqd,bhkd->bhqk") is the
 *     kernel table entry's payload (its bytes, no NUL), as attributes cannot
 *     be strings; `dims` is the output shape's encoding that shape function
 *     "einsum" reads (shapefuncs/matmul.h) and the kernel ignores: it
 *     derives the shape from the equation and checks Y against it. Letters
 *     A-Z a-z, "..." (numpy broadcasting of the ellipsis dims), spaces,
 *     implicit output (no "->": the ellipsis dims, then the letters seen
 *     once, in ASCII order), repeated letters in an input (diagonals).
 *     Dtypes as matmul, or f64 throughout, computed in f64 by a plain loop
 *     (oneDNN has no f64 GEMM; ONNX's einsum tests are f64); so does matmul
 *     (the f64 expansions of ONNX's attention tests); gemm refuses f64. Two inputs contract as one batched sgemm, with the
 *     transposes folded into its trans flags and leading dims where the
 *     layout allows and a copy into [batch, rows, cols] where not; more
 *     inputs contract left to right; labels only one input has are summed
 *     first.
 *
 * dnnl_sgemm rather than the oneDNN matmul primitive: on the machine of
 * 2026-11-21 (AMD EPYC, AVX2, no AVX-512) oneDNN 2.6 implements the matmul primitive
 * with the same jit GEMM ("gemm:jit" in ONEDNN_VERBOSE), so it brings only
 * its descriptor, primitive-cache and memory-object overhead. Measured
 * (1 thread, median of 15 runs, best of 9 rounds, microseconds; sgemm /
 * primitive created once / primitive created per call through oneDNN's
 * cache): M=1 K=768 N=768 36.0/37.3/39.4; M=8 768x768 138.7/140.8/143.2;
 * M=128 768x768 1720/1713/1723; M=128 K=3072 N=768 7277/7310/7315; M=512
 * 768x3072 56243/57778/56565; geometric mean over M in {1,8,128,512} and
 * K,N in {768,3072}: 2931/2922/2793, the same within this shared machine's
 * noise (the 2-thread runs were too noisy to rank). DESIGN.md's faster
 * primitive was measured with AVX-512 (brgemm), where it has its own
 * kernels; there it is worth revisiting, with weights prepacked once into
 * its blocked layout: `linear` below is the one place such a B plugs in.
 * Threads: every sgemm runs single-threaded on a thread of the pool
 * (par.h), over the products of a batch or, for one product, over its
 * rows or columns; oneDNN's own OpenMP threading made the caller wait for
 * late threads on a loaded machine. Batched small products (attention:
 * 12 x [128,64] x [64,128]) already ran this way, which beat oneDNN's
 * threading inside each small product at 2 threads (140 us vs 175 us). */
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/par.h"
#include "ops/cpu/pgemm.h"
#include "ops/cpu/product.h"
#include "ops/cpu/vec.h"
#include "ops/kargs.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/matmul.h"
#include "shapefuncs/shape.h"

/* ---- scratch ------------------------------------------------------------ */

/* The buffers of one call, freed together: at most, for einsum, one per
 * input and the output, and five per contraction (two inputs summed over
 * a label, two copied into another layout, the result). */
#define SCRATCH_MAX 96
typedef struct scratch {
  int n;
  void *p[SCRATCH_MAX];
} scratch;

static void *scratch_alloc(scratch *s, int64_t count, size_t esz, int zero) {
  if (s->n == SCRATCH_MAX) return NULL;
  size_t bytes = esz * (size_t)(count > 0 ? count : 1);
  void *p = zero ? calloc(1, bytes) : malloc(bytes);
  if (p) s->p[s->n++] = p;
  return p;
}

static void scratch_free(scratch *s) {
  for (int i = 0; i < s->n; i++) free(s->p[i]);
  s->n = 0;
}

static dvm_status *oom(const char *op) {
  return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for scratch", op);
}

/* Input t in the compute dtype (f32 or f64): its memory when of that
 * dtype, else a copy converted to f32. */
static const void *in_of(scratch *s, const dvm_tensor *t, int cdt) {
  if (t->dtype == cdt) return dvm_tensor_ptr(t);
  int64_t n = dvm_tensor_numel(t);
  float *p = scratch_alloc(s, n, sizeof(float), 0);
  if (p) dvm_vec_load(t->dtype, dvm_tensor_ptr(t), p, n);
  return p;
}

/* Where to compute output t: its memory when of the compute dtype, else
 * f32 scratch that out_store converts into it. */
static void *out_of(scratch *s, const dvm_tensor *t, int cdt) {
  if (t->dtype == cdt) return dvm_tensor_ptr(t);
  return scratch_alloc(s, dvm_tensor_numel(t), sizeof(float), 0);
}

static void out_store(const dvm_tensor *t, const void *p) {
  if (p != dvm_tensor_ptr(t)) dvm_vec_store(t->dtype, p, dvm_tensor_ptr(t), dvm_tensor_numel(t));
}

/* The dtype a call computes in: f32 for any mix of f32, f16 and bf16;
 * f64 where allowed and every tensor is f64. */
static dvm_status *compute_dtype(const dvm_kernel_args *a, const char *op, int allow_f64,
                                 int *cdt) {
  int floats = 1, f64s = allow_f64;
  for (int i = 0; i < a->nin + a->nout; i++) {
    int dt = (i < a->nin ? a->in[i] : a->out[i - a->nin])->dtype;
    floats &= dvm_vec_is_float(dt);
    f64s &= dt == DVM_F64;
  }
  *cdt = f64s ? DVM_F64 : DVM_F32;
  if (floats || f64s) return NULL;
  char got[128];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: %s", op,
                        dvm_kargs_dtypes(got, sizeof got, a),
                        allow_f64 ? "want f32, f16 and bf16 (computed in f32), or f64 throughout"
                                  : "only f32 is supported (f16 and bf16 as storage, computed "
                                    "in f32)");
}

static dvm_status *check_out(const char *op, const dvm_tensor *o, int rank, const int64_t *dims,
                             const char *what) {
  if (o->rank == rank && memcmp(o->dims, dims, sizeof(int64_t) * (size_t)rank) == 0) return NULL;
  char so[DVM_SHAPE_STR_SIZE], sp[DVM_SHAPE_STR_SIZE];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: output %s != %s, %s", op,
                        dvm_shape_str(so, o->rank, o->dims), dvm_shape_str(sp, rank, dims), what);
}

/* ---- the engine (product.h) ---------------------------------------------- */

/* The f64 product: oneDNN has no dgemm, and f64 products are rare enough
 * (ONNX's einsum tests) that a plain loop, vectorized along C's rows, does.
 * Also C = beta C when k = 0. */
static void dgemm_plain(const dvm_product *p, const double *a, const double *b, double *c) {
  for (int64_t i = 0; i < p->m; i++) {
    double *row = c + i * p->ldc;
    for (int64_t j = 0; j < p->n; j++) row[j] = p->beta == 0 ? 0 : p->beta * row[j];
    for (int64_t l = 0; l < p->k; l++) {
      double av = p->alpha * (p->ta == 'T' ? a[l * p->lda + i] : a[i * p->lda + l]);
      if (p->tb == 'T') {
        for (int64_t j = 0; j < p->n; j++) row[j] += av * b[j * p->ldb + l];
      } else {
        const double *br = b + l * p->ldb;
        for (int64_t j = 0; j < p->n; j++) row[j] += av * br[j];
      }
    }
  }
}

/* C = beta C for an empty sum (k = 0), which sgemm rejects (lda < 1). */
static void scale_c(const dvm_product *p, float *c) {
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t j = 0; j < p->n; j++)
      c[i * p->ldc + j] = p->beta == 0 ? 0 : (float)p->beta * c[i * p->ldc + j];
}

static dnnl_status_t product_at(const dvm_product *p, int64_t q) {
  int64_t oa = 0, ob = 0, oc = 0;
  for (int i = p->nbatch - 1; i >= 0; i--) { /* once per matrix: div/mod is fine */
    int64_t c = q % p->bdims[i];
    q /= p->bdims[i];
    oa += c * p->sa[i];
    ob += c * p->sb[i];
    oc += c * p->sc[i];
  }
  if (p->f64) {
    dgemm_plain(p, (const double *)p->a + oa, (const double *)p->b + ob, (double *)p->c + oc);
    return dnnl_success;
  }
  float *c = (float *)p->c + oc;
  dnnl_status_t r = dnnl_success;
  if (p->k == 0)
    scale_c(p, c);
  else
    r = dnnl_sgemm(p->ta, p->tb, p->m, p->n, p->k, (float)p->alpha, (const float *)p->a + oa, p->lda,
                   (const float *)p->b + ob, p->ldb, (float)p->beta, c, p->ldc);
  /* the part this thread just wrote, while it is in its cache */
  if (r == dnnl_success) dvm_epilogue_apply(p->epi, c, p->ldc, p->m, p->n, p->j0);
  return r;
}

/* A product's work split over the pool (par.h): whole products of a batch,
 * or one product's rows or columns, each part a single-threaded sgemm. */
typedef struct split {
  const dvm_product *p;
  char dim; /* 'q' batch index, 'm' rows, 'n' columns */
  atomic_int bad;
} split;

static void split_range(void *ctx, int64_t s, int64_t e) {
  split *sp = ctx;
  dvm_product part = *sp->p;
  size_t es = part.f64 ? sizeof(double) : sizeof(float);
  dnnl_status_t r = dnnl_success;
  if (sp->dim == 'q') {
    for (int64_t q = s; q < e && r == dnnl_success; q++) r = product_at(&part, q);
  } else if (sp->dim == 'm') { /* rows s..e of A and C */
    part.m = e - s;
    part.a = (const char *)part.a + (size_t)(part.ta == 'T' ? s : s * part.lda) * es;
    part.c = (char *)part.c + (size_t)(s * part.ldc) * es;
    r = product_at(&part, 0);
  } else { /* columns s..e of B and C */
    part.n = e - s;
    part.b = (const char *)part.b + (size_t)(part.tb == 'T' ? s * part.ldb : s) * es;
    part.c = (char *)part.c + (size_t)s * es;
    part.j0 += s;
    r = product_at(&part, 0);
  }
  if (r != dnnl_success) atomic_store(&sp->bad, r);
}

/* Rows and columns a part gets at least: below, sgemm's packing of the
 * other operand, repeated per part, outweighs the part's arithmetic. */
#define SPLIT_ROWS 64
#define SPLIT_COLS_MIN 64

static dvm_status *product_run(const char *op, const dvm_product *p, int threads) {
  int64_t count = 1;
  for (int i = 0; i < p->nbatch; i++) count *= p->bdims[i];
  if (count == 0 || p->m == 0 || p->n == 0) return NULL;
  split sp = {.p = p, .bad = dnnl_success};
  /* each part's sgemm on its own thread: oneDNN sizes its OpenMP team by
   * the calling thread's setting, 1 on the pool's workers */
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  if (count > 1 || threads <= 1) {
    sp.dim = 'q';
    dvm_par_for(threads, count, 1, split_range, &sp);
  } else if (p->m >= 2 * SPLIT_ROWS && p->m >= p->n) {
    sp.dim = 'm';
    dvm_par_for(threads, p->m, SPLIT_ROWS, split_range, &sp);
  } else if (p->n >= 2 * SPLIT_COLS_MIN) {
    sp.dim = 'n';
    dvm_par_for(threads, p->n, SPLIT_COLS_MIN, split_range, &sp);
  } else {
    sp.dim = 'q';
    split_range(&sp, 0, 1);
  }
  dnnl_status_t bad = atomic_load(&sp.bad);
  if (bad == dnnl_success) return NULL;
  return dvm_status_new(DVM_INTERNAL, "%s: dnnl_sgemm(%c%c, %lld, %lld, %lld) failed: %s", op,
                        p->ta, p->tb, (long long)p->m, (long long)p->n, (long long)p->k,
                        dnnl_status2str(bad));
}

/* oneDNN 2.6's sgemm reads a 64-byte-aligned B in place (its "no-copy"
 * kernels) where it may, and on this machine those are about 1.7x slower
 * when B's rows are a multiple of 4 KiB apart (they map to the same cache
 * sets) for 32 <= M < 512; below, the in-place path is the faster one, and
 * from 512 on sgemm packs B anyway. A B off 64-byte alignment is packed.
 * So such a product runs as two: columns [0, 4) alone, and the rest from
 * B + 4 floats, 16 bytes off alignment. Measured on one core, ms, one call
 * -> split: K=768 N=3072 M=128 13.7 -> 8.0, M=32 3.6 -> 2.3; K=3072
 * N=3072 M=128 55.5 -> 32.0; K=1024 N=1024 M=64 3.0 -> 1.7 (2 threads:
 * K=768 N=3072 M=256 26.5 -> 12.2); outside the window M=16 1.7 -> 2.8,
 * M=512 29.2 -> 27.5. Copying B to padded rows instead costs a buffer the
 * size of B, which above 32 MiB glibc maps afresh, page faults included,
 * on every call. */
#define SPLIT_MIN_ROWS 32
#define SPLIT_MAX_ROWS 512
#define SPLIT_COLS 4

dvm_status *dvm_cpu_product_run(const char *op, const dvm_product *p, int threads) {
  if (p->f64 || p->tb != 'N' || p->nbatch || p->ldb % 1024 || p->n <= SPLIT_COLS ||
      p->m < SPLIT_MIN_ROWS || p->m >= SPLIT_MAX_ROWS || (uintptr_t)p->b % 64)
    return product_run(op, p, threads);
  dvm_product left = *p, right = *p;
  left.n = SPLIT_COLS;
  right.n = p->n - SPLIT_COLS;
  right.b = (const float *)p->b + SPLIT_COLS;
  right.c = (float *)p->c + SPLIT_COLS;
  right.j0 += SPLIT_COLS;
  dvm_status *st = product_run(op, &left, threads);
  return st ? st : product_run(op, &right, threads);
}

/* A [rows, k] x B [k, n] with B the same for all rows: the linear layers
 * of transformers, [batch * seq, k] x [k, n], when B is not packed (see
 * matmul): where, on an AVX-512 machine, a oneDNN matmul primitive with B
 * in its blocked layout would plug in. */
static dvm_status *linear(const char *op, int f64, int64_t rows, int64_t n, int64_t k,
                          const void *a, const void *b, void *c, int threads, const dvm_epilogue *epi) {
  dvm_product p = {.f64 = f64, .ta = 'N', .tb = 'N', .m = rows, .n = n, .k = k, .lda = k, .ldb = n,
               .ldc = n, .alpha = 1, .a = a, .b = b, .c = c, .epi = epi};
  return dvm_cpu_product_run(op, &p, threads);
}

/* ---- constant B, packed at link ----------------------------------------- */

/* The kernels' indices in dvm_cpu_matmul_kernels: a packed form's owner. */
enum { K_MATMUL, K_GEMM, K_EINSUM, K_MATMUL_BIAS, K_GEMM_ACT, K_END };

static void rows_consumed(void *t, int64_t l0, int64_t l1) {
  const dvm_tensor *b = t;
  size_t row = (size_t)b->dims[b->rank - 1] * sizeof(float);
  dvm_tensor_consumed(b, (size_t)l0 * row, (size_t)(l1 - l0) * row);
}

/* matmul's input 1 when it is one f32 matrix (batch dims all 1): packed
 * for ops/cpu/pgemm.c (pgemm.h), its rows given back as they are packed
 * where nothing else reads them (vm/link.c). */
static dvm_status *matmul_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs,
                                  int nattrs, void **data, void (**free_data)(void *)) {
  if (input != 1 || t->dtype != DVM_F32 || t->rank < 2) return NULL;
  for (int i = 0; i < t->rank - 2; i++)
    if (t->dims[i] != 1) return NULL;
  int64_t k = t->dims[t->rank - 2], n = t->dims[t->rank - 1];
  *data = dvm_pgemm_pack_rows(dvm_tensor_ptr(t), k, n, n, 1, rows_consumed, (void *)t);
  *free_data = dvm_pgemm_free;
  return NULL;
}

static void gemm_packs_free(void *p) {
  dvm_gemm_packs *g = p;
  dvm_pgemm_free(g->b[0]);
  dvm_pgemm_free(g->b[1]);
  free(g);
}

/* gemm's B, a 2-D f32 input 1, packed as the product reads it: transB is
 * a register, packed for the value an `imm` gives it where the linker saw
 * one (attribute 1), else both ways. */
static dvm_status *gemm_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs,
                                int nattrs, void **data, void (**free_data)(void *)) {
  if (input != 1 || t->dtype != DVM_F32 || t->rank != 2) return NULL;
  dvm_gemm_packs *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  int64_t r = t->dims[0], c = t->dims[1];
  int tb = nattrs > 1 && attrs[1].known ? attrs[1].value != 0 : -1;
  if (tb != 1) g->b[0] = dvm_pgemm_pack(dvm_tensor_ptr(t), r, c, c, 1);
  if (tb != 0) g->b[1] = dvm_pgemm_pack(dvm_tensor_ptr(t), c, r, 1, c);
  if ((tb != 1 && !g->b[0]) || (tb != 0 && !g->b[1])) { /* no AVX2, or no memory: the plain path */
    gemm_packs_free(g);
    return NULL;
  }
  *data = g;
  *free_data = gemm_packs_free;
  return NULL;
}

/* pb where it is a packing of B [k, n], else NULL. */
static const dvm_pgemm_b *packed_b(const dvm_pgemm_b *pb, int64_t k, int64_t n) {
  return pb && dvm_pgemm_k(pb) == k && dvm_pgemm_n(pb) == n ? pb : NULL;
}

/* ---- matmul -------------------------------------------------------------- */

int64_t dvm_cpu_product_strides(int rank, const int64_t *dims, int mat, int nb, int64_t *strides) {
  int tb = rank - mat;
  int64_t s = 1;
  for (int d = tb; d < rank; d++) s *= dims[d];
  int64_t count = 1;
  for (int i = nb - 1; i >= 0; i--) {
    int j = i - (nb - tb);
    int64_t d = j >= 0 ? dims[j] : 1;
    strides[i] = d == 1 ? 0 : s;
    s *= d;
    count *= d;
  }
  return count;
}

/* ONNX MatMul, with epi (NULL: none) applied to each part of the output as
 * it is computed (f32 only: matmul_bias checks). */
static dvm_status *matmul_run(const dvm_kernel_args *a, int owner, const dvm_epilogue *epi) {
  int cdt;
  dvm_status *st = compute_dtype(a, "matmul", 1, &cdt);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *o = a->out[0];
  int rank;
  int64_t dims[DVM_MAX_RANK];
  if ((st = dvm_matmul_shape(x->rank, x->dims, y->rank, y->dims, &rank, dims))) return st;
  if (o->rank != rank || memcmp(o->dims, dims, sizeof(int64_t) * (size_t)rank) != 0) {
    char sx[DVM_SHAPE_STR_SIZE], sy[DVM_SHAPE_STR_SIZE], what[2 * DVM_SHAPE_STR_SIZE + 32];
    snprintf(what, sizeof what, "the product of %s x %s", dvm_shape_str(sx, x->rank, x->dims),
             dvm_shape_str(sy, y->rank, y->dims));
    return check_out("matmul", o, rank, dims, what);
  }
  int64_t total = dvm_tensor_numel(o);
  if (total == 0) return NULL;
  int xm = x->rank >= 2 ? 2 : 1, ym = y->rank >= 2 ? 2 : 1; /* matrix dims of each */
  int64_t m = xm == 2 ? x->dims[x->rank - 2] : 1, k = x->dims[x->rank - 1];
  int64_t n = ym == 2 ? y->dims[y->rank - 1] : 1;
  int br = o->rank - (xm - 1) - (ym - 1); /* the output's batch dims come first */
  scratch s = {0};
  const void *px = in_of(&s, x, cdt), *py = in_of(&s, y, cdt);
  void *pc = out_of(&s, o, cdt);
  if (!px || !py || !pc) {
    scratch_free(&s);
    return oom("matmul");
  }
  int threads = dvm_kargs_threads(a), f64 = cdt == DVM_F64;
  dvm_product p = {.f64 = f64, .ta = 'N', .tb = 'N', .m = m, .n = n, .k = k, .lda = k, .ldb = n,
               .ldc = n, .alpha = 1, .a = px, .b = py, .c = pc, .nbatch = br, .epi = epi};
  int64_t nx = dvm_cpu_product_strides(x->rank, x->dims, xm, br, p.sa),
          ny = dvm_cpu_product_strides(y->rank, y->dims, ym, br, p.sb), batch = 1;
  for (int i = br - 1; i >= 0; i--) {
    p.bdims[i] = o->dims[i];
    p.sc[i] = batch * m * n;
    batch *= o->dims[i];
  }
  const dvm_pgemm_b *packed =
      ny == 1 && nx == batch && y->dtype == DVM_F32
          ? packed_b(dvm_tensor_packed(y, &dvm_cpu_matmul_kernels[owner], 1), k, n)
          : NULL;
  if (packed) /* a constant B packed at link */
    dvm_pgemm_run(packed, batch * m, px, k, 1, 1, 0, pc, n, threads, epi);
  else if (ny == 1 && nx == batch) /* one B for a dense stack of A: one [batch * m, k] matrix */
    st = linear("matmul", f64, batch * m, n, k, px, py, pc, threads, epi);
  else
    st = product_run("matmul", &p, threads);
  if (!st) out_store(o, pc);
  scratch_free(&s);
  return st;
}

static dvm_status *matmul(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "matmul", 2, 1, DVM_DEVICE_CPU);
  return st ? st : matmul_run(a, K_MATMUL, NULL);
}

/* matmul_bias: MatMul, then y + bias over the last axis and an activation,
 * as the product's epilogue (epilogue.h). */
static dvm_status *matmul_bias(const dvm_kernel_args *a) {
  static const char op[] = "matmul_bias";
  dvm_status *st = dvm_kargs_check(a, op, 3, 1, DVM_DEVICE_CPU);
  int64_t act = 0;
  if (!st) st = dvm_attr_count(op, a->nattrs, 1, 1);
  if (!st) st = dvm_attr_int(op, "activation", &a->attrs[0], &act);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *bias = a->in[2];
  if (act < 0 || act >= DVM_EPI_COUNT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: activation %lld is out of range [0, %d)", op, (long long)act,
                          (int)DVM_EPI_COUNT);
  for (int i = 0; i < 3; i++)
    if (a->in[i]->dtype != DVM_F32 || a->out[0]->dtype != DVM_F32) {
      char got[128];
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: only f32 is supported", op,
                            dvm_kargs_dtypes(got, sizeof got, a));
    }
  int64_t n = y->rank >= 2 ? y->dims[y->rank - 1] : 1;
  if (x->rank < 1 || y->rank < 2 || bias->rank != 1 || bias->dims[0] != n) {
    char sx[DVM_SHAPE_STR_SIZE], sy[DVM_SHAPE_STR_SIZE], sb[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: A %s, B %s and bias %s: want B of rank >= 2 and bias [N] for B's N",
                          op, dvm_shape_str(sx, x->rank, x->dims), dvm_shape_str(sy, y->rank, y->dims),
                          dvm_shape_str(sb, bias->rank, bias->dims));
  }
  dvm_epilogue epi = {dvm_tensor_ptr(bias), (dvm_epi_act)act};
  return matmul_run(a, K_MATMUL_BIAS, &epi);
}

/* ---- gemm ---------------------------------------------------------------- */

/* ONNX Gemm, with epi (NULL: none) applied to each part of Y as it is
 * computed; `op` names the kernel, `owner` its packed forms. */
static dvm_status *gemm_run(const dvm_kernel_args *a, const char *op, int owner, const dvm_epilogue *epi) {
  if (a->nin < 2 || a->nin > 3 || a->nout != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes 2 or 3 inputs and 1 output, got %d and %d",
                          op, a->nin, a->nout);
  int cdt, ta = 0, tb = 0;
  dvm_status *st = dvm_kargs_check(a, op, a->nin, 1, DVM_DEVICE_CPU);
  if (!st) st = compute_dtype(a, op, 0, &cdt);
  double alpha = 0, beta = 0;
  if (!st) st = dvm_attr_count(op, a->nattrs, epi ? 5 : 4, epi ? 5 : 4);
  if (!st) st = dvm_gemm_attrs(a->attrs, &ta, &tb, &alpha, &beta);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->in[1], *c = a->nin > 2 ? a->in[2] : NULL, *o = a->out[0];
  int64_t dims[2];
  if ((st = dvm_gemm_shape(x->rank, x->dims, y->rank, y->dims, c ? c->rank : -1,
                           c ? c->dims : NULL, ta, tb, dims)) ||
      (st = check_out(op, o, 2, dims, "Gemm's [M, N]")))
    return st;
  int64_t m = dims[0], n = dims[1], k = x->dims[!ta];
  if (m * n == 0) return NULL;
  scratch s = {0};
  const float *px = in_of(&s, x, cdt), *py = in_of(&s, y, cdt), *pb = c ? in_of(&s, c, cdt) : NULL;
  float *pc = out_of(&s, o, cdt);
  if (!px || !py || !pc || (c && !pb)) {
    scratch_free(&s);
    return oom(op);
  }
  double b = c ? beta : 0;
  /* C a row [N] added with beta 1 (a layer's bias): added by the epilogue
   * as each block of Y is done, with the same single rounding as beta Y,
   * rather than broadcast into Y first and read back (7% of a 64 x 1024 x
   * 1024 product) */
  dvm_epilogue row;
  if (b == 1 && (!epi || !epi->bias) && c->rank >= 1 && c->dims[c->rank - 1] == n &&
      (c->rank == 1 || c->dims[0] == 1)) {
    row = (dvm_epilogue){pb, epi ? epi->act : DVM_EPI_NONE};
    epi = &row;
    b = 0;
  }
  if (b != 0) { /* C broadcast into Y, then Y = alpha AB + beta Y */
    int rc = c->rank;
    int64_t sr = rc == 2 && c->dims[0] != 1 ? c->dims[1] : 0;
    int64_t sc = rc >= 1 && c->dims[rc - 1] != 1 ? 1 : 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) pc[i * n + j] = pb[i * sr + j * sc];
  }
  dvm_product p = {.ta = ta ? 'T' : 'N', .tb = tb ? 'T' : 'N', .m = m, .n = n, .k = k,
               .lda = x->dims[1], .ldb = y->dims[1], .ldc = n, .alpha = alpha, .beta = b,
               .a = px, .b = py, .c = pc, .epi = epi};
  const dvm_gemm_packs *g = y->dtype == DVM_F32 ? dvm_tensor_packed(y, &dvm_cpu_matmul_kernels[owner], 1)
                                            : NULL;
  const dvm_pgemm_b *packed = g ? packed_b(g->b[tb], k, n) : NULL;
  if (packed) /* a constant B packed at link */
    dvm_pgemm_run(packed, m, px, ta ? 1 : p.lda, ta ? p.lda : 1, (float)alpha, (float)b, pc, n,
                  dvm_kargs_threads(a), epi);
  else
    st = dvm_cpu_product_run(op, &p, dvm_kargs_threads(a));
  if (!st) out_store(o, pc);
  scratch_free(&s);
  return st;
}

static dvm_status *gemm(const dvm_kernel_args *a) { return gemm_run(a, "gemm", K_GEMM, NULL); }

/* gemm_act: Gemm, then an activation (epilogue.h, no bias: C is Gemm's
 * own), as the product's epilogue. f32 only. */
static dvm_status *gemm_act(const dvm_kernel_args *a) {
  static const char op[] = "gemm_act";
  int64_t act = 0;
  dvm_status *st = dvm_attr_count(op, a->nattrs, 5, 5);
  if (!st) st = dvm_attr_int(op, "activation", &a->attrs[4], &act);
  if (st) return st;
  if (act < 0 || act >= DVM_EPI_COUNT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: activation %lld is out of range [0, %d)", op, (long long)act,
                          (int)DVM_EPI_COUNT);
  for (int i = 0; i < a->nin + a->nout; i++)
    if ((i < a->nin ? a->in[i] : a->out[i - a->nin])->dtype != DVM_F32) {
      char got[128];
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: only f32 is supported", op,
                            dvm_kargs_dtypes(got, sizeof got, a));
    }
  dvm_epilogue epi = {NULL, (dvm_epi_act)act};
  return gemm_run(a, op, K_GEMM_ACT, &epi);
}

/* ---- einsum -------------------------------------------------------------- */

#define EQ_MAX 256
#define MAX_IN 16
/* Labels: A-Z 0-25, a-z 26-51 (so their order is ASCII's), then the
 * ellipsis dims, aligned from the right as numpy broadcasts them. */
#define ELL 52
#define NLAB (ELL + DVM_MAX_RANK)
/* Labels of an intermediate: those of two inputs still needed later. */
#define LT_MAX (2 * DVM_MAX_RANK)

typedef uint64_t labset;

typedef struct equation {
  char text[EQ_MAX + 1]; /* the payload without spaces, for messages */
  int f64;               /* computes in f64 (every tensor is f64), else f32 */
  int nin, out_rank;
  int rank[MAX_IN];
  int8_t in[MAX_IN][DVM_MAX_RANK];
  int8_t out[DVM_MAX_RANK];
  int64_t dim[NLAB];
} equation;

/* Letters and where "..." stands in one term. */
typedef struct term {
  int n, ell; /* ell: the letter count before "...", -1 without */
  int8_t lab[DVM_MAX_RANK];
} term;

static int label_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + c - 'a';
  return -1;
}

static char label_char(int l) { return (char)(l < 26 ? 'A' + l : 'a' + l - 26); }

__attribute__((format(printf, 2, 3))) static dvm_status *bad_eq(const equation *e,
                                                                 const char *fmt, ...) {
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dvm_status_new(DVM_INVALID_ARGUMENT, "einsum \"%s\": %s", e->text, msg);
}

static dvm_status *parse_term(const equation *e, const char *p, const char *end, const char *what,
                              term *t) {
  t->n = 0;
  t->ell = -1;
  while (p < end) {
    if (*p == '.') {
      if (t->ell >= 0 || end - p < 3 || p[1] != '.' || p[2] != '.')
        return bad_eq(e, "%s has a '.' outside a single \"...\"", what);
      t->ell = t->n;
      p += 3;
      continue;
    }
    int l = label_of(*p++);
    if (l < 0) return bad_eq(e, "%s has '%c'", what, p[-1]);
    if (t->n == DVM_MAX_RANK) return bad_eq(e, "%s has over %d letters", what, DVM_MAX_RANK);
    t->lab[t->n++] = (int8_t)l;
  }
  return NULL;
}

/* e from the payload and the inputs' shapes: every term's labels with its
 * ellipsis expanded, the output's, and each label's dim. */
static dvm_status *parse_equation(const dvm_kernel_args *a, equation *e) {
  size_t len = 0;
  const char *pl = a->payload;
  if (!pl || a->payload_size == 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "einsum: no equation: it is the kernel table entry's payload");
  for (size_t i = 0; i < a->payload_size; i++) {
    char c = pl[i];
    if (c == ' ') continue;
    if (label_of(c) < 0 && !strchr(",.->", c))
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "einsum: the equation has byte 0x%02x at %zu: want letters, ',', "
                            "\"...\", \"->\" and spaces",
                            (unsigned char)c, i);
    if (len == EQ_MAX)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "einsum: the equation is over %d characters",
                            EQ_MAX);
    e->text[len++] = c;
  }
  e->text[len] = 0;
  char *arrow = strstr(e->text, "->"), *end = e->text + len, *lhs_end = arrow ? arrow : end;
  for (char *q = e->text; q < end; q++)
    if ((*q == '-' || *q == '>') && !(arrow && (q == arrow || q == arrow + 1)))
      return bad_eq(e, "has a '-' or '>' outside one \"->\"");
  e->nin = 1;
  for (char *q = e->text; q < lhs_end; q++) e->nin += *q == ',';
  if (e->nin != a->nin)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "einsum \"%s\": has %d input%s, got %d tensors",
                          e->text, e->nin, e->nin == 1 ? "" : "s", a->nin);
  if (a->nin > MAX_IN) return bad_eq(e, "has over %d inputs", MAX_IN);
  term t[MAX_IN], to;
  int ell = 0, count[NLAB] = {0};
  char *p = e->text;
  for (int i = 0; i < e->nin; i++) { /* terms, and the widest ellipsis */
    char *q = p;
    while (q < lhs_end && *q != ',') q++;
    char what[24];
    snprintf(what, sizeof what, "input %d", i);
    dvm_status *st = parse_term(e, p, q, what, &t[i]);
    if (st) return st;
    int r = a->in[i]->rank, el = r - t[i].n;
    if (t[i].ell < 0 ? el != 0 : el < 0)
      return bad_eq(e, "input %d has rank %d, its term %d letter%s%s", i, r, t[i].n,
                    t[i].n == 1 ? "" : "s", t[i].ell < 0 ? "" : " and \"...\"");
    if (t[i].ell >= 0 && el > ell) ell = el;
    p = q + 1;
  }
  for (int i = 0; i < e->nin; i++) { /* labels with the ellipsis expanded */
    int r = a->in[i]->rank, el = r - t[i].n, d = 0;
    e->rank[i] = r;
    for (int j = 0; j <= t[i].n; j++) {
      if (j == t[i].ell)
        for (int q = 0; q < el; q++) e->in[i][d++] = (int8_t)(ELL + ell - el + q);
      if (j < t[i].n) e->in[i][d++] = t[i].lab[j];
    }
    for (int j = 0; j < t[i].n; j++) count[t[i].lab[j]]++;
  }
  e->out_rank = 0;
  if (arrow) {
    dvm_status *st = parse_term(e, arrow + 2, end, "the output", &to);
    if (st) return st;
    if (to.n + (to.ell >= 0 ? ell : 0) > DVM_MAX_RANK)
      return bad_eq(e, "the output has over %d dims", DVM_MAX_RANK);
    for (int j = 0; j <= to.n; j++) {
      if (j == to.ell)
        for (int q = 0; q < ell; q++) e->out[e->out_rank++] = (int8_t)(ELL + q);
      if (j == to.n) break;
      int l = to.lab[j];
      if (!count[l]) return bad_eq(e, "output letter '%c' is in no input", label_char(l));
      for (int q = 0; q < j; q++)
        if (to.lab[q] == l) return bad_eq(e, "output letter '%c' is repeated", label_char(l));
      e->out[e->out_rank++] = (int8_t)l;
    }
  } else { /* implicit: ellipsis dims, then letters seen once, in order */
    for (int q = 0; q < ell; q++) e->out[e->out_rank++] = (int8_t)(ELL + q);
    for (int l = 0; l < ELL; l++)
      if (count[l] == 1) {
        if (e->out_rank == DVM_MAX_RANK)
          return bad_eq(e, "the output has over %d dims", DVM_MAX_RANK);
        e->out[e->out_rank++] = (int8_t)l;
      }
  }
  int who[NLAB];
  for (int l = 0; l < NLAB; l++) e->dim[l] = -1;
  for (int i = 0; i < e->nin; i++)
    for (int d = 0; d < e->rank[i]; d++) {
      int l = e->in[i][d];
      int64_t v = a->in[i]->dims[d];
      if (e->dim[l] < 0 || (l >= ELL && e->dim[l] == 1)) {
        e->dim[l] = v;
        who[l] = i;
      } else if (v != e->dim[l] && !(l >= ELL && v == 1)) {
        if (l >= ELL)
          return bad_eq(e, "ellipsis dims do not broadcast: input %d dim %d is %lld, input %d has %lld",
                        i, d, (long long)v, who[l], (long long)e->dim[l]);
        return bad_eq(e, "'%c' is %lld in input %d, %lld in input %d", label_char(l),
                      (long long)v, i, (long long)e->dim[l], who[l]);
      }
    }
  return NULL;
}

/* A tensor in the compute dtype with one label per dim and strides in
 * elements (0 where it broadcasts); labels of dim 1 are left out, as they
 * carry nothing. */
typedef struct lt {
  int rank;
  int8_t lab[LT_MAX];
  int64_t dim[LT_MAX], str[LT_MAX];
  const void *p;
} lt;

static int lt_find(const lt *t, int l) {
  for (int i = 0; i < t->rank; i++)
    if (t->lab[i] == l) return i;
  return -1;
}

static labset lt_labels(const lt *t) {
  labset s = 0;
  for (int i = 0; i < t->rank; i++) s |= (labset)1 << t->lab[i];
  return s;
}

/* Input i as an lt: a repeated label is the diagonal, its strides summed. */
static void lt_input(const equation *e, int i, const dvm_tensor *x, const void *p, lt *t) {
  int64_t str[DVM_MAX_RANK], s = 1;
  for (int d = e->rank[i] - 1; d >= 0; d--) {
    str[d] = s;
    s *= x->dims[d];
  }
  t->rank = 0;
  t->p = p;
  for (int d = 0; d < e->rank[i]; d++) {
    int l = e->in[i][d], k = lt_find(t, l);
    if (e->dim[l] == 1) continue;
    int64_t sd = x->dims[d] == 1 ? 0 : str[d]; /* a broadcast ellipsis dim */
    if (k >= 0) {
      t->str[k] += sd;
      continue;
    }
    t->lab[t->rank] = (int8_t)l;
    t->dim[t->rank] = e->dim[l];
    t->str[t->rank++] = sd;
  }
}

/* dst[idx . dstr] += src[idx . src->str] over all of src's indices: a copy
 * into another layout that sums over the labels whose dst stride is 0. */
#define ACCUMULATE(name, T)                                                    \
  static void name(const lt *src, const int64_t *dstr, void *pdst) {          \
    int r = src->rank;                                                         \
    const T *p = src->p;                                                       \
    T *dst = pdst;                                                             \
    if (r == 0) {                                                              \
      dst[0] += p[0];                                                          \
      return;                                                                  \
    }                                                                          \
    int64_t n = src->dim[r - 1], ss = src->str[r - 1], ds = dstr[r - 1];       \
    int64_t idx[LT_MAX] = {0}, so = 0, dof = 0;                                \
    for (;;) {                                                                 \
      const T *s = p + so;                                                     \
      T *d = dst + dof;                                                        \
      if (ds == 0) {                                                           \
        T acc = 0;                                                             \
        for (int64_t j = 0; j < n; j++) acc += s[j * ss];                      \
        d[0] += acc;                                                           \
      } else {                                                                 \
        for (int64_t j = 0; j < n; j++) d[j * ds] += s[j * ss];                \
      }                                                                        \
      int k = r - 2;                                                           \
      for (; k >= 0; k--) {                                                    \
        so += src->str[k];                                                     \
        dof += dstr[k];                                                        \
        if (++idx[k] < src->dim[k]) break;                                     \
        so -= src->str[k] * src->dim[k];                                       \
        dof -= dstr[k] * src->dim[k];                                          \
        idx[k] = 0;                                                            \
      }                                                                        \
      if (k < 0) return;                                                       \
    }                                                                          \
  }
ACCUMULATE(accumulate_f32, float)
ACCUMULATE(accumulate_f64, double)

static void lt_accumulate(const equation *e, const lt *src, const int64_t *dstr, void *dst) {
  (e->f64 ? accumulate_f64 : accumulate_f32)(src, dstr, dst);
}

static size_t esz_of(const equation *e) { return e->f64 ? sizeof(double) : sizeof(float); }

/* src as a new dense lt with labels `order` (all src's), summing over src's
 * other labels. */
static dvm_status *lt_dense(scratch *sc, const equation *e, const lt *src, int n,
                            const int8_t *order, lt *out) {
  int64_t total = 1, dstr[LT_MAX];
  out->rank = n;
  for (int i = n - 1; i >= 0; i--) {
    out->lab[i] = order[i];
    out->dim[i] = src->dim[lt_find(src, order[i])];
    out->str[i] = total;
    total *= out->dim[i];
  }
  void *p = scratch_alloc(sc, total, esz_of(e), 1);
  if (!p) return oom("einsum");
  for (int i = 0; i < src->rank; i++) {
    int k = -1;
    for (int j = 0; j < n; j++)
      if (order[j] == src->lab[i]) k = j;
    dstr[i] = k < 0 ? 0 : out->str[k];
  }
  lt_accumulate(e, src, dstr, p);
  out->p = p;
  return NULL;
}

/* The labels of t in set s, in t's order. */
static int lt_select(const lt *t, labset s, int8_t *out) {
  int n = 0;
  for (int i = 0; i < t->rank; i++)
    if (s >> t->lab[i] & 1) out[n++] = t->lab[i];
  return n;
}

/* Sums t over its labels outside `keep`, in place of t. */
static dvm_status *lt_sum_out(scratch *sc, const equation *e, lt *t, labset keep) {
  if (!(lt_labels(t) & ~keep)) return NULL;
  int8_t order[LT_MAX];
  int n = lt_select(t, keep, order);
  lt res;
  dvm_status *st = lt_dense(sc, e, t, n, order, &res);
  if (!st) *t = res;
  return st;
}

/* The stride of a group of t's labels taken in the order given, as one
 * dim; 0 when they do not merge into one (and 1 for an empty group). */
static int group(const lt *t, int n, const int8_t *labs, int64_t *size, int64_t *stride) {
  *size = 1;
  *stride = 0;
  for (int i = n - 1; i >= 0; i--) {
    int k = lt_find(t, labs[i]);
    if (i < n - 1 && t->str[k] != *stride * *size) return 0;
    if (i == n - 1) *stride = t->str[k];
    *size *= t->dim[k];
  }
  return 1;
}

/* A matrix operand of sgemm. */
typedef struct mat {
  char trans;
  int64_t ld, bstride;
} mat;

/* t read as [batch][rows][cols], each group merged in the order given:
 * plain ('N') when columns are contiguous, transposed ('T') when rows are;
 * 0 when neither, or a group does not merge. */
static int as_mat(const lt *t, int nb, const int8_t *b, int nr, const int8_t *r, int nc,
                  const int8_t *c, mat *m) {
  int64_t sb, sr, sc, nbs, rows, cols;
  if (!group(t, nb, b, &nbs, &sb) || !group(t, nr, r, &rows, &sr) || !group(t, nc, c, &cols, &sc))
    return 0;
  m->bstride = sb;
  if ((nc == 0 || sc == 1) && (nr == 0 || sr >= cols)) {
    m->trans = 'N';
    m->ld = nr == 0 ? cols : sr;
    return 1;
  }
  if ((nr == 0 || sr == 1) && (nc == 0 || sc >= rows)) {
    m->trans = 'T';
    m->ld = nc == 0 ? rows : sc;
    return 1;
  }
  return 0;
}

static int64_t labs_size(const equation *e, int n, const int8_t *labs) {
  int64_t s = 1;
  for (int i = 0; i < n; i++) s *= e->dim[labs[i]];
  return s;
}

/* res = x contracted with y over their shared labels outside keep, with
 * labels ob (shared, kept: the batch), om (x's own) and on (y's own), in
 * that order, dense at dst (or new scratch when dst is NULL). x's and y's
 * labels outside keep are all shared (the others were summed out). */
/* t as a batch of matrices [batch, rows, cols] over those label groups:
 * in place where its layout allows, else after a copy into that order. */
static dvm_status *mat_of(scratch *sc, const equation *e, lt *t, int nb, const int8_t *b, int nr,
                          const int8_t *r, int nc, const int8_t *c, mat *out) {
  if (as_mat(t, nb, b, nr, r, nc, c, out)) return NULL;
  int8_t order[LT_MAX];
  memcpy(order, b, (size_t)nb);
  memcpy(order + nb, r, (size_t)nr);
  memcpy(order + nb + nr, c, (size_t)nc);
  lt dense;
  dvm_status *st = lt_dense(sc, e, t, nb + nr + nc, order, &dense);
  if (st) return st;
  *t = dense;
  as_mat(t, nb, b, nr, r, nc, c, out);
  return NULL;
}

static dvm_status *contract(const dvm_kernel_args *a, scratch *sc, const equation *e, lt x, lt y,
                            labset keep, int nb, const int8_t *ob, int nm, const int8_t *om,
                            int nn, const int8_t *on, void *dst, lt *res) {
  int8_t ok[LT_MAX], order[LT_MAX];
  int nk = lt_select(&x, lt_labels(&y) & ~keep, ok);
  dvm_status *st;
  mat mx, my;
  if ((st = mat_of(sc, e, &x, nb, ob, nm, om, nk, ok, &mx)) || /* [batch, m, k] */
      (st = mat_of(sc, e, &y, nb, ob, nk, ok, nn, on, &my)))    /* [batch, k, n] */
    return st;
  int64_t bt = labs_size(e, nb, ob), m = labs_size(e, nm, om), n = labs_size(e, nn, on);
  int64_t k = labs_size(e, nk, ok);
  if (!dst && !(dst = scratch_alloc(sc, bt * m * n, esz_of(e), 0))) return oom("einsum");
  dvm_product p = {.f64 = e->f64, .ta = mx.trans, .tb = my.trans, .m = m, .n = n, .k = k,
               .lda = mx.ld, .ldb = my.ld, .ldc = n, .alpha = 1, .a = x.p, .b = y.p, .c = dst,
               .nbatch = 1};
  p.bdims[0] = bt;
  p.sa[0] = mx.bstride;
  p.sb[0] = my.bstride;
  p.sc[0] = m * n;
  if ((st = product_run("einsum", &p, dvm_kargs_threads(a)))) return st;
  memcpy(order, ob, (size_t)nb);
  memcpy(order + nb, om, (size_t)nm);
  memcpy(order + nb + nm, on, (size_t)nn);
  res->rank = nb + nm + nn;
  res->p = dst;
  int64_t s = 1;
  for (int i = res->rank - 1; i >= 0; i--) {
    res->lab[i] = order[i];
    res->dim[i] = e->dim[order[i]];
    res->str[i] = s;
    s *= res->dim[i];
  }
  return NULL;
}

/* The labels in set s, in the output's order. */
static int out_select(const equation *e, labset s, int8_t *out) {
  int n = 0;
  for (int i = 0; i < e->out_rank; i++)
    if (e->dim[e->out[i]] != 1 && (s >> e->out[i] & 1)) out[n++] = e->out[i];
  return n;
}

static int same_labels(const int8_t *a, int na, const int8_t *b, int nb, const int8_t *c, int nc,
                       const int8_t *want, int nwant) {
  if (na + nb + nc != nwant) return 0;
  return !memcmp(want, a, (size_t)na) && !memcmp(want + na, b, (size_t)nb) &&
         !memcmp(want + na + nb, c, (size_t)nc);
}

/* Contracts the inputs left to right into out (f32, dense in the output's
 * order). */
static dvm_status *einsum_run(const dvm_kernel_args *a, scratch *sc, const equation *e,
                              const void *const *in, void *out) {
  labset out_set = 0, later[MAX_IN + 1];
  int8_t ol[DVM_MAX_RANK];
  int nol = out_select(e, ~(labset)0, ol);
  for (int i = 0; i < nol; i++) out_set |= (labset)1 << ol[i];
  lt ops[MAX_IN];
  later[e->nin] = 0;
  for (int i = e->nin - 1; i >= 0; i--) {
    lt_input(e, i, a->in[i], in[i], &ops[i]);
    later[i] = later[i + 1] | lt_labels(&ops[i]);
  }
  lt cur = ops[0];
  int direct = 0; /* the last product wrote out */
  dvm_status *st = NULL;
  for (int i = 1; i < e->nin && !st; i++) {
    lt y = ops[i];
    labset keep = out_set | later[i + 1];
    /* labels of one side only that nothing later needs: summed first */
    if ((st = lt_sum_out(sc, e, &cur, keep | lt_labels(&y))) ||
        (st = lt_sum_out(sc, e, &y, keep | lt_labels(&cur))))
      break;
    labset lx = lt_labels(&cur), ly = lt_labels(&y);
    int8_t ob[LT_MAX], om[LT_MAX], on[LT_MAX];
    int last = i == e->nin - 1, nb, nm, nn;
    void *dst = NULL;
    if (last) { /* in the output's order, straight into it where it is [b, m, n] or [b, n, m] */
      nb = out_select(e, lx & ly, ob);
      nm = out_select(e, lx & ~ly, om);
      nn = out_select(e, ly & ~lx, on);
      if (same_labels(ob, nb, on, nn, om, nm, ol, nol) && !same_labels(ob, nb, om, nm, on, nn, ol, nol)) {
        lt t = cur; /* [b, n, m]: y x cur */
        cur = y;
        y = t;
        int8_t tl[LT_MAX];
        memcpy(tl, om, (size_t)nm);
        memcpy(om, on, (size_t)nn);
        memcpy(on, tl, (size_t)nm);
        int tn = nm;
        nm = nn;
        nn = tn;
      }
      if (same_labels(ob, nb, om, nm, on, nn, ol, nol)) {
        dst = out;
        direct = 1;
      }
    } else {
      nb = lt_select(&cur, ly & keep, ob);
      nm = lt_select(&cur, ~ly & keep, om);
      nn = lt_select(&y, ~lx & keep, on);
    }
    st = contract(a, sc, e, cur, y, keep, nb, ob, nm, om, nn, on, dst, &cur);
  }
  if (st || direct) return st;
  /* one input, or a result in another order: a (summing) copy */
  int64_t ostr[LT_MAX], s = 1, pos[NLAB];
  for (int i = e->out_rank - 1; i >= 0; i--) {
    pos[e->out[i]] = s;
    s *= e->dim[e->out[i]];
  }
  memset(out, 0, esz_of(e) * (size_t)s);
  for (int i = 0; i < cur.rank; i++) ostr[i] = out_set >> cur.lab[i] & 1 ? pos[cur.lab[i]] : 0;
  lt_accumulate(e, &cur, ostr, out);
  return NULL;
}

static dvm_status *einsum(const dvm_kernel_args *a) {
  if (a->nin < 1 || a->nin > MAX_IN || a->nout != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "einsum: takes 1 to %d inputs and 1 output, got %d and %d", MAX_IN,
                          a->nin, a->nout);
  int cdt;
  dvm_status *st = dvm_kargs_check(a, "einsum", a->nin, 1, DVM_DEVICE_CPU);
  if (!st) st = compute_dtype(a, "einsum", 1, &cdt);
  if (!st) st = dvm_attr_count("einsum", a->nattrs, 1, 1);
  if (!st) st = dvm_attr_kind("einsum", "dims", &a->attrs[0], DVM_VAL_SHAPE);
  equation e;
  if (!st) st = parse_equation(a, &e);
  if (st) return st;
  const dvm_tensor *o = a->out[0];
  int64_t dims[DVM_MAX_RANK];
  for (int i = 0; i < e.out_rank; i++) dims[i] = e.dim[e.out[i]];
  if ((st = check_out("einsum", o, e.out_rank, dims, "the equation's"))) return st;
  if (dvm_tensor_numel(o) == 0) return NULL;
  e.f64 = cdt == DVM_F64;
  scratch sc = {0};
  void *out = out_of(&sc, o, cdt);
  const void *in[MAX_IN];
  int empty = 0; /* a summed label of dim 0: all zeros */
  for (int i = 0; i < a->nin; i++) {
    empty |= dvm_tensor_numel(a->in[i]) == 0;
    in[i] = in_of(&sc, a->in[i], cdt);
    if (!in[i]) out = NULL;
  }
  if (!out)
    st = oom("einsum");
  else if (empty)
    memset(out, 0, esz_of(&e) * (size_t)dvm_tensor_numel(o));
  else
    st = einsum_run(a, &sc, &e, in, out);
  if (!st) out_store(o, out);
  scratch_free(&sc);
  return st;
}

const dvm_kernel_def dvm_cpu_matmul_kernels[] = {
    [K_MATMUL] = {"matmul", DVM_DEVICE_CPU, matmul, "matmul", .prepack = matmul_prepack, .prepack_replaces = 1,
                  .dtypes = DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F16) | DVM_DTYPE_BIT(DVM_BF16) |
                            DVM_DTYPE_BIT(DVM_F64)},
    [K_GEMM] = {"gemm", DVM_DEVICE_CPU, gemm, "gemm", .prepack = gemm_prepack},
    [K_EINSUM] = {"einsum", DVM_DEVICE_CPU, einsum, "einsum"},
    [K_GEMM_ACT] = {"gemm_act", DVM_DEVICE_CPU, gemm_act, "gemm_act", .prepack = gemm_prepack,
                    .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    [K_MATMUL_BIAS] = {"matmul_bias", DVM_DEVICE_CPU, matmul_bias, "matmul_bias", .prepack = matmul_prepack,
                       .prepack_replaces = 1, .dtypes = DVM_DTYPE_BIT(DVM_F32)},
    [K_END] = {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
