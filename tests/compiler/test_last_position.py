"""`dvm compile --last-position OUTPUT` (compiler/last_position.c): the output
computed for the last position of axis 1 alone where a MatMul followed only
by position-wise elementwise nodes makes it, equal to ONNX Runtime's whole
output at that position; left whole (and equal to ONNX Runtime's) where the
pattern does not hold; an unknown output name refused."""
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DVM = os.environ.get("DVM", os.path.join(HERE, "../../build/tools/dvm"))
F = TensorProto.FLOAT
K, V = 24, 37  # V prime: no vector width divides it
rng = np.random.default_rng(11)


def arr(name, *shape):
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)


def head_model(tmp, chain, extra_inputs=(), extra_outputs=()):
    """x [b, s, K] -> MatMul(W [K, V]) -> h0 -> chain nodes -> logits (no chain: the MatMul makes logits)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h0" if chain else "logits"], name="head")] + chain
    inits = [arr("W", K, V), arr("bias", V), numpy_helper.from_array(np.array(3.0, np.float32), "cap")]
    inputs = [helper.make_tensor_value_info("x", F, ["b", "s", K])] + \
        [helper.make_tensor_value_info(n, F, d) for n, d in extra_inputs]
    outputs = [helper.make_tensor_value_info("logits", F, None)] + \
        [helper.make_tensor_value_info(n, F, None) for n in extra_outputs]
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    path = str(tmp / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def compile_last(path, name="logits"):
    mod = path.replace(".onnx", ".dvmb")
    r = subprocess.run([DVM, "compile", path, "-o", mod, "--last-position", name], capture_output=True, text=True)
    return mod, r


def run(tmp, mod, feeds, names):
    cmd = [DVM, "run", mod]
    for k, v in feeds.items():
        np.save(tmp / f"{k}.npy", v)
        cmd += ["--input", f"{k}={tmp / (k + '.npy')}"]
    for n in names:
        cmd += ["--output", f"{n}={tmp / (n + '.out.npy')}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [np.load(tmp / f"{n}.out.npy") for n in names]


SOFTCAP = [helper.make_node("Div", ["h0", "cap"], ["h1"]), helper.make_node("Tanh", ["h1"], ["h2"]),
           helper.make_node("Mul", ["h2", "cap"], ["h3"]), helper.make_node("Add", ["h3", "bias"], ["h4"]),
           helper.make_node("Cast", ["h4"], ["logits"], to=F)]


@pytest.mark.parametrize("chain", [[], SOFTCAP], ids=["matmul", "softcap_bias_cast"])
def test_last_position_equals_the_whole_output_there(tmp_path, chain):
    path = head_model(tmp_path, chain)
    mod, r = compile_last(path)
    assert r.returncode == 0, r.stderr
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for b, s in [(1, 1), (1, 2), (3, 13), (2, 7)]:
        x = rng.standard_normal((b, s, K)).astype(np.float32)
        (ours,) = run(tmp_path, mod, {"x": x}, ["logits"])
        want = sess.run(None, {"x": x})[0]
        assert ours.shape == (b, 1, V)
        np.testing.assert_allclose(ours, want[:, -1:, :], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["read_elsewhere", "position_dependent_operand", "rank_2"])
def test_left_whole_where_the_pattern_does_not_hold(tmp_path, case):
    extra_inputs, extra_outputs, chain = (), (), [helper.make_node("Relu", ["h0"], ["logits"])]
    if case == "read_elsewhere":  # another output reads a value of the chain
        chain = [helper.make_node("Relu", ["h0"], ["logits"]), helper.make_node("Neg", ["h0"], ["other"])]
        extra_outputs = ("other",)
    elif case == "position_dependent_operand":  # an operand that differs by position
        chain = [helper.make_node("Add", ["h0", "y"], ["logits"])]
        extra_inputs = (("y", ["b", "s", V]),)
    path = head_model(tmp_path, chain, extra_inputs, extra_outputs)
    b, s = 2, 5
    feeds = {"x": rng.standard_normal((b, s, K)).astype(np.float32)}
    if case == "rank_2":  # x [b * s, K]: no positions axis to take the last of
        m = onnx.load(path)
        del m.graph.input[0].type.tensor_type.shape.dim[2]
        m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = K
        onnx.save(m, path)
        feeds["x"] = feeds["x"].reshape(b * s, K)
    for n, d in extra_inputs:
        feeds[n] = rng.standard_normal((b, s, V)).astype(np.float32)
    mod, r = compile_last(path)
    assert r.returncode == 0, r.stderr
    names = ["logits", *extra_outputs]
    ours = run(tmp_path, mod, feeds, names)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(names, feeds)
    for a, w in zip(ours, want, strict=True):
        assert a.shape == w.shape
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


def test_unknown_output_is_refused(tmp_path):
    path = head_model(tmp_path, [helper.make_node("Relu", ["h0"], ["logits"])])
    _, r = compile_last(path, "lm_logits")
    assert r.returncode != 0
    assert 'the model has no output "lm_logits"' in r.stderr
