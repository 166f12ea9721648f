/* dvm run: bind inputs from .npy files (or numbers for scalar parameters),
 * invoke a function, print or save its results. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "dvmc.h"
#include "dvm/npy.h"
#include "runlimits.h"

#define MAX_BINDINGS 64

static const char usage_text[] =
    "usage: dvm run MODEL.dvmb [options]\n"
    "  --input FILE | --input NAME=FILE  bind the next (or the named) input: a .npy file or an\n"
    "                                     ONNX TensorProto .pb file for tensors, a number for\n"
    "                                     int/float inputs; for a sequence or optional (a tuple)\n"
    "                                     an ONNX SequenceProto/OptionalProto .pb file, or a\n"
    "                                     directory of 0.npy, 1.npy, ...\n"
    "  --output FILE | --output NAME=FILE save results as .npy, or as an ONNX TensorProto when\n"
    "                                     FILE ends in .pb (in result order, or by name); a\n"
    "                                     sequence or optional as a SequenceProto .pb, or as a\n"
    "                                     directory of 0.npy, 1.npy, ...;\n"
    "                                     without it each result is summarized on stdout\n"
    "                                     (NAME=FILE: NAME is one of the function's names, of any\n"
    "                                     length and any characters, '=' and '/' included)\n"
    "  --input-name NAME --input FILE     bind input NAME exactly to FILE taken whole, whatever\n"
    "  --output-name NAME --output FILE   either holds (needed where NAME=FILE is ambiguous)\n"
    "  --function NAME                    function to run (default: main, or the only one)\n"
    "  --device cpu|cuda|auto             where tensors live (default auto: cuda when a device is\n"
    "                                     present and the model was compiled for it, else cpu)\n"
    "  --threads N                        kernel threads (default: all cores)\n"
    "  --tf32                             CUDA f32 matrix products may use TF32 tensor cores\n"
    "                                     (default: exact f32)\n"
    "  --show N                           elements to print per result (default 8, -1: all)\n"
    "  --stats                            print VM statistics after the run\n"
    "  --profile                          print time per call site, op and instruction class\n"
    "  --trace FILE                       write a Chrome trace (JSON; opens in Perfetto)\n"
    "  --verbose                          say which device auto picked, and why (always said\n"
    "                                     for a module with CUDA functions)\n"
    DVM_CLI_LIMIT_USAGE;

/* An ONNX TensorProto file (the ONNX test data's input_N.pb). */
static dvm_status *read_pb(const char *path, dvm_tensor **out) {
  char *bytes;
  size_t size;
  dvm_status *st = dvm_cli_read_file(path, &bytes, &size);
  if (st) return st;
  st = dvmc_read_tensor_pb(bytes, size, path, out);
  free(bytes);
  return st;
}

/* A sequence or optional input (a tuple): an ONNX SequenceProto or
 * OptionalProto .pb file. */
static dvm_status *read_sequence_pb(const char *path, dvm_value *out) {
  char *bytes;
  size_t size;
  dvm_status *st = dvm_cli_read_file(path, &bytes, &size);
  if (st) return st;
  st = dvmc_read_sequence_pb(bytes, size, path, out);
  free(bytes);
  return st;
}

/* A sequence input from a directory of .npy files named 0.npy, 1.npy, ...
 * (the first missing number ends it). */
static dvm_status *read_sequence_dir(const char *dir, dvm_value *out) {
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a sequence is a .pb file (SequenceProto or OptionalProto) or a "
                                                "directory of 0.npy, 1.npy, ...", dir);
  dvm_value items[4096];
  int n = 0;
  dvm_status *st = NULL;
  for (; n < 4096 && !st; n++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.npy", dir, n);
    if (access(path, F_OK) != 0) break;
    dvm_tensor *t;
    if ((st = dvm_npy_read_file(path, &t))) break;
    items[n] = dvm_value_tensor(t);
  }
  dvm_tuple *t = NULL;
  if (!st) st = dvm_tuple_create(n, items, &t);
  for (int i = 0; i < n; i++) dvm_value_clear(&items[i]);
  if (!st) *out = (dvm_value){.kind = DVM_VAL_TUPLE, .u.tuple = t};
  return st;
}

/* ONNX protobuf out: a TensorProto (dims, data_type and raw_data,
 * little-endian as ONNX stores it; dvm builds for little-endian hosts
 * only), the one way out for dtypes .npy lacks (bf16); a tuple (a sequence
 * or optional) as a SequenceProto, which an OptionalProto reader reads
 * too. Built in memory, since a message's length precedes it. */
typedef struct {
  uint8_t *p;
  size_t n, cap;
  int oom;
} pbuf;

static void put_bytes(pbuf *b, const void *data, size_t n) {
  if (b->oom || !n) return;
  if (b->n + n > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 256) + n;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, data, n);
  b->n += n;
}

static void put_varint(pbuf *b, uint64_t v) {
  uint8_t w[10];
  size_t n = 0;
  for (; v >= 0x80; v >>= 7) w[n++] = (uint8_t)(v | 0x80);
  w[n++] = (uint8_t)v;
  put_bytes(b, w, n);
}

static dvm_status *tensor_pb(const char *path, const dvm_tensor *t, pbuf *b) {
  static const int onnx_type[DVM_DTYPE_COUNT] = {
      [DVM_F32] = 1, [DVM_F16] = 10, [DVM_BF16] = 16, [DVM_F64] = 11, [DVM_I8] = 3,
      [DVM_I16] = 5, [DVM_I32] = 6,  [DVM_I64] = 7,   [DVM_U8] = 2,   [DVM_BOOL] = 9,
      [DVM_U16] = 4, [DVM_U32] = 12, [DVM_U64] = 13, [DVM_STRING] = 8};
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: writing .pb needs a CPU tensor", path);
  for (int i = 0; i < dvm_tensor_rank(t); i++) {
    put_varint(b, 0x08); /* field 1 (dims), varint */
    put_varint(b, (uint64_t)dvm_tensor_dims(t)[i]);
  }
  put_varint(b, 0x10); /* field 2 (data_type), varint */
  put_varint(b, (uint64_t)onnx_type[dvm_tensor_dtype(t)]);
  if (dvm_tensor_dtype(t) == DVM_STRING) {
    for (int64_t i = 0; i < dvm_tensor_numel(t); i++) {
      size_t len;
      const char *s = dvm_tensor_string(t, i, &len);
      put_varint(b, 0x32); /* field 6 (string_data), length-delimited */
      put_varint(b, len);
      put_bytes(b, s, len);
    }
    return NULL;
  }
  put_varint(b, 0x4a); /* field 9 (raw_data), length-delimited */
  put_varint(b, dvm_tensor_nbytes(t));
  put_bytes(b, dvm_tensor_data(t), dvm_tensor_nbytes(t));
  return NULL;
}

static dvm_status *value_pb(const char *path, const dvm_value *v, pbuf *b, int depth);

/* SequenceProto: elem_type (2: 1 tensors, 3 sequences, 0 when empty),
 * tensor_values (3) or sequence_values (5). */
static dvm_status *tuple_pb(const char *path, const dvm_tuple *t, pbuf *b, int depth) {
  int n = dvm_tuple_size(t), seqs = n && dvm_tuple_get(t, 0)->kind == DVM_VAL_TUPLE;
  put_varint(b, 0x10);
  put_varint(b, n ? (seqs ? 3 : 1) : 0);
  for (int i = 0; i < n; i++) {
    const dvm_value *v = dvm_tuple_get(t, i);
    if ((v->kind == DVM_VAL_TUPLE) != seqs)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a sequence of both tensors and sequences", path);
    pbuf item = {0};
    dvm_status *st = value_pb(path, v, &item, depth + 1);
    put_varint(b, seqs ? 0x2a : 0x1a);
    put_varint(b, item.n);
    put_bytes(b, item.p, item.n);
    b->oom |= item.oom;
    free(item.p);
    if (st) return st;
  }
  return NULL;
}

static dvm_status *value_pb(const char *path, const dvm_value *v, pbuf *b, int depth) {
  if (v->kind == DVM_VAL_TENSOR) return tensor_pb(path, v->u.tensor, b);
  if (v->kind == DVM_VAL_TUPLE && depth < 64) return tuple_pb(path, v->u.tuple, b, depth);
  return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: a %s cannot be written as .pb", path,
                        dvm_kind_name((dvm_kind)v->kind));
}

static dvm_status *write_pb(const char *path, const dvm_value *v) {
  pbuf b = {0};
  dvm_status *st = value_pb(path, v, &b, 0);
  if (!st && b.oom) st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
  FILE *f = st ? NULL : fopen(path, "wb");
  if (!st && !f) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: cannot create", path);
  if (f) {
    int ok = fwrite(b.p ? (void *)b.p : "", 1, b.n, f) == b.n;
    if (fclose(f) != 0) ok = 0;
    if (!ok) st = dvm_status_new(DVM_INVALID_ARGUMENT, "%s: cannot write", path);
  }
  free(b.p);
  return st;
}

/* A sequence result as a directory of .npy files 0.npy, 1.npy, ... */
static dvm_status *write_sequence_dir(const char *dir, const dvm_tuple *t) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: cannot create the directory", dir);
  for (int i = 0; i < dvm_tuple_size(t); i++) {
    const dvm_value *v = dvm_tuple_get(t, i);
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.npy", dir, i);
    if (v->kind != DVM_VAL_TENSOR)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "%s: item %d is a %s; write a sequence of sequences as .pb", dir,
                            i, dvm_kind_name((dvm_kind)v->kind));
    dvm_status *st = dvm_npy_write_file(path, v->u.tensor);
    if (st) return st;
  }
  return NULL;
}

static int ends_with_pb(const char *path) {
  size_t len = strlen(path);
  return len > 3 && !strcmp(path + len - 3, ".pb");
}

static int ends_with_npy(const char *path) {
  size_t len = strlen(path);
  return len > 4 && !strcmp(path + len - 4, ".npy");
}

static dvm_status *load_input(const dvm_param_info *p, const char *value, dvm_value *out) {
  char *end;
  if (p->kind == DVM_VAL_INT) {
    long long v = strtoll(value, &end, 0);
    if (*end || end == value)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" is an int; \"%s\" is not one", p->name, value);
    *out = dvm_value_int(v);
    return NULL;
  }
  if (p->kind == DVM_VAL_FLOAT) {
    double v = strtod(value, &end);
    if (*end || end == value)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "input \"%s\" is a float; \"%s\" is not one", p->name, value);
    *out = dvm_value_float(v);
    return NULL;
  }
  if (p->kind == DVM_VAL_TUPLE) {
    dvm_status *st = ends_with_pb(value) ? read_sequence_pb(value, out) : read_sequence_dir(value, out);
    return st ? dvm_status_annotate(st, "input \"%s\"", p->name) : NULL;
  }
  dvm_tensor *t;
  dvm_status *st = ends_with_pb(value) ? read_pb(value, &t) : dvm_npy_read_file(value, &t);
  if (st) return dvm_status_annotate(st, "input \"%s\"", p->name);
  *out = dvm_value_tensor(t);
  return NULL;
}

static int pick_function(const dvm_module *m, const char *name) {
  if (name) return dvm_module_find_function(m, name);
  int f = dvm_module_find_function(m, "main");
  if (f < 0 && dvm_module_function_count(m) == 1) f = 0;
  return f;
}

int dvm_cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      {"input", required_argument, 0, 'i'}, {"output", required_argument, 0, 'o'},
      {"function", required_argument, 0, 'f'}, {"device", required_argument, 0, 'd'},
      {"threads", required_argument, 0, 't'}, {"show", required_argument, 0, 'n'},
      {"stats", no_argument, 0, 's'}, {"tf32", no_argument, 0, 'T'}, {"help", no_argument, 0, 'h'},
      {"verbose", no_argument, 0, 'v'}, {"profile", no_argument, 0, 'P'},
      {"trace", required_argument, 0, 'R'}, {"input-name", required_argument, 0, 'I'},
      {"output-name", required_argument, 0, 'N'}, DVM_CLI_LIMIT_OPTIONS, {0, 0, 0, 0}};
  dvm_cli_arg ins[2 * MAX_BINDINGS], outs[2 * MAX_BINDINGS];
  int nin = 0, nout = 0, show = 8, stats = 0, verbose = 0, profile = 0, bad;
  double timeout = 0;
  const char *fname = NULL, *trace = NULL;
  dvm_profile *prof = NULL;
  dvm_vm_options vo;
  dvm_vm_options_init(&vo);
  int device_auto = 1;
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "i:o:f:d:t:n:shv", opts, NULL)) != -1;) {
    switch (c) {
    case 'i': case 'I':
      if (nin == 2 * MAX_BINDINGS) return dvm_cli_usage_error("run", "too many --input");
      ins[nin++] = (dvm_cli_arg){optarg, c == 'I'};
      break;
    case 'o': case 'N':
      if (nout == 2 * MAX_BINDINGS) return dvm_cli_usage_error("run", "too many --output");
      outs[nout++] = (dvm_cli_arg){optarg, c == 'N'};
      break;
    case 'f': fname = optarg; break;
    case 'd':
      device_auto = strcmp(optarg, "auto") == 0;
      if (!device_auto && !dvm_device_parse(optarg, &vo.device))
        return dvm_cli_usage_error("run", "unknown device \"%s\" (cpu, cuda, auto)", optarg);
      break;
    case 't': vo.threads = atoi(optarg); if (vo.threads < 1) return dvm_cli_usage_error("run", "--threads must be >= 1"); break;
    case 'n': show = atoi(optarg); break;
    case 's': stats = 1; break;
    case 'P': profile = 1; break;
    case 'R': trace = optarg; break;
    case 'T': vo.allow_tf32 = 1; break;
    case 'v': verbose = 1; break;
    case 'S': case 'O': case 'M':
      if ((bad = dvm_cli_limit_option("run", c, optarg, &vo, &timeout))) return bad;
      break;
    case 'h': fputs(usage_text, stdout); return DVM_EXIT_OK;
    default: fputs(usage_text, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fputs(usage_text, stderr);
    return dvm_cli_usage_error("run", "expected one MODEL.dvmb");
  }
  dvm_module *m;
  dvm_status *st = dvm_module_load_file(argv[optind], NULL, &m);
  if (st) return dvm_cli_fail("run", st);
  int rc = DVM_EXIT_OK, f = pick_function(m, fname);
  int np = 0, nr = 0;
  dvm_value args[MAX_BINDINGS] = {{0}}, res[MAX_BINDINGS] = {{0}};
  const char *in_slots[MAX_BINDINGS] = {0}, *out_slots[MAX_BINDINGS] = {0};
  dvm_vm *vm = NULL;
  if (f < 0) {
    rc = dvm_cli_usage_error("run", "no function \"%s\" in %s", fname ? fname : "main", argv[optind]);
    goto done;
  }
  np = dvm_function_param_count(m, f);
  nr = dvm_function_result_count(m, f);
  if (np > MAX_BINDINGS || nr > MAX_BINDINGS) {
    rc = dvm_cli_usage_error("run", "function has more than %d inputs or results", MAX_BINDINGS);
    goto done;
  }
  if ((st = dvm_cli_bind(m, f, 0, ins, nin, np, in_slots)) || (st = dvm_cli_bind(m, f, 1, outs, nout, nr, out_slots))) {
    rc = dvm_cli_fail("run", st);
    goto done;
  }
  for (int p = 0; p < np; p++) {
    dvm_param_info info;
    dvm_function_param(m, f, p, &info);
    if (!in_slots[p]) {
      rc = dvm_cli_usage_error("run", "function \"%s\" takes %d inputs; input %d (\"%s\") is missing",
                               dvm_function_name(m, f), np, p, info.name);
      goto done;
    }
    if ((st = load_input(&info, in_slots[p], &args[p]))) {
      rc = dvm_cli_fail("run", st);
      goto done;
    }
  }
  if (device_auto) vo.device = dvm_cli_auto_device(m, verbose);
  if ((st = dvm_vm_create(m, &vo, &vm)) || (st = dvm_vm_find_function(vm, dvm_function_name(m, f), &f))) {
    rc = dvm_cli_fail("run", st);
    goto done;
  }
  if ((profile || trace) && (st = dvm_cli_profile_attach(vm, trace, &prof))) {
    rc = dvm_cli_fail("run", st);
    goto done;
  }
  dvm_cli_watch(vm, timeout);
  st = dvm_vm_invoke(vm, f, args, np, res, nr);
  dvm_cli_unwatch();
  if (st) {
    rc = dvm_cli_run_fail("run", st);
    goto done;
  }
  for (int r = 0; r < nr; r++) {
    dvm_param_info info;
    dvm_function_result(m, f, r, &info);
    if (out_slots[r]) {
      if (res[r].kind != DVM_VAL_TENSOR && (res[r].kind != DVM_VAL_TUPLE || ends_with_npy(out_slots[r]))) {
        rc = dvm_cli_usage_error("run", "result \"%s\" is a %s, not a tensor: it cannot be saved as .npy",
                                 info.name, dvm_kind_name((dvm_kind)res[r].kind));
        goto done;
      }
      if ((st = ends_with_pb(out_slots[r])          ? write_pb(out_slots[r], &res[r])
                : res[r].kind == DVM_VAL_TUPLE ? write_sequence_dir(out_slots[r], res[r].u.tuple)
                                               : dvm_npy_write_file(out_slots[r], res[r].u.tensor))) {
        rc = dvm_cli_fail("run", st);
        goto done;
      }
    } else {
      printf("%s: ", info.name);
      dvm_cli_print_value(stdout, &res[r], show);
      putchar('\n');
    }
  }
  if (stats) {
    dvm_vm_stats s;
    dvm_vm_get_stats(vm, &s);
    printf("stats: instructions=%llu kernel_calls=%llu host_syncs=%llu", (unsigned long long)s.instructions,
           (unsigned long long)s.kernel_calls, (unsigned long long)s.host_syncs);
    for (int d = 0; d < DVM_DEVICE_COUNT; d++) {
      const dvm_pool_stats *p = &s.pool[d];
      if (d != DVM_DEVICE_CPU && !p->allocs) continue; /* a device this run never used */
      printf(" %s_pool: in_use=%llu peak=%llu cached=%llu allocs=%llu reuses=%llu",
             dvm_device_name((dvm_device_kind)d), (unsigned long long)p->in_use,
             (unsigned long long)p->peak, (unsigned long long)p->cached,
             (unsigned long long)p->allocs, (unsigned long long)p->reuses);
    }
    putchar('\n');
  }
  if (prof && (st = dvm_cli_profile_finish(vm, prof, trace, profile))) rc = dvm_cli_fail("run", st);
done:
  for (int i = 0; i < np; i++) dvm_value_clear(&args[i]);
  for (int i = 0; i < nr; i++) dvm_value_clear(&res[i]);
  dvm_vm_destroy(vm);
  dvm_profile_destroy(prof);
  dvm_module_release(m);
  return rc;
}
