/* Block-quantized weights, com.microsoft MatMulNBits: B's codes, scales
 * and zero points in the layout the tiles read, and the tiles
 * (ops/cpu/nbits_tile.c). The kernel (ops/cpu/nbits.c) checks the
 * inputs, prepares A and splits the column groups over the threads.
 *
 * Layout of B: columns in groups of DVM_NBITS_NG (16), the last one
 * padded with zero codes; each group holds its blocks in order along K
 * (the last block padded with zero codes); each block is a run of 64-byte
 * units, the 16 columns' codes for a few consecutive k:
 *   4 bits: 8 k per unit, byte 4c + j = code(k + j, c) | code(k + 4 + j, c) << 4
 *   8 bits: 4 k per unit, byte 4c + j = code(k + j, c)            (j < 4)
 * so the 4 bytes of a column are one 32-bit lane: a broadcast of 4 codes
 * of a row of A against a unit (vpdpbusd, or vpmaddubsw + vpmaddwd) sums 4
 * products into each column's lane, and no horizontal sum is needed.
 * Scales and zero points are floats, [group][block][16]. */
#ifndef DVM_OPS_CPU_NBITS_H
#define DVM_OPS_CPU_NBITS_H

#include <stdint.h>

#include "kernel.h"

#define DVM_NBITS_NG 16 /* columns per group */
#define DVM_NBITS_MR 4  /* rows of A per tile */
#define DVM_NBITS_AMX_ROWS 16  /* rows of A per tile on AMX */

typedef struct dvm_nbits_b {
  int64_t k, n, bits, block, kb, groups;
  uint8_t *codes; /* groups * kb * block * NG * bits / 8 bytes, 64-byte aligned */
} dvm_nbits_b;

/* Scales or zero points of [n, kb] blocks, as floats in groups. */
typedef struct dvm_nbits_q {
  int64_t n, kb, bits; /* bits: of the codes it was made from, 0 from floats */
  float *v; /* groups * kb * NG */
} dvm_nbits_q;

/* B [n, kb, block * bits / 8] (ONNX Runtime's layout: codes along k, low
 * nibble first) in the tiles' layout; NULL when out of memory. Free with
 * dvm_nbits_b_free. */
dvm_nbits_b *dvm_nbits_pack_b(const uint8_t *b, int64_t k, int64_t n, int64_t bits, int64_t block);
void dvm_nbits_b_free(void *b);

/* Per-block values of n columns and kb blocks in groups: f32 [n, kb]
 * (codes NULL, f given), or codes of `bits` packed along the blocks
 * ([n, ceil(kb bits / 8)] bytes). NULL when out of memory. Free with
 * dvm_nbits_q_free. */
dvm_nbits_q *dvm_nbits_pack_q(const float *f, const uint8_t *codes, int64_t bits, int64_t n, int64_t kb);
void dvm_nbits_q_free(void *q);

/* A's side of a call: rows of kp = kb * block values (int8 codes for the
 * int8 tiles, floats for the f32 tiles; past K zeros), and per row and
 * block the scale the codes carry (1 for floats) and their sum. */
typedef struct dvm_nbits_a {
  const void *v;
  const float *scale, *sum;
  int64_t kp;
} dvm_nbits_a;

/* out[i * ldo + c] (r <= dvm_nbits_rows rows of 16, for rows i0 .. i0 + r
 * of A and group g's columns) = sum over blocks of a_scale * b_scale *
 * (dot - zp * a_sum), zero points from zp (NULL: every one zdef). int8: A
 * as codes, dot in i32 (AMX's tdpbsud where dvm_nbits_rows says so,
 * vpdpbusd where the CPU has AVX-512 VNNI, vpmaddubsw with AVX2); else A
 * as floats, dot in f32. The variant is chosen once per process
 * (ops/cpu/isa.h). scratch: the thread's dvm_nbits_scratch bytes, which
 * the tile at i0 = 0 fills with the group's codes unpacked and the later
 * row tiles of the group read: a thread runs a group's row tiles in
 * order. */
void dvm_nbits_tile(int int8, const dvm_nbits_b *b, const dvm_nbits_q *scales, const dvm_nbits_q *zp,
                    float zdef, const dvm_nbits_a *a, int64_t i0, int r, int64_t g, uint8_t *scratch,
                    float *out, int64_t ldo);

/* Rows of A a tile takes when A has m rows: DVM_NBITS_AMX_ROWS where the
 * int8 tiles run on AMX (isa.h) and m is large enough to fill them, else
 * DVM_NBITS_MR. */
int dvm_nbits_rows(int int8, int64_t m);
/* Bytes of scratch a thread's tiles need (AMX at 4 bits: a group's codes
 * unpacked), 0 if none. */
size_t dvm_nbits_scratch(const dvm_nbits_b *b, int int8, int64_t m);

/* A "matmul_nbits" call as the CPU kernel checks it (its attributes,
 * inputs and output), for a device kernel of the same semantics: kb 0
 * when B has a 0 dim (Y is the bias, or zeros); m rows of A; zp and bias
 * the inputs' indices, 0 when not given. */
typedef struct dvm_nbits_call {
  int64_t k, n, bits, block, kb, m;
  int zp, zp_f32, bias;
} dvm_nbits_call;
DVM_MUST_USE dvm_status *dvm_nbits_check(const dvm_kernel_args *a, dvm_nbits_call *c);

/* "avx512-vnni", "avx2" or "generic": the int8 tiles' variant (tests). */
const char *dvm_nbits_int8_variant(void);

#endif
