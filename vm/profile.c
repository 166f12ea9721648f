/* Profiling (see dvm/profile.h): a profiled invocation runs one instruction
 * per dvm_interp_run call, timing each and reading the VM's counters around
 * it, so the interpreter loop itself carries no profiling code. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dvm/debug.h"
#include "dvm/profile.h"
#include "instr.h"
#include "vmimpl.h"

#define SHAPES_MAX 256
#define DEFAULT_EVENTS 1000000

typedef struct site {
  int func, instr;
  uint64_t calls, ns, allocs, alloc_bytes, host_syncs;
  uint64_t shape_hash; /* of the first call's operand dims */
  int shapes_vary;
  char shapes[SHAPES_MAX];
} site;

/* A trace event: a site's call, or (site < 0) invocation of function -1-site. */
typedef struct event {
  int32_t site;
  uint64_t start, dur; /* ns since the profile began */
} event;

struct dvm_profile {
  dvm_module *m;
  int32_t **index; /* per function, per instruction: site + 1, or 0 */
  site *sites;
  int nsites, cap;
  event *events;
  size_t nevents, ecap, max_events;
  int trace;
  uint64_t t0; /* ns: when the profile began (trace times count from here) */
  dvm_profile_totals tot;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

dvm_status *dvm_profile_create(dvm_module *m, int trace, size_t max_events, dvm_profile **out) {
  *out = NULL;
  dvm_profile *p = calloc(1, sizeof *p);
  if (!p || !(p->index = calloc(m->nfuncs ? m->nfuncs : 1, sizeof *p->index))) {
    free(p);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  dvm_module_retain(m);
  p->m = m;
  p->trace = trace;
  p->max_events = max_events ? max_events : DEFAULT_EVENTS;
  p->t0 = now_ns();
  *out = p;
  return NULL;
}

void dvm_profile_destroy(dvm_profile *p) {
  if (!p) return;
  for (uint32_t f = 0; f < p->m->nfuncs; f++) free(p->index[f]);
  free(p->index);
  free(p->sites);
  free(p->events);
  dvm_module_release(p->m);
  free(p);
}

void dvm_profile_reset(dvm_profile *p) {
  for (uint32_t f = 0; f < p->m->nfuncs; f++) {
    free(p->index[f]);
    p->index[f] = NULL;
  }
  p->nsites = 0;
  p->nevents = 0;
  memset(&p->tot, 0, sizeof p->tot);
  p->t0 = now_ns();
}

dvm_status *dvm_vm_set_profile(dvm_vm *vm, dvm_profile *p) {
  if (p && p->m != vm->m)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "the profile was made for another module than the VM's");
  vm->profile = p;
  return NULL;
}

static dvm_status *site_for(dvm_profile *p, int func, int instr, site **out) {
  const dvm_func *fn = &p->m->funcs[func];
  if (!p->index[func] && !(p->index[func] = calloc(fn->ninstr ? fn->ninstr : 1, sizeof(int32_t))))
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  int32_t k = p->index[func][instr];
  if (!k) {
    if (p->nsites == p->cap) {
      int cap = p->cap ? p->cap * 2 : 64;
      site *s = realloc(p->sites, (size_t)cap * sizeof *s);
      if (!s) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
      p->sites = s;
      p->cap = cap;
    }
    p->sites[p->nsites] = (site){.func = func, .instr = instr};
    k = p->index[func][instr] = ++p->nsites;
  }
  *out = &p->sites[k - 1];
  return NULL;
}

static uint64_t dims_hash(const dvm_value *R, dvm_list regs, uint64_t h) {
  for (int64_t i = 0; i < regs.n; i++) {
    const dvm_value *v = &R[regs.v[i]];
    if (v->kind != DVM_VAL_TENSOR) continue;
    const dvm_tensor *t = v->u.tensor;
    h = (h ^ (uint64_t)t->rank) * 0x100000001b3ull;
    for (int d = 0; d < t->rank; d++) h = (h ^ (uint64_t)t->dims[d]) * 0x100000001b3ull;
  }
  return h;
}

static void append_shapes(char *buf, size_t size, const dvm_value *R, dvm_list regs) {
  for (int64_t i = 0; i < regs.n; i++) {
    const dvm_value *v = &R[regs.v[i]];
    size_t len = strlen(buf);
    char one[160] = "?";
    if (v->kind == DVM_VAL_TENSOR)
      dvm_shape_format(one, sizeof one, (dvm_dtype)v->u.tensor->dtype, v->u.tensor->rank, v->u.tensor->dims);
    snprintf(buf + len, size - len, "%s%s", len && buf[len - 1] != ' ' ? " " : "", one);
  }
}

/* Kernel operands' shapes: the first call's kept, later ones compared. */
static void note_shapes(site *s, const dvm_value *R, const int64_t *invoke) {
  dvm_ops_INVOKE x = dvm_decode_INVOKE(invoke);
  dvm_list outs = x.outs, ins = x.ins;
  uint64_t h = dims_hash(R, outs, dims_hash(R, ins, 0xcbf29ce484222325ull));
  if (s->calls == 0) {
    s->shape_hash = h;
    s->shapes[0] = 0;
    append_shapes(s->shapes, sizeof s->shapes, R, ins);
    size_t len = strlen(s->shapes);
    snprintf(s->shapes + len, sizeof s->shapes - len, " ->");
    append_shapes(s->shapes, sizeof s->shapes, R, outs);
  } else if (h != s->shape_hash) {
    s->shapes_vary = 1;
  }
}

static void pool_counts(dvm_vm *vm, uint64_t *allocs, uint64_t *bytes) {
  *allocs = *bytes = 0;
  for (int d = 0; d < DVM_DEVICE_COUNT; d++) {
    if (!vm->pools[d]) continue;
    dvm_pool_stats ps;
    dvm_pool_get_stats(vm->pools[d], &ps);
    *allocs += ps.allocs + ps.reuses;
    *bytes += ps.requested_total;
  }
}

static void add_event(dvm_profile *p, int32_t at, uint64_t start, uint64_t end) {
  if (!p->trace) return;
  if (p->nevents == p->ecap) {
    size_t cap = p->ecap ? p->ecap * 2 : 4096;
    if (cap > p->max_events) cap = p->max_events;
    event *e = cap > p->ecap ? realloc(p->events, cap * sizeof *e) : NULL;
    if (!e) {
      p->tot.events_dropped++;
      return;
    }
    p->events = e;
    p->ecap = cap;
  }
  p->events[p->nevents++] = (event){at, start - p->t0, end - start};
}

dvm_status *dvm_profile_run(dvm_vm *vm, int stop) {
  dvm_profile *p = vm->profile;
  int func = (int)vm->frames[vm->nframes - 1].func;
  uint64_t inv0 = now_ns(), steps0 = vm->stats.instructions, kernels0 = vm->stats.kernel_calls;
  uint64_t syncs0 = vm->stats.host_syncs, allocs0, bytes0;
  pool_counts(vm, &allocs0, &bytes0);
  dvm_status *st = NULL;
  uint64_t allocs = allocs0, bytes = bytes0;
  while (!st && vm->nframes > stop) {
    const dvm_frame *fr = &vm->frames[vm->nframes - 1];
    const dvm_func *fn = &vm->m->funcs[fr->func];
    const int64_t *code = fn->code + fr->pc;
    site *s = NULL;
    if ((st = site_for(p, (int)fr->func, dvm_func_instr_index(fn, fr->pc), &s))) break;
    if (code[0] == DVM_OP_INVOKE) note_shapes(s, vm->regs + fr->base, code);
    uint64_t syncs = vm->stats.host_syncs, t = now_ns();
    st = dvm_interp_run(vm, stop, 1);
    uint64_t end = now_ns();
    uint64_t a, b;
    pool_counts(vm, &a, &b);
    s->calls++;
    s->ns += end - t;
    s->allocs += a - allocs;
    s->alloc_bytes += b - bytes;
    s->host_syncs += vm->stats.host_syncs - syncs;
    allocs = a;
    bytes = b;
    if (code[0] == DVM_OP_INVOKE) add_event(p, (int32_t)(s - p->sites), t, end);
  }
  uint64_t end = now_ns();
  add_event(p, -1 - func, inv0, end);
  p->tot.invocations++;
  p->tot.ns += end - inv0;
  p->tot.instructions += vm->stats.instructions - steps0;
  p->tot.kernel_calls += vm->stats.kernel_calls - kernels0;
  p->tot.allocs += allocs - allocs0;
  p->tot.alloc_bytes += bytes - bytes0;
  p->tot.host_syncs += vm->stats.host_syncs - syncs0;
  if (st && vm->nframes > stop) dvm_interp_unwind(vm, stop); /* a failure of the profiler itself */
  return st;
}

int dvm_profile_site_count(const dvm_profile *p) { return p->nsites; }

void dvm_profile_get_site(const dvm_profile *p, int i, dvm_profile_site *out) {
  const site *s = &p->sites[i];
  dvm_instr_info info;
  dvm_function_instr(p->m, s->func, s->instr, &info);
  *out = (dvm_profile_site){s->func, s->instr, info.opcode, info.node, info.callee, s->shapes,
                            s->shapes_vary, s->calls, s->ns, s->allocs, s->alloc_bytes, s->host_syncs};
}

void dvm_profile_get_totals(const dvm_profile *p, dvm_profile_totals *out) {
  *out = p->tot;
  out->events = p->nevents;
}

/* ---- the report ---- */

/* A row of a grouped table: sites with the same key summed. */
typedef struct group {
  const char *key;
  int len; /* of the key: a generated kernel "fused@12" counts as "fused" */
  uint64_t calls, ns, allocs, host_syncs;
} group;

static int by_ns_desc(uint64_t a, uint64_t b) { return a < b ? 1 : a > b ? -1 : 0; }
static int cmp_site(const void *a, const void *b) {
  return by_ns_desc(((const dvm_profile_site *)a)->ns, ((const dvm_profile_site *)b)->ns);
}
static int cmp_group(const void *a, const void *b) {
  return by_ns_desc(((const group *)a)->ns, ((const group *)b)->ns);
}

static size_t group_add(group *g, size_t n, const char *key, const dvm_profile_site *s) {
  int len = (int)strcspn(key, "@");
  size_t i = 0;
  while (i < n && !(g[i].len == len && strncmp(g[i].key, key, (size_t)len) == 0)) i++;
  if (i == n) g[n++] = (group){key, len, 0, 0, 0, 0};
  g[i].calls += s->calls;
  g[i].ns += s->ns;
  g[i].allocs += s->allocs;
  g[i].host_syncs += s->host_syncs;
  return n;
}

static void print_groups(FILE *out, const char *title, group *g, size_t n, uint64_t total) {
  qsort(g, n, sizeof *g, cmp_group);
  fprintf(out, "\n%-36s %9s %11s %6s %10s %8s %6s\n", title, "calls", "total ms", "%", "avg us", "allocs", "syncs");
  for (size_t i = 0; i < n; i++)
    fprintf(out, "%-36.*s %9" PRIu64 " %11.3f %6.1f %10.2f %8" PRIu64 " %6" PRIu64 "\n", g[i].len < 36 ? g[i].len : 36, g[i].key, g[i].calls,
            (double)g[i].ns / 1e6, total ? 100.0 * (double)g[i].ns / (double)total : 0.0,
            g[i].calls ? (double)g[i].ns / 1e3 / (double)g[i].calls : 0.0, g[i].allocs, g[i].host_syncs);
}

static dvm_status *write_status(FILE *out, const char *what) {
  if (fflush(out) != 0 || ferror(out)) return dvm_status_new(DVM_IO, "writing the %s: %s", what, strerror(errno));
  return NULL;
}

dvm_status *dvm_profile_print(const dvm_profile *p, int top, FILE *out) {
  size_t n = (size_t)p->nsites;
  dvm_profile_site *s = malloc((n ? n : 1) * sizeof *s);
  group *g = malloc((n ? n : 1) * sizeof *g);
  if (!s || !g) {
    free(s);
    free(g);
    return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    dvm_profile_get_site(p, (int)i, &s[i]);
    sum += s[i].ns;
  }
  qsort(s, n, sizeof *s, cmp_site);
  const dvm_profile_totals *t = &p->tot;
  double inv = t->invocations ? (double)t->invocations : 1;
  fprintf(out, "profile: %" PRIu64 " invocations, %.3f ms each (%.3f ms in instructions), "
               "%.0f instructions, %.0f kernel calls, %.0f allocations (%.0f bytes), %.1f host syncs per invocation\n",
          t->invocations, (double)t->ns / 1e6 / inv, (double)sum / 1e6 / inv, (double)t->instructions / inv,
          (double)t->kernel_calls / inv, (double)t->allocs / inv, (double)t->alloc_bytes / inv,
          (double)t->host_syncs / inv);
  size_t shown = top > 0 && (size_t)top < n ? (size_t)top : n;
  fprintf(out, "\n%-6s %11s %6s %10s %7s %6s  %-14s %-24s %s\n", "calls", "total ms", "%", "avg us", "allocs",
          "syncs", "instruction", "node", "op and shapes");
  for (size_t i = 0; i < shown; i++) {
    char where[40];
    snprintf(where, sizeof where, "%s@%d", s[i].opcode, s[i].instruction);
    if (p->m->nfuncs > 1) snprintf(where, sizeof where, "%s:%s@%d", p->m->funcs[s[i].function].name, s[i].opcode, s[i].instruction);
    fprintf(out, "%-6" PRIu64 " %11.3f %6.1f %10.2f %7" PRIu64 " %6" PRIu64 "  %-14s %-24s %s%s%s%s\n", s[i].calls,
            (double)s[i].ns / 1e6, sum ? 100.0 * (double)s[i].ns / (double)sum : 0.0,
            (double)s[i].ns / 1e3 / (double)s[i].calls, s[i].allocs, s[i].host_syncs, where,
            s[i].node ? s[i].node : "-", s[i].callee ? s[i].callee : "", *s[i].shapes ? " " : "", s[i].shapes,
            s[i].shapes_vary ? " (first of several shapes)" : "");
  }
  if (shown < n) fprintf(out, "... %zu more sites\n", n - shown);
  size_t ng = 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s[i].opcode, "invoke")) ng = group_add(g, ng, s[i].callee, &s[i]);
  print_groups(out, "op (kernel)", g, ng, sum);
  ng = 0;
  for (size_t i = 0; i < n; i++) ng = group_add(g, ng, s[i].opcode, &s[i]);
  print_groups(out, "instruction class", g, ng, sum);
  free(s);
  free(g);
  return write_status(out, "profile");
}

/* A JSON string body: quotes, backslashes and control characters escaped. */
static void json_str(FILE *out, const char *s) {
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20) fprintf(out, "\\u%04x", c);
    else fputc(c, out);
  }
}

dvm_status *dvm_profile_write_trace(const dvm_profile *p, FILE *out) {
  if (!p->trace) return dvm_status_new(DVM_FAILED_PRECONDITION, "the profile was made without trace events");
  fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", out);
  fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"dvm\"}}", out);
  for (size_t i = 0; i < p->nevents; i++) {
    const event *e = &p->events[i];
    fputs(",\n{\"name\":\"", out);
    if (e->site < 0) {
      json_str(out, p->m->funcs[-1 - e->site].name);
      fputs("\",\"cat\":\"invocation\"", out);
    } else {
      dvm_profile_site s;
      dvm_profile_get_site(p, e->site, &s);
      json_str(out, s.callee);
      fputs("\",\"cat\":\"kernel\",\"args\":{\"node\":\"", out);
      json_str(out, s.node ? s.node : "");
      fputs("\",\"shapes\":\"", out);
      json_str(out, s.shapes);
      fprintf(out, "\",\"instruction\":%d}", s.instruction);
    }
    fprintf(out, ",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f}", (double)e->start / 1e3,
            (double)e->dur / 1e3);
  }
  fputs("\n]}\n", out);
  return write_status(out, "trace");
}
