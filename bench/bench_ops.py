#!/usr/bin/env python3
"""MatMul, Softmax and LayerNorm latency: dvm's kernels next to ONNX Runtime.

For each case and thread count: the single-op dvm program (written by
tests/ops/dvmop.program, assembled with `dvm asm`) timed by `dvm bench`, and
a single-node ONNX model timed in-process with time.perf_counter around
InferenceSession.run_with_iobinding (inputs bound once), ORT's
intra_op_num_threads set to the same count, the same number of timed runs
after the same warm-up; both report the median, and the table shows the
lowest median of --rounds rounds that alternate the two sides (on a shared
machine a round in which another process took a core is discarded
rather than averaged in). MatMul is timed twice on each side: with B a
graph input (a dvm parameter), and with B an initializer (a dvm module
constant), which both prepack at load (what a model's weights get).

    python3 bench/bench_ops.py [--dvm build/tools/dvm] [--threads 1,2] [--rounds 3]
                               [--only matmul|softmax|layernorm] [--budget 0.5]
                               [--rows 1,8,32,128,512] [--kn 768x768,768x3072]
                               [--const-only]

Prints one table row per case: ms for each side and the ratio dvm/ORT
(below 1: dvm is faster), then for MatMul the same with B constant and
both sides' GFLOP/s (2 M K N over the median) with it. --const-only times
only the B-constant form. Each measurement runs for about --budget seconds
(at least 10, at most 1000 iterations).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "tests", d) for d in ("ops", "lib")]
import dvmop  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
MATMUL_KN = ((768, 768), (768, 3072), (3072, 768), (3072, 3072))
SOFTMAX = [(1, 128, 768), (8, 128, 768), (1, 12, 128, 128)]
LAYERNORM = [(1, 128, 768), (8, 128, 768)]


def cases(only, rows, kn=MATMUL_KN):
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    if only in (None, "matmul"):
        for m, k, n in ((m, k, n) for m in rows for k, n in kn):
            yield (f"matmul {m}x{k} * {k}x{n}", "matmul", [f(m, k), f(k, n)], [], "MatMul", {}, 1)
    if only in (None, "softmax"):
        for s in SOFTMAX:
            yield (f"softmax {'x'.join(map(str, s))} axis -1", "softmax", [f(*s)], [-1], "Softmax",
                   {"axis": -1}, 0)
    if only in (None, "layernorm"):
        for s in LAYERNORM:
            yield (f"layernorm {'x'.join(map(str, s))} axis -1", "layernorm",
                   [f(*s), f(s[-1]), f(s[-1])], [-1, 1e-5], "LayerNormalization",
                   {"axis": -1, "epsilon": 1e-5}, 0)


def dvm_time(dvm, tmp, kernel, inputs, attrs, threads, iters, warmup, const_from=None):
    src, mod = os.path.join(tmp, f"{kernel}.dvms"), os.path.join(tmp, f"{kernel}.dvmb")
    with open(src, "w") as f:
        f.write(dvmop.program(kernel, inputs, attrs, shapefn="same" if kernel == "softmax" else None,
                              const_from=const_from))
    subprocess.run([dvm, "asm", src, "-o", mod], check=True, capture_output=True)
    r = subprocess.run([dvm, "bench", mod, "--threads", str(threads), "--iters", str(iters),
                        "--warmup", str(warmup)], check=True, capture_output=True, text=True)
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)["median_ms"]


def ort_session(op, inputs, attrs, threads, const_from):
    """A one-node model; inputs from index const_from on are initializers."""
    names = [f"x{i}" for i in range(len(inputs))]
    graph_in = [helper.make_tensor_value_info(n, TensorProto.FLOAT, x.shape)
                for n, x in zip(names[:const_from], inputs[:const_from])]
    inits = [onnx.numpy_helper.from_array(x, n) for n, x in zip(names[const_from:], inputs[const_from:])]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "bench", graph_in,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    for n, x in zip(names[:const_from], inputs[:const_from]):
        binding.bind_cpu_input(n, x)
    binding.bind_output("y")
    return sess, binding


def ort_time(sess, binding, iters, warmup):
    for _ in range(warmup):
        sess.run_with_iobinding(binding)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        sess.run_with_iobinding(binding)
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e3


def iterations(sess, binding, budget):
    """(timed runs, warm-up runs) for about `budget` seconds of sess, from
    three runs: at least 10, at most 1000."""
    t0 = time.perf_counter()
    for _ in range(3):
        sess.run_with_iobinding(binding)
    est = (time.perf_counter() - t0) / 3
    iters = int(min(1000, max(10, budget / max(est, 1e-6))))
    return iters, max(2, iters // 10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dvm", default=os.path.join(ROOT, "build", "tools", "dvm"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", choices=["matmul", "softmax", "layernorm"])
    ap.add_argument("--rows", default="1,8,32,128,512", help="MatMul's M values")
    ap.add_argument("--kn", help="MatMul's K x N values, e.g. 768x768,1024x1024 (default: "
                    + ",".join(f"{k}x{n}" for k, n in MATMUL_KN) + ")")
    ap.add_argument("--const-only", action="store_true", help="MatMul with B constant only")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="measurements per side; the best counts")
    args = ap.parse_args()
    print(f"{'case':34} {'thr':>3} {'dvm ms':>9} {'ort ms':>9} {'dvm/ort':>8} "
          f"{'B const: dvm ms':>15} {'ort ms':>9} {'dvm/ort':>8} {'GFLOP/s dvm':>11} {'ort':>6}")
    kn = MATMUL_KN if not args.kn else [tuple(int(v) for v in s.split("x")) for s in args.kn.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, kernel, inputs, attrs, op, oattrs, has_b in cases(args.only, [int(m) for m in args.rows.split(",")], kn):
            for threads in (int(t) for t in args.threads.split(",")):
                sess, binding = ort_session(op, inputs, oattrs, threads, len(inputs))
                iters, warmup = iterations(sess, binding, args.budget)
                if has_b:  # weights as ORT sees them in a model: prepacked at load
                    sess_c, binding_c = ort_session(op, inputs, oattrs, threads, 1)
                t_ort = t_dvm = t_c = t_dc = float("inf")
                only_c = has_b and args.const_only
                for _ in range(args.rounds):
                    if not only_c:
                        t_ort = min(t_ort, ort_time(sess, binding, iters, warmup))
                        t_dvm = min(t_dvm, dvm_time(args.dvm, tmp, kernel, inputs, attrs, threads,
                                                    iters, warmup))
                    if has_b:
                        t_c = min(t_c, ort_time(sess_c, binding_c, iters, warmup))
                        t_dc = min(t_dc, dvm_time(args.dvm, tmp, kernel, inputs, attrs, threads,
                                                  iters, warmup, const_from=1))
                row = f"{name:34} {threads:>3} {t_dvm:9.4f} {t_ort:9.4f} {t_dvm / t_ort:8.2f}"
                if has_b:
                    flop = 2 * inputs[0].shape[0] * inputs[0].shape[1] * inputs[1].shape[1]
                    row += (f" {t_dc:15.4f} {t_c:9.4f} {t_dc / t_c:8.2f}"
                            f" {flop / t_dc * 1e-6:11.1f} {flop / t_c * 1e-6:6.1f}")
                print(row, flush=True)


if __name__ == "__main__":
    main()
