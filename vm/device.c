/* The CPU device: host memory, and a stream that runs everything at once
 * on the calling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device.h"

/* Blocks from this size up are mapped from the system and unmapped when
 * freed, not malloc'ed: glibc raises its mmap threshold to the largest
 * mapped chunk freed (up to 32 MiB), after which blocks of that size come
 * from its heap, whose freed memory stays resident, so a pool that trims
 * blocks (vm/pool.c) would not lower the process's memory and its peak
 * grew run after run. (Under AddressSanitizer, malloc still: its checks
 * cover the blocks.) */
#define CPU_MAP_MIN ((size_t)1 << 20)
#if defined(__SANITIZE_ADDRESS__)
#define CPU_MAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPU_MAP 0
#endif
#endif
#ifndef CPU_MAP
#define CPU_MAP 1
#endif

static size_t cpu_map_len(size_t size) {
  long page = sysconf(_SC_PAGESIZE);
  size_t mask = page > 0 ? (size_t)page - 1 : 4095;
  return (size + mask) & ~mask;
}

static dvm_status *cpu_alloc(const dvm_device *d, size_t size, void **out) {
  /* 256-byte alignment serves every dtype and vector width we use */
  size_t padded = (size + 255) & ~(size_t)255;
  void *p = NULL;
  if (CPU_MAP && size >= CPU_MAP_MIN && padded >= size) {
    p = mmap(NULL, cpu_map_len(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = NULL;
  } else if (padded >= size) {
    p = aligned_alloc(256, padded ? padded : 256);
  }
  if (!p) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  *out = p;
  return NULL;
}

static void cpu_free(const dvm_device *d, void *ptr, size_t size) {
  if (CPU_MAP && size >= CPU_MAP_MIN) munmap(ptr, cpu_map_len(size));
  else free(ptr);
}

static dvm_status *cpu_copy(const dvm_device *d, void *dst, dvm_device_kind dst_dev, const void *src,
                            dvm_device_kind src_dev, size_t n) {
  if (dst_dev != DVM_DEVICE_CPU || src_dev != DVM_DEVICE_CPU)
    return dvm_status_new(DVM_INTERNAL, "cpu device asked to copy %s -> %s",
                          dvm_device_name(src_dev), dvm_device_name(dst_dev));
  if (n) memcpy(dst, src, n);
  return NULL;
}

static dvm_status *cpu_sync(const dvm_device *d) { return NULL; }

static void cpu_describe(const dvm_device *d, char *buf, size_t size) { snprintf(buf, size, "cpu"); }

static const dvm_device cpu_device;
/* One for every VM: it holds nothing. */
static dvm_stream cpu_stream = {&cpu_device};

static dvm_status *cpu_stream_create(const dvm_device *d, uint64_t *syncs, dvm_stream **out) {
  *out = &cpu_stream;
  return NULL;
}

static void cpu_stream_destroy(dvm_stream *s) {}

static dvm_status *cpu_stream_copy(dvm_stream *s, void *dst, dvm_device_kind dst_dev, const void *src,
                                   dvm_device_kind src_dev, size_t n) {
  return cpu_copy(s->dev, dst, dst_dev, src, src_dev, n);
}

static dvm_status *cpu_stream_sync(dvm_stream *s) { return NULL; }

static dvm_status *cpu_launch(dvm_stream *s, const dvm_kernel_def *k, const dvm_kernel_args *a) {
  return k->fn(a);
}

static const dvm_device cpu_device = {
    .kind = DVM_DEVICE_CPU,
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .describe = cpu_describe,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_copy = cpu_stream_copy,
    .stream_sync = cpu_stream_sync,
    .launch = cpu_launch,
};

const dvm_device *dvm_device_cpu(void) { return &cpu_device; }
