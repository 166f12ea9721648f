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
/* Linux 6.1's synchronous collapse into 2 MiB pages; glibc's headers may
 * not name it yet (the generic value, as on x86-64 and arm64). An older
 * kernel answers EINVAL, and khugepaged collapses later instead. */
#if !defined(MADV_COLLAPSE) && defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#define MADV_COLLAPSE 25
#endif

/* p's whole 2 MiB pieces advised onto 2 MiB pages: advice, failure is harmless. */
static void advise_huge(void *p, size_t bytes) { madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); }

void *dvm_weight_alloc_lazy(size_t bytes) {
  void *p = NULL;
  return posix_memalign(&p, bytes >= HUGE_PAGE ? HUGE_PAGE : 64, bytes ? bytes : 64) == 0 ? p : NULL;
}

void dvm_weight_settle(void *p, size_t bytes) {
  if (bytes < HUGE_PAGE) return;
  advise_huge(p, bytes);
#ifdef MADV_COLLAPSE
  madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_COLLAPSE);
#endif
}

void *dvm_weight_alloc(size_t bytes) {
  void *p = dvm_weight_alloc_lazy(bytes);
  if (p && bytes >= HUGE_PAGE) advise_huge(p, bytes);
  return p;
}
