/* dvm inspect: what a module holds, through the public API only. */
#include <string.h>

#include "cli.h"

int dvm_cmd_inspect(int argc, char **argv) {
  static const char usage[] = "usage: dvm inspect MODEL.dvmb\n"
                              "  lists functions with their symbolic signatures, constants and kernels\n";
  if (argc == 2 && strcmp(argv[1], "--help") == 0) {
    fputs(usage, stdout);
    return DVM_EXIT_OK;
  }
  if (argc != 2 || argv[1][0] == '-') {
    fputs(usage, stderr);
    return DVM_EXIT_USAGE;
  }
  dvm_module *m;
  dvm_status *st = dvm_module_load_file(argv[1], NULL, &m);
  if (st) return dvm_cli_fail("inspect", st);
  printf("module %s\n", argv[1]);
  printf("constants: %d (%zu bytes)\n", dvm_module_constant_count(m), dvm_module_constant_bytes(m));
  printf("kernels: %d\n", dvm_module_kernel_count(m));
  int nf = dvm_module_function_count(m);
  printf("functions: %d\n", nf);
  for (int f = 0; f < nf; f++) {
    printf("\nfunction %s\n", dvm_function_name(m, f));
    for (int s = 0; s < dvm_function_symbol_count(m, f); s++) {
      dvm_symbol_info y;
      dvm_function_symbol(m, f, s, &y);
      printf("  symbol %s in %lld..%lld\n", y.name, (long long)y.lo, (long long)y.hi);
    }
    for (int p = 0; p < dvm_function_param_count(m, f); p++) {
      dvm_param_info info;
      dvm_function_param(m, f, p, &info);
      fputs("  input  ", stdout);
      dvm_cli_print_param(stdout, &info);
      putchar('\n');
    }
    for (int p = 0; p < dvm_function_result_count(m, f); p++) {
      dvm_param_info info;
      dvm_function_result(m, f, p, &info);
      fputs("  output ", stdout);
      dvm_cli_print_param(stdout, &info);
      putchar('\n');
    }
  }
  dvm_module_release(m);
  return DVM_EXIT_OK;
}
