/* Convolutions with ONNX semantics, f32, through oneDNN's convolution and
 * deconvolution primitives (1-D, 2-D and 3-D, groups, dilations, asymmetric
 * pads), and the integer convolution of ConvInteger and QLinearConv
 * (dvm_cpu_conv_s8, conv.h: X u8 or s8 with a zero point, W s8, Y s32)
 * through the same cache, units and kept forms of W. Geometry and checks
 * are shapefuncs/window.h's.
 *
 *   conv(in: X [N, C, s...], W [M, C/group, k...], B [M] optional;
 *        attrs: strides:shape, pads:shape, dilations:shape, group:int)
 *        -> Y [N, M, o...]
 *   conv_transpose(in: X [N, C, s...], W [C, M/group, k...], B [M] optional;
 *        attrs: strides:shape, pads:shape, dilations:shape, group:int,
 *        output_padding:shape) -> Y [N, M, o...]
 *
 *   fused_conv(in: X, W, B optional, Z optional (with B); attrs: conv's,
 *        then activation:int, alpha:float, beta:float, post_scale:float,
 *        post_shift:float, layout:int, algo:int) -> Y
 *     Y = post_scale act(conv(X, W, B) + Z) + post_shift (Z of Y's dims:
 *     ONNX Runtime's FusedConv input Z, the residual Add of pass conv_add),
 *     act by activation: 0 identity, 1 relu, 2 tanh, 3 sigmoid, 4 leaky relu
 *     (slope alpha, NaN: 0.01), 5 clip to [alpha, beta] (NaN: unbounded),
 *     6 hard sigmoid max(0, min(1, alpha x + beta)) (NaN: 0.2, 0.5),
 *     7 hard swish x max(0, min(1, x / 6 + 1 / 2)), 8 swish x sigmoid(x);
 *     oneDNN post-ops, applied while Y is in cache (FusedConv, pass conv_act).
 *     layout: bit 0 (LAYOUT_X_LAST) X is stored channels last ([N, s..., C]
 *     in memory, its dims still [N, C, s...]), bit 1 (LAYOUT_Y_LAST) Y is
 *     to be (pass conv_nhwc: between convolutions, the layout oneDNN's
 *     kernels use, so no reorder on either side), bit 2 (LAYOUT_Z_LAST) Z
 *     is. Z is copied (reordered) into the memory the conv writes, then
 *     oneDNN's sum post-op adds the conv to it (its binary add post-op
 *     would read Z in place, but oneDNN 2.6's brgconv refuses it: its GEMM
 *     conv took 5 times as long).
 *     algo: 0 oneDNN's choice (direct), 1 Winograd where oneDNN has it for
 *     the call (2-D 3x3, stride 1, no dilation or groups; its AVX-512
 *     kernels: F(2x2, 3x3) or F(4x4, 3x3) on nChw16c), else as 0 (pass
 *     conv_winograd; half the time of the direct kernel on ResNet's 3x3
 *     convs, with about twice its rounding error: docs/performance.md).
 *
 * 1 to 3 spatial dims; pads are [begins..., ends...]; an empty strides,
 * pads, dilations or output_padding means the ONNX default. ONNX auto_pad
 * and ConvTranspose output_shape are resolved into pads by the compiler
 * (dvm_window_auto_pads, dvm_window_transpose_pads). Shape functions
 * "conv" and "conv_transpose".
 *
 * oneDNN picks its own (blocked) layouts for the call's shape: X and W are
 * reordered into them and Y back out of them on every call (W only once
 * when it is a module constant: see wforms below), which measured
 * faster than its kernels for the plain layouts (gemm-based) even with the
 * copies, except for pointwise (1x1, stride 1, unpadded) convs, which run as
 * a GEMM on X and Y in place. A conv runs as single-threaded oneDNN calls on
 * views (an image times a band of output rows or a slice of output
 * channels) spread over dvm's thread pool (run_split), conv_transpose too.
 * A primitive and its reorders cost milliseconds to make (JIT), so
 * they are cached per shape, attributes and thread count in a small LRU
 * shared by all threads (modules and their kernels are shared; VMs are per
 * thread). The blocked copies and oneDNN's scratchpad live in a per-thread
 * workspace that grows to the largest call and is kept, so a call allocates
 * nothing large; the memory objects that hand oneDNN a call's tensors are
 * kept per thread and primitive too (thread_ctx), so a call allocates
 * nothing at all. oneDNN handles every case the checks admit; empty
 * outputs and empty channel sums (C = 0) are filled here without it. */
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/conv_dw.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/par.h"
#include "ops/cpu/weight_mem.h"
#include "ops/kargs.h"
#include "shapefuncs/shape.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/window.h"

/* Primitives kept; each holds JIT code (tens of KB). A split conv has up to
 * three (first, middle and last bands): PP-OCR det uses 83. */
#define CACHE_MAX 192

enum { SRC, WEI, DST, NBUF }; /* the tensors oneDNN may want in its own layout */

enum { LAYOUT_X_LAST = 1, LAYOUT_Y_LAST = 2, LAYOUT_Z_LAST = 4 }; /* fused_conv's layout bits: channels last */


typedef struct key {
  int32_t transpose, rank, bias, threads, z; /* z: fused_conv's Z given */
  int32_t dt, xzp; /* X's dnnl_data_type_t (u8 or s8: the integer conv); xzp: with X's zero point */
  int32_t layout;                         /* LAYOUT_* bits */
  int32_t algo;                           /* fused_conv's algo: 1 Winograd where oneDNN has it */
  int32_t act;                            /* the epilogue: ACT_*, */
  float alpha, beta, post_scale, post_shift; /* its parameters resolved */
  /* x, w, y: the dims of one call of the primitive; cx and cy the channel
   * counts of the tensors X and Y it reads and writes a view of */
  int64_t x[DVM_MAX_RANK], w[DVM_MAX_RANK], y[DVM_MAX_RANK], group, cx, cy;
  int64_t hx, hy; /* the extents of X's and Y's first spatial dim (the view's is x[2], y[2]) */
  int64_t stride[DVM_WINDOW_MAX], dilation[DVM_WINDOW_MAX];
  int64_t pad_begin[DVM_WINDOW_MAX], pad_end[DVM_WINDOW_MAX];
} key;

typedef struct entry {
  key k;
  uint64_t id; /* unique among the entries ever made: names its memory objects in a thread_ctx */
  uint64_t hash; /* key_hash(&k) */
  struct entry *prev, *next; /* LRU order, most recent first */
  struct entry *chain;       /* the next in its bucket */
  int refs;                  /* calls using it now; evicted only at 0 */
  dnnl_primitive_t conv;
  dnnl_memory_desc_t plain[NBUF], inner[NBUF], bias, z; /* z: Z's view (k.z) */
  dnnl_primitive_t reorder[NBUF]; /* plain <-> inner; NULL when the same */
  bool blk16[NBUF], zblk16;       /* that reorder (or zcopy's) is channels last <-> nChw16c: blk16_copy's */
  dnnl_primitive_t zcopy;         /* Z's view into the memory the conv writes (k.z) */
  size_t bytes[NBUF];             /* workspace for inner copies; 0 when plain */
  size_t scratch;                 /* the largest scratchpad of its primitives */
  bool crop;                      /* Y has elements past the window: bias them first */
} entry;

/* Buckets of entries by key_hash: a model's convs come round in turn, so
 * a walk of the LRU list passed most entries on every call (a cache miss
 * each: 6% of MobileNetV2's time at 64x64, and its keys compared
 * bytewise another 3%). */
#define BUCKETS 256

static struct {
  pthread_mutex_t lock;
  entry *head, *tail;
  int n;
  uint64_t made; /* entries made so far: the next one's id */
  entry *bucket[BUCKETS];
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_status_t engine_status;

static void engine_init(void) { engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0); }

/* The oneDNN memory objects of one entry's calls (exec's): X, W, Y as
 * given, their copies in the entry's layouts, B, Z, X's zero point, the
 * scratchpad, W's kept form. */
enum { MEM_INNER = NBUF, MEM_BIAS = 2 * NBUF, MEM_Z, MEM_ZP, MEM_SCRATCH, MEM_KEPT, NMEM };
#define MEM_SLOTS 256

typedef struct mem_slot {
  uint64_t id; /* the entry's; 0: none */
  dnnl_memory_t m[NMEM];
  void *data[NMEM]; /* what each holds (asking oneDNN took 4% of MobileNetV2's time at 64x64) */
} mem_slot;

/* Per thread: a stream (oneDNN streams are not shared between threads),
 * the workspace, and the memory objects of the entries it ran, by entry id
 * (one entry a slot: a call of an entry whose slot holds another's makes
 * them again); freed when the thread ends. Making and destroying the
 * objects on every call (a malloc'd object each, aligned) took a quarter
 * of MobileNetV2's time at 1x3x64x64; a kept one only takes the call's
 * pointer. */
typedef struct thread_ctx {
  dnnl_stream_t stream;
  void *ws;
  size_t ws_size;
  mem_slot slot[MEM_SLOTS];
} thread_ctx;

static void slot_clear(mem_slot *s) {
  for (int i = 0; i < NMEM; i++)
    if (s->m[i]) dnnl_memory_destroy(s->m[i]);
  memset(s, 0, sizeof *s);
}

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static int ctx_key_failed;

static void ctx_free(void *p) {
  thread_ctx *c = p;
  for (int i = 0; i < MEM_SLOTS; i++) slot_clear(&c->slot[i]);
  if (c->stream) dnnl_stream_destroy(c->stream);
  free(c->ws);
  free(c);
}

static void ctx_init(void) { ctx_key_failed = pthread_key_create(&ctx_key, ctx_free) != 0; }

static dvm_status *dnnl_error(const char *op, const char *what, dnnl_status_t s) {
  dvm_code code = s == dnnl_out_of_memory   ? DVM_OUT_OF_MEMORY
                  : s == dnnl_unimplemented ? DVM_UNIMPLEMENTED
                                            : DVM_INTERNAL;
  return dvm_status_new(code, "%s: oneDNN %s failed: %s", op, what, dnnl_status2str(s));
}

#define DNNL_TRY(op, what, call)     \
  do {                               \
    dnnl_status_t s_ = (call);       \
    if (s_ != dnnl_success) {        \
      st = dnnl_error(op, what, s_); \
      goto out;                      \
    }                                \
  } while (0)

/* The calling thread's context with a workspace of at least `size` bytes. */
static dvm_status *thread_ctx_get(const char *op, size_t size, thread_ctx **out) {
  pthread_once(&ctx_once, ctx_init);
  if (ctx_key_failed) return dvm_status_new(DVM_INTERNAL, "%s: pthread_key_create failed", op);
  thread_ctx *c = pthread_getspecific(ctx_key);
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for a thread context", op);
    dnnl_status_t s = dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags);
    if (s != dnnl_success || pthread_setspecific(ctx_key, c) != 0) {
      ctx_free(c);
      return s != dnnl_success ? dnnl_error(op, "stream creation", s)
                               : dvm_status_new(DVM_INTERNAL, "%s: pthread_setspecific failed", op);
    }
  }
  if (c->ws_size < size) {
    free(c->ws);
    c->ws_size = 0;
    c->ws = aligned_alloc(64, (size + 63) & ~(size_t)63);
    if (!c->ws)
      return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for a %zu-byte workspace", op, size);
    c->ws_size = size;
  }
  *out = c;
  return NULL;
}

/* A plain descriptor of type dt of dims laid out as a row-major array of
 * dims `full` (>= dims: a view into it), except that dims `swap` and swap +
 * 1 are stored in the other order when swap >= 0 (conv_transpose weights),
 * and dim 1 (channels) is stored last when `last` (NHWC). */
static dnnl_status_t plain_md(dnnl_memory_desc_t *md, dnnl_data_type_t dt, int nd, const dnnl_dim_t *dims,
                              const dnnl_dim_t *full, int swap, bool last) {
  int order[DVM_MAX_RANK + 1];
  dnnl_dims_t strides;
  for (int i = 0; i < nd; i++) order[i] = i;
  if (swap >= 0) {
    order[swap] = swap + 1;
    order[swap + 1] = swap;
  }
  if (last) { /* N, spatial..., C */
    for (int i = 1; i < nd - 1; i++) order[i] = i + 1;
    order[nd - 1] = 1;
  }
  dnnl_dim_t s = 1, dense = 1;
  for (int i = nd - 1; i >= 0; i--) {
    /* a dim of 1 (a view's one image) gets the dense stride, so that
     * oneDNN sees a plain layout and picks its fast kernels */
    strides[order[i]] = dims[order[i]] == 1 ? dense : s;
    s *= full[order[i]];
    dense *= dims[order[i]];
  }
  return dnnl_memory_desc_init_by_strides(md, nd, dims, dt, strides);
}

/* ---- channels last <-> nChw16c ---------------------------------------- */

/* oneDNN's reorders between NHWC and its 16-channel blocks (around each
 * Winograd conv reading or writing a channels-last tensor) ran at a fifth
 * of memcpy's speed (1.5 ms for PP-OCRv4 det's [1, 96, 160, 160]); these
 * are copies of 64-byte channel rows. */

/* md is a 4-D f32 layout with C contiguous (NHWC, any strides: a view). */
static bool nhwc_md(const dnnl_memory_desc_t *md) {
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  return md->ndims == 4 && md->data_type == dnnl_f32 && md->format_kind == dnnl_blocked && !b->inner_nblks &&
         b->strides[1] == 1 && !md->offset0;
}

/* md is dense nChw16c of dims d (C padded to 16). */
static bool blk16_md(const dnnl_memory_desc_t *md, const dnnl_dim_t *d) {
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  dnnl_dim_t cb = (d[1] + 15) / 16;
  return md->ndims == 4 && md->data_type == dnnl_f32 && md->format_kind == dnnl_blocked && b->inner_nblks == 1 &&
         b->inner_blks[0] == 16 && b->inner_idxs[0] == 1 && !md->offset0 && md->padded_dims[1] == cb * 16 &&
         b->strides[3] == 16 && b->strides[2] == d[3] * 16 && b->strides[1] == d[2] * d[3] * 16 &&
         b->strides[0] == cb * d[2] * d[3] * 16;
}

/* Copies between p (nhwc_md `plain`) and b (blk16_md of the same dims):
 * into b (padding channels 0) when to_blk, else into p. */
static void blk16_copy(const dnnl_memory_desc_t *plain, float *p, float *b, bool to_blk) {
  const dnnl_dim_t *d = plain->dims, *s = plain->format_desc.blocking.strides;
  dnnl_dim_t cb = (d[1] + 15) / 16;
  for (dnnl_dim_t n = 0; n < d[0]; n++)
    for (dnnl_dim_t h = 0; h < d[2]; h++)
      for (dnnl_dim_t w = 0; w < d[3]; w++) {
        float *row = p + n * s[0] + h * s[2] + w * s[3];
        for (dnnl_dim_t c = 0; c < cb; c++) {
          float *blk = b + (((n * cb + c) * d[2] + h) * d[3] + w) * 16;
          dnnl_dim_t k = d[1] - c * 16 < 16 ? d[1] - c * 16 : 16;
          if (k == 16) { /* (a constant size: vector moves) */
            memcpy(to_blk ? blk : row + c * 16, to_blk ? row + c * 16 : blk, 16 * sizeof(float));
          } else if (to_blk) {
            memcpy(blk, row + c * 16, (size_t)k * sizeof(float));
            memset(blk + k, 0, (size_t)(16 - k) * sizeof(float));
          } else {
            memcpy(row + c * 16, blk, (size_t)k * sizeof(float));
          }
        }
      }
}

static void entry_free(entry *e) {
  if (!e) return;
  if (e->conv) dnnl_primitive_destroy(e->conv);
  if (e->zcopy) dnnl_primitive_destroy(e->zcopy);
  for (int i = 0; i < NBUF; i++)
    if (e->reorder[i]) dnnl_primitive_destroy(e->reorder[i]);
  free(e);
}

/* The scratchpad a primitive descriptor asks for. */
static size_t scratch_size(const_dnnl_primitive_desc_t pd) {
  return dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
}

typedef struct post_op {
  dnnl_alg_kind_t alg;
  float a, b;
} post_op;

/* The epilogue of k as oneDNN post-ops on attr (none for a plain conv).
 * oneDNN 2.6's JIT kernels keep one set of parameters per algorithm of a
 * chain (its post-ops injector maps each algorithm to one injector), so
 * no algorithm appears twice: a hard sigmoid followed by post_scale and
 * post_shift is clipped first, to the x that map into [0, 1], then one
 * linear step of both (the result rounds differently from clip(alpha x +
 * beta, 0, 1) by an ulp or so). */
static dnnl_status_t set_post_ops(dnnl_primitive_attr_t attr, const key *k) {
  bool post = k->post_scale != 1 || k->post_shift != 0;
  if (k->act == DVM_CONV_IDENTITY && !post && !k->z) return dnnl_success;
  dnnl_post_ops_t po;
  dnnl_status_t s = dnnl_post_ops_create(&po);
  if (s != dnnl_success) return s;
  if (k->z) s = dnnl_post_ops_append_sum(po, 1.0f); /* Y = conv + B + Y, Y holding Z (exec) */
  post_op ops[3];
  int n = 0;
  float ps = k->post_scale, psh = k->post_shift;
  switch (k->act) {
  case DVM_CONV_RELU: ops[n++] = (post_op){dnnl_eltwise_relu, 0, 0}; break;
  case DVM_CONV_TANH: ops[n++] = (post_op){dnnl_eltwise_tanh, 0, 0}; break;
  case DVM_CONV_SIGMOID: ops[n++] = (post_op){dnnl_eltwise_logistic, 0, 0}; break;
  case DVM_CONV_LEAKY_RELU: ops[n++] = (post_op){dnnl_eltwise_relu, k->alpha, 0}; break;
  case DVM_CONV_CLIP: ops[n++] = (post_op){dnnl_eltwise_clip_v2, k->alpha, k->beta}; break;
  case DVM_CONV_HARD_SIGMOID:
    if (!post) {
      ops[n++] = (post_op){dnnl_eltwise_linear, k->alpha, k->beta};
      ops[n++] = (post_op){dnnl_eltwise_clip_v2, 0, 1};
      break;
    }
    if (k->alpha == 0) { /* a constant */
      psh += ps * fminf(fmaxf(k->beta, 0), 1);
      ps = 0;
      break;
    }
    if (k->alpha > 0) ops[n++] = (post_op){dnnl_eltwise_clip_v2, -k->beta / k->alpha, (1 - k->beta) / k->alpha};
    else ops[n++] = (post_op){dnnl_eltwise_clip_v2, (1 - k->beta) / k->alpha, -k->beta / k->alpha};
    psh += ps * k->beta;
    ps *= k->alpha;
    break;
  case DVM_CONV_HARD_SWISH: ops[n++] = (post_op){dnnl_eltwise_hardswish, 0, 0}; break;
  case DVM_CONV_SWISH: ops[n++] = (post_op){dnnl_eltwise_swish, 1, 0}; break;
  default: break;
  }
  if (post) ops[n++] = (post_op){dnnl_eltwise_linear, ps, psh};
  for (int i = 0; i < n && s == dnnl_success; i++) s = dnnl_post_ops_append_eltwise(po, 1.0f, ops[i].alg, ops[i].a, ops[i].b);
  if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
  dnnl_post_ops_destroy(po);
  return s;
}

/* A pointwise conv (1x1, stride 1, unpadded, no groups) with no epilogue
 * is a GEMM over the plain layouts, which measured faster than oneDNN's
 * blocked 1x1 kernel with the copies in and out; any other shape runs
 * faster blocked. Not with an epilogue: the GEMM-based conv applies
 * post-ops element by element (PP-OCR det took 1.7 times the CPU time),
 * the blocked 1x1 kernel in its JIT code. Nor with X or Y channels last:
 * the blocked kernel reads and writes NHWC itself (no copies), and the
 * units' channel slices of an NHWC tensor are strided. Nor on fewer than
 * GEMM_MIN_POINTS output points an image: the GEMM packs all of W for
 * those few columns on every call (MobileNetV2's last 1x1 conv, 112 ->
 * 1280 channels over 2x2, took three times as long as blocked:
 * docs/performance.md). */
enum { GEMM_MIN_POINTS = 32 };

static bool gemm_pointwise(const key *k) {
  bool pw = !k->transpose && !k->layout && !k->z && k->group == 1 && k->act == DVM_CONV_IDENTITY && k->post_scale == 1 &&
            k->post_shift == 0 && k->dt == dnnl_f32;
  int64_t points = 1;
  for (int i = 0; i < k->rank - 2; i++) {
    pw &= k->w[2 + i] == 1 && k->stride[i] == 1 && k->pad_begin[i] == 0 && k->pad_end[i] == 0;
    points *= k->y[2 + i];
  }
  return pw && points >= GEMM_MIN_POINTS;
}

/* A conv_transpose's end pad in spatial dim i as oneDNN counts it: the
 * ONNX end pad less output_padding, what makes the full output k->y;
 * negative where output_padding passes the pad. */
static int64_t transpose_end_pad(const key *k, int i) {
  return (k->x[2 + i] - 1) * k->stride[i] + (k->w[2 + i] - 1) * k->dilation[i] + 1 - k->pad_begin[i] - k->y[2 + i];
}

/* Whether md (of nd dims) is channels last: C innermost, unblocked. */
static bool channels_last_md(const dnnl_memory_desc_t *md) {
  const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
  return md->format_kind == dnnl_blocked && !b->inner_nblks && b->strides[1] == 1 && md->ndims > 2 &&
         md->dims[md->ndims - 1] > 1;
}

/* For a 1-D conv of channels-first X and Y for which oneDNN chose
 * channels last (its brgconv kernels), the same conv on its 16-channel
 * blocks (nCw16c) where oneDNN has a JIT kernel for it, else NULL: Y's
 * transposing reorder back to channels first took as long as the conv
 * (256 x 3000 floats: 1.7 ms against 1.9), a blocked one a fraction. Not
 * 2-D: there oneDNN has only its reference kernel blocked for some (a
 * 7x7 stem over 3 channels), and its channels-last choice was measured. */
static dnnl_primitive_desc_t blocked_instead(const_dnnl_primitive_desc_t pd, const key *k, const dnnl_memory_desc_t *any,
                                             dnnl_convolution_desc_t *d, const dnnl_memory_desc_t *bias,
                                             const dnnl_dim_t *stride, const dnnl_dim_t *dil, const dnnl_dim_t *pl,
                                             const dnnl_dim_t *pr, const_dnnl_primitive_attr_t attr) {
  if (k->rank != 3 || k->layout || k->dt != dnnl_f32 ||
      !channels_last_md(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0)))
    return NULL;
  dnnl_memory_desc_t src, dst;
  dnnl_primitive_desc_t out = NULL;
  const char *impl = "ref";
  if (dnnl_memory_desc_init_by_tag(&src, 3, any[SRC].dims, dnnl_f32, dnnl_aBc16b) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&dst, 3, any[DST].dims, dnnl_f32, dnnl_aBc16b) != dnnl_success ||
      dnnl_dilated_convolution_forward_desc_init(d, dnnl_forward_inference, dnnl_convolution_auto, &src, &any[WEI], bias,
                                                 &dst, stride, dil, pl, pr) != dnnl_success ||
      dnnl_primitive_desc_create(&out, d, attr, engine, NULL) != dnnl_success)
    return NULL;
  dnnl_primitive_desc_query(out, dnnl_query_impl_info_str, 0, &impl);
  if (strncmp(impl, "jit", 3) == 0) return out;
  dnnl_primitive_desc_destroy(out);
  return NULL;
}

/* Makes a primitive and its reorders for key k. */
static dvm_status *entry_make(const char *op, const key *k, entry **out) {
  dvm_status *st = NULL;
  dnnl_primitive_attr_t attr = NULL, cattr = NULL; /* the reorders', the conv's */
  dnnl_primitive_desc_t pd = NULL, rpd = NULL;
  entry *e = calloc(1, sizeof *e);
  if (!e) return dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for a primitive", op);
  e->k = *k;
  int nd = k->rank, n = nd - 2, grouped = k->group > 1;
  dnnl_dims_t xd, xfull, yd, yfull, wd, stride, dil, pl, pr;
  for (int i = 0; i < nd; i++) {
    xd[i] = xfull[i] = k->x[i];
    yd[i] = yfull[i] = k->y[i];
  }
  xfull[1] = k->cx;
  yfull[1] = k->cy;
  xfull[2] = k->hx;
  yfull[2] = k->hy;
  /* oneDNN weights are [G,] OC/G, IC/G, k...; ONNX conv_transpose stores IC before OC */
  int64_t ic = k->x[1], oc = k->y[1];
  wd[0] = k->group;
  wd[grouped] = oc / k->group;
  wd[grouped + 1] = ic / k->group;
  for (int i = 0; i < n; i++) {
    wd[grouped + 2 + i] = k->w[2 + i];
    stride[i] = k->stride[i];
    dil[i] = k->dilation[i] - 1; /* oneDNN counts the gaps */
    pl[i] = k->pad_begin[i];
    pr[i] = k->pad_end[i];
    if (!k->transpose) continue;
    /* conv_transpose: the end pad less output_padding, what makes the full
     * output k->y. oneDNN refuses some negative ones (from -stride on), so
     * those run with 0 into the part of Y the window reaches: the rest is
     * the bias alone. */
    pr[i] = transpose_end_pad(k, i);
    if (pr[i] < 0) {
      yd[2 + i] += pr[i];
      pr[i] = 0;
      e->crop = true;
    }
  }
  dnnl_dims_t bd = {oc}, wfull;
  for (int i = 0; i < nd + grouped; i++) wfull[i] = wd[i];
  /* a slice of a conv_transpose's output channels: ONNX W [C, M, k...] */
  if (k->transpose && !grouped) wfull[0] = k->cy;
  dnnl_memory_desc_t any[NBUF]; /* the layouts asked of oneDNN */
  const dnnl_dim_t *full[NBUF] = {xfull, wfull, yfull};
  const dnnl_dim_t *dims[NBUF] = {xd, wd, yd};
  int ndims[NBUF] = {nd, nd + grouped, nd};
  bool pointwise = gemm_pointwise(k);
  /* the integer conv: X u8 or s8, W s8, Y s32 */
  dnnl_data_type_t types[NBUF] = {k->dt, k->dt == dnnl_f32 ? dnnl_f32 : dnnl_s8, k->dt == dnnl_f32 ? dnnl_f32 : dnnl_s32};
  /* A conv_transpose to fewer output channels than a block (16) runs on
   * the plain layouts too: blocked, Y is padded to 16 channels, and PP-OCR
   * det's last one (24 -> 1 channel, 320x320 -> 640x640) took 12 to 60 ms
   * there against 0.7 ms as a GEMM (oneDNN's gemm deconvolution). */
  bool narrow = k->transpose && oc < 16 && !e->crop; /* (not on a view of Y: its GEMM writes Y densely) */
  for (int i = 0; i < NBUF; i++) {
    DNNL_TRY(op, "memory descriptor",
             plain_md(&e->plain[i], types[i], ndims[i], dims[i], full[i], i == WEI && k->transpose ? grouped : -1,
                      (i == SRC && k->layout & LAYOUT_X_LAST) || (i == DST && k->layout & LAYOUT_Y_LAST)));
    any[i] = e->plain[i];
    if ((pointwise || narrow) && i != WEI) continue;
    DNNL_TRY(
        op, "memory descriptor",
        dnnl_memory_desc_init_by_tag(&any[i], ndims[i], dims[i], types[i], dnnl_format_tag_any));
  }
  DNNL_TRY(op, "memory descriptor",
           dnnl_memory_desc_init_by_tag(&e->bias, 1, bd, dnnl_f32, dnnl_a));
  DNNL_TRY(op, "attribute creation", dnnl_primitive_attr_create(&attr));
  DNNL_TRY(op, "scratchpad mode",
           dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  DNNL_TRY(op, "attribute creation", dnnl_primitive_attr_clone(&cattr, attr));
  if (k->z)
    DNNL_TRY(op, "memory descriptor", plain_md(&e->z, dnnl_f32, nd, yd, yfull, -1, k->layout & LAYOUT_Z_LAST));
  DNNL_TRY(op, "post-ops", set_post_ops(cattr, k));
  if (k->xzp) { /* its value given at each call */
    int32_t runtime = DNNL_RUNTIME_S32_VAL;
    DNNL_TRY(op, "zero point", dnnl_primitive_attr_set_zero_points(cattr, DNNL_ARG_SRC, 1, 0, &runtime));
  }
  /* conv_transpose's bias is added by add_bias, after the call */
  const dnnl_memory_desc_t *bias = k->bias && !k->transpose ? &e->bias : NULL;
  if (k->transpose) {
    dnnl_deconvolution_desc_t d;
    DNNL_TRY(op, "deconvolution descriptor",
             dnnl_dilated_deconvolution_forward_desc_init(
                 &d, dnnl_forward_inference, dnnl_deconvolution_direct, &any[SRC], &any[WEI], bias,
                 &any[DST], stride, dil, pl, pr));
    DNNL_TRY(op, "deconvolution primitive descriptor",
             dnnl_primitive_desc_create(&pd, &d, cattr, engine, NULL));
  } else {
    dnnl_convolution_desc_t d;
    /* Winograd where asked and oneDNN has it for this call, else its choice */
    bool wino = k->algo == 1 && nd == 4 && !grouped && k->w[2] == 3 && k->w[3] == 3;
    for (int i = 0; i < n; i++) wino &= k->stride[i] == 1 && k->dilation[i] == 1;
    /* and where an image's output has at least half as many pixels as channels:
     * below that the transformed W (16/9 of W's bytes and more, kept
     * per layout) costs more memory than the call saves time (ResNet's
     * 512-channel 7x7 and 10x15 stage: docs/performance.md) */
    wino &= 2 * k->hy * k->y[3] >= k->cy;
    if (wino && dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_winograd,
                                                          &any[SRC], &any[WEI], bias, &any[DST], stride, dil, pl,
                                                          pr) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &d, cattr, engine, NULL) != dnnl_success)
      pd = NULL;
    if (!wino || !pd) {
      DNNL_TRY(op, "convolution descriptor",
               dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_auto, &any[SRC],
                                                          &any[WEI], bias, &any[DST], stride, dil, pl, pr));
      DNNL_TRY(op, "convolution primitive descriptor", dnnl_primitive_desc_create(&pd, &d, cattr, engine, NULL));
    }
    dnnl_primitive_desc_t blocked = pointwise ? NULL : blocked_instead(pd, k, any, &d, bias, stride, dil, pl, pr, cattr);
    if (blocked) {
      dnnl_primitive_desc_destroy(pd);
      pd = blocked;
    }
  }
  e->scratch = scratch_size(pd);
  static const dnnl_query_t queries[NBUF] = {dnnl_query_src_md, dnnl_query_weights_md,
                                             dnnl_query_dst_md};
  for (int i = 0; i < NBUF; i++) {
    e->inner[i] = *dnnl_primitive_desc_query_md(pd, queries[i], 0);
    if (dnnl_memory_desc_equal(&e->inner[i], &e->plain[i])) continue;
    e->bytes[i] = (dnnl_memory_desc_get_size(&e->inner[i]) + 63) & ~(size_t)63;
    const dnnl_memory_desc_t *from = i == DST ? &e->inner[i] : &e->plain[i],
                             *to = i == DST ? &e->plain[i] : &e->inner[i];
    DNNL_TRY(op, "reorder primitive descriptor",
             dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, attr));
    size_t s = scratch_size(rpd);
    if (s > e->scratch) e->scratch = s;
    DNNL_TRY(op, "reorder primitive", dnnl_primitive_create(&e->reorder[i], rpd));
    dnnl_primitive_desc_destroy(rpd);
    rpd = NULL;
    e->blk16[i] = i != WEI && nhwc_md(&e->plain[i]) && blk16_md(&e->inner[i], e->plain[i].dims);
  }
  if (k->z) {
    DNNL_TRY(op, "reorder primitive descriptor",
             dnnl_reorder_primitive_desc_create(&rpd, &e->z, engine, e->reorder[DST] ? &e->inner[DST] : &e->plain[DST],
                                                engine, attr));
    size_t s = scratch_size(rpd);
    if (s > e->scratch) e->scratch = s;
    DNNL_TRY(op, "reorder primitive", dnnl_primitive_create(&e->zcopy, rpd));
    e->zblk16 = e->reorder[DST] && nhwc_md(&e->z) && blk16_md(&e->inner[DST], e->z.dims);
  }
  DNNL_TRY(op, "primitive creation", dnnl_primitive_create(&e->conv, pd));
out:
  if (rpd) dnnl_primitive_desc_destroy(rpd);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (cattr) dnnl_primitive_attr_destroy(cattr);
  if (st) {
    entry_free(e);
    e = NULL;
  }
  *out = e;
  return st;
}

static void lru_unlink(entry *e) {
  *(e->prev ? &e->prev->next : &cache.head) = e->next;
  *(e->next ? &e->next->prev : &cache.tail) = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push_front(entry *e) {
  e->next = cache.head;
  e->prev = NULL;
  if (cache.head) cache.head->prev = e;
  cache.head = e;
  if (!cache.tail) cache.tail = e;
}

_Static_assert(sizeof(key) % sizeof(uint64_t) == 0, "key_hash reads whole words");

/* A hash of k's bytes (key_init zeroes its padding). */
static uint64_t key_hash(const key *k) {
  uint64_t h = 0, w[sizeof *k / sizeof(uint64_t)];
  memcpy(w, k, sizeof w);
  for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
    h = (h ^ w[i]) * 0x9e3779b97f4a7c15u;
    h ^= h >> 29;
  }
  return h;
}

static entry *lru_find(const key *k, uint64_t hash) {
  for (entry *e = cache.bucket[hash % BUCKETS]; e; e = e->chain)
    if (e->hash == hash && memcmp(&e->k, k, sizeof *k) == 0) return e;
  return NULL;
}

static void bucket_remove(entry *e) {
  entry **p = &cache.bucket[e->hash % BUCKETS];
  while (*p != e) p = &(*p)->chain;
  *p = e->chain;
}

/* The cached primitive for k (made on a miss), held until cache_put. The
 * lock is not held while oneDNN generates code; if two threads miss on one
 * key, the first to insert wins and the other's copy is dropped. */
static dvm_status *cache_get(const char *op, const key *k, entry **out) {
  uint64_t hash = key_hash(k);
  pthread_mutex_lock(&cache.lock);
  entry *e = lru_find(k, hash);
  if (e) {
    lru_unlink(e);
    lru_push_front(e);
    e->refs++;
    pthread_mutex_unlock(&cache.lock);
    *out = e;
    return NULL;
  }
  pthread_mutex_unlock(&cache.lock);
  entry *made = NULL;
  dvm_status *st = entry_make(op, k, &made);
  if (st) return st;
  entry *drop = NULL;
  pthread_mutex_lock(&cache.lock);
  e = lru_find(k, hash);
  if (e) {
    lru_unlink(e);
    drop = made;
  } else {
    e = made;
    e->hash = hash;
    e->chain = cache.bucket[hash % BUCKETS];
    cache.bucket[hash % BUCKETS] = e;
    e->id = ++cache.made;
    cache.n++;
  }
  lru_push_front(e);
  e->refs++;
  /* evict the least recent unused entries beyond the limit */
  for (entry *v = cache.tail; v && cache.n > CACHE_MAX;) {
    entry *prev = v->prev;
    if (v->refs == 0) {
      lru_unlink(v);
      bucket_remove(v);
      cache.n--;
      v->next = drop; /* freed below, outside the lock */
      drop = v;
    }
    v = prev;
  }
  pthread_mutex_unlock(&cache.lock);
  while (drop) {
    entry *next = drop->next;
    entry_free(drop);
    drop = next;
  }
  *out = e;
  return NULL;
}

static void cache_put(entry *e) {
  pthread_mutex_lock(&cache.lock);
  e->refs--;
  pthread_mutex_unlock(&cache.lock);
}

/* ---- constant W, kept in oneDNN's layouts -------------------------------- */

/* The layout oneDNN wants W in depends on X's shape, the attributes and the
 * thread count, which the linker does not know; so the prepack hook only
 * gives a constant W this holder, and the first call that needs a layout
 * reorders W into it once and keeps it here for every later call, VM and
 * thread. A few layouts per W (a model calls with a few shape classes);
 * past those, W is reordered on each call as for a non-constant W. */
#define WFORMS_MAX 16

typedef struct wforms {
  pthread_mutex_t lock; /* guards n and f; a kept form is never changed */
  int n;
  struct {
    dnnl_memory_desc_t md;
    int64_t at; /* the first output channel of the slice of W it holds */
    void *data;
  } f[WFORMS_MAX];
} wforms;

static void wforms_free(void *p) {
  wforms *w = p;
  for (int i = 0; i < w->n; i++) free(w->f[i].data);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

static dvm_status *conv_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *attrs,
                                int nattrs, void **data, void (**free_data)(void *)) {
  if (input != 1 || t->dtype != DVM_F32 || t->rank < 3 || t->rank > 5) return NULL;
  wforms *w = dvm_cpu_conv_forms_new();
  if (!w) return dvm_status_new(DVM_OUT_OF_MEMORY, "conv: no memory for the forms of weight W");
  *data = w;
  *free_data = wforms_free;
  return NULL;
}

/* The slice of W from output channel `at` (memory `from`) in e's layout: a
 * kept form, or one made now by e's reorder; *out is NULL when all
 * WFORMS_MAX hold other slices or layouts. W's plain bytes stay: another
 * slice or layout is made from them, and a module's bytes are its own
 * memory, not a file's pages that could be read again (vm/module.c). */
static dvm_status *wforms_get(const char *op, wforms *w, const entry *e, int64_t at, dnnl_memory_t from,
                              dnnl_stream_t stream, dnnl_memory_t scratch, void **out) {
  dvm_status *st = NULL;
  dnnl_memory_t to = NULL;
  void *data = NULL;
  *out = NULL;
  pthread_mutex_lock(&w->lock);
  for (int i = 0; i < w->n && !*out; i++)
    if (w->f[i].at == at && dnnl_memory_desc_equal(&w->f[i].md, &e->inner[WEI])) *out = w->f[i].data;
  if (*out || w->n == WFORMS_MAX) goto out;
  data = dvm_weight_alloc(e->bytes[WEI]);
  if (!data) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for a %zu-byte form of W", op,
                        e->bytes[WEI]);
    goto out;
  }
  DNNL_TRY(op, "memory creation", dnnl_memory_create(&to, &e->inner[WEI], engine, data));
  dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}};
  DNNL_TRY(op, "reorder",
           dnnl_primitive_execute(e->reorder[WEI], stream, 2 + (scratch != NULL), r));
  DNNL_TRY(op, "stream wait", dnnl_stream_wait(stream));
  w->f[w->n].md = e->inner[WEI];
  w->f[w->n].at = at;
  w->f[w->n++].data = data;
  *out = data;
  data = NULL;
out:
  pthread_mutex_unlock(&w->lock);
  if (to) dnnl_memory_destroy(to);
  free(data);
  return st;
}

/* Checks a call and builds its cache key. */
/* fused_conv's epilogue attributes (after conv's four) into k. */
static dvm_status *epilogue_attrs(const dvm_kernel_args *a, key *k) {
  dvm_conv_epilogue e;
  dvm_status *st = dvm_conv_epilogue_attrs("fused_conv", a->attrs, a->nattrs, &e);
  if (!st && a->nattrs == 4)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "fused_conv: takes %d attributes, got 4", 4 + DVM_CONV_EPILOGUE_ATTRS);
  if (st) return st;
  k->act = (int32_t)e.act;
  k->layout = (int32_t)e.layout;
  k->algo = (int32_t)e.algo;
  k->alpha = (float)e.alpha;
  k->beta = (float)e.beta;
  k->post_scale = (float)e.post_scale;
  k->post_shift = (float)e.post_shift;
  return NULL;
}

/* y through k's epilogue: what set_post_ops asks of oneDNN, for the
 * outputs made without it (no input channels). */
static float epilogue(const key *k, float y) {
  switch (k->act) {
  case DVM_CONV_RELU: y = y > 0 ? y : 0; break;
  case DVM_CONV_TANH: y = tanhf(y); break;
  case DVM_CONV_SIGMOID: y = 1 / (1 + expf(-y)); break;
  case DVM_CONV_LEAKY_RELU: y = y > 0 ? y : y * k->alpha; break;
  case DVM_CONV_CLIP: y = fminf(fmaxf(y, k->alpha), k->beta); break;
  case DVM_CONV_HARD_SIGMOID: y = fminf(fmaxf(k->alpha * y + k->beta, 0), 1); break;
  case DVM_CONV_HARD_SWISH: y = y * fminf(fmaxf(y / 6 + 0.5f, 0), 1); break;
  case DVM_CONV_SWISH: y = y / (1 + expf(-y)); break;
  default: break;
  }
  return y * k->post_scale + k->post_shift;
}

/* A key of X's type dt and the geometry of a call: the dims of X, W and Y
 * (rank) and the window's; no epilogue. A convolution's spatial dims of
 * one input point, a kernel of 1 and no pads (the 1 of a [k, 1] kernel
 * over [N, C, H, 1]) are left out, one at least kept: the tensors' memory
 * is the same without them, and oneDNN's kernels, which block the last
 * spatial dim, ran such convs as 2-D at a third of their speed as 1-D
 * (docs/performance.md). */
static void key_init(key *k, dnnl_data_type_t dt, bool transpose, int rank, const int64_t *x, const int64_t *w,
                     const int64_t *y, const dvm_window *win, int64_t group) {
  memset(k, 0, sizeof *k); /* the key is compared bytewise */
  k->post_scale = 1;
  k->dt = dt;
  k->group = group;
  memcpy(k->x, x, sizeof(int64_t) * 2);
  memcpy(k->w, w, sizeof(int64_t) * 2);
  memcpy(k->y, y, sizeof(int64_t) * 2);
  int n = 0;
  for (int i = 0; i < win->n; i++) {
    bool unit = !transpose && x[2 + i] == 1 && w[2 + i] == 1 && !win->pad_begin[i] && !win->pad_end[i];
    if (unit && (n > 0 || i < win->n - 1)) continue;
    k->x[2 + n] = x[2 + i];
    k->w[2 + n] = w[2 + i];
    k->y[2 + n] = y[2 + i];
    k->stride[n] = win->stride[i];
    k->dilation[n] = win->dilation[i];
    k->pad_begin[n] = win->pad_begin[i];
    k->pad_end[n++] = win->pad_end[i];
  }
  k->rank = 2 + n;
  k->cx = k->x[1];
  k->cy = k->y[1];
  k->hx = k->x[2];
  k->hy = k->y[2];
}

/* Checks a call (kind 0 conv, 1 conv_transpose, 2 fused_conv) and builds its cache key. */
static dvm_status *check(const dvm_kernel_args *a, int kind, key *k) {
  static const char *const ops[] = {"conv", "conv_transpose", "fused_conv"};
  const char *op = ops[kind];
  bool transpose = kind == 1;
  dvm_status *st = dvm_kargs_check_range(a, op, 2, kind == 2 ? 4 : 3, 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *w = a->in[1], *b = a->nin >= 3 ? a->in[2] : NULL, *y = a->out[0];
  const dvm_tensor *z = a->nin == 4 ? a->in[3] : NULL;
  bool f32 = x->dtype == DVM_F32 && w->dtype == DVM_F32 && y->dtype == DVM_F32 &&
             (!b || b->dtype == DVM_F32) && (!z || z->dtype == DVM_F32);
  if (!f32) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: dtypes %s: only f32 is supported", op,
                          dvm_kargs_dtypes(got, sizeof got, a));
  }
  dvm_window win;
  int64_t dims[DVM_MAX_RANK], group;
  st = dvm_conv_setup(transpose, x->rank, x->dims, w->rank, w->dims, b ? b->rank : -1, b ? b->dims : NULL,
                      a->attrs, kind == 2 ? 4 : a->nattrs, &win, &group, dims);
  if (st) return st;
  if (y->rank != x->rank || memcmp(y->dims, dims, sizeof(int64_t) * x->rank) != 0) {
    char sy[DVM_SHAPE_STR_SIZE], sd[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: output Y %s != %s, what X, W and the attributes give", op,
                          dvm_shape_str(sy, y->rank, y->dims), dvm_shape_str(sd, x->rank, dims));
  }
  if (z && (z->rank != y->rank || memcmp(z->dims, y->dims, sizeof(int64_t) * y->rank) != 0)) {
    char sz[DVM_SHAPE_STR_SIZE], sy[DVM_SHAPE_STR_SIZE];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: Z %s must have Y's dims %s", op,
                          dvm_shape_str(sz, z->rank, z->dims), dvm_shape_str(sy, y->rank, y->dims));
  }
  key_init(k, dnnl_f32, transpose, x->rank, x->dims, w->dims, y->dims, &win, group);
  if (kind == 2 && (st = epilogue_attrs(a, k))) return st;
  k->z = z != NULL;
  k->transpose = transpose;
  k->bias = b != NULL;
  k->threads = dvm_kargs_threads(a);
  return NULL;
}

/* Y = B broadcast over [N, M, o...], or 0: the sum over no input channels;
 * fused_conv's Z added and its epilogue applied (fused, z: NULL for conv
 * and conv_transpose). */
static void fill_bias(const dvm_tensor *y, const dvm_tensor *b, const key *fused, const dvm_tensor *z) {
  float *py = dvm_tensor_ptr(y);
  int64_t m = y->dims[1], inner = dvm_tensor_numel(y) / (y->dims[0] * m);
  const float *pb = b ? dvm_tensor_ptr(b) : NULL, *pz = z ? dvm_tensor_ptr(z) : NULL;
  bool last = fused && fused->layout & LAYOUT_Y_LAST, zlast = fused && fused->layout & LAYOUT_Z_LAST;
  for (int64_t i = 0; i < y->dims[0] * m; i++) {
    float v = pb ? pb[i % m] : 0.0f;
    int64_t n = i / m, c = i % m;
    for (int64_t j = 0; j < inner; j++) {
      float u = pz ? v + pz[zlast ? (n * inner + j) * m + c : i * inner + j] : v;
      py[last ? (n * inner + j) * m + c : i * inner + j] = fused ? epilogue(fused, u) : u;
    }
  }
}

/* y (a plain strided layout md, channels dim 1) += b per channel:
 * conv_transpose's bias, which oneDNN 2.6's deconvolutions add at a
 * fraction of their own speed (PP-OCRv4 det's 24 -> 24 2x2 stride 2
 * one: 11.3 ms with its bias, 2.3 without; the GEMM one 1.4 against
 * 0.75). */
static void add_bias(const dnnl_memory_desc_t *md, float *y, const float *b) {
  const dnnl_dim_t *d = md->dims, *s = md->format_desc.blocking.strides;
  int nd = md->ndims;
  dnnl_dim_t rows = 1, len = d[nd - 1], step = s[nd - 1];
  for (int i = 2; i < nd - 1; i++) rows *= d[i];
  for (dnnl_dim_t n = 0; n < d[0]; n++)
    for (dnnl_dim_t c = 0; c < d[1]; c++)
      for (dnnl_dim_t r = 0; r < rows; r++) {
        dnnl_dim_t at = n * s[0] + c * s[1], rest = r;
        for (int i = nd - 2; i >= 2; i--) {
          at += rest % d[i] * s[i];
          rest /= d[i];
        }
        float *row = y + at, v = b[c];
        if (step == 1) {
          _Pragma("omp simd") for (dnnl_dim_t k = 0; k < len; k++) row[k] += v;
        } else {
          for (dnnl_dim_t k = 0; k < len; k++) row[k * step] += v;
        }
      }
}

/* s's memory object i, of md, holding `data`: made at its entry's first
 * call on the thread, pointed at data after where that moved (oneDNN
 * zero-fills a blocked layout's padding on each new pointer: not for the
 * workspace's copies, which stay where they are, nor for W's kept forms,
 * which other threads read). md is read only to make it. */
static dnnl_status_t mem_at(mem_slot *s, int i, const dnnl_memory_desc_t *md, void *data) {
  dnnl_status_t st = dnnl_success;
  if (!s->m[i]) st = dnnl_memory_create(&s->m[i], md, engine, data);
  else if (s->data[i] != data) st = dnnl_memory_set_data_handle(s->m[i], data);
  if (st == dnnl_success) s->data[i] = data;
  return st;
}

/* mem_at of n elements of type dt (X's zero point, the scratchpad). */
static dnnl_status_t mem_1d(mem_slot *s, int i, dnnl_dim_t n, dnnl_data_type_t dt, void *data) {
  dnnl_memory_desc_t md;
  dnnl_dims_t dims = {n};
  dnnl_status_t st = s->m[i] ? dnnl_success : dnnl_memory_desc_init_by_tag(&md, 1, dims, dt, dnnl_a);
  return st != dnnl_success ? st : mem_at(s, i, &md, data);
}

/* One call of e's primitive on the views x, w, b, y (w the slice of W from
 * output channel `at`; wf W's kept forms or NULL; xzp X's zero point when
 * e has one), on the calling thread's stream and workspace. */
static dvm_status *exec(const char *op, const entry *e, wforms *wf, int64_t at, void *x, void *w, void *b,
                        void *y, void *z, const int32_t *xzp) {
  dvm_status *st = NULL;
  thread_ctx *c = NULL;
  st = thread_ctx_get(op, e->bytes[SRC] + e->bytes[WEI] + e->bytes[DST] + e->scratch, &c);
  if (st) return st;
  mem_slot *slot = &c->slot[e->id % MEM_SLOTS];
  if (slot->id != e->id) {
    slot_clear(slot);
    slot->id = e->id;
  }
  dnnl_memory_t *m = slot->m, *mem = m, *inner = m + MEM_INNER;
  void *user[NBUF] = {x, w, y};
  char *ws = c->ws, *ibuf[NBUF] = {0};
  for (int i = 0; i < NBUF; i++) {
    DNNL_TRY(op, "memory creation", mem_at(slot, i, &e->plain[i], user[i]));
    if (!e->reorder[i]) continue;
    DNNL_TRY(op, "memory creation", mem_at(slot, MEM_INNER + i, &e->inner[i], ws));
    ibuf[i] = ws;
    ws += e->bytes[i];
  }
  dnnl_memory_t bias = NULL, zmem = NULL, zp = NULL, scratch = NULL;
  if (b && !e->k.transpose) {
    DNNL_TRY(op, "memory creation", mem_at(slot, MEM_BIAS, &e->bias, b));
    bias = m[MEM_BIAS];
  }
  if (z) {
    DNNL_TRY(op, "memory creation", mem_at(slot, MEM_Z, &e->z, z));
    zmem = m[MEM_Z];
  }
  if (e->k.xzp) {
    DNNL_TRY(op, "memory creation", mem_1d(slot, MEM_ZP, 1, dnnl_s32, (void *)xzp));
    zp = m[MEM_ZP];
  }
  if (e->scratch) {
    DNNL_TRY(op, "memory creation", mem_1d(slot, MEM_SCRATCH, (dnnl_dim_t)e->scratch, dnnl_u8, ws));
    scratch = m[MEM_SCRATCH];
  }
  void *kept = NULL;
  if (wf && e->reorder[WEI]) {
    st = wforms_get(op, wf, e, at, mem[WEI], c->stream, scratch, &kept);
    if (st) goto out;
    if (kept) DNNL_TRY(op, "memory creation", mem_at(slot, MEM_KEPT, &e->inner[WEI], kept));
  }
  /* the scratchpad goes last, so that leaving it out is a shorter count */
  int ns = scratch != NULL;
  if (e->blk16[SRC]) blk16_copy(&e->plain[SRC], x, (float *)ibuf[SRC], true);
  for (int i = SRC; i <= WEI; i++)
    if (e->reorder[i] && !(i == WEI && kept) && !e->blk16[i]) {
      dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, mem[i]}, {DNNL_ARG_TO, inner[i]}, {DNNL_ARG_SCRATCHPAD, scratch}};
      DNNL_TRY(op, "reorder", dnnl_primitive_execute(e->reorder[i], c->stream, 2 + ns, r));
    }
  dnnl_memory_t use[NBUF];
  for (int i = 0; i < NBUF; i++) use[i] = e->reorder[i] ? inner[i] : mem[i];
  if (kept) use[WEI] = m[MEM_KEPT];
  if (zmem && e->zblk16) {
    blk16_copy(&e->z, z, (float *)ibuf[DST], true);
  } else if (zmem) {
    dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, zmem}, {DNNL_ARG_TO, use[DST]}, {DNNL_ARG_SCRATCHPAD, scratch}};
    DNNL_TRY(op, "reorder", dnnl_primitive_execute(e->zcopy, c->stream, 2 + ns, r));
  }
  dnnl_exec_arg_t args[6] = {{DNNL_ARG_SRC, use[SRC]}, {DNNL_ARG_WEIGHTS, use[WEI]}, {DNNL_ARG_DST, use[DST]}};
  int na = 3;
  if (bias) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias};
  if (zp) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp};
  if (scratch) args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
  DNNL_TRY(op, "execution", dnnl_primitive_execute(e->conv, c->stream, na, args));
  if (e->blk16[DST]) {
    DNNL_TRY(op, "stream wait", dnnl_stream_wait(c->stream)); /* the conv's output first */
    blk16_copy(&e->plain[DST], y, (float *)ibuf[DST], false);
  } else if (e->reorder[DST]) {
    dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, inner[DST]}, {DNNL_ARG_TO, mem[DST]}, {DNNL_ARG_SCRATCHPAD, scratch}};
    DNNL_TRY(op, "reorder", dnnl_primitive_execute(e->reorder[DST], c->stream, 2 + ns, r));
  }
  DNNL_TRY(op, "stream wait", dnnl_stream_wait(c->stream));
  if (b && e->k.transpose) add_bias(&e->plain[DST], y, b);
out:
  return st;
}

/* ---- a convolution cut over dvm's thread pool ---------------------------- */

/* oneDNN threads through OpenMP, whose team waits at the end of every
 * primitive for all its threads: on a loaded machine a descheduled one
 * stalls the call, and its threads spin after each call where dvm's pool
 * wants the vCPUs (docs/performance.md). So a conv or conv_transpose with
 * more than one thread runs as units, each a single-threaded oneDNN call
 * on views of the tensors, on dvm_par_for, which never waits for a worker
 * that has not started. A unit is one image of the batch times
 *  - a band of output rows (the first spatial dim), all output channels,
 *    reading the input rows its windows reach (a conv that reorders X,
 *    with at least BAND_MIN output rows a band): each unit reorders only
 *    its rows (and the window's overlap) into oneDNN's layout, and the
 *    units do equal work; or else
 *  - a slice of the output channels (of whole groups when grouped), a
 *    multiple of SLICE_ALIGN channels (oneDNN's blocks are 8 or 16) where
 *    the groups allow: pointwise convs (a GEMM on the plain layouts, no
 *    reorders), conv_transpose and convs with few rows; each unit reorders
 *    all of its input channels.
 * Units find their primitive in the cache by their key (the first, middle
 * and last bands differ in pads and rows; a shorter last slice). */
#define SLICE_ALIGN 16
#define BAND_MIN 4
/* Bands per image and thread, so that a late worker's share is small. */
#define BANDS_PER_THREAD 2
/* Below this much work a unit (multiply-adds, and work() below), the conv
 * runs whole on the caller: about 30 us of a dense conv here. Smaller
 * units (1 M) gained nothing at best and lost much on a loaded machine
 * (a worker descheduled inside its unit stalls the caller). */
#define SPLIT_MIN_MACS (1 << 21)
/* What an element of X or Y and one of W cost beyond their multiply-adds,
 * in multiply-adds' time: oneDNN's depthwise convs (9 to 25 an output)
 * ran at a quarter of a dense conv's rate or less, and a conv over one
 * pixel (each weight used once, read from beyond L2) at a twelfth
 * (docs/performance.md, "Convolutions at 2 threads"). */
#define MOVE_MACS 16
#define WEIGHT_MACS 12

/* One image's work for `oc` of k's output channels (see MOVE_MACS). */
static int64_t work(const key *k, int64_t oc) {
  int64_t xsp = 1, ysp = 1, window = 1, icg = k->x[1] / k->group;
  for (int i = 2; i < k->rank; i++) {
    xsp *= k->x[i];
    ysp *= k->y[i];
    window *= k->w[i];
  }
  int64_t macs = (k->transpose ? xsp : ysp) * window * icg * oc; /* each output point's window, or input point's */
  return macs + (xsp * k->x[1] + ysp * oc) * MOVE_MACS + window * icg * oc * WEIGHT_MACS;
}

typedef struct job {
  const char *op;
  const key *k;
  wforms *wf;
  char *x, *w, *b, *y, *z; /* z: fused_conv's Z or NULL */
  const int32_t *xzp;       /* X's zero point (the integer conv) or NULL */
  bool rows;                /* units are bands of rows, else slices of channels */
  int64_t parts, slice;     /* units per image, output rows or channels in each */
  int64_t ocg, icg;         /* output, input channels per group */
  int64_t xn, yn, xc, yc;   /* bytes per image of X, Y; per channel */
  int64_t xr, yr;           /* bytes per row of X, Y (their first spatial dim) */
  int64_t zc, zr;           /* Z's per channel and row (its bytes per image: yn) */
  int64_t wc;               /* bytes of W per output channel of a slice */
  pthread_mutex_t lock;
  dvm_status *error; /* the first unit's failure */
} job;

/* k's key for output rows [o0, o1) of one image, and the first input row
 * it reads; *rows the number it reads (< 1: all in the padding). */
static key band_key(const key *k, int64_t o0, int64_t o1, int64_t *i0, int64_t *rows) {
  key s = *k;
  int64_t start = o0 * k->stride[0] - k->pad_begin[0],
          end = (o1 - 1) * k->stride[0] - k->pad_begin[0] + (k->w[2] - 1) * k->dilation[0] + 1;
  s.threads = 1;
  s.x[0] = s.y[0] = 1;
  s.y[2] = o1 - o0;
  s.pad_begin[0] = start < 0 ? -start : 0;
  s.pad_end[0] = end > k->x[2] ? end - k->x[2] : 0;
  *i0 = start < 0 ? 0 : start;
  *rows = s.x[2] = (end < k->x[2] ? end : k->x[2]) - *i0;
  return s;
}

/* k's key for a slice of `oc` output channels of one image. */
static key slice_key(const key *k, int64_t oc) {
  key s = *k;
  int64_t ocg = k->y[1] / k->group, icg = k->x[1] / k->group;
  s.threads = 1;
  s.x[0] = s.y[0] = 1;
  s.y[1] = oc;
  s.w[k->transpose] = k->transpose ? oc / k->group : oc; /* (W's dims only tell keys apart) */
  if (k->group > 1) {
    s.group = oc / ocg;
    s.x[1] = s.group * icg;
  }
  return s;
}

/* A unit's error st: kept in *first if it is the first (units run on the
 * pool, hence the lock), freed otherwise. */
static void keep_first_error(pthread_mutex_t *lock, dvm_status **first, dvm_status *st) {
  pthread_mutex_lock(lock);
  if (!*first) *first = st;
  else dvm_status_free(st);
  pthread_mutex_unlock(lock);
}

static void run_units(void *ctx, int64_t s, int64_t end) {
  job *j = ctx;
  for (int64_t u = s; u < end; u++) {
    int64_t n = u / j->parts, p = u % j->parts, at = p * j->slice;
    char *x = j->x + n * j->xn, *w = j->w, *b = j->b, *y = j->y + n * j->yn, *z = j->z ? j->z + n * j->yn : NULL;
    key uk;
    if (j->rows) {
      int64_t o1 = at + j->slice < j->k->y[2] ? at + j->slice : j->k->y[2], i0, rows;
      uk = band_key(j->k, at, o1, &i0, &rows);
      x += i0 * j->xr;
      y += at * j->yr;
      z = z ? z + at * j->zr : NULL;
      at = 0; /* W whole */
    } else {
      int64_t oc = at + j->slice < j->k->y[1] ? j->slice : j->k->y[1] - at;
      uk = slice_key(j->k, oc);
      x += (j->k->group == 1 ? 0 : at / j->ocg * j->icg) * j->xc;
      w += at * j->wc;
      b = b ? b + at * (int64_t)sizeof(float) : NULL;
      y += at * j->yc;
      z = z ? z + at * j->zc : NULL;
    }
    entry *e;
    dvm_status *st = cache_get(j->op, &uk, &e);
    if (!st) {
      st = exec(j->op, e, j->wf, at, x, w, b, y, z, j->xzp);
      cache_put(e);
    }
    if (st) keep_first_error(&j->lock, &j->error, st);
  }
}

/* A conv or conv_transpose of k on `threads` threads, as units (above):
 * x, w, b (or NULL), y, z (or NULL) the tensors' memory, wn W's elements. */
static dvm_status *run_split(const char *op, const key *k, int threads, wforms *wf, void *x, const void *w,
                             const void *b, void *y, const void *z, const int32_t *xzp, int64_t wn) {
  int64_t oc = k->y[1], ocg = oc / k->group, icg = k->x[1] / k->group, n = k->x[0];
  int64_t xsp = 1, ysp = 1;
  for (int i = 2; i < k->rank; i++) {
    xsp *= k->x[i];
    ysp *= k->y[i];
  }
  int64_t per = (threads + n - 1) / n; /* units per image for one each */
  job j = {.op = op, .k = k, .wf = wf, .ocg = ocg, .icg = icg};
  int64_t oh = k->y[2], bands = per * BANDS_PER_THREAD;
  if (bands > oh / BAND_MIN) bands = oh / BAND_MIN;
  if (bands > work(k, oc) / SPLIT_MIN_MACS) bands = work(k, oc) / SPLIT_MIN_MACS;
  /* as many units for each thread where the bands allow (3 bands on 2
   * threads take as long as 4) */
  for (int64_t u = bands; u > 1 && u * n >= threads; u--)
    if (u * n % threads == 0) {
      bands = u;
      break;
    }
  j.rows = !k->transpose && !gemm_pointwise(k) && threads > 1 && bands > 1;
  if (j.rows) {
    j.slice = (oh + bands - 1) / bands;
    j.parts = (oh + j.slice - 1) / j.slice;
    int64_t i0, first, last;
    band_key(k, 0, j.slice, &i0, &first);
    band_key(k, (j.parts - 1) * j.slice, oh, &i0, &last);
    j.rows = first > 0 && last > 0; /* (middle bands read rows between those) */
  }
  if (!j.rows) {
    /* a slice: whole groups, SLICE_ALIGN channels or a multiple when they fit */
    int64_t align = k->group == 1 ? SLICE_ALIGN : ocg;
    while (align % SLICE_ALIGN && align < SLICE_ALIGN) align += ocg;
    int64_t parts = per;
    if (parts > (oc + align - 1) / align) parts = (oc + align - 1) / align;
    if (parts < 1) parts = 1;
    int64_t slice = ((oc + parts - 1) / parts + align - 1) / align * align;
    if (slice > oc) slice = oc;
    parts = (oc + slice - 1) / slice;
    if (work(k, slice) < SPLIT_MIN_MACS) { /* small: whole, on the caller */
      parts = 1;
      slice = oc;
      threads = 1;
    }
    j.parts = parts;
    j.slice = slice;
  }
  /* element sizes: f32, or the integer conv's X and W bytes (Y s32) */
  int64_t f = sizeof(float), fx = k->dt == dnnl_f32 ? f : 1, fy = f;
  /* W's output channels: rows of [M, C/group, k...]; of ONNX conv_transpose's
   * [C, M/group, k...], the second dim (whole groups: rows again) */
  j.wc = (k->transpose && k->group == 1 ? wn / (k->x[1] * oc) : wn / oc) * fx;
  j.x = x;
  j.w = (char *)w; /* (read only: oneDNN's memory handles are not const) */
  j.b = (char *)b;
  j.y = y;
  j.z = (char *)z;
  j.xzp = xzp;
  /* bytes per image, channel and row; channels last: [N, s..., C] */
  bool xl = k->layout & LAYOUT_X_LAST, yl = k->layout & LAYOUT_Y_LAST, zl = k->layout & LAYOUT_Z_LAST;
  j.xn = xsp * k->x[1] * fx;
  j.yn = ysp * oc * fy;
  j.xc = xl ? fx : xsp * fx;
  j.yc = yl ? fy : ysp * fy;
  j.xr = xsp / k->x[2] * (xl ? k->x[1] : 1) * fx;
  j.yr = ysp / k->y[2] * (yl ? oc : 1) * fy;
  j.zc = zl ? f : ysp * f;
  j.zr = ysp / k->y[2] * (zl ? oc : 1) * f;
  if (pthread_mutex_init(&j.lock, NULL) != 0) return dvm_status_new(DVM_INTERNAL, "%s: pthread_mutex_init failed", op);
  dvm_par_for(threads, n * j.parts, 1, run_units, &j);
  pthread_mutex_destroy(&j.lock);
  return j.error;
}

/* ---- conv_transpose whose windows do not overlap, as a GEMM ------------- */

/* A 2-D conv_transpose with kernel = stride, no padding, dilation or
 * groups (U-Net's and DB heads' 2x2 stride-2 upsamplings) gives each
 * input pixel its own kh x kw block of Y: per input row h, C[(co, i, j),
 * w] = sum over ci of W[ci, co, i, j] X[ci, h, w] is one sgemm (W^T
 * against X's row, both read in place), and C's rows, kw of them
 * interleaved, are Y's row h kh + i of channel co, plus the bias.
 * oneDNN's deconvolutions took 1.4 to 2.3 times as long (its GEMM one, on
 * the plain layouts, as long as its blocked one): docs/kernels.md. */
static bool unpool_shape(const key *k) {
  return k->transpose && k->rank == 4 && k->group == 1 && k->w[2] == k->stride[0] && k->w[3] == k->stride[1] &&
         k->dilation[0] == 1 && k->dilation[1] == 1 && !k->pad_begin[0] && !k->pad_begin[1] &&
         k->y[2] == k->x[2] * k->w[2] && k->y[3] == k->x[3] * k->w[3];
}

typedef struct unpool_job {
  const key *k;
  const float *x, *w, *b;
  float *y;
  dvm_status *error; /* the first (rows run on the pool: under lock) */
  pthread_mutex_t lock;
} unpool_job;

/* Input rows [r0, r1) of all images: r = n H + h. */
static void unpool_rows(void *ctx, int64_t r0, int64_t r1) {
  unpool_job *j = ctx;
  const key *k = j->k;
  int64_t ci = k->x[1], h = k->x[2], w = k->x[3], co = k->y[1], kh = k->w[2], kw = k->w[3], m = co * kh * kw;
  float *c = malloc(sizeof(float) * (size_t)(w * m));
  dvm_status *st = c ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "conv_transpose: no memory for a row of products");
  for (int64_t r = r0; r < r1 && !st; r++) {
    int64_t n = r / h, row = r % h;
    dnnl_status_t e = dnnl_sgemm('T', 'N', m, w, ci, 1.0f, j->w, m, j->x + (n * ci * h + row) * w, h * w, 0.0f, c, w);
    if (e != dnnl_success) {
      st = dnnl_error("conv_transpose", "sgemm", e);
      break;
    }
    for (int64_t o = 0; o < co; o++)
      for (int64_t i = 0; i < kh; i++) {
        float *dst = j->y + ((n * co + o) * k->y[2] + row * kh + i) * k->y[3], bias = j->b ? j->b[o] : 0.0f;
        const float *src = c + (o * kh + i) * kw * w;
        if (kw == 2) /* (the common one: a loop the compiler interleaves) */
          for (int64_t p = 0; p < w; p++) dst[2 * p] = src[p] + bias, dst[2 * p + 1] = src[w + p] + bias;
        else
          for (int64_t p = 0; p < w; p++)
            for (int64_t q = 0; q < kw; q++) dst[p * kw + q] = src[q * w + p] + bias;
      }
  }
  free(c);
  if (st) keep_first_error(&j->lock, &j->error, st);
}

static dvm_status *unpool(const dvm_kernel_args *a, const key *k, int threads) {
  unpool_job j = {k, dvm_tensor_ptr(a->in[0]), dvm_tensor_ptr(a->in[1]), a->nin >= 3 ? dvm_tensor_ptr(a->in[2]) : NULL,
                  dvm_tensor_ptr(a->out[0]), NULL};
  if (pthread_mutex_init(&j.lock, NULL) != 0) return dvm_status_new(DVM_INTERNAL, "conv_transpose: pthread_mutex_init failed");
  dvm_par_for(threads, k->x[0] * k->x[2], 1, unpool_rows, &j);
  pthread_mutex_destroy(&j.lock);
  return j.error;
}

/* oneDNN's engine, and one OpenMP thread for this thread's calls: oneDNN
 * sizes its OpenMP teams, and tunes its kernels, by the calling thread's
 * setting, and each unit is one thread's. */
static dvm_status *begin(const char *op) {
  pthread_once(&engine_once, engine_init);
  if (engine_status != dnnl_success) return dnnl_error(op, "engine creation", engine_status);
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  return NULL;
}

/* ---- depthwise convolutions: conv_dw.c's loops ------------------------------ */

/* A 2-D depthwise conv (group = C = M) of channels-first X and Y without
 * Z, at stride 1 or 2 into rows of at least DW_MIN_COLS (DW_MIN_COLS_S2
 * at stride 2): conv_dw.c's loops, without oneDNN's copies to and from
 * its 16-channel blocks. On narrower rows oneDNN measured faster (the
 * loops make rows of fewer than 16 columns one column at a time), and
 * channels last too (conv_dw.c; docs/performance.md). */
#define DW_MIN_COLS 32
#define DW_MIN_COLS_S2 16

static bool depthwise(const key *k) {
  return !k->transpose && k->rank == 4 && k->dt == dnnl_f32 && !k->z && !k->layout && k->group > 1 &&
         k->group == k->x[1] && k->group == k->y[1] && k->w[2] <= DVM_CONV_DW_ROWS && k->stride[1] <= 2 &&
         k->y[3] >= (k->stride[1] == 2 ? DW_MIN_COLS_S2 : DW_MIN_COLS);
}

/* A run of Y through k's epilogue: the cheap activations as vector loops,
 * the others by epilogue(). */
DVM_EW_CLONES static void epilogue_run(const void *ctx, float *y, int64_t n) {
  const key *k = ctx;
  float a = k->alpha, b = k->beta;
  switch (k->act) {
  case DVM_CONV_IDENTITY: break;
  case DVM_CONV_RELU: _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0; break;
  case DVM_CONV_LEAKY_RELU: _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : y[i] * a; break;
  case DVM_CONV_CLIP:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
      float v = y[i] < a ? a : y[i];
      y[i] = v > b ? b : v;
    }
    break;
  case DVM_CONV_HARD_SWISH:
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
      float g = y[i] / 6 + 0.5f;
      y[i] *= g < 0 ? 0 : g > 1 ? 1 : g;
    }
    break;
  default:
    for (int64_t i = 0; i < n; i++) y[i] = epilogue(k, y[i]);
    return;
  }
  float s = k->post_scale, t = k->post_shift;
  if (s != 1 || t != 0) _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = y[i] * s + t;
}

static void run_depthwise(const key *k, const dvm_kernel_args *a, int threads) {
  const dvm_tensor *b = a->nin >= 3 ? a->in[2] : NULL;
  bool post = k->act != DVM_CONV_IDENTITY || k->post_scale != 1 || k->post_shift != 0;
  dvm_conv_dw d = {.n = k->x[0], .c = k->x[1], .h = k->x[2], .w = k->x[3], .oh = k->y[2], .ow = k->y[3],
                   .kh = k->w[2], .kw = k->w[3], .sh = k->stride[0], .sw = k->stride[1], .dh = k->dilation[0],
                   .dw = k->dilation[1], .pt = k->pad_begin[0], .pl = k->pad_begin[1],
                   .x = dvm_tensor_ptr(a->in[0]), .wt = dvm_tensor_ptr(a->in[1]), .b = b ? dvm_tensor_ptr(b) : NULL,
                   .y = dvm_tensor_ptr(a->out[0]), .post = post ? epilogue_run : NULL, .ctx = k};
  /* (small ones whole on the caller, as run_split does) */
  dvm_cpu_conv_dw(&d, d.n * work(k, d.c) < SPLIT_MIN_MACS ? 1 : threads);
}

/* kind: 0 conv, 1 conv_transpose, 2 fused_conv (this table's entries) */
static dvm_status *run(const dvm_kernel_args *a, int kind) {
  static const char *const ops[] = {"conv", "conv_transpose", "fused_conv"};
  const char *op = ops[kind];
  key k;
  dvm_status *st = check(a, kind, &k);
  if (st) return st;
  const dvm_tensor *b = a->nin >= 3 ? a->in[2] : NULL, *z = a->nin == 4 ? a->in[3] : NULL;
  if (dvm_tensor_numel(a->out[0]) == 0) return NULL;
  if (k.x[1] == 0) {
    fill_bias(a->out[0], b, kind == 2 ? &k : NULL, z);
    return NULL;
  }
  if (depthwise(&k)) {
    run_depthwise(&k, a, k.threads);
    return NULL;
  }
  if ((st = begin(op))) return st;
  if (unpool_shape(&k)) return unpool(a, &k, k.threads);
  if (k.transpose)
    for (int i = 0; i < k.rank - 2; i++)
      if (transpose_end_pad(&k, i) < 0) { /* cropped: Y past the window is the bias */
        fill_bias(a->out[0], b, NULL, NULL);
        break;
      }
  /* the form's owner is this kernel's table entry; the holder is ours to
   * lock, hence the cast */
  wforms *wf = (wforms *)dvm_tensor_packed(a->in[1], &dvm_cpu_conv_kernels[kind], 1);
  int threads = k.threads;
  k.threads = 1;
  return run_split(op, &k, threads, wf, dvm_tensor_ptr(a->in[0]), dvm_tensor_ptr(a->in[1]), b ? dvm_tensor_ptr(b) : NULL,
                   dvm_tensor_ptr(a->out[0]), z ? dvm_tensor_ptr(z) : NULL, NULL, dvm_tensor_numel(a->in[1]));
}

static dvm_status *conv(const dvm_kernel_args *a) { return run(a, 0); }
static dvm_status *conv_transpose(const dvm_kernel_args *a) { return run(a, 1); }
static dvm_status *fused_conv(const dvm_kernel_args *a) { return run(a, 2); }

void *dvm_cpu_conv_forms_new(void) {
  wforms *w = calloc(1, sizeof *w);
  if (w && pthread_mutex_init(&w->lock, NULL) != 0) {
    free(w);
    w = NULL;
  }
  return w;
}

void dvm_cpu_conv_forms_free(void *forms) {
  if (forms) wforms_free(forms);
}

dvm_status *dvm_cpu_conv_s8(const char *op, const dvm_tensor *x, const int32_t *xzp, const int64_t *wdims,
                            const int8_t *w8, const dvm_window *win, int64_t group, int32_t *y, const int64_t *ydims,
                            int threads, void *forms) {
  key k;
  key_init(&k, x->dtype == DVM_U8 ? dnnl_u8 : dnnl_s8, false, x->rank, x->dims, wdims, ydims, win, group);
  k.xzp = xzp != NULL;
  int64_t wn = 1, yn = 1;
  for (int i = 0; i < x->rank; i++) {
    wn *= wdims[i];
    yn *= ydims[i];
  }
  if (yn == 0) return NULL;
  if (x->dims[1] == 0) { /* sums over no input channels */
    memset(y, 0, sizeof(int32_t) * (size_t)yn);
    return NULL;
  }
  dvm_status *st = begin(op);
  return st ? st : run_split(op, &k, threads, forms, dvm_tensor_ptr(x), w8, NULL, y, NULL, xzp, wn);
}

const dvm_kernel_def dvm_cpu_conv_kernels[] = {
    {"conv", DVM_DEVICE_CPU, conv, "conv", .prepack = conv_prepack, .dtypes = DVM_DTYPE_BIT(DVM_F32),
     .form = DVM_FORM_CONV},
    {"conv_transpose", DVM_DEVICE_CPU, conv_transpose, "conv_transpose", .prepack = conv_prepack,
     .dtypes = DVM_DTYPE_BIT(DVM_F32), .form = DVM_FORM_CONV_TRANSPOSE},
    {"fused_conv", DVM_DEVICE_CPU, fused_conv, "fused_conv", .prepack = conv_prepack, .dtypes = DVM_DTYPE_BIT(DVM_F32),
     .form = DVM_FORM_CONV},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
