/* The text form of bytecode (.dvms, docs/bytecode.md): assembling it to
 * .dvmb bytes, and printing a loaded module as text that assembles back to
 * the same bytes. */
#ifndef DVM_DVM_ASM_H
#define DVM_DVM_ASM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dvm/module.h"

/* Assembles and verifies `len` bytes of text (borrowed); `*out` is
 * malloc'ed, `*size` bytes long: free it. Errors name `filename`, the line
 * and the column. */
DVM_API DVM_MUST_USE dvm_status *dvm_asm_assemble(const char *text, size_t len, const char *filename,
                                                  uint8_t **out, size_t *size);

/* Prints the whole module as assembly that dvm_asm_assemble turns back
 * into the same file bytes. */
DVM_API void dvm_disasm_module(const dvm_module *m, FILE *out);

/* Prints the source code that kernels' payloads carry (a generated CUDA
 * kernel's CUDA C), as their describe hooks read it, in comment lines,
 * which the assembler skips. m must be linked (loaded). */
DVM_API void dvm_disasm_gen_sources(const dvm_module *m, FILE *out);

#endif
