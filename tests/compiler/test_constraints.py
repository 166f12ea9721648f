"""Relations among input dims that a model's broadcasts, matrix products and
concatenations imply (infer.h):
collected by inference, shown by --dump-ir, unified when --dim ranges force
equality, and checked right after the input guards so that inputs that
cannot broadcast fail there with a message naming them, not in a kernel.
Results are compared with numpy."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.arrays import normal_f32  # noqa: E402
from dvmtest.cli import compile_onnx, dvm, try_run  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(11)
f32 = normal_f32(rng)


def relation_model(tmp, nodes, inputs, inits=(), name="m.onnx"):
    """f32 inputs (name, dims) and one output, o."""
    return save_model(make_model(nodes, [(n, F, d) for n, d in inputs], [("o", F, None)], inits), tmp / name)


def run_o(mod, **feeds):
    """(dvm run's process, output o or None)."""
    p, outs = try_run(mod, feeds)
    return p, outs and outs[0]


ADD = [helper.make_node("Add", ["x", "y"], ["z"], name="add"), helper.make_node("Relu", ["z"], ["o"], name="relu")]
ADD_IN = [("x", ["batch", "seq"]), ("y", ["batch", "seq2"])]


def test_broadcast_of_two_symbols_is_a_constraint(tmp_path):
    path = relation_model(tmp_path, ADD, ADD_IN)
    ir = dvm("compile", path, "--dump-ir").stdout
    assert 'constraint seq2 == seq, or one of them is 1  ; node "add"' in ir, ir
    mod = compile_onnx(path)
    for xs, ys in [((3, 7), (3, 7)), ((3, 7), (3, 1)), ((2, 1), (2, 13)), ((1, 1), (1, 1))]:
        x, y = f32(*xs), f32(*ys)
        p, got = run_o(mod, x=x, y=y)
        assert p.returncode == 0, (xs, ys, p.stderr)
        np.testing.assert_allclose(got, np.maximum(x + y, 0), rtol=1e-6)
    p, _ = run_o(mod, x=f32(3, 7), y=f32(3, 5))
    assert p.returncode != 0
    assert ('(check_with), node "add": input "y" dim 1 (seq2) must equal input "x" dim 1 (seq) '
            'or one of them be 1 (they broadcast in node "add"), got 5 and 7') in p.stderr, p.stderr


def test_ranges_that_force_equality_unify_the_symbols(tmp_path):
    path = relation_model(tmp_path, ADD, ADD_IN)
    ranges = ["--dim", "seq=2..64", "--dim", "seq2=3..100"]
    ir = dvm("compile", path, "--dump-ir", *ranges).stdout
    assert "input  %y: f32[batch, seq]" in ir and "%o: f32[batch, seq] = Relu" in ir, ir
    assert 'constraint seq2 == seq (unified)  ; node "add"' in ir, ir
    mod = compile_onnx(path, *ranges)
    assert ".sym seq r3 3 64" in dvm("disasm", mod).stdout  # the ranges' intersection
    x, y = f32(2, 5), f32(2, 5)
    p, got = run_o(mod, x=x, y=y)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(got, np.maximum(x + y, 0), rtol=1e-6)
    p, _ = run_o(mod, x=f32(2, 5), y=f32(2, 7))
    assert p.returncode != 0
    assert 'input "y" dim 1 (seq) must be 5, the value of seq bound by an earlier input, got 7' in p.stderr, p.stderr
    p = dvm("compile", path, "--dim", "seq=2..6", "--dim", "seq2=8..64", "--dump-ir")
    assert p.returncode != 0
    assert ('node "add": seq (2..6) and seq2 (8..64) must be equal (they broadcast), '
            'but their ranges do not meet') in p.stderr, p.stderr


def test_expression_and_matmul_batch_constraints(tmp_path):
    """seq + 1 (a Concat) broadcast with seq2, and MatMul batch dims b1, b2."""
    one = helper.make_tensor("one", F, [1, 1], [0.5])
    nodes = [helper.make_node("Concat", ["x", "one"], ["xc"], axis=1, name="cat"),
             helper.make_node("Mul", ["xc", "y"], ["o"], name="mul")]
    path = relation_model(tmp_path, nodes, [("x", [1, "seq"]), ("y", [1, "seq2"])], [one])
    ir = dvm("compile", path, "--dump-ir").stdout
    assert 'constraint seq2 == seq + 1, or one of them is 1  ; node "mul"' in ir, ir
    mod = compile_onnx(path)
    for n, m in [(4, 5), (4, 1), (12, 13)]:
        x, y = f32(1, n), f32(1, m)
        p, got = run_o(mod, x=x, y=y)
        assert p.returncode == 0, p.stderr
        np.testing.assert_allclose(got, np.concatenate([x, [[0.5]]], 1) * y, rtol=1e-6)
    p, _ = run_o(mod, x=f32(1, 4), y=f32(1, 3))
    assert 'input "y" dim 1 (seq2) must equal dim seq + 1 or one of them be 1' in p.stderr, p.stderr
    assert "got 3 and 5" in p.stderr, p.stderr

    path = relation_model(tmp_path, [helper.make_node("MatMul", ["a", "b"], ["o"], name="mm")],
                [("a", ["b1", 3, 4]), ("b", ["b2", 4, 2])], name="mm.onnx")
    ir = dvm("compile", path, "--dump-ir").stdout
    assert 'constraint b2 == b1, or one of them is 1  ; node "mm"' in ir, ir
    mod = compile_onnx(path)
    a, b = f32(5, 3, 4), f32(1, 4, 2)
    p, got = run_o(mod, a=a, b=b)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    p, _ = run_o(mod, a=a, b=f32(2, 4, 2))
    assert ('(check_with), node "mm": input "b" dim 0 (b2) must equal input "a" dim 0 (b1) '
            'or one of them be 1 (they broadcast in node "mm"), got 2 and 5') in p.stderr, p.stderr


def test_inner_dims_unify(tmp_path):
    """A matrix product's inner dims (MatMul, Gemm either way round) are one
    symbol after inference: the product's input then fails at its guard,
    named, and a value built from it has the other input's dim."""
    for op, attrs, bdims in [("MatMul", {}, ["k2", "n"]), ("Gemm", {}, ["k2", "n"]),
                             ("Gemm", {"transB": 1}, ["n", "k2"])]:
        nodes = [helper.make_node(op, ["a", "b"], ["p"], name="mm", **attrs),
                 helper.make_node("Relu", ["p"], ["o"], name="relu")]
        path = relation_model(tmp_path, nodes, [("a", ["m", "k"]), ("b", bdims)], name=f"{op}{len(attrs)}.onnx")
        ir = dvm("compile", path, "--dump-ir").stdout
        assert ('constraint k2 == k (unified)  ; node "mm": they are the inner dims of a matrix product'
                in ir), ir
        mod = compile_onnx(path)
        a, b = f32(3, 5), f32(5, 7)
        p, got = run_o(mod, a=a, b=b.T.copy() if attrs else b)
        assert p.returncode == 0, p.stderr
        np.testing.assert_allclose(got, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)
        p, _ = run_o(mod, a=a, b=f32(7, 6) if attrs else f32(6, 7))
        assert p.returncode != 0
        assert 'must be 5, the value of k bound by an earlier input, got 6' in p.stderr, p.stderr


def test_concat_other_axes(tmp_path):
    """Concatenated inputs agree off the axis: symbols unify (the guards then
    bind b1 for both inputs), an expression becomes a check."""
    nodes = [helper.make_node("Concat", ["x", "y"], ["c"], axis=1, name="cat"),
             helper.make_node("Concat", ["x", "y"], ["d"], axis=1, name="cat2"),
             helper.make_node("Add", ["c", "d"], ["o"], name="add")]
    path = relation_model(tmp_path, nodes, [("x", ["b1", "s"]), ("y", ["b2", "t"])])
    ir = dvm("compile", path, "--dump-ir").stdout
    assert 'constraint b2 == b1 (unified)  ; node "cat": they are concatenated along another axis' in ir, ir
    assert "input  %y: f32[b1, t]" in ir and "%o: f32[b1, t + s] = Add" in ir, ir
    mod = compile_onnx(path)
    x, y = f32(2, 3), f32(2, 4)
    p, got = run_o(mod, x=x, y=y)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(got, 2 * np.concatenate([x, y], 1), rtol=1e-6)
    p, _ = run_o(mod, x=x, y=f32(3, 4))
    assert 'input "y" dim 0 (b1) must be 2, the value of b1 bound by an earlier input, got 3' in p.stderr, p.stderr

    one = helper.make_tensor("one", F, [1, 1], [0.5])
    nodes = [helper.make_node("Concat", ["x", "one"], ["xc"], axis=0, name="cat"),
             helper.make_node("Concat", ["xc", "y"], ["o"], axis=1, name="cat2")]
    path = relation_model(tmp_path, nodes, [("x", ["n", 1]), ("y", ["m", 2])], [one], name="cat_expr.onnx")
    ir = dvm("compile", path, "--dump-ir").stdout
    assert 'constraint m == n + 1  ; node "cat2": they are concatenated along another axis' in ir, ir
    mod = compile_onnx(path)
    x, y = f32(3, 1), f32(4, 2)
    p, got = run_o(mod, x=x, y=y)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(got, np.concatenate([np.concatenate([x, [[0.5]]]), y], 1), rtol=1e-6)
    p, _ = run_o(mod, x=x, y=f32(3, 2))
    assert ('(check_with), node "cat2": input "y" dim 0 (m) must equal dim n + 1 '
            '(they are concatenated along another axis in node "cat2"), got 3 and 4') in p.stderr, p.stderr


def test_branch_broadcasts_are_not_entry_checks(tmp_path):
    """A broadcast inside an If branch may never run: it is not checked at entry."""
    br = [helper.make_node("Add", ["x", "y"], ["t"], name="inner")]
    then = helper.make_graph(br, "then", [], [helper.make_tensor_value_info("t", F, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="id")], "else", [],
                              [helper.make_tensor_value_info("e", F, None)])
    c = helper.make_tensor("c", TensorProto.BOOL, [], [False])
    path = relation_model(tmp_path,
                          [helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other, name="if")],
                          [("x", ["n"]), ("y", ["m"])], [c])
    ir = dvm("compile", path, "--dump-ir").stdout
    assert "constraint" not in ir, ir
    x = f32(3)
    p, got = run_o(compile_onnx(path), x=x, y=f32(5))
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(got, x)
