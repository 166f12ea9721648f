/* Walking encoded instructions: lengths, indices and places for messages. */
#include <stdio.h>

#include "bytecode.h"
#include "opcode.h"

uint32_t dvm_instr_length(const int64_t *code, uint32_t ncode, uint32_t pc) {
  if (pc >= ncode) return 0;
  int64_t op = code[pc];
  if (op < 0 || op >= DVM_OP_COUNT) return 0;
  uint64_t w = (uint64_t)pc + 1;
  for (const char *f = dvm_opinfo_table[op].format; *f; f++) {
    if (w >= ncode) return 0;
    if (dvm_operand_is_list(*f)) {
      int64_t n = code[w];
      if (n < 0 || n > DVM_MAX_LIST || (uint64_t)n > ncode - w - 1) return 0;
      w += 1 + (uint64_t)n;
    } else {
      w++;
    }
  }
  return (uint32_t)(w - pc);
}

void dvm_instr_operands(const int64_t *code, uint32_t pc, void (*fn)(void *ctx, char letter, uint32_t word),
                        void *ctx) {
  uint32_t w = pc + 1;
  for (const char *f = dvm_opinfo_table[code[pc]].format; *f; f++) {
    if (dvm_operand_is_list(*f)) {
      int64_t n = code[w++];
      for (int64_t k = 0; k < n; k++) fn(ctx, *f, w++);
    } else {
      fn(ctx, *f, w++);
    }
  }
}

typedef struct {
  const int64_t *code;
  int64_t target;
} finding;

static void find_target(void *ctx, char letter, uint32_t word) {
  finding *f = ctx;
  if (letter == 'j') f->target = f->code[word];
}

int64_t dvm_instr_jump_target(const int64_t *code, uint32_t pc) {
  finding f = {code, -1};
  dvm_instr_operands(code, pc, find_target, &f);
  return f.target;
}

int dvm_func_instr_index(const dvm_func *f, uint32_t pc) {
  uint32_t lo = 0, hi = f->ninstr;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (f->starts[mid] < pc) lo = mid + 1;
    else hi = mid;
  }
  return lo < f->ninstr && f->starts[lo] == pc ? (int)lo : -1;
}

const char *dvm_func_where(const dvm_func *f, uint32_t pc, char *buf, size_t size) {
  int i = f->starts ? dvm_func_instr_index(f, pc) : -1;
  if (i < 0) {
    snprintf(buf, size, "function \"%s\", word %u", f->name, pc);
    return buf;
  }
  int64_t op = f->code[pc];
  const char *src = f->src ? f->src[i] : NULL;
  snprintf(buf, size, "function \"%s\", instruction %d (%s)%s%s%s", f->name, i,
           dvm_opinfo_table[op].name, src ? ", node \"" : "", src ? src : "", src ? "\"" : "");
  return buf;
}
