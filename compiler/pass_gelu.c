/* GELU from the ops exporters write for it:
 *
 *   erf form (torch.nn.GELU(), BERT):  x * 0.5 * (1 + Erf(x / sqrt 2))
 *     (or Erf(x * (1 / sqrt 2)))
 *   tanh form (GPT-2's gelu_new, GELU(approximate="tanh")):
 *     0.5 x (1 + Tanh(sqrt(2 / pi) (x + 0.044715 Pow(x, 3))))
 *
 * the three factors multiplied in any order and grouping, the sums and
 * products with their operands either way round, become y = Gelu(x)
 * (approximate="tanh" for the second). Gelu joins fused elementwise groups
 * (docs/compiler.md, Fusion), so the bias add before it and the GELU are
 * one fused call of two ops instead of six to nine. Proven: x and y f32 of
 * the same known dims, every constant a one-element f32 equal to the f32
 * of the exact value (0.5, 1, sqrt 2 or 1 / sqrt 2, sqrt(2 / pi), 0.044715,
 * 3), every intermediate read only inside the pattern. */
#include <math.h>
#include <string.h>

#include "pass.h"

#define MAX_DEAD 10

typedef struct pattern {
  dvmc_node *dead[MAX_DEAD];
  int n;
} pattern;

/* v's producer op read once, recorded as dead; NULL when it is not. */
static dvmc_node *take(const dvmc_graph *g, pattern *p, const dvmc_value *v, const char *op) {
  dvmc_node *n = dvmc_pass_only(g, v, op, 1);
  if (n && n->nin == (strcmp(op, "Erf") && strcmp(op, "Tanh") ? 2 : 1) && p->n < MAX_DEAD) p->dead[p->n++] = n;
  else n = NULL;
  return n;
}

/* For a two-input node n: the input other than the one-element constant c
 * (either order), or NULL. */
static dvmc_value *times_const(const dvmc_node *n, float c) {
  if (dvmc_pass_scalar_is(n->in[1], c)) return n->in[0];
  if (dvmc_pass_scalar_is(n->in[0], c)) return n->in[1];
  return NULL;
}

/* z is x / sqrt 2 or x * (1 / sqrt 2). */
static bool erf_arg(const dvmc_graph *g, pattern *p, const dvmc_value *z, const dvmc_value *x) {
  int at = p->n;
  dvmc_node *n = take(g, p, z, "Div");
  if (n && n->in[0] == x && dvmc_pass_scalar_is(n->in[1], (float)M_SQRT2)) return true;
  p->n = at;
  n = take(g, p, z, "Mul");
  return n && times_const(n, (float)M_SQRT1_2) == x;
}

/* u is sqrt(2 / pi) (x + 0.044715 Pow(x, 3)). */
static bool tanh_arg(const dvmc_graph *g, pattern *p, const dvmc_value *u, const dvmc_value *x) {
  dvmc_node *scale = take(g, p, u, "Mul");
  dvmc_value *w = scale ? times_const(scale, (float)sqrt(2.0 / M_PI)) : NULL;
  dvmc_node *sum = w ? take(g, p, w, "Add") : NULL;
  dvmc_value *q = sum ? dvmc_pass_other(sum, x) : NULL;
  dvmc_node *cube_scale = q ? take(g, p, q, "Mul") : NULL;
  dvmc_value *cube = cube_scale ? times_const(cube_scale, 0.044715f) : NULL;
  dvmc_node *pow = cube ? take(g, p, cube, "Pow") : NULL;
  return pow && pow->in[0] == x && dvmc_pass_scalar_is(pow->in[1], 3.0f);
}

/* The factors x, 0.5 and e = 1 + Erf(...) or 1 + Tanh(...), in any order;
 * *tanh says which. */
static bool factors(const dvmc_graph *g, pattern *p, dvmc_value *const f[3], dvmc_value **x, bool *tanh) {
  for (int h = 0; h < 3; h++) {
    if (!dvmc_pass_scalar_is(f[h], 0.5f)) continue;
    for (int e = 0; e < 3; e++) {
      if (e == h) continue;
      int at = p->n;
      *x = f[3 - h - e];
      dvmc_node *one = take(g, p, f[e], "Add");
      dvmc_value *t = one ? times_const(one, 1.0f) : NULL;
      dvmc_node *fn = t ? take(g, p, t, "Erf") : NULL;
      if (fn && erf_arg(g, p, fn->in[0], *x)) return !(*tanh = false);
      p->n = at;
      one = take(g, p, f[e], "Add");
      t = one ? times_const(one, 1.0f) : NULL;
      fn = t ? take(g, p, t, "Tanh") : NULL;
      if (fn && tanh_arg(g, p, fn->in[0], *x)) return (*tanh = true);
      p->n = at;
    }
  }
  return false;
}

dvm_status *dvmc_pass_gelu(dvmc_ctx *c, dvmc_graph *g, int *count) {
  for (int i = g->nnodes - 1; i >= 0; i--) {
    dvmc_node *m = g->nodes[i];
    if (!m || strcmp(m->op, "Mul") || m->domain[0] || m->nin != 2 || m->nout != 1) continue;
    for (int k = 0; k < 2; k++) { /* the product's other two factors under one side */
      pattern p = {.dead = {m}, .n = 1};
      dvmc_node *inner = take(g, &p, m->in[k], "Mul");
      dvmc_value *x, *f[3];
      bool tanh;
      if (!inner) continue;
      f[0] = m->in[1 - k];
      f[1] = inner->in[0];
      f[2] = inner->in[1];
      if (!factors(g, &p, f, &x, &tanh) || !dvmc_pass_same_shape(x, m->out[0])) continue;
      dvmc_attr approx = {.name = "approximate", .type = DVMC_ATTR_STRING, .s = "tanh"};
      dvm_status *st = dvmc_pass_replace(c, g, p.dead, p.n, "Gelu", &x, 1, m->out[0], &approx, tanh);
      if (st) return st;
      ++*count;
      break;
    }
  }
  return NULL;
}
