/* Test driver for the ONNX importer: `import_dump [--memory] MODEL.onnx`
 * imports the model and prints its IR (dvmc_graph_print) on stdout, exit 0;
 * or prints "import_dump: CODE: message" on stderr, exit 1. With --memory the
 * file is read here and given to dvmc_import_onnx_memory with its folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

static int usage(void) {
  fprintf(stderr, "usage: import_dump [--memory] MODEL.onnx\n");
  return 2;
}

static void *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t r;
  while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  *size = n;
  return buf;
}

int main(int argc, char **argv) {
  bool memory = argc == 3 && strcmp(argv[1], "--memory") == 0;
  if (argc != 2 + memory) return usage();
  const char *path = argv[1 + memory];
  dvmc_ctx *c = NULL;
  dvmc_graph *g = NULL;
  dvm_status *st = dvmc_ctx_create(&c);
  if (!st && memory) {
    size_t size = 0;
    void *data = read_all(path, &size);
    if (!data) {
      fprintf(stderr, "import_dump: cannot read %s\n", path);
      dvmc_ctx_destroy(c);
      return 1;
    }
    char *dir = strdup(path), *slash = strrchr(dir, '/');
    if (slash)
      *slash = 0;
    else
      strcpy(dir, ".");
    st = dvmc_import_onnx_memory(c, data, size, dir, &g);
    free(dir);
    free(data);
  } else if (!st) {
    st = dvmc_import_onnx(c, path, &g);
  }
  if (st) {
    fprintf(stderr, "import_dump: %s: %s\n", dvm_code_name(dvm_status_code(st)),
            dvm_status_message(st));
    dvm_status_free(st);
    dvmc_ctx_destroy(c);
    return 1;
  }
  dvmc_graph_print(g, stdout);
  dvmc_ctx_destroy(c);
  return 0;
}
