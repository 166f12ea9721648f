"""`dvm compile --last-position OUTPUT` (compiler/last_position.c): the output
computed for the last position of axis 1 alone where a MatMul followed only
by position-wise elementwise nodes makes it, equal to ONNX Runtime's whole
output at that position; left whole (and equal to ONNX Runtime's) where the
pattern does not hold; an unknown output name refused."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from dvmtest.cli import DvmError, compile_onnx, run_module  # noqa: E402
from dvmtest.compare import compare_outputs, ort_outputs  # noqa: E402
from dvmtest.onnxmodel import const, make_model, save_model  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

F = TensorProto.FLOAT
K, V = 24, 37  # V prime: no vector width divides it
rng = np.random.default_rng(11)


def head_model(tmp, chain, extra_inputs=(), extra_outputs=()):
    """x [b, s, K] -> MatMul(W [K, V]) -> h0 -> chain nodes -> logits (no
    chain: the MatMul makes logits)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h0" if chain else "logits"], name="head")] + chain
    inits = [const("W", rng.uniform(-1, 1, (K, V))), const("bias", rng.uniform(-1, 1, V)), const("cap", 3.0)]
    inputs = [("x", F, ["b", "s", K]), *((n, F, d) for n, d in extra_inputs)]
    outputs = [("logits", F, None), *((n, F, None) for n in extra_outputs)]
    return save_model(make_model(nodes, inputs, outputs, inits), tmp / "m.onnx")


SOFTCAP = [helper.make_node("Div", ["h0", "cap"], ["h1"]), helper.make_node("Tanh", ["h1"], ["h2"]),
           helper.make_node("Mul", ["h2", "cap"], ["h3"]), helper.make_node("Add", ["h3", "bias"], ["h4"]),
           helper.make_node("Cast", ["h4"], ["logits"], to=F)]


@pytest.mark.parametrize("chain", [[], SOFTCAP], ids=["matmul", "softcap_bias_cast"])
def test_last_position_equals_the_whole_output_there(tmp_path, chain):
    path = head_model(tmp_path, chain)
    mod = compile_onnx(path, "--last-position", "logits")
    for b, s in [(1, 1), (1, 2), (3, 13), (2, 7)]:
        x = rng.standard_normal((b, s, K)).astype(np.float32)
        want = ort_outputs(path, {"x": x})[0][:, -1:, :]
        compare_outputs(run_module(mod, {"x": x}), [want], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["read_elsewhere", "position_dependent_operand", "rank_2"])
def test_left_whole_where_the_pattern_does_not_hold(tmp_path, case):
    extra_inputs, extra_outputs, chain = (), (), [helper.make_node("Relu", ["h0"], ["logits"])]
    if case == "read_elsewhere":  # another output reads a value of the chain
        chain.append(helper.make_node("Neg", ["h0"], ["other"]))
        extra_outputs = ("other",)
    elif case == "position_dependent_operand":  # an operand that differs by position
        chain = [helper.make_node("Add", ["h0", "y"], ["logits"])]
        extra_inputs = (("y", ["b", "s", V]),)
    path = head_model(tmp_path, chain, extra_inputs, extra_outputs)
    b, s = 2, 5
    feeds = {"x": rng.standard_normal((b, s, K)).astype(np.float32)}
    if case == "rank_2":  # x [b * s, K]: no positions axis to take the last of
        import onnx

        m = onnx.load(path)
        del m.graph.input[0].type.tensor_type.shape.dim[2]
        m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = K
        path = save_model(m, tmp_path / "m.onnx")
        feeds["x"] = feeds["x"].reshape(b * s, K)
    for n, _ in extra_inputs:
        feeds[n] = rng.standard_normal((b, s, V)).astype(np.float32)
    mod = compile_onnx(path, "--last-position", "logits")
    want = ort_outputs(path, feeds)
    compare_outputs(run_module(mod, feeds, len(want)), want, rtol=1e-5, atol=1e-5)


def test_unknown_output_is_refused(tmp_path):
    path = head_model(tmp_path, [helper.make_node("Relu", ["h0"], ["logits"])])
    with pytest.raises(DvmError, match='the model has no output "lm_logits"'):
        compile_onnx(path, "--last-position", "lm_logits")
