/* The dvm command: subcommand dispatch and shared error reporting. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} commands[] = {
    {"compile", dvm_cmd_compile, "compile an ONNX model to a .dvmb"},
    {"run", dvm_cmd_run, "run a function of a .dvmb with inputs from .npy files"},
    {"asm", dvm_cmd_asm, "assemble .dvms text into a .dvmb"},
    {"disasm", dvm_cmd_disasm, "print a .dvmb as .dvms text"},
    {"inspect", dvm_cmd_inspect, "list functions, signatures, constants and kernels"},
    {"repl", dvm_cmd_repl, "step through a function's bytecode, watching values and shapes"},
    {"bench", dvm_cmd_bench, "time a function on random inputs of given shapes"},
    {"generate", dvm_cmd_generate, "generate tokens with a decoder LLM (ONNX Runtime GenAI model folder)"},
    {"serve", dvm_cmd_serve, "serve a model repository over HTTP (KServe v2 / Triton protocol)"},
};

static void usage(FILE *out) {
  fputs("usage: dvm COMMAND [ARGS]   (dvm COMMAND --help for its options)\n\ncommands:\n", out);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
  fputs("\nexit codes: 0 success, 1 runtime error, 2 usage or input error\n", out);
}

int dvm_cli_fail(const char *cmd, dvm_status *st) {
  fprintf(stderr, "dvm %s: error: %s\n", cmd, dvm_status_message(st));
  dvm_code code = dvm_status_code(st);
  dvm_status_free(st);
  switch (code) {
  case DVM_INVALID_ARGUMENT: case DVM_NOT_FOUND: case DVM_CORRUPT: case DVM_IO:
  case DVM_UNAVAILABLE: case DVM_UNIMPLEMENTED:
    return DVM_EXIT_USAGE;
  default: return DVM_EXIT_RUNTIME;
  }
}

int dvm_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "dvm %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputs("\n", stderr);
  va_end(ap);
  return DVM_EXIT_USAGE;
}

int dvm_cli_load_one(const char *cmd, const char *usage, int argc, char **argv, dvm_module **m) {
  *m = NULL;
  if (argc == 2 && strcmp(argv[1], "--help") == 0) {
    fputs(usage, stdout);
    return DVM_EXIT_OK;
  }
  if (argc != 2 || argv[1][0] == '-') {
    fputs(usage, stderr);
    return DVM_EXIT_USAGE;
  }
  dvm_status *st = dvm_module_load_file(argv[1], NULL, m);
  return st ? dvm_cli_fail(cmd, st) : -1;
}

/* What a command printed may have failed to go out (a full disk,
 * /dev/full): that is the command's failure too. Returns its exit code. */
static int flushed(const char *cmd, int rc) {
  if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
  fprintf(stderr, "dvm %s: error: writing to standard output: %s\n", cmd, strerror(errno));
  return rc ? rc : DVM_EXIT_RUNTIME;
}

dvm_device_kind dvm_cli_auto_device(const dvm_module *m, int verbose) {
  char why[320];
  dvm_device_kind d = dvm_device_auto(m, why, sizeof why);
  int cuda_functions = 0;
  for (int f = 0; f < dvm_module_function_count(m); f++) {
    const char *name = dvm_function_name(m, f);
    size_t n = strlen(name), k = strlen(DVM_CUDA_SUFFIX);
    cuda_functions |= n > k && strcmp(name + n - k, DVM_CUDA_SUFFIX) == 0;
  }
  if (verbose || cuda_functions) fprintf(stderr, "dvm: running on %s\n", why);
  return d;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return DVM_EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return flushed("help", DVM_EXIT_OK);
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return flushed(argv[1], commands[i].fn(argc - 1, argv + 1));
  fprintf(stderr, "dvm: unknown command \"%s\"\n", argv[1]);
  usage(stderr);
  return DVM_EXIT_USAGE;
}
