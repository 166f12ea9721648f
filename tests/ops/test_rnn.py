"""RNN, GRU and LSTM at awkward shapes (seq 0 and 1, batch 1, prime sizes,
a hidden size of 1) and every option (directions, layouts, sequence_lens,
initial states, peepholes, clip, input_forget, linear_before_reset, each
activation, omitted inputs and outputs), through the whole stack: an ONNX
node compiled by `dvm compile` and run by `dvm run`, against a float64
NumPy reference written from the ONNX spec, and against ONNX Runtime where
it runs the case."""
import os
import tempfile

import numpy as np
import onnx
import pytest
from dvmtest.cli import dvm
from dvmtest.onnxmodel import save_model
from onnx import TensorProto, helper

from dvmop import run_model

rng = np.random.default_rng(13)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
TAKES = {"Affine": (1.0, 0.0), "LeakyRelu": (0.01, None), "ThresholdedRelu": (1.0, None),
         "ScaledTanh": (1.0, 1.0), "HardSigmoid": (0.2, 0.5), "Elu": (1.0, None)}


def act(name, alpha, beta):
    return {
        "Relu": lambda x: np.maximum(x, 0),
        "Tanh": np.tanh,
        "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "Affine": lambda x: alpha * x + beta,
        "LeakyRelu": lambda x: np.where(x >= 0, x, alpha * x),
        "ThresholdedRelu": lambda x: np.where(x > alpha, x, 0),
        "ScaledTanh": lambda x: alpha * np.tanh(beta * x),
        "HardSigmoid": lambda x: np.clip(alpha * x + beta, 0, 1),
        "Elu": lambda x: np.where(x >= 0, x, alpha * (np.exp(x) - 1)),
        "Softsign": lambda x: x / (1 + np.abs(x)),
        "Softplus": lambda x: np.log1p(np.exp(x)),
    }[name]


def functions(op, dirs, attrs):
    """The activations per direction, alphas and betas consumed in order by
    the functions that take them."""
    names = attrs.get("activations") or DEFAULT_ACTS[op] * dirs
    if len(names) == len(DEFAULT_ACTS[op]) and dirs == 2:
        names = names * 2
    al, be = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    fs = []
    for n in names:
        a, b = TAKES.get(n, (None, None))
        if a is not None and al:
            a = al.pop(0)
        if b is not None and be:
            b = be.pop(0)
        fs.append(act(n, a, b))
    k = len(DEFAULT_ACTS[op])
    return [fs[d * k:(d + 1) * k] for d in range(dirs)]


def rnn_reference(op, ins, attrs, layout):
    """ONNX RNN/GRU/LSTM in float64: Y (layout 0 form), Y_h, Y_c."""
    x, w, r = (np.asarray(ins[i], np.float64) for i in range(3))
    if layout:
        x = x.transpose(1, 0, 2)
    S, B, _ = x.shape
    D, GH, _ = w.shape
    H = r.shape[2]
    b = ins.get(3)
    b = np.zeros((D, 2 * GH)) if b is None else b.astype(np.float64)
    lens = ins.get(4)
    lens = np.full(B, S) if lens is None else lens
    h0, c0 = ins.get(5), ins.get(6)
    if layout:
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    p = ins.get(7)
    clip = attrs.get("clip")
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    fs = functions(op, D, attrs)
    y, yh, yc = np.zeros((S, D, B, H)), np.zeros((D, B, H)), np.zeros((D, B, H))
    for d in range(D):
        rev = attrs.get("direction") == "reverse" or d == 1
        f = fs[d]
        for bi in range(B):
            h = np.zeros(H) if h0 is None else h0[d, bi].astype(np.float64)
            c = np.zeros(H) if c0 is None else c0[d, bi].astype(np.float64)
            n = int(lens[bi])
            for t in (range(n - 1, -1, -1) if rev else range(n)):
                xw = w[d] @ x[t, bi] + b[d, :GH]
                hr = r[d] @ h + b[d, GH:]
                if op == "RNN":
                    h = f[0](cl(xw + hr))
                elif op == "GRU":
                    z = f[0](cl(xw[:H] + hr[:H]))
                    rg = f[0](cl(xw[H:2 * H] + hr[H:2 * H]))
                    if attrs.get("linear_before_reset"):
                        hh = f[1](cl(xw[2 * H:] + rg * hr[2 * H:]))
                    else:
                        hh = f[1](cl(xw[2 * H:] + r[d, 2 * H:] @ (rg * h) + b[d, GH + 2 * H:]))
                    h = (1 - z) * hh + z * h
                else:
                    g = xw + hr
                    pi, po, pf = (np.zeros(H),) * 3 if p is None else np.split(p[d].astype(np.float64), 3)
                    i = f[0](cl(g[:H] + pi * c))
                    fg = 1 - i if attrs.get("input_forget") else f[0](cl(g[2 * H:3 * H] + pf * c))
                    c = fg * c + i * f[1](cl(g[3 * H:]))
                    o = f[0](cl(g[H:2 * H] + po * c))
                    h = o * f[2](c)
                y[t, d, bi] = h
            if n:  # an empty sequence's states are 0, as ONNX Runtime has them
                yh[d, bi], yc[d, bi] = h, c
    if layout:
        return y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    return y, yh, yc


def case(op, S, B, I, H, direction="forward", layout=0, with_b=True, lens=None, h0=False, c0=False,
         peep=False, outs=(True, True, True), const=False, **attrs):
    """const: W and R are initializers (the kernel then reads the forms
    packed at link), else graph inputs."""
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    ins = {0: rng.standard_normal((B, S, I) if layout else (S, B, I)).astype(np.float32),
           1: (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32),
           2: (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32)}
    st = (B, D, H) if layout else (D, B, H)
    if with_b:
        ins[3] = (rng.standard_normal((D, 2 * G * H)) * 0.3).astype(np.float32)
    if lens is not None:
        ins[4] = np.array(lens, np.int32)
    if h0:
        ins[5] = rng.standard_normal(st).astype(np.float32)
    if c0:
        ins[6] = rng.standard_normal(st).astype(np.float32)
    if peep:
        ins[7] = (rng.standard_normal((D, 3 * H)) * 0.5).astype(np.float32)
    return op, ins, dict(attrs, direction=direction, layout=layout, hidden_size=H, const=const), \
        outs[:2 if op != "LSTM" else 3]


def rnn_model(op, ins, attrs, outs):
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    last = max(ins)
    node_in = [names[i] if i in ins else "" for i in range(last + 1)]
    out_names = ["Y", "Y_h", "Y_c"]
    node_out = [out_names[j] if want else "" for j, want in enumerate(outs)]
    while node_out and not node_out[-1]:
        node_out.pop()
    kw = {k: v for k, v in attrs.items() if v is not None and k != "const" and not (k == "layout" and v == 0)}
    node = helper.make_node(op, node_in, node_out, **kw)
    const = (1, 2) if attrs.get("const") else ()
    inputs = [helper.make_tensor_value_info(names[i], TensorProto.INT32 if i == 4 else TensorProto.FLOAT, v.shape)
              for i, v in ins.items() if i not in const]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in node_out if n]
    inits = [onnx.numpy_helper.from_array(ins[i], names[i]) for i in const]
    g = helper.make_graph([node], "rnn", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), [n for n in node_out if n]


CASES = {
    # awkward shapes
    "lstm_seq1_batch1_h1": case("LSTM", 1, 1, 1, 1),
    "lstm_seq0": case("LSTM", 0, 3, 5, 7, h0=True, c0=True),
    "lstm_batch0": case("LSTM", 4, 0, 5, 7),
    "lstm_primes": case("LSTM", 7, 3, 5, 13, h0=True, c0=True),
    "gru_primes": case("GRU", 11, 1, 3, 17),
    "rnn_primes": case("RNN", 13, 5, 7, 3),
    "lstm_input1": case("LSTM", 5, 2, 1, 31),
    # options
    "lstm_bidir_layout1_lens": case("LSTM", 6, 4, 3, 5, "bidirectional", 1, lens=[6, 1, 0, 3],
                                    h0=True, c0=True, peep=True),
    "lstm_bidir_lens": case("LSTM", 6, 4, 3, 5, "bidirectional", lens=[6, 1, 0, 3], h0=True, c0=True,
                            peep=True),
    "lstm_reverse_lens": case("LSTM", 5, 3, 4, 6, "reverse", lens=[2, 5, 4], h0=True),
    "lstm_clip_forget": case("LSTM", 4, 2, 3, 5, clip=0.7, input_forget=1, peep=True),
    "lstm_acts": case("LSTM", 3, 2, 3, 4, "bidirectional",
                      activations=["HardSigmoid", "Softsign", "ScaledTanh", "Sigmoid", "Elu", "Softplus"],
                      activation_alpha=[0.3, 0.9, 0.5], activation_beta=[0.4, 1.5]),
    "lstm_only_yh_no_b": case("LSTM", 4, 2, 3, 5, with_b=False, h0=True, outs=(False, True, False)),
    "lstm_only_yc": case("LSTM", 4, 2, 3, 5, c0=True, outs=(False, False, True)),
    "gru_lbr_bidir_lens": case("GRU", 5, 3, 4, 7, "bidirectional", lens=[5, 2, 3], h0=True,
                               linear_before_reset=1),
    "gru_reverse_layout1": case("GRU", 4, 2, 3, 5, "reverse", 1, h0=True, clip=0.5),
    "gru_acts": case("GRU", 3, 2, 3, 4, activations=["LeakyRelu", "Affine"],
                     activation_alpha=[0.2, 0.7], activation_beta=[0.1]),
    # no lists: HardSigmoid's own defaults, alpha 0.2 and beta 0.5
    "gru_acts_defaults": case("GRU", 3, 2, 3, 4, activations=["HardSigmoid", "Tanh"]),
    "rnn_relu_bidir_layout1": case("RNN", 4, 3, 2, 5, "bidirectional", 1, lens=[4, 1, 3], h0=True,
                                   activations=["Relu", "ThresholdedRelu"], activation_alpha=[0.1]),
    "rnn_bidir_lens": case("RNN", 4, 3, 2, 5, "bidirectional", lens=[4, 0, 3], h0=True),
    "gru_bidir_lens": case("GRU", 4, 3, 2, 5, "bidirectional", lens=[1, 0, 4], h0=True),
    # W and R constants: packed at link for pgemm (GRU's R in two parts)
    "lstm_const_bidir": case("LSTM", 5, 3, 7, 11, "bidirectional", lens=[5, 0, 2], h0=True, peep=True, const=True),
    "lstm_const_long": case("LSTM", 20, 2, 3, 67, const=True),
    "gru_const": case("GRU", 3, 17, 5, 9, "reverse", const=True),
    "gru_const_lbr": case("GRU", 1, 3, 5, 9, const=True, linear_before_reset=1),
    "rnn_const": case("RNN", 6, 1, 4, 130, const=True),
    # products of 2^18 multiply-adds and more: split over the pool (packed,
    # and a few rows' own loops)
    "lstm_const_bidir_wide": case("LSTM", 3, 1, 8, 256, "bidirectional", h0=True, const=True),
    "gru_wide_batch2": case("GRU", 3, 2, 8, 300, h0=True),
    "gru_long_batch": case("GRU", 9, 20, 6, 10, h0=True),
    "rnn_only_y": case("RNN", 3, 2, 3, 4, outs=(True, False)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_reference(name):
    op, ins, attrs, outs = CASES[name]
    m, out_names = rnn_model(op, ins, attrs, outs)
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    feeds = {names[i]: v for i, v in ins.items() if not (attrs["const"] and i in (1, 2))}
    got = run_model(m, feeds, len(out_names))
    ref = rnn_reference(op, ins, attrs, attrs["layout"])
    want = [ref[j] for j, w in enumerate(outs) if w]
    for n, g, w in zip(out_names, got, want, strict=True):
        assert g.shape == w.shape, (n, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=n)
    if 0 in ins[0].shape:  # ONNX Runtime 1.23 aborts the process on batch 0
        return
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        theirs = sess.run(out_names, feeds)
    except Exception:  # ORT does not run every case
        return
    for n, g, t in zip(out_names, got, theirs, strict=True):
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-5, err_msg=f"{n} vs ONNX Runtime")


def f16_model(op, ins, attrs, outs):
    """The case's model with every float tensor f16 (sequence_lens stays i32)."""
    m, out_names = rnn_model(op, ins, attrs, outs)
    for v in list(m.graph.input) + list(m.graph.output):
        if v.name != "sequence_lens":
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    for t in m.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float16), t.name))
    return m, out_names


def within_f16_ulp(got, want, extra, name):
    """|got - want| at most one f16 step at the larger magnitude, plus extra."""
    g, w = got.astype(np.float64), np.asarray(want, np.float64)
    step = np.spacing(np.maximum(np.abs(g), np.abs(w)).astype(np.float16)).astype(np.float64)
    bad = np.abs(g - w) > step + extra
    assert not bad.any(), (name, g[bad][:5], w[bad][:5])


@pytest.mark.parametrize("name", sorted(CASES))
def test_f16_as_onnxruntime(name):
    """f16 runs as ONNX Runtime runs it: the f32 kernel between casts. Its
    outputs are dvm's f32 outputs (on the f16 inputs) rounded to f16, bit
    for bit; within an f16 step of the float64 reference and of ONNX
    Runtime's f16 run (which inserts the same casts)."""
    op, ins, attrs, outs = CASES[name]
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    ins16 = {i: v if i == 4 else v.astype(np.float16) for i, v in ins.items()}
    m, out_names = f16_model(op, ins16, attrs, outs)
    feeds = {names[i]: v for i, v in ins16.items() if not (attrs["const"] and i in (1, 2))}
    got = run_model(m, feeds, len(out_names))
    ins32 = {i: v if i == 4 else v.astype(np.float32) for i, v in ins16.items()}
    # W and R given at run time, as the f16 model's casts give them: constant
    # f32 ones are packed at link, whose sums round differently
    m32, _ = rnn_model(op, ins32, dict(attrs, const=False), outs)
    f32 = run_model(m32, {names[i]: v for i, v in ins32.items()}, len(out_names))
    ref = rnn_reference(op, ins32, attrs, attrs["layout"])
    want = [ref[j] for j, w in enumerate(outs) if w]
    for n, g, f, w in zip(out_names, got, f32, want, strict=True):
        assert g.dtype == np.float16 and g.shape == f.shape, (n, g.dtype, g.shape, f.shape)
        np.testing.assert_array_equal(g, f.astype(np.float16), err_msg=n)
        within_f16_ulp(g, w, 2e-5, n)
    if 0 in ins[0].shape:  # ONNX Runtime 1.23 aborts the process on batch 0
        return
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        theirs = sess.run(out_names, feeds)
    except Exception:  # ORT does not run every case (layout 1)
        return
    for n, g, t in zip(out_names, got, theirs, strict=True):
        within_f16_ulp(g, t, 1e-5, f"{n} vs ONNX Runtime")


def test_refuses_f64():
    """ONNX Runtime 1.32 has no f64 RNN, and its GRU and LSTM stop on f64
    when run ("does not support double yet"): dvm refuses f64 by name."""
    op, ins, attrs, outs = case("LSTM", 2, 1, 3, 4)
    m, _ = rnn_model(op, {k: v.astype(np.float64) for k, v in ins.items()}, attrs, outs)
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
    with tempfile.TemporaryDirectory() as d:
        r = dvm("compile", save_model(m, os.path.join(d, "m.onnx")), "-o", os.path.join(d, "m.dvmb"))
    assert r.returncode == 2 and "(LSTM, opset 14)" in r.stderr and "dtype f64" in r.stderr, r.stderr
