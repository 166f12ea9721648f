/* Kernels that read or write at positions an index tensor gives, with ONNX
 * semantics. Indices are i64 or i32 and may be negative (counted from the
 * end); one out of range is a run-time error naming it, never a stray write.
 *
 *   scatter_nd(in: data, indices, updates; attrs: reduction:int) -> y
 *          y = data, then y[indices[j]] (a slice) = updates[j] for each j in
 *          order, or combined by reduction 1 add, 2 mul, 3 max, 4 min
 *   scatter_elements(in: data, indices, updates; attrs: axis:int[, reduction:int]) -> y
 *          y = data, then y[.., indices[p], ..] (at axis) = updates[p]
 *   gather_nd(in: data, indices; attrs: batch_dims:int) -> y   (select.h's shape)
 *   reverse_sequence(in: x, sequence_lens; attrs: batch_axis:int, time_axis:int) -> y
 *          the first sequence_lens[b] steps of batch b reversed
 *   eyelike(in: x; attrs: k:int) -> y      y 2-D of x's shape and any dtype:
 *          ones on diagonal k, zeros elsewhere
 *   onehot(in: indices, depth, values; attrs: axis:int) -> y
 *          values [off, on] give y's dtype; an index out of [-depth, depth)
 *          gives a row of off
 * Outputs have input 0's dtype except eyelike's and onehot's. */
#include <string.h>

#include "kernel.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/movement.h"
#include "ops/kargs.h"
#include "shapefuncs/select.h"
#include "shapefuncs/shape.h"

#define ERR(...) dvm_status_new(DVM_INVALID_ARGUMENT, __VA_ARGS__)

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int64_t numel_from(const dvm_tensor *t, int from) {
  int64_t n = 1;
  for (int i = from; i < t->rank; i++) n *= t->dims[i];
  return n;
}

static dvm_status *check_index_dtype(const char *op, const dvm_tensor *idx) {
  if (idx->dtype == DVM_I64 || idx->dtype == DVM_I32) return NULL;
  return ERR("%s: indices are %s, want i64 or i32", op, dvm_dtype_name((dvm_dtype)idx->dtype));
}

/* Index j of idx checked against a dim of n and made non-negative. */
static dvm_status *index_at(const char *op, const dvm_tensor *idx, int64_t j, int64_t n, int dim,
                            const dvm_tensor *data, int64_t *out) {
  int64_t k = dvm_elem_i64(dvm_tensor_ptr(idx), (dvm_dtype)idx->dtype, j);
  if (k < -n || k >= n) {
    char s[DVM_SHAPE_STR_SIZE];
    return ERR("%s: indices[%lld] = %lld is out of range for dim %d of data %s (size %lld)", op,
               (long long)j, (long long)k, dim, dvm_shape_str(s, data->rank, data->dims),
               (long long)n);
  }
  *out = k < 0 ? k + n : k;
  return NULL;
}

/* d[i] = d[i] (reduction) s[i] for n elements of dtype dt; integers wrap. */
#define COMBINE_LOOP(T, U)                                                            \
  for (int64_t i = 0; i < n; i++) {                                                   \
    T x = ((T *)d)[i], y = ((const T *)s)[i];                                         \
    ((T *)d)[i] = red == RED_ADD ? (T)((U)x + (U)y) : red == RED_MUL ? (T)((U)x * (U)y) \
                  : red == RED_MAX ? (y > x ? y : x) : (y < x ? y : x);                 \
  }
static void combine(dvm_dtype dt, int red, char *d, const char *s, int64_t n) {
  switch (dt) {
  case DVM_F32: COMBINE_LOOP(float, float) break;
  case DVM_F64: COMBINE_LOOP(double, double) break;
  case DVM_I8: COMBINE_LOOP(int8_t, uint32_t) break;
  case DVM_I16: COMBINE_LOOP(int16_t, uint32_t) break;
  case DVM_I32: COMBINE_LOOP(int32_t, uint32_t) break;
  case DVM_I64: COMBINE_LOOP(int64_t, uint64_t) break;
  case DVM_U8: COMBINE_LOOP(uint8_t, uint32_t) break;
  default: /* f16, bf16: in float */
    for (int64_t i = 0; i < n; i++) {
      uint16_t *pd = (uint16_t *)d + i, ps = ((const uint16_t *)s)[i];
      float x = dt == DVM_F16 ? dvm_f16_to_f32(*pd) : dvm_bf16_to_f32(*pd);
      float y = dt == DVM_F16 ? dvm_f16_to_f32(ps) : dvm_bf16_to_f32(ps);
      float r = red == RED_ADD ? x + y : red == RED_MUL ? x * y : red == RED_MAX ? (y > x ? y : x)
                                                                               : (y < x ? y : x);
      *pd = dt == DVM_F16 ? dvm_f32_to_f16(r) : dvm_f32_to_bf16(r);
    }
  }
}
#undef COMBINE_LOOP

/* The reduction attribute at attrs[i] (absent: none), checked against dt. */
static dvm_status *reduction_of(const char *op, const dvm_kernel_args *a, int i, dvm_dtype dt,
                                int *red) {
  *red = i < a->nattrs ? (int)a->attrs[i].u.i : RED_NONE;
  if (*red < RED_NONE || *red > RED_MIN) return ERR("%s: reduction %d is not 0 to 4", op, *red);
  if (*red != RED_NONE && dt == DVM_BOOL) return ERR("%s: a reduction on bool is not supported", op);
  return NULL;
}

/* Checks the attributes are ints; the first `want` of them must be there. */
static dvm_status *int_attrs(const char *op, const dvm_kernel_args *a, int want, int max) {
  if (a->nattrs < want || a->nattrs > max)
    return ERR("%s: takes %d to %d attributes, got %d", op, want, max, a->nattrs);
  for (int i = 0; i < a->nattrs; i++)
    if (a->attrs[i].kind != DVM_VAL_INT) return ERR("%s: attribute %d is not an int", op, i);
  return NULL;
}

/* y = data, as the scatters start. */
static void copy_data(const dvm_tensor *x, dvm_tensor *y) {
  size_t bytes = (size_t)dvm_tensor_numel(x) * dvm_dtype_size((dvm_dtype)x->dtype);
  if (bytes && dvm_tensor_ptr(y) != dvm_tensor_ptr(x)) memcpy(dvm_tensor_ptr(y), dvm_tensor_ptr(x), bytes);
}

/* ---- scatter_nd, gather_nd ---- */

/* The element offset in data of the k-tuple at row j of indices, over
 * data's dims from `from` (strides st). */
static dvm_status *tuple_offset(const char *op, const dvm_tensor *data, const dvm_tensor *idx,
                                int64_t j, int k, int from, const int64_t *st, int64_t *off) {
  *off = 0;
  for (int t = 0; t < k; t++) {
    int64_t v;
    dvm_status *s = index_at(op, idx, j * k + t, data->dims[from + t], from + t, data, &v);
    if (s) return s;
    *off += v * st[t];
  }
  return NULL;
}

static dvm_status *scatter_nd(const dvm_kernel_args *a) {
  const char *op = "scatter_nd";
  dvm_status *st = dvm_cpu_check_io(a, op, 3, 3, 1, 1);
  if (!st) st = int_attrs(op, a, 0, 1);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *u = a->in[2];
  dvm_tensor *y = a->out[0];
  int red;
  if ((st = reduction_of(op, a, 0, (dvm_dtype)x->dtype, &red)) || (st = check_index_dtype(op, idx)) ||
      (st = dvm_cpu_check_shape(op, y, 0, x->rank, x->dims)))
    return st;
  char sx[DVM_SHAPE_STR_SIZE], si[DVM_SHAPE_STR_SIZE], su[DVM_SHAPE_STR_SIZE];
  dvm_shape_str(sx, x->rank, x->dims);
  dvm_shape_str(si, idx->rank, idx->dims);
  dvm_shape_str(su, u->rank, u->dims);
  int k = idx->rank ? (int)idx->dims[idx->rank - 1] : -1;
  if (idx->rank < 1 || k < 1 || k > x->rank)
    return ERR("%s: indices %s: want rank 1 or more and a last dim 1 to %d (data %s)", op, si,
               x->rank, sx);
  /* updates: indices.dims[:-1] + data.dims[k:] */
  int ok = u->dtype == x->dtype && u->rank == idx->rank - 1 + x->rank - k;
  for (int i = 0; ok && i < u->rank; i++)
    ok = u->dims[i] == (i < idx->rank - 1 ? idx->dims[i] : x->dims[k + i - (idx->rank - 1)]);
  if (!ok)
    return ERR("%s: updates %s %s do not fit data %s %s and indices %s", op,
               dvm_dtype_name((dvm_dtype)u->dtype), su, dvm_dtype_name((dvm_dtype)x->dtype), sx, si);
  copy_data(x, y);
  int64_t slice = numel_from(x, k), rows = dvm_tensor_numel(idx) / k, strides[DVM_MAX_RANK];
  for (int t = k - 1; t >= 0; t--) strides[t] = t == k - 1 ? slice : strides[t + 1] * x->dims[t + 1];
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  char *py = dvm_tensor_ptr(y);
  const char *pu = dvm_tensor_ptr(u);
  for (int64_t j = 0; j < rows; j++) {
    int64_t off;
    if ((st = tuple_offset(op, x, idx, j, k, 0, strides, &off))) return st;
    char *d = py + off * (int64_t)esz;
    const char *s = pu + j * slice * (int64_t)esz;
    if (red == RED_NONE) memcpy(d, s, (size_t)slice * esz);
    else combine((dvm_dtype)x->dtype, red, d, s, slice);
  }
  return NULL;
}

static dvm_status *gather_nd(const dvm_kernel_args *a) {
  const char *op = "gather_nd";
  dvm_status *st = dvm_cpu_check_io(a, op, 2, 2, 1, 1);
  if (!st) st = int_attrs(op, a, 0, 1);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *y = a->out[0];
  dvm_value v[3] = {dvm_value_tensor(a->in[0]), dvm_value_tensor(a->in[1]), a->nattrs ? a->attrs[0] : dvm_value_int(0)};
  dvm_gather_nd_info p;
  if ((st = check_index_dtype(op, idx)) || (st = dvm_gather_nd_infer(v, 3, &p)) ||
      (st = dvm_cpu_check_shape(op, y, 0, p.rank, p.dims)))
    return st;
  int b = p.batch_dims, k = p.k;
  int64_t batches = 1, strides[DVM_MAX_RANK];
  for (int i = 0; i < b; i++) batches *= x->dims[i];
  int64_t slice = numel_from(x, b + k), per_batch = numel_from(x, b);
  int64_t rows = batches ? dvm_tensor_numel(idx) / k / batches : 0;
  for (int t = k - 1; t >= 0; t--) strides[t] = t == k - 1 ? slice : strides[t + 1] * x->dims[b + t + 1];
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  const char *px = dvm_tensor_ptr(x);
  char *py = dvm_tensor_ptr(y);
  for (int64_t bi = 0; bi < batches; bi++)
    for (int64_t j = 0; j < rows; j++) {
      int64_t off, row = bi * rows + j;
      if ((st = tuple_offset(op, x, idx, row, k, b, strides, &off))) return st;
      memcpy(py + row * slice * (int64_t)esz, px + (bi * per_batch + off) * (int64_t)esz,
             (size_t)slice * esz);
    }
  return NULL;
}

/* ---- scatter_elements ---- */

static dvm_status *scatter_elements(const dvm_kernel_args *a) {
  const char *op = "scatter_elements";
  dvm_status *st = dvm_cpu_check_io(a, op, 3, 3, 1, 1);
  if (!st) st = int_attrs(op, a, 1, 2);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *idx = a->in[1], *u = a->in[2];
  dvm_tensor *y = a->out[0];
  int red, axis;
  if ((st = reduction_of(op, a, 1, (dvm_dtype)x->dtype, &red)) || (st = check_index_dtype(op, idx)) ||
      (st = dvm_cpu_check_shape(op, y, 0, x->rank, x->dims)))
    return st;
  if (x->rank < 1) return ERR("%s: data is a scalar, want rank 1 or more", op);
  int64_t ax = a->attrs[0].u.i;
  if (ax < -x->rank || ax >= x->rank)
    return ERR("%s: axis %lld is out of range for rank %d", op, (long long)ax, x->rank);
  axis = (int)(ax < 0 ? ax + x->rank : ax);
  char sx[DVM_SHAPE_STR_SIZE], si[DVM_SHAPE_STR_SIZE], su[DVM_SHAPE_STR_SIZE];
  int ok = idx->rank == x->rank && u->rank == idx->rank && u->dtype == x->dtype;
  for (int i = 0; ok && i < idx->rank; i++)
    ok = u->dims[i] == idx->dims[i] && (i == axis || idx->dims[i] <= x->dims[i]);
  if (!ok)
    return ERR("%s: data %s %s, indices %s and updates %s %s: want updates of indices' shape and "
               "data's dtype, indices of data's rank and no larger off the axis",
               op, dvm_dtype_name((dvm_dtype)x->dtype), dvm_shape_str(sx, x->rank, x->dims),
               dvm_shape_str(si, idx->rank, idx->dims), dvm_dtype_name((dvm_dtype)u->dtype),
               dvm_shape_str(su, u->rank, u->dims));
  copy_data(x, y);
  int64_t total = dvm_tensor_numel(idx), pos[DVM_MAX_RANK] = {0}, xs[DVM_MAX_RANK];
  for (int i = x->rank - 1; i >= 0; i--) xs[i] = i == x->rank - 1 ? 1 : xs[i + 1] * x->dims[i + 1];
  size_t esz = dvm_dtype_size((dvm_dtype)x->dtype);
  char *py = dvm_tensor_ptr(y);
  const char *pu = dvm_tensor_ptr(u);
  for (int64_t j = 0; j < total; j++) {
    int64_t v, off = 0;
    if ((st = index_at(op, idx, j, x->dims[axis], axis, x, &v))) return st;
    for (int i = 0; i < x->rank; i++) off += (i == axis ? v : pos[i]) * xs[i];
    if (red == RED_NONE) memcpy(py + off * (int64_t)esz, pu + j * (int64_t)esz, esz);
    else combine((dvm_dtype)x->dtype, red, py + off * (int64_t)esz, pu + j * (int64_t)esz, 1);
    for (int i = idx->rank - 1; i >= 0 && ++pos[i] == idx->dims[i]; i--) pos[i] = 0;
  }
  return NULL;
}

/* ---- reverse_sequence ---- */

static dvm_status *reverse_sequence(const dvm_kernel_args *a) {
  const char *op = "reverse_sequence";
  dvm_status *st = dvm_cpu_check_io(a, op, 2, 2, 1, 1);
  if (!st) st = int_attrs(op, a, 2, 2);
  if (st) return st;
  const dvm_tensor *x = a->in[0], *lens = a->in[1];
  dvm_tensor *y = a->out[0];
  if ((st = dvm_cpu_check_shape(op, y, 0, x->rank, x->dims))) return st;
  int64_t ba = a->attrs[0].u.i, ta = a->attrs[1].u.i;
  char sx[DVM_SHAPE_STR_SIZE], sl[DVM_SHAPE_STR_SIZE];
  dvm_shape_str(sx, x->rank, x->dims);
  if (x->rank < 2 || !((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return ERR("%s: input %s with batch_axis %lld and time_axis %lld: want rank 2 or more and "
               "axes 0 and 1", op, sx, (long long)ba, (long long)ta);
  if ((lens->dtype != DVM_I64 && lens->dtype != DVM_I32) || lens->rank != 1 ||
      lens->dims[0] != x->dims[ba])
    return ERR("%s: sequence_lens is %s %s, want i64 or i32 [%lld] (the batch dim of %s)", op,
               dvm_dtype_name((dvm_dtype)lens->dtype), dvm_shape_str(sl, lens->rank, lens->dims),
               (long long)x->dims[ba], sx);
  int64_t steps = x->dims[ta], batch = x->dims[ba], inner = numel_from(x, 2);
  for (int64_t b = 0; b < batch; b++) {
    int64_t n = dvm_elem_i64(dvm_tensor_ptr(lens), (dvm_dtype)lens->dtype, b);
    if (n < 0 || n > steps)
      return ERR("%s: sequence_lens[%lld] = %lld is out of range [0, %lld]", op, (long long)b,
                 (long long)n, (long long)steps);
  }
  size_t row = (size_t)inner * dvm_dtype_size((dvm_dtype)x->dtype);
  const char *px = dvm_tensor_ptr(x);
  char *py = dvm_tensor_ptr(y);
  for (int64_t b = 0; b < batch; b++) {
    int64_t n = dvm_elem_i64(dvm_tensor_ptr(lens), (dvm_dtype)lens->dtype, b);
    for (int64_t t = 0; t < steps; t++) {
      int64_t src = t < n ? n - 1 - t : t;
      /* rows of [dim0, dim1, inner]: (t, b) or (b, t) */
      int64_t to = ta == 0 ? t * batch + b : b * steps + t, from = ta == 0 ? src * batch + b : b * steps + src;
      memcpy(py + to * (int64_t)row, px + from * (int64_t)row, row);
    }
  }
  return NULL;
}

/* ---- eyelike, onehot ---- */

static dvm_status *eyelike(const dvm_kernel_args *a) {
  const char *op = "eyelike";
  dvm_status *st = dvm_cpu_check_io(a, op, 1, 1, 1, 0);
  if (!st) st = int_attrs(op, a, 0, 1);
  if (st) return st;
  const dvm_tensor *x = a->in[0];
  dvm_tensor *y = a->out[0];
  char s[DVM_SHAPE_STR_SIZE];
  if (x->rank != 2) return ERR("%s: input %s is not 2-D", op, dvm_shape_str(s, x->rank, x->dims));
  if ((st = dvm_cpu_check_shape(op, y, 0, x->rank, x->dims))) return st;
  int64_t k = a->nattrs ? a->attrs[0].u.i : 0, m = x->dims[0], n = x->dims[1];
  dvm_dtype dt = (dvm_dtype)y->dtype;
  size_t esz = dvm_dtype_size(dt);
  uint64_t one = 0, zero = 0;
  switch (dt) {
  case DVM_F32: *(float *)&one = 1.0f; break;
  case DVM_F64: *(double *)&one = 1.0; break;
  case DVM_F16: one = dvm_f32_to_f16(1.0f); break;
  case DVM_BF16: one = dvm_f32_to_bf16(1.0f); break;
  default: one = 1; /* integers, bool: little-endian low bytes */
  }
  char *py = dvm_tensor_ptr(y);
  dvm_cpu_fill(py, &zero, esz, m * n, dvm_kargs_threads(a));
  for (int64_t i = 0; k > -m && k < n && i < m; i++) /* beyond the matrix, k sets nothing */
    if (i + k >= 0 && i + k < n) memcpy(py + (i * n + i + k) * (int64_t)esz, &one, esz);
  return NULL;
}

static dvm_status *onehot(const dvm_kernel_args *a) {
  const char *op = "onehot";
  dvm_status *st = dvm_cpu_check_io(a, op, 3, 3, 1, 0);
  if (!st) st = int_attrs(op, a, 0, 1);
  if (st) return st;
  const dvm_tensor *idx = a->in[0], *vals = a->in[2];
  dvm_tensor *y = a->out[0];
  dvm_value v[4] = {dvm_value_tensor(a->in[0]), dvm_value_tensor(a->in[1]), dvm_value_tensor(a->in[2]),
                    a->nattrs ? a->attrs[0] : dvm_value_int(-1)};
  dvm_onehot_info p;
  if ((st = dvm_onehot_infer(v, 4, &p)) || (st = dvm_cpu_check_shape(op, y, 0, p.rank, p.dims)))
    return st;
  char s[DVM_SHAPE_STR_SIZE];
  if (dvm_tensor_numel(vals) != 2 || vals->dtype != y->dtype)
    return ERR("%s: values are %s %s, want two of the output's dtype %s", op,
               dvm_dtype_name((dvm_dtype)vals->dtype), dvm_shape_str(s, vals->rank, vals->dims),
               dvm_dtype_name((dvm_dtype)y->dtype));
  if (idx->dtype == DVM_BOOL) return ERR("%s: indices are bool, want numbers", op);
  size_t esz = dvm_dtype_size((dvm_dtype)y->dtype);
  const char *pv = dvm_tensor_ptr(vals);
  char *py = dvm_tensor_ptr(y);
  dvm_cpu_fill(py, pv, esz, dvm_tensor_numel(y), dvm_kargs_threads(a));
  int64_t inner = numel_from(idx, p.axis), total = dvm_tensor_numel(idx), depth = p.depth;
  for (int64_t j = 0; j < total; j++) {
    int64_t k = dvm_elem_i64(dvm_tensor_ptr(idx), (dvm_dtype)idx->dtype, j);
    if (k < 0) k += depth;
    if (k < 0 || k >= depth) continue; /* out of range: the row stays off */
    int64_t o = j / inner, i = j % inner;
    memcpy(py + ((o * depth + k) * inner + i) * (int64_t)esz, pv + esz, esz);
  }
  return NULL;
}

const dvm_kernel_def dvm_cpu_scatter_kernels[] = {
    {"scatter_nd", DVM_DEVICE_CPU, scatter_nd, NULL},
    {"scatter_elements", DVM_DEVICE_CPU, scatter_elements, NULL},
    {"gather_nd", DVM_DEVICE_CPU, gather_nd, "gather_nd"},
    {"reverse_sequence", DVM_DEVICE_CPU, reverse_sequence, NULL},
    {"eyelike", DVM_DEVICE_CPU, eyelike, NULL},
    {"onehot", DVM_DEVICE_CPU, onehot, "onehot"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
