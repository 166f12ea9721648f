"""conv and conv_transpose against NumPy loops written here, ONNX Runtime
single-node models, and the ONNX backend node tests; the auto_pad helpers of
shapefuncs/window.h through a small C driver."""
import itertools
import os
import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from dvmtest.arrays import normal_f32
from dvmtest.cli import assemble
from dvmtest.paths import DVM, NODE_SUBSET as NODE_TESTS, ROOT
from onnx import TensorProto, helper

from dvmop import DvmError, Shape, program, run1, run_model

rng = np.random.default_rng(0)
rand = normal_f32(rng)


def span(k, d):
    return (k - 1) * d + 1


def ref_conv(x, w, b, strides, pads, dilations, group):
    """Direct convolution: one strided slice of the padded input per kernel
    offset, contracted with that offset's weights, group by group."""
    n = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[n + i]) for i in range(n)])
    out = [(xp.shape[2 + i] - span(w.shape[2 + i], dilations[i])) // strides[i] + 1 for i in range(n)]
    m, cg = w.shape[0], w.shape[1]
    y = np.zeros((x.shape[0], m) + tuple(out))
    mg = m // group
    for off in itertools.product(*[range(k) for k in w.shape[2:]]):
        sl = tuple(slice(off[i] * dilations[i], off[i] * dilations[i] + strides[i] * (out[i] - 1) + 1,
                         strides[i]) for i in range(n))
        for g in range(group):
            xs = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            ws = w[(slice(g * mg, (g + 1) * mg), slice(None)) + off].astype(np.float64)
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", xs, ws)
    if b is not None:
        y += b.reshape((1, m) + (1,) * n)
    return y


def ref_conv_transpose(x, w, b, strides, pads, dilations, group, output_padding):
    """Scatter each input element times the kernel into the full output,
    then cut the pads off."""
    n = x.ndim - 2
    c, mg = w.shape[0], w.shape[1]
    cg, m = c // group, mg * group
    full = [strides[i] * (x.shape[2 + i] - 1) + span(w.shape[2 + i], dilations[i]) + output_padding[i]
            for i in range(n)]
    y = np.zeros((x.shape[0], m) + tuple(full))
    for off in itertools.product(*[range(k) for k in w.shape[2:]]):
        sl = tuple(slice(off[i] * dilations[i], off[i] * dilations[i] + strides[i] * (x.shape[2 + i] - 1) + 1,
                         strides[i]) for i in range(n))
        for g in range(group):
            xs = x[:, g * cg:(g + 1) * cg].astype(np.float64)
            ws = w[(slice(g * cg, (g + 1) * cg), slice(None)) + off].astype(np.float64)
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += np.einsum("nc...,cm->nm...", xs, ws)
    y = y[(slice(None), slice(None)) + tuple(slice(pads[i], full[i] - pads[n + i]) for i in range(n))]
    if b is not None:
        y += b.reshape((1, m) + (1,) * n)
    return y


def dvm_conv(x, w, b, strides, pads, dilations, group, output_padding=None, const_from=None, threads=None):
    ins = [x, w] + ([b] if b is not None else [])
    attrs = [Shape(strides), Shape(pads), Shape(dilations), group]
    if output_padding is None:
        return run1("conv", ins, attrs, const_from=const_from, threads=threads)
    return run1("conv_transpose", ins, attrs + [Shape(output_padding)], const_from=const_from, threads=threads)


def ort_node(op, inputs, attrs, opset=21):
    """One ONNX node through ONNX Runtime."""
    import onnxruntime as ort
    names = [f"i{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(nm, TensorProto.FLOAT, x.shape) for nm, x in zip(names, inputs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))[0]


# (X, W, strides, pads, dilations, group, bias)
CONV_CASES = [
    ((1, 1, 5, 5), (1, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    ((2, 3, 7, 13), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 4, 13, 7), (6, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, False),   # 1x1 (a GEMM)
    ((2, 8, 5, 7), (16, 8, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 8, 5, 7), (16, 8, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1, True),    # 1x1 stride 2
    ((1, 3, 31, 31), (8, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, True),   # stride 2
    ((1, 2, 13, 13), (3, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1, True),   # dilation 2
    ((2, 6, 9, 11), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6, True),    # depthwise
    ((1, 6, 9, 11), (12, 1, 3, 3), (2, 1), (1, 0, 1, 2), (1, 1), 6, False),  # depthwise x2
    ((1, 4, 8, 8), (6, 2, 3, 2), (1, 2), (0, 1, 2, 0), (1, 1), 2, True),     # groups, asym pads
    ((1, 3, 7, 5), (2, 3, 3, 3), (3, 2), (0, 2, 1, 1), (2, 1), 1, True),
    ((1, 16, 17, 17), (32, 16, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 1, True),
    ((1, 3, 65, 33), (8, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, True),   # stem-like
    ((3, 5, 31), (7, 5, 3), (1,), (1, 1), (1,), 1, True),                    # 1-D
    ((1, 4, 13), (4, 1, 5), (2,), (0, 3), (2,), 4, False),                   # 1-D depthwise
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), (1, 2, 1), (1, 0, 1, 1, 1, 0), (1, 1, 2), 1, True),  # 3-D
    ((0, 3, 7, 7), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),     # zero batch
    ((1, 0, 5, 5), (4, 0, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),     # no input channels
    ((1, 3, 5, 5), (0, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, False),    # no output channels
    # a spatial dim of 1 with a kernel of 1 and no pads runs as the conv without it
    ((1, 24, 37, 1), (20, 24, 5, 1), (1, 1), (2, 0, 2, 0), (1, 1), 1, True),   # [5, 1] over W = 1
    ((2, 16, 1, 41), (16, 8, 1, 3), (1, 2), (0, 1, 0, 1), (1, 2), 2, True),    # [1, 3] over H = 1, groups
    ((1, 8, 29, 1), (12, 8, 3, 1), (3, 4), (1, 0, 2, 0), (2, 1), 1, False),   # a stride along the 1
    ((1, 5, 1, 1), (7, 5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),      # all 1: one dim kept
    ((1, 4, 9, 1), (4, 4, 3, 1), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),      # padded: kept
    ((1, 80, 97), (36, 80, 3), (1,), (1, 1), (1,), 1, True),                   # 1-D on 16-channel blocks
    # 1x1 over fewer than 32 points an image runs blocked, from 32 as a GEMM
    ((2, 17, 2, 2), (37, 17, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 3, 1, 31), (5, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, False),
    ((1, 3, 4, 8), (5, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 7, 13), (3, 7, 1), (1,), (0, 0), (1,), 1, True),
]


@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias", CONV_CASES)
def test_conv(xs, ws, strides, pads, dil, group, bias):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    got = dvm_conv(x, w, b, strides, pads, dil, group)
    want = ref_conv(x, w, b, strides, pads, dil, group)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if x.size and w.size:
        ins = [x, w] + ([b] if bias else [])
        ort = ort_node("Conv", ins, dict(strides=strides, pads=pads, dilations=dil, group=group))
        np.testing.assert_allclose(got, ort, rtol=1e-4, atol=1e-4)


def random_config(r, transpose):
    n = int(r.integers(1, 4))
    group = int(r.choice([1, 2, 3]))
    c, m = group * int(r.integers(1, 4)), group * int(r.integers(1, 4))
    k = [int(r.integers(1, 5)) for _ in range(n)]
    s = [int(r.integers(1, 4)) for _ in range(n)]
    d = [int(r.integers(1, 4)) for _ in range(n)]
    p = [int(r.integers(0, 4)) for _ in range(2 * n)]
    size = [int(r.integers(1, 9)) for _ in range(n)]
    if not transpose:  # the padded input must hold one window
        size = [max(size[i], span(k[i], d[i]) - p[i] - p[n + i]) for i in range(n)]
        return (1 + int(r.integers(0, 2)), c) + tuple(size), (m, c // group) + tuple(k), s, p, d, group
    opad = [int(r.integers(0, max(s[i], d[i]))) for i in range(n)]
    # the output must not be negative
    p = [min(p[i], (s[i] * (size[i] - 1) + span(k[i], d[i])) // 2) for i in range(n)] * 2
    return (1, c) + tuple(size), (c, m // group) + tuple(k), s, p, d, group, opad


@pytest.mark.parametrize("seed", range(30))
def test_conv_random(seed):
    """Random geometry, 1-D to 3-D: every case goes through oneDNN."""
    r = np.random.default_rng(100 + seed)
    xs, ws, s, p, d, group = random_config(r, False)
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    np.testing.assert_allclose(dvm_conv(x, w, b, s, p, d, group), ref_conv(x, w, b, s, p, d, group),
                               rtol=1e-4, atol=1e-4)
    xs, ws, s, p, d, group, opad = random_config(r, True)
    x, w, b = rand(*xs), rand(*ws), rand(ws[1] * group)
    np.testing.assert_allclose(dvm_conv(x, w, b, s, p, d, group, opad),
                               ref_conv_transpose(x, w, b, s, p, d, group, opad), rtol=1e-4, atol=1e-4)


def test_conv_defaults():
    """Empty strides, pads and dilations are the ONNX defaults."""
    x, w = rand(1, 2, 6, 5), rand(3, 2, 2, 3)
    got = run1("conv", [x, w], [Shape(()), Shape(()), Shape(()), 1])
    np.testing.assert_allclose(got, ref_conv(x, w, None, (1, 1), (0,) * 4, (1, 1), 1), rtol=1e-4, atol=1e-4)


def test_conv_cache_shapes():
    """One kernel, many shapes in a row: each gets its own primitive."""
    w = rand(4, 3, 3, 3)
    for h in (5, 6, 5, 9):
        x = rand(1, 3, h, h + 1)
        got = dvm_conv(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1), 1)
        np.testing.assert_allclose(got, ref_conv(x, w, None, (1, 1), (1,) * 4, (1, 1), 1), rtol=1e-4, atol=1e-4)


# (X, W, strides, pads, dilations, group, output_padding, bias)
CONVT_CASES = [
    ((1, 1, 3, 3), (1, 2, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0), False),
    ((2, 3, 5, 7), (3, 4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 1), True),
    ((1, 4, 7, 5), (4, 3, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 2, (0, 0), True),   # groups
    ((1, 2, 6, 6), (2, 3, 3, 3), (3, 2), (0, 0, 0, 0), (1, 1), 1, (2, 1), True),   # output_padding > pads
    ((1, 3, 5, 4), (3, 2, 3, 2), (1, 2), (2, 0, 1, 1), (2, 1), 1, (0, 1), False),  # dilation, asym pads
    ((1, 6, 7, 7), (6, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6, (1, 1), True),   # depthwise
    ((2, 3, 13), (3, 5, 4), (2,), (1, 2), (1,), 1, (1,), True),                   # 1-D
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), (2, 1, 2), (0, 1, 0, 0, 1, 1), (1, 1, 1), 1, (1, 0, 0), True),  # 3-D
    ((0, 3, 5, 5), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0), True),   # zero batch
    # kernel = stride, no pads: one sgemm per input row (conv.c's unpool), and its neighbours
    ((2, 5, 7, 3), (5, 6, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0), True),
    ((1, 3, 4, 5), (3, 4, 3, 2), (3, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0), False),
    ((1, 2, 3, 7), (2, 3, 1, 3), (1, 3), (0, 0, 0, 0), (1, 1), 1, (0, 0), True),
    ((1, 4, 1, 1), (4, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0), True),
    ((1, 4, 6, 5), (4, 2, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 2, (0, 0), True),   # groups: oneDNN
    ((1, 4, 6, 5), (4, 2, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (1, 1), True),   # output_padding: oneDNN
    ((1, 4, 6, 5), (4, 2, 2, 2), (2, 2), (1, 0, 0, 1), (1, 1), 1, (0, 0), True),   # pads: oneDNN
    # a begin pad on one axis that output_padding makes up: Y is X * kernel, but not an unpool
    ((1, 4, 6, 5), (4, 2, 2, 2), (2, 2), (0, 1, 0, 0), (1, 1), 1, (0, 1), True),
    ((2, 4, 5, 7), (4, 3, 2, 3), (2, 3), (1, 0, 0, 0), (1, 1), 1, (1, 0), False),
]


@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,opad,bias", CONVT_CASES)
def test_conv_transpose(xs, ws, strides, pads, dil, group, opad, bias):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[1] * group) if bias else None
    got = dvm_conv(x, w, b, strides, pads, dil, group, opad)
    want = ref_conv_transpose(x, w, b, strides, pads, dil, group, opad)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if x.size:
        ins = [x, w] + ([b] if bias else [])
        ort = ort_node("ConvTranspose", ins, dict(strides=strides, pads=pads, dilations=dil, group=group,
                                                  output_padding=opad))
        np.testing.assert_allclose(got, ort, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,opad,bias",
                         [c[:6] + (None, c[6]) for c in CONV_CASES] + CONVT_CASES)
def test_conv_const_weights(xs, ws, strides, pads, dil, group, opad, bias):
    """W (and B) as module constants: W's prepacked form, kept in oneDNN's
    layout after the first call, gives the reference's result."""
    x, w = rand(*xs), rand(*ws)
    m = ws[0] if opad is None else ws[1] * group
    b = rand(m) if bias else None
    got = dvm_conv(x, w, b, strides, pads, dil, group, opad, const_from=1)
    want = (ref_conv(x, w, b, strides, pads, dil, group) if opad is None
            else ref_conv_transpose(x, w, b, strides, pads, dil, group, opad))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# Convs big enough to be cut into units over the thread pool (ops/cpu/conv.c,
# run_split): bands of output rows (first, middle and last with their own
# pads; pads wider than a band; strides and dilations; 1-D and 3-D) and, for
# 1x1, output channels in slices of 16 with a shorter last one; whole groups
# of awkward sizes, batches, primes, convs too small to cut.
SPLIT_CASES = [
    ((1, 16, 33, 35), (40, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    ((2, 16, 33, 35), (40, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, False),
    ((1, 7, 97, 101), (33, 7, 3, 3), (2, 2), (2, 1, 0, 3), (2, 2), 1, True),
    ((1, 64, 40, 41), (100, 64, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),  # 1x1 (a GEMM)
    ((1, 112, 2, 2), (1280, 112, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),  # 1x1 over 2x2 (blocked)
    ((1, 32, 160, 161), (32, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 32, True),  # depthwise
    ((1, 24, 80, 80), (36, 4, 3, 3), (1, 2), (1, 0, 1, 2), (1, 1), 6, True),     # 6 groups of 6
    ((1, 8, 9, 20, 21), (20, 8, 3, 3, 3), (1, 1, 1), (1,) * 6, (1, 1, 1), 1, True),  # 3-D
    ((1, 32, 9, 30), (32, 32, 7, 3), (1, 1), (6, 1, 6, 1), (1, 1), 1, True),     # pads past a band
    ((1, 16, 50, 3), (24, 16, 5, 3), (3, 1), (4, 0, 7, 2), (2, 1), 1, False),    # stride 3, dilation 2
    ((1, 64, 1001), (64, 64, 5), (1,), (2, 2), (1,), 1, True),                   # 1-D
    ((3, 17, 41, 13), (31, 17, 3, 1), (1, 1), (1, 0, 1, 0), (1, 1), 1, True),    # batch 3, primes
    ((3, 16, 12, 12), (64, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),   # small: whole on the caller
    ((1, 64, 300, 1), (64, 64, 5, 1), (1, 1), (2, 0, 2, 0), (1, 1), 1, True),     # [5, 1] over W = 1
    ((1, 80, 1, 700), (64, 80, 1, 3), (1, 1), (0, 1, 0, 1), (1, 1), 1, True),     # [1, 3] over H = 1
]

# conv_transpose cut into slices of output channels: 16 and 8 (narrow), whole
# groups, and a crop (output_padding past the pads: Y past the window is B).
SPLIT_CONVT_CASES = [
    ((1, 24, 40, 40), (24, 24, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0), True),
    ((2, 16, 33, 17), (16, 12, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0), False),  # unpool's rows over threads
    ((2, 32, 30, 30), (32, 8, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4, (1, 1), True),
    ((1, 16, 40, 40), (16, 20, 3, 3), (3, 2), (0, 0, 0, 0), (1, 1), 1, (2, 1), True),
]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,opad,bias", SPLIT_CONVT_CASES)
def test_conv_transpose_split(xs, ws, strides, pads, dil, group, opad, bias, threads):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[1] * group) if bias else None
    got = dvm_conv(x, w, b, strides, pads, dil, group, opad, const_from=1, threads=threads)
    want = ref_conv_transpose(x, w, b, strides, pads, dil, group, opad)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("const_w", [False, True])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias", SPLIT_CASES)
def test_conv_split(xs, ws, strides, pads, dil, group, bias, const_w, threads):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    got = dvm_conv(x, w, b, strides, pads, dil, group, const_from=1 if const_w else None, threads=threads)
    np.testing.assert_allclose(got, ref_conv(x, w, b, strides, pads, dil, group), rtol=1e-4, atol=1e-4)


# fused_conv's activations (its activation attribute, in order) with alpha, beta
def ref_act(y, act, a, b):
    return {
        0: lambda: y,
        1: lambda: np.maximum(y, 0),
        2: lambda: np.tanh(y),
        3: lambda: 1 / (1 + np.exp(-y)),
        4: lambda: np.where(y > 0, y, y * a),
        5: lambda: np.minimum(np.maximum(y, a), b),
        6: lambda: np.clip(a * y + b, 0, 1),
        7: lambda: y * np.clip(y / 6 + 0.5, 0, 1),
        8: lambda: y / (1 + np.exp(-y)),
    }[act]()


# each with post_scale and post_shift of (1, 0), (0.7, -0.3), (-0.5, 2) in turn
FUSED_ACTS = [(0, 0.0, 0.0), (1, 0.0, 0.0), (2, 0.0, 0.0), (3, 0.0, 0.0), (4, 0.1, 0.0), (5, -0.5, 1.5),
              (6, 0.2, 0.5), (7, 0.0, 0.0), (8, 0.0, 0.0), (4, float("nan"), 0.0), (6, float("nan"), float("nan")),
              (5, float("nan"), float("nan")), (6, -0.3, 0.6), (6, 0.0, 0.7), (6, 0.0, 1.7), (6, -0.25, 0.5)]
FUSED_DEFAULTS = {4: (0.01, 0.0), 5: (-np.inf, np.inf), 6: (0.2, 0.5)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias",
                         [CONV_CASES[i] for i in (0, 2, 3, 8, 9, 13, 15, 16, 17, 18)] + SPLIT_CASES[2:5])
def test_fused_conv(xs, ws, strides, pads, dil, group, bias, threads):
    """fused_conv: conv then scale, shift, the activation, post_scale,
    post_shift (oneDNN post-ops), every activation, on the split and whole
    paths, zero batch and no input channels (the epilogue on B alone)."""
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    conv = ref_conv(x, w, b, strides, pads, dil, group)
    ins = [x, w] + ([b] if bias else [])
    for i, (act, a, bt) in enumerate(FUSED_ACTS):
        ps, psh = [(1.0, 0.0), (0.7, -0.3), (-0.5, 2.0)][i % 3]
        attrs = [Shape(strides), Shape(pads), Shape(dil), group, act, a, bt, ps, psh, 0, 0]
        got = run1("fused_conv", ins, attrs, threads=threads)
        ra, rb = FUSED_DEFAULTS[act] if np.isnan(a) else (a, bt)
        want = ref_act(conv, act, ra, rb) * ps + psh
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"activation {act}")


def channels_last(a):
    """a's elements in [N, spatial..., C] order, under a's dims [N, C, spatial...]."""
    return np.ascontiguousarray(np.moveaxis(a, 1, -1)).reshape(a.shape)


def from_channels_last(a):
    return np.moveaxis(a.reshape((a.shape[0],) + a.shape[2:] + (a.shape[1],)), -1, 1)


# fused_conv with X and/or Y channels last (pass conv_nhwc): the whole,
# banded and sliced paths, awkward dims (1, primes, channels not a multiple
# of 16), 1x1 (blocked then, not a GEMM), depthwise, groups, 1-D and 3-D, no
# input channels.
LAYOUT_CASES = [CONV_CASES[i] for i in (0, 2, 3, 8, 9, 13, 15, 16, 17, 18)] + SPLIT_CASES + [
    ((1, 5, 1, 1), (7, 5, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ((1, 19, 1, 37), (23, 19, 1, 3), (1, 1), (0, 1, 0, 1), (1, 1), 1, True),
    ((2, 13, 29, 1), (17, 13, 3, 1), (2, 1), (1, 0, 1, 0), (1, 1), 1, False),
    ((1, 0, 5, 5), (6, 0, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
]


def check_fused(ins, attrs, want, layout, threads):
    """fused_conv on ins against want, its Y read back from channels last where layout bit 1 says so."""
    got = run1("fused_conv", ins, attrs, threads=threads)
    if layout & 2:
        got = from_channels_last(got)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("layout", [1, 2, 3])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias", LAYOUT_CASES)
def test_fused_conv_layout(xs, ws, strides, pads, dil, group, bias, layout, threads):
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    want = np.maximum(ref_conv(x, w, b, strides, pads, dil, group), 0) * 0.5 + 0.25
    ins = [channels_last(x) if layout & 1 else x, w] + ([b] if bias else [])
    attrs = [Shape(strides), Shape(pads), Shape(dil), group, 1, 0.0, 0.0, 0.5, 0.25, layout, 0]
    check_fused(ins, attrs, want, layout, threads)


# Depthwise 2-D convs (group = C = M): conv_dw.c's loops where X and Y are
# channels first (layout 0), the stride along W 1 or 2 and output rows at
# least 32 (stride 1) or 16 (stride 2) wide; the others (channels last,
# narrower rows, stride 3, channel multipliers > 1) stay on oneDNN.
# Channels 1, 3, 5, 16, 17, 33, 48, 88; heights 1, 2, 3, 7, 9, 13, 19; rows
# from 16 (one 16-column block after another, four at once, a last one
# overlapping, on rows padded with zeros); pads, pads wider than the
# kernel, dilations, strides 2 and 3 along H, 1x3, 3x5 and 5x5 kernels.
DW_CASES = [
    ((1, 1, 7, 67), (1, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    ((2, 3, 13, 130), (3, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 3, True),
    ((1, 17, 2, 70), (17, 1, 3, 3), (1, 1), (1, 0, 2, 1), (1, 1), 17, False),
    ((1, 33, 13, 131), (33, 1, 3, 3), (2, 2), (0, 0, 1, 1), (1, 1), 33, True),   # TF "same", stride 2
    ((1, 33, 1, 64), (33, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 33, True),
    ((1, 17, 13, 67), (17, 1, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 17, True),    # dilation 2
    ((2, 48, 19, 70), (48, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 48, True),    # 5x5
    ((1, 16, 7, 130), (16, 1, 3, 3), (3, 2), (1, 2, 0, 1), (1, 1), 16, False),
    ((1, 5, 13, 66), (5, 1, 1, 3), (1, 1), (0, 1, 0, 1), (1, 1), 5, True),       # 1x3
    ((1, 17, 13, 90), (17, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 17, True),    # 4 blocks + overlap
    ((2, 16, 9, 161), (16, 1, 3, 3), (2, 2), (0, 0, 1, 1), (1, 1), 16, False),   # stride 2 blocks
    ((1, 3, 11, 140), (3, 1, 3, 5), (2, 2), (1, 2, 1, 2), (2, 2), 3, True),      # stride 2, dilated
    ((1, 88, 3, 96), (88, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 88, True),     # ppocr_mobile_cls's
    ((1, 5, 9, 33), (5, 1, 3, 3), (1, 1), (3, 4, 3, 2), (1, 1), 5, True),        # 37 columns, wide pads
    ((1, 3, 7, 32), (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3, False),       # 32: two blocks
    ((1, 16, 9, 32), (16, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 16, True),     # stride 2 into 16
    ((1, 17, 5, 41), (17, 1, 5, 5), (1, 2), (2, 2, 2, 2), (1, 1), 17, True),     # stride 2 into 21
    # oneDNN's: a channel multiplier of 2, a 16-wide row with a 5x5 kernel, stride 3 along W
    ((1, 3, 7, 7), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3, True),
    ((1, 48, 16, 16), (48, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 48, True),
    ((1, 16, 7, 200), (16, 1, 3, 3), (1, 3), (1, 1, 1, 1), (1, 1), 16, True),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", [0, 1, 2, 3])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias", DW_CASES)
def test_fused_conv_depthwise(xs, ws, strides, pads, dil, group, bias, layout, threads):
    """Each layout with a Relu and post scale; W a parameter and a module
    constant; layout 0 against ONNX Runtime too."""
    x, w = rand(*xs), rand(*ws)
    b = rand(ws[0]) if bias else None
    conv = ref_conv(x, w, b, strides, pads, dil, group)
    want = np.maximum(conv, 0) * 0.5 + 0.25
    ins = [channels_last(x) if layout & 1 else x, w] + ([b] if bias else [])
    attrs = [Shape(strides), Shape(pads), Shape(dil), group, 1, 0.0, 0.0, 0.5, 0.25, layout, 0]
    for const_from in (None, 1):
        got = run1("fused_conv", ins, attrs, threads=threads, const_from=const_from)
        got = from_channels_last(got) if layout & 2 else got
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"W constant: {const_from}")
    if layout == 0 and threads == 1:
        ort = ort_node("Conv", [x, w] + ([b] if bias else []), dict(strides=strides, pads=pads, dilations=dil,
                                                                      group=group))
        np.testing.assert_allclose(dvm_conv(x, w, b, strides, pads, dil, group), ort, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", [0, 3])
@pytest.mark.parametrize("case", [0, 3, 6, 7])
def test_fused_conv_depthwise_epilogues(case, layout):
    """Every activation and post scale/shift, on the depthwise loops
    (layout 0: their vector rows for identity, Relu, LeakyRelu, Clip and
    HardSwish, epilogue() for the others) and oneDNN's post-ops (3)."""
    xs, ws, strides, pads, dil, group, bias = DW_CASES[case]
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    conv = ref_conv(x, w, b, strides, pads, dil, group)
    ins = [channels_last(x) if layout else x, w, b]
    for i, (act, a, bt) in enumerate(FUSED_ACTS):
        ps, psh = [(1.0, 0.0), (0.7, -0.3), (-0.5, 2.0)][i % 3]
        attrs = [Shape(strides), Shape(pads), Shape(dil), group, act, a, bt, ps, psh, layout, 0]
        got = run1("fused_conv", ins, attrs, const_from=1)
        got = from_channels_last(got) if layout else got
        ra, rb = FUSED_DEFAULTS[act] if np.isnan(a) else (a, bt)
        np.testing.assert_allclose(got, ref_act(conv, act, ra, rb) * ps + psh, rtol=1e-4, atol=1e-4,
                                   err_msg=f"activation {act}")


# fused_conv with Z (ONNX Runtime's FusedConv input Z, pass conv_add: the
# residual Add before the activation): Z plain or channels last (layout bit
# 2), with X and Y either way, on the whole, banded and sliced paths; Z is
# copied into Y (or oneDNN's blocked Y) and added by the sum post-op.
Z_CASES = [c for c in LAYOUT_CASES if c[-1]]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("layout", [0, 2, 4, 6, 7])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias", Z_CASES)
def test_fused_conv_z(xs, ws, strides, pads, dil, group, bias, layout, threads):
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    conv = ref_conv(x, w, b, strides, pads, dil, group)
    z = rand(*conv.shape)
    want = np.maximum(conv + z, 0) * 0.5 + 0.25
    ins = [channels_last(x) if layout & 1 else x, w, b, channels_last(z) if layout & 4 else z]
    attrs = [Shape(strides), Shape(pads), Shape(dil), group, 1, 0.0, 0.0, 0.5, 0.25, layout, 0]
    check_fused(ins, attrs, want, layout, threads)


# fused_conv with algo 1 (pass conv_winograd): oneDNN's Winograd kernels
# where they take the call (3x3, stride 1, channels a multiple of 16, an
# output image of at least half as many pixels as channels), its
# direct ones elsewhere (5 channels, stride 2, groups, 1x1), with Z and the
# layouts, odd and prime sizes, 1x1 images, bands and slices over threads.
WINO_CASES = [
    ((1, 16, 13, 17), (16, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 32, 29, 7), (48, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 64, 1, 1), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 56, 56), (32, 16, 3, 3), (1, 1), (0, 1, 2, 1), (1, 1), 1),
    ((1, 5, 11, 11), (7, 5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 16, 23, 23), (16, 16, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 32, 9, 9), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    ((1, 16, 9, 9), (16, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    # either side of the kernel's rule: 2 x 32 pixels >= 64 channels, 2 x 28 < 64
    ((1, 64, 4, 8), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 64, 4, 7), (64, 64, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    # channels not a multiple of 16: the blocked copies (conv.c's blk16_copy) pad them
    ((1, 24, 13, 11), (40, 24, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 32, 20, 19), (24, 32, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("layout,with_z", [(0, False), (0, True), (3, False), (7, True), (2, True), (5, True)])
@pytest.mark.parametrize("xs,ws,strides,pads,dil,group", WINO_CASES)
def test_fused_conv_winograd(xs, ws, strides, pads, dil, group, layout, with_z, threads):
    x, w, b = rand(*xs), rand(*ws), rand(ws[0])
    conv = ref_conv(x, w, b, strides, pads, dil, group)
    z = rand(*conv.shape)
    want = np.maximum(conv + z if with_z else conv, 0)
    ins = [channels_last(x) if layout & 1 else x, w, b] + ([channels_last(z) if layout & 4 else z] if with_z else [])
    attrs = [Shape(strides), Shape(pads), Shape(dil), group, 1, 0.0, 0.0, 1.0, 0.0, layout, 1]
    check_fused(ins, attrs, want, layout, threads)


def test_fused_conv_z_checks():
    """Z must have Y's dims; the shape function and the kernel say so."""
    x, w, b = rand(1, 2, 5, 5), rand(3, 2, 3, 3), rand(3)
    attrs = [Shape((1, 1)), Shape((0,) * 4), Shape((1, 1)), 1, 1, 0.0, 0.0, 1.0, 0.0, 0, 0]
    with pytest.raises(DvmError, match=r"fused_conv: Z \[1,3,3,4\] must have Y's dims \[1,3,3,3\]"):
        run1("fused_conv", [x, w, b, rand(1, 3, 3, 4)], attrs)
    with pytest.raises(DvmError, match=r"fused_conv: Z \[1,3,3,4\] must have Y's dims \[1,3,3,3\]"):
        run1("fused_conv", [x, w, b, rand(1, 3, 3, 4)], attrs, outputs=[(np.float32, (1, 3, 3, 3))])


@pytest.mark.parametrize("attrs,msg", [
    ([9, 0.0, 0.0, 1.0, 0.0, 0, 0], r"fused_conv: activation 9 is not one of 9"),
    ([1, 0.0, 0.0, float("inf"), 0.0, 0, 0], r"fused_conv: post_scale = inf must be finite"),
    ([1, 0.0, 0.0, 1.0, 0.0, 8, 0], r"fused_conv: layout 8 is not 0 to 7"),
    ([1, 0.0, 0.0, 1.0, 0.0, 0, 2], r"fused_conv: algo 2 is not 0 or 1"),
    ([1, 0.0, 0.0, 1.0], r"fused_conv"),
])
def test_fused_conv_errors(attrs, msg):
    with pytest.raises(DvmError, match=msg):
        run1("fused_conv", [rand(1, 2, 5, 5), rand(3, 2, 3, 3)], [Shape((1, 1)), Shape((0,) * 4), Shape((1, 1)), 1] + attrs)


@pytest.mark.parametrize("ins,attrs,msg", [
    ([(1, 3, 5, 5), (4, 2, 3, 3)], [(1, 1), (0,) * 4, (1, 1), 1],
     r"conv: W \[4,2,3,3\] does not fit X \[1,3,5,5\] with group 1"),
    ([(1, 4, 5, 5), (3, 2, 3, 3)], [(1, 1), (0,) * 4, (1, 1), 2], r"W\[0\] divisible by group"),
    ([(1, 3, 5, 5), (4, 3, 3, 3), (3,)], [(1, 1), (0,) * 4, (1, 1), 1], r"conv: B \[3\] must be \[4\]"),
    ([(1, 3, 5, 5), (4, 3, 3)], [(1, 1), (0,) * 4, (1, 1), 1], r"conv: W \[4,3,3\] must have the rank of X"),
    ([(3, 5), (4, 3, 3)], [(1, 1), (0,) * 4, (1, 1), 1], r"conv: X \[3,5\] must have rank 3 to 5"),
    ([(1, 3, 2, 5), (4, 3, 3, 3)], [(1, 1), (0,) * 4, (1, 1), 1],
     r"conv: X dim 2 is 2, with pads 0\+0 smaller than the window 3"),
    ([(1, 3, 5, 5), (4, 3, 3, 3)], [(1,), (0,) * 4, (1, 1), 1], r"conv: attribute strides has 1 values, want 2"),
    ([(1, 3, 5, 5), (4, 3, 3, 3)], [(0, 1), (0,) * 4, (1, 1), 1], r"conv: attribute strides\[0\] = 0 is out of range"),
    ([(1, 3, 5, 5), (4, 3, 3, 3)], [(1, 1), (0,) * 3, (1, 1), 1], r"conv: attribute pads has 3 values, want 4"),
    ([(1, 3, 5, 5), (4, 3, 3, 3)], [(1, 1), (0,) * 4, (1, 1), 0], r"conv: attribute group = 0 is out of range"),
    ([(1, 3, 5, 5), (4, 3, 3, 3)], [(1, 1), (0,) * 4, (1, 1)],
     r"shape function \"conv\": conv: takes 6 to 7 inputs, got 5"),
])
def test_conv_errors(ins, attrs, msg):
    arrays = [np.zeros(s, np.float32) for s in ins]
    attrs = [Shape(a) if isinstance(a, tuple) else a for a in attrs]
    with pytest.raises(DvmError, match=msg):
        run1("conv", arrays, attrs)


def test_conv_kernel_checks():
    """The kernel itself refuses a wrong output shape and other dtypes."""
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3)
    attrs = [Shape((1, 1)), Shape((0,) * 4), Shape((1, 1)), 1]
    with pytest.raises(DvmError, match=r"conv: output Y \[1,3,5,5\] != \[1,3,3,3\]"):
        run1("conv", [x, w], attrs, outputs=[(np.float32, (1, 3, 5, 5))])
    with pytest.raises(DvmError, match=r"conv: dtypes f64, f64 -> f64: only f32"):
        run1("conv", [x.astype(np.float64), w.astype(np.float64)], attrs)
    with pytest.raises(DvmError, match=r"conv: takes 2 to 3 inputs and 1 output, got 1 and 1"):
        run1("conv", [x], attrs, outputs=[(np.float32, (1, 3, 3, 3))])
    with pytest.raises(DvmError, match=r"kernel \"conv\": conv: takes 4 attributes, got 3"):
        run1("conv", [x, w], attrs[:3], outputs=[(np.float32, (1, 3, 3, 3))])
    with pytest.raises(DvmError, match=r"conv: attribute group must be int, got shape"):
        run1("conv", [x, w], attrs[:3] + [Shape((1,))], outputs=[(np.float32, (1, 3, 3, 3))])


def test_conv_transpose_errors():
    x, w = rand(1, 3, 5, 5), rand(3, 2, 3, 3)
    with pytest.raises(DvmError, match=r"conv_transpose: W \[3,2,3,3\] does not fit X \[1,3,5,5\] with group 2"):
        dvm_conv(x, w, None, (1, 1), (0,) * 4, (1, 1), 2, (0, 0))
    with pytest.raises(DvmError, match=r"conv_transpose: X dim 2 is 5: with pads 4\+4, the output would have -1"):
        dvm_conv(x, w, None, (1, 1), (4, 0, 4, 0), (1, 1), 1, (0, 0))
    with pytest.raises(DvmError, match=r"conv_transpose: takes 7 to 8 inputs, got 6"):
        run1("conv_transpose", [x, w], [Shape((1, 1)), Shape((0,) * 4), Shape((1, 1)), 1])


# ONNX auto_pad and ConvTranspose output_shape, as shapefuncs/window.h
# resolves them (checked against the C helpers below; used to map the node
# tests)

def auto_pads(mode, size, k, s, d):
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        return 0, 0
    out = -(-size // s)
    total = max(0, (out - 1) * s + span(k, d) - size)
    begin = total // 2 if mode == "SAME_UPPER" else total - total // 2
    return begin, total - begin


def transpose_pads(mode, size, k, s, d, opad, out=None):
    """(begin, end, output_padding), or None where the begin pad would be
    negative; a negative end pad goes into output_padding."""
    natural = s * (size - 1) + opad + span(k, d)
    # SAME_*: in * stride, or (ONNX Runtime) the size without pads when smaller
    total = natural - (min(size * s, natural) if out is None else out)
    begin = total // 2 if mode == "SAME_UPPER" else total - total // 2
    if begin < 0:
        return None
    end = total - begin
    return begin, max(end, 0), opad - min(end, 0)


def onnx_attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def window_attrs(a, x_shape, kernel):
    """strides, pads (auto_pad resolved), dilations of Conv, MaxPool and
    AveragePool attributes `a`."""
    n = len(x_shape) - 2
    strides = list(a.get("strides", [1] * n))
    dil = list(a.get("dilations", [1] * n))
    mode = a.get("auto_pad", b"NOTSET").decode()
    if mode == "NOTSET":
        return strides, list(a.get("pads", [0] * 2 * n)), dil
    pb = [auto_pads(mode, x_shape[2 + i], kernel[i], strides[i], dil[i]) for i in range(n)]
    return strides, [p[0] for p in pb] + [p[1] for p in pb], dil


def conv_node_cases(op_types):
    """The ONNX backend node tests of these ops, {name: (node, {input name:
    array}, [output arrays], source)}: the stored subset in NODE_TESTS, then
    the cases that the installed onnx package generates (its current suite,
    outputs from its reference implementation) under names the subset lacks."""
    cases = {}
    if os.path.isdir(NODE_TESTS):
        for name in sorted(os.listdir(NODE_TESTS)):
            path = os.path.join(NODE_TESTS, name, "model.onnx")
            if not os.path.exists(path):
                continue
            model = onnx.load(path)
            if len(model.graph.node) != 1 or model.graph.node[0].op_type not in op_types:
                continue
            data = os.path.join(NODE_TESTS, name, "test_data_set_0")
            ins = {v.name: np.load(os.path.join(data, f"input_{i}.npy")) for i, v in enumerate(model.graph.input)}
            outs = [np.load(os.path.join(data, f"output_{i}.npy")) for i in range(len(model.graph.output))]
            cases[name] = (model.graph.node[0], ins, outs, "stored")
    try:
        import importlib
        import warnings
        import onnx.backend.test.case.node as gen
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for op in op_types:
                gen._TargetOpType = op
                importlib.import_module("onnx.backend.test.case.node." + op.lower())
        generated = gen._NodeTestCases
    except (ImportError, AttributeError):
        generated = []
    for t in generated:
        nodes = t.model.graph.node
        if t.name in cases or len(nodes) != 1 or nodes[0].op_type not in op_types:
            continue
        ins, outs = t.data_sets[0]
        cases[t.name] = (nodes[0], {v.name: x for v, x in zip(t.model.graph.input, ins)}, list(outs),
                         "onnx " + onnx.__version__)
    return cases


CONV_NODE_CASES = conv_node_cases(("Conv", "ConvTranspose"))


@pytest.mark.parametrize("name", sorted(CONV_NODE_CASES))
def test_onnx_node(name):
    node, ins, outs, _ = CONV_NODE_CASES[name]
    x, w = ins[node.input[0]], ins[node.input[1]]
    b = ins[node.input[2]] if len(node.input) > 2 and node.input[2] else None
    a = onnx_attrs(node)
    n, k, group = x.ndim - 2, w.shape[2:], a.get("group", 1)
    if node.op_type == "Conv":
        strides, pads, dil = window_attrs(a, x.shape, k)
        got = dvm_conv(x, w, b, strides, pads, dil, group)
    else:
        strides, dil = list(a.get("strides", [1] * n)), list(a.get("dilations", [1] * n))
        opad = list(a.get("output_padding", [0] * n))
        mode = a.get("auto_pad", b"NOTSET").decode()
        if "output_shape" in a or mode.startswith("SAME"):
            shape = list(a["output_shape"])[-n:] if "output_shape" in a else [None] * n
            pb = [transpose_pads(mode, x.shape[2 + i], k[i], strides[i], dil[i], opad[i], shape[i])
                  for i in range(n)]
            pads, opad = [p[0] for p in pb] + [p[1] for p in pb], [p[2] for p in pb]
        else:
            pads = list(a.get("pads", [0] * 2 * n))
        got = dvm_conv(x, w, b, strides, pads, dil, group, opad)
    np.testing.assert_allclose(got, outs[0], rtol=1e-3, atol=1e-4)


def transpose_model(w, b, **attrs):
    """One ConvTranspose over x [n, C, h, w] (symbolic) with W and B constants."""
    inits = [onnx.numpy_helper.from_array(w, "w")] + ([onnx.numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if b is not None else []), ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", w.shape[0], "h", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


@pytest.mark.parametrize("attrs", [
    dict(auto_pad="SAME_UPPER", strides=[2, 3]),
    dict(auto_pad="SAME_LOWER", strides=[3, 2], dilations=[2, 1]),
    dict(auto_pad="SAME_UPPER", strides=[1, 1], group=2),
    dict(auto_pad="SAME_LOWER", strides=[2, 2], output_padding=[1, 0]),
    dict(auto_pad="VALID", strides=[2, 1]),
])
def test_conv_transpose_auto_pad_compiled(attrs):
    """auto_pad resolved where the node runs, at every input shape of one
    compiled module: 1x1, primes, an empty batch."""
    g = attrs.get("group", 1)
    w = rand(4, 6 // g, 3, 2)
    b = rand(6)
    model = transpose_model(w, b, **attrs)
    for xs in [(1, 4, 1, 1), (2, 4, 5, 7), (1, 4, 13, 2), (0, 4, 3, 3)]:
        x = rand(*xs)
        got = run_model(model, {"x": x})[0]
        # ONNX Runtime at batch 1 for an empty batch: the shape
        want = ort_node("ConvTranspose", [x if xs[0] else rand(1, *xs[1:]), w, b], attrs, opset=22)
        if not xs[0]:
            assert got.shape == (0,) + want.shape[1:]
            continue
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    dict(output_shape=[10, 7], strides=[3, 2]),
    dict(output_shape=[8, 7], strides=[2, 3]),
    dict(output_shape=[10, 7], strides=[3, 2], output_padding=[1, 1], kernel_shape=[3, 2]),
    dict(output_shape=[9, 6], strides=[3, 2], auto_pad="SAME_UPPER"),
    dict(output_shape=[11, 7], strides=[3, 3], dilations=[2, 2]),
    dict(output_shape=[6, 5], strides=[3, 2], auto_pad="SAME_LOWER"),
])
def test_conv_transpose_output_shape_compiled(attrs):
    w = rand(4, 6, 3, 2)
    model = transpose_model(w, None, **attrs)
    for xs in [(1, 4, 3, 3), (2, 4, 3, 3)]:
        x = rand(*xs)
        got = run_model(model, {"x": x})[0]
        np.testing.assert_allclose(got, ort_node("ConvTranspose", [x, w], attrs, opset=22), rtol=1e-4, atol=1e-5)
    # output_shape too large for the input: an explicit error where it runs
    with pytest.raises(DvmError, match=r"conv_transpose: output size \d+ would need a negative begin pad"):
        run_model(model, {"x": rand(1, 4, 1, 1)})


AUTO_PAD_DRIVER = r"""
#include <stdio.h>
#include "shapefuncs/window.h"
int main(void) {
  for (int mode = 0; mode < 4; mode++)
    for (int in = 0; in < 12; in++)
      for (int k = 1; k < 6; k++)
        for (int s = 1; s < 4; s++)
          for (int d = 1; d < 3; d++) {
            int64_t b, e;
            dvm_window_auto_pads((dvm_auto_pad)mode, in, k, s, d, &b, &e);
            printf("a %d %d %d %d %d %lld %lld\n", mode, in, k, s, d, (long long)b, (long long)e);
            if (in == 0) continue;
            for (int op = 0; op < s; op++)
              for (int out = -1; out < 3 * in + 4; out += (out < 0 ? 1 + in : 1)) {
                int64_t o = op;
                dvm_status *st = dvm_window_transpose_pads((dvm_auto_pad)mode, in, k, s, d, &o, out, &b, &e);
                printf("t %d %d %d %d %d %d %d ", mode, in, k, s, d, op, out);
                if (st) printf("err\n");
                else printf("%lld %lld %lld\n", (long long)b, (long long)e, (long long)o);
                dvm_status_free(st);
              }
          }
  return 0;
}
"""


def build_driver(tmp_path, source, libs):
    """Compiles a C driver against this build's headers and libraries (with
    its sanitizer flags); skips where that cannot be done."""
    cc = shutil.which("cc")
    build = os.path.dirname(os.path.dirname(os.path.abspath(DVM)))
    libs = [os.path.join(build, lib) for lib in libs]
    if not cc or not all(os.path.exists(p) for p in libs):
        pytest.skip("no C compiler or build libraries")
    src, exe = tmp_path / "drv.c", tmp_path / "drv"
    src.write_text(source)
    with open(os.path.join(build, "build.ninja")) as f:
        flags = sorted(set(re.findall(r"-fsanitize=\S+", f.read())))
    r = subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-I", ROOT, "-I", ROOT + "/vm/include", "-I", ROOT + "/vm",
                        str(src)] + libs + flags + ["-Wl,-rpath," + build, "-lm", "-lpthread", "-o", str(exe)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"driver does not build: {r.stderr[:300]}")
    return str(exe)


def test_auto_pad_helpers(tmp_path):
    """dvm_window_auto_pads and dvm_window_transpose_pads, called from C,
    against the ONNX formulas."""
    exe = build_driver(tmp_path, AUTO_PAD_DRIVER, ["shapefuncs/libdvm_shapefns.a", "vm/libdvm_core.a"])
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split("\n")
    names = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]
    count = 0
    for line in filter(None, out):
        f = line.split()
        if f[0] == "a":
            mode, size, k, s, d, b, e = map(int, f[1:])
            assert (b, e) == auto_pads(names[mode], size, k, s, d), line
        else:
            mode, size, k, s, d, op, out = map(int, f[1:8])
            want = transpose_pads(names[mode], size, k, s, d, op, None if out < 0 else out)
            assert (f[8] == "err") if want is None else tuple(map(int, f[8:11])) == want, line
        count += 1
    assert count > 1000


THREADS_DRIVER = r"""
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "dvm/dvm.h"

/* Y = conv(X [1, 2, H, H+1], W [3, 2, 3, 3], B), pads 1: 4 threads, each with its
 * own VM (1 or 2 kernel threads), over 70 heights, so that the primitive cache
 * of conv.c is filled, shared and evicted (64 entries) at once; every result is
 * checked against a direct loop. */
static dvm_module *mod;
static float w[3 * 2 * 9], b[3];
static int nparams; /* 3, or 1 where W and B are module constants with w's and b's values */

static void *work(void *arg) {
  int id = (int)(long)arg, bad = 0;
  dvm_vm_options o;
  dvm_vm_options_init(&o);
  o.threads = 1 + id % 2;
  dvm_vm *vm;
  if (dvm_vm_create(mod, &o, &vm)) return (void *)1L;
  for (int it = 0; it < 140 && !bad; it++) {
    int64_t h = 1 + (it * 7 + id * 13) % 70, dims[4] = {1, 2, h, h + 1}, wd[4] = {3, 2, 3, 3}, bd[1] = {3};
    dvm_tensor *x, *wt, *bt;
    if (dvm_tensor_create(DVM_F32, 4, dims, &x)) return (void *)1L;
    float *xd = dvm_tensor_data(x);
    for (int64_t i = 0; i < 2 * h * (h + 1); i++) xd[i] = (float)((i * 31 + it) % 17) - 8;
    if (dvm_tensor_wrap(DVM_F32, 4, wd, w, NULL, NULL, &wt) || dvm_tensor_wrap(DVM_F32, 1, bd, b, NULL, NULL, &bt))
      return (void *)1L;
    dvm_value args[3] = {dvm_value_tensor(x), dvm_value_tensor(wt), dvm_value_tensor(bt)}, r = {0};
    dvm_status *st = dvm_vm_invoke(vm, 0, args, nparams, &r, 1);
    if (st) {
      fprintf(stderr, "%s\n", dvm_status_message(st));
      dvm_status_free(st);
      bad = 1;
    } else {
      const float *y = dvm_tensor_data(r.u.tensor);
      int64_t hw = h, ww = h + 1;
      for (int m = 0; m < 3; m++)
        for (int64_t i = 0; i < hw; i++)
          for (int64_t j = 0; j < ww; j++) {
            double acc = b[m];
            for (int c = 0; c < 2; c++)
              for (int ki = 0; ki < 3; ki++)
                for (int kj = 0; kj < 3; kj++) {
                  int64_t ii = i + ki - 1, jj = j + kj - 1;
                  if (ii >= 0 && ii < hw && jj >= 0 && jj < ww)
                    acc += (double)xd[(c * hw + ii) * ww + jj] * w[((m * 2 + c) * 3 + ki) * 3 + kj];
                }
            if (fabs(acc - y[(m * hw + i) * ww + j]) > 1e-3) bad = 1;
          }
      dvm_value_clear(&r);
    }
    dvm_tensor_release(x);
    dvm_tensor_release(wt);
    dvm_tensor_release(bt);
  }
  dvm_vm_destroy(vm);
  return (void *)(long)bad;
}

int main(int argc, char **argv) {
  for (int i = 0; i < 54; i++) w[i] = (float)((i * 5) % 7) - 3;
  for (int i = 0; i < 3; i++) b[i] = (float)i;
  nparams = argc > 2 ? atoi(argv[2]) : 3;
  dvm_status *st = dvm_module_load_file(argv[1], NULL, &mod);
  if (st) {
    fprintf(stderr, "%s\n", dvm_status_message(st));
    return 2;
  }
  pthread_t t[4];
  for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)i);
  long bad = 0;
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    bad |= (long)r;
  }
  dvm_module_release(mod);
  printf(bad ? "FAIL\n" : "OK\n");
  return (int)bad;
}
"""


@pytest.mark.parametrize("const_w", [False, True])
def test_conv_threads(tmp_path, const_w):
    """Many threads, one module, the shared primitive cache under eviction;
    with W and B constants, also W's kept forms made and shared at once."""
    exe = build_driver(tmp_path, THREADS_DRIVER, ["libdvm.so"])
    w = ((np.arange(54) * 5) % 7 - 3).astype(np.float32).reshape(3, 2, 3, 3)  # the driver's w and b
    b = np.arange(3, dtype=np.float32)
    prog = program("conv", [np.zeros((1, 2, 5, 6), np.float32), w, b],
                   [Shape((1, 1)), Shape((1,) * 4), Shape((1, 1)), 1], const_from=1 if const_w else None)
    mod = assemble(prog, tmp_path / "conv.dvmb")
    r = subprocess.run([exe, mod, "1" if const_w else "3"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stdout + r.stderr


F16_CASES = [CONV_CASES[i] for i in (0, 1, 5, 7, 13, 14, 16)]


@pytest.mark.parametrize("xs,ws,strides,pads,dil,group,bias", F16_CASES)
def test_conv_f16(tmp_path, xs, ws, strides, pads, dil, group, bias):
    """An f16 Conv node through the whole stack: the compiler casts X, W and
    B to f32 for the f32 kernel and the result back (lower_ops.c's
    conv_via_f32); against the f64 convolution of the same f16 values."""
    x, w = rand(*xs).astype(np.float16), rand(*ws).astype(np.float16)
    ins = {"x": x, "w": w}
    if bias:
        ins["b"] = rand(ws[0]).astype(np.float16)
    node = helper.make_node("Conv", list(ins), ["y"], strides=list(strides), pads=list(pads), dilations=list(dil),
                            group=group)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT16, ["n"] + list(v.shape[1:])
                                                                      if k == "x" else v.shape)
                                        for k, v in ins.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
    got = run_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), ins)[0]
    want = ref_conv(x, w, ins.get("b"), strides, pads, dil, group)
    assert got.dtype == np.float16 and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3 * max(1, np.abs(want).max(initial=0)))
