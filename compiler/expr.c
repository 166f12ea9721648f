/* Symbolic dimensions (see expr.h).
 *
 * Canonical form: a polynomial is a list of (coefficient, monomial) terms
 * sorted by monomial id, coefficients non-zero; a monomial is the constant
 * ONE, an atom, or a PRODUCT of atoms sorted by id (repeated for powers);
 * atoms are symbols and the opaque FLOORDIV, MOD, MIN, MAX nodes. An
 * expression is CONST for a constant polynomial, the monomial itself for a
 * single term with coefficient 1, else a SUM. All nodes are interned, so
 * equal expressions are the same pointer. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

struct dvmc_expr {
  dvmc_expr_kind kind;
  uint32_t id; /* creation order: the canonical sort key */
  uint32_t hash;
  int64_t value;            /* CONST */
  const char *name;         /* SYM */
  int64_t lo, hi;           /* SYM range */
  int n;                    /* SUM terms, PRODUCT factors, 2 for binary atoms */
  const dvmc_expr **args;   /* SUM: monomials; PRODUCT: factors; binary: a, b */
  int64_t *coefs;           /* SUM */
  struct dvmc_expr *chain;  /* intern table bucket */
};

struct dvmc_exprs {
  dvmc_expr **table;
  uint32_t nbuckets, count, next_id, fresh;
  const dvmc_expr *one;
  bool oom; /* an allocation failed: some NULL result meant that, not "no expression" */
};

/* malloc and calloc that note a failure in x (dvmc_exprs_out_of_memory). */
static void *xmalloc(dvmc_exprs *x, size_t n) {
  void *p = malloc(n);
  if (!p) x->oom = true;
  return p;
}

static void *xcalloc(dvmc_exprs *x, size_t k, size_t n) {
  void *p = calloc(k, n);
  if (!p) x->oom = true;
  return p;
}

typedef struct {
  int64_t coef;
  const dvmc_expr *mono;
} term;

DVM_MUST_USE dvm_status *dvmc_exprs_create(dvmc_exprs **out) {
  dvmc_exprs *x = calloc(1, sizeof *x);
  if (x) x->table = calloc(x->nbuckets = 1024, sizeof(dvmc_expr *));
  if (!x || !x->table) {
    free(x);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  x->one = dvmc_const(x, 1);
  if (!x->one) {
    dvmc_exprs_destroy(x);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  *out = x;
  return NULL;
}

bool dvmc_exprs_out_of_memory(const dvmc_exprs *x) { return x->oom; }

void dvmc_exprs_destroy(dvmc_exprs *x) {
  if (!x) return;
  for (uint32_t b = 0; b < x->nbuckets; b++)
    for (dvmc_expr *e = x->table[b], *next; e; e = next) {
      next = e->chain;
      free((void *)e->name);
      free(e->args);
      free(e->coefs);
      free(e);
    }
  free(x->table);
  free(x);
}

/* ---- interning ---- */

static uint32_t mix(uint32_t h, uint64_t v) {
  h ^= (uint32_t)v + 0x9e3779b9u + (h << 6) + (h >> 2);
  return h ^ ((uint32_t)(v >> 32) + 0x9e3779b9u + (h << 6) + (h >> 2));
}

static uint32_t hash_of(dvmc_expr_kind k, int64_t value, const char *name, int n,
                        const dvmc_expr *const *args, const int64_t *coefs) {
  uint32_t h = mix(2166136261u, (uint64_t)k);
  h = mix(h, (uint64_t)value);
  if (name)
    for (const char *s = name; *s; s++) h = mix(h, (uint8_t)*s);
  for (int i = 0; i < n; i++) {
    h = mix(h, args[i]->id);
    if (coefs) h = mix(h, (uint64_t)coefs[i]);
  }
  return h;
}

static int same(const dvmc_expr *e, dvmc_expr_kind k, int64_t value, const char *name, int n,
                const dvmc_expr *const *args, const int64_t *coefs) {
  if (e->kind != k || e->value != value || e->n != n) return 0;
  if (name && strcmp(name, e->name) != 0) return 0;
  for (int i = 0; i < n; i++)
    if (e->args[i] != args[i] || (coefs && e->coefs[i] != coefs[i])) return 0;
  return 1;
}

static int grow(dvmc_exprs *x) {
  uint32_t nb = x->nbuckets * 2;
  dvmc_expr **t = xcalloc(x, nb, sizeof *t);
  if (!t) return 0;
  for (uint32_t b = 0; b < x->nbuckets; b++)
    for (dvmc_expr *e = x->table[b], *next; e; e = next) {
      next = e->chain;
      e->chain = t[e->hash & (nb - 1)];
      t[e->hash & (nb - 1)] = e;
    }
  free(x->table);
  x->table = t;
  x->nbuckets = nb;
  return 1;
}

static const dvmc_expr *intern(dvmc_exprs *x, dvmc_expr_kind k, int64_t value, const char *name,
                               int n, const dvmc_expr *const *args, const int64_t *coefs) {
  uint32_t h = hash_of(k, value, name, n, args, coefs);
  for (dvmc_expr *e = x->table[h & (x->nbuckets - 1)]; e; e = e->chain)
    if (e->hash == h && same(e, k, value, name, n, args, coefs)) return e;
  if (x->count >= x->nbuckets && !grow(x)) return NULL;
  dvmc_expr *e = xcalloc(x, 1, sizeof *e);
  if (!e) return NULL;
  e->kind = k;
  e->id = x->next_id++;
  e->hash = h;
  e->value = value;
  e->n = n;
  e->lo = 0;
  e->hi = INT64_MAX;
  if ((name && !(e->name = strdup(name))) ||
      (n && !(e->args = malloc(sizeof *args * (size_t)n))) ||
      (coefs && !(e->coefs = malloc(sizeof *coefs * (size_t)n)))) {
    x->oom = true;
    free((void *)e->name);
    free(e->args);
    free(e);
    return NULL;
  }
  if (n) memcpy(e->args, args, sizeof *args * (size_t)n);
  if (coefs) memcpy(e->coefs, coefs, sizeof *coefs * (size_t)n);
  e->chain = x->table[h & (x->nbuckets - 1)];
  x->table[h & (x->nbuckets - 1)] = e;
  x->count++;
  return e;
}

const dvmc_expr *dvmc_const(dvmc_exprs *x, int64_t v) { return intern(x, DVMC_E_CONST, v, NULL, 0, NULL, NULL); }

const dvmc_expr *dvmc_sym(dvmc_exprs *x, const char *name) {
  return intern(x, DVMC_E_SYM, 0, name, 0, NULL, NULL);
}

const dvmc_expr *dvmc_sym_fresh(dvmc_exprs *x, const char *hint) {
  char buf[96];
  for (;;) { /* a name no model symbol has taken */
    snprintf(buf, sizeof buf, "%s%u", hint && *hint ? hint : "unk", x->fresh++);
    int taken = 0;
    uint32_t h = hash_of(DVMC_E_SYM, 0, buf, 0, NULL, NULL);
    for (dvmc_expr *e = x->table[h & (x->nbuckets - 1)]; e; e = e->chain)
      taken |= e->kind == DVMC_E_SYM && strcmp(e->name, buf) == 0;
    if (!taken) return dvmc_sym(x, buf);
  }
}

/* ---- polynomials ---- */

/* The terms of e; *n of them in out (which must hold e's term count). */
static int terms_of(dvmc_exprs *x, const dvmc_expr *e, term *out) {
  if (e->kind == DVMC_E_CONST) {
    if (!e->value) return 0;
    out[0] = (term){e->value, x->one};
    return 1;
  }
  if (e->kind == DVMC_E_SUM) {
    for (int i = 0; i < e->n; i++) out[i] = (term){e->coefs[i], e->args[i]};
    return e->n;
  }
  out[0] = (term){1, e};
  return 1;
}

static int nterms(const dvmc_expr *e) { return e->kind == DVMC_E_SUM ? e->n : 1; }

static int cmp_terms(const void *a, const void *b) {
  uint32_t x = ((const term *)a)->mono->id, y = ((const term *)b)->mono->id;
  return x < y ? -1 : x > y;
}

/* Sorts, merges like terms and drops zeros; NULL on overflow. */
static const dvmc_expr *from_terms(dvmc_exprs *x, term *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_terms);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (k && t[k - 1].mono == t[i].mono) {
      if (__builtin_add_overflow(t[k - 1].coef, t[i].coef, &t[k - 1].coef)) return NULL;
    } else {
      t[k++] = t[i];
    }
    if (k && t[k - 1].coef == 0) k--;
  }
  if (k == 0) return dvmc_const(x, 0);
  if (k == 1 && t[0].mono == x->one) return dvmc_const(x, t[0].coef);
  if (k == 1 && t[0].coef == 1) return t[0].mono;
  const dvmc_expr **m = xmalloc(x, sizeof *m * (size_t)k);
  int64_t *c = xmalloc(x, sizeof *c * (size_t)k);
  const dvmc_expr *r = NULL;
  if (m && c) {
    for (int i = 0; i < k; i++) {
      m[i] = t[i].mono;
      c[i] = t[i].coef;
    }
    r = intern(x, DVMC_E_SUM, 0, NULL, k, m, c);
  }
  free(m);
  free(c);
  return r;
}

/* The product of two monomials. */
static const dvmc_expr *mono_mul(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (a == x->one) return b;
  if (b == x->one) return a;
  int na = a->kind == DVMC_E_PRODUCT ? a->n : 1, nb = b->kind == DVMC_E_PRODUCT ? b->n : 1;
  const dvmc_expr *const *fa = a->kind == DVMC_E_PRODUCT ? a->args : &a;
  const dvmc_expr *const *fb = b->kind == DVMC_E_PRODUCT ? b->args : &b;
  const dvmc_expr **f = xmalloc(x, sizeof *f * (size_t)(na + nb));
  if (!f) return NULL;
  int i = 0, j = 0, k = 0;
  while (i < na || j < nb)
    f[k++] = (j >= nb || (i < na && fa[i]->id <= fb[j]->id)) ? fa[i++] : fb[j++];
  const dvmc_expr *r = intern(x, DVMC_E_PRODUCT, 0, NULL, k, f, NULL);
  free(f);
  return r;
}

const dvmc_expr *dvmc_add(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (!a || !b) return NULL;
  int64_t va, vb, sum;
  if (dvmc_expr_is_const(a, &va) && dvmc_expr_is_const(b, &vb))
    return __builtin_add_overflow(va, vb, &sum) ? NULL : dvmc_const(x, sum);
  term *t = xmalloc(x, sizeof *t * (size_t)(nterms(a) + nterms(b)));
  if (!t) return NULL;
  int n = terms_of(x, a, t);
  n += terms_of(x, b, t + n);
  const dvmc_expr *r = from_terms(x, t, n);
  free(t);
  return r;
}

/* a's terms, each coefficient multiplied by s and divided by d (exactly,
 * when d divides them all). */
static const dvmc_expr *rescale(dvmc_exprs *x, const dvmc_expr *a, int64_t s, int64_t d) {
  if (!a) return NULL;
  term *t = xmalloc(x, sizeof *t * (size_t)nterms(a));
  if (!t) return NULL;
  int n = terms_of(x, a, t);
  const dvmc_expr *r = NULL;
  for (int i = 0; i < n; i++)
    if (__builtin_mul_overflow(t[i].coef, s, &t[i].coef)) goto done;
  for (int i = 0; i < n; i++) t[i].coef /= d;
  r = from_terms(x, t, n);
done:
  free(t);
  return r;
}

const dvmc_expr *dvmc_sub(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (!a || !b) return NULL;
  return dvmc_add(x, a, rescale(x, b, -1, 1));
}

const dvmc_expr *dvmc_mul(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (!a || !b) return NULL;
  int na = nterms(a), nb = nterms(b);
  if ((size_t)na * (size_t)nb > 4096) return NULL; /* expansion too large to be a shape */
  term *ta = xmalloc(x, sizeof *ta * (size_t)(na + nb + na * nb)), *tb = ta + na, *t = tb + nb;
  if (!ta) return NULL;
  const dvmc_expr *r = NULL;
  na = terms_of(x, a, ta);
  nb = terms_of(x, b, tb);
  int n = 0;
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++) {
      t[n].mono = mono_mul(x, ta[i].mono, tb[j].mono);
      if (!t[n].mono || __builtin_mul_overflow(ta[i].coef, tb[j].coef, &t[n].coef)) goto done;
      n++;
    }
  r = from_terms(x, t, n);
done:
  free(ta);
  return r;
}

/* The constant d > 0 divides every coefficient of a: floordiv and mod are
 * then exact (a / d is a polynomial, a mod d is 0). */
static int divides_all(const dvmc_expr *a, int64_t d) {
  if (a->kind == DVMC_E_CONST) return a->value % d == 0;
  if (a->kind != DVMC_E_SUM) return d == 1;
  for (int i = 0; i < a->n; i++)
    if (a->coefs[i] % d) return 0;
  return 1;
}

static int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* a / b for monomials when b's factors are among a's (as a multiset), else
 * NULL: the quotient of dims like (768*batch*seq) / (768*batch). */
static const dvmc_expr *mono_div(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (b == x->one) return a;
  int na = a->kind == DVMC_E_PRODUCT ? a->n : (a == x->one ? 0 : 1), nb = b->kind == DVMC_E_PRODUCT ? b->n : 1;
  const dvmc_expr *const *fa = a->kind == DVMC_E_PRODUCT ? a->args : &a;
  const dvmc_expr *const *fb = b->kind == DVMC_E_PRODUCT ? b->args : &b;
  if (nb > na) return NULL;
  const dvmc_expr **q = xmalloc(x, sizeof *q * (size_t)(na ? na : 1));
  if (!q) return NULL;
  int i = 0, j = 0, k = 0;
  while (i < na) { /* both sorted by id: a merge that drops b's factors */
    if (j < nb && fa[i] == fb[j]) i++, j++;
    else if (j < nb && fb[j]->id < fa[i]->id) break;
    else q[k++] = fa[i++];
  }
  const dvmc_expr *r = NULL;
  if (j == nb) r = k == 0 ? x->one : k == 1 ? q[0] : intern(x, DVMC_E_PRODUCT, 0, NULL, k, q, NULL);
  free(q);
  return r;
}

/* a / b exactly when b is one term c*m and every term of a is a multiple
 * of it; else NULL. */
static const dvmc_expr *exact_div(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  term tb;
  if (nterms(b) != 1 || terms_of(x, b, &tb) != 1 || tb.coef <= 0) return NULL;
  term *t = xmalloc(x, sizeof *t * (size_t)nterms(a));
  if (!t) return NULL;
  int n = terms_of(x, a, t);
  const dvmc_expr *r = NULL;
  for (int i = 0; i < n; i++) {
    if (t[i].coef % tb.coef || !(t[i].mono = mono_div(x, t[i].mono, tb.mono))) goto done;
    t[i].coef /= tb.coef;
  }
  r = from_terms(x, t, n);
done:
  free(t);
  return r;
}

/* floordiv(floordiv(y, b) + k, c) is floordiv(y + k b, b c) for constants
 * b, c > 0 (floor(y/b) + k = floor((y + kb)/b), and floors of floors by
 * positive integers nest): strided windows stacked keep one division. */
static const dvmc_expr *nested_div(dvmc_exprs *x, const dvmc_expr *a, int64_t c) {
  const dvmc_expr *inner = a->kind == DVMC_E_FLOORDIV ? a : NULL;
  int64_t k = 0, b, kb, bc;
  if (a->kind == DVMC_E_SUM && a->n == 2)
    for (int i = 0; i < 2; i++) {
      if (a->args[i]->kind == DVMC_E_CONST) k = a->coefs[i];
      else if (a->args[i]->kind == DVMC_E_FLOORDIV && a->coefs[i] == 1) inner = a->args[i];
    }
  if (!inner || (a->kind == DVMC_E_SUM && !k) || !dvmc_expr_is_const(inner->args[1], &b) || b <= 0 ||
      __builtin_mul_overflow(k, b, &kb) || __builtin_mul_overflow(b, c, &bc))
    return NULL;
  return dvmc_floordiv(x, dvmc_add(x, inner->args[0], dvmc_const(x, kb)), dvmc_const(x, bc));
}

const dvmc_expr *dvmc_floordiv(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (!a || !b) return NULL;
  int64_t va, vb;
  int ca = dvmc_expr_is_const(a, &va), cb = dvmc_expr_is_const(b, &vb);
  if (cb && vb == 0) return NULL;
  if (ca && cb) return (va == INT64_MIN && vb == -1) ? NULL : dvmc_const(x, fdiv(va, vb));
  if (cb && vb == 1) return a;
  if (cb && vb > 0 && divides_all(a, vb)) return rescale(x, a, 1, vb);
  const dvmc_expr *nested = cb && vb > 0 ? nested_div(x, a, vb) : NULL;
  if (nested) return nested;
  if (a == b) return dvmc_const(x, 1); /* dims divided by themselves: assumed non-zero */
  const dvmc_expr *q = exact_div(x, a, b);
  if (q) return q;
  const dvmc_expr *args[2] = {a, b};
  return intern(x, DVMC_E_FLOORDIV, 0, NULL, 2, args, NULL);
}

const dvmc_expr *dvmc_mod(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  if (!a || !b) return NULL;
  int64_t va, vb;
  int ca = dvmc_expr_is_const(a, &va), cb = dvmc_expr_is_const(b, &vb);
  if (cb && vb == 0) return NULL;
  if (ca && cb) {
    if (vb == -1) return dvmc_const(x, 0);
    int64_t r = va % vb;
    return dvmc_const(x, (r != 0 && ((r < 0) != (vb < 0))) ? r + vb : r);
  }
  if ((cb && vb > 0 && divides_all(a, vb)) || a == b) return dvmc_const(x, 0);
  const dvmc_expr *args[2] = {a, b};
  return intern(x, DVMC_E_MOD, 0, NULL, 2, args, NULL);
}

/* Conservative bounds of constants and symbols. */
static bool interval(const dvmc_expr *e, __int128 *lo, __int128 *hi);

/* e's interval over its symbols' ranges, clamped to int64. */
static void bounds(const dvmc_expr *e, int64_t *lo, int64_t *hi) {
  __int128 l, h;
  if (!interval(e, &l, &h)) l = INT64_MIN, h = INT64_MAX;
  *lo = l < INT64_MIN ? INT64_MIN : (int64_t)l;
  *hi = h > INT64_MAX ? INT64_MAX : (int64_t)h;
}

static const dvmc_expr *minmax(dvmc_exprs *x, dvmc_expr_kind k, const dvmc_expr *a, const dvmc_expr *b) {
  if (!a || !b) return NULL;
  if (a == b) return a;
  int64_t alo, ahi, blo, bhi;
  bounds(a, &alo, &ahi);
  bounds(b, &blo, &bhi);
  if (ahi <= blo) return k == DVMC_E_MIN ? a : b;
  if (bhi <= alo) return k == DVMC_E_MIN ? b : a;
  int64_t diff; /* a and b a constant apart: min(n + 1, n + 3) is n + 1 */
  if (dvmc_expr_is_const(dvmc_sub(x, b, a), &diff)) return (diff >= 0) == (k == DVMC_E_MIN) ? a : b;
  const dvmc_expr *args[2] = {a->id < b->id ? a : b, a->id < b->id ? b : a};
  return intern(x, k, 0, NULL, 2, args, NULL);
}

const dvmc_expr *dvmc_min(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) { return minmax(x, DVMC_E_MIN, a, b); }
const dvmc_expr *dvmc_max(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) { return minmax(x, DVMC_E_MAX, a, b); }

/* ---- queries ---- */

/* Interval of e over the symbols' ranges, in 128 bits clamped to +-2^63
 * after each step, so that the product or sum of two clamped values cannot
 * wrap; false when no useful bound is known. */
#define BIG ((__int128)1 << 63)
static __int128 clamp(__int128 v) { return v > BIG ? BIG : v < -BIG ? -BIG : v; }

static bool interval(const dvmc_expr *e, __int128 *lo, __int128 *hi) {
  __int128 alo, ahi, blo, bhi;
  switch (e->kind) {
  case DVMC_E_CONST: *lo = *hi = e->value; return true;
  case DVMC_E_SYM: *lo = e->lo, *hi = e->hi; return true;
  case DVMC_E_SUM:
    *lo = *hi = 0;
    for (int i = 0; i < e->n; i++) {
      if (!interval(e->args[i], &alo, &ahi)) return false;
      __int128 c = e->coefs[i];
      *lo = clamp(*lo + clamp(c > 0 ? c * alo : c * ahi));
      *hi = clamp(*hi + clamp(c > 0 ? c * ahi : c * alo));
    }
    return true;
  case DVMC_E_PRODUCT: /* factors known non-negative only */
    *lo = *hi = 1;
    for (int i = 0; i < e->n; i++) {
      if (!interval(e->args[i], &alo, &ahi) || alo < 0) return false;
      *lo = clamp(*lo * alo);
      *hi = clamp(*hi * ahi);
    }
    return true;
  case DVMC_E_FLOORDIV: /* by a positive constant, of a non-negative value */
    if (!interval(e->args[0], &alo, &ahi) || !interval(e->args[1], &blo, &bhi) || blo != bhi || blo <= 0 || alo < 0)
      return false;
    *lo = alo / blo, *hi = ahi / blo;
    return true;
  case DVMC_E_MOD:
    if (!interval(e->args[1], &blo, &bhi) || blo != bhi || blo <= 0) return false;
    *lo = 0, *hi = blo - 1;
    return true;
  default: /* MIN, MAX */
    if (!interval(e->args[0], &alo, &ahi) || !interval(e->args[1], &blo, &bhi)) return false;
    *lo = e->kind == DVMC_E_MIN ? (alo < blo ? alo : blo) : (alo > blo ? alo : blo);
    *hi = e->kind == DVMC_E_MIN ? (ahi < bhi ? ahi : bhi) : (ahi > bhi ? ahi : bhi);
    return true;
  }
}

/* The factors of a monomial: a product's, or itself (none for 1). */
static int factors_of(const dvmc_expr *m, const dvmc_expr *const **f, const dvmc_expr **self) {
  if (m->kind == DVMC_E_PRODUCT) {
    *f = m->args;
    return m->n;
  }
  *self = m;
  *f = self;
  return m->kind == DVMC_E_CONST ? 0 : 1;
}

/* Whether monomial a divides monomial b; *q = a lower bound of b / a.
 * Factors are sorted the same way in both, so one walk does. */
static bool divides(const dvmc_expr *a, const dvmc_expr *b, __int128 *q) {
  const dvmc_expr *const *fa, *const *fb, *sa, *sb;
  int na = factors_of(a, &fa, &sa), nb = factors_of(b, &fb, &sb), i = 0;
  __int128 lo, hi;
  *q = 1;
  for (int j = 0; j < nb; j++) {
    if (i < na && fa[i] == fb[j]) {
      i++;
    } else {
      if (!interval(fb[j], &lo, &hi) || lo < 0) return false;
      *q = clamp(*q * lo);
    }
  }
  return i == na;
}

/* Interval arithmetic loses that 16*s^2 >= 512*s when s >= 32: each
 * negative term is also checked against positive terms it divides, each
 * worth its coefficient times the least value of the quotient. */
static bool dominated(const dvmc_expr *e) {
  if (e->kind != DVMC_E_SUM || e->n > 64) return false;
  __int128 budget[64], lo, hi;
  for (int j = 0; j < e->n; j++) {
    if (!interval(e->args[j], &lo, &hi) || lo < 0) return false; /* monomials >= 0 */
    budget[j] = e->coefs[j] > 0 ? e->coefs[j] : 0;
  }
  for (int i = 0; i < e->n; i++) {
    __int128 need = e->coefs[i] < 0 ? -(__int128)e->coefs[i] : 0, q;
    for (int j = 0; j < e->n && need > 0; j++) {
      if (!budget[j] || !divides(e->args[i], e->args[j], &q) || q <= 0) continue;
      __int128 use = (need + q - 1) / q < budget[j] ? (need + q - 1) / q : budget[j];
      budget[j] -= use;
      need -= use * q;
    }
    if (need > 0) return false;
  }
  return true;
}

bool dvmc_expr_nonneg(const dvmc_expr *e) {
  __int128 lo, hi;
  return e && ((interval(e, &lo, &hi) && lo >= 0) || dominated(e));
}


bool dvmc_expr_is_const(const dvmc_expr *e, int64_t *value) {
  if (!e || e->kind != DVMC_E_CONST) return false;
  if (value) *value = e->value;
  return true;
}

const char *dvmc_expr_sym_name(const dvmc_expr *e) { return e && e->kind == DVMC_E_SYM ? e->name : NULL; }

void dvmc_sym_set_range(dvmc_exprs *x, const dvmc_expr *sym, int64_t lo, int64_t hi) {
  (void)x;
  if (sym && sym->kind == DVMC_E_SYM) { /* ranges narrow; interning ignores them */
    ((dvmc_expr *)sym)->lo = lo;
    ((dvmc_expr *)sym)->hi = hi;
  }
}

void dvmc_sym_range(const dvmc_expr *sym, int64_t *lo, int64_t *hi) { bounds(sym, lo, hi); }

dvmc_expr_kind dvmc_expr_kind_of(const dvmc_expr *e) { return e->kind; }
int64_t dvmc_expr_value(const dvmc_expr *e) { return e->value; }
int dvmc_expr_arity(const dvmc_expr *e) { return e->n; }
const dvmc_expr *dvmc_expr_arg(const dvmc_expr *e, int i) { return e->args[i]; }
int64_t dvmc_expr_coef(const dvmc_expr *e, int i) { return e->coefs[i]; }

dvm_status *dvmc_expr_eval(const dvmc_expr *e, bool (*value)(void *, const char *, int64_t *), void *ctx,
                           int64_t *out) {
  int64_t a, b, r = 0;
  dvm_status *st;
  switch (e->kind) {
  case DVMC_E_CONST: *out = e->value; return NULL;
  case DVMC_E_SYM:
    if (!value(ctx, e->name, out)) return dvm_status_new(DVM_INVALID_ARGUMENT, "no value for symbol %s", e->name);
    return NULL;
  case DVMC_E_SUM:
    for (int i = 0; i < e->n; i++) {
      if (e->args[i]->kind == DVMC_E_CONST) a = 1;
      else if ((st = dvmc_expr_eval(e->args[i], value, ctx, &a))) return st;
      if (__builtin_mul_overflow(a, e->coefs[i], &a) || __builtin_add_overflow(r, a, &r))
        return dvm_status_new(DVM_OUT_OF_RANGE, "expression overflows int64");
    }
    *out = r;
    return NULL;
  case DVMC_E_PRODUCT:
    r = 1;
    for (int i = 0; i < e->n; i++) {
      if ((st = dvmc_expr_eval(e->args[i], value, ctx, &a))) return st;
      if (__builtin_mul_overflow(r, a, &r)) return dvm_status_new(DVM_OUT_OF_RANGE, "expression overflows int64");
    }
    *out = r;
    return NULL;
  default:
    if ((st = dvmc_expr_eval(e->args[0], value, ctx, &a)) || (st = dvmc_expr_eval(e->args[1], value, ctx, &b)))
      return st;
    if ((e->kind == DVMC_E_FLOORDIV || e->kind == DVMC_E_MOD) && b == 0)
      return dvm_status_new(DVM_OUT_OF_RANGE, "division by zero");
    if (e->kind == DVMC_E_FLOORDIV) *out = (a == INT64_MIN && b == -1) ? a : fdiv(a, b);
    else if (e->kind == DVMC_E_MOD) *out = b == -1 ? 0 : a - fdiv(a, b) * b;
    else if (e->kind == DVMC_E_MIN) *out = a < b ? a : b;
    else *out = a > b ? a : b;
    return NULL;
  }
}

/* ---- printing ---- */

static void print_mono(const dvmc_expr *m, FILE *out) {
  if (m->kind != DVMC_E_PRODUCT) {
    dvmc_expr_print(m, out);
    return;
  }
  for (int i = 0; i < m->n;) {
    int k = i;
    while (k < m->n && m->args[k] == m->args[i]) k++;
    if (i) fputc('*', out);
    dvmc_expr_print(m->args[i], out);
    if (k - i > 1) fprintf(out, "^%d", k - i);
    i = k;
  }
}

void dvmc_expr_print(const dvmc_expr *e, FILE *out) {
  static const char *const fn[] = {[DVMC_E_FLOORDIV] = "floordiv", [DVMC_E_MOD] = "mod",
                                   [DVMC_E_MIN] = "min", [DVMC_E_MAX] = "max"};
  if (!e) {
    fputc('?', out);
    return;
  }
  switch (e->kind) {
  case DVMC_E_CONST: fprintf(out, "%lld", (long long)e->value); break;
  case DVMC_E_SYM: fputs(e->name, out); break;
  case DVMC_E_PRODUCT: print_mono(e, out); break;
  case DVMC_E_SUM:
    /* highest-order terms first reads best: the constant goes last */
    for (int i = e->n - 1, first = 1; i >= 0; i--, first = 0) {
      int64_t c = e->coefs[i];
      int is_one = e->args[i]->kind == DVMC_E_CONST;
      if (!first) fputs(c < 0 ? " - " : " + ", out);
      else if (c < 0) fputc('-', out);
      uint64_t mag = c < 0 ? (uint64_t)0 - (uint64_t)c : (uint64_t)c;
      if (is_one) fprintf(out, "%llu", (unsigned long long)mag);
      else {
        if (mag != 1) fprintf(out, "%llu*", (unsigned long long)mag);
        print_mono(e->args[i], out);
      }
    }
    break;
  default:
    fprintf(out, "%s(", fn[e->kind]);
    dvmc_expr_print(e->args[0], out);
    fputs(", ", out);
    dvmc_expr_print(e->args[1], out);
    fputc(')', out);
    break;
  }
}

char *dvmc_expr_str(const dvmc_expr *e, char *buf, size_t size) {
  FILE *f = fmemopen(buf, size, "w");
  if (!f) {
    if (size) buf[0] = 0;
    return buf;
  }
  dvmc_expr_print(e, f);
  fclose(f);
  buf[size - 1] = 0;
  return buf;
}
