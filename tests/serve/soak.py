#!/usr/bin/env python3
"""Soak of `dvm serve` on 127.0.0.1: N requests (default 200,000) of mixed
models, shapes and faults from concurrent clients, every answer checked.

Models, one repository and one server:
  bert      the BERT-style fixture (.dvmb), batched with length buckets 8 16 32 48 64
  bert-off  the same file, each request alone
  mlp       tests/models/mlp.onnx, compiled at load and batched
  resnet    tests/models/resnet.onnx, compiled at load: batch, height and width symbols
  square    x * x, whose signature leaves a dim open (batched only with equal widths)
  cycled    mlp.onnx again, unloaded and loaded while requests run
  held      bert with a 5 s queue delay: deadlines and clients leaving the queue go there
Shapes are 1, primes, the bucket bounds and one past them, the maxima.
Bodies are JSON or binary tensors, outputs JSON or binary; each client
sends over its keep-alive connection and one request in four over a fresh
one. Every tenth request is a fault, the kinds of FAULTS in turn.

Every 200 is checked against `dvm run` on the same input, run once per
(model, input) (square: NumPy): exactly for the models that run each
request alone, within --tol otherwise (batching changes only summation
order); every fault must get its status; a client timeout (60 s) or a
broken connection where an answer was due counts as lost. At the end the
server's own counts by status (its /metrics) must equal what the clients
saw, and its RSS, sampled every 2 s, may not grow by more than
--max-growth percent after the warm-up (the first 10% of the requests).
Prints tables of the faults and of RSS; exits 1 on anything lost, wrong,
unexpected or grown, or when the server does not exit 0 on SIGTERM (or
its log has a sanitizer's report).

  python3 tests/serve/soak.py [--requests 200000] [--concurrency 16] [--max-growth 10]"""
import argparse
import collections
import http.client
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib")]
from conftest import OPEN_DIM, Server, metric  # noqa: E402
from dvmtest.cli import SANITIZER_REPORTS, assemble, compile_onnx, run_module  # noqa: E402
from dvmtest.paths import MODELS  # noqa: E402
from load_test import MODES, cpu_model, infer_body, outputs_of  # noqa: E402

MAX_BODY = 1 << 20  # --max-body: bodies here are at most about 250 kB
# model files and their symbols' ranges (`dvm compile --dim`; `dim` lines where served as model.onnx)
DIMS = {"bert": ["batch=1..64", "seq=1..64"], "mlp": ["batch=1..64"],
        "resnet": ["batch=1..8", "height=1..64", "width=1..64"]}
# name: (model file, served as, config)
REPO = {
    "bert": ("bert", "model.dvmb", MODES["batching"]),
    "bert-off": ("bert", "model.dvmb", MODES["off"]),
    "mlp": ("mlp", "model.onnx", "batch = batch\nmax_batch = 8\nqueue_delay_us = 1000\n"),
    "resnet": ("resnet", "model.onnx", "batch = batch\nmax_batch = 8\nqueue_delay_us = 1000\n"),
    "square": ("square", "model.dvmb", "batch = batch\nmax_batch = 8\nqueue_delay_us = 1000\n"),
    "cycled": ("mlp", "model.onnx", ""),
    "held": ("bert", "model.dvmb", "batch = batch\nmax_batch = 64\nqueue_delay_us = 5000000\n"),
}
# requests that are not faults: model, share, exact (runs each request alone)
TRAFFIC = [("bert", 25, False), ("bert-off", 20, True), ("mlp", 15, False), ("resnet", 15, False),
           ("square", 10, True), ("cycled", 15, True)]
OUTPUT = {"bert": "hidden", "mlp": "y", "resnet": "logits", "square": "y"}
FAULTS = ["disconnect mid-body", "disconnect mid-response", "disconnect in queue", "deadline",
          "oversize (Content-Length)", "oversize (chunked)", "malformed", "unknown model", "reload",
          "unload/load"]
# what each kind must get: an HTTP status, or None for nothing (the client left first); cycled is
# 404 while unloaded and 503 when unloaded between its look-up and its queueing
EXPECTED = {"disconnect mid-body": {None}, "disconnect mid-response": {200}, "disconnect in queue": {None},
            "deadline": {504}, "oversize (Content-Length)": {413}, "oversize (chunked)": {413},
            "malformed": {400}, "unknown model": {404}, "reload": {200}, "unload/load": {200},
            **{"infer " + t[0]: {200} for t in TRAFFIC}, "infer cycled": {200, 404, 503}}
TIMEOUT = 60  # seconds a client waits for an answer
SAMPLE_S = 2.0


def build_soak_repo(root):
    """The repository, and for each model file the .dvmb its references run."""
    files = {name: compile_onnx(os.path.join(MODELS, name + ".onnx"), *[a for d in dims for a in ("--dim", d)],
                                out=os.path.join(root, name + ".dvmb")) for name, dims in DIMS.items()}
    files["square"] = assemble(OPEN_DIM, os.path.join(root, "square.dvmb"))
    for name, (model, served, config) in REPO.items():
        os.makedirs(os.path.join(root, "repo", name, "1"))
        if served == "model.onnx":
            shutil.copy(os.path.join(MODELS, model + ".onnx"), os.path.join(root, "repo", name, "1", served))
            config += "".join(f"dim = {d}\n" for d in DIMS[model])
        else:
            shutil.copy(files[model], os.path.join(root, "repo", name, "1", served))
        with open(os.path.join(root, "repo", name, "config"), "w") as f:
            f.write(config)
    return os.path.join(root, "repo"), files


def input_pools(files, rng):
    """For each model file, [(inputs, reference output)] at awkward shapes."""
    pools = collections.defaultdict(list)
    for length in (1, 2, 3, 7, 8, 9, 13, 16, 17, 31, 32, 33, 47, 48, 49, 61, 63, 64):
        for rows in (1, int(rng.choice([2, 3, 5]))):
            ids = rng.integers(1, 100, (rows, length), dtype=np.int64)
            mask = np.ones_like(ids)
            mask[rows - 1, int(rng.integers(1, length + 1)):] = 0  # the last row's tail is padding
            pools["bert"].append({"ids": ids, "mask": mask})
    for rows in (1, 2, 3, 4, 5, 7, 8, 9, 13, 17, 31, 64):
        pools["mlp"].append({"x": rng.standard_normal((rows, 16)).astype(np.float32)})
    for rows, h, w in ((1, 1, 1), (1, 2, 5), (2, 7, 64), (1, 64, 64), (3, 31, 13), (8, 8, 8), (1, 9, 17),
                       (2, 16, 16), (5, 17, 9), (1, 63, 1), (1, 32, 32), (4, 13, 7)):
        pools["resnet"].append({"image": rng.standard_normal((rows, 3, h, w)).astype(np.float32)})
    for rows, w in ((1, 1), (1, 3), (2, 8), (3, 17), (1, 31), (5, 3), (2, 1), (4, 9), (64, 2)):
        pools["square"].append({"x": rng.standard_normal((rows, w)).astype(np.float32)})
    out = {}
    for model, pool in pools.items():
        out[model] = [(x, x["x"] * x["x"] if model == "square" else run_module(files[model], x, 1, threads=1)[0])
                      for x in pool]
    return out


class Tally:
    """What the clients sent and saw, shared by their threads."""

    def __init__(self, n):
        self.lock = threading.Lock()
        self.n = n
        self.next = 0  # requests taken
        self.done = 0  # requests finished
        self.connections = 0
        self.seen = collections.Counter()  # (kind, status or None)
        self.problems = collections.Counter()  # ("lost" | "wrong", kind)
        self.examples = []

    def take(self):
        with self.lock:
            if self.next == self.n:
                return None
            self.next += 1
            return self.next - 1

    def connected(self):
        with self.lock:
            self.connections += 1

    def record(self, kind, status, problem=None, why=""):
        """A request's status (None: no answer), and what was wrong with it."""
        with self.lock:
            self.done += 1
            if problem != "lost":
                self.seen[(kind, status)] += 1
            if problem:
                self.problems[(problem, kind)] += 1
                if self.problems[(problem, kind)] <= 3:
                    self.examples.append(f"{problem}: {kind}: {why}")


class Client:
    """One client thread: its keep-alive connection, and fresh ones."""

    def __init__(self, soak, seed):
        self.s = soak
        self.rng = np.random.default_rng(seed)
        self.conn = None

    def post(self, path, body, headers=None, fresh=False):
        """(status, response, data); raises on a broken connection or timeout."""
        if fresh or self.conn is None:
            self.s.tally.connected()
            c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=TIMEOUT)
            if not fresh:
                self.conn = c
        else:
            c = self.conn
        try:
            c.request("POST", path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            c.close()
            self.conn = None if c is self.conn else self.conn
            raise
        if fresh:
            c.close()
        return r.status, r, data

    def raw(self, rcvbuf=0):
        """A fresh socket (with a small receive window when rcvbuf is given)."""
        self.s.tally.connected()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(TIMEOUT)
        s.connect(("127.0.0.1", self.s.port))
        return s

    def pick(self, model, largest=False):
        """An input of model and its reference; one of the 3 largest when asked."""
        pool = self.s.pools[REPO[model][0]]
        if largest:
            pool = sorted(pool, key=lambda p: sum(v.size for v in p[0].values()))[-3:]
        return pool[int(self.rng.integers(len(pool)))]

    def body(self, x, binary, binary_out):
        """infer_body(x, ...), made once."""
        key = (id(x), binary, binary_out)
        if key not in self.s.bodies:
            self.s.bodies[key] = infer_body(x, binary, binary_out)
        return self.s.bodies[key]

    def run(self):
        while (i := self.s.tally.take()) is not None:
            name, _, exact = TRAFFIC[int(self.rng.choice(len(TRAFFIC), p=self.s.shares))]
            kind = FAULTS[i // 10 % len(FAULTS)] if i % 10 == 9 else "infer " + name
            try:
                if kind in ACTIONS:
                    ACTIONS[kind](self, kind, i // (10 * len(FAULTS)))
                else:
                    self.infer(kind, name, exact, i < self.s.tally.n // 50)  # the pools meet the largest batches early
            except (OSError, http.client.HTTPException) as e:
                self.s.tally.record(kind, None, "lost", repr(e))
            except Exception as e:  # noqa: BLE001 (an answer this script cannot read is wrong)
                self.s.tally.record(kind, -1, "wrong", repr(e))
        if self.conn:
            self.conn.close()

    def infer(self, kind, name, exact, largest):
        x, ref = self.pick(name, largest)
        body, hlen = self.body(x, bool(self.rng.integers(2)), bool(self.rng.integers(2)))
        status, r, data = self.post(f"/v2/models/{name}/infer", body,
                                    {"Inference-Header-Content-Length": str(hlen)} if hlen else {},
                                    fresh=self.rng.integers(4) == 0)
        if status != 200:
            return self.check(kind, status, data)
        try:
            hl = r.getheader("Inference-Header-Content-Length")
            got = outputs_of(data, int(hl) if hl else None)[OUTPUT[REPO[name][0]]]
            diff = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
            ok = diff == 0 if exact else diff <= self.s.tol * (1 + float(np.max(np.abs(ref))))
        except (ValueError, KeyError, TypeError) as e:
            diff, ok = repr(e), False
        self.s.tally.record(kind, 200, None if ok else "wrong",
                            f"{name} {[v.shape for v in x.values()]}: differs by {diff}")

    def check(self, kind, status, data=b""):
        ok = status in EXPECTED[kind]
        self.s.tally.record(kind, status, None if ok else "wrong", f"{status} {data[:200]!r}")

    def fault_disconnect(self, kind, k):
        """Gone mid-body, in the queue, or mid-response."""
        x = self.s.big if kind == "disconnect mid-response" else self.pick("bert")[0]
        model = {"disconnect mid-body": "bert", "disconnect in queue": "held"}.get(kind, "bert-off")
        body, _ = self.body(x, False, False)
        s = self.raw(rcvbuf=4096 if kind == "disconnect mid-response" else 0)
        head = b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % (
            model.encode(), len(body))
        if kind == "disconnect mid-body":
            s.sendall(head + body[:len(body) // 2])
            s.close()
            return self.s.tally.record(kind, None)
        s.sendall(head + body)
        if kind == "disconnect in queue":  # held waits 5 s for a batch; its handler looks every 50 ms
            time.sleep(0.1)
            s.close()
            return self.s.tally.record(kind, None)
        line = b""  # the status line of a large answer, then a reset
        while b"\r\n" not in line and (chunk := s.recv(256)):
            line += chunk
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        if b"\r\n" not in line:
            return self.s.tally.record(kind, None, "lost", f"the connection closed after {line!r}")
        self.check(kind, int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else -1, line)

    def fault_deadline(self, kind, k):
        """Deadlines of 1 us, 1 ms and 100 ms on held, which waits 5 s for a batch."""
        body, hlen = infer_body(self.pick("held")[0], k % 2 == 0, False, {"timeout": (1, 1000, 100000)[k % 3]})
        status, _, data = self.post("/v2/models/held/infer", body,
                                    {"Inference-Header-Content-Length": str(hlen)} if hlen else {})
        self.check(kind, status, data)

    def fault_oversize(self, kind, k):
        self.s.tally.connected()
        c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=TIMEOUT)
        try:
            if kind == "oversize (Content-Length)":  # refused from the header, before any body
                c.putrequest("POST", "/v2/models/bert/infer")
                c.putheader("Content-Length", str(MAX_BODY + 1 + k % 1000))
                c.endheaders()
            else:  # no length given: refused once the body passed the limit
                chunk = b" " * 65536
                c.request("POST", "/v2/models/mlp/infer", body=(chunk for _ in range(MAX_BODY // len(chunk) + 1)),
                          encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
            r = c.getresponse()
            self.check(kind, r.status, r.read())
        finally:
            c.close()

    def fault_malformed(self, kind, k):
        path, body, headers = self.s.malformed[k % len(self.s.malformed)]
        status, _, data = self.post(path, body, headers)
        self.check(kind, status if data.startswith(b'{"error":') else -1, data)

    def fault_unknown(self, kind, k):
        path = ("/v2/models/nosuch%d/infer" % k, "/v2/models/bert/versions/9/infer", "/v2/models/held-/infer")[k % 3]
        status, _, data = self.post(path, b"{}")
        self.check(kind, status, data)

    def fault_reload(self, kind, k):
        status, _, data = self.post(f"/v2/repository/models/{('bert', 'mlp', 'resnet')[k % 3]}/load", b"{}")
        self.check(kind, status, data)

    def fault_unload_load(self, kind, k):
        with self.s.cycle_lock:  # unloads and loads alternate
            self.s.cycled_loaded = not self.s.cycled_loaded
            action = "load" if self.s.cycled_loaded else "unload"
            status, _, data = self.post(f"/v2/repository/models/cycled/{action}", b"{}")
        self.check(kind, status, data)


ACTIONS = {"disconnect mid-body": Client.fault_disconnect, "disconnect mid-response": Client.fault_disconnect,
           "disconnect in queue": Client.fault_disconnect, "deadline": Client.fault_deadline,
           "oversize (Content-Length)": Client.fault_oversize, "oversize (chunked)": Client.fault_oversize,
           "malformed": Client.fault_malformed, "unknown model": Client.fault_unknown, "reload": Client.fault_reload,
           "unload/load": Client.fault_unload_load}


def malformed_requests(pools):
    """(path, body, headers) of requests that must be answered 400."""
    x = pools["bert"][3][0]
    good = json.loads(infer_body(x, False, False)[0])
    def variant(i, **kw):
        b = json.loads(json.dumps(good))
        b["inputs"][i].update(kw)
        return json.dumps(b).encode()
    def one(name, datatype, shape, data):
        return json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": shape, "data": data}]}).encode()
    binary, hlen = infer_body(x)
    bert = "/v2/models/bert/infer"
    rows, length = x["ids"].shape
    return [(bert, b"{", {}), (bert, json.dumps(good).encode()[:-7], {}), (bert, b"[]", {}),
            (bert, variant(0, datatype="FP32"), {}), (bert, variant(0, shape=[1, 65]), {}),
            (bert, variant(1, shape=[rows, length + 1]), {}), (bert, variant(1, data=[2 ** 63] * rows * length), {}),
            (bert, variant(1, name="nope"), {}),
            (bert, binary, {"Inference-Header-Content-Length": str(hlen + 4)}),
            (bert, binary[:-8], {"Inference-Header-Content-Length": str(hlen)}),
            ("/v2/models/mlp/infer", one("x", "FP32", [1, 15], [0.5] * 15), {}),
            ("/v2/models/resnet/infer", one("image", "FP32", [1, 3, 4], [0] * 12), {}),
            ("/v2/models/square/infer", one("x", "FP32", [0, 3], []), {})]


class Soak:
    """The shared state of the clients."""

    def __init__(self, port, pools, tol, n):
        self.port = port
        self.pools = pools
        self.tol = tol
        self.tally = Tally(n)
        self.bodies = {}
        self.malformed = malformed_requests(pools)
        self.big = max((p[0] for p in pools["bert"]), key=lambda x: x["ids"].size)  # a large answer
        self.cycle_lock = threading.Lock()
        self.cycled_loaded = True
        shares = np.array([t[1] for t in TRAFFIC], float)
        self.shares = shares / shares.sum()


def pools_kb(text):
    """The models' VM pools in /metrics text: kB peak in use and cached."""
    def total(name):
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))
    return int(total("dvm_pool_bytes_peak")) // 1024, int(total("dvm_pool_bytes_cached")) // 1024


def run_clients(server, soak, concurrency):
    """Runs the clients while sampling the server every SAMPLE_S seconds:
    [(seconds, requests done, RSS kB, pools' peak kB, pools' cache kB)];
    stops early when no request finished for 2 * TIMEOUT (a hang)."""
    threads = [threading.Thread(target=Client(soak, seed).run, daemon=True) for seed in range(concurrency)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    samples, last, progress = [], -1, t0
    while any(t.is_alive() for t in threads) and server.proc.poll() is None:
        threads[0].join(SAMPLE_S) if threads[0].is_alive() else time.sleep(SAMPLE_S)
        now, done = time.monotonic(), soak.tally.done
        if server.proc.poll() is None:
            samples.append((now - t0, done, server.rss_kb(), *pools_kb(server.metrics())))
        if done != last:
            last, progress = done, now
        elif now - progress > 2 * TIMEOUT:
            break
    return samples, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--max-growth", type=float, default=10.0,
                    help="percent RSS may grow after the warm-up (not checked under AddressSanitizer)")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="batched results may differ by tol * (1 + max |reference|)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dvm-soak-")
    repo, files = build_soak_repo(tmp)
    pools = input_pools(files, np.random.default_rng(2026))
    server = Server(repo, os.path.join(tmp, "serve.log"), "--workers", "2", "--no-access-log",
                    "--max-body", str(MAX_BODY))
    soak = Soak(server.port, pools, a.tol, a.requests)
    try:
        before = server.metrics()
        samples, wall = run_clients(server, soak, a.concurrency)
        time.sleep(1.0)  # the handlers of the last clients gone from the queue notice it within 50 ms
        after = server.metrics() if server.proc.poll() is None else None
    finally:
        rc = server.stop()
    failures = report(a, soak.tally, wall, samples, before, after)
    log = server.log_text()
    if rc != 0:
        failures.append(f"dvm serve exited {rc}: {log[-3000:]}")
    reports = [line for line in log.splitlines() if any(r in line for r in SANITIZER_REPORTS)]
    if reports:  # UndefinedBehaviorSanitizer reports and goes on
        failures.append("the server's log has sanitizer reports: " + "; ".join(reports[:5]))
    if failures:
        sys.exit("soak.py: " + "; ".join(failures))
    shutil.rmtree(tmp)


def report(a, tally, wall, samples, before, after):
    """Prints the tables; returns what failed."""
    failures = []
    with tally.lock:
        hung = tally.next - tally.done  # taken and never finished
        lost = sum(v for (p, _), v in tally.problems.items() if p == "lost") + hung
        wrong = sum(v for (p, _), v in tally.problems.items() if p == "wrong")
        gone = sum(v for (k, s), v in tally.seen.items() if s is None)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {cpu_model()}; {a.concurrency} clients; "
          f"{tally.next} of {tally.n} requests sent in {wall:.0f} s ({tally.next / wall:.0f}/s) over "
          f"{tally.connections} connections: answered {tally.next - lost - gone}, left unanswered by design "
          f"{gone}, lost {lost}, wrong {wrong}\n")
    print("| kind | sent | status: count | expected | lost | wrong |")
    print("| --- | ---: | --- | --- | ---: | ---: |")
    for k in ["infer " + t[0] for t in TRAFFIC] + FAULTS:
        got = {s: n for (kind, s), n in tally.seen.items() if kind == k}
        text = ", ".join(f"{'none' if s is None else s}: {n}" for s, n in sorted(got.items(), key=str))
        want = ", ".join("none" if s is None else str(s) for s in sorted(EXPECTED[k], key=str))
        print(f"| {k} | {sum(got.values()) + tally.problems[('lost', k)]} | {text} | {want} | "
              f"{tally.problems[('lost', k)]} | {tally.problems[('wrong', k)]} |")
    for e in tally.examples:
        print("  " + e)
    if hung:
        failures.append(f"no answer for {2 * TIMEOUT} s to {hung} requests (hung)")
    if lost or wrong:
        failures.append(f"{lost} lost, {wrong} wrong")
    if after is None:
        return failures + ["the server died"]
    # the server's counts by status against the clients'
    client = collections.Counter()
    for (k, s), v in tally.seen.items():
        if s is not None and s > 0:
            client[s] += v
    client[200] += 1 + len(samples)  # /metrics before the start and at each sample
    client[499] += tally.seen[("disconnect in queue", None)]  # answered to nobody
    def server(code):
        name = f'dvm_http_responses_total{{code="{code}"}}'
        return sum(sign * metric(t, "dvm_http_responses_total", code=code)
                   for sign, t in ((-1, before), (1, after)) if name in t)
    codes = sorted(set(client) | {int(line.split('"')[1]) for line in after.splitlines()
                                  if line.startswith("dvm_http_responses_total{")})
    print("\n| status | clients saw (+ /metrics; 499: clients gone from the queue) | server counted |")
    print("| ---: | ---: | ---: |")
    for c in codes:
        print(f"| {c} | {client[c]} | {server(c):.0f} |")
        if server(c) != client[c]:
            failures.append(f"status {c}: the server counted {server(c):.0f}, the clients {client[c]}")
    for outcome, kind, status in (("cancelled", "disconnect in queue", None), ("timeout", "deadline", 504)):
        n, sent = metric(after, "dvm_requests_total", model="held", outcome=outcome), tally.seen[(kind, status)]
        if n != sent:
            failures.append(f"held: the server counted {n:.0f} {outcome}, the clients sent {sent}")
    # RSS after the warm-up
    warm = next((s for s in samples if s[1] >= tally.n // 10), samples[-1])
    print(f"\nRSS of the server and its models' VM pools every {SAMPLE_S:g} s; the warm-up is the first "
          f"{tally.n // 10} requests\n")
    print("| requests | s | RSS kB | vs warm-up | pools' peak kB | pools' cache kB |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = {samples[0]} | {next(s for s in samples if s[1] >= tally.n * k // 10 or s is samples[-1])
                           for k in range(1, 11)}
    for t, done, rss, peak, cached in sorted(rows):
        print(f"| {done} | {t:.0f} | {rss} | {100 * (rss - warm[2]) / warm[2]:+.1f}% | {peak} | {cached} |")
    later = [s[2] for s in samples if s[0] >= warm[0]]
    growth = 100 * (max(later) - warm[2]) / warm[2]
    print(f"\nafter the warm-up: {len(later)} samples, {min(later)} to {max(later)} kB, most {growth:+.1f}% "
          f"(bound {a.max_growth:g}%)")
    if growth > a.max_growth:
        if os.environ.get("DVM_SANITIZED"):
            print("(not checked under AddressSanitizer: it holds freed memory in quarantine)")
        else:
            failures.append(f"RSS grew {growth:.1f}% after the warm-up (bound {a.max_growth:g}%)")
    return failures


if __name__ == "__main__":
    main()
