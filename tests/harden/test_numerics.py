"""Issue 18's numerical edges, through `dvm compile` and `dvm run`, against ONNX
Runtime: LogSoftmax of large values, LayerNorm of rows near the f32 range's end,
reductions over an empty axis, ArgMax/ArgMin of a [0, 0] input. Models are made
here, at test time."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import compile_onnx, run_module  # noqa: E402
from dvmtest.compare import ort_outputs  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def one_node_both(tmp_path, node, x, out_type=F, inits=(), opset=18):
    """Compiles a one-node model on input x, runs it in dvm and in ORT, and returns
    both outputs."""
    m = make_model([node], [("x", F, ["a", "b"])], [("y", out_type, None)], inits, opset=opset, ir_version=8)
    path = save_model(m, tmp_path / "m.onnx")
    want = ort_outputs(path, {"x": x})[0]
    got = run_module(compile_onnx(path), {"x": x})[0]
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    return got, want


@pytest.mark.parametrize("v", [1e4, 1e6, 1e7, 1e8, 1e30])
def test_logsoftmax_of_large_values(tmp_path, v):
    x = np.array([[v, v, 0, 0], [0, 0, v, v]], np.float32)
    got, want = one_node_both(tmp_path, helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1), x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got[0, :2], -np.log(2.0), rtol=1e-6)


@pytest.mark.parametrize("row", [[3e38] * 4, [-3.4e38] * 4, [3e38, 3e38, 3e38, 3e38, 1.0, 1.0, 1.0, 1.0]])
def test_layernorm_of_huge_constant_rows(tmp_path, row):
    """ONNX Runtime gives 0 for a constant row of 3e38 (dvm gave NaN); the last
    row is not constant, and ORT's 0 there is its own overflow: dvm is exact."""
    x = np.array([row], np.float32)
    n = x.shape[1]
    inits = [numpy_helper.from_array(np.ones(n, np.float32), "g"), numpy_helper.from_array(np.zeros(n, np.float32), "b")]
    got, want = one_node_both(tmp_path, helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1), x,
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
    got, want = one_node_both(tmp_path, helper.make_node(op, ["x", "axes"], ["y"], keepdims=1),
                              np.zeros(shape, np.float32), inits=[axes])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape,axis", [((0, 0), 1), ((0, 0), 0), ((0, 3), 1)])
def test_argreduce_of_an_empty_input(tmp_path, op, shape, axis):
    got, want = one_node_both(tmp_path, helper.make_node(op, ["x"], ["y"], axis=axis), np.zeros(shape, np.float32),
                              out_type=I64)
    assert got.size == 0
