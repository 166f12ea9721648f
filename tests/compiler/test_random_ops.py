"""The ONNX ops that draw random numbers (RandomNormal, RandomUniform, their
*Like forms, Bernoulli, Multinomial) compiled and run: outputs of the
shape and dtype ONNX Runtime gives, at awkward sizes; attributes reaching
the kernels (checked statistically: no draw can equal another
implementation's); seeded modules that agree across compiles, runs and
thread counts, and unseeded nodes that draw anew on every run and in every
node (the compiler neither folds nor shares them); and explicit refusals.
The kernels' own statistical tests: tests/ops/test_random.py."""
import math
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper  # noqa: E402
from dvmtest.cli import compile_onnx, dvm, run_module  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model  # noqa: E402

NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.FLOAT16: np.float16, T.INT32: np.int32,
      T.INT64: np.int64, T.BOOL: np.bool_}


def random_model(tmp, nodes, inputs, outputs, name="m", opset=17):
    """The model as tmp/name.onnx; inputs and outputs (name, elem type[, dims])."""
    m = make_model(nodes, inputs, [(n, t, None) for n, t in outputs], opset=opset, ir_version=8)
    return save_model(m, tmp / f"{name}.onnx")


def all_ops(seed=None):
    """One node of each op, on inputs of symbolic size."""
    s = {} if seed is None else {"seed": float(seed)}
    nodes = [helper.make_node("RandomNormal", [], ["a"], shape=[3, 5], mean=2.0, scale=0.5, **s),
             helper.make_node("RandomUniform", [], ["b"], shape=[7], low=-1.0, high=3.0, dtype=T.DOUBLE, **s),
             helper.make_node("RandomNormalLike", ["x"], ["c"], **s),
             helper.make_node("RandomUniformLike", ["i"], ["d"], dtype=T.FLOAT, **s),
             helper.make_node("Bernoulli", ["p"], ["e"], dtype=T.INT64, **s),
             helper.make_node("Multinomial", ["l"], ["f"], sample_size=5, **s)]
    inputs = [("x", T.FLOAT, ["n", 2]), ("i", T.INT64, ["n"]), ("p", T.DOUBLE, ["n"]), ("l", T.FLOAT, ["n", 3])]
    outputs = [("a", T.FLOAT), ("b", T.DOUBLE), ("c", T.FLOAT), ("d", T.FLOAT), ("e", T.INT64), ("f", T.INT32)]
    return nodes, inputs, outputs


def feeds_of(n):
    r = np.random.default_rng(n)
    return {"x": r.standard_normal((n, 2)).astype(np.float32), "i": np.arange(n, dtype=np.int64),
            "p": r.random(n), "l": r.standard_normal((n, 3)).astype(np.float32)}


@pytest.mark.parametrize("n", [0, 1, 13])
def test_shapes_and_dtypes_as_onnx_runtime(tmp_path, n):
    nodes, inputs, outputs = all_ops()
    path = random_model(tmp_path, nodes, inputs, outputs)
    mod = compile_onnx(path)
    feeds = feeds_of(n)
    got = run_module(mod, feeds, len(outputs))
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, feeds) if n else None  # ONNX Runtime refuses Multinomial's batch of 0
    for k, (g, (name, t)) in enumerate(zip(got, outputs, strict=True)):
        assert g.dtype == NP[t], (name, g.dtype)
        if want is not None:
            assert g.shape == want[k].shape and g.dtype == want[k].dtype, (name, g.shape, want[k].shape)
    assert got[0].shape == (3, 5) and got[5].shape == (n, 5)
    assert ((got[1] >= -1) & (got[1] < 3)).all() and ((got[3] >= 0) & (got[3] < 1)).all()
    assert set(np.unique(got[4])) <= {0, 1} and ((got[5] >= 0) & (got[5] < 3)).all()


def test_attributes_reach_the_kernels(tmp_path):
    """mean/scale, low/high, dtype, sample_size (and its default) by the
    statistics of 100,003 draws: within 5 standard errors."""
    n = 100003
    nodes = [helper.make_node("RandomNormal", [], ["a"], shape=[n], mean=5.0, scale=0.5, seed=1.0),
             helper.make_node("RandomUniformLike", ["x"], ["b"], low=10.0, high=12.0, seed=2.0),
             helper.make_node("RandomNormalLike", ["x"], ["c"], dtype=T.FLOAT16, seed=3.0),
             helper.make_node("Bernoulli", ["p"], ["d"], seed=4.0),
             helper.make_node("Multinomial", ["l"], ["e"], dtype=T.INT64, seed=5.0),
             helper.make_node("Multinomial", ["l"], ["f"], sample_size=n, seed=6.0)]
    path = random_model(tmp_path, nodes, [("x", T.DOUBLE, ["n"]), ("p", T.FLOAT, ["n"]), ("l", T.FLOAT, ["b", 4])],
                        [("a", T.FLOAT), ("b", T.DOUBLE), ("c", T.FLOAT16), ("d", T.FLOAT), ("e", T.INT64),
                         ("f", T.INT32)])
    with np.errstate(divide="ignore"):  # probability 0: -inf
        logits = np.log(np.array([[1, 2, 3, 4], [4, 0, 0, 1]], np.float32))
    a, b, c, d, e, f = run_module(compile_onnx(path), {"x": np.zeros(n), "p": np.full(n, 0.3, np.float32),
                                                      "l": logits}, 6)
    assert a.dtype == np.float32 and b.dtype == np.float64 and c.dtype == np.float16 and d.dtype == np.float32
    assert abs(a.mean() - 5) < 5 * 0.5 / math.sqrt(n) and abs(a.std() - 0.5) < 5 * 0.5 / math.sqrt(2 * n)
    assert ((b >= 10) & (b < 12)).all() and abs(b.mean() - 11) < 5 * 2 / math.sqrt(12 * n)
    assert abs(c.astype(np.float64).mean()) < 5 / math.sqrt(n)
    assert abs(d.mean() - 0.3) < 5 * math.sqrt(0.21 / n)
    assert e.shape == (2, 1) and e.dtype == np.int64 and f.shape == (2, n) and f.dtype == np.int32
    for row, p in zip(f, np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)):
        freq = np.bincount(row, minlength=4) / n
        assert (np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-12).all(), (freq, p)


def test_seeded_modules_agree(tmp_path):
    """The same seeded model compiled twice: every run of either module, at
    1 or 2 threads, draws the same numbers."""
    nodes, inputs, outputs = all_ops(seed=7)
    path = random_model(tmp_path, nodes, inputs, outputs)
    m1, m2 = compile_onnx(path, out=tmp_path / "one.dvmb"), compile_onnx(path, out=tmp_path / "two.dvmb")
    feeds = feeds_of(13)
    first = run_module(m1, feeds, len(outputs))
    for mod, extra in ((m1, ()), (m2, ()), (m2, ("--threads", "1")), (m1, ("--threads", "2"))):
        for g, w in zip(run_module(mod, feeds, len(outputs), *extra), first, strict=True):
            np.testing.assert_array_equal(g, w)
    # another seed, other numbers
    nodes, _, _ = all_ops(seed=8)
    other = run_module(compile_onnx(random_model(tmp_path, nodes, inputs, outputs, "m8")), feeds, len(outputs))
    for g, w in zip(other[:4], first[:4], strict=True):
        assert (g != w).all()


def test_unseeded_draw_anew(tmp_path):
    """Without a seed: two runs differ, and two identical nodes of one graph
    differ (not shared), a node on constants only included (not folded)."""
    nodes = [helper.make_node("RandomNormal", [], ["a"], shape=[64]),
             helper.make_node("RandomNormal", [], ["b"], shape=[64]),
             helper.make_node("RandomUniformLike", ["x"], ["c"]),
             helper.make_node("RandomUniformLike", ["x"], ["d"]),
             helper.make_node("Add", ["a", "b"], ["s"])]
    path = random_model(tmp_path, nodes, [("x", T.FLOAT, [64])],
                        [("a", T.FLOAT), ("b", T.FLOAT), ("c", T.FLOAT), ("d", T.FLOAT), ("s", T.FLOAT)])
    mod = compile_onnx(path)
    x = np.zeros(64, np.float32)
    r1, r2 = run_module(mod, {"x": x}, 5), run_module(mod, {"x": x}, 5)
    for g, w in zip(r1, r2, strict=True):
        assert (g != w).all()
    assert (r1[0] != r1[1]).all() and (r1[2] != r1[3]).all()
    np.testing.assert_allclose(r1[4], r1[0] + r1[1], rtol=1e-6)
    assert dvm("disasm", mod).stdout.count("invoke         random_normal") == 2


def test_in_a_loop_body(tmp_path):
    """A RandomNormal in a Loop body runs on every iteration: unseeded, each
    iteration's draw differs; seeded, each is the same."""
    def body(seed):
        s = {} if seed is None else {"seed": seed}
        return helper.make_graph(
            [helper.make_node("RandomNormal", [], ["r"], shape=[5], **s),
             helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
            [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, [])],
            [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("r", T.FLOAT, [5])])
    for seed in (None, 3.0):
        nodes = [helper.make_node("Loop", ["trips", ""], ["ys"], body=body(seed))]
        path = random_model(tmp_path, nodes, [("trips", T.INT64, [])], [("ys", T.FLOAT)], f"loop{seed}")
        (ys,) = run_module(compile_onnx(path), {"trips": np.array(4, np.int64)}, 1)
        assert ys.shape == (4, 5)
        if seed is None:
            assert (ys[1:] != ys[:-1]).all()
        else:
            np.testing.assert_array_equal(ys, np.broadcast_to(ys[0], ys.shape))


@pytest.mark.parametrize("node,inputs,what", [
    (helper.make_node("RandomNormal", [], ["y"], shape=[3], dtype=T.INT64), [],
     r"output dtype i64 is not supported \(want f32, f64, f16 or bf16\)"),
    (helper.make_node("RandomUniformLike", ["x"], ["y"]), [("x", T.INT32, [3])],
     r"output dtype i32 is not supported"),
    (helper.make_node("Multinomial", ["x"], ["y"], dtype=T.FLOAT), [("x", T.FLOAT, [2, 3])],
     r"output dtype f32 is not supported \(want i32 or i64\)"),
    (helper.make_node("Bernoulli", ["x"], ["y"]), [("x", T.INT64, [3])],
     r"dtype i64 is not supported \(kernel bernoulli takes"),
])
def test_refused_by_name(tmp_path, node, inputs, what):
    path = random_model(tmp_path, [node], inputs, [("y", T.FLOAT)])
    p = dvm("compile", path, "-o", str(tmp_path / "m.dvmb"))
    assert p.returncode == 2 and f'({node.op_type}, opset 17)' in p.stderr, p.stderr
    assert re.search(what, p.stderr), p.stderr


def test_shape_attribute_required(tmp_path):
    path = random_model(tmp_path, [helper.make_node("RandomUniform", [], ["y"])], [], [("y", T.FLOAT)])
    p = dvm("compile", path, "-o", str(tmp_path / "m.dvmb"))
    assert p.returncode != 0 and 'attribute "shape" (a list of ints) is required' in p.stderr, p.stderr
