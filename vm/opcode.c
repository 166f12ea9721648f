/* The opcode table, expanded from opcodes.def. */
#include "opcode.h"

#define JUMP DVM_OPF_JUMP
#define END DVM_OPF_END
#define FAIL DVM_OPF_FAIL
#define ALLOC DVM_OPF_ALLOC
#define CALL DVM_OPF_CALL

/* the format string: the operands' letters in order */
#define DVM_OPERAND(letter, name) #letter
const dvm_opinfo dvm_opinfo_table[DVM_OP_COUNT] = {
#define X(e, name, ops, flags, syn) {name, "" DVM_EACH_OPERAND(ops), flags, syn},
#include "opcodes.def"
#undef X
};
