#!/usr/bin/env python3
"""Conv latency, dvm next to ONNX Runtime, on ResNet-style shapes.

For each shape and thread count: the single `conv` call as a .dvms program
(tests/ops/dvmop.program), assembled with `dvm asm` and timed with `dvm
bench` (random X, W and B); and a single-node ONNX Conv model timed in this
process with ONNX Runtime (intra_op_num_threads the same, W and B as
initializers, so ONNX Runtime may prepack them; dvm gets them as module
constants, so conv keeps W in oneDNN's layout after its first call). Both
get the same warm-up and iteration counts; the table gives medians, p10s and
the ratio dvm / ORT of each (below 1: dvm is faster).

    python3 bench/bench_conv.py [--dvm build/tools/dvm] [--iters 50] [--threads 1 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "tests/ops"), os.path.join(ROOT, "tests/lib")]
from dvmop import Shape, program  # noqa: E402

# (name, X, W, stride, pad)
SHAPES = [
    ("3x3 64->64 56x56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("7x7/2 3->64 224x224", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    ("1x1 256->1024 14x14", (1, 256, 14, 14), (1024, 256, 1, 1), 1, 0),
    ("3x3 64->64 56x56 N=8", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("3x3 512->512 7x7", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1),  # W (9 MB) outweighs X
]


def dvm_time(dvm, tmp, xs, ws, stride, pad, threads, iters, warmup):
    rng = np.random.default_rng(0)
    x = np.zeros(xs, np.float32)
    w, b = rng.standard_normal(ws).astype(np.float32), rng.standard_normal(ws[0]).astype(np.float32)
    src, mod = os.path.join(tmp, "conv.dvms"), os.path.join(tmp, "conv.dvmb")
    with open(src, "w") as f:
        f.write(program("conv", [x, w, b], [Shape((stride,) * 2), Shape((pad,) * 4), Shape((1, 1)), 1],
                        const_from=1))
    subprocess.run([dvm, "asm", src, "-o", mod], check=True)
    r = subprocess.run([dvm, "bench", mod, "--threads", str(threads), "--iters", str(iters),
                        "--warmup", str(warmup)], check=True, capture_output=True, text=True)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1]
    j = json.loads(line)
    return j["median_ms"], j["p10_ms"]


def ort_time(xs, ws, stride, pad, threads, iters, warmup):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[stride] * 2, pads=[pad] * 4)
    g = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(rng.standard_normal(ws).astype(np.float32), "w"),
                     numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = rng.standard_normal(xs).astype(np.float32)
    for _ in range(warmup):
        sess.run(None, {"x": x})
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, {"x": x})
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), float(np.percentile(times, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dvm", default=os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm")))
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    print(f"{'shape':<24}{'thr':>4}{'dvm med':>10}{'ORT med':>10}{'ratio':>7}"
          f"{'dvm p10':>10}{'ORT p10':>10}{'ratio':>7}   (ms)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, xs, ws, stride, pad in SHAPES:
            for t in args.threads:
                dm, dp = dvm_time(args.dvm, tmp, xs, ws, stride, pad, t, args.iters, args.warmup)
                om, op = ort_time(xs, ws, stride, pad, t, args.iters, args.warmup)
                print(f"{name:<24}{t:>4}{dm:>10.3f}{om:>10.3f}{dm / om:>7.2f}{dp:>10.3f}{op:>10.3f}{dp / op:>7.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
