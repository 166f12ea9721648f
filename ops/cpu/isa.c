/* The CPU kernels' instruction set (isa.h). */
#include "ops/cpu/isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "ops/cpu/elementwise.h"

static const char *const names[DVM_ISA_COUNT] = {"generic", "avx2", "avx512f"};

const char *dvm_isa_name(dvm_isa isa) { return isa < DVM_ISA_COUNT ? names[isa] : "?"; }

int dvm_isa_supported(dvm_isa isa) {
#if DVM_EW_X86
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (isa) {
  case DVM_ISA_GENERIC: return 1;
  case DVM_ISA_AVX2: return avx2;
  case DVM_ISA_AVX512F: return avx2 && __builtin_cpu_supports("avx512f");
  default: return 0;
  }
#else
  return isa == DVM_ISA_GENERIC;
#endif
}

static dvm_isa chosen;

static void choose(void) {
  int best = DVM_ISA_COUNT - 1;
  while (best > DVM_ISA_GENERIC && !dvm_isa_supported((dvm_isa)best)) best--;
  const char *want = getenv("DVM_CPU_ISA");
  for (int i = 0; want && i < best; i++)
    if (strcmp(want, names[i]) == 0) best = i;
  chosen = (dvm_isa)best;
}

dvm_isa dvm_isa_chosen(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose);
  return chosen;
}

int dvm_isa_int8_dot(void) {
#if DVM_EW_X86
  return dvm_isa_chosen() == DVM_ISA_AVX512F && __builtin_cpu_supports("avx512vnni");
#else
  return 0;
#endif
}

/* Linux hands out AMX's 8 KiB of tile state only on request
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without it the
 * first tile instruction faults. */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_int8;

static void choose_amx(void) {
#if DVM_EW_X86 && defined(__linux__)
  const char *want = getenv("DVM_CPU_AMX");
  amx_int8 = dvm_isa_chosen() == DVM_ISA_AVX512F && __builtin_cpu_supports("amx-tile") &&
             __builtin_cpu_supports("amx-int8") && !(want && strcmp(want, "0") == 0) &&
             syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
}

int dvm_isa_amx_int8(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, choose_amx);
  return amx_int8;
}
