/* Weight memory on 2 MiB pages (weight_mem.h).
 *
 * Why: a call streams its weights once, and with 4 KiB pages a model's
 * weights outgrow the TLB: each 4 KiB of B costs a page walk. On 2 MiB
 * pages (transparent huge pages, which Linux gives where its setting is
 * "madvise" or "always") an MLP of 12 MB ran at batch 1 in 0.15 ms
 * instead of 0.18, BERT-base 1x8 6% and a ResNet-18 at 224x224 3% faster
 * (docs/performance.md "2 MiB pages for weights"). Only whole 2 MiB pieces
 * are asked for, so RSS does not grow: a 2.3 MB weight takes one huge page
 * and 4 KiB pages for the rest, not two huge pages. */
#include "ops/cpu/weight_mem.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *dvm_weight_alloc(size_t bytes) {
  void *p = NULL;
  int huge = bytes >= HUGE_PAGE;
  if (posix_memalign(&p, huge ? HUGE_PAGE : 64, bytes ? bytes : 64) != 0) return NULL;
  if (huge) madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* advice: failure is harmless */
  return p;
}
