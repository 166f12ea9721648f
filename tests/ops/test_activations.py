"""The libm-backed unary kernels, the parametric activations, isnan/isinf,
sign, bitwise_not (ops/cpu/unary.c), and mod, the bitwise ops and bit_shift
(ops/cpu/binary.c) against NumPy, at awkward shapes (0-size, 1, primes,
broadcasting)."""
import numpy as np
import pytest
from dvmtest.compare import ort_outputs
from dvmtest.onnxmodel import make_model
from onnx import TensorProto, helper

from dvmop import run1, run_model
from test_unary import bf16_round, via_bf16

rng = np.random.default_rng(7)
SHAPES = [(), (1,), (0,), (3, 0), (13,), (7, 31), (40009,)]


def _softplus(x):
    return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


def _elu(x, a):
    return np.where(x < 0, a * np.expm1(np.minimum(x, 0)), x)


# kernel: (attrs, NumPy reference on float64, input range)
UNARY = {
    "sin": ((), np.sin, (-10, 10)),
    "cos": ((), np.cos, (-10, 10)),
    "tan": ((), np.tan, (-1.5, 1.5)),
    "asin": ((), np.arcsin, (-1, 1)),
    "acos": ((), np.arccos, (-1, 1)),
    "atan": ((), np.arctan, (-10, 10)),
    "sinh": ((), np.sinh, (-5, 5)),
    "cosh": ((), np.cosh, (-5, 5)),
    "asinh": ((), np.arcsinh, (-10, 10)),
    "acosh": ((), np.arccosh, (1, 10)),
    "atanh": ((), np.arctanh, (-0.99, 0.99)),
    "ceil": ((), np.ceil, (-5, 5)),
    "floor": ((), np.floor, (-5, 5)),
    "round": ((), np.round, (-5, 5)),  # halves to even, as np.round
    "softplus": ((), _softplus, (-30, 30)),
    "softsign": ((), lambda x: x / (1 + np.abs(x)), (-10, 10)),
    "mish": ((), lambda x: x * np.tanh(_softplus(x)), (-10, 10)),
    "elu": ((0.7,), lambda x: _elu(x, 0.7), (-5, 5)),
    "selu": ((1.6, 1.05), lambda x: 1.05 * _elu(x, 1.6), (-5, 5)),
    "leaky_relu": ((0.1,), lambda x: np.where(x < 0, 0.1 * x, x), (-5, 5)),
    "thresholded_relu": ((0.5,), lambda x: np.where(x > 0.5, x, 0.0), (-5, 5)),
    "celu": ((0.8,), lambda x: np.maximum(x, 0) + np.minimum(0, 0.8 * np.expm1(np.minimum(x, 0) / 0.8)), (-5, 5)),
    "shrink": ((0.25, 0.5), lambda x: np.where(x < -0.5, x + 0.25, np.where(x > 0.5, x - 0.25, 0.0)), (-2, 2)),
    "swish": ((1.5,), lambda x: x / (1 + np.exp(-1.5 * x)), (-10, 10)),
}


def sample_unary(op, n, dtype):
    lo, hi = UNARY[op][2]
    x = rng.uniform(lo, hi, n)
    if op == "round":
        x[: min(n, 6)] = [0.5, 1.5, 2.5, -0.5, -2.5, 3.5][: min(n, 6)]
    return x.astype(dtype)


@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("shape", SHAPES)
def test_unary_f32(op, shape):
    attrs, ref, _ = UNARY[op]
    x = sample_unary(op, int(np.prod(shape)), np.float32).reshape(shape)
    got = run1(op, [x], list(attrs), shapefn="same")
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_f64_f16_bf16(op):
    attrs, ref, _ = UNARY[op]
    x = sample_unary(op, 257, np.float64)
    np.testing.assert_allclose(run1(op, [x], list(attrs), shapefn="same"), ref(x), rtol=1e-13, atol=1e-14)
    h = x.astype(np.float16)
    got = run1(op, [h], list(attrs), shapefn="same")
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, ref(h.astype(np.float64)), rtol=1e-3, atol=1e-3)
    b = bf16_round(x)
    np.testing.assert_allclose(via_bf16(op, [b], list(attrs)), ref(b.astype(np.float64)), rtol=8e-3, atol=8e-3)


def test_unary_specials():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)
    with np.errstate(all="ignore"):
        for op in ["ceil", "floor", "round", "softsign", "softplus", "sin", "atan"]:
            attrs, ref, _ = UNARY[op]
            np.testing.assert_array_equal(run1(op, [x], list(attrs), shapefn="same"),
                                          ref(x.astype(np.float64)).astype(np.float32), err_msg=op)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                                   np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("shape", [(), (0,), (13,), (3, 40009)])
def test_sign(dtype, shape):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    else:
        x = rng.standard_normal(shape).astype(dtype)
        x.flat[:3] = np.array([np.nan, -0.0, 0.0], dtype)[: x.size]
    np.testing.assert_array_equal(run1("sign", [x], shapefn="same"), np.sign(x))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_isnan_isinf(dtype):
    x = rng.standard_normal(41).astype(dtype)
    x[:4] = [np.nan, np.inf, -np.inf, 0]
    np.testing.assert_array_equal(run1("isnan", [x], shapefn="same", out_dtypes=[np.bool_]), np.isnan(x))
    for neg, pos in [(1, 1), (1, 0), (0, 1), (0, 0)]:
        want = np.isinf(x) & np.where(x < 0, bool(neg), bool(pos))
        got = run1("isinf", [x], [neg, pos], shapefn="same", out_dtypes=[np.bool_])
        np.testing.assert_array_equal(got, want)
    assert run1("isnan", [np.zeros((3, 0), dtype)], shapefn="same", out_dtypes=[np.bool_]).shape == (3, 0)


INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
PAIRS = [((), ()), ((0,), (1,)), ((13,), (13,)), ((5, 1, 7), (3, 1)), ((1,), (4, 17)), ((3, 40009), (40009,))]


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return rng.integers(info.min if lo is None else lo, info.max if hi is None else hi, shape,
                        dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("sa,sb", PAIRS)
def test_bitwise(dtype, sa, sb):
    a, b = ints(dtype, sa), ints(dtype, sb)
    for op, ref in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                    ("bitwise_xor", np.bitwise_xor)]:
        np.testing.assert_array_equal(run1(op, [a, b], shapefn="broadcast"), ref(a, b), err_msg=op)
    np.testing.assert_array_equal(run1("bitwise_not", [a], shapefn="same"), np.invert(a))


def shift_ref(x, y, right):
    """ONNX BitShift: out-of-range amounts leave the sign fill."""
    bits = x.dtype.itemsize * 8
    x, y = np.broadcast_arrays(x, y)
    ok = (y.astype(np.int64) >= 0) & (y.astype(np.int64) < bits)
    ys = np.where(ok, y, 0).astype(x.dtype)
    shifted = np.right_shift(x, ys) if right else np.left_shift(x, ys)
    fill = np.where(x < 0, -1, 0).astype(x.dtype) if right else np.zeros_like(x)
    return np.where(ok, shifted, fill)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("sa,sb", PAIRS)
def test_bit_shift(dtype, sa, sb):
    bits = np.dtype(dtype).itemsize * 8
    lo = -3 if np.issubdtype(dtype, np.signedinteger) else 0
    x, y = ints(dtype, sa), ints(dtype, sb, lo, min(bits + 3, np.iinfo(dtype).max))
    for right in (0, 1):
        np.testing.assert_array_equal(run1("bit_shift", [x, y], [right], shapefn="broadcast"),
                                      shift_ref(x, y, right))


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("sa,sb", PAIRS)
def test_mod_int(dtype, sa, sb):
    a, b = ints(dtype, sa), ints(dtype, sb)
    b[b == 0] = 3
    if np.issubdtype(dtype, np.signedinteger) and a.size:
        a.flat[0] = np.iinfo(dtype).min
        if b.size:
            b.flat[0] = -1  # INT_MIN % -1 is 0
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(run1("mod", [a, b], [0], shapefn="broadcast"), np.mod(a, b))
        np.testing.assert_array_equal(run1("mod", [a, b], [1], shapefn="broadcast"), np.fmod(a, b))


def test_mod_int_zero_divisor():
    from dvmop import DvmError
    with pytest.raises(DvmError, match="integer division by zero"):
        run1("mod", [np.arange(4, dtype=np.int32), np.array([1, 0, 2, 3], np.int32)], [0], shapefn="broadcast")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("sa,sb", PAIRS)
def test_mod_float(dtype, sa, sb):
    a, b = (rng.standard_normal(sa) * 10).astype(dtype), (rng.standard_normal(sb) * 3).astype(dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(run1("mod", [a, b], [0], shapefn="broadcast"), np.mod(a, b), rtol=1e-3)
        np.testing.assert_allclose(run1("mod", [a, b], [1], shapefn="broadcast"), np.fmod(a, b), rtol=1e-3)


def test_mod_float_specials():
    a = np.array([0.0, -0.0, np.inf, 3.0, -3.0, 3.0, np.nan, 5.0], np.float32)
    b = np.array([-2.0, 2.0, 2.0, 0.0, np.inf, -np.inf, 1.0, -2.5], np.float32)
    with np.errstate(all="ignore"):
        got = run1("mod", [a, b], [0], shapefn="broadcast")
        np.testing.assert_array_equal(got, np.mod(a, b))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.mod(a, b)))


# the ops whose semantics have not changed since opset 6 (Erf since its
# first, 9), in models of older opsets such as ONNX Runtime's own
# sigmoid.onnx (opset 9, IR version 3), against ONNX Runtime
@pytest.mark.parametrize("opset", [7, 9])
@pytest.mark.parametrize("op", ["Sqrt", "Exp", "Log", "Tanh", "Erf", "Sigmoid", "Reciprocal", "Relu", "Neg", "Abs"])
def test_unary_at_older_opsets(op, opset):
    if op == "Erf" and opset < 9:
        pytest.skip("Erf is from opset 9")
    x = rng.uniform(0.1, 4, (3, 4, 5)) * (1 if op in ("Sqrt", "Log") else rng.choice([-1, 1], (3, 4, 5)))
    x = x.astype(np.float32)
    model = make_model([helper.make_node(op, ["x"], ["y"])], [("x", TensorProto.FLOAT, [3, 4, 5])],
                       [("y", TensorProto.FLOAT, [3, 4, 5])], opset=opset, ir_version=3)
    got, = run_model(model, {"x": x}, 1)
    # (ONNX Runtime's sigmoid and tanh are MLAS's rational approximations)
    np.testing.assert_allclose(got, ort_outputs(model, {"x": x})[0], rtol=1e-5, atol=0)
