"""Writes the seed corpus of the ONNX import fuzzer, tests/fuzz/corpus/onnx/.

Small valid models that between them use every part of the format the
importer reads (each initializer encoding, Constant nodes, attributes of
every kind, dim params and unnamed dims, If / Loop / Scan bodies with outer
references, omitted optional inputs), and a few broken ones. Run again after
changing it: python3 tests/compiler/make_import_fixtures.py
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from dvmtest.onnxmodel import make_model, vi  # noqa: E402

OUT = os.path.join(HERE, "../fuzz/corpus/onnx")
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def seed_model(nodes, inputs, outputs, inits=(), opset=17):
    """The seed: one graph, "main", IR version 8."""
    return make_model(nodes, inputs, outputs, inits, opset=opset, ir_version=8, name="main")


def tensor(name, dtype, dims, field=None, values=None, raw=None):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    if field:
        getattr(t, field).extend(values)
    if raw is not None:
        t.raw_data = raw
    return t


def mlp_seed():
    w = helper.make_tensor("w", F, [4, 3], np.arange(12, dtype=np.float32).tobytes(), raw=True)
    b = helper.make_tensor("b", F, [3], [0.5, -1, 2])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    return seed_model(nodes, [vi("x", F, ["batch", 4])], [vi("y", F, ["batch", 3])], [w, b])


def encodings():
    inits = [
        tensor("f", F, [2], "float_data", [1.5, 2]),
        tensor("d", TensorProto.DOUBLE, [1], "double_data", [0.25]),
        tensor("i", I64, [2], "int64_data", [-1, 7]),
        tensor("i32", TensorProto.INT32, [1], "int32_data", [9]),
        tensor("i16", TensorProto.INT16, [1], "int32_data", [-9]),
        tensor("i8", TensorProto.INT8, [2], "int32_data", [-128, 127]),
        tensor("u8", TensorProto.UINT8, [1], "int32_data", [255]),
        tensor("bo", B, [2], "int32_data", [1, 0]),
        tensor("h", TensorProto.FLOAT16, [1], "int32_data", [0x3C00]),
        tensor("bf", TensorProto.BFLOAT16, [1], "int32_data", [0x3F80]),
        tensor("rb", B, [2], raw=bytes([0, 1])),
        tensor("rh", TensorProto.FLOAT16, [1], raw=bytes([0, 0x3C])),
        tensor("s", F, [], raw=np.float32(3).tobytes()),
        tensor("e", F, [0, 2]),
        tensor("u16", TensorProto.UINT16, [1], "int32_data", [65535]),
        tensor("u32", TensorProto.UINT32, [2], "uint64_data", [2**32 - 1, 0]),
        tensor("u64", TensorProto.UINT64, [1], "uint64_data", [2**64 - 1]),
        tensor("ru64", TensorProto.UINT64, [1], raw=np.uint64(2**63).tobytes()),
    ]
    nodes = [helper.make_node("Identity", [t.name], [t.name + "_o"]) for t in inits]
    return seed_model(nodes, [], [vi(t.name + "_o", t.data_type, None) for t in inits], inits)


def constants():
    nodes = [
        helper.make_node("Constant", [], ["t"], value=helper.make_tensor("v", I64, [2], [1, -1])),
        helper.make_node("Constant", [], ["f"], value_float=0.5),
        helper.make_node("Constant", [], ["fs"], value_floats=[1.0, 2.5]),
        helper.make_node("Constant", [], ["i"], value_int=3),
        helper.make_node("Constant", [], ["is"], value_ints=[4, 5]),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    return seed_model(nodes, [vi("x", F, [2, 3])], [vi("y", F, None)])


def attributes():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], auto_pad="SAME_UPPER", strides=[1, 1], group=1),
        helper.make_node("LeakyRelu", ["c"], ["l"], alpha=0.01),
        helper.make_node("ConstantOfShape", ["s"], ["k"], value=helper.make_tensor("v", F, [1], [0.0])),
        helper.make_node("Resize", ["l", "", "sc"], ["r"], mode="nearest"),
        helper.make_node("Dropout", ["r"], ["y", ""]),
        helper.make_node("Custom", ["y"], ["z"], names=["a", "b"], scales=[0.5, 1e-5]),
    ]
    inputs = [vi("x", F, [1, 1, None, None]), vi("w", F, [1, 1, 3, 3]), vi("s", I64, [2]), vi("sc", F, [4])]
    return seed_model(nodes, inputs, [vi("z", F, None), vi("k", F, None)])


def if_model():
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t"])], "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    return seed_model(nodes, [vi("c", B, []), vi("x", F, ["n"])], [vi("y", F, None)],
                      [helper.make_tensor("w", F, [1], [2])])


def loop_seed():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "step"], ["acc2"]), helper.make_node("Identity", ["cond"], ["cond2"])],
        "body", [vi("i", I64, []), vi("cond", B, []), vi("acc", F, ["n"])],
        [vi("cond2", B, []), vi("acc2", F, ["n"])])
    nodes = [helper.make_node("Loop", ["trip", "", "a0"], ["a"], body=body)]
    return seed_model(nodes, [vi("trip", I64, []), vi("a0", F, ["n"]), vi("step", F, ["n"])], [vi("a", F, None)])


def scan_seed():
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
                             "body", [vi("s", F, [2]), vi("x", F, [2])], [vi("s2", F, [2]), vi("o", F, [2])])
    nodes = [helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1)]
    return seed_model(nodes, [vi("init", F, [2]), vi("xs", F, ["t", 2])], [vi("final", F, None), vi("ys", F, None)])


def shapes_seed():
    nodes = [helper.make_node("Shape", ["ids"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
             helper.make_node("Unsqueeze", ["seq", "zero"], ["seq1"]),
             helper.make_node("Concat", ["seq1", "neg"], ["shape"], axis=0),
             helper.make_node("Reshape", ["mask", "shape"], ["y"])]
    inits = [helper.make_tensor("one", I64, [], [1]), helper.make_tensor("zero", I64, [1], [0]),
             helper.make_tensor("neg", I64, [1], [-1])]
    return seed_model(nodes, [vi("ids", I64, ["batch", "seq"]), vi("mask", I64, ["batch", "seq"])],
                      [vi("y", I64, None)], inits)


def quant_contrib():
    """The quantization ops and ONNX Runtime's com.microsoft ops, with their
    attributes (axis, block_size, strides, epsilon, num_heads, ...)."""
    U8, I8, I32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
    ms = "com.microsoft"
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "qs", "qz"]),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q2"], axis=1, block_size=2),
        helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["d"], axis=1, block_size=2),
        helper.make_node("MatMulInteger", ["q", "wq", "qz", "wz"], ["mi"]),
        helper.make_node("ConvInteger", ["ci", "cw"], ["co"], strides=[2, 2], pads=[1, 1, 1, 1], group=1),
        helper.make_node("SkipLayerNormalization", ["d", "d", "g", "", ""], ["sl", "", "", "sum"], domain=ms,
                         epsilon=1e-5),
        helper.make_node("Attention", ["e", "aw", "ab", "m"], ["at"], domain=ms, num_heads=2, unidirectional=0,
                         mask_filter_value=-1e4),
        helper.make_node("FusedGemm", ["d", "gw"], ["fg"], domain=ms, activation="LeakyRelu", activation_alpha=0.1,
                         transB=1),
        helper.make_node("FusedMatMul", ["d", "gw"], ["fm"], domain=ms, alpha=0.5, transB=1, transBatchA=0),
    ]
    inputs = [vi("x", F, ["n", 4]), vi("s", F, ["n", 2]), vi("z", U8, ["n", 2]), vi("wq", U8, [4, 3]),
              vi("wz", U8, []), vi("ci", U8, [1, 1, 5, 5]), vi("cw", U8, [1, 1, 3, 3]), vi("g", F, [4]),
              vi("e", F, [1, "t", 4]), vi("aw", F, [4, 12]), vi("ab", F, [12]), vi("m", I32, [1]),
              vi("gw", F, [3, 4])]
    outputs = [vi(k, F, None) for k in ["sl", "sum", "at", "fg", "fm"]] + [vi("mi", I32, None), vi("co", I32, None)]
    m = seed_model(nodes, inputs, outputs, opset=21)
    m.opset_import.append(helper.make_opsetid(ms, 1))
    return m


def attention():
    """ONNX Attention (opset 25) with a mask, a past, omitted inputs and
    outputs and its attributes; RotaryEmbedding with its own."""
    nodes = [
        helper.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], interleaved=1, rotary_embedding_dim=2,
                         num_heads=2),
        helper.make_node("Attention", ["qr", "k", "v", "m", "pk", "pv"], ["y", "", "pv2", "qk"], is_causal=1,
                         q_num_heads=2, kv_num_heads=1, scale=0.5, softcap=3.0, qk_matmul_output_mode=2,
                         softmax_precision=1, left_window_size=2, right_window_size=-1),
    ]
    inputs = [vi("q", F, [1, "s", 8]), vi("cos", F, [16, 1]), vi("sin", F, [16, 1]), vi("pos", I64, [1, "s"]),
              vi("k", F, [1, "s", 4]), vi("v", F, [1, "s", 4]), vi("m", B, ["s", "t"]), vi("pk", F, [1, 1, "p", 4]),
              vi("pv", F, [1, 1, "p", 4])]
    return seed_model(nodes, inputs, [vi(k, F, None) for k in ["y", "pv2", "qk"]], opset=25)


def unsigned():
    """The unsigned dtypes, BitCast, Cast's saturate and Mean (opset 26)."""
    nodes = [helper.make_node("BitCast", ["x"], ["b"], to=TensorProto.UINT32),
             helper.make_node("BitShift", ["b", "s"], ["sh"], direction="RIGHT"),
             helper.make_node("Cast", ["sh"], ["c"], to=F, saturate=1),
             helper.make_node("CastLike", ["c", "x"], ["cl"], saturate=0),
             helper.make_node("Mean", ["x", "cl", "x"], ["y"])]
    s = tensor("s", TensorProto.UINT32, [1], "uint64_data", [3])
    return seed_model(nodes, [vi("x", F, ["n", 3])], [vi("y", F, ["n", 3])], [s], opset=26)


def broken(m, edit):
    m = onnx.ModelProto.FromString(m.SerializeToString())
    edit(m)
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    valid = {"mlp": mlp_seed(), "encodings": encodings(), "constants": constants(), "attributes": attributes(),
             "if": if_model(), "loop": loop_seed(), "scan": scan_seed(), "shapes": shapes_seed(),
             "quant_contrib": quant_contrib(), "attention": attention(), "unsigned": unsigned()}
    files = {f"valid_{k}.onnx": m.SerializeToString() for k, m in valid.items()}
    small = mlp_seed()

    def undefined(m):
        m.graph.node[1].input[0] = "nope"

    def bad_raw(m):
        m.graph.initializer[0].raw_data = b"\0" * 5

    def bad_attr(m):
        m.graph.node[3].attribute[0].type = onnx.AttributeProto.INTS

    def opset9(m):
        m.opset_import[0].version = 9

    def external(m):
        t = m.graph.initializer[0]
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "w.bin"

    for name, edit in [("undefined", undefined), ("raw_size", bad_raw), ("attr_type", bad_attr),
                       ("opset9", opset9), ("external", external)]:
        files[f"broken_{name}.onnx"] = broken(small, edit).SerializeToString()
    data = small.SerializeToString()
    files["broken_truncated.onnx"] = data[: len(data) // 2]
    files["broken_empty.onnx"] = b""
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
