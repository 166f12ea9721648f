/* Malformed .dvmb files: every one must be refused with the rule that it
 * breaks, never crash, never load.
 *
 * The starting point is base.dvms, assembled and written in canonical form.
 * Its layout is found by walking the bytes the way a second reader would
 * (docs/bytecode.md), so each variant changes one named field. Variants
 * aimed past the header checks recompute the checksum, so that the rule
 * under test is the one that fires, and those that change a length move
 * everything after it (splice) so the rest of the file stays well formed.
 *
 *   test_corrupt BASE.dvms
 *   test_corrupt BASE.dvms --write-seeds DIR [VALID.dvms...]
 *
 * The second form also writes the first variant of each category (the part
 * of a case's name before ':'), the base module and each VALID program as
 * files in DIR: the seeds of tests/fuzz/fuzz_load.c. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <zlib.h>

#include "asm.h"
#include "dvm/vm.h"
#include "harness.h"
#include "opcode.h"

#define MAX_ENTRIES 64

typedef struct {
  uint8_t *p;
  size_t n;
} bytes;

typedef struct {
  size_t at; /* the record's header */
  uint32_t nregs, nparams, nresults, nsyms, ncode, ndebug;
  size_t syms, params[MAX_ENTRIES], results[MAX_ENTRIES], code, debug;
} func_layout;

/* Byte offsets of everything in the base file. */
typedef struct {
  size_t entry[DVM_SEC_COUNT + 1]; /* section table entry per id */
  size_t off[DVM_SEC_COUNT + 1], size[DVM_SEC_COUNT + 1];
  uint32_t nstrings, nconsts, nkernels, nshapefns, nhostfns, nfuncs;
  size_t strings[MAX_ENTRIES], consts[MAX_ENTRIES], kernels[MAX_ENTRIES], shapefns[MAX_ENTRIES],
      hostfns[MAX_ENTRIES];
  func_layout funcs[MAX_ENTRIES];
} layout;

static bytes base;
static layout L;
static dvm_hostfn_registry *registry;
static const char *seed_dir;
static char seeded[128][32]; /* categories written as seeds */
static int nseeded;
static int ncases;

/* ---- little-endian fields ---- */

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(size_t off) { return (uint32_t)get_le(base.p + off, 4); }
static uint64_t get64(size_t off) { return get_le(base.p + off, 8); }

/* ---- the layout, walked as docs/bytecode.md describes it ---- */

static void need_room(uint32_t n) {
  if (n > MAX_ENTRIES) {
    fprintf(stderr, "base.dvms has more than %d entries in a table\n", MAX_ENTRIES);
    exit(1);
  }
}

static size_t walk_sigs(size_t p, uint32_t n, size_t *at) {
  need_room(n);
  for (uint32_t i = 0; i < n; i++) {
    at[i] = p;
    int8_t rank = (int8_t)base.p[p + 6];
    p += 8 + 8 * (size_t)(rank > 0 ? rank : 0);
  }
  return p;
}

static void walk_layout(void) {
  uint32_t nsec = get32(12);
  for (uint32_t i = 0; i < nsec; i++) {
    size_t e = DVM_BC_HEADER_SIZE + 24 * (size_t)i;
    uint32_t id = get32(e);
    L.entry[id] = e;
    L.off[id] = get64(e + 8);
    L.size[id] = get64(e + 16);
  }
  size_t p = L.off[DVM_SEC_STRINGS];
  need_room(L.nstrings = get32(p));
  p += 4;
  for (uint32_t i = 0; i < L.nstrings; i++) {
    L.strings[i] = p;
    p += 4 + get32(p) + 1;
  }
  p = L.off[DVM_SEC_CONSTS];
  need_room(L.nconsts = get32(p));
  p += 4;
  for (uint32_t i = 0; i < L.nconsts; i++) {
    L.consts[i] = p;
    p += 24 + 8 * (size_t)base.p[p + 5];
  }
  p = L.off[DVM_SEC_KERNELS];
  need_room(L.nkernels = get32(p));
  for (uint32_t i = 0; i < L.nkernels; i++) L.kernels[i] = p + 4 + 28 * (size_t)i;
  p = L.off[DVM_SEC_SHAPEFNS];
  need_room(L.nshapefns = get32(p));
  for (uint32_t i = 0; i < L.nshapefns; i++) L.shapefns[i] = p + 4 + 4 * (size_t)i;
  p = L.off[DVM_SEC_HOSTFNS];
  need_room(L.nhostfns = get32(p));
  for (uint32_t i = 0; i < L.nhostfns; i++) L.hostfns[i] = p + 4 + 8 * (size_t)i;
  p = L.off[DVM_SEC_FUNCS];
  need_room(L.nfuncs = get32(p));
  p += 4;
  for (uint32_t i = 0; i < L.nfuncs; i++) {
    func_layout *f = &L.funcs[i];
    f->at = p;
    f->nregs = get32(p + 4);
    f->nparams = get32(p + 8);
    f->nresults = get32(p + 12);
    f->nsyms = get32(p + 16);
    f->ncode = get32(p + 20);
    f->ndebug = get32(p + 24);
    f->syms = p + 28;
    p = walk_sigs(f->syms + 24 * (size_t)f->nsyms, f->nparams, f->params);
    p = walk_sigs(p, f->nresults, f->results);
    f->code = p;
    f->debug = p + 8 * (size_t)f->ncode;
    p = f->debug + 8 * (size_t)f->ndebug;
  }
}

/* Function record header fields. */
enum { F_NAME = 0, F_NREGS = 4, F_NPARAMS = 8, F_NRESULTS = 12, F_NSYMS = 16, F_NCODE = 20, F_NDEBUG = 24 };

static int64_t code_word(const func_layout *f, uint32_t w) { return (int64_t)get64(f->code + 8 * (size_t)w); }
static size_t word_off(const func_layout *f, uint32_t w) { return f->code + 8 * (size_t)w; }

/* Word offset of the nth (0-based) instruction with opcode `op` in f. */
static uint32_t find_instr(const func_layout *f, int op, int nth) {
  for (uint32_t pc = 0; pc < f->ncode;) {
    int64_t o = code_word(f, pc);
    if (o == op && nth-- == 0) return pc;
    uint32_t w = pc + 1;
    for (const char *fmt = dvm_opinfo_table[o].format; *fmt; fmt++)
      w += dvm_operand_is_list(*fmt) ? 1 + (uint32_t)code_word(f, w) : 1;
    pc = w;
  }
  fprintf(stderr, "base.dvms has no %s number %d\n", dvm_opinfo_table[op].name, nth);
  exit(1);
}

/* Word offset of operand j of the instruction at pc (a list's count word). */
static uint32_t operand(const func_layout *f, uint32_t pc, int j) {
  const char *fmt = dvm_opinfo_table[code_word(f, pc)].format;
  uint32_t w = pc + 1;
  for (int k = 0; k < j; k++) w += dvm_operand_is_list(fmt[k]) ? 1 + (uint32_t)code_word(f, w) : 1;
  return w;
}

/* Index of the instruction at word pc. */
static uint32_t instr_index(const func_layout *f, uint32_t pc) {
  uint32_t n = 0;
  for (uint32_t w = 0; w < pc; n++) {
    const char *fmt = dvm_opinfo_table[code_word(f, w)].format;
    w++;
    for (; *fmt; fmt++) w += dvm_operand_is_list(*fmt) ? 1 + (uint32_t)code_word(f, w) : 1;
  }
  return n;
}

static uint32_t string_index(const char *s) {
  for (uint32_t i = 0; i < L.nstrings; i++)
    if (strcmp((const char *)base.p + L.strings[i] + 4, s) == 0) return i;
  fprintf(stderr, "base.dvms has no string \"%s\"\n", s);
  exit(1);
}

/* ---- variants ---- */

static bytes copy_of(const uint8_t *p, size_t n) {
  bytes v = {malloc(n ? n : 1), n};
  if (!v.p) abort();
  memcpy(v.p, p, n);
  return v;
}

static bytes dup_base(void) { return copy_of(base.p, base.n); }

/* The header's size and checksum made true again. */
static void fix_header(bytes *v) {
  put_le(v->p + 16, v->n, 8);
  put_le(v->p + 24, (uint32_t)crc32_z(0, v->p + DVM_BC_HEADER_SIZE, v->n - DVM_BC_HEADER_SIZE), 4);
}

/* Replaces `del` bytes at `at` with `nins` bytes of `ins` (zeros if NULL):
 * later sections move, the one holding `at` grows or shrinks, and zeros are
 * added before the data section to keep it 64-byte aligned. */
static bytes splice(const bytes *v, size_t at, size_t del, const void *ins, size_t nins) {
  bytes out = {calloc(v->n - del + nins + DVM_BC_DATA_ALIGN, 1), 0};
  if (!out.p) abort();
  memcpy(out.p, v->p, at);
  if (ins) memcpy(out.p + at, ins, nins);
  memcpy(out.p + at + nins, v->p + at + del, v->n - at - del);
  out.n = v->n - del + nins;
  int64_t delta = (int64_t)nins - (int64_t)del;
  for (int id = 1; id <= DVM_SEC_COUNT; id++) {
    if (!L.entry[id]) continue; /* absent */
    uint8_t *e = out.p + L.entry[id];
    uint64_t off = get_le(e + 8, 8), size = get_le(e + 16, 8);
    if (off > at) put_le(e + 8, off + (uint64_t)delta, 8);
    else if (at < off + size) put_le(e + 16, size + (uint64_t)delta, 8);
  }
  uint8_t *e = out.p + L.entry[DVM_SEC_DATA];
  size_t off = (size_t)get_le(e + 8, 8);
  size_t pad = (DVM_BC_DATA_ALIGN - off % DVM_BC_DATA_ALIGN) % DVM_BC_DATA_ALIGN;
  memmove(out.p + off + pad, out.p + off, out.n - off);
  memset(out.p + off, 0, pad);
  for (int id = 1; id <= DVM_SEC_COUNT; id++) { /* data and what follows it move */
    if (!L.entry[id]) continue;
    uint8_t *f = out.p + L.entry[id];
    if (get_le(f + 8, 8) >= off) put_le(f + 8, get_le(f + 8, 8) + pad, 8);
  }
  out.n += pad;
  fix_header(&out);
  return out;
}

/* Inserts words into f's code at word w and counts them in its ncode. */
static bytes insert_words(const func_layout *f, uint32_t w, const int64_t *words, uint32_t n) {
  bytes v = dup_base();
  put_le(v.p + f->at + F_NCODE, f->ncode + n, 4);
  uint8_t raw[8 * 16];
  for (uint32_t i = 0; i < n; i++) put_le(raw + 8 * i, (uint64_t)words[i], 8);
  bytes out = splice(&v, word_off(f, w), 0, raw, 8 * (size_t)n);
  free(v.p);
  return out;
}

static dvm_status *load(const bytes *v) {
  dvm_load_options opts = {registry};
  dvm_module *m = NULL;
  dvm_status *st = dvm_module_load_memory(v->p, v->n, &opts, &m);
  dvm_module_release(m);
  return st;
}

static void write_file(const char *path, const bytes *v) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(v->p, 1, v->n, f) != v->n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

/* Writes the first case of each category ("category: detail") as a seed. */
static void maybe_seed(const char *name, const bytes *v) {
  size_t clen = strcspn(name, ":");
  /* small seeds only: the largest sets libFuzzer's default input length */
  if (!seed_dir || clen >= sizeof seeded[0] || nseeded == 128 || v->n > 16384) return;
  for (int i = 0; i < nseeded; i++)
    if (strlen(seeded[i]) == clen && strncmp(seeded[i], name, clen) == 0) return;
  memcpy(seeded[nseeded], name, clen);
  seeded[nseeded++][clen] = 0;
  char path[512];
  int n = snprintf(path, sizeof path, "%s/", seed_dir);
  for (size_t i = 0; i < clen && n < (int)sizeof path - 6; i++)
    path[n++] = isalnum((unsigned char)name[i]) ? name[i] : '_';
  snprintf(path + n, sizeof path - (size_t)n, ".dvmb");
  write_file(path, v);
}

/* Loads v, expects `code` with `msg` in the message, and frees v. */
static void expect(const char *name, bytes v, dvm_code code, const char *msg) {
  int before = harness_failures;
  ncases++;
  CHECK_ERR(load(&v), code, msg);
  if (harness_failures != before) fprintf(stderr, "  in case \"%s\"\n", name);
  maybe_seed(name, &v);
  free(v.p);
}

/* One field of the base set to `val` (n bytes at off); the header is fixed
 * unless the field is in it. */
static bytes with_field(size_t off, uint64_t val, int n) {
  bytes v = dup_base();
  put_le(v.p + off, val, n);
  if (off >= DVM_BC_HEADER_SIZE) fix_header(&v);
  return v;
}

/* The case of one field set to `val`, refused as corrupt with `msg`. */
static void corrupt(const char *name, size_t off, int n, uint64_t val, const char *msg) {
  expect(name, with_field(off, val, n), DVM_CORRUPT, msg);
}

/* Code words replaced in place (with the checksum fixed). */
static void code_words(const char *name, const func_layout *f, uint32_t w, const int64_t *words,
                       uint32_t n, const char *msg) {
  bytes v = dup_base();
  for (uint32_t i = 0; i < n; i++) put_le(v.p + word_off(f, w + i), (uint64_t)words[i], 8);
  fix_header(&v);
  expect(name, v, DVM_CORRUPT, msg);
}

static void code_word_set(const char *name, const func_layout *f, uint32_t w, int64_t word,
                          const char *msg) {
  code_words(name, f, w, &word, 1, msg);
}

/* ---- the cases ---- */

static void check_base_runs(void) {
  dvm_load_options opts = {registry};
  dvm_module *m = NULL;
  CHECK_OK(dvm_module_load_memory(base.p, base.n, &opts, &m));
  if (!m) exit(1);
  dvm_vm_options vo;
  dvm_vm_options_init(&vo);
  vo.threads = 1;
  dvm_vm *vm = NULL;
  CHECK_OK(dvm_vm_create(m, &vo, &vm));
  dvm_value res[2] = {{0}};
  CHECK_OK(dvm_vm_invoke(vm, dvm_module_find_function(m, "main"), NULL, 0, res, 2));
  CHECK(res[0].kind == DVM_VAL_TENSOR && res[1].kind == DVM_VAL_INT && res[1].u.i == 6);
  if (res[0].kind == DVM_VAL_TENSOR) {
    const float *y = dvm_tensor_data(res[0].u.tensor);
    CHECK(y[0] == 2 && y[1] == 4 && y[2] == 6 && y[3] == 8);
  }
  dvm_value_clear(&res[0]);
  dvm_value_clear(&res[1]);
  dvm_vm_destroy(vm);
  dvm_module_release(m);
  /* the mutation helpers leave a file alone when they change nothing */
  bytes same = with_field(L.off[DVM_SEC_STRINGS], L.nstrings, 4);
  CHECK(same.n == base.n && memcmp(same.p, base.p, base.n) == 0);
  free(same.p);
  same = splice(&base, L.funcs[0].code, 0, NULL, 0);
  CHECK(same.n == base.n && memcmp(same.p, base.p, base.n) == 0);
  free(same.p);
}

/* A file cut at n bytes: refused by the size field, and, with the size and
 * checksum made to match, by the section table. */
static void truncated_at(size_t n) {
  char name[64];
  snprintf(name, sizeof name, "truncated: at %zu", n);
  expect(name, copy_of(base.p, n), DVM_CORRUPT,
         n < DVM_BC_HEADER_SIZE ? "shorter than the 32-byte header" : "(truncated or padded)");
  if (n < DVM_BC_HEADER_SIZE) return;
  bytes v = copy_of(base.p, n);
  fix_header(&v);
  snprintf(name, sizeof name, "truncated-fixed: at %zu", n);
  expect(name, v, DVM_CORRUPT,
         n < DVM_BC_HEADER_SIZE + 24 * (size_t)get32(12) ? "section table is past the end"
                                                      : "are outside the file");
}

static void truncations(void) {
  /* section boundaries first: the seed of the category is one of them */
  for (int id = 1; id <= DVM_SEC_COUNT; id++) {
    truncated_at(L.off[id]);
    if (L.off[id] + L.size[id] < base.n) truncated_at(L.off[id] + L.size[id]);
  }
  for (uint32_t i = 0; i < L.nfuncs; i++) {
    truncated_at(L.funcs[i].code);
    truncated_at(L.funcs[i].debug);
  }
  for (size_t n = 0; n < 300 && n < base.n; n++) truncated_at(n);
  for (size_t n = 300; n < base.n; n += 37) truncated_at(n);
  truncated_at(base.n - 1);
  bytes v = copy_of(base.p, base.n + 1);
  v.p[base.n] = 0;
  v.n = base.n + 1;
  expect("truncated: padded by one byte", v, DVM_CORRUPT, "(truncated or padded)");
}

static void header(void) {
  for (int i = 0; i < 8; i++) {
    char name[64];
    snprintf(name, sizeof name, "magic: byte %d", i);
    corrupt(name, (size_t)i, 1, base.p[i] ^ 0x20, "bad magic");
  }
  corrupt("version: major 2", 8, 2, 2, "unsupported version 2.1");
  corrupt("version: major 0", 8, 2, 0, "unsupported version 0.1");
  corrupt("version: minor 4", 10, 2, 4, "unsupported version 1.4");
  corrupt("size: one more", 16, 8, base.n + 1, "header says the file is");
  corrupt("size: one less", 16, 8, base.n - 1, "header says the file is");
  corrupt("size: 2^64-1", 16, 8, UINT64_MAX, "header says the file is");
  corrupt("checksum: field", 24, 4, get32(24) ^ 1, "checksum mismatch");
  {
    bytes v = dup_base();
    v.p[L.strings[0] + 4] ^= 1;
    expect("checksum: contents", v, DVM_CORRUPT, "checksum mismatch");
  }
  {
    bytes v = dup_base();
    v.p[base.n - 1] ^= 0x80;
    expect("checksum: last byte", v, DVM_CORRUPT, "checksum mismatch");
  }
  corrupt("flags: bit 0", 28, 4, 1, "header flags 0x1 are not defined");
  corrupt("flags: bit 31", 28, 4, 0x80000000u, "header flags 0x80000000 are not defined");
}

static void section_table(void) {
  size_t e = L.entry[DVM_SEC_STRINGS];
  corrupt("section-count: 10", 12, 4, DVM_SEC_COUNT + 1, "section count 10 exceeds 9");
  corrupt("section-count: 2^32-1", 12, 4, UINT32_MAX, "section count 4294967295 exceeds");
  /* with the data section left out, the constants point nowhere */
  corrupt("section-missing: data", 12, 4, DVM_SEC_DATA - 1, "outside the data section (0 bytes)");
  corrupt("section-id: unknown 99", e, 4, 99, "has unknown id 99");
  corrupt("section-id: 0", e, 4, 0, "has unknown id 0");
  corrupt("section-duplicate: strings twice", L.entry[DVM_SEC_CONSTS], 4, DVM_SEC_STRINGS,
          "section strings appears twice");
  corrupt("section-reserved: not zero", e + 4, 4, 1, "reserved field is not zero");
  corrupt("section-past-end: size", e + 16, 8, base.n, "are outside the file");
  corrupt("section-past-end: offset", e + 8, 8, base.n + 8, "are outside the file");
  corrupt("section-past-end: offset 2^63", e + 8, 8, 1ull << 63, "are outside the file");
  corrupt("section-past-end: size 2^64-1", e + 16, 8, UINT64_MAX, "are outside the file");
  corrupt("section-overlaps-header: in the header", e + 8, 8, 16, "are outside the file");
  corrupt("section-overlaps-header: in the table", e + 8, 8, DVM_BC_HEADER_SIZE + 24,
          "are outside the file");
  corrupt("section-misaligned: data", L.entry[DVM_SEC_DATA] + 8, 8, L.off[DVM_SEC_DATA] - 8,
          "section data: offset");
  corrupt("section-short: strings count", e + 16, 8, 2, "strings: section too short for its count");
  corrupt("section-trailing: shape functions", L.off[DVM_SEC_SHAPEFNS], 4, L.nshapefns - 1,
          "shape functions: 4 bytes after the last entry");
}

/* The base with string `s` made empty (its bytes cut out). */
static bytes emptied(const char *s) {
  size_t at = L.strings[string_index(s)];
  bytes v = dup_base();
  put_le(v.p + at, 0, 4);
  bytes out = splice(&v, at + 4, strlen(s), NULL, 0);
  free(v.p);
  return out;
}

static void strings(void) {
  size_t s = L.strings[0];
  uint32_t len = get32(s);
  corrupt("string-no-nul: first", s + 4 + len, 1, 'x', "strings: entry 0 is not a NUL-terminated");
  corrupt("string-no-nul: inner NUL", s + 4, 1, 0, "strings: entry 0 is not a NUL-terminated");
  corrupt("string-length: past the section", s, 4, 100000, "strings: entry 0 is truncated");
  corrupt("string-length: 2^32-1", s, 4, UINT32_MAX, "strings: entry 0 is truncated");
  corrupt("absurd-count: strings", L.off[DVM_SEC_STRINGS], 4, UINT32_MAX,
          "strings: count 4294967295 does not fit");
  /* names must be non-empty: the text form has no way to write "" as one */
  expect("name-empty: constant", emptied("one"), DVM_CORRUPT,
         "constants: entry 1 names the empty string");
  expect("name-empty: function", emptied("add_bias"), DVM_CORRUPT,
         "functions: entry 1 names the empty string");
  expect("name-empty: debug location", emptied("Setup"), DVM_CORRUPT,
         "function \"main\": debug entry 0 names the empty string");
}

static void tables(void) {
  uint32_t ns = L.nstrings;
  char msg[128];
  size_t c0 = L.consts[0], k0 = L.kernels[0];
  /* constants: name u32, dtype u8, rank u8, pad u16, offset u64, nbytes u64, dims */
  snprintf(msg, sizeof msg, "constants: entry 0 names string %u, but there are %u", ns, ns);
  corrupt("name-index: constant", c0, 4, ns, msg);
  corrupt("const-dtype: 14", c0 + 4, 1, DVM_DTYPE_COUNT, "constant \"bias\": unknown dtype 14");
  corrupt("const-rank: 9", c0 + 5, 1, DVM_MAX_RANK + 1, "constant \"bias\": rank 9 exceeds 8");
  corrupt("const-reserved: not zero", c0 + 6, 2, 1, "constant \"bias\": reserved field");
  corrupt("const-bytes: shape needs more", c0 + 24, 8, 5, "16 data bytes, its shape needs 20");
  corrupt("const-bytes: count field", c0 + 16, 8, 12, "12 data bytes, its shape needs 16");
  corrupt("const-bytes: negative dim", c0 + 24, 8, (uint64_t)-1, "constant \"bias\": bad shape");
  corrupt("const-bytes: overflowing shape", c0 + 24, 8, INT64_MAX, "constant \"bias\": bad shape");
  corrupt("misaligned-data: constant", c0 + 8, 8, 8, "data offset 8 is not 64-byte aligned");
  corrupt("const-range: past the data", c0 + 8, 8, L.size[DVM_SEC_DATA],
          "outside the data section");
  corrupt("const-range: offset 2^63", c0 + 8, 8, 1ull << 63, "outside the data section");
  corrupt("absurd-count: constants", L.off[DVM_SEC_CONSTS], 4, UINT32_MAX,
          "constants: count 4294967295 does not fit");
  /* kernels: name u32, device u8, pad u24, variants u32, offset u64, size u64 */
  snprintf(msg, sizeof msg, "kernels: entry 0 names string %u", ns);
  corrupt("name-index: kernel", k0, 4, ns, msg);
  corrupt("kernel-device: 2", k0 + 4, 1, DVM_DEVICE_COUNT, "kernel \"add\": unknown device 2");
  corrupt("kernel-reserved: not zero", k0 + 5, 3, 0x10000, "kernel \"add\": reserved field");
  corrupt("kernel-variants: 0", k0 + 8, 4, 0, "kernel \"add\": no variants");
  {
    bytes v = with_field(k0 + 12, L.size[DVM_SEC_DATA], 8);
    put_le(v.p + k0 + 20, 1, 8);
    fix_header(&v);
    expect("kernel-payload: past the data", v, DVM_CORRUPT, "kernels: entry 0: bytes");
  }
  corrupt("absurd-count: kernels", L.off[DVM_SEC_KERNELS], 4, UINT32_MAX,
          "kernels: count 4294967295 does not fit");
  snprintf(msg, sizeof msg, "shape functions: entry 1 names string %u", ns);
  corrupt("name-index: shape function", L.shapefns[1], 4, ns, msg);
  corrupt("absurd-count: shape functions", L.off[DVM_SEC_SHAPEFNS], 4, UINT32_MAX,
          "shape functions: count 4294967295 does not fit");
  snprintf(msg, sizeof msg, "host functions: entry 0 names string %u", ns);
  corrupt("name-index: host function", L.hostfns[0], 4, ns, msg);
  corrupt("name-index: host function signature", L.hostfns[0] + 4, 4, ns + 7,
          "host functions: entry 0 names string");
  corrupt("absurd-count: host functions", L.off[DVM_SEC_HOSTFNS], 4, UINT32_MAX,
          "host functions: count 4294967295 does not fit");
  {
    /* the signature string is rewritten in place: same length */
    size_t sig = L.strings[string_index("i->i")] + 4;
    bytes v = dup_base();
    memcpy(v.p + sig, "i->v", 4);
    fix_header(&v);
    expect("hostfn-signature: void result, one result register", v, DVM_CORRUPT,
           "host call of \"twice\" (i->v) with 1 arguments and 1 results");
    v = dup_base();
    memcpy(v.p + sig, "i->x", 4);
    fix_header(&v);
    /* the verifier passes on the signature parser's code */
    expect("hostfn-signature: bad return letter", v, DVM_CORRUPT,
           "the return must be one of i f t v");
    v = dup_base();
    memcpy(v.p + sig, "ii-i", 4);
    fix_header(&v);
    expect("hostfn-signature: no arrow", v, DVM_CORRUPT, "has no \"->\"");
  }
  /* duplicate names: the second entry named like the first */
  corrupt("duplicate-name: constants", L.consts[1], 4, get32(c0),
          "two constants are named \"bias\"");
  corrupt("duplicate-name: kernels", L.kernels[1], 4, get32(k0), "two kernels are named \"add\"");
  corrupt("duplicate-name: shape functions", L.shapefns[1], 4, get32(L.shapefns[0]),
          "two shape functions are named \"broadcast\"");
  corrupt("duplicate-name: functions", L.funcs[1].at, 4, get32(L.funcs[0].at),
          "two functions are named \"main\"");
}

static void function_records(void) {
  const func_layout *mf = &L.funcs[0], *af = &L.funcs[1]; /* main, add_bias */
  uint32_t ns = L.nstrings;
  char msg[160];
  snprintf(msg, sizeof msg, "functions: entry 0 names string %u", ns);
  corrupt("name-index: function", mf->at + F_NAME, 4, ns, msg);
  corrupt("absurd-count: functions", L.off[DVM_SEC_FUNCS], 4, UINT32_MAX,
          "functions: count 4294967295 does not fit");
  corrupt("absurd-count: registers", mf->at + F_NREGS, 4, UINT32_MAX,
          "function \"main\": 4294967295 registers exceed the limit of 1048576");
  corrupt("absurd-count: registers just over the limit", mf->at + F_NREGS, 4, DVM_MAX_REGS + 1,
          "registers exceed the limit");
  corrupt("absurd-count: code words", mf->at + F_NCODE, 4, UINT32_MAX,
          "4294967295 code words");
  corrupt("absurd-count: symbols", mf->at + F_NSYMS, 4, UINT32_MAX, "4294967295 symbols");
  corrupt("absurd-count: parameters", mf->at + F_NPARAMS, 4, UINT32_MAX, "4294967295 params");
  corrupt("absurd-count: results", mf->at + F_NRESULTS, 4, UINT32_MAX, "4294967295 results");
  corrupt("absurd-count: debug entries", mf->at + F_NDEBUG, 4, UINT32_MAX,
          "4294967295 debug entries");
  corrupt("function-params: more than registers", af->at + F_NREGS, 4, 0,
          "function \"add_bias\": 1 parameters do not fit in 0 registers");
  {
    /* more results than a list can return; the extra signatures are "any" */
    uint32_t extra = DVM_MAX_LIST;
    uint8_t *sigs = calloc(extra, 8);
    if (!sigs) abort();
    for (uint32_t i = 0; i < extra; i++) {
      put_le(sigs + 8 * i, get32(mf->results[0]), 4);
      sigs[8 * i + 6] = 0xff; /* rank -1 */
    }
    bytes v = dup_base();
    put_le(v.p + mf->at + F_NRESULTS, mf->nresults + extra, 4);
    bytes w = splice(&v, mf->code, 0, sigs, 8 * (size_t)extra);
    free(v.p);
    free(sigs);
    expect("function-results: more than a list holds", w, DVM_CORRUPT, "function \"main\": ");
  }
  {
    /* no code at all: the words go, the count says 0 */
    bytes v = dup_base();
    put_le(v.p + af->at + F_NCODE, 0, 4);
    put_le(v.p + af->at + F_NDEBUG, 0, 4);
    bytes w = splice(&v, af->code, 8 * (size_t)(af->ncode + af->ndebug), NULL, 0);
    free(v.p);
    expect("function-code: empty", w, DVM_CORRUPT, "function \"add_bias\": code of 0 words");
  }

  /* symbols: name u32, register u32, lo i64, hi i64 */
  size_t y = af->syms;
  snprintf(msg, sizeof msg, "function \"add_bias\": symbols: entry 0 names string %u", ns);
  corrupt("name-index: symbol", y, 4, ns, msg);
  corrupt("symbol-register: past the registers", y + 4, 4, af->nregs,
          "symbol \"n\" register r6 is not in r1..r5");
  corrupt("symbol-register: a parameter's", y + 4, 4, 0, "symbol \"n\" register r0 is not in");
  corrupt("symbol-range: lo > hi", y + 8, 8, 2000, "symbol \"n\" range 2000..1024 is empty");
  corrupt("symbol-range: negative lo", y + 8, 8, (uint64_t)-5, "range -5..1024 is empty or negative");

  /* signatures: name u32, kind u8, dtype u8, rank i8, pad u8, dims i64 */
  size_t p = af->params[0], r = af->results[1];
  snprintf(msg, sizeof msg, "function \"add_bias\": parameter: entry 0 names string %u", ns);
  corrupt("name-index: parameter", p, 4, ns, msg);
  snprintf(msg, sizeof msg, "function \"add_bias\": result: entry 1 names string %u", ns);
  corrupt("name-index: result", r, 4, ns, msg);
  corrupt("sig-kind: 7", p + 4, 1, DVM_KIND_COUNT, "parameter \"x\": bad kind, dtype or rank");
  corrupt("sig-dtype: 13", p + 5, 1, DVM_DTYPE_COUNT, "parameter \"x\": bad kind, dtype or rank");
  corrupt("sig-rank: 9", p + 6, 1, DVM_MAX_RANK + 1, "parameter \"x\": bad kind, dtype or rank");
  corrupt("sig-rank: -2", p + 6, 1, 0xfe, "parameter \"x\": bad kind, dtype or rank");
  corrupt("sig-reserved: not zero", p + 7, 1, 1, "parameter \"x\": bad kind, dtype or rank");
  /* only tensors have a dtype, only tensors and shapes a rank */
  corrupt("sig-dtype: on an int", mf->results[1] + 5, 1, DVM_I32, "result \"k\": bad kind");
  corrupt("sig-rank: on an any", r + 6, 1, 0, "result \"s\": bad kind, dtype or rank");
  corrupt("sig-symbol: 5 of 1", p + 8, 8, (uint64_t)DVM_DIM_SYM(5),
          "parameter \"x\" dim 0 names symbol 5, but there are 1");
  corrupt("sig-symbol: past 2^32, which an int would wrap to 0", p + 8, 8,
          (uint64_t)DVM_DIM_SYM(1ull << 32), "names symbol 4294967296, but there are 1");
  corrupt("sig-symbol: in a result", af->results[0] + 8, 8, (uint64_t)DVM_DIM_SYM(1),
          "result \"y\" dim 0 names symbol 1, but there are 1");
  corrupt("sig-symbol: in main, which has none", mf->results[0] + 8, 8, (uint64_t)DVM_DIM_SYM(0),
          "result \"y\" dim 0 names symbol 0, but there are 0");

  /* debug entries: instruction u32, string u32, instructions increasing */
  size_t d = mf->debug;
  snprintf(msg, sizeof msg, "debug entry 0 (instruction 0, string %u) is out of range", ns);
  corrupt("debug: string index", d + 4, 4, ns, msg);
  corrupt("debug: instruction past the end", d, 4, 1000,
          "debug entry 0 (instruction 1000, string");
  corrupt("debug: out of order", d + 8, 4, 0, "debug entry 1 (instruction 0, string");
}

static void code(void) {
  const func_layout *mf = &L.funcs[0], *af = &L.funcs[1];
  uint32_t pc;
  char msg[160];

  /* every kind of index, one past its table */
  pc = find_instr(mf, DVM_OP_IMM, 0);
  code_word_set("reg-index: written", mf, operand(mf, pc, 0), mf->nregs,
                "instruction 1 (imm): operand 0: register 16 out of range (16)");
  pc = find_instr(mf, DVM_OP_ADD, 0);
  code_word_set("reg-index: read, negative", mf, operand(mf, pc, 1), -1,
                "(add): operand 1: register -1 out of range (16)");
  pc = find_instr(mf, DVM_OP_MAKE_SHAPE, 0);
  code_word_set("reg-index: in a read list", mf, operand(mf, pc, 1) + 2, 99,
                "(make_shape): operand 1: register 99 out of range (16)");
  pc = find_instr(mf, DVM_OP_CALL, 0);
  code_word_set("reg-index: in a written list", mf, operand(mf, pc, 1) + 1, 16,
                "(call): operand 1: register 16 out of range (16)");
  pc = find_instr(mf, DVM_OP_RELEASE, 0);
  code_word_set("reg-index: released", mf, operand(mf, pc, 0), 16,
                "(release): operand 0: register 16 out of range");
  pc = find_instr(af, DVM_OP_INVOKE, 0);
  code_word_set("reg-index: optional", af, operand(af, pc, 1), af->nregs,
                "(invoke): operand 1: register 6 out of range (6)");
  code_word_set("reg-index: optional, negative", af, operand(af, pc, 1), -2,
                "(invoke): operand 1: register -2 out of range (6)");
  code_word_set("kernel-index: one past", af, operand(af, pc, 0), L.nkernels,
                "(invoke): operand 0: kernel 2 out of range (2)");
  pc = find_instr(mf, DVM_OP_CONST, 0);
  code_word_set("const-index: one past", mf, operand(mf, pc, 1), L.nconsts,
                "(const): operand 1: constant 2 out of range (2)");
  code_word_set("const-index: negative", mf, operand(mf, pc, 1), INT64_MIN,
                "(const): operand 1: constant -9223372036854775808 out of range (2)");
  pc = find_instr(mf, DVM_OP_CALL, 0);
  code_word_set("func-index: one past", mf, operand(mf, pc, 0), L.nfuncs,
                "(call): operand 0: function 2 out of range (2)");
  pc = find_instr(af, DVM_OP_SHAPEFN, 0);
  code_word_set("shapefn-index: one past", af, operand(af, pc, 0), L.nshapefns,
                "(shapefn): operand 0: shape function 2 out of range (2)");
  pc = find_instr(mf, DVM_OP_HOSTCALL, 0);
  code_word_set("hostfn-index: one past", mf, operand(mf, pc, 0), L.nhostfns,
                "(hostcall): operand 0: host function 1 out of range (1)");
  pc = find_instr(mf, DVM_OP_CHECK, 0);
  snprintf(msg, sizeof msg, "(check): operand 1: string %u out of range (%u)", L.nstrings, L.nstrings);
  code_word_set("string-index: one past", mf, operand(mf, pc, 1), L.nstrings, msg);
  pc = find_instr(af, DVM_OP_ALLOC, 0);
  code_word_set("dtype-index: one past", af, operand(af, pc, 1), DVM_DTYPE_COUNT,
                "(alloc): operand 1: dtype 14 out of range (14)");
  code_word_set("device-index: one past", af, operand(af, pc, 3), DVM_DEVICE_COUNT,
                "(alloc): operand 3: device 2 out of range (2)");
  pc = find_instr(af, DVM_OP_GUARD, 0);
  code_word_set("param-index: one past", af, operand(af, pc, 1), 1,
                "(guard): operand 1: parameter 1 out of range (1)");

  /* jumps */
  pc = find_instr(mf, DVM_OP_JNZ, 0);
  uint32_t target = (uint32_t)code_word(mf, operand(mf, pc, 1));
  code_word_set("jump-target: past the end", mf, operand(mf, pc, 1), mf->ncode,
                "operand 1: jump target");
  code_word_set("jump-target: negative", mf, operand(mf, pc, 1), -1,
                "operand 1: jump target -1 is not an instruction of this function");
  snprintf(msg, sizeof msg, "jump target %u is not an instruction", target + 1);
  code_word_set("jump-target: mid-instruction", mf, operand(mf, pc, 1), target + 1, msg);
  pc = find_instr(mf, DVM_OP_JMP, 0);
  code_word_set("jump-target: far", mf, operand(mf, pc, 0), INT64_MAX, "jump target");

  /* decoding */
  code_word_set("opcode: one past the table", mf, 0, DVM_OP_COUNT,
                "function \"main\", instruction 0: unknown opcode");
  code_word_set("opcode: negative", mf, 0, -1, "instruction 0: unknown opcode -1");
  pc = find_instr(af, DVM_OP_RET, 0);
  code_word_set("list-count: past the end", af, operand(af, pc, 0), 3,
                "(ret): operands run past the end of the code or a list count is out of range");
  code_word_set("list-count: negative", af, operand(af, pc, 0), -1, "(ret): operands run past");
  pc = find_instr(mf, DVM_OP_MAKE_SHAPE, 0);
  code_word_set("list-count: over the list limit", mf, operand(mf, pc, 1), DVM_MAX_LIST + 1,
                "(make_shape): operands run past");
  {
    int64_t nops[4] = {DVM_OP_NOP, DVM_OP_NOP, DVM_OP_NOP, DVM_OP_NOP};
    pc = find_instr(af, DVM_OP_RET, 0);
    snprintf(msg, sizeof msg, "function \"add_bias\": the last instruction (%u, nop) falls through",
             instr_index(af, pc) + 3);
    code_words("falls-through: last instruction", af, pc, nops, 4, msg);
  }

  /* operand counts against signatures, with words inserted */
  {
    pc = find_instr(mf, DVM_OP_CALL, 0);
    uint32_t args = operand(mf, pc, 2);
    bytes v = insert_words(mf, args + 1, (int64_t[]){9}, 1);
    put_le(v.p + word_off(mf, args), 2, 8);
    fix_header(&v);
    expect("call-count: an argument too many", v, DVM_CORRUPT,
           "call of \"add_bias\" with 2 arguments and 2 results; it takes 1 and returns 2");
    uint32_t dsts = operand(mf, pc, 1);
    v = insert_words(mf, dsts + 1, (int64_t[]){11}, 1);
    put_le(v.p + word_off(mf, dsts), 3, 8);
    fix_header(&v);
    expect("call-count: a result too many", v, DVM_CORRUPT, "with 1 arguments and 3 results");
    /* fewer: the count shrinks and the freed word becomes a nop */
    code_words("call-count: no arguments", mf, args, (int64_t[]){0, DVM_OP_NOP}, 2,
               "call of \"add_bias\" with 0 arguments and 2 results");
  }
  {
    pc = find_instr(af, DVM_OP_RET, 0);
    uint32_t list = operand(af, pc, 0);
    bytes v = insert_words(af, list + 1, (int64_t[]){4}, 1);
    put_le(v.p + word_off(af, list), 3, 8);
    fix_header(&v);
    expect("ret-count: a value too many", v, DVM_CORRUPT,
           "(ret): returns 3 values; the function declares 2");
    pc = find_instr(mf, DVM_OP_RET, 0);
    list = operand(mf, pc, 0);
    code_words("ret-count: a value too few", mf, list, (int64_t[]){1, 5, DVM_OP_NOP}, 3,
               "(ret): returns 1 values; the function declares 2");
    pc = find_instr(mf, DVM_OP_MAKE_SHAPE, 0);
    list = operand(mf, pc, 1);
    int64_t regs[DVM_MAX_RANK - 1];
    for (int i = 0; i < DVM_MAX_RANK - 1; i++) regs[i] = 6;
    v = insert_words(mf, list + 1, regs, DVM_MAX_RANK - 1);
    put_le(v.p + word_off(mf, list), DVM_MAX_RANK + 1, 8);
    fix_header(&v);
    expect("rank: make_shape of 9 dims", v, DVM_CORRUPT, "shape of 9 dims exceeds rank 8");
  }

  /* immediates the verifier checks */
  pc = find_instr(mf, DVM_OP_ALLOC_STORAGE, 0);
  code_word_set("alignment: 3", mf, operand(mf, pc, 3), 3,
                "alignment 3 is not a power of two up to 256");
  code_word_set("alignment: 512", mf, operand(mf, pc, 3), 512, "alignment 512 is not a power");
  code_word_set("alignment: 0", mf, operand(mf, pc, 3), 0, "alignment 0 is not a power");
  pc = find_instr(mf, DVM_OP_ALLOC_TENSOR_I, 0);
  code_word_set("shape-dim: negative", mf, operand(mf, pc, 4) + 2, -4,
                "shape dim 1 is negative (-4)");

  /* dataflow over register kinds */
  {
    pc = find_instr(mf, DVM_OP_IMM, 0);
    uint32_t r = (uint32_t)code_word(mf, operand(mf, pc, 0));
    snprintf(msg, sizeof msg, "r%u may be read before it is set", r);
    code_words("unset-register: never written", mf, pc,
               (int64_t[]){DVM_OP_NOP, DVM_OP_NOP, DVM_OP_NOP}, 3, msg);
    pc = find_instr(mf, DVM_OP_RELEASE, 0);
    uint32_t rel = (uint32_t)code_word(mf, operand(mf, pc, 0));
    pc = find_instr(mf, DVM_OP_RET, 0);
    snprintf(msg, sizeof msg, "(ret): operand 0: r%u may be read before it is set", rel);
    code_word_set("unset-register: released", mf, operand(mf, pc, 0) + 1, rel, msg);
    /* written only after the loop, so unset inside it */
    pc = find_instr(mf, DVM_OP_CALL, 0);
    uint32_t dst = (uint32_t)code_word(mf, operand(mf, pc, 1) + 2);
    uint32_t add = find_instr(mf, DVM_OP_ADD, 0);
    snprintf(msg, sizeof msg, "instruction %u (add): operand 2: r%u may be read before it is set",
             instr_index(mf, add), dst);
    code_word_set("unset-register: set later", mf, operand(mf, add, 2), dst, msg);
  }
  {
    uint32_t add = find_instr(mf, DVM_OP_ADD, 0);
    uint32_t t = (uint32_t)code_word(mf, operand(mf, find_instr(mf, DVM_OP_CONST, 0), 0));
    snprintf(msg, sizeof msg, "(add): operand 2: r%u may hold a tensor where the instruction needs "
             "another kind", t);
    code_word_set("register-kind: add on a tensor", mf, operand(mf, add, 2), t, msg);
    uint32_t jnz = find_instr(mf, DVM_OP_JNZ, 0);
    code_word_set("register-kind: branch on a tensor", mf, operand(mf, jnz, 0), t,
                  "(jnz): operand 0: r5 may hold a tensor");
    uint32_t rs = find_instr(mf, DVM_OP_RESHAPE, 0);
    code_word_set("register-kind: reshape to an int", mf, operand(mf, rs, 2), 0,
                  "(reshape): operand 2: r0 may hold a int");
    uint32_t call = find_instr(mf, DVM_OP_CALL, 0);
    code_word_set("register-kind: call argument", mf, operand(mf, call, 2) + 1, 0,
                  "(call): operand 2: r0 may hold a int");
    uint32_t ret = find_instr(mf, DVM_OP_RET, 0);
    code_word_set("register-kind: result", mf, operand(mf, ret, 0) + 2, t,
                  "(ret): operand 0: r5 may hold a tensor");
  }
}

static int read_text(const char *path, char **text, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *text = buf;
  *len = n;
  return buf != NULL;
}

/* Assembles path and returns its canonical bytes. */
static bytes assemble(const char *path) {
  char *text;
  size_t len;
  if (!read_text(path, &text, &len)) {
    fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
    exit(1);
  }
  dvm_module *m = NULL;
  bytes b = {0};
  dvm_status *st = dvm_asm_parse(text, len, path, &m);
  if (!st) st = dvm_bc_write(m, &b.p, &b.n);
  if (st) {
    fprintf(stderr, "%s\n", dvm_status_message(st));
    exit(1);
  }
  dvm_module_release(m);
  free(text);
  return b;
}

/* The info section (1.1): records of (function, key, value). */
static void info(void) {
  size_t r = L.off[DVM_SEC_INFO] + 4; /* the base's one record, add_bias's peak */
  if (!L.off[DVM_SEC_INFO] || get32(L.off[DVM_SEC_INFO]) != 1) {
    fprintf(stderr, "base.dvms must have one .info record\n");
    exit(1);
  }
  corrupt("info: absurd count", L.off[DVM_SEC_INFO], 4, UINT32_MAX, "info: count 4294967295 does not fit");
  corrupt("info: short count", L.entry[DVM_SEC_INFO] + 16, 8, 2, "info: section too short for its count");
  corrupt("info: trailing", L.off[DVM_SEC_INFO], 4, 0, "info: 12 bytes after the last entry");
  corrupt("info: function out of range", r, 4, L.nfuncs, "info: entry 0 names function 2 (of 2) out of order");
  corrupt("info: key string out of range", r + 4, 4, L.nstrings, "info: entry 0 names string");
  corrupt("info: value string out of range", r + 8, 4, UINT32_MAX, "info: entry 0 names string");
  corrupt("info: key not known", r + 4, 4, string_index("add_bias"), "info \"add_bias\" is not a known key");
  corrupt("info: function without the symbol", r, 4, 0, "info \"peak\" names \"n\", not a symbol of the function");
  corrupt("info: not a formula", r + 8, 4, string_index("twice"), "names \"twice\", not a symbol");
  corrupt("info: bad character", r + 8, 4, string_index("i->i"), "character 0x3e is not part of a formula");
  bytes v = splice(&base, r, 12, NULL, 0); /* the record cut, the count left at 1 */
  expect("info: record truncated", v, DVM_CORRUPT, "info: count 1 does not fit");
}

/* The external section (1.3), on ext.dvms: records of (constant, path,
 * offset, hash) for constant "w", the module's third. */
static void external(const char *path) {
  free(base.p);
  base = assemble(path);
  memset(&L, 0, sizeof L);
  walk_layout();
  size_t sec = L.off[DVM_SEC_EXTERNAL], r = sec + 4;
  if (!sec || get32(sec) != 1 || L.nconsts != 3 || get32(r) != 2) {
    fprintf(stderr, "%s must have one external constant, the third\n", path);
    exit(1);
  }
  expect("external: loaded from memory", dup_base(), DVM_UNIMPLEMENTED,
         "constant \"w\" is in the file \"w.bin\", but the module was loaded from memory");
  corrupt("external: absurd count", sec, 4, UINT32_MAX, "external: count 4294967295 does not fit");
  corrupt("external: trailing", sec, 4, 0, "external: 24 bytes after the last entry");
  corrupt("external: count past the records", sec, 4, 2, "external: count 2 does not fit in 28 bytes");
  corrupt("external: constant out of range", r, 4, 3, "external: entry 0 names constant 3 (of 3) out of order");
  corrupt("external: path string out of range", r + 4, 4, L.nstrings, "external: entry 0 names string");
  corrupt("external: absolute path", r + 4, 4, string_index("/abs/w.bin"),
          "constant \"w\": external file \"/abs/w.bin\" is not a path inside the module's folder");
  corrupt("external: path leaving the folder", r + 4, 4, string_index("up/../../w.bin"),
          "external file \"up/../../w.bin\" is not a path inside");
  corrupt("external: offset not aligned", r + 8, 8, 130, "constant \"w\": offset 130 in \"w.bin\" is not 64-byte aligned");
  corrupt("external: data offset", L.consts[2] + 8, 8, 64, "constant \"w\": external, but its data offset is 64, not 0");
  /* without the section the constant's bytes are looked for in the data section */
  corrupt("external: section dropped", L.entry[DVM_SEC_EXTERNAL] + 16, 8, 0, "external: section too short for its count");
}

static void write_valid_seed(const char *path) {
  bytes b = assemble(path);
  const char *stem = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  char out[512];
  snprintf(out, sizeof out, "%s/valid_%.*s.dvmb", seed_dir, (int)strcspn(stem, "."), stem);
  write_file(out, &b);
  free(b.p);
}

static int64_t twice(int64_t x) { return 2 * x; }

int main(int argc, char **argv) {
  if (argc < 2 || (argc > 2 && (strcmp(argv[2], "--write-seeds") != 0 || argc < 4))) {
    fprintf(stderr, "usage: %s BASE.dvms [--write-seeds DIR [VALID.dvms...]]\n", argv[0]);
    return 2;
  }
  if (argc > 3) seed_dir = argv[3];
  base = assemble(argv[1]);
  CHECK_OK(dvm_hostfn_registry_create(&registry));
  CHECK_OK(dvm_hostfn_register(registry, "twice", "i->i", (void (*)(void))twice));
  walk_layout();
  check_base_runs();
  truncations();
  header();
  section_table();
  strings();
  tables();
  function_records();
  code();
  info();
  if (seed_dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/valid_base.dvmb", seed_dir);
    write_file(path, &base);
    for (int i = 4; i < argc; i++) write_valid_seed(argv[i]);
  }
  char ext[512]; /* ext.dvms, beside the base */
  snprintf(ext, sizeof ext, "%.*sext.dvms", (int)(strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 - argv[1] : 0), argv[1]);
  external(ext);
  printf("test_corrupt: %d corrupt variants\n", ncases);
  free(base.p);
  dvm_hostfn_registry_destroy(registry);
  return harness_finish("corrupt");
}
