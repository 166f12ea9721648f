/* Shape kernels: a tensor's shape as data (ONNX Shape and Size), for
 * graphs that compute with shapes at run time. Shape functions "shape" and
 * "size" (shapefuncs/shapeop.c).
 *
 *   shape (in: x; attrs: start:int, end:int) -> y i64 [n]
 *       x's dims[start:end], ONNX Shape (opset 15) clamping: negative
 *       bounds count from the end, then both are clamped to [0, rank].
 *   size (in: x) -> y i64 [] : x's element count.
 *   from_shape (attrs: values:shape) -> y i64 [n] or [] : a shape value as
 *       data (the compiler folds shape arithmetic into registers, and makes
 *       a tensor of it only where a kernel needs one). y has n elements.
 *   fill (attrs: value:int|float) -> y of any shape and number dtype or
 *       bool, every element `value` (converted as C converts, f16 and bf16
 *       through f32 rounding to nearest even; bool: value != 0). Control
 *       flow uses it to make the iteration count and condition tensors of
 *       ONNX Loop bodies and to zero Scan 8's padded outputs, Dropout for
 *       its all-true mask; its output shape is the caller's. */
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/movement.h"
#include "ops/kargs.h"
#include "shapefuncs/shapeop.h"

static dvm_status *shape(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "shape", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  int64_t lo, hi;
  if ((st = dvm_shapeop_range(a->in[0]->rank, a->attrs, a->nattrs, &lo, &hi))) return st;
  const dvm_tensor *y = a->out[0];
  if (y->dtype != DVM_I64 || y->rank != 1 || y->dims[0] != hi - lo)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "shape: output must be i64[%lld]", (long long)(hi - lo));
  int64_t *out = dvm_tensor_ptr(y);
  for (int64_t i = lo; i < hi; i++) out[i - lo] = a->in[0]->dims[i];
  return NULL;
}

static dvm_status *size(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "size", 1, 1, DVM_DEVICE_CPU);
  if (st) return st;
  const dvm_tensor *y = a->out[0];
  if (y->dtype != DVM_I64 || y->rank != 0) return dvm_status_new(DVM_INVALID_ARGUMENT, "size: output must be i64[]");
  *(int64_t *)dvm_tensor_ptr(y) = dvm_tensor_numel(a->in[0]);
  return NULL;
}

static dvm_status *fill(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "fill", 0, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nattrs != 1 || (a->attrs[0].kind != DVM_VAL_INT && a->attrs[0].kind != DVM_VAL_FLOAT))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "fill: one attribute, an int or a float, is needed");
  const dvm_value *v = &a->attrs[0];
  double f = v->kind == DVM_VAL_INT ? (double)v->u.i : v->u.f;
  int64_t i = v->kind == DVM_VAL_INT ? v->u.i : (int64_t)v->u.f;
  const dvm_tensor *y = a->out[0];
  union {
    float f32;
    double f64;
    uint16_t u16;
    uint64_t u64;
    int64_t i64;
  } e = {.u64 = 0}; /* the element, in its low bytes (little-endian) */
  switch (y->dtype) {
  case DVM_F32: e.f32 = (float)f; break;
  case DVM_F64: e.f64 = f; break;
  case DVM_F16: e.u16 = dvm_f32_to_f16((float)f); break;
  case DVM_BF16: e.u16 = dvm_f32_to_bf16((float)f); break;
  case DVM_BOOL: e.i64 = f != 0; break;
  case DVM_I8: case DVM_I16: case DVM_I32: case DVM_I64:
  case DVM_U8: case DVM_U16: case DVM_U32: case DVM_U64: e.i64 = i; break; /* wraps as C's casts do */
  default: return dvm_status_new(DVM_INVALID_ARGUMENT, "fill: dtype %s is not supported", dvm_dtype_name((dvm_dtype)y->dtype));
  }
  dvm_cpu_fill(dvm_tensor_ptr(y), &e, dvm_dtype_size((dvm_dtype)y->dtype), dvm_tensor_numel(y), dvm_kargs_threads(a));
  return NULL;
}

static dvm_status *from_shape(const dvm_kernel_args *a) {
  dvm_status *st = dvm_kargs_check(a, "from_shape", 0, 1, DVM_DEVICE_CPU);
  if (st) return st;
  if (a->nattrs != 1 || a->attrs[0].kind != DVM_VAL_SHAPE)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "from_shape: one shape attribute is needed");
  const dvm_tensor *y = a->out[0];
  if (y->dtype != DVM_I64 || y->rank > 1 || dvm_tensor_numel(y) != a->attrs[0].rank)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "from_shape: output must be i64 of %d elements", a->attrs[0].rank);
  int64_t *out = dvm_tensor_ptr(y);
  for (int i = 0; i < a->attrs[0].rank; i++) out[i] = a->attrs[0].u.dims[i];
  return NULL;
}

const dvm_kernel_def dvm_cpu_shape_kernels[] = {
    {"from_shape", DVM_DEVICE_CPU, from_shape, NULL},
    {"fill", DVM_DEVICE_CPU, fill, NULL},
    {"shape", DVM_DEVICE_CPU, shape, "shape"},
    {"size", DVM_DEVICE_CPU, size, "size"},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
