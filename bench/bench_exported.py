#!/usr/bin/env python3
"""dvm next to ONNX Runtime on models as PyTorch exports them.

    PYTHONPATH=build/python python3 bench/bench_exported.py [--quick] [--threads 1,2]
        [--rounds 3] [--budget 1.0] [--min-runs 5] [--only WORD,WORD] [--json FILE] [--plot FILE.png] [--no-rss]
        [--thread-time]

The models: BERT-base (batch 1 x seq 8/32/128/384 and 8 x 128), a GPT-2-style
decoder (6 layers, 128 tokens), a ResNet-18-style CNN (224x224 and
320x480), an MLP 1024-1024-1024-1024 (batch 1/64/1024) — exported here by
Debian's PyTorch (/usr/bin/python3, python3-torch 1.13: opset 14, dynamic
axes, LayerNorm and GELU decomposed) with the modules of
tests/exported/export_models.py — and PP-OCRv4 det (640x640), rec (48x320)
and silero-vad (512 samples) from tests/real/models (the wheels'
files). A model dvm cannot compile or run is skipped with the reason.

Both sides run in this process through the same interface:
dvm.InferenceSession (the `dvm` package: build/python, or installed into
build/venv by ./setup.sh) and onnxruntime.InferenceSession, each with
intra_op_num_threads set to the thread count, session.run(None, feeds) on
the same arrays. Per point and thread count, --rounds rounds alternate
which side goes first; each side's measurement is the median of as many
runs as fit in --budget seconds (at least 5) after 2 warm-ups, and the
table keeps each side's lowest median. Outputs are compared (largest
difference relative to the output's largest magnitude). Peak RSS is
measured in separate processes (one runtime each, the Python interpreter
and NumPy included), at the first thread count.

--thread-time: at 1 thread, each run is timed by the calling thread's CPU
time rather than the wall clock (both runtimes run a 1-thread session on
the caller): on a machine that other processes load, this leaves out the
time they hold the core (not the caches they disturb), so 1-thread A/B
comparisons stay usable; other thread counts keep wall time.

--min-runs (default 5) bounds the timed runs per measurement from below
for the large points; --rss-runs the runs in each RSS process.

--markdown JSON...: the tables of earlier --json runs, for docs/performance.md.

--quick: BERT-tiny and small shapes, one round, short budgets, no RSS: a
check that the script works, not a measurement. --plot writes latency
against sequence length for BERT (matplotlib, through /usr/bin/python3).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DATA = os.environ.get("DVM_BENCH_DATA", os.path.join(ROOT, "build-data", "bench"))  # exports, dvm's cache
REAL = os.path.join(ROOT, "tests", "real", "models")
TORCH_PYTHON = "/usr/bin/python3"  # Debian's, which has python3-torch and python3-matplotlib


# ---- export (run by /usr/bin/python3 with --export) ----

def export_models(outdir, quick):
    import torch
    from torch import nn
    sys.path.insert(0, os.path.join(ROOT, "tests", "exported"))
    import export_models as em

    class BasicBlock(nn.Module):  # torchvision's ResNet BasicBlock
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):  # ResNet-18's layout (torchvision is not packaged here)
        def __init__(self, width=64, blocks=(2, 2, 2, 2), classes=1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                      nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], width
            for i, n in enumerate(blocks):
                cout = width * 2 ** i
                for j in range(n):
                    layers.append(BasicBlock(cin, cout, 2 if j == 0 and i > 0 else 1))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    def mlp(width, depth):
        mods = []
        for i in range(depth):
            mods += [nn.Linear(width, width)] + ([nn.ReLU()] if i < depth - 1 else [])
        return nn.Sequential(*mods)

    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    size = "tiny" if quick else "base"
    s = em.SIZES[size]
    todo = {
        f"bert_{size}.onnx": lambda p: em.export(
            em.Bert(**s["bert"]),
            (torch.randint(0, 100, (2, 7)), torch.ones(2, 7, dtype=torch.long), torch.zeros(2, 7, dtype=torch.long)),
            p, ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state", "pooler_output"],
            {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
             "token_type_ids": {0: "batch", 1: "seq"}, "last_hidden_state": {0: "batch", 1: "seq"},
             "pooler_output": {0: "batch"}}),
        f"gpt2_{size}.onnx": lambda p: em.export(
            em.GPT2(**s["gpt2"]), (torch.randint(0, 100, (1, 7)),), p, ["input_ids"], ["logits"],
            {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}),
        f"resnet_{size}.onnx": lambda p: em.export(
            ResNet(width=16 if quick else 64), (torch.randn(1, 3, 64, 64),), p, ["images"], ["logits"],
            {"images": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}}),
        f"mlp_{size}.onnx": lambda p: em.export(
            mlp(128 if quick else 1024, 3), (torch.randn(2, 128 if quick else 1024),), p, ["x"], ["y"],
            {"x": {0: "batch"}, "y": {0: "batch"}}),
    }
    for name, fn in todo.items():
        path = os.path.join(outdir, name)
        if not os.path.exists(path):
            fn(path + ".tmp")
            os.replace(path + ".tmp", path)


# ---- the plot (run by /usr/bin/python3 with --plot-from) ----

def plot(results_json, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(results_json) as f:
        res = json.load(f)
    pts = [r for r in res["results"] if r["model"].startswith("BERT") and r["batch"] == 1 and "dvm_ms" in r]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for t in sorted({r["threads"] for r in pts}):
        rows = sorted((r for r in pts if r["threads"] == t), key=lambda r: r["seq"])
        seqs = [r["seq"] for r in rows]
        ax.plot(seqs, [r["dvm_ms"] for r in rows], "o-", label=f"dvm, {t} thread{'s' * (t > 1)}")
        ax.plot(seqs, [r["ort_ms"] for r in rows], "s--", label=f"ONNX Runtime, {t} thread{'s' * (t > 1)}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length (batch 1)")
    ax.set_ylabel("latency, ms (lowest median)")
    ax.set_title(f"{pts[0]['model'] if pts else 'BERT'}: dvm vs ONNX Runtime\n{res['cpu']}, {res['date']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def markdown(paths):
    """The results of one or more --json files as one Markdown table."""
    rows = []
    for p in paths:
        with open(p) as f:
            rows += json.load(f)["results"]
    print("| model | shape | threads | dvm ms | ORT ms | dvm / ORT | max diff | peak RSS dvm / ORT, MB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['model']} | {r['shape']} | | | | skipped: {r['skipped']} | | |")
            continue
        rss = f"{r['rss_dvm_mb']:.0f} / {r['rss_ort_mb']:.0f}" if r.get("rss_dvm_mb") and r.get("rss_ort_mb") else ""
        print(f"| {r['model']} | {r['shape']} | {r['threads']} | {r['dvm_ms']:.3f} | {r['ort_ms']:.3f} | "
              f"{r['ratio']:.2f} | {r['max_rel_diff']:.1e} | {rss} |")


# ---- the cases ----

def bert_feeds(vocab):
    def make(batch, seq):
        rng = np.random.default_rng(1)
        return {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64),
                "attention_mask": np.ones((batch, seq), np.int64),
                "token_type_ids": np.zeros((batch, seq), np.int64)}
    return make


def image(batch, h, w):
    return np.random.default_rng(2).standard_normal((batch, 3, h, w)).astype(np.float32)


def cases(quick):
    """(model label, shape label, onnx path, feeds, batch, seq)"""
    size = "tiny" if quick else "base"
    bert = bert_feeds(1000 if quick else 30522)
    label = "BERT-tiny" if quick else "BERT-base"
    seqs = [(1, 8), (1, 32)] if quick else [(1, 8), (1, 32), (1, 128), (1, 384), (8, 128)]
    for b, s in seqs:
        yield label, f"{b}x{s}", os.path.join(DATA, f"bert_{size}.onnx"), lambda b=b, s=s: bert(b, s), b, s
    gpt_ids = lambda s: {"input_ids": np.random.default_rng(3).integers(0, 1000, (1, s), dtype=np.int64)}  # noqa
    gs = 16 if quick else 128
    yield ("GPT-2-style (2 layers)" if quick else "GPT-2-style (6 layers)", f"1x{gs}",
           os.path.join(DATA, f"gpt2_{size}.onnx"), lambda: gpt_ids(gs), 1, gs)
    for h, w in [(64, 64)] if quick else [(224, 224), (320, 480)]:
        yield ("ResNet-style (width 16)" if quick else "ResNet-18-style CNN", f"1x3x{h}x{w}",
               os.path.join(DATA, f"resnet_{size}.onnx"), lambda h=h, w=w: {"images": image(1, h, w)}, 1, None)
    width = 128 if quick else 1024
    for b in [1, 64] if quick else [1, 64, 1024]:
        yield (f"MLP {width}x4 layers", f"batch {b}", os.path.join(DATA, f"mlp_{size}.onnx"),
               lambda b=b: {"x": np.random.default_rng(4).standard_normal((b, width)).astype(np.float32)}, b, None)
    if quick:
        return
    yield "PP-OCRv4 det", "1x3x640x640", os.path.join(REAL, "ch_PP-OCRv4_det_infer.onnx"), \
        lambda: {"x": image(1, 640, 640)}, 1, None
    yield "PP-OCRv4 rec", "1x3x48x320", os.path.join(REAL, "ch_PP-OCRv4_rec_infer.onnx"), \
        lambda: {"x": image(1, 48, 320)}, 1, None
    t = np.arange(512) / 16000.0
    yield "silero-vad (op18, if-less)", "512 samples", os.path.join(REAL, "silero_vad_op18_ifless.onnx"), \
        lambda: {"input": (0.3 * np.sin(2 * np.pi * 220 * t))[None].astype(np.float32),
                 "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}, 1, None


# ---- sessions and timing ----

def session(runtime, path, threads):
    if runtime == "dvm":
        import dvm
        so = dvm.SessionOptions()
        so.intra_op_num_threads = threads
        return dvm.InferenceSession(path, so)
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def median_ms(sess, feeds, budget, min_runs, clock=time.perf_counter):
    sess.run(None, feeds)
    sess.run(None, feeds)
    times, end = [], time.perf_counter() + budget
    while len(times) < min_runs or (time.perf_counter() < end and len(times) < 1000):
        t0 = clock()
        sess.run(None, feeds)
        times.append(clock() - t0)
    return statistics.median(times) * 1e3


def max_rel_diff(got, want):
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            return float("inf")
        if w.size:
            worst = max(worst, float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30)))
    return worst


def rss_child(runtime, path, feeds_npz, threads, iters):
    """Runs in its own process: only this runtime loaded; prints peak RSS in MB."""
    feeds = dict(np.load(feeds_npz))
    sess = session(runtime, path, threads)
    for _ in range(iters):
        sess.run(None, feeds)
    # VmHWM, not getrusage's ru_maxrss: that one survives exec and so still
    # holds the forking parent's size
    with open("/proc/self/status") as f:
        print(next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024.0)


def peak_rss(runtime, path, feeds, threads, iters):
    npz = os.path.join(DATA, "feeds.npz")
    np.savez(npz, **feeds)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", runtime, path, npz,
                        str(threads), str(iters)], capture_output=True, text=True, timeout=1200)
    if p.returncode != 0:
        return None
    return float(p.stdout.strip().splitlines()[-1])


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
        return f"{name}, {os.cpu_count()} vCPUs"
    except (OSError, StopIteration):
        return "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--min-runs", type=int, default=5, help="timed runs per measurement, at least")
    ap.add_argument("--rss-runs", type=int, default=3, help="runs in each peak-RSS process")
    ap.add_argument("--only", help="run only the points whose 'model shape' label contains one of these "
                    "comma-separated words")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="PNG of BERT latency against sequence length")
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--thread-time", action="store_true",
                    help="at 1 thread, time runs by the calling thread's CPU time (both runtimes run a "
                         "1-thread session on the caller), which leaves out the time other processes "
                         "hold the core on a loaded machine; other thread counts keep wall time")
    ap.add_argument("--export", help=argparse.SUPPRESS)
    ap.add_argument("--plot-from", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--rss-child", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--markdown", nargs="+", metavar="JSON", help="print --json results as a Markdown table and exit")
    a = ap.parse_args()
    if a.export:
        return export_models(a.export, a.quick)
    if a.plot_from:
        return plot(*a.plot_from)
    if a.markdown:
        return markdown(a.markdown)
    if a.rss_child:
        r, path, npz, threads, iters = a.rss_child
        return rss_child(r, path, npz, int(threads), int(iters))

    try:
        import dvm  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import dvm  # noqa: F401,F811
    import onnxruntime as ort
    os.environ.setdefault("DVM_CACHE_DIR", os.path.join(DATA, "dvm-cache"))
    threads = [int(t) for t in a.threads.split(",")]
    rounds, budget = (1, 0.2) if a.quick else (a.rounds, a.budget)
    print(f"exporting with {TORCH_PYTHON} (python3-torch) into {DATA} ...", flush=True)
    p = subprocess.run([TORCH_PYTHON, os.path.abspath(__file__), "--export", DATA] + ["--quick"] * a.quick,
                       capture_output=True, text=True)
    if p.returncode != 0:  # the exporter's tracer warnings are noise unless it failed
        sys.exit(f"export failed:\n{p.stderr}")
    info = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "onnxruntime": ort.__version__,
            "threads": threads, "rounds": rounds, "budget_s": budget, "results": []}
    print(f"{info['cpu']}; onnxruntime {ort.__version__}; {rounds} rounds, {budget} s per measurement\n")
    print(f"{'model':28} {'shape':14} {'thr':>3} {'dvm ms':>10} {'ORT ms':>10} {'dvm/ORT':>8} {'max diff':>9}"
          f" {'RSS dvm MB':>10} {'RSS ORT MB':>10}", flush=True)
    for model, shape, path, make, batch, seq in cases(a.quick):
        if a.only and not any(w in f"{model} {shape}" for w in a.only.split(",")):
            continue
        row = {"model": model, "shape": shape, "batch": batch, "seq": seq}
        if not os.path.exists(path):
            print(f"{model:28} {shape:14} skipped: {path} is missing (python3 tests/real/fetch_models.py)")
            continue
        feeds = make()
        try:
            sessions = {t: (session("dvm", path, t), session("ort", path, t)) for t in threads}
            want = sessions[threads[0]][1].run(None, feeds)
            got = sessions[threads[0]][0].run(None, feeds)
        except Exception as e:  # dvm cannot compile or run it yet: say why
            msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            print(f"{model:28} {shape:14} skipped: {msg}", flush=True)
            info["results"].append(dict(row, skipped=msg))
            continue
        diff = max_rel_diff(got, want)
        rss = (None, None)
        if not a.no_rss and not a.quick:
            rss = tuple(peak_rss(r, path, feeds, threads[0], a.rss_runs) for r in ("dvm", "ort"))
        for t in threads:
            dvm_s, ort_s = sessions[t]
            best = {"dvm": float("inf"), "ort": float("inf")}
            for k in range(rounds):
                for side in (("dvm", "ort") if k % 2 == 0 else ("ort", "dvm")):
                    clock = time.thread_time if a.thread_time and t == 1 else time.perf_counter
                    best[side] = min(best[side], median_ms(dvm_s if side == "dvm" else ort_s, feeds, budget,
                                                           a.min_runs, clock))
            r = dict(row, threads=t, dvm_ms=best["dvm"], ort_ms=best["ort"], ratio=best["dvm"] / best["ort"],
                     max_rel_diff=diff, rss_dvm_mb=rss[0] if t == threads[0] else None,
                     rss_ort_mb=rss[1] if t == threads[0] else None)
            info["results"].append(r)
            fmt = lambda v: f"{v:10.0f}" if v else f"{'':10}"  # noqa: E731
            print(f"{model:28} {shape:14} {t:3d} {r['dvm_ms']:10.3f} {r['ort_ms']:10.3f} {r['ratio']:8.2f}"
                  f" {diff:9.1e} {fmt(r['rss_dvm_mb'])} {fmt(r['rss_ort_mb'])}", flush=True)
            if a.json:  # after each point, so a long run that is stopped keeps what it measured
                with open(a.json, "w") as f:
                    json.dump(info, f, indent=1)
        del sessions
    if a.plot:
        tmp = a.json or os.path.join(DATA, "results.json")
        if not a.json:
            with open(tmp, "w") as f:
                json.dump(info, f)
        subprocess.run([TORCH_PYTHON, os.path.abspath(__file__), "--plot-from", tmp, a.plot], check=True)
        print(f"plot: {a.plot}")
    bad = [r for r in info["results"] if r.get("max_rel_diff", 0) > 1e-3]
    for r in bad:
        print(f"outputs differ: {r['model']} {r['shape']}: {r['max_rel_diff']:.2e} of the largest magnitude")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
