"""ONNX Runtime's contrib ops (domain com.microsoft, ops/cpu/contrib.c) as
single-node models, dvm against ONNX Runtime's CPU kernels at awkward
shapes (0-size batch or sequence, 1, primes): max error <= 1e-5 * max |ORT|
(f32 sums in another order)."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from dvmtest.arrays import normal_f32
from dvmtest.cli import compile_onnx, dvm, run_module, try_run
from dvmtest.compare import ort_outputs
from onnx import TensorProto, helper

from dvmop import DvmError, run_model
from test_quant import run_with_ort

rng = np.random.default_rng(11)
f32 = normal_f32(rng)
MS = "com.microsoft"


def close_contrib(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        if w.dtype.kind == "f":
            assert np.abs(g - w).max(initial=0) <= 1e-5 * max(np.abs(w).max(initial=0), 1)
        else:
            np.testing.assert_array_equal(g, w)


SHAPES = [(0, 4), (1, 1), (3, 7), (2, 5, 13), (2, 0, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", ["FastGelu", "BiasGelu"])
def test_gelus(tmp_path, shape, op):
    close_contrib(*run_with_ort(op, {"x": f32(*shape) * 3, "b": f32(shape[-1])}, [("y", np.float32)], domain=MS))


def test_fast_gelu_without_bias(tmp_path):
    close_contrib(*run_with_ort("FastGelu", {"x": f32(3, 5) * 3}, [("y", np.float32)], domain=MS))


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 7), (3, 1, 64), (1, 0, 5)])
@pytest.mark.parametrize("extra", [0, 1, 2])  # gamma; + beta; + beta and bias
@pytest.mark.parametrize("with_sum", [False, True])
def test_skip_layer_normalization(tmp_path, shape, extra, with_sum):
    h = shape[-1]
    inputs = {"x": f32(*shape), "s": f32(*shape), "g": f32(h)}
    if extra >= 1:
        inputs["b"] = f32(h)
    if extra == 2:
        inputs["bias"] = f32(h)
    close_contrib(*run_skip(tmp_path, inputs, with_sum))


def run_skip(tmp_path, inputs, with_sum):
    """SkipLayerNormalization with outputs 1 and 2 (mean, inverse std dev)
    left out and output 3 (the sum) present or not: run_both's models have
    no gaps in their outputs."""
    outs = ["y", "", "", "sum"] if with_sum else ["y"]
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()]
    vo = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in outs if k]
    node = helper.make_node("SkipLayerNormalization", list(inputs), outs, domain=MS, epsilon=1e-5)
    model = helper.make_model(helper.make_graph([node], "g", vi, vo),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    want = ort_outputs(model, inputs)
    return run_model(model, inputs, len(want)), want


@pytest.mark.parametrize("bs", [(1, 1), (2, 7), (3, 13), (0, 3)])
@pytest.mark.parametrize("with_positions", [False, True])
def test_embed_layer_normalization(tmp_path, bs, with_positions):
    b, s = bs
    h, vocab = 5, 11
    mask = rng.integers(0, 2, (b, s)).astype(np.int32)
    inputs = {"ids": rng.integers(0, vocab, (b, s)).astype(np.int32),
              "seg": rng.integers(0, 2, (b, s)).astype(np.int32), "word": f32(vocab, h), "pos": f32(16, h),
              "segt": f32(2, h), "g": f32(h), "beta": f32(h), "mask": mask}
    if with_positions:
        inputs["posids"] = rng.integers(0, 16, (1, s)).astype(np.int32)
    close_contrib(*run_with_ort("EmbedLayerNormalization", inputs, [("y", np.float32), ("mi", np.int32)],
              opset=17, domain=MS, epsilon=1e-5))


# segment ids and the segment table left out together, as ONNX Runtime's
# optimizer writes DistilBERT's (with the mask and position ids given)
@pytest.mark.parametrize("bs", [(1, 1), (2, 7), (0, 3)])
def test_embed_layer_normalization_without_segments(tmp_path, bs):
    b, s = bs
    h, vocab = 5, 11
    inputs = {"ids": rng.integers(0, vocab, (b, s)).astype(np.int32), "seg": "", "word": f32(vocab, h),
              "pos": f32(16, h), "segt": "", "g": f32(h), "beta": f32(h),
              "mask": rng.integers(0, 2, (b, s)).astype(np.int32),
              "posids": rng.integers(0, 16, (b, s)).astype(np.int32)}
    close_contrib(*run_with_ort("EmbedLayerNormalization", inputs, [("y", np.float32), ("mi", np.int32)],
              opset=17, domain=MS, epsilon=1e-5))


def test_embed_layer_normalization_with_one_segment_input_is_refused(tmp_path):
    names = ["ids", "seg", "word", "pos", "", "g", "beta"]
    dims = {"ids": [1, 2], "seg": [1, 2], "word": [3, 4], "pos": [4, 4], "g": [4], "beta": [4]}
    vi = [helper.make_tensor_value_info(k, TensorProto.INT32 if k in ("ids", "seg") else TensorProto.FLOAT, dims[k])
          for k in names if k]
    node = helper.make_node("EmbedLayerNormalization", names, ["y", "mi"], domain=MS)
    model = helper.make_model(helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", 1, None)]),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    with pytest.raises(DvmError, match=r"segment_ids and segment_embedding must be given together"):
        compile_onnx(path)


@pytest.mark.parametrize("bs", [(1, 1), (2, 7), (3, 13), (1, 0)])
@pytest.mark.parametrize("mask", ["none", "end", "raw"])
@pytest.mark.parametrize("heads", [1, 3])
def test_attention(tmp_path, bs, mask, heads):
    b, s = bs
    hin, h = 5, 3 * heads * 2
    inputs = {"x": f32(b, s, hin), "w": f32(hin, 3 * h) * 0.5, "bias": f32(3 * h)}
    if mask == "end":
        inputs["m"] = rng.integers(1, s + 1 if s else 2, (b,)).astype(np.int32)
    elif mask == "raw":
        m = rng.integers(0, 2, (b, s)).astype(np.int32)
        m[:, :1] = 1
        inputs["m"] = m
    close_contrib(*run_with_ort("Attention", inputs, [("y", np.float32)], opset=17, domain=MS, num_heads=heads))


@pytest.mark.parametrize("s", [1, 6])
def test_attention_unidirectional(tmp_path, s):
    inputs = {"x": f32(2, s, 4), "w": f32(4, 12), "bias": f32(12)}
    close_contrib(*run_with_ort("Attention", inputs, [("y", np.float32)], opset=17, domain=MS, num_heads=2,
              unidirectional=1))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("const", [False, True])
@pytest.mark.parametrize("mask", ["none", "raw"])
def test_attention_weights_packed_or_given(tmp_path, threads, const, mask):
    """Attention's weights as an initializer (packed at link for pgemm) or
    as an input (the product split over the pool), at 1 and 2 kernel
    threads: both ONNX Runtime's. Rows enough that the products and the
    attention tasks split (74 x 64 x 192, 4 heads)."""
    b, s, hin, heads = 2, 37, 64, 4
    feeds = {"x": f32(b, s, hin), "w": f32(hin, 3 * hin) * 0.2, "bias": f32(3 * hin)}
    if mask == "raw":
        m = rng.integers(0, 2, (b, s)).astype(np.int32)
        m[:, :1] = 1
        feeds["m"] = m
    names = list(feeds)
    inits = [onnx.numpy_helper.from_array(feeds.pop("w"), "w")] if const else []
    vi = [helper.make_tensor_value_info(k, TensorProto.INT32 if k == "m" else TensorProto.FLOAT, list(v.shape))
          for k, v in feeds.items()]
    node = helper.make_node("Attention", names, ["y"], domain=MS, num_heads=heads)
    model = helper.make_model(helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", 1, None)], inits),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    got = run_module(compile_onnx(path), feeds, 1, threads=threads)
    close_contrib(got, ort_outputs(model, feeds))


MATMULS = [((5,), (5, 3)), ((4, 5), (5,)), ((1, 1), (1, 1)), ((0, 7), (7, 3)), ((3, 0), (0, 2)),
           ((13, 17), (17, 11)), ((2, 7, 5), (5, 3)), ((3, 1, 4, 5), (2, 5, 6))]


@pytest.mark.parametrize("shapes", MATMULS)
@pytest.mark.parametrize("trans", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_fused_matmul(tmp_path, shapes, trans):
    (sa, sb), (ta, tb) = shapes, trans
    if (ta and len(sa) < 2) or (tb and len(sb) < 2):
        pytest.skip("a transposed operand has rank >= 2")
    a, b = f32(*sa), f32(*sb)
    if ta:
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    if tb:
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2))
    got, want = run_with_ort("FusedMatMul", {"a": a, "b": b}, [("y", np.float32)], domain=MS, alpha=0.37,
                   transA=ta, transB=tb)
    if len(sa) < 2 or len(sb) < 2:  # ORT 1.32 errs with a 1-D operand and the other transposed: NumPy says
        want = [(0.37 * np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b))
                .astype(np.float32)]
    close_contrib(got, want)


@pytest.mark.parametrize("mkn", [(1, 1, 1), (7, 5, 3), (0, 4, 2), (3, 0, 5), (2, 13, 11)])
@pytest.mark.parametrize("act", ["Relu", "Tanh", "Sigmoid", "LeakyRelu"])
@pytest.mark.parametrize("c", [None, "row", "full"])
def test_fused_gemm(tmp_path, mkn, act, c):
    m, k, n = mkn
    inputs = {"a": f32(k, m), "b": f32(n, k)}
    if c:
        inputs["c"] = f32(n) if c == "row" else f32(m, n)
    close_contrib(*run_with_ort("FusedGemm", inputs, [("y", np.float32)], domain=MS, activation=act, transA=1,
              transB=1, alpha=0.8, beta=0.6, **({"activation_alpha": 0.2} if act == "LeakyRelu" else {})))


@pytest.mark.parametrize("shape", SHAPES)
def test_gelu(tmp_path, shape):
    close_contrib(*run_with_ort("Gelu", {"x": f32(*shape) * 3}, [("y", np.float32)], domain=MS))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [None, 1.0, -0.37])
def test_quick_gelu(tmp_path, shape, alpha):
    """QuickGelu: x * sigmoid(alpha * x), alpha 1.702 when omitted (the
    swish kernel)."""
    close_contrib(*run_with_ort("QuickGelu", {"x": f32(*shape) * 4}, [("y", np.float32)], domain=MS,
              **({} if alpha is None else {"alpha": alpha})))


def i8(*shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


# (1, 67, 29): one product whose rows the thread pool splits (each part
# converts its own rows to f32)
PRODUCT_SHAPES = [((1, 1), (1, 1)), ((7, 13), (13, 5)), ((2, 3, 17), (17, 11)), ((0, 4), (4, 3)),
                  ((1, 67, 29), (29, 37))]


@pytest.mark.parametrize("shapes", PRODUCT_SHAPES)
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_dynamic_quantize_matmul(tmp_path, shapes, per_column, bias):
    sa, sb = shapes
    n = sb[-1]
    inputs = {"a": f32(*sa), "b": i8(*sb), "bs": rng.uniform(0.01, 0.1, (n,) if per_column else ()).astype(np.float32),
              "bz": np.zeros((n,) if per_column else (), np.int8), "bias": f32(n) if bias else ""}
    close_contrib(*run_with_ort("DynamicQuantizeMatMul", inputs, [("y", np.float32)], domain=MS))


@pytest.mark.parametrize("shapes", PRODUCT_SHAPES)
def test_matmul_integer_to_float(tmp_path, shapes):
    sa, sb = shapes
    n = sb[-1]
    inputs = {"a": rng.integers(0, 256, sa).astype(np.uint8), "b": i8(*sb), "as": np.array(0.02, np.float32),
              "bs": np.array(0.05, np.float32), "az": np.array(7, np.uint8), "bz": np.array(-3, np.int8),
              "bias": f32(n)}
    close_contrib(*run_with_ort("MatMulIntegerToFloat", inputs, [("y", np.float32)], domain=MS))


def test_contrib_op_dvm_lacks_is_refused_by_name(tmp_path):
    """A com.microsoft op without a row in the op table is refused at
    compile time naming the node and the op."""
    node = helper.make_node("Rfft", ["x"], ["y"], name="r1", domain=MS)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]),
              tmp_path / "m.onnx")
    r = dvm("compile", tmp_path / "m.onnx", "-o", tmp_path / "m.dvmb")
    assert r.returncode == 2 and 'node "r1" (Rfft' in r.stderr and "not supported" in r.stderr, r.stderr


def codes(dt, *shape):
    lo, hi = (0, 256) if dt == np.uint8 else (-128, 128)
    return rng.integers(lo, hi, shape).astype(dt)


@pytest.mark.parametrize("bs", [(1, 1), (2, 7), (3, 13), (0, 3)])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qembed_layer_normalization(tmp_path, bs, dt):
    b, s = bs
    h, vocab = 5, 11
    inputs = {"ids": rng.integers(0, vocab, (b, s)).astype(np.int32),
              "seg": rng.integers(0, 2, (b, s)).astype(np.int32), "word": codes(dt, vocab, h),
              "pos": codes(dt, 16, h), "segt": codes(dt, 2, h), "g": codes(dt, h), "beta": codes(dt, h),
              "mask": rng.integers(0, 2, (b, s)).astype(np.int32)}
    for k in ["word", "pos", "segt", "g", "beta"]:
        inputs[k + "_s"] = np.array(rng.uniform(0.01, 0.1), np.float32)
    for k in ["word", "pos", "segt", "g", "beta"]:
        inputs[k + "_z"] = codes(dt)
    close_contrib(*run_with_ort("QEmbedLayerNormalization", inputs, [("y", np.float32), ("mi", np.int32)],
              opset=17, domain=MS, epsilon=1e-5))


@pytest.mark.parametrize("bs", [(1, 1), (2, 7), (3, 13), (1, 0)])
@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("mask", ["end", "raw"])
def test_qattention(tmp_path, bs, types, mask):
    qattention_case(tmp_path, bs, types, mask, 7, False)


# the weights' scale and zero point per column; 67 rows, which the pool
# splits; Hin 301: over 258, where f32 sums of the codes could round
@pytest.mark.parametrize("bs,hin", [((1, 67), 5), ((2, 3), 301)])
@pytest.mark.parametrize("types", [(np.uint8, np.int8), (np.uint8, np.uint8)])
def test_qattention_per_column_and_long(tmp_path, bs, hin, types):
    qattention_case(tmp_path, bs, types, "raw", hin, True)


def qattention_case(tmp_path, bs, types, mask, hin, per_column):
    b, s = bs
    heads, h = 2, 12
    tx, tw = types
    m = (rng.integers(1, s + 1 if s else 2, (b,)) if mask == "end" else rng.integers(0, 2, (b, s))).astype(np.int32)
    if mask == "raw":
        m[:, :1] = 1
    ncol = (3 * h,) if per_column else ()
    inputs = {"x": codes(tx, b, s, hin), "w": codes(tw, hin, 3 * h), "bias": f32(3 * h),
              "xs": np.array(0.02, np.float32), "ws": rng.uniform(0.005, 0.02, ncol).astype(np.float32), "m": m,
              "xz": codes(tx), "wz": codes(tw, *ncol)}
    close_contrib(*run_with_ort("QAttention", inputs, [("y", np.float32)], opset=17, domain=MS, num_heads=heads))


def test_attention_past_state_is_refused_by_name(tmp_path):
    x, w, bias = f32(1, 3, 4), f32(4, 12), f32(12)
    past = f32(2, 1, 2, 0, 2)
    node = helper.make_node("Attention", ["x", "w", "b", "", "past"], ["y", "present"], name="a1", domain=MS,
                            num_heads=2)
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
           for k, v in {"x": x, "w": w, "b": bias, "past": past}.items()]
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]),
              tmp_path / "m.onnx")
    r = dvm("compile", tmp_path / "m.onnx", "-o", tmp_path / "m.dvmb")
    assert r.returncode == 2 and 'node "a1" (Attention' in r.stderr and "not supported" in r.stderr, r.stderr


def mha_model(path, inputs, outputs, attrs):
    names = [k if not isinstance(v, str) else "" for k, v in inputs.items()]
    while names and not names[-1]:
        names.pop()
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
          for k, v in inputs.items() if not isinstance(v, str)]
    node = helper.make_node("MultiHeadAttention", names, list(outputs), domain=MS, **attrs)
    vo = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o]
    g = helper.make_graph([node], "g", vi, vo)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]), path)


def run_mha(tmp_path, inputs, outputs=("y",), **attrs):
    """MultiHeadAttention in dvm and ONNX Runtime; inputs and outputs in
    node order, "" for an omitted one (left out of the graph, its name
    empty). ONNX Runtime always runs with all four outputs: given a past
    but no present outputs, its CPU kernel leaves the past out of T and
    gives NaN."""
    feed = {k: v for k, v in inputs.items() if not isinstance(v, str)}
    outs = [o for o in outputs if o]
    full = ("y", "pk_out", "pv_out", "qk")
    mha_model(tmp_path / "ort.onnx", inputs, full, attrs)
    got = ort_outputs(tmp_path / "ort.onnx", feed)
    want = [got[full.index(o)] for o in outs]
    mha_model(tmp_path / "m.onnx", inputs, outputs, attrs)
    return run_module(compile_onnx(tmp_path / "m.onnx"), feed, len(outs)), want


@pytest.mark.parametrize("bsl", [(1, 1, 1), (2, 3, 5), (3, 7, 2), (0, 3, 4), (2, 1, 7)])
@pytest.mark.parametrize("heads_dv", [(1, 4), (2, 6), (3, 9)])
@pytest.mark.parametrize("extras", ["", "bias", "mask2", "mask1", "abias", "abias_b1n", "all"])
def test_multihead_attention(tmp_path, bsl, heads_dv, extras):
    """MultiHeadAttention with 3-D query, key and value (cross attention:
    L != S), the optional bias, key_padding_mask ([B] lengths or [B, L]
    0/1) and attention_bias ([B, N, S, L] or broadcast [1, 1, S, L])."""
    b, s, l = bsl
    n, dv = heads_dv
    d = 5 * n
    inputs = {"q": f32(b, s, d), "k": f32(b, l, d), "v": f32(b, l, dv), "bias": "", "mask": "", "ab": ""}
    if extras in ("bias", "all"):
        inputs["bias"] = f32(2 * d + dv)
    if extras in ("mask2", "all"):
        m = (rng.random((b, l)) < 0.7).astype(np.int32)
        m[:, 0] = 1
        inputs["mask"] = m
    if extras == "mask1":
        inputs["mask"] = rng.integers(1, l + 1, b).astype(np.int32)
    if extras in ("abias", "all"):
        inputs["ab"] = f32(b, n, s, l)
    if extras == "abias_b1n":
        inputs["ab"] = f32(1, 1, s, l)
    close_contrib(*run_mha(tmp_path, inputs, num_heads=n))


@pytest.mark.parametrize("s", [1, 4, 7])
@pytest.mark.parametrize("mask", [False, True])
def test_multihead_attention_unidirectional_and_scale(tmp_path, s, mask):
    inputs = {"q": f32(2, s, 6), "k": f32(2, s, 6), "v": f32(2, s, 6), "bias": f32(18),
              "mask": (rng.random((2, s)) < 0.6).astype(np.int32) if mask else ""}
    close_contrib(*run_mha(tmp_path, inputs, num_heads=2, unidirectional=1, scale=0.3))


def close_masked(got, want):
    """close, with the entries ONNX Runtime's unidirectional mask sets to
    -FLT_MAX (qk) compared as a pattern."""
    for g, w in zip(got, want, strict=True):
        low = w <= -1e38
        np.testing.assert_array_equal(g <= -1e38, low)
        close_contrib([np.where(low, 0, g)], [np.where(low, 0, w)])


# (batch, new length S = L, past length P)
MHA_PAST = [(1, 1, 1, 3), (2, 3, 3, 5), (3, 1, 1, 7), (2, 4, 4, 1), (1, 5, 5, 2)]


@pytest.mark.parametrize("bslp", MHA_PAST)
@pytest.mark.parametrize("extras", ["", "bias", "mask1", "mask2", "mask3", "abias", "uni", "all"])
@pytest.mark.parametrize("outs", [("y", "pk_out", "pv_out"), ("y", "pk_out", "pv_out", "qk"), ("y", "", "", "qk")])
def test_multihead_attention_past(tmp_path, bslp, extras, outs):
    """past_key/past_value before the new keys and values (T = P + L),
    present_key/present_value and qk (the scores with mask and bias),
    key_padding_mask [B] (key lengths in T), [B, T] or [B, S, T],
    attention_bias [B, N, S, T], unidirectional (query i sees keys up to
    P + i) against ONNX Runtime."""
    b, s, l, p = bslp
    n, dh, dv = 2, 3, 3  # ONNX Runtime wants past_value's head size to be query's
    t = p + l
    inputs = {"q": f32(b, s, n * dh), "k": f32(b, l, n * dh), "v": f32(b, l, n * dv), "bias": "", "mask": "",
              "ab": "", "pk": f32(b, n, p, dh), "pv": f32(b, n, p, dv)}
    if extras in ("bias", "all"):
        inputs["bias"] = f32(2 * n * dh + n * dv)
    if extras == "mask1":
        inputs["mask"] = rng.integers(1, t + 1, b).astype(np.int32)
    if extras in ("mask2", "all"):
        m = (rng.random((b, t)) < 0.7).astype(np.int32)
        m[:, 0] = 1
        inputs["mask"] = m
    if extras == "mask3":
        m = (rng.random((b, s, t)) < 0.7).astype(np.int32)
        m[:, :, 0] = 1
        inputs["mask"] = m
    if extras in ("abias", "all"):
        inputs["ab"] = f32(b, n, s, t)
    attrs = dict(num_heads=n, unidirectional=1) if extras in ("uni", "all") else dict(num_heads=n)
    close_masked(*run_mha(tmp_path, inputs, outs, **attrs))


@pytest.mark.parametrize("kv4", [False, True])
def test_multihead_attention_shapes_at_run_time(tmp_path, kv4):
    """Key and value (4-D) or the past (3-D key and value) reshaped by a
    shape given at run time: inference cannot tell T, and the outputs'
    shapes come from the shape function."""
    b, s, l, p, n, h = 2, 3, 3, 4, 2, 3
    vi, ms = helper.make_tensor_value_info, helper.make_node
    feed = {"q": f32(b, s, n * h), "shape": np.array([b, n, l if kv4 else p, h], np.int64)}
    if kv4:
        feed.update(kf=f32(b * n * l * h), vf=f32(b * n * l * h))
        nodes = [ms("Reshape", ["kf", "shape"], ["k"]), ms("Reshape", ["vf", "shape"], ["v"])]
        names = ["q", "k", "v"]
    else:
        feed.update(k=f32(b, l, n * h), v=f32(b, l, n * h), kf=f32(b * n * p * h), vf=f32(b * n * p * h))
        nodes = [ms("Reshape", ["kf", "shape"], ["pk"]), ms("Reshape", ["vf", "shape"], ["pv"])]
        names = ["q", "k", "v", "", "", "", "pk", "pv"]
    outs = ["y", "pk_out", "pv_out", "qk"]
    nodes.append(ms("MultiHeadAttention", names, outs, domain=MS, num_heads=n))
    g = helper.make_graph(nodes, "g", [vi(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                                       for k, v in feed.items()], [vi(o, TensorProto.FLOAT, None) for o in outs])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]), path)
    want = ort_outputs(path, feed)
    close_masked(run_module(compile_onnx(path), feed, 4), want)


@pytest.mark.parametrize("bsl", [(1, 1, 1), (2, 3, 5), (3, 4, 2)])
@pytest.mark.parametrize("extras", ["", "mask2", "abias"])
@pytest.mark.parametrize("outs", [("y",), ("y", "pk_out", "pv_out", "qk")])
def test_multihead_attention_4d_key_value(tmp_path, bsl, extras, outs):
    """key and value 4-D [B, N, L, head size] (a cross-attention cache
    passed as key and value): no bias, no past; present_key and
    present_value are them."""
    b, s, l = bsl
    n, dh, dv = 3, 2, 2  # ONNX Runtime wants key and value of one shape
    inputs = {"q": f32(b, s, n * dh), "k": f32(b, n, l, dh), "v": f32(b, n, l, dv), "bias": "",
              "mask": (rng.random((b, l)) < 0.7).astype(np.int32) if extras == "mask2" else "",
              "ab": f32(1, n, s, l) if extras == "abias" else ""}
    if extras == "mask2":
        inputs["mask"][:, 0] = 1
    close_masked(*run_mha(tmp_path, inputs, outs, num_heads=n))


@pytest.mark.parametrize("case", ["packed_kv", "packed_qkv", "past_sequence_length"])
def test_multihead_attention_unsupported_is_refused_by_name(tmp_path, case):
    """What dvm does not do is refused at compile time naming the node:
    packed QKV and KV (ONNX Runtime's CPU kernel does not implement them
    either) and past_sequence_length (the shared past/present buffer)."""
    vi = helper.make_tensor_value_info
    ins = [vi("q", TensorProto.FLOAT, [1, 3, 2, 3, 2] if case == "packed_qkv" else [1, 2, 4])]
    names, outs = ["q"], [vi("y", TensorProto.FLOAT, None)]
    if case == "packed_kv":
        ins.append(vi("kv", TensorProto.FLOAT, [1, 3, 2, 2, 2]))
        names += ["kv"]
    if case == "past_sequence_length":
        ins += [vi("k", TensorProto.FLOAT, [1, 3, 4]), vi("v", TensorProto.FLOAT, [1, 3, 4]),
                vi("pk", TensorProto.FLOAT, [1, 2, 1, 2]), vi("pv", TensorProto.FLOAT, [1, 2, 1, 2]),
                vi("plen", TensorProto.INT32, [1])]
        names += ["k", "v", "", "", "", "pk", "pv", "plen"]
    node = helper.make_node("MultiHeadAttention", names, ["y"], name="mha1", domain=MS, num_heads=2)
    g = helper.make_graph([node], "g", ins, outs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]),
              tmp_path / "m.onnx")
    r = dvm("compile", tmp_path / "m.onnx", "-o", tmp_path / "m.dvmb")
    assert r.returncode == 2 and 'node "mha1" (MultiHeadAttention' in r.stderr, r.stderr


def qweights(dirs, k, n, dt, per_column):
    """DynamicQuantizeLSTM's weight [dirs, k, n] with its scale and zero
    point as ONNX Runtime takes them: i8 zero points 0, u8 ones one value
    per direction (per column: one value for the whole tensor)."""
    shape = (dirs, n) if per_column else (dirs,)
    scale = rng.uniform(0.01, 0.06, shape).astype(np.float32)
    if dt == "i8":
        return i8(dirs, k, n), scale, np.zeros(shape, np.int8)
    zp = rng.integers(100, 156, (1, 1) if per_column else (dirs,)).astype(np.uint8)
    return rng.integers(0, 256, (dirs, k, n)).astype(np.uint8), scale, np.broadcast_to(zp, shape).copy()


def run_qlstm(tmp_path, s, b, i, h, direction="forward", dt="i8", per_column=False, extras=(), outs=(1, 1, 1)):
    dirs = 2 if direction == "bidirectional" else 1
    w, ws, wz = qweights(dirs, i, 4 * h, dt, per_column)
    r, rs, rz = qweights(dirs, h, 4 * h, dt, per_column)
    inputs = {"x": f32(s, b, i), "w": w, "r": r, "b": f32(dirs, 8 * h) * 0.5 if "bias" in extras else "",
              # without Y, ONNX Runtime counts a length-0 row's state, which it never
              # writes, in the range of the next steps' states: uninitialized memory
              "lens": rng.integers(0 if outs[0] else 1, s + 1, b).astype(np.int32) if "lens" in extras else "",
              "h0": f32(dirs, b, h) if "states" in extras else "", "c0": f32(dirs, b, h) if "states" in extras else "",
              "p": f32(dirs, 3 * h) if "peephole" in extras else "", "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    attrs = dict(hidden_size=h, direction=direction)
    if "input_forget" in extras:
        attrs["input_forget"] = 1
    outputs = [(name if want else "", np.float32) for name, want in zip(["y", "yh", "yc"], outs)]
    # ONNX Runtime quantizes each step's states over the rows one thread
    # runs; with one thread, all the batch's rows, as dvm
    return run_with_ort("DynamicQuantizeLSTM", inputs, outputs, domain=MS, ort_threads=1, **attrs)


# (seq, batch, input, hidden): 1s, primes, a batch of 1 and more. Not 0:
# ONNX Runtime 1.32 gives uninitialized Y_h for seq 0 and dies (terminate
# called) for batch 0; dvm gives zero states and empty outputs there.
QLSTM_SHAPES = [(1, 1, 1, 1), (1, 3, 5, 7), (7, 3, 4, 5), (13, 1, 3, 2), (5, 2, 17, 11), (2, 5, 6, 3)]


@pytest.mark.parametrize("sbih", QLSTM_SHAPES)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("dt", ["i8", "u8"])
@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quantize_lstm(tmp_path, sbih, direction, dt, per_column):
    """DynamicQuantizeLSTM against ONNX Runtime: X and each step's states
    quantized to u8 as its CPU kernel quantizes them, exact i32 sums: the
    same codes, so the outputs agree to f32 rounding."""
    close_contrib(*run_qlstm(tmp_path, *sbih, direction=direction, dt=dt, per_column=per_column, extras=("bias",)))


@pytest.mark.parametrize("sbih", [(1, 1, 1, 1), (7, 3, 4, 5), (5, 2, 17, 11), (3, 1, 67, 33), (2, 2, 130, 16)])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("dt", ["i8", "u8"])
@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quantize_lstm_constant_weights(tmp_path, sbih, direction, dt, per_column):
    """W and R as initializers (as quantize_dynamic writes them): their codes
    are packed at link for the quantized tiles, whose exact sums must give
    ONNX Runtime's outputs as the plain loops do (k of 1, primes, past 64
    and 128; n past a 16-column group)."""
    s, b, i, h = sbih
    dirs = 2 if direction == "bidirectional" else 1
    w, ws, wz = qweights(dirs, i, 4 * h, dt, per_column)
    r, rs, rz = qweights(dirs, h, 4 * h, dt, per_column)
    consts = {"w": w, "r": r, "b": f32(dirs, 8 * h) * 0.5, "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    names = ["x", "w", "r", "b", "", "h0", "c0", "", "ws", "wz", "rs", "rz"]
    feeds = {"x": f32(s, b, i), "h0": f32(dirs, b, h), "c0": f32(dirs, b, h)}
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
    vo = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in ("y", "yh", "yc")]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["y", "yh", "yc"], domain=MS, hidden_size=h,
                            direction=direction)
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    model = helper.make_model(helper.make_graph([node], "g", vi, vo, initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # ONNX Runtime quantizes each step's states over one thread's rows
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    close_contrib(run_model(model, feeds, 3), want)


@pytest.mark.parametrize("extras", [("states",), ("lens",), ("lens", "states", "bias"), ("peephole", "bias"),
                                    ("input_forget",)])
@pytest.mark.parametrize("outs", [(1, 1, 1), (0, 1, 1)])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_dynamic_quantize_lstm_inputs(tmp_path, extras, outs, direction):
    """The optional inputs; sequence_lens with and without Y (ONNX Runtime
    counts a finished row's state in the next step's range as 0 when Y is
    wanted, as its last state when not)."""
    close_contrib(*run_qlstm(tmp_path, 6, 4, 5, 3, direction=direction, dt="u8", extras=extras, outs=outs))


@pytest.mark.parametrize("sb", [(0, 2), (3, 0)])
def test_dynamic_quantize_lstm_empty(tmp_path, sb):
    """seq 0: empty Y, zero states; batch 0: empty outputs (dvm alone:
    see QLSTM_SHAPES)."""
    s, b = sb
    w, ws, wz = qweights(2, 3, 8, "u8", True)
    r, rs, rz = qweights(2, 2, 8, "u8", True)
    feeds = {"x": f32(s, b, 3), "w": w, "r": r, "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
          for k, v in feeds.items()]
    node = helper.make_node("DynamicQuantizeLSTM", ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"],
                            ["y", "yh", "yc"], domain=MS, hidden_size=2, direction="bidirectional")
    g = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                            for o in ("y", "yh", "yc")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]),
              tmp_path / "m.onnx")
    y, yh, yc = run_module(compile_onnx(tmp_path / "m.onnx"), feeds, 3)
    assert y.shape == (s, 2, b, 2) and yh.shape == yc.shape == (2, b, 2)
    assert not yh.any() and not yc.any()


def test_dynamic_quantize_lstm_bad_zero_point_is_refused(tmp_path):
    """Per-column i8 zero points other than 0 are refused, as ONNX Runtime
    refuses them (it uses one zero point per direction)."""
    w, ws, wz = qweights(1, 3, 8, "i8", True)
    wz[0, 3] = 1
    r, rs, rz = qweights(1, 2, 8, "i8", True)
    vi = helper.make_tensor_value_info
    names = ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"]
    node = helper.make_node("DynamicQuantizeLSTM", names, ["y"], name="dql", domain=MS, hidden_size=2)
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in zip(names[1:3] + names[8:], [w, r, ws, wz, rs, rz])]
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [1, 1, 3])], [vi("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]),
              tmp_path / "m.onnx")
    r, _ = try_run(compile_onnx(tmp_path / "m.onnx"), {"x": f32(1, 1, 3)})
    assert r.returncode != 0 and "W_zero_point must be 0" in r.stderr, r.stderr
