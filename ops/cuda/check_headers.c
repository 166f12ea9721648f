/* Built only where the CUDA toolkit's cuda.h is present: proves that the
 * declarations in cuapi.h, which the rest of dvm builds from, are the
 * driver's own. A mismatch fails the build here, not a launch on a GPU. */
#include <cuda.h>

#define DVM_CUDA_TYPES_FROM_CUDA_H
#include "ops/cuda/cuapi.h"

/* Each table entry's type, written with cuda.h's types, is the declared
 * function's type. */
#define DVM_CUDA_SAME_TYPE(fn, ret, params)                                    \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), ret(*) params), \
                 #fn " in cuapi.h differs from cuda.h");
DVM_CUDA_API(DVM_CUDA_SAME_TYPE)

/* cuapi.h's own stand-ins for the types, as the rest of dvm sees them. */
_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult is not int-sized");
_Static_assert(sizeof(CUdevice) == sizeof(int), "CUdevice is not an int");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "CUdeviceptr size");
_Static_assert(sizeof(CUdevice_attribute) == sizeof(int), "CUdevice_attribute size");
_Static_assert(sizeof(CUjit_option) == sizeof(int), "CUjit_option size");

_Static_assert(DVM_CUDA_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert(DVM_CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert(DVM_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY");
_Static_assert(DVM_CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
_Static_assert(DVM_CU_ATTR_SM_COUNT == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
_Static_assert(DVM_CU_ATTR_MAX_THREADS_PER_SM == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
               "threads per SM");
_Static_assert(DVM_CU_ATTR_CC_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major");
_Static_assert(DVM_CU_ATTR_CC_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor");
_Static_assert(DVM_CU_ATTR_SMEM_OPTIN == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
               "smem optin");
_Static_assert(DVM_CU_JIT_ERROR_LOG_BUFFER == CU_JIT_ERROR_LOG_BUFFER, "jit log");
_Static_assert(DVM_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
               "jit log size");
_Static_assert(DVM_CU_FUNC_MAX_DYNAMIC_SHARED == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               "dynamic smem");
_Static_assert(DVM_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "non-blocking stream");
_Static_assert(DVM_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "event timing");

/* ISO C wants a translation unit to declare something. */
extern const int dvm_cuda_headers_checked;
const int dvm_cuda_headers_checked = 1;
