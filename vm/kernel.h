/* The calling conventions of kernels (ops/) and shape functions
 * (shapefuncs/): what the VM passes to them and what they return.
 *
 * Kernels are destination-passing: the VM allocates the outputs (their shapes
 * come from shape arithmetic or a shape function) and the kernel writes them.
 * Kernels check what they rely on (dtypes, shapes, attribute kinds) and fail
 * with a status naming the fact; they never trust the bytecode. */
#ifndef DVM_KERNEL_H
#define DVM_KERNEL_H

#include <stdbool.h>

#include "dvm/value.h"
#include "object.h"

/* Per-VM execution context handed to kernels. */
typedef struct dvm_exec {
  int threads; /* kernel threads this VM may use (>= 1) */
  int allow_tf32; /* dvm_vm_options.allow_tf32 */
  /* The VM's stream on each device (vm/device.h), made before the VM's
   * first kernel or copy there; a device's kernels read their own. */
  struct dvm_stream *streams[DVM_DEVICE_COUNT];
  /* The strings the current kernel call made (dvm_string_make), each with
   * the one reference the VM drops once the call's string outputs hold
   * theirs: a string made and not stored, or made by a failed call, goes. */
  dvm_string **made;
  size_t nmade, made_cap;
} dvm_exec;

/* For a kernel writing a DVM_STRING output: a new string of len bytes
 * copied from s (NULL for ""), for the call's outputs only. The VM retains
 * every element of a string output after the call, so a kernel stores
 * made strings and its string inputs' elements as they are. Not from
 * kernel threads: one thread per call. */
DVM_MUST_USE dvm_status *dvm_string_make(dvm_exec *ex, const char *s, size_t len, dvm_string **out);
/* Drops the references of the strings the call made (the VM, after it). */
void dvm_strings_made_drop(dvm_exec *ex);

/* An invoke's attribute as the linker guesses it from a linear walk: the
 * value an `imm` put in its register, if one did and nothing wrote it since
 * (a jump may bring another: a kernel uses a hint to choose what to
 * prepare, never to compute). */
typedef struct dvm_attr_hint {
  int known;
  int64_t value;
} dvm_attr_hint;

typedef struct dvm_kernel_args {
  dvm_tensor *const *in;
  int nin;
  dvm_tensor *const *out;
  int nout;
  const dvm_value *attrs;
  int nattrs;
  int64_t variant;       /* from the variant selector register; 0 if none */
  const void *payload;   /* the kernel table entry's payload (e.g. a fused program) */
  size_t payload_size;
  dvm_exec *exec;
} dvm_kernel_args;

typedef dvm_status *(*dvm_kernel_fn)(const dvm_kernel_args *a);

/* What `dvm disasm` shows of a kernel table entry's payload: a summary
 * line, and the source code the payload carries, if any. */
typedef struct dvm_payload_desc {
  char summary[1024];
  const char *language; /* of the source: "CUDA C" */
  const char *source;   /* points into the payload; not NUL-terminated */
  size_t source_size;   /* 0: no source */
} dvm_payload_desc;

/* What a kernel computes, in the terms of a device that generates its own
 * kernels: a call of a kernel with a form may run there as a generated
 * kernel of that form (compiler/place_cuda.c, docs/cuda.md); one without
 * stays on the host. (A device's library kernel of the same name, cuBLAS's
 * matmul, is called instead, whatever the form.) */
typedef enum dvm_kernel_form {
  DVM_FORM_NONE,
  DVM_FORM_ELEMENTWISE, /* one elementwise op on its inputs (add, where, cast...) */
  DVM_FORM_FUSED,       /* the elementwise program its payload holds */
  DVM_FORM_PERMUTED,    /* its input copied through the perm attribute (transpose) */
  DVM_FORM_GATHER,      /* ONNX Gather along the axis attribute */
  DVM_FORM_SLICED,      /* its input 0 copied through inputs 1.. (starts, ends, axes, steps: slice) */
  DVM_FORM_CONCAT,      /* its inputs joined along the axis attribute */
  DVM_FORM_SPLIT,       /* its input 0 cut along the axis attribute (input 1: the sizes) */
  DVM_FORM_WINDOW_MAX,  /* max_pool's values: a window's maximum (attributes kernel_shape...) */
  DVM_FORM_WINDOW_AVERAGE, /* average_pool: a window's mean */
  DVM_FORM_RESIZE,      /* ONNX Resize by its attributes (sizes, mode...) */
  DVM_FORM_CONV,        /* conv, or fused_conv with its epilogue (attributes strides...) */
  DVM_FORM_CONV_TRANSPOSE, /* conv_transpose (attributes strides..., output_padding) */
  DVM_FORM_MATMUL_NBITS, /* matmul_nbits: A times block-quantized B (attributes present, K...) */
  /* one row at a time along the last axis (the reductions: or along the
   * trailing axes their axes name); the ROWS forms come last */
  DVM_FORM_ROWS_SOFTMAX,
  DVM_FORM_ROWS_LOGSOFTMAX,
  DVM_FORM_ROWS_LAYERNORM,
  DVM_FORM_ROWS_RMSNORM, /* layer norm without the mean (SimplifiedLayerNormalization) */
  DVM_FORM_ROWS_SUM,
  DVM_FORM_ROWS_MEAN,
  DVM_FORM_ROWS_MAX,
  DVM_FORM_ROWS_MIN,
  DVM_FORM_ROWS_GLOBAL_MEAN, /* the mean over every axis from 2 on (GlobalAveragePool) */
} dvm_kernel_form;

typedef struct dvm_kernel_def {
  const char *name;       /* as named by the .dvmb kernel table */
  dvm_device_kind device;
  dvm_kernel_fn fn;
  /* The shape function that computes the outputs' shapes from the same
   * inputs and attributes, or NULL when the outputs take an input's shape. */
  const char *shapefn;
  /* The dtypes input 0 may have, one bit per dvm_dtype (DVM_DTYPES below);
   * 0 leaves the check to the kernel. The compiler refuses others up
   * front, naming the dtype, instead of failing at run time. */
  uint32_t dtypes;
  /* Optional: when a module is linked, called once for each constant
   * tensor t that the bytecode loads into a register this kernel reads as
   * input `input`. It may build a form of t the kernel runs faster from
   * (a weight in its microkernel's layout): *data (left NULL to decline)
   * and *free_data. The linker attaches it to t; the kernel finds it with
   * dvm_tensor_packed(t, its def, input) and runs from t's plain data where
   * there is none (docs/kernels.md). `attrs` say which of the invoke's
   * nattrs attributes the linker saw loaded by `imm`, and their values. */
  dvm_status *(*prepack)(const dvm_tensor *t, int input, const struct dvm_attr_hint *attrs,
                         int nattrs, void **data, void (**free_data)(void *));
  /* Set when the kernel, given an input it built a form of, never reads
   * that input's plain bytes: a constant of an external data file read
   * only so is then held only as its forms (vm/extdata.c). */
  int prepack_replaces;
  /* Set when output 0 may be the very memory of any input of its byte
   * size: every element of that input is read before the output element
   * at the same index is written. The compiler's memory plan then lets an
   * output take a dying input's storage (compiler/plan.h); the CUDA kernel
   * placed for the op must allow the same. */
  int inplace;
  /* Optional: reads a payload of this kernel's with its own checked reader
   * into *out, or fails naming what is wrong with it (the disassembler
   * shows payloads through this, never decoding them itself). */
  DVM_MUST_USE dvm_status *(*describe)(const void *payload, size_t size, dvm_payload_desc *out);
  /* The form in which a device that generates kernels may run a call of
   * this kernel (above); DVM_FORM_NONE: none. */
  dvm_kernel_form form;
  /* Set when the kernel takes paged KV caches (dvm_tensor_wrap_paged)
   * and reads and writes them through their block tables; the VM gives
   * one to no other kernel. */
  int paged;
  /* Set when the kernel takes DVM_STRING tensors. A string output it
   * writes then holds only elements of its string inputs and strings it
   * made (dvm_string_make); the VM empties each before the call and retains
   * its elements after. DVM_STRINGS_UPDATE: the kernel writes part of its
   * string outputs in place and keeps the rest (copy_into), so the VM does
   * neither; it releases each element it overwrites and retains each it
   * stores. The VM gives string tensors to no other kernel. */
  int strings;
} dvm_kernel_def;

#define DVM_STRINGS_UPDATE 2

#define DVM_DTYPE_BIT(dt) (1u << (dt))
#define DVM_DTYPES_FLOAT (DVM_DTYPE_BIT(DVM_F32) | DVM_DTYPE_BIT(DVM_F64) | DVM_DTYPE_BIT(DVM_F16) | DVM_DTYPE_BIT(DVM_BF16))
#define DVM_DTYPES_INT (DVM_DTYPE_BIT(DVM_I32) | DVM_DTYPE_BIT(DVM_I64))
#define DVM_DTYPES_UINT (DVM_DTYPE_BIT(DVM_U8) | DVM_DTYPE_BIT(DVM_U16) | DVM_DTYPE_BIT(DVM_U32) | \
    DVM_DTYPE_BIT(DVM_U64))
/* every integer dtype, signed and unsigned (not bool) */
#define DVM_DTYPES_INTEGER (DVM_DTYPE_BIT(DVM_I8) | DVM_DTYPE_BIT(DVM_I16) | DVM_DTYPE_BIT(DVM_I32) | \
    DVM_DTYPE_BIT(DVM_I64) | DVM_DTYPES_UINT)
static inline int dvm_dtype_is_int(dvm_dtype dt) {
  return (unsigned)dt < DVM_DTYPE_COUNT && (DVM_DTYPES_INTEGER & DVM_DTYPE_BIT(dt)) != 0;
}

/* Shape functions: compute output values (usually shapes) from input values
 * (tensors, shapes, scalars). Data-dependent ones read host tensor data. */
typedef dvm_status *(*dvm_shapefn_fn)(const dvm_value *in, int nin, dvm_value *out, int nout);

typedef struct dvm_shapefn_def {
  const char *name;
  dvm_shapefn_fn fn;
  bool dims_only; /* reads only its tensors' rank and dims, never their data,
                   * so a tensor on any device will do (CUDA placement
                   * leaves it there: no copy to the host, no wait) */
} dvm_shapefn_def;

#endif
