/* Shape functions of the ops that carry a state across decode steps
 * (ops/cpu/state.c), over the kernels' present inputs and attributes (the
 * first attribute the bit mask of which inputs are given).
 *
 *   "linear_attention" (query [B, T, Hq dk], key, value [B, T, Hkv dv], ...,
 *       present, q_num_heads, kv_num_heads, ...) -> [B, T, Hq dv],
 *       [B, Hkv, dk, dv]
 *   "causal_conv_with_state" (input [B, C, L], weight [C, 1, K], ...)
 *       -> [B, C, L], [B, C, K-1] */
#include "kernel.h"
#include "shapefuncs/attr.h"
#include "shapefuncs/shape.h"

static dvm_status *shapefn_linear_attention(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "linear_attention";
  int rq, rv;
  const int64_t *q, *v;
  int64_t hq, hkv;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 9, 12, nout, 2);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rq, &q);
  if (!st) st = dvm_shape_arg(fn, &in[2], 2, &rv, &v);
  if (!st) st = dvm_attr_int(fn, "q_num_heads", &in[nin - 5], &hq);
  if (!st) st = dvm_attr_int(fn, "kv_num_heads", &in[nin - 4], &hkv);
  if (st) return st;
  if (rq != 3 || rv != 3 || hq <= 0 || hkv <= 0 || q[2] % hq || v[2] % hkv)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: query and value must be [B, T, heads * dim]", fn);
  dvm_shape_set(&out[0], 3, (int64_t[]){q[0], q[1], hq * (v[2] / hkv)});
  dvm_shape_set(&out[1], 4, (int64_t[]){q[0], hkv, q[2] / hq, v[2] / hkv});
  return NULL;
}

static dvm_status *shapefn_causal_conv_with_state(const dvm_value *in, int nin, dvm_value *out, int nout) {
  const char *fn = "causal_conv_with_state";
  int rx, rw;
  const int64_t *x, *w;
  dvm_status *st = dvm_shape_check_counts(fn, nin, 4, 6, nout, 2);
  if (!st) st = dvm_shape_arg(fn, &in[0], 0, &rx, &x);
  if (!st) st = dvm_shape_arg(fn, &in[1], 1, &rw, &w);
  if (st) return st;
  if (rx != 3 || rw != 3 || w[2] < 1)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: input must be [B, C, L] and weight [C, 1, K >= 1]", fn);
  dvm_shape_set(&out[0], 3, x);
  dvm_shape_set(&out[1], 3, (int64_t[]){x[0], x[1], w[2] - 1});
  return NULL;
}

const dvm_shapefn_def dvm_shapefn_state_table[] = {
    {"linear_attention", shapefn_linear_attention},
    {"causal_conv_with_state", shapefn_causal_conv_with_state},
    {NULL, NULL},
};
