/* Symbolic dimensions: canonical expressions over named symbols.
 *
 * A dim is an integer polynomial over atoms — symbols (batch, seq) and
 * opaque terms the polynomial form cannot open: floor division, modulo,
 * min, max — with integer coefficients, e.g. 3072*batch*seq + 48. Every
 * expression is interned in its context in canonical form (terms sorted,
 * like terms merged, zero terms dropped, constant operands folded), so two
 * dims are provably equal exactly when their pointers are equal: that is
 * what fusion and memory planning ask, without knowing any values. */
#ifndef DVMC_EXPR_H
#define DVMC_EXPR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dvm/status.h"

typedef struct dvmc_expr dvmc_expr;
typedef struct dvmc_exprs dvmc_exprs; /* the context that owns them */

DVM_MUST_USE dvm_status *dvmc_exprs_create(dvmc_exprs **out);
void dvmc_exprs_destroy(dvmc_exprs *x);
/* Whether an allocation of x's failed: the functions below then return
 * NULL as they do for "no such expression", so a caller that saw NULL
 * asks this to tell out of memory from an unknown shape. */
bool dvmc_exprs_out_of_memory(const dvmc_exprs *x);

/* Symbols, by name: the same name gives the same symbol. Ranges default to
 * 0..INT64_MAX and can be narrowed (from --dim NAME=LO..HI or a model). */
const dvmc_expr *dvmc_sym(dvmc_exprs *x, const char *name);
/* A fresh symbol for an unnamed unknown dim: "unk0", "unk1"... */
const dvmc_expr *dvmc_sym_fresh(dvmc_exprs *x, const char *hint);
const dvmc_expr *dvmc_const(dvmc_exprs *x, int64_t v);

const dvmc_expr *dvmc_add(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);
const dvmc_expr *dvmc_sub(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);
const dvmc_expr *dvmc_mul(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);
/* Floor division and modulo (divisor > 0 assumed where folded). */
const dvmc_expr *dvmc_floordiv(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);
const dvmc_expr *dvmc_mod(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);
const dvmc_expr *dvmc_min(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);
const dvmc_expr *dvmc_max(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b);

/* NULL results: every constructor returns NULL only when out of memory, and
 * accepts NULL operands (propagating NULL), so callers check once. */

bool dvmc_expr_is_const(const dvmc_expr *e, int64_t *value);
/* True when e >= 0 for every value of its symbols within their ranges
 * (interval arithmetic: false means "not proven", not "negative"). */
bool dvmc_expr_nonneg(const dvmc_expr *e);
/* The symbol's name if e is a bare symbol, else NULL. */
const char *dvmc_expr_sym_name(const dvmc_expr *e);

/* Symbol ranges, inclusive. */
void dvmc_sym_set_range(dvmc_exprs *x, const dvmc_expr *sym, int64_t lo, int64_t hi);
void dvmc_sym_range(const dvmc_expr *sym, int64_t *lo, int64_t *hi);

/* Evaluates with the symbols' values given by `value(ctx, name)`; fails on
 * division by zero or overflow. */
DVM_MUST_USE dvm_status *dvmc_expr_eval(const dvmc_expr *e,
                                        bool (*value)(void *ctx, const char *name, int64_t *v),
                                        void *ctx, int64_t *out);

/* Writes e in readable form: "3072*batch*seq + 48", "floordiv(seq + 1, 2)". */
void dvmc_expr_print(const dvmc_expr *e, FILE *out);
/* The same into buf (always NUL-terminated); returns buf. */
char *dvmc_expr_str(const dvmc_expr *e, char *buf, size_t size);

/* Walking the canonical form, for code generation. */
typedef enum {
  DVMC_E_CONST,    /* value */
  DVMC_E_SYM,      /* name */
  DVMC_E_SUM,      /* terms: each a coefficient times a product */
  DVMC_E_PRODUCT,  /* factors (with multiplicity) */
  DVMC_E_FLOORDIV, /* a, b */
  DVMC_E_MOD,
  DVMC_E_MIN,
  DVMC_E_MAX,
} dvmc_expr_kind;

dvmc_expr_kind dvmc_expr_kind_of(const dvmc_expr *e);
int64_t dvmc_expr_value(const dvmc_expr *e);            /* CONST */
int dvmc_expr_arity(const dvmc_expr *e);                /* SUM: terms, PRODUCT: factors, binary: 2 */
const dvmc_expr *dvmc_expr_arg(const dvmc_expr *e, int i);
int64_t dvmc_expr_coef(const dvmc_expr *e, int i);      /* SUM: term i's coefficient */

#endif
