/* ONNX import (see onnx_import.h).
 *
 * Order of work: a scan of the protobuf wire format that bounds message
 * nesting (protobuf-c recurses once per level) and the memory the parse may
 * take; the parse, by protobuf-c, into the context's arena, so that tensor
 * bytes (raw_data, float_data, ...) are used where they lie, without a copy;
 * then the model, graph by graph, in file order: initializers, inputs, nodes
 * (whose subgraphs are imported when the node is, so they see exactly the
 * outer values defined before it), outputs, value_info. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "extdata.h"
#include "onnx_import.h"
#include "ops.h"

#define OPSET_MIN 1 /* each op's own floor is lowering's (min_opset) */
#define OPSET_MAX 28 /* the newest ONNX; lowering checks each op's semantics */
/* Protobuf message nesting (a subgraph is three levels: graph, node,
 * attribute), and the most attributes one node may carry. */
#define MAX_NESTING 100
#define MAX_ATTRS 256
/* What the parse may allocate, from an estimate made by the scan: legitimate
 * models take about their own size; the slack is for many small messages. */
#define PARSE_MEMORY_BASE ((size_t)256 << 20)
#define PARSE_MEMORY_FACTOR 16
/* No dim, and no product of dims (zeros left out), may pass this: shape
 * arithmetic downstream (strides, byte sizes) then cannot overflow. */
#define MAX_ELEMS ((int64_t)1 << 48)

typedef struct imp {
  dvmc_ctx *c;
  const char *model_dir; /* NULL: external data refused */
  int ml_opset;          /* the ai.onnx.ml opset imported, or 0 */
} imp;

/* ---- messages ---- */

/* A name quoted for a message: escaped, and cut at 80 characters. */
typedef struct qbuf {
  char s[100];
} qbuf;

static const char *quote(qbuf *b, const char *s, bool marks) {
  size_t o = 0;
  if (marks) b->s[o++] = '"';
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (o > 80) {
      memcpy(b->s + o, "...", 3);
      o += 3;
      break;
    }
    if (*p == '"' || *p == '\\') {
      b->s[o++] = '\\';
      b->s[o++] = (char)*p;
    } else if (*p < 0x20 || *p >= 0x7f) {
      o += (size_t)snprintf(b->s + o, 5, "\\x%02x", *p);
    } else {
      b->s[o++] = (char)*p;
    }
  }
  if (marks) b->s[o++] = '"';
  b->s[o] = 0;
  return b->s;
}
/* Q: a quoted name; P: escaped without quotes (op types). */
#define Q(s) quote(&(qbuf){{0}}, (s), true)
#define P(s) quote(&(qbuf){{0}}, (s), false)

static dvm_status *fail(dvm_code code, const char *fmt, ...) DVM_PRINTF(2, 3);
static dvm_status *fail(dvm_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  dvm_status *st = dvm_status_newv(code, fmt, ap);
  va_end(ap);
  return st;
}
#define CORRUPT(...) fail(DVM_CORRUPT, __VA_ARGS__)
#define UNSUPPORTED(...) fail(DVM_UNIMPLEMENTED, __VA_ARGS__)
#define OOM() dvm_status_new(DVM_OUT_OF_MEMORY, "out of memory")

static const char *str(const char *s) { return s ? s : ""; }

/* ---- element types ---- */

static const char *const onnx_type_names[] = {
    "UNDEFINED",      "FLOAT",          "UINT8",      "INT8",     "UINT16",       "INT16",
    "INT32",          "INT64",          "STRING",     "BOOL",     "FLOAT16",      "DOUBLE",
    "UINT32",         "UINT64",         "COMPLEX64",  "COMPLEX128", "BFLOAT16",   "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2",     "FLOAT8E5M2FNUZ", "UINT4", "INT4",        "FLOAT4E2M1",
    "FLOAT8E8M0",     "UINT2",          "INT2",       "FLOAT6E2M3", "FLOAT6E3M2",
};

typedef struct tname {
  char s[32];
} tname;

static const char *type_name(tname *b, int64_t t) {
  if (t >= 0 && t < (int64_t)(sizeof onnx_type_names / sizeof *onnx_type_names))
    return onnx_type_names[t];
  snprintf(b->s, sizeof b->s, "type %" PRId64, t);
  return b->s;
}
#define TYPE_NAME(t) type_name(&(tname){{0}}, (t))

bool dvmc_onnx_dtype(int64_t t, dvm_dtype *dt) {
  switch (t) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *dt = DVM_F32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *dt = DVM_F16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *dt = DVM_BF16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *dt = DVM_F64; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *dt = DVM_I8; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *dt = DVM_I16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *dt = DVM_I32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *dt = DVM_I64; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *dt = DVM_U8; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *dt = DVM_BOOL; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *dt = DVM_U16; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: *dt = DVM_U32; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: *dt = DVM_U64; return true;
  case ONNX__TENSOR_PROTO__DATA_TYPE__STRING: *dt = DVM_STRING; return true;
  default: return false;
  }
}

/* ---- the wire scan ---- */

typedef enum { SCAN_OK, SCAN_MALFORMED, SCAN_TOO_DEEP } scan_result;

static bool wire_varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= n) return false;
    uint8_t b = p[(*pos)++];
    if (shift < 64) r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

static void add_sat(size_t *a, size_t b) {
  if (__builtin_add_overflow(*a, b, a)) *a = SIZE_MAX;
}

/* Walks the message in p[0..n) as descriptor d describes it: checks that
 * every field is well framed, that messages nest at most MAX_NESTING deep,
 * and adds to *mem a bound of what unpacking will allocate. */
static scan_result wire_scan(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *d,
                             int depth, size_t *mem) {
  if (depth > MAX_NESTING) return SCAN_TOO_DEEP;
  add_sat(mem, d->sizeof_message + 16);
  size_t pos = 0;
  while (pos < n) {
    uint64_t tag, v;
    if (!wire_varint(p, n, &pos, &tag) || tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
      return SCAN_MALFORMED;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
    size_t before = pos;
    switch (tag & 7) {
    case 0:
      if (!wire_varint(p, n, &pos, &v)) return SCAN_MALFORMED;
      break;
    case 1:
      if (n - pos < 8) return SCAN_MALFORMED;
      pos += 8;
      break;
    case 5:
      if (n - pos < 4) return SCAN_MALFORMED;
      pos += 4;
      break;
    case 2:
      if (!wire_varint(p, n, &pos, &v) || v > n - pos) return SCAN_MALFORMED;
      before = pos;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        scan_result r = wire_scan(p + pos, (size_t)v, f->descriptor, depth + 1, mem);
        if (r != SCAN_OK) return r;
      } else if (f && f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES) {
        add_sat(mem, (size_t)v * 8); /* packed scalars: at most 8 bytes per wire byte */
      }
      pos += (size_t)v;
      break;
    default:
      return SCAN_MALFORMED; /* groups and reserved wire types */
    }
    /* The field's bytes, its slot in a repeated array, allocation rounding. */
    add_sat(mem, pos - before + 32);
  }
  return SCAN_OK;
}

/* ---- protobuf-c allocates in the context's arena ---- */

static void *pb_alloc(void *ud, size_t size) {
  dvmc_ctx *c = ud;
  void *p = dvm_arena_alloc(&c->arena, size ? size : 1, 1);
  if (!p) c->oom = true;
  return p;
}

static void pb_free(void *ud, void *p) { (void)ud, (void)p; }

/* ---- tensors ---- */

static dvm_status *check_path(const char *tn, const char *loc) {
  if (!loc[0]) return CORRUPT("tensor %s: external data has no location", Q(tn));
  if (loc[0] == '/')
    return CORRUPT("tensor %s: external data location %s is an absolute path; it must be "
                   "relative to the model's directory",
                   Q(tn), Q(loc));
  for (const char *p = loc; *p;) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.')
      return CORRUPT("tensor %s: external data location %s leaves the model's directory", Q(tn),
                     Q(loc));
    p += len + (end ? 1 : 0);
  }
  return NULL;
}

static bool parse_u64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (!*s) return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || __builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
      return false;
  }
  *out = v;
  return v <= INT64_MAX;
}

/* Opens `path`, a file under `dir` named by a model, only once its real path
 * (every link resolved) is known to lie inside `dir`'s real path: the text
 * check above cannot see a link in the model's folder that leads out of it.
 * The resolved path is opened with O_NOFOLLOW, so its last component cannot
 * have been swapped for a link since. On success `*fd` is open and `*sb` its
 * status; the caller closes it. */
static dvm_status *open_inside(const char *dir, const char *path, const char *tn, int *fd,
                               struct stat *sb) {
  char *root = realpath(dir, NULL), *real = root ? realpath(path, NULL) : NULL;
  dvm_status *st = NULL;
  if (!real) {
    int err = errno;
    st = fail(err == ENOENT ? DVM_NOT_FOUND : err == ENOMEM ? DVM_OUT_OF_MEMORY : DVM_IO,
              "tensor %s: cannot open external data file %s: %s", Q(tn), Q(path), strerror(err));
  } else {
    size_t n = strlen(root);
    bool inside = strcmp(root, "/") == 0 || (strncmp(real, root, n) == 0 && real[n] == '/');
    if (!inside)
      st = CORRUPT("tensor %s: external data path %s escapes the model's directory (it resolves "
                   "to %s, outside %s)",
                   Q(tn), Q(path), Q(real), Q(root));
    else if ((*fd = open(real, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)) < 0 ||
             fstat(*fd, sb) != 0) {
      int err = errno;
      st = fail(err == ENOENT ? DVM_NOT_FOUND : DVM_IO,
                "tensor %s: cannot open external data file %s: %s", Q(tn), Q(path),
                strerror(err));
    }
  }
  free(real);
  free(root);
  return st;
}

/* Finds nbytes of external data (data_location EXTERNAL) in its file,
 * mapped: read only where a pass reads it (extdata.h). */
static dvm_status *read_external(imp *im, const Onnx__TensorProto *tp, const char *tn,
                                 size_t nbytes, const void **data) {
  const char *loc = NULL;
  uint64_t offset = 0, length = 0;
  bool has_offset = false, has_length = false;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const char *k = str(tp->external_data[i]->key), *v = str(tp->external_data[i]->value);
    bool *seen = NULL, loc_seen = loc != NULL;
    uint64_t *num = NULL;
    if (strcmp(k, "location") == 0) {
      seen = &loc_seen;
      loc = v;
    } else if (strcmp(k, "offset") == 0) {
      seen = &has_offset;
      num = &offset;
    } else if (strcmp(k, "length") == 0) {
      seen = &has_length;
      num = &length;
    } else {
      continue; /* checksum, basepath...: not needed */
    }
    if (*seen) return CORRUPT("tensor %s: external data key %s given twice", Q(tn), Q(k));
    *seen = true;
    if (num && !parse_u64(v, num))
      return CORRUPT("tensor %s: external data %s is %s, not a byte count", Q(tn), k, Q(v));
  }
  if (!loc) return CORRUPT("tensor %s: external data has no location", Q(tn));
  dvm_status *st = check_path(tn, loc);
  if (st) return st;
  if (!im->model_dir)
    return UNSUPPORTED("tensor %s: external data file %s, but the model was given in memory "
                       "without its directory",
                       Q(tn), Q(loc));
  if (has_length && length != nbytes)
    return CORRUPT("tensor %s: external data length is %" PRIu64 " bytes, expected %zu", Q(tn),
                   length, nbytes);
  size_t plen = strlen(im->model_dir) + strlen(loc) + 2;
  char *path = malloc(plen);
  if (!path) return OOM();
  snprintf(path, plen, "%s/%s", im->model_dir, loc);
  int fd = -1;
  struct stat sb;
  st = open_inside(im->model_dir, path, tn, &fd, &sb);
  if (st) {
    /* named by open_inside */
  } else if (!S_ISREG(sb.st_mode)) {
    st = CORRUPT("tensor %s: external data file %s is not a regular file", Q(tn), Q(path));
  } else if ((uint64_t)sb.st_size < offset || (uint64_t)sb.st_size - offset < nbytes) {
    st = CORRUPT("tensor %s: external data (%zu bytes at offset %" PRIu64
                 ") lies past the end of %s (%lld bytes)",
                 Q(tn), nbytes, offset, Q(path), (long long)sb.st_size);
  } else if (nbytes) {
    const uint8_t *base;
    st = dvmc_extdata_map(im->c, path, fd, (size_t)sb.st_size, &base);
    if (st) st = dvm_status_annotate(st, "tensor %s", Q(tn));
    else *data = base + offset;
  }
  if (fd >= 0) close(fd);
  free(path);
  return st;
}

/* The typed field a dtype's data is stored in, when not in raw_data. */
static const char *typed_field_name(dvm_dtype dt) {
  switch (dt) {
  case DVM_F32: return "float_data";
  case DVM_F64: return "double_data";
  case DVM_I64: return "int64_data";
  case DVM_U32: case DVM_U64: return "uint64_data";
  case DVM_STRING: return "string_data";
  default: return "int32_data";
  }
}

/* Narrows int32_data to the dtype's width, checking each value's range. */
static dvm_status *narrow_int32(imp *im, const Onnx__TensorProto *tp, const char *tn,
                                dvm_dtype dt, size_t nbytes, const void **data) {
  int32_t lo, hi;
  switch (dt) {
  case DVM_I8: lo = INT8_MIN, hi = INT8_MAX; break;
  case DVM_U8: lo = 0, hi = UINT8_MAX; break;
  case DVM_BOOL: lo = 0, hi = 1; break;
  case DVM_I16: lo = INT16_MIN, hi = INT16_MAX; break;
  default: lo = 0, hi = UINT16_MAX; break; /* u16; f16, bf16: the bits */
  }
  uint8_t *buf = dvm_arena_alloc(&im->c->arena, nbytes ? nbytes : 1, 1);
  if (!buf) return OOM();
  size_t size = dvm_dtype_size(dt);
  for (size_t i = 0; i < tp->n_int32_data; i++) {
    int32_t v = tp->int32_data[i];
    if (v < lo || v > hi)
      return CORRUPT("tensor %s: int32_data[%zu] = %" PRId32 " is out of range for %s", Q(tn), i,
                     v, dvm_dtype_name(dt));
    if (size == 1) {
      buf[i] = (uint8_t)v;
    } else {
      uint16_t u = (uint16_t)v;
      memcpy(buf + 2 * i, &u, 2);
    }
  }
  *data = buf;
  return NULL;
}

/* Narrows uint64_data to u32, checking each value's range. */
static dvm_status *narrow_uint64(imp *im, const Onnx__TensorProto *tp, const char *tn,
                                 size_t nbytes, const void **data) {
  uint32_t *buf = dvm_arena_alloc(&im->c->arena, nbytes ? nbytes / 4 : 1, 4);
  if (!buf) return OOM();
  for (size_t i = 0; i < tp->n_uint64_data; i++) {
    uint64_t v = tp->uint64_data[i];
    if (v > UINT32_MAX)
      return CORRUPT("tensor %s: uint64_data[%zu] = %" PRIu64 " is out of range for u32", Q(tn), i, v);
    buf[i] = (uint32_t)v;
  }
  *data = buf;
  return NULL;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static void swap_bytes(uint8_t *p, size_t nbytes, size_t size) {
  for (size_t i = 0; size > 1 && i + size <= nbytes; i += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      uint8_t t = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = t;
    }
}
#endif

/* A string tensor's elements: string_data, one entry each. */
static dvm_status *read_strings(imp *im, const Onnx__TensorProto *tp, const char *tn, const dvmc_tensor *shape,
                                const char *field, int64_t numel, bool external, dvmc_tensor **out) {
  if (external || tp->has_raw_data)
    return CORRUPT("tensor %s of type STRING has its data in %s, expected string_data", Q(tn),
                   external ? "an external file" : "raw_data");
  if (numel && (!field || strcmp(field, "string_data")))
    return CORRUPT("tensor %s of type STRING has its data in %s, expected string_data", Q(tn), field ? field : "no field");
  if (tp->n_string_data != (size_t)numel)
    return CORRUPT("tensor %s: string_data has %zu values, expected %" PRId64, Q(tn), tp->n_string_data, numel);
  const char **s = dvm_arena_alloc(&im->c->arena, numel ? (size_t)numel : 1, sizeof *s);
  size_t *lens = dvm_arena_alloc(&im->c->arena, numel ? (size_t)numel : 1, sizeof *lens);
  if (!s || !lens) return OOM();
  for (int64_t i = 0; i < numel; i++) {
    s[i] = (const char *)tp->string_data[i].data;
    lens[i] = tp->string_data[i].len;
  }
  if (!(*out = dvmc_tensor_strings(im->c, shape->rank, shape->dims, (size_t)numel, s, lens))) return OOM();
  return NULL;
}

static dvm_status *read_tensor(imp *im, const Onnx__TensorProto *tp, const char *tn,
                               dvmc_tensor **out) {
  int64_t et = tp->has_data_type ? tp->data_type : 0;
  dvm_dtype dt;
  if (et == 0) return CORRUPT("tensor %s has no data type", Q(tn));
  if (!dvmc_onnx_dtype(et, &dt))
    return UNSUPPORTED("tensor %s has element type %s, which dvm does not support", Q(tn),
                       TYPE_NAME(et));
  if (tp->n_dims > DVM_MAX_RANK)
    return UNSUPPORTED("tensor %s has rank %zu, more than dvm's limit of %d", Q(tn), tp->n_dims,
                       DVM_MAX_RANK);
  dvmc_tensor *t = dvm_arena_alloc(&im->c->arena, 1, sizeof *t);
  if (!t) return OOM();
  t->dtype = dt;
  t->rank = (int)tp->n_dims;
  int64_t numel = 1, extent = 1; /* extent: the product without the zeros */
  for (size_t i = 0; i < tp->n_dims; i++) {
    int64_t d = tp->dims[i];
    if (d < 0) return CORRUPT("tensor %s: dim %zu is %" PRId64 ", negative", Q(tn), i, d);
    t->dims[i] = d;
    if (d && (__builtin_mul_overflow(extent, d, &extent) || extent > MAX_ELEMS))
      return CORRUPT("tensor %s: its shape overflows dvm's limit of 2^48 elements", Q(tn));
    numel *= d;
  }
  size_t nbytes = (size_t)numel * dvm_dtype_size(dt);
  t->nbytes = nbytes;

  const struct {
    size_t n;
    const char *name;
  } typed[] = {
      {tp->n_float_data, "float_data"}, {tp->n_int32_data, "int32_data"},
      {tp->n_int64_data, "int64_data"}, {tp->n_double_data, "double_data"},
      {tp->n_uint64_data, "uint64_data"}, {tp->n_string_data, "string_data"},
  };
  const char *field = NULL;
  size_t count = 0;
  for (size_t i = 0; i < sizeof typed / sizeof *typed; i++) {
    if (!typed[i].n) continue;
    if (field)
      return CORRUPT("tensor %s has data in both %s and %s", Q(tn), field, typed[i].name);
    field = typed[i].name;
    count = typed[i].n;
  }
  bool external = tp->has_data_location &&
                  tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (tp->has_data_location && !external &&
      tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
    return CORRUPT("tensor %s has unknown data_location %d", Q(tn), (int)tp->data_location);
  if (external && (tp->has_raw_data || field))
    return CORRUPT("tensor %s has external data and also %s", Q(tn),
                   field ? field : "raw_data");
  if (!external && tp->n_external_data)
    return CORRUPT("tensor %s has external_data entries but data_location is not EXTERNAL",
                   Q(tn));

  if (dt == DVM_STRING) return read_strings(im, tp, tn, t, field, numel, external, out);
  const void *data = NULL;
  if (external) {
    dvm_status *st = read_external(im, tp, tn, nbytes, &data);
    if (st) return st;
  } else if (tp->has_raw_data) {
    if (field) return CORRUPT("tensor %s has data in both raw_data and %s", Q(tn), field);
    if (tp->raw_data.len != nbytes)
      return CORRUPT("tensor %s: raw_data has %zu bytes, expected %zu (%" PRId64 " elements of %s)",
                     Q(tn), tp->raw_data.len, nbytes, numel, dvm_dtype_name(dt));
    data = tp->raw_data.data;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    swap_bytes(tp->raw_data.data, nbytes, dvm_dtype_size(dt));
#endif
  } else if (field) {
    if (strcmp(field, typed_field_name(dt)) != 0)
      return CORRUPT("tensor %s of type %s has its data in %s, expected %s or raw_data", Q(tn),
                     TYPE_NAME(et), field, typed_field_name(dt));
    if (count != (size_t)numel)
      return CORRUPT("tensor %s: %s has %zu values, expected %" PRId64, Q(tn), field, count,
                     numel);
    switch (dt) {
    case DVM_F32: data = tp->float_data; break;
    case DVM_F64: data = tp->double_data; break;
    case DVM_I64: data = tp->int64_data; break;
    case DVM_I32: data = tp->int32_data; break;
    case DVM_U64: data = tp->uint64_data; break;
    case DVM_U32: {
      dvm_status *st = narrow_uint64(im, tp, tn, nbytes, &data);
      if (st) return st;
      break;
    }
    default: {
      dvm_status *st = narrow_int32(im, tp, tn, dt, nbytes, &data);
      if (st) return st;
    }
    }
  } else if (numel) {
    return CORRUPT("tensor %s has no data (%" PRId64 " elements of %s expected)", Q(tn), numel,
                   dvm_dtype_name(dt));
  }
  /* dvm's bool is a byte that is 0 or 1. The bytes are ours (arena). */
  if (dt == DVM_BOOL && data)
    for (size_t i = 0; i < nbytes; i++) ((uint8_t *)data)[i] = ((const uint8_t *)data)[i] != 0;
  t->data = data;
  *out = t;
  return NULL;
}

/* Makes v a constant holding t. */
static dvm_status *set_const(imp *im, dvmc_value *v, const dvmc_tensor *t) {
  v->typed = true;
  v->dtype = t->dtype;
  v->rank = t->rank;
  v->constant = t;
  for (int i = 0; i < t->rank; i++) {
    v->dims[i] = dvmc_const(im->c->exprs, t->dims[i]);
    if (!v->dims[i]) return OOM();
  }
  return NULL;
}

/* ---- types ---- */

/* A dim_param that names a dim: an identifier. Exporters write "?" (Paddle)
 * for "any size", on several dims that need not be equal. */
static bool identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789") == strlen(s);
}

/* Checks a declared type, and when v is given sets its dtype and dims.
 * `role` and `name` say what the type belongs to. A dim_value below 1 is
 * an unknown dim, as a missing one is, and so is a dim_param that is not an
 * identifier: exporters write -1 (Paddle), 0 or "?" for "any size" where a
 * named dim belongs. Each such dim is its own fresh symbol. */
/* The tensor type inside tp: tp itself, or a sequence's or optional's
 * element type (a sequence of tensors, an optional tensor or an optional
 * sequence of tensors: what dvm holds as tuples); *kind says which. */
static dvm_status *tensor_type_of(imp *im, const Onnx__TypeProto *tp, const char *role, const char *name,
                                  dvmc_kind *kind, const Onnx__TypeProto__Tensor **out) {
  const char *what = NULL;
  *kind = DVMC_TENSOR;
  for (int level = 0;; level++) {
    switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE: *out = tp->tensor_type; return NULL;
    case ONNX__TYPE_PROTO__VALUE__NOT_SET:
      if (!level) {
        *out = NULL;
        return NULL;
      }
      return CORRUPT("%s %s: a %s type without an element type", role, Q(name), dvmc_kind_name(*kind));
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
      if (*kind == DVMC_SEQUENCE || *kind == DVMC_OPT_SEQUENCE) what = "sequence of sequences";
      else if (*kind == DVMC_OPT_TENSOR) *kind = DVMC_OPT_SEQUENCE;
      else *kind = DVMC_SEQUENCE;
      tp = tp->sequence_type->elem_type;
      break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
      if (level) what = *kind == DVMC_SEQUENCE ? "sequence of optionals" : "optional of an optional";
      *kind = DVMC_OPT_TENSOR;
      tp = tp->optional_type->elem_type;
      break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
      /* a sequence of maps out of the graph: ZipMap's, a tuple (lower_strings.c) */
      if (*kind != DVMC_SEQUENCE || !strcmp(role, "input")) {
        what = "map";
        break;
      }
      *out = NULL;
      return NULL;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: what = "sparse tensor"; break;
    case ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE: what = "opaque"; break;
    default: return CORRUPT("%s %s has an unknown kind of type", role, Q(name));
    }
    if (what)
      return UNSUPPORTED("%s %s has %s %s type; dvm supports only tensors, sequences of tensors and "
                         "optional tensors or sequences", role, Q(name), strchr("aeiou", what[0]) ? "an" : "a", what);
    if (!tp) return CORRUPT("%s %s: a %s type without an element type", role, Q(name), dvmc_kind_name(*kind));
  }
}

static dvm_status *read_type(imp *im, const Onnx__TypeProto *tp, const char *role,
                             const char *name, dvmc_value *v) {
  if (!tp) return NULL;
  dvmc_kind kind;
  const Onnx__TypeProto__Tensor *tt = NULL;
  dvm_status *st = tensor_type_of(im, tp, role, name, &kind, &tt);
  if (st || !tt) return st;
  if (v) v->kind = kind;
  dvm_dtype dt = DVM_F32;
  int64_t et = tt->has_elem_type ? tt->elem_type : 0;
  if (et && !dvmc_onnx_dtype(et, &dt))
    return UNSUPPORTED("%s %s has element type %s, which dvm does not support", role, Q(name),
                       TYPE_NAME(et));
  const Onnx__TensorShapeProto *shape = tt->shape;
  if (shape && shape->n_dim > DVM_MAX_RANK)
    return UNSUPPORTED("%s %s has rank %zu, more than dvm's limit of %d", role, Q(name),
                       shape->n_dim, DVM_MAX_RANK);
  for (size_t i = 0; shape && i < shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) continue;
    if (d->dim_value > MAX_ELEMS)
      return CORRUPT("%s %s: dim %zu is %" PRId64 ", more than dvm's limit of 2^48", role,
                     Q(name), i, d->dim_value);
  }
  if (!v) return NULL;
  v->typed = et != 0;
  v->dtype = dt;
  if (!shape || kind != DVMC_TENSOR) return NULL; /* the tensors of a sequence or optional: shapes at run time */
  v->rank = (int)shape->n_dim;
  for (size_t i = 0; i < shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
    const dvmc_expr *e;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value > 0)
      e = dvmc_const(im->c->exprs, d->dim_value);
    else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
             identifier(d->dim_param))
      e = dvmc_sym(im->c->exprs, d->dim_param);
    else
      e = dvmc_sym_fresh(im->c->exprs, "unk");
    if (!e) return OOM();
    v->dims[i] = e;
  }
  return NULL;
}

/* Keeps the type tp declares for v (a graph output, value_info) for the
 * check after inference; the first declaration of a value counts. */
static dvm_status *declare(imp *im, dvmc_value *v, const Onnx__TypeProto *tp, const char *role) {
  if (!v || v->declared || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) return NULL;
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  dvmc_declared *d = dvm_arena_alloc(&im->c->arena, 1, sizeof *d);
  if (!d) return OOM();
  d->role = role;
  d->typed = tt->has_elem_type && tt->elem_type && dvmc_onnx_dtype(tt->elem_type, &d->dtype);
  d->rank = tt->shape ? (int)tt->shape->n_dim : -1; /* read_type checked the rank */
  for (int i = 0; i < d->rank; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
    d->dims[i] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value > 0
                     ? dim->dim_value : -1;
  }
  v->declared = d;
  return NULL;
}

/* ---- attributes ---- */

static const char *const attr_type_names[] = {
    "UNDEFINED", "FLOAT",   "INT",    "STRING",        "TENSOR",         "GRAPH",      "FLOATS",
    "INTS",      "STRINGS", "TENSORS", "GRAPHS",       "SPARSE_TENSOR",  "SPARSE_TENSORS",
    "TYPE_PROTO", "TYPE_PROTOS",
};

static const char *attr_type_name(tname *b, int t) {
  if (t >= 0 && t < (int)(sizeof attr_type_names / sizeof *attr_type_names))
    return attr_type_names[t];
  snprintf(b->s, sizeof b->s, "type %d", t);
  return b->s;
}
#define ATTR_TYPE_NAME(t) attr_type_name(&(tname){{0}}, (t))

/* The attribute types of the standard ops (opsets 11 to 21), one letter per
 * type: f FLOAT, i INT, s STRING, t TENSOR, g GRAPH, F FLOATS, I INTS,
 * S STRINGS, x SPARSE_TENSOR, p TYPE_PROTO. Attributes not listed are not
 * checked; lowering reads them through the typed getters. */
static const struct {
  const char *op, *attrs;
} op_attrs[] = {
    {"AffineGrid", "align_corners=i"},
    {"ArgMax", "axis=i keepdims=i select_last_index=i"},
    {"ArgMin", "axis=i keepdims=i select_last_index=i"},
    {"AveragePool",
     "auto_pad=s ceil_mode=i count_include_pad=i dilations=I kernel_shape=I pads=I strides=I"},
    {"BatchNormalization", "epsilon=f momentum=f training_mode=i"},
    {"Bernoulli", "dtype=i seed=f"},
    {"Binarizer", "threshold=f"},
    {"BitCast", "to=i"},
    {"BitShift", "direction=s"},
    {"BlackmanWindow", "output_datatype=i periodic=i"},
    {"Cast", "saturate=i to=i"},
    {"CastLike", "saturate=i"},
    {"CategoryMapper", "cats_int64s=I cats_strings=S default_int64=i default_string=s"},
    {"Celu", "alpha=f"},
    {"CenterCropPad", "axes=I"},
    {"Clip", "max=f min=f"},
    {"Col2Im", "dilations=I pads=I strides=I"},
    {"Compress", "axis=i"},
    {"Concat", "axis=i"},
    {"ConcatFromSequence", "axis=i new_axis=i"},
    {"Constant", "sparse_value=x value=t value_float=f value_floats=F value_int=i value_ints=I "
                 "value_string=s value_strings=S"},
    {"ConstantOfShape", "value=t"},
    {"Conv", "auto_pad=s dilations=I group=i kernel_shape=I pads=I strides=I"},
    {"ConvInteger", "auto_pad=s dilations=I group=i kernel_shape=I pads=I strides=I"},
    {"ConvTranspose", "auto_pad=s dilations=I group=i kernel_shape=I output_padding=I "
                      "output_shape=I pads=I strides=I"},
    {"CumSum", "exclusive=i reverse=i"},
    {"DFT", "axis=i inverse=i onesided=i"},
    {"DeformConv", "dilations=I group=i kernel_shape=I offset_group=i pads=I strides=I"},
    {"DepthToSpace", "blocksize=i mode=s"},
    {"DequantizeLinear", "axis=i block_size=i"},
    {"Dropout", "ratio=f seed=i"},
    {"Einsum", "equation=s"},
    {"Elu", "alpha=f"},
    {"EyeLike", "dtype=i k=i"},
    {"FeatureVectorizer", "inputdimensions=I"},
    {"Flatten", "axis=i"},
    {"GRU", "activation_alpha=F activation_beta=F activations=S clip=f direction=s "
            "hidden_size=i layout=i linear_before_reset=i"},
    {"Gather", "axis=i"},
    {"GatherElements", "axis=i"},
    {"GatherND", "batch_dims=i"},
    {"Gelu", "approximate=s"},
    {"Gemm", "alpha=f beta=f transA=i transB=i"},
    {"GlobalLpPool", "p=i"},
    {"GridSample", "align_corners=i mode=s padding_mode=s"},
    {"GroupNormalization", "epsilon=f num_groups=i stash_type=i"},
    {"HammingWindow", "output_datatype=i periodic=i"},
    {"HannWindow", "output_datatype=i periodic=i"},
    {"HardSigmoid", "alpha=f beta=f"},
    {"Hardmax", "axis=i"},
    {"If", "else_branch=g then_branch=g"},
    {"Imputer", "imputed_value_floats=F imputed_value_int64s=I replaced_value_float=f replaced_value_int64=i"},
    {"LabelEncoder", "classes_strings=S default_float=f default_int64=i default_string=s default_tensor=t "
                     "keys_floats=F keys_int64s=I keys_strings=S keys_tensor=t values_floats=F values_int64s=I "
                     "values_strings=S values_tensor=t"},
    {"InstanceNormalization", "epsilon=f"},
    {"IsInf", "detect_negative=i detect_positive=i"},
    {"LRN", "alpha=f beta=f bias=f size=i"},
    {"LSTM", "activation_alpha=F activation_beta=F activations=S clip=f direction=s "
             "hidden_size=i input_forget=i layout=i"},
    {"LayerNormalization", "axis=i epsilon=f stash_type=i"},
    {"LeakyRelu", "alpha=f"},
    {"LinearClassifier", "classlabels_ints=I classlabels_strings=S coefficients=F intercepts=F multi_class=i "
                         "post_transform=s"},
    {"LinearRegressor", "coefficients=F intercepts=F post_transform=s targets=i"},
    {"LogSoftmax", "axis=i"},
    {"Loop", "body=g"},
    {"LpNormalization", "axis=i p=i"},
    {"LpPool", "auto_pad=s ceil_mode=i dilations=I kernel_shape=I p=i pads=I strides=I"},
    {"MaxPool", "auto_pad=s ceil_mode=i dilations=I kernel_shape=I pads=I storage_order=i "
                "strides=I"},
    {"MaxRoiPool", "pooled_shape=I spatial_scale=f"},
    {"MaxUnpool", "kernel_shape=I pads=I strides=I"},
    {"MeanVarianceNormalization", "axes=I"},
    {"MelWeightMatrix", "output_datatype=i"},
    {"Mod", "fmod=i"},
    {"Multinomial", "dtype=i sample_size=i seed=f"},
    {"NonMaxSuppression", "center_point_box=i"},
    {"Normalizer", "norm=s"},
    {"OneHot", "axis=i"},
    {"OneHotEncoder", "cats_int64s=I cats_strings=S zeros=i"},
    {"Optional", "type=p"},
    {"Pad", "mode=s pads=I value=f"},
    {"QLinearConv", "auto_pad=s dilations=I group=i kernel_shape=I pads=I strides=I"},
    {"QuantizeLinear", "axis=i block_size=i output_dtype=i saturate=i"},
    {"RNN", "activation_alpha=F activation_beta=F activations=S clip=f direction=s "
            "hidden_size=i layout=i"},
    {"RandomNormal", "dtype=i mean=f scale=f seed=f shape=I"},
    {"RandomNormalLike", "dtype=i mean=f scale=f seed=f"},
    {"RandomUniform", "dtype=i high=f low=f seed=f shape=I"},
    {"RandomUniformLike", "dtype=i high=f low=f seed=f"},
    {"ReduceL1", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceL2", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceLogSum", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceLogSumExp", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceMax", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceMean", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceMin", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceProd", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceSum", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"ReduceSumSquare", "axes=I keepdims=i noop_with_empty_axes=i"},
    {"RegexFullMatch", "pattern=s"},
    {"Reshape", "allowzero=i"},
    {"Resize", "antialias=i axes=I coordinate_transformation_mode=s cubic_coeff_a=f "
               "exclude_outside=i extrapolation_value=f keep_aspect_ratio_policy=s mode=s "
               "nearest_mode=s"},
    {"ReverseSequence", "batch_axis=i time_axis=i"},
    {"RoiAlign", "coordinate_transformation_mode=s mode=s output_height=i output_width=i "
                 "sampling_ratio=i spatial_scale=f"},
    {"SVMClassifier", "classlabels_ints=I classlabels_strings=S coefficients=F kernel_params=F kernel_type=s "
                      "post_transform=s prob_a=F prob_b=F rho=F support_vectors=F vectors_per_class=I"},
    {"SVMRegressor", "coefficients=F kernel_params=F kernel_type=s n_supports=i one_class=i post_transform=s rho=F "
                     "support_vectors=F"},
    {"Scaler", "offset=F scale=F"},
    {"Scan", "body=g num_scan_inputs=i scan_input_axes=I scan_input_directions=I "
             "scan_output_axes=I scan_output_directions=I"},
    {"Scatter", "axis=i"},
    {"ScatterElements", "axis=i reduction=s"},
    {"ScatterND", "reduction=s"},
    {"Selu", "alpha=f gamma=f"},
    {"SequenceEmpty", "dtype=i"},
    {"Shape", "end=i start=i"},
    {"Shrink", "bias=f lambd=f"},
    {"Slice", "axes=I ends=I starts=I"},
    {"Softmax", "axis=i"},
    {"SpaceToDepth", "blocksize=i"},
    {"Split", "axis=i num_outputs=i split=I"},
    {"SplitToSequence", "axis=i keepdims=i"},
    {"StringNormalizer", "case_change_action=s is_case_sensitive=i locale=s stopwords=S"},
    {"StringSplit", "delimiter=s maxsplit=i"},
    {"Squeeze", "axes=I"},
    {"ThresholdedRelu", "alpha=f"},
    {"TreeEnsemble", "aggregate_function=i leaf_targetids=I leaf_weights=t membership_values=t n_targets=i "
                     "nodes_falseleafs=I nodes_falsenodeids=I nodes_featureids=I nodes_hitrates=t "
                     "nodes_missing_value_tracks_true=I nodes_modes=t nodes_splits=t nodes_trueleafs=I "
                     "nodes_truenodeids=I post_transform=i tree_roots=I"},
    {"TreeEnsembleClassifier", "base_values=F base_values_as_tensor=t class_ids=I class_nodeids=I class_treeids=I "
                               "class_weights=F class_weights_as_tensor=t classlabels_int64s=I "
                               "classlabels_strings=S nodes_falsenodeids=I nodes_featureids=I nodes_hitrates=F "
                               "nodes_hitrates_as_tensor=t nodes_missing_value_tracks_true=I nodes_modes=S "
                               "nodes_nodeids=I nodes_treeids=I nodes_truenodeids=I nodes_values=F "
                               "nodes_values_as_tensor=t post_transform=s"},
    {"TreeEnsembleRegressor", "aggregate_function=s base_values=F base_values_as_tensor=t n_targets=i "
                              "nodes_falsenodeids=I nodes_featureids=I nodes_hitrates=F nodes_hitrates_as_tensor=t "
                              "nodes_missing_value_tracks_true=I nodes_modes=S nodes_nodeids=I nodes_treeids=I "
                              "nodes_truenodeids=I nodes_values=F nodes_values_as_tensor=t post_transform=s "
                              "target_ids=I target_nodeids=I target_treeids=I target_weights=F "
                              "target_weights_as_tensor=t"},
    {"TfIdfVectorizer", "max_gram_length=i max_skip_count=i min_gram_length=i mode=s ngram_counts=I "
                        "ngram_indexes=I pool_int64s=I pool_strings=S weights=F"},
    {"TopK", "axis=i largest=i sorted=i"},
    {"Transpose", "perm=I"},
    {"Trilu", "upper=i"},
    {"Unique", "axis=i sorted=i"},
    {"Unsqueeze", "axes=I"},
    {"Upsample", "mode=s scales=F"},
    {"ZipMap", "classlabels_int64s=I classlabels_strings=S"},
};

/* The expected type of op's attribute `name`, or -1 when not listed. */
static int expected_attr_type(const char *op, const char *name) {
  const char *spec = NULL;
  for (size_t i = 0; i < sizeof op_attrs / sizeof *op_attrs; i++)
    if (op_attrs[i].op[0] == op[0] && strcmp(op_attrs[i].op, op) == 0) {
      spec = op_attrs[i].attrs;
      break;
    }
  size_t len = strlen(name);
  for (const char *p = spec; p && *p;) {
    const char *eq = strchr(p, '=');
    if ((size_t)(eq - p) == len && memcmp(p, name, len) == 0) {
      switch (eq[1]) {
      case 'f': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
      case 'i': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
      case 's': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
      case 't': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
      case 'g': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
      case 'F': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
      case 'I': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
      case 'S': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
      case 'x': return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR;
      default: return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
      }
    }
    p = eq + 2;
    while (*p == ' ') p++;
  }
  return -1;
}

/* A copy of attribute bytes as a C string; NUL bytes inside are refused. */
static dvm_status *attr_string(imp *im, const char *an, ProtobufCBinaryData b, const char **out) {
  if (b.len && memchr(b.data, 0, b.len))
    return CORRUPT("attribute %s: a string contains a NUL byte", Q(an));
  char *s = dvm_arena_alloc(&im->c->arena, b.len + 1, 1);
  if (!s) return OOM();
  if (b.len) memcpy(s, b.data, b.len);
  *out = s;
  return NULL;
}

static dvm_status *import_graph(imp *im, const Onnx__GraphProto *gp, const char *name,
                                dvmc_graph *parent, dvmc_graph **out);

static dvm_status *read_attr(imp *im, dvmc_graph *g, const char *op,
                             const Onnx__AttributeProto *ap, dvmc_attr *a) {
  const char *an = a->name;
  if (ap->ref_attr_name && ap->ref_attr_name[0])
    return UNSUPPORTED("attribute %s refers to %s (ref_attr_name), which is only meaningful "
                       "inside a function",
                       Q(an), Q(ap->ref_attr_name));
  if (!ap->has_type || ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
    return CORRUPT("attribute %s has no type", Q(an));
  int type = (int)ap->type;
  int want = expected_attr_type(op, an);
  if (want >= 0 && want != type)
    return CORRUPT("attribute %s has type %s, expected %s", Q(an), ATTR_TYPE_NAME(type),
                   ATTR_TYPE_NAME(want));
  dvm_status *st = NULL;
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    a->type = DVMC_ATTR_FLOAT;
    a->f = ap->f;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    a->type = DVMC_ATTR_INT;
    a->i = ap->i;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    a->type = DVMC_ATTR_STRING;
    st = attr_string(im, an, ap->s, &a->s);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    a->type = DVMC_ATTR_TENSOR;
    if (!ap->t) return CORRUPT("attribute %s has type TENSOR but no tensor", Q(an));
    dvmc_tensor *t = NULL;
    st = read_tensor(im, ap->t, ap->t->name && ap->t->name[0] ? ap->t->name : an, &t);
    a->t = t;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    a->type = DVMC_ATTR_GRAPH;
    if (!ap->g) return CORRUPT("attribute %s has type GRAPH but no graph", Q(an));
    st = import_graph(im, ap->g, an, g, &a->g);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: {
    a->type = DVMC_ATTR_FLOATS;
    if (ap->n_floats > INT_MAX) return CORRUPT("attribute %s has too many floats", Q(an));
    double *f = dvm_arena_alloc(&im->c->arena, ap->n_floats ? ap->n_floats : 1, sizeof *f);
    if (!f) return OOM();
    for (size_t i = 0; i < ap->n_floats; i++) f[i] = ap->floats[i];
    a->floats = f;
    a->n = (int)ap->n_floats;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    a->type = DVMC_ATTR_INTS;
    if (ap->n_ints > INT_MAX) return CORRUPT("attribute %s has too many ints", Q(an));
    a->ints = ap->ints;
    a->n = (int)ap->n_ints;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
    a->type = DVMC_ATTR_STRINGS;
    if (ap->n_strings > INT_MAX) return CORRUPT("attribute %s has too many strings", Q(an));
    const char **s = dvm_arena_alloc(&im->c->arena, ap->n_strings ? ap->n_strings : 1, sizeof *s);
    if (!s) return OOM();
    for (size_t i = 0; i < ap->n_strings && !st; i++) st = attr_string(im, an, ap->strings[i], &s[i]);
    a->strings = s;
    a->n = (int)ap->n_strings;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: {
    a->type = DVMC_ATTR_TYPE;
    if (!ap->tp) return CORRUPT("attribute %s has type TYPE_PROTO but no type", Q(an));
    dvmc_value *t = dvm_arena_alloc(&im->c->arena, 1, sizeof *t);
    if (!t) return OOM();
    t->name = an;
    t->rank = -1;
    st = read_type(im, ap->tp, "attribute", an, t);
    a->type_of = t;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
    return UNSUPPORTED("attribute %s has type %s, which dvm does not support", Q(an),
                       ATTR_TYPE_NAME(type));
  default: return CORRUPT("attribute %s has unknown type %d", Q(an), type);
  }
  return st ? dvm_status_annotate(st, "attribute %s", Q(an)) : NULL;
}

/* Reads a node's attributes into attrs (n of them), refusing nameless and
 * repeated names. */
static dvm_status *read_attrs(imp *im, dvmc_graph *g, const char *op,
                              const Onnx__NodeProto *np, dvmc_attr **out, int *nout) {
  if (np->n_attribute > MAX_ATTRS)
    return CORRUPT("has %zu attributes, more than %d", np->n_attribute, MAX_ATTRS);
  int n = (int)np->n_attribute;
  dvmc_attr *attrs = dvm_arena_alloc(&im->c->arena, n ? (size_t)n : 1, sizeof *attrs);
  if (!attrs) return OOM();
  for (int i = 0; i < n; i++) {
    const char *an = np->attribute[i]->name;
    if (!an || !an[0]) return CORRUPT("attribute %d has no name", i);
    for (int j = 0; j < i; j++)
      if (strcmp(attrs[j].name, an) == 0) return CORRUPT("attribute %s is given twice", Q(an));
    attrs[i].name = an;
    dvm_status *st = read_attr(im, g, op, np->attribute[i], &attrs[i]);
    if (st) return st;
  }
  *out = attrs;
  *nout = n;
  return NULL;
}

/* ---- nodes ---- */

/* Says where an already defined value came from, for messages. */
static const char *defined_where(const dvmc_value *v, const dvmc_graph *g, char *buf, size_t size) {
  const char *scope = "";
  bool local = v->id < g->nvalues && g->values[v->id] == v;
  if (!local) scope = " of an enclosing graph";
  if (v->producer)
    snprintf(buf, size, "by node %s (%s)%s", Q(v->producer->name), P(v->producer->op), scope);
  else if (v->constant)
    snprintf(buf, size, "as a constant%s", scope);
  else
    snprintf(buf, size, "as an input%s", scope);
  return buf;
}

static dvm_status *check_new_name(const dvmc_graph *g, const char *role, const char *name) {
  const dvmc_value *old = dvmc_value_find(g, name);
  char where[300];
  if (old)
    return CORRUPT("%s %s is already defined %s", role, Q(name),
                   defined_where(old, g, where, sizeof where));
  return NULL;
}

/* A Constant node becomes a constant value (no node). */
static dvm_status *import_constant(imp *im, dvmc_graph *g, const Onnx__NodeProto *np) {
  if (np->n_input) return CORRUPT("has %zu inputs, expected none", np->n_input);
  if (np->n_output != 1 || !np->output[0] || !np->output[0][0])
    return CORRUPT("needs exactly one named output");
  const char *name = np->output[0];
  dvm_status *st = check_new_name(g, "output", name);
  if (st) return st;
  dvmc_attr *attrs = NULL;
  int nattrs = 0;
  st = read_attrs(im, g, "Constant", np, &attrs, &nattrs);
  if (st) return st;
  if (nattrs != 1)
    return CORRUPT("has %d attributes, expected exactly one value attribute", nattrs);
  const dvmc_attr *a = &attrs[0];
  dvmc_tensor *t = NULL;
  if (strcmp(a->name, "value") == 0) {
    t = (dvmc_tensor *)a->t;
  } else if (strcmp(a->name, "value_string") == 0 || strcmp(a->name, "value_strings") == 0) {
    bool list = a->type == DVMC_ATTR_STRINGS;
    int64_t n = list ? a->n : 1;
    if (!(t = dvmc_tensor_strings(im->c, list, &n, (size_t)n, list ? a->strings : &a->s, NULL))) return OOM();
  } else {
    t = dvm_arena_alloc(&im->c->arena, 1, sizeof *t);
    if (!t) return OOM();
    if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_floats") == 0) {
      bool list = a->type == DVMC_ATTR_FLOATS;
      size_t n = list ? (size_t)a->n : 1;
      float *f = dvm_arena_alloc(&im->c->arena, n ? n : 1, sizeof *f);
      if (!f) return OOM();
      for (size_t i = 0; i < n; i++) f[i] = (float)(list ? a->floats[i] : a->f);
      t->dtype = DVM_F32;
      t->data = f;
      t->nbytes = n * sizeof *f;
      t->rank = list;
      if (list) t->dims[0] = (int64_t)n;
    } else if (strcmp(a->name, "value_int") == 0 || strcmp(a->name, "value_ints") == 0) {
      bool list = a->type == DVMC_ATTR_INTS;
      size_t n = list ? (size_t)a->n : 1;
      t->dtype = DVM_I64;
      t->data = list ? (const void *)a->ints : (const void *)&a->i;
      t->nbytes = n * sizeof(int64_t);
      t->rank = list;
      if (list) t->dims[0] = (int64_t)n;
    } else {
      return CORRUPT("has unknown attribute %s, expected a value attribute", Q(a->name));
    }
  }
  dvmc_value *v = dvmc_value_new(im->c, g, name);
  if (!v) return OOM();
  return set_const(im, v, t);
}

/* Why an ai.onnx.ml op that dvm lacks is refused, where the reason is
 * known. */
static const char *ml_refusal(const char *op) {
  static const struct {
    const char *op, *why;
  } why[] = {
      {"DictVectorizer", ": its input is a map, which dvm does not have"},
  };
  for (size_t i = 0; i < sizeof why / sizeof *why; i++)
    if (!strcmp(op, why[i].op)) return why[i].why;
  return "";
}

static dvm_status *import_node(imp *im, dvmc_graph *g, const Onnx__NodeProto *np) {
  const char *op = str(np->op_type), *domain = str(np->domain);
  if (!op[0]) return CORRUPT("has no op_type");
  /* ONNX Runtime's contrib ops, and the classical machine learning ops */
  const char *other = !strcmp(domain, "com.microsoft") ? "com.microsoft" : !strcmp(domain, "ai.onnx.ml") ? "ai.onnx.ml" : NULL;
  if (domain[0] && strcmp(domain, "ai.onnx") != 0 && !other)
    return UNSUPPORTED("is in domain %s, which dvm does not support (only the default ONNX "
                       "domain, com.microsoft and ai.onnx.ml)",
                       Q(domain));
  if (other && !strcmp(other, "ai.onnx.ml") && !dvmc_op_find(other, op))
    return UNSUPPORTED("op %s of domain ai.onnx.ml is not supported%s", Q(op), ml_refusal(op));
  if (!other && !im->c->opset)
    return CORRUPT("is in the default ONNX domain, but the model imports no opset of it");
  if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2)
    return CORRUPT("has too many inputs or outputs");
  if (strcmp(op, "Constant") == 0) return import_constant(im, g, np);
  dvmc_node *n = dvmc_node_new(im->c, g, op, (int)np->n_input, (int)np->n_output);
  if (!n) return OOM();
  if (np->name && np->name[0]) n->name = np->name;
  if (other) {
    n->domain = other;
    n->def = dvmc_op_find(n->domain, op);
    if (!strcmp(other, "ai.onnx.ml")) n->opset = im->ml_opset; /* the ops' first opsets are this domain's */
  }
  dvm_status *st = NULL;
  for (int i = 0; i < n->nin && !st; i++) {
    const char *in = str(np->input[i]);
    if (!in[0]) continue; /* an omitted optional input */
    n->in[i] = dvmc_value_find(g, in);
    if (!n->in[i])
      st = CORRUPT("input %d %s is not defined (by a graph input, an initializer or an earlier "
                   "node)",
                   i, Q(in));
    else
      n->in[i]->uses++;
  }
  if (!st) st = read_attrs(im, g, op, np, &n->attrs, &n->nattrs);
  /* Outputs last: a node's subgraphs do not see its own outputs. */
  for (int i = 0; i < n->nout && !st; i++) {
    const char *name = str(np->output[i]);
    if (!name[0]) continue; /* an omitted optional output */
    st = check_new_name(g, "output", name);
    if (st) break;
    n->out[i] = dvmc_value_new(im->c, g, name);
    if (!n->out[i]) return OOM();
    n->out[i]->producer = n;
  }
  return st;
}

/* ---- graphs ---- */

static dvm_status *import_graph(imp *im, const Onnx__GraphProto *gp, const char *name,
                                dvmc_graph *parent, dvmc_graph **out) {
  dvmc_ctx *c = im->c;
  if (gp->n_node > INT_MAX / 2 || gp->n_input > INT_MAX / 2 || gp->n_output > INT_MAX / 2)
    return CORRUPT("graph %s is too large", Q(gp->name));
  dvmc_graph *g = dvmc_graph_new(c, gp->name && gp->name[0] ? gp->name : name, parent);
  if (!g) return OOM();
  if (gp->n_sparse_initializer)
    return UNSUPPORTED("graph %s has %zu sparse initializers; dvm does not support sparse "
                       "tensors",
                       Q(g->name), gp->n_sparse_initializer);
  dvm_status *st = NULL;
  for (size_t i = 0; i < gp->n_initializer && !st; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    const char *tn = str(tp->name);
    dvmc_tensor *t = NULL;
    if (!tn[0]) return CORRUPT("initializer %zu has no name", i);
    st = check_new_name(g, "initializer", tn);
    if (!st) st = read_tensor(im, tp, tn, &t);
    if (st) break;
    dvmc_value *v = dvmc_value_new(c, g, tn);
    if (!v) return OOM();
    st = set_const(im, v, t);
  }
  if (st) return st;

  g->inputs = dvm_arena_alloc(&c->arena, gp->n_input ? gp->n_input : 1, sizeof *g->inputs);
  g->outputs = dvm_arena_alloc(&c->arena, gp->n_output ? gp->n_output : 1, sizeof *g->outputs);
  if (!g->inputs || !g->outputs) return OOM();
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *vn = str(vi->name);
    if (!vn[0]) return CORRUPT("input %zu has no name", i);
    const dvmc_value *old = dvmc_value_find(g, vn);
    bool own = old && old->id < g->nvalues && g->values[old->id] == old;
    if (own && old->constant && !old->producer) {
      /* Listed among the inputs and given as an initializer (IR < 4 lists
       * every initializer there): a constant. */
      st = read_type(im, vi->type, "input", vn, NULL);
      if (st) return st;
      continue;
    }
    st = check_new_name(g, "input", vn);
    if (st) return st;
    if (!parent && !vi->type) return CORRUPT("input %s has no type", Q(vn));
    dvmc_value *v = dvmc_value_new(c, g, vn);
    if (!v) return OOM();
    st = read_type(im, vi->type, "input", vn, v);
    if (st) return st;
    g->inputs[g->ninputs++] = v;
  }

  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    int before = g->nnodes;
    st = import_node(im, g, np);
    if (st) {
      const char *op = str(np->op_type);
      if (g->nnodes > before) /* the node was made: its name is final */
        return dvm_status_annotate(st, "node %s (%s)", Q(g->nodes[before]->name), P(op));
      if (np->name && np->name[0]) return dvm_status_annotate(st, "node %s (%s)", Q(np->name), P(op));
      return dvm_status_annotate(st, "node %zu of graph %s (%s)", i, Q(g->name), P(op));
    }
  }

  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    const char *vn = str(vi->name);
    if (!vn[0]) return CORRUPT("output %zu has no name", i);
    st = read_type(im, vi->type, "output", vn, NULL);
    if (st) return st;
    dvmc_value *v = dvmc_value_find(g, vn);
    if (!v) return CORRUPT("output %s is not defined", Q(vn));
    if ((st = declare(im, v, vi->type, "output"))) return st;
    v->uses++;
    g->outputs[g->noutputs++] = v;
  }
  if (!parent && !g->noutputs) return CORRUPT("graph %s has no outputs", Q(g->name));
  for (size_t i = 0; i < gp->n_value_info; i++) {
    const Onnx__ValueInfoProto *vi = gp->value_info[i];
    if ((st = read_type(im, vi->type, "value_info", str(vi->name), NULL))) return st;
    dvmc_value *v = dvmc_value_find(g, str(vi->name));
    if (v && v->producer && (st = declare(im, v, vi->type, "value_info"))) return st;
  }
  *out = g;
  return NULL;
}

/* ---- the model ---- */

static dvm_status *import_model(imp *im, const uint8_t *data, size_t size, dvmc_graph **out) {
  size_t mem = 0, limit = PARSE_MEMORY_BASE;
  scan_result r = wire_scan(data, size, &onnx__model_proto__descriptor, 0, &mem);
  if (r == SCAN_TOO_DEEP)
    return CORRUPT("protobuf messages nest deeper than %d levels", MAX_NESTING);
  if (r != SCAN_OK)
    return CORRUPT("not an ONNX model: the protobuf encoding is malformed (a truncated file, "
                   "or not a protobuf file)");
  add_sat(&limit, size > SIZE_MAX / PARSE_MEMORY_FACTOR ? SIZE_MAX : size * PARSE_MEMORY_FACTOR);
  if (mem > limit)
    return CORRUPT("the file would take %zu bytes of memory to parse, more than %zu allowed for "
                   "its size",
                   mem, limit);
  ProtobufCAllocator alloc = {pb_alloc, pb_free, im->c};
  Onnx__ModelProto *m = onnx__model_proto__unpack(&alloc, size, data);
  if (!m) return im->c->oom ? OOM() : CORRUPT("not an ONNX model: the protobuf parse failed");
  if (!m->graph) return CORRUPT("not an ONNX model: it has no graph");
  if (m->n_training_info)
    return UNSUPPORTED("the model has training info, which dvm does not support");
  if (m->n_functions)
    return UNSUPPORTED("the model defines %zu local functions, which dvm does not support",
                       m->n_functions);
  int64_t opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const char *dom = str(m->opset_import[i]->domain);
    if (!strcmp(dom, "ai.onnx.ml")) im->ml_opset = m->opset_import[i]->has_version ? (int)m->opset_import[i]->version : 0;
    if (dom[0] && strcmp(dom, "ai.onnx") != 0) continue; /* refused when a node uses it */
    int64_t v = m->opset_import[i]->has_version ? m->opset_import[i]->version : 0;
    /* skl2onnx lists the default domain twice, with one version */
    if (opset >= 0 && v != opset)
      return CORRUPT("the model imports the default domain's opset twice, as %" PRId64 " and %" PRId64, opset, v);
    opset = v;
    if (opset < OPSET_MIN || opset > OPSET_MAX)
      return UNSUPPORTED("opset %" PRId64 " of the default domain is not supported (dvm takes "
                         "opsets %d to %d)",
                         opset, OPSET_MIN, OPSET_MAX);
  }
  /* A model of other domains only (ai.onnx.ml, ...) imports on, so that its
   * first node of a domain dvm lacks is refused by name; opset 0 marks a
   * default-domain node there as corrupt (import_node). */
  if (opset < 0 && !m->n_opset_import) return CORRUPT("the model imports no opset of the default ONNX domain");
  im->c->opset = opset < 0 ? 0 : (int)opset;
  return import_graph(im, m->graph, "main", NULL, out);
}

static dvm_status *import_bytes(dvmc_ctx *c, const char *what, const void *data, size_t size,
                                const char *model_dir, dvmc_graph **out) {
  imp im = {c, NULL};
  if (model_dir) {
    im.model_dir = dvm_arena_strdup(&c->arena, model_dir);
    if (!im.model_dir) return OOM();
    c->model_dir = im.model_dir;
  }
  dvm_status *st = import_model(&im, data, size, out);
  if (st) *out = NULL;
  return dvm_status_annotate(st, "%s", what);
}

dvm_status *dvmc_import_onnx_memory(dvmc_ctx *c, const void *data, size_t size,
                                    const char *model_dir, dvmc_graph **out) {
  *out = NULL;
  return import_bytes(c, "<memory>", data, size, model_dir, out);
}

dvm_status *dvmc_import_onnx(dvmc_ctx *c, const char *path, dvmc_graph **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return fail(err == ENOENT ? DVM_NOT_FOUND : DVM_IO, "%s: cannot open: %s", path,
                strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return fail(DVM_INVALID_ARGUMENT, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size, got = 0;
  uint8_t *buf = malloc(size ? size : 1);
  dvm_status *st = buf ? NULL : OOM();
  while (!st && got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      st = fail(DVM_IO, "%s: read failed: %s", path, r < 0 ? strerror(errno) : "file shrank");
    else
      got += (size_t)r;
  }
  close(fd);
  if (!st) {
    /* External data lives beside the model. */
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    st = dir ? import_bytes(c, path, buf, size, dir, out) : OOM();
    free(dir);
  }
  free(buf);
  return st;
}

/* A value file (TensorProto, SequenceProto) against its message's wire
 * format and the memory bound of a parse, before protobuf-c unpacks it. */
static dvm_status *scan_value_file(const void *data, size_t size, const ProtobufCMessageDescriptor *d,
                                   const char *kind) {
  size_t mem = 0, limit = PARSE_MEMORY_BASE;
  scan_result r = wire_scan(data, size, d, 0, &mem);
  add_sat(&limit, size > SIZE_MAX / PARSE_MEMORY_FACTOR ? SIZE_MAX : size * PARSE_MEMORY_FACTOR);
  if (r != SCAN_OK || mem > limit) return CORRUPT("not an ONNX %s: the protobuf encoding is malformed", kind);
  return NULL;
}

/* A SequenceProto's items (an OptionalProto parses as one), each a tensor
 * or a sequence; wire_scan bounded the nesting. */
static dvm_status *read_sequence(imp *im, const Onnx__SequenceProto *sp, dvmc_pbvalue *out) {
  switch (sp->has_elem_type ? sp->elem_type : 0) {
  case ONNX__SEQUENCE_PROTO__DATA_TYPE__UNDEFINED:
  case ONNX__SEQUENCE_PROTO__DATA_TYPE__TENSOR:
  case ONNX__SEQUENCE_PROTO__DATA_TYPE__SEQUENCE: break;
  default:
    return UNSUPPORTED("a sequence or optional of elem_type %d (sparse tensors, maps or optionals) is not supported",
                       (int)sp->elem_type);
  }
  if (sp->n_tensor_values && sp->n_sequence_values)
    return CORRUPT("a sequence holds both tensors and sequences");
  size_t n = sp->n_tensor_values + sp->n_sequence_values;
  if (n > (1 << 24)) return UNSUPPORTED("a sequence of %zu items is more than dvm's limit of 2^24", n);
  dvmc_pbvalue *items = dvm_arena_alloc(&im->c->arena, n ? n : 1, sizeof *items);
  if (!items) return OOM();
  for (size_t i = 0; i < n; i++) {
    dvm_status *st;
    if (i < sp->n_tensor_values) {
      const Onnx__TensorProto *tp = sp->tensor_values[i];
      dvmc_tensor *t = NULL;
      if (tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return UNSUPPORTED("a tensor with external data is not supported");
      st = read_tensor(im, tp, "item", &t);
      items[i].tensor = t;
    } else {
      st = read_sequence(im, sp->sequence_values[i], &items[i]);
    }
    if (st) return dvm_status_annotate(st, "item %zu", i);
  }
  out->tensor = NULL;
  out->n = (int)n;
  out->items = items;
  return NULL;
}

dvm_status *dvmc_import_sequence_memory(dvmc_ctx *c, const void *data, size_t size, const char *what,
                                        const dvmc_pbvalue **out) {
  imp im = {c, NULL};
  *out = NULL;
  dvm_status *st = scan_value_file(data, size, &onnx__sequence_proto__descriptor, "SequenceProto or OptionalProto");
  if (!st) {
    ProtobufCAllocator alloc = {pb_alloc, pb_free, c};
    Onnx__SequenceProto *sp = onnx__sequence_proto__unpack(&alloc, size, data);
    dvmc_pbvalue *v = dvm_arena_alloc(&c->arena, 1, sizeof *v);
    if (!sp) st = c->oom ? OOM() : CORRUPT("not an ONNX SequenceProto or OptionalProto: the protobuf parse failed");
    else if (!v) st = OOM();
    else if (!(st = read_sequence(&im, sp, v))) *out = v;
  }
  return dvm_status_annotate(st, "%s", what ? what : "<memory>");
}

dvm_status *dvmc_import_tensor_memory(dvmc_ctx *c, const void *data, size_t size, const char *what,
                                      const dvmc_tensor **out) {
  imp im = {c, NULL};
  *out = NULL;
  dvm_status *st = scan_value_file(data, size, &onnx__tensor_proto__descriptor, "TensorProto");
  if (!st) {
    ProtobufCAllocator alloc = {pb_alloc, pb_free, c};
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(&alloc, size, data);
    dvmc_tensor *t = NULL;
    if (!tp) st = c->oom ? OOM() : CORRUPT("not an ONNX TensorProto: the protobuf parse failed");
    else if (tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
      st = UNSUPPORTED("a tensor file with external data is not supported");
    else if (!(st = read_tensor(&im, tp, tp->name && tp->name[0] ? tp->name : "tensor", &t)))
      *out = t;
  }
  return dvm_status_annotate(st, "%s", what ? what : "<memory>");
}
