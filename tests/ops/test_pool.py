"""max_pool, average_pool and the global pools against NumPy loops written
here, ONNX Runtime single-node models, and the ONNX backend node tests."""
import itertools

import numpy as np
import pytest

from dvmop import DvmError, Shape, run, run1
from test_conv import channels_last, conv_node_cases, onnx_attrs, ort_node, window_attrs

rng = np.random.default_rng(1)


def out_size(size, k, s, pb, pe, d, ceil_mode):
    span = (k - 1) * d + 1
    if ceil_mode:
        o = -(-(size + pb + pe - span) // s) + 1
        if (o - 1) * s >= size + pb:  # the last window would start in the end padding
            o -= 1
        return o
    return (size + pb + pe - span) // s + 1


def ref_pool(x, kernel, strides, pads, dil, ceil_mode, mode, count_include_pad=0, storage_order=0):
    """Window by window: the positions each kernel tap reads, those inside X
    gathered from every plane at once. Returns (Y, Indices) for max."""
    n = x.ndim - 2
    sp = x.shape[2:]
    out = [out_size(sp[i], kernel[i], strides[i], pads[i], pads[n + i], dil[i], ceil_mode) for i in range(n)]
    y = np.zeros(x.shape[:2] + tuple(out), np.float64)
    idx = np.zeros(x.shape[:2] + tuple(out), np.int64)
    planes = x.reshape(x.shape[0] * x.shape[1], int(np.prod(sp))).astype(np.float64)
    # flat in-plane index of a spatial position, row-major (where it is read)
    # and as Indices reports it
    rows = np.cumprod((1,) + tuple(sp[::-1]))[:n][::-1]
    mult = rows if storage_order == 0 else np.cumprod((1,) + tuple(sp))[:n]
    for o in itertools.product(*[range(v) for v in out]):
        taps = [[o[i] * strides[i] - pads[i] + k * dil[i] for k in range(kernel[i])] for i in range(n)]
        inside = [[p for p in t if 0 <= p < sp[i]] for i, t in enumerate(taps)]
        flat = [sum(p[i] * rows[i] for i in range(n)) for p in itertools.product(*inside)]
        where = [sum(p[i] * mult[i] for i in range(n)) for p in itertools.product(*inside)]
        vals = planes[:, flat]
        sel = (slice(None), slice(None)) + o
        if mode == "max":
            if not flat:
                y[sel], idx[sel] = -np.inf, -1
                continue
            best = np.argmax(vals, axis=1)  # the first maximum
            y[sel] = vals[np.arange(len(vals)), best].reshape(x.shape[:2])
            idx[sel] = (np.arange(len(vals)) * planes.shape[1] + np.array(where)[best]).reshape(x.shape[:2])
        else:
            if count_include_pad:
                count = np.prod([sum(1 for p in t if -pads[i] <= p < sp[i] + pads[n + i]) for i, t in enumerate(taps)])
            else:
                count = len(flat)
            y[sel] = (vals.sum(axis=1) / count).reshape(x.shape[:2])
    return y, idx


def pool_attrs(kernel, strides, pads, dil, ceil_mode, extra):
    return [Shape(kernel), Shape(strides), Shape(pads), Shape(dil), ceil_mode, extra]


def rand_pool(shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# (X, kernel, strides, pads, dilations, ceil_mode)
CASES = [
    ((1, 1, 5, 5), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0),
    ((2, 3, 7, 13), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1),          # ceil_mode
    ((1, 2, 13, 7), (3, 3), (2, 2), (1, 0, 0, 1), (1, 1), 0),          # asymmetric pads
    ((1, 2, 13, 7), (3, 3), (2, 2), (1, 0, 0, 1), (1, 1), 1),
    ((1, 1, 2, 2), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),           # ceil: last window dropped
    ((1, 3, 6, 6), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),           # ceil: window into the end pad
    ((1, 2, 9, 11), (3, 3), (1, 2), (2, 2, 2, 2), (2, 2), 0),          # dilation 2
    ((1, 2, 10, 10), (2, 3), (3, 2), (1, 0, 1, 2), (3, 2), 1),         # dilation and ceil
    ((1, 4, 9, 9), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 0),           # 1x1 stride 2
    ((1, 2, 7, 7), (7, 7), (1, 1), (0, 0, 0, 0), (1, 1), 0),           # window = input
    ((1, 64, 33, 33), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 0),        # ResNet-like, threads
    ((3, 4, 31), (3,), (2,), (1, 1), (1,), 0),                         # 1-D
    ((2, 3, 13), (4,), (3,), (0, 2), (1,), 1),
    ((1, 2, 5, 6, 7), (2, 3, 2), (2, 1, 2), (0, 1, 1, 0, 1, 1), (1, 1, 1), 1),  # 3-D
    ((0, 3, 7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0),           # zero batch
]


@pytest.mark.parametrize("xs,k,s,p,d,ceil", CASES)
@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool(xs, k, s, p, d, ceil, storage_order):
    x = rand_pool(xs)
    y, idx = run("max_pool", [x], pool_attrs(k, s, p, d, ceil, storage_order), shapefn="pool",
                 out_dtypes=[np.float32, np.int64], nout=2)
    want, want_idx = ref_pool(x, k, s, p, d, ceil, "max", storage_order=storage_order)
    assert y.shape == want.shape
    np.testing.assert_array_equal(y, want.astype(np.float32))
    np.testing.assert_array_equal(idx, want_idx)
    if x.size and storage_order == 0:
        got1 = run1("max_pool", [x], pool_attrs(k, s, p, d, ceil, 0), shapefn="pool")
        np.testing.assert_array_equal(got1, y)
        ort = ort_node("MaxPool", [x], dict(kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=ceil))
        np.testing.assert_array_equal(y, ort)


@pytest.mark.parametrize("xs,k,s,p,d,ceil", CASES)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool(xs, k, s, p, d, ceil, include_pad):
    x = rand_pool(xs)
    y = run1("average_pool", [x], pool_attrs(k, s, p, d, ceil, include_pad), shapefn="pool")
    want, _ = ref_pool(x, k, s, p, d, ceil, "avg", count_include_pad=include_pad)
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    if x.size and (include_pad == 0 or not ceil):
        # ONNX Runtime counts the positions past the end padding that
        # ceil_mode adds as well (ONNX's reference does not), so with both
        # flags the two differ
        ort = ort_node("AveragePool", [x], dict(kernel_shape=k, strides=s, pads=p, dilations=d, ceil_mode=ceil,
                                                count_include_pad=include_pad))
        np.testing.assert_allclose(y, ort, rtol=1e-5, atol=1e-6)


# max_pool at stride 1 without dilation runs by whole planes between
# padding (pool.c's flat_max): channels 1, 3, 17, spatial 1, 2, 7, 10
# (YOLO's SPPF), 13, 32, odd and asymmetric pads, 1-D and 3-D.
FLAT_CASES = [
    ((1, 1, 1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 3, 2, 2), (2, 2), (1, 0, 0, 1)),
    ((2, 17, 7, 13), (3, 5), (1, 2, 1, 2)),
    ((1, 3, 13, 7), (5, 3), (2, 0, 2, 2)),
    ((1, 17, 10, 10), (5, 5), (2, 2, 2, 2)),
    ((1, 2, 1, 13), (1, 4), (0, 3, 0, 0)),
    ((1, 3, 9, 32), (3, 3), (1, 1, 1, 1)),
    ((3, 1, 13), (5,), (2, 1)),
    ((1, 2, 1, 5, 4), (2, 3, 3), (1, 1, 0, 1, 1, 1)),  # 3-D of depth 1: two planes out of one
]


@pytest.mark.parametrize("xs,k,p", FLAT_CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_max_pool_stride1_planes(xs, k, p, threads):
    n = len(k)
    x = rand_pool(xs)
    y = run1("max_pool", [x], pool_attrs(k, (1,) * n, p, (1,) * n, 0, 0), shapefn="pool", threads=threads)
    want, _ = ref_pool(x, k, (1,) * n, p, (1,) * n, 0, "max")
    np.testing.assert_array_equal(y, want.astype(np.float32))
    np.testing.assert_array_equal(y, ort_node("MaxPool", [x], dict(kernel_shape=k, pads=p)))
    for dtype in (np.float64, np.int8, np.uint8):
        xd = rand_pool(xs, dtype)
        got = run1("max_pool", [xd], pool_attrs(k, (1,) * n, p, (1,) * n, 0, 0), shapefn="pool")
        np.testing.assert_array_equal(got, ref_pool(xd, k, (1,) * n, p, (1,) * n, 0, "max")[0].astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.uint8])
def test_max_pool_dtypes(dtype):
    x = rand_pool((2, 3, 9, 8), dtype)
    y, idx = run("max_pool", [x], pool_attrs((3, 2), (2, 1), (1, 0, 1, 1), (1, 1), 1, 0), shapefn="pool",
                 out_dtypes=[dtype, np.int64], nout=2)
    want, want_idx = ref_pool(x, (3, 2), (2, 1), (1, 0, 1, 1), (1, 1), 1, "max")
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, want.astype(dtype))
    np.testing.assert_array_equal(idx, want_idx)


def test_max_pool_ties():
    """Equal values (all zeros, all -inf) pick the first; u8 zeros too."""
    for x in (np.zeros((1, 1, 4, 4), np.uint8), np.full((1, 1, 4, 4), -np.inf, np.float32)):
        y, idx = run("max_pool", [x], pool_attrs((2, 2), (2, 2), (0,) * 4, (1, 1), 0, 0), shapefn="pool",
                     out_dtypes=[x.dtype, np.int64], nout=2)
        np.testing.assert_array_equal(y, np.full((1, 1, 2, 2), x.flat[0], x.dtype))
        np.testing.assert_array_equal(idx, [[[[0, 2], [8, 10]]]])


def test_average_pool_f64():
    x = rand_pool((1, 2, 7, 6), np.float64)
    y = run1("average_pool", [x], pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, 1), shapefn="pool")
    want, _ = ref_pool(x, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "avg", count_include_pad=1)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, want, rtol=1e-12)


def test_pool_defaults():
    """Empty strides, pads and dilations are the ONNX defaults."""
    x = rand_pool((1, 2, 6, 5))
    y = run1("max_pool", [x], [Shape((2, 2)), Shape(()), Shape(()), Shape(()), 0, 0], shapefn="pool")
    np.testing.assert_array_equal(y, ref_pool(x, (2, 2), (1, 1), (0,) * 4, (1, 1), 0, "max")[0])


# planes of fewer than 16 elements go 8 side by side, the rest one by one:
# 34 planes of 4, 8 of 15 and 9 of 16 (the edge), MobileNetV2's 1280 of 4
GLOBAL_SHAPES = [(1, 3, 7, 7), (2, 5, 13), (1, 2, 3, 4, 5), (0, 3, 4, 4), (3, 65, 1, 1), (1, 2, 257, 129),
                 (2, 17, 2, 2), (1, 8, 3, 5), (1, 9, 4, 4), (1, 1280, 2, 2)]


@pytest.mark.parametrize("xs", GLOBAL_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op,ref", [("global_average_pool", np.mean), ("global_max_pool", np.max)])
def test_global_pool(xs, dtype, op, ref):
    x = rand_pool(xs, dtype)
    y = run1(op, [x], shapefn="global_pool")
    axes = tuple(range(2, x.ndim))
    want = ref(x.astype(np.float64), axis=axes, keepdims=True) if x.size else np.zeros(xs[:2] + (1,) * (x.ndim - 2))
    assert y.dtype == dtype and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-6)


# max_pool_nhwc, global_average_pool_nhwc (pass conv_nhwc): X (and max's Y)
# stored channels last; the same values as the plain kernels, every window
# case above, channels past a vector (1, 3, 64, 300), 1 to 3 threads.
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("xs,k,s,p,d,ceil", CASES + [((2, 300, 9, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1)])
def test_max_pool_nhwc(xs, k, s, p, d, ceil, threads):
    x = rand_pool(xs)
    want, _ = ref_pool(x, k, s, p, d, ceil, "max")
    got = run1("max_pool_nhwc", [channels_last(x)], pool_attrs(k, s, p, d, ceil, 0), shapefn="pool", threads=threads)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, channels_last(want.astype(np.float32)))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("xs", GLOBAL_SHAPES + [(2, 300, 17, 3), (1, 512, 7, 7)])
def test_global_average_pool_nhwc(xs, threads):
    x = rand_pool(xs)
    got = run1("global_average_pool_nhwc", [channels_last(x)], shapefn="global_pool", threads=threads)
    want = x.astype(np.float64).mean(axis=tuple(range(2, x.ndim)), keepdims=True) if x.size else \
        np.zeros(xs[:2] + (1,) * (x.ndim - 2))
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_pool_nhwc_checks():
    with pytest.raises(DvmError, match=r"max_pool_nhwc: dtypes f64 -> f64: want X and Y of one of f32"):
        run1("max_pool_nhwc", [rand_pool((1, 2, 5, 5), np.float64)], pool_attrs((3, 3), (1, 1), (1,) * 4, (1, 1), 0, 0),
             shapefn="pool")
    with pytest.raises(DvmError, match=r"global_average_pool_nhwc: dtypes f64 -> f64: want X and Y of one of f32"):
        run1("global_average_pool_nhwc", [rand_pool((1, 2, 5, 5), np.float64)], shapefn="global_pool")


@pytest.mark.parametrize("op,ins,attrs,kw,msg", [
    ("max_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (3, 0, 0, 0), (1, 1), 0, 0), {},
     r"pool: pads 3\+0 of spatial dim 0 must be smaller than the kernel 3"),
    ("max_pool", (1, 1, 5, 5), ((), (1, 1), (0,) * 4, (1, 1), 0, 0), {}, r"pool: attribute kernel_shape is required"),
    ("max_pool", (1, 1, 5, 5), ((3,), (1, 1), (0,) * 4, (1, 1), 0, 0), {}, r"kernel_shape has 1 values, want 2"),
    ("max_pool", (1, 1, 2, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 0), {},
     r"X dim 2 is 2, with pads 0\+0 smaller than the window 3"),
    ("max_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 2, 0), {}, r"ceil_mode must be 0 or 1, got 2"),
    ("max_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 3), {},
     r"max_pool: storage_order must be 0 or 1, got 3"),
    ("average_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 2), {},
     r"average_pool: count_include_pad must be 0 or 1"),
    ("average_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0), {},
     r"average_pool: takes 6 attributes, got 5"),
    ("average_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 0),
     dict(out_dtypes=[np.float32, np.int64], nout=2), r"average_pool: takes 1 input and 1 output, got 1 and 2"),
    ("max_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 0),
     dict(out_dtypes=[np.float32, np.int32], nout=2),
      r"max_pool: dtypes f32 -> f32, i32: want X and Y of one of f32, f64, i8, u8, Indices i64"),
    ("average_pool", (1, 1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 0),
     dict(out_dtypes=[np.float64]), r"average_pool: dtypes f32 -> f64: want X and Y of one of f32, f64"),
    ("max_pool", (1, 5, 5), ((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 0), {},
     r"pool: attribute kernel_shape has 2 values, want 1"),
    ("max_pool", (5, 5), ((3,), (1,), (0,) * 2, (1,), 0, 0), {}, r"pool: X \[5,5\] must have rank 3 to 5"),
])
def test_pool_errors(op, ins, attrs, kw, msg):
    attrs = [Shape(a) if isinstance(a, tuple) else a for a in attrs]
    with pytest.raises(DvmError, match=msg):
        run(op, [np.zeros(ins, np.float32)], attrs, shapefn="pool", **kw)


def test_pool_kernel_checks():
    x = rand_pool((1, 2, 5, 5))
    attrs = pool_attrs((3, 3), (1, 1), (0,) * 4, (1, 1), 0, 0)
    with pytest.raises(DvmError, match=r"max_pool: output 0 \[1,2,5,5\] != \[1,2,3,3\], what X \[1,2,5,5\]"):
        run1("max_pool", [x], attrs, outputs=[(np.float32, (1, 2, 5, 5))])
    with pytest.raises(DvmError, match=r"global_average_pool: output 0 \[1,2,3,3\] != \[1,2,1,1\]"):
        run1("global_average_pool", [x], outputs=[(np.float32, (1, 2, 3, 3))])
    with pytest.raises(DvmError, match=r"global_pool: X \[5\] must have rank 3 or more"):
        run1("global_max_pool", [np.zeros(5, np.float32)], shapefn="global_pool")
    with pytest.raises(DvmError, match=r"kernel \"global_max_pool\": global_max_pool: X \[5\] must have rank 3"):
        run1("global_max_pool", [np.zeros(5, np.float32)], outputs=[(np.float32, (1, 1, 1))])
    with pytest.raises(DvmError, match=r"kernel \"max_pool\": max_pool: attribute kernel_shape has 1 values, want 2"):
        run1("max_pool", [x], [Shape((3,))] + attrs[1:], outputs=[(np.float32, (1, 2, 3, 3))])
    with pytest.raises(DvmError, match=r"global_max_pool: dtypes i32 -> i32: want X and Y of one of f32, f64"):
        run1("global_max_pool", [np.zeros((1, 1, 2), np.int32)], shapefn="global_pool")


POOL_NODE_CASES = conv_node_cases(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"))


@pytest.mark.parametrize("name", sorted(POOL_NODE_CASES))
def test_onnx_node(name):
    node, ins, outs, _ = POOL_NODE_CASES[name]
    x = ins[node.input[0]]
    if node.op_type.startswith("Global"):
        op = "global_average_pool" if node.op_type == "GlobalAveragePool" else "global_max_pool"
        got = [run1(op, [x], shapefn="global_pool")]
    else:
        a = onnx_attrs(node)
        k = list(a["kernel_shape"])
        strides, pads, dil = window_attrs(a, x.shape, k)
        maxp = node.op_type == "MaxPool"
        extra = a.get("storage_order", 0) if maxp else a.get("count_include_pad", 0)
        got = run("max_pool" if maxp else "average_pool", [x],
                  pool_attrs(k, strides, pads, dil, a.get("ceil_mode", 0), extra), shapefn="pool",
                  out_dtypes=[x.dtype, np.int64][:len(outs)], nout=len(outs))
    for g, w in zip(got, outs, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)


# ---- lp_pool ------------------------------------------------------------------

def ref_lp_pool(x, kernel, strides, pads, dil, ceil_mode, p):
    """(sum |x|^p)^(1/p) over each window's taps inside X: ref_pool's
    average times the taps."""
    s, _ = ref_pool(np.abs(x.astype(np.float64)) ** p, kernel, strides, pads, dil, ceil_mode, "avg")
    cnt = ref_count(x.shape, kernel, strides, pads, dil, ceil_mode)
    return np.where(cnt > 0, s * cnt, 0) ** (1.0 / p)


def ref_count(shape, kernel, strides, pads, dil, ceil_mode):
    """The taps inside X of each window (broadcast over N and C)."""
    n = len(shape) - 2
    sp = shape[2:]
    out = [out_size(sp[i], kernel[i], strides[i], pads[i], pads[n + i], dil[i], ceil_mode) for i in range(n)]
    cnt = np.zeros(tuple(out))
    for o in itertools.product(*[range(v) for v in out]):
        c = 1
        for i in range(n):
            c *= sum(1 for k in range(kernel[i]) if 0 <= o[i] * strides[i] - pads[i] + k * dil[i] < sp[i])
        cnt[o] = c
    return cnt


@pytest.mark.parametrize("xs,k,s,p,d,ceil", CASES + [((2, 3, 11), (3,), (2,), (1, 2), (1,), 0)])
@pytest.mark.parametrize("pw", [1, 2, 3])
def test_lp_pool(xs, k, s, p, d, ceil, pw):
    x = rand_pool(xs)
    y = run1("lp_pool", [x], pool_attrs(k, s, p, d, ceil, pw), shapefn="pool")
    want = ref_lp_pool(x, k, s, p, d, ceil, pw)
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    if x.size and not ceil and max(d) == 1:
        ort = ort_node("LpPool", [x], dict(kernel_shape=k, strides=s, pads=p, p=pw))
        np.testing.assert_allclose(y, ort, rtol=1e-5, atol=1e-5)


def test_lp_pool_f64_and_errors():
    x = rand_pool((1, 2, 5, 7)).astype(np.float64)
    y = run1("lp_pool", [x], pool_attrs((2, 3), (1, 1), (0, 0, 0, 0), (1, 1), 0, 2), shapefn="pool")
    np.testing.assert_allclose(y, ref_lp_pool(x, (2, 3), (1, 1), (0, 0, 0, 0), (1, 1), 0, 2), rtol=1e-12)
    with pytest.raises(DvmError, match=r"lp_pool: p must be in 1..64, got 0"):
        run1("lp_pool", [x], pool_attrs((2, 3), (1, 1), (0, 0, 0, 0), (1, 1), 0, 0), shapefn="pool")
