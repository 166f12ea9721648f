/* The opcode table, expanded from opcodes.def. */
#include "opcode.h"

#define JUMP DVM_OPF_JUMP
#define END DVM_OPF_END
#define FAIL DVM_OPF_FAIL
#define ALLOC DVM_OPF_ALLOC
#define CALL DVM_OPF_CALL

const dvm_opinfo dvm_opinfo_table[DVM_OP_COUNT] = {
#define X(e, name, fmt, flags, syn) {name, fmt, flags, syn},
#include "opcodes.def"
#undef X
};
