/* Fuzz target for the DVMG payload reader (ops/cuda/payload.c), which
 * reads the generated CUDA kernels' payloads of an untrusted .dvmb. Any
 * input must be read or refused with a corrupt-file error that names the
 * payload; one that is read must hold only what the launcher relies on
 * (counts in range, a permuted or sliced input only as the one input of an
 * elementwise kernel, a concat's or split's dtypes all one, a window pool
 * or resize of one input and one output of one dtype a kernel copies as
 * bits, a window pool's f32, a conv's 2 to 4 inputs and its output f32, a
 * conv_transpose's 2 or 3 inputs and its output f32, a matmul_nbits' 3 to
 * 5 inputs: B u8, zero points u8 or f32, others f32),
 * and its summary must be written. A broken
 * promise aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dvm/tensor.h"
#include "ops/cuda/payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int ok) {
  if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dvm_gen_payload g;
  dvm_status *st = dvm_gen_payload_read(data, size, &g);
  if (st) {
    require(dvm_status_code(st) == DVM_CORRUPT);
    require(strncmp(dvm_status_message(st), "DVMG payload", 12) == 0);
    dvm_status_free(st);
    return 0;
  }
  require(g.kind >= DVM_GEN_ELEMENTWISE && g.kind <= DVM_GEN_MATMUL_NBITS);
  require(g.nin >= 1 && g.nin <= DVM_GEN_MAX_IN && g.nout >= 1 && g.nout <= DVM_GEN_MAX_OUT);
  require(g.tile >= 1 && g.tile <= DVM_GEN_MAX_TILE && g.nconfigs >= 1 && g.nconfigs <= DVM_GEN_MAX_CONFIGS);
  for (int k = 0; k < g.nin; k++) {
    require(g.classes[k] <= DVM_GEN_SLICED);
    require(g.classes[k] < DVM_GEN_PERMUTED || (g.kind == DVM_GEN_ELEMENTWISE && g.nin == 1));
  }
  for (int k = 0; k < g.nin + g.nout; k++) {
    require(g.dtypes[k] < DVM_DTYPE_COUNT);
    require((g.kind != DVM_GEN_CONCAT && g.kind != DVM_GEN_SPLIT) || g.dtypes[k] == g.dtypes[0]);
  }
  require(g.kind != DVM_GEN_SPLIT || g.nin == 1);
  require(g.kind != DVM_GEN_CONCAT || g.nout == 1);
  if (g.kind == DVM_GEN_WINDOW || g.kind == DVM_GEN_RESIZE) { /* one input, one output, bits copied */
    require(g.nin == 1 && g.nout == 1 && g.dtypes[1] == g.dtypes[0]);
    require(g.kind == DVM_GEN_RESIZE || g.dtypes[0] == DVM_F32);
    require(g.dtypes[0] != DVM_STRING && dvm_dtype_size((dvm_dtype)g.dtypes[0]) <= 8);
  }
  for (int k = 0; g.kind == DVM_GEN_CONV && k < g.nin + g.nout; k++) /* f32 throughout */
    require(g.nin >= 2 && g.nin <= 4 && g.nout == 1 && g.dtypes[k] == DVM_F32);
  for (int k = 0; g.kind == DVM_GEN_CONV_TRANSPOSE && k < g.nin + g.nout; k++)
    require(g.nin >= 2 && g.nin <= 3 && g.nout == 1 && g.dtypes[k] == DVM_F32);
  for (int k = 0; g.kind == DVM_GEN_MATMUL_NBITS && k < g.nin + g.nout; k++) /* B u8; input 3 u8 or f32 */
    require(g.nin >= 3 && g.nin <= 5 && g.nout == 1 &&
            (k == 1 ? g.dtypes[k] == DVM_U8 : g.dtypes[k] == DVM_F32 || (k == 3 && g.nin > 3 && g.dtypes[k] == DVM_U8)));
  dvm_payload_desc d;
  st = dvm_gen_payload_describe(data, size, &d);
  require(!st && strlen(d.summary) < sizeof d.summary);
  return 0;
}
