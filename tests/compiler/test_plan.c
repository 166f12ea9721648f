/* The memory plan's pieces on their own: proofs that one size is at least
 * another (dvmc_expr_nonneg), and slot chaining over hand-written code
 * whose live ranges are known. */
#include <string.h>

#include "dvm/tensor.h"
#include "expr.h"
#include "harness.h"
#include "opcode.h"
#include "plan.h"

static void nonneg(dvmc_exprs *x) {
  const dvmc_expr *s = dvmc_sym(x, "s"), *b = dvmc_sym(x, "b"), *k = dvmc_const(x, 512);
  const dvmc_expr *s2 = dvmc_mul(x, s, s), *one = dvmc_const(x, 1);
  CHECK(dvmc_expr_nonneg(dvmc_const(x, 0)));
  CHECK(!dvmc_expr_nonneg(dvmc_const(x, -1)));
  CHECK(dvmc_expr_nonneg(dvmc_mul(x, b, s2)));
  CHECK(!dvmc_expr_nonneg(dvmc_sub(x, s, one))); /* s may be 0 */
  /* 16*b*s^2 >= 512*b*s exactly when s >= 32 */
  const dvmc_expr *d = dvmc_sub(x, dvmc_mul(x, dvmc_const(x, 16), dvmc_mul(x, b, s2)), dvmc_mul(x, k, dvmc_mul(x, b, s)));
  CHECK(!dvmc_expr_nonneg(d));
  dvmc_sym_set_range(x, s, 31, 64);
  CHECK(!dvmc_expr_nonneg(d));
  CHECK(dvmc_expr_nonneg(dvmc_sub(x, s, one)));
  dvmc_sym_set_range(x, s, 32, 64);
  CHECK(dvmc_expr_nonneg(d));
  /* floordiv by a positive constant keeps a bound; by a symbol it does not */
  CHECK(dvmc_expr_nonneg(dvmc_floordiv(x, s, dvmc_const(x, 7))));
  CHECK(!dvmc_expr_nonneg(dvmc_sub(x, dvmc_floordiv(x, s, b), one)));
}

/* alloc_tensor rD, r0 (storage), r0 (offset), f32, r9 (a shape) */
#define SITE(d) DVM_OP_ALLOC_TENSOR, d, 0, 0, DVM_F32, 9

static void slots(dvmc_exprs *x) {
  const dvmc_expr *n = dvmc_sym(x, "n"), *small = dvmc_mul(x, dvmc_const(x, 4), n),
                  *big = dvmc_mul(x, dvmc_const(x, 12), n);
  /* r2 takes dead r1's slot; r3, live with r2, a new one; r10 may not take
   * r2's: an alloc runs between r2's death and r10's site; r11, of another
   * size, a new one; r5 reaches ret through its reshape r4, and r6 is made
   * inside a loop: both keep their own allocation. */
  int64_t code[] = {SITE(1),        DVM_OP_RELEASE, 1,          SITE(2),        SITE(3),
                    DVM_OP_RELEASE, 2,              DVM_OP_ALLOC, 8, DVM_F32, 9, DVM_DEVICE_CPU,
                    SITE(10),       DVM_OP_RELEASE, 3,          DVM_OP_RELEASE, 10,
                    SITE(11),       DVM_OP_RELEASE, 11,         SITE(5),        DVM_OP_RESHAPE, 4, 5, 9,
                    DVM_OP_IMM,     7, 0,           SITE(6),    DVM_OP_RELEASE, 6,
                    DVM_OP_JNZ,     7, 58,          DVM_OP_RET, 1, 4};
  uint32_t at[] = {0, 8, 14, 27, 37, 45, 58}; /* the sites' words */
  const dvmc_expr *sizes[] = {small, small, small, small, big, small, small};
  dvmc_plan_site sites[7];
  for (int i = 0; i < 7; i++) sites[i] = (dvmc_plan_site){.word = at[i], .bytes = sizes[i]};
  dvmc_plan p;
  CHECK_OK(dvmc_plan_memory(x, code, sizeof code / sizeof *code, sites, 7, NULL, NULL, &p));
  CHECK(sites[0].slot == 0 && sites[1].slot == 0);
  CHECK(sites[2].slot == 1);
  CHECK(sites[3].slot == 2); /* not 0: the alloc between */
  CHECK(sites[4].slot == 3);
  CHECK(sites[5].slot == -1); /* reaches ret through the reshape */
  CHECK(sites[6].slot == -1); /* inside the loop */
  CHECK(p.nslots == 4 && p.reused == 1);
  CHECK(p.size[0] == small && p.size[3] == big);
  /* live together: at most r2 and r3, or r11 alone, or r5 and r6: 12*n */
  CHECK(p.peak == big);
  dvmc_plan_free(&p);
}

/* invoke kernel k: out (rO), in (the list) */
#define CALL1(k, o, i) DVM_OP_INVOKE, k, -1, 1, o, 1, i, 0

static int kernel_one(void *ctx, int64_t k) {
  (void)ctx;
  return k == 1;
}

static void in_place(dvmc_exprs *x) {
  const dvmc_expr *n = dvmc_sym(x, "n"), *small = dvmc_mul(x, dvmc_const(x, 4), n),
                  *big = dvmc_mul(x, dvmc_const(x, 12), n);
  /* kernel 1 allows in place, 0 and 2 do not. r2 = k1(r1) takes r1's
   * storage (r1 dies in that call: only released after); r3 = k1(r2) may
   * not (r2 is read after); r5 = k2(r3, r2) may not (k2); r6 = k1(r5) may
   * not (another size). */
  int64_t code[] = {SITE(1),        DVM_OP_INVOKE, 0, -1, 1, 1, 0, 0,
                    SITE(2),        CALL1(1, 2, 1), DVM_OP_RELEASE, 1,
                    SITE(3),        CALL1(1, 3, 2),
                    SITE(5),        DVM_OP_INVOKE, 2, -1, 1, 5, 2, 3, 2, 0, DVM_OP_RELEASE, 2, DVM_OP_RELEASE, 3,
                    SITE(6),        CALL1(1, 6, 5), DVM_OP_RELEASE, 5, DVM_OP_RELEASE, 6,
                    DVM_OP_RET, 0};
  uint32_t at[] = {0, 13, 29, 43, 62};
  const dvmc_expr *sizes[] = {small, small, small, small, big};
  dvmc_plan_site sites[5];
  for (int i = 0; i < 5; i++) sites[i] = (dvmc_plan_site){.word = at[i], .bytes = sizes[i]};
  dvmc_plan p;
  CHECK_OK(dvmc_plan_memory(x, code, sizeof code / sizeof *code, sites, 5, kernel_one, NULL, &p));
  CHECK(sites[0].slot == 0 && sites[1].slot == 0);
  CHECK(sites[2].slot == 1 && sites[3].slot == 2 && sites[4].slot == 3);
  CHECK(p.reused == 1 && p.inplace == 1 && p.nslots == 4);
  /* at r5's site: r2 (in r1's slot), r3, r5; at r6's: r5, r6 */
  CHECK(p.peak == dvmc_add(x, small, big));
  dvmc_plan_free(&p);
  /* without in place, r2 needs its own slot (r1 and r2 live at its site),
   * which r3 takes once r1 is released */
  CHECK_OK(dvmc_plan_memory(x, code, sizeof code / sizeof *code, sites, 5, NULL, NULL, &p));
  CHECK(sites[1].slot == 1 && sites[2].slot == 0 && p.inplace == 0 && p.nslots == 4);
  dvmc_plan_free(&p);
}

int main(void) {
  dvmc_exprs *x;
  CHECK_OK(dvmc_exprs_create(&x));
  nonneg(x);
  slots(x);
  in_place(x);
  dvmc_exprs_destroy(x);
  return harness_finish("plan");
}
