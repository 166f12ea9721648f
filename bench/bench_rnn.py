#!/usr/bin/env python3
"""An LSTM as one kernel call per sequence against the same LSTM as a
bytecode loop over per-step kernels, in dvm, with ONNX Runtime beside.

Two ONNX models of one forward LSTM (input 64, hidden 128, batch --batch,
seq --seq, f32 weights as initializers):
  lstm  one LSTM node: dvm's `lstm` kernel (ops/cpu/rnn.c), X projected by
        one sgemm for all steps, then per step one sgemm and the gates
  loop  a Loop over the steps whose body is the cell in ONNX ops (Gather,
        MatMul, Add, Split, Sigmoid, Tanh, Mul): what a bytecode loop over
        kernels costs in dvm (a VM dispatch, shape work and allocations per
        step and op; the body's elementwise ops are not fused)
Both compiled by `dvm compile`, run from Python in this process, one kernel
thread (--threads); the table has the lowest of --rounds median wall
times and the lowest of --rounds mean CPU times per call.

    PYTHONPATH=build/python python3 bench/bench_rnn.py [--seq 100] [--batch 1]
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
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DVM = os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm"))
I, H = 64, 128


def weights():
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((1, 4 * H, I)) * 0.1).astype(np.float32)
    r = (rng.standard_normal((1, 4 * H, H)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((1, 8 * H)) * 0.1).astype(np.float32)
    return w, r, b


def lstm_model(w, r, b):
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], hidden_size=H)
    g = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["S", "B", I])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(a, n) for a, n in ((w, "W"), (r, "R"), (b, "B"))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


def loop_model(w, r, b):
    # ONNX gate order i, o, f, c; h, c carried, h scanned
    wt, rt = w[0].T.copy(), r[0].T.copy()
    bias = (b[0, :4 * H] + b[0, 4 * H:]).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Gather", ["X", "it"], ["xt"], axis=0),
         helper.make_node("MatMul", ["xt", "Wt"], ["xw"]),
         helper.make_node("MatMul", ["h", "Rt"], ["hr"]),
         helper.make_node("Add", ["xw", "hr"], ["s"]),
         helper.make_node("Add", ["s", "bias"], ["g"]),
         helper.make_node("Split", ["g"], ["gi", "go", "gf", "gc"], axis=1, num_outputs=4),
         helper.make_node("Sigmoid", ["gi"], ["i"]),
         helper.make_node("Sigmoid", ["go"], ["o"]),
         helper.make_node("Sigmoid", ["gf"], ["f"]),
         helper.make_node("Tanh", ["gc"], ["cc"]),
         helper.make_node("Mul", ["f", "c"], ["fc"]),
         helper.make_node("Mul", ["i", "cc"], ["ic"]),
         helper.make_node("Add", ["fc", "ic"], ["c2"]),
         helper.make_node("Tanh", ["c2"], ["tc"]),
         helper.make_node("Mul", ["o", "tc"], ["h2"]),
         helper.make_node("Identity", ["cond"], ["cond2"]),
         helper.make_node("Identity", ["h2"], ["y"])],
        "cell",
        [helper.make_tensor_value_info("it", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("cond2", TensorProto.BOOL), ("h2", TensorProto.FLOAT), ("c2", TensorProto.FLOAT), ("y", TensorProto.FLOAT))])
    nodes = [helper.make_node("Shape", ["X"], ["shx"]),
             helper.make_node("Gather", ["shx", "zero"], ["trips"], axis=0),
             helper.make_node("Gather", ["shx", "one"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch1", "hsz"], ["hshape"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "zero1"], ["batch1"]),
             helper.make_node("ConstantOfShape", ["hshape"], ["h0"]),
             helper.make_node("Loop", ["trips", "", "h0", "h0"], ["hN", "cN", "Y"], body=body)]
    nodes = [nodes[0], nodes[1], nodes[2], nodes[4], nodes[3], nodes[5], nodes[6]]
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((wt, "Wt"), (rt, "Rt"), (bias, "bias"), (np.array(0, np.int64), "zero"), (np.array(1, np.int64), "one"),
              (np.array([0], np.int64), "zero1"), (np.array([H], np.int64), "hsz"))]
    g = helper.make_graph(nodes, "loop", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["S", "B", I])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def timed(call, reps):
    """Median wall time per call and mean CPU time of this process per
    call, microseconds (on a loaded shared machine the CPU time is the one
    to compare: wall time there is mostly waiting for a core)."""
    call()
    t = []
    c0 = time.process_time()
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        t.append(time.perf_counter() - t0)
    return statistics.median(t) * 1e6, (time.process_time() - c0) / reps * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import dvm
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = args.threads
    so.log_severity_level = 3
    x = np.random.default_rng(1).standard_normal((args.seq, args.batch, I)).astype(np.float32)
    w, r, b = weights()
    res, outs = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in (("lstm", lstm_model(w, r, b)), ("loop", loop_model(w, r, b))):
            src, mod = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".dvmb")
            onnx.save(m, src)
            subprocess.run([DVM, "compile", src, "-o", mod], check=True, capture_output=True)
            dm = dvm.load(mod)
            sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
            outs[name] = np.asarray(dm.run({"X": x}, threads=args.threads)["Y"]).reshape(args.seq, args.batch, H)
            d, o = [], []
            for _ in range(args.rounds):
                d.append(timed(lambda: dm.run({"X": x}, threads=args.threads), args.reps))
                o.append(timed(lambda: sess.run(None, {"X": x}), args.reps))
            res[name] = {"dvm_us": min(t for t, _ in d), "ort_us": min(t for t, _ in o),
                         "dvm_cpu_us": min(c for _, c in d), "ort_cpu_us": min(c for _, c in o)}
    err = float(np.abs(outs["lstm"] - outs["loop"]).max())
    print(f"seq {args.seq} batch {args.batch} threads {args.threads}, input {I} hidden {H}; "
          f"max |lstm - loop| = {err:.1e}")
    print(f"{'form':6} {'dvm us':>9} {'ORT us':>9} {'dvm cpu':>9} {'ORT cpu':>9}")
    for k, v in res.items():
        print(f"{k:6} {v['dvm_us']:9.1f} {v['ort_us']:9.1f} {v['dvm_cpu_us']:9.1f} {v['ort_cpu_us']:9.1f}")
    print(json.dumps({"bench": "rnn", "seq": args.seq, "batch": args.batch, "threads": args.threads,
                      "max_abs_diff": err, **{k + "_" + s: v[s] for k, v in res.items() for s in v}}))


if __name__ == "__main__":
    sys.exit(main())
