/* Runs a libFuzzer target over stored inputs, so every fuzz target is also
 * an ordinary test: `replay PATH...` feeds each file, and every file under
 * each folder (recursively, in name order), to LLVMFuzzerTestOneInput, in a
 * buffer of exactly its size so a sanitizer sees any read past the end.
 * Each path is printed before it runs, so a crash names its input. Exits 0
 * when all ran, 1 when a path could not be read, 77 (skip) when there were
 * no inputs. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target, as under libFuzzer. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int inputs, failures;

static void run_file(const char *path, long size) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
  if (!f || !buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    failures++;
  } else {
    printf("replay: %s\n", path);
    fflush(stdout);
    LLVMFuzzerTestOneInput(buf, (size_t)size);
    inputs++;
  }
  free(buf);
  if (f) fclose(f);
}

static void run_path(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    failures++;
    return;
  }
  if (!S_ISDIR(sb.st_mode)) {
    run_file(path, (long)sb.st_size);
    return;
  }
  struct dirent **names;
  int n = scandir(path, &names, NULL, alphasort);
  if (n < 0) {
    fprintf(stderr, "replay: cannot list %s\n", path);
    failures++;
    return;
  }
  for (int i = 0; i < n; i++) {
    const char *name = names[i]->d_name;
    size_t len = strlen(path) + strlen(name) + 2;
    char *sub = malloc(len);
    if (sub && name[0] != '.') {
      snprintf(sub, len, "%s/%s", path, name);
      run_path(sub);
    }
    free(sub);
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) run_path(argv[i]);
  printf("replay: %d inputs, %d unreadable\n", inputs, failures);
  if (failures) return 1;
  return inputs ? 0 : 77;
}
