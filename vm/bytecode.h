/* The in-memory form of a module, shared by the loader (bcread.c), the
 * verifier (verify.c), the writer (bcwrite.c), the assembler (asm.c), the
 * disassembler (disasm.c) and the interpreter (interp.c).
 *
 * The loader fills it from a .dvmb with names pointing into the file; the
 * assembler and the compiler fill it from their own arena; the writer turns
 * any of them into the canonical file bytes. */
#ifndef DVM_BYTECODE_H
#define DVM_BYTECODE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "dvm/module.h"
#include "kernel.h"
#include "arena.h"

#define DVM_BC_MAGIC "\x89" "DVMB\r\n\x1a"
#define DVM_BC_MAJOR 1
#define DVM_BC_MINOR 3
#define DVM_BC_HEADER_SIZE 32
#define DVM_BC_DATA_ALIGN 64

/* Section ids, in the order the writer lays them out. */
enum {
  DVM_SEC_STRINGS = 1,
  DVM_SEC_CONSTS,
  DVM_SEC_KERNELS,
  DVM_SEC_SHAPEFNS,
  DVM_SEC_HOSTFNS,
  DVM_SEC_FUNCS,
  DVM_SEC_DATA,
  DVM_SEC_INFO,     /* since 1.1, optional: written only when a function has info */
  DVM_SEC_EXTERNAL, /* since 1.3, optional: constants whose bytes are in other files */
  DVM_SEC_COUNT = DVM_SEC_EXTERNAL
};

/* Limits the verifier enforces, so that no count can make us allocate or
 * loop absurdly. */
#define DVM_MAX_REGS (1 << 20)
#define DVM_MAX_LIST 4096
#define DVM_MAX_CODE (1 << 26)

/* A signature dim: >= 0 a constant, -1 unknown, <= -2 symbol (-2 - d). */
#define DVM_DIM_ANY (-1)
#define DVM_DIM_SYM(s) (-2 - (int64_t)(s))
static inline int64_t dvm_dim_symbol(int64_t d) { return d <= -2 ? -2 - d : -1; }

typedef struct dvm_sig {
  const char *name;
  uint8_t kind;  /* dvm_kind; NONE = any */
  uint8_t dtype; /* tensors */
  int8_t rank;   /* tensors, shapes; -1 = any */
  int64_t dims[DVM_MAX_RANK];
} dvm_sig;

/* A tuple signature's dtype byte: 0 = items of any kind, else 1 + the
 * dtype of every tensor inside it, at any depth (its items are then such
 * tensors or such tuples: an ONNX sequence or optional). -1 for "any". */
static inline int dvm_sig_item_dtype(const dvm_sig *s) {
  return s->kind == DVM_VAL_TUPLE && s->dtype ? s->dtype - 1 : -1;
}

typedef struct dvm_sym {
  const char *name;
  uint32_t reg; /* the register guard binds the symbol's value to */
  int64_t lo, hi;
} dvm_sym;

/* A fact about a function for tools, such as its peak memory ("peak": a
 * formula over its symbols, in bytes); the VM does not read it. */
typedef struct dvm_info {
  const char *key, *value;
} dvm_info;

typedef struct dvm_func {
  const char *name;
  uint32_t nregs, nparams, nresults, nsyms;
  dvm_sig *params, *results;
  dvm_sym *syms;
  int64_t *code;
  uint32_t ncode;   /* words */
  uint32_t ninstr;  /* instructions, known after decoding */
  uint32_t *starts; /* word offset of each instruction */
  const char **src; /* per instruction: source node name or NULL */
  uint32_t ndebug;  /* as read: (instruction, string) pairs, made into src */
  uint32_t *debug;
  uint32_t ninfo;   /* section info (1.1) */
  dvm_info *info;
} dvm_func;

typedef struct dvm_const {
  const char *name;
  uint8_t dtype, rank;
  int64_t dims[DVM_MAX_RANK];
  const void *data;
  size_t nbytes; /* strings: their byte counts and bytes (vm/object.h) */
  dvm_tensor *tensor; /* made at load; shares the module's bytes */
  /* Section external (1.3): the bytes are at `ext_offset` in the file
   * `ext_path` (relative to the .dvmb's folder), whose XXH3-64 is
   * `ext_hash`; NULL for bytes in the data section. */
  const char *ext_path;
  uint64_t ext_offset, ext_hash;
  dvm_storage *storage; /* where data lies, if not in the module's bytes */
  /* How instructions read it (link.c): only as input reader_slot of kernel
   * `reader`, whose form replaces the plain bytes, or `plain` otherwise. */
  const struct dvm_kernel_def *reader;
  int reader_slot;
  bool plain;
  bool settled; /* external, read only as forms: checked and its pages given back (dvm_extdata_settle) */
} dvm_const;

typedef struct dvm_kernel_ref {
  const char *name;
  uint8_t device;
  uint32_t nvariants;
  const void *payload;
  size_t payload_size;
  const dvm_kernel_def *def; /* resolved at load */
} dvm_kernel_ref;

typedef struct dvm_shapefn_ref {
  const char *name;
  const dvm_shapefn_def *def;
} dvm_shapefn_ref;

typedef struct dvm_hostfn_ref {
  const char *name;
  const char *sig;
  const struct dvm_hostfn *fn; /* resolved at load (hostfn.c) */
} dvm_hostfn_ref;

struct dvm_module {
  atomic_int refs;
  const struct dvm_registry *reg; /* what it is linked against (registry.h); NULL when built */
  dvm_arena arena; /* everything below that is not in the file bytes */
  uint32_t nstrings, nconsts, nkernels, nshapefns, nhostfns, nfuncs;
  const char **strings;
  dvm_const *consts;
  dvm_kernel_ref *kernels;
  dvm_shapefn_ref *shapefns;
  dvm_hostfn_ref *hostfns;
  dvm_func *funcs;
  void *bytes;       /* the file's bytes, the module's own, or NULL for a built module */
  size_t size;
  size_t released;   /* bytes of packed constants' plain pages given back at load */
  dvm_storage *data; /* wraps the file bytes for constant tensors */
};

/* Parses file bytes into m (no verification, no resolution). */
DVM_MUST_USE dvm_status *dvm_bc_read(dvm_module *m, const uint8_t *bytes, size_t size);

/* Checks everything the interpreter relies on; fills each function's
 * instruction starts. */
DVM_MUST_USE dvm_status *dvm_verify_module(dvm_module *m);

/* Maps the files of m's external constants (their paths relative to `dir`,
 * or refused where dir is NULL), links m and checks the constants' hashes
 * (vm/extdata.c). */
DVM_MUST_USE dvm_status *dvm_extdata_link(dvm_module *m, const char *dir, const dvm_load_options *opts);

/* Resolves kernels and shape functions by name in m->reg, host functions
 * in opts, makes the constant tensors and their kernels' forms, and gives
 * back the plain pages of the constants in m's bytes read only as forms. */
DVM_MUST_USE dvm_status *dvm_module_link(dvm_module *m, const dvm_load_options *opts);

/* Whether instructions read c only through the form its one reader made. */
bool dvm_const_packed_only(const dvm_const *c);

/* External constant c, read only as the forms just made of it: its bytes
 * checked against the module's hash (those the forms were read from, or
 * those a rows form hashed) and its plain pages given back, as soon as its
 * forms are made, so that a load holds one plain weight at a time, not the
 * file beside the forms (vm/extdata.c). */
DVM_MUST_USE dvm_status *dvm_extdata_settle(dvm_module *m, dvm_const *c);

/* Canonical file bytes of m (verified or built); *out is malloc'ed. */
DVM_MUST_USE dvm_status *dvm_bc_write(const dvm_module *m, uint8_t **out, size_t *size);

/* An empty module for builders (the assembler, the compiler). */
DVM_MUST_USE dvm_status *dvm_module_new_empty(dvm_module **out);

/* Decodes the instruction at word `pc`: its length in words, or 0 if it is
 * malformed (unknown opcode, operand or list past the end). */
uint32_t dvm_instr_length(const int64_t *code, uint32_t ncode, uint32_t pc);
/* Calls fn(ctx, letter, word) for each operand word of the well-formed
 * instruction at word pc, list items with their list's letter. */
void dvm_instr_operands(const int64_t *code, uint32_t pc, void (*fn)(void *ctx, char letter, uint32_t word),
                        void *ctx);
/* The jump target of the well-formed instruction at word pc, or -1 when it
 * has none. */
int64_t dvm_instr_jump_target(const int64_t *code, uint32_t pc);

/* Index of the instruction at word offset pc (binary search), or -1. */
int dvm_func_instr_index(const dvm_func *f, uint32_t pc);

/* "function "f", instruction 12 (add), node "Add_3"" for error messages. */
const char *dvm_func_where(const dvm_func *f, uint32_t pc, char *buf, size_t size);

#endif
