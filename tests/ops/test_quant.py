"""The quantization kernels (ops/cpu/quant.c) through the whole stack: one
ONNX node per model, compiled with `dvm compile`, run with `dvm run`, and
compared with ONNX Runtime running the same model, at awkward shapes (0-size
dims, 1, primes, broadcast batch dims), per tensor, per axis and blocked,
with every integer type both take. Integer outputs must be equal; float
outputs (DequantizeLinear) within 1e-6 relative."""

import numpy as np
import onnxruntime as ort
import pytest
from dvmtest import devices
from dvmtest.cli import compile_onnx, run_module
from dvmtest.onnxmodel import save_model
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

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


# one-element scale and zero point of different shapes, as quantize_static
# writes a bias's ([1] scale, [] zero point) and ONNX Runtime takes them
@pytest.mark.parametrize("shapes", [((1,), ()), ((), (1,))])
@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_per_tensor_scale_and_zero_point_of_other_shapes(shapes, op):
    ss, zs = shapes
    x = rng.integers(-100, 100, (3, 17)).astype(np.int8)
    if op == "QuantizeLinear":
        x = x.astype(np.float32) * 0.37
    inputs = {"x": x, "s": np.full(ss, 0.25, np.float32), "z": np.full(zs, 3, np.int8)}
    check_quant(*run_with_ort(op, inputs, [("y", np.float32 if op[0] == "D" else np.int8)]))


@pytest.mark.parametrize("shape", [(0,), (1,), (1, 1), (7, 13), (3, 0, 5), (2, 31, 17)])
@pytest.mark.parametrize("kind", ["normal", "positive", "negative", "zero"])
def test_dynamic_quantize_linear(tmp_path, shape, kind):
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    x = {"normal": x, "positive": np.abs(x), "negative": -np.abs(x), "zero": np.zeros_like(x)}[kind]
    check_quant(*run_with_ort("DynamicQuantizeLinear", {"x": x}, [("y", np.uint8), ("s", np.float32),
                                                             ("z", np.uint8)], opset=13))



def dql_concat_model(xs):
    """One DynamicQuantizeLinear per array of xs (1-D), their codes, scales and
    zero points each concatenated into one output (dvm run binds at most 64
    values)."""
    nodes, ins, feeds = [], [], {}
    for i, x in enumerate(xs):
        nodes += [helper.make_node("DynamicQuantizeLinear", [f"x{i}"], [f"y{i}", f"s{i}", f"z{i}"]),
                  helper.make_node("Unsqueeze", [f"s{i}", "ax"], [f"us{i}"]),
                  helper.make_node("Unsqueeze", [f"z{i}", "ax"], [f"uz{i}"])]
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [len(x)]))
        feeds[f"x{i}"] = x
    for out, part in (("Y", "y"), ("S", "us"), ("Z", "uz")):
        nodes.append(helper.make_node("Concat", [f"{part}{i}" for i in range(len(xs))], [out], axis=0))
    outs = [helper.make_tensor_value_info(k, t, None)
            for k, t in (("Y", TensorProto.UINT8), ("S", TensorProto.FLOAT), ("Z", TensorProto.UINT8))]
    ax = helper.make_tensor("ax", TensorProto.INT64, [1], [0])
    return helper.make_model(helper.make_graph(nodes, "g", ins, outs, [ax]), opset_imports=[helper.make_opsetid("", 13)]), feeds


def dql_inputs(seed):
    """Random inputs at awkward sizes (1, primes, just past a vector of 16,
    large) over six decades of magnitude: mixed signs, all positive, all
    negative, a range off zero, halves that tie when divided by a round
    scale; and ranges whose zero point ties."""
    r = np.random.default_rng(seed)
    xs = []
    for n in (1, 2, 3, 7, 13, 16, 17, 31, 64, 65, 127, 129, 257, 1021, 4099, 65537):
        x = r.standard_normal(n).astype(np.float32) * np.float32(10.0 ** r.uniform(-3, 3))
        xs += [x, np.abs(x), -np.abs(x), r.uniform(-1, 3, n).astype(np.float32),
               (r.integers(-255, 256, n) / 2).astype(np.float32)]
    # scale 1 and a zero point k + 0.5 that ties
    return xs + [np.array([-(k + 0.5), 254.5 - k, k], np.float32) for k in (0, 1, 2, 7, 100)]


@pytest.mark.parametrize("seed", [1, 2])
def test_dynamic_quantize_linear_is_bitwise_ort(seed):
    """Codes, scale and zero point equal ONNX Runtime's bit for bit on 85
    random inputs: the same f32 operations in the same order ((max - min) /
    255, the zero point clamped then rounded half to even, x / scale divided,
    not multiplied by a reciprocal, and rounded half to even)."""
    xs = dql_inputs(seed)
    for at in range(0, len(xs), 40):
        model, feeds = dql_concat_model(xs[at:at + 40])
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got, want = run_model(model, feeds, 3), sess.run(None, feeds)
        assert got[1].tobytes() == want[1].tobytes(), "scales"
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_quantization_of_infinities_and_nan_is_ort():
    """Infinite inputs as ONNX Runtime quantizes them: a NaN x / scale (an
    infinite x over an infinite scale) saturates to the type's minimum, as
    MLAS clamps it, and an infinite minimum makes the zero point 255 (its
    -min / scale is NaN, clamped by std::min first)."""
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    for x in ([-inf, 2, 1], [inf, 1, -1], [-inf, inf, 0], [3e38, -3e38, 1]):
        x = np.array(x, np.float32)
        check_quant(*run_with_ort("DynamicQuantizeLinear", {"x": x}, [("y", np.uint8), ("s", np.float32),
                                                                 ("z", np.uint8)], opset=13))
    x = np.array([nan, inf, -inf, 1e30, -1e30, 2.5, -2.5] + [nan] * 20 + [1.5] * 20, np.float32)
    for qt in (np.uint8, np.int8, np.int16, np.uint16):
        check_quant(*run_with_ort("QuantizeLinear", {"x": x, "s": np.array(1, np.float32), "z": np.array(3, qt)},
                                  [("y", qt)]))



def tiny_encoder_model(r, layers=2, hidden=64, heads=4, ff=128):
    """A BERT-like encoder of random weights (attention with an additive
    mask, LayerNormalization, an Erf GELU, residuals, a classifier of 16)
    over x [batch, seq, hidden] and mask [batch, seq]."""
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    def linear(x, i, o, tag):
        w = const(f"{tag}_w", (r.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32))
        return node("Add", [node("MatMul", [x, w], f"{tag}_m"), const(f"{tag}_b", (r.standard_normal(o) * 0.1).astype(np.float32))], f"{tag}_a")

    def layernorm(x, tag):
        g = const(f"{tag}_g", (1 + 0.1 * r.standard_normal(hidden)).astype(np.float32))
        return node("LayerNormalization", [x, g, const(f"{tag}_b", (0.1 * r.standard_normal(hidden)).astype(np.float32))],
                    f"{tag}_y", axis=-1, epsilon=1e-5)

    const("split", np.array([0, 0, heads, hidden // heads], np.int64))
    const("merge", np.array([0, 0, hidden], np.int64))
    const("root", np.float32(np.sqrt(hidden // heads)))
    const("half", np.float32(0.5))
    const("one", np.float32(1))
    const("rsqrt2", np.float32(1 / np.sqrt(2)))
    const("big", np.float32(-10000))
    const("axes12", np.array([1, 2], np.int64))
    keep = node("Unsqueeze", ["mask", "axes12"], "mask4")
    bias = node("Mul", [node("Sub", ["one", keep], "unmask"), "big"], "mask_bias")
    x = "x"
    for k in range(layers):
        t = f"l{k}"

        def split(v, nm):
            return node("Transpose", [node("Reshape", [v, "split"], f"{t}{nm}_r")], f"{t}{nm}_t", perm=[0, 2, 1, 3])

        q, key, v = (split(linear(x, hidden, hidden, f"{t}{nm}"), nm) for nm in "qkv")
        kt = node("Transpose", [key], f"{t}kt", perm=[0, 1, 3, 2])
        s = node("Add", [node("Div", [node("MatMul", [q, kt], f"{t}qk"), "root"], f"{t}qks"), bias], f"{t}qkm")
        o = node("MatMul", [node("Softmax", [s], f"{t}p", axis=-1), v], f"{t}pv")
        o = node("Reshape", [node("Transpose", [o], f"{t}pvt", perm=[0, 2, 1, 3]), "merge"], f"{t}o")
        x = layernorm(node("Add", [x, linear(o, hidden, hidden, f"{t}out")], f"{t}res1"), f"{t}ln1")
        f = linear(x, hidden, ff, f"{t}ff1")
        erf = node("Erf", [node("Mul", [f, "rsqrt2"], f"{t}g0")], f"{t}g1")
        gelu = node("Mul", [node("Mul", [f, node("Add", [erf, "one"], f"{t}g2")], f"{t}g3"), "half"], f"{t}g4")
        x = layernorm(node("Add", [x, linear(gelu, ff, hidden, f"{t}ff2")], f"{t}res2"), f"{t}ln2")
    y = linear(x, hidden, 16, "cls")
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden]),
                                                 helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_quantize_dynamic_encoder_agrees_with_ort(tmp_path):
    """ONNX Runtime's quantize_dynamic of a BERT-like encoder (u8
    activations through DynamicQuantizeLinear, i8 weights, MatMulInteger),
    run by dvm and by ONNX Runtime at 10 (batch, seq). The integer parts are
    ORT's bit for bit; the f32 parts between them (LayerNormalization,
    Softmax, the products' epilogues) can differ from ORT's by an ulp, and
    where that moves a value across a rounding boundary of the next
    DynamicQuantizeLinear (or its range's end, and so its scale) one u8
    code differs by a step. Measured: 9 of the 10 shapes within 3e-7 of
    max |ORT|, one at 4.5e-3 (2 x 64), the quantization error itself
    (against the f32 model) 2-4%. Asserted: every shape within 1e-2 of max
    |ORT| with the same argmax, and at least 8 of 10 within 1e-6."""
    if devices.active() != "cpu":
        pytest.skip("the agreement measured is that of the CPU kernels between the quantized products")
    r = np.random.default_rng(0)
    src = save_model(tiny_encoder_model(r), tmp_path / "encoder.onnx")
    path = str(tmp_path / "encoder_q.onnx")
    quantize_dynamic(src, path, weight_type=QuantType.QInt8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    mod = compile_onnx(path)
    close, report = 0, []
    for batch, seq in [(1, 1), (1, 2), (2, 7), (3, 13), (1, 31), (2, 31), (4, 17), (1, 64), (2, 64), (5, 11)]:
        x = r.standard_normal((batch, seq, 64)).astype(np.float32)
        mask = np.ones((batch, seq), np.float32)
        mask[0, max(seq - 2, 1):] = 0
        want = sess.run(None, {"x": x, "mask": mask})[0]
        got = run_module(mod, {"x": x, "mask": mask})[0]
        rel = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
        report.append(f"{batch}x{seq}: {rel:.3g}")
        assert rel <= 1e-2 and np.array_equal(got.argmax(-1), want.argmax(-1)), report
        close += rel <= 1e-6
    assert close >= 8, report


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


# (a shape, b shape) with b a constant, packed at link (ops/cpu/qgemm.h):
# M 0, 1, 7, 8 and past the tile's 8 rows (a batch of them), K not a
# multiple of 4 or 64, N prime, below, at and just past the 16-column
# groups, 1-D a, K 0; 37 rows (an i8 b then runs on oneDNN's GEMM); from
# 16 rows where the CPU has AMX, its tiles: 16, 33 (a second tile of
# one row) and 64 rows, an odd count of groups.
CONST_B = [((0, 5), (5, 17)), ((1, 1031), (1031, 31)), ((7, 67), (67, 33)), ((8, 64), (64, 16)),
           ((13, 3), (3, 1)), ((2, 9, 130), (130, 47)), ((3,), (3, 19)), ((4, 0), (0, 5)),
           ((37, 20), (20, 29)), ((16, 200), (200, 33)), ((33, 1031), (1031, 47)), ((64, 64), (64, 16))]


@pytest.mark.parametrize("shapes", CONST_B)
@pytest.mark.parametrize("ta, tb", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8),
                                    (np.int8, np.uint8)])
@pytest.mark.parametrize("kind", ["", "avx2", "generic"])
def test_matmul_integer_constant_b(shapes, ta, tb, kind, monkeypatch):
    """b and its zero point as initializers (b packed at link), zero
    points nonzero: b's one element or per column, a's one element or per
    row; against ONNX Runtime where it runs the types and zero points,
    NumPy always. kind: the ISA the CPU kernels are held to ("" the best:
    AVX-512 VNNI tiles where the CPU has it)."""
    from dvmtest.onnxmodel import make_model
    if kind:
        monkeypatch.setenv("DVM_CPU_ISA", kind)
    (sa, sb) = shapes
    a, b = operand(ta, sa), operand(tb, sb)
    per_row = [(operand(ta, (sa[0],)), operand(tb, ()))] if len(sa) == 2 else []
    for az, bz in [(operand(ta, ()), operand(tb, ())), (operand(ta, ()), operand(tb, (sb[-1],)))] + per_row:
        model = make_model([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
                           [("a", ONNX_TYPE[ta], list(sa)), ("az", ONNX_TYPE[ta], list(az.shape))],
                           [("y", TensorProto.INT32, None)],
                           [numpy_helper.from_array(b, "b"), numpy_helper.from_array(bz, "bz")], opset=13)
        got = run_model(model, {"a": a, "az": az})[0]
        a_less = a.astype(np.int64) - (az.astype(np.int64)[:, None] if az.ndim else int(az))
        want = np.matmul(a_less, b.astype(np.int64) - bz.astype(np.int64)).astype(np.int32)
        np.testing.assert_array_equal(got, want)
        try:
            sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # ORT has no kernel for these types (i8 a with u8 b)
            continue
        if a.shape[-1] and a.size and not az.ndim:
            np.testing.assert_array_equal(got, sess.run(None, {"a": a, "az": az})[0])


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
         ((2, 6, 5, 5), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
         # oneDNN's kernels (ops/cpu/conv.c): patches (kernel = stride), primes
         # with dilation and uneven pads, a pointwise one past 32 channels,
         # groups with a stride, and one cut into bands of rows over threads
         ((1, 3, 35, 37), (5, 3, 4, 4), {"strides": [4, 4]}),
         ((2, 17, 11, 13), (19, 17, 3, 3), {"pads": [1, 2, 0, 1], "dilations": [2, 1]}),
         ((1, 33, 7, 9), (20, 33, 1, 1), {}),
         ((1, 12, 9, 10), (18, 4, 3, 3), {"group": 3, "strides": [2, 1], "pads": [1, 1, 1, 1]}),
         ((2, 16, 48, 50), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
         ((1, 16, 37, 1), (8, 16, 5, 1), {"pads": [2, 0, 2, 0], "strides": [2, 1]}),  # [5, 1] over W = 1
         # pointwise: W's zero point term is x's channel sum where there are no pads
         ((1, 17, 7, 13), (3, 17, 1, 1), {"pads": [1, 0, 0, 1]}), ((1, 3, 7, 13), (5, 3, 1, 1), {"strides": [2, 2]})]


@pytest.mark.parametrize("conv", CONVS)
@pytest.mark.parametrize("types", [(np.uint8, np.uint8), (np.uint8, np.int8)])
def test_conv_integer(tmp_path, conv, types, isa):
    sx, sw, attrs = conv
    (tx, tw) = types
    inputs = {"x": operand(tx, sx), "w": operand(tw, sw), "xz": operand(tx, ()), "wz": operand(tw, ())}
    check_quant(*run_with_ort("ConvInteger", inputs, [("y", np.int32)], opset=13, **attrs))


def conv_integer_ref(x, w, xz, wz, attrs):
    """ConvInteger in float64 (exact for these sums): test_conv's reference
    on x - xz and w - wz (per output channel)."""
    from test_conv import ref_conv
    n = x.ndim - 2
    wz = np.broadcast_to(np.asarray(wz, np.float64).reshape((-1,) + (1,) * (w.ndim - 1)), w.shape)
    return ref_conv(x.astype(np.float64) - xz, w.astype(np.float64) - wz, None, attrs.get("strides", [1] * n),
                    attrs.get("pads", [0] * 2 * n), attrs.get("dilations", [1] * n), attrs.get("group", 1))


@pytest.mark.parametrize("conv", [CONVS[i] for i in (0, 1, 2, 6, 7, 8, 10, 11, 13, 14)])
@pytest.mark.parametrize("tw", [np.uint8, np.int8])
@pytest.mark.parametrize("const_w", [False, True])
def test_conv_integer_zero_points(conv, tw, const_w, isa):
    """W's zero point per output channel (which ONNX Runtime refuses), none
    at all, and x with none, against NumPy; W and its zero point as
    initializers (the kept s8 copy and layouts of a constant W) or inputs."""
    from dvmtest.onnxmodel import make_model
    from onnx import numpy_helper
    sx, sw, attrs = conv
    x, w, xz = operand(np.uint8, sx), operand(tw, sw), operand(np.uint8, ())
    for wz in (operand(tw, (sw[0],)), None):
        feeds = {"x": x, "xz": xz} | ({} if const_w else {"w": w} | ({} if wz is None else {"wz": wz}))
        inits = [numpy_helper.from_array(v, k) for k, v in (("w", w), ("wz", wz)) if const_w and v is not None]
        ins = ["x", "w", "xz"] + ([] if wz is None else ["wz"])
        model = make_model([helper.make_node("ConvInteger", ins, ["y"], **attrs)],
                           [(k, ONNX_TYPE[v.dtype.type], list(v.shape)) for k, v in feeds.items()],
                           [("y", TensorProto.INT32, None)], inits, opset=13)
        got = run_model(model, feeds)[0]
        np.testing.assert_array_equal(got, conv_integer_ref(x, w, int(xz), 0 if wz is None else wz, attrs))
    model = make_model([helper.make_node("ConvInteger", ["x", "w"], ["y"], **attrs)],
                       [("x", TensorProto.UINT8, list(sx)), ("w", ONNX_TYPE[tw], list(sw))],
                       [("y", TensorProto.INT32, None)], opset=13)
    np.testing.assert_array_equal(run_model(model, {"x": x, "w": w})[0], conv_integer_ref(x, w, 0, 0, attrs))


@pytest.mark.parametrize("tw", [np.uint8, np.int8])
def test_conv_integer_sums_exactly_at_the_extremes(tw, isa):
    """Codes at their extremes and zero points that make every product as
    large as it gets (255 x 255 for u8 weights): an i16 pair of them would
    saturate (oneDNN without VNNI), oneDNN's int8 kernels must not; 2304
    products per output."""
    lo, hi = qrange(tw)
    x = np.where(rng.random((1, 256, 9, 10)) < 0.5, 0, 255).astype(np.uint8)
    w = np.where(rng.random((17, 256, 3, 3)) < 0.5, lo, hi).astype(tw)
    for xz, wz in ((0, hi), (255, lo), (0, 0)):
        inputs = {"x": x, "w": w, "xz": np.array(xz, np.uint8), "wz": np.array(wz, tw)}
        got, _ = run_with_ort("ConvInteger", inputs, [("y", np.int32)], opset=13, pads=[1, 1, 1, 1])
        check_quant(got, [conv_integer_ref(x, w, xz, wz, {"pads": [1, 1, 1, 1]}).astype(np.int32)])


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


def ort_quant_then_dequant(x, s, z, s2, z2):
    """ONNX Runtime's QuantizeLinear(x, s, z) then DequantizeLinear(., s2,
    z2), graph optimizations off (nothing fused), every operand an input."""
    feeds = {"x": x, "s": s, "z": z, "s2": s2, "z2": z2}
    vi = [helper.make_tensor_value_info(k, ONNX_TYPE[v.dtype.type], list(v.shape)) for k, v in feeds.items()]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s2", "z2"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", vi, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                                None)]),
                              opset_imports=[helper.make_opsetid("", 19)])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


@pytest.mark.parametrize("shape", [(0,), (1,), (7, 13), (1, 17, 7, 13), (2, 3, 1, 1), (2, 17, 61, 67)])
@pytest.mark.parametrize("qt", [np.uint8, np.int8])
@pytest.mark.parametrize("same", [True, False])
@pytest.mark.parametrize("s", [0.25, 0.0237])
def test_quantize_dequantize_is_the_pair(shape, qt, same, s):
    """quantize_dequantize (ops/cpu/quant_pair.c, pass qdq_pair's kernel)
    gives the bits of ONNX Runtime's QuantizeLinear then DequantizeLinear:
    ties to even (exact ones with scale 0.25), saturation at both ends, NaN
    and infinities, with the DequantizeLinear's scale and zero point the
    same or others; in place too (y over x); on 2 threads (the last
    shape splits)."""
    from dvmop import run1
    lo, hi = qrange(qt)
    s = np.float32(s)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    special = np.array([0.5 * s, 1.5 * s, -2.5 * s, -0.5 * s, 200.5 * s, -200.5 * s, np.nan, np.inf, -np.inf,
                        1e30, -1e30, 0.0], np.float32)
    k = min(x.size, special.size)
    x.flat[:k] = special[:k]
    z = qt(lo + 100 if qt == np.uint8 else -3)
    s2, z2 = (s, z) if same else (np.float32(0.31), qt(lo + 7))
    want = ort_quant_then_dequant(x, np.asarray(s), np.asarray(z), np.asarray(s2), np.asarray(z2))
    for inplace in (None, 0):
        got = run1("quantize_dequantize", [x, s, z, s2, z2], outputs=[(np.float32, shape)], inplace=inplace,
                   threads=2)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_quantize_dequantize_refused():
    """Its operands' dtypes and counts, as errors that name them."""
    from dvmop import DvmError, run1
    x, s = np.zeros((2, 3), np.float32), np.float32(1)
    with pytest.raises(DvmError, match=r"quantize_dequantize: the zero points must be both u8 or both i8, got u8 and i8"):
        run1("quantize_dequantize", [x, s, np.uint8(0), s, np.int8(0)], outputs=[(np.float32, (2, 3))])
    with pytest.raises(DvmError, match=r"quantize_dequantize: the scales and zero points must have one element each"):
        run1("quantize_dequantize", [x, np.ones(2, np.float32), np.uint8(0), s, np.uint8(0)],
             outputs=[(np.float32, (2, 3))])
    with pytest.raises(DvmError, match=r"quantize_dequantize: x, the scales and y must be f32, got f32, f32, f32 and u8"):
        run1("quantize_dequantize", [x, s, np.uint8(0), s, np.uint8(0)], outputs=[(np.uint8, (2, 3))])
    with pytest.raises(DvmError, match=r"quantize_dequantize: takes 5 inputs and 1 output, got 3 and 1"):
        run1("quantize_dequantize", [x, s, np.uint8(0)], outputs=[(np.float32, (2, 3))])
