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
