"""The unsigned dtypes u16, u32, u64 end to end (ONNX import, the
elementwise, comparison, bitwise and shift kernels, Where, Cast), BitCast,
Mean and Cast's saturate, through `dvm compile` and `dvm run`, against ONNX
Runtime at awkward shapes (0-size dims, 1, primes, broadcasting) and values
near the types' limits (u64 above 2^63, u32 and u16 wraparound)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper  # noqa: E402
from dvmtest.cli import DvmError, compile_onnx, run_module  # noqa: E402
from dvmtest.compare import ort_outputs  # noqa: E402
from dvmtest.onnxmodel import save_model  # noqa: E402

rng = np.random.default_rng(13)

ONNX_OF = {np.dtype(k): v for k, v in [(np.uint8, T.UINT8), (np.uint16, T.UINT16), (np.uint32, T.UINT32),
                                       (np.uint64, T.UINT64), (np.int8, T.INT8), (np.int16, T.INT16),
                                       (np.int32, T.INT32), (np.int64, T.INT64), (np.float16, T.FLOAT16),
                                       (np.float32, T.FLOAT), (np.float64, T.DOUBLE), (np.bool_, T.BOOL)]}
UINTS = [np.uint16, np.uint32, np.uint64]


def unsigned_model(tmp, nodes, feeds, nout=1, opset=21, name="m.onnx"):
    ins = [helper.make_tensor_value_info(k, ONNX_OF[v.dtype], list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_value_info(f"y{i}", onnx.TypeProto()) for i in range(nout)]
    m = helper.make_model(helper.make_graph(nodes, "g", ins, outs), opset_imports=[helper.make_opsetid("", opset)],
                          ir_version=10)
    try:  # output types, which ONNX Runtime wants
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    except Exception:  # an invalid model, for the refusal tests: saved as it is
        pass
    return save_model(m, tmp / name)


def compile_and_run(path, feeds, nout=1):
    """dvm's outputs, or (exit code, stderr) when compiling or running fails."""
    try:
        return run_module(compile_onnx(path), feeds, nout)
    except DvmError as e:
        return e.rc, e.message


def check_unsigned(tmp, nodes, feeds, nout=1, opset=21, ref=None):
    """dvm against ONNX Runtime, or where ONNX Runtime has no kernel for the
    dtype (Min of u16, Where of u32), against `ref` (NumPy)."""
    path = unsigned_model(tmp, nodes, feeds, nout, opset)
    got = compile_and_run(path, feeds, nout)
    assert isinstance(got, list), got[1]
    try:
        want = ort_outputs(path, feeds)
    except Exception as e:  # NOT_IMPLEMENTED
        if ref is None or "NOT_IMPLEMENTED" not in str(e):
            raise
        want = ref()
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6 if w.dtype != np.float16 else 1e-3)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def full_range(dtype, shape, lo=0):
    """Integers over the whole range, the limits among them."""
    info = np.iinfo(dtype)
    x = rng.integers(lo, info.max, shape, dtype=dtype, endpoint=True)
    edges = np.array([info.max, lo, info.max - 1, info.max // 2 + 1, 1], dtype)
    x.flat[: min(x.size, edges.size)] = edges[: x.size]
    return x


# broadcast pairs: 0-size, 1, primes, scalars and ranks that differ
SHAPES = [((0, 3), (3,)), ((1,), ()), ((7,), (7,)), ((3, 1, 5), (1, 13, 1)), ((), (11,)), ((2, 3), (1, 3))]
NUMPY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.floor_divide, "Mod": np.mod,
         "Min": np.minimum, "Max": np.maximum, "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
         "BitwiseXor": np.bitwise_xor, "Equal": np.equal, "Less": np.less, "Greater": np.greater,
         "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


@pytest.mark.parametrize("dtype", UINTS)
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_and_compare(tmp_path, dtype, sa, sb):
    x, y = full_range(dtype, sa), full_range(dtype, sb, lo=1)  # no zero divisor: ONNX Runtime has it undefined
    y.flat[-1:] = x.flat[:1] if x.size else y.flat[-1:]  # equal elements for the comparisons
    for op, ref in NUMPY.items():  # one op a model: ONNX Runtime lacks some (Min of u16)
        with np.errstate(all="ignore"):
            check_unsigned(tmp_path, [helper.make_node(op, ["x", "y"], ["y0"])], {"x": x, "y": y},
                           ref=lambda: [ref(x, y)])


@pytest.mark.parametrize("dtype", UINTS)
def test_shift_not_where(tmp_path, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = full_range(dtype, (3, 1, 7))
    s = rng.integers(0, bits, (5, 1), dtype=dtype)
    c = rng.integers(0, 2, (5, 7)).astype(np.bool_)
    nodes = [helper.make_node("BitShift", ["x", "s"], ["y0"], direction="LEFT"),
             helper.make_node("BitShift", ["x", "s"], ["y1"], direction="RIGHT"),
             helper.make_node("BitwiseNot", ["x"], ["y2"])]
    check_unsigned(tmp_path, nodes, {"x": x, "s": s}, 3)
    check_unsigned(tmp_path, [helper.make_node("Where", ["c", "x", "s"], ["y0"])], {"x": x, "s": s, "c": c},
                   ref=lambda: [np.where(c, x, s)])


@pytest.mark.parametrize("dtype", UINTS)
def test_movement(tmp_path, dtype):
    """Data movement is by size: Concat, Reshape, Transpose, Gather, Slice."""
    x = full_range(dtype, (2, 3, 5))
    idx = np.array([2, 0, 2], np.int64)
    shape = np.array([5, -1], np.int64)
    nodes = [helper.make_node("Concat", ["x", "x"], ["y0"], axis=1),
             helper.make_node("Reshape", ["x", "shape"], ["y1"]),
             helper.make_node("Transpose", ["x"], ["y2"], perm=[2, 0, 1]),
             helper.make_node("Gather", ["x", "idx"], ["y3"], axis=1)]
    check_unsigned(tmp_path, nodes, {"x": x, "idx": idx, "shape": shape}, 4)


def test_division_by_zero_is_an_error(tmp_path):
    """ONNX Runtime's integer division by zero is undefined (a crash): dvm fails the run, naming it."""
    feeds = {"x": np.array([1, 2, 3], np.uint32), "y": np.array([1, 0, 1], np.uint32)}
    rc, err = compile_and_run(unsigned_model(tmp_path, [helper.make_node("Div", ["x", "y"], ["y0"])], feeds), feeds)
    assert rc != 0 and "integer division by zero (divisor element 1)" in err


@pytest.mark.parametrize("src", UINTS + [np.int64])
@pytest.mark.parametrize("to", [T.FLOAT, T.DOUBLE, T.FLOAT16, T.UINT8, T.INT32, T.UINT64, T.UINT16, T.BOOL])
def test_cast_from_integers(tmp_path, src, to):
    x = full_range(src, (37,)) if src != np.int64 else rng.integers(-2**63, 2**63 - 1, 37, dtype=np.int64)
    x[:3] = [0, 2**53 + 1, 2**31] if src in (np.uint64, np.int64) else x[:3]
    check_unsigned(tmp_path, [helper.make_node("Cast", ["x"], ["y0"], to=to)], {"x": x})


@pytest.mark.parametrize("src", [np.float32, np.float64])
@pytest.mark.parametrize("to", [T.UINT16, T.UINT32, T.UINT64])
def test_cast_float_to_unsigned_in_range(tmp_path, src, to):
    top = {T.UINT16: 65535.0, T.UINT32: 4294967040.0, T.UINT64: 1.8e19}[to]
    x = (rng.random(41) * top).astype(src)
    x[:4] = [0.0, 0.99, top, 2.0**63 if to == T.UINT64 else 7.5]
    check_unsigned(tmp_path, [helper.make_node("Cast", ["x"], ["y0"], to=to)], {"x": x})


@pytest.mark.parametrize("opset", [19, 21, 25])
@pytest.mark.parametrize("to", [T.FLOAT16, T.DOUBLE, T.UINT32])
def test_cast_saturate_accepted(tmp_path, opset, to):
    """saturate only matters for float8 targets (dvm has none): accepted, either value, and ignored."""
    x = (rng.standard_normal(13) * 1e5).astype(np.float32)
    x = np.abs(x) if to == T.UINT32 else x
    like = np.zeros(1, helper.tensor_dtype_to_np_dtype(to))
    plain = check_unsigned(tmp_path, [helper.make_node("Cast", ["x"], ["y0"], to=to),
                                      helper.make_node("CastLike", ["x", "like"], ["y1"])],
                           {"x": x, "like": like}, 2, opset)
    nodes = [helper.make_node("Cast", ["x"], ["y0"], to=to, saturate=1),
             helper.make_node("CastLike", ["x", "like"], ["y1"], saturate=1)]
    check_unsigned(tmp_path, nodes, {"x": x, "like": like}, 2, opset)
    # ONNX Runtime refuses saturate 0 where the target is not float8; the spec ignores it there
    nodes = [helper.make_node("Cast", ["x"], ["y0"], to=to, saturate=0),
             helper.make_node("CastLike", ["x", "like"], ["y1"], saturate=0)]
    feeds = {"x": x, "like": like}
    got = compile_and_run(unsigned_model(tmp_path, nodes, feeds, 2, opset), feeds, 2)
    for g, p in zip(got, plain, strict=True):
        np.testing.assert_array_equal(g, p)


def test_cast_to_float8_is_refused(tmp_path):
    feeds = {"x": np.zeros(3, np.float32)}
    nodes = [helper.make_node("Cast", ["x"], ["f8"], to=T.FLOAT8E4M3FN, saturate=1),
             helper.make_node("Cast", ["f8"], ["y0"], to=T.FLOAT)]
    rc, err = compile_and_run(unsigned_model(tmp_path, nodes, feeds), feeds)
    assert rc == 2 and "FLOAT8E4M3FN" in err, err


BITCASTS = [(np.float32, T.INT32), (np.int32, T.FLOAT), (np.float64, T.INT64), (np.uint64, T.DOUBLE),
            (np.uint64, T.INT64), (np.float16, T.UINT16), (np.uint16, T.INT16), (np.int8, T.UINT8),
            (np.uint32, T.FLOAT), (np.bool_, T.BOOL)]


@pytest.mark.parametrize("src,to", BITCASTS)
@pytest.mark.parametrize("shape", [(), (0, 3), (1,), (7, 13)])
def test_bitcast(tmp_path, src, to, shape):
    n = int(np.prod(shape))
    x = np.frombuffer(rng.bytes(n * np.dtype(src).itemsize), src).reshape(shape).copy()
    if src == np.bool_:
        x = rng.integers(0, 2, shape).astype(np.bool_)
    ty = helper.tensor_dtype_to_np_dtype(to)
    # NaN bit patterns compare unequal; keep them out of both sides
    if np.dtype(src).kind == "f":
        x[np.isnan(x)] = 1
    if np.dtype(ty).kind == "f":
        x[np.isnan(x.reshape(-1).view(ty)).reshape(shape)] = 1
    got = check_unsigned(tmp_path, [helper.make_node("BitCast", ["x"], ["y0"], to=to)], {"x": x}, opset=26,
                         ref=lambda: [x.reshape(-1).view(ty).reshape(shape)])[0]
    assert got.tobytes() == x.tobytes()


@pytest.mark.parametrize("src,to,why", [(np.int32, T.INT64, "differ in width"),
                                         (np.uint8, T.BOOL, "to bool is not supported")])
def test_bitcast_refused(tmp_path, src, to, why):
    feeds = {"x": np.zeros(3, src)}
    path = unsigned_model(tmp_path, [helper.make_node("BitCast", ["x"], ["y0"], to=to)], feeds, opset=26)
    rc, err = compile_and_run(path, feeds)
    assert rc != 0 and why in err and "BitCast" in err, err


MEAN_SHAPES = [[(3,)], [(2, 3), (3,)], [(5, 1, 3), (1, 7, 1), (7, 3)], [(0, 3), (1,), (3,)],
               [(), (11,), (1, 11), (13, 1)]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shapes", MEAN_SHAPES)
def test_mean(tmp_path, dtype, shapes):
    feeds = {f"x{i}": rng.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}
    want = sum(v.astype(np.float64) for v in feeds.values()) / len(feeds)
    check_unsigned(tmp_path, [helper.make_node("Mean", list(feeds), ["y0"])], feeds, opset=13,
                   ref=lambda: [np.asarray(want.astype(dtype))])


def test_mean_of_integers_is_refused(tmp_path):
    feeds = {"a": np.zeros(3, np.int32), "b": np.zeros(3, np.int32)}
    path = unsigned_model(tmp_path, [helper.make_node("Mean", ["a", "b"], ["y0"])], feeds, opset=13)
    rc, err = compile_and_run(path, feeds)
    assert rc == 2 and "Mean" in err and "i32" in err, err
