/* A valid DVMG payload built byte by byte (gen_abi.h), shared by the
 * payload tests and the fake-driver tests. */
#ifndef DVM_TESTS_CUDA_PAYLOAD_FIXTURE_H
#define DVM_TESTS_CUDA_PAYLOAD_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "ops/cuda/gen_abi.h"

enum { NIN = 3, NCONF = 2, NIMG = 3 };
#define CLASSES_AT (32 + NCONF * 8)
#define TABLE_AT ((CLASSES_AT + NIN + 7) / 8 * 8)
#define DATA_AT (TABLE_AT + NIMG * 16)
#define DTYPES_AT DATA_AT
#define SRC_AT (DATA_AT + 8)
#define SRC_SIZE 13
#define IMG_AT(i) (DATA_AT + 24 + (i) * 24)
#define IMG_SIZE 20
#define TOTAL (IMG_AT(NIMG - 1) + IMG_SIZE)

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v & 0xffff); put16(p + 2, v >> 16); }

/* ELEMENTWISE, 3 inputs (same, scalar, strided), all f32 like its
 * output, tile 8, configs of 128x4 and 256x1 threads, images sm_80, sm_90
 * and PTX. */
static void build(uint8_t *p) {
  static const uint32_t arch[NIMG] = {80, 90, 0};
  memset(p, 0, TOTAL);
  memcpy(p, "DVMG", 4);
  put16(p + 4, DVM_GEN_VERSION);
  p[6] = DVM_GEN_ELEMENTWISE;
  p[7] = NCONF;
  p[8] = NIN;
  p[9] = 1;
  put16(p + 10, 8);
  put32(p + 12, NIMG);
  put32(p + 16, SRC_AT);
  put32(p + 20, SRC_SIZE);
  put32(p + 24, DTYPES_AT); /* f32 is code 0: the four dtype bytes are 0 */
  put16(p + 32, 128), put16(p + 34, 4), put32(p + 36, 0);
  put16(p + 40, 256), put16(p + 42, 1), put32(p + 44, 1024);
  p[CLASSES_AT] = DVM_GEN_SAME, p[CLASSES_AT + 1] = DVM_GEN_SCALAR, p[CLASSES_AT + 2] = DVM_GEN_STRIDED;
  for (int i = 0; i < NIMG; i++) {
    uint8_t *e = p + TABLE_AT + 16 * i;
    put32(e, arch[i]);
    put32(e + 8, IMG_AT(i));
    put32(e + 12, IMG_SIZE);
    memcpy(p + IMG_AT(i), arch[i] ? "\177ELF cubin" : ".version 8.0", arch[i] ? 10 : 12);
  }
  memcpy(p + SRC_AT, "__global__ f;", SRC_SIZE);
}

#endif
