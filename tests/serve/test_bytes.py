"""BYTES (string) tensors through dvm serve and the real tritonclient[http]:
inputs as JSON strings and as the binary extension's length-prefixed
elements, outputs both ways, against ONNX Runtime on the same model;
requests of a string model joined by the batcher (batch, and pad with
empty strings), each answered with its own elements; malformed BYTES
and a string input's pad_value refused by name."""
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

from conftest import Server, metric
from dvmtest.onnxmodel import make_model, save_model

WORDS = ["a", "", "\u00e9t\u00e9", "b c", "a\0b"]


def bytes_model(dims=("n",)):
    k = helper.make_tensor("k", T.STRING, [1], [b"!"])
    nodes = [helper.make_node("StringConcat", ["s", "k"], ["t"]), helper.make_node("Equal", ["s", "k"], ["eq"])]
    return make_model(nodes, [("s", T.STRING, list(dims))], [("t", T.STRING, None), ("eq", T.BOOL, None)], [k],
                      opset=20)


JOIN = "max_batch = 16\nqueue_delay_us = 50000\n"
MODELS = (("text", ("n",), None), ("batched", ("n",), "batch = n\n" + JOIN),
          ("padded", ("b", "l"), "batch = b\npad = l\n" + JOIN), ("badpad", ("b", "l"), "batch = b\npad = l\npad_value = s:0\n"))


@pytest.fixture(scope="module")
def bytes_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("bytes")
    for name, dims, config in MODELS:
        os.makedirs(root / "repo" / name / "1")
        save_model(bytes_model(dims), root / "repo" / name / "1" / "model.onnx")
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
    assert 'pad_value s: a string input pads with empty strings and takes no pad_value' in index, index


@pytest.mark.parametrize("model", ["batched", "padded"])
def test_bytes_requests_joined(bytes_server, model):
    """Requests of 1-3 rows (and, padded, 1-7 words a row: one length
    bucket, so they join with empty strings as padding) sent at once:
    fewer invocations than requests, and each gets exactly its own
    elements back, non-ASCII and NUL bytes included."""
    rng = np.random.default_rng(7)
    vocab = ["a", "", "\u00e9t\u00e9", "b c", "a\0b", "!", "\u4e2d\u6587"]
    reqs = []
    for _ in range(12):
        shape = [int(rng.integers(1, 4))] + ([int(rng.integers(1, 8))] if model == "padded" else [])
        reqs.append(np.array([vocab[i].encode() for i in rng.integers(0, len(vocab), int(np.prod(shape)))],
                             dtype=object).reshape(shape))
    c = httpclient.InferenceServerClient(bytes_server.url, concurrency=len(reqs))
    before = bytes_server.metrics()
    pending = []
    for k, words in enumerate(reqs):
        i = httpclient.InferInput("s", list(words.shape), "BYTES")
        i.set_data_from_numpy(words, binary_data=k % 2 == 0)
        pending.append(c.async_infer(model, [i], outputs=[httpclient.InferRequestedOutput(o, binary_data=True)
                                                          for o in ("t", "eq")]))
    for words, p in zip(reqs, pending, strict=True):
        r = p.get_result()
        assert r.as_numpy("t").shape == words.shape
        assert r.as_numpy("t").ravel().tolist() == [w + b"!" for w in words.ravel().tolist()]
        assert r.as_numpy("eq").ravel().tolist() == [w == b"!" for w in words.ravel().tolist()]
    after = bytes_server.metrics()
    delta = {k: metric(after, k, model=model) - metric(before, k, model=model)
             for k in ("dvm_batch_size_count", "dvm_padding_elements_total")}
    assert delta["dvm_batch_size_count"] < len(reqs), "no two requests shared an invocation"
    if model == "padded":
        assert delta["dvm_padding_elements_total"] > 0, "no request was padded"
    c.close()
