/* dvm compile: an ONNX model to a .dvmb. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fold.h"
#include "ir.h"
#include "infer.h"
#include "lower.h"
#include "onnx_import.h"
#include "ops.h"
#include "pass.h"
#include "place_cuda.h"

#define MAX_DIMS 64

static const char usage_text[] =
    "usage: dvm compile MODEL.onnx -o MODEL.dvmb [options]\n"
    "  --target cpu[,cuda]      code for these devices (default cpu); cuda adds a NAME@cuda\n"
    "                           clone of each function with NVRTC-compiled kernels (the CPU\n"
    "                           function stays, so the file runs anywhere)\n"
    "  --dim NAME=LO..HI        the range of a symbolic dim (checked by the input guards)\n"
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
    "                           are in the .dvmb's folder or below it)\n";

/* The op table (compiler/ops.def) as docs/compiler.md shows it. */
static int list_ops(void) {
  printf("| ONNX op | kernel | from opset | shape rule | fuses | output dtype |\n| --- | --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < dvmc_op_count(); i++) {
    const dvmc_op *op = dvmc_op_at(i);
    printf("| %s%s%s | %s%s%s | %d | %s | %s | ", op->domain, op->domain[0] ? "." : "", op->name,
           op->kernel ? "`" : "",
           op->kernel ? op->kernel : "(own lowering)", op->kernel ? "`" : "", op->min_opset,
           op->shape_rule ? "yes" : "no: at run time", op->fused >= 0 ? "yes" : "");
    for (const char *p = op->dtype ? op->dtype : "input 0's"; *p; p++) /* "in2|u8": a | escaped in a cell */
      printf("%s%c", *p == '|' ? "\\" : "", *p);
    printf(" |\n");
  }
  return fflush(stdout) == 0 && !ferror(stdout) ? DVM_EXIT_OK : DVM_EXIT_RUNTIME;
}

/* The graph rewrites (compiler/pass.c's table), one per line. */
static int list_passes(void) {
  for (int i = 0; i < dvmc_pass_count(); i++) printf("%-13s %s\n", dvmc_pass_at(i)->name, dvmc_pass_at(i)->what);
  return fflush(stdout) == 0 && !ferror(stdout) ? DVM_EXIT_OK : DVM_EXIT_RUNTIME;
}

/* A declared type that inference contradicts: said, and compiling goes on. */
static void warn(void *ctx, const char *msg) {
  (void)ctx;
  fprintf(stderr, "dvm compile: warning: %s\n", msg);
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
      {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *out = NULL, *shapes = NULL, *dims[MAX_DIMS];
  int ndims = 0, dump = 0, cuda = 0, embed = 0;
  uint32_t disabled = 0;
  dvmc_options co = {0};
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "o:t:D:IS:Lf:NTPX:REh", opts, NULL)) != -1;) {
    switch (c) {
    case 'o': out = optarg; break;
    case 't':
      for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ","))
        if (strcmp(t, "cuda") == 0) cuda = 1;
        else if (strcmp(t, "cpu") != 0)
          return dvm_cli_usage_error("compile", "unknown target \"%s\" (cpu, cuda)", t);
      break;
    case 'D':
      if (ndims == MAX_DIMS) return dvm_cli_usage_error("compile", "too many --dim");
      dims[ndims++] = optarg;
      break;
    case 'I': dump = 1; break;
    case 'S': shapes = optarg; break;
    case 'f': co.function = optarg; break;
    case 'N': co.no_fusion = 1; break;
    case 'T': co.no_stitch = 1; break;
    case 'P': co.no_plan = 1; break;
    case 'E': embed = 1; break;
    case 'L': return list_ops();
    case 'R': return list_passes();
    case 'X': {
      int p = dvmc_pass_find(optarg);
      if (p < 0) return dvm_cli_usage_error("compile", "--disable %s: no such pass (--list-passes names them)", optarg);
      disabled |= 1u << p;
      break;
    }
    case 'h': fputs(usage_text, stdout); return DVM_EXIT_OK;
    default: fputs(usage_text, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || (!out && !dump && !shapes)) {
    fputs(usage_text, stderr);
    return DVM_EXIT_USAGE;
  }
  int progress = isatty(STDERR_FILENO);
  double t0 = dvm_cli_now();
  dvmc_ctx *c;
  dvmc_graph *g = NULL;
  dvm_status *st = dvmc_ctx_create(&c);
  if (st) return dvm_cli_fail("compile", st);
  int rc = DVM_EXIT_OK;
  uint8_t *bytes = NULL;
  size_t size = 0;
  if ((st = dvmc_import_onnx(c, argv[optind], &g))) {
    rc = dvm_cli_fail("compile", st);
    goto done;
  }
  if (progress) fprintf(stderr, "dvm compile: imported %d nodes (%.2fs)\n", g->nnodes, dvm_cli_now() - t0);
  int folded = 0;
  if ((st = dvmc_fold(c, g, &folded))) {
    rc = dvm_cli_fail("compile", st);
    goto done;
  }
  if (progress && folded) fprintf(stderr, "dvm compile: folded %d BatchNormalization nodes into Convs\n", folded);
  for (int i = 0; i < ndims; i++)
    if ((st = dvmc_graph_set_dim(c, g, dims[i]))) {
      rc = dvm_cli_usage_error("compile", "--dim %s", dvm_status_message(st));
      dvm_status_free(st);
      goto done;
    }
  if ((st = dvmc_infer(c, g))) {
    rc = dvm_cli_fail("compile", st);
    goto done;
  }
  dvmc_infer_disagreements(g, warn, NULL);
  int rewrites[32] = {0};
  if ((st = dvmc_passes_run(c, g, disabled | (cuda ? dvmc_passes_cpu_only() : 0), rewrites))) {
    rc = dvm_cli_fail("compile", st);
    goto done;
  }
  for (int i = 0; progress && i < dvmc_pass_count(); i++)
    if (rewrites[i]) fprintf(stderr, "dvm compile: pass %s rewrote %d patterns\n", dvmc_pass_at(i)->name, rewrites[i]);
  int total;
  const dvmc_node *lost;
  int unknown = dvmc_infer_unknown(g, &total, &lost);
  if (unknown && lost)
    fprintf(stderr, "dvm compile: %d of %d values have unknown shapes; fusion and memory planning skip them; "
            "first at node \"%s\" (%s): %s\n", unknown, total, lost->name, lost->op, lost->shape_lost);
  else if (unknown)
    fprintf(stderr, "dvm compile: %d of %d values have unknown shapes; fusion and memory planning skip them\n",
            unknown, total);
  if (dump) dvmc_graph_print(g, stdout);
  if (shapes) {
    FILE *f = fopen(shapes, "w");
    if (f) dvmc_graph_print_shapes(g, f);
    if (!f || ferror(f) | fclose(f)) {
      rc = dvm_cli_fail("compile", dvm_status_new(DVM_IO, "%s: cannot write", shapes));
      goto done;
    }
  }
  if (!out) goto done;
  co.no_stitch |= cuda; /* row programs run on the CPU only (place_cuda.c refuses them) */
  char *out_dir = embed ? NULL : strdup(out);
  if (out_dir) {
    char *slash = strrchr(out_dir, '/');
    if (!slash) strcpy(out_dir, ".");
    else slash[slash == out_dir] = 0; /* "/x.dvmb" is in "/" */
  }
  co.data_dir = out_dir;
  if ((st = dvmc_lower(c, g, &co, &bytes, &size))) {
    rc = dvm_cli_fail("compile", dvm_status_annotate(st, "%s", argv[optind]));
    goto done;
  }
  if (cuda) {
    uint8_t *placed;
    if ((st = dvmc_place_cuda(bytes, size, &placed, &size))) {
      rc = dvm_cli_fail("compile", dvm_status_annotate(st, "%s", argv[optind]));
      goto done;
    }
    free(bytes);
    bytes = placed;
    if (progress) fprintf(stderr, "dvm compile: placed for CUDA (%.2fs)\n", dvm_cli_now() - t0);
  }
  FILE *f = fopen(out, "wb");
  if (!f || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
    if (f) fclose(f);
    rc = dvm_cli_fail("compile", dvm_status_new(DVM_IO, "%s: cannot write", out));
    goto done;
  }
  if (progress) fprintf(stderr, "dvm compile: wrote %s, %zu bytes (%.2fs)\n", out, size, dvm_cli_now() - t0);
done:
  free((char *)co.data_dir);
  free(bytes);
  dvmc_ctx_destroy(c);
  return rc;
}
