/* dvm repl: step through a function's bytecode and watch values and shapes.
 *
 * Built on the public stepping API (dvm/debug.h): the REPL runs one
 * instruction at a time and checks its breakpoints between steps.
 * Interactive use gets line editing, history and command completion from
 * libedit; commands also come from a pipe or --script FILE, echoed so that
 * transcripts read like a session. */
#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli.h"
#include "dvm/npy.h"
#include "runlimits.h"

#define MAX_INPUTS 64
#define MAX_BREAKS 64

typedef enum { BP_INSTR, BP_OPCODE, BP_CALLEE, BP_NODE, BP_FUNCTION } bp_kind;

typedef struct {
  bp_kind kind;
  int function; /* BP_INSTR, BP_FUNCTION */
  int instr;
  char name[128];
} breakpoint;

typedef struct {
  dvm_module *m;
  dvm_vm *vm;
  int f;
  char *inputs[MAX_INPUTS]; /* files (or numbers) per parameter */
  breakpoint bp[MAX_BREAKS];
  int nbp;
  int quit;
} repl;

static const char *const command_names[] = {
    "break", "continue", "delete", "disasm", "finish", "help", "info", "input", "mem",
    "next", "print", "quit", "regs", "restart", "run", "save", "shape", "step", "where", NULL};

static const char help_text[] =
    "  run                  start (again) and continue to a breakpoint or the end\n"
    "  restart              start (again), stopped before the first instruction\n"
    "  step [N]             run N instructions (default 1), into calls\n"
    "  next                 run one instruction, over calls\n"
    "  finish               run until the current function returns\n"
    "  continue             run to the next breakpoint or the end\n"
    "  break SPEC           stop before: N or FUNC:N (instruction), opcode NAME,\n"
    "                       kernel NAME (kernel, shape, host function or callee),\n"
    "                       node NAME (source node), function NAME (its entry)\n"
    "  delete [N]           delete breakpoint N, or all\n"
    "  info breakpoints     list breakpoints\n"
    "  regs                 registers of the current frame that hold values\n"
    "  print REG [-full]    a register: kind, dtype, shape, statistics, elements\n"
    "  shape REG            a register's shape\n"
    "  disasm [A[-B]]       the current function around the current instruction\n"
    "  where                the call frames\n"
    "  mem                  memory pool statistics\n"
    "  input NAME FILE      bind an input for the next run (.npy, or a number)\n"
    "  save REG FILE.npy    write a tensor register to a file\n"
    "  quit                 leave\n";

/* ---- running ---- */

static void show_position(repl *r) {
  if (dvm_vm_depth(r->vm) == 0) return;
  dvm_frame_info fi;
  dvm_vm_frame(r->vm, 0, &fi);
  dvm_instr_info ii;
  dvm_function_instr(r->m, fi.function, fi.instruction, &ii);
  printf("=> %s:%d  ", dvm_function_name(r->m, fi.function), fi.instruction);
  dvm_function_print_instr(r->m, fi.function, fi.instruction, stdout);
  if (ii.node) printf("  [node %s]", ii.node);
  putchar('\n');
}

static void print_results(repl *r) {
  int n = dvm_function_result_count(r->m, r->f);
  dvm_value res[MAX_INPUTS] = {{0}};
  dvm_vm_take_results(r->vm, res, n < MAX_INPUTS ? n : MAX_INPUTS);
  printf("finished: %s returned\n", dvm_function_name(r->m, r->f));
  for (int i = 0; i < n && i < MAX_INPUTS; i++) {
    dvm_param_info info;
    dvm_function_result(r->m, r->f, i, &info);
    printf("  %s: ", info.name);
    dvm_cli_print_value(stdout, &res[i], 8);
    putchar('\n');
    dvm_value_clear(&res[i]);
  }
  dvm_vm_stop(r->vm);
}

static int load_args(repl *r, dvm_value *args, int np) {
  for (int p = 0; p < np; p++) {
    dvm_param_info info;
    dvm_function_param(r->m, r->f, p, &info);
    const char *v = r->inputs[p];
    dvm_status *st = NULL;
    if (!v) {
      printf("error: input \"%s\" is not bound: input %s FILE\n", info.name, info.name);
      for (int i = 0; i < p; i++) dvm_value_clear(&args[i]);
      return 0;
    }
    if (info.kind == DVM_VAL_INT) args[p] = dvm_value_int(strtoll(v, NULL, 0));
    else if (info.kind == DVM_VAL_FLOAT) args[p] = dvm_value_float(strtod(v, NULL));
    else {
      dvm_tensor *t;
      st = dvm_npy_read_file(v, &t);
      if (!st) args[p] = dvm_value_tensor(t);
    }
    if (st) {
      printf("error: input \"%s\": %s\n", info.name, dvm_status_message(st));
      dvm_status_free(st);
      for (int i = 0; i < p; i++) dvm_value_clear(&args[i]);
      return 0;
    }
  }
  return 1;
}

static int start(repl *r) {
  dvm_vm_stop(r->vm);
  int np = dvm_function_param_count(r->m, r->f);
  dvm_value args[MAX_INPUTS];
  if (!load_args(r, args, np)) return 0;
  dvm_status *st = dvm_vm_start(r->vm, r->f, args, np);
  for (int i = 0; i < np; i++) dvm_value_clear(&args[i]);
  if (st) {
    printf("error: %s\n", dvm_status_message(st));
    dvm_status_free(st);
    return 0;
  }
  return 1;
}

static int at_breakpoint(repl *r) {
  dvm_frame_info fi;
  dvm_vm_frame(r->vm, 0, &fi);
  dvm_instr_info ii;
  dvm_function_instr(r->m, fi.function, fi.instruction, &ii);
  for (int i = 0; i < r->nbp; i++) {
    const breakpoint *b = &r->bp[i];
    int hit = 0;
    switch (b->kind) {
    case BP_INSTR: hit = b->function == fi.function && b->instr == fi.instruction; break;
    case BP_FUNCTION: hit = b->function == fi.function && fi.instruction == 0; break;
    case BP_OPCODE: hit = strcmp(ii.opcode, b->name) == 0; break;
    case BP_CALLEE: hit = ii.callee && strcmp(ii.callee, b->name) == 0; break;
    case BP_NODE: { /* on entering the node, not at each of its instructions */
      dvm_instr_info prev = {0};
      if (fi.instruction > 0) dvm_function_instr(r->m, fi.function, fi.instruction - 1, &prev);
      hit = ii.node && strcmp(ii.node, b->name) == 0 && (!prev.node || strcmp(prev.node, b->name) != 0);
      break;
    }
    }
    if (hit) {
      printf("breakpoint %d\n", i + 1);
      return 1;
    }
  }
  return 0;
}

/* Steps one instruction at a time while `more` says so (depth is the frame
 * count to compare with), stopping at breakpoints, the end, or an error. */
typedef enum { UNTIL_COUNT, UNTIL_DEPTH_AT_MOST, UNTIL_DEPTH_BELOW, UNTIL_END } until;

static void advance(repl *r, until mode, long count, int depth) {
  if (dvm_vm_depth(r->vm) == 0 && !start(r)) return;
  for (long n = 0;; n++) {
    int finished;
    dvm_status *st = dvm_vm_step(r->vm, 1, &finished);
    if (st) {
      printf("error: %s\n", dvm_status_message(st));
      dvm_status_free(st);
      return;
    }
    if (finished) {
      print_results(r);
      return;
    }
    int d = dvm_vm_depth(r->vm);
    if (mode == UNTIL_COUNT && n + 1 >= count) break;
    if (mode == UNTIL_DEPTH_AT_MOST && d <= depth) break;
    if (mode == UNTIL_DEPTH_BELOW && d < depth) break;
    if (at_breakpoint(r)) break;
  }
  show_position(r);
}

/* ---- inspecting ---- */

static const dvm_value *reg_arg(repl *r, const char *arg) {
  if (dvm_vm_depth(r->vm) == 0) {
    printf("error: nothing is running (use run, restart or step)\n");
    return NULL;
  }
  dvm_frame_info fi;
  dvm_vm_frame(r->vm, 0, &fi);
  char *end;
  long k = arg && arg[0] == 'r' ? strtol(arg + 1, &end, 10) : -1;
  if (k < 0 || *end || k >= fi.nregs) {
    printf("error: expected a register r0..r%d\n", fi.nregs - 1);
    return NULL;
  }
  return dvm_vm_register(r->vm, 0, (int)k);
}

static void print_kind_line(const dvm_value *v) {
  char buf[256];
  if (v->kind == DVM_VAL_TENSOR) {
    const dvm_tensor *t = v->u.tensor;
    dvm_shape_format(buf, sizeof buf, dvm_tensor_dtype(t), dvm_tensor_rank(t), dvm_tensor_dims(t));
    printf("tensor %s on %s", buf, dvm_device_name(dvm_tensor_device(t)));
  } else {
    dvm_cli_print_value(stdout, v, 8);
  }
}

static void cmd_regs(repl *r) {
  if (dvm_vm_depth(r->vm) == 0) {
    printf("nothing is running\n");
    return;
  }
  dvm_frame_info fi;
  dvm_vm_frame(r->vm, 0, &fi);
  for (int k = 0; k < fi.nregs; k++) {
    const dvm_value *v = dvm_vm_register(r->vm, 0, k);
    if (v->kind == DVM_VAL_NONE) continue;
    printf("  r%-4d ", k);
    print_kind_line(v);
    putchar('\n');
  }
}

static void cmd_disasm(repl *r, const char *range) {
  int f = r->f, cur = -1;
  if (dvm_vm_depth(r->vm)) {
    dvm_frame_info fi;
    dvm_vm_frame(r->vm, 0, &fi);
    f = fi.function;
    cur = fi.instruction;
  }
  int n = dvm_function_instr_count(r->m, f), lo = 0, hi = n - 1;
  if (range) {
    if (sscanf(range, "%d-%d", &lo, &hi) == 1) hi = lo;
  } else if (cur >= 0) {
    lo = cur - 5;
    hi = cur + 5;
  }
  if (lo < 0) lo = 0;
  if (hi >= n) hi = n - 1;
  printf("function %s:\n", dvm_function_name(r->m, f));
  const char *node = NULL;
  for (int i = lo; i <= hi; i++) {
    dvm_instr_info ii;
    dvm_function_instr(r->m, f, i, &ii);
    if (ii.node && (!node || strcmp(node, ii.node) != 0)) printf("     [node %s]\n", ii.node);
    node = ii.node;
    printf("%s %4d  ", i == cur ? "=>" : "  ", i);
    dvm_function_print_instr(r->m, f, i, stdout);
    putchar('\n');
  }
}

static void cmd_where(repl *r) {
  int d = dvm_vm_depth(r->vm);
  if (!d) printf("nothing is running\n");
  for (int l = 0; l < d; l++) {
    dvm_frame_info fi;
    dvm_vm_frame(r->vm, l, &fi);
    dvm_instr_info ii;
    dvm_function_instr(r->m, fi.function, fi.instruction, &ii);
    printf("#%d %s:%d (%s)%s%s\n", l, dvm_function_name(r->m, fi.function), fi.instruction, ii.opcode,
           ii.node ? " node " : "", ii.node ? ii.node : "");
  }
}

static void cmd_mem(repl *r) {
  dvm_vm_stats s;
  dvm_vm_get_stats(r->vm, &s);
  for (int d = 0; d < DVM_DEVICE_COUNT; d++) {
    const dvm_pool_stats *p = &s.pool[d];
    if (!p->allocs && !p->in_use && d != DVM_DEVICE_CPU) continue;
    printf("%s pool: in use %llu bytes, peak %llu, cached %llu, system allocations %llu, reuses %llu\n",
           dvm_device_name((dvm_device_kind)d), (unsigned long long)p->in_use, (unsigned long long)p->peak,
           (unsigned long long)p->cached, (unsigned long long)p->allocs, (unsigned long long)p->reuses);
  }
  printf("instructions %llu, kernel calls %llu, invocations %llu\n", (unsigned long long)s.instructions,
         (unsigned long long)s.kernel_calls, (unsigned long long)s.invocations);
}

static void cmd_break(repl *r, char *spec, char *arg) {
  if (!spec) {
    printf("error: break N | FUNC:N | opcode NAME | kernel NAME | node NAME | function NAME\n");
    return;
  }
  if (r->nbp == MAX_BREAKS) {
    printf("error: at most %d breakpoints\n", MAX_BREAKS);
    return;
  }
  breakpoint b = {0};
  const char *kinds[] = {"opcode", "kernel", "node", "function"};
  const bp_kind kk[] = {BP_OPCODE, BP_CALLEE, BP_NODE, BP_FUNCTION};
  int named = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(spec, kinds[i]) == 0) named = i;
  if (named >= 0) {
    if (!arg) {
      printf("error: break %s NAME\n", spec);
      return;
    }
    b.kind = kk[named];
    snprintf(b.name, sizeof b.name, "%s", arg);
    if (b.kind == BP_FUNCTION && (b.function = dvm_module_find_function(r->m, arg)) < 0) {
      printf("error: no function \"%s\"\n", arg);
      return;
    }
  } else {
    char *colon = strrchr(spec, ':');
    b.kind = BP_INSTR;
    b.function = r->f;
    if (dvm_vm_depth(r->vm)) {
      dvm_frame_info fi;
      dvm_vm_frame(r->vm, 0, &fi);
      b.function = fi.function;
    }
    if (colon) {
      *colon = 0;
      if ((b.function = dvm_module_find_function(r->m, spec)) < 0) {
        printf("error: no function \"%s\"\n", spec);
        return;
      }
      spec = colon + 1;
    }
    char *end;
    b.instr = (int)strtol(spec, &end, 10);
    if (*end || end == spec || b.instr < 0 || b.instr >= dvm_function_instr_count(r->m, b.function)) {
      printf("error: \"%s\" is not an instruction of %s (0..%d)\n", spec,
             dvm_function_name(r->m, b.function), dvm_function_instr_count(r->m, b.function) - 1);
      return;
    }
  }
  r->bp[r->nbp++] = b;
  printf("breakpoint %d: ", r->nbp);
  if (b.kind == BP_INSTR) printf("%s:%d\n", dvm_function_name(r->m, b.function), b.instr);
  else printf("%s %s\n", kinds[named], b.name);
}

static void cmd_info_breaks(repl *r) {
  static const char *const kinds[] = {"", "opcode", "kernel", "node", "function"};
  if (!r->nbp) printf("no breakpoints\n");
  for (int i = 0; i < r->nbp; i++) {
    const breakpoint *b = &r->bp[i];
    if (b->kind == BP_INSTR) printf("  %d  %s:%d\n", i + 1, dvm_function_name(r->m, b->function), b->instr);
    else printf("  %d  %s %s\n", i + 1, kinds[b->kind], b->name);
  }
}

static void cmd_input(repl *r, const char *name, const char *file) {
  if (!name || !file) {
    printf("error: input NAME FILE\n");
    return;
  }
  for (int p = 0; p < dvm_function_param_count(r->m, r->f); p++) {
    dvm_param_info info;
    dvm_function_param(r->m, r->f, p, &info);
    if (strcmp(info.name, name) == 0) {
      free(r->inputs[p]);
      r->inputs[p] = strdup(file);
      printf("input %s = %s (used from the next run or restart)\n", name, file);
      return;
    }
  }
  printf("error: %s has no input \"%s\"\n", dvm_function_name(r->m, r->f), name);
}

/* ---- the command loop ---- */

static void execute(repl *r, char *line) {
  char *words[4] = {0};
  int n = 0;
  for (char *t = strtok(line, " \t\r\n"); t && n < 4; t = strtok(NULL, " \t\r\n")) words[n++] = t;
  if (!n) return;
  const char *c = words[0];
  if (!strcmp(c, "help") || !strcmp(c, "h")) fputs(help_text, stdout);
  else if (!strcmp(c, "quit") || !strcmp(c, "q") || !strcmp(c, "exit")) r->quit = 1;
  else if (!strcmp(c, "run") || !strcmp(c, "r")) {
    if (start(r)) {
      if (r->nbp && at_breakpoint(r)) show_position(r);
      else advance(r, UNTIL_END, 0, 0);
    }
  } else if (!strcmp(c, "restart")) {
    if (start(r)) show_position(r);
  } else if (!strcmp(c, "step") || !strcmp(c, "s")) {
    long k = words[1] ? strtol(words[1], NULL, 10) : 1;
    if (k < 1) printf("error: step N needs N >= 1\n");
    else advance(r, UNTIL_COUNT, k, 0);
  } else if (!strcmp(c, "next") || !strcmp(c, "n")) {
    advance(r, UNTIL_DEPTH_AT_MOST, 0, dvm_vm_depth(r->vm) ? dvm_vm_depth(r->vm) : 1);
  } else if (!strcmp(c, "finish")) {
    if (!dvm_vm_depth(r->vm)) printf("nothing is running\n");
    else advance(r, UNTIL_DEPTH_BELOW, 0, dvm_vm_depth(r->vm));
  } else if (!strcmp(c, "continue") || !strcmp(c, "c")) {
    if (!dvm_vm_depth(r->vm)) printf("nothing is running (use run)\n");
    else advance(r, UNTIL_END, 0, 0);
  } else if (!strcmp(c, "break") || !strcmp(c, "b")) cmd_break(r, words[1], words[2]);
  else if (!strcmp(c, "delete")) {
    if (!words[1]) r->nbp = 0;
    else {
      int k = atoi(words[1]);
      if (k < 1 || k > r->nbp) printf("error: no breakpoint %s\n", words[1]);
      else memmove(&r->bp[k - 1], &r->bp[k], sizeof(breakpoint) * (size_t)(r->nbp-- - k));
    }
  } else if (!strcmp(c, "info")) {
    if (words[1] && !strncmp(words[1], "breakpoints", strlen(words[1]))) cmd_info_breaks(r);
    else printf("error: info breakpoints\n");
  } else if (!strcmp(c, "regs")) cmd_regs(r);
  else if (!strcmp(c, "print") || !strcmp(c, "p")) {
    int full = (words[2] && !strcmp(words[2], "-full")) || (words[1] && !strcmp(words[1], "-full"));
    const dvm_value *v = reg_arg(r, words[1] && strcmp(words[1], "-full") ? words[1] : words[2]);
    if (v) {
      printf("%s: ", words[1] && strcmp(words[1], "-full") ? words[1] : words[2]);
      if (v->kind == DVM_VAL_TENSOR) printf("on %s, ", dvm_device_name(dvm_tensor_device(v->u.tensor)));
      dvm_cli_print_value(stdout, v, full ? -1 : 8);
      putchar('\n');
    }
  } else if (!strcmp(c, "shape")) {
    const dvm_value *v = reg_arg(r, words[1]);
    if (v) {
      print_kind_line(v);
      putchar('\n');
    }
  } else if (!strcmp(c, "disasm")) cmd_disasm(r, words[1]);
  else if (!strcmp(c, "where") || !strcmp(c, "bt")) cmd_where(r);
  else if (!strcmp(c, "mem")) cmd_mem(r);
  else if (!strcmp(c, "input")) cmd_input(r, words[1], words[2]);
  else if (!strcmp(c, "save")) {
    const dvm_value *v = reg_arg(r, words[1]);
    if (v && !words[2]) printf("error: save REG FILE.npy\n");
    else if (v && v->kind != DVM_VAL_TENSOR) printf("error: %s holds a %s, not a tensor\n", words[1], dvm_kind_name((dvm_kind)v->kind));
    else if (v) {
      dvm_status *st = dvm_npy_write_file(words[2], v->u.tensor);
      if (st) printf("error: %s\n", dvm_status_message(st));
      else printf("saved %s to %s\n", words[1], words[2]);
      dvm_status_free(st);
    }
  } else printf("error: unknown command \"%s\" (help lists them)\n", c);
}

static char *complete_command(const char *text, int state) {
  static int i;
  static size_t len;
  if (!state) {
    i = 0;
    len = strlen(text);
  }
  while (command_names[i])
    if (!strncmp(command_names[i++], text, len)) return strdup(command_names[i - 1]);
  return NULL;
}

static char **complete(const char *text, int start_pos, int end) {
  rl_attempted_completion_over = 1; /* no file names */
  return start_pos == 0 ? rl_completion_matches(text, complete_command) : NULL;
}

static const char usage_text[] =
    "usage: dvm repl MODEL.dvmb [--input FILE | --input NAME=FILE | --input-name NAME --input FILE]...\n"
    "                [--function NAME] [--device cpu|auto] [--script FILE]\n"
    "  an interactive debugger for the bytecode; `help` at its prompt lists the commands.\n"
    "  Inputs bind as for dvm run (NAME=FILE: NAME one of the function's names, any characters;\n"
    "  --input-name NAME --input FILE: NAME exactly, FILE whole).\n"
    "  Commands are read from --script FILE, or from standard input when it is not a terminal.\n"
    "  --max-steps N          an invocation stops after N instructions\n"
    "  --memory-limit BYTES   most bytes each device pool may hold (suffix K, M or G: 1024s)\n";

int dvm_cmd_repl(int argc, char **argv) {
  static const struct option opts[] = {
      {"input", required_argument, 0, 'i'}, {"function", required_argument, 0, 'f'},
      {"device", required_argument, 0, 'd'}, {"script", required_argument, 0, 's'},
      {"help", no_argument, 0, 'h'}, {"max-steps", required_argument, 0, 'S'},
      {"memory-limit", required_argument, 0, 'M'}, {"input-name", required_argument, 0, 'I'}, {0, 0, 0, 0}};
  const char *fname = NULL, *script = NULL;
  dvm_cli_arg ins[2 * MAX_INPUTS];
  int nin = 0;
  dvm_vm_options vo;
  dvm_vm_options_init(&vo);
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "i:f:d:s:h", opts, NULL)) != -1;) {
    switch (c) {
    case 'i': case 'I':
      if (nin == 2 * MAX_INPUTS) return dvm_cli_usage_error("repl", "too many --input");
      ins[nin++] = (dvm_cli_arg){optarg, c == 'I'};
      break;
    case 'f': fname = optarg; break;
    case 'd':
      if (strcmp(optarg, "auto") == 0) vo.device = DVM_DEVICE_CPU;
      else if (!dvm_device_parse(optarg, &vo.device)) return dvm_cli_usage_error("repl", "unknown device \"%s\"", optarg);
      break;
    case 's': script = optarg; break;
    case 'S': case 'M': {
      double unused;
      int bad = dvm_cli_limit_option("repl", c, optarg, &vo, &unused);
      if (bad) return bad;
      break;
    }
    case 'h': fputs(usage_text, stdout); return DVM_EXIT_OK;
    default: fputs(usage_text, stderr); return DVM_EXIT_USAGE;
    }
  }
  if (optind != argc - 1) {
    fputs(usage_text, stderr);
    return DVM_EXIT_USAGE;
  }
  repl r = {0};
  dvm_status *st = dvm_module_load_file(argv[optind], NULL, &r.m);
  if (st) return dvm_cli_fail("repl", st);
  r.f = fname ? dvm_module_find_function(r.m, fname) : dvm_module_find_function(r.m, "main");
  if (r.f < 0 && !fname && dvm_module_function_count(r.m) == 1) r.f = 0;
  if (r.f < 0) {
    dvm_module_release(r.m);
    return dvm_cli_usage_error("repl", "no function \"%s\"", fname ? fname : "main");
  }
  int np = dvm_function_param_count(r.m, r.f);
  const char *slots[MAX_INPUTS] = {0};
  if (np > MAX_INPUTS || (st = dvm_cli_bind(r.m, r.f, 0, ins, nin, np, slots))) {
    dvm_module_release(r.m);
    return st ? dvm_cli_fail("repl", st) : dvm_cli_usage_error("repl", "more than %d inputs", MAX_INPUTS);
  }
  for (int p = 0; p < np; p++) r.inputs[p] = slots[p] ? strdup(slots[p]) : NULL;
  if ((st = dvm_vm_create(r.m, &vo, &r.vm))) {
    dvm_module_release(r.m);
    return dvm_cli_fail("repl", st);
  }
  FILE *in = script ? fopen(script, "r") : stdin;
  if (!in) {
    dvm_vm_destroy(r.vm);
    dvm_module_release(r.m);
    return dvm_cli_usage_error("repl", "cannot open script %s", script);
  }
  int interactive = !script && isatty(STDIN_FILENO);
  printf("dvm repl: %s, function %s (%d instructions); help lists the commands\n", argv[optind],
         dvm_function_name(r.m, r.f), dvm_function_instr_count(r.m, r.f));
  if (interactive) {
    rl_attempted_completion_function = complete;
    using_history();
  }
  while (!r.quit) {
    char *line, buf[1024];
    if (interactive) {
      line = readline("(dvm) ");
      if (!line) break;
      if (*line) add_history(line);
    } else {
      if (!fgets(buf, sizeof buf, in)) break;
      buf[strcspn(buf, "\n")] = 0;
      if (buf[0] == '#' || !buf[0]) continue;
      printf("(dvm) %s\n", buf);
      line = buf;
    }
    execute(&r, line);
    fflush(stdout);
    if (interactive) free(line);
  }
  if (script) fclose(in);
  for (int i = 0; i < MAX_INPUTS; i++) free(r.inputs[i]);
  dvm_vm_destroy(r.vm);
  dvm_module_release(r.m);
  return DVM_EXIT_OK;
}
