"""Makes the end-to-end fixture models (committed, small): each has
symbolic dims so one .dvmb must serve every shape.

  mlp.onnx        x[batch, 16] -> 3 linear layers with relu -> [batch, 4]
  bert.onnx       ids[batch, seq] (i64), mask[batch, seq] (i64) -> a 2-layer
                  transformer encoder the way exporters write one: embedding
                  gathers, LayerNorm, Shape->Gather->Unsqueeze->Concat->Reshape
                  head splits, scaled dot-product attention with an additive
                  mask, erf GELU, residuals -> hidden [batch, seq, 32]
  resnet.onnx     image[batch, 3, height, width] -> conv/bn/relu stem, max
                  pool, two residual blocks (one strided with a 1x1
                  projection), global average pool, gemm -> [batch, 10]
  control.onnx    x[n] -> If (sum(x) > 0) doubles or negates, then a Loop
                  adds x to an accumulator trip-count times -> [n]

Run: python3 tests/models/make_models.py (writes next to this file).
`make_models.py --bert-base DIR` writes DIR/bert_base.onnx, the same encoder
at BERT-base's sizes (12 layers, hidden 768, 12 heads, FFN 3072, vocabulary
30522; 440 MB, not committed) for bench/bench_models.py.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(2026)
OPSET = [helper.make_opsetid("", 17)]


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64_init(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save_fixture(graph, name, out_dir=HERE):
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="dvm-fixtures")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, name))


def mlp_model():
    nodes, inits = [], []
    prev, width = "x", 16
    for i, out in enumerate([32, 32, 4]):
        inits += [w(f"w{i}", width, out), w(f"b{i}", out)]
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"mm{i}"], name=f"MatMul_{i}"),
                  helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"lin{i}"], name=f"Add_{i}")]
        prev = f"lin{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [prev], [f"act{i}"], name=f"Relu_{i}"))
            prev = f"act{i}"
        width = out
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="Output"))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], inits)
    save_fixture(g, "mlp.onnx")


def bert_model(layers=2, hidden=32, heads=4, vocab=100, max_pos=64, ffn=64, name="bert.onnx", out_dir=HERE):
    dh = hidden // heads
    nodes, inits = [], []
    n = nodes.append
    inits += [w("tok_emb", vocab, hidden), w("pos_emb", max_pos, hidden), w("emb_ln_g", hidden, scale=1.0),
              w("emb_ln_b", hidden), i64_init("c0", [0]), i64_init("c1", [1]), i64_init("c_heads", [heads]),
              i64_init("c_dh", [dh]), i64_init("c_hidden", [hidden]),
              numpy_helper.from_array(np.array(1.0, np.float32), "one"),
              numpy_helper.from_array(np.array(-10000.0, np.float32), "neg"),
              numpy_helper.from_array(np.array(1 / np.sqrt(dh), np.float32), "scale"),
              numpy_helper.from_array(np.array(np.sqrt(0.5), np.float32), "rsqrt2"),
              numpy_helper.from_array(np.array(0.5, np.float32), "half"),
              numpy_helper.from_array(np.array(0, np.int64), "s0"),
              numpy_helper.from_array(np.array(1, np.int64), "s1")]
    # positions 0..seq-1 from the ids' shape
    n(helper.make_node("Shape", ["ids"], ["ids_shape"], name="Shape_ids"))
    n(helper.make_node("Gather", ["ids_shape", "s1"], ["seq_len"], axis=0, name="Gather_seq"))
    n(helper.make_node("Range", ["s0", "seq_len", "s1"], ["pos"], name="Range_pos"))
    n(helper.make_node("Gather", ["tok_emb", "ids"], ["tok"], axis=0, name="Gather_tok"))
    n(helper.make_node("Gather", ["pos_emb", "pos"], ["posv"], axis=0, name="Gather_pos"))
    n(helper.make_node("Add", ["tok", "posv"], ["emb"], name="Add_emb"))
    n(helper.make_node("LayerNormalization", ["emb", "emb_ln_g", "emb_ln_b"], ["h0"], axis=-1, epsilon=1e-5,
                       name="LayerNorm_emb"))
    # additive mask [batch, 1, 1, seq]
    n(helper.make_node("Unsqueeze", ["mask", "c1"], ["m1"], name="Unsqueeze_m1"))
    n(helper.make_node("Unsqueeze", ["m1", "c1"], ["m2"], name="Unsqueeze_m2"))
    n(helper.make_node("Cast", ["m2"], ["mf"], to=TensorProto.FLOAT, name="Cast_mask"))
    n(helper.make_node("Sub", ["one", "mf"], ["minv"], name="Sub_mask"))
    n(helper.make_node("Mul", ["minv", "neg"], ["madd"], name="Mul_mask"))
    h = "h0"
    for l in range(layers):
        p = f"l{l}_"
        for m in "qkvo":
            inits += [w(p + "w" + m, hidden, hidden), w(p + "b" + m, hidden)]
        inits += [w(p + "w1", hidden, ffn), w(p + "b1", ffn), w(p + "w2", ffn, hidden), w(p + "b2", hidden),
                  w(p + "ln1_g", hidden, scale=1.0), w(p + "ln1_b", hidden), w(p + "ln2_g", hidden, scale=1.0),
                  w(p + "ln2_b", hidden)]
        # the exporters' head split: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
        n(helper.make_node("Shape", [h], [p + "hs"], name=p + "Shape"))
        n(helper.make_node("Gather", [p + "hs", "s0"], [p + "b"], axis=0, name=p + "Gather_b"))
        n(helper.make_node("Gather", [p + "hs", "s1"], [p + "s"], axis=0, name=p + "Gather_s"))
        n(helper.make_node("Unsqueeze", [p + "b", "c0"], [p + "bu"], name=p + "Unsqueeze_b"))
        n(helper.make_node("Unsqueeze", [p + "s", "c0"], [p + "su"], name=p + "Unsqueeze_s"))
        n(helper.make_node("Concat", [p + "bu", p + "su", "c_heads", "c_dh"], [p + "split"], axis=0,
                           name=p + "Concat_split"))
        n(helper.make_node("Concat", [p + "bu", p + "su", "c_hidden"], [p + "merge"], axis=0,
                           name=p + "Concat_merge"))
        for m in "qkv":
            n(helper.make_node("MatMul", [h, p + "w" + m], [p + m + "0"], name=p + "MatMul_" + m))
            n(helper.make_node("Add", [p + m + "0", p + "b" + m], [p + m + "1"], name=p + "Add_" + m))
            n(helper.make_node("Reshape", [p + m + "1", p + "split"], [p + m + "2"], name=p + "Reshape_" + m))
            perm = [0, 2, 3, 1] if m == "k" else [0, 2, 1, 3]
            n(helper.make_node("Transpose", [p + m + "2"], [p + m], perm=perm, name=p + "Transpose_" + m))
        n(helper.make_node("MatMul", [p + "q", p + "k"], [p + "sc0"], name=p + "MatMul_qk"))
        n(helper.make_node("Mul", [p + "sc0", "scale"], [p + "sc1"], name=p + "Mul_scale"))
        n(helper.make_node("Add", [p + "sc1", "madd"], [p + "sc2"], name=p + "Add_mask"))
        n(helper.make_node("Softmax", [p + "sc2"], [p + "pr"], axis=-1, name=p + "Softmax"))
        n(helper.make_node("MatMul", [p + "pr", p + "v"], [p + "ctx0"], name=p + "MatMul_pv"))
        n(helper.make_node("Transpose", [p + "ctx0"], [p + "ctx1"], perm=[0, 2, 1, 3], name=p + "Transpose_ctx"))
        n(helper.make_node("Reshape", [p + "ctx1", p + "merge"], [p + "ctx"], name=p + "Reshape_ctx"))
        n(helper.make_node("MatMul", [p + "ctx", p + "wo"], [p + "o0"], name=p + "MatMul_o"))
        n(helper.make_node("Add", [p + "o0", p + "bo"], [p + "o1"], name=p + "Add_o"))
        n(helper.make_node("Add", [p + "o1", h], [p + "r1"], name=p + "Add_res1"))
        n(helper.make_node("LayerNormalization", [p + "r1", p + "ln1_g", p + "ln1_b"], [p + "a"], axis=-1,
                           epsilon=1e-5, name=p + "LayerNorm1"))
        n(helper.make_node("MatMul", [p + "a", p + "w1"], [p + "f0"], name=p + "MatMul_f1"))
        n(helper.make_node("Add", [p + "f0", p + "b1"], [p + "f1"], name=p + "Add_f1"))
        # GELU as exporters write it: x * 0.5 * (1 + erf(x / sqrt 2))
        n(helper.make_node("Mul", [p + "f1", "rsqrt2"], [p + "g0"], name=p + "Mul_gelu0"))
        n(helper.make_node("Erf", [p + "g0"], [p + "g1"], name=p + "Erf"))
        n(helper.make_node("Add", [p + "g1", "one"], [p + "g2"], name=p + "Add_gelu"))
        n(helper.make_node("Mul", [p + "f1", p + "g2"], [p + "g3"], name=p + "Mul_gelu1"))
        n(helper.make_node("Mul", [p + "g3", "half"], [p + "g4"], name=p + "Mul_gelu2"))
        n(helper.make_node("MatMul", [p + "g4", p + "w2"], [p + "f2"], name=p + "MatMul_f2"))
        n(helper.make_node("Add", [p + "f2", p + "b2"], [p + "f3"], name=p + "Add_f2"))
        n(helper.make_node("Add", [p + "f3", p + "a"], [p + "r2"], name=p + "Add_res2"))
        out = "hidden" if l == layers - 1 else p + "out"
        n(helper.make_node("LayerNormalization", [p + "r2", p + "ln2_g", p + "ln2_b"], [out], axis=-1,
                           epsilon=1e-5, name=p + "LayerNorm2"))
        h = out
    g = helper.make_graph(nodes, "bert",
                          [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
                           helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", hidden])],
                          inits)
    save_fixture(g, name, out_dir)


def resnet():
    nodes, inits = [], []
    n = nodes.append

    def conv_bn(x, name, cin, cout, k, stride, relu=True):
        inits.extend([w(name + "_w", cout, cin, k, k, scale=np.sqrt(2 / (cin * k * k))),
                      w(name + "_g", cout, scale=0.1), w(name + "_b", cout, scale=0.1),
                      w(name + "_m", cout, scale=0.1),
                      numpy_helper.from_array((rng.random(cout) + 0.5).astype(np.float32), name + "_v")])
        inits[-2] = numpy_helper.from_array(np.abs(numpy_helper.to_array(inits[-2])), name + "_m")
        inits[-4] = numpy_helper.from_array(1 + numpy_helper.to_array(inits[-4]), name + "_g")
        n(helper.make_node("Conv", [x, name + "_w"], [name + "_c"], kernel_shape=[k, k], strides=[stride, stride],
                           pads=[k // 2] * 4, name=name + "_Conv"))
        n(helper.make_node("BatchNormalization", [name + "_c", name + "_g", name + "_b", name + "_m", name + "_v"],
                           [name + "_bn"], epsilon=1e-5, name=name + "_BN"))
        if not relu:
            return name + "_bn"
        n(helper.make_node("Relu", [name + "_bn"], [name + "_r"], name=name + "_Relu"))
        return name + "_r"

    x = conv_bn("image", "stem", 3, 8, 3, 1)
    n(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                       name="MaxPool"))
    x = "pool"
    for b, (cin, cout, stride) in enumerate([(8, 8, 1), (8, 16, 2)]):
        y = conv_bn(x, f"b{b}a", cin, cout, 3, stride)
        y = conv_bn(y, f"b{b}b", cout, cout, 3, 1, relu=False)
        short = x if stride == 1 and cin == cout else conv_bn(x, f"b{b}p", cin, cout, 1, stride, relu=False)
        n(helper.make_node("Add", [y, short], [f"b{b}_sum"], name=f"b{b}_Add"))
        n(helper.make_node("Relu", [f"b{b}_sum"], [f"b{b}_out"], name=f"b{b}_Relu"))
        x = f"b{b}_out"
    n(helper.make_node("GlobalAveragePool", [x], ["gap"], name="GlobalAveragePool"))
    n(helper.make_node("Flatten", ["gap"], ["flat"], axis=1, name="Flatten"))
    inits += [w("fc_w", 10, 16), w("fc_b", 10)]
    n(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1, name="Gemm"))
    g = helper.make_graph(nodes, "resnet",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    save_fixture(g, "resnet.onnx")


def control():
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t_out"], name="Then_Mul")], "then", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, ["n"])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="Else_Neg")], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, ["n"])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="Body_Cond"),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="Body_Add")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, ["n"])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="ReduceSum"),
             helper.make_node("Greater", ["s", "zero"], ["pos"], name="Greater"),
             helper.make_node("If", ["pos"], ["branch"], then_branch=then_g, else_branch=else_g, name="If"),
             helper.make_node("Constant", [], ["true"], value=helper.make_tensor("tv", TensorProto.BOOL, [], [True]),
                              name="True"),
             helper.make_node("Loop", ["trips", "true", "branch"], ["y"], body=body, name="Loop")]
    g = helper.make_graph(nodes, "control", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])], [two, zero, trips])
    save_fixture(g, "control.onnx")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bert-base"]:  # BERT-base's sizes, for benchmarks: not committed
        bert_model(layers=12, hidden=768, heads=12, vocab=30522, max_pos=512, ffn=3072, name="bert_base.onnx",
                   out_dir=sys.argv[2])
        sys.exit(0)
    mlp_model()
    bert_model()
    resnet()
    control()
