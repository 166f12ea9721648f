/* Memory planning (see plan.h). */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "plan.h"

typedef struct {
  const int64_t *code;
  uint32_t *start; /* word offset of each instruction */
  int n;
  int *parent;     /* union-find over registers: alias classes */
  int nregs;
} code_view;

static int find(int *parent, int r) {
  while (parent[r] != r) r = parent[r] = parent[parent[r]];
  return r;
}

/* The operands of instruction i, by value (see dvmc_code_operands). */
typedef struct {
  const int64_t *code;
  void (*fn)(void *, char, int64_t);
  void *ctx;
} by_value;

static void pass_value(void *ctx, char c, uint32_t word) {
  by_value *b = ctx;
  b->fn(b->ctx, c, b->code[word]);
}

static void operands(const code_view *v, int i, void (*fn)(void *, char, int64_t), void *ctx) {
  by_value b = {v->code, fn, ctx};
  dvmc_code_operands(v->code, v->start[i], pass_value, &b);
}

static int is_reg(char c) { return strchr("drokRD", c) != NULL; }

static void max_reg(void *ctx, char c, int64_t w) {
  int *n = ctx;
  if (is_reg(c) && w >= *n) *n = (int)w + 1;
}

typedef struct {
  code_view *v;
  int i, *last;
  int *esc;  /* set for `ret`: the classes it names escape */
  int first; /* unite: the instruction's first register */
} walk;

static void unite(void *ctx, char c, int64_t w) {
  walk *k = ctx;
  if (!is_reg(c) || w < 0) return;
  if (k->first < 0) k->first = (int)w;
  else k->v->parent[find(k->v->parent, (int)w)] = find(k->v->parent, k->first);
}

static void touch(void *ctx, char c, int64_t w) {
  walk *k = ctx;
  if (!is_reg(c) || w < 0) return;
  int r = find(k->v->parent, (int)w);
  if (k->last[r] < k->i) k->last[r] = k->i;
  if (k->esc) k->esc[r] = 1;
}

static void back_edge(void *ctx, char c, int64_t w) {
  int *target = ctx;
  if (c == 'j') *target = (int)w;
}

static int index_of(const code_view *v, uint32_t word) {
  int lo = 0, hi = v->n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (v->start[mid] == word) return mid;
    if (v->start[mid] < word) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

static int divisible64(const dvmc_expr *e) {
  int64_t c;
  if (dvmc_expr_is_const(e, &c)) return c % 64 == 0;
  if (dvmc_expr_kind_of(e) == DVMC_E_MAX) return divisible64(dvmc_expr_arg(e, 0)) && divisible64(dvmc_expr_arg(e, 1));
  if (dvmc_expr_kind_of(e) != DVMC_E_SUM) return 0;
  for (int i = 0; i < dvmc_expr_arity(e); i++)
    if (dvmc_expr_coef(e, i) % 64) return 0;
  return 1;
}

/* Slots start at multiples of 64: their sizes are rounded up where they
 * might not be one (after the max: members compare unrounded). */
static const dvmc_expr *align64(dvmc_exprs *x, const dvmc_expr *e) {
  if (divisible64(e)) return e;
  const dvmc_expr *k = dvmc_const(x, 64);
  return dvmc_mul(x, k, dvmc_floordiv(x, dvmc_add(x, e, dvmc_const(x, 63)), k));
}

/* A slot's size is the max of its occupants' sizes, computed at run time
 * like the offsets: any dead slot can take any tensor. Members provably
 * below another are dropped, and a slot keeps a few, so that formulas stay
 * short. */
#define SLOT_SIZES 4
typedef struct {
  const dvmc_expr *sizes[SLOT_SIZES];
  int nsizes;
  int *live, nlive, cap; /* its occupants' live ranges: pairs of instructions */
} slot;

/* A planned tensor: its live range, its size, and that size at a typical
 * shape, which orders the placement (largest first) and nothing else. */
typedef struct {
  int site, from, to;
  const dvmc_expr *size;
  int64_t typical;
} tensor;

static int free_during(const slot *k, int from, int to) {
  for (int j = 0; j < k->nlive; j++)
    if (!(k->live[2 * j + 1] < from || to < k->live[2 * j])) return 0;
  return 1;
}

static int occupy(slot *k, int from, int to) {
  if (k->nlive == k->cap) {
    int cap = k->cap ? 2 * k->cap : 8, *p = realloc(k->live, 2 * (size_t)cap * sizeof *p);
    if (!p) return 0;
    k->live = p, k->cap = cap;
  }
  k->live[2 * k->nlive] = from;
  k->live[2 * k->nlive++ + 1] = to;
  return 1;
}

static bool typical_value(void *ctx, const char *name, int64_t *v) {
  (void)ctx, (void)name;
  *v = 128; /* a sequence length, a batch of images: only an ordering hint */
  return true;
}

static int larger_first(const void *a, const void *b) {
  const tensor *x = a, *y = b;
  if (x->typical != y->typical) return x->typical > y->typical ? -1 : 1;
  return x->site - y->site;
}

static int le(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  return a == b || dvmc_expr_nonneg(dvmc_sub(x, b, a));
}

/* How well slot k fits a tensor of `size`: 3 an equal member, 2 a larger
 * one, 1 room for another member, 0 none. */
static int fit(dvmc_exprs *x, const slot *k, const dvmc_expr *size) {
  int best = k->nsizes < SLOT_SIZES;
  for (int j = 0; j < k->nsizes && best < 3; j++)
    if (k->sizes[j] == size) best = 3;
    else if (best < 2 && le(x, size, k->sizes[j])) best = 2;
  return best;
}

static void add_size(dvmc_exprs *x, slot *k, const dvmc_expr *size) {
  if (fit(x, k, size) >= 2) return;
  int n = 0;
  for (int j = 0; j < k->nsizes; j++) /* members the new one covers go */
    if (!le(x, k->sizes[j], size)) k->sizes[n++] = k->sizes[j];
  k->sizes[n++] = size;
  k->nsizes = n;
}

dvm_status *dvmc_plan_memory(dvmc_exprs *x, const int64_t *code, uint32_t ncode, dvmc_plan_site *sites, int nsites,
                             dvmc_plan *out) {
  memset(out, 0, sizeof *out);
  code_view v = {.code = code};
  dvm_status *st = NULL;
  int *last = NULL, *esc = NULL, *in_loop = NULL;
  slot *slots = NULL;
  tensor *planned = NULL;
  int nslots = 0, nplanned = 0;
  v.start = malloc((ncode ? ncode : 1) * sizeof *v.start);
  if (!v.start) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t pc = 0, len; pc < ncode; pc += len) {
    if (!(len = dvm_instr_length(code, ncode, pc))) {
      st = dvm_status_new(DVM_INTERNAL, "memory plan: malformed code at word %u", pc);
      goto done;
    }
    v.start[v.n++] = pc;
  }
  for (int i = 0; i < v.n; i++) operands(&v, i, max_reg, &v.nregs);
  v.parent = malloc(((size_t)v.nregs + 1) * sizeof *v.parent);
  last = malloc(((size_t)v.nregs + 1) * sizeof *last);
  esc = calloc((size_t)v.nregs + 1, sizeof *esc);
  in_loop = calloc((size_t)v.n + 1, sizeof *in_loop);
  slots = calloc((size_t)nsites + 1, sizeof *slots);
  planned = malloc(((size_t)nsites + 1) * sizeof *planned);
  out->offset = malloc(((size_t)nsites + 1) * sizeof *out->offset);
  if (!v.parent || !last || !esc || !in_loop || !slots || !planned || !out->offset) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }
  for (int r = 0; r < v.nregs; r++) v.parent[r] = r, last[r] = -1;
  /* alias classes: these results share their operands' storage */
  for (int i = 0; i < v.n; i++) {
    int64_t op = code[v.start[i]];
    if (op == DVM_OP_MOVE || op == DVM_OP_RESHAPE || op == DVM_OP_TUPLE || op == DVM_OP_GET) {
      walk k = {.v = &v, .i = i, .first = -1};
      if (op == DVM_OP_RESHAPE) { /* not its shape operand */
        unite(&k, 'd', code[v.start[i] + 1]);
        unite(&k, 'r', code[v.start[i] + 2]);
      } else {
        operands(&v, i, unite, &k);
      }
    }
  }
  for (int i = 0; i < v.n; i++) {
    walk k = {.v = &v, .i = i, .last = last, .esc = code[v.start[i]] == DVM_OP_RET ? esc : NULL};
    operands(&v, i, touch, &k);
  }
  /* a class named inside a loop lives to the loop's back edge */
  for (int i = 0; i < v.n; i++) {
    int target = -1;
    operands(&v, i, back_edge, &target);
    if (target < 0 || (uint32_t)target > v.start[i]) continue;
    for (int h = index_of(&v, (uint32_t)target); h >= 0 && h <= i; h++) {
      walk k = {.v = &v, .i = i, .last = last};
      operands(&v, h, touch, &k);
      in_loop[h] = 1;
    }
  }
  const dvmc_expr *outside = dvmc_const(x, 0);
  for (int s = 0; s < nsites; s++) {
    dvmc_plan_site *p = &sites[s];
    int i = index_of(&v, p->word);
    if (i < 0 || code[p->word] != DVM_OP_ALLOC_TENSOR) {
      st = dvm_status_new(DVM_INTERNAL, "memory plan: site at word %u is not an alloc_tensor", p->word);
      goto done;
    }
    int cls = find(v.parent, (int)code[p->word + 1]);
    p->slot = -1;
    if (in_loop[i] || esc[cls]) {
      outside = dvmc_add(x, outside, p->bytes);
      continue;
    }
    tensor *t = &planned[nplanned++];
    *t = (tensor){.site = s, .from = i, .to = last[cls], .size = p->bytes};
    dvm_status_free(dvmc_expr_eval(t->size, typical_value, NULL, &t->typical));
  }
  qsort(planned, (size_t)nplanned, sizeof *planned, larger_first);
  for (int n = 0; n < nplanned; n++) { /* each in the best fitting slot free for its range */
    tensor *t = &planned[n];
    int best = 0, *at = &sites[t->site].slot;
    for (int k = 0; k < nslots; k++) {
      int f = free_during(&slots[k], t->from, t->to) ? fit(x, &slots[k], t->size) : 0;
      if (f > best) best = f, *at = k;
    }
    if (*at >= 0) out->reused++;
    else slots[*at = nslots++] = (slot){0};
    add_size(x, &slots[*at], t->size);
    if (!occupy(&slots[*at], t->from, t->to)) {
      st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
      goto done;
    }
  }
  const dvmc_expr *arena = dvmc_const(x, 0);
  for (int k = 0; k < nslots; k++) {
    const dvmc_expr *size = slots[k].sizes[0];
    for (int j = 1; j < slots[k].nsizes; j++) size = dvmc_max(x, size, slots[k].sizes[j]);
    size = align64(x, size);
    out->offset[k] = arena;
    arena = dvmc_add(x, arena, size);
  }
  out->nslots = nslots;
  out->arena = arena;
  out->peak = dvmc_add(x, arena, outside);
  if (!arena || !outside || !out->peak) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
done:
  free(v.start);
  free(v.parent);
  free(last);
  free(esc);
  free(in_loop);
  for (int k = 0; slots && k < nslots; k++) free(slots[k].live);
  free(slots);
  free(planned);
  if (st) dvmc_plan_free(out);
  return st;
}

void dvmc_plan_free(dvmc_plan *p) {
  free(p->offset);
  p->offset = NULL;
  p->nslots = 0;
}
