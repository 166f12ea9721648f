/* Opcodes and their properties, generated from opcodes.def. */
#ifndef DVM_OPCODE_H
#define DVM_OPCODE_H

#include <stdint.h>

enum {
  DVM_OPF_JUMP = 1,
  DVM_OPF_END = 2,
  DVM_OPF_FAIL = 4,
  DVM_OPF_ALLOC = 8,
  DVM_OPF_CALL = 16,
};

typedef enum dvm_opcode {
#define X(e, name, ops, flags, syn) DVM_OP_##e,
#include "opcodes.def"
#undef X
  DVM_OP_COUNT
} dvm_opcode;

typedef struct dvm_opinfo {
  const char *name;
  const char *format;
  unsigned flags;
  const char *synopsis;
} dvm_opinfo;

extern const dvm_opinfo dvm_opinfo_table[DVM_OP_COUNT];

/* True for operand letters that are lists (a count, then items). */
static inline int dvm_operand_is_list(char c) { return c == 'R' || c == 'D' || c == 'I'; }

/* DVM_EACH_OPERAND(ops) expands DVM_OPERAND(letter, name) for each pair of
 * an opcodes.def operand run, such as (d, dst)(r, src); the user defines
 * DVM_OPERAND around the expansion. DVM_EACH_PARAM(ops) is the same walk
 * with DVM_PARAM, for where one row needs two expansions (instr.h). The
 * A and B macros take turns, so the preprocessor walks the run without
 * recursion; the (end) after the run, one argument, stops them. */
#define DVM_EACH_OPERAND(ops) DVM_OPERAND_A ops (end)
#define DVM_OPERAND_A(...) DVM_CAT(DVM_OPERAND_A, DVM_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define DVM_OPERAND_B(...) DVM_CAT(DVM_OPERAND_B, DVM_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define DVM_OPERAND_A1(end)
#define DVM_OPERAND_B1(end)
#define DVM_OPERAND_A2(letter, name) DVM_OPERAND(letter, name) DVM_OPERAND_B
#define DVM_OPERAND_B2(letter, name) DVM_OPERAND(letter, name) DVM_OPERAND_A
#define DVM_EACH_PARAM(ops) DVM_PARAM_A ops (end)
#define DVM_PARAM_A(...) DVM_CAT(DVM_PARAM_A, DVM_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define DVM_PARAM_B(...) DVM_CAT(DVM_PARAM_B, DVM_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define DVM_PARAM_A1(end)
#define DVM_PARAM_B1(end)
#define DVM_PARAM_A2(letter, name) DVM_PARAM(letter, name) DVM_PARAM_B
#define DVM_PARAM_B2(letter, name) DVM_PARAM(letter, name) DVM_PARAM_A
#define DVM_NARGS(...) DVM_NARGS_(__VA_ARGS__, 2, 1, 0)
#define DVM_NARGS_(a, b, n, ...) n
#define DVM_CAT(a, b) DVM_CAT_(a, b)
#define DVM_CAT_(a, b) a##b

#endif
