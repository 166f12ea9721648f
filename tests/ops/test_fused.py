"""The fused elementwise kernel (ops/cpu/fused.c) against NumPy: programs
encoded here with struct from docs/fused.md (independently of the C
builder), chains at awkward sizes and broadcasts, every dtype, and corrupt
payloads, each refused with its rule's message."""
import math
import os
import re
import struct

import ml_dtypes
import numpy as np
import pytest

import dvmop
from dvmop import DvmError, run1, run_text
from test_unary import BF16, bf16_round, unary_reference, run_chain, ulps

rng = np.random.default_rng(3)

DT = {"f32": 0, "f16": 1, "bf16": 2, "f64": 3, "i8": 4, "i16": 5, "i32": 6, "i64": 7, "u8": 8,
      "bool": 9}
OPS = {name: code for code, name in enumerate(
    "load store const mov cast add sub mul div pow min max equal less greater less_equal "
    "greater_equal and or xor not where neg abs relu sqrt exp log tanh erf sigmoid gelu gelu_tanh "
    "reciprocal row_sum row_mean row_max row_min".split(), start=1)}
NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "bool": np.bool_,
      "bf16": np.float32}  # bf16 travels as f32 through casts


def encode(ins, outs, regs, code, version=1, flags=0):
    """A payload: dtype names of inputs, outputs and registers; code as
    (op, dst, a, b, c, imm) tuples, trailing fields optional; an f32 imm is
    given as a Python float; flags 1: a row program."""
    head = b"DVMF" + struct.pack("<HBBBBHI", version, len(ins), len(outs), len(regs), flags, len(code), 0)
    tables = bytes(DT[t] for t in ins + outs + regs)
    tables += b"\0" * (-(16 + len(tables)) % 8)
    body = b""
    for c in code:
        op, dst, a, b, cc, imm = (list(c) + [0] * 5)[:6]
        if isinstance(imm, float):
            imm = struct.unpack("<q", struct.pack("<d", imm))[0]
        body += struct.pack("<BBBBB3xq", OPS[op] if isinstance(op, str) else op, dst, a, b, cc, imm)
    return head + tables + body


def run_fused(payload, inputs, out_dtypes, shape=None, shapefn=None):
    """One fused call: outputs allocated at the broadcast shape (or by
    shapefn, for one output)."""
    inputs = [np.asarray(x, order="C") for x in inputs]
    if shapefn:
        text = dvmop.program("fused", inputs, shapefn=shapefn, out_dtypes=out_dtypes)
    else:
        shape = np.broadcast_shapes(*[x.shape for x in inputs]) if shape is None else shape
        text = dvmop.program("fused", inputs, outputs=[(d, shape) for d in out_dtypes])
    text = text.replace(".kernel fused cpu 1", f'.kernel fused cpu 1 x"{payload.hex()}"')
    return run_text(text, inputs, len(out_dtypes))


GELU_WB = encode(["f32"] * 3, ["f32"], ["f32"] * 4,
                 [("load", 0, 0), ("load", 1, 1), ("mul", 2, 0, 1), ("load", 3, 2), ("add", 2, 2, 3),
                  ("gelu", 2, 2), ("store", 0, 2)])


def test_docs_example():
    """The bytes of docs/fused.md section 8."""
    assert GELU_WB.hex() == (
        "44564d46010003010400070000000000000000000000000001000000000000000000000000000000"
        "01010100000000000000000000000000080200010000000000000000000000000103020000000000"
        "00000000000000000602020300000000000000000000000020020200000000000000000000000000"
        "02000200000000000000000000000000")


SIZES = [(1, 1), (7, 13), (3, 257), (31, 1025), (0, 5), (65, 300), (2, 70001), (5, 4099)]


def gelu64(v):
    return unary_reference("gelu", v)


@pytest.mark.parametrize("n,m", SIZES)
def test_gelu_bias(n, m):
    x = rng.standard_normal((n, m)).astype(np.float32) * 3
    w = rng.standard_normal(m).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    got = run_fused(GELU_WB, [x, w, b], [np.float32], shapefn="broadcast")[0]
    want = gelu64((x * w + b).astype(np.float32).astype(np.float64))
    assert got.shape == (n, m)
    assert np.max(ulps(got, want, np.float32), initial=0) <= 5


@pytest.mark.parametrize("xs,ws,bs", [
    ((1500, 33), (33,), (33,)),          # suffix inputs past one thread's chunk: pos mod 33 at chunk starts
    ((3, 5, 7), (1, 7), (5, 7)),         # suffixes with a leading 1, of two lengths
    ((1500, 33), (33,), (1500, 1)),      # a suffix next to a column (the cursor for that one)
    ((4, 300), (300,), (4, 1)),          # rows of 300: read in place, blocks at row ends
    ((2, 3, 4), (3, 1), (4,)),           # [3, 1] is no suffix of [2, 3, 4]
])
def test_broadcast_loads(xs, ws, bs):
    """Broadcast inputs that repeat along the leading dims are copied from
    their element pos mod size, others gathered: the same results."""
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, bs))
    got = run_fused(GELU_WB, [x, w, b], [np.float32], shapefn="broadcast")[0]
    want = gelu64((x * w + b).astype(np.float32).astype(np.float64))
    assert got.shape == np.broadcast_shapes(xs, ws, bs)
    assert np.max(ulps(got, want, np.float32), initial=0) <= 5


# registers written once: r2 is made in output 0 itself, then read again
# (r3) and stored a second time (output 2: a copy); r4 is stored as f16
WRITTEN_ONCE = encode(["f32", "f32"], ["f32", "f32", "f32", "f16"], ["f32"] * 5,
                      [("load", 0, 0), ("load", 1, 1), ("add", 2, 0, 1), ("store", 0, 2), ("mul", 3, 2, 0),
                       ("store", 1, 3), ("store", 2, 2), ("neg", 4, 3), ("store", 3, 4)])


@pytest.mark.parametrize("xs,ys", [((7,), (7,)), ((3, 1025), (1025,)), ((300, 257), (300, 1)), ((5000, 33), (33,))])
def test_outputs_written_in_place(xs, ys):
    """A register written once in an output's dtype lives in the output:
    the same results as through a register of its own."""
    x, y = (rng.standard_normal(s).astype(np.float32) for s in (xs, ys))
    o0, o1, o2, o3 = run_fused(WRITTEN_ONCE, [x, y], [np.float32, np.float32, np.float32, np.float16])
    s = x + y
    np.testing.assert_array_equal(o0, s)
    np.testing.assert_array_equal(o1, s * x)
    np.testing.assert_array_equal(o2, s)
    np.testing.assert_array_equal(o3, (-(s * x)).astype(np.float16))


SOFTMAX_EXP = encode(["f32", "f32"], ["f32"], ["f32", "f32"],
                     [("load", 0, 0), ("load", 1, 1), ("sub", 0, 0, 1), ("exp", 0, 0), ("store", 0, 0)])


@pytest.mark.parametrize("n,m", SIZES)
def test_softmax_exp(n, m):
    x = rng.standard_normal((n, m)).astype(np.float32) * 5
    mx = x.max(axis=1, keepdims=True) if m else np.zeros((n, 1), np.float32)
    got = run_fused(SOFTMAX_EXP, [x, mx], [np.float32])[0]
    want = np.exp((x - mx).astype(np.float64))
    assert np.max(ulps(got, want, np.float32), initial=0) <= 1


MASK_FILL = encode(["bool", "f32"], ["f32"], ["bool", "f32", "f32"],
                   [("load", 0, 0), ("load", 1, 1), ("const", 2, 0, 0, 0, -math.inf),
                    ("where", 1, 0, 1, 2), ("store", 0, 1)])


@pytest.mark.parametrize("mshape,xshape", [((7,), (3, 7)), ((3, 1), (3, 300)), ((2, 1, 257), (2, 4, 257)),
                                           ((5, 13), (5, 13)), ((), (70001,)), ((1,), ())])
def test_mask_fill(mshape, xshape):
    mask = rng.integers(0, 2, mshape).astype(np.bool_)
    x = rng.standard_normal(xshape).astype(np.float32)
    got = run_fused(MASK_FILL, [mask, x], [np.float32])[0]
    np.testing.assert_array_equal(got, np.where(mask, x, np.float32(-np.inf)))


# ---- random programs ----

EXACT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
                "min": np.minimum, "max": np.maximum}
EXACT_UNARY = {"neg": np.negative, "abs": np.abs, "relu": lambda v: np.maximum(v, np.float32(0)),
               "reciprocal": lambda v: np.float32(1) / v}
MATH = ["exp", "tanh", "sigmoid", "erf"]
CMP = {"less": np.less, "greater_equal": np.greater_equal, "equal": np.equal}


def random_program(seed, nin, nregs=6, length=14):
    """A random f32 program over nin inputs, with its NumPy model. Registers
    are reused at random (so several instructions write one); constants,
    compares and where are mixed in; math ops are applied to bounded values
    (tanh first) so the model's float64 stays close."""
    r = np.random.default_rng(seed)
    code, model, live = [], [], []
    for k in range(nin):
        code.append(("load", k, k))
        model.append(("load", k, k))
        live.append(k)
    for _ in range(length):
        dst = int(r.integers(0, nregs))
        kind = r.choice(["bin", "un", "math", "const", "where"])
        a, b = (int(r.choice(live)) for _ in range(2))
        if kind == "bin":
            op = str(r.choice(list(EXACT_BINARY)))
            code.append((op, dst, a, b))
        elif kind == "un":
            op = str(r.choice(list(EXACT_UNARY)))
            code.append((op, dst, a))
        elif kind == "math":
            code.append(("tanh", dst, a))
            code.append((str(r.choice(MATH)), dst, dst))
        elif kind == "const":
            code.append(("const", dst, 0, 0, 0, float(r.standard_normal())))
        else:  # a bool register (the last one) for the condition
            cmp = str(r.choice(list(CMP)))
            code.append((cmp, nregs, a, b))
            code.append(("where", dst, nregs, b, a))
        if dst not in live:
            live.append(dst)
    code.append(("store", 0, int(live[-1])))
    return code, ["f32"] * nregs + ["bool"]


def evaluate_program(code, inputs, shape):
    """The program on NumPy float32 arrays; math ops through float64."""
    regs = {}
    for ins in code:
        op, dst, a, b, c, imm = (list(ins) + [0] * 5)[:6]
        if op == "load":
            regs[dst] = np.broadcast_to(inputs[a], shape).astype(np.float32)
        elif op == "const":
            regs[dst] = np.full(shape, imm, np.float32)
        elif op in EXACT_BINARY:
            with np.errstate(all="ignore"):
                regs[dst] = EXACT_BINARY[op](regs[a], regs[b]).astype(np.float32)
        elif op in EXACT_UNARY:
            with np.errstate(all="ignore"):
                regs[dst] = EXACT_UNARY[op](regs[a]).astype(np.float32)
        elif op in MATH or op == "tanh":
            regs[dst] = unary_reference(op, regs[a]).astype(np.float32).reshape(shape)
        elif op in CMP:
            regs[dst] = CMP[op](regs[a], regs[b])
        elif op == "where":
            regs[dst] = np.where(regs[a], regs[b], regs[c])
        elif op == "store":
            return regs[a]


@pytest.mark.parametrize("seed", range(12))
def test_random_chains(seed):
    r = np.random.default_rng(100 + seed)
    n, m = [(1, 1), (7, 13), (3, 257), (65, 300), (2, 4099), (31, 1025)][seed % 6]
    shapes = [(n, m), (m,), (n, 1), ()]
    nin = 1 + seed % 4
    inputs = [(r.standard_normal(shapes[k]) * 2).astype(np.float32) for k in range(nin)]
    code, regs = random_program(seed, nin)
    payload = encode(["f32"] * nin, ["f32"], regs, code)
    got = run_fused(payload, inputs, [np.float32], shape=(n, m))[0]
    want = evaluate_program(code, inputs, (n, m))
    # exact ops agree bit for bit; math ops within a few ulp, which later
    # ops may magnify: compare as values
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5, equal_nan=True)


# ---- dtypes ----

def test_half_types():
    """f16 and bf16 in and out, computed in f32."""
    x16 = rng.standard_normal((5, 300)).astype(np.float16)
    w = rng.standard_normal(300).astype(np.float32)
    p = encode(["f16", "f32"], ["f16", "f32"], ["f32", "f32"],
               [("load", 0, 0), ("load", 1, 1), ("mul", 0, 0, 1), ("store", 0, 0), ("store", 1, 0)])
    h, f = run_fused(p, [x16, w], [np.float16, np.float32])
    want = x16.astype(np.float32) * w
    np.testing.assert_array_equal(f, want)
    np.testing.assert_array_equal(h, want.astype(np.float16))
    # bf16: through cast kernels around the fused one
    xb = bf16_round(rng.standard_normal((3, 257)))
    p = encode(["bf16"], ["bf16"], ["f32"], [("load", 0, 0), ("sigmoid", 0, 0), ("store", 0, 0)])
    got = run_chain([xb], [("cast", ["x0"], (), "bf16", "same"), ("fused", [0], (), "bf16", "same"),
                           ("cast", [1], (), np.float32, "same")], [2], payloads={"fused": p})[0]
    assert np.max(ulps(got, unary_reference("sigmoid", xb), BF16)) <= 1


def test_integers_and_bools():
    """i32/i64 arithmetic wraps in i64; i64 -> i32 stores keep the low bits;
    compares, logic and casts between the register types."""
    a = rng.integers(-2 ** 31, 2 ** 31, (4, 65)).astype(np.int32)
    b = rng.integers(-2 ** 62, 2 ** 62, (65,)).astype(np.int64)
    m = rng.integers(0, 2, (4, 1)).astype(np.bool_)
    p = encode(["i32", "i64", "bool"], ["i32", "i64", "bool", "f32"], ["i64", "i64", "bool", "bool", "f32"],
               [("load", 0, 0), ("load", 1, 1), ("mul", 0, 0, 1), ("add", 0, 0, 1), ("store", 0, 0),
                ("const", 1, 0, 0, 0, -7), ("max", 1, 1, 0), ("neg", 1, 1), ("abs", 1, 1), ("store", 1, 1),
                ("load", 2, 2), ("less", 3, 0, 1), ("xor", 3, 3, 2), ("not", 3, 3), ("store", 2, 3),
                ("cast", 4, 3), ("cast", 0, 4), ("where", 1, 2, 0, 1), ("cast", 4, 1), ("store", 3, 4)])
    i32, i64, bl, f = run_fused(p, [a, b, m], [np.int32, np.int64, np.bool_, np.float32])
    A, B = a.astype(np.int64), b
    with np.errstate(all="ignore"):
        r0 = A * B + B
        r1 = np.abs(-np.maximum(np.int64(-7), r0))
    np.testing.assert_array_equal(i32, r0.astype(np.int32))
    np.testing.assert_array_equal(i64, r1)
    r3 = ~((r0 < r1) ^ m)
    np.testing.assert_array_equal(bl, r3)
    np.testing.assert_array_equal(f, np.where(m, r3.astype(np.int64), r1).astype(np.float32))


def test_float_int_casts():
    x = np.array([1.5, -1.5, 2.9, np.nan, np.inf, -np.inf, 1e19, -0.0, 0.0, 3e9], np.float32)
    p = encode(["f32"], ["i64", "bool", "f32"], ["f32", "i64", "bool", "f32"],
               [("load", 0, 0), ("cast", 1, 0), ("store", 0, 1), ("cast", 2, 0), ("store", 1, 2),
                ("cast", 3, 1), ("store", 2, 3)])
    i, bl, back = run_fused(p, [x], [np.int64, np.bool_, np.float32])
    mn = np.iinfo(np.int64).min
    np.testing.assert_array_equal(i, [1, -1, 2, mn, mn, mn, mn, 0, 0, 3000000000])
    np.testing.assert_array_equal(bl, x != 0)
    np.testing.assert_array_equal(back, i.astype(np.float32))


def test_scalar_and_zero_d_inputs():
    x = np.array(2.5, np.float32)  # 0-d
    y = rng.standard_normal((3, 5)).astype(np.float32)
    p = encode(["f32", "f32"], ["f32"], ["f32", "f32"],
               [("load", 0, 0), ("load", 1, 1), ("pow", 1, 1, 0), ("store", 0, 1)])
    got = run_fused(p, [x, np.abs(y)], [np.float32])[0]
    np.testing.assert_allclose(got, np.abs(y) ** np.float32(2.5), rtol=1e-6)
    got = run_fused(p, [x, np.array([3.0], np.float32)], [np.float32])[0]
    assert got.shape == (1,) and abs(got[0] - 3.0 ** 2.5) < 1e-4
    p1 = encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("sqrt", 0, 0), ("store", 0, 0)])
    got = run_fused(p1, [x], [np.float32], shapefn="same")[0]
    assert got.shape == () and got == np.sqrt(np.float32(2.5))


def test_output_with_leading_ones_past_the_inputs_rank():
    """A one-element constant folded into the program keeps its rank in the
    output's ([1,5,7,9] * [1,1,1,1,1] is [1,1,5,7,9]): leading 1s are
    accepted, any other extra dim is refused."""
    x = rng.standard_normal((1, 5, 7, 9)).astype(np.float32)
    p = encode(["f32"], ["f32"], ["f32", "f32"],
               [("load", 0, 0), ("const", 1, 0, 0, 0, 2.0), ("mul", 0, 0, 1), ("relu", 0, 0), ("store", 0, 0)])
    got = run_fused(p, [x], [np.float32], shape=(1, 1, 1, 5, 7, 9))[0]
    np.testing.assert_array_equal(got, np.maximum(x * np.float32(2), 0).reshape(1, 1, 1, 5, 7, 9))
    with pytest.raises(DvmError, match=r"output \[2,1,5,7,9\] != \[1,5,7,9\]"):
        run_fused(p, [x], [np.float32], shape=(2, 1, 5, 7, 9))


def test_multi_writer_registers():
    """Constants and loads into registers other instructions also write are
    run per block, not hoisted or read in place."""
    x = rng.standard_normal((3, 4099)).astype(np.float32)
    p = encode(["f32", "f32"], ["f32", "f32"], ["f32", "f32"],
               [("load", 0, 0), ("const", 1, 0, 0, 0, 2.0), ("mul", 0, 0, 1), ("load", 1, 1),
                ("add", 1, 1, 0), ("store", 1, 1), ("const", 1, 0, 0, 0, 0.5), ("mul", 0, 0, 1),
                ("store", 0, 0)])
    s = np.array(3.0, np.float32)
    a, b = run_fused(p, [x, s], [np.float32, np.float32])
    np.testing.assert_array_equal(b, x * 2 + 3)
    np.testing.assert_array_equal(a, x * 2 * np.float32(0.5))


def run_in_place(p, x):
    """Fused program p on x, its output written over x's register (r0)."""
    text = dvmop.program("fused", [x], outputs=[(np.float32, x.shape)])
    text = text.replace(".kernel fused cpu 1", f'.kernel fused cpu 1 x"{p.hex()}"')
    out_reg = text.split("invoke fused, -, (")[1].split(")")[0]
    text = text.replace(f"invoke fused, -, ({out_reg})", "invoke fused, -, (r0)").replace(
        f"ret ({out_reg})", "ret (r0)")
    return run_text(text, [x], 1)[0]


def test_inplace_output():
    """The output is the input's memory: every block is read before it is
    written, and the input is not read in place."""
    x = rng.standard_normal((4, 70001)).astype(np.float32)
    p = encode(["f32"], ["f32"], ["f32", "f32"],
               [("load", 0, 0), ("exp", 1, 0), ("sub", 1, 1, 0), ("store", 0, 1)])
    got = run_in_place(p, x)
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)) - x, rtol=1e-6, atol=1e-6)


# ---- row programs (docs/fused.md 6.1) ----

ROWS_P = encode(["f32"] * 3, ["f32"] * 2, ["f32"] * 6,
                [("load", 0, 0), ("row_max", 1, 0), ("sub", 1, 0, 1), ("exp", 1, 1), ("row_sum", 2, 1),
                 ("div", 1, 1, 2), ("load", 3, 1), ("add", 2, 3, 3), ("load", 4, 2), ("mul", 1, 1, 4),
                 ("add", 1, 1, 2), ("store", 0, 1), ("row_mean", 2, 0), ("row_min", 5, 0), ("sub", 2, 2, 5),
                 ("mul", 2, 2, 0), ("store", 1, 2)], flags=1)


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (2, 3, 769), (0, 5), (3, 0), (700, 37), (2, 20011)])
def test_row_program(shape):
    """softmax(x) * w + 2 r and (mean(x) - min(x)) * x over the last dim,
    r a per-row input [..., 1] and w a row [L]: NumPy's values, at row
    lengths 1 and primes, 0 rows and 0-length rows, rows split over
    threads, and rows past the stack's registers."""
    x = rng.standard_normal(shape).astype(np.float32)
    r = rng.standard_normal(shape[:-1] + (1,)).astype(np.float32)
    w = rng.standard_normal(shape[-1:]).astype(np.float32)
    y0, y1 = run_fused(ROWS_P, [x, r, w], [np.float32, np.float32])
    x64 = x.astype(np.float64)
    if x.size:
        e = np.exp(x64 - x64.max(-1, keepdims=True))
        want0 = e / e.sum(-1, keepdims=True) * w + 2 * r
        want1 = (x64.mean(-1, keepdims=True) - x64.min(-1, keepdims=True)) * x64
    else:
        want0 = want1 = np.zeros(shape)
    assert y0.shape == y1.shape == shape
    np.testing.assert_allclose(y0, want0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y1, want1, rtol=1e-5, atol=1e-5)


def test_row_program_in_place():
    """A row program whose output is its input's memory: x - mean(x)."""
    x = rng.standard_normal((5, 1000)).astype(np.float32)
    p = encode(["f32"], ["f32"], ["f32", "f32"], [("load", 0, 0), ("row_mean", 1, 0), ("sub", 1, 0, 1),
                                                  ("store", 0, 1)], flags=1)
    got = run_in_place(p, x)
    np.testing.assert_allclose(got, x - x.astype(np.float64).mean(-1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_inplace_two_outputs():
    """Output 0 over the input, and a stored register rewritten after its
    store: the store keeps the value it had."""
    x = rng.standard_normal((3, 70001)).astype(np.float32)
    p = encode(["f32"], ["f32", "f32"], ["f32", "f32"],
               [("load", 0, 0), ("exp", 1, 0), ("store", 0, 1), ("sub", 1, 1, 0), ("store", 1, 1)])
    text = dvmop.program("fused", [x], outputs=[(np.float32, x.shape)] * 2)
    text = text.replace(".kernel fused cpu 1", f'.kernel fused cpu 1 x"{p.hex()}"')
    outs = text.split("invoke fused, -, (")[1].split(")")[0].split(", ")
    text = text.replace(f"invoke fused, -, ({outs[0]},", "invoke fused, -, (r0,").replace(
        f"ret ({outs[0]},", "ret (r0,")
    a, b = run_text(text, [x], 2)
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(a, e, rtol=1e-6)
    np.testing.assert_allclose(b, e - x, rtol=1e-6, atol=1e-6)


def test_streaming_stores():
    """Outputs of 16 MiB or more go out with streaming stores."""
    x = rng.standard_normal((1100, 4099)).astype(np.float32)  # 18 MB
    b = rng.standard_normal(4099).astype(np.float32)
    p = encode(["f32", "f32"], ["f32", "f16"], ["f32", "f32"],
               [("load", 0, 0), ("load", 1, 1), ("add", 1, 0, 1), ("relu", 1, 1), ("store", 0, 1),
                ("store", 1, 1)])
    f, h = run_fused(p, [x, b], [np.float32, np.float16])
    want = np.maximum(x + b, 0)
    np.testing.assert_array_equal(f, want)
    np.testing.assert_array_equal(h, want.astype(np.float16))


# ---- corrupt payloads ----

def with_bytes(p, at, values):
    b = bytearray(p)
    b[at:at + len(values)] = values
    return bytes(b)


CORRUPT = [
    (b"DVMF", r"4 bytes, shorter than the 16-byte header"),
    (b"XXXX" + GELU_WB[4:], r"bad magic \(not a fused program\)"),
    (encode(["f32"] * 3, ["f32"], ["f32"] * 4, [("load", 0, 0)] * 7, version=2),
     r"version 2, this dvm reads version 1"),
    (with_bytes(GELU_WB, 6, [0]), r"0 inputs \(want 1 to 16\)"),
    (with_bytes(GELU_WB, 6, [17]), r"17 inputs \(want 1 to 16\)"),
    (with_bytes(GELU_WB, 7, [9]), r"9 outputs \(want 1 to 8\)"),
    (with_bytes(GELU_WB, 8, [33]), r"33 registers \(want 1 to 32\)"),
    (with_bytes(GELU_WB, 10, [0, 1]), r"256 instructions, its counts say|program: 136 bytes, its counts say 4120"),
    (with_bytes(GELU_WB, 10, [1, 1]), r"257 instructions \(want 1 to 256\)"),
    (with_bytes(GELU_WB, 9, [2]), r"unknown flags 0x02 \(want 0 or 0x01, rows\)"),
    (with_bytes(GELU_WB, 12, [1]), r"reserved header bytes are not zero"),
    (with_bytes(GELU_WB, 24 + 16 * 5, [35]),
     r"instruction 5 \(row_sum\): a row reduction needs the rows flag in the header"),
    (GELU_WB + b"\0" * 16, r"152 bytes, its counts say 136"),
    (GELU_WB[:-1], r"135 bytes, its counts say 136"),
    (with_bytes(GELU_WB, 16, [3]), r"input 0 has dtype f64 \(want f32, f16, bf16, i32, i64 or bool\)"),
    (with_bytes(GELU_WB, 19, [99]), r"output 0 has unknown dtype 99"),
    (with_bytes(GELU_WB, 20, [6]), r"register 0 has type i32 \(want f32, i64 or bool\)"),
    (encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("store", 0, 0)])[:19] + b"\x01" +
     encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("store", 0, 0)])[20:],
     r"padding byte 19 is not zero"),
    (with_bytes(GELU_WB, 24 + 16 * 2, [99]), r"instruction 2: unknown opcode 99"),
    (with_bytes(GELU_WB, 24 + 16 * 2, [0]), r"instruction 2: unknown opcode 0"),
    (with_bytes(GELU_WB, 24 + 16 * 2 + 5, [1]), r"instruction 2 \(mul\): reserved bytes are not zero"),
    (with_bytes(GELU_WB, 24 + 16 * 2 + 8, [1]), r"instruction 2 \(mul\): the immediate is unused and must be 0"),
    (with_bytes(GELU_WB, 24 + 16 * 2 + 3, [4]), r"instruction 2 \(mul\): b register 4 is out of range \(4 registers\)"),
    (with_bytes(GELU_WB, 24 + 16 * 2 + 3, [3]), r"instruction 2 \(mul\): b register 3 is read before it is written"),
    (with_bytes(GELU_WB, 24 + 16 * 2 + 4, [1]), r"instruction 2 \(mul\): operand c is unused and must be 0, got 1"),
    (with_bytes(GELU_WB, 24 + 2, [3]), r"instruction 0 \(load\): input 3 is out of range \(3 inputs\)"),
    (with_bytes(GELU_WB, 24 + 16 * 6 + 1, [1]), r"instruction 6 \(store\): output 1 is out of range \(1 outputs\)"),
    (with_bytes(GELU_WB, 24 + 16 * 6, [OPS["mov"]]), r"output 0 is never stored"),
    (encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("store", 0, 0), ("store", 0, 0)]),
     r"instruction 2 \(store\): output 0 is stored twice"),
    (encode(["f32"], ["f32"], ["f32", "i64"], [("load", 0, 0), ("cast", 1, 0), ("add", 0, 0, 1), ("store", 0, 0)]),
     r"instruction 2 \(add\): b register 1 is i64, want f32"),
    (encode(["f32"], ["f32"], ["f32", "i64"], [("load", 0, 0), ("cast", 1, 0), ("exp", 1, 1), ("store", 0, 0)]),
     r"instruction 2 \(exp\): a register 1 is i64, want f32"),
    (encode(["bool"], ["bool"], ["bool"], [("load", 0, 0), ("add", 0, 0, 0), ("store", 0, 0)]),
     r"instruction 1 \(add\): a register 0 is bool, want f32 or i64"),
    (encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("less", 0, 0, 0), ("store", 0, 0)]),
     r"instruction 1 \(less\): destination register 0 is f32, want bool"),
    (encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("where", 0, 0, 0, 0), ("store", 0, 0)]),
     r"instruction 1 \(where\): a register 0 is f32, want bool"),
    (encode(["i64"], ["f32"], ["f32"], [("load", 0, 0), ("store", 0, 0)]),
     r"instruction 0 \(load\): destination register 0 is f32, want i64"),
    (encode(["f32"], ["i32"], ["f32"], [("load", 0, 0), ("store", 0, 0)]),
     r"instruction 1 \(store\): source register 0 is f32, want i64"),
    (encode(["f32"], ["bool"], ["bool"], [("const", 0, 0, 0, 0, 2), ("store", 0, 0)]),
     r"instruction 0 \(const\): a bool immediate must be 0 or 1, got 2"),
    (encode(["f32"], ["f32"], ["f32"], [("const", 0, 1, 0, 0, 1.0), ("store", 0, 0)]),
     r"instruction 0 \(const\): operand a is unused and must be 0, got 1"),
    (encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), ("div", 0, 0, 0), ("store", 0, 0)])[:-16] +
     struct.pack("<BBBBB3xq", OPS["store"], 0, 5, 0, 0, 0),
     r"instruction 2 \(store\): source register 5 is out of range \(1 registers\)"),
]


@pytest.mark.parametrize("payload,message", CORRUPT, ids=[f"rule{i}" for i in range(len(CORRUPT))])
def test_corrupt(payload, message):
    x = np.ones((2, 3), np.float32)
    nin = payload[6] if len(payload) > 6 and 1 <= payload[6] <= 16 else 3
    ins = [x] * min(nin, 3)
    with pytest.raises(DvmError, match=r'kernel "fused": fused: program: ' + message):
        run_fused(payload, ins, [np.float32], shape=(2, 3))


def test_call_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(DvmError, match=r"fused: takes 3 inputs and 1 output, got 2 and 1"):
        run_fused(GELU_WB, [x, x], [np.float32])
    with pytest.raises(DvmError, match=r"fused: input 1 is i64, the program says f32"):
        run_fused(GELU_WB, [x, x.astype(np.int64), x], [np.float32])
    with pytest.raises(DvmError, match=r"fused: output 0 is f16, the program says f32"):
        run_fused(GELU_WB, [x, x, x], [np.float16])
    with pytest.raises(DvmError, match=r"fused: broadcast: \[2,3\] vs \[4\]: dim -1 3 != 4"):
        run_fused(GELU_WB, [x, x, np.ones(4, np.float32)], [np.float32], shape=(2, 3))
    with pytest.raises(DvmError, match=r"fused: output \[3,2\] != \[2,3\], the broadcast of \[2,3\], \[3\] and \[\]"):
        run_fused(GELU_WB, [x, x[0], np.float32(1)], [np.float32], shape=(3, 2))
    two = encode(["f32"], ["f32", "f32"], ["f32"], [("load", 0, 0), ("store", 0, 0), ("store", 1, 0)])
    text = dvmop.program("fused", [x], outputs=[(np.float32, (2, 3)), (np.float32, (3,))])
    text = text.replace(".kernel fused cpu 1", f'.kernel fused cpu 1 x"{two.hex()}"')
    with pytest.raises(DvmError, match=r"fused: output 1 \[3\] != output 0 \[2,3\]"):
        run_text(text, [x], 2)
    text = dvmop.program("fused", [x], [1], outputs=[(np.float32, (2, 3))])
    with pytest.raises(DvmError, match=r'fused: program: none \(kernel "fused" needs its program as the payload\)'):
        run_text(text, [x], 1)
    text = text.replace(".kernel fused cpu 1", f'.kernel fused cpu 1 x"{two.hex()}"')
    with pytest.raises(DvmError, match=r"fused: takes 1 input and 2 outputs, got 1 and 1"):
        run_text(text, [x], 1)


def test_mutated_payloads():
    """Random byte changes of valid programs: each run works or fails with
    a program error, never worse."""
    r = np.random.default_rng(7)
    x = r.standard_normal((3, 5)).astype(np.float32)
    base = [GELU_WB, MASK_FILL, SOFTMAX_EXP]
    for k in range(60):
        p = bytearray(base[k % 3])
        for _ in range(1 + k % 3):
            p[int(r.integers(0, len(p)))] = int(r.integers(0, 256))
        nin = p[6] if 1 <= p[6] <= 3 else 3
        ins = [x.astype(np.bool_) if (k % 3 == 1 and i == 0) else x for i in range(nin)]
        try:
            run_fused(bytes(p), ins, [np.float32], shape=(3, 5))
        except DvmError as e:
            assert e.rc == 2 and 'kernel "fused": fused: ' in e.message, e.message


def _math_rows():
    """(text, own kernel?) of every row of ops/cpu/unary_math.h."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../ops/cpu/unary_math.h")
    rows = re.findall(r'^\s*X\(\w+, (\d+), "(\w+)", ([01]),', open(path).read(), re.M)
    assert len(rows) >= 9, rows
    return [(text, own == "1", int(code)) for code, text, own in rows]


@pytest.mark.parametrize("text,own,code", _math_rows())
def test_math_rows_fused_equals_kernel(text, own, code):
    """The fused program's loop and the unary kernel are made from the
    same row: bit-identical results, and the opcode this test file knows."""
    assert OPS[text] == code
    x = np.concatenate([rng.standard_normal(1000) * 4, [0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 20.0,
                                                        -20.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    if text in ("sqrt", "log"):
        x = np.abs(x)
    prog = encode(["f32"], ["f32"], ["f32"], [("load", 0, 0), (text, 0, 0), ("store", 0, 0)])
    fused = run_fused(prog, [x], [np.float32])[0]
    if own:
        kernel = run1(text, [x], shapefn="same")
    else:  # gelu's two forms: the gelu kernel's approximate attribute
        kernel = run1("gelu", [x], [1 if text == "gelu_tanh" else 0], shapefn="same")
    np.testing.assert_array_equal(fused.view(np.uint32), kernel.view(np.uint32))


@pytest.mark.parametrize("exps", ["twos", "mixed"])
def test_pow_fused_equals_kernel(exps):
    """pow in a fused program and the binary kernel agree bit for bit: an
    exponent of 2 is a multiply in both (a block of only 2s takes the vector
    loop), any other goes to libm in both. 1037 elements span several blocks."""
    x = np.concatenate([rng.standard_normal(1024) * 3, [0.0, -0.0, 1e-30, 1e19, -1e19, 3e38, np.inf,
                                                       -np.inf, np.nan, 1.5, -2.5, 7.0, 0.5]]).astype(np.float32)
    if exps == "twos":
        e = np.full_like(x, 2.0)
    else:
        e = rng.choice(np.array([2.0, 0.5, 3.0, -1.0, 2.0000002], np.float32), x.shape)
    prog = encode(["f32", "f32"], ["f32"], ["f32", "f32"],
                  [("load", 0, 0), ("load", 1, 1), ("pow", 0, 0, 1), ("store", 0, 0)])
    fused = run_fused(prog, [x, e], [np.float32])[0]
    kernel = run1("pow", [x, e], shapefn="broadcast")
    np.testing.assert_array_equal(fused.view(np.uint32), kernel.view(np.uint32))
    if exps == "twos":
        np.testing.assert_array_equal(fused, x * x)
