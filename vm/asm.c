/* The assembler: .dvms text to a verified module (syntax in
 * docs/bytecode.md). Names of functions, constants, kernels, shape and host
 * functions are resolved by name; labels by a fix-up at the end of each
 * function. Errors name the file, line and column. */
#include <string.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "asm.h"
#include "opcode.h"
#include "vec.h"

enum { T_EOF, T_NL, T_WORD, T_STR, T_HEX, T_PUNCT };

typedef struct {
  int type;
  char *text; /* words, strings (unescaped), hex (decoded bytes) */
  size_t len;
  char punct;
  int line, col;
} token;

#define VEC_PUSH(vec, item, ok) DVM_VEC_PUSH(vec, item, ok = 0)

typedef struct {
  uint32_t word;
  char *label;
  int line, col;
} fixup;

typedef struct {
  char *name;
  uint32_t instr;
} label;

typedef struct {
  const char *file;
  const char *p, *end;
  int line, col;
  token tok;      /* current token */
  dvm_module *m;
  dvm_arena *a;
  DVM_VEC(const char *) strings;
  DVM_VEC(dvm_const) consts;
  DVM_VEC(dvm_kernel_ref) kernels;
  DVM_VEC(dvm_shapefn_ref) shapefns;
  DVM_VEC(dvm_hostfn_ref) hostfns;
  DVM_VEC(dvm_func) funcs;
  /* the function being parsed */
  dvm_func *f;
  DVM_VEC(int64_t) code;
  DVM_VEC(uint32_t) starts;
  DVM_VEC(const char *) src;
  DVM_VEC(dvm_sym) syms;
  DVM_VEC(dvm_info) info;
  DVM_VEC(dvm_sig) params;
  DVM_VEC(dvm_sig) results;
  DVM_VEC(fixup) fixups;
  DVM_VEC(label) labels;
  const char *loc;
  dvm_status *err;
} parser;

static dvm_status *perr(parser *ps, int line, int col, const char *fmt, ...) DVM_PRINTF(4, 5);
static dvm_status *perr(parser *ps, int line, int col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(DVM_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return dvm_status_annotate(st, "%s:%d:%d", ps->file, line, col);
}
#define ERR(...) perr(ps, ps->tok.line, ps->tok.col, __VA_ARGS__)
#define OOM() dvm_status_new(DVM_OUT_OF_MEMORY, "")

/* ---- lexer ---- */

static int word_char(int c) { return isalnum(c) || strchr("_.:/-+$@", c); }

static int hexval(int c) {
  return isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

static void advance(parser *ps, size_t n) {
  for (size_t i = 0; i < n && ps->p < ps->end; i++) {
    if (*ps->p == '\n') {
      ps->line++;
      ps->col = 1;
    } else {
      ps->col++;
    }
    ps->p++;
  }
}

/* Reads a quoted string (after the opening quote) into arena memory. */
static dvm_status *lex_string(parser *ps, int hex) {
  const char *start = ps->p;
  size_t n = 0;
  char *out = dvm_arena_alloc(ps->a, (size_t)(ps->end - start) + 1, 1);
  if (!out) return OOM();
  while (ps->p < ps->end && *ps->p != '"') {
    int c = (unsigned char)*ps->p;
    if (c == '\n') return perr(ps, ps->line, ps->col, "unterminated string");
    if (hex) {
      int h = hexval(c), l = ps->p + 1 < ps->end ? hexval((unsigned char)ps->p[1]) : -1;
      if (h < 0 || l < 0) return perr(ps, ps->line, ps->col, "bad hex digit pair in x\"...\"");
      out[n++] = (char)(h * 16 + l);
      advance(ps, 2);
      continue;
    }
    if (c == '\\') {
      int e = ps->p + 1 < ps->end ? ps->p[1] : 0;
      if (e == 'n') out[n++] = '\n';
      else if (e == 't') out[n++] = '\t';
      else if (e == '"' || e == '\\') out[n++] = (char)e;
      else if (e == 'x' && ps->p + 3 < ps->end && hexval(ps->p[2]) >= 0 && hexval(ps->p[3]) >= 0) {
        int v = hexval(ps->p[2]) * 16 + hexval(ps->p[3]);
        if (v == 0) return perr(ps, ps->line, ps->col, "\\x00 is not allowed in a string");
        out[n++] = (char)v;
        advance(ps, 2);
      } else {
        return perr(ps, ps->line, ps->col, "unknown escape in string");
      }
      advance(ps, 2);
      continue;
    }
    out[n++] = (char)c;
    advance(ps, 1);
  }
  if (ps->p >= ps->end) return perr(ps, ps->line, ps->col, "unterminated string");
  advance(ps, 1);
  out[n] = 0;
  ps->tok.text = out;
  ps->tok.len = n;
  return NULL;
}

static dvm_status *next(parser *ps) {
  for (;;) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r')) advance(ps, 1);
    if (ps->p < ps->end && *ps->p == ';')
      while (ps->p < ps->end && *ps->p != '\n') advance(ps, 1);
    break;
  }
  token *t = &ps->tok;
  memset(t, 0, sizeof *t);
  t->line = ps->line;
  t->col = ps->col;
  if (ps->p >= ps->end) {
    t->type = T_EOF;
    return NULL;
  }
  char c = *ps->p;
  if (c == '\n') {
    t->type = T_NL;
    advance(ps, 1);
    return NULL;
  }
  if (c == '"' || (c == 'x' && ps->p + 1 < ps->end && ps->p[1] == '"')) {
    int hex = c == 'x';
    advance(ps, hex ? 2 : 1);
    t->type = hex ? T_HEX : T_STR;
    return lex_string(ps, hex);
  }
  if (strchr(",()[]=?*", c)) {
    t->type = T_PUNCT;
    t->punct = c;
    advance(ps, 1);
    return NULL;
  }
  if (!word_char((unsigned char)c)) return ERR("unexpected character '%c'", c);
  const char *start = ps->p;
  while (ps->p < ps->end && word_char((unsigned char)*ps->p)) advance(ps, 1);
  t->type = T_WORD;
  t->len = (size_t)(ps->p - start);
  t->text = dvm_arena_alloc(ps->a, t->len + 1, 1);
  if (!t->text) return OOM();
  memcpy(t->text, start, t->len);
  return NULL;
}

#define TRY(e)                      \
  do {                              \
    dvm_status *st_ = (e);          \
    if (st_) return st_;            \
  } while (0)

static int is_punct(parser *ps, char c) { return ps->tok.type == T_PUNCT && ps->tok.punct == c; }

static dvm_status *expect_punct(parser *ps, char c) {
  if (!is_punct(ps, c)) return ERR("expected '%c'", c);
  return next(ps);
}

/* A name: a bare word (sigil $ or @ dropped) or a quoted string. */
static dvm_status *name(parser *ps, const char **out) {
  if (ps->tok.type == T_STR) {
    *out = ps->tok.text;
  } else if (ps->tok.type == T_WORD) {
    const char *s = ps->tok.text;
    *out = (*s == '$' || *s == '@') ? s + 1 : s;
  } else {
    return ERR("expected a name");
  }
  if (!**out) return ERR("empty name");
  return next(ps);
}

static dvm_status *integer(parser *ps, int64_t *out) {
  if (ps->tok.type != T_WORD) return ERR("expected an integer");
  char *end;
  errno = 0;
  long long v = strtoll(ps->tok.text, &end, 0);
  if (*end || errno || end == ps->tok.text) return ERR("\"%s\" is not an int64", ps->tok.text);
  *out = v;
  return next(ps);
}

static dvm_status *floating(parser *ps, int64_t *bits) {
  if (ps->tok.type != T_WORD) return ERR("expected a number");
  const char *s = ps->tok.text;
  double f;
  if (strncmp(s, "nan:", 4) == 0) {
    char *end;
    errno = 0;
    unsigned long long b = strtoull(s + 4, &end, 0);
    if (*end || errno) return ERR("bad NaN bits \"%s\"", s);
    *bits = (int64_t)b;
    return next(ps);
  }
  char *end;
  f = strtod(s, &end);
  if (*end || end == s) return ERR("\"%s\" is not a number", s);
  memcpy(bits, &f, sizeof f);
  return next(ps);
}

static dvm_status *reg(parser *ps, int64_t *out) {
  const char *s = ps->tok.text;
  if (ps->tok.type != T_WORD || s[0] != 'r' || !isdigit((unsigned char)s[1]))
    return ERR("expected a register (rN)");
  char *end;
  errno = 0;
  long long v = strtoll(s + 1, &end, 10);
  if (*end || errno || v >= (long long)ps->f->nregs)
    return ERR("register %s is not one of the function's %u registers", s, ps->f->nregs);
  *out = v;
  return next(ps);
}

static dvm_status *end_of_line(parser *ps) {
  if (ps->tok.type != T_NL && ps->tok.type != T_EOF) return ERR("unexpected text at end of line");
  return NULL;
}

/* Finds name in a table of structs that start with their name. */
static int64_t find(const void *table, size_t n, size_t stride, const char *nm) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(*(const char *const *)((const char *)table + i * stride), nm) == 0) return (int64_t)i;
  return -1;
}
#define FIND(vec, nm) find((vec).v, (vec).n, sizeof *(vec).v, nm)

static dvm_status *emit(parser *ps, int64_t w) {
  int ok = 1;
  VEC_PUSH(ps->code, w, ok);
  return ok ? NULL : OOM();
}

/* ---- directives ---- */

static dvm_status *dir_const(parser *ps) {
  dvm_const c = {0};
  const char *dt;
  TRY(name(ps, &c.name));
  if (ps->tok.type != T_WORD) return ERR("expected a dtype");
  dt = ps->tok.text;
  dvm_dtype d;
  if (!dvm_dtype_parse(dt, &d)) return ERR("unknown dtype \"%s\"", dt);
  c.dtype = (uint8_t)d;
  TRY(next(ps));
  TRY(expect_punct(ps, '['));
  while (!is_punct(ps, ']')) {
    if (c.rank == DVM_MAX_RANK) return ERR("rank exceeds %d", DVM_MAX_RANK);
    if (c.rank) TRY(expect_punct(ps, ','));
    TRY(integer(ps, &c.dims[c.rank]));
    if (c.dims[c.rank++] < 0) return ERR("negative dim");
  }
  TRY(next(ps));
  int64_t n;
  size_t bytes;
  dvm_status *st = dvm_shape_numel(c.rank, c.dims, &n);
  if (st) {
    dvm_status_free(st);
    return ERR("bad shape");
  }
  if (dvm_mul_overflows((size_t)n, dvm_dtype_size(d), &bytes)) return ERR("bad shape");
  c.nbytes = bytes;
  if (ps->tok.type == T_WORD && strcmp(ps->tok.text, "file") == 0) { /* file "PATH" OFFSET HASH */
    TRY(next(ps));
    if (ps->tok.type != T_STR) return ERR("expected the file's path as a string");
    c.ext_path = ps->tok.text;
    TRY(next(ps));
    int64_t off;
    TRY(integer(ps, &off));
    if (off < 0) return ERR("negative file offset");
    c.ext_offset = (uint64_t)off;
    char *end;
    errno = 0;
    c.ext_hash = ps->tok.type == T_WORD ? strtoull(ps->tok.text, &end, 16) : 0;
    if (ps->tok.type != T_WORD || strncmp(ps->tok.text, "0x", 2) != 0 || *end || errno)
      return ERR("expected the bytes' XXH3-64 as 0x and 16 hex digits");
  } else {
    if (ps->tok.type != T_HEX) return ERR("expected the constant's bytes as x\"...\" or file \"PATH\"");
    if (d == DVM_STRING) { /* byte counts then bytes (docs/bytecode.md) */
      if ((st = dvm_strings_blob_check((const uint8_t *)ps->tok.text, ps->tok.len, n))) {
        const char *msg = dvm_status_message(st);
        dvm_status *e = ERR("constant \"%s\": %s", c.name, msg);
        dvm_status_free(st);
        return e;
      }
      c.nbytes = ps->tok.len;
    } else if (bytes != ps->tok.len) {
      return ERR("constant \"%s\" has %zu bytes, its shape needs %zu", c.name, ps->tok.len, bytes);
    }
    c.data = ps->tok.text;
  }
  if (FIND(ps->consts, c.name) >= 0) return ERR("constant \"%s\" is defined twice", c.name);
  int ok = 1;
  VEC_PUSH(ps->consts, c, ok);
  if (!ok) return OOM();
  return next(ps);
}

static dvm_status *dir_kernel(parser *ps) {
  dvm_kernel_ref k = {0};
  TRY(name(ps, &k.name));
  dvm_device_kind dev;
  if (ps->tok.type != T_WORD || !dvm_device_parse(ps->tok.text, &dev)) return ERR("expected a device");
  k.device = (uint8_t)dev;
  TRY(next(ps));
  int64_t nv;
  TRY(integer(ps, &nv));
  if (nv < 1 || nv > UINT32_MAX) return ERR("variant count must be at least 1");
  k.nvariants = (uint32_t)nv;
  if (ps->tok.type == T_HEX) {
    k.payload = ps->tok.text;
    k.payload_size = ps->tok.len;
    TRY(next(ps));
  }
  if (FIND(ps->kernels, k.name) >= 0) return ERR("kernel \"%s\" is declared twice", k.name);
  int ok = 1;
  VEC_PUSH(ps->kernels, k, ok);
  return ok ? NULL : OOM();
}

static dvm_status *dir_shapefn(parser *ps) {
  dvm_shapefn_ref s = {0};
  TRY(name(ps, &s.name));
  if (FIND(ps->shapefns, s.name) >= 0) return ERR("shape function \"%s\" is declared twice", s.name);
  int ok = 1;
  VEC_PUSH(ps->shapefns, s, ok);
  return ok ? NULL : OOM();
}

static dvm_status *dir_hostfn(parser *ps) {
  dvm_hostfn_ref h = {0};
  TRY(name(ps, &h.name));
  if (ps->tok.type != T_STR) return ERR("expected the signature as a string");
  h.sig = ps->tok.text;
  TRY(next(ps));
  if (FIND(ps->hostfns, h.name) >= 0) return ERR("host function \"%s\" is declared twice", h.name);
  int ok = 1;
  VEC_PUSH(ps->hostfns, h, ok);
  return ok ? NULL : OOM();
}

static dvm_status *dir_sym(parser *ps) {
  dvm_sym s = {0};
  int64_t r;
  TRY(name(ps, &s.name));
  TRY(reg(ps, &r));
  s.reg = (uint32_t)r;
  TRY(integer(ps, &s.lo));
  TRY(integer(ps, &s.hi));
  int ok = 1;
  VEC_PUSH(ps->syms, s, ok);
  return ok ? NULL : OOM();
}

static dvm_status *dir_info(parser *ps) {
  dvm_info in;
  TRY(name(ps, &in.key));
  TRY(name(ps, &in.value));
  int ok = 1;
  VEC_PUSH(ps->info, in, ok);
  return ok ? NULL : OOM();
}

static dvm_status *dir_sig(parser *ps, int result) {
  dvm_sig s = {0};
  s.rank = -1;
  TRY(name(ps, &s.name));
  if (ps->tok.type != T_WORD) return ERR("expected a kind");
  int kind = -1;
  if (strcmp(ps->tok.text, "any") == 0) kind = DVM_VAL_NONE;
  for (int k = 1; k < DVM_KIND_COUNT && kind < 0; k++)
    if (strcmp(ps->tok.text, dvm_kind_name((dvm_kind)k)) == 0) kind = k;
  if (kind < 0) return ERR("unknown kind \"%s\"", ps->tok.text);
  s.kind = (uint8_t)kind;
  TRY(next(ps));
  if (kind == DVM_VAL_TENSOR) {
    dvm_dtype d;
    if (ps->tok.type != T_WORD || !dvm_dtype_parse(ps->tok.text, &d)) return ERR("expected a dtype");
    s.dtype = (uint8_t)d;
    TRY(next(ps));
  }
  if (kind == DVM_VAL_TUPLE && ps->tok.type == T_WORD) { /* optional: its tensors' dtype */
    dvm_dtype d;
    if (dvm_dtype_parse(ps->tok.text, &d)) {
      s.dtype = (uint8_t)(1 + d);
      TRY(next(ps));
    }
  }
  if (kind == DVM_VAL_TENSOR || kind == DVM_VAL_SHAPE) {
    if (is_punct(ps, '*')) {
      TRY(next(ps));
    } else {
      TRY(expect_punct(ps, '['));
      s.rank = 0;
      while (!is_punct(ps, ']')) {
        if (s.rank == DVM_MAX_RANK) return ERR("rank exceeds %d", DVM_MAX_RANK);
        if (s.rank) TRY(expect_punct(ps, ','));
        int64_t *d = &s.dims[s.rank++];
        if (is_punct(ps, '?')) {
          *d = DVM_DIM_ANY;
          TRY(next(ps));
        } else if (ps->tok.type == T_WORD && (isdigit((unsigned char)ps->tok.text[0]))) {
          TRY(integer(ps, d));
        } else {
          const char *sym;
          TRY(name(ps, &sym));
          int64_t i = FIND(ps->syms, sym);
          if (i < 0) return ERR("unknown symbol \"%s\" (declare it with .sym first)", sym);
          *d = DVM_DIM_SYM(i);
        }
      }
      TRY(next(ps));
    }
  }
  int ok = 1;
  if (result) VEC_PUSH(ps->results, s, ok);
  else VEC_PUSH(ps->params, s, ok);
  return ok ? NULL : OOM();
}

/* ---- instructions ---- */

static dvm_status *operand(parser *ps, char c) {
  int64_t x = 0;
  const char *nm;
  switch (c) {
  case 'd': case 'r': case 'k': TRY(reg(ps, &x)); break;
  case 'o':
    if (ps->tok.type == T_WORD && strcmp(ps->tok.text, "-") == 0) {
      x = -1;
      TRY(next(ps));
    } else {
      TRY(reg(ps, &x));
    }
    break;
  case 'i': case 'p': case 'q': TRY(integer(ps, &x)); break;
  case 'f': TRY(floating(ps, &x)); break;
  case 'c': case 'F': case 'X': case 'Y': case 'H': {
    int line = ps->tok.line, col = ps->tok.col;
    TRY(name(ps, &nm));
    x = c == 'c' ? FIND(ps->consts, nm) : c == 'F' ? FIND(ps->funcs, nm)
      : c == 'X' ? FIND(ps->kernels, nm) : c == 'Y' ? FIND(ps->shapefns, nm) : FIND(ps->hostfns, nm);
    if (x < 0)
      return perr(ps, line, col, "unknown %s \"%s\"",
                  c == 'c' ? "constant" : c == 'F' ? "function" : c == 'X' ? "kernel"
                  : c == 'Y' ? "shape function" : "host function", nm);
    break;
  }
  case 's': {
    if (ps->tok.type != T_STR) return ERR("expected a string");
    int ok = 1;
    x = (int64_t)ps->strings.n;
    VEC_PUSH(ps->strings, ps->tok.text, ok);
    if (!ok) return OOM();
    TRY(next(ps));
    break;
  }
  case 'j': {
    if (ps->tok.type != T_WORD) return ERR("expected a label");
    fixup fx = {(uint32_t)ps->code.n, ps->tok.text, ps->tok.line, ps->tok.col};
    int ok = 1;
    VEC_PUSH(ps->fixups, fx, ok);
    if (!ok) return OOM();
    TRY(next(ps));
    break;
  }
  case 't': {
    dvm_dtype d;
    if (ps->tok.type != T_WORD || !dvm_dtype_parse(ps->tok.text, &d)) return ERR("expected a dtype");
    x = d;
    TRY(next(ps));
    break;
  }
  case 'v': {
    dvm_device_kind d;
    if (ps->tok.type != T_WORD || !dvm_device_parse(ps->tok.text, &d)) return ERR("expected a device");
    x = d;
    TRY(next(ps));
    break;
  }
  default: { /* lists */
    char open = c == 'I' ? '[' : '(', close = c == 'I' ? ']' : ')';
    TRY(expect_punct(ps, open));
    size_t count_at = ps->code.n;
    TRY(emit(ps, 0));
    int64_t n = 0;
    while (!is_punct(ps, close)) {
      if (n) TRY(expect_punct(ps, ','));
      if (n == DVM_MAX_LIST) return ERR("list longer than %d", DVM_MAX_LIST);
      if (c == 'I') TRY(integer(ps, &x));
      else TRY(reg(ps, &x));
      TRY(emit(ps, x));
      n++;
    }
    ps->code.v[count_at] = n;
    return next(ps);
  }
  }
  return emit(ps, x);
}

static dvm_status *instruction(parser *ps) {
  int op = -1;
  for (int i = 0; i < DVM_OP_COUNT; i++)
    if (strcmp(ps->tok.text, dvm_opinfo_table[i].name) == 0) op = i;
  if (op < 0) return ERR("unknown instruction \"%s\"", ps->tok.text);
  int ok = 1;
  VEC_PUSH(ps->starts, (uint32_t)ps->code.n, ok);
  VEC_PUSH(ps->src, ps->loc, ok);
  if (!ok) return OOM();
  TRY(emit(ps, op));
  TRY(next(ps));
  int j = 0;
  for (const char *f = dvm_opinfo_table[op].format; *f; f++, j++) {
    if (j) TRY(expect_punct(ps, ','));
    TRY(operand(ps, *f));
  }
  return NULL;
}

static dvm_status *end_func(parser *ps) {
  dvm_func *f = ps->f;
  for (size_t i = 0; i < ps->fixups.n; i++) {
    fixup *fx = &ps->fixups.v[i];
    int64_t l = -1;
    for (size_t k = 0; k < ps->labels.n && l < 0; k++)
      if (strcmp(ps->labels.v[k].name, fx->label) == 0) l = ps->labels.v[k].instr;
    if (l < 0) return perr(ps, fx->line, fx->col, "unknown label \"%s\"", fx->label);
    if ((size_t)l >= ps->starts.n)
      return perr(ps, fx->line, fx->col, "label \"%s\" is at the end of the function", fx->label);
    ps->code.v[fx->word] = ps->starts.v[l];
  }
#define COPY_OUT(dst, vec)                                                  \
  do {                                                                      \
    (dst) = dvm_arena_alloc(ps->a, (vec).n, sizeof *(vec).v);               \
    if (!(dst) && (vec).n) return OOM();                                    \
    if ((vec).n) memcpy((dst), (vec).v, (vec).n * sizeof *(vec).v);          \
    (vec).n = 0;                                                            \
  } while (0)
  f->ncode = (uint32_t)ps->code.n;
  f->nsyms = (uint32_t)ps->syms.n;
  f->nparams = (uint32_t)ps->params.n;
  f->nresults = (uint32_t)ps->results.n;
  f->ninfo = (uint32_t)ps->info.n;
  COPY_OUT(f->info, ps->info);
  COPY_OUT(f->code, ps->code);
  COPY_OUT(f->syms, ps->syms);
  COPY_OUT(f->params, ps->params);
  COPY_OUT(f->results, ps->results);
  COPY_OUT(f->src, ps->src);
  ps->starts.n = ps->fixups.n = ps->labels.n = 0;
  ps->f = NULL;
  ps->loc = NULL;
  return NULL;
}

static dvm_status *func_line(parser *ps) {
  const char *w = ps->tok.type == T_WORD ? ps->tok.text : "";
  if (strcmp(w, ".end") == 0) {
    TRY(next(ps));
    return end_func(ps);
  }
  if (strcmp(w, ".sym") == 0) { TRY(next(ps)); return dir_sym(ps); }
  if (strcmp(w, ".info") == 0) { TRY(next(ps)); return dir_info(ps); }
  if (strcmp(w, ".param") == 0 || strcmp(w, ".result") == 0) {
    int result = w[1] == 'r';
    if (ps->starts.n) return ERR("%s must come before the first instruction", w);
    TRY(next(ps));
    return dir_sig(ps, result);
  }
  if (strcmp(w, ".loc") == 0) {
    TRY(next(ps));
    if (ps->tok.type == T_WORD && strcmp(ps->tok.text, "-") == 0) {
      ps->loc = NULL;
      return next(ps);
    }
    return name(ps, &ps->loc);
  }
  if (ps->tok.type == T_WORD && ps->tok.len > 1 && w[ps->tok.len - 1] == ':') {
    ps->tok.text[ps->tok.len - 1] = 0;
    label l = {ps->tok.text, (uint32_t)ps->starts.n};
    for (size_t k = 0; k < ps->labels.n; k++)
      if (strcmp(ps->labels.v[k].name, l.name) == 0) return ERR("label \"%s\" is defined twice", l.name);
    int ok = 1;
    VEC_PUSH(ps->labels, l, ok);
    if (!ok) return OOM();
    return next(ps);
  }
  if (ps->tok.type != T_WORD) return ERR("expected an instruction");
  return instruction(ps);
}

static dvm_status *func_start(parser *ps) {
  const char *nm;
  TRY(name(ps, &nm));
  int64_t i = FIND(ps->funcs, nm);
  if (i < 0) return ERR("function \"%s\" was not seen by the pre-scan", nm);
  ps->f = &ps->funcs.v[i];
  if (ps->tok.type != T_WORD || strncmp(ps->tok.text, "regs", 4) != 0) return ERR("expected regs=N");
  TRY(next(ps));
  TRY(expect_punct(ps, '='));
  int64_t n;
  TRY(integer(ps, &n));
  if (n < 0 || n > DVM_MAX_REGS) return ERR("register count %lld is outside 0..%d", (long long)n, DVM_MAX_REGS);
  ps->f->nregs = (uint32_t)n;
  return NULL;
}

static dvm_status *top_line(parser *ps) {
  const char *w = ps->tok.type == T_WORD ? ps->tok.text : "";
  if (strcmp(w, ".const") == 0) { TRY(next(ps)); return dir_const(ps); }
  if (strcmp(w, ".kernel") == 0) { TRY(next(ps)); return dir_kernel(ps); }
  if (strcmp(w, ".shapefn") == 0) { TRY(next(ps)); return dir_shapefn(ps); }
  if (strcmp(w, ".hostfn") == 0) { TRY(next(ps)); return dir_hostfn(ps); }
  if (strcmp(w, ".func") == 0) {
    TRY(next(ps));
    return func_start(ps);
  }
  return ERR("expected a directive (.const, .kernel, .shapefn, .hostfn, .func)");
}

/* Functions may be called before they are defined: declare them all first. */
static dvm_status *prescan(parser *ps) {
  for (;;) {
    TRY(next(ps));
    if (ps->tok.type == T_EOF) return NULL;
    if (ps->tok.type == T_WORD && strcmp(ps->tok.text, ".func") == 0) {
      TRY(next(ps));
      dvm_func f = {0};
      TRY(name(ps, &f.name));
      if (FIND(ps->funcs, f.name) >= 0) return ERR("function \"%s\" is defined twice", f.name);
      int ok = 1;
      VEC_PUSH(ps->funcs, f, ok);
      if (!ok) return OOM();
    }
    while (ps->tok.type != T_NL && ps->tok.type != T_EOF) TRY(next(ps));
  }
}

static dvm_status *parse(parser *ps, const char *text, size_t len) {
  ps->p = text;
  ps->end = text + len;
  ps->line = ps->col = 1;
  TRY(prescan(ps));
  ps->p = text;
  ps->line = ps->col = 1;
  for (;;) {
    TRY(next(ps));
    if (ps->tok.type == T_EOF) break;
    if (ps->tok.type == T_NL) continue;
    TRY(ps->f ? func_line(ps) : top_line(ps));
    TRY(end_of_line(ps));
  }
  if (ps->f) return ERR("function \"%s\" has no .end", ps->f->name);
  dvm_module *m = ps->m;
  m->nstrings = (uint32_t)ps->strings.n;
  m->nconsts = (uint32_t)ps->consts.n;
  m->nkernels = (uint32_t)ps->kernels.n;
  m->nshapefns = (uint32_t)ps->shapefns.n;
  m->nhostfns = (uint32_t)ps->hostfns.n;
  m->nfuncs = (uint32_t)ps->funcs.n;
  COPY_OUT(m->strings, ps->strings);
  COPY_OUT(m->consts, ps->consts);
  COPY_OUT(m->kernels, ps->kernels);
  COPY_OUT(m->shapefns, ps->shapefns);
  COPY_OUT(m->hostfns, ps->hostfns);
  COPY_OUT(m->funcs, ps->funcs);
  return NULL;
}

dvm_status *dvm_asm_parse(const char *text, size_t len, const char *filename, dvm_module **out) {
  dvm_module *m;
  dvm_status *st = dvm_module_new_empty(&m);
  if (st) return st;
  parser ps = {.file = filename, .m = m, .a = &m->arena};
  st = parse(&ps, text, len);
  free(ps.strings.v); free(ps.consts.v); free(ps.kernels.v); free(ps.shapefns.v);
  free(ps.hostfns.v); free(ps.funcs.v); free(ps.code.v); free(ps.starts.v); free(ps.src.v);
  free(ps.syms.v); free(ps.info.v); free(ps.params.v); free(ps.results.v); free(ps.fixups.v); free(ps.labels.v);
  if (!st) st = dvm_status_annotate(dvm_verify_module(m), "%s", filename);
  if (st) {
    dvm_module_release(m);
    return st;
  }
  *out = m;
  return NULL;
}

dvm_status *dvm_asm_assemble(const char *text, size_t len, const char *filename, uint8_t **out, size_t *size) {
  dvm_module *m;
  dvm_status *st = dvm_asm_parse(text, len, filename, &m);
  if (st) return st;
  st = dvm_bc_write(m, out, size);
  dvm_module_release(m);
  return st;
}
