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
#include "instr.h"
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
 * int of the register list. */
static dvm_status *check_message(const char *fmt, const dvm_value *R, dvm_list args) {
  char buf[2048];
  size_t n = 0;
  int64_t next = 0;
  for (int64_t i = 0; i < args.n; i++)
    if (R[args.v[i]].kind != DVM_VAL_INT) return kind_error(2, args.v[i], &R[args.v[i]], DVM_VAL_INT);
  for (const char *p = fmt; *p && n < sizeof buf - 1; p++) {
    if (p[0] == '{' && p[1] == '}' && next < args.n) {
      int w = snprintf(buf + n, sizeof buf - n, "%lld", (long long)R[args.v[next++]].u.i);
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

/* A paged KV cache reaches only kernels that read it through its table. */
static dvm_status *paged_error(const char *user, int64_t r) {
  return dvm_status_new(DVM_UNIMPLEMENTED, "%s: r%lld is a paged KV cache, which only kernels reading it through its "
                        "block table take (GroupQueryAttention)", user, (long long)r);
}

/* String tensors go only to kernels that take them (dvm_kernel_def.strings).
 * Each string output is emptied before the call, so a kernel may write
 * one twice; one that shares its storage with another operand is refused,
 * as emptying it would drop that operand's strings. */
static dvm_status *strings_before(const dvm_module *m, const dvm_kernel_ref *k, const dvm_list *outs,
                                  const dvm_list *ins, dvm_tensor *const *tout, dvm_tensor *const *tin) {
  for (int64_t i = 0; i < ins->n + outs->n; i++) {
    const dvm_tensor *t = i < ins->n ? tin[i] : tout[i - ins->n];
    int64_t r = i < ins->n ? ins->v[i] : outs->v[i - ins->n];
    if (t->dtype == DVM_STRING && !k->def->strings)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\" does not take string tensors (r%lld)", k->name,
                            (long long)r);
  }
  for (int64_t i = 0; i < outs->n; i++) {
    if (tout[i]->dtype != DVM_STRING) continue;
    if (dvm_module_holds(m, tout[i])) /* string constants have storages of their own */
      return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\": output r%lld is a module constant", k->name,
                            (long long)outs->v[i]);
    for (int64_t j = 0; j < ins->n + outs->n; j++) {
      const dvm_tensor *t = j < ins->n ? tin[j] : tout[j - ins->n];
      if (j != ins->n + i && t->storage == tout[i]->storage)
        return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\": string output r%lld shares its storage with "
                              "another operand", k->name, (long long)outs->v[i]);
    }
    if (k->def->strings != DVM_STRINGS_UPDATE)
      dvm_strings_clear(dvm_tensor_ptr(tout[i]), (size_t)dvm_tensor_numel(tout[i]));
  }
  return NULL;
}

/* After a call of a kernel that takes strings: each string output holds
 * one reference to each of its elements (borrowed from the inputs or made
 * by the call), or none at all after a failure; then the made strings'
 * own references go. */
static void strings_after(dvm_exec *ex, dvm_tensor *const *tout, int64_t nout, bool ok) {
  for (int64_t i = 0; i < nout; i++) {
    if (tout[i]->dtype != DVM_STRING) continue;
    dvm_string **p = dvm_tensor_ptr(tout[i]);
    size_t n = (size_t)dvm_tensor_numel(tout[i]);
    if (ok)
      for (size_t e = 0; e < n; e++) dvm_string_retain(p[e]);
    else
      memset(p, 0, n * sizeof *p);
  }
  dvm_strings_made_drop(ex);
}

static dvm_status *do_invoke(dvm_vm *vm, const dvm_ops_INVOKE *x, dvm_value *R) {
  const dvm_kernel_ref *k = &vm->m->kernels[x->kernel];
  dvm_list outs = x->outs, ins = x->ins, attrs = x->attrs;
  dvm_tensor *tin[MAX_KERNEL_ARGS], *tout[MAX_KERNEL_ARGS];
  if (ins.n > MAX_KERNEL_ARGS || outs.n > MAX_KERNEL_ARGS || attrs.n > MAX_KERNEL_ARGS)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\": more than %d operands", k->name,
                          MAX_KERNEL_ARGS);
  int64_t variant = 0;
  if (x->variant >= 0) {
    if (R[x->variant].kind != DVM_VAL_INT) return kind_error(1, x->variant, &R[x->variant], DVM_VAL_INT);
    variant = R[x->variant].u.i;
    if (variant < 0 || variant >= k->nvariants)
      return dvm_status_new(DVM_OUT_OF_RANGE, "kernel \"%s\": variant %lld of %u", k->name,
                            (long long)variant, k->nvariants);
  }
  for (int64_t i = 0; i < outs.n; i++) {
    if (R[outs.v[i]].kind != DVM_VAL_TENSOR) return kind_error(2, outs.v[i], &R[outs.v[i]], DVM_VAL_TENSOR);
    tout[i] = R[outs.v[i]].u.tensor;
    /* constants are the module's, shared by every VM, and may be mapped
     * read-only: a kernel never writes them (views of them included) */
    if (tout[i]->storage == vm->m->data)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "kernel \"%s\": output r%lld is a module constant",
                            k->name, (long long)outs.v[i]);
    if (dvm_storage_paged(tout[i]->storage) && !k->def->paged) return paged_error(k->name, outs.v[i]);
  }
  for (int64_t i = 0; i < ins.n; i++) {
    if (R[ins.v[i]].kind != DVM_VAL_TENSOR) return kind_error(3, ins.v[i], &R[ins.v[i]], DVM_VAL_TENSOR);
    tin[i] = R[ins.v[i]].u.tensor;
    if (dvm_storage_paged(tin[i]->storage) && !k->def->paged) return paged_error(k->name, ins.v[i]);
  }
  dvm_status *st = strings_before(vm->m, k, &outs, &ins, tout, tin);
  if (st) return st;
  if ((st = scratch_reserve(vm, (size_t)attrs.n))) return st;
  for (int64_t i = 0; i < attrs.n; i++) vm->scratch[i] = R[attrs.v[i]]; /* borrowed */
  dvm_kernel_args a = {tin, (int)ins.n, tout, (int)outs.n, vm->scratch, (int)attrs.n,
                       variant, k->payload, k->payload_size, &vm->exec};
  vm->stats.kernel_calls++;
  dvm_stream *s;
  if (!(st = dvm_vm_stream(vm, k->def->device, &s))) st = s->dev->launch(s, k->def, &a);
  if (k->def->strings) { /* an updating kernel's outputs keep their own references */
    if (k->def->strings == DVM_STRINGS_UPDATE) dvm_strings_made_drop(&vm->exec);
    else strings_after(&vm->exec, tout, outs.n, st == NULL);
  }
  return dvm_status_annotate(st, "kernel \"%s\"", k->name);
}

static dvm_status *do_shapefn(dvm_vm *vm, const dvm_ops_SHAPEFN *x, dvm_value *R) {
  const dvm_shapefn_ref *sf = &vm->m->shapefns[x->fn];
  dvm_list dl = x->dsts, rl = x->args;
  dvm_status *st = scratch_reserve(vm, (size_t)(dl.n + rl.n));
  if (st) return st;
  dvm_value *in = vm->scratch, *out = vm->scratch + rl.n;
  for (int64_t i = 0; i < rl.n; i++) in[i] = R[rl.v[i]]; /* borrowed */
  for (int64_t i = 0; i < dl.n; i++) out[i].kind = DVM_VAL_NONE;
  st = sf->def->fn(in, (int)rl.n, out, (int)dl.n);
  if (!st)
    for (int64_t i = 0; i < dl.n; i++)
      if (out[i].kind == DVM_VAL_NONE)
        st = dvm_status_new(DVM_INTERNAL, "result %lld was not set", (long long)i);
  if (st) {
    for (int64_t i = 0; i < dl.n; i++) dvm_value_clear(&out[i]);
    return dvm_status_annotate(st, "shape function \"%s\"", sf->name);
  }
  for (int64_t i = 0; i < dl.n; i++) reg_put(&R[dl.v[i]], out[i]);
  return NULL;
}

/* A new tensor; exact: a block of its exact size (a result, which the
 * memory plan counts so), else one of the pool's size classes. */
static dvm_status *do_alloc(dvm_vm *vm, dvm_device_kind dev, dvm_dtype dt, int rank, const int64_t *dims,
                            bool exact, dvm_value *dst) {
  int64_t n;
  size_t bytes;
  dvm_status *st = dvm_shape_numel(rank, dims, &n);
  if (st) return st;
  if (dvm_mul_overflows((size_t)n, dvm_dtype_size(dt), &bytes))
    return dvm_status_new(DVM_OUT_OF_RANGE, "tensor byte size overflows");
  if (dt == DVM_STRING) {
    if (dev != DVM_DEVICE_CPU)
      return dvm_status_new(DVM_UNIMPLEMENTED, "string tensors live on the CPU, not on %s", dvm_device_name(dev));
    dvm_tensor *t; /* its own storage: strings are owned, never pooled */
    if ((st = dvm_tensor_create(dt, rank, dims, &t))) return st;
    reg_put(dst, (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    return NULL;
  }
  dvm_pool *p;
  dvm_storage *s;
  if ((st = dvm_vm_pool(vm, dev, &p)) ||
      (st = (exact ? dvm_pool_alloc_exact : dvm_pool_alloc)(p, bytes, 64, &s)))
    return st;
  dvm_tensor *t;
  st = dvm_tensor_view(s, 0, dt, rank, dims, &t);
  dvm_storage_release(s);
  if (st) return st;
  reg_put(dst, (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
  return NULL;
}

dvm_status *dvm_vm_copy_into(dvm_vm *vm, dvm_tensor *dst, const dvm_tensor *src) {
  if (dvm_storage_paged(dst->storage) || dvm_storage_paged(src->storage))
    return dvm_status_new(DVM_UNIMPLEMENTED, "a paged KV cache is not copied: only kernels reading it through its "
                          "block table take it (GroupQueryAttention)");
  dvm_device_kind dev = (dvm_device_kind)dst->storage->device, sdev = (dvm_device_kind)src->storage->device;
  if (dst->dtype == DVM_STRING || src->dtype == DVM_STRING) {
    if (dst->dtype != src->dtype || dvm_tensor_numel(dst) != dvm_tensor_numel(src))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "strings are copied only into a string tensor of as many");
    dvm_string **d = dvm_tensor_ptr(dst), *const *sp = dvm_tensor_ptr(src);
    for (int64_t i = 0; i < dvm_tensor_numel(src); i++) {
      dvm_string_retain(sp[i]); /* before the release: d and sp may be one */
      dvm_string_release(d[i]);
      d[i] = sp[i];
    }
    return NULL;
  }
  dvm_stream *s;
  dvm_status *st = dvm_vm_stream(vm, dev == DVM_DEVICE_CPU ? sdev : dev, &s);
  if (!st) st = s->dev->stream_copy(s, dvm_tensor_ptr(dst), dev, dvm_tensor_ptr(src), sdev, dvm_tensor_nbytes(src));
  return st;
}

/* alloc_result with result k bound to t: t itself, when it is what the
 * instruction would allocate. */
static dvm_status *take_bound(const dvm_func *fn, int64_t k, dvm_tensor *t, dvm_device_kind dev, dvm_dtype dt,
                              const dvm_value *shape, dvm_value *dst) {
  if (t->dtype != dt || t->storage->device != dev || t->rank != shape->rank ||
      memcmp(t->dims, shape->u.dims, (size_t)t->rank * sizeof *t->dims)) {
    char have[160], want[160];
    dvm_shape_format(have, sizeof have, (dvm_dtype)t->dtype, t->rank, t->dims);
    dvm_shape_format(want, sizeof want, dt, shape->rank, shape->u.dims);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "result \"%s\": the bound tensor is %s on %s, the function makes %s on %s",
                          fn->results[k].name, have, dvm_device_name((dvm_device_kind)t->storage->device), want,
                          dvm_device_name(dev));
  }
  dvm_tensor_retain(t);
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
  dvm_status *st = do_alloc(vm, dev, (dvm_dtype)src->dtype, src->rank, src->dims, false, &tmp);
  if (st) return st;
  st = dvm_vm_copy_into(vm, tmp.u.tensor, src);
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
static void do_return(dvm_vm *vm, dvm_list values) {
  dvm_frame *fr = &vm->frames[vm->nframes - 1];
  dvm_value *R = vm->regs + fr->base;
  dvm_value *caller = fr->dsts ? vm->regs + vm->frames[vm->nframes - 2].base : NULL;
  for (int64_t i = 0; i < values.n; i++) {
    dvm_value v = R[values.v[i]];
    dvm_value_retain(&v);
    reg_put(caller ? &caller[fr->dsts[i]] : &vm->results[i], v);
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
  const int64_t *code, *ins; /* ins: the instruction at pc */
  dvm_value *R;
  uint32_t pc;
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
/* The operands of the instruction at pc, as x; STEP() moves past it. */
#define DECODE(e) const dvm_ops_##e x = dvm_decode_##e(ins)
#define STEP() (pc += (uint32_t)(x.end - ins))
/* Operand j, register r, must hold a kind_. */
#define NEED(j, r, kind_)                                                  \
  do {                                                                     \
    if (R[r].kind != (kind_)) FAIL(kind_error(j, r, &R[r], kind_));        \
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
#define X(e, name, ops, flags, syn) &&L_##e,
#include "opcodes.def"
#undef X
  };
#define CASE(e) L_##e:
#define NEXT()                       \
  do {                               \
    if (steps >= budget) goto pause; \
    steps++;                         \
    ins = code + pc;                 \
    goto *labels[*ins];              \
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
    ins = code + pc;
    switch ((dvm_opcode)*ins) {
#endif

  CASE(NOP) { DECODE(NOP); STEP(); NEXT(); }
  CASE(MOVE) {
    DECODE(MOVE);
    if (R[x.src].kind == DVM_VAL_NONE) FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "r%lld is empty", (long long)x.src));
    if (x.dst != x.src) {
      dvm_value_retain(&R[x.src]);
      reg_put(&R[x.dst], R[x.src]);
    }
    STEP();
    NEXT();
  }
  CASE(IMM) { DECODE(IMM); reg_set_int(&R[x.dst], x.value); STEP(); NEXT(); }
  CASE(FIMM) {
    DECODE(FIMM);
    double f;
    memcpy(&f, &x.value, sizeof f);
    reg_clear(&R[x.dst]);
    R[x.dst].kind = DVM_VAL_FLOAT;
    R[x.dst].u.f = f;
    STEP();
    NEXT();
  }
  CASE(CONST) {
    DECODE(CONST);
    dvm_tensor *t = m->consts[x.constant].tensor;
    dvm_tensor_retain(t);
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    STEP();
    NEXT();
  }

#define ARITH(e, expr)                                  \
  CASE(e) {                                             \
    DECODE(e);                                          \
    NEED(1, x.a, DVM_VAL_INT);                          \
    NEED(2, x.b, DVM_VAL_INT);                          \
    int64_t a = R[x.a].u.i, b = R[x.b].u.i, r;          \
    expr;                                               \
    reg_set_int(&R[x.dst], r);                          \
    STEP();                                             \
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
    DECODE(NOT);
    NEED(1, x.a, DVM_VAL_INT);
    reg_set_int(&R[x.dst], !R[x.a].u.i);
    STEP();
    NEXT();
  }
  CASE(JMP) { DECODE(JMP); JUMP_TO(x.target); NEXT(); }
  CASE(JNZ) {
    DECODE(JNZ);
    NEED(0, x.cond, DVM_VAL_INT);
    if (R[x.cond].u.i) JUMP_TO(x.target);
    else STEP();
    NEXT();
  }
  CASE(JZ) {
    DECODE(JZ);
    NEED(0, x.cond, DVM_VAL_INT);
    if (!R[x.cond].u.i) JUMP_TO(x.target);
    else STEP();
    NEXT();
  }
  CASE(CALL) {
    POLL();
    DECODE(CALL);
    SAVE_PC();
    TRY(dvm_vm_push_frame(vm, (uint32_t)x.func, x.dsts.v));
    dvm_value *caller = vm->regs + vm->frames[vm->nframes - 2].base;
    dvm_value *callee = vm->regs + vm->frames[vm->nframes - 1].base;
    for (int64_t i = 0; i < x.args.n; i++) {
      callee[i] = caller[x.args.v[i]];
      dvm_value_retain(&callee[i]);
    }
    /* the caller resumes after the call */
    vm->frames[vm->nframes - 2].pc = (uint32_t)(x.end - code);
    LOAD_FRAME();
    NEXT();
  }
  CASE(RET) {
    DECODE(RET);
    do_return(vm, x.values);
    if (vm->nframes <= stop) goto done;
    LOAD_FRAME();
    NEXT();
  }
  CASE(SHAPE_OF) {
    DECODE(SHAPE_OF);
    NEED(1, x.src, DVM_VAL_TENSOR);
    const dvm_tensor *t = R[x.src].u.tensor;
    dvm_value v = {.kind = DVM_VAL_SHAPE, .rank = t->rank};
    memcpy(v.u.dims, t->dims, sizeof(int64_t) * t->rank);
    reg_put(&R[x.dst], v);
    STEP();
    NEXT();
  }
  CASE(DIM) {
    DECODE(DIM);
    uint8_t k = R[x.src].kind;
    if (k != DVM_VAL_TENSOR && k != DVM_VAL_SHAPE) FAIL(kind_error(1, x.src, &R[x.src], DVM_VAL_TENSOR));
    int rank;
    const int64_t *dims = dims_of(&R[x.src], &rank);
    int64_t axis = x.axis < 0 ? x.axis + rank : x.axis;
    if (axis < 0 || axis >= rank)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "axis %lld is out of range for rank %d", (long long)x.axis, rank));
    reg_set_int(&R[x.dst], dims[axis]);
    STEP();
    NEXT();
  }
  CASE(RANK) {
    DECODE(RANK);
    uint8_t k = R[x.src].kind;
    if (k != DVM_VAL_TENSOR && k != DVM_VAL_SHAPE) FAIL(kind_error(1, x.src, &R[x.src], DVM_VAL_TENSOR));
    int rank;
    dims_of(&R[x.src], &rank);
    reg_set_int(&R[x.dst], rank);
    STEP();
    NEXT();
  }
  CASE(NUMEL) {
    DECODE(NUMEL);
    uint8_t k = R[x.src].kind;
    if (k != DVM_VAL_TENSOR && k != DVM_VAL_SHAPE) FAIL(kind_error(1, x.src, &R[x.src], DVM_VAL_TENSOR));
    int rank;
    const int64_t *dims = dims_of(&R[x.src], &rank);
    int64_t n;
    TRY(dvm_shape_numel(rank, dims, &n));
    reg_set_int(&R[x.dst], n);
    STEP();
    NEXT();
  }
  CASE(MAKE_SHAPE) {
    DECODE(MAKE_SHAPE);
    dvm_value v = {.kind = DVM_VAL_SHAPE, .rank = (uint8_t)x.dims.n};
    for (int64_t i = 0; i < x.dims.n; i++) {
      const dvm_value *d = &R[x.dims.v[i]];
      if (d->kind != DVM_VAL_INT) FAIL(kind_error(1, x.dims.v[i], d, DVM_VAL_INT));
      v.u.dims[i] = d->u.i; /* any ints (axes, pads); uses as dims check them */
    }
    reg_put(&R[x.dst], v);
    STEP();
    NEXT();
  }
  CASE(RESHAPE) {
    DECODE(RESHAPE);
    NEED(1, x.src, DVM_VAL_TENSOR);
    NEED(2, x.shape, DVM_VAL_SHAPE);
    dvm_tensor *t = R[x.src].u.tensor, *v;
    const dvm_value *s = &R[x.shape];
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
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = v});
    STEP();
    NEXT();
  }
  CASE(ALLOC_STORAGE) {
    DECODE(ALLOC_STORAGE);
    NEED(1, x.bytes, DVM_VAL_INT);
    if (R[x.bytes].u.i < 0)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "storage size %lld is negative", (long long)R[x.bytes].u.i));
    dvm_pool *p;
    dvm_storage *s;
    TRY(dvm_vm_pool(vm, (dvm_device_kind)x.device, &p));
    TRY(dvm_pool_alloc(p, (size_t)R[x.bytes].u.i, (size_t)x.align, &s));
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_STORAGE, .u.storage = s});
    STEP();
    NEXT();
  }
  CASE(ALLOC_TENSOR) {
    DECODE(ALLOC_TENSOR);
    NEED(1, x.storage, DVM_VAL_STORAGE);
    NEED(2, x.offset, DVM_VAL_INT);
    NEED(4, x.shape, DVM_VAL_SHAPE);
    if (R[x.offset].u.i < 0)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "tensor offset %lld is negative", (long long)R[x.offset].u.i));
    dvm_tensor *t;
    TRY(dvm_tensor_view(R[x.storage].u.storage, (size_t)R[x.offset].u.i, (dvm_dtype)x.dtype, R[x.shape].rank,
                        R[x.shape].u.dims, &t));
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    STEP();
    NEXT();
  }
  CASE(ALLOC_TENSOR_I) {
    DECODE(ALLOC_TENSOR_I);
    NEED(1, x.storage, DVM_VAL_STORAGE);
    NEED(2, x.offset, DVM_VAL_INT);
    if (R[x.offset].u.i < 0)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "tensor offset %lld is negative", (long long)R[x.offset].u.i));
    dvm_tensor *t;
    TRY(dvm_tensor_view(R[x.storage].u.storage, (size_t)R[x.offset].u.i, (dvm_dtype)x.dtype, (int)x.dims.n,
                        x.dims.v, &t));
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TENSOR, .u.tensor = t});
    STEP();
    NEXT();
  }
  CASE(ALLOC) {
    DECODE(ALLOC);
    NEED(2, x.shape, DVM_VAL_SHAPE);
    TRY(do_alloc(vm, (dvm_device_kind)x.device, (dvm_dtype)x.dtype, R[x.shape].rank, R[x.shape].u.dims, false,
                 &R[x.dst]));
    STEP();
    NEXT();
  }
  CASE(ALLOC_RESULT) {
    DECODE(ALLOC_RESULT);
    NEED(2, x.shape, DVM_VAL_SHAPE);
    /* only the entry frame's results can be bound */
    const dvm_value *b = !fr->dsts && vm->bound ? &vm->bound[x.result] : NULL;
    if (b && b->kind == DVM_VAL_TENSOR)
      TRY(take_bound(fn, x.result, b->u.tensor, (dvm_device_kind)x.device, (dvm_dtype)x.dtype, &R[x.shape], &R[x.dst]));
    else
      TRY(do_alloc(vm, (dvm_device_kind)x.device, (dvm_dtype)x.dtype, R[x.shape].rank, R[x.shape].u.dims, true,
                   &R[x.dst]));
    STEP();
    NEXT();
  }
  CASE(RELEASE) { DECODE(RELEASE); reg_clear(&R[x.reg]); STEP(); NEXT(); }
  CASE(INVOKE) {
    DECODE(INVOKE);
    SAVE_PC();
    TRY(do_invoke(vm, &x, R));
    STEP();
    NEXT();
  }
  CASE(SHAPEFN) {
    DECODE(SHAPEFN);
    SAVE_PC();
    TRY(do_shapefn(vm, &x, R));
    STEP();
    NEXT();
  }
  CASE(HOSTCALL) {
    DECODE(HOSTCALL);
    dvm_value in[DVM_HOSTFN_MAX_ARGS], out = {0};
    for (int64_t i = 0; i < x.args.n && i < DVM_HOSTFN_MAX_ARGS; i++) in[i] = R[x.args.v[i]];
    SAVE_PC();
    for (int64_t i = 0; i < x.args.n && i < DVM_HOSTFN_MAX_ARGS; i++)
      if (in[i].kind == DVM_VAL_TENSOR && dvm_storage_paged(in[i].u.tensor->storage))
        FAIL(paged_error(m->hostfns[x.fn].name, x.args.v[i]));
    TRY(dvm_status_annotate(dvm_hostfn_call(m->hostfns[x.fn].fn, in, &out), "host function \"%s\"",
                            m->hostfns[x.fn].name));
    if (x.dsts.n) reg_put(&R[x.dsts.v[0]], out);
    STEP();
    NEXT();
  }
  CASE(COPY) {
    DECODE(COPY);
    NEED(1, x.src, DVM_VAL_TENSOR);
    TRY(dvm_vm_copy(vm, R[x.src].u.tensor, (dvm_device_kind)x.device, &R[x.dst]));
    STEP();
    NEXT();
  }
  CASE(TUPLE) {
    DECODE(TUPLE);
    dvm_tuple *t;
    dvm_value items[64];
    dvm_value *tmp = items;
    if (x.items.n > 64) {
      TRY(scratch_reserve(vm, (size_t)x.items.n));
      tmp = vm->scratch;
    }
    for (int64_t i = 0; i < x.items.n; i++) {
      if (R[x.items.v[i]].kind == DVM_VAL_NONE)
        FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "r%lld is empty", (long long)x.items.v[i]));
      tmp[i] = R[x.items.v[i]];
    }
    TRY(dvm_tuple_create((int)x.items.n, tmp, &t));
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = t});
    STEP();
    NEXT();
  }
  CASE(GET) {
    DECODE(GET);
    NEED(1, x.tuple, DVM_VAL_TUPLE);
    const dvm_tuple *t = R[x.tuple].u.tuple;
    if (x.index < 0 || x.index >= t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "tuple index %lld out of range (size %d)", (long long)x.index, t->n));
    dvm_value v = t->items[x.index];
    dvm_value_retain(&v);
    reg_put(&R[x.dst], v);
    STEP();
    NEXT();
  }
  CASE(LEN) {
    DECODE(LEN);
    NEED(1, x.tuple, DVM_VAL_TUPLE); /* may be dyn */
    reg_set_int(&R[x.dst], R[x.tuple].u.tuple->n);
    STEP();
    NEXT();
  }
  CASE(AT) {
    DECODE(AT);
    NEED(1, x.tuple, DVM_VAL_TUPLE);
    NEED(2, x.index, DVM_VAL_INT);
    const dvm_tuple *t = R[x.tuple].u.tuple;
    int64_t i = R[x.index].u.i < 0 ? R[x.index].u.i + t->n : R[x.index].u.i;
    if (i < 0 || i >= t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "index %lld out of range (size %d)", (long long)R[x.index].u.i, t->n));
    dvm_value v = t->items[i];
    dvm_value_retain(&v);
    reg_put(&R[x.dst], v);
    STEP();
    NEXT();
  }
  CASE(INSERT) {
    DECODE(INSERT);
    NEED(1, x.tuple, DVM_VAL_TUPLE);
    NEED(2, x.index, DVM_VAL_INT);
    const dvm_tuple *t = R[x.tuple].u.tuple;
    int64_t i = R[x.index].u.i < 0 ? R[x.index].u.i + t->n : R[x.index].u.i;
    if (i < 0 || i > t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "insert position %lld out of range (size %d)",
                          (long long)R[x.index].u.i, t->n));
    if (R[x.item].kind == DVM_VAL_NONE)
      FAIL(dvm_status_new(DVM_INVALID_ARGUMENT, "r%lld is empty", (long long)x.item));
    dvm_tuple *u;
    TRY(dvm_tuple_insert(t, (int)i, &R[x.item], &u));
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = u});
    STEP();
    NEXT();
  }
  CASE(ERASE) {
    DECODE(ERASE);
    NEED(1, x.tuple, DVM_VAL_TUPLE);
    NEED(2, x.index, DVM_VAL_INT);
    const dvm_tuple *t = R[x.tuple].u.tuple;
    int64_t i = R[x.index].u.i < 0 ? R[x.index].u.i + t->n : R[x.index].u.i;
    if (i < 0 || i >= t->n)
      FAIL(dvm_status_new(DVM_OUT_OF_RANGE, "erase position %lld out of range (size %d)",
                          (long long)R[x.index].u.i, t->n));
    dvm_tuple *u;
    TRY(dvm_tuple_erase(t, (int)i, &u));
    reg_put(&R[x.dst], (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = u});
    STEP();
    NEXT();
  }
  CASE(GUARD) {
    DECODE(GUARD);
    TRY(guard(vm, fn, R, &R[x.value], x.param));
    STEP();
    NEXT();
  }
  CASE(CHECK) {
    DECODE(CHECK);
    NEED(0, x.cond, DVM_VAL_INT);
    if (!R[x.cond].u.i) FAIL(dvm_status_new(DVM_FAILED_PRECONDITION, "%s", m->strings[x.message]));
    STEP();
    NEXT();
  }
  CASE(FATAL) { DECODE(FATAL); FAIL(dvm_status_new(DVM_FAILED_PRECONDITION, "%s", m->strings[x.message])); }
  CASE(CHECK_WITH) {
    DECODE(CHECK_WITH);
    NEED(0, x.cond, DVM_VAL_INT);
    if (!R[x.cond].u.i) FAIL(check_message(m->strings[x.message], R, x.args));
    STEP();
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
