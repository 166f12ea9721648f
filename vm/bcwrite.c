/* Writing a verified module as canonical .dvmb bytes: strings interned in
 * the order of first use, every section present, constants and payloads
 * 64-byte aligned. Loading and writing again gives the same bytes. */
#include <string.h>
#include <stdlib.h>
#include <zlib.h>

#include "bytecode.h"
#include "opcode.h"

typedef struct {
  uint8_t *p;
  size_t len, cap;
  int oom;
} buf;

static void put(buf *b, const void *src, size_t n) {
  if (b->oom) return;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, src, n);
  b->len += n;
}

static void put_le(buf *b, uint64_t v, int n) {
  uint8_t t[8];
  for (int i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
  put(b, t, (size_t)n);
}
static void put_u8(buf *b, unsigned v) { put_le(b, v, 1); }
static void put_u16(buf *b, unsigned v) { put_le(b, v, 2); }
static void put_u32(buf *b, uint32_t v) { put_le(b, v, 4); }
static void put_u64(buf *b, uint64_t v) { put_le(b, v, 8); }

static void pad_to(buf *b, size_t align) {
  static const uint8_t zeros[64];
  put(b, zeros, (align - b->len % align) % align);
}

/* String interning: an open-addressing table of indices into `list`. */
typedef struct {
  const char **list;
  uint32_t n, cap; /* list */
  uint32_t *slots; /* index + 1, 0 = empty */
  uint32_t nslots;
  int oom;
} interner;

static uint32_t hash(const char *s) {
  uint32_t h = 2166136261u;
  while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
  return h;
}

static int grow(interner *in) {
  uint32_t ns = in->nslots ? in->nslots * 2 : 256;
  uint32_t *slots = calloc(ns, sizeof *slots);
  const char **list = realloc(in->list, sizeof(char *) * ns / 2);
  if (!slots || !list) {
    free(slots);
    if (list) in->list = list;
    return 0;
  }
  in->list = list;
  for (uint32_t i = 0; i < in->n; i++) {
    uint32_t h = hash(list[i]) & (ns - 1);
    while (slots[h]) h = (h + 1) & (ns - 1);
    slots[h] = i + 1;
  }
  free(in->slots);
  in->slots = slots;
  in->nslots = ns;
  return 1;
}

static uint32_t intern(interner *in, const char *s) {
  if (in->oom) return 0;
  if ((in->n + 1) * 2 > in->nslots && !grow(in)) {
    in->oom = 1;
    return 0;
  }
  uint32_t h = hash(s) & (in->nslots - 1);
  while (in->slots[h]) {
    uint32_t i = in->slots[h] - 1;
    if (strcmp(in->list[i], s) == 0) return i;
    h = (h + 1) & (in->nslots - 1);
  }
  in->list[in->n] = s;
  in->slots[h] = ++in->n;
  return in->n - 1;
}

/* Calls fn on every string operand word of f's code. */
static void for_string_operands(const dvm_func *f, void (*fn)(void *, int64_t *), void *ctx,
                                int64_t *code) {
  for (uint32_t i = 0; i < f->ninstr; i++) {
    uint32_t w = f->starts[i];
    const char *fmt = dvm_opinfo_table[code[w++]].format;
    for (; *fmt; fmt++) {
      if (dvm_operand_is_list(*fmt)) w += 1 + (uint32_t)code[w];
      else if (*fmt == 's') fn(ctx, &code[w++]);
      else w++;
    }
  }
}

typedef struct {
  interner *in;
  const dvm_module *m;
} remap_ctx;

static void remap_string(void *ctx, int64_t *word) {
  remap_ctx *r = ctx;
  *word = intern(r->in, r->m->strings[*word]);
}

static void write_sig(buf *b, interner *in, const dvm_sig *s) {
  put_u32(b, intern(in, s->name));
  put_u8(b, s->kind);
  put_u8(b, s->dtype);
  put_u8(b, (uint8_t)s->rank);
  put_u8(b, 0);
  for (int d = 0; d < s->rank; d++) put_u64(b, (uint64_t)s->dims[d]);
}

static dvm_status *write_funcs(buf *b, interner *in, const dvm_module *m) {
  put_u32(b, m->nfuncs);
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    const dvm_func *f = &m->funcs[i];
    uint32_t ndebug = 0;
    for (uint32_t k = 0; k < f->ninstr; k++) ndebug += f->src[k] != NULL;
    put_u32(b, intern(in, f->name));
    put_u32(b, f->nregs);
    put_u32(b, f->nparams);
    put_u32(b, f->nresults);
    put_u32(b, f->nsyms);
    put_u32(b, f->ncode);
    put_u32(b, ndebug);
    for (uint32_t s = 0; s < f->nsyms; s++) {
      put_u32(b, intern(in, f->syms[s].name));
      put_u32(b, f->syms[s].reg);
      put_u64(b, (uint64_t)f->syms[s].lo);
      put_u64(b, (uint64_t)f->syms[s].hi);
    }
    for (uint32_t p = 0; p < f->nparams; p++) write_sig(b, in, &f->params[p]);
    for (uint32_t p = 0; p < f->nresults; p++) write_sig(b, in, &f->results[p]);
    int64_t *code = malloc(sizeof(int64_t) * (f->ncode ? f->ncode : 1));
    if (!code) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
    memcpy(code, f->code, sizeof(int64_t) * f->ncode);
    remap_ctx rc = {in, m};
    for_string_operands(f, remap_string, &rc, code);
    for (uint32_t w = 0; w < f->ncode; w++) put_u64(b, (uint64_t)code[w]);
    free(code);
    for (uint32_t k = 0; k < f->ninstr; k++)
      if (f->src[k]) {
        put_u32(b, k);
        put_u32(b, intern(in, f->src[k]));
      }
  }
  return NULL;
}

/* Interns every string in the order the sections mention them, so the
 * string section can be written first. */
static void intern_all(interner *in, const dvm_module *m) {
  for (uint32_t i = 0; i < m->nconsts; i++) intern(in, m->consts[i].name);
  for (uint32_t i = 0; i < m->nconsts; i++)
    if (m->consts[i].ext_path) intern(in, m->consts[i].ext_path);
  for (uint32_t i = 0; i < m->nkernels; i++) intern(in, m->kernels[i].name);
  for (uint32_t i = 0; i < m->nshapefns; i++) intern(in, m->shapefns[i].name);
  for (uint32_t i = 0; i < m->nhostfns; i++) {
    intern(in, m->hostfns[i].name);
    intern(in, m->hostfns[i].sig);
  }
  buf scratch = {0};
  dvm_status *st = write_funcs(&scratch, in, m); /* same traversal as the real write */
  if (st || scratch.oom) in->oom = 1; /* (a string left out would be written as another) */
  dvm_status_free(st);
  free(scratch.p);
  for (uint32_t i = 0; i < m->nfuncs; i++)
    for (uint32_t k = 0; k < m->funcs[i].ninfo; k++) {
      intern(in, m->funcs[i].info[k].key);
      intern(in, m->funcs[i].info[k].value);
    }
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* The least minor version that reads m: 3 when it uses alloc_result
 * (1.3), 2 when it uses what 1.2 added (the tuple instructions len, at,
 * insert and erase, and tuple signatures with a dtype), else 1 with an
 * info section, else 0. */
static int least_minor(const dvm_module *m, uint32_t ninfo) {
  int minor = ninfo ? 1 : 0;
  for (uint32_t i = 0; i < m->nfuncs; i++) {
    const dvm_func *f = &m->funcs[i];
    for (uint32_t p = 0; p < f->nparams + f->nresults; p++) {
      const dvm_sig *s = p < f->nparams ? &f->params[p] : &f->results[p - f->nparams];
      if (dvm_sig_item_dtype(s) >= 0 && minor < 2) minor = 2;
    }
    for (uint32_t pc = 0, len; pc < f->ncode; pc += len) {
      int64_t op = f->code[pc];
      if (op == DVM_OP_ALLOC_RESULT) return 3;
      if ((op == DVM_OP_LEN || op == DVM_OP_AT || op == DVM_OP_INSERT || op == DVM_OP_ERASE) && minor < 2) minor = 2;
      if (!(len = dvm_instr_length(f->code, f->ncode, pc))) break;
    }
  }
  return minor;
}

dvm_status *dvm_bc_write(const dvm_module *m, uint8_t **out, size_t *size) {
  interner in = {0};
  intern_all(&in, m);
  /* the info section (1.1) and the external section (1.3) are optional:
   * without them the file is a 1.0 file */
  uint32_t ninfo = 0, next = 0;
  for (uint32_t i = 0; i < m->nfuncs; i++) ninfo += m->funcs[i].ninfo;
  for (uint32_t i = 0; i < m->nconsts; i++) next += m->consts[i].ext_path != NULL;
  int ids[DVM_SEC_COUNT], nsec = 0;
  for (int id = 1; id <= DVM_SEC_COUNT; id++)
    if ((id != DVM_SEC_INFO || ninfo) && (id != DVM_SEC_EXTERNAL || next)) ids[nsec++] = id;
  buf b = {0};
  uint64_t sec_off[DVM_SEC_COUNT + 1], sec_size[DVM_SEC_COUNT + 1];
  dvm_status *st = NULL;

  put(&b, DVM_BC_MAGIC, 8);
  put(&b, (uint8_t[DVM_BC_HEADER_SIZE - 8]){0}, DVM_BC_HEADER_SIZE - 8);
  put(&b, (uint8_t[DVM_SEC_COUNT * 24]){0}, (size_t)nsec * 24);

  /* Data layout first: constants then payloads, each 64-byte aligned. */
  uint64_t data_len = 0;
  uint64_t *const_off = calloc(m->nconsts + m->nkernels + 1, sizeof(uint64_t));
  if (!const_off) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }
  uint64_t *payload_off = const_off + m->nconsts;
  for (uint32_t i = 0; i < m->nconsts; i++) {
    if (m->consts[i].ext_path) continue; /* offset 0: its bytes are in its file */
    const_off[i] = data_len;
    data_len = align_up(data_len + m->consts[i].nbytes, DVM_BC_DATA_ALIGN);
  }
  for (uint32_t i = 0; i < m->nkernels; i++) {
    payload_off[i] = data_len;
    data_len = align_up(data_len + m->kernels[i].payload_size, DVM_BC_DATA_ALIGN);
  }

  for (int j = 0; j < nsec; j++) {
    int id = ids[j];
    pad_to(&b, id == DVM_SEC_DATA ? DVM_BC_DATA_ALIGN : 8);
    sec_off[id] = b.len;
    switch (id) {
    case DVM_SEC_STRINGS:
      put_u32(&b, in.n);
      for (uint32_t i = 0; i < in.n; i++) {
        uint32_t len = (uint32_t)strlen(in.list[i]);
        put_u32(&b, len);
        put(&b, in.list[i], len + 1);
      }
      break;
    case DVM_SEC_CONSTS:
      put_u32(&b, m->nconsts);
      for (uint32_t i = 0; i < m->nconsts; i++) {
        const dvm_const *c = &m->consts[i];
        put_u32(&b, intern(&in, c->name));
        put_u8(&b, c->dtype);
        put_u8(&b, c->rank);
        put_u16(&b, 0);
        put_u64(&b, const_off[i]);
        put_u64(&b, c->nbytes);
        for (int d = 0; d < c->rank; d++) put_u64(&b, (uint64_t)c->dims[d]);
      }
      break;
    case DVM_SEC_KERNELS:
      put_u32(&b, m->nkernels);
      for (uint32_t i = 0; i < m->nkernels; i++) {
        const dvm_kernel_ref *k = &m->kernels[i];
        put_u32(&b, intern(&in, k->name));
        put_u8(&b, k->device);
        put_le(&b, 0, 3);
        put_u32(&b, k->nvariants);
        put_u64(&b, payload_off[i]);
        put_u64(&b, k->payload_size);
      }
      break;
    case DVM_SEC_SHAPEFNS:
      put_u32(&b, m->nshapefns);
      for (uint32_t i = 0; i < m->nshapefns; i++) put_u32(&b, intern(&in, m->shapefns[i].name));
      break;
    case DVM_SEC_HOSTFNS:
      put_u32(&b, m->nhostfns);
      for (uint32_t i = 0; i < m->nhostfns; i++) {
        put_u32(&b, intern(&in, m->hostfns[i].name));
        put_u32(&b, intern(&in, m->hostfns[i].sig));
      }
      break;
    case DVM_SEC_FUNCS:
      if ((st = write_funcs(&b, &in, m))) goto done;
      break;
    case DVM_SEC_DATA:
      for (uint32_t i = 0; i < m->nconsts; i++) {
        if (m->consts[i].ext_path) continue;
        put(&b, m->consts[i].data, m->consts[i].nbytes);
        pad_to(&b, DVM_BC_DATA_ALIGN);
      }
      for (uint32_t i = 0; i < m->nkernels; i++) {
        put(&b, m->kernels[i].payload, m->kernels[i].payload_size);
        pad_to(&b, DVM_BC_DATA_ALIGN);
      }
      break;
    case DVM_SEC_EXTERNAL:
      put_u32(&b, next);
      for (uint32_t i = 0; i < m->nconsts; i++) {
        const dvm_const *c = &m->consts[i];
        if (!c->ext_path) continue;
        put_u32(&b, i);
        put_u32(&b, intern(&in, c->ext_path));
        put_u64(&b, c->ext_offset);
        put_u64(&b, c->ext_hash);
      }
      break;
    case DVM_SEC_INFO:
      put_u32(&b, ninfo);
      for (uint32_t i = 0; i < m->nfuncs; i++)
        for (uint32_t k = 0; k < m->funcs[i].ninfo; k++) {
          put_u32(&b, i);
          put_u32(&b, intern(&in, m->funcs[i].info[k].key));
          put_u32(&b, intern(&in, m->funcs[i].info[k].value));
        }
      break;
    }
    sec_size[id] = b.len - sec_off[id];
  }
  if (b.oom || in.oom) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "");
    goto done;
  }

  /* Header and section table, then the checksum over everything after. */
  buf h = {b.p + 8, 0, DVM_BC_HEADER_SIZE - 8 + (size_t)nsec * 24, 0};
  put_u16(&h, DVM_BC_MAJOR);
  put_u16(&h, (uint16_t)(next ? 3 : least_minor(m, ninfo)));
  put_u32(&h, (uint32_t)nsec);
  put_u64(&h, b.len);
  put_u32(&h, 0); /* checksum, below */
  put_u32(&h, 0); /* flags */
  for (int j = 0; j < nsec; j++) {
    put_u32(&h, (uint32_t)ids[j]);
    put_u32(&h, 0);
    put_u64(&h, sec_off[ids[j]]);
    put_u64(&h, sec_size[ids[j]]);
  }
  uint32_t crc = (uint32_t)crc32_z(0, b.p + DVM_BC_HEADER_SIZE, b.len - DVM_BC_HEADER_SIZE);
  for (int i = 0; i < 4; i++) b.p[24 + i] = (uint8_t)(crc >> (8 * i));
  *out = b.p;
  *size = b.len;
  b.p = NULL;

done:
  free(const_off);
  free(b.p);
  free(in.list);
  free(in.slots);
  return st;
}
