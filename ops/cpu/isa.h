/* Which x86 vector instructions the CPU kernels use, chosen once per
 * process from cpuid (ops/cpu/isa.c), so one binary uses what each CPU has.
 * DVM_CPU_ISA=generic|avx2|avx512f in the environment lowers the choice
 * (for tests and comparisons); it never raises it past what the CPU has. */
#ifndef DVM_OPS_CPU_ISA_H
#define DVM_OPS_CPU_ISA_H

typedef enum dvm_isa {
  DVM_ISA_GENERIC, /* no hand-written vector kernel: callers use their plain path */
  DVM_ISA_AVX2,    /* AVX2 + FMA */
  DVM_ISA_AVX512F, /* AVX-512 F (with AVX2 + FMA) */
  DVM_ISA_COUNT
} dvm_isa;

/* Whether this CPU (and this build: GCC on x86-64) can run isa's kernels. */
int dvm_isa_supported(dvm_isa isa);
/* The best supported, lowered by DVM_CPU_ISA; read once. */
dvm_isa dvm_isa_chosen(void);
const char *dvm_isa_name(dvm_isa isa); /* "generic", "avx2", "avx512f" */
/* Whether oneDNN's 8-bit integer GEMM sums exactly here: the chosen ISA is
 * AVX-512 and the CPU has VNNI (vpdpbusd adds its products into i32;
 * without VNNI oneDNN pairs them in saturating i16). */
int dvm_isa_int8_dot(void);
/* Whether the int8 tiles may use AMX (Intel's tile registers and their
 * int8 dot products): the chosen ISA is AVX-512, the CPU has AMX-TILE and
 * AMX-INT8, Linux grants the process the tile state, and DVM_CPU_AMX is
 * not 0 in the environment. Read once. */
int dvm_isa_amx_int8(void);

#endif
