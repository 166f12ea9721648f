"""Fault tests: malformed HTTP and JSON, wrong dtypes, shapes and sizes,
huge declared sizes with small bodies, unknown models, clients that go away
mid-request, a corrupt .dvmb, the pool limit, a full queue, deadlines,
memory across many requests, and SIGTERM. After each, the server must
still answer a good request correctly."""
import http.client
import json
import os
import re
import shutil
import socket
import struct
import threading
import time

import numpy as np
import pytest

from conftest import DVM, Server, metric, reference, sentence


def post(server, path, body, headers=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    c.request("POST", path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def bert_json(ids, mask, **extra):
    return json.dumps({"inputs": [
        {"name": "ids", "datatype": "INT64", "shape": list(ids.shape), "data": ids.flatten().tolist()},
        {"name": "mask", "datatype": "INT64", "shape": list(mask.shape), "data": mask.flatten().tolist()}],
        **extra})


def assert_healthy(server, repo, model="bert"):
    ids, mask = sentence(np.random.default_rng(5), 6)
    status, _, data = post(server, f"/v2/models/{model}/versions/1/infer", bert_json(ids, mask))
    assert status == 200, data
    out = json.loads(data)["outputs"][0]
    got = np.array(out["data"], dtype=np.float32).reshape(out["shape"])
    np.testing.assert_array_equal(got, reference(repo, ids, mask))


def raw(server, data, read=True, timeout=2):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    s.sendall(data)
    reply = b""
    if read:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except socket.timeout:
            pass
    s.close()
    return reply


def test_malformed_http(server, repo):
    for junk in (b"\x00\x01\x02garbage\r\n\r\n", b"GET\r\n\r\n", b"POST /v2/models/bert/infer HTTP/1.1\r\n"
                 b"Content-Length: abc\r\n\r\n", b"POST /v2 HTTP/9.9\r\nHost: x\r\n\r\n",
                 b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n"):
        reply = raw(server, junk)
        assert reply == b"" or reply.startswith(b"HTTP/1.1 4") or reply.startswith(b"HTTP/1.1 5"), reply[:100]
        assert_healthy(server, repo)


def test_malformed_json_and_values(server, repo):
    ids, mask = sentence(np.random.default_rng(1), 4)
    good = json.loads(bert_json(ids, mask))
    bodies = {
        "{": "malformed JSON",
        "[]": "must be a JSON object",
        '{"inputs": 3}': "\"inputs\" must be an array",
        '{"inputs": [], "inputs": []}': "malformed JSON",
        "]]]]{{{{": "malformed JSON",  # closers first: the skeleton's scan must not go below the root
        json.dumps({**good, "id": 5}): "\"id\" must be a string",
    }
    def variant(i, **kw):
        b = json.loads(json.dumps(good))
        b["inputs"][i].update(kw)
        return json.dumps(b)
    bodies[variant(0, datatype="FP32")] = "datatype FP32, expected INT64"
    bodies[variant(0, shape=[1, 5])] = "data has 4 elements, its shape needs 5"
    bodies[variant(0, shape=[1, -4])] = "non-negative"
    bodies[variant(0, data=[1, 2, 3, "x"])] = "element 3 is not an integer"
    bodies[variant(0, data=[1, 2, 3, 4, 5])] = "more elements than its shape"
    bodies[variant(0, data=[1, 2, 3, 2 ** 63])] = "malformed JSON|out of range|not an integer"
    bodies[variant(0, shape=[2 ** 40, 2 ** 40], data=[])] = "must be in 1..64"
    bodies[variant(0, shape=[40, 64], data=[])] = "more than 2048 elements"  # --max-elements
    bodies[variant(0, name="nope")] = "no such input"
    bodies[variant(1, name="ids")] = "given twice"
    bodies[variant(0, data=[[[[[[[[[[1]]]]]]]]]])] = "nested too deeply"
    bodies[variant(0).replace('"data": [', '"data": [\x00', 1)] = "element 0 is not an integer"
    bodies[variant(0).replace('"data": [1', '"data": [1 \x00', 1)] = "malformed data"
    bodies[variant(0).replace('"data": [1', '"data": [1,,', 1)] = "malformed data"
    bodies[variant(0).replace('"data": [1', '"data": [1]', 1)] = "malformed"
    for body, message in bodies.items():
        status, _, data = post(server, "/v2/models/bert/infer", body)
        assert status == 400, (body[:80], data)
        err = json.loads(data)["error"]
        assert any(m in err for m in message.split("|")), (body[:80], err)
    assert_healthy(server, repo)


def test_empty_outputs_list_returns_every_output(server, repo):
    ids, mask = sentence(np.random.default_rng(6), 3)
    status, _, data = post(server, "/v2/models/bert/infer", bert_json(ids, mask, outputs=[]))
    assert status == 200, data
    out = json.loads(data)["outputs"]
    assert [o["name"] for o in out] == ["hidden"]
    got = np.array(out[0]["data"], dtype=np.float32).reshape(out[0]["shape"])
    np.testing.assert_array_equal(got, reference(repo, ids, mask))


def binary_request(ids, mask, sizes=None, tail=b""):
    header = json.dumps({"inputs": [
        {"name": n, "datatype": "INT64", "shape": list(x.shape), "parameters": {"binary_data_size": s}}
        for n, x, s in (("ids", ids, (sizes or {}).get("ids", ids.nbytes)),
                        ("mask", mask, (sizes or {}).get("mask", mask.nbytes)))]}).encode()
    return header, header + ids.tobytes() + mask.tobytes() + tail


def test_binary_sizes(server, repo):
    ids, mask = sentence(np.random.default_rng(2), 8)
    header, body = binary_request(ids, mask)
    hl = {"Inference-Header-Content-Length": str(len(header))}
    status, headers, data = post(server, "/v2/models/bert/infer", body, hl)
    assert status == 200
    cases = [
        (binary_request(ids, mask, {"ids": 10 ** 12}), None, "binary_data_size is 1000000000000"),
        (binary_request(ids, mask, tail=b"xx"), None, "130 bytes of binary data follow the header, the inputs use 128"),
        ((header, body[:-8]), None, "only 56 bytes of binary data remain"),
        ((header, body), str(len(body) + 100), "larger than the body"),
        ((header, body), "12x", "not a number"),
        ((header, body), str(len(header) - 3), "malformed JSON"),
    ]
    for (h, b), hlen, message in cases:
        status, _, data = post(server, "/v2/models/bert/infer", b,
                               {"Inference-Header-Content-Length": hlen or str(len(h))})
        assert status == 400 and message in json.loads(data)["error"], data
    assert_healthy(server, repo)


def test_huge_declared_sizes(server, repo):
    # A Content-Length past the limit is refused before the body is read.
    reply = raw(server, b"POST /v2/models/bert/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{")
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    # A large Content-Length with a small body, then the client leaves.
    raw(server, b"POST /v2/models/bert/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n{\"inp",
        read=False)
    assert_healthy(server, repo)


def test_unknown_routes_and_models(server, repo):
    for method, path, status in (("POST", "/v2/models/nosuch/infer", 404), ("GET", "/v3", 404),
                                 ("GET", "/v2/models/bert/infer", 405), ("POST", "/v2/models/bert", 405),
                                 ("POST", "/v2/models/bert/versions/x/infer", 404),
                                 ("POST", "/v2/repository/models/nosuch/unload", 404),
                                 ("GET", "/v2/repository/index", 405)):
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        c.request(method, path, body="{}" if method == "POST" else None)
        r = c.getresponse()
        assert r.status == status, (method, path, r.status)
        assert "error" in json.loads(r.read())
        c.close()
    assert_healthy(server, repo)


def test_corrupt_model_in_repository(server, repo):
    status, _, data = post(server, "/v2/repository/models/bad/load", "{}")
    assert status == 400 and "truncated" in json.loads(data)["error"]
    status, _, data = post(server, "/v2/models/bad/infer", "{}")
    assert status == 404
    assert_healthy(server, repo)


def test_pool_limit(server, repo):
    """tight's pool holds 30000 bytes: seq 8 fits (6 KiB), seq 64 does not (41 KiB; 507)."""
    ids, mask = sentence(np.random.default_rng(3), 64)
    status, _, data = post(server, "/v2/models/tight/infer", bert_json(ids, mask))
    assert status == 507 and "RESOURCE_EXHAUSTED" not in data.decode() and "pool" in data.decode(), data
    assert_healthy(server, repo, "tight")
    status, _, _ = post(server, "/v2/models/tight/infer", bert_json(ids, mask))
    assert status == 507
    assert_healthy(server, repo, "tight")
    assert metric(server.metrics(), "dvm_requests_total", model="tight", outcome="pool_exhausted") == 2


def test_client_disconnect_cancels_queued_work(server, repo):
    """slow waits 0.6 s for a batch: a client that leaves before is cancelled."""
    before = metric(server.metrics(), "dvm_requests_total", model="slow", outcome="cancelled") \
        if "slow" in server.metrics() else 0
    ids, mask = sentence(np.random.default_rng(4), 5)
    body = bert_json(ids, mask).encode()
    raw(server, b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        read=False)
    time.sleep(1.0)
    after = metric(server.metrics(), "dvm_requests_total", model="slow", outcome="cancelled")
    assert after == before + 1
    assert_healthy(server, repo, "slow")


def test_deadline_and_queue_limit(server, repo):
    ids, mask = sentence(np.random.default_rng(6), 5)
    status, _, data = post(server, "/v2/models/slow/infer", bert_json(ids, mask, parameters={"timeout": 50000}))
    assert status == 504 and "deadline" in json.loads(data)["error"]
    # max_queue = 3: of 6 requests at once, some are turned away with Retry-After
    results = []
    def go():
        results.append(post(server, "/v2/models/slow/infer", bert_json(ids, mask)))
    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(r[0] for r in results)
    assert 200 in codes and 503 in codes, codes
    assert all(r[1].get("Retry-After") == "1" for r in results if r[0] == 503)
    assert_healthy(server, repo, "slow")


def test_metrics_text(server):
    text = server.metrics()
    for name in ("dvm_requests_total", "dvm_queue_seconds_bucket", "dvm_queued_requests", "dvm_compute_seconds_sum",
                 "dvm_batch_size_count", "dvm_padding_elements_total", "dvm_pool_bytes_in_use",
                 "dvm_pool_bytes_peak", "dvm_pool_bytes_cached", "dvm_http_responses_total"):
        assert f"# TYPE {name.replace('_bucket', '').replace('_sum', '').replace('_count', '')} " in text
        assert name in text
    assert metric(text, "dvm_requests_total", model="bert", outcome="success") > 0


def test_rss_flat_across_varying_shapes(server, repo):
    """RSS after a warm-up and after many more requests of varying shapes
    stays within 10% (docs/serving.md has a 20,000-request run)."""
    rng = np.random.default_rng(8)
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    def burst(n):
        for _ in range(n):
            ids, mask = sentence(rng, int(rng.integers(1, 65)), int(rng.integers(1, 4)))
            c.request("POST", "/v2/models/plain/infer", body=bert_json(ids, mask))
            r = c.getresponse()
            r.read()
            assert r.status == 200
    burst(300)
    rss0 = server.rss_kb()
    burst(900)
    rss1 = server.rss_kb()
    c.close()
    assert rss1 <= rss0 * 1.10, (rss0, rss1)


def test_sigterm_drains(repo, tmp_path):
    """SIGTERM while a request waits in a queue: it is answered, exit 0."""
    s = Server(repo, str(tmp_path / "serve.log"))
    ids, mask = sentence(np.random.default_rng(9), 5)
    out = []
    t = threading.Thread(target=lambda: out.append(post(s, "/v2/models/slow/infer", bert_json(ids, mask))))
    t.start()
    deadline = time.monotonic() + 30
    while metric(s.metrics(), "dvm_queued_requests", model="slow") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    rc = s.stop()
    t.join()
    assert rc == 0
    assert out and out[0][0] == 200, out
    log = s.log_text()
    assert '"path":"/v2/models/slow/infer","status":200' in log and "dvm serve: stopped" in log, log


def test_model_file_overwritten_while_served(repo, tmp_path):
    """A served model.dvmb written over in place (as cp and rsync --inplace
    do), with the same size and then cut to nothing: the server answers as
    before, with no reload, and does not die (SIGBUS of a mapped file)."""
    os.makedirs(tmp_path / "repo" / "plain" / "1")
    path = tmp_path / "repo" / "plain" / "1" / "model.dvmb"
    shutil.copy(os.path.join(repo, "plain", "1", "model.dvmb"), path)
    s = Server(str(tmp_path / "repo"), str(tmp_path / "serve.log"))
    assert_healthy(s, repo, "plain")
    data = path.read_bytes()
    with open(path, "r+b") as f:
        f.write(data[:64] + bytes(b ^ 0x5A for b in data[64:]))
    assert_healthy(s, repo, "plain")
    with open(path, "r+b") as f:
        f.truncate(0)
    assert_healthy(s, repo, "plain")
    assert s.stop() == 0, s.log_text()[-3000:]


def held_open(conn, seconds):
    """True if the server keeps conn open (no EOF, no reset) for `seconds`."""
    conn.settimeout(seconds)
    try:
        return conn.recv(1) != b""
    except socket.timeout:
        return True
    except ConnectionError:
        return False


def test_idle_and_slow_clients_cannot_lock_others_out(repo, tmp_path):
    """Idle and trickling connections fill neither the server nor one
    client's share: a client's connections past its cap are refused at
    once; past max_connections, spares answer health and metrics and refuse
    the rest with 503; headers and bodies sent a byte at a time are cut at
    their deadlines; an idle connection goes at the header deadline."""
    s = Server(repo, str(tmp_path / "serve.log"), "--max-connections", "8", "--max-per-client", "5",
               "--header-timeout", "2", "--body-timeout", "2")
    at = lambda host: socket.create_connection(("127.0.0.1", s.port), timeout=5, source_address=(host, 0))
    mine = [at("127.0.0.1") for _ in range(5)]
    extra = at("127.0.0.1")
    assert not held_open(extra, 1), "a 6th connection from one client was kept"
    others = [at("127.0.0.2") for _ in range(3)]  # 8 open now: the limit
    time.sleep(0.2)
    late = at("127.0.0.3")
    late.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    assert late.recv(4096).startswith(b"HTTP/1.1 200"), "health not answered at the limit"
    late.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert late.recv(65536).startswith(b"HTTP/1.1 200"), "metrics not answered at the limit"
    late.close()
    late = at("127.0.0.3")
    late.sendall(b"GET /v2/models/plain HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = late.recv(4096)
    assert reply.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in reply and b"limit of 8" in reply, reply
    late.close()
    # a trickle of header bytes, and then of body bytes, each cut at its deadline
    def trickle(data, head=b""):
        c = at("127.0.0.4")
        c.sendall(head)
        t0 = time.monotonic()
        try:
            for b in data:
                c.sendall(bytes([b]))
                time.sleep(0.25)
        except OSError:
            pass
        c.close()
        return time.monotonic() - t0
    assert trickle(b"GET /v2/health/live HTTP/1.1\r\nX-Long: " + b"a" * 100) < 4
    assert trickle(b"{" * 100, b"POST /v2/models/plain/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n") < 4
    # the idle ones are gone at the header deadline, and others are served again
    for c in mine + others:
        assert not held_open(c, 3)
        c.close()
    assert_healthy(s, repo, "plain")
    assert s.stop() == 0, s.log_text()[-3000:]


def test_model_table_holds_only_models(repo, tmp_path):
    """Loading names that have no folder takes no place in the model table
    (300 of them, more than it holds), unloading gives a model's place
    back, and a model added to the repository afterwards still loads."""
    os.makedirs(tmp_path / "repo" / "plain" / "1")
    shutil.copy(os.path.join(repo, "plain", "1", "model.dvmb"), tmp_path / "repo" / "plain" / "1" / "model.dvmb")
    s = Server(str(tmp_path / "repo"), str(tmp_path / "serve.log"))
    for i in range(300):
        status, _, data = post(s, f"/v2/repository/models/ghost{i}/load", "{}")
        assert status == 404 and b"no folder" in data, (status, data)
    index = json.loads(post(s, "/v2/repository/index", "{}")[2])
    assert [m["name"] for m in index] == ["plain"], index
    assert post(s, "/v2/repository/models/plain/unload", "{}")[0] == 200
    assert post(s, "/v2/models/plain/infer", "{}")[0] == 404
    assert json.loads(post(s, "/v2/repository/index", "{}")[2]) == [
        {"name": "plain", "state": "UNAVAILABLE", "reason": "not loaded"}]
    os.makedirs(tmp_path / "repo" / "late" / "1")
    shutil.copy(os.path.join(repo, "plain", "1", "model.dvmb"), tmp_path / "repo" / "late" / "1" / "model.dvmb")
    for name in ("plain", "late"):
        assert post(s, f"/v2/repository/models/{name}/load", "{}")[0] == 200
        assert_healthy(s, repo, name)
    assert s.stop() == 0, s.log_text()[-3000:]


def test_json_memory_is_bounded_by_the_body(repo, tmp_path):
    """A 24 MiB body of JSON numbers (12 M elements for a [1, 4] input):
    refused for its element count, while the server's peak RSS grows by
    less than three times the body (a document tree of it took over 20
    times); a request of millions of other JSON values is refused before
    any tree of it is built."""
    s = Server(repo, str(tmp_path / "serve.log"))
    assert_healthy(s, repo)
    with open(f"/proc/{s.proc.pid}/status") as f:
        before = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024
    ids = '{"name": "ids", "datatype": "INT64", "shape": [1, 4], "data": [' + "1," * (12 << 20) + '1]}'
    mask = '{"name": "mask", "datatype": "INT64", "shape": [1, 4], "data": [1, 1, 1, 1]}'
    body = '{"inputs": [' + ids + ", " + mask + "]}"
    status, _, data = post(s, "/v2/models/bert/infer", body, timeout=120)
    assert status == 400 and b"more elements than its shape holds" in data, data[:200]
    with open(f"/proc/{s.proc.pid}/status") as f:
        grown = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) * 1024 - before
    if not os.environ.get("DVM_SANITIZED"):  # AddressSanitizer holds freed memory in quarantine
        assert grown < 3 * len(body), (grown, len(body))
    junk = '{"inputs": [' + mask + '], "junk": [' + "[]," * (1 << 20) + "[]]}"
    status, _, data = post(s, "/v2/models/bert/infer", junk, timeout=120)
    assert status == 400 and b"more than 4096 JSON values" in data, data[:200]
    assert_healthy(s, repo)
    assert s.stop() == 0, s.log_text()[-3000:]


DTYPES = {"FP32": (1, "float32"), "FP64": (11, "float64"), "INT8": (3, "int8"), "INT16": (5, "int16"),
          "INT32": (6, "int32"), "INT64": (7, "int64"), "UINT8": (2, "uint8"), "UINT16": (4, "uint16"),
          "UINT32": (12, "uint32"), "UINT64": (13, "uint64"), "BOOL": (9, "bool")}


def test_json_values_are_checked_against_every_dtype(tmp_path):
    """Each datatype takes exactly the JSON values it holds: its extremes
    round-trip; one past them, a float past FP32's or FP64's range (not
    infinity), a fraction for an integer type, a number for BOOL are 400
    naming the input and the element."""
    from onnx import TensorProto, helper as oh
    names = list(DTYPES)
    nodes = [oh.make_node("Identity", [f"x{i}"], [f"y{i}"]) for i in range(len(names))]
    g = oh.make_graph(nodes, "dtypes", [oh.make_tensor_value_info(f"x{i}", DTYPES[n][0], ["n"])
                                        for i, n in enumerate(names)],
                      [oh.make_tensor_value_info(f"y{i}", DTYPES[n][0], ["n"]) for i, n in enumerate(names)])
    os.makedirs(tmp_path / "repo" / "ids" / "1")
    with open(tmp_path / "repo" / "ids" / "1" / "model.onnx", "wb") as f:
        f.write(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]).SerializeToString())
    with open(tmp_path / "repo" / "ids" / "config", "w") as f:
        f.write("dim = n=1..8\n")
    s = Server(str(tmp_path / "repo"), str(tmp_path / "serve.log"))
    def edges(n):  # four values each dtype holds, and values it does not
        dt = np.dtype(DTYPES[n][1])
        if n == "BOOL":
            return ["true", "false", "false", "true"], ["1", "0.5", '"true"']
        if dt.kind == "f":
            big = "3.4028234e38" if n == "FP32" else "1.7976931348623157e308"
            return [big, "-" + big, "1e-45", "0"], ["1e39" if n == "FP32" else "1e309", "-1e400", "1e999"]
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        return [str(lo), str(hi), "0", "1"], [str(lo - 1), str(hi + 1), "1.5", "1e3", "true"]
    def request(values_of):
        inputs = [f'{{"name": "x{i}", "datatype": "{n}", "shape": [{len(values_of(n))}], '
                  f'"data": [{", ".join(values_of(n))}]}}' for i, n in enumerate(names)]
        return '{"inputs": [' + ", ".join(inputs) + "]}"
    status, _, data = post(s, "/v2/models/ids/infer", request(lambda n: edges(n)[0]))
    assert status == 200, data
    outs = {o["name"]: o for o in json.loads(data)["outputs"]}
    for i, n in enumerate(names):
        good = edges(n)[0]
        want = np.array([json.loads(v) for v in good], dtype=DTYPES[n][1])
        assert outs[f"y{i}"]["datatype"] == n
        np.testing.assert_array_equal(np.array(outs[f"y{i}"]["data"], dtype=DTYPES[n][1]), want)
    for i, n in enumerate(names):
        for v in edges(n)[1]:
            values_of = lambda m: [v] + edges(m)[0][1:] if m == n else edges(m)[0]
            status, _, data = post(s, "/v2/models/ids/infer", request(values_of))
            err = json.loads(data)["error"]
            assert status == 400 and f'input "x{i}": element 0' in err, (n, v, status, err)
            assert ("out of range" in err) == (v not in ("1.5", "1e3", "true", "1", "0.5", '"true"')), (n, v, err)
    assert s.stop() == 0, s.log_text()[-3000:]


def test_onnx_cache_is_keyed_by_content(repo, tmp_path):
    """model.onnx replaced by another model of the same size and the same
    modification time (cp -p, reproducible builds): a reload and a restart
    with --cache-dir compile the new one instead of serving the old."""
    import onnx
    os.makedirs(tmp_path / "repo" / "mlp" / "1")
    path = tmp_path / "repo" / "mlp" / "1" / "model.onnx"
    shutil.copy2(os.path.join(repo, "mlp", "1", "model.onnx"), path)
    shutil.copy(os.path.join(repo, "mlp", "config"), tmp_path / "repo" / "mlp" / "config")
    cache = tmp_path / "cache"
    cache.mkdir()
    x = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))}]})
    s = Server(str(tmp_path / "repo"), str(tmp_path / "serve.log"), "--cache-dir", str(cache))
    first = post(s, "/v2/models/mlp/infer", x)
    assert first[0] == 200
    m = onnx.load(str(path))
    for init in m.graph.initializer:  # the same bytes count, other weights
        w = onnx.numpy_helper.to_array(init)
        init.CopyFrom(onnx.numpy_helper.from_array((w * 2 + 1).astype(w.dtype), init.name))
    stat = path.stat()
    data = m.SerializeToString()
    assert len(data) == stat.st_size and data != path.read_bytes()
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert post(s, "/v2/repository/models/mlp/load", "{}")[0] == 200
    second = post(s, "/v2/models/mlp/infer", x)
    assert second[0] == 200 and second[2] != first[2], "the old model was served from the cache"
    assert s.stop() == 0
    s = Server(str(tmp_path / "repo"), str(tmp_path / "serve2.log"), "--cache-dir", str(cache))
    assert post(s, "/v2/models/mlp/infer", x)[2] == second[2]
    assert len(list(cache.glob("mlp-*.dvmb"))) == 2, list(cache.iterdir())
    assert s.stop() == 0


def test_small_messages(repo, tmp_path):
    """A model name too long says so; an Inference-Header-Content-Length
    past 2^64 is not a number of bytes (it read as 18446744073709551615); a
    pad_value past the doubles (mask:1e400) is a bad value of the config."""
    os.makedirs(tmp_path / "repo" / "inf" / "1")
    shutil.copy(os.path.join(repo, "bert", "1", "model.dvmb"), tmp_path / "repo" / "inf" / "1" / "model.dvmb")
    with open(tmp_path / "repo" / "inf" / "config", "w") as f:
        f.write("batch = batch\npad_value = mask:1e400\n")
    s = Server(repo, str(tmp_path / "serve.log"))
    status, _, data = post(s, "/v2/repository/models/" + "a" * 130 + "/load", "{}")
    assert status == 400 and b"model name of 130 characters: at most 127" in data, data
    ids, mask = sentence(np.random.default_rng(3), 4)
    header, body = binary_request(ids, mask)
    status, _, data = post(s, "/v2/models/bert/infer", body, {"Inference-Header-Content-Length": "9" * 25})
    assert status == 400 and b"Inference-Header-Content-Length is not a number of bytes" in data, data
    assert s.stop() == 0
    s = Server(str(tmp_path / "repo"), str(tmp_path / "serve2.log"))
    index = json.loads(post(s, "/v2/repository/index", "{}")[2])
    assert index[0]["state"] == "UNAVAILABLE" and "config:2: bad value for pad_value" in index[0]["reason"], index
    assert s.stop() == 0


def test_priority(server, repo):
    """prio: one worker, batches of 2, 400 ms queue delay. a (length 5) and
    b (length 6) wait in the queue; c (length 6, priority 1) goes to the
    head, finds b to fill its batch and runs at once, 200 ms before a.
    Without priorities a would run first (at the end of its window), then
    b with c."""
    done = {}
    def go(name, length, priority, delay):
        time.sleep(delay)
        ids, mask = sentence(np.random.default_rng(length), length)
        status, _, _ = post(server, "/v2/models/prio/infer", bert_json(ids, mask, parameters={"priority": priority}))
        done[name] = (status, time.monotonic())
    threads = [threading.Thread(target=go, args=a) for a in (("a", 5, 0, 0), ("b", 6, 0, 0.1), ("c", 6, 1, 0.2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(v[0] == 200 for v in done.values()), done
    assert done["c"][1] < done["a"][1] - 0.1 and done["b"][1] < done["a"][1] - 0.1, done


def test_sigterm_under_load(repo, tmp_path):
    """SIGTERM while 16 clients keep sending on keep-alive connections: the
    server exits 0 promptly; every answer is a right result or a 503."""
    rng = np.random.default_rng(10)
    pool = [sentence(rng, n) for n in (3, 9, 17, 30, 64)]
    refs = [reference(repo, ids, mask) for ids, mask in pool]
    s = Server(repo, str(tmp_path / "serve.log"))
    stop = threading.Event()
    codes, errors = [], []
    def client(seed):
        rng = np.random.default_rng(seed)
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        while not stop.is_set():
            k = int(rng.integers(len(pool)))
            ids, mask = pool[k]
            try:
                c.request("POST", "/v2/models/bert/versions/1/infer", body=bert_json(ids, mask))
                r = c.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                break  # the server closed the connection: it is going away
            codes.append(r.status)
            if r.status == 200:
                out = json.loads(data)["outputs"][0]
                got = np.array(out["data"], dtype=np.float32).reshape(out["shape"])
                if not np.allclose(got, refs[k], rtol=1e-4, atol=1e-5):
                    errors.append("wrong result")
            elif r.status != 503:
                errors.append(data)
        c.close()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    t0 = time.monotonic()
    rc = s.stop()
    took = time.monotonic() - t0
    stop.set()
    for t in threads:
        t.join()
    assert rc == 0 and took < 10, (rc, took)
    assert not errors, errors[:3]
    assert codes.count(200) > 0


def test_onnx_cache(repo, tmp_path):
    """--cache-dir keeps mlp's compiled .dvmb; a reload maps it; a corrupt
    entry is compiled again and rewritten."""
    cache = tmp_path / "cache"
    cache.mkdir()
    s = Server(repo, str(tmp_path / "serve.log"), "--cache-dir", str(cache))
    try:
        files = list(cache.glob("mlp-*.dvmb"))
        assert len(files) == 1, list(cache.iterdir())
        good = files[0].read_bytes()
        x = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": list(range(16))}]}
        first = post(s, "/v2/models/mlp/infer", json.dumps(x))
        assert first[0] == 200
        assert post(s, "/v2/repository/models/mlp/load", "{}")[0] == 200  # from the cache
        assert post(s, "/v2/models/mlp/infer", json.dumps(x))[2] == first[2]
        files[0].write_bytes(good[:100])
        assert post(s, "/v2/repository/models/mlp/load", "{}")[0] == 200  # compiled again
        assert files[0].read_bytes() == good
        assert post(s, "/v2/models/mlp/infer", json.dumps(x))[2] == first[2]
    finally:
        assert s.stop() == 0
    # another dvm build (here a copy with a byte more, and this one's
    # modification time) does not load what this one compiled: its entry
    # has another key
    other = tmp_path / "dvm"
    shutil.copy2(DVM, other)
    with open(other, "ab") as f:
        f.write(b"\0")
    shutil.copystat(DVM, other)
    s = Server(repo, str(tmp_path / "serve2.log"), "--cache-dir", str(cache), exe=str(other))
    try:
        assert len(list(cache.glob("mlp-*.dvmb"))) == 2, list(cache.iterdir())
        assert post(s, "/v2/models/mlp/infer", json.dumps(x))[2] == first[2]
    finally:
        assert s.stop() == 0
