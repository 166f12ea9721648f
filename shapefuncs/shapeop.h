/* Shapes of the shape kernels (ops/cpu/shape.c). */
#ifndef DVM_SHAPEFUNCS_SHAPEOP_H
#define DVM_SHAPEFUNCS_SHAPEOP_H

#include "dvm/value.h"

/* ONNX Shape's [start, end) for rank: attrs start:int and end:int
 * (optional, default 0 and rank), negative from the end, clamped. */
DVM_MUST_USE dvm_status *dvm_shapeop_range(int rank, const dvm_value *attrs, int nattrs, int64_t *lo,
                                           int64_t *hi);

#endif
