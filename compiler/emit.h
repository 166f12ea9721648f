/* Building bytecode modules: the compiler's side of the .dvmb contract.
 *
 * A builder collects constants, kernel, shape function and host function
 * tables (deduplicated by name), and functions written instruction by
 * instruction with registers allocated as they are asked for; finishing
 * verifies the module with the VM's own verifier and writes the canonical
 * file bytes. Names passed in are copied. */
#ifndef DVMC_EMIT_H
#define DVMC_EMIT_H

#include "bytecode.h"
#include "ir.h"
#include "instr.h"

typedef struct dvmc_emit dvmc_emit;
typedef struct dvmc_fn dvmc_fn;

DVM_MUST_USE dvm_status *dvmc_emit_create(dvmc_emit **out);
void dvmc_emit_destroy(dvmc_emit *e);

/* From now on, a constant whose bytes lie in one of c's external data files
 * inside folder `dir` (where the .dvmb goes) is written as a reference to
 * them, not a copy (compiler/extdata.h). */
void dvmc_emit_reference(dvmc_emit *e, dvmc_ctx *c, const char *dir);

/* Table entries; each returns its index, or -1 when out of memory. */
int dvmc_emit_const(dvmc_emit *e, const char *name, const dvmc_tensor *t);
int dvmc_emit_kernel(dvmc_emit *e, const char *name, dvm_device_kind dev, uint32_t nvariants,
                     const void *payload, size_t payload_size);
int dvmc_emit_shapefn(dvmc_emit *e, const char *name);
/* The name of kernel table entry k, or NULL. */
const char *dvmc_emit_kernel_name(const dvmc_emit *e, int64_t k);
int dvmc_emit_string(dvmc_emit *e, const char *s);

/* Functions. */
dvmc_fn *dvmc_emit_func(dvmc_emit *e, const char *name);
int dvmc_fn_reg(dvmc_fn *f); /* a new register */
int dvmc_fn_nregs(const dvmc_fn *f); /* registers so far */
/* Parameters take registers 0..n-1 in order: declare them first. */
int dvmc_fn_param(dvmc_fn *f, const dvm_sig *sig);
/* Replaces parameter i's signature (when it names symbols made after). */
void dvmc_fn_set_param(dvmc_fn *f, int i, const dvm_sig *sig);
void dvmc_fn_result(dvmc_fn *f, const dvm_sig *sig);
/* A symbol bound by guards; returns its index (its register: dvmc_fn_sym_reg). */
int dvmc_fn_sym(dvmc_fn *f, const char *name, int64_t lo, int64_t hi);
int dvmc_fn_sym_find(const dvmc_fn *f, const char *name);
int dvmc_fn_sym_reg(const dvmc_fn *f, int sym);
/* A fact for tools (the .dvmb info section): "peak" = FORMULA. */
void dvmc_fn_info(dvmc_fn *f, const char *key, const char *value);
/* The source node of the instructions that follow (NULL: none). */
void dvmc_fn_loc(dvmc_fn *f, const char *node);

/* Appends one instruction: one function per opcode, generated from
 * opcodes.def, whose parameters are the opcode's operands in order (lists
 * as dvm_list: DVM_LIST(a, b), DVM_NO_LIST), such as
 * dvmc_fn_INVOKE(f, kernel, variant, outs, ins, attrs). */
#define X(e, name, ops, flags, syn) void dvmc_fn_##e(dvmc_fn *f DVM_EACH_PARAM(ops));
#include "opcodes.def"
#undef X
/* The word offset of the next instruction (for jump targets), and setting
 * the target of the jump instruction at word `jump` once it is known. */
uint32_t dvmc_fn_here(const dvmc_fn *f);
void dvmc_fn_set_target(dvmc_fn *f, uint32_t jump, uint32_t target);

/* The code so far, for passes that read it (the memory plan). */
const int64_t *dvmc_fn_code(const dvmc_fn *f, uint32_t *nwords);
/* Moves the instructions from word `from` to the end so that they run at
 * word `at`, before those that were there (a jump to `at` runs them too);
 * jump targets and source locations follow. */
void dvmc_fn_hoist(dvmc_fn *f, uint32_t at, uint32_t from);
/* One edit of the code for dvmc_fn_edit_code: an instruction put before
 * the instruction at word `at`, or replacing it. */
typedef struct dvmc_fn_edit {
  uint32_t at;       /* the first word of an instruction of the code */
  int replace;       /* 1: replaces that instruction; 0: goes before it */
  size_t instr;      /* its first word in the edits' code (dvm_encode_*) */
} dvmc_fn_edit;
/* Applies edits, sorted by `at` (several at one word go in the order
 * given, a replacement last), in one pass over the code: a jump to `at`
 * runs what was put before it (as with dvmc_fn_hoist), jump targets after
 * it follow, new instructions take the current source location. `instrs`
 * holds the edits' instructions. */
void dvmc_fn_edit_code(dvmc_fn *f, const dvmc_fn_edit *edits, int n, const dvm_words *instrs);

/* Verifies and writes the module; *bytes is malloc'ed. The first error met
 * while building (out of memory) is reported here too. */
/* Whether an allocation failed since e was created: the code read back
 * (dvmc_fn_code) may then miss words. */
bool dvmc_emit_out_of_memory(const dvmc_emit *e);
DVM_MUST_USE dvm_status *dvmc_emit_finish(dvmc_emit *e, uint8_t **bytes, size_t *size);

#endif
