"""grid_sample against ONNX Runtime single-node models (4-D, and 5-D nearest
and linear, which it runs) and ONNX's reference implementation (the other
ranks and 5-D cubic), on awkward shapes: 1x1 images, prime sizes, empty
batches, grid points far outside [-1, 1]."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from dvmop import DvmError, Shape, run1

rng = np.random.default_rng(7)

MODES = ["linear", "nearest", "cubic"]
PADDINGS = ["zeros", "border", "reflection"]
# dvm's mode attribute: ONNX's opset-16 names, then opset 20's
DVM_MODE = {"bilinear": 0, "nearest": 1, "bicubic": 2, "linear": 3, "cubic": 4}


def gs_model(x, grid, mode, padding, align, opset=22):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=align)
    dt = TensorProto.DOUBLE if x.dtype == np.float64 else TensorProto.FLOAT
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dt, x.shape),
                                        helper.make_tensor_value_info("grid", dt, grid.shape)],
                          [helper.make_tensor_value_info("y", dt, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def ort_gs(x, grid, mode, padding, align):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(gs_model(x, grid, mode, padding, align).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x, "grid": grid})[0]


def ref_gs(x, grid, mode, padding, align):
    out = ReferenceEvaluator(gs_model(x, grid, mode, padding, align)).run(None, {"x": x, "grid": grid})[0]
    return out.reshape(x.shape[:2] + grid.shape[1:-1])


def dvm_gs(x, grid, mode, padding, align):
    return run1("grid_sample", [x, grid], [DVM_MODE[mode], PADDINGS.index(padding), align])


def make_grid(n, out, r, spread=1.6, dtype=np.float32):
    g = rng.uniform(-spread, spread, (n, *out, r))
    flat = g.reshape(-1)
    # the corners and a few points far outside, where the paddings differ
    for i, v in enumerate([-1.0, 1.0, 0.0, -7.3, 9.1, -3.0, 2.5]):
        if i < flat.size:
            flat[(i * 7919) % flat.size] = v
    return g.astype(dtype)


# (X, the grid's sampled dims)
SHAPES_4D = [
    ((1, 1, 1, 1), (3, 5)),      # a 1x1 image
    ((2, 3, 7, 11), (5, 13)),    # primes
    ((1, 2, 5, 3), (1, 1)),      # one point
    ((1, 1, 2, 1), (4, 3)),      # a column
    ((0, 2, 4, 4), (3, 3)),      # an empty batch
    ((2, 0, 4, 4), (3, 3)),      # no channels
    ((1, 2, 4, 4), (0, 3)),      # no points
]


@pytest.mark.parametrize("xs,out", SHAPES_4D)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_4d(xs, out, mode, padding, align):
    x = rng.standard_normal(xs).astype(np.float32)
    grid = make_grid(xs[0], out, 2)
    got = dvm_gs(x, grid, mode, padding, align)
    assert got.shape == xs[:2] + out
    np.testing.assert_allclose(got, ort_gs(x, grid, mode, padding, align), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("xs,out", [((1, 2, 3, 5, 7), (2, 3, 4)), ((2, 1, 1, 1, 1), (2, 2, 3)),
                                    ((1, 1, 2, 3, 2), (1, 1, 1))])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_5d(xs, out, mode, padding, align):
    x = rng.standard_normal(xs).astype(np.float32)
    grid = make_grid(xs[0], out, 3)
    got = dvm_gs(x, grid, mode, padding, align)
    if padding == "reflection" and align and x[0, 0].size == 1:
        # a one-element dim reflects every coordinate to 0 (ONNX's reference
        # divides by its zero range)
        np.testing.assert_allclose(got, np.broadcast_to(x, got.shape), rtol=1e-6, atol=1e-6)
        return
    if mode == "cubic":  # ONNX Runtime has no 3-D cubic
        if padding == "border":
            pytest.skip("ONNX's reference clamps the coordinate, ONNX Runtime (as dvm) each tap")
        want = ref_gs(x.astype(np.float64), grid.astype(np.float64), mode, padding, align)
    else:
        want = ort_gs(x, grid, mode, padding, align)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
def test_grid_sample_1d(mode, padding):
    """One spatial dim (ONNX's reference; ONNX Runtime runs 4-D and 5-D)."""
    if mode == "cubic" and padding == "border":
        pytest.skip("ONNX's reference clamps the coordinate, ONNX Runtime (as dvm) each tap")
    x = rng.standard_normal((2, 3, 7)).astype(np.float64)
    grid = make_grid(2, (11,), 1, dtype=np.float64)
    for align in (0, 1):
        got = dvm_gs(x, grid, mode, padding, align)
        # the reference computes coordinates in f32
        np.testing.assert_allclose(got, ref_gs(x, grid, mode, padding, align), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_f64_and_old_names(mode):
    x = rng.standard_normal((2, 3, 5, 6))
    grid = make_grid(2, (4, 7), 2, dtype=np.float64)
    new = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    got = dvm_gs(x, grid, mode, "border", 0)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ort_gs(x, grid, new, "border", 0), rtol=1e-12, atol=1e-12)


def test_grid_sample_nan():
    x = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    grid = np.array([[[[np.nan, 0.0], [0.0, 0.0]]]], np.float32)
    got = dvm_gs(x, grid, "linear", "zeros", 0)
    assert np.isnan(got[0, 0, 0, 0]) and got[0, 0, 0, 1] == x[0, 0, 1, 1]


@pytest.mark.parametrize("x,grid,attrs,msg", [
    ((1, 1, 4, 4), (1, 2, 2, 3), [0, 0, 0], r"grid_sample: grid \[1,2,2,3\] does not fit X \[1,1,4,4\]"),
    ((2, 1, 4, 4), (1, 2, 2, 2), [0, 0, 0], r"does not fit X"),
    ((1, 1, 4, 4), (1, 2, 2, 2), [5, 0, 0], r"grid_sample: attribute mode = 5 is out of range"),
    ((1, 1, 4, 4), (1, 2, 2, 2), [0, 3, 0], r"attribute padding_mode = 3 is out of range"),
    ((1, 1, 4, 4), (1, 2, 2, 2), [0, 0, 2], r"align_corners must be 0 or 1, got 2"),
    ((1, 1, 0, 4), (1, 2, 2, 2), [0, 0, 0], r"X \[1,1,0,4\] has an empty spatial dim"),
    ((4, 4), (4, 2), [0, 0, 0], r"X \[4,4\] must have rank 3 to 5"),
])
def test_grid_sample_errors(x, grid, attrs, msg):
    with pytest.raises(DvmError, match=msg):
        run1("grid_sample", [np.zeros(x, np.float32), np.zeros(grid, np.float32)], attrs)
    with pytest.raises(DvmError, match=r"grid_sample: dtypes f32, f64 -> f32: want X, grid and Y all f32"):
        run1("grid_sample", [np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 1, 2))], [0, 0, 0],
             outputs=[(np.float32, (1, 1, 1, 1))])


def ort_model(model, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def one_node(op, ins, consts, opset, **attrs):
    """One node over graph inputs `ins` (name -> (dtype, dims)) and constant
    arrays `consts`, inputs in the order given (a None name: omitted)."""
    names = list(ins) + list(consts)
    order = attrs.pop("order", names)
    node = helper.make_node(op, [n or "" for n in order], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, dt, d) for k, (dt, d) in ins.items()],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


@pytest.mark.parametrize("size", [(2, 3, 5, 7), (1, 1, 1, 1), (3, 2, 13, 2), (0, 1, 4, 4),
                                  (2, 3, 3, 5, 7), (1, 1, 1, 2, 1)])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("runtime_size", [False, True])
def test_affine_grid(size, align, runtime_size):
    from dvmop import run_model
    r = len(size) - 2
    theta = rng.standard_normal((size[0], r, r + 1)).astype(np.float32)
    sz = np.array(size, np.int64)
    ins = {"theta": (TensorProto.FLOAT, ["n", r, r + 1])}
    if runtime_size:
        ins["size"] = (TensorProto.INT64, [len(size)])
    model = one_node("AffineGrid", ins, {} if runtime_size else {"size": sz}, 20, align_corners=align,
                     order=["theta", "size"])
    feeds = {"theta": theta, **({"size": sz} if runtime_size else {})}
    got = run_model(model, feeds)[0]
    want = ort_model(model, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 1, 3, 3), (1, 1, 2, 2), dict(pads=[1, 1, 1, 1])),
    ((2, 4, 7, 5), (6, 2, 3, 2), dict(group=2, offset_group=2, strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 1])),
    ((1, 3, 1, 1), (2, 3, 1, 1), {}),
    ((1, 6, 11, 13), (4, 3, 3, 3), dict(group=2, offset_group=3, pads=[1, 1, 1, 1], strides=[3, 2])),
    ((0, 2, 4, 4), (2, 2, 2, 2), {}),
])
@pytest.mark.parametrize("bias,mask", [(False, False), (True, False), (False, True), (True, True)])
def test_deform_conv(xs, ws, attrs, bias, mask):
    from dvmop import run_model
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    og, kh, kw = attrs.get("offset_group", 1), ws[2], ws[3]
    s, d, p = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("pads", [0] * 4)
    oh = (xs[2] + p[0] + p[2] - (d[0] * (kh - 1) + 1)) // s[0] + 1
    ow = (xs[3] + p[1] + p[3] - (d[1] * (kw - 1) + 1)) // s[1] + 1
    # shifts of a few pixels, some far outside the image
    off = (rng.standard_normal((xs[0], og * 2 * kh * kw, oh, ow)) * 2).astype(np.float32)
    if off.size:
        off.reshape(-1)[::7] = 9.5
    feeds = {"x": x, "offset": off}
    ins = {"x": (TensorProto.FLOAT, ["n", xs[1], "h", "w"]), "offset": (TensorProto.FLOAT, ["n", off.shape[1], "oh", "ow"])}
    consts = {"w": w}
    order = ["x", "w", "offset", None, None]
    if bias:
        consts["b"] = rng.standard_normal(ws[0]).astype(np.float32)
        order[3] = "b"
    if mask:
        feeds["mask"] = rng.uniform(0, 1, (xs[0], og * kh * kw, oh, ow)).astype(np.float32)
        ins["mask"] = (TensorProto.FLOAT, ["n", og * kh * kw, "oh", "ow"])
        order[4] = "mask"
    while order[-1] is None:
        order.pop()
    model = one_node("DeformConv", ins, consts, 19, order=order, kernel_shape=[kh, kw], **attrs)
    got = run_model(model, feeds)[0]
    if not xs[0]:
        assert got.shape == (0, ws[0], oh, ow)
        return
    np.testing.assert_allclose(got, ort_model(model, feeds), rtol=1e-4, atol=1e-5)
