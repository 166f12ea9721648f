/* Every row of the op table (compiler/ops.def): its CPU kernel exists (a
 * view's row names its shape function instead), a fusable op's
 * fused-program op is the same operation as its kernel, its dtype rule is
 * one the compiler knows, and only the ops listed here lack a symbolic
 * shape rule (adding an op without one must be a decision, visible here). */
#include <string.h>

#include "harness.h"
#include "kernel.h"
#include "ops.h"
#include "ops/cpu/fused.h"
#include "ops/optable.h"
#include "shapefuncs/registry.h"

/* sequences and optionals (and ZipMap's sequence of maps): their values are tuples, which have no shape */
static const char *const without_shape_rule[] = {"SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceInsert",
                                                 "SequenceErase", "SplitToSequence", "ConcatFromSequence", "Optional",
                                                 "OptionalGetElement", "ZipMap",
                                                 /* their sizes are read from the text at run time */
                                                 "StringNormalizer", "StringSplit", NULL};

static int listed(const char *name) {
  for (int i = 0; without_shape_rule[i]; i++)
    if (!strcmp(without_shape_rule[i], name)) return 1;
  return 0;
}

static int known_dtype_rule(const char *rule) {
  static const char *const fields[] = {"", "bool", "i64", "in1", "to", "value", "body", "u8", "f32", "i32", "in2|u8", "in7", "in2", "f32,i32", "dtype", "in0", "in3|in0", "output_datatype", "dtype|f32", "dtype|i32", "labels", "map", "string", NULL};
  for (const char *p = rule ? rule : "";;) {
    size_t l = strcspn(p, ",");
    int ok = 0;
    for (int i = 0; fields[i] && !ok; i++) ok = strlen(fields[i]) == l && !strncmp(fields[i], p, l);
    if (!ok) return 0;
    if (!p[l]) return 1;
    p += l + 1;
  }
}

int main(void) {
  CHECK(dvmc_op_count() >= 76);
  for (int i = 0; i < dvmc_op_count(); i++) {
    const dvmc_op *op = dvmc_op_at(i);
    CHECK(dvmc_op_find(op->domain, op->name) == op);
    CHECK(op->kernel || op->special);
    if (op->kernel) { /* a view's "kernel" is the shape function of its lowering */
      int found = dvm_ops_find(op->kernel, DVM_DEVICE_CPU) || (op->special && dvm_shapefn_find(op->kernel));
      if (!found) fprintf(stderr, "%s: no CPU kernel or shape function \"%s\"\n", op->name, op->kernel);
      CHECK(found);
    }
    if (op->fused >= 0) {
      CHECK(op->kernel && !strcmp(dvm_fused_op_name(op->fused), op->kernel));
      CHECK(op->nin == 1 || op->nin == -1);
    }
    if (!known_dtype_rule(op->dtype)) fprintf(stderr, "%s: dtype rule \"%s\"\n", op->name, op->dtype);
    CHECK(known_dtype_rule(op->dtype));
    if (op->shape_rule == listed(op->name)) fprintf(stderr, "%s: shape rule %d, listed %d\n", op->name, op->shape_rule, listed(op->name));
    CHECK(op->shape_rule != listed(op->name));
    CHECK(op->min_opset >= 1 && op->min_opset <= 28); /* OPSET_MAX */
  }
  CHECK(dvmc_op_find("", "NoSuchOp") == NULL);
  CHECK(dvmc_op_find("ai.onnx", "MatMul") == dvmc_op_find("", "MatMul"));
  CHECK(dvmc_op_find("com.microsoft", "MatMul") == NULL);
  return harness_finish("ops");
}
