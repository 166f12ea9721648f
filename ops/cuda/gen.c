/* "gen": the launcher of generated CUDA kernels (DVMG payloads, gen_abi.h).
 *
 *   gen (in: x0..x{nin-1}; out: y0..y{nout-1}; variant r; payload DVMG)
 *     Runs entry dvm_v<r> (r < T, the variant for n mod T == r) or dvm_b
 *     (r == T, bounds-checked) of the payload's image for this device, in
 *     the launch shape of config c chosen per call by the occupancy cost model
 *     (payload.h), on the VM's stream. Attribute 0, where a PERMUTED input
 *     has one, is transpose's perm; of a GATHER or CONCAT kernel, the
 *     axis; of a SPLIT kernel, [the sizes,] the axis[, num_outputs]; a SLICED input's are slice's starts, ends, axes, steps;
 *     of a WINDOW kernel, the pool's; of a RESIZE kernel, resize's; of a
 *     CONV kernel, conv's or fused_conv's; of a CONV_TRANSPOSE kernel,
 *     conv_transpose's; of a MATMUL_NBITS kernel, matmul_nbits'. A
 *     GATHER kernel also gets the VM's device error record, which the
 *     VM's next host wait reads (ops/cuda/stream.h).
 *
 * A payload is read, checked and loaded once per VM, at its first call:
 * the cubin for the device's exact sm, else the PTX JIT-compiled by the
 * driver, with every entry resolved and each config's occupancy asked of
 * the driver. The cache is the VM's own (ops/cuda/stream.h slots), keyed by
 * the payload's address: the VM holds its module, so the address is stable
 * and unique while the VM lives, and a VM is used by one thread at a time,
 * so the cache needs no lock.
 *
 * DVM_CUDA_BASELINE=1 in the environment makes every call run the
 * bounds-checked baseline instead of its duplicated-tail variant: what
 * bench/bench_cuda.py compares against. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/kernels.h"
#include "ops/cuda/payload.h"
#include "ops/cuda/stream.h"
#include "ops/kargs.h"

_Static_assert(DVM_CUDA_ERROR_WORDS == DVM_GEN_ERROR_WORDS, "one device error record layout");

#define NAME_MAX_LEN 32
#define JIT_LOG 4096

typedef struct loaded {
  const void *key;
  dvm_gen_payload g;
  CUmodule mod;
  int blocks_per_sm[DVM_GEN_MAX_CONFIGS];
  CUfunction fn[DVM_GEN_MAX_TILE + 1]; /* [r], r == tile: the baseline */
} loaded;

typedef struct cache {
  const dvm_cuda_device *dev;
  int baseline; /* DVM_CUDA_BASELINE=1 when the VM first ran a gen kernel */
  int n, cap;
  loaded **items;
} cache;

static void cache_free(void *p) {
  cache *c = p;
  for (int i = 0; i < c->n; i++) {
    if (!dvm_cuda_enter(c->dev)) (void)c->dev->api->cuModuleUnload(c->items[i]->mod);
    free(c->items[i]);
  }
  free(c->items);
  free(c);
}

static dvm_status *load_image(const dvm_cuda_device *d, const dvm_gen_image *im, CUmodule *mod) {
  /* a private copy: aligned for the ELF loader, NUL-terminated for PTX */
  char *img = malloc((size_t)im->size + 1), log[JIT_LOG] = "";
  if (!img) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  memcpy(img, im->data, im->size);
  img[im->size] = 0;
  CUjit_option opt[2] = {DVM_CU_JIT_ERROR_LOG_BUFFER, DVM_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *val[2] = {log, (void *)(uintptr_t)sizeof log};
  dvm_status *st = DVM_CU(d->api, cuModuleLoadDataEx, mod, img, 2, opt, val);
  free(img);
  if (st && log[0]) st = dvm_status_annotate(st, "JIT log: %.*s", (int)sizeof log, log);
  const char *kind = im->arch == DVM_GEN_SOURCE_SM ? "CUDA C source" : im->arch ? "cubin" : "PTX";
  return st ? dvm_status_annotate(st, "loading the %s image", kind) : NULL;
}

static dvm_status *resolve(const dvm_cuda_device *d, loaded *l) {
  const dvm_gen_payload *g = &l->g;
  uint32_t shared = 0;
  for (int r = 0; r <= g->tile; r++) {
    char name[NAME_MAX_LEN];
    if (r < g->tile) snprintf(name, sizeof name, "dvm_v%d", r);
    else snprintf(name, sizeof name, "dvm_b");
    dvm_status *st = DVM_CU(d->api, cuModuleGetFunction, &l->fn[r], l->mod, name);
    if (st) return dvm_status_annotate(st, "entry \"%s\"", name);
  }
  for (int c = 0; c < g->nconfigs; c++) {
    if ((int)g->configs[c].shared > d->smem_optin)
      return dvm_status_new(DVM_UNAVAILABLE, "config %d needs %u bytes of shared memory; %s allows %d",
                            c, g->configs[c].shared, d->name, d->smem_optin);
    if (g->configs[c].shared > shared) shared = g->configs[c].shared;
  }
  dvm_status *st = NULL;
  for (int r = 0; r <= g->tile && !st && shared > 48 * 1024; r++)
    st = DVM_CU(d->api, cuFuncSetAttribute, l->fn[r], DVM_CU_FUNC_MAX_DYNAMIC_SHARED, (int)shared);
  for (int c = 0; c < g->nconfigs && !st; c++)
    if ((st = DVM_CU(d->api, cuOccupancyMaxActiveBlocksPerMultiprocessor, &l->blocks_per_sm[c],
                     l->fn[g->tile], g->configs[c].block, g->configs[c].shared)))
      st = dvm_status_annotate(st, "config %d", c);
  return st;
}

static dvm_status *load(const dvm_cuda_device *d, const dvm_kernel_args *a, loaded **out) {
  loaded *l = calloc(1, sizeof *l);
  if (!l) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_gen_image img;
  dvm_status *st = dvm_gen_payload_read(a->payload, a->payload_size, &l->g);
  if (!st) st = dvm_gen_payload_image(&l->g, d->sm, &img);
  if (!st) st = load_image(d, &img, &l->mod);
  if (!st && (st = resolve(d, l))) (void)d->api->cuModuleUnload(l->mod);
  if (st) {
    free(l);
    return st;
  }
  l->key = a->payload;
  *out = l;
  return NULL;
}

/* The loaded form of this call's payload, loading it on first use. */
static dvm_status *lookup(dvm_cuda_stream *cu, const dvm_kernel_args *a, loaded **out) {
  cache *c = cu->slot[DVM_CUDA_SLOT_GEN];
  if (!c) {
    if (!(c = calloc(1, sizeof *c))) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    c->dev = cu->dev;
    const char *base = getenv("DVM_CUDA_BASELINE");
    c->baseline = base && strcmp(base, "1") == 0;
    cu->slot[DVM_CUDA_SLOT_GEN] = c;
    cu->slot_free[DVM_CUDA_SLOT_GEN] = cache_free;
  }
  for (int i = 0; i < c->n; i++)
    if (c->items[i]->key == a->payload) {
      *out = c->items[i];
      return NULL;
    }
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 16;
    loaded **items = realloc(c->items, (size_t)cap * sizeof *items);
    if (!items) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    c->items = items;
    c->cap = cap;
  }
  dvm_status *st = load(cu->dev, a, out);
  if (!st) c->items[c->n++] = *out;
  return st;
}

/* Right-aligns t's dims to DVM_GEN_MAX_RANK with leading 1s. */
static dvm_status *align_dims(const dvm_tensor *t, const char *what, long long *dims) {
  if (t->rank > DVM_GEN_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: %s has rank %d, generated kernels take up to %d",
                          what, t->rank, DVM_GEN_MAX_RANK);
  int lead = DVM_GEN_MAX_RANK - t->rank;
  for (int d = 0; d < DVM_GEN_MAX_RANK; d++) dims[d] = d < lead ? 1 : t->dims[d - lead];
  return NULL;
}

/* Checks input k's class against its shape and the call's reference
 * shape (dims), and fills its strides and element count. */
static dvm_status *bind_input(const dvm_gen_payload *g, int k, const dvm_tensor *t,
                              const long long *dims, dvm_gen_params *p) {
  long long in[DVM_GEN_MAX_RANK], numel = 1, stride = 1;
  char what[32];
  snprintf(what, sizeof what, "input %d", k);
  dvm_status *st = align_dims(t, what, in);
  if (st) return st;
  int same = 1, suffix = 1, broadcast = 1, lead = 1;
  for (int d = DVM_GEN_MAX_RANK - 1; d >= 0; d--) {
    p->strides[k][d] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
    numel *= in[d];
    same &= in[d] == dims[d];
    broadcast &= in[d] == dims[d] || in[d] == 1;
  }
  /* SUFFIX: past the leading 1s, the input's dims are the reference's;
   * for ROWS (a layer norm's scale, bias), n elements along the row or
   * one, which is all the kernel reads (index j, or 0 when numel is 1) */
  for (int d = 0; d < DVM_GEN_MAX_RANK; d++) {
    lead &= in[d] == 1;
    if (!lead) suffix &= in[d] == dims[d];
  }
  if (g->kind == DVM_GEN_ROWS) suffix &= numel == 1 || numel == dims[DVM_GEN_MAX_RANK - 1];
  p->numel[k] = numel;
  static const char *const names[] = {"same", "scalar", "suffix", "strided"};
  int cls = g->classes[k];
  int ok = cls == DVM_GEN_SAME ? same : cls == DVM_GEN_SCALAR ? numel == 1
         : cls == DVM_GEN_SUFFIX ? suffix : broadcast;
  if (ok) return NULL;
  char ts[96], rs[96];
  int64_t ref[DVM_GEN_MAX_RANK];
  for (int d = 0; d < DVM_GEN_MAX_RANK; d++) ref[d] = dims[d];
  return dvm_status_new(DVM_INVALID_ARGUMENT,
                        "gen: input %d is %s, which its class \"%s\" does not allow against %s", k,
                        dvm_shape_format(ts, sizeof ts, (dvm_dtype)t->dtype, t->rank, t->dims),
                        names[cls], dvm_shape_format(rs, sizeof rs, DVM_F32, DVM_GEN_MAX_RANK, ref));
}

/* n, rows and the reference dims of a call; outputs checked to hold what
 * the kernel writes. */
static dvm_status *call_shape(const dvm_gen_payload *g, const dvm_kernel_args *a, dvm_gen_shape *s,
                              dvm_gen_params *p) {
  const dvm_tensor *ref = g->kind == DVM_GEN_ROWS || g->kind == DVM_GEN_SPLIT ? a->in[0] : a->out[0];
  /* a gather's, concat's, split's, window's, resize's, conv's or matmul_nbits' dims come with its extents */
  dvm_status *st = g->kind >= DVM_GEN_GATHER ? NULL
                 : align_dims(ref, g->kind == DVM_GEN_ROWS ? "input 0" : "output 0", p->dims);
  if (st) return st;
  long long total = dvm_tensor_numel(ref);
  s->n = g->kind == DVM_GEN_ROWS ? (ref->rank ? ref->dims[ref->rank - 1] : 1) : total;
  s->rows = g->kind == DVM_GEN_ROWS ? (s->n ? total / s->n : 0) : 1;
  for (int o = 0; o < a->nout; o++) {
    long long got = dvm_tensor_numel(a->out[o]);
    /* a split's outputs: dvm_gen_split_extents checks each */
    int ok = g->kind == DVM_GEN_ROWS ? got == total || got == s->rows : g->kind == DVM_GEN_SPLIT || got == total;
    if (!ok)
      return dvm_status_new(DVM_INVALID_ARGUMENT,
                            "gen: output %d has %lld elements; the kernel writes %lld%s", o, got,
                            total, g->kind == DVM_GEN_ROWS ? " (or one per row)" : "");
  }
  return NULL;
}

/* Each tensor of the dtype the kernel was generated for (the payload's
 * table): another would be read at the wrong width, past its end. */
static dvm_status *check_dtypes(const dvm_gen_payload *g, const dvm_kernel_args *a) {
  for (int i = 0; i < a->nin + a->nout; i++) {
    const dvm_tensor *t = i < a->nin ? a->in[i] : a->out[i - a->nin];
    if (t->dtype != g->dtypes[i])
      return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: %s %d is %s; the kernel was generated for %s",
                            i < a->nin ? "input" : "output", i < a->nin ? i : i - a->nin,
                            dvm_dtype_name((dvm_dtype)t->dtype),
                            dvm_dtype_name((dvm_dtype)g->dtypes[i]));
  }
  return NULL;
}

static dvm_status *check_variant(const dvm_gen_payload *g, int64_t variant, long long n) {
  if (variant == g->tile || variant == n % g->tile) return NULL;
  return dvm_status_new(DVM_INVALID_ARGUMENT,
                        "gen: variant %lld does not fit n = %lld: expected n mod %d = %lld, or %d "
                        "(the bounds-checked baseline)",
                        (long long)variant, n, g->tile, n % g->tile, g->tile);
}

static dvm_status *gen(const dvm_kernel_args *a) {
  dvm_cuda_stream *cu = dvm_cuda_stream_of(a);
  if (!cu) return dvm_status_new(DVM_INTERNAL, "gen: the VM has no CUDA state");
  loaded *l = NULL;
  dvm_status *st = lookup(cu, a, &l);
  if (st) return st;
  const dvm_gen_payload *g = &l->g;
  if ((st = dvm_kargs_check(a, "gen", g->nin, g->nout, DVM_DEVICE_CUDA)) || (st = check_dtypes(g, a)))
    return st;
  dvm_gen_params p;
  memset(&p, 0, sizeof p);
  dvm_gen_shape s;
  if ((st = call_shape(g, a, &s, &p)) || (st = check_variant(g, a->variant, s.n))) return st;
  if (g->kind == DVM_GEN_GATHER)
    st = dvm_gen_gather_extents(a->in[0], a->in[1], a->out[0], a->attrs, a->nattrs, p.dims, &p.numel[0]);
  long long offset[DVM_GEN_MAX_IN] = {0}; /* elements: where a sliced input starts */
  if (g->kind == DVM_GEN_CONCAT)
    st = dvm_gen_concat_extents(a->in, a->nin, a->out[0], a->attrs, a->nattrs, p.dims, p.numel);
  else if (g->kind == DVM_GEN_SPLIT) /* the outputs' sizes in numel: a split has one input */
    st = dvm_gen_split_extents(a->in[0], a->out, a->nout, a->attrs, a->nattrs, p.dims, p.numel);
  else if (g->kind == DVM_GEN_WINDOW) /* max or average: the kernel's code; the checks are alike */
    st = dvm_gen_window_geometry("pool", a->in[0], a->out[0], a->attrs, a->nattrs, p.dims, p.geom);
  else if (g->kind == DVM_GEN_RESIZE)
    st = dvm_gen_resize_geometry(a->in[0], a->out[0], a->attrs, a->nattrs, p.dims, p.geom, p.real);
  else if (g->kind == DVM_GEN_CONV || g->kind == DVM_GEN_CONV_TRANSPOSE)
    st = dvm_gen_conv_geometry(g->kind == DVM_GEN_CONV_TRANSPOSE, a->in, a->nin, a->out[0], a->attrs, a->nattrs,
                               p.dims, p.geom, p.real);
  else if (g->kind == DVM_GEN_MATMUL_NBITS)
    st = dvm_gen_nbits_geometry(a, p.geom);
  else if (g->kind != DVM_GEN_GATHER)
    for (int k = 0; k < g->nin && !st; k++)
      st = g->classes[k] == DVM_GEN_PERMUTED
               ? dvm_gen_permuted_strides(a->in[k], a->out[0], a->attrs, a->nattrs, p.strides[k])
           : g->classes[k] == DVM_GEN_SLICED
               ? dvm_gen_sliced_strides(a->in[k], a->out[0], a->attrs, a->nattrs, p.strides[k], &offset[k])
               : bind_input(g, k, a->in[k], p.dims, &p);
  if (st || s.n == 0 || s.rows == 0) return st;
  for (int k = 0; k < g->nin; k++)
    p.ptr[k] = (char *)dvm_tensor_ptr(a->in[k]) + offset[k] * (long long)dvm_dtype_size((dvm_dtype)a->in[k]->dtype);
  for (int o = 0; o < g->nout; o++) p.ptr[g->nin + o] = dvm_tensor_ptr(a->out[o]);
  if (g->kind == DVM_GEN_GATHER) {
    CUdeviceptr errors;
    if ((st = dvm_cuda_stream_errors(cu, &errors))) return st;
    p.ptr[g->nin + g->nout] = (void *)(uintptr_t)errors;
  }
  p.n = s.n;
  p.rows = s.rows;
  int c = dvm_gen_choose(g, s, cu->dev->sm_count, l->blocks_per_sm);
  if (c < 0) return dvm_status_new(DVM_UNAVAILABLE, "gen: no config fits on %s", cu->dev->name);
  long long grid = dvm_gen_grid(g, c, s);
  if (grid > INT32_MAX)
    return dvm_status_new(DVM_OUT_OF_RANGE, "gen: %lld blocks, more than a grid holds", grid);
  void *params[1] = {&p};
  const dvm_gen_config *k = &g->configs[c];
  const cache *cc = cu->slot[DVM_CUDA_SLOT_GEN];
  int64_t r = cc->baseline ? g->tile : a->variant;
  if ((st = dvm_cuda_enter(cu->dev))) return st;
  return DVM_CU(cu->dev->api, cuLaunchKernel, l->fn[r], (unsigned)grid, 1, 1, k->block, 1, 1,
                k->shared, cu->stream, params, NULL);
}

const dvm_kernel_def dvm_cuda_gen_kernels[] = {
    {"gen", DVM_DEVICE_CUDA, gen, NULL, .describe = dvm_gen_payload_describe},
    {0},
};
