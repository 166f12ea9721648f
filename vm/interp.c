/* The interpreter loop.
 *
 * Verified code is trusted for everything static (indices, jump targets,
 * operand counts); what is dynamic is checked here: value kinds where the
 * verifier could only say "any", shapes, sizes, computed indices, integer
 * overflow. Every failure goes to one exit that names the function, the
 * instruction and its source node, and unwinds the frames.
 *
 * Dispatch is computed goto, or a plain switch with -Ddispatch=switch; the
 * CASE and NEXT macros hide which. */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "hostfn.h"
#include "opcode.h"
#include "vmimpl.h"

#define MAX_KERNEL_ARGS 256

#if defined(__GNUC__) && !defined(DVM_DISPATCH_SWITCH)
#define DVM_COMPUTED_GOTO 1
#endif

/* Drops a register's value; scalars and shapes need no call. */
static inline void reg_clear(dvm_value *v) {
  if (v->kind >= DVM_VAL_TENSOR) dvm_value_clear(v);
  v->kind = DVM_VAL_NONE;
}

static inline void reg_set_int(dvm_value *v, int64_t i) {
  reg_clear(v);
  v->kind = DVM_VAL_INT;
  v->u.i = i;
}

/* Stores an owned value. */
static inline void reg_put(dvm_value *v, dvm_value x) {
  reg_clear(v);
  *v = x;
}

static dvm_status *kind_error(int operand, int64_t reg, const dvm_value *v, dvm_kind want) {
  return dvm_status_new(DVM_INVALID_ARGUMENT, "operand %d: r%lld holds %s, expected %s", operand,
                        (long long)reg, dvm_kind_name((dvm_kind)v->kind), dvm_kind_name(want));
}

/* check_with's failure: the message with each "{}" replaced by the next
 * int of the register list (count, then registers). */
static dvm_status *check_message(const char *fmt, const dvm_value *R, const int64_t *list) {
  char buf[2048];
  size_t n = 0;
  int64_t next = 0;
  for (int64_t i = 0; i < list[0]; i++)
    if (R[list[1 + i]].kind != DVM_VAL_INT) return kind_error(2, list[1 + i], &R[list[1 + i]], DVM_VAL_INT);
  for (const char *p = fmt; *p && n < sizeof buf - 1; p++) {
    if (p[0] == '{' && p[1] == '}' && next < list[0]) {
      int w = snprintf(buf + n, sizeof buf - n, "%lld", (long long)R[list[1 + next++]].u.i);
      n = w > 0 && (size_t)w < sizeof buf - n ? n + (size_t)w : sizeof buf - 1;
      p++;
    } else {
      buf[n++] = *p;
    }
  }
  buf[n] = 0;
  return dvm_status_new(DVM_FAILED_PRECONDITION, "%s", buf);
}

static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t floormod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
  dvm_shape_format(buf, n, DVM_DTYPE_COUNT, rank, dims);
}

/* The dims of a tensor or shape value. */
static inline const int64_t *dims_of(const dvm_value *v, int *rank) {
  if (v->kind == DVM_VAL_TENSOR) {
    *rank = v->u.tensor->rank;
    return v->u.tensor->dims;
  }
  *rank = v->rank;
  return v->u.dims;
}

/* Whether every item of t, at any depth, is a tensor of dtype dt or a
 * tuple of such (tuples nest at most DVM_MAX_TUPLE_DEPTH deep). */
static bool items_of_dtype(const dvm_tuple *t, int dt) {
  for (int i = 0; i < t->n; i++) {
    const dvm_value *v = &t->items[i];
    if (v->kind == DVM_VAL_TUPLE ? !items_of_dtype(v->u.tuple, dt)
                                 : v->kind != DVM_VAL_TENSOR || v->u.tensor->dtype != dt)
      return false;
  }
  return true;
}

static dvm_status *guard(dvm_vm *vm, const dvm_func *f, dvm_value *R, const dvm_value *v, int64_t p) {
  const dvm_sig *s = &f->params[p];
  if (s->kind != DVM_VAL_NONE && v->kind != s->kind)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": expected %s, got %s", s->name,
                          dvm_kind_name((dvm_kind)s->kind), dvm_kind_name((dvm_kind)v->kind));
  if (dvm_sig_item_dtype(s) >= 0 && !items_of_dtype(v->u.tuple, dvm_sig_item_dtype(s)))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": every item must be a %s tensor (or a tuple of them)",
                          s->name, dvm_dtype_name((dvm_dtype)dvm_sig_item_dtype(s)));
  if (v->kind != DVM_VAL_TENSOR && v->kind != DVM_VAL_SHAPE) return NULL;
  int rank;
  const int64_t *dims = dims_of(v, &rank);
  char buf[160];
  if (v->kind == DVM_VAL_TENSOR && s->kind == DVM_VAL_TENSOR && v->u.tensor->dtype != s->dtype)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": dtype must be %s, got %s", s->name,
                          dvm_dtype_name((dvm_dtype)s->dtype),
                          dvm_dtype_name((dvm_dtype)v->u.tensor->dtype));
  if (s->rank < 0) return NULL;
  if (rank != s->rank) {
    shape_str(buf, sizeof buf, rank, dims);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\": rank must be %d, got %d (shape %s)",
                          s->name, s->rank, rank, buf);
  }
  for (int d = 0; d < rank; d++) { /* tensors and shapes alike */
    int64_t want = s->dims[d], got = dims[d];
    int64_t sym = dvm_dim_symbol(want);
    if (sym < 0) {
      if (want >= 0 && got != want)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" dim %d must be %lld, got %lld",
                              s->name, d, (long long)want, (long long)got);
      continue;
    }
    const dvm_sym *y = &f->syms[sym];
    dvm_value *bound = &R[y->reg];
    if (bound->kind == DVM_VAL_INT) {
      if (bound->u.i != got)
        return dvm_status_new(DVM_INVALID_ARGUMENT,
                              "input \"%s\" dim %d (%s) must be %lld, the value of %s bound by an "
                              "earlier input, got %lld", s->name, d, y->name,
                              (long long)bound->u.i, y->name, (long long)got);
      continue;
    }
    if (got < y->lo || got > y->hi)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" dim %d (%s) must be %s %lld, got %lld",
                            s->name, d, y->name, got < y->lo ? ">=" : "<=",
                            (long long)(got < y->lo ? y->lo : y->hi), (long long)got);
    reg_set_int(bound, got);
  }
  (void)vm;
  return NULL;
}

static dvm_status *scratch_reserve(dvm_vm *vm, size_t n) {
  if (n <= vm->scratch_cap) return NULL;
  dvm_value *s = realloc(vm->scratch, n * sizeof *s);
  if (!s) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  vm->scratch = s;
  vm->scratch_cap = n;
  return NULL;
}

static dvm_status *do_invoke(dvm_vm *vm, const dvm_kernel_ref *k, dvm_value *R, const int64_t *o) {
  const int64_t *outs = o + 2, *ins = outs + 1 + outs[0], *attrs = ins + 1 + ins[0];
  dvm_tensor *tin[MAX_KERNEL_ARGS], *tout[MAX_KERNEL_ARGS];
  if (ins[0] > MAX_KERNEL_ARGS || outs[0] > MAX_KERNEL_ARGS || attrs[0] > MAX_KERNEL_ARGS)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\": more than %d operands", k->name,
                          MAX_KERNEL_ARGS);
  int64_t variant = 0;
  if (o[1] >= 0) {
    if (R[o[1]].kind != DVM_VAL_INT) return kind_error(1, o[1], &R[o[1]], DVM_VAL_INT);
    variant = R[o[1]].u.i;
    if (variant < 0 || variant >= k->nvariants)
      return dvm_status_new(DVM_OUT_OF_RANGE, "kernel \"%s\": variant %lld of %u", k->name,
                            (long long)variant, k->nvariants);
  }
  for (int64_t i = 0; i < outs[0]; i++) {
    if (R[outs[1 + i]].kind != DVM_VAL_TENSOR) return kind_error(2, outs[1 + i], &R[outs[1 + i]], DVM_VAL_TENSOR);
    tout[i] = R[outs[1 + i]].u.tensor;
    /* constants are the module's, shared by every VM, and may be mapped
     * read-only: a kernel never writes them (views of them included) */
    if (tout[i]->storage == vm->m->data)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\": output r%lld is a module constant",
                            k->name, (long long)outs[1 + i]);
  }
  for (int64_t i = 0; i < ins[0]; i++) {
    if (R[ins[1 + i]].kind != DVM_VAL_TENSOR) return kind_error(3, ins[1 + i], &R[ins[1 + i]], DVM_VAL_TENSOR);
    tin[i] = R[ins[1 + i]].u.tensor;
  }
  dvm_status *st = scratch_reserve(vm, (size_t)attrs[0]);
  if (st) return st;
  for (int64_t i = 0; i < attrs[0]; i++) vm->scratch[i] = R[attrs[1 + i]]; /* borrowed */
  dvm_kernel_args a = {tin, (int)ins[0], tout, (int)outs[0], vm->scratch, (int)attrs[0],
                       variant, k->payload, k->payload_size, &vm->exec};
  vm->stats.kernel_calls++;
  dvm_stream *s;
  if (!(st = dvm_vm_stream(vm, k->def->device, &s))) st = s->dev->launch(s, k->def, &a);
  return dvm_status_annotate(st, "kernel \"%s\"", k->name);
}

static dvm_status *do_shapefn(dvm_vm *vm, const dvm_shapefn_ref *sf, dvm_value *R, const int64_t *o) {
  const int64_t *dl = o + 1, *rl = dl + 1 + dl[0];
  dvm_status *st = scratch_reserve(vm, (size_t)(dl[0] + rl[0]));
  if (st) return st;
  dvm_value *in = vm->scratch, *out = vm->scratch + rl[0];
  for (int64_t i = 0; i < rl[0]; i++) in[i] = R[rl[1 + i]]; /* borrowed */
  for (int64_t i = 0; i < dl[0]; i++) out[i].kind = DVM_VAL_NONE;
  st = sf->def->fn(in, (int)rl[0], out, (int)dl[0]);
  if (!st)
    for (int64_t i = 0; i < dl[0]; i++)
      if (out[i].kind == DVM_VAL_NONE)
        st = dvm_status_new(DVM_INTERNAL, "result %lld was not set", (long long)i);
  if (st) {
    for (int64_t i = 0; i < dl[0]; i++) dvm_value_clear(&out[i]);
    return dvm_status_annotate(st, "shape function \"%s\"", sf->name);
  }
  for (int64_t i = 0; i < dl[0]; i++) reg_put(&R[dl[1 + i]], out[i]);
  return NULL;
}

static dvm_status *do_alloc(dvm_vm *vm, dvm_device_kind dev, dvm_dtype dt, int rank,
                            const int64_t *dims, dvm_value *dst) {
  int64_t n;
  size_t bytes;
  dvm_status *st = dvm_shape_numel(rank, dims, &n);
  if (st) return st;
  if (dvm_mul_overflows((size_t)n, dvm_dtype_size(dt), &bytes))
    return dvm_status_new(DVM_OUT_OF_RANGE, "tensor byte size overflows");
  dvm_pool *p;
  dvm_storage *s;
  if ((st = dvm_vm_pool(vm, dev, &p)) || (st = dvm_pool_alloc(p, bytes, 64, &s))) return st;
  dvm_tensor *t;
  st = dvm_tensor_view(s, 0, dt, rank, dims, &t);
  dvm_storage_release(s);
  if (st) return st;
  reg_put(dst, (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
  return NULL;
}

/* A tensor already on `dev` is shared, not copied (the functions of a
 * device copy every input to it, wherever it is), and so is a module
 * constant's device copy after its first upload. A copy runs on the VM's
 * stream of the device that is not the host (dev's, when neither is); one
 * to the host waits for it (a counted host sync). */
dvm_status *dvm_vm_copy(dvm_vm *vm, dvm_tensor *src, dvm_device_kind dev, dvm_value *dst) {
  dvm_device_kind sdev = (dvm_device_kind)src->storage->device;
  int constant = dev != DVM_DEVICE_CPU && src->storage == vm->m->data;
  dvm_tensor *same = sdev == dev ? src : NULL;
  if (!same && constant) same = dvm_constcopy_find(&vm->consts[dev], src);
  if (same) {
    dvm_tensor_retain(same);
    reg_put(dst, (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = same});
    return NULL;
  }
  dvm_value tmp = {0};
  dvm_status *st = do_alloc(vm, dev, (dvm_dtype)src->dtype, src->rank, src->dims, &tmp);
  if (st) return st;
  dvm_stream *s;
  void *to = dvm_tensor_ptr(tmp.u.tensor);
  size_t n = dvm_tensor_nbytes(src);
  if (!(st = dvm_vm_stream(vm, dev == DVM_DEVICE_CPU ? sdev : dev, &s)))
    st = s->dev->stream_copy(s, to, dev, dvm_tensor_ptr(src), sdev, n);
  if (!st && constant) st = dvm_constcopy_add(&vm->consts[dev], src, tmp.u.tensor);
  if (st) {
    dvm_value_clear(&tmp);
    return st;
  }
  reg_put(dst, tmp);
  return NULL;
}

/* Hands the returning frame's results to the caller (or to the API's
 * result array) and pops the frame. The two register ranges are disjoint, so
 * each result is retained into its destination before the frame is cleared;
 * the same register may be returned twice. */
static void do_return(dvm_vm *vm, const int64_t *list) {
  dvm_frame *fr = &vm->frames[vm->nframes - 1];
  dvm_value *R = vm->regs + fr->base;
  dvm_value *caller = fr->dsts ? vm->regs + vm->frames[vm->nframes - 2].base : NULL;
  for (int64_t i = 0; i < list[0]; i++) {
    dvm_value v = R[list[1 + i]];
    dvm_value_retain(&v);
    reg_put(caller ? &caller[fr->dsts[1 + i]] : &vm->results[i], v);
  }
  uint32_t nregs = vm->m->funcs[fr->func].nregs;
  for (uint32_t r = 0; r < nregs; r++) reg_clear(&R[r]);
  vm->nframes--;
}

void dvm_interp_unwind(dvm_vm *vm, int stop) {
  while (vm->nframes > stop) {
    dvm_frame *fr = &vm->frames[vm->nframes - 1];
    dvm_value *R = vm->regs + fr->base;
    for (uint32_t r = 0; r < vm->m->funcs[fr->func].nregs; r++) reg_clear(&R[r]);
    vm->nframes--;
  }
}

dvm_status *dvm_interp_run(dvm_vm *vm, int stop, uint64_t budget) {
  const dvm_module *m = vm->m;
  dvm_frame *fr;
  const dvm_func *fn;
  const int64_t *code;
  dvm_value *R;
  uint32_t pc;
  const int64_t *o;
  dvm_status *st = NULL;
  /* steps: instructions executed by this call; the step limit counts the
   * whole invocation, across pauses */
  uint64_t steps = 0, limit = vm->opts.step_limit, before = vm->inv_steps;

#define LOAD_FRAME()                        \
  do {                                      \
    fr = &vm->frames[vm->nframes - 1];      \
    fn = &m->funcs[fr->func];               \
    code = fn->code;                        \
    R = vm->regs + fr->base;                \
    pc = fr->pc;                            \
  } while (0)
#define SAVE_PC() (fr->pc = pc)
#define FAIL(s)  \
  do {           \
    st = (s);    \
    goto fail;   \
  } while (0)
#define TRY(e)                  \
  do {                          \
    if ((st = (e))) goto fail;  \
  } while (0)
#define NEED(j, kind_)                                                    \
  do {                                                                    \
    if (R[o[j]].kind != (kind_)) FAIL(kind_error(j, o[j], &R[o[j]], kind_)); \
  } while (0)
/* Taken jumps backwards and calls are where long programs can be stopped. */
#define POLL()                                                                           \
  do {                                                                                   \
    if (atomic_load_explicit(&vm->interrupt, memory_order_relaxed))                      \
      FAIL(dvm_status_new(DVM_INTERRUPTED, "interrupted"));                              \
    if (limit && before + steps > limit)                                                 \
      FAIL(dvm_status_new(DVM_RESOURCE_EXHAUSTED, "step limit of %llu instructions reached", \
                          (unsigned long long)limit));                                   \
  } while (0)
#define JUMP_TO(t)            \
  do {                        \
    uint32_t t_ = (uint32_t)(t); \
    if (t_ <= pc) POLL();     \
    pc = t_;                  \
  } while (0)

#ifdef DVM_COMPUTED_GOTO
  static void *const labels[DVM_OP_COUNT] = {
#define X(e, name, fmt, flags, syn) &&L_##e,
#include "opcodes.def"
#undef X
  };
#define CASE(e) L_##e:
#define NEXT()                       \
  do {                               \
    if (steps >= budget) goto pause; \
    steps++;                         \
    o = code + pc + 1;               \
    goto *labels[code[pc]];          \
  } while (0)
#else
#define CASE(e) case DVM_OP_##e:
#define NEXT() continue /* the loop head counts and checks the budget */
#endif

  vm->paused = 0;
  LOAD_FRAME();
#ifdef DVM_COMPUTED_GOTO
  NEXT();
#else
  for (;;) {
    if (steps >= budget) goto pause;
    steps++;
    o = code + pc + 1;
    switch ((dvm_opcode)code[pc]) {
#endif

  CASE(NOP) { pc += 1; NEXT(); }
  CASE(MOVE) {
    if (R[o[1]].kind == DVM_VAL_NONE) FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "r%lld is empty", (long long)o[1]));
    if (o[0] != o[1]) {
      dvm_value_retain(&R[o[1]]);
      reg_put(&R[o[0]], R[o[1]]);
    }
    pc += 3;
    NEXT();
  }
  CASE(IMM) { reg_set_int(&R[o[0]], o[1]); pc += 3; NEXT(); }
  CASE(FIMM) {
    double f;
    memcpy(&f, &o[1], sizeof f);
    reg_clear(&R[o[0]]);
    R[o[0]].kind = DVM_VAL_FLOAT;
    R[o[0]].u.f = f;
    pc += 3;
    NEXT();
  }
  CASE(CONST) {
    dvm_tensor *t = m->consts[o[1]].tensor;
    dvm_tensor_retain(t);
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    pc += 3;
    NEXT();
  }

#define ARITH(e, expr)                                  \
  CASE(e) {                                             \
    NEED(1, DVM_VAL_INT);                               \
    NEED(2, DVM_VAL_INT);                               \
    int64_t a = R[o[1]].u.i, b = R[o[2]].u.i, r;        \
    expr;                                               \
    reg_set_int(&R[o[0]], r);                           \
    pc += 4;                                            \
    NEXT();                                             \
  }
#define OVERFLOW(name) \
  FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "%s of %lld and %lld overflows int64", name, (long long)a, (long long)b))
  ARITH(ADD, if (__builtin_add_overflow(a, b, &r)) OVERFLOW("sum"))
  ARITH(SUB, if (__builtin_sub_overflow(a, b, &r)) OVERFLOW("difference"))
  ARITH(MUL, if (__builtin_mul_overflow(a, b, &r)) OVERFLOW("product"))
  ARITH(DIV, if (b == 0) FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "division of %lld by zero", (long long)a));
             if (a == INT64_MIN && b == -1) OVERFLOW("quotient"); r = floordiv(a, b))
  ARITH(MOD, if (b == 0) FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "%lld modulo zero", (long long)a));
             r = b == -1 ? 0 : floormod(a, b))
  ARITH(MIN, r = a < b ? a : b)
  ARITH(MAX, r = a > b ? a : b)
  ARITH(EQ, r = a == b)
  ARITH(NE, r = a != b)
  ARITH(LT, r = a < b)
  ARITH(LE, r = a <= b)
  ARITH(GT, r = a > b)
  ARITH(GE, r = a >= b)
#undef ARITH
#undef OVERFLOW
  CASE(NOT) {
    NEED(1, DVM_VAL_INT);
    reg_set_int(&R[o[0]], !R[o[1]].u.i);
    pc += 3;
    NEXT();
  }
  CASE(JMP) { JUMP_TO(o[0]); NEXT(); }
  CASE(JNZ) {
    NEED(0, DVM_VAL_INT);
    if (R[o[0]].u.i) JUMP_TO(o[1]);
    else pc += 3;
    NEXT();
  }
  CASE(JZ) {
    NEED(0, DVM_VAL_INT);
    if (!R[o[0]].u.i) JUMP_TO(o[1]);
    else pc += 3;
    NEXT();
  }
  CASE(CALL) {
    POLL();
    const int64_t *dl = o + 1, *rl = dl + 1 + dl[0];
    SAVE_PC();
    TRY(dvm_vm_push_frame(vm, (uint32_t)o[0], dl));
    dvm_value *caller = vm->regs + vm->frames[vm->nframes - 2].base;
    dvm_value *callee = vm->regs + vm->frames[vm->nframes - 1].base;
    for (int64_t i = 0; i < rl[0]; i++) {
      callee[i] = caller[rl[1 + i]];
      dvm_value_retain(&callee[i]);
    }
    /* the caller resumes after the call */
    vm->frames[vm->nframes - 2].pc = (uint32_t)(rl + 1 + rl[0] - code);
    LOAD_FRAME();
    NEXT();
  }
  CASE(RET) {
    do_return(vm, o);
    if (vm->nframes <= stop) goto done;
    LOAD_FRAME();
    NEXT();
  }
  CASE(SHAPE_OF) {
    NEED(1, DVM_VAL_TENSOR);
    const dvm_tensor *t = R[o[1]].u.tensor;
    dvm_value v = {.kind = DVM_VAL_SHAPE, .rank = t->rank};
    memcpy(v.u.dims, t->dims, sizeof(int64_t) * t->rank);
    reg_put(&R[o[0]], v);
    pc += 3;
    NEXT();
  }
  CASE(DIM) {
    uint8_t k = R[o[1]].kind;
    if (k != DVM_VAL_TENSOR && k != DVM_VAL_SHAPE) FAIL(kind_error(1, o[1], &R[o[1]], DVM_VAL_TENSOR));
    int rank;
    const int64_t *dims = dims_of(&R[o[1]], &rank);
    int64_t axis = o[2] < 0 ? o[2] + rank : o[2];
    if (axis < 0 || axis >= rank)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "axis %lld is out of range for rank %d", (long long)o[2], rank));
    reg_set_int(&R[o[0]], dims[axis]);
    pc += 4;
    NEXT();
  }
  CASE(RANK) {
    uint8_t k = R[o[1]].kind;
    if (k != DVM_VAL_TENSOR && k != DVM_VAL_SHAPE) FAIL(kind_error(1, o[1], &R[o[1]], DVM_VAL_TENSOR));
    int rank;
    dims_of(&R[o[1]], &rank);
    reg_set_int(&R[o[0]], rank);
    pc += 3;
    NEXT();
  }
  CASE(NUMEL) {
    uint8_t k = R[o[1]].kind;
    if (k != DVM_VAL_TENSOR && k != DVM_VAL_SHAPE) FAIL(kind_error(1, o[1], &R[o[1]], DVM_VAL_TENSOR));
    int rank;
    const int64_t *dims = dims_of(&R[o[1]], &rank);
    int64_t n;
    TRY(dvm_shape_numel(rank, dims, &n));
    reg_set_int(&R[o[0]], n);
    pc += 3;
    NEXT();
  }
  CASE(MAKE_SHAPE) {
    dvm_value v = {.kind = DVM_VAL_SHAPE, .rank = (uint8_t)o[1]};
    for (int64_t i = 0; i < o[1]; i++) {
      const dvm_value *x = &R[o[2 + i]];
      if (x->kind != DVM_VAL_INT) FAIL(kind_error(1, o[2 + i], x, DVM_VAL_INT));
      v.u.dims[i] = x->u.i; /* any ints (axes, pads); uses as dims check them */
    }
    reg_put(&R[o[0]], v);
    pc += 3 + (uint32_t)o[1];
    NEXT();
  }
  CASE(RESHAPE) {
    NEED(1, DVM_VAL_TENSOR);
    NEED(2, DVM_VAL_SHAPE);
    dvm_tensor *t = R[o[1]].u.tensor, *v;
    const dvm_value *s = &R[o[2]];
    int64_t n;
    TRY(dvm_shape_numel(s->rank, s->u.dims, &n));
    if (n != dvm_tensor_numel(t)) {
      char a[160], b[160];
      dvm_shape_format(a, sizeof a, (dvm_dtype)t->dtype, t->rank, t->dims);
      shape_str(b, sizeof b, s->rank, s->u.dims);
      FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "cannot reshape %s (%lld elements) to %s (%lld)", a,
                          (long long)dvm_tensor_numel(t), b, (long long)n));
    }
    TRY(dvm_tensor_view(t->storage, t->offset, (dvm_dtype)t->dtype, s->rank, s->u.dims, &v));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = v});
    pc += 4;
    NEXT();
  }
  CASE(ALLOC_STORAGE) {
    NEED(1, DVM_VAL_INT);
    if (R[o[1]].u.i < 0)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "storage size %lld is negative", (long long)R[o[1]].u.i));
    dvm_pool *p;
    dvm_storage *s;
    TRY(dvm_vm_pool(vm, (dvm_device_kind)o[2], &p));
    TRY(dvm_pool_alloc(p, (size_t)R[o[1]].u.i, (size_t)o[3], &s));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_STORAGE, .u.storage = s});
    pc += 5;
    NEXT();
  }
  CASE(ALLOC_TENSOR) {
    NEED(1, DVM_VAL_STORAGE);
    NEED(2, DVM_VAL_INT);
    NEED(4, DVM_VAL_SHAPE);
    if (R[o[2]].u.i < 0)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "tensor offset %lld is negative", (long long)R[o[2]].u.i));
    dvm_tensor *t;
    TRY(dvm_tensor_view(R[o[1]].u.storage, (size_t)R[o[2]].u.i, (dvm_dtype)o[3], R[o[4]].rank,
                        R[o[4]].u.dims, &t));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    pc += 6;
    NEXT();
  }
  CASE(ALLOC_TENSOR_I) {
    NEED(1, DVM_VAL_STORAGE);
    NEED(2, DVM_VAL_INT);
    if (R[o[2]].u.i < 0)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "tensor offset %lld is negative", (long long)R[o[2]].u.i));
    dvm_tensor *t;
    TRY(dvm_tensor_view(R[o[1]].u.storage, (size_t)R[o[2]].u.i, (dvm_dtype)o[3], (int)o[4], o + 5, &t));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    pc += 6 + (uint32_t)o[4];
    NEXT();
  }
  CASE(ALLOC) {
    NEED(2, DVM_VAL_SHAPE);
    TRY(do_alloc(vm, (dvm_device_kind)o[3], (dvm_dtype)o[1], R[o[2]].rank, R[o[2]].u.dims, &R[o[0]]));
    pc += 5;
    NEXT();
  }
  CASE(RELEASE) { reg_clear(&R[o[0]]); pc += 2; NEXT(); }
  CASE(INVOKE) {
    SAVE_PC();
    TRY(do_invoke(vm, &m->kernels[o[0]], R, o));
    const int64_t *outs = o + 2, *ins = outs + 1 + outs[0], *attrs = ins + 1 + ins[0];
    pc = (uint32_t)(attrs + 1 + attrs[0] - code);
    NEXT();
  }
  CASE(SHAPEFN) {
    SAVE_PC();
    TRY(do_shapefn(vm, &m->shapefns[o[0]], R, o));
    const int64_t *dl = o + 1, *rl = dl + 1 + dl[0];
    pc = (uint32_t)(rl + 1 + rl[0] - code);
    NEXT();
  }
  CASE(HOSTCALL) {
    const int64_t *dl = o + 1, *rl = dl + 1 + dl[0];
    dvm_value in[DVM_HOSTFN_MAX_ARGS], out = {0};
    for (int64_t i = 0; i < rl[0] && i < DVM_HOSTFN_MAX_ARGS; i++) in[i] = R[rl[1 + i]];
    SAVE_PC();
    TRY(dvm_status_annotate(dvm_hostfn_call(m->hostfns[o[0]].fn, in, &out), "host function \"%s\"",
                            m->hostfns[o[0]].name));
    if (dl[0]) reg_put(&R[dl[1]], out);
    pc = (uint32_t)(rl + 1 + rl[0] - code);
    NEXT();
  }
  CASE(COPY) {
    NEED(1, DVM_VAL_TENSOR);
    TRY(dvm_vm_copy(vm, R[o[1]].u.tensor, (dvm_device_kind)o[2], &R[o[0]]));
    pc += 4;
    NEXT();
  }
  CASE(TUPLE) {
    dvm_tuple *t;
    dvm_value items[64];
    dvm_value *tmp = items;
    if (o[1] > 64) {
      TRY(scratch_reserve(vm, (size_t)o[1]));
      tmp = vm->scratch;
    }
    for (int64_t i = 0; i < o[1]; i++) {
      if (R[o[2 + i]].kind == DVM_VAL_NONE)
        FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "r%lld is empty", (long long)o[2 + i]));
      tmp[i] = R[o[2 + i]];
    }
    TRY(dvm_tuple_create((int)o[1], tmp, &t));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = t});
    pc += 3 + (uint32_t)o[1];
    NEXT();
  }
  CASE(GET) {
    NEED(1, DVM_VAL_TUPLE);
    const dvm_tuple *t = R[o[1]].u.tuple;
    if (o[2] < 0 || o[2] >= t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "tuple index %lld out of range (size %d)", (long long)o[2], t->n));
    dvm_value v = t->items[o[2]];
    dvm_value_retain(&v);
    reg_put(&R[o[0]], v);
    pc += 4;
    NEXT();
  }
  CASE(LEN) {
    NEED(1, DVM_VAL_TUPLE); /* may be dyn */
    reg_set_int(&R[o[0]], R[o[1]].u.tuple->n);
    pc += 3;
    NEXT();
  }
  CASE(AT) {
    NEED(1, DVM_VAL_TUPLE);
    NEED(2, DVM_VAL_INT);
    const dvm_tuple *t = R[o[1]].u.tuple;
    int64_t i = R[o[2]].u.i < 0 ? R[o[2]].u.i + t->n : R[o[2]].u.i;
    if (i < 0 || i >= t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "index %lld out of range (size %d)", (long long)R[o[2]].u.i, t->n));
    dvm_value v = t->items[i];
    dvm_value_retain(&v);
    reg_put(&R[o[0]], v);
    pc += 4;
    NEXT();
  }
  CASE(INSERT) {
    NEED(1, DVM_VAL_TUPLE);
    NEED(2, DVM_VAL_INT);
    const dvm_tuple *t = R[o[1]].u.tuple;
    int64_t i = R[o[2]].u.i < 0 ? R[o[2]].u.i + t->n : R[o[2]].u.i;
    if (i < 0 || i > t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "insert position %lld out of range (size %d)",
                          (long long)R[o[2]].u.i, t->n));
    if (R[o[3]].kind == DVM_VAL_NONE)
      FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "r%lld is empty", (long long)o[3]));
    dvm_tuple *u;
    TRY(dvm_tuple_insert(t, (int)i, &R[o[3]], &u));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = u});
    pc += 5;
    NEXT();
  }
  CASE(ERASE) {
    NEED(1, DVM_VAL_TUPLE);
    NEED(2, DVM_VAL_INT);
    const dvm_tuple *t = R[o[1]].u.tuple;
    int64_t i = R[o[2]].u.i < 0 ? R[o[2]].u.i + t->n : R[o[2]].u.i;
    if (i < 0 || i >= t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "erase position %lld out of range (size %d)",
                          (long long)R[o[2]].u.i, t->n));
    dvm_tuple *u;
    TRY(dvm_tuple_erase(t, (int)i, &u));
    reg_put(&R[o[0]], (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = u});
    pc += 4;
    NEXT();
  }
  CASE(GUARD) {
    TRY(guard(vm, fn, R, &R[o[0]], o[1]));
    pc += 3;
    NEXT();
  }
  CASE(CHECK) {
    NEED(0, DVM_VAL_INT);
    if (!R[o[0]].u.i) FAIL(dvm_status_new(DVM_FAILED_PRECONDITION, "%s", m->strings[o[1]]));
    pc += 3;
    NEXT();
  }
  CASE(FATAL) { FAIL(dvm_status_new(DVM_FAILED_PRECONDITION, "%s", m->strings[o[0]])); }
  CASE(CHECK_WITH) {
    NEED(0, DVM_VAL_INT);
    if (!R[o[0]].u.i) FAIL(check_message(m->strings[o[1]], R, o + 2));
    pc += 4 + (uint32_t)o[2];
    NEXT();
  }

#ifndef DVM_COMPUTED_GOTO
    case DVM_OP_COUNT: break;
    }
    FAIL(dvm_status_new(DVM_INTERNAL, "bad opcode %lld", (long long)code[pc]));
  }
#endif

pause:
  fr->pc = pc;
  vm->paused = 1;
  goto done;
fail:
  {
    char where[512];
    fr->pc = pc;
    st = dvm_status_annotate(st, "%s", dvm_func_where(fn, pc, where, sizeof where));
  }
  dvm_interp_unwind(vm, stop);
done:
  vm->stats.instructions += steps;
  vm->inv_steps += steps;
  return st;
}
