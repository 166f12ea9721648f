/* The launcher of the host emulation (shim.h), included after the generated
 * source: test_emulate.c finds it with dlsym and passes it the kernels. */
typedef void (*dvm_emu_kernel)(const dvm_gen_params);

static dvm_emu_kernel dvm_emu_k;
static const dvm_gen_params *dvm_emu_p;
static int dvm_emu_done[1024];

static void dvm_emu_thread(int tid) {
  dvm_emu_k(*dvm_emu_p);
  dvm_emu_done[tid] = 1;
} /* returns to uc_link, the launcher */

/* Runs kernel k over grid x block threads; 0, or what went wrong. */
extern "C" int dvm_emu_launch(dvm_emu_kernel k, unsigned grid, unsigned block, int threaded,
                              const dvm_gen_params *p) {
  if (block == 0 || block > 1024 || block % 32) return DVM_EMU_BAD_LAUNCH;
  gridDim = dvm_emu_dim{grid, 1, 1};
  blockDim = dvm_emu_dim{block, 1, 1};
  dvm_emu_error = 0;
  dvm_emu_threaded = threaded;
  dvm_emu_k = k, dvm_emu_p = p;
  const size_t stack = 64 << 10;
  char *stacks = threaded ? (char *)malloc(stack * block) : NULL;
  if (threaded && !stacks) return DVM_EMU_BAD_LAUNCH;
  for (unsigned b = 0; b < grid && !dvm_emu_error; b++) {
    blockIdx.x = b;
    if (!threaded) {
      for (unsigned t = 0; t < block; t++) {
        threadIdx.x = t;
        k(*p);
      }
      continue;
    }
    for (unsigned t = 0; t < block; t++) {
      ucontext_t *c = &dvm_emu_ctx[t];
      getcontext(c);
      c->uc_stack.ss_sp = stacks + stack * t;
      c->uc_stack.ss_size = stack;
      c->uc_link = &dvm_emu_launcher;
      makecontext(c, (void (*)(void))dvm_emu_thread, 1, (int)t);
      dvm_emu_done[t] = 0;
    }
    /* rounds: each thread runs to its next barrier, or to its end; all
     * must do the same, or the block has diverged */
    for (unsigned finished = 0; finished == 0 && !dvm_emu_error;) {
      for (unsigned t = 0; t < block; t++) {
        threadIdx.x = t;
        swapcontext(&dvm_emu_launcher, &dvm_emu_ctx[t]);
        finished += (unsigned)dvm_emu_done[t];
      }
      if (finished && finished != block) dvm_emu_error = DVM_EMU_DIVERGED;
    }
  }
  free(stacks);
  return dvm_emu_error;
}
