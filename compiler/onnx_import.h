/* ONNX import: a .onnx file (protobuf ModelProto) into the graph IR.
 *
 * The file is untrusted. protobuf-c parses the wire format (after a scan
 * that bounds message nesting and the memory the parse may take); everything
 * semantic is checked here: opsets (default domain 1 to 27, refined per op by lowering; other domains
 * are refused by name), element types, ranks (at most 8), dims, data sizes,
 * external data paths, value names defined once and used only after their
 * definition, and the attribute types of the standard ops.
 *
 * What the graph holds (see ir.h):
 *  - initializers and Constant nodes become constant values (no node);
 *  - graph inputs get their declared dtype and dims: dim_value as a constant,
 *    dim_param as the named symbol (one symbol per name, shared by every input
 *    that uses it), a missing dim as a fresh symbol; inputs that are also
 *    initializers are constants;
 *  - every other node becomes a dvmc_node of its op, whatever the op: support
 *    is decided later, at lowering. An omitted optional input or output ("")
 *    is NULL in the node's in / out;
 *  - If / Loop / Scan bodies become graphs whose parent is the graph of the
 *    node, so their nodes use outer values by name;
 *  - value_info and the declared types of graph outputs are checked but not
 *    attached: shapes other than the inputs' are left to shape inference.
 *
 * Refused with an error that names what: sparse tensors, training info,
 * model functions, ref_attr_name attributes, map / sparse / opaque types
 * (sequences of tensors, optional tensors and optional sequences are
 * taken: dvmc_value.kind), TENSORS / GRAPHS / TYPE_PROTOS attributes, string
 * tensors and element types dvm has no dtype for.
 *
 * Errors are DVM_CORRUPT for a malformed or inconsistent file,
 * DVM_UNIMPLEMENTED for valid ONNX that dvm does not take, DVM_NOT_FOUND /
 * DVM_IO for files that cannot be read, DVM_OUT_OF_MEMORY. Each message starts
 * with the file's path and names the node (name and op type), tensor, value
 * or attribute, e.g.
 *   model.onnx: node "Conv_3" (Conv): attribute "auto_pad" has type INTS, expected STRING
 *
 * Everything is allocated in the context's arena (constant data too, which
 * then stays valid while the context lives). On error *out is NULL and the
 * context may hold a partial graph, which is freed with it. */
#ifndef DVMC_ONNX_IMPORT_H
#define DVMC_ONNX_IMPORT_H

#include <stddef.h>

#include "ir.h"

/* Reads the model at `path`; external data files are found relative to the
 * directory of `path`. */
DVM_MUST_USE dvm_status *dvmc_import_onnx(dvmc_ctx *c, const char *path, dvmc_graph **out);

/* The same from bytes in memory (borrowed for the call). External data files
 * are found relative to `model_dir`; when it is NULL, a model with external
 * data is an error. Messages name the model "<memory>". */
DVM_MUST_USE dvm_status *dvmc_import_onnx_memory(dvmc_ctx *c, const void *data, size_t size,
                                                 const char *model_dir, dvmc_graph **out);

/* The dvm dtype of an ONNX element type (TensorProto.DataType, as in Cast's
 * "to"); false for types dvm has none of. */
bool dvmc_onnx_dtype(int64_t onnx_type, dvm_dtype *out);

/* One ONNX TensorProto (the .pb files of the ONNX test data, which
 * `dvm run` takes as inputs); `what` names it in messages. The data lives in
 * the context's arena. */
DVM_MUST_USE dvm_status *dvmc_import_tensor_memory(dvmc_ctx *c, const void *data, size_t size,
                                                   const char *what, const dvmc_tensor **out);

/* A value of an ONNX SequenceProto file, or of an OptionalProto (same
 * field numbers: a list of zero or one item): a tensor, or a list of
 * values. */
typedef struct dvmc_pbvalue {
  const dvmc_tensor *tensor; /* NULL for a list */
  int n;
  const struct dvmc_pbvalue *items;
} dvmc_pbvalue;

/* One such file (the ONNX test data's .pb of a sequence or optional
 * input); lives in the context's arena. */
DVM_MUST_USE dvm_status *dvmc_import_sequence_memory(dvmc_ctx *c, const void *data, size_t size,
                                                     const char *what, const dvmc_pbvalue **out);

#endif
