/* CUDA C for generated kernels (ops/cuda/gen_abi.h is the contract with
 * their launcher): elementwise kernels from a fused program (docs/fused.md),
 * ROWS kernels (softmax, log-softmax, layer norm, reductions over the
 * last axis) and GATHER kernels, each as T variants with a fully known tail plus one
 * bounds-checked baseline, launched in any of the block configurations; then the DVMG
 * payload that carries the source and NVRTC's images (docs/cuda.md). */
#ifndef DVMC_CUDA_CODEGEN_H
#define DVMC_CUDA_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "kernel.h"

/* Elements per thread-step, and so the variants per configuration. */
#define DVMC_CUDA_TILE 4
/* Block configurations, in the payload's order. */
#define DVMC_CUDA_NCONFIGS 2
extern const uint16_t dvmc_cuda_blocks[DVMC_CUDA_NCONFIGS];

/* The CUDA C of an elementwise kernel running the fused program `prog`
 * (validated first) with inputs indexed per `classes` (nin of
 * DVM_GEN_SAME...). *src is malloc'ed. */
DVM_MUST_USE dvm_status *dvmc_cuda_elementwise(const void *prog, size_t size,
                                               const uint8_t *classes, char **src);

/* An attribute of an invoke as the compiler knows it: an int or float
 * immediate, or unknown until run time. */
typedef struct dvmc_cuda_attr {
  enum { DVMC_ATTR_UNKNOWN, DVMC_ATTR_INT, DVMC_ATTR_FLOAT } kind;
  int64_t i;
  double f;
} dvmc_cuda_attr;

/* The fused program that computes what CPU kernel `kernel` (one of form
 * DVM_FORM_ELEMENTWISE: add, where, gelu, clip, cast...; ops/cpu/binary.c,
 * unary.c; another is DVM_INTERNAL) computes for one call
 * whose nin input dtypes and output dtype (dt[nin]) and attributes are
 * these, so that a standalone elementwise op runs as a generated kernel.
 * *prog (malloc'ed) is NULL where DVMF has no form with the CPU kernel's
 * exact semantics (integer division, clip of integers, float to i32
 * casts, mixed dtypes the CPU kernel refuses...): that call stays on the
 * host. */
DVM_MUST_USE dvm_status *dvmc_cuda_op_program(const char *kernel, int nin, const dvm_dtype *dt,
                                              int nattrs, const dvmc_cuda_attr *attrs,
                                              void **prog, size_t *size);

/* The fused program of a transpose of dtype dt: one load, read as
 * DVM_GEN_PERMUTED, one store. *prog is NULL for dtypes a register would
 * not carry bit for bit (f16, bf16 NaNs; bool bytes): those stay on the
 * host. */
DVM_MUST_USE dvm_status *dvmc_cuda_transpose_program(dvm_dtype dt, void **prog, size_t *size);

/* A GATHER kernel (gen_abi.h) of data of dtype `data` (any, copied bit
 * for bit) by indices of dtype `idx` (i32 or i64), as ELEMENTWISE
 * kernels tile the output. *src is malloc'ed. */
DVM_MUST_USE dvm_status *dvmc_cuda_gather(dvm_dtype data, dvm_dtype idx, char **src);

/* The CUDA C of a CONCAT kernel of nin inputs of dtype dt (any of 1, 2, 4
 * or 8 bytes, copied as bits), tiled as an ELEMENTWISE kernel over the
 * output seen as [outer, m, inner] (params.dims), input k's size along
 * the axis in params.numel[k]: each element reads the input whose range
 * of the axis holds it. */
DVM_MUST_USE dvm_status *dvmc_cuda_concat(dvm_dtype dt, int nin, char **src);

/* The CUDA C of a SPLIT kernel into nout outputs of dtype dt (as for a
 * concat), tiled over the input seen as [outer, m, inner], output k's size
 * along the axis in params.numel[k]: each element goes to the output
 * whose range of the axis holds it. */
DVM_MUST_USE dvm_status *dvmc_cuda_split(dvm_dtype dt, int nout, char **src);

/* The CUDA C of a WINDOW kernel (gen_abi.h) for max_pool's values
 * (DVM_FORM_WINDOW_MAX) or average_pool (DVM_FORM_WINDOW_AVERAGE) of f32,
 * tiled as an ELEMENTWISE kernel over the output, its taps combined in the
 * CPU kernel's order. */
DVM_MUST_USE dvm_status *dvmc_cuda_window(dvm_kernel_form form, dvm_dtype dt, char **src);

/* The CUDA C of a CONV kernel (gen_abi.h) of f32: conv (nin 2: X, W; 3:
 * and B) or fused_conv (its epilogue from the parameters; nin 4: and Z),
 * tiled as an ELEMENTWISE kernel over the output, a direct sum per
 * element over its group's channels and its window. */
DVM_MUST_USE dvm_status *dvmc_cuda_conv(int nin, char **src);

/* The CUDA C of a CONV_TRANSPOSE kernel (gen_abi.h) of f32: conv_transpose
 * of X, W (nin 2) and B (nin 3), tiled as an ELEMENTWISE kernel over the
 * output, a direct sum per element over the input positions and taps
 * that reach it. */
DVM_MUST_USE dvm_status *dvmc_cuda_conv_transpose(int nin, char **src);

/* The CUDA C of a MATMUL_NBITS kernel (gen_abi.h): matmul_nbits of nin
 * inputs (A, B, scales[, zero points][, bias]; zp the dtype of input 3,
 * u8 or f32, when nin > 3), tiled as an ELEMENTWISE kernel over Y, one
 * dot product in f32 per element. */
DVM_MUST_USE dvm_status *dvmc_cuda_matmul_nbits(int nin, dvm_dtype zp, char **src);

/* The CUDA C of a RESIZE kernel (gen_abi.h) of dtype dt (any of 1, 2, 4
 * or 8 bytes: nearest copies bits; linear is there for f32 only), tiled
 * as an ELEMENTWISE kernel over the output; coordinates as the CPU
 * kernel computes them, in double. */
DVM_MUST_USE dvm_status *dvmc_cuda_resize(dvm_dtype dt, char **src);

/* A ROWS kernel of form `form` (a DVM_FORM_ROWS_* of the CPU kernel it
 * stands for). Inputs: x, then for layer norm scale and optionally bias
 * (n elements each); output y: x's shape, or one element per row for the
 * reductions. dtypes: f32, f16 or bf16 (dt[0..nin-1] inputs, dt[nin]
 * output). */
DVM_MUST_USE dvm_status *dvmc_cuda_rows(dvm_kernel_form form, int nin, const dvm_dtype *dt,
                                        double epsilon, char **src);

/* Compiles `src` with NVRTC (sm_80 and sm_90 cubins, compute_80 PTX) and
 * lays out the DVMG payload (*payload malloc'ed): classes of the nin
 * inputs, dtypes of the inputs then the nout outputs. `name` names the
 * program in errors. */
DVM_MUST_USE dvm_status *dvmc_cuda_payload(int kind, int nin, int nout, const uint8_t *classes,
                                           const dvm_dtype *dtypes, const char *src,
                                           const char *name, void **payload, size_t *size);

#endif
