"""BatchNormalization and per-channel Adds folded into the Conv or
ConvTranspose before them (compiler/fold.c):
gone from the IR where the pattern holds, kept where it does not, and the
results match ONNX Runtime either way."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import dump_ir  # noqa: E402
from dvmtest.compare import check_with_ort  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(5)


def uniform_const(name, *shape, lo=-1.0, hi=1.0):
    return numpy_helper.from_array(rng.uniform(lo, hi, shape).astype(np.float32), name)


def fold_model(tmp, nodes, inits, inputs=(("x", ["n", 3, "h", "w"]),), name="m.onnx"):
    m = make_model(nodes, [(n, F, d) for n, d in inputs], [("y", F, None)], inits, ir_version=8)
    return save_model(m, tmp / name)


def bn_inits(c, prefix="bn"):
    return [uniform_const(f"{prefix}_s", c, lo=0.5, hi=1.5), uniform_const(f"{prefix}_b", c), uniform_const(f"{prefix}_m", c),
            uniform_const(f"{prefix}_v", c, lo=0.2, hi=2.0)]


def bn(x, y, prefix="bn", **kw):
    return helper.make_node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m", f"{prefix}_v"],
                            [y], name=prefix, **kw)


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 1), (True, 2)])
def test_folded(tmp_path, bias, group):
    """Conv (with or without its bias, grouped) then BatchNormalization:
    one Conv with new weights, the results of both."""
    inits = [uniform_const("w", 4, 3 if group == 1 else 2, 3, 3)] + ([uniform_const("b", 4)] if bias else []) + bn_inits(4)
    x_in = [("x", ["n", 3 if group == 1 else 4, "h", "w"])]
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], pads=[1, 1, 1, 1],
                              group=group, name="conv"), bn("c", "y", epsilon=1e-3)]
    path = fold_model(tmp_path, nodes, inits, x_in)
    text = dump_ir(path)
    assert "BatchNormalization" not in text and "%y: f32[n, 4, h, w] = Conv(%x, %bn.W, %bn.B)" in text, text
    for shape in [(1, x_in[0][1][1], 5, 7), (2, x_in[0][1][1], 8, 3)]:
        check_with_ort(path, {"x": rng.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-5)


def test_not_folded(tmp_path):
    """Kept apart: the Conv's output read elsewhere too, statistics that are
    an input, a BatchNormalization not after a Conv."""
    inits = [uniform_const("w", 3, 3, 1, 1)] + bn_inits(3) + bn_inits(3, "bn2")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), bn("c", "t"),
             helper.make_node("Add", ["t", "c"], ["u"], name="add"),
             helper.make_node("BatchNormalization", ["u", "bn2_s", "bn2_b", "bn2_m", "v"], ["y"], name="bn2")]
    path = fold_model(tmp_path, nodes, inits, [("x", ["n", 3, "h", "w"]), ("v", [3])])
    assert dump_ir(path).count("BatchNormalization") == 2
    check_with_ort(path, {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
                          "v": rng.uniform(0.5, 1.5, 3).astype(np.float32)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("group", [1, 2])
@pytest.mark.parametrize("k_shape", [(4, 1, 1), (1, 4, 1, 1), (1,), (1, 1, 1, 1)])
def test_transpose_add_bn(tmp_path, group, k_shape):
    """ConvTranspose without a bias, Add of a per-channel (or one-value)
    constant, BatchNormalization, Relu: as paddle2onnx writes a DB head;
    the Add and the BatchNormalization go into the ConvTranspose."""
    inits = [uniform_const("w", 4, 4 // group, 2, 2), uniform_const("k", *k_shape)] + bn_inits(4)
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], group=group, name="deconv"),
             helper.make_node("Add", ["k", "c"] if k_shape == (1,) else ["c", "k"], ["a"], name="add"),
             bn("a", "t"), helper.make_node("Relu", ["t"], ["y"])]
    path = fold_model(tmp_path, nodes, inits, [("x", ["n", 4, "h", "w"])])
    text = dump_ir(path)
    assert "Add" not in text and "BatchNormalization" not in text and "ConvTranspose(%x, %bn.W, %bn.B)" in text, text
    for shape in [(1, 4, 5, 7), (2, 4, 1, 3)]:
        check_with_ort(path, {"x": rng.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["spatial", "read", "input", "rank"])
def test_add_not_folded(tmp_path, case):
    """An Add kept: of a constant varying along H ("spatial"), with the
    conv's output read elsewhere too ("read"), of a graph input ("input"),
    of a constant of higher rank than the output ("rank")."""
    k = {"spatial": (1, 1, 5, 1), "read": (3, 1, 1), "input": None, "rank": (1, 1, 3, 1, 1)}[case]
    inits = [uniform_const("w", 3, 3, 1, 1)] + ([uniform_const("k", *k)] if k else [])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Add", ["c", "k"], ["a" if case == "read" else "y"], name="add")]
    inputs = [("x", ["n", 3, 5, 4])] + ([("k", [3, 1, 1])] if case == "input" else [])
    if case == "read":
        nodes.append(helper.make_node("Mul", ["a", "c"], ["y"]))
    path = fold_model(tmp_path, nodes, inits, inputs)
    assert "Add(" in dump_ir(path)
    feeds = {"x": rng.standard_normal((2, 3, 5, 4)).astype(np.float32)}
    if case == "input":
        feeds["k"] = rng.standard_normal((3, 1, 1)).astype(np.float32)
    check_with_ort(path, feeds, rtol=1e-4, atol=1e-5)
