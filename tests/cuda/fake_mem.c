/* The stand-in driver's device memory (fake.h): every allocation is its
 * own mapping, [guard page | leading red zone | n bytes | trailing red
 * zone | guard page], its n bytes ending on a 256-byte boundary against
 * the trailing guard page (so an access past a size that is a multiple of
 * 256 faults at once; a shorter overrun writes the red zone, found at the
 * next check). The pages are closed (PROT_NONE) except while queued work
 * runs, so the host touching a device pointer faults; a freed allocation
 * stays reserved and closed, so a late touch faults too. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake.h"

#define ALIGN 256
#define CANARY 0xa5
#define POISON 0xff /* a NaN in every float dtype, -1 in every integer */

typedef struct region {
  char *base; /* the mapping, guard pages included */
  size_t maplen, inner; /* inner: the open pages, from base + page */
  fake_ptr p;
  size_t n;
  int live;
} region;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static region *regions;
static size_t nregions, cap;
static int opened;

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void protect(const region *r, int open) {
  (void)mprotect(r->base + page(), r->inner, open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

static region *find(fake_ptr p) {
  for (size_t i = 0; i < nregions; i++)
    if (regions[i].live && regions[i].p == p) return &regions[i];
  return NULL;
}

CUresult fake_mem_alloc(size_t n, fake_ptr *out) {
  size_t pg = page(), body = (n + ALIGN - 1) / ALIGN * ALIGN;
  size_t inner = (body + ALIGN + pg - 1) / pg * pg, maplen = inner + 2 * pg;
  pthread_mutex_lock(&lock);
  if (nregions == cap) {
    size_t c = cap ? 2 * cap : 256;
    region *r = realloc(regions, c * sizeof *r);
    if (!r) {
      pthread_mutex_unlock(&lock);
      return FAKE_OUT_OF_MEMORY;
    }
    regions = r, cap = c;
  }
  char *base = mmap(NULL, maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    pthread_mutex_unlock(&lock);
    return FAKE_OUT_OF_MEMORY;
  }
  region *r = &regions[nregions++];
  *r = (region){base, maplen, inner, (fake_ptr)(uintptr_t)(base + pg + inner - body), n, 1};
  protect(r, 1);
  memset(base + pg, CANARY, inner);
  memset((char *)(uintptr_t)r->p, POISON, n);
  protect(r, opened);
  *out = r->p;
  pthread_mutex_unlock(&lock);
  return 0;
}

/* 0, or the first byte of r's red zones that is not the canary */
static const char *damaged(const region *r) {
  const char *lo = r->base + page(), *start = (const char *)(uintptr_t)r->p, *end = lo + r->inner;
  for (const char *q = lo; q < start; q++)
    if ((unsigned char)*q != CANARY) return q;
  for (const char *q = start + r->n; q < end; q++)
    if ((unsigned char)*q != CANARY) return q;
  return NULL;
}

static int report(const region *r) {
  const char *q = damaged(r), *start = (const char *)(uintptr_t)r->p;
  if (!q) return 0;
  fprintf(stderr, "fake_cuda: device memory written out of bounds: byte %lld of the %zu-byte allocation at 0x%llx\n",
          (long long)(q - start), r->n, (unsigned long long)r->p);
  return 1;
}

CUresult fake_mem_free(fake_ptr p) {
  pthread_mutex_lock(&lock);
  region *r = find(p);
  int bad = 0;
  if (r) {
    if (!opened) protect(r, 1);
    bad = report(r);
    /* fresh pages, closed for good: the address is never handed out again */
    (void)mmap(r->base, r->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    r->live = 0;
  }
  pthread_mutex_unlock(&lock);
  return !r ? FAKE_INVALID_VALUE : bad ? FAKE_ILLEGAL_ADDRESS : 0;
}

int fake_mem_inside(fake_ptr p, size_t n) {
  pthread_mutex_lock(&lock);
  int in = 0;
  for (size_t i = 0; i < nregions && !in; i++) {
    const region *r = &regions[i];
    in = r->live && p >= r->p && p - r->p <= r->n && n <= r->n - (p - r->p);
  }
  pthread_mutex_unlock(&lock);
  return in;
}

void fake_mem_open(int open) {
  pthread_mutex_lock(&lock);
  opened = open;
  for (size_t i = 0; i < nregions; i++)
    if (regions[i].live) protect(&regions[i], open);
  pthread_mutex_unlock(&lock);
}

int fake_mem_check_zones(void) {
  pthread_mutex_lock(&lock);
  int bad = 0;
  for (size_t i = 0; i < nregions; i++)
    if (regions[i].live) {
      if (!opened) protect(&regions[i], 1);
      bad |= report(&regions[i]);
      if (!opened) protect(&regions[i], 0);
    }
  pthread_mutex_unlock(&lock);
  return bad;
}

static struct sigaction before;

/* Async-signal-safe enough for a dying process: reads the table, writes
 * one line when the fault is in device memory, then returns with the
 * handler from before restored (the default, or a sanitizer's), so the
 * access faults again and that handler reports it. */
static void on_fault(int sig, siginfo_t *si, void *ctx) {
  (void)sig, (void)ctx;
  (void)sigaction(SIGSEGV, &before, NULL);
  const char *a = si->si_addr;
  for (size_t i = 0; i < nregions; i++) {
    const region *r = &regions[i];
    if (a < r->base || a >= r->base + r->maplen) continue;
    char msg[200];
    int k = snprintf(msg, sizeof msg,
                     "fake_cuda: %s device memory at 0x%llx touched at offset %lld (%zu bytes)%s\n",
                     r->live ? "" : "freed", (unsigned long long)r->p,
                     (long long)(a - (const char *)(uintptr_t)r->p), r->n,
                     opened ? "" : " by the host, outside queued device work");
    if (k > 0) (void)!write(2, msg, (size_t)k);
    return;
  }
}

void fake_mem_catch_faults(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  (void)sigaction(SIGSEGV, &sa, &before);
}
