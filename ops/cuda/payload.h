/* The DVMG payload of a generated kernel (gen_abi.h), read and checked in
 * full before anything is loaded on a device, and the two choices made
 * from it without a device: which image suits an architecture, and which
 * configuration suits a shape. Kept apart from the launcher (gen.c) so the
 * tests exercise all of it on machines without a GPU. */
#ifndef DVM_OPS_CUDA_PAYLOAD_H
#define DVM_OPS_CUDA_PAYLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "dvm/value.h"
#include "kernel.h"
#include "ops/cuda/gen_abi.h"

#define DVM_GEN_MAX_IMAGES 16
#define DVM_GEN_MAX_BLOCK 1024
#define DVM_GEN_MAX_SHARED (227 * 1024) /* the most any sm_80..sm_90 block may opt in to */

typedef struct dvm_gen_config {
  uint16_t block, per_thread;
  uint32_t shared;
} dvm_gen_config;

typedef struct dvm_gen_image {
  uint32_t arch; /* 80, 90, ...; 0 = PTX */
  const uint8_t *data;
  uint32_t size;
} dvm_gen_image;

typedef struct dvm_gen_payload {
  int kind, nconfigs, nin, nout, tile, nimages;
  dvm_gen_config configs[DVM_GEN_MAX_CONFIGS];
  uint8_t classes[DVM_GEN_MAX_IN];
  uint8_t dtypes[DVM_GEN_MAX_IN + DVM_GEN_MAX_OUT]; /* inputs, then outputs */
  dvm_gen_image images[DVM_GEN_MAX_IMAGES];
  const char *source; /* not NUL-terminated; may be empty */
  uint32_t source_size;
} dvm_gen_payload;

/* Reads and checks every field, offset and size of `size` bytes at p; out
 * points into p. Fails with DVM_CORRUPT naming the field and the rule:
 * "DVMG payload: image 1 (sm_90): bytes 400..9000 are past the end (812)". */
DVM_MUST_USE dvm_status *dvm_gen_payload_read(const void *p, size_t size, dvm_gen_payload *out);

/* The payload as `dvm disasm` shows it (the "gen" kernel's describe hook,
 * vm/kernel.h): its kind, tile, configs and images on one line, and its
 * CUDA C source. Fails as dvm_gen_payload_read does. */
DVM_MUST_USE dvm_status *dvm_gen_payload_describe(const void *p, size_t size, dvm_payload_desc *out);

/* Compute capability 0.1, which no NVIDIA device has: the host emulation
 * (the stand-in driver, tests/cuda/fake_cuda.c) reports it, and is handed
 * the payload's CUDA C source as its image, which it compiles for the
 * host (docs/cuda-runtime.md). */
#define DVM_GEN_SOURCE_SM 1

/* The image for a device of compute capability `sm` (80, 90, ...): the
 * cubin built for exactly it, else the PTX (JIT-compiled by the driver);
 * for DVM_GEN_SOURCE_SM the source, arch DVM_GEN_SOURCE_SM. *out points
 * into g. DVM_UNAVAILABLE, listing what there is, when none fits. */
DVM_MUST_USE dvm_status *dvm_gen_payload_image(const dvm_gen_payload *g, int sm, dvm_gen_image *out);

/* The extent n and row count of a call: ELEMENTWISE n = elements of
 * output 0, rows 1; ROWS n = innermost dim of input 0, rows = the rest. */
typedef struct dvm_gen_shape {
  long long n, rows;
} dvm_gen_shape;

/* Blocks of config c for a call: ELEMENTWISE, one block per block *
 * per_thread elements; ROWS, one block per row. */
long long dvm_gen_grid(const dvm_gen_payload *g, int c, dvm_gen_shape s);

/* The occupancy cost model: config c runs its grid in waves of
 * blocks_per_sm[c] * sm_count blocks, each wave taking as long as one
 * block's serial work (per_thread elements a thread for ELEMENTWISE, a
 * row's n / block steps for ROWS). The cheapest config wins; ties go to
 * the lower index (the compiler lists its preferred first). Configs that
 * cannot run (0 blocks per SM) are skipped; -1 if none can. */
int dvm_gen_choose(const dvm_gen_payload *g, dvm_gen_shape s, int sm_count, const int *blocks_per_sm);

/* The strides (elements, over y's dims right-aligned to
 * DVM_GEN_MAX_RANK) through which a PERMUTED input x is read when the
 * call's attributes carry transpose's perm: y must be x transposed by it
 * (the CPU "transpose"'s shape function decides, so the two agree).
 * DVM_INVALID_ARGUMENT, naming the perm or the shapes, otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_permuted_strides(const dvm_tensor *x, const dvm_tensor *y,
                                                  const dvm_value *attrs, int nattrs,
                                                  long long *strides);

/* The strides (as above) and the element offset through which a SLICED
 * input x is read when the call's attributes carry slice's starts, ends
 * and optionally axes and steps (shapes or host tensors): y must be x
 * sliced by them (the CPU "slice"'s shape function decides). A step may be
 * negative, and so may a stride. DVM_INVALID_ARGUMENT otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_sliced_strides(const dvm_tensor *x, const dvm_tensor *y,
                                                const dvm_value *attrs, int nattrs,
                                                long long *strides, long long *offset);

/* A CONCAT call's extents: dims (as for a gather) get [outer, m, inner] of
 * the output (m its size along the axis), sizes[k] input k's size along
 * it (attribute 0, as for the CPU "concat", whose shape function decides
 * and checks the inputs' and y's shapes). DVM_INVALID_ARGUMENT otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_concat_extents(dvm_tensor *const *in, int nin, const dvm_tensor *y,
                                                const dvm_value *attrs, int nattrs, long long *dims,
                                                long long *sizes);

/* A SPLIT call's extents: dims get [outer, m, inner] of x (as for a
 * concat), sizes[k] output k's size along the axis (the attributes as the
 * CPU "split" takes them after x: a shape of sizes when given, the axis,
 * num_outputs; its shape function decides, and each output's shape is
 * checked). DVM_INVALID_ARGUMENT otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_split_extents(const dvm_tensor *x, dvm_tensor *const *out, int nout,
                                               const dvm_value *attrs, int nattrs, long long *dims,
                                               long long *sizes);

/* A WINDOW call's geometry (gen_abi.h): X [N, C, spatial...] pooled by the
 * call's attributes (the CPU "max_pool"'s or "average_pool"'s, whose
 * shape function decides and checks them and y's shape; `op` names which
 * in errors): dims get y as [1, 1, N * C, d, h, w], geom the window's
 * rows. DVM_INVALID_ARGUMENT otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_window_geometry(const char *op, const dvm_tensor *x, const dvm_tensor *y,
                                                 const dvm_value *attrs, int nattrs, long long *dims,
                                                 long long (*geom)[DVM_GEN_MAX_RANK]);

/* A MATMUL_NBITS call's geometry (gen_abi.h): the call's inputs, output
 * and attributes checked as the CPU "matmul_nbits" checks them
 * (ops/cpu/nbits.h); geom gets row DVM_GEN_NBITS. g_idx and
 * weight_prepacked are DVM_UNIMPLEMENTED; DVM_INVALID_ARGUMENT otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_nbits_geometry(const dvm_kernel_args *a, long long (*geom)[DVM_GEN_MAX_RANK]);

/* A CONV call's geometry: X, W[, B[, Z]] (nin) by the call's attributes
 * (the CPU "conv"'s four, or "fused_conv"'s eleven, whose shape function
 * decides and checks them, and y's and Z's shapes): dims get y as [1, N,
 * M, d, h, w], geom the window's rows and DVM_GEN_CONV_SHAPE, real[0] the
 * epilogue's parameters (identity for a conv). A channels-last layout is
 * DVM_UNIMPLEMENTED; DVM_INVALID_ARGUMENT otherwise. With transpose, a
 * CONV_TRANSPOSE call's: X, W[, B] and "conv_transpose"'s five
 * attributes, through its shape function; the epilogue the identity. */
DVM_MUST_USE dvm_status *dvm_gen_conv_geometry(bool transpose, dvm_tensor *const *in, int nin,
                                               const dvm_tensor *y, const dvm_value *attrs, int nattrs,
                                               long long *dims, long long (*geom)[DVM_GEN_MAX_RANK],
                                               double (*real)[DVM_GEN_MAX_RANK]);

/* A RESIZE call's geometry: dims get y's dims right-aligned, geom and real
 * the rows gen_abi.h names, from the call's attributes (the CPU
 * "resize"'s, whose shape function decides and checks them and y's
 * shape). Nearest, and linear of f32 without antialias or
 * exclude_outside; not tf_crop_and_resize: DVM_UNIMPLEMENTED for the
 * rest; DVM_INVALID_ARGUMENT otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_resize_geometry(const dvm_tensor *x, const dvm_tensor *y,
                                                 const dvm_value *attrs, int nattrs, long long *dims,
                                                 long long (*geom)[DVM_GEN_MAX_RANK],
                                                 double (*real)[DVM_GEN_MAX_RANK]);

/* A GATHER call's extents: dims (DVM_GEN_MAX_RANK, right-aligned) get
 * [outer, m, inner] of the output, *size data's size along the axis
 * (attribute 0, as for the CPU "gather", whose shape function decides and
 * checks y's shape). DVM_INVALID_ARGUMENT, naming what is wrong, otherwise. */
DVM_MUST_USE dvm_status *dvm_gen_gather_extents(const dvm_tensor *data, const dvm_tensor *idx,
                                                const dvm_tensor *y, const dvm_value *attrs,
                                                int nattrs, long long *dims, long long *size);

#endif
