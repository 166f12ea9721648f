"""Indexed kernels (scatter_nd, scatter_elements, gather_nd, reverse_sequence,
eyelike, onehot: ops/cpu/scatter.c) against NumPy, through the whole stack:
awkward shapes (0-size dims, 1, primes), negative, duplicate and
out-of-range indices, every reduction."""
import numpy as np
import pytest

from dvmop import DvmError, run1
from test_movement import ALL, rand_any, run0

rng = np.random.default_rng(2)

REDUCTIONS = ["none", "add", "mul", "max", "min"]


def combine(red, a, b):
    if red == "none":
        return b
    return {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[red](a, b)


# ---- scatter_nd ----

def scatter_nd_ref(x, idx, upd, red):
    y = x.copy()
    k = idx.shape[-1]
    for j, t in enumerate(idx.reshape(-1, k)):
        pos = tuple(int(v) for v in t)
        y[pos] = combine(red, y[pos], upd.reshape((idx.size // k,) + x.shape[k:])[j])
    return y


@pytest.mark.parametrize("shape,ishape", [
    ((7,), (3, 1)), ((4, 5, 6), (2, 1)), ((4, 5, 6), (2, 2)), ((4, 5, 6), (3, 3)),
    ((4, 5, 6), (2, 3, 2)), ((1, 1), (1, 2)), ((3, 0, 2), (2, 1)), ((5, 3), (0, 1)),
    ((13, 11), (17, 2)), ((2, 3, 5, 7), (1, 1, 4)),
])
@pytest.mark.parametrize("red", REDUCTIONS)
def test_scatter_nd(shape, ishape, red):
    x = rand_any(shape, np.int32) if red != "mul" else rng.integers(-3, 4, shape).astype(np.int32)
    k = ishape[-1]
    # negative and duplicate indices: each in [-d, d)
    idx = np.stack([rng.integers(-shape[t], shape[t], ishape[:-1]) for t in range(k)], -1)
    idx = idx.reshape(ishape).astype(np.int64)
    upd = rand_any(ishape[:-1] + shape[k:], np.int32)
    # duplicates with no reduction: the last write wins, in order
    got = run1("scatter_nd", [x, idx, upd], [REDUCTIONS.index(red)], outputs=[(np.int32, shape)])
    np.testing.assert_array_equal(got, scatter_nd_ref(x, idx, upd, red))


@pytest.mark.parametrize("dtype", ALL)
def test_scatter_nd_dtypes(dtype):
    x, upd = rand_any((6, 5), dtype), rand_any((3, 5), dtype)
    idx = np.array([[4], [0], [-1]], np.int32)
    got = run1("scatter_nd", [x, idx, upd], [0], outputs=[(dtype, (6, 5))])
    np.testing.assert_array_equal(got, scatter_nd_ref(x, idx, upd, "none"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int64])
@pytest.mark.parametrize("red", REDUCTIONS[1:])
def test_scatter_nd_reduction_dtypes(dtype, red):
    x, upd = rand_any((4, 3), dtype), rand_any((5, 3), dtype)
    idx = np.array([[1], [1], [3], [-4], [1]], np.int64)
    got = run1("scatter_nd", [x, idx, upd], [REDUCTIONS.index(red)], outputs=[(dtype, (4, 3))])
    with np.errstate(over="ignore"):
        want = scatter_nd_ref(x, idx, upd, red)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3)


def test_scatter_nd_errors():
    x = rand_any((3, 4))
    with pytest.raises(DvmError, match=r"scatter_nd: indices\[2\] = 3 is out of range for dim 0 "
                                       r"of data \[3,4\] \(size 3\)"):
        run1("scatter_nd", [x, np.array([[0], [-3], [3]]), rand_any((3, 4))], [0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_nd: indices\[1\] = -5 is out of range for dim 1"):
        run1("scatter_nd", [x, np.array([[0, -5]]), rand_any((1,))], [0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_nd: updates f32 \[2,4\] do not fit data f32 \[3,4\]"):
        run1("scatter_nd", [x, np.array([[0]]), rand_any((2, 4))], [0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_nd: indices \[1,3\]: want rank 1 or more and a last dim 1 to 2"):
        run1("scatter_nd", [x, np.array([[0, 0, 0]]), rand_any((1,))], [0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_nd: indices are f32, want i64 or i32"):
        run1("scatter_nd", [x, np.array([[0.0]], np.float32), rand_any((1, 4))], [0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_nd: a reduction on bool is not supported"):
        b = rand_any((3,), np.bool_)
        run1("scatter_nd", [b, np.array([[0]]), b[:1]], [1], outputs=[(np.bool_, (3,))])


# ---- scatter_elements ----

def scatter_elements_ref(x, idx, upd, axis, red):
    y = x.copy()
    axis %= x.ndim
    for pos in np.ndindex(*idx.shape):
        t = list(pos)
        t[axis] = int(idx[pos]) % x.shape[axis]
        y[tuple(t)] = combine(red, y[tuple(t)], upd[pos])
    return y


@pytest.mark.parametrize("shape,ishape,axis", [
    ((5,), (3,), 0), ((5,), (9,), 0), ((3, 4), (2, 4), 0), ((3, 4), (3, 7), 1), ((3, 4), (2, 3), -1),
    ((2, 3, 5), (2, 3, 5), 1), ((7, 1, 3), (11, 1, 2), 0), ((4, 0, 2), (4, 0, 2), 2),
    ((3, 4), (0, 4), 0), ((1,), (1,), 0), ((2, 3, 4, 5), (1, 2, 3, 4), -3),
])
@pytest.mark.parametrize("red", REDUCTIONS)
def test_scatter_elements(shape, ishape, axis, red):
    x = rng.integers(-3, 4, shape).astype(np.float32)
    n = shape[axis]
    idx = (rng.integers(-n, n, ishape) if n else np.zeros(ishape, int)).astype(np.int64)
    upd = rng.integers(-3, 4, ishape).astype(np.float32)
    got = run1("scatter_elements", [x, idx, upd], [axis, REDUCTIONS.index(red)],
               outputs=[(np.float32, shape)])
    np.testing.assert_array_equal(got, scatter_elements_ref(x, idx, upd, axis, red))


@pytest.mark.parametrize("dtype", ALL)
def test_scatter_elements_dtypes(dtype):
    x, upd = rand_any((4, 6), dtype), rand_any((4, 3), dtype)
    idx = rng.integers(-6, 6, (4, 3)).astype(np.int32)
    got = run1("scatter_elements", [x, idx, upd], [1], outputs=[(dtype, (4, 6))])  # as opset 9 Scatter
    np.testing.assert_array_equal(got, scatter_elements_ref(x, idx, upd, 1, "none"))


def test_scatter_elements_errors():
    x = rand_any((3, 4))
    with pytest.raises(DvmError, match=r"scatter_elements: indices\[1\] = 4 is out of range for dim 1 "
                                       r"of data \[3,4\] \(size 4\)"):
        run1("scatter_elements", [x, np.array([[0, 4]]), rand_any((1, 2))], [1, 0], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_elements: data f32 \[3,4\], indices \[4,1\] and updates "
                                       r"f32 \[4,1\]: want"):
        run1("scatter_elements", [x, np.zeros((4, 1), np.int64), rand_any((4, 1))], [1, 0],
             outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"scatter_elements: axis 2 is out of range for rank 2"):
        run1("scatter_elements", [x, np.zeros((1, 1), np.int64), rand_any((1, 1))], [2, 0],
             outputs=[(np.float32, (3, 4))])


# ---- gather_nd ----

def gather_nd_ref(x, idx, b):
    nb, k = int(np.prod(x.shape[:b])), idx.shape[-1]
    n = idx.size // (nb * k) if nb else 0
    xb, ib = x.reshape((nb,) + x.shape[b:]), idx.reshape(nb, n, k)
    out = np.empty((nb, n) + x.shape[b + k:], x.dtype)
    for j in range(nb):
        for r in range(n):
            out[j, r] = xb[j][tuple(int(v) for v in ib[j, r])]
    return out.reshape(idx.shape[:-1] + x.shape[b + k:])


@pytest.mark.parametrize("shape,ishape,b", [
    ((7,), (3, 1), 0), ((4, 5, 6), (2, 1), 0), ((4, 5, 6), (2, 3), 0), ((4, 5, 6), (2, 3, 2), 0),
    ((4, 5, 6), (4, 2), 1), ((4, 5, 6), (4, 3, 1), 1), ((2, 3, 5, 7), (2, 3, 4, 2), 2),
    ((1, 1), (1, 2), 0), ((3, 0, 2), (2, 1), 0), ((5, 3), (0, 2), 0), ((13, 11), (17, 2), 0),
])
def test_gather_nd(shape, ishape, b):
    x = rand_any(shape, np.float32)
    k = ishape[-1]
    idx = np.stack([rng.integers(-shape[b + t], shape[b + t], ishape[:-1]) if shape[b + t]
                    else np.zeros(ishape[:-1], int) for t in range(k)], -1)
    idx = idx.reshape(ishape).astype(np.int64)
    if 0 in shape[b:b + k] and idx.size:
        return
    np.testing.assert_array_equal(run1("gather_nd", [x, idx], [b]), gather_nd_ref(x, idx, b))


@pytest.mark.parametrize("dtype", ALL)
def test_gather_nd_dtypes(dtype):
    x, idx = rand_any((3, 4, 2), dtype), np.array([[2, -1], [0, 0], [2, -1]], np.int32)
    np.testing.assert_array_equal(run1("gather_nd", [x, idx], [0]), gather_nd_ref(x, idx, 0))


def test_gather_nd_errors():
    x = rand_any((3, 4))
    with pytest.raises(DvmError, match=r"gather_nd: indices\[3\] = -5 is out of range for dim 1 "
                                       r"of data \[3,4\] \(size 4\)"):
        run1("gather_nd", [x, np.array([[0, 1], [2, -5]])], [0])
    with pytest.raises(DvmError, match=r"gather_nd: indices \[1,3\] index 3 dims, data \[3,4\] has 2"):
        run1("gather_nd", [x, np.array([[0, 1, 2]])], [0])
    with pytest.raises(DvmError, match=r"gather_nd: batch dim 0 differs: data \[3,4\], indices \[2,1\]"):
        run1("gather_nd", [x, np.array([[0], [1]])], [1])


# ---- reverse_sequence ----

def reverse_sequence_ref(x, lens, batch_axis, time_axis):
    y = x.copy()
    for b, n in enumerate(lens):
        sel = [slice(None)] * x.ndim
        sel[batch_axis] = b
        sel[time_axis] = slice(0, n)
        y[tuple(sel)] = np.flip(x[tuple(sel)], axis=0)
    return y


@pytest.mark.parametrize("shape,time_axis", [
    ((4, 3), 0), ((3, 4), 1), ((5, 7, 2), 0), ((7, 5, 3, 2), 1), ((1, 1), 0), ((0, 3), 0),
    ((3, 0, 4), 1), ((13, 1), 0),
])
def test_reverse_sequence(shape, time_axis):
    batch_axis = 1 - time_axis
    x = rand_any(shape, np.int16)
    lens = rng.integers(0, shape[time_axis] + 1, shape[batch_axis]).astype(np.int64)
    got = run1("reverse_sequence", [x, lens], [batch_axis, time_axis], outputs=[(np.int16, shape)])
    np.testing.assert_array_equal(got, reverse_sequence_ref(x, lens, batch_axis, time_axis))


def test_reverse_sequence_errors():
    x = rand_any((3, 2))
    with pytest.raises(DvmError, match=r"reverse_sequence: sequence_lens\[1\] = 4 is out of range \[0, 3\]"):
        run1("reverse_sequence", [x, np.array([1, 4])], [1, 0], outputs=[(np.float32, (3, 2))])
    with pytest.raises(DvmError, match=r"reverse_sequence: sequence_lens is i64 \[3\], want i64 or i32 \[2\]"):
        run1("reverse_sequence", [x, np.array([1, 1, 1])], [1, 0], outputs=[(np.float32, (3, 2))])


# ---- eyelike, onehot ----

@pytest.mark.parametrize("shape", [(3, 3), (4, 7), (7, 4), (1, 1), (0, 3), (13, 1)])
@pytest.mark.parametrize("k", [0, 1, -2, 9, -9, 2**62, -2**62])
def test_eyelike(shape, k):
    x = rand_any(shape, np.float32)
    np.testing.assert_array_equal(run1("eyelike", [x], [k], outputs=[(np.float32, shape)]),
                                  np.eye(*shape, k=k, dtype=np.float32))


@pytest.mark.parametrize("dtype", ALL)
def test_eyelike_dtypes(dtype):
    x = rand_any((3, 4), np.int32)  # the output's dtype is its own
    np.testing.assert_array_equal(run1("eyelike", [x], [1], outputs=[(dtype, (3, 4))]),
                                  np.eye(3, 4, k=1, dtype=dtype))


def onehot_ref(idx, depth, values, axis):
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = (np.arange(depth) == idx[..., None])
    hot = np.moveaxis(hot, -1, axis % (idx.ndim + 1))
    return np.where(hot, values[1], values[0]).astype(values.dtype)


@pytest.mark.parametrize("ishape,depth,axis", [
    ((5,), 4, -1), ((3, 4), 7, 0), ((3, 4), 7, 1), ((3, 4), 7, -3), ((2, 3, 5), 3, 2), ((0,), 3, 0),
    ((1,), 1, 0), ((), 5, 0), ((13,), 11, -1),
])
def test_onehot(ishape, depth, axis):
    # negative and out-of-range indices: the latter give all-off rows
    idx = rng.integers(-depth - 2, depth + 2, ishape).astype(np.int64)
    values = np.array([-1.5, 2.5], np.float32)
    got = run0("onehot", [idx, np.array(depth, np.int64), values], [axis], out_dtypes=[np.float32])
    np.testing.assert_array_equal(got, onehot_ref(idx, depth, values, axis))


@pytest.mark.parametrize("itype,dtype", [(np.float32, np.int64), (np.int32, np.float16),
                                          (np.int8, np.bool_), (np.float64, np.int32)])
def test_onehot_dtypes(itype, dtype):
    idx = np.array([[0, 2.7, -1], [5, -4, 1]]).astype(itype)
    values = np.array([0, 1]).astype(dtype)
    got = run0("onehot", [idx, np.array([4.0], np.float32), values], [-1], out_dtypes=[dtype])
    np.testing.assert_array_equal(got, onehot_ref(idx, 4, values, -1))


def test_onehot_errors():
    idx, v = np.array([0, 1]), np.array([0.0, 1.0], np.float32)
    with pytest.raises(DvmError, match=r"onehot: depth is 0, want 1 or more"):
        run0("onehot", [idx, np.array(0), v], [-1], out_dtypes=[np.float32])
    with pytest.raises(DvmError, match=r"onehot: axis 2 is out of range for rank 2"):
        run0("onehot", [idx, np.array(3), v], [2], out_dtypes=[np.float32])
    with pytest.raises(DvmError, match=r"onehot: values are f32 \[3\], want two"):
        run0("onehot", [idx, np.array(3), np.zeros(3, np.float32)], [0], out_dtypes=[np.float32])
