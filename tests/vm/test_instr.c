/* The instruction layouts generated from vm/opcodes.def (vm/instr.h),
 * checked against the format strings that the reader, verifier and
 * assembler walk: for every opcode, words laid out by the format decode to
 * the operands in order, encode back to the same words, and end where
 * dvm_instr_length says; and every format keeps its lists last. */
#include <stdlib.h>

#include "bytecode.h"
#include "harness.h"
#include "instr.h"

/* Lays out opcode op by its format: scalar operand j is 100 + j, list
 * operand j has j % 3 items 1000 + 10 j + q. Returns the word count. */
static size_t layout(int op, int64_t *w) {
  size_t n = 0;
  w[n++] = op;
  const char *fmt = dvm_opinfo_table[op].format;
  for (int j = 0; fmt[j]; j++) {
    if (!dvm_operand_is_list(fmt[j])) {
      w[n++] = 100 + j;
      continue;
    }
    w[n++] = j % 3;
    for (int q = 0; q < j % 3; q++) w[n++] = 1000 + 10 * j + q;
  }
  return n;
}

/* Operand j of the decoded instruction against the layout. */
static void check_scalar(int op, int *j, int64_t v) {
  CHECK(v == 100 + *j);
  if (v != 100 + *j) fprintf(stderr, "  %s operand %d: %lld\n", dvm_opinfo_table[op].name, *j, (long long)v);
  ++*j;
}

static void check_list(int op, int *j, dvm_list l) {
  CHECK(l.n == *j % 3);
  for (int64_t q = 0; q < l.n && q < *j % 3; q++) CHECK(l.v[q] == 1000 + 10 * *j + q);
  if (l.n != *j % 3) fprintf(stderr, "  %s operand %d: %lld items\n", dvm_opinfo_table[op].name, *j, (long long)l.n);
  ++*j;
}

#define CHECK_S(x, name) check_scalar(op, &j, x.name);
#define CHECK_L(x, name) check_list(op, &j, x.name);

static void check_opcode(int op) {
  int64_t w[64];
  size_t n = layout(op, w);
  CHECK(dvm_instr_length(w, (uint32_t)n, 0) == n);
  dvm_words out = {0};
  int oom = 0, j = 0;
  const int64_t *end = NULL;
  switch (op) {
/* each operand checked in order, then all of them encoded again */
#define DVM_OPERAND(letter, name) DVM_BY_CLASS(CHECK_, letter)(x, name)
#undef DVM_PARAM
#define DVM_PARAM(letter, name) , x.name
#define X(e, name, ops, flags, syn)                 \
  case DVM_OP_##e: {                                \
    dvm_ops_##e x = dvm_decode_##e(w);              \
    DVM_EACH_OPERAND(ops)                           \
    end = x.end;                                    \
    dvm_encode_##e(&out, &oom DVM_EACH_PARAM(ops)); \
    break;                                          \
  }
#include "opcodes.def"
#undef X
  }
  CHECK(j == (int)strlen(dvm_opinfo_table[op].format));
  CHECK(end == w + n);
  CHECK(!oom && out.n == n);
  for (size_t k = 0; k < n && k < out.n; k++) CHECK(out.v[k] == w[k]);
  if (out.n != n || (n && memcmp(out.v, w, n * sizeof *w)))
    fprintf(stderr, "  %s: encoded words differ from the layout\n", dvm_opinfo_table[op].name);
  free(out.v);
}

int main(void) {
  for (int op = 0; op < DVM_OP_COUNT; op++) {
    const char *fmt = dvm_opinfo_table[op].format;
    for (int j = 1; fmt[0] && fmt[j]; j++) /* lists after every other operand */
      CHECK(!dvm_operand_is_list(fmt[j - 1]) || dvm_operand_is_list(fmt[j]));
    check_opcode(op);
  }
  return harness_finish("instr");
}
