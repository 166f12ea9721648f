"""reduce_*, argmax/argmin, cumsum and topk against NumPy, through the whole
stack, plus the ONNX backend node tests of ReduceSum/Mean/Max, ArgMax,
CumSum and TopK."""
import numpy as np
import pytest

from dvmop import DvmError, Shape, run, run1
from test_matmul import BF16, load_node, matmul_node_cases, run_bf16

rng = np.random.default_rng(1)


def rand_reduce(shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-9, 10, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dtype)


# ---- reduce_* ---------------------------------------------------------------

REFS = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
        "reduce_min": np.min, "reduce_prod": np.prod}
EPS = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12, np.dtype(np.float16): 2e-3,
       BF16: 1.6e-2}


def reduce_ref(op, x, axes, keepdims):
    wide = x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == BF16 else x
    out = REFS[op](wide, axis=tuple(axes) if axes else None, keepdims=bool(keepdims))
    return np.asarray(out)


def check_reduce(got, want, dtype, n=1):
    assert got.shape == want.shape
    if np.dtype(dtype).kind in "iub":
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        tol = EPS[np.dtype(dtype)] * (4 + np.sqrt(n)) * max(1.0, float(np.nanmax(np.abs(want), initial=0)))
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=EPS[np.dtype(dtype)] * 4, atol=tol)


CASES = [((7,), ()), ((7,), (0,)), ((3, 4, 5), ()), ((3, 4, 5), (0,)), ((3, 4, 5), (1,)),
         ((3, 4, 5), (2,)), ((3, 4, 5), (0, 2)), ((3, 4, 5), (2, 0)), ((3, 4, 5), (0, 1, 2)),
         ((2, 3, 4, 5), (1, 3)), ((2, 3, 4, 5), (0, 2, 3)), ((1, 13, 1, 7), (0, 1)),
         ((1, 13, 1, 7), (2,)), ((257, 31), (0,)), ((257, 31), (1,)), ((2, 65, 3), (1,)),
         ((64, 1025), (1,)), ((1025, 64), (0,)), ((8, 257, 33), (1,))]


@pytest.mark.parametrize("op", list(REFS))
@pytest.mark.parametrize("shape,axes", CASES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_f32(op, shape, axes, keepdims):
    x = rand_reduce(shape) * (0.5 if op == "reduce_prod" else 1.0) + (1.0 if op == "reduce_prod" else 0.0)
    got = run1(op, [x], [Shape(axes), keepdims, 0], shapefn="reduce")
    n = int(np.prod([shape[a] for a in axes])) if axes else x.size
    check_reduce(got, reduce_ref(op, x, axes, keepdims), np.float32, n)


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in REFS for dt in
                                      [np.float64, np.float16, np.int32, np.int64, np.uint32,
                                       np.uint64, np.bool_]
                                      if (op != "reduce_mean" or dt in (np.float64, np.float16))
                                      and (dt != np.bool_ or op in ("reduce_max", "reduce_min"))])
@pytest.mark.parametrize("shape,axes", [((3, 4, 5), (1,)), ((2, 3, 4, 5), (1, 3)), ((65, 31), ())])
def test_reduce_dtypes(op, dtype, shape, axes):
    x = rand_reduce(shape, dtype)
    if op == "reduce_prod" and np.dtype(dtype).kind == "f":
        x = (x * 0.1 + 1).astype(dtype)
    got = run1(op, [x], [Shape(axes), 1, 0], shapefn="reduce")
    assert got.dtype == dtype
    check_reduce(got, reduce_ref(op, x, axes, 1), dtype, x.size)


def test_reduce_int_wraps():
    x = np.array([2**62, 2**62, 2**62], np.int64)
    assert run1("reduce_sum", [x], [Shape(()), 0, 0], shapefn="reduce") == np.sum(x)
    assert run1("reduce_prod", [x], [Shape(()), 0, 0], shapefn="reduce") == np.prod(x)
    # unsigned: u64 above 2^63 compares as unsigned; u32 sums wrap at 2^32
    u = np.array([2**63 + 5, 3, 2**64 - 1, 2**63], np.uint64)
    for op, want in [("reduce_max", 2**64 - 1), ("reduce_min", 3), ("reduce_sum", sum(map(int, u)) % 2**64)]:
        assert int(run1(op, [u], [Shape(()), 0, 0], shapefn="reduce")) == want, op
    w = np.array([2**32 - 1, 2, 2**31], np.uint32)
    assert int(run1("reduce_sum", [w], [Shape(()), 0, 0], shapefn="reduce")) == (2**32 + 1 + 2**31) % 2**32
    assert run1("reduce_max", [np.zeros((2, 0), np.uint64)], [Shape((1,)), 0, 0], shapefn="reduce").tolist() == [0, 0]
    assert run1("reduce_min", [np.zeros((2, 0), np.uint32)], [Shape((1,)), 0, 0],
                shapefn="reduce").tolist() == [2**32 - 1] * 2
    np.testing.assert_array_equal(run1("argmax", [u], [0, 0, 0], shapefn="argreduce", out_dtypes=[np.int64]), 2)


def _logsumexp(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True) if x.size else np.zeros([1] * x.ndim)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else tuple(range(x.ndim)))


# The sums of a mapped input (ops/cpu/reduce.c), on float64 references.
MAPPED = {"reduce_l1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
          "reduce_l2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
          "reduce_sum_square": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
          "reduce_log_sum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
          "reduce_log_sum_exp": _logsumexp}
MAPPED_CASES = [((7,), ()), ((1,), (0,)), ((3, 4, 5), (0, 2)), ((3, 4, 5), (1,)), ((2, 3, 4, 5), (1, 3)),
                ((1, 13, 1, 7), (0, 1)), ((257, 31), (0,)), ((8, 257, 33), (1,)), ((3, 0, 2), (1,)),
                ((3, 0, 2), (0,))]


@pytest.mark.parametrize("op", list(MAPPED))
@pytest.mark.parametrize("shape,axes", MAPPED_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_reduce_mapped(op, shape, axes, dtype):
    x = rand_reduce(shape, dtype)
    if op == "reduce_log_sum":
        x = np.abs(x) + np.asarray(0.1, dtype)
    keepdims = len(axes) % 2
    with np.errstate(divide="ignore"):
        want = np.asarray(MAPPED[op](x.astype(np.float64), tuple(axes) if axes else None, bool(keepdims)))
    got = run1(op, [x], [Shape(axes), keepdims, 0], shapefn="reduce")
    assert got.dtype == dtype
    n = int(np.prod([shape[a] for a in axes])) if axes else x.size
    check_reduce(got, want, dtype, n)


def test_reduce_log_sum_exp_large():
    """m + log sum exp(x - m): no overflow where exp(x) alone would."""
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], np.float32)
    got = run1("reduce_log_sum_exp", [x], [Shape((1,)), 0, 0], shapefn="reduce")
    np.testing.assert_allclose(got, [1000 + np.log(2), -np.inf], rtol=1e-6)
    with pytest.raises(DvmError, match="want one of f32"):
        run1("reduce_l1", [np.ones((2, 2), np.int32)], [Shape((1,)), 0, 0], shapefn="reduce")


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_prod"])
def test_reduce_bf16(op):
    x = (rand_reduce((3, 5, 7)) * 0.3 + 1).astype(BF16)
    want = reduce_ref(op, x, (1,), 1)
    (got,) = run_bf16(op, [x], [Shape((1,)), 1, 0], [(BF16, want.shape)])
    check_reduce(got, want, BF16, 5)


@pytest.mark.parametrize("op,want", [("reduce_sum", 0.0), ("reduce_prod", 1.0),
                                     ("reduce_max", -np.inf), ("reduce_min", np.inf),
                                     ("reduce_mean", 0.0)])
def test_reduce_empty(op, want):
    """ONNX says 0, 1, -inf and +inf; the mean is undefined there, 0 in ONNX Runtime
    (issue 18; tests/models/test_edges.py checks the same against ORT)."""
    x = np.zeros((2, 0, 4), np.float32)
    got = run1(op, [x], [Shape((1,)), 1, 0], shapefn="reduce")
    np.testing.assert_array_equal(got, np.full((2, 1, 4), want, np.float32))
    xi = np.zeros((2, 0), np.int64)
    if op == "reduce_max":
        assert (run1(op, [xi], [Shape((1,)), 0, 0], shapefn="reduce") == np.iinfo(np.int64).min).all()
    assert run1(op, [x], [Shape((0,)), 0, 0], shapefn="reduce").shape == (0, 4)


def test_reduce_noop():
    x = rand_reduce((3, 4))
    np.testing.assert_array_equal(run1("reduce_sum", [x], [Shape(()), 1, 1], shapefn="reduce"), x)
    np.testing.assert_array_equal(run1("reduce_max", [x], [Shape(()), 0, 1], shapefn="reduce"), x)


def test_reduce_nan():
    x = rand_reduce((3, 40))
    x[1, 17] = np.nan
    for op in ["reduce_max", "reduce_min", "reduce_sum"]:
        got = run1(op, [x], [Shape((1,)), 0, 0], shapefn="reduce")
        assert np.isnan(got[1]) and not np.isnan(got[[0, 2]]).any()


def test_reduce_errors():
    x = rand_reduce((3, 4))
    with pytest.raises(DvmError, match=r"reduce: axis 1 is repeated in axes"):
        run1("reduce_sum", [x], [Shape((1, 1)), 1, 0], shapefn="reduce")
    with pytest.raises(DvmError, match=r"reduce: axis 2 is out of range for rank 2"):
        run1("reduce_sum", [x], [Shape((2,)), 1, 0], shapefn="reduce")
    with pytest.raises(DvmError, match=r"reduce_mean: dtypes i64 -> i64: want one of f32, f16, bf16, f64"):
        run1("reduce_mean", [np.ones((3, 4), np.int64)], [Shape((1,)), 1, 0], shapefn="reduce")
    with pytest.raises(DvmError, match=r"reduce_sum: output \[3\] != \[3,1\], the shape it must have"):
        run1("reduce_sum", [x], [Shape((1,)), 1, 0], outputs=[(np.float32, (3,))])
    with pytest.raises(DvmError, match=r"reduce_sum: keepdims must be 0 or 1, got 2"):
        run1("reduce_sum", [x], [Shape((1,)), 2, 0], outputs=[(np.float32, (3,))])
    with pytest.raises(DvmError, match=r"reduce_sum: takes 3 attributes, got 2"):
        run1("reduce_sum", [x], [Shape((1,)), 1], outputs=[(np.float32, (3, 1))])


# ---- argmax, argmin ---------------------------------------------------------

def arg_ref(op, x, axis, keepdims, last):
    f = np.argmax if op == "argmax" else np.argmin
    if last:
        r = x.shape[axis] - 1 - f(np.flip(x, axis), axis=axis)
    else:
        r = f(x, axis=axis)
    return np.expand_dims(r, axis) if keepdims else r


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0),
                                        ((2, 65, 3), -2), ((64, 1025), 1), ((1, 1), 0)])
@pytest.mark.parametrize("keepdims,last", [(0, 0), (1, 0), (1, 1)])
def test_argreduce(op, shape, axis, keepdims, last):
    x = rng.integers(0, 4, shape).astype(np.float32)  # ties
    got = run1(op, [x], [axis, keepdims, last], shapefn="argreduce", out_dtypes=[np.int64])
    np.testing.assert_array_equal(got, arg_ref(op, x, axis, keepdims, last))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint32, np.uint64])
def test_argreduce_dtypes(dtype):
    x = rand_reduce((5, 13), dtype)
    for op in ["argmax", "argmin"]:
        got = run1(op, [x], [1, 0, 1], shapefn="argreduce", out_dtypes=[np.int64])
        np.testing.assert_array_equal(got, arg_ref(op, x, 1, 0, 1))


def test_argreduce_bf16():
    x = rand_reduce((5, 13)).astype(BF16)
    (got,) = run_bf16("argmax", [x], [0, 1, 0], [(np.int64, (1, 13))])
    np.testing.assert_array_equal(got, arg_ref("argmax", x.astype(np.float32), 0, 1, 0))


def test_argreduce_nan():
    x = np.array([[1, np.nan, 3, np.nan], [1, 2, 3, 0]], np.float32)
    np.testing.assert_array_equal(run1("argmax", [x], [1, 0, 0], shapefn="argreduce",
                                       out_dtypes=[np.int64]), [1, 2])
    np.testing.assert_array_equal(run1("argmin", [x], [1, 0, 0], shapefn="argreduce",
                                       out_dtypes=[np.int64]), [1, 3])


def test_argreduce_empty_output():
    """An empty axis needs no index when the output is empty too (issue 18)."""
    for op in ("argmax", "argmin"):
        for shape, axis, out in [((0, 0), 1, (0, 1)), ((0, 0), 0, (1, 0)), ((0, 3), 1, (0, 1))]:
            got = run1(op, [np.zeros(shape, np.float32)], [axis, 1, 0], shapefn="argreduce",
                       out_dtypes=[np.int64])
            assert got.shape == out and got.dtype == np.int64


def test_argreduce_errors():
    with pytest.raises(DvmError, match=r"argreduce: axis 0 is empty: no index to return"):
        run1("argmax", [np.zeros((0, 3), np.float32)], [0, 0, 0], shapefn="argreduce",
             out_dtypes=[np.int64])
    with pytest.raises(DvmError, match=r"argreduce: axis 1 is empty: no index to return"):
        run1("argmax", [np.zeros((3, 0), np.float32)], [1, 0, 0], shapefn="argreduce",
             out_dtypes=[np.int64])
    with pytest.raises(DvmError, match=r"argmax: axis 1 is empty"):
        run1("argmax", [np.zeros((3, 0), np.float32)], [1, 0, 0], outputs=[(np.int64, (3,))])
    with pytest.raises(DvmError, match=r"argreduce: axis -3 is out of range for rank 2"):
        run1("argmax", [rand_reduce((3, 4))], [-3, 0, 0], shapefn="argreduce", out_dtypes=[np.int64])
    with pytest.raises(DvmError, match=r"argmin: dtypes f32 -> f32: want f32, f64, f16, bf16, i32 or i64 -> i64"):
        run1("argmin", [rand_reduce((3, 4))], [0, 0, 0], outputs=[(np.float32, (4,))])


# ---- cumsum -----------------------------------------------------------------

def cumsum_ref(x, axis, exclusive, reverse):
    w = x.astype(np.float64) if x.dtype.kind == "f" else x
    if reverse:
        w = np.flip(w, axis)
    r = np.cumsum(w, axis=axis)
    if exclusive:
        r = r - w
    return np.flip(r, axis) if reverse else r


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0),
                                        ((1025, 64), 0), ((64, 1025), -1), ((2, 0, 3), 1)])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(shape, axis, exclusive, reverse):
    x = rand_reduce(shape)
    got = run1("cumsum", [x], [axis, exclusive, reverse], outputs=[(np.float32, shape)])
    check_reduce(got, cumsum_ref(x, axis, exclusive, reverse), np.float32, shape[axis] if x.size else 1)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint32, np.uint64])
def test_cumsum_dtypes(dtype):
    x = rand_reduce((4, 13), dtype)
    got = run1("cumsum", [x], [1, 1, 1], outputs=[(dtype, x.shape)])
    assert got.dtype == dtype
    check_reduce(got, cumsum_ref(x, 1, 1, 1), dtype, 13)


def test_cumsum_bf16():
    x = rand_reduce((4, 13)).astype(BF16)
    (got,) = run_bf16("cumsum", [x], [1, 0, 0], [(BF16, x.shape)])
    check_reduce(got, cumsum_ref(x.astype(np.float32), 1, 0, 0), BF16, 13)


def test_cumsum_errors():
    with pytest.raises(DvmError, match=r"cumsum: axis 2 is out of range for rank 2"):
        run1("cumsum", [rand_reduce((3, 4))], [2, 0, 0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"cumsum: output \[4,3\] != \[3,4\]"):
        run1("cumsum", [rand_reduce((3, 4))], [1, 0, 0], outputs=[(np.float32, (4, 3))])
    with pytest.raises(DvmError, match=r"cumsum: dtypes bool -> bool"):
        run1("cumsum", [np.ones((3,), np.bool_)], [0, 0, 0], outputs=[(np.bool_, (3,))])


# ---- topk -------------------------------------------------------------------

def topk_ref(x, k, axis, largest):
    key = x.astype(np.float64)
    key = np.where(np.isnan(key), np.inf, key)  # NaN is the largest
    order = np.argsort(-key if largest else key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis), idx


def topk(x, k, axis, largest, kdtype=np.int64):
    return run("topk", [x, np.array([k], kdtype)], [axis, largest, 1], shapefn="topk",
               out_dtypes=[x.dtype, np.int64], nout=2)


@pytest.mark.parametrize("shape,axis,k", [((7,), 0, 3), ((3, 13, 5), 1, 1), ((3, 13, 5), -1, 5),
                                          ((3, 13, 5), 0, 0), ((64, 1000), 1, 5),
                                          ((257, 31), 0, 31), ((2, 65, 3), -2, 65)])
@pytest.mark.parametrize("largest", [0, 1])
def test_topk(shape, axis, k, largest):
    x = rng.integers(0, 8, shape).astype(np.float32) if k == 1 else rand_reduce(shape)  # ties
    vals, idx = topk(x, k, axis, largest)
    want_v, want_i = topk_ref(x, k, axis, largest)
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(vals, want_v)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64])
def test_topk_dtypes(dtype):
    x = rand_reduce((4, 13), dtype)
    vals, idx = topk(x, 4, 1, 1)
    want_v, want_i = topk_ref(x, 4, 1, 1)
    assert vals.dtype == dtype
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(vals, want_v)


def test_topk_bf16():
    x = rand_reduce((4, 13)).astype(BF16)
    vals, idx = run_bf16("topk", [x, np.array([3], np.int64)], [1, 1, 1],
                         [(BF16, (4, 3)), (np.int64, (4, 3))])
    want_v, want_i = topk_ref(x.astype(np.float32), 3, 1, 1)
    np.testing.assert_array_equal(idx, want_i)
    np.testing.assert_array_equal(vals, want_v)


def test_topk_nan_and_k32():
    x = np.array([[1, np.nan, 3, 2]], np.float32)
    vals, idx = topk(x, 2, 1, 1, np.int32)
    np.testing.assert_array_equal(idx, [[1, 2]])
    vals, idx = topk(x, 2, 1, 0)
    np.testing.assert_array_equal(idx, [[0, 3]])


def test_topk_errors():
    with pytest.raises(DvmError, match=r"topk: k 5 is out of range \[0, 4\]"):
        topk(rand_reduce((3, 4)), 5, 1, 1)
    with pytest.raises(DvmError, match=r"topk: k -1 is out of range"):
        topk(rand_reduce((3, 4)), -1, 1, 1)
    with pytest.raises(DvmError, match=r"topk: k must be one i64 or i32 element, got i64 with 2 elements"):
        run("topk", [rand_reduce((3, 4)), np.array([1, 2], np.int64)], [1, 1, 1], shapefn="topk",
            out_dtypes=[np.float32, np.int64], nout=2)
    with pytest.raises(DvmError, match=r"topk: values \[3,2\] != \[3,1\], the shape it must have"):
        run("topk", [rand_reduce((3, 4)), np.array([1], np.int64)], [1, 1, 1],
            outputs=[(np.float32, (3, 2)), (np.int64, (3, 1))])


# ---- ONNX backend node tests ------------------------------------------------

def axes_of(attrs, ins, rank):
    axes = ins[1] if len(ins) > 1 else attrs.get("axes", [])
    return Shape(int(a) % rank if rank else int(a) for a in axes)


@pytest.mark.parametrize("name", matmul_node_cases("test_reduce_") + matmul_node_cases("test_argm") +
                         matmul_node_cases("test_cumsum_") + matmul_node_cases("test_top_k"))
def test_onnx_node(name):
    attrs, ins, outs = load_node(name)
    if ins[0].dtype == np.uint64:
        pytest.skip("u64 is not a dvm dtype")
    if name.startswith("test_reduce"):
        op = "reduce_" + name.split("_")[2]
        got = run1(op, [ins[0]], [axes_of(attrs, ins, ins[0].ndim), attrs.get("keepdims", 1),
                                  attrs.get("noop_with_empty_axes", 0)], shapefn="reduce")
        got = [got]
    elif name.startswith("test_argm"):
        got = [run1(name.split("_")[1], [ins[0]], [attrs.get("axis", 0), attrs.get("keepdims", 1),
                                                    attrs.get("select_last_index", 0)],
                    shapefn="argreduce", out_dtypes=[np.int64])]
    elif name.startswith("test_cumsum"):
        got = [run1("cumsum", [ins[0]], [int(ins[1]), attrs.get("exclusive", 0),
                                          attrs.get("reverse", 0)],
                    outputs=[(ins[0].dtype, ins[0].shape)])]
    else:
        got = run("topk", ins, [attrs.get("axis", -1), attrs.get("largest", 1),
                                attrs.get("sorted", 1)], shapefn="topk",
                  out_dtypes=[ins[0].dtype, np.int64], nout=2)
    for g, w in zip(got, outs, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
