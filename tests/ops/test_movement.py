"""Movement kernels (transpose, gather, gather_elements, slice, concat, copy_into,
split, expand, tile, pad, trilu) and the view shape functions (reshape, squeeze,
unsqueeze, flatten, with_dim) against NumPy, through the whole stack, and against the
ONNX backend node tests."""
import itertools
import os

import numpy as np
import pytest
from dvmtest.paths import NODE_SUBSET as NODE_DIR

from dvmop import DTYPES, DvmError, Shape, _attr_code, run, run1, run_text

rng = np.random.default_rng(0)

# one dtype per element size, then the rest
SIZES = [np.int8, np.float16, np.float32, np.float64]
ALL = [np.bool_, np.int8, np.uint8, np.int16, np.float16, np.int32, np.float32, np.int64,
       np.float64]


def rand_any(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, dtype=dtype,
                        endpoint=True)


def i64s(*v):
    return np.array(v, np.int64)


# ---- views: a shape function and the reshape instruction ----

def run0(kernel, inputs, attrs=(), nout=1, **kw):
    """dvmop.run: one output, or a list of nout."""
    outs = run(kernel, inputs, attrs, nout=nout, **kw)
    return outs[0] if nout == 1 else outs


def run_view(fn, inputs, attrs=()):
    """Runs `shapefn fn` on the inputs and attributes, then reshapes input 0
    to the shape it gives (a view, no kernel); returns the result."""
    n = len(inputs)
    body, reg, regs = [], n, [f"r{i}" for i in range(n)]
    for a in attrs:
        code, used = _attr_code(reg, a)
        body += code
        regs.append(f"r{reg}")
        reg += used
    lines = [f".shapefn {fn}", f".func main regs={reg + 2}"]
    for i, x in enumerate(inputs):
        x = np.asarray(x)
        lines.append(f"  .param x{i} tensor {DTYPES[x.dtype]} [{', '.join(map(str, x.shape))}]")
    lines.append("  .result y any")
    lines += body
    lines.append(f"  shapefn {fn}, (r{reg}), ({', '.join(regs)})")
    lines.append(f"  reshape r{reg + 1}, r0, r{reg}")
    lines.append(f"  ret (r{reg + 1})")
    lines.append(".end")
    return run_text("\n".join(lines) + "\n", inputs)[0]


@pytest.mark.parametrize("shape,target,allowzero,want", [
    ((2, 3, 4), (4, -1), 0, (4, 6)),
    ((2, 3, 4), (0, -1), 0, (2, 12)),
    ((2, 3, 4), (-1,), 0, (24,)),
    ((2, 3, 4), (0, 0, 0, 1), 0, (2, 3, 4, 1)),
    ((2, 3, 4), (1, 1, 24), 1, (1, 1, 24)),
    ((0, 3), (3, 0), 1, (3, 0)),
    ((0, 3), (0, 3), 0, (0, 3)),
    ((0, 3), (-1, 3), 0, (0, 3)),
    ((7,), (1, 7, 1, 1, 1, 1), 0, (1, 7, 1, 1, 1, 1)),
    ((), (1, 1), 0, (1, 1)),
    ((1, 1), (), 0, ()),
])
def test_reshape(shape, target, allowzero, want):
    x = rand_any(shape)
    got = run_view("reshape", [x, i64s(*target)], [allowzero])
    assert got.shape == want
    np.testing.assert_array_equal(got, x.reshape(want))


def test_reshape_shape_value():
    x = rand_any((6, 4), np.int16)
    np.testing.assert_array_equal(run_view("reshape", [x], [Shape((3, 8))]), x.reshape(3, 8))


@pytest.mark.parametrize("shape,target,allowzero,msg", [
    ((2, 3), (4, -1), 0, r"reshape: cannot reshape \[2,3\] \(6 elements\) to \[4,-1\]"),
    ((2, 3), (5,), 0, r"reshape: cannot reshape \[2,3\] \(6 elements\) to \[5\]"),
    ((2, 3), (-1, -1), 0, r"reshape: target \[-1,-1\] has more than one -1"),
    ((2, 3), (2, -3), 0, r"reshape: target \[2,-3\]: dim 1 is negative \(-3\)"),
    ((2, 3), (1, 2, 0), 0, r"reshape: target \[1,2,0\]: dim 2 is 0, a copy of a dim that"),
    ((0, 3), (0, -1), 0, r"reshape: cannot reshape \[0,3\] \(0 elements\) to \[0,-1\]"),
    ((2, 3), (0, 6), 1, r"reshape: cannot reshape \[2,3\] \(6 elements\) to \[0,6\]"),
])
def test_reshape_errors(shape, target, allowzero, msg):
    with pytest.raises(DvmError, match=msg):
        run_view("reshape", [rand_any(shape), i64s(*target)], [allowzero])


@pytest.mark.parametrize("shape,axes", [
    ((1, 3, 1, 5), (0, 2)), ((1, 3, 1, 5), (-2,)), ((1, 3, 1, 5), None), ((1, 3, 1, 5), ()),
    ((1,), (0,)), ((1, 1, 1, 1, 1, 1), None), ((2, 1, 0), (1,)), ((7, 13), ()),
])
def test_squeeze(shape, axes):
    x = rand_any(shape, np.int32)
    want = np.squeeze(x, axis=axes) if axes else np.squeeze(x)
    got = run_view("squeeze", [x] if axes is None else [x, i64s(*axes)])
    np.testing.assert_array_equal(got, want)
    if axes and min(axes) >= 0:  # axes as a shape value
        np.testing.assert_array_equal(run_view("squeeze", [x], [Shape(axes)]), want)


def test_squeeze_errors():
    with pytest.raises(DvmError, match=r"squeeze: dim 1 of \[2,3\] is 3, not 1"):
        run_view("squeeze", [rand_any((2, 3)), i64s(1)])
    with pytest.raises(DvmError, match=r"squeeze: axis 2 is out of range for rank 2"):
        run_view("squeeze", [rand_any((1, 1)), i64s(2)])
    with pytest.raises(DvmError, match=r"squeeze: axes \[0,-2\] name dim 0 twice"):
        run_view("squeeze", [rand_any((1, 1)), i64s(0, -2)])


@pytest.mark.parametrize("shape,axes", [
    ((3, 4, 5), (1,)), ((3, 4, 5), (-1,)), ((3, 4, 5), (0, 4)), ((3, 4, 5), (2, 4, 5)),
    ((), (0,)), ((), (0, 1, 2)), ((0, 2), (-1, 0)), ((2, 3), (4, 1, -3)),
])
def test_unsqueeze(shape, axes):
    x = rand_any(shape, np.float64)
    got = run_view("unsqueeze", [x, i64s(*axes)])
    np.testing.assert_array_equal(got, np.expand_dims(x, axes))


def test_unsqueeze_errors():
    with pytest.raises(DvmError, match=r"unsqueeze: axis 3 is out of range for rank 3"):
        run_view("unsqueeze", [rand_any((2, 3)), i64s(3)])
    with pytest.raises(DvmError, match=r"unsqueeze: axes \[1,1\] name dim 1 twice"):
        run_view("unsqueeze", [rand_any((2, 3)), i64s(1, 1)])
    with pytest.raises(DvmError, match=r"unsqueeze: \[1,1,1,1,1,1,1\] with 2 new dims has rank 9"):
        run_view("unsqueeze", [rand_any((1,) * 7), i64s(0, 1)])


@pytest.mark.parametrize("shape,axis", [
    ((2, 3, 4, 5), 0), ((2, 3, 4, 5), 1), ((2, 3, 4, 5), 4), ((2, 3, 4, 5), -1),
    ((2, 3, 4, 5), -4), ((7,), 1), ((), 0), ((0, 3), 1), ((3, 0, 2), 2),
])
def test_flatten(shape, axis):
    x = rand_any(shape, np.uint8)
    a = axis + len(shape) if axis < 0 else axis
    want = x.reshape(int(np.prod(shape[:a])), int(np.prod(shape[a:])))
    np.testing.assert_array_equal(run_view("flatten", [x], [axis]), want)


def test_flatten_errors():
    with pytest.raises(DvmError, match=r"flatten: axis 3 is out of range for \[2,3\] \(-2..2\)"):
        run_view("flatten", [rand_any((2, 3))], [3])


# ---- transpose ----

TRANSPOSE = [
    ((7,), (0,)), ((1, 7), (1, 0)), ((7, 1), (1, 0)), ((65, 257), (1, 0)), ((31, 13), (1, 0)),
    ((2, 3, 4, 5), (0, 1, 3, 2)), ((2, 3, 4, 5), (0, 2, 1, 3)), ((2, 3, 4, 5), (3, 2, 1, 0)),
    ((2, 3, 4, 5), (1, 0, 2, 3)), ((3, 1, 4, 1, 5), (4, 3, 2, 1, 0)), ((0, 3, 4), (2, 0, 1)),
    ((2, 3, 5, 2, 3, 2), (5, 3, 1, 4, 0, 2)), ((1, 1, 1), (2, 1, 0)),
    ((4, 9, 33), (1, 2, 0)), ((257, 1025), (1, 0)), ((8, 128, 64), (1, 0, 2)),
    ((2, 12, 65, 64), (0, 2, 1, 3)), ((2, 12, 65, 64), (0, 1, 3, 2)),
]


@pytest.mark.parametrize("shape,perm", TRANSPOSE)
def test_transpose(shape, perm):
    x = rand_any(shape)
    np.testing.assert_array_equal(run1("transpose", [x], [Shape(perm)]), x.transpose(perm))


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
@pytest.mark.parametrize("dtype", SIZES)
def test_transpose_perms(perm, dtype):
    x = rand_any((13, 31, 7), dtype)
    np.testing.assert_array_equal(run1("transpose", [x], [Shape(perm)]), x.transpose(perm))


@pytest.mark.parametrize("dtype", ALL)
def test_transpose_dtypes(dtype):
    x = rand_any((5, 33, 17), dtype)
    np.testing.assert_array_equal(run1("transpose", [x]), x.transpose())


def test_transpose_errors():
    with pytest.raises(DvmError, match=r"transpose: perm \[0,0\] is not a permutation of the 2 "
                                       r"dims of \[2,3\]"):
        run1("transpose", [rand_any((2, 3))], [Shape((0, 0))])
    with pytest.raises(DvmError, match=r"transpose: perm \[1,0\] is not a permutation of the 3"):
        run1("transpose", [rand_any((2, 3, 4))], [Shape((1, 0))])
    with pytest.raises(DvmError, match=r"transpose: output 0 has shape \[2,3\], want \[3,2\]"):
        run1("transpose", [rand_any((2, 3))], [Shape((1, 0))], outputs=[(np.float32, (2, 3))])
    with pytest.raises(DvmError, match=r"transpose: output 0 is i32, input 0 is f32"):
        run1("transpose", [rand_any((2, 3))], [Shape((1, 0))], outputs=[(np.int32, (3, 2))])


# ---- gather, gather_elements ----

@pytest.mark.parametrize("shape,ishape,axis", [
    ((5, 4, 3), (3,), 0), ((5, 4, 3), (2, 2), 1), ((5, 4, 3), (), -1), ((5, 4, 3), (7,), -3),
    ((7,), (13,), 0), ((1000, 65), (2, 7), 0), ((30, 40), (0,), 1), ((0, 3), (4,), 1),
    ((2, 3, 4, 5, 6), (3, 1), 3), ((3, 1025), (257,), 1), ((4, 5), (2, 3, 4), -2),
])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_gather(shape, ishape, axis, itype):
    x = rand_any(shape)
    n = shape[axis]
    idx = (rng.integers(-n, n, ishape) if n else np.zeros(ishape, int)).astype(itype)
    np.testing.assert_array_equal(run0("gather", [x, idx], [axis]), np.take(x, idx, axis=axis))


@pytest.mark.parametrize("dtype", ALL)
def test_gather_dtypes(dtype):
    x = rand_any((6, 5), dtype)
    idx = i64s(5, -6, 0, 2)
    np.testing.assert_array_equal(run1("gather", [x, idx], [0]), x[idx])
    np.testing.assert_array_equal(run1("gather", [x, idx[2:] - 5], [1]), x[:, idx[2:] - 5])


def test_gather_embedding():  # the threaded path: rows of a table
    x = rand_any((1000, 257))
    idx = rng.integers(0, 1000, (4, 128))
    np.testing.assert_array_equal(run1("gather", [x, idx], [0]), x[idx])


def test_gather_errors():
    with pytest.raises(DvmError, match=r"gather: indices\[2\] = 5 is out of range for dim 0 of "
                                       r"data \[5,3\] \(size 5\)"):
        run1("gather", [rand_any((5, 3)), i64s(0, 1, 5)], [0])
    with pytest.raises(DvmError, match=r"gather: indices\[0\] = -4 is out of range for dim 1"):
        run1("gather", [rand_any((5, 3)), i64s(-4)], [1])
    with pytest.raises(DvmError, match=r"gather: axis 2 is out of range for rank 2"):
        run1("gather", [rand_any((5, 3)), i64s(0)], [2])
    with pytest.raises(DvmError, match=r"gather: indices are f32, want i64 or i32"):
        run1("gather", [rand_any((5, 3)), rand_any((2,))], [0])


@pytest.mark.parametrize("shape,ishape,axis", [
    ((3, 3), (2, 3), 0), ((3, 3), (3, 2), 1), ((3, 3), (3, 2), -1), ((4, 5, 6), (4, 5, 9), 2),
    ((4, 5, 6), (2, 7, 3), 1), ((7,), (13,), 0), ((2, 0, 3), (2, 0, 3), 0), ((3, 4), (0, 4), 0),
    ((65, 257), (65, 257), 0), ((2, 3, 4, 5, 6), (2, 3, 4, 5, 6), -3),
])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_gather_elements(shape, ishape, axis, itype):
    x = rand_any(shape, np.int16)
    n = shape[axis]
    idx = (rng.integers(-n, n, ishape) if n else np.zeros(ishape, int)).astype(itype)
    # indices may be shorter than data off the axis: the part of data they cover
    part = x[tuple(slice(None) if i == axis % x.ndim else slice(d) for i, d in enumerate(ishape))]
    want = np.take_along_axis(part, np.where(idx < 0, idx + n, idx), axis=axis)
    np.testing.assert_array_equal(run1("gather_elements", [x, idx], [axis]), want)


def test_gather_elements_errors():
    with pytest.raises(DvmError, match=r"gather_elements: indices\[3\] = 3 is out of range for "
                                       r"dim 1 of data \[2,3\] \(size 3\)"):
        run1("gather_elements", [rand_any((2, 3)), i64s([0, 1], [2, 3])], [1])
    with pytest.raises(DvmError, match=r"gather_elements: data \[2,3\] and indices \[2\] differ"):
        run1("gather_elements", [rand_any((2, 3)), i64s(0, 1)], [1])
    with pytest.raises(DvmError, match=r"gather_elements: indices \[3,2\] dim 0 is 3, over data "
                                       r"\[2,3\] dim 0 \(2\)"):
        run1("gather_elements", [rand_any((2, 3)), np.zeros((3, 2), np.int64)], [1])


# ---- slice ----

BIG = 2**63 - 1


def onnx_slice(x, starts, ends, axes, steps):
    """ONNX Slice as the spec and ONNX Runtime have it (Python's slices
    clamp a negative start differently for negative steps)."""
    sl = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        n = x.shape[a]
        s, e = s + n if s < 0 else s, e + n if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
        else:
            s, e = min(max(s, 0), n - 1), min(max(e, -1), n - 1)
        sl[a] = slice(s, e if e >= 0 else None, st)
    return x[tuple(sl)]


@pytest.mark.parametrize("shape,starts,ends,axes,steps", [
    ((20, 10, 5), (0, 0), (3, 10), (0, 1), (1, 1)),
    ((20, 10, 5), (0, 0, 3), (20, 10, 4), (0, 1, 2), (1, 1, 1)),
    ((20, 10, 5), (1,), (1000,), (1,), (1,)),
    ((20, 10, 5), (0,), (-1,), (1,), (1,)),
    ((20, 10, 5), (20, 10, 4), (0, 0, 1), (0, 1, 2), (-1, -3, -2)),
    ((20, 10, 5), (-1,), (-BIG - 1,), (0,), (-1,)),
    ((20, 10, 5), (BIG,), (-BIG - 1,), (-2,), (-4,)),
    ((20, 10, 5), (1000,), (1000,), (1,), (1,)),
    ((20, 10, 5), (3,), (1,), (0,), (1,)),
    ((20, 10, 5), (0,), (5,), (-1,), (BIG,)),
    ((20, 10, 5), (4,), (0,), (-1,), (-BIG - 1,)),
    ((7,), (-3,), (BIG,), (0,), (2,)),
    ((0, 3), (0,), (1,), (1,), (1,)),
    ((5, 0), (1,), (4,), (0,), (-1,)),
    ((65, 257), (1, 3), (64, 250), (0, 1), (2, 3)),
    ((2, 3, 4, 5, 6, 7), (1, -1, 0), (2, -6, 6), (0, -2, 3), (1, -2, 1)),
    ((2, 12, 257, 64), (0,), (128,), (2,), (1,)),
    ((300, 600), (-1, -1), (-301, -601), (0, 1), (-1, -1)),
])
def test_slice(shape, starts, ends, axes, steps):
    x = rand_any(shape)
    got = run1("slice", [x, i64s(*starts), i64s(*ends), i64s(*axes), i64s(*steps)])
    np.testing.assert_array_equal(got, onnx_slice(x, starts, ends,
                                                [a % len(shape) for a in axes], steps))


def test_slice_defaults_and_i32():
    x = rand_any((6, 7, 8), np.int8)
    np.testing.assert_array_equal(run1("slice", [x, i64s(1, 2), i64s(5, -1)]), x[1:5, 2:-1])
    got = run1("slice", [x, np.array([1], np.int32), np.array([7], np.int32),
                         np.array([2], np.int32)])
    np.testing.assert_array_equal(got, x[:, :, 1:7])


@pytest.mark.parametrize("dtype", ALL)
def test_slice_dtypes(dtype):
    x = rand_any((9, 10), dtype)
    got = run1("slice", [x, i64s(8, 1), i64s(0, 9), i64s(0, 1), i64s(-2, 3)])
    np.testing.assert_array_equal(got, x[8:0:-2, 1:9:3])


def test_slice_random():
    r = np.random.default_rng(7)
    for _ in range(40):
        rank = int(r.integers(1, 5))
        shape = tuple(int(d) for d in r.integers(0, 6, rank))
        x = rand_any(shape)
        k = int(r.integers(1, rank + 1))
        axes = [int(a) for a in r.permutation(rank)[:k]]
        starts = [int(v) for v in r.integers(-8, 8, k)]
        ends = [int(v) for v in r.integers(-8, 8, k)]
        steps = [int(v) or 1 for v in r.integers(-3, 4, k)]
        got = run1("slice", [x, i64s(*starts), i64s(*ends), i64s(*axes), i64s(*steps)])
        np.testing.assert_array_equal(got, onnx_slice(x, starts, ends, axes, steps),
                                      err_msg=f"{shape} {starts} {ends} {axes} {steps}")


def test_slice_errors():
    x = rand_any((4, 5))
    with pytest.raises(DvmError, match=r"slice: step 0 for axis 1"):
        run1("slice", [x, i64s(0), i64s(3), i64s(1), i64s(0)])
    with pytest.raises(DvmError, match=r"slice: 2 starts but 1 ends"):
        run1("slice", [x, i64s(0, 1), i64s(3)])
    with pytest.raises(DvmError, match=r"slice: axes \[1,-1\] name dim 1 twice"):
        run1("slice", [x, i64s(0, 0), i64s(3, 3), i64s(1, -1)])
    with pytest.raises(DvmError, match=r"slice: axis 2 is out of range for rank 2"):
        run1("slice", [x, i64s(0), i64s(3), i64s(2)])
    with pytest.raises(DvmError, match=r"slice: input 1 \(starts\): expected an i64 or i32 "
                                       r"tensor or a shape, got a f32 tensor"):
        run1("slice", [x, np.zeros(1, np.float32), i64s(3)])


# ---- concat, split ----

@pytest.mark.parametrize("shapes,axis", [
    ([(2,), (2,)], 0), ([(2, 2), (2, 2)], -1), ([(2, 3), (4, 3), (1, 3)], 0),
    ([(2, 3, 4), (2, 5, 4), (2, 0, 4), (2, 1, 4)], 1), ([(7, 13)], 1),
    ([(2, 3, 4), (2, 3, 1)], -1), ([(0, 3), (0, 5)], 1), ([(1, 12, 65, 64), (1, 12, 1, 64)], 2),
    ([(3, 1, 2, 1, 2, 1)] * 5, 4), ([(257, 1025), (257, 3)], 1), ([(256, 1023), (256, 1)], 1),
    ([(1, 7, 5, 24), (1, 7, 5, 24), (1, 7, 5, 0), (1, 7, 5, 3)], 3), ([(2, 3, 7, 2), (2, 3, 7, 5)], -1),
])
def test_concat(shapes, axis):
    xs = [rand_any(s) for s in shapes]
    np.testing.assert_array_equal(run1("concat", xs, [axis]), np.concatenate(xs, axis))


@pytest.mark.parametrize("dtype", ALL)
def test_concat_dtypes(dtype):
    xs = [rand_any((3, k), dtype) for k in (1, 4, 2)]
    np.testing.assert_array_equal(run1("concat", xs, [1]), np.concatenate(xs, 1))


def test_concat_many():
    xs = [rand_any((2, 1, 3)) for _ in range(40)]
    np.testing.assert_array_equal(run1("concat", xs, [1]), np.concatenate(xs, 1))


def test_concat_errors():
    with pytest.raises(DvmError, match=r"concat: input 1 \[2,4\] vs input 0 \[3,3\]: dim 0 2 != 3"):
        run1("concat", [rand_any((3, 3)), rand_any((2, 4))], [1])
    with pytest.raises(DvmError, match=r"concat: input 1 \[3\] vs input 0 \[3,3\]: rank 1 != 2"):
        run1("concat", [rand_any((3, 3)), rand_any((3,))], [0])
    with pytest.raises(DvmError, match=r"concat: axis 0 is out of range for rank 0"):
        run0("concat", [rand_any(()), rand_any(())], [0])
    with pytest.raises(DvmError, match=r"concat: input 1 is i32, input 0 is f32"):
        run1("concat", [rand_any((2,)), rand_any((2,), np.int32)], [0])


# ---- copy_into (Loop and Scan outputs), the with_dim shape function ----

def copy_into(y0, x, axis, at, n):
    """y, a copy of y0 (shape with_dim(y0, axis, dim)), then x's first n
    rows along axis written at row `at` of y by copy_into, in place."""
    dt = DTYPES[y0.dtype]
    text = "\n".join([
        ".kernel copy_into cpu 1", ".shapefn with_dim", ".func main regs=12",
        f"  .param y0 tensor {dt} [{', '.join(map(str, y0.shape))}]",
        f"  .param x tensor {DTYPES[x.dtype]} [{', '.join(map(str, x.shape))}]", "  .result y any",
        f"  imm r2, {axis}", "  dim r3, r0, " + str(axis), "  shapefn with_dim, (r4), (r0, r2, r3)",
        f"  alloc r5, {dt}, r4, cpu", "  imm r6, 0", "  invoke copy_into, -, (r5), (r0), (r2, r6, r3)",
        f"  imm r7, {at}", f"  imm r8, {n}", "  invoke copy_into, -, (r5), (r1), (r2, r7, r8)", "  ret (r5)",
        ".end"]) + "\n"
    return run_text(text, [y0, x])[0]


def copy_into_ref(y0, x, axis, at, n):
    y = y0.copy()
    idx = [slice(None)] * y.ndim
    idx[axis] = slice(at, at + n)
    src = [slice(None)] * y.ndim
    src[axis] = slice(0, n)
    y[tuple(idx)] = x[tuple(src)]
    return y


@pytest.mark.parametrize("yshape,xshape,axis,at,n", [
    ((5,), (1,), 0, 4, 1), ((5,), (5,), 0, 0, 5), ((7, 3), (1, 3), 0, 6, 1), ((7, 3), (4, 3), 0, 2, 3),
    ((2, 13, 3), (2, 1, 3), 1, 0, 1), ((2, 13, 3), (2, 1, 3), 1, 12, 1), ((3, 5, 7), (3, 5, 1), 2, 6, 1),
    ((4, 0, 3), (1, 0, 3), 0, 3, 1), ((0, 3), (0, 3), 0, 0, 0), ((5, 2), (3, 2), 0, 5, 0),
    ((1, 1, 1), (1, 1, 1), 2, 0, 1), ((17, 257), (16, 257), 0, 1, 16),
])
def test_copy_into(yshape, xshape, axis, at, n):
    y0, x = rand_any(yshape), rand_any(xshape)
    np.testing.assert_array_equal(copy_into(y0, x, axis, at, n), copy_into_ref(y0, x, axis, at, n))


@pytest.mark.parametrize("dtype", ALL)
def test_copy_into_dtypes(dtype):
    y0, x = rand_any((3, 4, 2), dtype), rand_any((3, 1, 2), dtype)
    np.testing.assert_array_equal(copy_into(y0, x, 1, 2, 1), copy_into_ref(y0, x, 1, 2, 1))


def test_copy_into_errors():
    y0 = rand_any((4, 3))
    with pytest.raises(DvmError, match=r"copy_into: input \[1,2\] does not fit output \[4,3\] off axis 0 "
                                       r"\(dim 1 differs; a Loop or Scan output's slices must have one shape\)"):
        copy_into(y0, rand_any((1, 2)), 0, 0, 1)
    with pytest.raises(DvmError, match=r"copy_into: input \[3\] and output \[4,3\] along axis 0: the ranks differ"):
        copy_into(y0, rand_any((3,)), 0, 0, 1)
    with pytest.raises(DvmError, match=r"copy_into: 1 rows of input \[1,3\] at 4 of output \[4,3\] along axis 0 "
                                       r"are out of range"):
        copy_into(y0, rand_any((1, 3)), 0, 4, 1)
    with pytest.raises(DvmError, match=r"copy_into: 2 rows of input \[1,3\] at 0 of output"):
        copy_into(y0, rand_any((1, 3)), 0, 0, 2)
    with pytest.raises(DvmError, match=r"copy_into: output 0 is f32, input 0 is i32"):
        copy_into(y0, rand_any((1, 3), np.int32), 0, 0, 1)


@pytest.mark.parametrize("shape,sizes,axis", [
    ((6,), (2, 4), 0), ((2, 6), (1, 2, 3), -1), ((7, 13), (7,), 0), ((4, 5, 6), (0, 5, 0), 1),
    ((0,), (0, 0, 0), 0), ((3, 1025), (1, 1024), 1), ((2, 3, 4, 5, 6, 7), (2, 1, 3), 4),
])
def test_split_sizes(shape, sizes, axis):
    x = rand_any(shape)
    got = run("split", [x, i64s(*sizes)], [axis], nout=len(sizes))
    want = np.split(x, np.cumsum(sizes)[:-1], axis)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape,n,axis", [
    ((2, 6), 2, 1), ((2, 8), 3, -1), ((7,), 4, 0), ((5, 3), 5, 0), ((2, 4), 6, 1), ((0, 3), 2, 0),
])
def test_split_even(shape, n, axis):
    x = rand_any(shape, np.float16)
    got = run("split", [x], [axis, n], nout=n)
    chunk = -(-shape[axis] // n)
    bounds = [min(chunk * i, shape[axis]) for i in range(1, n)]
    for g, w in zip(got, np.split(x, bounds, axis), strict=True):
        np.testing.assert_array_equal(g, w)


def test_split_errors():
    with pytest.raises(DvmError, match=r"split: the sizes do not add up to dim 1 of \[2,6\] \(6\)"):
        run("split", [rand_any((2, 6)), i64s(2, 3)], [1], nout=2)
    with pytest.raises(DvmError, match=r"split: size 0 is negative \(-1\)"):
        run("split", [rand_any((2, 6)), i64s(-1, 7)], [1], nout=2)
    with pytest.raises(DvmError, match=r"split: 2 sizes for 3 outputs"):
        run("split", [rand_any((2, 6)), i64s(3, 3)], [1], nout=3)
    with pytest.raises(DvmError, match=r"split: num_outputs is 3, 2 outputs asked for"):
        run("split", [rand_any((2, 6))], [1, 3], nout=2)


# ---- expand, tile ----

@pytest.mark.parametrize("shape,target", [
    ((3, 1), (3, 4)), ((3, 1), (2, 1, 6)), ((1,), (7,)), ((), (2, 3)), ((4,), (1,)),
    ((2, 1, 3), (2, 5, 3)), ((1, 3, 1), (4, 1, 5)), ((3, 1), (0, 1, 4)), ((65, 1), (65, 257)),
    ((1, 1025), (64, 1025)), ((2, 1, 1, 3, 1, 1), (2, 2, 2, 3, 2, 2)), ((5,), ()),
])
def test_expand(shape, target):
    x = rand_any(shape)
    want = x * np.ones(target, x.dtype)
    np.testing.assert_array_equal(run0("expand", [x, i64s(*target)]), want)


@pytest.mark.parametrize("dtype", ALL)
def test_expand_dtypes(dtype):
    x = rand_any((3, 1), dtype)
    np.testing.assert_array_equal(run1("expand", [x, i64s(2, 3, 5)]), np.broadcast_to(x, (2, 3, 5)))


def test_expand_errors():
    with pytest.raises(DvmError, match=r"expand: cannot expand \[2,3\] to \[4\]: dim -1 3 != 4"):
        run1("expand", [rand_any((2, 3)), i64s(4)])
    with pytest.raises(DvmError, match=r"expand: shape \[2,-1\] has a negative dim"):
        run1("expand", [rand_any((2, 3)), i64s(2, -1)])


@pytest.mark.parametrize("shape,reps", [
    ((2, 3, 4, 5), (7, 6, 4, 2)), ((7,), (3,)), ((3, 1), (1, 13)), ((2, 3), (0, 2)),
    ((0, 3), (4, 2)), ((), ()), ((1, 2, 1, 3, 1), (2, 1, 3, 1, 2)), ((65, 257), (2, 3)),
])
def test_tile(shape, reps):
    x = rand_any(shape, np.int64)
    np.testing.assert_array_equal(run0("tile", [x, i64s(*reps)]), np.tile(x, reps))


@pytest.mark.parametrize("dtype", SIZES + [np.bool_])
def test_tile_dtypes(dtype):
    x = rand_any((3, 2), dtype)
    np.testing.assert_array_equal(run1("tile", [x, i64s(2, 3)]), np.tile(x, (2, 3)))


def test_tile_errors():
    with pytest.raises(DvmError, match=r"tile: repeats \[2\] do not match the rank of \[2,3\]"):
        run1("tile", [rand_any((2, 3)), i64s(2)])
    with pytest.raises(DvmError, match=r"tile: repeats \[2,-1\]: -1 for dim 1 is negative"):
        run1("tile", [rand_any((2, 3)), i64s(2, -1)])


# ---- pad ----

MODES = ["constant", "reflect", "edge", "wrap"]


def np_pad(x, pads, mode, value=0, axes=None):
    """ONNX Pad in NumPy: negative pads crop first."""
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    k = len(axes)
    width = [(0, 0)] * x.ndim
    sl = [slice(None)] * x.ndim
    for i, a in enumerate(axes):
        b, e = pads[i], pads[k + i]
        sl[a] = slice(max(-b, 0), x.shape[a] - max(-e, 0))
        width[a] = (max(b, 0), max(e, 0))
    x = x[tuple(sl)]
    if mode == "constant":
        return np.pad(x, width, mode, constant_values=value)
    return np.pad(x, width, mode)


@pytest.mark.parametrize("mode", range(4))
@pytest.mark.parametrize("shape,pads", [
    ((1, 3, 4, 5), (0, 0, 1, 2, 0, 0, 3, 4)), ((7,), (3, 5)), ((7,), (0, 0)), ((7,), (20, 13)),
    ((3, 4), (-1, 2, 1, -3)), ((2, 3, 4), (1, 1, 1, 1, 1, 1)), ((1, 13), (0, 1, 0, 1)),
    ((65, 257), (1, 2, 3, 4)), ((2, 1, 3, 1, 2, 1), (1,) * 12), ((5, 6), (-5, 0, 2, 0)),
])
def test_pad(mode, shape, pads):
    x = rand_any(shape)
    r = len(shape)
    kept = [shape[i] - max(-pads[i], 0) - max(-pads[r + i], 0) for i in range(r)]
    if mode and any(k == 0 and max(pads[i], pads[r + i]) > 0 for i, k in enumerate(kept)):
        with pytest.raises(DvmError, match=r"padding of dim \d of .* needs data in it"):
            run1("pad", [x, i64s(*pads)], [mode])
        return
    np.testing.assert_array_equal(run1("pad", [x, i64s(*pads)], [mode]), np_pad(x, pads, MODES[mode]))


def test_pad_reflect_long():
    # pads longer than the dim reflect again: numpy's own result for these
    x = np.arange(10, dtype=np.float32)
    want = np.array([6, 7, 8, 9, 8, 7, 6, 5, 4, 3, 2, 1, *range(10), 8, 7, 6], np.float32)
    np.testing.assert_array_equal(run1("pad", [x, i64s(12, 3)], [1]), want)
    np.testing.assert_array_equal(run1("pad", [x[:1], i64s(2, 3)], [1]), np.zeros(6, np.float32))


@pytest.mark.parametrize("dtype", ALL)
def test_pad_value_axes(dtype):
    x = rand_any((2, 3, 4), dtype)
    v = rand_any((), dtype)
    got = run0("pad", [x, i64s(1, 2, 0, 3), np.array(v), i64s(-1, 0)], [0])
    np.testing.assert_array_equal(got, np_pad(x, [1, 2, 0, 3], "constant", v, axes=[-1, 0]))
    got = run0("pad", [x, i64s(2, 1, 2, 3), np.array(v), i64s(1, 2)], [1])
    np.testing.assert_array_equal(got, np_pad(x, [2, 1, 2, 3], "reflect", axes=[1, 2]))
    got = run1("pad", [x, i64s(0, 2, 1, 0, 1, 1)], [3])
    np.testing.assert_array_equal(got, np_pad(x, [0, 2, 1, 0, 1, 1], "wrap"))


def test_pad_errors():
    x = rand_any((2, 3))
    with pytest.raises(DvmError, match=r"pad: pads has 3 values, want 2 per axis for 2 axes"):
        run1("pad", [x, i64s(1, 1, 1)])
    with pytest.raises(DvmError, match=r"pad: pads -3 and 0 crop more than dim 0 of \[2,3\]"):
        run1("pad", [x, i64s(-3, 0, 0, 0)])
    with pytest.raises(DvmError, match=r"pad: edge padding of dim 0 of \[0,3\] needs data in it"):
        run1("pad", [rand_any((0, 3)), i64s(1, 0, 0, 0)], [2])
    with pytest.raises(DvmError, match=r"pad: mode 4 is not 0 \(constant\), 1 \(reflect\)"):
        run1("pad", [x, i64s(1, 1, 1, 1)], [4])
    with pytest.raises(DvmError, match=r"pad: value is f64, data is f32"):
        run1("pad", [x, i64s(1, 1, 1, 1), np.array(1.0)])
    with pytest.raises(DvmError, match=r"pad: input 2 \(value\) has 2 elements, want 1"):
        run1("pad", [x, i64s(1, 1, 1, 1), np.zeros(2, np.float32)])


# ---- trilu ----

@pytest.mark.parametrize("shape", [(4, 5), (5, 4), (3, 3), (2, 3, 3), (1, 7), (3, 0, 5), (65, 257),
                                   (2, 1, 2, 3, 13, 7), (300, 300)])
@pytest.mark.parametrize("k", [0, 1, -1, 3, -4, 10**12, -10**12, None])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu(shape, k, upper):
    if shape[-1] * shape[-2] > 20000 and k not in (0, 1):
        pytest.skip("one k is enough for the big ones")
    x = rand_any(shape, np.int32)
    want = (np.triu if upper else np.tril)(x, k or 0)
    ins = [x] if k is None else [x, np.array(k, np.int64)]
    np.testing.assert_array_equal(run0("trilu", ins, [upper]), want)


@pytest.mark.parametrize("dtype", ALL)
def test_trilu_dtypes(dtype):
    x = rand_any((3, 4, 5), dtype)
    np.testing.assert_array_equal(run1("trilu", [x]), np.triu(x))


def test_trilu_errors():
    with pytest.raises(DvmError, match=r"trilu: input \[3\] has rank 1, needs 2 or more"):
        run1("trilu", [rand_any((3,))], [1])
    with pytest.raises(DvmError, match=r"trilu: upper is 2, not 0 or 1"):
        run1("trilu", [rand_any((3, 3))], [2])


# ---- kernels never trust the caller ----

def test_wrong_outputs():
    x = rand_any((4, 6))
    with pytest.raises(DvmError, match=r"slice: output 0 has shape \[2,6\], want \[3,6\]"):
        run1("slice", [x, i64s(1), i64s(4)], outputs=[(np.float32, (2, 6))])
    with pytest.raises(DvmError, match=r"split: output 1 has shape \[4,2\], want \[4,3\]"):
        run("split", [x], [1], outputs=[(np.float32, (4, 3)), (np.float32, (4, 2))])
    with pytest.raises(DvmError, match=r"gather: takes 2 inputs, got 1"):
        run1("gather", [x], [0], outputs=[(np.float32, (4, 6))])


# ---- the ONNX backend node tests ----

NODE_OPS = {"Transpose", "Gather", "GatherElements", "Slice", "Concat", "Split", "Expand", "Tile",
            "Pad", "Trilu", "Reshape", "Squeeze", "Unsqueeze", "Flatten"}


def node_tests(ops):
    """(test name, op type) of the node tests of these ops."""
    path = os.path.join(NODE_DIR, "index.tsv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return sorted((r[0], r[1]) for r in rows if r[1] in ops and r[4] == "0")


def node_case(name):
    """The node's attributes, its inputs and its expected outputs."""
    import onnx
    from onnx import helper
    d = os.path.join(NODE_DIR, name)
    node = onnx.load(os.path.join(d, "model.onnx")).graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    data = os.path.join(d, "test_data_set_0")
    load = lambda kind, n: [np.load(os.path.join(data, f"{kind}_{i}.npy")) for i in range(n)]
    nin = sum(1 for f in os.listdir(data) if f.startswith("input_") and f.endswith(".npy"))
    nout = sum(1 for f in os.listdir(data) if f.startswith("output_") and f.endswith(".npy"))
    return node, attrs, load("input", nin), load("output", nout)


def run_node(op, attrs, ins, nout):
    """The node as a dvm kernel call or view; its outputs."""
    if op == "Transpose":
        return [run0("transpose", ins, [Shape(attrs["perm"])] if "perm" in attrs else [])]
    if op in ("Gather", "GatherElements", "Concat"):
        kernel = {"Gather": "gather", "GatherElements": "gather_elements", "Concat": "concat"}[op]
        return [run0(kernel, ins, [attrs.get("axis", 0)])]
    if op in ("Slice", "Expand", "Tile"):
        return [run0(op.lower(), ins)]
    if op == "Split":
        extra = [attrs["num_outputs"]] if "num_outputs" in attrs else []
        return run0("split", ins, [attrs.get("axis", 0)] + extra, nout=nout)
    if op == "Pad":
        return [run0("pad", ins, [MODES.index(attrs.get("mode", b"constant").decode())])]
    if op == "Trilu":
        return [run0("trilu", ins, [attrs.get("upper", 1)])]
    if op == "Reshape":
        return [run_view("reshape", ins, [attrs.get("allowzero", 0)])]
    if op == "Flatten":
        return [run_view("flatten", ins, [attrs.get("axis", 1)])]
    return [run_view(op.lower(), ins)]  # Squeeze, Unsqueeze (axes as an input)


@pytest.mark.parametrize("name,op", node_tests(NODE_OPS))
def test_onnx_node(name, op):
    node, attrs, ins, want = node_case(name)
    got = run_node(op, attrs, ins, len(want))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


# ---- center_crop_pad, depth_to_space, space_to_depth --------------------------

def center_crop_pad_ref(x, shape, axes):
    """ONNX's reference: a crop starts at (d - s) // 2, a pad puts (s - d) // 2 first."""
    axes = [a % x.ndim for a in axes] or list(range(x.ndim))
    y = x
    for a, s in zip(axes, shape):
        d = y.shape[a]
        if s < d:
            b = (d - s) // 2
            y = np.take(y, np.arange(b, b + s), axis=a)
        elif s > d:
            b = (s - d) // 2
            w = [(0, 0)] * y.ndim
            w[a] = (b, s - d - b)
            y = np.pad(y, w)
    return y


@pytest.mark.parametrize("xs,shape,axes", [((20, 8, 3), (10, 7, 3), ()), ((10, 9, 3), (20, 10, 3), ()),
                                           ((3, 20, 8), (10, 9), (1, 2)), ((5, 7, 3), (4, 12), (-3, -2)),
                                           ((0, 3), (0, 6), ()), ((1, 13), (2, 1), ()), ((4, 5), (0, 5), ()),
                                           ((2, 3, 4), (7,), (1,))])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64])
def test_center_crop_pad(xs, shape, axes, dtype):
    x = rng.integers(-9, 9, xs).astype(dtype)
    got = run1("center_crop_pad", [x, np.array(shape, np.int64)], [Shape(axes)], shapefn="center_crop_pad")
    np.testing.assert_array_equal(got, center_crop_pad_ref(x, shape, axes))


def test_center_crop_pad_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(DvmError, match=r"center_crop_pad: shape \[2\] has 1 values, want one per axis \(2\)"):
        run1("center_crop_pad", [x, np.array([2], np.int64)], [Shape(())], shapefn="center_crop_pad")
    with pytest.raises(DvmError, match=r"center_crop_pad: shape \[-1,3\]: -1 is negative"):
        run1("center_crop_pad", [x, np.array([-1, 3], np.int64)], [Shape(())], shapefn="center_crop_pad")


def depth_to_space_ref(x, b, crd):
    n, c, h, w = x.shape
    if crd:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return t.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth_ref(x, b, crd):
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b)
    t = t.transpose(0, 1, 3, 5, 2, 4) if crd else t.transpose(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


@pytest.mark.parametrize("xs,b", [((1, 8, 2, 3), 2), ((2, 9, 1, 5), 3), ((1, 7, 3, 2), 1), ((0, 4, 2, 2), 2),
                                  ((3, 4, 0, 1), 2), ((1, 50, 1, 1), 5)])
@pytest.mark.parametrize("crd", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float16, np.int64])
def test_depth_space(xs, b, crd, dtype):
    x = rng.integers(0, 100, xs).astype(dtype)
    y = run1("depth_to_space", [x], [b, crd], shapefn="depth_to_space")
    np.testing.assert_array_equal(y, depth_to_space_ref(x, b, crd))
    back = run1("space_to_depth", [y], [b, crd], shapefn="space_to_depth")
    np.testing.assert_array_equal(back, space_to_depth_ref(y, b, crd))
    np.testing.assert_array_equal(back, x)


def test_depth_space_errors():
    with pytest.raises(DvmError, match=r"depth_to_space: input \[1,6,2,2\]: channels not divisible by blocksize 2 squared"):
        run1("depth_to_space", [np.zeros((1, 6, 2, 2), np.float32)], [2, 0], shapefn="depth_to_space")
    with pytest.raises(DvmError, match=r"space_to_depth: input \[1,1,3,4\]: height or width not divisible by blocksize 2"):
        run1("space_to_depth", [np.zeros((1, 1, 3, 4), np.float32)], [2, 0], shapefn="space_to_depth")
    with pytest.raises(DvmError, match=r"depth_to_space: input \[4,4\] must have rank 4"):
        run1("depth_to_space", [np.zeros((4, 4), np.float32)], [2, 0], shapefn="depth_to_space")
