"""Sequences and optionals (lower_seq.c; tuples in the VM) against ONNX
Runtime on awkward shapes: SplitToSequence with chunks that do not divide
the axis, 0-size and 1-size dims, scalar and 1-D splits and keepdims;
ConcatFromSequence with and without new_axis, negative axes;
SequenceInsert / SequenceAt / SequenceErase at negative and default
positions; SequenceLength; SequenceMap over two sequences and a tensor.
Sequence inputs and outputs go through `dvm run` as directories of .npy
files. Then what must fail does, naming what: a position out of range, an
empty sequence to concatenate, a sequence given to an op that takes
tensors (refused at compile time)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from dvmtest.cli import dvm, try_run  # noqa: E402
from dvmtest.compare import check_with_ort  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model, seq_vi, vi  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
rng = np.random.default_rng(5)


def seq_model(tmp, name, nodes, inputs, outputs, inits=(), opset=17):
    """The model as tmp/name.onnx compiled: (its path, the module, the compile's process)."""
    path = save_model(make_model(nodes, inputs, outputs, inits, opset=opset, ir_version=8, name=name),
                      tmp / f"{name}.onnx")
    mod = path.replace(".onnx", ".dvmb")
    return path, mod, dvm("compile", path, "-o", mod)


@pytest.mark.parametrize("shape,axis,split,keepdims", [
    ((7, 3), 0, 3, 1), ((7, 3), 0, None, 0), ((7, 3), -1, None, 1), ((1, 5), 1, 2, 1), ((0, 4), 1, 4, 1),
    ((2, 13), 1, 5, 1), ((2, 0, 3), 1, None, 1), ((5, 2), 0, [2, 0, 3], 1), ((11,), 0, [11], 1)])
def test_split_to_sequence(tmp_path, shape, axis, split, keepdims):
    inits, ins = [], ["x"]
    if split is not None:
        inits.append(numpy_helper.from_array(np.array(split, np.int64), "split"))
        ins.append("split")
    path, mod, p = seq_model(tmp_path, "split", [helper.make_node("SplitToSequence", ins, ["s"], axis=axis,
                                                                   keepdims=keepdims)],
                             [vi("x", F, list(shape))], [seq_vi("s")], inits)
    assert p.returncode == 0, p.stderr
    check_with_ort(path, {"x": rng.standard_normal(shape).astype(np.float32)}, mod=mod, rtol=1e-6, dtype=True)


def test_split_by_a_scalar_input(tmp_path):
    """The chunk size read at run time; one model, several shapes."""
    path, mod, p = seq_model(tmp_path, "split_in", [helper.make_node("SplitToSequence", ["x", "k"], ["s"], axis=1)],
                             [vi("x", F, ["a", "b"]), vi("k", I64, [])], [seq_vi("s")])
    assert p.returncode == 0, p.stderr
    for shape, k in [((2, 7), 3), ((3, 1), 1), ((1, 12), 5), ((2, 0), 2), ((4, 5), 9)]:
        check_with_ort(path, {"x": rng.standard_normal(shape).astype(np.float32), "k": np.array(k, np.int64)},
                       mod=mod, rtol=1e-6, dtype=True)
    p, _ = try_run(mod, {"x": np.zeros((2, 3), np.float32), "k": np.array(0, np.int64)}, kinds=["tensor"])
    assert p.returncode != 0 and "split must be positive, got 0" in p.stderr, p.stderr


@pytest.mark.parametrize("axis,new_axis", [(0, 0), (1, 0), (-1, 0), (0, 1), (-1, 1), (2, 1)])
def test_concat_from_sequence(tmp_path, axis, new_axis):
    path, mod, p = seq_model(tmp_path, "concat", [helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis,
                                                                    new_axis=new_axis)],
                             [seq_vi("s")], [vi("y", F)], opset=17)
    assert p.returncode == 0, p.stderr
    for n, shape in [(1, (2, 3)), (3, (2, 3)), (5, (1, 1)), (2, (0, 3))]:
        items = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
        if not new_axis:  # items may differ along the axis
            items = [rng.standard_normal(tuple(d + (i if a == axis % 2 else 0) for a, d in enumerate(shape)))
                     .astype(np.float32) for i in range(n)]
        check_with_ort(path, {"s": items}, mod=mod, rtol=1e-6, dtype=True)
    p, _ = try_run(mod, {"s": []}, kinds=["tensor"])
    assert p.returncode != 0 and "the sequence is empty" in p.stderr, p.stderr


def test_insert_at_erase_length(tmp_path):
    """Positions from the end, the default ones (insert at the end, erase
    the last), and every result as a sequence or tensor out."""
    c = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["s1"]),
             helper.make_node("SequenceInsert", ["s1", "x", "m2"], ["s2"]),
             helper.make_node("SequenceAt", ["s2", "m1"], ["last"]),
             helper.make_node("SequenceAt", ["s2", "zero"], ["first"]),
             helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),
             helper.make_node("SequenceErase", ["s3"], ["s4"]),
             helper.make_node("SequenceLength", ["s4"], ["n"])]
    path, mod, p = seq_model(tmp_path, "ops", nodes, [seq_vi("s"), vi("x", F, [None, 3])],
                             [seq_vi("s2"), vi("last", F), vi("first", F), seq_vi("s4"), vi("n", I64, [])],
                             [c("m2", -2), c("m1", -1), c("zero", 0)])
    assert p.returncode == 0, p.stderr
    for n in (1, 4):
        items = [rng.standard_normal((i + 1, 3)).astype(np.float32) for i in range(n)]
        check_with_ort(path, {"s": items, "x": rng.standard_normal((2, 3)).astype(np.float32)},
                       mod=mod, rtol=1e-6, dtype=True)
    # from an empty sequence, s1 has one item: position -2 is before the start (ONNX Runtime fails too)
    p, _ = try_run(mod, {"s": [], "x": np.zeros((2, 3), np.float32)}, kinds=["tensor"])
    assert p.returncode != 0 and "insert position -2 out of range (size 1)" in p.stderr, p.stderr


def test_position_out_of_range(tmp_path):
    path, mod, p = seq_model(tmp_path, "at", [helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                             [seq_vi("s"), vi("i", I64, [])], [vi("y", F)])
    assert p.returncode == 0, p.stderr
    p, _ = try_run(mod, {"s": [np.zeros(2, np.float32)] * 2, "i": np.array(-3, np.int64)}, kinds=["tensor"])
    assert p.returncode != 0 and "index -3 out of range (size 2)" in p.stderr and "SequenceAt" in p.stderr, p.stderr


def test_sequence_map(tmp_path):
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["ab"]), helper.make_node("Mul", ["ab", "tt"], ["y"]),
                              helper.make_node("Shape", ["a"], ["sh"])],
                             "body", [vi("a", F, ["n"]), vi("b", F, ["n"]), vi("tt", F, [1])],
                             [vi("y", F, ["n"]), vi("sh", I64, [1])])
    path, mod, p = seq_model(tmp_path, "map", [helper.make_node("SequenceMap", ["s", "u", "t"], ["ys", "shapes"],
                                                                 body=body)],
                             [seq_vi("s"), seq_vi("u"), vi("t", F, [1])], [seq_vi("ys"), seq_vi("shapes", I64)])
    assert p.returncode == 0, p.stderr
    for sizes in ([], [1], [3, 0, 7]):
        s = [rng.standard_normal(k).astype(np.float32) for k in sizes]
        u = [rng.standard_normal(k).astype(np.float32) for k in sizes]
        check_with_ort(path, {"s": s, "u": u, "t": np.array([2.0], np.float32)}, mod=mod, rtol=1e-6, dtype=True)


def test_sequence_to_a_tensor_op_is_refused(tmp_path):
    _, _, p = seq_model(tmp_path, "bad", [helper.make_node("Relu", ["s"], ["y"])], [seq_vi("s")], [vi("y", F)])
    assert p.returncode == 2, p.stderr
    assert 'input 0 ("s") is a sequence; the op takes tensors' in p.stderr and "Relu" in p.stderr, p.stderr
