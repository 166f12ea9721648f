/* dvm compile: an ONNX model to a .dvmb. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dvmc.h"

#define MAX_DIMS 64 /* --dim and --disable options each */

static const char usage_text[] =
    "usage: dvm compile MODEL.onnx -o MODEL.dvmb [options]\n"
    "  --target cpu[,cuda]      code for these devices (default cpu); cuda adds a NAME@cuda\n"
    "                           clone of each function with NVRTC-compiled kernels (the CPU\n"
    "                           function stays, so the file runs anywhere)\n"
    "  --dim NAME=LO..HI        the range of a symbolic dim (checked by the input guards);\n"
    "                           NAME=N is NAME=N..N\n"
    "  --dump-ir                print the imported graph and stop unless -o is given\n"
    "  --dump-shapes FILE       write every value's inferred dtype and dims as JSON\n"
    "  --list-ops               print the ONNX ops dvm compiles (a Markdown table) and exit\n"
    "  --disable PASS           skip graph rewrite PASS (repeatable; --list-passes names them)\n"
    "  --list-passes            print the graph rewrites, in the order they run, and exit\n"
    "  --function NAME          name of the entry function (default main)\n"
    "  --no-fusion              keep every elementwise node its own kernel call\n"
    "  --no-stitch              keep reductions out of fused groups (no row stitching of a\n"
    "                           reduction over the last axis with its elementwise neighbours)\n"
    "  --no-plan                no memory plan: every tensor its own allocation\n"
    "  --embed-data             copy the weights of the model's external data files into the\n"
    "                           .dvmb (default: refer to them where they lie, when the files\n"
    "                           are in the .dvmb's folder or below it)\n"
    "  --last-position OUTPUT   compute OUTPUT [batch, seq, ...] for the last position of seq\n"
    "                           only (a generator's logits: dvm generate reads no other)\n";

/* The op table (compiler/ops.def) as docs/compiler.md shows it. */
static int list_ops(void) {
  printf("| ONNX op | kernel | from opset | shape rule | fuses | output dtype |\n| --- | --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < dvmc_op_count(); i++) {
    dvmc_op_info op;
    dvmc_op_describe(i, &op);
    printf("| %s%s%s | %s%s%s | %d | %s | %s | ", op.domain, op.domain[0] ? "." : "", op.name,
           op.kernel ? "`" : "", op.kernel ? op.kernel : "(own lowering)", op.kernel ? "`" : "", op.min_opset,
           op.shape_rule ? "yes" : "no: at run time", op.fuses ? "yes" : "");
    for (const char *p = op.dtype ? op.dtype : "input 0's"; *p; p++) /* "in2|u8": a | escaped in a cell */
      printf("%s%c", *p == '|' ? "\\" : "", *p);
    printf(" |\n");
  }
  return fflush(stdout) == 0 && !ferror(stdout) ? DVM_EXIT_OK : DVM_EXIT_RUNTIME;
}

/* The graph rewrites, one per line, in the order they run. */
static int list_passes(void) {
  for (int i = 0; i < dvmc_pass_count(); i++) {
    dvmc_pass_info p;
    dvmc_pass_describe(i, &p);
    printf("%-13s %s\n", p.name, p.what);
  }
  return fflush(stdout) == 0 && !ferror(stdout) ? DVM_EXIT_OK : DVM_EXIT_RUNTIME;
}

/* Warnings always; the note on unknown shapes always; progress, timed,
 * when stderr is a terminal. */
typedef struct diag_to {
  int progress;
  double t0;
} diag_to;

static void diag(void *ctx, dvmc_diag_kind kind, const char *msg) {
  const diag_to *d = ctx;
  if (kind == DVMC_DIAG_WARNING) fprintf(stderr, "dvm compile: warning: %s\n", msg);
  else if (kind == DVMC_DIAG_NOTE) fprintf(stderr, "dvm compile: %s\n", msg);
  else if (d->progress) fprintf(stderr, "dvm compile: %s (%.2fs)\n", msg, dvm_cli_now() - d->t0);
}

/* The folder of the file at path (malloc'ed; NULL: no memory). */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  return strndup(path, slash == path ? 1 : (size_t)(slash - path)); /* "/x.dvmb" is in "/" */
}

static dvm_status *write_file(const char *path, const uint8_t *bytes, size_t size) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(bytes, 1, size, f) == size;
  if (f) ok &= fclose(f) == 0;
  return ok ? NULL : dvm_status_new(DVM_IO, "%s: cannot write", path);
}

dvm_status *dvm_cli_compile(const char *onnx, const char *out, int embed, dvmc_compile_options *o) {
  diag_to d = {isatty(STDERR_FILENO), dvm_cli_now()};
  o->diag = diag;
  o->diag_ctx = &d;
  o->no_lower = !out;
  char *dir = out && !embed ? folder_of(out) : NULL;
  if (out && !embed && !dir) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  o->data_dir = dir;
  uint8_t *bytes;
  size_t size;
  dvm_status *st = dvmc_compile_file(onnx, o, &bytes, &size);
  if (!st && out) st = write_file(out, bytes, size);
  free(bytes);
  free(dir);
  o->data_dir = NULL;
  if (!st && out && d.progress)
    fprintf(stderr, "dvm compile: wrote %s, %zu bytes (%.2fs)\n", out, size, dvm_cli_now() - d.t0);
  return st;
}

int dvm_cmd_compile(int argc, char **argv) {
  static const struct option opts[] = {
      {"output", required_argument, 0, 'o'}, {"target", required_argument, 0, 't'},
      {"dim", required_argument, 0, 'D'},    {"dump-ir", no_argument, 0, 'I'},
      {"dump-shapes", required_argument, 0, 'S'}, {"list-ops", no_argument, 0, 'L'},
      {"function", required_argument, 0, 'f'}, {"no-fusion", no_argument, 0, 'N'},
      {"no-stitch", no_argument, 0, 'T'},
      {"no-plan", no_argument, 0, 'P'}, {"disable", required_argument, 0, 'X'},
      {"list-passes", no_argument, 0, 'R'}, {"embed-data", no_argument, 0, 'E'},
      {"last-position", required_argument, 0, 'l'},
      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *out = NULL, *shapes = NULL, *dims[MAX_DIMS], *disable[MAX_DIMS];
  int embed = 0;
  dvmc_compile_options co;
  dvmc_compile_options_init(&co);
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "o:t:D:IS:Lf:NTPX:REl:h", opts, NULL)) != -1;) {
    switch (c) {
    case 'o': out = optarg; break;
    case 't':
      for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ","))
        if (strcmp(t, "cuda") == 0) co.cuda = true;
        else if (strcmp(t, "cpu") != 0)
          return dvm_cli_usage_error("compile", "unknown target \"%s\" (cpu, cuda)", t);
      break;
    case 'D':
      if (co.ndims == MAX_DIMS) return dvm_cli_usage_error("compile", "too many --dim");
      dims[co.ndims++] = optarg;
      break;
    case 'I': co.dump_ir = stdout; break;
    case 'S': shapes = optarg; break;
    case 'f': co.function = optarg; break;
    case 'N': co.no_fusion = true; break;
    case 'T': co.no_stitch = true; break;
    case 'P': co.no_plan = true; break;
    case 'E': embed = 1; break;
    case 'l': co.last_position = optarg; break;
    case 'L': return list_ops();
    case 'R': return list_passes();
    case 'X':
      if (dvmc_pass_find(optarg) < 0)
        return dvm_cli_usage_error("compile", "--disable %s: no such pass (--list-passes names them)", optarg);
      if (co.ndisable == MAX_DIMS) return dvm_cli_usage_error("compile", "too many --disable");
      disable[co.ndisable++] = optarg;
      break;
    case 'h': fputs(usage_text, stdout); return DVM_EXIT_OK;
    default: fputs(usage_text, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || (!out && !co.dump_ir && !shapes)) {
    fputs(usage_text, stderr);
    return DVM_EXIT_USAGE;
  }
  co.dims = dims;
  co.disable = disable;
  FILE *f = shapes ? fopen(shapes, "w") : NULL;
  if (shapes && !f) return dvm_cli_fail("compile", dvm_status_new(DVM_IO, "%s: cannot write", shapes));
  co.dump_shapes = f;
  dvm_status *st = dvm_cli_compile(argv[optind], out, embed, &co);
  if (f && (ferror(f) | fclose(f)) && !st) st = dvm_status_new(DVM_IO, "%s: cannot write", shapes);
  return st ? dvm_cli_fail("compile", st) : DVM_EXIT_OK;
}
