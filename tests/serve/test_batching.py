"""How dvm serve's batcher groups requests (serve/batcher.c), through the
real tritonclient[http]: requests of several rows share invocations and
each gets back exactly its own rows; requests share an invocation only
within their length bucket (bert's default buckets: 8, 16, 32, 64)."""
import numpy as np
import pytest
import tritonclient.http as httpclient

from conftest import metric, reference, sentence
from test_conformance import bert_inputs


@pytest.fixture(scope="module")
def client(server):
    c = httpclient.InferenceServerClient(server.url, concurrency=16)
    yield c
    c.close()


def run_all(client, server, reqs):
    """Sends reqs at once: (each result, invocations, padding elements)."""
    before = server.metrics()
    pending = [client.async_infer("bert", bert_inputs(ids, mask, True)) for ids, mask in reqs]
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
