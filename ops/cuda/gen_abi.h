/* The contract between generated CUDA kernels (compiler/, written at
 * `dvm compile --target cuda` time) and their launcher (ops/cuda/, run
 * time): the payload that carries them in the .dvmb kernel table, the
 * entry names, and the one parameter block every generated kernel takes.
 *
 * This header is plain C that both the host (C11) and the generated CUDA
 * C (NVRTC, which has no system headers) include; the codegen pastes the
 * struct below into each source through DVM_GEN_PARAMS_DECL, so the two
 * can never disagree.
 *
 * Payload ("DVMG", version 8), little-endian, offsets from its start:
 *
 *   0   4  magic "DVMG"
 *   4  u16 version (8)
 *   6  u8  kind: DVM_GEN_ELEMENTWISE ... DVM_GEN_MATMUL_NBITS (below)
 *   7  u8  nconfigs, 1..DVM_GEN_MAX_CONFIGS
 *   8  u8  nin, 1..DVM_GEN_MAX_IN
 *   9  u8  nout, 1..DVM_GEN_MAX_OUT
 *  10  u16 tile T: the variants per config, one per residue n mod T, 1..64
 *  12  u32 nimages
 *  16  u32 source offset, u32 source size (the CUDA C: the image the host
 *      emulation compiles, DVM_GEN_SOURCE_SM in payload.h)
 *  24  u32 dtypes offset: nin + nout bytes, each input's then each
 *      output's dtype (.dvmb codes), which the launcher checks per call
 *  28  4   reserved, 0
 *  32  configs: nconfigs x 8 bytes: u16 block (threads), u16 per_thread
 *      (elements a thread handles per tile step), u32 shared bytes
 *      then nin bytes: each input's dvm_gen_class
 *      then zero padding to a multiple of 8
 *      then images: nimages x 16 bytes: u32 arch (80, 90, ...; 0 = PTX),
 *      u32 reserved 0, u32 offset, u32 size
 *      then the dtypes, source and image bytes (each at a multiple of 8).
 *
 * Entry names in every image: "dvm_v<r>" for residue r (0 <= r < T), with
 * no per-element bounds checks, and "dvm_b", the bounds-checked baseline,
 * each launched with any config's block (configs are launch shapes; since
 * version 4 they share the entries, which halved NVRTC's work). Variant
 * index r < T picks "dvm_v<r>"; index T picks the baseline. The .dvmb kernel table entry has nvariants = T + 1, and the
 * bytecode computes the variant with `mod` of the split extent (below).
 *
 * Kinds:
 *   DVM_GEN_ELEMENTWISE: n = elements of output 0; outputs share its shape;
 *     input k is read per its class. Variant = n mod T.
 *   DVM_GEN_ROWS: rows of length n along the innermost axis of input 0
 *     (softmax, log-softmax, layer norm, reductions over the last axis);
 *     rows = numel(input 0) / n; one block per row. Variant = n mod T.
 *   DVM_GEN_GATHER: ONNX Gather, inputs data and indices (i32 or i64),
 *     one output of data's dtype; the call's attribute 0 is the axis (the
 *     CPU "gather"'s). n = elements of the output, seen as [outer, m,
 *     inner] (m = indices' elements): dims holds those three right-aligned,
 *     numel[0] is data's size along the axis. An index outside [-size,
 *     size) is not read: the kernel records it in the VM's device error
 *     record (ptr[nin + nout], DVM_GEN_ERROR_WORDS words, word 0 set by
 *     the first to find one), reported at the VM's next host wait.
 *     Variant = n mod T.
 *   DVM_GEN_CONCAT, DVM_GEN_SPLIT: docs/cuda.md; n = elements of the
 *     output (concat) or of the input (split).
 *   DVM_GEN_WINDOW: max_pool or average_pool (values only) of one f32
 *     input [N, C, spatial...] (1 to 3 spatial dims), the call's
 *     attributes the CPU kernel's; n = elements of the output. dims is the
 *     output's shape seen as [1, 1, N * C, d, h, w] (1-D and 2-D with
 *     leading 1s), geom the window's rows DVM_GEN_WIN_* over the columns
 *     d, h, w (3, 4, 5), as the launcher computes them through the CPU
 *     kernel's shape function. Variant = n mod T.
 *   DVM_GEN_RESIZE: ONNX Resize, nearest (any dtype, bits copied) or
 *     linear (f32), of one input of rank up to 6; n = elements of the
 *     output (dims, right-aligned); geom and real as DVM_GEN_RSZ_* says,
 *     from the CPU kernel's shape function. Variant = n mod T.
 *   DVM_GEN_CONV: conv or fused_conv of f32 (X, W, then B and Z as the
 *     CPU kernel takes them; channels first), the call's attributes the
 *     CPU kernel's; n = elements of the output. dims is the output's
 *     shape seen as [1, N, M, d, h, w], geom the window's rows over d, h,
 *     w as for WINDOW plus DVM_GEN_CONV_SHAPE, real[0] the epilogue's
 *     parameters, from the launcher through the CPU kernel's shape
 *     function. Variant = n mod T.
 *   DVM_GEN_CONV_TRANSPOSE (since version 7): conv_transpose of f32 (X,
 *     W [C, M/group, k...], B optional; channels first), the call's
 *     attributes the CPU kernel's; n = elements of the output. dims, the
 *     window's rows and DVM_GEN_CONV_SHAPE as for CONV (activation 0),
 *     each output element the sum over the input positions and taps that
 *     reach it. Variant = n mod T.
 *   DVM_GEN_MATMUL_NBITS (since version 8): matmul_nbits, A [.., K] f32,
 *     B u8, scales f32[, zero points u8 or f32][, bias f32] as the CPU
 *     kernel takes them (its attributes; no g_idx); n = elements of Y
 *     [.., N], element i the dot of A's row i / N with column i mod N of
 *     B dequantized, in f32. geom row DVM_GEN_NBITS as its enum says,
 *     from the launcher through the CPU kernel's checks (ops/cpu/nbits.h).
 *     Variant = n mod T. */
#ifndef DVM_OPS_CUDA_GEN_ABI_H
#define DVM_OPS_CUDA_GEN_ABI_H

#define DVM_GEN_MAGIC "DVMG"
#define DVM_GEN_VERSION 8
#define DVM_GEN_HEADER_SIZE 32
#define DVM_GEN_MAX_CONFIGS 8
#define DVM_GEN_MAX_IN 16
#define DVM_GEN_MAX_OUT 8
#define DVM_GEN_MAX_TILE 64
#define DVM_GEN_MAX_RANK 6
#define DVM_GEN_GEOM_ROWS 8 /* rows of dvm_gen_params.geom */

enum { DVM_GEN_ELEMENTWISE = 1, DVM_GEN_ROWS = 2, DVM_GEN_GATHER = 3, DVM_GEN_CONCAT = 4,
       DVM_GEN_SPLIT = 5, DVM_GEN_WINDOW = 6, DVM_GEN_RESIZE = 7, DVM_GEN_CONV = 8,
       DVM_GEN_CONV_TRANSPOSE = 9, DVM_GEN_MATMUL_NBITS = 10 };

/* Rows of dvm_gen_params.geom. WINDOW, per spatial column: */
enum {
  DVM_GEN_WIN_IN,       /* the input's size */
  DVM_GEN_WIN_KERNEL,   /* kernel_shape */
  DVM_GEN_WIN_STRIDE,   /* strides */
  DVM_GEN_WIN_DILATION, /* dilations */
  DVM_GEN_WIN_PAD,      /* the begin pad */
  DVM_GEN_WIN_PADDED,   /* the input's size plus its end pad: the extent
                         * that count_include_pad counts taps within */
  DVM_GEN_WIN_FLAGS,    /* column 0: count_include_pad (average_pool) */
};
/* CONV and CONV_TRANSPOSE: the WINDOW rows from DVM_GEN_WIN_IN to DVM_GEN_WIN_PAD, and: */
enum {
  DVM_GEN_CONV_SHAPE = DVM_GEN_WIN_FLAGS, /* columns: C, M, group, activation
                                           * (ops/cpu/conv.c's numbering) */
};
/* CONV, real[0]: alpha, beta (their defaults resolved), post_scale, post_shift. */
/* MATMUL_NBITS, row 0's columns: */
enum {
  DVM_GEN_NBITS = 0,
  DVM_GEN_NBITS_K = 0, DVM_GEN_NBITS_N, DVM_GEN_NBITS_BITS, DVM_GEN_NBITS_BLOCK,
  DVM_GEN_NBITS_KB,   /* blocks per column; 0: B has a 0 dim (Y is the bias, or zeros) */
  DVM_GEN_NBITS_ZP,   /* the zero points' input, 0: none (2^(bits - 1)) */
  DVM_GEN_NBITS_BIAS, /* the bias' input, 0: none */
};
/* RESIZE, per dim (right-aligned as dims): */
enum {
  DVM_GEN_RSZ_IN,   /* the input's size */
  DVM_GEN_RSZ_COPY, /* 1: the dim is copied as is (the CPU kernel's rule) */
  DVM_GEN_RSZ_MODE, /* column 0: mode (nearest 0, linear 1), 1: the coordinate
                     * transformation mode, 2: nearest_mode (window.h enums) */
};
/* RESIZE, rows of dvm_gen_params.real per dim: the scale and the output
 * length that the coordinate transformation takes (window.h dvm_resize). */
enum { DVM_GEN_RSZ_SCALE, DVM_GEN_RSZ_LENGTH };

/* The device error record: a flag, then the kind's details (GATHER: the
 * position in the indices, the index, the axis's size). */
#define DVM_GEN_ERROR_WORDS 4

/* How an input is indexed, decided at compile time from symbolic shapes
 * and checked by the launcher against the actual shapes on every call. */
enum {
  DVM_GEN_SAME = 0,    /* the output's shape: element i */
  DVM_GEN_SCALAR = 1,  /* one element: element 0 */
  DVM_GEN_SUFFIX = 2,  /* ELEMENTWISE: the output's trailing dims (leading 1s
                        * aside): i % numel; ROWS: n elements, or one */
  DVM_GEN_STRIDED = 3, /* anything else numpy allows: strides below */
  DVM_GEN_PERMUTED = 4, /* ELEMENTWISE, the only input (a transpose): output
                         * dim d is input dim perm[d], perm being the call's
                         * attribute 0 as for the CPU "transpose" (absent:
                         * dims reversed); read through strides below that
                         * the launcher computes from the perm */
  DVM_GEN_SLICED = 5,   /* ELEMENTWISE, the only input (a slice): output 0 is
                         * it sliced by the call's attributes, the CPU
                         * "slice"'s inputs 1.. (starts, ends, axes, steps)
                         * as shapes; read through strides and from an
                         * offset that the launcher computes from them */
};

/* The one kernel parameter (passed by value, well under the 4 KiB limit).
 * Pointers are inputs then outputs. dims is output 0's shape (ELEMENTWISE)
 * or input 0's (ROWS), right-aligned to DVM_GEN_MAX_RANK with leading 1s;
 * strides[k] are input k's element strides over those dims, 0 where it is
 * broadcast (only STRIDED and PERMUTED inputs read them). numel[k] is
 * input k's element count (SUFFIX inputs use it). geom and real hold the
 * geometry of WINDOW and RESIZE kernels (rows above). */
#define DVM_GEN_PARAMS_DECL                                   \
  typedef struct dvm_gen_params {                             \
    void *ptr[DVM_GEN_MAX_IN + DVM_GEN_MAX_OUT];              \
    long long n;                                              \
    long long rows;                                           \
    long long dims[DVM_GEN_MAX_RANK];                         \
    long long strides[DVM_GEN_MAX_IN][DVM_GEN_MAX_RANK];      \
    long long numel[DVM_GEN_MAX_IN];                          \
    long long geom[DVM_GEN_GEOM_ROWS][DVM_GEN_MAX_RANK];      \
    double real[2][DVM_GEN_MAX_RANK];                         \
  } dvm_gen_params;

DVM_GEN_PARAMS_DECL

#endif
