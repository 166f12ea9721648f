/* Printing tensors and values for the command line. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

double dvm_cli_element(const dvm_tensor *t, int64_t i) {
  const void *p = dvm_tensor_data(t);
  switch (dvm_tensor_dtype(t)) {
  case DVM_F32: return ((const float *)p)[i];
  case DVM_F64: return ((const double *)p)[i];
  case DVM_F16: return half_to_double(((const uint16_t *)p)[i]);
  case DVM_BF16: {
    uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
  }
  case DVM_I8: return ((const int8_t *)p)[i];
  case DVM_I16: return ((const int16_t *)p)[i];
  case DVM_I32: return ((const int32_t *)p)[i];
  case DVM_I64: return (double)((const int64_t *)p)[i];
  case DVM_U8: case DVM_BOOL: return ((const uint8_t *)p)[i];
  case DVM_U16: return ((const uint16_t *)p)[i];
  case DVM_U32: return ((const uint32_t *)p)[i];
  case DVM_U64: return (double)((const uint64_t *)p)[i];
  default: return NAN;
  }
}

static int is_float(dvm_dtype dt) { return dt == DVM_F32 || dt == DVM_F64 || dt == DVM_F16 || dt == DVM_BF16; }

/* Element i of string tensor t, quoted: bytes outside printable ASCII
 * (UTF-8 included) as \xNN, at most 40 of them. */
static void print_string(FILE *out, const dvm_tensor *t, int64_t i) {
  size_t len;
  const unsigned char *s = (const unsigned char *)dvm_tensor_string(t, i, &len);
  fputc('"', out);
  for (size_t k = 0; k < len && k < 40; k++)
    fprintf(out, s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"' && s[k] != '\\' ? "%c" : "\\x%02x", s[k]);
  fputs(len > 40 ? "\"..." : "\"", out);
}

void dvm_cli_print_tensor(FILE *out, const dvm_tensor *t, int show) {
  char shape[256];
  dvm_dtype dt = dvm_tensor_dtype(t);
  fputs(dvm_shape_format(shape, sizeof shape, dt, dvm_tensor_rank(t), dvm_tensor_dims(t)), out);
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU) {
    fprintf(out, " on %s", dvm_device_name(dvm_tensor_device(t)));
    return;
  }
  int64_t n = dvm_tensor_numel(t), nan = 0, inf = 0, finite = 0;
  if (dt == DVM_STRING) {
    int64_t k = show < 0 || show > n ? n : show;
    fputs(" [", out);
    for (int64_t i = 0; i < k; i++) {
      if (i) fputs(", ", out);
      print_string(out, t, i);
    }
    fputs(k < n ? ", ...]" : "]", out);
    return;
  }
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = dvm_cli_element(t, i);
    if (isnan(x)) nan++;
    else if (isinf(x)) inf++;
    if (isnan(x) || isinf(x)) continue;
    finite++;
    sum += x;
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  if (finite) fprintf(out, " min=%.6g max=%.6g mean=%.6g", lo, hi, sum / (double)finite);
  if (is_float(dt)) fprintf(out, " nan=%lld inf=%lld", (long long)nan, (long long)inf);
  int64_t k = show < 0 || show > n ? n : show;
  fputs(" [", out);
  for (int64_t i = 0; i < k; i++) fprintf(out, is_float(dt) ? "%s%.6g" : "%s%.0f", i ? ", " : "", dvm_cli_element(t, i));
  fputs(k < n ? ", ...]" : "]", out);
}

void dvm_cli_print_value(FILE *out, const dvm_value *v, int show) {
  switch (v->kind) {
  case DVM_VAL_INT: fprintf(out, "int %lld", (long long)v->u.i); break;
  case DVM_VAL_FLOAT: fprintf(out, "float %.17g", v->u.f); break;
  case DVM_VAL_SHAPE:
    fputs("shape [", out);
    for (int i = 0; i < v->rank; i++) fprintf(out, i ? ", %lld" : "%lld", (long long)v->u.dims[i]);
    fputc(']', out);
    break;
  case DVM_VAL_TENSOR: dvm_cli_print_tensor(out, v->u.tensor, show); break;
  case DVM_VAL_TUPLE: {
    int n = dvm_tuple_size(v->u.tuple);
    fputs("tuple (", out);
    for (int i = 0; i < n; i++) {
      if (i) fputs("; ", out);
      dvm_cli_print_value(out, dvm_tuple_get(v->u.tuple, i), show);
    }
    fputc(')', out);
    break;
  }
  default: fputs(dvm_kind_name((dvm_kind)v->kind), out); break;
  }
}

void dvm_cli_print_param(FILE *out, const dvm_param_info *p) {
  fprintf(out, "%s: %s", p->name, p->kind == DVM_VAL_NONE ? "any" : dvm_kind_name(p->kind));
  if (p->kind == DVM_VAL_TENSOR) fprintf(out, " %s", dvm_dtype_name(p->dtype));
  if (p->kind != DVM_VAL_TENSOR && p->kind != DVM_VAL_SHAPE) return;
  if (p->rank < 0) {
    fputs("[*]", out);
    return;
  }
  fputc('[', out);
  for (int d = 0; d < p->rank; d++) {
    if (d) fputs(", ", out);
    if (p->dims[d].symbol) fputs(p->dims[d].symbol, out);
    else if (p->dims[d].value < 0) fputc('?', out);
    else fprintf(out, "%lld", (long long)p->dims[d].value);
  }
  fputc(']', out);
}

double dvm_cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dvm_status *dvm_cli_read_file(const char *path, char **out, size_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the open */
  if (fd < 0) return dvm_status_new(errno == ENOENT ? DVM_NOT_FOUND : DVM_IO, "%s: %s", path, strerror(errno));
  struct stat sb;
  char *buf = NULL;
  size_t n = 0;
  dvm_status *st = NULL;
  if (fstat(fd, &sb) != 0) st = dvm_status_new(DVM_IO, "%s: %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode)) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: not a regular file", path);
  else if (!(buf = malloc((size_t)sb.st_size + 1))) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  while (!st && n < (size_t)sb.st_size) { /* no more than the size fstat saw */
    ssize_t k = read(fd, buf + n, (size_t)sb.st_size - n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) st = dvm_status_new(DVM_IO, "%s: read error: %s", path, k < 0 ? strerror(errno) : "the file shrank");
    else n += (size_t)k;
  }
  close(fd);
  if (st) {
    free(buf);
    return st;
  }
  buf[n] = 0;
  *out = buf;
  *size = n;
  return NULL;
}
