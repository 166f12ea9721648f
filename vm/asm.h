/* The text form of bytecode (.dvms): an assembler and a disassembler that
 * round-trip (docs/bytecode.md describes the syntax). */
#ifndef DVM_ASM_H
#define DVM_ASM_H

#include <stdio.h>

#include "bytecode.h"

/* Parses assembly text into a verified (not linked) module. Errors name
 * `filename`, the line and the column. */
DVM_MUST_USE dvm_status *dvm_asm_parse(const char *text, size_t len, const char *filename,
                                       dvm_module **out);

/* Prints the whole module as assembly that dvm_asm_parse reads back to the
 * same file bytes. */
void dvm_disasm_module(const dvm_module *m, FILE *out);

/* Prints the source code that kernels' payloads carry (a generated CUDA
 * kernel's CUDA C), as their describe hooks read it (kernel.h), in comment
 * lines, which the assembler skips. m must be linked (loaded). */
void dvm_disasm_gen_sources(const dvm_module *m, FILE *out);

/* Prints one instruction (no label, no newline) with its synopsis. */
void dvm_disasm_instr(const dvm_module *m, const dvm_func *f, uint32_t index, FILE *out);

/* Prints a name bare when it is an identifier, else quoted with escapes. */
void dvm_disasm_name(const char *s, FILE *out);

#endif
