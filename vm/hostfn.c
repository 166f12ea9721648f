/* Host functions: an embedder's C functions, called through libffi. */
#include <ffi.h>
#include <stdlib.h>
#include <string.h>

#include "hostfn.h"
#include "object.h"

struct dvm_hostfn {
  char *name;
  char *sig;
  void (*fn)(void);
  int nargs;
  char args[DVM_HOSTFN_MAX_ARGS];
  char ret;
  ffi_cif cif;
  ffi_type *types[DVM_HOSTFN_MAX_ARGS];
  struct dvm_hostfn *next;
};

struct dvm_hostfn_registry {
  struct dvm_hostfn *head;
};

dvm_status *dvm_hostfn_sig_parse(const char *sig, int *nargs, char args[DVM_HOSTFN_MAX_ARGS],
                                 char *ret) {
  const char *arrow = strstr(sig, "->");
  if (!arrow)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "signature \"%s\" has no \"->\"", sig);
  int n = (int)(arrow - sig);
  if (n > DVM_HOSTFN_MAX_ARGS)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "signature \"%s\" has more than %d arguments", sig,
                          DVM_HOSTFN_MAX_ARGS);
  for (int i = 0; i < n; i++) {
    if (!strchr("ift", sig[i]))
      return dvm_status_new(DVM_INVALID_ARGUMENT, "signature \"%s\": argument %d is '%c', "
                                                  "not one of i f t", sig, i, sig[i]);
    args[i] = sig[i];
  }
  if (!arrow[2] || arrow[3] || !strchr("iftv", arrow[2]))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "signature \"%s\": the return must be one of "
                                                "i f t v", sig);
  *nargs = n;
  *ret = arrow[2];
  return NULL;
}

static ffi_type *ffi_of(char letter) {
  switch (letter) {
  case 'i': return &ffi_type_sint64;
  case 'f': return &ffi_type_double;
  case 't': return &ffi_type_pointer;
  default: return &ffi_type_void;
  }
}

dvm_status *dvm_hostfn_registry_create(dvm_hostfn_registry **out) {
  *out = calloc(1, sizeof **out);
  return *out ? NULL : dvm_status_new(DVM_OUT_OF_MEMORY, "");
}

dvm_status *dvm_hostfn_register(dvm_hostfn_registry *reg, const char *name, const char *signature,
                                void (*fn)(void)) {
  if (!name || !*name || !fn)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "host function needs a name and a function");
  if (dvm_hostfn_lookup(reg, name))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "host function \"%s\" is already registered", name);
  struct dvm_hostfn *h = calloc(1, sizeof *h);
  if (!h) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = dvm_hostfn_sig_parse(signature, &h->nargs, h->args, &h->ret);
  if (st) {
    free(h);
    return dvm_status_annotate(st, "host function \"%s\"", name);
  }
  for (int i = 0; i < h->nargs; i++) h->types[i] = ffi_of(h->args[i]);
  if (ffi_prep_cif(&h->cif, FFI_DEFAULT_ABI, (unsigned)h->nargs, ffi_of(h->ret), h->types) !=
      FFI_OK) {
    free(h);
    return dvm_status_new(DVM_INTERNAL, "libffi cannot prepare a call of \"%s\"", name);
  }
  h->name = strdup(name);
  h->sig = strdup(signature);
  if (!h->name || !h->sig) {
    free(h->name);
    free(h->sig);
    free(h);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  h->fn = fn;
  h->next = reg->head;
  reg->head = h;
  return NULL;
}

void dvm_hostfn_registry_destroy(dvm_hostfn_registry *reg) {
  if (!reg) return;
  while (reg->head) {
    struct dvm_hostfn *h = reg->head;
    reg->head = h->next;
    free(h->name);
    free(h->sig);
    free(h);
  }
  free(reg);
}

const dvm_hostfn *dvm_hostfn_lookup(const dvm_hostfn_registry *reg, const char *name) {
  for (const struct dvm_hostfn *h = reg ? reg->head : NULL; h; h = h->next)
    if (strcmp(h->name, name) == 0) return h;
  return NULL;
}

const char *dvm_hostfn_signature(const dvm_hostfn *fn) { return fn->sig; }

dvm_status *dvm_hostfn_call(const dvm_hostfn *h, const dvm_value *in, dvm_value *out) {
  void *argp[DVM_HOSTFN_MAX_ARGS];
  for (int i = 0; i < h->nargs; i++) {
    uint8_t want = h->args[i] == 'i' ? DVM_VAL_INT : h->args[i] == 'f' ? DVM_VAL_FLOAT : DVM_VAL_TENSOR;
    if (in[i].kind != want)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "host function \"%s\" argument %d must be %s, "
                                                  "got %s", h->name, i, dvm_kind_name(want),
                            dvm_kind_name(in[i].kind));
    argp[i] = (void *)&in[i].u; /* i, f and tensor share the union's start */
  }
  union {
    ffi_arg word;
    int64_t i;
    double f;
    dvm_tensor *t;
  } r = {0};
  ffi_call((ffi_cif *)&h->cif, h->fn, &r, argp);
  switch (h->ret) {
  case 'i': *out = dvm_value_int(r.i); break;
  case 'f': *out = dvm_value_float(r.f); break;
  case 't':
    if (!r.t)
      return dvm_status_new(DVM_FAILED_PRECONDITION, "host function \"%s\" returned no tensor",
                            h->name);
    *out = dvm_value_tensor(r.t); /* the function handed us its reference */
    break;
  default: out->kind = DVM_VAL_NONE; break;
  }
  return NULL;
}
