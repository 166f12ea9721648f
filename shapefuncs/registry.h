/* The shape function table (registry.c): every shape function by the
 * name a .dvmb uses. */
#ifndef DVM_SHAPEFUNCS_REGISTRY_H
#define DVM_SHAPEFUNCS_REGISTRY_H

#include "kernel.h"

/* The shape function of that name, or NULL. */
const dvm_shapefn_def *dvm_shapefn_find(const char *name);

#endif
