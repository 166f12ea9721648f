"""Row stitching (compiler/lower_stitch.c, the fused kernel's row programs):
a reduction over the last axis with its elementwise producers and
consumers is one fused call. Each decomposed form below is stitched (a
`fused@stitch` kernel in the module) and gives the unstitched module's
results (`--no-stitch`) and ONNX Runtime's at several shapes: row length 1,
primes, 0 rows, 0-length rows, per-row values broadcast from an input;
what must not stitch (f64, a per-row value read after the group) is left
to the per-node lowering and still right."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import compile_onnx, dvm_ok, run_module  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.onnxmodel import const, make_model, save_model  # noqa: E402

F, D64 = TensorProto.FLOAT, TensorProto.DOUBLE


def axes(name="ax"):
    return numpy_helper.from_array(np.asarray([-1], dtype=np.int64), name)


def red(op, x, y, opset):
    """op over the last axis keeping it: axes as an input from opset 18 (13 for ReduceSum)."""
    if op == "ReduceSum" and opset >= 13 or opset >= 18:
        return helper.make_node(op, [x, "ax"], [y])
    return helper.make_node(op, [x], [y], axes=[-1])


# Each form: (nodes(opset), initializers, extra inputs {name: shape suffix}), output "y".
def layernorm_moments(o):  # mean(x^2) - mean(x)^2
    return [red("ReduceMean", "x", "m", o), helper.make_node("Mul", ["x", "x"], ["xx"]),
            red("ReduceMean", "xx", "m2", o), helper.make_node("Mul", ["m", "m"], ["mm"]),
            helper.make_node("Sub", ["m2", "mm"], ["var"]), helper.make_node("Add", ["var", "eps"], ["ve"]),
            helper.make_node("Sqrt", ["ve"], ["sd"]), helper.make_node("Sub", ["x", "m"], ["d"]),
            helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "g"], ["s"]),
            helper.make_node("Add", ["s", "b"], ["y"])]


def layernorm_std(o):  # the layernorm pass's pattern (compiled with that pass off)
    return [red("ReduceMean", "x", "m", o), helper.make_node("Sub", ["x", "m"], ["d"]),
            helper.make_node("Pow", ["d", "two"], ["d2"]), red("ReduceMean", "d2", "v", o),
            helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
            helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "g"], ["s"]),
            helper.make_node("Add", ["s", "b"], ["y"])]


def l2_normalize(o):  # x / sqrt(sum(x^2) + eps)
    return [helper.make_node("Mul", ["x", "x"], ["xx"]), red("ReduceSum", "xx", "ss", o),
            helper.make_node("Add", ["ss", "eps"], ["se"]), helper.make_node("Sqrt", ["se"], ["nrm"]),
            helper.make_node("Div", ["x", "nrm"], ["y"])]


def l2_reduce_ops(o):  # ReduceL2, ReduceSumSquare and ReduceL1 as exported
    return [red("ReduceL2", "x", "l2", o), red("ReduceSumSquare", "x", "sq", o), red("ReduceL1", "x", "l1", o),
            helper.make_node("Add", ["l1", "one"], ["l1e"]), helper.make_node("Div", ["x", "l1e"], ["a"]),
            helper.make_node("Mul", ["a", "l2"], ["b2"]), helper.make_node("Add", ["sq", "one"], ["sqe"]),
            helper.make_node("Div", ["b2", "sqe"], ["y"])]


def softmax_nodes(o):  # exp(x - max) / sum(exp(x - max))
    return [red("ReduceMax", "x", "mx", o), helper.make_node("Sub", ["x", "mx"], ["d"]),
            helper.make_node("Exp", ["d"], ["e"]), red("ReduceSum", "e", "s", o),
            helper.make_node("Div", ["e", "s"], ["y"])]


def min_range(o):  # producers before the reduction, a per-row input broadcast along the row
    return [helper.make_node("Mul", ["x", "g"], ["xg"]), helper.make_node("Add", ["xg", "b"], ["xb"]),
            red("ReduceMin", "xb", "mn", o), red("ReduceMax", "xb", "mx", o),
            helper.make_node("Sub", ["mx", "mn"], ["rg"]), helper.make_node("Add", ["rg", "r"], ["rr"]),
            helper.make_node("Sub", ["xb", "mn"], ["d"]), helper.make_node("Div", ["d", "rr"], ["y"])]


def f_normalize(o):  # PyTorch's F.normalize(x, dim=-1) as exported: ReduceL2, Clip, Shape, Expand, Div
    return [red("ReduceL2", "x", "l2", o), helper.make_node("Clip", ["l2", "tiny", ""], ["cl"]),
            helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Expand", ["cl", "shp"], ["ex"]),
            helper.make_node("Div", ["x", "ex"], ["d"]), helper.make_node("Mul", ["d", "g"], ["y"])]


FORMS = {"f_normalize": f_normalize, "layernorm_moments": layernorm_moments, "layernorm_std": layernorm_std, "l2_normalize": l2_normalize,
         "l2_reduce_ops": l2_reduce_ops, "softmax": softmax_nodes, "min_range": min_range}


def write(tmp, nodes, d, extra_inits=(), outputs=("y",), dtype=F, per_row_input=False, opset=13):
    npdt = np.float32 if dtype == F else np.float64
    inits = [const("eps", 1e-5, npdt), const("two", 2.0, npdt), const("one", 1.0, npdt), const("tiny", 1e-12, npdt),
             axes(), const("g", np.linspace(0.5, 1.5, d), npdt), const("b", np.linspace(-1, 1, d), npdt), *extra_inits]
    used = {i for n in nodes for i in n.input}
    inits = [t for t in inits if t.name in used]
    ins = [helper.make_tensor_value_info("x", dtype, ["batch", "seq", d])]
    if per_row_input:
        ins.append(helper.make_tensor_value_info("r", dtype, ["batch", "seq", 1]))
    m = make_model(nodes, ins, [(o, dtype, None) for o in outputs], inits, opset=opset, ir_version=8)
    return save_model(m, tmp / "m.onnx")


def stitched(dvmb):
    text = dvm_ok("disasm", dvmb).stdout
    return sum(1 for ln in text.splitlines() if "fused@stitch" in ln and "invoke" in ln)


def check_stitched(tmp, path, shapes, nout=1, per_row_input=False, npdt=np.float32, want_stitched=1, extra=(),
          threads=None):
    on, off = str(tmp / "on.dvmb"), str(tmp / "off.dvmb")
    compile_onnx(path, *extra, out=on)
    compile_onnx(path, "--no-stitch", *extra, out=off)
    assert stitched(off) == 0
    got = stitched(on)
    assert want_stitched is None or (got >= 1 if want_stitched else got == 0), got
    sess = ort_session(path)
    rng = np.random.default_rng(3)
    for shape in shapes:
        feeds = {"x": rng.standard_normal(shape).astype(npdt)}
        if per_row_input:
            feeds["r"] = (rng.random(shape[:-1] + (1,)) + 0.5).astype(npdt)
        a, b = run_module(on, feeds, nout, threads=threads), run_module(off, feeds, nout, threads=threads)
        w = sess.run(None, feeds)
        for x, y, z in zip(a, b, w, strict=True):
            assert x.shape == y.shape == z.shape, (shape, x.shape, y.shape, z.shape)
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6, err_msg=str(shape))
            np.testing.assert_allclose(x, z, rtol=1e-4, atol=1e-4, err_msg=str(shape))
    return got


# row lengths 1, 2 (a prime), 13, 24, 769 (a prime past a block of the
# kernel's rows), and 0 rows
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("d", [1, 13, 24, 769])
def test_forms(tmp_path, form, d):
    path = write(tmp_path, FORMS[form](13), d, per_row_input=form == "min_range")
    extra = ("--disable", "layernorm", "--disable", "rmsnorm") if form.startswith("layernorm") else ()
    shapes = [(1, 1, d), (1, 7, d), (3, 13, d), (0, 5, d), (2, 67, d)]
    check_stitched(tmp_path, path, shapes, per_row_input=form == "min_range", extra=extra)


@pytest.mark.parametrize("form", ["softmax", "layernorm_std"])
def test_opset18_threads(tmp_path, form):
    """axes as an input (opset 18), and the rows split across threads."""
    path = write(tmp_path, FORMS[form](18), 24, opset=18)
    check_stitched(tmp_path, path, [(4, 1000, 24), (1, 3, 24)], extra=("--disable", "layernorm"), threads=2)


def test_long_rows(tmp_path):
    """rows past the thread's stack scratch: the registers on the heap."""
    path = write(tmp_path, FORMS["softmax"](13), 50000)
    check_stitched(tmp_path, path, [(1, 3, 50000), (2, 1, 50000)])


def test_empty_rows(tmp_path):
    """0-length rows: ReduceSum of nothing is 0, and the outputs are empty."""
    path = write(tmp_path, FORMS["l2_normalize"](13), 0)
    check_stitched(tmp_path, path, [(2, 3, 0)])


def test_per_row_value_read_after(tmp_path):
    """the mean is also a graph output: it leaves the group, which is then
    not stitched (a row program's outputs are rows), and all is right."""
    nodes = layernorm_std(13)
    path = write(tmp_path, nodes, 24, outputs=("y", "m"))
    check_stitched(tmp_path, path, [(1, 7, 24), (2, 3, 24)], nout=2, extra=("--disable", "layernorm"), want_stitched=0)


@pytest.mark.parametrize("reader", ["output", "sum"])
@pytest.mark.parametrize("form", ["softmax", "layernorm_std", "l2_normalize"])
def test_extra_reader(tmp_path, form, reader):
    """each value of the group read once more (as a graph output, or by a
    ReduceSum after the group): stitched or not, the results are the
    unstitched module's and ONNX Runtime's."""
    nodes = FORMS[form](13)
    for target in [o for n in nodes for o in n.output if o != "y"]:
        extra_nodes = [] if reader == "output" else [helper.make_node("ReduceSum", [target], ["extra"], keepdims=0)]
        path = write(tmp_path, nodes + extra_nodes, 13, outputs=("y", target if reader == "output" else "extra"))
        check_stitched(tmp_path, path, [(1, 1, 13), (2, 7, 13)], nout=2, extra=("--disable", "layernorm"),
                       want_stitched=None)


def test_f64_not_stitched(tmp_path):
    path = write(tmp_path, softmax_nodes(13), 24, dtype=D64)
    check_stitched(tmp_path, path, [(1, 7, 24), (2, 3, 24)], npdt=np.float64, want_stitched=0)


def test_reduce_not_last_axis(tmp_path):
    """a reduction over another axis is not a row reduction."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1]), helper.make_node("Sub", ["x", "m"], ["y"])]
    path = write(tmp_path, nodes, 24)
    check_stitched(tmp_path, path, [(1, 7, 24), (2, 3, 24)], want_stitched=0)


@pytest.mark.parametrize("form", ["layernorm_std", "l2_normalize", "softmax"])
def test_in_place(tmp_path, form):
    """between two MatMuls: the group's input dies in it and its output is
    an intermediate, so the memory plan gives the output the input's memory
    (per-row values then stay out of the output's memory)."""
    d = 24
    rename = {"x": "h", "y": "z"}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"])] + [
        helper.make_node(n.op_type, [rename.get(i, i) for i in n.input], [rename.get(o, o) for o in n.output],
                         name=n.name, **{a.name: helper.get_attribute_value(a) for a in n.attribute})
        for n in FORMS[form](13)] + [helper.make_node("MatMul", ["z", "w"], ["y"])]
    w = const("w", np.random.default_rng(1).standard_normal((d, d)) / 4)
    path = write(tmp_path, nodes, d, extra_inits=[w])
    check_stitched(tmp_path, path, [(1, 7, d), (3, 13, d), (2, 67, d)],
                   extra=("--disable", "layernorm", "--disable", "rmsnorm"))


def test_group_norm_after_reshape(tmp_path):
    """GroupNorm as exported: Reshape to [batch, groups, rest], the
    statistics over the last axis (stitched), Reshape back, scale and
    shift per channel (an elementwise group of its own)."""
    shp = numpy_helper.from_array(np.asarray([0, 4, 48], dtype=np.int64), "gshape")
    back = numpy_helper.from_array(np.asarray([0, 8, 24], dtype=np.int64), "bshape")
    nodes = [helper.make_node("Reshape", ["x", "gshape"], ["xg"])] + [
        helper.make_node(n.op_type, [{"x": "xg"}.get(i, i) for i in n.input], list(n.output),
                         **{a.name: helper.get_attribute_value(a) for a in n.attribute})
        for n in layernorm_std(13)[:7]] + [
        helper.make_node("Reshape", ["n", "bshape"], ["nb"]), helper.make_node("Mul", ["nb", "g"], ["s"]),
        helper.make_node("Add", ["s", "b"], ["y"])]
    path = write(tmp_path, nodes, 24, extra_inits=[shp, back])
    check_stitched(tmp_path, path, [(1, 8, 24), (3, 8, 24), (0, 8, 24)],
                   extra=("--disable", "layernorm", "--disable", "rmsnorm"))


def test_cuda_target_not_stitched(tmp_path):
    """row programs have no CUDA version: --target cpu,cuda builds none."""
    path = write(tmp_path, softmax_nodes(13), 24)
    out = str(tmp_path / "cu.dvmb")
    compile_onnx(path, "--target", "cpu,cuda", out=out)
    assert stitched(out) == 0


def test_keepdims_0_not_stitched(tmp_path):
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], axes=[-1], keepdims=0),
             helper.make_node("Unsqueeze", ["m", "ax"], ["mu"]), helper.make_node("Sub", ["x", "mu"], ["y"])]
    path = write(tmp_path, nodes, 24)
    check_stitched(tmp_path, path, [(1, 7, 24), (2, 3, 24)], want_stitched=0)
