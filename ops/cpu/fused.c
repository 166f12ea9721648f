/* The fused elementwise kernel: one pass over memory for a chain of
 * elementwise ops, the program being the kernel table entry's payload (the
 * format and every rule: docs/fused.md; opcodes: fused.h).
 *
 *   fused (in: X0 .. Xn-1; no attrs) -> Y0 .. Ym-1
 *       n (1..16) and m (1..8) as the program declares, with its dtypes:
 *       inputs and outputs f32 f16 bf16 (computed in f32), i32 i64
 *       (computed in i64: arithmetic wraps, stores to i32 keep the low
 *       bits) or bool. Every input is broadcast to the outputs' shape, the
 *       broadcast of all inputs (shape function "broadcast"; for a program
 *       of one input, "same" gives the same shape).
 *
 * The payload is validated on every call (microseconds: it is at most 4 KiB
 * of fixed-size records), so a corrupt or hostile one is an error naming
 * the rule, never a crash or a read outside it.
 *
 * Execution: each thread takes a range of the output and walks it in blocks
 * of a few thousand elements; per block every instruction runs as one
 * vectorized loop over registers that are block-sized buffers on the
 * thread's stack (L1-sized in all), so intermediates never reach memory.
 * Loads of same-shape f32/i64 inputs read the input in place; loads of
 * scalars and constants are done once per thread; broadcast inputs are
 * gathered a row segment at a time, or copied from pos mod their size when
 * they repeat along the leading dims. A register stored last in an output's
 * dtype is that output's memory, its store nothing; other stores run where
 * the program has them or, when an output is the memory of an input, at
 * the end of the block
 * (so an output may be the same memory as a same-shape input). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops/cpu/elementwise.h"
#include "ops/cpu/elementwise_math.h"
#include "ops/cpu/fused.h"
#include "ops/cpu/kernels.h"
#include "ops/kargs.h"
#include "shapefuncs/shape.h"

/* Register types: the compute classes. */
enum { RT_F32, RT_I64, RT_BOOL, RT_COUNT };

static const size_t rt_size[RT_COUNT] = {4, 8, 1};
static const dvm_dtype rt_dtype[RT_COUNT] = {DVM_F32, DVM_I64, DVM_BOOL};

/* The register type of a dtype a program may load or store, or -1. */
static int rt_of_io(int dt) {
  switch (dt) {
  case DVM_F32: case DVM_F16: case DVM_BF16: return RT_F32;
  case DVM_I32: case DVM_I64: return RT_I64;
  case DVM_BOOL: return RT_BOOL;
  default: return -1;
  }
}

static int rt_of_reg(int dt) {
  return dt == DVM_F32 ? RT_F32 : dt == DVM_I64 ? RT_I64 : dt == DVM_BOOL ? RT_BOOL : -1;
}

/* ---- loops over a block: d[i] = f(a[i], b[i], c[i]) ---- */

typedef void (*floop)(int64_t n, void *d, const void *a, const void *b, const void *c);

#define LOOP(name, TA, TD, EXPR)                                                              \
  DVM_EW_CLONES static void name(int64_t n, void *pd, const void *pa, const void *pb,        \
                                 const void *pc) {                                           \
    const TA *a = pa, *b = pb;                                                               \
    TD *d = pd;                                                                              \
    (void)b;                                                                                 \
    (void)pc;                                                                                \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                    \
      TA x = a[i];                                                                           \
      d[i] = (TD)(EXPR);                                                                     \
    }                                                                                        \
  }
/* b[i] is read only by the loops that use y */
#define Y b[i]
#define WRAP(OP) (int64_t)((uint64_t)x OP (uint64_t)Y)

LOOP(add_f32, float, float, x + Y)
LOOP(sub_f32, float, float, x - Y)
LOOP(mul_f32, float, float, x * Y)
LOOP(div_f32, float, float, x / Y)
LOOP(min_f32, float, float, DVM_EW_MIN(x, Y))
LOOP(max_f32, float, float, DVM_EW_MAX(x, Y))
LOOP(add_i64, int64_t, int64_t, WRAP(+))
LOOP(sub_i64, int64_t, int64_t, WRAP(-))
LOOP(mul_i64, int64_t, int64_t, WRAP(*))
LOOP(min_i64, int64_t, int64_t, DVM_EW_MIN(x, Y))
LOOP(max_i64, int64_t, int64_t, DVM_EW_MAX(x, Y))
#define CMP_LOOPS(op, OP) \
  LOOP(op##_f32, float, uint8_t, x OP Y) LOOP(op##_i64, int64_t, uint8_t, x OP Y)
CMP_LOOPS(equal, ==) CMP_LOOPS(less, <) CMP_LOOPS(greater, >)
CMP_LOOPS(less_equal, <=) CMP_LOOPS(greater_equal, >=)
/* bool registers hold 0 or 1 (loads normalize) */
LOOP(equal_bool, uint8_t, uint8_t, x == Y)
LOOP(and_bool, uint8_t, uint8_t, x & Y)
LOOP(or_bool, uint8_t, uint8_t, x | Y)
LOOP(xor_bool, uint8_t, uint8_t, x ^ Y)
LOOP(not_bool, uint8_t, uint8_t, x ^ 1)
LOOP(neg_f32, float, float, -x)
LOOP(neg_i64, int64_t, int64_t, -(uint64_t)x)
LOOP(abs_f32, float, float, fabsf(x))
LOOP(abs_i64, int64_t, int64_t, x < 0 ? -(uint64_t)x : (uint64_t)x)
LOOP(relu_f32, float, float, DVM_EW_MAX(x, 0.0f))
LOOP(relu_i64, int64_t, int64_t, DVM_EW_MAX(x, (int64_t)0))
#define X(name, code, text, own, f32, f64, cuda, mid, mid_f32)                                \
  DVM_EW_CLONES static void math_##name(int64_t n, void *pd, const void *pa, const void *pb,   \
                                        const void *pc) {                                      \
    (void)pb;                                                                                \
    (void)pc;                                                                                \
    DVM_EW_MID_LOOP(n, (const float *)pa, (float *)pd, mid, mid_f32, f32);                    \
  }
DVM_UNARY_MATH(X)
#undef X
LOOP(mov_f32, float, float, x)
LOOP(mov_i64, int64_t, int64_t, x)
LOOP(mov_bool, uint8_t, uint8_t, x)
/* casts as the cast kernel does them (ops/cpu/unary.c) */
LOOP(cast_f32_i64, float, int64_t, x >= -0x1p63f && x < 0x1p63f ? (int64_t)x : INT64_MIN)
LOOP(cast_f32_bool, float, uint8_t, x != 0)
LOOP(cast_i64_f32, int64_t, float, x)
LOOP(cast_i64_bool, int64_t, uint8_t, x != 0)
LOOP(cast_bool_f32, uint8_t, float, x)
LOOP(cast_bool_i64, uint8_t, int64_t, x)

/* pow: libm's, except that an exponent of 2 (a decomposed LayerNorm's or
 * RMSNorm's square) is a multiply, as in the binary kernel, so fused and
 * unfused results agree; a block of one exponent (a broadcast constant)
 * that dvm_ew_pow_kind knows (elementwise.h) runs as one vector loop, as
 * the binary kernel runs it. */
#define FUSED_POW_LOOP(expr, unused) _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = (expr)
DVM_EW_CLONES static void pow_f32(int64_t n, void *pd, const void *pa, const void *pb, const void *pc) {
  const float *a = pa, *b = pb;
  float *d = pd;
  (void)pc;
  int64_t same = 0;
  float e = n ? b[0] : 0;
  _Pragma("omp simd reduction(+ : same)") for (int64_t i = 0; i < n; i++) same += b[i] == e;
  int kind = same == n ? dvm_ew_pow_kind(e) : DVM_EW_POW_ANY;
  if (kind != DVM_EW_POW_ANY) {
    DVM_EW_POW_CASES(kind, FUSED_POW_LOOP, a[i], 0)
    return;
  }
  for (int64_t i = 0; i < n; i++) d[i] = b[i] == 2.0f ? a[i] * a[i] : powf(a[i], b[i]);
}

#define WHERE_LOOP(name, T)                                                                  \
  DVM_EW_CLONES static void name(int64_t n, void *pd, const void *pa, const void *pb,        \
                                 const void *pc) {                                           \
    const uint8_t *c = pa;                                                                   \
    const T *x = pb, *y = pc;                                                                \
    T *d = pd;                                                                               \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                    \
      T vx = x[i], vy = y[i];                                                                \
      d[i] = c[i] ? vx : vy;                                                                 \
    }                                                                                        \
  }
WHERE_LOOP(where_f32, float)
WHERE_LOOP(where_i64, int64_t)
WHERE_LOOP(where_bool, uint8_t)

static const floop cast_loops[RT_COUNT][RT_COUNT] = {
    [RT_F32] = {[RT_F32] = mov_f32, [RT_I64] = cast_f32_i64, [RT_BOOL] = cast_f32_bool},
    [RT_I64] = {[RT_F32] = cast_i64_f32, [RT_I64] = mov_i64, [RT_BOOL] = cast_i64_bool},
    [RT_BOOL] = {[RT_F32] = cast_bool_f32, [RT_I64] = cast_bool_i64, [RT_BOOL] = mov_bool},
};

/* ---- the op table ---- */

enum { K_LOAD, K_STORE, K_CONST, K_CAST, K_UNARY, K_BINARY, K_WHERE, K_REDUCE };

typedef struct opinfo {
  const char *name;
  uint8_t kind;
  uint8_t to_bool;   /* the result is bool, not the operands' type */
  floop fn[RT_COUNT]; /* by operand type (x's, for where); NULL: not taken */
} opinfo;

#define F(op) [RT_F32] = op##_f32
#define I(op) [RT_I64] = op##_i64
#define B(op) [RT_BOOL] = op##_bool

static const opinfo optab[DVM_FUSED_OP_END] = {
    [DVM_FUSED_LOAD] = {"load", K_LOAD, 0, {0}},
    [DVM_FUSED_STORE] = {"store", K_STORE, 0, {0}},
    [DVM_FUSED_CONST] = {"const", K_CONST, 0, {0}},
    [DVM_FUSED_MOV] = {"mov", K_UNARY, 0, {F(mov), I(mov), B(mov)}},
    [DVM_FUSED_CAST] = {"cast", K_CAST, 0, {0}},
    [DVM_FUSED_ADD] = {"add", K_BINARY, 0, {F(add), I(add)}},
    [DVM_FUSED_SUB] = {"sub", K_BINARY, 0, {F(sub), I(sub)}},
    [DVM_FUSED_MUL] = {"mul", K_BINARY, 0, {F(mul), I(mul)}},
    [DVM_FUSED_DIV] = {"div", K_BINARY, 0, {F(div)}},
    [DVM_FUSED_POW] = {"pow", K_BINARY, 0, {F(pow)}},
    [DVM_FUSED_MIN] = {"min", K_BINARY, 0, {F(min), I(min)}},
    [DVM_FUSED_MAX] = {"max", K_BINARY, 0, {F(max), I(max)}},
    [DVM_FUSED_EQUAL] = {"equal", K_BINARY, 1, {F(equal), I(equal), B(equal)}},
    [DVM_FUSED_LESS] = {"less", K_BINARY, 1, {F(less), I(less)}},
    [DVM_FUSED_GREATER] = {"greater", K_BINARY, 1, {F(greater), I(greater)}},
    [DVM_FUSED_LESS_EQUAL] = {"less_equal", K_BINARY, 1, {F(less_equal), I(less_equal)}},
    [DVM_FUSED_GREATER_EQUAL] = {"greater_equal", K_BINARY, 1, {F(greater_equal), I(greater_equal)}},
    [DVM_FUSED_AND] = {"and", K_BINARY, 0, {B(and)}},
    [DVM_FUSED_OR] = {"or", K_BINARY, 0, {B(or)}},
    [DVM_FUSED_XOR] = {"xor", K_BINARY, 0, {B(xor)}},
    [DVM_FUSED_NOT] = {"not", K_UNARY, 0, {B(not)}},
    [DVM_FUSED_WHERE] = {"where", K_WHERE, 0, {F(where), I(where), B(where)}},
    [DVM_FUSED_NEG] = {"neg", K_UNARY, 0, {F(neg), I(neg)}},
    [DVM_FUSED_ABS] = {"abs", K_UNARY, 0, {F(abs), I(abs)}},
    [DVM_FUSED_RELU] = {"relu", K_UNARY, 0, {F(relu), I(relu)}},
#define X(name, code, text, ...) [DVM_FUSED_##name] = {text, K_UNARY, 0, {[RT_F32] = math_##name}},
    DVM_UNARY_MATH(X)
#undef X
    /* row reductions: f32 only (reduce_rows runs them) */
    [DVM_FUSED_ROW_SUM] = {"row_sum", K_REDUCE, 0, {0}},
    [DVM_FUSED_ROW_MEAN] = {"row_mean", K_REDUCE, 0, {0}},
    [DVM_FUSED_ROW_MAX] = {"row_max", K_REDUCE, 0, {0}},
    [DVM_FUSED_ROW_MIN] = {"row_min", K_REDUCE, 0, {0}},
};

/* The registers (or values) an instruction of opcode op with operands a,
 * b, c reads: -1 where it reads none. A store reads its a. */
static void reads_of(int op, int a, int b, int c, int reads[3]) {
  int kind = optab[op].kind;
  reads[0] = kind == K_LOAD || kind == K_CONST ? -1 : a;
  reads[1] = kind == K_BINARY || kind == K_WHERE ? b : -1;
  reads[2] = kind == K_WHERE ? c : -1;
}

const char *dvm_fused_op_name(int op) {
  return op > 0 && op < DVM_FUSED_OP_END ? optab[op].name : NULL;
}

/* "f32, i64 or bool" style lists of the types an op takes. */
static char *type_list(char *buf, size_t size, const floop *fn) {
  const char *names[RT_COUNT];
  int n = 0;
  for (int t = 0; t < RT_COUNT; t++)
    if (fn[t]) names[n++] = dvm_dtype_name(rt_dtype[t]);
  buf[0] = 0;
  for (int k = 0; k < n; k++)
    snprintf(buf + strlen(buf), size - strlen(buf), "%s%s",
             k == 0 ? "" : k == n - 1 ? " or " : ", ", names[k]);
  return buf;
}

/* ---- decoding and validation ---- */

typedef struct finstr {
  uint8_t op, dst, a, b, c;
  floop fn;          /* compute ops */
  dvm_fused_imm imm; /* const: the value in the register's type */
} finstr;

typedef struct fprog {
  int nin, nout, nregs, ninstrs;
  int rows; /* DVM_FUSED_ROWS: a row program */
  uint8_t in_dt[DVM_FUSED_MAX_INPUTS], out_dt[DVM_FUSED_MAX_OUTPUTS];
  uint8_t rt[DVM_FUSED_MAX_REGS];     /* register types */
  uint8_t writes[DVM_FUSED_MAX_REGS]; /* instructions that write each */
  finstr ins[DVM_FUSED_MAX_INSTRS];
} fprog;

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
  return v;
}

static size_t tables_end(int nin, int nout, int nregs) {
  return (DVM_FUSED_HEADER_SIZE + (size_t)(nin + nout + nregs) + 7) & ~(size_t)7;
}

#define BAD(...) dvm_status_new(DVM_INVALID_ARGUMENT, "program: " __VA_ARGS__)

static dvm_status *decode_header(const uint8_t *p, size_t size, fprog *f) {
  if (size < DVM_FUSED_HEADER_SIZE)
    return BAD("%zu bytes, shorter than the %d-byte header", size, DVM_FUSED_HEADER_SIZE);
  if (memcmp(p, DVM_FUSED_MAGIC, 4) != 0) return BAD("bad magic (not a fused program)");
  if (get_u16(p + 4) != DVM_FUSED_VERSION)
    return BAD("version %d, this dvm reads version %d", get_u16(p + 4), DVM_FUSED_VERSION);
  f->nin = p[6];
  f->nout = p[7];
  f->nregs = p[8];
  f->ninstrs = get_u16(p + 10);
  if (f->nin < 1 || f->nin > DVM_FUSED_MAX_INPUTS)
    return BAD("%d inputs (want 1 to %d)", f->nin, DVM_FUSED_MAX_INPUTS);
  if (f->nout < 1 || f->nout > DVM_FUSED_MAX_OUTPUTS)
    return BAD("%d outputs (want 1 to %d)", f->nout, DVM_FUSED_MAX_OUTPUTS);
  if (f->nregs < 1 || f->nregs > DVM_FUSED_MAX_REGS)
    return BAD("%d registers (want 1 to %d)", f->nregs, DVM_FUSED_MAX_REGS);
  if (f->ninstrs < 1 || f->ninstrs > DVM_FUSED_MAX_INSTRS)
    return BAD("%d instructions (want 1 to %d)", f->ninstrs, DVM_FUSED_MAX_INSTRS);
  if (p[9] & ~DVM_FUSED_ROWS) return BAD("unknown flags 0x%02x (want 0 or 0x%02x, rows)", p[9], DVM_FUSED_ROWS);
  f->rows = p[9] & DVM_FUSED_ROWS;
  if (p[12] || p[13] || p[14] || p[15]) return BAD("reserved header bytes are not zero");
  size_t want = tables_end(f->nin, f->nout, f->nregs) + (size_t)f->ninstrs * DVM_FUSED_INSTR_SIZE;
  if (size != want) return BAD("%zu bytes, its counts say %zu", size, want);
  return NULL;
}

static dvm_status *decode_tables(const uint8_t *p, fprog *f) {
  const uint8_t *t = p + DVM_FUSED_HEADER_SIZE;
  static const char io_types[] = "f32, f16, bf16, i32, i64 or bool";
  for (int k = 0; k < f->nin + f->nout; k++) {
    int in = k < f->nin, i = in ? k : k - f->nin, dt = t[k];
    if (rt_of_io(dt) < 0)
      return dt < DVM_DTYPE_COUNT
                 ? BAD("%s %d has dtype %s (want %s)", in ? "input" : "output", i,
                       dvm_dtype_name((dvm_dtype)dt), io_types)
                 : BAD("%s %d has unknown dtype %d", in ? "input" : "output", i, dt);
    if (in)
      f->in_dt[i] = (uint8_t)dt;
    else
      f->out_dt[i] = (uint8_t)dt;
  }
  for (int r = 0; r < f->nregs; r++) {
    int dt = t[f->nin + f->nout + r], rt = rt_of_reg(dt);
    if (rt < 0)
      return dt < DVM_DTYPE_COUNT ? BAD("register %d has type %s (want f32, i64 or bool)", r,
                                        dvm_dtype_name((dvm_dtype)dt))
                                  : BAD("register %d has unknown type %d", r, dt);
    f->rt[r] = (uint8_t)rt;
  }
  size_t used = DVM_FUSED_HEADER_SIZE + (size_t)(f->nin + f->nout + f->nregs);
  for (size_t k = used; k < tables_end(f->nin, f->nout, f->nregs); k++)
    if (p[k]) return BAD("padding byte %zu is not zero", k);
  return NULL;
}

/* Checks of one instruction; `written` marks registers written so far and
 * `stored` outputs stored so far. */
typedef struct vstate {
  fprog *f;
  int i;          /* instruction index */
  const char *op; /* its name */
  uint32_t written;
  uint32_t stored;
} vstate;

#define IBAD(fmt, ...) BAD("instruction %d (%s): " fmt, v->i, v->op, __VA_ARGS__)

/* Register operand `which` (a name for messages): in range, and, if read,
 * written before. */
static dvm_status *reg_operand(vstate *v, const char *which, int r, int read) {
  if (r >= v->f->nregs)
    return IBAD("%s register %d is out of range (%d registers)", which, r, v->f->nregs);
  if (read && !(v->written >> r & 1))
    return IBAD("%s register %d is read before it is written", which, r);
  return NULL;
}

static dvm_status *unused_zero(vstate *v, const char *which, int x) {
  return x ? IBAD("operand %s is unused and must be 0, got %d", which, x) : NULL;
}

static dvm_status *want_type(vstate *v, const char *which, int r, int rt) {
  if (v->f->rt[r] == rt) return NULL;
  return IBAD("%s register %d is %s, want %s", which, r, dvm_dtype_name(rt_dtype[v->f->rt[r]]),
              dvm_dtype_name(rt_dtype[rt]));
}

static dvm_status *decode_instr(vstate *v, const uint8_t *p, finstr *in) {
  fprog *f = v->f;
  in->op = p[0];
  in->dst = p[1];
  in->a = p[2];
  in->b = p[3];
  in->c = p[4];
  in->fn = NULL;
  uint64_t imm = get_u64(p + 8);
  if (in->op == 0 || in->op >= DVM_FUSED_OP_END) return BAD("instruction %d: unknown opcode %d", v->i, in->op);
  const opinfo *o = &optab[in->op];
  v->op = o->name;
  if (p[5] || p[6] || p[7]) return IBAD("%s", "reserved bytes are not zero");
  if (o->kind != K_CONST && imm) return IBAD("%s", "the immediate is unused and must be 0");
  dvm_status *st;
  char types[64];
  switch (o->kind) {
  case K_LOAD:
    if (in->a >= f->nin) return IBAD("input %d is out of range (%d inputs)", in->a, f->nin);
    if ((st = unused_zero(v, "b", in->b)) || (st = unused_zero(v, "c", in->c)) ||
        (st = reg_operand(v, "destination", in->dst, 0)) ||
        (st = want_type(v, "destination", in->dst, rt_of_io(f->in_dt[in->a]))))
      return st;
    break;
  case K_STORE:
    if (in->dst >= f->nout) return IBAD("output %d is out of range (%d outputs)", in->dst, f->nout);
    if (v->stored >> in->dst & 1) return IBAD("output %d is stored twice", in->dst);
    v->stored |= 1u << in->dst;
    if ((st = unused_zero(v, "b", in->b)) || (st = unused_zero(v, "c", in->c)) ||
        (st = reg_operand(v, "source", in->a, 1)) ||
        (st = want_type(v, "source", in->a, rt_of_io(f->out_dt[in->dst]))))
      return st;
    return NULL; /* writes no register */
  case K_CONST:
    if ((st = unused_zero(v, "a", in->a)) || (st = unused_zero(v, "b", in->b)) ||
        (st = unused_zero(v, "c", in->c)) || (st = reg_operand(v, "destination", in->dst, 0)))
      return st;
    if (f->rt[in->dst] == RT_F32) {
      double d;
      memcpy(&d, &imm, 8);
      in->imm.f = (float)d;
    } else if (f->rt[in->dst] == RT_I64) {
      in->imm.i = (int64_t)imm;
    } else {
      if (imm > 1) return IBAD("a bool immediate must be 0 or 1, got %llu", (unsigned long long)imm);
      in->imm.b = (uint8_t)imm;
    }
    break;
  case K_CAST:
    if ((st = unused_zero(v, "b", in->b)) || (st = unused_zero(v, "c", in->c)) ||
        (st = reg_operand(v, "source", in->a, 1)) ||
        (st = reg_operand(v, "destination", in->dst, 0)))
      return st;
    in->fn = cast_loops[f->rt[in->a]][f->rt[in->dst]];
    break;
  case K_UNARY:
  case K_BINARY:
  case K_WHERE: {
    int w = o->kind == K_WHERE, bin = o->kind == K_BINARY;
    int x = w ? in->b : in->a; /* the operand whose type picks the loop */
    if ((st = reg_operand(v, "a", in->a, 1)) ||
        (st = bin || w ? reg_operand(v, "b", in->b, 1) : unused_zero(v, "b", in->b)) ||
        (st = w ? reg_operand(v, "c", in->c, 1) : unused_zero(v, "c", in->c)) ||
        (st = reg_operand(v, "destination", in->dst, 0)))
      return st;
    if (!o->fn[f->rt[x]])
      return IBAD("%s register %d is %s, want %s", w ? "b" : "a", x,
                  dvm_dtype_name(rt_dtype[f->rt[x]]), type_list(types, sizeof types, o->fn));
    if (w && ((st = want_type(v, "a", in->a, RT_BOOL)) || (st = want_type(v, "c", in->c, f->rt[x]))))
      return st;
    if (bin && (st = want_type(v, "b", in->b, f->rt[x]))) return st;
    if ((st = want_type(v, "destination", in->dst, o->to_bool ? RT_BOOL : f->rt[x]))) return st;
    in->fn = o->fn[f->rt[x]];
    break;
  }
  case K_REDUCE:
    if (!f->rows) return IBAD("%s", "a row reduction needs the rows flag in the header");
    if ((st = reg_operand(v, "a", in->a, 1)) || (st = unused_zero(v, "b", in->b)) ||
        (st = unused_zero(v, "c", in->c)) || (st = reg_operand(v, "destination", in->dst, 0)) ||
        (st = want_type(v, "a", in->a, RT_F32)) || (st = want_type(v, "destination", in->dst, RT_F32)))
      return st;
    break;
  }
  v->written |= 1u << in->dst;
  f->writes[in->dst]++;
  return NULL;
}

/* Decodes and validates the whole program into *f. */
static dvm_status *decode(const void *payload, size_t size, fprog *f) {
  const uint8_t *p = payload;
  memset(f->writes, 0, sizeof f->writes);
  if (!p) return BAD("%s", "none (kernel \"fused\" needs its program as the payload)");
  dvm_status *st = decode_header(p, size, f);
  if (!st) st = decode_tables(p, f);
  if (st) return st;
  vstate v = {f, 0, NULL, 0, 0};
  const uint8_t *ip = p + tables_end(f->nin, f->nout, f->nregs);
  for (v.i = 0; v.i < f->ninstrs; v.i++)
    if ((st = decode_instr(&v, ip + (size_t)v.i * DVM_FUSED_INSTR_SIZE, &f->ins[v.i]))) return st;
  for (int o = 0; o < f->nout; o++)
    if (!(v.stored >> o & 1)) return BAD("output %d is never stored", o);
  return NULL;
}

dvm_status *dvm_fused_validate(const void *payload, size_t size) {
  fprog *f = malloc(sizeof *f);
  if (!f) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = decode(payload, size, f);
  free(f);
  return dvm_status_annotate(st, "fused");
}

dvm_status *dvm_fused_read(const void *payload, size_t size, dvm_fused_program *out) {
  fprog *f = malloc(sizeof *f);
  if (!f) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  dvm_status *st = decode(payload, size, f);
  if (!st) {
    *out = (dvm_fused_program){.nin = f->nin, .nout = f->nout, .nregs = f->nregs, .ninstrs = f->ninstrs,
                               .rows = f->rows};
    memcpy(out->in_dtype, f->in_dt, (size_t)f->nin);
    memcpy(out->out_dtype, f->out_dt, (size_t)f->nout);
    for (int r = 0; r < f->nregs; r++) out->reg_dtype[r] = (uint8_t)rt_dtype[f->rt[r]];
    for (int i = 0; i < f->ninstrs; i++) {
      const finstr *in = &f->ins[i];
      out->instrs[i] = (dvm_fused_instr){in->op, in->dst, in->a, in->b, in->c, in->imm};
    }
  }
  free(f);
  return dvm_status_annotate(st, "fused");
}

/* ---- loads and stores ---- */

typedef void (*conv_fn)(int64_t n, const void *src, void *dst);

#define CONV(name, TS, TD, EXPR)                                            \
  DVM_EW_CLONES static void name(int64_t n, const void *src, void *dst) {  \
    const TS *s = src;                                                      \
    TD *d = dst;                                                            \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = EXPR;        \
  }
static void load_f16(int64_t n, const void *src, void *dst) { dvm_ew_f16_to_f32_n(n, src, dst); }
static void store_f16(int64_t n, const void *src, void *dst) { dvm_ew_f32_to_f16_n(n, src, dst); }
CONV(load_f32, float, float, s[i])
CONV(load_bf16, uint16_t, float, dvm_bf16_to_f32(s[i]))
CONV(load_i32, int32_t, int64_t, s[i])
CONV(load_i64, int64_t, int64_t, s[i])
CONV(load_bool, uint8_t, uint8_t, s[i] != 0)
CONV(store_f32, float, float, s[i])
CONV(store_bf16, float, uint16_t, dvm_f32_to_bf16(s[i]))
CONV(store_i32, int64_t, int32_t, (int32_t)(uint32_t)s[i])
CONV(store_i64, int64_t, int64_t, s[i])
CONV(store_bool, uint8_t, uint8_t, s[i])

static const conv_fn loads[DVM_DTYPE_COUNT] = {
    [DVM_F32] = load_f32, [DVM_F16] = load_f16, [DVM_BF16] = load_bf16,
    [DVM_I32] = load_i32, [DVM_I64] = load_i64, [DVM_BOOL] = load_bool};
static const conv_fn stores[DVM_DTYPE_COUNT] = {
    [DVM_F32] = store_f32, [DVM_F16] = store_f16, [DVM_BF16] = store_bf16,
    [DVM_I32] = store_i32, [DVM_I64] = store_i64, [DVM_BOOL] = store_bool};

/* n copies of the register-typed value at `one`. */
#define FILL(name, T)                                                      \
  DVM_EW_CLONES static void name(int64_t n, const void *one, void *dst) { \
    T v, *d = dst;                                                         \
    memcpy(&v, one, sizeof v);                                             \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = v;          \
  }
FILL(fill_f32, float)
FILL(fill_i64, int64_t)
FILL(fill_bool, uint8_t)

static const conv_fn fills[RT_COUNT] = {fill_f32, fill_i64, fill_bool};

static void fill(int rt, int64_t n, const void *one, void *dst) { fills[rt](n, one, dst); }

/* Row reductions of a row program: over a row of len f32s, in ROW_LANES
 * running results combined in order at the end, as reduce_sum's and
 * reduce_max's passes do a row (ops/cpu/reduce.c), so a stitched reduction
 * gives the unfused kernel's bits. */
#define ROW_LANES 16
#define ROW_REDUCE(name, OP, INIT)                                                    \
  DVM_EW_CLONES static float name(int64_t len, const float *x) {                     \
    float acc[ROW_LANES];                                                             \
    for (int l = 0; l < ROW_LANES; l++) acc[l] = INIT;                                \
    int64_t r = 0;                                                                    \
    for (; r + ROW_LANES <= len; r += ROW_LANES)                                      \
      _Pragma("omp simd") for (int l = 0; l < ROW_LANES; l++) acc[l] = OP(acc[l], x[r + l]); \
    for (; r < len; r++) acc[0] = OP(acc[0], x[r]);                                   \
    for (int l = 1; l < ROW_LANES; l++) acc[0] = OP(acc[0], acc[l]);                  \
    return acc[0];                                                                    \
  }
#define ROW_ADD(a, b) ((a) + (b))
ROW_REDUCE(row_sum, ROW_ADD, 0.0f)
ROW_REDUCE(row_max, DVM_EW_MAX, -INFINITY)
ROW_REDUCE(row_min, DVM_EW_MIN, INFINITY)

/* d's row r = the reduction `op` of a's row r, for the rows of len (> 0)
 * in n elements; a mean is the sum scaled by 1/len in f32, as reduce_mean
 * scales. d may be a. */
static void reduce_rows(int op, int64_t n, int64_t len, float *d, const float *a, int per_row) {
  for (int64_t r = 0; r < n; r += len) {
    float v = op == DVM_FUSED_ROW_MAX ? row_max(len, a + r)
              : op == DVM_FUSED_ROW_MIN ? row_min(len, a + r)
                                        : row_sum(len, a + r);
    if (op == DVM_FUSED_ROW_MEAN) v *= (float)(1.0 / (double)len);
    if (per_row) /* row r's value at d[r]: rows before it were read already */
      d[r / len] = v;
    else
      fill_f32(len, &v, d + r);
  }
}

/* Register `dst` of type rt, holding one value per row of len in its
 * first n / len elements, filled along its rows in place (from the last
 * row: row r's fill starts at r * len >= r, past the values left). */
static void expand_rows(int rt, int64_t n, int64_t len, char *dst) {
  size_t sz = rt_size[rt];
  for (int64_t r = n / len - 1; r >= 0; r--) {
    char one[8];
    memcpy(one, dst + r * (int64_t)sz, sz);
    fill(rt, len, one, dst + r * len * (int64_t)sz);
  }
}

/* ---- execution ---- */

/* Register scratch per thread; the block length follows from it. */
#define SCRATCH (48 * 1024)
#define MAX_BLOCK 4096
/* Blocks of calls that stream from and to memory are short: a block reads,
 * computes, then writes, and short phases keep both directions of memory
 * traffic going (in a model of this loop, 256- to 512-element blocks ran at
 * 75-85% of memcpy's bandwidth, 1024-element ones at 60%). Inputs read in
 * place are prefetched this many blocks ahead. */
#define STREAM_BLOCK 512
#define PREFETCH_BLOCKS 2
#define MIN_CHUNK ((int64_t)1 << 14)
/* Rows at least this long bound the blocks (a block never crosses one),
 * so that a broadcast row input is read in place rather than gathered. */
#define ROW_BLOCK_MIN 256

/* How each instruction runs. */
enum {
  M_RUN,       /* every block */
  M_HOISTED,   /* once per thread: a constant or a scalar input, written once */
  M_ALIAS,     /* a load of a same-shape input in the register's dtype, written
                * once: the register points into the input */
  M_ROW_ALIAS, /* the same for a row of a broadcast input, blocks being rows */
  M_STORED,    /* a store of a register that is the output itself: nothing */
  M_CONVERT,   /* a load of a same-shape input, converted or copied */
  M_GATHER,    /* a load of a broadcast input, row segment by row segment */
  M_SUFFIX,    /* a load of an input that repeats along the leading dims (a
                * bias [n] over [m, n]): copies from element pos mod its size */
  M_FILL,      /* a load of a scalar input into a reused register: every block */
  M_STORE_END,  /* a store run at the end of the block (an output overlaps an
                 * input: it is written after all reads of the block) */
  M_STORE_SNAP, /* the same, its register rewritten later: copied aside first */
};

typedef struct exec {
  const fprog *f;
  dvm_ew_plan plan;
  const char *in[DVM_FUSED_MAX_INPUTS];
  char *out[DVM_FUSED_MAX_OUTPUTS];
  uint8_t mode[DVM_FUSED_MAX_INSTRS];
  size_t reg_off[DVM_FUSED_MAX_REGS]; /* in the scratch; unused for aliases */
  size_t snap_off[DVM_FUSED_MAX_INSTRS]; /* M_STORE_SNAP copies, in the scratch */
  int8_t alias[DVM_FUSED_MAX_REGS];   /* the input an aliased register reads, or -1 */
  int8_t out_alias[DVM_FUSED_MAX_REGS]; /* the output a register is written in, or -1 */
  uint8_t alias_mode[DVM_FUSED_MAX_REGS];
  size_t staging_off;
  int64_t block;
  uint8_t contig[DVM_FUSED_MAX_INPUTS];    /* the input has the output's shape */
  int64_t numel[DVM_FUSED_MAX_INPUTS];
  const char *in_end[DVM_FUSED_MAX_INPUTS]; /* past each input's last byte */
  int64_t row_len;     /* a row program's rows: the output's last dim */
  size_t scratch_size; /* registers, copies and staging; past SCRATCH (long
                        * rows) they are on the heap */
  int *failed;         /* set when a thread cannot get its heap scratch */
  /* a row program's per-row values (plan_rows): an instruction marked
   * `per_row` computes one element per row of the block, at the start of
   * its register (a row reduction: its results, not filled along the row);
   * expand[i] are the registers holding such values that instruction i
   * reads as rows, each filled along its rows before it */
  uint8_t per_row[DVM_FUSED_MAX_INSTRS];
  int overlap; /* an output overlaps an input */
  uint32_t expand[DVM_FUSED_MAX_INSTRS];
  int cursor;     /* a load needs the broadcast cursor */
  int row_blocks; /* blocks end at row ends */
  int stream;     /* outputs are written with streaming stores */
} exec;

/* A gathering load of input k into dst: the n elements from cursor c. */
static void gather(const exec *x, int k, dvm_ew_cursor c, int64_t n, char *dst) {
  int dt = x->f->in_dt[k], rt = rt_of_io(dt);
  int64_t end = c.pos + n, at = 0;
  while (c.pos < end) {
    int64_t len = dvm_ew_cursor_run(&x->plan, &c, end);
    const char *src = x->in[k] + c.off[k];
    char *to = dst + at * (int64_t)rt_size[rt];
    if (x->plan.stride[0][k]) {
      loads[dt](len, src, to);
    } else {
      char one[8];
      loads[dt](1, src, one);
      fill(rt, len, one, to);
    }
    at += len;
    dvm_ew_cursor_advance(&x->plan, &c, len);
  }
}

/* A load of suffix input k (M_SUFFIX) into dst: n elements from pos. */
static void load_suffix(const exec *x, int k, int64_t pos, int64_t n, char *dst) {
  int dt = x->f->in_dt[k];
  size_t esz = dvm_dtype_size((dvm_dtype)dt), rsz = rt_size[rt_of_io(dt)];
  int64_t m = x->numel[k], off = pos % m;
  for (int64_t at = 0, len; at < n; at += len, off = 0) {
    len = m - off < n - at ? m - off : n - at;
    loads[dt](len, x->in[k] + off * (int64_t)esz, dst + at * (int64_t)rsz);
  }
}

/* Store `in` of the n elements from pos, from src. */
static void store(const exec *x, const finstr *in, const void *src, char *staging, int64_t pos,
                  int64_t n) {
  const fprog *f = x->f;
  int dt = f->out_dt[in->dst];
  size_t osz = dvm_dtype_size((dvm_dtype)dt);
  char *dst = x->out[in->dst] + pos * (int64_t)osz;
  if (!x->stream) {
    stores[dt](n, src, dst);
  } else if (dt == (int)rt_dtype[f->rt[in->a]]) {
    dvm_ew_stream_copy(dst, src, (size_t)n * osz);
  } else { /* converted in L1 first */
    stores[dt](n, src, staging);
    dvm_ew_stream_copy(dst, staging, (size_t)n * osz);
  }
}

/* Instruction `in` over the n elements from pos (cursor c there). */
static void run_instr(const exec *x, const finstr *in, void *const *reg, char *scratch,
                      char *staging, int64_t pos, int64_t n, const dvm_ew_cursor *c) {
  const fprog *f = x->f;
  int mode = x->mode[in - f->ins];
  switch (optab[in->op].kind) {
  case K_LOAD: {
    int dt = f->in_dt[in->a];
    if (mode == M_GATHER) {
      gather(x, in->a, *c, n, reg[in->dst]);
    } else if (mode == M_SUFFIX) {
      load_suffix(x, in->a, pos, n, reg[in->dst]);
    } else if (mode == M_HOISTED || mode == M_FILL) { /* a scalar: n copies */
      char one[8];
      loads[dt](1, x->in[in->a], one);
      fill(f->rt[in->dst], n, one, reg[in->dst]);
    } else {
      loads[dt](n, x->in[in->a] + pos * (int64_t)dvm_dtype_size((dvm_dtype)dt), reg[in->dst]);
    }
    break;
  }
  case K_CONST:
    fill(f->rt[in->dst], n, &in->imm, reg[in->dst]);
    break;
  case K_STORE:
    if (mode == M_RUN)
      store(x, in, reg[in->a], staging, pos, n);
    else if (mode == M_STORE_SNAP)
      memcpy(scratch + x->snap_off[in - f->ins], reg[in->a], (size_t)n * rt_size[f->rt[in->a]]);
    break;
  case K_REDUCE:
    reduce_rows(in->op, n, x->row_len, reg[in->dst], reg[in->a], x->per_row[in - f->ins]);
    break;
  default: /* an op on per-row values runs once per row */
    in->fn(x->per_row[in - f->ins] ? n / x->row_len : n, reg[in->dst], reg[in->a], reg[in->b], reg[in->c]);
  }
}

/* Asks for input elements [pos, pos + n) of dtype dt (those before end). */
static void prefetch(const char *in, const char *end, int64_t pos, int64_t n, int dt) {
  size_t esz = dvm_dtype_size((dvm_dtype)dt);
  const char *p = in + pos * (int64_t)esz, *stop = p + n * (int64_t)esz;
  for (stop = stop < end ? stop : end; p < stop; p += 64) __builtin_prefetch(p);
}

static void exec_range(void *ctx, int64_t s, int64_t e) {
  const exec *x = ctx;
  const fprog *f = x->f;
  _Alignas(64) char stack[SCRATCH];
  char *scratch = stack, *heap = NULL;
  if (x->scratch_size > SCRATCH) { /* a block of rows too long for the stack */
    if (!(heap = aligned_alloc(64, (x->scratch_size + 63) & ~(size_t)63))) {
      __atomic_store_n(x->failed, 1, __ATOMIC_RELAXED);
      return;
    }
    scratch = heap;
  }
  void *reg[DVM_FUSED_MAX_REGS];
  for (int r = 0; r < f->nregs; r++) reg[r] = scratch + x->reg_off[r];
  char *staging = scratch + x->staging_off; /* a block of converted output */
  for (int i = 0; i < f->ninstrs; i++)
    if (x->mode[i] == M_HOISTED) run_instr(x, &f->ins[i], reg, scratch, staging, 0, x->block, NULL);
  dvm_ew_cursor c;
  if (x->cursor) dvm_ew_cursor_seek(&x->plan, &c, s);
  for (int64_t pos = s, n; pos < e; pos += n) {
    n = e - pos < x->block ? e - pos : x->block;
    if (x->row_blocks && x->plan.dims[0] - c.i0 < n) n = x->plan.dims[0] - c.i0;
    for (int r = 0; r < f->nregs; r++) {
      int k = x->alias[r];
      if (k >= 0)
        reg[r] = (char *)x->in[k] + (x->alias_mode[r] == M_ALIAS ? pos * (int64_t)rt_size[f->rt[r]]
                                                                 : c.off[k]);
      if (x->out_alias[r] >= 0) reg[r] = x->out[x->out_alias[r]] + pos * (int64_t)rt_size[f->rt[r]];
    }
    for (int k = 0; x->stream && k < f->nin; k++)
      if (x->contig[k]) prefetch(x->in[k], x->in_end[k], pos + PREFETCH_BLOCKS * x->block, n, f->in_dt[k]);
    for (int i = 0; i < f->ninstrs; i++) {
      for (uint32_t m = x->expand[i]; m; m &= m - 1) {
        int r = __builtin_ctz(m);
        expand_rows(f->rt[r], n, x->row_len, reg[r]);
      }
      if (x->mode[i] == M_RUN || x->mode[i] >= M_CONVERT)
        run_instr(x, &f->ins[i], reg, scratch, staging, pos, n, &c);
    }
    for (int i = 0; i < f->ninstrs; i++)
      if (x->mode[i] >= M_STORE_END)
        store(x, &f->ins[i], x->mode[i] == M_STORE_END ? reg[f->ins[i].a] : scratch + x->snap_off[i],
              staging, pos, n);
    for (int64_t left = n; x->cursor && left > 0;) {
      int64_t len = dvm_ew_cursor_run(&x->plan, &c, c.pos + left);
      dvm_ew_cursor_advance(&x->plan, &c, len);
      left -= len;
    }
  }
  if (x->stream) dvm_ew_stream_fence();
  free(heap);
}

/* A row program's range: rows [s, e). */
static void exec_rows(void *ctx, int64_t s, int64_t e) {
  const exec *x = ctx;
  exec_range(ctx, s * x->row_len, e * x->row_len);
}

/* t repeats along o's leading dims: past its own leading 1s, its dims are
 * o's last ones, so output element i reads t's element i mod numel(t). */
static int is_suffix(const dvm_tensor *t, const dvm_tensor *o) {
  int lead = 0;
  while (lead < t->rank && t->dims[lead] == 1) lead++;
  int r = t->rank - lead;
  if (r > o->rank) return 0;
  return memcmp(t->dims + lead, o->dims + o->rank - r, sizeof(int64_t) * (size_t)r) == 0;
}

static int overlaps(const dvm_tensor *a, const dvm_tensor *b) {
  const char *pa = dvm_tensor_ptr(a), *pb = dvm_tensor_ptr(b);
  return pa < pb + dvm_tensor_nbytes(b) && pb < pa + dvm_tensor_nbytes(a);
}

/* a and b are the same memory (the memory plan's in place). */
static int exactly(const dvm_tensor *a, const dvm_tensor *b) {
  return dvm_tensor_ptr(a) == dvm_tensor_ptr(b) && dvm_tensor_nbytes(a) == dvm_tensor_nbytes(b);
}

/* A row program's per-row values: in program order, each register holds
 * rows (ROWS), one value per row (PER_ROW), or one value for the whole
 * call (SAME: a hoisted constant or scalar input, a filled scalar). An op
 * whose operands are per-row or the same, one at least per-row, and a row
 * reduction, compute per row, unless their register is an output's memory
 * over an input (its positions are then the input's too); a per-row register read as rows (by
 * an op on rows, a reduction, a store) is filled along its rows first.
 * So a normalization's 1 / sqrt(var + eps) is one sqrt and one divide per
 * row, not per element. */
static void plan_rows(exec *x) {
  enum { ROWS, PER_ROW, SAME };
  const fprog *f = x->f;
  uint8_t form[DVM_FUSED_MAX_REGS];
  memset(form, ROWS, sizeof form);
  for (int i = 0; i < f->ninstrs; i++) {
    const finstr *in = &f->ins[i];
    int kind = optab[in->op].kind, reads[3], per_row = 0, rows_read = 0;
    reads_of(in->op, in->a, in->b, in->c, reads);
    if (kind == K_UNARY || kind == K_BINARY || kind == K_WHERE || kind == K_CAST)
      for (int k = 0; k < 3; k++) {
        if (reads[k] < 0) continue;
        per_row |= form[reads[k]] == PER_ROW;
        rows_read |= form[reads[k]] == ROWS;
      }
    x->per_row[i] = (kind == K_REDUCE || (per_row && !rows_read)) && (x->out_alias[in->dst] < 0 || !x->overlap);
    x->expand[i] = 0;
    for (int k = 0; k < 3 && !x->per_row[i]; k++)
      if (reads[k] >= 0 && form[reads[k]] == PER_ROW) {
        x->expand[i] |= 1u << reads[k];
        form[reads[k]] = ROWS;
      }
    if (kind == K_REDUCE && form[in->a] == PER_ROW) { /* reduced as rows */
      x->expand[i] |= 1u << in->a;
      form[in->a] = ROWS;
    }
    if (kind == K_STORE) continue;
    form[in->dst] = x->per_row[i] ? PER_ROW
                    : x->mode[i] == M_HOISTED || x->mode[i] == M_FILL ? SAME
                                                                       : ROWS;
  }
}

/* Decides per call how each instruction runs and where registers live. */
static void plan_exec(exec *x, const dvm_kernel_args *a) {
  const fprog *f = x->f;
  const dvm_tensor *o = a->out[0];
  int64_t total = dvm_tensor_numel(o);
  dvm_ew_plan_make(&x->plan, f->nin, a->in, o->rank, o->dims);
  for (int k = 0; k < f->nin; k++) {
    x->in[k] = dvm_tensor_ptr(a->in[k]);
    x->in_end[k] = x->in[k] + dvm_tensor_nbytes(a->in[k]);
    x->numel[k] = dvm_tensor_numel(a->in[k]);
    x->contig[k] = x->numel[k] == total;
  }
  for (int k = 0; k < f->nout; k++) x->out[k] = dvm_tensor_ptr(a->out[k]);
  memset(x->alias, -1, sizeof x->alias);
  memset(x->out_alias, -1, sizeof x->out_alias);
  int64_t out_bytes = 0;
  for (int k = 0; k < f->nout; k++) out_bytes += (int64_t)dvm_tensor_nbytes(a->out[k]);
  x->stream = out_bytes >= DVM_EW_STREAM_MIN_BYTES;
  /* broadcast inputs: rows at least ROW_BLOCK_MIN long are read in place,
   * blocks ending at row ends (the cursor knows where); below, a suffix
   * input is copied from pos mod its size, any other gathered (the
   * cursor again) */
  int bcast = 0, other = 0;
  for (int i = 0; i < f->ninstrs; i++) {
    int k = f->ins[i].a;
    if (f->ins[i].op != DVM_FUSED_LOAD || x->contig[k] || x->numel[k] == 1) continue;
    bcast = 1;
    other |= !is_suffix(a->in[k], o);
  }
  x->row_blocks = bcast && x->plan.dims[0] >= ROW_BLOCK_MIN;
  x->cursor = x->row_blocks || other;
  /* an output over an input: stores wait for the end of the block */
  int overlap = 0;
  for (int k = 0; k < f->nin; k++)
    for (int j = 0; j < f->nout; j++) overlap |= overlaps(a->in[k], a->out[j]);
  x->overlap = overlap;
  for (int i = 0; i < f->ninstrs; i++) {
    const finstr *in = &f->ins[i];
    if (in->op == DVM_FUSED_STORE) {
      int rewritten = 0;
      for (int j = i + 1; j < f->ninstrs; j++)
        rewritten |= f->ins[j].op != DVM_FUSED_STORE && f->ins[j].dst == in->a;
      x->mode[i] = !overlap ? M_RUN : rewritten ? M_STORE_SNAP : M_STORE_END;
      /* a register of the output's dtype that every write sets block by
       * block, none after this store, lives in the output itself: its
       * values before the last write pass through the output's memory.
       * Not with streaming stores, which want the copy; over an input only
       * when that input is exactly the output's memory and all its loads
       * come before the register's first write (the block read, then
       * written at the same positions). */
      int ok = 1, first = -1;
      for (int j = 0; j < i; j++)
        if (f->ins[j].op != DVM_FUSED_STORE && f->ins[j].dst == in->a) {
          if (first < 0) first = j;
          ok &= x->mode[j] != M_HOISTED && x->mode[j] != M_ALIAS && x->mode[j] != M_ROW_ALIAS;
        }
      ok &= first >= 0;
      for (int k = 0; k < f->nin && ok; k++) {
        if (!overlaps(a->in[k], a->out[in->dst])) continue;
        ok = exactly(a->in[k], a->out[in->dst]) && x->contig[k];
        for (int j = first; j < f->ninstrs && ok; j++)
          ok = f->ins[j].op != DVM_FUSED_LOAD || f->ins[j].a != k;
      }
      if ((x->mode[i] == M_RUN || x->mode[i] == M_STORE_END) && !x->stream && !rewritten && ok &&
          x->out_alias[in->a] < 0 && rt_dtype[f->rt[in->a]] == f->out_dt[in->dst] &&
          f->out_dt[in->dst] != DVM_BOOL) {
        x->mode[i] = M_STORED;
        x->out_alias[in->a] = (int8_t)in->dst;
      }
      continue;
    }
    /* a register written once keeps its value for the whole call */
    int once = f->writes[in->dst] == 1;
    x->mode[i] = in->op == DVM_FUSED_CONST && once ? M_HOISTED : M_RUN;
    if (in->op != DVM_FUSED_LOAD) continue;
    const dvm_tensor *t = a->in[in->a];
    int contig = x->contig[in->a], row = x->row_blocks && x->plan.stride[0][in->a] != 0;
    if (x->numel[in->a] == 1) { /* a scalar: filled once, or per block when its register is reused */
      x->mode[i] = once ? M_HOISTED : M_FILL;
      continue;
    }
    x->mode[i] = contig ? M_CONVERT : !row && is_suffix(t, o) ? M_SUFFIX : M_GATHER;
    /* read in place: the same dtype (bools are normalized to 0/1 on load),
     * and no output over the input, which a block's stores would change
     * under the reads of later blocks' */
    if (once && (contig || row) && rt_dtype[f->rt[in->dst]] == t->dtype && t->dtype != DVM_BOOL &&
        !overlap) {
      x->mode[i] = contig ? M_ALIAS : M_ROW_ALIAS;
      x->alias[in->dst] = (int8_t)in->a;
      x->alias_mode[in->dst] = x->mode[i];
    }
  }
  /* with an output over an input, a load may still read in place (its
   * register not already an output's memory): an input no output
   * overlaps, or one exactly an output's memory (the memory plan's in
   * place) when every read of its register comes no later than the first
   * write into that output, as each op reads and writes the same
   * positions */
  int first_write[DVM_FUSED_MAX_OUTPUTS]; /* in the block, per output */
  for (int k = 0; k < f->nout; k++) first_write[k] = f->ninstrs;
  for (int j = f->ninstrs - 1; overlap && j >= 0; j--) /* over an input, only registers living in the output write it */
    if (f->ins[j].op != DVM_FUSED_STORE && x->out_alias[f->ins[j].dst] >= 0)
      first_write[x->out_alias[f->ins[j].dst]] = j;
  for (int i = 0; overlap && i < f->ninstrs; i++) {
    const finstr *in = &f->ins[i];
    const dvm_tensor *t = a->in[in->a];
    if (in->op != DVM_FUSED_LOAD || x->mode[i] != M_CONVERT || f->writes[in->dst] != 1 ||
        x->out_alias[in->dst] >= 0 || rt_dtype[f->rt[in->dst]] != t->dtype || t->dtype == DVM_BOOL)
      continue;
    int last_read = i, ok = 1, reads[3];
    for (int j = i + 1; j < f->ninstrs; j++) {
      const finstr *u = &f->ins[j];
      reads_of(u->op, u->a, u->b, u->c, reads);
      /* a store at the end of the block reads there */
      if (reads[0] == in->dst || reads[1] == in->dst || reads[2] == in->dst)
        last_read = x->mode[j] == M_STORE_END ? f->ninstrs : j;
    }
    for (int k = 0; k < f->nout; k++)
      if (overlaps(t, a->out[k])) ok &= exactly(t, a->out[k]) && last_read <= first_write[k];
    if (ok) {
      x->mode[i] = M_ALIAS;
      x->alias[in->dst] = (int8_t)in->a;
      x->alias_mode[in->dst] = M_ALIAS;
    }
  }
  /* registers, store copies, and the staging block (4 bytes an element:
   * f16, bf16, i32) */
  size_t per_elem = x->stream ? 4 : 0;
  for (int r = 0; r < f->nregs; r++)
    if (x->alias[r] < 0 && x->out_alias[r] < 0) per_elem += rt_size[f->rt[r]];
  for (int i = 0; i < f->ninstrs; i++)
    if (x->mode[i] == M_STORE_SNAP) per_elem += rt_size[f->rt[f->ins[i].a]];
  int64_t block = per_elem ? (int64_t)(SCRATCH / per_elem) & ~(int64_t)63 : MAX_BLOCK;
  int64_t max_block = x->stream ? STREAM_BLOCK : MAX_BLOCK;
  x->block = block > max_block ? max_block : block;
  if (f->rows) { /* whole rows, at least one however long */
    int64_t rows = x->block / x->row_len;
    x->block = (rows ? rows : 1) * x->row_len;
  }
  size_t off = 0;
  for (int r = 0; r < f->nregs; r++) {
    x->reg_off[r] = off;
    if (x->alias[r] < 0 && x->out_alias[r] < 0) off += ((size_t)x->block * rt_size[f->rt[r]] + 63) & ~(size_t)63;
  }
  for (int i = 0; i < f->ninstrs; i++)
    if (x->mode[i] == M_STORE_SNAP) {
      x->snap_off[i] = off;
      off += ((size_t)x->block * rt_size[f->rt[f->ins[i].a]] + 63) & ~(size_t)63;
    }
  x->staging_off = off;
  if (f->rows) plan_rows(x);
  x->scratch_size = off + (x->stream ? (size_t)x->block * 4 : 0);
}

static dvm_status *fused(const dvm_kernel_args *a) {
  fprog f;
  dvm_status *st = decode(a->payload, a->payload_size, &f);
  if (st) return dvm_status_annotate(st, "fused");
  if ((st = dvm_kargs_check(a, "fused", f.nin, f.nout, DVM_DEVICE_CPU))) return st;
  if (a->nattrs) return dvm_status_new(DVM_INVALID_ARGUMENT, "fused: takes no attributes, got %d", a->nattrs);
  for (int k = 0; k < f.nin + f.nout; k++) {
    int in = k < f.nin, i = in ? k : k - f.nin;
    const dvm_tensor *t = in ? a->in[i] : a->out[i];
    int want = in ? f.in_dt[i] : f.out_dt[i];
    if (t->dtype != want)
      return dvm_status_new(DVM_INVALID_ARGUMENT, "fused: %s %d is %s, the program says %s",
                            in ? "input" : "output", i, dvm_dtype_name((dvm_dtype)t->dtype),
                            dvm_dtype_name((dvm_dtype)want));
  }
  if ((st = dvm_ew_check_broadcast("fused", a->in, f.nin, a->out[0]))) return st;
  for (int k = 1; k < f.nout; k++) {
    const dvm_tensor *o = a->out[k], *o0 = a->out[0];
    if (o->rank != o0->rank || memcmp(o->dims, o0->dims, sizeof(int64_t) * o->rank) != 0) {
      char s1[DVM_SHAPE_STR_SIZE], s0[DVM_SHAPE_STR_SIZE];
      return dvm_status_new(DVM_INVALID_ARGUMENT, "fused: output %d %s != output 0 %s", k,
                            dvm_shape_str(s1, o->rank, o->dims), dvm_shape_str(s0, o0->rank, o0->dims));
    }
  }
  const dvm_tensor *o = a->out[0];
  if (f.rows && o->rank == 0)
    return dvm_status_new(DVM_INVALID_ARGUMENT, "fused: a row program needs an output of rank 1 or more, got a scalar");
  int64_t total = dvm_tensor_numel(o);
  if (total == 0) return NULL;
  int failed = 0;
  exec x = {.f = &f, .row_len = f.rows ? o->dims[o->rank - 1] : 1, .failed = &failed};
  plan_exec(&x, a);
  if (f.rows) {
    int64_t min_rows = MIN_CHUNK / x.row_len;
    dvm_ew_parallel(a, total / x.row_len, min_rows ? min_rows : 1, exec_rows, &x);
  } else {
    dvm_ew_parallel(a, total, MIN_CHUNK, exec_range, &x);
  }
  if (failed)
    return dvm_status_new(DVM_OUT_OF_MEMORY, "fused: out of memory for the scratch of rows of %lld",
                          (long long)x.row_len);
  return NULL;
}

/* ---- the builder ---- */

/* Keeps the first mistake; returns -1 for the caller to return. */
DVM_PRINTF(2, 3) static int berr(dvm_fused_builder *b, const char *fmt, ...) {
  if (!b->error) {
    va_list ap;
    va_start(ap, fmt);
    b->error = dvm_status_annotate(dvm_status_newv(DVM_INVALID_ARGUMENT, fmt, ap), "fused builder");
    va_end(ap);
  }
  return -1;
}

void dvm_fused_builder_init(dvm_fused_builder *b) { memset(b, 0, sizeof *b); }

static int declare(dvm_fused_builder *b, dvm_dtype dt, int out) {
  const char *what = out ? "output" : "input";
  int *n = out ? &b->noutputs : &b->ninputs, max = out ? DVM_FUSED_MAX_OUTPUTS : DVM_FUSED_MAX_INPUTS;
  if (b->error) return -1;
  if (rt_of_io(dt) < 0)
    return berr(b, "%s %d: dtype %s is not f32, f16, bf16, i32, i64 or bool", what, *n,
                dt < DVM_DTYPE_COUNT ? dvm_dtype_name(dt) : "unknown");
  if (*n == max) return berr(b, "more than %d %ss", max, what);
  (out ? b->out_dtype : b->in_dtype)[*n] = (uint8_t)dt;
  return (*n)++;
}

int dvm_fused_input(dvm_fused_builder *b, dvm_dtype dt) { return declare(b, dt, 0); }
int dvm_fused_output(dvm_fused_builder *b, dvm_dtype dt) { return declare(b, dt, 1); }

/* Appends an instruction; its result, of register type rt (-1: none), is
 * a new value. */
static int emit(dvm_fused_builder *b, int op, int rt, int a, int x, int c, int64_t imm) {
  if (b->error) return -1;
  if (b->ninstrs == DVM_FUSED_MAX_INSTRS) return berr(b, "more than %d instructions", DVM_FUSED_MAX_INSTRS);
  struct dvm_fused_binstr *in = &b->instrs[b->ninstrs++];
  *in = (struct dvm_fused_binstr){(uint8_t)op, -1, (int16_t)a, (int16_t)x, (int16_t)c, imm};
  if (rt < 0) return 0;
  in->dst = (int16_t)b->nvalues;
  b->value_type[b->nvalues] = (uint8_t)rt;
  return b->nvalues++;
}

/* The register type of value v, or -1 (a mistake). */
static int value(dvm_fused_builder *b, const char *op, int v) {
  if (b->error) return -1;
  if (v < 0 || v >= b->nvalues) return berr(b, "%s: no value %d", op, v);
  return b->value_type[v];
}

int dvm_fused_load(dvm_fused_builder *b, int input) {
  if (b->error) return -1;
  if (input < 0 || input >= b->ninputs) return berr(b, "load: no input %d", input);
  return emit(b, DVM_FUSED_LOAD, rt_of_io(b->in_dtype[input]), input, 0, 0, 0);
}

int dvm_fused_const_f32(dvm_fused_builder *b, double v) {
  int64_t imm;
  memcpy(&imm, &v, 8);
  return emit(b, DVM_FUSED_CONST, RT_F32, 0, 0, 0, imm);
}

int dvm_fused_const_i64(dvm_fused_builder *b, int64_t v) {
  return emit(b, DVM_FUSED_CONST, RT_I64, 0, 0, 0, v);
}

int dvm_fused_const_bool(dvm_fused_builder *b, int v) {
  return emit(b, DVM_FUSED_CONST, RT_BOOL, 0, 0, 0, v != 0);
}

/* The type of operand x of op (of kind `kind`), or -1 (a mistake). */
static int operand(dvm_fused_builder *b, dvm_fused_op op, int kind, int x) {
  if (b->error) return -1;
  if (op <= 0 || op >= DVM_FUSED_OP_END || optab[op].kind != kind)
    return berr(b, "opcode %d is not a %s op", op, kind == K_UNARY ? "unary" : "binary");
  int t = value(b, optab[op].name, x);
  if (t >= 0 && !optab[op].fn[t])
    return berr(b, "%s does not take %s values", optab[op].name, dvm_dtype_name(rt_dtype[t]));
  return t;
}

int dvm_fused_op1(dvm_fused_builder *b, dvm_fused_op op, int x) {
  int t = operand(b, op, K_UNARY, x);
  return t < 0 ? -1 : emit(b, op, t, x, 0, 0, 0);
}

int dvm_fused_op2(dvm_fused_builder *b, dvm_fused_op op, int x, int y) {
  int t = operand(b, op, K_BINARY, x);
  int u = t < 0 ? -1 : value(b, optab[op].name, y);
  if (u < 0) return -1;
  if (t != u)
    return berr(b, "%s of %s and %s values", optab[op].name, dvm_dtype_name(rt_dtype[t]),
                dvm_dtype_name(rt_dtype[u]));
  return emit(b, op, optab[op].to_bool ? RT_BOOL : t, x, y, 0, 0);
}

int dvm_fused_where(dvm_fused_builder *b, int cond, int x, int y) {
  int tc = value(b, "where", cond), t = value(b, "where", x), u = value(b, "where", y);
  if (tc < 0 || t < 0 || u < 0) return -1;
  if (tc != RT_BOOL || t != u)
    return berr(b, "where of %s, %s and %s values: want bool, then two of one type",
                dvm_dtype_name(rt_dtype[tc]), dvm_dtype_name(rt_dtype[t]), dvm_dtype_name(rt_dtype[u]));
  return emit(b, DVM_FUSED_WHERE, t, cond, x, y, 0);
}

int dvm_fused_cast(dvm_fused_builder *b, int x, dvm_dtype to) {
  if (value(b, "cast", x) < 0) return -1;
  int rt = rt_of_reg(to);
  if (rt < 0) return berr(b, "cast to dtype %d: want f32, i64 or bool", to);
  return emit(b, DVM_FUSED_CAST, rt, x, 0, 0, 0);
}

int dvm_fused_row_reduce(dvm_fused_builder *b, dvm_fused_op op, int x) {
  if (b->error) return -1;
  if (op <= 0 || op >= DVM_FUSED_OP_END || optab[op].kind != K_REDUCE)
    return berr(b, "opcode %d is not a row reduction", op);
  int t = value(b, optab[op].name, x);
  if (t >= 0 && t != RT_F32) return berr(b, "%s does not take %s values", optab[op].name, dvm_dtype_name(rt_dtype[t]));
  if (t < 0) return -1;
  b->rows = 1;
  return emit(b, op, RT_F32, x, 0, 0, 0);
}

void dvm_fused_store(dvm_fused_builder *b, int output, int v) {
  int t = value(b, "store", v);
  if (t < 0) return;
  if (output < 0 || output >= b->noutputs) {
    berr(b, "store: no output %d", output);
    return;
  }
  if (rt_of_io(b->out_dtype[output]) != t) {
    berr(b, "store: output %d is %s, the value %s", output,
         dvm_dtype_name((dvm_dtype)b->out_dtype[output]), dvm_dtype_name(rt_dtype[t]));
    return;
  }
  if (emit(b, DVM_FUSED_STORE, -1, v, 0, 0, 0) == 0) b->instrs[b->ninstrs - 1].dst = (int16_t)output;
}

/* Registers for values: loads and consts get one of their own (written
 * once, so a load may read its input in place and a const is set once per
 * thread); other values reuse the register of a value of their type whose
 * last use has passed, which may be one of their own operands. */
static dvm_status *assign(const dvm_fused_builder *b, uint8_t *reg_of, uint8_t *reg_type,
                          int *nregs) {
  int16_t last[DVM_FUSED_MAX_VALUES];
  uint8_t pinned[DVM_FUSED_MAX_VALUES] = {0};
  int reads[3];
  for (int v = 0; v < b->nvalues; v++) last[v] = -1;
  for (int i = 0; i < b->ninstrs; i++) {
    const struct dvm_fused_binstr *in = &b->instrs[i];
    reads_of(in->op, in->a, in->b, in->c, reads);
    for (int k = 0; k < 3; k++)
      if (reads[k] >= 0) last[reads[k]] = (int16_t)i;
    if (in->op == DVM_FUSED_LOAD || in->op == DVM_FUSED_CONST) pinned[in->dst] = 1;
  }
  int free_regs[DVM_FUSED_MAX_REGS], nfree = 0;
  *nregs = 0;
  for (int i = 0; i < b->ninstrs; i++) {
    const struct dvm_fused_binstr *in = &b->instrs[i];
    reads_of(in->op, in->a, in->b, in->c, reads);
    for (int k = 0; k < 3; k++)
      if (reads[k] >= 0 && last[reads[k]] == i) {
        last[reads[k]] = -1; /* freed once, even if read twice here */
        if (!pinned[reads[k]]) free_regs[nfree++] = reg_of[reads[k]];
      }
    if (in->op == DVM_FUSED_STORE) continue;
    int v = in->dst, r = -1;
    for (int k = 0; k < nfree && r < 0 && !pinned[v]; k++)
      if (reg_type[free_regs[k]] == b->value_type[v]) {
        r = free_regs[k];
        free_regs[k] = free_regs[--nfree];
      }
    if (r < 0) {
      if (*nregs == DVM_FUSED_MAX_REGS)
        return dvm_status_new(DVM_INVALID_ARGUMENT,
                              "fused builder: more than %d registers live at instruction %d",
                              DVM_FUSED_MAX_REGS, i);
      r = (*nregs)++;
      reg_type[r] = b->value_type[v];
    }
    reg_of[v] = (uint8_t)r;
    if (last[v] < 0 && !pinned[v]) free_regs[nfree++] = r; /* never read */
  }
  return NULL;
}

static void put_u16(uint8_t *p, unsigned v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

dvm_status *dvm_fused_builder_finish(dvm_fused_builder *b, void **payload, size_t *size) {
  *payload = NULL;
  *size = 0;
  dvm_status *st = b->error;
  b->error = NULL;
  if (!st && (b->ninputs == 0 || b->noutputs == 0))
    st = dvm_status_new(DVM_INVALID_ARGUMENT, "fused builder: a program needs an input and an output");
  uint8_t reg_of[DVM_FUSED_MAX_VALUES], reg_type[DVM_FUSED_MAX_REGS];
  int nregs = 0;
  if (!st) st = assign(b, reg_of, reg_type, &nregs);
  if (st) return st;
  size_t head = tables_end(b->ninputs, b->noutputs, nregs);
  size_t n = head + (size_t)b->ninstrs * DVM_FUSED_INSTR_SIZE;
  uint8_t *p = calloc(1, n);
  if (!p) return dvm_status_new(DVM_OUT_OF_MEMORY, "");
  memcpy(p, DVM_FUSED_MAGIC, 4);
  put_u16(p + 4, DVM_FUSED_VERSION);
  p[6] = (uint8_t)b->ninputs;
  p[7] = (uint8_t)b->noutputs;
  p[8] = (uint8_t)nregs;
  p[9] = b->rows ? DVM_FUSED_ROWS : 0;
  put_u16(p + 10, (unsigned)b->ninstrs);
  uint8_t *t = p + DVM_FUSED_HEADER_SIZE;
  memcpy(t, b->in_dtype, (size_t)b->ninputs);
  memcpy(t + b->ninputs, b->out_dtype, (size_t)b->noutputs);
  for (int r = 0; r < nregs; r++) t[b->ninputs + b->noutputs + r] = (uint8_t)rt_dtype[reg_type[r]];
  for (int i = 0; i < b->ninstrs; i++) {
    const struct dvm_fused_binstr *in = &b->instrs[i];
    uint8_t *q = p + head + (size_t)i * DVM_FUSED_INSTR_SIZE;
    int kind = optab[in->op].kind;
    q[0] = in->op;
    q[1] = (uint8_t)(kind == K_STORE ? in->dst : reg_of[in->dst]);
    q[2] = (uint8_t)(kind == K_LOAD ? in->a : kind == K_CONST ? 0 : reg_of[in->a]);
    q[3] = (uint8_t)(kind == K_BINARY || kind == K_WHERE ? reg_of[in->b] : 0);
    q[4] = (uint8_t)(kind == K_WHERE ? reg_of[in->c] : 0);
    for (int k = 0; k < 8; k++) q[8 + k] = (uint8_t)((uint64_t)in->imm >> (8 * k));
  }
  if ((st = dvm_fused_validate(p, n))) {
    free(p);
    return dvm_status_annotate(st, "fused builder: internal error");
  }
  *payload = p;
  *size = n;
  return NULL;
}

const dvm_kernel_def dvm_cpu_fused_kernels[] = {
    {"fused", DVM_DEVICE_CPU, fused, "broadcast", .inplace = 1, .form = DVM_FORM_FUSED},
    {NULL, DVM_DEVICE_CPU, NULL, NULL},
};
