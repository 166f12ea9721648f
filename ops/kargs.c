/* Kernel argument checks (see kargs.h). */
#include <stdio.h>

#include "kargs.h"

static dvm_status *check_tensors(dvm_tensor *const *t, int n, const char *what, const char *op,
                                 dvm_device_kind dev) {
  for (int i = 0; i < n; i++) {
    if (!t[i]) return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %d is missing", op, what, i);
    if (t[i]->storage->device != dev)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: %s %d is on %s, the kernel runs on %s", op,
                            what, i, dvm_device_name((dvm_device_kind)t[i]->storage->device),
                            dvm_device_name(dev));
  }
  return NULL;
}

dvm_status *dvm_kargs_check(const dvm_kernel_args *a, const char *op, int nin, int nout,
                            dvm_device_kind dev) {
  if (a->nin != nin || a->nout != nout)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "%s: takes %d input%s and %d output%s, got %d and %d", op, nin,
                          nin == 1 ? "" : "s", nout, nout == 1 ? "" : "s", a->nin, a->nout);
  dvm_status *st = check_tensors(a->in, nin, "input", op, dev);
  return st ? st : check_tensors(a->out, nout, "output", op, dev);
}

/* "2 to 4 inputs", "1 output" */
static const char *count_str(char *buf, size_t size, int lo, int hi, const char *what) {
  if (lo == hi) snprintf(buf, size, "%d %s%s", lo, what, lo == 1 ? "" : "s");
  else snprintf(buf, size, "%d to %d %ss", lo, hi, what);
  return buf;
}

dvm_status *dvm_kargs_check_range(const dvm_kernel_args *a, const char *op, int nin_lo, int nin_hi, int nout_lo,
                                  int nout_hi, dvm_device_kind dev) {
  char in[48], out[48];
  if (a->nin < nin_lo || a->nin > nin_hi || a->nout < nout_lo || a->nout > nout_hi)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: takes %s and %s, got %d and %d", op,
                          count_str(in, sizeof in, nin_lo, nin_hi, "input"),
                          count_str(out, sizeof out, nout_lo, nout_hi, "output"), a->nin, a->nout);
  return dvm_kargs_check(a, op, a->nin, a->nout, dev);
}

int dvm_kargs_threads(const dvm_kernel_args *a) {
  return a->exec && a->exec->threads > 1 ? a->exec->threads : 1;
}

char *dvm_kargs_dtypes(char *buf, size_t size, const dvm_kernel_args *a) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < a->nin + a->nout && n < size; i++) {
    const dvm_tensor *t = i < a->nin ? a->in[i] : a->out[i - a->nin];
    const char *sep = i == 0 ? "" : i == a->nin ? " -> " : ", ";
    int k = snprintf(buf + n, size - n, "%s%s", sep, dvm_dtype_name((dvm_dtype)t->dtype));
    if (k < 0) break;
    n += (size_t)k;
  }
  return buf;
}
