"""LinearAttention, CausalConvWithState (opset 27) and TensorScatter (opset
24) at awkward shapes (length 0 and 1, batch 1, prime sizes, a kernel of 1,
GQA and MQA head groups) and every option (update rules, decay and beta
widths, past states, explicit scale, activations, circular writes, omitted
optional inputs, f16), through the whole stack: an ONNX node compiled once
with symbolic dims by `dvm compile` and run by `dvm run` at several shapes
from that one file, against the onnx package's reference implementation
(onnx.reference), and against ONNX Runtime where it runs the case."""
import os
import tempfile

import numpy as np
import pytest
from dvmtest.cli import compile_onnx, dvm, try_run
from dvmtest.onnxmodel import save_model
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from dvmop import poisoned

rng = np.random.default_rng(27)
TYPES = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64,
         np.bool_: TensorProto.BOOL, np.int8: TensorProto.INT8}
TOL = {np.float32: 1e-5, np.float16: 2e-3}


def state_model(op, names, dtypes, ranks, outs, opset, **attrs):
    """One node; each given input of rank r gets symbolic dims (name_0..)."""
    node = helper.make_node(op, names, outs, **attrs)
    inputs = [helper.make_tensor_value_info(n, TYPES[dt], [f"{n}_{d}" for d in range(r)])
              for n, dt, r in zip(names, dtypes, ranks) if n]
    outputs = [helper.make_tensor_value_info(o, TYPES[dtypes[0]], None) for o in outs]
    g = helper.make_graph([node], op, inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=13)


class Compiled:
    """A model compiled once; run() at any shape with DVM_POISON on."""

    def __init__(self, m):
        self.dir = tempfile.TemporaryDirectory()
        self.m = m
        self.mod = compile_onnx(save_model(m, os.path.join(self.dir.name, "m.onnx")))

    def run(self, feeds, nout, ok=True):
        r, outs = try_run(self.mod, feeds, nout, env=poisoned())
        if not ok:
            assert r.returncode != 0, r.stderr
            return r.stderr
        assert r.returncode == 0, r.stderr
        return outs


def ort_or_none(m, feeds):
    """ONNX Runtime's outputs, or None where it does not take the model."""
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # not installed, or the op or opset is not in this version
        return None
    return sess.run(None, feeds)


def check_state(got, want, dt):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            tol = TOL[dt]
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(g, w)


# ---- LinearAttention ----

LA_NAMES = ["query", "key", "value", "past_state", "decay", "beta"]


LA_CASES = [
    # rule, hq, hkv, dk, dv, past, decay width (heads or heads*dk), beta width, dtype, scale, shapes (B, T)
    ("linear", 2, 2, 3, 5, False, None, None, np.float32, 0.0, [(1, 1), (2, 7), (3, 0)]),
    ("linear", 1, 1, 1, 1, True, None, None, np.float32, 0.0, [(1, 1), (1, 13)]),
    ("gated", 3, 3, 5, 2, True, "keys", None, np.float32, 0.0, [(2, 1), (1, 11)]),
    ("gated", 4, 2, 2, 3, False, "heads", None, np.float32, 0.25, [(1, 5), (2, 2)]),
    ("delta", 2, 1, 7, 3, True, None, "heads", np.float32, 0.0, [(1, 3), (3, 1)]),
    ("gated_delta", 6, 2, 3, 5, True, "keys", "heads", np.float32, 0.0, [(1, 1), (2, 7)]),
    ("gated_delta", 3, 1, 4, 2, False, "heads", "one", np.float32, 0.0, [(2, 5), (1, 0)]),
    ("gated_delta", 2, 2, 4, 4, True, "keys", "heads", np.float16, 0.0, [(1, 3), (2, 6)]),
    ("linear", 2, 1, 3, 3, True, None, None, np.float16, 0.5, [(1, 1), (1, 4)]),
]


@pytest.mark.parametrize("case", LA_CASES, ids=lambda c: f"{c[0]}_{c[1]}q{c[2]}kv_{c[3]}x{c[4]}")
def test_linear_attention(case):
    rule, hq, hkv, dk, dv, past, decay, beta, dt, scale, shapes = case
    names = ["query", "key", "value", "past_state" if past else "", "decay" if decay else "", "beta" if beta else ""]
    while not names[-1]:
        names.pop()
    m = state_model("LinearAttention", names, [dt] * 6, [3, 3, 3, 4, 3, 3], ["output", "present_state"], 27,
                    q_num_heads=hq, kv_num_heads=hkv, update_rule=rule, **({"scale": scale} if scale else {}))
    c = Compiled(m)
    ref = ReferenceEvaluator(m)
    for B, T in shapes:
        f = {"query": rng.standard_normal((B, T, hq * dk)), "key": rng.standard_normal((B, T, hkv * dk)) * 0.5,
             "value": rng.standard_normal((B, T, hkv * dv))}
        if past:
            f["past_state"] = rng.standard_normal((B, hkv, dk, dv)) * 0.3
        if decay:
            f["decay"] = -np.abs(rng.standard_normal((B, T, hkv * dk if decay == "keys" else hkv))) * 0.5
        if beta:
            f["beta"] = 1 / (1 + np.exp(-rng.standard_normal((B, T, hkv if beta == "heads" else 1))))
        f = {k: v.astype(dt) for k, v in f.items()}
        got = c.run(f, 2)
        check_state(got, ref.run(None, f), dt)
        if T and (want := ort_or_none(m, f)) is not None:
            check_state(got, want, dt)


def test_linear_attention_refuses_mismatched_inputs(tmp_path):
    # beta is for the delta rules: refused at compile time, naming the node
    m = state_model("LinearAttention", ["query", "key", "value", "", "", "beta"], [np.float32] * 6, [3] * 6,
                    ["output", "present_state"], 27, q_num_heads=1, kv_num_heads=1, update_rule="linear")
    r = dvm("compile", save_model(m, tmp_path / "m.onnx"), "-o", tmp_path / "m.dvmb")
    assert r.returncode == 2 and 'update_rule "linear" takes no decay and takes no beta' in r.stderr, r.stderr


# ---- CausalConvWithState ----

CC_CASES = [
    # C, K, bias, past, activation, dtype, shapes (B, L)
    (1, 1, False, False, None, np.float32, [(1, 1), (2, 5)]),
    (7, 4, True, True, "silu", np.float32, [(1, 1), (3, 2), (2, 13)]),
    (3, 5, False, True, "swish", np.float32, [(2, 3), (1, 0)]),
    (5, 3, True, False, None, np.float32, [(1, 11), (2, 1)]),
    (4, 4, True, True, "silu", np.float16, [(2, 7), (1, 1)]),
    (2, 2, False, False, None, np.float16, [(1, 5)]),
]


@pytest.mark.parametrize("case", CC_CASES, ids=lambda c: f"c{c[0]}_k{c[1]}_{c[4]}_{np.dtype(c[5]).name}")
def test_causal_conv_with_state(case):
    C, K, bias, past, act, dt, shapes = case
    names = ["input", "weight", "bias" if bias else "", "past_state" if past else ""]
    while not names[-1]:
        names.pop()
    m = state_model("CausalConvWithState", names, [dt] * 4, [3, 3, 1, 3], ["output", "present_state"], 27,
                    **({"activation": act} if act else {}))
    # weight and bias keep their dims: [C, 1, K] and [C] fixed
    for i, v in enumerate(m.graph.input):
        if v.name in ("weight", "bias"):
            for d, n in zip(v.type.tensor_type.shape.dim, [C, 1, K] if v.name == "weight" else [C]):
                d.dim_value = n
    c = Compiled(m)
    ref = ReferenceEvaluator(m)
    w = rng.standard_normal((C, 1, K)).astype(dt)
    for B, L in shapes:
        f = {"input": rng.standard_normal((B, C, L)).astype(dt), "weight": w}
        if bias:
            f["bias"] = rng.standard_normal(C).astype(dt)
        if past:
            f["past_state"] = rng.standard_normal((B, C, K - 1)).astype(dt)
        want = ref.run(None, f) if L else [np.zeros((B, C, 0), dt), (f.get("past_state", np.zeros((B, C, K - 1), dt)))]
        got = c.run(f, 2)
        check_state(got, want, dt)
        if L and (want := ort_or_none(m, f)) is not None:
            check_state(got, want, dt)


# ---- TensorScatter ----

TS_CASES = [
    # shape of past (B, ..., max, ...), axis, seq, mode, write indices, dtype
    ((2, 3, 5, 4), -2, 2, "linear", [0, 3], np.float32),
    ((2, 3, 5, 4), 2, 5, "linear", None, np.float32),
    ((3, 7, 2), 1, 3, "circular", [5, 6, 0], np.float16),
    ((1, 4, 3), -1, 1, "circular", [8], np.int64),
    ((2, 1, 3), 2, 0, "linear", [3, 1], np.bool_),
    ((2, 2, 3, 2), 1, 2, "circular", [1, 0], np.int8),
]


@pytest.mark.parametrize("case", TS_CASES, ids=lambda c: f"{c[3]}_axis{c[1]}_seq{c[2]}_{np.dtype(c[5]).name}")
def test_tensor_scatter(case):
    shape, axis, seq, mode, idx, dt = case
    names = ["past_cache", "update"] + (["write_indices"] if idx is not None else [])
    m = state_model("TensorScatter", names, [dt, dt, np.int64], [len(shape)] * 2 + [1], ["present_cache"], 24, axis=axis,
                    mode=mode)
    c = Compiled(m)
    ushape = list(shape)
    ushape[axis] = seq
    f = {"past_cache": rng.standard_normal(shape) * 5, "update": rng.standard_normal(ushape) * 5}
    f = {k: (v > 0 if dt is np.bool_ else v).astype(dt) for k, v in f.items()}
    if idx is not None:
        f["write_indices"] = np.array(idx, np.int64)
    got = c.run(f, 1)
    check_state(got, ReferenceEvaluator(m).run(None, f), dt if dt in TOL else np.float32)
    if seq and (want := ort_or_none(m, f)) is not None:
        check_state(got, want, dt if dt in TOL else np.float32)


def test_tensor_scatter_linear_overflow_fails():
    m = state_model("TensorScatter", ["past_cache", "update", "write_indices"], [np.float32, np.float32, np.int64],
                    [3, 3, 1], ["present_cache"], 24, axis=1)
    c = Compiled(m)
    f = {"past_cache": np.zeros((2, 4, 3), np.float32), "update": np.ones((2, 2, 3), np.float32),
         "write_indices": np.array([2, 3], np.int64)}
    assert "write_indices[1] = 3 with 2 updates does not fit a cache of 4 (linear mode)" in c.run(f, 1, ok=False)
