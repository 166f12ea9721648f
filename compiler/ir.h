/* The compiler's graph IR: typed values with symbolic shapes, and nodes.
 *
 * A graph is a list of nodes in topological order (as ONNX keeps them),
 * its inputs and outputs, and the constants it owns. Values are produced by
 * exactly one node (or are graph inputs or constants) and may be used by
 * many. Subgraphs (If branches, Loop bodies) are graphs whose parent is the
 * enclosing graph; their nodes may use the parent's values by name.
 *
 * Everything lives in the context's arena and is freed with it. */
#ifndef DVMC_IR_H
#define DVMC_IR_H

#include <stdbool.h>
#include <stdio.h>

#include "arena.h"
#include "dvm/tensor.h"
#include "expr.h"

typedef struct dvmc_graph dvmc_graph;
typedef struct dvmc_node dvmc_node;

/* Constant data: an initializer, a Constant node's value, a tensor
 * attribute, or the result of folding. */
typedef struct dvmc_tensor {
  dvm_dtype dtype;
  int rank;
  int64_t dims[DVM_MAX_RANK];
  const void *data; /* row-major, host byte order; in the arena or mapped */
  size_t nbytes;     /* strings: data is their .dvmb form (vm/object.h), nbytes its size */
} dvmc_tensor;

/* A type the model declares for a value that is not a graph input (a graph
 * output, a value_info entry). Inference does not read it; after inference
 * the two are compared, and a disagreement is a warning (declared.c). */
typedef struct dvmc_declared {
  const char *role;           /* "output" or "value_info" */
  bool typed;                 /* an element type was declared */
  dvm_dtype dtype;
  int rank;                   /* -1: no shape declared */
  int64_t dims[DVM_MAX_RANK]; /* a fixed dim, or -1: symbolic or unknown */
} dvmc_declared;

/* What a value is: a tensor, or one of the ONNX types the VM holds as
 * tuples (docs/bytecode.md 4.3): a sequence of tensors, an optional tensor,
 * an optional sequence. For those, dtype is that of the tensors inside and
 * rank stays -1 (the tensors' shapes are known at run time only). */
typedef enum {
  DVMC_TENSOR = 0,
  DVMC_SEQUENCE,
  DVMC_OPT_TENSOR,
  DVMC_OPT_SEQUENCE,
} dvmc_kind;

static inline bool dvmc_kind_is_optional(dvmc_kind k) { return k == DVMC_OPT_TENSOR || k == DVMC_OPT_SEQUENCE; }
const char *dvmc_kind_name(dvmc_kind k); /* "tensor", "sequence", "optional tensor", ... */

typedef struct dvmc_value {
  const char *name;
  dvmc_kind kind;   /* a tensor unless said */
  bool typed;       /* dtype known */
  dvm_dtype dtype;
  int rank;         /* -1 until known */
  const dvmc_expr *dims[DVM_MAX_RANK];
  dvmc_node *producer;        /* NULL for graph inputs and constants */
  const dvmc_tensor *constant; /* known data, or NULL */
  /* For small integer tensors whose elements are known as expressions (the
   * Shape -> Gather -> Concat chains of exported models): one expression
   * per element of a 0-d or 1-d tensor, or NULL. */
  const dvmc_expr **elems;
  int nelems;
  int uses;
  int id; /* index in its graph's value list */
  const dvmc_declared *declared; /* what the model declares for it, or NULL */
} dvmc_value;

typedef enum {
  DVMC_ATTR_FLOAT,
  DVMC_ATTR_INT,
  DVMC_ATTR_STRING,
  DVMC_ATTR_TENSOR,
  DVMC_ATTR_GRAPH,
  DVMC_ATTR_FLOATS,
  DVMC_ATTR_INTS,
  DVMC_ATTR_STRINGS,
  DVMC_ATTR_TYPE, /* a TYPE_PROTO (Optional's "type"): kind and dtype in type_of */
} dvmc_attr_type;

typedef struct dvmc_attr {
  const char *name;
  dvmc_attr_type type;
  double f;
  int64_t i;
  const char *s; /* NUL-terminated (attribute strings with NULs are refused) */
  const dvmc_tensor *t;
  dvmc_graph *g;
  int n; /* list length */
  const double *floats;
  const int64_t *ints;
  const char **strings;
  const struct dvmc_value *type_of; /* DVMC_ATTR_TYPE: its kind, dtype, rank */
} dvmc_attr;

struct dvmc_node {
  const char *name;   /* never NULL: imported names, or "OpType_N" */
  const char *op;     /* ONNX op type */
  const struct dvmc_op *def; /* its row in the op table (ops.h), NULL if dvm has none */
  const char *shape_lost;    /* why inference lost its output shapes here, or NULL (infer.h) */
  const char *domain; /* "" for the default domain */
  int opset;          /* the model's opset for that domain */
  int nin, nout;
  dvmc_value **in;    /* an omitted optional input is NULL */
  dvmc_value **out;
  int nattrs;
  dvmc_attr *attrs;
  int id;
};

/* A relation among dims that the model implies (a broadcast between two
 * dims not provably equal), collected by inference on the top-level graph
 * and checked right after the input guards. */
typedef enum {
  DVMC_REL_EQ,        /* a == b: both are >= 2, so the broadcast needs equality */
  DVMC_REL_EQ_OR_ONE, /* a == b, or one of them is 1 */
} dvmc_rel;

typedef struct dvmc_constraint {
  dvmc_rel rel;
  const dvmc_expr *a, *b;
  const dvmc_node *node; /* the node that implies it */
  bool unified;          /* input symbol b was replaced by a everywhere */
  const char *why;       /* for messages: "they broadcast", ... */
} dvmc_constraint;

struct dvmc_graph {
  const char *name;
  dvmc_graph *parent;
  int nnodes, ninputs, noutputs, nvalues;
  dvmc_node **nodes;
  dvmc_value **inputs;  /* graph inputs that are not initializers */
  dvmc_value **outputs;
  dvmc_value **values;  /* every value defined in this graph */
  int nodes_cap, values_cap;
  dvmc_constraint *constraints; /* top-level graph only */
  int nconstraints, constraints_cap;
};

typedef struct dvmc_extfile dvmc_extfile;

/* The compilation context: arena, expressions, options. */
typedef struct dvmc_ctx {
  dvm_arena arena;
  dvmc_exprs *exprs;
  const char *model_dir; /* for external data files */
  dvmc_extfile *extfiles; /* those files, mapped (extdata.c) */
  int opset;             /* default domain opset of the model */
  int unnamed;           /* counter for generated node names */
  /* An allocation failed where NULL has another meaning too (a protobuf
   * parse error, a lowering memo left out): compiling reports out of memory. */
  bool oom;
} dvmc_ctx;

/* A string tensor of n = numel(dims) elements, element i the lens[i]
 * bytes at s[i] (lens NULL: NUL-terminated), in c's arena; NULL when out
 * of memory. */
dvmc_tensor *dvmc_tensor_strings(dvmc_ctx *c, int rank, const int64_t *dims, size_t n, const char *const *s,
                                 const size_t *lens);

DVM_MUST_USE dvm_status *dvmc_ctx_create(dvmc_ctx **out);
void dvmc_ctx_destroy(dvmc_ctx *c);

/* Building graphs. Values are found by name through the graph and its
 * parents. Functions return NULL when out of memory. */
dvmc_graph *dvmc_graph_new(dvmc_ctx *c, const char *name, dvmc_graph *parent);
dvmc_value *dvmc_value_new(dvmc_ctx *c, dvmc_graph *g, const char *name);
dvmc_value *dvmc_value_find(const dvmc_graph *g, const char *name);
dvmc_node *dvmc_node_new(dvmc_ctx *c, dvmc_graph *g, const char *op, int nin, int nout);
const dvmc_attr *dvmc_attr_find(const dvmc_node *n, const char *name);
/* Records a relation unless g already has it (either order); false when
 * out of memory. */
bool dvmc_graph_constrain(dvmc_ctx *c, dvmc_graph *g, const dvmc_constraint *k);

/* Gives symbol NAME of g's inputs the range LO..HI from spec
 * "NAME=LO..HI" or "NAME=N" (--dim, dims=, a serving config): an error
 * naming the spec when it is malformed, out of range or no input of g has
 * a dim of that name. */
DVM_MUST_USE dvm_status *dvmc_graph_set_dim(dvmc_ctx *c, const dvmc_graph *g, const char *spec);

/* Attribute getters with defaults. */
int64_t dvmc_attr_int(const dvmc_node *n, const char *name, int64_t dflt);
double dvmc_attr_float(const dvmc_node *n, const char *name, double dflt);
const char *dvmc_attr_string(const dvmc_node *n, const char *name, const char *dflt);
/* Entry k of an ints attribute, dflt when it is absent or shorter. */
int64_t dvmc_attr_ints_at(const dvmc_node *n, const char *name, int k, int64_t dflt);

/* Prints the graph as text (dvm compile --dump-ir). */
void dvmc_graph_print(const dvmc_graph *g, FILE *out);
void dvmc_value_print_type(const dvmc_value *v, FILE *out); /* "f32[batch, seq, 768]" */
/* Writes g's inputs and node outputs as JSON: name, dtype, dims as
 * expression strings (null where unknown; dims null for an unknown rank),
 * and the producing node and op (dvm compile --dump-shapes). */
void dvmc_graph_print_shapes(const dvmc_graph *g, FILE *out);

#endif
