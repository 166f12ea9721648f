"""Kernels that declare `inplace` (vm/kernel.h): output 0 written into the
very memory of an input of its byte size gives the same bytes as a fresh
output. The compiler's memory plan relies on it (compiler/plan.h), so every
kernel so marked is here, at shapes that cross thread chunks, short and long
rows and strided axes, each aliased input in turn."""
import numpy as np
import pytest

from dvmop import Shape, run
from test_fused import GELU_WB, MASK_FILL, SOFTMAX_EXP, encode, run_fused

rng = np.random.default_rng(11)
BIG = (3, 40009)  # several thread chunks, an odd tail


def urand(shape, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def boolean(shape):
    return rng.integers(0, 2, shape).astype(np.bool_)


UNARY = {"sqrt": ((), 0.0), "exp": ((), -3.0), "log": ((), 0.01), "tanh": ((), -3.0), "erf": ((), -3.0),
         "sigmoid": ((), -3.0), "gelu": ((0,), -3.0), "reciprocal": ((), 0.5), "relu": ((), -3.0),
         "neg": ((), -3.0), "abs": ((), -3.0), "clip": ((-1.0, 0.5), -3.0),
         "sin": ((), -3.0), "cos": ((), -3.0), "tan": ((), -1.0), "asin": ((), -0.9), "acos": ((), -0.9),
         "atan": ((), -3.0), "sinh": ((), -3.0), "cosh": ((), -3.0), "asinh": ((), -3.0), "acosh": ((), 1.0),
         "atanh": ((), -0.9), "ceil": ((), -3.0), "floor": ((), -3.0), "round": ((), -3.0), "sign": ((), -3.0),
         "softplus": ((), -3.0), "softsign": ((), -3.0), "mish": ((), -3.0), "elu": ((0.5,), -3.0),
         "selu": ((1.5, 1.1), -3.0), "leaky_relu": ((0.1,), -3.0), "thresholded_relu": ((0.5,), -3.0),
         "celu": ((0.7,), -3.0), "shrink": ((0.2, 0.5), -3.0), "swish": ((1.5,), -3.0)}
BINARY = ["add", "sub", "mul", "div", "pow", "min", "max"]
INT_BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor"]
# (the comparisons are not in place: a broadcast input of another dtype can
# have the output's byte size and not its shape)
LOGIC = ["and", "or", "xor"]

# kernel -> [(inputs, attrs, how outputs are shaped, aliased input indices, nout)]
CASES = {}
for op, (attrs, lo) in UNARY.items():
    CASES[op] = [([urand(s, lo)], list(attrs), "same", [0], 1) for s in [(7,), BIG]]
CASES["not"] = [([boolean(BIG)], [], "same", [0], 1)]
for op in BINARY:
    CASES[op] = [([urand(BIG, 0.5), urand(BIG, 0.5)], [], "broadcast", [0, 1], 1),
                 ([urand((5, 1, 33), 0.5), urand((33,), 0.5)], [], "broadcast", [0], 1),
                 ([urand((1,), 0.5), urand((4, 17), 0.5)], [], "broadcast", [1], 1)]
CASES["mod"] = [([urand(BIG), urand((40009,), 0.5)], [fmod], "broadcast", [0], 1) for fmod in (0, 1)]


def i32(shape, lo=-1000, hi=1000):
    return rng.integers(lo, hi, shape).astype(np.int32)


for op in INT_BINARY:
    CASES[op] = [([i32(BIG), i32(BIG)], [], "broadcast", [0, 1], 1),
                 ([i32((5, 1, 33)), i32((33,))], [], "broadcast", [0], 1)]
CASES["bit_shift"] = [([i32(BIG), i32((40009,), -2, 40)], [d], "broadcast", [0], 1) for d in (0, 1)]
CASES["bitwise_not"] = [([i32(BIG)], [], "same", [0], 1)]
for op in LOGIC:
    CASES[op] = [([boolean(BIG), boolean(BIG)], [], "broadcast", [0, 1], 1)]
CASES["where"] = [([boolean(BIG), urand(BIG), urand((40009,))], [], "broadcast", [1], 1)]
CASES["bitcast"] = [([urand(s)], [], "same", [0], 1) for s in [(7,), BIG]]
OUT_DTYPES = {"where": [np.float32], "bitcast": [np.int32]}
CASES["softmax"] = CASES["logsoftmax"] = [
    ([urand(s, -9, 9)], [axis], "same", [0], 1)
    for s, axis in [((4, 128), -1), ((3, 1025), 1), ((2, 65, 33), 1), ((6, 7), 0)]] + [
    ([urand((3, 77), -9, 9).astype(np.float16)], [-1], "same", [0], 1)]
CASES["layernorm"] = [([urand((4, 96)), urand((96,)), urand((96,))], [-1, 1e-5], "layernorm", [0], n) for n in (1, 3)] + [
    ([urand((2, 5, 300)), urand((5, 300))], [1, 1e-5], "layernorm", [0], 1)]
CASES["rmsnorm"] = [([urand((4, 96)), urand((96,))], [-1, 1e-5], "layernorm", [0], 1),
                    ([urand((2, 5, 300)), urand((5, 300))], [1, 1e-5], "layernorm", [0], 1)]
CASES["prelu"] = [([urand(BIG), urand((40009,))], [], "broadcast", [0], 1),
                  ([urand((2, 3, 5)), urand((3, 1))], [], "broadcast", [0], 1)]
# ops/cpu/norm_stats.c: inputs are copied to double first, so any input may be the output
CASES["instance_norm"] = [([urand((2, 3, 501)), urand((3,)), urand((3,))], [1e-5], "same", [0], 1),
                          ([urand((1, 3, 1)), urand((3,)), urand((3,))], [1e-5], "same", [0, 1, 2], 1)]
CASES["group_norm"] = [([urand((2, 4, 301)), urand((4,)), urand((4,))], [1e-5, 2, 1], "same", [0], 1),
                       ([urand((1, 4, 1)), urand((4,)), urand((4,))], [1e-5, 2, 1], "same", [0, 1, 2], 1)]
CASES["mvn"] = [([urand((2, 3, 7, 11))], [Shape(())], "same", [0], 1)]
CASES["lrn"] = [([urand((2, 5, 3, 7))], [1e-2, 0.75, 1.0, 3], "same", [0], 1)]
CASES["quantize_dequantize"] = [
    ([urand(s), np.array([0.02], np.float32), np.array([zp], dt), np.array([s2], np.float32), np.array([zp], dt)],
     [], "same", [0], 1) for s, dt, zp, s2 in [((7,), np.uint8, 128, 0.02), (BIG, np.int8, -3, 0.05)]]
CASES["batchnorm"] = [([urand((2, 3, 77)), urand((3,)), urand((3,)), urand((3,)), urand((3,), 0.5)], [1e-5], "same", [0], 1)]


def inplace_cases():
    out = []
    for kernel, calls in CASES.items():
        for c, (inputs, attrs, shapefn, aliased, nout) in enumerate(calls):
            for k in aliased:
                out.append(pytest.param(kernel, inputs, attrs, shapefn, k, nout, id=f"{kernel}-{c}-in{k}"))
    return out


@pytest.mark.parametrize("kernel,inputs,attrs,shapefn,k,nout", inplace_cases())
def test_inplace(kernel, inputs, attrs, shapefn, k, nout):
    dts = OUT_DTYPES.get(kernel)
    fresh = run(kernel, inputs, attrs, shapefn=shapefn, out_dtypes=dts, nout=nout)
    shared = run(kernel, inputs, attrs, shapefn=shapefn, out_dtypes=dts, nout=nout, inplace=k)
    assert fresh[0].nbytes == inputs[k].nbytes
    for a, b in zip(fresh, shared, strict=True):
        np.testing.assert_array_equal(a, b)


# x is read again after output 0 (over x) is first written: x may not be
# read in place there; READ_FIRST reads it only up to that write, so it may
READ_LATE = encode(["f32", "f32"], ["f32", "f32"], ["f32"] * 4,
                   [("load", 0, 0), ("load", 1, 1), ("add", 2, 0, 1), ("store", 0, 2), ("mul", 3, 0, 1),
                    ("store", 1, 3)])
READ_FIRST = encode(["f32", "f32"], ["f32"], ["f32"] * 4,
                    [("load", 0, 0), ("load", 1, 1), ("mul", 2, 0, 1), ("add", 3, 2, 0), ("relu", 3, 3),
                     ("store", 0, 3)])


@pytest.mark.parametrize("payload,inputs,k,nout", [
    (READ_LATE, [urand(BIG), urand(BIG)], 0, 2),
    (READ_FIRST, [urand(BIG), urand((40009,))], 0, 1),
    (GELU_WB, [urand(BIG), urand((40009,)), urand(BIG)], 0, 1),
    (GELU_WB, [urand(BIG), urand((40009,)), urand(BIG)], 2, 1),
    (SOFTMAX_EXP, [urand((5, 300)), urand((5, 1))], 0, 1),
    (MASK_FILL, [boolean((3, 300)), urand((3, 300))], 1, 1)])
def test_fused_inplace(payload, inputs, k, nout, monkeypatch):
    """The fused kernel with output 0 over input k: run_fused through the
    same program text, with the input copied into output 0's storage."""
    import dvmop
    fresh = run_fused(payload, inputs, [np.float32] * nout)
    program = dvmop.program

    def aliased(*a, **kw):
        return program(*a, **kw, inplace=k)
    monkeypatch.setattr(dvmop, "program", aliased)
    shared = run_fused(payload, inputs, [np.float32] * nout)
    for a, b in zip(fresh, shared, strict=True):
        np.testing.assert_array_equal(a, b)


def test_every_inplace_kernel_is_here():
    """The kernels marked in ops/cpu are exactly those tested above."""
    import glob
    import os
    import re
    text = "".join(open(p).read() for p in glob.glob(os.path.join(os.path.dirname(__file__), "../../ops/cpu/*.c")))
    marked = set(re.findall(r'\{"(\w+)", DVM_DEVICE_CPU, [^}]*\.inplace = 1\b', text))
    # unary.c's kernels made from ops/cpu/unary_math.h's rows (OWN 1) are in place
    rows = open(os.path.join(os.path.dirname(__file__), "../../ops/cpu/unary_math.h")).read()
    marked |= set(re.findall(r'^\s*X\(\w+, \d+, "(\w+)", 1,', rows, re.M))
    assert marked == set(CASES) | {"fused"}
