/* The text form of bytecode (.dvms): an assembler and a disassembler that
 * round-trip (docs/bytecode.md describes the syntax). */
#ifndef DVM_ASM_H
#define DVM_ASM_H

#include <stdio.h>

#include "bytecode.h"
#include "dvm/asm.h"

/* Parses assembly text into a verified (not linked) module. Errors name
 * `filename`, the line and the column. */
DVM_MUST_USE dvm_status *dvm_asm_parse(const char *text, size_t len, const char *filename,
                                       dvm_module **out);

/* Prints one instruction (no label, no newline) with its synopsis. */
void dvm_disasm_instr(const dvm_module *m, const dvm_func *f, uint32_t index, FILE *out);

/* Prints a name bare when it is an identifier, else quoted with escapes. */
void dvm_disasm_name(const char *s, FILE *out);

#endif
