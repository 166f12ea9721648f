/* QuantizeLinear and DequantizeLinear of constants made constants:
 *
 *   w = DequantizeLinear(Wq, scale[, zp])   (Wq, scale, zp constants)
 *     ->  w a constant: (float)(Wq - zp) * scale
 *   q = QuantizeLinear(k, scale[, zp])      (k, scale, zp constants)
 *     ->  q a constant: saturate(round_half_even(k / scale) + zp)
 *
 * ONNX Runtime's quantize_static stores every Conv's and Gemm's weights
 * as 8-bit integers and its biases as i32, each behind a
 * DequantizeLinear, and quantizes the constant values it meets (a Pad's
 * pad value) with a QuantizeLinear: run as they are, those nodes
 * dequantized every weight on every run (104 kernel calls a run of
 * MobileNetV2, and each convolution's weights a new tensor, so none was
 * prepacked). Computed here once, each element with the kernel's own f32
 * expression (ops/cpu/quant.c), so results are bitwise those of the
 * nodes run.
 *
 * Proven: every input a constant; x u8, i8 or i32 for DequantizeLinear
 * (its output f32), f32 for QuantizeLinear (its output u8 or i8, the zero
 * point's dtype); scale f32 of one element, or [len] of x's dim `axis`
 * (per axis), the zero point absent or of the scale's shape (one element
 * of any shape with one scale) and x's dtype (DequantizeLinear) or the
 * output's; no block_size; the output not a graph output and of at most
 * 2^22 elements (16 MiB as f32: a module holds its weights as f32 once
 * dequantized). Off: `--disable quant_const`. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "pass.h"

enum { MAX_ELEMS = 1 << 22 };

static int64_t numel(const dvmc_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

static int32_t int_at(const dvmc_tensor *t, int64_t i) {
  switch (t->dtype) {
  case DVM_U8: return ((const uint8_t *)t->data)[i];
  case DVM_I8: return ((const int8_t *)t->data)[i];
  default: return ((const int32_t *)t->data)[i];
  }
}

/* x's elements seen as [outer, len, inner] around the scale's axis: the
 * scale and zero point index of element e is (e / inner) % len. False
 * where the parameters are neither per tensor nor per axis. */
static bool layout(const dvmc_node *n, const dvmc_tensor *x, const dvmc_tensor *s, const dvmc_tensor *z,
                   int64_t *len, int64_t *inner) {
  *len = 1, *inner = 1;
  if (dvmc_attr_int(n, "block_size", 0) || s->dtype != DVM_F32) return false;
  if (numel(s) == 1) return !z || numel(z) == 1;
  int64_t axis = dvmc_attr_int(n, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis >= x->rank || s->rank != 1 || s->dims[0] != x->dims[axis]) return false;
  if (z && (z->rank != 1 || z->dims[0] != s->dims[0])) return false;
  *len = s->dims[0];
  for (int d = (int)axis + 1; d < x->rank; d++) *inner *= x->dims[d];
  return true;
}

/* The node's output as a constant tensor, or NULL where it does not fold
 * (*oom set when out of memory). */
static dvmc_tensor *folded(dvmc_ctx *c, const dvmc_node *n, bool *oom) {
  bool dq = !strcmp(n->op, "DequantizeLinear");
  if ((!dq && strcmp(n->op, "QuantizeLinear")) || n->domain[0] || n->nin < 2 || n->nout != 1 || !n->out[0])
    return NULL;
  const dvmc_tensor *x = n->in[0] ? n->in[0]->constant : NULL, *s = n->in[1] ? n->in[1]->constant : NULL;
  const dvmc_tensor *z = n->nin > 2 && n->in[2] ? n->in[2]->constant : NULL;
  if (!x || !s || (n->nin > 2 && n->in[2] && !z)) return NULL;
  int out = dq ? DVM_F32 : z ? (int)z->dtype : DVM_U8;
  bool ints = dq ? x->dtype == DVM_U8 || x->dtype == DVM_I8 || x->dtype == DVM_I32 : x->dtype == DVM_F32;
  if (!ints || (dq && z && z->dtype != x->dtype) || (!dq && out != DVM_U8 && out != DVM_I8)) return NULL;
  int64_t len, inner, count = numel(x);
  if (count > MAX_ELEMS || !layout(n, x, s, z, &len, &inner)) return NULL;
  dvmc_tensor *t = dvm_arena_alloc(&c->arena, 1, sizeof *t);
  size_t size = out == DVM_F32 ? sizeof(float) : 1;
  void *data = dvm_arena_alloc(&c->arena, count ? (size_t)count : 1, size);
  if (!t || !data) return *oom = true, NULL;
  *t = (dvmc_tensor){.dtype = (dvm_dtype)out, .rank = x->rank, .data = data, .nbytes = (size_t)count * size};
  memcpy(t->dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  const float *sc = s->data;
  for (int64_t e = 0; e < count; e++) {
    int64_t j = len == 1 ? 0 : e / inner % len;
    int32_t zp = z ? int_at(z, j) : 0;
    if (dq) {
      ((float *)data)[e] = (float)(int_at(x, e) - zp) * sc[j];
      continue;
    }
    float r = nearbyintf(((const float *)x->data)[e] / sc[j]) + (float)zp;
    float lo = out == DVM_U8 ? 0 : -128, hi = out == DVM_U8 ? 255 : 127;
    int32_t q = r >= lo ? (r <= hi ? (int32_t)r : (int32_t)hi) : (int32_t)lo; /* NaN: lo, as the kernel */
    if (out == DVM_U8) ((uint8_t *)data)[e] = (uint8_t)q;
    else ((int8_t *)data)[e] = (int8_t)q;
  }
  return t;
}

static bool graph_output(const dvmc_graph *g, const dvmc_value *v) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == v) return true;
  return false;
}

dvm_status *dvmc_pass_quant_const(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = 0; i < g->nnodes; i++) { /* in order: a Q folded feeds the DQ after it */
    dvmc_node *n = g->nodes[i];
    if (!n || graph_output(g, n->out[0] ? n->out[0] : NULL)) continue;
    bool oom = false;
    dvmc_tensor *t = folded(c, n, &oom);
    if (oom) return dvm_status_new(DVM_OUT_OF_MEMORY, "folding node \"%s\"", n->name);
    if (!t) continue;
    dvmc_value *v = n->out[0];
    v->constant = t;
    v->producer = NULL;
    g->nodes[i] = NULL;
    for (int k = 0; k < n->nin; k++)
      if (n->in[k]) n->in[k]->uses--;
    ++*count;
  }
  return NULL;
}
