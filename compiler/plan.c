/* Memory planning (see plan.h). */
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "opcode.h"
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

/* A slot is one storage, made at its first occupant's site and returned
 * after its last occupant dies; it holds tensors of one size (the same
 * interned expression) one after another. */
typedef struct {
  const dvmc_expr *size;
  int from, to; /* its first occupant's site, its last occupant's death */
} slot;

/* True when no instruction strictly between a and b may take memory from
 * the pool: a slot kept across that gap costs nothing that allocating
 * afresh at b would not, so chaining never raises the peak. */
static int quiet(const code_view *v, const int64_t *code, int a, int b) {
  for (int i = a + 1; i < b; i++) {
    int64_t op = code[v->start[i]];
    if ((dvm_opinfo_table[op].flags & (DVM_OPF_ALLOC | DVM_OPF_CALL)) || op == DVM_OP_ALLOC_TENSOR ||
        op == DVM_OP_INVOKE || op == DVM_OP_SHAPEFN || op == DVM_OP_HOSTCALL)
      return 0;
  }
  return 1;
}

/* The bytes live at instruction i: the slots and the tensors outside that
 * span it. */
static const dvmc_expr *live_at(dvmc_exprs *x, int i, const slot *slots, int nslots, const int *ofrom,
                                const int *oto, const dvmc_expr *const *osize, int nout) {
  const dvmc_expr *sum = dvmc_const(x, 0);
  for (int k = 0; k < nslots; k++)
    if (slots[k].from <= i && i <= slots[k].to) sum = dvmc_add(x, sum, slots[k].size);
  for (int j = 0; j < nout; j++)
    if (ofrom[j] <= i && i <= oto[j]) sum = dvmc_add(x, sum, osize[j]);
  return sum;
}

typedef struct {
  int *parent, cls, named;
} names_ctx;

static void names_cls(void *ctx, char c, int64_t w) {
  names_ctx *n = ctx;
  n->named |= is_reg(c) && w >= 0 && find(n->parent, (int)w) == n->cls;
}

/* Whether instruction h names a register of class cls. */
static int names(const code_view *v, int h, int cls) {
  names_ctx n = {v->parent, cls, 0};
  operands(v, h, names_cls, &n);
  return n.named;
}

/* The instruction after i that first names register r's class, when it is
 * an invoke writing r as its output 0 (the site's own call); else -1. */
static int own_call(const code_view *v, int i, int64_t r) {
  int cls = find(v->parent, (int)r);
  for (int h = i + 1; h < v->n; h++) {
    if (!names(v, h, cls)) continue;
    const int64_t *c = v->code + v->start[h];
    return c[0] == DVM_OP_INVOKE && c[3] >= 1 && c[4] == r ? h : -1;
  }
  return -1;
}

/* True when class cls is only released after instruction j: its data is
 * dead once j has read it. */
static int dead_after(const code_view *v, int cls, int j, int last) {
  for (int h = j + 1; h <= last; h++)
    if (v->code[v->start[h]] != DVM_OP_RELEASE && names(v, h, cls)) return 0;
  return 1;
}

static int le(dvmc_exprs *x, const dvmc_expr *a, const dvmc_expr *b) {
  return a == b || dvmc_expr_nonneg(dvmc_sub(x, b, a));
}

dvm_status *dvmc_plan_memory(dvmc_exprs *x, const int64_t *code, uint32_t ncode, dvmc_plan_site *sites, int nsites,
                             dvmc_plan_inplace_fn inplace, void *ctx, dvmc_plan *out) {
  memset(out, 0, sizeof *out);
  code_view v = {.code = code};
  dvm_status *st = NULL;
  int *last = NULL, *esc = NULL, *in_loop = NULL, *ofrom = NULL, *oto = NULL, *site_of = NULL;
  slot *slots = NULL;
  const dvmc_expr **osize = NULL, **peaks = NULL;
  int nslots = 0, nout = 0, npeaks = 0;
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
  site_of = malloc(((size_t)v.nregs + 1) * sizeof *site_of);
  in_loop = calloc((size_t)v.n + 1, sizeof *in_loop);
  slots = calloc((size_t)nsites + 1, sizeof *slots);
  ofrom = malloc(((size_t)nsites + 1) * sizeof *ofrom);
  oto = malloc(((size_t)nsites + 1) * sizeof *oto);
  osize = malloc(((size_t)nsites + 1) * sizeof *osize);
  peaks = malloc(((size_t)nsites + 1) * sizeof *peaks);
  out->size = malloc(((size_t)nsites + 1) * sizeof *out->size);
  out->first = malloc(2 * ((size_t)nsites + 1) * sizeof *out->first);
  out->last = out->first ? out->first + nsites + 1 : NULL;
  if (!v.parent || !last || !esc || !site_of || !in_loop || !slots || !ofrom || !oto || !osize || !peaks || !out->size ||
      !out->first) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }
  for (int r = 0; r < v.nregs; r++) v.parent[r] = r, last[r] = -1, site_of[r] = -1;
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
  for (int s = 0; s < nsites; s++) { /* the site of each class: -2 where it has several */
    int64_t r = code[sites[s].word + 1];
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
    if (i < 0 || code[p->word] != DVM_OP_ALLOC_TENSOR) {
      st = dvm_status_new(DVM_INTERNAL, "memory plan: site at word %u is not an alloc_tensor", p->word);
      goto done;
    }
    int cls = find(v.parent, (int)code[p->word + 1]);
    p->slot = -1;
    if (in_loop[i] || esc[cls]) {
      ofrom[nout] = i, oto[nout] = esc[cls] ? v.n : last[cls], osize[nout++] = p->bytes;
      continue;
    }
    /* in place: the storage of an input of this size that dies in the
     * site's own call (only releases follow), when that kernel allows it
     * and the input is its slot's last occupant */
    int j = inplace ? own_call(&v, i, code[p->word + 1]) : -1;
    const int64_t *call = j >= 0 ? code + v.start[j] : NULL;
    if (call && inplace(ctx, call[1])) {
      const int64_t *in = call + 4 + call[3];
      for (int q = 1; q <= in[0] && p->slot < 0; q++) {
        int c = in[q] >= 0 ? find(v.parent, (int)in[q]) : -1, t = c >= 0 ? site_of[c] : -1;
        if (t >= 0 && t < s && sites[t].slot >= 0 && sites[t].bytes == p->bytes && last[c] >= j &&
            slots[sites[t].slot].to == last[c] && dead_after(&v, c, j, last[c]))
          p->slot = sites[t].slot, out->inplace++;
      }
    }
    int in_place = p->slot >= 0;
    for (int k = 0; k < nslots && !in_place; k++) /* the slot freed last, of this size, with nothing allocated since */
      if (slots[k].size == p->bytes && slots[k].to < i && quiet(&v, code, slots[k].to, i) &&
          (p->slot < 0 || slots[k].to > slots[p->slot].to))
        p->slot = k;
    if (p->slot >= 0) out->reused++;
    else slots[p->slot = nslots++] = (slot){.size = p->bytes, .from = i}, out->first[p->slot] = s;
    slots[p->slot].to = last[cls] > i ? last[cls] : i;
    out->last[p->slot] = s;
  }
  /* the peak: the largest of the sums live where a site is made, those
   * provably below another dropped */
  for (int s = 0; s < nsites; s++) {
    const dvmc_expr *sum = live_at(x, index_of(&v, sites[s].word), slots, nslots, ofrom, oto, osize, nout);
    int j, n = 0;
    for (j = 0; j < npeaks && !le(x, sum, peaks[j]); j++) {}
    if (j < npeaks) continue;
    for (j = 0; j < npeaks; j++)
      if (!le(x, peaks[j], sum)) peaks[n++] = peaks[j];
    peaks[n++] = sum;
    npeaks = n;
  }
  out->peak = dvmc_const(x, 0);
  for (int j = 0; j < npeaks; j++) out->peak = j ? dvmc_max(x, out->peak, peaks[j]) : peaks[j];
  for (int k = 0; k < nslots; k++) out->size[k] = slots[k].size;
  out->nslots = nslots;
  if (!out->peak) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
done:
  free(v.start);
  free(v.parent);
  free(last);
  free(esc);
  free(site_of);
  free(in_loop);
  free(ofrom);
  free(oto);
  free(osize);
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
