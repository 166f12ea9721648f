"""Pass qdq_pair (compiler/pass_qdq_pair.c): a per-tensor QuantizeLinear
read only by a DequantizeLinear becomes dvm.QuantizeDequantize, one pass
over f32. Results are bitwise those of the pass off (the pair run as two
kernels) and, where dvm and ONNX Runtime compute the same f32 ops, ONNX
Runtime's with its graph optimizations off (its nodes run as written;
with convolutions between the pairs, but for codes that a summation order
rounds the other way). Shapes: channels 1, 3, 17,
spatial 1, 7, 13; u8 and i8; the DequantizeLinear's scale and zero point
the same as the QuantizeLinear's or others (kept: the pair is rewritten,
never dropped). Not rewritten: per-channel pairs, codes read elsewhere."""
import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.cli import compile_onnx, dump_ir, run_module  # noqa: E402
from dvmtest.onnxmodel import const, make_model, save_model  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(31)
QT = {"u8": (np.uint8, 128), "i8": (np.int8, -3)}


def qdqp_pair(nodes, inits, x, out, qt, scale, zp, dq=None, axis=None):
    """out = DequantizeLinear(QuantizeLinear(x, scale, zp)); dq: another
    (scale, zp) for the DequantizeLinear; axis: per channel (scale and zp
    arrays)."""
    kw = {} if axis is None else {"axis": axis}
    inits += [const(out + "_s", scale), const(out + "_z", zp, qt)]
    ds, dz = out + "_s", out + "_z"
    if dq:
        ds, dz = out + "_s2", out + "_z2"
        inits += [const(ds, dq[0]), const(dz, dq[1], qt)]
    nodes += [helper.make_node("QuantizeLinear", [x, out + "_s", out + "_z"], [out + "_q"], **kw),
              helper.make_node("DequantizeLinear", [out + "_q", ds, dz], [out], **kw)]


def qdqp_ort_plain(path):
    """ONNX Runtime without graph optimizations: each node run as written
    in f32 or integers (no QDQ fusion)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def qdqp_elementwise_model(tmp, kind, other, c):
    """x * 3 -> pair a -> Add x -> pair b -> y, a per-channel pair on x -> y2,
    and a pair whose codes are also an output (q3 and y3)."""
    qt, zp = QT[kind]
    nodes, inits = [], [const("k", 3.0)]
    nodes.append(helper.make_node("Mul", ["x", "k"], ["m"]))
    qdqp_pair(nodes, inits, "m", "a", qt, 0.0237, zp, dq=(0.031, zp + 5) if other else None)
    nodes.append(helper.make_node("Add", ["a", "x"], ["s"]))
    qdqp_pair(nodes, inits, "s", "y", qt, 0.25, zp)
    qdqp_pair(nodes, inits, "x", "y2", qt, rng.uniform(0.01, 0.1, c).astype(np.float32),
              np.full(c, zp, qt), axis=1)
    qdqp_pair(nodes, inits, "x", "y3", qt, 0.05, zp)
    outs = [("y", F, None), ("y2", F, None), ("y3", F, None), ("y3_q", TensorProto.UINT8 if qt == np.uint8 else
                                                               TensorProto.INT8, None)]
    m = make_model(nodes, [("x", F, ["n", c, "h", "w"])], outs, inits, opset=17, ir_version=8)
    return save_model(m, tmp / f"qdqp_ew_{kind}_{other}_{c}.onnx")


@pytest.mark.parametrize("kind", sorted(QT))
@pytest.mark.parametrize("other", [False, True])
@pytest.mark.parametrize("c", [1, 3, 17])
def test_qdq_pair_elementwise_bitwise(tmp_path, kind, other, c):
    path = qdqp_elementwise_model(tmp_path, kind, other, c)
    on, off = dump_ir(path), dump_ir(path, "--disable", "qdq_pair")
    pairs = 2 + (c == 1)  # a and y, and the per-channel pair where one channel is per tensor; not y3's
    assert on.count("QuantizeDequantize(") == pairs, on
    assert on.count("= QuantizeLinear(") == off.count("= QuantizeLinear(") - pairs, on
    if other:
        assert "QuantizeDequantize(%m, %a_s, %a_z, %a_s2, %a_z2)" in on, on
    mod_on = compile_onnx(path, out=tmp_path / "on.dvmb")
    mod_off = compile_onnx(path, "--disable", "qdq_pair", out=tmp_path / "off.dvmb")
    sess = qdqp_ort_plain(path)
    for shape in [(1, c, 1, 1), (1, c, 7, 13), (2, c, 13, 7)]:
        x = rng.uniform(-3, 3, shape).astype(np.float32)
        x.flat[:3] = [np.nan, 1e9, -1e9][: x.size]  # NaN (to the low end) and saturation
        feeds = {"x": x}
        want = sess.run(None, feeds)
        for threads in (1, 2):
            a = run_module(mod_on, feeds, 4, threads=threads)
            b = run_module(mod_off, feeds, 4, threads=threads)
            for g, h, w in zip(a, b, want, strict=True):
                assert g.shape == w.shape and g.dtype == w.dtype, (shape, g.shape, w.shape)
                np.testing.assert_array_equal(g.view(np.uint8), h.view(np.uint8))
                np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def qdqp_conv_model(tmp, kind, c):
    """x -> pair -> Conv 3x3 (same) -> pair -> depthwise Conv 3x3 -> pair ->
    Conv 1x1 -> pair -> y: convolutions with pairs between them, as
    quantize_static leaves them once the weights are constants."""
    qt, zp = QT[kind]
    nodes, inits = [], []
    qdqp_pair(nodes, inits, "x", "xq", qt, 0.03, zp)
    mid = c + 2
    inits += [const("w1", rng.standard_normal((mid, c, 3, 3)) * 0.3), const("b1", rng.uniform(-1, 1, mid)),
              const("w2", rng.standard_normal((mid, 1, 3, 3)) * 0.3), const("w3", rng.standard_normal((c, mid, 1, 1)))]
    nodes.append(helper.make_node("Conv", ["xq", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    qdqp_pair(nodes, inits, "c1", "a1", qt, 0.05, zp)
    nodes.append(helper.make_node("Conv", ["a1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=mid))
    qdqp_pair(nodes, inits, "c2", "a2", qt, 0.07, zp, dq=(0.06, zp - 2))
    nodes.append(helper.make_node("Conv", ["a2", "w3"], ["c3"], kernel_shape=[1, 1]))
    qdqp_pair(nodes, inits, "c3", "y", qt, 0.1, zp)
    m = make_model(nodes, [("x", F, ["n", c, "h", "w"])], [("y", F, None)], inits, opset=17, ir_version=8)
    return save_model(m, tmp / f"qdqp_conv_{kind}_{c}.onnx")


@pytest.mark.parametrize("kind", sorted(QT))
@pytest.mark.parametrize("c", [1, 3, 17])
def test_qdq_pair_between_convs(tmp_path, kind, c):
    """The pairs between convolutions (kept channels last by conv_nhwc)
    become QuantizeDequantize: the same bits as the pass off, and ONNX
    Runtime's nodes run as written (f32 convolutions between the pairs)
    but for a code rounded the other way where a convolution's summation
    order moves a value across a tie (none with these seeds here; its
    optimized graph moves half the codes by up to 9 steps)."""
    path = qdqp_conv_model(tmp_path, kind, c)
    on = dump_ir(path)
    assert on.count("QuantizeDequantize(") == 4 and "= QuantizeLinear(" not in on, on
    mod_on = compile_onnx(path, out=tmp_path / "on.dvmb")
    mod_off = compile_onnx(path, "--disable", "qdq_pair", out=tmp_path / "off.dvmb")
    sess = qdqp_ort_plain(path)
    for shape in [(1, c, 1, 1), (1, c, 7, 13), (2, c, 13, 7)]:
        feeds = {"x": rng.uniform(-3, 3, shape).astype(np.float32)}
        want = sess.run(None, feeds)[0]
        for threads in (1, 2):
            a = run_module(mod_on, feeds, threads=threads)[0]
            b = run_module(mod_off, feeds, threads=threads)[0]
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
            d = np.abs(a - want)
            assert a.shape == want.shape and np.count_nonzero(d) <= 0.01 * d.size and d.max(initial=0) <= 0.3, shape
