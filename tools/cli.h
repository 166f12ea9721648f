/* Shared pieces of the dvm command: subcommands, exit codes, printing. */
#ifndef DVM_CLI_H
#define DVM_CLI_H

#include <stdio.h>

#include "dvm/dvm.h"
#include "dvmc.h"

/* Exit codes: 0 success, 1 runtime error, 2 usage or input error. */
enum { DVM_EXIT_OK = 0, DVM_EXIT_RUNTIME = 1, DVM_EXIT_USAGE = 2 };

/* Prints "dvm CMD: error: MESSAGE", frees st, returns the exit code its
 * code maps to (bad files and inputs: 2; everything else: 1). */
int dvm_cli_fail(const char *cmd, dvm_status *st);
/* Prints a usage error and returns 2. */
int dvm_cli_usage_error(const char *cmd, const char *fmt, ...) DVM_PRINTF(2, 3);

int dvm_cmd_compile(int argc, char **argv);
/* Compiles the ONNX model at `onnx` with o's settings into the .dvmb file
 * `out` (NULL: only o's dumps), referring to the weights of external data
 * files in out's folder or below unless `embed` (then copying them).
 * Warnings and notes go to stderr, and progress when it is a terminal;
 * o's diag, no_lower and data_dir are set here. */
DVM_MUST_USE dvm_status *dvm_cli_compile(const char *onnx, const char *out, int embed, dvmc_compile_options *o);
int dvm_cmd_run(int argc, char **argv);
int dvm_cmd_asm(int argc, char **argv);
int dvm_cmd_disasm(int argc, char **argv);
int dvm_cmd_inspect(int argc, char **argv);
int dvm_cmd_bench(int argc, char **argv);
int dvm_cmd_repl(int argc, char **argv);
int dvm_cmd_serve(int argc, char **argv);
int dvm_cmd_generate(int argc, char **argv);

/* Element i of a CPU tensor as a double, for any dtype. */
double dvm_cli_element(const dvm_tensor *t, int64_t i);
/* "f32[2,3] min=... max=... mean=... nan=0 inf=0 [a, b, c, ...]": at most
 * `show` elements (all of them when show < 0). */
void dvm_cli_print_tensor(FILE *out, const dvm_tensor *t, int show);
/* Prints a value of any kind in one line. */
void dvm_cli_print_value(FILE *out, const dvm_value *v, int show);
/* Prints a signature entry: "x: tensor f32[batch, 4]". */
void dvm_cli_print_param(FILE *out, const dvm_param_info *p);

/* For commands that take one MODEL.dvmb and no options: handles --help and
 * usage errors (returning the exit code, *m NULL) or loads the module
 * (returning -1, *m set; release it). */
int dvm_cli_load_one(const char *cmd, const char *usage, int argc, char **argv, dvm_module **m);

/* One --input or --output argument (text), or the NAME of an --input-name
 * or --output-name before one (is_name). */
typedef struct {
  const char *text;
  int is_name;
} dvm_cli_arg;

/* Binds args, in command-line order, to function f's parameters (result
 * 0) or results (result 1): slots[k] (nslots of them, NULL on entry) gets
 * the FILE (or number) for position k, pointing into args' text. The forms
 * are in tools/bind.c and docs/cli.md; an unknown or ambiguous name, a
 * position bound twice, one argument too many, or a name not followed by
 * its argument is an error naming it. */
DVM_MUST_USE dvm_status *dvm_cli_bind(const dvm_module *m, int f, int result, const dvm_cli_arg *args, int nargs,
                                      int nslots, const char **slots);

/* The device `--device auto` means for m (dvm_device_auto). It says which
 * on stderr, and why not CUDA, when m has CUDA functions or with verbose:
 * a CPU-only module runs quietly. */
dvm_device_kind dvm_cli_auto_device(const dvm_module *m, int verbose);

/* --profile / --trace FILE: a profile attached to vm (with trace events
 * when trace is not NULL); then detached, printed to stdout (if print) and
 * the trace written. */
DVM_MUST_USE dvm_status *dvm_cli_profile_attach(dvm_vm *vm, const char *trace, dvm_profile **out);
DVM_MUST_USE dvm_status *dvm_cli_profile_finish(dvm_vm *vm, dvm_profile *p, const char *trace, int print);

/* Seconds on the monotonic clock. */
double dvm_cli_now(void);

/* Reads a whole regular file (others are refused: no FIFO waits, no
 * endless device) into malloc'ed memory (NUL-terminated). */
DVM_MUST_USE dvm_status *dvm_cli_read_file(const char *path, char **out, size_t *size);

#endif
