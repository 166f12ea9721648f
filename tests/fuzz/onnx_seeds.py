#!/usr/bin/env python3
"""Writes the generated seeds of the fuzz_onnx corpus (tests/fuzz/corpus/onnx/
valid_gen_*.onnx): small valid models whose nodes carry the attributes the
importer and lowering parse for recurrent ops, activations, sequence and
optional types and ops, TfIdfVectorizer, Scan, the decode-state ops
(LinearAttention, CausalConvWithState, TensorScatter) and the sampling ops
(GridSample, AffineGrid, DeformConv, Resize, Upsample, ConvTranspose),
the random ops (RandomNormal, RandomUniform, their *Like forms, Bernoulli,
Multinomial) and the ai.onnx.ml linear models, SVMs, feature preparation
ops and TreeEnsemble (opset 5), and quantize_static's QuantizeLinear /
DequantizeLinear pairs (passes quant_const, conv_nhwc, qdq_pair), so the
fuzzer mutates from inputs that reach that code.

    python3 tests/fuzz/onnx_seeds.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT
rng = np.random.default_rng(3)


def weight(name, *shape, dtype=np.float32):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(dtype), name)


def save_seed(out, name, nodes, inputs, outputs, inits, opset=17, extra_opsets=()):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, v) for d, v in extra_opsets])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, f"valid_gen_{name}.onnx"))


def recurrent(out):
    """LSTM (bidirectional, sequence_lens, initial states, peepholes, clip),
    GRU (linear_before_reset, activations), RNN (activation list), chained
    on one [seq, batch, 4] input with a symbolic sequence length."""
    h, i = 3, 4
    x = helper.make_tensor_value_info("x", F, ["seq", 2, i])
    lens = helper.make_tensor_value_info("lens", TensorProto.INT32, [2])
    inits = [weight("lw", 2, 4 * h, i), weight("lr", 2, 4 * h, h), weight("lb", 2, 8 * h),
             weight("lh", 2, 2, h), weight("lc", 2, 2, h), weight("lp", 2, 3 * h),
             weight("gw", 1, 3 * h, 2 * h), weight("gr", 1, 3 * h, h), weight("gb", 1, 6 * h),
             weight("rw", 1, h, h), weight("rr", 1, h, h)]
    nodes = [
        helper.make_node("LSTM", ["x", "lw", "lr", "lb", "lens", "lh", "lc", "lp"], ["ly", "lyh", "lyc"],
                         hidden_size=h, direction="bidirectional", clip=5.0,
                         activations=["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Tanh", "Tanh"],
                         activation_alpha=[1.0, 1.0, 1.0, 0.2, 1.0, 1.0],
                         activation_beta=[0.0, 0.0, 0.0, 0.5, 0.0, 0.0]),
        helper.make_node("Transpose", ["ly"], ["lt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["lt", "shape"], ["gx"]),
        helper.make_node("GRU", ["gx", "gw", "gr", "gb"], ["gy", "gyh"], hidden_size=h,
                         linear_before_reset=1, activations=["Sigmoid", "Tanh"]),
        helper.make_node("Squeeze", ["gy", "one"], ["rx"]),
        helper.make_node("RNN", ["rx", "rw", "rr"], ["y"], hidden_size=h, direction="reverse",
                         activations=["Relu"]),
    ]
    inits += [numpy_helper.from_array(np.array([0, 0, -1], np.int64), "shape"),
              numpy_helper.from_array(np.array([1], np.int64), "one")]
    save_seed(out, "recurrent", nodes, [x, lens], [helper.make_tensor_value_info("y", F, None),
                                               helper.make_tensor_value_info("lyh", F, None),
                                               helper.make_tensor_value_info("gyh", F, None)], inits)


def activations(out):
    """Every attribute-carrying activation, chained; one input dim written
    as dim_value -1 and one as 0 (unknown dims as exporters write them)."""
    x = helper.make_tensor_value_info("x", F, [-1, 0, 5])
    chain = [("HardSigmoid", dict(alpha=0.3, beta=0.4)), ("Elu", dict(alpha=0.7)), ("Selu", dict(alpha=1.5, gamma=1.1)),
             ("Celu", dict(alpha=0.9)), ("LeakyRelu", dict(alpha=0.02)), ("ThresholdedRelu", dict(alpha=0.1)),
             ("Shrink", dict(bias=0.1, lambd=0.3)), ("Softplus", {}), ("Softsign", {}), ("HardSwish", {}),
             ("Mish", {}), ("Gelu", dict(approximate="tanh")), ("Clip", {}), ("Hardmax", dict(axis=-1)),
             ("LogSoftmax", dict(axis=1)), ("Softmax", dict(axis=-1))]
    nodes, prev = [], "x"
    for n, (op, attrs) in enumerate(chain):
        nodes.append(helper.make_node(op, [prev], [f"a{n}"], **attrs))
        prev = f"a{n}"
    nodes.append(helper.make_node("Mul", [prev, "scale"], ["y"]))
    save_seed(out, "activations", nodes, [x], [helper.make_tensor_value_info("y", F, None)],
              [weight("scale", 5)], opset=20)


def sequences(out):
    """Sequence and optional types (a sequence input, an optional sequence
    input, an optional output) and the ops on them: SplitToSequence
    (axis, keepdims), SequenceInsert/At/Erase/Length, SequenceMap with a
    body, Optional with a TYPE_PROTO attribute, OptionalHasElement and
    OptionalGetElement, If carrying an optional."""
    I64 = TensorProto.INT64
    s = helper.make_tensor_sequence_value_info("s", F, None)
    o = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))))
    x = helper.make_tensor_value_info("x", F, ["n", 4])
    body = helper.make_graph([helper.make_node("Add", ["bi", "bx"], ["bo"])], "body",
                             [helper.make_tensor_value_info("bi", F, ["m", 4]), helper.make_tensor_value_info("bx", F, ["n", 4])],
                             [helper.make_tensor_value_info("bo", F, None)])
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))
    then_b = helper.make_graph([helper.make_node("Optional", [], ["e"], type=seq_t)], "then", [],
                               [helper.make_value_info("e", helper.make_optional_type_proto(seq_t))])
    else_b = helper.make_graph([helper.make_node("Optional", ["parts"], ["f"])], "else", [],
                               [helper.make_value_info("f", helper.make_optional_type_proto(seq_t))])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=1),
             helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
             helper.make_node("SequenceAt", ["s2", "minus1"], ["last"]),
             helper.make_node("SequenceErase", ["s2"], ["s3"]),
             helper.make_node("SequenceLength", ["s3"], ["len"]),
             helper.make_node("SequenceMap", ["s2", "x"], ["mapped"], body=body),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("If", ["has"], ["opt"], then_branch=then_b, else_branch=else_b),
             helper.make_node("OptionalGetElement", ["o"], ["got"])]
    outs = [helper.make_tensor_value_info("last", F, None), helper.make_tensor_value_info("len", I64, []),
            helper.make_tensor_sequence_value_info("mapped", F, None), helper.make_value_info("opt", o.type),
            helper.make_tensor_sequence_value_info("got", F, None)]
    save_seed(out, "sequences", nodes, [s, o, x], outs, [numpy_helper.from_array(np.array(-1, np.int64), "minus1")])


def tfidf(out):
    """TfIdfVectorizer with every attribute it parses (weights included)."""
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=1, max_gram_length=2,
                            max_skip_count=1, ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4],
                            pool_int64s=[2, 3, 5, 2, 3, 5, 6], weights=[0.5, 1.0, 1.5, 2.0, 2.5])
    save_seed(out, "tfidf", [node], [helper.make_tensor_value_info("x", TensorProto.INT64, ["b", 9])],
              [helper.make_tensor_value_info("y", F, None)], [], opset=12)


def decode_state(out):
    """Scan (scan_input_axes/directions, scan_output_axes/directions) over a
    body, LinearAttention (gated_delta, omitted past_state),
    CausalConvWithState (silu, omitted bias) and TensorScatter (circular)."""
    x = helper.make_tensor_value_info("x", F, [1, "t", 8])
    body = helper.make_graph([helper.make_node("Add", ["s", "xt"], ["s2"]),
                              helper.make_node("Neg", ["s2"], ["y"])], "body",
                             [helper.make_tensor_value_info("s", F, [1, 8]),
                              helper.make_tensor_value_info("xt", F, [1, 8])],
                             [helper.make_tensor_value_info("s2", F, [1, 8]),
                              helper.make_tensor_value_info("y", F, [1, 8])])
    nodes = [
        helper.make_node("Scan", ["s0", "x"], ["sf", "sy"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                         scan_input_directions=[1], scan_output_axes=[-2], scan_output_directions=[1]),
        helper.make_node("Sigmoid", ["sy"], ["beta8"]),
        helper.make_node("Slice", ["beta8", "zero", "two", "minus1"], ["beta"]),
        helper.make_node("LinearAttention", ["sy", "sy", "sy", "", "sy", "beta"], ["la", "state"], q_num_heads=2,
                         kv_num_heads=2, update_rule="gated_delta", scale=0.5, chunk_size=16),
        helper.make_node("Transpose", ["la"], ["lt"], perm=[0, 2, 1]),
        helper.make_node("CausalConvWithState", ["lt", "cw", "", "cs"], ["cy", "cstate"], activation="silu"),
        helper.make_node("TensorScatter", ["cache", "cstate", "wi"], ["y"], axis=2, mode="circular"),
    ]
    inits = [weight("s0", 1, 8), weight("cw", 8, 1, 3), weight("cs", 1, 8, 2), weight("cache", 1, 8, 5),
             numpy_helper.from_array(np.array([4], np.int64), "wi"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([2], np.int64), "two"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    save_seed(out, "decode_state", nodes, [x], [helper.make_tensor_value_info("y", F, None),
                                            helper.make_tensor_value_info("cy", F, None),
                                            helper.make_tensor_value_info("state", F, None)], inits, opset=27)


def spatial(out):
    """The spatial and signal ops with their attributes, chained on one
    [1, 8, 6, 6] input: LpPool (p, pads, strides, dilations), DepthToSpace
    and SpaceToDepth (CRD), InstanceNormalization, GroupNormalization,
    MeanVarianceNormalization (axes), LRN, PRelu, CenterCropPad (axes), a
    training-mode BatchNormalization, MaxUnpool, Col2Im, Det, a Hann window,
    DFT (one-sided, dft_length omitted before axis) and STFT."""
    x = helper.make_tensor_value_info("x", F, [1, 8, 6, 6])
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)
    inits = [weight("sc", 8), weight("bi", 8), weight("slope", 8, 1, 1), weight("mu", 8),
             i64("crop", [4, 4]), i64("img", [4, 4]), i64("blk", [2, 2]), i64("n", 8), i64("step", 2),
             numpy_helper.from_array(np.abs(rng.standard_normal(8)).astype(np.float32), "var")]
    nodes = [
        helper.make_node("LpPool", ["x"], ["p"], kernel_shape=[3, 3], p=3, pads=[1, 1, 1, 1], strides=[1, 1],
                         dilations=[1, 1]),
        helper.make_node("DepthToSpace", ["p"], ["d"], blocksize=2, mode="CRD"),
        helper.make_node("SpaceToDepth", ["d"], ["s"], blocksize=2),
        helper.make_node("InstanceNormalization", ["s", "sc", "bi"], ["in"], epsilon=1e-3),
        helper.make_node("GroupNormalization", ["in", "sc", "bi"], ["gn"], num_groups=4, epsilon=1e-4),
        helper.make_node("MeanVarianceNormalization", ["gn"], ["mv"], axes=[0, 2, 3]),
        helper.make_node("LRN", ["mv"], ["lr"], size=3, alpha=2e-4, beta=0.6, bias=1.5),
        helper.make_node("PRelu", ["lr", "slope"], ["pr"]),
        helper.make_node("BatchNormalization", ["pr", "sc", "bi", "mu", "var"], ["bn", "rm", "rv"], training_mode=1,
                         momentum=0.8),
        helper.make_node("CenterCropPad", ["bn", "crop"], ["cc"], axes=[-2, -1]),
        helper.make_node("MaxPool", ["cc"], ["mp", "mi"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxUnpool", ["mp", "mi"], ["un"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["un", "shp"], ["cols"]),
        helper.make_node("Col2Im", ["cols", "img", "blk"], ["ci"], strides=[2, 2]),
        helper.make_node("Det", ["ci"], ["det"]),
        helper.make_node("HannWindow", ["n"], ["win"], periodic=0),
        helper.make_node("Unsqueeze", ["det", "ax"], ["sig"]),
        helper.make_node("DFT", ["sig", "", "axis"], ["f"], onesided=1),
        helper.make_node("STFT", ["sig", "step", "win"], ["y"], onesided=1),
    ]
    inits += [i64("shp", [1, 32, 4]), i64("ax", [2]), i64("axis", 1)]
    save_seed(out, "spatial", nodes, [x], [helper.make_tensor_value_info("y", F, None),
                                           helper.make_tensor_value_info("f", F, None),
                                           helper.make_tensor_value_info("rm", F, None)], inits, opset=21)


def sampling(out):
    """GridSample (mode, padding_mode, align_corners), AffineGrid, DeformConv
    (offset_group, mask, bias), Resize (tf_crop_and_resize with roi,
    extrapolation_value, keep_aspect_ratio_policy, axes) and ConvTranspose
    (output_shape, auto_pad) on one image; Upsample-9 on its own."""
    x = helper.make_tensor_value_info("x", F, [1, 2, "h", "w"])
    theta = helper.make_tensor_value_info("theta", F, [1, 2, 3])
    inits = [numpy_helper.from_array(np.array([1, 2, 4, 4], np.int64), "gsize"),
             weight("dw", 2, 2, 2, 2), weight("db", 2), weight("ct_w", 2, 2, 3, 3),
             numpy_helper.from_array(np.array([0.1, 0.2, 0.9, 0.8], np.float32), "roi"),
             numpy_helper.from_array(np.array([3, 7], np.int64), "rsizes")]
    nodes = [
        helper.make_node("AffineGrid", ["theta", "gsize"], ["grid"], align_corners=1),
        helper.make_node("GridSample", ["x", "grid"], ["gs"], mode="cubic", padding_mode="reflection",
                         align_corners=0),
        helper.make_node("Conv", ["gs", "ones"], ["off"], pads=[0, 0, 0, 0]),
        helper.make_node("Sigmoid", ["off"], ["off_s"]),
        helper.make_node("Slice", ["off_s", "m0", "m1", "m_ax"], ["mask"]),
        helper.make_node("DeformConv", ["gs", "dw", "off", "db", "mask"], ["dc"], kernel_shape=[2, 2],
                         offset_group=2, pads=[0, 0, 0, 0]),
        helper.make_node("Resize", ["dc", "roi", "", "rsizes"], ["rs"], mode="linear", axes=[2, 3],
                         coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0),
        helper.make_node("Resize", ["rs", "", "", "rsizes"], ["rk"], axes=[3, 2],
                         keep_aspect_ratio_policy="not_larger"),
        helper.make_node("ConvTranspose", ["rk", "ct_w"], ["ct"], strides=[2, 2], output_shape=[3, 7]),
        helper.make_node("ConvTranspose", ["ct", "ct_w"], ["ca"], strides=[2, 1], auto_pad="SAME_UPPER"),
    ]
    inits += [weight("ones", 16, 2, 2, 2),
              numpy_helper.from_array(np.array([0], np.int64), "m0"),
              numpy_helper.from_array(np.array([8], np.int64), "m1"),
              numpy_helper.from_array(np.array([1], np.int64), "m_ax")]
    save_seed(out, "sampling", nodes, [x, theta], [helper.make_tensor_value_info("ca", F, None)], inits, opset=22)
    up = [helper.make_node("Upsample", ["x", "uscales"], ["y"], mode="nearest")]
    save_seed(out, "upsample", up, [x], [helper.make_tensor_value_info("y", F, None)],
              [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "uscales")], opset=9)


def random_ops(out):
    """The random ops with every attribute: shape, dtype, mean/scale,
    low/high, seed, sample_size."""
    x = helper.make_tensor_value_info("x", F, ["n", 3])
    nodes = [
        helper.make_node("RandomNormal", [], ["rn"], shape=[2, 3], dtype=TensorProto.DOUBLE, mean=1.0, scale=2.0,
                         seed=4.0),
        helper.make_node("RandomUniform", [], ["ru"], shape=[3], low=-2.0, high=2.0),
        helper.make_node("RandomNormalLike", ["x"], ["rnl"], dtype=TensorProto.FLOAT16, mean=0.5, scale=0.1),
        helper.make_node("RandomUniformLike", ["x"], ["rul"], low=0.0, high=1.0, seed=1.5),
        helper.make_node("Bernoulli", ["rul"], ["b"], dtype=TensorProto.INT32, seed=2.0),
        helper.make_node("Multinomial", ["x"], ["m"], sample_size=4, dtype=TensorProto.INT64, seed=3.0),
    ]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in
            [("rn", TensorProto.DOUBLE), ("ru", F), ("rnl", TensorProto.FLOAT16), ("b", TensorProto.INT32),
             ("m", TensorProto.INT64)]]
    save_seed(out, "random", nodes, [x], outs, [])


def conv_epilogues(out):
    """Conv chains pass conv_act rewrites (scalar affine, PaddlePaddle's
    y * Clip(y + 3, 0, 6) / 6, affine, y * Sigmoid(y), LeakyRelu) and a
    com.microsoft FusedConv with activation_params."""
    x = helper.make_tensor_value_info("x", F, ["n", 4, "h", "w"])
    scalars = [numpy_helper.from_array(np.array([v], np.float32), k)
               for k, v in [("s", 1.5), ("b", -0.25), ("three", 3), ("zero", 0), ("six", 6)]]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c1", "s"], ["a1"]), helper.make_node("Add", ["a1", "b"], ["a2"]),
             helper.make_node("Add", ["a2", "three"], ["h3"]), helper.make_node("Clip", ["h3", "zero", "six"], ["hc"]),
             helper.make_node("Mul", ["a2", "hc"], ["hm"]), helper.make_node("Div", ["hm", "six"], ["hs"]),
             helper.make_node("Mul", ["s", "hs"], ["a3"]), helper.make_node("Add", ["a3", "b"], ["y1"]),
             helper.make_node("Conv", ["y1", "w2"], ["c2"], kernel_shape=[1, 1], group=2),
             helper.make_node("Sigmoid", ["c2"], ["sg"]), helper.make_node("Mul", ["c2", "sg"], ["y2"]),
             helper.make_node("Conv", ["y2", "w3", "b3"], ["c3"], strides=[2, 2], dilations=[2, 1]),
             helper.make_node("LeakyRelu", ["c3"], ["y3"], alpha=0.2),
             helper.make_node("FusedConv", ["y3", "w4", "b4"], ["y"], domain="com.microsoft", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], activation="HardSigmoid", activation_params=[0.2, 0.5])]
    inits = scalars + [weight("w1", 4, 4, 3, 3), weight("b1", 4), weight("w2", 4, 2, 1, 1),
                       weight("w3", 4, 4, 3, 3), weight("b3", 4), weight("w4", 2, 4, 3, 3), weight("b4", 2)]
    save_seed(out, "conv_epilogues", nodes, [x], [helper.make_tensor_value_info("y", F, None)], inits,
              extra_opsets=[("com.microsoft", 1)])


def conv_residual(out):
    """A ResNet block (passes conv_add, conv_nhwc, conv_winograd: 16
    channels, 3x3) and a com.microsoft FusedConv with its Z input."""
    x = helper.make_tensor_value_info("x", F, ["n", 16, "h", "w"])
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "x"], ["s"]), helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("FusedConv", ["r2", "w3", "b3", "x"], ["y"], domain="com.microsoft", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], activation="Relu")]
    inits = [weight("w1", 16, 16, 3, 3), weight("b1", 16), weight("w2", 16, 16, 3, 3), weight("b2", 16),
             weight("w3", 16, 16, 3, 3), weight("b3", 16)]
    save_seed(out, "conv_residual", nodes, [x], [helper.make_tensor_value_info("y", F, None)], inits,
              extra_opsets=[("com.microsoft", 1)])


def qdq_pairs(out):
    """quantize_static's form: weights behind DequantizeLinear, a u8 pair
    between convolutions (its DequantizeLinear on a scale and zero point of
    its own), an i8 pair around an Add, a per-channel pair, and pairs
    before and after a Flatten (pass qdq_pair)."""
    x = helper.make_tensor_value_info("x", F, ["n", 3, "h", "w"])
    def pair(nodes, src, dst, s, z, ds=None, dz=None, **kw):
        nodes += [helper.make_node("QuantizeLinear", [src, s, z], [dst + "_q"], **kw),
                  helper.make_node("DequantizeLinear", [dst + "_q", ds or s, dz or z], [dst], **kw)]
    nodes = [helper.make_node("DequantizeLinear", ["w1_q", "w1_s", "w1_z"], ["w1"], axis=0)]
    pair(nodes, "x", "xq", "s_u", "z_u")
    nodes.append(helper.make_node("Conv", ["xq", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    pair(nodes, "c1", "a1", "s_u", "z_u", "s_u2", "z_u2")
    nodes.append(helper.make_node("Conv", ["a1", "w2"], ["c2"], kernel_shape=[1, 1]))
    pair(nodes, "c2", "a2", "s_i", "z_i")
    nodes.append(helper.make_node("Add", ["a2", "xq"], ["s"]))
    pair(nodes, "s", "a3", "s_c", "z_c", axis=1)
    nodes.append(helper.make_node("GlobalAveragePool", ["a3"], ["g"]))
    pair(nodes, "g", "a4", "s_u", "z_u")
    nodes.append(helper.make_node("Flatten", ["a4"], ["f"]))
    pair(nodes, "f", "y", "s_u", "z_u")
    consts = [("s_u", np.float32(0.05)), ("z_u", np.uint8(128)), ("s_u2", np.float32(0.06)), ("z_u2", np.uint8(120)),
              ("s_i", np.float32(0.03)), ("z_i", np.int8(-3)), ("s_c", np.full(3, 0.07, np.float32)),
              ("z_c", np.zeros(3, np.uint8)), ("w1_q", rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)),
              ("w1_s", np.full(4, 0.01, np.float32)), ("w1_z", np.zeros(4, np.int8))]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts] + [weight("b1", 4), weight("w2", 3, 4, 1, 1)]
    save_seed(out, "qdq_pairs", nodes, [x], [helper.make_tensor_value_info("y", F, None)], inits)


def classical_ml(out):
    """The ai.onnx.ml ops whose attributes lower_ml_linear.c and
    lower_ml_tree5.c read, in two models (a pipeline and a forest)."""
    ml = "ai.onnx.ml"
    nodes = [
        helper.make_node("Imputer", ["x"], ["i"], domain=ml, imputed_value_floats=[0.5, 1.0, 1.5, 2.0],
                         replaced_value_float=float("nan")),
        helper.make_node("Scaler", ["i"], ["s"], domain=ml, offset=[0.1, 0.2, 0.3, 0.4], scale=[2.0, 1.0, 0.5, 1.0]),
        helper.make_node("Normalizer", ["s"], ["n"], domain=ml, norm="L2"),
        helper.make_node("ArrayFeatureExtractor", ["n", "idx"], ["a"], domain=ml),
        helper.make_node("FeatureVectorizer", ["n", "a"], ["v"], domain=ml, inputdimensions=[4, 2]),
        helper.make_node("LinearClassifier", ["v"], ["l1", "p1"], domain=ml, coefficients=[0.1] * 18,
                         intercepts=[0.0, 0.5, -0.5], classlabels_ints=[3, 5, 7], post_transform="SOFTMAX"),
        helper.make_node("LinearRegressor", ["v"], ["r1"], domain=ml, coefficients=[0.2] * 12, intercepts=[1.0, 2.0],
                         targets=2, post_transform="NONE"),
        helper.make_node("SVMClassifier", ["v"], ["l2", "p2"], domain=ml, kernel_type="RBF", kernel_params=[0.3, 0.0, 3.0],
                         support_vectors=[0.1] * 18, vectors_per_class=[1, 1, 1], coefficients=[0.5, -0.5, 0.25] * 2,
                         rho=[0.1, 0.2, 0.3], prob_a=[-1.0] * 3, prob_b=[0.1] * 3, classlabels_ints=[0, 1, 2]),
        helper.make_node("SVMRegressor", ["v"], ["r2"], domain=ml, kernel_type="POLY", kernel_params=[0.5, 1.0, 2.0],
                         support_vectors=[0.2] * 12, n_supports=2, coefficients=[1.0, -1.0], rho=[0.5]),
    ]
    outs = ["l1", "p1", "r1", "l2", "p2", "r2"]
    save_seed(out, "ml_pipeline", nodes, [helper.make_tensor_value_info("x", F, ["n", 4])],
              [helper.make_tensor_value_info(o, TensorProto.INT64 if o[0] == "l" else F, None) for o in outs],
              [numpy_helper.from_array(np.array([3, 0], np.int64), "idx")], extra_opsets=[(ml, 1)])
    forest = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain=ml, tree_roots=[0, 2], nodes_featureids=[0, 1, 2, 3],
        nodes_splits=helper.make_tensor("s", F, [4], [0.5, -0.5, 0.0, 1.0]),
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [4], [0, 1, 4, 5]),
        nodes_truenodeids=[1, 0, 3, 1], nodes_falsenodeids=[2, 1, 2, 0], nodes_trueleafs=[0, 1, 0, 1],
        nodes_falseleafs=[1, 1, 1, 1], nodes_missing_value_tracks_true=[1, 0, 0, 1], leaf_targetids=[0, 1, 0],
        leaf_weights=helper.make_tensor("w", F, [3], [1.0, -2.0, 0.5]), n_targets=2, aggregate_function=1,
        post_transform=0)
    save_seed(out, "ml_forest", [forest], [helper.make_tensor_value_info("x", F, ["n", 4])],
              [helper.make_tensor_value_info("y", F, ["n", 2])], [], extra_opsets=[(ml, 5)])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "onnx")
    recurrent(out)
    activations(out)
    sequences(out)
    tfidf(out)
    decode_state(out)
    spatial(out)
    sampling(out)
    random_ops(out)
    conv_epilogues(out)
    conv_residual(out)
    qdq_pairs(out)
    classical_ml(out)


if __name__ == "__main__":
    main()
