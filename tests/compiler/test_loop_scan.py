"""Loop and Scan scan outputs (lower_control.c's loop_put_scans and lw_put_scan):
each iteration's value written in place at its row of an accumulator (a Loop's
grows geometrically, a Scan's is made once); compared with ONNX Runtime for
counted loops, loops that stop on their condition, thousands of iterations,
several dtypes, and empty scans (no iteration)."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import compile_onnx, dvm, try_run  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.onnxmodel import vi  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
rng = np.random.default_rng(3)


def loop_model(tmp, stop_after):
    """acc += x each iteration; scans acc*it (f32) and Shape(acc) (i64);
    the body's condition is it + 1 < stop_after."""
    body = helper.make_graph([
        helper.make_node("Add", ["acc", "x"], ["acc2"], name="accum"),
        helper.make_node("Cast", ["it"], ["itf"], to=F, name="cast"),
        helper.make_node("Mul", ["acc2", "itf"], ["sc"], name="scale"),
        helper.make_node("Shape", ["acc2"], ["shp"], name="shape"),
        helper.make_node("Add", ["it", "one"], ["next"], name="next"),
        helper.make_node("Less", ["next", "stop"], ["cout"], name="less")],
        "body", [vi("it", I64, []), vi("cin", B, []), vi("acc", F)],
        [vi("cout", B, []), vi("acc2", F), vi("sc", F), vi("shp", I64)])
    g = helper.make_graph([helper.make_node("Loop", ["n", "c", "x"], ["final", "scan", "scan2"], body=body,
                                            name="loop")], "g", [vi("x", F, ["a", "b"]), vi("n", I64, [])],
                          [vi("final", F), vi("scan", F), vi("scan2", I64)],
                          [numpy_helper.from_array(np.array(True), "c"), numpy_helper.from_array(np.int64(1), "one"),
                           numpy_helper.from_array(np.int64(stop_after), "stop")])
    path = str(tmp / f"loop{stop_after}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path, compile_onnx(path)


def run_loop(mod, x, n):
    """(dvm run's process, the loop model's three outputs or None)."""
    return try_run(mod, {"x": x, "n": np.array(n, np.int64)}, 3)


@pytest.mark.parametrize("stop_after", [1000, 4])
def test_scan_outputs_match_onnxruntime(tmp_path, stop_after):
    path, mod = loop_model(tmp_path, stop_after)
    sess = ort_session(path)
    for shape, n in [((1, 1), 1), ((3, 5), 2), ((2, 17), 7), ((4, 3), 13)]:
        x = rng.standard_normal(shape).astype(np.float32)
        want = sess.run(None, {"x": x, "n": np.array(n, np.int64)})
        p, got = run_loop(mod, x, n)
        assert p.returncode == 0, p.stderr
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape, (shape, n, g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5)


def test_empty_scan_of_loop_carried_shape(tmp_path):
    # No iteration: the scan outputs are empty tensors of the body values'
    # dtypes. The body's acc2 keeps the loop-carried x's shape [a, b], which
    # inference knows, so dvm gives [0, a, b] = [0, 2, 3] where ONNX Runtime
    # gives [0]; Shape(acc2) is [2] per iteration: dvm [0, 2], ORT [0, 0].
    path, mod = loop_model(tmp_path, 1000)
    sess = ort_session(path)
    x = np.ones((2, 3), np.float32)
    want = sess.run(None, {"x": x, "n": np.array(0, np.int64)})
    p, got = run_loop(mod, x, 0)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].shape == (0, 2, 3) and want[1].size == 0 and got[1].dtype == np.float32
    assert got[2].shape == (0, 2) and got[2].dtype == np.int64 and want[2].size == 0


def test_empty_scan_of_known_shape(tmp_path):
    # The body's scan value is [3, b] (b the outer input's dim): with no
    # iteration the output is [0, 3, b]. ONNX Runtime makes [0, 3, 0] (a
    # symbolic dim of the body's inferred shape becomes 0): as empty.
    body = helper.make_graph([
        helper.make_node("Identity", ["cin"], ["cout"], name="cond"),
        helper.make_node("Identity", ["y"], ["sc"], name="same"),
        helper.make_node("Cast", ["sc"], ["sci"], to=I64, name="cast")],
        "body", [vi("it", I64, []), vi("cin", B, [])], [vi("cout", B, []), vi("sc", F), vi("sci", I64)])
    g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"], name="neg"),
                           helper.make_node("Loop", ["n", "c"], ["s", "si"], body=body, name="loop")], "g",
                          [vi("x", F, [3, "b"]), vi("n", I64, [])], [vi("s", F), vi("si", I64)],
                          [numpy_helper.from_array(np.array(True), "c")])
    path = str(tmp_path / "known.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    mod = path.replace(".onnx", ".dvmb")
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    sess = ort_session(path)
    for n in (0, 1, 3):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        q, got = try_run(mod, {"x": x, "n": np.array(n, np.int64)}, 2)
        assert q.returncode == 0, q.stderr
        assert got[0].shape == (n, 3, 5) and got[0].dtype == np.float32 and got[1].dtype == np.int64
        for g, w in zip(got, sess.run(None, {"x": x, "n": np.array(n, np.int64)}), strict=True):
            assert g.shape == (w.shape if n else (0, 3, 5)) and w.size == g.size, (n, g.shape, w.shape)
            np.testing.assert_array_equal(g.ravel(), w.ravel())


def test_loop_and_if_results_keep_their_body_dtypes(tmp_path):
    """Issue 18: a Loop's outputs took its trip count's dtype (i64), so an f32 Loop
    result feeding Mul/Softmax/ReduceSum failed at run time; an If's took its
    condition's. Both come from the bodies now; checked against ONNX Runtime and in
    `dvm inspect`."""
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]),
                              helper.make_node("Identity", ["cin"], ["cout"])],
                             "body", [vi("it", I64, []), vi("cin", B, []), vi("acc", F)],
                             [vi("cout", B, []), vi("acc2", F)])
    then_g = helper.make_graph([helper.make_node("Neg", ["s"], ["t"])], "then", [], [vi("t", F)])
    else_g = helper.make_graph([helper.make_node("Abs", ["s"], ["e"])], "else", [], [vi("e", F)])
    nodes = [helper.make_node("Loop", ["n", "c", "x"], ["acc_final"], body=body, name="loop"),
             helper.make_node("Mul", ["acc_final", "x"], ["m"]),
             helper.make_node("Softmax", ["m"], ["s"], axis=-1),
             helper.make_node("ReduceSum", ["s"], ["rs"], keepdims=0),
             helper.make_node("Greater", ["rs", "zero"], ["pos"]),
             helper.make_node("If", ["pos"], ["branch"], then_branch=then_g, else_branch=else_g, name="if"),
             helper.make_node("Add", ["branch", "s"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("x", F, ["a", "b"]), vi("n", I64, [])], [vi("y", F), vi("acc_final", F)],
                          [numpy_helper.from_array(np.array(True), "c"),
                           numpy_helper.from_array(np.float32(0), "zero")])
    path, untyped = str(tmp_path / "dtypes.onnx"), str(tmp_path / "untyped.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    # dvm is given the graph output "acc_final" without its dtype (ORT refuses that)
    g.output[1].type.tensor_type.elem_type = 0
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), untyped)
    mod = str(tmp_path / "dtypes.dvmb")
    p = dvm("compile", untyped, "-o", mod)
    assert p.returncode == 0, p.stderr
    p = dvm("inspect", mod)
    assert "output acc_final: tensor f32" in p.stdout, p.stdout
    x = rng.standard_normal((3, 4)).astype(np.float32)
    want = ort_session(path).run(None, {"x": x, "n": np.array(3, np.int64)})
    p, outs = try_run(mod, {"x": x, "n": np.array(3, np.int64)}, 2)
    assert p.returncode == 0, p.stderr
    for got, w in zip(outs, want, strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cond_shape", [[], [1], [1, 1], [1, 1, 1], [2, 1]])
def test_if_condition_of_one_element_any_rank(tmp_path, cond_shape):
    """An If's condition is one element of any rank (ONNX Runtime runs bool[1, 1]);
    two elements are an error that says how many there are."""
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", F)])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", F)])
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    g = helper.make_graph([helper.make_node("ReduceSum", ["c", "axes"], ["s"], keepdims=1),
                           helper.make_node("Greater", ["s", "zero"], ["pos"]),
                           helper.make_node("If", ["pos"], ["y"], then_branch=then_g, else_branch=else_g, name="if")],
                          "g", [vi("x", F, ["a", "b"]), vi("c", F, cond_shape + [3])], [vi("y", F)],
                          [axes, numpy_helper.from_array(np.float32(0), "zero")])
    path, mod = str(tmp_path / "if.onnx"), str(tmp_path / "if.dvmb")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    x = rng.standard_normal((3, 5)).astype(np.float32)
    for sign in (1, -1):
        c = np.full(cond_shape + [3], sign, np.float32)
        p, outs = try_run(mod, {"x": x, "c": c})
        if int(np.prod(cond_shape)) != 1:
            assert p.returncode != 0 and "1 element is needed, got 2" in p.stderr, p.stderr
            continue
        assert p.returncode == 0, p.stderr
        want = ort_session(path).run(None, {"x": x, "c": c})[0]
        np.testing.assert_array_equal(outs[0], want)


# ---- Scan (lower_scan.c): a bytecode loop over its body, compared with NumPy and ONNX Runtime ----

def scan_model(tmp, opset=17, **attrs):
    """Two states (s: [a, b], swapped with w each step), two scan inputs
    (x: [T, a, b] on axis 0, z: [a, b, T] on axis 2 unless attrs say), two
    scan outputs (s's running value, and x_t - z_t)."""
    body = helper.make_graph([
        helper.make_node("Mul", ["xt", "zt"], ["p"]),
        helper.make_node("Add", ["s", "p"], ["s2"]),
        helper.make_node("Identity", ["w"], ["s_next"]),
        helper.make_node("Identity", ["s2"], ["y"]),
        helper.make_node("Sub", ["xt", "zt"], ["d"])],
        "body", [vi("s", F), vi("w", F), vi("xt", F), vi("zt", F)],
        [vi("s_next", F), vi("s2", F), vi("y", F), vi("d", F)])
    if opset == 8:
        ins, xs = ["", "s0", "w0", "x", "z"], [vi("s0", F, ["n", "a", "b"]), vi("w0", F, ["n", "a", "b"]),
                                                vi("x", F, ["n", "T", "a", "b"]), vi("z", F, ["n", "T", "a", "b"])]
    else:
        axes = attrs.get("scan_input_axes", [0, 0])
        shapes = []
        for ax in axes:
            dims = ["a", "b"]
            dims.insert(ax % 3, "T")
            shapes.append(dims)
        ins, xs = ["s0", "w0", "x", "z"], [vi("s0", F, ["a", "b"]), vi("w0", F, ["a", "b"]), vi("x", F, shapes[0]),
                                           vi("z", F, shapes[1])]
    g = helper.make_graph([helper.make_node("Scan", ins, ["sf", "wf", "y1", "y2"], body=body, num_scan_inputs=2,
                                            name="scan", **attrs)], "g", xs,
                          [vi("sf", F), vi("wf", F), vi("y1", F), vi("y2", F)])
    path = str(tmp / f"scan{opset}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    mod = path.replace(".onnx", ".dvmb")
    p = dvm("compile", path, "-o", mod)
    return path, mod, p


def scan_ref(s, w, x, z, in_axes=(0, 0), in_dirs=(0, 0), out_axes=(0, 0), out_dirs=(0, 0)):
    """scan_model's Scan in NumPy."""
    xs, zs = np.moveaxis(x, in_axes[0], 0), np.moveaxis(z, in_axes[1], 0)
    xs, zs = xs[::-1] if in_dirs[0] else xs, zs[::-1] if in_dirs[1] else zs
    ys = [[], []]
    for xt, zt in zip(xs, zs):
        s2 = s + xt * zt
        ys[0].append(s2)
        ys[1].append(xt - zt)
        s, w = w, s2
    outs = [s, w]
    for k in range(2):
        y = np.stack(ys[k]) if ys[k] else np.zeros((0,) + s.shape, np.float32)
        outs.append(np.moveaxis(y[::-1] if out_dirs[k] else y, 0, out_axes[k] % 3))
    return outs


def check_f32(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == np.float32, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


SCAN_ATTRS = [
    {},
    dict(scan_input_axes=[0, 2], scan_input_directions=[0, 1], scan_output_axes=[0, -1],
         scan_output_directions=[1, 0]),
    dict(scan_input_axes=[-2, -1], scan_input_directions=[1, 1], scan_output_axes=[2, 1],
         scan_output_directions=[1, 1]),
]


def ref_args(attrs):
    return {"in_axes": attrs.get("scan_input_axes", [0, 0]), "in_dirs": attrs.get("scan_input_directions", [0, 0]),
            "out_axes": attrs.get("scan_output_axes", [0, 0]), "out_dirs": attrs.get("scan_output_directions", [0, 0])}


def scan_feeds(T, a, b, attrs):
    shapes = []
    for ax in attrs.get("scan_input_axes", [0, 0]):
        dims = [a, b]
        dims.insert(ax % 3, T)
        shapes.append(dims)
    return {"s0": rng.standard_normal((a, b)).astype(np.float32), "w0": rng.standard_normal((a, b)).astype(np.float32),
            "x": rng.standard_normal(shapes[0]).astype(np.float32), "z": rng.standard_normal(shapes[1]).astype(np.float32)}


@pytest.mark.parametrize("attrs", SCAN_ATTRS)
def test_scan_axes_and_directions(tmp_path, attrs):
    # One .dvmb for every length and shape: lengths 1 and primes, dims of 1.
    path, mod, p = scan_model(tmp_path, **attrs)
    assert p.returncode == 0, p.stderr
    sess = ort_session(path)
    for T, a, b in [(1, 1, 1), (2, 3, 5), (7, 1, 13), (13, 2, 3)]:
        feeds = scan_feeds(T, a, b, attrs)
        q, got = try_run(mod, feeds, 4)
        assert q.returncode == 0, q.stderr
        check_f32(got, scan_ref(*feeds.values(), **ref_args(attrs)))
        check_f32(got, sess.run(None, feeds))


@pytest.mark.parametrize("attrs", SCAN_ATTRS)
def test_scan_of_zero_length(tmp_path, attrs):
    # No iteration: the states come back unchanged, the scan outputs are
    # empty with the body values' other dims at their axes. (ONNX Runtime
    # 1.32 dies of a floating-point exception on this model: NumPy only.)
    path, mod, p = scan_model(tmp_path, **attrs)
    assert p.returncode == 0, p.stderr
    feeds = scan_feeds(0, 2, 3, attrs)
    q, got = try_run(mod, feeds, 4)
    assert q.returncode == 0, q.stderr
    check_f32(got, scan_ref(*feeds.values(), **ref_args(attrs)))


def test_scan_inputs_of_different_lengths_fail(tmp_path):
    path, mod, p = scan_model(tmp_path)
    m = onnx.load(path)
    m.graph.input[3].type.tensor_type.shape.dim[0].dim_param = "U"  # z's length, not x's T
    onnx.save(m, path)
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    feeds = {"s0": np.ones((2, 3), np.float32), "w0": np.ones((2, 3), np.float32),
             "x": np.ones((4, 2, 3), np.float32), "z": np.ones((5, 2, 3), np.float32)}
    q, _ = try_run(mod, feeds, 4)
    assert q.returncode != 0 and 'node "scan" (Scan): scan input 1 has 5 along its axis 0, scan input 0 has 4' in q.stderr


@pytest.mark.parametrize("directions", [None, [0, 1]])
def test_scan8_batches(tmp_path, directions):
    # Opset 8: a batch axis 0 on every input and output; the scan runs per
    # row. (ONNX Runtime 1.32 returns uninitialized memory for a reverse
    # direction here: compared with it only forward.)
    path, mod, p = scan_model(tmp_path, opset=8, **({"directions": directions} if directions else {}))
    assert p.returncode == 0, p.stderr
    sess = ort_session(path)
    for n, T, a, b in [(1, 1, 1, 1), (3, 5, 2, 7), (2, 0, 2, 3)]:
        feeds = {"s0": rng.standard_normal((n, a, b)).astype(np.float32),
                 "w0": rng.standard_normal((n, a, b)).astype(np.float32),
                 "x": rng.standard_normal((n, T, a, b)).astype(np.float32),
                 "z": rng.standard_normal((n, T, a, b)).astype(np.float32)}
        q, got = try_run(mod, feeds, 4)
        assert q.returncode == 0, q.stderr
        rows = [scan_ref(*(v[i] for v in feeds.values()), in_dirs=directions or (0, 0)) for i in range(n)]
        check_f32(got, [np.stack([r[k] for r in rows]) for k in range(4)])
        if not directions and T:
            check_f32(got, sess.run(None, feeds))


def scan8_with_lens(tmp_path, directions=None):
    path, mod, p = scan_model(tmp_path, opset=8, **({"directions": directions} if directions else {}))
    m = onnx.load(path)
    m.graph.node[0].input[0] = "lens"
    m.graph.input.append(vi("lens", I64, ["m"]))  # not "n": the count is the kernel's to check
    onnx.save(m, path)
    p = dvm("compile", path, "-o", mod)
    return path, mod, p


@pytest.mark.parametrize("directions", [None, [0, 1], [1, 1]])
def test_scan8_sequence_lens(tmp_path, directions):
    # Opset 8's sequence_lens: row b runs lens[b] steps (a reverse input
    # from step lens[b] - 1), its scan outputs padded with zeros to T, as
    # ONNX Runtime's Scan 8 does. Compared with NumPy on the truncated rows,
    # and with ONNX Runtime forward (see test_scan8_batches).
    path, mod, p = scan8_with_lens(tmp_path, directions)
    assert p.returncode == 0, p.stderr
    sess = ort_session(path)
    for lens, T, a, b in [([1], 1, 1, 1), ([5, 1, 3], 5, 2, 7), ([2, 7], 7, 1, 3), ([4, 4], 4, 3, 2)]:
        n = len(lens)
        feeds = {"s0": rng.standard_normal((n, a, b)).astype(np.float32),
                 "w0": rng.standard_normal((n, a, b)).astype(np.float32),
                 "x": rng.standard_normal((n, T, a, b)).astype(np.float32),
                 "z": rng.standard_normal((n, T, a, b)).astype(np.float32), "lens": np.array(lens, np.int64)}
        q, got = try_run(mod, feeds, 4)
        assert q.returncode == 0, q.stderr
        rows = []
        for i, l in enumerate(lens):
            r = scan_ref(feeds["s0"][i], feeds["w0"][i], feeds["x"][i][:l], feeds["z"][i][:l],
                         in_dirs=directions or (0, 0))
            rows.append(r[:2] + [np.concatenate([y, np.zeros((T - l,) + y.shape[1:], np.float32)]) for y in r[2:]])
        check_f32(got, [np.stack([r[k] for r in rows]) for k in range(4)])
        if not directions:
            check_f32(got, sess.run(None, feeds))


def test_scan8_sequence_lens_f16(tmp_path):
    # scan8_with_lens's model on f16 tensors (opset 8 has no bf16): the
    # padding past each row's length is f16 zeros (the fill kernel), the
    # rows NumPy's on the f16 inputs.
    path, mod, p = scan8_with_lens(tmp_path)
    m = onnx.load(path)
    for g in (m.graph, m.graph.node[0].attribute[0].g):
        for v in list(g.input) + list(g.output):
            if v.type.tensor_type.elem_type == F:
                v.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.save(m, path)
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    for lens, T, a, b in [([1], 1, 1, 1), ([5, 1, 3], 5, 2, 7), ([2, 7], 7, 1, 3)]:
        n = len(lens)
        feeds = {k: rng.standard_normal(shape).astype(np.float16)
                 for k, shape in (("s0", (n, a, b)), ("w0", (n, a, b)), ("x", (n, T, a, b)), ("z", (n, T, a, b)))}
        feeds["lens"] = np.array(lens, np.int64)
        q, got = try_run(mod, feeds, 4)
        assert q.returncode == 0, q.stderr
        f32 = {k: v.astype(np.float32) for k, v in feeds.items()}
        for i, l in enumerate(lens):
            r = scan_ref(f32["s0"][i], f32["w0"][i], f32["x"][i][:l], f32["z"][i][:l])
            for k in range(4):
                assert got[k].dtype == np.float16
                want = r[k] if k < 2 else np.concatenate([r[k], np.zeros((T - l,) + r[k].shape[1:], np.float32)])
                np.testing.assert_allclose(got[k][i].astype(np.float32), want, rtol=1e-2, atol=1e-2)
                if k >= 2:
                    assert not got[k][i][l:].any()


@pytest.mark.parametrize("lens", [[0, 2], [3, 4], [2]])
def test_scan8_bad_sequence_lens_fail(tmp_path, lens):
    # A length outside [1, T] (ONNX Runtime refuses 0 too) or a count other
    # than the batch's fails naming the node.
    path, mod, p = scan8_with_lens(tmp_path)
    assert p.returncode == 0, p.stderr
    feeds = {k: np.ones((2, 3, 2, 2) if k in "xz" else (2, 2, 2), np.float32) for k in ("s0", "w0", "x", "z")}
    feeds["lens"] = np.array(lens, np.int64)
    q, _ = try_run(mod, feeds, 4)
    assert q.returncode != 0 and 'node "scan" (Scan, opset 8): sequence_lens' in q.stderr, q.stderr


@pytest.mark.parametrize("op", ["Loop", "Scan"])
def test_carried_values_passed_on_swapped(tmp_path, op):
    """A body whose outputs are its inputs swapped (a, b -> b, a): each
    carried value moves through a temporary, or the second move would read
    the first one's result. (ONNX Runtime 1.32 returns zeros for the Scan
    whose body has no node: compared with it for Loop only.)"""
    carried = [vi("a", F, [2]), vi("b", F, [2])]
    if op == "Loop":
        body = helper.make_graph([helper.make_node("Identity", ["cin"], ["cout"])], "body",
                                 [vi("it", I64, []), vi("cin", B, [])] + carried,
                                 [vi("cout", B, []), vi("b", F, [2]), vi("a", F, [2])])
        node = helper.make_node("Loop", ["n", "c", "a0", "b0"], ["af", "bf"], body=body, name="loop")
        extra, inits = [vi("n", I64, [])], [numpy_helper.from_array(np.array(True), "c")]
    else:
        body = helper.make_graph([], "body", carried + [vi("xt", F, [2])], [vi("b", F, [2]), vi("a", F, [2])])
        node = helper.make_node("Scan", ["a0", "b0", "x"], ["af", "bf"], body=body, num_scan_inputs=1, name="scan")
        extra, inits = [vi("x", F, ["T", 2])], []
    g = helper.make_graph([node], "g", [vi("a0", F, [2]), vi("b0", F, [2])] + extra, [vi("af", F), vi("bf", F)], inits)
    path = str(tmp_path / "swap.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    mod = path.replace(".onnx", ".dvmb")
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    sess = ort_session(path) if op == "Loop" else None
    for steps in (1, 2, 3):
        feeds = {"a0": np.array([1, 2], np.float32), "b0": np.array([3, 4], np.float32)}
        feeds.update({"n": np.array(steps, np.int64)} if op == "Loop" else {"x": np.zeros((steps, 2), np.float32)})
        q, got = try_run(mod, feeds, 2)
        assert q.returncode == 0, q.stderr
        want = [feeds["b0"], feeds["a0"]] if steps % 2 else [feeds["a0"], feeds["b0"]]
        check_f32(got, want)
        if op == "Loop":
            check_f32(got, sess.run(None, feeds))


# ---- many iterations: scan outputs written in place (lw_put_scan, loop_put_scans) ----

DTYPES = [(TensorProto.FLOAT16, np.float16), (TensorProto.DOUBLE, np.float64), (TensorProto.INT8, np.int8),
          (TensorProto.UINT8, np.uint8), (TensorProto.INT32, np.int32), (TensorProto.BOOL, np.bool_)]


def dtype_loop_model(tmp, trip_count):
    """x [3] carried, x + it each iteration; scans x2 (f32), it (i64 scalar)
    and x2 cast to each of DTYPES; the body's condition is it + 1 < stop.
    trip_count False: no trip count (an 'infinite' loop the condition ends)."""
    nodes = [helper.make_node("Cast", ["it"], ["itf"], to=F),
             helper.make_node("Add", ["x", "itf"], ["x2"]),
             helper.make_node("Identity", ["it"], ["its"]),
             helper.make_node("Add", ["it", "one"], ["next"]),
             helper.make_node("Less", ["next", "stop"], ["cout"])]
    nodes += [helper.make_node("Cast", ["x2"], [f"c{k}"], to=t) for k, (t, _) in enumerate(DTYPES)]
    body = helper.make_graph(nodes, "body", [vi("it", I64, []), vi("cin", B, []), vi("x", F, [3])],
                             [vi("cout", B, []), vi("x2", F, [3]), vi("y", F, [3]), vi("its", I64, [])]
                             + [vi(f"c{k}", t, [3]) for k, (t, _) in enumerate(DTYPES)])
    body.node.append(helper.make_node("Identity", ["x2"], ["y"]))
    outs = ["xf", "ys", "its_s"] + [f"cs{k}" for k in range(len(DTYPES))]
    loop = helper.make_node("Loop", ["n" if trip_count else "", "c", "x0"], outs, body=body, name="loop")
    ins = [vi("x0", F, [3]), vi("stop", I64, [])] + ([vi("n", I64, [])] if trip_count else [])
    g = helper.make_graph([loop], "g", ins, [vi("xf", F), vi("ys", F), vi("its_s", I64)]
                          + [vi(f"cs{k}", t) for k, (t, _) in enumerate(DTYPES)],
                          [numpy_helper.from_array(np.array(True), "c"), numpy_helper.from_array(np.int64(1), "one")])
    path = str(tmp / f"dtypes{int(trip_count)}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    mod = path.replace(".onnx", ".dvmb")
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    return path, mod


@pytest.mark.parametrize("trip_count", [True, False])
def test_loop_scans_many_iterations_and_dtypes(tmp_path, trip_count):
    # Counts across the accumulators' growth (16, 32, ... rows), thousands
    # of iterations, the condition stopping before the trip count (the
    # accumulator cut to the count), no trip count at all (INT64_MAX), and
    # every scan output dtype bit for bit as ONNX Runtime makes it.
    path, mod = dtype_loop_model(tmp_path, trip_count)
    sess = ort_session(path)
    big = 1 << 40
    cases = [(1, big), (15, big), (16, big), (17, big), (33, 20), (4999, big), (5000, 2501)] if trip_count else \
        [(None, 1), (None, 16), (None, 17), (None, 3001)]
    nout = 3 + len(DTYPES)
    for n, stop in cases:
        feeds = {"x0": rng.standard_normal(3).astype(np.float32) * 100, "stop": np.array(stop, np.int64)}
        if n is not None:
            feeds["n"] = np.array(n, np.int64)
        q, got = try_run(mod, feeds, nout)
        assert q.returncode == 0, q.stderr
        want = sess.run(None, feeds)
        count = min(n if n is not None else big, stop)
        assert got[1].shape == (count, 3) and got[2].shape == (count,), (n, stop, got[1].shape)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (n, stop, g.dtype, w.dtype, g.shape, w.shape)
            np.testing.assert_array_equal(g, w)


def test_loop_scans_of_no_iteration_keep_dtypes(tmp_path):
    path, mod = dtype_loop_model(tmp_path, True)
    feeds = {"x0": np.ones(3, np.float32), "stop": np.array(5, np.int64), "n": np.array(0, np.int64)}
    q, got = try_run(mod, feeds, 3 + len(DTYPES))
    assert q.returncode == 0, q.stderr
    assert got[1].shape == (0, 3) and got[2].shape == (0,) and got[2].dtype == np.int64
    for g, (_, dt) in zip(got[3:], DTYPES):
        assert g.shape == (0, 3) and g.dtype == dt


@pytest.mark.parametrize("attrs", SCAN_ATTRS)
def test_scan_many_steps(tmp_path, attrs):
    # 3001 steps, reverse directions and scan_output_axes other than 0: each
    # slice lands at its place in the output made on step 0.
    path, mod, p = scan_model(tmp_path, **attrs)
    assert p.returncode == 0, p.stderr
    feeds = scan_feeds(3001, 2, 3, attrs)
    q, got = try_run(mod, feeds, 4)
    assert q.returncode == 0, q.stderr
    check_f32(got, scan_ref(*feeds.values(), **ref_args(attrs)))
    check_f32(got, ort_session(path).run(None, feeds))


@pytest.mark.parametrize("op", ["Loop", "Scan"])
def test_scan_output_changing_shape_fails(tmp_path, op):
    # ONNX wants one shape for a scan output on every iteration: a body whose
    # scan value is Range(0, k) with k changing fails at run time naming the
    # node and both shapes, and writes nothing out of bounds.
    rng_nodes = [helper.make_node("Range", ["zero", "k", "one"], ["r"], name="range")]
    if op == "Loop":
        body = helper.make_graph([helper.make_node("Add", ["it", "one"], ["k"])] + rng_nodes
                                 + [helper.make_node("Identity", ["cin"], ["cout"])], "body",
                                 [vi("it", I64, []), vi("cin", B, [])], [vi("cout", B, []), vi("r", I64)])
        node = helper.make_node("Loop", ["n", "c"], ["y"], body=body, name="growing")
        ins, feeds = [vi("n", I64, [])], {"n": np.array(3, np.int64)}
    else:
        body = helper.make_graph([helper.make_node("Identity", ["xt"], ["k"])] + rng_nodes, "body",
                                 [vi("xt", I64, [])], [vi("r", I64)])
        node = helper.make_node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1, name="growing")
        ins, feeds = [vi("x", I64, ["T"])], {"x": np.array([2, 2, 5], np.int64)}
    g = helper.make_graph([node], "g", ins, [vi("y", I64)],
                          [numpy_helper.from_array(np.array(True), "c"), numpy_helper.from_array(np.int64(0), "zero"),
                           numpy_helper.from_array(np.int64(1), "one")])
    path = str(tmp_path / "growing.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    mod = path.replace(".onnx", ".dvmb")
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    q, _ = try_run(mod, feeds, 1)
    assert q.returncode != 0, q.stderr
    want = "input [1,2] does not fit output [3,1]" if op == "Loop" else "input [1,5] does not fit output [3,2]"
    assert 'node "growing"' in q.stderr and want in q.stderr and "slices must have one shape" in q.stderr, q.stderr


# ---- scan outputs nothing reads: not accumulated ----

def unread_model(tmp, op, big, opset=17):
    """A Loop or Scan with state s [N] and two scan outputs: sum(s) [1],
    read as a graph output, and 2 s (Loop) or s x (Scan) [N], whose node
    output is `big`: "output" (a graph output), "unread" (named, read by
    nothing), "omitted" (""), or "branch" (read only inside an If)."""
    one, two = numpy_helper.from_array(np.float32(1), "one"), numpy_helper.from_array(np.float32(2), "two")
    if op == "Loop":
        body = helper.make_graph([helper.make_node("Add", ["s", "one"], ["s2"]),
                                  helper.make_node("Identity", ["cin"], ["cout"]),
                                  helper.make_node("ReduceSum", ["s2"], ["small"], keepdims=1),
                                  helper.make_node("Mul", ["s2", "two"], ["y"])], "body",
                                 [vi("i", I64, []), vi("cin", B, []), vi("s", F, ["N"])],
                                 [vi("cout", B, []), vi("s2", F, ["N"]), vi("small", F, [1]), vi("y", F, ["N"])],
                                 [one, two])
        ins, graph_in = ["T", "", "s0"], [vi("T", I64, []), vi("s0", F, ["N"])]
        attrs = {}
    else:
        small = (helper.make_node("ReduceSum", ["s2"], ["small"], keepdims=1) if opset >= 11 else
                 helper.make_node("Sub", ["s2", "x"], ["small"]))  # opset 8 has ReduceSum's older form
        body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), small,
                                  helper.make_node("Mul", ["s2", "x"], ["y"])], "body",
                                 [vi("s", F, ["N"]), vi("x", F, ["N"])],
                                 [vi("s2", F, ["N"]), vi("small", F), vi("y", F, ["N"])])
        ins, graph_in = ["s0", "xs"], [vi("s0", F, ["N"]), vi("xs", F, ["T", "N"])]
        attrs = {"num_scan_inputs": 1}
        if opset == 8:
            ins = [""] + ins
            graph_in = [vi("s0", F, ["b", "N"]), vi("xs", F, ["b", "T", "N"])]
    nodes = [helper.make_node(op, ins, ["sf", "ys", "" if big == "omitted" else "yb"], body=body, name="loop", **attrs)]
    outs = [vi("sf", F), vi("ys", F)]
    inits = []
    if big == "output":
        outs.append(vi("yb", F))
    if big == "branch":  # If(true) { ReduceMax(yb) } else { 0 }
        then = helper.make_graph([helper.make_node("ReduceMax", ["yb"], ["m"], keepdims=0)], "then", [], [vi("m", F)])
        other = helper.make_graph([helper.make_node("Identity", ["zero"], ["m0"])], "else", [], [vi("m0", F)])
        nodes.append(helper.make_node("If", ["c"], ["m"], then_branch=then, else_branch=other))
        outs.append(vi("m", F))
        inits += [numpy_helper.from_array(np.array(True), "c"), numpy_helper.from_array(np.float32(0), "zero")]
    g = helper.make_graph(nodes, "g", graph_in, outs, inits)
    path = str(tmp / f"{op}_{big}_{opset}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8), path)
    mod = path.replace(".onnx", ".dvmb")
    p = dvm("compile", path, "-o", mod)
    assert p.returncode == 0, p.stderr
    return path, mod, len(outs)


def peak_bytes(mod, op, n, t, opset):
    args = ["--dim", f"N={n}", "--dim", f"T={t}", "--dim", "b=2", "--iters", "2", "--warmup", "1", "--threads", "1"]
    if op == "Loop":
        args += ["--shape", "T=scalar", "--range", f"T={t}..{t}"]
    p = dvm("bench", mod, *args, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])["peak_bytes"]


@pytest.mark.parametrize("op,opset", [("Loop", 17), ("Scan", 17), ("Scan", 8)])
def test_unread_scan_output_not_accumulated(tmp_path, op, opset):
    # A scan output read by nothing (named or omitted) leaves the other
    # outputs ONNX Runtime's (on the model that outputs it: ONNX Runtime
    # 1.32 refuses an omitted Scan output) and costs no memory: the peak
    # pool is smaller by at least its T x N f32 accumulator. Read only
    # inside an If branch, it is still made.
    feeds_at = []
    for t, n in [(1, 1), (7, 13), (2, 1)]:
        if op == "Loop":
            feeds_at.append({"T": np.array(t, np.int64), "s0": rng.standard_normal(n).astype(np.float32)})
        else:
            lead = (2,) if opset == 8 else ()
            feeds_at.append({"s0": rng.standard_normal(lead + (n,)).astype(np.float32),
                             "xs": rng.standard_normal(lead + (t, n)).astype(np.float32)})
    peaks, want = {}, None
    for big in ["output", "unread", "omitted"] + (["branch"] if opset >= 11 else []):  # If: opset 11 on
        path, mod, nout = unread_model(tmp_path, op, big, opset)
        if want is None:
            sess = ort_session(path)
            want = [sess.run(None, feeds) for feeds in feeds_at]
        for feeds, w in zip(feeds_at, want, strict=True):
            q, got = try_run(mod, feeds, nout)
            assert q.returncode == 0, q.stderr
            if big == "branch":  # its last output is max(yb)
                w = w[:2] + [np.max(w[2])]
            w = w[:nout]  # the models without the big output: the others'
            for g, x in zip(got, w, strict=True):
                assert g.shape == x.shape, (big, g.shape, x.shape)
                np.testing.assert_allclose(g, x, rtol=1e-5, atol=1e-5)
        peaks[big] = peak_bytes(mod, op, 20000, 50, opset)
    accumulator = 50 * 20000 * 4 * (2 if opset == 8 else 1)
    for big in ("unread", "omitted"):
        assert peaks[big] <= peaks["output"] - accumulator, peaks
    assert opset < 11 or peaks["branch"] >= peaks["output"] - accumulator // 10, peaks
