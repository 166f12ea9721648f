"""col2im and max_unpool (ops/cpu/unwindow.c) and det (ops/cpu/linalg.c)
against NumPy loops, through the whole stack."""
import itertools

import numpy as np
import pytest

from dvmop import DvmError, Shape, run1

rng = np.random.default_rng(6)


def col2im_ref(x, image, block, dil, pads, strides):
    n = len(image)
    pos = [(image[i] + pads[i] + pads[n + i] - ((block[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(n)]
    k = int(np.prod(block))
    c = x.shape[1] // k
    y = np.zeros((x.shape[0], c) + tuple(image), np.float64)
    for ki, kt in enumerate(itertools.product(*[range(b) for b in block])):
        for li, ot in enumerate(itertools.product(*[range(p) for p in pos])):
            px = [ot[i] * strides[i] - pads[i] + kt[i] * dil[i] for i in range(n)]
            if all(0 <= px[i] < image[i] for i in range(n)):
                y[(slice(None), slice(None)) + tuple(px)] += x[:, np.arange(c) * k + ki, li]
    return y


@pytest.mark.parametrize("image,block,dil,pads,strides", [
    ((5, 5), (1, 5), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((6, 6), (2, 2), (1, 5), (0, 0, 0, 0), (1, 1)),
    ((4, 5), (2, 2), (1, 1), (0, 1, 0, 1), (1, 1)),
    ((5, 5), (2, 2), (1, 1), (0, 0, 0, 0), (2, 2)),
    ((3, 4, 5), (1, 1, 5), (1, 1, 1), (0, 0, 0, 0, 0, 0), (1, 1, 1)),
    ((7,), (3,), (2,), (1, 2), (2,)),
    ((1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((13, 2), (3, 2), (1, 1), (1, 0, 1, 0), (3, 1)),
])
@pytest.mark.parametrize("batch,c", [(1, 1), (2, 3), (0, 2)])
def test_col2im(image, block, dil, pads, strides, batch, c):
    n = len(image)
    pos = [(image[i] + pads[i] + pads[n + i] - ((block[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(n)]
    x = rng.standard_normal((batch, c * int(np.prod(block)), int(np.prod(pos)))).astype(np.float32)
    got = run1("col2im", [x, np.array(image, np.int64), np.array(block, np.int64)],
               [Shape(dil), Shape(pads), Shape(strides)], shapefn="col2im")
    np.testing.assert_allclose(got, col2im_ref(x, image, block, dil, pads, strides), rtol=1e-5, atol=1e-5)


def test_col2im_errors():
    with pytest.raises(DvmError, match=r"col2im: input \[1,4,5\] must be \[N, C \* 4, 16\] for image_shape \[5,5\]"):
        run1("col2im", [np.zeros((1, 4, 5), np.float32), np.array([5, 5]), np.array([2, 2])],
             [Shape(()), Shape(()), Shape(())], shapefn="col2im")


@pytest.mark.parametrize("xs,k,s,p,out", [((1, 1, 2, 2), (2, 2), (2, 2), (0, 0, 0, 0), None),
                                          ((2, 3, 3, 2), (2, 2), (2, 2), (0, 0, 0, 0), (2, 3, 7, 5)),
                                          ((1, 2, 5), (3,), (2,), (1, 1), None),
                                          ((0, 2, 2, 2), (2, 2), (2, 2), (0, 0, 0, 0), None),
                                          ((1, 1, 1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0, 0, 0, 0), None)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
def test_max_unpool(xs, k, s, p, out, dtype):
    n = len(k)
    shape = list(xs[:2]) + [(xs[2 + i] - 1) * s[i] + k[i] - p[i] - p[n + i] for i in range(n)]
    if out:
        shape = list(out)
    x = rng.integers(1, 50, xs).astype(dtype)
    # distinct positions per plane, as MaxPool's indices are
    idx = np.zeros(xs, np.int64)
    flat = idx.reshape(xs[0] * xs[1], int(np.prod(xs[2:])))
    for q in range(flat.shape[0]):
        base_plane = int(np.prod([(xs[2 + i] - 1) * s[i] + k[i] - p[i] - p[n + i] for i in range(n)]))
        flat[q] = q * base_plane + rng.choice(base_plane, flat.shape[1], replace=False)
    ins = [x, idx] + ([np.array(out, np.int64)] if out else [])
    got = run1("max_unpool", ins, [Shape(k), Shape(p), Shape(s)], shapefn="max_unpool")
    base = list(xs[:2]) + [(xs[2 + i] - 1) * s[i] + k[i] - p[i] - p[n + i] for i in range(n)]
    u = np.zeros(base, dtype)
    u.reshape(-1)[idx.reshape(-1)] = x.reshape(-1)
    want = np.zeros(shape, dtype)
    want[tuple(slice(0, b) for b in base)] = u  # output_shape: the unpooled values in its leading corner
    np.testing.assert_array_equal(got, want)


def test_max_unpool_errors():
    x = np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(DvmError, match=r"max_unpool: index 16 \(element 3 of I\) is outside \[1,1,4,4\]"):
        run1("max_unpool", [x, np.array([0, 1, 2, 16]).reshape(1, 1, 2, 2)], [Shape((2, 2)), Shape(()), Shape((2, 2))],
             shapefn="max_unpool")


@pytest.mark.parametrize("shape", [(2, 2), (3, 2, 2), (4, 5, 5), (1, 1), (0, 3, 3), (2, 0, 0), (7, 7), (2, 1, 13, 13)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det(shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    got = run1("det", [x], shapefn="det")
    want = np.linalg.det(x.astype(np.float64)) if x.size or shape[-1] else np.ones(shape[:-2])
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6)


def test_det_singular_and_errors():
    x = np.array([[1, 2], [2, 4]], np.float32)
    np.testing.assert_array_equal(run1("det", [x], shapefn="det"), np.float32(0))
    with pytest.raises(DvmError, match=r"det: X \[2,3\] must be \[..., M, M\]"):
        run1("det", [np.zeros((2, 3), np.float32)], shapefn="det")
