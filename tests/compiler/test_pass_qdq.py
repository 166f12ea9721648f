"""quantize_static's QDQ models (QuantizeLinear/DequantizeLinear around
every Conv): pass quant_const (compiler/pass_quant_const.c) makes the
quantize and dequantize nodes of constants constants; pass pad_conv
(compiler/pass_pad_conv.c) folds a zero Pad behind a QuantizeLinear /
DequantizeLinear pair of the Pad's input's scale and zero point into the
Conv; pass conv_nhwc (compiler/pass_conv_nhwc.c) keeps the per-tensor
pairs between convolutions channels last, and pass qdq_pair
(compiler/pass_qdq_pair.c) makes each pair one kernel. Results equal the passes off
(bitwise where no convolution changes) and ONNX Runtime's at awkward shapes
(channels 1, 3, 17; spatial 1, 2, 7, 13; asymmetric pads); where a
condition does not hold (a non-zero pad value, scales or zero points that
differ) nothing is rewritten."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.cli import compile_onnx, dump_ir, run_module  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.onnxmodel import const, make_model, save_model  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(30)
QDQ_PASSES = ("quant_const", "pad_conv", "conv_nhwc", "qdq_pair")


def qdq_off_flags(passes=QDQ_PASSES):
    return [f for p in passes for f in ("--disable", p)]


def qdq_pair(nodes, inits, x, out, scale, zp, dtype=np.uint8, zp_in=None):
    """out = DequantizeLinear(QuantizeLinear(x, scale, zp)): the pair
    quantize_static writes around each activation (zp_in: another zero
    point name for the QuantizeLinear)."""
    s, z = out + "_s", out + "_z"
    inits += [const(s, scale), const(z, zp, dtype)]
    zq = zp_in or z
    if zp_in:
        inits.append(const(zp_in, zp + 1, dtype))
    nodes += [helper.make_node("QuantizeLinear", [x, s, zq], [out + "_q"]),
              helper.make_node("DequantizeLinear", [out + "_q", s, zq], [out])]


def dq_weight(nodes, inits, name, w, per_axis):
    """name = DequantizeLinear of w quantized to i8 (per output channel or per
    tensor), as quantize_static stores a Conv's weights."""
    amax = np.abs(w).reshape(w.shape[0], -1).max(axis=1) if per_axis else np.abs(w).max()
    scale = (np.maximum(amax, 1e-3) / 127).astype(np.float32)
    ws = scale.reshape(-1, *[1] * (w.ndim - 1)) if per_axis else scale
    q = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
    inits += [const(name + "_q", q, np.int8), const(name + "_s", scale),
              const(name + "_z", np.zeros(scale.shape, np.int8), np.int8)]
    nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name],
                                  **({"axis": 0} if per_axis else {})))


def qdq_bias(nodes, inits, name, b, scale):
    """name = DequantizeLinear of b as i32 codes of one scale (no zero point)."""
    inits += [const(name + "_q", np.round(b / scale), np.int32), const(name + "_s", [scale])]
    nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s"], [name]))


def qdq_pad_conv_model(tmp, cin=3, pads=(0, 0, 1, 1, 0, 0, 1, 1), value=0.0, second_scale=None,
                       second_zp=False, strides=(1, 1), group=1, cout=4):
    """x -> Q/DQ -> Conv 1x1 -> Q/DQ (a) -> Pad(value) -> Q/DQ -> Conv 3x3 ->
    Q/DQ -> y: quantize_static's form of a same-padded conv after another.
    second_scale / second_zp: the Pad's pair on another scale / zero point."""
    nodes, inits = [], []
    qdq_pair(nodes, inits, "x", "xq", 0.03, 128)
    mid = cin * 2
    dq_weight(nodes, inits, "w1", rng.standard_normal((mid, cin, 1, 1)).astype(np.float32), True)
    qdq_bias(nodes, inits, "b1", rng.uniform(-1, 1, mid), 0.03 * 0.01)
    nodes.append(helper.make_node("Conv", ["xq", "w1", "b1"], ["c1"], kernel_shape=[1, 1]))
    qdq_pair(nodes, inits, "c1", "a", 0.05, 128)
    inits += [const("pads", list(pads), np.int64), const("v", value), const("v_s", 0.05),
              const("v_z", 128, np.uint8)]
    nodes += [helper.make_node("QuantizeLinear", ["v", "v_s", "v_z"], ["v_q"]),
              helper.make_node("DequantizeLinear", ["v_q", "v_s", "v_z"], ["v_dq"]),
              helper.make_node("Pad", ["a", "pads", "v_dq"], ["p"], mode="constant")]
    qdq_pair(nodes, inits, "p", "pq", second_scale or 0.05, 128, zp_in="pz2" if second_zp else None)
    dq_weight(nodes, inits, "w2", rng.standard_normal((cout, mid // group, 3, 3)).astype(np.float32), False)
    nodes.append(helper.make_node("Conv", ["pq", "w2"], ["c2"], kernel_shape=[3, 3], strides=list(strides),
                                  group=group))
    qdq_pair(nodes, inits, "c2", "y", 0.1, 128)
    m = make_model(nodes, [("x", F, ["n", cin, "h", "w"])], [("y", F, None)], inits, opset=17, ir_version=8)
    return save_model(m, tmp / "qdq_pad_conv.onnx")


def qdq_compare(tmp, path, shapes, step):
    """dvm with the QDQ passes on and off and ONNX Runtime on random x of each
    shape: on and off within one quantization step of the output (a conv's
    other summation order may round a code the other way), ONNX Runtime (its
    integer convolutions) within two."""
    on, off = str(tmp / "on.dvmb"), str(tmp / "off.dvmb")
    compile_onnx(path, out=on)
    compile_onnx(path, *qdq_off_flags(), out=off)
    sess = ort_session(path)
    for shape in shapes:
        feeds = {"x": rng.uniform(-3, 3, shape).astype(np.float32)}
        want = sess.run(None, feeds)[0]
        for threads in (1, 2):
            a = run_module(on, feeds, threads=threads)[0]
            b = run_module(off, feeds, threads=threads)[0]
            assert a.shape == b.shape == want.shape, (shape, a.shape, want.shape)
            assert np.abs(a - b).max(initial=0) <= step * 1.001, shape
            assert np.abs(a - want).max(initial=0) <= 2 * step * 1.001, shape


@pytest.mark.parametrize("cin", [1, 3, 17])
@pytest.mark.parametrize("pads", [(0, 0, 1, 1, 0, 0, 1, 1), (0, 0, 2, 0, 0, 0, 1, 3), (0, 0, 0, 1, 0, 0, 1, 0)])
def test_qdq_pad_folded(tmp_path, cin, pads):
    path = qdq_pad_conv_model(tmp_path, cin=cin, pads=pads)
    on, off = dump_ir(path), dump_ir(path, *qdq_off_flags())
    assert "= Pad(" not in on and "= Pad(" in off, on
    # the Pad's pair and v's go; the other pairs are one QuantizeDequantize each
    assert "Linear(" not in on and on.count("QuantizeDequantize(") == off.count("= QuantizeLinear(") - 2, on
    assert on.count("LayoutView") >= 2 and "dvm_layout" in on, on  # the pair between the convs kept NHWC
    shapes = [(n, cin, h, w) for n, h, w in [(1, 1, 1), (1, 2, 7), (2, 7, 13), (1, 13, 2)]
              if h + pads[2] + pads[6] >= 3 and w + pads[3] + pads[7] >= 3]  # the 3x3 kernel fits
    qdq_compare(tmp_path, path, shapes, 0.1)


def test_qdq_pad_depthwise_stride2(tmp_path):
    path = qdq_pad_conv_model(tmp_path, cin=3, pads=(0, 0, 0, 0, 0, 0, 1, 1), strides=(2, 2), group=6, cout=6)
    assert "= Pad(" not in dump_ir(path)
    qdq_compare(tmp_path, path, [(1, 3, 7, 13), (2, 3, 2, 2), (1, 3, 2, 3)], 0.1)


QDQ_NOT_FOLDED = {
    "value_nonzero": dict(value=0.5),
    "other_scale": dict(second_scale=0.06),
    "other_zero_point": dict(second_zp=True),
}


@pytest.mark.parametrize("case", sorted(QDQ_NOT_FOLDED))
def test_qdq_pad_not_folded(tmp_path, case):
    path = qdq_pad_conv_model(tmp_path, **QDQ_NOT_FOLDED[case])
    assert "= Pad(" in dump_ir(path)
    qdq_compare(tmp_path, path, [(1, 3, 7, 13), (2, 3, 2, 2)], 0.1)


def test_quant_const_bitwise(tmp_path):
    """quant_const alone: a per-axis i8, a per-tensor u8 and an i32
    DequantizeLinear of constants, and a QuantizeLinear of a constant (i8,
    NaN and out-of-range values included) feeding a DequantizeLinear, added
    to x: the same bits as the nodes run, as ONNX Runtime's."""
    nodes, inits = [], []
    k = np.array([-1e9, -2.5, -0.5, 0, 0.5, 1.5, 2.5, np.nan, 3e9], np.float32).reshape(1, 1, 3, 3)
    per_axis = rng.integers(-128, 128, (1, 17, 1, 3)).astype(np.int8)
    inits += [const("pa_q", per_axis, np.int8), const("pa_s", rng.uniform(0.01, 1, 17)),
              const("pa_z", rng.integers(-5, 5, 17), np.int8),
              const("pt_q", rng.integers(0, 256, (17, 1, 3)), np.uint8), const("pt_s", 0.37),
              const("pt_z", 131, np.uint8), const("b_q", rng.integers(-10 ** 6, 10 ** 6, (3,)), np.int32),
              const("b_s", [1e-4]), const("k", k), const("k_s", 1.0), const("k_z", -3, np.int8)]
    nodes += [helper.make_node("DequantizeLinear", ["pa_q", "pa_s", "pa_z"], ["pa"], axis=1),
              helper.make_node("DequantizeLinear", ["pt_q", "pt_s", "pt_z"], ["pt"]),
              helper.make_node("DequantizeLinear", ["b_q", "b_s"], ["b"]),
              helper.make_node("QuantizeLinear", ["k", "k_s", "k_z"], ["kq"]),
              helper.make_node("DequantizeLinear", ["kq", "k_s", "k_z"], ["kd"]),
              helper.make_node("Add", ["x", "pa"], ["s1"]), helper.make_node("Add", ["s1", "pt"], ["s2"]),
              helper.make_node("Add", ["s2", "b"], ["y"]), helper.make_node("Add", ["x", "kd"], ["y2"])]
    m = make_model(nodes, [("x", F, [1, 17, 3, 3])], [("y", F, None), ("y2", F, None)], inits, opset=19,
                   ir_version=9)
    path = save_model(m, tmp_path / "quant_const.onnx")
    on, off = dump_ir(path), dump_ir(path, "--disable", "quant_const", "--disable", "qdq_pair")
    assert "Quantize" not in on and off.count("= DequantizeLinear(") == 4, on
    feeds = {"x": rng.standard_normal((1, 17, 3, 3)).astype(np.float32)}
    a = run_module(compile_onnx(path, out=tmp_path / "on.dvmb"), feeds, 2)
    b = run_module(compile_onnx(path, "--disable", "quant_const", out=tmp_path / "off.dvmb"), feeds, 2)
    want = ort_session(path).run(None, feeds)
    for x, y, z in zip(a, b, want, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_allclose(x, z, rtol=1e-6, atol=1e-6)


def test_quant_const_kept(tmp_path):
    """Not folded: a DequantizeLinear that is a graph output, one of a
    graph input, a blocked one."""
    nodes = [helper.make_node("DequantizeLinear", ["c_q", "c_s"], ["c"]),
             helper.make_node("DequantizeLinear", ["xq", "c_s"], ["xd"]),
             helper.make_node("DequantizeLinear", ["bl_q", "bl_s"], ["bl"], axis=1, block_size=2),
             helper.make_node("Add", ["xd", "bl"], ["y"])]
    inits = [const("c_q", [1, 2, 3], np.uint8), const("c_s", 0.5), const("bl_q", np.arange(4).reshape(1, 4), np.uint8),
             const("bl_s", [[0.5, 0.25]])]
    m = make_model(nodes, [("xq", TensorProto.UINT8, [1, 4])], [("c", F, None), ("y", F, None)], inits, opset=21,
                   ir_version=10)
    path = save_model(m, tmp_path / "kept.onnx")
    assert dump_ir(path).count("= DequantizeLinear(") == 3
    feeds = {"xq": np.array([[0, 7, 200, 255]], np.uint8)}
    got = run_module(compile_onnx(path, out=tmp_path / "kept.dvmb"), feeds, 2)
    for g, w in zip(got, ort_session(path).run(None, feeds), strict=True):
        np.testing.assert_array_equal(g, w)
