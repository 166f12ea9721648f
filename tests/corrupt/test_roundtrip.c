/* The text form round-trips: for every .dvms in the folders given (tests/asm
 * and tests/corrupt, whose base.dvms uses most of the instruction set),
 * assemble -> write bytes A -> read and verify A -> disassemble
 * -> assemble -> write bytes B, and A must equal B byte for byte. The
 * disassembly of B must also equal that of A, so the printer is stable.
 * Programs marked as failing to assemble are skipped.
 *
 * A is read and verified but not linked: linking needs the embedder's host
 * functions and this dvm's kernels, which round-tripping does not. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>

#include "asm.h"
#include "harness.h"

/* Marks a program that must fail to assemble (tests/vm/test_programs.c):
 * it has no bytes to round-trip. */
#define LOAD_ERROR "; LOAD-ERROR: "

/* The file's text, NUL-terminated. */
static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (n == cap - 1) {
      char *bigger = realloc(buf, cap *= 2);
      if (!bigger) free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  if (buf) buf[n] = 0;
  *len = n;
  return buf;
}

/* The module's text; malloc'ed, *len its length. */
static char *disassemble(const dvm_module *m, size_t *len) {
  char *text = NULL;
  FILE *out = open_memstream(&text, len);
  if (!out) return NULL;
  dvm_disasm_module(m, out);
  fclose(out);
  return text;
}

/* Reads and verifies bytes as the loader does, without linking. */
static dvm_status *read_verified(const uint8_t *bytes, size_t size, dvm_module **out) {
  dvm_module *m;
  dvm_status *st = dvm_module_new_empty(&m);
  if (st) return st;
  if ((st = dvm_bc_read(m, bytes, size)) || (st = dvm_verify_module(m))) {
    dvm_module_release(m);
    return st;
  }
  *out = m;
  return NULL;
}

static void roundtrip(const char *path) {
  size_t len, len_a = 0, len_b = 0, size_a = 0, size_b = 0;
  char *text = read_text(path, &len), *text_a = NULL, *text_b = NULL;
  dvm_module *m = NULL, *read_a = NULL, *m2 = NULL, *read_b = NULL;
  uint8_t *a = NULL, *b = NULL;
  int before = harness_failures;
  CHECK(text != NULL);
  if (!text || strstr(text, LOAD_ERROR)) goto done;
  CHECK_OK(dvm_asm_parse(text, len, path, &m));
  if (!m) goto done;
  CHECK_OK(dvm_bc_write(m, &a, &size_a));
  if (!a) goto done;
  CHECK_OK(read_verified(a, size_a, &read_a));
  if (!read_a) goto done;
  text_a = disassemble(read_a, &len_a);
  CHECK(text_a != NULL);
  if (!text_a) goto done;
  CHECK_OK(dvm_asm_parse(text_a, len_a, "disassembly", &m2));
  if (!m2) goto done;
  CHECK_OK(dvm_bc_write(m2, &b, &size_b));
  if (!b) goto done;
  CHECK(size_a == size_b && memcmp(a, b, size_a) == 0);
  CHECK_OK(read_verified(b, size_b, &read_b));
  if (!read_b) goto done;
  text_b = disassemble(read_b, &len_b);
  CHECK(text_b && len_a == len_b && memcmp(text_a, text_b, len_a) == 0);
done:
  if (harness_failures != before) fprintf(stderr, "  in %s\n", path);
  free(text);
  free(text_a);
  free(text_b);
  free(a);
  free(b);
  dvm_module_release(m);
  dvm_module_release(read_a);
  dvm_module_release(m2);
  dvm_module_release(read_b);
}

static int by_name(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Adds the .dvms files of dir to *paths. */
static int list_dir(const char *dirname, char ***paths, size_t *n) {
  DIR *dir = opendir(dirname);
  if (!dir) {
    fprintf(stderr, "cannot open %s: %s\n", dirname, strerror(errno));
    return 0;
  }
  for (struct dirent *e; (e = readdir(dir));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 5, ".dvms") != 0) continue;
    char **more = realloc(*paths, (*n + 1) * sizeof **paths);
    size_t plen = strlen(dirname) + len + 2;
    char *path = malloc(plen);
    if (more) *paths = more;
    if (!more || !path) {
      free(path);
      closedir(dir);
      return 0;
    }
    snprintf(path, plen, "%s/%s", dirname, e->d_name);
    (*paths)[(*n)++] = path;
  }
  closedir(dir);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR... (folders of .dvms files)\n", argv[0]);
    return 2;
  }
  char **paths = NULL;
  size_t n = 0;
  for (int i = 1; i < argc; i++)
    if (!list_dir(argv[i], &paths, &n)) return 1;
  qsort(paths, n, sizeof *paths, by_name); /* a stable order for the log */
  for (size_t i = 0; i < n; i++) {
    roundtrip(paths[i]);
    free(paths[i]);
  }
  free(paths);
  printf("roundtrip: %zu programs\n", n);
  if (n == 0) {
    fprintf(stderr, "no .dvms files found\n");
    return 1;
  }
  return harness_finish("roundtrip");
}
