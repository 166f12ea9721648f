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
#define X(e, name, fmt, flags, syn) DVM_OP_##e,
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

#endif
