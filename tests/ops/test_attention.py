"""The default-domain ONNX attention ops (ops/cpu/attention.c: Attention
opsets 23 to 25, RotaryEmbedding 23) as single-node models, dvm against
onnx's reference implementation (the spec's own numbers) at awkward shapes:
sequence 1, primes, GQA and MQA head ratios, a 0-length past, an empty
batch, more queries than a task's block (32); masks of rank 1 to 4 broadcast and shorter than the keys; every
qk_matmul_output_mode; the input dims fixed (inference's shapes) or named
(the shape function's at run time). f32 within 1e-5 * max |reference|, f16
within 2e-3 (the reference rounds to f16 at each step)."""
import numpy as np
import pytest
from dvmtest.arrays import normal_f32
from dvmtest.cli import dvm
from dvmtest.onnxmodel import save_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from dvmop import run_model

rng = np.random.default_rng(23)
f32 = normal_f32(rng)
ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.bool_: TensorProto.BOOL,
             np.int64: TensorProto.INT64}


def run_ref(op, inputs, outputs, opset=23, named=False, names=None, **attrs):
    """inputs: name -> array, in the node's order ("" leaves an optional one
    out; or names lists the node's inputs); outputs: names, "" leaving one
    out. named: the graph's input dims are symbols. Returns (dvm's outputs,
    the reference's), the given ones."""
    names = names or list(inputs)
    given = {k: np.asarray(v) for k, v in inputs.items() if k}
    vi = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype.type],
                                        [f"{k}{i}" for i in range(v.ndim)] if named else list(v.shape))
          for k, v in given.items()]
    vo = [helper.make_tensor_value_info(k, TensorProto.UNDEFINED, None) for k in outputs if k]
    node = helper.make_node(op, names, outputs, name="n1", **attrs)
    model = helper.make_model(helper.make_graph([node], "g", vi, vo), opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(model).run(None, given)
    return run_model(model, given, len([k for k in outputs if k])), want


def close_ref(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        tol = 1e-5 if g.dtype == np.float32 else 2e-3
        g, w = g.astype(np.float64), w.astype(np.float64)
        assert np.array_equal(np.isnan(g), np.isnan(w))
        g, w = np.nan_to_num(g), np.nan_to_num(w)
        assert np.abs(g - w).max(initial=0) <= tol * max(np.abs(w).max(initial=0), 1)


# (batch, q heads, kv heads, q seq, kv seq, past, head size, v head size)
DIMS = [(1, 1, 1, 1, 1, 0, 1, 1), (2, 6, 3, 7, 5, 0, 4, 3), (1, 5, 1, 3, 11, 0, 8, 8), (2, 4, 2, 1, 13, 0, 5, 7),
        (0, 2, 2, 3, 3, 0, 4, 4), (3, 2, 2, 5, 1, 0, 3, 2), (1, 2, 1, 67, 41, 0, 8, 8)]


def qkv(dims, three_d, dt=np.float32):
    b, hq, hkv, sq, skv, p, d, dv = dims
    q, k, v = f32(b, hq, sq, d), f32(b, hkv, skv, d), f32(b, hkv, skv, dv)
    if three_d:
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(b, x.shape[2], x.shape[1] * x.shape[3]) for x in (q, k, v))
    return q.astype(dt), k.astype(dt), v.astype(dt)


def heads(dims, three_d):
    return {"q_num_heads": dims[1], "kv_num_heads": dims[2]} if three_d else {}


@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention(tmp_path, dims, three_d, causal):
    if three_d and not dims[0]:
        pytest.skip("the reference reshapes an empty batch with -1")
    q, k, v = qkv(dims, three_d)
    close_ref(*run_ref("Attention", {"Q": q, "K": k, "V": v}, ["Y"], is_causal=causal,
                    **heads(dims, three_d)))


@pytest.mark.parametrize("dims", [DIMS[1], DIMS[3]])
@pytest.mark.parametrize("three_d", [False, True])
def test_attention_named_dims(tmp_path, dims, three_d):
    """The shapes from the shape function at run time, with every output."""
    q, k, v = qkv(dims, three_d)
    close_ref(*run_ref("Attention", {"Q": q, "K": k, "V": v}, ["Y", "pk", "pv", "qk"], named=True,
                    is_causal=1, **heads(dims, three_d)))


@pytest.mark.parametrize("past", [0, 1, 4])
@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("named", [False, True])
def test_attention_past(tmp_path, past, three_d, named):
    b, hq, hkv, sq, skv, d, dv = 2, 6, 2, 3, 3, 4, 5
    dims = (b, hq, hkv, sq, skv, past, d, dv)
    q, k, v = qkv(dims, three_d)
    inputs = {"Q": q, "K": k, "V": v, "": None, "past_key": f32(b, hkv, past, d), "past_value": f32(b, hkv, past, dv)}
    close_ref(*run_ref("Attention", inputs, ["Y", "pk", "pv"], named=named, is_causal=1,
                    **heads(dims, three_d)))


MASKS = [("bool", (5,)), ("bool", (3, 5)), ("float", (3, 5)), ("float", (6, 3, 5)), ("float", (1, 3, 5)),
         ("bool", (2, 1, 3, 5)), ("float", (2, 6, 1, 5)), ("float", (3, 4)), ("bool", (1, 2))]


@pytest.mark.parametrize("kind, shape", MASKS)
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_mask(tmp_path, kind, shape, causal):
    """Masks broadcast to [B, Hq, Sq, keys], the last ones shorter than the
    keys (the rest masked), with a past of 2 keys. Not causal with a mask
    broadcast over the queries: the reference then takes Sq from the mask
    (1) and applies query 0's causal row to every query."""
    if causal and (len(shape) < 2 or shape[-2] == 1):
        pytest.skip("the reference's causal rows follow the mask's query dim")
    dims = (2, 6, 3, 3, 3, 2, 4, 4)
    q, k, v = qkv(dims, False)
    m = rng.random(shape) < 0.7 if kind == "bool" else (f32(*shape) * 2).astype(np.float32)
    inputs = {"Q": q, "K": k, "V": v, "attn_mask": m, "past_key": f32(2, 3, 2, 4), "past_value": f32(2, 3, 2, 4)}
    close_ref(*run_ref("Attention", inputs, ["Y", "", "", "qk"], is_causal=causal, qk_matmul_output_mode=2))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("softcap", [0.0, 2.5])
def test_attention_modes(tmp_path, mode, softcap):
    q, k, v = qkv((1, 3, 3, 5, 7, 0, 4, 4), True)
    m = rng.random((5, 7)) < 0.6
    m[2] = False  # a fully masked row: zeros
    close_ref(*run_ref("Attention", {"Q": q, "K": k, "V": v, "attn_mask": m}, ["Y", "", "", "qk"],
                    q_num_heads=3, kv_num_heads=3, qk_matmul_output_mode=mode, softcap=softcap, scale=0.3))


@pytest.mark.parametrize("window", [(2, 0), (0, 1), (3, -1), (-1, 2)])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_window(tmp_path, window, causal):
    q, k, v = qkv((2, 4, 2, 4, 7, 0, 3, 3), False)
    close_ref(*run_ref("Attention", {"Q": q, "K": k, "V": v}, ["Y"], opset=25, is_causal=causal,
                    left_window_size=window[0], right_window_size=window[1]))


@pytest.mark.parametrize("nonpad", [[7, 3], [0, 5], [2, 1]])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_nonpad(tmp_path, nonpad, causal):
    """The external cache: keys past nonpad_kv_seqlen masked; causal from
    nonpad - Sq (negative: leading rows fully masked, zeros)."""
    q, k, v = qkv((2, 2, 1, 3, 7, 0, 4, 4), False)
    given = {"Q": q, "K": k, "V": v, "nonpad_kv_seqlen": np.array(nonpad, np.int64)}
    close_ref(*run_ref("Attention", given, ["Y"], opset=24, names=["Q", "K", "V", "", "", "", "nonpad_kv_seqlen"],
                    is_causal=causal))


def test_attention_f16(tmp_path):
    q, k, v = qkv((2, 4, 2, 5, 6, 0, 8, 8), False, np.float16)
    close_ref(*run_ref("Attention", {"Q": q, "K": k, "V": v}, ["Y", "pk", "pv"], is_causal=1))


def compile_refused(tmp_path, model):
    r = dvm("compile", save_model(model, tmp_path / "m.onnx"), "-o", tmp_path / "m.dvmb")
    assert r.returncode == 2 and 'node "n1" (Attention' in r.stderr and "not supported" in r.stderr, r.stderr
    return r.stderr


def test_attention_bf16_is_refused_by_name(tmp_path):
    vi = [helper.make_tensor_value_info(k, TensorProto.BFLOAT16, [1, 2, 3, 4]) for k in "QKV"]
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], name="n1")
    g = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("Y", TensorProto.BFLOAT16, None)])
    assert "bf16" in compile_refused(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))


# (batch, heads, seq, head size, rotary dim)
ROPE = [(1, 1, 1, 2, 0), (2, 3, 7, 8, 0), (3, 2, 5, 10, 6), (0, 2, 3, 4, 0), (2, 5, 1, 6, 2)]


@pytest.mark.parametrize("dims", ROPE)
@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("positions", [False, True])
def test_rotary_embedding(tmp_path, dims, three_d, interleaved, positions):
    b, h, s, d, rd = dims
    half = (rd or d) // 2
    x = f32(b, h, s, d)
    if three_d:
        x = x.transpose(0, 2, 1, 3).reshape(b, s, h * d)
    shape = (s + 4, half) if positions else (b, s, half)
    inputs = {"x": x, "cos": f32(*shape), "sin": f32(*shape)}
    if positions:
        inputs["pos"] = rng.integers(0, s + 4, (b, s)).astype(np.int64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rd}
    if three_d:
        attrs["num_heads"] = h
    close_ref(*run_ref("RotaryEmbedding", inputs, ["y"], **attrs))


def test_rotary_embedding_f16(tmp_path):
    x = f32(2, 3, 4, 8).astype(np.float16)
    inputs = {"x": x, "cos": f32(9, 4).astype(np.float16), "sin": f32(9, 4).astype(np.float16),
              "pos": rng.integers(0, 9, (2, 4)).astype(np.int64)}
    close_ref(*run_ref("RotaryEmbedding", inputs, ["y"]))
