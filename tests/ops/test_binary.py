"""add and mul against NumPy, through the whole stack (asm, run, .npy)."""
import numpy as np
import pytest
from dvmtest.compare import ort_outputs
from dvmtest.nodecases import single_node_cases
from dvmtest.onnxmodel import const, make_model
from onnx import TensorProto, helper

from dvmop import DvmError, run1, run_model

rng = np.random.default_rng(0)

SHAPES = [((), ()), ((7,), (7,)), ((3, 1), (1, 5)), ((2, 3, 4), (4,)), ((65,), (1,)), ((0, 3), (3,))]


@pytest.mark.parametrize("op,ref", [("add", np.add), ("mul", np.multiply)])
@pytest.mark.parametrize("a,b", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_binary(op, ref, a, b, dtype):
    x = rng.standard_normal(a).astype(dtype) if a else np.array(rng.standard_normal(), dtype)
    y = rng.standard_normal(b).astype(dtype) if b else np.array(rng.standard_normal(), dtype)
    got = run1(op, [x, y], shapefn="broadcast")
    np.testing.assert_array_equal(got, ref(x, y))


def test_mismatch():
    with pytest.raises(DvmError, match=r"broadcast: \[2,3\] vs \[4\]: dim -1 3 != 4"):
        run1("add", [np.zeros((2, 3), np.float32), np.zeros(4, np.float32)], shapefn="broadcast")


# ---- every op, dtype and broadcasting pattern (ops/cpu/binary.c) ----

import os

import dvmop
from test_unary import BF16, bf16_round, run_chain, via_bf16


# Every pattern of the inner row (vector-vector, scalar-vector,
# vector-scalar), merged and unmerged dims, sizes past block boundaries,
# zero-sized dims, rank 8.
PAIRS = [((), ()), ((1,), ()), ((7,), (7,)), ((13,), ()), ((), (31,)), ((3, 1), (1, 5)),
         ((2, 3, 4), (4,)), ((4, 1), (4, 65)), ((65,), (1,)), ((257, 3), (257, 1)),
         ((1025,), (1025,)), ((0, 3), (3,)), ((2, 0), (1, 1)), ((2, 1, 3, 1), (4, 1, 5)),
         ((2, 1, 2, 1, 2, 1, 2, 3), (1, 2, 1, 2, 1, 2, 1, 1)), ((300, 257), (257,)),
         ((2, 70001), (2, 1)),
         # short rows taken many at a time, a repeating input laid end to end;
         # 9000x5 splits between threads mid-row
         ((9000, 5), (5,)), ((5,), (7, 5)), ((7, 64), (64,)), ((3, 1, 4), (5, 4))]

FLOATS = [np.float32, np.float64, np.float16]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
# pow takes no unsigned dtype but u8 (ONNX Pow's base is a float or i32/i64)
NO_POW = (np.uint16, np.uint32, np.uint64)


def sample_binary(shape, dtype, lo=-100, hi=100):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(lo, hi, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def wrap(v, dtype):
    info = np.iinfo(dtype)
    return (v - info.min) % 2 ** info.bits + info.min


def trunc_div(a, b):
    """C / ONNX Runtime integer division: toward zero, wrapping."""
    out = [wrap((abs(x) // abs(y)) * (-1 if (x < 0) != (y < 0) else 1), a.dtype)
           for x, y in zip(a.ravel().tolist(), b.ravel().tolist())]
    return np.array(out, a.dtype).reshape(a.shape)


def ipow(a, b):
    """Integer pow modulo 2^bits; negative exponents truncate 1/x^-e."""
    out = []
    for x, e in zip(a.ravel().tolist(), b.ravel().tolist()):
        if e < 0:
            v = 1 if x == 1 else (-1 if e % 2 else 1) if x == -1 else 0
        else:
            v = pow(x, e, 2 ** np.iinfo(a.dtype).bits)
        out.append(wrap(v, a.dtype))
    return np.array(out, a.dtype).reshape(a.shape)


ARITH = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "pow": np.power, "min": np.minimum, "max": np.maximum,
}


def arith_ref(op, x, y):
    x, y = np.broadcast_arrays(x, y)
    if np.issubdtype(x.dtype, np.integer):
        if op == "div":
            return trunc_div(x, y)
        if op == "pow":
            return ipow(x, y)
        return ARITH[op](x, y, dtype=x.dtype, casting="unsafe")
    with np.errstate(all="ignore"):
        return ARITH[op](x, y)


# every pattern for f32 and i64; the row-loop kinds and a threaded size for
# the other dtypes
FEW = [((), ()), ((13,), ()), ((), (31,)), ((3, 1), (1, 5)), ((300, 257), (257,)), ((0, 3), (3,))]
CASES = [(a, b, dt) for dt in FLOATS + INTS for a, b in (PAIRS if dt in (np.float32, np.int64) else FEW)]


@pytest.mark.parametrize("op", list(ARITH))
@pytest.mark.parametrize("a,b,dtype", CASES)
def test_arith(op, a, b, dtype):
    if op == "pow" and dtype in NO_POW:
        with pytest.raises(DvmError, match=r"pow: dtypes"):
            run1(op, [sample_binary(a, dtype), sample_binary(b, dtype)], shapefn="broadcast")
        return
    x, y = sample_binary(a, dtype), sample_binary(b, dtype)
    if op == "div" and np.issubdtype(dtype, np.integer):
        y[y == 0] = 7
    if op == "pow":
        x = sample_binary(a, dtype, -5, 6) if np.issubdtype(dtype, np.integer) else np.abs(x) / 4
        y = sample_binary(b, dtype, -2, 9) if np.issubdtype(dtype, np.integer) else (y / 10).astype(dtype)
    got = run1(op, [x, y], shapefn="broadcast")
    want = arith_ref(op, x, y)
    assert got.dtype == np.dtype(dtype) and got.shape == want.shape
    if op == "pow" and not np.issubdtype(dtype, np.integer):
        np.testing.assert_allclose(got, want, rtol={np.float16: 1e-3}.get(dtype, 1e-6))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", list(ARITH))
def test_arith_bf16(op):
    x, y = bf16_round(rng.standard_normal((5, 13))), bf16_round(rng.standard_normal(13))
    if op == "pow":
        x = np.abs(x)
    got = via_bf16(op, [x, y], shapefn="broadcast")
    with np.errstate(all="ignore"):
        want = bf16_round(ARITH[op](x, y))
    np.testing.assert_allclose(got, want, rtol=1e-2 if op == "pow" else 0)


def test_nan_and_overflow():
    x = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0, -0.0], np.float32)
    y = np.array([1.0, np.nan, np.nan, np.inf, -0.0, 0.0], np.float32)
    for op in ("min", "max", "add", "div"):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(run1(op, [x, y], shapefn="broadcast"), ARITH[op](x, y))
    i = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min], np.int64)
    np.testing.assert_array_equal(run1("add", [i, np.array([1], np.int64)], shapefn="broadcast"),
                                  i + 1)


def test_int_division():
    for dt in [np.int8, np.int16, np.int32, np.int64]:
        mn = np.iinfo(dt).min
        x = np.array([7, -7, 7, -7, mn, mn, 0, 5], dt)
        y = np.array([2, 2, -2, -2, -1, 1, 3, 9], dt)
        np.testing.assert_array_equal(run1("div", [x, y], shapefn="broadcast"),
                                      np.array([3, -3, -3, 3, mn, mn, 0, 0], dt))
        with pytest.raises(DvmError, match=r"div: integer division by zero \(divisor element 2\)"):
            run1("div", [x, np.array([1, 2, 0], dt)[None].T], shapefn="broadcast")
    # an empty output divides nothing
    assert run1("div", [np.zeros((0, 3), np.int32), np.zeros(3, np.int32)], shapefn="broadcast").size == 0


def test_unsigned_limits():
    """u64 above 2^63 compares, divides and takes min/max as unsigned; u32 and u16 wrap."""
    big = np.array([2**64 - 1, 2**63, 2**63 + 1, 5, 0, 2**63 - 1], np.uint64)
    other = np.array([2**63, 2**63 + 1, 3, 2**64 - 2, 2**63, 1], np.uint64)
    with np.errstate(all="ignore"):
        for op in ("add", "sub", "mul", "min", "max"):
            np.testing.assert_array_equal(run1(op, [big, other], shapefn="broadcast"),
                                          ARITH[op](big, other, dtype=np.uint64), err_msg=op)
    np.testing.assert_array_equal(run1("div", [big, other], shapefn="broadcast"), big // other)
    for op, ref in CMP.items():
        np.testing.assert_array_equal(run1(op, [big, other], shapefn="broadcast", out_dtypes=[np.bool_]),
                                      ref(big, other), err_msg=op)
    for dt in (np.uint16, np.uint32):
        mx = np.iinfo(dt).max
        x = np.array([mx, mx, 0, 1, mx // 2 + 1], dt)
        y = np.array([1, mx, 1, mx, 2], dt)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(run1("add", [x, y], shapefn="broadcast"), x + y)
            np.testing.assert_array_equal(run1("sub", [x, y], shapefn="broadcast"), x - y)
            np.testing.assert_array_equal(run1("mul", [x, y], shapefn="broadcast"), x * y)
        np.testing.assert_array_equal(run1("div", [x, y], shapefn="broadcast"), x // y)
        # an unsigned zero divisor fails as a signed one does (ONNX Runtime has it undefined)
        with pytest.raises(DvmError, match=r"div: integer division by zero \(divisor element 1\)"):
            run1("div", [x, np.array([3, 0, 1, 1, 1], dt)], shapefn="broadcast")
    # broadcasting at awkward shapes, and an empty output
    x = sample_binary((3, 1, 7), np.uint64, 0, 2**62) * np.uint64(3)
    y = sample_binary((5, 1), np.uint64, 1, 2**40)
    np.testing.assert_array_equal(run1("div", [x, y], shapefn="broadcast"), x // y)
    assert run1("div", [np.zeros((0, 3), np.uint32), np.zeros(3, np.uint32)], shapefn="broadcast").size == 0


def test_int_pow():
    x = np.array([2, 2, -2, 3, 0, 1, -1, -1, 0, 7, 3], np.int64)
    e = np.array([3, -1, 3, -2, 0, -5, -3, -4, -1, 0, 40], np.int64)
    np.testing.assert_array_equal(run1("pow", [x, e], shapefn="broadcast"), ipow(x, e))
    np.testing.assert_array_equal(run1("pow", [x.astype(np.int32), e.astype(np.int32)], shapefn="broadcast"),
                                  ipow(x.astype(np.int32), e.astype(np.int32)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("e", [2.0, 3.0, 0.5, -1.0])
def test_pow_scalar_exponent(dtype, e):
    x = (rng.standard_normal((3, 257)) * 4).astype(dtype)
    got = run1("pow", [x, np.array([e], dtype)], shapefn="broadcast")
    with np.errstate(all="ignore"):
        want = np.power(x, dtype(e))
    if e == 2.0:  # exactly x * x
        np.testing.assert_array_equal(got, x * x)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float16 else 1e-6)


POW_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, 3e12, -2.5], np.float32)


def pow_model(e, chain):
    """x ^ e for a constant e; with chain, in a fused group: x + 0.044715 x^e
    (GPT-2's GELU)."""
    nodes = [helper.make_node("Pow", ["x", "e"], ["p" if chain else "y"])]
    if chain:
        nodes += [helper.make_node("Mul", ["p", "c"], ["q"]), helper.make_node("Add", ["x", "q"], ["y"])]
    return make_model(nodes, [("x", TensorProto.FLOAT, ["n"])], [("y", TensorProto.FLOAT, None)],
                      [const("e", e)] + ([const("c", 0.044715)] if chain else []))


# a constant exponent against ONNX Runtime: 2 and 3 bit for bit (it
# multiplies too), the others within 3 ulps of its powf, special values
# (zeros, infinities, NaN) as it gives them, alone and in a fused chain
@pytest.mark.parametrize("e", [2.0, 3.0, 4.0, 1.0, -1.0, 0.5, -0.5, 1.5])
@pytest.mark.parametrize("chain", [False, True])
@pytest.mark.parametrize("n", [0, 1, 10, 257])
def test_pow_constant_exponent_against_ort(e, chain, n):
    x = np.concatenate([POW_SPECIALS, (rng.standard_normal(n) * 5).astype(np.float32)])[:n if n < 10 else None]
    model = pow_model(e, chain)
    got, = run_model(model, {"x": x}, 1)
    want, = ort_outputs(model, {"x": x})
    assert got.shape == want.shape
    if e in (1.0, 2.0, 3.0) and not chain:
        np.testing.assert_array_equal(got, want)
    else:  # 3 ulps of the result and of the power term, which the chain's sum may cancel
        with np.errstate(all="ignore"):
            bound = 3.6e-7 * (np.abs(want) + (0.044715 * np.abs(x.astype(np.float64)) ** e if chain else 0))
            ok = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= bound)
        assert ok.all(), (x[~ok], got[~ok], want[~ok])


CMP = {"equal": np.equal, "less": np.less, "greater": np.greater, "less_equal": np.less_equal,
       "greater_equal": np.greater_equal}


@pytest.mark.parametrize("op", list(CMP))
@pytest.mark.parametrize("a,b,dtype", [(a, b, dt) for dt in FLOATS + INTS + [np.bool_]
                                       for a, b in (PAIRS[:12] if dt == np.float32 else FEW)])
def test_compare(op, a, b, dtype):
    if dtype == np.bool_ and op != "equal":
        pytest.skip("only equal takes bool")
    # few distinct values, so that equal elements are common; NaN for floats
    x, y = sample_binary(a, dtype, -3, 3), sample_binary(b, dtype, -3, 3)
    if np.issubdtype(dtype, np.floating):
        x, y = np.round(x / 4).astype(dtype), np.round(y / 4).astype(dtype)
        x.flat[:1] = np.nan
    got = run1(op, [x, y], shapefn="broadcast", out_dtypes=[np.bool_])
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, CMP[op](x, y))


def test_compare_bf16():
    x, y = bf16_round(np.round(rng.standard_normal(31))), bf16_round(np.zeros(1))
    for op, ref in CMP.items():
        np.testing.assert_array_equal(via_bf16(op, [x, y], shapefn="broadcast", out_bf16=False),
                                      ref(x, y))


@pytest.mark.parametrize("op,ref", [("and", np.logical_and), ("or", np.logical_or),
                                    ("xor", np.logical_xor)])
@pytest.mark.parametrize("a,b", PAIRS)
def test_logic(op, ref, a, b):
    x, y = sample_binary(a, np.bool_), sample_binary(b, np.bool_)
    np.testing.assert_array_equal(run1(op, [x, y], shapefn="broadcast"), ref(x, y))


WHERE_SHAPES = [((), (), ()), ((7,), (7,), (7,)), ((7,), (), ()), ((), (7,), ()), ((), (), (7,)),
                ((5, 1), (1, 13), ()), ((1, 13), (5, 1), (13,)), ((2, 1, 65), (1, 3, 1), (3, 65)),
                ((0, 4), (4,), (1,)), ((70001,), (), (70001,)), ((257, 1), (257, 257), (1, 257)),
                ((9000, 3), (3,), ()), ((3,), (9000, 3), (1, 3))]


@pytest.mark.parametrize("c,a,b", WHERE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.int32, np.int64,
                                   np.uint8, np.uint16, np.uint64, np.bool_])
def test_where(c, a, b, dtype):
    cond, x, y = sample_binary(c, np.bool_), sample_binary(a, dtype), sample_binary(b, dtype)
    got = run1("where", [cond, x, y], shapefn="broadcast", out_dtypes=[dtype])
    np.testing.assert_array_equal(got, np.where(cond, x, y))


def test_where_bf16():
    cond = rng.integers(0, 2, (3, 5)).astype(np.bool_)
    x, y = bf16_round(rng.standard_normal(5)), bf16_round(rng.standard_normal((3, 1)))
    got = run_chain([cond, x, y], [("cast", ["x1"], (), "bf16", "same"),
                                   ("cast", ["x2"], (), "bf16", "same"),
                                   ("where", ["x0", 0, 1], (), "bf16", "broadcast"),
                                   ("cast", [2], (), np.float32, "same")], [3])[0]
    np.testing.assert_array_equal(got, np.where(cond, x, y))


def test_inplace():
    """An output that is the same memory as an input of its shape."""
    x = rng.standard_normal((3, 70001)).astype(np.float32)
    text = dvmop.program("add", [x, x[0]], shapefn="broadcast")
    text = text.replace("invoke add, -, (r3)", "invoke add, -, (r0)").replace("ret (r3)", "ret (r0)")
    from dvmop import run_text
    np.testing.assert_array_equal(run_text(text, [x, x[0]], 1)[0], x + x[0])


def test_errors():
    f, i = np.zeros((2, 3), np.float32), np.zeros((2, 3), np.int32)
    with pytest.raises(DvmError, match=r"sub: dtypes f32, i32 -> f32: want one of f32, f16, bf16, f64, "
                                        r"i8, i16, i32, i64, u8, u16, u32, u64, the same for all"):
        run1("sub", [f, i], shapefn="broadcast")
    with pytest.raises(DvmError, match=r"less: dtypes f32, f32 -> f32: want one of f32, f16, bf16, f64, "
                                        r"i8, i16, i32, i64, u8, u16, u32, u64, the same for both inputs, and a bool output"):
        run1("less", [f, f], shapefn="broadcast")
    with pytest.raises(DvmError, match=r"and: dtypes f32, f32 -> bool: want one of bool"):
        run1("and", [f, f], shapefn="broadcast", out_dtypes=[np.bool_])
    with pytest.raises(DvmError, match=r"where: dtypes f32, f32, f32 -> f32: want a bool condition"):
        run1("where", [f, f, f], shapefn="broadcast")
    with pytest.raises(DvmError, match=r"where: output \[3\] != \[2,3\], the broadcast of \[2,1\], \[3\] and \[\]"):
        run1("where", [np.zeros((2, 1), np.bool_), f[0], np.float32(1)], outputs=[(np.float32, (3,))])
    with pytest.raises(DvmError, match=r"where: broadcast: \[2,3\] vs \[4\]: dim -1 3 != 4"):
        run1("where", [np.zeros((2, 3), np.bool_), np.zeros(4, np.float32), np.float32(1)],
             outputs=[(np.float32, (2, 3))])
    with pytest.raises(DvmError, match=r"max: takes 2 inputs and 1 output, got 3 and 1"):
        run1("max", [f, f, f], outputs=[(np.float32, (2, 3))])


# ---- ONNX backend node tests; n-ary Min/Max as a chain of binary ones ----

NODE_OPS = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Min": "min",
            "Max": "max", "Equal": "equal", "Less": "less", "Greater": "greater",
            "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "and",
            "Or": "or", "Xor": "xor", "Where": "where"}
SUPPORTED = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32,
                                   np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}


@pytest.mark.parametrize("case", single_node_cases(NODE_OPS))
def test_onnx_node(case):
    import onnx
    graph = onnx.load(os.path.join(case, "model.onnx")).graph
    kernel = NODE_OPS[graph.node[0].op_type]
    data = os.path.join(case, "test_data_set_0")
    ins = [np.load(os.path.join(data, f"input_{k}.npy")) for k in range(len(graph.input))]
    want = np.load(os.path.join(data, "output_0.npy"))
    if any(x.dtype not in SUPPORTED for x in ins) or len({x.dtype for x in ins[-2:]}) > 1:
        pytest.skip(f"dtypes {[str(x.dtype) for x in ins]}: not taken (ONNX allows more)")
    if len(ins) == 1:  # Min/Max of one input is the input
        steps = [("identity", ["x0"], (), want.dtype, "same")]
    elif kernel == "where":
        steps = [("where", ["x0", "x1", "x2"], (), want.dtype, "broadcast")]
    else:
        steps = [(kernel, ["x0", "x1"], (), want.dtype, "broadcast")]
        for k in range(2, len(ins)):
            steps.append((kernel, [k - 2, f"x{k}"], (), want.dtype, "broadcast"))
    got = run_chain(ins, steps, [len(steps) - 1])[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    else:
        np.testing.assert_array_equal(got, want)


# ---- prelu --------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [((3, 4, 5), (5,)), ((2, 3, 1, 1), (3, 1, 1)), ((7,), (1,)), ((0, 3), (3,)),
                                 ((1,), (1,)), ((2, 13), (2, 13))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_prelu(a, b, dtype):
    x = rng.standard_normal(a).astype(dtype)
    s = rng.standard_normal(b).astype(dtype)
    got = run1("prelu", [x, s], shapefn="broadcast")
    ct = np.float64 if dtype == np.float64 else np.float32  # f16 computes in f32, rounds once
    want = np.where(x < 0, x.astype(ct) * s.astype(ct), x).astype(dtype)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(DvmError, match=r"prelu: dtypes i32, i32 -> i32: want one of f32, f16, bf16, f64"):
        run1("prelu", [np.zeros(3, np.int32), np.zeros(3, np.int32)], shapefn="broadcast")
