"""The ONNX backend node tests, run by dvm's own runner: each model.onnx is
compiled with `dvm compile`, run with `dvm run` on its test inputs, and its
outputs compared with the expected ones (floats rtol 1e-3 atol 1e-4, NaN
equal to NaN; integers and bools exactly; shapes and dtypes exactly).

Each test is reported as pass, fail (a wrong answer, a crash, or a run-time
error after a successful compile) or unsupported (dvm refused the model at
compile time with an explicit unsupported-feature error). The exit status is
non-zero if any test fails; unsupported ones don't fail the run.

usage: run_node_tests.py [--dvm PATH] [--data DIR] [--jobs N] [--list] [NAME_FILTER...]
DIR defaults to ../shared/onnx-node/tests next to the repository, or a
suite generated with `python -m onnx.backend.test.cmd_tools generate-data`.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))


def compare(got, want):
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        ok = np.isclose(got, want, rtol=1e-3, atol=1e-4, equal_nan=True)
        if not ok.all():
            i = np.argwhere(~ok)[0]
            return f"element {tuple(i)} is {got[tuple(i)]}, expected {want[tuple(i)]}"
        return None
    if not np.array_equal(got, want):
        i = np.argwhere(got != want)[0]
        return f"element {tuple(i)} is {got[tuple(i)]}, expected {want[tuple(i)]}"
    return None


def run_one(dvm, test_dir):
    name = os.path.basename(test_dir)
    data = os.path.join(test_dir, "test_data_set_0")
    with tempfile.TemporaryDirectory() as tmp:
        mod = os.path.join(tmp, "m.dvmb")
        r = subprocess.run([dvm, "compile", os.path.join(test_dir, "model.onnx"), "-o", mod],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            # an explicit refusal is "unsupported"; anything else (a crash) fails
            kind = "unsupported" if r.returncode == 2 else "fail"
            return name, kind, msg
        # inputs as the ONNX TensorProto .pb files (what dvm run reads besides .npy)
        inputs = sorted(f for f in os.listdir(data) if f.startswith("input_") and f.endswith(".pb"))
        outputs = sorted(f for f in os.listdir(data) if f.startswith("output_") and f.endswith(".npy"))
        inputs.sort(key=lambda f: int(f[6:-3]))
        outputs.sort(key=lambda f: int(f[7:-4]))
        cmd = [dvm, "run", mod]
        for f in inputs:
            cmd += ["--input", os.path.join(data, f)]
        for i in range(len(outputs)):
            cmd += ["--output", os.path.join(tmp, f"out_{i}.npy")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            return name, "fail", msg
        for i, f in enumerate(outputs):
            want = np.load(os.path.join(data, f))
            got = np.load(os.path.join(tmp, f"out_{i}.npy"))
            why = compare(got, want)
            if why:
                return name, "fail", f"output {i}: {why}"
        return name, "pass", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dvm", default=os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm")))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/onnx-node/tests"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", help="write per-test results here")
    ap.add_argument("--verbose", action="store_true", help="print every test, not only failures")
    ap.add_argument("filters", nargs="*")
    args = ap.parse_args()
    if not os.path.isdir(args.data):
        print(f"run_node_tests: no test data at {args.data}: skipped")
        return 77
    tests = sorted(d for d in os.listdir(args.data) if os.path.isfile(os.path.join(args.data, d, "model.onnx")))
    if args.filters:
        tests = [t for t in tests if any(f in t for f in args.filters)]
    subset = {}
    index = os.path.join(args.data, "index.tsv")
    if os.path.exists(index):
        with open(index) as f:
            head = f.readline().rstrip("\n").split("\t")
            for line in f:
                row = dict(zip(head, line.rstrip("\n").split("\t")))
                subset[row["test"]] = row.get("only_f32_i64_bool") == "1"
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        for res in ex.map(lambda t: run_one(args.dvm, os.path.join(args.data, t)), tests):
            results.append(res)
            name, kind, msg = res
            if kind == "fail" or args.verbose:
                print(f"{kind:12s} {name}  {msg}")
    counts = {k: sum(1 for r in results if r[1] == k) for k in ("pass", "fail", "unsupported")}
    core = [r for r in results if subset.get(r[0], True)]
    core_pass = sum(1 for r in core if r[1] == "pass")
    print(f"onnx node tests: {counts['pass']} pass, {counts['fail']} fail, {counts['unsupported']} unsupported "
          f"of {len(results)}; float32/int64/bool tests: {core_pass} of {len(core)} pass "
          f"({100.0 * core_pass / max(1, len(core)):.1f}%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"test": n, "result": k, "message": m} for n, k, m in results], f, indent=1)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
