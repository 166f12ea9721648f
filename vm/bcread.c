/* Parsing .dvmb bytes into a module (docs/bytecode.md has the layout).
 * Every field is read through the bounds-checked reader; indices into other
 * tables are checked here when the table is already known (names) and in the
 * verifier otherwise (code operands). */
#include <stdlib.h>
#include <zlib.h>

#include "bytecode.h"
#include "reader.h"

#define CORRUPT(...) dvm_status_new(DVM_CORRUPT, __VA_ARGS__)

static const char *const section_names[DVM_SEC_COUNT + 1] = {
    [DVM_SEC_STRINGS] = "strings", [DVM_SEC_CONSTS] = "constants",
    [DVM_SEC_KERNELS] = "kernels", [DVM_SEC_SHAPEFNS] = "shape functions",
    [DVM_SEC_HOSTFNS] = "host functions", [DVM_SEC_FUNCS] = "functions",
    [DVM_SEC_DATA] = "data", [DVM_SEC_INFO] = "info", [DVM_SEC_EXTERNAL] = "external",
};

typedef struct {
  dvm_module *m;
  const uint8_t *bytes;
  size_t size;
  dvm_reader sec[DVM_SEC_COUNT + 1];
  size_t data_off, data_size; /* DATA section, absolute */
  uint64_t *const_off;        /* per constant, until the external section is read */
} parser;

static dvm_status *truncated(const char *what, size_t i) {
  return CORRUPT("%s: entry %zu is truncated", what, i);
}

static dvm_status *name_at(parser *ps, uint32_t idx, const char *what, size_t i, const char **out) {
  if (idx >= ps->m->nstrings)
    return CORRUPT("%s: entry %zu names string %u, but there are %u", what, i, idx,
                   ps->m->nstrings);
  /* the text form cannot write an empty name */
  if (!ps->m->strings[idx][0]) return CORRUPT("%s: entry %zu names the empty string", what, i);
  *out = ps->m->strings[idx];
  return NULL;
}

/* A byte range in the DATA section. */
static dvm_status *data_range(parser *ps, uint64_t off, uint64_t n, const char *what, size_t i,
                              const void **out) {
  if (off > ps->data_size || n > ps->data_size - off)
    return CORRUPT("%s: entry %zu: bytes %llu..%llu are outside the data section (%zu bytes)",
                   what, i, (unsigned long long)off, (unsigned long long)(off + n), ps->data_size);
  *out = ps->bytes + ps->data_off + off;
  return NULL;
}

/* The CRC-32 of everything after the header. */
static uint32_t checksum(const parser *ps) {
  return (uint32_t)crc32_z(0, ps->bytes + DVM_BC_HEADER_SIZE, ps->size - DVM_BC_HEADER_SIZE);
}

static dvm_status *read_header(parser *ps) {
  const uint8_t *b = ps->bytes;
  if (ps->size < DVM_BC_HEADER_SIZE)
    return CORRUPT("file is %zu bytes, shorter than the %d-byte header", ps->size,
                   DVM_BC_HEADER_SIZE);
  if (memcmp(b, DVM_BC_MAGIC, 8) != 0) return CORRUPT("bad magic: not a .dvmb file");
  dvm_reader r = dvm_reader_make(b, ps->size);
  dvm_reader_take(&r, 8);
  unsigned major = dvm_reader_u16(&r), minor = dvm_reader_u16(&r);
  uint32_t nsec = dvm_reader_u32(&r);
  uint64_t fsize = dvm_reader_u64(&r);
  uint32_t crc = dvm_reader_u32(&r);
  uint32_t flags = dvm_reader_u32(&r);
  if (major != DVM_BC_MAJOR || minor > DVM_BC_MINOR)
    return CORRUPT("unsupported version %u.%u (this dvm reads %d.0 to %d.%d)", major, minor,
                   DVM_BC_MAJOR, DVM_BC_MAJOR, DVM_BC_MINOR);
  if (fsize != ps->size)
    return CORRUPT("header says the file is %llu bytes, it is %zu (truncated or padded)",
                   (unsigned long long)fsize, ps->size);
  if (flags != 0) return CORRUPT("header flags 0x%x are not defined", flags);
  uint32_t got = checksum(ps);
  if (got != crc) return CORRUPT("checksum mismatch: header 0x%08x, contents 0x%08x", crc, got);
  if (nsec > DVM_SEC_COUNT) return CORRUPT("section count %u exceeds %d", nsec, DVM_SEC_COUNT);
  if (!dvm_reader_can_hold(&r, nsec, 24)) return CORRUPT("section table is past the end of the file");
  size_t table_end = DVM_BC_HEADER_SIZE + (size_t)nsec * 24;
  for (uint32_t i = 0; i < nsec; i++) {
    uint32_t id = dvm_reader_u32(&r), pad = dvm_reader_u32(&r);
    uint64_t off = dvm_reader_u64(&r), size = dvm_reader_u64(&r);
    if (id < 1 || id > DVM_SEC_COUNT) return CORRUPT("section %u has unknown id %u", i, id);
    if (pad) return CORRUPT("section %u (%s): reserved field is not zero", i, section_names[id]);
    if (ps->sec[id].p) return CORRUPT("section %s appears twice", section_names[id]);
    if (off < table_end || off > ps->size || size > ps->size - off)
      return CORRUPT("section %s: bytes %llu..%llu are outside the file (%zu bytes)",
                     section_names[id], (unsigned long long)off,
                     (unsigned long long)(off + size), ps->size);
    if (id == DVM_SEC_DATA && off % DVM_BC_DATA_ALIGN)
      return CORRUPT("section data: offset %llu is not %d-byte aligned", (unsigned long long)off,
                     DVM_BC_DATA_ALIGN);
    ps->sec[id] = dvm_reader_make(b + off, (size_t)size);
    if (id == DVM_SEC_DATA) {
      ps->data_off = (size_t)off;
      ps->data_size = (size_t)size;
    }
  }
  return NULL;
}

/* Reads the u32 entry count of a section and checks it against its size. */
static dvm_status *read_count(parser *ps, int id, size_t min_entry, uint32_t *out) {
  dvm_reader *r = &ps->sec[id];
  if (!r->p) {
    *out = 0;
    return NULL;
  }
  uint32_t n = dvm_reader_u32(r);
  if (r->bad) return CORRUPT("%s: section too short for its count", section_names[id]);
  if (!dvm_reader_can_hold(r, n, min_entry))
    return CORRUPT("%s: count %u does not fit in %zu bytes", section_names[id], n, r->len);
  *out = n;
  return NULL;
}

static dvm_status *read_strings(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_STRINGS];
  dvm_status *st = read_count(ps, DVM_SEC_STRINGS, 5, &m->nstrings);
  if (st) return st;
  m->strings = dvm_arena_alloc(&m->arena, m->nstrings, sizeof(char *));
  if (!m->strings && m->nstrings) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < m->nstrings; i++) {
    uint32_t len = dvm_reader_u32(r);
    const uint8_t *s = dvm_reader_take(r, (size_t)len + 1);
    if (!s) return truncated("strings", i);
    if (s[len] != 0 || memchr(s, 0, len))
      return CORRUPT("strings: entry %u is not a NUL-terminated string of %u bytes", i, len);
    m->strings[i] = (const char *)s;
  }
  return NULL;
}

static dvm_status *read_consts(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_CONSTS];
  dvm_status *st = read_count(ps, DVM_SEC_CONSTS, 24, &m->nconsts);
  if (st) return st;
  m->consts = dvm_arena_alloc(&m->arena, m->nconsts, sizeof(dvm_const));
  ps->const_off = dvm_arena_alloc(&m->arena, m->nconsts, sizeof(uint64_t));
  if ((!m->consts || !ps->const_off) && m->nconsts) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < m->nconsts; i++) {
    dvm_const *c = &m->consts[i];
    uint32_t name = dvm_reader_u32(r);
    c->dtype = dvm_reader_u8(r);
    c->rank = dvm_reader_u8(r);
    uint16_t pad = dvm_reader_u16(r);
    uint64_t off = dvm_reader_u64(r), n = dvm_reader_u64(r);
    if (r->bad) return truncated("constants", i);
    if ((st = name_at(ps, name, "constants", i, &c->name))) return st;
    if (pad) return CORRUPT("constant \"%s\": reserved field is not zero", c->name);
    if (c->dtype >= DVM_DTYPE_COUNT)
      return CORRUPT("constant \"%s\": unknown dtype %u", c->name, c->dtype);
    if (c->rank > DVM_MAX_RANK)
      return CORRUPT("constant \"%s\": rank %u exceeds %d", c->name, c->rank, DVM_MAX_RANK);
    for (int d = 0; d < c->rank; d++) c->dims[d] = dvm_reader_i64(r);
    if (r->bad) return truncated("constants", i);
    int64_t numel;
    size_t bytes;
    if ((st = dvm_shape_numel(c->rank, c->dims, &numel)) ||
        dvm_mul_overflows((size_t)numel, dvm_dtype_size(c->dtype), &bytes)) {
      dvm_status_free(st);
      return CORRUPT("constant \"%s\": bad shape", c->name);
    }
    if (c->dtype != DVM_STRING && bytes != n) /* strings: checked where they lie (place_consts) */
      return CORRUPT("constant \"%s\": %llu data bytes, its shape needs %zu", c->name,
                     (unsigned long long)n, bytes);
    if (off % DVM_BC_DATA_ALIGN)
      return CORRUPT("constant \"%s\": data offset %llu is not %d-byte aligned", c->name,
                     (unsigned long long)off, DVM_BC_DATA_ALIGN);
    ps->const_off[i] = off;
    c->nbytes = (size_t)n;
  }
  return NULL;
}

/* A path as ONNX's external data location: relative, and never leaving the
 * folder it is relative to. */
static bool path_stays_inside(const char *p) {
  if (p[0] == '/') return false;
  for (const char *c = p; *c;) {
    size_t len = strcspn(c, "/");
    if (len == 2 && c[0] == '.' && c[1] == '.') return false;
    c += len + (c[len] == '/');
  }
  return true;
}

/* Entries name constants in strictly increasing order, so each at most once. */
static dvm_status *read_external(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_EXTERNAL];
  uint32_t n;
  int64_t prev = -1;
  dvm_status *st = read_count(ps, DVM_SEC_EXTERNAL, 24, &n);
  if (st) return st;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ci = dvm_reader_u32(r), path = dvm_reader_u32(r);
    uint64_t off = dvm_reader_u64(r), hash = dvm_reader_u64(r);
    if (r->bad) return truncated("external", i);
    if (ci >= m->nconsts || (int64_t)ci <= prev)
      return CORRUPT("external: entry %u names constant %u (of %u) out of order", i, ci, m->nconsts);
    dvm_const *c = &m->consts[ci];
    if ((st = name_at(ps, path, "external", i, &c->ext_path))) return st;
    if (!path_stays_inside(c->ext_path))
      return CORRUPT("constant \"%s\": external file \"%s\" is not a path inside the module's folder",
                     c->name, c->ext_path);
    if (ps->const_off[ci])
      return CORRUPT("constant \"%s\": external, but its data offset is %llu, not 0", c->name,
                     (unsigned long long)ps->const_off[ci]);
    if (off % DVM_BC_DATA_ALIGN)
      return CORRUPT("constant \"%s\": offset %llu in \"%s\" is not %d-byte aligned", c->name,
                     (unsigned long long)off, c->ext_path, DVM_BC_DATA_ALIGN);
    c->ext_offset = off;
    c->ext_hash = hash;
    prev = ci;
  }
  return NULL;
}

static int64_t numel_of(const dvm_const *c) {
  int64_t n = 1; /* the dims were checked (read_consts) */
  for (int d = 0; d < c->rank; d++) n *= c->dims[d];
  return n;
}

/* The bytes of the constants that are not external. */
static dvm_status *place_consts(parser *ps) {
  for (uint32_t i = 0; i < ps->m->nconsts; i++) {
    dvm_const *c = &ps->m->consts[i];
    dvm_status *st = c->ext_path ? NULL : data_range(ps, ps->const_off[i], c->nbytes, "constants", i, &c->data);
    if (!st && c->dtype == DVM_STRING)
      st = c->ext_path ? CORRUPT("constant \"%s\": strings are never external", c->name)
                       : dvm_strings_blob_check(c->data, c->nbytes, numel_of(c));
    if (st) return dvm_status_annotate(st, "constant \"%s\"", c->name);
  }
  return NULL;
}

static dvm_status *read_kernels(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_KERNELS];
  dvm_status *st = read_count(ps, DVM_SEC_KERNELS, 28, &m->nkernels);
  if (st) return st;
  m->kernels = dvm_arena_alloc(&m->arena, m->nkernels, sizeof(dvm_kernel_ref));
  if (!m->kernels && m->nkernels) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < m->nkernels; i++) {
    dvm_kernel_ref *k = &m->kernels[i];
    uint32_t name = dvm_reader_u32(r);
    k->device = dvm_reader_u8(r);
    uint32_t pad = (uint32_t)dvm_reader_le(r, 3);
    k->nvariants = dvm_reader_u32(r);
    uint64_t off = dvm_reader_u64(r), n = dvm_reader_u64(r);
    if (r->bad) return truncated("kernels", i);
    if ((st = name_at(ps, name, "kernels", i, &k->name))) return st;
    if (pad) return CORRUPT("kernel \"%s\": reserved field is not zero", k->name);
    if (k->device >= DVM_DEVICE_COUNT)
      return CORRUPT("kernel \"%s\": unknown device %u", k->name, k->device);
    if (k->nvariants == 0) return CORRUPT("kernel \"%s\": no variants", k->name);
    if ((st = data_range(ps, off, n, "kernels", i, &k->payload))) return st;
    k->payload_size = (size_t)n;
    if (n == 0) k->payload = NULL;
  }
  return NULL;
}

static dvm_status *read_shapefns(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_SHAPEFNS];
  dvm_status *st = read_count(ps, DVM_SEC_SHAPEFNS, 4, &m->nshapefns);
  if (st) return st;
  m->shapefns = dvm_arena_alloc(&m->arena, m->nshapefns, sizeof(dvm_shapefn_ref));
  if (!m->shapefns && m->nshapefns) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < m->nshapefns; i++) {
    uint32_t name = dvm_reader_u32(r);
    if (r->bad) return truncated("shape functions", i);
    if ((st = name_at(ps, name, "shape functions", i, &m->shapefns[i].name))) return st;
  }
  return NULL;
}

static dvm_status *read_hostfns(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_HOSTFNS];
  dvm_status *st = read_count(ps, DVM_SEC_HOSTFNS, 8, &m->nhostfns);
  if (st) return st;
  m->hostfns = dvm_arena_alloc(&m->arena, m->nhostfns, sizeof(dvm_hostfn_ref));
  if (!m->hostfns && m->nhostfns) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < m->nhostfns; i++) {
    uint32_t name = dvm_reader_u32(r), sig = dvm_reader_u32(r);
    if (r->bad) return truncated("host functions", i);
    if ((st = name_at(ps, name, "host functions", i, &m->hostfns[i].name)) ||
        (st = name_at(ps, sig, "host functions", i, &m->hostfns[i].sig)))
      return st;
  }
  return NULL;
}

static dvm_status *read_sigs(parser *ps, dvm_reader *r, const char *fname, const char *what,
                             uint32_t n, dvm_sig **out) {
  dvm_module *m = ps->m;
  dvm_sig *sigs = dvm_arena_alloc(&m->arena, n, sizeof(dvm_sig));
  if (!sigs && n) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < n; i++) {
    dvm_sig *s = &sigs[i];
    uint32_t name = dvm_reader_u32(r);
    s->kind = dvm_reader_u8(r);
    s->dtype = dvm_reader_u8(r);
    s->rank = (int8_t)dvm_reader_u8(r);
    uint8_t pad = dvm_reader_u8(r);
    if (r->bad) return CORRUPT("function \"%s\": %s %u is truncated", fname, what, i);
    dvm_status *st = name_at(ps, name, what, i, &s->name);
    if (st) return dvm_status_annotate(st, "function \"%s\"", fname);
    /* only a tensor has a dtype (a tuple that of its tensors), only a
     * tensor or shape a rank: the text form has no place for them on other kinds */
    bool dims_ok = s->kind == DVM_VAL_TENSOR || s->kind == DVM_VAL_SHAPE || s->rank == -1;
    bool dtype_ok = s->kind == DVM_VAL_TENSOR ? s->dtype < DVM_DTYPE_COUNT
                    : s->kind == DVM_VAL_TUPLE  ? s->dtype <= DVM_DTYPE_COUNT /* dvm_sig_item_dtype */
                                                : s->dtype == 0;
    if (pad || s->kind >= DVM_KIND_COUNT || !dtype_ok || s->rank < -1 || s->rank > DVM_MAX_RANK || !dims_ok)
      return CORRUPT("function \"%s\": %s \"%s\": bad kind, dtype or rank", fname, what, s->name);
    for (int d = 0; d < s->rank; d++) s->dims[d] = dvm_reader_i64(r);
    if (r->bad) return CORRUPT("function \"%s\": %s %u is truncated", fname, what, i);
  }
  *out = sigs;
  return NULL;
}

static dvm_status *read_func(parser *ps, dvm_reader *r, uint32_t i, dvm_func *f) {
  dvm_module *m = ps->m;
  uint32_t name = dvm_reader_u32(r);
  f->nregs = dvm_reader_u32(r);
  f->nparams = dvm_reader_u32(r);
  f->nresults = dvm_reader_u32(r);
  f->nsyms = dvm_reader_u32(r);
  f->ncode = dvm_reader_u32(r);
  f->ndebug = dvm_reader_u32(r);
  if (r->bad) return truncated("functions", i);
  dvm_status *st = name_at(ps, name, "functions", i, &f->name);
  if (st) return st;
  if (!dvm_reader_can_hold(r, (uint64_t)f->nsyms, 24) ||
      !dvm_reader_can_hold(r, (uint64_t)f->nparams + f->nresults, 8) ||
      !dvm_reader_can_hold(r, (uint64_t)f->ncode, 8) ||
      !dvm_reader_can_hold(r, (uint64_t)f->ndebug, 8))
    return CORRUPT("function \"%s\": counts (%u symbols, %u params, %u results, %u code words, "
                   "%u debug entries) do not fit in the section",
                   f->name, f->nsyms, f->nparams, f->nresults, f->ncode, f->ndebug);
  f->syms = dvm_arena_alloc(&m->arena, f->nsyms, sizeof(dvm_sym));
  if (!f->syms && f->nsyms) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t s = 0; s < f->nsyms; s++) {
    uint32_t sname = dvm_reader_u32(r);
    f->syms[s].reg = dvm_reader_u32(r);
    f->syms[s].lo = dvm_reader_i64(r);
    f->syms[s].hi = dvm_reader_i64(r);
    if (r->bad) return CORRUPT("function \"%s\": symbol %u is truncated", f->name, s);
    if ((st = name_at(ps, sname, "symbols", s, &f->syms[s].name)))
      return dvm_status_annotate(st, "function \"%s\"", f->name);
  }
  if ((st = read_sigs(ps, r, f->name, "parameter", f->nparams, &f->params)) ||
      (st = read_sigs(ps, r, f->name, "result", f->nresults, &f->results)))
    return st;
  f->code = dvm_arena_alloc(&m->arena, f->ncode, sizeof(int64_t));
  if (!f->code && f->ncode) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t w = 0; w < f->ncode; w++) f->code[w] = dvm_reader_i64(r);
  f->debug = dvm_arena_alloc(&m->arena, f->ndebug, 2 * sizeof(uint32_t));
  if (!f->debug && f->ndebug) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t d = 0; d < 2 * f->ndebug; d++) f->debug[d] = dvm_reader_u32(r);
  if (r->bad) return CORRUPT("function \"%s\": code or debug info is truncated", f->name);
  return NULL;
}

static dvm_status *read_funcs(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_FUNCS];
  dvm_status *st = read_count(ps, DVM_SEC_FUNCS, 28, &m->nfuncs);
  if (st) return st;
  m->funcs = dvm_arena_alloc(&m->arena, m->nfuncs, sizeof(dvm_func));
  if (!m->funcs && m->nfuncs) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < m->nfuncs; i++)
    if ((st = read_func(ps, r, i, &m->funcs[i]))) return st;
  return NULL;
}

/* Info records come grouped by function, in function order. */
static dvm_status *read_info(parser *ps) {
  dvm_module *m = ps->m;
  dvm_reader *r = &ps->sec[DVM_SEC_INFO];
  uint32_t n, prev = 0;
  dvm_status *st = read_count(ps, DVM_SEC_INFO, 12, &n);
  if (st) return st;
  dvm_info *info = dvm_arena_alloc(&m->arena, n, sizeof(dvm_info));
  if (!info && n) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  for (uint32_t i = 0; i < n; i++) {
    uint32_t fn = dvm_reader_u32(r), key = dvm_reader_u32(r), value = dvm_reader_u32(r);
    if (r->bad) return truncated("info", i);
    if (fn >= m->nfuncs || fn < prev)
      return CORRUPT("info: entry %u names function %u (of %u) out of order", i, fn, m->nfuncs);
    if ((st = name_at(ps, key, "info", i, &info[i].key)) || (st = name_at(ps, value, "info", i, &info[i].value)))
      return st;
    dvm_func *f = &m->funcs[fn];
    if (!f->ninfo) f->info = &info[i];
    f->ninfo++;
    prev = fn;
  }
  return NULL;
}

dvm_status *dvm_bc_read(dvm_module *m, const uint8_t *bytes, size_t size) {
  parser ps = {.m = m, .bytes = bytes, .size = size};
  dvm_status *st;
  if ((st = read_header(&ps)) || (st = read_strings(&ps)) || (st = read_consts(&ps)) ||
      (st = read_kernels(&ps)) || (st = read_shapefns(&ps)) || (st = read_hostfns(&ps)) ||
      (st = read_funcs(&ps)) || (st = read_info(&ps)) || (st = read_external(&ps)) ||
      (st = place_consts(&ps)))
    return st;
  for (int id = 1; id <= DVM_SEC_COUNT; id++)
    if (id != DVM_SEC_DATA && ps.sec[id].p && dvm_reader_left(&ps.sec[id]))
      return CORRUPT("%s: %zu bytes after the last entry", section_names[id],
                     dvm_reader_left(&ps.sec[id]));
  return NULL;
}
