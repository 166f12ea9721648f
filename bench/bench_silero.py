#!/usr/bin/env python3
"""silero-vad per chunk: dvm next to ONNX Runtime, the state carried.

Each model of tests/real/models named below runs chunk after chunk as the
silero-vad package calls it (16 kHz, 64 samples of context + 512, or the
bare 512, the state fed back), from Python, in this process:
  ort  onnxruntime.InferenceSession(...).run(None, feeds), intra_op and
       inter_op threads = --threads
  dvm  dvm.load(compiled .dvmb).run(feeds, threads=--threads)
Each measurement runs --chunks consecutive chunks and keeps the median time
per chunk; the table shows the lowest median of --rounds rounds that
alternate the sides (on a shared machine a round in which another process
took a core is discarded rather than averaged in), and the lowest mean CPU
time of this process per chunk (under load, wall time is mostly waiting).

    PYTHONPATH=build/python python3 bench/bench_silero.py [--threads 1] [--batch 1]

Prints a table (microseconds per chunk; dvm/ORT below 1 is faster) and one
JSON line for scripts.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MODELS = os.path.join(ROOT, "tests/real/models")
DVM = os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm"))
# model, samples per chunk, whether it has the rate input
CASES = [("silero_vad.onnx", 576, True), ("silero_vad_16k_op15.onnx", 576, True),
         ("silero_vad_op18_ifless.onnx", 576, True), ("silero_vad_half.onnx", 576, False)]


def chunks(batch, n, count, rate):
    rng = np.random.default_rng(3)
    t = np.arange(n * count).reshape(count, 1, n) / 16000.0
    x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.02 * rng.standard_normal((count, batch, n))
    extra = {"sr": np.array(16000, np.int64)} if rate else {}
    return [{"input": c.astype(np.float32), **extra} for c in x]


def per_chunk(call, feeds, batch):
    """Median wall time and mean CPU time of this process per chunk, us."""
    state = np.zeros((2, batch, 128), np.float32)
    times = []
    c0 = time.process_time()
    for f in feeds:
        t0 = time.perf_counter()
        state = call({**f, "state": state})
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6, (time.process_time() - c0) / len(feeds) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import dvm
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = args.threads
    so.log_severity_level = 3
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, n, rate in CASES:
            path = os.path.join(MODELS, name)
            mod = os.path.join(tmp, name + ".dvmb")
            subprocess.run([DVM, "compile", path, "-o", mod], check=True, capture_output=True)
            m = dvm.load(mod)
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            feeds = chunks(args.batch, n, args.chunks, rate)
            dvm_call = lambda f: np.asarray(m.run(f, threads=args.threads)["stateN"])
            ort_call = lambda f: sess.run(["stateN"], f)[0]
            per_chunk(dvm_call, feeds[:20], args.batch), per_chunk(ort_call, feeds[:20], args.batch)
            d, o = [], []
            for _ in range(args.rounds):
                d.append(per_chunk(dvm_call, feeds, args.batch))
                o.append(per_chunk(ort_call, feeds, args.batch))
            dw, ow, dc, oc = (min(x[i] for x in v) for v, i in ((d, 0), (o, 0), (d, 1), (o, 1)))
            rows.append({"model": name, "samples": n, "batch": args.batch, "threads": args.threads,
                         "dvm_us": dw, "ort_us": ow, "dvm_cpu_us": dc, "ort_cpu_us": oc})
    print(f"{'model':32} {'dvm us':>9} {'ORT us':>9} {'dvm/ORT':>8} {'dvm cpu':>9} {'ORT cpu':>9} {'dvm/ORT':>8}")
    for r in rows:
        print(f"{r['model']:32} {r['dvm_us']:9.1f} {r['ort_us']:9.1f} {r['dvm_us'] / r['ort_us']:8.2f} "
              f"{r['dvm_cpu_us']:9.1f} {r['ort_cpu_us']:9.1f} {r['dvm_cpu_us'] / r['ort_cpu_us']:8.2f}")
    print(json.dumps({"bench": "silero", "rows": rows}))


if __name__ == "__main__":
    sys.exit(main())
