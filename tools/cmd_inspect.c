/* dvm inspect: what a module holds, through the public API only. */
#include "cli.h"

int dvm_cmd_inspect(int argc, char **argv) {
  static const char usage[] = "usage: dvm inspect MODEL.dvmb\n"
                              "  lists functions with their symbolic signatures, constants and kernels\n";
  dvm_module *m;
  int rc = dvm_cli_load_one("inspect", usage, argc, argv, &m);
  if (rc >= 0) return rc;
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
