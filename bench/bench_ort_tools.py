"""The exports after ONNX Runtime's tools (tests/exported/test_ort_tools.py
makes them), dvm next to ONNX Runtime, one thread, batch 1 x seq 128:
CPU time (user + sys) per inference, since on a shared machine wall clock
is mostly waiting. ORT: time.process_time over the runs in this process;
dvm: the CPU time of `dvm bench` with N + 1 runs minus that with 1 run.

usage: bench_ort_tools.py [--dvm PATH] [--runs N] [--quick]"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests", "exported"), os.path.join(HERE, "..", "tests", "lib")]
from dvmtest.corpus import MODELS  # noqa: E402
from dvmtest.paths import DVM  # noqa: E402
from test_ort_tools import transform  # noqa: E402


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dvm", default=DVM)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="one model, 2 runs: the suite's check that it runs")
    a = ap.parse_args()
    variants = ["bert_tiny:quantized"] if a.quick else [
        f"{b}:{h}" for b in ("bert_tiny", "gpt2_tiny")
        for h in ("original", "quantized", "optimized", "optimized_quantized", "quantized+ort")]
    runs = 2 if a.quick else a.runs
    print("| model | ORT ms | dvm ms | dvm / ORT |\n| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for v in variants:
            base, how = v.split(":")
            path = MODELS[base][0] if how == "original" else transform(base, how, tmp)
            feeds = {"input_ids": np.random.default_rng(0).integers(0, 1000, (1, 128))}
            if base.startswith("bert"):
                feeds["attention_mask"] = np.ones((1, 128), np.int64)
                feeds["token_type_ids"] = np.zeros((1, 128), np.int64)
            so = ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            for _ in range(3):
                sess.run(None, feeds)
            t0 = time.process_time()
            for _ in range(runs):
                sess.run(None, feeds)
            ort_ms = (time.process_time() - t0) / runs * 1e3
            dvmb = os.path.join(tmp, "m.dvmb")
            subprocess.run([a.dvm, "compile", path, "-o", dvmb], check=True, capture_output=True)
            args = [a.dvm, "bench", dvmb, "--threads", "1", "--warmup", "2"]
            for k in feeds:
                args += ["--shape", f"{k}=1x128", "--range", f"{k}=0..{999 if k == 'input_ids' else 1}"]
            c0 = child_cpu()
            subprocess.run(args + ["--iters", "1"], check=True, capture_output=True)
            c1 = child_cpu()
            subprocess.run(args + ["--iters", str(runs + 1)], check=True, capture_output=True)
            dvm_ms = ((child_cpu() - c1) - (c1 - c0)) / runs * 1e3
            print(f"| {v} | {ort_ms:.3f} | {dvm_ms:.3f} | {dvm_ms / ort_ms:.1f} |")


if __name__ == "__main__":
    main()
