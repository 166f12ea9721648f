/* A VM's device copies of module constants, uploaded once per VM and
 * device: a `copy` of a constant (or a view of one) to a device shares the
 * copy an earlier `copy` made of the same bytes and shape. Constants are
 * immutable and the VM holds the module, so a copy stays valid for the
 * VM's life. */
#ifndef DVM_CONSTCOPY_H
#define DVM_CONSTCOPY_H

#include <stddef.h>

#include "dvm/status.h"
#include "object.h"

/* An open addressing table, at most half full; zeroed is empty. */
typedef struct dvm_constcopy {
  struct dvm_constcopy_entry *tab;
  size_t n, cap;
} dvm_constcopy;

/* The copy made for `host` (a view of the module's data), or NULL. */
dvm_tensor *dvm_constcopy_find(const dvm_constcopy *c, const dvm_tensor *host);
/* Remembers `dev` (retained) as the copy of `host`. Past 65536 copies
 * (views at ever new shapes) it remembers no more: those are copied each
 * time. */
DVM_MUST_USE dvm_status *dvm_constcopy_add(dvm_constcopy *c, const dvm_tensor *host, dvm_tensor *dev);
/* Releases every copy; c is empty again. */
void dvm_constcopy_clear(dvm_constcopy *c);

#endif
