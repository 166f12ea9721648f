/* A product's bias and activation as its epilogue: the linear layers
 * PyTorch exports as
 *
 *   p = MatMul(a, w)     y = Add(p, bias)   (either operand order)
 *   [then z = Relu(y), Gelu(y) (either approximate, as pass_gelu makes it),
 *    Sigmoid(y) or Tanh(y)]
 *
 * become y (or z) = dvm.MatMulBias(a, w, bias) {activation}: the matmul
 * kernels add the bias and apply the activation to each block of the
 * output right after computing it, in the thread that did, while it is in
 * cache (ops/cpu/epilogue.h), instead of an elementwise kernel that reads
 * and writes the whole output again. Each element gets the same f32 add and
 * activation as the separate kernels, so results are bitwise those of the
 * rewritten ops. Proven: a, w, bias and the outputs f32; w of rank >= 2;
 * bias f32 [N] with N the same expression as the product's last dim; the
 * Add's (and activation's) output of the product's known dims; the product
 * (and the Add before an activation) read only inside the pattern.
 *
 * Likewise an activation of a Gemm (2-D: PyTorch's Linear on a matrix, the
 * MLPs) read only by it becomes dvm.GemmAct(a, b[, c]) with the Gemm's
 * attributes and the activation: the Gemm's own C is its bias, and the
 * gemm kernel applies the activation per block as above.
 *
 * A CPU rewrite: builds for CUDA (--target cpu,cuda) leave it off
 * (pass.h's cpu_only), as the CUDA placement has no epilogue. */
#include <string.h>

#include "ops/cpu/epilogue.h"
#include "pass.h"

/* The activation node n computes, as epilogue.h's value, or -1. */
static int activation_of(const dvmc_node *n) {
  if (n->domain[0] || n->nin != 1 || n->nout != 1) return -1;
  if (!strcmp(n->op, "Relu")) return DVM_EPI_RELU;
  if (!strcmp(n->op, "Sigmoid")) return DVM_EPI_SIGMOID;
  if (!strcmp(n->op, "Tanh")) return DVM_EPI_TANH;
  if (strcmp(n->op, "Gelu")) return -1;
  const char *approx = dvmc_attr_string(n, "approximate", "none");
  return !strcmp(approx, "none") ? DVM_EPI_GELU : !strcmp(approx, "tanh") ? DVM_EPI_GELU_TANH : -1;
}

static bool is_f32(const dvmc_value *v) { return v && v->typed && v->dtype == DVM_F32; }

/* add is Add(MatMul(a, w), bias) as the header says, read `uses` times:
 * its MatMul (*mm) and bias (*bias); else false. */
static bool biased_product(const dvmc_graph *g, const dvmc_node *add, dvmc_node **mm, dvmc_value **bias) {
  if (strcmp(add->op, "Add") || add->domain[0] || add->nin != 2 || add->nout != 1) return false;
  for (int k = 0; k < 2; k++) {
    dvmc_node *m = dvmc_pass_only(g, add->in[k], "MatMul", 1);
    dvmc_value *b = add->in[1 - k], *p = add->in[k];
    if (!m || m->nin != 2 || !is_f32(m->in[0]) || !is_f32(m->in[1]) || m->in[1]->rank < 2 ||
        !dvmc_pass_same_shape(p, add->out[0]) || p->rank < 1 || !is_f32(b) || b->rank != 1 ||
        b->dims[0] != p->dims[p->rank - 1])
      continue;
    *mm = m;
    *bias = b;
    return true;
  }
  return false;
}

static const char *const act_names[DVM_EPI_COUNT] = {"none", "Relu", "Gelu", "GeluTanh", "Sigmoid", "Tanh"};

/* n = act(Gemm(...)), the Gemm f32 and read only by n: both become
 * dvm::GemmAct with the Gemm's inputs and attributes and the activation. */
static dvm_status *gemm_act(dvmc_ctx *c, dvmc_graph *g, dvmc_node *n, int act, int *done) {
  dvmc_node *gm = dvmc_pass_only(g, n->in[0], "Gemm", 1);
  if (!gm || gm->nin < 2 || gm->nin > 3 || !dvmc_pass_same_shape(n->in[0], n->out[0]) || gm->nattrs > 4)
    return NULL;
  for (int i = 0; i < gm->nin; i++)
    if (gm->in[i] && !is_f32(gm->in[i])) return NULL;
  dvmc_attr attrs[5];
  int na = gm->nattrs;
  memcpy(attrs, gm->attrs, sizeof *attrs * (size_t)na);
  attrs[na++] = (dvmc_attr){.name = "activation", .type = DVMC_ATTR_STRING, .s = act_names[act]};
  dvmc_node *dead[2] = {gm, n};
  dvm_status *st = dvmc_pass_replace(c, g, dead, 2, "GemmAct", gm->in, gm->nin, n->out[0], attrs, na);
  if (!st) st = dvmc_pass_set_domain(n->out[0]->producer, "dvm");
  *done = !st;
  return st;
}

dvm_status *dvmc_pass_epilogue(dvmc_ctx *c, dvmc_graph *g, int *count) {
  /* from the end, so an activation is matched before the Add under it */
  for (int i = g->nnodes - 1; i >= 0; i--) {
    dvmc_node *n = g->nodes[i], *add = n, *mm;
    dvmc_value *bias;
    if (!n) continue;
    int act = activation_of(n), done = 0;
    if (act >= 0) {
      dvm_status *st = gemm_act(c, g, n, act, &done);
      if (st) return st;
      if (done) {
        ++*count;
        continue;
      }
      add = dvmc_pass_only(g, n->in[0], "Add", 1);
      if (!add || !dvmc_pass_same_shape(n->in[0], n->out[0])) continue;
    } else {
      act = DVM_EPI_NONE;
    }
    if (!biased_product(g, add, &mm, &bias)) continue;
    dvmc_node *dead[3] = {mm, add, n};
    dvmc_value *in[3] = {mm->in[0], mm->in[1], bias};
    dvmc_attr attr = {.name = "activation", .type = DVMC_ATTR_STRING, .s = act_names[act]};
    dvm_status *st = dvmc_pass_replace(c, g, dead, n == add ? 2 : 3, "MatMulBias", in, 3, n->out[0], &attr, 1);
    if (!st) st = dvmc_pass_set_domain(n->out[0]->producer, "dvm");
    if (st) return st;
    ++*count;
  }
  return NULL;
}
