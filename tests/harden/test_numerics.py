"""Issue 18's numerical edges, through `dvm compile` and `dvm run`, against ONNX
Runtime: LogSoftmax of large values, LayerNorm of rows near the f32 range's end,
reductions over an empty axis, ArgMax/ArgMin of a [0, 0] input. Models are made
here, at test time."""
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DVM = os.environ.get("DVM", os.path.join(HERE, "../../build/tools/dvm"))
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def check(tmp_path, node, x, out_type=F, inits=(), opset=18):
    """Compiles a one-node model on input x, runs it in dvm and in ORT, and returns
    both outputs."""
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, ["a", "b"])],
                          [helper.make_tensor_value_info("y", out_type, None)], list(inits))
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod = str(tmp_path / "m.dvmb")
    p = subprocess.run([DVM, "compile", path, "-o", mod], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    np.save(tmp_path / "x.npy", x)
    p = subprocess.run([DVM, "run", mod, "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "y.npy")],
                       capture_output=True, text=True, timeout=60)
    for bad in ("Sanitizer", "runtime error:"):
        assert bad not in p.stderr, p.stderr
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "y.npy")
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    return got, want


@pytest.mark.parametrize("v", [1e4, 1e6, 1e7, 1e8, 1e30])
def test_logsoftmax_of_large_values(tmp_path, v):
    x = np.array([[v, v, 0, 0], [0, 0, v, v]], np.float32)
    got, want = check(tmp_path, helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1), x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got[0, :2], -np.log(2.0), rtol=1e-6)


@pytest.mark.parametrize("row", [[3e38] * 4, [-3.4e38] * 4, [3e38, 3e38, 3e38, 3e38, 1.0, 1.0, 1.0, 1.0]])
def test_layernorm_of_huge_constant_rows(tmp_path, row):
    """ONNX Runtime gives 0 for a constant row of 3e38 (dvm gave NaN); the last
    row is not constant, and ORT's 0 there is its own overflow: dvm is exact."""
    x = np.array([row], np.float32)
    n = x.shape[1]
    inits = [numpy_helper.from_array(np.ones(n, np.float32), "g"), numpy_helper.from_array(np.zeros(n, np.float32), "b")]
    got, want = check(tmp_path, helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1), x,
                      inits=inits, opset=17)
    assert np.isfinite(got).all()
    if len(set(row)) == 1:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, [[1.0] * 4 + [-1.0] * 4], rtol=1e-6)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("shape,axis", [((2, 0), 1), ((0, 3), 0)])
def test_reduce_over_an_empty_axis(tmp_path, op, shape, axis):
    axes = numpy_helper.from_array(np.array([axis], np.int64), "axes")
    got, want = check(tmp_path, helper.make_node(op, ["x", "axes"], ["y"], keepdims=1), np.zeros(shape, np.float32),
                      inits=[axes])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape,axis", [((0, 0), 1), ((0, 0), 0), ((0, 3), 1)])
def test_argreduce_of_an_empty_input(tmp_path, op, shape, axis):
    got, want = check(tmp_path, helper.make_node(op, ["x"], ["y"], axis=axis), np.zeros(shape, np.float32),
                      out_type=I64)
    assert got.size == 0
