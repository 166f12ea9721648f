"""The ops of the decoder LLMs that ONNX Runtime GenAI's model builder
writes: SimplifiedLayerNormalization (default domain),
SkipSimplifiedLayerNormalization and RotaryEmbedding (com.microsoft),
each a one-node model, dvm against ONNX Runtime's CPU kernels at awkward
shapes: max error <= 1e-5 * max |ORT| (f32 sums in another order)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from dvmop import DvmError, run_model

rng = np.random.default_rng(29)
MS = "com.microsoft"


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def model(op, feeds, names, outs, domain="", **attrs):
    """A one-node model; names: the node's inputs in order ("" omitted),
    feeds: their arrays; outs: its outputs ("" omitted)."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), list(feeds[n].shape))
          for n in names if n]
    node = helper.make_node(op, list(names), list(outs), domain=domain, **attrs)
    vo = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o]
    return helper.make_model(helper.make_graph([node], "g", vi, vo),
                             opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def both(m, feeds):
    """(dvm's outputs, ONNX Runtime's) of model m."""
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    names = [i.name for i in m.graph.input]
    return run_model(m, {n: feeds[n] for n in names}, len(want)), want


def close(got, want, rows=None):
    """rows: per batch entry, how many rows of output 0 to compare (the
    rest is padding ONNX Runtime leaves unspecified)."""
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape)
        if i == 0 and rows is not None:
            g = np.concatenate([g[b, :r] for b, r in enumerate(rows)])
            w = np.concatenate([w[b, :r] for b, r in enumerate(rows)])
        err = np.abs(g - w).max(initial=0)
        assert err <= 1e-5 * max(np.abs(w).max(initial=0), 1), (i, err)


def refused(m, feeds, words):
    with pytest.raises(DvmError) as e:
        run_model(m, feeds, 1)
    for w in words:
        assert w in e.value.message, e.value.message


# ---- SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization ----

@pytest.mark.parametrize("shape,axis", [((1, 1), -1), ((3, 7), -1), ((2, 5, 13), -1), ((2, 0, 3), -1),
                                        ((4, 17), 1), ((2, 3, 5), 1), ((2, 3, 5), -2), ((1, 3, 129), -1)])
@pytest.mark.parametrize("inv", [False, True])
def test_simplified_layer_normalization(shape, axis, inv):
    x = f32(*shape) * 3
    s = f32(*shape[axis:])
    attrs = {} if axis == -1 else {"axis": axis}
    if inv:
        attrs["epsilon"] = 1e-3
    m = model("SimplifiedLayerNormalization", {"x": x, "s": s}, ["x", "s"], ["y", "inv"] if inv else ["y"], **attrs)
    close(*both(m, {"x": x, "s": s}))


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 7), (3, 1, 64), (1, 0, 5), (5, 33), (1, 257)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("with_sum", [False, True])
def test_skip_simplified_layer_normalization(shape, bias, with_sum):
    h = shape[-1]
    feeds = {"x": f32(*shape), "skip": f32(*shape), "g": f32(h)}
    if bias:
        feeds["bias"] = f32(h)
    outs = ["y", "", "", "sum"] if with_sum else ["y"]
    m = model("SkipSimplifiedLayerNormalization", feeds, list(feeds), outs, domain=MS, epsilon=1e-6)
    close(*both(m, feeds))


def test_skip_simplified_layer_normalization_statistics_are_refused():
    feeds = {"x": f32(2, 4), "skip": f32(2, 4), "g": f32(4)}
    m = model("SkipSimplifiedLayerNormalization", feeds, list(feeds), ["y", "", "inv"], domain=MS)
    refused(m, feeds, ["SkipSimplifiedLayerNormalization", "output 2"])


# ---- com.microsoft RotaryEmbedding ----

ROTARY = [  # (x shape, num_heads, rotary_embedding_dim, head size)
    ((2, 3, 16), 0, 0, 8), ((1, 1, 64), 0, 0, 64), ((3, 7, 24), 3, 0, 8), ((2, 5, 40), 2, 12, 20),
    ((2, 2, 5, 8), 0, 0, 8), ((1, 3, 1, 16), 3, 8, 16), ((0, 4, 16), 0, 0, 8)]


@pytest.mark.parametrize("shape,heads,rd,d", ROTARY)
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("pos", ["each", "start", "scalar"])
def test_contrib_rotary_embedding(shape, heads, rd, d, interleaved, pos):
    b, s = shape[0], shape[2] if len(shape) == 4 else shape[1]
    half = (rd or d) // 2
    rows = 19
    feeds = {"x": f32(*shape), "cos": f32(rows, half), "sin": f32(rows, half)}
    feeds["pos"] = (rng.integers(0, rows, (b, s)) if pos == "each" else
                    np.array([rows - s] if pos == "start" else rows - s - 1)).astype(np.int64)
    attrs = {"interleaved": interleaved}
    if heads:
        attrs["num_heads"] = heads
    if rd:
        attrs["rotary_embedding_dim"] = rd
    m = model("RotaryEmbedding", feeds, ["x", "pos", "cos", "sin"], ["y"], domain=MS, scale=2.0, **attrs)
    close(*both(m, feeds))


def test_contrib_rotary_embedding_bad_positions():
    feeds = {"x": f32(1, 3, 16), "pos": np.array([9], np.int64), "cos": f32(10, 4), "sin": f32(10, 4)}
    m = model("RotaryEmbedding", feeds, ["x", "pos", "cos", "sin"], ["y"], domain=MS)
    refused(m, feeds, ["contrib_rotary_embedding", "position 10", "10 rows"])
    feeds["cos"] = f32(10, 3)
    m = model("RotaryEmbedding", feeds, ["x", "pos", "cos", "sin"], ["y"], domain=MS)
    refused(m, feeds, ["contrib_rotary_embedding", "cos_cache"])

