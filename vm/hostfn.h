/* Host functions: registry, signatures and calls through libffi. */
#ifndef DVM_HOSTFN_H
#define DVM_HOSTFN_H

#include "dvm/module.h"

#define DVM_HOSTFN_MAX_ARGS 16

/* Parses "ARGS->RET" (see dvm/module.h). On success *nargs is the argument
 * count, args[] their letters, *ret the return letter. */
DVM_MUST_USE dvm_status *dvm_hostfn_sig_parse(const char *sig, int *nargs,
                                              char args[DVM_HOSTFN_MAX_ARGS], char *ret);

typedef struct dvm_hostfn dvm_hostfn;

/* The registered function of that name, or NULL. */
const dvm_hostfn *dvm_hostfn_lookup(const dvm_hostfn_registry *reg, const char *name);
const char *dvm_hostfn_signature(const dvm_hostfn *fn);

/* Calls fn with in[] (already checked against the signature) and stores the
 * result in *out (NONE for void). */
DVM_MUST_USE dvm_status *dvm_hostfn_call(const dvm_hostfn *fn, const dvm_value *in,
                                         dvm_value *out);

#endif
