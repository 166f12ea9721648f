"""matmul, gemm and einsum against NumPy (float64 references), through the
whole stack, plus the ONNX backend node tests of MatMul, Gemm and Einsum.

Also the helpers the other kernel tests here share (test_reduce.py,
test_norm.py import them): with_payload() gives a kernel table entry its
payload (einsum's equation), and run_bf16() runs a call with bf16 inputs
and outputs, which .npy files cannot carry: bf16 inputs become constants of
the program, and each bf16 output is converted to f32 by a matmul with the
identity (exact: one product by 1 per element).
"""
import contextlib
import glob
import os
import re

import ml_dtypes
import numpy as np
import onnx
import pytest
from dvmtest.paths import NODE_SUBSET as NODE

import dvmop
from dvmop import DvmError, Shape, run, run1

rng = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)


def rand_matmul(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@contextlib.contextmanager
def with_payload(kernel, data):
    """Programs built inside give kernel `kernel` the payload `data` (bytes)."""
    orig = dvmop.program

    def program(*args, **kw):
        return re.sub(rf"^(\.kernel {kernel} \w+ 1)$", rf'\1 x"{data.hex()}"', orig(*args, **kw), count=1,
                      flags=re.M)

    dvmop.program = program
    try:
        yield
    finally:
        dvmop.program = orig


def _dims(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def run_bf16(kernel, inputs, attrs, outputs, payload=None):
    """One call of `kernel` with outputs [(dtype, shape)] allocated; inputs of
    dtype bfloat16 are program constants, bf16 outputs (rank >= 1) come back
    as f32 through matmul with the identity."""
    lines = [f'.kernel {kernel} cpu 1' + (f' x"{payload.hex()}"' if payload else "")]
    if kernel != "matmul":
        lines.append(".kernel matmul cpu 1")
    params, body, reg = [], [], 0
    in_regs = []
    for i, x in enumerate(inputs):
        if x.dtype == BF16:
            lines.append(f'.const c{i} bf16 {_dims(x.shape)} x"{x.tobytes().hex()}"')
    nparams = sum(x.dtype != BF16 for x in inputs)
    reg = nparams
    p = 0
    for i, x in enumerate(inputs):
        if x.dtype == BF16:
            body.append(f"  const r{reg}, $c{i}")
            in_regs.append(f"r{reg}")
            reg += 1
        else:
            params.append(f"  .param x{p} tensor {dvmop.DTYPES[x.dtype]} {_dims(x.shape)}")
            in_regs.append(f"r{p}")
            p += 1
    attr_regs = []
    for a in attrs:
        code, used = dvmop._attr_code(reg, a)
        body += code
        attr_regs.append(f"r{reg}")
        reg += used

    def alloc(dt, shape):
        nonlocal reg
        code, out, used = dvmop._alloc_code(reg, dt, shape)
        body.extend(code)
        reg += used
        return out

    out_regs = [alloc("bf16" if np.dtype(dt) == BF16 else dvmop.DTYPES[np.dtype(dt)], s)
                for dt, s in outputs]
    body.append(f"  invoke {kernel}, -, ({', '.join(out_regs)}), ({', '.join(in_regs)}), "
                f"({', '.join(attr_regs)})")
    rets = []
    for (dt, s), r in zip(outputs, out_regs, strict=True):
        if np.dtype(dt) != BF16:
            rets.append(r)
            continue
        n = s[-1]
        lines.append(f'.const eye{r} bf16 [{n}, {n}] x"{np.eye(n, dtype=BF16).tobytes().hex()}"')
        eye = f"r{reg}"
        body.append(f"  const {eye}, $eye{r}")
        reg += 1
        f = alloc("f32", s)
        body.append(f"  invoke matmul, -, ({f}), ({r}, {eye}), ()")
        rets.append(f)
    body.append(f"  ret ({', '.join(rets)})")
    lines.append(f".func main regs={reg}")
    lines += params
    lines += [f"  .result y{i} any" for i in range(len(rets))]
    lines += body
    lines.append(".end")
    return dvmop.run_text("\n".join(lines) + "\n", [x for x in inputs if x.dtype != BF16], len(rets))


def close_products(got, want, k=1, dtype=np.float32):
    """Products of k terms: f32 error grows with k; f16/bf16 outputs round."""
    eps = {np.dtype(np.float32): 2e-6, np.dtype(np.float16): 1e-3, BF16: 8e-3}[np.dtype(dtype)]
    tol = eps * (4 + np.sqrt(k)) * max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=tol)


# ---- matmul -----------------------------------------------------------------

MATMUL_SHAPES = [
    ((1, 1), (1, 1)), ((7, 13), (13, 31)), ((65, 257), (257, 7)), ((3, 7, 13), (13, 5)),
    ((2, 3, 65, 31), (31, 64)), ((2, 3, 7, 13), (3, 13, 5)), ((7, 13), (4, 13, 5)),
    ((2, 1, 7, 13), (1, 3, 13, 5)), ((1, 12, 31, 16), (1, 12, 16, 31)),
    ((13,), (13, 5)), ((7, 13), (13,)), ((13,), (13,)), ((13,), (3, 13, 5)), ((2, 3, 7, 13), (13,)),
    ((0, 13), (13, 5)), ((7, 0), (0, 5)), ((3, 7, 0), (3, 0, 5)), ((2, 0, 7, 13), (13, 5)),
    ((1, 128, 768), (768, 64)), ((4, 16, 64), (4, 64, 16)),
    # B rows 4 KiB apart at 32 <= M < 512: run as two products (ops/cpu/matmul.c)
    ((40, 33), (33, 1024)), ((2, 20, 33), (33, 2048)), ((31, 33), (33, 1024)),
]


@pytest.mark.parametrize("a,b", MATMUL_SHAPES)
def test_matmul(a, b):
    x, y = rand_matmul(a), rand_matmul(b)
    got = run1("matmul", [x, y])
    assert got.dtype == np.float32 and got.shape == np.matmul(x, y).shape
    close_products(got, np.matmul(x.astype(np.float64), y), k=a[-1])


@pytest.mark.parametrize("dx,dy,do", [(np.float16, np.float16, np.float16),
                                      (np.float16, np.float16, np.float32),
                                      (np.float32, np.float16, np.float32)])
@pytest.mark.parametrize("a,b", [((7, 13), (13, 31)), ((2, 3, 65, 31), (31, 64)), ((13,), (13,))])
def test_matmul_f16(dx, dy, do, a, b):
    x, y = rand_matmul(a, dx), rand_matmul(b, dy)
    got = run1("matmul", [x, y], out_dtypes=[do])
    assert got.dtype == do
    close_products(got, np.matmul(x.astype(np.float64), y.astype(np.float64)), k=a[-1], dtype=do)


@pytest.mark.parametrize("do", [BF16, np.float32])
def test_matmul_bf16(do):
    x, y = rand_matmul((2, 7, 13)).astype(BF16), rand_matmul((13, 9)).astype(BF16)
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    (got,) = run_bf16("matmul", [x, y], [], [(do, want.shape)])
    close_products(got, want, k=13, dtype=do)


@pytest.mark.parametrize("a,b", [((7,), (7,)), ((1, 1), (1, 1)), ((0, 13), (13, 5)), ((3, 1, 4, 5), (2, 5, 6)),
                                 ((2, 7, 13), (13, 3)), ((4, 16, 64), (4, 64, 16))])
def test_matmul_f64(a, b):
    """f64 throughout, computed in f64 (the einsum engine's plain loop)."""
    x, y = rand_matmul(a).astype(np.float64), rand_matmul(b).astype(np.float64)
    got = run1("matmul", [x, y])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.matmul(x, y), rtol=1e-12, atol=1e-12)


def test_matmul_errors():
    with pytest.raises(DvmError, match=r"matmul: \[2,3\] x \[4,5\]: inner dims 3 != 4"):
        run1("matmul", [rand_matmul((2, 3)), rand_matmul((4, 5))])
    with pytest.raises(DvmError, match=r"matmul: dtypes i64, i64 -> i64: want f32, f16 and bf16 \(computed in f32\), or f64"):
        run1("matmul", [np.ones((2, 3), np.int64), np.ones((3, 4), np.int64)])
    with pytest.raises(DvmError, match=r"matmul: output \[2,5\] != \[2,4\], the product of"):
        run1("matmul", [rand_matmul((2, 3)), rand_matmul((3, 4))], outputs=[(np.float32, (2, 5))])


# B a module constant: matmul packs it at load (ops/cpu/pgemm.c) and runs
# the packed path for every row count; 1..33, past a block of rows (97,
# 131, 397; A packed from the second block on; K = 1024 and 3072 put A's
# rows 4 KiB apart), panel edges (16 columns: N = 1, 15, 16, 17, 33) and
# K = 1 and primes.
PACKED_SHAPES = ([((m, 13), (13, 17)) for m in range(1, 34)] +
                 [((m, k), (k, n)) for m in (2, 7) for k in (1, 97) for n in (1, 15, 16, 33)] +
                 [((2, 3, 5, 31), (31, 40)), ((4, 8, 29), (1, 29, 19)), ((97, 31), (31, 17)),
                  ((96, 31), (31, 17)), ((131, 64), (64, 33)), ((397, 29), (29, 65)),
                  ((3, 768), (768, 3072)), ((96, 1024), (1024, 17)), ((97, 1024), (1024, 17)),
                  ((14, 1024), (1024, 31)), ((2, 64, 1024), (1024, 33)), ((131, 3072), (3072, 47))])


@pytest.mark.parametrize("a,b", PACKED_SHAPES)
def test_matmul_constant_b(a, b):
    x, y = rand_matmul(a), rand_matmul(b)
    got = run1("matmul", [x, y], const_from=1)
    close_products(got, np.matmul(x.astype(np.float64), y), k=a[-1])


def test_matmul_constant_b_f16():
    """An f16 constant B is not packed: the plain path converts it."""
    x, y = rand_matmul((5, 13)), rand_matmul((13, 17), np.float16)
    close_products(run1("matmul", [x, y], const_from=1), np.matmul(x.astype(np.float64), y), k=13)


# ---- gemm -------------------------------------------------------------------

def gemm_ref(a, b, c, ta, tb, alpha, beta):
    a, b = a.astype(np.float64), b.astype(np.float64)
    y = alpha * (a.T if ta else a) @ (b.T if tb else b)
    return y + beta * c if c is not None else y


C_SHAPES = [None, (), (1,), "n", (1, "n"), ("m", 1), ("m", "n")]


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("cs", C_SHAPES)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 13, 31), (65, 7, 257), (40, 1024, 9)])
def test_gemm(ta, tb, cs, m, n, k):
    a = rand_matmul((k, m) if ta else (m, k))
    b = rand_matmul((n, k) if tb else (k, n))
    c = None if cs is None else rand_matmul(tuple({"m": m, "n": n}.get(d, d) for d in cs))
    alpha, beta = 0.5, -1.5
    got = run1("gemm", [a, b] + ([c] if c is not None else []), [ta, tb, alpha, beta])
    close_products(got, gemm_ref(a, b, c, ta, tb, alpha, beta), k=k)


@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (4, 0, 3), (4, 5, 0)])
def test_gemm_empty(m, n, k):
    a, b, c = rand_matmul((m, k)), rand_matmul((k, n)), rand_matmul((n,))
    got = run1("gemm", [a, b, c], [0, 0, 1.0, 2.0])
    close_products(got, gemm_ref(a, b, c, 0, 0, 1.0, 2.0))


def test_gemm_beta0_ignores_c():
    a, b = rand_matmul((3, 4)), rand_matmul((4, 5))
    c = np.full((3, 5), np.nan, np.float32)
    close_products(run1("gemm", [a, b, c], [0, 0, 1.0, 0.0]), gemm_ref(a, b, None, 0, 0, 1.0, 0.0), k=4)


def test_gemm_f16():
    a, b, c = rand_matmul((7, 13), np.float16), rand_matmul((13, 9), np.float16), rand_matmul((9,), np.float16)
    got = run1("gemm", [a, b, c], [0, 0, 1.0, 1.0])
    assert got.dtype == np.float16
    close_products(got, gemm_ref(a, b, c.astype(np.float64), 0, 0, 1.0, 1.0), k=13, dtype=np.float16)


def test_gemm_bf16():
    a, b, c = (rand_matmul(s).astype(BF16) for s in [(13, 7), (13, 9), (7, 1)])
    want = gemm_ref(a, b, c.astype(np.float64), 1, 0, 2.0, 0.5)
    (got,) = run_bf16("gemm", [a, b, c], [1, 0, 2.0, 0.5], [(BF16, (7, 9))])
    close_products(got, want, k=13, dtype=BF16)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("cs", [None, "n", ("m", "n")])
@pytest.mark.parametrize("m,n,k", [(1, 17, 13), (2, 1, 1), (7, 33, 31), (33, 16, 97), (97, 17, 5), (211, 40, 19),
                                   (131, 33, 1024)])
def test_gemm_constant_b(ta, tb, cs, m, n, k):
    """B (and C) module constants: B packed at load both ways (transB is a
    run-time attribute), the packed path for every row count."""
    a = rand_matmul((k, m) if ta else (m, k))
    b = rand_matmul((n, k) if tb else (k, n))
    c = None if cs is None else rand_matmul(tuple({"m": m, "n": n}.get(d, d) for d in cs))
    alpha, beta = 0.5, -1.5
    got = run1("gemm", [a, b] + ([c] if c is not None else []), [ta, tb, alpha, beta],
               const_from=1)
    close_products(got, gemm_ref(a, b, c, ta, tb, alpha, beta), k=k)


def test_gemm_errors():
    with pytest.raises(DvmError, match=r"gemm: C \[3\] does not broadcast to \[2,4\]"):
        run1("gemm", [rand_matmul((2, 5)), rand_matmul((5, 4)), rand_matmul((3,))], [0, 0, 1.0, 1.0])
    with pytest.raises(DvmError, match=r"gemm: A \[2,5\] \(transA 0\) x B \[4,5\] \(transB 0\): "
                                       r"inner dims 5 != 4"):
        run1("gemm", [rand_matmul((2, 5)), rand_matmul((4, 5))], [0, 0, 1.0, 1.0])
    with pytest.raises(DvmError, match=r"gemm: A \[2,3,5\] and B \[5,4\] must both be 2-D"):
        run1("gemm", [rand_matmul((2, 3, 5)), rand_matmul((5, 4))], [0, 0, 1.0, 1.0])
    with pytest.raises(DvmError, match=r"gemm: attribute alpha must be float, got int"):
        run1("gemm", [rand_matmul((2, 5)), rand_matmul((5, 4))], [0, 0, 1, 1.0])
    with pytest.raises(DvmError, match=r"gemm: transB must be 0 or 1, got 2"):
        run1("gemm", [rand_matmul((2, 5)), rand_matmul((5, 4))], [0, 2, 1.0, 1.0])
    with pytest.raises(DvmError, match=r"gemm: takes 6 to 7 inputs, got 5"):
        run1("gemm", [rand_matmul((2, 5)), rand_matmul((5, 4))], [0, 0, 1.0])


# ---- einsum -----------------------------------------------------------------

def einsum_dims(eq, shapes):
    """The compiler's encoding of einsum's output shape (shapefuncs/matmul.h):
    per output dim, input * 16 + axis, further broadcast sources as code + 1
    in the bytes above."""
    eq = eq.replace(" ", "")
    lhs, rhs = eq.split("->") if "->" in eq else (eq, None)
    terms, ell = lhs.split(","), 0
    for t, s in zip(terms, shapes):
        if "..." in t:
            ell = max(ell, len(s) - len(t) + 3)
    labels = []
    for t, s in zip(terms, shapes):
        head, _, tail = t.partition("...")
        e = len(s) - len(head) - len(tail) if "..." in t else 0
        labels.append(list(head) + [("...", ell - e + q) for q in range(e)] + list(tail))
    if rhs is None:
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = [("...", q) for q in range(ell)] + sorted(c for c, n in counts.items()
                                                        if isinstance(c, str) and n == 1)
    else:
        head, _, tail = rhs.partition("...")
        out = list(head) + ([("...", q) for q in range(ell)] if "..." in rhs else []) + list(tail)
    dims = []
    for c in out:
        src = [i * 16 + ax for i, ls in enumerate(labels) for ax, l in enumerate(ls) if l == c]
        if isinstance(c, str):
            src = src[:1]
        code = src[0]
        for j, s in enumerate(src[1:], 1):
            code |= (s + 1) << (8 * j)
        dims.append(code)
    return Shape(dims)


def einsum(eq, xs, **kw):
    with with_payload("einsum", eq.encode()):
        return run1("einsum", xs, [einsum_dims(eq, [x.shape for x in xs])], **kw)


EQUATIONS = [
    ("ij,jk->ik", [(7, 13), (13, 31)]), ("bij,bjk->bik", [(3, 7, 13), (3, 13, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 13, 16), (2, 3, 7, 16)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 13, 7), (2, 3, 7, 16)]),
    ("bqhd,bkhd->bhqk", [(2, 13, 3, 16), (2, 7, 3, 16)]),
    ("bhqk,bkhd->bqhd", [(2, 3, 13, 7), (2, 7, 3, 16)]),
    ("...ij,...jk->...ik", [(2, 3, 7, 13), (2, 3, 13, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 7, 13), (5, 13, 6)]), ("...ij,jk", [(2, 7, 13), (13, 5)]),
    ("ij->i", [(7, 13)]), ("ij->j", [(7, 13)]), ("ij->", [(7, 13)]), ("ij->ji", [(7, 13)]),
    ("i,j->ij", [(7,), (13,)]), ("i,i->", [(257,), (257,)]), ("i,i", [(7,), (7,)]),
    ("ii->i", [(7, 7)]), ("ii", [(7, 7)]), ("ij,jk", [(7, 13), (13, 5)]), ("ba", [(3, 4)]),
    ("ij,jk,kl->il", [(7, 13), (13, 5), (5, 3)]), ("abc,cd->dba", [(2, 3, 4), (4, 5)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]), ("ij,kl->ijkl", [(2, 3), (4, 5)]),
    ("bij,jk->bik", [(2, 65, 31), (31, 7)]), ("b i j , b j k -> b k i", [(2, 3, 4), (2, 4, 5)]),
    ("Ab,bC->CA", [(3, 4), (4, 5)]), ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("...,...", [(3, 1), (4,)]),
    ("ij,jk->ik", [(0, 3), (3, 4)]), ("ij,jk->ik", [(3, 0), (0, 4)]), ("i->i", [(1,)]),
]


@pytest.mark.parametrize("eq,shapes", EQUATIONS)
def test_einsum(eq, shapes):
    xs = [rand_matmul(s) for s in shapes]
    got = einsum(eq, xs)
    want = np.einsum(eq, *[x.astype(np.float64) for x in xs])
    assert got.shape == want.shape
    close_products(got, want, k=max(max(s, default=1) for s in shapes) ** 2)


def test_einsum_large_attention():
    q, k = rand_matmul((1, 12, 128, 64)), rand_matmul((1, 12, 128, 64))
    close_products(einsum("bhqd,bhkd->bhqk", [q, k]), np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k), k=64)


@pytest.mark.parametrize("eq,shapes", [("bhqd,bhkd->bhqk", [(2, 3, 13, 16), (2, 3, 7, 16)]),
                                       ("bij,bjk->bik", [(2, 7, 13), (2, 13, 5)]),
                                       ("ij->ji", [(7, 13)]), ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
                                       ("ij,jk->ik", [(3, 0), (0, 4)])])
def test_einsum_f64(eq, shapes):
    xs = [rand_matmul(s, np.float64) for s in shapes]
    got = einsum(eq, xs)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.einsum(eq, *xs), rtol=1e-12, atol=1e-12)


def test_einsum_dtype_errors():
    with pytest.raises(DvmError, match=r"einsum: dtypes f64, f32 -> f64: want f32, f16 and bf16 "
                                       r"\(computed in f32\), or f64 throughout"):
        einsum("ij,jk->ik", [rand_matmul((2, 3), np.float64), rand_matmul((3, 4))], out_dtypes=[np.float64])
    with pytest.raises(DvmError, match=r"matmul: dtypes f64, f32 -> f64: want f32, f16 and bf16"):
        run1("matmul", [rand_matmul((2, 3), np.float64), rand_matmul((3, 4))], out_dtypes=[np.float64])


@pytest.mark.parametrize("do", [np.float16, np.float32])
def test_einsum_f16(do):
    xs = [rand_matmul((2, 3, 13, 16), np.float16), rand_matmul((2, 3, 7, 16), np.float16)]
    got = einsum("bhqd,bhkd->bhqk", xs, out_dtypes=[do])
    assert got.dtype == do
    close_products(got, np.einsum("bhqd,bhkd->bhqk", *[x.astype(np.float64) for x in xs]), k=16, dtype=do)


def test_einsum_bf16():
    xs = [rand_matmul((3, 7, 13)).astype(BF16), rand_matmul((3, 13, 5)).astype(BF16)]
    want = np.einsum("bij,bjk->bik", *[x.astype(np.float64) for x in xs])
    (got,) = run_bf16("einsum", xs, [Shape(())], [(BF16, want.shape)], payload=b"bij,bjk->bik")
    close_products(got, want, k=13, dtype=BF16)


@pytest.mark.parametrize("eq,shapes,msg", [
    ("ij,jk->ik", [(2, 3)], r'einsum "ij,jk->ik": has 2 inputs, got 1 tensors'),
    ("ij,jk->ik", [(2, 3), (4, 5)], r"'j' is 4 in input 1, 3 in input 0"),
    ("ij->ik", [(2, 3)], r"output letter 'k' is in no input"),
    ("ij->ii", [(2, 3)], r"output letter 'i' is repeated"),
    ("ijk->i", [(2, 3)], r"input 0 has rank 2, its term 3 letters"),
    ("i.j->i", [(2, 3)], r"input 0 has a '.' outside a single \"...\""),
    ("i-j", [(2, 3)], r"has a '-' or '>' outside one \"->\""),
    ("...i,...i->...", [(2, 3), (4, 3)], r"ellipsis dims do not broadcast"),
    ("ij;k", [(2, 3)], r"einsum: the equation has byte 0x3b at 2"),
])
def test_einsum_errors(eq, shapes, msg):
    xs = [rand_matmul(s) for s in shapes]
    with pytest.raises(DvmError, match=msg):
        with with_payload("einsum", eq.encode()):
            run1("einsum", xs, [Shape(())], outputs=[(np.float32, (2, 3))])


def test_einsum_no_payload():
    with pytest.raises(DvmError, match=r"einsum: no equation: it is the kernel table entry's payload"):
        run1("einsum", [rand_matmul((2, 3))], [Shape((0,))])


def test_einsum_shapefn():
    # broadcast ellipsis: dims[1] is input 0 axis 1 (1) with input 1 axis 0 (5)
    xs = [rand_matmul((2, 1, 7, 13)), rand_matmul((5, 13, 6))]
    dims = einsum_dims("...ij,...jk->...ik", [x.shape for x in xs])
    assert tuple(dims) == (0, 1 | (16 + 1) << 8, 2, 18)
    with pytest.raises(DvmError, match=r"einsum: output dim 0: input 0 axis 0 is 2 but input 1 axis 0 is 3"):
        run1("einsum", [rand_matmul((2, 3)), rand_matmul((3, 4))], [Shape((0 | (16 + 1) << 8,))], shapefn="einsum")
    with pytest.raises(DvmError, match=r"einsum: dims\[0\] names input 2 axis 0, which is not an input"):
        run1("einsum", [rand_matmul((2, 3)), rand_matmul((3, 4))], [Shape((32,))], shapefn="einsum")


# ---- ONNX backend node tests ------------------------------------------------

def matmul_node_cases(prefix):
    return sorted(os.path.basename(d) for d in glob.glob(f"{NODE}/{prefix}*"))


def load_node(name):
    model = onnx.load(f"{NODE}/{name}/model.onnx")
    node = model.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    data = f"{NODE}/{name}/test_data_set_0"
    ins = [np.load(f"{data}/input_{i}.npy") for i in range(len(glob.glob(f"{data}/input_*.npy")))]
    outs = [np.load(f"{data}/output_{i}.npy") for i in range(len(glob.glob(f"{data}/output_*.npy")))]
    return attrs, ins, outs


@pytest.mark.parametrize("name", matmul_node_cases("test_matmul_") + matmul_node_cases("test_gemm_") +
                         matmul_node_cases("test_einsum_"))
def test_onnx_node(name):
    attrs, ins, outs = load_node(name)
    if any(x.ndim == 0 for x in ins):
        pytest.skip("dvmop.run passes 0-d inputs as [1] (np.ascontiguousarray)")
    if name.startswith("test_matmul"):
        got = run1("matmul", ins)
    elif name.startswith("test_gemm"):
        got = run1("gemm", ins, [attrs.get("transA", 0), attrs.get("transB", 0),
                                 float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))])
    else:
        got = einsum(attrs["equation"].decode(), ins)
    assert got.shape == outs[0].shape
    np.testing.assert_allclose(got, outs[0], rtol=1e-3, atol=1e-4)
