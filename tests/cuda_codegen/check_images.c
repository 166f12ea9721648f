/* Checks what `dvm compile --target cpu,cuda` put in a .dvmb (argv): every
 * function NAME has a clone NAME@cuda; every generated kernel ("gen@N",
 * device cuda) has a DVMG payload with nvariants = T + 1, an sm_80 and an
 * sm_90 cubin and a PTX image, and every image holds every entry name
 * dvm_v<r> (r < T) and dvm_b. Reads the payload with its own
 * code, from the layout in ops/cuda/gen_abi.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"
#include "harness.h"
#include "ops/cuda/gen_abi.h"

static unsigned rd16(const uint8_t *p) { return p[0] | p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Whether an image names the entry: PTX declares ".entry NAME(", a cubin
 * has NAME NUL-terminated in its ELF string table. */
static int has_entry(const uint8_t *img, size_t n, uint32_t arch, const char *name) {
  char pat[64];
  size_t len = (size_t)snprintf(pat, sizeof pat, arch ? "%s" : ".entry %s(", name) + (arch ? 1 : 0);
  return memmem(img, n, pat, len) != NULL;
}

static void check_gen(const dvm_kernel_ref *k, int *ngen) {
  const uint8_t *p = k->payload;
  (*ngen)++;
  CHECK(k->payload_size >= DVM_GEN_HEADER_SIZE && memcmp(p, DVM_GEN_MAGIC, 4) == 0);
  if (k->payload_size < DVM_GEN_HEADER_SIZE) return;
  unsigned nconfigs = p[7], nin = p[8], tile = rd16(p + 10), nimages = rd32(p + 12);
  CHECK(rd16(p + 4) == DVM_GEN_VERSION);
  CHECK(p[6] >= DVM_GEN_ELEMENTWISE && p[6] <= DVM_GEN_MATMUL_NBITS);
  CHECK(nconfigs >= 2 && nconfigs <= DVM_GEN_MAX_CONFIGS);
  CHECK(tile >= 1 && tile <= DVM_GEN_MAX_TILE);
  CHECK(k->nvariants == tile + 1);
  size_t table = (DVM_GEN_HEADER_SIZE + 8 * nconfigs + nin + 7) & ~(size_t)7;
  int seen[3] = {0};
  for (unsigned i = 0; i < nimages && table + 16 * (i + 1) <= k->payload_size; i++) {
    const uint8_t *e = p + table + 16 * i;
    uint32_t arch = rd32(e), off = rd32(e + 8), size = rd32(e + 12);
    CHECK((uint64_t)off + size <= k->payload_size && size > 0);
    if ((uint64_t)off + size > k->payload_size) continue;
    seen[arch == 80 ? 0 : arch == 90 ? 1 : arch == 0 ? 2 : 0] = 1;
    for (unsigned r = 0; r <= tile; r++) {
      char name[32];
      if (r < tile) snprintf(name, sizeof name, "dvm_v%u", r);
      else snprintf(name, sizeof name, "dvm_b");
      if (!has_entry(p + off, size, arch, name)) {
        fprintf(stderr, "%s: image %u (arch %u) lacks %s\n", k->name, i, arch, name);
        CHECK(0);
      }
    }
  }
  CHECK(seen[0] && seen[1] && seen[2]);
}

static void check_file(const char *path) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  uint8_t *bytes = malloc((size_t)n);
  CHECK(bytes && fread(bytes, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  dvm_module *m;
  CHECK_OK(dvm_module_new_empty(&m));
  dvm_status *st = dvm_bc_read(m, bytes, (size_t)n);
  if (!st) st = dvm_verify_module(m);
  CHECK_OK(st);
  int ngen = 0;
  for (uint32_t i = 0; i < m->nkernels && !st; i++)
    if (m->kernels[i].device == DVM_DEVICE_CUDA && strncmp(m->kernels[i].name, "gen@", 4) == 0)
      check_gen(&m->kernels[i], &ngen);
  for (uint32_t i = 0; i < m->nfuncs && !st; i++) {
    const char *name = m->funcs[i].name;
    size_t len = strlen(name);
    if (len > 5 && strcmp(name + len - 5, "@cuda") == 0) continue;
    int found = 0;
    for (uint32_t j = 0; j < m->nfuncs; j++)
      found |= strncmp(m->funcs[j].name, name, len) == 0 && strcmp(m->funcs[j].name + len, "@cuda") == 0;
    if (!found) fprintf(stderr, "%s: function %s has no %s@cuda\n", path, name, name);
    CHECK(found);
  }
  printf("%s: %d generated kernels\n", path, ngen);
  dvm_module_release(m);
  free(bytes);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) check_file(argv[i]);
  return harness_finish("check_images");
}
