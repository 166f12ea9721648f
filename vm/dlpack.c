/* DLPack import and export. */
#include <string.h>
#include <stdlib.h>

#include "dvm/dlpack.h"
#include "object.h"

static const struct {
  uint8_t code, bits;
  dvm_dtype dt;
} dl_types[] = {
    {kDLFloat, 32, DVM_F32}, {kDLFloat, 16, DVM_F16}, {kDLBfloat, 16, DVM_BF16},
    {kDLFloat, 64, DVM_F64}, {kDLInt, 8, DVM_I8},     {kDLInt, 16, DVM_I16},
    {kDLInt, 32, DVM_I32},   {kDLInt, 64, DVM_I64},   {kDLUInt, 8, DVM_U8},
    {kDLUInt, 16, DVM_U16},  {kDLUInt, 32, DVM_U32},  {kDLUInt, 64, DVM_U64},
#if DLPACK_VERSION >= 80
    {kDLBool, 8, DVM_BOOL},
#else
    {kDLUInt, 8, DVM_BOOL}, /* DLPack before 0.8 has no bool: exported as u8 */
#endif
};

static void release_managed(void *ctx) {
  DLManagedTensor *mt = ctx;
  if (mt->deleter) mt->deleter(mt);
}

dvm_status *dvm_tensor_from_dlpack(DLManagedTensor *src, dvm_tensor **out) {
  const DLTensor *t = &src->dl_tensor;
  dvm_device_kind dev;
  if (t->device.device_type == kDLCPU) {
    dev = DVM_DEVICE_CPU;
  } else if (t->device.device_type == kDLCUDA && t->device.device_id == 0) {
    dev = DVM_DEVICE_CUDA; /* dvm runs on the first CUDA device (ops/cuda/cuapi.c) */
  } else if (t->device.device_type == kDLCUDA) {
    return dvm_status_new(DVM_UNIMPLEMENTED, "DLPack tensor on CUDA device %d: dvm runs on device 0 only",
                          (int)t->device.device_id);
  } else {
    return dvm_status_new(DVM_UNIMPLEMENTED, "DLPack device type %d: only CPU (1) and CUDA (2) tensors "
                          "can be imported", (int)t->device.device_type);
  }
  int dt = -1;
  for (size_t i = 0; i < sizeof dl_types / sizeof dl_types[0]; i++)
    if (t->dtype.code == dl_types[i].code && t->dtype.bits == dl_types[i].bits && t->dtype.lanes == 1)
      dt = (int)dl_types[i].dt;
  if (dt < 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "DLPack dtype (code %u, %u bits, %u lanes) has no dvm dtype",
                          t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (t->ndim < 0 || t->ndim > DVM_MAX_RANK)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "DLPack rank %d is outside 0..%d", t->ndim, DVM_MAX_RANK);
  if (t->strides) { /* dense row-major strides are fine, anything else is not */
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (t->shape[d] != 1 && t->strides[d] != expect)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "DLPack tensor is not dense row-major (dim %d "
                                                    "stride %lld, expected %lld)", d,
                              (long long)t->strides[d], (long long)expect);
      expect *= t->shape[d];
    }
  }
  dvm_tensor *r;
  dvm_status *st = dvm_tensor_wrap_on(dev, (dvm_dtype)dt, t->ndim, t->shape, (char *)t->data + t->byte_offset,
                                      release_managed, src, &r);
  if (st) return st;
  *out = r;
  return NULL;
}

typedef struct {
  DLManagedTensor mt;
  int64_t shape[DVM_MAX_RANK];
} exported;

static void export_deleter(DLManagedTensor *self) {
  dvm_tensor_release(self->manager_ctx);
  free(self);
}

dvm_status *dvm_tensor_to_dlpack(dvm_tensor *t, DLManagedTensor **out) {
  exported *e = calloc(1, sizeof *e);
  if (!e) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int i;
  for (i = 0; i < (int)(sizeof dl_types / sizeof dl_types[0]); i++)
    if (dl_types[i].dt == t->dtype) break;
  memcpy(e->shape, t->dims, sizeof(int64_t) * t->rank);
  DLTensor *d = &e->mt.dl_tensor;
  d->data = t->storage->ptr;
  d->byte_offset = t->offset;
  d->device.device_type = t->storage->device == DVM_DEVICE_CUDA ? kDLCUDA : kDLCPU;
  d->device.device_id = 0;
  d->ndim = t->rank;
  d->dtype.code = dl_types[i].code;
  d->dtype.bits = dl_types[i].bits;
  d->dtype.lanes = 1;
  d->shape = e->shape;
  d->strides = NULL; /* dense row-major */
  dvm_tensor_retain(t);
  e->mt.manager_ctx = t;
  e->mt.deleter = export_deleter;
  *out = &e->mt;
  return NULL;
}
