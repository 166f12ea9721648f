"""String tensors through dvm.InferenceSession as through ONNX Runtime's:
str, bytes and object arrays in; object arrays of str out; the types the
session reports; clear errors for what is not text."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import dvm
from dvmtest.onnxmodel import make_model


def text_model():
    """Cast of a number to text, the text upper-cased by Where on Equal, and the text back as a float."""
    k = h.make_tensor("k", T.STRING, [2], [b"b", b"\xc3\xa9"])
    nodes = [h.make_node("Cast", ["v"], ["vs"], to=T.STRING),
             h.make_node("Equal", ["s", "k"], ["eq"]),
             h.make_node("Where", ["eq", "s", "vs"], ["mixed"]),
             h.make_node("Cast", ["vs"], ["back"], to=T.FLOAT)]
    return make_model(nodes, [("s", T.STRING, ["n", 2]), ("v", T.FLOAT, ["n", 2])],
                      [("eq", T.BOOL, None), ("mixed", T.STRING, None), ("back", T.FLOAT, None)], [k], opset=19)


@pytest.mark.parametrize("form", ["str", "bytes", "object"])
def test_strings_like_onnxruntime(form):
    model = text_model().SerializeToString()
    words = np.array([["b", "\u00e9"], ["a", ""], ["b", "b"]])
    feeds = {"s": {"str": words, "bytes": np.char.encode(words, "utf-8"), "object": words.astype(object)}[form],
             "v": np.array([[1.5, -0.0], [np.nan, 1e20], [3, 1 / 3]], np.float32)}
    ours = dvm.InferenceSession(model)
    ref = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert [i.type for i in ours.get_inputs()] == [i.type for i in ref.get_inputs()]
    assert [o.type for o in ours.get_outputs()] == [o.type for o in ref.get_outputs()]
    got, want = ours.run(None, feeds), ref.run(None, {**feeds, "s": words.astype(object)})
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tolist() == w.tolist() or np.allclose(g, w, equal_nan=True)


def test_strings_refused_clearly():
    sess = dvm.InferenceSession(text_model().SerializeToString())
    v = np.zeros((1, 2), np.float32)
    with pytest.raises(dvm.InvalidInput, match='input "s" is a string tensor: element 1 is int, not str or bytes'):
        sess.run(None, {"s": np.array([["a", 3]], dtype=object), "v": v})
    # text that is not UTF-8 goes in as bytes, and cannot come back as str
    same = dvm.InferenceSession(make_model([h.make_node("Identity", ["s"], ["t"])], [("s", T.STRING, ["n"])],
                                           [("t", T.STRING, None)]).SerializeToString())
    assert same.run(None, {"s": np.array([b"ok"])})[0].tolist() == ["ok"]
    with pytest.raises(UnicodeDecodeError):
        same.run(None, {"s": np.array([b"ok", b"\xff"])})


@pytest.mark.parametrize("labels", ["text", "int"])
def test_zipmap_like_onnxruntime(labels):
    """skl2onnx's default output, ZipMap: a list of dicts {label: probability}, as ONNX Runtime gives, and
    its type as ONNX Runtime writes it."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(4)
    x = rng.standard_normal((60, 3)).astype(np.float32)
    y = np.array(["a", "\u00e9", "c"])[rng.integers(0, 3, 60)] if labels == "text" else rng.integers(0, 3, 60) * 5
    for est in (LogisticRegression(), RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0)):
        model = to_onnx(est.fit(x, y), x[:1]).SerializeToString()
        feeds = {"X": rng.standard_normal((7, 3)).astype(np.float32)}
        ours, ref = dvm.InferenceSession(model), onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        assert [(o.name, o.type, o.shape) for o in ours.get_outputs()] == \
            [(o.name, o.type, o.shape) for o in ref.get_outputs()]  # ... seq(map(int64,tensor(float))), []
        got, want = ours.run(None, feeds), ref.run(None, feeds)
        assert got[0].tolist() == want[0].tolist()
        assert [list(d) for d in got[1]] == [list(d) for d in want[1]]
        for g, w in zip(got[1], want[1], strict=True):
            assert np.allclose(list(g.values()), list(w.values()), rtol=1e-5, atol=1e-6)


def test_text_arrays_read_as_they_lie():
    """Text and bytes arrays in any byte order and layout, their trailing NULs padding; a code point that is no
    character refused by name."""
    same = dvm.InferenceSession(make_model([h.make_node("Identity", ["s"], ["t"])], [("s", T.STRING, ["n", "m"])],
                                           [("t", T.STRING, None)]).SerializeToString())
    words = np.array([["a\0b", "\u00e9t\u00e9"], ["", "\U0001f642"]])
    for x in (words, words.astype(">U3"), np.asfortranarray(words), words[:, ::-1]):
        assert same.run(None, {"s": x})[0].tolist() == x.tolist()
    assert same.run(None, {"s": np.array([[b"ab\0", b"a\0c"]])})[0].tolist() == [["ab", "a\0c"]]
    bad = np.frombuffer(np.array([0x61, 0xD800], dtype="<u4").tobytes(), dtype="<U2").reshape(1, 1)
    with pytest.raises(dvm.InvalidInput, match='input "s": element 0: code point 0xd800 is not a character'):
        same.run(None, {"s": bad})


def test_sequence_and_optional_types_like_onnxruntime():
    """Sequence and optional graph outputs: their declared types as
    onnxruntime's NodeArg.type writes them; a sequence's shape [], an
    optional tensor's its tensor's declared one."""
    nodes = [h.make_node("SplitToSequence", ["x"], ["parts"], axis=0),
             h.make_node("Optional", ["x"], ["maybe"])]
    x = h.make_tensor_value_info("x", T.FLOAT, ["n", 2])
    outs = [h.make_value_info("parts", h.make_sequence_type_proto(h.make_tensor_type_proto(T.FLOAT, None))),
            h.make_value_info("maybe", h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, ["n", 2])))]
    model = h.make_model(h.make_graph(nodes, "g", [x], outs), opset_imports=[h.make_opsetid("", 18)])
    data = model.SerializeToString()
    ours, ref = dvm.InferenceSession(data), onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert [(o.name, o.type, o.shape) for o in ours.get_outputs()] == \
        [(o.name, o.type, o.shape) for o in ref.get_outputs()] == \
        [("parts", "seq(tensor(float))", []), ("maybe", "optional(tensor(float))", ["n", 2])]
