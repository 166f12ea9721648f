"""Pass pad_conv (compiler/pass_pad_conv.c): a zero Pad read only by a
convolution folds into its pads, with the pads given as a constant or
computed as torch.onnx exports F.pad (ConstantOfShape, Concat, a 2-D
Reshape, Slice with step -1, Transpose, Reshape, Cast), whose contents
inference follows through the 2-D values; the chain goes with the Pad.
Results equal the pass off and ONNX Runtime at awkward shapes (1x1, primes,
batch 0 and 2); where a condition does not hold the Pad stays."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.cli import compile_onnx, dump_ir, run_module  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.onnxmodel import const, make_model, save_model  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(23)
SHAPES_2D = [(1, 3, 7, 9), (2, 3, 13, 5), (1, 3, 3, 3), (1, 3, 4, 17), (0, 3, 5, 5)]
TINY = (1, 3, 1, 1)  # for the cases that pad a 1x1 image to the kernel's 3x3


def torch_pad_chain(spatial, out="pads"):
    """torch.onnx's F.pad(x, spatial): pads [w_begin, w_end, h_begin, h_end, ...]
    reversed into ONNX's [begins..., ends...] by nodes, as the exporter writes them."""
    r = len(spatial) // 2 + 2
    k = lambda name, v: helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, I64, [len(v)] if isinstance(v, list) else [], v if isinstance(v, list) else [v]))
    return [k("n_zeros", [2 * (r - len(spatial) // 2)]), k("given", list(spatial)),
            helper.make_node("ConstantOfShape", ["n_zeros"], ["zeros"],
                             value=helper.make_tensor("v", I64, [1], [0])),
            helper.make_node("Concat", ["given", "zeros"], ["cat"], axis=0),
            k("pairs", [-1, 2]), helper.make_node("Reshape", ["cat", "pairs"], ["cat2"]),
            k("s_start", [-1]), k("s_end", [-9223372036854775807]), k("s_axis", [0]), k("s_step", [-1]),
            helper.make_node("Slice", ["cat2", "s_start", "s_end", "s_axis", "s_step"], ["rev"]),
            helper.make_node("Transpose", ["rev"], ["revt"], perm=[1, 0]),
            k("flat", [-1]), helper.make_node("Reshape", ["revt", "flat"], ["pads64"]),
            helper.make_node("Cast", ["pads64"], [out], to=TensorProto.INT64)]


def pad_conv_model(tmp, rank=4, pads=None, chain=None, value=0.0, mode="constant", group=1, strides=None,
                   conv_pads=None, auto_pad=None, extra_reader=False, cin=3, cout=4, opset=14, x_c=None):
    """x -> Pad -> Conv (k 3) -> y; pads a constant input (pads) or the
    torch chain of F.pad(chain)."""
    s = rank - 2
    nodes, inits = [], []
    if chain is not None:
        nodes += torch_pad_chain(chain)
    else:
        inits.append(const("pads", pads, np.int64))
    pad_in = ["x", "pads"] + (["value"] if value is not None else [])
    if value is not None:
        inits.append(const("value", value))
    nodes.append(helper.make_node("Pad", pad_in, ["p"], mode=mode))
    w = rng.standard_normal((cout, cin // group) + (3,) * s).astype(np.float32)
    inits += [const("w", w), const("b", rng.uniform(-1, 1, cout))]
    attrs = dict(kernel_shape=[3] * s, group=group)
    if strides:
        attrs["strides"] = strides
    if conv_pads:
        attrs["pads"] = conv_pads
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    nodes.append(helper.make_node("Conv", ["p", "w", "b"], ["y"], **attrs))
    outputs = [("y", F, None)] + ([("p", F, None)] if extra_reader else [])
    dims = ["n", x_c or cin] + [f"s{i}" for i in range(s)]
    m = make_model(nodes, [("x", F, dims)], outputs, inits, opset=opset, ir_version=8)
    return save_model(m, tmp / "pad_conv.onnx")


def pad_on_off(tmp, path, shapes, nout=1):
    on, off = str(tmp / "on.dvmb"), str(tmp / "off.dvmb")
    compile_onnx(path, out=on)
    compile_onnx(path, "--disable", "pad_conv", out=off)
    sess = ort_session(path)
    for shape in shapes:
        feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
        want = sess.run(None, feeds)
        for threads in (1, 2):
            a = run_module(on, feeds, nout, threads=threads)
            b = run_module(off, feeds, nout, threads=threads)
            for x, y, z in zip(a, b, want, strict=True):
                assert x.shape == y.shape == z.shape, (shape, x.shape, z.shape)
                np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5, err_msg=str(shape))
                np.testing.assert_allclose(x, z, rtol=1e-4, atol=1e-4, err_msg=str(shape))


CASES = {
    "same_stride2": dict(chain=[0, 1, 0, 1], strides=[2, 2]),
    "same_stride1": dict(chain=[1, 1, 1, 1], tiny=True),
    "asymmetric": dict(chain=[2, 0, 1, 3]),
    "zeros": dict(chain=[0, 0, 0, 0]),
    "const_pads": dict(pads=[0, 0, 1, 2, 0, 0, 3, 1], tiny=True),
    "with_conv_pads": dict(chain=[1, 0, 0, 2], conv_pads=[1, 1, 0, 1], tiny=True),
    "depthwise": dict(chain=[0, 1, 0, 1], group=3, cout=6, strides=[2, 2]),
    "no_value": dict(pads=[0, 0, 1, 1, 0, 0, 1, 1], value=None),
    "conv1d": dict(rank=3, chain=[2, 1], strides=[2]),
    "conv3d": dict(rank=5, pads=[0, 0, 1, 0, 2, 0, 0, 1, 1, 0]),
    "opset18": dict(chain=[0, 1, 0, 1], opset=18),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pad_conv(tmp_path, case):
    kw = dict(CASES[case])
    tiny = kw.pop("tiny", False)
    path = pad_conv_model(tmp_path, **kw)
    on, off = dump_ir(path), dump_ir(path, "--disable", "pad_conv")
    assert "= Pad(" not in on and "= Pad(" in off, on
    if "chain" in kw:  # the pads' chain went with the Pad
        for op in ("Slice", "Transpose", "Concat", "ConstantOfShape", "Cast"):
            assert f"= {op}(" not in on and f"= {op}(" in off, (op, on)
    rank = kw.get("rank", 4)
    shapes = SHAPES_2D + [TINY] * tiny
    if rank != 4:
        shapes = [s[:2] + s[2:rank] + (3,) * (rank - 4) for s in shapes]
    pad_on_off(tmp_path, path, shapes)


NOT_REWRITTEN = {
    "value_1": dict(chain=[1, 1, 1, 1], value=1.0),
    "reflect": dict(chain=[1, 1, 1, 1], mode="reflect"),
    "channel_pad": dict(pads=[0, 1, 1, 1, 0, 0, 1, 1], cin=4, x_c=3),
    "negative": dict(pads=[0, 0, -1, 1, 0, 0, 1, 1]),
    "pad_read_twice": dict(chain=[1, 1, 1, 1], extra_reader=True),
    "auto_pad": dict(chain=[1, 1, 1, 1], auto_pad="SAME_UPPER"),
}


@pytest.mark.parametrize("case", sorted(NOT_REWRITTEN))
def test_pad_conv_not_rewritten(tmp_path, case):
    kw = NOT_REWRITTEN[case]
    path = pad_conv_model(tmp_path, **kw)
    assert "= Pad(" in dump_ir(path)
    shapes = [(1, 3, 7, 9), (2, 3, 4, 5)]
    pad_on_off(tmp_path, path, shapes, nout=2 if kw.get("extra_reader") else 1)


def test_broadcast_contents_2d(tmp_path):
    """Shape arithmetic on 2-D contents: [2, 1] + [1, 2] broadcasts to 4
    elements (not paired 2 by 2), flattened into a Reshape's target."""
    k = lambda name, v: const(name, v, np.int64)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["s", "col"], ["s_col"]),
             helper.make_node("Reshape", ["s", "row"], ["s_row"]),
             helper.make_node("Add", ["s_col", "s_row"], ["sum"]),
             helper.make_node("Reshape", ["sum", "flat"], ["sum4"]),
             helper.make_node("ConstantOfShape", ["sum4"], ["z"], value=helper.make_tensor("v", F, [1], [1.0])),
             helper.make_node("ReduceSum", ["z"], ["y"], keepdims=0)]
    m = make_model(nodes, [("x", F, ["a", "b"])], [("y", F, None), ("sum4", I64, None)],
                   [k("col", [2, 1]), k("row", [1, 2]), k("flat", [-1])], opset=13, ir_version=8)
    path = save_model(m, tmp_path / "bcast.onnx")
    mod = compile_onnx(path)
    sess = ort_session(path)
    for shape in [(2, 3), (1, 5), (4, 1)]:
        feeds = {"x": np.zeros(shape, np.float32)}
        got, want = run_module(mod, feeds, 2), sess.run(None, feeds)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w, err_msg=str(shape))
