"""softmax, logsoftmax, layernorm and batchnorm against NumPy (float64
references), through the whole stack, plus the ONNX backend node tests of
Softmax, LogSoftmax, LayerNormalization and BatchNormalization."""
import numpy as np
import pytest

from dvmop import DvmError, run, run1
from test_matmul import BF16, load_node, matmul_node_cases, run_bf16

rng = np.random.default_rng(2)
TOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float16): 1e-3, BF16: 8e-3}


def rand_norm(shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def close_norm(got, want, dtype, factor=8):
    assert got.shape == want.shape
    tol = TOL[np.dtype(dtype)] * factor
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


# ---- softmax, logsoftmax ----------------------------------------------------

def softmax_ref(x, axis, log):
    x = x.astype(np.float64)
    if x.size == 0:
        return x
    s = x - x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(s).sum(axis=axis, keepdims=True))
    return s - lse if log else np.exp(s - lse)


SHAPES = [((7,), 0), ((3, 13), 1), ((3, 13), 0), ((2, 3, 31), -1), ((2, 3, 31), 1), ((2, 3, 31), -3),
          ((1, 12, 128, 128), -1), ((4, 65, 257), 1), ((1025, 1), 0), ((3, 1, 5), 1), ((2, 0, 3), 1),
          ((3, 1025), 1), ((2, 3, 65), 0),
          # rows about the 16-element steps of short rows and the short/long split at 256
          ((2, 1), 1), ((5, 16), 1), ((3, 17), -1), ((2, 255), 1), ((3, 256), 1), ((2, 257), 1)]


@pytest.mark.parametrize("op", ["softmax", "logsoftmax"])
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_softmax(op, shape, axis):
    x = rand_norm(shape, scale=4.0)
    got = run1(op, [x], [axis], outputs=[(np.float32, shape)])
    close_norm(got, softmax_ref(x, axis, op == "logsoftmax"), np.float32)


@pytest.mark.parametrize("op", ["softmax", "logsoftmax"])
@pytest.mark.parametrize("shape,axis", [((3, 13), 1), ((2, 3, 31), 1)])
def test_softmax_f16(op, shape, axis):
    x = rand_norm(shape, np.float16, 3.0)
    got = run1(op, [x], [axis], outputs=[(np.float16, shape)])
    assert got.dtype == np.float16
    close_norm(got, softmax_ref(x, axis, op == "logsoftmax"), np.float16)


@pytest.mark.parametrize("op", ["softmax", "logsoftmax"])
def test_softmax_bf16(op):
    x = rand_norm((3, 13), scale=3.0).astype(BF16)
    (got,) = run_bf16(op, [x], [1], [(BF16, x.shape)])
    close_norm(got, softmax_ref(x.astype(np.float32), 1, op == "logsoftmax"), BF16)


@pytest.mark.parametrize("op", ["softmax", "logsoftmax"])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 13), 1), ((2, 3, 31), 1), ((2, 0, 3), 1), ((1025, 1), 0)])
def test_softmax_f64(op, shape, axis):
    x = rand_norm(shape, np.float64, 30.0)
    got = run1(op, [x], [axis], outputs=[(np.float64, shape)])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, softmax_ref(x, axis, op == "logsoftmax"), rtol=1e-12, atol=1e-12)


def test_softmax_extremes():
    # a masked row (-inf), huge magnitudes, and a NaN that poisons only its row
    x = np.array([[0, -np.inf, 1, -np.inf], [1e30, -1e30, 3e38, 0], [1, np.nan, 2, 3],
                  [-1e9, -1e9, -1e9, 0]], np.float32)
    got = run1("softmax", [x], [1], outputs=[(np.float32, x.shape)])
    want = softmax_ref(x[[0, 1, 3]], 1, False)
    np.testing.assert_allclose(got[[0, 1, 3]], want, atol=1e-7)
    assert got[0, 1] == 0 and got[0, 3] == 0
    assert np.isnan(got[2]).all()
    got = run1("logsoftmax", [x[[0, 1, 3]]], [1], outputs=[(np.float32, (3, 4))])
    np.testing.assert_allclose(got, softmax_ref(x[[0, 1, 3]], 1, True), rtol=1e-6)


@pytest.mark.parametrize("n", [4, 300])
@pytest.mark.parametrize("cols", [False, True])
def test_logsoftmax_large_values(n, cols):
    """(x - max) - log(sum): x - (max + log(sum)) lost log(sum) once max was large
    (issue 18: [v, v, 0, 0] gave -0.6875 at v = 1e6, 0 at 1e8; want -log 2)."""
    for v in (1e4, 1e6, 1e7, 1e8, 3e38):
        x = np.zeros((2, n), np.float32)
        x[:, :2] = v
        if cols:
            got = run1("logsoftmax", [np.ascontiguousarray(x.T)], [0], outputs=[(np.float32, (n, 2))]).T
        else:
            got = run1("logsoftmax", [x], [1], outputs=[(np.float32, x.shape)])
        np.testing.assert_allclose(got[:, :2], -np.log(2.0), rtol=1e-6)


@pytest.mark.parametrize("op", ["softmax", "logsoftmax"])
@pytest.mark.parametrize("n", [40, 300])
def test_softmax_nan_and_masked_rows(op, n):
    """Short (n <= 256) and long rows: a NaN inside the vector steps poisons
    only its row; -inf entries (masks) give 0 (-inf for logsoftmax)."""
    x = rand_norm((3, n), scale=4.0)
    x[1, 5] = np.nan
    x[2, 3:n:2] = -np.inf
    got = run1(op, [x], [1], outputs=[(np.float32, x.shape)])
    assert np.isnan(got[1]).all()
    close_norm(got[[0, 2]], softmax_ref(x[[0, 2]], 1, op == "logsoftmax"), np.float32)


def test_softmax_errors():
    with pytest.raises(DvmError, match=r"softmax: axis 2 is out of range for rank 2"):
        run1("softmax", [rand_norm((3, 4))], [2], outputs=[(np.float32, (3, 4))])
    with pytest.raises(DvmError, match=r"logsoftmax: y \[4,3\] != x \[3,4\]"):
        run1("logsoftmax", [rand_norm((3, 4))], [1], outputs=[(np.float32, (4, 3))])
    with pytest.raises(DvmError, match=r"softmax: x is i64: want f32, f16 or bf16"):
        run1("softmax", [np.ones((3, 4), np.int64)], [1], outputs=[(np.int64, (3, 4))])
    with pytest.raises(DvmError, match=r"softmax: y is f16, x f32: want the same"):
        run1("softmax", [rand_norm((3, 4))], [1], outputs=[(np.float16, (3, 4))])
    with pytest.raises(DvmError, match=r"softmax: attribute axis must be int, got float"):
        run1("softmax", [rand_norm((3, 4))], [1.0], outputs=[(np.float32, (3, 4))])


# ---- layernorm --------------------------------------------------------------

def layernorm_ref(x, g, b, axis, eps):
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    y = (x - mean) * inv * g.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y, mean, inv


LN = [((7,), -1, (7,)), ((3, 13), 1, (13,)), ((2, 3, 31), -1, (31,)), ((2, 3, 31), 1, (3, 31)),
      ((2, 3, 31), 0, (2, 3, 31)), ((8, 128, 768), -1, (768,)), ((2, 3, 31), 1, (1, 31)),
      ((2, 3, 31), 1, (3, 1)), ((2, 3, 31), -1, (1,)), ((2, 0, 5), -1, (5,)), ((3, 1025), -1, (1025,)),
      # rows of 1, one vector pair of 16 (layernorm_rows' registers), just past it
      ((4, 1), -1, (1,)), ((2, 16), -1, (16,)), ((5, 17), -1, (17,)), ((3, 33), -1, (33,))]


@pytest.mark.parametrize("shape,axis,pshape", LN)
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm(shape, axis, pshape, bias):
    x, g, b = rand_norm(shape, scale=3.0) + 1, rand_norm(pshape), rand_norm(pshape) if bias else None
    nout = 3
    ys = run("layernorm", [x, g] + ([b] if bias else []), [axis, 1e-5], nout=nout)
    for got, want in zip(ys, layernorm_ref(x, g, b, axis, 1e-5)):
        close_norm(got, want, np.float32, 16)


@pytest.mark.parametrize("nout", [1, 2])
def test_layernorm_nout(nout):
    x, g, b = rand_norm((3, 13)), rand_norm((13,)), rand_norm((13,))
    ys = run("layernorm", [x, g, b], [-1, 1e-3], nout=nout)
    assert len(ys) == nout
    for got, want in zip(ys, layernorm_ref(x, g, b, -1, 1e-3)):
        close_norm(got, want, np.float32, 16)


def test_layernorm_range_edges():
    """Rows whose f32 sums overflow (issue 18: a constant row of 3e38 gave NaN; ONNX
    Runtime gives 0) are done again in double: exact results, NaN only from an inf or
    NaN in x."""
    x = np.array([[3e38] * 4, [-3.4e38] * 4, [3e38, -3e38, 3e38, -3e38], [1e20, 2e20, 3e20, 4e20],
                  [1, 2, 3, 4], [np.inf, 1, 2, 3]], np.float32)
    g, b = np.ones(4, np.float32), np.full(4, 0.5, np.float32)
    y, mean, inv = run("layernorm", [x, g, b], [-1, 1e-5], nout=3)
    want = layernorm_ref(x[:5], g, b, -1, 1e-5)
    close_norm(y[:5], want[0], np.float32, 16)
    np.testing.assert_array_equal(y[:2], 0.5)
    np.testing.assert_allclose(mean[:5], want[1], rtol=1e-6)
    assert np.isnan(y[5]).all()


@pytest.mark.parametrize("dx,dp,dy", [(np.float16, np.float16, np.float16),
                                      (np.float16, np.float32, np.float32),
                                      (np.float32, np.float16, np.float16)])
def test_layernorm_f16(dx, dp, dy):
    x, g, b = rand_norm((4, 31), dx), rand_norm((31,), dp), rand_norm((31,), dp)
    y, mean, inv = run("layernorm", [x, g, b], [-1, 1e-5], nout=3, out_dtypes=[dy, np.float32, dy])
    assert y.dtype == dy and inv.dtype == dy
    want = layernorm_ref(x, g, b, -1, 1e-5)
    close_norm(y, want[0], dy)
    close_norm(mean, want[1], np.float32, 64)
    close_norm(inv, want[2], dy)


def test_layernorm_bf16():
    x, g, b = (rand_norm(s).astype(BF16) for s in [(4, 31), (31,), (31,)])
    y, mean = run_bf16("layernorm", [x, g, b], [-1, 1e-5], [(BF16, (4, 31)), (np.float32, (4, 1))])
    want = layernorm_ref(x, g, b, -1, 1e-5)
    close_norm(y, want[0], BF16)
    close_norm(mean, want[1], np.float32, 64)


def test_layernorm_errors():
    with pytest.raises(DvmError, match=r"layernorm: scale \[4\] does not broadcast to \[3\] "
                                       r"\(x's dims from axis 1\)"):
        run("layernorm", [rand_norm((2, 3)), rand_norm((4,))], [1, 1e-5], nout=1)
    with pytest.raises(DvmError, match=r"layernorm: axis 2 is out of range for rank 2"):
        run("layernorm", [rand_norm((2, 3)), rand_norm((3,))], [2, 1e-5], nout=1)
    with pytest.raises(DvmError, match=r"layernorm: attribute epsilon must be float, got int"):
        run("layernorm", [rand_norm((2, 3)), rand_norm((3,))], [1, 0], nout=1)
    with pytest.raises(DvmError, match=r"layernorm: Mean \[2\] != \[2,1\], X's dims up to axis 1"):
        run("layernorm", [rand_norm((2, 3)), rand_norm((3,))], [1, 1e-5],
            outputs=[(np.float32, (2, 3)), (np.float32, (2,))])
    with pytest.raises(DvmError, match=r"layernorm: X is i32: want f32, f16 or bf16"):
        run("layernorm", [np.ones((2, 3), np.int32), rand_norm((3,))], [1, 1e-5],
            outputs=[(np.float32, (2, 3))])


# ---- batchnorm --------------------------------------------------------------

def batchnorm_ref(x, s, b, mean, var, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    f = [p.astype(np.float64).reshape(shape) for p in (s, b, mean, var)]
    return (x.astype(np.float64) - f[2]) / np.sqrt(f[3] + eps) * f[0] + f[1]


def bn_params(c, dtype=np.float32):
    return [rand_norm((c,), dtype), rand_norm((c,), dtype), rand_norm((c,), dtype),
            (rng.random(c) + 0.5).astype(dtype)]


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 7), (2, 3, 4, 5), (1, 64, 65, 65), (0, 3, 4), (2, 13, 1, 1)])
def test_batchnorm(shape):
    x, ps = rand_norm(shape), bn_params(shape[1])
    got = run1("batchnorm", [x] + ps, [1e-5], outputs=[(np.float32, shape)])
    close_norm(got, batchnorm_ref(x, *ps, 1e-5), np.float32)


def test_batchnorm_f16():
    x, ps = rand_norm((2, 3, 5), np.float16), bn_params(3, np.float16)
    got = run1("batchnorm", [x] + ps, [1e-3], outputs=[(np.float16, x.shape)])
    close_norm(got, batchnorm_ref(x, *ps, 1e-3), np.float16)


def test_batchnorm_bf16():
    x, ps = rand_norm((2, 3, 5)).astype(BF16), [p.astype(BF16) for p in bn_params(3)]
    (got,) = run_bf16("batchnorm", [x] + ps, [1e-3], [(BF16, x.shape)])
    close_norm(got, batchnorm_ref(x, *ps, 1e-3), BF16)


def test_batchnorm_errors():
    x, ps = rand_norm((2, 3, 4)), bn_params(3)
    with pytest.raises(DvmError, match=r"batchnorm: input_var \[4\] must be \[3\], the channels of X \[2,3,4\]"):
        run1("batchnorm", [x] + ps[:3] + [rand_norm((4,))], [1e-5], outputs=[(np.float32, x.shape)])
    with pytest.raises(DvmError, match=r"batchnorm: X must be \[N, C, ...\], got rank 1"):
        run1("batchnorm", [rand_norm((3,))] + ps, [1e-5], outputs=[(np.float32, (3,))])
    with pytest.raises(DvmError, match=r"batchnorm: takes 5 inputs and 1 output, got 4 and 1"):
        run1("batchnorm", [x] + ps[:3], [1e-5], outputs=[(np.float32, x.shape)])


# ---- ONNX backend node tests ------------------------------------------------

@pytest.mark.parametrize("name", [n for n in matmul_node_cases("test_softmax_") + matmul_node_cases("test_logsoftmax_")
                                  + matmul_node_cases("test_layer_normalization_") + ["test_batchnorm_example"]
                                  if "expanded" not in n])
def test_onnx_node(name):
    attrs, ins, outs = load_node(name)
    if name.startswith("test_layer"):
        got = run("layernorm", ins, [attrs.get("axis", -1), float(attrs.get("epsilon", 1e-5))],
                  nout=len(outs))
    elif name.startswith("test_batchnorm"):
        got = [run1("batchnorm", ins, [float(attrs.get("epsilon", 1e-5))],
                    outputs=[(ins[0].dtype, ins[0].shape)])]
    else:
        op = "logsoftmax" if name.startswith("test_logsoftmax") else "softmax"
        got = [run1(op, ins, [attrs.get("axis", -1)], outputs=[(ins[0].dtype, ins[0].shape)])]
    for g, w in zip(got, outs, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)


# ---- instance_norm, group_norm, mvn, lrn (ops/cpu/norm_stats.c) -------------

def group_norm_ref(x, groups, s, b, eps):
    x64 = x.astype(np.float64)
    g = x64.reshape(x.shape[0], groups, int(np.prod(x.shape[1:])) // groups)
    y = ((g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y * s.astype(np.float64).reshape(shape) + b.astype(np.float64).reshape(shape)


# awkward shapes: no spatial dims, 1s, primes, an empty batch
NORM_SHAPES = [(2, 3, 4, 5), (1, 1, 1), (3, 7, 13), (2, 5), (0, 3, 4), (1, 2, 1, 1, 3)]


# and rows of f32 instance_norm's vector loops (16 lanes): one past, a prime,
# rows spread over threads (from 2^14 elements), a long one off zero
INSTANCE_SHAPES = [s for s in NORM_SHAPES if len(s) >= 3] + [(1, 3, 17), (2, 5, 1031), (4, 8, 1031),
                                                             (1, 4, 130, 127)]


@pytest.mark.parametrize("shape", INSTANCE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instance_norm(shape, dtype):
    x, s, b = rand_norm(shape, dtype, 3) + 5, rand_norm(shape[1:2], dtype), rand_norm(shape[1:2], dtype)
    got = run1("instance_norm", [x, s, b], [1e-5], outputs=[(dtype, shape)], threads=2)
    want = group_norm_ref(x, shape[1], s, b, 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if x.size and x.ndim > 2 and dtype == np.float32:
        from test_conv import ort_node
        np.testing.assert_allclose(got, ort_node("InstanceNormalization", [x, s, b], {}), rtol=1e-4, atol=1e-4)


def test_instance_norm_wide_rows():
    """f32 rows whose sums overflow f32 (|x| near 3e38) take their statistics
    in double: finite, as the formula gives; a row with an inf is NaN."""
    x = np.stack([rng.uniform(1e38, 3e38, 40) * rng.choice([-1, 1], 40), np.full(40, 3e38),
                  np.r_[np.inf, np.zeros(39)]]).astype(np.float32)[None]
    s, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    got = run1("instance_norm", [x, s, b], [1e-5], outputs=[(np.float32, x.shape)])
    np.testing.assert_allclose(got[:, :2], group_norm_ref(x[:, :2], 2, s[:2], b[:2], 1e-5), rtol=1e-5, atol=1e-5)
    assert np.isnan(got[0, 2]).all()


@pytest.mark.parametrize("shape,groups", [((2, 4, 3, 3), 2), ((1, 6, 7), 3), ((3, 5, 2), 5), ((2, 6), 1),
                                           ((0, 4, 2), 2), ((1, 1, 1), 1), ((2, 6, 17, 19), 3), ((3, 10, 1031), 2)])
def test_group_norm(shape, groups):
    x, s, b = rand_norm(shape, np.float32, 2), rand_norm(shape[1:2]), rand_norm(shape[1:2])
    got = run1("group_norm", [x, s, b], [1e-3, groups, 1], outputs=[(np.float32, shape)], threads=2)
    np.testing.assert_allclose(got, group_norm_ref(x, groups, s, b, 1e-3), rtol=1e-5, atol=1e-5)


def mvn_ref(x, axes):
    x64 = x.astype(np.float64)
    m = x64.mean(axis=axes, keepdims=True)
    sd = np.sqrt((x64 ** 2).mean(axis=axes, keepdims=True) - m ** 2)
    return (x64 - m) / (sd + 1e-9)


@pytest.mark.parametrize("shape,axes", [((3, 3, 3, 1), ()), ((2, 5, 7, 3), (0, 2, 3)), ((2, 5, 7), (1,)),
                                        ((4, 3, 2), (-1, 0)), ((2, 1, 3, 3), (1, 2, 3)), ((0, 2, 3, 3), ())])
def test_mvn(shape, axes):
    from dvmop import Shape
    x = rand_norm(shape, np.float32, 2) + 1
    got = run1("mvn", [x], [Shape(axes)], outputs=[(np.float32, shape)])
    np.testing.assert_allclose(got, mvn_ref(x, tuple(axes) or (0, 2, 3)), rtol=1e-5, atol=1e-5)


def lrn_ref(x, alpha, beta, bias, size):
    x64 = x.astype(np.float64)
    c = x.shape[1]
    sq = np.zeros_like(x64)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c, ch + size // 2 + 1)
        sq[:, ch] = (x64[:, lo:hi] ** 2).sum(axis=1)
    return x64 / (bias + alpha / size * sq) ** beta


@pytest.mark.parametrize("shape,size", [((2, 5, 3, 3), 3), ((1, 7, 2, 5), 4), ((1, 1, 1, 1), 5), ((2, 3, 5), 1),
                                        ((0, 3, 2, 2), 3), ((1, 13, 4), 2)])
def test_lrn(shape, size):
    x = rand_norm(shape)
    got = run1("lrn", [x], [1e-2, 0.75, 1.5, size], outputs=[(np.float32, shape)])
    np.testing.assert_allclose(got, lrn_ref(x, 1e-2, 0.75, 1.5, size), rtol=1e-5, atol=1e-6)
    if x.size and x.ndim == 4 and size % 2:  # ONNX Runtime takes odd sizes only
        from test_conv import ort_node
        ort = ort_node("LRN", [x], dict(alpha=1e-2, beta=0.75, bias=1.5, size=size))
        np.testing.assert_allclose(got, ort, rtol=1e-5, atol=1e-5)


def test_norm_stats_errors():
    x = rand_norm((2, 3, 4))
    with pytest.raises(DvmError, match=r"group_norm: num_groups 2 must divide the 3 channels"):
        run1("group_norm", [x, rand_norm((3,)), rand_norm((3,))], [1e-3, 2, 1], outputs=[(np.float32, x.shape)])
    with pytest.raises(DvmError, match=r"instance_norm: scale \[4\] must be \[3\], the channels of X"):
        run1("instance_norm", [x, rand_norm((4,)), rand_norm((3,))], [1e-5], outputs=[(np.float32, x.shape)])
    with pytest.raises(DvmError, match=r"instance_norm: dtypes f32, f64, f32 -> f32: want all f32 or all f64"):
        run1("instance_norm", [x, rand_norm((3,), np.float64), rand_norm((3,))], [1e-5], outputs=[(np.float32, x.shape)])


def batchnorm_train_ref(x, s, b, mean, var, eps, momentum):
    axes = (0,) + tuple(range(2, x.ndim))
    x64 = x.astype(np.float64)
    m, v = x64.mean(axis=axes), x64.var(axis=axes)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x64 - m.reshape(shape)) / np.sqrt(v.reshape(shape) + eps) * s.reshape(shape) + b.reshape(shape)
    return y, mean * momentum + m * (1 - momentum), var * momentum + v * (1 - momentum)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 1, 1), (3, 7), (2, 13, 1, 3)])
def test_batchnorm_train(shape):
    x, ps = rand_norm(shape), bn_params(shape[1])
    y, rm, rv = run("batchnorm_train", [x] + ps, [1e-2, 0.8], shapefn="batchnorm_train", nout=3)
    want = batchnorm_train_ref(x, *ps, 1e-2, 0.8)
    for got, w in zip((y, rm, rv), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
