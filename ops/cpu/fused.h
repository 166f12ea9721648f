/* The fused elementwise kernel's program (docs/fused.md): its opcodes, and
 * a builder that the compiler uses to make one.
 *
 * A program is the kernel table entry's payload of kernel "fused": bytes in
 * a small versioned format that the kernel validates on every call. It
 * loads the kernel's inputs (broadcast to the output shape) into virtual
 * registers, runs elementwise ops over them, and stores registers to the
 * outputs, one block of elements at a time.
 *
 * The builder is in SSA form: every op returns a new value, and
 * dvm_fused_builder_finish assigns registers (reusing those of dead values)
 * and encodes the payload. Builder calls never fail on their own: the first
 * mistake (a type mismatch, a limit) is kept and returned by finish, and
 * calls after it return -1 and do nothing. */
#ifndef DVM_OPS_CPU_FUSED_H
#define DVM_OPS_CPU_FUSED_H

#include <stddef.h>
#include <stdint.h>

#include "dvm/status.h"
#include "dvm/tensor.h"
#include "ops/cpu/unary_math.h"

#define DVM_FUSED_MAGIC "DVMF"
#define DVM_FUSED_VERSION 1
#define DVM_FUSED_HEADER_SIZE 16
#define DVM_FUSED_INSTR_SIZE 16
#define DVM_FUSED_MAX_INPUTS 16
#define DVM_FUSED_MAX_OUTPUTS 8
#define DVM_FUSED_MAX_REGS 32
#define DVM_FUSED_MAX_INSTRS 256
/* Header byte 9, the flags: a row program (docs/fused.md 6.3) runs whole
 * rows of the output's last dim at a time and may reduce over them. */
#define DVM_FUSED_ROWS 1

/* Opcodes, as encoded (docs/fused.md has each one's operands and types):
 * X(NAME, CODE, TEXT, ...), the float math ones with unary_math.h's columns. */
#define DVM_FUSED_OPS(X)                                                       \
  X(LOAD, 1, "load")                                                           \
  X(STORE, 2, "store")                                                         \
  X(CONST, 3, "const")                                                         \
  X(MOV, 4, "mov")                                                             \
  X(CAST, 5, "cast")                                                           \
  X(ADD, 6, "add")                                                             \
  X(SUB, 7, "sub")                                                             \
  X(MUL, 8, "mul")                                                             \
  X(DIV, 9, "div")                                                             \
  X(POW, 10, "pow")                                                            \
  X(MIN, 11, "min")                                                            \
  X(MAX, 12, "max")                                                            \
  X(EQUAL, 13, "equal")                                                        \
  X(LESS, 14, "less")                                                          \
  X(GREATER, 15, "greater")                                                    \
  X(LESS_EQUAL, 16, "less_equal")                                              \
  X(GREATER_EQUAL, 17, "greater_equal")                                        \
  X(AND, 18, "and")                                                            \
  X(OR, 19, "or")                                                              \
  X(XOR, 20, "xor")                                                            \
  X(NOT, 21, "not")                                                            \
  X(WHERE, 22, "where")                                                        \
  X(NEG, 23, "neg")                                                            \
  X(ABS, 24, "abs")                                                            \
  X(RELU, 25, "relu")                                                          \
  DVM_UNARY_MATH(X)                                                            \
  X(ROW_SUM, 35, "row_sum")                                                    \
  X(ROW_MEAN, 36, "row_mean")                                                  \
  X(ROW_MAX, 37, "row_max")                                                    \
  X(ROW_MIN, 38, "row_min")

typedef enum dvm_fused_op {
#define X(name, code, text, ...) DVM_FUSED_##name = code,
  DVM_FUSED_OPS(X)
#undef X
  DVM_FUSED_OP_END
} dvm_fused_op;

/* The opcode's name ("add"), or NULL for a code that is none. */
const char *dvm_fused_op_name(int op);

/* Fails with DVM_INVALID_ARGUMENT and a message naming the rule, the
 * instruction and the operand unless payload is a valid program. */
DVM_MUST_USE dvm_status *dvm_fused_validate(const void *payload, size_t size);

/* A valid program, as its bytes say (docs/fused.md): what every reader of
 * a payload other than the kernel (the CUDA code generator, placement)
 * reads, so that the byte layout is read in one place, the kernel's. */
typedef union dvm_fused_imm {
  float f;
  int64_t i;
  uint8_t b;
} dvm_fused_imm;

typedef struct dvm_fused_instr {
  uint8_t op, dst, a, b, c; /* dst of a store and a of a load: indices */
  dvm_fused_imm imm;        /* const: the value in its register's type */
} dvm_fused_instr;

typedef struct dvm_fused_program {
  int nin, nout, nregs, ninstrs;
  int rows; /* a row program (DVM_FUSED_ROWS) */
  uint8_t in_dtype[DVM_FUSED_MAX_INPUTS], out_dtype[DVM_FUSED_MAX_OUTPUTS];
  uint8_t reg_dtype[DVM_FUSED_MAX_REGS]; /* DVM_F32, DVM_I64 or DVM_BOOL */
  dvm_fused_instr instrs[DVM_FUSED_MAX_INSTRS];
} dvm_fused_program;

/* Validates payload as dvm_fused_validate does and reads it into *out. */
DVM_MUST_USE dvm_status *dvm_fused_read(const void *payload, size_t size, dvm_fused_program *out);

/* ---- the builder ---- */

#define DVM_FUSED_MAX_VALUES DVM_FUSED_MAX_INSTRS

typedef struct dvm_fused_builder {
  int ninputs, noutputs, nvalues, ninstrs;
  int rows; /* a row program: set by the first row reduction */
  uint8_t in_dtype[DVM_FUSED_MAX_INPUTS], out_dtype[DVM_FUSED_MAX_OUTPUTS];
  uint8_t value_type[DVM_FUSED_MAX_VALUES]; /* DVM_F32, DVM_I64 or DVM_BOOL */
  struct dvm_fused_binstr {
    uint8_t op;
    int16_t dst, a, b, c; /* values; dst of a store and a of a load: indices */
    int64_t imm;          /* const: the encoded immediate */
  } instrs[DVM_FUSED_MAX_INSTRS];
  dvm_status *error; /* the first mistake, owned until finish */
} dvm_fused_builder;

void dvm_fused_builder_init(dvm_fused_builder *b);

/* Declares the next kernel input or output (index 0, 1, ... in order of
 * the calls) of dtype f32, f16, bf16, i32, i64 or bool; returns its index. */
int dvm_fused_input(dvm_fused_builder *b, dvm_dtype dt);
int dvm_fused_output(dvm_fused_builder *b, dvm_dtype dt);

/* Values: each returns the new value's id, or -1 after a mistake. Input
 * `i` is loaded as f32 (f32 f16 bf16), i64 (i32 i64) or bool. */
int dvm_fused_load(dvm_fused_builder *b, int input);
int dvm_fused_const_f32(dvm_fused_builder *b, double v);
int dvm_fused_const_i64(dvm_fused_builder *b, int64_t v);
int dvm_fused_const_bool(dvm_fused_builder *b, int v);
/* A unary op (mov, not, neg, abs, relu, sqrt ... reciprocal), a binary op
 * (add ... xor), where(cond, x, y), or a cast of x to DVM_F32, DVM_I64 or
 * DVM_BOOL. */
int dvm_fused_op1(dvm_fused_builder *b, dvm_fused_op op, int x);
int dvm_fused_op2(dvm_fused_builder *b, dvm_fused_op op, int x, int y);
int dvm_fused_where(dvm_fused_builder *b, int cond, int x, int y);
int dvm_fused_cast(dvm_fused_builder *b, int x, dvm_dtype to);
/* A row reduction (DVM_FUSED_ROW_SUM, _MEAN, _MAX, _MIN) of f32 value x:
 * every element of the result is the reduction of x over its row of the
 * output's last dim (a per-row value, broadcast along the row). Makes the
 * program a row program. */
int dvm_fused_row_reduce(dvm_fused_builder *b, dvm_fused_op op, int x);
/* Writes value v to output `output`; every output is stored exactly once. */
void dvm_fused_store(dvm_fused_builder *b, int output, int v);

/* Assigns registers and encodes the program into a new buffer (*payload,
 * *size; free() it), validated as the kernel will. Returns the first
 * mistake instead, if any; either way the builder holds nothing after. */
DVM_MUST_USE dvm_status *dvm_fused_builder_finish(dvm_fused_builder *b, void **payload,
                                                  size_t *size);

#endif
