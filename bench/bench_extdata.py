#!/usr/bin/env python3
"""A model with its weights in an external data file, compiled and loaded:
compile time, .dvmb size, load time and peak RSS, per dvm binary and mode.

The model (made once in --dir): x [n, 2048] through --layers MatMuls of
2048x2048 weights with a Relu between, and a Gather from a [16384, 512]
table, saved by onnx.save as model.onnx + model.onnx.data (about 100 M
parameters, 400 MB, with the default 22 layers).

    python3 bench/bench_extdata.py --dvm build/tools/dvm [--dvm OTHER ...] [--embed]
                                   [--dir /tmp/dvm_extdata_bench] [--layers 22] [--runs 3]

For each binary (and with --embed, each binary again with --embed-data):
the median over --runs of `dvm compile` (wall, CPU, peak RSS) and of `dvm
run` of one row (load, verify, link, one invocation: wall, CPU, peak RSS), and the
.dvmb's size. On a shared machine the CPU seconds say more than the wall. The data file is read once first, so every figure is
from the page cache.
"""
import argparse
import os
import statistics
import subprocess
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make(folder, layers):
    path = os.path.join(folder, "model.onnx")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((2048, 2048), dtype=np.float32) * (1 / 45)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        out = "y" if i == layers - 1 else f"r{i}"
        nodes.append(helper.make_node("Relu", [f"m{i}"], [out]))
        prev = out
    inits.append(numpy_helper.from_array(rng.standard_normal((16384, 512), dtype=np.float32), "emb"))
    nodes.append(helper.make_node("Gather", ["emb", "ids"], ["e"]))
    g = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2048]),
                                           helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2048]),
                           helper.make_tensor_value_info("e", TensorProto.FLOAT, ["n", 512])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, path, save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    np.save(os.path.join(folder, "x.npy"), rng.standard_normal((1, 2048), dtype=np.float32))
    np.save(os.path.join(folder, "ids.npy"), np.array([7], np.int64))
    return path


def timed(cmd):
    """Wall seconds, CPU seconds and peak RSS (MiB) of one child."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dvm", action="append", required=True)
    ap.add_argument("--embed", action="store_true", help="also each binary with --embed-data")
    ap.add_argument("--dir", default="/tmp/dvm_extdata_bench")
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    model = make(a.dir, a.layers)
    data = os.path.join(a.dir, "model.onnx.data")
    with open(data, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    print(f"model: {a.layers} x 2048x2048 + 16384x512, {os.path.getsize(data) / 1e6:.0f} MB of external data")
    print("| dvm | mode | compile wall s | compile CPU s | compile peak RSS MiB | .dvmb MB | load+run wall s | load+run CPU s | load+run peak RSS MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for i, dvm in enumerate(a.dvm):
        for embed in ([False, True] if a.embed else [False]):
            out = os.path.join(a.dir, f"m{i}{'e' if embed else ''}.dvmb")
            comp = [timed([dvm, "compile", model, "-o", out, "--dim", "n=1..4096"] + (["--embed-data"] if embed else []))
                    for _ in range(a.runs)]
            run = [timed([dvm, "run", out, "--input", "x=" + os.path.join(a.dir, "x.npy"),
                          "--input", "ids=" + os.path.join(a.dir, "ids.npy")]) for _ in range(a.runs)]
            med = lambda rows, k: statistics.median(r[k] for r in rows)
            print(f"| {dvm} | {'embed' if embed else 'default'} | {med(comp, 0):.2f} | {med(comp, 1):.2f} | "
                  f"{med(comp, 2):.0f} | {os.path.getsize(out) / 1e6:.3f} | {med(run, 0):.2f} | {med(run, 1):.2f} | "
                  f"{med(run, 2):.0f} |")


if __name__ == "__main__":
    main()
