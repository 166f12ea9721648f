#!/usr/bin/env python3
"""Bounded load test of `dvm serve` on 127.0.0.1 with the BERT-style fixture.

For each mode (dynamic batching with length buckets, batching off, batching
with every request padded to the maximum length) and each concurrency, N
requests of lengths drawn from LO..HI are sent over keep-alive connections
(binary tensors, as Triton clients send them), and every response is
checked against `dvm run` on the same input: exactly for batching off, to
--tol relative otherwise (padded positions are masked, so only summation
order changes; in a deep model that grows, see docs/performance.md).
Prints a markdown table: throughput, p50 and p99 latency, mean rows per
invocation, padding share, lost and wrong responses.

  python3 tests/serve/load_test.py [--requests 400] [--concurrency 1,4,16,64]
  python3 tests/serve/load_test.py --rss 20000   # RSS over many requests
  python3 tests/models/make_models.py --bert-base /tmp/bb
  python3 tests/serve/load_test.py --model /tmp/bb/bert_base.onnx --lengths 4..128 --pool 16 ...

The fixture's position table has 64 rows, so its lengths stop at 64."""
import argparse
import http.client
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

TOL = 1e-4  # --tol

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib")]
from conftest import DVM, Server, metric, reference  # noqa: E402

MODES = {
    "batching": "batch = batch\nmax_batch = 16\nqueue_delay_us = 2000\npad = seq\npad_value = ids:0\n"
                "pad_value = mask:0\npad_buckets = 8 16 32 48 64\n",
    "off": "",
    "pad-to-max": "batch = batch\nmax_batch = 16\nqueue_delay_us = 2000\npad = seq\npad_value = ids:0\n"
                  "pad_value = mask:0\npad_to_max = 1\n",
}


def make_repo(tmp, workers, model, max_len):
    import subprocess
    bert = os.path.join(tmp, "bert.dvmb")
    subprocess.run([DVM, "compile", model, "-o", bert, "--dim", "batch=1..64", "--dim", f"seq=1..{max_len}"],
                   check=True)
    for name, cfg in MODES.items():
        d = os.path.join(tmp, "repo", name, "1")
        os.makedirs(d)
        os.link(bert, os.path.join(d, "model.dvmb"))
        with open(os.path.join(tmp, "repo", name, "config"), "w") as f:
            f.write(cfg + f"workers = {workers}\nmax_queue = 1024\n")
    # bert/1/model.dvmb is where conftest.reference runs dvm run from
    os.makedirs(os.path.join(tmp, "repo", "bert", "1"))
    os.link(bert, os.path.join(tmp, "repo", "bert", "1", "model.dvmb"))
    return os.path.join(tmp, "repo")


DATATYPES = {np.dtype(np.int64): "INT64", np.dtype(np.float32): "FP32"}


def infer_body(inputs, binary=True, binary_out=True, parameters=None):
    """A KServe v2 infer body for {name: array}: the data in the JSON, or
    binary tensors after it (Triton's extension). Returns the body and the
    JSON's length (Inference-Header-Content-Length; None for JSON only)."""
    def entry(name, x):
        e = {"name": name, "datatype": DATATYPES[x.dtype], "shape": list(x.shape)}
        if binary:
            e["parameters"] = {"binary_data_size": x.nbytes}
        else:
            e["data"] = x.flatten().tolist()
        return e
    params = {"binary_data_output": True} if binary_out else {}
    params.update(parameters or {})
    header = json.dumps({"inputs": [entry(n, x) for n, x in inputs.items()], "parameters": params}).encode()
    if not binary:
        return header, None
    return header + b"".join(x.tobytes() for x in inputs.values()), len(header)


def outputs_of(data, header_len):
    """{name: array} of an infer response body, whose JSON is header_len
    bytes (None: all of it) and each output in it or in binary after it."""
    head = json.loads(data[:header_len] if header_len is not None else data)
    out, at = {}, header_len
    for o in head["outputs"]:
        dtype = next(k for k, v in DATATYPES.items() if v == o["datatype"])
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            out[o["name"]] = np.array(o["data"], dtype).reshape(o["shape"])
        else:
            out[o["name"]] = np.frombuffer(data[at:at + size], dtype).reshape(o["shape"])
            at += size
    return out


def run_cell(server, model, pool, n, concurrency, exact, seconds):
    lat, lost, wrong, worst = [], [0], [0], [0.0]
    lock = threading.Lock()
    counter = iter(range(n))
    stop_at = time.time() + seconds

    def client(seed):
        rng = np.random.default_rng(seed)
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while time.time() < stop_at:
            with lock:
                if next(counter, None) is None:
                    break
            ids, mask, ref = pool[int(rng.integers(len(pool)))]
            body, hlen = infer_body({"ids": ids, "mask": mask})
            t0 = time.perf_counter()
            try:
                c.request("POST", f"/v2/models/{model}/infer", body=body,
                          headers={"Inference-Header-Content-Length": str(hlen)})
                r = c.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                with lock:
                    lost[0] += 1
                c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
                continue
            dt = time.perf_counter() - t0
            ok = r.status == 200
            if ok:
                got = outputs_of(data, int(r.getheader("Inference-Header-Content-Length")))["hidden"]
                diff = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
                ok = diff == 0 if exact else diff <= TOL * (1 + float(np.max(np.abs(ref))))
            with lock:
                lat.append(dt)
                if not ok:
                    wrong[0] += 1
                if r.status == 200:
                    worst[0] = max(worst[0], diff)
        c.close()

    before = server.metrics()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    after = server.metrics()
    d = lambda name: metric(after, name, model=model) - metric(before, name, model=model)  # noqa: E731
    lat.sort()
    return {"n": len(lat), "rps": len(lat) / wall, "p50": 1e3 * statistics.median(lat),
            "p99": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], "lost": lost[0],
            "wrong": wrong[0], "rows": d("dvm_batch_size_sum") / max(1, d("dvm_batch_size_count")),
            "pad": d("dvm_padding_elements_total") / max(1, d("dvm_input_elements_total")), "diff": worst[0]}


def cpu_model():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
    return f"{m.group(1) if m else platform.processor()}, {os.cpu_count()} cores"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400, help="per cell")
    ap.add_argument("--seconds", type=float, default=60, help="time limit per cell")
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--lengths", default="4..64")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="kernel threads shared by a model's workers")
    ap.add_argument("--rss", type=int, default=0, help="only: send this many requests, report RSS")
    ap.add_argument("--max-growth", type=float, default=None,
                    help="with --rss: exit 1 when RSS grew by more than this percentage, or a response was lost or wrong")
    ap.add_argument("--model", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models",
                                                    "bert.onnx"), help="a BERT-style ONNX model (ids, mask)")
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="batched results may differ by tol * (1 + max |reference|)")
    ap.add_argument("--pool", type=int, default=0, help="distinct inputs checked (default: one per length)")
    a = ap.parse_args()
    if a.rss and a.max_growth is not None and os.environ.get("DVM_SANITIZED"):
        print("SKIP: RSS is not flat under AddressSanitizer (it holds freed memory in quarantine)")
        sys.exit(77)
    global TOL
    TOL = a.tol
    lo, hi = map(int, a.lengths.split(".."))
    tmp = tempfile.mkdtemp(prefix="dvm-load-")
    repo = make_repo(tmp, a.workers, a.model, hi)
    rng = np.random.default_rng(2026)
    pool = []
    lengths = range(lo, hi + 1) if not a.pool else np.linspace(lo, hi, a.pool).round().astype(int)
    for length in lengths:
        ids = rng.integers(1, 100, size=(1, int(length)), dtype=np.int64)
        mask = np.ones_like(ids)
        pool.append((ids, mask, reference(repo, ids, mask)))
    server = Server(repo, os.path.join(tmp, "serve.log"), "--threads", str(a.threads), "--no-access-log")
    try:
        if a.rss:
            # warm-up: the longest inputs first, so that the VM pools meet
            # the largest batches (16 x the longest) before the count starts
            run_cell(server, "batching", pool[-1:], 1000, 16, False, 600)
            run_cell(server, "batching", pool, 1000, 16, False, 600)
            rss = [server.rss_kb()]
            pools = lambda: "%d/%d" % tuple(metric(server.metrics(), f"dvm_pool_bytes_{k}", model="batching") // 1024
                                            for k in ("peak", "cached"))  # noqa: E731
            peaks = [pools()]
            n = lost = wrong = 0
            while n < a.rss:
                r = run_cell(server, "batching", pool, min(5000, a.rss - n), 16, False, 3600)
                n, lost, wrong = n + r["n"], lost + r["lost"], wrong + r["wrong"]
                rss.append(server.rss_kb())
                peaks.append(pools())
            growth = 100 * (max(rss) - rss[0]) / rss[0]
            print(f"{n} requests after 2000 to warm up (1000 of the longest), lost {lost}, wrong {wrong}; RSS in kB after the warm-up "
                  f"and every 5000: {' '.join(map(str, rss))} ({100 * (rss[-1] - rss[0]) / rss[0]:+.1f}%, "
                  f"most {growth:+.1f}%); the VM pools' peak in use / cached, kB, at the same points: {' '.join(peaks)}")
            if a.max_growth is not None and (growth > a.max_growth or lost or wrong or n < a.rss):
                sys.exit(f"load_test.py: RSS grew {growth:.1f}% (limit {a.max_growth}%), {n} of {a.rss} sent, "
                         f"{lost} lost, {wrong} wrong")
            return
        print(f"{time.strftime('%Y-%m-%d')}, {cpu_model()}; {os.path.basename(a.model)}; server --threads "
              f"{a.threads}, {a.workers} workers per model; lengths {lo}..{hi}; {a.requests} requests per cell "
              f"(at most {a.seconds:g} s)\n")
        print("| mode | concurrency | req/s | p50 ms | p99 ms | rows/invocation | padding | lost | wrong | max diff |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mode in MODES:
            for conc in map(int, a.concurrency.split(",")):
                r = run_cell(server, mode, pool, max(a.requests, conc), conc, mode == "off", a.seconds)
                print(f"| {mode} | {conc} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['rows']:.1f} | "
                      f"{100 * r['pad']:.0f}% | {r['lost']} | {r['wrong']} | {r['diff']:.1e} |", flush=True)
    finally:
        rc = server.stop()
        if rc != 0:
            print(f"dvm serve exited {rc}", file=sys.stderr)


if __name__ == "__main__":
    main()
