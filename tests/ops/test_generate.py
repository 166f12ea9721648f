"""Generator kernels (nonzero, range, constant_of_shape) and their shape
functions against NumPy, through the whole stack, and against the ONNX
backend node tests."""
import numpy as np
import pytest

from dvmop import DvmError, run, run_model
from test_movement import ALL, node_case, node_tests, rand_any, run0

rng = np.random.default_rng(1)


# ---- nonzero ----

def sparse(shape, dtype, density=0.3):
    x = rand_any(shape, dtype)
    return np.where(rng.random(shape) < density, x, np.zeros((), dtype))


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (1, 13, 1), (0,), (4, 0, 2),
                                   (2, 3, 1, 2, 3, 2), (65, 257), (300, 1000)])
def test_nonzero(shape):
    x = sparse(shape, np.float32)
    got = run0("nonzero", [x], out_dtypes=[np.int64])
    np.testing.assert_array_equal(got, np.array(np.nonzero(x)).reshape(len(shape), -1))


@pytest.mark.parametrize("dtype", ALL)
def test_nonzero_dtypes(dtype):
    x = sparse((5, 7), dtype, 0.5)
    got = run0("nonzero", [x], out_dtypes=[np.int64])
    np.testing.assert_array_equal(got, np.array(np.nonzero(x)))


def test_nonzero_floats():
    # -0.0 is zero, NaN and the smallest subnormals are not
    for dt in (np.float16, np.float32, np.float64):
        tiny = np.finfo(dt).smallest_subnormal
        x = np.array([0.0, -0.0, np.nan, tiny, -tiny, 1.0, -np.inf], dt)
        got = run0("nonzero", [x], out_dtypes=[np.int64])
        np.testing.assert_array_equal(got, [[2, 3, 4, 5, 6]])


def test_nonzero_scalar():
    # the output has rank(x) rows: none for a scalar
    for v, n in ((3.0, 1), (0.0, 0)):
        got = run0("nonzero", [np.array(v, np.float32)], out_dtypes=[np.int64])
        assert got.shape == (0, n)


def test_nonzero_all_and_none():
    x = np.ones((3, 70000), np.int8)
    np.testing.assert_array_equal(run0("nonzero", [x], out_dtypes=[np.int64]),
                                  np.array(np.nonzero(x)))
    assert run0("nonzero", [x * 0], out_dtypes=[np.int64]).shape == (2, 0)


def test_nonzero_errors():
    x = np.array([1, 0, 2], np.int32)
    with pytest.raises(DvmError, match=r"nonzero: output is i32, want i64"):
        run0("nonzero", [x], outputs=[(np.int32, (1, 2))])
    with pytest.raises(DvmError, match=r"nonzero: output 0 has shape \[1,3\], want \[1,2\]"):
        run0("nonzero", [x], outputs=[(np.int64, (1, 3))])


# ---- range ----

@pytest.mark.parametrize("start,limit,delta", [
    (0, 10, 1), (3, 1, -1), (1, 5, 2), (1, 6, 2), (10, 4, -3), (5, 5, 1), (5, 1, 1), (1, 5, -1),
    (-7, 20, 4), (0, 100000, 1), (0, 1, 1),
])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64, np.float32, np.float64])
def test_range(start, limit, delta, dtype):
    if dtype == np.int16 and limit > 30000:
        limit = 30000
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    got = run0("range", args)
    want = np.arange(start, limit, delta, dtype=np.float64).astype(dtype)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("start,limit,delta", [(0.5, 3.7, 0.4), (1.0, -2.0, -0.25),
                                               (0.0, 1.0, 0.1), (1e-3, 2e-3, 1e-4)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_range_fractions(start, limit, delta, dtype):
    args = [np.array(v, dtype) for v in (start, limit, delta)]
    got = run0("range", args)
    s, l, d = (float(a) for a in args)
    want = np.arange(s, l, d)  # numpy reads the values as the dtype holds them
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=1e-6)


def test_range_int64_extremes():
    big = 2**62
    args = [np.array(v, np.int64) for v in (-big, big, big // 2)]
    np.testing.assert_array_equal(run0("range", args), [-big, -big // 2, 0, big // 2])
    args = [np.array(v, np.int64) for v in (2**63 - 3, -2**63, -2**63)]
    np.testing.assert_array_equal(run0("range", args), [2**63 - 3, -3])


def test_range_errors():
    f = lambda *v: [np.array(x, np.float32) for x in v]
    with pytest.raises(DvmError, match=r"range: delta is 0"):
        run0("range", f(0, 1, 0))
    with pytest.raises(DvmError, match=r"range: start 0, limit inf and delta 1 are not all finite"):
        run0("range", f(0, np.inf, 1))
    with pytest.raises(DvmError, match=r"range: input 1 \(limit\) is f64, start is f32"):
        run0("range", [np.array(0, np.float32), np.array(1.0), np.array(1, np.float32)])
    with pytest.raises(DvmError, match=r"range: input 2 \(delta\) has shape \[2\], want one"):
        run0("range", [np.array(0, np.int64), np.array(5, np.int64), np.array([1, 2])])
    with pytest.raises(DvmError, match=r"range: dtype u8: want f32, f64, f16, bf16, i16, i32 or"):
        run0("range", [np.array(v, np.uint8) for v in (0, 5, 1)])
    with pytest.raises(DvmError, match=r"range: start 0, limit 9\.2\d*e\+18 and delta 1 give too"):
        run0("range", [np.array(v, np.int64) for v in (0, 2**63 - 1, 1)])


# ---- constant_of_shape ----

@pytest.mark.parametrize("shape", [(4, 3, 2), (), (0,), (7, 0), (1,) * 8, (65, 257)])
@pytest.mark.parametrize("dtype,value", [
    (np.float32, 1.5), (np.float32, 0), (np.float64, -2.25), (np.float16, 0.1), (np.int32, 7),
    (np.int64, -2**62), (np.int8, -128), (np.uint8, 255.0), (np.int16, 300), (np.bool_, 1),
])
def test_constant_of_shape(shape, dtype, value):
    got = run0("constant_of_shape", [np.array(shape, np.int64)], [value], out_dtypes=[dtype])
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, np.full(shape, value, dtype))


def test_constant_of_shape_default():
    got = run0("constant_of_shape", [np.array([2, 3], np.int32)], out_dtypes=[np.float32])
    np.testing.assert_array_equal(got, np.zeros((2, 3), np.float32))


def test_constant_of_shape_errors():
    shape = np.array([2, 3], np.int64)
    with pytest.raises(DvmError, match=r"constant_of_shape: value 300 does not fit i8"):
        run0("constant_of_shape", [shape], [300], out_dtypes=[np.int8])
    with pytest.raises(DvmError, match=r"constant_of_shape: value 2\.5 is not an integer of i32"):
        run0("constant_of_shape", [shape], [2.5], out_dtypes=[np.int32])
    with pytest.raises(DvmError, match=r"constant_of_shape: shape \[2,-3\] has a negative dim"):
        run0("constant_of_shape", [np.array([2, -3])], [1], out_dtypes=[np.int32])
    with pytest.raises(DvmError, match=r"constant_of_shape: input 0 \(shape\) has shape \[1,2\], "
                                       r"expected rank 0 or 1"):
        run0("constant_of_shape", [shape.reshape(1, 2)], [1], out_dtypes=[np.int32])


@pytest.mark.parametrize("shape", [(0,), (1,), (7, 3), (), (13, 0, 2), (65, 257)])
@pytest.mark.parametrize("dtype,value,want", [
    (np.float16, 0, 0.0), (np.float16, -3, -3.0), (np.float16, 2049, 2048.0), (np.float16, 70000, np.inf),
    (np.float16, 0.5, 0.5), (np.float32, 7, 7.0), (np.float64, -2.5, -2.5), (np.int8, 300, 44),
    (np.int64, -2**62, -2**62), (np.uint16, -1, 65535), (np.bool_, 2, True), (np.bool_, 0, False),
])
def test_fill(shape, dtype, value, want):
    """fill (ops/cpu/shape.c: Loop's counters, Scan 8's zero padding,
    Dropout's mask): every element the value converted as C converts, f16
    rounded to nearest even through f32."""
    got = run("fill", [], [value], outputs=[(dtype, shape)])[0]
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, np.full(shape, want, dtype))


CONSTANT_VALUES = [  # (ONNX dtype, NumPy dtype of the f32 or own output, value)
    ("FLOAT16", np.float16, 0.1), ("FLOAT16", np.float16, -0.0), ("FLOAT16", np.float16, 65504.0),
    ("FLOAT16", np.float16, 6e-8), ("FLOAT16", np.float16, np.inf), ("FLOAT16", np.float16, np.nan),
    ("BFLOAT16", np.float32, 3.14159), ("BFLOAT16", np.float32, -1e30), ("BFLOAT16", np.float32, -np.inf),
    ("BFLOAT16", np.float32, np.nan), ("INT16", np.int16, -300), ("UINT16", np.uint16, 65535),
    ("UINT32", np.uint32, 4000000000), ("UINT64", np.uint64, 2**63 - 1), ("DOUBLE", np.float64, 0.1),
]


@pytest.mark.parametrize("onnx_dtype,np_dtype,value", CONSTANT_VALUES)
def test_constant_of_shape_model(onnx_dtype, np_dtype, value):
    """ConstantOfShape compiled from a model, its value of each dtype (f16
    and bf16 included; bf16 read back through a Cast to f32), at shapes with
    a 0 dim, of 1, primes and a scalar: ONNX Runtime's values, bit for bit."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    dt = getattr(TensorProto, onnx_dtype)
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("value", dt, [1], [value]))]
    out_dt = dt
    if onnx_dtype == "BFLOAT16":
        nodes.append(helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT))
        out_dt = TensorProto.FLOAT
    else:
        nodes.append(helper.make_node("Identity", ["c"], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("s", TensorProto.INT64, [None])],
                          [helper.make_tensor_value_info("y", out_dt, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=9)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in [(0,), (1,), (7, 3), (13, 0, 2), (), (1, 1, 5)]:
        s = np.array(shape, np.int64)
        got, want = run_model(model, {"s": s})[0], sess.run(None, {"s": s})[0]
        assert got.dtype == want.dtype == np_dtype and got.shape == want.shape == shape
        assert got.tobytes() == want.tobytes() or (np.isnan(value) and np.isnan(got).all())


def test_constant_of_shape_u64_too_large():
    """A u64 value the kernel's int64 attribute cannot hold: refused when
    compiled, naming the node."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    value = helper.make_tensor("value", TensorProto.UINT64, [1], [2**63])
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], value=value, name="cos")], "g",
                          [helper.make_tensor_value_info("s", TensorProto.INT64, [None])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT64, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=9)
    with pytest.raises(DvmError, match=r'node "cos" \(ConstantOfShape.*u64 above 2\^63 - 1 is not supported'):
        run_model(model, {"s": np.array([2], np.int64)})


# ---- the ONNX backend node tests ----

@pytest.mark.parametrize("name,op", node_tests({"NonZero", "Range", "ConstantOfShape"}))
def test_onnx_node(name, op):
    from onnx import numpy_helper
    node, attrs, ins, want = node_case(name)
    if op == "NonZero":
        got = run0("nonzero", ins, out_dtypes=[np.int64])
    elif op == "Range":
        got = run0("range", ins)
    else:
        v = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
        value = float(v.item()) if v.dtype.kind == "f" else int(v.item())
        got = run0("constant_of_shape", ins, [value], out_dtypes=[v.dtype])
    w = want[0]
    assert got.dtype == w.dtype and got.shape == w.shape
    np.testing.assert_allclose(got, w, rtol=1e-3, atol=1e-4)
