/* Run limits of the commands that run a VM (run, bench, repl): the options
 * --max-steps, --timeout and --memory-limit, mapped to the VM's step limit,
 * its interrupt and its pool limit; and SIGINT, which interrupts through
 * the VM too, so that the run stops at its next back edge or call and says
 * where. */
#ifndef DVM_TOOLS_RUNLIMITS_H
#define DVM_TOOLS_RUNLIMITS_H

#include <getopt.h>

#include "dvm/dvm.h"

/* The getopt_long entries (values 'S', 'O', 'M'), and their usage lines. */
#define DVM_CLI_LIMIT_OPTIONS                                                                   \
  {"max-steps", required_argument, 0, 'S'}, {"timeout", required_argument, 0, 'O'},          \
      {"memory-limit", required_argument, 0, 'M'}
#define DVM_CLI_LIMIT_USAGE                                                                     \
  "  --max-steps N          stop an invocation after N instructions\n"                         \
  "  --timeout SECONDS      stop after SECONDS of wall time (a fraction is fine)\n"            \
  "  --memory-limit BYTES   most bytes each device pool may hold (suffix K, M or G: 1024s)\n"  \
  "                         (Ctrl-C stops the run where it is, says where, and exits 130)\n"

/* Exit code of a run stopped by SIGINT, as shells give (128 + 2). */
#define DVM_EXIT_INTERRUPTED 130

/* Handles option c (one of 'S', 'O', 'M') with its argument: sets vo or
 * *timeout. Returns 0, or the exit code of a usage error (printed). */
int dvm_cli_limit_option(const char *cmd, int c, const char *arg, dvm_vm_options *vo, double *timeout);

/* From here until dvm_cli_unwatch, SIGINT and the end of `timeout` seconds
 * (0: none) interrupt vm; a second SIGINT ends the process as usual. */
void dvm_cli_watch(dvm_vm *vm, double timeout);
void dvm_cli_unwatch(void);
/* Whether SIGINT or the timeout has fired since dvm_cli_watch. */
int dvm_cli_stopped(void);

/* Reports a failed invocation like dvm_cli_fail, saying when it was SIGINT
 * (exit 130) or the timeout (exit 1) that stopped it; frees st. */
int dvm_cli_run_fail(const char *cmd, dvm_status *st);

#endif
