/* Shape functions of ONNX Runtime's contrib ops (ops/cpu/contrib.c), over
 * the kernels' inputs.
 *
 *   "embed_layernorm" (ids [B, S], segment_ids, word [V, H], ...) -> [B, S, H], [B]
 *   "attention" (x [B, S, Hin], weights [Hin, 3H], ...) -> [B, S, H] */
#include "kernel.h"
#include "shapefuncs/shape.h"

static dvm_status *shapefn_embed_layernorm(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int ri, rw;
  const int64_t *ids, *word;
  dvm_status *st = dvm_shape_check_counts("embed_layernorm", nin, 8, 10, nout, 2);
  if (!st) st = dvm_shape_arg("embed_layernorm", &in[0], 0, &ri, &ids);
  if (!st) st = dvm_shape_arg("embed_layernorm", &in[2], 2, &rw, &word);
  if (st) return st;
  if (ri != 2 || rw != 2)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "embed_layernorm: ids and the word table must be 2-D");
  dvm_shape_set(&out[0], 3, (int64_t[]){ids[0], ids[1], word[1]});
  dvm_shape_set(&out[1], 1, ids);
  return NULL;
}

static dvm_status *shapefn_attention(const dvm_value *in, int nin, dvm_value *out, int nout) {
  int rx, rw;
  const int64_t *x, *w;
  dvm_status *st = dvm_shape_check_counts("attention", nin, 7, 8, nout, 1);
  if (!st) st = dvm_shape_arg("attention", &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg("attention", &in[1], 1, &rw, &w);
  if (st) return st;
  if (rx != 3 || rw != 2 || w[1] % 3)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "attention: x must be [B, S, Hin] and weights [Hin, 3H]");
  dvm_shape_set(&out[0], 3, (int64_t[]){x[0], x[1], w[1] / 3});
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_contrib_table[] = {
    {"embed_layernorm", shapefn_embed_layernorm},
    {"attention", shapefn_attention},
    {NULL, NULL},
};
