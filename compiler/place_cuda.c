/* Placement for CUDA (see place_cuda.h; docs/cuda.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytecode.h"
#include "cuda_codegen.h"
#include "nvrtc.h"
#include "instr.h"
#include "ops/cpu/fused.h"
#include "ops/cuda/gen_abi.h"
#include "ops/optable.h"
#include "dvmc.h"
#include "place_cuda.h"
#include "shapefuncs/registry.h"
#include "shapefuncs/window.h"

#define PUSH(p, vec, item) DVM_VEC_PUSH(vec, item, (p)->oom = 1)

/* A generated kernel, kept by source so that equal groups share one. */
typedef struct gen {
  char *src;
  uint32_t kernel; /* its index in the new kernel table */
} gen;

typedef struct placer {
  dvm_module *m;
  uint32_t nfuncs;           /* the original functions; clone i is nfuncs + i */
  DVM_VEC(dvm_kernel_ref) kernels;
  DVM_VEC(gen) gens;
  DVM_VEC(void *) owned;         /* names and payloads, freed at the end */
  int dry;                       /* plans only: no payload is compiled */
  int oom;
  dvm_status *error;
} placer;

/* What the placer knows of one register of the function being cloned,
 * from a linear scan; facts hold only for registers written once. */
typedef struct fact {
  uint32_t writes;
  uint32_t def;     /* the instruction that writes it, when written once */
  uint8_t tensor;   /* some instruction puts a tensor in it */
  int8_t dtype;     /* -1 unknown */
  uint8_t has_imm, has_fimm;
  int64_t imm;
  double fimm;
  dvm_list shape;        /* make_shape's dims (v NULL: none) */
  int64_t tshape;        /* a tensor's shape: a make_shape register, or a constant */
  dvm_list tdims;        /* ... or immediate dims */
  int tshape_kind;       /* 0 none, 1 register, 2 immediate dims, 3 constant, 4 parameter */
  int8_t out_dev;        /* the device of the first invoke that writes it, -1 none */
  uint8_t allocated;     /* by `alloc` or `alloc_tensor` (which follow out_dev), not a view */
} fact;

typedef struct clone {
  placer *p;
  const dvm_func *f;
  fact *facts;
  dvm_words code;
  DVM_VEC(const char *) src;
  DVM_VEC(uint32_t) jumps; /* words holding old jump targets */
  uint32_t *map;       /* old word offset -> new */
  uint32_t nregs;
  const char *loc;
  const char *why; /* why the last invoke planned stays on the host */
} clone;

static char *own_str(placer *p, const char *s) {
  char *d = strdup(s);
  if (d) PUSH(p, p->owned, d);
  else p->oom = 1;
  return d;
}

/* Appends an instruction: EMIT(c, INVOKE, operands...). */
#define EMIT(c, op, ...)                                         \
  do {                                                           \
    PUSH((c)->p, (c)->src, (c)->loc);                            \
    dvm_encode_##op(&(c)->code, &(c)->p->oom, __VA_ARGS__);      \
  } while (0)

/* ---- facts ---- */

typedef struct {
  fact *F;
  const int64_t *instr;
  uint32_t i;
} counting;

static void count_write(void *ctx, char letter, uint32_t word) {
  counting *k = ctx;
  if (letter == 'd' || letter == 'D') k->F[k->instr[word]].writes++, k->F[k->instr[word]].def = k->i;
}

/* A tensor that an alloc instruction makes with its shape in register `shape`. */
static void allocated(fact *r, int64_t dtype, int64_t shape) {
  r->tensor = 1, r->dtype = (int8_t)dtype, r->tshape_kind = 1, r->tshape = shape;
  r->allocated = 1;
}

static void scan(clone *c) {
  const dvm_func *f = c->f;
  const dvm_module *m = c->p->m;
  fact *F = c->facts;
  for (uint32_t r = 0; r < f->nregs; r++) F[r].dtype = -1, F[r].out_dev = -1;
  for (uint32_t k = 0; k < f->nparams; k++)
    if (f->params[k].kind == DVM_VAL_TENSOR) {
      F[k].tensor = 1;
      F[k].dtype = (int8_t)f->params[k].dtype;
      F[k].tshape_kind = 4;
    }
  for (uint32_t i = 0; i < f->ninstr; i++) {
    const int64_t *instr = f->code + f->starts[i];
    dvm_instr_operands(instr, 0, count_write, &(counting){F, instr, i});
    switch (instr[0]) {
    case DVM_OP_IMM: {
      dvm_ops_IMM x = dvm_decode_IMM(instr);
      F[x.dst].has_imm = 1, F[x.dst].imm = x.value;
      break;
    }
    case DVM_OP_FIMM: {
      dvm_ops_FIMM x = dvm_decode_FIMM(instr);
      F[x.dst].has_fimm = 1, memcpy(&F[x.dst].fimm, &x.value, sizeof(double));
      break;
    }
    case DVM_OP_MAKE_SHAPE: {
      dvm_ops_MAKE_SHAPE x = dvm_decode_MAKE_SHAPE(instr);
      F[x.dst].shape = x.dims;
      break;
    }
    case DVM_OP_CONST: {
      dvm_ops_CONST x = dvm_decode_CONST(instr);
      F[x.dst].tensor = 1, F[x.dst].dtype = (int8_t)m->consts[x.constant].dtype;
      F[x.dst].tshape_kind = 3, F[x.dst].tshape = x.constant;
      break;
    }
    case DVM_OP_ALLOC: {
      dvm_ops_ALLOC x = dvm_decode_ALLOC(instr);
      allocated(&F[x.dst], x.dtype, x.shape);
      break;
    }
    case DVM_OP_ALLOC_RESULT: {
      dvm_ops_ALLOC_RESULT x = dvm_decode_ALLOC_RESULT(instr);
      allocated(&F[x.dst], x.dtype, x.shape);
      break;
    }
    case DVM_OP_ALLOC_TENSOR: { /* follows out_dev too: on the host it leaves its storage */
      dvm_ops_ALLOC_TENSOR x = dvm_decode_ALLOC_TENSOR(instr);
      allocated(&F[x.dst], x.dtype, x.shape);
      break;
    }
    case DVM_OP_ALLOC_TENSOR_I: {
      dvm_ops_ALLOC_TENSOR_I x = dvm_decode_ALLOC_TENSOR_I(instr);
      F[x.dst].tensor = 1, F[x.dst].dtype = (int8_t)x.dtype, F[x.dst].tshape_kind = 2, F[x.dst].tdims = x.dims;
      break;
    }
    case DVM_OP_COPY: F[dvm_decode_COPY(instr).dst].tensor = 1; break;
    case DVM_OP_RESHAPE: {
      dvm_ops_RESHAPE x = dvm_decode_RESHAPE(instr);
      F[x.dst].tensor = 1, F[x.dst].tshape_kind = 1, F[x.dst].tshape = x.shape;
      break;
    }
    case DVM_OP_MOVE: {
      dvm_ops_MOVE x = dvm_decode_MOVE(instr);
      F[x.dst].tensor |= F[x.src].tensor;
      break;
    }
    case DVM_OP_CALL: {
      dvm_ops_CALL x = dvm_decode_CALL(instr);
      const dvm_func *g = &m->funcs[x.func];
      for (int64_t q = 0; q < x.dsts.n && q < g->nresults; q++)
        F[x.dsts.v[q]].tensor |= g->results[q].kind == DVM_VAL_TENSOR;
      break;
    }
    default: break;
    }
  }
  /* views and copies keep their source's dtype, known once it is
   * written once (a source defined later stays unknown) */
  for (uint32_t i = 0; i < f->ninstr; i++) {
    const int64_t *instr = f->code + f->starts[i];
    int64_t dst, src;
    switch (instr[0]) {
    case DVM_OP_RESHAPE: dst = dvm_decode_RESHAPE(instr).dst, src = dvm_decode_RESHAPE(instr).src; break;
    case DVM_OP_COPY: dst = dvm_decode_COPY(instr).dst, src = dvm_decode_COPY(instr).src; break;
    case DVM_OP_MOVE: dst = dvm_decode_MOVE(instr).dst, src = dvm_decode_MOVE(instr).src; break;
    default: continue;
    }
    if (F[src].writes <= 1) F[dst].dtype = F[src].dtype;
  }
}

/* ---- shapes, as far as the bytecode proves them ---- */

/* A dim: a known value, or a register written at most once. */
typedef struct dimd {
  int is_reg;
  int64_t v;
} dimd;

static int dim_of_reg(const clone *c, int64_t r, dimd *d) {
  const fact *F = &c->facts[r];
  if (F->writes == 1 && F->has_imm) *d = (dimd){0, F->imm};
  else if (F->writes == 0) *d = (dimd){1, r}; /* a symbol bound by a guard, or a parameter */
  else return 0;
  return 1;
}

/* The dims of tensor register r, or -1 when they are not known. */
static int shape_of(const clone *c, int64_t r, dimd *d) {
  const fact *F = &c->facts[r];
  if (!F->tensor || F->writes > 1) return -1;
  switch (F->tshape_kind) {
  case 1: {
    const fact *S = &c->facts[F->tshape];
    if (S->writes != 1 || !S->shape.v) return -1;
    for (int64_t k = 0; k < S->shape.n; k++)
      if (!dim_of_reg(c, S->shape.v[k], &d[k])) return -1;
    return (int)S->shape.n;
  }
  case 2:
    for (int64_t k = 0; k < F->tdims.n; k++) d[k] = (dimd){0, F->tdims.v[k]};
    return (int)F->tdims.n;
  case 3: {
    const dvm_const *k = &c->p->m->consts[F->tshape];
    for (int q = 0; q < k->rank; q++) d[q] = (dimd){0, k->dims[q]};
    return k->rank;
  }
  case 4: {
    const dvm_sig *s = &c->f->params[r];
    if (s->rank < 0) return -1;
    for (int q = 0; q < s->rank; q++) {
      int64_t sym = dvm_dim_symbol(s->dims[q]);
      if (s->dims[q] >= 0) d[q] = (dimd){0, s->dims[q]};
      else if (sym >= 0) d[q] = (dimd){1, c->f->syms[sym].reg};
      else return -1;
    }
    return s->rank;
  }
  default: return -1;
  }
}

/* How input `in` is read when the output is `out` (gen_abi.h classes). */
static uint8_t classify(const clone *c, int64_t in, int64_t out) {
  dimd di[DVM_MAX_RANK], dout[DVM_MAX_RANK];
  int ri = shape_of(c, in, di), ro = shape_of(c, out, dout);
  if (ri < 0) return DVM_GEN_STRIDED;
  int known_one = 1;
  for (int k = 0; k < ri; k++) known_one &= !di[k].is_reg && di[k].v == 1;
  if (known_one) return DVM_GEN_SCALAR;
  if (ro < 0 || ri > ro) return DVM_GEN_STRIDED;
  for (int k = 1; k <= ri; k++) {
    dimd a = di[ri - k], b = dout[ro - k];
    if (a.is_reg != b.is_reg || a.v != b.v) return DVM_GEN_STRIDED;
  }
  return ri == ro ? DVM_GEN_SAME : DVM_GEN_SUFFIX;
}

/* ---- kernels ---- */

static uint32_t add_kernel(placer *p, const char *name, uint32_t nvariants, void *payload,
                           size_t size) {
  for (size_t i = 0; i < p->kernels.n; i++)
    if (p->kernels.v[i].device == DVM_DEVICE_CUDA && strcmp(p->kernels.v[i].name, name) == 0)
      return (uint32_t)i;
  dvm_kernel_ref k = {.name = own_str(p, name), .device = DVM_DEVICE_CUDA, .nvariants = nvariants,
                      .payload = payload, .payload_size = size};
  PUSH(p, p->kernels, k);
  return (uint32_t)p->kernels.n - 1;
}

/* The kernel for generated source `src` (taken), compiled once. */
static int64_t gen_kernel(placer *p, char *src, int kind, int nin, int nout,
                          const uint8_t *classes, const dvm_dtype *dtypes) {
  for (size_t i = 0; i < p->gens.n; i++)
    if (strcmp(p->gens.v[i].src, src) == 0) {
      free(src);
      return p->gens.v[i].kernel;
    }
  if (p->dry) {
    free(src);
    return 0;
  }
  char name[32];
  snprintf(name, sizeof name, "gen@%zu", p->gens.n);
  void *payload = NULL;
  size_t size = 0;
  p->error = dvmc_cuda_payload(kind, nin, nout, classes, dtypes, src, name, &payload, &size);
  if (p->error) {
    free(src);
    return -1;
  }
  PUSH(p, p->owned, payload);
  uint32_t k = add_kernel(p, name, DVMC_CUDA_TILE + 1, payload, size);
  PUSH(p, p->gens, ((gen){src, k}));
  return k;
}

/* How one invoke runs on the CUDA device. */
typedef struct plan {
  int64_t kernel;  /* index in the new table; -1: on the host */
  int generated;   /* a gen kernel: set the variant, drop attrs */
  int rows;        /* its extent is the last dim of input 0, not numel of output 0 */
  int numel_in;    /* its extent is numel of input 0 (a split) */
  int keep_attrs;  /* a gen kernel that reads the attributes (a transpose's perm) */
  int merge;       /* >= 0: input 0's dims from this one on are merged into one (a
                    * reshape before the call), its rank `rank`; -1: none */
  int rank;
  int const_ins;   /* a slice or split: inputs 1.. (constants) passed as shapes before
                    * the call's attributes */
} plan;

static int float_dt(int dt) { return dt == DVM_F32 || dt == DVM_F16 || dt == DVM_BF16; }

/* The rank of tensor register r when the bytecode proves it, else -1. */
static int rank_of(const clone *c, int64_t r) {
  const fact *F = &c->facts[r];
  if (!F->tensor || F->writes > 1) return -1;
  switch (F->tshape_kind) {
  case 1: {
    const fact *S = &c->facts[F->tshape];
    return S->writes == 1 && S->shape.v ? (int)S->shape.n : -1;
  }
  case 2: return (int)F->tdims.n;
  case 3: return c->p->m->consts[F->tshape].rank;
  case 4: return c->f->params[r].rank;
  default: return -1;
  }
}

/* For a reduction whose axes attribute `axes` (a shape of known values)
 * names the trailing axes of a tensor of rank `rank`, the first of them;
 * else -1. Each axis once: the CPU kernel refuses repeats. */
static int trailing_axes(const clone *c, int64_t axes, int rank) {
  const fact *a = &c->facts[axes];
  uint32_t seen = 0;
  if (a->writes != 1 || !a->shape.v || a->shape.n < 1 || a->shape.n > rank) return -1;
  for (int64_t k = 0; k < a->shape.n; k++) {
    const fact *ax = &c->facts[a->shape.v[k]];
    int64_t v = ax->writes == 1 && ax->has_imm ? ax->imm : INT64_MIN;
    if (v < 0 && v != INT64_MIN) v += rank; /* -1 alone needs no rank */
    if (v < rank - a->shape.n || v >= rank || (seen >> v & 1)) return -1;
    seen |= 1u << v;
  }
  return rank - (int)a->shape.n;
}

/* A ROWS kernel for the invoke, when it works over the last axis of
 * float tensors whose dtypes are known (a reduction: over trailing axes,
 * with the rank known, *merge set to the first); -1 otherwise. */
static int64_t rows_kernel(clone *c, dvm_kernel_form op, dvm_list outs, dvm_list ins,
                           dvm_list attrs, plan *pl) {
  const fact *F = c->facts;
  int nin = (int)ins.n;
  double eps = 0;
  c->why = "not over the trailing axes (axes known at compile time; with the rank, beyond the last)";
  if (outs.n != 1 || nin < 1) return -1;
  pl->rank = rank_of(c, ins.v[0]);
  if (op == DVM_FORM_ROWS_GLOBAL_MEAN) { /* every axis from 2 on */
    if (attrs.n != 0 || pl->rank < 3 || pl->rank > DVM_MAX_RANK) return -1;
    pl->merge = 2;
    op = DVM_FORM_ROWS_MEAN;
  } else if (attrs.n < 1) {
    return -1;
  } else if (op < DVM_FORM_ROWS_SUM) { /* softmax, logsoftmax, layernorm, rmsnorm: the last axis */
    const fact *a0 = &F[attrs.v[0]];
    if (a0->writes != 1 || !a0->has_imm || (a0->imm != -1 && (pl->rank < 1 || a0->imm != pl->rank - 1)))
      return -1;
  } else { /* axes: the trailing ones */
    int first = trailing_axes(c, attrs.v[0], pl->rank > DVM_MAX_RANK ? -1 : pl->rank);
    const fact *ax = &F[F[attrs.v[0]].shape.v ? F[attrs.v[0]].shape.v[0] : attrs.v[0]];
    int last_alone = F[attrs.v[0]].shape.n == 1 && ax->writes == 1 && ax->has_imm && ax->imm == -1;
    if (!last_alone && first < 0) return -1;
    pl->merge = last_alone || first == pl->rank - 1 ? -1 : first;
  }
  /* the merged input's rank, first + 1, must be a generated kernel's */
  if (pl->merge + 1 > DVM_GEN_MAX_RANK) return -1;
  c->why = "epsilon not known at compile time, or operands other than a row kernel's";
  if (op == DVM_FORM_ROWS_LAYERNORM || op == DVM_FORM_ROWS_RMSNORM) {
    if (attrs.n < 2 || F[attrs.v[1]].writes != 1 || !F[attrs.v[1]].has_fimm) return -1;
    eps = F[attrs.v[1]].fimm;
  } else if (nin != 1) {
    return -1;
  }
  c->why = "dtype not proven f32, f16 or bf16";
  dvm_dtype dt[DVM_GEN_MAX_IN + 1];
  uint8_t classes[DVM_GEN_MAX_IN] = {0};
  for (int k = 0; k <= nin; k++) {
    int d = F[k < nin ? ins.v[k] : outs.v[0]].dtype;
    if (!float_dt(d) || F[k < nin ? ins.v[k] : outs.v[0]].writes > 1) return -1;
    dt[k] = (dvm_dtype)d;
    classes[k] = k ? DVM_GEN_SUFFIX : DVM_GEN_SAME;
  }
  char *src;
  if ((c->p->error = dvmc_cuda_rows(op, nin, dt, eps, &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_ROWS, nin, 1, classes, dt);
}

/* A generated ELEMENTWISE kernel running fused program `prog`, its inputs
 * classified against output 0; -1 on failure (p->error). */
static int64_t elementwise_kernel(clone *c, const uint8_t *prog, size_t size, dvm_list outs,
                                  dvm_list ins) {
  int nin = prog[6], nout = prog[7];
  uint8_t classes[DVM_GEN_MAX_IN];
  dvm_dtype dt[DVM_GEN_MAX_IN + DVM_GEN_MAX_OUT];
  for (int q = 0; q < nin + nout; q++) dt[q] = (dvm_dtype)prog[16 + q];
  for (int q = 0; q < nin; q++) classes[q] = classify(c, ins.v[q], outs.v[0]);
  char *src;
  if ((c->p->error = dvmc_cuda_elementwise(prog, size, classes, &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_ELEMENTWISE, nin, nout, classes, dt);
}

/* The fused program of kernel table entry k (a fused@N) as a generated
 * kernel; -1 on failure (p->error, or p->oom). */
static int64_t fused_kernel(clone *c, const dvm_kernel_ref *k, dvm_list outs, dvm_list ins) {
  placer *p = c->p;
  dvm_fused_program *g = malloc(sizeof *g);
  int64_t kernel = -1;
  if (!g) {
    p->oom = 1;
    return -1;
  }
  if (!(p->error = dvm_fused_read(k->payload, k->payload_size, g))) {
    if (g->rows)
      p->error = dvm_status_new(DVM_UNIMPLEMENTED, "a row program (row stitching) has no CUDA version: "
                                                   "compile with --no-stitch");
    else
      kernel = elementwise_kernel(c, k->payload, k->payload_size, outs, ins);
  }
  free(g);
  return kernel;
}

/* A standalone elementwise op (add, cast, where...) as a one-op fused
 * program, when the dtypes of its operands and its attributes are known
 * here and DVMF computes it exactly (dvmc_cuda_op_program); -1 otherwise. */
static int64_t single_kernel(clone *c, const char *name, dvm_list outs, dvm_list ins,
                             dvm_list attrs) {
  const fact *F = c->facts;
  int nin = (int)ins.n;
  c->why = "more operands or attributes than a generated kernel takes";
  if (outs.n != 1 || nin > 3 || attrs.n > 2) return -1;
  dvm_dtype dt[4];
  c->why = "dtype not proven";
  for (int k = 0; k <= nin; k++) {
    const fact *t = &F[k < nin ? ins.v[k] : outs.v[0]];
    if (t->writes > 1 || t->dtype < 0) return -1;
    dt[k] = (dvm_dtype)t->dtype;
  }
  dvmc_cuda_attr at[2] = {{0}};
  for (int q = 0; q < attrs.n; q++) {
    const fact *a = &F[attrs.v[q]];
    if (a->writes == 1 && a->has_imm) at[q] = (dvmc_cuda_attr){DVMC_ATTR_INT, a->imm, 0};
    else if (a->writes == 1 && a->has_fimm) at[q] = (dvmc_cuda_attr){DVMC_ATTR_FLOAT, 0, a->fimm};
  }
  void *prog = NULL;
  size_t size = 0;
  c->why = "dtypes or attributes for which the generated code would differ from the CPU kernel";
  if ((c->p->error = dvmc_cuda_op_program(name, nin, dt, (int)attrs.n, at, &prog, &size)) || !prog)
    return -1;
  int64_t k = elementwise_kernel(c, prog, size, outs, ins);
  free(prog);
  return k;
}

/* A generated ELEMENTWISE copy of dtype dt whose one input is of class
 * cls (PERMUTED, SLICED), when a register carries dt exactly; -1
 * otherwise. */
static int64_t copy_kernel(clone *c, dvm_dtype dt, uint8_t cls) {
  void *prog = NULL;
  size_t size = 0;
  if ((c->p->error = dvmc_cuda_transpose_program(dt, &prog, &size)) || !prog) return -1;
  dvm_dtype dts[2] = {dt, dt};
  char *src;
  int64_t k = -1;
  if (!(c->p->error = dvmc_cuda_elementwise(prog, size, &cls, &src)))
    k = gen_kernel(c->p, src, DVM_GEN_ELEMENTWISE, 1, 1, &cls, dts);
  free(prog);
  return k;
}

/* A transpose as a generated copy whose one input is read through the
 * perm (DVM_GEN_PERMUTED; the invoke keeps its perm attribute for the
 * launcher), when its dtype is known and a register carries it exactly;
 * -1 otherwise. */
static int64_t transpose_kernel(clone *c, dvm_list outs, dvm_list ins,
                                dvm_list attrs) {
  const fact *x = &c->facts[ins.v[0]], *y = &c->facts[outs.v[0]];
  dimd d[DVM_MAX_RANK];
  c->why = "dtype not proven f32, i32 or i64, or rank above 6";
  /* a rank the bytecode proves above the kernels' is left to the host; an
   * unproven one is checked by the launcher */
  if (ins.n != 1 || outs.n != 1 || attrs.n > 1 || x->writes > 1 || y->writes > 1 ||
      x->dtype < 0 || y->dtype != x->dtype || shape_of(c, ins.v[0], d) > DVM_GEN_MAX_RANK)
    return -1;
  return copy_kernel(c, (dvm_dtype)x->dtype, DVM_GEN_PERMUTED);
}

/* The values of constant register r, an i64 or i32 tensor of rank 0 or 1
 * in the module's bytes; -1 when it is not one. */
static int const_ints(const clone *c, int64_t r, int64_t *v) {
  const fact *F = &c->facts[r];
  if (F->writes != 1 || F->tshape_kind != 3) return -1;
  const dvm_const *k = &c->p->m->consts[F->tshape];
  int64_t n = k->rank ? k->dims[0] : 1;
  if ((k->dtype != DVM_I64 && k->dtype != DVM_I32) || k->rank > 1 || n > DVM_MAX_RANK || !k->data ||
      k->ext_path)
    return -1;
  for (int64_t q = 0; q < n; q++)
    if (k->dtype == DVM_I64) memcpy(&v[q], (const char *)k->data + 8 * q, 8);
    else {
      int32_t x;
      memcpy(&x, (const char *)k->data + 4 * q, 4);
      v[q] = x;
    }
  return (int)n;
}

/* A slice as a generated copy whose one input is read from an offset
 * through strides (DVM_GEN_SLICED), when its dtype is known and a register
 * carries it exactly, and its starts, ends, axes and steps are constants
 * (the invoke carries them as shapes); -1 otherwise. */
static int64_t slice_kernel(clone *c, dvm_list outs, dvm_list ins) {
  const fact *x = &c->facts[ins.v[0]], *y = &c->facts[outs.v[0]];
  int64_t v[DVM_MAX_RANK];
  c->why = "dtype not proven f32, i32 or i64, or rank above 6";
  if (ins.n < 3 || ins.n > 5 || outs.n != 1 || x->writes > 1 || y->writes > 1 || x->dtype < 0 ||
      y->dtype != x->dtype || rank_of(c, ins.v[0]) > DVM_GEN_MAX_RANK)
    return -1;
  c->why = "starts, ends, axes or steps not constants";
  for (int64_t q = 1; q < ins.n; q++)
    if (const_ints(c, ins.v[q], v) < 0) return -1;
  c->why = "dtype not proven f32, i32 or i64, or rank above 6";
  return copy_kernel(c, (dvm_dtype)x->dtype, DVM_GEN_SLICED);
}

/* A split as a generated SPLIT kernel, when its input's dtype and every
 * output's are known and equal, and its sizes, if given, a constant (the
 * invoke carries them as a shape before its axis attribute); -1 otherwise. */
static int64_t split_kernel(clone *c, dvm_list outs, dvm_list ins, dvm_list attrs) {
  const fact *x = &c->facts[ins.v[0]];
  int64_t v[DVM_MAX_RANK];
  dvm_dtype dt[1 + DVM_GEN_MAX_OUT];
  uint8_t cls = DVM_GEN_SAME; /* unused: the launcher binds a split */
  c->why = "more outputs than a generated kernel takes, or sizes not a constant";
  if (ins.n < 1 || ins.n > 2 || outs.n < 1 || outs.n > DVM_GEN_MAX_OUT || attrs.n > 2 ||
      (ins.n == 2 && const_ints(c, ins.v[1], v) < 0))
    return -1;
  c->why = "dtype not proven, or of strings";
  for (int64_t q = 0; q <= outs.n; q++) {
    const fact *t = q ? &c->facts[outs.v[q - 1]] : x;
    if (t->writes > 1 || t->dtype < 0 || t->dtype == DVM_STRING || t->dtype != x->dtype) return -1;
    dt[q] = (dvm_dtype)t->dtype;
  }
  char *src;
  if ((c->p->error = dvmc_cuda_split(dt[0], (int)outs.n, &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_SPLIT, 1, (int)outs.n, &cls, dt);
}

/* A gather as a generated GATHER kernel, when the dtypes of its data and
 * indices are known (the invoke keeps its axis attribute); -1 otherwise. */
static int64_t gather_kernel(clone *c, dvm_list outs, dvm_list ins,
                             dvm_list attrs) {
  const fact *x = &c->facts[ins.v[0]], *idx = &c->facts[ins.v[1]], *y = &c->facts[outs.v[0]];
  c->why = "data dtype not proven or strings, or indices not proven i32 or i64";
  if (ins.n != 2 || outs.n != 1 || attrs.n > 1 || x->writes > 1 || idx->writes > 1 ||
      y->writes > 1 || x->dtype < 0 || x->dtype == DVM_STRING || y->dtype != x->dtype ||
      (idx->dtype != DVM_I32 && idx->dtype != DVM_I64))
    return -1;
  dvm_dtype dt[3] = {(dvm_dtype)x->dtype, (dvm_dtype)idx->dtype, (dvm_dtype)x->dtype};
  uint8_t classes[2] = {DVM_GEN_SAME, DVM_GEN_SAME}; /* unused: the launcher binds a gather */
  char *src;
  if ((c->p->error = dvmc_cuda_gather(dt[0], dt[1], &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_GATHER, 2, 1, classes, dt);
}

/* A concat as a generated CONCAT kernel, when every input's dtype is
 * known and the output's (the invoke keeps its axis attribute); -1
 * otherwise. */
static int64_t concat_kernel(clone *c, dvm_list outs, dvm_list ins, dvm_list attrs) {
  const fact *y = &c->facts[outs.v[0]];
  dvm_dtype dt[DVM_GEN_MAX_IN + 1];
  uint8_t classes[DVM_GEN_MAX_IN] = {0}; /* unused: the launcher binds a concat */
  c->why = "more inputs than a generated kernel takes";
  if (outs.n != 1 || attrs.n != 1 || ins.n < 1 || ins.n > DVM_GEN_MAX_IN) return -1;
  c->why = "dtype not proven, or of strings";
  for (int64_t q = 0; q <= ins.n; q++) {
    const fact *t = q < ins.n ? &c->facts[ins.v[q]] : y;
    if (t->writes > 1 || t->dtype < 0 || t->dtype == DVM_STRING || t->dtype != y->dtype) return -1;
    dt[q] = (dvm_dtype)t->dtype;
  }
  char *src;
  if ((c->p->error = dvmc_cuda_concat(dt[0], (int)ins.n, &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_CONCAT, (int)ins.n, 1, classes, dt);
}

/* A max_pool (values only) or average_pool as a generated WINDOW kernel,
 * when its input and output are proven f32 (the invoke keeps the pool's
 * attributes for the launcher); -1 otherwise. */
static int64_t window_kernel(clone *c, dvm_kernel_form form, dvm_list outs, dvm_list ins, dvm_list attrs) {
  c->why = "max_pool's indices, or operands other than a pool's";
  if (ins.n != 1 || outs.n != 1 || attrs.n != 6) return -1;
  const fact *x = &c->facts[ins.v[0]], *y = &c->facts[outs.v[0]];
  c->why = "dtype not proven f32";
  if (x->writes > 1 || y->writes > 1 || x->dtype != DVM_F32 || y->dtype != DVM_F32) return -1;
  dvm_dtype dt[2] = {DVM_F32, DVM_F32};
  uint8_t cls = DVM_GEN_SAME; /* unused: the launcher binds a window */
  char *src;
  if ((c->p->error = dvmc_cuda_window(form, DVM_F32, &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_WINDOW, 1, 1, &cls, dt);
}

/* Immediate attribute register r in [lo, hi], else -1. */
static int64_t imm_in(const clone *c, int64_t r, int64_t lo, int64_t hi) {
  const fact *F = &c->facts[r];
  return F->writes == 1 && F->has_imm && F->imm >= lo && F->imm <= hi ? F->imm : -1;
}

/* A resize as a generated RESIZE kernel, when its mode (nearest, or
 * linear of f32 without antialias or exclude_outside) and coordinate
 * transformation (not tf_crop_and_resize) are immediates and its dtypes
 * known and equal (the invoke keeps its attributes); -1 otherwise. */
static int64_t resize_kernel(clone *c, dvm_list outs, dvm_list ins, dvm_list attrs) {
  c->why = "mode, coordinate transformation, antialias or exclude_outside not known, or cubic, or "
           "tf_crop_and_resize";
  if (ins.n != 1 || outs.n != 1 || attrs.n < 4) return -1;
  int64_t mode = imm_in(c, attrs.v[1], DVM_RESIZE_NEAREST, DVM_RESIZE_LINEAR);
  if (mode < 0 || imm_in(c, attrs.v[2], 0, DVM_RESIZE_HALF_PIXEL_SYMMETRIC) < 0 ||
      (mode == DVM_RESIZE_LINEAR && attrs.n >= 7 && (imm_in(c, attrs.v[5], 0, 0) < 0 || imm_in(c, attrs.v[6], 0, 0) < 0)))
    return -1;
  const fact *x = &c->facts[ins.v[0]], *y = &c->facts[outs.v[0]];
  c->why = "dtype not proven (f32 for linear), or of strings";
  if (x->writes > 1 || y->writes > 1 || x->dtype < 0 || x->dtype == DVM_STRING || y->dtype != x->dtype ||
      dvm_dtype_size((dvm_dtype)x->dtype) > 8 || (mode == DVM_RESIZE_LINEAR && x->dtype != DVM_F32))
    return -1;
  dvm_dtype dt[2] = {(dvm_dtype)x->dtype, (dvm_dtype)x->dtype};
  uint8_t cls = DVM_GEN_SAME; /* unused: the launcher binds a resize */
  char *src;
  if ((c->p->error = dvmc_cuda_resize(dt[0], &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_RESIZE, 1, 1, &cls, dt);
}

/* A conv or fused_conv (channels first) as a generated CONV kernel, or a
 * conv_transpose as a CONV_TRANSPOSE kernel, when every operand is proven
 * f32 (the invoke keeps its attributes); -1 otherwise. */
static int64_t conv_kernel(clone *c, dvm_kernel_form form, dvm_list outs, dvm_list ins, dvm_list attrs) {
  int transpose = form == DVM_FORM_CONV_TRANSPOSE;
  c->why = transpose ? "operands other than a conv_transpose's"
                     : "operands other than a conv's, or a channels-last layout";
  if (transpose ? ins.n < 2 || ins.n > 3 || outs.n != 1 || attrs.n != 5
                : ins.n < 2 || ins.n > 4 || outs.n != 1 || (attrs.n != 4 && attrs.n != 4 + DVM_CONV_EPILOGUE_ATTRS) ||
                      (ins.n == 4 && attrs.n == 4) || (attrs.n > 4 && imm_in(c, attrs.v[9], 0, 0) < 0))
    return -1;
  dvm_dtype dt[5];
  uint8_t classes[4] = {0}; /* unused: the launcher binds a conv */
  c->why = "dtype not proven f32";
  for (int64_t q = 0; q <= ins.n; q++) {
    const fact *t = &c->facts[q < ins.n ? ins.v[q] : outs.v[0]];
    if (t->writes > 1 || t->dtype != DVM_F32) return -1;
    dt[q] = DVM_F32;
  }
  char *src;
  if ((c->p->error = transpose ? dvmc_cuda_conv_transpose((int)ins.n, &src) : dvmc_cuda_conv((int)ins.n, &src)))
    return -1;
  return gen_kernel(c->p, src, transpose ? DVM_GEN_CONV_TRANSPOSE : DVM_GEN_CONV, (int)ins.n, 1, classes, dt);
}

/* A matmul_nbits as a generated MATMUL_NBITS kernel, when A, scales, the
 * bias and Y are proven f32, B u8 and zero points u8 or f32 (the invoke
 * keeps its attributes; the launcher checks them as the CPU kernel does);
 * -1 otherwise. */
static int64_t nbits_kernel(clone *c, dvm_list outs, dvm_list ins, dvm_list attrs) {
  c->why = "present not known, or g_idx";
  if (ins.n < 3 || ins.n > 5 || outs.n != 1 || attrs.n != 7) return -1;
  int64_t present = imm_in(c, attrs.v[0], 0, 63);
  if (present < 0 || present & 16) return -1;
  dvm_dtype dt[6];
  uint8_t classes[5] = {0}; /* unused: the launcher binds a matmul_nbits */
  c->why = "dtype not proven (A f32, B u8)";
  for (int64_t q = 0; q <= ins.n; q++) {
    const fact *t = &c->facts[q < ins.n ? ins.v[q] : outs.v[0]];
    int ok = q == 1 ? t->dtype == DVM_U8 : t->dtype == DVM_F32 || (q == 3 && t->dtype == DVM_U8);
    if (t->writes > 1 || !ok) return -1;
    dt[q] = (dvm_dtype)t->dtype;
  }
  char *src;
  if ((c->p->error = dvmc_cuda_matmul_nbits((int)ins.n, ins.n > 3 ? dt[3] : DVM_F32, &src))) return -1;
  return gen_kernel(c->p, src, DVM_GEN_MATMUL_NBITS, (int)ins.n, 1, classes, dt);
}

/* By the kernel's form (vm/kernel.h): a generated kernel, cuBLAS's of the
 * same name, or -1 (the host). */
static plan plan_invoke(clone *c, const dvm_ops_INVOKE *x) {
  placer *p = c->p;
  const dvm_kernel_ref *k = &p->m->kernels[x->kernel];
  dvm_list outs = x->outs, ins = x->ins, attrs = x->attrs;
  plan pl = {-1, 0, 0, 0, 0, -1, -1, 0};
  if (k->device != DVM_DEVICE_CPU) return pl;
  if (dvm_ops_find(k->name, DVM_DEVICE_CUDA)) {
    /* names are unique in the table; the linker looks up what precedes '@' */
    char name[32];
    snprintf(name, sizeof name, "%s@cuda", k->name);
    pl.kernel = add_kernel(p, name, 1, NULL, 0);
    return pl;
  }
  char base[64];
  const dvm_kernel_def *def = dvm_ops_find_entry(k->name, DVM_DEVICE_CPU, base);
  dvm_kernel_form form = def ? def->form : DVM_FORM_NONE;
  pl.generated = form != DVM_FORM_NONE;
  pl.rows = form >= DVM_FORM_ROWS_SOFTMAX;
  pl.numel_in = form == DVM_FORM_SPLIT;
  pl.keep_attrs = form == DVM_FORM_PERMUTED || form == DVM_FORM_GATHER || form == DVM_FORM_CONCAT ||
                  form == DVM_FORM_SPLIT || form == DVM_FORM_WINDOW_MAX || form == DVM_FORM_WINDOW_AVERAGE ||
                  form == DVM_FORM_RESIZE || form == DVM_FORM_CONV || form == DVM_FORM_CONV_TRANSPOSE ||
                  form == DVM_FORM_MATMUL_NBITS;
  pl.const_ins = form == DVM_FORM_SLICED || form == DVM_FORM_SPLIT;
  c->why = "no device kernel for the op";
  switch (form) {
  case DVM_FORM_NONE: break;
  case DVM_FORM_ELEMENTWISE: pl.kernel = single_kernel(c, k->name, outs, ins, attrs); break;
  case DVM_FORM_FUSED: pl.kernel = fused_kernel(c, k, outs, ins); break;
  case DVM_FORM_PERMUTED: pl.kernel = transpose_kernel(c, outs, ins, attrs); break;
  case DVM_FORM_GATHER: pl.kernel = gather_kernel(c, outs, ins, attrs); break;
  case DVM_FORM_SLICED: pl.kernel = slice_kernel(c, outs, ins); break;
  case DVM_FORM_CONCAT: pl.kernel = concat_kernel(c, outs, ins, attrs); break;
  case DVM_FORM_SPLIT: pl.kernel = split_kernel(c, outs, ins, attrs); break;
  case DVM_FORM_WINDOW_MAX:
  case DVM_FORM_WINDOW_AVERAGE: pl.kernel = window_kernel(c, form, outs, ins, attrs); break;
  case DVM_FORM_RESIZE: pl.kernel = resize_kernel(c, outs, ins, attrs); break;
  case DVM_FORM_CONV:
  case DVM_FORM_CONV_TRANSPOSE: pl.kernel = conv_kernel(c, form, outs, ins, attrs); break;
  case DVM_FORM_MATMUL_NBITS: pl.kernel = nbits_kernel(c, outs, ins, attrs); break;
  default: pl.kernel = rows_kernel(c, form, outs, ins, attrs, &pl); break;
  }
  if (p->error) p->error = dvm_status_annotate(p->error, "kernel \"%s\"", k->name);
  return pl;
}

/* ---- rewriting ---- */

static void copy_to(clone *c, int64_t dst, int64_t src, dvm_device_kind dev) { EMIT(c, COPY, dst, src, dev); }

/* An invoke on the device: operands moved there in place; a generated
 * kernel gets its variant, extent mod T, in a fresh register. */
/* Input 0 of a reduction over its trailing axes from `merge` on, seen
 * with those axes as one: a reshape into register `at`, its dims and shape
 * in the registers after it; the count of registers used. */
static int merge_axes(clone *c, int64_t x, int merge, int rank, int64_t at) {
  int64_t dims[DVM_MAX_RANK], r = at + 1;
  for (int k = 0; k < merge; k++) EMIT(c, DIM, dims[k] = r++, x, k);
  EMIT(c, DIM, dims[merge] = r++, x, merge);
  for (int k = merge + 1; k < rank; k++) {
    EMIT(c, DIM, r, x, k);
    EMIT(c, MUL, r + 1, dims[merge], r);
    dims[merge] = r + 1, r += 2;
  }
  EMIT(c, MAKE_SHAPE, r, (dvm_list){merge + 1, dims});
  EMIT(c, RESHAPE, at, x, r);
  return (int)(r - at + 1);
}

/* A slice's or split's inputs 1.. (constants: their planners checked) as shapes of
 * immediates in the registers from `at` on, listed in *attrs; the count
 * of registers used. */
static int const_attrs(clone *c, const dvm_ops_INVOKE *x, int64_t at, int64_t *attrs) {
  int64_t r = at, v[DVM_MAX_RANK], dims[DVM_MAX_RANK];
  for (int64_t q = 1; q < x->ins.n; q++) {
    int n = const_ints(c, x->ins.v[q], v);
    for (int k = 0; k < n; k++) EMIT(c, IMM, dims[k] = r++, v[k]);
    EMIT(c, MAKE_SHAPE, attrs[q - 1] = r++, (dvm_list){n, dims});
  }
  return (int)(r - at);
}

static void invoke_device(clone *c, const dvm_ops_INVOKE *x, const plan *pl) {
  int64_t nin = pl->const_ins ? 1 : x->ins.n; /* a slice's or split's other inputs go as attributes */
  for (int64_t q = 0; q < nin; q++) copy_to(c, x->ins.v[q], x->ins.v[q], DVM_DEVICE_CUDA);
  for (int64_t q = 0; q < x->outs.n; q++) copy_to(c, x->outs.v[q], x->outs.v[q], DVM_DEVICE_CUDA);
  int64_t variant = x->variant, ins[DVM_GEN_MAX_IN], cattrs[8];
  dvm_list in = {nin, x->ins.v}, attrs = pl->generated && !pl->keep_attrs ? DVM_NO_LIST : x->attrs;
  int used = pl->generated ? 3 : 0;
  if (pl->const_ins && x->ins.n - 1 + attrs.n <= 8) { /* slice_kernel, split_kernel checked */
    used += const_attrs(c, x, c->nregs + used, cattrs);
    for (int64_t q = 0; q < attrs.n; q++) cattrs[x->ins.n - 1 + q] = attrs.v[q]; /* a slice has none */
    attrs = (dvm_list){x->ins.n - 1 + attrs.n, cattrs};
  }
  if (pl->merge >= 0 && x->ins.n <= DVM_GEN_MAX_IN) { /* rows_kernel proved the rank */
    memcpy(ins, x->ins.v, sizeof(int64_t) * (size_t)x->ins.n);
    ins[0] = c->nregs + used;
    used += merge_axes(c, x->ins.v[0], pl->merge, pl->rank, ins[0]);
    in.v = ins;
  }
  if (pl->generated) {
    int64_t n = c->nregs, t = c->nregs + 1;
    variant = c->nregs + 2;
    if (pl->rows) EMIT(c, DIM, n, in.v[0], -1);
    else EMIT(c, NUMEL, n, pl->numel_in ? in.v[0] : x->outs.v[0]);
    EMIT(c, IMM, t, DVMC_CUDA_TILE);
    EMIT(c, MOD, variant, n, t);
  }
  EMIT(c, INVOKE, pl->kernel, variant, x->outs, in, attrs);
  for (int q = 0; q < used; q++) EMIT(c, RELEASE, c->nregs + q);
}

/* An invoke on the host: its inputs as host copies in fresh registers,
 * its outputs moved to the host in place unless allocated there. */
static void invoke_host(clone *c, const dvm_ops_INVOKE *x) {
  for (int64_t q = 0; q < x->outs.n; q++) {
    const fact *o = &c->facts[x->outs.v[q]];
    if (!o->allocated || o->writes != 1 || o->out_dev != DVM_DEVICE_CPU)
      copy_to(c, x->outs.v[q], x->outs.v[q], DVM_DEVICE_CPU);
  }
  int64_t *ins = malloc(sizeof(int64_t) * (size_t)(x->ins.n + 1));
  if (!ins) {
    c->p->oom = 1;
    return;
  }
  for (int64_t q = 0; q < x->ins.n; q++) copy_to(c, ins[q] = c->nregs + q, x->ins.v[q], DVM_DEVICE_CPU);
  EMIT(c, INVOKE, x->kernel, x->variant, x->outs, (dvm_list){x->ins.n, ins}, x->attrs);
  free(ins);
  for (int64_t q = 0; q < x->ins.n; q++) EMIT(c, RELEASE, c->nregs + q);
}

/* A shape function runs on the host: one that reads its tensors' data
 * gets them copied there; one that reads only their dims (dims_only)
 * takes them where they are. */
static void shapefn_host(clone *c, const dvm_ops_SHAPEFN *x) {
  const dvm_shapefn_def *def = dvm_shapefn_find(c->p->m->shapefns[x->fn].name);
  int64_t *args = malloc(sizeof(int64_t) * (size_t)(x->args.n + 1));
  if (!args) {
    c->p->oom = 1;
    return;
  }
  int ntmp = 0;
  for (int64_t q = 0; q < x->args.n; q++) {
    args[q] = x->args.v[q];
    if (c->facts[args[q]].tensor && !(def && def->dims_only)) {
      copy_to(c, c->nregs + ntmp, args[q], DVM_DEVICE_CPU);
      args[q] = c->nregs + ntmp++;
    }
  }
  EMIT(c, SHAPEFN, x->fn, x->dsts, (dvm_list){x->args.n, args});
  free(args);
  for (int q = 0; q < ntmp; q++) EMIT(c, RELEASE, c->nregs + q);
}

typedef struct {
  clone *c;
  size_t at; /* where the instruction starts in the new code */
} jumps;

static void note_jump(void *ctx, char letter, uint32_t word) {
  jumps *j = ctx;
  if (letter == 'j') PUSH(j->c->p, j->c->jumps, (uint32_t)(j->at + word));
}

static void rewrite(clone *c, uint32_t i, int after_guards) {
  const dvm_func *f = c->f;
  const int64_t *w = f->code + f->starts[i];
  uint32_t len = dvm_instr_length(f->code, f->ncode, f->starts[i]);
  c->loc = f->src[i];
  c->map[f->starts[i]] = (uint32_t)c->code.n;
  if (after_guards) /* the entry: tensor inputs move to the device */
    for (uint32_t k = 0; k < f->nparams; k++)
      if (f->params[k].kind == DVM_VAL_TENSOR) copy_to(c, k, k, DVM_DEVICE_CUDA);
  switch (w[0]) {
  case DVM_OP_ALLOC: {
    dvm_ops_ALLOC x = dvm_decode_ALLOC(w);
    EMIT(c, ALLOC, x.dst, x.dtype, x.shape, c->facts[x.dst].out_dev == DVM_DEVICE_CPU ? DVM_DEVICE_CPU : DVM_DEVICE_CUDA);
    return;
  }
  case DVM_OP_ALLOC_RESULT: {
    dvm_ops_ALLOC_RESULT x = dvm_decode_ALLOC_RESULT(w);
    EMIT(c, ALLOC_RESULT, x.dst, x.dtype, x.shape, c->facts[x.dst].out_dev == DVM_DEVICE_CPU ? DVM_DEVICE_CPU : DVM_DEVICE_CUDA,
         x.result);
    return;
  }
  case DVM_OP_ALLOC_STORAGE: {
    dvm_ops_ALLOC_STORAGE x = dvm_decode_ALLOC_STORAGE(w);
    EMIT(c, ALLOC_STORAGE, x.dst, x.bytes, DVM_DEVICE_CUDA, x.align);
    return;
  }
  case DVM_OP_ALLOC_TENSOR: { /* a host kernel's output: a host tensor, not a copy of the slot's */
    dvm_ops_ALLOC_TENSOR x = dvm_decode_ALLOC_TENSOR(w);
    if (c->facts[x.dst].out_dev == DVM_DEVICE_CPU && c->facts[x.dst].writes == 1) {
      EMIT(c, ALLOC, x.dst, x.dtype, x.shape, DVM_DEVICE_CPU);
      return;
    }
    break;
  }
  case DVM_OP_INVOKE: {
    dvm_ops_INVOKE x = dvm_decode_INVOKE(w);
    plan pl = plan_invoke(c, &x);
    if (pl.kernel >= 0) invoke_device(c, &x, &pl);
    else invoke_host(c, &x);
    return;
  }
  case DVM_OP_SHAPEFN: {
    dvm_ops_SHAPEFN x = dvm_decode_SHAPEFN(w);
    shapefn_host(c, &x);
    return;
  }
  case DVM_OP_CALL: { /* to the clone */
    dvm_ops_CALL x = dvm_decode_CALL(w);
    EMIT(c, CALL, x.func + c->p->nfuncs, x.dsts, x.args);
    return;
  }
  default: break;
  }
  /* anything else as it is, its jump targets mapped at the end */
  PUSH(c->p, c->src, c->loc);
  dvm_instr_operands(w, 0, note_jump, &(jumps){c, c->code.n});
  for (uint32_t q = 0; q < len; q++) PUSH(c->p, c->code, w[q]);
}

/* The most registers any rewrite borrows past the function's own. */
static uint32_t scratch_regs(const dvm_func *f) {
  uint32_t most = 3 + 4 * (DVM_MAX_RANK + 1); /* a variant's 3, and merge_axes's or const_attrs's at most */
  for (uint32_t i = 0; i < f->ninstr; i++) {
    const int64_t *w = f->code + f->starts[i];
    int64_t n = w[0] == DVM_OP_INVOKE ? dvm_decode_INVOKE(w).ins.n : w[0] == DVM_OP_SHAPEFN ? dvm_decode_SHAPEFN(w).args.n : 0;
    if ((uint32_t)n > most) most = (uint32_t)n;
  }
  return most;
}

/* Each invoke's device, so that the allocation of its outputs can follow
 * (generated kernels are kept by source: planning twice is cheap). */
static void plan_outputs(clone *c) {
  const dvm_func *f = c->f;
  for (uint32_t i = 0; i < f->ninstr && !c->p->error; i++) {
    const int64_t *w = f->code + f->starts[i];
    if (w[0] != DVM_OP_INVOKE) continue;
    dvm_ops_INVOKE x = dvm_decode_INVOKE(w);
    plan pl = plan_invoke(c, &x);
    for (int64_t q = 0; q < x.outs.n; q++) {
      fact *o = &c->facts[x.outs.v[q]];
      if (o->out_dev < 0) o->out_dev = (int8_t)(pl.kernel >= 0 ? DVM_DEVICE_CUDA : DVM_DEVICE_CPU);
    }
  }
}

static dvm_status *clone_func(placer *p, const dvm_func *f, dvm_func *out) {
  clone c = {.p = p, .f = f, .nregs = f->nregs};
  c.facts = calloc(f->nregs ? f->nregs : 1, sizeof *c.facts);
  c.map = calloc(f->ncode + 1, sizeof *c.map);
  if (!c.facts || !c.map) p->oom = 1;
  else {
    scan(&c);
    plan_outputs(&c);
    uint32_t guards = 0;
    while (guards < f->ninstr && f->code[f->starts[guards]] == DVM_OP_GUARD) guards++;
    for (uint32_t i = 0; i < f->ninstr && !p->error && !p->oom; i++) rewrite(&c, i, i == guards);
    for (size_t j = 0; j < c.jumps.n && !p->oom; j++)
      c.code.v[c.jumps.v[j]] = c.map[c.code.v[c.jumps.v[j]]];
  }
  dvm_status *st = p->error;
  if (!st && !p->oom) {
    dvm_arena *a = &p->m->arena;
    char name[256];
    snprintf(name, sizeof name, "%s@cuda", f->name);
    *out = *f;
    out->name = dvm_arena_strdup(a, name);
    out->nregs = f->nregs + scratch_regs(f);
    out->ncode = (uint32_t)c.code.n;
    out->code = dvm_arena_alloc(a, c.code.n, sizeof(int64_t));
    out->src = dvm_arena_alloc(a, c.src.n, sizeof(char *));
    out->starts = NULL;
    out->ndebug = 0;
    out->debug = NULL;
    if (!out->name || !out->code || !out->src) p->oom = 1;
    else {
      memcpy(out->code, c.code.v, c.code.n * sizeof(int64_t));
      memcpy(out->src, c.src.v, c.src.n * sizeof(char *));
    }
  }
  free(c.facts);
  free(c.map);
  free(c.code.v);
  free(c.src.v);
  free(c.jumps.v);
  if (!st && p->oom) st = dvm_status_new(DVM_OUT_OF_MEMORY, "placing for CUDA");
  return st ? dvm_status_annotate(st, "function \"%s\" for CUDA", f->name) : NULL;
}

dvm_status *dvmc_place_cuda(const uint8_t *in, size_t in_size, uint8_t **out, size_t *out_size) {
  dvm_status *st = dvmc_nvrtc_load();
  if (st) return dvm_status_annotate(st, "target cuda");
  dvm_module *m;
  if ((st = dvm_module_new_empty(&m))) return st;
  placer p = {.m = m};
  if ((st = dvm_bc_read(m, in, in_size)) || (st = dvm_verify_module(m))) goto done;
  p.nfuncs = m->nfuncs;
  for (uint32_t i = 0; i < m->nkernels; i++) PUSH(&p, p.kernels, m->kernels[i]);
  dvm_func *funcs = dvm_arena_alloc(&m->arena, 2 * (size_t)m->nfuncs + 1, sizeof(dvm_func));
  if (!funcs || p.oom) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "placing for CUDA");
    goto done;
  }
  for (uint32_t i = 0; i < m->nfuncs && !st; i++) {
    funcs[i] = m->funcs[i];
    st = clone_func(&p, &m->funcs[i], &funcs[m->nfuncs + i]);
  }
  if (st) goto done;
  m->funcs = funcs;
  m->nfuncs *= 2;
  m->kernels = p.kernels.v;
  m->nkernels = (uint32_t)p.kernels.n;
  if ((st = dvm_verify_module(m)))
    st = dvm_status_annotate(st, "internal error: CUDA placement made bytecode the verifier refuses");
  else
    st = dvm_bc_write(m, out, out_size);
done:
  free(p.kernels.v);
  for (size_t i = 0; i < p.gens.n; i++) free(p.gens.v[i].src);
  free(p.gens.v);
  for (size_t i = 0; i < p.owned.n; i++) free(p.owned.v[i]);
  free(p.owned.v);
  m->nkernels = 0, m->kernels = NULL; /* the module's arena keeps the rest */
  dvm_module_release(m);
  return st;
}

/* ---- host round trips (dvmc_cuda_host_report) ---- */

static int as_num(const char *s, int64_t *v) {
  char *end;
  if (!s || !*s) return 0;
  *v = strtoll(s, &end, 10);
  return !*end;
}

static char *num_str(int64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  return strdup(buf);
}

/* s as a factor: parenthesized when a sum at its top level. */
static char *factor(char *s) {
  int depth = 0, sum = 0;
  for (const char *p = s; *p; p++) {
    depth += (*p == '(') - (*p == ')');
    sum |= depth == 0 && *p == ' ';
  }
  if (!sum) return s;
  char *t = malloc(strlen(s) + 3);
  if (t) sprintf(t, "(%s)", s);
  free(s);
  return t;
}

/* a OP b as text, numbers folded; takes a and b. */
static char *combine(int op, char *a, char *b) {
  int64_t x = 0, y = 0, v = 0;
  int na = as_num(a, &x), nb = as_num(b, &y), ok = 1;
  char *r = NULL;
  if (na && nb) {
    switch (op) {
    case DVM_OP_ADD: ok = !__builtin_add_overflow(x, y, &v); break;
    case DVM_OP_SUB: ok = !__builtin_sub_overflow(x, y, &v); break;
    case DVM_OP_MUL: ok = !__builtin_mul_overflow(x, y, &v); break;
    case DVM_OP_DIV:
    case DVM_OP_MOD:
      ok = y != 0 && !(x == INT64_MIN && y == -1);
      if (ok) {
        int64_t q = x / y, m = x % y;
        if (m && (m < 0) != (y < 0)) q--, m += y;
        v = op == DVM_OP_DIV ? q : m;
      }
      break;
    case DVM_OP_MIN: v = x < y ? x : y; break;
    default: v = x > y ? x : y; break;
    }
    r = ok ? num_str(v) : NULL;
  } else if (op == DVM_OP_ADD || op == DVM_OP_SUB) {
    if (na && op == DVM_OP_ADD) { /* the symbol first: height - 1 */
      char *t = a;
      a = b, b = t, na = 0, nb = 1, y = x;
    }
    if (nb && y == 0) r = strdup(a);
    else if (nb && y != INT64_MIN && (y < 0) == (op == DVM_OP_ADD)) {
      r = malloc(strlen(a) + 24);
      if (r) sprintf(r, "%s - %lld", a, (long long)(y < 0 ? -y : y));
    } else {
      b = op == DVM_OP_SUB ? factor(b) : b;
      r = b ? malloc(strlen(a) + strlen(b) + 4) : NULL;
      if (r) sprintf(r, "%s %c %s", a, op == DVM_OP_ADD ? '+' : '-', b);
    }
  } else if (op == DVM_OP_MUL && ((na && x == 1) || (nb && y == 1))) {
    r = strdup(na ? b : a);
  } else if (op == DVM_OP_MUL) {
    a = factor(a), b = factor(b);
    r = a && b ? malloc(strlen(a) + strlen(b) + 2) : NULL;
    if (r) sprintf(r, "%s*%s", a, b);
  } else {
    static const char *const fns[] = {[DVM_OP_DIV] = "floordiv", [DVM_OP_MOD] = "mod", [DVM_OP_MIN] = "min",
                                      [DVM_OP_MAX] = "max"};
    r = malloc(strlen(a) + strlen(b) + 16);
    if (r) sprintf(r, "%s(%s, %s)", fns[op], a, b);
  }
  free(a);
  free(b);
  return r;
}

static char *tensor_dim(const clone *c, int64_t t, int64_t axis, int depth);

/* Scalar register r as a formula of the symbols, or NULL (unknown). */
static char *scalar_expr(const clone *c, int64_t r, int depth) {
  const fact *F = &c->facts[r];
  if (F->writes == 0) {
    for (uint32_t s = 0; s < c->f->nsyms; s++)
      if (c->f->syms[s].reg == r) return strdup(c->f->syms[s].name);
    return NULL;
  }
  if (F->writes != 1 || depth > 32) return NULL;
  if (F->has_imm) return num_str(F->imm);
  const int64_t *w = c->f->code + c->f->starts[F->def];
  switch (w[0]) {
  case DVM_OP_ADD: case DVM_OP_SUB: case DVM_OP_MUL: case DVM_OP_DIV:
  case DVM_OP_MOD: case DVM_OP_MIN: case DVM_OP_MAX: {
    dvm_ops_ADD x = dvm_decode_ADD(w); /* the same layout for each */
    char *a = scalar_expr(c, x.a, depth + 1), *b = a ? scalar_expr(c, x.b, depth + 1) : NULL;
    if (!b) {
      free(a);
      return NULL;
    }
    return combine((int)w[0], a, b);
  }
  case DVM_OP_MOVE: return scalar_expr(c, dvm_decode_MOVE(w).src, depth + 1);
  case DVM_OP_DIM: {
    dvm_ops_DIM x = dvm_decode_DIM(w);
    return tensor_dim(c, x.src, x.axis, depth + 1);
  }
  default: return NULL;
  }
}

/* The tensor register that t is a copy or move of, as far as one goes. */
static int64_t alias_root(const clone *c, int64_t t) {
  for (int k = 0; k < 64; k++) {
    const fact *F = &c->facts[t];
    if (F->writes != 1) break;
    const int64_t *w = c->f->code + c->f->starts[F->def];
    if (w[0] == DVM_OP_COPY) t = dvm_decode_COPY(w).src;
    else if (w[0] == DVM_OP_MOVE) t = dvm_decode_MOVE(w).src;
    else break;
  }
  return t;
}

/* The dims of tensor t as formulas (each malloc'ed); the rank, or -1. */
static int tensor_dims(const clone *c, int64_t t, char **d, int depth) {
  t = alias_root(c, t);
  const fact *F = &c->facts[t];
  int n = -1;
  if (!F->tensor || F->writes > 1) return -1;
  switch (F->tshape_kind) {
  case 1: {
    const fact *S = &c->facts[F->tshape];
    if (S->writes != 1 || !S->shape.v || S->shape.n > DVM_MAX_RANK) return -1;
    n = (int)S->shape.n;
    for (int k = 0; k < n; k++) d[k] = scalar_expr(c, S->shape.v[k], depth + 1);
    break;
  }
  case 2:
    n = (int)F->tdims.n;
    for (int k = 0; k < n; k++) d[k] = num_str(F->tdims.v[k]);
    break;
  case 3: {
    const dvm_const *k = &c->p->m->consts[F->tshape];
    n = k->rank;
    for (int q = 0; q < n; q++) d[q] = num_str(k->dims[q]);
    break;
  }
  case 4: {
    const dvm_sig *s = &c->f->params[t];
    n = s->rank;
    for (int q = 0; q < n; q++) {
      int64_t sym = dvm_dim_symbol(s->dims[q]);
      d[q] = s->dims[q] >= 0 ? num_str(s->dims[q]) : sym >= 0 ? strdup(c->f->syms[sym].name) : NULL;
    }
    break;
  }
  default: return -1;
  }
  int known = 1;
  for (int k = 0; k < n; k++) known &= d[k] != NULL;
  if (!known)
    for (int k = 0; k < n; k++) free(d[k]);
  return known ? n : -1;
}

static char *tensor_dim(const clone *c, int64_t t, int64_t axis, int depth) {
  char *d[DVM_MAX_RANK], *r = NULL;
  int n = depth > 32 ? -1 : tensor_dims(c, t, d, depth);
  if (axis < 0) axis += n;
  for (int k = 0; k < n; k++)
    if (k == axis) r = d[k];
    else free(d[k]);
  return r;
}

/* The bytes of tensor t as a formula, or NULL (unknown). */
static char *tensor_bytes(const clone *c, int64_t t) {
  char *d[DVM_MAX_RANK];
  int dt = c->facts[alias_root(c, t)].dtype, n;
  if (dt < 0 || c->facts[t].writes > 1 || (n = tensor_dims(c, t, d, 0)) < 0) return NULL;
  char *r = num_str((int64_t)dvm_dtype_size((dvm_dtype)dt));
  for (int num = 1; num >= 0; num--) /* the known dims first, into one number */
    for (int k = 0; k < n; k++) {
      int64_t v;
      if (d[k] && as_num(d[k], &v) == num) {
        r = r ? combine(DVM_OP_MUL, r, d[k]) : (free(d[k]), NULL); /* takes d[k] */
        d[k] = NULL;
      }
    }
  return r;
}

/* One host call of the report. */
typedef struct hcall {
  const char *kernel, *node, *why;
  DVM_VEC(char *) down, up; /* formulas of the bytes copied to the host, back to the device */
  int down_unknown, up_unknown;
} hcall;

typedef DVM_VEC(hcall) hcall_vec;

enum { LOC_NONE, LOC_HOST, LOC_DEVICE };

static void add_bytes(placer *p, hcall *h, int up, char *bytes) {
  if (!bytes) *(up ? &h->up_unknown : &h->down_unknown) += 1;
  else if (up) PUSH(p, h->up, bytes);
  else PUSH(p, h->down, bytes);
}

/* Where each tensor is, in instruction order (jumps not followed: a loop
 * body counts once), and what each host call copies. */
static void trace_host_calls(clone *c, hcall_vec *calls) {
  const dvm_func *f = c->f;
  uint8_t *loc = calloc(f->nregs + 1, 1);
  int32_t *prod = malloc(sizeof(int32_t) * (f->nregs + 1));
  if (!loc || !prod) {
    c->p->oom = 1;
    goto done;
  }
  for (uint32_t r = 0; r < f->nregs; r++) prod[r] = -1;
  for (uint32_t k = 0; k < f->nparams; k++)
    if (f->params[k].kind == DVM_VAL_TENSOR) loc[k] = LOC_DEVICE;
  for (uint32_t i = 0; i < f->ninstr && !c->p->error && !c->p->oom; i++) {
    const int64_t *w = f->code + f->starts[i];
    int64_t dst = -1, src = -1;
    switch (w[0]) {
    case DVM_OP_CONST: loc[dvm_decode_CONST(w).dst] = LOC_HOST, prod[dvm_decode_CONST(w).dst] = -1; break;
    case DVM_OP_ALLOC: case DVM_OP_ALLOC_RESULT: case DVM_OP_ALLOC_TENSOR: case DVM_OP_ALLOC_TENSOR_I:
      dst = w[1]; /* each's first operand */
      loc[dst] = c->facts[dst].out_dev == DVM_DEVICE_CPU && w[0] != DVM_OP_ALLOC_TENSOR_I &&
                 (w[0] != DVM_OP_ALLOC_TENSOR || c->facts[dst].writes == 1) ? LOC_HOST : LOC_DEVICE;
      prod[dst] = -1;
      break;
    case DVM_OP_RESHAPE: dst = dvm_decode_RESHAPE(w).dst, src = dvm_decode_RESHAPE(w).src; break;
    case DVM_OP_COPY: dst = dvm_decode_COPY(w).dst, src = dvm_decode_COPY(w).src; break;
    case DVM_OP_MOVE: dst = dvm_decode_MOVE(w).dst, src = dvm_decode_MOVE(w).src; break;
    case DVM_OP_CALL: {
      dvm_ops_CALL x = dvm_decode_CALL(w);
      for (int64_t q = 0; q < x.dsts.n; q++) loc[x.dsts.v[q]] = LOC_DEVICE, prod[x.dsts.v[q]] = -1;
      break;
    }
    case DVM_OP_INVOKE: {
      dvm_ops_INVOKE x = dvm_decode_INVOKE(w);
      plan pl = plan_invoke(c, &x);
      if (pl.kernel >= 0) { /* host tensors it reads go up, in place */
        for (int pass = 0; pass < 2; pass++) {
          dvm_list l = pass ? x.outs : x.ins;
          for (int64_t q = 0; q < l.n; q++) {
            int64_t r = l.v[q];
            if (loc[r] == LOC_HOST && prod[r] >= 0) add_bytes(c->p, &calls->v[prod[r]], 1, tensor_bytes(c, r));
            loc[r] = LOC_DEVICE, prod[r] = -1;
          }
        }
        break;
      }
      hcall h = {.kernel = c->p->m->kernels[x.kernel].name, .node = f->src[i], .why = c->why};
      for (int64_t q = 0; q < x.ins.n; q++)
        if (loc[x.ins.v[q]] == LOC_DEVICE) add_bytes(c->p, &h, 0, tensor_bytes(c, x.ins.v[q]));
      for (int64_t q = 0; q < x.outs.n; q++) {
        int64_t r = x.outs.v[q];
        if (loc[r] == LOC_DEVICE) add_bytes(c->p, &h, 0, tensor_bytes(c, r));
        loc[r] = LOC_HOST, prod[r] = (int32_t)calls->n;
      }
      PUSH(c->p, *calls, h);
      break;
    }
    default: break;
    }
    if (src >= 0) loc[dst] = loc[src], prod[dst] = prod[src];
  }
done:
  free(loc);
  free(prod);
}

/* A sum of formulas, and how many were unknown. */
static void print_sum(FILE *out, char **v, size_t n, int unknown) {
  for (size_t k = 0; k < n; k++) fprintf(out, "%s%s", k ? " + " : "", v[k]);
  if (!n) fputs(unknown ? "" : "0", out);
  if (unknown) fprintf(out, "%s%d unknown", n ? " + " : "", unknown);
}

static void report_func(placer *p, const dvm_func *f, const dvm_func *placed, FILE *out) {
  clone c = {.p = p, .f = f, .nregs = f->nregs};
  hcall_vec calls = {0};
  c.facts = calloc(f->nregs ? f->nregs : 1, sizeof *c.facts);
  if (!c.facts) {
    p->oom = 1;
    return;
  }
  scan(&c);
  plan_outputs(&c);
  if (!p->error) trace_host_calls(&c, &calls);
  size_t in_file = 0; /* the file's clone must hold as many */
  for (uint32_t i = 0; i < placed->ninstr; i++) {
    const int64_t *w = placed->code + placed->starts[i];
    in_file += w[0] == DVM_OP_INVOKE && p->m->kernels[dvm_decode_INVOKE(w).kernel].device == DVM_DEVICE_CPU;
  }
  if (!p->error && !p->oom && in_file != calls.n)
    p->error = dvm_status_new(DVM_INVALID_ARGUMENT, "function \"%s\" holds %zu host kernel calls where this "
                              "dvm would place %zu: compiled by another version; compile it again",
                              placed->name, in_file, calls.n);
  if (!p->error && !p->oom) {
    fprintf(out, "function %s: %zu host kernel call%s\n", placed->name, calls.n, calls.n == 1 ? "" : "s");
    DVM_VEC(char *) down = {0}, up = {0};
    int down_unknown = 0, up_unknown = 0;
    for (size_t k = 0; k < calls.n; k++) {
      hcall *h = &calls.v[k];
      fprintf(out, "  %s at %s: to the host ", h->kernel, h->node ? h->node : "?");
      print_sum(out, h->down.v, h->down.n, h->down_unknown);
      fputs(" bytes, back ", out);
      print_sum(out, h->up.v, h->up.n, h->up_unknown);
      fprintf(out, " bytes; %s\n", h->why);
      for (size_t q = 0; q < h->down.n; q++) PUSH(p, down, h->down.v[q]);
      for (size_t q = 0; q < h->up.n; q++) PUSH(p, up, h->up.v[q]);
      down_unknown += h->down_unknown, up_unknown += h->up_unknown;
    }
    for (size_t k = 0; k < calls.n; k++) { /* by kernel, in order of first call */
      size_t first = 0, n = 0;
      while (strcmp(calls.v[first].kernel, calls.v[k].kernel) != 0) first++;
      if (first != k) continue;
      for (size_t q = k; q < calls.n; q++) n += strcmp(calls.v[q].kernel, calls.v[k].kernel) == 0;
      fprintf(out, "%s %s x%zu", k ? "," : "  by kernel:", calls.v[k].kernel, n);
    }
    fputs(calls.n ? "\n  total to the host: " : "  total to the host: ", out);
    print_sum(out, down.v, down.n, down_unknown);
    fputs(" bytes\n  total back to the device: ", out);
    print_sum(out, up.v, up.n, up_unknown);
    fputs(" bytes\n", out);
    free(down.v);
    free(up.v);
  }
  for (size_t k = 0; k < calls.n; k++) {
    for (size_t q = 0; q < calls.v[k].down.n; q++) free(calls.v[k].down.v[q]);
    for (size_t q = 0; q < calls.v[k].up.n; q++) free(calls.v[k].up.v[q]);
    free(calls.v[k].down.v);
    free(calls.v[k].up.v);
  }
  free(calls.v);
  free(c.facts);
}

dvm_status *dvmc_cuda_host_report(const void *data, size_t size, char **text) {
  dvm_module *m;
  dvm_status *st = dvm_module_new_empty(&m);
  if (st) return st;
  placer p = {.m = m, .dry = 1};
  char *buf = NULL;
  size_t len = 0;
  FILE *out = NULL;
  if ((st = dvm_bc_read(m, data, size)) || (st = dvm_verify_module(m))) goto done;
  if (!(out = open_memstream(&buf, &len))) {
    st = dvm_status_new(DVM_OUT_OF_MEMORY, "host calls report");
    goto done;
  }
  int clones = 0;
  for (uint32_t i = 0; i < m->nfuncs && !p.error && !p.oom; i++) {
    char name[256];
    snprintf(name, sizeof name, "%s@cuda", m->funcs[i].name);
    for (uint32_t j = 0; j < m->nfuncs; j++)
      if (strcmp(m->funcs[j].name, name) == 0) {
        if (clones++) fputc('\n', out);
        report_func(&p, &m->funcs[i], &m->funcs[j], out);
      }
  }
  if (!p.error && !p.oom && !clones)
    p.error = dvm_status_new(DVM_INVALID_ARGUMENT, "the module has no NAME@cuda functions: "
                             "compile it with --target cpu,cuda");
  st = p.error ? p.error : p.oom ? dvm_status_new(DVM_OUT_OF_MEMORY, "host calls report") : NULL;
done:
  if (out) fclose(out);
  if (!st) *text = buf;
  else free(buf);
  for (size_t i = 0; i < p.gens.n; i++) free(p.gens.v[i].src);
  free(p.gens.v);
  for (size_t i = 0; i < p.owned.n; i++) free(p.owned.v[i]);
  free(p.owned.v);
  free(p.kernels.v);
  dvm_module_release(m);
  return st;
}
