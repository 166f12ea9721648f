#!/usr/bin/env python3
"""Loop and Scan scan outputs over many iterations: dvm (and optionally the
module another dvm compiler makes of the same models) against ONNX Runtime.

Two ONNX models, each emitting one [64] f32 slice per iteration:
  loop  Loop with trip count n (an input), x carried, x + 1 scanned: output
        [n, 64]
  scan  Scan over X [n, 64], state s, s + X[t] scanned: output [n, 64]
Each is compiled by `dvm compile` (--before-dvm: also by that binary's
compiler, to compare lowerings) and run from Python in this process with
one kernel thread; the table has the lowest of --rounds median wall times
and the lowest of --rounds mean CPU times per call, microseconds, for
each n (alternating dvm, before and ORT in each round).

    PYTHONPATH=build/python python3 bench/bench_loop_scan.py [--n 1000 4000 16000] \\
        [--before-dvm /path/to/old/dvm]
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

from bench_rnn import timed  # noqa: E402  (median wall and mean CPU time per call)
from onnx import TensorProto, helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DVM = os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm"))
W = 64
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, t, shape=None):
    return helper.make_tensor_value_info(name, t, shape)


def loop_model():
    body = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["x2"]),
         helper.make_node("Identity", ["cond"], ["cond2"]),
         helper.make_node("Identity", ["x2"], ["y"])],
        "body", [vi("it", I64, []), vi("cond", B, []), vi("x", F, [W])],
        [vi("cond2", B, []), vi("x2", F, [W]), vi("y", F, [W])],
        [helper.make_tensor("one", F, [], [1.0])])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "x0"], ["xN", "Y"], body=body)], "loop",
                          [vi("n", I64, []), vi("x0", F, [W])], [vi("Y", F, ["n", W])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def scan_model():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xt"], ["s2"]),
         helper.make_node("Identity", ["s2"], ["y"])],
        "body", [vi("s", F, [W]), vi("xt", F, [W])], [vi("s2", F, [W]), vi("y", F, [W])])
    g = helper.make_graph([helper.make_node("Scan", ["s0", "X"], ["sN", "Y"], body=body, num_scan_inputs=1)], "scan",
                          [vi("s0", F, [W]), vi("X", F, ["n", W])], [vi("Y", F, ["n", W])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def feeds(form, n):
    x = np.random.default_rng(1).standard_normal((n, W)).astype(np.float32)
    if form == "loop":
        return {"n": np.array(n, np.int64), "x0": x[0]}
    return {"s0": x[0], "X": x}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 4000, 16000])
    ap.add_argument("--before-dvm", help="another dvm binary whose compiler makes the 'before' modules")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per timed round (reps from it)")
    args = ap.parse_args()
    import dvm
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = args.threads
    so.log_severity_level = 3
    compilers = [("dvm", DVM)] + ([("before", args.before_dvm)] if args.before_dvm else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for form, model in (("loop", loop_model()), ("scan", scan_model())):
            src = os.path.join(tmp, form + ".onnx")
            onnx.save(model, src)
            mods = {}
            for name, exe in compilers:
                mod = os.path.join(tmp, f"{form}_{name}.dvmb")
                subprocess.run([exe, "compile", src, "-o", mod], check=True, capture_output=True)
                mods[name] = dvm.load(mod)
            sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
            for n in args.n:
                f = feeds(form, n)
                want = sess.run(None, f)[0]
                calls = {name: (lambda m=m: m.run(f, threads=args.threads)) for name, m in mods.items()}
                calls["ort"] = lambda: sess.run(None, f)
                for name, m in mods.items():
                    got = np.asarray(m.run(f, threads=args.threads)["Y"])
                    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
                best = {k: [float("inf")] * 2 for k in calls}
                for _ in range(args.rounds):
                    for k, c in calls.items():  # alternated, so load changes hit all alike
                        t0 = time.perf_counter()
                        c()
                        reps = max(1, min(50, int(args.budget / max(time.perf_counter() - t0, 1e-6))))
                        best[k] = [min(a, b) for a, b in zip(best[k], timed(c, reps))]
                rows.append({"form": form, "n": n, **{k + "_us": v[0] for k, v in best.items()},
                             **{k + "_cpu_us": v[1] for k, v in best.items()}})
    keys = [k for k in rows[0] if k.endswith("_us")]
    print(f"{'form':5} {'n':>6} " + " ".join(f"{k[:-3].replace('_', ' '):>12}" for k in keys))
    for r in rows:
        print(f"{r['form']:5} {r['n']:6d} " + " ".join(f"{r[k]:12.0f}" for k in keys))
    print(json.dumps({"bench": "loop_scan", "threads": args.threads, "rows": rows}))


if __name__ == "__main__":
    sys.exit(main())
