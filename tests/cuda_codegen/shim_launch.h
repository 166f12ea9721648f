/* The block scheduler of the host emulation (shim.h), included after the
 * generated source: test_emulate.c and the stand-in driver find
 * dvm_emu_launch with dlsym and pass it the kernels. */
typedef void (*dvm_emu_kernel)(const dvm_gen_params);

/* the bounds of the __shared__ section; absent (NULL) when there is none */
extern "C" char __start_dvm_emu_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_dvm_emu_shared[] __attribute__((weak, visibility("hidden")));

static dvm_emu_kernel dvm_emu_k;
static const dvm_gen_params *dvm_emu_p;
static unsigned long long dvm_emu_rng;

static unsigned dvm_emu_random(unsigned n) {
  dvm_emu_rng ^= dvm_emu_rng << 13, dvm_emu_rng ^= dvm_emu_rng >> 7, dvm_emu_rng ^= dvm_emu_rng << 17;
  return (unsigned)(dvm_emu_rng % n);
}

static void dvm_emu_body(void) {
  dvm_emu_k(*dvm_emu_p);
  dvm_emu_th[dvm_emu_self].state = DVM_EMU_ENDED;
} /* returns to uc_link, the scheduler */

/* The next thread to run: the lowest runnable (schedule 0), the highest
 * (1) or a random one (2); -1 when none is runnable. */
static int dvm_emu_pick(unsigned n, int schedule) {
  unsigned runnable = 0;
  for (unsigned t = 0; t < n; t++) runnable += dvm_emu_th[t].state == DVM_EMU_RUNNABLE;
  if (!runnable) return -1;
  unsigned k = schedule == 0 ? 0 : schedule == 1 ? runnable - 1 : dvm_emu_random(runnable);
  for (unsigned t = 0; t < n; t++)
    if (dvm_emu_th[t].state == DVM_EMU_RUNNABLE && k-- == 0) return (int)t;
  return -1;
}

/* After thread t stopped: its warp passes a shuffle once all 32 lanes are
 * at it, the block passes a barrier once all threads are. 0, or what is
 * wrong with the shuffle. */
static int dvm_emu_release(unsigned t, unsigned n) {
  if (dvm_emu_th[t].state == DVM_EMU_AT_SHUFFLE) {
    unsigned w = t & ~31u;
    if (w + 32 > n) return DVM_EMU_BAD_SHUFFLE; /* a partial warp */
    for (unsigned l = w; l < w + 32; l++)
      if (dvm_emu_th[l].state != DVM_EMU_AT_SHUFFLE) return 0;
    float v[32];
    for (unsigned l = 0; l < 32; l++) {
      const dvm_emu_thread *a = &dvm_emu_th[w + l];
      if (a->mask != 0xffffffffu || a->lane_mask < 0 || a->lane_mask > 31) return DVM_EMU_BAD_SHUFFLE;
      v[l] = dvm_emu_th[w + (l ^ (unsigned)a->lane_mask)].value;
    }
    for (unsigned l = 0; l < 32; l++) {
      dvm_emu_th[w + l].value = v[l];
      dvm_emu_th[w + l].state = DVM_EMU_RUNNABLE;
    }
  } else if (dvm_emu_th[t].state == DVM_EMU_AT_BARRIER) {
    for (unsigned l = 0; l < n; l++)
      if (dvm_emu_th[l].state != DVM_EMU_AT_BARRIER) return 0;
    for (unsigned l = 0; l < n; l++) dvm_emu_th[l].state = DVM_EMU_RUNNABLE;
  }
  return 0;
}

static void dvm_emu_unflatten(unsigned i, dvm_emu_dim d, dvm_emu_dim *out) {
  out->x = i % d.x, out->y = i / d.x % d.y, out->z = i / d.x / d.y;
}

/* Runs one block to its end; 0, or what went wrong. */
static int dvm_emu_block(unsigned n, int schedule, char *stacks, size_t stack) {
  char *lo = __start_dvm_emu_shared, *hi = __stop_dvm_emu_shared;
  if (lo != hi) memset(lo, 0xff, (size_t)(hi - lo));
  for (unsigned t = 0; t < n; t++) {
    ucontext_t *c = &dvm_emu_th[t].ctx;
    getcontext(c);
    c->uc_stack.ss_sp = stacks + stack * t;
    c->uc_stack.ss_size = stack;
    c->uc_link = &dvm_emu_scheduler;
    makecontext(c, dvm_emu_body, 0);
    dvm_emu_th[t].state = DVM_EMU_RUNNABLE;
  }
  for (int t; (t = dvm_emu_pick(n, schedule)) >= 0;) {
    dvm_emu_self = (unsigned)t;
    dvm_emu_unflatten((unsigned)t, blockDim, &threadIdx);
    swapcontext(&dvm_emu_scheduler, &dvm_emu_th[t].ctx);
    int err = dvm_emu_release((unsigned)t, n);
    if (err) return err;
  }
  /* nothing runnable: all ended, or some wait for what will never come */
  for (unsigned t = 0; t < n; t++)
    if (dvm_emu_th[t].state != DVM_EMU_ENDED) return DVM_EMU_DIVERGED;
  return 0;
}

/* Runs kernel k over a grid of blocks of threads (x, y, z each), in the
 * given schedule (0 lowest first, 1 highest first, 2 random from seed)
 * for both the blocks' order and the threads' turns; 0, or what went
 * wrong (DVM_EMU_...). */
extern "C" int dvm_emu_launch(dvm_emu_kernel k, const unsigned *grid, const unsigned *block, int schedule,
                              unsigned long long seed, const dvm_gen_params *p) {
  unsigned long long nb = (unsigned long long)grid[0] * grid[1] * grid[2];
  unsigned n = block[0] * block[1] * block[2];
  if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2] ||
      (unsigned long long)block[0] * block[1] * block[2] > 1024 || nb > 0xffffffffull)
    return DVM_EMU_BAD_LAUNCH;
  gridDim = dvm_emu_dim{grid[0], grid[1], grid[2]};
  blockDim = dvm_emu_dim{block[0], block[1], block[2]};
  dvm_emu_k = k, dvm_emu_p = p;
  dvm_emu_rng = seed * 0x9E3779B97F4A7C15ull + 1;
  const size_t stack = 64 << 10;
  char *stacks = (char *)malloc(stack * n);
  unsigned *order = (unsigned *)malloc(sizeof(unsigned) * nb);
  int err = stacks && order ? 0 : DVM_EMU_NO_MEMORY;
  for (unsigned b = 0; b < nb && !err; b++) order[b] = schedule == 1 ? (unsigned)nb - 1 - b : b;
  for (unsigned b = (unsigned)nb; schedule == 2 && b > 1 && !err; b--) { /* Fisher-Yates */
    unsigned j = dvm_emu_random(b), tmp = order[b - 1];
    order[b - 1] = order[j], order[j] = tmp;
  }
  for (unsigned b = 0; b < nb && !err; b++) {
    dvm_emu_unflatten(order[b], gridDim, &blockIdx);
    err = dvm_emu_block(n, schedule, stacks, stack);
  }
  free(order);
  free(stacks);
  return err;
}
