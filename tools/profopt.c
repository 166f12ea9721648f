/* --profile and --trace FILE for dvm run and dvm bench: attach a profile
 * to the VM, then print it and write the trace. */
#include <errno.h>
#include <string.h>

#include "cli.h"

dvm_status *dvm_cli_profile_attach(dvm_vm *vm, const char *trace, dvm_profile **out) {
  dvm_status *st = dvm_profile_create(dvm_vm_module(vm), trace != NULL, 0, out);
  if (!st && (st = dvm_vm_set_profile(vm, *out))) {
    dvm_profile_destroy(*out);
    *out = NULL;
  }
  return st;
}

dvm_status *dvm_cli_profile_finish(dvm_vm *vm, dvm_profile *p, const char *trace, int print) {
  dvm_status *st = dvm_vm_set_profile(vm, NULL);
  if (!st && print) st = dvm_profile_print(p, 30, stdout);
  if (!st && trace) {
    FILE *f = fopen(trace, "w");
    if (!f) return dvm_status_new(DVM_IO, "cannot write trace \"%s\": %s", trace, strerror(errno));
    st = dvm_profile_write_trace(p, f);
    if (fclose(f) != 0 && !st) st = dvm_status_new(DVM_IO, "writing trace \"%s\"", trace);
    if (st) return dvm_status_annotate(st, "trace \"%s\"", trace);
    dvm_profile_totals t;
    dvm_profile_get_totals(p, &t);
    fprintf(stderr, "trace: %llu events written to %s (open in https://ui.perfetto.dev)%s\n",
            (unsigned long long)t.events, trace, t.events_dropped ? "; some were dropped (too many)" : "");
  }
  return st;
}
