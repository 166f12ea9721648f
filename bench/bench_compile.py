#!/usr/bin/env python3
"""Compile time against graph size: `dvm compile` of a chain of N MatMuls
(y = x @ W @ W @ ... @ W, one shared 16x16 weight, x of shape [batch, 16]),
with the memory plan on and off (--no-plan), for each N given.

    python3 bench/bench_compile.py [--dvm build/tools/dvm] [--sizes 25000,50000,100000,200000]
                                   [--runs 3] [--limit SECONDS]

Prints one row per N: the median wall time and CPU time (user + system) of
--runs compiles with the plan and without it, and the CPU time's ratio to the
previous N's (about 2 for each doubling when compile time is linear; CPU
time, as wall time on a shared machine counts the waits for a core). With
--limit, exits 1 when the largest N's compile with the plan takes more CPU
seconds than that.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def chain(n, path):
    nodes = [helper.make_node("MatMul", [f"t{i}" if i else "x", "W"], [f"t{i + 1}" if i + 1 < n else "y"])
             for i in range(n)]
    w = numpy_helper.from_array((np.eye(16) * 0.5).astype(np.float32), "W")
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, runs):
    """The medians of wall time and of CPU time (user + system) over runs."""
    wall, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), cpu_children()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall.append(time.perf_counter() - t)
        cpu.append(cpu_children() - c)
        if p.returncode != 0:
            sys.exit(f"bench_compile: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return statistics.median(wall), statistics.median(cpu)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dvm", default=os.path.join(ROOT, "build", "tools", "dvm"))
    ap.add_argument("--sizes", default="25000,50000,100000,200000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=float)
    a = ap.parse_args()
    print(f"{'nodes':>8} {'plan s':>8} {'cpu s':>6} {'x prev':>7} {'no-plan s':>10} {'cpu s':>6} {'x prev':>7}")
    prev = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in a.sizes.split(",")):
            model, out = os.path.join(tmp, "chain.onnx"), os.path.join(tmp, "chain.dvmb")
            chain(n, model)
            on = timed([a.dvm, "compile", model, "-o", out], a.runs)
            off = timed([a.dvm, "compile", model, "-o", out, "--no-plan"], a.runs)
            r_on, r_off = (f"{on[1] / prev[0][1]:.2f}", f"{off[1] / prev[1][1]:.2f}") if prev else ("", "")
            print(f"{n:>8} {on[0]:>8.2f} {on[1]:>6.2f} {r_on:>7} {off[0]:>10.2f} {off[1]:>6.2f} {r_off:>7}", flush=True)
            prev = (on, off)
    if a.limit is not None and prev[0][1] > a.limit:
        sys.exit(f"bench_compile: {n} nodes took {prev[0][1]:.2f} s of CPU with the plan, over the limit of {a.limit} s")


if __name__ == "__main__":
    main()
