"""Kernels whose output sizes depend on data (compress, unique, nms:
ops/cpu/select.c), against NumPy, through the whole
stack (the shape function sizes each output from the data). Compiled graphs
with these ops are compared with ONNX Runtime in
tests/compiler/test_data_dims.py."""
import numpy as np
import pytest

from dvmop import DvmError
from test_movement import ALL, rand_any, run0

rng = np.random.default_rng(3)


# ---- compress ----

@pytest.mark.parametrize("shape,axis,n", [
    ((7,), 0, 7), ((3, 5), 1, 5), ((3, 5), 0, 2), ((3, 5), -1, 3), ((2, 3, 4), 1, 3),
    ((2, 3, 4), None, 24), ((2, 3, 4), None, 5), ((0, 3), 1, 3), ((4, 0), 0, 4), ((1,), 0, 0),
    ((13, 11), 0, 13),
])
def test_compress(shape, axis, n):
    x, c = rand_any(shape, np.int16), rng.random(n) < 0.5
    want = np.compress(c, x, axis=axis)
    got = run0("compress", [x, c], [] if axis is None else [axis])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ALL)
def test_compress_dtypes(dtype):
    x, c = rand_any((4, 3), dtype), np.array([True, False, True, True])
    np.testing.assert_array_equal(run0("compress", [x, c], [0]), np.compress(c, x, axis=0))


def test_compress_errors():
    x = rand_any((3, 4))
    with pytest.raises(DvmError, match=r"compress: condition \[5\] is longer than the axis of x \[3,4\] \(4\)"):
        run0("compress", [x, np.ones(5, bool)], [1])
    with pytest.raises(DvmError, match=r"compress: condition is i64 \[2\], want a 1-D bool tensor"):
        run0("compress", [x, np.ones(2, np.int64)], [1])
    with pytest.raises(DvmError, match=r"compress: axis 2 is out of range for rank 2"):
        run0("compress", [x, np.ones(2, bool)], [2])


# ---- unique ----

def unique_ref(x, sorted_, axis):
    """np.unique's four results, reordered by first occurrence when not sorted."""
    y, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inv = inv.reshape(-1)
    if not sorted_:
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y, idx, cnt, inv = np.take(y, order, axis=0 if axis is None else axis), idx[order], cnt[order], rank[inv]
    return [y, idx, inv, cnt]


@pytest.mark.parametrize("shape,axis", [
    ((7,), None), ((4, 3), None), ((6, 3), 0), ((3, 6), 1), ((2, 5, 3), 1), ((2, 5, 3), -1),
    ((0,), None), ((0, 3), 0), ((3, 0), 0), ((1, 1), 1), ((13, 2), 0),
])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique(shape, axis, sorted_):
    x = rng.integers(-2, 2, shape).astype(np.float32)
    if axis is not None and shape[axis]:  # repeated slices
        x = np.take(x, rng.integers(0, shape[axis], shape[axis]), axis=axis)
    got = run0("unique", [x], [sorted_] + ([] if axis is None else [axis]), nout=4,
               out_dtypes=[np.float32] + [np.int64] * 3)
    for g, w in zip(got, unique_ref(x, sorted_, axis), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ALL)
def test_unique_dtypes(dtype):
    x = rand_any((5, 4), dtype)
    x[3] = x[1]
    got = run0("unique", [x], [1, 0], nout=4, out_dtypes=[dtype] + [np.int64] * 3)
    for g, w in zip(got, unique_ref(x, 1, 0), strict=True):
        np.testing.assert_array_equal(g, w)


def test_unique_fewer_outputs_and_nan():
    x = np.array([2.0, np.nan, -0.0, 0.0, 1.0, 2.0], np.float32)
    y = run0("unique", [x], [1], out_dtypes=[np.float32])
    np.testing.assert_array_equal(y, [0.0, 1.0, 2.0, np.nan])  # -0 equals 0; NaN last


# ---- nms ----

def test_nms_errors():
    boxes, scores = rand_any((1, 3, 4)), rand_any((1, 2, 3))
    mx = np.array([2], np.int64)
    with pytest.raises(DvmError, match=r"nms: boxes \[1,3,4\] and scores \[1,2,4\]: want"):
        run0("nms", [boxes, rand_any((1, 2, 4)), mx], [0], out_dtypes=[np.int64])
    with pytest.raises(DvmError, match=r"nms: input 2 \(max_output_boxes_per_class\) is i32 \[1\], want one i64"):
        run0("nms", [boxes, scores, mx.astype(np.int32)], [0], out_dtypes=[np.int64])
    with pytest.raises(DvmError, match=r"nms: center_point_box is 2, want 0 or 1"):
        run0("nms", [boxes, scores, mx], [2], out_dtypes=[np.int64])
    # no max_output_boxes_per_class: none kept
    assert run0("nms", [boxes, scores], [0], out_dtypes=[np.int64]).shape == (0, 3)
