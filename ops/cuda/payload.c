/* Reading DVMG payloads and the choices made from them (see payload.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "object.h"
#include "ops/cpu/nbits.h"
#include "ops/cuda/payload.h"
#include "reader.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/movement.h"
#include "shapefuncs/window.h"

#define IMAGE_RECORD 16
#define CONFIG_RECORD 8

static dvm_status *bad(const char *fmt, ...) DVM_PRINTF(1, 2);
static dvm_status *bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_annotate(dvm_status_newv(DVM_CORRUPT, fmt, ap), "DVMG payload");
  va_end(ap);
  return st;
}

/* A byte range [off, off + len) inside the payload, checked to lie within
 * it, after the tables, aligned, and not overlapping any range before it. */
typedef struct span {
  uint64_t off, len;
} span;

static dvm_status *check_span(const char *what, span s, size_t size, uint64_t data_start,
                              const span *prev, int nprev) {
  if (s.off % 8)
    return bad("%s: offset %llu is not a multiple of 8", what, (unsigned long long)s.off);
  if (s.off < data_start)
    return bad("%s: offset %llu is inside the header or tables (they end at %llu)", what,
               (unsigned long long)s.off, (unsigned long long)data_start);
  if (s.off > size || s.len > size - s.off)
    return bad("%s: bytes %llu..%llu are past the end (%zu)", what, (unsigned long long)s.off,
               (unsigned long long)(s.off + s.len), size);
  for (int i = 0; i < nprev; i++)
    if (s.len && prev[i].len && s.off < prev[i].off + prev[i].len && prev[i].off < s.off + s.len)
      return bad("%s: bytes %llu..%llu overlap bytes %llu..%llu of another part", what,
                 (unsigned long long)s.off, (unsigned long long)(s.off + s.len),
                 (unsigned long long)prev[i].off, (unsigned long long)(prev[i].off + prev[i].len));
  return NULL;
}

static void image_name(char *buf, size_t n, int i, uint32_t arch) {
  if (arch) snprintf(buf, n, "image %d (sm_%u)", i, arch);
  else snprintf(buf, n, "image %d (PTX)", i);
}

static dvm_status *read_configs(dvm_reader *r, dvm_gen_payload *g) {
  for (int c = 0; c < g->nconfigs; c++) {
    dvm_gen_config *k = &g->configs[c];
    k->block = dvm_reader_u16(r);
    k->per_thread = dvm_reader_u16(r);
    k->shared = dvm_reader_u32(r);
    if (k->block < 1 || k->block > DVM_GEN_MAX_BLOCK)
      return bad("config %d: block of %u threads, expected 1..%d", c, k->block, DVM_GEN_MAX_BLOCK);
    if (k->per_thread < 1)
      return bad("config %d: per_thread is 0, expected at least 1", c);
    if (k->shared > DVM_GEN_MAX_SHARED)
      return bad("config %d: %u bytes of shared memory, more than any device has (%d)", c,
                 k->shared, DVM_GEN_MAX_SHARED);
  }
  for (int i = 0; i < g->nin; i++) {
    g->classes[i] = dvm_reader_u8(r);
    if (g->classes[i] > DVM_GEN_SLICED)
      return bad("input %d: class %u, expected 0..%d", i, g->classes[i], DVM_GEN_SLICED);
    /* the call's perm or slice attributes describe one input of an elementwise copy */
    if (g->classes[i] >= DVM_GEN_PERMUTED && (g->kind != DVM_GEN_ELEMENTWISE || g->nin != 1))
      return bad("input %d: class %s needs an elementwise kernel of one input", i,
                 g->classes[i] == DVM_GEN_PERMUTED ? "permuted" : "sliced");
  }
  while (r->pos % 8 && !r->bad)
    if (dvm_reader_u8(r)) return bad("padding byte %zu is not 0", r->pos - 1);
  return r->bad ? bad("the input classes' padding runs past the end") : NULL;
}

/* The dtype table: one known dtype per input and output. */
static dvm_status *read_dtypes(const uint8_t *p, span s, dvm_gen_payload *g) {
  for (int k = 0; k < g->nin + g->nout; k++) {
    g->dtypes[k] = p[s.off + (uint64_t)k];
    if (g->dtypes[k] >= DVM_DTYPE_COUNT)
      return bad("%s %d: dtype code %u is not a dtype", k < g->nin ? "input" : "output",
                 k < g->nin ? k : k - g->nin, g->dtypes[k]);
  }
  if (g->kind == DVM_GEN_CONCAT || g->kind == DVM_GEN_SPLIT) /* bits copied: one dtype throughout */
    for (int k = 1; k < g->nin + g->nout; k++)
      if (g->dtypes[k] != g->dtypes[0])
        return bad("%s: %s %d is %s, input 0 %s", g->kind == DVM_GEN_SPLIT ? "split" : "concat",
                   k < g->nin ? "input" : "output", k < g->nin ? k : k - g->nin,
                   dvm_dtype_name((dvm_dtype)g->dtypes[k]), dvm_dtype_name((dvm_dtype)g->dtypes[0]));
  if (g->kind == DVM_GEN_WINDOW || g->kind == DVM_GEN_RESIZE) {
    const char *what = g->kind == DVM_GEN_WINDOW ? "window pool" : "resize";
    if (g->dtypes[1] != g->dtypes[0])
      return bad("%s: output is %s, input %s", what, dvm_dtype_name((dvm_dtype)g->dtypes[1]),
                 dvm_dtype_name((dvm_dtype)g->dtypes[0]));
    if (g->kind == DVM_GEN_WINDOW && g->dtypes[0] != DVM_F32)
      return bad("window pool: input is %s, expected f32", dvm_dtype_name((dvm_dtype)g->dtypes[0]));
    if (g->kind == DVM_GEN_RESIZE && (dvm_dtype_size((dvm_dtype)g->dtypes[0]) > 8 || g->dtypes[0] == DVM_STRING))
      return bad("resize: input is %s, which is not copied as bits", dvm_dtype_name((dvm_dtype)g->dtypes[0]));
  }
  int conv = g->kind == DVM_GEN_CONV || g->kind == DVM_GEN_CONV_TRANSPOSE;
  for (int k = 0; conv && k < g->nin + g->nout; k++)
    if (g->dtypes[k] != DVM_F32)
      return bad("%s: %s %d is %s, expected f32", g->kind == DVM_GEN_CONV ? "conv" : "conv_transpose",
                 k < g->nin ? "input" : "output", k < g->nin ? k : 0, dvm_dtype_name((dvm_dtype)g->dtypes[k]));
  if (g->kind == DVM_GEN_MATMUL_NBITS) { /* A, B, scales[, zero points][, bias] -> Y */
    static const uint8_t want[] = {DVM_F32, DVM_U8, DVM_F32};
    for (int k = 0; k < g->nin + g->nout; k++) {
      int ok = k < 3 ? g->dtypes[k] == want[k] : g->dtypes[k] == DVM_F32 || (k == 3 && g->nin > 3 && g->dtypes[k] == DVM_U8);
      if (!ok)
        return bad("matmul_nbits: %s %d is %s, expected %s", k < g->nin ? "input" : "output",
                   k < g->nin ? k : 0, dvm_dtype_name((dvm_dtype)g->dtypes[k]),
                   k == 1 ? "u8" : k == 3 && g->nin > 3 ? "u8 or f32" : "f32");
    }
  }
  if (g->kind != DVM_GEN_GATHER) return NULL;
  if (g->dtypes[1] != DVM_I32 && g->dtypes[1] != DVM_I64)
    return bad("gather: indices are %s, expected i32 or i64", dvm_dtype_name((dvm_dtype)g->dtypes[1]));
  if (g->dtypes[2] != g->dtypes[0])
    return bad("gather: output is %s, data %s", dvm_dtype_name((dvm_dtype)g->dtypes[2]),
               dvm_dtype_name((dvm_dtype)g->dtypes[0]));
  return NULL;
}

/* The image table, and the spans of the dtypes, source and images. */
static dvm_status *read_images(dvm_reader *r, size_t size, span dts, span src, dvm_gen_payload *g) {
  span used[DVM_GEN_MAX_IMAGES + 2] = {dts, src};
  uint64_t data_start = r->pos + (uint64_t)g->nimages * IMAGE_RECORD;
  if (data_start > size)
    return bad("the image table (%d entries) ends at byte %llu, past the end (%zu)", g->nimages,
               (unsigned long long)data_start, size);
  dvm_status *st = check_span("dtypes", dts, size, data_start, NULL, 0);
  if (!st && src.len) st = check_span("source", src, size, data_start, used, 1);
  if (!st) st = read_dtypes(r->p, dts, g);
  if (st) return st;
  for (int i = 0; i < g->nimages; i++) {
    dvm_gen_image *im = &g->images[i];
    char what[48];
    im->arch = dvm_reader_u32(r);
    uint32_t reserved = dvm_reader_u32(r);
    span s = {dvm_reader_u32(r), 0};
    s.len = im->size = dvm_reader_u32(r);
    image_name(what, sizeof what, i, im->arch);
    if (im->arch != 0 && (im->arch < 10 || im->arch > 999))
      return bad("image %d: arch %u is not an sm number (80, 90, ...) or 0 for PTX", i, im->arch);
    if (reserved) return bad("%s: reserved field is %u, expected 0", what, reserved);
    if (im->size == 0) return bad("%s is empty", what);
    for (int j = 0; j < i; j++)
      if (g->images[j].arch == im->arch) return bad("%s: a second image for the same arch", what);
    if ((st = check_span(what, s, size, data_start, used, i + 2))) return st;
    used[i + 2] = s;
    im->data = r->p + s.off;
    /* a cubin is an ELF file: catch a PTX or garbage image filed under an sm */
    if (im->arch && (im->size < 4 || memcmp(im->data, "\177ELF", 4) != 0))
      return bad("%s is not a cubin (no ELF header)", what);
  }
  return NULL;
}

dvm_status *dvm_gen_payload_read(const void *p, size_t size, dvm_gen_payload *g) {
  memset(g, 0, sizeof *g);
  if (size < DVM_GEN_HEADER_SIZE)
    return bad("%zu bytes, shorter than its %d-byte header", size, DVM_GEN_HEADER_SIZE);
  dvm_reader r = dvm_reader_make(p, size);
  const uint8_t *magic = dvm_reader_take(&r, 4);
  if (memcmp(magic, DVM_GEN_MAGIC, 4) != 0) return bad("bad magic (expected \"DVMG\")");
  unsigned version = dvm_reader_u16(&r);
  if (version != DVM_GEN_VERSION)
    return bad("version %u, this dvm reads version %d", version, DVM_GEN_VERSION);
  g->kind = dvm_reader_u8(&r);
  g->nconfigs = dvm_reader_u8(&r);
  g->nin = dvm_reader_u8(&r);
  g->nout = dvm_reader_u8(&r);
  g->tile = dvm_reader_u16(&r);
  uint32_t nimages = dvm_reader_u32(&r);
  span src = {dvm_reader_u32(&r), 0};
  src.len = g->source_size = dvm_reader_u32(&r);
  span dts = {dvm_reader_u32(&r), 0};
  uint32_t reserved = dvm_reader_u32(&r);
  if (g->kind < DVM_GEN_ELEMENTWISE || g->kind > DVM_GEN_MATMUL_NBITS)
    return bad("kind %d, expected %d (elementwise), %d (rows), %d (gather), %d (concat), %d (split), "
               "%d (window), %d (resize), %d (conv), %d (conv_transpose) or %d (matmul_nbits)", g->kind,
               DVM_GEN_ELEMENTWISE, DVM_GEN_ROWS, DVM_GEN_GATHER, DVM_GEN_CONCAT, DVM_GEN_SPLIT, DVM_GEN_WINDOW,
               DVM_GEN_RESIZE, DVM_GEN_CONV, DVM_GEN_CONV_TRANSPOSE, DVM_GEN_MATMUL_NBITS);
  if (g->kind == DVM_GEN_MATMUL_NBITS && (g->nin < 3 || g->nin > 5 || g->nout != 1))
    return bad("a matmul_nbits takes 3 to 5 inputs and 1 output, not %d and %d", g->nin, g->nout);
  if (g->kind == DVM_GEN_CONV && (g->nin < 2 || g->nin > 4 || g->nout != 1))
    return bad("a conv takes 2 to 4 inputs and 1 output, not %d and %d", g->nin, g->nout);
  if (g->kind == DVM_GEN_CONV_TRANSPOSE && (g->nin < 2 || g->nin > 3 || g->nout != 1))
    return bad("a conv_transpose takes 2 or 3 inputs and 1 output, not %d and %d", g->nin, g->nout);
  if ((g->kind == DVM_GEN_WINDOW || g->kind == DVM_GEN_RESIZE) && (g->nin != 1 || g->nout != 1))
    return bad("a %s takes 1 input and 1 output, not %d and %d",
               g->kind == DVM_GEN_WINDOW ? "window pool" : "resize", g->nin, g->nout);
  if (g->kind == DVM_GEN_GATHER && (g->nin != 2 || g->nout != 1))
    return bad("a gather takes 2 inputs and 1 output, not %d and %d", g->nin, g->nout);
  if (g->kind == DVM_GEN_CONCAT && g->nout != 1)
    return bad("a concat makes 1 output, not %d", g->nout);
  if (g->kind == DVM_GEN_SPLIT && g->nin != 1)
    return bad("a split takes 1 input, not %d", g->nin);
  if (g->nconfigs < 1 || g->nconfigs > DVM_GEN_MAX_CONFIGS)
    return bad("%d configs, expected 1..%d", g->nconfigs, DVM_GEN_MAX_CONFIGS);
  if (g->nin < 1 || g->nin > DVM_GEN_MAX_IN)
    return bad("%d inputs, expected 1..%d", g->nin, DVM_GEN_MAX_IN);
  if (g->nout < 1 || g->nout > DVM_GEN_MAX_OUT)
    return bad("%d outputs, expected 1..%d", g->nout, DVM_GEN_MAX_OUT);
  if (g->tile < 1 || g->tile > DVM_GEN_MAX_TILE)
    return bad("tile %d, expected 1..%d", g->tile, DVM_GEN_MAX_TILE);
  if (nimages < 1 || nimages > DVM_GEN_MAX_IMAGES)
    return bad("%u images, expected 1..%d", nimages, DVM_GEN_MAX_IMAGES);
  if (reserved) return bad("reserved bytes 28..31 are not 0");
  g->nimages = (int)nimages;
  dts.len = (uint64_t)g->nin + (uint64_t)g->nout;
  if (!dvm_reader_can_hold(&r, (uint64_t)g->nconfigs, CONFIG_RECORD) ||
      (uint64_t)g->nconfigs * CONFIG_RECORD + (uint64_t)g->nin > dvm_reader_left(&r))
    return bad("the config table and input classes run past the end (%zu)", size);
  dvm_status *st = read_configs(&r, g);
  if (!st) st = read_images(&r, size, dts, src, g);
  if (st) return st;
  g->source = src.len ? (const char *)p + src.off : "";
  return NULL;
}

/* Appends to d's summary; what does not fit is cut (it always fits: the
 * reader caps configs at 8 and images at 16). */
static void say(dvm_payload_desc *d, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(d->summary + *len, sizeof d->summary - *len, fmt, ap);
  va_end(ap);
  if (n > 0) *len = *len + (size_t)n < sizeof d->summary ? *len + (size_t)n : sizeof d->summary - 1;
}

dvm_status *dvm_gen_payload_describe(const void *p, size_t size, dvm_payload_desc *out) {
  static const char *const kinds[] = {[DVM_GEN_ELEMENTWISE] = "elementwise", [DVM_GEN_ROWS] = "rows",
                                      [DVM_GEN_GATHER] = "gather", [DVM_GEN_CONCAT] = "concat",
                                      [DVM_GEN_SPLIT] = "split", [DVM_GEN_WINDOW] = "window",
                                      [DVM_GEN_RESIZE] = "resize", [DVM_GEN_CONV] = "conv",
                                      [DVM_GEN_CONV_TRANSPOSE] = "conv_transpose",
                                      [DVM_GEN_MATMUL_NBITS] = "matmul_nbits"};
  dvm_gen_payload g;
  dvm_status *st = dvm_gen_payload_read(p, size, &g);
  if (st) return st;
  size_t len = 0;
  say(out, &len, "%s, T=%d: variants v0..v%d by n mod %d, then the bounds-checked baseline; configs",
      kinds[g.kind], g.tile, g.tile - 1, g.tile);
  for (int c = 0; c < g.nconfigs; c++)
    say(out, &len, " %d:block %u x %u", c, g.configs[c].block, g.configs[c].per_thread);
  say(out, &len, "; images");
  for (int i = 0; i < g.nimages; i++) {
    if (g.images[i].arch) say(out, &len, " sm_%u (%u bytes)", g.images[i].arch, g.images[i].size);
    else say(out, &len, " ptx (%u bytes)", g.images[i].size);
  }
  out->language = "CUDA C";
  out->source = g.source;
  out->source_size = g.source_size;
  return NULL;
}

dvm_status *dvm_gen_payload_image(const dvm_gen_payload *g, int sm, dvm_gen_image *out) {
  if (sm == DVM_GEN_SOURCE_SM) {
    if (!g->source_size)
      return dvm_status_new(DVM_UNAVAILABLE, "generated kernel carries no CUDA C source for the host emulation");
    *out = (dvm_gen_image){DVM_GEN_SOURCE_SM, (const uint8_t *)g->source, g->source_size};
    return NULL;
  }
  int ptx = -1;
  for (int i = 0; i < g->nimages; i++) {
    if ((int)g->images[i].arch == sm) {
      *out = g->images[i];
      return NULL;
    }
    if (g->images[i].arch == 0) ptx = i;
  }
  if (ptx >= 0) {
    *out = g->images[ptx];
    return NULL;
  }
  char have[DVM_GEN_MAX_IMAGES * 8] = "", *w = have;
  for (int i = 0; i < g->nimages; i++)
    w += snprintf(w, sizeof have - (size_t)(w - have), "%ssm_%u", i ? ", " : "", g->images[i].arch);
  return dvm_status_new(DVM_UNAVAILABLE,
                        "generated kernel has no cubin for this device (sm_%d) and no PTX to "
                        "compile for it (it has %s): recompile with a target for sm_%d",
                        sm, have, sm);
}

long long dvm_gen_grid(const dvm_gen_payload *g, int c, dvm_gen_shape s) {
  if (g->kind == DVM_GEN_ROWS) return s.rows;
  long long per_block = (long long)g->configs[c].block * g->configs[c].per_thread;
  return (s.n + per_block - 1) / per_block;
}

int dvm_gen_choose(const dvm_gen_payload *g, dvm_gen_shape s, int sm_count, const int *blocks_per_sm) {
  int best = -1;
  double best_cost = 0;
  for (int c = 0; c < g->nconfigs; c++) {
    if (blocks_per_sm[c] < 1) continue;
    const dvm_gen_config *k = &g->configs[c];
    long long wave = (long long)blocks_per_sm[c] * (sm_count > 0 ? sm_count : 1);
    long long grid = dvm_gen_grid(g, c, s), waves = (grid + wave - 1) / wave;
    long long steps = g->kind == DVM_GEN_ROWS ? (s.n + k->block - 1) / k->block : k->per_thread;
    double cost = (double)(waves ? waves : 1) * (double)(steps ? steps : 1);
    if (best < 0 || cost < best_cost) {
      best = c;
      best_cost = cost;
    }
  }
  return best;
}

/* y has the shape (rank, dims) that the CPU kernel's shape function gives
 * for the call, which `what` names. */
static dvm_status *check_output(const dvm_tensor *y, int rank, const int64_t *dims, const char *what) {
  int same = y->rank == rank;
  for (int d = 0; same && d < rank; d++) same = y->dims[d] == dims[d];
  if (same) return NULL;
  char ys[96], gs[96];
  return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: output 0 is %s; %s gives %s",
                        dvm_shape_format(ys, sizeof ys, (dvm_dtype)y->dtype, y->rank, y->dims), what,
                        dvm_shape_format(gs, sizeof gs, (dvm_dtype)y->dtype, rank, dims));
}

/* A copy's input rank within the kernels', and y of the shape it gives. */
static dvm_status *check_copy(const dvm_tensor *y, int rank, const int64_t *dims, const char *what) {
  if (rank > DVM_GEN_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: input 0 has rank %d, generated kernels "
                          "take up to %d", rank, DVM_GEN_MAX_RANK);
  return check_output(y, rank, dims, what);
}

/* dims (DVM_GEN_MAX_RANK, right-aligned) as [outer, m, inner] of y's
 * dims before `axis`, at it and after it. */
static void axis_dims(const dvm_tensor *y, int axis, long long *dims) {
  long long outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= y->dims[d];
  for (int d = axis + 1; d < y->rank; d++) inner *= y->dims[d];
  for (int d = 0; d < DVM_GEN_MAX_RANK - 3; d++) dims[d] = 1;
  dims[DVM_GEN_MAX_RANK - 3] = outer;
  dims[DVM_GEN_MAX_RANK - 2] = y->dims[axis];
  dims[DVM_GEN_MAX_RANK - 1] = inner;
}

dvm_status *dvm_gen_permuted_strides(const dvm_tensor *x, const dvm_tensor *y,
                                     const dvm_value *attrs, int nattrs, long long *strides) {
  dvm_value v[2] = {dvm_value_tensor((dvm_tensor *)x)}; /* read only */
  if (nattrs > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a permuted input takes at most one "
                          "attribute (the perm), got %d", nattrs);
  if (nattrs) v[1] = attrs[0];
  dvm_transpose_info t;
  dvm_status *st = dvm_transpose_infer(v, 1 + nattrs, &t);
  if (st) return dvm_status_annotate(st, "gen");
  if ((st = check_copy(y, t.rank, t.dims, "the permuted input"))) return st;
  long long xs[DVM_GEN_MAX_RANK], stride = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    xs[d] = x->dims[d] == 1 ? 0 : stride;
    stride *= x->dims[d];
  }
  int lead = DVM_GEN_MAX_RANK - t.rank;
  for (int d = 0; d < DVM_GEN_MAX_RANK; d++) strides[d] = d < lead ? 0 : xs[t.perm[d - lead]];
  return NULL;
}

dvm_status *dvm_gen_sliced_strides(const dvm_tensor *x, const dvm_tensor *y,
                                   const dvm_value *attrs, int nattrs, long long *strides,
                                   long long *offset) {
  dvm_value v[5] = {dvm_value_tensor((dvm_tensor *)x)}; /* read only */
  if (nattrs < 2 || nattrs > 4)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a sliced input takes 2 to 4 attributes "
                          "(starts, ends, axes, steps), got %d", nattrs);
  for (int k = 0; k < nattrs; k++) v[1 + k] = attrs[k];
  dvm_slice_info s;
  dvm_status *st = dvm_slice_infer(v, 1 + nattrs, &s);
  if (st) return dvm_status_annotate(st, "gen");
  if ((st = check_copy(y, s.rank, s.dims, "the sliced input"))) return st;
  long long stride = 1;
  int lead = DVM_GEN_MAX_RANK - s.rank;
  *offset = 0;
  for (int d = DVM_GEN_MAX_RANK - 1; d >= 0; d--) {
    strides[d] = d < lead ? 0 : stride * s.step[d - lead];
    if (d >= lead) {
      *offset += s.start[d - lead] * stride;
      stride *= x->dims[d - lead];
    }
  }
  return NULL;
}

dvm_status *dvm_gen_concat_extents(dvm_tensor *const *in, int nin, const dvm_tensor *y,
                                   const dvm_value *attrs, int nattrs, long long *dims,
                                   long long *sizes) {
  dvm_value v[DVM_GEN_MAX_IN + 1];
  if (nattrs != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a concat takes one attribute (the axis), got %d",
                          nattrs);
  if (nin < 1 || nin > DVM_GEN_MAX_IN)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a concat of %d inputs (1..%d)", nin, DVM_GEN_MAX_IN);
  for (int k = 0; k < nin; k++) v[k] = dvm_value_tensor(in[k]);
  v[nin] = attrs[0];
  dvm_concat_info info;
  dvm_status *st = dvm_concat_infer(v, nin + 1, &info);
  if (st) return dvm_status_annotate(st, "gen");
  if ((st = check_output(y, info.rank, info.dims, "the concat"))) return st;
  axis_dims(y, info.axis, dims);
  for (int k = 0; k < nin; k++) sizes[k] = in[k]->dims[info.axis];
  return NULL;
}

dvm_status *dvm_gen_split_extents(const dvm_tensor *x, dvm_tensor *const *out, int nout,
                                  const dvm_value *attrs, int nattrs, long long *dims,
                                  long long *sizes) {
  dvm_value v[4] = {dvm_value_tensor((dvm_tensor *)x)}; /* read only */
  int64_t s[DVM_GEN_MAX_OUT], od[DVM_MAX_RANK];
  int axis;
  if (nattrs < 1 || nattrs > 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a split takes 1 to 3 attributes ([split,] axis[, "
                          "num_outputs]), got %d", nattrs);
  if (nout < 1 || nout > DVM_GEN_MAX_OUT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a split into %d outputs (1..%d)", nout, DVM_GEN_MAX_OUT);
  for (int k = 0; k < nattrs; k++) v[1 + k] = attrs[k];
  dvm_status *st = dvm_split_infer(v, 1 + nattrs, nout, &axis, s);
  if (st) return dvm_status_annotate(st, "gen");
  memcpy(od, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int k = 0; k < nout && !st; k++) {
    od[axis] = sizes[k] = s[k];
    st = check_output(out[k], x->rank, od, "the split");
    if (st) st = dvm_status_annotate(st, "output %d", k);
  }
  if (!st) axis_dims(x, axis, dims);
  return st;
}

dvm_status *dvm_gen_gather_extents(const dvm_tensor *data, const dvm_tensor *idx, const dvm_tensor *y,
                                   const dvm_value *attrs, int nattrs, long long *dims,
                                   long long *size) {
  dvm_value v[3] = {dvm_value_tensor((dvm_tensor *)data), dvm_value_tensor((dvm_tensor *)idx)};
  if (nattrs > 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a gather takes at most one attribute (the "
                          "axis), got %d", nattrs);
  if (nattrs) v[2] = attrs[0];
  dvm_gather_info info;
  dvm_status *st = dvm_gather_infer(v, 2 + nattrs, &info);
  if (st) return dvm_status_annotate(st, "gen");
  if ((st = check_output(y, info.rank, info.dims, "the gather"))) return st;
  axis_dims(data, info.axis, dims);
  dims[DVM_GEN_MAX_RANK - 2] = dvm_tensor_numel(idx); /* the output's m */
  *size = data->dims[info.axis];
  return NULL;
}

/* dims[3..5] and the WINDOW rows of geom: window w of x into y over the
 * columns d, h, w (1-D and 2-D with leading 1s); the rest of geom 0. */
static void window_rows(const dvm_window *w, const dvm_tensor *x, const dvm_tensor *y, long long *dims,
                        long long (*geom)[DVM_GEN_MAX_RANK]) {
  int lead = 3 - w->n; /* spatial dims of 1 in front */
  memset(geom, 0, sizeof(long long) * DVM_GEN_GEOM_ROWS * DVM_GEN_MAX_RANK);
  for (int d = 0; d < 3; d++) {
    int i = d - lead;
    dims[3 + d] = i < 0 ? 1 : y->dims[2 + i];
    geom[DVM_GEN_WIN_IN][3 + d] = i < 0 ? 1 : x->dims[2 + i];
    geom[DVM_GEN_WIN_KERNEL][3 + d] = i < 0 ? 1 : w->kernel[i];
    geom[DVM_GEN_WIN_STRIDE][3 + d] = i < 0 ? 1 : w->stride[i];
    geom[DVM_GEN_WIN_DILATION][3 + d] = i < 0 ? 1 : w->dilation[i];
    geom[DVM_GEN_WIN_PAD][3 + d] = i < 0 ? 0 : w->pad_begin[i];
    geom[DVM_GEN_WIN_PADDED][3 + d] = i < 0 ? 1 : x->dims[2 + i] + w->pad_end[i];
  }
}

dvm_status *dvm_gen_window_geometry(const char *op, const dvm_tensor *x, const dvm_tensor *y,
                                    const dvm_value *attrs, int nattrs, long long *dims,
                                    long long (*geom)[DVM_GEN_MAX_RANK]) {
  dvm_window w;
  int64_t want[DVM_MAX_RANK];
  if (nattrs != 6)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: %s takes 6 attributes, got %d", op, nattrs);
  dvm_status *st = dvm_pool_setup(op, x->rank, x->dims, attrs, nattrs, &w, want);
  if (st) return dvm_status_annotate(st, "gen");
  if (attrs[5].u.i != 0 && attrs[5].u.i != 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: %s: attribute 6 must be 0 or 1, got %lld", op,
                          (long long)attrs[5].u.i);
  if ((st = check_output(y, x->rank, want, op))) return st;
  window_rows(&w, x, y, dims, geom);
  dims[0] = dims[1] = 1;
  dims[2] = y->dims[0] * y->dims[1];
  geom[DVM_GEN_WIN_FLAGS][0] = attrs[5].u.i;
  return NULL;
}

dvm_status *dvm_gen_resize_geometry(const dvm_tensor *x, const dvm_tensor *y, const dvm_value *attrs,
                                    int nattrs, long long *dims, long long (*geom)[DVM_GEN_MAX_RANK],
                                    double (*real)[DVM_GEN_MAX_RANK]) {
  dvm_resize r;
  int64_t want[DVM_MAX_RANK];
  dvm_status *st = dvm_resize_setup(x->rank, x->dims, attrs, nattrs, &r, want);
  if (st) return dvm_status_annotate(st, "gen");
  if ((st = check_copy(y, x->rank, want, "the resize"))) return st;
  if (r.mode == DVM_RESIZE_CUBIC || (r.mode == DVM_RESIZE_LINEAR && (r.antialias || r.exclude_outside)) ||
      r.coord == DVM_RESIZE_TF_CROP_AND_RESIZE)
    return dvm_status_new(DVM_UNIMPLEMENTED, "gen: a generated resize is nearest, or linear without "
                          "antialias or exclude_outside, and not tf_crop_and_resize");
  if (r.mode == DVM_RESIZE_LINEAR && x->dtype != DVM_F32)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a linear resize of %s (f32 only, as on the CPU)",
                          dvm_dtype_name((dvm_dtype)x->dtype));
  int lead = DVM_GEN_MAX_RANK - x->rank;
  memset(geom, 0, sizeof(long long) * DVM_GEN_GEOM_ROWS * DVM_GEN_MAX_RANK);
  for (int d = 0; d < DVM_GEN_MAX_RANK; d++) {
    int i = d - lead;
    dims[d] = i < 0 ? 1 : y->dims[i];
    geom[DVM_GEN_RSZ_IN][d] = i < 0 ? 1 : x->dims[i];
    /* copied as is, whatever the coordinate mode (the CPU kernel's rule) */
    geom[DVM_GEN_RSZ_COPY][d] = i < 0 || (x->dims[i] == y->dims[i] && r.scale[i] == 1);
    real[DVM_GEN_RSZ_SCALE][d] = i < 0 ? 1 : r.scale[i];
    real[DVM_GEN_RSZ_LENGTH][d] = i < 0 ? 1 : r.length[i];
  }
  geom[DVM_GEN_RSZ_MODE][0] = r.mode;
  geom[DVM_GEN_RSZ_MODE][1] = r.coord;
  geom[DVM_GEN_RSZ_MODE][2] = r.nearest;
  return NULL;
}

dvm_status *dvm_gen_conv_geometry(bool transpose, dvm_tensor *const *in, int nin, const dvm_tensor *y,
                                  const dvm_value *attrs, int nattrs, long long *dims,
                                  long long (*geom)[DVM_GEN_MAX_RANK], double (*real)[DVM_GEN_MAX_RANK]) {
  const char *op = transpose ? "conv_transpose" : nattrs == 4 ? "conv" : "fused_conv";
  if (transpose && (nin < 2 || nin > 3 || nattrs != 5))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a conv_transpose of %d inputs and %d attributes (X, W[, B] "
                          "and 5)", nin, nattrs);
  if (!transpose &&
      (nin < 2 || nin > 4 || (nin == 4 && nattrs == 4) || (nattrs != 4 && nattrs != 4 + DVM_CONV_EPILOGUE_ATTRS)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: a conv of %d inputs and %d attributes (conv: X, W[, B] "
                          "and 4; fused_conv: X, W[, B[, Z]] and %d)", nin, nattrs, 4 + DVM_CONV_EPILOGUE_ATTRS);
  const dvm_tensor *x = in[0], *w = in[1], *b = nin > 2 ? in[2] : NULL;
  dvm_window win;
  int64_t group, want[DVM_MAX_RANK];
  dvm_status *st = dvm_conv_setup(transpose, x->rank, x->dims, w->rank, w->dims, b ? b->rank : -1,
                                  b ? b->dims : NULL, attrs, transpose ? 5 : 4, &win, &group, want);
  if (st) return dvm_status_annotate(st, "gen");
  if ((st = check_output(y, x->rank, want, op))) return st;
  if (nin == 4 && (in[3]->rank != y->rank || memcmp(in[3]->dims, y->dims, sizeof(int64_t) * (size_t)y->rank))) {
    char zs[96], ys[96];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "gen: fused_conv: Z is %s, not the output's %s",
                          dvm_shape_format(zs, sizeof zs, DVM_F32, in[3]->rank, in[3]->dims),
                          dvm_shape_format(ys, sizeof ys, DVM_F32, y->rank, y->dims));
  }
  /* the epilogue: identity, unless fused_conv's attributes say (ops/cpu/conv.c) */
  dvm_conv_epilogue e;
  if ((st = dvm_conv_epilogue_attrs(op, attrs, transpose ? 4 : nattrs, &e))) return dvm_status_annotate(st, "gen");
  if (e.layout)
    return dvm_status_new(DVM_UNIMPLEMENTED, "gen: %s: layout %lld (channels last) has no generated kernel", op,
                          (long long)e.layout);
  double v[4] = {e.alpha, e.beta, e.post_scale, e.post_shift};
  int64_t act = e.act;
  window_rows(&win, x, y, dims, geom);
  dims[0] = 1, dims[1] = y->dims[0], dims[2] = y->dims[1];
  geom[DVM_GEN_CONV_SHAPE][0] = x->dims[1];
  geom[DVM_GEN_CONV_SHAPE][1] = y->dims[1];
  geom[DVM_GEN_CONV_SHAPE][2] = group;
  geom[DVM_GEN_CONV_SHAPE][3] = act;
  for (int k = 0; k < 4; k++) real[0][k] = v[k];
  return NULL;
}

dvm_status *dvm_gen_nbits_geometry(const dvm_kernel_args *a, long long (*geom)[DVM_GEN_MAX_RANK]) {
  dvm_nbits_call c;
  dvm_status *st = dvm_nbits_check(a, &c);
  if (st) return dvm_status_annotate(st, "gen");
  long long *g = geom[DVM_GEN_NBITS];
  g[DVM_GEN_NBITS_K] = c.k, g[DVM_GEN_NBITS_N] = c.n, g[DVM_GEN_NBITS_BITS] = c.bits;
  g[DVM_GEN_NBITS_BLOCK] = c.block, g[DVM_GEN_NBITS_KB] = c.kb, g[DVM_GEN_NBITS_ZP] = c.zp;
  g[DVM_GEN_NBITS_BIAS] = c.bias;
  return NULL;
}
