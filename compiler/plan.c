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

/* The operands of instruction i, by value (see dvm_instr_operands). */
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
  dvm_instr_operands(v->code, v->start[i], pass_value, &b);
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

typedef struct {
  const int64_t *code;
  int *writes;
} write_count;

static void count_write(void *ctx, char letter, uint32_t word) {
  write_count *c = ctx;
  if (letter == 'd' || letter == 'D') c->writes[c->code[word]]++;
}

dvm_status *dvmc_plan_results(const int64_t *code, uint32_t ncode, int nregs, int *result_of) {
  int *writes = calloc((size_t)nregs + 1, sizeof *writes);
  if (!writes) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  uint32_t ret = 0;
  for (uint32_t w = 0; w < ncode; w += dvm_instr_length(code, ncode, w)) {
    dvm_instr_operands(code, w, count_write, &(write_count){code, writes});
    ret = w;
  }
  for (int r = 0; r < nregs; r++) result_of[r] = -1;
  const int64_t *list = code + ret + 1;
  for (int64_t k = 0; ncode && code[ret] == DVM_OP_RET && k < list[0]; k++) {
    int64_t r = list[1 + k];
    if (r >= 0 && r < nregs && writes[r] == 1) result_of[r] = result_of[r] == -1 ? (int)k : -2;
  }
  for (int r = 0; r < nregs; r++)
    if (result_of[r] < -1) result_of[r] = -1; /* returned twice */
  free(writes);
  return NULL;
}

/* A slot is one storage, made at its first occupant's site and returned
 * after its last occupant dies; it holds tensors of one size (the same
 * interned expression) one after another. */
typedef struct {
  const dvmc_expr *size;
  int from, to; /* its first occupant's site, its last occupant's death */
} slot;

/* Whether instruction i may take memory from the pool. */
static int noisy(const code_view *v, int i) {
  int64_t op = v->code[v->start[i]];
  return (dvm_opinfo_table[op].flags & (DVM_OPF_ALLOC | DVM_OPF_CALL)) || op == DVM_OP_ALLOC_TENSOR ||
         op == DVM_OP_INVOKE || op == DVM_OP_SHAPEFN || op == DVM_OP_HOSTCALL;
}

/* A span of instructions [at, to] that holds `size` bytes. */
typedef struct {
  int at, to;
  const dvmc_expr *size;
} span;

static int by_at(const void *a, const void *b) {
  int x = ((const span *)a)->at, y = ((const span *)b)->at;
  return (x > y) - (x < y);
}

/* The bytes live where each site is made (the spans that cover its
 * instruction), in one sweep in code order: a span's size joins the
 * running sum where it starts and leaves it after it ends. Sums are
 * canonical polynomials, so adding and taking away gives the same
 * expression as summing the live set afresh. `spans` (n) is used as
 * scratch; live[s] is site s's sum (NULL: out of memory). */
static void live_at_sites(dvmc_exprs *x, const int *site_at, int nsites, span *spans, int n,
                          const dvmc_expr **live) {
  span *ends = spans + n;
  for (int k = 0; k < n; k++) ends[k] = (span){spans[k].to, 0, spans[k].size};
  qsort(spans, (size_t)n, sizeof *spans, by_at);
  qsort(ends, (size_t)n, sizeof *ends, by_at);
  const dvmc_expr *sum = dvmc_const(x, 0);
  for (int s = 0, a = 0, e = 0; s < nsites; s++) {
    for (; a < n && spans[a].at <= site_at[s]; a++) sum = dvmc_add(x, sum, spans[a].size);
    for (; e < n && ends[e].at < site_at[s]; e++) sum = dvmc_sub(x, sum, ends[e].size);
    live[s] = sum;
  }
}

/* For each instruction i, the class named last by an instruction other
 * than `release` (named[cls]), and for each alloc_tensor the instruction
 * after it that first names its register's class (next[i], -1: none): one
 * pass each way over the code. */
typedef struct {
  const code_view *v;
  int i, *at;
} naming;

static void name_at(void *ctx, char c, int64_t w) {
  naming *m = ctx;
  if (is_reg(c) && w >= 0) m->at[find(m->v->parent, (int)w)] = m->i;
}

static void first_names(const code_view *v, int *named, int *next, int *scratch) {
  for (int r = 0; r < v->nregs; r++) named[r] = -1, scratch[r] = -1;
  for (int i = 0; i < v->n; i++)
    if (v->code[v->start[i]] != DVM_OP_RELEASE) operands(v, i, name_at, &(naming){v, i, named});
  for (int i = v->n - 1; i >= 0; i--) {
    const int64_t *c = v->code + v->start[i];
    next[i] = c[0] == DVM_OP_ALLOC_TENSOR && c[1] >= 0 ? scratch[find(v->parent, (int)c[1])] : -1;
    operands(v, i, name_at, &(naming){v, i, scratch});
  }
}

/* Open addressing from a size expression to the newest slot of that size
 * (-1: none now); older ones follow through `next_same`. A size keeps its
 * entry once made, so that a list emptied cannot cut another's probe. */
typedef struct {
  const dvmc_expr **key;
  int *head, mask;
} by_size;

static int *head_of(by_size *h, const dvmc_expr *size) {
  for (size_t k = ((uintptr_t)size >> 4) * 0x9e3779b97f4a7c15u;; k++) {
    size_t e = k & (size_t)h->mask;
    if (!h->key[e]) h->key[e] = size;
    if (h->key[e] == size) return &h->head[e];
  }
}

static int le(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  return a == b || dvmc_expr_nonneg(dvmc_sub(x, b, a));
}

/* The largest of the sums live where each site is made (live_at_sites
 * over spans[0..n), which it reorders), those provably below another
 * dropped; `peaks` holds nsites + 1. */
static const dvmc_expr *peak_of(dvmc_exprs *x, const int *site_at, int nsites, span *spans, int n,
                                const dvmc_expr **live, const dvmc_expr **peaks) {
  int npeaks = 0;
  live_at_sites(x, site_at, nsites, spans, n, live);
  for (int s = 0; s < nsites; s++) {
    const dvmc_expr *sum = live[s];
    int j, m = 0;
    for (j = 0; j < npeaks && !le(x, sum, peaks[j]); j++) {}
    if (j < npeaks) continue;
    for (j = 0; j < npeaks; j++)
      if (!le(x, peaks[j], sum)) peaks[m++] = peaks[j];
    peaks[m++] = sum;
    npeaks = m;
  }
  const dvmc_expr *peak = dvmc_const(x, 0);
  for (int j = 0; j < npeaks; j++) peak = j ? dvmc_max(x, peak, peaks[j]) : peaks[j];
  return peak;
}

dvm_status *dvmc_plan_memory(dvmc_exprs *x, const int64_t *code, uint32_t ncode, dvmc_plan_site *sites, int nsites,
                             dvmc_plan_inplace_fn inplace, void *ctx, dvmc_plan *out) {
  memset(out, 0, sizeof *out);
  code_view v = {.code = code};
  dvm_status *st = NULL;
  int *last = NULL, *esc = NULL, *in_loop = NULL, *site_of = NULL, *named = NULL, *calm = NULL;
  int *site_at = NULL, *next_same = NULL, *heads = NULL, *result_of = NULL, *bound_site = NULL;
  slot *slots = NULL;
  span *spans = NULL, *bound_spans = NULL;
  const dvmc_expr **live = NULL, **peaks = NULL, **keys = NULL;
  int nslots = 0, nspans = 0, mask = 15;
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
  while (mask < 2 * nsites) mask = mask * 2 + 1;
  v.parent = malloc(((size_t)v.nregs + 1) * sizeof *v.parent);
  last = malloc(((size_t)v.nregs + 1) * sizeof *last);
  esc = calloc((size_t)v.nregs + 1, sizeof *esc);
  site_of = malloc(((size_t)v.nregs + 1) * sizeof *site_of);
  named = malloc(2 * ((size_t)v.nregs + 1) * sizeof *named);
  in_loop = calloc((size_t)v.n + 1, sizeof *in_loop);
  calm = malloc(2 * ((size_t)v.n + 1) * sizeof *calm);
  site_at = calloc(2 * ((size_t)nsites + 1), sizeof *site_at);
  next_same = site_at ? site_at + nsites + 1 : NULL;
  heads = malloc(((size_t)mask + 1) * sizeof *heads);
  keys = calloc((size_t)mask + 1, sizeof *keys);
  slots = calloc((size_t)nsites + 1, sizeof *slots);
  spans = malloc(2 * ((size_t)nsites + 1) * sizeof *spans);
  bound_spans = malloc(2 * ((size_t)nsites + 1) * sizeof *bound_spans);
  bound_site = malloc(((size_t)nsites + 1) * sizeof *bound_site);
  result_of = malloc(((size_t)v.nregs + 1) * sizeof *result_of);
  live = malloc(((size_t)nsites + 1) * sizeof *live);
  peaks = malloc(((size_t)nsites + 1) * sizeof *peaks);
  out->size = malloc(((size_t)nsites + 1) * sizeof *out->size);
  out->first = malloc(2 * ((size_t)nsites + 1) * sizeof *out->first);
  out->last = out->first ? out->first + nsites + 1 : NULL;
  if (!v.parent || !last || !esc || !site_of || !named || !in_loop || !calm || !site_at || !heads || !keys || !slots || !spans ||
      !live || !peaks || !out->size || !out->first || !bound_spans || !bound_site || !result_of) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }
  if ((st = dvmc_plan_results(code, ncode, v.nregs, result_of))) goto done;
  for (int k = 0; k <= mask; k++) heads[k] = -1;
  by_size sized = {keys, heads, mask};
  for (int r = 0; r < v.nregs; r++) v.parent[r] = r, last[r] = -1, site_of[r] = -1;
  /* alias classes: these results share their operands' storage */
  for (int i = 0; i < v.n; i++) {
    int64_t op = code[v.start[i]];
    if (op == DVM_OP_MOVE || op == DVM_OP_RESHAPE || op == DVM_OP_TUPLE || op == DVM_OP_GET || op == DVM_OP_AT ||
        op == DVM_OP_INSERT || op == DVM_OP_ERASE) {
      walk k = {.v = &v, .i = i, .first = -1};
      if (op == DVM_OP_RESHAPE) { /* not its shape operand */
        dvm_ops_RESHAPE rs = dvm_decode_RESHAPE(code + v.start[i]);
        unite(&k, 'd', rs.dst);
        unite(&k, 'r', rs.src);
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
  /* calm[i]: the last instruction before i that may take memory from the
   * pool (-1: none); first_names fills named (per class) and next */
  int *next = calm + v.n + 1;
  for (int i = 0, h = -1; i < v.n; i++) {
    calm[i] = h;
    if (noisy(&v, i)) h = i;
  }
  first_names(&v, named, next, named + v.nregs + 1);
  for (int s = 0; s < nsites; s++) { /* the site of each class: -2 where it has several */
    if (index_of(&v, sites[s].word) < 0 || code[sites[s].word] != DVM_OP_ALLOC_TENSOR) {
      st = dvm_status_new(DVM_INTERNAL, "memory plan: site at word %u is not an alloc_tensor", sites[s].word);
      goto done;
    }
    int64_t r = dvm_decode_ALLOC_TENSOR(code + sites[s].word).dst;
    if (r < 0 || r >= v.nregs) {
      st = dvm_status_new(DVM_INTERNAL, "memory plan: site at word %u has no register", sites[s].word);
      goto done;
    }
    int *o = &site_of[find(v.parent, (int)r)];
    *o = *o == -1 ? s : -2;
  }
  for (int s = 0; s < nsites; s++) { /* in code order, each chained to a slot or kept outside */
    dvmc_plan_site *p = &sites[s];
    int i = index_of(&v, p->word);
    int64_t dst = dvm_decode_ALLOC_TENSOR(code + p->word).dst;
    int cls = find(v.parent, (int)dst);
    site_at[s] = i;
    p->slot = -1;
    if (in_loop[i] || esc[cls]) {
      spans[nspans++] = (span){i, esc[cls] ? v.n : last[cls], p->bytes};
      continue;
    }
    /* in place: the storage of an input of this size that dies in the
     * site's own call (the first instruction after the site that names its
     * register, an invoke writing it as output 0; only releases name the
     * input after it), when that kernel allows it and the input is its
     * slot's last occupant */
    int j = inplace ? next[i] : -1;
    const int64_t *call = j >= 0 ? code + v.start[j] : NULL;
    dvm_ops_INVOKE inv = call && call[0] == DVM_OP_INVOKE ? dvm_decode_INVOKE(call) : (dvm_ops_INVOKE){0};
    if (inv.outs.n >= 1 && inv.outs.v[0] == dst && inplace(ctx, inv.kernel)) {
      for (int64_t q = 0; q < inv.ins.n && p->slot < 0; q++) {
        int c = inv.ins.v[q] >= 0 ? find(v.parent, (int)inv.ins.v[q]) : -1, t = c >= 0 ? site_of[c] : -1;
        if (t >= 0 && t < s && sites[t].slot >= 0 && sites[t].bytes == p->bytes && last[c] >= j &&
            slots[sites[t].slot].to == last[c] && named[c] <= j)
          p->slot = sites[t].slot, out->inplace++;
      }
    }
    /* else the slot of this size freed last with nothing allocated since
     * (calm[i] <= its end; the earliest slot of those ending together).
     * A slot that ended before calm[i] never qualifies again (calm only
     * grows, and a slot grows only by being chosen): it leaves the list. */
    int in_place = p->slot >= 0, *e = head_of(&sized, p->bytes);
    for (int *link = e; !in_place && *link >= 0;) {
      int k = *link;
      if (slots[k].to < calm[i]) {
        *link = next_same[k];
        continue;
      }
      if (slots[k].to < i &&
          (p->slot < 0 || slots[k].to > slots[p->slot].to || (slots[k].to == slots[p->slot].to && k < p->slot)))
        p->slot = k;
      link = &next_same[k];
    }
    if (p->slot >= 0) out->reused++;
    else {
      slots[p->slot = nslots++] = (slot){.size = p->bytes, .from = i}, out->first[p->slot] = s;
      next_same[p->slot] = *e;
      *e = p->slot;
    }
    slots[p->slot].to = last[cls] > i ? last[cls] : i;
    out->last[p->slot] = s;
  }
  for (int k = 0; k < nslots; k++) spans[nspans++] = (span){slots[k].from, slots[k].to, slots[k].size};
  /* with the results bound: the spans of the sites kept outside come
   * first, in site order; those of results alloc_result makes left out */
  int nouter = 0, nbound = 0;
  for (int s = 0; s < nsites; s++)
    if (sites[s].slot < 0) {
      int64_t r = code[sites[s].word + 1];
      bound_site[nouter++] = esc[find(v.parent, (int)r)] && result_of[r] >= 0;
    }
  for (int k = 0; k < nspans; k++)
    if (!(k < nouter && bound_site[k])) bound_spans[nbound++] = spans[k];
  out->peak = peak_of(x, site_at, nsites, spans, nspans, live, peaks);
  out->peak_bound = peak_of(x, site_at, nsites, bound_spans, nbound, live, peaks);
  for (int k = 0; k < nslots; k++) out->size[k] = slots[k].size;
  out->nslots = nslots;
  if (!out->peak || !out->peak_bound) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
done:
  free(v.start);
  free(v.parent);
  free(last);
  free(esc);
  free(site_of);
  free(named);
  free(in_loop);
  free(calm);
  free(site_at);
  free(heads);
  free(keys);
  free(spans);
  free(bound_spans);
  free(bound_site);
  free(result_of);
  free(live);
  free(peaks);
  free(slots);
  if (st) dvmc_plan_free(out);
  return st;
}

void dvmc_plan_free(dvmc_plan *p) {
  free(p->size);
  free(p->first);
  p->size = NULL;
  p->first = p->last = NULL;
  p->nslots = 0;
}
