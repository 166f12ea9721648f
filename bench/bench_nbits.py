#!/usr/bin/env python3
"""MatMulNBits latency: dvm next to ONNX Runtime at LLM shapes.

One com.microsoft MatMulNBits node per case (random 4-bit codes, f32
scales, u8 zero points, all initializers as in a model from ONNX Runtime
GenAI's builder), compiled with `dvm compile` and timed with `dvm bench`;
the same model timed in ONNX Runtime in-process (run_with_iobinding, the
same thread count, iterations and warm-up: bench_ops.ort_time). The table
shows the lowest median of --rounds rounds that alternate the two sides.
For M = 1 it also prints each side's weight bandwidth: the bytes of B,
scales and zero points over the median (each is read once per call).
--dvm-before times a second dvm binary in the same rounds (an A/B of a
change, the column "before"). --no-zp leaves the zero points out (the
builder's symmetric models: each code less 8). --cpu-time measures, on one thread, CPU time per call instead of wall time
(for a shared machine, where other processes' load swamps the medians):
dvm's as the CPU time of a `dvm bench` of N + 1 calls less that of one of 1
call, ONNX Runtime's as the process's CPU time over N calls.

    python3 bench/bench_nbits.py [--dvm build/tools/dvm] [--threads 1,2] [--rows 1,128]
                                 [--kn 896x896,896x4864,4864x896,2048x2048,2048x8192]
                                 [--bits 4] [--block 32] [--level 4] [--rounds 3] [--budget 0.5]
                                 [--cpu-time] [--dvm-before OLD_DVM] [--no-zp]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from bench_ops import iterations, ort_time  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")
KN = "896x896,896x4864,4864x896,2048x2048,2048x8192"


def model(m, k, n, bits, block, level, zp=True):
    """The node and its weights' bytes (B, scales, zero points unless not zp)."""
    rng = np.random.default_rng(k * n)
    kb = -(-k // block)
    inits = [numpy_helper.from_array(rng.integers(0, 256, (n, kb, block * bits // 8), dtype=np.uint8), "B"),
             numpy_helper.from_array(rng.uniform(0.001, 0.01, n * kb).astype(np.float32), "scales"),
             numpy_helper.from_array(rng.integers(0, 256, (n, -(-kb * bits // 8)), dtype=np.uint8), "zp")]
    inits = inits if zp else inits[:2]
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp"][:len(inits) + 1], ["Y"], domain="com.microsoft", K=k, N=n,
                            bits=bits, block_size=block, accuracy_level=level)
    g = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    mod = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return mod, sum(len(t.raw_data) for t in inits)


def dvm_time(dvm, path, m, k, threads, iters, warmup):
    r = subprocess.run([dvm, "bench", path, "--shape", f"A={m}x{k}", "--threads", str(threads), "--iters",
                        str(iters), "--warmup", str(warmup)], check=True, capture_output=True, text=True)
    return json.loads([line for line in r.stdout.splitlines() if line.startswith("{")][-1])["median_ms"]


def dvm_cpu(dvm, path, m, k, iters):
    def run(n):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([dvm, "bench", path, "--shape", f"A={m}x{k}", "--threads", "1", "--iters", str(n),
                        "--warmup", "1"], check=True, capture_output=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return (run(iters + 1) - run(1)) / iters * 1e3


def ort_cpu(sess, binding, iters):
    sess.run_with_iobinding(binding)
    t = time.process_time()
    for _ in range(iters):
        sess.run_with_iobinding(binding)
    return (time.process_time() - t) / iters * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dvm", default=os.path.join(ROOT, "build", "tools", "dvm"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rows", default="1,128", help="M values")
    ap.add_argument("--kn", default=KN, help="K x N values")
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--level", type=int, default=4, help="accuracy_level (4: A in int8)")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="measurements per side; the best counts")
    ap.add_argument("--cpu-time", action="store_true", help="CPU time per call on one thread")
    ap.add_argument("--dvm-before", help="a second dvm binary timed in the same rounds")
    ap.add_argument("--no-zp", action="store_true", help="no zero points input")
    args = ap.parse_args()
    if args.cpu_time:
        args.threads = "1"
    print(f"bits {args.bits}, block_size {args.block}, accuracy_level {args.level}"
          + (", CPU ms per call" if args.cpu_time else ""))
    print(f"{'M x K x N':20} {'thr':>3} {'dvm ms':>9} {'ort ms':>9} {'dvm/ort':>8} {'GB/s dvm':>9} {'ort':>6}"
          + (f" {'before ms':>9}" if args.dvm_before else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for m in (int(v) for v in args.rows.split(",")):
            for k, n in (tuple(int(v) for v in s.split("x")) for s in args.kn.split(",")):
                mod, wbytes = model(m, k, n, args.bits, args.block, args.level, not args.no_zp)
                path, dvmb = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m.dvmb")
                with open(path, "wb") as f:
                    f.write(mod.SerializeToString())
                subprocess.run([args.dvm, "compile", path, "-o", dvmb], check=True, capture_output=True)
                a = np.random.default_rng(0).standard_normal((m, k)).astype(np.float32)
                for threads in (int(t) for t in args.threads.split(",")):
                    so = ort.SessionOptions()
                    so.intra_op_num_threads = threads
                    so.inter_op_num_threads = 1
                    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                    binding = sess.io_binding()
                    binding.bind_cpu_input("A", a)
                    binding.bind_output("Y")
                    iters, warmup = iterations(sess, binding, args.budget)
                    t_ort = t_dvm = t_before = float("inf")
                    for _ in range(args.rounds):
                        if args.cpu_time:
                            t_ort = min(t_ort, ort_cpu(sess, binding, iters))
                            t_dvm = min(t_dvm, dvm_cpu(args.dvm, dvmb, m, k, iters))
                            if args.dvm_before:
                                t_before = min(t_before, dvm_cpu(args.dvm_before, dvmb, m, k, iters))
                        else:
                            t_ort = min(t_ort, ort_time(sess, binding, iters, warmup))
                            t_dvm = min(t_dvm, dvm_time(args.dvm, dvmb, m, k, threads, iters, warmup))
                            if args.dvm_before:
                                t_before = min(t_before, dvm_time(args.dvm_before, dvmb, m, k, threads, iters, warmup))
                    row = f"{m}x{k}x{n}".ljust(20) + f" {threads:>3} {t_dvm:9.4f} {t_ort:9.4f} {t_dvm / t_ort:8.2f}"
                    if m == 1:
                        row += f" {wbytes / t_dvm * 1e-6:9.1f} {wbytes / t_ort * 1e-6:6.1f}"
                    elif args.dvm_before:
                        row += " " * 17
                    if args.dvm_before:
                        row += f" {t_before:9.4f}"
                    print(row, flush=True)


if __name__ == "__main__":
    main()
