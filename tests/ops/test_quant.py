"""The quantization kernels (ops/cpu/quant.c) through the whole stack: one
ONNX node per model, compiled with `dvm compile`, run with `dvm run`, and
compared with ONNX Runtime running the same model, at awkward shapes (0-size
dims, 1, primes, broadcast batch dims), per tensor, per axis and blocked,
with every integer type both take. Integer outputs must be equal; float
outputs (DequantizeLinear) within 1e-6 relative."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from dvmop import run_model

rng = np.random.default_rng(7)
ONNX_TYPE = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8, np.int16: TensorProto.INT16,
             np.uint16: TensorProto.UINT16, np.int32: TensorProto.INT32, np.float32: TensorProto.FLOAT,
             np.float16: TensorProto.FLOAT16}


def qrange(dt):
    i = np.iinfo(dt)
    return int(i.min), int(i.max)


def run_with_ort(op, inputs, outputs, opset=21, domain="", ort_threads=0, **attrs):
    """inputs: name -> array (all graph inputs; a name or value "" leaves
    an optional one out); outputs: [(name, np dtype)] ("" leaves one out). Returns (dvm's
    outputs, ORT's); ort_threads > 0 sets ONNX Runtime's intra-op threads."""
    names = [k if not (isinstance(v, str) and v == "") else "" for k, v in inputs.items()]
    inputs = {k: np.asarray(v) for k, v in inputs.items() if k and not (isinstance(v, str) and v == "")}
    vi = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype.type], list(v.shape)) for k, v in inputs.items()]
    onames = [k for k, _ in outputs]
    outputs = [(k, t) for k, t in outputs if k]
    vo = [helper.make_tensor_value_info(k, ONNX_TYPE[t], None) for k, t in outputs]
    node = helper.make_node(op, names, onames, domain=domain, **attrs)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(helper.make_graph([node], "g", vi, vo), opset_imports=opsets)
    so = ort.SessionOptions()
    so.intra_op_num_threads = ort_threads
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, inputs)
    return run_model(model, inputs, len(outputs)), want


def check_quant(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(g, w)


# (x shape, axis, block_size): per tensor (axis None), per axis, blocked
LAYOUTS = [((0, 3), None, 0), ((1,), None, 0), ((7, 13), None, 0), ((2, 5, 3), 1, 0), ((3, 0, 2), 2, 0),
           ((11, 7), 0, 0), ((4, 7, 5), -1, 0), ((2, 7, 3), 1, 3), ((13, 4), 0, 5), ((5, 9), 1, 1)]


def scale_shape(shape, axis, block):
    if axis is None:
        return ()
    a = axis % len(shape)
    if not block:
        return (shape[a],)
    return tuple(-(-d // block) if i == a else d for i, d in enumerate(shape))


def attrs_of(axis, block):
    return ({} if axis is None else {"axis": axis}) | ({"block_size": block} if block else {})


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("qt", [np.uint8, np.int8, np.int16])
def test_quantize_linear(tmp_path, layout, qt):
    shape, axis, block = layout
    ss = scale_shape(shape, axis, block)
    x = (rng.standard_normal(shape) * 40).astype(np.float32)
    x.flat[:3] = [0.5, 1.5, -2.5][: x.size]  # ties round to even
    lo, hi = qrange(qt)
    scale = rng.uniform(0.05, 1.0, ss).astype(np.float32)
    if x.size:
        scale.flat[0] = 1.0
    zp = rng.integers(lo // 4, hi // 4, ss).astype(qt)
    if x.size:
        zp.flat[0] = 0
    check_quant(*run_with_ort("QuantizeLinear", {"x": x, "s": scale, "z": zp}, [("y", qt)], **attrs_of(axis, block)))


def test_quantize_linear_without_zero_point_is_u8(tmp_path):
    x = (rng.standard_normal((3, 5)) * 100).astype(np.float32)
    check_quant(*run_with_ort("QuantizeLinear", {"x": x, "s": np.float32(0.5)}, [("y", np.uint8)]))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("qt", [np.uint8, np.int8, np.int16, np.int32])
def test_dequantize_linear(tmp_path, layout, qt):
    shape, axis, block = layout
    ss = scale_shape(shape, axis, block)
    lo, hi = qrange(qt) if qt != np.int32 else (-(1 << 20), 1 << 20)
    x = rng.integers(lo, hi, shape, endpoint=True).astype(qt)
    scale = rng.uniform(0.01, 2.0, ss).astype(np.float32)
    inputs = {"x": x, "s": scale}
    if qt != np.int32:  # an i32 zero point must be 0: left out
        inputs["z"] = rng.integers(lo // 4, hi // 4, ss).astype(qt)
    check_quant(*run_with_ort("DequantizeLinear", inputs, [("y", np.float32)], **attrs_of(axis, block)))


@pytest.mark.parametrize("shape", [(0,), (1,), (1, 1), (7, 13), (3, 0, 5), (2, 31, 17)])
@pytest.mark.parametrize("kind", ["normal", "positive", "negative", "zero"])
def test_dynamic_quantize_linear(tmp_path, shape, kind):
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    x = {"normal": x, "positive": np.abs(x), "negative": -np.abs(x), "zero": np.zeros_like(x)}[kind]
    check_quant(*run_with_ort("DynamicQuantizeLinear", {"x": x}, [("y", np.uint8), ("s", np.float32),
                                                             ("z", np.uint8)], opset=13))


# (a shape, b shape): 1-D operands, 0 and 1 and prime dims, broadcast batches
PRODUCTS = [((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,)), ((1, 1), (1, 1)), ((0, 7), (7, 3)), ((3, 0), (0, 2)),
            ((13, 17), (17, 11)), ((2, 7, 5), (5, 3)), ((3, 1, 4, 5), (2, 5, 6)), ((1, 3, 2), (4, 1, 2, 7)),
            # the i32 loop's blocks of 4 rows x 16 columns: exactly one; two and
            # leftover rows and columns; a batch of them
            ((4, 3), (3, 16)), ((9, 19), (19, 35)), ((2, 5, 23), (23, 17))]


def operand(qt, shape):
    lo, hi = qrange(qt)
    return rng.integers(lo, hi, shape, endpoint=True).astype(qt)


# The integer products run on oneDNN's VNNI GEMM where the CPU has AVX-512
# VNNI and on dvm's own i32 loop otherwise; "avx2" holds a VNNI machine to
# the loop (ops/cpu/isa.h), so both are tested there.
ISAS = ["", "avx2"]


@pytest.fixture(params=ISAS, ids=["isa-best", "isa-avx2"])
def isa(request, monkeypatch):
    if request.param:
        monkeypatch.setenv("DVM_CPU_ISA", request.param)
    return request.param


@pytest.mark.parametrize("shapes", PRODUCTS)
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
def test_matmul_integer(tmp_path, shapes, types, isa):
    (sa, sb), (ta, tb) = shapes, types
    a, b = operand(ta, sa), operand(tb, sb)
    inputs = {"a": a, "b": b, "az": operand(ta, ()), "bz": operand(tb, ())}
    got, want = run_with_ort("MatMulInteger", inputs, [("y", np.int32)], opset=13)
    if a.shape[-1] == 0:  # ORT 1.32 leaves such outputs unwritten: NumPy says 0
        want = [np.matmul(a.astype(np.int32) - inputs["az"], b.astype(np.int32) - inputs["bz"]).astype(np.int32)]
    check_quant(got, want)


@pytest.mark.parametrize("tb", [np.uint8, np.int8])
def test_matmul_integer_per_column_zero_point(tmp_path, tb, isa):
    a, b = operand(np.uint8, (4, 7)), operand(tb, (7, 5))
    inputs = {"a": a, "b": b, "az": operand(np.uint8, ()), "bz": operand(tb, (5,))}
    check_quant(*run_with_ort("MatMulInteger", inputs, [("y", np.int32)], opset=13))


@pytest.mark.parametrize("ta, tb", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
def test_matmul_integer_per_row_zero_point(tmp_path, ta, tb, isa):
    """a's zero point one per row (M of them, past a block of rows). ONNX
    Runtime's CPU kernel refuses it, so NumPy is the reference."""
    a, b, az, bz = operand(ta, (19, 37)), operand(tb, (37, 21)), operand(ta, (19,)), operand(tb, ())
    vi = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype.type], list(v.shape))
          for k, v in (("a", a), ("b", b), ("az", az), ("bz", bz))]
    g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], "g", vi,
                          [helper.make_tensor_value_info("y", TensorProto.INT32, None)])
    got = run_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
                    {"a": a, "b": b, "az": az, "bz": bz})[0]
    check_quant([got], [np.matmul(a.astype(np.int32) - az.astype(np.int32)[:, None], b.astype(np.int32) - bz)])


@pytest.mark.parametrize("ta, tb", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
def test_matmul_integer_sums_exactly_at_the_extremes(tmp_path, ta, tb, isa):
    """Operands at their extremes, zero points 0, K = 1031: every pair of
    products overflows i16, so a GEMM that pairs them in saturating i16
    (oneDNN without VNNI) would be wrong. NumPy is the reference."""
    lo_a, hi_a = qrange(ta)
    lo_b, hi_b = qrange(tb)
    a = np.where(rng.random((67, 1031)) < 0.5, lo_a, hi_a).astype(ta)
    b = np.where(rng.random((1031, 37)) < 0.5, lo_b, hi_b).astype(tb)
    inputs = {"a": a, "b": b, "az": np.zeros((), ta), "bz": np.zeros((), tb)}
    got, _ = run_with_ort("MatMulInteger", inputs, [("y", np.int32)], opset=13)
    check_quant(got, [np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)])


def test_matmul_integer_without_zero_points(tmp_path):
    check_quant(*run_with_ort("MatMulInteger", {"a": operand(np.uint8, (3, 5)), "b": operand(np.int8, (5, 2))},
              [("y", np.int32)], opset=13))


@pytest.mark.parametrize("shapes", PRODUCTS[3:])
@pytest.mark.parametrize("qt", [np.uint8, np.int8])
@pytest.mark.parametrize("st", [np.float32, np.float16])
def test_qlinear_matmul(tmp_path, shapes, qt, st, isa):
    sa, sb = shapes
    s = lambda v: np.array(v, st)  # noqa: E731
    inputs = {"a": operand(qt, sa), "as": s(0.02), "az": operand(qt, ()), "b": operand(qt, sb), "bs": s(0.011),
              "bz": operand(qt, ()), "ys": s(0.7), "yz": operand(qt, ())}
    got, want = run_with_ort("QLinearMatMul", inputs, [("y", qt)], opset=21)
    if sa[-1] == 0:  # ORT 1.32 leaves such outputs unwritten: the sums are 0, y is y's zero point
        want = [np.full(want[0].shape, inputs["yz"], qt)]
    check_quant(got, want)


# (x shape, w shape, attrs)
CONVS = [((1, 1, 1, 1), (1, 1, 1, 1), {}), ((2, 3, 7, 5), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
         ((1, 4, 11, 13), (6, 2, 3, 2), {"group": 2, "strides": [2, 3], "dilations": [2, 1]}),
         ((1, 2, 13), (3, 2, 5), {"pads": [2, 1], "strides": [2]}), ((0, 2, 5, 5), (3, 2, 3, 3), {}),
         ((1, 2, 3, 5, 7), (2, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
         ((2, 6, 5, 5), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]})]


@pytest.mark.parametrize("conv", CONVS)
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.uint8, np.int8)])
def test_conv_integer(tmp_path, conv, types):
    sx, sw, attrs = conv
    (tx, tw) = types
    inputs = {"x": operand(tx, sx), "w": operand(tw, sw), "xz": operand(tx, ()), "wz": operand(tw, ())}
    check_quant(*run_with_ort("ConvInteger", inputs, [("y", np.int32)], opset=13, **attrs))


@pytest.mark.parametrize("conv", CONVS)
@pytest.mark.parametrize("qt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(tmp_path, conv, qt, per_channel):
    sx, sw, attrs = conv
    m = sw[0]
    ws = rng.uniform(0.001, 0.01, (m,) if per_channel else ()).astype(np.float32)
    wz = np.zeros((m,) if per_channel else (), qt)  # ORT takes only 0 for per-channel weights
    inputs = {"x": operand(qt, sx), "xs": np.float32(0.05), "xz": operand(qt, ()), "w": operand(qt, sw),
              "ws": ws, "wz": wz, "ys": np.float32(0.3), "yz": operand(qt, ()),
              "b": rng.integers(-500, 500, (m,)).astype(np.int32)}
    check_quant(*run_with_ort("QLinearConv", inputs, [("y", qt)], opset=13, **attrs))


def test_input_counts_refused():
    """The quantization and contrib kernels' input counts (dvm_kargs_check_range):
    one too few or too many is an error naming the kernel and both counts."""
    from dvmop import DvmError, run1
    x, s = np.zeros((2, 3), np.float32), np.float32(1)
    with pytest.raises(DvmError, match=r"quantize_linear: takes 2 to 3 inputs and 1 output, got 1 and 1"):
        run1("quantize_linear", [x], outputs=[(np.uint8, (2, 3))])
    with pytest.raises(DvmError, match=r"dequantize_linear: takes 2 to 3 inputs and 1 output, got 4 and 1"):
        run1("dequantize_linear", [np.zeros((2, 3), np.uint8), s, np.uint8(0), s], outputs=[(np.float32, (2, 3))])
    with pytest.raises(DvmError, match=r"fast_gelu: takes 1 to 2 inputs and 1 output, got 3 and 1"):
        run1("fast_gelu", [x, x, x], outputs=[(np.float32, (2, 3))])
