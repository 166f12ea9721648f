/* The shape function table: the names a .dvmb uses, bound to their C
 * functions. The tables live with the functions, one per family. */
#include <string.h>

#include "shapefuncs/registry.h"

#define FAMILY(f) extern const dvm_shapefn_def dvm_shapefn_##f##_table[];
#include "families.def"
#undef FAMILY

static const dvm_shapefn_def *const tables[] = {
#define FAMILY(f) dvm_shapefn_##f##_table,
#include "families.def"
#undef FAMILY
};

/* A linear scan: lookups happen when a module is linked, not per call. */
const dvm_shapefn_def *dvm_shapefn_find(const char *name) {
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const dvm_shapefn_def *s = tables[t]; s->name; s++)
      if (strcmp(s->name, name) == 0) return s;
  return NULL;
}
