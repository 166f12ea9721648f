/* The exact i32 product of 8-bit A [rows, K] and a constant 8-bit B [K, N]
 * packed once at link: ONNX MatMulInteger's and MatMulIntegerToFloat's
 * product where B is a weight (ops/cpu/quant.c).
 *
 * B is held as beta = b or b ^ 0x80 (the bytes the tile's instruction
 * wants), in columns groups of 16, each group a run of 64-byte units of 4
 * consecutive k (byte 4c + j = beta(k + j, c)), K padded to a multiple of
 * 4 and N to 16 with zeros, and each column's sum of beta. A's rows are
 * likewise alpha = a or a ^ 0x80. The tile sums D = alpha . beta (vpdpbusd
 * with AVX-512 VNNI: alpha u8, beta s8; with AVX2, beta u8 split into
 * nibbles for vpmaddubsw so that no i16 pair saturates: alpha s8), and
 *   (a - az)(b - bz) = D - az' colsum(beta) - bz' (rowsum(alpha) - K az')
 * with az' and bz' the zero points in alpha's and beta's encodings, all
 * in i32 modulo 2^32: exact, as the true sum fits (K <= 2^15). */
#ifndef DVM_OPS_CPU_QGEMM_H
#define DVM_OPS_CPU_QGEMM_H

#include <stdint.h>

#include "dvm/status.h"

typedef struct dvm_qgemm_b dvm_qgemm_b;

/* B [k, n] (u8, or i8 where b_signed) packed for this CPU's tile; NULL
 * when out of memory or when the CPU has neither AVX2 nor AVX-512 VNNI
 * (callers then use their plain path). Free with dvm_qgemm_free. */
dvm_qgemm_b *dvm_qgemm_pack(const void *b, int b_signed, int64_t k, int64_t n);
void dvm_qgemm_free(void *b);
int64_t dvm_qgemm_k(const dvm_qgemm_b *b);
int64_t dvm_qgemm_n(const dvm_qgemm_b *b);
int dvm_qgemm_signed(const dvm_qgemm_b *b);

/* y [rows, N] = (a - az[r % naz]) (B - bz[n % nbz]) for a [rows, K] (u8,
 * or i8 where a_signed); on up to `threads` threads. */
dvm_status *dvm_qgemm_run(const dvm_qgemm_b *b, const void *a, int a_signed, int64_t rows, const int32_t *az,
                          int64_t naz, const int32_t *bz, int64_t nbz, int threads, int32_t *y);

/* Whether a product of `rows` rows runs on AMX tiles (Intel's tile unit:
 * isa.h), from 16 rows where the CPU has it. */
int dvm_qgemm_amx(int64_t rows);

/* "avx512-vnni" or "avx2": the tile this process packs for (tests). */
const char *dvm_qgemm_variant(void);

#endif
