/* Shapes of the selecting ops (see select.h).
 *
 * Shape functions, inputs then attributes as the kernels take them:
 *   gather_nd(data, indices[, batch_dims:int]) -> out
 *   onehot(indices, depth, values[, axis:int]) -> out        reads depth
 *   compress(x, condition[, axis:int]) -> out                 reads condition
 *   unique(x[, sorted:int[, axis:int]]) -> y, indices, inverse, counts   reads x
 *   nms(boxes, scores[, max, iou, score][, center_point_box:int]) -> out   reads all
 * Unique and NonMaxSuppression run their whole algorithm here: the kernels
 * call the same functions and copy the result, so shape and data agree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kernel.h"
#include "movement.h"
#include "object.h"
#include "select.h"
#include "shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)
#define NOMEM(what) dvm_status_new(DVM_OUT_OF_MEMORY, "%s: no memory for %s", fn, what)

double dvm_elem_f64(const void *p, dvm_dtype dt, int64_t i) {
  switch (dt) {
  case DVM_F32: return ((const float *)p)[i];
  case DVM_F16: return dvm_f16_to_f32(((const uint16_t *)p)[i]);
  case DVM_BF16: return dvm_bf16_to_f32(((const uint16_t *)p)[i]);
  case DVM_F64: return ((const double *)p)[i];
  case DVM_I8: return ((const int8_t *)p)[i];
  case DVM_I16: return ((const int16_t *)p)[i];
  case DVM_I32: return ((const int32_t *)p)[i];
  case DVM_I64: return (double)((const int64_t *)p)[i];
  default: return ((const uint8_t *)p)[i]; /* u8, bool */
  }
}

int64_t dvm_elem_i64(const void *p, dvm_dtype dt, int64_t i) {
  switch (dt) {
  case DVM_I8: return ((const int8_t *)p)[i];
  case DVM_I16: return ((const int16_t *)p)[i];
  case DVM_I32: return ((const int32_t *)p)[i];
  case DVM_I64: return ((const int64_t *)p)[i];
  case DVM_U8:
  case DVM_BOOL: return ((const uint8_t *)p)[i];
  default: { /* floats: truncated, saturated, NaN as 0 */
    double v = dvm_elem_f64(p, dt, i);
    return v != v ? 0 : v >= 0x1p63 ? INT64_MAX : v < -0x1p63 ? INT64_MIN : (int64_t)v;
  }
  }
}

dvm_status *dvm_host_tensor(const char *fn, const dvm_value *in, int i, const char *what,
                            const dvm_tensor **t) {
  if (in[i].kind != DVM_VAL_TENSOR)
    return ERR("%s: input %d (%s): expected a tensor, got %s", fn, i, what,
               dvm_kind_name((dvm_kind)in[i].kind));
  if (!(*t = in[i].u.tensor)) return ERR("%s: input %d (%s) is a null tensor", fn, i, what);
  if ((*t)->storage->device != DVM_DEVICE_CPU)
    return ERR("%s: input %d (%s) is on %s; shape functions read host tensors", fn, i, what,
               dvm_device_name((dvm_device_kind)(*t)->storage->device));
  return NULL;
}

/* An int attribute at in[i] when there is one. */
static dvm_status *opt_int(const char *fn, const dvm_value *in, int nin, int i, const char *what,
                           int64_t *v) {
  return i < nin ? dvm_movement_int(fn, in, i, what, v) : NULL;
}

/* ---- gather_nd ---- */

dvm_status *dvm_gather_nd_infer(const dvm_value *in, int nin, dvm_gather_nd_info *p) {
  const char *fn = "gather_nd";
  int rd, ri;
  const int64_t *d, *x;
  int64_t b = 0;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 3, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rd, &d);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &ri, &x);
  if (!st) st = opt_int(fn, in, nin, 2, "batch_dims", &b);
  if (st) return st;
  char sd[DVM_SHAPE_STR_SIZE], sx[DVM_SHAPE_STR_SIZE];
  dvm_shape_str(sd, rd, d);
  dvm_shape_str(sx, ri, x);
  if (ri < 1 || rd < 1) return ERR("%s: data %s and indices %s must have rank 1 or more", fn, sd, sx);
  if (b < 0 || b >= ri || b >= rd)
    return ERR("%s: batch_dims %lld must be under the ranks of data %s and indices %s", fn,
               (long long)b, sd, sx);
  int64_t k = x[ri - 1];
  if (k < 1 || k > rd - b)
    return ERR("%s: indices %s index %lld dims, data %s has %lld after %lld batch dims", fn, sx,
               (long long)k, sd, (long long)(rd - b), (long long)b);
  for (int i = 0; i < b; i++)
    if (x[i] != d[i])
      return ERR("%s: batch dim %d differs: data %s, indices %s", fn, i, sd, sx);
  int rank = ri - 1 + rd - (int)b - (int)k;
  if (rank > DVM_MAX_RANK)
    return ERR("%s: data %s and indices %s give rank %d, over %d", fn, sd, sx, rank, DVM_MAX_RANK);
  p->batch_dims = (int)b;
  p->k = (int)k;
  p->rank = rank;
  memcpy(p->dims, x, sizeof(int64_t) * (size_t)(ri - 1));
  memcpy(p->dims + ri - 1, d + b + k, sizeof(int64_t) * (size_t)(rd - b - k));
  return NULL;
}

static dvm_status *shapefn_gather_nd(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_gather_nd_info p;
  dvm_status *st = dvm_shape_check_counts("gather_nd", nin, 2, 3, nout, 1);
  if (!st) st = dvm_gather_nd_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- onehot ---- */

dvm_status *dvm_onehot_infer(const dvm_value *in, int nin, dvm_onehot_info *p) {
  const char *fn = "onehot";
  int ri;
  const int64_t *x;
  const dvm_tensor *depth;
  int64_t axis = -1;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 3, 4, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &ri, &x);
  if (!st) st = dvm_host_tensor(fn, in, 1, "depth", &depth);
  if (!st) st = opt_int(fn, in, nin, 3, "axis", &axis);
  if (st) return st;
  char s[DVM_SHAPE_STR_SIZE];
  if (dvm_tensor_numel(depth) != 1 || depth->dtype == DVM_BOOL)
    return ERR("%s: depth has shape %s and dtype %s, want one number", fn,
               dvm_shape_str(s, depth->rank, depth->dims), dvm_dtype_name((dvm_dtype)depth->dtype));
  int64_t n = dvm_elem_i64(dvm_tensor_ptr(depth), (dvm_dtype)depth->dtype, 0);
  if (n < 1) return ERR("%s: depth is %lld, want 1 or more", fn, (long long)n);
  if (ri + 1 > DVM_MAX_RANK)
    return ERR("%s: indices %s: the output's rank would be over %d", fn, dvm_shape_str(s, ri, x),
               DVM_MAX_RANK);
  if (axis < -ri - 1 || axis > ri)
    return ERR("%s: axis %lld is out of range for rank %d", fn, (long long)axis, ri + 1);
  p->axis = (int)(axis < 0 ? axis + ri + 1 : axis);
  p->depth = n;
  p->rank = ri + 1;
  for (int i = 0, j = 0; i < p->rank; i++) p->dims[i] = i == p->axis ? n : x[j++];
  return NULL;
}

static dvm_status *shapefn_onehot(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_onehot_info p;
  dvm_status *st = dvm_shape_check_counts("onehot", nin, 3, 4, nout, 1);
  if (!st) st = dvm_onehot_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- compress ---- */

dvm_status *dvm_compress_infer(const dvm_value *in, int nin, dvm_compress_info *p) {
  const char *fn = "compress";
  int rx;
  const int64_t *x;
  const dvm_tensor *c;
  int64_t axis = 0;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 3, 1, 1);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rx, &x);
  if (!st) st = dvm_host_tensor(fn, in, 1, "condition", &c);
  if (!st) st = opt_int(fn, in, nin, 2, "axis", &axis);
  if (st) return st;
  char s[DVM_SHAPE_STR_SIZE], sc[DVM_SHAPE_STR_SIZE];
  if (c->rank != 1 || c->dtype != DVM_BOOL)
    return ERR("%s: condition is %s %s, want a 1-D bool tensor", fn,
               dvm_dtype_name((dvm_dtype)c->dtype), dvm_shape_str(sc, c->rank, c->dims));
  int64_t len = 1;
  if (nin == 3) {
    int a;
    if ((st = dvm_movement_axis(fn, axis, rx, &a))) return st;
    p->axis = a;
    len = x[a];
  } else {
    p->axis = -1;
    for (int i = 0; i < rx; i++) len *= x[i];
  }
  if (c->dims[0] > len)
    return ERR("%s: condition %s is longer than the %s of x %s (%lld)", fn,
               dvm_shape_str(sc, c->rank, c->dims), nin == 3 ? "axis" : "element count",
               dvm_shape_str(s, rx, x), (long long)len);
  const uint8_t *b = dvm_tensor_ptr(c);
  int64_t count = 0;
  for (int64_t i = 0; i < c->dims[0]; i++) count += b[i] != 0;
  p->count = count;
  if (p->axis < 0) {
    p->rank = 1;
    p->dims[0] = count;
  } else {
    p->rank = rx;
    memcpy(p->dims, x, sizeof(int64_t) * (size_t)rx);
    p->dims[p->axis] = count;
  }
  return NULL;
}

static dvm_status *shapefn_compress(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_compress_info p;
  dvm_status *st = dvm_shape_check_counts("compress", nin, 2, 3, nout, 1);
  if (!st) st = dvm_compress_infer(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  return NULL;
}

/* ---- a stable merge sort of int64 keys by a comparison with a context ---- */

typedef int (*cmp_fn)(const void *ctx, int64_t a, int64_t b);

static void merge_sort(int64_t *v, int64_t *tmp, int64_t n, cmp_fn cmp, const void *ctx) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = cmp(ctx, v[j], v[i]) < 0 ? v[j++] : v[i++];
      while (i < mid) tmp[k++] = v[i++];
      while (j < hi) tmp[k++] = v[j++];
    }
    memcpy(v, tmp, sizeof(int64_t) * (size_t)n);
  }
}

/* ---- unique ---- */

/* x as [outer, n, inner]: slices j of n compared element by element. */
typedef struct slices {
  const void *p;
  dvm_dtype dt;
  int64_t outer, n, inner;
} slices;

static int cmp_elem(const slices *s, int64_t i, int64_t j) {
  if (s->dt == DVM_F32 || s->dt == DVM_F64 || s->dt == DVM_F16 || s->dt == DVM_BF16) {
    double a = dvm_elem_f64(s->p, s->dt, i), b = dvm_elem_f64(s->p, s->dt, j);
    if (a < b) return -1;
    if (a > b) return 1;
    return (a != a) - (b != b); /* NaN after every number, equal to NaN */
  }
  int64_t a = dvm_elem_i64(s->p, s->dt, i), b = dvm_elem_i64(s->p, s->dt, j);
  return (a > b) - (a < b);
}

static int cmp_slices(const void *ctx, int64_t a, int64_t b) {
  const slices *s = ctx;
  for (int64_t o = 0; o < s->outer; o++)
    for (int64_t i = 0; i < s->inner; i++) {
      int64_t base = o * s->n * s->inner + i;
      int c = cmp_elem(s, base + a * s->inner, base + b * s->inner);
      if (c) return c;
    }
  return 0;
}

void dvm_unique_free(dvm_unique_info *p) {
  free(p->first);
  free(p->count);
  free(p->inverse);
  p->first = p->count = p->inverse = NULL;
}

dvm_status *dvm_unique_run(const dvm_value *in, int nin, dvm_unique_info *p) {
  const char *fn = "unique";
  const dvm_tensor *x;
  int64_t sorted = 1, axis = 0;
  memset(p, 0, sizeof *p);
  dvm_status *st = dvm_shape_check_counts(fn, nin, 1, 3, 1, 1);
  if (!st) st = dvm_host_tensor(fn, in, 0, "x", &x);
  if (!st) st = opt_int(fn, in, nin, 1, "sorted", &sorted);
  if (!st) st = opt_int(fn, in, nin, 2, "axis", &axis);
  if (st) return st;
  slices s = {dvm_tensor_ptr(x), (dvm_dtype)x->dtype, 1, dvm_tensor_numel(x), 1};
  p->axis = -1;
  if (nin == 3) {
    if ((st = dvm_movement_axis(fn, axis, x->rank, &p->axis))) return st;
    s.n = x->dims[p->axis];
    for (int i = 0; i < p->axis; i++) s.outer *= x->dims[i];
    for (int i = p->axis + 1; i < x->rank; i++) s.inner *= x->dims[i];
  }
  int64_t n = p->n = s.n, m = n ? n : 1;
  int64_t *order = malloc(sizeof(int64_t) * (size_t)m), *tmp = malloc(sizeof(int64_t) * (size_t)m);
  int64_t *map = malloc(sizeof(int64_t) * (size_t)m);
  p->first = malloc(sizeof(int64_t) * (size_t)m);
  p->count = malloc(sizeof(int64_t) * (size_t)m);
  p->inverse = malloc(sizeof(int64_t) * (size_t)m);
  if (!order || !tmp || !map || !p->first || !p->count || !p->inverse) {
    free(order), free(tmp), free(map), dvm_unique_free(p);
    return NOMEM("its groups");
  }
  for (int64_t i = 0; i < n; i++) order[i] = i;
  merge_sort(order, tmp, n, cmp_slices, &s);
  /* groups in sorted order: tmp holds where each starts, inverse the group of each */
  int64_t g = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || cmp_slices(&s, order[i - 1], order[i])) tmp[g++] = order[i];
    p->inverse[order[i]] = g - 1;
  }
  /* sorted: groups keep that order; else numbered by first occurrence */
  int64_t next = 0;
  for (int64_t i = 0; i < g; i++) map[i] = i;
  if (!sorted)
    for (int64_t i = 0; i < n; i++)
      if (tmp[p->inverse[i]] == i) map[p->inverse[i]] = next++;
  for (int64_t i = 0; i < g; i++) {
    p->first[map[i]] = tmp[i];
    p->count[map[i]] = 0;
  }
  for (int64_t i = 0; i < n; i++) {
    p->inverse[i] = map[p->inverse[i]];
    p->count[p->inverse[i]]++;
  }
  free(order), free(tmp), free(map);
  p->groups = g;
  if (p->axis < 0) {
    p->rank = 1;
    p->dims[0] = g;
  } else {
    p->rank = x->rank;
    memcpy(p->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    p->dims[p->axis] = g;
  }
  return NULL;
}

static dvm_status *shapefn_unique(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_unique_info p;
  if (nout < 1 || nout > 4)
    return ERR("unique: gives 1 to 4 outputs, asked for %d", nout);
  dvm_status *st = dvm_unique_run(in, nin, &p);
  if (st) return st;
  dvm_shape_set(&out[0], p.rank, p.dims);
  for (int i = 1; i < nout; i++) dvm_shape_set(&out[i], 1, i == 2 ? &p.n : &p.groups);
  dvm_unique_free(&p);
  return NULL;
}

/* ---- nms ---- */

typedef struct scored {
  const float *score;
} scored;

/* Higher score first, then lower index. */
static int cmp_score(const void *ctx, int64_t a, int64_t b) {
  const float *s = ((const scored *)ctx)->score;
  if (s[a] > s[b]) return -1;
  if (s[a] < s[b]) return 1;
  return (a > b) - (a < b);
}

/* Corners of box b (4 floats) as y1 <= y2, x1 <= x2. */
static void corners(const float *b, int center, float *y1, float *x1, float *y2, float *x2) {
  if (center) {
    *x1 = b[0] - b[2] / 2, *x2 = b[0] + b[2] / 2;
    *y1 = b[1] - b[3] / 2, *y2 = b[1] + b[3] / 2;
  } else {
    *y1 = fminf(b[0], b[2]), *y2 = fmaxf(b[0], b[2]);
    *x1 = fminf(b[1], b[3]), *x2 = fmaxf(b[1], b[3]);
  }
}

/* Whether IoU(a, b) > thr, as ONNX Runtime computes it (in float). */
static int suppresses(const float *a, const float *b, int center, float thr) {
  float ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
  corners(a, center, &ay1, &ax1, &ay2, &ax2);
  corners(b, center, &by1, &bx1, &by2, &bx2);
  float ix1 = fmaxf(ax1, bx1), ix2 = fminf(ax2, bx2), iy1 = fmaxf(ay1, by1), iy2 = fminf(ay2, by2);
  if (ix2 <= ix1 || iy2 <= iy1) return 0;
  float inter = (ix2 - ix1) * (iy2 - iy1);
  float area_a = (ax2 - ax1) * (ay2 - ay1), area_b = (bx2 - bx1) * (by2 - by1);
  float uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni > thr;
}

/* Input i of nms, a one-element tensor of dtype dt, or absent or empty. */
static dvm_status *nms_scalar(const dvm_value *in, int ntensors, int i, const char *what,
                              dvm_dtype dt, const void **v) {
  const char *fn = "nms";
  const dvm_tensor *t;
  *v = NULL;
  if (i >= ntensors) return NULL;
  dvm_status *st = dvm_host_tensor(fn, in, i, what, &t);
  if (st) return st;
  int64_t n = dvm_tensor_numel(t);
  if (t->dtype != dt || n > 1) {
    char s[DVM_SHAPE_STR_SIZE];
    return ERR("%s: input %d (%s) is %s %s, want one %s", fn, i, what,
               dvm_dtype_name((dvm_dtype)t->dtype), dvm_shape_str(s, t->rank, t->dims),
               dvm_dtype_name(dt));
  }
  if (n == 1) *v = dvm_tensor_ptr(t);
  return NULL;
}

dvm_status *dvm_nms_run(const dvm_value *in, int nin, dvm_nms_info *p) {
  const char *fn = "nms";
  const dvm_tensor *boxes, *scores;
  const void *vmax, *viou, *vscore;
  int64_t center = 0;
  memset(p, 0, sizeof *p);
  int ntensors = nin;
  while (ntensors > 0 && in[ntensors - 1].kind == DVM_VAL_INT) ntensors--;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 2, 6, 1, 1);
  if (!st && (ntensors < 2 || ntensors > 5 || nin - ntensors > 1))
    st = ERR("%s: takes 2 to 5 tensors and 1 optional int, got %d values", fn, nin);
  if (!st) st = dvm_host_tensor(fn, in, 0, "boxes", &boxes);
  if (!st) st = dvm_host_tensor(fn, in, 1, "scores", &scores);
  if (!st) st = nms_scalar(in, ntensors, 2, "max_output_boxes_per_class", DVM_I64, &vmax);
  if (!st) st = nms_scalar(in, ntensors, 3, "iou_threshold", DVM_F32, &viou);
  if (!st) st = nms_scalar(in, ntensors, 4, "score_threshold", DVM_F32, &vscore);
  if (!st && nin > ntensors) st = dvm_movement_int(fn, in, ntensors, "center_point_box", &center);
  if (st) return st;
  char sb[DVM_SHAPE_STR_SIZE], ss[DVM_SHAPE_STR_SIZE];
  dvm_shape_str(sb, boxes->rank, boxes->dims);
  dvm_shape_str(ss, scores->rank, scores->dims);
  if (boxes->dtype != DVM_F32 || scores->dtype != DVM_F32)
    return ERR("%s: boxes and scores are %s and %s, want f32", fn,
               dvm_dtype_name((dvm_dtype)boxes->dtype), dvm_dtype_name((dvm_dtype)scores->dtype));
  if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 ||
      scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
    return ERR("%s: boxes %s and scores %s: want [batches, boxes, 4] and [batches, classes, boxes]",
               fn, sb, ss);
  if (center != 0 && center != 1)
    return ERR("%s: center_point_box is %lld, want 0 or 1", fn, (long long)center);
  int64_t nb = boxes->dims[0], nc = scores->dims[1], n = boxes->dims[1];
  int64_t max = vmax ? *(const int64_t *)vmax : 0;
  float iou = viou ? *(const float *)viou : 0.0f;
  if (max <= 0 || n == 0) return NULL;
  if (max > n) max = n;
  int64_t *order = malloc(sizeof(int64_t) * (size_t)n), *tmp = malloc(sizeof(int64_t) * (size_t)n);
  int64_t *kept = malloc(sizeof(int64_t) * (size_t)max), cap = 0;
  if (!order || !tmp || !kept) {
    free(order), free(tmp), free(kept);
    return NOMEM("its candidates");
  }
  const float *pb = dvm_tensor_ptr(boxes), *ps = dvm_tensor_ptr(scores);
  for (int64_t b = 0; b < nb && !st; b++)
    for (int64_t c = 0; c < nc && !st; c++) {
      scored ctx = {ps + (b * nc + c) * n};
      int64_t m = 0, nk = 0;
      for (int64_t i = 0; i < n; i++)
        if (!vscore || ctx.score[i] > *(const float *)vscore) order[m++] = i;
      merge_sort(order, tmp, m, cmp_score, &ctx);
      for (int64_t i = 0; i < m && nk < max; i++) {
        const float *box = pb + (b * n + order[i]) * 4;
        int keep = 1;
        for (int64_t j = 0; j < nk && keep; j++)
          keep = !suppresses(box, pb + (b * n + kept[j]) * 4, (int)center, iou);
        if (!keep) continue;
        kept[nk++] = order[i];
        if (p->count == cap) {
          cap = cap ? 2 * cap : 64;
          int64_t *grown = realloc(p->sel, sizeof(int64_t) * 3 * (size_t)cap);
          if (!grown) {
            st = NOMEM("its selection");
            break;
          }
          p->sel = grown;
        }
        int64_t *row = p->sel + 3 * p->count++;
        row[0] = b, row[1] = c, row[2] = order[i];
      }
    }
  free(order), free(tmp), free(kept);
  if (st) {
    free(p->sel);
    p->sel = NULL;
    p->count = 0;
  }
  return st;
}

static dvm_status *shapefn_nms(const dvm_value *in, int nin, dvm_value *out, int nout) {
  dvm_nms_info p;
  dvm_status *st = dvm_shape_check_counts("nms", nin, 2, 6, nout, 1);
  if (!st) st = dvm_nms_run(in, nin, &p);
  if (st) return st;
  free(p.sel);
  dvm_shape_set(&out[0], 2, (int64_t[]){p.count, 3});
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_select_table[] = {
    {"gather_nd", shapefn_gather_nd},
    {"onehot", shapefn_onehot},
    {"compress", shapefn_compress},
    {"unique", shapefn_unique},
    {"nms", shapefn_nms},
    {NULL, NULL},
};
