"""Data-dependent dims (inf_data_dim, compiler/infer_rule.c): the output dims of NonZero, of
TopK with a runtime k and of Range with runtime bounds are fresh symbols,
read from the output once the node has run, so the shapes after them are
arithmetic on that register (no shape function). Compared with ONNX
Runtime at awkward sizes, empty results included."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import compile_onnx, dvm  # noqa: E402
from dvmtest.compare import check_with_ort  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(5)


def data_dim_model(tmp, nodes, inputs, outputs, inits=()):
    """The model compiled: (its path, the module, --dump-ir, the disassembly)."""
    m = make_model(nodes, inputs, [(n, t, None) for n, t in outputs],
                   [numpy_helper.from_array(np.array(v), k) for k, v in inits], ir_version=8)
    path = save_model(m, tmp / "m.onnx")
    out = compile_onnx(path)
    return path, out, dvm("compile", path, "--dump-ir").stdout, dvm("disasm", out).stdout


def shapefns(disasm):
    return sorted(line.split()[1].rstrip(",") for line in disasm.splitlines() if line.split()[:1] == ["shapefn"])


def test_nonzero_count_is_a_symbol(tmp_path):
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"], name="gt"),
             helper.make_node("NonZero", ["pos"], ["nz"], name="nonzero"),
             helper.make_node("Transpose", ["nz"], ["nzt"], perm=[1, 0], name="tr"),
             helper.make_node("Gather", ["nzt", "zero_i"], ["rows"], axis=1, name="col0"),
             helper.make_node("Gather", ["x", "rows"], ["g"], axis=0, name="gather"),
             helper.make_node("Mul", ["g", "two"], ["o"], name="mul"),
             helper.make_node("Shape", ["o"], ["s"], name="shape")]
    path, mod, ir, asm = data_dim_model(tmp_path, nodes, [("x", F, ["n", "m"])], [("o", F), ("s", I64)],
                                        [("zero", np.float32(0)), ("zero_i", np.int64(0)), ("two", np.float32(2))])
    assert "%nz: i64[2, nnz0] = NonZero" in ir and "%o: f32[nnz0, m] = Mul" in ir, ir
    assert "%s: i64[2] {nnz0, m} = Shape" in ir, ir
    assert shapefns(asm) == ["nonzero"], asm  # everything after is arithmetic
    assert "= r8.shape[1]" in asm and ".result o tensor f32 [?, m]" in asm, asm
    for shape in [(1, 1), (7, 3), (13, 5), (2, 17)]:
        check_with_ort(path, mod=mod, feeds={"x": rng.standard_normal(shape).astype(np.float32)}, rtol=1e-6)
    check_with_ort(path, mod=mod, feeds={"x": -np.ones((3, 4), np.float32)}, rtol=1e-6)  # nnz0 = 0


def test_runtime_topk_and_range(tmp_path):
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, name="topk"),
             helper.make_node("Add", ["v", "v"], ["v2"], name="add"),
             helper.make_node("Range", ["lo", "hi", "one"], ["r"], name="range"),
             helper.make_node("Mul", ["r", "r"], ["r2"], name="sq")]
    path, mod, ir, asm = data_dim_model(
        tmp_path, nodes, [("x", F, ["n", "m"]), ("k", I64, [1]), ("lo", I64, []), ("hi", I64, [])],
        [("v2", F), ("i", I64), ("r2", I64)], [("one", np.int64(1))])
    assert "%v2: f32[n, k0] = Add" in ir and "%i: i64[n, k0]" in ir, ir
    assert "%r2: i64[len1] = Mul" in ir, ir
    assert shapefns(asm) == ["range", "topk"], asm
    for (n, m, k, lo, hi) in [(1, 1, 1, 0, 1), (3, 7, 5, 2, 13), (5, 17, 17, -3, 4), (2, 4, 0, 5, 5)]:
        check_with_ort(path, mod=mod, feeds={"x": rng.standard_normal((n, m)).astype(np.float32),
                                             "k": np.array([k], np.int64), "lo": np.array(lo), "hi": np.array(hi)}, rtol=1e-6)


B = TensorProto.BOOL


def test_compress_count_is_a_symbol(tmp_path):
    nodes = [helper.make_node("Greater", ["c", "zero"], ["keep"], name="gt"),
             helper.make_node("Compress", ["x", "keep"], ["y"], axis=1, name="compress"),
             helper.make_node("Compress", ["x", "keep2"], ["flat"], name="compress_flat"),
             helper.make_node("Add", ["y", "y"], ["o"], name="add")]
    path, mod, ir, asm = data_dim_model(tmp_path, nodes, [("x", F, ["n", "m"]), ("c", F, ["m"]), ("keep2", B, ["k"])],
                                        [("o", F), ("flat", F)], [("zero", np.float32(0))])
    assert "%o: f32[n, count0] = Add" in ir and "%flat: f32[count1] = Compress" in ir, ir
    assert shapefns(asm) == ["compress", "compress"], asm
    for n, m, k in [(1, 1, 1), (3, 7, 21), (5, 13, 0), (0, 4, 0), (2, 5, 3)]:
        check_with_ort(path, mod=mod, feeds={"x": rng.standard_normal((n, m)).astype(np.float32),
                                             "c": rng.standard_normal(m).astype(np.float32),
                                             "keep2": rng.random(k) < 0.5}, rtol=1e-6)
    check_with_ort(path, mod=mod, feeds={"x": np.ones((3, 4), np.float32), "c": -np.ones(4, np.float32),
                                         "keep2": np.zeros(12, bool)}, rtol=1e-6)  # nothing kept


@pytest.mark.parametrize("axis,sorted_", [(None, 1), (None, 0), (0, 1), (1, 0), (-1, 1)])
def test_unique(tmp_path, axis, sorted_):
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    nodes = [helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], name="unique", **attrs),
             helper.make_node("Mul", ["y", "y"], ["y2"], name="sq")]
    path, mod, ir, asm = data_dim_model(tmp_path, nodes, [("x", F, ["n", "m"])],
                                        [("y2", F), ("idx", I64), ("inv", I64), ("cnt", I64)])
    assert shapefns(asm) == ["unique"], asm
    for n, m in [(1, 1), (4, 3), (13, 7), (6, 2)]:
        # few distinct values, so rows, columns and elements repeat; a NaN-free -0.0 and 0.0
        x = rng.integers(-2, 2, (n, m)).astype(np.float32)
        if axis is not None:
            x = np.take(x, rng.integers(0, x.shape[axis], x.shape[axis]), axis=axis)
        check_with_ort(path, mod=mod, feeds={"x": x}, rtol=1e-6)


@pytest.mark.parametrize("center", [0, 1])
def test_nonmaxsuppression(tmp_path, center):
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"], ["sel"],
                              center_point_box=center, name="nms"),
             helper.make_node("Shape", ["sel"], ["s"], name="shape")]
    path, mod, ir, asm = data_dim_model(tmp_path, nodes, [("boxes", F, ["b", "n", 4]), ("scores", F, ["b", "c", "n"]),
                                                           ("max", I64, [1]), ("iou", F, [1]), ("score", F, [1])],
                                        [("sel", I64), ("s", I64)])
    assert "%sel: i64[selected0, 3] = NonMaxSuppression" in ir, ir
    for b, c, n, mx, iou, sc in [(1, 1, 1, 1, 0.5, 0.0), (2, 3, 7, 3, 0.3, 0.2), (3, 2, 13, 100, 0.5, -1.0),
                                  (1, 2, 0, 5, 0.5, 0.0), (2, 1, 11, 0, 0.5, 0.0), (1, 1, 17, 17, 0.0, 0.9)]:
        xy = rng.random((b, n, 2)).astype(np.float32) * 10
        wh = rng.random((b, n, 2)).astype(np.float32) * 4
        boxes = np.concatenate([xy, wh], -1) if center else np.concatenate([xy, xy + wh], -1)[..., [1, 0, 3, 2]]
        scores = rng.random((b, c, n)).astype(np.float32)
        scores[..., ::3] = 0.5  # ties: lower index first
        check_with_ort(path, mod=mod, feeds={"boxes": boxes, "scores": scores, "max": np.array([mx], np.int64),
                                             "iou": np.array([iou], np.float32), "score": np.array([sc], np.float32)}, rtol=1e-6)


def test_onehot_runtime_depth(tmp_path):
    nodes = [helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=1, name="onehot")]
    path, mod, ir, asm = data_dim_model(tmp_path, nodes, [("i", I64, ["n", "m"]), ("depth", F, [])], [("y", F)],
                                        [("values", np.array([0.5, 3.0], np.float32))])
    assert "%y: f32[n, depth0, m] = OneHot" in ir, ir
    for n, m, d in [(1, 1, 1), (3, 5, 7), (0, 2, 3), (4, 1, 13)]:
        # negative indices count from the end; out of range gives an all-off column
        check_with_ort(path, mod=mod, feeds={"i": rng.integers(-d - 2, d + 2, (n, m)).astype(np.int64),
                                             "depth": np.array(d, np.float32)}, rtol=1e-6)
