/* DLPack interchange: pass tensors to and from other frameworks without
 * copying. Needs <dlpack/dlpack.h> (Debian: libdlpack-dev). */
#ifndef DVM_DLPACK_H
#define DVM_DLPACK_H

#include <dlpack/dlpack.h>

#include "dvm/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Takes ownership of `src` (its deleter runs when the tensor's last reference
 * goes), on success only. CPU tensors and CUDA tensors of device 0 are
 * imported in place; a CUDA tensor is an input of the NAME@cuda functions
 * only (a CPU function refuses it). The producer's stream is not known, so
 * a VM given an imported CUDA tensor waits for the whole device once before
 * the call (one counted host sync). Fails for dtypes, devices or strides dvm
 * does not support (dvm tensors are dense and row-major). */
DVM_API DVM_MUST_USE dvm_status *dvm_tensor_from_dlpack(DLManagedTensor *src, dvm_tensor **out);

/* A DLManagedTensor that holds one reference to `t`; the consumer calls its
 * deleter when done. */
DVM_API DVM_MUST_USE dvm_status *dvm_tensor_to_dlpack(dvm_tensor *t, DLManagedTensor **out);

#ifdef __cplusplus
}
#endif
#endif
