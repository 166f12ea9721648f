#!/usr/bin/env python3
"""Per-call overhead from Python: dvm next to ONNX Runtime on tiny models.

Two models, where the call costs more than the arithmetic:
  add   z = x + y on float32 tensors of 1 element (a single Add node)
  bert  tests/models/bert.onnx (the BERT-style fixture: 2 layers, hidden 32)
        at batch 1, seq 8
Four ways to call each, all in this process, one kernel thread each:
  ort        onnxruntime.InferenceSession(...).run(None, feeds)
             (intra_op_num_threads=1, inter_op_num_threads=1)
  dvm.run    dvm.compile(...).run(feeds, threads=1)  (dict in, dict out)
  dvm.sess   dvm.InferenceSession(..., sess_options with 1 thread).run(None, feeds)
  ort.bind   ORT's run_with_iobinding with inputs bound once (its fastest path)
Each measurement times batches of calls for about --budget seconds with
time.perf_counter and keeps the median per call; the table shows the
lowest median of --rounds rounds that alternate the sides (on a shared
machine a round in which another process took a core is discarded rather
than averaged in).

    PYTHONPATH=build/python python3 bench/bench_python.py [--rounds 5] [--budget 0.5] [--quick]

Prints a table (microseconds per call, and dvm/ORT ratios: below 1 is
faster) and one JSON line for scripts.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import dvm

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def add_model():
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1])  # noqa: E731
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add", [vi("x"), vi("y")], [vi("z")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def models():
    with open(os.path.join(ROOT, "tests", "models", "bert.onnx"), "rb") as f:
        bert = f.read()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, (1, 8)).astype(np.int64)
    yield "add 1+1 elements", add_model(), {"x": np.ones(1, np.float32), "y": np.ones(1, np.float32)}
    yield "bert fixture 1x8", bert, {"ids": ids, "mask": np.ones((1, 8), np.int64)}


def callers(onnx_bytes, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    osess = ort.InferenceSession(onnx_bytes, so, providers=["CPUExecutionProvider"])
    m = dvm.compile(onnx_bytes)
    dso = dvm.SessionOptions()
    dso.intra_op_num_threads = 1
    dsess = dvm.InferenceSession(onnx_bytes, dso)
    binding = osess.io_binding()
    for k, v in feeds.items():
        binding.bind_cpu_input(k, v)
    for o in osess.get_outputs():
        binding.bind_output(o.name)
    # the same outputs, or the comparison means nothing
    want = osess.run(None, feeds)
    for got in (list(m.run(feeds, threads=1).values()), dsess.run(None, feeds)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return {
        "ort": lambda: osess.run(None, feeds),
        "dvm.run": lambda: m.run(feeds, threads=1),
        "dvm.sess": lambda: dsess.run(None, feeds),
        "ort.bind": lambda: osess.run_with_iobinding(binding),
    }


def per_call_us(fn, budget):
    for _ in range(200):
        fn()
    batch, samples, end = 100, [], time.perf_counter() + budget
    while time.perf_counter() < end or len(samples) < 5:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--quick", action="store_true", help="one short round (the test suite runs this)")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.budget = 1, 0.02
    results = {}
    print(f"{'model':<20} {'ort':>8} {'dvm.run':>8} {'dvm.sess':>9} {'ort.bind':>9}   run/ort  sess/ort  (us per call)")
    for name, onnx_bytes, feeds in models():
        calls = callers(onnx_bytes, feeds)
        best = {k: float("inf") for k in calls}
        for _ in range(a.rounds):
            for k, fn in calls.items():
                best[k] = min(best[k], per_call_us(fn, a.budget))
        results[name] = best
        print(f"{name:<20} {best['ort']:8.2f} {best['dvm.run']:8.2f} {best['dvm.sess']:9.2f} {best['ort.bind']:9.2f}"
              f"   {best['dvm.run'] / best['ort']:7.2f}  {best['dvm.sess'] / best['ort']:8.2f}")
    print(json.dumps({"bench": "python_call_overhead", "us_per_call": results,
                      "onnxruntime": ort.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
