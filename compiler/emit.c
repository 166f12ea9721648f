/* Building bytecode modules (see emit.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "extdata.h"

#define PUSH(e, vec, item) DVM_VEC_PUSH(vec, item, (e)->oom = 1)

struct dvmc_fn {
  dvmc_emit *e;
  const char *name;
  uint32_t nregs;
  dvm_words code;
  DVM_VEC(const char *) src;
  DVM_VEC(dvm_sig) params;
  DVM_VEC(dvm_sig) results;
  DVM_VEC(dvm_sym) syms;
  DVM_VEC(dvm_info) info;
  const char *loc;
};

struct dvmc_emit {
  dvm_module *m;
  DVM_VEC(const char *) strings;
  DVM_VEC(dvm_const) consts;
  DVM_VEC(dvm_kernel_ref) kernels;
  DVM_VEC(dvm_shapefn_ref) shapefns;
  DVM_VEC(dvmc_fn *) funcs;
  int oom;
  dvmc_ctx *ext_ctx; /* dvmc_emit_reference */
  const char *ext_dir;
};

static const char *copy(dvmc_emit *e, const char *s) {
  if (!s) return NULL;
  const char *d = dvm_arena_strdup(&e->m->arena, s);
  if (!d) e->oom = 1;
  return d;
}

dvm_status *dvmc_emit_create(dvmc_emit **out) {
  dvmc_emit *e = calloc(1, sizeof *e);
  if (!e) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = dvm_module_new_empty(&e->m);
  if (st) {
    free(e);
    return st;
  }
  *out = e;
  return NULL;
}

void dvmc_emit_destroy(dvmc_emit *e) {
  if (!e) return;
  for (size_t i = 0; i < e->funcs.n; i++) {
    dvmc_fn *f = e->funcs.v[i];
    free(f->code.v);
    free(f->src.v);
    free(f->params.v);
    free(f->results.v);
    free(f->syms.v);
    free(f->info.v);
    free(f);
  }
  free(e->strings.v);
  free(e->consts.v);
  free(e->kernels.v);
  free(e->shapefns.v);
  free(e->funcs.v);
  dvm_module_release(e->m);
  free(e);
}

int dvmc_emit_const(dvmc_emit *e, const char *name, const dvmc_tensor *t) {
  for (size_t i = 0; i < e->consts.n; i++)
    if (strcmp(e->consts.v[i].name, name) == 0) return (int)i;
  dvm_const c = {.name = copy(e, name), .dtype = (uint8_t)t->dtype, .rank = (uint8_t)t->rank,
                 .data = t->data, .nbytes = t->nbytes};
  memcpy(c.dims, t->dims, sizeof c.dims);
  if (e->ext_ctx && dvmc_extdata_find(e->ext_ctx, e->ext_dir, t, &c.ext_path, &c.ext_offset)) {
    c.ext_path = copy(e, c.ext_path);
    c.ext_hash = dvmc_extdata_hash(t);
  }
  size_t n = e->consts.n;
  PUSH(e, e->consts, c);
  return e->consts.n > n ? (int)n : -1;
}

void dvmc_emit_reference(dvmc_emit *e, dvmc_ctx *c, const char *dir) {
  e->ext_ctx = c;
  e->ext_dir = dir;
}

int dvmc_emit_kernel(dvmc_emit *e, const char *name, dvm_device_kind dev, uint32_t nvariants,
                     const void *payload, size_t payload_size) {
  for (size_t i = 0; i < e->kernels.n; i++) {
    const dvm_kernel_ref *k = &e->kernels.v[i];
    if (strcmp(k->name, name) == 0 && k->device == dev) return (int)i;
  }
  void *p = NULL;
  if (payload_size) {
    p = dvm_arena_alloc(&e->m->arena, payload_size, 1);
    if (!p) {
      e->oom = 1;
      return -1;
    }
    memcpy(p, payload, payload_size);
  }
  dvm_kernel_ref k = {.name = copy(e, name), .device = (uint8_t)dev, .nvariants = nvariants,
                      .payload = p, .payload_size = payload_size};
  size_t n = e->kernels.n;
  PUSH(e, e->kernels, k);
  return e->kernels.n > n ? (int)n : -1;
}

const char *dvmc_emit_kernel_name(const dvmc_emit *e, int64_t k) {
  return k >= 0 && (size_t)k < e->kernels.n ? e->kernels.v[k].name : NULL;
}

int dvmc_emit_shapefn(dvmc_emit *e, const char *name) {
  for (size_t i = 0; i < e->shapefns.n; i++)
    if (strcmp(e->shapefns.v[i].name, name) == 0) return (int)i;
  dvm_shapefn_ref s = {.name = copy(e, name)};
  size_t n = e->shapefns.n;
  PUSH(e, e->shapefns, s);
  return e->shapefns.n > n ? (int)n : -1;
}

int dvmc_emit_string(dvmc_emit *e, const char *s) {
  for (size_t i = 0; i < e->strings.n; i++)
    if (strcmp(e->strings.v[i], s) == 0) return (int)i;
  size_t n = e->strings.n;
  PUSH(e, e->strings, copy(e, s));
  return e->strings.n > n ? (int)n : -1;
}

dvmc_fn *dvmc_emit_func(dvmc_emit *e, const char *name) {
  dvmc_fn *f = calloc(1, sizeof *f);
  if (!f) {
    e->oom = 1;
    return NULL;
  }
  f->e = e;
  f->name = copy(e, name);
  size_t n = e->funcs.n;
  PUSH(e, e->funcs, f);
  if (e->funcs.n == n) {
    free(f);
    return NULL;
  }
  return f;
}

int dvmc_fn_reg(dvmc_fn *f) { return (int)f->nregs++; }
int dvmc_fn_nregs(const dvmc_fn *f) { return (int)f->nregs; }

static dvm_sig copy_sig(dvmc_emit *e, const dvm_sig *s) {
  dvm_sig c = *s;
  c.name = copy(e, s->name);
  return c;
}

int dvmc_fn_param(dvmc_fn *f, const dvm_sig *sig) {
  PUSH(f->e, f->params, copy_sig(f->e, sig));
  return dvmc_fn_reg(f);
}

void dvmc_fn_set_param(dvmc_fn *f, int i, const dvm_sig *sig) {
  if (i >= 0 && (size_t)i < f->params.n) f->params.v[i] = copy_sig(f->e, sig);
}

void dvmc_fn_result(dvmc_fn *f, const dvm_sig *sig) { PUSH(f->e, f->results, copy_sig(f->e, sig)); }

int dvmc_fn_sym(dvmc_fn *f, const char *name, int64_t lo, int64_t hi) {
  int k = dvmc_fn_sym_find(f, name);
  if (k >= 0) return k;
  dvm_sym s = {.name = copy(f->e, name), .reg = (uint32_t)dvmc_fn_reg(f), .lo = lo, .hi = hi};
  PUSH(f->e, f->syms, s);
  return (int)f->syms.n - 1;
}

int dvmc_fn_sym_find(const dvmc_fn *f, const char *name) {
  for (size_t i = 0; i < f->syms.n; i++)
    if (strcmp(f->syms.v[i].name, name) == 0) return (int)i;
  return -1;
}

int dvmc_fn_sym_reg(const dvmc_fn *f, int sym) { return (int)f->syms.v[sym].reg; }

void dvmc_fn_info(dvmc_fn *f, const char *key, const char *value) {
  PUSH(f->e, f->info, ((dvm_info){copy(f->e, key), copy(f->e, value)}));
}

void dvmc_fn_loc(dvmc_fn *f, const char *node) { f->loc = node ? copy(f->e, node) : NULL; }

#define DVM_OPERAND(letter, name) , name
#define X(op, name, ops, flags, syn)                             \
  void dvmc_fn_##op(dvmc_fn *f DVM_EACH_PARAM(ops)) {             \
    PUSH(f->e, f->src, f->loc);                                   \
    dvm_encode_##op(&f->code, &f->e->oom DVM_EACH_OPERAND(ops));  \
  }
#include "opcodes.def"
#undef X
#undef DVM_OPERAND

uint32_t dvmc_fn_here(const dvmc_fn *f) { return (uint32_t)f->code.n; }

typedef struct {
  int64_t *code;
  uint32_t target;
} targeting;

static void put_target(void *ctx, char c, uint32_t word) {
  targeting *t = ctx;
  if (c == 'j') t->code[word] = t->target;
}

void dvmc_fn_set_target(dvmc_fn *f, uint32_t jump, uint32_t target) {
  targeting t = {f->code.v, target};
  if (jump < f->code.n) dvm_instr_operands(f->code.v, jump, put_target, &t);
}

const int64_t *dvmc_fn_code(const dvmc_fn *f, uint32_t *nwords) {
  *nwords = (uint32_t)f->code.n;
  return f->code.v;
}


typedef struct {
  int64_t *code;
  uint32_t at, from, end;
} hoisting;

static void move_target(void *ctx, char c, uint32_t word) {
  hoisting *h = ctx;
  int64_t t = h->code[word];
  if (c != 'j' || t <= h->at) return; /* a jump to `at` runs the moved code too */
  h->code[word] = t >= h->from ? h->at + (t - h->from) : t + (h->end - h->from);
}

typedef struct {
  int64_t *code;
  const uint32_t *moved; /* old word -> new word */
} remapping;

static void remap_target(void *ctx, char c, uint32_t word) {
  remapping *r = ctx;
  if (c == 'j') r->code[word] = r->moved[r->code[word]];
}

void dvmc_fn_edit_code(dvmc_fn *f, const dvmc_fn_edit *edits, int n, const dvm_words *instrs) {
  size_t old_n = f->code.n, new_n = old_n, ninstr = f->src.n;
  for (int k = 0; k < n; k++) {
    assert(k == 0 || edits[k - 1].at <= edits[k].at);
    new_n += dvm_instr_length(instrs->v, (uint32_t)instrs->n, (uint32_t)edits[k].instr);
    if (edits[k].replace) new_n -= dvm_instr_length(f->code.v, (uint32_t)old_n, edits[k].at);
    ninstr += !edits[k].replace;
  }
  int64_t *code = malloc((new_n + 1) * sizeof *code);
  const char **src = malloc((ninstr + 1) * sizeof *src);
  uint32_t *moved = malloc((old_n + 1) * sizeof *moved);
  if (!code || !src || !moved) {
    free(code), free(src), free(moved);
    f->e->oom = 1;
    return;
  }
  size_t w = 0, i = 0;
  int k = 0;
  for (uint32_t pc = 0, len, ii = 0; pc < old_n; pc += len, ii++) {
    if (!(len = dvm_instr_length(f->code.v, (uint32_t)old_n, pc))) break; /* the verifier will say */
    moved[pc] = (uint32_t)w;
    int kept = 1;
    for (; k < n && edits[k].at == pc; k++) {
      uint32_t elen = dvm_instr_length(instrs->v, (uint32_t)instrs->n, (uint32_t)edits[k].instr);
      memcpy(code + w, instrs->v + edits[k].instr, elen * sizeof *code);
      w += elen;
      src[i++] = edits[k].replace ? f->src.v[ii] : f->loc;
      kept &= !edits[k].replace;
    }
    if (kept) {
      memcpy(code + w, f->code.v + pc, len * sizeof *code);
      w += len;
      src[i++] = f->src.v[ii];
    }
  }
  moved[old_n] = (uint32_t)w;
  remapping r = {code, moved};
  for (uint32_t pc = 0; pc < w; pc += dvm_instr_length(code, (uint32_t)w, pc))
    dvm_instr_operands(code, pc, remap_target, &r);
  free(moved);
  free(f->code.v);
  free(f->src.v);
  f->code.v = code, f->code.n = w, f->code.cap = new_n + 1;
  f->src.v = src, f->src.n = i, f->src.cap = ninstr + 1;
}

/* Rotates n items of `size` bytes so that [mid, n) comes before [lo, mid). */
static int rotate(void *base, size_t size, size_t lo, size_t mid, size_t n) {
  char *b = base, *tmp = malloc((mid - lo) * size + 1);
  if (!tmp) return 0;
  memcpy(tmp, b + lo * size, (mid - lo) * size);
  memmove(b + lo * size, b + mid * size, (n - mid) * size);
  memcpy(b + (lo + n - mid) * size, tmp, (mid - lo) * size);
  free(tmp);
  return 1;
}

void dvmc_fn_hoist(dvmc_fn *f, uint32_t at, uint32_t from) {
  uint32_t end = (uint32_t)f->code.n, ia = 0, ifrom = 0, i = 0, len;
  if (at >= from || from >= end) return;
  for (uint32_t pc = 0; pc < end; pc += len, i++) {
    if (pc == at) ia = i;
    if (pc == from) ifrom = i;
    if (!(len = dvm_instr_length(f->code.v, end, pc))) return; /* the verifier will say */
  }
  if (!rotate(f->code.v, sizeof *f->code.v, at, from, end) || !rotate(f->src.v, sizeof *f->src.v, ia, ifrom, i)) {
    f->e->oom = 1;
    return;
  }
  hoisting h = {f->code.v, at, from, end};
  for (uint32_t pc = 0; pc < end; pc += dvm_instr_length(f->code.v, end, pc))
    dvm_instr_operands(f->code.v, pc, move_target, &h);
}

/* Copies a vector into the module's arena. */
static void *to_arena(dvmc_emit *e, const void *v, size_t n, size_t size) {
  if (!n) return NULL;
  void *p = dvm_arena_alloc(&e->m->arena, n, size);
  if (!p) e->oom = 1;
  else memcpy(p, v, n * size);
  return p;
}

bool dvmc_emit_out_of_memory(const dvmc_emit *e) { return e->oom; }

dvm_status *dvmc_emit_finish(dvmc_emit *e, uint8_t **bytes, size_t *size) {
  dvm_module *m = e->m;
  m->nstrings = (uint32_t)e->strings.n;
  m->strings = to_arena(e, e->strings.v, e->strings.n, sizeof(char *));
  m->nconsts = (uint32_t)e->consts.n;
  m->consts = to_arena(e, e->consts.v, e->consts.n, sizeof(dvm_const));
  m->nkernels = (uint32_t)e->kernels.n;
  m->kernels = to_arena(e, e->kernels.v, e->kernels.n, sizeof(dvm_kernel_ref));
  m->nshapefns = (uint32_t)e->shapefns.n;
  m->shapefns = to_arena(e, e->shapefns.v, e->shapefns.n, sizeof(dvm_shapefn_ref));
  m->nfuncs = (uint32_t)e->funcs.n;
  m->funcs = dvm_arena_alloc(&m->arena, e->funcs.n ? e->funcs.n : 1, sizeof(dvm_func));
  if (!m->funcs) e->oom = 1;
  for (size_t i = 0; m->funcs && i < e->funcs.n; i++) {
    const dvmc_fn *f = e->funcs.v[i];
    dvm_func *d = &m->funcs[i];
    d->name = f->name;
    d->nregs = f->nregs;
    d->nparams = (uint32_t)f->params.n;
    d->params = to_arena(e, f->params.v, f->params.n, sizeof(dvm_sig));
    d->nresults = (uint32_t)f->results.n;
    d->results = to_arena(e, f->results.v, f->results.n, sizeof(dvm_sig));
    d->nsyms = (uint32_t)f->syms.n;
    d->syms = to_arena(e, f->syms.v, f->syms.n, sizeof(dvm_sym));
    d->ncode = (uint32_t)f->code.n;
    d->code = to_arena(e, f->code.v, f->code.n, sizeof(int64_t));
    d->src = to_arena(e, f->src.v, f->src.n, sizeof(char *));
    d->ninfo = (uint32_t)f->info.n;
    d->info = to_arena(e, f->info.v, f->info.n, sizeof(dvm_info));
  }
  if (e->oom) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = dvm_verify_module(m);
  if (st) return dvm_status_annotate(st, "internal error: the compiler emitted bytecode the verifier refuses");
  return dvm_bc_write(m, bytes, size);
}
