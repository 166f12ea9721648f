/* The shape function table: the names a .dvmb uses, bound to their C
 * functions. Adding a shape function is adding one entry. */
#include <string.h>

#include "broadcast.h"
#include "kernel.h"
#include "matmul.h"

static const dvm_shapefn_def shapefns[] = {
    {"broadcast", dvm_shapefn_broadcast},
    {"matmul", dvm_shapefn_matmul},
};

/* A linear scan: lookups happen when a module is linked, not per call. */
const dvm_shapefn_def *dvm_shapefn_find(const char *name) {
  for (size_t i = 0; i < sizeof shapefns / sizeof shapefns[0]; i++)
    if (strcmp(shapefns[i].name, name) == 0) return &shapefns[i];
  return NULL;
}
