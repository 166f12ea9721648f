/* The dvm compiler as a library (libdvmc): an ONNX model in, .dvmb bytes
 * out, through import, folding, symbol ranges, shape inference, graph
 * rewrites, lowering and, for CUDA, placement (docs/compiler.md). This is
 * the one header its users include; `dvm compile`, `dvm generate`, the
 * server and the Python package compile through it. Everything else under
 * compiler/ is internal.
 *
 * Thread safety: each call owns what it builds; any number of threads may
 * compile at once. */
#ifndef DVMC_H
#define DVMC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "dvm/value.h"

/* What the compiler says besides an error, to dvmc_compile_options.diag. */
typedef enum dvmc_diag_kind {
  DVMC_DIAG_WARNING,  /* a declared type that inference contradicts; the inferred one is used */
  DVMC_DIAG_NOTE,     /* values whose shapes are unknown, naming the first node that loses one */
  DVMC_DIAG_PROGRESS, /* a step done: "imported 312 nodes", "pass gelu rewrote 12 patterns" */
} dvmc_diag_kind;

typedef struct dvmc_compile_options {
  const char *function; /* name of the entry function; NULL: "main" */
  /* Symbol ranges "NAME=LO..HI" (`dvm compile --dim`); "NAME=N" fixes the
   * dim (N..N). The input guards check them at run time. */
  const char *const *dims;
  int ndims;
  /* Graph rewrites to skip, by name (dvmc_pass_describe). */
  const char *const *disable;
  int ndisable;
  /* Also a "NAME@cuda" clone of each function with NVRTC-compiled kernels;
   * the CPU functions stay, so the file runs anywhere. Implies no_stitch
   * and skips the rewrites only CPU kernels have. */
  bool cuda;
  bool no_fusion; /* keep every elementwise node its own kernel call */
  bool no_stitch; /* keep reductions out of fused groups */
  bool no_plan;   /* no memory plan: every tensor its own allocation */
  /* The folder the .dvmb will be in: weights that lie in the model's
   * external data files inside it (or below) are referred to where they
   * lie, not copied (docs/bytecode.md, section external). NULL: copied,
   * as `dvm compile --embed-data`. */
  const char *data_dir;
  /* An output of which the caller reads only the last position of axis 1
   * (a generator's logits [batch, seq, vocab]): computed for that position
   * alone, so it has 1 on axis 1 (where it is made by a MatMul or
   * MatMulNBits followed only by elementwise nodes; otherwise unchanged).
   * NULL: every output whole. */
  const char *last_position;
  /* Stop after the graph rewrites: no bytes (for dump_ir, dump_shapes). */
  bool no_lower;
  /* When set, the graph after the rewrites as text (`--dump-ir`) and every
   * value's dtype and dims as JSON (`--dump-shapes`). */
  FILE *dump_ir;
  FILE *dump_shapes;
  /* Called (when set) with each warning, note and progress line, on the
   * compiling thread. */
  void (*diag)(void *ctx, dvmc_diag_kind kind, const char *msg);
  void *diag_ctx;
} dvmc_compile_options;

/* Sets *o to the defaults: entry "main", every pass, fusion, stitching and
 * the memory plan on, CPU only, external data copied, no dumps, no
 * diagnostics. */
DVM_API void dvmc_compile_options_init(dvmc_compile_options *o);

/* Compiles the ONNX model at `path` (external data found beside it) into
 * .dvmb bytes: `*bytes` is malloc'ed, free it; NULL with o->no_lower. `o`
 * is borrowed for the call; NULL: the defaults.
 * Errors name the model, the node, its op and the input or attribute at
 * fault. */
DVM_API DVM_MUST_USE dvm_status *dvmc_compile_file(const char *path, const dvmc_compile_options *o,
                                                   uint8_t **bytes, size_t *size);

/* The same for a model's bytes (borrowed for the call); external data is
 * found in `model_dir`, and without one a model that has any is an error.
 * Messages name the model "<memory>". */
DVM_API DVM_MUST_USE dvm_status *dvmc_compile_memory(const void *data, size_t data_size, const char *model_dir,
                                                     const dvmc_compile_options *o, uint8_t **bytes,
                                                     size_t *size);

/* A number that differs between builds of the compiler (a hash of the
 * bytes of the file that holds it; 0 if that cannot be read), for keys of
 * caches of compiled files: what an older compiler made may load and still
 * differ. */
DVM_API uint64_t dvmc_compiler_id(void);

/* ---- the op table and the graph rewrites, as `dvm compile --list-ops` and
 * `--list-passes` show them -------------------------------------------- */

typedef struct dvmc_op_info {
  const char *domain; /* "" (the default ONNX domain) or "com.microsoft", ... */
  const char *name;   /* ONNX op type */
  const char *kernel; /* CPU kernel, or NULL: the op has its own lowering */
  const char *dtype;  /* output dtype rule (ops.def), or NULL: input 0's */
  int min_opset;
  bool shape_rule;    /* inference knows its output shape; else the run time tells */
  bool fuses;         /* joins fused elementwise kernels */
} dvmc_op_info;

DVM_API int dvmc_op_count(void);
/* Row i (0 <= i < dvmc_op_count()) of the op table. */
DVM_API void dvmc_op_describe(int i, dvmc_op_info *out);

typedef struct dvmc_pass_info {
  const char *name; /* for dvmc_compile_options.disable */
  const char *what; /* one line */
  bool cpu_only;    /* makes an op only CPU kernels have: skipped for CUDA */
} dvmc_pass_info;

DVM_API int dvmc_pass_count(void);
/* Pass i (0 <= i < dvmc_pass_count()), in the order they run. */
DVM_API void dvmc_pass_describe(int i, dvmc_pass_info *out);
/* The index of the pass named name, or -1. */
DVM_API int dvmc_pass_find(const char *name);

/* ---- CUDA placement ------------------------------------------------------ */

/* What each NAME@cuda function of the .dvmb in (data, size) still runs on
 * the host, as text for `dvm inspect --host` (docs/cuda.md): each host
 * kernel call with its node, the bytes it copies to the host and back to
 * the device as formulas of the function's symbols ("unknown" where the
 * bytecode does not prove a shape), and why it stays on the host; then the
 * calls by kernel and the totals. `*text` is malloc'ed: free it. Fails on a
 * module without NAME@cuda functions, or whose clones this compiler would
 * place otherwise. */
DVM_API DVM_MUST_USE dvm_status *dvmc_cuda_host_report(const void *data, size_t size, char **text);

/* ---- ONNX protobuf values (the ONNX test data's input_N.pb) -------------- */

/* One TensorProto (data borrowed for the call). `*out` holds one
 * reference; release it. `what` names the data in messages. */
DVM_API DVM_MUST_USE dvm_status *dvmc_read_tensor_pb(const void *data, size_t size, const char *what,
                                                     dvm_tensor **out);

/* One SequenceProto or OptionalProto as a tuple (an optional: of none or
 * one item), its items tensors or tuples. `*out` holds one reference;
 * clear it with dvm_value_clear. */
DVM_API DVM_MUST_USE dvm_status *dvmc_read_sequence_pb(const void *data, size_t size, const char *what,
                                                       dvm_value *out);

#endif
