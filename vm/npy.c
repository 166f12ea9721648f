/* .npy reading and writing (dvm/npy.h).
 *
 * Layout: magic "\x93NUMPY", major and minor version bytes, the header length
 * (u16 little-endian in 1.0, u32 in 2.0 and 3.0), the header, the data. The
 * header is a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and a newline. It is parsed here by hand, through the
 * bounds-checked dvm_reader, accepting what a Python literal of that form
 * allows (any key order, either quote, spacing, trailing commas) and nothing
 * that would need an evaluator. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dvm/npy.h"
#include "npy_text.h"
#include "object.h"
#include "reader.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* numpy.save pads the header so the data starts on this boundary, and leaves
 * room for the first dim to grow to this many digits in place. */
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_ORDER '>'
#else
#define HOST_ORDER '<'
#endif

/* The dtypes dvm and NumPy share, by descr kind letter and item size. */
static const struct {
  char kind;
  uint8_t size;
  dvm_dtype dt;
} npy_types[] = {
    {'f', 2, DVM_F16}, {'f', 4, DVM_F32}, {'f', 8, DVM_F64}, {'i', 1, DVM_I8},
    {'i', 2, DVM_I16}, {'i', 4, DVM_I32}, {'i', 8, DVM_I64}, {'u', 1, DVM_U8},
    {'b', 1, DVM_BOOL}, {'u', 2, DVM_U16}, {'u', 4, DVM_U32}, {'u', 8, DVM_U64},
};
#define NPY_NTYPES (sizeof npy_types / sizeof npy_types[0])

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, KEY_COUNT };
static const char *const key_names[KEY_COUNT] = {"descr", "fortran_order", "shape"};

/* What the header says. */
typedef struct npy_header {
  dvm_dtype dt;
  bool swap;    /* the data's byte order is not the host's */
  bool fortran; /* the data is in column-major order */
  bool ucs4;    /* text ('U'): width code points an element; 'S': width bytes */
  size_t width;
  int rank;
  int64_t dims[DVM_MAX_RANK];
} npy_header;

/* The header text being parsed and what to name in errors. */
typedef struct hparse {
  dvm_reader r;
  const char *what;
  unsigned version; /* major format version */
  unsigned seen;    /* one bit per KEY_ */
} hparse;

/* ---- errors ---- */

static dvm_status *npy_error(const char *what, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *npy_error(const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(DVM_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return dvm_status_annotate(st, "%s", what);
}

static dvm_status *header_error(const hparse *h, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *header_error(const hparse *h, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(DVM_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return dvm_status_annotate(st, "%s: header", h->what);
}

static dvm_status *os_error(const char *path, const char *doing) {
  int err = errno;
  return dvm_status_new(err == ENOENT ? DVM_NOT_FOUND : DVM_IO, "%s: %s: %s", path, doing,
                        strerror(err));
}

/* Untrusted bytes made safe to print: non-printing bytes become \xNN and
 * long text is cut with "...". Returns buf. */
static const char *printable(char *buf, size_t size, const uint8_t *p, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char one[5];
    size_t k = 1;
    if (p[i] >= 0x20 && p[i] < 0x7f)
      one[0] = (char)p[i];
    else
      k = (size_t)snprintf(one, sizeof one, "\\x%02x", p[i]);
    if (o + k + 4 > size) { /* keep room for "..." and the NUL */
      memcpy(buf + o, "...", 4);
      return buf;
    }
    memcpy(buf + o, one, k);
    o += k;
  }
  buf[o] = 0;
  return buf;
}

/* ---- the header text ---- */

static int peek(const dvm_reader *r) { return dvm_reader_left(r) ? r->p[r->pos] : -1; }

static void skip_space(dvm_reader *r) {
  for (int c = peek(r); c == ' ' || c == '\t' || c == '\n' || c == '\r'; c = peek(r))
    dvm_reader_take(r, 1);
}

/* The rest of the header without its padding, printable, for "found ..."
 * in errors. */
static const char *rest(const hparse *h, char *buf, size_t size) {
  size_t end = h->r.len;
  while (end > h->r.pos && memchr(" \t\r\n", h->r.p[end - 1], 4)) end--;
  if (end == h->r.pos) return "the end";
  return printable(buf, size, h->r.p + h->r.pos, end - h->r.pos);
}

static dvm_status *unexpected(const hparse *h, const char *wanted) {
  char buf[32];
  return header_error(h, "expected %s at offset %zu, found %s", wanted, h->r.pos,
                      rest(h, buf, sizeof buf));
}

static dvm_status *expect(hparse *h, char c, const char *wanted) {
  skip_space(&h->r);
  if (peek(&h->r) != c) return unexpected(h, wanted);
  dvm_reader_take(&h->r, 1);
  return NULL;
}

/* A string literal in either quote; `*s`, `*n` get its contents. Escapes are
 * refused: no key or descr dvm reads needs one. */
static dvm_status *parse_string(hparse *h, const char *wanted, const uint8_t **s, size_t *n) {
  skip_space(&h->r);
  int q = peek(&h->r);
  if (q != '\'' && q != '"') return unexpected(h, wanted);
  size_t start = h->r.pos;
  dvm_reader_take(&h->r, 1);
  for (int c = peek(&h->r); c != q; c = peek(&h->r)) {
    if (c < 0 || c == '\n') return header_error(h, "unterminated string at offset %zu", start);
    if (c == '\\')
      return header_error(h, "escape in the string at offset %zu is not supported", start);
    dvm_reader_take(&h->r, 1);
  }
  dvm_reader_take(&h->r, 1);
  *s = h->r.p + start + 1;
  *n = h->r.pos - start - 2;
  return NULL;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool is_word(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The length of the Python value at the reader: up to the ',' or '}' that
 * ends it outside brackets and strings (so a structured descr such as
 * [('a', '<f4')] can be named in its error). */
static size_t value_length(const dvm_reader *r) {
  int depth = 0, quote = 0;
  size_t i = r->pos;
  for (; i < r->len; i++) {
    int c = r->p[i];
    if (quote) quote = c == quote ? 0 : quote;
    else if (c == '\'' || c == '"') quote = c;
    else if (c == '(' || c == '[' || c == '{') depth++;
    else if (depth > 0 && (c == ')' || c == ']' || c == '}')) depth--;
    else if (depth == 0 && (c == ',' || c == '}')) break;
  }
  return i - r->pos;
}

/* 'descr': a type string such as '<f4'. */
static dvm_status *parse_descr(hparse *h, npy_header *hd) {
  char buf[64];
  skip_space(&h->r);
  if (peek(&h->r) != '\'' && peek(&h->r) != '"')
    return header_error(h, "unsupported dtype descr %s (only plain dtypes, not structured ones)",
                        printable(buf, sizeof buf, h->r.p + h->r.pos, value_length(&h->r)));
  const uint8_t *s;
  size_t n, i = 0;
  dvm_status *st = parse_string(h, "a descr string", &s, &n);
  if (st) return st;
  char order = '=';
  if (n > 0 && memchr("<>|=", s[0], 4)) order = (char)s[i++];
  if (n - i >= 2 && (s[i] == 'U' || s[i] == 'S') && is_digit(s[i + 1])) { /* text: 'U' then a count */
    size_t w = 0;
    for (size_t k = i + 1; k < n; k++) {
      if (!is_digit(s[k]) || w > (SIZE_MAX - 9) / 40)
        return header_error(h, "unsupported dtype descr '%s'", printable(buf, sizeof buf, s, n));
      w = w * 10 + (size_t)(s[k] - '0');
    }
    /* NumPy never writes width 0 (an empty string is 'U1'); refused, since
     * a file of no data bytes would otherwise make any number of strings */
    if (w == 0)
      return header_error(h, "dtype descr '%s' has width 0 (NumPy writes at least 1)",
                          printable(buf, sizeof buf, s, n));
    hd->dt = DVM_STRING;
    hd->ucs4 = s[i] == 'U';
    hd->width = w;
    hd->swap = hd->ucs4 && (order == '<' || order == '>') && order != HOST_ORDER;
    return NULL;
  }
  if (n - i == 2 && is_digit(s[i + 1]))
    for (size_t k = 0; k < NPY_NTYPES; k++)
      if (npy_types[k].kind == s[i] && npy_types[k].size == s[i + 1] - '0') {
        hd->dt = npy_types[k].dt;
        hd->swap = npy_types[k].size > 1 && (order == '<' || order == '>') && order != HOST_ORDER;
        return NULL;
      }
  return header_error(h, "unsupported dtype descr '%s' (dvm reads f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1, and text: U<n> S<n>)",
                      printable(buf, sizeof buf, s, n));
}

/* 'fortran_order': True or False. */
static dvm_status *parse_bool(hparse *h, bool *out) {
  skip_space(&h->r);
  size_t start = h->r.pos;
  while (is_word(peek(&h->r))) dvm_reader_take(&h->r, 1);
  const uint8_t *w = h->r.p + start;
  size_t n = h->r.pos - start;
  if (n == 4 && memcmp(w, "True", 4) == 0) *out = true;
  else if (n == 5 && memcmp(w, "False", 5) == 0) *out = false;
  else if (n == 0) return unexpected(h, "True or False for fortran_order");
  else {
    char buf[32];
    return header_error(h, "fortran_order must be True or False, found %s",
                        printable(buf, sizeof buf, w, n));
  }
  return NULL;
}

/* One dim of the shape tuple: a decimal integer. */
static dvm_status *parse_dim(hparse *h, int i, int64_t *out) {
  size_t start = h->r.pos;
  bool neg = peek(&h->r) == '-';
  if (neg) dvm_reader_take(&h->r, 1);
  if (!is_digit(peek(&h->r))) return unexpected(h, "an integer dim");
  uint64_t v = 0;
  bool big = false;
  while (is_digit(peek(&h->r))) {
    unsigned d = (unsigned)(*dvm_reader_take(&h->r, 1) - '0');
    if (v > (uint64_t)(INT64_MAX - d) / 10) big = true;
    else v = v * 10 + d;
  }
  size_t end = h->r.pos;
  /* Python 2 wrote long ints as "3L"; numpy still reads such 1.0/2.0 files. */
  if (h->version <= 2 && peek(&h->r) == 'L') dvm_reader_take(&h->r, 1);
  char buf[32];
  const char *text = printable(buf, sizeof buf, h->r.p + start, end - start);
  if (neg && (v || big)) return header_error(h, "shape dim %d is negative (%s)", i, text);
  if (big) return header_error(h, "shape dim %d is too large (%s)", i, text);
  *out = (int64_t)v;
  return NULL;
}

/* 'shape': a tuple of ints; a 1-tuple needs its trailing comma, as in Python. */
static dvm_status *parse_shape(hparse *h, npy_header *hd) {
  dvm_status *st = expect(h, '(', "a tuple for shape");
  if (st) return st;
  int rank = 0;
  bool comma = false;
  for (;;) {
    skip_space(&h->r);
    if (peek(&h->r) == ')') break;
    if (rank == DVM_MAX_RANK)
      return header_error(h, "shape has more than %d dims", DVM_MAX_RANK);
    if ((st = parse_dim(h, rank, &hd->dims[rank]))) return st;
    rank++;
    skip_space(&h->r);
    comma = peek(&h->r) == ',';
    if (comma) dvm_reader_take(&h->r, 1);
    else if (peek(&h->r) != ')') return unexpected(h, "',' or ')' in the shape");
  }
  dvm_reader_take(&h->r, 1);
  if (rank == 1 && !comma)
    return header_error(h, "shape (%lld) is not a tuple: a 1-d shape needs a trailing comma",
                        (long long)hd->dims[0]);
  hd->rank = rank;
  return NULL;
}

static dvm_status *parse_entry(hparse *h, npy_header *hd) {
  const uint8_t *s;
  size_t n;
  dvm_status *st = parse_string(h, "a string key", &s, &n);
  if (st) return st;
  int k = 0;
  while (k < KEY_COUNT && !(strlen(key_names[k]) == n && memcmp(key_names[k], s, n) == 0)) k++;
  if (k == KEY_COUNT) {
    char buf[32];
    return header_error(h, "unknown key '%s'", printable(buf, sizeof buf, s, n));
  }
  if (h->seen & 1u << k) return header_error(h, "duplicate key '%s'", key_names[k]);
  h->seen |= 1u << k;
  if ((st = expect(h, ':', "':'"))) return st;
  switch (k) {
  case KEY_DESCR: return parse_descr(h, hd);
  case KEY_FORTRAN: return parse_bool(h, &hd->fortran);
  default: return parse_shape(h, hd);
  }
}

static dvm_status *parse_dict(hparse *h, npy_header *hd) {
  dvm_status *st = expect(h, '{', "'{'");
  if (st) return st;
  for (;;) {
    skip_space(&h->r);
    if (peek(&h->r) == '}') break;
    if ((st = parse_entry(h, hd))) return st;
    skip_space(&h->r);
    if (peek(&h->r) == ',') dvm_reader_take(&h->r, 1);
    else if (peek(&h->r) != '}') return unexpected(h, "',' or '}'");
  }
  dvm_reader_take(&h->r, 1);
  for (int k = 0; k < KEY_COUNT; k++)
    if (!(h->seen & 1u << k)) return header_error(h, "missing key '%s'", key_names[k]);
  skip_space(&h->r);
  if (dvm_reader_left(&h->r)) return unexpected(h, "only padding after the dict");
  return NULL;
}

/* Headers 1.0 and 2.0 are latin-1, but nothing dvm can read needs more than
 * ASCII, so other bytes are refused; 3.0 headers must be valid UTF-8. */
static dvm_status *check_encoding(const hparse *h) {
  const uint8_t *p = h->r.p;
  size_t n = h->r.len;
  for (size_t i = 0, k; i < n; i += k) {
    if (h->version < 3 && p[i] >= 0x80)
      return header_error(h,
                          "byte 0x%02x at offset %zu is not ASCII (format %u.0 headers are "
                          "latin-1; dvm reads their ASCII subset)",
                          p[i], i, h->version);
    if (!(k = dvm_utf8_len(p + i, n - i))) return header_error(h, "not valid UTF-8 at offset %zu", i);
  }
  return NULL;
}

/* ---- reading ---- */

/* The longest header read: numpy writes under 128 bytes for dvm's ranks
 * and itself refuses over 10000 unless told otherwise. */
#define MAX_HEADER 65536u
/* The most bytes a file's preamble and header take. */
#define MAX_PREFIX (12 + (size_t)MAX_HEADER)

/* Checks magic and version and returns the header text in *h. */
static dvm_status *read_preamble(dvm_reader *r, const char *what, hparse *h) {
  size_t size = dvm_reader_left(r), have = size < 6 ? size : 6;
  if (have && memcmp(r->p, npy_magic, have) != 0)
    return npy_error(what, "not a .npy file (bad magic)");
  if (size < 8) return npy_error(what, "truncated: %zu bytes, a .npy preamble needs 10", size);
  dvm_reader_take(r, 6);
  unsigned major = dvm_reader_u8(r), minor = dvm_reader_u8(r);
  if (major < 1 || major > 3 || minor != 0)
    return npy_error(what, "unsupported format version %u.%u (dvm reads 1.0, 2.0 and 3.0)", major,
                     minor);
  size_t len_size = major == 1 ? 2 : 4;
  if (size < 8 + len_size)
    return npy_error(what, "truncated: %zu bytes, a version %u.0 preamble needs %zu", size, major,
                     8 + len_size);
  uint32_t hlen = (uint32_t)dvm_reader_le(r, len_size);
  if (hlen > MAX_HEADER)
    return npy_error(what, "header length %u is over dvm's limit of %u bytes", hlen, MAX_HEADER);
  const uint8_t *text = dvm_reader_take(r, hlen);
  if (!text)
    return npy_error(what, "header length %u runs past the end (%zu bytes follow the preamble)",
                     hlen, size - 8 - len_size);
  *h = (hparse){dvm_reader_make(text, hlen), what, major, 0};
  return NULL;
}

/* Copies column-major `src` into row-major `dst`: walks dst in order and
 * keeps the matching src offset. */
static void fortran_to_c(uint8_t *dst, const uint8_t *src, const npy_header *hd, size_t isz,
                         int64_t numel) {
  size_t stride[DVM_MAX_RANK], s = isz, off = 0;
  int64_t idx[DVM_MAX_RANK] = {0};
  for (int k = 0; k < hd->rank; k++) {
    stride[k] = s;
    s *= (size_t)hd->dims[k];
  }
  for (int64_t i = 0; i < numel; i++, dst += isz) {
    memcpy(dst, src + off, isz);
    for (int k = hd->rank - 1; k >= 0; k--) {
      off += stride[k];
      if (++idx[k] < hd->dims[k]) break;
      off -= stride[k] * (size_t)hd->dims[k];
      idx[k] = 0;
    }
  }
}

static void swap_bytes(uint8_t *p, size_t isz, int64_t numel) {
  for (int64_t i = 0; i < numel; i++, p += isz)
    for (size_t a = 0, b = isz - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* Kernels may rely on bools being 0 or 1, so other bytes are refused. */
static dvm_status *check_bools(const uint8_t *p, int64_t numel, const char *what) {
  for (int64_t i = 0; i < numel; i++)
    if (p[i] > 1)
      return npy_error(what, "data: bool element %lld is %u, not 0 or 1", (long long)i, p[i]);
  return NULL;
}

/* The data bytes the header's shape and dtype need; `have` of them follow
 * the header, which must be exactly that (have = SIZE_MAX: not known yet). */
/* The bytes of one element. */
static size_t item_size(const npy_header *hd) {
  return hd->dt != DVM_STRING ? dvm_dtype_size(hd->dt) : hd->ucs4 ? 4 * hd->width : hd->width;
}

static dvm_status *check_data_size(const char *what, const npy_header *hd, size_t have,
                                   int64_t *numel, size_t *nbytes) {
  char shape[200];
  dvm_shape_format(shape, sizeof shape, hd->dt, hd->rank, hd->dims);
  dvm_status *st = dvm_shape_numel(hd->rank, hd->dims, numel);
  if (st) {
    dvm_status_free(st);
    return npy_error(what, "header: shape %s has more elements than int64 can count", shape);
  }
  if (dvm_mul_overflows((size_t)*numel, item_size(hd), nbytes) || *nbytes == SIZE_MAX)
    return npy_error(what, "header: shape %s is too large: its byte size overflows", shape);
  if (have != SIZE_MAX && have != *nbytes)
    return npy_error(what, "data is %zu bytes, shape %s needs %zu", have, shape, *nbytes);
  return NULL;
}

/* Text items into string tensor t (C order first, where they are not). */
static dvm_status *read_text(const uint8_t *src, const char *what, const npy_header *hd, int64_t numel, size_t nbytes,
                             dvm_tensor *t, dvm_tensor **out) {
  uint8_t *tmp = hd->fortran && nbytes ? malloc(nbytes) : NULL;
  dvm_status *st = NULL;
  if (hd->fortran && nbytes && !tmp) st = dvm_status_new(DVM_OUT_OF_MEMORY, "no memory for %zu bytes", nbytes);
  if (tmp) fortran_to_c(tmp, src, hd, item_size(hd), numel);
  if (!st) st = dvm_npy_text_read(tmp ? tmp : src, hd->width, hd->ucs4, hd->swap, t);
  free(tmp);
  if (st) {
    dvm_tensor_release(t);
    return dvm_status_annotate(st, "%s", what);
  }
  *out = t;
  return NULL;
}

/* Checks the data size against the shape, then makes the tensor. */
static dvm_status *read_data(dvm_reader *r, const char *what, const npy_header *hd,
                             dvm_tensor **out) {
  int64_t numel;
  size_t isz = item_size(hd), nbytes;
  dvm_status *st = check_data_size(what, hd, dvm_reader_left(r), &numel, &nbytes);
  if (st) return st;
  const uint8_t *src = dvm_reader_take(r, nbytes);
  dvm_tensor *t;
  if ((st = dvm_tensor_create(hd->dt, hd->rank, hd->dims, &t)))
    return dvm_status_annotate(st, "%s", what);
  if (hd->dt == DVM_STRING) return read_text(src, what, hd, numel, nbytes, t, out);
  uint8_t *dst = dvm_tensor_data(t);
  if (hd->fortran) fortran_to_c(dst, src, hd, isz, numel);
  else if (nbytes) memcpy(dst, src, nbytes);
  if (hd->swap) swap_bytes(dst, isz, numel);
  if (hd->dt == DVM_BOOL && (st = check_bools(dst, numel, what))) {
    dvm_tensor_release(t);
    return st;
  }
  *out = t;
  return NULL;
}

/* Preamble and header; r is left at the data. */
static dvm_status *read_header(dvm_reader *r, const char *what, npy_header *hd) {
  hparse h = {.what = what};
  dvm_status *st = read_preamble(r, what, &h);
  if (!st) st = check_encoding(&h);
  if (!st) st = parse_dict(&h, hd);
  return st;
}

dvm_status *dvm_npy_read_memory(const void *data, size_t size, const char *what,
                                dvm_tensor **out) {
  dvm_reader r = dvm_reader_make(data, size);
  if (!what) what = ".npy data";
  npy_header hd = {0};
  dvm_status *st = read_header(&r, what, &hd);
  if (!st) st = read_data(&r, what, &hd, out);
  return st;
}

/* Seconds a stream (pipe, FIFO) may send nothing before reading it fails:
 * a FIFO nobody writes to must not hold the reader forever. */
#define STREAM_WAIT_S 10

/* Reads up to n bytes of fd at buf, fewer only at the end of the file;
 * *got says how many. */
static dvm_status *read_upto(int fd, const char *path, bool stream, uint8_t *buf, size_t n,
                             size_t *got) {
  *got = 0;
  while (*got < n) {
    if (stream) {
      struct pollfd p = {fd, POLLIN, 0};
      int k = poll(&p, 1, STREAM_WAIT_S * 1000);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) return os_error(path, "cannot read");
      if (k == 0) return npy_error(path, "no data came for %d s", STREAM_WAIT_S);
    }
    ssize_t k = read(fd, buf + *got, n - *got);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return os_error(path, "cannot read");
    if (k == 0) break;
    *got += (size_t)k;
  }
  return NULL;
}

/* The bytes of preamble and header, from the first 12 of a file (or fewer:
 * then what read_header will say is wrong). */
static size_t prefix_length(const uint8_t *p, size_t n) {
  if (n < 12 || memcmp(p, npy_magic, 6) != 0 || p[6] < 1 || p[6] > 3) return n;
  uint32_t hlen = p[6] == 1 ? (uint32_t)(p[8] | p[9] << 8)
                            : (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 |
                                  (uint32_t)p[11] << 24;
  return hlen > MAX_HEADER ? n : (p[6] == 1 ? 10 : 12) + (size_t)hlen;
}

/* Reads no more than the header claims: preamble and header first, then a
 * regular file's size must be theirs plus the data's before the data is
 * read, and a stream (pipe, FIFO, device) is read for the data's bytes and
 * one more, to see that it ends there. The open never blocks (a FIFO
 * without a writer); a stream that stalls fails after STREAM_WAIT_S. */
dvm_status *dvm_npy_read_file(const char *path, dvm_tensor **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return os_error(path, "cannot open");
  struct stat sb;
  uint8_t *buf = malloc(MAX_PREFIX);
  size_t got = 0, more = 0;
  bool stream = false;
  dvm_status *st = NULL;
  if (!buf) st = dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory");
  else if (fstat(fd, &sb) != 0) st = os_error(path, "cannot stat");
  else if (!(st = read_upto(fd, path, stream = !S_ISREG(sb.st_mode), buf, 12, &got)) && got == 12)
    st = read_upto(fd, path, stream, buf + 12, prefix_length(buf, 12) - 12, &more);
  got += more;
  dvm_reader r = dvm_reader_make(buf, got);
  npy_header hd = {0};
  int64_t numel;
  size_t nbytes, head;
  if (!st && !(st = read_header(&r, path, &hd))) {
    head = got - dvm_reader_left(&r);
    size_t have = stream ? SIZE_MAX : (size_t)sb.st_size > head ? (size_t)sb.st_size - head : 0;
    if (!(st = check_data_size(path, &hd, have, &numel, &nbytes))) {
      uint8_t *all = realloc(buf, head + nbytes + 1);
      if (!all) st = dvm_status_new(DVM_OUT_OF_MEMORY, "%s: out of memory for %zu bytes of data", path, nbytes);
      else if (!(st = read_upto(fd, path, stream, (buf = all) + head, nbytes + stream, &more)))
        got = head + more; /* read_data says if it is short, or (a stream) longer */
    }
  }
  close(fd);
  if (!st) st = dvm_npy_read_memory(buf, got, path, out);
  free(buf);
  return st;
}

/* ---- writing ---- */

/* The descr numpy.save writes for `dt`; false when NumPy has no such dtype. */
static bool descr_of(dvm_dtype dt, char descr[4]) {
  for (size_t k = 0; k < NPY_NTYPES; k++)
    if (npy_types[k].dt == dt) {
      descr[0] = npy_types[k].size == 1 ? '|' : '<';
      descr[1] = npy_types[k].kind;
      descr[2] = (char)('0' + npy_types[k].size);
      descr[3] = 0;
      return true;
    }
  return false;
}

/* Appends to a fixed buffer that is known to be big enough: the header of a
 * tensor of rank <= DVM_MAX_RANK stays under 400 bytes. */
static void put(char *buf, size_t size, size_t *n, const char *fmt, ...) DVM_PRINTF(4, 5);
static void put(char *buf, size_t size, size_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *n, size - *n, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k < size - *n ? (size_t)k : size - *n - 1;
}

/* Builds preamble and header the way numpy.save does, so files written here
 * are byte-identical to numpy's. The header never needs version 2.0: with at
 * most DVM_MAX_RANK dims it is far below 64 KiB. Returns its length. */
static size_t make_header(char *buf, size_t size, const char *descr, int rank,
                          const int64_t *dims) {
  size_t n = 10;
  put(buf, size, &n, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < rank; i++) put(buf, size, &n, i ? ", %lld" : "%lld", (long long)dims[i]);
  put(buf, size, &n, rank == 1 ? ",), }" : "), }");
  if (rank > 0) {
    char first[24];
    int digits = snprintf(first, sizeof first, "%lld", (long long)dims[0]);
    put(buf, size, &n, "%*s", NPY_GROWTH_DIGITS - digits, "");
  }
  put(buf, size, &n, "%*s\n", (int)(NPY_ALIGN - (n + 1) % NPY_ALIGN), "");
  memcpy(buf, npy_magic, 6);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (char)((n - 10) & 0xff);
  buf[9] = (char)((n - 10) >> 8);
  return n;
}

/* A string tensor as 'U' items of its longest element's code points. */
static dvm_status *write_text(const dvm_tensor *t, void **out, size_t *size) {
  size_t chars, nbytes, hlen;
  char descr[32], head[512];
  dvm_status *st = dvm_npy_text_width(t, &chars);
  if (st) return st;
  if (!chars) chars = 1; /* as NumPy: '<U1' for an array of "" */
  snprintf(descr, sizeof descr, "<U%zu", chars);
  hlen = make_header(head, sizeof head, descr, dvm_tensor_rank(t), dvm_tensor_dims(t));
  if (dvm_mul_overflows((size_t)dvm_tensor_numel(t), 4 * chars, &nbytes) || nbytes > SIZE_MAX - hlen)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "tensor is too large to encode as .npy");
  uint8_t *buf = malloc(hlen + nbytes);
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory");
  memcpy(buf, head, hlen);
  dvm_npy_text_write(t, chars, buf + hlen);
  *out = buf;
  *size = hlen + nbytes;
  return NULL;
}

dvm_status *dvm_npy_write_memory(const dvm_tensor *t, void **out, size_t *size) {
  dvm_dtype dt = dvm_tensor_dtype(t);
  char descr[4], head[512];
  if (dvm_tensor_device(t) != DVM_DEVICE_CPU)
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "writing .npy needs a CPU tensor, this one is on %s",
                          dvm_device_name(dvm_tensor_device(t)));
  if (dt == DVM_STRING) return write_text(t, out, size);
  if (!descr_of(dt, descr))
    return dvm_status_new(DVM_INVALID_ARGUMENT,
                          "cannot write a %s tensor as .npy: .npy has no %s dtype (convert to f32)",
                          dvm_dtype_name(dt), dvm_dtype_name(dt));
  size_t hlen = make_header(head, sizeof head, descr, dvm_tensor_rank(t), dvm_tensor_dims(t));
  size_t nbytes = dvm_tensor_nbytes(t);
  if (nbytes > SIZE_MAX - hlen)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "tensor is too large to encode as .npy");
  uint8_t *buf = malloc(hlen + nbytes);
  if (!buf) return dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory");
  memcpy(buf, head, hlen);
  if (nbytes) memcpy(buf + hlen, dvm_tensor_data(t), nbytes);
  if (HOST_ORDER == '>' && dvm_dtype_size(dt) > 1)
    swap_bytes(buf + hlen, dvm_dtype_size(dt), dvm_tensor_numel(t));
  *out = buf;
  *size = hlen + nbytes;
  return NULL;
}

dvm_status *dvm_npy_write_file(const char *path, const dvm_tensor *t) {
  void *buf;
  size_t size;
  dvm_status *st = dvm_npy_write_memory(t, &buf, &size);
  if (st) return dvm_status_annotate(st, "%s", path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    st = os_error(path, "cannot create");
    free(buf);
    return st;
  }
  for (size_t done = 0; !st && done < size;) {
    ssize_t k = write(fd, (char *)buf + done, size - done);
    if (k >= 0) done += (size_t)k;
    else if (errno != EINTR) st = os_error(path, "cannot write");
  }
  if (close(fd) != 0 && !st) st = os_error(path, "cannot write");
  free(buf);
  return st;
}
