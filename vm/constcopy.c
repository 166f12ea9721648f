/* Device copies of module constants (see constcopy.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "constcopy.h"

/* Keyed by what makes a constant's bytes: its offset in the module's
 * data, dtype and shape (the dev copy carries them). Not by the host
 * tensor's address: views of constants are made and freed per invocation,
 * and a freed view's address may come back as a view of other bytes. */
struct dvm_constcopy_entry {
  size_t offset;
  dvm_tensor *dev; /* NULL: empty slot */
};

#define MAX_COPIES 65536

static int same(const struct dvm_constcopy_entry *e, size_t offset, const dvm_tensor *t) {
  const dvm_tensor *d = e->dev;
  return e->offset == offset && d->dtype == t->dtype && d->rank == t->rank &&
         memcmp(d->dims, t->dims, sizeof(int64_t) * t->rank) == 0;
}

/* The slot of t (a view at `offset`), or the empty slot where it goes. */
static size_t slot(const struct dvm_constcopy_entry *tab, size_t cap, size_t offset,
                   const dvm_tensor *t) {
  uint64_t h = offset;
  for (int d = 0; d < t->rank; d++) h = h * 31 + (uint64_t)t->dims[d];
  size_t i = (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
  while (tab[i].dev && !same(&tab[i], offset, t)) i = (i + 1) & (cap - 1);
  return i;
}

dvm_tensor *dvm_constcopy_find(const dvm_constcopy *c, const dvm_tensor *host) {
  if (!c->cap) return NULL;
  return c->tab[slot(c->tab, c->cap, host->offset, host)].dev;
}

dvm_status *dvm_constcopy_add(dvm_constcopy *c, const dvm_tensor *host, dvm_tensor *dev) {
  if (c->n == MAX_COPIES) return NULL;
  if (2 * (c->n + 1) > c->cap) { /* keep it at most half full */
    size_t cap = c->cap ? 2 * c->cap : 64;
    struct dvm_constcopy_entry *t = calloc(cap, sizeof *t);
    if (!t) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    for (size_t i = 0; i < c->cap; i++)
      if (c->tab[i].dev) t[slot(t, cap, c->tab[i].offset, c->tab[i].dev)] = c->tab[i];
    free(c->tab);
    c->tab = t;
    c->cap = cap;
  }
  struct dvm_constcopy_entry *e = &c->tab[slot(c->tab, c->cap, host->offset, host)];
  if (e->dev) return NULL; /* already there */
  dvm_tensor_retain(dev);
  *e = (struct dvm_constcopy_entry){host->offset, dev};
  c->n++;
  return NULL;
}

void dvm_constcopy_clear(dvm_constcopy *c) {
  for (size_t i = 0; i < c->cap; i++) dvm_tensor_release(c->tab[i].dev);
  free(c->tab);
  *c = (dvm_constcopy){0};
}
