/* Instruction layouts, generated from opcodes.def: for each opcode a struct
 * of its operands (dvm_ops_INVOKE), a decoder that reads them from the
 * instruction's words (dvm_decode_INVOKE) and an encoder that appends them
 * (dvm_encode_INVOKE). Everything that reads or writes instructions goes
 * through these, so where an operand lies is written in one place: its
 * opcode's row.
 *
 * A scalar operand is an int64_t field, a list a dvm_list; `end` points
 * past the instruction. Decoders trust their input: they read verified
 * code, or code the compiler is building. */
#ifndef DVM_INSTR_H
#define DVM_INSTR_H

#include <stdint.h>

#include "opcode.h"
#include "vec.h"

/* n items at v (a list operand is its count word, then the items). */
typedef struct dvm_list {
  int64_t n;
  const int64_t *v;
} dvm_list;

/* A list of the given int64_t items; DVM_NO_LIST has none. */
#define DVM_LIST(...) \
  ((dvm_list){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (int64_t[]){__VA_ARGS__}})
#define DVM_NO_LIST ((dvm_list){0, NULL})

/* Code being built; *oom is set when it cannot grow. */
typedef DVM_VEC(int64_t) dvm_words;

static inline void dvm_words_put(dvm_words *w, int *oom, int64_t x) { DVM_VEC_PUSH(*w, x, *oom = 1); }

static inline void dvm_words_list(dvm_words *w, int *oom, dvm_list l) {
  dvm_words_put(w, oom, l.n);
  for (int64_t i = 0; i < l.n; i++) dvm_words_put(w, oom, l.v[i]);
}

/* Each letter is a scalar (S) or a list (L). */
#define DVM_CLASS_d S
#define DVM_CLASS_r S
#define DVM_CLASS_o S
#define DVM_CLASS_k S
#define DVM_CLASS_i S
#define DVM_CLASS_f S
#define DVM_CLASS_c S
#define DVM_CLASS_F S
#define DVM_CLASS_X S
#define DVM_CLASS_Y S
#define DVM_CLASS_H S
#define DVM_CLASS_s S
#define DVM_CLASS_j S
#define DVM_CLASS_t S
#define DVM_CLASS_v S
#define DVM_CLASS_p S
#define DVM_CLASS_q S
#define DVM_CLASS_R L
#define DVM_CLASS_D L
#define DVM_CLASS_I L
#define DVM_BY_CLASS(prefix, letter) DVM_CAT(prefix, DVM_CLASS_##letter)

#define DVM_TYPE_S int64_t
#define DVM_TYPE_L dvm_list
#define DVM_READ_S(x, name) x.name = *p++;
#define DVM_READ_L(x, name) x.name = (dvm_list){p[0], p + 1}, p += 1 + p[0];
#define DVM_WRITE_S dvm_words_put
#define DVM_WRITE_L dvm_words_list

/* the operands' struct */
#define DVM_OPERAND(letter, name) DVM_BY_CLASS(DVM_TYPE_, letter) name;
#define X(e, name, ops, flags, syn) \
  typedef struct dvm_ops_##e {      \
    DVM_EACH_OPERAND(ops)           \
    const int64_t *end;             \
  } dvm_ops_##e;
#include "opcodes.def"
#undef X
#undef DVM_OPERAND

/* the decoder, from the instruction's first word (its opcode) */
#define DVM_OPERAND(letter, name) DVM_BY_CLASS(DVM_READ_, letter)(x, name)
#define X(e, name, ops, flags, syn)                                   \
  static inline dvm_ops_##e dvm_decode_##e(const int64_t *instr) {   \
    dvm_ops_##e x;                                                    \
    const int64_t *p = instr + 1;                                     \
    DVM_EACH_OPERAND(ops)                                             \
    x.end = p;                                                        \
    return x;                                                         \
  }
#include "opcodes.def"
#undef X
#undef DVM_OPERAND

/* An operand as a parameter (with DVM_EACH_PARAM, after a first one):
 * scalars as int64_t, lists as dvm_list. */
#define DVM_PARAM(letter, name) , DVM_BY_CLASS(DVM_TYPE_, letter) name

/* the encoder: the opcode, then the operands in order */
#define DVM_OPERAND(letter, name) DVM_BY_CLASS(DVM_WRITE_, letter)(w, oom, name);
#define X(e, name, ops, flags, syn)                                               \
  static inline void dvm_encode_##e(dvm_words *w, int *oom DVM_EACH_PARAM(ops)) { \
    dvm_words_put(w, oom, DVM_OP_##e);                                            \
    DVM_EACH_OPERAND(ops)                                                         \
  }
#include "opcodes.def"
#undef X
#undef DVM_OPERAND

#endif
