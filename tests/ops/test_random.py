"""The kernels that draw random numbers (ops/cpu/random.c: random_normal,
random_uniform, bernoulli, multinomial, dropout), tested statistically: no
draw can equal NumPy's, so each test checks what the distribution says
(means, variances, frequencies, histograms by chi-square) within bounds
that a correct generator fails about once in a million runs. Every
statistical test passes a seed, and a seeded draw is the same on every
run, so these tests are repeatable; unseeded calls are checked to differ.
Compiled models with the ONNX random ops: tests/compiler/test_random_ops.py."""
import math

import numpy as np
import pytest

from dvmop import DvmError
from test_movement import ALL, run0

rng = np.random.default_rng(17)
FLOATS = [np.float32, np.float64, np.float16]


def normal(shape, dtype=np.float32, mean=0.0, scale=1.0, seed=None, x=None):
    attrs = [float(mean), float(scale)] + ([] if seed is None else [float(seed)])
    return run0("random_normal", [] if x is None else [x], attrs, outputs=[(dtype, shape)])


def uniform(shape, dtype=np.float32, low=0.0, high=1.0, seed=None, x=None):
    attrs = [float(low), float(high)] + ([] if seed is None else [float(seed)])
    return run0("random_uniform", [] if x is None else [x], attrs, outputs=[(dtype, shape)])


def bernoulli(p, dtype=np.float32, seed=None):
    return run0("bernoulli", [p], [] if seed is None else [float(seed)], outputs=[(dtype, p.shape)])


def multinomial(x, samples, dtype=np.int32, seed=None):
    """Through the multinomial shape function, which sizes the output."""
    return run0("multinomial", [x], [samples] + ([] if seed is None else [float(seed)]), out_dtypes=[dtype])


def within(got, want, se, k=5):
    assert abs(got - want) < k * se, (got, want, se)


def chi2_ok(counts, probs):
    """Pearson's statistic over the cells with expected counts, below its
    mean plus 6 standard deviations (df + 6 sqrt(2 df))."""
    counts, probs = np.asarray(counts, np.float64), np.asarray(probs, np.float64)
    n, keep = counts.sum(), probs > 0
    assert (counts[~keep] == 0).all(), counts
    e = n * probs[keep]
    stat, df = ((counts[keep] - e) ** 2 / e).sum(), keep.sum() - 1
    assert stat < df + 6 * math.sqrt(2 * df), (stat, df)


def phi(z):
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


# ---- random_normal ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(100003,), (317, 331)])
def test_normal_statistics(dtype, shape):
    """Mean, variance and a 20-cell histogram against the normal CDF, for
    mean 2 and scale 3."""
    y = normal(shape, dtype, 2.0, 3.0, seed=11).astype(np.float64).ravel()
    n = y.size
    assert np.isfinite(y).all()
    within(y.mean(), 2.0, 3 / math.sqrt(n))
    within(y.var(), 9.0, 9 * math.sqrt(2 / (n - 1)))
    edges = [-math.inf] + [2 + 3 * z for z in np.linspace(-3, 3, 19)] + [math.inf]
    probs = [phi((b - 2) / 3) - phi((a - 2) / 3) for a, b in zip(edges[:-1], edges[1:])]
    chi2_ok(np.histogram(y, edges)[0], probs)
    # neighbours are not correlated
    within(np.corrcoef(y[1:], y[:-1])[0, 1], 0.0, 1 / math.sqrt(n))


# ---- random_uniform ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(100003,), (7, 14293)])
def test_uniform_statistics(dtype, shape):
    low, high = -1.5, 2.5
    y = uniform(shape, dtype, low, high, seed=5).astype(np.float64).ravel()
    n = y.size
    assert (y >= low).all() and (y < high).all()
    within(y.mean(), 0.5, 4 / math.sqrt(12 * n))
    within(y.var(), 16 / 12, 16 * math.sqrt(1 / 180 / n))  # the variance of (u - 1/2)^2 is 1/180
    chi2_ok(np.histogram(y, np.linspace(low, high, 17))[0], [1 / 16] * 16)
    within(np.corrcoef(y[1:], y[:-1])[0, 1], 0.0, 1 / math.sqrt(n))


def test_uniform_edges():
    # low == high: every draw is low; low above high: an error
    np.testing.assert_array_equal(uniform((5,), np.float32, 3.0, 3.0, seed=1), np.full(5, 3, np.float32))
    with pytest.raises(DvmError, match=r"random_uniform: low 2 is above high 1"):
        uniform((5,), np.float32, 2.0, 1.0)
    # where rounding to the dtype reaches high, the value below it: between
    # 1 and the next value up, only 1 is in [low, high)
    for dtype in FLOATS:
        high = float(np.nextafter(dtype(1), dtype(2)))
        np.testing.assert_array_equal(uniform((4099,), dtype, 1.0, high, seed=2), np.ones(4099, dtype))
        y = uniform((20011,), dtype, 0.0, 1.0, seed=3)
        assert (y >= 0).all() and (y < 1).all()


# ---- both: shapes, seeds, the *Like form ----

@pytest.mark.parametrize("shape", [(0,), (1,), (3, 0, 5), (7, 13), (2, 3, 5, 7), ()])
@pytest.mark.parametrize("kind", ["normal", "uniform"])
def test_awkward_shapes(shape, kind):
    fn = normal if kind == "normal" else uniform
    for dtype in FLOATS:
        y = fn(shape, dtype, seed=9)
        assert y.shape == shape and y.dtype == dtype and np.isfinite(y).all()
        if kind == "uniform":
            assert ((y >= 0) & (y < 1)).all()


@pytest.mark.parametrize("kind", ["normal", "uniform"])
def test_seeds(kind):
    fn = normal if kind == "normal" else uniform
    a, b, c = fn((1000,), seed=42), fn((1000,), seed=42), fn((1000,), seed=43)
    np.testing.assert_array_equal(a, b)  # one seed, one draw
    assert (a != c).mean() > 0.99
    u, v = fn((1000,)), fn((1000,))  # no seed: new numbers each call
    assert (u != v).mean() > 0.99
    assert fn((1,))[0] != fn((1,))[0]
    # element i depends on the seed and i only: a shorter draw is a prefix,
    # whatever the shape, and a fractional seed is a seed of its own
    np.testing.assert_array_equal(fn((7,), seed=42), a[:7])
    np.testing.assert_array_equal(fn((10, 100), seed=42).ravel(), a)
    assert (fn((100,), seed=42.5) != a[:100]).all()
    # the f64 draw rounds to the f32 one
    np.testing.assert_allclose(fn((1000,), np.float64, seed=42).astype(np.float32), a, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", ["normal", "uniform"])
def test_like_input(kind):
    """With an input (any dtype, never read) the output must have its shape."""
    fn = normal if kind == "normal" else uniform
    name = "random_" + kind
    for x in (np.zeros((4, 6), np.int64), np.zeros((0, 3), np.bool_), np.ones((13,), np.float16)):
        np.testing.assert_array_equal(fn(x.shape, x=x, seed=8), fn(x.shape, seed=8))
    with pytest.raises(DvmError, match=rf"{name}: output 0 has shape \[5\], want \[4,6\]"):
        fn((5,), x=np.zeros((4, 6), np.int64))
    with pytest.raises(DvmError, match=rf"{name}: output is i64, want f32, f64, f16 or bf16"):
        fn((5,), np.int64)


# ---- bernoulli ----

@pytest.mark.parametrize("pdtype", FLOATS)
def test_bernoulli_frequencies(pdtype):
    """Each row of p one probability: its frequency of 1s within 5 standard
    errors; 0 and 1 exactly never and always."""
    ps = np.array([0, 1, 0.5, 0.25, 0.9, 1 / 1024], pdtype)
    n = 20011
    p = np.repeat(ps[:, None], n, axis=1)
    y = bernoulli(p, np.float32, seed=4)
    assert set(np.unique(y)) <= {0.0, 1.0}
    freq = y.mean(axis=1)
    assert freq[0] == 0 and freq[1] == 1
    for f, q in zip(freq[2:], ps[2:].astype(np.float64)):
        within(f, q, math.sqrt(q * (1 - q) / n))
    both = (y[2, 1:] * y[2, :-1]).mean()  # neighbours independent
    within(both, 0.25, math.sqrt(0.25 * 0.75 / n))


def test_bernoulli_varied_p():
    """p varying element by element: the sum of 1s against the sum of p."""
    p = rng.random((331, 307))
    y = bernoulli(p, np.int64, seed=12)
    within(y.sum(), p.sum(), math.sqrt((p * (1 - p)).sum()))
    # the 1s fall where p is large: the mean p under a 1 against its expectation
    within(p[y == 1].mean(), (p * p).sum() / p.sum(), 0.01)


@pytest.mark.parametrize("dtype", ALL + [np.float16])
def test_bernoulli_dtypes(dtype):
    p = np.array([[0, 1, 1, 0, 1]], np.float32)
    y = bernoulli(p, dtype, seed=1)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, p.astype(dtype))


@pytest.mark.parametrize("shape", [(0,), (1,), (13, 1), (2, 0, 3), ()])
def test_bernoulli_shapes(shape):
    p = np.full(shape, 0.5, np.float64)
    y = bernoulli(p, np.bool_, seed=3)
    assert y.shape == shape and y.dtype == np.bool_


def test_bernoulli_seeds_and_errors():
    p = np.full(2000, 0.5, np.float32)
    np.testing.assert_array_equal(bernoulli(p, seed=6), bernoulli(p, seed=6))
    assert (bernoulli(p, seed=6) != bernoulli(p, seed=7)).any()
    assert (bernoulli(p) != bernoulli(p)).any()
    for bad in (1.5, -0.25, np.nan):
        q = np.array([0.5, 0.5, bad], np.float32)
        with pytest.raises(DvmError, match=rf"bernoulli: p\[2\] = {bad:g} is not a probability in \[0, 1\]"):
            bernoulli(q)
    with pytest.raises(DvmError, match=r"bernoulli: .*want p of a float dtype"):
        bernoulli(np.ones(3, np.int32))


# ---- multinomial ----

def probabilities(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("xdtype", FLOATS)
def test_multinomial_frequencies(dtype, xdtype):
    """Class frequencies of each row against softmax of the row, by
    chi-square and class by class within 5 standard errors; a class at -inf
    never drawn; logits far from 0 as stable as those near it."""
    x = np.array([np.log(np.arange(1, 8)),
                  [0, -np.inf, 1, 2, -np.inf, 0.5, -3],
                  1000 + np.log(np.arange(7, 0, -1)),
                  [-1e4, -1e4, -1e4 + 2, -1e4, -1e4, -1e4, -1e4]]).astype(xdtype)
    n = 20011
    y = multinomial(x, n, dtype, seed=21)
    assert y.shape == (4, n) and y.dtype == dtype
    want = probabilities(x.astype(np.float64))
    for b in range(4):
        counts = np.bincount(y[b], minlength=7)
        assert counts.size == 7, counts
        chi2_ok(counts, want[b])
        for c, q in zip(counts, want[b]):
            within(c / n, q, math.sqrt(q * (1 - q) / n) + 1e-12)


def test_multinomial_many_classes():
    """A vocabulary-sized row: frequencies of the likeliest classes."""
    x = rng.standard_normal((2, 4099)).astype(np.float32) * 3
    n = 100003
    y = multinomial(x, n, np.int64, seed=2)
    p = probabilities(x)
    for b in range(2):
        counts = np.bincount(y[b], minlength=4099)
        top = np.argsort(p[b])[-20:]
        for c in top:
            within(counts[c] / n, p[b, c], math.sqrt(p[b, c] * (1 - p[b, c]) / n))
        # the rest pooled into one cell
        rest = np.ones(4099, bool)
        rest[top] = False
        chi2_ok(list(counts[top]) + [counts[rest].sum()], list(p[b, top]) + [p[b, rest].sum()])


@pytest.mark.parametrize("batch,classes,samples", [(0, 3, 5), (3, 5, 0), (1, 1, 7), (13, 2, 1), (0, 0, 2), (2, 0, 0)])
def test_multinomial_shapes(batch, classes, samples):
    x = rng.standard_normal((batch, classes)).astype(np.float32)
    y = multinomial(x, samples, np.int64, seed=3)
    assert y.shape == (batch, samples)
    assert ((y >= 0) & (y < max(classes, 1))).all()


def test_multinomial_seeds_and_errors():
    x = np.zeros((2, 10), np.float32)
    a = multinomial(x, 1000, seed=1)
    np.testing.assert_array_equal(a, multinomial(x, 1000, seed=1))
    assert (a != multinomial(x, 1000, seed=2)).any()
    assert (multinomial(x, 1000) != multinomial(x, 1000)).any()
    for bad, what in ((np.nan, "nan"), (np.inf, "inf")):
        z = x.copy()
        z[1, 3] = bad
        with pytest.raises(DvmError, match=rf"multinomial: x\[1, 3\] is {what}, not a log-probability"):
            multinomial(z, 4)
    z = x.copy()
    z[1] = -np.inf
    with pytest.raises(DvmError, match=r"multinomial: row 1 of x \[2,10\] has no class of probability above 0"):
        multinomial(z, 4)
    with pytest.raises(DvmError, match=r"multinomial: row 0 of x \[2,0\] has no class"):
        multinomial(np.zeros((2, 0), np.float32), 4)
    with pytest.raises(DvmError, match=r"multinomial: input 0 has rank 3, want 2"):
        multinomial(np.zeros((2, 3, 4), np.float32), 4)
    with pytest.raises(DvmError, match=r"multinomial: sample_size must be an int >= 0"):
        multinomial(x, -1)


# ---- dropout ----

def dropout(x, attrs):
    """y and the mask (attributes ratio, training, seed)."""
    return run0("dropout", [x], attrs, nout=2, outputs=[(x.dtype, x.shape), (np.bool_, x.shape)])


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_dropout_statistics(ratio):
    """Training mode: each element kept with probability 1 - ratio and scaled
    by 1 / (1 - ratio). With n = 200,000 draws the kept fraction is within 5
    standard deviations of 1 - ratio (a false alarm about once in 3 million
    runs; the draw is a fixed hash of seed and position, so this run is
    repeatable)."""
    n = 200_000
    x = rng.standard_normal(n).astype(np.float32)
    y, mask = dropout(x, [ratio, 1, 1234])
    kept = mask.mean()
    assert abs(kept - (1 - ratio)) < 5 * np.sqrt(ratio * (1 - ratio) / n), kept
    np.testing.assert_allclose(y, np.where(mask, x / np.float32(1 - ratio), 0), rtol=1e-6)
    # neighbours are not correlated: pairs (kept, kept) as often as independence says
    both = (mask[1:] & mask[:-1]).mean()
    assert abs(both - (1 - ratio) ** 2) < 5 * np.sqrt((1 - ratio) ** 2 * (1 - (1 - ratio) ** 2) / n), both


def test_dropout_seeds_and_modes():
    x = rng.standard_normal(1000).astype(np.float32)
    out = lambda attrs: dropout(x, attrs)
    a, b, c = out([0.5, 1, 1]), out([0.5, 1, 1]), out([0.5, 1, 2])
    np.testing.assert_array_equal(a[1], b[1])  # one seed, one mask
    assert (a[1] != c[1]).any()
    u, v = out([0.5, 1]), out([0.5, 1])  # no seed: a new draw each call
    assert (u[1] != v[1]).any()
    for attrs in ([0.5, 0], [0.0, 1]):  # inference, or ratio 0: y = x, all kept
        y, m = out(attrs)
        np.testing.assert_array_equal(y, x)
        assert m.all()
    with pytest.raises(DvmError, match=r"dropout: ratio 1 is not in \[0, 1\)"):
        out([1.0, 1])
    for dtype in (np.float16, np.float64):
        y, m = dropout(x.astype(dtype), [0.25, 1, 7])
        np.testing.assert_allclose(y, np.where(m, x.astype(dtype) / dtype(0.75), 0), rtol=1e-3)
