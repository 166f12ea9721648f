"""A graph rewrite's effect on a model, measured A/B in one process: the
model compiled with every pass and with the named passes disabled
(`dvm compile --disable`), both loaded, and runs interleaved (on, off, on,
off, ...) so that a busy machine's load falls on both alike. Prints each
variant's median and minimum and the median of the per-pair ratios
on / off (below 1: the pass helps).

    PYTHONPATH=build/python python3 bench/bench_passes.py --disable epilogue \\
        [--model bert_base|gpt2_base|mlp_base] [--seq 8,128] [--threads 1] [--pairs 15]

The models are bench_exported.py's PyTorch exports (build-data/bench)."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import dvm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
DVM = os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm"))


def feeds(model, seq):
    rng = np.random.default_rng(3)
    if model.startswith("mlp"):  # --seq is the batch
        return {"x": rng.standard_normal((seq, 1024)).astype(np.float32)}
    if model.startswith("bert"):
        return {"input_ids": rng.integers(0, 30522, (1, seq), dtype=np.int64),
                "attention_mask": np.ones((1, seq), np.int64), "token_type_ids": np.zeros((1, seq), np.int64)}
    return {"input_ids": rng.integers(0, 1000, (1, seq), dtype=np.int64)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--disable", action="append", required=True, help="a pass to switch off in the B build")
    ap.add_argument("--model", action="append", help="bert_base, gpt2_base (default both), mlp_base (--seq: batch)")
    ap.add_argument("--seq", default="8,128")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--data", default=os.path.join(ROOT, "build-data/bench"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    for model in a.model or ["bert_base", "gpt2_base"]:
        onnx_path = os.path.join(a.data, model + ".onnx")
        mods = {}
        for v, extra in (("on", []), ("off", sum((["--disable", d] for d in a.disable), []))):
            out = os.path.join(tmp, f"{model}_{v}.dvmb")
            subprocess.run([DVM, "compile", onnx_path, "-o", out, *extra], check=True)
            mods[v] = dvm.Module(out)
        for seq in [int(s) for s in a.seq.split(",")]:
            f = feeds(model, seq)
            outs = {v: m.run(f, threads=a.threads) for v, m in mods.items()}
            diff = max(float(np.max(np.abs(np.asarray(outs["on"][k]) - np.asarray(outs["off"][k]))))
                       for k in outs["on"])
            times = {"on": [], "off": []}
            for i in range(a.pairs):
                for v in (("on", "off") if i % 2 == 0 else ("off", "on")):
                    t0 = time.perf_counter()
                    mods[v].run(f, threads=a.threads)
                    times[v].append((time.perf_counter() - t0) * 1e3)
            ratios = [x / y for x, y in zip(times["on"], times["off"])]
            shape = f"batch {seq}" if model.startswith("mlp") else f"1x{seq}"
            print(f"{model} {shape} threads {a.threads}: on median {statistics.median(times['on']):.2f} ms "
                  f"(min {min(times['on']):.2f}), off ({','.join(a.disable)}) median "
                  f"{statistics.median(times['off']):.2f} ms (min {min(times['off']):.2f}); "
                  f"on/off: median of pair ratios {statistics.median(ratios):.3f}, of medians "
                  f"{statistics.median(times['on']) / statistics.median(times['off']):.3f}, of minima "
                  f"{min(times['on']) / min(times['off']):.3f}; max |on - off| {diff:.2e}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
