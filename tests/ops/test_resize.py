"""resize against a NumPy version of the ONNX Resize spec written here (one
axis at a time), ONNX Runtime single-node models, and the ONNX backend node
tests."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from dvmop import DvmError, Shape, run1
from test_conv import conv_node_cases, onnx_attrs

rng = np.random.default_rng(2)

MODES = ["nearest", "linear", "cubic"]
COORDS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nearest",
          "half_pixel_symmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def coord_in(cmode, o, size, out, scale, length):
    if cmode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if cmode == "asymmetric":
        return o / scale
    if cmode == "align_corners":
        return 0.0 if length == 1 else o * (size - 1) / (length - 1)
    if cmode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if length > 1 else 0.0
    if cmode == "tf_half_pixel_for_nearest":
        return (o + 0.5) / scale
    # half_pixel_symmetric
    adjustment = out / length
    return size / 2 * (1 - adjustment) + (o + 0.5) / scale - 0.5


def round_nearest(nmode, x):
    f = np.floor(x)
    if nmode == "round_prefer_floor":
        return int(f if x - f == 0.5 else np.round(x))
    if nmode == "round_prefer_ceil":
        return int(f + 1 if x - f == 0.5 else np.round(x))
    return int(np.floor(x) if nmode == "floor" else np.ceil(x))


def coeffs(mode, ratio, scale, a, antialias):
    """The spec's filter taps at offsets start.. from the point left of x."""
    s = min(scale, 1.0) if antialias else 1.0
    if mode == "linear":
        start = int(np.floor(-1 / s) + 1)
        d = (np.arange(start, 2 - start) - ratio) * s
        c = np.clip(1 - np.abs(d), 0, 1)
    else:
        start = int(np.floor(-2 / s) + 1)
        d = np.abs((np.arange(start, 2 - start) - ratio) * s)
        c = np.where(d <= 1, (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1,
                     np.where(d < 2, a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a, 0))
    if antialias and scale < 1:
        c = c / c.sum()
    return start, c


def ref_axis(x, axis, out, scale, length, mode, cmode, nmode, a, exclude, antialias):
    size = x.shape[axis]
    xm = np.moveaxis(x, axis, 0)
    rows = []
    for o in range(out):
        # far outside X every neighbour is an edge value: clamp, to keep ints small
        xo = min(max(coord_in(cmode, o, size, out, scale, length), -2.0 * size - 8), 3.0 * size + 8)
        if mode == "nearest":
            rows.append(xm[min(max(round_nearest(nmode, xo), 0), size - 1)])
            continue
        left = int(np.floor(xo))
        if xo == left:  # an integer counts as the right end of its interval
            left -= 1
        start, c = coeffs(mode, xo - left, scale, a, antialias)
        idx = left + start + np.arange(len(c))
        if exclude:
            c = np.where((idx < 0) | (idx >= size), 0, c)
            c = c / c.sum()
        vals = xm[np.clip(idx, 0, size - 1)]
        rows.append(np.tensordot(c, vals, axes=1))
    return np.moveaxis(np.stack(rows) if rows else np.zeros((0,) + xm.shape[1:]), 0, axis)


def ref_resize(x, sizes, mode, cmode, nmode="round_prefer_floor", a=-0.75, exclude=0, antialias=0, scales=None):
    y = x.astype(np.float64) if mode != "nearest" else x
    for d in range(x.ndim):
        scale = scales[d] if scales is not None else sizes[d] / x.shape[d] if x.shape[d] else 1.0
        # the output length as a real number: the spec's in * scale where
        # scales are given
        length = x.shape[d] * scales[d] if scales is not None else sizes[d]
        if sizes[d] != x.shape[d] or scale != 1:
            y = ref_axis(y, d, sizes[d], scale, length, mode, cmode, nmode, a, exclude, antialias)
    return y


def dvm_resize(x, sizes, mode, cmode, nmode="round_prefer_floor", a=-0.75, exclude=0, antialias=0, scales=None,
               roi=None, **kw):
    """roi: tf_crop_and_resize's starts, ends (per dim) and extrapolation_value."""
    attrs = [Shape(sizes), MODES.index(mode), (COORDS + ["tf_crop_and_resize"]).index(cmode), NEAREST.index(nmode),
             float(a), exclude, antialias]
    if scales is not None:
        attrs += [float(s) for s in scales]
    if roi is not None:
        attrs += [float(v) for v in roi]
    return run1("resize", [x], attrs, **kw)


def ort_resize(x, sizes, mode, cmode, nmode, a=-0.75, exclude=0, antialias=0, scales=None):
    import onnxruntime as ort
    import onnx
    if scales is None:
        extra = [onnx.numpy_helper.from_array(np.array(sizes, np.int64), "sizes")]
        ins = ["x", "", "", "sizes"]
    else:
        extra = [onnx.numpy_helper.from_array(np.array(scales, np.float32), "scales")]
        ins = ["x", "", "scales"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode=cmode,
                            nearest_mode=nmode, cubic_coeff_a=a, exclude_outside=exclude, antialias=antialias)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=extra)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def rand_resize(*shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iub":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# (X, sizes): up and down, odd sizes, ranks 1 to 5, resizing N and C too
SHAPES = [
    ((1, 2, 5, 7), (1, 2, 9, 4)),
    ((2, 3, 4, 4), (2, 3, 8, 8)),
    ((1, 1, 3, 5), (1, 1, 7, 13)),
    ((1, 1, 13, 31), (1, 1, 6, 10)),
    ((2, 3, 7), (2, 3, 15)),
    ((7,), (3,)),
    ((5, 7), (9, 3)),
    ((1, 1, 3, 4, 5), (1, 1, 5, 3, 9)),
    ((1, 4, 3, 3), (1, 6, 3, 3)),
    ((3, 2, 4), (5, 2, 4)),
    ((1, 2, 4, 5), (1, 2, 1, 1)),
    ((1, 2, 1, 1), (1, 2, 3, 3)),
    ((0, 2, 4, 4), (0, 2, 8, 8)),
    ((1, 64, 17, 17), (1, 64, 34, 34)),
    # channels last (pass conv_nhwc): trailing copied dims of over 8 bytes are one element to nearest
    ((1, 5, 7, 3), (1, 10, 14, 3)),
    ((2, 3, 4, 5), (2, 7, 4, 5)),
    ((1, 3, 5, 2), (1, 6, 11, 2)),
    ((1, 9, 6, 96), (1, 4, 13, 96)),
]


@pytest.mark.parametrize("xs,sizes", SHAPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cmode", COORDS)
def test_resize(xs, sizes, mode, cmode):
    if cmode == "tf_half_pixel_for_nearest" and mode != "nearest":
        pytest.skip("tf_half_pixel_for_nearest is for nearest")
    x = rand_resize(*xs)
    got = dvm_resize(x, sizes, mode, cmode)
    want = ref_resize(x, sizes, mode, cmode)
    assert got.shape == tuple(sizes)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # ONNX Runtime refuses tf_half_pixel_for_nearest at opset 19
    if x.size and len(xs) == 4 and xs[:2] == sizes[:2] and cmode != "tf_half_pixel_for_nearest":
        np.testing.assert_allclose(got, ort_resize(x, sizes, mode, cmode, "round_prefer_floor"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nmode", NEAREST)
@pytest.mark.parametrize("cmode", ["half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nearest"])
def test_nearest_modes(nmode, cmode):
    x = rand_resize(1, 2, 7, 5)
    for sizes in ((1, 2, 14, 10), (1, 2, 3, 2), (1, 2, 11, 8)):
        got = dvm_resize(x, sizes, "nearest", cmode, nmode)
        np.testing.assert_array_equal(got, ref_resize(x, sizes, "nearest", cmode, nmode))
        if cmode != "tf_half_pixel_for_nearest":
            np.testing.assert_array_equal(got, ort_resize(x, sizes, "nearest", cmode, nmode))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("sizes", [(1, 2, 4, 3), (1, 2, 2, 9), (1, 2, 1, 2)])
def test_antialias(mode, sizes):
    x = rand_resize(1, 2, 13, 11)
    got = dvm_resize(x, sizes, mode, "half_pixel", antialias=1)
    np.testing.assert_allclose(got, ref_resize(x, sizes, mode, "half_pixel", antialias=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, ort_resize(x, sizes, mode, "half_pixel", "round_prefer_floor", antialias=1),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("a,exclude", [(-0.5, 0), (-0.5, 1), (-0.75, 1)])
def test_cubic_options(a, exclude):
    x = rand_resize(1, 1, 6, 9)
    for sizes in ((1, 1, 12, 5), (1, 1, 4, 17)):
        got = dvm_resize(x, sizes, "cubic", "half_pixel", a=a, exclude=exclude)
        np.testing.assert_allclose(got, ref_resize(x, sizes, "cubic", "half_pixel", a=a, exclude=exclude),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, ort_resize(x, sizes, "cubic", "half_pixel", "round_prefer_floor", a, exclude),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cmode", [c for c in COORDS if c != "tf_half_pixel_for_nearest"])
def test_explicit_scales(mode, cmode):
    """Scales whose floor(in * scale) sizes differ from sizes / in."""
    x = rand_resize(1, 2, 5, 7)
    scales = (1.0, 1.0, 1.7, 0.6)
    sizes = tuple(int(np.floor(d * s)) for d, s in zip(x.shape, scales))
    got = dvm_resize(x, sizes, mode, cmode, scales=scales)
    np.testing.assert_allclose(got, ref_resize(x, sizes, mode, cmode, scales=scales), rtol=1e-5, atol=1e-5)
    if cmode in ("half_pixel", "asymmetric"):  # ONNX Runtime takes the others' length as the size
        np.testing.assert_allclose(got, ort_resize(x, sizes, mode, cmode, "round_prefer_floor", scales=scales),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int64, np.int32, np.uint8, np.bool_])
def test_nearest_dtypes(dtype):
    x = rand_resize(2, 3, 5, dtype=dtype)
    got = dvm_resize(x, (3, 3, 9), "nearest", "asymmetric", "floor")
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, ref_resize(x, (3, 3, 9), "nearest", "asymmetric", "floor"))


# nearest upscales by whole factors (each input repeated in turn: the
# FPN's 2x, also 3x and 8x) with each element size, a factor on one dim
# only, widths of 1 and primes, against the reference and ONNX Runtime
@pytest.mark.parametrize("xs,f", [((1, 3, 5, 7), (2, 2)), ((2, 2, 1, 1), (3, 3)), ((1, 2, 3, 13), (1, 8)),
                                  ((1, 4, 11, 17), (2, 1)), ((1, 1, 2, 31), (3, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float16, np.int64])
def test_nearest_whole_factors(xs, f, dtype):
    x = rand_resize(*xs, dtype=dtype)
    sizes = xs[:2] + (xs[2] * f[0], xs[3] * f[1])
    got = dvm_resize(x, sizes, "nearest", "asymmetric", "floor")
    np.testing.assert_array_equal(got, ref_resize(x, sizes, "nearest", "asymmetric", "floor"))
    if dtype == np.float32:
        np.testing.assert_array_equal(got, ort_resize(x, sizes, "nearest", "asymmetric", "floor"))


# whole factors of the last two dims (or of the last alone) with all in
# front copied go input row by input row (resize.c's repeat_range):
# channels 1, 3, 17, spatial 1, 2, 7, 13, rows split over threads, 3-D
# with its depth copied, and one with a resized dim in front (run_rows)
@pytest.mark.parametrize("xs,sizes", [
    ((1, 1, 1, 1), (1, 1, 2, 2)), ((1, 3, 2, 2), (1, 3, 4, 6)), ((1, 17, 7, 13), (1, 17, 14, 26)),
    ((2, 17, 13, 40), (2, 17, 26, 80)), ((1, 3, 13, 7), (1, 3, 13, 21)), ((1, 3, 2, 5, 7), (1, 3, 2, 10, 14)),
    ((1, 3, 2, 5, 7), (1, 3, 4, 10, 14))])
@pytest.mark.parametrize("threads", [1, 2])
def test_nearest_whole_factor_rows(xs, sizes, threads):
    for dtype in (np.float32, np.uint8, np.int64):
        x = rand_resize(*xs, dtype=dtype)
        got = dvm_resize(x, sizes, "nearest", "asymmetric", "floor", threads=threads)
        np.testing.assert_array_equal(got, ref_resize(x, sizes, "nearest", "asymmetric", "floor"))
    np.testing.assert_array_equal(got.astype(np.float32),
                                  ort_resize(x.astype(np.float32), sizes, "nearest", "half_pixel", "round_prefer_floor"))


def test_short_attrs():
    """Four attributes: cubic_coeff_a, exclude_outside, antialias default."""
    x = rand_resize(1, 1, 4, 4)
    got = run1("resize", [x], [Shape((1, 1, 7, 3)), 2, 0, 0])
    np.testing.assert_allclose(got, ref_resize(x, (1, 1, 7, 3), "cubic", "half_pixel"), rtol=1e-5, atol=1e-5)


def test_extreme_scales():
    """Coordinates far outside X clamp to its edges; no overflow."""
    x = rand_resize(1, 1, 4, 4)
    for mode in MODES:
        got = dvm_resize(x, (1, 1, 2, 3), mode, "asymmetric", scales=(1.0, 1.0, 1e-300, 1e300))
        np.testing.assert_allclose(got, ref_resize(x, (1, 1, 2, 3), mode, "asymmetric",
                                                   scales=(1.0, 1.0, 1e-300, 1e300)), rtol=1e-5, atol=1e-5)
    with pytest.raises(DvmError, match=r"resize: antialias at scale 1e-06 of dim 2 needs 2000000 taps per output"):
        dvm_resize(x, (1, 1, 1, 1), "linear", "half_pixel", antialias=1, scales=(1.0, 1.0, 1e-6, 0.25))


def test_identity():
    x = rand_resize(2, 3, 4)
    for mode in MODES:
        np.testing.assert_array_equal(dvm_resize(x, x.shape, mode, "half_pixel"), x)


@pytest.mark.parametrize("x,attrs,kw,msg", [
    ((1, 1, 4, 4), [(1, 1, 8, 8), 0, 6, 0], {},
     r"the roi and extrapolation_value attributes go with coordinate_transformation_mode 6"),
    ((1, 1, 4, 4), [(1, 1, 8, 8), 0, 0, 0, -0.75, 0, 0, 1.0, 1.0, 2.0, 2.0] + [0.0] * 4 + [1.0] * 4 + [0.0], {},
     r"the roi and extrapolation_value attributes go with coordinate_transformation_mode 6"),
    ((1, 1, 4, 4), [(1, 1, 8, 8), 3, 0, 0], {}, r"attribute mode = 3 is out of range \[0, 2\]"),
    ((1, 1, 4, 4), [(1, 1, 8, 8), 0, 0, 4], {}, r"attribute nearest_mode = 4 is out of range"),
    ((1, 1, 4, 4), [(1, 8, 8), 0, 0, 0], {},
     r"resize: attribute sizes must be a shape of rank 4, the rank of X \[1,1,4,4\]"),
    ((1, 1, 4, 4), [(1, 1, 8, 8), 0, 0], {}, r"takes 4, 7, 11 or 20 attributes"),
    ((1, 1, 4, 4), [(1, 1, 8, 8), 0, 0, 0, -0.75, 2, 0], {}, r"exclude_outside must be 0 or 1, got 2"),
    ((1, 1, 4, 4), [(1, 1, 8, 8), 0, 0, 0, -0.75, 0, 0, 1.0, 1.0, 2.0, -2.0], {},
     r"resize: scale 3 = -2 must be positive"),
    ((1, 0, 4, 4), [(1, 2, 8, 8), 0, 0, 0], {}, r"resize: X \[1,0,4,4\] dim 1 is empty and cannot be resized"),
])
def test_resize_errors(x, attrs, kw, msg):
    attrs = [Shape(a) if isinstance(a, tuple) else a for a in attrs]
    with pytest.raises(DvmError, match=msg):
        run1("resize", [np.zeros(x, np.float32)], attrs, **kw)


def test_resize_kernel_checks():
    x = rand_resize(1, 1, 4, 4)
    with pytest.raises(DvmError, match=r"resize: dtypes i64 -> i64: want X and Y of one dtype, f32 for linear"):
        dvm_resize(x.astype(np.int64), (1, 1, 8, 8), "linear", "half_pixel")
    with pytest.raises(DvmError, match=r"resize: output Y \[1,1,4,4\] != sizes \[1,1,8,8\]"):
        dvm_resize(x, (1, 1, 8, 8), "linear", "half_pixel", outputs=[(np.float32, (1, 1, 4, 4))])


RESIZE_NODE_CASES = conv_node_cases(("Resize",))


def map_resize_node(node, ins):
    """The dvm attributes of an ONNX Resize node: sizes always, scales when
    the coordinate transform needs the model's own (scales given, or a
    keep_aspect_ratio_policy)."""
    a = onnx_attrs(node)
    x = ins[node.input[0]]
    get = lambda i: ins.get(node.input[i]) if len(node.input) > i and node.input[i] else None
    scales_in, sizes_in = get(2), get(3)
    if scales_in is not None and scales_in.size == 0:
        scales_in = None
    axes = [ax % x.ndim for ax in a.get("axes", range(x.ndim))]
    scales = None
    if scales_in is not None:
        scales = [1.0] * x.ndim
        for ax, s in zip(axes, scales_in):
            scales[ax] = float(s)
        sizes = [int(np.floor(d * s)) for d, s in zip(x.shape, scales)]
    else:
        sizes = list(x.shape)
        for ax, s in zip(axes, sizes_in):
            sizes[ax] = int(s)
        policy = a.get("keep_aspect_ratio_policy", b"stretch").decode()
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(sizes[ax] / x.shape[ax] for ax in axes)
            scales = [1.0] * x.ndim
            for ax in axes:
                scales[ax] = scale
                sizes[ax] = int(np.floor(scale * x.shape[ax] + 0.5))
    return x, sizes, scales, dict(
        mode=a.get("mode", b"nearest").decode(), cmode=a.get("coordinate_transformation_mode", b"half_pixel").decode(),
        nmode=a.get("nearest_mode", b"round_prefer_floor").decode(), a=a.get("cubic_coeff_a", -0.75),
        exclude=a.get("exclude_outside", 0), antialias=a.get("antialias", 0))


@pytest.mark.parametrize("name", sorted(RESIZE_NODE_CASES))
def test_onnx_node(name):
    node, ins, outs, _ = RESIZE_NODE_CASES[name]
    x, sizes, scales, kw = map_resize_node(node, ins)
    roi = None
    if kw["cmode"] == "tf_crop_and_resize":
        a, r = onnx_attrs(node), ins[node.input[1]]
        axes = [ax % x.ndim for ax in a.get("axes", range(x.ndim))]
        roi = [0.0] * x.ndim + [1.0] * x.ndim
        for i, ax in enumerate(axes):
            roi[ax], roi[x.ndim + ax] = float(r[i]), float(r[len(axes) + i])
        roi.append(float(a.get("extrapolation_value", 0.0)))
        scales = scales or [s / d for s, d in zip(sizes, x.shape)]
    got = dvm_resize(x, sizes, scales=scales, roi=roi, **kw)
    assert got.shape == outs[0].shape
    np.testing.assert_allclose(got, outs[0], rtol=1e-3, atol=1e-4)


def resize_model(rank, runtime, op="Resize", opset=19, **inputs_and_attrs):
    """One Resize (or Upsample) over x with symbolic dims: of roi, scales and
    sizes (arrays in inputs_and_attrs), those named in `runtime` are graph
    inputs, the others constants; the rest are attributes."""
    import onnx
    order = ["roi", "scales", "sizes"] if op == "Resize" else ["scales"]
    vals = {k: inputs_and_attrs.pop(k) for k in order if k in inputs_and_attrs}
    names = ["x"] + [k if k in vals else "" for k in order]
    while names[-1] == "":
        names.pop()
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in vals.items() if k not in runtime]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [f"d{i}" for i in range(rank)])]
    ins += [helper.make_tensor_value_info(k, onnx.helper.np_dtype_to_tensor_dtype(vals[k].dtype), vals[k].shape)
            for k in runtime]
    node = helper.make_node(op, names, ["y"], **inputs_and_attrs)
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10), \
        {k: vals[k] for k in runtime}


def compare_compiled(model, feeds, shapes, rtol=1e-5, atol=1e-5):
    """dvm's compiled model against ONNX Runtime at each X shape."""
    import onnxruntime as ort
    from dvmop import run_model
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for xs in shapes:
        f = {"x": rand_resize(*xs), **feeds}
        want = sess.run(None, f)[0]
        got = run_model(model, f)[0]
        assert got.shape == want.shape, (xs, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


AWKWARD = [(1, 1, 1, 1), (2, 3, 7, 5), (1, 2, 13, 3), (0, 2, 3, 3)]


@pytest.mark.parametrize("axes", [[3, 2], [2, 3], [-1]])
@pytest.mark.parametrize("by", ["sizes", "scales"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_runtime_axes(axes, by, mode):
    """scales or sizes the model computes, over some axes."""
    vals = np.array([5, 3, 2][:len(axes)], np.int64) if by == "sizes" else np.array([1.5, 0.5, 2.0][:len(axes)], np.float32)
    model, feeds = resize_model(4, [by], axes=axes, mode=mode, **{by: vals})
    shapes = AWKWARD if by == "sizes" else [s for s in AWKWARD if min(s[2:]) > 1]
    compare_compiled(model, feeds, shapes)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("runtime", [[], ["sizes"]])
@pytest.mark.parametrize("axes", [None, [2, 3], [3]])
def test_keep_aspect_ratio(policy, runtime, axes):
    sizes = np.array([7, 4], np.int64) if axes == [2, 3] else np.array([5], np.int64) if axes else None
    attrs = dict(axes=axes) if axes else {}
    if sizes is None:  # every dim: N and C keep theirs (a scale of 1 takes part in the pick)
        sizes = np.array([1, 2, 9, 4], np.int64)
        shapes = [(1, 2, 3, 5), (1, 2, 7, 2), (1, 2, 1, 1)]
    else:
        shapes = [(1, 1, 3, 5), (2, 3, 7, 2), (1, 1, 1, 1), (0, 2, 5, 5)]
    # ONNX Runtime interpolates linearly over the last two dims only
    model, feeds = resize_model(4, runtime, sizes=sizes, keep_aspect_ratio_policy=policy,
                                mode="linear" if axes else "nearest", **attrs)
    compare_compiled(model, feeds, shapes)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("runtime", [[], ["roi"], ["roi", "sizes"]])
@pytest.mark.parametrize("axes,roi,sizes", [
    (None, [0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], [1, 1, 3, 5]),
    (None, [0, 0, -0.2, 0.3, 1, 1, 1.1, 0.9], [1, 1, 5, 1]),   # outside the input: extrapolated
    ([3, 2], [0.1, -0.3, 0.9, 0.7], [7, 2]),
    ([2], [0.25, 0.75], [1]),
])
def test_tf_crop_and_resize(mode, runtime, axes, roi, sizes):
    attrs = dict(axes=axes) if axes else {}
    roi, sizes = np.array(roi, np.float32), np.array(sizes, np.int64)
    shapes = [(1, 1, 4, 4), (1, 1, 1, 1), (1, 1, 7, 3)] if axes else [(1, 1, 4, 4), (1, 1, 1, 1), (1, 1, 7, 3)]
    if axes:
        shapes += [(2, 3, 5, 5), (0, 2, 3, 3)]
    model, feeds = resize_model(4, runtime, roi=roi, sizes=sizes, coordinate_transformation_mode="tf_crop_and_resize",
                                mode=mode, extrapolation_value=-7.5, **attrs)
    compare_compiled(model, feeds, shapes, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 1.5, 2.5], [1, 2, 1, 1]])
@pytest.mark.parametrize("runtime", [[], ["scales"]])
def test_upsample(mode, scales, runtime):
    """Upsample-9: Resize with asymmetric coordinates, floor rounding."""
    model, feeds = resize_model(4, runtime, op="Upsample", opset=9, scales=np.array(scales, np.float32), mode=mode)
    compare_compiled(model, feeds, [(1, 1, 1, 1), (2, 3, 7, 5), (0, 1, 2, 2)])
