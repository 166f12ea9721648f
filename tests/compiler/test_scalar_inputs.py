"""Inputs that a node reads as one number, computed at run time: If's
condition, Loop's trip count and condition, Range's start, limit and delta,
TopK's k, OneHot's depth, Clip's bounds, CumSum's axis, Pad's value,
Dropout's ratio and training mode, SequenceAt's position. Each is one
element of any rank (dvm takes bool[1, 1] where ONNX Runtime takes it, and
also where ONNX Runtime asks for rank 0 or 1): the result equals ONNX
Runtime's on the same model with that input of rank 0 (TopK: [1], the only
shape it takes). Two elements or none are an error that names the node and
the count."""
import numpy as np
import onnxruntime as ort
import pytest
from dvmtest.cli import compile_onnx, try_run
from dvmtest.onnxmodel import make_model, save_model, vi
from onnx import TensorProto as TP
from onnx import helper

F, I, B = TP.FLOAT, TP.INT64, TP.BOOL
X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def loop_body():
    """v + 1, the condition passed on."""
    return helper.make_graph([helper.make_node("Identity", ["bc"], ["co"]), helper.make_node("Add", ["bv", "one"], ["vo"])],
                             "body", [vi("bi", I, []), vi("bc", B, []), vi("bv", F, [3, 4])],
                             [vi("co", B, []), vi("vo", F, [3, 4])], [helper.make_tensor("one", F, [], [1.0])])


def if_branches():
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", F, None)])
    return {"then_branch": then_g, "else_branch": else_g}


# name -> (nodes, the one-number inputs: name -> (elem, value), other inputs, output elems,
# the shape ONNX Runtime takes)
CASES = {
    "If": ([helper.make_node("If", ["c"], ["y"], name="the_if", **if_branches())],
           {"c": (B, False)}, {"x": X}, [F], ()),
    "Loop M": ([helper.make_node("Loop", ["m", "", "v"], ["y"], name="the_loop", body=loop_body())],
               {"m": (I, 3)}, {"v": X}, [F], ()),
    "Loop cond": ([helper.make_node("Loop", ["m", "c", "v"], ["y"], name="the_loop", body=loop_body())],
                  {"c": (B, True)}, {"m": np.array(2, np.int64), "v": X}, [F], ()),
    "Range": ([helper.make_node("Range", ["s", "l", "d"], ["y"], name="the_range")],
              {"s": (I, 1), "l": (I, 10), "d": (I, 3)}, {}, [I], ()),
    "TopK": ([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="the_topk")],
             {"k": (I, 2)}, {"x": X}, [F, I], (1,)),
    "OneHot": ([helper.make_node("OneHot", ["ix", "depth", "vals"], ["y"], name="the_onehot")],
               {"depth": (I, 4)}, {"ix": np.array([0, 3, 1], np.int64), "vals": np.array([0, 1], np.float32)}, [F], ()),
    "Clip": ([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="the_clip")],
             {"lo": (F, -2), "hi": (F, 3)}, {"x": X}, [F], ()),
    "CumSum": ([helper.make_node("CumSum", ["x", "axis"], ["y"], name="the_cumsum")],
               {"axis": (I, 1)}, {"x": X}, [F], ()),
    "Pad": ([helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="the_pad")],
            {"value": (F, 7)}, {"x": X, "pads": np.array([1, 0, 0, 2], np.int64)}, [F], ()),
    "Dropout": ([helper.make_node("Dropout", ["x", "ratio", "training"], ["y"], name="the_dropout")],
                {"ratio": (F, 0.5), "training": (B, False)}, {"x": X}, [F], ()),
    "SequenceAt": ([helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1),
                    helper.make_node("SequenceAt", ["seq", "pos"], ["y"], name="the_sequence_at")],
                   {"pos": (I, -2)}, {"x": X}, [F], ()),
}
NP = {F: np.float32, I: np.int64, B: np.bool_}


def scalar_inputs_model(case, shape):
    """CASES[case] with its one-number inputs of the given shape: (model,
    feeds)."""
    nodes, numbers, others, elems, _ = CASES[case]
    ins = [vi(k, elem, list(shape)) for k, (elem, _) in numbers.items()]
    ins += [vi(k, {np.float32: F, np.int64: I}[v.dtype.type], list(v.shape)) for k, v in others.items()]
    feeds = {k: np.full(shape, v, NP[elem]) for k, (elem, v) in numbers.items()} | others
    outs = [vi(o, e, None) for o, e in zip(nodes[-1].output, elems)]
    return make_model(nodes, ins, outs, opset=17), feeds


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (1, 1, 1)])
@pytest.mark.parametrize("case", list(CASES))
def test_one_element_of_any_rank(tmp_path, case, shape):
    model, feeds = scalar_inputs_model(case, shape)
    ref, ref_feeds = scalar_inputs_model(case, CASES[case][4])
    mod = compile_onnx(save_model(model, tmp_path / "m.onnx"))
    want = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, ref_feeds)
    p, got = try_run(mod, feeds, len(want))
    assert p.returncode == 0, p.stderr
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("shape", [(2,), (1, 2), (0,)])
@pytest.mark.parametrize("case", list(CASES))
def test_other_counts_fail_naming_the_node(tmp_path, case, shape):
    model, feeds = scalar_inputs_model(case, shape)
    mod = compile_onnx(save_model(model, tmp_path / "m.onnx"))
    p, _ = try_run(mod, feeds, len(CASES[case][3]))
    name = next(n.name for n in CASES[case][0] if n.name)
    assert p.returncode != 0 and f'node "{name}"' in p.stderr, p.stderr
    said = f"shape [{','.join(map(str, shape))}]", f"{int(np.prod(shape))} elements"
    assert any(s in p.stderr for s in said), p.stderr
