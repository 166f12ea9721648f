"""One-input elementwise kernels (ops/cpu/unary.c) against NumPy and
float64 references, through the whole stack; also the ONNX backend node
tests of these ops.

bf16 has no .npy form, so bf16 cases run as a chain in one program:
cast f32 -> bf16, the kernel, cast bf16 -> f32 (run_chain, which the other
elementwise test files use too)."""
import math
import os

import ml_dtypes
import numpy as np
import pytest
from dvmtest.nodecases import single_node_cases

import dvmop
from dvmop import DTYPES, DvmError, run1, run_text

rng = np.random.default_rng(1)
BF16 = np.dtype(ml_dtypes.bfloat16)

SHAPES = [(), (1,), (7,), (13,), (31, 17), (65,), (257,), (1025,), (3, 0), (70001,)]


def run_chain(inputs, steps, results, payloads=None):
    """Runs several kernel calls in one program. inputs: arrays; steps:
    (kernel, args, attrs, out_dtype, shapefn) with args naming program
    inputs ("x0") or earlier steps (their index); results: step indices.
    out_dtype may be "bf16". payloads: {kernel: bytes} for the .kernel line."""
    payloads = payloads or {}
    lines, body, reg = [], [], len(inputs)
    kernels, shapefns = [], []
    step_reg = []

    def ref(a):
        return f"r{a[1:]}" if isinstance(a, str) else step_reg[a]

    for kernel, args, attrs, out_dtype, shapefn in steps:
        if kernel not in kernels:
            kernels.append(kernel)
        if shapefn not in shapefns:
            shapefns.append(shapefn)
        attr_regs = []
        for a in attrs:
            code, used = dvmop._attr_code(reg, a)
            body += code
            attr_regs.append(f"r{reg}")
            reg += used
        ins = [ref(a) for a in args]
        body.append(f"  shapefn {shapefn}, (r{reg}), ({', '.join(ins + attr_regs)})")
        dt = out_dtype if isinstance(out_dtype, str) else DTYPES[np.dtype(out_dtype)]
        body.append(f"  alloc r{reg + 1}, {dt}, r{reg}, cpu")
        body.append(f"  invoke {kernel}, -, (r{reg + 1}), ({', '.join(ins)}), ({', '.join(attr_regs)})")
        step_reg.append(f"r{reg + 1}")
        reg += 2
    for k in kernels:
        pay = f' x"{payloads[k].hex()}"' if k in payloads else ""
        lines.append(f".kernel {k} cpu 1{pay}")
    lines += [f".shapefn {s}" for s in shapefns]
    lines.append(f".func main regs={reg}")
    for i, x in enumerate(inputs):
        lines.append(f"  .param x{i} tensor {DTYPES[x.dtype]} [{', '.join(map(str, x.shape))}]")
    lines += [f"  .result y{i} any" for i in range(len(results))]
    lines += body
    lines.append(f"  ret ({', '.join(step_reg[r] for r in results)})")
    lines.append(".end")
    return run_text("\n".join(lines) + "\n", inputs, len(results))


def via_bf16(kernel, xs, attrs=(), shapefn="same", out_bf16=True):
    """kernel on bf16 inputs (given as f32, rounded to bf16 first); the
    result back in f32 (or as is when the kernel's output is not bf16)."""
    steps = [("cast", [f"x{i}"], (), "bf16", "same") for i in range(len(xs))]
    steps.append((kernel, list(range(len(xs))), attrs, "bf16" if out_bf16 else np.bool_, shapefn))
    if out_bf16:
        steps.append(("cast", [len(xs)], (), np.float32, "same"))
    return run_chain(xs, steps, [len(steps) - 1])[0]


def bf16_round(x):
    return np.asarray(x, np.float32).astype(BF16).astype(np.float32)


def ulps(got, want, dtype):
    """|got - want| in units in the last place of want in dtype; where want
    (a float64) is inf, NaN or beyond dtype's range, got must be what want
    rounds to exactly."""
    got = np.atleast_1d(np.asarray(got, np.float64))
    want = np.atleast_1d(np.asarray(want, np.float64))
    finfo = ml_dtypes.finfo(dtype)
    with np.errstate(all="ignore"):
        exp = np.floor(np.log2(np.maximum(np.abs(want), float(finfo.tiny))))
        ulp = np.exp2(exp - finfo.nmant)
        err = np.abs(got - want) / ulp
        rounded = want.astype(dtype).astype(np.float64)
    special = ~np.isfinite(rounded) | ~np.isfinite(got)
    same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    err[special] = np.where(same[special], 0.0, np.inf)
    return err


def _vec(f):
    return np.frompyfunc(f, 1, 1)


def _gelu(x):
    return -0.0 if x == -math.inf else 0.5 * x * math.erfc(-x / math.sqrt(2.0))


def _gelu_tanh(x):
    if x == -math.inf:
        return -0.0
    y = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
    return x / (1.0 + math.exp(min(-2.0 * y, 700.0)))


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _safe(f, default):
    def g(x):
        try:
            return f(x)
        except (ValueError, OverflowError):
            return default(x)
    return g


# op: (attrs, float64 reference of one float, input sampler, f32 ulp budget)
MATH = {
    "sqrt": ((), _safe(math.sqrt, lambda x: math.nan), lambda n: rng.uniform(0, 100, n), 0.5),
    "exp": ((), _safe(math.exp, lambda x: math.inf), lambda n: rng.uniform(-90, 90, n), 1),
    "log": ((), _safe(math.log, lambda x: -math.inf if x == 0 else math.nan),
            lambda n: np.exp(rng.uniform(-80, 80, n)), 1),
    "tanh": ((), math.tanh, lambda n: rng.uniform(-10, 10, n), 2),
    "erf": ((), math.erf, lambda n: rng.uniform(-5, 5, n), 2),
    "sigmoid": ((), _sigmoid, lambda n: rng.uniform(-30, 30, n), 3),
    "reciprocal": ((), lambda x: 1.0 / x if x else math.copysign(math.inf, x),
                   lambda n: rng.uniform(-10, 10, n), 0.5),
    "gelu": ((), _gelu, lambda n: rng.uniform(-14, 8, n), 8),
}


def unary_reference(op, x, approx=0):
    f = _gelu_tanh if op == "gelu" and approx else MATH[op][1]
    return np.asarray(_vec(f)(np.asarray(x, np.float64)), np.float64)


@pytest.mark.parametrize("op", list(MATH))
@pytest.mark.parametrize("shape", SHAPES)
def test_math_f32(op, shape):
    attrs, _, sample, budget = MATH[op]
    x = sample(int(np.prod(shape))).astype(np.float32).reshape(shape)
    got = run1(op, [x], attrs, shapefn="same")
    assert got.dtype == np.float32 and got.shape == shape
    assert np.max(ulps(got, unary_reference(op, x), np.float32), initial=0) <= budget


@pytest.mark.parametrize("op", list(MATH))
def test_math_f64(op):
    x = MATH[op][2](257).astype(np.float64)
    got = run1(op, [x], shapefn="same")
    np.testing.assert_allclose(got, unary_reference(op, x), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("op", list(MATH))
def test_math_f16(op):
    x = MATH[op][2](1025).astype(np.float16)
    if op == "exp":
        x = np.clip(x, -16, 11).astype(np.float16)
    got = run1(op, [x], shapefn="same")
    assert got.dtype == np.float16
    # computed in f32 and rounded once to f16: within one f16 ulp
    assert np.max(ulps(got, unary_reference(op, x), np.float16), initial=0) <= 1


@pytest.mark.parametrize("op", list(MATH))
def test_math_bf16(op):
    x = bf16_round(MATH[op][2](257))
    got = via_bf16(op, [x])
    assert np.max(ulps(got, unary_reference(op, x), BF16), initial=0) <= 1


# The accuracy the header of ops/cpu/elementwise_math.h states, over samples
# of every binade (random bit patterns) and dense samples where the
# functions bend.
ACCURACY = {"exp": 1, "log": 1, "tanh": 1.5, "erf": 1.5, "sigmoid": 2.5, "gelu": 5}


@pytest.mark.parametrize("op", list(ACCURACY))
def test_accuracy_f32(op):
    bits = rng.integers(0, 2 ** 32, 60000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32), rng.uniform(-20, 20, 60000).astype(np.float32),
                        rng.uniform(-1, 1, 20000).astype(np.float32)])
    got = run1(op, [x], shapefn="same")
    err = ulps(got, unary_reference(op, x), np.float32)
    assert np.max(err) <= ACCURACY[op], (op, x[np.argmax(err)], got[np.argmax(err)])


def test_sigmoid_far_tails():
    """|x| from 80 to 110, densely: sigmoid makes its subnormal results
    (x below -87.3) from bits, and its ones above 87 without e^-x."""
    x = np.concatenate([rng.uniform(-110, -80, 20000), rng.uniform(80, 110, 2000)]).astype(np.float32)
    got = run1("sigmoid", [x], shapefn="same")
    assert np.max(ulps(got, unary_reference("sigmoid", x), np.float32)) <= ACCURACY["sigmoid"]


def test_gelu_tanh():
    x = rng.uniform(-6, 6, 4097).astype(np.float32)
    got = run1("gelu", [x], [1], shapefn="same")
    # the argument of tanh rounds in f32: the error grows with |y| in the tail
    np.testing.assert_allclose(got, unary_reference("gelu", x, 1), rtol=2e-5, atol=1e-37)
    np.testing.assert_allclose(run1("gelu", [x], [0], shapefn="same"), unary_reference("gelu", x),
                               rtol=1e-6, atol=1e-37)


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38, 88.72, 88.73,
                    -87.3, -103.9, -104.5], np.float32)


@pytest.mark.parametrize("op", list(MATH))
def test_special_values(op):
    with np.errstate(all="ignore"):
        got = run1(op, [SPECIAL], shapefn="same")
        want = unary_reference(op, SPECIAL).astype(np.float32)
    assert np.max(ulps(got, want, np.float32)) <= max(MATH[op][3], 1), list(zip(SPECIAL, got, want))


# sigmoid and exp take a cheaper form for each block of 64 inputs in their
# normal range (DVM_EW_MID_LOOP, unary_math.h's MID column): values from
# both sides of those ranges, and every special value, inside blocks that
# are otherwise in range, at lengths around the block and vector widths and
# past the thread split (32768 elements a thread).
MID_OPS = {"sigmoid": (-87.0, 87.0), "exp": (-87.0, 88.0)}
# (-0x1.5ebb84p+6: sigmoid's first x whose e^x is made from bits)
MID_EDGES = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-39, -1e-39,
                      -87.0, -87.01, -87.34, -87.7, -88.0, -float.fromhex("0x1.5ebb82p+6"),
                      -float.fromhex("0x1.5ebb84p+6"), -89.5, -96.0, -103.9, -104.0, -104.5, -110.0,
                      -380.0, 87.0, 87.5, 88.0, 88.3, 88.72, 88.73, 89.0, 96.0, 104.0, 380.0, -3e38, 3e38],
                     np.float32)
MID_LENGTHS = [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 64 * 7 + 31, 65536 + 64 * 3 + 5]


def _mid_block_input(op, n, seed):
    """n in-range values with MID_EDGES spread over them: the first block's
    first and last elements, some blocks' middles and the tail."""
    lo, hi = MID_OPS[op]
    r = np.random.default_rng(seed)
    x = r.uniform(lo, hi, n).astype(np.float32)
    if n:
        at = np.unique(np.concatenate([[0, min(63, n - 1), n - 1],
                                       r.integers(0, n, min(len(MID_EDGES), max(n // 200, 3)))]))
        x[at] = r.choice(MID_EDGES, len(at))
    return x


@pytest.mark.parametrize("op", list(MID_OPS))
@pytest.mark.parametrize("n", MID_LENGTHS)
@pytest.mark.parametrize("threads", [1, 2])
def test_mid_blocks_accuracy(op, n, threads):
    x = _mid_block_input(op, n, n * 7 + threads)
    with np.errstate(all="ignore"):
        got = run1(op, [x], shapefn="same", threads=threads)
        err = ulps(got, unary_reference(op, x), np.float32)
    assert got.shape == x.shape
    assert np.max(err, initial=0) <= ACCURACY[op], (x[np.argmax(err)], got[np.argmax(err)])


@pytest.mark.parametrize("op", list(MID_OPS))
def test_mid_blocks_every_edge(op):
    """Each edge value alone in an in-range block, at each of a few lanes."""
    base = np.random.default_rng(5).uniform(*MID_OPS[op], 64).astype(np.float32)
    x = np.tile(base, (len(MID_EDGES) * 4, 1))
    for k, v in enumerate(MID_EDGES):
        for j, lane in enumerate((0, 15, 16, 63)):
            x[k * 4 + j, lane] = v
    with np.errstate(all="ignore"):
        got = run1(op, [x], shapefn="same")
        err = ulps(got, unary_reference(op, x), np.float32)
    assert np.max(err) <= ACCURACY[op], (x.flat[np.argmax(err)], got.flat[np.argmax(err)])


@pytest.mark.parametrize("op", list(MID_OPS))
def test_mid_form_same_bits(op):
    """An in-range value gets the same bits from the cheap form (its block
    all in range) as from the general one (its block holding one value out
    of range)."""
    lo, hi = MID_OPS[op]
    r = np.random.default_rng(11)
    x = np.concatenate([r.uniform(lo, hi, 64 * 200), r.uniform(-20, 20, 64 * 200)]).astype(np.float32)
    x[:64] = np.linspace(lo, hi, 64, dtype=np.float32)
    mixed = x.copy()
    mixed[::64] = -100.0  # every block takes the general form
    fast = run1(op, [x], shapefn="same").view(np.uint32)
    slow = run1(op, [mixed], shapefn="same").view(np.uint32)
    keep = np.arange(x.size) % 64 != 0
    np.testing.assert_array_equal(fast[keep], slow[keep])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_specials(dtype):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -40.0], dtype)
    for approx in (0, 1):
        got = run1("gelu", [x], [approx], shapefn="same")
        np.testing.assert_array_equal(got, np.array([np.inf, -0.0, np.nan, 0.0, -0.0], dtype))


INT_INFO = {np.int32: np.iinfo(np.int32), np.int64: np.iinfo(np.int64)}


@pytest.mark.parametrize("op,ref", [("relu", lambda x: np.maximum(x, 0)), ("neg", np.negative),
                                    ("abs", np.abs)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                                   np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("shape", [(), (7,), (3, 0), (2, 65), (70001,)])
def test_sign_ops(op, ref, dtype, shape):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        x.flat[:1] = info.min  # wraps: -INT_MIN = INT_MIN
    else:
        x = rng.standard_normal(shape).astype(dtype)
        x.flat[:3] = np.array([np.nan, -0.0, -np.inf], dtype)[: x.size]
    with np.errstate(all="ignore"):
        want = ref(x)
    np.testing.assert_array_equal(run1(op, [x], shapefn="same"), want)


@pytest.mark.parametrize("op,ref", [("relu", lambda x: np.maximum(x, 0)), ("neg", np.negative),
                                    ("abs", np.abs)])
def test_sign_ops_bf16(op, ref):
    x = bf16_round(rng.standard_normal(65))
    np.testing.assert_array_equal(via_bf16(op, [x]), ref(x))


def test_not():
    for shape in [(), (7,), (3, 0), (70001,)]:
        x = rng.integers(0, 2, shape).astype(np.bool_)
        np.testing.assert_array_equal(run1("not", [x], shapefn="same"), ~x)


CLIP_CASES = [(-1.0, 2.0), (-np.inf, 0.5), (-0.5, np.inf), (-np.inf, np.inf), (1.0, -1.0), (0.25, 0.25)]


@pytest.mark.parametrize("lo,hi", CLIP_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_clip_float(lo, hi, dtype):
    x = (rng.standard_normal(1025) * 2).astype(dtype)
    x[:2] = [np.nan, -np.inf]
    got = run1("clip", [x], [lo, hi], shapefn="same")
    # ONNX: min(max(x, lo), hi); NaN stays
    want = np.minimum(np.maximum(x, dtype(lo)), dtype(hi))
    np.testing.assert_array_equal(got, want)


def test_clip_bf16():
    x = bf16_round(rng.standard_normal(65) * 2)
    np.testing.assert_array_equal(via_bf16("clip", [x], [-1.0, 0.5]), np.clip(x, -1.0, 0.5))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64])
@pytest.mark.parametrize("lo,hi", [(-2.5, 3.5), (-np.inf, 7.0), (-1e30, 1e30), (5, 3), (4, 100),
                                   (300.5, np.inf)])
def test_clip_int(dtype, lo, hi):
    """Bounds round inward (ceil(lo), floor(hi)) and saturate to the type."""
    info = np.iinfo(dtype)
    x = rng.integers(-10, 10, 257).astype(dtype)
    x[:2] = [info.min, info.max]
    got = run1("clip", [x], [lo, hi], shapefn="same")

    def bound(v, up):
        if math.isinf(v):
            return info.min if v < 0 else info.max
        return min(max(math.ceil(v) if up else math.floor(v), info.min), info.max)

    want = np.minimum(np.maximum(x.astype(object), bound(lo, True)), bound(hi, False)).astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_clip_errors():
    x = np.zeros(3, np.float32)
    with pytest.raises(DvmError, match=r"clip: attribute 0 \(lo\) is NaN"):
        run1("clip", [x], [float("nan"), 1.0], shapefn="same")
    with pytest.raises(DvmError, match=r"clip: attribute 1 \(hi\) must be a float or an int, got shape"):
        run1("clip", [x], [0.0, dvmop.Shape((1,))], shapefn="same")
    with pytest.raises(DvmError, match=r"clip: takes 2 attributes, got 1"):
        run1("clip", [x], [0.0], shapefn="same")
    with pytest.raises(DvmError, match=r"clip: dtypes bool -> bool: want one of f32, f16, bf16, f64, i8, i16, i32, i64, u8"):
        run1("clip", [x > 0], [0.0, 1.0], shapefn="same")


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_identity(dtype):
    x = rng.integers(0, 100, (5, 13)).astype(dtype)
    np.testing.assert_array_equal(run1("identity", [x], shapefn="same"), x)


# ---- cast ----

CAST_TYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
              np.bool_, np.uint16, np.uint32, np.uint64]


def cast_inputs(dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, 300).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True)
        x[:4] = [info.min, info.max, 0, 1]
        return x
    x = (rng.standard_normal(300) * 100).astype(dtype)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.5, -0.5, 1.5, 2.5, -1.5, 300.7, -300.7, 70000.0,
                65519.0, 65520.0, 1e-8, 3e9, -3e9, 1e20, -1e20, 4.5e9, 1.5e19, 9.3e18, 2.0**64]
    x[: len(specials)] = np.array(specials).astype(dtype)
    return x


def cast_reference(x, to):
    """ONNX Cast as ops/cpu/unary.c documents it."""
    to = np.dtype(to)
    if to == np.bool_:
        return x != 0
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(to, np.integer):
        # through i64 for i64, u32 and u64 targets (u64 also takes [2^63, 2^64) exactly), else i32
        wide = np.int64 if to in (np.int64, np.uint32, np.uint64) else np.int32
        lim = 2.0 ** (63 if wide == np.int64 else 31)
        xd = x.astype(np.float64)
        ok = (xd >= -lim) & (xd < lim)
        with np.errstate(all="ignore"):
            t = np.where(ok, np.trunc(np.where(ok, xd, 0)), 0).astype(wide)
        t[~ok] = np.iinfo(wide).min
        t = t.astype(to)  # keeps the low bits
        if to == np.uint64:
            high = (xd >= 2.0**63) & (xd < 2.0**64)
            with np.errstate(all="ignore"):
                t[high] = xd[high].astype(np.uint64)
        return t
    if x.dtype == np.float64 and to == np.float16:
        return x.astype(np.float16)  # NumPy rounds f64 -> f16 directly, as dvm does
    with np.errstate(all="ignore"):
        return x.astype(to)


@pytest.mark.parametrize("src", CAST_TYPES)
@pytest.mark.parametrize("dst", CAST_TYPES)
def test_cast(src, dst):
    x = cast_inputs(src)
    got = run1("cast", [x], shapefn="same", out_dtypes=[dst])
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, cast_reference(x, dst))


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8,
                                 np.bool_])
def test_cast_bf16(src):
    x = cast_inputs(src)
    got = run_chain([x], [("cast", ["x0"], (), "bf16", "same"), ("cast", [0], (), np.float32, "same")],
                    [1])[0]
    want = x.astype(np.float64).astype(BF16) if src != np.float32 else x.astype(BF16)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # and from bf16 to each
    y = bf16_round(cast_inputs(np.float32))
    got = run_chain([y], [("cast", ["x0"], (), "bf16", "same"), ("cast", [0], (), src, "same")],
                    [1])[0]
    np.testing.assert_array_equal(got, cast_reference(y, src))


def test_cast_f16_exhaustive():
    """Every f16 to f32 and back; f32 to f16 rounding at every f16 boundary."""
    h = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    f = run1("cast", [h], shapefn="same", out_dtypes=[np.float32])
    np.testing.assert_array_equal(f, h.astype(np.float32))
    back = run1("cast", [f], shapefn="same", out_dtypes=[np.float16])
    np.testing.assert_array_equal(back.view(np.uint16)[~np.isnan(h)], h.view(np.uint16)[~np.isnan(h)])
    assert np.isnan(back[np.isnan(h)]).all()
    # midpoints and their neighbours between consecutive finite f16 values
    fin = np.sort(h[np.isfinite(h)].astype(np.float64))
    mid = (fin[1:] + fin[:-1]) / 2
    x = np.concatenate([mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]).astype(np.float32)
    got = run1("cast", [x], shapefn="same", out_dtypes=[np.float16])
    np.testing.assert_array_equal(got, x.astype(np.float16))


def test_cast_bf16_rounding():
    bits = rng.integers(0, 2 ** 32, 100000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    got = run_chain([x], [("cast", ["x0"], (), "bf16", "same"), ("cast", [0], (), np.float32, "same")],
                    [1])[0]
    want = x.astype(BF16).astype(np.float32)
    nan = np.isnan(x)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan]).all()


# ---- errors ----

def test_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(DvmError, match=r"exp: dtypes i32 -> i32: want one of f32, f16, bf16, f64"):
        run1("exp", [x.astype(np.int32)], shapefn="same")
    with pytest.raises(DvmError, match=r"exp: dtypes f32 -> f64: the output must have the input's"):
        run1("exp", [x], outputs=[(np.float64, (2, 3))])
    with pytest.raises(DvmError, match=r"exp: output \[3,2\] != \[2,3\], the input's shape"):
        run1("exp", [x], outputs=[(np.float32, (3, 2))])
    with pytest.raises(DvmError, match=r"exp: takes 0 attributes, got 1"):
        run1("exp", [x], [1], shapefn="same")
    with pytest.raises(DvmError, match=r"cast: output \[6\] != \[2,3\], the input's shape"):
        run1("cast", [x], outputs=[(np.int32, (6,))])
    with pytest.raises(DvmError, match=r"gelu: attribute 0 \(approximate\) must be the int 0 \(none\) or 1"):
        run1("gelu", [x], [2], shapefn="same")
    with pytest.raises(DvmError, match=r"gelu: takes 1 attribute, got 2"):
        run1("gelu", [x], [0, 1], shapefn="same")
    with pytest.raises(DvmError, match=r"not: dtypes f32 -> f32: want one of bool"):
        run1("not", [x], shapefn="same")
    text = (".shapefn same\n.func main regs=2\n  .result y any\n  imm r0, 3\n"
            "  shapefn same, (r1), (r0)\n  ret (r1)\n.end\n")
    with pytest.raises(DvmError, match=r"same: input 0: expected a tensor or a shape, got int"):
        run_text(text, [], 1)


# ---- ONNX backend node tests ----

NODE_OPS = {"Abs": "abs", "Neg": "neg", "Relu": "relu", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
            "Tanh": "tanh", "Erf": "erf", "Sigmoid": "sigmoid", "Reciprocal": "reciprocal",
            "Not": "not", "Identity": "identity", "Clip": "clip", "Cast": "cast", "Gelu": "gelu"}


@pytest.mark.parametrize("case", single_node_cases(NODE_OPS, expanded=False))
def test_onnx_node(case):
    import onnx
    from onnx import helper
    graph = onnx.load(os.path.join(case, "model.onnx")).graph
    node = graph.node[0]
    data = os.path.join(case, "test_data_set_0")
    feeds = {i.name: np.load(os.path.join(data, f"input_{k}.npy")) for k, i in enumerate(graph.input)}
    ins = [feeds[n] if n else None for n in node.input]
    want = np.load(os.path.join(data, "output_0.npy"))
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    kernel = NODE_OPS[node.op_type]
    args = []
    if kernel == "clip":  # bounds are inputs in ONNX, attributes here
        lo = float(ins[1]) if len(ins) > 1 and ins[1] is not None else -np.inf
        hi = float(ins[2]) if len(ins) > 2 and ins[2] is not None else np.inf
        ins, args = ins[:1], [lo, hi]
    if kernel == "gelu":
        args = [1 if attrs.get("approximate", b"none") in (b"tanh", "tanh") else 0]
    if ins[0].dtype not in DTYPES or want.dtype not in DTYPES:
        pytest.skip(f"dtype {ins[0].dtype} -> {want.dtype} has no .npy form here")
    got = run1(kernel, ins, args, shapefn="same", out_dtypes=[want.dtype])
    assert got.dtype == want.dtype and got.shape == want.shape
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    else:
        np.testing.assert_array_equal(got, want)
