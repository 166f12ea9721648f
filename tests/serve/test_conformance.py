"""KServe v2 conformance through the real tritonclient[http] package:
health, server and model metadata, model readiness and config, infer with
JSON and binary tensors, requested outputs, the repository API and error
cases; results equal to `dvm run` on the same inputs."""
import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from conftest import metric, reference, sentence


def triton_inputs(ids, mask, binary):
    inputs = []
    for name, x in (("ids", ids), ("mask", mask)):
        i = httpclient.InferInput(name, list(x.shape), np_to_triton_dtype(x.dtype))
        i.set_data_from_numpy(x, binary_data=binary)
        inputs.append(i)
    return inputs


def test_health_and_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    meta = client.get_server_metadata()
    assert meta["name"] == "dvm" and "binary_tensor_data" in meta["extensions"]
    m = client.get_model_metadata("bert")
    assert m["versions"] == ["1", "2"]
    assert m["inputs"] == [{"name": "ids", "datatype": "INT64", "shape": [-1, -1]},
                           {"name": "mask", "datatype": "INT64", "shape": [-1, -1]}]
    assert m["outputs"] == [{"name": "hidden", "datatype": "FP32", "shape": [-1, -1, 32]}]
    assert client.get_model_metadata("bert", "1")["name"] == "bert"
    assert client.is_model_ready("bert") and client.is_model_ready("bert", "2")
    assert not client.is_model_ready("bert", "3")
    assert not client.is_model_ready("nosuch")
    assert not client.is_model_ready("bad")
    cfg = client.get_model_config("bert")
    assert cfg["max_batch_size"] == 8 and cfg["instance_group"][0]["count"] == 2


@pytest.mark.parametrize("binary", [False, True])
def test_infer_equals_dvm_run(client, repo, binary):
    rng = np.random.default_rng(7)
    for length in (1, 7, 33, 64):
        ids, mask = sentence(rng, length, batch=2)
        mask[1, length // 2:] = 0
        outputs = [httpclient.InferRequestedOutput("hidden", binary_data=binary)]
        r = client.infer("bert", triton_inputs(ids, mask, binary), outputs=outputs, request_id=f"r{length}")
        assert r.get_response()["id"] == f"r{length}"
        assert r.get_response()["model_version"] == "2"
        got = r.as_numpy("hidden")
        assert got.dtype == np.float32 and got.shape == (2, length, 32)
        np.testing.assert_array_equal(got, reference(repo, ids, mask))


def test_binary_output_by_default_parameter(client, repo):
    ids, mask = sentence(np.random.default_rng(1), 5)
    # no requested outputs: tritonclient asks for binary_data_output
    r = client.infer("bert", triton_inputs(ids, mask, True), model_version="1")
    out = r.get_output("hidden")
    assert out["parameters"]["binary_data_size"] == 5 * 32 * 4
    np.testing.assert_array_equal(r.as_numpy("hidden"), reference(repo, ids, mask))


def test_onnx_compiled_at_load(client):
    x = np.arange(3 * 16, dtype=np.float32).reshape(3, 16) / 10
    inp = httpclient.InferInput("x", [3, 16], "FP32")
    inp.set_data_from_numpy(x, binary_data=False)
    y = client.infer("mlp", [inp]).as_numpy("y")
    assert y.shape == (3, 4)
    one = httpclient.InferInput("x", [1, 16], "FP32")
    one.set_data_from_numpy(x[1:2], binary_data=True)
    np.testing.assert_allclose(client.infer("mlp", [one]).as_numpy("y"), y[1:2], rtol=1e-6, atol=1e-6)


def test_errors(client):
    ids, mask = sentence(np.random.default_rng(2), 4)
    cases = [
        ("nosuch", triton_inputs(ids, mask, False), "not loaded"),
        ("bad", triton_inputs(ids, mask, False), "not loaded"),
        ("bert", triton_inputs(ids.astype(np.int32), mask, False), "datatype INT32, expected INT64"),
        ("bert", triton_inputs(ids[0], mask[0], True), "rank 1, expected 2"),
        ("bert", triton_inputs(ids, mask[:, :2], False), "another input has seq = 4"),
        ("bert", triton_inputs(*sentence(np.random.default_rng(3), 65), True), "must be in 1..64"),
        ("bert", triton_inputs(ids, mask, False)[:1], "input \"mask\" is missing"),
    ]
    for model, inputs, message in cases:
        with pytest.raises(InferenceServerException, match=message):
            client.infer(model, inputs)
    with pytest.raises(InferenceServerException, match="no such output"):
        client.infer("bert", triton_inputs(ids, mask, False), outputs=[httpclient.InferRequestedOutput("nope")])
    with pytest.raises(InferenceServerException, match="version 9"):
        client.infer("bert", triton_inputs(ids, mask, False), model_version="9")


def test_repository_api(client):
    index = {(m["name"], m.get("version")): m for m in client.get_model_repository_index()}
    assert index[("bert", "1")]["state"] == "READY" and index[("bert", "2")]["state"] == "READY"
    assert index[("bad", None)]["state"] == "UNAVAILABLE"
    assert "truncated" in index[("bad", None)]["reason"]
    client.unload_model("mlp")
    assert not client.is_model_ready("mlp")
    client.load_model("mlp")
    assert client.is_model_ready("mlp")
    with pytest.raises(InferenceServerException, match="truncated"):
        client.load_model("bad")
    with pytest.raises(InferenceServerException):
        client.load_model("../etc")


def test_batching_of_different_lengths(client, server, repo):
    """Concurrent requests of lengths 3..40 share invocations; each result
    equals its own `dvm run` (padding is masked out, so up to rounding)."""
    before = server.metrics()
    rng = np.random.default_rng(11)
    reqs = [sentence(rng, int(n)) for n in rng.integers(3, 41, size=24)]
    pending = [client.async_infer("bert", triton_inputs(ids, mask, True), model_version="1") for ids, mask in reqs]
    results = [p.get_result().as_numpy("hidden") for p in pending]
    for (ids, mask), got in zip(reqs, results, strict=True):
        np.testing.assert_allclose(got, reference(repo, ids, mask), rtol=1e-4, atol=1e-5)
    after = server.metrics()
    batches = metric(after, "dvm_batch_size_count", model="bert") - metric(before, "dvm_batch_size_count", model="bert")
    padded = metric(after, "dvm_padding_elements_total", model="bert") - \
        metric(before, "dvm_padding_elements_total", model="bert")
    assert batches < len(reqs), "no two requests shared an invocation"
    assert padded > 0
