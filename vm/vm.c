/* VM instances: creation, invocation through the API, statistics. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "dvm/debug.h"
#include "registry.h"
#include "vmimpl.h"

#define DEFAULT_MAX_DEPTH 256

static dvm_status *device_module_check(const dvm_module *m, dvm_device_kind dev);

void dvm_vm_options_init(dvm_vm_options *o) {
  memset(o, 0, sizeof *o);
  o->device = DVM_DEVICE_CPU;
}

dvm_status *dvm_vm_create(dvm_module *m, const dvm_vm_options *opts, dvm_vm **out) {
  dvm_vm *vm = calloc(1, sizeof *vm);
  if (!vm) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  if (opts) vm->opts = *opts;
  else dvm_vm_options_init(&vm->opts);
  if ((unsigned)vm->opts.device >= DVM_DEVICE_COUNT) {
    int dev = (int)vm->opts.device;
    free(vm);
    return dvm_status_new(DVM_INVALID_ARGUMENT, "unknown device %d", dev);
  }
  if (vm->opts.max_depth <= 0) vm->opts.max_depth = DEFAULT_MAX_DEPTH;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  vm->exec.threads = vm->opts.threads > 0 ? vm->opts.threads : (cores > 0 ? (int)cores : 1);
  vm->exec.allow_tf32 = vm->opts.allow_tf32 != 0;
  vm->frames = calloc((size_t)vm->opts.max_depth, sizeof *vm->frames);
  if (!vm->frames) {
    free(vm);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  vm->m = m; /* its registry has the devices */
  /* the default device must exist: say so now rather than at the first allocation */
  dvm_pool *p;
  dvm_stream *s;
  dvm_status *st = dvm_vm_pool(vm, vm->opts.device, &p);
  if (!st && vm->opts.device != DVM_DEVICE_CPU) st = device_module_check(m, vm->opts.device);
  if (!st) st = dvm_vm_stream(vm, vm->opts.device, &s);
  if (st) {
    for (int d = 0; d < DVM_DEVICE_COUNT; d++) dvm_pool_destroy(vm->pools[d]);
    free(vm->frames);
    free(vm);
    return st;
  }
  atomic_init(&vm->interrupt, 0);
  dvm_module_retain(m);
  *out = vm;
  return NULL;
}

/* The device a module function runs on: D for NAME@D (DVM_CUDA_SUFFIX
 * for CUDA), the CPU for a name without such a suffix. */
static dvm_device_kind function_device(const char *name) {
  size_t n = strlen(name);
  for (int d = 0; d < DVM_DEVICE_COUNT; d++) {
    const char *dn = dvm_device_name((dvm_device_kind)d);
    size_t k = strlen(dn);
    if (d != DVM_DEVICE_CPU && n > k + 1 && name[n - k - 1] == '@' && strcmp(name + n - k, dn) == 0)
      return (dvm_device_kind)d;
  }
  return DVM_DEVICE_CPU;
}

/* The device's name as messages write it: "CUDA". */
static const char *device_title(dvm_device_kind dev, char buf[16]) {
  const char *n = dvm_device_name(dev);
  size_t i = 0;
  for (; n[i] && i < 15; i++) buf[i] = (char)toupper((unsigned char)n[i]);
  buf[i] = 0;
  return buf;
}

/* A VM on device dev runs the module's NAME@D functions: a module with
 * none was compiled for the CPU only. */
static dvm_status *device_module_check(const dvm_module *m, dvm_device_kind dev) {
  for (uint32_t i = 0; i < m->nfuncs; i++)
    if (function_device(m->funcs[i].name) == dev) return NULL;
  char t[16];
  const char *n = dvm_device_name(dev);
  return dvm_status_new(DVM_FAILED_PRECONDITION,
                        "the module has no %s functions (NAME@%s): it was compiled for the CPU only; "
                        "compile it with --target cpu,%s", device_title(dev, t), n, n);
}

dvm_status *dvm_vm_stream(dvm_vm *vm, dvm_device_kind dev, dvm_stream **out) {
  if (!vm->exec.streams[dev]) {
    const dvm_device *d;
    dvm_status *st = vm->m->reg->device(dev, &d);
    if (!st) st = d->stream_create(d, &vm->stats.host_syncs, &vm->exec.streams[dev]);
    if (st) return st;
  }
  *out = vm->exec.streams[dev];
  return NULL;
}

/* The first device other than the CPU that is present and that m has
 * functions for. */
dvm_device_kind dvm_device_auto(const dvm_module *m, char *buf, size_t size) {
  dvm_status *st = NULL;
  for (int k = 0; k < DVM_DEVICE_COUNT; k++) {
    if (k == DVM_DEVICE_CPU) continue;
    const dvm_device *d;
    dvm_status_free(st);
    /* the module first: a module without functions for it need not wait for a driver */
    st = device_module_check(m, (dvm_device_kind)k);
    if (!st) st = m->reg->device((dvm_device_kind)k, &d);
    if (!st) {
      d->describe(d, buf, size);
      return (dvm_device_kind)k;
    }
  }
  snprintf(buf, size, "cpu (%s)", dvm_status_message(st));
  dvm_status_free(st);
  return DVM_DEVICE_CPU;
}

dvm_status *dvm_vm_find_function(const dvm_vm *vm, const char *name, int *out) {
  const dvm_module *m = vm->m;
  dvm_device_kind dev = vm->opts.device;
  if (dev == DVM_DEVICE_CPU || function_device(name) == dev) {
    *out = dvm_module_find_function(m, name);
    if (*out < 0) return dvm_status_new(DVM_NOT_FOUND, "no function \"%s\" in the module", name);
    return NULL;
  }
  char full[256], t[16];
  if ((size_t)snprintf(full, sizeof full, "%s@%s", name, dvm_device_name(dev)) >= sizeof full)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "function name \"%.40s...\" is too long", name);
  *out = dvm_module_find_function(m, full);
  if (*out >= 0) return NULL;
  if (dvm_module_find_function(m, name) < 0)
    return dvm_status_new(DVM_NOT_FOUND, "no function \"%s\" for %s in the module", full,
                          device_title(dev, t));
  return dvm_status_new(DVM_NOT_FOUND,
                        "no function \"%s\" for %s in the module (it has the CPU one: run on the "
                        "CPU, or compile with --target cpu,%s)", full, device_title(dev, t),
                        dvm_device_name(dev));
}

void dvm_vm_destroy(dvm_vm *vm) {
  if (!vm) return;
  dvm_vm_stop(vm);
  /* waits for each stream, so no queued kernel still uses a pool block */
  for (int d = 0; d < DVM_DEVICE_COUNT; d++) {
    dvm_stream *s = vm->exec.streams[d];
    if (s) s->dev->stream_destroy(s);
    dvm_constcopy_clear(&vm->consts[d]);
  }
  for (int d = 0; d < DVM_DEVICE_COUNT; d++) dvm_pool_destroy(vm->pools[d]);
  dvm_module_release(vm->m);
  free(vm->regs);
  free(vm->frames);
  free(vm->scratch);
  free(vm->exec.made);
  free(vm);
}

dvm_module *dvm_vm_module(const dvm_vm *vm) { return vm->m; }

dvm_status *dvm_vm_pool(dvm_vm *vm, dvm_device_kind dev, dvm_pool **out) {
  if (!vm->pools[dev]) {
    const dvm_device *d;
    dvm_status *st = vm->m->reg->device(dev, &d);
    if (!st) st = dvm_pool_create(d, vm->opts.pool_limit, &vm->pools[dev]);
    if (st) return st;
  }
  *out = vm->pools[dev];
  return NULL;
}

dvm_status *dvm_vm_push_frame(dvm_vm *vm, uint32_t f, const int64_t *dsts) {
  if (vm->nframes >= vm->opts.max_depth)
    return dvm_status_new(DVM_RESOURCE_EXHAUSTED, "call depth limit of %d frames reached",
                          vm->opts.max_depth);
  const dvm_func *fn = &vm->m->funcs[f];
  size_t base = 0;
  if (vm->nframes) {
    const dvm_frame *top = &vm->frames[vm->nframes - 1];
    base = top->base + vm->m->funcs[top->func].nregs;
  }
  size_t need = base + fn->nregs;
  if (need > vm->regs_cap) {
    size_t cap = vm->regs_cap ? vm->regs_cap : 256;
    while (cap < need) cap *= 2;
    dvm_value *r = realloc(vm->regs, cap * sizeof *r);
    if (!r) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    vm->regs = r;
    vm->regs_cap = cap;
  }
  memset(vm->regs + base, 0, fn->nregs * sizeof(dvm_value));
  vm->frames[vm->nframes++] = (dvm_frame){f, 0, base, dsts};
  return NULL;
}

/* Tensor inputs on a device other than the host (imported with DLPack, or
 * results left there) go to that device's functions (NAME@D) only: CPU
 * kernels cannot read them. One that no pool of dvm made (DLPack) may
 * still be written by its producer on a stream dvm does not know, so its
 * device is waited for once. */
static dvm_status *device_args_check(dvm_vm *vm, const dvm_func *fn, const dvm_value *args, int nargs) {
  unsigned foreign = 0; /* one bit per device */
  dvm_device_kind fdev = function_device(fn->name);
  for (int i = 0; i < nargs; i++) {
    if (args[i].kind != DVM_VAL_TENSOR) continue;
    const dvm_storage *sto = args[i].u.tensor->storage;
    dvm_device_kind tdev = (dvm_device_kind)sto->device;
    if (tdev == DVM_DEVICE_CPU) continue;
    if (tdev != fdev)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "function \"%s\" input %d (\"%s\") is on the %s device; "
                            "this function runs on %s: run on %s, or pass a host tensor", fn->name, i,
                            fn->params[i].name, dvm_device_name(tdev),
                            fdev == DVM_DEVICE_CPU ? "the CPU" : dvm_device_name(fdev), dvm_device_name(tdev));
    if (!sto->pool) foreign |= 1u << tdev;
  }
  dvm_status *st = NULL;
  for (int d = 0; d < DVM_DEVICE_COUNT && !st; d++) {
    if (!(foreign >> d & 1)) continue;
    const dvm_device *dev;
    if (!(st = vm->m->reg->device((dvm_device_kind)d, &dev))) st = dev->sync(dev);
    vm->stats.host_syncs++;
  }
  return st;
}

dvm_status *dvm_vm_begin(dvm_vm *vm, int f, const dvm_value *args, int nargs, dvm_value *results,
                         int nresults) {
  const dvm_module *m = vm->m;
  if (vm->started)
    return dvm_status_new(DVM_FAILED_PRECONDITION, "a stepped invocation is under way on this VM: "
                                                   "finish or stop it first");
  if (f < 0 || (uint32_t)f >= m->nfuncs)
    return dvm_status_new(DVM_NOT_FOUND, "no function %d (the module has %u)", f, m->nfuncs);
  const dvm_func *fn = &m->funcs[f];
  if (nargs != (int)fn->nparams)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "function \"%s\" takes %u inputs, got %d",
                          fn->name, fn->nparams, nargs);
  if (nresults != (int)fn->nresults)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "function \"%s\" returns %u results, asked for %d",
                          fn->name, fn->nresults, nresults);
  for (int i = 0; i < nargs; i++)
    if (args[i].kind == DVM_VAL_NONE || args[i].kind >= DVM_KIND_COUNT)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "function \"%s\" input %d (\"%s\") is empty",
                            fn->name, i, fn->params[i].name);
  dvm_status *st = device_args_check(vm, fn, args, nargs);
  if (st) return st;
  if ((st = dvm_vm_push_frame(vm, (uint32_t)f, NULL))) return st;
  dvm_value *R = vm->regs + vm->frames[vm->nframes - 1].base;
  for (int i = 0; i < nargs; i++) {
    R[i] = args[i];
    dvm_value_retain(&args[i]);
  }
  atomic_store_explicit(&vm->interrupt, 0, memory_order_relaxed);
  for (int i = 0; i < nresults; i++) results[i].kind = DVM_VAL_NONE;
  vm->results = results;
  vm->stats.invocations++;
  vm->inv_steps = 0;
  for (int d = 0; d < DVM_DEVICE_COUNT; d++)
    if (vm->pools[d]) dvm_pool_begin(vm->pools[d]);
  return NULL;
}

/* The devices other than the host that hold v's tensors, at any depth (a
 * tuple: a sequence), one bit each. */
static unsigned devices_of(const dvm_value *v) {
  if (v->kind == DVM_VAL_TENSOR) {
    dvm_device_kind d = (dvm_device_kind)v->u.tensor->storage->device;
    return d == DVM_DEVICE_CPU ? 0 : 1u << d;
  }
  unsigned m = 0;
  if (v->kind == DVM_VAL_TUPLE)
    for (int i = 0; i < v->u.tuple->n; i++) m |= devices_of(&v->u.tuple->items[i]);
  return m;
}

/* v with its tensors on the host: a device tensor copied, a tuple that
 * holds one rebuilt around host copies (tuples are immutable and may be
 * shared). */
static dvm_status *to_host(dvm_vm *vm, dvm_value *v) {
  if (!devices_of(v)) return NULL;
  if (v->kind == DVM_VAL_TENSOR) return dvm_vm_copy(vm, v->u.tensor, DVM_DEVICE_CPU, v);
  const dvm_tuple *t = v->u.tuple;
  dvm_value *items = calloc((size_t)(t->n ? t->n : 1), sizeof *items);
  dvm_status *st = items ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (int i = 0; i < t->n && !st; i++) {
    items[i] = t->items[i];
    dvm_value_retain(&items[i]);
    st = to_host(vm, &items[i]);
  }
  dvm_tuple *u = NULL;
  if (!st) st = dvm_tuple_create(t->n, items, &u);
  for (int i = 0; i < t->n && items; i++) dvm_value_clear(&items[i]);
  free(items);
  if (st) return st;
  dvm_value_clear(v);
  *v = (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = u};
  return NULL;
}

dvm_status *dvm_vm_deliver(dvm_vm *vm, dvm_value *results, int n) {
  dvm_status *st = NULL;
  unsigned wait = 0; /* the devices to wait for, one bit each */
  for (int i = 0; i < n && !st; i++) {
    unsigned devs = devices_of(&results[i]);
    if (!devs) continue;
    if (vm->opts.results_on_device) wait |= devs;
    else st = to_host(vm, &results[i]);
  }
  for (int d = 0; d < DVM_DEVICE_COUNT && !st; d++) {
    dvm_stream *s;
    if (wait >> d & 1 && !(st = dvm_vm_stream(vm, (dvm_device_kind)d, &s))) st = s->dev->stream_sync(s);
  }
  for (int i = 0; i < n && st; i++) dvm_value_clear(&results[i]);
  return st;
}

dvm_status *dvm_vm_invoke(dvm_vm *vm, int f, const dvm_value *args, int nargs, dvm_value *results,
                          int nresults) {
  return dvm_vm_invoke_bound(vm, f, args, nargs, NULL, results, nresults);
}

/* Makes each bound result the bound tensor: the run wrote it in place
 * (alloc_result), or its bytes are copied in now. */
static dvm_status *fill_bound(dvm_vm *vm, const dvm_func *fn, const dvm_value *bound, dvm_value *results, int n) {
  for (int k = 0; k < n; k++) {
    if (bound[k].kind != DVM_VAL_TENSOR) continue;
    dvm_tensor *b = bound[k].u.tensor;
    if (results[k].kind == DVM_VAL_TENSOR && results[k].u.tensor == b) continue;
    const dvm_tensor *t = results[k].kind == DVM_VAL_TENSOR ? results[k].u.tensor : NULL;
    if (!t || t->dtype != b->dtype || t->rank != b->rank || memcmp(t->dims, b->dims, (size_t)t->rank * sizeof *t->dims)) {
      char have[160], want[160] = "a ";
      dvm_shape_format(have, sizeof have, (dvm_dtype)b->dtype, b->rank, b->dims);
      if (t) dvm_shape_format(want, sizeof want, (dvm_dtype)t->dtype, t->rank, t->dims);
      else snprintf(want, sizeof want, "a %s", dvm_kind_name((dvm_kind)results[k].kind));
      return dvm_status_new(DVM_INVALID_ARGUMENT, "result \"%s\": the bound tensor is %s, the function made %s",
                            fn->results[k].name, have, want);
    }
    dvm_status *st = dvm_vm_copy_into(vm, b, t);
    if (st) return st;
    vm->stats.result_copies++;
    dvm_value_clear(&results[k]);
    dvm_tensor_retain(b);
    results[k] = dvm_value_tensor(b);
  }
  return NULL;
}

dvm_status *dvm_vm_invoke_bound(dvm_vm *vm, int f, const dvm_value *args, int nargs, const dvm_value *bound,
                                dvm_value *results, int nresults) {
  dvm_status *st = dvm_vm_begin(vm, f, args, nargs, results, nresults);
  if (st) return st;
  vm->bound = bound;
  st = vm->profile ? dvm_profile_run(vm, vm->nframes - 1) : dvm_interp_run(vm, vm->nframes - 1, UINT64_MAX);
  vm->bound = NULL;
  if (!st && bound && (st = fill_bound(vm, &vm->m->funcs[f], bound, results, nresults)))
    for (int k = 0; k < nresults; k++) dvm_value_clear(&results[k]);
  return st ? st : dvm_vm_deliver(vm, results, nresults);
}

void dvm_vm_interrupt(dvm_vm *vm) { atomic_store(&vm->interrupt, 1); }

void dvm_vm_get_stats(const dvm_vm *vm, dvm_vm_stats *out) {
  *out = vm->stats;
  for (int d = 0; d < DVM_DEVICE_COUNT; d++) {
    memset(&out->pool[d], 0, sizeof out->pool[d]);
    if (vm->pools[d]) dvm_pool_get_stats(vm->pools[d], &out->pool[d]);
  }
}
