/* A GEMM of A against a B packed once: the matmul and gemm
 * kernels' path for constant weights (ops/cpu/pgemm.c). */
#ifndef DVM_OPS_CPU_PGEMM_H
#define DVM_OPS_CPU_PGEMM_H

#include <stdint.h>

#include "ops/cpu/epilogue.h"
#include "ops/cpu/isa.h"

/* The packed path serves every product with a constant f32 B, of any
 * number of rows, so that B is held once, packed, and its plain bytes are
 * given back (vm/link.c): below 96 rows it beats dnnl_sgemm, which packs B
 * on every call, and from 128 rows on it is about as fast, A being packed
 * by row block where its rows would alias in L1 or number 96 or more
 * (pgemm.c; docs/performance.md "Packed A", "Packed A from 96 rows"). */

typedef struct dvm_pgemm_b dvm_pgemm_b;

/* gemm's packed forms of a constant B, one per transB (ops/cpu/matmul.c);
 * a form the linker saw no use for is NULL. */
typedef struct dvm_gemm_packs {
  dvm_pgemm_b *b[2];
} dvm_gemm_packs;

/* B [k, n] packed, its element (l, j) read at b[l * sk + j * sn] (so a
 * transposed B is sk = 1, sn = its row length), for the process's variant
 * (dvm_isa_chosen: AVX-512 F or AVX2 + FMA). NULL where the packed path
 * cannot run (neither on this CPU, k or n 0) or memory is short: callers
 * then use the plain path. Free with dvm_pgemm_free. */
dvm_pgemm_b *dvm_pgemm_pack(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn);
/* The same for a given variant (tests, benchmarks); NULL for
 * DVM_ISA_GENERIC or one this CPU lacks. */
dvm_pgemm_b *dvm_pgemm_pack_isa(dvm_isa isa, const float *b, int64_t k, int64_t n, int64_t sk,
                                int64_t sn);
/* dvm_pgemm_pack, reading b a block of rows at a time and calling
 * done(ctx, l0, l1) once rows [l0, l1) are read for the last time (so a
 * caller can give their memory back as packing goes: vm/link.c). done is
 * not called when it returns NULL. */
dvm_pgemm_b *dvm_pgemm_pack_rows(const float *b, int64_t k, int64_t n, int64_t sk, int64_t sn,
                                 void (*done)(void *ctx, int64_t l0, int64_t l1), void *ctx);
void dvm_pgemm_free(void *pb);
dvm_isa dvm_pgemm_isa(const dvm_pgemm_b *pb); /* the variant pb was packed for */

/* pb's k and n. */
int64_t dvm_pgemm_k(const dvm_pgemm_b *pb);
int64_t dvm_pgemm_n(const dvm_pgemm_b *pb);

/* C = alpha A pb + beta C for C [m, n] with rows ldc apart and A [m, k]
 * read at a[i * sm + l * sk] (beta 0: C is only written). Where A's rows
 * are a multiple of 4 KiB apart or number 96 or more (and past one block
 * of rows, sk 1), A is packed into a buffer of m k floats first, the
 * threads splitting its row blocks (pgemm.c; without the memory A is read
 * in place). Threads split pb's
 * column panels. epi (NULL: none) is applied to each panel's columns
 * of C as soon as they are computed (epilogue.h). */
void dvm_pgemm_run(const dvm_pgemm_b *pb, int64_t m, const float *a, int64_t sm, int64_t sk,
                   float alpha, float beta, float *c, int64_t ldc, int threads, const dvm_epilogue *epi);

#endif
