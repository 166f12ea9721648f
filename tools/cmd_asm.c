/* dvm asm and dvm disasm: between .dvms text and .dvmb files. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dvm/asm.h"

int dvm_cmd_asm(int argc, char **argv) {
  static const char usage[] = "usage: dvm asm INPUT.dvms -o OUTPUT.dvmb\n"
                              "  assembles and verifies; the file is written only if both succeed\n";
  static const struct option opts[] = {{"output", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *out = NULL;
  optind = 1;
  for (int c; (c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1;) {
    if (c == 'o') out = optarg;
    else if (c == 'h') { fputs(usage, stdout); return DVM_EXIT_OK; }
    else { fputs(usage, stderr); return DVM_EXIT_USAGE; }
  }
  if (optind != argc - 1 || !out) {
    fputs(usage, stderr);
    return DVM_EXIT_USAGE;
  }
  char *text;
  size_t len;
  uint8_t *bytes = NULL;
  size_t size;
  dvm_status *st = dvm_cli_read_file(argv[optind], &text, &len);
  if (st) return dvm_cli_fail("asm", st);
  if (!(st = dvm_asm_assemble(text, len, argv[optind], &bytes, &size))) {
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(bytes, 1, size, f) != size)
      st = dvm_status_new(DVM_IO, "%s: cannot write", out);
    if (f && fclose(f) != 0 && !st) st = dvm_status_new(DVM_IO, "%s: cannot write", out);
  }
  free(text);
  free(bytes);
  return st ? dvm_cli_fail("asm", st) : DVM_EXIT_OK;
}

int dvm_cmd_disasm(int argc, char **argv) {
  static const char usage[] = "usage: dvm disasm [--kernel-source] MODEL.dvmb\n"
                              "  prints the module as .dvms text (dvm asm reads it back to the same file);\n"
                              "  --kernel-source: then the CUDA C of each generated kernel, as comments\n";
  int sources = argc == 3 && strcmp(argv[1], "--kernel-source") == 0;
  dvm_module *m;
  int rc = dvm_cli_load_one("disasm", usage, argc - sources, argv + sources, &m);
  if (rc >= 0) return rc;
  dvm_disasm_module(m, stdout);
  if (sources) dvm_disasm_gen_sources(m, stdout);
  dvm_module_release(m);
  return DVM_EXIT_OK;
}
