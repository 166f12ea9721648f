"""How dvm serve's batcher groups requests (serve/batcher.c), through the
real tritonclient[http]: requests of several rows share invocations and
each gets back exactly its own rows; requests share an invocation only
within their length bucket (bert's default buckets: 8, 16, 32, 64) and
only with equal dims where the signature leaves a dim open."""
import subprocess

import numpy as np
import pytest
import tritonclient.http as httpclient

from conftest import DVM, OPEN_DIM, Server, metric, reference, sentence
from test_conformance import triton_inputs


def run_all(client, server, reqs):
    """Sends reqs at once: (each result, invocations, padding elements)."""
    before = server.metrics()
    pending = [client.async_infer("bert", triton_inputs(ids, mask, True)) for ids, mask in reqs]
    results = [p.get_result().as_numpy("hidden") for p in pending]
    after = server.metrics()
    delta = {k: metric(after, k, model="bert") - metric(before, k, model="bert")
             for k in ("dvm_batch_size_count", "dvm_padding_elements_total")}
    return results, delta["dvm_batch_size_count"], delta["dvm_padding_elements_total"]


def test_requests_of_several_rows(client, server, repo):
    """1 to 3 rows each, lengths 3 to 29, some rows masked short: every
    request gets its own rows back, equal to `dvm run` on them alone."""
    rng = np.random.default_rng(5)
    reqs = []
    for rows, length in zip(rng.integers(1, 4, 16), rng.integers(3, 30, 16)):
        ids, mask = sentence(rng, int(length), batch=int(rows))
        mask[0, int(rng.integers(1, length + 1)):] = 0
        reqs.append((ids, mask))
    results, batches, _ = run_all(client, server, reqs)
    for (ids, mask), got in zip(reqs, results, strict=True):
        assert got.shape[:2] == ids.shape
        np.testing.assert_allclose(got, reference(repo, ids, mask), rtol=1e-4, atol=1e-5)
    assert batches < len(reqs), "no two requests shared an invocation"


def test_length_buckets(client, server, repo):
    """Lengths at and just past bucket bounds (8, 9, 17, 33: one per bucket):
    requests batch only within their bucket, so nothing is padded."""
    rng = np.random.default_rng(6)
    reqs = [sentence(rng, int(n)) for n in rng.permutation([8, 9, 17, 33] * 5)]
    results, batches, padded = run_all(client, server, reqs)
    for (ids, mask), got in zip(reqs, results, strict=True):
        np.testing.assert_allclose(got, reference(repo, ids, mask), rtol=1e-4, atol=1e-5)
    assert batches < len(reqs), "no two requests shared an invocation"
    assert padded == 0, f"{padded} padding elements: requests of different buckets shared an invocation"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """A model whose signature leaves x's dim 1 open (`?`), batched on dim 0."""
    root = tmp_path_factory.mktemp("open")
    src, model = root / "square.dvms", root / "repo" / "square" / "1" / "model.dvmb"
    src.write_text(OPEN_DIM)
    model.parent.mkdir(parents=True)
    subprocess.run([DVM, "asm", str(src), "-o", str(model)], check=True)
    (root / "repo" / "square" / "config").write_text("batch = batch\nmax_batch = 8\nqueue_delay_us = 20000\n")
    s = Server(str(root / "repo"), str(root / "serve.log"))
    yield s
    assert s.stop() == 0, s.log_text()[-3000:]


def test_open_dims_batch_only_when_equal(open_server):
    """Requests whose open dim differs never share an invocation (joining
    them would need one width): each gets its own x * x, of its own width."""
    c = httpclient.InferenceServerClient(open_server.url, concurrency=16)
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal((int(rows), int(w))).astype(np.float32)
          for rows, w in zip(rng.integers(1, 3, 24), rng.permutation([3, 5, 8] * 8))]
    pending = []
    for x in xs:
        i = httpclient.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=True)
        pending.append(c.async_infer("square", [i]))
    for x, p in zip(xs, pending, strict=True):
        np.testing.assert_array_equal(p.get_result().as_numpy("y"), x * x)
    c.close()
    assert metric(open_server.metrics(), "dvm_batch_size_count", model="square") < len(xs), \
        "no two requests shared an invocation"
