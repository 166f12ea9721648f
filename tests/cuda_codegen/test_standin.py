"""The fixture models compiled with --target cpu,cuda and run with
`dvm run --device cuda` on the stand-in driver (tests/cuda/fake_cuda.c),
which runs every generated kernel on the host with the emulation of
shim.h: the results must equal the CPU run's and ONNX Runtime's within
1e-4 relative, at four shapes per model, with the duplicated-tail variants and again with the
bounds-checked baseline (DVM_CUDA_BASELINE=1). Across the runs every
variant dvm_v0..dvm_v{T-1} and the baseline must have run. Host syncs per
invocation are counted and checked.
usage: test_standin.py DVM MODELS_DIR FAKE_CUDA_LIB
Skips (77) without NVRTC (no cuda target) or without g++."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

dvm, models, fake = sys.argv[1:4]
TILE = 4
rng = np.random.default_rng(17)

# four shapes per model: the dynamic dims take values of every residue
# mod 4 (bert's seq and batch * seq, resnet's spatial extents, control's n)
def shapes(model):
    if model == "mlp":
        return [{"x": rng.standard_normal((b, 16), dtype=np.float32)} for b in (1, 2, 3, 7)]
    if model == "bert":
        out = []
        for b, s in ((1, 1), (2, 7), (1, 14), (3, 5)):
            mask = (rng.random((b, s)) < 0.8).astype(np.int64)
            mask[:, 0] = 1
            out.append({"ids": rng.integers(0, 100, (b, s), dtype=np.int64), "mask": mask})
        return out
    if model == "resnet":
        return [{"image": rng.standard_normal(d, dtype=np.float32)}
                for d in ((1, 3, 17, 19), (2, 3, 8, 8), (1, 3, 13, 6), (1, 3, 22, 21))]
    return [{"x": rng.standard_normal((n,), dtype=np.float32)} for n in (1, 5, 6, 11)]

# host waits per invocation (docs/cuda.md, Measured): one, for the
# result, where every op runs on the device; resnet's Conv and pooling
# have no CUDA kernel and read their inputs on the host; control's
# whole-tensor ReduceSum runs there, and its If and Loop read their
# conditions there
HOST_SYNCS = {"mlp": 1, "bert": 1, "resnet": 8, "control": 6}

tmp = tempfile.mkdtemp()
env = dict(os.environ, DVM_CUDA_DRIVER=fake, DVM_CUBLAS=fake, FAKE_CUDA_TRACE=os.path.join(tmp, "trace"))
env.setdefault("FAKE_CUDA_CACHE", os.path.join(tmp, "cache"))
failures = []


def relative_error(got, want):
    err = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-2)
    return float(np.nanmax(err)) if err.size else 0.0


def run(args, extra_env=None):
    return subprocess.run([dvm] + args, env=dict(env, **(extra_env or {})), capture_output=True, text=True)


def skip(why):
    print("SKIP:", why)
    shutil.rmtree(tmp)
    sys.exit(77)


if shutil.which("g++") is None:
    skip("no g++ to compile the generated CUDA C for the host")
for model in ("mlp", "bert", "resnet", "control"):
    dvmb = os.path.join(tmp, model + ".dvmb")
    c = run(["compile", os.path.join(models, model + ".onnx"), "-o", dvmb, "--target", "cpu,cuda"])
    if c.returncode:
        if "NVRTC is not available" in c.stderr:
            skip(c.stderr.strip())
        failures.append(f"{model}: compile failed: {c.stderr.strip()}")
        continue
    session = ort.InferenceSession(os.path.join(models, model + ".onnx"), providers=["CPUExecutionProvider"])
    for k, inputs in enumerate(shapes(model)):
        args = ["run", dvmb]
        for name, value in inputs.items():
            path = os.path.join(tmp, f"{model}.{k}.{name}.npy")
            np.save(path, value)
            args += ["--input", f"{name}={path}"]
        what = f"{model} " + " ".join(f"{n}{list(v.shape)}" for n, v in inputs.items())
        cpu_out = os.path.join(tmp, "cpu.npy")
        c = run(args + ["--device", "cpu", "--output", cpu_out])
        if c.returncode:
            failures.append(f"{what}: the CPU run failed: {c.stderr.strip()}")
            continue
        ref = np.load(cpu_out)
        onnx = session.run(None, inputs)[0]
        for mode, extra in (("variants", {}), ("baseline", {"DVM_CUDA_BASELINE": "1"})):
            out = os.path.join(tmp, "cuda.npy")
            c = run(args + ["--device", "cuda", "--stats", "--output", out], extra)
            if c.returncode:
                failures.append(f"{what} on the stand-in ({mode}): {c.stderr.strip()}")
                continue
            got = np.load(out)
            syncs = re.search(r"host_syncs=(\d+)", c.stdout)
            worst = relative_error(got, ref)
            worst_ort = relative_error(got, onnx) if got.shape == onnx.shape else float("inf")
            same_nan = np.array_equal(np.isnan(got), np.isnan(ref))
            print(f"{what} ({mode}): max relative error {worst:.2e} to the CPU, {worst_ort:.2e} to ONNX Runtime,"
                  f" host_syncs={syncs and syncs[1]}")
            if got.shape != ref.shape or not same_nan or not worst <= 1e-4:
                failures.append(f"{what} ({mode}): differs from the CPU by {worst:.2e} (shape {got.shape})")
            if not worst_ort <= 1e-4:
                failures.append(f"{what} ({mode}): differs from ONNX Runtime by {worst_ort:.2e}")
            if not syncs or int(syncs[1]) != HOST_SYNCS[model]:
                failures.append(f"{what} ({mode}): {syncs and syncs[1]} host syncs, expected {HOST_SYNCS[model]}")

entries = set()
if os.path.exists(env["FAKE_CUDA_TRACE"]):
    entries = {line.split()[0] for line in open(env["FAKE_CUDA_TRACE"])}
want = {f"dvm_v{r}" for r in range(TILE)} | {"dvm_b"}
print("entries run:", " ".join(sorted(entries)))
if not want <= entries:
    failures.append(f"never ran: {' '.join(sorted(want - entries))}")
shutil.rmtree(tmp)
for f in failures:
    print("FAIL:", f)
print(f"stand-in model runs: {len(failures)} failed")
sys.exit(1 if failures else 0)
