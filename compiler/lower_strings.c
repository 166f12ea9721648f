/* The ONNX string ops whose attributes are strings: each string becomes a
 * constant string tensor input of the kernel (ops/cpu/strings.c). */
#include <stdio.h>

#include "emit.h"
#include "lowering.h"

/* A register holding the one-string constant s, named "<node>.<what>"; -1 out of memory. */
static int string_reg(lowering *L, const dvmc_node *n, const char *what, const char *s) {
  int64_t one = 1;
  dvmc_tensor *t = dvmc_tensor_strings(L->c, 1, &one, 1, &s, NULL);
  char name[160];
  snprintf(name, sizeof name, "%s.%s", n->name, what);
  int k = t ? dvmc_emit_const(L->e, name, t) : -1, r = dvmc_fn_reg(L->f);
  if (k < 0) return -1;
  dvmc_fn_CONST(L->f, r, k);
  return r;
}

dvm_status *lw_lower_regex_full_match(lowering *L, const dvmc_node *n, const op_rule *r) {
  const dvmc_attr *p = dvmc_attr_find(n, "pattern");
  if (!p) return lw_invalid(n, "has no pattern");
  call c = {0};
  dvm_status *st = lw_call_inputs(L, n, r, &c);
  if (st) return st;
  int reg = c.ins[c.nin++] = string_reg(L, n, "pattern", p->s);
  if (reg < 0) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  st = lw_emit_call(L, n, r, &c);
  dvmc_fn_RELEASE(L->f, reg);
  return st;
}
