/* Classical machine learning (the ai.onnx.ml domain): tree_ensemble and
 * binarizer (below).
 *
 *   tree_ensemble(in: X, E; attrs: targets:int, classifier:int)
 *     -> labels, scores (a classifier) or scores (a regressor)
 *
 * X f32 [N, F] (or [F], one row); E the ensemble's i32 words
 * (ops/cpu/ml_tree.h), checked and laid out for traversal once when the
 * module is linked (the prepack hook) or on each call where E is not a
 * constant; labels i64 [N], scores f32 [N, targets].
 *
 * As ONNX Runtime computes it: each row walks each tree from its root to a
 * leaf (a node sends x[feature] to its true child when the comparison holds,
 * or x is NaN and the node's missing value tracks true), and the leaf's
 * weights are aggregated per target (SUM, AVERAGE: the sum over the trees,
 * MIN, MAX); then the base values, the post transform and, for a classifier,
 * the label, with ONNX Runtime's rules for two classes (below, finish). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/ml_post.h"
#include "ops/cpu/ml_tree.h"
#include "ops/cpu/par.h"
#include "ops/kargs.h"
#include "shapefuncs/ml.h"
#include "shapefuncs/shape.h"

/* A branch node, or a leaf (feature LEAF, both children itself: a walk
 * may take a fixed number of steps, as many as its tree is deep, without
 * a branch on the data). next[0] is the true child. A branch's feature
 * holds its missing_tracks_true as bit 30 (MISSING_TRUE), so the walk reads
 * one 16-byte node. */
#define MISSING_TRUE (1 << 30)
#define LEAF (1 << 29)
#define FEATURE (LEAF - 1)
typedef struct {
  int32_t feature;
  float thr;
  int32_t next[2];
} te_node;

typedef struct {
  int32_t target;
  float value;
} te_weight;

typedef struct {
  int32_t first, count; /* a leaf's weights */
} te_span;

typedef struct {
  int32_t h[TE_HEADER];
  int same;    /* the branch mode of every branch node, or -1 */
  int missing; /* some node sends NaN to its true child */
  const int32_t *roots;
  int32_t *depth; /* per tree: the steps from its root to its deepest leaf */
  int32_t *by_depth; /* the trees, shallowest first (trees of one walk_trees call alike) */
  te_node *node;
  te_span *leaf;
  uint8_t *mode; /* per node: mode | missing_tracks_true << 4 */
  te_weight *w;
  float *base;
  int64_t *labels;
} ensemble;

static float f32_of(int32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

static dvm_status *bad(const char *why, long long at) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "tree_ensemble: ensemble words: %s (at %lld)", why, at);
}

static int by_key(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* e->by_depth: the trees ordered by depth (then index). */
static dvm_status *sort_by_depth(ensemble *e, int64_t T) {
  int64_t *key = malloc(sizeof *key * (size_t)T);
  if (!key) return dvm_status_new(DVM_OUT_OF_MEMORY, "tree_ensemble: out of memory for the ensemble");
  for (int64_t t = 0; t < T; t++) key[t] = (int64_t)e->depth[t] << 32 | t;
  qsort(key, (size_t)T, sizeof *key, by_key);
  for (int64_t t = 0; t < T; t++) e->by_depth[t] = (int32_t)(key[t] & 0xffffffff);
  free(key);
  return NULL;
}

/* Checks the words and builds *out in one allocation (free(out->roots)
 * releases it; roots point into a copy of the words). */
static dvm_status *build(const int32_t *wd, int64_t nw, ensemble *out) {
  if (nw < TE_HEADER) return bad("shorter than the header", nw);
  const int32_t *h = wd;
  for (int i = 0; i < TE_HEADER; i++)
    if (h[i] < 0) return bad("a negative header word", i);
  int64_t T = h[TE_TREES], N = h[TE_NODES], W = h[TE_WEIGHTS], C = h[TE_TARGETS], B = h[TE_BASES];
  int cls = h[TE_FLAGS] & TE_CLASSIFIER;
  if (T < 1 || N < T || C < 1 || (cls && C < 2) || h[TE_FEATURES] >= LEAF || h[TE_AGGREGATE] > TE_MAX || h[TE_POST] > ML_PROBIT ||
      h[TE_FLAGS] > 7 || B > (C > 2 ? C : 2))
    return bad("header out of range", 0);
  int64_t want = TE_HEADER + T + N * TE_NODE_WORDS + W * 2 + B + (cls ? C * 2 : 0);
  if (want != nw) return bad("its length does not match its header", nw);
  /* labels for a classifier only: its C is bounded by the words, a
   * regressor's is not (the call's outputs are checked against it after) */
  int64_t L = cls ? C : 0;
  size_t bytes = (size_t)N * (sizeof(te_node) + sizeof(te_span) + sizeof(int32_t) + 1) + (size_t)T * sizeof(int32_t) + (size_t)W * sizeof(te_weight) + (size_t)(B + 1) * sizeof(float) +
                 (size_t)L * sizeof(int64_t) + (size_t)T * 2 * sizeof(int32_t) + 64;
  char *mem = malloc(bytes);
  if (!mem) return dvm_status_new(DVM_OUT_OF_MEMORY, "tree_ensemble: out of memory for the ensemble");
  memcpy(out->h, h, sizeof out->h);
  int32_t *roots = (int32_t *)mem;
  out->roots = roots;
  out->labels = (int64_t *)(((uintptr_t)(roots + T) + 7) & ~(uintptr_t)7);
  out->node = (te_node *)(out->labels + L);
  out->w = (te_weight *)(out->node + N);
  out->base = (float *)(out->w + W);
  out->leaf = (te_span *)(out->base + B + 1);
  out->depth = (int32_t *)(out->leaf + N);
  out->by_depth = out->depth + T;
  int32_t *nodedepth = out->by_depth + T;
  out->mode = (uint8_t *)(nodedepth + N);
  memset(nodedepth, 0, sizeof *nodedepth * (size_t)N);
  const int32_t *r = wd + TE_HEADER, *nd = r + T, *ww = nd + N * TE_NODE_WORDS, *bw = ww + W * 2;
  dvm_status *st = NULL;
  out->same = -2;
  out->missing = 0;
  for (int64_t t = 0; t < T && !st; t++) {
    roots[t] = r[t];
    out->depth[t] = 0;
    int64_t end = t + 1 < T ? r[t + 1] : N;
    if ((t ? r[t] <= r[t - 1] : r[t] != 0) || end <= r[t] || end > N)
      st = bad("tree roots out of order", TE_HEADER + t);
    for (int64_t i = r[t]; i < end && !st; i++) {
      const int32_t *o = nd + i * TE_NODE_WORDS;
      int mode = o[0] & 0xff, mtt = (o[0] >> 8) & 1;
      te_node *x = &out->node[i];
      if ((o[0] & ~0x1ff) || mode > TE_LEAF) {
        st = bad("a node's mode", i);
      } else if (mode == TE_LEAF) {
        if (o[3] < 0 || o[4] < 0 || o[3] > W || o[4] > W - o[3]) st = bad("a leaf's weights are out of range", i);
        *x = (te_node){LEAF, 0, {(int32_t)i, (int32_t)i}};
        out->leaf[i] = (te_span){o[3], o[4]};
      } else {
        if (o[1] < 0 || o[1] >= h[TE_FEATURES] || o[3] <= i || o[4] <= i || o[3] >= end || o[4] >= end)
          st = bad("a node's feature or children are out of range (children follow their parent, in its tree)", i);
        *x = (te_node){o[1] | (mtt ? MISSING_TRUE : 0), f32_of(o[2]), {o[3], o[4]}};
        for (int c = 3; c <= 4 && !st; c++) /* a child follows its parents: its depth is known here */
          if (nodedepth[o[c]] < nodedepth[i] + 1) nodedepth[o[c]] = nodedepth[i] + 1;
        out->same = out->same == -2 || out->same == mode ? mode : -1;
        out->missing |= mtt;
      }
      out->mode[i] = (uint8_t)(mode | mtt << 4);
      if (nodedepth[i] > out->depth[t]) out->depth[t] = nodedepth[i];
    }
  }
  for (int64_t i = 0; i < W && !st; i++) {
    if (ww[2 * i] < 0 || ww[2 * i] >= C) st = bad("a weight's target is out of range", i);
    out->w[i] = (te_weight){ww[2 * i], f32_of(ww[2 * i + 1])};
  }
  for (int64_t i = 0; i < B; i++) out->base[i] = f32_of(bw[i]);
  for (int64_t c = 0; cls && c < C; c++)
    out->labels[c] = (int64_t)((uint64_t)(uint32_t)bw[B + 2 * c] | (uint64_t)(uint32_t)bw[B + 2 * c + 1] << 32);
  if (out->same == -2) out->same = TE_LEAF; /* only leaves */
  if (!st) st = sort_by_depth(out, T);
  if (st) free(mem);
  return st;
}

static void ensemble_free(void *p) {
  ensemble *e = p;
  free((void *)e->roots);
  free(e);
}

static dvm_status *te_prepack(const dvm_tensor *t, int input, const dvm_attr_hint *h, int nattrs, void **data,
                              void (**free_data)(void *)) {
  (void)h;
  (void)nattrs;
  if (input != 1 || t->dtype != DVM_I32 || t->rank != 1) return NULL;
  ensemble *e = malloc(sizeof *e);
  if (!e) return dvm_status_new(DVM_OUT_OF_MEMORY, "tree_ensemble: out of memory for the ensemble");
  dvm_status *st = build(dvm_tensor_ptr(t), t->dims[0], e);
  if (st) { /* the kernel says why on its call */
    free(e);
    dvm_status_free(st);
    return NULL;
  }
  *data = e;
  *free_data = ensemble_free;
  return NULL;
}

/* The leaf row x reaches from node i; `mode` is the one branch mode of
 * the ensemble, or -1 to read each node's; `missing`: some node's missing
 * value tracks true. */
static inline __attribute__((always_inline)) int32_t walk(const ensemble *e, int32_t i, const float *x, int mode,
                                                          int missing) {
  const te_node *nd = e->node;
  while (!(nd[i].feature & LEAF)) {
    int32_t f = nd[i].feature;
    float v = x[f & FEATURE], t = nd[i].thr;
    int m = mode >= 0 ? mode : e->mode[i] & 15, go;
    switch (m) {
    case TE_LEQ: go = v <= t; break;
    case TE_LT: go = v < t; break;
    case TE_GTE: go = v >= t; break;
    case TE_GT: go = v > t; break;
    case TE_EQ: go = v == t; break;
    default: go = v != t; break;
    }
    if (missing) go |= (f >> 30) & (v != v); /* NaN */
    i = nd[i].next[!go];
  }
  return i;
}

#define BLOCK 64 /* rows that walk one tree before the next tree: it stays in cache */

#define LANES 8 /* rows (or trees) that walk side by side: independent loads overlap */

/* The leaves rows x[r * ld], r < n <= LANES, reach in tree t, into leaf[r]:
 * depth[t] steps each, no branch on the data (leaves loop to themselves),
 * for an ensemble of one branch mode whose X has a column 0. */
static inline __attribute__((always_inline)) void walk_lanes(const ensemble *e, int32_t t, const float *x, int64_t ld,
                                                             int n, int mode, int missing, int32_t *leaf) {
  const te_node *nd = e->node;
  for (int r = 0; r < n; r++) leaf[r] = e->roots[t];
  for (int32_t s = 0; s < e->depth[t]; s++)
    for (int r = 0; r < n; r++) {
      const te_node *q = &nd[leaf[r]];
      int32_t f = q->feature;
      float v = x[r * ld + (f & FEATURE)];
      int go = mode == TE_LEQ ? v <= q->thr : v < q->thr;
      if (missing) go |= (f >> 30) & (v != v); /* NaN */
      leaf[r] = q->next[!go];
    }
}

/* The leaves row x reaches in trees[0, k), k <= LANES, into leaf[]:
 * the trees walk side by side (independent loads overlap) for as
 * many steps as the deepest is deep, for an ensemble of one branch mode
 * whose X has a column 0. */
static inline __attribute__((always_inline)) void walk_trees(const ensemble *e, const int32_t *trees, int k,
                                                             const float *x, int mode, int missing, int32_t *leaf) {
  const te_node *nd = e->node;
  int32_t steps = 0;
  for (int l = 0; l < k; l++) {
    leaf[l] = e->roots[trees[l]];
    steps = e->depth[trees[l]] > steps ? e->depth[trees[l]] : steps;
  }
  for (int32_t s = 0; s < steps; s++)
    for (int l = 0; l < k; l++) {
      const te_node *q = &nd[leaf[l]];
      int32_t f = q->feature;
      float v = x[f & FEATURE];
      int go = mode == TE_LEQ ? v <= q->thr : v < q->thr;
      if (missing) go |= (f >> 30) & (v != v); /* NaN */
      leaf[l] = q->next[!go];
    }
}

/* Adds leaf i's weights into one row's score and has [C]. */
static inline __attribute__((always_inline)) void add_leaf(const ensemble *e, int32_t i, float *score, uint8_t *has) {
  const te_span *leaf = &e->leaf[i];
  const te_weight *w = e->w + leaf->first;
  int agg = e->h[TE_AGGREGATE];
  for (int32_t k = 0; k < leaf->count; k++) {
    float *s = &score[w[k].target], v = w[k].value;
    uint8_t *hs = &has[w[k].target];
    if (agg == TE_SUM || agg == TE_AVERAGE) *s += v;
    else if (!*hs || (agg == TE_MIN ? v < *s : v > *s)) *s = v;
    *hs = 1;
  }
}

/* Rows [0, n) of x (n <= BLOCK), tree by tree, into score/has [n, C]
 * (each row's weights added in tree order, as ONNX Runtime adds them);
 * leaves: scratch for one leaf per tree. */
static inline __attribute__((always_inline)) void walk_block(const ensemble *e, const float *x, int64_t ld, int n,
                                                             float *score, uint8_t *has, int32_t *leaves, int mode,
                                                             int missing) {
  int64_t C = e->h[TE_TARGETS];
  int32_t T = e->h[TE_TREES], lanes[LANES];
  if (mode >= 0 && n < 4) { /* a few rows: trees of like depth side by side instead of rows */
    for (int r = 0; r < n; r++) {
      for (int32_t t0 = 0; t0 < T; t0 += LANES) {
        int k = T - t0 < LANES ? (int)(T - t0) : LANES;
        walk_trees(e, e->by_depth + t0, k, x + r * ld, mode, missing, lanes);
        for (int l = 0; l < k; l++) leaves[e->by_depth[t0 + l]] = lanes[l];
      }
      for (int32_t t = 0; t < T; t++) add_leaf(e, leaves[t], score + r * C, has + r * C);
    }
    return;
  }
  for (int32_t t = 0; t < T; t++)
    for (int r = 0; r < n; r++) {
      if (mode < 0) lanes[r % LANES] = walk(e, e->roots[t], x + r * ld, mode, missing);
      else if (r % LANES == 0) walk_lanes(e, t, x + r * ld, ld, n - r < LANES ? n - r : LANES, mode, missing, lanes);
      add_leaf(e, lanes[r % LANES], score + r * C, has + r * C);
    }
}

/* One row's result from its aggregated scores s and has (C each): z (C
 * scores) and, for a classifier, *label. */
static void finish(const ensemble *e, float *s, uint8_t *has, float *z, int64_t *label) {
  int64_t C = e->h[TE_TARGETS], B = e->h[TE_BASES];
  int agg = e->h[TE_AGGREGATE], post = e->h[TE_POST], flags = e->h[TE_FLAGS];
  const float *b = e->base;
  if (!(flags & TE_CLASSIFIER)) {
    for (int64_t k = 0; k < C; k++) {
      float base = B == C ? b[k] : 0, v = s[k];
      if (agg == TE_AVERAGE) v /= (float)e->h[TE_TREES];
      /* a target no leaf scored: 0 when there are several (ONNX Runtime) */
      z[k] = has[k] ? v + base : C > 1 ? 0 : base;
    }
    if (C == 1) z[0] = post == ML_PROBIT ? ml_probit(z[0]) : z[0]; /* one target: PROBIT only, as ONNX Runtime */
    else ml_transform(post, z, C);
    return;
  }
  if (C > 2) {
    for (int64_t k = 0; k < B; k++) {
      s[k] = has[k] ? s[k] + b[k] : b[k];
      has[k] = 1;
    }
    int64_t best = -1;
    for (int64_t k = 0; k < C; k++)
      if (has[k] && (best < 0 || s[k] > s[best])) best = k;
    *label = e->labels[best < 0 ? 0 : best];
    memcpy(z, s, sizeof *z * (size_t)C);
    ml_transform(post, z, C);
    return;
  }
  /* two classes: ONNX Runtime's rules (an unscored class 1 leaves one score) */
  int size = 2, extra = -1; /* how one score becomes two */
  if (B == 2) {
    if (has[1]) {
      s[1] = b[1] + s[0];
      s[0] = -s[1];
    } else {
      s[1] += b[1];
      s[0] += b[0];
    }
  } else {
    if (B == 1) s[0] += b[0];
    else extra = 3;
    if (!has[1]) size = 1;
  }
  float pos = size == 2 && has[1] ? s[1] : has[0] ? s[0] : 0;
  if (flags & TE_ONE_CLASS) {
    int win = flags & TE_POSITIVE ? pos > 0.5f : pos > 0;
    extra = flags & TE_POSITIVE ? !win : 3 - win;
    *label = e->labels[win];
  } else {
    *label = pos > 0; /* ONNX Runtime's positive and negative labels, 1 and 0 */
  }
  if (size == 2) {
    z[0] = s[0];
    z[1] = s[1];
    ml_transform(post, z, 2);
  } else if (post == ML_PROBIT) {
    z[0] = ml_probit(s[0]);
    z[1] = 0;
  } else if (extra == 0 || extra == 1) {
    z[0] = 1 - s[0];
    z[1] = s[0];
  } else if (extra >= 2) {
    z[0] = post == ML_LOGISTIC ? ml_logistic(-s[0]) : -s[0];
    z[1] = post == ML_LOGISTIC ? ml_logistic(s[0]) : s[0];
  } else {
    z[0] = s[0];
    z[1] = 0;
  }
}

typedef struct {
  const ensemble *e;
  const float *x;
  int64_t ld;
  float *z;
  int64_t *labels;
  float *score; /* BLOCK x targets per thread */
  uint8_t *has;
  int32_t *leaves; /* trees per thread */
} job;

static void rows(void *ctx, int64_t s, int64_t end) {
  job *j = ctx;
  const ensemble *e = j->e;
  int64_t C = e->h[TE_TARGETS];
  size_t slot = (size_t)dvm_par_slot() * BLOCK * (size_t)C;
  float *score = j->score + slot;
  uint8_t *has = j->has + slot;
  int32_t *leaves = j->leaves + (size_t)dvm_par_slot() * (size_t)e->h[TE_TREES];
  int same = e->h[TE_FEATURES] ? e->same : -1, miss = e->missing; /* the lanes read column 0 */
  for (int64_t r0 = s; r0 < end; r0 += BLOCK) {
    int n = (int)(end - r0 < BLOCK ? end - r0 : BLOCK);
    memset(score, 0, sizeof *score * (size_t)(n * C));
    memset(has, 0, (size_t)(n * C));
    const float *x = j->x + r0 * j->ld;
    /* the converters' single modes get their own loops */
    if (same == TE_LEQ && !miss) walk_block(e, x, j->ld, n, score, has, leaves, TE_LEQ, 0);
    else if (same == TE_LEQ) walk_block(e, x, j->ld, n, score, has, leaves, TE_LEQ, 1);
    else if (same == TE_LT && !miss) walk_block(e, x, j->ld, n, score, has, leaves, TE_LT, 0);
    else if (same == TE_LT) walk_block(e, x, j->ld, n, score, has, leaves, TE_LT, 1);
    else walk_block(e, x, j->ld, n, score, has, leaves, -1, 1);
    for (int r = 0; r < n; r++)
      finish(e, score + r * C, has + r * C, j->z + (r0 + r) * C, j->labels ? j->labels + r0 + r : NULL);
  }
}

static dvm_status *tree_ensemble(const dvm_kernel_args *a) {
  int cls;
  int64_t n, targets;
  dvm_status *st = dvm_kargs_check_range(a, "tree_ensemble", 2, 2, 1, 2, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *wt = a->in[1];
  if ((st = dvm_ml_scores_infer("tree_ensemble", x->rank, x->dims, a->attrs, a->nattrs, &n, &targets, &cls))) return st;
  if (x->dtype != DVM_F32 || wt->dtype != DVM_I32 || wt->rank != 1 || a->nout != 1 + cls ||
      (cls && a->out[0]->dtype != DVM_I64) || a->out[cls]->dtype != DVM_F32) {
    char got[64];
    return dvm_status_new(DVM_INVALID_ARGUMENT, "tree_ensemble: %s: want X f32, the ensemble's words i32 [W], and "
                          "(labels i64,) scores f32", dvm_kargs_dtypes(got, sizeof got, a));
  }
  const dvm_tensor *z = a->out[cls];
  if ((cls && (a->out[0]->rank != 1 || a->out[0]->dims[0] != n)) || z->rank != 2 || z->dims[0] != n ||
      z->dims[1] != targets)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "tree_ensemble: outputs are not [%lld] and [%lld, %lld]",
                          (long long)n, (long long)n, (long long)targets);
  const ensemble *e = dvm_tensor_packed(wt, &dvm_cpu_ml_kernels[0], 1);
  ensemble own;
  if (!e) {
    if ((st = build(dvm_tensor_ptr(wt), wt->dims[0], &own))) return st;
    e = &own;
  }
  int64_t features = x->rank == 2 ? x->dims[1] : x->dims[0];
  if (e->h[TE_TARGETS] != targets || (e->h[TE_FLAGS] & TE_CLASSIFIER ? 1 : 0) != cls)
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "tree_ensemble: the ensemble has %d targets (classifier %d), the call "
                        "says %lld (%d)", e->h[TE_TARGETS], !!(e->h[TE_FLAGS] & TE_CLASSIFIER), (long long)targets, cls);
  else if (features < e->h[TE_FEATURES])
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "tree_ensemble: X has %lld features, the trees read feature %d",
                        (long long)features, e->h[TE_FEATURES] - 1);
  int threads = dvm_kargs_threads(a);
  size_t cells = (size_t)threads * BLOCK * (size_t)targets;
  job j = {e, dvm_tensor_ptr(x), features, dvm_tensor_ptr(z), cls ? dvm_tensor_ptr(a->out[0]) : NULL,
           st ? NULL : malloc(cells * sizeof(float)), st ? NULL : malloc(cells),
           st ? NULL : malloc((size_t)threads * (size_t)e->h[TE_TREES] * sizeof(int32_t))};
  if (!st && (!j.score || !j.has || !j.leaves)) st = dvm_status_new(DVM_OUT_OF_MEMORY, "tree_ensemble: out of memory for scores");
  if (!st) dvm_par_for(threads, n, BLOCK, rows, &j);
  free(j.score);
  free(j.has);
  free(j.leaves);
  if (e == &own) free((void *)own.roots);
  return st;
}

/* binarizer(in: X; attrs: threshold:float) -> Y: 1 where X > threshold,
 * else 0, in X's shape; f32. A NaN in X is an error, as in ONNX Runtime. */
static dvm_status *binarizer(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "binarizer", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *y = a->out[0];
  double thr;
  if (a->nattrs != 1 || a->attrs[0].kind != DVM_VAL_FLOAT)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "binarizer: takes one float attribute (threshold)");
  thr = a->attrs[0].u.f;
  int64_t n = dvm_tensor_numel(x);
  if (x->dtype != DVM_F32 || y->dtype != DVM_F32 || dvm_tensor_numel(y) != n)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "binarizer: want X f32 and Y f32 of X's size");
  const float *px = dvm_tensor_ptr(x), t = (float)thr;
  float *py = dvm_tensor_ptr(y);
  for (int64_t i = 0; i < n; i++) {
    if (px[i] != px[i]) return dvm_status_new(DVM_INVALID_ARGUMENT, "binarizer: X element %lld is NaN", (long long)i);
    py[i] = px[i] > t ? 1.0f : 0.0f;
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_ml_kernels[] = {
    {"tree_ensemble", DVM_DEVICE_CPU, tree_ensemble, "ml_scores", DVM_DTYPE_BIT(DVM_F32), .prepack = te_prepack},
    {"binarizer", DVM_DEVICE_CPU, binarizer, NULL, DVM_DTYPE_BIT(DVM_F32)},
    {NULL, DVM_DEVICE_CPU, NULL, NULL, 0},
};
