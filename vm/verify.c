/* The verifier: what it accepts, the interpreter can run without crashing.
 *
 * Per function it decodes every instruction, checks every index operand
 * against its table, every jump target against the instruction starts, the
 * operand counts of calls, returns and host calls against their signatures,
 * and then runs a dataflow pass over the basic blocks that tracks which
 * kinds each register may hold, rejecting reads of registers that may be
 * unset or of the wrong kind. Rules that fail name the function, the
 * instruction and the operand. */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "bytecode.h"
#include "hostfn.h"
#include "instr.h"

#define BIT(k) (1u << (k))
#define K_NONE BIT(DVM_VAL_NONE)
#define K_INT BIT(DVM_VAL_INT)
#define K_FLOAT BIT(DVM_VAL_FLOAT)
#define K_SHAPE BIT(DVM_VAL_SHAPE)
#define K_TENSOR BIT(DVM_VAL_TENSOR)
#define K_STORAGE BIT(DVM_VAL_STORAGE)
#define K_TUPLE BIT(DVM_VAL_TUPLE)
#define K_ANY (K_INT | K_FLOAT | K_SHAPE | K_TENSOR | K_STORAGE | K_TUPLE)
/* A value whose kind only the run time knows (a tuple field, a shape
 * function's result, an "any" parameter): accepted anywhere, because the
 * interpreter checks kinds where it uses them. */
#define K_DYN 0x80u

/* Bounds the dataflow work for hostile inputs: instructions visited. */
#define MAX_VISITS (64u << 20)
/* ... and the memory of its per-block register kinds. */
#define MAX_STATE_BYTES ((uint64_t)256 << 20)

typedef struct {
  const dvm_module *m;
  dvm_func *f;
  uint32_t pc; /* word offset of the instruction being checked */
  uint32_t idx;
} vctx;

static dvm_status *fail(const vctx *v, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *fail(const vctx *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(DVM_CORRUPT, fmt, ap);
  va_end(ap);
  const char *op = v->pc < v->f->ncode && v->f->code[v->pc] >= 0 && v->f->code[v->pc] < DVM_OP_COUNT
                       ? dvm_opinfo_table[v->f->code[v->pc]].name
                       : "?";
  return dvm_status_annotate(st, "function \"%s\", instruction %u (%s)", v->f->name, v->idx, op);
}

/* What a signature entry accepts, and what a value from it may be. */
static unsigned sig_need(const dvm_sig *s) { return s->kind == DVM_VAL_NONE ? K_ANY : BIT(s->kind); }
static unsigned sig_have(const dvm_sig *s) { return s->kind == DVM_VAL_NONE ? K_DYN : BIT(s->kind); }

static dvm_status *check_sig(const dvm_func *f, const dvm_sig *s, const char *what) {
  for (int d = 0; d < s->rank; d++) {
    int64_t dim = s->dims[d];
    /* in int64: dvm_dim_symbol's int would wrap a far symbol into range */
    if (dim < DVM_DIM_ANY && (uint64_t)(-2 - dim) >= f->nsyms)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": %s \"%s\" dim %d names symbol %lld, "
                                         "but there are %u", f->name, what, s->name, d,
                            (long long)(-2 - dim), f->nsyms);
  }
  return NULL;
}

static dvm_status *check_header(const dvm_module *m, dvm_func *f) {
  if (f->nregs > DVM_MAX_REGS)
    return dvm_status_new(DVM_CORRUPT, "function \"%s\": %u registers exceed the limit of %d",
                          f->name, f->nregs, DVM_MAX_REGS);
  if (f->nparams > f->nregs)
    return dvm_status_new(DVM_CORRUPT, "function \"%s\": %u parameters do not fit in %u registers",
                          f->name, f->nparams, f->nregs);
  if (f->nresults > DVM_MAX_LIST)
    return dvm_status_new(DVM_CORRUPT, "function \"%s\": %u results exceed the limit of %d", f->name,
                          f->nresults, DVM_MAX_LIST);
  if (f->ncode == 0 || f->ncode > DVM_MAX_CODE)
    return dvm_status_new(DVM_CORRUPT, "function \"%s\": code of %u words (must be 1..%d)",
                          f->name, f->ncode, DVM_MAX_CODE);
  for (uint32_t s = 0; s < f->nsyms; s++) {
    const dvm_sym *y = &f->syms[s];
    if (y->reg >= f->nregs || y->reg < f->nparams)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": symbol \"%s\" register r%u is not "
                                         "in r%u..r%u", f->name, y->name, y->reg, f->nparams,
                            f->nregs ? f->nregs - 1 : 0);
    if (y->lo < 0 || y->lo > y->hi)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": symbol \"%s\" range %lld..%lld is empty "
                                         "or negative", f->name, y->name, (long long)y->lo,
                            (long long)y->hi);
    for (uint32_t t = 0; t < s; t++)
      if (f->syms[t].reg == y->reg || strcmp(f->syms[t].name, y->name) == 0)
        return dvm_status_new(DVM_CORRUPT, "function \"%s\": symbols \"%s\" and \"%s\" share a "
                                           "name or register", f->name, f->syms[t].name, y->name);
  }
  dvm_status *st;
  for (uint32_t p = 0; p < f->nparams; p++)
    if ((st = check_sig(f, &f->params[p], "parameter"))) return st;
  for (uint32_t p = 0; p < f->nresults; p++)
    if ((st = check_sig(f, &f->results[p], "result"))) return st;
  return NULL;
}

/* Instruction boundaries. */
static dvm_status *decode(dvm_module *m, dvm_func *f) {
  uint32_t n = 0;
  for (uint32_t pc = 0; pc < f->ncode; n++) {
    uint32_t len = dvm_instr_length(f->code, f->ncode, pc);
    if (!len) {
      int64_t op = f->code[pc];
      if (op < 0 || op >= DVM_OP_COUNT)
        return dvm_status_new(DVM_CORRUPT, "function \"%s\", instruction %u: unknown opcode %lld",
                              f->name, n, (long long)op);
      return dvm_status_new(DVM_CORRUPT, "function \"%s\", instruction %u (%s): operands run past "
                                         "the end of the code or a list count is out of range",
                            f->name, n, dvm_opinfo_table[op].name);
    }
    pc += len;
  }
  f->ninstr = n;
  f->starts = dvm_arena_alloc(&m->arena, n, sizeof(uint32_t));
  f->src = f->src ? f->src : dvm_arena_alloc(&m->arena, n, sizeof(char *));
  if (!f->starts || !f->src) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t pc = 0, i = 0; pc < f->ncode; i++) {
    f->starts[i] = pc;
    pc += dvm_instr_length(f->code, f->ncode, pc);
  }
  if (!(dvm_opinfo_table[f->code[f->starts[n - 1]]].flags & DVM_OPF_END))
    return dvm_status_new(DVM_CORRUPT, "function \"%s\": the last instruction (%u, %s) falls "
                                       "through past the end of the code", f->name, n - 1,
                          dvm_opinfo_table[f->code[f->starts[n - 1]]].name);
  uint32_t prev = 0;
  for (uint32_t d = 0; d < f->ndebug; d++) {
    uint32_t ins = f->debug[2 * d], str = f->debug[2 * d + 1];
    if (ins >= n || (d && ins <= prev) || str >= m->nstrings)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": debug entry %u (instruction %u, string "
                                         "%u) is out of range or out of order", f->name, d, ins, str);
    if (!m->strings[str][0]) /* .loc cannot say it */
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": debug entry %u names the empty string",
                            f->name, d);
    f->src[ins] = m->strings[str];
    prev = ins;
  }
  return NULL;
}

static dvm_status *check_index(const vctx *v, char kind, int64_t x, int j) {
  const dvm_module *m = v->m;
  const dvm_func *f = v->f;
  static const struct {
    char letter;
    const char *what;
  } names[] = {{'d', "register"}, {'r', "register"}, {'o', "register"}, {'k', "register"},
               {'c', "constant"}, {'F', "function"}, {'X', "kernel"},  {'Y', "shape function"},
               {'H', "host function"}, {'s', "string"}, {'t', "dtype"}, {'v', "device"},
               {'p', "parameter"}, {'q', "result"}};
  int64_t limit;
  switch (kind) {
  case 'd': case 'r': case 'k': case 'R': case 'D': limit = f->nregs; break;
  case 'o': if (x == -1) return NULL; limit = f->nregs; break;
  case 'c': limit = m->nconsts; break;
  case 'F': limit = m->nfuncs; break;
  case 'X': limit = m->nkernels; break;
  case 'Y': limit = m->nshapefns; break;
  case 'H': limit = m->nhostfns; break;
  case 's': limit = m->nstrings; break;
  case 't': limit = DVM_DTYPE_COUNT; break;
  case 'v': limit = DVM_DEVICE_COUNT; break;
  case 'p': limit = f->nparams; break;
  case 'q': limit = f->nresults; break;
  case 'j':
    if (x < 0 || x >= f->ncode || dvm_func_instr_index(f, (uint32_t)x) < 0)
      return fail(v, "operand %d: jump target %lld is not an instruction of this function", j,
                  (long long)x);
    return NULL;
  default: return NULL; /* immediates */
  }
  if (x < 0 || x >= limit) {
    const char *what = "index";
    char k = kind == 'R' || kind == 'D' ? 'r' : kind;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (names[i].letter == k) what = names[i].what;
    return fail(v, "operand %d: %s %lld out of range (%lld)", j, what, (long long)x,
                (long long)limit);
  }
  return NULL;
}

/* Static checks of one instruction's operands, independent of types. */
static dvm_status *check_operands(vctx *v) {
  const int64_t *c = v->f->code;
  int64_t op = c[v->pc];
  uint32_t w = v->pc + 1;
  int j = 0;
  dvm_status *st;
  for (const char *fmt = dvm_opinfo_table[op].format; *fmt; fmt++, j++) {
    if (dvm_operand_is_list(*fmt)) {
      int64_t n = c[w++];
      for (int64_t i = 0; i < n; i++, w++)
        if ((st = check_index(v, *fmt, c[w], j))) return st;
    } else if ((st = check_index(v, *fmt, c[w++], j))) {
      return st;
    }
  }
  const int64_t *ins = c + v->pc;
  switch (op) {
  case DVM_OP_CALL: {
    dvm_ops_CALL x = dvm_decode_CALL(ins);
    const dvm_func *callee = &v->m->funcs[x.func];
    if (x.dsts.n != callee->nresults || x.args.n != callee->nparams)
      return fail(v, "call of \"%s\" with %lld arguments and %lld results; it takes %u and "
                     "returns %u", callee->name, (long long)x.args.n, (long long)x.dsts.n, callee->nparams,
                  callee->nresults);
    break;
  }
  case DVM_OP_RET: {
    dvm_ops_RET x = dvm_decode_RET(ins);
    if (x.values.n != v->f->nresults)
      return fail(v, "returns %lld values; the function declares %u", (long long)x.values.n,
                  v->f->nresults);
    break;
  }
  case DVM_OP_MAKE_SHAPE: {
    dvm_ops_MAKE_SHAPE x = dvm_decode_MAKE_SHAPE(ins);
    if (x.dims.n > DVM_MAX_RANK) return fail(v, "shape of %lld dims exceeds rank %d", (long long)x.dims.n, DVM_MAX_RANK);
    break;
  }
  case DVM_OP_ALLOC_TENSOR_I: {
    dvm_ops_ALLOC_TENSOR_I x = dvm_decode_ALLOC_TENSOR_I(ins);
    if (x.dims.n > DVM_MAX_RANK) return fail(v, "shape of %lld dims exceeds rank %d", (long long)x.dims.n, DVM_MAX_RANK);
    for (int64_t i = 0; i < x.dims.n; i++)
      if (x.dims.v[i] < 0) return fail(v, "shape dim %lld is negative (%lld)", (long long)i, (long long)x.dims.v[i]);
    break;
  }
  case DVM_OP_ALLOC_STORAGE: {
    dvm_ops_ALLOC_STORAGE x = dvm_decode_ALLOC_STORAGE(ins);
    if (x.align <= 0 || (x.align & (x.align - 1)) || x.align > 256)
      return fail(v, "alignment %lld is not a power of two up to 256", (long long)x.align);
    break;
  }
  case DVM_OP_HOSTCALL: {
    dvm_ops_HOSTCALL x = dvm_decode_HOSTCALL(ins);
    int nargs;
    char args[DVM_HOSTFN_MAX_ARGS], ret;
    const dvm_hostfn_ref *h = &v->m->hostfns[x.fn];
    if ((st = dvm_hostfn_sig_parse(h->sig, &nargs, args, &ret))) { /* a bad file, not a bad call */
      dvm_status *err = fail(v, "host function \"%s\": %s", h->name, dvm_status_message(st));
      dvm_status_free(st);
      return err;
    }
    if (x.args.n != nargs || x.dsts.n != (ret != 'v'))
      return fail(v, "host call of \"%s\" (%s) with %lld arguments and %lld results", h->name,
                  h->sig, (long long)x.args.n, (long long)x.dsts.n);
    break;
  }
  default: break;
  }
  return NULL;
}

/* ---- dataflow over register kinds ---- */

typedef struct {
  vctx *v;
  uint8_t *cur; /* kinds per register at the current instruction */
} tstate;

static dvm_status *need(tstate *t, int j, int64_t r, unsigned mask) {
  unsigned have = t->cur[r];
  if (have & K_NONE)
    return fail(t->v, "operand %d: r%lld may be read before it is set", j, (long long)r);
  if (have & ~mask & ~K_DYN) {
    char buf[128];
    size_t n = 0;
    buf[0] = 0;
    for (int k = 1; k < DVM_KIND_COUNT; k++)
      if (have & ~mask & BIT(k))
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? "/" : "", dvm_kind_name(k));
    return fail(t->v, "operand %d: r%lld may hold a %s where the instruction needs another kind",
                j, (long long)r, buf);
  }
  return NULL;
}

static dvm_status *need_list(tstate *t, int j, dvm_list l, unsigned mask) {
  dvm_status *st;
  for (int64_t i = 0; i < l.n; i++)
    if ((st = need(t, j, l.v[i], mask))) return st;
  return NULL;
}

static void set_list(tstate *t, dvm_list l, unsigned mask) {
  for (int64_t i = 0; i < l.n; i++) t->cur[l.v[i]] = (uint8_t)mask;
}

static unsigned hostfn_mask(char letter) {
  return letter == 'i' ? K_INT : letter == 'f' ? K_FLOAT : K_TENSOR;
}

/* Applies one instruction's type rule to t->cur. */
static dvm_status *step_types(tstate *t) {
  const vctx *v = t->v;
  const int64_t *ins = v->f->code + v->pc;
  uint8_t *cur = t->cur;
  dvm_status *st = NULL;
/* The operands of the instruction, as x. */
#define DECODE(e) dvm_ops_##e x = dvm_decode_##e(ins)
  switch ((dvm_opcode)ins[0]) {
  case DVM_OP_NOP: case DVM_OP_JMP: case DVM_OP_FATAL: break;
  case DVM_OP_MOVE: {
    DECODE(MOVE);
    if (!(st = need(t, 1, x.src, K_ANY))) cur[x.dst] = cur[x.src];
    break;
  }
  case DVM_OP_IMM: cur[dvm_decode_IMM(ins).dst] = K_INT; break;
  case DVM_OP_FIMM: cur[dvm_decode_FIMM(ins).dst] = K_FLOAT; break;
  case DVM_OP_CONST: cur[dvm_decode_CONST(ins).dst] = K_TENSOR; break;
#define ARITH(e)                                                                              \
  case DVM_OP_##e: {                                                                          \
    DECODE(e);                                                                                \
    if (!(st = need(t, 1, x.a, K_INT)) && !(st = need(t, 2, x.b, K_INT))) cur[x.dst] = K_INT; \
    break;                                                                                    \
  }
  ARITH(ADD) ARITH(SUB) ARITH(MUL) ARITH(DIV) ARITH(MOD) ARITH(MIN) ARITH(MAX)
  ARITH(EQ) ARITH(NE) ARITH(LT) ARITH(LE) ARITH(GT) ARITH(GE)
#undef ARITH
  case DVM_OP_NOT: {
    DECODE(NOT);
    if (!(st = need(t, 1, x.a, K_INT))) cur[x.dst] = K_INT;
    break;
  }
  case DVM_OP_JNZ: st = need(t, 0, dvm_decode_JNZ(ins).cond, K_INT); break;
  case DVM_OP_JZ: st = need(t, 0, dvm_decode_JZ(ins).cond, K_INT); break;
  case DVM_OP_CALL: {
    DECODE(CALL);
    const dvm_func *callee = &v->m->funcs[x.func];
    for (int64_t i = 0; i < x.args.n && !st; i++) st = need(t, 2, x.args.v[i], sig_need(&callee->params[i]));
    for (int64_t i = 0; i < x.dsts.n && !st; i++) cur[x.dsts.v[i]] = (uint8_t)sig_have(&callee->results[i]);
    break;
  }
  case DVM_OP_RET: {
    DECODE(RET);
    for (int64_t i = 0; i < x.values.n && !st; i++) st = need(t, 0, x.values.v[i], sig_need(&v->f->results[i]));
    break;
  }
  case DVM_OP_SHAPE_OF: {
    DECODE(SHAPE_OF);
    if (!(st = need(t, 1, x.src, K_TENSOR))) cur[x.dst] = K_SHAPE;
    break;
  }
#define MEASURE(e)                                                             \
  case DVM_OP_##e: {                                                           \
    DECODE(e);                                                                 \
    if (!(st = need(t, 1, x.src, K_TENSOR | K_SHAPE))) cur[x.dst] = K_INT;     \
    break;                                                                     \
  }
  MEASURE(DIM) MEASURE(RANK) MEASURE(NUMEL)
#undef MEASURE
  case DVM_OP_MAKE_SHAPE: {
    DECODE(MAKE_SHAPE);
    if (!(st = need_list(t, 1, x.dims, K_INT))) cur[x.dst] = K_SHAPE;
    break;
  }
  case DVM_OP_RESHAPE: {
    DECODE(RESHAPE);
    if (!(st = need(t, 1, x.src, K_TENSOR)) && !(st = need(t, 2, x.shape, K_SHAPE))) cur[x.dst] = K_TENSOR;
    break;
  }
  case DVM_OP_ALLOC_STORAGE: {
    DECODE(ALLOC_STORAGE);
    if (!(st = need(t, 1, x.bytes, K_INT))) cur[x.dst] = K_STORAGE;
    break;
  }
  case DVM_OP_ALLOC_TENSOR: {
    DECODE(ALLOC_TENSOR);
    if (!(st = need(t, 1, x.storage, K_STORAGE)) && !(st = need(t, 2, x.offset, K_INT)) &&
        !(st = need(t, 4, x.shape, K_SHAPE)))
      cur[x.dst] = K_TENSOR;
    break;
  }
  case DVM_OP_ALLOC_TENSOR_I: {
    DECODE(ALLOC_TENSOR_I);
    if (!(st = need(t, 1, x.storage, K_STORAGE)) && !(st = need(t, 2, x.offset, K_INT))) cur[x.dst] = K_TENSOR;
    break;
  }
  case DVM_OP_ALLOC: {
    DECODE(ALLOC);
    if (!(st = need(t, 2, x.shape, K_SHAPE))) cur[x.dst] = K_TENSOR;
    break;
  }
  case DVM_OP_ALLOC_RESULT: {
    DECODE(ALLOC_RESULT);
    if (!(st = need(t, 2, x.shape, K_SHAPE))) cur[x.dst] = K_TENSOR;
    break;
  }
  case DVM_OP_RELEASE: cur[dvm_decode_RELEASE(ins).reg] = K_NONE; break;
  case DVM_OP_INVOKE: {
    DECODE(INVOKE);
    if (x.variant >= 0) st = need(t, 1, x.variant, K_INT);
    if (!st) st = need_list(t, 2, x.outs, K_TENSOR);
    if (!st) st = need_list(t, 3, x.ins, K_TENSOR);
    if (!st) st = need_list(t, 4, x.attrs, K_INT | K_FLOAT | K_SHAPE);
    break;
  }
  case DVM_OP_SHAPEFN: {
    DECODE(SHAPEFN);
    if (!(st = need_list(t, 2, x.args, K_ANY))) set_list(t, x.dsts, K_DYN);
    break;
  }
  case DVM_OP_HOSTCALL: {
    DECODE(HOSTCALL);
    int nargs;
    char args[DVM_HOSTFN_MAX_ARGS], ret;
    st = dvm_hostfn_sig_parse(v->m->hostfns[x.fn].sig, &nargs, args, &ret); /* checked before */
    for (int i = 0; i < nargs && !st; i++) st = need(t, 2, x.args.v[i], hostfn_mask(args[i]));
    if (!st && x.dsts.n) cur[x.dsts.v[0]] = (uint8_t)hostfn_mask(ret);
    break;
  }
  case DVM_OP_COPY: {
    DECODE(COPY);
    if (!(st = need(t, 1, x.src, K_TENSOR))) cur[x.dst] = K_TENSOR;
    break;
  }
  case DVM_OP_TUPLE: {
    DECODE(TUPLE);
    if (!(st = need_list(t, 1, x.items, K_ANY))) cur[x.dst] = K_TUPLE;
    break;
  }
  case DVM_OP_GET: {
    DECODE(GET);
    if (!(st = need(t, 1, x.tuple, K_TUPLE))) cur[x.dst] = K_DYN;
    break;
  }
  case DVM_OP_LEN: {
    DECODE(LEN);
    if (!(st = need(t, 1, x.tuple, K_TUPLE))) cur[x.dst] = K_INT;
    break;
  }
  case DVM_OP_AT: {
    DECODE(AT);
    if (!(st = need(t, 1, x.tuple, K_TUPLE)) && !(st = need(t, 2, x.index, K_INT))) cur[x.dst] = K_DYN;
    break;
  }
  case DVM_OP_INSERT: {
    DECODE(INSERT);
    if (!(st = need(t, 1, x.tuple, K_TUPLE)) && !(st = need(t, 2, x.index, K_INT)) && !(st = need(t, 3, x.item, K_ANY)))
      cur[x.dst] = K_TUPLE;
    break;
  }
  case DVM_OP_ERASE: {
    DECODE(ERASE);
    if (!(st = need(t, 1, x.tuple, K_TUPLE)) && !(st = need(t, 2, x.index, K_INT))) cur[x.dst] = K_TUPLE;
    break;
  }
  case DVM_OP_GUARD: {
    /* binds the symbols of the parameter's dims; reading them unset is the point */
    DECODE(GUARD);
    const dvm_sig *s = &v->f->params[x.param];
    if (!(st = need(t, 0, x.value, K_ANY)))
      for (int d = 0; d < s->rank; d++) {
        int sym = dvm_dim_symbol(s->dims[d]);
        if (sym >= 0) cur[v->f->syms[sym].reg] = K_INT;
      }
    break;
  }
  case DVM_OP_CHECK: st = need(t, 0, dvm_decode_CHECK(ins).cond, K_INT); break;
  case DVM_OP_CHECK_WITH: {
    DECODE(CHECK_WITH);
    if (!(st = need(t, 0, x.cond, K_INT))) st = need_list(t, 2, x.args, K_INT);
    break;
  }
  case DVM_OP_COUNT: break;
  }
#undef DECODE
  return st;
}

typedef struct {
  uint32_t first, last; /* instruction indices, inclusive */
  uint8_t *in;          /* kinds at entry; NULL until reached */
  int queued;
} block;

static dvm_status *check_types(vctx *v) {
  dvm_func *f = v->f;
  uint32_t n = f->ninstr, nregs = f->nregs;
  uint8_t *leader = calloc(n + 1, 1);
  uint32_t *block_of = malloc(sizeof(uint32_t) * n);
  block *blocks = NULL;
  uint32_t *work = NULL;
  uint8_t *cur = malloc(nregs ? nregs : 1);
  dvm_status *st = NULL;
  if (!leader || !block_of || !cur) goto oom;
  leader[0] = 1;
  for (uint32_t i = 0; i < n; i++) {
    const int64_t *c = f->code + f->starts[i];
    unsigned flags = dvm_opinfo_table[c[0]].flags;
    if (flags & DVM_OPF_JUMP) {
      leader[dvm_func_instr_index(f, (uint32_t)dvm_instr_jump_target(f->code, f->starts[i]))] = 1;
    }
    if (flags & (DVM_OPF_JUMP | DVM_OPF_END)) leader[i + 1] = 1;
  }
  uint32_t nb = 0;
  for (uint32_t i = 0; i < n; i++) nb += leader[i];
  /* one kind byte per register per block: bounded, so a small hostile file
   * cannot make the verifier take gigabytes */
  if ((uint64_t)nb * nregs > MAX_STATE_BYTES) {
    v->idx = 0;
    v->pc = 0;
    st = fail(v, "function too complex to verify (%u blocks x %u registers)", nb, nregs);
    goto done;
  }
  blocks = calloc(nb, sizeof *blocks);
  work = malloc(sizeof(uint32_t) * nb);
  if (!blocks || !work) goto oom;
  for (uint32_t i = 0, b = 0; i < n; i++) {
    if (leader[i]) blocks[b++].first = i;
    block_of[i] = b - 1;
    blocks[b - 1].last = i;
  }
  blocks[0].in = calloc(nregs ? nregs : 1, 1);
  if (!blocks[0].in) goto oom;
  for (uint32_t r = 0; r < nregs; r++)
    blocks[0].in[r] = r < f->nparams ? (uint8_t)sig_have(&f->params[r]) : K_NONE;
  uint32_t nwork = 0;
  work[nwork++] = 0;
  blocks[0].queued = 1;
  uint64_t visits = 0;
  tstate t = {v, cur};
  while (nwork && !st) {
    block *b = &blocks[work[--nwork]];
    b->queued = 0;
    memcpy(cur, b->in, nregs);
    uint32_t i;
    for (i = b->first; i <= b->last && !st; i++) {
      v->idx = i;
      v->pc = f->starts[i];
      if (++visits > MAX_VISITS) {
        st = fail(v, "function too complex to verify");
        break;
      }
      st = step_types(&t);
    }
    if (st) break;
    /* successors: the jump target and the fall-through */
    const int64_t *c = f->code + f->starts[b->last];
    unsigned flags = dvm_opinfo_table[c[0]].flags;
    uint32_t succ[2];
    int ns = 0;
    if (flags & DVM_OPF_JUMP)
      succ[ns++] = block_of[dvm_func_instr_index(f, (uint32_t)dvm_instr_jump_target(f->code, f->starts[b->last]))];
    if (!(flags & DVM_OPF_END) && b->last + 1 < n) succ[ns++] = block_of[b->last + 1];
    for (int s = 0; s < ns; s++) {
      block *sb = &blocks[succ[s]];
      int changed = 0;
      if (!sb->in) {
        sb->in = malloc(nregs ? nregs : 1);
        if (!sb->in) goto oom;
        memcpy(sb->in, cur, nregs);
        changed = 1;
      } else {
        for (uint32_t r = 0; r < nregs; r++)
          if ((sb->in[r] | cur[r]) != sb->in[r]) {
            sb->in[r] |= cur[r];
            changed = 1;
          }
      }
      if (changed && !sb->queued) {
        sb->queued = 1;
        work[nwork++] = succ[s];
      }
    }
  }
  goto done;
oom:
  st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
done:
  if (blocks)
    for (uint32_t b = 0; b < nb; b++) free(blocks[b].in);
  free(blocks);
  free(work);
  free(leader);
  free(block_of);
  free(cur);
  return st;
}

/* Info "maps": result indices, each once, separated by a space. */
static dvm_status *check_maps(const dvm_func *f, const char *p) {
  uint64_t seen[4] = {0};
  while (*p) {
    char *end;
    unsigned long r = strtoul(p, &end, 10);
    if (end == p || *p < '0' || *p > '9' || r >= f->nresults || r >= 256 || seen[r / 64] >> (r % 64) & 1 ||
        (*end && (*end != ' ' || !end[1])))
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": info \"maps\" is not a list of its result indices",
                            f->name);
    seen[r / 64] |= 1ull << (r % 64);
    p = *end ? end + 1 : end;
  }
  return NULL;
}

/* Info (section 1.1): "peak" and "peak_bound" (1.3), formulas of
 * integers, the function's symbols, + - * ^ ( ) , and floordiv, mod, min,
 * max (tools evaluate them, so what they name must exist), "unplanned", the count of tensors the
 * formula leaves out (the same rules hold it), and "maps" (check_maps). */
static dvm_status *check_info(const dvm_func *f) {
  static const char ident[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";
  static const char *const fns[] = {"floordiv", "mod", "min", "max"};
  for (uint32_t i = 0; i < f->ninfo; i++) {
    const char *key = f->info[i].key, *p = f->info[i].value;
    size_t len = strlen(p), ok = 0;
    if (!strcmp(key, "maps")) {
      dvm_status *st = check_maps(f, p);
      if (st) return st;
      continue;
    }
    if (strcmp(key, "peak") != 0 && strcmp(key, "peak_bound") != 0 && strcmp(key, "unplanned") != 0)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": info \"%s\" is not a known key (peak, peak_bound, unplanned, "
                            "maps)", f->name, key);
    if (len > DVM_MAX_LIST)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": info \"%s\" exceeds %d bytes", f->name, key, DVM_MAX_LIST);
    while (ok < len && (strchr(ident, p[ok]) || strchr(" +-*^(),", p[ok]))) ok++;
    if (ok < len)
      return dvm_status_new(DVM_CORRUPT, "function \"%s\": info \"%s\": character 0x%02x is not part of a formula",
                            f->name, key, (unsigned char)p[ok]);
    for (size_t n; *p; p += n ? n : 1) {
      n = strspn(p, ident);
      int known = !n || (*p >= '0' && *p <= '9');
      for (uint32_t s = 0; s < f->nsyms && !known; s++)
        known = strlen(f->syms[s].name) == n && strncmp(f->syms[s].name, p, n) == 0;
      for (int k = 0; k < 4 && !known; k++) known = strlen(fns[k]) == n && strncmp(fns[k], p, n) == 0;
      if (!known)
        return dvm_status_new(DVM_CORRUPT, "function \"%s\": info \"%s\" names \"%.*s\", not a symbol of the function",
                              f->name, key, (int)n, p);
    }
  }
  return NULL;
}

static dvm_status *verify_func(dvm_module *m, dvm_func *f) {
  dvm_status *st;
  if ((st = check_header(m, f)) || (st = check_info(f)) || (st = decode(m, f))) return st;
  vctx v = {m, f, 0, 0};
  for (uint32_t i = 0; i < f->ninstr; i++) {
    v.idx = i;
    v.pc = f->starts[i];
    if ((st = check_operands(&v))) return st;
  }
  return check_types(&v);
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names within each table must be unique: the text form and the API find
 * things by name. Sorting keeps this n log n for hostile counts. */
static dvm_status *check_unique(const void *table, uint32_t n, size_t stride, const char *what) {
  const char **names = malloc(sizeof(char *) * (n ? n : 1));
  if (!names) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < n; i++)
    names[i] = *(const char *const *)((const char *)table + (size_t)i * stride);
  qsort(names, n, sizeof(char *), cmp_names);
  dvm_status *st = NULL;
  for (uint32_t i = 1; i < n && !st; i++)
    if (strcmp(names[i - 1], names[i]) == 0)
      st = dvm_status_new(DVM_CORRUPT, "two %s are named \"%s\"", what, names[i]);
  free(names);
  return st;
}

/* Each table's entries start with their name. */
static dvm_status *check_names(const dvm_module *m) {
  dvm_status *st;
  if ((st = check_unique(m->funcs, m->nfuncs, sizeof(dvm_func), "functions")) ||
      (st = check_unique(m->consts, m->nconsts, sizeof(dvm_const), "constants")) ||
      (st = check_unique(m->kernels, m->nkernels, sizeof(dvm_kernel_ref), "kernels")) ||
      (st = check_unique(m->shapefns, m->nshapefns, sizeof(dvm_shapefn_ref), "shape functions")) ||
      (st = check_unique(m->hostfns, m->nhostfns, sizeof(dvm_hostfn_ref), "host functions")))
    return st;
  return NULL;
}

dvm_status *dvm_verify_module(dvm_module *m) {
  dvm_status *st = check_names(m);
  if (st) return st;
  for (uint32_t i = 0; i < m->nfuncs; i++)
    if ((st = verify_func(m, &m->funcs[i]))) return st;
  return NULL;
}
