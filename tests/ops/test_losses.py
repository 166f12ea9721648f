"""nll_loss, hardmax, lp_normalization, cumprod (ops/cpu/reduce.c) and
rmsnorm (ops/cpu/norm.c) against NumPy, at awkward shapes (0-size, 1,
primes)."""
import numpy as np
import pytest

from dvmop import DvmError, run1

rng = np.random.default_rng(5)
NO_IGNORE = -(2 ** 63)


def nll_ref(x, t, w, reduction, ignore):
    x, c = x.astype(np.float64), x.shape[1]
    w = np.ones(c) if w is None else w.astype(np.float64)
    keep = t != ignore
    tt = np.where(keep, t, 0)
    picked = np.take_along_axis(x, tt[:, None], axis=1)[:, 0]
    wt = np.where(keep, w[tt], 0.0)
    loss = -picked * wt
    if reduction == 0:
        return loss
    return np.asarray(loss.sum() if reduction == 1 else loss.sum() / wt.sum())


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (2, 7, 0), (4, 3, 13), (2, 5, 3, 1)])
@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("weighted", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nll_loss(shape, reduction, weighted, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    t = rng.integers(0, shape[1], (shape[0],) + shape[2:]).astype(np.int64)
    ignore = 0 if shape[1] > 1 and reduction != 2 else NO_IGNORE
    w = rng.uniform(0.5, 2, shape[1]).astype(dtype) if weighted else None
    ins = [x, t] + ([w] if weighted else [])
    got = run1("nll_loss", ins, [reduction, ignore], shapefn="nll_loss")
    want = nll_ref(x, t, w, reduction, ignore)
    assert got.shape == want.shape and got.dtype == dtype
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_nll_loss_bad_target():
    x, t = np.zeros((2, 3), np.float32), np.array([0, 3], np.int64)
    with pytest.raises(DvmError, match="not in"):
        run1("nll_loss", [x, t], [1, NO_IGNORE], shapefn="nll_loss")


@pytest.mark.parametrize("shape,axis", [((1,), 0), ((7,), 0), ((3, 0), 1), ((3, 13), 1), ((4, 5, 3), 1),
                                        ((2, 3, 5), 0)])
def test_hardmax(shape, axis):
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size:
        x.flat[0] = x.max()  # a tie: the first one wins
    got = run1("hardmax", [x], [axis], shapefn="same")
    want = np.zeros_like(x)
    if x.size:
        np.put_along_axis(want, np.expand_dims(np.argmax(x, axis), axis), 1, axis)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,axis", [((1,), 0), ((3, 0), 0), ((3, 13), 1), ((4, 5, 3), 1), ((2, 3, 5), 0)])
@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(shape, axis, p):
    x = rng.standard_normal(shape).astype(np.float32)
    if x.ndim == 2 and x.size:
        x[0] = 0  # a zero norm gives 0
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        want = np.where(norm == 0, 0, x / norm)
    np.testing.assert_allclose(run1("lp_normalization", [x], [axis, p], shapefn="same"), want, rtol=1e-6)


@pytest.mark.parametrize("shape,axis", [((1,), 0), ((0,), 0), ((7,), 0), ((3, 13), 1), ((4, 5, 3), 1)])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_cumprod(shape, axis, exclusive, reverse, dtype):
    x = (rng.integers(-3, 4, shape) if np.dtype(dtype).kind == "i" else rng.uniform(0.5, 1.5, shape)).astype(dtype)
    v = np.flip(x, axis) if reverse else x
    if exclusive:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (1, 0)
        v = np.pad(v, pad, constant_values=1)
        v = np.take(v, range(x.shape[axis]), axis=axis)
    want = np.cumprod(v, axis=axis, dtype=dtype)
    want = np.flip(want, axis) if reverse else want
    got = run1("cumprod", [x], [axis, exclusive, reverse], shapefn="same")
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("shape,axis", [((1, 1), -1), ((3, 13), -1), ((2, 5, 7), 1), ((4, 0), -1), ((2, 3, 4), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_rmsnorm(shape, axis, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape[axis:] if axis >= 0 else shape[axis:]).astype(dtype)
    ax = tuple(range(axis % len(shape), len(shape)))
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt(np.mean(x64 * x64, axis=ax, keepdims=True) + 1e-5) * g if x.size else x64
    got = run1("rmsnorm", [x, g], [axis, 1e-5], shapefn="layernorm")
    tol = 1e-5 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
