"""BYTES (string) tensors through dvm serve and the real tritonclient[http]:
inputs as JSON strings and as the binary extension's length-prefixed
elements, outputs both ways, against ONNX Runtime on the same model;
malformed BYTES and batching of a string model refused by name."""
import json
import os
import urllib.error
import urllib.request

import numpy as np
import onnxruntime
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto as T
from onnx import helper

from conftest import Server
from dvmtest.onnxmodel import make_model, save_model

WORDS = ["a", "", "\u00e9t\u00e9", "b c", "a\0b"]


def bytes_model():
    k = helper.make_tensor("k", T.STRING, [1], [b"!"])
    nodes = [helper.make_node("StringConcat", ["s", "k"], ["t"]), helper.make_node("Equal", ["s", "k"], ["eq"])]
    return make_model(nodes, [("s", T.STRING, ["n"])], [("t", T.STRING, None), ("eq", T.BOOL, None)], [k], opset=20)


@pytest.fixture(scope="module")
def bytes_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("bytes")
    for name, config in (("text", None), ("batched", "batch = n\n")):
        os.makedirs(root / "repo" / name / "1")
        save_model(bytes_model(), root / "repo" / name / "1" / "model.onnx")
        if config:
            (root / "repo" / name / "config").write_text(config)
    s = Server(str(root / "repo"), str(root / "serve.log"))
    yield s
    assert s.stop() == 0, s.log_text()[-3000:]


@pytest.mark.parametrize("binary_in,binary_out", [(False, False), (True, True), (True, False), (False, True)])
def test_bytes_like_onnxruntime(bytes_server, binary_in, binary_out):
    words = np.array([w.encode() for w in WORDS], dtype=object)
    i = httpclient.InferInput("s", [len(WORDS)], "BYTES")
    i.set_data_from_numpy(words, binary_data=binary_in)
    c = httpclient.InferenceServerClient(bytes_server.url)
    r = c.infer("text", [i], outputs=[httpclient.InferRequestedOutput(o, binary_data=binary_out) for o in ("t", "eq")])
    want = onnxruntime.InferenceSession(bytes_model().SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"s": np.array(WORDS[:4] + ["a"], dtype=object)})  # ONNX Runtime's binding cuts at a NUL
    got_t = [x if isinstance(x, bytes) else x.encode() for x in r.as_numpy("t").tolist()]
    assert got_t[:4] == [w.encode() for w in want[0].tolist()[:4]] and got_t[4] == b"a\0b!"
    assert r.as_numpy("eq").tolist() == [False] * 5
    c.close()


def bytes_post(server, model, body):
    req = urllib.request.Request(f"http://{server.url}/v2/models/{model}/infer", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_bytes_refusals(bytes_server):
    body = {"inputs": [{"name": "s", "datatype": "BYTES", "shape": [2], "data": ["a", 3]}]}
    code, text = bytes_post(bytes_server, "text", json.dumps(body).encode())
    assert code == 400 and b"BYTES data must be strings" in text, text
    head = json.dumps({"inputs": [{"name": "s", "datatype": "BYTES", "shape": [2],
                                   "parameters": {"binary_data_size": 9}}]}).encode()
    req = urllib.request.Request(f"http://{bytes_server.url}/v2/models/text/infer",
                                 data=head + b"\x01\x00\x00\x00a\x09\x00\x00\x00",
                                 headers={"Content-Type": "application/octet-stream",
                                          "Inference-Header-Content-Length": str(len(head))})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 400 and b"element 1 has 9 bytes, 0 are left" in e.value.read()
    req = urllib.request.Request(f"http://{bytes_server.url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(req) as r:
        index = r.read().decode()
    assert 'batch and pad: \\"s\\" is a string tensor' in index, index
